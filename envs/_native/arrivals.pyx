# cython: language_level=3, boundscheck=False, wraparound=False, auto_pickle=False
"""The environments' per-arrival work, compiled: the traffic counts of
:class:`envs.encoder.TrafficTracker`, :meth:`envs.encoder.EpochEncoder.record`,
:meth:`envs.thresholds.EpochController.route` and the threshold env's loop over
an epoch's arrivals (``EpochController.run``).

The Python is the readable reference; this module repeats it step for step (the
same dict and list updates, the same float operations), so the counts, the
decisions and every observation are the same to the bit
(``tests/envs/test_native_arrivals.py`` runs both). Change them together. The
state stays in the Python objects (the tracker's lists, the epoch's stats, the
controller's BTB): only the work on it is compiled. BTB decides through its
compiled twin where that applies (``baselines.native``), else through its own
``decide``.
"""

from cpython.ref cimport PyObject, Py_DECREF, Py_XDECREF

from baselines._native.btb cimport Rule, c_decide, read_rule
from baselines._native.routers cimport hbm_match

from baselines._native.btb import decide as _btb_decide

cdef extern from "Python.h":
    int PyIter_Send(object iterator, object arg, PyObject** result) except -1

cdef enum:
    PYGEN_RETURN = 0
    PYGEN_NEXT = 1

cdef double SPAN_1 = 1.0, SPAN_10 = 10.0, SPAN_60 = 60.0  # envs.encoder.WINDOWS_S

cdef double RECENT_SPAN = 10.0  # envs.encoder.RECENT_S

cdef enum:
    IDLE = 0  # envs.sim.node's work kind

import math

from libc.math cimport log1p

from envs.encoder import RECENT_S, WINDOWS_S
from envs.sim import node as _node

cdef double MAX_TOKENS_LOG = math.log1p(262_144)  # as envs.encoder computes it

if tuple(WINDOWS_S) != (SPAN_1, SPAN_10, SPAN_60) or RECENT_S != RECENT_SPAN or _node.IDLE != IDLE:
    raise ImportError("envs._native.arrivals: the windows or work kinds differ from envs'")


