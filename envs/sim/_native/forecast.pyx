# cython: language_level=3, cdivision=True, boundscheck=False, wraparound=False, auto_pickle=False
"""The first-token forecast, compiled: each node's queued work and what a request
would find there, for a C compiler.

The readable reference is Python: :func:`envs.sim.forecast.estimates_with_hits`
(with ``queue_forecast`` and ``_causal_landing_s``) and the queue costs of
:mod:`envs.sim.queue_costs`. This module repeats them step for step (the same
float operations in the same order, Python's ``min`` and ``max`` tie rules), so
every estimate is the same to the bit; ``tests/envs/test_native_observation.py``
and ``tests/baselines/test_native_forecast.py`` check both. Change them
together.

Two users: the observation's node rows (``envs/_native/observation.pyx``, through
:func:`estimates`, the C interface in ``forecast.pxd``) and the routers that
route by the first-token estimate (``eft``, ``eft_step``, ``eft_pull``,
``eft_pull_spread``, btb_eft's fallback; :mod:`baselines.native` chooses it, by
the simulator's rule, through :func:`estimates_with_hits`).

What differs is only how, never what: a node's queue costs and running totals
are C arrays of doubles, and a :class:`Coming` adds its queue up in one C loop.
It runs on the nodes of either simulator core (the compiled core's decode step
is read in C). A memo (:data:`envs.sim.forecast.HitMemo`) filled here holds this
module's queue costs, not the reference's: keep one memo to one implementation.

The node and copy states are compile-time copies, checked at import against the
simulator's (an ImportError if they ever differ).
"""

from libc.math cimport INFINITY
from libc.stdlib cimport free, malloc, realloc

from envs.sim import node as _node
from envs.sim._native.core cimport Node
from envs.sim.forecast import decode_step_left_s as _decode_step_left_s
from envs.sim import transfers as _transfers

cdef enum:
    IDLE = 0
    PREFILL = 1
    COPY = 3
    SPECULATE = 4
    WAIT_SOURCE = 0
    MOVING = 2

if (IDLE, PREFILL, COPY, SPECULATE, WAIT_SOURCE, MOVING) != (
    _node.IDLE,
    _node.PREFILL,
    _node.COPY,
    _node.SPECULATE,
    _transfers.WAIT_SOURCE,
    _transfers.MOVING,
):
    raise ImportError("envs.sim._native.forecast: node or copy states differ from envs.sim's")


cdef inline double _work_left_s(object node, double now):
    """``envs.sim.forecast.work_left_s``."""
    cdef int work = node.work
    if work == PREFILL or work == COPY or work == SPECULATE:
        return _pymax(node.work_end - now, 0.0)
    if work == IDLE:
        return _pymax(node.free_s - now, 0.0)
    return 0.0


cdef inline double _prefill_s(object costs, double per_token, bint linear, long long new_tokens,
                              long long cached_tokens) except? -1.0:
    """``NodeCosts.prefill_s``: ``new_tokens x per_token`` when attention FLOPs are
    off, else the reference method itself."""
    if linear:
        return <double>new_tokens * per_token
    return costs.prefill_s(new_tokens, cached_tokens)


_NEVER = -(2 ** 62)  # a cache version no node reaches


