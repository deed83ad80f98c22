"""Biting the Bullet (early_rdma) as published in the BTB write-up.

If the same Y-token prefix arrives X times within Z seconds, it is *active*:
BTB makes sure M nodes hold it in HBM or have a copy of it in flight, by
RDMA-copying it from the least-loaded node that holds it to the least-loaded
nodes that neither hold it nor have it in flight, and routes the prefix's
requests to the least-loaded node on which it is *resident*. A copy in flight
joins that set only once it has landed. An active prefix resident nowhere (or
any other request) falls back to cache_aware. Requests shorter than Y never
fire. ``min_prefix_tokens`` (default: Y) lets a threshold controller fire on
shorter prefixes, copying what is shared.

Prefix lengths are tokens (``y_tokens``, default 65,536: the published 256
blocks of 256 tokens) and become blocks at ``reset`` with the workload's block
size, so the same traffic gives the same decisions at any block size: Y takes
the whole blocks that fit in ``y_tokens``, the minimum prefix the fewest whole
blocks that reach ``min_prefix_tokens`` (no more than Y's when the minimum is at
or below ``y_tokens``).

M counts nodes, so it may not exceed the cluster's node count: an explicit M
larger than the cluster is an error at ``reset``; the default (``m=None``) is the
published 4, or every node of a smaller cluster. The copy's cost is the
simulator's business (``SimConfig.copy_model``: the reference model puts it on
the target's timeline, the contention model shares NICs).

``btb_pending`` (:mod:`baselines.btb_pending`) is btb-gym's variant, which
also counts nodes still computing the prefix and routes to copies in flight;
``btb_eft`` (below) is another, whose fallback is the node with the earliest
expected first token instead of cache_aware.

Shadow mode (``shadow=True``) decides exactly as BTB would but makes no copy
and routes every request as cache_aware does, so the run is the cache_aware
run. It records each copy BTB would have issued (time, source, target, bytes,
estimated landing = now + transfer latency + bytes / target RDMA bandwidth) in
``shadow_copies``; a copy counts as *used* if, after its estimated landing, BTB's
own routing rule (least-loaded node among those holding the prefix or landed
shadow copies of it, ties to the lowest index) would have sent a request of the
prefix to its target. Shadow copies are assumed never evicted, so the hit
rate is optimistic. :meth:`BTB.metrics` reports the totals.

A node down (faults) is neither a holder, a copy target nor routed to
(``baselines.routers.up_nodes``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from baselines.native import btb_twin
from baselines.policy import Policy, register
from baselines.routers import cache_aware_choice, earliest_first_token, least_loaded, up_nodes
from baselines.window import ArrivalWindow
from envs.sim.checks import check_int, is_number
from envs.sim.errors import echoed, plural
from envs.sim.forecast import HitMemo, copy_bytes, transfer_s
from envs.sim.request import Request
from envs.sim.simulator import TARGET_HOLDS, WARM_OK, Simulator
from envs.sim.tokens import blocks_reaching, check_key_tokens, whole_blocks

PUBLISHED_M = 4
PUBLISHED_Y_TOKENS = 65_536  # 256 blocks of 256 tokens


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
    """BTB with its four constants X (arrivals), Y (prefix tokens), Z (seconds), M (copies).

    ``y_tokens=None`` takes each request's whole prompt but its last block as
    the shared prefix (for traffic whose shared prefix length is not known
    ahead); ``min_prefix_tokens`` (default: Y, or one block with
    ``y_tokens=None``) is the shortest prefix that may fire. ``shadow=True``:
    record the copies, make none (see the module docstring).
    """

    eft_fallback = False
    """Route what BTB itself does not (a prefix not active, or active but resident
    nowhere) to the node with the earliest expected first token instead of
    cache_aware: btb-gym's ``btb_eft``, not the published rule."""

    fallback_router: Policy | None = None
    """A router that decides what BTB itself does not route, before ``eft_fallback``
    and cache_aware: the threshold env's ``+spread`` rules set it to an
    ``eft_pull_spread`` (it sees only the requests it is asked about). Reset with
    BTB. Not the published rule."""

    pending = False
    """The routing rule: False the published one (route to nodes holding the prefix);
    ``btb_pending`` sets it (also copies in flight and nodes computing it)."""

    _twin_rules = True
    """The compiled decision (``baselines._native.btb``) repeats this class's rule
    (:func:`baselines.native.btb_twin`); a subclass that changes a rule method
    runs the Python."""

    def __init__(
        self,
        x: int = 2,
        y_tokens: int | None = PUBLISHED_Y_TOKENS,
        z: float = 1.0,
        m: int | None = None,
        min_prefix_tokens: int | None = None,
        shadow: bool = False,
    ) -> None:
        self._n_nodes: int | None = None
        self._block_tokens: int | None = None
        self._default_m = m is None
        self.y: int | None = None
        self.min_prefix_blocks = 1
        self.set_thresholds(x, y_tokens, z, PUBLISHED_M if m is None else m, min_prefix_tokens)
        if shadow not in (0, 1):  # True, False, 1, 0 (bool("no") would be True: shadow mode)
            raise ValueError(f"btb.shadow must be true or false, got {echoed(shadow)}")
        self.shadow = bool(shadow)
        self._window = ArrivalWindow()
        self.shadow_copies: list[ShadowCopy] = []
        self._shadow_at: dict[int, dict[int, ShadowCopy]] = {}
        self._memo: HitMemo = {}
        self._twin: Callable[[BTB, Simulator, Request], int] | None = None
        self._y_unreached = False  # the last run's: no prompt reached Y (see metrics)

    def reset(self, sim: Simulator) -> None:
        self._n_nodes = sim.n_nodes
        self._block_tokens = sim.block_tokens
        if self._default_m:
            self.m = min(PUBLISHED_M, sim.n_nodes)
        self._check_m()
        self._to_blocks()
        self._window.reset()
        self.shadow_copies = []
        self._shadow_at = {}
        self._memo = {}
        self._twin = btb_twin(self, sim)  # the compiled decide, where it applies
        if self.fallback_router is not None:
            self.fallback_router.reset(sim)
        y = self.y  # (a prompt shorter than Y never fires)
        self._y_unreached = y is not None and all(len(r.blocks) < y for r in sim.workload.requests)

    metric_ratios = {"shadow_hit_rate": ("shadow_used", "shadow_copies")}
    """Pooled over windows by shadow copies (a window that made none counts for
    nothing), not as the mean of the windows' rates."""

    def metrics(self) -> dict[str, float]:
        """Shadow-mode totals of the last run (none when not in shadow mode), and
        ``y_unreached_rate`` = 1 when no prompt of the run reached Y, so BTB could
        not fire and its fallback routed every request (only then: the rows of the
        runs where some prompt did keep their fields; a row's is the share of its
        windows)."""
        out: dict[str, float] = {}
        if self._y_unreached:
            out["y_unreached_rate"] = 1.0
        if not self.shadow:
            return out
        n = len(self.shadow_copies)
        used = sum(c.used for c in self.shadow_copies)
        return {
            **out,
            "shadow_copies": n,
            "shadow_bytes": float(sum(c.bytes for c in self.shadow_copies)),
            "shadow_used": used,
            "shadow_hit_rate": used / n if n else 0.0,
        }

    def _check_m(self, n: int | None = None) -> None:
        n = self._n_nodes if n is None else n
        if n is not None and self.m > n:
            raise ValueError(
                f"{self.name}.m = {self.m} copies exceeds the cluster's {plural(n, 'node')}: M "
                f"counts nodes holding the prefix, so it must be at most {n}"
            )

    def check_nodes(self, n_nodes: int) -> None:
        """Refuse, before any run, what ``reset`` would refuse on a cluster of ``n_nodes``:
        an explicit M above it (the default M is at most every node)."""
        if not self._default_m:
            self._check_m(n_nodes)

    def set_thresholds(
        self, x: int, y_tokens: int | None, z: float, m: int, min_prefix_tokens: int | None = None
    ) -> None:
        """Set the constants (also mid-run: the adaptive-threshold env does)."""
        for name, value in (
            ("x", x),
            ("y_tokens", y_tokens),
            ("m", m),
            ("min_prefix_tokens", min_prefix_tokens),
        ):
            if value is None and name in ("y_tokens", "min_prefix_tokens"):
                continue
            if type(value) is not int or value < 1:  # (a plain int >= 1 passes at once)
                check_int(f"btb.{name}", value, 1)
        if not (z > 0 if type(z) is float else is_number(z) and z > 0):
            raise ValueError(f"btb.z must be > 0 seconds, got {echoed(z)}")
        self.x, self.y_tokens, self.z, self.m = x, y_tokens, float(z), m
        self.min_prefix_tokens = min_prefix_tokens
        self._check_m()
        self._to_blocks()

    def _to_blocks(self) -> None:
        """Y and the minimum prefix in blocks of the workload (once it is known)."""
        bt = self._block_tokens
        if bt is None:
            return
        y = self.y_tokens
        check_key_tokens("btb.y_tokens", y, bt)
        old = self.y
        self.y = None if y is None else whole_blocks(y, bt)
        if self.y != old:
            self._y_changed()
        low = self.min_prefix_tokens
        if low is None:
            self.min_prefix_blocks = self.y or 1
        elif y is not None and self.y is not None and low <= y:
            # a minimum at or below Y never exceeds it
            self.min_prefix_blocks = min(blocks_reaching(low, bt), self.y)
        else:
            self.min_prefix_blocks = blocks_reaching(low, bt)

    def _y_changed(self) -> None:
        """Hook for state kept per prefix depth (``btb_pending`` counts requests)."""

    def decide(self, sim: Simulator, request: Request) -> int:
        twin = self._twin
        if twin is not None:  # the same choice, compiled (baselines._native.btb)
            return twin(self, sim, request)
        blocks = request.blocks
        y = self.y
        if y is None:
            if self.y_tokens is not None:  # Y in blocks is set by reset, from the workload
                raise RuntimeError(
                    f"{self.name} was not reset for this run: call policy.reset(sim) before "
                    "its first decision (run() and an env's policy_action at an episode's "
                    "first request do)"
                )
            y = len(blocks) - 1 if len(blocks) > 1 else 1
        if len(blocks) < y or y < self.min_prefix_blocks:
            return self._otherwise(sim, request)
        if self._window.count(blocks[y - 1], sim.now, self.z) < self.x:
            return self._otherwise(sim, request)
        return self._warm_and_route(sim, request, tuple(blocks[:y]))

    def _otherwise(self, sim: Simulator, request: Request) -> int:
        """Where a request goes that BTB's own rule does not route: cache_aware
        (published), with :attr:`eft_fallback` the earliest expected first token,
        with :attr:`fallback_router` that router's choice."""
        if self.fallback_router is not None and not self.shadow:
            node = self.fallback_router.decide(sim, request)
            assert node is not None  # a fallback router returns its node
            return node
        if self.eft_fallback and not self.shadow:
            return earliest_first_token(sim, request, self._memo)
        return cache_aware_choice(sim, request)

    def _holders(
        self, sim: Simulator, prefix: tuple[int, ...]
    ) -> tuple[list[int], list[int], list[int]]:
        """(nodes to route to, nodes counted among the M copies, copy sources).

        Published: route to the nodes on which the prefix is resident; those and
        the nodes with a copy in flight count; copy from a resident node."""
        depth = len(prefix)
        key = prefix[-1]
        resident: list[int] = []
        held: list[int] = []
        for node in up_nodes(sim):
            if node.view.hbm_match(prefix) >= depth:
                resident.append(node.index)
                held.append(node.index)
            elif key in node.inflight:
                held.append(node.index)
        return resident, held, resident

    def _warm_and_route(self, sim: Simulator, request: Request, prefix: tuple[int, ...]) -> int:
        route_to, held, sources = self._holders(sim, prefix)
        if self.shadow:
            return self._shadow_decide(sim, request, prefix, route_to, held, sources)
        if sources and len(held) < self.m:
            nodes = sim.nodes
            cold = [n.index for n in up_nodes(sim) if n.index not in held]
            cold.sort(key=lambda i: (nodes[i].load, i))
            src = min(sources, key=lambda i: (nodes[i].load, i))
            need = self.m - len(held)
            for dst in cold:  # a refused copy's place goes to the next cold node
                if need == 0:
                    break
                answer = sim.warm(src, dst, prefix)
                if answer == WARM_OK:
                    self._issued(route_to, dst)
                    need -= 1
                elif answer in TARGET_HOLDS:  # (a delayed view saw it cold): it counts
                    need -= 1
        if not route_to:
            return self._otherwise(sim, request)
        return least_loaded(sim, route_to)

    def _issued(self, route_to: list[int], dst: int) -> None:
        """A copy to ``dst`` was issued: published BTB routes there once it lands."""

    def _shadow_decide(
        self,
        sim: Simulator,
        request: Request,
        prefix: tuple[int, ...],
        route_to: list[int],
        held: list[int],
        sources: list[int],
    ) -> int:
        nodes = sim.nodes
        now = sim.now
        shadow = self._shadow_at.setdefault(prefix[-1], {})
        would = held + [dst for dst in shadow if dst not in held]
        if sources and len(would) < self.m:
            cold = [n.index for n in up_nodes(sim) if n.index not in would]
            cold.sort(key=lambda i: (nodes[i].load, i))
            src = min(sources, key=lambda i: (nodes[i].load, i))
            depth = len(prefix)
            for dst in cold[: self.m - len(would)]:
                target = nodes[dst]
                missing = depth - target.view.hbm_match(prefix)
                n_bytes = copy_bytes(missing, sim.block_tokens, target)
                land = now + sim.config.transfer_latency_s + transfer_s(n_bytes, target)
                copy = ShadowCopy(now, src, dst, depth, n_bytes, land)
                self.shadow_copies.append(copy)
                shadow[dst] = copy
                would.append(dst)
        ready = [i for i in would if i in route_to or (i in shadow and shadow[i].land_s <= now)]
        if ready:
            best = min(ready, key=lambda i: (nodes[i].load, i))
            if best not in route_to:
                shadow[best].used = True
        return cache_aware_choice(sim, request)


@register("btb_eft")
class BTBEft(BTB):
    """btb-gym's variant of the published BTB (same X, Y, Z, M and warming): a
    request BTB does not route itself (its prefix is not active, or is active but
    resident nowhere) goes to the node with the earliest expected first token
    (:func:`baselines.routers.earliest_first_token`) instead of cache_aware."""

    eft_fallback = True
