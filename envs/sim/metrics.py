"""Per-request records of a run and the run's summary metrics.

The engine writes each request's entries as it goes (:class:`Records`) and,
when the run ends, hands over its totals (:class:`RunTotals`); the metrics are
worked out from those two alone and never read the engine's internals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from envs.sim import rare_gc
from envs.sim.speculation import SPECULATE_REFUSALS

if TYPE_CHECKING:
    from envs.sim.request import Request
    from envs.sim.speculation import SpeculativeChunk
    from envs.sim.transfers import Copy

_FIELDS = (
    "node",
    "admit_s",
    "first_token_s",
    "finish_s",
    "hit_hbm_tokens",
    "hit_ram_tokens",
    "hit_disk_tokens",
    "reuse_s",
    "prefill_tokens",
)
_LISTS = ("node", "first_token_s", "finish_s")
"""The fields written during the run as lists, one entry per request."""
_COLUMNS = tuple(name for name in _FIELDS if name not in _LISTS)
"""The entries of ``Records.admission``, in order."""
_DERIVED = ("arrival_s", "ttft_s", "queue_s", "e2e_s")
_BUILT = (*_FIELDS, *_DERIVED, "summary")
"""What :meth:`Records.finalize` leaves to be built on first read."""


@dataclass(frozen=True)
class RunTotals:
    """What the engine counted over a run, besides the per-request records.

    Per-node lists are in node order; seconds are node-time totals."""

    copies: Sequence[Copy]  # every warm copy issued, landed or not
    used_copies_hbm: frozenset[int]  # ids of copies a request hit in HBM
    used_copies_any: frozenset[int]  # ... in any tier
    warm_refused: dict[str, int]  # refused warm calls, by reason
    displaced_by_copies_blocks: int
    evict_actions: int
    evicted_by_action_blocks: int
    busy_s: list[float]
    prefill_s: list[float]
    decode_s: list[float]
    copy_s: list[float]
    rdma_busy_s: list[float]
    budget_tokens: list[int]
    max_batch: int
    # when the last node's last work item ended: the last finish, or a copy or a
    # speculative chunk still running after it (-inf: no node did anything)
    last_work_end_s: float = -math.inf
    # copies that landed nothing: their KV was gone from the source or target at their
    # landing, or they waited to send on what such a copy would have brought
    copies_lost: int = 0
    # faults (envs/sim/faults.py): what they did, by name; empty when they are off
    faults: dict[str, int] = field(default_factory=dict)
    # request -> (when its rerun after a node loss was admitted, the rerun's node): the
    # records keep the node and admission of the service that delivered its first token
    reruns: dict[int, tuple[float, int]] = field(default_factory=dict)
    versions: dict[str, Any] | None = None  # model versions and upgrades (envs.sim.tenancy)
    # cache lifecycle (envs.sim.lifecycle): pins, host moves, replica lifetime
    cache_life: CacheLifeTotals = field(default_factory=lambda: CacheLifeTotals())
    # -- speculative prefill (envs/sim/speculation.py) --
    speculative_chunks: Sequence[SpeculativeChunk] = ()  # every chunk started
    speculative_accepted: int = 0  # speculate calls accepted
    speculative_refused: dict[str, int] = field(default_factory=dict)  # refused, by reason


class Records:
    """One entry per request, indexed by ``Request.index``.

    While the run goes on the fields are Python lists (cheap to write); when it
    ends, they become numpy arrays, with ``arrival_s``, ``ttft_s``, ``queue_s``,
    ``e2e_s`` and the run's ``summary`` besides. Unfinished entries hold -1 / nan.
    The arrays and the summary are built when one of them is first read after
    the run (:meth:`finalize`), so a run nobody reads them from (an environment's
    episode, credited request by request) does not pay for them.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.node: Any = [-1] * n
        self.first_token_s: Any = [np.nan] * n
        self.finish_s: Any = [np.nan] * n
        # written once per request at admission, unpacked when the arrays are built:
        # (admit_s, hit_hbm_tokens, hit_ram_tokens, hit_disk_tokens, reuse_s, prefill_tokens)
        self.admission: list[tuple[float, int, int, int, float, int]] = [
            (np.nan, 0, 0, 0, 0.0, 0)
        ] * n
        self.admit_s: Any = None
        self.hit_hbm_tokens: Any = None
        self.hit_ram_tokens: Any = None
        self.hit_disk_tokens: Any = None
        self.reuse_s: Any = None
        self.prefill_tokens: Any = None
        self.arrival_s: np.ndarray = np.zeros(0)
        self.ttft_s: np.ndarray = np.zeros(0)
        self.queue_s: np.ndarray = np.zeros(0)
        self.e2e_s: np.ndarray = np.zeros(0)
        self.summary: dict[str, Any] = {}
        self._ending: tuple[Any, ...] | None = None

    def finalize(self, requests: Sequence[Request], totals: RunTotals) -> None:
        """The run is over: the arrays and the summary are built from its lists,
        ``requests`` and ``totals`` when any of them is first read (``totals`` is
        the run's snapshot; the requests are read then, so they must not be
        changed in between)."""
        state = self.__dict__
        lists = {name: state.pop(name) for name in _LISTS}
        for name in _BUILT:
            state.pop(name, None)
        self._ending = (tuple(requests), totals, lists)

    if not TYPE_CHECKING:  # (so that a misspelt attribute stays a type error)

        def __getattr__(self, name: str) -> Any:
            # only reached for a name the instance does not hold: one of _BUILT
            # between finalize() and its first read
            ending = self.__dict__.get("_ending")
            if ending is None or name not in _BUILT:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            self._ending = None
            try:
                self._build(*ending)
            except BaseException as error:
                self._ending = ending  # (as it was: the next read tries again)
                if isinstance(error, AttributeError):  # not "no such attribute" to getattr()
                    raise RuntimeError(f"building the run's records failed: {error}") from error
                raise
            return self.__dict__[name]

    def _build(self, requests: Sequence[Request], totals: RunTotals, lists: dict[str, Any]) -> None:
        # the arrays are made of the run's many young objects, which a default GC
        # threshold would scan again and again
        with rare_gc.RARE_GC:
            columns = list(zip(*self.admission)) if self.n else [()] * len(_COLUMNS)
            for name, column in zip(_COLUMNS, columns):
                setattr(self, name, np.asarray(column))
            for name, values in lists.items():
                setattr(self, name, np.asarray(values))
            self.arrival_s = np.array([r.arrival_s for r in requests], dtype=float)
            self.ttft_s = self.first_token_s - self.arrival_s
            self.queue_s = self.admit_s - self.arrival_s
            self.e2e_s = self.finish_s - self.arrival_s
            self.summary = summarize(requests, self, totals)

    def as_dict(self) -> dict[str, list[Any]]:
        """The per-request fields as plain lists (for JSON or a DataFrame)."""
        names = (*_FIELDS, *_DERIVED)
        return {name: np.asarray(getattr(self, name)).tolist() for name in names}


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if values.size else float("nan")


