"""Burst statistics of a trace: busiest windows and same-prefix fan-out.

Definitions (used by ``experiments.audit`` and docs/workloads.md):

- **Busiest w seconds**: the most arrivals in any half-open interval
  ``[t, t + w)``, sliding over the trace (the interval may start anywhere; the
  maximum is always reached at an arrival). Times are compared in whole
  nanoseconds, so two arrivals exactly ``w`` apart never share a window.
- **Largest same-prefix fan-out** at ``min_tokens`` tokens within ``window_s``:
  with ``min_blocks`` the fewest whole blocks holding ``min_tokens`` tokens,
  among requests whose prompts reach ``min_tokens`` tokens (a partial last block
  counts for the tokens it holds), group them by their first ``min_blocks``
  blocks (one chained block id names that prefix); the most requests of one
  group arriving within ``[t, t + window_s)``. It is reported at ``window_s``
  and at each of ``FANOUT_WINDOWS_S`` (1 s, 10 s, 60 s, and the whole trace:
  all the requests of one group, whenever they arrive). A 500-request burst
  spread over 60 s shows about 9 at 1 s, 84 at 10 s and 500 at 60 s.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.sim.errors import echoed
from envs.sim.forecast import prefix_key
from envs.sim.request import Request, Workload
from envs.sim.tokens import blocks_reaching, whole_blocks

BURST_WINDOWS_S = (1.0, 10.0, 60.0)
FANOUT_WINDOWS_S = (1.0, 10.0, 60.0, math.inf)
"""Windows the fan-out is reported at; ``inf`` is the whole trace (labelled ``whole``,
with ``window_s`` None)."""


def busiest(arrivals_s: Sequence[float] | np.ndarray, window_s: float) -> tuple[int, float]:
    """Most arrivals in any ``[t, t + window_s)``, and the ``t`` where it happens."""
    if not window_s > 0:
        raise ValueError(f"busiest: window_s must be > 0, got {echoed(window_s)}")
    t = np.sort(np.asarray(arrivals_s, dtype=float))
    if t.size == 0:
        return 0, 0.0
    # Compared in whole nanoseconds (the finest time_unit a reader takes), so that
    # arrivals exactly window_s apart fall in different windows: in seconds,
    # 3.012 + 1.0 < 4.012 in floating point. Whole nanoseconds held in float64 are
    # exact up to 2**53 ns (104 days); a window under 1 ns is taken as 1 ns
    # (same-instant arrivals share it); times past 1e299 s stay in seconds.
    with np.errstate(over="ignore"):
        ns = np.rint(t * 1e9)
    window_ns = max(float(np.rint(window_s * 1e9)), 1.0)
    if not np.isfinite(ns[-1]):
        ns, window_ns = t, window_s
    counts = np.searchsorted(ns, ns + window_ns, side="left") - np.arange(t.size)
    best = int(np.argmax(counts))
    return int(counts[best]), float(t[best])


@dataclass(frozen=True)
class Fanout:
    """The largest same-prefix fan-out found."""

    requests: int
    """Requests of one prefix within the window (0 if no prompt is long enough)."""
    start_s: float
    """Arrival of the first of them."""
    key: Hashable
    """What names the prefix (a chained block id for workloads)."""


def largest_fanout(
    arrivals_s: Sequence[float] | np.ndarray,
    keys: Sequence[Hashable | None],
    window_s: float,
) -> Fanout:
    """Largest number of same-key arrivals within ``window_s``; ``None`` keys are ignored."""
    groups: dict[Hashable, list[float]] = defaultdict(list)
    for t, key in zip(arrivals_s, keys, strict=True):
        if key is not None:
            groups[key].append(float(t))
    best = Fanout(0, 0.0, None)
    for key, times in groups.items():
        if len(times) <= best.requests:
            continue
        count, start = busiest(times, window_s)
        if count > best.requests:
            best = Fanout(count, start, key)
    return best


def prefix_ids(workload: Workload, min_tokens: int) -> list[int | None]:
    """Each request's chained id naming its first ``min_tokens`` tokens (the block that
    holds token ``min_tokens``), or None if its prompt is shorter than ``min_tokens``
    tokens: a prompt of 3,600 tokens in eight 512-token blocks does not reach 4,096."""
    if min_tokens < 1:
        raise ValueError(f"prefix_ids: min_tokens must be >= 1, got {echoed(min_tokens)}")
    depth = blocks_reaching(min_tokens, workload.block_tokens) - 1
    return [
        r.blocks[depth] if r.input_tokens >= min_tokens and len(r.blocks) > depth else None
        for r in workload.requests
    ]


def longest_shared_prefix_tokens(workload: Workload) -> int:
    """The longest prompt prefix (tokens, whole blocks) a request shares with an
    earlier one of ``workload``: chained block ids name a prefix, so a request's
    shared part is its leading blocks already seen."""
    seen: set[int] = set()
    longest = 0
    for request in workload.requests:
        blocks = request.blocks
        shared = 0
        while shared < len(blocks) and blocks[shared] in seen:
            shared += 1
        longest = max(longest, shared)
        seen.update(blocks)
    return longest * workload.block_tokens


def y_shares_no_prefix(y_tokens: int, windows: Sequence[Workload]) -> int | None:
    """The longest prefix (tokens) two requests of a window of ``windows`` share, when
    BTB keyed on a Y of ``y_tokens`` can match none of them; None when it can match
    one. BTB takes Y in the whole blocks that fit in it (:func:`whole_blocks`), so a
    Y up to a block longer than a shared prefix still keys it."""
    longest = [longest_shared_prefix_tokens(w) for w in windows]
    if any(whole_blocks(y_tokens, w.block_tokens) * w.block_tokens <= n
           for w, n in zip(windows, longest)):  # fmt: skip
        return None
    return max(longest, default=0)


PRIVATE_KEY_SHARE = 0.1
"""The share of a window's requests whose prompt but its last block ends in blocks
of their own, while sharing leading blocks, above which a workload is warned about."""
PRIVATE_KEY_EFFECT = (
    "The copying routers (eft_pull, eft_pull_spread, btb_eft), the thresholds agents' "
    "BTB (unless given y_tokens: env.y_tokens=... on train, policy_kwargs=AGENT.y_tokens=... "
    "on compare, +policy_kwargs.AGENT.y_tokens=... on evaluate), the "
    "route-and-warm agents' warm actions and the route envs' prefix features "
    "(same_1s/10s/60s, age, holders) key a prefix that way and see no sharing for them; "
    "btb, btb_pending, cache_aware and oracle_warm are not affected (see docs/traces.md)"
)
"""What such requests change (the warning's second half)."""


def private_key_ends(requests: Sequence[Request]) -> int:
    """How many ``requests`` share their first block with another but whose prompt
    less its last block (the prefix the copying routers, the thresholds env's BTB and
    the route envs' features key on: ``envs.sim.forecast.prefix_key``) ends in a block
    no other request has: a suffix longer than one block, as at small blocks."""
    seen: Counter[int] = Counter()
    for request in requests:
        seen.update(request.blocks)
    return sum(
        len(r.blocks) >= 2 and seen[r.blocks[0]] >= 2 and seen[prefix_key(r)] == 1 for r in requests
    )


def private_key_note(private: int, total: int, block_tokens: int, above: float = 0.0) -> str | None:
    """The first half of the warning about ``private`` requests of ``total`` counted by
    :func:`private_key_ends` ("N of M requests ..."), or None below
    :data:`PRIVATE_KEY_SHARE` of them more than the share ``above`` (a generator's
    own, at its default parameters: multi-turn conversations have such requests at
    any block size)."""
    if private < max(1, (above + PRIVATE_KEY_SHARE) * total):
        return None
    return (
        f"{private:,} of {total:,} requests share leading blocks with others, but "
        f"their prompt less its last block ends in {block_tokens}-token blocks no other "
        "request has (a suffix longer than one block)"
    )


def audit_workload(
    workload: Workload,
    min_tokens: int = 4096,
    window_s: float = 10.0,
    burst_windows_s: Iterable[float] = BURST_WINDOWS_S,
) -> dict[str, Any]:
    """Arrival bursts, same-prefix fan-out and length summary of one workload."""
    min_blocks = blocks_reaching(min_tokens, workload.block_tokens)
    requests = workload.requests
    arrivals = np.fromiter((r.arrival_s for r in requests), dtype=float, count=len(requests))
    inputs = np.fromiter((r.input_tokens for r in requests), dtype=float, count=len(requests))
    outputs = np.fromiter((r.output_tokens for r in requests), dtype=float, count=len(requests))
    duration = float(arrivals.max() - arrivals.min()) if arrivals.size else 0.0
    bursts = {}
    for w in burst_windows_s:
        count, start = busiest(arrivals, w)
        bursts[_label(w)] = {"window_s": w, "requests": count, "start_s": start}
    keys = prefix_ids(workload, min_tokens)
    fan = largest_fanout(arrivals, keys, window_s)
    fanout_by_window = {}
    for w in FANOUT_WINDOWS_S:
        found = largest_fanout(arrivals, keys, w)
        fanout_by_window[_label(w)] = {
            "window_s": w if w < math.inf else None,  # None: the whole trace
            "requests": found.requests,
            "start_s": found.start_s,
        }
    example = next(
        (r for r, key in zip(requests, keys, strict=True) if key is not None and key == fan.key),
        None,
    )
    return {
        "name": workload.name,
        "block_tokens": workload.block_tokens,
        "requests": len(requests),
        "duration_s": duration,
        "mean_rate_per_s": len(requests) / duration if duration > 0 else 0.0,
        "busiest": bursts,
        "fanout": {
            "min_tokens": min_tokens,
            "min_blocks": min_blocks,
            "window_s": window_s,
            "requests": fan.requests,
            "start_s": fan.start_s,
            "example_request_id": example.request_id if example else None,
            "group_id": example.group_id if example else None,
        },
        "fanout_by_window": fanout_by_window,
        "input_tokens": _summary(inputs),
        "output_tokens": _summary(outputs),
        "private_key_requests": private_key_ends(requests),
    }


def audit_windows(
    workloads: Iterable[Workload],
    min_tokens: int = 4096,
    window_s: float = 10.0,
    burst_windows_s: Sequence[float] = BURST_WINDOWS_S,
) -> dict[str, Any]:
    """Audit each workload (window) in turn, holding one at a time; report the maxima.

    The result has ``windows`` (one audit each) and ``overall``: total requests and,
    for every statistic, the largest value over the windows with the window's name.
    Windows are separate timelines, so no burst spans two of them.
    """
    per_window: list[dict[str, Any]] = []
    for workload in workloads:
        per_window.append(audit_workload(workload, min_tokens, window_s, burst_windows_s))
    if not per_window:
        raise ValueError("audit_windows: no workloads to audit")
    overall: dict[str, Any] = {
        "windows": len(per_window),
        "requests": sum(a["requests"] for a in per_window),
        "block_tokens": per_window[0]["block_tokens"],
    }
    for section in ("busiest", "fanout_by_window"):  # the largest of each, with its window
        overall[section] = {}
        for label in per_window[0][section]:
            top = max(per_window, key=lambda a: a[section][label]["requests"])
            overall[section][label] = {**top[section][label], "window": top["name"]}
    top = max(per_window, key=lambda a: a["fanout"]["requests"])
    overall["fanout"] = {**top["fanout"], "window": top["name"]}
    overall["private_key_requests"] = sum(a["private_key_requests"] for a in per_window)
    overall["input_tokens_max"] = max(a["input_tokens"]["max"] for a in per_window)
    overall["output_tokens_max"] = max(a["output_tokens"]["max"] for a in per_window)
    return {"overall": overall, "windows": per_window}


def _label(window_s: float) -> str:
    return "whole" if window_s == math.inf else f"{window_s:g}s"


def _summary(values: np.ndarray) -> dict[str, float]:
    if values.size == 0:
        return {"mean": 0.0, "p50": 0.0, "p99": 0.0, "max": 0.0}
    return {
        "mean": float(values.mean()),
        "p50": float(np.percentile(values, 50)),
        "p99": float(np.percentile(values, 99)),
        "max": float(values.max()),
    }
