"""Every documented observation feature against figures worked out by hand, on the
toy cluster of ``tests/sim/simkit.py`` (two nodes; prefill 1 ms a token, an RDMA
copy 0.5 ms a token, 16-token blocks, a decode step 1 ms plus 1.024 ns a KV token
read): what the env docstrings' tables say each entry is, normalisation included,
for the compiled node rows and the Python reference alike. The other tests of the
encoder recompute an observation from the simulator's state with the encoder's
own formulas; these start from the physics (docs/physics.md) instead."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from envs.encoder import (
    EPOCH_FEATURES,
    EPOCH_NODE_FEATURES,
    NATIVE,
    NODE_FEATURES,
    REQUEST_FEATURES,
    ObservationEncoder,
)
from envs.route_warm import RouteWarmEnv
from envs.sim import SimConfig, setup_cluster
from envs.sim.timing import NodeCosts
from envs.thresholds import ThresholdsEnv
from tests.sim.simkit import Prompts, decode_s, names, toy_cluster

COMPILED = [
    False,
    pytest.param(
        True, marks=pytest.mark.skipif(NATIVE is None, reason="compiled rows not built or chosen")
    ),
]


def log_s(seconds: float) -> float:
    """The tables' "log seconds": min(log1p(s / 0.01) / log1p(1000 / 0.01), 1)."""
    return min(math.log1p(seconds / 0.01) / math.log1p(1000 / 0.01), 1.0)


def tokens(n: int) -> float:
    """``prefix_tokens``: log1p(tokens) / log1p(262,144)."""
    return math.log1p(n) / math.log1p(262_144)


def observe(
    prompts: Prompts,
    actions: list[list[int]],
    compiled: bool,
    sim: SimConfig | None = None,
    **options: Any,
) -> tuple[list[dict[str, float]], dict[str, float]]:
    """Step ``btb/RouteWarm-v0`` on the toy cluster (simulated with ``sim``) through
    ``actions`` and return the observation of the next arrival, as an encoder of its
    own (``compiled`` or not) built it at every decision: per node {feature: value},
    and the request's."""
    env = RouteWarmEnv(setup=toy_cluster(2), windows=[prompts.workload()], sim=sim, **options)
    encoder = ObservationEncoder(2, compiled=compiled, **options)
    obs, _ = env.reset(seed=0)
    encoder.reset()
    mine = encoder.encode(env.sim, env.request).copy()
    for action in actions:
        assert np.array_equal(mine, obs)  # the env's own encoder says the same
        obs, _, done, _, info = env.step(np.array(action))
        assert not done and info["invalid_actions"] == 0
        mine = encoder.encode(env.sim, env.request).copy()
    assert np.array_equal(mine, obs)
    width = len(NODE_FEATURES)
    nodes = [dict(zip(NODE_FEATURES, mine[j * width : (j + 1) * width].tolist())) for j in (0, 1)]
    return nodes, dict(zip(REQUEST_FEATURES, mine[2 * width :].tolist()))


def check(got: dict[str, float], expected: dict[str, float]) -> None:
    assert set(got) == set(expected)
    for name, value in expected.items():  # float32 entries of float64 figures
        assert got[name] == pytest.approx(value, rel=1e-6, abs=1e-7), name


