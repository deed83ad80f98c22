"""Faults meeting the other features: each case lost a request, left a node
draining forever or a copy in flight forever before it was fixed (each test
failed then: two of three requests completed, or a copy stayed in flight)."""

from __future__ import annotations

import math

import pytest
from simkit import CORES, HBM_S, Prompts, Script, check_run, decode_s, names, toy_cluster

from envs.sim import SimConfig, Simulator
from envs.sim.transfers import CANCELLED, FAILED


def _three_requests(second: list[str]) -> Prompts:
    prompts = Prompts()
    prompts.add(0.0, names("a", 4))  # node 0 (or 1) prefills A until 0.064
    prompts.add(0.05 if second[-1] == "q" else 0.1, second)
    prompts.add(0.3 if second[-1] == "q" else 0.12, ["y"])
    return prompts


def test_a_failed_copy_its_target_carries_out_and_waits_for_loses_no_request() -> None:
    # r1 waits on node 1 for the copy of A from node 0, which node 1 carries out
    # (reference copy model); node 0's NIC goes down mid-copy: the copy fails, r1
    # computes A itself, and every request is served
    prompts = _three_requests([*names("a", 4), "q"])
    a = prompts.blocks(names("a", 4))
    config = SimConfig(
        fault_nic_down_s=(0.08,), fault_nic_down_nodes=(0,), fault_nic_down_for_s=0.01
    )
    sim = Simulator(toy_cluster(2), prompts.workload(), config)
    sim.run(Script([0, 1, 0], {1: [lambda s: s.warm(0, 1, a)]}))
    assert sim.records.summary["completed"] == 3
    assert [c.state for c in sim.copies] == [FAILED]
    assert sim.nodes[1].running == 0 and sim.nodes[1].reserved_tokens == 0
    check_run(sim)


@pytest.mark.parametrize("fault", ["fail_on_landing", "nic_down"])
def test_a_draining_node_whose_last_copy_fails_still_upgrades(fault: str) -> None:
    # node 1 starts its upgrade at 0.11 with a copy of A on its way (contention
    # model); the copy fails: node 1 must still switch and serve y, routed to it
    prompts = _three_requests(["x"])
    a = prompts.blocks(names("a", 4))
    faults = (
        {"fault_copy_fail_prob": 1.0}
        if fault == "fail_on_landing"
        else {
            "fault_nic_down_s": (0.125,),
            "fault_nic_down_nodes": (0,),
            "fault_nic_down_for_s": 0.01,
        }
    )
    config = SimConfig(copy_model="contention", upgrade_at_s=(math.inf, 0.11), **faults)
    sim = Simulator(toy_cluster(2), prompts.workload(), config)
    sim.run(Script([0, 0, 1], {1: [lambda s: s.warm(0, 1, a)]}))
    assert sim.records.summary["completed"] == 3
    assert not sim.nodes[1].draining and not sim.nodes[1].queue
    assert sim.records.summary["upgrades_done"] == 1
    check_run(sim)


def test_a_copy_chained_on_a_failed_copy_fails_too() -> None:
    # warm A 1 -> 0 (fails on landing), and 0 -> 2 before A is on node 0: that copy
    # waits for the first; when the first fails, the second fails with it, so node 2
    # has nothing in flight and takes A again
    prompts = Prompts()
    prompts.add(0.0, names("a", 4))
    prompts.add(0.1, ["x"])
    prompts.add(0.3, ["y"])
    a = prompts.blocks(names("a", 4))
    script = Script(
        [1, 1, 1],
        {
            1: [lambda s: s.warm(1, 0, a), lambda s: s.warm(0, 2, a)],
            2: [lambda s: s.warm(1, 2, a)],
        },
    )
    sim = Simulator(toy_cluster(3), prompts.workload(), SimConfig(fault_copy_fail_prob=1.0))
    sim.run(script)
    assert script.results == {0: [], 1: ["ok", "ok"], 2: ["ok"]}
    assert [c.state for c in sim.copies] == [FAILED] * 3
    assert not sim.nodes[2].inflight
    check_run(sim)


