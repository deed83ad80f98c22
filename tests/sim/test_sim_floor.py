"""The TTFT floor (envs.sim.floor): hand-worked on the toy cluster (1 ms a token of
prefill, 16-token blocks), and below every policy's TTFT on real windows."""

from __future__ import annotations

import numpy as np
import pytest
from simkit import (
    CORES,
    HBM_S,
    TOY_MODEL,
    Prompts,
    names,
    run_script,
    small_window,
    toy_cluster,
    toy_gpu,
)

from baselines import make_policy
from envs.sim import ClusterSpec, NodeSpec, SimConfig, Simulator, setup_cluster
from envs.sim.floor import floor_bounds, ttft_floor_s
from envs.sim.request import Request, Workload
from envs.workloads.registry import windows

A4 = names("a", 4)  # a0..a3: 64 tokens


def hand_prompts() -> Prompts:
    p = Prompts()
    p.add(0.000, A4)  # r0: nothing earlier: cold, 64 ms; a0..a3 exist at 0.064
    p.add(0.010, [*A4, "b4"])  # r1: wait 54 ms for a0..a3, then 16 ms (cold: 80 ms)
    p.add(0.020, ["a0", "a1", "c2"])  # r2: waiting 44 + 16 ms for a0,a1 loses to cold 48 ms
    p.add(1.000, [*A4, "b4"])  # r3: all of r1's prompt exists: 79 tokens reused, 1 ms
    p.add(1.000, [*A4, "b4", "d5"])  # r4: a0..b4 exist (b4 at r1's 0.080): 16 ms
    return p


def test_floor_by_hand_under_causal_kv() -> None:
    # a reused token costs its HBM load (SimConfig.hbm_hit_load, on under causal KV):
    # r1 reuses 64 tokens, r3 79, r4 80
    floor = ttft_floor_s(toy_cluster(), hand_prompts().workload(), SimConfig(causal_kv=True))
    assert floor == pytest.approx(
        [0.064, 0.054 + 64 * HBM_S + 0.016, 0.048, 79 * HBM_S + 0.001, 80 * HBM_S + 0.016],
        abs=1e-12,
    )


def test_floor_without_the_hbm_load_under_causal_kv() -> None:
    config = SimConfig(causal_kv=True, hbm_hit_load=False)
    floor = ttft_floor_s(toy_cluster(), hand_prompts().workload(), config)
    assert floor == pytest.approx([0.064, 0.054 + 0.016, 0.048, 0.001, 0.016], abs=1e-12)


def test_floor_by_hand_under_the_reference_model() -> None:
    # blocks count from admission, so from arrival: r1 and r2 reuse at once; and any
    # other holder counts, later ones too: r0 could wait in a queue for r1's a0..a3
    # (resident at r1's arrival, 0.010, then copied over) and prefill 1 token (1 ms);
    # an HBM hit costs no load time there (hbm_hit_load is off)
    floor = ttft_floor_s(toy_cluster(), hand_prompts().workload(), SimConfig(causal_kv=False))
    assert floor == pytest.approx([0.010 + 0.001, 0.016, 0.016, 0.001, 0.016], abs=1e-12)


class _CopyFromALaterArrival:
    """X and B queue on node 1; C, arriving after B, goes to node 0 and its prefix
    (resident from admission under the reference model) is copied to node 1 before
    B is admitted there."""

    def decide(self, sim: Simulator, request: Request) -> int | None:
        if request.index < 2:
            return 1
        sim.route(0)
        assert sim.warm(0, 1, PREFIX) == "ok"
        return None


PREFIX = tuple(range(1, 129))  # 128 blocks of 256 tokens: 32k tokens


def test_a_later_request_s_prefix_can_serve_an_earlier_one_under_the_reference_model() -> None:
    x = Request(0, "x", 0.0, 64 * 256, 2, tuple(range(1000, 1064)))  # 16k tokens, node 1
    b = Request(1, "b", 0.1, 129 * 256, 2, (*PREFIX, 2000))  # queued behind x
    c = Request(2, "c", 0.2, 129 * 256, 2, (*PREFIX, 3000))
    window = Workload("later", 256, [x, b, c])
    cluster = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 2)
    for config in (SimConfig.reference(), SimConfig()):
        ttft = Simulator(cluster, window, config).run(_CopyFromALaterArrival()).ttft_s
        assert np.all(ttft >= ttft_floor_s(cluster, window, config) - 1e-9), config


