"""An agent trained by ``+experiment=NAME`` is named NAME (as the zoo ships it), one
trained without an experiment ``algo_env``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def test_an_experiment_names_its_agent(tmp_path: Path, run_command: Any) -> None:
    common = [
        "logger=none", "workload=tiny", "train.total_timesteps=64", "train.val_every=0",
        "env.n_envs=1", "agent.hyperparams.n_steps=32", "agent.hyperparams.batch_size=32",
    ]  # fmt: skip
    named = tmp_path / "named"
    done = run_command(
        "experiments.train",
        ["+experiment=ppo_thresholds_eft", *common, f"out_dir={named}"],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads((named / "agent" / "agent.json").read_text())["name"] == "ppo_thresholds_eft"
    plain = tmp_path / "plain"
    done = run_command("experiments.train", [*common, f"out_dir={plain}"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((plain / "agent" / "agent.json").read_text())["name"] == "ppo_route"
