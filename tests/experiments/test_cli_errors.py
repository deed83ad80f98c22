"""User errors across the commands: caught before any run starts, reported in one
line naming the option and where its value came from, with a nonzero exit; bugs
keep their traceback."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shlex
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir

from experiments import audit, bench, compare, costs, make_dataset, reproduce, tune_btb_table
from experiments._cli import main_guard
from experiments._io import check_writable_dir
from experiments.config import register_configs
from experiments.jobs import run_job

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"

register_configs()


@pytest.fixture
def blocked(tmp_path: Path) -> Path:
    """A folder path that runs through an existing regular file."""
    (tmp_path / "afile").write_text("not a folder")
    return tmp_path / "afile" / "run"


def _never(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a run started although out_dir cannot be written")


@pytest.mark.parametrize(
    ("module", "args", "patch"),
    [
        (compare, ["windows=1", "agents=none", "policies=least_load"], "evaluate_policies"),
        (reproduce, ["setups=70b_h100x4", "jobs=1", "windows=1"], "_task"),
        (make_dataset, ["workload=bursted_synthetic"], "window_rows"),
        (bench, ["repeats=1", "envs="], "_in_fresh_process"),
        (costs, [], "cost_table"),
        (audit, ["path=" + __file__], "audit_file"),
    ],
)
def test_unwritable_out_dir_fails_before_the_run(
    module: Any,
    args: list[str],
    patch: str,
    blocked: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(module, patch, _never)
    assert main_guard(lambda: module.main([*args, f"out_dir={blocked}"])) == 2
    err = capsys.readouterr().err
    command = module.__name__
    assert err == (
        f"error: {command}: out_dir='{blocked}': {blocked.parent} is a file, not a folder\n"
    )


def test_check_writable_dir_creates_nothing(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    assert check_writable_dir(target, "x: out_dir") == target
    assert list(tmp_path.iterdir()) == []


def test_os_errors_are_one_line_and_bugs_keep_their_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.jsonl"
    assert main_guard(lambda: missing.open()) == 2
    assert capsys.readouterr().err == f"error: {missing}: No such file or directory\n"
    with pytest.raises(ZeroDivisionError):
        main_guard(lambda: 1 / 0)
    with pytest.raises(KeyError):
        main_guard(lambda: {}["key"])


def _compose(name: str, overrides: list[str]) -> Any:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name=name, overrides=overrides)


@contextlib.contextmanager
def _hydra_job(name: str, overrides: list[str]) -> Iterator[Any]:
    """The config ``name`` composed with ``overrides`` as a Hydra job sees it: the
    Hydra config is set (``HydraConfig.get()`` works) until the block ends."""
    from hydra.core.hydra_config import HydraConfig

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name=name, overrides=overrides, return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    try:
        yield cfg
    finally:
        HydraConfig.instance().cfg = None  # type: ignore[assignment]


@pytest.mark.parametrize("name", ["train", "evaluate", "tune_btb"])
def test_hydra_jobs_check_the_run_dir_first(name: str, blocked: Path) -> None:
    from experiments import evaluate, train, tune_btb

    fn = {"train": train.train, "evaluate": evaluate.evaluate, "tune_btb": tune_btb.objective}
    cfg = _compose(name, ["logger=none", "workload=tiny", f"out_dir={blocked}"])
    with pytest.raises(
        ValueError, match=rf"experiments\.{name}: out_dir=.*is a file, not a folder"
    ):
        fn[name](cfg)


def test_hydra_job_user_errors_exit_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    def bad(cfg: Any) -> float:
        raise ValueError("checkpoint: 'x' is not an agent checkpoint")

    with pytest.raises(SystemExit) as exit_info:
        run_job(bad, None)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == "error: checkpoint: 'x' is not an agent checkpoint\n"

    def bug(cfg: Any) -> float:
        raise KeyError("bug")

    with pytest.raises(KeyError):
        run_job(bug, None)


def test_hydra_command_rejects_out_dir_before_hydra_starts(
    blocked: Path, run_command: Callable[..., Any]
) -> None:
    env: dict[str, str] = {}
    proc = run_command(
        "experiments.evaluate", ["logger=none", f"out_dir={blocked}"], blocked.parent.parent, env
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        f"error: experiments.evaluate: out_dir='{blocked}' (from the command line): "
        f"{blocked.parent} is a file, not a folder\n"
    )


@pytest.mark.parametrize("flags", [["--help"], ["--cfg", "job"]])
def test_hydra_help_and_cfg_ignore_a_bad_out_dir(
    flags: list[str], blocked: Path, run_command: Callable[..., Any]
) -> None:
    env: dict[str, str] = {}
    proc = run_command(
        "experiments.evaluate", [*flags, f"out_dir={blocked}"], blocked.parent.parent, env
    )
    assert proc.returncode == 0, proc.stderr
    assert ("Powered by Hydra" if flags == ["--help"] else f"out_dir: {blocked}") in proc.stdout


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train.total_timesteps=-5", r"train\.total_timesteps must be >= 0, got -5"),
        ("train.checkpoint_every=-1", r"train\.checkpoint_every must be >= 0, got -1"),
        ("train.run_state_max_mb=-1", r"train\.run_state_max_mb must be .*>= 0.*, got -1"),
        ("train.run_state_max_mb=inf", r"train\.run_state_max_mb must be .*, got inf"),
        ("train.torch_threads=0", r"train\.torch_threads must be an integer in \[1, 1024\], got 0"),
        (
            "train.update_threads=0",
            r"train\.update_threads must be an integer in \[1, 1024\], got 0",
        ),
        ("train.update_threads=1025", r"train\.update_threads must be an integer in \[1, 1024\]"),
        ("workload.train_pool=0", r"workload\.train_pool must be >= 1 or null \(all\), got 0"),
        ("workload.eval_windows=0", r"workload\.eval_windows must be >= 1 or null"),
        ("workload.seed=-1", r"workload\.seed must be >= 0 \(a numpy seed\), got -1"),
        ("seed=-2", r"seed must be >= 0 \(a numpy seed\), got -2"),
        ("agent.hidden=0", r"agent\.hidden must be an integer in \[1, 65536\], got 0"),
        ("agent.hidden=1000000000000", r"agent\.hidden must be an integer in \[1, 65536\]"),
        ("env.n_envs=1000000000000", r"env\.n_envs must be an integer in \[1, 1024\]"),
        (  # each factor within its ceiling, the rollout (x the default 16 envs) not
            "agent.hyperparams.n_steps=1048576",
            r"^agent\.hyperparams\.n_steps=1048576 x env\.n_envs=16 = 16777216 steps a "
            r"rollout; at most 1048576$",
        ),
        (
            "train.torch_threads=1000000000000",
            r"train\.torch_threads must be an integer in \[1, 1024\]",
        ),
        ("cluster.n_nodes=1000000000000", r"cluster\.n_nodes must be an integer in \[1, 4096\]"),
        ("train.eval_policies=[btb,btb]", r"^train\.eval_policies lists 'btb' twice"),
        ("env.kind=nope", r"^env\.kind must be one of route, route_warm, thresholds, got 'nope'"),
        ("env.vec=nope", r"^env\.vec must be dummy or subproc, got 'nope'"),
        (  # the default env kind is route: a thresholds-only option would be dropped
            "env.eft_rules=true",
            r"^env\.eft_rules is an option of env\.kind=thresholds, not of env\.kind=route",
        ),
        ("env.epoch_s=2", r"^env\.epoch_s is an option of env\.kind=thresholds"),
    ],
)
def test_train_rejects_values_no_run_can_use(override: str, message: str, tmp_path: Path) -> None:
    from experiments.train import train

    cfg = _compose("train", ["logger=none", "workload=tiny", override, f"out_dir={tmp_path}"])
    with pytest.raises(ValueError, match=message):
        train(cfg)
    assert list(tmp_path.iterdir()) == []  # rejected before the run folder is made


def test_train_refuses_a_y_tokens_no_action_can_fire_before_reading_windows(
    tmp_path: Path,
) -> None:
    """Below 1,024 tokens every minimum prefix an action sets exceeds Y: refused
    among the config's own checks, before a window is read (a trace's warnings came
    first, then the error, when the env checked it)."""
    from experiments import train as train_module

    overrides = ["logger=none", "workload=tiny", "env=thresholds", "env.y_tokens=512"]
    cfg = _compose("train", [*overrides, f"out_dir={tmp_path}"])
    read = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(train_module, "window_pool_of", lambda *a, **k: read.append(a))
        with pytest.raises(ValueError, match=r"^env\.y_tokens = 512 is below the shortest"):
            train_module.train(cfg)
    assert read == [] and list(tmp_path.iterdir()) == []


def test_train_warns_of_a_y_tokens_no_shared_prefix_reaches(
    tmp_path: Path, run_command: Any
) -> None:
    """A thresholds agent trained with a Y longer than any prefix its train windows
    share trained a BTB that never fires, with no word (tune_btb warns of such a Y).
    The tiny windows' bursts share 65,536 tokens (256 blocks of 256), each request's
    own block after them: Y one block longer is warned of, once; Y at 65,536 is not,
    nor up to a token short of a block longer (a review: 65,664 fired and was warned of)."""
    from experiments.train import warn_unreached_y

    args = ["workload=tiny", "env=thresholds", "env.y_tokens=65792", "env.n_envs=1",
            "agent.hyperparams.n_steps=64", "agent.hyperparams.batch_size=64",
            "train.total_timesteps=64", "train.progress=false", "train.evaluate=false",
            "logger=none", f"out_dir={tmp_path / 'run'}"]  # fmt: skip
    done = run_command("experiments.train", args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        "warning: env.y_tokens=65792 (from the command line) is longer than any prefix two "
        "requests of the 2 train windows share (65,536 tokens at most): the agent's BTB "
        "never fires on them, so no X, Z, M or minimum prefix it chooses changes anything; "
        "a Y at or below the prefix their bursts share lets it fire\n"
    )

    def said(*given: str) -> list[str]:
        from experiments.config import window_pool_of

        cfg = _compose("train", ["workload=tiny", *given])
        pool = window_pool_of(cfg, "train", cfg.workload.train_pool)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warn_unreached_y(cfg, pool)
        return [str(w.message) for w in caught]

    assert said("env=thresholds", "env.y_tokens=65536") == []
    # BTB takes Y in the whole blocks that fit: 65,791 tokens are 256 blocks, it fires
    assert said("env=thresholds", "env.y_tokens=65791") == []
    assert said("env=thresholds") == []  # its own key: each prompt but its last block
    assert said("env=route") == []


def test_an_m_above_the_cluster_is_refused_before_any_output(
    tmp_path: Path, run_command: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """btb's M against the cluster was checked at the first window's reset: evaluate
    printed its header first, and neither said the value came from policy_kwargs.
    A variant's refusal names the variant (it named every one ``btb.m``)."""
    from baselines import make_policy

    said = (
        "policy '{p}' (policy_kwargs): {p}.m = {m} copies exceeds the cluster's {n} nodes: "
        "M counts nodes holding the prefix, so it must be at most {n}\n"
    )
    args = ["policies=[btb]", "+policy_kwargs.btb.m=4", "cluster=4xH100_x2",
            "workload.eval_windows=1", "logger=none", f"out_dir={tmp_path / 'e'}"]  # fmt: skip
    done = run_command("experiments.evaluate", args, tmp_path)
    assert done.returncode == 2
    assert done.stderr == "error: experiments.evaluate: " + said.format(p="btb", m=4, n=2)
    assert done.stdout == "" and not (tmp_path / "e").exists()
    out = tmp_path / "c"
    code = main_guard(lambda: compare.main(
        ["policies=btb_pending", "policy_kwargs=btb_pending.m=5", "windows=1", "agents=none",
         f"out_dir={out}"]
    ))  # fmt: skip
    assert code == 2
    err = capsys.readouterr()
    assert err.out == "" and not out.exists()
    assert err.err == "error: experiments.compare: " + said.format(p="btb_pending", m=5, n=4)
    make_policy("btb").check_nodes(2)  # the default M: at most every node
    make_policy("btb", m=2).check_nodes(2)


@pytest.mark.parametrize(
    ("name", "override", "field"),
    [("train", "train.eval_policies=[btb,nope]", "train.eval_policies"),
     ("evaluate", "policies=[nope]", "policies")],
)  # fmt: skip
def test_unknown_policy_names_are_rejected_before_any_work(
    name: str, override: str, field: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from experiments import evaluate, train

    monkeypatch.chdir(tmp_path)  # a W&B run would leave wandb/ here
    module = {"train": train, "evaluate": evaluate}[name]
    cfg = _compose(
        name, ["logger=wandb", "logger.mode=offline", "workload=tiny", override,
               f"out_dir={tmp_path / 'run'}"],
    )  # fmt: skip
    with pytest.raises(ValueError, match=rf"^{field}: unknown policy 'nope'; known: .*btb"):
        getattr(module, name)(cfg)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("overrides", "field", "saved", "asked"),
    [
        # the algorithm, network kind and env are config groups: the hint names the group
        (["agent=maskable_ppo"], "agent.algo", "ppo", "maskable_ppo"),
        (["env=thresholds"], "env.kind", "route", "thresholds"),
        (["agent=ppo_mlp"], "agent.net", "set", "mlp"),
        (["agent.hidden=32"], "agent.hidden", "64", "32"),
        (["cluster=4xH100_x6"], "cluster.n_nodes", "4", "6"),
        # another observation layout: refused before the run folder, not by SB3 after it
        (["env.spare_features=true"], "env.spare_features", "False", "True"),
        (["env.hints=true"], "env.hints", "False", "True"),
        (["env.time_unit=reference"], "env.time_unit", "seconds", "reference"),
        (["env.step_wait=true"], "env.step_wait", "False", "True"),
    ],
)
def test_resume_names_what_the_checkpoint_does_not_match(
    overrides: list[str], field: str, saved: str, asked: str, tmp_path: Path
) -> None:
    from dataclasses import asdict

    from agents.algorithms import AgentSpec
    from envs.files import write_json_atomic
    from experiments.train import train

    checkpoint = tmp_path / "step_80"
    spec = AgentSpec("ppo", "route", env_kwargs={"n_nodes": 4}, timesteps=80)
    write_json_atomic(checkpoint / "agent.json", asdict(spec))  # no model.zip: never loaded
    cfg = _compose(
        "train",
        ["logger=none", "workload=tiny", *overrides, f"resume={checkpoint}",
         f"out_dir={tmp_path / 'run'}"],
    )  # fmt: skip
    hint = {
        "agent.algo": "agent=ppo",
        "agent.net": "agent=ppo",
        "env.kind": "env=route",
        "cluster.n_nodes": "a cluster of 4 nodes: cluster=, cluster.nodes= or setup=",
    }.get(field, f"{field}={saved}")
    message = (
        rf"^resume={checkpoint}: that checkpoint is ppo/route/set with {field}={saved}, "
        rf"the config asks for {field}={asked} \(resume with {re.escape(hint)}\)$"
    )
    with pytest.raises(ValueError, match=message):
        train(cfg)
    assert not (tmp_path / "run").exists()


