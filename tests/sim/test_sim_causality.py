"""Causal KV: a request's KV is usable, and copyable, only once its prefill has
finished or its copy has landed; ``causal_kv=False`` restores the reference
behaviour (resident from admission).

The scenario throughout, on the toy cluster: request A (a 4-block, 64-token
prefix P) arrives at 0 on node 0 and finishes its prefill at 64 ms; request B
(P plus one block of its own, 80 tokens) arrives later. Copying P's 4 blocks
(65,536 bytes) over the 2.048e6 B/s NIC takes 32 ms.
"""

from __future__ import annotations

import pytest
from simkit import (
    CORES,
    HBM_S,
    Prompts,
    Script,
    check_causal,
    check_run,
    names,
    run_script,
    toy_cluster,
)

from envs.sim import SimConfig, Simulator
from envs.sim.transfers import WAIT_SOURCE

CAUSAL = SimConfig()
REFERENCE = SimConfig(causal_kv=False)


def _a_then_b(b_arrival_s: float) -> tuple[Prompts, tuple[int, ...]]:
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(b_arrival_s, [*names("P", 4), "b0"])
    return p, p.blocks(names("P", 4))


def test_default_is_causal() -> None:
    assert SimConfig().causal_kv is True


@pytest.mark.parametrize("config", [CAUSAL, REFERENCE], ids=["causal", "reference"])
def test_same_node_reuse_waits_for_the_prefill(config: SimConfig) -> None:
    # On one node the timeline is serial, so even the reference behaviour cannot
    # let B reuse P before A's prefill has produced it.
    p, _ = _a_then_b(0.001)
    sim, _ = run_script(toy_cluster(), p, [0, 0], config=config)
    rec = sim.records
    assert rec.first_token_s[0] == pytest.approx(0.064, rel=1e-12)
    assert rec.admit_s[1] >= rec.first_token_s[0]
    assert rec.hit_hbm_tokens[1] == 64
    assert check_causal(sim) == []


@pytest.mark.parametrize("config", [CAUSAL, REFERENCE], ids=["causal", "reference"])
def test_no_reuse_across_nodes_without_a_copy(config: SimConfig) -> None:
    p, _ = _a_then_b(0.001)
    sim, _ = run_script(toy_cluster(), p, [0, 1], config=config)
    assert sim.records.hit_hbm_tokens[1] == 0
    assert sim.records.first_token_s[1] == pytest.approx(0.081, rel=1e-12)


def test_kv_being_computed_is_invisible_to_policies() -> None:
    p, prefix = _a_then_b(0.010)
    views: dict[str, tuple] = {}
    for name, config in (("causal", CAUSAL), ("reference", REFERENCE)):
        probe = [lambda s: (s.hbm_hits(prefix), s.holders(prefix), s.nodes[0].computing)]
        _, script = run_script(toy_cluster(), p, [0, 1], {1: probe}, config)
        views[name] = script.results[1][0]
    hits, holders, computing = views["causal"]
    assert hits == [0, 0] and holders == ([], [])
    assert computing is not None and computing.index == 0  # but the node says what it computes
    hits, holders, _ = views["reference"]
    assert hits == [4, 0] and holders == ([0], [])


def test_warm_from_a_computing_source_waits_for_its_prefill() -> None:
    # B arrives at 10 ms and is routed to node 1 with a warm copy of P from node 0.
    # The copy could land at 64 + 32 = 96 ms; computing P there would end at
    # 10 + 64 ms, so B does not wait: it computes all 80 tokens (to 90 ms), and
    # the copy runs on node 1's timeline after that, 90 -> 122 ms.
    p, prefix = _a_then_b(0.010)

    def warm_and_look(sim):  # type: ignore[no-untyped-def]
        result = sim.warm(0, 1, prefix)
        copy = sim.nodes[1].inflight[prefix[-1]]
        return result, copy.state, copy.src, copy.dst, copy.n_blocks, copy.bytes

    sim, script = run_script(toy_cluster(), p, [0, 1], {1: [warm_and_look]})
    assert script.results[1] == [("ok", WAIT_SOURCE, 0, 1, 4, 65_536)]
    rec = sim.records
    (copy,) = sim.copies
    assert rec.hit_hbm_tokens[1] == 0
    assert rec.first_token_s[1] == pytest.approx(0.090, rel=1e-12)
    assert copy.start_s == pytest.approx(0.090, rel=1e-12)
    assert copy.land_s == pytest.approx(0.122, rel=1e-12)
    assert copy.land_s >= rec.first_token_s[0] + 0.032
    assert check_causal(sim) == []
    s = rec.summary
    assert (s["warm_copies"], s["warm_copies_landed"], s["warm_bytes"]) == (1, 1, 65_536)
    assert s["warm_hit_rate"] == 0.0 and s["warm_amplification"] == 1.0  # never used


