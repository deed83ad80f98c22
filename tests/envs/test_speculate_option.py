"""``btb/RouteWarm-v0``'s ``speculate`` option: off by default (the action space
is unchanged), on it adds one speculate part per node, with its mask."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import envs  # noqa: F401  (registers the envs)
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

WINDOW = synthetic_window(
    BurstedSyntheticConfig(n_bursts=1, burst_requests=6, n_decoys=0, burst_window_s=1.0)
)


def _env(**kwargs):  # type: ignore[no-untyped-def]
    return gym.make("btb/RouteWarm-v0", windows=[WINDOW], **kwargs).unwrapped


def test_the_default_action_space_is_unchanged_and_the_option_extends_it() -> None:
    n = _env().n_nodes
    assert _env().action_space == spaces.MultiDiscrete([n] + [2] * n + [n + 1])
    assert _env(speculate=False).action_space == _env().action_space
    env = _env(speculate=True)
    assert env.action_space == spaces.MultiDiscrete([n] + [2] * n + [n + 1] + [2] * n)
    env.reset(seed=0, options={"window": 0})
    assert env.action_masks().shape == (6 * n + 1,)
    env = _env()
    env.reset(seed=0, options={"window": 0})
    assert env.action_masks().shape == (4 * n + 1,)


def test_a_speculate_part_speculates_and_its_mask_follows() -> None:
    env = _env(speculate=True)
    env.reset(seed=0, options={"window": 0})
    n = env.n_nodes
    mask = env.action_masks()
    assert mask[4 * n + 2 :: 2].all()  # nothing cached, nothing speculated yet
    # route to node 0, speculate the prefix on node 1 and node 2
    env.step(np.array([0] + [0] * n + [0] + [0, 1, 1] + [0] * (n - 3)))
    assert env.sim.speculation is not None
    key = env.sim.speculation.jobs[1][0].key
    assert [env.sim.speculation.pending(node) for node in env.sim.nodes[:3]] == [0, 1, 1]
    mask = env.action_masks()
    assert env.request.blocks[-2] == key  # the next request shares the prefix
    assert not mask[4 * n + 4] and not mask[4 * n + 6]  # already speculating: masked
    assert mask[4 * n + 8]  # node 3: allowed
    before = env.invalid_actions
    env.step(np.array([3] + [0] * n + [0] + [0, 1] + [0] * (n - 2)))
    assert env.invalid_actions == before + 1  # refused: already speculating
    assert env.sim.speculation.accepted == 2


def test_a_bad_speculate_value_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"^speculate must be true or false"):
        _env(speculate="yes")
    env = _env(speculate=True)
    env.reset(seed=0, options={"window": 0})
    n = env.n_nodes
    with pytest.raises(ValueError, match="speculate on 1"):
        env.step(np.array([0] + [0] * n + [0] + [0, 2] + [0] * (n - 2)))
