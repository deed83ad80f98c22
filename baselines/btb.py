"""Biting the Bullet (early_rdma), SPEC section 7.

If the same Y-block prefix arrives X times within Z seconds, it is *active*:
BTB makes sure M nodes hold it in HBM or will soon (resident, copy in flight,
or computing it) by RDMA-copying its Y blocks from a node that holds them to
the least-loaded nodes that don't, and routes the prefix's requests to the
least-loaded of those warm nodes. Everything else falls back to cache_aware.
Requests shorter than Y blocks never fire. ``min_prefix_blocks`` (default: Y)
lets a threshold controller fire on shorter prefixes, copying what is shared.

M counts nodes, so it may not exceed the cluster's node count: an explicit M
larger than the cluster is an error at ``reset``; the default (``m=None``) is the
published 4, or every node of a smaller cluster. The copy's cost is the
simulator's business (``SimConfig.copy_model``: the reference model puts it on
the target's timeline, the contention model shares NICs).

Shadow mode (``shadow=True``) decides exactly as BTB would but makes no copy
and routes every request as cache_aware does, so the run is the cache_aware
run. It records each copy BTB would have issued (time, source, target, bytes,
estimated landing = now + transfer latency + bytes / target RDMA bandwidth) in
``shadow_copies``; a copy counts as *used* if, after its estimated landing, BTB's
own routing rule (least-loaded node among those holding the prefix or shadow
copies of it, ties to the lowest index) would have sent a request of the
prefix to its target. Shadow copies are assumed never evicted, so the hit
rate is optimistic. :meth:`BTB.metrics` reports the totals.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from baselines.policy import Policy, register
from baselines.routers import cache_aware_choice, least_loaded
from envs.sim.checks import check_int, is_number
from envs.sim.node import Node
from envs.sim.simulator import WARM_OK, Simulator
from envs.workloads.request import Request

PUBLISHED_M = 4


@dataclass(slots=True)
class ShadowCopy:
    """A copy BTB would have made in shadow mode."""

    issued_s: float
    src: int
    dst: int
    prefix_blocks: int
    bytes: float
    land_s: float
    used: bool = False


@register("btb")
class BTB(Policy):
    """BTB with its four constants X (arrivals), Y (prefix blocks), Z (seconds), M (copies).

    ``y=None`` takes each request's whole prompt but its last block as the
    shared prefix (for traffic whose shared prefix length is not known ahead);
    ``min_prefix_blocks`` (default: Y, or 1 with ``y=None``) is the shortest
    prefix that may fire. ``shadow=True``: record the copies, make none (see
    the module docstring).
    """

    def __init__(
        self,
        x: int = 2,
        y: int | None = 256,
        z: float = 1.0,
        m: int | None = None,
        min_prefix_blocks: int | None = None,
        shadow: bool = False,
    ) -> None:
        self._n_nodes: int | None = None
        self._default_m = m is None
        self._tracked_y: int | None = None
        self._unprefilled: dict[tuple[int, int], int] = {}
        self._unprefilled_of: dict[int, tuple[int, int]] = {}
        self._cursor = 0
        self.set_thresholds(x, y, z, PUBLISHED_M if m is None else m, min_prefix_blocks)
        self.shadow = bool(shadow)
        self._seen: dict[int, deque[float]] = {}
        self.shadow_copies: list[ShadowCopy] = []
        self._shadow_at: dict[int, dict[int, ShadowCopy]] = {}

    def reset(self, sim: Simulator) -> None:
        self._tracked_y = self.y
        self._unprefilled = {}
        self._unprefilled_of = {}
        self._cursor = 0
        self._n_nodes = sim.n_nodes
        if self._default_m:
            self.m = min(PUBLISHED_M, sim.n_nodes)
        self._check_m()
        self._seen = {}
        self.shadow_copies = []
        self._shadow_at = {}

    def metrics(self) -> dict[str, float]:
        """Shadow-mode totals of the last run (empty when not in shadow mode)."""
        if not self.shadow:
            return {}
        n = len(self.shadow_copies)
        used = sum(c.used for c in self.shadow_copies)
        return {
            "shadow_copies": n,
            "shadow_bytes": float(sum(c.bytes for c in self.shadow_copies)),
            "shadow_used": used,
            "shadow_hit_rate": used / n if n else 0.0,
        }

    def _check_m(self) -> None:
        n = self._n_nodes
        if n is not None and self.m > n:
            raise ValueError(
                f"btb.m = {self.m} copies exceeds the cluster's {n} nodes: M counts nodes "
                f"holding the prefix, so it must be at most {n}"
            )

    def set_thresholds(
        self, x: int, y: int | None, z: float, m: int, min_prefix_blocks: int | None = None
    ) -> None:
        """Set the constants (also mid-run: the adaptive-threshold env does)."""
        for name, value in (("x", x), ("y", y), ("m", m), ("min_prefix_blocks", min_prefix_blocks)):
            if value is None and name in ("y", "min_prefix_blocks"):
                continue
            check_int(f"btb.{name}", value, 1)
        if not (is_number(z) and z > 0):
            raise ValueError(f"btb.z must be > 0 seconds, got {z!r}")
        if y != getattr(self, "y", y):
            self._tracked_y = None  # queued requests were counted at the old depth: scan
        self.x, self.y, self.z, self.m = x, y, float(z), m
        self.min_prefix_blocks = min_prefix_blocks if min_prefix_blocks is not None else (y or 1)
        self._check_m()

    def decide(self, sim: Simulator, request: Request) -> int:
        choice = self._decide(sim, request)
        y = self._tracked_y
        if y is not None and len(request.blocks) >= y:
            entry = (choice, request.blocks[y - 1])
            self._unprefilled[entry] = self._unprefilled.get(entry, 0) + 1
            self._unprefilled_of[request.index] = entry
        return choice

    def _decide(self, sim: Simulator, request: Request) -> int:
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

    def _computes(self, sim: Simulator, node: Node, depth: int, key: int) -> bool:
        """Is ``node`` prefilling or queued to prefill a request with this prefix?

        With a fixed Y the policy counts, per (node, prefix), the requests it routed
        there that have not produced their first token (``sim.first_token_log``
        tells when), so the answer costs O(1) instead of a scan of the queue.
        """
        if depth != self._tracked_y:
            return _scan_computes(node, depth, key)
        log = sim.first_token_log
        if self._cursor < len(log):
            counts = self._unprefilled
            for k in range(self._cursor, len(log)):
                entry = self._unprefilled_of.pop(log[k].index, None)
                if entry is not None:
                    left = counts[entry] - 1
                    if left:
                        counts[entry] = left
                    else:
                        del counts[entry]
            self._cursor = len(log)
        return (node.index, key) in self._unprefilled

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
            elif key in node.inflight or self._computes(sim, node, depth, key):
                warm.append(node.index)
                if key not in node.inflight:
                    sources.append(node.index)
        source_pool = resident or sources
        want = self.m
        if self.shadow:
            return self._shadow_decide(sim, request, prefix, warm, source_pool)
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

    def _shadow_decide(
        self,
        sim: Simulator,
        request: Request,
        prefix: tuple[int, ...],
        warm: list[int],
        source_pool: list[int],
    ) -> int:
        nodes = sim.nodes
        now = sim.now
        shadow = self._shadow_at.setdefault(prefix[-1], {})
        would = warm + [dst for dst in shadow if dst not in warm]
        if source_pool and len(would) < self.m:
            cold = [n.index for n in nodes if n.index not in would]
            cold.sort(key=lambda i: (nodes[i].running + len(nodes[i].queue), i))
            src = min(source_pool, key=lambda i: (nodes[i].running + len(nodes[i].queue), i))
            depth = len(prefix)
            for dst in cold[: self.m - len(would)]:
                target = nodes[dst]
                missing = depth - target.cache.hbm_match(prefix)
                n_bytes = missing * sim.block_tokens * target.costs.kv_bytes_per_token
                land = now + sim.config.transfer_latency_s + n_bytes / target.spec.rdma_bw
                copy = ShadowCopy(now, src, dst, depth, n_bytes, land)
                self.shadow_copies.append(copy)
                shadow[dst] = copy
                would.append(dst)
        ready = [i for i in would if i in warm or shadow[i].land_s <= now]
        if ready:
            best = min(ready, key=lambda i: (nodes[i].running + len(nodes[i].queue), i))
            if best not in warm:
                shadow[best].used = True
        return cache_aware_choice(sim, request)


def _scan_computes(node: Node, depth: int, key: int) -> bool:
    """Is ``node`` prefilling or queued to prefill a request with this prefix? (a scan)"""
    request = node.computing
    if request is not None and len(request.blocks) >= depth and request.blocks[depth - 1] == key:
        return True
    return any(len(r.blocks) >= depth and r.blocks[depth - 1] == key for r in node.queue)
