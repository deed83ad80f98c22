"""A clairvoyant warming policy: a reference point for what a burst predictor can gain.

``oracle_warm`` is the warming planner (:mod:`baselines.planner`) with perfect
foresight: it reads the whole window's arrivals at ``reset`` (``sim.requests``)
and knows, for every request, the longest prefix it shares with any other
request of the window, and how many later requests share it. It warms exactly
the prefixes that will be reused (at least ``min_prefix_tokens`` tokens deep,
4,096 by default, with later users still to come), to as many nodes as the
prefix still has users, up to ``max_nodes`` nodes (default: all). A prefix
never reused (a decoy) is never copied. Routing, copy sources and timing are
the planner's.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from itertools import chain

from baselines.planner import WarmPlanner
from baselines.policy import register
from envs.sim.request import Request
from envs.sim.simulator import Simulator


class FutureUsers:
    """The oracle's recurrence predicate: a request's shared prefix is the longest
    one it shares with any other request of the window; it will recur while
    later requests of the window hold it (one node wanted per user still to
    come, this one included)."""

    def __init__(self) -> None:
        self._depth: list[int] = []
        self._users: dict[int, list[int]] = {}

    def reset(self, sim: Simulator, min_blocks: int) -> None:
        requests = sim.requests
        counts = Counter(chain.from_iterable(r.blocks for r in requests))
        depth = [0] * len(requests)
        keys: set[int] = set()
        for r in requests:
            blocks = r.blocks
            lo, hi = 0, len(blocks)  # ids are chained: counts never grow along a prompt
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if counts[blocks[mid - 1]] >= 2:
                    lo = mid
                else:
                    hi = mid - 1
            if lo >= min_blocks:
                depth[r.index] = lo
                keys.add(blocks[lo - 1])
        users: dict[int, list[int]] = {key: [] for key in keys}
        for r in requests:
            for key in keys.intersection(r.blocks):
                users[key].append(r.index)
        self._depth = depth
        self._users = users

    def __call__(self, sim: Simulator, request: Request) -> tuple[int, int]:
        d = self._depth[request.index]
        if not d:
            return 0, 0
        users = self._users[request.blocks[d - 1]]
        future = len(users) - bisect_right(users, request.index)
        return d, 1 + future if future else 0


@register("oracle_warm")
class OracleWarm(WarmPlanner):
    """Clairvoyant warming of reused prefixes, with earliest-first-token routing."""

    copies_metric = "oracle_copies_issued"

    def __init__(self, min_prefix_tokens: int = 4096, max_nodes: int | None = None) -> None:
        super().__init__(FutureUsers(), min_prefix_tokens, max_nodes)
