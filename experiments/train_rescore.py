"""Score every saved checkpoint of a finished training run on more validation windows.

    python -m experiments.train_rescore run=RUN [val_windows=0] [overwrite=false]

``RUN`` is the folder of a ``python -m experiments.train`` run (its ``out_dir``):
the run's own config (``RUN/.hydra/config.yaml``) gives the setup, workload,
simulator, seed and ``train.val_score``. Scored, with greedy actions, on the first
``val_windows`` validation windows (0: all of them): the agent the run started
from (``train.init_from``, as step 0), every ``checkpoints/step_N``, ``last/`` and
the run's own pick, ``agent/``, when its weights are none of those. A trace's
relative ``workload.path`` is read from the folder the run started in (its
record's ``provenance.cwd``), and a file of another sha256 than the run's record
says is refused.
The best (lowest score; the earliest on a tie) is the choice; the test windows
are not touched. Writes ``RUN/rescore_val<N>.json`` atomically (kept unless
``overwrite=true``): the windows, each candidate's score, pooled mean TTFT, its
families' geometric means and each window's mean TTFT, ``best_folder`` and, for a
trace, its stamp (``workload_file``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from envs.sim.errors import echoed
from experiments._cli import FROM_COMMAND_LINE, UsageError, main_guard, parse_args
from experiments._io import claim_out_dir, releasing_out_dirs

COMMAND = "experiments.train_rescore"
DEFAULTS: dict[str, Any] = {"run": "", "val_windows": 0, "overwrite": False}


def candidates(run: Path, init_from: str | None) -> list[tuple[int, Path]]:
    """``(step, folder)`` of every model a run saved, by step: ``init_from`` (step 0),
    ``checkpoints/step_N``, ``last/`` (left out when a checkpoint has its step) and
    ``agent/``, the run's own pick by validation, unless its weights are one of
    those (a fresh run's starting model is kept nowhere else). ``agent/``'s step is
    its ``agent.json`` label, the validation score's, which counts one rollout more
    than the checkpoint holding the same weights (docs/agents.md)."""
    found = _saved(run, init_from)
    pick = run / "agent"
    if (pick / "agent.json").is_file():
        from agents.algorithms import load_spec, saved_weights

        weights = saved_weights(pick)
        if all(saved_weights(folder) != weights for folder in found.values()):
            return sorted([*found.items(), (load_spec(pick).timesteps, pick)], key=lambda c: c[0])
    return sorted(found.items())


def _saved(run: Path, init_from: str | None) -> dict[int, Path]:
    from agents import agent_folder
    from agents.algorithms import load_spec

    found: dict[int, Path] = {}
    if init_from:
        folder = agent_folder(init_from)
        if folder is None:
            raise ValueError(
                f"run={run}: its train.init_from={init_from} is not an agent folder from here "
                "(a relative path is taken from the folder the command runs in)"
            )
        found[0] = folder
    checkpoints = run / "checkpoints"
    for folder in sorted(checkpoints.glob("step_*")) if checkpoints.is_dir() else []:
        step = folder.name.removeprefix("step_")
        if step.isdigit() and (folder / "agent.json").is_file():
            found.setdefault(int(step), folder)
    if (run / "last" / "agent.json").is_file():
        found.setdefault(load_spec(run / "last").timesteps, run / "last")
    return found


SAME_AGENT = ("algo", "env", "net", "hidden", "critic", "env_kwargs")
"""What every checkpoint of one run shares (its network and the env it reads)."""


def check_same_agent(run: Path, first: Path, spec: Any, folder: Path, other: Any) -> None:
    """Refuse, naming the field, a checkpoint that is not of the run's agent (a
    folder copied in from another run: its network, or the env it was trained in,
    differs; scored through the run's spec it could meet an observation of another
    layout, or be scored in an env it was not trained in)."""

    def fields(agent: Any) -> dict[str, Any]:
        flat = {name: getattr(agent, name) for name in SAME_AGENT if name != "env_kwargs"}
        return flat | {f"env_kwargs.{key}": value for key, value in agent.env_kwargs.items()}

    mine, theirs = fields(spec), fields(other)
    for name in [*mine, *(key for key in theirs if key not in mine)]:
        if mine.get(name) != theirs.get(name):
            raise ValueError(
                f"run={run}: {folder}/agent.json has {name}={theirs.get(name)!r}, "
                f"{first}/agent.json {name}={mine.get(name)!r}; a rescore scores one run's "
                "checkpoints (move the other out)"
            )


def best_of(scores: list[tuple[int, float]]) -> tuple[int, float]:
    """The ``(step, score)`` with the lowest score, the earliest on a tie; a NaN never
    wins; ``(-1, nan)`` if every score is NaN."""
    best = (-1, math.nan)
    for step, score in scores:
        if not math.isnan(score) and (math.isnan(best[1]) or score < best[1]):
            best = (step, score)
    return best


def rescore(cfg: Any, run: Path, windows: list[Any]) -> dict[str, Any]:
    """Score each of the run's :func:`candidates` by ``cfg.train.val_score`` on
    ``windows`` (validation windows); the record of ``rescore_val<N>.json``."""
    from agents.algorithms import load_agent, load_spec
    from agents.callbacks import score_text
    from experiments.train import ValidationScore

    found = candidates(run, cfg.train.init_from)
    saved = [folder for step, folder in found if step > 0]
    if not saved:
        raise ValueError(f"run={run}: no checkpoints/step_N or last/ with an agent.json")
    if str(cfg.train.val_score) == "worst_family" and found[0][0] != 0:
        # the score is relative to the run's step-0 model, which only init_from keeps
        raise ValueError(
            f"run={run}: train.val_score=worst_family scores against the model the run "
            "started from, and a run without train.init_from does not keep it"
        )
    # every candidate acts through the run's own spec (init_from's weights are the
    # run's step 0, in the run's network and env arguments)
    spec = load_spec(saved[0])
    for folder in saved[1:]:
        check_same_agent(run, saved[0], spec, folder, load_spec(folder))
    score = ValidationScore(cfg, spec, windows, str(cfg.train.val_score))
    history = []
    for step, folder in found:
        model, _ = load_agent(folder)
        value = float(score(model))
        history.append(
            {
                "step": step,
                "folder": str(folder),
                "score": value,
                **score.records[-1],
            }
        )
        print(f"step {step:>8}: {cfg.train.val_score} {score_text(value)} ({folder})")
    best_step, best_score = best_of([(h["step"], h["score"]) for h in history])
    return {
        "run": str(run),
        "score": str(cfg.train.val_score),
        "windows": [w.name for w in windows],
        "history": history,
        "best_step": best_step,
        "best_score": best_score,
        "best_folder": next(
            (h["folder"] for h in history if (h["step"], h["score"]) == (best_step, best_score)),
            None,
        ),
    }


def run_config(run: Path) -> Any:
    """The composed config a training run saved (``.hydra/config.yaml``); one that
    does not read (cut short, not YAML, no mapping) is a one-line error naming it."""
    import yaml
    from omegaconf import DictConfig, OmegaConf

    from envs.workloads.readers.sources import first_line
    from experiments.train import VAL_SCORES

    path = run / ".hydra" / "config.yaml"
    if not run.is_dir():
        what = "not a folder" if run.exists() else "no such folder"
        raise UsageError(f"{COMMAND}: run={str(run)!r}: {what}")
    if not path.is_file():
        raise UsageError(
            f"{COMMAND}: run={str(run)!r} has no .hydra/config.yaml (not the folder of a "
            "python -m experiments.train run)"
        )
    try:
        cfg = OmegaConf.load(path)
    except (yaml.YAMLError, UnicodeDecodeError) as error:  # (a file cut short, or not text)
        said = first_line(error)
        mark = getattr(error, "problem_mark", None)
        if getattr(error, "problem", None) and mark is not None:  # what the parser found, where
            said = f"{error.problem}, line {mark.line + 1}"  # type: ignore[union-attr]
        raise UsageError(
            f"{COMMAND}: run={str(run)!r}: its .hydra/config.yaml does not read as YAML ({said})"
        ) from None
    if not isinstance(cfg, DictConfig):
        raise UsageError(
            f"{COMMAND}: run={str(run)!r}: its .hydra/config.yaml holds a "
            f"{type(cfg).__name__}, not a config (not the folder of a python -m "
            "experiments.train run)"
        )
    for key in RUN_KEYS:
        if OmegaConf.select(cfg, key, default=_MISSING) is _MISSING:
            raise UsageError(
                f"{COMMAND}: run={str(run)!r}: its .hydra/config.yaml has no {key} (not the "
                "config of a python -m experiments.train run of this version)"
            )
    if cfg.train.val_score not in VAL_SCORES:  # (as train checks it)
        raise UsageError(
            f"{COMMAND}: run={str(run)!r}: its .hydra/config.yaml has train.val_score="
            f"{cfg.train.val_score!r}; it must be one of {', '.join(VAL_SCORES)}"
        )
    return cfg


_MISSING = object()
RUN_KEYS = (
    "seed",
    "setup",
    "model",
    "cluster",
    "workload",
    "sim",
    "train.val_score",
    "train.init_from",
)
"""What the rescore reads of a run's config."""


