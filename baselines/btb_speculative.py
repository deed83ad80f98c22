"""``btb_speculative``: BTB that prefills on idle nodes when there is nothing to copy.

Published BTB (:mod:`baselines.btb`) can only copy a prefix from a node that
holds it. When a prefix turns active (X arrivals within Z seconds) and no node
holds it yet, a brand-new prefix in a fast burst, BTB falls back to cache_aware
and copies nothing until the first prefill ends. ``btb_speculative`` is BTB as
published except in that case: it asks idle nodes (nothing running, queued or
in progress, no copy of the prefix in flight) to compute the prefix themselves
with speculative prefill (``Simulator.speculate``), least loaded first, until M
nodes hold it, have a copy in flight or are speculating it. Detection (BTB's
X-in-Z window), the copies once a source exists and the routing rule are
BTB's own: requests go to the least-loaded node on which the prefix is
resident, or by cache_aware, whose longest-match rule follows the chunks
already speculated.
"""

from __future__ import annotations

from baselines.btb import BTB
from baselines.policy import register
from baselines.routers import up_nodes
from envs.sim.node import IDLE
from envs.sim.request import Request
from envs.sim.simulator import Simulator
from envs.sim.speculation import SPECULATE_OK


@register("btb_speculative")
class BTBSpeculative(BTB):
    """BTB (same X, Y, Z, M) that speculates a sourceless active prefix on idle nodes."""

    def _warm_and_route(self, sim: Simulator, request: Request, prefix: tuple[int, ...]) -> int:
        if not self.shadow:
            _, held, sources = self._holders(sim, prefix)
            if not sources and len(held) < self.m:
                self._speculate(sim, prefix, held)
        return super()._warm_and_route(sim, request, prefix)

    def _speculate(self, sim: Simulator, prefix: tuple[int, ...], held: list[int]) -> None:
        """Speculate ``prefix`` on idle nodes until M nodes hold, receive or compute it."""
        key = prefix[-1]
        speculation = sim.speculation
        busy = set(held)
        if speculation is not None:
            busy |= {n.index for n in sim.nodes if speculation.speculating(n, key)}
        idle = [
            n.index
            for n in up_nodes(sim)
            if n.index not in busy and n.work == IDLE and not n.queue and n.running == 0
        ]  # all of load 0: in index order
        wanted = self.m - len(busy)
        for index in idle:
            if wanted <= 0:
                break
            if sim.speculate(index, prefix) == SPECULATE_OK:
                wanted -= 1