def summarize(requests: Sequence[Request], rec: Records, totals: RunTotals) -> dict[str, Any]:
    """Run-level metrics (what a deployment watches, after the BTB write-up's list).

    Prefix-cache hit rates: ``request_hit_rate`` is the share of requests that
    reused any cached KV, ``token_hit_rate`` the share of input tokens reused
    (``hbm_`` / ``ram_`` / ``disk_hit_rate`` split it by tier).
    ``byte_hit_rate`` is the share of input KV bytes reused; every token of the
    one served model has the same KV size (``kv_bytes_per_token``), so it is
    ``token_hit_rate`` by definition and kept under its own name for readers
    that expect it.

    Warm copies (the BTB write-up's request and byte hit rates of warm copies,
    used before eviction), over the copies that landed: a copy is *used* once a
    request hits any of its blocks while they are in HBM. ``warm_hit_rate`` is
    the share of copies used (each copy counts once), ``warm_byte_hit_rate``
    the share of copied bytes in copies used. ``warm_used_any_rate`` also
    counts a use after the blocks were evicted to host RAM or disk;
    ``warm_amplification`` is the share of copied bytes never used in any tier.
    """
    n = len(requests)
    input_tokens = np.array([r.input_tokens for r in requests], dtype=float)
    output_tokens = np.array([r.output_tokens for r in requests], dtype=float)
    done = ~np.isnan(rec.finish_s)
    start = float(rec.arrival_s.min()) if n else 0.0
    end = float(np.nanmax(rec.finish_s)) if done.any() else start
    makespan = max(end - start, 1e-12)
    # the time shares are over the nodes' time until the last of them went idle
    busy_span = max(max(end, totals.last_work_end_s) - start, 1e-12)
    hits = rec.hit_hbm_tokens + rec.hit_ram_tokens + rec.hit_disk_tokens
    total_in = max(float(input_tokens.sum()), 1.0)
    copies = totals.copies
    landed = [c for c in copies if c.land_s >= 0]
    used_hbm = totals.used_copies_hbm
    used_any = totals.used_copies_any
    landed_bytes = sum(c.bytes for c in landed)
    used_hbm_bytes = sum(c.bytes for c in landed if c.id in used_hbm)
    unused_bytes = sum(c.bytes for c in landed if c.id not in used_any)
    busy = totals.busy_s
    token_hit_rate = float(hits.sum()) / total_in
    return {
        "requests": n,
        "completed": int(done.sum()),
        "ttft_mean_s": float(np.mean(rec.ttft_s)) if n else float("nan"),
        "ttft_p50_s": _pct(rec.ttft_s, 50),
        "ttft_p90_s": _pct(rec.ttft_s, 90),
        "ttft_p95_s": _pct(rec.ttft_s, 95),
        "ttft_p99_s": _pct(rec.ttft_s, 99),
        "ttft_max_s": float(np.max(rec.ttft_s)) if n else float("nan"),
        "e2e_mean_s": float(np.mean(rec.e2e_s)) if n else float("nan"),
        "e2e_p95_s": _pct(rec.e2e_s, 95),
        "e2e_p99_s": _pct(rec.e2e_s, 99),
        "queue_mean_s": float(np.mean(rec.queue_s)) if n else float("nan"),
        "queue_p95_s": _pct(rec.queue_s, 95),
        "makespan_s": makespan,
        "throughput_rps": n / makespan,
        "output_tokens_per_s": float(output_tokens.sum()) / makespan,
        "busy_span_s": busy_span,
        "utilisation_mean": float(np.mean(busy)) / busy_span,
        "utilisation_per_node": [b / busy_span for b in busy],
        "request_hit_rate": float(np.mean(hits > 0)) if n else 0.0,
        "token_hit_rate": token_hit_rate,
        "byte_hit_rate": token_hit_rate,  # equal KV bytes a token: see the docstring
        "hbm_hit_rate": float(rec.hit_hbm_tokens.sum()) / total_in,
        "ram_hit_rate": float(rec.hit_ram_tokens.sum()) / total_in,
        "disk_hit_rate": float(rec.hit_disk_tokens.sum()) / total_in,
        "hbm_request_hit_rate": float(np.mean(rec.hit_hbm_tokens > 0)) if n else 0.0,
        "prefill_tokens": int(rec.prefill_tokens.sum()),
        "warm_copies": len(copies),
        "warm_copies_landed": len(landed),
        "warm_copies_lost": totals.copies_lost,
        "warm_bytes": float(landed_bytes),
        "warm_hit_rate": (len(used_hbm & {c.id for c in landed}) / len(landed)) if landed else 0.0,
        "warm_byte_hit_rate": (used_hbm_bytes / landed_bytes) if landed_bytes else 0.0,
        "warm_used_any_rate": (len(used_any & {c.id for c in landed}) / len(landed))
        if landed
        else 0.0,
        "warm_amplification": (unused_bytes / landed_bytes) if landed_bytes else 0.0,
        "warm_refused": dict(totals.warm_refused),
        "displaced_by_copies_blocks": totals.displaced_by_copies_blocks,
        "evict_actions": totals.evict_actions,
        "evicted_by_action_blocks": totals.evicted_by_action_blocks,
        "rdma_busy_s": float(sum(totals.rdma_busy_s)),
        "copy_busy_s": float(sum(totals.copy_s)),
        **capacity_metrics(requests, rec, totals, busy_span),
        **fault_metrics(totals),
        **tenancy_metrics(requests, rec, totals),
        **cache_life_metrics(totals.cache_life, float(landed_bytes)),
        **speculative_metrics(totals),
    }


