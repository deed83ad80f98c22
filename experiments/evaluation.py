"""Run policies over workload windows and reduce the records to result rows.

The one evaluator every comparison uses, hand-written baselines and learned
agents alike: anything implementing ``baselines.policy.Policy`` plugs in.

    runs = evaluate_policies(["cache_aware", "btb"], "70b_h100x4",
                             split_windows("bursted_synthetic", limit=3))
    rows = [run.row for run in runs]

Each (window, policy) pair is one fresh :class:`~envs.sim.Simulator` whose
``rng`` is ``default_rng([seed, window position])``: every policy sees the
same random stream on the same window. Rows pool the requests of all windows
(TTFT percentiles over every request, hit rates weighted by tokens, warm-copy
hit rates by copies and by bytes, copies summed).
"""

from __future__ import annotations

import itertools
import math
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from baselines.policy import Policy, make_policy
from envs.sim import ClusterSpec, SimConfig, Simulator, setup_cluster
from envs.sim.errors import (
    PolicyFailure,
    SettingWarning,
    echoed,
    plural,
    policy_label,
    raise_for_policy,
)
from envs.sim.floor import floor_bounds
from envs.sim.metrics import tenant_ttft
from envs.sim.request import Workload
from envs.workloads.bursted import PUBLISHED_SEED

DEFAULT_BASELINE = "cache_aware"
FLOOR = "floor"
"""The row of the per-request TTFT lower bound (envs.sim.floor), not a policy."""
FLOOR_CAPACITY = "floor_capacity"
"""The row of the capacity-aware lower bound on mean TTFT (envs.sim.floor), not a
policy: a mean (overall and per window) and nothing else."""
BOUNDS = (FLOOR, FLOOR_CAPACITY)
"""The rows of lower bounds, last in a comparison with ``floor=True``."""
LOCKSTEP_WINDOWS = 8
"""Windows an agent runs in lockstep (:func:`run_windows_lockstep`), at most: its
batched forward pass then serves up to this many decisions at once."""
GAP_REFERENCE = "btb"
"""``floor_gap_closed_*_pct`` measure the gap from this policy's row down to the floor."""


@dataclass
class WindowTrace:
    """What the burst timeline chart needs from one window's run."""

    window: str
    n_nodes: int
    arrival_s: np.ndarray
    admit_s: np.ndarray
    node: np.ndarray
    copies: list[tuple[float, float, float, int, int]]
    """(issued_s, start_s, land_s, src, dst) of every warm copy; -1 if it never started/landed."""
    settings: list[tuple[float, tuple[int, float, int, int, str]]] = field(default_factory=list)
    """A threshold controller's (epoch start s, (X, Z, M, minimum prefix tokens,
    rule)) per epoch (``envs.thresholds.EpochController.log``); empty for other policies."""


@dataclass
class WindowResult:
    """One policy on one window: per-request arrays and run totals."""

    window: str
    ttft_s: np.ndarray
    e2e_s: np.ndarray
    queue_s: np.ndarray
    input_tokens: int
    hit_hbm_tokens: int
    summary: dict[str, Any]
    metrics: dict[str, float]
    wall_s: float
    trace: WindowTrace | None = None
    tenants: tuple[str, ...] = ()  # each request's tenant, in the order of ttft_s
    # a threshold controller's (epoch start s, (X, Z, M, minimum prefix, rule)) per
    # epoch of this window (``WindowTrace.settings``); empty for other policies
    settings: list[tuple[float, tuple[int, float, int, int, str]]] = field(default_factory=list)


@dataclass
class PolicyRun:
    """One policy over all windows: its result row, pooled TTFTs and a window trace."""

    row: dict[str, Any]
    ttft_s: np.ndarray
    trace: WindowTrace | None = None
    windows: list[WindowResult] = field(default_factory=list, repr=False)


def check_timeline_window(value: Any, n_windows: int, field: str) -> int:
    """The window (its position among the ``n_windows`` run) whose timeline the
    charts draw: an integer in ``[0, n_windows - 1]``, else a one-line error."""
    from envs.sim.checks import checked_number

    return int(checked_number(field, value, 0, max(n_windows - 1, 0), integer=True))


