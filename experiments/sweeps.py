"""A Hydra sweep's account of its jobs (``-m``: train, evaluate, tune_btb).

Each job of a sweep, whichever process runs it (Hydra's basic launcher, joblib,
submitit), keeps ``.hydra/outcome.json`` in its folder: written ``started`` as
the job starts, then its end: completed or failed (its one-line error), and the
figures it named with :func:`note` (train: its validation score and its test
mean TTFT). The :class:`JobOutcome` callback (``hydra.callbacks.job_outcome`` in
each command's conf) writes it and says a failure as the job ends (a bug with
its traceback). The command's process then collects the records of the sweep
it started (:func:`collect`), prints one table and writes ``sweep.json`` in the
sweep folder (:func:`finish`), naming the best job by the figure its command
chooses by (a validation score, never a test figure) when the jobs' figures
compare, and, for a sweep over ``seed``, each setting's figures as mean ± std
over its seeds; it ends with one line if a job failed (:func:`ending`).

A job that started and wrote no end (the sweep interrupted, its worker killed)
is listed as not finished. Job folders that hold another sweep's record (an
earlier sweep's higher job numbers, left by ``overwrite=true``) are listed
apart, not counted."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.utils import JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode

from envs.files import read_json, write_json_atomic
from envs.sim.errors import plural
from experiments._cli import error_line, user_error_message
from experiments._io import LOCK_NAME, REPLACED_NAME, folder_refusal

OUTCOME = Path(".hydra") / "outcome.json"
"""A sweep job's record, in its folder (beside Hydra's own record of the job)."""
SUMMARY = "sweep.json"
"""The sweep's summary, in the sweep folder."""
CHART = "sweep.png"
"""Its figures as bars (``report.plot_sweep``), beside it."""


@dataclass(frozen=True)
class Sweep:
    """The sweep this process started: its folder, its stamp (which its jobs'
    records carry), whether the folder held nothing before (but this run's lock),
    the keys it sweeps, the jobs it plans (Hydra's basic sweeper: the product of
    the swept values; None where not counted) and, for the Optuna sweeper, the
    trials asked for and the failure rate it stops past."""

    folder: Path
    stamp: int
    new: bool
    swept: tuple[str, ...]
    planned: int | None = None
    trials: int | None = None
    max_failure_rate: float | None = None


_NOTES: list[dict[str, Any]] = []  # what the running job named (:func:`note`)
_STARTED: list[Sweep] = []  # the sweep this process started


def note(
    name: str,
    value: float | None,
    choose: bool = False,
    basis: Any = None,
    policies: dict[str, dict[str, Any]] | None = None,
    of: str | None = None,
) -> None:
    """Name a figure of the running job for its sweep's table (lower is better);
    ``choose``: the sweep's best job is the one lowest on it, if every job's
    ``basis`` (what the figure was measured on: windows, setup, simulator,
    score; JSON) is the same. ``policies`` (evaluate): the same figure for each
    policy run, ``{policy: {"name", "value", "settings"}}``, so that a sweep over
    one policy's settings reads that policy's instead (:func:`_by_policy`);
    ``of``: the policy whose figure it is (the best baseline's or agent's, which a
    name such as ``test mean TTFT (s), best baseline`` does not say). A NaN is
    recorded as null. Outside a sweep it is kept only until the next job starts."""
    record = {"name": name, "value": _finite(value), "choose": bool(choose), "basis": basis}
    if of is not None:
        record["of"] = of
    if policies is not None:
        record["policies"] = {
            policy: {**part, "value": _finite(part["value"])} for policy, part in policies.items()
        }
    _NOTES.append(record)


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(float(value)) else float(value)


