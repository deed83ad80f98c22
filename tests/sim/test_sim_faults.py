"""Faults (``SimConfig.fault_*``): node losses and failed copies, worked out by hand
on the toy cluster (a 4-block, 64-token prompt prefills in 64 ms; a 4-block copy
takes 32 ms), then random faults under every policy keeping every invariant."""

from __future__ import annotations

import dataclasses
import math
import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from simkit import (
    CORES,
    HBM_S,
    TOY_MODEL,
    Prompts,
    Script,
    check_nodes,
    check_run,
    decode_s,
    names,
    records_equal,
    toy_cluster,
    toy_gpu,
)

from baselines.policy import POLICIES, Policy, make_policy
from envs.sim import ClusterSpec, ConfigError, NodeSpec, SimConfig, Simulator
from envs.sim.events import FAULT_EVENT
from envs.sim.faults import FAULT_STREAM_KEY
from envs.sim.request import Request
from envs.sim.transfers import FAILED


def _losing_node_0(**overrides: object) -> SimConfig:
    return SimConfig(fault_node_loss_s=(0.1,), fault_node_loss_nodes=(0,), **overrides)  # type: ignore[arg-type]


def test_a_lost_nodes_requests_go_to_the_least_loaded_node_in_arrival_order() -> None:
    # node 0 prefills r0 0 .. 0.064, r1 0.064 .. 0.128, and has r2 queued. Lost at
    # 0.1: r1 (in prefill) and r2 (queued) go to node 1, r1 prefilled 0.1 .. 0.164,
    # r2 0.164 .. 0.228. r3 at 0.3 is routed to node 0, still down: it goes to
    # node 1. Node 0 is back, empty, at 0.6: r4 at 0.7 (r0's prompt) misses there.
    p = Prompts()
    p.add(0.0, names("a", 4))
    p.add(0.001, names("b", 4))
    p.add(0.002, names("c", 4))
    p.add(0.3, names("d", 4))
    p.add(0.7, names("a", 4))
    sim = Simulator(toy_cluster(2), p.workload(), _losing_node_0(fault_node_down_s=0.5))
    sim.run(Script([0, 0, 0, 0, 0]))
    check_run(sim)
    rec = sim.records
    assert list(rec.node) == [0, 1, 1, 1, 0]
    assert rec.first_token_s == pytest.approx([0.064, 0.164, 0.228, 0.364, 0.764])
    assert rec.ttft_s == pytest.approx([0.064, 0.163, 0.226, 0.064, 0.064])
    assert rec.hit_hbm_tokens[4] == 0
    s = rec.summary
    assert (s["fault_node_losses"], s["fault_node_recoveries"]) == (1, 1)
    assert (s["fault_rerouted_requests"], s["fault_routed_to_down"]) == (2, 1)
    assert s["fault_restarted_requests"] == s["fault_copies_failed"] == 0
    # node 0 worked 0 .. 0.1 (r1's prefill was cut) and 0.7 .. 0.764
    assert sim.nodes[0].prefill_s == pytest.approx(0.164)
    assert sim.nodes[0].busy_s == pytest.approx(0.164)


def test_a_decoding_request_restarts_and_keeps_its_first_token() -> None:
    # r0: first token at 0.064, then 10 decode steps; node 0 is lost at 0.068.
    # Node 1 reruns it: prefill 0.068 .. 0.132, then the 10 steps.
    p = Prompts()
    p.add(0.0, names("a", 4), output_tokens=11)
    config = SimConfig(fault_node_loss_s=(0.068,), fault_node_loss_nodes=(0,))
    sim = Simulator(toy_cluster(2), p.workload(), config)
    sim.run(Script([0]))
    check_run(sim)
    rec = sim.records
    assert rec.ttft_s[0] == pytest.approx(0.064)
    assert rec.admit_s[0] == 0.0  # the record of the service that delivered the first token
    assert rec.finish_s[0] == pytest.approx(0.132 + decode_s(10, 1, 64))
    assert rec.node[0] == 0  # ... its node too (the rerun's is in the totals)
    assert sim.totals().reruns == {0: (pytest.approx(0.068), 1)}
    assert len(sim.first_token_log) == 1
    assert rec.summary["fault_restarted_requests"] == 1