def split_windows(
    workload: str,
    limit: int | None = None,
    seed: int = PUBLISHED_SEED,
    split: str = "test",
    params: Mapping[str, Any] | None = None,
) -> Iterator[Workload]:
    """The windows of a registered workload's split, generated (or, for
    ``workload="trace"``, read with ``params``) one at a time. A window with no
    request (parameters can make one, for one seed; its statistics would be NaN) is
    refused as it comes, naming it."""
    from envs.workloads.registry import windows

    if limit is not None and limit < 1:
        raise ValueError(f"windows must be >= 1 (or 0 for all), got {echoed(limit)}")
    made = windows(workload, split=split, seed=seed, limit=limit, **(params or {}))
    return _with_requests(made, workload, split, seed)


def no_requests(workload: str, split: str, window: str, seed: str, change: str) -> ValueError:
    """The error every command raises for a window with no request (its statistics
    would be NaN): it names the workload, the split, the window and ``seed`` (as the
    command takes it: ``seed 7``, ``workload.seed=7``), and what to ``change``."""
    return ValueError(
        f"workload {workload}: {split} window {window!r} has no requests ({seed}); every "
        f"window needs some: change {change}"
    )


def _with_requests(
    made: Iterator[Workload], workload: str, split: str, seed: int
) -> Iterator[Workload]:
    for window in made:
        if not window.requests:
            raise no_requests(
                workload,
                split,
                window.name,
                f"seed {seed}",
                "the generator's parameters or its seed",
            )
        yield window


def count_windows(
    workload: str,
    limit: int | None = None,
    seed: int = PUBLISHED_SEED,
    params: Mapping[str, Any] | None = None,
    warn: bool = True,
    option: str = "windows",
) -> int:
    """How many test windows :func:`split_windows` yields (for progress bars); a
    workload without any is an error (its rows would be empty, its TTFTs NaN).
    Asking more than it has (``limit``, given as ``option``) warns
    (``SettingWarning``) unless not ``warn``."""
    from envs.workloads.registry import plan
    from envs.workloads.trace_file import (
        TRACE_WORKLOAD,
        no_windows_error,
        plan_trace,
        trace_options,
    )

    if workload == TRACE_WORKLOAD:
        n = len(plan_trace(trace_options(params or {})).split("test"))
    else:
        n = sum(spec.split == "test" for spec in plan(workload, seed))
    if not n:
        raise no_windows_error(workload, "test", dict(params or {}))
    if limit is not None and limit > n and warn:
        warnings.warn(
            f"{option}={limit}: workload {workload!r} has {plural(n, 'test window')}; "
            f"{'it runs' if n == 1 else 'all of them run'}",
            SettingWarning,
            stacklevel=2,
        )
    return n if limit is None else min(n, limit)


def as_policies(policies: Mapping[str, Policy] | Iterable[str | Policy]) -> dict[str, Policy]:
    """Names or instances (or a name -> instance mapping) as an ordered name -> policy dict."""
    if isinstance(policies, Mapping):
        return dict(policies)
    out: dict[str, Policy] = {}
    for entry in policies:
        policy = make_policy(entry) if isinstance(entry, str) else entry
        name = entry if isinstance(entry, str) else getattr(policy, "name", type(policy).__name__)
        if name in out:
            raise ValueError(f"policy {echoed(name)} is listed twice")
        out[name] = policy
    if not out:
        raise ValueError("no policies to evaluate")
    return out


def run_window(
    policy: Policy,
    cluster: ClusterSpec,
    workload: Workload,
    config: SimConfig,
    rng_seed: Sequence[int],
    trace: bool = False,
) -> WindowResult:
    """Serve one window with one policy on a fresh simulator."""
    sim = Simulator(cluster, workload, config, np.random.default_rng(list(rng_seed)))
    start = time.perf_counter()
    try:
        records = policy.run(sim)
    except PolicyFailure as failure:  # (the simulator knows the request, not the window)
        raise failure.in_window(workload.name) from failure.__cause__
    return window_result(policy, sim, records, time.perf_counter() - start, trace)


