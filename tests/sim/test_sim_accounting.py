"""The accounting settings whose default follows the KV model (``SimConfig``):
each one switched alone, with TTFTs worked out by hand on the toy cluster
(simkit: 16-token blocks, prefill 1 ms a token, RAM load 0.1 ms a token, HBM
read ``HBM_S`` a token, a decode step 1 ms + ``DECODE_KV_S`` a KV token).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from simkit import DECODE_KV_S, HBM_S, Prompts, check_run, names, run_script, toy_cluster

from baselines.routers import cache_aware_choice
from envs.sim import SimConfig, Simulator
from envs.sim.config import KV_MODEL_DEFAULTS
from envs.sim.errors import ConfigError
from envs.sim.request import Request

CAUSAL = SimConfig()


def test_defaults_follow_the_kv_model_and_each_switches_alone() -> None:
    causal, reference = SimConfig(), SimConfig.reference()
    assert reference == SimConfig(causal_kv=False) and reference.causal_kv is False
    for name, value in KV_MODEL_DEFAULTS[True].items():
        assert getattr(causal, name) == value
    for name, value in KV_MODEL_DEFAULTS[False].items():
        assert getattr(reference, name) == value
    one = SimConfig.reference(decode_overshoot=False)
    assert one.decode_overshoot is False and one.lru_unit == reference.lru_unit
    assert SimConfig(lru_unit="block").causal_kv is True
    with pytest.raises(ConfigError, match=r"sim\.match_tiers must be one of hbm, hbm_ram"):
        SimConfig(match_tiers="ram")
    with pytest.raises(ConfigError, match=r"sim\.decode_overshoot must be true or false"):
        SimConfig(decode_overshoot="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("config", "reuse_s"),
    [(CAUSAL, 64 * HBM_S), (SimConfig(hbm_hit_load=False), 0.0), (SimConfig.reference(), 0.0)],
    ids=["causal", "hbm_hit_load=false", "reference"],
)
def test_hbm_hit_load(config: SimConfig, reuse_s: float) -> None:
    """A (prefix P, 4 blocks = 64 tokens) is served on node 0 by 0.1 s; B (P + one
    block, 80 tokens) arrives at 0.1 s on node 0 and hits P's 64 tokens in HBM.
    TTFT_B = reuse + 16 new tokens x 1 ms = 0.016 s + 64 x HBM_S when an HBM hit is
    charged its bytes / HBM bandwidth, 0.016 s exactly when it is free."""
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(0.1, [*names("P", 4), "b0"])
    sim, _ = run_script(toy_cluster(), p, [0, 0], config=config)
    assert sim.records.hit_hbm_tokens[1] == 64
    assert sim.records.ttft_s[1] == pytest.approx(0.016 + reuse_s, rel=1e-12, abs=0)


@pytest.mark.parametrize("step", [False, True], ids=["finish-at-prefill", "one-decode-step"])
def test_one_token_decode_step(step: bool) -> None:
    """A (64 tokens, 1 output token) prefills on node 0 from 0 to 0.064 s. B (16
    tokens, its own block) arrives at 0.0645 s on node 0.

    - Off: A finishes at 0.064; B finds node 0 idle: TTFT_B = 16 ms = 0.016 s.
    - On: A then runs one decode step (batch 1, 64 KV tokens): 1 ms + 64 x
      DECODE_KV_S, to 0.065 s + 64 x DECODE_KV_S, and counts as load meanwhile.
      B cannot cut a one-step segment, so it is admitted at A's finish:
      TTFT_B = 0.065 + 64 DECODE_KV_S - 0.0645 + 0.016 = 0.0165 s + 64 DECODE_KV_S.
    A's own TTFT is 0.064 s either way."""
    p = Prompts()
    p.add(0.0, names("A", 4))
    p.add(0.0645, ["b0"])
    loads: list[list[int]] = []
    config = SimConfig(one_token_decode_step=step)
    sim, _ = run_script(toy_cluster(), p, [0, 0], {1: [lambda s: loads.append(s.loads())]}, config)
    rec = sim.records
    assert rec.ttft_s[0] == pytest.approx(0.064, rel=1e-12)
    step_s = 0.001 + 64 * DECODE_KV_S
    if step:
        assert loads == [[1, 0]]
        assert rec.finish_s[0] == pytest.approx(0.064 + step_s, rel=1e-12)
        assert rec.ttft_s[1] == pytest.approx(0.0165 + 64 * DECODE_KV_S, rel=1e-12)
    else:
        assert loads == [[0, 0]]
        assert rec.finish_s[0] == pytest.approx(0.064, rel=1e-12)
        assert rec.ttft_s[1] == pytest.approx(0.016, rel=1e-12)