def sweep_plan(config: Any) -> tuple[tuple[str, ...], int | None]:
    """A sweep's config (the command's, or its ``multirun.yaml``): the keys it
    varies (the command line's sweep overrides, ``seed=0,1``, and the sweeper's
    own ``hydra.sweeper.params``) and, for Hydra's basic sweeper, how many jobs
    they make (None for the Optuna sweeper, or if a value list is not counted:
    an interval, a glob)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    sweeper = config.hydra.get("sweeper") or {}
    optuna = _optuna(sweeper)
    params = sweeper.get("params") or {}
    lines = [str(o) for o in config.hydra.overrides.task]
    if not optuna:  # the basic sweeper's params are overrides too, before the command line's
        lines = [f"{k}={v}" for k, v in params.items()] + lines
    counts: dict[str, int | None] = {}  # by key, the last one winning, as the sweeper splits
    try:
        parsed = OverridesParser.create().parse_overrides(lines)
    except Exception:  # lines Hydra has parsed already: never expected
        return (), None
    for override in parsed:
        key = override.key_or_group
        counts.pop(key, None)
        if override.is_sweep_override():
            counts[key] = None
            with contextlib.suppress(Exception):  # a kind not counted: glob, interval
                counts[key] = None if optuna else len(list(override.sweep_string_iterator()))
    keys = [*counts, *(str(k) for k in params if str(k) not in counts)]
    planned = None
    if not optuna and all(n is not None for n in counts.values()):
        planned = math.prod(n for n in counts.values() if n is not None)
    return tuple(keys), planned


def _optuna(sweeper: Any) -> bool:
    return "optuna" in str(sweeper.get("_target_", ""))


def job_folders(folder: Path) -> list[Path]:
    """The job folders of the sweep folder ``folder``: those holding a ``.hydra/``
    record, at any depth (``hydra.sweep.subdir`` may nest them), sorted; not an
    earlier run's files a job kept aside with their record (``_io.REPLACED_NAME``)."""
    if not folder.is_dir():
        return []
    found = {
        meta.parent
        for meta in folder.rglob(".hydra")
        if meta.is_dir() and REPLACED_NAME not in meta.relative_to(folder).parts
    }
    return sorted(found - {folder})


class JobOutcome(Callback):
    """Writes each sweep job's :data:`OUTCOME` (single runs: nothing) and says a
    failed job as it ends (a bug with its traceback)."""

    def __init__(self) -> None:
        self.stamp = 0  # this sweep's start, set in the command's process before any job
        self.shared: Any = None  # the running job's folder held this sweep's job N

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        from omegaconf.errors import InterpolationResolutionError

        try:
            folder = Path(str(config.hydra.sweep.dir)).resolve()
        except InterpolationResolutionError as error:
            if folder_refusal(error) is not None:
                return  # a refused folder: refused again as the sweep resolves it, in one line
            raise
        self.stamp = time.time_ns()
        sweeper = config.hydra.sweeper
        optuna = _optuna(sweeper)
        held = folder.is_dir() and any(p.name != LOCK_NAME for p in folder.iterdir())
        swept, planned = sweep_plan(config)
        _STARTED[:] = [
            Sweep(
                folder=folder,
                stamp=self.stamp,
                new=not held,
                swept=swept,
                planned=planned,
                trials=int(sweeper.n_trials) if optuna else None,
                max_failure_rate=float(sweeper.max_failure_rate) if optuna else None,
            )
        ]

    def _record(self, config: Any, overrides: Sequence[str], **fields: Any) -> None:
        if config.hydra.mode != RunMode.MULTIRUN:
            return
        folder = Path(str(config.hydra.runtime.output_dir))
        record = {
            "job": int(config.hydra.job.num),
            "overrides": [str(o) for o in overrides],
            "folder": str(folder),
            "sweep": self.stamp,
            **fields,
        }
        try:
            write_json_atomic(folder / OUTCOME, record)
        except OSError as error:  # the job's own error (or results) is what matters
            print(f"warning: could not write {folder / OUTCOME} ({error})", file=sys.stderr)

    def on_job_start(self, config: Any, **kwargs: Any) -> None:
        _NOTES.clear()
        self.shared = None
        if config.hydra.mode != RunMode.MULTIRUN:
            return
        folder = Path(str(config.hydra.runtime.output_dir))
        try:
            before = read_json(folder / OUTCOME)
        except (OSError, ValueError):
            before = None
        job = int(config.hydra.job.num)
        if isinstance(before, dict) and before.get("sweep") == self.stamp and self.stamp:
            self.shared = before.get("job")  # another job of this sweep ran in this folder
            print(
                f"warning: job {job} runs in job {self.shared}'s folder {folder} (hydra.sweep."
                "subdir gives both the same): Hydra's record of that job there is now this one's",
                file=sys.stderr,
            )
        shared = {} if self.shared is None else {"shares_folder_with": self.shared}
        self._record(config, config.hydra.overrides.task, status="started", figures=[], **shared)

    def on_job_end(self, config: Any, job_return: Any, **kwargs: Any) -> None:
        fields: dict[str, Any] = {"status": "completed", "figures": list(_NOTES)}
        if self.shared is not None:
            fields["shares_folder_with"] = self.shared
        _NOTES.clear()
        if job_return.status != JobStatus.COMPLETED:
            # Hydra's JobReturn keeps the job's exception; its public getter raises it
            error = job_return._return_value
            bug = user_error_message(error) is None
            fields.update(status="failed", error=error_line(error), bug=bug)
            if config.hydra.mode == RunMode.MULTIRUN:
                job = int(config.hydra.job.num)
                if bug:  # a bug keeps its traceback
                    print("".join(traceback.format_exception(error)), file=sys.stderr, end="")
                print(f"job {job} failed: {fields['error']}", file=sys.stderr, flush=True)
        self._record(config, job_return.overrides or [], **fields)


