"""BTB's thresholds as an objective: mean TTFT on the train windows.

    python -m experiments.tune_btb x=3 y_tokens=32768 z=0.5 m=2      # one evaluation
    python -m experiments.tune_btb -m            # Optuna: conf/hydra/sweeper/btb_optuna.yaml
    python -m experiments.tune_btb -m hydra.sweeper.n_trials=50 workload=rising_load
    python -m experiments.tune_btb -m hydra/sweeper=basic x=2,3 z=0.5,1   # a grid

Each job writes ``objective.json`` (thresholds, mean TTFT, its result ``row``) to its folder,
and ends on its result line and ``wrote RUN/objective.json``.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import sys
from typing import Any

import hydra
from omegaconf import DictConfig

from envs.sim.errors import plural
from envs.workloads.stats import y_shares_no_prefix
from envs.workloads.trace_file import TRACE_WORKLOAD
from experiments import sweeps
from experiments._cli import cap_note
from experiments.config import (
    CONF_DIR,
    cluster_of,
    cluster_size,
    cluster_size_said,
    register_configs,
    setup_label,
    sim_of,
    window_pool_of,
    workload_label,
    workload_record,
)
from experiments.jobs import (
    check_world,
    eval_windows,
    hydra_entry,
    job_logger,
    measured_on,
    run_dir,
    run_job,
    sweep_overrides,
)

register_configs()


def search_space_range(text: str) -> tuple[float, float] | None:
    """The smallest and largest value the Optuna sweeper (hydra-optuna-sweeper 1.3)
    draws for a search-space override: ``interval(1, 4)`` and ``range(1, 4)`` both
    include 4 (the sweeper turns a range into Optuna's IntUniformDistribution, whose
    high end is inclusive); ``shuffle(range(1, 5))`` is a choice of 1..4;
    ``choice(1, 2)`` / ``1,2`` their values; a plain value itself. None if the
    override is not numeric; ``(nan, nan)`` if the sweeper can draw a NaN."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep

    value = OverridesParser.create().parse_override(f"key={text}").value()
    if isinstance(value, IntervalSweep):
        values: list[Any] = [value.start, value.end]
    elif isinstance(value, RangeSweep) and value.shuffle:
        values = list(value.range())
    elif isinstance(value, RangeSweep):
        start, stop, step = value.start, value.stop, value.step or 1
        if start is None or stop is None or step <= 0 or stop < start:
            return None
        values = [start, start + int((stop - start) // step) * step]
    elif isinstance(value, ChoiceSweep):
        values = list(value.list)
    else:
        values = [value]
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not numbers or len(numbers) != len(values):
        return None
    if any(math.isnan(n) for n in numbers):  # min and max would pass over it
        return math.nan, math.nan
    return min(numbers), max(numbers)


_CLUSTER_GROUPS = ("cluster", "setup", "model")


def check_sweep(args: list[str]) -> None:
    """Before a ``-m`` sweep starts: at least one trial, and every X, Y, Z and M the
    sweeper can draw must be one a job accepts (:func:`check_thresholds`, and Y at
    least one block of the workload): the sweep stops at its first failed trial.

    Each search space is the command line's (``m=``) if it has one, else
    ``hydra.sweeper.params``'s (conf/hydra/sweeper/btb_optuna.yaml's M follows the
    cluster's nodes, ``cluster.nodes``' entries or ``cluster.n_nodes``; the basic
    sweeper has none).
    A sweep over clusters (``cluster=a,b``, ``setup=``, ``model=``) checks M against
    the smallest of them: the sweeper draws M from one search space for every job;
    a cluster of no node is refused with its own error, as a single run's.
    Left to each job: M when the node count is swept over a range, Y when the
    workload is swept, and everything when the command does not compose (Hydra
    then reports that itself)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    parsed = sweep_overrides(args)
    if parsed is None:
        return
    for override in parsed:  # with none, the sweeper fails on "No trials are completed yet"
        trials = override.value() if override.key_or_group == "hydra.sweeper.n_trials" else 1
        if isinstance(trials, int) and not isinstance(trials, bool) and trials < 1:
            raise ValueError(
                f"hydra.sweeper.n_trials={trials} (from the command line): a sweep needs "
                "at least 1 trial"
            )
    fixed = [o.input_line for o in parsed if not o.is_sweep_override() and o.input_line]
    trace_block = _check_trace_before_sweep(parsed, fixed)
    # a sweep over clusters: every M must fit the smallest cluster it covers
    clusters = [
        o for o in parsed if o.is_sweep_override() and o.key_or_group.startswith(_CLUSTER_GROUPS)
    ]
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="tune_btb", overrides=fixed, return_hydra_config=True)
            sizes = None  # (nodes, as the user gave them) of each cluster swept
            if all(o.is_choice_sweep() for o in clusters):  # else each job checks its own M
                choices = [
                    [f"{o.key_or_group}={v}" for v in o.sweep_string_iterator()] for o in clusters
                ]
                swept = [
                    compose(config_name="tune_btb", overrides=[*fixed, *combo])
                    for combo in itertools.product(*choices)
                ]
                sizes = [(cluster_size(one), cluster_size_said(one)) for one in swept]
                for one, (n_nodes, _) in zip(swept, sizes, strict=True):
                    if n_nodes < 1:  # no node: the cluster's own error, not M's range 1..0
                        _refuse_nodeless(one, parsed)
    except HydraException:  # the config does not compose: Hydra says why
        return
    sweeper_params = cfg.hydra.sweeper.get("params") or {}
    for name in ("x", "y_tokens", "z", "m"):
        given = [o for o in parsed if o.key_or_group.lstrip("+~") == name and o.input_line]
        if given:
            text = str(given[-1].input_line).partition("=")[2]
            label = f"{name}={text} (from the command line)"
        elif sweeper_params.get(name) is not None:
            text = str(sweeper_params.get(name))
            label = f"hydra.sweeper.params.{name}={text}"
        else:
            continue
        bounds = search_space_range(text)
        if bounds is None:
            continue
        low, high = bounds
        if math.isnan(low):
            raise ValueError(f"{label} lets the sweep draw {name}=nan: not a number")
        drawn = f"{name}={low:g}" if low == high else f"{name} from {low:g} to {high:g}"
        if name == "m" and sizes is not None and (low < 1 or high > min(sizes)[0]):
            n_nodes, said = min(sizes, key=lambda size: size[0])
            which = "the smallest cluster the sweep covers" if clusters else "the cluster"
            raise ValueError(
                f"{label} lets the sweep draw {drawn}, outside 1..{n_nodes} (BTB's M counts "
                f"warm copies: at most the nodes of {which}, {said}); "
                f"e.g. 'm=int(interval(1, {n_nodes}))'"
            )
        if name == "x" and low < 1:
            raise ValueError(f"{label} lets the sweep draw {drawn}: X counts requests, at least 1")
        if name == "z" and not low > 0:
            raise ValueError(f"{label} lets the sweep draw {drawn}: Z is a time window, > 0 s")
        if name == "y_tokens":
            windows = _train_windows(cfg, parsed)
            # a trace's block from the plan its check made: the file is not read again
            block = trace_block if windows is None else max(w.block_tokens for w in windows)
            if block is not None and low < block:
                raise ValueError(
                    f"{label} lets the sweep draw {drawn}, shorter than one {block}-token "
                    "block of the workload (BTB's Y counts a prefix's tokens in whole blocks)"
                )
            longest = None if windows is None else y_shares_no_prefix(int(low), windows)
            if block is not None and longest is not None:
                n = len(windows or ())
                fits = sorted({max(block, longest // k // block * block) for k in (4, 2, 1)})
                hint = (
                    f"e.g. 'y_tokens=choice({','.join(map(str, fits))})'"
                    if longest >= block
                    else "no two of its requests share a whole block"
                )
                print(
                    f"warning: {label} lets the sweep draw {drawn}, longer than any prefix "
                    f"two requests of the {n} train windows share ({longest:,} tokens at "
                    f"most): BTB would copy nothing in any trial, and the trials tie; {hint}",
                    file=sys.stderr,
                )


def _refuse_nodeless(cfg: Any, parsed: list[Any]) -> None:
    """A sweep's cluster of no node (``cluster.nodes=[]``, ``cluster.n_nodes=0``) is
    refused before it starts with :func:`cluster_of`'s error, as a single run's
    (M's range would be 1..0, which no sweeper draws from), saying ``(from the command
    line)`` for an option typed there (no Hydra job runs yet to say where)."""
    try:
        cluster_of(cfg)
    except ValueError as error:
        message = str(error)
        path = message.partition(" ")[0]
        typed = any(o.key_or_group.lstrip("+~") == path and o.input_line for o in parsed)
        if typed and "(from " not in message:
            message += " (from the command line)"
        raise ValueError(message) from None


def _train_windows(cfg: Any, parsed: list[Any]) -> list[Any] | None:
    """The train windows every trial scores, made once before the sweep for its
    checks of Y; None when the workload is swept (each job checks its own), is a
    trace (read once before the sweep, for its check: each trial's line says what
    this would) or its windows cannot be made (a job will say why)."""
    if cfg.workload.name == TRACE_WORKLOAD:
        return None
    if any(o.is_sweep_override() and o.key_or_group.startswith("workload") for o in parsed):
        return None
    with contextlib.suppress(ValueError, OSError):
        return window_pool_of(cfg, "train", cfg.workload.train_pool)
    return None


def _check_trace_before_sweep(parsed: list[Any], fixed: list[str]) -> int | None:
    """A trace file the sweep's jobs would all read (``workload=trace``, not swept;
    ``fixed``: the command line's overrides that are not sweeps): read through once
    before the sweep starts, so that a bad row is one line, not the sweeper's report
    of every job's failure (Optuna's reads each job's error several times). Returns
    its block size (None when no trace was read)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    from experiments.config import check_workload

    if any(o.is_sweep_override() and o.key_or_group.startswith("workload") for o in parsed):
        return None  # each job reads its own
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose(config_name="tune_btb", overrides=fixed)
    except HydraException:  # the config does not compose: Hydra says why
        return None
    if cfg.workload.name != TRACE_WORKLOAD:
        return None
    plan = check_workload(cfg)
    return None if plan is None else int(plan.window_block_tokens)


def check_thresholds(cfg: Any) -> None:
    """This job's X, Y, Z, M; M counts warm copies, so at most the cluster's nodes
    (a sweep's whole search space for M is checked before it starts: :func:`check_sweep`)."""
    n_nodes = cluster_size(cfg)
    if not 1 <= int(cfg.m) <= n_nodes:
        raise ValueError(
            f"m must be in 1..{n_nodes} (the cluster's nodes, {cluster_size_said(cfg)}), "
            f"got {cfg.m}"
        )
    for field, low in (("x", 1), ("y_tokens", 1)):
        if cfg[field] < low:
            raise ValueError(f"{field} must be >= {low}, got {cfg[field]}")
    if not cfg.z > 0:
        raise ValueError(f"z must be > 0 (seconds), got {cfg.z}")


def objective(cfg: DictConfig) -> float:
    from baselines.btb import BTB
    from envs.files import write_json_atomic
    from experiments.evaluation import evaluate_policies

    check_world(cfg)
    check_thresholds(cfg)
    m = int(cfg.m)
    windows = eval_windows(cfg, cfg.workload.train_pool, "train")
    block = max(window.block_tokens for window in windows)
    if int(cfg.y_tokens) < block:  # BTB would say so only once running, as btb.y_tokens
        raise ValueError(
            f"y_tokens must be at least one {block}-token block of the workload, got {cfg.y_tokens}"
        )
    out_dir = run_dir(cfg, "tune_btb", ("objective.json",))
    policy = BTB(x=int(cfg.x), y_tokens=int(cfg.y_tokens), z=float(cfg.z), m=m)
    logger = job_logger(cfg, out_dir, "tune_btb")  # before the work: W&B may refuse
    try:
        runs = evaluate_policies(
            {"btb": policy},
            cluster_of(cfg),
            windows,
            sim_of(cfg),
            seed=int(cfg.seed),
            workload=workload_label(cfg),
            baseline=None,
            trace_window=None,
            setup_name=setup_label(cfg),
        )
        row = runs[0].row
        value = float(row["ttft_mean_s"])
        summary = {
            "x": cfg.x,
            "y_tokens": cfg.y_tokens,
            "z": cfg.z,
            "m": cfg.m,
            "ttft_mean_s": value,
        }
        record = {**summary, "row": row, **workload_record(cfg)}
        write_json_atomic(out_dir / "objective.json", record)
        logger.log_table("objective", [row])
        logger.summary(summary)
    except BaseException as error:  # W&B records the run as failed (or interrupted)
        logger.finish(error)
        raise
    logger.finish()
    copies = int(row.get("warm_copies", 0))
    quiet = ""
    if not copies:  # such trials tie: say why when it is that Y keys no burst
        longest = y_shares_no_prefix(int(cfg.y_tokens), windows)
        quiet = (
            f" (none made: y_tokens={cfg.y_tokens} is longer than any prefix two of these "
            f"windows' requests share, {longest:,} tokens)"
            if longest is not None
            else " (none made: here BTB routes as its router alone does)"
        )
    cap = cap_note("workload.train_pool", cfg.workload.train_pool)
    print(
        f"btb x={cfg.x} y_tokens={cfg.y_tokens} z={cfg.z:.3g} m={cfg.m}: mean TTFT {value:.4f} s "
        f"on {plural(len(windows), 'train window')}{cap}"
        f", {copies:,} warm copies{quiet}"
    )
    print(f"wrote {out_dir / 'objective.json'}")  # as the other commands end: what it wrote
    # (train windows: drawn as workload.params.train_streams says; the sim's stream too)
    basis = measured_on(cfg, [w.name for w in windows], train=True, seed=int(cfg.seed))
    sweeps.note("train mean TTFT (s)", value, True, basis)  # the search's own objective
    sweeps.note("warm copies", copies)
    return value


@hydra.main(version_base="1.3", config_path="../conf", config_name="tune_btb")
def main(cfg: DictConfig) -> float:
    return run_job(objective, cfg)


if __name__ == "__main__":
    raise SystemExit(hydra_entry("experiments.tune_btb", main, precheck=check_sweep))
