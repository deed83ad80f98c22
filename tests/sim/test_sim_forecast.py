"""The world's forecast (envs/sim/forecast.py) on the toy cluster, numbers by hand:
a block is 16 tokens x 1,024 B = 16,384 B, every NIC moves 2.048e6 B/s (8 ms a
block), prefill costs 1 ms a token."""

from __future__ import annotations

from typing import Any

import pytest
from simkit import CORES, HBM_S, Prompts, Script, names, run_script, toy_cluster

from envs.sim import WARM_OK, SimConfig, Simulator
from envs.sim.forecast import (
    copy_bytes,
    copy_s,
    copy_targets,
    has_prefix,
    landing_s,
    transfer_s,
    usable_tokens,
)
from envs.sim.node import COPY
from envs.sim.request import Request


def test_has_prefix_compares_the_chained_id_at_the_prefix_depth() -> None:
    p = Prompts()
    a = p.blocks(["A0", "A1", "A2"])
    b = p.blocks(["A0", "A1", "B2"])
    assert has_prefix(b, 2, a[1])
    assert not has_prefix(b, 3, a[2])
    assert not has_prefix(a[:1], 2, a[1])  # too short to hold it


def test_a_hit_never_covers_the_last_prompt_token() -> None:
    assert usable_tokens(3, 16, 48) == 47
    assert usable_tokens(2, 16, 48) == 32
    assert usable_tokens(0, 16, 48) == 0


def test_copy_bytes_and_seconds() -> None:
    p = Prompts()
    p.add(0.0, ["x"])
    node = Simulator(toy_cluster(2), p.workload()).nodes[1]
    n_bytes = copy_bytes(4, 16, node)
    assert n_bytes == 4 * 16 * 1024
    assert transfer_s(n_bytes, node) == pytest.approx(0.032, rel=1e-12)
    assert copy_s(n_bytes, node, 0.001) == pytest.approx(0.033, rel=1e-12)


def test_a_copy_waiting_for_its_source_is_forecast_to_land_when_it_does() -> None:
    """A computes the 4-block prefix P on node 0 (prefill ends at 64 ms); at 10 ms
    P is warmed to node 1: forecast 64 + 32 ms, and it lands then."""
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(0.010, ["x"])
    prefix = p.blocks(names("P", 4))
    seen: list[float] = []

    def warm_and_forecast(sim: Simulator) -> str:
        answer = sim.warm(0, 1, prefix)
        copy = sim.nodes[1].inflight[prefix[-1]]
        seen.append(landing_s(copy, sim.nodes, sim.now, sim.config.transfer_latency_s))
        return answer

    sim, _ = run_script(toy_cluster(2), p, [0, 0], {1: [warm_and_forecast]}, SimConfig())
    assert seen == [pytest.approx(0.096, rel=1e-12)]
    assert sim.copies[0].land_s == pytest.approx(0.096, rel=1e-12)


def test_copy_targets_take_the_soonest_free_nodes_that_lack_the_prefix() -> None:
    p = Prompts()
    p.add(0.0, ["x"])
    nodes = Simulator(toy_cluster(4), p.workload()).nodes
    free_at = [0.0, 5.0, 1.0, 2.0]
    assert copy_targets(nodes, 7, [0], 3, free_at) == [2, 3]
    assert copy_targets(nodes, 7, [0], 4, free_at) == [2, 3, 1]
    assert copy_targets(nodes, 7, [0], 1, free_at) == []


def _estimators() -> list[Any]:
    """The first-token estimates: the Python reference and, where built, its compiled twin."""
    from baselines.native import FORECAST
    from envs.sim import forecast

    return [forecast] if FORECAST is None else [forecast, FORECAST]


