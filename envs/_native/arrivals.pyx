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

from baselines._native.routers cimport hbm_match

cdef extern from "Python.h":
    int PyIter_Send(object iterator, object arg, PyObject** result) except -1

cdef enum:
    PYGEN_RETURN = 0
    PYGEN_NEXT = 1

cdef double SPAN_1 = 1.0, SPAN_10 = 10.0, SPAN_60 = 60.0  # envs.encoder.WINDOWS_S

from envs.encoder import WINDOWS_S

if tuple(WINDOWS_S) != (SPAN_1, SPAN_10, SPAN_60):
    raise ImportError("envs._native.arrivals: the traffic windows differ from envs.encoder's")


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
    object tracker, object key, double now, Py_ssize_t* counts, double* age
) except -1:
    """TrafficTracker.observe: ``counts`` gets the arrivals in the last 1 / 10 / 60 s."""
    cdef dict all_times = tracker._times
    cdef list times
    found = all_times.get(key)
    if found is None:
        times = []
        all_times[key] = times
        tracker._first[key] = now
    else:
        times = <list>found
    times.append(now)
    if len(times) > 64 and <double>times[0] < now - SPAN_60:
        del times[: _bisect_left(times, now - SPAN_60)]
    cdef Py_ssize_t n = len(times)
    counts[0] = n - _bisect_left(times, now - SPAN_1)
    counts[1] = n - _bisect_left(times, now - SPAN_10)
    counts[2] = n - _bisect_left(times, now - SPAN_60)
    age[0] = now - <double>tracker._first[key]
    return 0


def observe(tracker, key, double now):
    """``tracker.observe(key, now)`` of a :class:`envs.encoder.TrafficTracker`."""
    cdef Py_ssize_t counts[3]
    cdef double age
    c_observe(tracker, key, now, counts, &age)
    return counts[0], counts[1], counts[2], age


cdef int c_record(object encoder, object stats, object request, double now) except -1:
    blocks = request.blocks
    key = blocks[len(blocks) - 2] if len(blocks) > 1 else blocks[len(blocks) - 1]  # prefix_key
    stats.arrivals += 1
    cdef dict per_key = stats.per_key
    cdef long long count = <long long>per_key.get(key, 0) + 1
    per_key[key] = count
    if count > <long long>stats.top_count:
        stats.top_count = count
        stats.top = request
    cdef Py_ssize_t counts[3]
    cdef double age
    c_observe(encoder.tracker, key, now, counts, &age)
    if counts[1] > 1:
        stats.repeats += 1
    if counts[0] > <Py_ssize_t>stats.max_same_1s:
        stats.max_same_1s = counts[0]
    if counts[1] > <Py_ssize_t>stats.max_same_10s:
        stats.max_same_10s = counts[1]
    encoder._recent.append(now)
    return 0


def record(encoder, stats, request, double now):
    """``encoder.record(stats, request, now)`` of an :class:`envs.encoder.EpochEncoder`."""
    c_record(encoder, stats, request, now)


cdef object c_route(object controller, object sim, object request):
    stats = controller.stats
    c_record(controller.encoder, stats, request, sim.now)
    btb = controller.btb
    twin = btb._twin
    # BTB.decide (and btb_pending's) calls exactly this twin where it is set
    node = btb.decide(sim, request) if twin is None else twin(btb, sim, request)
    blocks = request.blocks
    cdef Py_ssize_t hit = hbm_match(sim.nodes[node].view, blocks)
    stats.hit_sum = <double>stats.hit_sum + <double>hit / <double>len(blocks)
    return node


def route(controller, sim, request):
    """``controller.route(sim, request)`` of an :class:`envs.thresholds.EpochController`."""
    return c_route(controller, sim, request)


def run(controller, sim, decisions, request):
    """``controller.run(sim, decisions, request)``: route the epoch's arrivals from
    ``request`` on; the first arrival after the epoch, or None when the window ended."""
    cdef double end = controller.epoch_end
    cdef PyObject* sent
    cdef int state
    while <double>request.arrival_s < end:
        state = PyIter_Send(decisions, c_route(controller, sim, request), &sent)
        if state != PYGEN_NEXT:
            Py_XDECREF(sent)  # PYGEN_RETURN: the window has ended (errors raise above)
            return None
        request = <object>sent
        Py_DECREF(request)  # (the reference PyIter_Send handed over)
    return request
