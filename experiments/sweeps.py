"""A Hydra sweep's account of its jobs (``-m``: train, evaluate, tune_btb).

Each job of a sweep, whichever process runs it (Hydra's basic launcher, joblib,
submitit), leaves ``.hydra/outcome.json`` in its folder when it ends: its number,
overrides, whether it completed, its one-line error if not, and the figures it
named with :func:`note` (train: its validation score and its test mean TTFT).
The :class:`JobOutcome` callback (``hydra.callbacks.job_outcome`` in each
command's conf) writes it and says a failure at once; the command's process
collects the records of the sweep it started (:func:`summarize`), prints one
table and writes ``sweep.json`` beside ``multirun.yaml``, naming the best job by
the figure its command chooses by (a validation score, never a test figure).

Job folders that hold another sweep's record (an earlier sweep's higher job
numbers, left by ``overwrite=true``) are listed apart, not counted."""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback

from envs.files import read_json, write_json_atomic
from experiments._cli import user_error_message

OUTCOME = Path(".hydra") / "outcome.json"
"""A sweep job's record, in its folder (beside Hydra's own record of the job)."""
SUMMARY = "sweep.json"
"""The sweep's summary, in the sweep folder."""

_NOTES: list[dict[str, Any]] = []  # what the running job named (:func:`note`)
_STARTED: list[tuple[Path, int, bool]] = []  # (sweep folder, stamp, new) of this process's sweep


def note(name: str, value: float | None, choose: bool = False) -> None:
    """Name a figure of the running job for its sweep's table (lower is better);
    ``choose``: the sweep's best job is the one lowest on it. A NaN is recorded as
    null. Outside a sweep it is kept only until the next job starts."""
    number = None if value is None or not math.isfinite(float(value)) else float(value)
    _NOTES.append({"name": name, "value": number, "choose": bool(choose)})


class JobOutcome(Callback):
    """Writes each sweep job's :data:`OUTCOME` (single runs: nothing)."""

    def __init__(self) -> None:
        self.stamp = 0  # this sweep's start, set in the command's process before any job

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        folder = Path(str(config.hydra.sweep.dir))
        self.stamp = time.time_ns()
        new = not folder.is_dir() or not any(folder.iterdir())
        _STARTED[:] = [(folder, self.stamp, new)]

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        _NOTES.clear()

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        from hydra.core.utils import JobStatus
        from hydra.types import RunMode

        if config.hydra.mode != RunMode.MULTIRUN:
            return
        folder = Path(str(config.hydra.runtime.output_dir))
        record: dict[str, Any] = {
            "job": int(config.hydra.job.num),
            "overrides": [str(o) for o in job_return.overrides or []],
            "folder": str(folder),
            "sweep": self.stamp,
            "status": "completed" if job_return.status == JobStatus.COMPLETED else "failed",
            "figures": list(_NOTES),
        }
        if record["status"] == "failed":
            error = job_return._return_value  # Hydra's JobReturn keeps the job's exception
            message = user_error_message(error) if isinstance(error, BaseException) else None
            record["user_error"] = message is not None
            record["error"] = (message or f"error: {type(error).__name__}: {error}").removeprefix(
                "error: "
            )
            print(f"job {record['job']} failed: {record['error']}", file=sys.stderr, flush=True)
        _NOTES.clear()
        try:
            write_json_atomic(folder / OUTCOME, record)
        except OSError as error:  # the job's own error (or results) is what matters
            print(f"warning: could not write {folder / OUTCOME} ({error})", file=sys.stderr)


def started() -> tuple[Path, int, bool] | None:
    """(sweep folder, stamp, whether the folder was new) of the sweep this process
    started, if it started one."""
    return _STARTED[0] if _STARTED else None


def _records(folder: Path, stamp: int) -> tuple[list[dict[str, Any]], list[str]]:
    """This sweep's job records, by job number, and the job folders under
    ``folder`` that another sweep left (a Hydra record but none of this sweep's)."""
    mine: list[dict[str, Any]] = []
    others: list[str] = []
    for path in sorted(p for p in folder.iterdir() if (p / ".hydra").is_dir()):
        try:
            record = read_json(path / OUTCOME)
        except (OSError, ValueError):
            record = None
        if isinstance(record, dict) and record.get("sweep") == stamp:
            mine.append(record)
        else:
            others.append(path.name)
    mine.sort(key=lambda r: int(r.get("job", 0)))
    return mine, others


def _varying(jobs: Sequence[dict[str, Any]]) -> list[str]:
    """The override keys whose values differ between ``jobs`` (all of them for one)."""
    seen: dict[str, set[str]] = {}
    for job in jobs:
        for override in job["overrides"]:
            key, _, value = override.partition("=")
            seen.setdefault(key, set()).add(value)
    keys = [k for k, values in seen.items() if len(values) > 1 or len(jobs) == 1]
    return keys or list(seen)