def run_windows_lockstep(
    policy: Policy,
    cluster: ClusterSpec,
    workloads: Sequence[Workload],
    config: SimConfig,
    rng_seeds: Sequence[Sequence[int]],
    traced: Sequence[bool],
) -> list[WindowResult]:
    """:func:`run_window` of each window, for an agent that runs them in lockstep
    (``agents.lockstep``: one batched forward pass a step); each window's wall time
    is its share, by requests, of the whole run's."""
    from agents.lockstep import run_lockstep

    sims = [
        Simulator(cluster, workload, config, np.random.default_rng(list(seed)))
        for workload, seed in zip(workloads, rng_seeds, strict=True)
    ]
    start = time.perf_counter()
    all_records = run_lockstep(policy, sims)  # type: ignore[arg-type]  # can_lockstep said so
    wall_s = time.perf_counter() - start
    total = sum(len(workload) for workload in workloads) or 1
    return [
        window_result(policy, sim, records, wall_s * len(sim.requests) / total, trace)
        for sim, records, trace in zip(sims, all_records, traced, strict=True)
    ]


def lockstep_capable(policy: Policy) -> bool:
    """Whether ``policy`` is an agent that runs windows in lockstep (agents are
    imported only for a policy of theirs: they import torch)."""
    if not type(policy).__module__.startswith("agents."):
        return False
    from agents.lockstep import can_lockstep

    return can_lockstep(policy)


def window_result(
    policy: Policy, sim: Simulator, records: Any, wall_s: float, trace: bool
) -> WindowResult:
    """A finished run's :class:`WindowResult` (with its timeline if ``trace``)."""
    workload = sim.workload
    summary = records.summary
    input_tokens = sum(r.input_tokens for r in workload.requests)
    settings = list(getattr(policy, "settings_log", ()))
    try:
        metrics = dict(policy.metrics())
    except Exception as error:  # the policy's own hook
        raise_for_policy(error, policy_label(policy), "metrics", window=workload.name)
    window_trace = None
    if trace:
        window_trace = WindowTrace(
            window=workload.name,
            n_nodes=sim.n_nodes,
            arrival_s=np.asarray(records.arrival_s, dtype=float),
            admit_s=np.asarray(records.admit_s, dtype=float),
            node=np.asarray(records.node, dtype=int),
            copies=[(c.issued_s, c.start_s, c.land_s, c.src, c.dst) for c in sim.copies],
            settings=settings,
        )
    return WindowResult(
        window=workload.name,
        ttft_s=np.asarray(records.ttft_s, dtype=float),
        e2e_s=np.asarray(records.e2e_s, dtype=float),
        queue_s=np.asarray(records.queue_s, dtype=float),
        input_tokens=input_tokens,
        hit_hbm_tokens=int(np.sum(records.hit_hbm_tokens)),
        summary=summary,
        metrics=metrics,
        wall_s=wall_s,
        trace=window_trace,
        tenants=tuple(r.tenant for r in workload.requests),
        settings=settings,
    )