cdef Py_ssize_t _bisect_left(list times, double x):
    """bisect.bisect_left on a sorted list of floats."""
    cdef Py_ssize_t lo = 0, hi = len(times), mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if <double>times[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef int c_observe(
    dict all_times, dict first, object key, double now, Py_ssize_t* counts, double* age
) except -1:
    """TrafficTracker.observe on its ``_times`` and ``_first``: ``counts`` gets the
    arrivals in the last 1 / 10 / 60 s, ``age`` the seconds since the first."""
    cdef list times
    found = all_times.get(key)
    if found is None:
        times = []
        all_times[key] = times
        first[key] = now
    else:
        times = <list>found
    times.append(now)
    if len(times) > 64 and <double>times[0] < now - SPAN_60:
        del times[: _bisect_left(times, now - SPAN_60)]
    cdef Py_ssize_t n = len(times)
    counts[0] = n - _bisect_left(times, now - SPAN_1)
    counts[1] = n - _bisect_left(times, now - SPAN_10)
    counts[2] = n - _bisect_left(times, now - SPAN_60)
    age[0] = now - <double>first[key]
    return 0


def observe(tracker, key, double now):
    """``tracker.observe(key, now)`` of a :class:`envs.encoder.TrafficTracker`."""
    cdef Py_ssize_t counts[3]
    cdef double age
    c_observe(tracker._times, tracker._first, key, now, counts, &age)
    return counts[0], counts[1], counts[2], age


cdef struct Counts:
    # the running counts of an epoch's stats (EpochStats), as C numbers
    long long arrivals
    long long repeats
    long long top_count
    long long max_same_1s
    long long max_same_10s
    double hit_sum


cdef class _Epoch:
    """One epoch's record-keeping (EpochEncoder.record into EpochStats), its counts
    held as C numbers and written back to the stats by :meth:`store`."""

    cdef object stats
    cdef Counts counts
    cdef object top
    cdef dict per_key
    cdef dict times
    cdef dict first
    cdef object recent
    cdef Py_ssize_t key_blocks

    def __init__(self, encoder, stats):
        self.stats = stats
        self.counts.arrivals = stats.arrivals
        self.counts.repeats = stats.repeats
        self.counts.top_count = stats.top_count
        self.counts.max_same_1s = stats.max_same_1s
        self.counts.max_same_10s = stats.max_same_10s
        self.counts.hit_sum = stats.hit_sum
        self.top = stats.top
        self.per_key = stats.per_key
        tracker = encoder.tracker
        self.times = tracker._times
        self.first = tracker._first
        self.recent = encoder._recent
        self.key_blocks = encoder.key_blocks

    cdef int record(self, object request, double now) except -1:
        """EpochEncoder.record of one arrival (before it is routed)."""
        blocks = request.blocks
        cdef Py_ssize_t k = self.key_blocks, n = len(blocks)
        if k and n >= k:
            key = blocks[k - 1]
        else:
            key = blocks[n - 2] if n > 1 else blocks[n - 1]  # prefix_key
        self.counts.arrivals += 1
        cdef long long count = <long long>self.per_key.get(key, 0) + 1
        self.per_key[key] = count
        if count > self.counts.top_count:
            self.counts.top_count = count
            self.top = request
        cdef Py_ssize_t same[3]
        cdef double age
        c_observe(self.times, self.first, key, now, same, &age)
        if same[1] > 1:
            self.counts.repeats += 1
        if same[0] > self.counts.max_same_1s:
            self.counts.max_same_1s = same[0]
        if same[1] > self.counts.max_same_10s:
            self.counts.max_same_10s = same[1]
        self.recent.append(now)
        return 0

    cdef int store(self) except -1:
        stats = self.stats
        stats.arrivals = self.counts.arrivals
        stats.repeats = self.counts.repeats
        stats.top_count = self.counts.top_count
        stats.top = self.top
        stats.max_same_1s = self.counts.max_same_1s
        stats.max_same_10s = self.counts.max_same_10s
        stats.hit_sum = self.counts.hit_sum
        return 0


def record(encoder, stats, request, double now):
    """``encoder.record(stats, request, now)`` of an :class:`envs.encoder.EpochEncoder`."""
    cdef _Epoch epoch = _Epoch(encoder, stats)
    epoch.record(request, now)
    epoch.store()


cdef class _Decider:
    """The controller's BTB deciding: its compiled twin with the thresholds read once
    (they change only between epochs), or its own ``decide``; under the ``spread``
    rule the controller's eft_pull_spread instead."""

    cdef object btb
    cdef object aside  # the router deciding while BTB stands aside, or None
    cdef bint compiled
    cdef Rule rule
    cdef dict seen

    def __init__(self, controller):
        btb = self.btb = controller.btb
        self.aside = controller.spread if controller.aside else None
        self.compiled = btb._twin is _btb_decide  # what BTB.decide calls then
        if self.compiled:
            read_rule(btb, &self.rule)
            self.seen = btb._window._seen

    cdef object decide(self, object sim, object request):
        if self.aside is not None:
            return self.aside.decide(sim, request)
        if self.compiled:
            return c_decide(self.btb, &self.rule, self.seen, sim, request)
        return self.btb.decide(sim, request)


cdef inline double _hit(object sim, object node, object request) except -1:
    """The share of the request's blocks in the HBM of the node it was routed to."""
    blocks = request.blocks
    return <double>hbm_match(sim.nodes[node].view, blocks) / <double>len(blocks)


def route(controller, sim, request):
    """``controller.route(sim, request)`` of an :class:`envs.thresholds.EpochController`."""
    cdef _Epoch epoch = _Epoch(controller.encoder, controller.stats)
    epoch.record(request, sim.now)
    epoch.store()
    node = _Decider(controller).decide(sim, request)
    epoch.counts.hit_sum = epoch.counts.hit_sum + _hit(sim, node, request)
    controller.stats.hit_sum = epoch.counts.hit_sum
    return node


def run(controller, sim, decisions, request):
    """``controller.run(sim, decisions, request)``: route the epoch's arrivals from
    ``request`` on; the first arrival after the epoch, or None when the window ended."""
    cdef double end = controller.epoch_end
    if not <double>request.arrival_s < end:
        return request
    cdef _Epoch epoch = _Epoch(controller.encoder, controller.stats)
    cdef _Decider decider = _Decider(controller)
    cdef PyObject* sent
    cdef int state
    try:
        while <double>request.arrival_s < end:
            epoch.record(request, sim.now)
            node = decider.decide(sim, request)
            epoch.counts.hit_sum = epoch.counts.hit_sum + _hit(sim, node, request)
            state = PyIter_Send(decisions, node, &sent)
            if state != PYGEN_NEXT:
                Py_XDECREF(sent)  # PYGEN_RETURN: the window has ended (errors raise above)
                return None
            request = <object>sent
            Py_DECREF(request)  # (the reference PyIter_Send handed over)
        return request
    finally:
        epoch.store()


def encode(encoder, sim, stats, tuple settings, double gap_s):
    """``encoder.encode(sim, stats, settings, gap_s)`` of an
    :class:`envs.encoder.EpochEncoder` (into its buffer, which it returns)."""
    cdef float[::1] out = encoder.buffer
    cdef list nodes = sim.nodes
    cdef Py_ssize_t n_nodes = encoder.n_nodes
    if len(nodes) * 7 + 18 > out.shape[0] or len(settings) != 5:
        raise ValueError("the epoch observation does not fit its buffer")
    cdef double now = sim.now
    recent = encoder._recent
    while recent and <double>recent[0] < now - RECENT_SPAN:
        recent.popleft()
    top = stats.top
    cdef tuple prefix = ()
    cdef Py_ssize_t k = encoder.key_blocks
    if top is not None:
        blocks = top.blocks
        if k and len(blocks) >= k:
            prefix = tuple(blocks[:k])
        else:
            prefix = tuple(blocks[: len(blocks) - 1] if len(blocks) > 1 else blocks)  # prefix_of
    cdef Py_ssize_t depth = len(prefix)
    key = prefix[depth - 1] if depth else None
    cdef Py_ssize_t i = 0, j, holders = 0, in_flight = 0, queued = 0, load, waiting, copies
    cdef double wait
    cdef bint holds
    for node in nodes:
        waiting = len(node.queue)
        load = node.running + waiting
        wait = node.estimated_wait_s(now)
        inflight = node.inflight
        copies = len(inflight)
        in_flight += copies
        queued += waiting
        holds = depth > 0 and hbm_match(node.view, prefix) >= depth
        holders += holds
        out[i] = <float>(<double>load / (<double>load + 16.0))
        out[i + 1] = <float>(wait / (wait + 1.0))
        out[i + 2] = <float>(<double>node.reserved_tokens / <double>node.budget_tokens)
        out[i + 3] = <float>(<double>copies / (<double>copies + 1.0))
        out[i + 4] = 0.0 if node.work == IDLE else 1.0
        out[i + 5] = 1.0 if holds else 0.0
        out[i + 6] = 1.0 if key is not None and key in inflight else 0.0
        i += 7
    cdef long long n = stats.arrivals
    cdef Py_ssize_t n_10 = len(recent)
    cdef long long same_1 = stats.max_same_1s, same_10 = stats.max_same_10s
    cdef long long copied = stats.copies
    cdef double gap = 0.0 if 0.0 > gap_s else gap_s  # max(gap_s, 0.0)
    cdef double tokens
    out[i] = <float>(<double>n / (<double>n + 16.0))
    out[i + 1] = <float>(<double>n_10 / (<double>n_10 + 64.0))
    out[i + 2] = <float>(<double>stats.repeats / <double>n) if n else 0.0
    out[i + 3] = <float>(<double>stats.top_count / <double>n) if n else 0.0
    out[i + 4] = <float>(<double>same_1 / (<double>same_1 + 8.0))
    out[i + 5] = <float>(<double>same_10 / (<double>same_10 + 32.0))
    if top is not None:
        tokens = log1p(<double>top.input_tokens) / MAX_TOKENS_LOG
        out[i + 6] = <float>(1.0 if 1.0 < tokens else tokens)  # min(tokens, 1.0)
    else:
        out[i + 6] = 0.0
    out[i + 7] = <float>(<double>stats.hit_sum / <double>n) if n else 0.0
    out[i + 8] = <float>(<double>copied / (<double>copied + 4.0))
    out[i + 9] = <float>(<double>in_flight / (<double>in_flight + 4.0))
    out[i + 10] = <float>(<double>queued / (<double>queued + 64.0))
    out[i + 11] = <float>(gap / (gap + 10.0))
    for j in range(5):
        out[i + 12 + j] = <float>(<double>settings[j])
    out[i + 17] = <float>(<double>holders / <double>n_nodes)
    return encoder.buffer


def request_entries(
    tracker, request, double now, Py_ssize_t holders, Py_ssize_t n_nodes, float[::1] out,
    Py_ssize_t start,
):
    """:data:`envs.encoder.REQUEST_FEATURES` of ``request`` into ``out`` from ``start``
    as :meth:`envs.encoder.ObservationEncoder.encode` computes them (recording the
    arrival in ``tracker``)."""
    if start < 0 or start + 6 > out.shape[0]:
        raise IndexError(f"6 values from {start} do not fit {out.shape[0]}")
    blocks = request.blocks
    key = blocks[len(blocks) - 2] if len(blocks) > 1 else blocks[len(blocks) - 1]  # prefix_key
    cdef Py_ssize_t same[3]
    cdef double age
    c_observe(tracker._times, tracker._first, key, now, same, &age)
    cdef double tokens = log1p(<double>request.input_tokens) / MAX_TOKENS_LOG
    out[start] = <float>(1.0 if 1.0 < tokens else tokens)  # min(tokens, 1.0)
    out[start + 1] = <float>(<double>same[0] / (<double>same[0] + 4.0))
    out[start + 2] = <float>(<double>same[1] / (<double>same[1] + 16.0))
    out[start + 3] = <float>(<double>same[2] / (<double>same[2] + 64.0))
    out[start + 4] = <float>(age / (age + 10.0))
    out[start + 5] = <float>(<double>holders / <double>n_nodes)
