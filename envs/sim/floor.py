"""A per-request lower bound on TTFT (the ``floor``), from the cost model alone.

No router, warming or eviction policy can serve a request sooner than this on
the given cluster, so the gap between a policy and the floor is what is left to
gain. For each request:

- with no other request sharing any leading block, it pays the cold prefill of
  its whole prompt on the cluster's fastest node;
- otherwise, for each depth of its prompt that another request shares, it
  could reuse that prefix once its KV exists anywhere and prefill the rest: it
  pays at least ``max(ready - arrival, 0) + load(prefix) + prefill(rest after
  the prefix)``; the floor is the least of these and of the cold prefill
  (recomputing can be quicker than waiting). Like the simulator, it reuses at
  most ``input - 1`` tokens. ``load(prefix)`` is the reused tokens at the
  cheapest tier's load time per token (HBM's on every preset), which the
  simulator charges for every reused token when ``SimConfig.hbm_hit_load`` is
  set (the causal default); without it an HBM hit is free, and so is the
  floor's reuse.

When a prefix's KV can first exist (``ready``): on behalf of another request
that holds it, earlier or later (a request may wait in a queue while a later one
computes the shared blocks, or has them copied over). Under causal KV a
request's prompt KV exists once its prefill ends, so no sooner than its arrival
plus its own floor, which may itself reuse another request's prefix: the floors
of all requests are found together, in order of when their KV can exist (see
:func:`_earliest_prompt_kv`). A block counts whole once its KV exists, even if
a shorter prompt filled it only partly, as the simulator reuses it. Under the
reference model (``causal_kv=False``) a request's blocks count as resident from
its admission, so no sooner than its arrival: a prefix is ready at the earliest
arrival among the other requests holding it.

Left out, each of which only makes a real run slower: queueing, batch and KV
limits, loading reused KV from a tier slower than HBM (RAM, disk) and its
latency, decode steps between prefill chunks, and copy time. In words:
docs/physics.md, "The TTFT floor".

The ``floor_capacity`` bound (:func:`ttft_mean_floor_capacity_s`) adds queueing
for the cluster's prefill capacity, for the window's mean TTFT only.

Both assume that no policy speculates (``Simulator.speculate``): a speculated
prefix can exist before the prompt that revealed it has been prefilled.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

import numpy as np

from envs.sim.config import ClusterSpec, SimConfig
from envs.sim.request import Request, Workload
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
"""A way to serve a request: (earliest start of its prefill s, its work in seconds on
the quickest node kind: the prefill, and when reusing, the reused tokens' load)."""


def _request_options(
    cluster: ClusterSpec, workload: Workload, config: SimConfig
) -> tuple[np.ndarray, list[list[Option]]]:
    """Each request's floor and its options: cold from its arrival, or the reuse of
    each shared prefix depth from when its KV can first exist on behalf of another
    request (the deepest of those ready at the same time: a shallower one bounds no
    lower, see the loop)."""
    kinds = dict.fromkeys(cluster.nodes)  # every distinct node kind, even two of one name
    costs = [NodeCosts.under(config, spec, cluster.model) for spec in kinds]

    def prefill_s(new_tokens: int, cached_tokens: int) -> float:  # on the fastest node
        return min(c.prefill_s(new_tokens, cached_tokens) for c in costs)

    block_tokens = workload.block_tokens
    loads = [(c, reuse_load_s_per_token(c, config)) for c in costs]

    def reuse_s(depth: int, n_in: int) -> float:
        """Seconds to reuse the prompt's ``depth``-block prefix and prefill its rest,
        on the node kind where that is quickest."""
        cached = min(depth * block_tokens, n_in - 1)
        return min(c.prefill_s(n_in - cached, cached) + cached * load for c, load in loads)

    requests = workload.requests
    if config.causal_kv:
        exists = _earliest_prompt_kv(requests, prefill_s, reuse_s)
    else:  # blocks count as resident from admission, so from arrival at the soonest
        exists = [request.arrival_s for request in requests]
    holders = _two_earliest(requests, exists)
    # under the reference model a lost node's request runs again elsewhere, and its
    # own blocks (resident from its admission) may have been copied there: it may
    # reuse its own prompt
    own = not config.causal_kv and reruns(config)
    floor = np.empty(len(requests))
    options: list[list[Option]] = []
    for k, request in enumerate(requests):
        n_in = request.input_tokens
        arrival = request.arrival_s
        mine = [(arrival, prefill_s(n_in, 0))]
        # ready times of the prompt's shared prefixes (on behalf of another request),
        # shallowest first; they never decrease with depth (a deeper prefix is held by
        # fewer requests). At equal ready times only the deepest prefix is kept: the
        # work of reusing c tokens (prefill of the rest, plus c loads) is concave in c,
        # so a shallower one costs no less than the deepest or the cold prefill, which
        # starts no later
        times: list[float] = []
        for block in request.blocks:
            first, first_k, second = holders[block]
            t = second if first_k == k and not own else first
            if t == math.inf:
                break
            if times and t != times[-1]:
                mine.append((max(times[-1], arrival), reuse_s(len(times), n_in)))
            times.append(t)
        if times:
            mine.append((max(times[-1], arrival), reuse_s(len(times), n_in)))
        floor[k] = min((start - arrival) + work for start, work in mine)
        options.append(mine)
    return floor, options


def reuse_load_s_per_token(costs: NodeCosts, config: SimConfig) -> float:
    """The least seconds the simulator charges for each reused token on a node of
    ``costs``: the cheapest tier's load (``forecast.reuse_plan`` charges HBM hits
    under ``hbm_hit_load`` and RAM / disk runs it loads at their own rates; a run it
    recomputes instead is a shallower reuse, which the floor bounds too); 0 without
    ``hbm_hit_load``, where an HBM hit is free."""
    if not config.hbm_hit_load:
        return 0.0
    return min(costs.load_hbm_s, costs.load_ram_s, costs.load_disk_s)


def reruns(config: SimConfig) -> bool:
    """Whether a prefill can be cut off by a lost node and run again elsewhere."""
    return bool(config.fault_node_loss_s) or config.fault_node_loss_rate_per_s > 0


def _earliest_prompt_kv(
    requests: list[Request],
    prefill_s: Callable[[int, int], float],
    reuse_s: Callable[[int, int], float],
) -> list[float]:
    """Under causal KV, the earliest time each request's prompt KV can exist: its
    arrival plus its floor, since the KV exists once the prefill ends.

    A request may reuse a prefix that *any* other request holds, earlier or later
    (a request can wait in a queue while a later one computes the shared blocks),
    from the earliest time that one's prompt KV exists; a block counts whole, even
    where a shorter prompt filled it only partly. So the times are the least
    solution of ``E_j = a_j + min(cold_j, min over depths d of max(0, R_j(d) - a_j)
    + rest_j(d))``, ``R_j(d)`` the least ``E_k`` of another request holding the
    ``d``-block prefix. Every term adds at least one token's prefill to a later
    time, so the requests settle in order of their times (a shortest-path
    computation): the one with the least tentative time is final, makes its blocks
    ready at that time, and may bring the times of the others that hold them
    forward."""
    exists = [r.arrival_s + prefill_s(r.input_tokens, 0) for r in requests]
    holding: dict[int, list[int]] = {}  # chained block id -> the requests holding it
    for k, request in enumerate(requests):
        for block in request.blocks:
            holding.setdefault(block, []).append(k)
    heap = [(t, k) for k, t in enumerate(exists)]
    heapq.heapify(heap)
    done = [False] * len(requests)
    ready: set[int] = set()  # blocks whose KV exists by the time of the request settling
    while heap:
        t, k = heapq.heappop(heap)
        if done[k] or t != exists[k]:
            continue
        done[k] = True
        blocks = requests[k].blocks
        depth = 0  # the blocks ready sooner are a prefix of the prompt (ids are chained)
        while depth < len(blocks) and blocks[depth] in ready:
            depth += 1
        ready.update(blocks[depth:])
        seen: set[int] = set()
        for d in range(len(blocks), depth, -1):  # deepest first (see _request_options)
            for j in holding[blocks[d - 1]]:
                if done[j] or j in seen:
                    continue
                seen.add(j)
                arrival, n_in = requests[j].arrival_s, requests[j].input_tokens
                sooner = arrival + ((max(t, arrival) - arrival) + reuse_s(d, n_in))
                if sooner < exists[j]:
                    exists[j] = sooner
                    heapq.heappush(heap, (sooner, j))
    return exists


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
    least (a) the sum over k of the larger of the k-th completion of SRPT on one
    machine doing ``m`` node-seconds a second (releases ``R_j``, sizes ``w_j``) and
    the k-th smallest of the requests' own ends (``R_j + w_j``, a request running at
    one node's speed at most, and its floor) (:func:`ranked_srpt_bound_s`), (b) SRPT's
    sum with each group of requests sharing a first block charged the cold prefill
    one of them must do (:func:`_charged_srpt_s`), and (c) the mean busy times of
    preemptive shortest-job-first on that machine plus ``w_j / 2`` each (a request
    runs on one node at a time). The others end no sooner than their per-request
    floor. Three
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
    # the charge's premise (the first holder of a first block computes it cold) fails
    # under the reference model with lost nodes: a copy of blocks resident from
    # admission can serve the request's own rerun
    groups = [] if not config.causal_kv and reruns(config) else _first_block_groups(workload)
    cold = np.array([mine[0][1] for mine in options])  # options[k][0]: cold, from arrival
    for release in _releases(arrival, options):
        work = np.array(
            [
                min(max(0.0, p - max(0.0, r - s)) for s, p in mine)
                for r, mine in zip(release, options, strict=True)
            ]
        )
        busy = work > SETTLED_S  # the others may be done by their release: floor only
        # each one's own end: its work at one node's speed after its release, its floor
        own = np.maximum(release[busy] + work[busy], done_by_floor[busy])
        waiting = max(
            ranked_srpt_bound_s(release[busy], work[busy], own, n_nodes),
            _charged_srpt_s(release, work, busy, arrival, cold, groups, n_nodes),
            mean_busy_bound_s(release[busy], work[busy], n_nodes),
        )
        best = max(best, waiting + float(done_by_floor[~busy].sum()))
    return floor, (best - float(arrival.sum())) / floor.size


def _first_block_groups(workload: Workload) -> list[np.ndarray]:
    """The requests grouped by their first block, the groups of two or more."""
    by_first: dict[int, list[int]] = {}
    for k, request in enumerate(workload.requests):
        by_first.setdefault(request.blocks[0], []).append(k)
    return [np.array(g) for g in by_first.values() if len(g) > 1]


def _charged_srpt_s(
    release: np.ndarray,
    work: np.ndarray,
    busy: np.ndarray,
    arrival: np.ndarray,
    cold: np.ndarray,
    groups: list[np.ndarray],
    n_nodes: int,
) -> float:
    """The SRPT bound with each group of requests sharing a first block charged one
    cold prefill.

    A request's work ``w_j`` may count reusing a prefix that another request of its
    group computes, and that one's the same of the first; but the first request of a
    group to have its first block's KV computed it cold (nobody held it before), all
    of it after its arrival. Which request that is, a schedule decides, so the group
    counts as jobs that need no more than the group's requests do, whichever it is:
    one of the group's least cold prefill released at its first arrival (the one that
    computes the block), and, with the requests in order of release ``R_(1) <= ... <=
    R_(n)``, jobs ``i = 1 .. n-1`` released at ``R_(i)`` with work
    ``min(w_(i), w_(i+1))`` (the others: the i-th of them in release order is the
    i-th or the (i+1)-th request). SRPT's least sum depends only on the jobs' releases
    and sizes, does not fall with larger sizes or later releases, so it is a bound.
    A group with a request whose work may be done by its release (not ``busy``,
    counted by its floor elsewhere) is not charged; groups are disjoint, so the rest
    are charged at once, and the requests not charged count as in
    :func:`srpt_completion_sum_s`."""
    charged = np.zeros(len(work), dtype=bool)
    releases, sizes = [], []
    for group in groups:
        if not busy[group].all():
            continue
        charged[group] = True
        order = group[np.argsort(release[group], kind="stable")]
        releases.append(np.concatenate(([arrival[group].min()], release[order][:-1])))
        sizes.append(
            np.concatenate(([cold[group].min()], np.minimum(work[order][:-1], work[order][1:])))
        )
    rest = busy & ~charged
    releases.append(release[rest])
    sizes.append(work[rest])
    return srpt_completion_sum_s(np.concatenate(releases), np.concatenate(sizes) / n_nodes)


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
    return float(sum(srpt_completions_s(release_s, size_s)))


def srpt_completions_s(release_s: np.ndarray, size_s: np.ndarray) -> list[float]:
    """The completion times of preemptive shortest-remaining-processing-time on one
    machine, as they occur (ascending). SRPT completes the most jobs by every time
    (Schrage, 1968), so no schedule on that machine ends its k-th job sooner than the
    k-th of these."""
    return _one_machine(release_s, size_s, by_remaining=True)[0]


def ranked_srpt_bound_s(
    release_s: np.ndarray, work_s: np.ndarray, own_s: np.ndarray, n_nodes: int
) -> float:
    """A lower bound on the sum of completion times of jobs (releases, work in
    node-seconds) on ``n_nodes`` nodes when each job also ends no sooner than its
    own bound ``own_s``: the k-th job to end does so no sooner than the k-th
    completion of SRPT on one machine doing ``n_nodes`` node-seconds a second
    (:func:`srpt_completions_s`) and no sooner than the k-th smallest own bound; the
    sum over k of the larger of the two. At least :func:`srpt_completion_sum_s` of
    ``work_s / n_nodes`` and the own bounds' sum."""
    srpt = np.array(srpt_completions_s(release_s, work_s / n_nodes))
    return float(np.maximum(srpt, np.sort(own_s)).sum())


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
) -> tuple[list[float], float]:
    """Preemptive scheduling on one machine, the shortest job first (by what it has
    left, or by its size): the jobs' completion times as they occur (ascending) and
    the sum of their mean busy times."""
    order = np.argsort(release_s, kind="stable")
    releases, sizes = release_s[order].tolist(), size_s[order].tolist()
    heap: list[tuple[float, int, float]] = []  # (priority, job, remaining)
    completions: list[float] = []
    busy = 0.0
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
            completions.append(t)
    return completions, busy


def _two_earliest(
    requests: list[Request], exists: list[float]
) -> dict[int, tuple[float, int, float]]:
    """For each chained block id: the earliest time a request holding it has its KV
    (``exists``), that request's index, and the next earliest time of another one
    (inf if none)."""
    found: dict[int, tuple[float, int, float]] = {}
    for k, request in enumerate(requests):
        t = exists[k]
        for block in request.blocks:
            first, first_k, second = found.get(block, (math.inf, -1, math.inf))
            if t < first:
                found[block] = (t, k, first)
            elif t < second:
                found[block] = (first, first_k, t)
    return found