@pytest.mark.parametrize("core", CORES)
def test_a_node_s_work_left_is_one_rule_for_its_backlog_and_a_copy_landing_there(
    core: str,
) -> None:
    """``work_left_s``, the rest of a node's prefill, copy or speculative chunk (0
    idle or decoding), is what a node's backlog starts from and what a copy landing
    there waits for, queued or being written, in both twins of the forecast. r0
    (P, 64 tokens, 10 output tokens) prefills on node 0 from 0 to 64 ms, then
    decodes; r1 (256 tokens) prefills on node 1 from 0 to 256 ms. At 66 ms node 0 is
    decoding (0 left) and node 1 has 190 ms left; P is warmed from node 0 to node 1,
    queued there behind r1: it lands after those 190 ms and its 4 blocks' 32 ms,
    in 222 ms. At 260 ms node 1 writes the copy (256 to 288 ms): 28 ms left, and so
    the copy lands in 28 ms. A request of P and one block more (80 tokens) would
    have its first token on node 0 (P in HBM) in 16 ms, on node 1 16 ms after P
    lands there (238 ms, then 44 ms; cold, 80 ms after node 1's backlog)."""
    from envs.sim.forecast import _causal_landing_s, work_left_s

    p = Prompts()
    p.add(0.0, names("P", 4), output_tokens=10)
    p.add(0.0, names("f", 16))
    p.add(0.066, ["x0"])
    p.add(0.260, ["y0"])
    asking = p.add(1.0, [*names("P", 4), "z0"])  # (asked about before it arrives)
    prefix = p.blocks(names("P", 4))
    seen: list[tuple[float, ...]] = []

    def look(sim: Simulator) -> None:
        copy = sim.copies[0]
        estimates = [
            [(backlog, first) for backlog, first, _ in way.estimates_with_hits(sim, asking, None)]
            for way in _estimators()
        ]
        assert all(e == estimates[0] for e in estimates)  # the twins agree, to the bit
        (backlog0, first0), (backlog1, first1) = estimates[0]
        left0, left1 = work_left_s(sim.nodes[0], sim.now), work_left_s(sim.nodes[1], sim.now)
        seen.append((left0, left1, _causal_landing_s(sim, copy, sim.now, 0), backlog0, backlog1))
        seen.append((first0, first1))

    def warm_then_look(sim: Simulator) -> None:
        assert sim.warm(0, 1, prefix) == WARM_OK
        look(sim)

    sim = Simulator(toy_cluster(2), p.workload(), SimConfig(), core=core)
    sim.run(Script([0, 1, 0, 0, 0], {2: [warm_then_look], 3: [look]}))
    ms = [pytest.approx(x / 1000, rel=1e-9) for x in (190, 222, 28, 16, 238, 44)]
    assert seen == [
        (0.0, ms[0], ms[1], 0.0, ms[0]),
        (ms[3], ms[4]),
        (0.0, ms[2], ms[2], 0.0, ms[2]),
        (ms[3], ms[5]),
    ]


def test_landing_s_refuses_a_copy_queued_on_its_target() -> None:
    """``landing_s`` answers for a copy moving or waiting for its source, all its one
    caller (``worth_waiting``, as a node with no copy queued starts its next work)
    meets. A copy queued on its target's timeline (the reference copy model) is
    refused, not answered as though it started now: P, computed on node 0 by 64 ms,
    is warmed to node 1 at 66 ms, queued behind r1's prefill there (to 256 ms)."""
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(0.0, names("f", 16))
    p.add(0.066, ["x0"])
    prefix = p.blocks(names("P", 4))
    seen: list[str] = []

    def warm_and_ask(sim: Simulator) -> None:
        assert sim.warm(0, 1, prefix) == WARM_OK
        copy = sim.nodes[1].inflight[prefix[-1]]
        assert copy in sim.nodes[1].copy_queue
        with pytest.raises(RuntimeError) as refused:
            landing_s(copy, sim.nodes, sim.now, sim.config.transfer_latency_s)
        seen.append(str(refused.value))

    run_script(toy_cluster(2), p, [0, 1, 0], {2: [warm_and_ask]}, SimConfig())
    assert seen == [
        "landing_s: copy 0 to node 1 is neither moving nor waiting for its source "
        "(state 1: queued or being written on its target, or ended)"
    ]


def _two_copies_behind_a_prefill() -> tuple[Prompts, Request]:
    """The prompts of the queued-copy cases: P (4 blocks), f (16, the target's
    prefill the copies queue behind) and Q (2) at 0, a one-block x0 at 100 ms, and
    the request asked about (P and a block of its own), arriving at 1 s."""
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(0.0, names("f", 16))
    p.add(0.0, names("Q", 2))
    p.add(0.100, ["x0"])
    asking = p.add(1.0, [*names("P", 4), "z0"])  # (asked about before it arrives)
    return p, asking


