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

The ``floor_capacity`` bound (:func:`ttft_mean_floor_capacity_s`) adds queueing
for the cluster's prefill capacity, for the window's mean TTFT only.

Both assume that no policy speculates (``Simulator.speculate``): a speculated
prefix can exist before the prompt that revealed it has been prefilled. Under
causal KV they also count a prefix as ready only through earlier arrivals, so a
request that waits while a later one computes its prefix can beat them (built
by hand on a toy cluster, never seen on the registered workloads): docs/physics.md,
the end of "The capacity floor".
"""

from __future__ import annotations

import bisect
import heapq
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
    return _request_options(cluster, workload, config or SimConfig())[0]


SETTLED_S = 1e-12
"""Work left after a release at most this is taken as none (rounding), which only
weakens the capacity bound: such a request counts with its per-request floor."""

Option = tuple[float, float]
"""A way to serve a request: (earliest start of its prefill s, fastest-node prefill seconds)."""


def _request_options(
    cluster: ClusterSpec, workload: Workload, config: SimConfig
) -> tuple[np.ndarray, list[list[Option]]]:
    """Each request's floor and its options: cold from its arrival, or the reuse of
    each shared prefix depth from when its KV can first exist (the cheapest depth
    among those ready at the same time)."""
    kinds = dict.fromkeys(cluster.nodes)  # every distinct node kind, even two of one name
    costs = [
        NodeCosts(spec, cluster.model, config.mfu, config.mbu, config.attention_flops)
        for spec in kinds
    ]

    def prefill_s(new_tokens: int, cached_tokens: int) -> float:  # on the fastest node
        return min(c.prefill_s(new_tokens, cached_tokens) for c in costs)

    def reuse(depth: int, ready_s: float, arrival_s: float, n_in: int) -> Option:
        """Wait for a ``depth``-block prefix's KV, then prefill the rest of the prompt."""
        cached = min(depth * block_tokens, n_in - 1)
        return max(ready_s, arrival_s), prefill_s(n_in - cached, cached)

    block_tokens = workload.block_tokens
    ready: dict[int, float] = {}  # chained block id -> earliest time its prefix's KV exists
    holders = {} if config.causal_kv else _two_earliest(workload)
    floor = np.empty(len(workload.requests))
    options: list[list[Option]] = []
    for k, request in enumerate(workload.requests):
        n_in = request.input_tokens
        arrival = request.arrival_s
        mine = [(arrival, prefill_s(n_in, 0))]
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
                mine.append(reuse(len(times), times[-1], arrival, n_in))
            times.append(t)
        if times:
            mine.append(reuse(len(times), times[-1], arrival, n_in))
        best = min((start - arrival) + work for start, work in mine)
        floor[k] = best
        options.append(mine)
        if config.causal_kv:
            exists = arrival + best
            # prefixes ready by then keep their time; the deeper ones are ready at `exists`
            for block in request.blocks[bisect.bisect_right(times, exists) :]:
                ready[block] = min(ready.get(block, math.inf), exists)
    return floor, options


def ttft_mean_floor_capacity_s(
    cluster: ClusterSpec, workload: Workload, config: SimConfig | None = None
) -> float:
    """A lower bound on the *mean* TTFT of the window that also counts the cluster's
    prefill capacity (at least the mean of :func:`ttft_floor_s`; no bound on p95).

    Each node prefills one request at a time, at most as fast as the fastest node.
    For a release time ``R_j >= a_j`` per request, whatever option (cold, or a
    shared prefix's reuse from its ready time ``s``) a schedule serves request j
    with, it still needs ``w_j = min over options of max(0, p - max(0, R_j - s))``
    fastest-node seconds of prefill after ``R_j``. With ``m`` nodes, the requests
    with ``w_j > 0`` end after their ``R_j`` and their completion times sum to at
    least (a) SRPT's on one machine doing ``m`` node-seconds a second, releases
    ``R_j``, sizes ``w_j``, and (b) the mean busy times of preemptive
    shortest-job-first on that machine plus ``w_j / 2`` each (a request runs on one
    node at a time). The others end no sooner than their per-request floor. Three
    choices of ``R_j`` (the arrival, the start of the floor's best option, the
    ready time of the deepest shared prefix); the largest bound counts. The
    argument in words: docs/physics.md, "The capacity floor".
    """
    return floor_bounds(cluster, workload, config)[1]