def test_a_copy_from_a_source_loading_the_prefix_from_ram_waits_for_the_load() -> None:
    # A computes P on node 0 (to 64 ms); at 1 s P is evicted to host RAM and B (P
    # plus a block) is routed there: it loads P's 64 tokens from RAM (6.4 ms) and
    # computes its own 16 (16 ms), first token at 1.0224. C, at 1.001, asks for a
    # copy of P from node 0 to node 1: node 0 holds P again only when B's prefill
    # ends, so the copy runs 1.0224 -> 1.0544 (it ran from 1.001 until 2026-12-05:
    # KV brought up at admission counted as there at once). D (P plus a block),
    # routed to node 1 at 1.010, waits for it: 44.4 ms against 64 ms of prefill.
    p, prefix = _a_then_b(1.0)
    p.add(1.001, ["Q"])
    p.add(1.010, [*names("P", 4), "d0"])
    actions = {1: [lambda sim: sim.evict(0, prefix)], 2: [lambda sim: sim.warm(0, 1, prefix)]}
    sim, script = run_script(toy_cluster(), p, [0, 0, 0, 1], actions)
    assert script.results[1] == [5] and script.results[2] == ["ok"]  # (and A's output block)
    rec = sim.records
    (copy,) = sim.copies
    assert rec.hit_ram_tokens[1] == 64
    assert rec.first_token_s[1] == pytest.approx(1.0224, rel=1e-12)
    assert copy.start_s == pytest.approx(1.0224, rel=1e-12)
    assert copy.land_s == pytest.approx(1.0544, rel=1e-12)
    assert rec.admission[3][0] == pytest.approx(1.0544, rel=1e-12)
    assert rec.hit_hbm_tokens[3] == 64
    assert rec.first_token_s[3] == pytest.approx(1.0544 + 64 * HBM_S + 0.016, rel=1e-12)
    assert check_causal(sim) == []


@pytest.mark.parametrize("core", CORES)
def test_a_copy_of_a_prefix_extending_one_being_loaded_is_refused(core: str) -> None:
    # B loads P from RAM on node 0 (1.0 to 1.0224 s); a copy lands P's next block
    # q0 there at 1.008 s (contention model: the copy sends only q0, P counting as
    # there). At 1.010 s P + q0 looks held on node 0, but P is still on its way up
    # and B's prompt lacks q0, so its prefill would not release a waiting copy:
    # the copy is refused (until 2026-12-05 it started at once, from P's KV not
    # yet in HBM).
    p = Prompts()
    p.add(0.0, names("P", 4))  # A on node 0
    p.add(0.0, [*names("P", 4), "q0"])  # C on node 1: holds P + q0
    p.add(1.0, [*names("P", 4), "b0"])  # B on node 0, after P goes to RAM
    p.add(1.010, ["z0"])  # D on node 2
    prefix = p.blocks(names("P", 4))
    longer = p.blocks([*names("P", 4), "q0"])

    def to_ram_route_and_copy(sim):  # type: ignore[no-untyped-def]
        moved = sim.evict(0, prefix)
        sim.route(0)
        return [moved, sim.warm(1, 0, longer)]

    def copy_on(sim):  # type: ignore[no-untyped-def]
        return [sim.nodes[0].cache.hbm_match(longer), sim.warm(0, 2, longer)]

    actions = {2: [to_ram_route_and_copy], 3: [copy_on]}
    sim = Simulator(toy_cluster(3), p.workload(), SimConfig(copy_model="contention"), core=core)
    script = Script([0, 1, None, 2], actions)  # type: ignore[list-item]
    sim.run(script)
    check_run(sim)
    assert script.results[2] == [[5, "ok"]] and script.results[3] == [[5, "source_lacks_prefix"]]
    (copy,) = sim.copies
    assert (copy.start_s, copy.land_s) == (pytest.approx(1.0), pytest.approx(1.008))
    assert sim.records.first_token_s[2] == pytest.approx(1.0224, rel=1e-12)


