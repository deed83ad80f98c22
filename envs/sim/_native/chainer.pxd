# cython: language_level=3
"""The compiled chainer's C interface, for compiled trace readers (envs/workloads/_native)."""

cdef class BlockChainer:
    cdef readonly dict _roots
    cdef readonly list _next
    cdef readonly dict _branches
    cdef readonly list _ids

    cdef tuple chain_ints(self, const long long* raws, Py_ssize_t n, object namespace)
