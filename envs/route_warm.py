"""``btb/RouteWarm-v0``: route each request, and optionally warm its prefix onto
other nodes and evict it from one."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
from gymnasium import spaces

from envs.encoder import prefix_of
from envs.route import RouteEnv
from envs.sim.checks import check_flag
from envs.sim.lifecycle import MOVE_OK, PIN_OK
from envs.sim.request import Request
from envs.sim.simulator import WARM_OK, Simulator
from envs.sim.speculation import SPECULATE_OK, refusal


class RouteWarmEnv(RouteEnv):
    """
    ## Description

    As ``btb/Route-v0`` (same world, observation, reward and episodes), but at
    each arrival the agent also manages the caches: it may RDMA-copy the
    arriving request's prefix (its prompt blocks but the last) to any other
    nodes, and evict that prefix from one node's HBM. This is the action set
    BTB hard-codes (warm on a predicted burst, route to a warm node).

    ## Action Space

    ``MultiDiscrete([n_nodes] + [2] * n_nodes + [n_nodes + 1])``:

    * ``a[0]``: the node the request is routed to (routing happens first);
    * ``a[1 + k]``: 1 to warm the prefix onto node ``k``. The source is the
      least-loaded node holding the prefix in HBM, or else the routed node,
      which will compute it (the copy starts when its prefill ends);
    * ``a[1 + n_nodes]``: 0 for no eviction, ``k + 1`` to evict the prefix
      (and what hangs below it) from node ``k``'s HBM to host RAM (done before
      routing).

    With ``speculate=True`` the action has ``n_nodes`` more entries,
    ``MultiDiscrete([n_nodes] + [2] * n_nodes + [n_nodes + 1] + [2] * n_nodes)``:

    * ``a[2 + n_nodes + k]``: 1 to have node ``k`` compute the prefix itself by
      speculative prefill on idle compute (``Simulator.speculate``; done after
      routing and warming: on the node the request was routed to it runs only
      if that node is idle once the request is served, and is refused
      ``node_has_prefix`` when serving brought the prefix into its HBM).

    A warm onto the routed node itself does nothing (and is not counted as
    invalid) when that node will compute the prefix (no node holds it) or
    already holds it once routed; otherwise it is a copy like any other.

    ``action_masks()`` returns the flat boolean mask MaskablePPO expects: a warm
    onto a node that already holds the prefix, has it in flight, or lacks the
    KV headroom is masked, and so is evicting from a node that holds none of it
    in HBM, or holds only pinned blocks of it (which an eviction leaves in place);
    speculating on a node that holds the prefix, has it in flight or already
    speculates it, or lacks the headroom is masked too.
    With the simulator's fault options on, a down node is masked for routing,
    warming and evicting, and a node whose NIC is down for warming
    (docs/faults.md); without, no node is ever down.
    The mask treats each part on its own, so it cannot foresee how the parts of
    one action interact: a warm onto a node that the same action evicts the
    prefix from must copy the evicted blocks too, and may no longer fit (and
    routing reserves the request's KV on the routed node). Parts refused anyway
    are refused by the simulator without effect and counted in
    ``info["invalid_actions"]``. With model versions (``sim.model_versions``,
    ``sim.upgrade_at_s``) a warm onto a node that drains for an upgrade, or of
    another version than the holder the copy would come from, is masked too.
    When no node that can send holds the prefix, the copy comes from the routed
    node, which the mask cannot know: a warm onto a node of another version than
    the routed one, or from a routed node whose NIC is down, is refused then
    (``version_mismatch``, ``nic_down``) and counted. Under the reference
    behaviour (``causal_kv=False``) the routed node holds the prefix from its
    admission and may become the least-loaded holder, so the source the mask
    read may change with the route: such a warm is refused and counted alike.

    With ``cache_actions=True`` two more parts manage the prefix's lifetime
    (docs/cache_actions.md), last (after the speculate bits when
    ``speculate=True`` too: ``route_warm_sizes`` gives the layout):
    ``MultiDiscrete([n_nodes] + [2] * n_nodes + [n_nodes + 1] + [2 * n_nodes + 1] * 2)``
    without speculate. With ``s = n_nodes`` if ``speculate`` else 0:

    * ``a[2 + n_nodes + s]``: 0 nothing, ``k + 1`` pin the prefix on node ``k``,
      ``n_nodes + k + 1`` unpin it there;
    * ``a[3 + n_nodes + s]``: 0 nothing, ``k + 1`` demote the prefix on node ``k``
      to host RAM, ``n_nodes + k + 1`` promote it there from RAM / disk.

    Their masks are the simulator's own refusals (``Simulator.pin_refusal``,
    ``demote_refusal``, ``promote_refusal``; unpin: the prefix is pinned there)
    before the action's other parts act.

    ## Observation Space

    The same as ``btb/Route-v0``'s: one encoder builds both. Route-v0's table is
    added here when this module is imported, so ``help()`` shows it.

    ## Rewards, Starting State, Episode End, Arguments

    As ``btb/Route-v0``; rewards include ``copy_cost_per_gb`` when set.

    ## Arguments

    As ``btb/Route-v0``'s, and ``speculate`` and ``cache_actions`` (both default
    False): add the speculative-prefill parts and the pin and demote / promote
    parts to the action (above).

    ## Version History

    * v0: initial version; ``speculate`` added later (off by default: the
      default action space is unchanged).
    * v0, after btb-gym 0.1.0: ``hints=True``'s class columns as in ``btb/Route-v0``.
    """

    def __init__(self, speculate: bool = False, cache_actions: bool = False, **kwargs: Any) -> None:
        for name, value in (("speculate", speculate), ("cache_actions", cache_actions)):
            check_flag(name, value)
        super().__init__(**kwargs)
        self.speculate = bool(speculate)
        self.cache_actions = bool(cache_actions)
        for name in ("speculate", "cache_actions"):
            if getattr(self, name):
                self._kwargs[name] = True  # rebuilt as it was when unpickled
        sizes = route_warm_sizes(self.n_nodes, self.speculate, self.cache_actions)
        self.action_space = spaces.MultiDiscrete(sizes)

    def _act(self, action: Any) -> bool:
        assert self.sim is not None and self.request is not None
        self.invalid_actions += apply_route_warm(
            self.sim, self.request, action, self.speculate, self.cache_actions
        )
        try:
            self.request = self._gen.send(None)
        except StopIteration:
            return True
        return False

    def action_masks(self) -> np.ndarray:
        """Flat boolean mask over the MultiDiscrete choices (see the class docstring)
        for the request the next ``step()`` routes; outside an episode (before
        ``reset()``, after an episode ends) it raises, as ``step()`` does."""
        self._check_running("action_masks()")
        assert self.sim is not None and self.request is not None
        return route_warm_masks(self.sim, self.request, self.speculate, self.cache_actions)


_SAME_OBSERVATION = (
    "    The same as ``btb/Route-v0``'s: one encoder builds both. Route-v0's table is\n"
    "    added here when this module is imported, so ``help()`` shows it.\n\n"
)


def _with_route_observation(doc: str) -> str:
    """``doc`` with Route-v0's observation section after the line pointing to it, so
    that ``help(RouteWarmEnv)`` shows the table while the source holds one copy."""
    route = RouteEnv.__doc__ or ""
    section = route[route.index("    ## Observation Space\n") : route.index("    ## Rewards\n")]
    body = section.split("\n", 2)[2]  # without the heading and its blank line
    return doc.replace(_SAME_OBSERVATION, _SAME_OBSERVATION + body)


RouteWarmEnv.__doc__ = _with_route_observation(RouteWarmEnv.__doc__ or "")


def route_warm_sizes(
    n_nodes: int, speculate: bool = False, cache_actions: bool = False
) -> list[int]:
    """The ``btb/RouteWarm-v0`` action's MultiDiscrete sizes on ``n_nodes`` nodes:
    route, warm onto each node, evict; then the speculate parts (``speculate``),
    then pin / unpin and demote / promote (``cache_actions``)."""
    sizes = [n_nodes] + [2] * n_nodes + [n_nodes + 1]
    if speculate:
        sizes += [2] * n_nodes
    if cache_actions:
        sizes += [2 * n_nodes + 1] * 2
    return sizes


@lru_cache(maxsize=64)
def _action_size(n_nodes: int, speculate: bool, cache_actions: bool) -> int:
    """The number of entries of a ``btb/RouteWarm-v0`` action (:func:`route_warm_sizes`)."""
    return len(route_warm_sizes(n_nodes, speculate, cache_actions))


def apply_route_warm(
    sim: Simulator,
    request: Request,
    action: Any,
    speculate: bool = False,
    cache_actions: bool = False,
) -> int:
    """Carry out a ``btb/RouteWarm-v0`` action at the current decision point:
    evict, route (with ``sim.route``), warm, then speculate (``speculate``) and
    pin / unpin and demote / promote (``cache_actions``), the env's options.
    Returns how many of its parts were refused. Shared by the environment and
    the agent adapter."""
    n = sim.n_nodes
    size = _action_size(n, speculate, cache_actions)
    if type(action) is tuple and all(type(x) is int for x in action):  # ClusterEnv._freeze's
        entries = list(action)
        shape: tuple[int, ...] = (len(entries),)
    else:
        a = np.asarray(action).ravel()
        entries, shape = a.tolist(), a.shape  # plain numbers: cheaper than numpy on a few
    if shape != (size,):
        raise ValueError(f"action must have {size} entries for MultiDiscrete, got shape {shape}")
    end = 2 + n  # where the optional parts start
    speculates = entries[end : end + n] if speculate else []
    for k, bit in enumerate(speculates):
        if bit != 0 and bit != 1:
            raise ValueError(f"action[{end + k}] (speculate on {k}) must be 0 or 1, got {bit}")
    life = end + n if speculate else end  # the pin part, then the move part
    if cache_actions:
        for k in (life, life + 1):
            if not 0 <= int(entries[k]) <= 2 * n:
                raise ValueError(f"action[{k}] must be in 0..{2 * n}, got {int(entries[k])}")
    route = int(entries[0])
    if not 0 <= route < n:
        raise ValueError(f"action[0] (route) must be in 0..{n - 1}, got {route}")
    warms = entries[1 : 1 + n]
    for k, bit in enumerate(warms):
        if bit != 0 and bit != 1:
            raise ValueError(f"action[{1 + k}] (warm onto node {k}) must be 0 or 1, got {bit}")
    evict = int(entries[1 + n])
    if not 0 <= evict <= n:
        raise ValueError(f"action[{1 + n}] (evict) must be in 0..{n}, got {evict}")
    routed = sim.routed_node()
    if routed is not None and routed != route:  # refused before the eviction changes anything
        raise ValueError(
            f"action[0] routes the request to node {route}, but it is already routed to "
            f"node {routed} (by policy_action's policy)"
        )
    invalid = 0
    prefix = prefix_of(request)
    if evict and sim.evict(evict - 1, prefix) == 0:
        invalid += 1
    sim.route(route)  # a no-op if the request is already routed there
    targets = [k for k, bit in enumerate(warms) if bit]
    if targets:
        holder = warm_source(sim, prefix)
        src = route if holder is None else holder
        holds = sim.nodes[route].view.hbm_match(prefix) >= len(prefix)
        if route in targets and (src == route or holds):
            targets.remove(route)  # the routed node computes or holds the prefix: no copy
        for dst in targets:
            if sim.warm(src, dst, prefix) != WARM_OK:
                invalid += 1
    for k, bit in enumerate(speculates):
        if bit and sim.speculate(k, prefix) != SPECULATE_OK:
            invalid += 1
    if cache_actions:
        invalid += _apply_cache_actions(sim, prefix, int(entries[life]), int(entries[life + 1]))
    return invalid


def warm_source(sim: Simulator, prefix: tuple[int, ...]) -> int | None:
    """The source of the action's warm copies when a node that can send holds
    ``prefix`` in HBM: the least-loaded such node (lowest index on ties); None when
    none does. A node that is down, whose NIC is down or that drains for an upgrade
    cannot send."""
    depth = len(prefix)
    best = None
    best_load = 0
    for node in sim.nodes:  # in index order: the first of the lowest load wins
        if node.down or node.nic_down or node.draining or node.view.hbm_match(prefix) < depth:
            continue
        load = node.running + len(node.queue)
        if best is None or load < best_load:
            best, best_load = node.index, load
    return best


def _apply_cache_actions(sim: Simulator, prefix: tuple[int, ...], pin: int, move: int) -> int:
    """The pin / unpin and demote / promote parts; returns how many were refused."""
    n = sim.n_nodes
    invalid = 0
    if pin:
        k = (pin - 1) % n
        done = sim.pin(k, prefix) == PIN_OK if pin <= n else sim.unpin(k, prefix) > 0
        invalid += not done
    if move:
        k = (move - 1) % n
        answer = sim.demote(k, prefix) if move <= n else sim.promote(k, prefix)
        invalid += answer != MOVE_OK
    return invalid


def route_warm_masks(
    sim: Simulator, request: Request, speculate: bool = False, cache_actions: bool = False
) -> np.ndarray:
    """The ``btb/RouteWarm-v0`` action mask at the current decision point:
    ``[route: n][warm k: no, yes for each k][evict: none, node 0..n-1]``, then
    with ``speculate`` ``[speculate on k: no, yes for each k]``, then with
    ``cache_actions`` ``[pin: none, pin on 0..n-1, unpin on 0..n-1][move: none,
    demote on 0..n-1, promote on 0..n-1]``."""
    n = sim.n_nodes
    mask = [True] * (6 * n + 1 if speculate else 4 * n + 1)  # a list: cheaper to set item by item
    prefix = prefix_of(request)
    depth = len(prefix)
    key = prefix[-1]
    bt = sim.block_tokens
    pinned = sim.life.pins > 0  # a pin ever made this run (cache actions, sim.pin)
    for k, node in enumerate(sim.nodes):
        if node.down:  # lost (SimConfig fault options): no routing, warming or evicting there
            mask[k] = mask[n + 2 * k + 1] = mask[3 * n + 1 + k] = False
            if speculate:
                mask[4 * n + 2 + 2 * k] = False
            continue
        held = node.view.hbm_match(prefix)
        if (
            held >= depth
            or key in node.inflight
            or depth - held > node.copy_room_blocks(bt)
            or node.nic_down
        ):
            mask[n + 2 * k + 1] = False
        view = node.view  # what the router sees, as for ``held``
        if held == 0 or (pinned and view.pins and view.hbm_below(prefix) == 0):
            mask[3 * n + 1 + k] = False  # nothing to move (pinned blocks stay)
        if speculate and refusal(node, prefix, bt, sim.speculation):
            mask[4 * n + 2 + 2 * k] = False
    versions = sim.versions
    if versions is not None:  # model versions: a warm the simulator would refuse is masked
        src, now = warm_source(sim, prefix), sim.now
        for k in range(n):
            if versions.upgrading(k, now) or (
                src is not None and versions.warm_refusal(src, k, now)
            ):
                mask[n + 2 * k + 1] = False
    if cache_actions:
        return np.concatenate([np.array(mask, dtype=bool), _cache_action_masks(sim, prefix)])
    return np.array(mask, dtype=bool)


def allowed_warms(mask: np.ndarray, n_nodes: int) -> np.ndarray:
    """The warm bits (``a[1 : 1 + n_nodes]``) that warm onto every node a
    :func:`route_warm_masks` mask allows: each node's "yes" entry."""
    return np.asarray(mask[n_nodes + 1 : 3 * n_nodes : 2], dtype=np.int64)


def _cache_action_masks(sim: Simulator, prefix: tuple[int, ...]) -> np.ndarray:
    """The masks of the pin / unpin and demote / promote parts: what the
    simulator would accept now."""
    n = sim.n_nodes
    pin = np.ones(2 * n + 1, dtype=bool)
    move = np.ones(2 * n + 1, dtype=bool)
    for k, node in enumerate(sim.nodes):
        pin[1 + k] = sim.pin_refusal(k, prefix) == PIN_OK
        pin[1 + n + k] = prefix[-1] in node.cache.pins
        move[1 + k] = sim.demote_refusal(k, prefix) == MOVE_OK
        move[1 + n + k] = sim.promote_refusal(k, prefix) == MOVE_OK
    return np.concatenate([pin, move])