def test_a_copy_an_upgrade_cancelled_is_not_failed_again_by_a_fault() -> None:
    prompts = _three_requests(["x"])
    a = prompts.blocks(names("a", 4))
    config = SimConfig(
        upgrade_at_s=(math.inf, 0.05),
        fault_node_loss_s=(0.2,),
        fault_node_loss_nodes=(1,),
    )
    sim = Simulator(toy_cluster(2), prompts.workload(), config)
    sim.run(Script([0, 0, 0], {0: [lambda s: s.warm(0, 1, a)]}))
    states = [c.state for c in sim.copies]
    summary = sim.records.summary
    assert states.count(CANCELLED) == summary["copies_cancelled_by_upgrade"]
    assert summary.get("fault_copies_failed", 0) == states.count(FAILED)
    check_run(sim)


def test_a_lost_node_takes_no_speculation() -> None:
    prompts = Prompts()
    prompts.add(0.0, ["x"])
    prompts.add(0.1, names("a", 4))
    prompts.add(0.5, ["y"])
    a = prompts.blocks(names("a", 4))
    config = SimConfig(fault_node_loss_s=(0.05,), fault_node_loss_nodes=(1,))
    script = Script([0, 0, 0], {1: [lambda s: s.speculate(1, a)]})
    sim = Simulator(toy_cluster(2), prompts.workload(), config)
    sim.run(script)
    assert script.results[1] == ["node_down"]
    assert sim.nodes[1].cache.hbm_blocks == 0
    assert sim.records.summary["speculative_compute_s"] == 0.0


def test_a_node_lost_during_a_speculative_chunk_counts_what_ran_of_it() -> None:
    """Node 1 speculates an 8-block (128-token) prefix from 0 s (128 ms at 1 ms a
    token) and is lost at 0.05 s: 50 ms ran, in its busy and prefill time and in
    the speculation's compute (which kept the whole 128 ms) and waste. The chunk
    cut short was not computed: no chunk, no token (it counted 1 and 128)."""
    prompts = Prompts()
    prompts.add(0.0, ["z"])
    prompts.add(0.5, names("a", 9))
    prefix = prompts.blocks(names("a", 8))
    config = SimConfig(
        fault_node_loss_s=(0.05,), fault_node_loss_nodes=(1,), speculative_chunk_tokens=128
    )
    script = Script([0, 2], {0: [lambda s: s.speculate(1, prefix)]})
    sim = Simulator(toy_cluster(3), prompts.workload(), config)
    sim.run(script)
    summary = sim.records.summary
    assert summary["speculative_chunks"] == 0 and summary["speculative_tokens"] == 0
    assert summary["speculative_compute_s"] == pytest.approx(0.05, rel=1e-9)
    assert summary["speculative_wasted_s"] == pytest.approx(0.05, rel=1e-9)
    assert sim.nodes[1].busy_s == pytest.approx(0.05, rel=1e-9)
    assert sim.nodes[1].prefill_s == pytest.approx(0.05, rel=1e-9)
    check_run(sim)


@pytest.mark.parametrize("core", CORES)
def test_a_speculative_chunk_cut_by_a_loss_counts_as_no_chunk(core: str) -> None:
    """Node 1 speculates 8 blocks in 32-token chunks from 0 s and is lost at 0.05 s:
    the first chunk ran 0-32 ms, the second 32-50 ms of its 32. One chunk of 32
    tokens was computed (it counted 2 and 64); 50 ms of compute, all wasted (the
    first chunk's KV went with the node, unused)."""
    p = Prompts()
    p.add(0.0, ["z0"])
    p.add(0.3, [*names("a", 8), "own"])
    sim = _speculating_when_lost(p, 0.05, [0, 1], core)
    summary = sim.records.summary
    assert summary["speculative_chunks"] == 1 and summary["speculative_tokens"] == 32
    assert summary["speculative_used_chunks"] == 0 and summary["speculative_used_tokens"] == 0
    assert summary["speculative_compute_s"] == pytest.approx(0.05, rel=1e-9)
    assert summary["speculative_wasted_s"] == pytest.approx(0.05, rel=1e-9)
    chunks = sim.speculation.chunks
    assert [c.cut for c in chunks] == [False, True]
    assert chunks[1].compute_s == pytest.approx(0.018, rel=1e-9)


def _speculating_when_lost(p: Prompts, loss_s: float, routes: list[int], core: str) -> Simulator:
    """``p`` served on ``routes`` while node 1, from the first arrival, speculates
    the 8 blocks ``a0..a7`` in 32-token chunks and is lost at ``loss_s`` for 0.1 s;
    checked."""
    prefix = p.blocks(names("a", 8))
    config = SimConfig(
        speculative_chunk_tokens=32,
        fault_node_loss_s=(loss_s,), fault_node_loss_nodes=(1,), fault_node_down_s=0.1,
    )  # fmt: skip
    sim = Simulator(toy_cluster(2), p.workload(), config, core=core)
    sim.run(Script(routes, {0: [lambda s: s.speculate(1, prefix)]}))
    check_run(sim)
    return sim


