"""The observation tables in the docstrings of btb/Route-v0 and btb/RouteWarm-v0
say what the encoder builds: the same features in the same places, scaled as
the table's last column says."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from baselines import make_policy
from envs.encoder import NODE_FEATURES, REQUEST_FEATURES, log_seconds, prefix_key, prefix_of
from envs.route import RouteEnv
from envs.route_warm import RouteWarmEnv
from envs.sim.node import IDLE

ROW = re.compile(r"^\s*\|\s*10 (j|n) \+ (\d+)\s*\|\s*`(\w+)`\s*\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|")


def table(doc: str) -> list[tuple[str, int, str, str]]:
    """(j or n, offset, feature, scale) for each row of the observation table."""
    return [
        (m.group(1), int(m.group(2)), m.group(3), m.group(5))
        for m in map(ROW.match, doc.splitlines())
        if m
    ]


@pytest.mark.parametrize("env_class", [RouteEnv, RouteWarmEnv])
def test_the_table_lists_the_encoders_features_in_order(env_class: type) -> None:
    rows = table(env_class.__doc__ or "")
    node_rows = [(offset, name) for part, offset, name, _ in rows if part == "j"]
    request_rows = [(offset, name) for part, offset, name, _ in rows if part == "n"]
    assert node_rows == list(enumerate(NODE_FEATURES))
    assert request_rows == list(enumerate(REQUEST_FEATURES))
    size = f"(n_nodes * {len(NODE_FEATURES)} + {len(REQUEST_FEATURES)},)"
    assert size in " ".join((env_class.__doc__ or "").split())


def test_route_and_route_warm_document_the_same_table() -> None:
    assert table(RouteEnv.__doc__ or "") == table(RouteWarmEnv.__doc__ or "")


def squash(scale: str) -> float | None:
    """The ``s`` of a ``x / (x + s)`` scale, or None for another kind."""
    m = re.fullmatch(r"x / \(x \+ (\d+)\)", scale)
    return float(m.group(1)) if m else None


def test_the_scales_match_an_observation_mid_episode() -> None:
    """btb_pending drives RouteWarm-v0 into a state with queues, copies in flight
    and repeated prefixes; each entry of the next observation is recomputed from
    the simulator with the table's scale."""
    env = RouteWarmEnv(n_windows=1)
    obs, _ = env.reset(seed=0, options={"window": 0})
    sim = env.sim
    assert sim is not None
    policy = make_policy("btb_pending")
    policy.reset(sim)
    checked_flight = False
    for step in range(1500):
        obs, _, done, _, _ = env.step(env.policy_action(policy))
        assert not done
        if step >= 1000 and any(node.inflight for node in sim.nodes):
            checked_flight = True
            break
    assert checked_flight
    request = env.request
    assert request is not None
    rows = {name: scale for _, _, name, scale in table(RouteEnv.__doc__ or "")}
    n_features = len(NODE_FEATURES)
    nodes = obs[: sim.n_nodes * n_features].reshape(sim.n_nodes, n_features)
    key, depth = prefix_key(request), len(prefix_of(request))
    for node, row in zip(sim.nodes, nodes):
        got = dict(zip(NODE_FEATURES, row.tolist()))
        raw = {
            "load": node.running + len(node.queue),
            "wait": node.estimated_wait_s(sim.now),
            "copies_in": len(node.inflight),
        }
        for name, x in raw.items():
            s = squash(rows[name])
            assert s is not None, name
            assert got[name] == pytest.approx(x / (x + s), abs=1e-6), name
        assert rows["kv_used"] == "as is"
        assert got["kv_used"] == pytest.approx(node.reserved_tokens / node.budget_tokens, abs=1e-6)
        hit = node.cache.hbm_match(request.blocks)
        assert got["hit"] == pytest.approx(hit / len(request.blocks), abs=1e-6)
        assert got["prefix_in_flight"] == (1.0 if key in node.inflight else 0.0)
        assert got["busy"] == (0.0 if node.work == IDLE else 1.0)
        for name in ("backlog", "first_token", "first_token_gap"):
            assert rows[name] == "log seconds"
    gaps = nodes[:, NODE_FEATURES.index("first_token_gap")]
    assert gaps.min() == 0.0  # the best node's gap
    assert log_seconds(0.0) == 0.0 and log_seconds(1000.0) == 1.0
    assert round(log_seconds(1.0), 2) == 0.40 and round(log_seconds(10.0), 2) == 0.60

    got = dict(zip(REQUEST_FEATURES, obs[sim.n_nodes * n_features :].tolist()))
    tokens = math.log1p(request.input_tokens) / math.log1p(262_144)
    assert got["prefix_tokens"] == pytest.approx(min(tokens, 1.0), abs=1e-6)
    times = [r.arrival_s for r in sim.requests[: request.index + 1] if prefix_key(r) == key]
    for name, seconds in (("same_1s", 1.0), ("same_10s", 10.0), ("same_60s", 60.0)):
        x = sum(1 for t in times if t >= sim.now - seconds)
        s = squash(rows[name])
        assert s is not None
        assert got[name] == pytest.approx(x / (x + s), abs=1e-6), name
    age = sim.now - times[0]
    assert got["age"] == pytest.approx(age / (age + 10.0), abs=1e-6)
    assert squash(rows["age"]) == 10.0
    holders = sum(node.cache.hbm_match(request.blocks) >= depth for node in sim.nodes)
    assert got["holders"] == pytest.approx(holders / sim.n_nodes, abs=1e-6)
    assert np.all((obs >= 0.0) & (obs <= 1.0))