def _records(sweep: Sweep) -> tuple[list[dict[str, Any]], list[str]]:
    """This sweep's job records, by job number, and the job folders under its
    folder (at any depth: ``hydra.sweep.subdir`` may nest them) that another
    sweep left (a Hydra record but none of this sweep's)."""
    mine: list[dict[str, Any]] = []
    others: list[str] = []
    for path in job_folders(sweep.folder):
        try:
            record = read_json(path / OUTCOME)
        except (OSError, ValueError):
            record = None
        if isinstance(record, dict) and record.get("sweep") == sweep.stamp:
            mine.append(record)
        else:
            others.append(str(path.relative_to(sweep.folder)))
    mine.sort(key=lambda r: int(r.get("job", 0)))
    return mine, others


def _varying(jobs: Sequence[dict[str, Any]], swept: Sequence[str]) -> list[str]:
    """The override keys the sweep varies (``swept``) or whose values differ
    between ``jobs``, in the order the jobs give them."""
    seen: dict[str, set[str]] = {}
    for job in jobs:
        for override in job["overrides"]:
            key, _, value = override.partition("=")
            seen.setdefault(key, set()).add(value)
    return [k for k, values in seen.items() if len(values) > 1 or k in swept]


def _best(jobs: Sequence[dict[str, Any]]) -> tuple[dict[str, Any] | None, str | None, str]:
    """The best completed job by the figure its command chooses by, that figure's
    name, and why none is named when none is: every completed job must name one
    chosen figure, the same, measured on the same ``basis``."""
    completed = [job for job in jobs if job["status"] == "completed"]
    if not completed:
        return None, None, "no job completed"
    chosen = [next((f for f in job["figures"] if f["choose"]), None) for job in completed]
    named = [f for f in chosen if f is not None]
    if not named:
        return (
            None,
            None,
            "no job gives a validation figure to choose by (test figures never choose)",
        )
    name = named[0]["name"]
    kinds = {(f["name"], json.dumps(f.get("basis"), sort_keys=True)) for f in named}
    if len(named) < len(chosen) or len(kinds) > 1:
        return None, name, "the jobs' figures do not compare: " + _why_apart(named, len(chosen))
    scored = [
        (f["value"], job) for f, job in zip(chosen, completed) if f and f["value"] is not None
    ]
    if not scored:
        return None, name, f"no completed job has a {name}"
    value, job = min(scored, key=lambda pair: pair[0])
    return {"job": job["job"], "folder": job["folder"], "by": name, "value": value}, name, ""


