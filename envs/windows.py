"""Pools of workload windows for episodes, by workload name and split."""

from __future__ import annotations

from envs.workloads.request import Workload


def window_pool(workload: str, split: str, seed: int, n_windows: int | None) -> list[Workload]:
    """The first ``n_windows`` windows (all if None) of ``workload``'s ``split``."""
    if n_windows is not None and n_windows < 1:
        raise ValueError(f"n_windows must be >= 1 or None, got {n_windows!r}")
    from envs.workloads.registry import windows

    return list(windows(workload, split=split, seed=seed, limit=n_windows))
