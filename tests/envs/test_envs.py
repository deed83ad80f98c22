"""Conformance, determinism, reward bookkeeping and speed-independent behaviour
of the three Gymnasium environments."""

from __future__ import annotations

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import envs
from baselines import make_policy
from envs.sim import SimConfig, Simulator, setup_cluster
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

SMALL = BurstedSyntheticConfig(n_bursts=2, burst_requests=40, n_decoys=6, burst_window_s=4.0)


@pytest.fixture(scope="module")
def window():
    return synthetic_window(SMALL, window=1)


def make(env_id, window, **kwargs):
    return gym.make(env_id, windows=[window], **kwargs)


def run_episode(env, seed, actions_seed=0):
    env.action_space.seed(actions_seed)
    obs, info = env.reset(seed=seed)
    trace = [(obs.copy(), 0.0, dict(info))]
    done = False
    total = 0.0
    while not done:
        obs, reward, done, truncated, info = env.step(env.action_space.sample())
        assert not truncated
        trace.append((obs.copy(), reward, dict(info)))
        total += reward
    return trace, total


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
def test_gymnasium_and_sb3_checkers_pass_without_warnings(env_id, window):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(make(env_id, window).unwrapped)
        sb3_check_env(make(env_id, window).unwrapped)


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
def test_steps_are_deterministic_including_info(env_id, window):
    first, _ = run_episode(make(env_id, window), seed=5)
    second, _ = run_episode(make(env_id, window), seed=5)
    assert len(first) == len(second)
    for (o1, r1, i1), (o2, r2, i2) in zip(first, second):
        assert np.array_equal(o1, o2)
        assert r1 == r2
        assert i1 == i2


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
def test_return_is_minus_total_ttft_over_scale(env_id, window):
    env = make(env_id, window, reward_scale=7.5)
    _, total = run_episode(env, seed=2)
    sim = env.unwrapped.sim
    assert len(sim.first_token_log) == len(window)
    assert total == pytest.approx(-np.sum(sim.records.ttft_s) / 7.5, rel=1e-9)


def test_tail_penalty_and_copy_cost_follow_their_formulas(window):
    env = make("btb/RouteWarm-v0", window, slo_s=1.0, tail_penalty=3.0, copy_cost_per_gb=0.5)
    env.reset(seed=0)
    env.action_space.seed(1)
    total = 0.0
    done = False
    while not done:
        _, reward, done, _, _ = env.step(env.action_space.sample())
        total += reward
    sim = env.unwrapped.sim
    ttft = sim.records.ttft_s
    copied_gb = sum(c.bytes for c in sim.copies) / 1e9
    expected = -(ttft.sum() + 3.0 * np.clip(ttft - 1.0, 0, None).sum()) - 0.5 * copied_gb
    assert sim.copies, "random warm actions should have made at least one copy"
    assert total == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
def test_pickle_round_trip_mid_episode_continues_identically(env_id, window):
    env = make(env_id, window).unwrapped
    env.reset(seed=3)
    env.action_space.seed(4)
    for _ in range(3):
        env.step(env.action_space.sample())
    clone = pickle.loads(pickle.dumps(env))
    for _ in range(5):
        action = env.action_space.sample()
        a, b = env.step(action), clone.step(action)
        assert np.array_equal(a[0], b[0])
        assert a[1:] == b[1:]
        if a[2]:
            break


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec(mode, window):
    vec = gym.make_vec("btb/Route-v0", num_envs=2, vectorization_mode=mode, windows=[window])
    try:
        obs, _ = vec.reset(seed=1)
        assert obs.shape == (2, vec.single_observation_space.shape[0])
        for _ in range(150):  # longer than an episode: exercises autoreset
            obs, reward, terminated, truncated, _ = vec.step(vec.action_space.sample())
        assert np.isfinite(obs).all() and np.isfinite(reward).all()
    finally:
        vec.close()


def test_sb3_subproc_vec_env(window):
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    vec = make_vec_env(
        "btb/RouteWarm-v0", n_envs=2, vec_env_cls=SubprocVecEnv, env_kwargs={"windows": [window]}
    )
    try:
        obs = vec.reset()
        for _ in range(60):
            obs, reward, done, _ = vec.step(np.array([vec.action_space.sample() for _ in range(2)]))
        assert obs.shape[0] == 2 and np.isfinite(obs).all()
    finally:
        vec.close()


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
def test_render_modes(env_id, window):
    env = make(env_id, window, render_mode="ansi")
    env.reset(seed=0)
    env.step(env.action_space.sample())
    text = env.render()
    assert "node" in text and "requests served" in text
    env = make(env_id, window, render_mode="rgb_array")
    env.reset(seed=0)
    for _ in range(3):
        env.step(env.action_space.sample())
    image = env.render()
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    assert image.std() > 0