def test_resume_names_every_field_the_checkpoint_does_not_match(tmp_path: Path) -> None:
    """Two mismatches are named in one line, with one hint for both (they used to
    come one run at a time)."""
    from dataclasses import asdict

    from agents.algorithms import AgentSpec
    from envs.files import write_json_atomic
    from experiments.train import train

    checkpoint = tmp_path / "step_80"
    spec = AgentSpec("ppo", "route", env_kwargs={"n_nodes": 4}, timesteps=80)
    write_json_atomic(checkpoint / "agent.json", asdict(spec))  # no model.zip: never loaded
    cfg = _compose(
        "train",
        ["logger=none", "workload=tiny", "env=route_warm", "agent=maskable_ppo",
         f"resume={checkpoint}", f"out_dir={tmp_path / 'run'}"],
    )  # fmt: skip
    message = (
        r"that checkpoint is ppo/route/set with agent\.algo=ppo, env\.kind=route, the config "
        r"asks for agent\.algo=maskable_ppo, env\.kind=route_warm \(resume with agent=ppo "
        r"env=route\)$"
    )
    with pytest.raises(ValueError, match=message):
        train(cfg)


def test_resume_refuses_hyperparameters_the_checkpoint_would_ignore(tmp_path: Path) -> None:
    import gymnasium as gym

    import envs  # noqa: F401  (registers the environments)
    from agents.algorithms import AgentSpec, build_model, save_agent
    from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window
    from experiments.train import check_resume_hyperparams, train

    window = synthetic_window(BurstedSyntheticConfig(n_bursts=1, burst_requests=5), window=0)
    spec = AgentSpec(algo="ppo", env="route", env_kwargs={"n_nodes": 4})
    env = gym.make(spec.env_id, windows=[window])
    hyper = {"n_steps": 32, "batch_size": 32, "n_epochs": 5}  # n_epochs as conf/agent/ppo.yaml
    hyper |= {"learning_rate": 3.0e-4, "ent_coef": 0.01}
    checkpoint = tmp_path / "step_0"
    save_agent(build_model(spec, env, hyper), spec, checkpoint)
    same = [f"agent.hyperparams.{k}={v}" for k, v in hyper.items()]
    base = ["logger=none", "workload=tiny", f"resume={checkpoint}", f"out_dir={tmp_path / 'run'}"]
    check_resume_hyperparams(_compose("train", [*base, *same]))  # what was saved: accepted
    cfg = _compose("train", [*base, *same, "agent.hyperparams.learning_rate=0.1"])
    message = (
        rf"^resume={checkpoint}: that checkpoint was trained with "
        r"agent\.hyperparams\.learning_rate=0\.0003, the config asks for 0\.1 "
    )
    with pytest.raises(ValueError, match=message):
        train(cfg)
    assert not (tmp_path / "run").exists()
    # conf/agent/ppo.yaml's n_steps and batch_size both differ: one message names both
    both = (
        r"trained with agent\.hyperparams\.n_steps=32, agent\.hyperparams\.batch_size=32, "
        r"the config asks for 256, 1024 \(a resumed run keeps the checkpoint's settings; "
        r"resume with agent\.hyperparams\.n_steps=32 agent\.hyperparams\.batch_size=32\)$"
    )
    with pytest.raises(ValueError, match=both):
        check_resume_hyperparams(_compose("train", base))