def evaluate_policies(
    policies: Mapping[str, Policy] | Iterable[str | Policy],
    setup: str | ClusterSpec,
    windows: Iterable[Workload],
    config: SimConfig | None = None,
    seed: int = 0,
    workload: str = "",
    baseline: str | None = DEFAULT_BASELINE,
    progress: Callable[[int], Any] | None = None,
    trace_window: int | None = 0,
    setup_name: str | None = None,
    floor: bool = False,
) -> list[PolicyRun]:
    """Every policy on every window; one :class:`PolicyRun` per policy, in order.

    Args:
        policies: registered names, Policy instances, or a name -> Policy mapping.
        setup: a published setup name (``envs.sim.SETUPS``) or a cluster.
        windows: the workload windows (consumed once, window by window, or
            LOCKSTEP_WINDOWS at a time when an agent runs them in lockstep).
        config: simulator settings (default: the causal reference model).
        seed: the policies' random stream per window is ``default_rng([seed, i])``.
        workload: the workload's name, for the rows.
        baseline: rows get ``ttft_mean_reduction_pct`` / ``ttft_p95_reduction_pct``
            relative to this policy when it is among ``policies`` (else None).
        progress: called with 1 after each (window, policy) run.
        trace_window: keep the timeline of this window position (None: none).
        setup_name: the rows' setup label (default: the setup's name, or the cluster's).
        floor: add two last runs: ``floor``, the per-request TTFT lower bound of
            :func:`envs.sim.floor.ttft_floor_s` on the same windows (no policy, no
            simulation; its row has the TTFT statistics only), and
            ``floor_capacity``, the capacity-aware bound on mean TTFT of
            :func:`envs.sim.floor.ttft_mean_floor_capacity_s` (its row has the mean
            and the per-window means; percentiles None, no per-request TTFTs). Every
            row then gets ``floor_gap_closed_*_pct`` and
            ``floor_capacity_gap_closed_mean_pct`` (see :func:`add_floor_gaps`).
    """
    named = as_policies(policies)
    config = config or SimConfig()
    cluster = setup if isinstance(setup, ClusterSpec) else setup_cluster(setup)
    if setup_name is None:
        setup_name = setup if isinstance(setup, str) else cluster.name
    for bound in BOUNDS:
        if floor and bound in named:
            raise ValueError(f"a policy is named {echoed(bound)}, like a lower-bound row")
    results: dict[str, list[WindowResult]] = {name: [] for name in named}
    floors: list[np.ndarray] = []
    capacity_means: list[float] = []
    lockstep = {name for name, policy in named.items() if lockstep_capable(policy)}
    # windows one at a time, or a few at a time when an agent runs them in lockstep
    group = LOCKSTEP_WINDOWS if lockstep else 1
    numbered = enumerate(windows)
    while chunk := list(itertools.islice(numbered, group)):
        if floor:
            for _, window in chunk:
                per_request, capacity_mean = floor_bounds(cluster, window, config)
                floors.append(per_request)
                capacity_means.append(capacity_mean)
        for name, policy in named.items():
            if name in lockstep:
                results[name] += run_windows_lockstep(
                    policy,
                    cluster,
                    [window for _, window in chunk],
                    config,
                    [(seed, i) for i, _ in chunk],
                    [i == trace_window for i, _ in chunk],
                )
            else:
                for i, window in chunk:
                    trace = i == trace_window
                    results[name].append(
                        run_window(policy, cluster, window, config, (seed, i), trace=trace)
                    )
            if progress is not None:
                for _ in chunk:
                    progress(1)
    runs = [
        PolicyRun(
            row=summarize_windows(
                results[name],
                setup_name,
                workload,
                name,
                config,
                getattr(named[name], "metric_ratios", None),
            ),
            ttft_s=_pooled(results[name], "ttft_s"),
            trace=next((r.trace for r in results[name] if r.trace is not None), None),
            windows=results[name],
        )
        for name in named
    ]
    if floor:
        row = floor_row(floors, setup_name, workload, config)
        runs.append(PolicyRun(row=row, ttft_s=_concat(floors)))
        row = floor_capacity_row(capacity_means, floors, setup_name, workload, config)
        runs.append(PolicyRun(row=row, ttft_s=np.zeros(0)))
    add_reductions([run.row for run in runs], baseline)
    if floor:
        add_floor_gaps([run.row for run in runs])
    return runs


def _pooled(results: Sequence[WindowResult], name: str) -> np.ndarray:
    return _concat([getattr(r, name) for r in results])


