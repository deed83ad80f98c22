# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The routers' per-node scans, compiled: twins of ``up_nodes``, ``least_loaded``,
``cache_aware_choice`` and ``soonest_node`` of :mod:`baselines.routers` (the
readable reference; change the two together).

They read the compiled simulator's nodes (``envs.sim._native.core.Node``) and
prefix caches as C structs and make the reference's choices with the reference's
random draws (``sim.rng``), in the same order. On the reference simulator's
nodes (``Simulator(..., core="python")``), or under ``match_tiers="hbm_ram"``,
each calls the reference (:func:`bind` hands the reference functions over).
"""

from cpython.pycapsule cimport PyCapsule_GetPointer
from libc.stdint cimport uint32_t, uint64_t

from envs.sim._native.cache cimport PrefixCache as CompiledCache
from envs.sim._native.core cimport Node

from numpy.random import Generator

cdef enum:
    HBM = 0  # envs.sim._native.cache's tier
    MAX_TIES = 64  # ties kept on the stack; a larger cluster's tie runs the reference

cdef object _reference = None  # the reference functions (baselines.routers), set by bind


def bind(reference):
    """Take the reference functions (a namespace with ``up_nodes``, ``least_loaded``,
    ``cache_aware_choice``, ``soonest_node``) to call on nodes that are not compiled."""
    global _reference
    _reference = reference


cdef bint compiled_nodes(list nodes) except -1:
    """Are ``nodes`` the compiled simulator's (C structs)?"""
    return len(nodes) > 0 and type(nodes[0]) is Node


cdef Py_ssize_t hbm_match(object view, object blocks) except -1:
    """``view.hbm_match(blocks)``: the compiled cache's walk without a Python call."""
    cdef Py_ssize_t depth, start
    if type(view) is CompiledCache:
        (<CompiledCache>view)._walk(blocks, len(blocks), HBM, &depth, &start)
        return depth
    return view.hbm_match(blocks)


cdef Py_ssize_t hbm_match_n(object view, object blocks, Py_ssize_t n) except -1:
    """``view.hbm_match(tuple(blocks[:n]))``, without the tuple on the compiled cache."""
    cdef Py_ssize_t depth, start
    if type(view) is CompiledCache:
        (<CompiledCache>view)._walk(blocks, n, HBM, &depth, &start)
        return depth
    return view.hbm_match(tuple(blocks[:n]))


cdef inline long long _load(Node node):
    return node.running + len(node.queue)


# ``sim.rng.random()`` of a numpy Generator is one ``next_double`` of its bit
# generator (numpy's ``random_standard_uniform``, under the bit generator's lock):
# the same draw through numpy's C interface (``bitgen_t``, numpy/random/bitgen.h),
# without the Python call. Any other kind of generator is called as it is.
ctypedef struct bitgen_t:
    void* state
    uint64_t (*next_uint64)(void* st) noexcept nogil
    uint32_t (*next_uint32)(void* st) noexcept nogil
    double (*next_double)(void* st) noexcept nogil
    uint64_t (*next_raw)(void* st) noexcept nogil

cdef object _rng = None  # the generator last drawn from, its lock and its bitgen_t
cdef object _rng_lock = None
cdef bitgen_t* _rng_bitgen = NULL


cdef double _random(object rng) except? -1.0:
    """``rng.random()``."""
    global _rng, _rng_lock, _rng_bitgen
    cdef double value
    if rng is not _rng:
        if type(rng) is not Generator:
            return rng.random()
        bit_generator = rng.bit_generator
        _rng_bitgen = <bitgen_t*>PyCapsule_GetPointer(bit_generator.capsule, "BitGenerator")
        _rng_lock = bit_generator.lock
        _rng = rng  # (kept: the pointer lives as long as it does)
    _rng_lock.acquire()
    try:
        value = _rng_bitgen.next_double(_rng_bitgen.state)
    finally:
        _rng_lock.release()
    return value


cdef inline Py_ssize_t _draw(object sim, Py_ssize_t n) except -1:
    """The tie :func:`baselines.routers.pick` takes of ``n`` (a draw only for two or more)."""
    if n == 1:
        return 0
    cdef double r = _random(sim.rng)
    return <Py_ssize_t>(r * n)


def up_nodes(sim):
    cdef list nodes = sim.nodes
    cdef Node node
    if not compiled_nodes(nodes):
        return _reference.up_nodes(sim)
    out = []
    for node in nodes:
        if not node.down:
            out.append(node)
    return out