@pytest.mark.parametrize("core", CORES)
def test_a_queued_copy_and_each_copy_ahead_of_it_count_the_transfer_latency(core: str) -> None:
    """Under the reference copy model a queued copy's work item on its target is
    the transfer latency plus its bytes over the target's bandwidth, so the
    forecast of a copy still queued counts the latency, its own and that of each
    copy queued ahead of it, in both twins. Latency 2 ms. r0 (P, 4 blocks)
    prefills on node 0 from 0 to 64 ms, r2 (Q, 2 blocks) there from 64 to 96 ms;
    r1 (256 tokens) prefills on node 1 from 0 to 256 ms. At 100 ms P then Q are
    warmed from node 0 to node 1, both queued behind r1 (156 ms left): P is
    written from 256 to 256 + 2 + 32 = 290 ms (190 ms from now), Q from 290 to
    290 + 2 + 16 = 308 ms (208 ms from now), and they land then. A request of P and
    one block more (80 tokens) would have its first token on node 1 16 ms after P
    lands (206 ms; cold, 80 ms after node 1's backlog of 156 ms: 236 ms)."""
    from envs.sim.forecast import _causal_landing_s

    p, asking = _two_copies_behind_a_prefill()
    seen: list[tuple[float, ...]] = []

    def warm_then_look(sim: Simulator) -> None:
        assert sim.warm(0, 1, p.blocks(names("P", 4))) == WARM_OK
        assert sim.warm(0, 1, p.blocks(names("Q", 2))) == WARM_OK
        assert list(sim.nodes[1].copy_queue) == sim.copies[:2]
        estimates = [
            [(backlog, first) for backlog, first, _ in way.estimates_with_hits(sim, asking, None)]
            for way in _estimators()
        ]
        assert all(e == estimates[0] for e in estimates)  # the twins agree, to the bit
        landing = tuple(_causal_landing_s(sim, copy, sim.now, 0) for copy in sim.copies)
        seen.append((*landing, *estimates[0][1]))

    sim = Simulator(toy_cluster(2), p.workload(), SimConfig(transfer_latency_s=0.002), core=core)
    sim.run(Script([0, 1, 0, 0, 0], {3: [warm_then_look]}))
    ms = [pytest.approx(x / 1000, rel=1e-9) for x in (190, 208, 156, 206)]
    assert seen == [tuple(ms)]
    # the simulator lands them so (the forecast is seconds from the 100 ms decision)
    assert [copy.land_s for copy in sim.copies] == [
        pytest.approx(x / 1000, rel=1e-9) for x in (290, 308)
    ]