@pytest.mark.parametrize("compiled", COMPILED)
def test_a_prefix_being_computed_and_an_idle_node(compiled: bool) -> None:
    """r0 (4 blocks, 64 tokens) starts its 64 ms prefill on node 0 at 0; r1 shares
    its first 3 blocks and arrives at 10 ms. Node 0 will have the 48-token prefix
    in 54 ms and prefill r1's 16 own tokens after it (70 ms); node 1 computes all
    64 (64 ms)."""
    p = Prompts()
    p.add(0.0, names("a", 4))
    p.add(0.010, [*names("a", 3), "b0"])
    nodes, request = observe(p, [[0, 0, 0, 0]], compiled)
    check(
        nodes[0],
        {
            "load": 1 / 17,
            "wait": 0.054 / 1.054,
            "kv_used": 65 / 1024,  # 64 prompt + 1 output token reserved
            "copies_in": 0.0,
            "hit": 0.0,  # causal KV: nothing exists before the prefill ends
            "prefix_in_flight": 0.0,
            "busy": 1.0,
            "backlog": log_s(0.054),
            "first_token": log_s(0.070),
            "first_token_gap": log_s(0.006),
        },
    )
    check(
        nodes[1],
        {
            **dict.fromkeys(NODE_FEATURES, 0.0),
            "first_token": log_s(0.064),
        },
    )
    check(
        request,
        {
            "prefix_tokens": tokens(64),
            "same_1s": 2 / 6,  # r0 and r1 share the prefix; this arrival counts
            "same_10s": 2 / 18,
            "same_60s": 2 / 66,
            "age": 0.010 / 10.010,
            "holders": 0.0,
        },
    )


@pytest.mark.parametrize("compiled", COMPILED)
def test_a_hit_in_hbm(compiled: bool) -> None:
    """r1 arrives at 100 ms, after r0's prefill (done at 64 ms) left a0..a3 on node 0:
    3 of r1's 4 blocks hit there, 16 tokens to compute (16 ms)."""
    p = Prompts()
    p.add(0.0, names("a", 4))
    p.add(0.1, [*names("a", 3), "b0"])
    nodes, request = observe(p, [[0, 0, 0, 0]], compiled)
    check(nodes[0], {**dict.fromkeys(NODE_FEATURES, 0.0), "hit": 0.75, "first_token": log_s(0.016)})
    check(
        nodes[1],
        {
            **dict.fromkeys(NODE_FEATURES, 0.0),
            "first_token": log_s(0.064),
            "first_token_gap": log_s(0.048),
        },
    )
    assert request["holders"] == 0.5
    assert request["age"] == pytest.approx(0.1 / 10.1, rel=1e-6)


@pytest.mark.parametrize("compiled", COMPILED)
def test_a_queue_and_its_recent_mean_prefill(compiled: bool) -> None:
    """r0 (64 tokens) prefills on node 0 from 0 to 64 ms; r1 (64 tokens of its own)
    queues behind it at 10 ms; r2 (new) arrives at 20 ms. ``wait`` counts the queued
    request at the node's recent mean prefill (0.2 x r0's 64 ms = 12.8 ms after one
    admission), ``backlog`` at its own cost (64 ms)."""
    p = Prompts()
    p.add(0.0, names("a", 4))
    p.add(0.010, names("d", 4))
    p.add(0.020, names("e", 4))
    nodes, request = observe(p, [[0, 0, 0, 0], [0, 0, 0, 0]], compiled)
    wait = 0.044 + 0.0128
    check(
        nodes[0],
        {
            "load": 2 / 18,
            "wait": wait / (wait + 1),
            "kv_used": 65 / 1024,  # the queued request reserves nothing yet
            "copies_in": 0.0,
            "hit": 0.0,
            "prefix_in_flight": 0.0,
            "busy": 1.0,
            "backlog": log_s(0.044 + 0.064),
            "first_token": log_s(0.044 + 0.064 + 0.064),
            "first_token_gap": log_s(0.044 + 0.064),
        },
    )
    check(request, {**dict.fromkeys(REQUEST_FEATURES, 0.0), "prefix_tokens": tokens(64),
                    "same_1s": 1 / 5, "same_10s": 1 / 17, "same_60s": 1 / 65})  # fmt: skip