@pytest.mark.parametrize(
    ("capacity", "hit_blocks"), [("headroom", 8), ("budget", 16)], ids=["headroom", "budget"]
)
def test_cache_capacity(capacity: str, hit_blocks: int) -> None:
    """Node 0, KV budget 1,024 tokens (64 blocks). A (24 blocks, 1 output token) is
    served by 0.384 s and cached with its output block: 25 blocks. C (8 blocks, 640
    output tokens) is admitted at 0.5 s and reserves 768 tokens. B (A's 24 blocks +
    1 own, 400 tokens) arrives at 0.6 s and waits for C (768 + 401 > 1,024).

    - headroom: the cache may hold (1,024 - 768) / 16 = 16 blocks while C runs: at
      C's admission A's run is cut to 16 blocks, and when C's 8 prompt blocks are
      cached at its prefill's end, to 8. B hits 8 blocks = 128 tokens in HBM.
    - budget: the cache may hold 64 blocks: nothing is evicted until C finishes and
      its 48-block context joins A's 25 (73 > 64): A's run (the least recently
      used) loses 9 blocks, keeping 16. B hits 16 blocks = 256 tokens in HBM.

    The rest of A's 384 prompt tokens went to host RAM, and loading them (0.1 ms a
    token) beats prefilling them (1 ms): TTFT_B = (C's finish - 0.6 s) + hbm x
    HBM_S + (384 - hbm) x 0.1 ms + 16 x 1 ms."""
    p = Prompts()
    p.add(0.0, names("A", 24))
    p.add(0.5, names("C", 8), output_tokens=640)
    p.add(0.6, [*names("A", 24), "b0"])
    config = SimConfig(cache_capacity=capacity)
    sim, _ = run_script(toy_cluster(budget_tokens=1024), p, [0, 0, 0], config=config)
    rec = sim.records
    hit = hit_blocks * 16
    assert (rec.hit_hbm_tokens[2], rec.hit_ram_tokens[2]) == (hit, 384 - hit)
    assert rec.admit_s[2] == rec.finish_s[1]
    expected = rec.finish_s[1] - 0.6 + hit * HBM_S + (384 - hit) * 1e-4 + 0.016
    assert rec.ttft_s[2] == pytest.approx(expected, rel=1e-12)


class _ScriptThenCacheAware:
    """Routes the first requests by a table; later ones by cache_aware, after
    ``before`` acts on the simulator."""

    def __init__(self, routes: list[int], before: Callable[[Simulator], object]) -> None:
        self.routes = routes
        self.before = before

    def decide(self, sim: Simulator, request: Request) -> int:
        if request.index < len(self.routes):
            return self.routes[request.index]
        self.before(sim)
        return cache_aware_choice(sim, request)


@pytest.mark.parametrize(
    ("tiers", "node", "ttft_s"),
    [("hbm", 1, 0.064 + 16 * HBM_S), ("hbm_ram", 0, 64 * 1e-4 + 0.016)],
    ids=["hbm", "hbm_ram"],
)
def test_cache_aware_match_tiers(tiers: str, node: int, ttft_s: float) -> None:
    """A (prefix P, 4 blocks) is served on node 0, D (P's first block alone) on node
    1. Before B (P + one block, 80 tokens) arrives at 0.2 s, P is moved to host RAM
    on node 0. Both nodes are idle.

    - hbm: node 0 matches 0 blocks, node 1 matches 1: B goes to node 1, reuses 16
      tokens from HBM and prefills 64: TTFT_B = 16 x HBM_S + 0.064 s.
    - hbm_ram: node 0 matches 4 blocks (in RAM): B goes to node 0, loads 64 tokens
      from RAM (6.4 ms, cheaper than 64 ms of prefill) and prefills 16:
      TTFT_B = 0.0064 + 0.016 s."""
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(0.0, names("P", 1))
    p.add(0.2, [*names("P", 4), "b0"])
    prefix = p.blocks(names("P", 4))
    policy = _ScriptThenCacheAware([0, 1], lambda sim: sim.evict(0, prefix))
    sim = Simulator(toy_cluster(), p.workload(), SimConfig(match_tiers=tiers))
    records = sim.run(policy)
    check_run(sim)
    assert records.node[2] == node
    assert records.ttft_s[2] == pytest.approx(ttft_s, rel=1e-12)


@pytest.mark.parametrize(("unit", "hit_blocks", "ram_s"), [("run", 8, 0.0), ("block", 7, 0.0016)])
def test_lru_unit(unit: str, hit_blocks: int, ram_s: float) -> None:
    """Node 0 with room for 12 blocks (KV budget 192 tokens, the whole budget for the
    cache). A (P = 4 blocks, then 4 own blocks a0..a3; one output token) is cached
    at 0.128 s as one run of 9 blocks (with its output block). C (its own 2 blocks)
    is cached at 0.162 s: 3 blocks. B (P + b0) is admitted at 0.2 s and hits P only.

    - run: B's hit refreshes A's whole run (last use 0.2 s), so when B's 2 blocks
      are cached at 0.216 s (14 > 12) the two blocks evicted are C's.
    - block: B's hit refreshes P alone; a0..a3 and A's output block keep 0.128 s,
      older than C's 0.162 s, so a3 and A's output block go.

    D (P + a0..a3 + d0, 144 tokens) at 0.3 s then hits 8 blocks in HBM (run), or 7
    in HBM and a3 in RAM (block): TTFT_D = 128 HBM_S + 16 x 1 ms (run), or 112
    HBM_S + 16 x 0.1 ms + 16 x 1 ms (block)."""
    p = Prompts()
    p.add(0.0, [*names("P", 4), *names("a", 4)])
    p.add(0.13, names("C", 2))
    p.add(0.2, [*names("P", 4), "b0"])
    p.add(0.3, [*names("P", 4), *names("a", 4), "d0"])
    config = SimConfig(cache_capacity="budget", lru_unit=unit)
    sim, _ = run_script(toy_cluster(budget_tokens=192), p, [0, 0, 0, 0], config=config)
    rec = sim.records
    hit = hit_blocks * 16
    assert (rec.hit_hbm_tokens[3], rec.hit_ram_tokens[3]) == (hit, 128 - hit)
    assert rec.ttft_s[3] == pytest.approx(hit * HBM_S + ram_s + 0.016, rel=1e-12)