@pytest.mark.parametrize("core", CORES)
def test_a_node_loading_new_weights_is_busy_until_they_are_in(core: str) -> None:
    """A node loading its new weights after an upgrade (idle, ``free_s`` ahead)
    starts nothing before they are in: its work left runs to then, so its backlog
    and a copy queued on it count the load, in both twins, and ``step_wait`` adds
    nothing more for it. Node 0 upgrades to v2 (node 1's version) at 0.1 s and loads
    until 0.6 s; node 1 computes P (4 blocks) from 0 to 64 ms. At 0.2 s P is warmed
    from node 1 to node 0, queued there: it is written from 0.6 to 0.632 s (0.432 s
    from now). r1, P and one block more (80 tokens), then goes to node 0: its
    first token is expected 16 ms after P lands (0.448 s; cold, 80 ms after the
    load: 0.48 s), and comes at 0.648 s plus the HBM read of its 64-token hit,
    which the estimate leaves out. On node 1 (P in HBM, idle) it is 16 ms."""
    from envs.sim.forecast import _causal_landing_s, work_left_s

    p = Prompts()
    p.add(0.0, names("P", 4))
    asking = p.add(0.2, [*names("P", 4), "z0"])
    seen: list[tuple[float, ...]] = []

    def warm_then_look(sim: Simulator) -> None:
        assert sim.warm(1, 0, p.blocks(names("P", 4))) == WARM_OK
        assert list(sim.nodes[0].copy_queue) == sim.copies
        for step_wait in (False, True):
            estimates = [
                [(b, f) for b, f, _ in way.estimates_with_hits(sim, asking, None, step_wait)]
                for way in _estimators()
            ]
            assert all(e == estimates[0] for e in estimates)  # the twins agree, to the bit
            seen.append(tuple(x for pair in estimates[0] for x in pair))
        left = work_left_s(sim.nodes[0], sim.now)
        seen.append((left, _causal_landing_s(sim, sim.copies[0], sim.now, 0)))

    config = SimConfig(model_versions=("v1", "v2"), upgrade_at_s=(0.1,), upgrade_downtime_s=0.5)
    sim = Simulator(toy_cluster(2), p.workload(), config, core=core)
    sim.run(Script([1, 0], {1: [warm_then_look]}))
    s = [pytest.approx(x, rel=1e-9) for x in (0.4, 0.448, 0.0, 0.016, 0.432)]
    assert seen == [(s[0], s[1], s[2], s[3])] * 2 + [(s[0], s[4])]
    assert sim.copies[0].land_s == pytest.approx(0.632, rel=1e-12)
    assert sim.records.first_token_s[1] == pytest.approx(0.648 + 64 * HBM_S, rel=1e-12)


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("block_s", [0.008, 0.032])
def test_the_planner_s_clock_counts_a_node_loading_new_weights_busy(
    core: str, block_s: float
) -> None:
    """``oracle_warm``'s and the causal teacher's clock (``catch_up``) and their
    copies' start (``copy_start_s``, the reference copy model) count a node loading
    its new weights busy until they are in, as the forecast does. Node 0 upgrades
    at 0 s and loads until 0.5 s; the causal teacher (``routing=clock``, a 4-block
    prefix recurring at its second arrival). r0 (P and a0, 80 tokens) at 10 ms:
    node 0 is free at 0.5 s, node 1 now, so it goes to node 1 and computes P, first
    token at 90 ms (before, node 0 counted free at 10 ms, the tie went to it, and
    r0 waited for the load: TTFT 0.57 s). r1 (P and b0) at 20 ms: P recurs; a copy
    of P from node 1 (its KV at 90 ms) to node 0 starts when node 0 is free, 0.5 s,
    and lands after 4 blocks of ``block_s``: at 0.532 s with 8 ms a block, sooner
    than node 0 computes P from 0.5 s (0.564 s), so it is copied; at 0.628 s with
    32 ms a block, later, so it is not (before, the copy counted from 90 ms, to
    land at 0.218 s, and was issued). r1 goes to node 1, after r0, its P from HBM:
    first token at 0.106 s plus the HBM read of its 64-token hit."""
    from agents.teacher import CausalTeacher

    p = Prompts()
    p.add(0.010, [*names("P", 4), "a0"])
    p.add(0.020, [*names("P", 4), "b0"])
    config = SimConfig(model_versions=("v1", "v2"), upgrade_at_s=(0.0,), upgrade_downtime_s=0.5)
    cluster = toy_cluster(2, rdma_bw=16 * 1024 / block_s)
    sim = Simulator(cluster, p.workload(), config, core=core)
    teacher = CausalTeacher(min_prefix_tokens=64)
    teacher.run(sim)
    rec = sim.records
    assert list(rec.node) == [1, 1]
    assert list(rec.ttft_s) == [
        pytest.approx(0.080, rel=1e-12),
        pytest.approx(0.086 + 64 * HBM_S, rel=1e-12),
    ]
    copies = [(c.src, c.dst, c.land_s) for c in sim.copies]
    if block_s == 0.008:
        assert copies == [(1, 0, pytest.approx(0.532, rel=1e-12))]
    else:
        assert copies == []
    assert teacher.metrics() == {"teacher_copies_issued": len(copies)}


