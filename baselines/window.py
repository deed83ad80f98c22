"""BTB's X-in-Z test: how many times a prefix arrived within the last Z seconds.

A prefix is *active* (BTB) or *recurring* (the causal teacher) once it has
arrived X times within Z seconds, this arrival included. Both ask this one
window, so the two rules cannot drift apart.
"""

from __future__ import annotations

from collections import deque


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
