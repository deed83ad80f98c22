"""BTB's X-in-Z test: how many times a prefix arrived within the last Z seconds.

A prefix is *active* (BTB) or *recurring* (the causal teacher) once it has
arrived X times within Z seconds, this arrival included. Both ask this one
window, so the two rules cannot drift apart: BTB through
:class:`ArrivalWindow`, the warming planner (:mod:`baselines.planner`) through
:class:`RecentArrivals`, its causal recurrence predicate.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from envs.sim.forecast import prefix_of

if TYPE_CHECKING:
    from envs.sim.request import Request
    from envs.sim.simulator import Simulator


class ArrivalWindow:
    """Arrival times per prefix key, trimmed to the last ``z`` seconds on each count."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[int, deque[float]] = {}

    def reset(self) -> None:
        self._seen = {}

    def count(self, key: int, now: float, z: float) -> int:
        """Record an arrival of ``key`` at ``now``; return its arrivals in the
        ``z`` seconds up to ``now`` (this one included)."""
        times = self._seen.get(key)
        if times is None:
            times = self._seen[key] = deque()
        times.append(now)
        horizon = now - z
        while times[0] < horizon:
            times.popleft()
        return len(times)


class RecentArrivals:
    """The causal recurrence predicate: a request's shared prefix is its prompt
    blocks but the last (:func:`~envs.sim.forecast.prefix_of`, as the
    observation defines it), when at least the minimum deep; it recurs once it
    has arrived ``x`` times within ``z`` seconds, and then every node is wanted."""

    __slots__ = ("_min_blocks", "_window", "x", "z")

    def __init__(self, x: int, z: float) -> None:
        self.x = x
        self.z = z
        self._window = ArrivalWindow()
        self._min_blocks = 1

    def reset(self, sim: Simulator, min_blocks: int) -> None:
        self._window.reset()
        self._min_blocks = min_blocks

    def __call__(self, sim: Simulator, request: Request) -> tuple[int, int]:
        prefix = prefix_of(request)
        d = len(prefix)
        if d < self._min_blocks:
            return 0, 0
        recurs = self._window.count(prefix[-1], sim.now, self.z) >= self.x
        return d, sim.n_nodes if recurs else 0