def speculative_metrics(totals: RunTotals) -> dict[str, Any]:
    """Speculative prefill (``Simulator.speculate``): the calls accepted and refused
    (by reason), the chunks computed and their tokens, the compute seconds, and the
    chunks a request reused any block of (in any tier) before the run ended.
    ``speculative_wasted_s`` is the compute of the chunks no request used (evicted
    first, or still cached at the end). A chunk cut short by a node loss
    (``SpeculativeChunk.cut``) was not computed: what ran of it counts in the
    compute and wasted seconds only. All zero when no policy speculated."""
    chunks = totals.speculative_chunks
    used_ids = totals.used_copies_any
    done = [c for c in chunks if not c.cut]
    used = [c for c in done if c.id in used_ids]
    refused = totals.speculative_refused
    return {
        "speculative_accepted": totals.speculative_accepted,
        "speculative_refused": {r: refused.get(r, 0) for r in SPECULATE_REFUSALS},
        "speculative_chunks": len(done),
        "speculative_tokens": int(sum(c.tokens for c in done)),
        "speculative_compute_s": float(sum(c.compute_s for c in chunks)),
        "speculative_used_chunks": len(used),
        "speculative_used_tokens": int(sum(c.tokens for c in used)),
        "speculative_wasted_s": float(
            sum(c.compute_s for c in chunks if c.cut or c.id not in used_ids)
        ),
    }


