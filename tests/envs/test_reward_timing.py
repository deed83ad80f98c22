"""``reward_timing="accrued"``: waiting time credited as it is spent, the same
episode return as crediting each TTFT at its first token."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs
from baselines import make_policy
from envs.cluster_env import REWARD_TIMINGS
from envs.sim.config import ClusterSpec
from envs.sim.request import Request, Workload
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

SMALL = BurstedSyntheticConfig(n_bursts=2, burst_requests=40, n_decoys=6, burst_window_s=4.0)


@pytest.fixture(scope="module")
def window():
    return synthetic_window(SMALL, window=1)


def play(env_id, window, seed=2, **kwargs):
    """Random play; (per-step rewards, decision times) and the env."""
    env = gym.make(env_id, windows=[window], **kwargs)
    env.action_space.seed(0)
    env.reset(seed=seed)
    rewards, times, done = [], [], False
    while not done:
        _, reward, done, _, info = env.step(env.action_space.sample())
        rewards.append(reward)
        times.append(info["time_s"])
    return np.array(rewards), np.array(times), env.unwrapped


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
def test_accrued_rewards_sum_to_the_first_token_return(env_id, window):
    at_first_token, _, env = play(env_id, window, reward_scale=4.0)
    accrued, _, other = play(env_id, window, reward_scale=4.0, reward_timing="accrued")
    assert np.array_equal(env.sim.records.ttft_s, other.sim.records.ttft_s)  # same play
    expected = -np.sum(env.sim.records.ttft_s) / 4.0
    assert at_first_token.sum() == pytest.approx(expected, rel=1e-9)
    assert accrued.sum() == pytest.approx(expected, rel=1e-9)
    assert not np.allclose(accrued, at_first_token)  # credited at other steps


def test_each_step_credits_the_waiting_done_since_the_last(window):
    """By hand from the records: after step k at time t_k the credited total is
    -sum over arrived requests of (min(t_k, first token) - arrival) / scale."""
    rewards, times, env = play("btb/RouteWarm-v0", window, reward_timing="accrued")
    arrival = np.array([r.arrival_s for r in window.requests])
    first_token = env.sim.records.first_token_s
    waited = [np.sum(np.clip(np.minimum(t, first_token) - arrival, 0.0, None)) for t in times]
    assert np.allclose(np.cumsum(rewards), -np.array(waited), rtol=1e-9, atol=1e-9)
    # a request still waiting costs at every step: some steps before the first
    # token of anyone after the first arrival already carry a cost
    first_out = np.min(first_token)
    assert any(r < 0 for r, t in zip(rewards, times) if t < first_out)


def test_acting_as_the_reference_scores_zero_at_every_step(window):
    env = gym.make(
        "btb/RouteWarm-v0", windows=[window], reward_baseline="btb", reward_timing="accrued"
    )
    policy = make_policy("btb")
    env.reset(seed=3)
    policy.reset(env.unwrapped.sim)
    done, rewards = False, []
    while not done:
        _, reward, done, _, _ = env.step(env.unwrapped.policy_action(policy))
        rewards.append(reward)
    assert np.allclose(rewards, 0.0, atol=1e-9)


def test_an_unknown_reward_timing_is_named(window):
    with pytest.raises(ValueError, match="reward_timing must be one of first_token, accrued"):
        gym.make("btb/Route-v0", windows=[window], reward_timing="late")


@pytest.mark.parametrize("env_id", ["btb/Route-v0", "btb/RouteWarm-v0", "btb/Thresholds-v0"])
def test_the_last_step_s_info_holds_the_episode_s_ttfts(env_id: str) -> None:
    """info["ttft_s"] at the episode's end: each request's TTFT, whose sum over
    reward_scale is minus the return (first_token timing, no penalties)."""
    window = synthetic_window(BurstedSyntheticConfig(n_bursts=1, burst_requests=8), window=0)
    env = gym.make(env_id, windows=[window], reward_scale=10.0)
    env.reset(seed=0)
    total, done, info = 0.0, False, {}
    while not done:
        action = env.action_space.sample() if env_id.endswith("Thresholds-v0") else 0
        if env_id.endswith("RouteWarm-v0"):
            action = np.zeros(env.action_space.shape, dtype=np.int64)
            action[-1] = env.action_space.nvec[-1] - 1  # evict nothing
        _, reward, done, _, info = env.step(action)
        total += reward
        assert done or "ttft_s" not in info
    ttft = np.asarray(info["ttft_s"])
    assert ttft.shape == (len(window.requests),) and (ttft > 0).all()
    assert total == pytest.approx(-ttft.sum() / 10.0, rel=1e-9)


def test_the_reference_s_waiting_after_the_agent_s_run_ends_is_credited() -> None:
    """Two nodes, three prompts of no shared block at 0 s: A of 16,384 tokens, B and
    C of 4,096 (p s of prefill each, A 4p). The agent routes A to node 0, B and C to
    node 1: TTFTs 4p, p, 2p, its run ends at 4p. The reference, round_robin, puts C
    behind A: 4p, p, 5p, its run ends at 5p. The return is -(7p - 10p) = 3p under
    either timing; the accrued one credited only up to the agent's end (2p)."""

    def prompt(index: int, tokens: int, first_block: int) -> Request:
        blocks = tuple(range(first_block, first_block + tokens // 256))
        return Request(index, f"r{index}", 0.0, tokens, 1, blocks)

    prompts = [prompt(0, 16_384, 1), prompt(1, 4_096, 100), prompt(2, 4_096, 200)]
    window = Workload("w", 256, prompts)
    returns = {}
    for timing in REWARD_TIMINGS:
        env = gym.make(
            "btb/Route-v0",
            setup=ClusterSpec.uniform("llama-3.3-70b", "4xH100", 2),
            windows=[window],
            reward_baseline="round_robin",
            reward_timing=timing,
        )
        env.reset(seed=0)
        returns[timing] = sum(env.step(node)[1] for node in (0, 1, 1))
        ttft = env.unwrapped.sim.records.ttft_s
    p = ttft[1]
    assert ttft == pytest.approx([4 * p, p, 2 * p], rel=1e-9)
    assert env.unwrapped._reference_ttft_s == pytest.approx([4 * p, p, 5 * p], rel=1e-9)
    assert returns["first_token"] == pytest.approx(3 * p, rel=1e-9)
    assert returns["accrued"] == pytest.approx(3 * p, rel=1e-9)
