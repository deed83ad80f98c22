# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""BTB's per-arrival decision, compiled: a twin of :meth:`baselines.btb.BTB.decide`
(with ``_otherwise``, ``_holders``, ``_warm_and_route`` and ``_issued``) under the
published rule (``baselines.btb``), btb_pending's (``baselines.btb_pending``) and
the threshold env's switched one (``envs.thresholds.SwitchedBTB``, which picks
one of the two by its ``pending`` flag), and of the X-in-Z count of
:class:`baselines.window.ArrivalWindow`. The Python is the readable reference;
change the two together.

The policy's state stays in the Python object (its thresholds, its arrival
window, btb_pending's counts): the twin reads it there on each call, so the
thresholds may change between calls as they do in the reference. It runs only on
the compiled simulator's nodes and never in shadow mode (``baselines.btb`` picks
it at ``reset``, :func:`baselines.native.btb_twin`). The fallback routes, the
copies and btb_pending's counted case are the reference's Python calls.
"""

from collections import deque

from baselines._native.routers cimport (
    c_cache_aware,
    c_least_loaded_at,
    compiled_nodes,
    hbm_match_n,
)
from envs.sim._native.core cimport Node

from envs.sim.simulator import TARGET_HOLDS, WARM_OK

cdef enum:
    PREFILL = 1  # envs.sim.node's work kind

NODES_MAX = MAX_NODES
"""The largest cluster the twin decides for (baselines.native.btb_twin)."""

cdef object _earliest_first_token = None  # baselines.routers' (imported on first use)


def window_count(dict seen, key, double now, double z):
    """:meth:`baselines.window.ArrivalWindow.count` on its ``_seen`` dict."""
    return c_window_count(seen, key, now, z)


cdef Py_ssize_t c_window_count(dict seen, object key, double now, double z) except -1:
    times = seen.get(key)
    if times is None:
        times = seen[key] = deque()
    times.append(now)
    cdef double horizon = now - z
    while <double>times[0] < horizon:
        times.popleft()
    return len(times)


cdef bint _computes_prefix(Node node, Py_ssize_t depth, object key) except -1:
    """:func:`envs.sim.forecast.computes_prefix` (with ``has_prefix`` inline)."""
    cdef object blocks
    if node.work == PREFILL:
        blocks = node.work_obj.blocks
        if len(blocks) >= depth and blocks[depth - 1] == key:
            return True
    for request in node.queue:
        blocks = request.blocks
        if len(blocks) >= depth and blocks[depth - 1] == key:
            return True
    return False


cdef object _otherwise(object policy, Rule* rule, object sim, list nodes, object request):
    """``BTB._otherwise`` (never in shadow mode)."""
    global _earliest_first_token
    if rule.router_fallback:
        return policy.fallback_router.decide(sim, request)
    if rule.eft_fallback:
        if _earliest_first_token is None:
            from baselines.routers import earliest_first_token

            _earliest_first_token = earliest_first_token
        return _earliest_first_token(sim, request, policy._memo)
    return c_cache_aware(sim, nodes, request, 64.0, 1.5)


cdef int read_rule(object policy, Rule* rule) except -1:
    """The policy's thresholds and rule in force (what one decision reads)."""
    y = policy.y
    rule.y = 0 if y is None else y
    rule.min_prefix_blocks = policy.min_prefix_blocks
    rule.x = policy.x
    rule.z = policy.z
    rule.m = policy.m
    rule.pending = policy.pending
    rule.eft_fallback = policy.eft_fallback
    rule.router_fallback = policy.fallback_router is not None
    return 0


def decide(policy, sim, request):
    """``policy.decide(sim, request)`` of BTB (and its rule variants, with
    btb_pending's counting) on the compiled simulator."""
    cdef Rule rule
    read_rule(policy, &rule)
    return c_decide(policy, &rule, policy._window._seen, sim, request)


cdef object c_decide(object policy, Rule* rule, dict seen, object sim, object request):
    cdef list nodes = sim.nodes
    if not compiled_nodes(nodes):
        raise ValueError("the compiled BTB decision runs on the compiled simulator's nodes only")
    cdef object blocks = request.blocks
    cdef Py_ssize_t n = len(blocks)
    cdef Py_ssize_t y = rule.y
    if y == 0:  # Y None: the prompt but its last block
        y = n - 1 if n > 1 else 1
    if n < y or y < rule.min_prefix_blocks:
        choice = _otherwise(policy, rule, sim, nodes, request)
    elif c_window_count(seen, blocks[y - 1], sim.now, rule.z) < rule.x:
        choice = _otherwise(policy, rule, sim, nodes, request)
    else:  # the prefix is blocks[:y] (a tuple made only for a copy)
        choice = _warm_and_route(policy, rule, sim, nodes, request, blocks, y)
    # btb_pending's count of the requests it routed that have not prefilled yet
    tracked = getattr(policy, "_tracked_y", None)
    if tracked is not None and n >= <Py_ssize_t>tracked:
        entry = (choice, blocks[<Py_ssize_t>tracked - 1])
        counts = policy._unprefilled
        counts[entry] = counts.get(entry, 0) + 1
        policy._unprefilled_of[request.index] = entry
    return choice


