# cython: language_level=3
"""The compiled node's C layout (its fields and C methods), for the other compiled
modules that read a node without a Python call: the routers' per-node scans
(baselines/_native). The class itself is in core.pyx; ``envs.sim.node.Node`` is
the readable reference."""

cimport cython


@cython.final  # (its C methods are called directly, not through a table)
cdef class Node:
    # objects: exposed as member descriptors (core.pyx's _expose), read as fast as slots
    cdef object index
    cdef object spec
    cdef object _costs
    cdef object cache
    cdef object view
    cdef object down
    cdef public long long nic_down
    cdef public bint cache_beside_reservations
    cdef public long long budget_tokens
    cdef object queue
    cdef public long long running
    cdef public long long reserved_tokens
    cdef public long long pinned_tokens
    cdef public int work
    cdef object work_obj
    cdef public double work_start
    cdef public double work_end
    cdef public long long version
    cdef public double free_s
    cdef object draining
    cdef object batch_heap
    cdef public long long decode_n
    cdef public long long step
    cdef public long long ctx_tokens
    cdef public double seg_start
    cdef public long long seg_steps
    cdef public long long seg_batch
    cdef public long long seg_ctx
    cdef object chunk_breaks
    cdef public double item_decode_s
    cdef object copy_queue
    cdef object inflight
    cdef object waiting_src
    cdef object waiting_for
    cdef public double busy_s
    cdef public double prefill_s
    cdef public double prefill_ewma_s
    cdef public double decode_s
    cdef public double copy_s
    cdef public double rdma_busy_s
    # typed copies of the NodeCosts coefficients (set with ``costs``)
    cdef double _prefill_s_per_token
    cdef double _attention_s_coef
    cdef double _decode_weight_s
    cdef double _decode_kv_s_per_token
    cdef double _load_hbm_s
    cdef double _load_ram_s
    cdef double _load_disk_s

    cdef int _set_costs(self, costs) except -1
    cdef inline long long _capacity(self, long long block_tokens)
    cdef inline double prefill_time(self, long long new_tokens, long long cached_tokens)
    cdef inline double decode_time(self, long long steps, long long batch, long long context)
    cdef long long steps_by(self, double elapsed) except? -1
    cpdef double step_left_s(self, double now) except? -1.0
