"""A sweep's account of its jobs: each job's .hydra/outcome.json, the sweep's
sweep.json and table, every failure said once, the best job by a validation
figure only (experiments/sweeps.py)."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from envs.files import write_json_atomic
from experiments import sweeps
from experiments._cli import error_line

TINY_TRAIN = [
    "workload=tiny", "train.total_timesteps=128", "logger=none",
    "agent.hyperparams.n_steps=128", "agent.hyperparams.batch_size=64",
    "train.progress=false", "train.evaluate=false", "train.val_every=128",
]  # fmt: skip


def _job(folder: Path, job: int, stamp: int, overrides: list[str], **fields: Any) -> None:
    record = {
        "job": job,
        "overrides": overrides,
        "folder": str(folder / str(job)),
        "sweep": stamp,
        "status": "completed",
        "figures": [],
        **fields,
    }
    write_json_atomic(folder / str(job) / sweeps.OUTCOME, record)


def _collect(folder: Path, stamp: int, swept: tuple[str, ...] = (), **more: Any) -> Any:
    sweeps._STARTED[:] = [sweeps.Sweep(folder, stamp, False, swept, **more)]
    return sweeps.collect()


def _figures(val: float | None, test: float, basis: Any = "w") -> list[dict[str, Any]]:
    return [
        {"name": "validation mean score", "value": val, "choose": True, "basis": basis},
        {"name": "test mean TTFT (s)", "value": test, "choose": False, "basis": basis},
    ]


def test_the_summary_chooses_by_the_chosen_figure_among_completed_jobs(tmp_path: Path) -> None:
    """Worked by hand: job 1 is lowest on the validation score (0.5 against 0.7;
    job 2's 0.1 failed), though job 0 is lowest on the test figure; only the swept
    key is shown; a folder with another sweep's record is listed apart, nested
    ones included; job 4 started and never ended."""
    _job(tmp_path, 0, 7, ["workload=tiny", "seed=0"], figures=_figures(0.7, 1.0))
    _job(tmp_path, 1, 7, ["workload=tiny", "seed=1"], figures=_figures(0.5, 2.0))
    _job(
        tmp_path, 2, 7, ["workload=tiny", "seed=2"], figures=_figures(0.1, 0.1),
        status="failed", error="seed must be >= 0", bug=False,
    )  # fmt: skip
    _job(tmp_path, 3, 6, ["workload=tiny", "seed=3"], figures=_figures(0.0, 0.0))  # earlier sweep
    _job(tmp_path, 4, 7, ["workload=tiny", "seed=4"], status="started")
    (tmp_path / "a" / "5" / ".hydra").mkdir(parents=True)  # nested, with no outcome at all
    summary = _collect(tmp_path, 7)
    assert [job["job"] for job in summary["jobs"]] == [0, 1, 2, 4]
    assert summary["jobs"][3]["status"] == "not finished"
    assert summary["swept"] == ["seed"]
    assert summary["failed"] == [2] and summary["bugs"] == []
    assert summary["best"] == {
        "job": 1,
        "folder": str(tmp_path / "1"),
        "by": "validation mean score",
        "value": 0.5,
        "overrides": ["seed=1"],
    }
    assert summary["other_folders"] == ["3", "a/5"]
    lines = sweeps.table(summary)
    assert lines[0] == (f"sweep {tmp_path}: 4 jobs, 2 completed, 1 failed, 1 not finished")
    assert lines[1].split() == [
        "job", "overrides", "status", "validation", "mean", "score", "test", "mean", "TTFT", "(s)",
    ]  # fmt: skip
    assert lines[3].split() == ["0", "seed=0", "completed", "0.7", "1"]
    assert lines[5].split() == ["2", "seed=2", "failed", "0.1", "0.1"]
    assert lines[6].split() == ["4", "seed=4", "not", "finished", "-", "-"]
    assert "job 2 failed: seed must be >= 0" in lines
    best = "best by validation mean score: job 1 (seed=1), 0.5"
    assert any(line.startswith(best) for line in lines)
    assert lines[-1] == "job folders of an earlier sweep, not this one's: 3, a/5"
    assert sweeps.ending("experiments.train", summary, None) == (
        "experiments.train: 1 of 4 jobs failed (job 2); each one's error is above",
        2,
    )


def test_a_sweep_whose_every_job_failed_on_a_user_s_error_says_how_to_run_it_again(
    tmp_path: Path,
) -> None:
    """Every job refused (a value typed wrong): the jobs' records and sweep.json fill
    the folder, which a rerun is refused without overwrite=true; the last line said
    only where the errors are. Not when a job completed or failed on a bug."""
    for job in (0, 1):
        error = "logger.mode must be one of offline, online, disabled, got 'ofline'"
        _job(tmp_path, job, 3, [f"seed={job}"], status="failed", error=error, bug=False)
    summary = _collect(tmp_path, 3, ("seed",))
    written = tmp_path / "sweep.json"
    assert sweeps.ending("experiments.train", summary, written) == (
        f"experiments.train: 2 of 2 jobs failed (jobs 0, 1); each one's error is above and "
        f"in {written}; to run the sweep again in {tmp_path}, add overwrite=true (it replaces "
        "what these jobs left there) or give another out_dir",
        2,
    )
    _job(tmp_path, 1, 3, ["seed=1"], status="failed", error="KeyError: 'x'", bug=True)
    summary = _collect(tmp_path, 3, ("seed",))
    assert "overwrite=true" not in sweeps.ending("experiments.train", summary, written)[0]


def test_the_rerun_advice_is_given_for_a_folder_named_only(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """Every job fails on a trace's bad row (the jobs read it, not the precheck).
    Without out_dir the sweep's folder is a dated one, new for each run: the same
    command runs again (here it fails on the row again, not on the folder), and
    "add overwrite=true" would not take the rerun to that folder. The advice is
    for a folder the command named, which the rerun is refused without it."""
    trace = tmp_path / "nan.jsonl"
    trace.write_text('{"timestamp":NaN,"input_length":600,"output_length":10,"hash_ids":[1,2]}\n')
    args = ["-m", "seed=0,1", "workload=trace", f"workload.path={trace}", *TINY_TRAIN[1:]]
    row = f"{trace}, line 1, field 'timestamp': must be finite, got nan"
    for _ in range(2):  # the second run is not refused for its folder: a new one
        done = run_command("experiments.train", args, tmp_path)
        last = done.stderr.strip().splitlines()[-1]
        assert done.returncode == 2 and done.stderr.count(f"failed: {row}") == 2, done.stderr
        assert last.startswith("error: experiments.train: 2 of 2 jobs failed (jobs 0, 1); ")
        assert "overwrite=true" not in last and last.endswith("sweep.json")
    assert len(list((tmp_path / "multirun" / "train").iterdir())) == 2
    for folder in (f"out_dir={tmp_path / 'mine'}", f"hydra.sweep.dir={tmp_path / 'own'}"):
        done = run_command("experiments.train", [*args, folder], tmp_path)
        named = folder.partition("=")[2]
        assert done.returncode == 2 and done.stderr.strip().splitlines()[-1].endswith(
            f"; to run the sweep again in {named}, add overwrite=true (it replaces what "
            "these jobs left there) or give another out_dir"
        ), done.stderr
        again = run_command("experiments.train", [*args, folder], tmp_path)  # as it says
        assert again.returncode == 2 and "already holds files" in again.stderr


def test_no_best_without_a_validation_figure_or_when_the_figures_do_not_compare(
    tmp_path: Path,
) -> None:
    """evaluate on test windows names its figure but chooses by none; validation
    scores measured on other windows (a swept workload) name no best either; a
    failure that is a bug ends the sweep with status 1."""
    test = [{"name": "test mean TTFT (s), best agent", "value": 0.3, "choose": False}]
    _job(tmp_path / "e", 0, 1, ["seed=0"], figures=test)
    _job(tmp_path / "e", 1, 1, ["seed=1"], status="failed", error="KeyError: 'x'", bug=True)
    summary = _collect(tmp_path / "e", 1, ("seed",))
    assert summary["best"] is None and summary["chosen_by"] is None
    assert (
        "no best job named: no job gives a validation figure to choose by (test figures "
        "never choose)"
    ) in sweeps.table(summary)
    assert sweeps.ending("experiments.evaluate", summary, None)[1] == 1

    _job(tmp_path / "t", 0, 2, ["workload=a"], figures=_figures(0.5, 1.0, basis={"w": "a"}))
    _job(tmp_path / "t", 1, 2, ["workload=b"], figures=_figures(0.4, 1.0, basis={"w": "b"}))
    summary = _collect(tmp_path / "t", 2, ("workload",))
    assert summary["best"] is None and summary["chosen_by"] == "validation mean score"
    assert "do not compare" in summary["no_best"]
    assert sweeps.ending("experiments.train", summary, None) == ("", 0)


def test_one_job_shows_its_swept_keys_and_a_stopped_optuna_sweep_says_why(
    tmp_path: Path,
) -> None:
    overrides = ["x=5", "y_tokens=100", "z=0.5", "m=2", "workload=tiny"]
    _job(tmp_path, 0, 3, overrides, status="failed", error="y_tokens must be ...", bug=False)
    swept = ("x", "y_tokens", "z", "m")
    summary = _collect(tmp_path, 3, swept, trials=20, max_failure_rate=0.0)
    lines = sweeps.table(summary)
    assert lines[0] == f"sweep {tmp_path}: 1 job, 0 completed, 1 failed"
    assert lines[3].split()[:5] == ["0", "x=5", "y_tokens=100", "z=0.5", "m=2"]
    assert (
        "the sweep stopped after a failed trial: 1 of 20 trials ran "
        "(hydra.sweeper.max_failure_rate=0; raise it to go on past failed trials)"
    ) in lines
    assert "no best job named: no job completed" in lines


def test_note_records_nan_as_null() -> None:
    sweeps._NOTES.clear()
    sweeps.note("validation mean score", float("nan"), choose=True)
    assert sweeps._NOTES == [
        {"name": "validation mean score", "value": None, "choose": True, "basis": None}
    ]
    sweeps._NOTES.clear()


@pytest.mark.slow
def test_a_sweep_reports_every_job_once_and_names_the_best(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """Three tiny training jobs, the middle one refused (env.n_envs=0): the other two
    still train; the failure is said once as the job ends, once in the table, and the
    command ends on one line naming it (status 2); Hydra's own "Error executing
    job" line is not repeated. sweep.json and each job's outcome.json agree with the
    jobs' own train.json. Then the same folder with overwrite=true and one job: the
    earlier sweep's folders 1 and 2 are listed apart, not counted."""
    sweep = tmp_path / "sweep"
    args = ["-m", *TINY_TRAIN, f"hydra.sweep.dir={sweep}", "env.n_envs=1,0,2"]
    done = run_command("experiments.train", args, tmp_path)
    assert done.returncode == 2
    error = "env.n_envs must be an integer in [1, 1024], got 0 (from the command line)"
    assert done.stderr.count(error) == 1  # as the job ended
    assert "Error executing job" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"error: experiments.train: 1 of 3 jobs failed (job 1); each one's error is above "
        f"and in {sweep / 'sweep.json'}"
    )
    assert f"job 1 failed: {error}" in done.stdout
    summary = json.loads((sweep / "sweep.json").read_text())
    assert [job["status"] for job in summary["jobs"]] == ["completed", "failed", "completed"]
    assert summary["swept"] == ["env.n_envs"]
    scores = {
        n: json.loads((sweep / str(n) / "train.json").read_text())["train"]["validation"][
            "best_score"
        ]
        for n in (0, 2)
    }
    best = min(scores, key=scores.__getitem__)
    assert summary["best"]["job"] == best
    assert summary["best"]["value"] == scores[best]
    assert summary["jobs"][0]["figures"] == {"validation mean score": scores[0]}
    log = (sweep / "0" / "train.log").read_text()  # each job's printed lines, its own only
    assert f"run folder {sweep / '0'}" in log and f"run folder {sweep / '2'}" not in log
    outcome = json.loads((sweep / "1" / ".hydra" / "outcome.json").read_text())
    assert outcome["status"] == "failed" and outcome["error"] == error
    assert f"best by validation mean score: job {best} (env.n_envs=" in done.stdout
    assert (sweep / "sweep.png").read_bytes().startswith(b"\x89PNG")  # the figures as bars

    again = ["-m", *TINY_TRAIN, f"hydra.sweep.dir={sweep}", "env.n_envs=1", "overwrite=true"]
    done = run_command("experiments.train", again, tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads((sweep / "sweep.json").read_text())
    assert [job["job"] for job in summary["jobs"]] == [0]
    assert summary["other_folders"] == ["1", "2"]
    assert "job folders of an earlier sweep, not this one's: 1, 2" in done.stdout


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("y_tokens=choice(4096,100)", "shorter than one 256-token block of the workload"),
        ("x=int(interval(0,3))", "lets the sweep draw x from 0 to 3: X counts requests"),
        ("z=interval(0,3)", "lets the sweep draw z from 0 to 3: Z is a time window, > 0 s"),
    ],
)
def test_tune_btb_checks_every_search_space_before_the_sweep(
    tmp_path: Path, run_command: Callable[..., Any], given: str, said: str
) -> None:
    """The sweep stops at its first failed trial: a search space that can draw a
    value a trial refuses is refused before any trial, naming it."""
    sweep = tmp_path / "sweep"
    args = ["-m", "workload=tiny", given, f"hydra.sweep.dir={sweep}", "hydra.sweeper.n_trials=2"]
    done = run_command("experiments.tune_btb", args, tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert (
        line.startswith(f"error: experiments.tune_btb: {given} (from the command line)")
        and said in line
    )
    assert not sweep.exists()


def test_tune_btb_takes_a_grid_with_the_basic_sweeper(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """fixT1's audit: tune_btb's Optuna settings sat in its own config, which Hydra's
    basic sweeper refused (``Key 'direction' not in 'BasicSweeperConf'``). They are
    an option of hydra/sweeper (conf/hydra/sweeper/btb_optuna.yaml), chosen by
    default and replaced by ``hydra/sweeper=basic``: one job a value, the rest the
    defaults (X=2 or 3, Y 65,536, Z 1 s, M 4)."""
    from hydra import compose, initialize_config_dir

    from experiments.config import CONF_DIR, register_configs

    register_configs()  # (the setup group lives in Python; the test may run alone)
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        optuna = compose("tune_btb", return_hydra_config=True).hydra.sweeper
    assert optuna._target_.endswith("OptunaSweeper")
    assert (optuna.direction, optuna.study_name, optuna.n_trials) == (
        "minimize",
        "btb_thresholds",
        20,
    )
    assert (optuna.sampler.seed, optuna.params.m) == (0, "int(interval(1, 4))")
    sweep = tmp_path / "sweep"
    args = ["-m", "hydra/sweeper=basic", "x=2,3", "workload=tiny", f"hydra.sweep.dir={sweep}"]
    done = run_command("experiments.tune_btb", args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Study name" not in done.stdout + done.stderr  # no Optuna study
    for x in (2, 3):
        assert f"btb x={x} y_tokens=65536 z=1 m=4: mean TTFT" in done.stdout
    summary = json.loads((sweep / "sweep.json").read_text())
    assert [(j["overrides"][0], j["status"]) for j in summary["jobs"]] == [
        ("x=2", "completed"),
        ("x=3", "completed"),
    ]
    assert summary["swept"] == ["x"]


def test_a_bug_in_a_job_keeps_its_traceback_and_ends_the_sweep_with_status_1(
    tmp_path: Path, run_command: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Job 0 refused (a user's error), job 1 hit by a bug: both said, the bug with
    its traceback as its job ended, and the sweep ends with status 1 (a bug), not
    as job 0's user error."""
    from experiments import jobs

    checked = jobs.check_world

    def check(cfg: Any, read_trace: bool = True) -> None:
        if int(cfg.seed) == 1:
            raise TypeError("boom")
        checked(cfg, read_trace)

    monkeypatch.setattr(jobs, "check_world", check)
    sweep = tmp_path / "sweep"
    args = ["-m", *TINY_TRAIN, f"hydra.sweep.dir={sweep}", "env.n_envs=0", "seed=0,1"]
    done = run_command("experiments.train", args, tmp_path)
    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr
    assert "job 1 failed: TypeError: boom" in done.stderr
    assert (
        "job 0 failed: env.n_envs must be an integer in [1, 1024], got 0 (from the command line)"
        in done.stderr
    )
    assert done.stderr.strip().splitlines()[-1] == (
        "error: experiments.train: 2 of 2 jobs failed (jobs 0, 1); each one's error is above "
        f"and in {sweep / 'sweep.json'}"
    )


def test_figures_that_do_not_compare_name_no_best(tmp_path: Path) -> None:
    """A sweep over train.val_score (mean and geomean scores) or over val_every
    (one job scores, one does not) names no best job; a stop the user made is not
    blamed on the failure rate; a basic sweep that ran fewer jobs than it plans
    says so."""
    geo = [{"name": "validation geomean score", "value": 0.1, "choose": True, "basis": "w"}]
    _job(tmp_path / "s", 0, 1, ["train.val_score=mean"], figures=_figures(0.5, 1.0))
    _job(tmp_path / "s", 1, 1, ["train.val_score=geomean"], figures=geo)
    summary = _collect(tmp_path / "s", 1, ("train.val_score",))
    assert summary["best"] is None and "do not compare" in summary["no_best"]
    assert "worst_family" not in summary["no_best"]

    _job(tmp_path / "v", 0, 2, ["train.val_every=0"], figures=[])
    _job(tmp_path / "v", 1, 2, ["train.val_every=128"], figures=_figures(0.5, 1.0))
    summary = _collect(tmp_path / "v", 2, ("train.val_every",))
    assert summary["best"] is None and "not every job gives one" in summary["no_best"]

    _job(tmp_path / "o", 0, 3, ["x=1"], status="failed", error="e", bug=False)
    sweeps._STARTED[:] = [sweeps.Sweep(tmp_path / "o", 3, False, ("x",), trials=9,
                                       max_failure_rate=0.0)]  # fmt: skip
    summary = sweeps.collect(interrupted="interrupted")  # not blamed on the failure rate
    assert summary["stopped"] == "interrupted: 1 of the sweep's 9 trials began"
    assert summary["interrupted"] is True
    sweeps._STARTED[:] = [sweeps.Sweep(tmp_path / "o", 3, False, ("x",), planned=2)]
    summary = sweeps.collect(interrupted="terminated")  # SIGTERM: said so, as stderr says
    assert summary["stopped"] == "terminated: 1 of the sweep's 2 jobs began"
    assert sweeps.table(summary)[0].endswith("1 job, 0 completed, 1 failed (terminated)")
    summary = _collect(tmp_path / "o", 3, ("x",), trials=9, max_failure_rate=1.0)
    assert "stopped" not in summary  # this rate never stops the sweeper

    _job(tmp_path / "b", 0, 4, ["seed=0"], figures=_figures(0.5, 1.0))
    summary = _collect(tmp_path / "b", 4, ("seed",), planned=3)
    assert summary["stopped"].startswith("1 of the sweep's 3 jobs ran")


def test_the_job_log_leaves_out_progress_bars(tmp_path: Path) -> None:
    """stderr in the log: a warning is kept; a bar's redraws and its closing
    newline are not."""
    from experiments.jobs import _Tee

    screen, log = io.StringIO(), io.StringIO()
    tee = _Tee(screen, log, bars=False)
    for text in ("warning: rows skipped\n", "\rtrain: 50%", "\rtrain: 100%", "\n", "done\n"):
        tee.write(text)
    assert log.getvalue() == "warning: rows skipped\ndone\n"
    assert screen.getvalue().count("train:") == 2


@pytest.mark.slow
def test_a_dated_sweep_and_run_and_a_nested_sweep_keep_their_records(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """The default dated folders: a single run's log holds what it printed; a
    sweep whose every job failed still writes its sweep.json (the folder was new:
    only its run lock was there). A nested hydra.sweep.subdir sweep run again with
    overwrite=true and a refused job: the job's folder keeps the earlier run's
    record, and the table says so."""
    done = run_command("experiments.train", [*TINY_TRAIN, "env.n_envs=1"], tmp_path)
    assert done.returncode == 0, done.stderr
    (log,) = (tmp_path / "runs" / "train").glob("*/train.log")
    assert "trained to 128 steps" in log.read_text()

    done = run_command("experiments.train", ["-m", *TINY_TRAIN, "env.n_envs=0"], tmp_path)
    assert done.returncode == 2
    (summary,) = (tmp_path / "multirun" / "train").glob("*/sweep.json")
    assert json.loads(summary.read_text())["failed"] == [0]

    sweep = tmp_path / "nested"
    args = ["-m", *TINY_TRAIN, f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=a/${hydra.job.num}"]
    assert run_command("experiments.train", [*args, "env.n_envs=1"], tmp_path).returncode == 0
    record = (sweep / "a" / "0" / ".hydra" / "overrides.yaml").read_bytes()
    outcome = (sweep / "a" / "0" / ".hydra" / "outcome.json").read_bytes()
    done = run_command("experiments.train", [*args, "env.n_envs=0", "overwrite=true"], tmp_path)
    assert done.returncode == 2
    assert (sweep / "a" / "0" / ".hydra" / "overrides.yaml").read_bytes() == record
    assert (sweep / "a" / "0" / ".hydra" / "outcome.json").read_bytes() == outcome
    assert "(its folder keeps the earlier run's files)" in done.stdout


def test_an_optuna_sweep_that_stops_at_a_failed_trial_says_so(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """tune_btb's Optuna sweeper (max_failure_rate 0) stops at its first failed
    trial: here the first (y_tokens=16, below one 256-token block; the workload
    is swept, so that search space is left to the trials). One line of the
    failure as it ends, none of the sweeper's own, and the table says how many
    trials ran."""
    sweep = tmp_path / "sweep"
    args = [
        "-m", "workload=tiny,tiny", "y_tokens=choice(16)", f"hydra.sweep.dir={sweep}",
        "hydra.sweeper.n_trials=3",
    ]  # fmt: skip
    done = run_command("experiments.tune_btb", args, tmp_path)
    assert done.returncode == 2
    assert "Failed experiment" not in done.stderr + done.stdout
    assert "the sweep stopped after a failed trial: 1 of 3 trials ran" in done.stdout
    summary = json.loads((sweep / "sweep.json").read_text())
    assert summary["failed"] == [0] and {"workload", "y_tokens"} <= set(summary["swept"])


@pytest.mark.parametrize(
    "error", [ValueError("bad logger"), TypeError("boom"), KeyboardInterrupt()]
)
def test_a_job_that_fails_in_its_folder_ends_its_log_with_the_error(
    tmp_path: Path, run_command: Callable[..., Any], monkeypatch: pytest.MonkeyPatch,
    error: Exception,
) -> None:  # fmt: skip
    """A sweep job that fails after it took its folder (its logger refused): the
    log ends with the error line, a bug's traceback before it. (A single run's
    folder holding nothing else is removed.)"""
    from experiments import jobs

    def refuse(*args: Any) -> None:
        raise error

    monkeypatch.setattr(jobs, "job_logger", refuse)
    sweep = tmp_path / "sweep"
    args = ["-m", *TINY_TRAIN, f"hydra.sweep.dir={sweep}"]
    done = run_command("experiments.train", args, tmp_path)
    log = (sweep / "0" / "train.log").read_text().splitlines()
    if isinstance(error, KeyboardInterrupt):  # Ctrl-C: said in the log too
        assert done.returncode == 130 and log[-1] == "interrupted"
        return
    assert done.returncode == (2 if isinstance(error, ValueError) else 1)
    assert log[-1] == f"error: {error_line(error)}"
    assert ("Traceback (most recent call last):" in log) == isinstance(error, TypeError)


def test_a_sweep_over_seeds_gives_each_setting_s_mean_and_std(tmp_path: Path) -> None:
    """Worked by hand: agent=ppo's validation scores 0.5, 0.7, 0.6 over seeds 0-2
    (seed 3 failed, left out): mean 0.6, std (ddof 1) sqrt((0.01 + 0.01 + 0) / 2)
    = 0.1; agent=a2c's 1.0 and 2.0: mean 1.5, std sqrt(0.5) = 0.7071."""
    values = {("ppo", 0): 0.5, ("ppo", 1): 0.7, ("ppo", 2): 0.6, ("a2c", 0): 1.0, ("a2c", 1): 2.0}
    for n, ((agent, seed), value) in enumerate(values.items()):
        overrides = [f"agent={agent}", f"seed={seed}", "workload=tiny"]
        _job(tmp_path, n, 5, overrides, figures=_figures(value, 9.0))
    _job(tmp_path, 9, 5, ["agent=ppo", "seed=3", "workload=tiny"], status="failed", error="e")
    summary = _collect(tmp_path, 5, ("agent", "seed"))
    ppo, a2c = summary["over_seeds"]
    assert ppo["overrides"] == ["agent=ppo"] and ppo["seeds"] == ["0", "1", "2"]
    assert ppo["jobs"] == [0, 1, 2] and a2c["jobs"] == [3, 4]
    score = ppo["figures"]["validation mean score"]
    assert score["mean"] == pytest.approx(0.6) and score["std"] == pytest.approx(0.1)
    assert score["n"] == 3 and ppo["figures"]["test mean TTFT (s)"]["std"] == 0.0
    score = a2c["figures"]["validation mean score"]
    assert score["mean"] == pytest.approx(1.5) and score["std"] == pytest.approx(0.5**0.5)
    assert (
        "over seeds 0, 1, 2 (agent=ppo): validation mean score 0.6 ± 0.1; "
        "test mean TTFT (s) 9 ± 0 (mean ± std, ddof 1)"
    ) in sweeps.table(summary)
    one = tmp_path / "one"  # one seed a setting: nothing to average
    _job(one, 0, 6, ["agent=ppo", "seed=0"], figures=_figures(0.5, 9.0))
    _job(one, 1, 6, ["agent=a2c", "seed=0"], figures=_figures(0.6, 9.0))
    assert _collect(one, 6, ("agent",))["over_seeds"] == []


def test_the_jobs_a_basic_sweep_plans_count_each_key_once() -> None:
    """Hydra's basic sweeper splits by key, the command line's value over the
    sweeper's params and a later override over an earlier one."""
    from omegaconf import OmegaConf

    def swept(task: list[str], params: dict[str, str] | None = None) -> Any:
        sweeper = {"_target_": "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"}
        config = {"hydra": {"overrides": {"task": task}, "sweeper": {**sweeper, "params": params}}}
        return sweeps.sweep_plan(OmegaConf.create(config))

    assert swept(["seed=0,1", "agent=ppo,a2c", "workload=tiny"]) == (("seed", "agent"), 4)
    assert swept(["seed=range(0,3)"]) == (("seed",), 3)
    assert swept(["seed=3,4"], {"seed": "0,1,2"}) == (("seed",), 2)
    assert swept(["seed=0,1", "seed=2,3,4"]) == (("seed",), 3)
    assert swept(["seed=5"], {"seed": "0,1"})[1] == 1
    assert swept(["seed=0,1", "z=interval(0,1)"]) == (("seed", "z"), None)  # not counted


def test_jobs_that_share_a_folder_are_said_and_name_no_best(tmp_path: Path) -> None:
    _job(tmp_path, 0, 8, ["seed=1"], figures=_figures(0.5, 1.0), shares_folder_with=2)
    summary = _collect(tmp_path, 8, ("seed",), planned=4)
    assert summary["shared_folders"] == [{"jobs": [2, 0], "folder": str(tmp_path / "0")}]
    assert summary["best"] is None and "shared a folder" in summary["no_best"]
    assert "stopped" not in summary  # 2 of 4 recorded: one overwritten, not stopped
    lines = sweeps.table(summary)
    assert lines[0].endswith("2 jobs, 1 completed, 0 failed, 1 whose record another job overwrote")
    assert any(line.startswith("jobs 2 and 0 ran in one folder") for line in lines)


def test_a_seed_sweep_s_figure_one_seed_gave_is_kept_without_a_std(tmp_path: Path) -> None:
    one = [{"name": "test mean TTFT (s)", "value": 2.0, "choose": False, "basis": "w"}]
    _job(tmp_path, 0, 9, ["seed=0"], figures=[*_figures(0.5, 1.0)[:1], *one])
    _job(tmp_path, 1, 9, ["seed=1"], figures=_figures(0.7, 1.0)[:1])
    (group,) = _collect(tmp_path, 9, ("seed",))["over_seeds"]
    assert group["figures"]["test mean TTFT (s)"] == {"mean": 2.0, "std": None, "n": 1}
    summary = _collect(tmp_path, 9, ("seed",))
    line = next(line for line in sweeps.table(summary) if line.startswith("over seeds"))
    assert line == (
        "over seeds 0, 1 (the one setting): validation mean score 0.6 ± 0.14; "
        "test mean TTFT (s) 2 (1 seed) (mean ± std, ddof 1)"
    )
    best = next(line for line in sweeps.table(summary) if line.startswith("best by"))
    assert best.endswith("(one seed's score: the means over seeds are below)")


def test_a_seed_a_setting_ran_twice_counts_once(tmp_path: Path) -> None:
    """``seed=0,0,1``: seed 0's second job is left out of the mean and the std
    (0.5 and 0.7, not 0.5, 0.5 and 0.7, whose std would read 0.115, not 0.141)."""
    for n, (seed, value) in enumerate([(0, 0.5), (0, 0.5), (1, 0.7)]):
        _job(tmp_path, n, 10, [f"seed={seed}"], figures=_figures(value, 1.0)[:1])
    summary = _collect(tmp_path, 10, ("seed",))
    (group,) = summary["over_seeds"]
    assert group["seeds"] == ["0", "1"] and group["jobs"] == [0, 2] and group["repeated"] == [1]
    score = group["figures"]["validation mean score"]
    assert score["mean"] == pytest.approx(0.6) and score["std"] == pytest.approx(0.02**0.5)
    line = next(line for line in sweeps.table(summary) if line.startswith("over seeds"))
    assert line.endswith("(mean ± std, ddof 1; job 1 repeated a seed, not counted)")
    again = tmp_path / "again"  # one seed twice and nothing else: nothing to average
    for n in range(2):
        _job(again, n, 11, ["seed=0"], figures=_figures(0.5, 1.0)[:1])
    assert _collect(again, 11, ("seed",))["over_seeds"] == []


def test_validation_on_another_workload_seed_does_not_compare(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """workload.seed=0,1 generates other windows under the same names: no best.
    A sweep Hydra cannot compose leaves no bare folder behind."""
    sweep = tmp_path / "sweep"
    args = ["-m", *TINY_TRAIN, "env.n_envs=1", f"hydra.sweep.dir={sweep}", "workload.seed=0,1"]
    done = run_command("experiments.train", args, tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads((sweep / "sweep.json").read_text())
    assert summary["best"] is None and "do not compare" in summary["no_best"]

    bare = tmp_path / "bare"
    args = ["-m", *TINY_TRAIN, f"hydra.sweep.dir={bare}", "agent=ppo,a2c"]
    done = run_command("experiments.train", args, tmp_path)  # a2c has no batch_size
    assert done.returncode == 2 and not (bare / "multirun.yaml").exists()


def test_training_seeds_compare_only_on_one_simulator_stream(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """A training seed also draws validation's simulator stream: ``seed=0,1``
    names no best job, ``seed=0,1 train.eval_seed=0`` does (both scored on
    stream 0), and the mean ± std over seeds is given either way."""
    for name, more in (("own", []), ("fixed", ["train.eval_seed=0"])):
        sweep = tmp_path / name
        args = ["-m", *TINY_TRAIN, "env.n_envs=1", f"hydra.sweep.dir={sweep}", "seed=0,1", *more]
        done = run_command("experiments.train", args, tmp_path)
        assert done.returncode == 0, done.stderr
        summary = json.loads((sweep / "sweep.json").read_text())
        assert (summary["best"] is None) == (name == "own")
        assert summary["over_seeds"][0]["seeds"] == ["0", "1"]


def test_table_figures_are_whole_numbers_from_1000() -> None:
    assert [sweeps._number(v) for v in (17_900.4, 0.123456, 3.6174)] == [
        "17,900",
        "0.1235",
        "3.617",
    ]


def test_the_sweep_chart_is_drawn_when_a_job_gave_a_figure(tmp_path: Path) -> None:
    from experiments.report import plot_sweep

    for n, seed in enumerate((0, 1)):
        _job(tmp_path / "s", n, 1, [f"seed={seed}"], figures=_figures(0.5 + n, 1.0))
    summary = _collect(tmp_path / "s", 1, ("seed",))
    chart = plot_sweep(summary, tmp_path / "s" / sweeps.CHART, {0: ["seed=0"], 1: ["seed=1"]})
    assert chart is not None and chart.read_bytes().startswith(b"\x89PNG")
    _job(tmp_path / "f", 0, 2, ["seed=0"], status="failed", error="e", bug=False)
    assert plot_sweep(_collect(tmp_path / "f", 2, ("seed",)), tmp_path / "f.png", {}) is None
    assert not (tmp_path / "f.png").exists()


def test_chart_labels_shorten_decimals_only() -> None:
    from experiments.report import _short

    assert [_short(o) for o in ("z=5.202563493226584", "seed=1", "agent=ppo", "lr=0.0003")] == [
        "z=5.203", "seed=1", "agent=ppo", "lr=0.0003",
    ]  # fmt: skip


def test_no_best_says_what_the_figures_differ_in() -> None:
    def figure(name: str = "v", **basis: Any) -> dict[str, Any]:
        return {"name": name, "value": 1.0, "choose": True, "basis": basis}

    seeds = [figure(windows=["w"], seed=0), figure(windows=["w"], seed=1)]
    assert sweeps._why_apart(seeds, 2) == (
        "measured on different simulator random streams (seed; train: train.eval_seed)"
    )
    windows = [figure(windows=["a"], setup="s"), figure(windows=["b"], setup="t")]
    assert sweeps._why_apart(windows, 2) == "measured on different setups, windows"
    assert sweeps._why_apart([figure("a"), figure("b")], 2) == "they are different figures (a, b)"
    assert sweeps._why_apart(seeds, 3) == "not every job gives one"


def _evaluate(reads: str, value: float, **policies: tuple[float, dict[str, Any]]) -> list[Any]:
    """An evaluate job's figure: what it reads, and every policy's with its settings."""
    parts = {
        name: {"name": f"val mean TTFT (s), {name}", "value": score, "settings": settings}
        for name, (score, settings) in policies.items()
    }
    figure = {"name": f"val mean TTFT (s), {reads}", "value": value, "choose": True, "basis": "w"}
    return [{**figure, "policies": parts}]


def test_a_sweep_over_a_policy_s_settings_ranks_the_jobs_by_that_policy(tmp_path: Path) -> None:
    """Worked by hand: cache_aware (the reference, 0.20 in both jobs) is each job's
    best baseline, so both read 0.20 and job 0 was named on a tie; btb.m=4 (0.25)
    beats btb.m=1 (0.30), so job 1 is best, read on btb's figures, and the table
    says so. least_load's settings are alike in both jobs."""
    for n, (m, btb) in enumerate([(1, 0.30), (4, 0.25)]):
        policies = {"cache_aware": (0.20, {}), "btb": (btb, {"m": m}), "least_load": (0.4, {})}
        _job(tmp_path, n, 12, [f"+policy_kwargs.btb.m={m}"], figures=_evaluate("best baseline",
             0.20, **policies))  # fmt: skip
    summary = _collect(tmp_path, 12, ("+policy_kwargs.btb.m",))
    assert summary["read_policy"] == "btb"
    assert summary["best"]["job"] == 1 and summary["best"]["value"] == 0.25
    assert summary["best"]["by"] == "val mean TTFT (s), btb"
    assert [job["figures"] for job in summary["jobs"]] == [
        {"val mean TTFT (s), btb": 0.30},
        {"val mean TTFT (s), btb": 0.25},
    ]
    lines = sweeps.table(summary)
    assert any(line.startswith("best by val mean TTFT (s), btb: job 1 (") for line in lines)
    assert "the figures are btb's: the jobs differ in its settings (policy_kwargs)" in lines


def test_a_sweep_over_two_policies_settings_names_no_best_and_checkpoints_keep_the_best_agent(
    tmp_path: Path,
) -> None:
    """btb's and btb_pending's settings both differ: no one policy's score ranks the
    jobs. A sweep over checkpoints (same settings throughout) reads each job's best
    agent, as noted, a failed job among them."""
    for n, m in enumerate((1, 4)):
        policies = {"btb": (0.3 - n / 10, {"m": m}), "btb_pending": (0.3, {"m": m})}
        _job(tmp_path / "two", n, 13, [f"m={m}"], figures=_evaluate("best baseline", 0.2,
             **policies))  # fmt: skip
    summary = _collect(tmp_path / "two", 13, ("m",))
    assert summary["best"] is None and summary["read_policy"] is None
    assert summary["no_best"] == (
        "the jobs differ in the settings of btb, btb_pending: no one policy ranks them"
    )

    for n, agent in enumerate((0.5, 0.4)):
        policies = {"cache_aware": (0.45, {}), "ppo": (agent, {})}
        _job(tmp_path / "agents", n, 14, [f"checkpoint=[a{n}]"],
             figures=_evaluate("best agent", agent, **policies))  # fmt: skip
    _job(tmp_path / "agents", 2, 14, ["checkpoint=[a2]"], status="failed", error="e", bug=False)
    summary = _collect(tmp_path / "agents", 14, ("checkpoint",))
    assert summary["read_policy"] is None
    assert summary["best"]["job"] == 1 and summary["best"]["by"] == "val mean TTFT (s), best agent"


def test_evaluate_reads_the_best_agent_or_the_one_policy_asked_for() -> None:
    """Besides cache_aware (the reference, always run): one policy asked for is
    what a run returns and a sweep ranks it by; several, the best baseline."""
    from experiments.evaluate import reads

    assert reads(["ppo"], ["btb"]) == "best agent"
    assert reads([], ["btb"]) == "btb"
    assert reads([], ["cache_aware", "btb", "btb"]) == "btb"
    assert reads([], ["cache_aware"]) == "cache_aware"
    assert reads([], ["btb", "least_load"]) == "best baseline"


@pytest.mark.slow
def test_an_evaluate_sweep_over_btb_s_settings_reads_btb(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """Two policies asked for, btb's m swept: each job's figure is its btb row's
    (at m=4 btb is slower than cache_aware, the best baseline, on these windows)."""
    sweep = tmp_path / "sweep"
    args = [
        "-m", "+policy_kwargs.btb.m=1,4", "split=val", "policies=[btb,least_load]",
        "setup=qwen3_8b_h100x4", "workload.eval_windows=2", "logger=none", "progress=false",
        f"hydra.sweep.dir={sweep}",
    ]  # fmt: skip
    done = run_command("experiments.evaluate", args, tmp_path)
    assert done.returncode == 0, done.stderr
    summary = json.loads((sweep / "sweep.json").read_text())
    rows = [
        {r["policy"]: r["ttft_mean_s"] for r in json.loads((sweep / str(n) / "results.json")
         .read_text())["rows"]}
        for n in (0, 1)
    ]  # fmt: skip
    assert rows[1]["btb"] > rows[1]["cache_aware"]
    figures = [job["figures"] for job in summary["jobs"]]
    assert figures == [{"val mean TTFT (s), btb": row["btb"]} for row in rows]
    assert summary["read_policy"] == "btb"
    best = min((0, 1), key=lambda n: rows[n]["btb"])
    assert summary["best"]["job"] == best and summary["best"]["value"] == rows[best]["btb"]


def test_the_footer_says_what_else_the_jobs_differ_in_and_whose_best_baseline_each_read(
    tmp_path: Path,
) -> None:
    """A sweep over btb's m and a workload parameter said the jobs "differ in its
    settings (policy_kwargs)" only; a workload-only sweep's column read "best
    baseline" without naming it. Worked by hand: job 0's best is btb (0.2 < 0.3),
    job 1's least_load (0.25 < 0.4)."""
    for n, (m, rate) in enumerate([(1, 2), (4, 8)]):
        policies = {"btb": (0.3 - n / 10, {"m": m}), "least_load": (0.35, {})}
        overrides = [f"workload.params.rate={rate}", f"+policy_kwargs.btb.m={m}"]
        _job(tmp_path / "both", n, 15, overrides,
             figures=_evaluate("best baseline", 0.2, **policies))  # fmt: skip
    swept = ("workload.params.rate", "+policy_kwargs.btb.m")
    summary = _collect(tmp_path / "both", 15, swept)
    assert summary["read_policy"] == "btb"
    assert "of" not in summary["jobs"][0]  # the figure's name says btb
    assert sweeps.table(summary)[-1] == (
        "the figures are btb's: the jobs differ in its settings (policy_kwargs) and in "
        "workload.params.rate"
    )

    for n, (btb, least) in enumerate([(0.2, 0.3), (0.4, 0.25)]):
        policies = {"btb": (btb, {}), "least_load": (least, {})}
        best = min(policies, key=lambda name: policies[name][0])
        figures = _evaluate("best baseline", min(btb, least), **policies)
        _job(tmp_path / "workload", n, 16, [f"workload.params.rate={n}"],
             figures=[{**figures[0], "of": best}])  # fmt: skip
    summary = _collect(tmp_path / "workload", 16, ("workload.params.rate",))
    assert [job["of"] for job in summary["jobs"]] == [
        {"val mean TTFT (s), best baseline": "btb"},
        {"val mean TTFT (s), best baseline": "least_load"},
    ]
    assert sweeps.table(summary)[-1] == (
        "val mean TTFT (s), best baseline: btb's in job 0, least_load's in job 1"
    )
    summary["jobs"][1]["of"] = {"val mean TTFT (s), best baseline": "btb"}
    assert sweeps.table(summary)[-1] == "val mean TTFT (s), best baseline: btb's in every job"


def test_evaluate_notes_whose_figure_the_best_baseline_is(tmp_path: Path) -> None:
    """The figure a run returns names the policy it is of, the lowest mean TTFT."""
    from hydra import compose, initialize_config_dir

    from experiments.evaluate import evaluate

    conf = Path(__file__).resolve().parents[2] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = compose(
            config_name="evaluate",
            overrides=["workload=tiny", "logger=none", "progress=false",
                       "policies=[btb,least_load]", f"out_dir={tmp_path}"],
        )  # fmt: skip
    value = evaluate(cfg)
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    run = ("btb", "least_load", "cache_aware")  # (cache_aware: the reference, always run)
    means = {r["policy"]: r["ttft_mean_s"] for r in rows if r["policy"] in run}
    figure = sweeps._NOTES[-1]
    assert figure["name"] == "test mean TTFT (s), best baseline"
    assert figure["of"] == min(means, key=lambda name: means[name]) and value == min(means.values())


def test_over_seeds_gives_each_policy_s_mean_when_each_job_s_best_is_another_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``evaluate -m 'policies=[btb,dynamo]' seed=0,1``: the best baseline is dynamo
    (0.2650) in job 0 and cache_aware (0.2680) in job 1; their mean, 0.2665, is no
    policy's. Worked by hand, each policy over the two seeds (std ddof 1 of two
    values: |a - b| / sqrt 2): cache_aware 0.2700, 0.2680: 0.269 ± 0.0014; btb 0.30,
    0.31: 0.305 ± 0.0071; dynamo 0.2650, 0.2720: 0.2685 ± 0.0049. least_load ran in
    job 0 only: left out."""
    scores = [
        {"cache_aware": 0.2700, "btb": 0.30, "dynamo": 0.2650, "least_load": 0.40},
        {"cache_aware": 0.2680, "btb": 0.31, "dynamo": 0.2720},
    ]
    for seed, score in enumerate(scores):
        best = min(score, key=lambda name: score[name])
        figures = _evaluate("best baseline", score[best], **{p: (v, {}) for p, v in score.items()})
        _job(tmp_path, seed, 17, [f"seed={seed}"], figures=[{**figures[0], "of": best}])
    summary = _collect(tmp_path, 17, ("seed",))
    (group,) = summary["over_seeds"]
    figure = group["figures"]["val mean TTFT (s), best baseline"]
    assert set(figure) == {"n", "by_policy"} and figure["n"] == 2  # no mean of 0.2665 stored
    by_policy = figure["by_policy"]
    assert list(by_policy) == ["cache_aware", "btb", "dynamo"]
    assert by_policy["cache_aware"]["mean"] == pytest.approx(0.269)
    assert by_policy["cache_aware"]["std"] == pytest.approx(0.002 / 2**0.5)
    assert by_policy["btb"]["mean"] == pytest.approx(0.305)
    assert by_policy["dynamo"]["std"] == pytest.approx(0.007 / 2**0.5)
    assert all(stats["n"] == 2 for stats in by_policy.values())
    line = next(line for line in sweeps.table(summary) if line.startswith("over seeds"))
    assert line == (
        "over seeds 0, 1 (the one setting): val mean TTFT (s), best baseline: a different "
        "policy's in each job, so by policy: cache_aware 0.269 ± 0.0014, btb 0.305 ± 0.0071, "
        "dynamo 0.2685 ± 0.0049 (mean ± std, ddof 1)"
    )
    assert "0.2665" not in "\n".join(sweeps.table(summary))
    # the chart draws no bar at that mean either: a point per policy, named
    from experiments import report

    drawn: list[Any] = []
    monkeypatch.setattr(report, "_save", lambda fig, path: drawn.append(fig) or Path(path))
    report.plot_sweep(summary, tmp_path / "sweep.png", {})
    (ax,) = drawn[0].axes
    assert [math.isnan(bar.get_height()) for bar in ax.patches] == [True]
    assert [text.get_text() for text in ax.texts] == ["cache_aware", "btb", "dynamo"]
    points = [line.get_ydata()[0] for line in ax.lines if line.get_marker() == "o"]
    assert points == pytest.approx([0.269, 0.305, 0.2685])

    # the same policy best in both jobs: its own mean, as before
    same = tmp_path / "same"
    for seed, value in enumerate((0.2650, 0.2670)):
        figures = _evaluate("best baseline", value, dynamo=(value, {}), btb=(0.3, {}))
        _job(same, seed, 18, [f"seed={seed}"], figures=[{**figures[0], "of": "dynamo"}])
    summary = _collect(same, 18, ("seed",))
    (group,) = summary["over_seeds"]
    assert set(group["figures"]["val mean TTFT (s), best baseline"]) == {"mean", "std", "n"}
    line = next(line for line in sweeps.table(summary) if line.startswith("over seeds"))
    assert line == (
        "over seeds 0, 1 (the one setting): val mean TTFT (s), best baseline 0.266 ± 0.0014 "
        "(mean ± std, ddof 1)"
    )


def test_a_failed_job_s_damaged_overrides_yaml_is_one_warning_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """finish read a failed job's .hydra/overrides.yaml catching OSError and
    ValueError, not yaml's own errors: a damaged file ended the sweep in a
    traceback. Job 1's record is readable and differs from its overrides: marked."""
    _job(tmp_path, 0, 1, ["seed=0"], status="failed", error="e", bug=False)
    _job(tmp_path, 1, 1, ["seed=1"], status="failed", error="e", bug=False)
    damaged = tmp_path / "0" / ".hydra" / "overrides.yaml"
    damaged.parent.mkdir(exist_ok=True)  # (the outcome is there)
    damaged.write_text("- seed=0\n  - : [bad\n")
    (tmp_path / "1" / ".hydra").mkdir(exist_ok=True)
    (tmp_path / "1" / ".hydra" / "overrides.yaml").write_text("- seed=7\n")
    summary = _collect(tmp_path, 1, ("seed",))
    assert sweeps.finish(summary) is None  # no job completed, the folder not new
    (warning,) = capsys.readouterr().err.splitlines()
    assert warning.startswith(f"warning: {damaged}: not valid YAML (mapping values are not ")
    assert warning.endswith("; job 0's folder is not checked for an earlier run's files")
    assert [job.get("kept") for job in summary["jobs"]] == [
        None, "its folder keeps the earlier run's files",
    ]  # fmt: skip


def test_jobs_apart_in_train_streams_alone_compare_on_validation_not_on_train(
    tmp_path: Path,
) -> None:
    """``train -m workload.params.train_streams=own,shared``: the jobs' validation
    scores are measured on the same windows (train_streams draws train windows
    only), so the sweep names a best job; ``tune_btb``'s objective, on the train
    windows, is measured on other windows of the same names, so it names none (the
    basis once held the parameter either way: "the jobs' figures do not compare")."""
    from hydra import compose, initialize_config_dir

    from experiments.config import register_configs
    from experiments.jobs import measured_on

    register_configs()
    root = Path(__file__).resolve().parents[2]
    with initialize_config_dir(config_dir=str(root / "conf"), version_base="1.3"):
        cfgs = [
            compose("train", [f"+workload.params.train_streams={streams}"])
            for streams in ("own", "shared")
        ]
    names = ["synthetic-0020"]
    for train, apart in ((False, False), (True, True)):
        bases = [measured_on(cfg, names, train=train, seed=0) for cfg in cfgs]
        assert (bases[0] != bases[1]) is apart
        folder = tmp_path / str(train)
        for job, (basis, value) in enumerate(zip(bases, (0.5, 0.4))):
            streams = ("own", "shared")[job]
            override = f"+workload.params.train_streams={streams}"
            _job(folder, job, 3, [override], figures=_figures(value, 1.0, basis=basis))
        summary = _collect(folder, 3, ("+workload.params.train_streams",))
        if apart:
            assert summary["best"] is None and "do not compare" in summary["no_best"]
        else:
            assert summary["best"]["job"] == 1 and summary["best"]["value"] == 0.4