@pytest.mark.parametrize("core", CORES)
def test_a_copy_moving_under_the_contention_model_counts_the_transfer_latency(
    core: str,
) -> None:
    """Under the contention copy model a copy lands the transfer latency after its
    last byte, so the forecast of a copy moving counts it, in both twins, also
    once its bytes are through and only the latency is left. Latency 2 ms. r0 (P,
    4 blocks) prefills on node 0 from 0 to 64 ms; at 70 ms P is warmed to node 1,
    alone on the NICs: its 65,536 B are through at 102 ms and it lands at 104 ms,
    34 ms from then. At 103 ms 1 ms is left; r2, P and one block more (80
    tokens), routed then to node 1, waits for it and prefills its 16 tokens: first
    token at 120 ms (plus the HBM read of its 64-token hit, which the estimate
    leaves out), 17 ms from then, as forecast (at 70 ms, 34 + 16 = 50 ms)."""
    from envs.sim.forecast import _causal_landing_s

    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(0.070, ["x0"])
    asking = p.add(0.103, [*names("P", 4), "z0"])
    seen: list[tuple[float, ...]] = []

    def look(sim: Simulator) -> None:
        estimates = [way.estimates_with_hits(sim, asking, None)[1] for way in _estimators()]
        assert all(e == estimates[0] for e in estimates)  # the twins agree, to the bit
        seen.append((_causal_landing_s(sim, sim.copies[0], sim.now, 0), estimates[0][1]))

    def warm_then_look(sim: Simulator) -> None:
        assert sim.warm(0, 1, p.blocks(names("P", 4))) == WARM_OK
        look(sim)

    config = SimConfig(copy_model="contention", transfer_latency_s=0.002)
    sim = Simulator(toy_cluster(2), p.workload(), config, core=core)
    sim.run(Script([0, 0, 1], {1: [warm_then_look], 2: [look]}))
    ms = [pytest.approx(x / 1000, rel=1e-9) for x in (34, 50, 1, 17)]
    assert seen == [(ms[0], ms[1]), (ms[2], ms[3])]
    assert sim.copies[0].land_s == pytest.approx(0.104, rel=1e-12)
    assert sim.records.first_token_s[2] == pytest.approx(0.120 + 64 * HBM_S, rel=1e-12)


@pytest.mark.parametrize("core", CORES)
def test_a_copy_waiting_for_its_source_counts_the_transfer_latency(core: str) -> None:
    """A copy waiting for its source starts once the source has computed the
    prefix, and its transfer then takes the latency too (a work item on the target
    under the reference copy model; the last byte and the latency under the
    contention model), so its forecast counts it, in both twins. Latency 2 ms. r0
    (P and a block of its own, 80 tokens) prefills on node 0 from 0 to 80 ms; at
    70 ms P is warmed to node 1 (idle), waiting for r0: it is written there from
    80 to 80 + 2 + 32 = 114 ms, 44 ms from then. r1, P and one block more (80
    tokens), routed then to node 1, waits for it (sooner than 80 ms cold) and
    prefills its 16 tokens: first token at 130 ms (plus the HBM read of its
    64-token hit, which the estimate leaves out), 60 ms from then, as forecast."""
    from envs.sim.forecast import _causal_landing_s

    p = Prompts()
    p.add(0.0, [*names("P", 4), "e0"])
    asking = p.add(0.070, [*names("P", 4), "z0"])
    seen: list[tuple[float, ...]] = []

    def warm_then_look(sim: Simulator) -> None:
        assert sim.warm(0, 1, p.blocks(names("P", 4))) == WARM_OK
        estimates = [way.estimates_with_hits(sim, asking, None)[1] for way in _estimators()]
        assert all(e == estimates[0] for e in estimates)  # the twins agree, to the bit
        # (alone, without the source's own estimate: after its prefill in progress
        # and its queue, here empty)
        alone = _causal_landing_s(sim, sim.copies[0], sim.now, 1)
        seen.append((_causal_landing_s(sim, sim.copies[0], sim.now, 0), alone, estimates[0][1]))

    config = SimConfig(transfer_latency_s=0.002)
    sim = Simulator(toy_cluster(2), p.workload(), config, core=core)
    sim.run(Script([0, 1], {1: [warm_then_look]}))
    ms = [pytest.approx(x / 1000, rel=1e-9) for x in (44, 44, 60)]
    assert seen == [tuple(ms)]
    assert sim.copies[0].land_s == pytest.approx(0.114, rel=1e-12)
    assert sim.records.first_token_s[1] == pytest.approx(0.130 + 64 * HBM_S, rel=1e-12)