@pytest.mark.parametrize("compiled", COMPILED)
def test_a_copy_waiting_for_its_source(compiled: bool) -> None:
    """r0 (8 blocks, 128 tokens) prefills on node 0 from 0 to 128 ms; r1 (its first 7
    blocks and one of its own) queues there at 10 ms with a warm of its 112-token
    prefix onto node 1, which waits for node 0 to compute it (then 56 ms of RDMA).
    r2 (the same prefix) arrives at 80 ms: on node 1 the prefix lands in
    48 + 56 = 104 ms and r2's 16 tokens take 16 ms (120 ms, sooner than 128 cold);
    on node 0 r1's 16 tokens follow r0 (64 ms), then r2's (80 ms)."""
    p = Prompts()
    p.add(0.0, names("a", 8))
    p.add(0.010, [*names("a", 7), "b0"])
    p.add(0.080, [*names("a", 7), "c0"])
    nodes, request = observe(p, [[0, 0, 0, 0], [0, 0, 1, 0]], compiled)
    wait = 0.048 + 0.2 * 0.128
    check(
        nodes[0],
        {
            "load": 2 / 18,
            "wait": wait / (wait + 1),
            "kv_used": 129 / 1024,
            "copies_in": 0.0,
            "hit": 0.0,
            "prefix_in_flight": 0.0,
            "busy": 1.0,
            "backlog": log_s(0.064),
            "first_token": log_s(0.080),
            "first_token_gap": 0.0,
        },
    )
    check(
        nodes[1],
        {
            **dict.fromkeys(NODE_FEATURES, 0.0),
            "copies_in": 0.5,
            "prefix_in_flight": 1.0,
            "first_token": log_s(0.120),
            "first_token_gap": log_s(0.040),
        },
    )
    check(
        request,
        {
            "prefix_tokens": tokens(128),
            "same_1s": 3 / 7,
            "same_10s": 3 / 19,
            "same_60s": 3 / 67,
            "age": 0.080 / 10.080,
            "holders": 0.0,
        },
    )


@pytest.mark.parametrize("compiled", COMPILED)
def test_a_copy_landing_now_counts_from_when_it_lands(compiled: bool) -> None:
    """r0 left a0..a3 on node 0; r1 (at 100 ms, routed there) warms a0..a2 onto
    node 1: 48 tokens, 24 ms of node 1's timeline from 100 ms. r2 (the same prefix)
    arrives at 105 ms: the copy lands in 19 ms, and r2's 16 tokens take 16 ms more
    (35 ms; its actual TTFT when routed there). The docstring: "copies in flight
    ... count from when they will exist"."""
    p = Prompts()
    p.add(0.0, names("a", 4))
    p.add(0.1, [*names("a", 3), "b0"])
    p.add(0.105, [*names("a", 3), "c0"])
    nodes, _ = observe(p, [[0, 0, 0, 0], [0, 0, 1, 0]], compiled)
    assert nodes[1]["busy"] == 1.0 and nodes[1]["prefix_in_flight"] == 1.0
    assert nodes[1]["backlog"] == pytest.approx(log_s(0.019), rel=1e-6)  # the copy's rest
    assert nodes[1]["first_token"] == pytest.approx(log_s(0.035), rel=1e-6)


@pytest.mark.parametrize("compiled", COMPILED)
def test_a_copy_queued_behind_a_prefill_counts_from_when_it_lands(compiled: bool) -> None:
    """r0 leaves a0..a3 on node 0 (64 ms); r1 (256 tokens) prefills on node 1 from 0 to
    256 ms. r2 (at 100 ms, routed to node 0) warms a0..a2 onto node 1: 48 tokens,
    queued behind r1's prefill, written from 256 to 280 ms. r3 (the same prefix)
    arrives at 105 ms: the copy lands in 175 ms and r3's 16 tokens take 16 ms more
    (191 ms, its actual TTFT when routed there); computing it cold after r1 takes 215.
    The docstring: "copies in flight ... count from when they will exist"."""
    p = Prompts()
    p.add(0.0, names("a", 4))
    p.add(0.0, names("f", 16))
    p.add(0.1, [*names("a", 3), "b0"])
    p.add(0.105, [*names("a", 3), "c0"])
    nodes, _ = observe(p, [[0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0]], compiled)
    assert nodes[1]["busy"] == 1.0 and nodes[1]["prefix_in_flight"] == 1.0
    assert nodes[1]["backlog"] == pytest.approx(log_s(0.151), rel=1e-6)  # r1's rest
    assert nodes[1]["first_token"] == pytest.approx(log_s(0.191), rel=1e-6)


