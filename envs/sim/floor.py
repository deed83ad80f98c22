"""A per-request lower bound on TTFT (the ``floor``), from the cost model alone.

No router, warming or eviction policy can serve a request sooner than this on
the given cluster, so the gap between a policy and the floor is what is left to
gain. For each request, in arrival order:

- with no earlier request sharing any leading block, it pays the cold prefill of
  its whole prompt on the cluster's fastest node;
- otherwise, for each depth of its prompt that an earlier request shared, it
  could reuse that prefix once its KV exists anywhere and prefill the rest: it
  pays at least ``max(ready - arrival, 0) + prefill(rest after the prefix)``;
  the floor is the least of these and of the cold prefill (recomputing can be
  quicker than waiting). Like the simulator, it reuses at most ``input - 1``
  tokens.

When a prefix's KV can first exist (``ready``): under causal KV, a request's
prompt KV exists once its prefill ends, so no sooner than its arrival plus its
own floor; a prefix is ready at the earliest such time over the requests that
hold it. Under the reference model (``causal_kv=False``) a request's blocks count
as resident from its admission, so no sooner than its arrival; and since a
request may wait in a queue while a *later* one is admitted elsewhere and its
blocks copied over, every other request holding a prefix counts, earlier or
later: the prefix is ready at the earliest arrival among them.

Left out, each of which only makes a real run slower: queueing, batch and KV
limits, loading the reused KV (HBM, RAM, disk or RDMA), decode steps between
prefill chunks, and copy time. In words: docs/physics.md, "The TTFT floor".
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from envs.sim.config import ClusterSpec, SimConfig
from envs.sim.request import Workload
from envs.sim.timing import NodeCosts


def ttft_floor_s(
    cluster: ClusterSpec, workload: Workload, config: SimConfig | None = None
) -> np.ndarray:
    """The floor of every request's TTFT (seconds), indexed like the workload's requests.

    ``config`` supplies what the cost model reads (MFU, attention FLOPs) and the KV
    model (``causal_kv``); the default is the simulator's default.
    """
    config = config or SimConfig()
    kinds = {spec.name: spec for spec in cluster.nodes}
    costs = [
        NodeCosts(spec, cluster.model, config.mfu, config.mbu, config.attention_flops)
        for spec in kinds.values()
    ]

    def prefill_s(new_tokens: int, cached_tokens: int) -> float:  # on the fastest node
        return min(c.prefill_s(new_tokens, cached_tokens) for c in costs)

    def reuse_s(depth: int, ready_s: float, arrival_s: float, n_in: int) -> float:
        """Wait for a ``depth``-block prefix's KV, then prefill the rest of the prompt."""
        cached = min(depth * block_tokens, n_in - 1)
        return max(ready_s - arrival_s, 0.0) + prefill_s(n_in - cached, cached)

    block_tokens = workload.block_tokens
    ready: dict[int, float] = {}  # chained block id -> earliest time its prefix's KV exists
    holders = {} if config.causal_kv else _two_earliest(workload)
    floor = np.empty(len(workload.requests))
    for k, request in enumerate(workload.requests):
        n_in = request.input_tokens
        arrival = request.arrival_s
        best = prefill_s(n_in, 0)
        # ready times of the prompt's shared prefixes, shallowest first; they never
        # decrease with depth (a deeper prefix is held by fewer requests), so at
        # equal ready times the deepest prefix is the cheapest to reuse
        times: list[float] = []
        for block in request.blocks:
            if config.causal_kv:
                t = ready.get(block)
            else:  # the earliest arrival of another request holding it, at any time
                first, first_k, second = holders[block]
                t = second if first_k == k else first
                t = None if t == math.inf else t
            if t is None:
                break
            if times and t != times[-1]:
                best = min(best, reuse_s(len(times), times[-1], arrival, n_in))
            times.append(t)
        if times:
            best = min(best, reuse_s(len(times), times[-1], arrival, n_in))
        floor[k] = best
        if config.causal_kv:
            exists = arrival + best
            # prefixes ready by then keep their time; the deeper ones are ready at `exists`
            for block in request.blocks[bisect.bisect_right(times, exists) :]:
                ready[block] = min(ready.get(block, math.inf), exists)
    return floor


def _two_earliest(workload: Workload) -> dict[int, tuple[float, int, float]]:
    """For each chained block id: the earliest arrival of a request holding it, that
    request's index, and the next earliest arrival of another one (inf if none)."""
    found: dict[int, tuple[float, int, float]] = {}
    for k, request in enumerate(workload.requests):
        t = request.arrival_s
        for block in request.blocks:
            first, first_k, second = found.get(block, (math.inf, -1, math.inf))
            if t < first:
                found[block] = (t, k, first)
            elif t < second:
                found[block] = (first, first_k, t)
    return found