def _by_policy(jobs: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], str | None, str]:
    """When the completed jobs differ in one policy's settings (evaluate
    ``-m +policy_kwargs.btb.m=1,4``), each job's figure that gives every policy's
    (:func:`note`) becomes that policy's: the jobs are ranked by what the sweep
    varies, not by whichever policy did best in each (the reference, run alike
    in every job, often). Returns the jobs so read, the policy (None: the
    figures as noted) and why no job can be named best ("" but when the jobs
    differ in several policies' settings, or a job did not run the policy)."""
    completed = [job for job in jobs if job["status"] == "completed"]
    parts = [next((f["policies"] for f in job["figures"] if "policies" in f), None)
             for job in completed]  # fmt: skip
    if not parts or None in parts:
        return list(jobs), None, ""
    settings: dict[str, set[str]] = {}
    for part in parts:
        for policy, figure in (part or {}).items():
            written = json.dumps(figure.get("settings"), sort_keys=True, default=str)
            settings.setdefault(policy, set()).add(written)
    varied = [policy for policy, seen in settings.items() if len(seen) > 1]
    if len(varied) != 1:
        several = (
            f"the jobs differ in the settings of {', '.join(varied)}: no one policy ranks them"
        )
        return list(jobs), None, several if varied else ""
    (policy,) = varied
    lacking = [str(job["job"]) for job, part in zip(completed, parts) if policy not in (part or {})]
    if lacking:
        which = f"{'job' if len(lacking) == 1 else 'jobs'} {', '.join(lacking)}"
        return (
            list(jobs),
            None,
            f"the jobs differ in {policy}'s settings, but {which} did not run it",
        )
    read = [
        {**job, "figures": [_read(f, policy) for f in job["figures"]]}
        if job["status"] == "completed"
        else job
        for job in jobs
    ]
    return read, policy, ""


def _read(figure: dict[str, Any], policy: str) -> dict[str, Any]:
    """``figure`` as ``policy``'s (its name and value), if it gives every policy's."""
    if "policies" not in figure:
        return figure
    part = figure["policies"][policy]
    return {**figure, "name": part["name"], "value": part["value"], "of": policy}


_BASIS_WORDS = {
    "seed": "simulator random streams (seed; train: train.eval_seed)",
    "sim": "simulator settings",
    "workload": "workloads (or workload seeds or parameters)",
    "setup": "setups",
    "score": "scores",
    "split": "splits",
}


def _why_apart(named: Sequence[dict[str, Any]], jobs: int) -> str:
    """Why figures named by ``jobs`` completed jobs do not compare: not every job
    gives one, they are different figures, or what their bases differ in."""
    if len(named) < jobs:
        return "not every job gives one"
    names = sorted({f["name"] for f in named})
    if len(names) > 1:
        return f"they are different figures ({', '.join(names)})"
    bases: list[dict[str, Any]] = [
        f["basis"] if isinstance(f.get("basis"), dict) else {} for f in named
    ]
    keys = sorted({k for b in bases for k in b})
    differ = [k for k in keys if len({json.dumps(b.get(k), sort_keys=True) for b in bases}) > 1]
    if "run" in differ:
        return "each is a ratio to its own run's start (worst_family)"
    words = [_BASIS_WORDS.get(k, k) for k in differ]
    return "measured on different " + ", ".join(words) if words else "measured differently"


SEED_KEY = "seed"


def _over_seeds(jobs: Sequence[dict[str, Any]], keys: Sequence[str]) -> list[dict[str, Any]]:
    """For a sweep over ``seed``: each setting of the other swept keys that two
    completed jobs or more ran with different seeds, with every figure's mean and
    standard deviation over those seeds (ddof 1: the seeds are a sample) and how
    many had it; for a figure that is another policy's in each job, how many had
    it and each policy's (``{"n", "by_policy"}``, no mean or std). A seed a
    setting ran twice (``seed=0,0``) counts once, its first job's; ``repeated``
    names the jobs left out."""
    groups: dict[tuple[str, ...], dict[str, dict[str, Any]]] = {}
    repeated: dict[tuple[str, ...], list[int]] = {}
    for job in jobs:
        if job["status"] != "completed":
            continue
        other = tuple(o for o in swept_overrides(job["overrides"], keys) if not _is_seed(o))
        seed = next((o.partition("=")[2] for o in job["overrides"] if _is_seed(o)), "")
        if seed in groups.setdefault(other, {}):
            repeated.setdefault(other, []).append(job["job"])
        else:
            groups[other][seed] = job
    rows = []
    for other, by_seed in groups.items():
        if len(by_seed) < 2:
            continue
        seeds, members = list(by_seed), list(by_seed.values())
        figures = {}
        for name in dict.fromkeys(f["name"] for job in members for f in job["figures"]):
            named = [f for job in members for f in job["figures"] if f["name"] == name]
            stats = _mean_std([f["value"] for f in named])
            if stats is None:
                continue
            by_policy = _by_policy_over_seeds(named, len(members))
            # a mean of different policies' figures is no one's: not stored either
            figures[name] = {"n": stats["n"], **by_policy} if by_policy else stats
        if figures:
            jobs_in = [job["job"] for job in members]
            rows.append(
                {
                    "overrides": list(other),
                    "seeds": seeds,
                    "jobs": jobs_in,
                    "figures": figures,
                    "repeated": repeated.get(other, []),
                }
            )
    return rows


