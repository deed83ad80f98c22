"""The spare-node features (``spare_features=True``): what the causal teacher's
spare-node rule weighs, appended to btb/Route-v0's and btb/RouteWarm-v0's
observation."""

from __future__ import annotations

import re

import numpy as np
import pytest

from envs.encoder import (
    HINT_FEATURES,
    NODE_FEATURES,
    REQUEST_FEATURES,
    SHORT_HOLD_S,
    SHORT_WINDOW_S,
    SPARE_FEATURES,
    SpareTracker,
    from_log_seconds,
    log_seconds,
)
from envs.route import RouteEnv
from envs.route_warm import RouteWarmEnv
from envs.thresholds import ThresholdsEnv

SPARE_ROW = re.compile(r"^\s*\|\s*s \+ (\d)\s*\|\s*`(\w+)`\s*\|[^|]+\|\s*([^|]+?)\s*\|")
WIDTH = len(NODE_FEATURES)


def rows(nodes: list[tuple[float, float, int]]) -> np.ndarray:
    """Node rows of (backlog s, first token s, load) per node, the rest 0, as the
    encoder writes them (float32, log seconds)."""
    out = np.zeros(len(nodes) * WIDTH, dtype=np.float32)
    for j, (backlog, first, load) in enumerate(nodes):
        out[j * WIDTH + NODE_FEATURES.index("load")] = load / (load + 16.0)
        out[j * WIDTH + NODE_FEATURES.index("backlog")] = log_seconds(backlog)
        out[j * WIDTH + NODE_FEATURES.index("first_token")] = log_seconds(first)
    return out


@pytest.mark.parametrize("env_class", [RouteEnv, RouteWarmEnv])
def test_the_table_lists_the_spare_features(env_class: type) -> None:
    found = [m.groups() for m in map(SPARE_ROW.match, (env_class.__doc__ or "").splitlines()) if m]
    assert [name for _, name, _ in found] == list(SPARE_FEATURES)
    assert [scale for _, _, scale in found] == ["x / (x + 4)", "log seconds", "log seconds"]


def test_off_by_default_three_entries_after_the_hints() -> None:
    base = WIDTH * 4 + len(REQUEST_FEATURES)
    assert RouteEnv(n_windows=1).observation_space.shape == (base,)
    env = RouteWarmEnv(n_windows=1, spare_features=True)
    assert env.observation_space.shape == (base + 3,)
    both = RouteEnv(n_windows=1, spare_features=True, hints=True)
    assert both.observation_space.shape == (base + len(HINT_FEATURES) + 3,)
    with pytest.raises(ValueError, match="spare_features is an option of btb/Route-v0"):
        ThresholdsEnv(n_windows=1, spare_features=True)
    with pytest.raises(ValueError, match="spare_features must be true or false"):
        RouteEnv(n_windows=1, spare_features=1)


def test_log_seconds_round_trip() -> None:
    for seconds in (0.0, 0.01, 0.25, 1.0, 4.7, 100.0):
        assert from_log_seconds(log_seconds(seconds)) == pytest.approx(seconds, rel=1e-9, abs=1e-12)
    assert from_log_seconds(1.0) == pytest.approx(1000.0)


def test_spare_features_by_hand() -> None:
    """Three nodes. Two short arrivals (hold 0.05 s) at t=0 and t=1, then at t=3 a
    long one: its soonest node is node 1 (first token 2.0 s, backlog 0.5 s: hold
    1.5 s); the other nodes' backlogs are 0.8 and 3.0 s, so blocked = 0.8 s;
    the rate is 2 arrivals / 5 s = 0.4/s, the pressure 0.4 x 0.8^2 / 2 = 0.128 s.
    At t=5.5 the arrival at t=0 has left the window: the rate is 1 / 5 s."""
    tracker = SpareTracker()
    tracker.reset()
    short = rows([(0.0, 0.05, 0), (0.0, 0.05, 2), (0.5, 0.6, 0)])
    first = tracker.observe(short, 3, 0.0)
    # nothing earlier: rate 0; the soonest is node 0 (tie with node 1 broken by load)
    assert first[0] == 0.0 and first[2] == 0.0
    assert first[1] == pytest.approx(log_seconds(0.05), abs=1e-6)
    tracker.observe(short, 3, 1.0)
    long = rows([(0.8, 5.0, 1), (0.5, 2.0, 3), (3.0, 3.5, 0)])
    rate, hold, pressure = tracker.observe(long, 3, 3.0)
    assert rate == pytest.approx(0.4 / 4.4)
    assert hold == pytest.approx(log_seconds(1.5), abs=1e-6)
    assert pressure == pytest.approx(log_seconds(0.128), abs=1e-6)
    # the long arrival is not counted; the t=0 short one has left the window
    rate, _, _ = tracker.observe(long, 3, SHORT_WINDOW_S + 0.5)
    assert rate == pytest.approx(0.2 / 4.2)
    assert SHORT_HOLD_S == 0.25


def test_the_features_follow_an_episode_and_reset() -> None:
    """Over a real window, the rate is 0 at the first arrival of each episode, and
    every entry stays in [0, 1]."""
    env = RouteWarmEnv(n_windows=1, spare_features=True)
    seen = []
    for episode in range(2):
        obs, _ = env.reset(seed=episode)
        assert obs[-3] == 0.0
        done = False
        while not done:
            seen.append(obs[-3:].copy())
            obs, _, done, _, _ = env.step(env.policy_action(_Soonest()))
    values = np.array(seen)
    assert values.min() >= 0.0 and values.max() < 1.0
    assert (values[:, 0] > 0).mean() > 0.5  # most arrivals come with recent short ones


class _Soonest:
    """Routes to the node with the earliest expected first token."""

    def decide(self, sim, request):  # type: ignore[no-untyped-def]
        from envs.encoder import first_token_estimates

        estimates = first_token_estimates(sim, request)
        return min(range(sim.n_nodes), key=lambda i: estimates[i][1])


def test_a_node_down_is_left_out() -> None:
    """Node 0 is down (its rows look idle: backlog 0, the earliest first token):
    the soonest node is node 1 among the nodes up, and blocked is the sooner of
    node 1's first token (2.0 s) and node 2's backlog (1.0 s), not node 0's 0 s."""
    tracker = SpareTracker()
    tracker.reset()
    short = rows([(0.0, 0.05, 0), (0.0, 0.05, 0), (0.0, 0.05, 0)])
    tracker.observe(short, 3, 0.0)
    nodes = rows([(0.0, 0.01, 0), (0.5, 2.0, 1), (1.0, 3.0, 1)])
    rate, hold, pressure = tracker.observe(nodes, 3, 1.0, up=[1, 2])
    assert rate == pytest.approx(0.2 / 4.2)
    assert hold == pytest.approx(log_seconds(1.5), abs=1e-6)
    assert pressure == pytest.approx(log_seconds(0.2 * 1.0 * 1.0 / 2), abs=1e-6)
    assert tracker.observe(nodes, 3, 2.0, up=[]) == [0.0, 0.0, 0.0]