@pytest.mark.parametrize("core", CORES)
def test_a_request_restarted_twice_counts_twice(core: str) -> None:
    """``fault_restarted_requests`` counts restarts, not requests (docs/faults.md),
    while the totals keep the last rerun only. r0's first token is out at 0.064 on
    node 0, then 100 decode steps; node 0 is lost at 0.068 (rerun on node 1,
    prefill 0.068 .. 0.132, decoding) and node 1 at 0.2 (rerun on node 2, the one
    left: prefill 0.2 .. 0.264, then the 100 steps)."""
    p = Prompts()
    p.add(0.0, names("a", 4), output_tokens=101)
    config = SimConfig(fault_node_loss_s=(0.068, 0.2), fault_node_loss_nodes=(0, 1))
    sim = Simulator(toy_cluster(3), p.workload(), config, core=core)
    sim.run(Script([0]))
    check_run(sim)
    rec = sim.records
    assert rec.ttft_s[0] == pytest.approx(0.064)
    assert rec.finish_s[0] == pytest.approx(0.264 + decode_s(100, 1, 64))
    assert sim.totals().reruns == {0: (pytest.approx(0.2), 2)}  # one request, last rerun
    s = rec.summary
    assert s["fault_node_losses"] == 2
    assert s["fault_restarted_requests"] == s["fault_rerouted_requests"] == 2


@pytest.mark.parametrize("core", CORES)
def test_a_restarted_requests_record_describes_the_service_that_delivered_its_first_token(
    core: str,
) -> None:
    """Every field of a restarted request's record, by hand, on two nodes of two
    speeds. Until 2026-12-06 ``node`` was the rerun's while admission, hits, reuse
    and prefill were the first service's: the record named node 1 with node 0's
    64-token hit, and its prefill (16 tokens, 0.016 s) read as 0.032 s on node 1,
    twice the TTFT it was said to explain."""
    # r0 (0 s) computes a0..a3 on node 0 (1 ms a token) until 0.064. r1 (0.1 s, 80
    # tokens) hits those 64 in HBM on node 0 (reuse 64 x HBM_S), prefills its 16:
    # first token at 0.116 + reuse, then 10 decode steps. Node 0 is lost at 0.12;
    # node 1 (2 ms a token, nothing cached) reruns r1 from 0.12: 80 tokens, 0.160 s,
    # then the 10 steps.
    p = Prompts()
    p.add(0.0, names("a", 4))
    p.add(0.1, [*names("a", 4), "b0"], output_tokens=11)
    # (node 1 holds 100 tokens of KV, node 0 1,024: the node the capacity metrics hold
    # the rerun's KV on is told by the peak)
    cluster = ClusterSpec(
        TOY_MODEL, (NodeSpec(toy_gpu(), 1), NodeSpec(toy_gpu(100, flops=2e12), 1))
    )
    config = SimConfig(fault_node_loss_s=(0.12,), fault_node_loss_nodes=(0,))
    sim = Simulator(cluster, p.workload(), config, core=core)
    sim.run(Script([0, 0]))
    check_run(sim)  # (TTFT = admission - arrival + reuse + prefill on the record's node)
    rec = sim.records
    reuse = 64 * HBM_S
    finish = 0.12 + 80 * 2e-3 + decode_s(10, 1, 80)
    record = {name: float(getattr(rec, name)[1]) for name in rec.as_dict()}
    assert record == pytest.approx(
        {
            "node": 0,
            "admit_s": 0.1,
            "first_token_s": 0.116 + reuse,
            "finish_s": finish,  # the request's end: its rerun's, on node 1
            "hit_hbm_tokens": 64,
            "hit_ram_tokens": 0,
            "hit_disk_tokens": 0,
            "reuse_s": reuse,
            "prefill_tokens": 16,
            "arrival_s": 0.1,
            "ttft_s": 0.016 + reuse,
            "queue_s": 0.0,
            "e2e_s": finish - 0.1,
        },
        rel=1e-12,
        abs=1e-15,
    )
    assert sim.totals().reruns == {1: (0.12, 1)}
    s = rec.summary
    assert s["fault_restarted_requests"] == 1
    # the rerun holds its 80 + 11 tokens of KV on node 1 from 0.12 (its first
    # service's time is not counted): 91 of node 1's 100 (on node 0 it would be 91 of
    # 1,024, and r0's 64 + 1 there are less)
    assert s["kv_occupancy_peak"] == pytest.approx(91 / 100)
    assert s["prefill_busy_per_node"][1] * s["busy_span_s"] == pytest.approx(0.160)


