# cython: language_level=3, cdivision=True, boundscheck=False, wraparound=False, auto_pickle=False
"""The observation's per-node rows, compiled: the forecast the encoder asks of every
node at every decision, for a C compiler.

The readable reference is Python: the node loop of
:meth:`envs.encoder.ObservationEncoder.encode`, over the first-token estimates of
:func:`envs.sim.forecast.estimates_with_hits`, whose compiled twin
(``envs/sim/_native/forecast.pyx``) this module calls. It repeats the loop step
for step (the same float operations in the same order, Python's ``min`` and
``max`` tie rules, the same libm ``log1p``), so every observation is the same to
the bit; ``tests/envs/test_native_observation.py`` checks both on busy episodes.
Change them together.

What differs is only how, never what: the rows are written straight into the
float32 buffer.

The node state is a compile-time copy, checked at import against the
simulator's (an ImportError if it ever differs; the encoder then runs the
reference, see ``envs.encoder``).
"""

import math

from libc.math cimport log1p
from libc.stdlib cimport free, malloc

from envs.sim import node as _node
from envs.sim._native.forecast cimport _pymax, _pymin, estimates

cdef enum:
    IDLE = 0

if IDLE != _node.IDLE:
    raise ImportError("envs._native.observation: the node states differ from envs.sim's")

cdef double _TIME_UNIT_S = 0.01
cdef double _MAX_TIME_LOG = math.log1p(1000.0 / 0.01)  # as envs.encoder computes it


cdef inline double _log_seconds(double seconds):
    """:func:`envs.encoder.log_seconds`."""
    cdef double scaled = log1p((0.0 if seconds < 0.0 else seconds) / _TIME_UNIT_S) / _MAX_TIME_LOG
    return 1.0 if scaled > 1.0 else scaled


def node_rows(sim, request, dict memo, float[::1] out, double time_scale=1.0,
              bint step_wait=False):
    """Write the :data:`envs.encoder.NODE_FEATURES` rows of every node into
    ``out`` (from index 0, node-major) as :meth:`ObservationEncoder.encode` does,
    each duration times ``time_scale`` (the encoder's ``time_unit``), with each
    node's :func:`envs.sim.forecast.decode_step_left_s` added to its backlog and
    first token under ``step_wait`` (the encoder's option); return the number of
    nodes holding the request's prefix in HBM."""
    cdef list nodes = sim.nodes
    cdef Py_ssize_t n = len(nodes)
    cdef double now = sim.now
    cdef tuple blocks = request.blocks
    cdef Py_ssize_t n_blocks = len(blocks)
    # checked here, since the writes below are not: the reference fails on both too
    if n_blocks == 0:
        raise IndexError("tuple index out of range (a request without blocks)")
    if n * 10 > out.shape[0]:
        raise ValueError(
            f"{n} nodes' rows ({n * 10} floats) do not fit the observation ({out.shape[0]})"
        )
    key = blocks[n_blocks - 2] if n_blocks > 1 else blocks[n_blocks - 1]
    cdef long long depth = n_blocks - 1 if n_blocks > 1 else 1
    cdef double* backlogs = <double*>malloc(n * sizeof(double))
    cdef double* firsts = <double*>malloc(n * sizeof(double))
    cdef long long* hits = <long long*>malloc(n * sizeof(long long))
    cdef double* rdma_bw = <double*>malloc(n * sizeof(double))
    cdef double best, wait, first
    cdef long long load, copies, hit, queued
    cdef int work
    cdef int holders = 0
    cdef Py_ssize_t j, i
    try:
        if backlogs == NULL or firsts == NULL or hits == NULL or rdma_bw == NULL:
            raise MemoryError()
        estimates(sim, request, memo, backlogs, firsts, hits, rdma_bw, step_wait)
        best = firsts[0]
        for j in range(1, n):
            best = _pymin(best, firsts[j])
        i = 0
        for j in range(n):
            node = nodes[j]
            queued = len(node.queue)
            load = node.running + queued  # Node.load
            work = node.work
            # Node.estimated_wait_s(now)
            wait = _pymax(node.work_end - now if work != IDLE else 0.0, 0.0)
            wait = (wait + <double>queued * <double>node.prefill_ewma_s) * time_scale
            inflight = node.inflight
            copies = len(inflight)
            hit = hits[j]
            if hit >= depth:
                holders += 1
            first = firsts[j]
            out[i] = <float>(<double>load / (<double>load + 16.0))
            out[i + 1] = <float>(wait / (wait + 1.0))
            out[i + 2] = <float>(<double>node.reserved_tokens / <double>node.budget_tokens)
            out[i + 3] = <float>(<double>copies / (<double>copies + 1.0))
            out[i + 4] = <float>(<double>hit / <double>n_blocks)
            out[i + 5] = 1.0 if key in inflight else 0.0
            out[i + 6] = 0.0 if work == IDLE else 1.0
            out[i + 7] = <float>_log_seconds(backlogs[j] * time_scale)
            out[i + 8] = <float>_log_seconds(first * time_scale)
            # (0 where both are inf: every node draining, none eligible)
            out[i + 9] = <float>_log_seconds((first - best if first != best else 0.0) * time_scale)
            i += 10
        return holders
    finally:
        free(backlogs)
        free(firsts)
        free(hits)
        free(rdma_bw)


def put(float[::1] out, Py_ssize_t start, list values):
    """``out[start : start + len(values)] = values`` (each float rounded to float32
    as numpy rounds it), without numpy's per-call cost."""
    cdef Py_ssize_t i
    if start < 0 or start + len(values) > out.shape[0]:
        raise IndexError(f"{len(values)} values from {start} do not fit {out.shape[0]}")
    for i in range(len(values)):
        out[start + i] = <float>(<double>values[i])