cdef class QueueCosts:
    """:class:`envs.sim.queue_costs.QueueCosts` with C arrays: a node's queued
    requests and what each costs, valid for one cache version of the node."""

    cdef public long long version
    cdef list requests
    cdef double* costs
    cdef double* warm
    cdef Py_ssize_t n
    cdef Py_ssize_t capacity
    cdef dict first
    cdef dict first_short

    def __cinit__(self, long long version):
        self.version = version
        self.requests = []
        self.costs = NULL
        self.warm = NULL
        self.n = 0
        self.capacity = 0
        self.first = {}
        self.first_short = {}

    def __dealloc__(self):
        free(self.costs)
        free(self.warm)

    def __reduce__(self):
        # a cache entry: a copy (a pickled policy's memo) is one that never matches,
        # so its costs are worked out again, the same numbers
        return (QueueCosts, (_NEVER,))

    cdef bint matches(self, long long version, object queue) except -1:
        cdef Py_ssize_t n = self.n
        return (
            version == self.version
            and len(queue) >= n
            and (n == 0 or (queue[0] is self.requests[0] and queue[n - 1] is self.requests[n - 1]))
        )

    cdef int _grow(self, Py_ssize_t size) except -1:
        cdef Py_ssize_t capacity = self.capacity
        cdef double* costs
        cdef double* warm
        if size <= capacity:
            return 0
        while capacity < size:
            capacity = capacity * 2 if capacity else 16
        costs = <double*>realloc(self.costs, capacity * sizeof(double))
        if costs == NULL:
            raise MemoryError()
        self.costs = costs
        warm = <double*>realloc(self.warm, capacity * sizeof(double))
        if warm == NULL:
            raise MemoryError()
        self.warm = warm
        self.capacity = capacity
        return 0

    cdef int extend(self, object node, object queue, long long block_tokens) except -1:
        """Cost the requests of ``queue`` past the ones already kept."""
        cdef Py_ssize_t size = len(queue)
        cdef Py_ssize_t position
        cdef tuple blocks
        cdef Py_ssize_t n_blocks
        cdef long long hit, depth, n_in, have, whole
        cdef double cold, warm
        cdef bint short, seen
        if size == self.n:
            return 0
        self._grow(size)
        match = node.view.hbm_match  # what the router sees (the stale view, if any)
        costs = node.costs
        cdef double per_token = costs.prefill_s_per_token
        cdef bint linear = not costs.attention_s_coef
        cdef dict first = self.first
        cdef dict first_short = self.first_short
        for position in range(self.n, size):
            request = queue[position]
            blocks = request.blocks
            n_blocks = len(blocks)
            hit = match(blocks)
            depth = n_blocks - 1 if n_blocks > 1 else 1
            n_in = request.input_tokens
            have = _llmin(hit * block_tokens, n_in - 1)
            whole = _llmin(depth * block_tokens, n_in - 1)
            cold = _prefill_s(costs, per_token, linear, n_in - have, have)
            warm = _prefill_s(costs, per_token, linear, n_in - whole, whole)
            key = blocks[n_blocks - 2] if n_blocks > 1 else blocks[n_blocks - 1]
            short = depth > hit
            seen = key in first
            if not seen:
                first[key] = position
            if short and key not in first_short:
                first_short[key] = position
            self.requests.append(request)
            self.costs[position] = warm if seen and short else cold
            self.warm[position] = warm
        self.n = size
        return 0

    cdef double fold(self, double start_s, dict coming, double* running) except? -1.0:
        """:meth:`envs.sim.queue_costs.QueueCosts.fold` into ``running`` (n + 1
        doubles: ``start_s``, then the total after each request); the total."""
        cdef double* costs = self.costs
        cdef Py_ssize_t n = self.n
        cdef Py_ssize_t i, begin, position
        cdef double total = start_s
        cdef double arriving
        cdef list events = None
        cdef dict first_short = self.first_short
        if first_short and coming:
            for key, value in coming.items():
                found = first_short.get(key)
                if found is not None:
                    if events is None:
                        events = []
                    events.append((found, value))
        running[0] = start_s
        if events is None:  # nothing outside the queue holds it up
            for i in range(n):
                total = total + costs[i]
                running[i + 1] = total
            return total
        events.sort()
        begin = 0
        for event in events:
            position = event[0]
            arriving = event[1]
            for i in range(begin, position):
                total = total + costs[i]
                running[i + 1] = total
            if arriving > total:
                total = arriving
            total = total + self.warm[position]
            running[position + 1] = total
            begin = position + 1
        for i in range(begin, n):
            total = total + costs[i]
            running[i + 1] = total
        return total


cdef class Coming:
    """:class:`envs.sim.queue_costs.Coming`: prefix key -> seconds until it is on
    the node; the queue's running totals added up the first time they are asked for."""

    cdef dict outside
    cdef QueueCosts costs  # None: an empty queue
    cdef double start_s
    cdef double* running
    cdef double total
    cdef bint folded

    def __cinit__(self, dict outside, QueueCosts costs, double start_s):
        self.outside = outside
        self.costs = costs
        self.start_s = start_s
        self.running = NULL
        self.total = start_s
        self.folded = costs is None

    def __dealloc__(self):
        free(self.running)

    cdef int _fold(self) except -1:
        if self.folded:
            return 0
        self.running = <double*>malloc((self.costs.n + 1) * sizeof(double))
        if self.running == NULL:
            raise MemoryError()
        self.total = self.costs.fold(self.start_s, self.outside, self.running)
        self.folded = True
        return 0

    cdef double total_s(self) except? -1.0:
        self._fold()
        return self.total

    cdef bint get(self, object key, double* out) except -1:
        """Seconds until prefix ``key`` is on the node into ``out``; False if it is not coming."""
        value = self.outside.get(key)
        if value is not None:
            out[0] = value
            return True
        if self.costs is None:
            return False
        position = self.costs.first.get(key)
        if position is None:
            return False
        self._fold()
        out[0] = self.running[<Py_ssize_t>position + 1]
        return True