def test_a_copy_from_a_lost_node_fails_and_copies_to_a_down_node_are_refused() -> None:
    # r0 (0 s) computes the prefix on node 0 until 0.064; a copy to node 1 waits for
    # it. Node 0 is lost at 0.03: the copy fails, r0 is prefilled on node 1 0.03 .. 0.094.
    p = Prompts()
    p.add(0.0, [*names("a", 4), "own"])
    p.add(0.05, ["x"])
    prefix = p.blocks(names("a", 4))
    results = {}

    class Policy0:
        def decide(self, sim: Simulator, request: Request) -> int | None:
            if request.index == 0:
                sim.route(0)
                results[0] = sim.warm(0, 1, prefix)
                assert sim.nodes[1].inflight
                return None
            results[1] = sim.warm(1, 0, prefix)
            return 1

    config = SimConfig(fault_node_loss_s=(0.03,), fault_node_loss_nodes=(0,))
    sim = Simulator(toy_cluster(2), p.workload(), config)
    sim.run(Policy0())
    check_run(sim)
    assert results == {0: "ok", 1: "node_down"}
    copy = sim.copies[0]
    assert copy.state == FAILED and copy.land_s == -1.0
    assert not sim.nodes[1].inflight
    assert sim.records.first_token_s[0] == pytest.approx(0.03 + 0.080)
    s = sim.records.summary
    assert (s["fault_copies_failed"], s["warm_copies_landed"]) == (1, 0)
    assert s["warm_refused"]["node_down"] == 1


@pytest.mark.parametrize(("fail_prob", "hit"), [(0.0, 64), (1.0, 0)])
def test_a_failed_copy_lands_nothing(fail_prob: float, hit: int) -> None:
    # r0 caches the prefix on node 0 at 0.064; at 0.1 it is copied to node 1
    # (0.1 .. 0.132); r2 at 0.2 on node 1 hits it only if the copy did not fail
    p = Prompts()
    p.add(0.0, names("a", 4))
    p.add(0.1, ["x"])
    p.add(0.2, [*names("a", 4), "own"])
    prefix = p.blocks(names("a", 4))
    script = Script([0, 0, 1], {1: [lambda sim: sim.warm(0, 1, prefix)]})
    sim = Simulator(toy_cluster(2), p.workload(), SimConfig(fault_copy_fail_prob=fail_prob))
    sim.run(script)
    check_run(sim)
    assert script.results[1] == ["ok"]
    assert sim.records.hit_hbm_tokens[2] == hit
    assert sim.records.summary.get("fault_copies_failed", 0) == (1 if fail_prob else 0)
    assert (sim.copies[0].state == FAILED) == bool(fail_prob)


def test_the_last_node_up_is_never_lost() -> None:
    p = Prompts()
    p.add(0.0, names("a", 4))
    p.add(0.2, names("b", 4))
    sim = Simulator(toy_cluster(1), p.workload(), _losing_node_0())
    sim.run(Script([0, 0]))
    check_run(sim)
    s = sim.records.summary
    assert (s["fault_node_losses"], s["fault_node_losses_skipped"]) == (0, 1)


def test_defaults_add_no_fault_metrics_and_no_refusal_reason() -> None:
    p = Prompts()
    p.add(0.0, names("a", 4))
    sim = Simulator(toy_cluster(2), p.workload())
    sim.run(Script([0]))
    assert sim._faults is None
    assert not any(key.startswith("fault_") for key in sim.records.summary)
    assert "node_down" not in sim.records.summary["warm_refused"]


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"fault_node_loss_s": (1.0, 2.0), "fault_node_loss_nodes": (0,)}, "fault_node_loss_s"),
        ({"fault_node_loss_s": (-1.0,), "fault_node_loss_nodes": (0,)}, "fault_node_loss_s"),
        ({"fault_copy_fail_prob": 1.5}, "fault_copy_fail_prob"),
        ({"fault_node_down_s": 0.0}, "fault_node_down_s"),
        ({"fault_copy_slowdown": 0.5}, "fault_copy_slowdown"),
        ({"router_view_delay_s": -0.1}, "router_view_delay_s"),
        ({"fault_node_loss_rate_per_s": math.inf}, "fault_node_loss_rate_per_s"),
    ],
)
def test_bad_fault_options_name_the_field(fields: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=f"sim.{named}"):
        SimConfig(**fields)  # type: ignore[arg-type]


