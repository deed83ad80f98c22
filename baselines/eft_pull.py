"""``eft_pull``: btb-gym's earliest-first-token router that also copies a prefix
on demand (not a published or production router).

Each request goes where its first token is expected soonest, as ``eft_step``
estimates it (``envs.sim.forecast``: each node's current work and queued
prefills, each with what it will find cached, the rest of the decode step in
progress, then this request's prefill with its HBM hit there), with one more
option per node that lacks the request's shared prefix (its prompt blocks but
the last): copy the missing blocks there from a node holding the prefix in HBM,
then prefill only the request's own part. Under the reference copy model a copy
is a work item on its target and goes ahead of the target's queue, so that
option is expected at the target's backlog, plus the copy (the transfer latency
and the missing blocks' bytes over the target's RDMA bandwidth), plus the
suffix's prefill. When the best such option is sooner than every node's
estimate without a copy, the router starts the copy (from the holder with the
least backlog, ties to the lower index) and routes the request to its target,
where it waits for the copy to land; otherwise it routes as ``eft_step``.

It copies only what a request about to be routed asks for, at the moment it
pays, and only from KV that exists: no burst detector and no thresholds, and no
knowledge of what comes later (``oracle_warm`` has that). A prefix still being
computed is not a source: waiting for it and then copying was measured slower
on the 60 s bursts (docs/baselines.md). Under the contention copy model the
estimate still prices a copy at the target's link alone.
"""

from __future__ import annotations

from baselines.policy import Policy, register
from baselines.routers import soonest_node
from envs.sim.forecast import (
    HitMemo,
    copy_bytes,
    copy_s,
    estimates_with_hits,
    prefix_of,
    usable_tokens,
)
from envs.sim.request import Request
from envs.sim.simulator import Simulator


def pull_option(
    sim: Simulator, request: Request, estimates: list[tuple[float, float, int]]
) -> tuple[int, int, float] | None:
    """The soonest copy-then-route option for ``request``: (source, target,
    expected first token in seconds from now), or None when no node up holds its
    shared prefix in HBM or every node up that lacks it already has a copy of it
    in flight. ``estimates`` are :func:`estimates_with_hits`' for ``request``."""
    prefix = prefix_of(request)
    depth = len(prefix)
    key = prefix[-1]
    up = [node for node in sim.nodes if not node.down]
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
        if hit >= depth or key in node.inflight:
            continue
        moved_s = copy_s(copy_bytes(depth - hit, bt, node), node, latency_s)
        first = backlog + moved_s + node.costs.prefill_s(n_in - have, have)
        if best is None or first < best[2]:
            best = (source, j, first)
    return best


@register("eft_pull")
class EarliestFirstTokenPull(Policy):
    """btb-gym's router: ``eft_step``, or a copy of the request's prefix to the
    node where, copied, its first token is expected sooner than anywhere without
    a copy (see the module docstring)."""

    def __init__(self) -> None:
        self._memo: HitMemo = {}

    def reset(self, sim: Simulator) -> None:
        self._memo = {}

    def decide(self, sim: Simulator, request: Request) -> int:
        estimates = estimates_with_hits(sim, request, self._memo, step_wait=True)
        node = soonest_node(sim, [(backlog, first) for backlog, first, _ in estimates])
        pull = pull_option(sim, request, estimates)
        if pull is not None:
            source, target, first = pull
            if first < estimates[node][1] and sim.warm(source, target, prefix_of(request)) == "ok":
                return target
        return node