cdef inline bint _consider(
    Node node, Py_ssize_t pos, long long* low, Py_ssize_t* ties, Py_ssize_t* n_ties
):
    """One node of a least-load scan: keep ``pos`` among the ties at the least load of
    the up nodes so far. True when the ties would pass MAX_TIES (nothing kept)."""
    if node.down:
        return False
    cdef long long load = _load(node)
    if n_ties[0] == 0 or load < low[0]:
        low[0] = load
        ties[0] = pos
        n_ties[0] = 1
    elif load == low[0]:
        if n_ties[0] == MAX_TIES:
            return True
        ties[n_ties[0]] = pos
        n_ties[0] += 1
    return False


cdef object c_least_loaded(object sim, list nodes, object candidates):
    """least_loaded; the ties are kept as positions (in ``candidates``, or in ``nodes``
    where no candidate is up), not as a list."""
    cdef Py_ssize_t ties[MAX_TIES]
    cdef Py_ssize_t n_ties = 0, k
    cdef long long low = 0
    cdef list given
    if candidates is not None:
        given = candidates if type(candidates) is list else list(candidates)
        for k in range(len(given)):
            if _consider(<Node>nodes[given[k]], k, &low, ties, &n_ties):
                return _reference.least_loaded(sim, candidates)
        if n_ties:
            return given[ties[_draw(sim, n_ties)]]
    for k in range(len(nodes)):
        if _consider(<Node>nodes[k], k, &low, ties, &n_ties):
            return _reference.least_loaded(sim, None)
    return (<Node>nodes[ties[_draw(sim, n_ties)]]).index


cdef object c_least_loaded_at(object sim, list nodes, Py_ssize_t* at, Py_ssize_t n):
    """least_loaded of the nodes at positions ``at[:n]`` (each node's ``index`` is
    its position in ``sim.nodes``): the same choice and draw without the list."""
    cdef Py_ssize_t ties[MAX_TIES]
    cdef Py_ssize_t n_ties = 0, k
    cdef long long low = 0
    if n > MAX_TIES:
        return c_least_loaded(sim, nodes, [(<Node>nodes[at[k]]).index for k in range(n)])
    for k in range(n):
        _consider(<Node>nodes[at[k]], at[k], &low, ties, &n_ties)  # n <= MAX_TIES ties
    if n_ties == 0:
        return c_least_loaded(sim, nodes, None)
    return (<Node>nodes[ties[_draw(sim, n_ties)]]).index


def least_loaded(sim, candidates=None):
    cdef list nodes = sim.nodes
    if not compiled_nodes(nodes):
        return _reference.least_loaded(sim, candidates)
    return c_least_loaded(sim, nodes, candidates)


cdef object c_cache_aware(
    object sim, list nodes, object request, double balance_abs, double balance_rel
):
    if sim.match_with_ram:  # (match_tiers="hbm_ram": the reference's two-tier match)
        return _reference.cache_aware_choice(sim, request, balance_abs, balance_rel)
    cdef object blocks = request.blocks
    cdef long long high = -1, low = 1LL << 62, load, best_load = 0
    cdef Py_ssize_t match, best_match = -1, k
    cdef Py_ssize_t ties[MAX_TIES]
    cdef Py_ssize_t n_ties = 0
    cdef Node node
    for k in range(len(nodes)):
        node = <Node>nodes[k]
        if node.down:
            continue
        load = _load(node)
        if load > high:
            high = load
        if load < low:
            low = load
        match = hbm_match(node.view, blocks)
        if match > best_match or (match == best_match and load < best_load):
            best_match = match
            best_load = load
            ties[0] = k
            n_ties = 1
        elif match == best_match and load == best_load:
            if n_ties == MAX_TIES:  # (a cluster this large: the reference, no draw made yet)
                return _reference.cache_aware_choice(sim, request, balance_abs, balance_rel)
            ties[n_ties] = k
            n_ties += 1
    if <double>high > balance_abs and <double>high > balance_rel * <double>low:
        return c_least_loaded(sim, nodes, None)
    return (<Node>nodes[ties[_draw(sim, n_ties)]]).index


def cache_aware_choice(sim, request, balance_abs=64, balance_rel=1.5):
    cdef list nodes = sim.nodes
    if not compiled_nodes(nodes):
        return _reference.cache_aware_choice(sim, request, balance_abs, balance_rel)
    return c_cache_aware(sim, nodes, request, balance_abs, balance_rel)


def soonest_node(sim, estimates):
    cdef list nodes = sim.nodes
    if not compiled_nodes(nodes):
        return _reference.soonest_node(sim, estimates)
    cdef Node node
    cdef object best = -1
    cdef bint found = False
    cdef double first, best_first = 0.0
    cdef long long load, best_load = 0
    for node in nodes:
        if node.down:
            continue
        first = (<tuple>estimates[node.index])[1]
        load = _load(node)
        if not found or first < best_first or (first == best_first and load < best_load):
            best, best_first, best_load = node.index, first, load
            found = True
    return best