@pytest.mark.parametrize("compiled", COMPILED)
@pytest.mark.parametrize("time_unit", ["seconds", "reference"])
@pytest.mark.parametrize("step_wait", [False, True])
def test_step_wait_and_time_unit_on_a_decoding_node(
    compiled: bool, time_unit: str, step_wait: bool
) -> None:
    """r0 (64 tokens, 10 output tokens) prefills on node 0 until 64 ms, then decodes
    its 9 other tokens in one segment of 9 steps (batch 1, 64 KV tokens at its start).
    r1 (new) arrives at 66.5 ms, in the segment's third step, which ends at
    64 ms + decode(3 steps). ``step_wait`` adds that rest of a step to node 0's
    ``backlog`` and ``first_token``; ``time_unit="reference"`` multiplies every
    duration by 70b-on-4xH100's prefill seconds a token over the toy node's (1 ms)."""
    p = Prompts()
    p.add(0.0, names("a", 4), output_tokens=10)
    p.add(0.0665, names("f", 4))
    nodes, request = observe(p, [[0, 0, 0, 0]], compiled, time_unit=time_unit, step_wait=step_wait)
    reference = setup_cluster("70b_h100x4")
    per_token = NodeCosts(reference.nodes[0], reference.model).prefill_s_per_token
    scale = per_token / 1e-3 if time_unit == "reference" else 1.0
    rest = (0.064 + decode_s(3, 1, 64) - 0.0665) if step_wait else 0.0
    wait = (0.064 + decode_s(9, 1, 64) - 0.0665) * scale  # the segment's rest
    check(
        nodes[0],
        {
            "load": 1 / 17,
            "wait": wait / (wait + 1),
            "kv_used": 74 / 1024,
            "copies_in": 0.0,
            "hit": 0.0,
            "prefix_in_flight": 0.0,
            "busy": 1.0,
            "backlog": log_s(rest * scale),
            "first_token": log_s((rest + 0.064) * scale),
            "first_token_gap": log_s(rest * scale),
        },
    )
    check(nodes[1], {**dict.fromkeys(NODE_FEATURES, 0.0), "first_token": log_s(0.064 * scale)})
    # the request's entries stay in the workload's seconds
    check(request, {**dict.fromkeys(REQUEST_FEATURES, 0.0), "prefix_tokens": tokens(64),
                    "same_1s": 1 / 5, "same_10s": 1 / 17, "same_60s": 1 / 65})  # fmt: skip


@pytest.mark.parametrize("compiled", COMPILED)
@pytest.mark.parametrize("upgrade_at_s", [(0.1,), (0.1, 0.1)])
def test_a_draining_node_s_rows_are_at_the_top(
    compiled: bool, upgrade_at_s: tuple[float, ...]
) -> None:
    """A node draining for an upgrade is not eligible by the forecast (backlog and
    first token inf): ``backlog`` and ``first_token`` read 1 there, and
    ``first_token_gap`` 1 where another node is eligible, 0 where none is (never
    NaN). r0 and r1 (64 tokens, 200 output tokens each) prefill on nodes 0 and 1
    from 0 and 1 ms, then decode; node 0 (and node 1) upgrade at 0.1 s and drain.
    r2 (64 tokens) at 0.2 s: an eligible node 1 is decoding (backlog 0), r2's
    first token 64 ms there."""
    p = Prompts()
    p.add(0.0, names("a", 4), output_tokens=200)
    p.add(0.001, names("b", 4), output_tokens=200)
    p.add(0.2, names("c", 4))
    config = SimConfig(upgrade_at_s=upgrade_at_s, upgrade_downtime_s=0.5)
    nodes, _ = observe(p, [[0, 0, 0, 0], [1, 0, 0, 0]], compiled, sim=config)
    both = len(upgrade_at_s) == 2
    got = [{k: row[k] for k in ("backlog", "first_token", "first_token_gap")} for row in nodes]
    assert got[0] == {"backlog": 1.0, "first_token": 1.0, "first_token_gap": 0.0 if both else 1.0}
    if both:
        assert got[1] == got[0]
    else:
        check(got[1], {"backlog": 0.0, "first_token": log_s(0.064), "first_token_gap": 0.0})


