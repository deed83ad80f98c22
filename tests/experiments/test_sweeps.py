"""A sweep's account of its jobs: each job's .hydra/outcome.json, the sweep's
sweep.json and table, every failure said once, the best job by a validation
figure only (experiments/sweeps.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from envs.files import write_json_atomic
from experiments import sweeps

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


def test_the_summary_chooses_by_the_chosen_figure_among_completed_jobs(tmp_path: Path) -> None:
    """Worked by hand: job 1 is lowest on the validation score (0.5 against 0.7;
    job 2's 0.1 failed), though job 0 is lowest on the test figure; only the swept
    key is shown; a folder with another sweep's record is listed apart."""

    def figures(val: float | None, test: float) -> list[dict[str, Any]]:
        return [
            {"name": "validation mean score", "value": val, "choose": True},
            {"name": "test mean TTFT (s)", "value": test, "choose": False},
        ]

    _job(tmp_path, 0, 7, ["workload=tiny", "seed=0"], figures=figures(0.7, 1.0))
    _job(tmp_path, 1, 7, ["workload=tiny", "seed=1"], figures=figures(0.5, 2.0))
    _job(
        tmp_path, 2, 7, ["workload=tiny", "seed=2"], figures=figures(0.1, 0.1),
        status="failed", error="seed must be >= 0", user_error=True,
    )  # fmt: skip
    _job(tmp_path, 3, 6, ["workload=tiny", "seed=3"], figures=figures(0.0, 0.0))  # earlier sweep
    (tmp_path / "4" / ".hydra").mkdir(parents=True)  # a job folder with no outcome at all
    summary = sweeps.summarize(tmp_path, 7)
    assert [job["job"] for job in summary["jobs"]] == [0, 1, 2]
    assert summary["swept"] == ["seed"]
    assert summary["failed"] == [2]
    assert summary["best"] == {
        "job": 1,
        "folder": str(tmp_path / "1"),
        "by": "validation mean score",
        "value": 0.5,
        "overrides": ["seed=1"],
    }
    assert summary["other_folders"] == ["3", "4"]
    lines = sweeps.table(summary)
    assert lines[0] == f"sweep {tmp_path}: 3 jobs, 2 completed, 1 failed"
    assert lines[1].split() == [
        "job", "overrides", "status", "validation", "mean", "score", "test", "mean", "TTFT", "(s)",
    ]  # fmt: skip
    assert lines[3].split() == ["0", "seed=0", "completed", "0.7", "1"]
    assert lines[5].split() == ["2", "seed=2", "failed", "0.1", "0.1"]
    assert "job 2 failed: seed must be >= 0" in lines
    assert any(
        line.startswith("best by validation mean score: job 1 (seed=1), 0.5") for line in lines
    )
    assert lines[-1] == "job folders of an earlier sweep, not this one's: 3, 4"
    assert sweeps.failure_message("experiments.train", summary, None) == (
        "experiments.train: 1 of 3 jobs failed (job 2); each one's error is above"
    )


def test_no_best_job_without_a_chosen_figure_and_a_bug_keeps_its_traceback(tmp_path: Path) -> None:
    """evaluate on test windows names its figure but chooses by none; a failure that
    is not a user's error makes failure_message step aside (the traceback shows)."""
    test = [{"name": "test mean TTFT (s), best agent", "value": 0.3, "choose": False}]
    _job(tmp_path, 0, 1, ["seed=0"], figures=test)
    _job(tmp_path, 1, 1, ["seed=1"], status="failed", error="KeyError: 'x'", user_error=False)
    summary = sweeps.summarize(tmp_path, 1)
    assert summary["best"] is None and summary["chosen_by"] is None
    assert "no best job named: these jobs give no figure to choose by" in sweeps.table(summary)
    assert sweeps.failure_message("experiments.evaluate", summary, None) is None


def test_note_records_nan_as_null() -> None:
    sweeps._NOTES.clear()
    sweeps.note("validation mean score", float("nan"), choose=True)
    assert sweeps._NOTES == [{"name": "validation mean score", "value": None, "choose": True}]
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
    error = "env.n_envs must be >= 1, got 0 (from the command line)"
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
    assert line.startswith(f"error: {given} (from the command line)") and said in line
    assert not sweep.exists()