@pytest.mark.parametrize("core", CORES)
def test_a_speculative_chunk_cut_by_a_loss_is_waste_beside_a_used_one(core: str) -> None:
    """Node 1 speculates 8 blocks in 32-token chunks from 0 s. A request of the
    first 2 blocks and one of its own comes to it at 0.02 s: it waits for the first
    chunk (0-32 ms), reuses its 32 tokens from HBM and computes 16 (done at
    0.048 s + 32 x HBM_S); the second chunk then runs until the loss at 0.06 s.
    One chunk of 32 tokens, used; compute 32 ms + the cut chunk's 12 ms - 32 x
    HBM_S, of which the cut chunk's time is wasted."""
    p = Prompts()
    p.add(0.0, ["z0"])
    p.add(0.02, [*names("a", 2), "own"])
    p.add(0.3, ["q"])
    sim = _speculating_when_lost(p, 0.06, [0, 1, 0], core)
    rec = sim.records
    second_start = 0.048 + 32 * HBM_S
    assert rec.admit_s[1] == pytest.approx(0.032) and rec.hit_hbm_tokens[1] == 32
    assert rec.finish_s[1] == pytest.approx(second_start, rel=1e-12)
    summary = rec.summary
    assert summary["speculative_chunks"] == 1 and summary["speculative_tokens"] == 32
    assert summary["speculative_used_chunks"] == 1 and summary["speculative_used_tokens"] == 32
    cut_s = 0.06 - second_start
    assert summary["speculative_compute_s"] == pytest.approx(0.032 + cut_s, rel=1e-9)
    assert summary["speculative_wasted_s"] == pytest.approx(cut_s, rel=1e-9)


def test_hits_on_a_speculative_prefill_are_not_prefill_saved_by_copies() -> None:
    # node 1 speculates A at 0 (idle); r1 hits all of it at 0.2: a speculation,
    # not a warm copy, so the copies saved nothing
    prompts = Prompts()
    prompts.add(0.0, ["x"])
    prompts.add(0.2, [*names("a", 4), "q"])
    a = prompts.blocks(names("a", 4))
    sim = Simulator(toy_cluster(2), prompts.workload(), SimConfig())
    sim.run(Script([0, 1], {0: [lambda s: s.speculate(1, a)]}))
    summary = sim.records.summary
    assert sim.records.hit_hbm_tokens[1] == 64 and summary["speculative_used_chunks"] == 1
    assert summary["warm_copies"] == 0 and summary["copy_prefill_saved_s"] == 0.0


def _lost_node_0(upgrade_at_s: tuple[float, ...], downtime_s: float = 0.0) -> Simulator:
    """Three 8-block prompts at 0 s on nodes 0, 1, 2 (128 ms of prefill each);
    node 0 is lost at 0.05 s and its request re-routed by the fixed rule."""
    prompts = Prompts()
    for stem in "abc":
        prompts.add(0.0, names(stem, 8))
    config = SimConfig(
        fault_node_loss_s=(0.05,),
        fault_node_loss_nodes=(0,),
        upgrade_at_s=upgrade_at_s,
        upgrade_downtime_s=downtime_s,
    )
    sim = Simulator(toy_cluster(3), prompts.workload(), config)
    sim.run(Script([0, 1, 2]))
    assert sim.records.summary["completed"] == 3
    assert sim.records.summary["fault_rerouted_requests"] == 1
    check_run(sim)
    return sim


def test_a_lost_nodes_requests_skip_a_draining_node() -> None:
    # nodes 1 and 2 each run one request; node 1 drains from 0.01 s: the tie
    # went to node 1 (lower index), where r0 waited for the drain
    sim = _lost_node_0((math.inf, 0.01, math.inf))
    assert sim.records.node[0] == 2
    assert sim.records.first_token_s[0] == pytest.approx(0.128 + 0.128)


