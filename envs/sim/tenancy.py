"""Model versions and rolling upgrades: what keeps one node's KV from serving another model.

Two things decide whether cached KV may serve a request:

* **the tenant**: :class:`~envs.sim.request.BlockChainer` chains a request's block
  ids under its tenant, so identical prompts of two tenants have different ids
  and never hit, or get copied, as each other's (nothing to do here);
* **the model version**: a node serves one version at a time and its prefix cache
  only ever holds KV computed under that version, so a node's cache key is (its
  version, the chained ids) without storing the version per block. Two rules keep
  it so: a warm copy between nodes of different versions is refused
  (``"version_mismatch"``), and a node that upgrades drops all its KV.

A rolling upgrade (``SimConfig.upgrade_at_s``): at its time a node starts to
*drain*. It admits nothing new (requests routed to it wait in its queue), its
running sequences finish under the old version, warm copies to it that have not
started moving are cancelled and new ones to or from it are refused
(``"upgrading"``). Once it runs nothing and no copy to it is in flight, it drops
its KV in every tier, cancels the copies still waiting for it as their source,
switches to ``SimConfig.upgrade_version`` and, after
``SimConfig.upgrade_downtime_s``, serves its queue under the new version. No
request is lost or served twice. docs/tenancy.md has the rule in words.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from envs.sim.events import UPGRADE_EVENT, WAKE_EVENT
from envs.sim.faults import served
from envs.sim.node import IDLE
from envs.sim.transfers import CANCELLED, ENDED, QUEUED, WAIT_SOURCE

if TYPE_CHECKING:
    from envs.sim.config import SimConfig
    from envs.sim.node import Node
    from envs.sim.simulator import Simulator
    from envs.sim.transfers import Copy

VERSION_REFUSALS = ("version_mismatch", "upgrading")
"""Why a warm copy is refused when nodes serve model versions (beside WARM_REFUSALS)."""
DEFAULT_VERSION = "v1"
"""Every node's version when ``SimConfig.model_versions`` is empty."""


