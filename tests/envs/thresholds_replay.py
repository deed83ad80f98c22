"""Shared by the tests of ``btb/Thresholds-v0``'s routing rules: a window replayed
with one rule in every epoch, and the same window run by a fixed policy."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

import envs  # noqa: F401  (registers the environments)
from baselines.policy import Policy
from envs.sim import SimConfig, Simulator, setup_cluster
from envs.sim.request import Workload
from envs.thresholds import EpochController
from envs.workloads.bursted import BurstedSyntheticConfig

PUBLISHED = [1, 2, 3, 4]  # X=2, Z=1 s, M=4 of 4 nodes, minimum prefix 65,536 tokens
TWO_BLOCK_SUFFIX = BurstedSyntheticConfig(
    n_bursts=2,
    burst_requests=40,
    n_decoys=6,
    burst_window_s=4.0,
    prefix_tokens=16384,
    suffix_tokens=512,
)
"""Bursts sharing 16,384 tokens (64 blocks of 256) whose requests each end in a
512-token suffix: two blocks of their own, so "the prompt but its last block"
ends in a block no other request has (the thresholds env's ``y_tokens``)."""


def replay_rule(
    window: Workload,
    rule: int,
    setup: str = "70b_h100x4",
    spread_rules: bool = False,
    compiled: bool = True,
    seed: int = 3,
    settings: tuple[int, ...] = tuple(PUBLISHED),
    y_tokens: int | None = None,
) -> tuple[np.ndarray, int, int]:
    """The published settings (or ``settings``: X, Z, M, minimum prefix indices) with
    ``rule`` every epoch (``eft_rules`` on, ``spread_rules`` and ``y_tokens`` as
    asked; the epoch loop compiled or the Python reference): (TTFTs, copies, sim seed)."""
    env = gym.make(
        "btb/Thresholds-v0",
        setup=setup,
        windows=[window],
        eft_rules=True,
        spread_rules=spread_rules,
        y_tokens=y_tokens,
    ).unwrapped
    env.controller = EpochController(
        env.n_nodes,
        env.epoch_s,
        True,
        compiled=compiled,
        spread_rules=spread_rules,
        y_tokens=y_tokens,
    )
    env.reset(seed=seed)
    done = False
    while not done:
        _, _, done, _, _ = env.step(np.array([*settings, rule]))
    return env.sim.records.ttft_s, len(env.sim.copies), env._episode["sim_seed"]


def run_fixed(
    window: Workload, policy: Policy, sim_seed: int, setup: str = "70b_h100x4"
) -> tuple[np.ndarray, int]:
    """``policy`` run on ``window`` with the default simulator options: (TTFTs, copies)."""
    sim = Simulator(setup_cluster(setup), window, SimConfig(), np.random.default_rng(sim_seed))
    return policy.run(sim).ttft_s, len(sim.copies)
