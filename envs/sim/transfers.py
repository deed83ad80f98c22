"""Warm copies of prefix KV between nodes: the :class:`Copy` record, the
simulator's copy machinery (:class:`CopyMachinery`) and the contention model's
NIC sharing.

Under the reference model (the BTB write-up's) a copy becomes a work item on the
target's timeline once its source KV exists: it takes ``latency + bytes /
target RDMA bandwidth`` and the target does nothing else meanwhile. Under the
contention model copies run in the background; all copies moving at once share
every node's NIC (egress and ingress each at the node's RDMA bandwidth) by
max-min fairness, and each lands ``latency`` after its last byte. See
docs/physics.md, "Warm copies (RDMA)".
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING

from envs.sim.cache import ORIGIN_WARM
from envs.sim.events import FLOW_EVENT, LAND_EVENT
from envs.sim.node import DECODE, IDLE
from envs.sim.request import has_prefix

if TYPE_CHECKING:
    from envs.sim.config import SimConfig
    from envs.sim.faults import Faults
    from envs.sim.node import Node
    from envs.sim.tenancy import Versions

WAIT_SOURCE = 0
QUEUED = 1
MOVING = 2
LANDED = 3
FAILED = 4  # lost with its source or target node, failed on landing (envs/sim/faults.py),
# or landing on KV gone from its source or target (CopyMachinery._lose)
CANCELLED = 5  # cancelled by a node's model upgrade before it moved (envs/sim/tenancy.py)
ENDED = (LANDED, FAILED, CANCELLED)
"""The states of a copy that will never change again."""


class Copy:
    """A warm copy of the prefix ``blocks`` from node ``src`` to node ``dst``."""

    __slots__ = (
        "blocks",
        "bytes",
        "bytes_end_s",
        "dst",
        "id",
        "issued_s",
        "key",
        "land_s",
        "n_blocks",
        "rate",
        "remaining",
        "slowdown",
        "src",
        "start_s",
        "state",
    )

    def __init__(
        self,
        copy_id: int,
        src: int,
        dst: int,
        blocks: tuple[int, ...],
        n_blocks: int,
        n_bytes: float,
        now: float,
    ) -> None:
        self.id = copy_id
        self.src = src
        self.dst = dst
        self.blocks = blocks
        self.key = blocks[-1]
        self.n_blocks = n_blocks
        self.bytes = n_bytes
        self.issued_s = now
        self.start_s = -1.0
        self.land_s = -1.0
        self.state = WAIT_SOURCE
        self.remaining = n_bytes
        self.rate = 0.0
        # contention model: when its last byte arrives at the rates set now (its
        # landing adds transfer_latency_s); ``remaining`` is as of the flows' clock
        self.bytes_end_s = math.inf
        self.slowdown = 1.0  # > 1: a slow copy (SimConfig.fault_copy_slow_prob)

    @property
    def depth(self) -> int:
        return len(self.blocks)


def max_min_rates(flows: list[Copy], nic_bw: list[float]) -> None:
    """Set ``flow.rate`` for every active flow: max-min fair shares of each
    node's egress and ingress capacity (progressive filling)."""
    capacity: dict[tuple[int, int], float] = {}
    users: dict[tuple[int, int], list[Copy]] = {}
    for flow in flows:
        for res in ((0, flow.src), (1, flow.dst)):
            capacity.setdefault(res, nic_bw[res[1]])
            users.setdefault(res, []).append(flow)
    unfrozen = {id(f): f for f in flows}
    while unfrozen:
        best_share = float("inf")
        best_res: tuple[int, int] | None = None
        for res, flows_on in users.items():
            active = [f for f in flows_on if id(f) in unfrozen]
            if active:
                share = capacity[res] / len(active)
                if share < best_share:
                    best_share, best_res = share, res
        assert best_res is not None
        for flow in [f for f in users[best_res] if id(f) in unfrozen]:
            flow.rate = best_share
            del unfrozen[id(flow)]
            for res in ((0, flow.src), (1, flow.dst)):
                capacity[res] -= best_share


