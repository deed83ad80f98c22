"""Abusing the environments: random episodes interleaved with refused calls (bad
actions, bad reset options, windows an episode cannot run, steps out of turn).
Every refusal is a ValueError, RuntimeError or Gymnasium's own error, and leaves
the env as it was: the next valid step gives what a copy pickled before the
refusal gives. ``BTB_ABUSE_CASES`` sets the number of episodes per env (3 take
seconds; set it higher for a longer run)."""

from __future__ import annotations

import dataclasses
import os
import pickle
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import envs
from envs.sim.request import Workload
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

ABUSE_CASES = int(os.environ.get("BTB_ABUSE_CASES", "3"))
REFUSALS = (ValueError, RuntimeError, gym.error.Error)
WINDOW = synthetic_window(
    BurstedSyntheticConfig(n_bursts=1, burst_requests=8, n_decoys=2, burst_window_s=2.0), window=1
)


def _abuses(env: Any) -> list[Callable[[], Any]]:
    """Calls the env must refuse, each without changing anything."""
    shape = env.action_space.shape or (1,)
    huge = dataclasses.replace(WINDOW.requests[0], input_tokens=10**9)
    bad_actions: list[Any] = [
        True, np.True_, 1.5, -1, 10**6, None, "x", {}, [0.5], np.zeros((2, 2), dtype=int),
        np.array([np.nan]), np.full(shape, 10**6), np.full(shape, -1), np.zeros(len(shape) + 9),
    ]  # fmt: skip
    bad_options: list[Any] = [
        {"window": -1}, {"window": len(env.windows)}, {"window": 1.5}, {"window": True},
        {"window": "0"}, {"window": Workload("empty", 16, [])},
        {"window": dataclasses.replace(WINDOW, requests=[huge, *WINDOW.requests[1:]])},
        {"sim_seed": "x"}, {"sim_seed": [-1]}, {"sim_seed": []}, {"windows": 0},
    ]  # fmt: skip
    calls: list[Callable[[], Any]] = [lambda a=a: env.step(a) for a in bad_actions]
    calls += [lambda o=o: env.reset(seed=3, options=o) for o in bad_options]
    calls += [lambda: env.reset(seed=-1), lambda: env.reset(seed=1.5)]
    return calls


def _abuse_episodes(env_id: str, case: int) -> None:
    rng = np.random.default_rng([case, envs.ENV_IDS.index(env_id)])
    env = gym.make(env_id, windows=[WINDOW, WINDOW]).unwrapped
    env.action_space.seed(case)
    with pytest.raises(RuntimeError):
        env.step(env.action_space.sample())  # before any reset
    env.reset(seed=case)
    abuses = _abuses(env)
    for _ in range(24):
        if rng.random() < 0.5:  # a valid step
            if env.step(env.action_space.sample())[2]:
                with pytest.raises(RuntimeError):
                    env.step(env.action_space.sample())  # after the episode's end
                env.reset(seed=int(rng.integers(100)))
            continue
        before = pickle.dumps(env)
        with pytest.raises(REFUSALS):
            abuses[int(rng.integers(len(abuses)))]()
        action = env.action_space.sample()
        mine, theirs = env.step(action), pickle.loads(before).step(action)
        assert np.array_equal(mine[0], theirs[0]) and mine[1:] == theirs[1:]
        assert mine[4]["window"] in (0, 1)  # the pool's window, not a refused one
        if mine[2]:
            env.reset(seed=int(rng.integers(100)))


@pytest.mark.parametrize("env_id", envs.ENV_IDS)
def test_refused_calls_leave_the_env_as_it_was(env_id: str) -> None:
    for case in range(ABUSE_CASES):
        _abuse_episodes(env_id, case)


@pytest.mark.parametrize("options", [{}, {"speculate": True, "cache_actions": True}])
def test_route_warm_s_mask_outside_an_episode_is_refused_as_a_step_is(
    options: dict[str, bool],
) -> None:
    """``action_masks()`` before ``reset()`` returned all True (every warm, every
    eviction allowed, for no request) where ``step()`` raises: it raises as ``step()``
    does, before the first reset and after an episode ends; within one it is the mask
    of the request the next step routes."""
    env = gym.make("btb/RouteWarm-v0", windows=[WINDOW], **options).unwrapped
    for call in (env.step, env.action_masks):
        with pytest.raises(RuntimeError, match=r"^call reset\(\) before .*after an episode ends$"):
            call(*([env.action_space.sample()] if call == env.step else []))
    env.reset(seed=0)
    n = env.n_nodes
    done = False
    while not done:
        mask = env.action_masks()
        assert mask.shape == (sum(env.action_space.nvec),)
        assert mask[:n].any()  # some node to route the request to
        done = env.step(np.zeros(len(env.action_space.nvec), dtype=int))[2]
    with pytest.raises(RuntimeError, match=r"^call reset\(\) before action_masks\(\), and again"):
        env.action_masks()