def check_run_trace(cfg: Any, run: Path) -> None:
    """A run on a trace file: its ``workload.path``, when relative, is taken from the
    folder the run started in (its record's ``provenance.cwd``; said when that is not
    this one), or from this one when it is not there (a run folder moved from
    another machine), and the file there must be the one the run trained on: a sha256 other
    than the run's record (``train.json`` / ``results.json``) says is refused in one
    line naming both (its windows would be another trace's). A file not found is
    refused naming where its path came from."""
    import os

    from envs.workloads.trace_file import file_stamp
    from envs.workloads.trace_options import HUB, TRACE_WORKLOAD
    from experiments._cli import stamp_trace
    from experiments.config import workload_params
    from experiments.trained_on import run_cwd, run_trace_stamp

    if cfg.workload.name != TRACE_WORKLOAD:
        return
    given = str(cfg.workload.path)
    where = f"run={str(run)!r}: workload.path={given!r} (its .hydra/config.yaml)"
    cwd = None if os.path.isabs(given) else run_cwd(run)
    path = given if cwd is None else os.path.join(cwd, given)
    if cwd is not None and not os.path.exists(path) and os.path.exists(given):
        cwd, path = None, given  # a run moved from elsewhere: the sha256 below checks it
    hub_name = cfg.workload.format == HUB and not os.path.exists(path)
    if hub_name:  # a dataset by name, not a file
        return
    if not os.path.exists(path):
        said = (
            f"no such file in the folder the run started in ({cwd}), nor here"
            if cwd is not None
            else "no such file"
            + ("" if os.path.isabs(given) else " here (the run recorded no provenance.cwd)")
        )
        raise UsageError(f"{COMMAND}: {where}: {said}")
    if cwd is not None:
        cfg.workload.path = path
        if os.path.abspath(cwd) != os.getcwd():
            print(f"note: {where} is read from the folder the run started in: {path}")
    recorded = run_trace_stamp(run)
    if recorded is not None and os.path.isfile(path):  # its bytes, before any read of its rows
        name, stamp = recorded
        now = file_stamp(path)["sha256"]
        if now != stamp["sha256"]:
            raise UsageError(
                f"{COMMAND}: {where} is not the trace the run trained on (sha256 "
                f"{stamp['sha256'][:12]}... in its {name}, {now[:12]}... now): its validation "
                "windows would be another trace's; put the run's trace back there"
            )
    stamp_trace(TRACE_WORKLOAD, workload_params(cfg))  # the rescore's trace as it starts


