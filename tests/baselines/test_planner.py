"""The warming planner shared by oracle_warm and the causal teacher (baselines/planner.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from agents.teacher import CausalTeacher
from baselines import OracleWarm
from baselines.planner import WarmPlanner
from envs.sim import ClusterSpec, SimConfig, Simulator, setup_cluster
from envs.sim.request import Request, Workload
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window
from tests.baselines.statekit import BT, request

PREFIX = tuple(range(1, 17))  # 16 blocks = 4,096 tokens, the planners' minimum prefix
# llama-70b on 4xH100: 2 x 70.6e9 FLOP a token / (4 x 989e12 x 0.5) = 71.39 us a token
TOKEN_S = 2 * 70.6e9 / (4 * 989e12 * 0.5)


def _run(policy: WarmPlanner, arrivals: list[float]) -> Simulator:
    """Requests ``PREFIX`` + a block of their own, arriving at ``arrivals``."""
    requests = [request((*PREFIX, 100 + i), t, i) for i, t in enumerate(arrivals)]
    cluster = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 4)
    sim = Simulator(cluster, Workload("hand", BT, requests), SimConfig(), np.random.default_rng(0))
    policy.run(sim)
    return sim


def test_no_copy_to_a_node_that_computes_the_prefix_sooner_than_the_copy_lands() -> None:
    # r0 (t=0) computes the prefix on node 0 by 17 x 256 x 71.39 us = 0.3107 s.
    # r1 (t=0.01) makes it recur (2 arrivals in 10 s). A copy from node 0 would
    # land at 0.3107 + 4,096 x 320 KiB / (4 x 50e9 B/s) = 0.3107 + 0.0067 s, an
    # idle node computes the prefix by 0.01 + 4,096 x 71.39 us = 0.3024 s: no
    # copy; r1 computes it on node 1. r2 (t=0.35) finds it on nodes 0 and 1, and
    # a copy to an idle node lands 6.7 ms later: copies from node 0 to 2 and 3.
    # r2 runs on node 0: its prefix from HBM, 4,096 x 320 KiB / (4 x 3.35e12 B/s)
    # = 0.1 ms, and its own block, 256 x 71.39 us.
    sim = _run(CausalTeacher(), [0.0, 0.01, 0.35])
    assert [(c.src, c.dst) for c in sim.copies] == [(0, 2), (0, 3)]
    assert list(sim.records.node) == [0, 1, 0]
    full_s = 17 * BT * TOKEN_S
    hit_s = 16 * BT * 327_680 / (4 * 3.35e12) + BT * TOKEN_S
    assert sim.records.ttft_s == pytest.approx([full_s, full_s, hit_s], rel=1e-6)


def test_the_predicate_says_how_many_nodes_want_the_prefix() -> None:
    # Same arrivals, the oracle's predicate: r2 is the prefix's last user, so
    # nothing is copied for it (the causal teacher copies to every node).
    sim = _run(OracleWarm(), [0.0, 0.01, 0.35])
    assert sim.copies == [] and list(sim.records.node) == [0, 1, 0]


def test_the_teacher_is_causal_and_the_oracle_is_not() -> None:
    window = synthetic_window(
        BurstedSyntheticConfig(n_bursts=2, burst_requests=20, n_decoys=4, burst_window_s=4.0), 2
    )

    def decisions(policy: WarmPlanner, cut: int, whole: bool) -> tuple[list[int], list[tuple]]:
        """The first ``cut`` requests' nodes and the copies issued before the next
        arrival, in a run of the whole window or of those ``cut`` requests only."""
        requests = window.requests if whole else window.requests[:cut]
        sim = Simulator(
            setup_cluster("70b_h100x4"),
            Workload("w", window.block_tokens, requests),
            SimConfig(),
            np.random.default_rng(0),
        )
        policy.run(sim)
        until_s = window.requests[cut].arrival_s
        copies = [(c.src, c.dst, c.key) for c in sim.copies if c.issued_s < until_s]
        return list(sim.records.node[:cut]), copies

    for cut in (1, 18, 30):  # before, inside and after the first burst's (0-19) end
        assert decisions(CausalTeacher(), cut, False) == decisions(CausalTeacher(), cut, True)
    # The oracle warms at the burst's second request (at the first, a node would
    # compute the 65,536-token prefix sooner than a copy lands), because it knows
    # more are coming; with those two requests alone it copies nothing.
    alone, whole = decisions(OracleWarm(), 2, False), decisions(OracleWarm(), 2, True)
    assert alone[1] == [] and len(whole[1]) == 3


def test_planner_settings_are_named_by_their_policy() -> None:
    with pytest.raises(ValueError, match=r"^causal_teacher\.min_prefix_tokens must be"):
        CausalTeacher(min_prefix_tokens=0)
    with pytest.raises(ValueError, match=r"^oracle_warm\.min_prefix_tokens must be"):
        OracleWarm(min_prefix_tokens=0)


def test_the_backlog_teacher_times_by_its_clock_while_every_node_drains() -> None:
    """Under ``routing=backlog`` a request arriving while every node up drains for an
    upgrade has first token ``inf`` on each (none eligible): the teacher then chooses
    and times it by its planner clock, which stays finite (it took ``inf`` from the
    forecast, and kept it until both nodes were idle again). Two nodes each decode a
    4-block request from 0 s (400 output tokens, past 0.23 s) and drain from 0.1 s
    (0.5 s of weights); 6-block requests arrive at 0.2, 0.21, 0.22 and 0.23 s, a
    prefill of P = 1,536 x 71.39 us = 0.109648 s each. The clock catches a decoding
    node up to now: r2 starts at 0.2 on either (ties by load, then index: node 0),
    r3 at 0.21 on node 1 (node 0 is at 0.2 + P), r4 after r2 on node 0 (0.2 + P
    against 0.21 + P) and r5 after r3 on node 1. The oracle's clock is finite too."""
    clocks: list[list[float]] = []

    class Probe(CausalTeacher):
        def decide(self, sim, request):  # type: ignore[no-untyped-def]
            choice = super().decide(sim, request)
            clocks.append(list(self._free_at))
            return choice

    class OracleProbe(OracleWarm):
        def decide(self, sim, request):  # type: ignore[no-untyped-def]
            choice = super().decide(sim, request)
            assert all(np.isfinite(self._free_at))
            return choice

    def decoding(blocks: range, index: int) -> Request:
        return replace(request(blocks, 0.0, index), output_tokens=400)

    requests = [decoding(range(1, 5), 0), decoding(range(11, 15), 1)]
    requests += [request(range(100 + 10 * k, 106 + 10 * k), 0.2 + k / 100, 2 + k) for k in range(4)]
    cluster = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 2)
    upgrade = SimConfig(upgrade_at_s=(0.1, 0.1), upgrade_downtime_s=0.5)
    runs = []
    for policy in (Probe(routing="backlog"), OracleProbe()):
        sim = Simulator(cluster, Workload("hand", BT, requests), upgrade, np.random.default_rng(0))
        policy.run(sim)
        runs.append(sim)
    p = 6 * BT * TOKEN_S
    expected = [0.2 + p, 0.2, 0.2 + p, 0.21 + p, 0.2 + 2 * p, 0.21 + p, 0.2 + 2 * p, 0.21 + 2 * p]
    assert [t for clock in clocks[2:] for t in clock] == pytest.approx(expected, rel=1e-9)
    sim = runs[0]
    assert list(sim.records.node) == [0, 1, 0, 1, 0, 1]
    # each node takes its queue once drained (its decode done), switched and loaded
    ready = [sim.records.finish_s[i] + 0.5 for i in (0, 1)]
    firsts = [ready[0] + p, ready[1] + p, ready[0] + 2 * p, ready[1] + 2 * p]
    assert list(sim.records.ttft_s[2:]) == pytest.approx(
        [f - 0.2 - k / 100 for k, f in enumerate(firsts)], rel=1e-9
    )