def floor_bounds(
    cluster: ClusterSpec, workload: Workload, config: SimConfig | None = None
) -> tuple[np.ndarray, float]:
    """:func:`ttft_floor_s` and :func:`ttft_mean_floor_capacity_s` from one pass."""
    config = config or SimConfig()
    floor, options = _request_options(cluster, workload, config)
    if not floor.size:
        return floor, float("nan")
    arrival = np.array([r.arrival_s for r in workload.requests])
    done_by_floor = arrival + floor
    n_nodes = len(cluster.nodes)
    best = float(done_by_floor.sum())
    for release in _releases(arrival, options):
        work = np.array(
            [
                min(max(0.0, p - max(0.0, r - s)) for s, p in mine)
                for r, mine in zip(release, options, strict=True)
            ]
        )
        busy = work > SETTLED_S  # the others may be done by their release: floor only
        waiting = max(
            srpt_completion_sum_s(release[busy], work[busy] / n_nodes),
            mean_busy_bound_s(release[busy], work[busy], n_nodes),
            float(done_by_floor[busy].sum()),
        )
        best = max(best, waiting + float(done_by_floor[~busy].sum()))
    return floor, (best - float(arrival.sum())) / floor.size


def _releases(arrival: np.ndarray, options: list[list[Option]]) -> list[np.ndarray]:
    """The release times tried: arrivals; the start of each request's best option;
    the latest start among its options (its deepest shared prefix's ready time)."""
    best_start = [min(mine, key=lambda o: (o[0] + o[1], -o[0]))[0] for mine in options]
    latest = [max(s for s, _ in mine) for mine in options]
    return [arrival, np.array(best_start), np.array(latest)]


def srpt_completion_sum_s(release_s: np.ndarray, size_s: np.ndarray) -> float:
    """The sum of completion times of preemptive shortest-remaining-processing-time
    on one machine (jobs released at ``release_s``, taking ``size_s``): the least
    sum any schedule on that machine, preemptive or shared, can reach."""
    return _one_machine(release_s, size_s, by_remaining=True)[0]


def mean_busy_bound_s(release_s: np.ndarray, work_s: np.ndarray, n_nodes: int) -> float:
    """A lower bound on the sum of completion times of jobs (releases, work in
    node-seconds) on ``n_nodes`` nodes, each job on one node at a time: the mean
    busy times of preemptive shortest-job-first on one machine doing ``n_nodes``
    node-seconds a second (the least sum of mean busy times any schedule has),
    plus half of each job's work (a job that runs at most at one node's speed ends
    at least that long after its mean busy time)."""
    mean_busy = _one_machine(release_s, work_s / n_nodes, by_remaining=False)[1]
    return mean_busy + float(work_s.sum()) / 2


def _one_machine(
    release_s: np.ndarray, size_s: np.ndarray, by_remaining: bool
) -> tuple[float, float]:
    """Preemptive scheduling on one machine, the shortest job first (by what it has
    left, or by its size): the sums of the jobs' completion and mean busy times."""
    order = np.argsort(release_s, kind="stable")
    releases, sizes = release_s[order].tolist(), size_s[order].tolist()
    heap: list[tuple[float, int, float]] = []  # (priority, job, remaining)
    completions = busy = 0.0
    t = -math.inf
    i, n = 0, len(releases)
    while i < n or heap:
        if not heap:
            t = max(t, releases[i])
        while i < n and releases[i] <= t:
            heapq.heappush(heap, (sizes[i], i, sizes[i]))
            i += 1
        priority, job, remaining = heapq.heappop(heap)
        run = min(remaining, (releases[i] if i < n else math.inf) - t)
        if sizes[job] > 0:  # its share of the job's mean busy time
            busy += run * (t + run / 2) / sizes[job]
        t += run
        if run < remaining:
            left = remaining - run
            heapq.heappush(heap, (left if by_remaining else priority, job, left))
        else:
            completions += t
    return completions, busy


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