cdef double _causal_landing_s(list nodes, object copy, double now, int depth, dict memo,
                              dict sources, long long block_tokens, double* rdma_bw,
                              double latency) except? -1.0:
    """``envs.sim.forecast._causal_landing_s``, step for step: a contention-model
    copy moving, the latency after its bytes are through (its slowdown counted); a
    reference-model copy being written now, the rest of its work item (its slowdown
    and the transfer latency counted); one queued on its target, after the target's
    current work and the copies queued before it, each (and it) the transfer latency
    and its bytes; one waiting for its source, once the source has computed the
    prefix, then the latency and its bytes; a slowdown left out but for a copy
    under way. ``rdma_bw``: each node's ``spec.rdma_bw``,
    read the first time an estimate needs it (-1 until then); ``latency``: the
    simulation's ``transfer_latency_s``."""
    cdef double computed
    cdef Coming known
    state = copy.state
    if state == MOVING:
        rate = copy.rate
        if rate > 0:
            return _pymax(copy.bytes_end_s + latency - now, 0.0)
    cdef Py_ssize_t dst = copy.dst
    if rdma_bw[dst] < 0.0:  # not read yet in this estimate
        rdma_bw[dst] = nodes[dst].spec.rdma_bw
    cdef double transfer = copy.bytes / rdma_bw[dst]
    cdef double ahead
    if state != WAIT_SOURCE:
        target = nodes[dst]
        if target.work == COPY and target.work_obj is copy:  # being written now
            return _work_left_s(target, now)
        ahead = 0.0  # queued on its target (the reference copy model): after the
        for queued in target.copy_queue:  # target's current work and the copies before it
            if queued is copy:
                return _work_left_s(target, now) + ahead + latency + transfer
            ahead += latency + queued.bytes / rdma_bw[dst]
        return transfer
    src = copy.src
    source = nodes[src]
    if depth == 0:
        known = sources.get(src)
        if known is None:
            known = _queue_forecast(
                nodes, source, now, depth + 1, memo, None, block_tokens, rdma_bw, latency
            )
            sources[src] = known
        if known.get(copy.key, &computed):
            return computed + latency + transfer
    cdef double wait = _work_left_s(source, now)  # (whatever the source is doing)
    return wait + source.prefill_ewma_s * len(source.queue) + latency + transfer


cdef Coming _queue_forecast(list nodes, object node, double now, int depth, dict memo,
                            dict sources, long long block_tokens, double* rdma_bw,
                            double latency):
    """``envs.sim.forecast.queue_forecast``."""
    cdef dict inflight = node.inflight
    cdef dict coming = {}
    cdef QueueCosts costs
    cdef long long version
    if inflight:
        for key, copy in inflight.items():
            coming[key] = _causal_landing_s(
                nodes, copy, now, depth, memo, sources, block_tokens, rdma_bw, latency
            )
    # a decode segment is cut at the next step when a request arrives (prefill priority)
    cdef int work = node.work
    cdef double backlog = _work_left_s(node, now)
    if work == PREFILL:  # node.computing
        computing = node.work_obj.blocks
        size = len(computing)
        coming[computing[size - 2] if size > 1 else computing[size - 1]] = backlog
    queue = node.queue
    if not queue:
        return Coming(coming, None, backlog)
    version = node.view.version
    index = node.index
    found = memo.get(index)
    if type(found) is QueueCosts and (<QueueCosts>found).matches(version, queue):
        costs = <QueueCosts>found
    else:
        costs = QueueCosts(version)
        memo[index] = costs
    if len(queue) != costs.n:
        costs.extend(node, queue, block_tokens)
    return Coming(coming, costs, backlog)


