"""The capacity metrics of records.summary (prefill / decode busy, batch and KV
occupancy, load imbalance), worked out by hand on the toy cluster."""

from __future__ import annotations

import pytest
from simkit import CORES, Prompts, Script, decode_s, names, run_script, toy_cluster

from envs.sim import SimConfig


def test_capacity_metrics_by_hand() -> None:
    p = Prompts()
    p.add(0.0, names("a", 4))  # 64 tokens to node 0: prefill 0-64 ms, done at its first token
    p.add(
        0.0, names("b", 2), output_tokens=3
    )  # 32 tokens to node 1: prefill 0-32 ms, 2 decode steps
    sim, _ = run_script(toy_cluster(2), p, [0, 1], config=SimConfig(max_batch=2))
    s = sim.records.summary
    decode = decode_s(2, 1, 32)
    r1_done = 0.032 + decode
    makespan = 0.064  # first arrival 0, last finish r0's 64 ms
    assert s["makespan_s"] == pytest.approx(makespan)
    assert s["prefill_busy_fraction"] == pytest.approx((0.064 + 0.032) / (2 * makespan))  # 0.75
    assert s["prefill_busy_per_node"] == pytest.approx([1.0, 0.5])
    assert s["decode_busy_fraction"] == pytest.approx(decode / (2 * makespan))
    # running sequences: r0 for 64 ms on node 0, r1 for r1_done on node 1; max batch 2
    assert s["batch_occupancy_mean"] == pytest.approx((0.064 + r1_done) / (2 * makespan * 2))
    # KV reserved (input + output) over each node's 1,024-token budget
    node0, node1 = 0.064 * 65 / 1024, r1_done * 35 / 1024
    assert s["kv_occupancy_mean"] == pytest.approx((node0 + node1) / 2 / makespan)
    # one sequence a node at a time: the peaks are node 0's r0 (65 tokens), of 2 and 1,024
    assert (s["batch_occupancy_peak"], s["kv_occupancy_peak"]) == (0.5, 65 / 1024)
    assert s["load_imbalance"] == pytest.approx(0.064 / 0.048)  # max / mean prefill seconds
    assert s["utilisation_mean"] == pytest.approx((0.064 + 0.032 + decode) / 2 / makespan)


@pytest.mark.parametrize("core", CORES)
def test_time_shares_count_work_after_the_last_finish(core: str) -> None:
    """A 16-token request (16 ms) and a speculated 64-token prefix, which runs
    after it, 16-80 ms: the shares are over the 80 ms until the node went idle
    (busy_span_s), not the 16 ms to the last finish (utilisation read 5.0)."""
    from envs.sim import Simulator

    p = Prompts()
    p.add(0.0, ["a0"], input_tokens=16)
    other = p.blocks(names("x", 4))

    class RouteAndSpeculate:
        def decide(self, sim: Simulator, request: object) -> None:
            sim.route(0)
            assert sim.speculate(0, other) == "ok"

    sim = Simulator(toy_cluster(1, budget_tokens=256), p.workload(), SimConfig(), core=core)
    sim.run(RouteAndSpeculate())
    s = sim.records.summary
    assert (s["makespan_s"], s["busy_span_s"]) == (pytest.approx(0.016), pytest.approx(0.080))
    assert s["utilisation_per_node"] == pytest.approx([1.0])
    assert s["prefill_busy_fraction"] == pytest.approx(1.0)
    assert s["throughput_rps"] == pytest.approx(1 / 0.016)  # requests over the makespan


@pytest.mark.parametrize("core", CORES)
def test_a_rerun_after_a_node_loss_holds_kv_from_its_own_admission(core: str) -> None:
    """Four requests that each fill a 64-token node (16 in, 48 out). A, on node 0,
    has its first token out when node 0 is lost at 20 ms; it reruns on node 1
    after B (B 0 to 63 ms, A from 63 to 126 ms). Node 0 is back at 21 ms and runs
    C (21-84 ms) and D (84-147 ms). Each node holds one full request at a time,
    so KV occupancy is each node's held time over the 147 ms (A's lost first
    service is not counted). Until 2026-12-05 A counted from its first admission,
    0 ms, on node 1: 1.07, above 1."""
    from envs.sim import Simulator

    p = Prompts()
    for t, b in ((0.0, "a0"), (0.0, "b0"), (0.021, "c0"), (0.084, "d0")):
        p.add(t, [b], input_tokens=16, output_tokens=48)
    config = SimConfig(
        max_batch=1, fault_node_loss_s=(0.02,), fault_node_loss_nodes=(0,), fault_node_down_s=0.001
    )
    sim = Simulator(toy_cluster(2, budget_tokens=64), p.workload(), config, core=core)
    sim.run(Script([0, 1, 0, 0]))
    rec, s = sim.records, sim.records.summary
    one = 0.016 + decode_s(47, 1, 17)  # 16 ms of prefill, then 47 decode steps
    assert list(rec.finish_s) == pytest.approx([2 * one, one, 0.021 + one, 0.021 + 2 * one])
    assert list(rec.admit_s) == pytest.approx([0.0, 0.0, 0.021, 0.021 + one])  # A's first
    span = 0.021 + 2 * one
    assert s["busy_span_s"] == pytest.approx(span)
    assert s["kv_occupancy_mean"] == pytest.approx((2 * one / span + 2 * one / span) / 2)
    assert s["batch_occupancy_mean"] == pytest.approx(4 * one / (2 * span))
    # a full request at a time; A's rerun admitted at 63 ms, the instant B frees node 1
    assert (s["kv_occupancy_peak"], s["batch_occupancy_peak"]) == (1.0, 1.0)


@pytest.mark.parametrize("core", CORES)
def test_occupancy_peaks_by_hand(core: str) -> None:
    """Node 0 of a 2-node toy cluster (1,024 tokens, batch 4) runs A (64 tokens in,
    16 out) from 0 ms, B (32 + 16) and C (16 + 16) once they arrive at 10 and 20 ms
    and decode with A, while node 1 runs D (16 + 1) alone. The peaks are node 0's
    three sequences together, 80 + 48 + 32 = 160 tokens: 160 / 1,024 and 3 / 4,
    though the time-weighted means are far lower."""
    from envs.sim import Simulator

    p = Prompts()
    p.add(0.0, names("a", 4), output_tokens=16)
    p.add(0.010, names("b", 2), output_tokens=16)
    p.add(0.020, ["c0"], output_tokens=16)
    p.add(0.0, ["d0"], output_tokens=1)
    workload = p.workload()
    routes = {"r0": 0, "r1": 0, "r2": 0, "r3": 1}
    sim = Simulator(toy_cluster(2), workload, SimConfig(max_batch=4), core=core)
    sim.run(Script([routes[r.request_id] for r in workload.requests]))
    s = sim.records.summary
    rec = sim.records
    ids = [r.request_id for r in workload.requests]
    a, b, c = (ids.index(k) for k in ("r0", "r1", "r2"))
    assert rec.admit_s[c] < min(rec.finish_s[a], rec.finish_s[b])  # all three at once
    assert s["kv_occupancy_peak"] == 160 / 1024
    assert s["batch_occupancy_peak"] == 3 / 4
    assert s["kv_occupancy_mean"] < s["kv_occupancy_peak"] / 2
