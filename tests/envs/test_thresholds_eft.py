"""``btb/Thresholds-v0`` with ``eft_rules``: four routing rules, the last two with
btb_eft's fallback; the default env keeps its two."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the environments)
from baselines import make_policy
from baselines.btb_pending import BTBPending
from envs.sim.request import Workload
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window
from tests.envs.thresholds_replay import PUBLISHED, replay_rule, run_fixed

SMALL = BurstedSyntheticConfig(n_bursts=2, burst_requests=40, n_decoys=6, burst_window_s=4.0)


@pytest.fixture(scope="module")
def window() -> Workload:
    return synthetic_window(SMALL, window=1)


class _PendingEft(BTBPending):
    eft_fallback = True


@pytest.mark.parametrize(
    ("rule", "policy"),
    [(0, "btb"), (1, "btb_pending"), (2, "btb_eft"), (3, "pending+eft")],
)
def test_each_rule_replays_its_fixed_policy_exactly(
    window: Workload, rule: int, policy: str
) -> None:
    ttft, copies, sim_seed = replay_rule(window, rule)
    fixed = _PendingEft() if policy == "pending+eft" else make_policy(policy)
    direct, direct_copies = run_fixed(window, fixed, sim_seed)
    assert np.array_equal(ttft, direct)
    assert copies == direct_copies


def test_the_eft_rules_differ_from_the_published_ones_on_this_window(window: Workload) -> None:
    published, _, _ = replay_rule(window, 0)
    with_eft, _, _ = replay_rule(window, 2)
    assert not np.array_equal(published, with_eft)


def test_the_action_space_observation_and_log_name_the_rule(window: Workload) -> None:
    default = gym.make("btb/Thresholds-v0", windows=[window]).unwrapped
    assert list(default.action_space.nvec) == [7, 6, 4, 5, 2]
    env = gym.make("btb/Thresholds-v0", windows=[window], eft_rules=True).unwrapped
    assert list(env.action_space.nvec) == [7, 6, 4, 5, 4]
    assert env.observation_space.shape == default.observation_space.shape
    env.reset(seed=0)
    rule_feature = 4 * 7 + 16  # per-node features of 4 nodes, then the rule's entry
    for rule, name in enumerate(("resident", "pending", "resident+eft", "pending+eft")):
        obs, *_ = env.step(np.array([*PUBLISHED, rule]))
        assert env.thresholds()[4] == name
        assert obs[rule_feature] == pytest.approx(rule / 3)
        assert env.controller.btb.eft_fallback == (rule >= 2)
        assert env.controller.btb.pending == (rule % 2 == 1)
    default.reset(seed=0)
    obs, *_ = default.step(np.array([*PUBLISHED, 1]))
    assert obs[rule_feature] == 1.0  # as before the option existed


def test_eft_rules_must_be_a_bool(window: Workload) -> None:
    with pytest.raises(ValueError, match="eft_rules must be true or false"):
        gym.make("btb/Thresholds-v0", windows=[window], eft_rules="yes")


def test_info_says_the_settings_each_action_put_in_force(window: Workload) -> None:
    env = gym.make("btb/Thresholds-v0", windows=[window], eft_rules=True).unwrapped
    _, info = env.reset(seed=0)
    published = {"x": 2, "z_s": 1.0, "m": 4, "min_prefix_tokens": 65_536, "rule": "resident"}
    assert info["thresholds"] == published  # until the first action
    # X 3rd choice (3), Z 1st (0.25 s), M 2nd (half of 4 nodes), minimum 2nd (4,096)
    _, _, _, _, info = env.step(np.array([2, 0, 1, 1, 3]))
    assert info["thresholds"] == {
        "x": 3, "z_s": 0.25, "m": 2, "min_prefix_tokens": 4_096, "rule": "pending+eft"
    }  # fmt: skip
