"""``btb/Thresholds-v0`` with ``spread_rules``: three more routing rules, two with
``eft_pull_spread`` as BTB's fallback and one (``spread``) in which it routes
every request while BTB stands aside."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import baselines.btb as btb_module
import envs  # noqa: F401  (registers the environments)
from baselines.btb import BTB
from baselines.btb_pending import BTBPending
from baselines.eft_pull_spread import EarliestFirstTokenPullSpread
from baselines.policy import Policy
from envs.sim.request import Workload
from envs.thresholds import route_choices
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window
from tests.envs.thresholds_replay import PUBLISHED, replay_rule, run_fixed

SETUP = "qwen3_8b_h100x4"  # where eft_pull_spread's idle-node rule fires on fast bursts
# two 0.2 s bursts of 100 requests each (a follower every 2 ms, a 0.54 s cold prefix)
FAST = BurstedSyntheticConfig(
    n_bursts=2, burst_requests=100, n_decoys=6, burst_window_s=0.2, burst_interval_s=4.0
)
# two 4 s bursts of 40: the prefix is resident long before a burst ends, so BTB
# fires and copies under every rule but ``spread``
SLOW = BurstedSyntheticConfig(n_bursts=2, burst_requests=40, n_decoys=6, burst_window_s=4.0)


@pytest.fixture(scope="module")
def window() -> Workload:
    return synthetic_window(FAST, window=1)


def _with_spread(btb: BTB) -> BTB:
    btb.fallback_router = EarliestFirstTokenPullSpread()
    return btb


def test_the_rules_come_in_a_fixed_order() -> None:
    assert route_choices(False, False) == ("resident", "pending")
    assert route_choices(True, True)[4:] == ("resident+spread", "pending+spread", "spread")
    assert route_choices(False, True) == (
        "resident",
        "pending",
        "resident+spread",
        "pending+spread",
        "spread",
    )


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("config", [FAST, SLOW], ids=["fast", "slow"])
@pytest.mark.parametrize(
    ("rule", "make"),
    [
        (4, lambda: _with_spread(BTB(y_tokens=None))),
        (5, lambda: _with_spread(BTBPending())),
        (6, EarliestFirstTokenPullSpread),
    ],
)
def test_each_spread_rule_replays_its_fixed_policy_exactly(
    rule: int,
    make: type[Policy],
    config: BurstedSyntheticConfig,
    compiled: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The env's rule against the fixed policy, with BTB's compiled decision and
    epoch loop, or with everything in Python (then ``BTB._otherwise`` is the one
    that asks the fallback router), which gives what the compiled path gives."""
    window = synthetic_window(config, window=1)
    twin = replay_rule(window, rule, setup=SETUP, spread_rules=True, compiled=True)
    if not compiled:
        monkeypatch.setattr(btb_module, "btb_twin", lambda policy, sim: None)
    ttft, copies, sim_seed = replay_rule(
        window, rule, setup=SETUP, spread_rules=True, compiled=compiled
    )
    direct, direct_copies = run_fixed(window, make(), sim_seed, SETUP)
    assert np.array_equal(ttft, direct)
    assert copies == direct_copies
    assert np.array_equal(ttft, twin[0]) and copies == twin[1]
    if config is SLOW and rule == 4:  # BTB fired and copied beside its fallback
        assert copies == 6 and not np.array_equal(ttft, replay_rule(window, 6, SETUP, True)[0])


def test_a_reset_forgets_what_the_fallback_router_saw(window: Workload) -> None:
    env = gym.make(
        "btb/Thresholds-v0", setup=SETUP, windows=[window], eft_rules=True, spread_rules=True
    ).unwrapped
    runs = []
    for _ in range(2):
        env.reset(seed=3)
        assert env.controller.spread._last == {} and env.controller.spread._memo == {}
        done = False
        while not done:
            _, _, done, _, _ = env.step(np.array([*PUBLISHED, 6]))
        assert env.controller.spread._last  # it saw the window's prefixes
        runs.append(env.sim.records.ttft_s)
    assert np.array_equal(runs[0], runs[1])


def test_the_spread_rules_differ_from_the_eft_ones_and_from_each_other(window: Workload) -> None:
    runs = {rule: replay_rule(window, rule, SETUP, True)[0] for rule in (2, 3, 4, 5, 6)}
    assert not np.array_equal(runs[2], runs[4])  # the fallback changes resident's requests
    assert not np.array_equal(runs[5], runs[6])  # standing aside is not the fallback
    # On these fast bursts (a 0.54 s cold prefix) standing aside is faster than
    # btb_eft (0.517 s) and the pending rules (0.553 s); resident+spread ties with it
    # (0.494 s): resident nowhere while the prefix is computed, BTB routes nothing.
    means = {rule: float(np.mean(ttft)) for rule, ttft in runs.items()}
    assert means[6] < min(means[2], means[3], means[5])
    assert means[6] == pytest.approx(means[4]) and means[6] == pytest.approx(0.494, abs=1e-3)


def test_the_action_space_observation_and_log_name_the_rule() -> None:
    window = synthetic_window(window=0)  # published: more epochs than the rules
    env = gym.make(
        "btb/Thresholds-v0", setup=SETUP, windows=[window], eft_rules=True, spread_rules=True
    ).unwrapped
    assert list(env.action_space.nvec) == [7, 6, 4, 5, 7]
    alone = gym.make("btb/Thresholds-v0", setup=SETUP, windows=[window], spread_rules=True)
    assert list(alone.action_space.nvec) == [7, 6, 4, 5, 5]
    env.reset(seed=0)
    rule_feature = 4 * 7 + 16  # per-node features of 4 nodes, then the rule's entry
    for rule in range(7):
        obs, *_ = env.step(np.array([*PUBLISHED, rule]))
        name = env.thresholds()[4]
        assert name == route_choices(True, True)[rule]
        assert obs[rule_feature] == pytest.approx(rule / 6)
        controller = env.controller
        assert (controller.btb.fallback_router is controller.spread) == name.endswith("+spread")
        assert controller.aside == (name == "spread")
    assert env.controller.log[-1][1][4] == "spread"


def test_spread_rules_must_be_a_bool(window: Workload) -> None:
    with pytest.raises(ValueError, match="spread_rules must be true or false"):
        gym.make("btb/Thresholds-v0", windows=[window], spread_rules=1)
