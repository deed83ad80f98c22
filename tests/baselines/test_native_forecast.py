"""The routers' first-token estimates, compiled (``envs.sim._native.forecast``,
chosen by ``baselines.native``) against the Python reference
(``envs.sim.forecast.estimates_with_hits``): the same floats on either simulator
core, and the same runs of every router that routes by them."""

from __future__ import annotations

import numpy as np
import pytest

import baselines.eft_pull as eft_pull_module
from baselines import make_policy, routers
from baselines.native import FORECAST
from envs.sim import SimConfig, Simulator, setup_cluster
from envs.sim.forecast import estimates_with_hits
from envs.sim.transfers import WAIT_SOURCE
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

needs_compiled = pytest.mark.skipif(
    FORECAST is None, reason="the compiled baselines are not built or not chosen"
)
FAST = BurstedSyntheticConfig(
    n_bursts=2, burst_requests=100, n_decoys=6, burst_window_s=0.2, burst_interval_s=4.0
)
SLOW = BurstedSyntheticConfig(n_bursts=2, burst_requests=40, n_decoys=6, burst_window_s=4.0)
ROUTERS = ("eft", "eft_step", "eft_pull", "eft_pull_spread", "btb_eft")


@needs_compiled
def test_the_routers_take_the_compiled_estimates() -> None:
    assert routers.estimates_with_hits is FORECAST.estimates_with_hits
    assert eft_pull_module.estimates_with_hits is FORECAST.estimates_with_hits
    assert routers.REFERENCE.estimates_with_hits is not FORECAST.estimates_with_hits


@needs_compiled
@pytest.mark.parametrize("core", ["compiled", "python"])
def test_compiled_estimates_are_the_reference_at_every_decision(core: str) -> None:
    """Under btb_pending (copies in flight waiting for their source, queues, decode
    steps), on the nodes of either simulator core: every decision's estimates,
    with and without the rest of the decode step, to the bit."""
    window = synthetic_window(SLOW, window=1)
    sim = Simulator(
        setup_cluster("70b_h100x4"),
        window,
        SimConfig(causal_kv=True),
        np.random.default_rng(0),
        core=core,
    )
    policy = make_policy("btb_pending")
    policy.reset(sim)
    memos: dict[bool, tuple[dict, dict]] = {False: ({}, {}), True: ({}, {})}
    decisions = copies_seen = 0
    gen = sim.decisions()
    request = next(gen, None)
    while request is not None:
        for step_wait, (compiled_memo, reference_memo) in memos.items():
            got = FORECAST.estimates_with_hits(sim, request, compiled_memo, step_wait)
            assert got == estimates_with_hits(sim, request, reference_memo, step_wait)
        decisions += 1
        copies_seen += any(
            copy.state == WAIT_SOURCE for node in sim.nodes for copy in node.inflight.values()
        )
        try:
            request = gen.send(policy.decide(sim, request))
        except StopIteration:
            request = None
    assert decisions == len(window.requests) and copies_seen > 0


@needs_compiled
@pytest.mark.parametrize("config", [FAST, SLOW], ids=["fast", "slow"])
@pytest.mark.parametrize("name", ROUTERS)
def test_each_router_runs_the_same_on_either_estimate(
    name: str, config: BurstedSyntheticConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    window = synthetic_window(config, window=1)

    def run() -> tuple[np.ndarray, int]:
        sim = Simulator(
            setup_cluster("qwen3_8b_h100x4"),
            window,
            SimConfig(causal_kv=True),
            np.random.default_rng(0),
        )
        return make_policy(name).run(sim).ttft_s, len(sim.copies)

    compiled = run()
    reference = routers.REFERENCE.estimates_with_hits
    monkeypatch.setattr(routers, "estimates_with_hits", reference)
    monkeypatch.setattr(eft_pull_module, "estimates_with_hits", reference)
    python = run()
    assert np.array_equal(compiled[0], python[0]) and compiled[1] == python[1]
