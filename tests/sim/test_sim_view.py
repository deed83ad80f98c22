"""The stale router view (``SimConfig.router_view_delay_s``), worked out by hand on
the toy cluster: a request's prompt of 4 blocks (64 tokens) takes 64 ms to
prefill, a copy of 4 blocks 32 ms; with one output token it finishes (and its
context is cached) at the end of its prefill."""

from __future__ import annotations

import pytest
from simkit import Prompts, check_run, names, toy_cluster

from baselines.routers import cache_aware_choice
from envs.sim import SimConfig, Simulator
from envs.sim.request import Request
from envs.sim.view import Views

DELAY_S = 0.25


class FixedThenCacheAware:
    """Routes request i to ``fixed[i]`` when given, else as cache_aware; records
    ``sim.hbm_hits`` / ``sim.holders`` of the shared prefix at every decision."""

    def __init__(self, fixed: dict[int, int], prefix: tuple[int, ...], warms=None) -> None:  # type: ignore[no-untyped-def]
        self.fixed = fixed
        self.prefix = prefix
        self.warms = warms or {}
        self.seen: dict[int, tuple[list[int], list[int], list[int]]] = {}
        self.true_hits: dict[int, list[int]] = {}

    def decide(self, sim: Simulator, request: Request) -> int:
        if request.index in self.warms:
            src, dst = self.warms[request.index]
            assert sim.warm(src, dst, self.prefix) == "ok"
        resident, flying = sim.holders(self.prefix)
        self.seen[request.index] = (sim.hbm_hits(self.prefix), resident, flying)
        self.true_hits[request.index] = [n.cache.hbm_match(self.prefix) for n in sim.nodes]
        if request.index in self.fixed:
            return self.fixed[request.index]
        return cache_aware_choice(sim, request)


def _burst() -> tuple[Prompts, tuple[int, ...]]:
    """A at 0 s (the prefix p0..p3) on node 0; D at 0.1 s, 40 own blocks, keeps
    node 0 busy until 0.74 s; B at 0.2 s and C at 0.5 s share A's prefix."""
    p = Prompts()
    p.add(0.0, names("p", 4))  # A: done at 0.064, cached then
    p.add(0.1, names("d", 40))  # D: node 0 prefills it 0.1 .. 0.74
    p.add(0.2, [*names("p", 4), "b"])  # B: done on its node at 0.2 + 0.080
    p.add(0.5, [*names("p", 4), "c"])  # C
    return p, p.blocks(names("p", 4))


def test_default_view_is_the_cache_itself() -> None:
    p, _ = _burst()
    sim = Simulator(toy_cluster(2), p.workload())
    assert sim._views is None
    assert all(node.view is node.cache for node in sim.nodes)


def test_a_computed_prefix_is_invisible_to_cache_aware_until_the_delay_has_passed() -> None:
    # live: at 0.2 s node 0 holds the prefix (since 0.064), so B goes there
    # (behind D), and so does C. 250 ms late: at 0.2 s no node is seen to hold
    # it, so B goes to the less-loaded node 1 (done, cached at 0.28); at 0.5 s
    # node 0's prefix is seen (0.064 + 0.25 = 0.314) but not node 1's
    # (0.28 + 0.25 = 0.53), so C goes to node 0.
    routes = {}
    for delay_s in (0.0, DELAY_S):
        p, prefix = _burst()
        policy = FixedThenCacheAware({0: 0, 1: 0}, prefix)
        sim = Simulator(toy_cluster(2), p.workload(), SimConfig(router_view_delay_s=delay_s))
        sim.run(policy)
        check_run(sim)
        routes[delay_s] = list(sim.records.node)
        if delay_s:
            assert policy.seen[2][0] == [0, 0]  # B's decision: nothing visible yet
            assert policy.seen[3][0] == [4, 0]  # C's: node 0's, not node 1's
            assert policy.true_hits[3] == [4, 4]
        else:
            assert policy.seen[2][0] == policy.true_hits[2] == [4, 0]
            assert policy.seen[3][0] == policy.true_hits[3] == [4, 0]
    assert routes[0.0] == [0, 0, 0, 0]
    assert routes[DELAY_S] == [0, 0, 1, 0]


def test_the_physics_uses_the_true_cache() -> None:
    # C goes to node 0 under the stale view and hits A's 4 blocks (64 tokens) there
    p, prefix = _burst()
    sim = Simulator(toy_cluster(2), p.workload(), SimConfig(router_view_delay_s=DELAY_S))
    sim.run(FixedThenCacheAware({0: 0, 1: 0}, prefix))
    assert sim.records.hit_hbm_tokens[3] == 64
    assert sim.records.hit_hbm_tokens[2] == 0  # B on node 1: nothing there


def test_a_landed_copy_shows_in_the_view_only_after_the_delay() -> None:
    # A (0 s) computes the prefix on node 0 (cached at 0.064). At 0.5 s a copy to
    # node 1 starts (node 1 idle): 32 ms, it lands at 0.532. Live, node 1 holds it
    # from then on; 250 ms late, from 0.782. In flight it shows at once either way.
    p = Prompts()
    p.add(0.0, names("p", 4))
    for t in (0.5, 0.6, 0.8):
        p.add(t, [*names("x", 1), f"own{t}"])
    prefix = p.blocks(names("p", 4))
    seen = {}
    for delay_s in (0.0, DELAY_S):
        policy = FixedThenCacheAware({0: 0, 1: 0, 2: 0, 3: 0}, prefix, warms={1: (0, 1)})
        sim = Simulator(toy_cluster(2), p.workload(), SimConfig(router_view_delay_s=delay_s))
        sim.run(policy)
        check_run(sim)
        assert sim.copies[0].land_s == pytest.approx(0.532)
        seen[delay_s] = {i: policy.seen[i][1:] for i in (1, 2, 3)}
    assert seen[0.0] == {1: ([0], [1]), 2: ([0, 1], []), 3: ([0, 1], [])}
    assert seen[DELAY_S] == {1: ([0], [1]), 2: ([0], []), 3: ([0, 1], [])}


def test_the_view_replays_evictions_too() -> None:
    # an evict action at 0.5 s empties node 0's HBM at once (the prompt and its
    # output block); the view sees it 0.25 s later
    p = Prompts()
    p.add(0.0, names("p", 4))
    p.add(0.5, ["y"])
    p.add(0.6, ["z"])
    p.add(0.8, ["w"])
    prefix = p.blocks(names("p", 4))
    hits = {}

    class EvictAtHalf:
        def decide(self, sim: Simulator, request: Request) -> int:
            if request.index == 1:
                assert sim.evict(0, prefix) == 5  # and the output block below
            hits[request.index] = sim.hbm_hits(prefix)[0]
            return 0 if request.index == 0 else 1

    sim = Simulator(toy_cluster(2), p.workload(), SimConfig(router_view_delay_s=DELAY_S))
    sim.run(EvictAtHalf())
    assert hits == {0: 0, 1: 4, 2: 4, 3: 0}
    assert isinstance(sim._views, Views)
    assert sim.nodes[0].cache.hbm_match(prefix) == sim.nodes[0].view.hbm_match(prefix) == 0
