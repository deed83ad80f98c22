# cython: language_level=3
"""The compiled routers' C functions, for the compiled BTB decision (btb.pyx)."""

cdef bint compiled_nodes(list nodes) except -1
cdef Py_ssize_t hbm_match(object view, object blocks) except -1
cdef Py_ssize_t hbm_match_n(object view, object blocks, Py_ssize_t n) except -1
cdef object c_least_loaded(object sim, list nodes, object candidates)
cdef object c_least_loaded_at(object sim, list nodes, Py_ssize_t* at, Py_ssize_t n)
cdef object c_cache_aware(object sim, list nodes, object request, double balance_abs, double balance_rel)