@pytest.mark.parametrize("core", CORES)
def test_a_slow_copy_not_under_way_is_forecast_at_full_speed(core: str) -> None:
    """A copy's slowdown (``fault_copy_slow_prob``, drawn at its issue) is unseen
    until it moves: a copy queued on its target, or waiting for its source, is
    forecast at full speed, its own bytes and those of each copy queued ahead of
    it, in both twins and in ``eft_pull``'s count of queued copies
    (``copy_queue_s``), while the simulator takes the slowdown. Every copy 3 times
    slower. Queued: r0 (P, 4 blocks) prefills on node 0 from 0 to 64 ms, r2 (Q, 2
    blocks) there from 64 to 96 ms; r1 (256 tokens) on node 1 from 0 to 256 ms.
    At 100 ms P then Q are warmed to node 1, queued behind r1 (156 ms left):
    forecast at full speed, P lands in 156 + 32 = 188 ms, Q in 188 + 16 = 204 ms,
    the two queued 32 + 16 = 48 ms; a request of P and one block more (80
    tokens) would have its first token on node 1 16 ms after P lands, 204 ms
    (sooner than cold after the node's backlog, 156 + 80 = 236 ms). They are
    slow: P is written from 256 to 256 + 96 = 352 ms, Q to 352 + 48 = 400 ms.
    Waiting: r0 (P and a block of its own, 80 tokens) prefills on node 0 from 0
    to 80 ms; at 70 ms P is warmed to node 1, idle: forecast to land in 10 + 32 =
    42 ms (the request's first token there in 58 ms, not 80 cold), it is written
    from 80 to 176 ms."""
    from envs.sim.forecast import _causal_landing_s, copy_queue_s

    config = SimConfig(fault_copy_slow_prob=1.0, fault_copy_slowdown=3.0)
    p, asking = _two_copies_behind_a_prefill()
    seen: list[tuple[float, ...]] = []

    def look(sim: Simulator, node: int) -> None:
        estimates = [way.estimates_with_hits(sim, asking, None)[node] for way in _estimators()]
        assert all(e == estimates[0] for e in estimates)  # the twins agree, to the bit
        landing = tuple(_causal_landing_s(sim, copy, sim.now, 0) for copy in sim.copies)
        seen.append((*landing, estimates[0][1]))

    def warm_two_then_look(sim: Simulator) -> None:
        assert sim.warm(0, 1, p.blocks(names("P", 4))) == WARM_OK
        assert sim.warm(0, 1, p.blocks(names("Q", 2))) == WARM_OK
        assert list(sim.nodes[1].copy_queue) == sim.copies
        look(sim, 1)
        seen.append((copy_queue_s(sim.nodes[1], sim.config.transfer_latency_s),))

    sim = Simulator(toy_cluster(2), p.workload(), config, core=core)
    sim.run(Script([0, 1, 0, 0, 0], {3: [warm_two_then_look]}))
    assert [copy.slowdown for copy in sim.copies] == [3.0, 3.0]
    assert [copy.land_s for copy in sim.copies] == [
        pytest.approx(x / 1000, rel=1e-9) for x in (352, 400)
    ]

    q = Prompts()
    q.add(0.0, [*names("P", 4), "e0"])
    q.add(0.070, ["x0"])

    def warm_one_then_look(sim: Simulator) -> None:
        assert sim.warm(0, 1, q.blocks(names("P", 4))) == WARM_OK
        look(sim, 1)

    asking = q.add(1.0, [*names("P", 4), "z0"])
    later = Simulator(toy_cluster(2), q.workload(), config, core=core)
    later.run(Script([0, 0, 0], {1: [warm_one_then_look]}))
    assert later.copies[0].land_s == pytest.approx(0.176, rel=1e-12)
    ms = [pytest.approx(x / 1000, rel=1e-9) for x in (188, 204, 204, 48, 42, 58)]
    assert seen == [tuple(ms[:3]), (ms[3],), tuple(ms[4:])]