cdef object _warm_and_route(
    object policy,
    Rule* rule,
    object sim,
    list nodes,
    object request,
    object blocks,
    Py_ssize_t depth,
):
    """_holders, the copies and the routing of ``BTB._warm_and_route``. The node sets
    are positions in ``sim.nodes`` (a node's ``index`` is its position) in C arrays,
    in the reference's order."""
    cdef Py_ssize_t n_nodes = len(nodes)
    if n_nodes > MAX_NODES:  # (baselines.native.btb_twin never picks it then)
        raise ValueError(f"the compiled BTB decision takes at most {MAX_NODES} nodes")
    cdef object key = blocks[depth - 1]
    cdef object prefix = None
    cdef bint pending = rule.pending
    cdef Py_ssize_t resident[MAX_NODES]
    cdef Py_ssize_t held[MAX_NODES]
    cdef Py_ssize_t computing[MAX_NODES]
    cdef bint is_held[MAX_NODES]
    cdef Py_ssize_t n_resident = 0, n_held = 0, n_computing = 0, j
    cdef Node node
    cdef object tracked = policy._tracked_y if pending else None
    cdef bint coming
    # _holders: the published rule, or btb_pending's
    for j in range(n_nodes):
        node = <Node>nodes[j]
        is_held[j] = False
        if node.down:
            continue
        if hbm_match_n(node.view, blocks, depth) >= depth:
            resident[n_resident] = j
            n_resident += 1
            coming = True
        elif key in node.inflight:
            coming = True
        elif pending:
            if tracked is not None and depth == <Py_ssize_t>tracked:
                coming = policy._computes(sim, node, depth, key)
            else:
                coming = _computes_prefix(node, depth, key)
            if coming:
                computing[n_computing] = j
                n_computing += 1
        else:
            coming = False
        if coming:
            held[n_held] = j
            n_held += 1
            is_held[j] = True
    # published: route to and copy from the resident nodes; btb_pending: route to the
    # held ones (and the copies it issues), copy from the resident or else computing
    cdef Py_ssize_t* route_to = &resident[0]
    cdef Py_ssize_t* n_route = &n_resident
    if pending:
        route_to = &held[0]
        n_route = &n_held
    cdef Py_ssize_t* sources = &resident[0]
    cdef Py_ssize_t n_sources = n_resident
    if pending and n_resident == 0:
        sources = &computing[0]
        n_sources = n_computing
    cdef Py_ssize_t m = rule.m, n_cold = 0, i, k, n_copies, src = -1
    cdef Py_ssize_t cold[MAX_NODES]
    cdef long long cold_loads[MAX_NODES]
    cdef long long load, src_load = 0
    if n_sources and n_held < m:
        # the nodes up that neither hold nor get the prefix, by (load, index)
        for j in range(n_nodes):
            node = <Node>nodes[j]
            if node.down or is_held[j]:
                continue
            load = node.running + len(node.queue)
            i = n_cold
            while i > 0 and load < cold_loads[i - 1]:  # (in index order already)
                cold[i] = cold[i - 1]
                cold_loads[i] = cold_loads[i - 1]
                i -= 1
            cold[i] = j
            cold_loads[i] = load
            n_cold += 1
        for k in range(n_sources):  # the source: the lowest (load, index)
            node = <Node>nodes[sources[k]]
            load = node.running + len(node.queue)
            if src < 0 or load < src_load or (load == src_load and sources[k] < src):
                src, src_load = sources[k], load
        n_copies = m - n_held
        source = (<Node>nodes[src]).index
        for k in range(n_cold):  # a refused copy's place goes to the next cold node
            if n_copies == 0:
                break
            if prefix is None:
                prefix = tuple(blocks[:depth])
            target = (<Node>nodes[cold[k]]).index
            answer = sim.warm(source, target, prefix)
            if answer == WARM_OK:
                n_copies -= 1
                if pending:
                    held[n_held] = cold[k]  # btb_pending routes to a copy before it lands
                    n_held += 1
            elif answer in TARGET_HOLDS:  # (a delayed view saw it cold): it counts
                n_copies -= 1
    if n_route[0] == 0:
        return _otherwise(policy, rule, sim, nodes, request)
    return c_least_loaded_at(sim, nodes, route_to, n_route[0])