def later_shorter_prompts() -> Prompts:
    """B waits behind X on node 1 while A, arriving after B, computes the shared
    blocks p0..p3 on node 0, p3 only partly (52 tokens); Y's decision copies them
    to node 1 before X ends, and B reuses all four blocks whole."""
    p = Prompts()
    p.add(0.000, names("x", 4), input_tokens=60)  # X: node 1, prefill 60 ms
    p.add(0.001, [*P4, "b4"], output_tokens=2)  # B: 80 tokens, cold 80 ms
    p.add(0.002, P4, input_tokens=52, output_tokens=2)  # A: KV of p0..p3 at 0.054
    p.add(0.055, ["y0"])  # Y
    return p


P4 = names("p", 4)


def test_a_later_request_s_prefix_counts_under_causal_kv() -> None:
    # B: wait for A's KV (0.054 - 0.001 = 53 ms), then 80 - 64 = 16 tokens: 69 ms,
    # below its cold 80 ms although A arrived after it (and 64 tokens' HBM load)
    floor = ttft_floor_s(toy_cluster(), later_shorter_prompts().workload(), SimConfig())
    assert floor == pytest.approx([0.060, 0.053 + 64 * HBM_S + 0.016, 0.052, 0.016], abs=1e-12)


def test_a_later_shorter_request_can_serve_a_queued_earlier_one() -> None:
    """The run the floor must allow: B's TTFT is under its cold prefill (what a floor
    counting only earlier arrivals gave it) and above the floor."""
    p = later_shorter_prompts()
    cluster = toy_cluster(2, rdma_bw=1e12)  # copies take next to no time
    shared = p.requests[2].blocks
    sim, script = run_script(cluster, p, [1, 1, 0, 0], {3: [lambda s: s.warm(0, 1, shared)]})
    assert script.results[3] == ["ok"]
    ttft = sim.records.ttft_s
    assert ttft[1] < 0.080 - 1e-3  # B reused A's blocks: X ends at 0.060, then 16 ms
    floor, capacity_mean = floor_bounds(cluster, p.workload(), SimConfig())
    assert np.all(ttft >= floor - 1e-12)
    assert float(ttft.mean()) >= capacity_mean - 1e-12


def test_floor_uses_the_fastest_node() -> None:
    # a two-GPU toy node has twice the FLOP/s: half the prefill time
    gpu = toy_gpu()
    mixed = ClusterSpec(TOY_MODEL, (NodeSpec(gpu, 1), NodeSpec(gpu, 2)))
    p = Prompts()
    p.add(0.0, A4)
    assert ttft_floor_s(mixed, p.workload()) == pytest.approx([0.032])


def test_a_reuse_is_costed_on_one_node_kind_prefill_and_load_together() -> None:
    # kind A (two GPUs): half the prefill time, but 0.4 ms to load a token from HBM
    # (0.8 ms from RAM or disk); kind B: 1 ms a token of prefill, a load of next to
    # nothing. r1 reuses 64 tokens and prefills 16: on A 8 + 25.6 ms, on B 16 ms + 64
    # loads (cold on A: 40 ms); the fastest prefill's 8 ms with the cheapest load
    # would be no node's cost
    slow = 1024 / (2 * 0.8e-3)
    slow_hbm = toy_gpu(hbm_bw=1024 / (2 * 0.4e-3), pcie_bw=slow, nvme_bw=slow)
    cluster = ClusterSpec(TOY_MODEL, (NodeSpec(slow_hbm, 2), NodeSpec(toy_gpu(), 1)))
    p = Prompts()
    p.add(0.0, A4)
    p.add(1.0, [*A4, "b4"])
    floor = ttft_floor_s(cluster, p.workload())
    assert floor == pytest.approx([0.032, 0.016 + 64 * HBM_S], rel=1e-12)


