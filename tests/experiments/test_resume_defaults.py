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

SMALL = {"n_steps": 32, "batch_size": 32}


def _saved(folder: Path, spec: AgentSpec, hyper: dict[str, Any] = SMALL) -> Path:
    """An untrained ``spec`` agent saved as a checkpoint in ``folder`` (its env built
    with the options ``spec.env_kwargs`` records)."""
    window = synthetic_window(BurstedSyntheticConfig(n_bursts=1, burst_requests=5), window=0)
    options = {k: v for k, v in spec.env_kwargs.items() if k != "n_nodes"}
    env = gym.make(spec.env_id, windows=[window], **options)
    save_agent(build_model(spec, env, hyper), spec, folder)
    return folder


def _resume_args(folder: Path) -> list[str]:
    """A 64-step tiny run resuming ``folder`` on one env, no evaluation."""
    return [
        "logger=none", "workload=tiny", f"resume={folder}", "env.n_envs=1",
        "train.total_timesteps=64", "train.evaluate=false",
    ]  # fmt: skip


def _checkpoint(tmp_path: Path) -> Path:
    spec = AgentSpec(algo="ppo", env="route", env_kwargs={"n_nodes": 4})
    # conf/agent/ppo.yaml has n_steps 256 and batch_size 1024: both differ
    hyper = {"n_steps": 32, "batch_size": 32, "n_epochs": 5, "learning_rate": 3.0e-4}
    hyper |= {"ent_coef": 0.01}
    folder = _saved(tmp_path / "step_0", spec, hyper)
    # a checkpoint from before agent.json recorded the reward normalisation
    saved = json.loads((folder / "agent.json").read_text())
    assert saved.pop("normalize_reward") is False and saved.pop("reward_norm") is None
    (folder / "agent.json").write_text(json.dumps(saved))
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

    # env.n_envs typed other than trained: used, and recorded as a change
    four = tmp_path / "four"
    args = [arg for arg in base if arg != "env.n_envs=1"] + ["env.n_envs=2", f"out_dir={four}"]
    done = run_command("experiments.train", args, tmp_path)
    assert done.returncode == 0, done.stderr
    record = json.loads((four / "train.json").read_text())["train"]
    assert record["resume_changes"]["env.n_envs"] == [1, 2] and record["n_envs"] == 2
    said = next(line for line in done.stdout.splitlines() if "was trained with" in line)
    assert "env.n_envs=1;" in said and said.endswith("env.n_envs=2 (recorded in results.json)")

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
    spread_rules resumed with env.spread_rules=false typed is refused naming it (it
    used to fail inside SB3 on the action spaces); left unset, the checkpoint's
    rules are taken."""
    kwargs = {"n_nodes": 4, "eft_rules": True, "spread_rules": True}
    folder = _saved(tmp_path / "thresholds", AgentSpec("ppo", "thresholds", env_kwargs=kwargs))
    args = [
        "logger=none", "workload=tiny", f"resume={folder}", "env=thresholds",
        "env.eft_rules=true", "env.spread_rules=false", "train.total_timesteps=64",
        f"out_dir={tmp_path / 'run'}",
    ]  # fmt: skip
    done = run_command("experiments.train", args, tmp_path)
    assert done.returncode == 2
    assert (
        "with env.spread_rules=True, the config asks for env.spread_rules=False "
        "(resume with env.spread_rules=True)" in done.stderr
    ), done.stderr
    assert not (tmp_path / "run").exists()

    # neither rule set typed: both taken from the checkpoint, and the run goes on
    args = [
        "logger=none", "workload=tiny", f"resume={folder}", "env=thresholds", "env.n_envs=1",
        "train.total_timesteps=64", "train.evaluate=false", f"out_dir={tmp_path / 'taken'}",
    ]  # fmt: skip
    done = run_command("experiments.train", args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "the checkpoint's env.eft_rules=True, env.spread_rules=True" in done.stdout
    record = json.loads((tmp_path / "taken" / "train.json").read_text())
    taken = record["train"]["resume_adopted"]  # with the SB3 settings it was built with
    assert taken["env.eft_rules"] is True and taken["env.spread_rules"] is True
    saved = json.loads((tmp_path / "taken" / "agent" / "agent.json").read_text())
    assert saved["env_kwargs"]["spread_rules"] is True and saved["timesteps"] == 64


def test_a_checkpoint_records_reward_normalisation_and_resume_goes_on_with_it(
    tmp_path: Path, run_command: Any
) -> None:
    """A run with env.normalize_reward saves it and VecNormalize's running return
    statistics in agent.json; resumed without the option, it is taken from the
    checkpoint and the statistics go on from the saved ones (their count is every
    step of both runs, one return per env per step, not only the second run's)."""
    base = [
        "logger=none", "workload=tiny", "env.n_envs=1", "train.evaluate=false",
        "agent.hyperparams.n_steps=32", "agent.hyperparams.batch_size=32",
    ]  # fmt: skip

    def train(out: str, steps: int, *extra: str) -> str:
        """Train into tmp_path/out; what it printed."""
        args = [*base, *extra, f"train.total_timesteps={steps}", f"out_dir={tmp_path / out}"]
        done = run_command("experiments.train", args, tmp_path)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def written(out: str, name: str) -> Any:
        return json.loads((tmp_path / out / name).read_text())

    train("first", 64, "env.normalize_reward=true")
    saved = written("first", "agent/agent.json")
    assert saved["normalize_reward"] is True and saved["timesteps"] == 64
    assert saved["reward_norm"]["count"] == pytest.approx(64, abs=1e-3)  # 1e-4 to start
    assert saved["reward_norm"]["var"] > 0
    first = tmp_path / "first" / "agent"

    said = train("second", 128, f"resume={first}")
    assert "the checkpoint's env.normalize_reward=True (defaults you did not set)" in said
    assert "does not record env.normalize_reward" not in said
    assert written("second", "train.json")["train"]["resume_adopted"] == {
        "env.normalize_reward": True
    }
    again = written("second", "agent/agent.json")
    assert again["normalize_reward"] is True and again["timesteps"] == 128
    assert again["reward_norm"]["count"] == pytest.approx(128, abs=1e-3)

    # typed off: used as asked, said and recorded as a change; the new checkpoint records it
    said = train("third", 96, f"resume={first}", "env.normalize_reward=false")
    assert (
        f"note: resume={first} was trained with env.normalize_reward=True; training "
        "goes on with env.normalize_reward=False (recorded in results.json)" in said
    )
    assert written("third", "train.json")["train"]["resume_changes"] == {
        "env.normalize_reward": [True, False]
    }
    last = written("third", "agent/agent.json")
    assert last["normalize_reward"] is False and last["reward_norm"] is None

    # switched on from a checkpoint without it: nothing to go on from, and it says so
    third = tmp_path / "third" / "agent"
    said = train("fourth", 128, f"resume={third}", "env.normalize_reward=true")
    assert f"note: resume={third}: the reward statistics start afresh" in said
    again = written("fourth", "agent/agent.json")["reward_norm"]
    assert again["count"] == pytest.approx(128 - 96, abs=1e-3)  # this run's steps only


def test_resume_takes_the_checkpoint_s_critic_unless_another_is_typed(
    tmp_path: Path, run_command: Any
) -> None:
    """agent.critic shapes the network: left unset it is the checkpoint's (it used to
    be refused, naming the value to pass); typed and different, it is refused."""
    spec = AgentSpec(algo="ppo", env="route", critic="separate", env_kwargs={"n_nodes": 4})
    folder = _saved(tmp_path / "separate", spec)
    base = _resume_args(folder)
    done = run_command("experiments.train", [*base, f"out_dir={tmp_path / 'run'}"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "the checkpoint's agent.critic=separate" in done.stdout
    saved = json.loads((tmp_path / "run" / "agent" / "agent.json").read_text())
    assert saved["critic"] == "separate" and saved["timesteps"] == 64

    refused = tmp_path / "refused"
    args = [*base, "agent.critic=shared", f"out_dir={refused}"]
    done = run_command("experiments.train", args, tmp_path)
    assert done.returncode == 2
    assert "with agent.critic=separate, the config asks for agent.critic=shared" in done.stderr
    assert not refused.exists()


def test_resume_of_no_folder_or_of_a_run_folder_says_which(
    tmp_path: Path, run_command: Any
) -> None:
    run = tmp_path / "run"
    _saved(run / "agent", AgentSpec(algo="ppo", env="route", env_kwargs={"n_nodes": 4}))
    base = ["logger=none", "workload=tiny", f"out_dir={tmp_path / 'out'}"]
    done = run_command("experiments.train", [*base, f"resume={tmp_path / 'nope'}"], tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: experiments.train: "
        f"resume='{tmp_path / 'nope'}': no such file or folder (from the command line)"
    )
    done = run_command("experiments.train", [*base, f"resume={run}"], tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: experiments.train: "
        f"resume='{run}': not an agent checkpoint (no agent.json; a run folder: its "
        f"agents are in {run / 'agent'}) (from the command line)"
    )
    assert not (tmp_path / "out").exists()


def test_resume_goes_on_with_the_reward_it_trained_on(tmp_path: Path, run_command: Any) -> None:
    """A checkpoint trained with env.reward_baseline=cache_aware and
    env.reward_timing=accrued: resumed without either, it takes both; with one
    typed otherwise, that one is a change of the reward (said and recorded)."""
    kwargs = {"n_nodes": 4, "reward_scale": 10.0, "reward_baseline": "cache_aware",
              "reward_timing": "accrued"}  # fmt: skip
    folder = _saved(tmp_path / "ck", AgentSpec("ppo", "route", env_kwargs=kwargs), SMALL)
    base = _resume_args(folder)
    done = run_command("experiments.train", [*base, f"out_dir={tmp_path / 'same'}"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "env.reward_baseline=cache_aware, env.reward_timing=accrued" in done.stdout
    record = json.loads((tmp_path / "same" / "train.json").read_text())["train"]
    assert record["resume_adopted"]["env.reward_baseline"] == "cache_aware"
    assert "env.reward_baseline" not in record["resume_changes"]
    saved = json.loads((tmp_path / "same" / "agent" / "agent.json").read_text())
    assert saved["env_kwargs"]["reward_timing"] == "accrued"

    args = [*base, "env.reward_timing=first_token", f"out_dir={tmp_path / 'other'}"]
    done = run_command("experiments.train", args, tmp_path)
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "other" / "train.json").read_text())["train"]
    assert record["resume_changes"]["env.reward_timing"] == ["accrued", "first_token"]
    assert record["resume_adopted"]["env.reward_baseline"] == "cache_aware"


def test_a_resumed_rollout_is_checked_with_the_checkpoint_s_n_steps(
    tmp_path: Path, run_command: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rollout ceiling and the minibatch note read the checkpoint's n_steps (they
    read the config's, which a resume replaces) times the envs the run uses."""
    import agents.algorithms

    spec = AgentSpec(algo="ppo", env="route", env_kwargs={"n_nodes": 4})
    checkpoint = _saved(tmp_path / "step_0", spec, {"n_steps": 32, "batch_size": 48})
    done = run_command(
        "experiments.train", [*_resume_args(checkpoint), f"out_dir={tmp_path / 'a'}"], tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert (
        "agent.hyperparams.batch_size=48 is larger than a rollout of n_steps x env.n_envs = "
        "32 steps" in done.stdout + done.stderr
    )
    monkeypatch.setattr(agents.algorithms, "MAX_ROLLOUT", 64)
    args = [a for a in _resume_args(checkpoint) if a != "env.n_envs=1"] + ["env.n_envs=3"]
    done = run_command("experiments.train", [*args, f"out_dir={tmp_path / 'b'}"], tmp_path)
    assert done.returncode == 2
    assert (
        "agent.hyperparams.n_steps=32 x env.n_envs=3 = 96 steps a rollout; at most 64"
        in done.stderr
    )
    assert not (tmp_path / "b").exists()


def test_resuming_a_thresholds_agent_keeps_its_y_tokens(tmp_path: Path, run_command: Any) -> None:
    """A checkpoint trained with env.y_tokens goes on with it when the resume does
    not say (it went on with the default key, silently: helper-69's review); another
    Y typed is refused naming it, and so is one typed on a checkpoint keyed by default."""
    kwargs = {"n_nodes": 4, "y_tokens": 8192}
    folder = _saved(tmp_path / "keyed", AgentSpec("ppo", "thresholds", env_kwargs=kwargs))
    base = [*_resume_args(folder), "env=thresholds"]
    done = run_command("experiments.train", [*base, f"out_dir={tmp_path / 'on'}"], tmp_path)
    assert done.returncode == 0, done.stderr
    saved = json.loads((tmp_path / "on" / "agent" / "agent.json").read_text())
    assert saved["env_kwargs"]["y_tokens"] == 8192
    record = json.loads((tmp_path / "on" / "train.json").read_text())
    assert record["train"]["resume_adopted"]["env.y_tokens"] == 8192
    other = [*base, "env.y_tokens=4096", f"out_dir={tmp_path / 'other'}"]
    done = run_command("experiments.train", other, tmp_path)
    assert done.returncode == 2 and "(resume with env.y_tokens=8192)" in done.stderr
    plain = _saved(tmp_path / "plain", AgentSpec("ppo", "thresholds", env_kwargs={"n_nodes": 4}))
    typed = [*_resume_args(plain), "env=thresholds", "env.y_tokens=4096"]
    done = run_command("experiments.train", [*typed, f"out_dir={tmp_path / 't'}"], tmp_path)
    assert done.returncode == 2 and "(resume with env.y_tokens=null)" in done.stderr
    assert not (tmp_path / "other").exists() and not (tmp_path / "t").exists()


def test_a_resume_keeps_the_checkpoint_s_learning_rate_schedule_or_refuses_another(
    tmp_path: Path, run_command: Any
) -> None:
    """helper-78's audit: a typed agent.lr_schedule (or, under linear, a typed rate)
    was recorded but not used: the schedule is saved in model.zip as an object, which
    the plain-value comparison passed over."""
    from agents.finetune import learning_rate

    spec = AgentSpec(algo="ppo", env="route", env_kwargs={"n_nodes": 4})
    linear = {**SMALL, "learning_rate": learning_rate(3.0e-4, "linear")}
    checkpoint = _saved(tmp_path / "linear", spec, linear)
    refused = tmp_path / "refused"
    args = [*_resume_args(checkpoint), "agent.lr_schedule=constant", f"out_dir={refused}"]
    done = run_command("experiments.train", args, tmp_path)
    assert done.returncode == 2
    assert "trained with agent.lr_schedule=linear, the config asks for constant" in done.stderr
    assert not refused.exists()
    rate = [
        *_resume_args(checkpoint),
        "agent.lr_schedule=linear",
        "agent.hyperparams.learning_rate=1e-3",
    ]
    done = run_command("experiments.train", [*rate, f"out_dir={refused}"], tmp_path)
    assert done.returncode == 2
    assert "agent.hyperparams.learning_rate=0.0003, the config asks for 0.001" in done.stderr
    # not typed: the checkpoint's schedule is taken, said and recorded
    out = tmp_path / "run"
    done = run_command("experiments.train", [*_resume_args(checkpoint), f"out_dir={out}"], tmp_path)
    assert done.returncode == 0, done.stderr
    record = json.loads((out / "train.json").read_text())["train"]
    assert record["resume_adopted"]["agent.lr_schedule"] == "linear"