class _LeastLoadHighestIndex:
    """Least loaded node, ties to the highest index (deterministic)."""

    def decide(self, sim: Simulator, request: Request) -> int:
        if request.index < 2:
            return request.index
        loads = sim.loads()
        return max(range(len(loads)), key=lambda i: (-loads[i], i))


@pytest.mark.parametrize(
    ("overshoot", "node", "ttft_s"),
    [(False, 1, 0.048 - 0.0165 + 0.016), (True, 0, 0.0165 + 16 * DECODE_KV_S)],
    ids=["causal", "overshoot"],
)
def test_decode_overshoot(overshoot: bool, node: int, ttft_s: float) -> None:
    """A (16 tokens, 2 output tokens) on node 0: prefill to 0.016 s, then its one
    decode step (16 KV tokens) to 0.017 s + 16 DECODE_KV_S. C (48 tokens) on node 1:
    prefill to 0.048 s. B (16 tokens) arrives at 0.0165 s; the router takes the
    least loaded node, ties to the higher index.

    - No overshoot: loads are [1, 1] at 0.0165 s: B goes to node 1 and waits for C:
      TTFT_B = 0.048 - 0.0165 + 0.016 = 0.0475 s.
    - Overshoot: node 0's decode step in progress is its segment's last, so A
      finishes (at 0.017 s + 16 DECODE_KV_S) before the decision: loads [0, 1], B
      goes to node 0 and starts when the step ends:
      TTFT_B = 0.017 + 16 DECODE_KV_S - 0.0165 + 0.016 = 0.0165 s + 16 DECODE_KV_S."""
    p = Prompts()
    p.add(0.0, ["a0"], output_tokens=2)
    p.add(0.0, names("C", 3))
    p.add(0.0165, ["b0"])
    sim = Simulator(toy_cluster(), p.workload(), SimConfig(decode_overshoot=overshoot))
    records = sim.run(_LeastLoadHighestIndex())
    check_run(sim)
    assert records.finish_s[0] == pytest.approx(0.017 + 16 * DECODE_KV_S, rel=1e-12)
    assert records.node[2] == node
    assert records.ttft_s[2] == pytest.approx(ttft_s, rel=1e-12)


def test_a_copy_onto_a_node_in_an_overshot_decode_step_waits_for_the_step() -> None:
    """Under decode overshoot a node that ran its decode step past an arrival is busy
    until that step ends (``free_s``); a copy warmed onto it at the arrival starts
    then, not at once (it used to start inside the step: two things at one time)."""
    from envs.sim import ClusterSpec
    from envs.sim.node import COPY
    from envs.sim.request import Workload

    prefix = tuple(range(1, 129))
    a = Request(0, "a", 0.0, 129 * 256, 2, (*prefix, 2000))  # node 0 holds the prefix
    x = Request(1, "x", 0.0, 64 * 256, 2, tuple(range(1000, 1064)))  # node 1: one decode step
    cluster = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 2)
    config = SimConfig.reference()
    alone = Simulator(cluster, Workload("w", 256, [a, x]), config)
    first = alone.run(_Fixed()).first_token_s[1]
    c = Request(2, "c", first + 0.004, 129 * 256, 2, (*prefix, 3000))  # inside x's step
    sim = Simulator(cluster, Workload("w", 256, [a, x, c]), config)
    seen: list[tuple[float, float, int]] = []

    class WarmAtC(_Fixed):
        def decide(self, sim: Simulator, request: Request) -> int:
            if request.index == 2:
                node = sim.nodes[1]
                assert node.free_s > sim.now  # the overshot step is still running
                assert sim.warm(0, 1, prefix) == "ok"
                seen.append((node.free_s, node.work_start, node.work))
                return 0
            return super().decide(sim, request)

    sim.run(WarmAtC())
    free_s, start_s, work = seen[0]
    assert work == COPY and start_s == free_s


class _Fixed:
    """Request i to node i (c: node 0)."""

    def decide(self, sim: Simulator, request: Request) -> int:
        return min(request.index, 1) if request.index < 2 else 0