def test_observations_are_finite_and_in_bounds(window):
    env = make("btb/RouteWarm-v0", window)
    trace, _ = run_episode(env, seed=9)
    space = env.observation_space
    for obs, _, _ in trace:
        assert space.contains(obs)


def test_action_masks_mark_what_the_simulator_would_refuse():
    # one 10-second burst: later requests arrive after the first one's 4.7 s prefill
    window = synthetic_window(
        BurstedSyntheticConfig(n_bursts=1, burst_requests=30, n_decoys=0, burst_window_s=10.0)
    )
    env = make("btb/RouteWarm-v0", window).unwrapped
    env.reset(seed=0, options={"window": 0})
    n = env.n_nodes
    # route every request to node 0 until one arrives whose prefix node 0 holds
    for _ in range(len(window)):
        mask = env.action_masks()
        holds = (
            env.sim.nodes[0].cache.hbm_match(env.request.blocks[:-1]) >= len(env.request.blocks) - 1
        )
        if holds:
            break
        env.step(np.array([0] + [0] * n + [0]))
    assert holds
    assert mask.shape == (4 * n + 1,)
    assert not mask[n + 1]  # warm onto node 0, which holds it: masked
    assert mask[n + 3]  # warm onto node 1: allowed
    assert mask[3 * n + 1]  # evict from node 0: allowed
    assert not mask[3 * n + 2]  # evict from node 1, which holds nothing: masked
    before = env.invalid_actions
    action = np.array([1] + [1] + [0] * (n - 1) + [2])  # warm onto holder, evict from empty node
    env.step(action)
    assert env.invalid_actions == before + 2


@pytest.mark.parametrize("policy_name", ["cache_aware", "btb"])
def test_baselines_through_route_warm_match_the_direct_run(policy_name, window):
    env = make("btb/RouteWarm-v0", window).unwrapped
    env.reset(seed=11, options={"window": 0})
    policy = make_policy(policy_name)
    policy.reset(env.sim)
    done = False
    while not done:
        _, _, done, _, _ = env.step(env.policy_action(policy))
    through_env = env.sim.records.ttft_s

    sim = Simulator(
        setup_cluster("70b_h100x4"),
        window,
        SimConfig(),
        np.random.default_rng(env._episode["sim_seed"]),
    )
    direct = make_policy(policy_name).run(sim).ttft_s
    assert np.array_equal(through_env, direct)
    if policy_name == "btb":
        assert env.sim.copies, "BTB should warm on a burst window"


def test_thresholds_env_applies_the_chosen_thresholds(window):
    from envs.thresholds import MIN_PREFIX_CHOICES, X_CHOICES, Z_CHOICES

    env = make("btb/Thresholds-v0", window).unwrapped
    env.reset(seed=0)
    env.step(np.array([3, 1, 1, 2]))
    assert env.thresholds() == (X_CHOICES[3], Z_CHOICES[1], 2, MIN_PREFIX_CHOICES[2])


def test_never_copying_thresholds_make_no_copies(window):
    env = make("btb/Thresholds-v0", window).unwrapped
    env.reset(seed=0)
    done = False
    while not done:  # X = 16 within 0.25 s never happens with 4 s bursts of 40
        _, _, done, _, _ = env.step(np.array([6, 0, 3, 4]))
    assert env.sim.copies == []


def test_bad_arguments_are_reported(window):
    with pytest.raises(ValueError, match="reward_scale"):
        make("btb/Route-v0", window, reward_scale=0)
    with pytest.raises(ValueError, match="sim: unknown field"):
        make("btb/Route-v0", window, sim={"causal": False})
    with pytest.raises(ValueError, match="tail_penalty needs slo_s"):
        make("btb/Route-v0", window, tail_penalty=1.0)
    env = make("btb/Route-v0", window).unwrapped
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="outside Discrete"):
        env.step(7)
    with pytest.raises(ValueError, match="options\\['window'\\]"):
        env.reset(options={"window": 5})


@pytest.mark.parametrize("env_id", ["btb/Route-v0", "btb/RouteWarm-v0"])
def test_a_policy_that_routes_itself_acts_through_the_env(env_id, window):
    """oracle_warm routes prefix-computing requests with sim.route and answers None."""
    env = make(env_id, window).unwrapped
    env.reset(seed=2, options={"window": 0})
    policy = make_policy("oracle_warm")
    policy.reset(env.sim)
    done = False
    while not done:
        _, _, done, _, _ = env.step(env.policy_action(policy))
    direct_sim = Simulator(
        setup_cluster("70b_h100x4"),
        window,
        SimConfig(),
        np.random.default_rng(env._episode["sim_seed"]),
    )
    assert np.array_equal(env.sim.records.ttft_s, make_policy("oracle_warm").run(direct_sim).ttft_s)