cdef int estimates(object sim, object request, dict memo, double* backlogs, double* firsts,
                   long long* hits, double* rdma_bw, bint step_wait) except -1:
    """``envs.sim.forecast.estimates_with_hits`` into three C arrays (one entry a node;
    ``rdma_bw`` is scratch for as many); with ``step_wait`` each node's backlog and
    first token also count the rest of its decode step
    (:func:`envs.sim.forecast.decode_step_left_s`; 0 but for a decoding node: an
    idle node's wait until ``free_s`` is in its backlog, ``_work_left_s``)."""
    cdef double now = sim.now
    cdef double latency = sim.config.transfer_latency_s
    cdef long long bt = sim.block_tokens
    cdef tuple blocks = request.blocks
    cdef Py_ssize_t n_blocks = len(blocks)
    cdef long long n_in = request.input_tokens
    if n_blocks == 0:
        raise IndexError("tuple index out of range (a request without blocks)")
    key = blocks[n_blocks - 2] if n_blocks > 1 else blocks[n_blocks - 1]
    cdef long long depth = n_blocks - 1 if n_blocks > 1 else 1
    cdef list nodes = sim.nodes
    cdef dict sources = {}
    cdef Coming coming
    cdef bint shared
    cdef double backlog, first, arriving, per_token, wait
    cdef long long hit, cold, have
    cdef bint linear
    cdef Py_ssize_t j = 0
    for j in range(len(nodes)):
        rdma_bw[j] = -1.0
    j = 0
    for node in nodes:
        if node.draining:  # not eligible (envs.sim.forecast.estimates_with_hits)
            backlogs[j] = INFINITY
            firsts[j] = INFINITY
            hits[j] = node.view.hbm_match(blocks)
            j += 1
            continue
        # a node no copy of its own waits on has the same backlog as a copy's source
        inflight = node.inflight
        shared = True
        if inflight:
            for copy in (<dict>inflight).values():
                if copy.state == WAIT_SOURCE:
                    shared = False
                    break
        coming = None
        index = node.index
        if shared:
            coming = sources.get(index)
        if coming is None:
            coming = _queue_forecast(nodes, node, now, 0, memo, sources, bt, rdma_bw, latency)
            if shared:
                sources[index] = coming
        backlog = coming.total_s()
        hit = node.view.hbm_match(blocks)
        cold = _llmin(hit * bt, n_in - 1)
        costs = node.costs
        linear = not costs.attention_s_coef
        per_token = costs.prefill_s_per_token
        first = backlog + _prefill_s(costs, per_token, linear, n_in - cold, cold)
        if depth > hit and coming.get(key, &arriving):
            # recompute rather than wait when that is sooner (the simulator also
            # weighs the node's host RAM / disk copy, which this estimate leaves out)
            have = _llmin(depth * bt, n_in - 1)
            first = _pymin(
                _pymax(backlog, arriving) + _prefill_s(costs, per_token, linear, n_in - have, have),
                first,
            )
        backlogs[j] = backlog
        firsts[j] = first
        hits[j] = hit
        j += 1
    if step_wait:
        for j in range(len(nodes)):
            node = nodes[j]
            if type(node) is Node:  # the compiled core's, read in C
                wait = (<Node>node).step_left_s(now)
            else:
                wait = _decode_step_left_s(node, now)
            backlogs[j] += wait
            firsts[j] += wait
    return 0


def estimates_with_hits(sim, request, memo=None, bint step_wait=False):
    """``envs.sim.forecast.estimates_with_hits``, compiled: the same list of
    (backlog, first-token seconds, HBM hit) per node, to the bit. ``memo`` (a dict,
    or None for none kept) holds this module's queue costs."""
    cdef Py_ssize_t n = len(sim.nodes)
    cdef double* backlogs = <double*>malloc(n * sizeof(double))
    cdef double* firsts = <double*>malloc(n * sizeof(double))
    cdef long long* hits = <long long*>malloc(n * sizeof(long long))
    cdef double* rdma_bw = <double*>malloc(n * sizeof(double))
    try:
        if backlogs == NULL or firsts == NULL or hits == NULL or rdma_bw == NULL:
            raise MemoryError()
        estimates(sim, request, {} if memo is None else memo, backlogs, firsts, hits, rdma_bw,
                  step_wait)
        return [(backlogs[j], firsts[j], hits[j]) for j in range(n)]
    finally:
        free(backlogs)
        free(firsts)
        free(hits)
        free(rdma_bw)
