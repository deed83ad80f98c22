"""Malformed agent checkpoints: every command that loads one (compare, evaluate,
train's resume) refuses it in one line naming the file and the field, before any
run and without leaving a run folder."""

from __future__ import annotations

import json
import shutil
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir

from experiments import compare
from experiments._cli import main_guard
from experiments.config import register_configs
from experiments.jobs import run_job

ROOT = Path(__file__).resolve().parents[2]
ZOO = ROOT / "agents" / "zoo"

register_configs()


def _edit(**fields: Any) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        data = json.loads((folder / "agent.json").read_text())
        data.update(fields)
        (folder / "agent.json").write_text(json.dumps(data))

    return edit


def _truncate(folder: Path) -> None:
    model = folder / "model.zip"
    model.write_bytes(model.read_bytes()[:2000])


def _not_a_model(folder: Path) -> None:
    with zipfile.ZipFile(folder / "model.zip", "w") as archive:
        archive.writestr("notes.txt", "a zip, but no SB3 model in it")


def _mlp_model(folder: Path) -> None:
    """model.zip replaced by a saved flat-MLP network of the same algo, env and width
    (agent.json still says net=set)."""
    import gymnasium as gym

    import envs  # noqa: F401
    from agents.algorithms import AgentSpec, build_model
    from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

    saved = json.loads((folder / "agent.json").read_text())
    spec = AgentSpec(algo=saved["algo"], env=saved["env"], net="mlp", hidden=saved["hidden"])
    window = synthetic_window(BurstedSyntheticConfig(n_bursts=1, burst_requests=4), window=0)
    hyperparams = {"n_steps": 4, "batch_size": 4}
    build_model(spec, gym.make(spec.env_id, windows=[window]), hyperparams).save(
        folder / "model.zip"
    )


# (zoo agent, damage, the file named, what the message says)
CASES = {
    "truncated model.zip": ("ppo_thresholds", _truncate, "model.zip", "cannot load it as a ppo"),
    "a zip that is no model": ("ppo_thresholds", _not_a_model, "model.zip", "No data found"),
    "algo a list": ("ppo_thresholds", _edit(algo=["ppo"]), "agent.json", "algo must be a JSON"),
    "algo of another zip": (
        "bc_route_warm", _edit(algo="ppo"), "model.zip", "cannot load it as a ppo model"
    ),
    "name a number": ("ppo_thresholds", _edit(name=7), "agent.json", "name must be a JSON string"),
    "net mlp on a set network": (
        "bc_route_warm", _edit(net="mlp"), "model.zip",
        "the model's policy is MaskableNodeScoringPolicy, agent.json's algo and net make "
        "MaskableActorCriticPolicy",
    ),
    "net set on an mlp network": (
        "ppo_thresholds", _mlp_model, "model.zip",
        "the model's policy is ActorCriticPolicy, agent.json's algo and net make "
        "NodeScoringPolicy",
    ),
    "hidden of another network": (
        "ppo_thresholds", _edit(hidden=32), "model.zip", "network has hidden=64, agent.json's"
    ),
    "timesteps a string": (
        "ppo_thresholds", _edit(timesteps="5"), "agent.json", "timesteps must be an integer >= 0"
    ),
    "env_kwargs a number": (
        "ppo_thresholds", _edit(env_kwargs=5), "agent.json", "env_kwargs must be a JSON object"
    ),
    "normalize_reward a string": (
        "ppo_thresholds", _edit(normalize_reward="yes"), "agent.json",
        "normalize_reward must be a JSON true or false",
    ),
    "reward_norm without normalize_reward": (
        "ppo_thresholds",
        _edit(normalize_reward=None, reward_norm={"mean": 0.0, "var": 1.0, "count": 5.0}),
        "agent.json", "reward_norm is set but normalize_reward is null",
    ),
    "reward_norm with a huge integer": (
        "ppo_thresholds",
        _edit(normalize_reward=True, reward_norm={"mean": 0, "var": 10**400, "count": 5}),
        "agent.json", "reward_norm must be an object of finite numbers",
    ),
    "reward_norm with a negative variance": (
        "ppo_thresholds", _edit(reward_norm={"mean": 0.0, "var": -1.0, "count": 5.0}),
        "agent.json", "reward_norm must be an object of finite numbers mean, var >= 0",
    ),
}  # fmt: skip


