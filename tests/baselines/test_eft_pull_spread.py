"""``eft_pull_spread`` (``eft_pull`` that opens an idle node to a burst whose prefix
is still being computed) on short runs of qwen3-8b and llama-3.3-70b clusters,
its rule's terms worked out from the cost model."""

from __future__ import annotations

import numpy as np
import pytest
from statekit import BT, prefix, request

from baselines import make_policy
from envs.sim import SimConfig, Simulator
from envs.sim.config import setup_cluster
from envs.sim.errors import ConfigError
from envs.sim.request import Workload

HOT = prefix(256)  # 65,536 tokens


def burst(gap_s: float, n: int, start_s: float = 0.0) -> list:  # type: ignore[type-arg]
    """``n`` requests of HOT plus one block of their own, ``gap_s`` apart."""
    return [request((*HOT, 10_000 + k), arrival_s=start_s + k * gap_s, index=k) for k in range(n)]


def routes(policy: str, setup: str, requests: list, **kwargs: float) -> list[int]:  # type: ignore[type-arg]
    """The node each request was sent to, on a fresh causal-KV simulator."""
    sim = Simulator(
        setup_cluster(setup),
        Workload("w", BT, requests),
        SimConfig(),
        np.random.default_rng(0),
    )
    records = make_policy(policy, **kwargs).run(sim)
    assert not np.isnan(records.first_token_s).any()  # every request served
    return list(records.node)


def rule_terms(setup: str, gap_s: float, k: int) -> tuple[float, float, float]:
    """For the ``k``-th request of a burst (``k x gap_s`` after the first, which
    computes HOT cold on node 0 from 0 s): (the queued work the rule expects, the
    cold prefill on an idle node, its soonest estimate behind node 0), from the cost
    model. The estimate leaves out the HBM read of HOT; the rule's work counts it."""
    costs = (
        Simulator(
            setup_cluster(setup), Workload("w", BT, []), SimConfig(), np.random.default_rng(0)
        )
        .nodes[0]
        .costs
    )
    cold = costs.prefill_s(257 * BT, 0)
    own = costs.prefill_s(BT, 256 * BT)
    behind = cold - k * gap_s + own
    return behind / gap_s * (own + 256 * BT * costs.load_hbm_s), cold, behind


def test_a_fast_burst_opens_the_idle_nodes_where_eft_pull_piles_it_on_two() -> None:
    # qwen3-8b, a follower every 2 ms, 0.54 s to compute HOT cold. The second request
    # goes cold to node 1 either way (sooner than behind node 0); the third expects
    # its first token behind node 0 a little sooner than cold on idle node 2, and
    # about 0.77 s of queued work before HOT is ready, against a 0.54 s cold prefill
    expected, cold, behind = rule_terms("qwen3_8b_h100x4", 0.002, 2)
    assert behind < cold <= 1.05 * behind
    assert expected == pytest.approx(0.7713, abs=1e-4)
    assert expected > cold
    assert routes("eft_pull", "qwen3_8b_h100x4", burst(0.002, 4)) == [0, 1, 0, 1]
    assert routes("eft_pull_spread", "qwen3_8b_h100x4", burst(0.002, 4)) == [0, 1, 2, 3]


def test_the_prefix_s_hbm_read_counts_in_the_expected_work() -> None:
    # a follower every 2.5 ms: the second request expects 0.619 s of queued work with
    # HOT's HBM read counted (above the 0.545 s cold prefill), 0.462 s without it
    expected, cold, behind = rule_terms("qwen3_8b_h100x4", 0.0025, 1)
    costs = (
        Simulator(
            setup_cluster("qwen3_8b_h100x4"),
            Workload("w", BT, []),
            SimConfig(),
            np.random.default_rng(0),
        )
        .nodes[0]
        .costs
    )
    without_read = behind / 0.0025 * costs.prefill_s(BT, 256 * BT)
    assert without_read < cold < expected
    assert expected == pytest.approx(0.6187, abs=1e-4)
    assert routes("eft_pull", "qwen3_8b_h100x4", burst(0.0025, 4)) == [0, 0, 0, 0]
    assert routes("eft_pull_spread", "qwen3_8b_h100x4", burst(0.0025, 4)) == [0, 1, 2, 3]


def test_the_margin_bounds_what_a_request_gives_up_for_the_idle_node() -> None:
    # with no margin the third request keeps its soonest estimate (node 0's queue)
    spread = routes("eft_pull_spread", "qwen3_8b_h100x4", burst(0.002, 4), margin=0.0)
    assert spread == [0, 1, 0, 1]


def test_a_slow_burst_is_left_to_eft_pull() -> None:
    # llama-3.3-70b, a follower every 0.12 s (the 60 s bursts), 4.7 s to compute HOT:
    # the second request expects about 0.76 s of queued work, far below a cold prefill
    expected, cold, behind = rule_terms("70b_h100x4", 0.12, 1)
    assert behind < cold
    assert expected == pytest.approx(0.7611, abs=1e-4)
    assert expected < 0.2 * cold
    requests = burst(0.12, 40)
    spread = routes("eft_pull_spread", "70b_h100x4", requests)
    assert spread == routes("eft_pull", "70b_h100x4", requests)


def test_a_prefix_held_in_hbm_is_left_to_eft_pull() -> None:
    # the first request computes HOT by 0.55 s; 150 more arrive from 1 s, 0.2 ms apart
    requests = [request((*HOT, 9_999), arrival_s=0.0, index=0)] + [
        request((*HOT, 10_000 + k), arrival_s=1.0 + k * 0.0002, index=k + 1) for k in range(150)
    ]
    spread = routes("eft_pull_spread", "qwen3_8b_h100x4", requests)
    assert spread == routes("eft_pull", "qwen3_8b_h100x4", requests)
    assert len(set(spread)) > 1  # eft_pull's copies open the other nodes there


def test_a_negative_margin_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"eft_pull_spread\.margin"):
        make_policy("eft_pull_spread", margin=-0.1)
