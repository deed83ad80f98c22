# cython: language_level=3
"""The compiled first-token forecast's C interface (``forecast.pyx``), for the
observation's node rows (envs/_native/observation.pyx)."""


cdef inline double _pymax(double a, double b):
    """Python's ``max(a, b)``: ``a`` unless ``b`` is larger."""
    return b if b > a else a


cdef inline double _pymin(double a, double b):
    """Python's ``min(a, b)``: ``a`` unless ``b`` is smaller."""
    return b if b < a else a


cdef inline long long _llmin(long long a, long long b):
    return b if b < a else a


cdef int estimates(object sim, object request, dict memo, double* backlogs, double* firsts,
                   long long* hits, double* rdma_bw, bint step_wait) except -1