def test_a_scheduled_loss_of_a_node_the_cluster_lacks_is_an_error() -> None:
    p = Prompts()
    p.add(0.0, ["a"])
    config = SimConfig(fault_node_loss_s=(0.1,), fault_node_loss_nodes=(2,))
    with pytest.raises(ConfigError, match=r"sim.fault_node_loss_nodes\[0\] = 2"):
        Simulator(toy_cluster(2), p.workload(), config)


# ------------------------------------------------------------ the faults' own stream
def _random_loss_times(sim: Simulator) -> list[float]:
    """The times of the random losses drawn when ``sim`` was built (node -1: drawn later)."""
    return sorted(t for t, _, kind, node, _ in sim._heap if kind == FAULT_EVENT and node == -1)


def test_random_losses_follow_the_simulators_seed_and_fault_seed() -> None:
    # Losses at 20 per second until the last arrival (0.5 s): about ten a run. The
    # stream is the child (FAULT_STREAM_KEY, fault_seed) of the seed that made sim.rng,
    # so evaluation's default_rng([seed, window position]) gives each window its own.
    p = Prompts()
    p.add(0.0, names("a", 4))
    p.add(0.5, names("b", 4))
    workload = p.workload()

    def built(rng_seed: list[int], fault_seed: int = 0, drawn: int = 0) -> Simulator:
        rng = np.random.default_rng(rng_seed)
        rng.random(drawn)  # draws made before: the faults follow the seed, not the state
        config = SimConfig(fault_node_loss_rate_per_s=20.0, fault_seed=fault_seed)
        return Simulator(toy_cluster(3), workload, config, rng)

    def by_hand(rng_seed: list[int], fault_seed: int) -> list[float]:
        seq = np.random.SeedSequence(rng_seed, spawn_key=(FAULT_STREAM_KEY, fault_seed))
        stream, times, t = np.random.default_rng(seq), [], 0.0
        while (t := t + float(stream.exponential(1 / 20.0))) <= 0.5:
            times.append(t)
        return times

    window_0 = _random_loss_times(built([0, 0]))
    assert len(window_0) >= 3
    assert window_0 == by_hand([0, 0], 0) == _random_loss_times(built([0, 0], drawn=5))
    window_1 = _random_loss_times(built([0, 1]))
    assert window_1 == by_hand([0, 1], 0) and window_1 != window_0
    other_fault_seed = _random_loss_times(built([0, 0], fault_seed=1))
    assert other_fault_seed == by_hand([0, 0], 1) and other_fault_seed != window_0
    # the policies' stream is the one a run without faults has
    assert built([0, 0]).rng.random() == np.random.default_rng([0, 0]).random()


def _failed_copies(rng_seed: list[int], fault_seed: int = 0) -> list[bool]:
    """Which of 12 warm copies fail at fault_copy_fail_prob = 0.5: prefix k is
    computed on node 0 (0.1 k .. 0.1 k + 0.064) and copied to node 1 at 1.5 + 0.1 k
    (32 ms, alone on its link); the script is the same whatever the seeds."""
    p = Prompts()
    for k in range(12):
        p.add(0.1 * k, names(f"p{k}-", 4))
    prefixes = [p.blocks(names(f"p{k}-", 4)) for k in range(12)]
    for k in range(12):
        p.add(1.5 + 0.1 * k, [f"x{k}"])
    warms = {12 + k: [lambda sim, k=k: sim.warm(0, 1, prefixes[k])] for k in range(12)}
    script = Script([0] * 24, warms)
    config = SimConfig(fault_copy_fail_prob=0.5, fault_seed=fault_seed)
    sim = Simulator(toy_cluster(2), p.workload(), config, np.random.default_rng(rng_seed))
    sim.run(script)
    check_run(sim)
    assert all(results == ["ok"] for results in script.results.values() if results)
    return [copy.state == FAILED for copy in sim.copies]


