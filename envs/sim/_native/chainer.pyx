# cython: language_level=3, auto_pickle=False
"""Chained block ids, compiled: :class:`envs.sim.request.BlockChainer` for a C compiler.

The reference (envs/sim/request.py) says what the ids are and why they are
stored as runs; this is its ``chain`` step for step with C indices and direct
list and dict access, giving the same ids and the same state (the same sentinel
object, lists and dicts), call for call (tests/sim/test_native_chainer.py).
Change the two together.
"""

from cpython cimport array
from cpython.dict cimport PyDict_GetItemWithError
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_CheckExact, PyLong_FromLongLong
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.ref cimport PyObject, Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM

from envs.sim import request as _reference

cdef extern from "Python.h":
    void PyObject_GC_UnTrack(void* op)

cdef object _NO_RUN = _reference._NO_RUN


cdef inline Py_ssize_t _put(tuple out, Py_ssize_t at, list ids, Py_ssize_t first, Py_ssize_t last):
    """Write ``ids[first:last]`` into ``out`` from position ``at``; returns the next position."""
    cdef Py_ssize_t i
    cdef object item
    for i in range(first, last):
        item = <object>PyList_GET_ITEM(ids, i)
        Py_INCREF(item)  # PyTuple_SET_ITEM takes over a reference
        PyTuple_SET_ITEM(out, at, item)
        at += 1
    return at


cdef inline bint _is_raw(object ahead, long long raw):
    """``ahead == raw`` for the C integer ``raw`` (an int hash), without making an int
    object when ``ahead`` is one (the common case)."""
    cdef int overflow = 0
    cdef long long value
    if PyLong_CheckExact(ahead):
        value = PyLong_AsLongLongAndOverflow(ahead, &overflow)
        return overflow == 0 and value == raw
    if ahead is _NO_RUN:
        return False
    return ahead == raw