def _mean_std(values: Sequence[float | None]) -> dict[str, Any] | None:
    """``{"mean", "std", "n"}`` of the values given (not None): std with ddof 1, None
    for one value; None for none."""
    given = [v for v in values if v is not None]
    if not given:
        return None
    mean = sum(given) / len(given)
    var = sum((v - mean) ** 2 for v in given) / max(len(given) - 1, 1)
    return {"mean": mean, "std": math.sqrt(var) if len(given) > 1 else None, "n": len(given)}


def _by_policy_over_seeds(named: Sequence[dict[str, Any]], jobs: int) -> dict[str, Any]:
    """When a figure is each job's best policy's and that is not the same policy in
    every job (``best baseline``: dynamo's in one, cache_aware's in the other), the
    mean over seeds would average different policies: ``{"by_policy": {policy:
    {"mean", "std", "n"}}}`` for each policy every job ran, which the table prints
    and sweep.json stores instead. ``{}`` for a figure of one policy (or one that
    gives no policy's)."""
    if len(named) < jobs or not all("policies" in f for f in named):
        return {}
    if len({f.get("of") for f in named}) < 2:
        return {}
    shared = [p for p in named[0]["policies"] if all(p in f["policies"] for f in named)]
    by_policy = {}
    for policy in shared:
        stats = _mean_std([f["policies"][policy]["value"] for f in named])
        if stats is not None:
            by_policy[policy] = stats
    return {"by_policy": by_policy}


def swept_overrides(overrides: Sequence[str], keys: Sequence[str]) -> list[str]:
    """The overrides of a job whose keys are among the swept ``keys``: what tells
    the job apart in the table and the chart."""
    return [o for o in overrides if o.partition("=")[0] in keys]


def _is_seed(override: str) -> bool:
    return override.partition("=")[0] == SEED_KEY