def test_failed_copies_differ_between_windows_and_repeat_under_the_same_seeds() -> None:
    # Seeded with fault_seed alone (before 2026-12-05) the twelve draws were the same
    # for every simulator seed: every window of a comparison failed the same copies.
    window_0 = _failed_copies([0, 0])
    assert len(window_0) == 12 and 0 < sum(window_0) < 12
    assert _failed_copies([0, 0]) == window_0
    assert _failed_copies([0, 1]) != window_0
    assert _failed_copies([0, 0], fault_seed=1) != window_0


def test_faults_need_a_generator_made_from_a_seed() -> None:
    p = Prompts()
    p.add(0.0, names("a", 4))
    rng = np.random.Generator(np.random.MT19937())
    rng.bit_generator._legacy_seeding(5)  # RandomState's seeding: no seed sequence
    Simulator(toy_cluster(2), p.workload(), None, rng)  # no faults: no stream to derive
    with pytest.raises(TypeError, match=r"with faults on, rng must be a Generator made from"):
        Simulator(toy_cluster(2), p.workload(), SimConfig(fault_copy_fail_prob=0.1), rng)


# ------------------------------------------------------------ random faults, every policy
class Checked(Policy):
    """Wraps a policy and checks the nodes' invariants at every decision point."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner

    def reset(self, sim: Simulator) -> None:
        self.inner.reset(sim)

    def decide(self, sim: Simulator, request: Request) -> int | None:
        check_nodes(sim)
        for node in sim.nodes:
            if node.down:
                assert node.load == 0 and node.cache.hbm_blocks == 0 and not node.inflight
        return self.inner.decide(sim, request)


fault_config_st = st.builds(
    SimConfig,
    causal_kv=st.booleans(),
    copy_model=st.sampled_from(["reference", "contention"]),
    transfer_latency_s=st.sampled_from([0.0, 1e-3]),
    fault_node_loss_rate_per_s=st.sampled_from([0.0, 5.0, 40.0]),
    fault_node_loss_s=st.just((0.05,)),
    fault_node_loss_nodes=st.just((0,)),
    fault_node_down_s=st.sampled_from([0.02, 0.2, math.inf]),
    fault_copy_fail_prob=st.sampled_from([0.0, 0.5]),
    fault_copy_slow_prob=st.sampled_from([0.0, 0.5]),
    fault_copy_slowdown=st.sampled_from([1.0, 3.0]),
    fault_nic_down_for_s=st.sampled_from([0.01, 0.1]),
    router_view_delay_s=st.sampled_from([0.0, 0.03]),
    fault_seed=st.integers(0, 3),
)
nic_st = st.sampled_from([((), ()), ((0.02, 0.1), (1, 2))])  # (times, nodes) of NIC outages
fault_config_st = st.tuples(fault_config_st, nic_st).map(
    lambda pair: dataclasses.replace(
        pair[0], fault_nic_down_s=pair[1][0], fault_nic_down_nodes=pair[1][1]
    )
)
rows_st = st.lists(
    st.tuples(
        st.floats(0.0, 0.3, allow_nan=False),  # arrival
        st.integers(0, 2),  # shared stem (2: none)
        st.integers(1, 5),  # blocks
        st.sampled_from([1, 4, 12]),  # output tokens
    ),
    min_size=1,
    max_size=16,
)


# BTB_FUZZ_CASES sets the number of cases, as for tests/sim/test_sim_fuzz.py
@settings(
    max_examples=int(os.environ.get("BTB_FUZZ_CASES", "30")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(
    rows=rows_st,
    config=fault_config_st,
    policy_name=st.sampled_from(sorted(POLICIES)),
    seed=st.integers(0, 2**16),
)
def test_random_faults_serve_every_request_exactly_once(
    rows: list[tuple[float, int, int, int]], config: SimConfig, policy_name: str, seed: int
) -> None:
    p = Prompts()
    for j, (arrival, stem, n_blocks, output) in enumerate(rows):
        raw = [f"s{stem}-{i}" if stem < 2 else f"own{j}-{i}" for i in range(n_blocks)]
        p.add(arrival, raw, output_tokens=output)
    workload = p.workload()
    runs = []
    for _ in range(2):  # the same seeds: the same run
        sim = Simulator(
            toy_cluster(3, budget_tokens=256), workload, config, np.random.default_rng(seed)
        )
        Checked(make_policy(policy_name)).run(sim)
        check_run(sim)  # every request finished once, TTFT floors, KV within budget
        log = [r.index for r in sim.first_token_log]
        assert sorted(log) == list(range(len(workload.requests)))  # one first token each
        for copy in sim.copies:
            assert copy.state == FAILED or copy.land_s >= copy.start_s
        runs.append(sim)
    records_equal(runs[0].records, runs[1].records)
    assert runs[0].records.summary == runs[1].records.summary


def test_a_nic_down_fails_the_copy_in_flight_and_refuses_new_ones_until_it_is_back() -> None:
    # r0 caches the prefix on node 0 at 0.064. A copy to node 1 starts at 0.09
    # (32 ms); node 0's NIC is down 0.1 .. 0.3: the copy fails at 0.1, a warm at
    # 0.2 is refused, one at 0.35 lands at 0.382. Node 0 serves r2 meanwhile.
    p = Prompts()
    p.add(0.0, names("a", 4))
    p.add(0.09, ["x"])
    p.add(0.2, ["y"])
    p.add(0.35, ["z"])
    prefix = p.blocks(names("a", 4))
    warm = [lambda sim: sim.warm(0, 1, prefix)]
    script = Script([0, 0, 0, 0], {1: warm, 2: warm, 3: warm})
    config = SimConfig(fault_nic_down_s=(0.1,), fault_nic_down_nodes=(0,), fault_nic_down_for_s=0.2)
    sim = Simulator(toy_cluster(2), p.workload(), config)
    sim.run(script)
    check_run(sim)
    assert [script.results[i] for i in (1, 2, 3)] == [["ok"], ["nic_down"], ["ok"]]
    first, second = sim.copies
    assert first.state == FAILED and second.land_s == pytest.approx(0.382)
    assert sim.nodes[1].copy_s == pytest.approx(0.010 + 0.032)  # the failed one cut at 0.1
    assert sim.records.first_token_s[2] == pytest.approx(0.2 + 0.016)
    s = sim.records.summary
    assert (s["fault_nic_downs"], s["fault_copies_failed"]) == (1, 1)
    assert s["warm_refused"]["nic_down"] == 1


@pytest.mark.parametrize("copy_model", ["reference", "contention"])
def test_a_slow_copy_takes_slowdown_times_as_long(copy_model: str) -> None:
    # the prefix cached on node 0 at 0.064 is copied to node 1 at 0.1: 32 ms at full
    # speed, 4 x 32 = 128 ms slow, landing at 0.228 (alone on its link either way)
    p = Prompts()
    p.add(0.0, names("a", 4))
    p.add(0.1, ["x"])
    prefix = p.blocks(names("a", 4))
    script = Script([0, 0], {1: [lambda sim: sim.warm(0, 1, prefix)]})
    config = SimConfig(copy_model=copy_model, fault_copy_slow_prob=1.0, fault_copy_slowdown=4.0)
    sim = Simulator(toy_cluster(2), p.workload(), config)
    sim.run(script)
    check_run(sim)
    assert sim.copies[0].land_s == pytest.approx(0.228)
    assert sim.records.summary["fault_copies_slow"] == 1


@pytest.mark.parametrize("core", CORES)
def test_a_loss_rate_that_would_draw_too_many_losses_is_refused(core: str) -> None:
    """1e9 losses a second drew for minutes and ran out of memory (an outside audit);
    the bound is the rate times the span of the arrivals."""
    from envs.sim.faults import MAX_RANDOM_LOSSES

    workload = Prompts()
    workload.add(0.0, names("P", 1))
    workload.add(10.0, names("Q", 1))
    w = workload.workload()
    limit = MAX_RANDOM_LOSSES / 10.0
    with pytest.raises(ConfigError, match=r"would draw about 100,010 node losses over the 10\.0 s"):
        Simulator(toy_cluster(3), w, SimConfig(fault_node_loss_rate_per_s=limit + 1), core=core)
    sim = Simulator(toy_cluster(3), w, SimConfig(fault_node_loss_rate_per_s=1.0), core=core)
    sim.run(make_policy("least_load"))  # a rate within the bound runs


def test_a_disk_tier_needs_a_bounded_host_ram() -> None:
    with pytest.raises(ConfigError, match=r"^sim\.disk_tier needs a finite host_ram_bytes"):
        SimConfig(disk_tier=True)
    SimConfig(disk_tier=True, host_ram_bytes=1e12)


@pytest.mark.parametrize("core", CORES)
def test_faults_and_upgrades_after_the_workload_is_served_change_nothing(core: str) -> None:
    """A loss, a NIC going down or an upgrade timed after every request has finished
    happens after the run (an outside audit: a loss at 100,000 s counted one loss and
    stretched the busy span to 99,985 s): nothing is counted, the run is the plain one;
    one timed before the last request finishes still counts."""
    workload = Prompts()
    workload.add(0.0, names("P", 2))
    workload.add(0.01, names("Q", 2))
    w = workload.workload()

    def run(**options: object) -> dict:
        sim = Simulator(toy_cluster(3), w, SimConfig(**options), core=core)
        sim.run(make_policy("least_load"))
        return sim.records.summary

    plain = run()
    late = 1e5
    for options in (
        {"fault_node_loss_s": (late,), "fault_node_loss_nodes": (1,)},
        {"fault_nic_down_s": (late,), "fault_nic_down_nodes": (1,)},
        {"upgrade_at_s": (late,)},
    ):
        summary = run(**options)
        for key in ("fault_node_losses", "fault_nic_downs", "upgrades_done"):
            assert summary.get(key, 0) == 0, (options, key)
        same = [k for k in plain if k != "warm_refused"]  # (faults add refusal reasons)
        assert {k: summary[k] for k in same} == {k: plain[k] for k in same}, options
        assert not any(summary["warm_refused"].values())
    early = run(fault_node_loss_s=(0.0,), fault_node_loss_nodes=(1,))  # while the run is on
    assert early["fault_node_losses"] == 1


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"fault_copy_slowdown": 5.0},
         "sim.fault_copy_slowdown=5.0 does nothing while sim.fault_copy_slow_prob is 0.0 "
         "(the share of copies it slows)"),
        ({"fault_node_down_s": 30.0},
         "sim.fault_node_down_s=30.0 does nothing while no node is lost "
         "(sim.fault_node_loss_s, sim.fault_node_loss_rate_per_s)"),
        ({"fault_nic_down_for_s": 3.0},
         "sim.fault_nic_down_for_s=3.0 does nothing while no NIC goes down (sim.fault_nic_down_s)"),
        ({"fault_seed": 4},
         "sim.fault_seed=4 does nothing while no fault is drawn at random "
         "(sim.fault_node_loss_rate_per_s, sim.fault_copy_fail_prob, sim.fault_copy_slow_prob)"),
        ({"upgrade_downtime_s": 5.0},
         "sim.upgrade_downtime_s=5.0 does nothing while no node upgrades (sim.upgrade_at_s)"),
        ({"upgrade_version": "v3"},
         "sim.upgrade_version='v3' does nothing while no node upgrades (sim.upgrade_at_s)"),
    ],
)  # fmt: skip
def test_a_fault_setting_that_needs_another_says_so(fields: dict[str, object], said: str) -> None:
    """fault_copy_slowdown without fault_copy_slow_prob slowed nothing, silently; so did
    fault_seed without a random fault, and the upgrade's settings without an upgrade."""
    from envs.sim.errors import SettingWarning

    with pytest.warns(SettingWarning) as caught:
        SimConfig(**fields)
    assert [str(w.message) for w in caught] == [said]
    needed = {
        "fault_copy_slowdown": {"fault_copy_slow_prob": 0.1},
        "fault_node_down_s": {"fault_node_loss_rate_per_s": 0.01},
        "fault_nic_down_for_s": {"fault_nic_down_s": (1.0,), "fault_nic_down_nodes": (0,)},
        "fault_seed": {"fault_copy_fail_prob": 0.1},
        "upgrade_downtime_s": {"upgrade_at_s": (1.0,)},
        "upgrade_version": {"upgrade_at_s": (math.inf, 1.0)},
    }[next(iter(fields))]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SimConfig(**fields, **needed)
        SimConfig()  # the defaults never warn
        for random in ({"fault_node_loss_rate_per_s": 0.1}, {"fault_copy_slow_prob": 0.1}):
            SimConfig(fault_seed=4, **random)  # (each draws at random)
    if "upgrade_at_s" in needed:  # a list of inf upgrades no node
        with pytest.warns(SettingWarning, match="does nothing while no node upgrades"):
            SimConfig(**fields, upgrade_at_s=(math.inf,))
