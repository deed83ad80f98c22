"""Biting the Bullet (early_rdma), SPEC section 7.

If the same Y-block prefix arrives X times within Z seconds, it is *active*:
BTB makes sure M nodes hold it in HBM or will soon (resident, copy in flight,
or computing it) by RDMA-copying its Y blocks from a node that holds them to
the least-loaded nodes that don't, and routes the prefix's requests to the
least-loaded of those warm nodes. Everything else falls back to cache_aware.
Requests shorter than Y blocks never fire. ``min_prefix_blocks`` (default: Y)
lets a threshold controller fire on shorter prefixes, copying what is shared.
"""

from __future__ import annotations

from collections import deque

from envs.sim.simulator import WARM_OK, Simulator
from envs.workloads.request import Request

from baselines.policy import Policy, register
from baselines.routers import cache_aware_choice, least_loaded


@register("btb")
class BTB(Policy):
    """BTB with its four constants X (arrivals), Y (prefix blocks), Z (seconds), M (copies).

    ``y=None`` takes each request's whole prompt but its last block as the
    shared prefix (for traffic whose shared prefix length is not known ahead);
    ``min_prefix_blocks`` (default: Y, or 1 with ``y=None``) is the shortest
    prefix that may fire.
    """

    def __init__(
        self,
        x: int = 2,
        y: int | None = 256,
        z: float = 1.0,
        m: int = 4,
        min_prefix_blocks: int | None = None,
    ) -> None:
        self.set_thresholds(x, y, z, m, min_prefix_blocks)
        self._seen: dict[int, deque[float]] = {}

    def reset(self, sim: Simulator) -> None:
        self._seen = {}

    def set_thresholds(
        self, x: int, y: int | None, z: float, m: int, min_prefix_blocks: int | None = None
    ) -> None:
        """Set the constants (also mid-run: the adaptive-threshold env does)."""
        for name, value in (("x", x), ("y", y), ("m", m), ("min_prefix_blocks", min_prefix_blocks)):
            if value is None and name in ("y", "min_prefix_blocks"):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"btb.{name} must be an integer >= 1, got {value!r}")
        if not (isinstance(z, (int, float)) and z > 0):
            raise ValueError(f"btb.z must be > 0 seconds, got {z!r}")
        self.x, self.y, self.z, self.m = x, y, float(z), m
        self.min_prefix_blocks = min_prefix_blocks if min_prefix_blocks is not None else (y or 1)

    def decide(self, sim: Simulator, request: Request) -> int:
        blocks = request.blocks
        y = self.y
        if y is None:
            y = len(blocks) - 1 if len(blocks) > 1 else 1
        if len(blocks) < y or y < self.min_prefix_blocks:
            return cache_aware_choice(sim, request)
        key = blocks[y - 1]
        now = sim.now
        times = self._seen.get(key)
        if times is None:
            times = self._seen[key] = deque()
        times.append(now)
        horizon = now - self.z
        while times[0] < horizon:
            times.popleft()
        if len(times) < self.x:
            return cache_aware_choice(sim, request)
        return self._warm_and_route(sim, request, tuple(blocks[:y]))

    def _warm_and_route(self, sim: Simulator, request: Request, prefix: tuple[int, ...]) -> int:
        nodes = sim.nodes
        depth = len(prefix)
        key = prefix[-1]
        resident: list[int] = []
        warm: list[int] = []
        sources: list[int] = []
        for node in nodes:
            if node.cache.hbm_match(prefix) >= depth:
                resident.append(node.index)
                warm.append(node.index)
            elif key in node.inflight or _computes(node, depth, key):
                warm.append(node.index)
                if key not in node.inflight:
                    sources.append(node.index)
        source_pool = resident or sources
        want = min(self.m, sim.n_nodes)
        if source_pool and len(warm) < want:
            cold = [n.index for n in nodes if n.index not in warm]
            cold.sort(key=lambda i: (nodes[i].running + len(nodes[i].queue), i))
            src = min(source_pool, key=lambda i: (nodes[i].running + len(nodes[i].queue), i))
            for dst in cold[: want - len(warm)]:
                if sim.warm(src, dst, prefix) == WARM_OK:
                    warm.append(dst)
        if not warm:
            return cache_aware_choice(sim, request)
        return least_loaded(sim, warm)


def _computes(node, depth: int, key: int) -> bool:  # type: ignore[no-untyped-def]
    """Is ``node`` prefilling or queued to prefill a request with this prefix?"""
    request = node.computing
    if request is not None and len(request.blocks) >= depth and request.blocks[depth - 1] == key:
        return True
    return any(len(r.blocks) >= depth and r.blocks[depth - 1] == key for r in node.queue)