# ---------------------------------------------------------------- faults
def fault_metrics(totals: RunTotals) -> dict[str, int]:
    """What the faults did (envs/sim/faults.py), present only when they are on:
    ``fault_node_losses`` (and ``_skipped``: the last node up is never lost),
    ``fault_node_recoveries``, ``fault_copies_failed``, ``fault_rerouted_requests``
    (re-routings off a lost node), ``fault_restarted_requests`` (of those, the ones
    of a request whose first token was already out; both count events, so a request
    taken off two lost nodes counts twice, where ``RunTotals.reruns`` keeps its last
    rerun), ``fault_routed_to_down`` (a policy routed to a
    down node; the request went to the least-loaded node up that admits), ``fault_nic_downs``,
    ``fault_copies_slow``."""
    return dict(totals.faults)


def capacity_metrics(
    requests: Sequence[Request], rec: Records, totals: RunTotals, busy_span_s: float
) -> dict[str, Any]:
    """How full the cluster ran, averaged over the nodes and the run (first arrival
    to the end of the last work item, ``busy_span_s``: the last finish, or a copy or
    a speculative chunk still running after it), for sizing it (``utilisation``
    counts decode, which runs whenever any sequence is decoding, so it reads near
    1 on any busy run):

    - ``prefill_busy_fraction``: share of node time spent reusing and prefilling
      prompts (``prefill_busy_per_node``: each node's);
    - ``decode_busy_fraction``: share spent in decode steps;
    - ``batch_occupancy_mean``: running sequences (admitted, not finished) / ``max_batch``,
      time-weighted;
    - ``kv_occupancy_mean``: KV reserved by running sequences (input + output tokens
      each) / the node's KV budget, time-weighted;
    - ``batch_occupancy_peak``, ``kv_occupancy_peak``: the highest of each over the
      nodes and the run, at any instant (what the means hide in a burst; the KV
      peak is at most 1, as admission never reserves beyond the budget);
    - ``load_imbalance``: max / mean of the nodes' prefill-busy seconds (1 = even;
      the number of nodes = one node did all the prefill work).

    Worked out from each request's admission and finish and the nodes' busy
    totals, none of which the event loop keeps for this alone.
    """
    n_nodes = len(totals.prefill_s)
    span = busy_span_s * n_nodes
    prefill = np.array(totals.prefill_s)
    done = ~np.isnan(rec.finish_s)
    admitted = rec.admit_s
    node = np.asarray(rec.node, dtype=np.int64)  # (int even when no request ran)
    if totals.reruns:  # a rerun held its KV on its rerun's node from its admission
        admitted = admitted.copy()
        node = node.copy()
        for index, (admit_s, rerun_node) in totals.reruns.items():
            admitted[index] = admit_s
            node[index] = rerun_node
    held_s = np.where(done, rec.finish_s - admitted, 0.0)
    tokens = np.array([r.input_tokens + r.output_tokens for r in requests], dtype=float)
    kv_token_s = np.bincount(node[done], weights=(held_s * tokens)[done], minlength=n_nodes)
    budgets = np.array(totals.budget_tokens, dtype=float)
    held = (node[done], admitted[done], rec.finish_s[done])
    mean_prefill = float(prefill.mean())
    return {
        "prefill_busy_fraction": float(prefill.sum()) / span,
        "prefill_busy_per_node": [float(p) / busy_span_s for p in prefill],
        "decode_busy_fraction": float(sum(totals.decode_s)) / span,
        "batch_occupancy_mean": float(held_s.sum()) / (span * totals.max_batch),
        "kv_occupancy_mean": float(np.mean(kv_token_s / budgets)) / busy_span_s,
        **dict(
            zip(
                ("batch_occupancy_peak", "kv_occupancy_peak"),
                _peaks(held, tokens[done], float(totals.max_batch), budgets),
                strict=True,
            )
        ),
        "load_imbalance": float(prefill.max()) / mean_prefill if mean_prefill > 0 else 1.0,
    }