def test_a_reused_token_costs_at_least_the_cheapest_tier_s_load() -> None:
    # a node whose host link (0.1 ms a token) beats its HBM (0.4 ms a token): a reused
    # token is charged no more than the RAM load, the floor counts that
    gpu = toy_gpu(hbm_bw=1024 / 0.4e-3)
    cluster = ClusterSpec(TOY_MODEL, (NodeSpec(gpu, 1),))
    p = Prompts()
    p.add(0.0, A4)
    p.add(1.0, [*A4, "b4"])
    floor = ttft_floor_s(cluster, p.workload())
    assert floor == pytest.approx([0.064, 0.016 + 64 * 1e-4], rel=1e-12)


def test_a_load_dearer_than_prefill_leaves_the_cold_prefill_as_the_floor() -> None:
    # 2 ms to load a token from any tier, 1 ms to prefill it: reusing 64 tokens and
    # prefilling 16 would take 144 ms, the cold prefill 80 ms; the simulator loads the
    # HBM hit anyway (144 ms), above the floor
    dear = 1024 / 2e-3
    cluster = ClusterSpec(
        TOY_MODEL, (NodeSpec(toy_gpu(hbm_bw=dear, pcie_bw=dear, nvme_bw=dear), 1),)
    )
    p = Prompts()
    p.add(0.0, A4)
    p.add(1.0, [*A4, "b4"])
    floor = ttft_floor_s(cluster, p.workload())
    assert floor == pytest.approx([0.064, 0.080], rel=1e-12)
    ttft = make_policy("round_robin").run(Simulator(cluster, p.workload())).ttft_s
    assert ttft[1] == pytest.approx(0.144, rel=1e-12)


def test_floor_is_what_one_request_alone_gets() -> None:
    # alone on an idle node, a request's TTFT is its cold prefill: the floor is tight
    p = Prompts()
    p.add(0.0, A4)
    sim = Simulator(toy_cluster(), p.workload())
    records = make_policy("round_robin").run(sim)
    assert records.ttft_s[0] == pytest.approx(ttft_floor_s(toy_cluster(), p.workload())[0])


def test_floor_is_what_a_request_reusing_a_prefix_alone_gets() -> None:
    # the second request finds the first's 64 tokens in HBM on an idle node: it pays
    # their HBM load and 16 tokens of prefill, exactly its floor
    p = Prompts()
    p.add(0.0, A4)
    p.add(1.0, [*A4, "b4"])
    cluster = toy_cluster(1)
    records = make_policy("round_robin").run(Simulator(cluster, p.workload()))
    floor = ttft_floor_s(cluster, p.workload())
    assert records.ttft_s[1] == pytest.approx(64 * HBM_S + 0.016, rel=1e-12)
    assert floor[1] == pytest.approx(records.ttft_s[1], rel=1e-12)


@pytest.mark.parametrize("core", CORES)
def test_floor_with_attention_flops_by_hand(core: str) -> None:
    # attention FLOPs add 2e-9 s per (new token, token it attends to) pair on the toy
    # node (4 x 1 layer x 1000 / 2e12 FLOP/s): a cold 64-token prompt has 64 x 65 / 2
    # = 2,080 pairs; r1 reuses r0's 64 tokens and prefills 16 (16 x 64 + 16 x 17 / 2
    # = 1,160 pairs); r2 reuses 32 of them and prefills 16 (16 x 32 + 136 = 648 pairs).
    # Alone on an idle node each one's TTFT is exactly that, on both cores
    p = Prompts()
    p.add(0.0, A4)
    p.add(1.0, [*A4, "b4"])
    p.add(2.0, ["a0", "a1", "c2"])
    config = SimConfig(attention_flops=True)
    cluster = toy_cluster(1)
    floor = ttft_floor_s(cluster, p.workload(), config)
    expected = [
        0.064 + 2080 * 2e-9,
        0.016 + 1160 * 2e-9 + 64 * HBM_S,
        0.016 + 648 * 2e-9 + 32 * HBM_S,
    ]
    assert floor == pytest.approx(expected, rel=1e-12)
    sim = Simulator(cluster, p.workload(), config, core=core)
    assert make_policy("round_robin").run(sim).ttft_s == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("core", CORES)
