"""``btb/Thresholds-v0``'s ``y_tokens``: its BTB (and the epoch observation's prefix
counts) key a prefix on the first Y tokens, as ``btb`` does, instead of each prompt
but its last block, which never repeats when every request's own suffix spans more
than one block."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the environments)
from baselines import make_policy
from envs.encoder import EPOCH_FEATURES, EPOCH_NODE_FEATURES
from envs.sim.request import Workload
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window
from tests.envs.thresholds_replay import TWO_BLOCK_SUFFIX, replay_rule, run_fixed

FIRES = (1, 2, 3, 0)  # X=2, Z=1 s, M=4 of 4 nodes, minimum prefix 1,024 tokens
SAME_1S = 4 * len(EPOCH_NODE_FEATURES) + EPOCH_FEATURES.index("same_1s")
HOLDERS = 4 * len(EPOCH_NODE_FEATURES) + EPOCH_FEATURES.index("top_holders")


@pytest.fixture(scope="module")
def window() -> Workload:
    return synthetic_window(TWO_BLOCK_SUFFIX, window=1)


def test_without_y_tokens_such_bursts_never_fire(window: Workload) -> None:
    for rule in (0, 1):
        _, copies, _ = replay_rule(window, rule, settings=FIRES)
        assert copies == 0


@pytest.mark.parametrize(("rule", "policy"), [(0, "btb"), (1, "btb_pending")])
def test_with_y_tokens_each_rule_replays_btb_keyed_on_y(
    window: Workload, rule: int, policy: str
) -> None:
    ttft, copies, sim_seed = replay_rule(window, rule, settings=FIRES, y_tokens=16384)
    direct, direct_copies = run_fixed(window, make_policy(policy, y_tokens=16384), sim_seed)
    assert np.array_equal(ttft, direct)
    assert copies == direct_copies > 0
    # the compiled epoch loop and the Python reference agree with the key as well
    again, _, _ = replay_rule(window, rule, compiled=False, settings=FIRES, y_tokens=16384)
    assert np.array_equal(again, ttft)


def test_the_observation_counts_the_burst_under_one_key(window: Workload) -> None:
    """The most arrivals of one prefix within 1 s (squashed as n / (n + 8)): 1 when
    every request is its own prefix, 11 with Y (a burst is 40 requests 0.1 s apart,
    and the last second holds both its ends). The busiest prefix's holders: with Y
    the burst's prefix, copied to every node (M=4); without, one request's own
    prompt, which at most the node that served it holds."""
    shares, holders = {}, {}
    for y_tokens in (None, 16384):
        env = gym.make("btb/Thresholds-v0", setup="70b_h100x4", windows=[window], y_tokens=y_tokens)
        env.reset(seed=0)
        seen, held = [], []
        done = False
        while not done:
            obs, _, done, _, _ = env.step(np.array([*FIRES, 0]))
            seen.append(float(obs[SAME_1S]))
            held.append(float(obs[HOLDERS]))
        shares[y_tokens], holders[y_tokens] = max(seen), max(held)
        if y_tokens is not None:
            assert env.unwrapped._kwargs["y_tokens"] == y_tokens  # saved with an agent
        else:
            assert "y_tokens" not in env.unwrapped._kwargs  # agents saved before it
    assert shares[None] == pytest.approx(1 / 9)
    assert shares[16384] == pytest.approx(11 / 19)
    assert holders[None] <= 0.25 and holders[16384] == 1.0


def test_y_tokens_at_the_shared_prefix_changes_nothing_on_one_block_suffixes() -> None:
    """Where each suffix fits its last block, the prompt but that block *is* the
    shared prefix: Y equal to it gives the default run, request for request."""
    one_block = synthetic_window(
        BurstedSyntheticConfig(
            n_bursts=2, burst_requests=40, n_decoys=6, burst_window_s=4.0, prefix_tokens=16384
        ),
        window=1,
    )
    for rule in (0, 1):
        default, copies, _ = replay_rule(one_block, rule, settings=FIRES)
        keyed, keyed_copies, _ = replay_rule(one_block, rule, settings=FIRES, y_tokens=16384)
        assert np.array_equal(default, keyed) and copies == keyed_copies > 0


def test_a_minimum_prefix_above_y_turns_btb_off(window: Workload) -> None:
    _, copies, _ = replay_rule(window, 0, settings=(1, 2, 3, 1), y_tokens=8192)  # min 4,096
    _, above, _ = replay_rule(window, 0, settings=(1, 2, 3, 2), y_tokens=8192)  # min 16,384
    assert copies > 0 and above == 0


def test_bad_y_tokens_are_refused_naming_it(window: Workload) -> None:
    for value in (0, -256, 1.5, "8192"):
        with pytest.raises(ValueError, match="y_tokens"):
            gym.make("btb/Thresholds-v0", windows=[window], y_tokens=value)
    # every minimum prefix an action sets would exceed it: BTB could never fire
    with pytest.raises(ValueError, match=r"^y_tokens = 1023 is below the shortest minimum"):
        gym.make("btb/Thresholds-v0", windows=[window], y_tokens=1023)
    coarse = synthetic_window(dataclasses.replace(TWO_BLOCK_SUFFIX, block_tokens=2048), window=1)
    with pytest.raises(ValueError, match=r"^y_tokens = 1024 is shorter than one 2048-token block"):
        gym.make("btb/Thresholds-v0", windows=[coarse], y_tokens=1024)
    with pytest.raises(ValueError, match="y_tokens is an option of btb/Thresholds-v0"):
        gym.make("btb/Route-v0", windows=[window], y_tokens=8192)


def test_a_window_with_blocks_above_y_is_refused_before_a_reset_changes_anything(
    window: Workload,
) -> None:
    """y_tokens=1024 cannot key a window of 2,048-token blocks: set_windows refuses
    it, and so does reset(options={"window": ...}) before it draws from np_random or
    drops the episode in progress (which goes on, step for step)."""
    coarse = synthetic_window(dataclasses.replace(TWO_BLOCK_SUFFIX, block_tokens=2048), window=1)
    env = gym.make("btb/Thresholds-v0", setup="70b_h100x4", windows=[window], y_tokens=1024)
    env.reset(seed=0)
    env.step(np.array([*FIRES, 0]))
    refused = r"^y_tokens = 1024 is shorter than one 2048-token block .*, in {}"
    with pytest.raises(ValueError, match=refused.format(r"set_windows: windows\[0\]")):
        env.unwrapped.set_windows([coarse])
    assert env.unwrapped.windows == [window]
    state = env.unwrapped.np_random.bit_generator.state
    actions = len(env.unwrapped._episode["actions"])
    with pytest.raises(ValueError, match=refused.format(r"options\['window'\]")):
        env.reset(options={"window": coarse})
    assert env.unwrapped.np_random.bit_generator.state == state
    assert len(env.unwrapped._episode["actions"]) == actions == 1
    _, _, done, _, info = env.step(np.array([*FIRES, 0]))  # the episode goes on
    assert len(env.unwrapped._episode["actions"]) == 2 and info["window"] == 0