def _peaks(
    held: tuple[np.ndarray, np.ndarray, np.ndarray],
    tokens: np.ndarray,
    max_batch: float,
    budgets: np.ndarray,
) -> tuple[float, float]:
    """The highest number of the intervals ``held`` (node, start, end) a node holds
    at once over ``max_batch``, and the highest sum of their ``tokens`` over the
    node's budget, over the nodes; one sort serves both. An interval that ends as
    another starts is not counted with it: a finish frees its batch slot and KV
    before an admission at the same instant."""
    node, start, end = held
    if node.size == 0:
        return 0.0, 0.0
    ones = np.ones(node.size)
    nodes = np.concatenate([node, node])
    sign = np.concatenate([ones, -ones])
    order = np.lexsort((sign, np.concatenate([start, end]), nodes))  # frees first
    nodes = nodes[order]
    cuts = np.flatnonzero(np.r_[True, nodes[1:] != nodes[:-1]])  # where each node's begin
    # each node's intervals all end, so the running totals are 0 where its own begin
    at = nodes[cuts]
    slots = np.maximum.reduceat(np.cumsum(sign[order]), cuts) / max_batch
    kv = np.maximum.reduceat(np.cumsum((sign * np.concatenate([tokens, tokens]))[order]), cuts)
    return float(slots.max()), float((kv / budgets[at]).max())


# --- tenancy: per-tenant TTFT and model versions (envs.sim.tenancy, docs/tenancy.md)
def tenant_ttft(tenants: Sequence[str], ttft_s: np.ndarray) -> dict[str, Any]:
    """``ttft_by_tenant`` when the requests come from more than one tenant: for each
    tenant (in name order) its requests and mean, p50, p95 and p99 TTFT in seconds.
    Empty when there is one tenant (or none named), so such runs report as before."""
    names = sorted(set(tenants))
    if len(names) < 2:
        return {}
    labels = np.asarray(tenants)
    by_tenant: dict[str, dict[str, Any]] = {}
    for name in names:
        ttft = ttft_s[labels == name]
        by_tenant[name] = {
            "requests": int(ttft.size),
            "ttft_mean_s": float(np.mean(ttft)),
            "ttft_p50_s": _pct(ttft, 50),
            "ttft_p95_s": _pct(ttft, 95),
            "ttft_p99_s": _pct(ttft, 99),
        }
    return {"ttft_by_tenant": by_tenant}


