"""``eft_pull``: btb-gym's earliest-first-token router that also copies a prefix
on demand (not a published or production router).

Each request goes where its first token is expected soonest, as ``eft_step``
estimates it (``envs.sim.forecast``: each node's current work and queued
prefills, each with what it will find cached, the rest of the decode step in
progress, then this request's prefill with its HBM hit there), with one more
option per node that lacks the request's shared prefix (its prompt blocks but
the last) and will not hold it otherwise (no request there computes it, no copy
in flight there carries it): copy the missing blocks there from a node holding
the prefix in HBM, then prefill only the request's own part. Under the reference
copy model a copy is a work item on its target and goes ahead of the target's
queue, after the copies already queued there, so that option is expected at the
target's backlog, plus those queued copies (at full speed: a slow copy's
slowdown is unseen until it moves, docs/faults.md), plus this copy (the transfer
latency and the missing blocks' bytes over the target's RDMA bandwidth), plus
the suffix's prefill. When the best such option is sooner than every node's
estimate without a copy, the router starts the copy (from the holder with the
least backlog, ties to the lower index) and routes the request to its target,
where it waits for the copy to land; otherwise (or when the simulator refuses
the copy) it routes as ``eft_step``.

It prices a copy for the request being routed only: the requests already
waiting on the target are each delayed by the copy too. It has no burst
detector and no thresholds, sees nothing of what comes later (``oracle_warm``
does), and copies only from a prefix its view shows in HBM: a prefix still
being computed is not a source (waiting for it and then copying was measured
slower on the 60 s bursts: docs/baselines.md). Under the contention copy model
the copy runs beside the target's backlog instead of before its queue, and the
estimate, which adds the two, is too high; with a delayed router view
(``SimConfig.router_view_delay_s``) a holder may have evicted the prefix since.
"""

from __future__ import annotations

from baselines.policy import register
from baselines.routers import EarliestFirstTokenStep, estimates_with_hits, soonest_node, up_nodes
from envs.sim.forecast import (
    copy_bytes,
    copy_queue_s,
    copy_s,
    prefix_of,
    usable_tokens,
    will_hold,
)
from envs.sim.request import Request
from envs.sim.simulator import Simulator


def pull_option(
    sim: Simulator, request: Request, estimates: list[tuple[float, float, int]]
) -> tuple[int, int, float] | None:
    """The soonest copy-then-route option for ``request``: (source, target,
    expected first token in seconds from now), or None when no node up holds its
    shared prefix in HBM or every other node up will hold it without a copy.
    ``estimates`` are :func:`baselines.routers.estimates_with_hits`' for ``request``."""
    prefix = prefix_of(request)
    depth = len(prefix)
    up = up_nodes(sim)
    holders = [node.index for node in up if estimates[node.index][2] >= depth]
    if not holders:
        return None
    source = min(holders, key=lambda i: (estimates[i][0], i))
    bt = sim.block_tokens
    n_in = request.input_tokens
    have = usable_tokens(depth, bt, n_in)
    latency_s = sim.config.transfer_latency_s
    best: tuple[int, int, float] | None = None
    for node in up:
        j = node.index
        backlog, _, hit = estimates[j]
        if hit >= depth or will_hold(node, prefix):
            continue
        moved_s = copy_s(copy_bytes(depth - hit, bt, node), node, latency_s)
        ahead_s = copy_queue_s(node, latency_s)
        first = backlog + ahead_s + moved_s + node.costs.prefill_s(n_in - have, have)
        if best is None or first < best[2]:
            best = (source, j, first)
    return best


@register("eft_pull")
class EarliestFirstTokenPull(EarliestFirstTokenStep):
    """btb-gym's router: ``eft_step``, or a copy of the request's prefix to the
    node where, copied, its first token is expected sooner than anywhere without
    a copy (see the module docstring)."""

    def decide(self, sim: Simulator, request: Request) -> int:
        return self.route(sim, request, self.estimates(sim, request))

    def estimates(self, sim: Simulator, request: Request) -> list[tuple[float, float, int]]:
        """Each node's (backlog, expected first token, HBM hit) for ``request``
        (:func:`baselines.routers.estimates_with_hits`, with this router's memo and
        decode step)."""
        return estimates_with_hits(sim, request, self._memo, self.step_wait)

    def route(
        self, sim: Simulator, request: Request, estimates: list[tuple[float, float, int]]
    ) -> int:
        """The node for ``request`` given its :meth:`estimates`, starting the copy
        if it pulls one."""
        node = soonest_node(sim, estimates)
        pull = pull_option(sim, request, estimates)
        if pull is not None:
            source, target, first = pull
            if first < estimates[node][1] and sim.warm(source, target, prefix_of(request)) == "ok":
                return target
        return node
