"""Cache lifecycle actions: pin / unpin, demote / promote, and replica lifetime.

The simulator's third half, beside the event loop and the copy machinery
(:class:`CacheLifecycle`; the :class:`~envs.sim.simulator.Simulator` is one).
Every rule in words: docs/cache_actions.md, "Pin, demote and replica lifetime".

* **Pin.** ``pin(node, blocks)`` keeps a prefix wholly in the node's HBM until
  ``unpin``: LRU and capacity pressure never evict it. Pinned blocks per node are
  bounded by ``SimConfig.pin_budget_fraction`` of its KV budget. Pinned KV
  occupies HBM, so admission counts it beside the running sequences'
  reservations (KV never goes over budget under ``cache_capacity="headroom"``,
  the causal default; the reference's ``"budget"`` over-commits, pins included).
  A node with nothing running whose next request cannot fit because of its pins
  releases its oldest pins until the request fits (``pins_yielded``): pins can
  delay a request, never deadlock it.
* **Demote / promote.** ``demote`` moves a prefix (and what hangs below it) from
  HBM to host RAM, ``promote`` brings its cached run from RAM / disk up to HBM.
  Both are background DMAs on the node's host link, one at a time in the order
  asked, timed by ``NodeCosts.load_s`` (the rates a request's RAM / disk loads
  use) plus ``transfer_latency_s`` for each tier moved. A demoted prefix stays
  usable in HBM until its DMA ends. A request admitted while a promotion brings
  blocks it would load is given them when the promotion ends (its own load
  would queue behind it on the same link), unless recomputing is sooner.
* **Replica lifetime.** With ``SimConfig.replica_ttl_s`` a warm copy's blocks
  that no request used for that long are reclaimed to host RAM;
  ``SimConfig.reclaim_order="replicas_first"`` makes LRU eviction take replica
  leaves before ordinary ones (``PrefixCache``).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from envs.sim.events import LIFE_EVENT
from envs.sim.metrics import CacheLifeTotals
from envs.sim.request import has_prefix

if TYPE_CHECKING:
    from envs.sim.config import SimConfig
    from envs.sim.node import Node
    from envs.sim.request import Request
    from envs.sim.transfers import Copy


PIN_OK = "ok"
PIN_REFUSALS = ("bad_prefix", "already_pinned", "not_in_hbm", "over_budget")
MOVE_OK = "ok"
MOVE_REFUSALS = ("bad_prefix", "in_progress", "pinned", "nothing_to_move", "no_room")

DEMOTE = "demote"
PROMOTE = "promote"


class HostMove:
    """A demotion (HBM -> RAM) or promotion (RAM / disk -> HBM) on one node."""

    __slots__ = (
        "blocks",
        "end_s",
        "keep_blocks",
        "key",
        "kind",
        "n_blocks",
        "node",
        "start_s",
        "void",
    )

    def __init__(
        self,
        kind: str,
        node: int,
        blocks: tuple[int, ...],
        keep_blocks: int,
        n_blocks: int,
        start_s: float,
        end_s: float,
    ) -> None:
        self.kind = kind
        self.node = node
        self.blocks = blocks
        self.key = blocks[-1]
        self.keep_blocks = keep_blocks
        self.n_blocks = n_blocks
        self.start_s = start_s
        self.end_s = end_s
        self.void = False  # its node lost its KV before it ended (_drop_moves)


class CacheLifecycle(ABC):
    """Pin, demote / promote and replica TTLs on the simulator's nodes. The
    :class:`~envs.sim.simulator.Simulator` provides the attributes below and the
    event queue (abstract here)."""

    nodes: list[Node]
    n_nodes: int
    config: SimConfig
    block_tokens: int
    now: float
    journal: list[tuple[Any, ...]] | None
    _hbm_hit_load: bool  # SimConfig.hbm_hit_load, read once

    @abstractmethod
    def _push(self, t: float, kind: int, obj: object, version: int = 0) -> None:
        """Schedule an event (the simulator's event queue)."""

    @abstractmethod
    def _node_arg(self, what: str, node: object) -> int:
        """``node`` as a node index, or ValueError naming ``what``."""

    def _init_lifecycle(self) -> None:
        n = len(self.nodes)
        self.pin_refused: dict[str, int] = dict.fromkeys(PIN_REFUSALS, 0)
        self.demote_refused: dict[str, int] = dict.fromkeys(MOVE_REFUSALS, 0)
        self.promote_refused: dict[str, int] = dict.fromkeys(MOVE_REFUSALS, 0)
        self.life = CacheLifeTotals()
        self.moves: list[HostMove] = []
        self._host_free_s = [0.0] * n  # when each node's host link is next free
        self._moving: list[dict[int, HostMove]] = [{} for _ in range(n)]  # by prefix key
        self._promotions_in_flight = 0  # read on the admission path: 0 skips the check

    # ================================================================== pins
    def pin(self, node: int, blocks: tuple[int, ...]) -> str:
        """Pin the prefix ``blocks`` in ``node``'s HBM. Returns ``"ok"`` or the reason
        it was refused (one of ``PIN_REFUSALS``)."""
        index = self._node_arg("pin: node", node)
        if self.journal is not None:
            self.journal.append(("pin", index, tuple(blocks)))
        reason = self.pin_refusal(index, blocks)
        if reason != PIN_OK:
            self.pin_refused[reason] += 1
            return reason
        target = self.nodes[index]
        target.cache.pin(blocks)
        target.pinned_tokens = target.cache.pinned_blocks * self.block_tokens
        self.life.pins += 1
        return PIN_OK

    def pin_refusal(self, node: int, blocks: tuple[int, ...]) -> str:
        """What :meth:`pin` would answer now, without pinning (read-only)."""
        target = self.nodes[self._node_arg("pin: node", node)]
        cache = target.cache
        if not blocks:
            return "bad_prefix"
        if blocks[-1] in cache.pins:
            return "already_pinned"
        if cache.hbm_match(blocks) < len(blocks):
            return "not_in_hbm"
        new = len(blocks) - cache.pinned_depth(blocks)
        allowed = self.config.pin_budget_fraction * target.budget_tokens
        if (cache.pinned_blocks + new) * self.block_tokens > allowed:
            return "over_budget"
        return PIN_OK

    def unpin(self, node: int, blocks: tuple[int, ...]) -> int:
        """Release the pin on ``blocks`` on ``node``; returns the blocks no longer
        pinned (0 if it was not pinned)."""
        index = self._node_arg("unpin: node", node)
        if self.journal is not None:
            self.journal.append(("unpin", index, tuple(blocks)))
        return self._unpin(self.nodes[index], tuple(blocks))

    def _unpin(self, node: Node, blocks: tuple[int, ...]) -> int:
        released = node.cache.unpin(blocks)
        node.pinned_tokens = node.cache.pinned_blocks * self.block_tokens
        return released

    def _yield_pins(self, node: Node, request: Request) -> None:
        """``node`` runs nothing and its head request cannot fit beside its pins:
        release the oldest pins until it does (pins never deadlock admission)."""
        need = request.input_tokens + request.output_tokens
        pins = node.cache.pins
        while pins and node.pinned_tokens + need > node.budget_tokens:
            self._unpin(node, next(iter(pins.values())))
            self.life.pins_yielded += 1

    # ================================================================== demote / promote
    def demote(self, node: int, blocks: tuple[int, ...], keep_blocks: int = 0) -> str:
        """Move ``blocks``' HBM path on ``node`` below depth ``keep_blocks`` (and what
        hangs below it) to host RAM over the host link. The blocks stay usable in
        HBM until the move ends. Returns ``"ok"`` or a reason (``MOVE_REFUSALS``)."""
        index = self._node_arg("demote: node", node)
        blocks = tuple(blocks)
        if self.journal is not None:
            self.journal.append(("demote", index, blocks, int(keep_blocks)))
        reason = self.demote_refusal(index, blocks, keep_blocks)
        if reason != MOVE_OK:
            self.demote_refused[reason] += 1
            return reason
        target = self.nodes[index]
        n_blocks = target.cache.hbm_below(blocks, keep_blocks)
        duration = self._link_s(target, n_blocks, 0)
        self._start_move(HostMove(DEMOTE, index, blocks, keep_blocks, n_blocks, 0.0, duration))
        return MOVE_OK

    def demote_refusal(self, node: int, blocks: tuple[int, ...], keep_blocks: int = 0) -> str:
        """What :meth:`demote` would answer now, without moving anything."""
        index = self._node_arg("demote: node", node)
        cache = self.nodes[index].cache
        reason = self._move_refusal(index, blocks)
        if reason == MOVE_OK and cache.pinned_depth(blocks) > keep_blocks:
            reason = "pinned"
        if reason == MOVE_OK and cache.hbm_below(blocks, keep_blocks) == 0:
            reason = "nothing_to_move"
        return reason

    def promote(self, node: int, blocks: tuple[int, ...]) -> str:
        """Bring the cached run of ``blocks`` on ``node`` from host RAM / disk up to
        HBM over the host link, ahead of need. Returns ``"ok"`` or a reason."""
        index = self._node_arg("promote: node", node)
        blocks = tuple(blocks)
        if self.journal is not None:
            self.journal.append(("promote", index, blocks))
        reason = self.promote_refusal(index, blocks)
        if reason != MOVE_OK:
            self.promote_refused[reason] += 1
            return reason
        target = self.nodes[index]
        _, ram, disk = target.cache.match(blocks)
        duration = self._link_s(target, ram, disk)
        self._start_move(HostMove(PROMOTE, index, blocks, 0, ram + disk, 0.0, duration))
        self._promotions_in_flight += 1
        return MOVE_OK

    def promote_refusal(self, node: int, blocks: tuple[int, ...]) -> str:
        """What :meth:`promote` would answer now, without moving anything."""
        index = self._node_arg("promote: node", node)
        target = self.nodes[index]
        reason = self._move_refusal(index, blocks)
        if reason == MOVE_OK:
            _, ram, disk = target.cache.match(blocks)
            if ram + disk == 0:
                reason = "nothing_to_move"
            elif ram + disk > target.copy_room_blocks(self.block_tokens):
                reason = "no_room"
        return reason

    def _move_refusal(self, index: int, blocks: tuple[int, ...]) -> str:
        if not blocks:
            return "bad_prefix"
        if blocks[-1] in self._moving[index]:
            return "in_progress"
        return MOVE_OK

    def _link_s(self, node: Node, ram_blocks: int, disk_blocks: int) -> float:
        """Seconds on the host link to move ``ram_blocks`` at the RAM rate and
        ``disk_blocks`` at the disk rate (the rates of a request's own loads)."""
        costs = node.costs
        latency = self.config.transfer_latency_s
        bt = self.block_tokens
        seconds = 0.0
        if ram_blocks:
            seconds += costs.load_s(ram_blocks * bt, "ram") + latency
        if disk_blocks:
            seconds += costs.load_s(disk_blocks * bt, "disk") + latency
        return seconds

    def _start_move(self, move: HostMove) -> None:
        """Queue ``move`` (its ``end_s`` holds its duration) on its node's host link."""
        start = max(self.now, self._host_free_s[move.node])
        move.start_s = start
        move.end_s = start + move.end_s
        self._host_free_s[move.node] = move.end_s
        self._moving[move.node][move.key] = move
        self.moves.append(move)
        self._push(move.end_s, LIFE_EVENT, move)

    def _drop_moves(self, node: Node) -> None:
        """``node`` lost its KV (a node loss, an upgrade): its host moves end with
        nothing to move, and its host link is free."""
        for move in self._moving[node.index].values():
            move.void = True
            if move.kind == PROMOTE:
                self._promotions_in_flight -= 1
        self._moving[node.index].clear()
        self._host_free_s[node.index] = self.now

    def _end_move(self, move: HostMove, t: float) -> None:
        if move.void:
            return
        node = self.nodes[move.node]
        del self._moving[move.node][move.key]
        cache = node.cache
        if move.kind == DEMOTE:
            self.life.demoted_blocks += cache.evict_prefix(move.blocks, move.keep_blocks)
            self.life.demotions += 1
            return
        self._promotions_in_flight -= 1
        self.life.promoted_blocks += cache.promote(move.blocks, t)
        self.life.promotions += 1
        cache.evict_to(node.cache_capacity_blocks(self.block_tokens))

    def _promoted_reuse(
        self,
        node: Node,
        request: Request,
        t: float,
        hbm: int,
        hbm_t: int,
        ram_t: int,
        disk_t: int,
        reuse_s: float,
        used_blocks: int,
    ) -> tuple[int, int, float, int]:
        """How a request admitted at ``t`` reuses its cached run while a promotion
        on ``node`` brings some of it (both cores' admission calls this): it waits
        for the promotion (:meth:`_promotion_wait`) unless recomputing everything
        after its HBM run ends its prefill sooner (a promotion queued behind a long
        demotion can take longer than that). Returns (RAM tokens, disk tokens, reuse
        seconds, blocks used), as the plan without the promotion has them."""
        wait = self._promotion_wait(node, request, t, hbm_t, ram_t, disk_t)
        if wait <= 0:
            return ram_t, disk_t, reuse_s + wait, used_blocks
        costs = node.costs
        n_in = request.input_tokens
        hit = hbm_t + ram_t + disk_t
        loaded_s = reuse_s + wait + costs.prefill_s(n_in - hit, hit)
        hbm_reuse_s = hbm_t * costs.load_hbm_s if self._hbm_hit_load else 0.0
        if hbm_reuse_s + costs.prefill_s(n_in - hbm_t, hbm_t) < loaded_s:
            return 0, 0, hbm_reuse_s, hbm
        return ram_t, disk_t, reuse_s + wait, used_blocks

    def _promotion_wait(
        self, node: Node, request: Request, t: float, hbm_t: int, ram_t: int, disk_t: int
    ) -> float:
        """The change in reuse seconds of a request admitted at ``t`` that loads
        ``ram_t`` then ``disk_t`` tokens after ``hbm_t`` from HBM, while a promotion
        on ``node`` brings some of them: it takes those when the promotion ends
        (the promotion covering most of them) instead of loading them itself, and
        then reads them from HBM, charged like any HBM hit (``hbm_hit_load``)."""
        blocks = request.blocks
        bt = self.block_tokens
        covered = 0
        end_s = t
        for move in self._moving[node.index].values():
            shared = min(len(move.blocks), len(blocks))
            if move.kind != PROMOTE or not has_prefix(blocks, shared, move.blocks[shared - 1]):
                continue
            tokens = min(shared * bt, hbm_t + ram_t + disk_t) - hbm_t
            if tokens > covered:
                covered, end_s = tokens, move.end_s
        if covered <= 0:
            return 0.0
        costs = node.costs
        from_ram = min(covered, ram_t)
        own = costs.load_s(from_ram, "ram") + costs.load_s(covered - from_ram, "disk")
        read = costs.load_s(covered, "hbm") if self._hbm_hit_load else 0.0
        return (end_s - t) + read - own

    # ================================================================== replica lifetime
    def _replica_landed(self, node: Node, copy: Copy, t: float, normal_evicted: int) -> None:
        """A warm copy landed on ``node`` at ``t``, its landing evicting
        ``normal_evicted`` blocks of ordinary (request-computed) KV."""
        life = self.life
        life.normal_displaced_by_copies_blocks += normal_evicted
        life.copied_prefix_bytes.setdefault(
            copy.key, len(copy.blocks) * self.block_tokens * node.costs.kv_bytes_per_token
        )
        ttl = self.config.replica_ttl_s
        if ttl < math.inf:
            self._push(t + ttl, LIFE_EVENT, copy)

    def _on_life(self, obj: HostMove | Copy, t: float) -> None:
        """A lifecycle event: a host move ends, or a warm copy's TTL is due."""
        if isinstance(obj, HostMove):
            self._end_move(obj, t)
            return
        ttl = self.config.replica_ttl_s
        moved, again = self.nodes[obj.dst].cache.expire_copy(obj.blocks, obj.id, t, ttl)
        self.life.replica_expired_blocks += moved
        if again is not None:
            self._push(again, LIFE_EVENT, obj)

    def lifecycle_totals(self) -> CacheLifeTotals:
        """What the lifecycle counted so far, with the caches' own counters: a
        copy, which later calls and actions leave as it is (a run's records keep
        it for a summary built when first read)."""
        life = self.life
        life.copy_hit_blocks = sum(n.cache.copy_hit_blocks for n in self.nodes)
        life.copy_prefill_saved_s = sum(
            n.cache.copy_hit_blocks * self.block_tokens * n.costs.prefill_s_per_token
            for n in self.nodes
        )
        life.pin_refused = dict(self.pin_refused)
        life.demote_refused = dict(self.demote_refused)
        life.promote_refused = dict(self.promote_refused)
        return replace(life, copied_prefix_bytes=dict(life.copied_prefix_bytes))


__all__ = [
    "MOVE_OK",
    "MOVE_REFUSALS",
    "PIN_OK",
    "PIN_REFUSALS",
    "CacheLifecycle",
    "HostMove",
]