def collect(interrupted: str = "") -> dict[str, Any] | None:
    """The summary of the sweep this process started, if it started one and any
    job of it left a record: its jobs (all overrides, status, figures, error),
    the keys that vary, the policy whose figures they read if the jobs differ in
    its settings (:func:`_by_policy`), the best completed job by the chosen
    figure (or why none), the job folders other sweeps left, and whether it was
    cut short: ``interrupted`` is what the command says as it stops
    (``_cli.interruption``: ``interrupted``, ``terminated``, ``hangup``), "" if
    it was not."""
    if not _STARTED:
        return None
    sweep = _STARTED.pop()
    if not sweep.folder.is_dir():
        return None
    jobs, others = _records(sweep)
    if not jobs:
        _discard_bare(sweep)
        return None
    jobs, policy, apart = _by_policy(jobs)
    keys = _varying(jobs, sweep.swept)
    names: list[str] = []
    for job in jobs:
        for figure in job["figures"]:
            if figure["name"] not in names:
                names.append(figure["name"])
    shared = [(job["shares_folder_with"], job["job"], job["folder"]) for job in jobs
              if "shares_folder_with" in job]  # fmt: skip
    best, chosen, why = _best(jobs)
    if apart and best is not None:  # each job's figure reads another policy
        best, why = None, apart
    if shared:  # a job's record was overwritten: the table lacks it
        best, why = None, "jobs shared a folder, so a job's record is missing"
    if best is not None:
        top = next(job for job in jobs if job["job"] == best["job"])
        best["overrides"] = swept_overrides(top["overrides"], keys)
    summary = {
        "sweep_dir": str(sweep.folder),
        "interrupted": bool(interrupted),
        "interruption": interrupted,  # (said in the table, not written)
        "jobs": [
            {
                "job": job["job"],
                "overrides": job["overrides"],
                "folder": job["folder"],
                "status": "not finished" if job["status"] == "started" else job["status"],
                **({"error": job["error"]} if job["status"] == "failed" else {}),
                "figures": {f["name"]: f["value"] for f in job["figures"]},
                **_whose(job["figures"]),
            }
            for job in jobs
        ],
        "swept": keys,
        "figures": names,
        "chosen_by": chosen,
        "read_policy": policy,
        "best": best,
        "no_best": why or None,
        "failed": [job["job"] for job in jobs if job["status"] == "failed"],
        "bugs": [job["job"] for job in jobs if job.get("bug")],
        "other_folders": others,
        "over_seeds": _over_seeds(jobs, keys) if SEED_KEY in keys else [],
        "shared_folders": [
            {"jobs": [first, then], "folder": folder} for first, then, folder in shared
        ],
    }
    rate = sweep.max_failure_rate
    planned = sweep.planned if sweep.planned is not None else sweep.trials
    if interrupted:  # the user stopped it: not blamed on a failure
        if planned is not None and len(jobs) < planned:
            what = "jobs" if sweep.planned is not None else "trials"
            summary["stopped"] = f"{interrupted}: {len(jobs)} of the sweep's {planned} {what} began"
    elif sweep.trials is not None and len(jobs) < sweep.trials and summary["failed"]:
        if rate is not None and rate < 1:
            summary["stopped"] = (
                f"the sweep stopped after a failed trial: {len(jobs)} of {sweep.trials} trials "
                f"ran (hydra.sweeper.max_failure_rate={rate:g}; raise it to go on past "
                "failed trials)"
            )
    elif sweep.planned is not None and len(jobs) < sweep.planned and not shared:
        summary["stopped"] = (
            f"{len(jobs)} of the sweep's {sweep.planned} jobs ran: it stopped at a failed "
            "job or at one Hydra could not compose (with hydra.sweeper.max_batch_size, "
            "after the batch that held it)"
        )
    summary["new_folder"] = sweep.new
    return summary


