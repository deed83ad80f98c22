# cython: language_level=3
"""The compiled prefix cache's C interface (its fields and C methods), for the
compiled simulator core (envs/sim/_native/core.pyx), which calls the common
operations (``c_match_touch``, ``c_insert``, ``c_evict_to``) without a Python
call. Each C method is its ``def`` twin's body, which the ``def`` calls."""

from cpython.ref cimport PyObject


cdef class Segment:
    cdef public list blocks
    cdef public Segment parent
    cdef public dict children
    cdef public int tier
    cdef public double last_used
    cdef public int hbm_kids
    cdef public int upper_kids
    cdef public long long copy_id
    cdef public int origin
    cdef public int pins


cdef struct Entry:
    double last_used
    long long seq
    PyObject* seg  # a reference the heap owns


cdef class _Heap:
    cdef Entry* items
    cdef Py_ssize_t size
    cdef Py_ssize_t capacity

    cdef int _reserve(self) except -1
    cdef int append(self, double last_used, long long seq, Segment seg) except -1
    cdef int push(self, double last_used, long long seq, Segment seg) except -1
    cdef void _sift_down(self, Py_ssize_t i) noexcept
    cdef Segment pop(self, double* last_used)
    cdef void keep_live_leaves(self) noexcept
    cdef list entries(self)


cdef class PrefixCache


cdef class _TierCounts:
    cdef PrefixCache cache

    cpdef list as_list(self)


cdef class PrefixCache:
    cdef dict __dict__  # instance attributes, as the reference allows (envs.sim.view)
    cdef readonly Segment root
    cdef object _ram_capacity
    cdef long long _ram_cap
    cdef public bint disk_tier
    cdef public bint touch_used_only
    cdef public bint replicas_first
    cdef long long _blocks_in[3]
    cdef _TierCounts _blocks_view
    cdef _Heap _hbm_heap
    cdef _Heap _ram_heap
    cdef _Heap _replica_heap
    cdef public long long _seq  # (public only for _state)
    cdef public dict pins
    cdef public long long pinned_blocks
    cdef public long long evicted_request_blocks
    cdef public long long copy_hit_blocks
    cdef public set used_copies_hbm
    cdef public set used_copies_any
    cdef public long long evicted_hbm_blocks
    cdef public long long version

    # the common operations, for the compiled simulator (their def twins' bodies)
    cdef int c_match_touch(self, object blocks, double now, long long* counts) except -1
    cdef Py_ssize_t c_insert(self, object blocks, double now, object tail) except -1
    cdef long long c_evict_to(self, long long capacity_blocks) except -1
    cdef Py_ssize_t _insert(
        self, object blocks, double now, long long new_copy_id, object tail, int new_origin
    ) except -1

    cdef tuple _state(self)
    cdef object _evict_to_other(self, object capacity_blocks)
    cdef long long _evict(self, long long excess, int cut) except -1
    cdef long long _evict_lru(
        self, _Heap heap, long long excess, bint yield_to_replicas, int cut
    ) except -1
    cdef Segment _walk(
        self, object blocks, Py_ssize_t n, int top_tier, Py_ssize_t* depth, Py_ssize_t* start
    )
    cdef object _subtree(self, object blocks, Py_ssize_t keep_blocks, Py_ssize_t* first)
    cdef int _bring_up(self, Segment seg, double now, bint count_copies) except -1
    cdef int _push(self, _Heap heap, Segment seg) except -1
    cdef Segment _split(self, Segment seg, Py_ssize_t k)
    cdef int _set_tier(self, Segment seg, int tier) except -1
    cdef int _shrink_ram(self) except -1
