"""The node-set network (``agent.net=set``, the default) trains with each of
RouteWarm-v0's options (``env.speculate``, ``env.cache_actions``, ``env.hints``,
``env.spare_features``): its heads emit the option's action parts, its context
reads the hint or spare-node features, and
the saved agent evaluates on the observation and action layout it trained on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.adapter import AgentPolicy
from agents.algorithms import load_spec
from envs.route_warm import route_warm_sizes
from experiments.train import train
from tests.experiments.test_hydra_commands import ALGO_OVERRIDES, TINY, compose_train


@pytest.mark.slow
@pytest.mark.parametrize("option", ["speculate", "cache_actions", "hints", "spare_features"])
def test_the_set_network_trains_and_evaluates_with_a_route_warm_option(
    option: str, tmp_path: Path
) -> None:
    cfg = compose_train(
        [
            *TINY,
            "agent=maskable_ppo",
            "env=route_warm",
            f"env.{option}=true",
            "train.total_timesteps=192",
            f"out_dir={tmp_path}",
            *ALGO_OVERRIDES["maskable_ppo"],
        ]
    )
    train(cfg)
    spec = load_spec(tmp_path / "agent")
    assert spec.net == "set" and spec.env_kwargs[option] is True
    agent = AgentPolicy.load(tmp_path / "agent")
    n = agent.trained_nodes
    sizes = route_warm_sizes(n, option == "speculate", option == "cache_actions")
    assert agent.action_sizes(n) == sizes
    assert agent._numpy is not None  # the numpy path reads the option's heads
    obs_size = agent.model.observation_space.shape[0]
    assert obs_size == 10 * n + {"hints": 15, "spare_features": 9}.get(option, 6)
    assert agent._numpy.logits(agent.model.observation_space.sample()).shape == (sum(sizes),)
    results = json.loads((tmp_path / "results.json").read_text())
    agent_row = next(r for r in results["rows"] if r["policy"] == spec.name)
    assert agent_row["completed"] == agent_row["requests"] > 0