@pytest.mark.parametrize("compiled", [True, False])
def test_the_thresholds_epoch_observation(compiled: bool) -> None:
    """Three requests of prefix a0..a2 at 0.1, 0.2 and 0.3 s and one of b at 0.5 s
    fill the first 1 s epoch (0.1 to 1.1 s); the next arrival is at 1.6 s. Every
    prompt is 64 tokens, under any minimum prefix, so BTB never fires and routes
    all four to node 0: r0 and r3 cold, r1 and r2 with 3 of 4 blocks in HBM."""
    p = Prompts()
    for k, t in enumerate((0.1, 0.2, 0.3)):
        p.add(t, [*names("a", 3), f"x{k}"])
    p.add(0.5, names("b", 4))
    p.add(1.6, names("c", 4))
    env = ThresholdsEnv(setup=toy_cluster(2), windows=[p.workload()])
    env.controller.encoder.compiled = compiled
    obs, _ = env.reset(seed=0)
    width = len(EPOCH_NODE_FEATURES)
    first = dict(zip(EPOCH_FEATURES, obs[2 * width :].tolist()))
    # the published constants in force: X=2 of 16, Z=1 s of 8, M=2 of 2 nodes,
    # 65,536 tokens (the largest), the resident rule
    check(
        {k: first[k] for k in ("x", "z", "m", "min_prefix", "pending")},
        {"x": 2 / 16, "z": math.log1p(1) / math.log1p(8), "m": 1.0, "min_prefix": 1.0,
         "pending": 0.0},
    )  # fmt: skip
    obs, _, done, _, info = env.step(np.array([0, 0, 0, 0, 0]))  # X=1, Z=0.25 s, M=1/4, 1,024
    assert not done and info["time_s"] == 1.6
    nodes = [
        dict(zip(EPOCH_NODE_FEATURES, obs[j * width : (j + 1) * width].tolist())) for j in (0, 1)
    ]
    zero = dict.fromkeys(EPOCH_NODE_FEATURES, 0.0)
    check(nodes[0], {**zero, "holds_top": 1.0})  # all served by 1.6 s
    check(nodes[1], zero)
    check(
        dict(zip(EPOCH_FEATURES, obs[2 * width :].tolist())),
        {
            "arrivals": 4 / 20,
            "arrivals_10s": 4 / 68,
            "repeat_fraction": 2 / 4,  # the second and third a's
            "top_prefix_share": 3 / 4,
            "same_1s": 3 / 11,
            "same_10s": 3 / 35,
            "top_prefix_tokens": tokens(64),
            "hbm_hit": (0 + 0.75 + 0.75 + 0) / 4,
            "copies": 0.0,
            "copies_in_flight": 0.0,
            "queued": 0.0,
            "gap": 0.5 / 10.5,  # 1.6 s less the epoch's end, 1.1 s
            "x": 1 / 16,
            "z": math.log1p(0.25) / math.log1p(8),
            "m": 1 / 2,  # a quarter of 2 nodes, rounded up
            "min_prefix": math.log1p(1024 / 256) / math.log1p(65536 / 256),
            "pending": 0.0,
            "top_holders": 1 / 2,
        },
    )
