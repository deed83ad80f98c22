"""The compiled cache's segments are outside the cyclic collector (``no_gc``):
every one a run makes must go by reference counting once the run is dropped,
whatever the run did with them (eviction, both KV models, host RAM and disk
tiers, copies, speculation, pins and demotions)."""

from __future__ import annotations

import gc

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the environments)
from baselines import make_policy
from envs.sim import SimConfig, Simulator, native, setup_cluster
from envs.sim.request import Workload
from envs.workloads.registry import windows

pytestmark = pytest.mark.skipif(native.CORE != "compiled", reason="compiled core not in use")


def _live() -> int:
    from envs.sim._native.cache import live_segments

    gc.collect()
    return int(live_segments())


def _head(family: str, n: int) -> Workload:
    window = next(windows(family, split="val", limit=1))
    return Workload(window.name, window.block_tokens, window.requests[:n])


def test_segments_are_not_tracked_by_the_collector() -> None:
    from envs.sim._native.cache import Segment

    segment = Segment([1, 2], None, 0, 0.0)
    assert not gc.is_tracked(segment)


@pytest.mark.parametrize("causal_kv", [True, False])
def test_a_dropped_run_frees_every_segment(causal_kv: bool) -> None:
    # the nine runs together, counted twice (a full collection takes seconds in a
    # worker that ran many tests); a leak is then looked for run by run, to name it
    before = _live()
    cluster = setup_cluster("70b_h100x4")
    config = SimConfig(causal_kv=causal_kv, disk_tier=True, host_ram_bytes=2e11)
    runs = [
        (family, policy, workload)
        for family in ("bursted_synthetic", "agent_fanout", "mixed")
        for workload in [_head(family, 1200)]
        for policy in ("btb", "oracle_warm", "cache_aware")
    ]

    def run(policy: str, workload: Workload) -> Simulator:
        sim = Simulator(cluster, workload, config, np.random.default_rng(0))
        make_policy(policy).run(sim)
        return sim

    sims = [run(policy, workload) for _, policy, workload in runs]
    assert _live() > before  # the runs' caches hold segments
    del sims
    if _live() != before:
        for family, policy, workload in runs:
            run(policy, workload)
            assert _live() == before, (family, policy)
    assert _live() == before


@pytest.mark.parametrize("option", ["cache_actions", "speculate"])
def test_a_closed_env_frees_every_segment(option: str) -> None:
    """Random allowed actions of btb/RouteWarm-v0 with pins, demotions and
    promotions, or with speculation."""
    before = _live()
    rng = np.random.default_rng(0)
    env = gym.make(
        "btb/RouteWarm-v0",
        setup="70b_h100x4",
        windows=[_head("agent_fanout", 600), _head("bursted_synthetic", 600)],
        sim={"disk_tier": True, "host_ram_bytes": 2e11},
        **{option: True},
    )
    for episode in range(3):
        env.reset(seed=episode)
        done = False
        while not done:
            mask = env.unwrapped.action_masks()  # type: ignore[attr-defined]
            action, start = [], 0
            for size in env.action_space.nvec:  # type: ignore[attr-defined]
                action.append(int(rng.choice(np.flatnonzero(mask[start : start + size]))))
                start += size
            _, _, terminated, truncated, _ = env.step(np.array(action))
            done = terminated or truncated
    assert _live() > before
    env.close()
    del env
    assert _live() == before
