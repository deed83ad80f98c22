"""``btb/RouteWarm-v0`` with ``cache_actions=True``: pin / unpin and demote /
promote parts with their masks; with the default, the spaces are as they were."""

from __future__ import annotations

import pickle
import warnings
from itertools import pairwise

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401  (registers the environments)
from envs.encoder import prefix_of
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

SMALL = BurstedSyntheticConfig(
    n_bursts=2, burst_requests=40, n_decoys=6, burst_window_s=4.0, prefix_tokens=8192
)
N = 4  # nodes of the default setup


@pytest.fixture(scope="module")
def window():
    return synthetic_window(SMALL, window=1)


def make(window, **kwargs):
    return gym.make("btb/RouteWarm-v0", windows=[window], **kwargs).unwrapped


def test_default_spaces_do_not_change(window):
    env = make(window)
    assert env.action_space == spaces.MultiDiscrete([N] + [2] * N + [N + 1])
    route = gym.make("btb/Route-v0", windows=[window]).unwrapped
    assert env.observation_space == route.observation_space
    env.reset(seed=0)
    assert env.action_masks().shape == (4 * N + 1,)


def test_cache_actions_add_two_parts_and_pass_the_checker(window):
    env = make(window, cache_actions=True)
    assert env.action_space == spaces.MultiDiscrete(
        [N] + [2] * N + [N + 1] + [2 * N + 1, 2 * N + 1]
    )
    env.reset(seed=0)
    assert env.action_masks().shape == (4 * N + 1 + 2 * (2 * N + 1),)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(make(window, cache_actions=True))
    with pytest.raises(ValueError, match="cache_actions"):
        make(window, cache_actions="yes")


def _action(route: int, pin: int = 0, move: int = 0) -> np.ndarray:
    return np.array([route] + [0] * N + [0, pin, move])


def test_pin_then_demote_through_actions(window):
    """Route everything to node 0 until its prefix is in node 0's HBM; the masks
    then allow pinning it there (and demoting it), refuse unpinning it; a pin
    action pins it; a demote of a pinned prefix is masked and refused."""
    env = make(window, cache_actions=True, sim={"pin_budget_fraction": 0.5})
    env.reset(seed=0)
    sim = env.sim
    pin_at = 4 * N + 1  # where the pin part's mask starts
    move_at = pin_at + 2 * N + 1
    while True:
        prefix = prefix_of(env.request)
        if sim.nodes[0].cache.hbm_match(prefix) == len(prefix):
            break
        env.step(_action(0))
    mask = env.action_masks()
    assert mask[pin_at + 1] and not mask[pin_at + 1 + N]  # pin on 0, not unpin
    assert mask[move_at + 1]  # demote on 0
    _, _, _, _, info = env.step(_action(0, pin=1))
    assert info["invalid_actions"] == 0
    assert prefix[-1] in sim.nodes[0].cache.pins
    assert sim.nodes[0].pinned_tokens == len(prefix) * sim.block_tokens
    assert prefix_of(env.request) == prefix  # the burst goes on: demoting it is masked
    mask = env.action_masks()
    assert mask[pin_at + 1 + N] and not mask[move_at + 1]
    _, _, _, _, info = env.step(_action(0, move=1))
    assert info["invalid_actions"] == 1
    assert sim.demote_refused["pinned"] == 1


def test_evicting_a_prefix_held_only_by_pins_is_masked(window):
    """An eviction leaves pinned blocks in place: where a node holds the prefix but
    only pinned blocks of it and nothing unpinned below it (what an eviction would
    move), evicting there is masked. On a play that takes one optional part a step
    (so no other part of the action meets the eviction), no masked eviction is
    refused; before this rule such plays had evictions refused as pinned."""
    env = make(window, cache_actions=True, sim={"pin_budget_fraction": 0.5})
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    starts = np.concatenate([[0], np.cumsum(env.action_space.nvec)])
    refused = evictions = pinned_only = 0
    done = False
    while not done:
        mask = env.action_masks()
        prefix = prefix_of(env.request)
        for k, node in enumerate(env.sim.nodes):
            movable = node.cache.hbm_below(prefix) > 0
            assert mask[3 * N + 1 + k] == movable
            pinned_only += node.cache.hbm_match(prefix) > 0 and not movable
        action = np.zeros(len(starts) - 1, dtype=np.int64)
        action[0] = rng.choice(np.flatnonzero(mask[: starts[1]]))
        part = int(rng.choice([1 + N, 2 + N, 3 + N]))  # evict, pin, move
        allowed = np.flatnonzero(mask[starts[part] : starts[part + 1]])[1:]
        if len(allowed):
            action[part] = rng.choice(allowed)
        before = env.sim.evict_actions, env.sim.evicted_by_action_blocks
        _, _, done, _, _ = env.step(action)
        if part == 1 + N and action[part]:  # the eviction ran and moved something
            evictions += 1
            refused += env.sim.evicted_by_action_blocks == before[1]
            assert env.sim.evict_actions == before[0] + 1
    assert evictions >= 10 and pinned_only > 0 and refused == 0


def test_masked_random_play_pins_and_moves_and_keeps_the_invariants(window):
    env = make(window, cache_actions=True, sim={"pin_budget_fraction": 0.5})
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    nvec = env.action_space.nvec
    starts = np.concatenate([[0], np.cumsum(nvec)])
    done = False
    while not done:
        mask = env.action_masks()
        action = [rng.choice(np.flatnonzero(mask[a:b])) for a, b in pairwise(starts)]
        for node in env.sim.nodes:
            assert node.reserved_tokens + node.pinned_tokens <= node.budget_tokens
            node.cache.check_invariants()
        _, _, done, _, _ = env.step(np.array(action))
    summary = env.sim.records.summary
    assert summary["completed"] == len(window)
    assert summary["pins"] > 0 and summary["demotions"] + summary["promotions"] > 0


def test_pickled_env_keeps_its_cache_actions(window):
    env = make(window, cache_actions=True)
    env.reset(seed=1)
    env.step(_action(0))
    copy = pickle.loads(pickle.dumps(env))
    assert copy.action_space == env.action_space
    assert copy.cache_actions


def test_speculate_and_cache_actions_together_lay_out_in_order(window):
    """Both options: route, warms, evict, then the speculate bits, then pin and move;
    masked random actions run a whole episode with every part in range."""
    env = make(window, speculate=True, cache_actions=True)
    sizes = [N] + [2] * N + [N + 1] + [2] * N + [2 * N + 1, 2 * N + 1]
    assert env.action_space == spaces.MultiDiscrete(sizes)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    done = False
    while not done:
        mask = env.action_masks()
        assert mask.shape == (sum(sizes),)
        action, start = [], 0
        for size in sizes:
            allowed = np.flatnonzero(mask[start : start + size])
            action.append(int(rng.choice(allowed)))
            start += size
        _, _, terminated, truncated, _ = env.step(np.array(action))
        done = terminated or truncated
    assert env.sim.records.summary["speculative_accepted"] > 0
