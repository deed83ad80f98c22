"""Pools of workload windows for episodes, by workload name and split."""

from __future__ import annotations

from typing import Any

from envs.sim.request import Workload


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
        raise ValueError(f"n_windows must be >= 1 or None, got {n_windows!r}")
    from envs.workloads.registry import windows

    pool = list(windows(workload, split=split, seed=seed, limit=n_windows, **(params or {})))
    if not pool:
        hint = ""
        if workload == "trace" and split == "val":
            hint = " (workload.val_fraction, 0 by default, sets a trace's share of 'val' windows)"
        raise ValueError(f"workload {workload!r} has no {split!r} windows{hint}")
    return pool