cdef class BlockChainer:
    """Maps raw per-trace block hashes to canonical chained integer ids (see the reference).

    The attributes are declared in chainer.pxd, so compiled readers can call
    :meth:`chain_ints` on hashes they parsed into C integers."""

    def __init__(self):
        self._roots = {}
        self._next = [_NO_RUN]
        self._branches = {}
        self._ids = [0]

    def __len__(self):
        return PyList_GET_SIZE(self._next) - 1

    def __reduce__(self):
        """Pickling and copies: the state, with the ends of runs (the module's
        sentinel, which a copy must keep as that very object) by position."""
        ends = [i for i, raw in enumerate(self._next) if raw is _NO_RUN]
        following = [None if raw is _NO_RUN else raw for raw in self._next]
        return BlockChainer, (), (self._roots, following, ends, self._branches)

    def __setstate__(self, state):
        roots, following, ends, branches = state
        self._roots = roots
        self._next = list(following)
        for i in ends:
            self._next[i] = _NO_RUN
        self._branches = branches
        self._ids = list(range(len(self._next)))

    def chain(self, raw_hashes, namespace=""):
        cdef list following = self._next
        cdef list ids = self._ids
        cdef dict branches = self._branches
        cdef dict roots
        cdef tuple out
        cdef Py_ssize_t n, start, block, stretch, known, at = 0
        cdef PyObject* found
        cdef object raw, ahead
        raws = raw_hashes if isinstance(raw_hashes, (list, tuple)) else list(raw_hashes)
        n = len(raws)
        if not n:
            return ()
        found = PyDict_GetItemWithError(self._roots, namespace)
        if found == NULL:
            roots = {}
            self._roots[namespace] = roots
        else:
            roots = <dict>found
        found = PyDict_GetItemWithError(roots, raws[0])
        if found == NULL:  # a new first block: the whole prompt is one new run
            start = PyList_GET_SIZE(following)
            roots[raws[0]] = start
            following.extend(raws[1:])
            following.append(_NO_RUN)
            ids.extend(range(start, start + n))
            return tuple(ids[start:])
        block = <object>found
        out = PyTuple_New(n)  # filled below, the ids shared with self._ids as in the reference
        stretch = block  # the first id of the stretch of consecutive ids walked
        known = 1
        while known < n:  # walk the known prefix
            raw = raws[known]
            ahead = <object>PyList_GET_ITEM(following, block)
            if ahead is raw or ahead == raw:
                block += 1
            else:
                found = PyDict_GetItemWithError(branches, block)
                if found != NULL:
                    found = PyDict_GetItemWithError(<dict>found, raw)
                if found == NULL:
                    break
                at = _put(out, at, ids, stretch, block + 1)
                block = stretch = <object>found
            known += 1
        at = _put(out, at, ids, stretch, block + 1)
        if known == n:
            return out
        start = PyList_GET_SIZE(following)  # the rest is new: ids start, start + 1, ...
        if block == start - 1 and <object>PyList_GET_ITEM(following, block) is _NO_RUN:
            following[block] = raws[known]
        else:
            branches.setdefault(block, {})[raws[known]] = start
        following.extend(raws[known + 1 :])
        following.append(_NO_RUN)
        ids.extend(range(start, start + n - known))
        _put(out, at, ids, start, start + n - known)
        return out

    def chain_int64(self, raw_hashes, namespace=""):
        """:meth:`chain` of integer hashes that fit in 64 bits, through :meth:`chain_ints`
        (for tests: the two give the same ids and the same state)."""
        cdef array.array raws = array.array("q", raw_hashes)
        if not len(raws):
            return ()
        return self.chain_ints(raws.data.as_longlongs, len(raws), namespace)

    cdef tuple chain_ints(self, const long long* raws, Py_ssize_t n, object namespace):
        """:meth:`chain` of ``n >= 1`` integer hashes given as C integers, step for step:
        the same ids and the same state as ``chain([*raws], namespace)``. A known
        prefix is walked without making an int object a block; the ints of a new
        tail are made once, to be stored; a branch is looked up by its id's shared
        int object (``_ids[block]`` is ``block``). The tuple returned holds ints
        only, so it is left out of the cycle collector's walks (which would untrack
        it at its first one, after visiting every id)."""
        cdef list following = self._next
        cdef list ids = self._ids
        cdef dict branches = self._branches
        cdef dict roots, children
        cdef tuple out
        cdef Py_ssize_t start, block, stretch, known, at = 0, i
        cdef PyObject* found
        cdef object key
        found = PyDict_GetItemWithError(self._roots, namespace)
        if found == NULL:
            roots = {}
            self._roots[namespace] = roots
        else:
            roots = <dict>found
        key = PyLong_FromLongLong(raws[0])
        found = PyDict_GetItemWithError(roots, key)
        out = PyTuple_New(n)
        if found == NULL:  # a new first block: the whole prompt is one new run
            start = PyList_GET_SIZE(following)
            roots[key] = start
            for i in range(1, n):
                following.append(PyLong_FromLongLong(raws[i]))
            following.append(_NO_RUN)
            _extend_ids(ids, start + n)
            _put(out, 0, ids, start, start + n)
            PyObject_GC_UnTrack(<void*>out)
            return out
        block = <object>found
        stretch = block
        known = 1
        while known < n:  # walk the known prefix
            if _is_raw(<object>PyList_GET_ITEM(following, block), raws[known]):
                block += 1
            else:
                found = PyDict_GetItemWithError(branches, <object>PyList_GET_ITEM(ids, block))
                if found != NULL:
                    found = PyDict_GetItemWithError(<dict>found, PyLong_FromLongLong(raws[known]))
                if found == NULL:
                    break
                at = _put(out, at, ids, stretch, block + 1)
                block = stretch = <object>found
            known += 1
        at = _put(out, at, ids, stretch, block + 1)
        if known == n:
            PyObject_GC_UnTrack(<void*>out)
            return out
        start = PyList_GET_SIZE(following)  # the rest is new: ids start, start + 1, ...
        key = PyLong_FromLongLong(raws[known])
        if block == start - 1 and <object>PyList_GET_ITEM(following, block) is _NO_RUN:
            following[block] = key
        else:
            children = branches.setdefault(<object>PyList_GET_ITEM(ids, block), {})
            children[key] = start
        for i in range(known + 1, n):
            following.append(PyLong_FromLongLong(raws[i]))
        following.append(_NO_RUN)
        _extend_ids(ids, start + n - known)
        _put(out, at, ids, start, start + n - known)
        PyObject_GC_UnTrack(<void*>out)  # ints only: the collector would untrack it itself
        return out


cdef inline void _extend_ids(list ids, Py_ssize_t stop) except *:
    """``ids.extend(range(len(ids), stop))``, without the range."""
    cdef Py_ssize_t i
    for i in range(PyList_GET_SIZE(ids), stop):
        ids.append(i)
