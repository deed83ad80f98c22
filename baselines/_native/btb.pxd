# cython: language_level=3
"""The compiled BTB decision's C interface, for the threshold env's compiled epoch
loop (envs/_native/arrivals.pyx), which reads the thresholds once an epoch."""

cdef enum:
    MAX_NODES = 64


cdef struct Rule:
    # a policy's thresholds and routing rule (read_rule)
    Py_ssize_t y  # Y in blocks, 0 for None (the prompt but its last block)
    Py_ssize_t min_prefix_blocks
    Py_ssize_t x
    double z
    Py_ssize_t m
    bint pending
    bint eft_fallback
    bint router_fallback  # policy.fallback_router is set


cdef int read_rule(object policy, Rule* rule) except -1
cdef object c_decide(object policy, Rule* rule, dict seen, object sim, object request)