def test_chunked_prefill_pays_its_decode_steps_above_the_floor(core: str) -> None:
    # r0 (64 tokens) decodes from 0.064; r1 (64 tokens of its own) arrives at 0.070
    # and is admitted at the end of the decode step in progress (six steps of 1 ms
    # plus 399 KV reads of 1.024 ns), then prefills in four 16-token chunks with a
    # decode step of r0 between each (three steps at 70 tokens of context). The floor
    # is its cold prefill alone, 64 ms; so is the capacity bound's mean (nothing
    # overlaps)
    p = Prompts()
    p.add(0.0, names("x", 4), output_tokens=50)
    p.add(0.070, names("y", 4))
    config = SimConfig(chunked_prefill_tokens=16)
    cluster = toy_cluster(1)
    floor, bound = floor_bounds(cluster, p.workload(), config)
    assert floor == pytest.approx([0.064, 0.064], rel=1e-12)
    assert bound == pytest.approx(0.064, rel=1e-12)
    admitted = 0.064 + 0.006 + 399 * 1.024e-9
    between = 0.003 + (3 * 70 + 3) * 1.024e-9
    sim = Simulator(cluster, p.workload(), config, core=core)
    ttft = make_policy("round_robin").run(sim).ttft_s
    assert ttft == pytest.approx([0.064, admitted - 0.070 + 0.064 + between], rel=1e-9)


CONFIGS = {
    "causal": SimConfig(),
    "reference": SimConfig(causal_kv=False),
    "reference_hbm_load": SimConfig(causal_kv=False, hbm_hit_load=True),
    "contention": SimConfig(copy_model="contention", transfer_latency_s=1e-5),
    "realistic": SimConfig(
        copy_model="contention",
        transfer_latency_s=1e-5,
        attention_flops=True,
        host_ram_bytes=1e12,
        disk_tier=True,
        chunked_prefill_tokens=2048,
    ),
}


@pytest.mark.parametrize("config", list(CONFIGS), ids=list(CONFIGS))
def test_no_policy_beats_the_floor_on_a_small_window(config: str) -> None:
    cluster = setup_cluster("70b_h100x4")
    window = small_window()
    floor = ttft_floor_s(cluster, window, CONFIGS[config])
    assert np.all(floor > 0)
    for name in ("round_robin", "cache_aware", "btb", "oracle_warm", "dynamo"):
        sim = Simulator(cluster, window, CONFIGS[config], np.random.default_rng(0))
        ttft = make_policy(name).run(sim).ttft_s
        assert np.all(ttft >= floor - 1e-9), (name, float(np.min(ttft - floor)))


def test_no_policy_beats_the_floor_on_a_published_window() -> None:
    # one Bursted-ART synthetic test window (4,120 requests, 500-request bursts)
    cluster = setup_cluster("70b_h100x4")
    window = next(windows("bursted_synthetic", split="test"))
    floor = ttft_floor_s(cluster, window)
    for name in ("cache_aware", "btb", "oracle_warm"):
        sim = Simulator(cluster, window, SimConfig(), np.random.default_rng(0))
        ttft = make_policy(name).run(sim).ttft_s
        assert np.all(ttft >= floor - 1e-9), name
    # the first request of the window has no earlier prefix: its whole prompt cold
    costs = Simulator(cluster, window).nodes[0].costs
    first = window.requests[0]
    assert floor[0] == pytest.approx(costs.prefill_s(first.input_tokens))


def test_two_node_kinds_of_one_name_both_count() -> None:
    """The floor takes the fastest node kind: two kinds that share a name (here
    both "1xtoy") are two kinds, not the last one listed."""
    from envs.sim.timing import NodeCosts

    fast = NodeSpec(toy_gpu(512, flops=8e12, hbm_bw=8e12), 1)
    slow = NodeSpec(toy_gpu(512, flops=1e12, hbm_bw=1e11), 1)
    assert fast.name == slow.name
    prompts = Prompts()
    prompts.add(0.0, [f"a{i}" for i in range(8)], input_tokens=120, output_tokens=2)
    window = prompts.workload()
    floor = ttft_floor_s(ClusterSpec(TOY_MODEL, (fast, slow)), window, SimConfig())
    assert floor[0] == pytest.approx(NodeCosts(fast, TOY_MODEL).prefill_s(120), rel=1e-12)
