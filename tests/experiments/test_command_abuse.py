"""Abusing the commands: bad values for every kind of option, each of which must end
the run with one line (``error: ...``), exit status 2, and nothing written: no run
folder, and an earlier run's folder as it was. The key=value commands and the
Hydra jobs run in-process here; the slow tests also run each case as a command
line (``python -m``'s entry code, where Hydra composes the command line itself),
in this process too (``conftest.run_command``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir

from experiments import audit, bench, compare, costs, evaluate, make_dataset, reproduce, tune_btb
from experiments import train as train_command
from experiments._cli import main_guard
from experiments.config import register_configs
from experiments.jobs import hydra_entry, run_job

ROOT = Path(__file__).resolve().parents[2]
register_configs()

KEY_VALUE: list[tuple[Any, list[str]]] = [
    (compare, ["windows=-1"]), (compare, ["seed=-1"]), (compare, ["setup=nope"]),
    (compare, ["workload=nope"]), (compare, ["policies=nope"]), (compare, ["windows=x"]),
    (compare, ["policy_kwargs=btb.nope=1"]), (compare, ["policy_kwargs=btb.m=x"]),
    (compare, ["agents=/nonexistent"]), (compare, ["copy_model=x"]),
    (compare, ["baseline=nope"]), (compare, ["charts=maybe"]), (compare, ["overwrite=maybe"]),
    (compare, ["params=train_windows=1"]), (make_dataset, ["params=test_windows=1"]),
    (make_dataset, ["train_windows=-5"]), (make_dataset, ["test_windows=-2"]),
    (make_dataset, ["seed=-1"]), (make_dataset, ["workload=nope"]),
    (make_dataset, ["params=nope=1"]), (make_dataset, ["params=n_bursts=-1"]),
    (reproduce, ["setups=nope"]), (reproduce, ["jobs=0"]), (reproduce, ["windows=-1"]),
    (reproduce, ["policies=nope"]), (reproduce, ["copy_model=x"]),
    (reproduce, ["workload_seeds=x"]), (reproduce, ["causal_kv=x"]),
    (bench, ["repeats=0"]), (bench, ["policies=nope"]), (bench, ["envs=nope"]),
    (costs, ["model=nope"]), (costs, ["tokens=x"]), (costs, ["tokens=-5"]),
    (costs, ["node=0xH100"]), (costs, ["setup=nope"]),
    (audit, ["path=/nonexistent"]), (audit, ["min_blocks=-1"]), (audit, ["fanout_s=0"]),
    (audit, ["format=nope"]),
]  # fmt: skip
QUIET = {compare: ["agents=none", "progress=false"], make_dataset: ["progress=false"]}

TINY = ["logger=none", "workload=tiny"]
TOO_BIG = [*TINY, "+workload.params.prefix_tokens=2000000"]  # a request no node can hold
# valid rising_load parameters whose first test window (seed 1337) has no request
EMPTY_WINDOW = [
    "logger=none", "workload=rising_load", "workload.seed=1337", "+workload.params.ramp_s=5",
    "+workload.params.hold_s=0", "+workload.params.lead_s=0",
    "+workload.params.peak_rate_per_s=1", "+workload.params.background_rate_per_s=0",
]  # fmt: skip
HYDRA: list[tuple[str, list[str]]] = [
    ("train", TOO_BIG), ("evaluate", TOO_BIG), ("tune_btb", TOO_BIG),
    ("evaluate", EMPTY_WINDOW), ("tune_btb", [*TINY, "m=0"]),
    ("evaluate", [*TINY, "checkpoint=[/nonexistent]"]), ("train", [*TINY, "seed=-1"]),
]  # fmt: skip
HYDRA_MORE: list[tuple[str, list[str]]] = [
    ("train", [*TINY, "cluster.n_nodes=0"]), ("train", [*TINY, "sim.copy_model=x"]),
    ("train", [*TINY, "logger.mode=x"]), ("train", [*TINY, "train.total_timesteps=-1"]),
    ("train", [*TINY, "env.n_envs=0"]), ("train", [*TINY, "agent.hidden=0"]),
    ("train", [*TINY, "resume=/nonexistent"]), ("train", [*TINY, "agent.hyperparams.gamma=2"]),
    ("train", [*TINY, "train.eval_policies=[nope]"]), ("train", [*TINY, "+workload.params.x=1"]),
    ("evaluate", [*TINY, "policies=[nope]"]), ("evaluate", [*TINY, "workload.eval_windows=0"]),
    ("evaluate", [*TINY, "sim.max_batch=0"]), ("tune_btb", [*TINY, "x=0"]),
    ("tune_btb", [*TINY, "z=0"]), ("tune_btb", [*TINY, "m=99"]),
    ("evaluate", [*TINY, "sim.model_versions=[a,b]"]),
    ("evaluate", [*TINY, "sim.upgrade_at_s=[-1]"]),
    ("train", [*TINY, "env=route_warm", "env.speculate=true", "imitation.episodes=1"]),
]  # fmt: skip
JOBS = {"train": train_command.train, "evaluate": evaluate.evaluate, "tune_btb": tune_btb.objective}


def _one_line_error(err: str) -> None:
    assert err.startswith("error: ") and err.count("\n") == 1 and err.endswith("\n"), err


def _earlier_run(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    folder = tmp_path / "earlier"
    folder.mkdir()
    (folder / "results.json").write_text('{"rows": []}\n')
    return folder, {"results.json": '{"rows": []}\n'}


@pytest.mark.parametrize(("module", "args"), KEY_VALUE, ids=lambda v: getattr(v, "__name__", v))
def test_a_bad_key_value_option_is_one_line_and_writes_nothing(
    module: Any, args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["path=" + __file__] if module is audit else QUIET.get(module, [])
    out = tmp_path / "run"
    assert main_guard(lambda: module.main([*base, *args, f"out_dir={out}"])) == 2
    _one_line_error(capsys.readouterr().err)
    assert not out.exists()
    earlier, files = _earlier_run(tmp_path)  # the same bad value against an earlier run
    assert main_guard(lambda: module.main([*base, *args, f"out_dir={earlier}"])) == 2
    _one_line_error(capsys.readouterr().err)
    assert {p.name: p.read_text() for p in earlier.iterdir()} == files


def _hydra_job_is_refused(
    name: str, overrides: list[str], out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name=name, overrides=[*overrides, f"out_dir={out}"])
    with pytest.raises(SystemExit) as stop:
        run_job(JOBS[name], cfg)
    assert stop.value.code == 2
    # (a job says its warnings itself, one line each, as the command would before it)
    said = capsys.readouterr().err.splitlines(keepends=True)
    _one_line_error("".join(line for line in said if not line.startswith("warning: ")))
    assert not out.exists()


@pytest.mark.parametrize(("name", "overrides"), HYDRA, ids=lambda v: str(v)[-40:])
def test_a_bad_hydra_value_is_one_line_and_leaves_no_run_folder(
    name: str, overrides: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _hydra_job_is_refused(name, overrides, tmp_path / "run", capsys)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "overrides"), HYDRA_MORE, ids=lambda v: str(v)[-40:])
def test_more_bad_hydra_values_are_one_line_and_leave_no_run_folder(
    name: str, overrides: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _hydra_job_is_refused(name, overrides, tmp_path / "run", capsys)


@pytest.mark.parametrize("trials", ["0", "-2"])
def test_an_empty_sweep_is_refused_before_it_starts(
    trials: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def never() -> None:
        raise AssertionError("the sweep started")

    args = ["-m", f"hydra.sweeper.n_trials={trials}", *TINY]
    assert hydra_entry("experiments.tune_btb", never, args, precheck=tune_btb.check_sweep) == 2
    assert capsys.readouterr().err == (
        "error: experiments.tune_btb: "
        f"hydra.sweeper.n_trials={trials} (from the command line): a sweep needs "
        "at least 1 trial\n"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ["experiments.tune_btb", "-m", "hydra.sweeper.n_trials=0", *TINY],
        ["experiments.train", *TOO_BIG],
        ["experiments.evaluate", *EMPTY_WINDOW],
        ["experiments.train", *TINY, "agent=nope"],  # Hydra's own error: no such option
        ["experiments.train", *TINY, "seed=x"],  # Hydra's own error: not an int
        ["experiments.compare", "windows=-1"],
        ["experiments.make_dataset", "train_windows=-5", "out_dir=run"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_bad_command_lines_as_commands(
    command: list[str], tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    proc = run_command(command[0], command[1:], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert [p.name for p in tmp_path.iterdir()] in ([], ["runs"], ["multirun"])
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # nothing written
