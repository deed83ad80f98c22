"""Resuming a checkpoint whose SB3 settings differ from today's defaults: the
defaults the user did not set take the checkpoint's values (noted and recorded);
a value the user typed that differs is still refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers the environments)
from agents.algorithms import AgentSpec, build_model, save_agent
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window


def _checkpoint(tmp_path: Path) -> Path:
    window = synthetic_window(BurstedSyntheticConfig(n_bursts=1, burst_requests=5), window=0)
    spec = AgentSpec(algo="ppo", env="route", env_kwargs={"n_nodes": 4})
    env = gym.make(spec.env_id, windows=[window])
    # conf/agent/ppo.yaml has n_steps 256 and batch_size 1024: both differ
    hyper = {"n_steps": 32, "batch_size": 32, "n_epochs": 5, "learning_rate": 3.0e-4}
    hyper |= {"ent_coef": 0.01}
    folder = tmp_path / "step_0"
    save_agent(build_model(spec, env, hyper), spec, folder)
    return folder


def test_resume_takes_the_checkpoint_s_values_for_defaults_not_set(
    tmp_path: Path, run_command: Any
) -> None:
    checkpoint = _checkpoint(tmp_path)
    base = [
        "logger=none", "workload=tiny", f"resume={checkpoint}", "env.n_envs=1",
        "train.total_timesteps=32", "train.evaluate=false",
    ]  # fmt: skip
    out = tmp_path / "run"
    done = run_command("experiments.train", [*base, f"out_dir={out}"], tmp_path)
    assert done.returncode == 0, done.stderr
    note = (
        f"note: resume={checkpoint}: the checkpoint's agent.hyperparams.n_steps=32, "
        "agent.hyperparams.batch_size=32 (defaults you did not set)"
    )
    assert note in done.stdout + done.stderr
    assert (
        f"note: resume={checkpoint} does not record env.normalize_reward; training goes on "
        "with env.normalize_reward=False (a +experiment recipe sets it: pass it again to "
        "keep it)" in done.stdout
    )
    record = json.loads((out / "train.json").read_text())["train"]  # train.evaluate=false
    assert record["resume_adopted"] == {
        "agent.hyperparams.n_steps": 32,
        "agent.hyperparams.batch_size": 32,
    }

    # env.n_envs not given: the checkpoint's one env, not the default 16
    alone = tmp_path / "alone"
    args = [arg for arg in base if arg != "env.n_envs=1"] + [f"out_dir={alone}"]
    done = run_command("experiments.train", args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "agent.hyperparams.batch_size=32, env.n_envs=1 (defaults" in done.stdout + done.stderr
    record = json.loads((alone / "train.json").read_text())["train"]
    assert record["resume_adopted"]["env.n_envs"] == 1 and record["n_envs"] == 1

    # typed on the command line and different: refused, naming only that one
    refused = tmp_path / "refused"
    args = [*base, "agent.hyperparams.n_steps=64", f"out_dir={refused}"]
    done = run_command("experiments.train", args, tmp_path)
    assert done.returncode == 2
    assert "trained with agent.hyperparams.n_steps=32, the config asks for 64" in done.stderr
    assert "batch_size" not in done.stderr
    assert not refused.exists()


def test_options_a_checkpoint_does_not_record_are_named_apart(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A simulator option added after the checkpoint was trained has no recorded
    value: it is named in a note of its own, not shown as trained with None."""
    from experiments.train import print_resume_changes

    changes = {
        "workload.seed": [3, 7],
        "sim.mfu": [None, 0.5],  # recorded as None: a value like any other
        "sim.router_view_delay_s": [None, 0.0],
        "sim.fault_seed": [None, 0],
    }
    print_resume_changes("CK", changes, {"mfu": None, "causal_kv": True})
    assert capsys.readouterr().out.splitlines() == [
        "note: resume=CK was trained with workload.seed=3, sim.mfu=None; training goes on "
        "with workload.seed=7, sim.mfu=0.5 (recorded in results.json)",
        "note: resume=CK does not record sim.router_view_delay_s, sim.fault_seed (options "
        "added since it was trained); training goes on with this run's values (recorded "
        "in results.json)",
    ]


def test_resuming_a_thresholds_agent_with_other_rules_names_the_option(
    tmp_path: Path, run_command: Any
) -> None:
    """The routing rules set the action space: a checkpoint trained with
    spread_rules resumed without it is refused naming env.spread_rules (it used to
    fail inside SB3 on the action spaces)."""
    window = synthetic_window(BurstedSyntheticConfig(n_bursts=1, burst_requests=5), window=0)
    kwargs = {"n_nodes": 4, "eft_rules": True, "spread_rules": True}
    spec = AgentSpec(algo="ppo", env="thresholds", env_kwargs=kwargs)
    env = gym.make(spec.env_id, windows=[window], eft_rules=True, spread_rules=True)
    folder = tmp_path / "thresholds"
    save_agent(build_model(spec, env, {"n_steps": 32, "batch_size": 32}), spec, folder)
    args = [
        "logger=none", "workload=tiny", f"resume={folder}", "env=thresholds",
        "env.eft_rules=true", "train.total_timesteps=64", f"out_dir={tmp_path / 'run'}",
    ]  # fmt: skip
    done = run_command("experiments.train", args, tmp_path)
    assert done.returncode == 2
    assert (
        "with env.spread_rules=True, the config asks for env.spread_rules=False "
        "(resume with env.spread_rules=True)" in done.stderr
    ), done.stderr
    assert not (tmp_path / "run").exists()