def _whose(figures: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``{"of": {figure: policy}}`` for the figures a job noted whose policy its
    name does not say (``..., best baseline``: :func:`note`'s ``of``); ``{}`` if none."""
    of = {
        f["name"]: f["of"]
        for f in figures
        if f.get("of") and not f["name"].endswith(f", {f['of']}")
    }
    return {"of": of} if of else {}


def _whose_lines(jobs: Sequence[dict[str, Any]]) -> list[str]:
    """For each figure a job's name does not say the policy of (:func:`_whose`),
    whose it is: ``test mean TTFT (s), best baseline: least_load's in every job``,
    or job by job."""
    lines = []
    names = dict.fromkeys(name for job in jobs for name in job.get("of", {}))
    for name in names:
        by_job = [(job["job"], job["of"][name]) for job in jobs if name in job.get("of", {})]
        policies = {policy for _, policy in by_job}
        if len(policies) == 1 and len(by_job) > 1:
            lines.append(f"{name}: {policies.pop()}'s in every job")
        else:
            each = ", ".join(f"{policy}'s in job {job}" for job, policy in by_job)
            lines.append(f"{name}: {each}")
    return lines


def _differ_also(swept: Sequence[str], policy: str) -> list[str]:
    """The swept keys besides ``policy``'s own settings (``+policy_kwargs.btb.m``)."""
    own = f"policy_kwargs.{policy}."
    return [key for key in swept if not key.lstrip("+~").startswith(own)]


def _discard_bare(sweep: Sweep) -> None:
    """A new sweep folder in which no job started (Hydra could not compose the
    first): its ``multirun.yaml`` goes, so the same command may run there again."""
    if not sweep.new:
        return
    with contextlib.suppress(OSError):
        names = {p.name for p in sweep.folder.iterdir()}
        if names <= {"multirun.yaml", LOCK_NAME}:
            (sweep.folder / "multirun.yaml").unlink(missing_ok=True)
            if not any(sweep.folder.iterdir()):
                sweep.folder.rmdir()


def _number(value: float) -> str:
    """A figure in the table: 4 significant digits, whole numbers from 1,000 up
    (17,900 rather than 1.79e+04)."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def table(summary: dict[str, Any]) -> list[str]:
    """The summary as printed lines: one row a job, then each failure, the best
    job (or why none is named) and the folders other sweeps left."""
    from experiments.report import aligned_table

    names = summary["figures"]
    jobs = summary["jobs"]
    header = ["job", "overrides", "status", *names]
    rows = []
    for job in jobs:
        swept = " ".join(swept_overrides(job["overrides"], summary["swept"]))
        values = [job["figures"].get(n) for n in names]
        cells = ["-" if v is None else _number(v) for v in values]
        rows.append([str(job["job"]), swept or "-", job["status"], *cells])
    counts = [f"{sum(j['status'] == s for j in jobs)} {s}" for s in ("completed", "failed")]
    unfinished = sum(j["status"] == "not finished" for j in jobs)
    if unfinished:
        counts.append(f"{unfinished} not finished")
    lost = len(summary.get("shared_folders", []))
    if lost:
        counts.append(f"{lost} whose record another job overwrote")
    head = f"sweep {summary['sweep_dir']}: {plural(len(jobs) + lost, 'job')}, " + ", ".join(counts)
    lines = [head + (f" ({summary['interruption']})" if summary["interrupted"] else "")]
    lines += aligned_table(header, rows, right=range(3, 3 + len(names)))
    for job in jobs:
        if job["status"] == "failed":
            kept = f" ({job['kept']})" if job.get("kept") else ""
            lines.append(f"job {job['job']} failed: {job['error']}{kept}")
    if summary.get("stopped"):
        lines.append(summary["stopped"])
    for pair in summary.get("shared_folders", []):
        first, then = pair["jobs"]
        lines.append(
            f"jobs {first} and {then} ran in one folder, {pair['folder']} (hydra.sweep.subdir "
            f"gives both the same): job {first}'s record there is job {then}'s now; give each "
            "job its own folder (hydra.sweep.subdir=${hydra.job.num}, the default)"
        )
    best = summary["best"]
    if best is not None:
        which = " ".join(best["overrides"]) or "its overrides above"
        one_seed = (
            " (one seed's score: the means over seeds are below)"
            if summary.get("over_seeds")
            else ""
        )
        lines.append(
            f"best by {best['by']}: job {best['job']} ({which}), {_number(best['value'])}, "
            f"in {best['folder']}{one_seed}"
        )
    else:
        lines.append(f"no best job named: {summary['no_best']}")
    policy = summary.get("read_policy")
    if policy:
        also = _differ_also(summary["swept"], policy)
        lines.append(
            f"the figures are {policy}'s: the jobs differ in its settings (policy_kwargs)"
            + (f" and in {', '.join(also)}" if also else "")
        )
    lines += _whose_lines(jobs)
    for group in summary.get("over_seeds", []):

        def stat(f: dict[str, Any], seeds: int = len(group["seeds"])) -> str:
            return (
                _number(f["mean"])
                + ("" if f["std"] is None else f" ± {f['std']:.2g}")
                + ("" if f["n"] == seeds else f" ({plural(f['n'], 'seed')})")
            )

        figures = "; ".join(
            f"{name}: a different policy's in each job, so by policy: "
            + (
                ", ".join(f"{p} {stat(g)}" for p, g in f["by_policy"].items())
                or "none in every job"
            )
            if "by_policy" in f
            else f"{name} {stat(f)}"
            for name, f in group["figures"].items()
        )
        which = " ".join(group["overrides"]) or "the one setting"
        left_out = group.get("repeated")
        again = (
            f"; {'job' if len(left_out) == 1 else 'jobs'} {', '.join(map(str, left_out))} "
            "repeated a seed, not counted"
            if left_out
            else ""
        )
        lines.append(
            f"over seeds {', '.join(group['seeds'])} ({which}): {figures} "
            f"(mean ± std, ddof 1{again})"
        )
    if summary["other_folders"]:
        lines.append(
            "job folders of an earlier sweep, not this one's: "
            + ", ".join(summary["other_folders"])
        )
    return lines


def finish(summary: dict[str, Any] | None) -> Path | None:
    """After the sweep (and after any earlier run's records were put back): mark
    each failed job whose folder holds an earlier run's files again, print the
    table and write ``sweep.json``, unless no job completed and the folder held
    files before (an earlier sweep's, whose summary then stays). Returns the
    file written."""
    if summary is None:
        return None
    import yaml
    from omegaconf import OmegaConf

    from experiments.report import plot_sweep

    for job in summary["jobs"]:
        if job["status"] != "failed":
            continue
        overrides = Path(job["folder"]) / ".hydra" / "overrides.yaml"
        try:  # Hydra's record of the job, or the earlier run's put back
            recorded = OmegaConf.to_container(OmegaConf.load(overrides))
        except (OSError, ValueError):
            continue
        except yaml.YAMLError as error:  # a damaged record: said, and the sweep ends as it would
            said = " ".join(str(error).split())
            print(
                f"warning: {overrides}: not valid YAML ({said}); job {job['job']}'s folder "
                "is not checked for an earlier run's files",
                file=sys.stderr,
            )
            continue
        if recorded != job["overrides"]:
            job["kept"] = "its folder keeps the earlier run's files"
    print("\n".join(table(summary)), flush=True)
    completed = any(job["status"] == "completed" for job in summary["jobs"])
    if not completed and not summary["new_folder"]:
        return None
    record = {k: v for k, v in summary.items() if k not in ("new_folder", "bugs", "interruption")}
    folder = Path(summary["sweep_dir"])
    try:
        written = write_json_atomic(folder / SUMMARY, record)
    except OSError as error:
        print(f"warning: could not write {folder / SUMMARY} ({error})", file=sys.stderr)
        return None
    chart = None
    try:
        labels = {
            job["job"]: swept_overrides(job["overrides"], summary["swept"])
            for job in summary["jobs"]
        }
        chart = plot_sweep(summary, folder / CHART, labels)
        if chart is None:  # no figure: an earlier sweep's chart would describe other jobs
            (folder / CHART).unlink(missing_ok=True)
    except Exception as error:  # a chart must not cost the sweep its summary and ending
        print(f"warning: could not draw {folder / CHART} ({error})", file=sys.stderr)
    print(f"wrote {written}" + (f" and {chart.name}" if chart is not None else ""))
    return written


def ending(
    command: str, summary: dict[str, Any] | None, written: Path | None, named: bool = True
) -> tuple[str, int]:
    """The last line of a sweep with failed jobs (without ``error: ``) and its exit
    status: 2 when every failure is a user's error, 1 when one is a bug (its
    traceback was printed as it ended); ("", 0) when no job failed. When every job
    failed on a user's error in a folder the command ``named`` (``out_dir=``,
    ``hydra.sweep.dir=``, on the command line or in a config file), the line says
    how to run the sweep again there, which the jobs' records (and ``sweep.json``)
    now fill: a folder that holds files is refused without ``overwrite=true``. A
    dated default folder is a new one for each run: the same command runs again."""
    if summary is None or not summary["failed"]:
        return "", 0
    failed = summary["failed"]
    where = f"above and in {written}" if written is not None else "above"
    which = ", ".join(str(n) for n in failed)
    ran = len(summary["jobs"]) + len(summary.get("shared_folders", []))
    line = (
        f"{command}: {len(failed)} of {plural(ran, 'job')} failed "
        f"({plural(len(failed), 'job').split()[1]} {which}); each one's error is {where}"
    )
    if named and len(failed) == ran and not summary["bugs"]:
        line += (
            f"; to run the sweep again in {summary['sweep_dir']}, add overwrite=true (it "
            "replaces what these jobs left there) or give another out_dir"
        )
    return line, 1 if summary["bugs"] else 2


@contextlib.contextmanager
def quiet_job_errors() -> Iterator[None]:
    """While a sweep runs: Hydra's "Error executing job with overrides" lines (one
    each time a failed job's result is read) and the Optuna sweeper's failure log
    lines are dropped; each job's failure is said as it ends (:class:`JobOutcome`)
    and in the table, and a sweep the Optuna sweeper stopped says why."""
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
