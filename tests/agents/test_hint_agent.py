"""An agent trained with request hints (``env.hints=true``) records them and is
evaluated on the observation it was trained on (the adapter builds it too)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.algorithms import load_spec
from experiments.train import train
from tests.experiments.test_hydra_commands import ALGO_OVERRIDES, TINY, compose_train


@pytest.mark.slow
def test_an_mlp_agent_trains_and_evaluates_with_hints(tmp_path: Path) -> None:
    cfg = compose_train(
        [
            *TINY,
            "agent=ppo",
            "agent.net=mlp",
            "env=route",
            "env.hints=true",
            "train.total_timesteps=64",
            f"out_dir={tmp_path}",
            *ALGO_OVERRIDES["ppo"],
        ]
    )
    train(cfg)
    spec = load_spec(tmp_path / "agent")
    assert spec.env_kwargs["hints"] is True
    results = json.loads((tmp_path / "results.json").read_text())
    agent_row = next(r for r in results["rows"] if r["policy"] == spec.name)
    assert agent_row["completed"] == agent_row["requests"] > 0