class Versions:
    """Each node's model version and the upgrade schedule of one run.

    :meth:`of` builds one only when the run has versions (a ``model_versions`` list
    or an upgrade schedule); the simulator then asks it before every warm copy and
    lets it drain and switch nodes."""

    def __init__(self, versions: list[str], upgrade_at_s: list[float], config: SimConfig) -> None:
        self.version = versions
        self.draining = [False] * len(versions)
        self.upgrade_at_s = upgrade_at_s
        self.new_version = config.upgrade_version
        self.downtime_s = config.upgrade_downtime_s
        self.copies_cancelled = 0
        self.drain_start_s: dict[int, float] = {}
        self.switched_s: dict[int, float] = {}
        self.loaded_s: dict[int, float] = {}  # when a node's new weights are in

    @classmethod
    def of(cls, config: SimConfig, n_nodes: int) -> Versions | None:
        """The run's versions, or None if it has none (every node one version, no upgrade)."""
        if not config.model_versions and not config.upgrade_at_s:
            return None
        versions = list(config.model_versions) or [DEFAULT_VERSION] * n_nodes
        return cls(versions, list(config.upgrade_at_s), config)

    def schedule(self, sim: Simulator) -> None:
        """Put every node's upgrade on the simulator's event queue."""
        for index, at_s in enumerate(self.upgrade_at_s):
            if math.isfinite(at_s):
                sim._push(at_s, UPGRADE_EVENT, sim.nodes[index])

    def due_within(self, index: int, t: float, end: float) -> bool:
        """Is node ``index``'s upgrade due after ``t``, by ``end``? (Decode overshoot
        does not run a node's step past its upgrade time: the drain comes first.)"""
        at = self.upgrade_at_s[index] if index < len(self.upgrade_at_s) else math.inf
        return t < at <= end

    def upgrading(self, index: int, now: float) -> bool:
        """Is node ``index`` draining at ``now``? Also when it has switched at a
        time still ahead: decode overshoot (``SimConfig.decode_overshoot``) runs a
        node's decode step to its end before the router decides, so a node whose
        last sequence ends in that step switches at the step's end, which the
        router's now has not reached."""
        return self.draining[index] or self.switched_s.get(index, -math.inf) > now

    def warm_refusal(self, src: int, dst: int, now: float) -> str | None:
        """Why a copy from node ``src`` to ``dst`` may not start at ``now``, or None."""
        if self.upgrading(src, now) or self.upgrading(dst, now):
            return "upgrading"
        if self.version[src] != self.version[dst]:
            return "version_mismatch"
        return None

    # ------------------------------------------------------------------ upgrades
    def start_drain(self, sim: Simulator, node: Node, t: float) -> None:
        """``node``'s upgrade time has come: stop admitting, cancel copies to it
        that have not started moving, and switch now if it is already idle. Not
        once the workload is served (``faults.served``): the upgrade is after the run."""
        index = node.index
        if self.draining[index] or served(sim, t):
            return
        self.draining[index] = True
        node.draining = True
        self.drain_start_s[index] = t
        for copy in list(node.inflight.values()):
            if copy.state == WAIT_SOURCE:
                sim.nodes[copy.src].waiting_src.remove(copy)
            elif copy.state == QUEUED and copy in node.copy_queue:
                node.copy_queue.remove(copy)
            else:  # moving, on the node's timeline now, or ended in a cascade
                continue
            self._cancel(sim, node, copy, t)
        self.try_switch(sim, node, t)

    def loading(self, node: Node, t: float) -> bool:
        """Is ``node`` loading its new weights at ``t`` (switched less than the
        downtime ago, not lost since)? A wake at their end is pending: work routed
        to it meanwhile starts then, from the caches as they are then."""
        return t < self.loaded_s.get(node.index, -math.inf)

    def lost(self, node: Node, t: float) -> None:
        """``node`` was lost at ``t`` (its work stopped, its copies failed, its KV
        dropped, its requests re-routed): a node draining for its upgrade has drained
        and switches now; a load in progress is over (the wake at its end is void).
        Either way it comes back serving at once, as every node back from a loss does,
        and so does one whose upgrade comes while it is down (:meth:`try_switch`)."""
        if node.draining:  # (a switch without a load: the loss ends it, as below)
            self._switch(node, t)
        elif self.loading(node, t):
            self.loaded_s[node.index] = t

    def try_switch(self, sim: Simulator, node: Node, t: float) -> None:
        """Switch a draining ``node`` to the new version if it has drained."""
        if not (node.draining and node.work == IDLE and node.running == 0 and not node.inflight):
            return
        waiting, node.waiting_src = node.waiting_src, []
        for copy in waiting:  # its old-version KV will never be computed now
            if copy.state not in ENDED:  # (not failed in an earlier one's cascade)
                self._cancel(sim, sim.nodes[copy.dst], copy, t)
        sim._drop_kv(node)
        self._switch(node, t)
        if node.down:  # it loads nothing and starts nothing: back, it serves at once
            return
        index = node.index
        if self.downtime_s > 0:
            node.free_s = max(node.free_s, t + self.downtime_s)
            self.loaded_s[index] = node.free_s
            sim._push(node.free_s, WAKE_EVENT, node, node.version)  # the weights are in
        else:
            sim._advance(node, t)

    def _switch(self, node: Node, t: float) -> None:
        """``node``, drained and with its KV dropped, takes the new version at ``t``."""
        index = node.index
        self.version[index] = self.new_version
        self.draining[index] = False
        node.draining = False
        self.switched_s[index] = t

    def _cancel(self, sim: Simulator, target: Node, copy: Copy, t: float) -> None:
        """Cancel ``copy`` to ``target`` (out of its source's wait and its target's
        queue already) as a failed copy ends (``Simulator._copy_failed``: a target
        that waited for it may admit now, copies waiting to send on from the target
        what only this one would have brought are lost), then mark it cancelled."""
        self.copies_cancelled += 1
        sim._copy_failed(copy, target, t, sim._lose)
        copy.state = CANCELLED

    # ------------------------------------------------------------------ results
    def totals(self) -> dict[str, Any]:
        """What the run's metrics report of versions (``RunTotals.versions``)."""
        return {
            "model_versions": list(self.version),
            "upgrades_done": len(self.switched_s),
            "upgrade_drain_s": [
                self.switched_s[i] - self.drain_start_s[i] for i in sorted(self.switched_s)
            ],
            "copies_cancelled_by_upgrade": self.copies_cancelled,
        }