@pytest.mark.parametrize("copy_model", ["reference", "contention"])
def test_a_request_waits_for_a_copy_that_beats_recomputing(copy_model: str) -> None:
    # B arrives at 40 ms: the copy will land at 96 ms (56 ms away) and computing
    # P would take 64 ms, so node 1 waits and B reuses the landed copy.
    p, prefix = _a_then_b(0.040)
    config = SimConfig(copy_model=copy_model)
    sim, script = run_script(
        toy_cluster(), p, [0, 1], {1: [lambda s: s.warm(0, 1, prefix)]}, config
    )
    assert script.results[1] == ["ok"]
    rec = sim.records
    (copy,) = sim.copies
    assert copy.start_s == pytest.approx(rec.first_token_s[0], rel=1e-12) == 0.064
    assert copy.land_s == pytest.approx(0.096, rel=1e-12)
    assert rec.admit_s[1] == pytest.approx(0.096, rel=1e-12)
    assert rec.hit_hbm_tokens[1] == 64
    assert rec.first_token_s[1] == pytest.approx(0.096 + 64 * HBM_S + 0.016, rel=1e-12)
    assert check_causal(sim) == []
    s = rec.summary
    assert s["warm_hit_rate"] == 1.0 and s["warm_amplification"] == 0.0


def test_reference_behaviour_copies_kv_that_does_not_exist_yet() -> None:
    # causal_kv=False: A's blocks count as resident from its admission at 0, so a
    # copy asked for at 10 ms starts at once and lands at 42 ms, and B produces
    # its first token (at 58 ms) before A, whose KV it reused, has finished (64 ms).
    # (The reference model charges nothing for B's HBM hit.)
    p, prefix = _a_then_b(0.010)
    sim, script = run_script(
        toy_cluster(), p, [0, 1], {1: [lambda s: s.warm(0, 1, prefix)]}, REFERENCE
    )
    assert script.results[1] == ["ok"]
    rec = sim.records
    (copy,) = sim.copies
    assert copy.start_s == 0.010
    assert copy.land_s == pytest.approx(0.042, rel=1e-12)
    assert rec.admit_s[1] == pytest.approx(0.042, rel=1e-12)
    assert rec.hit_hbm_tokens[1] == 64
    assert rec.first_token_s[1] == pytest.approx(0.058, rel=1e-12)
    assert rec.first_token_s[1] < rec.first_token_s[0]
    problems = check_causal(sim)
    assert len(problems) == 1 and problems[0].startswith("copy 0 starts at 0.01 before")
    # measured against admission times (what the reference assumes) it is consistent
    assert check_causal(sim, computed_at="admit_s") == []


def test_a_copy_can_chain_from_a_copy_in_flight() -> None:
    # At 1 s (A long done) warm P 0 -> 1, then 1 -> 2 while the first is in flight:
    # the second starts when the first lands and runs on node 2's timeline.
    p, prefix = _a_then_b(1.0)
    acts = [lambda s: s.warm(0, 1, prefix), lambda s: s.warm(1, 2, prefix)]
    sim, script = run_script(toy_cluster(3), p, [0, 0], {1: acts})
    assert script.results[1] == ["ok", "ok"]
    first, second = sim.copies
    assert first.land_s == pytest.approx(1.032, rel=1e-12)
    assert second.start_s == pytest.approx(first.land_s, rel=1e-12)
    assert second.land_s == pytest.approx(1.064, rel=1e-12)
    assert check_causal(sim) == []
