"""Routing-only baselines: random, round robin, least load, cache aware (as the
BTB write-up's simulator reads SGLang's default)."""

from __future__ import annotations

from baselines.policy import Policy, register
from envs.sim.cache import PrefixCache
from envs.sim.checks import check_range
from envs.sim.request import Request
from envs.sim.simulator import Simulator


def pick(sim: Simulator, ties: list[int]) -> int:
    """One of ``ties`` (non-empty) uniformly at random from ``sim.rng``; no draw for one."""
    if len(ties) == 1:
        return ties[0]
    return ties[int(sim.rng.random() * len(ties))]


def least_loaded(sim: Simulator, candidates: list[int] | None = None) -> int:
    """The node with the fewest running + waiting requests; ties at random (``sim.rng``)."""
    nodes = sim.nodes
    if candidates is None:
        loads = [n.load for n in nodes]
        low = min(loads)
        ties = [i for i, load in enumerate(loads) if load == low]
    else:
        low = min(nodes[i].load for i in candidates)
        ties = [i for i in candidates if nodes[i].load == low]
    if len(ties) == 1:
        return ties[0]
    return ties[int(sim.rng.random() * len(ties))]


@register("random")
class RandomRouter(Policy):
    """Uniformly random node."""

    def decide(self, sim: Simulator, request: Request) -> int:
        return int(sim.rng.random() * sim.n_nodes)


@register("round_robin")
class RoundRobin(Policy):
    """Nodes in turn."""

    def __init__(self) -> None:
        self._next = 0

    def reset(self, sim: Simulator) -> None:
        self._next = 0

    def decide(self, sim: Simulator, request: Request) -> int:
        node = self._next % sim.n_nodes
        self._next += 1
        return node


@register("least_load")
class LeastLoad(Policy):
    """Minimum running + waiting requests; ties at random."""

    def decide(self, sim: Simulator, request: Request) -> int:
        return least_loaded(sim)


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
    matched = _hbm_ram_match if sim.match_with_ram else PrefixCache.hbm_match
    for i, node in enumerate(sim.nodes):
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
