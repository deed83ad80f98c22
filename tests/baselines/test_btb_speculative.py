"""btb_speculative: BTB as published, except that an active prefix no node holds
is speculated on idle nodes instead of waiting for a source to copy from."""

from __future__ import annotations

import numpy as np
import pytest
from statekit import BT, cluster_state, prefix, request

from baselines import BTB, BTBSpeculative, make_policy
from envs.sim import ClusterSpec, Simulator
from envs.sim.node import SPECULATE
from envs.sim.request import Workload
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

HOT = prefix(8)


def _fire(policy: BTB, sim: Simulator) -> list[int]:
    """Two arrivals of HOT 0.1 s apart (X = 2 fires on the second); the nodes chosen."""
    policy.reset(sim)
    chosen = []
    for i, t in enumerate([0.0, 0.1]):
        sim.now = t
        chosen.append(policy.decide(sim, request((*HOT, 500 + i), arrival_s=t, index=i)))
    return chosen


def test_a_sourceless_active_prefix_is_speculated_on_the_idle_nodes() -> None:
    # node 0 runs 3 requests, node 2 has one queued: only nodes 1 and 3 are idle
    sim = cluster_state([3, 0, 1, 0], waiting=[0, 0, 1, 0])
    _fire(BTBSpeculative(x=2, y_tokens=8 * BT, m=4), sim)
    assert sim.copies == []
    assert sim.speculation is not None
    assert [sim.speculation.pending(n) for n in sim.nodes] == [0, 1, 0, 1]
    assert [n.work == SPECULATE for n in sim.nodes] == [False, True, False, True]
    # published BTB does nothing here: nothing to copy from
    plain = cluster_state([3, 0, 1, 0], waiting=[0, 0, 1, 0])
    _fire(BTB(x=2, y_tokens=8 * BT, m=4), plain)
    assert plain.copies == [] and plain.speculation is None


def test_speculating_nodes_count_among_the_m() -> None:
    sim = cluster_state([0, 0, 0, 0])
    policy = BTBSpeculative(x=2, y_tokens=8 * BT, m=2)
    _fire(policy, sim)
    assert sim.speculation is not None
    assert [sim.speculation.pending(n) for n in sim.nodes] == [1, 1, 0, 0]
    # a third arrival asks for nothing more: two nodes already speculate HOT
    sim.now = 0.2
    policy.decide(sim, request((*HOT, 999), arrival_s=0.2, index=2))
    assert sim.speculation.accepted == 2
    assert sum(sim.speculation.refused.values()) == 0


def test_with_a_source_it_copies_exactly_as_btb() -> None:
    speculative = cluster_state([3, 7, 1, 4], cached=[HOT, [], [], []])
    plain = cluster_state([3, 7, 1, 4], cached=[HOT, [], [], []])
    assert _fire(BTBSpeculative(x=2, y_tokens=8 * BT, m=3), speculative) == _fire(
        BTB(x=2, y_tokens=8 * BT, m=3), plain
    )
    assert [(c.src, c.dst) for c in speculative.copies] == [(c.src, c.dst) for c in plain.copies]
    assert speculative.speculation is None


def _three_requests(policy_name: str) -> Simulator:
    """r0 at 0 and r1 at 0.010 fire HOT16 (16 blocks, 4,096 tokens) on three
    llama-70b nodes; r2 follows at 0.200. Each prompt is HOT16 plus one own block."""
    hot = prefix(16)
    requests = [
        request((*hot, 700 + i), arrival_s=t, index=i) for i, t in enumerate([0.0, 0.010, 0.200])
    ]
    cluster = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 3)
    sim = Simulator(cluster, Workload("three", BT, requests), rng=np.random.default_rng(3))
    make_policy(policy_name, x=2, y_tokens=16 * BT).run(sim)
    return sim


def test_a_follower_reuses_what_an_idle_node_speculated() -> None:
    """r0 goes to a node (cache_aware, all cold). r1 fires BTB with no source: the
    two idle nodes start speculating HOT16 in 2,048-token chunks at 0.010 s, and
    r1 goes to one of them. By 0.200 s both have finished chunk 1 (0.010 + c, c =
    2,048 tokens of prefill); r2 goes to the one without a request (longest match,
    then load), waits for its chunk 2 (ends 0.010 + 2c), reuses all 4,096 tokens
    and prefills its own 256. Published BTB sends r2 to the idle node cold: it
    prefills all 4,352 tokens."""
    sim = _three_requests("btb_speculative")
    costs = sim.nodes[0].costs
    chunk_s = costs.prefill_s(2048, 0)
    rec = sim.records
    assert len({int(n) for n in rec.node}) == 3
    assert rec.admit_s[2] == pytest.approx(0.010 + 2 * chunk_s)
    assert rec.hit_hbm_tokens[2] == 4096
    expected = 0.010 + 2 * chunk_s - 0.200 + costs.load_s(4096, "hbm") + costs.prefill_s(256, 4096)
    assert rec.ttft_s[2] == pytest.approx(expected, rel=1e-9)
    # r1 waited for the first chunk on its node and reused it
    assert rec.admit_s[1] == pytest.approx(0.010 + chunk_s)
    assert rec.hit_hbm_tokens[1] == 2048
    summary = rec.summary
    assert summary["speculative_chunks"] == 3  # two on r2's node, one on r1's
    assert summary["speculative_used_chunks"] == 3
    assert summary["speculative_wasted_s"] == 0.0
    plain = _three_requests("btb")
    assert plain.records.ttft_s[2] == pytest.approx(costs.prefill_s(4352, 0), rel=1e-9)
    assert rec.ttft_s[2] < 0.5 * plain.records.ttft_s[2]


def test_inert_without_repeated_long_prefixes() -> None:
    """No prefix recurs within Z: btb_speculative is btb, request for request."""
    config = BurstedSyntheticConfig(
        n_bursts=0, burst_requests=0, n_decoys=10, prefix_tokens=4096, suffix_tokens=256
    )
    window = synthetic_window(config, window=0, seed=3)
    cluster = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 4)
    runs = []
    for name in ("btb", "btb_speculative"):
        sim = Simulator(cluster, window, rng=np.random.default_rng(0))
        runs.append(make_policy(name).run(sim))
    np.testing.assert_array_equal(runs[0].ttft_s, runs[1].ttft_s)
    assert runs[1].summary["speculative_accepted"] == 0
