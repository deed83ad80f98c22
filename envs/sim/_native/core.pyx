# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The simulator's hot path, compiled: a typed twin of :class:`envs.sim.node.Node`
and of the per-event methods of :class:`envs.sim.simulator.Simulator`.

The readable reference is the Python code in ``envs/sim/node.py`` and
``envs/sim/simulator.py`` (and the timing equations in ``envs/sim/timing.py`` and
``reuse_plan`` in ``envs/sim/forecast.py``); this module repeats it step for step
for a C compiler, so that a run gives the same per-request records, the same
summary and the same caches (tests/sim/test_native_sim.py runs both). Change the
two together.

What differs is only how, never what:

- :class:`Node` keeps its counters as C integers and its times as C doubles
  (``cdef public``: policies read them by name as before); the queues, heaps and
  dicts stay Python objects, so every Python module that reads or changes a node
  works on either kind;
- :class:`SimCore` is the base of the compiled simulator class
  (``envs.sim.simulator.CompiledSimulator``, which is ``SimCore`` plus the
  reference ``Simulator``): it holds the settings and counters the hot path
  reads as C fields and overrides the per-event methods (``_loop``, ``_route``,
  ``_advance``, ``_admit``, ``_on_wake``, ...) with typed ones that call each
  other as C functions. The rare features (faults, speculation, tenancy, copies
  landing, stale router views, pins, promotions) stay the reference's Python
  methods, which the compiled methods call back;
- the step times (``NodeCosts.prefill_s`` / ``decode_s``) and the reuse plan
  are computed inline from typed copies of the node's coefficients, with the
  reference's operations in the reference's order (the build turns off fused
  multiply-add, so each product is rounded as Python rounds it).