def tenancy_metrics(requests: Sequence[Request], rec: Records, totals: RunTotals) -> dict[str, Any]:
    """Per-tenant TTFT (:func:`tenant_ttft`) and, in a run with model versions, what
    the upgrades did: each node's final ``model_versions``, ``upgrades_done``,
    ``upgrade_drain_s`` (per upgraded node, from its upgrade time to its switch)
    and ``copies_cancelled_by_upgrade``."""
    out = tenant_ttft([r.tenant for r in requests], rec.ttft_s)
    if totals.versions is not None:
        out.update(totals.versions)
    return out


# ---------------------------------------------------------------- cache lifecycle
@dataclass
class CacheLifeTotals:
    """The cache lifecycle's counts over a run (``envs.sim.lifecycle``): pins, host
    moves, replica lifetime, and what warm copies saved and displaced."""

    pins: int = 0
    pins_yielded: int = 0  # pins released so that a request could be admitted at all
    demotions: int = 0
    demoted_blocks: int = 0
    promotions: int = 0
    promoted_blocks: int = 0
    replica_expired_blocks: int = 0  # blocks reclaimed by SimConfig.replica_ttl_s (and below)
    normal_displaced_by_copies_blocks: int = 0  # request-computed blocks a landing evicted
    copy_hit_blocks: int = 0  # warm-copy blocks requests hit in HBM
    copy_prefill_saved_s: float = 0.0  # their cold-prefill seconds
    copied_prefix_bytes: dict[int, float] = field(default_factory=dict)  # distinct prefixes
    pin_refused: dict[str, int] = field(default_factory=dict)
    demote_refused: dict[str, int] = field(default_factory=dict)
    promote_refused: dict[str, int] = field(default_factory=dict)


def cache_life_metrics(life: CacheLifeTotals, copy_bytes_landed: float) -> dict[str, Any]:
    """The replication metrics of the BTB write-up's deployment list, and the
    lifecycle actions' counts (docs/cache_actions.md, "Replication metrics"):

    - ``copy_prefill_saved_s``: prefill saved by warm copies, the cold-prefill
      seconds (prefill seconds a token on the node, no attention term) of every
      warm-copy block a request hit in HBM;
    - ``copy_bytes_per_prefill_s_saved``: copy bytes landed / that (0 without
      copies, inf when copies landed but saved nothing);
    - ``normal_displaced_by_copies_blocks``: blocks of request-computed KV that
      the landing copies evicted from HBM (``displaced_by_copies_blocks``
      counts blocks of any origin);
    - ``replication_amplification``: copy bytes landed / bytes of the distinct
      prefixes copied (``copied_prefix_bytes``: each prefix counted once, whole):
      3.0 for a prefix copied whole to three nodes, 0 without copies.
    """
    saved = life.copy_prefill_saved_s
    distinct = sum(life.copied_prefix_bytes.values())
    return {
        "copy_prefill_saved_s": saved,
        "copy_bytes_per_prefill_s_saved": (
            copy_bytes_landed / saved if saved > 0 else math.inf if copy_bytes_landed else 0.0
        ),
        "normal_displaced_by_copies_blocks": life.normal_displaced_by_copies_blocks,
        "replication_amplification": copy_bytes_landed / distinct if distinct else 0.0,
        "copied_prefix_bytes": float(distinct),
        "replica_expired_blocks": life.replica_expired_blocks,
        "pins": life.pins,
        "pins_yielded": life.pins_yielded,
        "pin_refused": dict(life.pin_refused),
        "demotions": life.demotions,
        "demoted_blocks": life.demoted_blocks,
        "promotions": life.promotions,
        "promoted_blocks": life.promoted_blocks,
        "demote_refused": dict(life.demote_refused),
        "promote_refused": dict(life.promote_refused),
    }
