"""Pools of workload windows for episodes, by workload name and split, and the
shorter burst segments a curriculum cuts them into."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from envs.sim.checks import check_number, check_whole_number
from envs.sim.errors import echoed
from envs.sim.request import Workload
from envs.workloads.trace_file import no_windows_error


def window_pool(
    workload: str,
    split: str,
    seed: int,
    n_windows: int | None,
    params: dict[str, Any] | None = None,
) -> list[Workload]:
    """The first ``n_windows`` windows (all if None) of ``workload``'s ``split``;
    ``params`` override the workload's generator parameters (``envs.workloads.registry``)."""
    if n_windows is not None and n_windows < 1:
        raise ValueError(f"n_windows must be >= 1 or None, got {echoed(n_windows)}")
    if params is not None and not isinstance(params, Mapping):
        raise ValueError(
            f"workload_params must be a mapping of generator parameters, got {echoed(params)}"
        )
    from envs.workloads.registry import windows

    pool = list(windows(workload, split=split, seed=seed, limit=n_windows, **(params or {})))
    if not pool:
        raise no_windows_error(workload, split, params)
    return pool


def burst_starts(window: Workload, min_requests: int) -> list[float]:
    """When each burst of ``window`` begins: the first arrival (s) of every group
    (``group_id``) of at least ``min_requests`` requests, in order."""
    first: dict[str, float] = {}
    count: dict[str, int] = {}
    for request in window.requests:  # in arrival order
        group = request.group_id
        if group:
            first.setdefault(group, request.arrival_s)
            count[group] = count.get(group, 0) + 1
    return sorted(t for group, t in first.items() if count[group] >= min_requests)


def burst_segments(
    window: Workload, bursts: int, lead_s: float = 5.0, min_requests: int = 32
) -> list[Workload]:
    """``window`` cut into shorter episodes, one starting ``lead_s`` seconds before
    each burst (:func:`burst_starts`) and running until ``lead_s`` before the
    ``bursts``-th burst after it (or the window's end): what a curriculum trains on
    before whole windows. Each segment's arrivals are shifted to start at its own
    0 s, and its caches start empty, as a window's do. Empty if the window has no
    burst."""
    check_whole_number("bursts", bursts, minimum=1)
    check_number("lead_s", lead_s)  # finite, >= 0
    starts = [max(0.0, t - lead_s) for t in burst_starts(window, min_requests)]
    segments = []
    for k, begin in enumerate(starts):
        end = starts[k + bursts] if k + bursts < len(starts) else float("inf")
        requests = [
            replace(r, arrival_s=r.arrival_s - begin)
            for r in window.requests
            if begin <= r.arrival_s < end
        ]
        if requests:
            segments.append(
                Workload(
                    name=f"{window.name}@{begin:.1f}s",
                    block_tokens=window.block_tokens,
                    requests=requests,
                    meta={**window.meta, "segment_of": window.name, "segment_s": [begin, end]},
                )
            )
    return segments