@pytest.mark.parametrize("core", CORES)
def test_step_wait_adds_nothing_for_a_node_prefilling_from_a_step_run_past_an_arrival(
    core: str,
) -> None:
    """Under decode overshoot a node's last decode step, run past an arrival, ends
    later than now (``free_s``) and the request routed then starts its prefill at
    that end: the wait until ``free_s`` is in the node's work left. ``step_wait``
    (the rest of a decode step) adds nothing for a node that is prefilling: it
    waits for no step, in both twins. r0 (16 tokens, 3 output tokens) prefills on
    node 0 from 0 to 16 ms, then decodes 2 steps, to E = 16 + 2 + 33 x 1.024e-6 ms
    (18.000033792 ms; 1 ms a step and its KV read, 16 then 17 tokens). r1 (32
    tokens) arrives at 17.1 ms, inside the last step: the step ends first, and r1
    prefills from E to E + 32 ms. At 17.2 ms r2 (16 tokens) would wait for r1, then
    prefill: first token at E + 48 ms, 48.800033792 ms from now (backlog
    32.800033792 ms), and so it comes, routed there."""
    p = Prompts()
    p.add(0.0, ["a0"], output_tokens=3)
    p.add(0.0171, ["b0", "b1"])
    asking = p.add(0.0172, ["c0"])
    seen: list[tuple[float, ...]] = []

    def look(sim: Simulator) -> None:
        for step_wait in (False, True):
            estimates = [
                way.estimates_with_hits(sim, asking, None, step_wait)[0] for way in _estimators()
            ]
            assert all(e == estimates[0] for e in estimates)  # the twins agree, to the bit
            seen.append(estimates[0][:2])

    config = SimConfig(decode_overshoot=True)
    sim = Simulator(toy_cluster(2), p.workload(), config, core=core)
    sim.run(Script([0, 0, 0], {2: [look]}))
    end = 0.016 + 0.002 + 33 * 1.024e-9
    rec = sim.records
    assert (rec.admit_s[1], rec.admit_s[2]) == (
        pytest.approx(end, rel=1e-12),
        pytest.approx(end + 0.032, rel=1e-12),
    )
    assert rec.first_token_s[2] == pytest.approx(end + 0.048, rel=1e-12)
    expected = (
        pytest.approx(end + 0.032 - 0.0172, rel=1e-9),
        pytest.approx(end + 0.048 - 0.0172, rel=1e-9),
    )
    assert seen == [expected, expected]


@pytest.mark.parametrize("core", CORES)
def test_a_copy_waiting_for_a_source_busy_copying_counts_the_source_s_work_left(
    core: str,
) -> None:
    """The fallback estimate for a copy waiting for its source (the prefix is not
    among the source's coming keys) counts the source's work left as
    ``work_left_s`` does, whatever the source is doing, in both twins (before: only
    while it prefilled). r0 (Q, 4 blocks) prefills on node 1 from 0 to 64 ms; at
    1 ms Q is warmed from node 1 to node 0, written on node 0 from 64 to 96 ms. r2
    (P, 4 blocks, and a0) queues on node 0 at 70 ms behind that copy. At 80 ms the
    first 2 blocks of P are warmed from node 0 to node 1: a 2-block prefix is no
    key of node 0's queue (r2's is the 4-block one), so its landing is the
    fallback: node 0's 16 ms of copy left, its recent mean prefill (0: it has
    prefilled nothing) per queued request, and 2 blocks over node 1's link
    (16 ms): 32 ms (before: 16 ms). A request of those 2 blocks and one more
    (48 tokens) on node 1 (idle) would wait for them (32 ms) and prefill its 16
    own tokens: 48 ms, as cold."""
    from envs.sim.forecast import _causal_landing_s

    p = Prompts()
    p.add(0.0, names("Q", 4))
    p.add(0.001, ["x0"])
    p.add(0.070, [*names("P", 4), "a0"])
    p.add(0.080, ["y0"])
    asking = p.add(0.5, [*names("P", 2), "z0"])
    seen: list[tuple[float, ...]] = []

    def warm_q(sim: Simulator) -> None:
        assert sim.warm(1, 0, p.blocks(names("Q", 4))) == WARM_OK

    def warm_then_look(sim: Simulator) -> None:
        assert sim.nodes[0].work == COPY and list(sim.nodes[0].queue)
        assert sim.warm(0, 1, p.blocks(names("P", 2))) == WARM_OK
        estimates = [
            [(b, f) for b, f, _ in way.estimates_with_hits(sim, asking, None)]
            for way in _estimators()
        ]
        assert all(e == estimates[0] for e in estimates)  # the twins agree, to the bit
        seen.append((_causal_landing_s(sim, sim.copies[1], sim.now, 0), estimates[0][1][1]))

    sim = Simulator(toy_cluster(2), p.workload(), core=core)
    sim.run(Script([1, 1, 0, 1, 1], {1: [warm_q], 3: [warm_then_look]}))
    assert seen == [(pytest.approx(0.032, rel=1e-9), pytest.approx(0.048, rel=1e-9))]