def _concat(arrays: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.zeros(0)


def ttft_stats(ttft: np.ndarray) -> dict[str, float]:
    """Mean, percentiles and maximum of pooled TTFTs (nan when there are none)."""
    return {
        "ttft_mean_s": float(np.mean(ttft)) if ttft.size else float("nan"),
        "ttft_p50_s": _pct(ttft, 50),
        "ttft_p90_s": _pct(ttft, 90),
        "ttft_p95_s": _pct(ttft, 95),
        "ttft_p99_s": _pct(ttft, 99),
        "ttft_max_s": float(np.max(ttft)) if ttft.size else float("nan"),
    }


def _pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if values.size else float("nan")


def summarize_windows(
    results: Sequence[WindowResult],
    setup: str,
    workload: str,
    policy: str,
    config: SimConfig,
    ratios: Mapping[str, tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """One result row from a policy's windows (requests pooled across windows);
    ``ratios``: the policy's ``Policy.metric_ratios`` (:func:`policy_metrics`)."""
    ttft = _pooled(results, "ttft_s")
    e2e = _pooled(results, "e2e_s")
    queue = _pooled(results, "queue_s")
    input_tokens = sum(r.input_tokens for r in results)
    landed = sum(r.summary["warm_copies_landed"] for r in results)
    used = sum(r.summary["warm_hit_rate"] * r.summary["warm_copies_landed"] for r in results)
    landed_bytes = sum(r.summary["warm_bytes"] for r in results)
    used_bytes = sum(r.summary["warm_byte_hit_rate"] * r.summary["warm_bytes"] for r in results)
    unused_bytes = sum(r.summary["warm_amplification"] * r.summary["warm_bytes"] for r in results)
    wall_s = sum(r.wall_s for r in results)
    row: dict[str, Any] = {
        "setup": setup,
        "workload": workload,
        "policy": policy,
        "causal_kv": config.causal_kv,
        "copy_model": config.copy_model,
        "windows": len(results),
        "requests": int(ttft.size),
        "completed": int(sum(r.summary["completed"] for r in results)),
        **ttft_stats(ttft),
        "e2e_mean_s": float(np.mean(e2e)) if e2e.size else float("nan"),
        "e2e_p95_s": _pct(e2e, 95),
        "queue_mean_s": float(np.mean(queue)) if queue.size else float("nan"),
        "queue_p95_s": _pct(queue, 95),
        "hbm_hit_rate": sum(r.hit_hbm_tokens for r in results) / max(input_tokens, 1),
        "warm_copies": int(sum(r.summary["warm_copies"] for r in results)),
        "warm_copies_landed": int(landed),
        "warm_copies_lost": int(sum(r.summary["warm_copies_lost"] for r in results)),
        "warm_bytes": float(landed_bytes),
        "warm_hit_rate": used / landed if landed else 0.0,
        "warm_byte_hit_rate": used_bytes / landed_bytes if landed_bytes else 0.0,
        # landed copy bytes no request used, in any tier (envs.sim.metrics.summarize)
        "warm_amplification": unused_bytes / landed_bytes if landed_bytes else 0.0,
        "displaced_by_copies_blocks": int(
            sum(r.summary["displaced_by_copies_blocks"] for r in results)
        ),
        **_capacity(results),
        **_fault_counts(results),
        **_tenancy(results, ttft),
        **_replication(results, landed_bytes),
        **_speculative(results),
        "ttft_mean_s_per_window": [float(np.mean(r.ttft_s)) for r in results],
        "wall_s": wall_s,
        "requests_per_s": ttft.size / wall_s if wall_s > 0 else float("nan"),
    }
    row.update(policy_metrics(results, policy, row, ratios))
    return row


def policy_metrics(
    results: Sequence[WindowResult],
    policy: str,
    row: dict[str, Any],
    ratios: Mapping[str, tuple[str, str]] | None = None,
) -> dict[str, float]:
    """The policy's own figures (``Policy.metrics()``) over its windows: a key ending
    in ``_rate`` is the windows' unweighted mean, any other their sum (as a float);
    a key of ``ratios`` (``Policy.metric_ratios``: key -> (numerator, denominator))
    is the ratio of its two keys' sums (0.0 where the denominator's is 0), as
    ``warm_hit_rate`` is pooled by copies. A key ``row`` already has
    (``ttft_mean_s``) would overwrite a measured figure: ValueError naming the
    policy and the key."""
    extra: dict[str, float] = {}
    for result in results:
        for key, value in result.metrics.items():
            if key in row:
                raise ValueError(
                    f"policy {policy!r}: metrics() returned {key!r}, a field its result row "
                    "already has; name the policy's own figure otherwise"
                )
            extra[key] = extra.get(key, 0.0) + value
    sums = dict(extra)
    for key in extra:
        numerator, denominator = (ratios or {}).get(key, ("", ""))
        if denominator in sums:
            total = sums[denominator]
            extra[key] = sums.get(numerator, 0.0) / total if total else 0.0
        elif key.endswith("_rate"):
            extra[key] /= len(results)
    return extra


def _fault_counts(results: Sequence[WindowResult]) -> dict[str, int]:
    """The windows' fault counts summed (envs.sim.metrics.fault_metrics; none when
    faults are off)."""
    totals: dict[str, int] = {}
    for result in results:
        for key, value in result.summary.items():
            if key.startswith("fault_"):
                totals[key] = totals.get(key, 0) + int(value)
    return totals


CAPACITY_FRACTIONS = (
    "prefill_busy_fraction",
    "decode_busy_fraction",
    "batch_occupancy_mean",
    "kv_occupancy_mean",
)
"""Time shares of envs.sim.metrics.capacity_metrics, pooled weighted by each window's
``busy_span_s``."""
CAPACITY_PEAKS = ("batch_occupancy_peak", "kv_occupancy_peak")
"""Its highest occupancies at any instant, pooled as the highest window's."""


def _capacity(results: Sequence[WindowResult]) -> dict[str, float]:
    """The windows' capacity metrics pooled: the time shares over all windows' node
    time, ``load_imbalance`` as the mean of the windows', the peaks as their highest."""
    spans = np.array([r.summary["busy_span_s"] for r in results], dtype=float)
    if not results or not spans.sum() > 0:
        return {}
    pooled = {
        key: float(np.dot([r.summary[key] for r in results], spans) / spans.sum())
        for key in CAPACITY_FRACTIONS
    }
    pooled["load_imbalance"] = float(np.mean([r.summary["load_imbalance"] for r in results]))
    for key in CAPACITY_PEAKS:
        pooled[key] = max(float(r.summary[key]) for r in results)
    return pooled


def _tenancy(results: Sequence[WindowResult], ttft: np.ndarray) -> dict[str, Any]:
    """Per-tenant TTFT over the pooled requests (when more than one tenant sent
    them) and, in runs with model versions, the upgrades and copies they cancelled."""
    tenants = [t for r in results for t in r.tenants]
    out = tenant_ttft(tenants, ttft) if len(tenants) == ttft.size else {}
    if any("upgrades_done" in r.summary for r in results):
        for key in ("upgrades_done", "copies_cancelled_by_upgrade"):
            out[key] = int(sum(r.summary.get(key, 0) for r in results))
    return out


def _replication(results: Sequence[WindowResult], landed_bytes: float) -> dict[str, Any]:
    """The replication metrics (envs.sim.metrics.cache_life_metrics) pooled over
    the windows: sums, and the ratios of the pooled sums (a summary without
    them counts as none)."""
    saved_s = sum(r.summary.get("copy_prefill_saved_s", 0.0) for r in results)
    distinct = sum(r.summary.get("copied_prefix_bytes", 0.0) for r in results)
    per_saved = landed_bytes / saved_s if saved_s > 0 else math.inf if landed_bytes else 0.0
    return {
        "copy_prefill_saved_s": float(saved_s),
        "copy_bytes_per_prefill_s_saved": float(per_saved),
        "normal_displaced_by_copies_blocks": int(
            sum(r.summary.get("normal_displaced_by_copies_blocks", 0) for r in results)
        ),
        "replication_amplification": float(landed_bytes / distinct) if distinct else 0.0,
    }


SPECULATIVE_SUMS = (
    "speculative_accepted",
    "speculative_chunks",
    "speculative_tokens",
    "speculative_compute_s",
    "speculative_used_chunks",
    "speculative_used_tokens",
    "speculative_wasted_s",
)
"""Speculative-prefill totals of envs.sim.metrics.speculative_metrics, summed over windows."""


def _speculative(results: Sequence[WindowResult]) -> dict[str, Any]:
    """The windows' speculative-prefill totals summed (refusals by reason); none
    for a policy that never called ``speculate`` (or summaries without them), so
    its row is as before."""
    asked = [
        r.summary.get("speculative_accepted", 0)
        + sum(r.summary.get("speculative_refused", {}).values())
        for r in results
    ]
    if not any(asked):
        return {}
    pooled: dict[str, Any] = {key: sum(r.summary[key] for r in results) for key in SPECULATIVE_SUMS}
    refused: dict[str, int] = {}
    for result in results:
        for reason, count in result.summary["speculative_refused"].items():
            refused[reason] = refused.get(reason, 0) + count
    pooled["speculative_refused"] = refused
    return pooled


def floor_row(
    floors: Sequence[np.ndarray], setup: str, workload: str, config: SimConfig
) -> dict[str, Any]:
    """The ``floor`` row: TTFT statistics of the per-request lower bounds, pooled
    over the windows like a policy's (a lower bound per request bounds every
    statistic of the pooled TTFTs)."""
    ttft = _concat(floors)
    return {
        "setup": setup,
        "workload": workload,
        "policy": FLOOR,
        "causal_kv": config.causal_kv,
        "copy_model": config.copy_model,
        "windows": len(floors),
        "requests": int(ttft.size),
        **ttft_stats(ttft),
        "ttft_mean_s_per_window": [float(np.mean(f)) for f in floors],
    }


def floor_capacity_row(
    means: Sequence[float],
    floors: Sequence[np.ndarray],
    setup: str,
    workload: str,
    config: SimConfig,
) -> dict[str, Any]:
    """The ``floor_capacity`` row: the windows' capacity-aware bounds on mean TTFT
    pooled by their requests (a bound on each window's sum bounds the pooled mean);
    it bounds no percentile, so those are None (and there are no per-request TTFTs)."""
    sizes = np.array([f.size for f in floors], dtype=float)
    pooled = float(np.dot(means, sizes) / sizes.sum()) if sizes.sum() else float("nan")
    stats = {key: None for key in ttft_stats(np.zeros(0))}
    return {
        "setup": setup,
        "workload": workload,
        "policy": FLOOR_CAPACITY,
        "causal_kv": config.causal_kv,
        "copy_model": config.copy_model,
        "windows": len(means),
        "requests": int(sizes.sum()),
        **stats,
        "ttft_mean_s": pooled,
        "ttft_mean_s_per_window": [float(m) for m in means],
    }


def _group(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """The comparison a row belongs to: its setup, workload and simulator model."""
    return (row["setup"], row["workload"], row["causal_kv"], row["copy_model"])


NO_GAP = 1e-2
"""A reference statistic within this share of itself (1 %) above its lower bound
has no gap to close: a share of so small a gap magnifies what is left (one a hair
above zero gave a floor gap of -508,241 %; btb 0.4 % above the floor on a user's
trace, -18,422 % for a policy 74 % slower than btb)."""


def add_floor_gaps(rows: Sequence[dict[str, Any]], reference: str = GAP_REFERENCE) -> None:
    """Set each row's ``floor_gap_closed_mean_pct`` / ``_p95_pct``: the share (%) of
    the gap from ``reference`` (btb) down to the floor that the row's policy closes
    on mean / p95 TTFT, ``100 (ref - row) / (ref - floor)``: 0 is btb, 100 the floor,
    negative worse than btb. None without a reference or floor row, or no gap (or a
    row without the statistic): btb less than :data:`NO_GAP` (1 % of btb's
    statistic) above the bound, where the share would magnify what is left
    (qwen3-8b's 60 s bursts: every policy's p95 is the floor's, 5e-15 s apart). With a
    ``floor_capacity`` row, likewise ``floor_capacity_gap_closed_mean_pct`` against
    it (mean TTFT only)."""
    refs = {_group(row): row for row in rows if row["policy"] == reference}
    lows = {bound: {_group(row): row for row in rows if row["policy"] == bound} for bound in BOUNDS}
    gaps = [(FLOOR, "mean"), (FLOOR, "p95")]
    if lows[FLOOR_CAPACITY]:
        gaps.append((FLOOR_CAPACITY, "mean"))
    for row in rows:
        ref = refs.get(_group(row))
        for bound, stat in gaps:
            low = lows[bound].get(_group(row))
            key, value = f"{bound}_gap_closed_{stat}_pct", f"ttft_{stat}_s"
            row[key] = None
            if ref is None or low is None or None in (row[value], ref[value], low[value]):
                continue
            if ref[value] - low[value] > NO_GAP * abs(ref[value]):
                row[key] = 100.0 * (ref[value] - row[value]) / (ref[value] - low[value])


def add_reductions(rows: Sequence[dict[str, Any]], baseline: str | None) -> None:
    """Set each row's mean and p95 TTFT reduction (%) vs the baseline row of its
    (setup, workload, causal_kv, copy_model); None when there is no such row."""
    base = {_group(row): row for row in rows if row["policy"] == baseline}
    for row in rows:
        ref = base.get(_group(row))
        for stat in ("mean", "p95"):
            key = f"ttft_{stat}_reduction_pct"
            if ref is None or not ref[f"ttft_{stat}_s"] > 0 or row[f"ttft_{stat}_s"] is None:
                row[key] = None
            else:
                row[key] = 100.0 * (1.0 - row[f"ttft_{stat}_s"] / ref[f"ttft_{stat}_s"])
