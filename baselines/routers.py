"""Routing-only baselines: random, round robin, least load, cache aware (as the
BTB write-up's simulator reads SGLang's default).

Every baseline routes and copies among :func:`up_nodes`: a node lost to a fault
(``node.down``) is skipped, as a production router's health checks skip it.
Without the simulator's fault options no node is ever down, and nothing changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

from baselines.native import FORECAST, ROUTERS
from baselines.policy import Policy, register
from envs.sim import native
from envs.sim.cache import PrefixCache
from envs.sim.checks import check_range
from envs.sim.forecast import HitMemo
from envs.sim.forecast import estimates_with_hits as _estimates_with_hits
from envs.sim.node import Node
from envs.sim.request import Request
from envs.sim.simulator import Simulator


def up_nodes(sim: Simulator) -> list[Node]:
    """The nodes a baseline may route or copy to: all but those down (the
    ``SimConfig`` fault options; a production router knows from health checks)."""
    return [node for node in sim.nodes if not node.down]


def pick(sim: Simulator, ties: list[int]) -> int:
    """One of ``ties`` (non-empty) uniformly at random from ``sim.rng``; no draw for one."""
    if len(ties) == 1:
        return ties[0]
    return ties[int(sim.rng.random() * len(ties))]


def least_loaded(sim: Simulator, candidates: list[int] | None = None) -> int:
    """The node up (of ``candidates``, default all) with the fewest running +
    waiting requests; ties at random (``sim.rng``)."""
    nodes = sim.nodes
    if candidates is not None:
        candidates = [i for i in candidates if not nodes[i].down] or None
    if candidates is None:
        up = up_nodes(sim)
        low = min(n.load for n in up)
        ties = [n.index for n in up if n.load == low]
    else:
        low = min(nodes[i].load for i in candidates)
        ties = [i for i in candidates if nodes[i].load == low]
    return pick(sim, ties)


def earliest_first_token(
    sim: Simulator, request: Request, memo: HitMemo | None = None, step_wait: bool = False
) -> int:
    """The node up where ``request``'s first token is expected soonest by the
    causal cost model the observation shows
    (:func:`envs.sim.forecast.first_token_estimates`: each node's current work
    and queued prefills, each with what it will find cached, then this
    request's prefill with its HBM hit there); ties by load, then index.
    ``memo`` keeps the queues' costs from one call to the next (one per run);
    ``step_wait`` adds each node's rest of its decode step (``eft_step``)."""
    return soonest_node(sim, estimates_with_hits(sim, request, memo, step_wait))


def estimates_with_hits(
    sim: Simulator, request: Request, memo: HitMemo | None, step_wait: bool = False
) -> list[tuple[float, float, int]]:
    """(backlog, expected first token, HBM hit) per node for ``request``: the
    routers' :func:`envs.sim.forecast.estimates_with_hits`, whose compiled twin
    (``envs.sim._native.forecast``, the same floats) runs where
    :mod:`baselines.native` chooses it. A ``memo`` holds one implementation's queue
    costs: give each router its own."""
    return _estimates_with_hits(sim, request, memo, step_wait)


def soonest_node(sim: Simulator, estimates: Sequence[tuple[float, ...]]) -> int:
    """The node up with the earliest expected first token in ``estimates``
    ((backlog, first token, ...) per node: :func:`estimates_with_hits`' or
    :func:`envs.sim.forecast.first_token_estimates`'); ties by load, then index."""
    best = -1
    best_first = best_load = 0.0
    for node in up_nodes(sim):
        first = estimates[node.index][1]
        load = node.load
        if best < 0 or first < best_first or (first == best_first and load < best_load):
            best, best_first, best_load = node.index, first, load
    return best


@register("random")
class RandomRouter(Policy):
    """Uniformly random node."""

    def decide(self, sim: Simulator, request: Request) -> int:
        up = up_nodes(sim)
        return up[int(sim.rng.random() * len(up))].index


@register("round_robin")
class RoundRobin(Policy):
    """Nodes in turn (a node down loses its turn)."""

    def __init__(self) -> None:
        self._next = 0

    def reset(self, sim: Simulator) -> None:
        self._next = 0

    def decide(self, sim: Simulator, request: Request) -> int:
        nodes = sim.nodes
        node = self._next % len(nodes)
        self._next += 1
        while nodes[node].down:  # faults never take the last node up
            node = self._next % len(nodes)
            self._next += 1
        return node


@register("least_load")
class LeastLoad(Policy):
    """Minimum running + waiting requests; ties at random."""

    def decide(self, sim: Simulator, request: Request) -> int:
        return least_loaded(sim)


@register("eft")
class EarliestFirstToken(Policy):
    """btb-gym's router (not a production one): the node where the request's
    first token is expected soonest (:func:`earliest_first_token`); no warming."""

    step_wait = False

    def __init__(self) -> None:
        self._memo: HitMemo = {}

    def reset(self, sim: Simulator) -> None:
        self._memo = {}

    def decide(self, sim: Simulator, request: Request) -> int:
        return earliest_first_token(sim, request, self._memo, self.step_wait)


@register("eft_step")
class EarliestFirstTokenStep(EarliestFirstToken):
    """btb-gym's router: ``eft`` whose estimates also count the rest of the decode
    step each node is running (:func:`envs.sim.forecast.decode_step_left_s`), which
    a request admitted there waits for, as the observation's ``step_wait`` option
    counts it; no warming."""

    step_wait = True


@register("cache_aware")
class CacheAware(Policy):
    """The Infer-Sim reading of SGLang's default router.

    If the cluster is imbalanced (max load > ``balance_abs`` and max load >
    ``balance_rel`` x min load) route by least load; otherwise to the node with
    the longest prefix match, ties by load, then at random. The match counts the
    leading blocks in HBM, or in HBM and host RAM together under
    ``SimConfig.match_tiers="hbm_ram"`` (the reference model's reading).
    """

    def __init__(self, balance_abs: float = 64, balance_rel: float = 1.5) -> None:
        check_range("cache_aware.balance_abs", balance_abs, 0, finite=True)
        check_range("cache_aware.balance_rel", balance_rel, 1, finite=True)
        self.balance_abs = balance_abs
        self.balance_rel = balance_rel

    def decide(self, sim: Simulator, request: Request) -> int:
        return cache_aware_choice(sim, request, self.balance_abs, self.balance_rel)


def cache_aware_choice(
    sim: Simulator, request: Request, balance_abs: float = 64, balance_rel: float = 1.5
) -> int:
    blocks = request.blocks
    high = -1
    low = 1 << 62
    best_match = -1
    best_load = 0
    ties: list[int] = []
    # the class the simulator builds its caches from (compiled or the reference)
    matched = _hbm_ram_match if sim.match_with_ram else native.PrefixCache.hbm_match
    for node in up_nodes(sim):
        i = node.index
        load = node.load
        if load > high:
            high = load
        if load < low:
            low = load
        match = matched(node.view, blocks)
        if match > best_match or (match == best_match and load < best_load):
            best_match = match
            best_load = load
            ties = [i]
        elif match == best_match and load == best_load:
            ties.append(i)
    if high > balance_abs and high > balance_rel * low:
        return least_loaded(sim)
    if len(ties) == 1:
        return ties[0]
    return ties[int(sim.rng.random() * len(ties))]


def _hbm_ram_match(cache: PrefixCache, blocks: tuple[int, ...]) -> int:
    """Leading blocks of ``blocks`` cached in HBM or host RAM."""
    hbm, ram, _ = cache.match(blocks)
    return hbm + ram


REFERENCE = SimpleNamespace(
    up_nodes=up_nodes,
    least_loaded=least_loaded,
    cache_aware_choice=cache_aware_choice,
    soonest_node=soonest_node,
    estimates_with_hits=estimates_with_hits,
)
"""The readable scans above (the tests' oracle). Where the compiled twins apply
(:mod:`baselines.native`), the module's names are theirs: the same choices and
random draws, from the compiled simulator's nodes read as C structs (on the
reference simulator's nodes they call these)."""
if ROUTERS is not None:
    ROUTERS.bind(REFERENCE)
    up_nodes = ROUTERS.up_nodes
    least_loaded = ROUTERS.least_loaded
    cache_aware_choice = ROUTERS.cache_aware_choice
    soonest_node = ROUTERS.soonest_node
if FORECAST is not None:
    estimates_with_hits = FORECAST.estimates_with_hits