def summarize(folder: Path, stamp: int) -> dict[str, Any]:
    """The summary of the sweep started at ``stamp`` in ``folder``: its jobs (the
    varying overrides, status, figures, error), the best completed job by the
    chosen figure, and the folders of other sweeps."""
    jobs, others = _records(folder, stamp)
    keys = _varying(jobs)
    names: list[str] = []
    chosen: str | None = None
    for job in jobs:
        for figure in job["figures"]:
            if figure["name"] not in names:
                names.append(figure["name"])
            if figure["choose"] and chosen is None:
                chosen = figure["name"]
    rows = []
    for job in jobs:
        swept = [o for o in job["overrides"] if o.partition("=")[0] in keys]
        figures = {f["name"]: f["value"] for f in job["figures"]}
        rows.append({**job, "swept": swept, "values": figures})
    best = None
    if chosen is not None:
        scored = [
            r for r in rows if r["status"] == "completed" and r["values"].get(chosen) is not None
        ]
        if scored:
            top = min(scored, key=lambda r: r["values"][chosen])
            best = {
                "job": top["job"],
                "folder": top["folder"],
                "by": chosen,
                "value": top["values"][chosen],
            }
            best["overrides"] = top["swept"]
    failed = [r["job"] for r in rows if r["status"] == "failed"]
    return {
        "sweep_dir": str(folder),
        "jobs": [
            {
                "job": r["job"],
                "overrides": r["overrides"],
                "folder": r["folder"],
                "status": r["status"],
                **(
                    {"error": r["error"], "user_error": r["user_error"]}
                    if r["status"] == "failed"
                    else {}
                ),
                "figures": r["values"],
            }
            for r in rows
        ],
        "swept": keys,
        "figures": names,
        "chosen_by": chosen,
        "best": best,
        "failed": failed,
        "other_folders": others,
    }


def table(summary: dict[str, Any]) -> list[str]:
    """The summary as printed lines: one row a job, then the best job and the
    folders other sweeps left."""
    from experiments.report import aligned_table

    names = summary["figures"]
    header = ["job", "overrides", "status", *names]
    rows = []
    for job in summary["jobs"]:
        swept = " ".join(o for o in job["overrides"] if o.partition("=")[0] in summary["swept"])
        cells = [
            f"{job['figures'][n]:.4g}" if job["figures"].get(n) is not None else "-" for n in names
        ]
        rows.append([str(job["job"]), swept, job["status"], *cells])
    n_jobs, n_failed = len(summary["jobs"]), len(summary["failed"])
    done = n_jobs - n_failed
    lines = [f"sweep {summary['sweep_dir']}: {n_jobs} jobs, {done} completed, {n_failed} failed"]
    right = range(3, 3 + len(names))
    lines += aligned_table(header, rows, right=right)
    for job in summary["jobs"]:
        if job["status"] == "failed":
            lines.append(f"job {job['job']} failed: {job['error']}")
    best = summary["best"]
    if best is not None:
        lines.append(
            f"best by {best['by']}: job {best['job']} ({' '.join(best['overrides'])}), "
            f"{best['value']:.4g}, in {best['folder']}"
        )
    elif summary["chosen_by"] is None and summary["jobs"]:
        lines.append("no best job named: these jobs give no figure to choose by")
    if summary["other_folders"]:
        lines.append(
            "job folders of an earlier sweep, not this one's: "
            + ", ".join(summary["other_folders"])
        )
    return lines


@contextlib.contextmanager
def quiet_job_errors() -> Iterator[None]:
    """While a sweep runs: Hydra's "Error executing job with overrides" lines (one
    each time a failed job's result is read) and the Optuna sweeper's failure log
    lines are dropped; each job's failure is said once when it ends
    (:class:`JobOutcome`) and again in the summary."""
    stderr = sys.stderr
    drop = "Error executing job with overrides:"

    class _Filtered:
        def write(self, text: str) -> int:
            return len(text) if text.startswith(drop) else stderr.write(text)

        def __getattr__(self, name: str) -> Any:
            return getattr(stderr, name)

    class _NoFailures(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return not str(record.getMessage()).startswith("Failed ")

    optuna_log = logging.getLogger("hydra_plugins.hydra_optuna_sweeper._impl")
    quiet = _NoFailures()
    optuna_log.addFilter(quiet)
    sys.stderr = _Filtered()  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stderr = stderr
        optuna_log.removeFilter(quiet)


def report() -> tuple[dict[str, Any], Path | None] | None:
    """After a sweep this process started: print its table and write ``sweep.json``
    (unless every job failed and the folder held an earlier sweep: that one's
    record stays). Returns the summary and the file written, or None if no sweep
    was started."""
    start = started()
    if start is None:
        return None
    folder, stamp, new = start
    _STARTED.clear()
    if not folder.is_dir():
        return None
    summary = summarize(folder, stamp)
    if not summary["jobs"]:
        return summary, None
    print("\n".join(table(summary)), flush=True)
    written = None
    if len(summary["jobs"]) > len(summary["failed"]) or new:
        try:
            written = write_json_atomic(folder / SUMMARY, summary)
            print(f"wrote {written}")
        except OSError as error:
            print(f"warning: could not write {folder / SUMMARY} ({error})", file=sys.stderr)
    return summary, written


def failure_message(command: str, summary: dict[str, Any], written: Path | None) -> str | None:
    """The line a sweep whose failed jobs all failed on a user's error ends with
    (``error: ...``, as ``_cli.main_guard`` prints), or None if one of them is a bug
    (its traceback is what to show)."""
    jobs = {job["job"]: job for job in summary["jobs"]}
    failed = summary["failed"]
    if not failed or any(not jobs[n].get("user_error", True) for n in failed):
        return None
    where = f"above and in {written}" if written is not None else "above"
    which = ", ".join(str(n) for n in failed)
    return (
        f"{command}: {len(failed)} of {len(jobs)} jobs failed (job{'s' if len(failed) > 1 else ''} "
        f"{which}); each one's error is {where}"
    )
