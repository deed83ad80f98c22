"""``btb_pending``: btb-gym's variant of BTB, which also counts KV on its way.

Published BTB (:mod:`baselines.btb`) routes an active prefix's requests only to
nodes on which the prefix is resident and copies it only from such a node.
``btb_pending`` treats a node as warm as soon as it *will* hold the prefix:

* a node with a copy of it in flight (the copy issued by this very decision
  included) is routed to at once; the request waits there for the copy when
  that ends its prefill sooner than starting at once from what the node holds
  (the simulator's rule);
* a node prefilling, or queued to prefill, a request with the prefix counts
  among the M copies, is routed to, and is a copy source (the copy starts
  when the prefill ends).

In a burst this sends followers to copy targets before the copies land, where
the published rule keeps them on the node that holds the prefix until then;
on fast (1 s) bursts under causal KV it is much better than the published rule.
Everything else (X, Y, Z, M, shadow mode) is as in :class:`~baselines.btb.BTB`.
"""

from __future__ import annotations

from baselines.btb import BTB
from baselines.policy import register
from baselines.routers import up_nodes
from envs.sim.forecast import computes_prefix
from envs.sim.node import Node
from envs.sim.request import Request
from envs.sim.simulator import Simulator


@register("btb_pending")
class BTBPending(BTB):
    """BTB whose warm set includes copies in flight and nodes computing the prefix."""

    pending = True
    _twin_rules = True

    _tracked_y: int | None
    _unprefilled: dict[tuple[int, int], int]
    _unprefilled_of: dict[int, tuple[int, int]]
    _cursor: int

    def reset(self, sim: Simulator) -> None:
        super().reset(sim)
        self._tracked_y = self.y
        self._unprefilled = {}
        self._unprefilled_of = {}
        self._cursor = 0

    def _y_changed(self) -> None:
        self._tracked_y = None  # queued requests were counted at the old depth: scan

    def decide(self, sim: Simulator, request: Request) -> int:
        twin = self._twin
        if twin is not None:  # the same choice and counting, compiled (baselines._native.btb)
            return twin(self, sim, request)
        choice = super().decide(sim, request)
        y = self._tracked_y
        if y is not None and len(request.blocks) >= y:
            entry = (choice, request.blocks[y - 1])
            self._unprefilled[entry] = self._unprefilled.get(entry, 0) + 1
            self._unprefilled_of[request.index] = entry
        return choice

    def _holders(
        self, sim: Simulator, prefix: tuple[int, ...]
    ) -> tuple[list[int], list[int], list[int]]:
        depth = len(prefix)
        key = prefix[-1]
        resident: list[int] = []
        warm: list[int] = []
        computing: list[int] = []
        for node in up_nodes(sim):
            if node.view.hbm_match(prefix) >= depth:
                resident.append(node.index)
                warm.append(node.index)
            elif key in node.inflight or self._computes(sim, node, depth, key):
                warm.append(node.index)
                if key not in node.inflight:
                    computing.append(node.index)
        return warm, warm, resident or computing

    def _issued(self, route_to: list[int], dst: int) -> None:
        route_to.append(dst)  # routed to before it lands

    def _computes(self, sim: Simulator, node: Node, depth: int, key: int) -> bool:
        """Is ``node`` prefilling or queued to prefill a request with this prefix?

        With a fixed Y the policy counts, per (node, prefix), the requests it routed
        there that have not produced their first token (``sim.first_token_log``
        tells when), so the answer costs O(1) instead of a scan of the queue.
        """
        if depth != self._tracked_y:
            return computes_prefix(node, depth, key)
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