"""

from collections import deque
from heapq import heappush

import math

from libc.math cimport ceil, isfinite, sqrt

from cpython.ref cimport PyObject
from envs.sim._native.cache cimport PrefixCache as CompiledCache

cdef extern from *:
    """
    /* the instance dict of an object of a static type with a __dict__ slot, or NULL */
    static PyObject* btb_instance_dict(PyObject* obj) {
        Py_ssize_t offset = Py_TYPE(obj)->tp_dictoffset;
        return offset > 0 ? *(PyObject**)((char*)obj + offset) : NULL;
    }
    """
    PyObject* _instance_dict "btb_instance_dict"(object obj)
    Py_ssize_t PyDict_GET_SIZE(PyObject* d)

from envs.sim import events as _events
from envs.sim import node as _node_ref
from envs.sim.forecast import copy_s as _copy_s

cdef enum:
    IDLE = 0
    PREFILL = 1
    DECODE = 2
    COPY = 3
    SPECULATE = 4

cdef enum:
    WAKE_EVENT = 0
    FLOW_EVENT = 1
    LAND_EVENT = 2
    FAULT_EVENT = 3
    UPGRADE_EVENT = 4
    LIFE_EVENT = 5

if (IDLE, PREFILL, DECODE, COPY, SPECULATE) != (
    _node_ref.IDLE,
    _node_ref.PREFILL,
    _node_ref.DECODE,
    _node_ref.COPY,
    _node_ref.SPECULATE,
) or (WAKE_EVENT, FLOW_EVENT, LAND_EVENT, FAULT_EVENT, UPGRADE_EVENT, LIFE_EVENT) != (
    _events.WAKE_EVENT,
    _events.FLOW_EVENT,
    _events.LAND_EVENT,
    _events.FAULT_EVENT,
    _events.UPGRADE_EVENT,
    _events.LIFE_EVENT,
):
    raise ImportError("envs.sim._native.core: work or event constants differ from envs.sim")

cdef double INF = float("inf")


cdef inline bint _plain(object cache):
    """``cache`` is a compiled PrefixCache whose methods nothing wraps: its C methods
    may be called directly. (A stale router view, envs/sim/view.py, logs a cache's
    changes through wrappers set on the instance; they must see every call.)"""
    if type(cache) is not CompiledCache:
        return False
    cdef PyObject* attributes = _instance_dict(cache)
    return attributes == NULL or PyDict_GET_SIZE(attributes) == 0


cdef inline int _evict_to(object cache, long long capacity_blocks) except -1:
    if _plain(cache):
        (<CompiledCache>cache).c_evict_to(capacity_blocks)
    else:
        cache.evict_to(capacity_blocks)
    return 0


cdef inline int _insert(object cache, object blocks, double now, object tail) except -1:
    if _plain(cache):
        (<CompiledCache>cache).c_insert(blocks, now, () if tail is None else tail)
    elif tail is None:
        cache.insert(blocks, now)
    else:
        cache.insert(blocks, now, tail=tail)
    return 0


# ====================================================================== heaps
# The event heap ``(time, seq, kind, object, version)`` and a node's decode batch
# ``(finish_step, order, request)`` are Python lists that the reference's Python
# code also pushes to and pops from with ``heapq``. These are heapq's own
# algorithms (CPython's _heapqmodule.c: the same sifts, so the same list after
# every operation) with the tuples' order read from their first two fields as C
# numbers: the second is unique in each heap (a sequence number), so the first
# two decide every comparison, as in Python's tuple comparison.
cdef inline bint _event_lt(tuple a, tuple b) except -1:
    cdef double ta = a[0], tb = b[0]
    if ta < tb:
        return True
    if ta == tb:
        if <long long>a[1] == <long long>b[1]:
            return a < b  # (never: sequence numbers are unique)
        return <long long>a[1] < <long long>b[1]
    return False


cdef inline bint _batch_lt(tuple a, tuple b) except -1:
    cdef long long fa = a[0], fb = b[0]
    if fa != fb:
        return fa < fb
    if <long long>a[1] == <long long>b[1]:
        return a < b  # (never: admission orders are unique)
    return <long long>a[1] < <long long>b[1]


cdef inline bint _lt(tuple a, tuple b, bint batch) except -1:
    return _batch_lt(a, b) if batch else _event_lt(a, b)


cdef int _siftdown(list heap, Py_ssize_t startpos, Py_ssize_t pos, bint batch) except -1:
    cdef object newitem = heap[pos]
    cdef object parent
    cdef Py_ssize_t parentpos
    while pos > startpos:
        parentpos = (pos - 1) >> 1
        parent = heap[parentpos]
        if not _lt(<tuple>newitem, <tuple>parent, batch):
            break
        heap[parentpos] = newitem
        heap[pos] = parent
        pos = parentpos
    return 0


cdef int _siftup(list heap, Py_ssize_t pos, bint batch) except -1:
    cdef Py_ssize_t endpos = len(heap)
    cdef Py_ssize_t startpos = pos
    cdef Py_ssize_t limit = endpos >> 1
    cdef Py_ssize_t childpos
    cdef object child
    while pos < limit:
        childpos = 2 * pos + 1
        if childpos + 1 < endpos:
            if not _lt(<tuple>heap[childpos], <tuple>heap[childpos + 1], batch):
                childpos += 1
        child = heap[childpos]
        heap[childpos] = heap[pos]
        heap[pos] = child
        pos = childpos
    return _siftdown(heap, startpos, pos, batch)


cdef inline int _push(list heap, tuple item, bint batch) except -1:
    heap.append(item)
    return _siftdown(heap, 0, len(heap) - 1, batch)


cdef inline tuple _pop(list heap, bint batch):
    cdef object last = heap.pop()
    cdef object top
    if not heap:
        return <tuple>last
    top = heap[0]
    heap[0] = last
    _siftup(heap, 0, batch)
    return <tuple>top


# ====================================================================== Node
cdef class Node:
    """:class:`envs.sim.node.Node` with typed fields (its docstring says what each is)."""

    # the fields are declared in core.pxd (other compiled modules read them)

    def __init__(self, index, spec, costs, cache):
        self.index = index
        self.spec = spec
        self._set_costs(costs)
        self.cache = cache
        self.view = cache
        self.down = False
        self.nic_down = 0
        self.cache_beside_reservations = True
        self.budget_tokens = costs.budget_tokens
        self.queue = deque()
        self.running = 0
        self.reserved_tokens = 0
        self.pinned_tokens = 0
        self.work = IDLE
        self.work_obj = None
        self.work_start = 0.0
        self.work_end = 0.0
        self.version = 0
        self.free_s = 0.0
        self.draining = False
        self.batch_heap = []
        self.decode_n = 0
        self.step = 0
        self.ctx_tokens = 0
        self.seg_start = 0.0
        self.seg_steps = 0
        self.seg_batch = 0
        self.seg_ctx = 0
        self.chunk_breaks = []
        self.item_decode_s = 0.0
        self.copy_queue = deque()
        self.inflight = {}
        self.waiting_src = []
        self.waiting_for = None
        self.busy_s = 0.0
        self.prefill_s = 0.0
        self.prefill_ewma_s = 0.0
        self.decode_s = 0.0
        self.copy_s = 0.0
        self.rdma_busy_s = 0.0

    cdef int _set_costs(self, costs) except -1:
        """``costs`` (read-only from Python: a member descriptor) and its typed copies."""
        self._costs = costs
        self._prefill_s_per_token = costs.prefill_s_per_token
        self._attention_s_coef = costs.attention_s_coef
        self._decode_weight_s = costs.decode_weight_s
        self._decode_kv_s_per_token = costs.decode_kv_s_per_token
        self._load_hbm_s = costs.load_hbm_s
        self._load_ram_s = costs.load_ram_s
        self._load_disk_s = costs.load_disk_s
        return 0

    def __reduce__(self):
        # the state goes through __setstate__, after the node exists: a cycle
        # back to it (e.g. through its work item) pickles and copies as usual
        return Node.__new__, (Node,), tuple([getattr(self, name) for name in _NODE_FIELDS])

    def __setstate__(self, state):
        for name, value in zip(_NODE_FIELDS, state):
            if name == "costs":
                self._set_costs(value)
            else:
                setattr(self, name, value)

    @property
    def load(self):
        """Running plus waiting requests (the routers' shared definition of load)."""
        return self.running + len(self.queue)

    @property
    def computing(self):
        if self.work == PREFILL:
            return self.work_obj
        return None

    def estimated_wait_s(self, double now):
        """Rough wait for a request routed here now: the rest of the current work
        item plus one recent average prefill per queued request."""
        cdef double rest = self.work_end - now if self.work != IDLE else 0.0
        return max(rest, 0.0) + len(self.queue) * self.prefill_ewma_s

    def cache_capacity_blocks(self, long long block_tokens):
        """HBM blocks the prefix cache may hold now (``envs.sim.node.Node``'s rule)."""
        return self._capacity(block_tokens)

    def copy_room_blocks(self, long long block_tokens):
        """HBM blocks a copy or promotion may bring in now: the cache's capacity
        less its pinned blocks, which nothing evicts."""
        return self._capacity(block_tokens) - self.pinned_tokens // block_tokens

    cdef inline long long _capacity(self, long long block_tokens):
        if self.cache_beside_reservations:
            return (self.budget_tokens - self.reserved_tokens) // block_tokens
        return self.budget_tokens // block_tokens

    # ------------------------------------------------------------ timing (NodeCosts)
    cdef inline double prefill_time(self, long long new_tokens, long long cached_tokens):
        cdef double seconds = new_tokens * self._prefill_s_per_token
        cdef double pairs
        if self._attention_s_coef and new_tokens > 0:
            pairs = <double>(new_tokens * cached_tokens) + (
                <double>(new_tokens * (new_tokens + 1)) / 2.0
            )
            seconds += self._attention_s_coef * pairs
        return seconds

    cdef inline double decode_time(self, long long steps, long long batch, long long context):
        cdef double kv_tokens_read = <double>(steps * context) + (
            <double>(batch * steps * (steps - 1)) / 2.0
        )
        return self._decode_weight_s * steps + self._decode_kv_s_per_token * kv_tokens_read

    cdef long long steps_by(self, double elapsed) except? -1:
        """``NodeCosts.decode_steps_by`` for the segment in progress: the fewest of
        its steps that take at least ``elapsed`` seconds (0 when ``elapsed <= 0``:
        a segment not started yet, under decode overshoot)."""
        cdef long long b = self.seg_batch
        cdef double kv_s = self._decode_kv_s_per_token
        cdef double a = self._decode_weight_s + kv_s * (self.seg_ctx - b / 2.0)
        cdef double c = kv_s * b / 2.0
        cdef double root
        cdef long long steps = 0
        if elapsed <= 0.0:
            return 0
        if c > 0:
            root = (-a + sqrt(a * a + 4.0 * c * elapsed)) / (2.0 * c)
        else:
            root = elapsed / a
        if isfinite(root):
            steps = <long long>ceil(root)
        else:
            steps = math.ceil(root)  # raises what the reference raises
        while steps > 0 and self.decode_time(steps - 1, b, self.seg_ctx) >= elapsed:
            steps -= 1
        while self.decode_time(steps, b, self.seg_ctx) < elapsed:
            steps += 1
        return steps

    cpdef double step_left_s(self, double now) except? -1.0:
        """``envs.sim.forecast.decode_step_left_s`` (the reference; this is the
        compiled observation's, callable from Python for tests): seconds until the
        decode step running at ``now`` ends (0 when it is not decoding)."""
        cdef long long steps
        cdef double end
        if self.work != DECODE:
            return 0.0
        steps = self.steps_by(now - self.seg_start)
        end = self.seg_start + self.decode_time(
            min(steps, self.seg_steps), self.seg_batch, self.seg_ctx
        )
        return max(min(end, self.work_end) - now, 0.0)


_NODE_FIELDS = _node_ref.Node.__slots__
"""The fields a node pickles (those of the reference's ``__slots__``)."""


# ====================================================================== SimCore
cdef class SimCore:
    """The compiled simulator's base: typed state and the per-event methods.

    Never used alone: ``envs.sim.simulator.CompiledSimulator`` puts it before
    the reference ``Simulator`` (whose ``__init__`` fills these fields), so its
    methods replace the reference's and everything else is the reference's."""

    cdef public double now
    # objects: exposed as member descriptors (_expose below)
    cdef object nodes
    cdef public Py_ssize_t n_nodes
    cdef object requests
    cdef public long long block_tokens
    cdef object config
    cdef object _records
    cdef list _rec_node
    cdef list _rec_first
    cdef list _rec_finish
    cdef list _rec_admission
    cdef object _heap
    cdef public long long _seq
    cdef public long long _order
    cdef public long long _fresh_id
    cdef public long long _promotions_in_flight
    cdef object _faults
    cdef object _views
    cdef object speculation
    cdef object first_token_log
    cdef object _pending
    cdef object _deciding
    cdef object _asked
    cdef public bint _hbm_hit_load
    cdef public bint _one_token_step
    cdef public bint _causal_kv
    cdef public long long _max_batch
    cdef public long long _chunk_tokens
    cdef public double _latency_s

    @property
    def records(self):
        return self._records

    @records.setter
    def records(self, records):
        self._records = records
        self._rec_node = records.node
        self._rec_first = records.first_token_s
        self._rec_finish = records.finish_s
        self._rec_admission = records.admission

    # ------------------------------------------------------------ the event loop
    def _drive(self, decide):
        """The reference's ``Simulator._drive`` (the run's start, rare-GC stretch and
        end around :meth:`_loop`), compiled: a step-by-step driver's ``send`` then
        reaches the event loop without resuming a Python frame on every arrival."""
        from envs.sim import rare_gc

        if self._started:
            raise RuntimeError("a Simulator runs its workload once; build a new one")
        self._started = True
        with rare_gc.RARE_GC:
            yield from self._loop(decide)
            self.done = True
            self.records.finalize(self.requests, self.totals())

    def _loop(self, decide):
        """The reference's event loop (``Simulator._loop``), typed."""
        cdef object requests = self.requests
        cdef Py_ssize_t n = len(requests)
        cdef list heap = self._heap
        cdef list nodes = self.nodes
        cdef Py_ssize_t n_nodes = self.n_nodes
        cdef bint overshoot = self.config.decode_overshoot
        cdef object views = self._views
        cdef Py_ssize_t i = 0
        cdef double t_arrival, t
        cdef tuple entry
        cdef int kind
        cdef Node node
        cdef object request = None
        cdef object choice, obj, version
        while True:
            if i < n:
                request = requests[i]
                t_arrival = request.arrival_s
            else:
                t_arrival = INF
            while heap and <double>(<tuple>heap[0])[0] <= t_arrival:
                entry = _pop(heap, False)
                t = entry[0]
                kind = entry[2]
                obj = entry[3]
                version = entry[4]
                self.now = t
                if kind == WAKE_EVENT:
                    node = <Node>obj
                    if node.version == <long long>version:
                        self._c_on_wake(node, t)
                elif kind == FLOW_EVENT:
                    if version == self._flow_version:
                        self._on_flow(t)
                elif kind == LAND_EVENT:
                    self._land(obj, t)
                elif kind == UPGRADE_EVENT:
                    self.versions.start_drain(self, obj, t)
                elif kind == FAULT_EVENT:
                    self._faults.on_event(obj, version, t)
                elif kind == LIFE_EVENT:
                    self._on_life(obj, t)
            if i >= n:
                break
            self.now = t_arrival
            if views is not None:
                views.sync(t_arrival)
            if overshoot:
                for node in nodes:
                    if node.work == DECODE:
                        self._c_overshoot(node, t_arrival)
            self._pending = self._deciding = request
            if decide is not None:
                choice = decide(self, request)
            else:
                choice = yield request
            self._deciding = None
            if self._pending is None:  # routed during the decision by route()
                if choice is not None and choice != self._asked:
                    from envs.sim.errors import echoed

                    raise ValueError(
                        f"request {request.request_id!r} was routed to node {self._asked} with "
                        f"route(); the answer {echoed(choice)} differs"
                    )
            else:
                self._pending = None
                if choice.__class__ is not int:
                    from envs.sim.simulator import _as_index

                    choice = _as_index(choice, n_nodes, (<object>self)._who)
                elif not 0 <= choice < n_nodes:
                    raise ValueError(
                        f"{(<object>self)._who} routed request {request.request_id!r} to node "
                        f"{choice}; valid nodes are 0..{n_nodes - 1}"
                    )
                self._c_route(request, <Node>nodes[choice])
            i += 1

    # ------------------------------------------------------------ the methods, for Python
    def _push(self, t, kind, obj, version=0):
        self._seq += 1
        heappush(self._heap, (t, self._seq, kind, obj, version))

    def _route(self, request, Node node):
        self._c_route(request, node)

    def _admissible(self, Node node, request):
        return self._c_admissible(node, request)

    def _advance(self, Node node, double t):
        self._c_advance(node, t)

    def _begin(self, Node node, double t, double end):
        self._c_begin(node, t, end)

    def _admit(self, Node node, request, double t):
        self._c_admit(node, request, t)

    def _plan_chunks(self, Node node, double start, long long new_tokens, long long cached_tokens,
                     long long chunk):
        cdef list times = []
        cdef double decode_s = self._c_plan_chunks(node, start, new_tokens, cached_tokens, chunk,
                                                   times)
        return decode_s, tuple(times)

    def _insert_prompt(self, Node node, request, double t):
        self._c_insert_prompt(node, request, t)

    def _on_wake(self, Node node, double t):
        self._c_on_wake(node, t)

    def _start_decode(self, Node node, double t):
        self._c_start_decode(node, t)

    def _interrupt(self, Node node, double t):
        self._c_interrupt(node, t)

    def _overshoot(self, Node node, double t):
        self._c_overshoot(node, t)

    def _advance_batch(self, Node node, long long steps, double t):
        self._c_advance_batch(node, steps, t)

    def _complete(self, Node node, request, double t):
        self._c_complete(node, request, t)

    # ------------------------------------------------------------ the methods, typed
    cdef int _c_push(self, double t, int kind, object obj, object version) except -1:
        self._seq += 1
        _push(<list>self._heap, (t, self._seq, kind, obj, version), False)
        return 0

    cdef int _c_route(self, object request, Node node) except -1:
        if node.down:
            node = <Node>self._faults.redirect()
        self._rec_node[request.index] = node.index
        cdef object queue = node.queue
        queue.append(request)
        cdef double now
        if node.work == IDLE:
            now = self.now
            self._c_advance(node, now if node.free_s <= now else node.free_s)
        elif node.work == DECODE and len(queue) == 1 and self._c_admissible(node, request):
            self._c_interrupt(node, self.now)
        return 0

    cdef bint _c_admissible(self, Node node, object request) except -1:
        cdef long long n_in, n_out
        if node.running >= self._max_batch:
            return False
        n_in = request.input_tokens
        n_out = request.output_tokens
        return node.reserved_tokens + node.pinned_tokens + n_in + n_out <= node.budget_tokens

    cdef int _c_advance(self, Node node, double t) except -1:
        cdef object copy, queue, request, versions
        cdef double duration
        if node.free_s > self.now:
            versions = (<object>self).versions
            if versions is not None and versions.loading(node, self.now):
                return 0  # new weights loading: the wake at their end advances it
        if t < node.free_s:
            t = node.free_s
        if node.copy_queue:
            copy = node.copy_queue.popleft()
            duration = _copy_s(copy.bytes * copy.slowdown, node, self.config.transfer_latency_s)
            copy.start_s = t
            node.work = COPY
            node.work_obj = copy
            self._c_begin(node, t, t + duration)
            node.copy_s += duration
            node.busy_s += duration
            node.rdma_busy_s += duration
            (<Node>self.nodes[copy.src]).rdma_busy_s += duration
            return 0
        queue = node.queue
        if queue and node.waiting_for is None and not node.draining:
            request = queue[0]
            if self._c_admissible(node, request):
                if node.inflight and self._should_wait(node, request, t):
                    if node.decode_n:
                        self._c_start_decode(node, t)
                    else:
                        node.work = IDLE
                    return 0
                queue.popleft()
                self._c_admit(node, request, t)
                return 0
            if node.pinned_tokens and not node.running:  # pins never deadlock admission
                self._yield_pins(node, request)
                self._c_advance(node, t)
                return 0
        if node.decode_n:
            self._c_start_decode(node, t)
        elif self.speculation is None or not self._start_speculation(node, t):
            node.work = IDLE
            if node.draining:
                self._drained(node, t)
        return 0

    cdef int _c_begin(self, Node node, double t, double end) except -1:
        node.work_start = t
        node.work_end = end
        node.version += 1
        self._seq += 1
        _push(<list>self._heap, (end, self._seq, WAKE_EVENT, node, node.version), False)
        return 0

    cdef int _c_admit(self, Node node, object request, double t) except -1:
        cdef long long bt = self.block_tokens
        cdef object cache = node.cache
        cdef object blocks = request.blocks
        cdef long long n_in = request.input_tokens
        cdef long long n_out = request.output_tokens
        cdef long long hbm, ram, disk, cap, hbm_t, ram_t, disk_t, used_blocks, hit
        cdef long long new_tokens, chunk
        cdef double reuse_s, prefill_s, decode_s = 0.0, compute_s, duration
        cdef bint chunked
        cdef list break_times = None
        cdef long long counts[3]
        node.running += 1
        node.reserved_tokens += n_in + n_out
        if _plain(cache):
            (<CompiledCache>cache).c_match_touch(blocks, t, counts)
            hbm, ram, disk = counts[0], counts[1], counts[2]
        else:
            hbm, ram, disk = cache.match_touch(blocks, t)
        # forecast.reuse_plan, inline
        cap = n_in - 1
        hbm_t = min(hbm * bt, cap)
        ram_t = min(ram * bt, cap - hbm_t)
        disk_t = min(disk * bt, cap - hbm_t - ram_t)
        reuse_s = hbm_t * node._load_hbm_s if self._hbm_hit_load else 0.0
        used_blocks = hbm
        if ram_t == 0 or ram_t * node._load_ram_s + self._latency_s < node.prefill_time(ram_t, hbm_t):
            if ram_t:
                reuse_s += ram_t * node._load_ram_s + self._latency_s
                used_blocks += ram
            if disk_t and disk_t * node._load_disk_s + self._latency_s < node.prefill_time(
                disk_t, hbm_t + ram_t
            ):
                reuse_s += disk_t * node._load_disk_s + self._latency_s
                used_blocks += disk
            else:
                disk_t = 0
        else:
            ram_t = disk_t = 0
        hit = hbm_t + ram_t + disk_t
        if self._promotions_in_flight and hit > hbm_t:
            ram_t, disk_t, reuse_s, used_blocks = self._promoted_reuse(
                node, request, t, hbm, hbm_t, ram_t, disk_t, reuse_s, used_blocks
            )
            hit = hbm_t + ram_t + disk_t
        if used_blocks > hbm:  # bring the loaded RAM / disk runs up (HBM is touched)
            cache.use(blocks, used_blocks, t)
        new_tokens = n_in - hit
        prefill_s = node.prefill_time(new_tokens, hit)
        chunk = self._chunk_tokens
        node.seg_steps = 0
        chunked = chunk and node.decode_n and new_tokens > chunk
        if chunked:
            break_times = []
            decode_s = self._c_plan_chunks(node, t + reuse_s, new_tokens, hit, chunk, break_times)
        self._rec_admission[request.index] = (t, hbm_t, ram_t, disk_t, reuse_s, new_tokens)
        _evict_to(cache, node._capacity(bt))
        if not self._causal_kv:
            self._c_insert_prompt(node, request, t)
        node.work = PREFILL
        node.work_obj = request
        compute_s = reuse_s + prefill_s
        node.prefill_s += compute_s
        node.prefill_ewma_s += 0.2 * (compute_s - node.prefill_ewma_s)
        if not chunked:  # the common case: the prefill alone
            node.item_decode_s = 0.0
            node.busy_s += compute_s
            self._c_begin(node, t, t + compute_s)
            return 0
        duration = compute_s + decode_s
        node.item_decode_s = decode_s
        node.decode_s += decode_s
        node.busy_s += duration
        self._c_begin(node, t, t + duration)
        for break_s in break_times:
            self._c_push(break_s, WAKE_EVENT, node, node.version)
        return 0

    cdef double _c_plan_chunks(
        self, Node node, double start, long long new_tokens, long long cached_tokens,
        long long chunk, list times
    ) except? -1.0:
        """``Simulator._plan_chunks``: appends the breaks' times to ``times``."""
        cdef long long steps = (new_tokens - 1) // chunk
        cdef list heap = node.batch_heap
        cdef long long last = node.step + steps
        cdef long long finish, n, kv, batch, ctx, done, ahead, rest
        cdef double decode_s
        cdef dict freed
        cdef list breaks
        if <long long>(<tuple>heap[0])[0] > last:  # nothing finishes during the prefill
            node.seg_steps = steps
            return node.decode_time(steps, node.decode_n, node.ctx_tokens)
        freed = {}  # finish step -> (sequences, KV tokens)
        for item in heap:
            finish = (<tuple>item)[0]
            if finish <= last:
                request = (<tuple>item)[2]
                n, kv = freed.get(finish, (0, 0))
                kv += request.input_tokens + (request.output_tokens - 1 or 1)
                freed[finish] = (n + 1, kv)
        batch = node.decode_n
        ctx = node.ctx_tokens
        done = 0
        decode_s = 0.0
        breaks = []
        for key in sorted(freed):
            finish = key
            ahead = finish - node.step
            decode_s += node.decode_time(ahead - done, batch, ctx)
            ctx += batch * (ahead - done)
            n, kv = freed[key]
            batch -= n
            ctx -= kv
            breaks.append(ahead - done)
            times.append(start + node.prefill_time(ahead * chunk, cached_tokens) + decode_s)
            done = ahead
        rest = steps - done if batch else 0
        if rest:
            decode_s += node.decode_time(rest, batch, ctx)
        breaks.reverse()
        node.chunk_breaks = breaks
        node.seg_steps = rest
        return decode_s

    cdef int _c_insert_prompt(self, Node node, object request, double t) except -1:
        cdef object cache = node.cache
        _insert(cache, request.blocks, t, None)
        _evict_to(cache, node._capacity(self.block_tokens))
        if node.waiting_src:
            self._release_sources(node, request.blocks, t)
        return 0

    cdef int _c_on_wake(self, Node node, double t) except -1:
        cdef int work = node.work
        cdef object request, chunk, blocks
        cdef long long n_out
        if work == PREFILL:
            if node.chunk_breaks:  # a decode step between chunks ended a sequence
                self._c_advance_batch(node, (<list>node.chunk_breaks).pop(), t)
                return 0
            request = node.work_obj
            if self._faults is None or self._faults.first_token(request):
                self._rec_first[request.index] = t
                (<list>self.first_token_log).append(request)
            if node.seg_steps:
                self._c_advance_batch(node, node.seg_steps, t)
            n_out = request.output_tokens
            if n_out > 1 or self._one_token_step:
                if self._causal_kv:
                    self._c_insert_prompt(node, request, t)
                self._order += 1
                _push(
                    <list>node.batch_heap,
                    (node.step + (n_out - 1 if n_out - 1 else 1), self._order, request),
                    True,
                )
                node.decode_n += 1
                node.ctx_tokens += <long long>request.input_tokens
            else:
                self._c_complete(node, request, t)
        elif work == DECODE:
            self._c_advance_batch(node, node.seg_steps, t)
        elif work == COPY:
            self._land(node.work_obj, t)
        elif work == SPECULATE:
            chunk = node.work_obj
            blocks = self.speculation.finish_chunk(node, chunk, t)
            if node.waiting_src:
                self._release_sources(node, blocks, t)
        node.work = IDLE
        node.work_obj = None
        self._c_advance(node, t)
        return 0

    cdef int _c_start_decode(self, Node node, double t) except -1:
        cdef long long steps = <long long>(<tuple>node.batch_heap[0])[0] - node.step
        cdef double duration = node.decode_time(steps, node.decode_n, node.ctx_tokens)
        node.work = DECODE
        node.seg_start = t
        node.seg_steps = steps
        node.seg_batch = node.decode_n
        node.seg_ctx = node.ctx_tokens
        node.decode_s += duration
        node.busy_s += duration
        self._c_begin(node, t, t + duration)
        return 0

    cdef int _c_interrupt(self, Node node, double t) except -1:
        """Cut the decode segment in progress at the first step boundary >= t."""
        cdef long long b = node.seg_batch
        cdef double old, new
        # a segment not started yet (decode overshoot): none of it
        cdef long long steps = node.steps_by(t - node.seg_start)
        if steps >= node.seg_steps:
            return 0
        old = node.decode_time(node.seg_steps, b, node.seg_ctx)
        new = node.decode_time(steps, b, node.seg_ctx)
        node.decode_s -= old - new
        node.busy_s -= old - new
        node.seg_steps = steps
        self._c_begin(node, node.seg_start, node.seg_start + new)
        node.work_start = node.seg_start
        return 0

    cdef int _c_overshoot(self, Node node, double t) except -1:
        """``SimConfig.decode_overshoot`` (``Simulator._overshoot``)."""
        cdef double last_step_start = node.seg_start + node.decode_time(
            node.seg_steps - 1, node.seg_batch, node.seg_ctx
        )
        cdef double end = node.work_end
        cdef object versions, faults
        if last_step_start <= t < end:
            versions = (<object>self).versions
            if versions is not None and versions.due_within(node.index, t, end):
                return 0  # the upgrade comes within the step: it drains first
            faults = (<object>self)._faults
            if faults is not None and faults.loss_within(node.index, t, end):
                return 0  # so may a loss: it comes first
            node.version += 1  # the wake in the heap is now stale
            node.free_s = end
            self._c_on_wake(node, end)
        return 0

    cdef int _c_advance_batch(self, Node node, long long steps, double t) except -1:
        cdef list heap = node.batch_heap
        cdef long long step
        cdef object request
        cdef long long n_out
        node.step += steps
        node.ctx_tokens += node.decode_n * steps
        step = node.step
        while heap and <long long>(<tuple>heap[0])[0] <= step:
            request = _pop(heap, True)[2]
            node.decode_n -= 1
            n_out = request.output_tokens
            node.ctx_tokens -= <long long>request.input_tokens + (n_out - 1 if n_out - 1 else 1)
            self._c_complete(node, request, t)
        return 0

    cdef int _c_complete(self, Node node, object request, double t) except -1:
        cdef long long n_in = request.input_tokens
        cdef long long n_out = request.output_tokens
        cdef long long bt = self.block_tokens
        cdef object blocks = request.blocks
        cdef object cache = node.cache
        cdef long long extra, fresh
        self._rec_finish[request.index] = t
        node.running -= 1
        node.reserved_tokens -= n_in + n_out
        extra = -(-(n_in + n_out) // bt) - len(blocks)
        if extra > 0:
            fresh = self._fresh_id
            self._fresh_id = fresh - extra
            _insert(cache, blocks, t, range(fresh - 1, fresh - 1 - extra, -1))
        else:
            _insert(cache, blocks, t, None)
        _evict_to(cache, node._capacity(bt))
        if node.waiting_src:
            self._release_sources(node, blocks, t)
        return 0


# ====================================================================== fast reads
# Python code (the policies above all) reads nodes' and the simulator's object
# fields by name at every decision. A ``cdef public`` field is a getset
# descriptor, which CPython's attribute specialisation does not cover (~29 ns a
# read against ~8 ns for a slot); a member descriptor over the same C field is
# read as a slot is. So the object fields get member descriptors, added to the
# types here (a node's ``costs`` read-only: its coefficients are copied to C
# fields when it is set); the C fields (counters, times) keep their getset
# descriptors.
cdef extern from *:
    """
    #include <stddef.h>
    #include <structmember.h>
    #define BTB_NODE_OFFSET(f) offsetof(struct __pyx_obj_4envs_3sim_7_native_4core_Node, f)
    #define BTB_CORE_OFFSET(f) offsetof(struct __pyx_obj_4envs_3sim_7_native_4core_SimCore, f)
    static PyMemberDef btb_members[32];
    static int btb_n_members = 0;
    /* a member descriptor for the object field at offset in the (static) type */
    static int btb_expose(PyObject* type, const char* name, Py_ssize_t offset, int flags) {
        PyMemberDef* member;
        PyObject* descr;
        int failed;
        if (btb_n_members >= 32) {
            PyErr_SetString(PyExc_RuntimeError, "envs.sim._native.core: too many members");
            return -1;
        }
        member = &btb_members[btb_n_members++];
        member->name = name;
        member->type = T_OBJECT_EX;
        member->offset = offset;
        member->flags = flags;
        member->doc = NULL;
        descr = PyDescr_NewMember((PyTypeObject*)type, member);
        if (descr == NULL) return -1;
        failed = PyDict_SetItemString(((PyTypeObject*)type)->tp_dict, name, descr);
        Py_DECREF(descr);
        PyType_Modified((PyTypeObject*)type);
        return failed;
    }
    """
    int _expose "btb_expose"(object type, const char* name, Py_ssize_t offset, int flags) except -1
    int READONLY
    Py_ssize_t NODE_index "BTB_NODE_OFFSET(index)"
    Py_ssize_t NODE_spec "BTB_NODE_OFFSET(spec)"
    Py_ssize_t NODE_costs "BTB_NODE_OFFSET(_costs)"
    Py_ssize_t NODE_cache "BTB_NODE_OFFSET(cache)"
    Py_ssize_t NODE_view "BTB_NODE_OFFSET(view)"
    Py_ssize_t NODE_down "BTB_NODE_OFFSET(down)"
    Py_ssize_t NODE_queue "BTB_NODE_OFFSET(queue)"
    Py_ssize_t NODE_work_obj "BTB_NODE_OFFSET(work_obj)"
    Py_ssize_t NODE_draining "BTB_NODE_OFFSET(draining)"
    Py_ssize_t NODE_batch_heap "BTB_NODE_OFFSET(batch_heap)"
    Py_ssize_t NODE_chunk_breaks "BTB_NODE_OFFSET(chunk_breaks)"
    Py_ssize_t NODE_copy_queue "BTB_NODE_OFFSET(copy_queue)"
    Py_ssize_t NODE_inflight "BTB_NODE_OFFSET(inflight)"
    Py_ssize_t NODE_waiting_src "BTB_NODE_OFFSET(waiting_src)"
    Py_ssize_t NODE_waiting_for "BTB_NODE_OFFSET(waiting_for)"
    Py_ssize_t CORE_nodes "BTB_CORE_OFFSET(nodes)"
    Py_ssize_t CORE_requests "BTB_CORE_OFFSET(requests)"
    Py_ssize_t CORE_config "BTB_CORE_OFFSET(config)"
    Py_ssize_t CORE_heap "BTB_CORE_OFFSET(_heap)"
    Py_ssize_t CORE_faults "BTB_CORE_OFFSET(_faults)"
    Py_ssize_t CORE_views "BTB_CORE_OFFSET(_views)"
    Py_ssize_t CORE_speculation "BTB_CORE_OFFSET(speculation)"
    Py_ssize_t CORE_first_token_log "BTB_CORE_OFFSET(first_token_log)"
    Py_ssize_t CORE_pending "BTB_CORE_OFFSET(_pending)"
    Py_ssize_t CORE_deciding "BTB_CORE_OFFSET(_deciding)"
    Py_ssize_t CORE_asked "BTB_CORE_OFFSET(_asked)"

_expose(Node, b"index", NODE_index, 0)
_expose(Node, b"spec", NODE_spec, 0)
_expose(Node, b"costs", NODE_costs, READONLY)  # its typed copies are set with it
_expose(Node, b"cache", NODE_cache, 0)
_expose(Node, b"view", NODE_view, 0)
_expose(Node, b"down", NODE_down, 0)
_expose(Node, b"queue", NODE_queue, 0)
_expose(Node, b"work_obj", NODE_work_obj, 0)
_expose(Node, b"draining", NODE_draining, 0)
_expose(Node, b"batch_heap", NODE_batch_heap, 0)
_expose(Node, b"chunk_breaks", NODE_chunk_breaks, 0)
_expose(Node, b"copy_queue", NODE_copy_queue, 0)
_expose(Node, b"inflight", NODE_inflight, 0)
_expose(Node, b"waiting_src", NODE_waiting_src, 0)
_expose(Node, b"waiting_for", NODE_waiting_for, 0)
_expose(SimCore, b"nodes", CORE_nodes, 0)
_expose(SimCore, b"requests", CORE_requests, 0)
_expose(SimCore, b"config", CORE_config, 0)
_expose(SimCore, b"_heap", CORE_heap, 0)
_expose(SimCore, b"_faults", CORE_faults, 0)
_expose(SimCore, b"_views", CORE_views, 0)
_expose(SimCore, b"speculation", CORE_speculation, 0)
_expose(SimCore, b"first_token_log", CORE_first_token_log, 0)
_expose(SimCore, b"_pending", CORE_pending, 0)
_expose(SimCore, b"_deciding", CORE_deciding, 0)
_expose(SimCore, b"_asked", CORE_asked, 0)