@pytest.mark.parametrize("core", CORES)
def test_the_planner_s_clock_keeps_work_routed_to_a_node_while_it_drains(core: str) -> None:
    """A request routed to a node while it drains waits in its queue through the
    drain and the load of its new weights: ``catch_up`` lifts the node's clock to
    when its weights are in plus that queued work (the forecast's backlog), not to
    then alone (before: r2's prefill dropped from the clock). ``oracle_warm``,
    prefill 1 ms a token. r0 (64 tokens, 200 output tokens) on node 0 from 0 s;
    r1 (800 tokens) on node 1, prefill until 0.801 s. Node 0 upgrades at 0.1 s and
    drains while r0 decodes; r2 (64 tokens) at 0.2 s goes to node 0 (decoding:
    free by the clock at once). r0 ends, node 0 switches and loads until ``free_s``
    (about 0.763 s). r3 (64 tokens) at 0.3 s: on node 0 after r2, at free_s +
    0.128 s (0.891 s); on node 1 at 0.801 + 0.064 = 0.865 s, sooner, so it goes
    there (before: node 0's clock said free_s, r3 went there, first token at
    0.891 s)."""
    from baselines.oracle import OracleWarm

    p = Prompts()
    p.add(0.0, names("a", 4), output_tokens=200)
    p.add(0.001, names("b", 50))
    p.add(0.2, names("c", 4))
    p.add(0.3, names("d", 4))
    config = SimConfig(upgrade_at_s=(0.1,), upgrade_downtime_s=0.5)
    sim = Simulator(toy_cluster(2), p.workload(), config, core=core)
    policy = OracleWarm(min_prefix_tokens=64)
    sim.run(policy)
    loaded = sim.nodes[0].free_s  # r0's last decode step, plus 0.5 s
    assert 0.7 < loaded < 0.8
    assert list(sim.records.node) == [0, 1, 0, 1]
    assert list(sim.records.first_token_s) == [
        pytest.approx(0.064, rel=1e-12),
        pytest.approx(0.801, rel=1e-12),
        pytest.approx(loaded + 0.064, rel=1e-12),
        pytest.approx(0.865, rel=1e-12),
    ]


@pytest.mark.parametrize("core", CORES)
def test_a_draining_node_is_not_eligible_by_the_first_token_forecast(core: str) -> None:
    """A node draining for an upgrade admits nothing until it has drained, switched
    and loaded its new weights, so the forecast gives it no finite first token
    (backlog and first token ``inf``, in both twins) and ``eft`` sends a request
    elsewhere. r0 (64 tokens, 200 output tokens) on node 0 from 0 s; r1 (256
    tokens) on node 1, prefill until 0.257 s. Node 0 upgrades at 0.1 s and drains
    while r0 decodes (until about 0.263 s), then loads for 0.5 s. r2 (64 tokens)
    at 0.2 s: node 0 is decoding, a backlog of 0 by the forecast before; it went
    there and waited for the drain and the load (first token at about 0.827 s).
    Now it goes to node 1: first token at 0.257 + 0.064 = 0.321 s."""
    from baselines.routers import EarliestFirstToken

    p = Prompts()
    p.add(0.0, names("a", 4), output_tokens=200)
    p.add(0.001, names("b", 16))
    asking = p.add(0.2, names("c", 4))
    seen: list[list[tuple[float, float]]] = []

    class Looking(EarliestFirstToken):
        def decide(self, sim: Simulator, request: Request) -> int:
            if request.index == asking.index:
                assert sim.nodes[0].draining
                estimates = [
                    [(b, f) for b, f, _ in way.estimates_with_hits(sim, asking, None)]
                    for way in _estimators()
                ]
                assert all(e == estimates[0] for e in estimates)  # the twins agree
                seen.append(estimates[0])
            return super().decide(sim, request)

    config = SimConfig(upgrade_at_s=(0.1,), upgrade_downtime_s=0.5)
    sim = Simulator(toy_cluster(2), p.workload(), config, core=core)
    sim.run(Looking())
    inf = float("inf")
    assert seen == [[(inf, inf), (pytest.approx(0.057, rel=1e-9), pytest.approx(0.121, rel=1e-9))]]
    assert list(sim.records.node) == [0, 1, 1]
    assert sim.records.first_token_s[2] == pytest.approx(0.321, rel=1e-12)