def test_evaluate_refuses_a_fixed_size_agent_before_any_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gymnasium as gym

    import envs  # noqa: F401  (registers the environments)
    from agents.algorithms import AgentSpec, build_model, save_agent
    from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window
    from experiments import evaluate, jobs

    window = synthetic_window(BurstedSyntheticConfig(n_bursts=1, burst_requests=5), window=0)
    spec = AgentSpec(algo="dqn", env="route", hidden=8)  # four nodes: the default setup's
    save_agent(build_model(spec, gym.make(spec.env_id, windows=[window])), spec, tmp_path / "a")
    monkeypatch.setattr(jobs, "eval_windows", _never)  # no window may run
    cfg = _compose(
        "evaluate",
        ["logger=none", "workload=tiny", "cluster=4xH100_x2", f"checkpoint=[{tmp_path / 'a'}]",
         f"out_dir={tmp_path / 'run'}"],
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"agent 'dqn_route': .*fixed to the 4 nodes .* has 2"):
        evaluate.evaluate(cfg)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"extra": 1}, "unknown key 'extra'; known: algo, env"),
        ({"algo": None}, "missing key 'algo'"),
        ({"hidden": 0}, "hidden must be an integer >= 1, got 0"),
        ({"hidden": True}, "hidden must be an integer >= 1, got True"),
    ],
)
def test_agent_json_with_a_wrong_key_is_one_line(
    edit: dict[str, Any], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    folder = tmp_path / "agent"
    shutil.copytree(ROOT / "agents" / "zoo" / "bc_route_warm", folder)
    data = json.loads((folder / "agent.json").read_text())
    data.update(edit)
    data = {key: value for key, value in data.items() if value is not None}
    (folder / "agent.json").write_text(json.dumps(data))
    args = [f"agents={folder}", "policies=least_load", "windows=1", f"out_dir={tmp_path / 'o'}"]
    assert main_guard(lambda: compare.main(args)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: experiments.compare: {folder / 'agent.json'}: {message}")


@pytest.mark.parametrize(
    ("agent", "option", "value", "message"),
    [
        # a flag as a string: bool("false") is True, the agent ran with hints on
        ("bc_route_warm", "hints", "false", "must be true or false (a bool), got 'false'"),
        ("bc_route_warm", "speculate", 0, "must be true or false (a bool), got 0"),
        ("bc_route_warm", "step_wait", "true", "must be true or false (a bool), got 'true'"),
        (
            "bc_route_warm",
            "time_unit",
            "minutes",
            "must be one of seconds, reference, got 'minutes'",
        ),
        ("ppo_thresholds_eft", "eft_rules", "false", "must be true or false (a bool), got 'false'"),
        ("ppo_thresholds_eft", "spread_rules", None, "must be true or false (a bool), got None"),
        ("ppo_thresholds_eft", "epoch_s", "2", "must be a finite number > 0, got '2'"),
        ("ppo_thresholds_eft", "y_tokens", 8192.5, "must be an integer >= 1, got 8192.5"),
    ],
)
def test_agent_json_s_env_kwargs_are_checked_as_the_env_checks_them(
    agent: str,
    option: str,
    value: Any,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import shutil

    folder = tmp_path / "agent"
    shutil.copytree(ROOT / "agents" / "zoo" / agent, folder)
    data = json.loads((folder / "agent.json").read_text())
    data["env_kwargs"][option] = value
    (folder / "agent.json").write_text(json.dumps(data))
    args = [f"agents={folder}", "policies=least_load", "windows=1", f"out_dir={tmp_path / 'o'}"]
    assert main_guard(lambda: compare.main(args)) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: experiments.compare: {folder / 'agent.json'}: env_kwargs.{option} {message}\n"
    )
    assert not (tmp_path / "o").exists()


def test_resume_target_below_the_checkpoint_is_rejected(tmp_path: Path) -> None:
    from dataclasses import asdict

    from agents.algorithms import AgentSpec
    from envs.files import write_json_atomic
    from experiments.train import train

    checkpoint = tmp_path / "step_80"
    write_json_atomic(checkpoint / "agent.json", asdict(AgentSpec("a2c", "route", timesteps=80)))
    cfg = _compose(
        "train",
        ["logger=none", "workload=tiny", "agent=a2c", "train.total_timesteps=40",
         f"resume={checkpoint}", f"out_dir={tmp_path / 'run'}"],
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"total_timesteps=40 is below the 80 steps .*resume="):
        train(cfg)


@pytest.mark.parametrize(
    ("text", "bounds"),
    [
        ("int(interval(1, 4))", (1, 4)),
        ("range(1, 5)", (1, 5)),  # the Optuna sweeper's range includes its end
        ("range(1, 6, 2)", (1, 5)),
        ("shuffle(range(1, 5))", (1, 4)),  # a shuffled range is a choice of Hydra's range
        ("choice(1, 3)", (1, 3)),
        ("2", (2, 2)),
        ("abc", None),
    ],
)
def test_search_space_range_is_what_the_sweeper_draws(text: str, bounds: Any) -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra_plugins.hydra_optuna_sweeper._impl import create_optuna_distribution_from_override

    from experiments.tune_btb import search_space_range

    assert search_space_range(text) == bounds
    if bounds is not None and text.startswith(("range", "int(")):
        override = OverridesParser.create().parse_override(f"m={text}")
        distribution = create_optuna_distribution_from_override(override)
        assert (distribution.low, distribution.high) == bounds  # what Optuna samples within


def test_tune_btb_sweep_that_can_draw_nan_is_rejected_before_it_starts() -> None:
    from experiments.tune_btb import check_sweep, search_space_range

    low, high = search_space_range("choice(1, nan)")  # min/max alone would give (1, 1)
    assert math.isnan(low) and math.isnan(high)
    with pytest.raises(ValueError, match=r"^z=choice\(1,nan\) \(from the command line\) "
                       r"lets the sweep draw z=nan: not a number$"):  # fmt: skip
        check_sweep(["-m", "workload=tiny", "z=choice(1,nan)"])


def test_tune_btb_single_run_on_two_nodes_is_not_checked_against_the_sweep() -> None:
    from experiments.tune_btb import check_thresholds

    # the sweeper's search space (up to 4) is a sweep's concern: a run checks its own m
    overrides = ["cluster=4xH100_x2", "m=2", "hydra.sweeper.params.m='int(interval(1,4))'"]
    with _hydra_job("tune_btb", overrides) as cfg:
        check_thresholds(cfg)  # a single run: only its own m counts
    one = _compose("tune_btb", ["cluster=4xH100_x2", "m=3", "logger=none"])
    with pytest.raises(ValueError, match=r"m must be in 1\.\.2 .*cluster\.n_nodes=2\), got 3"):
        check_thresholds(one)


def test_tune_btb_default_search_space_follows_the_cluster() -> None:
    from experiments.tune_btb import check_sweep

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            config_name="tune_btb", overrides=["cluster=4xH100_x2"], return_hydra_config=True
        )
    assert cfg.hydra.sweeper.params.m == "int(interval(1, 2))"
    check_sweep(["-m", "cluster=4xH100_x2"])
    check_sweep(["-m", "cluster=4xH100_x2", "m=int(interval(1,2))"])
    check_sweep(["-m", "cluster=4xH100_x2,4xH100_x4", "m=int(interval(1,2))"])
    check_sweep(["-m", "cluster.n_nodes=interval(2,6)"])  # a range of sizes: the jobs check
    # one search space serves every job: it must fit the smallest cluster swept
    for args in (["cluster=4xH100_x2,4xH100_x6"], ["cluster=4xH100_x4,4xH100_x2", "m=1,3"]):
        with pytest.raises(ValueError, match=r"outside 1\.\.2 .*smallest cluster the sweep"):
            check_sweep(["-m", *args])


@pytest.mark.parametrize(
    ("args", "label"),
    [
        (["m=int(interval(1,4))"], r"m=int\(interval\(1,4\)\) \(from the command line\)"),
        (["hydra.sweeper.params.m='range(1,3)'"], r"hydra\.sweeper\.params\.m=range\(1,3\)"),
    ],
)
def test_tune_btb_sweep_beyond_the_cluster_is_rejected_before_it_starts(
    args: list[str], label: str
) -> None:
    from experiments.tune_btb import check_sweep

    with pytest.raises(
        ValueError,
        match=label + r" lets the sweep draw m from 1 to \d, outside "
        r"1\.\.2 .*cluster\.n_nodes=2\); e\.g\. 'm=int\(interval\(1, 2\)\)'$",
    ):
        check_sweep(["-m", "workload=tiny", "cluster=4xH100_x2", *args])


def test_tune_btb_suggested_search_space_works_in_a_shell(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    base = ["-m", "workload=tiny", "cluster=4xH100_x2"]
    # what a shell passes for: ... 'm=int(interval(1,4))' out_dir=...
    bad = run_command(
        "experiments.tune_btb",
        [*base, *shlex.split(f"'m=int(interval(1,4))' out_dir={tmp_path / 'bad'}")],
        tmp_path,
    )
    assert bad.returncode == 2 and not (tmp_path / "bad").exists()
    suggestion = bad.stderr.strip().rpartition("e.g. ")[2]
    good = run_command(
        "experiments.tune_btb",
        [*base, *shlex.split(suggestion), "hydra.sweeper.n_trials=2", f"out_dir={tmp_path / 'ok'}"],
        tmp_path,
    )
    assert good.returncode == 0, good.stderr[-2000:]
    drawn = [json.loads(p.read_text())["m"] for p in (tmp_path / "ok").glob("*/objective.json")]
    assert len(drawn) == 2 and all(1 <= m <= 2 for m in drawn)


@pytest.mark.parametrize(
    ("module", "args", "message"),
    [
        (
            compare,
            ["agents=none", "workload_seed=-1"],
            "experiments.compare: workload_seed must be >= 0, got -1",
        ),
        (
            compare,
            ["agents=none", "baseline=nope"],
            "experiments.compare: baseline='nope' is not a policy",
        ),
        (
            compare,
            ["agents=none", "policies=btb,cache_aware,btb"],
            "experiments.compare: policies= lists 'btb' twice",
        ),
        (bench, ["envs=btb/Route-v0,btb/Route-v0"], "lists 'btb/Route-v0' twice"),
        (bench, ["copy_model=bogus"], "experiments.bench: copy_model must be one of reference"),
        (
            compare,
            ["agents=none", "copy_model=bogus"],
            "experiments.compare: copy_model must be one of reference, contention, got 'bogus'",
        ),
        (reproduce, ["copy_model=x"], "experiments.reproduce: copy_model must be one of"),
        (reproduce, ["workload_seeds=1,a"], "workload_seeds='1,a' must be integers >= 0"),
        (reproduce, ["workload_seed=-3"], "experiments.reproduce: workload_seed must be >= 0"),
        (compare, ["agents=none", "windows=-1"], "experiments.compare: windows must be >= 0 (0 ="),
        (
            costs,
            ["node=0xH100"],  # was NodeSpec.n_gpus, not the option typed
            "experiments.costs: node='0xH100' (from the command line): n_gpus must be an integer "
            ">= 1, got 0",
        ),
        (
            costs,
            ["model=nope"],
            "experiments.costs: model='nope' (from the command line): unknown model preset 'nope'",
        ),
        (
            reproduce,
            ["setups="],
            "experiments.reproduce: setups is empty (from the command line); known: 70b_h100x4",
        ),
        (reproduce, ["causal_kv=maybe"], "experiments.reproduce: causal_kv must be both or a bool"),
        (
            make_dataset,
            ["out_dir=/nonexistent-btb/x", "seed=-1"],
            "make_dataset: seed must be >= 0",
        ),
        (bench, ["window=-1"], "experiments.bench: window must be >= 0 (a synthetic window's"),
        (audit, ["path=" + str(ROOT / "tests")], f"audit: path='{ROOT / 'tests'}' is a folder"),
        (costs, ["tokens="], "experiments.costs: tokens is empty (from the command line)"),
        (costs, ["mfu=0"], "experiments.costs: mfu must be in (0, 1], got 0.0"),
        (costs, ["mfu=nan"], "experiments.costs: mfu must be in (0, 1], got nan"),
    ],
)
def test_bad_options_name_their_field(
    module: Any, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main_guard(lambda: module.main(args)) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("module", "args", "message"),
    [
        (compare, ["sim.mfu=abc"], "experiments.compare: sim.mfu='abc' is not a valid number"),
        (reproduce, ["sim.mfu=abc"], "experiments.reproduce: sim.mfu='abc' is not a valid number"),
        (compare, ["windows=abc"], "experiments.compare: windows='abc' is not a valid int"),
        (compare, ["policies=btb,,eft"],
         "experiments.compare: policies='btb,,eft' has an empty entry"),
        (reproduce, ["policies=btb,btb"], "experiments.reproduce: policies= lists 'btb' twice"),
        (compare, ["policy_kwargs=btb.y_tokens"],
         "experiments.compare: policy_kwargs: expected POLICY.KEY=VALUE, got 'btb.y_tokens'"),
        (compare, ["policy_kwargs=btb.y_tokens=abc"],
         "experiments.compare: policy_kwargs: btb.y_tokens='abc' is not a valid int"),
        (compare, ["params=burst_requests"],
         "experiments.compare: params items are key=value, got 'burst_requests'"),
        (compare, ["params=burst_requests=abc"],
         "experiments.compare: workload 'bursted_synthetic': parameter params=burst_requests="
         "'abc' is not a valid int"),
        (compare, ["workload=trace", "workload.window_s=abc"],
         "experiments.compare: workload.window_s='abc' is not a valid float"),
        (reproduce, ["causal_kv=maybe"], "experiments.reproduce: causal_kv must be both or a "
         "bool (true/false, yes/no, on/off, 1/0), got 'maybe'"),
        (reproduce, ["workload_seeds=1,x"], "experiments.reproduce: workload_seeds='1,x' must "
         "be integers >= 0, comma-separated"),
        (costs, ["tokens=1,x"], "experiments.costs: tokens must be integers, got ['1', 'x']"),
        (make_dataset, ["params=n_bursts=many"], "experiments.make_dataset: workload "
         "'bursted_art': parameter params=n_bursts='many' is not a valid int"),
    ],
)  # fmt: skip
def test_a_value_that_does_not_parse_says_it_came_from_the_command_line(
    module: Any,
    args: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The key=value commands' values that do not parse say where they came from, as
    their checks (``sim.mfu must be in (0, 1], got 2.0 (from the command line)``) and
    the Hydra commands' do: they said none."""
    out = tmp_path / "run"
    assert main_guard(lambda: module.main([*args, f"out_dir={out}"])) == 2
    assert capsys.readouterr().err == f"error: {message} (from the command line)\n"
    assert not out.exists()


@pytest.mark.parametrize(
    ("module", "args", "message"),
    [
        (compare, ["windows=1", "windows=2"], "experiments.compare: windows= is given twice"),
        (compare, ["sim.mfu=0.5", "sim.mfu=0.4"], "experiments.compare: sim.mfu= is given twice"),
        (costs, ["node=4xH100", "cluster.node=8xH200"],
         "experiments.costs: node= and cluster.node= are one option: give one of them"),
        (compare, ["cluster.node=4xH100", "+cluster.node=8xH200"],
         "experiments.compare: cluster.node= is given twice"),
        (audit, ["path=x", "window_s=1", "window_s=2"],
         "experiments.audit: window_s= is given twice"),
        (compare, ["workload_seed=-1"], "experiments.compare: workload_seed must be >= 0, got -1"),
        (compare, ["windows=-1"],
         "experiments.compare: windows must be >= 0 (0 = all test windows), got -1"),
        (compare, ["copy_model=bogus"],
         "experiments.compare: copy_model must be one of reference, contention, got 'bogus'"),
        (costs, ["tokens=0"], "experiments.costs: tokens must be positive, got [0]"),
        (costs, ["mfu=2"], "experiments.costs: mfu must be in (0, 1], got 2.0"),
        # OverflowError's traceback as the table was worked out
        (costs, ["tokens=500," + "9" * 400], "experiments.costs: tokens must be a number a "
         "float can hold (at most 1.798e+308: the simulator computes in floats), got an "
         "integer of 400 digits"),
        (bench, ["repeats=0"], "experiments.bench: repeats must be an integer >= 1, got 0"),
        (bench, ["repeats=10000000000"],
         "experiments.bench: repeats must be at most 100,000, got 10000000000"),
        (bench, ["window=-1"], "experiments.bench: window must be >= 0 (a synthetic window's "
         "index, or a test window's), got -1"),
        (make_dataset, ["seed=-1"], "experiments.make_dataset: seed must be >= 0 (a numpy "
         "seed), got -1"),
        (make_dataset, ["test_windows=-2"], "experiments.make_dataset: test_windows must be >= 0 "
         "(or -1: the workload's own count), got -2"),
        (compare, ["windows=2", "timeline_window=-1"],
         "experiments.compare: timeline_window must be an integer in [0, 1], got -1"),
        (reproduce, ["jobs=0"], "experiments.reproduce: jobs must be >= 1, got 0"),
        (reproduce, ["windows=-1"],
         "experiments.reproduce: windows must be >= 0 (0 = all test windows), got -1"),
        (reproduce, ["seed=-1"], "experiments.reproduce: seed must be >= 0, got -1"),
        (audit, ["path=x", "min_tokens=0"], "experiments.audit: min_tokens must be >= 1, got 0"),
        (audit, ["path=x", "fanout_s=0"],
         "experiments.audit: fanout_s must be a finite number > 0, got 0.0"),
        (audit, ["path=x", "merge_blocks=0"],
         "experiments.audit: merge_blocks must be an integer >= 1, got 0"),
    ],
)  # fmt: skip
def test_a_refused_key_or_value_says_it_came_from_the_command_line(
    module: Any,
    args: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The key=value commands' refusals of a key (given twice) and their range checks
    say where the value came from, as their parse errors and the Hydra commands' do:
    they named no origin."""
    out = tmp_path / "run"
    assert main_guard(lambda: module.main([*args, f"out_dir={out}"])) == 2
    assert capsys.readouterr().err == f"error: {message} (from the command line)\n"
    assert not out.exists()


@pytest.mark.parametrize(
    ("module", "args", "message"),
    [
        (costs, ["setup=nope"], "experiments.costs: unknown setup 'nope'"),
        (compare, ["setup=nope"], "experiments.compare: unknown setup 'nope'"),
        (bench, ["setup=nope"], "experiments.bench: unknown setup 'nope'"),
        (tune_btb_table, ["setups=nope"],
         "experiments.tune_btb_table: setups: unknown setup 'nope'"),
        (compare, ["policies=nope"], "experiments.compare: unknown policy 'nope'"),
        (bench, ["policies=nope"], "experiments.bench: unknown policy 'nope'"),
        (reproduce, ["policies=nope"], "experiments.reproduce: unknown policy 'nope'"),
        (tune_btb_table, ["workloads=nope"],
         "experiments.tune_btb_table: workloads: unknown workload 'nope'"),
        (compare, ["workload=nope"], "experiments.compare: unknown workload 'nope'"),
        (make_dataset, ["workload=nope"], "experiments.make_dataset: unknown workload 'nope'"),
        (reproduce, ["workload=nope"], "experiments.reproduce: unknown workload 'nope'"),
        (compare, ["baseline=nope"], "experiments.compare: baseline='nope' is not a policy"),
    ],
)  # fmt: skip
def test_an_unknown_name_says_it_came_from_the_command_line(
    module: Any, args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``unknown setup 'nope' (from the command line); known: ...`` as ``reproduce``
    said it (and the CHANGELOG said of every key=value command): ``costs``,
    ``compare``, ``bench`` and ``tune_btb_table`` named no origin, nor did the
    commands' ``unknown policy`` or ``unknown workload``."""
    out = tmp_path / "run"
    assert main_guard(lambda: module.main([*args, f"out_dir={out}"])) == 2
    assert capsys.readouterr().err.startswith(f"error: {message} (from the command line); known: ")
    assert not out.exists()


LONG = "9" * 400
"""A value of 400 characters: an error said it back whole."""
CUT = "9" * 60 + "..."
"""What an error says back of it: its first 60 characters."""


def test_an_echoed_value_is_cut_to_its_first_60_characters() -> None:
    from envs.sim.errors import echoed

    assert echoed("x" * 58) == "'" + "x" * 58 + "'"  # 60 characters of repr: whole
    assert echoed("x" * 59) == "'" + "x" * 59 + "..."  # 61: its first 60, then ...
    assert echoed(10**400 - 1, quoted=False) == CUT
    assert echoed(LONG) == "'" + "9" * 59 + "..."
    assert echoed(-5, quoted=False) == "-5" and echoed("abc") == "'abc'"


@pytest.mark.parametrize(
    ("module", "args", "message"),
    [
        (bench, [f"repeats={LONG}"],
         f"experiments.bench: repeats must be at most 100,000, got {CUT}"),
        (compare, [f"workload_seed=-{LONG}"],
         f"experiments.compare: workload_seed must be >= 0, got -{CUT[:-4]}..."),
        (compare, [f"windows={LONG}x"],
         f"experiments.compare: windows='{CUT[1:]} is not a valid int"),
        (compare, [f"sim.mfu={LONG}x"],
         f"experiments.compare: sim.mfu='{CUT[1:]} is not a valid number"),
        (compare, [f"policy_kwargs=btb.y_tokens={LONG}x"],
         f"experiments.compare: policy_kwargs: btb.y_tokens='{CUT[1:]} is not a valid int"),
        (compare, [f"copy_model={LONG}"],
         "experiments.compare: copy_model must be one of reference, contention, "
         f"got '{CUT[1:]}"),
        (costs, [f"node={LONG}xH100"],
         f"experiments.costs: node='{CUT[1:]} (from the command line): n_gpus must be a number "
         "a float can hold (at most 1.798e+308: the simulator computes in floats), got an "
         "integer of 400 digits"),
    ],
)  # fmt: skip
def test_a_long_value_is_said_back_cut(
    module: Any, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An error says back the first 60 characters of a value it refuses, then
    ``...``: a value of 400 digits was said whole, 400 characters of one line."""
    assert main_guard(lambda: module.main(args)) == 2
    err = capsys.readouterr().err
    where = "" if module is costs else " (from the command line)"
    assert err == f"error: {message}{where}\n"


NAME = "x" * 400
"""A name of 400 characters: a lookup's refusal said it back whole."""
NAME_CUT = "'" + "x" * 59 + "..."


@pytest.mark.parametrize(
    ("module", "args", "message"),
    [
        (costs, [f"node={NAME}"],
         f"experiments.costs: node={NAME_CUT} (from the command line): unknown GPU preset "
         f"{NAME_CUT}; known: A100, H100, H200, B200, B300, MI300X, MI355X"),
        (costs, [f"setup={NAME}"],
         f"experiments.costs: unknown setup {NAME_CUT} (from the command line); known: "),
        (compare, [f"policies={NAME}"],
         f"experiments.compare: unknown policy {NAME_CUT} (from the command line); "),
        (compare, [f"setup={NAME}"],
         f"experiments.compare: unknown setup {NAME_CUT} (from the command line); "),
        (compare, [f"{NAME}=1"], f"experiments.compare: unknown option {NAME_CUT} "),
        (compare, [f"model.name={NAME}"],
         f"experiments.compare: model.name={NAME_CUT} (from the command line): unknown model "
         f"preset {NAME_CUT}; known: "),
    ],
)  # fmt: skip
def test_a_long_name_a_lookup_refuses_is_said_back_cut(
    module: Any, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name no preset, setup, policy or option has is said back cut too (``unknown
    GPU preset 'xxx...'``): the lookups said all 400 characters after the cut value."""
    assert main_guard(lambda: module.main(args)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}"), err
    assert "x" * 61 not in err


def test_a_long_name_the_library_refuses_is_said_back_cut() -> None:
    from envs.sim.config import setup_cluster
    from envs.sim.errors import ConfigError
    from envs.sim.timing import gpu_preset, model_preset

    for lookup in (gpu_preset, model_preset, setup_cluster):
        with pytest.raises(ConfigError) as refused:
            lookup(NAME)
        assert NAME_CUT in str(refused.value) and "x" * 61 not in str(refused.value)


def test_a_long_key_or_value_a_hint_names_is_said_back_cut(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``sim.copy_model=`` is compare's ``copy_model=``: the hint said a value of 400
    characters back whole, and so did an unknown option its key and an unknown
    policy its name."""
    assert main_guard(lambda: compare.main([f"sim.copy_model={LONG}"])) == 2
    assert capsys.readouterr().err == (
        "error: experiments.compare: sim.copy_model= is an option of its own here: "
        f"copy_model={CUT}\n"
    )
    assert main_guard(lambda: compare.main([f"{LONG}=1"])) == 2
    assert capsys.readouterr().err.startswith(
        f"error: experiments.compare: unknown option '{CUT[1:]} (from the command line); known: "
    )
    assert main_guard(lambda: compare.main(["agents=none", f"policies=btb,{LONG}"])) == 2
    assert capsys.readouterr().err.startswith(
        f"error: experiments.compare: unknown policy '{CUT[1:]} (from the command line); known: "
    )


def test_a_long_value_hydra_cannot_merge_is_said_back_cut() -> None:
    """OmegaConf's own words say the value back whole: cut there too."""
    from hydra.errors import ConfigCompositionException
    from omegaconf.errors import ValidationError

    from experiments.jobs import _override_not_merged

    cause = ValidationError(f"Value '{LONG}' of type 'str' could not be converted to Integer")
    error = ConfigCompositionException(f"Error merging override cluster.n_nodes={LONG}")
    error.__cause__ = cause
    assert _override_not_merged("experiments.train", error) == (
        f"experiments.train: cluster.n_nodes='{CUT[1:]} (from the command line): Value "
        f"'{CUT[1:]} of type 'str' could not be converted to Integer"
    )


@pytest.mark.parametrize(
    ("module", "args", "known"),
    [
        (compare, ["bogus=1"], "known: "),
        (compare, ["sim.bogus=1"], "sim. options: "),
        (compare, ["cluster.bogus=1"], "a cluster of one's own takes: "),
        (reproduce, ["setups=nope"], "known: 70b_h100x4"),
    ],
)
def test_an_unknown_key_says_it_came_from_the_command_line(
    module: Any, args: list[str], known: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``unknown option 'bogus' (from the command line); known: ...``, as the Hydra
    commands' ``unknown key ... (from the command line); ... takes: ...``."""
    assert main_guard(lambda: module.main(args)) == 2
    err = capsys.readouterr().err
    key, _, value = args[0].partition("=")
    what = f"unknown setup {value!r}" if module is reproduce else f"unknown option {key!r}"
    assert err.startswith(f"error: {module.__name__}: {what} (from the command line); {known}")
    assert err.count("\n") == 1


def test_a_generator_s_check_names_the_first_params_given_it_names() -> None:
    """A check about a parameter the command line did not give, naming one it did,
    says which came from the command line, as the Hydra commands' ``first_origin``."""
    from envs.sim.errors import ConfigError
    from experiments._cli import UsageError, naming_params

    def refused(params: dict[str, str]) -> str:
        with pytest.raises(UsageError) as caught, naming_params("X", params):
            raise ConfigError.about("Config.n_bursts", "x {n_decoys} must be >= 1", "n_decoys")
        return str(caught.value)

    assert refused({"n_bursts": "0"}) == (
        "X: params=n_bursts x n_decoys must be >= 1 (from the command line)"
    )
    assert refused({"n_decoys": "0"}) == (
        "X: Config.n_bursts x params=n_decoys must be >= 1 (params=n_decoys from the command line)"
    )


@pytest.mark.parametrize("module", [compare, make_dataset])
def test_a_generator_s_check_names_the_parameters_not_given_as_typed_too(
    module: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A generator's check naming a parameter the command line left at its default
    names it as the user would write it, ``params=n_bursts``, as the Hydra commands
    name it ``workload.params.n_bursts``: it was named by its class,
    ``BurstedSyntheticConfig.n_bursts``."""
    out = tmp_path / "run"
    args = ["workload=bursted_synthetic", "params=n_decoys=0,burst_requests=0"]
    assert main_guard(lambda: module.main([*args, f"out_dir={out}"])) == 2
    assert capsys.readouterr().err == (
        f"error: {module.__name__}: workload 'bursted_synthetic': params=n_bursts x "
        "params=burst_requests + params=n_decoys must be >= 1, or every window is empty; got "
        "n_bursts=8, burst_requests=0, n_decoys=0 (params=burst_requests from the command line)\n"
    )
    assert not out.exists()


def test_evaluate_s_policy_kwargs_that_do_not_parse_say_where_they_came_from(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """evaluate's ``+policy_kwargs.POLICY.KEY=VALUE`` is parsed by compare's code: a
    value refused says where it came from there too."""
    args = ["logger=none", "policies=[btb]", "+policy_kwargs.btb.y_tokens=abc"]
    proc = run_command("experiments.evaluate", args, tmp_path)
    assert (proc.returncode, proc.stderr) == (
        2,
        "error: experiments.evaluate: policy_kwargs: btb.y_tokens='abc' is not a valid int "
        "(from the command line)\n",
    )
    assert list(tmp_path.iterdir()) == []


def test_audit_errors_name_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    latin = tmp_path / "latin.jsonl"
    good = b'{"timestamp": 0, "input_length": 512, "hash_ids": [1]}\n'
    latin.write_bytes(good + b'{"note": "caf\xe9"}\n')
    assert main_guard(lambda: audit.main([f"path={latin}"])) == 2
    err = capsys.readouterr().err
    assert f"{latin}, line 2, row: byte 0xe9 at column 14 is not UTF-8 text" in err
    # a broken row before the bad byte is reported first: rows are read in order
    latin.write_bytes(b'{"timestamp": 0, "hash_ids": []}\n{"note": "caf\xe9"}\n')
    assert main_guard(lambda: audit.main([f"path={latin}"])) == 2
    assert f"{latin}, line 1" in capsys.readouterr().err
    array = tmp_path / "array.jsonl"
    array.write_text("[1, 2]\n")
    assert main_guard(lambda: audit.main([f"path={array}"])) == 2
    err = capsys.readouterr().err
    assert "line 1, row: expected a JSON object, got list" in err and "line 0" not in err


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_audit_reports_a_damaged_gzip_file_in_one_line(
    damage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import gzip

    rows = "".join(
        json.dumps({"timestamp": 50 * i, "input_length": 1024, "hash_ids": [i % 7, i]}) + "\n"
        for i in range(400)
    ).encode()
    data = bytearray(gzip.compress(rows))
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:
        for k in range(100, 200):
            data[k] ^= 0xFF
    trace = tmp_path / "trace.jsonl.gz"
    trace.write_bytes(bytes(data))
    assert main_guard(lambda: audit.main([f"path={trace}"])) == 2
    err = capsys.readouterr().err
    # the trace reader names the file and the line it could not read past
    assert err.startswith(f"error: experiments.audit: {trace}, line ")
    assert "cannot read the file past this line" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("args", [[], ["bogus=1"], ["--help"]])
def test_the_report_module_says_it_is_not_a_command(
    args: list[str], tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    # it ran nothing and printed nothing, exit 0, whatever it was given
    proc = run_command("experiments.report", args, tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("error: experiments.report is a library module")
    assert "python -m experiments.compare" in proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("module", [compare, reproduce, audit, costs, bench, make_dataset])
def test_help_exits_zero(module: Any, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: python -m {module.__name__}")


@pytest.mark.parametrize(
    "name",
    ["compare", "reproduce", "audit", "costs", "bench", "make_dataset", "example_trace",
     "tune_btb_table", "train_rescore"],
)  # fmt: skip
def test_help_names_only_the_command_s_own_options(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every ``key=`` in a command's --help is one of its options (audit, costs and
    example_trace have no ``policies=``), and the hint about lists is there only
    for a command with a list option, naming those."""
    import importlib

    module = importlib.import_module(f"experiments.{name}")
    with pytest.raises(SystemExit):
        module.main(["--help"])
    usage, *lines = capsys.readouterr().out.splitlines()
    assert usage == f"usage: python -m experiments.{name} [key=value ...]"
    named = {key for line in lines for key in re.findall(r"([\w.]+)=", line)}
    # and, for compare and reproduce, the simulator's options (sim.NAME=VALUE)
    from experiments._sim_options import NAMES

    sim = {f"sim.{n}" for n in NAMES} | {"sim.NAME"} if name in ("compare", "reproduce") else set()
    # and, for compare and costs, a cluster of one's own (model.name=, cluster.nodes=, ...)
    from experiments._cli import CLUSTER_OPTIONS

    own = set(CLUSTER_OPTIONS) if name in ("compare", "costs") else set()
    if name == "costs":  # which refuses cluster.n_nodes (its tables are one node's)
        own.discard("cluster.n_nodes")
    assert named == set(module.DEFAULTS) | sim | own
    lists = [key for key, value in module.DEFAULTS.items() if isinstance(value, list)]
    hint = [line for line in lines if "comma-separated" in line]
    assert hint == ([f"lists ({', '.join(lists)}) are comma-separated ({lists[0]}=a,b); "
                     f"empty is {lists[0]}="] if lists else [])  # fmt: skip


@pytest.mark.parametrize(
    ("text", "modes"),
    [("both", [False, True]), ("0", [False]), ("yes", [True]), ("OFF", [False]), ("1", [True])],
)
def test_reproduce_reads_causal_kv_like_every_bool_option(text: str, modes: list[bool]) -> None:
    assert reproduce.causal_kv_modes(text) == modes


@pytest.mark.parametrize("name", ["train", "evaluate", "tune_btb"])
def test_logger_mode_is_checked_by_every_hydra_command(name: str, tmp_path: Path) -> None:
    from experiments import evaluate, train, tune_btb

    fn = {"train": train.train, "evaluate": evaluate.evaluate, "tune_btb": tune_btb.objective}
    cfg = _compose(name, ["logger=none", "logger.mode=bogus", f"out_dir={tmp_path / 'run'}"])
    with pytest.raises(ValueError, match=r"^logger\.mode must be one of offline, online, "):
        fn[name](cfg)
    assert not (tmp_path / "run").exists()


def test_tune_btb_logs_its_job_to_wandb(tmp_path: Path) -> None:
    from experiments.tune_btb import objective

    cfg = _compose(
        "tune_btb", ["logger=wandb", "logger.mode=offline", "workload=tiny",
                     "workload.train_pool=1", f"out_dir={tmp_path}"],
    )  # fmt: skip
    objective(cfg)
    assert list((tmp_path / "wandb").glob("offline-run-*/*.wandb"))


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("agent=nope", "Could not find 'agent/nope': Available options in 'agent': a2c, dqn"),
        (
            "train.total_timesteps=abc",
            "train.total_timesteps='abc' (from the command line): Value 'abc'",
        ),
        ("seed=[", "no viable alternative at input '['"),
        ("+experiment=nope", "Available options in 'experiment': bc_route_warm_general"),
    ],
)
def test_a_config_hydra_cannot_compose_exits_2_in_one_line(
    override: str, needle: str, tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    env: dict[str, str] = {}
    proc = run_command("experiments.train", ["logger=none", override], tmp_path, env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith("error: experiments.train: ") and needle in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "runs").exists()


def test_hydra_s_messages_fold_into_one_line() -> None:
    from hydra.errors import ConfigCompositionException
    from omegaconf.errors import ValidationError

    from experiments.jobs import hydra_message

    cause = ValidationError("Value 'abc' of type 'str' could not be converted to Float")
    error = ConfigCompositionException("Error merging override sim.mfu=abc")
    error.__cause__ = cause
    assert hydra_message(error) == (
        "Error merging override sim.mfu=abc: Value 'abc' of type 'str' could not be "
        "converted to Float"
    )
    listing = ConfigCompositionException(
        "In 'train': Could not find 'agent/x'\n\nAvailable options in 'agent':\n\ta2c\n\tdqn\n"
        "Config search path:\n\tprovider=hydra, path=pkg://hydra.conf"
    )
    assert hydra_message(listing) == (
        "In 'train': Could not find 'agent/x': Available options in 'agent': a2c, dqn"
    )


@pytest.mark.parametrize(
    ("command", "key"),
    [("experiments.evaluate", "checkpoint"), ("experiments.train", "train.eval_policies")],
)
def test_one_value_for_a_list_option_says_how_to_write_the_list(
    command: str, key: str, tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    value = str(ROOT / "agents" / "zoo" / "bc_route_warm") if key == "checkpoint" else "btb"
    proc = run_command(command, ["logger=none", f"{key}={value}"], tmp_path)
    assert proc.returncode == 2
    said = f"error: {command}: {key}={value!r} (from the command line): Invalid value assigned: "
    assert proc.stderr.startswith(said)
    assert proc.stderr.endswith(f" ({key} is a list: write {key}=[{value}])\n")
    assert proc.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["experiment", "sweeper", "line"])
def test_a_sweeper_s_value_hydra_cannot_merge_names_the_file_that_gave_it(
    where: str, tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """A sweep's job gets its sweeper's ``hydra.sweeper.params`` as overrides: a value
    there Hydra cannot merge was said ``(from the command line)``, which never gave
    it. It names the file that set it (an ``+experiment``, the sweeper's own config)."""
    conf = tmp_path / "conf"
    (conf / "experiment").mkdir(parents=True)
    (conf / "hydra" / "sweeper").mkdir(parents=True)
    experiment = conf / "experiment" / "bad_sweep.yaml"
    experiment.write_text("# @package _global_\nhydra:\n  sweeper:\n    params:\n      seed: abc\n")
    sweeper = conf / "hydra" / "sweeper" / "bad_basic.yaml"
    sweeper.write_text("defaults:\n  - basic\n  - _self_\n\nparams:\n  seed: abc\n")
    chosen = {
        "experiment": ["+experiment=bad_sweep"],
        "sweeper": ["hydra/sweeper=bad_basic"],
        "line": ["seed=abc,1"],
    }[where]
    origin = {
        "experiment": f"hydra.sweeper.params.seed from {experiment}",
        "sweeper": f"hydra.sweeper.params.seed from {sweeper}",
        "line": "from the command line",
    }[where]
    args = ["-m", *chosen, f"hydra.searchpath=[file://{conf}]", "logger=none", "workload=tiny"]
    proc = run_command("experiments.train", [*args, f"out_dir={tmp_path / 'sweep'}"], tmp_path)
    assert (proc.returncode, proc.stderr) == (
        2,
        f"error: experiments.train: seed='abc' ({origin}): Value 'abc' of type 'str' could not "
        "be converted to Integer\n",
    )
    assert not (tmp_path / "sweep").exists()


@pytest.mark.parametrize(
    ("override", "said"),
    [
        ("hydra.sweeper.params.seed=abc", "hydra.sweeper.params.seed='abc'"),
        ("hydra.sweeper.params={seed:abc}", "hydra.sweeper.params='{seed:abc}'"),
    ],
)
def test_a_key_under_the_basic_sweeper_s_null_params_is_one_line(
    override: str, said: str, tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """The basic sweeper's ``hydra.sweeper.params`` is null: setting a key in it from the
    command line ended in OmegaConf's ``AssertionError: Unexpected type for root:
    NoneType`` (or an ``AttributeError``), a traceback, as it does in a plain Hydra 1.3
    app; it is one line naming the override and where it came from, status 2."""
    args = ["-m", override, "logger=none", "workload=tiny", f"out_dir={tmp_path / 'sweep'}"]
    proc = run_command("experiments.train", args, tmp_path)
    leaf = "seed" if override.startswith("hydra.sweeper.params.") else "KEY"
    assert (proc.returncode, proc.stderr) == (
        2,
        f"error: experiments.train: {said} (from the command line): hydra.sweeper.params "
        "is null, so no key can be set in it from the command line; sweep a key on the "
        f"command line with {leaf}=A,B,...\n",
    )
    assert not (tmp_path / "sweep").exists()


def test_a_value_hydra_cannot_merge_is_named_with_where_it_came_from(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """A command-line value of the wrong type, which Hydra refuses as it merges it, is
    named as the project's own checks name a value (``KEY='VALUE' (from the command
    line): ...``); it said ``Error merging override cluster.n_nodes=abc: ...``, not
    where the value came from."""
    from hydra.errors import ConfigCompositionException
    from omegaconf.errors import ValidationError

    from experiments.jobs import _override_not_merged

    cause = ValidationError("Value 'abc' of type 'str' could not be converted to Float")
    error = ConfigCompositionException("Error merging override ++sim.mfu=abc")
    error.__cause__ = cause
    assert _override_not_merged("experiments.train", error) == (
        "experiments.train: sim.mfu='abc' (from the command line): Value 'abc' of type 'str' "
        "could not be converted to Float"
    )
    other = ConfigCompositionException("In 'train': Could not find 'agent/x'")
    assert _override_not_merged("experiments.train", other) is None
    proc = run_command("experiments.train", ["logger=none", "cluster.n_nodes=abc"], tmp_path)
    assert (proc.returncode, proc.stderr) == (
        2,
        "error: experiments.train: cluster.n_nodes='abc' (from the command line): Value 'abc' "
        "of type 'str' could not be converted to Integer\n",
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("model.name=null", "model.name is null: give a model preset's name (model.name="
         "llama-3.3-70b), or a new name beside ModelSpec's fields (a model of one's own)"),
        ("cluster.n_nodes=null", "cluster.n_nodes is null: give a node count (cluster."
         "n_nodes=4), or the nodes (cluster.nodes=[4xH100,8xH200])"),
        ("seed=null", "seed is null: give a value"),
    ],
)  # fmt: skip
def test_a_null_for_a_key_that_takes_none_is_said_in_the_project_s_words(
    override: str, message: str, tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """A command-line null for a key whose schema takes none: OmegaConf's ``field
    'model.name' is not Optional`` said as ``cluster.node is null`` is (what to give
    instead), with where it came from."""
    proc = run_command("experiments.evaluate", ["logger=none", override], tmp_path)
    assert (proc.returncode, proc.stderr) == (
        2,
        f"error: experiments.evaluate: {message} (from the command line)\n",
    )
    assert list(tmp_path.iterdir()) == []


def test_only_the_users_errors_hydra_reports_exit_2() -> None:
    from hydra.errors import ConfigCompositionException, MissingConfigException

    from experiments.jobs import _hydra_user_error

    assert _hydra_user_error(ConfigCompositionException("x"))
    assert _hydra_user_error(MissingConfigException("x", "agent/nope"))
    assert _hydra_user_error(ValueError("seed must be >= 0"))  # a multirun job's
    assert not _hydra_user_error(KeyError("a bug"))
    assert not _hydra_user_error(None)


def test_wandb_mode_in_the_environment_is_the_default_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from experiments.jobs import check_world
    from experiments.tune_btb import objective

    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert _compose("train", []).logger.mode == "disabled"
    assert _compose("train", ["logger.mode=offline"]).logger.mode == "offline"
    cfg = _compose(
        "tune_btb", ["logger=wandb", "workload=tiny", "workload.train_pool=1",
                     f"out_dir={tmp_path}"],
    )  # fmt: skip
    objective(cfg)
    assert (tmp_path / "objective.json").is_file() and not (tmp_path / "wandb").exists()
    monkeypatch.setenv("WANDB_MODE", "dryrun")
    source = r"got 'dryrun' \(from the environment variable WANDB_MODE\)$"
    with pytest.raises(ValueError, match=source):
        check_world(_compose("evaluate", []))


def test_a_run_wandb_refuses_stops_before_any_work_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import wandb

    from experiments.tune_btb import objective

    def refuse(**kwargs: Any) -> Any:
        (Path(kwargs["dir"]) / "wandb").mkdir()  # W&B's debug logs, as it fails
        (Path(kwargs["dir"]) / "wandb" / "debug.log").write_text("no such host")
        raise wandb.errors.CommError("Timed out while retrying: no such host\n  details")

    monkeypatch.setattr(wandb, "init", refuse)
    cfg = _compose(
        "tune_btb", ["logger=wandb", "logger.mode=online", "workload=tiny",
                     "workload.train_pool=1", f"out_dir={tmp_path}"],
    )  # fmt: skip
    with pytest.raises(ValueError) as info:
        objective(cfg)
    assert str(info.value) == (
        "logger.mode=online: W&B could not start the run (Timed out while retrying: no such "
        "host); use logger.mode=offline (upload later with `wandb sync`) or logger=none"
    )
    assert not (tmp_path / "objective.json").exists()
    assert not (tmp_path / "wandb").exists()  # (it kept the run folder from going)


def test_a_rejected_hydra_run_leaves_no_run_folder_but_keeps_an_existing_one(
    tmp_path: Path,
    run_command: Callable[..., Any],
) -> None:
    env: dict[str, str] = {}
    kept = tmp_path / "kept"
    kept.mkdir()
    for extra in ([], [f"out_dir={kept}"]):
        proc = run_command(
            "experiments.train", ["logger=none", "train.total_timesteps=-1", *extra], tmp_path, env
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr == (
            "error: experiments.train: "
            "train.total_timesteps must be >= 0, got -1 (from the command line)\n"
        )
    # the dated folder Hydra made for the rejected run is gone, and so are the
    # runs/train/ and runs/ made on the way to it
    assert not (tmp_path / "runs").exists()
    assert kept.is_dir()  # out_dir existed before the run: never removed


def test_info_flags_and_quoted_values_are_read_as_hydra_reads_them() -> None:
    from experiments.jobs import _folder_overrides, _is_info_flag

    assert all(_is_info_flag(a) for a in ("--cfg", "--cfg=job", "-cjob", "-h", "--info=all"))
    assert not any(_is_info_flag(a) for a in ("-cn", "-cp", "-cd", "-m", "--multirun", "x=1"))
    args = ["out_dir='/tmp/a b'", '+hydra.run.dir="/tmp/x"', "seed=1", "out_dir=null"]
    assert _folder_overrides(args) == [("out_dir", "/tmp/a b"), ("hydra.run.dir", "/tmp/x")]
    # a multirun uses hydra.sweep.dir, not hydra.run.dir (and a single run the other way)
    args = ["-m", "seed=0,1", "hydra.run.dir=/tmp/x", "hydra.sweep.dir=/tmp/s"]
    assert _folder_overrides(args) == [("hydra.sweep.dir", "/tmp/s")]
    assert _folder_overrides(args[2:]) == [("hydra.run.dir", "/tmp/x")]
    assert _folder_overrides(["out_dir=a,b", "out_dir="]) == []  # a sweep, an empty value


def test_a_rejected_run_keeps_a_quoted_existing_out_dir(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    env: dict[str, str] = {}
    kept = tmp_path / "kept"
    kept.mkdir()
    proc = run_command(
        "experiments.train",
        ["logger=none", "train.total_timesteps=-1", f"out_dir='{kept}'"],
        tmp_path,
        env,
    )
    assert proc.returncode == 2, proc.stderr
    assert kept.is_dir()


def test_a_rejected_run_removes_only_its_own_bare_folder(tmp_path: Path) -> None:
    """Two runs started in the same second share a dated folder: the rejected one
    removes it only if the recorded overrides are its own."""
    from experiments.jobs import _remove_bare_run_dir

    def bare_run_dir(name: str, overrides: str) -> Path:
        folder = tmp_path / name
        (folder / ".hydra").mkdir(parents=True)
        for file in ("config.yaml", "hydra.yaml"):
            (folder / ".hydra" / file).write_text("{}\n")
        (folder / ".hydra" / "overrides.yaml").write_text(overrides)
        (folder / "train.log").write_text("")
        return folder

    other = bare_run_dir("other", "- train.total_timesteps=256\n")
    _remove_bare_run_dir(other, "train.log", ["train.total_timesteps=-1"])
    assert (other / ".hydra" / "config.yaml").is_file() and (other / "train.log").is_file()
    mine = bare_run_dir("mine", "- train.total_timesteps=-1\n")
    _remove_bare_run_dir(mine, "train.log", ["train.total_timesteps=-1"])
    assert not mine.exists()
    with_results = bare_run_dir("with_results", "- train.total_timesteps=-1\n")
    (with_results / "results.json").write_text("{}")
    _remove_bare_run_dir(with_results, "train.log", ["train.total_timesteps=-1"])
    assert (with_results / ".hydra" / "overrides.yaml").is_file()


@pytest.mark.parametrize(
    ("name", "override", "message"),
    [
        ("train", "env.reward_scale=0", r"^env\.reward_scale must be a finite number > 0, got 0"),
        ("train", "env.slo_s=-1", r"^env\.slo_s must be a finite number > 0, got -1"),
        ("train", "env.copy_cost_per_gb=-1", r"^env\.copy_cost_per_gb must be a finite"),
        ("train", "env=thresholds env.epoch_s=0", r"^env\.epoch_s must be a finite number > 0"),
        ("train", "env=route_warm env.time_unit=minutes",
         r"^env\.time_unit must be one of seconds, reference, got 'minutes'"),
        # both names are the user's keys (only the first one was renamed)
        ("train", "env.tail_penalty=1",
         r"^env\.tail_penalty needs env\.slo_s \(the TTFT SLO in seconds\)$"),
        *[
            (name, override, message)
            for name in ("train", "evaluate", "tune_btb")
            for override, message in [
                ("cluster.node=0xH100", r"^cluster\.node='0xH100': n_gpus must be an integer >= 1"),
                ("cluster.node=4xFOO", r"^cluster\.node='4xFOO': unknown GPU preset 'FOO'"),
                # a node too small for the model: the key typed, not cluster.nodes[0]
                ("cluster.node=1xA100", r"^cluster\.node='1xA100': a node \(1xA100, 80 GB "
                 r"HBM\) cannot hold llama-3\.3-70b: its weights need 141\.2 GB$"),
                ("model.name=gpt-9", r"^model\.name='gpt-9': unknown model preset 'gpt-9'"),
                ("workload.params.n_bursts=-1",
                 r"^workload 'bursted_synthetic': "
                 r"workload\.params\.n_bursts must be an integer >= 0, got -1$"),
                ("+workload.params.first_burst_s=0.5",
                 r"^workload 'bursted_synthetic': "
                 r"workload\.params\.first_burst_s must be at least start_jitter_s"),
                ("workload.params.n_bursts=many",
                 r"parameter workload\.params\.n_bursts='many' is not a valid int$"),
            ]
        ],
    ],
)  # fmt: skip
def test_bad_group_values_are_named_by_their_config_path(
    name: str, override: str, message: str, tmp_path: Path
) -> None:
    from experiments import evaluate, train, tune_btb

    fn = {"train": train.train, "evaluate": evaluate.evaluate, "tune_btb": tune_btb.objective}
    cfg = _compose(name, ["logger=none", "workload=tiny", *override.split(), f"out_dir={tmp_path}"])
    with pytest.raises(ValueError, match=message):
        fn[name](cfg)


def test_a_bad_group_value_says_where_it_came_from() -> None:
    from experiments.config import value_origin

    with _hydra_job("train", ["workload=tiny", "+experiment=ppo_thresholds", "env.reward_scale=0"]):
        assert value_origin("env.reward_scale") == " (from the command line)"
        experiment = " (from conf/experiment/ppo_thresholds.yaml)"
        assert value_origin("train.total_timesteps") == experiment
        assert value_origin("env.kind") == " (from conf/env/thresholds.yaml)"
        assert value_origin("env.slo_s") == ""  # the schema's default


def test_a_bad_group_value_is_one_line_naming_the_key_typed(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    env = {"WANDB_MODE": "disabled"}
    proc = run_command(
        "experiments.evaluate",
        [
            "logger=none",
            "workload=tiny",
            "workload.params.n_bursts=-1",
            f"out_dir={tmp_path / 'run'}",
        ],
        tmp_path,
        env,
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        "error: experiments.evaluate: workload 'bursted_synthetic': "
        "workload.params.n_bursts must be an integer >= 0, got -1 (from the command line)\n"
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        # a field left at its default is named by its path, its owner class dropped
        ("+workload.params.start_jitter_s=30",
         r"^workload 'bursted_synthetic': "
         r"workload\.params\.first_burst_s must be at least start_jitter_s and decoy_lead_s "
         r"so no arrival is negative, got first_burst_s=20\.0 \(start_jitter_s=30, "
         r"decoy_lead_s=6\.0\)$"),
        # a lognormal's median of 0 was numpy's "math domain error", naming nothing
        ("workload=art_like +workload.params.think_median_s=0",
         r"^workload 'art_like': workload\.params\.think_median_s must be > 0, got 0$"),
        ("workload=agent_fanout +workload.params.depth=0",
         r"^workload 'agent_fanout': workload\.params\.depth must be >= 1, got 0$"),
        ("workload=agent_fanout +workload.params.fanout=[0,3]",
         r"^workload 'agent_fanout': "
         r"workload\.params\.fanout must be a \(low, high\) pair >= 1, got \(0, 3\)$"),
        # a number for a pair was a TypeError (a traceback)
        ("workload=agent_fanout +workload.params.fanout=5",
         r"parameter workload\.params\.fanout=5 is not a \(low, high\) pair"),
        ("workload=art_like +workload.params.surge_duration_s=5",
         r"parameter workload\.params\.surge_duration_s=5 is not a \(low, high\) pair"),
        ("workload=art_like +workload.params.mean_rate_per_s=0.1",
         r"^workload 'art_like': "
         r"workload\.params\.mean_rate_per_s must exceed the rate surges, spikes and fan-outs"),
        ("workload=rising_load +workload.params.prefix_tokens=0",
         r"^workload 'rising_load': workload\.params\.prefix_tokens must be >= 1, got 0$"),
        # true is not a count (bool subclasses int)
        ("workload.params.n_bursts=true",
         r"^workload 'bursted_synthetic': "
         r"workload\.params\.n_bursts must be an integer >= 0, got True$"),
        ("workload=multi_tenant +workload.params.tenants=true",
         r"^workload 'multi_tenant': workload\.params\.tenants must be an integer >= 1, got True$"),
        # a window with no requests: the run went on, on empty windows, exit 0
        ("workload=art_like +workload.params.rows_per_window=0",
         r"^workload 'art_like': "
         r"workload\.params\.rows_per_window must be an integer >= 1, got 0$"),
        ("workload=bursted_art +workload.params.rows_per_window=0",
         r"^workload 'bursted_art': "
         r"workload\.params\.rows_per_window must be an integer >= 1, got 0$"),
        ("workload.params.n_bursts=0 workload.params.n_decoys=0",
         r"^workload 'bursted_synthetic': "
         r"workload\.params\.n_bursts x workload\.params\.burst_requests \+ "
         r"workload\.params\.n_decoys must be >= 1, or every window is empty; got n_bursts=0, "
         r"burst_requests=40, n_decoys=0$"),
        # mixed's background spans the bursts' window: no bursts and no decoys, no window
        ("workload=mixed +workload.params.n_bursts=0 +workload.params.n_decoys=0",
         r"^workload 'mixed': workload\.params\.n_bursts x workload\.params\.burst_requests \+ "),
        ("workload=mixed +workload.params.burst_requests=0 +workload.params.n_decoys=0 "
         "+workload.params.background_rate_per_s=0",
         r"^workload 'mixed': workload\.params\.n_bursts x workload\.params\.burst_requests \+ "),
        ("workload=multi_tenant +workload.params.n_bursts=0 +workload.params.n_decoys=0",
         r"or every window is empty"),
        ("workload=rising_load +workload.params.ramp_s=0 +workload.params.hold_s=0 "
         "+workload.params.background_rate_per_s=0",
         r"^workload 'rising_load': "
         r"workload\.params\.ramp_s \+ workload\.params\.hold_s must be > 0 .*or every "
         r"window is empty; got ramp_s=0, hold_s=0, background_rate_per_s=0, lead_s=20\.0$"),
        # each > 0, named alone (0 was refused as "> 0" after -5 was as ">= 0")
        ("workload=conversation_like +workload.params.duration_s=0",
         r"^workload 'conversation_like': "
         r"workload\.params\.duration_s must be a finite number > 0, got 0$"),
        ("workload=conversation_like +workload.params.requests_per_hour=-5",
         r"^workload 'conversation_like': "
         r"workload\.params\.requests_per_hour must be a finite number > 0, got -5$"),
        ("workload=agent_fanout +workload.params.trees=0 +workload.params.background_rate_per_s=0",
         r"^workload 'agent_fanout': "
         r"workload\.params\.trees must be >= 1, or workload\.params\.background_rate_per_s "
         r"and workload\.params\.lead_s \+ workload\.params\.span_s > 0, or every window is empty"),
    ],
)  # fmt: skip
def test_every_workload_names_a_bad_parameter_by_its_path(override: str, message: str) -> None:
    from experiments.jobs import check_world

    cfg = _compose("evaluate", ["logger=none", "workload=tiny", *override.split()])
    with pytest.raises(ValueError, match=message):
        check_world(cfg)


@pytest.mark.parametrize(
    "override",
    [
        # bursts of no requests and no decoys: mixed's background over the bursts' window
        "workload=mixed +workload.params.burst_requests=0 +workload.params.n_decoys=0",
        "workload=rising_load +workload.params.ramp_s=0 +workload.params.hold_s=0",
        "workload=agent_fanout +workload.params.trees=0",
    ],
)
def test_a_background_only_workload_is_not_refused_as_empty(override: str) -> None:
    from experiments.config import window_pool_of
    from experiments.jobs import check_world

    cfg = _compose("evaluate", ["logger=none", "workload=tiny", *override.split()])
    check_world(cfg)
    (window,) = window_pool_of(cfg, "train", 1)
    assert len(window.requests) > 0


def test_naming_renames_the_fields_an_error_names_as_data_and_nothing_else() -> None:
    from envs.sim import ConfigError
    from experiments.config import naming_fields

    paths = {"n_bursts": "workload.params.n_bursts", "lead_s": "workload.params.lead_s"}

    def named(error: ValueError) -> str:
        with pytest.raises(ValueError) as caught, naming_fields(paths):
            raise error
        return str(caught.value)

    # the fields the check gave are renamed; a user's quoted value, a longer name
    # that contains a field's and the values after "got" are text, never read
    about = ConfigError.about(
        "BurstedSyntheticConfig.n_bursts", "needs {lead_s}, got 'x n_bursts' (decoy_lead_s=1)",
        "lead_s",
    )  # fmt: skip
    assert str(about) == (
        "BurstedSyntheticConfig.n_bursts needs lead_s, got 'x n_bursts' (decoy_lead_s=1)"
    )
    assert named(about) == (
        "workload.params.n_bursts needs workload.params.lead_s, got 'x n_bursts' (decoy_lead_s=1)"
    )
    # a field with no path here (another group's) keeps the name the check gave it
    other = ConfigError.about("sim.max_batch", "needs {n_bursts}", "n_bursts")
    assert named(other) == "sim.max_batch needs workload.params.n_bursts"
    # a plain message, or an error about no field of these, goes on unchanged
    for error in (ConfigError("n_bursts must be >= 0"), ValueError("lead_s must be >= 0"),
                  ConfigError.about("sim.mfu", "must be in (0, 1]")):  # fmt: skip
        with pytest.raises(ValueError) as caught, naming_fields(paths):
            raise error
        assert caught.value is error


def test_a_parent_dict_on_the_command_line_is_the_origin_a_group_choice_is_not() -> None:
    from experiments.config import value_origin

    with _hydra_job("train", ["workload=tiny", "workload.params={n_bursts: -1}", "env=thresholds"]):
        # the dict typed sets n_bursts; tiny.yaml's burst_requests is kept by the merge
        assert value_origin("workload.params.n_bursts") == " (from the command line)"
        assert value_origin("workload.params.burst_requests") == " (from conf/workload/tiny.yaml)"
        # env=thresholds chose a file; kind is that file's, not the command line's
        assert value_origin("env.kind") == " (from conf/env/thresholds.yaml)"


def test_a_config_file_on_the_search_path_is_named_as_the_origin(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "mine.yaml").write_text(
        "# @package _global_\nworkload:\n  params:\n    n_bursts: -1\n"
    )
    env = {"WANDB_MODE": "disabled"}
    proc = run_command(
        "experiments.evaluate",
        [
            "logger=none",
            "workload=tiny",
            f"hydra.searchpath=[file://{tmp_path}]",
            "+experiment=mine",
            f"out_dir={tmp_path / 'run'}",
        ],
        tmp_path,
        env,
    )
    assert proc.returncode == 2, proc.stderr
    # not conf/workload/tiny.yaml, which sets n_bursts too but was overridden
    assert proc.stderr == (
        "error: experiments.evaluate: workload 'bursted_synthetic': "
        "workload.params.n_bursts must be an integer >= 0, got -1 "
        f"(from {(tmp_path / 'experiment' / 'mine.yaml').resolve()})\n"
    )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train.total_timesteps=-5", "train.total_timesteps must be >= 0, got -5"),
        ("agent.hyperparams.gamma=2", "agent.hyperparams.gamma must be a number in [0, 1], got 2"),
        ("env.n_envs=0", "env.n_envs must be an integer in [1, 1024], got 0"),
        ("seed=-1", "seed must be >= 0 (a numpy seed), got -1"),
        ("logger.mode=bogus", "logger.mode must be one of offline, online, disabled, got 'bogus'"),
    ],
)
def test_a_checked_value_says_it_came_from_the_command_line(
    override: str, message: str, tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    # the checks of the job's values say where the value came from, as sim.* does
    args = ["logger=none", "workload=tiny", override, f"out_dir={tmp_path / 'run'}"]
    proc = run_command("experiments.train", args, tmp_path, {})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"error: experiments.train: {message} (from the command line)\n"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [  # (each said no origin: an index after the name, a check of the cluster's size,
        # or a message about another setting than the one typed)
        (["sim.upgrade_at_s=[-1]"],
         "sim.upgrade_at_s[0] must be a number >= 0, got -1.0 (from the command line)"),
        (["sim.model_versions=[v1]"],
         "sim.model_versions names 1 version for a cluster of 4 nodes; give one per node "
         "(from the command line)"),
        (["sim.fault_node_loss_s=[1]", "sim.fault_node_loss_nodes=[9]"],
         "sim.fault_node_loss_nodes[0] = 9 is not a node of the cluster (nodes 0..3) "
         "(from the command line)"),
        (["sim.fault_node_loss_nodes=[9]"],
         "sim.fault_node_loss_s has 0 times but sim.fault_node_loss_nodes has 1 node: one "
         "node for each time (sim.fault_node_loss_nodes from the command line)"),
    ],
)  # fmt: skip
def test_a_sim_setting_checked_against_the_cluster_or_another_says_its_origin(
    overrides: list[str], message: str, tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    args = ["logger=none", "policies=[btb]", *overrides, f"out_dir={tmp_path / 'run'}"]
    proc = run_command("experiments.evaluate", args, tmp_path, {})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"error: experiments.evaluate: {message}\n"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("train:\n  total_timesteps: -5\n", "train.total_timesteps must be >= 0, got -5"),
        ("env:\n  n_envs: 0\n", "env.n_envs must be an integer in [1, 1024], got 0"),
    ],
)
def test_a_checked_value_says_it_came_from_the_experiment_file(
    setting: str, message: str, tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    (tmp_path / "experiment").mkdir()
    mine = tmp_path / "experiment" / "mine.yaml"
    mine.write_text(f"# @package _global_\n{setting}")
    args = ["logger=none", "workload=tiny", f"hydra.searchpath=[file://{tmp_path}]"]
    proc = run_command(
        "experiments.train", [*args, "+experiment=mine", f"out_dir={tmp_path / 'run'}"], tmp_path
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"error: experiments.train: {message} (from {mine.resolve()})\n"


def test_a_key_value_commands_errors_name_the_command(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    # a value checked after the options are read was printed without the command's name
    proc = run_command("experiments.costs", ["node=0xH100"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        "error: experiments.costs: node='0xH100' (from the command line): n_gpus must be an "
        "integer >= 1, got 0\n"
    )
    proc = run_command("experiments.compare", ["agents=none", "windows=-1"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        "error: experiments.compare: windows must be >= 0 (0 = all test windows), got -1 "
        "(from the command line)\n"
    )


def test_a_bad_env_value_with_subproc_envs_is_one_line_before_the_run_folder(
    tmp_path: Path,
    run_command: Callable[..., Any],
) -> None:
    # a worker process's error used to end in two tracebacks and 'error: [Errno 32] Broken pipe'
    env = {"WANDB_MODE": "disabled"}
    proc = run_command(
        "experiments.train",
        [
            "logger=none",
            "workload=tiny",
            "env.vec=subproc",
            "env.n_envs=2",
            "env.reward_scale=0",
            f"out_dir={tmp_path / 'run'}",
        ],
        tmp_path,
        env,
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        "error: experiments.train: "
        "env.reward_scale must be a finite number > 0, got 0.0 (from the command line)\n"
    )
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        # learn() asserted: a traceback after the run had started
        ("agent=dqn agent.hyperparams.train_freq=0",
         r"^agent\.hyperparams\.train_freq must be an integer >= 1, got 0$"),
        ("agent=dqn agent.hyperparams.train_freq=[0,step]",
         r"^agent\.hyperparams\.train_freq must be an integer >= 1, got 0$"),
        # SB3 said "The frequency of `train_freq` must be an integer and not [1]"
        ("agent=dqn agent.hyperparams.train_freq=[1]",
         r"^agent\.hyperparams\.train_freq must be an integer >= 1 or a pair \[n, step \| "
         r"episode\], got \[1\]$"),
        ("agent=dqn agent.hyperparams.train_freq=[1,epoch]",
         r"^agent\.hyperparams\.train_freq must be .* got \[1, 'epoch'\]$"),
        # checked before SB3 builds the model (torch refused it after, behind SB3's
        # warnings about other settings)
        ("agent.hyperparams.learning_rate=-1",
         r"^agent\.hyperparams\.learning_rate must be a finite number >= 0, got -1$"),
        # SB3 refuses these itself only when it builds the model (or trains to nan
        # weights and fails at the next rollout): checked without a model, so a
        # sweep refuses them before any job trains
        ("+agent.hyperparams.clip_range_vf=-1",
         r"^agent\.hyperparams\.clip_range_vf must be a finite number > 0, got -1$"),
        ("+agent.hyperparams.clip_range_vf=0",
         r"^agent\.hyperparams\.clip_range_vf must be a finite number > 0, got 0$"),
        ("agent.hyperparams.batch_size=1",
         r"^agent\.hyperparams\.batch_size must be an integer >= 2 with agent\.hyperparams\."
         r"normalize_advantage on \(a minibatch's advantages are normalised: over one step, "
         r"nan\), got 1$"),
        ("agent=maskable_ppo env=route_warm agent.hyperparams.batch_size=1",
         r"^agent\.hyperparams\.batch_size must be an integer >= 2 with "),
        ("agent.hyperparams.n_steps=1 env.n_envs=1",
         r"^agent\.hyperparams\.n_steps=1 x env\.n_envs=1 = 1 step a rollout; at least 2 "
         r"\(agent\.hyperparams\.normalize_advantage normalises advantages: over one step, "
         r"nan\)$"),
        ("agent=a2c agent.hyperparams.n_steps=1 env.n_envs=1 "
         "+agent.hyperparams.normalize_advantage=true",
         r"^agent\.hyperparams\.n_steps=1 x env\.n_envs=1 = 1 step a rollout; at least 2 "),
        # both refused: batch_size is checked first
        ("agent.hyperparams.batch_size=1 agent.hyperparams.n_steps=1 env.n_envs=1",
         r"^agent\.hyperparams\.batch_size must be an integer >= 2 "),
        # sb3-contrib's MaskablePPO normalises an epoch's last minibatch of one step to nan
        ("agent=maskable_ppo env=route_warm agent.hyperparams.n_steps=17 "
         "agent.hyperparams.batch_size=8 env.n_envs=1",
         r"^agent\.hyperparams\.batch_size=8 leaves each epoch's last minibatch one step of a "
         r"rollout of n_steps x env\.n_envs = 17 steps, and maskable_ppo normalises it "),
        ("+agent.hyperparams.use_sde=true",
         r"^agent\.hyperparams\.use_sde must be false: gSDE explores continuous actions, and "
         r"every env's are discrete, got True$"),
        ("agent=dqn +agent.hyperparams.optimize_memory_usage=true",
         r"^agent\.hyperparams\.optimize_memory_usage=true needs agent\.hyperparams\."
         r"replay_buffer_kwargs=\{handle_timeout_termination:false\}: SB3's replay buffer "
         r"does not do both$"),
        # asserted at learn()'s first step, after the run folder
        ("agent=dqn agent.hyperparams.train_freq=[1,episode] env.n_envs=2",
         r"^agent\.hyperparams\.train_freq=\[1, 'episode'\] counts episodes, which SB3 "
         r"collects from one env only: env\.n_envs must be 1, got 2$"),
        # torch takes an infinite rate (the weights go to nan)
        ("agent.hyperparams.learning_rate=inf",
         r"^agent\.hyperparams\.learning_rate must be a finite number >= 0, got inf$"),
        ("agent.hyperparams.n_steps=0",
         r"^agent\.hyperparams\.n_steps must be an integer in \[1, 1048576\]"),
        ("agent.hyperparams.n_steps=1000000000000",
         r"^agent\.hyperparams\.n_steps must be an integer in \[1, 1048576\]"),
        # SB3 ran these to the end (exit 0), on nonsense
        ("agent.hyperparams.gamma=2",
         r"^agent\.hyperparams\.gamma must be a number in \[0, 1\], got 2$"),
        ("agent=a2c +agent.hyperparams.gamma=-0.1",
         r"^agent\.hyperparams\.gamma must be a number in \[0, 1\]"),
        ("agent.hyperparams.gamma=nan",
         r"^agent\.hyperparams\.gamma must be a number in \[0, 1\], got nan$"),
        ("agent.hyperparams.gamma=true",
         r"^agent\.hyperparams\.gamma must be a number in \[0, 1\], got True$"),
        ("agent.hyperparams.gamma=high",
         r"^agent\.hyperparams\.gamma must be a number in \[0, 1\], got 'high'$"),
        ("+agent.hyperparams.gae_lambda=1.5",
         r"^agent\.hyperparams\.gae_lambda must be a number in \[0, 1\]"),
        ("+agent.hyperparams.clip_range=-1",
         r"^agent\.hyperparams\.clip_range must be a finite number > 0, got -1$"),
        ("+agent.hyperparams.clip_range=0",
         r"^agent\.hyperparams\.clip_range must be a finite number > 0"),
        ("agent.hyperparams.ent_coef=-0.5",
         r"^agent\.hyperparams\.ent_coef must be a finite number >= 0"),
        ("+agent.hyperparams.vf_coef=-1",
         r"^agent\.hyperparams\.vf_coef must be a finite number >= 0"),
        ("+agent.hyperparams.max_grad_norm=0",
         r"^agent\.hyperparams\.max_grad_norm must be a number > 0, got 0$"),
        ("agent.hyperparams.n_epochs=0",
         r"^agent\.hyperparams\.n_epochs must be an integer >= 1, got 0$"),
        ("agent.hyperparams.n_epochs=2.5",
         r"^agent\.hyperparams\.n_epochs must be an integer >= 1, got 2\.5$"),
        ("agent.hyperparams.batch_size=0",
         r"^agent\.hyperparams\.batch_size must be an integer in \[1, 1048576\]"),
        ("+agent.hyperparams.target_kl=0",
         r"^agent\.hyperparams\.target_kl must be a finite number > 0"),
        ("agent=maskable_ppo env=route_warm +agent.hyperparams.gamma=1.01",
         r"^agent\.hyperparams\.gamma must be a number in \[0, 1\]"),
        ("agent=dqn agent.hyperparams.buffer_size=-1",
         r"^agent\.hyperparams\.buffer_size must be an integer in \[1, 100000000\], got -1$"),
        ("agent=dqn agent.hyperparams.learning_starts=-1",
         r"^agent\.hyperparams\.learning_starts must be an integer >= 0, got -1$"),
        ("agent=dqn agent.hyperparams.exploration_fraction=2",
         r"^agent\.hyperparams\.exploration_fraction must be a number in \[0, 1\], got 2$"),
        ("agent=dqn +agent.hyperparams.exploration_initial_eps=1.5",
         r"^agent\.hyperparams\.exploration_initial_eps must be a number in \[0, 1\]"),
        ("agent=dqn +agent.hyperparams.exploration_final_eps=-0.1",
         r"^agent\.hyperparams\.exploration_final_eps must be a number in \[0, 1\]"),
        ("agent=dqn +agent.hyperparams.tau=2",
         r"^agent\.hyperparams\.tau must be a number in \[0, 1\]"),
        ("agent=dqn agent.hyperparams.target_update_interval=0",
         r"^agent\.hyperparams\.target_update_interval must be an integer >= 1"),
        ("agent=a2c +agent.hyperparams.rms_prop_eps=0",
         r"^agent\.hyperparams\.rms_prop_eps must be a finite"),
        # not the algorithm's, or set by the run: SB3's TypeError came after the run folder
        ("agent=a2c +agent.hyperparams.clip_range=0.2",
         r"^agent\.hyperparams\.clip_range: not a a2c hyperparameter; "
         r"known: learning_rate, n_steps"),
        ("+agent.hyperparams.seed=3",
         r"^agent\.hyperparams\.seed: set by the run \(seed, agent\.net"),
    ],
)  # fmt: skip
def test_bad_agent_hyperparams_are_named(override: str, message: str, tmp_path: Path) -> None:
    from experiments import train

    cfg = _compose(
        "train",
        ["logger=none", "workload=tiny", "train.progress=false", *override.split(),
         f"out_dir={tmp_path / 'run'}"],
    )  # fmt: skip
    with pytest.raises(ValueError, match=message):
        train.train(cfg)
    assert not (tmp_path / "run").exists()  # refused before the run folder is made


@pytest.mark.parametrize(
    ("algo", "hyperparams"),
    [
        ("ppo", {"gamma": 1, "gae_lambda": 0.0, "clip_range_vf": None, "target_kl": None,
                 "ent_coef": 0, "learning_rate": 0.0, "sde_sample_freq": -1}),
        ("a2c", {"gamma": 0.0, "rms_prop_eps": 1e-5, "max_grad_norm": 0.5}),
        ("a2c", {"max_grad_norm": float("inf")}),  # clipping off
        ("dqn", {"exploration_fraction": 1.0, "exploration_final_eps": 0.0, "tau": 1.0,
                 "learning_starts": 0, "gradient_steps": -1, "train_freq": [4, "episode"]}),
        ("dqn", {"learning_starts": 1e3, "buffer_size": 5e4}),  # 1e3 reads as a float
        ("maskable_ppo", {"clip_range": 0.1, "n_epochs": 1, "batch_size": 64}),
        ("ppo", {"batch_size": 1, "normalize_advantage": False, "clip_range_vf": 0.2}),
        ("ppo", {"use_sde": False, "clip_range_vf": lambda progress: 0.2}),
        ("dqn", {"optimize_memory_usage": True,
                 "replay_buffer_kwargs": {"handle_timeout_termination": False}}),
    ],
)  # fmt: skip
def test_hyperparams_sb3_accepts_are_accepted(algo: str, hyperparams: dict[str, Any]) -> None:
    from agents.algorithms import check_hyperparams

    check_hyperparams(algo, hyperparams)
    check_hyperparams(algo, {"learning_rate": lambda progress: 1e-3 * progress})  # a schedule


@pytest.mark.parametrize(
    ("algo", "hyperparams", "n_envs"),
    [
        ("ppo", {"n_steps": 17, "batch_size": 8}, 1),  # PPO skips a last minibatch of one
        ("ppo", {"n_steps": 1, "batch_size": 2}, 2),  # a rollout of 2 steps
        ("ppo", {"n_steps": 1, "normalize_advantage": False}, 1),
        ("maskable_ppo", {"n_steps": 17, "batch_size": 8, "normalize_advantage": False}, 1),
        ("maskable_ppo", {"n_steps": 18, "batch_size": 8}, 1),  # a last minibatch of 2
        ("maskable_ppo", {"n_steps": 16, "batch_size": 32}, 1),  # one minibatch, the rollout
        ("a2c", {"n_steps": 1}, 1),  # A2C does not normalise by default
        # normalising, with no batch_size to take (helper-76's review: a KeyError)
        ("a2c", {"n_steps": 5, "normalize_advantage": True}, 1),
        ("dqn", {"train_freq": [1, "episode"]}, 1),
        ("dqn", {"train_freq": 4}, 2),
    ],
)
def test_rollouts_sb3_trains_are_accepted(
    algo: str, hyperparams: dict[str, Any], n_envs: int
) -> None:
    """Each probed on SB3 2.9.2 and sb3-contrib 2.9.2: it builds and learns."""
    from agents.algorithms import check_hyperparams, check_rollout

    check_hyperparams(algo, hyperparams)
    check_rollout(algo, hyperparams, n_envs)


def test_the_shipped_agents_hyperparams_are_accepted() -> None:
    from agents.algorithms import check_hyperparams

    confs = sorted((CONF / "agent").glob("*.yaml"))
    assert confs
    for conf in confs:
        cfg = _compose("train", ["logger=none", f"agent={conf.stem}"])
        check_hyperparams(cfg.agent.algo, dict(cfg.agent.hyperparams))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("imitation.setups=[foo]",
         r"^imitation\.setups: unknown setup 'foo'; known: 70b_h100x4, .*dense1t_b300x4$"),
        ("imitation.workloads=[art_like,foo]",
         r"^imitation\.workloads: unknown workload 'foo'; "
         r"known: bursted_art, .*conversation_like$"),
        ("imitation.episodes=-1", r"^imitation\.episodes must be >= 0, got -1$"),
        ("imitation.epochs=0", r"^imitation\.epochs must be >= 1, got 0$"),
        ("imitation.batch_size=0", r"^imitation\.batch_size must be >= 1, got 0$"),
        ("imitation.learning_rate=-1", r"^imitation\.learning_rate must be a finite number >= 0"),
        ("imitation.value_coef=inf", r"^imitation\.value_coef must be a finite number >= 0"),
        ("+imitation.teacher.z=0", r"^imitation\.teacher\.z must be > 0 seconds, got 0$"),
        ("+imitation.teacher.z=abc", r"^imitation\.teacher\.z must be > 0 seconds, got 'abc'$"),
        ("+imitation.teacher.bogus=1",
         r"^imitation\.teacher: .*unexpected keyword argument 'bogus'$"),
        # behavioural cloning of an agent it cannot train was an AttributeError traceback
        ("agent=dqn", r"^imitation\.episodes=1: behavioural cloning trains an actor-critic "),
        ("env=thresholds", r"^imitation\.episodes=1: .*got agent\.algo=ppo, env\.kind=thresholds$"),
        ("agent=ppo_mlp cluster=4xH100_x6 imitation.setups=[glm52_h100x8]",
         r"^imitation\.setups: 'glm52_h100x8' has 4 nodes, but agent\.net=mlp is fixed to the "
         r"training cluster's 6 "),
    ],
)  # fmt: skip
def test_bad_imitation_settings_are_named_before_any_env(
    override: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from experiments import train

    monkeypatch.setattr(train, "window_pool_of", _never)  # no env may be built
    cfg = _compose(
        "train",
        ["logger=none", "workload=tiny", "imitation.episodes=1", *override.split(),
         f"out_dir={tmp_path / 'run'}"],
    )  # fmt: skip
    with pytest.raises(ValueError, match=message):
        train.train(cfg)
    assert not (tmp_path / "run").exists()


def test_an_unknown_imitation_setup_is_one_line_naming_the_field(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    env = {"WANDB_MODE": "disabled"}
    proc = run_command(
        "experiments.train",
        ["logger=none", "workload=tiny", "imitation.episodes=1", "imitation.setups=[foo]"],
        tmp_path,
        env,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith(
        "error: experiments.train: imitation.setups: unknown setup 'foo'; known: "
    )
    assert proc.stderr.count("\n") == 1
    assert not (tmp_path / "runs").exists()  # Hydra's folder is removed, and runs/train/


def test_a_closed_pipe_ends_a_command_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m experiments.compare --help | head``: the reader left; exit 0, no error."""
    import experiments._cli as cli

    moved: list[int] = []
    monkeypatch.setattr(cli.os, "dup2", lambda fd, to: moved.append(to))

    def write() -> None:
        raise BrokenPipeError(32, "Broken pipe")

    assert cli.main_guard(write) == 0


def test_an_io_error_writing_to_a_file_stays_an_error() -> None:
    """EIO on a hung-up terminal means no one reads it (the run goes on, writing to
    /dev/null); on a file it is a failing disk or network file system, which must
    not be silenced (a review found any EIO taken as a reader gone)."""
    import errno

    from experiments._cli import _outliving

    class FailingFile:
        def isatty(self) -> bool:
            return False

        def write(self, text: str) -> int:
            raise OSError(errno.EIO, "Input/output error")

        def flush(self) -> None:
            raise OSError(errno.EIO, "Input/output error")

    stream = _outliving(FailingFile())
    with pytest.raises(OSError, match="Input/output error"):
        stream.write("a line\n")
    with pytest.raises(OSError, match="Input/output error"):
        stream.flush()


def test_a_reader_gone_mid_run_leaves_the_run_to_finish_and_write_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``compare | head -1``: the reader leaves after the first line. The rest of the
    run's printing goes to /dev/null and the run writes its files and ends with
    status 0; before, the next print raised BrokenPipeError and the run was lost."""
    import experiments._cli as cli

    read, write = os.pipe()
    os.close(read)  # the reader is gone: writing raises BrokenPipeError (EPIPE)
    pipe = open(write, "w", buffering=1, encoding="utf-8")  # noqa: SIM115
    monkeypatch.setattr(sys, "stdout", pipe)

    def run() -> None:
        for i in range(100):
            print(f"row {i}")
        (tmp_path / "results.json").write_text("{}", encoding="utf-8")

    try:
        assert cli.main_guard(run) == 0
        assert (tmp_path / "results.json").read_text(encoding="utf-8") == "{}"
        assert sys.stdout is pipe  # put back
        print("after the run")  # the pipe's descriptor now leads to /dev/null
    finally:
        pipe.close()


def test_hydra_full_error_keeps_hydra_s_own_report(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """HYDRA_FULL_ERROR=1: Hydra's own exception goes on, for Python to print with its
    traceback (in a process of its own: ``Traceback ... ConfigCompositionException``)."""
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException, match=r"Error merging override sim\.mfu=abc"):
        run_command(
            "experiments.train",
            ["logger=none", "sim.mfu=abc"],
            tmp_path,
            {"HYDRA_FULL_ERROR": "1"},
            unset=(),
        )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [  # the structured config reads 2, 1 and "yes" as true: the value as written is refused
        (["env=thresholds", "env.eft_rules=2"], "env.eft_rules must be true or false, got 2"),
        (["train.evaluate=yes"], "train.evaluate must be true or false, got 'yes'"),
        (["sim.attention_flops=1"], "sim.attention_flops must be true or false, got 1"),
    ],
)
def test_a_true_false_key_refuses_other_values(overrides: list[str], message: str) -> None:
    from experiments.jobs import check_world

    job = _hydra_job("train", ["logger=none", "workload=tiny", *overrides])
    with job as cfg, pytest.raises(ValueError) as error:
        check_world(cfg)
    assert str(error.value) == message + " (from the command line)"


def test_a_true_false_key_given_a_word_hydra_refuses_is_said_the_same_way(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """OmegaConf refuses ``maybe`` while Hydra merges the override, before the check
    above: the one line says it as that check does, not as Hydra's merge error."""
    for args, key in (
        (["env=thresholds", "env.spread_rules=maybe"], "env.spread_rules"),
        (["train.evaluate=perhaps"], "train.evaluate"),
    ):
        done = run_command("experiments.train", ["logger=none", "workload=tiny", *args], tmp_path)
        assert done.returncode == 2
        word = args[-1].partition("=")[2]
        assert done.stderr.strip() == (
            "error: experiments.train: "
            f"{key} must be true or false, got '{word}' (from the command line)"
        )
    # the project's own check, for a word OmegaConf takes as true: the same line
    done = run_command(
        "experiments.train", ["logger=none", "workload=tiny", "train.evaluate=yes"], tmp_path
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: experiments.train: "
        "train.evaluate must be true or false, got 'yes' (from the command line)"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_true_false_key_accepts_true_and_false() -> None:
    from experiments.jobs import check_world

    overrides = ["env=thresholds", "env.eft_rules=true", "train.evaluate=false"]
    with _hydra_job("train", ["logger=none", "workload=tiny", *overrides]) as cfg:
        check_world(cfg)  # no error
        assert cfg.env.eft_rules is True and cfg.train.evaluate is False


def test_a_true_false_key_refuses_other_values_in_a_dict_and_in_a_parent_experiment(
    tmp_path: Path,
) -> None:
    from experiments.jobs import check_world

    line = ["logger=none", "workload=tiny", "sim={attention_flops: 2}"]
    with _hydra_job("train", line) as cfg, pytest.raises(ValueError) as error:
        check_world(cfg)
    assert (
        str(error.value)
        == "sim.attention_flops must be true or false, got 2 (from the command line)"
    )
    # a child experiment builds on a parent that writes 2 for train.progress
    (tmp_path / "experiment").mkdir()
    parent = tmp_path / "experiment" / "bad_parent.yaml"
    parent.write_text("# @package _global_\ntrain:\n  progress: 2\n")
    child = "# @package _global_\ndefaults:\n  - bad_parent\n  - _self_\nseed: 1\n"
    (tmp_path / "experiment" / "bad_child.yaml").write_text(child)
    overrides = ["logger=none", "workload=tiny", f"hydra.searchpath=[file://{tmp_path}]"]
    job = _hydra_job("train", [*overrides, "+experiment=bad_child"])
    with job as cfg, pytest.raises(ValueError) as error:
        check_world(cfg)
    assert str(error.value) == f"train.progress must be true or false, got 2 (from {parent})"


@pytest.mark.parametrize("fails", [False, True])
def test_a_job_runs_with_the_rare_gc_threshold_and_gives_the_callers_back(monkeypatch, fails):
    # the whole job collects rarely, as simulator runs do; the caller's setting
    # comes back however the job ends
    import gc

    from envs.sim import rare_gc

    gc.collect()  # envs earlier tests left unclosed let go of their holds first
    monkeypatch.setattr(rare_gc, "RARE_GC", rare_gc.RareGC())
    saved = gc.get_threshold()
    seen: list[int] = []

    def job() -> None:
        seen.append(gc.get_threshold()[0])
        if fails:
            raise ValueError("workload.path: no such file")

    try:
        gc.set_threshold(700, *saved[1:])
        assert main_guard(job) == (2 if fails else 0)
        assert seen == [rare_gc.RUN_GC_THRESHOLD]
        assert gc.get_threshold()[0] == 700
    finally:
        gc.set_threshold(*saved)


def test_tune_btb_y_tokens_below_one_block_is_named_as_typed(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """BTB itself says so only once running, as btb.y_tokens and with no origin."""
    out = tmp_path / "tb"
    args = ["workload=tiny", "y_tokens=100", "logger=none", f"out_dir={out}"]
    done = run_command("experiments.tune_btb", args, tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: experiments.tune_btb: "
        "y_tokens must be at least one 256-token block of the workload, got 100 "
        "(from the command line)"
    )
    assert not out.exists()


def test_the_resume_hint_names_a_config_option_that_exists() -> None:
    from agents.algorithms import AgentSpec
    from experiments.train import _resume_with

    spec = AgentSpec("a2c", "route", net="mlp", env_kwargs={"n_nodes": 4})
    assert _resume_with("agent.net", "mlp", spec) == "agent=a2c agent.net=mlp"  # no a2c_mlp
    spec = AgentSpec("ppo", "route", net="mlp", env_kwargs={"n_nodes": 4})
    assert _resume_with("agent.algo", "ppo", spec) == "agent=ppo_mlp"
    spec = AgentSpec("maskable_ppo", "route_warm", env_kwargs={"n_nodes": 4})
    assert _resume_with("env.kind", "route_warm", spec) == "env=route_warm"
    assert _resume_with("env.step_wait", True, spec) == "env.step_wait=True"


def test_evaluate_takes_a_shipped_agent_by_name(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """checkpoint= takes a shipped agent's name as compare's agents= does."""
    base = ["logger=none", "workload=tiny", "workload.eval_windows=1", "policies=[]"]
    run = tmp_path / "run"
    done = run_command(
        "experiments.evaluate", [*base, "checkpoint=[bc_route_warm]", f"out_dir={run}"], tmp_path
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads((run / "results.json").read_text())["rows"]
    assert "bc_route_warm" in [row["policy"] for row in rows]
    bad = run_command(
        "experiments.evaluate", [*base, "checkpoint=[no_such_agent]", f"out_dir={run}2"], tmp_path
    )
    assert bad.returncode == 2
    assert bad.stderr.startswith(
        "error: experiments.evaluate: "
        "checkpoint: 'no_such_agent' is not an agent checkpoint (no agent.json there) "
        "nor a shipped agent's name (agents/zoo/: bc_route_warm, "
    )


def test_evaluate_split_val_says_when_training_scores_on_other_windows(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    base = ["logger=none", "workload=tiny", "split=val", "policies=[btb]", "progress=false"]
    done = run_command(
        "experiments.evaluate",
        [*base, "workload.val_windows=2", f"out_dir={tmp_path / 'a'}"],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "note: split=val evaluates 1 validation windows (workload.eval_windows); training " \
        "scores on 2 (workload.val_windows=2" in done.stdout  # fmt: skip
    same = ["workload.val_windows=1", f"out_dir={tmp_path / 'b'}"]  # tiny's eval_windows: 1
    done = run_command("experiments.evaluate", [*base, *same], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "note: split=val" not in done.stdout


def test_evaluate_reads_the_validation_windows_a_checkpoints_run_recorded(tmp_path: Path) -> None:
    """split=val's note names the windows the checkpoint's own run scored on (its
    train.json), not those evaluate's config would give a training run."""
    from experiments.evaluate import _validation_windows

    run = tmp_path / "run"
    for folder in ("agent", "checkpoints/step_64", "last"):
        (run / folder).mkdir(parents=True)
    record = {"train": {"validation": {"windows": ["tiny/tiny-0003", "tiny/tiny-0004"]}}}
    (run / "train.json").write_text(json.dumps(record))
    other = tmp_path / "other" / "agent"  # a run that recorded no validation
    other.mkdir(parents=True)
    (other.parent / "train.json").write_text(json.dumps({"train": {"validation": None}}))
    folders = [run / "agent", run / "checkpoints" / "step_64", other]
    found = _validation_windows(folders)
    assert found == {
        str(run / "agent"): ["tiny/tiny-0003", "tiny/tiny-0004"],
        str(run / "checkpoints" / "step_64"): ["tiny/tiny-0003", "tiny/tiny-0004"],
    }


def test_tune_btb_warns_when_every_y_is_longer_than_any_shared_prefix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """tiny's bursts share 2,048 tokens here (8 blocks of 256): the default Y
    choices (4,096-65,536) key no burst, so every trial ties; the warning says so
    and offers Y choices that fit. At tiny's own 65,536-token prefix: no warning."""
    from experiments.tune_btb import check_sweep

    check_sweep(["-m", "workload=tiny", "+workload.params.prefix_tokens=2048"])
    err = capsys.readouterr().err
    assert "longer than any prefix two requests of the 2 train windows share (2,048 tokens" in err
    assert err.rstrip().endswith("e.g. 'y_tokens=choice(512,1024,2048)'")
    check_sweep(["-m", "workload=tiny"])
    assert capsys.readouterr().err == ""


def test_the_longest_shared_prefix_by_hand() -> None:
    """Chained ids: a request shares its leading blocks seen before. r1 shares 2
    blocks of r0, r2 shares 3 of r1 (blocks 1, 2, 5), so the longest is 3 x 256."""
    from envs.sim.request import Request, Workload
    from envs.workloads.stats import longest_shared_prefix_tokens

    prompts = [(1, 2, 3), (1, 2, 5, 6), (1, 2, 5, 9)]
    requests = [Request(i, f"r{i}", float(i), 1024, 1, b) for i, b in enumerate(prompts)]
    assert longest_shared_prefix_tokens(Workload("w", 256, requests)) == 3 * 256


@pytest.mark.parametrize("arg", ["setup.name=qwen3_8b_h100x4", "+setup.name=x", "++setup.name=x"])
def test_setup_name_on_the_command_line_is_refused_not_ignored(
    arg: str, tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """setup.name records the setup chosen; setting it ran the default setup."""
    done = run_command("experiments.tune_btb", ["logger=none", "workload=tiny", arg], tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "error: experiments.tune_btb: setup.name records the setup chosen; choose one with "
        f"setup=NAME (got {arg!r} from the command line)\n"
    )
    assert not (tmp_path / "runs").exists()


def test_a_cluster_past_the_ceiling_is_refused_however_it_is_built() -> None:
    from envs.sim.config import MAX_NODES, ClusterSpec, NodeSpec, model_preset

    with pytest.raises(ValueError, match=r"^cluster\.n_nodes must be an integer in \[1, 4096\]"):
        ClusterSpec.uniform("llama-3.3-70b", "4xH100", MAX_NODES + 1)
    node = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 1).nodes[0]
    assert isinstance(node, NodeSpec)
    with pytest.raises(
        ValueError, match=r"^cluster\.nodes has 4097 nodes; a cluster holds at most"
    ):
        ClusterSpec(model_preset("llama-3.3-70b"), (node,) * (MAX_NODES + 1))


def test_a_window_with_no_request_is_refused_naming_it_as_the_command_takes_it() -> None:
    """evaluate and train (``jobs.check_world``) say it as compare and make_dataset do
    (``evaluation.no_requests``), with the seed and the parameters as a Hydra command
    takes them."""
    from experiments.jobs import eval_windows

    cfg = _compose(
        "evaluate",
        ["logger=none", "workload=conversation_like", "+workload.params.requests_per_hour=0.0001"],
    )
    said = (
        "workload conversation_like[requests_per_hour=0.0001]: test window "
        "'conversation_like/conversation-0000' has no requests (workload.seed=20260721); every "
        "window needs some: change workload.params or workload.seed"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(said)}$"):
        eval_windows(cfg, 1)


@pytest.mark.parametrize(
    ("name", "groups"),
    [
        ("tune_btb", ["cluster", "logger", "model", "setup", "sim", "workload"]),
        ("evaluate", ["cluster", "logger", "model", "setup", "sim", "workload"]),
        (
            "train",
            [
                "agent",
                "cluster",
                "env",
                "experiment",
                "logger",
                "model",
                "setup",
                "sim",
                "workload",
            ],
        ),
    ],
)
def test_hydra_help_lists_only_the_groups_the_command_takes(
    name: str, groups: list[str], tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """``tune_btb --help`` listed agent, env and experiment, which it refuses
    (``tune_btb agent=ppo``: no match in the defaults list)."""
    proc = run_command(f"experiments.{name}", ["--help"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    listed = proc.stdout.split("== Configuration groups ==\n")[1].split("== Config ==")[0]
    assert [line.split(":")[0] for line in listed.splitlines()[1:] if ": " in line] == groups


@pytest.mark.parametrize(
    ("override", "origin"),
    [
        ("model=dense-1t", "from conf/model/dense-1t.yaml"),
        ("model.name=dense-1t", "from the command line"),
    ],
)
def test_a_model_too_big_for_the_node_says_where_the_model_came_from(
    override: str, origin: str, tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    # the model changed, the node did not: the line names where each came from
    args = ["logger=none", "workload=tiny", override, f"out_dir={tmp_path / 'run'}"]
    proc = run_command("experiments.evaluate", args, tmp_path, {"WANDB_MODE": "disabled"})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (
        "error: experiments.evaluate: cluster.node='4xH100' (from conf/cluster/4xH100_x4.yaml): "
        "a node (4xH100, 320 GB HBM) cannot hold dense-1t: its weights need 1000 GB "
        f"(model.name='dense-1t' {origin})\n"
    )


def test_evaluate_s_first_line_names_the_kv_model_as_compare_s_does(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """evaluate's line before its table said setup, workload, windows and seed but
    not the KV model its figures are under, which compare's line says."""
    done = run_command(
        "experiments.evaluate",
        ["logger=none", "workload=tiny", "workload.eval_windows=1", "policies=[cache_aware]",
         "progress=false", "sim.causal_kv=false", "sim.copy_model=contention",
         f"out_dir={tmp_path / 'e'}"],
        tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.endswith(" · causal_kv=False · copy_model=contention · seed=0"), first
    done = run_command(
        "experiments.compare",
        ["params=burst_requests=6,n_decoys=2,n_bursts=1", "windows=1", "agents=none",
         "policies=cache_aware", "progress=false", "charts=false", "causal_kv=false",
         "copy_model=contention", f"out_dir={tmp_path / 'c'}"],
        tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    header = next(line for line in done.stdout.splitlines() if " · " in line)
    assert header.endswith(" · causal_kv=False · copy_model=contention"), header


def test_a_trace_warning_said_bare_after_its_named_form_is_said_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trace planned again outside trace_option_warnings (a dataset's folder is
    never kept) said its warning a second time, bare (``hub_split=``) after the
    command line's spelling (``workload.hub_split=``); both now read as the command
    line spells the option, and the repeat is not said."""
    from envs.workloads.readers import TraceWarning
    from experiments import _cli

    monkeypatch.setattr(_cli, "SAID_WARNINGS", [])
    warning = TraceWarning("{hub_split}='test' does nothing: one split", ("hub_split",))
    _cli.show_warning(warning, TraceWarning, "file.py", 1)
    _cli.show_warning(warning, TraceWarning, "file.py", 1)
    assert capsys.readouterr().err == (
        "warning: workload.hub_split='test' does nothing: one split\n"
    )


def test_the_workload_check_lets_through_what_the_registry_knows() -> None:
    """``check_workload`` (compare, make_dataset, reproduce) refuses only what the
    registry refuses: every registered workload, ``trace`` and a workload of one's
    own (``plugin:MODULE:FUNCTION``, its module read later) pass."""
    from envs.workloads.registry import list_workloads
    from experiments._cli import UsageError, check_workload

    for name in [*list_workloads(), "trace", "plugin:examples.own_workload:make_rows"]:
        check_workload("experiments.compare", name)
    with pytest.raises(UsageError, match=r"^experiments.compare: unknown workload 'tiny' \(from"):
        check_workload("experiments.compare", "tiny")