@releasing_out_dirs
def main(argv: list[str] | None = None) -> Path:
    from agents.callbacks import score_text
    from envs.files import write_json_atomic
    from experiments.config import window_pool_of, workload_record

    options = parse_args(COMMAND, DEFAULTS, argv)
    if not options["run"]:
        raise UsageError(f"{COMMAND}: run=RUN (a training run's folder) is required")
    if options["val_windows"] < 0:
        raise UsageError(
            f"{COMMAND}: val_windows must be >= 0, got "
            f"{echoed(options['val_windows'], quoted=False)}{FROM_COMMAND_LINE}"
        )
    run = Path(options["run"])
    cfg = run_config(run)
    check_run_trace(cfg, run)
    windows = window_pool_of(cfg, "val", options["val_windows"] or None)
    if len(windows) < options["val_windows"]:
        raise UsageError(
            f"{COMMAND}: val_windows={options['val_windows']}, but the run's workload has "
            f"{len(windows)} validation windows"
        )
    out = run / f"rescore_val{len(windows)}.json"
    # the run's folder is taken as every command takes its own (a lock: refused while
    # another run, a training run or a rescore, writes there); what the training run
    # left is no reason to refuse, and overwrite=true keeps the old rescore aside
    # until this one is written (put back if it is not)
    claim_out_dir(
        run, f"{COMMAND}: run", (out.name,) if options["overwrite"] else (), True, movable=False
    )
    if out.exists() and not options["overwrite"]:
        raise UsageError(f"{COMMAND}: {out} exists; overwrite=true replaces it")
    record = {**rescore(cfg, run, windows), **workload_record(cfg)}  # (a trace's stamp)
    write_json_atomic(out, record)
    print(
        f"best {record['score']} score {score_text(record['best_score'])} at step "
        f"{record['best_step']} "
        f"({record['best_folder']}); wrote {out}"
    )
    return out


if __name__ == "__main__":
    raise SystemExit(main_guard(main))