def test_a_lost_nodes_requests_skip_a_node_loading_its_weights() -> None:
    # node 1's one-block request ends at 0.016 s; its upgrade at 0.02 s finds it
    # idle, so it switches at once and loads weights for 1 s; node 2 is busy until 0.128 s
    prompts = Prompts()
    prompts.add(0.0, names("a", 8))
    prompts.add(0.0, names("b", 1))  # node 1: 16 ms
    prompts.add(0.0, names("c", 8))
    config = SimConfig(
        fault_node_loss_s=(0.05,),
        fault_node_loss_nodes=(0,),
        upgrade_at_s=(math.inf, 0.02),
        upgrade_downtime_s=1.0,
    )
    sim = Simulator(toy_cluster(3), prompts.workload(), config)
    sim.run(Script([0, 1, 2]))
    # node 1 is idle and least loaded at 0.05 s, but its weights are in at 1.02 s
    assert sim.records.node[0] == 2
    assert sim.records.first_token_s[0] == pytest.approx(0.128 + 0.128)
    assert sim.records.summary["completed"] == 3
    check_run(sim)


def test_a_lost_nodes_requests_go_to_a_draining_node_if_every_node_up_drains() -> None:
    sim = _lost_node_0((math.inf, 0.01, 0.01))
    assert sim.records.node[0] == 1  # least loaded, ties to the lower index


@pytest.mark.parametrize("core", CORES)
def test_a_node_lost_during_a_chunked_prefill_splits_what_ran(core: str) -> None:
    """A (1 token, 100 out) prefills 0-1 ms and decodes one step; B (64 tokens in
    1-token chunks, a decode step of A between each two) starts at about 2 ms and
    runs for about 127 ms; node 0 is lost at 5 ms. Its busy time is its 5 ms of
    life, all of it prefill or decode; the cut item's unrun part comes off both in
    proportion. (Until 2026-12-05 it came off prefill alone: prefill 0, decode 64 ms.)"""
    p = Prompts()
    p.add(0.0, ["a0"], input_tokens=1, output_tokens=100)
    p.add(0.002, names("b", 4), input_tokens=64, output_tokens=1)
    config = SimConfig(
        chunked_prefill_tokens=1, fault_node_loss_s=(0.005,), fault_node_loss_nodes=(0,)
    )
    sim = Simulator(toy_cluster(2, budget_tokens=256), p.workload(), config, core=core)
    sim.run(Script([0, 0]))
    node = sim.nodes[0]
    assert node.busy_s == pytest.approx(0.005, rel=1e-9)
    assert node.prefill_s + node.decode_s + node.copy_s == pytest.approx(0.005, rel=1e-9)
    # A's prefill and decode step (2 ms) and about half of B's 3 ms: 64 chunks of
    # 1 ms and 63 steps of about 1 ms each
    assert 0.0024 < node.prefill_s < 0.0026 and 0.0024 < node.decode_s < 0.0026


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("overshoot", [True, False])
def test_decode_overshoot_stops_at_a_loss_due_within_the_step(core: str, overshoot: bool) -> None:
    """A case the feature fuzz's timeline check found (2026-12-06). Request 0 decodes
    alone on node 0 to t1 = 16 ms + decode_s(39, 1, 16) = 55.0014 ms; node 0 is lost at
    t1 - 0.2 ms; request 1 arrives at t1 - 0.5 ms, in request 0's last step, for node 1.
    Decode overshoot ran that step to t1 before the router decided, past the loss:
    request 0 finished on node 0 at t1, 0.2 ms after the node was gone, and was not
    restarted. The loss comes first now, as without overshoot: request 0 (first token
    out at 16 ms) restarts on node 1 once request 1's 16 ms prefill is done (t1 +
    15.5 ms) and finishes there at t1 + 15.5 ms + 16 ms + decode_s(39, 1, 16)."""
    p = Prompts()
    p.add(0.0, names("q", 1), output_tokens=40)
    t1 = 0.016 + decode_s(39, 1, 16)
    p.add(t1 - 0.0005, names("r", 1))
    config = SimConfig(
        decode_overshoot=overshoot, fault_node_loss_s=(t1 - 0.0002,), fault_node_loss_nodes=(0,)
    )
    sim = Simulator(toy_cluster(2), p.workload(), config, core=core)
    sim.run(Script([0, 1]))
    check_run(sim)
    rec = sim.records
    assert rec.summary["fault_restarted_requests"] == 1
    assert rec.node[0] == 0 and rec.ttft_s[0] == pytest.approx(0.016, rel=1e-9)
    rerun_s = t1 - 0.0005 + 0.016
    assert sim.totals().reruns == {0: (pytest.approx(rerun_s, rel=1e-12), 1)}
    assert rec.finish_s[0] == pytest.approx(rerun_s + t1, rel=1e-9)