@pytest.fixture(params=list(CASES))
def damaged(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str, str]:
    """A copy of a shipped agent, damaged; the file and words its error must name."""
    source, damage, named, words = CASES[request.param]
    folder = tmp_path / "agent"
    shutil.copytree(ZOO / source, folder)
    damage(folder)
    return folder, str(folder / named), words


def test_compare_refuses_a_damaged_checkpoint_in_one_line(
    damaged: tuple[Path, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder, named, words = damaged
    out = tmp_path / "run"
    args = [f"agents={folder}", "policies=least_load", "windows=1", f"out_dir={out}"]
    assert main_guard(lambda: compare.main(args)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: experiments.compare: {named}") and words in err, err
    assert err.count("\n") == 1
    assert not out.exists()


def _hydra_cfg(name: str, overrides: list[str]) -> Any:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name=name, overrides=overrides)


def test_evaluate_and_train_resume_refuse_a_damaged_checkpoint_in_one_line(
    damaged: tuple[Path, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from experiments.evaluate import evaluate
    from experiments.train import train

    folder, named, words = damaged
    common = ["logger=none", "workload=tiny", f"out_dir={tmp_path / 'run'}"]
    evaluate_cfg = _hydra_cfg("evaluate", [*common, f"checkpoint=[{folder}]"])
    # the config asks for what agent.json says (where it says it), so the resume
    # gets as far as reading the damaged field or file
    saved = json.loads((folder / "agent.json").read_text())
    asks = {"algo": "ppo", "env": "thresholds", "net": "set", "hidden": 64, "timesteps": 0}
    asks.update({k: v for k, v in saved.items() if k in asks and type(v) is type(asks[k])})
    agent = {"ppo": "ppo", "maskable_ppo": "maskable_ppo"}[str(asks["algo"])]
    resume_cfg = _hydra_cfg(
        "train",
        [*common, f"agent={agent}", f"env={asks['env']}", f"agent.net={asks['net']}",
         f"agent.hidden={asks['hidden']}",
         f"agent.critic={saved.get('critic', 'shared')}",
         f"train.total_timesteps={int(asks['timesteps']) + 1}", f"resume={folder}"],
    )  # fmt: skip
    for fn, cfg in ((evaluate, evaluate_cfg), (train, resume_cfg)):
        with pytest.raises(SystemExit) as stop:
            run_job(fn, cfg)
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {named}") and words in err, err
        assert err.count("\n") == 1
        assert not (tmp_path / "run").exists()


def test_reward_norm_takes_finite_numbers_only_and_is_saved_only_when_finite(
    tmp_path: Path,
) -> None:
    """A bool is no number there; statistics gone non-finite are saved as null, so
    the agent stays loadable (agent.json is strict JSON)."""
    import gymnasium as gym
    import numpy as np
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    import envs  # noqa: F401  (registers the environments)
    from agents.algorithms import AgentSpec, _reward_norm_ok, build_model, load_spec, save_agent
    from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

    assert _reward_norm_ok({"mean": 0, "var": 1.5, "count": 3})
    assert not _reward_norm_ok({"mean": True, "var": 1.0, "count": 3})
    assert not _reward_norm_ok({"mean": 0.0, "var": 1.0, "count": 0})
    assert not _reward_norm_ok({"mean": 0.0, "var": 1.0})

    window = synthetic_window(BurstedSyntheticConfig(n_bursts=1, burst_requests=5), window=0)
    spec = AgentSpec(algo="ppo", env="route", env_kwargs={"n_nodes": 4})
    vec = VecNormalize(DummyVecEnv([lambda: gym.make(spec.env_id, windows=[window])]))
    model = build_model(spec, vec, {"n_steps": 32, "batch_size": 32})
    save_agent(model, spec, tmp_path / "finite")
    saved = load_spec(tmp_path / "finite")
    assert saved.normalize_reward is True
    assert saved.reward_norm == {"mean": 0.0, "var": 1.0, "count": 1e-4}  # SB3's start
    vec.ret_rms.var = np.array(np.nan)
    save_agent(model, spec, tmp_path / "nan")
    saved = load_spec(tmp_path / "nan")
    assert saved.normalize_reward is True and saved.reward_norm is None