class CopyMachinery(ABC):
    """The simulator's copy half: starting a copy once its source KV exists, the
    contention model's flows, landing, and releasing copies that wait for a
    source. :class:`~envs.sim.simulator.Simulator` is one; it provides the
    attributes below and implements the event queue and node timeline hooks
    (abstract here)."""

    nodes: list[Node]
    config: SimConfig
    block_tokens: int
    copies: list[Copy]
    displaced_by_copies_blocks: int
    copies_lost: int
    versions: Versions | None  # model versions and upgrades (envs.sim.tenancy)
    _flows: list[Copy]
    _flow_clock: float
    _flow_version: int
    _faults: Faults | None  # SimConfig's fault options, when any is on

    @abstractmethod
    def _push(self, t: float, kind: int, obj: object, version: int = 0) -> None:
        """Schedule an event (the simulator's event queue)."""

    @abstractmethod
    def _advance(self, node: Node, t: float) -> None:
        """Start ``node``'s next work at ``t`` (the simulator's node timeline)."""

    @abstractmethod
    def _interrupt(self, node: Node, t: float) -> None:
        """Cut ``node``'s decode segment at its next step (the simulator's node timeline)."""

    @abstractmethod
    def _drained(self, node: Node, t: float) -> None:
        """A draining ``node`` may have nothing left in flight (the simulator's upgrades)."""

    @abstractmethod
    def _replica_landed(self, node: Node, copy: Copy, t: float, normal_evicted: int) -> None:
        """A copy landed, evicting ``normal_evicted`` request-computed blocks (the
        cache lifecycle: replica TTL and metrics)."""

    @abstractmethod
    def _copy_failed(
        self, copy: Copy, target: Node, t: float, fail: Callable[[Copy, float], None]
    ) -> None:
        """What a failed copy leaves (a fault's or :meth:`_lose`'s): the target no
        longer waits for it, and the copies waiting to send on from the target what
        only it would have brought fail too (``fail``) (the simulator's)."""

    def _wake(self, node: Node, t: float) -> None:
        """Something for ``node`` became ready at ``t``: start it if the node is
        idle, or cut its decode segment at the next step."""
        if node.work == IDLE:
            self._advance(node, t)
        elif node.work == DECODE:
            self._interrupt(node, t)

    def _start_copy(self, copy: Copy, t: float) -> None:
        """The copy's source KV exists at ``t``."""
        copy.start_s = t
        if self.config.copy_model == "reference":
            copy.state = QUEUED
            target = self.nodes[copy.dst]
            target.copy_queue.append(copy)
            self._wake(target, t)
            return
        copy.state = MOVING
        copy.remaining *= copy.slowdown  # a slow copy needs that much more of the NICs' time
        self._reflow(t)
        self._flows.append(copy)
        self._schedule_flows(t)

    def _reflow(self, t: float) -> None:
        """Advance every moving copy's bytes to time ``t``. The clock never goes
        back: decode overshoot may start a copy at a step's end ahead of the event
        being handled, and a copy started after it at the earlier time moves from
        the clock on (its bytes never count before the others' have)."""
        elapsed = t - self._flow_clock
        if elapsed > 0:
            if self._flows:
                busy = set()
                for flow in self._flows:
                    flow.remaining -= flow.rate * elapsed
                    busy.add(flow.src)
                    busy.add(flow.dst)
                for index in busy:
                    self.nodes[index].rdma_busy_s += elapsed
            self._flow_clock = t

    def _schedule_flows(self, t: float) -> None:
        flows = self._flows
        self._flow_version += 1
        if not flows:
            return
        max_min_rates(flows, [n.spec.rdma_bw for n in self.nodes])
        clock = self._flow_clock  # (t, or later: the clock never goes back)
        for f in flows:
            f.bytes_end_s = clock + max(f.remaining, 0.0) / f.rate
        # from the clock, not from t: ``remaining`` is as of the clock, and a flow whose
        # bytes were done by a clock ahead of t must not land at t, before its start
        finish = min(f.bytes_end_s for f in flows)
        self._push(finish, FLOW_EVENT, None, self._flow_version)

    def _on_flow(self, t: float) -> None:
        self._reflow(t)
        # a flow has finished when the time it still needs is below what the clock
        # resolves at t (a bytes tolerance would land a copy that started a moment
        # after another one with it, before its own bytes could have arrived)
        done = [f for f in self._flows if t + f.remaining / f.rate <= t]
        self._flows = [f for f in self._flows if t + f.remaining / f.rate > t]
        latency = self.config.transfer_latency_s
        for flow in done:
            flow.remaining = 0.0
            flow.bytes_end_s = t
            if latency > 0:
                self._push(t + latency, LAND_EVENT, flow)
            else:
                self._land(flow, t)
        self._schedule_flows(t)

    def _land(self, copy: Copy, t: float) -> None:
        if self._faults is not None and not self._faults.lands(copy, t):
            return
        target = self.nodes[copy.dst]
        if self.config.copy_landing_check and self._kv_gone(copy, target):
            self._lose(copy, t)
            return
        copy.state = LANDED
        copy.land_s = t
        del target.inflight[copy.key]
        cache = target.cache
        capacity = target.cache_capacity_blocks(self.block_tokens)
        before = cache.hbm_blocks
        normal_before = cache.evicted_request_blocks
        added = cache.insert(copy.blocks, t, copy_id=copy.id, origin=ORIGIN_WARM)
        room = max(capacity - before, 0)
        self.displaced_by_copies_blocks += min(max(added - room, 0), before)
        cache.evict_to(capacity)
        self._replica_landed(target, copy, t, cache.evicted_request_blocks - normal_before)
        if target.waiting_src:
            self._release_sources(target, copy.blocks, t)
        if target.waiting_for is copy:
            target.waiting_for = None
            self._wake(target, t)
        if target.draining:  # its last copy in flight landed: it may upgrade now
            self._drained(target, t)

    def _kv_gone(self, copy: Copy, target: Node) -> bool:
        """Whether the KV ``copy`` read is gone from its source, or what it extends
        from ``target``, or the source switched models meanwhile (what it holds
        now is the new one's KV)."""
        blocks = copy.blocks
        depth = len(blocks)
        versions = self.versions
        return (
            self.nodes[copy.src].cache.hbm_match(blocks) < depth
            or target.cache.hbm_match(blocks) < depth - copy.n_blocks
            or (versions is not None and versions.version[copy.src] != versions.version[copy.dst])
        )

    def _lose(self, copy: Copy, t: float) -> None:
        """``copy`` fails without a fault: at its landing its source no longer holds
        the prefix in HBM (evicted, or dropped by a model upgrade, while the copy
        waited for the target or moved), or its target no longer holds the blocks
        the copy did not send (it sends only those the target lacked when issued),
        or its source switched to another model version (it may hold the prefix
        again, computed by the new model); or it waited for such a copy's blocks.
        Nothing lands (KV is never made up). A copy that has ended already (failed
        earlier in the same cascade) is left."""
        if copy.state in ENDED:
            return
        if copy.state == WAIT_SOURCE:
            self.nodes[copy.src].waiting_src.remove(copy)
        self.copies_lost += 1
        self._copy_failed(copy, self.nodes[copy.dst], t, self._lose)

    def _release_sources(self, node: Node, blocks: tuple[int, ...], t: float) -> None:
        """Start the copies waiting on ``node`` whose prefix ``blocks`` now holds."""
        still: list[Copy] = []
        for copy in node.waiting_src:
            if has_prefix(blocks, len(copy.blocks), copy.key):
                self._start_copy(copy, t)
            else:
                still.append(copy)
        node.waiting_src = still
