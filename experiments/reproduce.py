"""The published BTB table reproduced: six setups x {cache_aware, least_load, btb,
btb_pending, oracle_warm}.

    python -m experiments.reproduce [workload=bursted_synthetic] [causal_kv=both]
        [setups=70b_h100x4,...] [policies=...] [windows=0] [jobs=2] [out_dir=PATH]
        [workload_seeds=20260721,1,2,3] [workload=trace workload.path=FILE ...]
        [workload=plugin workload.factory=MODULE:FUNCTION] [sim.NAME=VALUE ...]

Runs every setup on the test windows of the workload (``bursted_synthetic``:
60 s bursts; ``bursted_synthetic_1s``: 1 s bursts; ``bursted_art``: the mixed
Bursted-ART test set, ART-like windows standing in for ART) under the
reference KV model (``causal_kv=false``: a request's blocks are resident from
admission, as in Infer-Sim, which the published figures depend on) and the
causal one (KV usable only once computed or landed), or one of them
(``causal_kv=true|false``). Prints one table per model: mean TTFT per policy
and of ``floor`` (the per-request lower bound of ``envs/sim/floor.py``);
BTB's (the published rule) mean (and p95) TTFT reduction vs cache_aware; the
published figure and the difference in percentage points, where the BTB
write-up has one, and, under reference KV only (the figures assume it),
whether it is within ``TOLERANCE_PP`` (``ok`` / ``off``, counted on the last
line; a causal row shows ``-`` and is not judged); and the reductions of ``btb_pending`` (btb-gym's
variant) and ``oracle_warm``. A note says when fewer test windows ran than the
published figures are over (``windows=1``), and when a BTB never fired (no prompt
reached its Y: the note ``compare`` prints). Writes ``results.json`` (rows as in
``experiments.compare``, plus the tables) to ``out_dir`` (default
``runs/all__<workload>__reproduce__<seed>__<time>``, or ``...<time>-2``, ... for
runs started in the same second).

The windows are drawn by btb-gym's generator with the published parameters and
seed, not the original windows; a 15-window mean still varies with the draw
(by about 3 points for llama-70b). ``workload_seeds=`` repeats the run on
several draws and reports the mean reduction and its sample standard deviation
(ddof 1).
``sim.NAME=VALUE`` sets a simulator option as ``compare`` takes it
(:mod:`experiments._sim_options`: the stale view, faults, realism options, ...).
A cluster of one's own (``model.*``, ``cluster.*``, ``+cluster.gpus.*``, which
``compare`` takes) is refused in one line: reproduce is, by definition, the
published setups.
"""

from __future__ import annotations

import functools
import signal
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from envs.files import write_json_atomic
from envs.processes import run_in_processes
from envs.sim import SETUPS
from envs.sim.errors import echoed
from envs.workloads.bursted import PUBLISHED_SEED
from envs.workloads.readers import TraceWarning
from envs.workloads.registry import DEFAULT_WORKLOAD
from envs.workloads.trace_file import TRACE_WORKLOAD
from experiments._cli import (
    FROM_COMMAND_LINE,
    TRACE_PATHS,
    UsageError,
    check_policies,
    check_setups,
    check_workload,
    input_paths,
    main_guard,
    parse_args,
    parse_value,
    plugin_defaults,
    refuse_cluster_options,
    resolve_workload,
    sim_config_of,
    sim_defaults,
    stamp_trace,
    trace_defaults,
    workload_file,
    workload_label,
    workload_params,
)
from experiments._io import claim_run_dir, releasing_out_dirs
from experiments._sim_options import HELP as sim_help
from experiments._sim_options import naming_sim_options, split_sim_options, with_sim_options
from experiments.compare import default_out_dir
from experiments.evaluation import FLOOR, count_windows, evaluate_policies, split_windows
from experiments.report import btb_lines, reproduction_tables

DEFAULTS: dict[str, Any] = {
    "setups": list(SETUPS),
    "policies": ["cache_aware", "least_load", "btb", "btb_pending", "oracle_warm"],
    "workload": DEFAULT_WORKLOAD,
    "windows": 0,
    "causal_kv": "both",
    "copy_model": sim_defaults()["copy_model"],
    "seed": 0,
    "workload_seed": PUBLISHED_SEED,
    "workload_seeds": [],
    "jobs": 2,
    "out_dir": "",
    "progress": True,
    **trace_defaults(),
    **plugin_defaults(),
    "overwrite": False,
}

BASELINE = "cache_aware"

# The BTB write-up's results: BTB's TTFT reduction vs cache_aware, percent.
PUBLISHED_SYNTHETIC_MEAN = {
    "70b_h100x4": 62.0,
    "qwen3_8b_h100x4": 41.9,
    "glm45_h100x4": 70.3,
    "glm52_h100x8": 64.0,
    "kimi_k2_h100x8": 58.5,
    "dense1t_b300x4": 11.0,
}
PUBLISHED_MIXED_MEAN = {
    "70b_h100x4": 54.0,
    "qwen3_8b_h100x4": 33.3,
    "glm45_h100x4": 60.0,
    "glm52_h100x8": 53.5,
    "kimi_k2_h100x8": 48.1,
    "dense1t_b300x4": 10.3,
}
PUBLISHED_MIXED_P95 = {
    "70b_h100x4": 0.0,
    "qwen3_8b_h100x4": 81.8,
    "glm45_h100x4": 59.0,
    "glm52_h100x8": 78.0,
    "kimi_k2_h100x8": 79.9,
    "dense1t_b300x4": 7.4,
}
TOLERANCE_PP = 3.0


def published(workload: str) -> tuple[dict[str, float], dict[str, float]]:
    """(mean, p95) published BTB reductions for a workload; empty where the write-up has none."""
    if workload == "bursted_synthetic":
        return PUBLISHED_SYNTHETIC_MEAN, {}
    if workload == "bursted_art":
        return PUBLISHED_MIXED_MEAN, PUBLISHED_MIXED_P95
    return {}, {}


@functools.lru_cache(maxsize=2)
def _windows(
    workload: str, limit: int | None, seed: int, params: tuple[tuple[str, Any], ...]
) -> tuple[Any, ...]:
    """The test windows, generated once per process and shared by its tasks."""
    return tuple(split_windows(workload, limit, seed, params=dict(params)))


def _start_worker() -> None:
    """A worker ignores Ctrl-C (the parent stops the pool) and a trace's warnings,
    which the parent has said when it read the trace's windows."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warnings.simplefilter("ignore", TraceWarning)


def _task(
    workload_seed: int, setup: str, causal_kv: bool, options: dict[str, Any]
) -> list[dict[str, Any]]:
    params = options["workload_params"]
    windows = _windows(
        options["workload"], options["windows"] or None, workload_seed, tuple(params.items())
    )
    config = sim_config_of("experiments.reproduce", causal_kv, options["copy_model"])
    config = with_sim_options(config, options["sim"])
    runs = evaluate_policies(
        options["policies"],
        setup,
        windows,
        config,
        seed=options["seed"],
        workload=workload_label(options["workload"], params),
        baseline=BASELINE,
        trace_window=None,
        floor=True,
    )
    return [{**run.row, "workload_seed": workload_seed} for run in runs]


def _mean_sd(values: Sequence[float]) -> tuple[float, float | None]:
    arr = np.asarray(values, dtype=float)
    return float(arr.mean()), (float(arr.std(ddof=1)) if arr.size > 1 else None)


def build_tables(
    rows: Sequence[dict[str, Any]], workload: str, policies: Sequence[str]
) -> list[dict[str, Any]]:
    """One entry per (KV model, setup): mean TTFTs and reductions (averaged over the
    workload draws when there are several, with their standard deviation) and the
    published figures."""
    mean_pub, p95_pub = published(workload)
    tables = []
    for causal in sorted({row["causal_kv"] for row in rows}):
        for setup in dict.fromkeys(row["setup"] for row in rows):
            mine: dict[str, list[dict[str, Any]]] = {}
            for r in rows:
                if r["setup"] == setup and r["causal_kv"] == causal:
                    mine.setdefault(r["policy"], []).append(r)
            if not mine:
                continue
            present = [p for p in [*policies, FLOOR] if p in mine]
            entry: dict[str, Any] = {
                "setup": setup,
                "causal_kv": causal,
                "workload_seeds": [r.get("workload_seed") for r in mine[present[0]]],
                "ttft_mean_s": {
                    p: _mean_sd([r["ttft_mean_s"] for r in mine[p]])[0] for p in present
                },
            }
            for stat in ("mean", "p95"):
                key = f"ttft_{stat}_reduction_pct"
                per_draw = {p: [r[key] for r in mine[p]] for p in present}
                entry[key] = {p: _mean_sd(v)[0] for p, v in per_draw.items()}
                entry[f"{key}_sd"] = {p: _mean_sd(v)[1] for p, v in per_draw.items()}
                entry[f"{key}_per_draw"] = per_draw
            btb = entry["ttft_mean_reduction_pct"].get("btb")
            if btb is not None and setup in mean_pub:
                entry["published_mean_pct"] = mean_pub[setup]
                entry["diff_mean_pp"] = btb - mean_pub[setup]
                if not causal:  # the published figures assume reference KV
                    entry["within_tolerance"] = abs(entry["diff_mean_pp"]) <= TOLERANCE_PP
            btb_p95 = entry["ttft_p95_reduction_pct"].get("btb")
            if btb_p95 is not None and setup in p95_pub:
                entry["published_p95_pct"] = p95_pub[setup]
                entry["diff_p95_pp"] = btb_p95 - p95_pub[setup]
            tables.append(entry)
    return tables


_SHARES = ("y_unreached_rate", "tuned_rate", "tuned_elsewhere_rate")
"""The per-window shares of a BTB row that :func:`experiments.report.btb_lines` reads."""


def pooled_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per policy, each share of :data:`_SHARES` the mean of its rows' (one a
    setup, KV model and draw, each over as many windows): the share of every window
    the policy ran, so :func:`~experiments.report.btb_lines` says each note once."""
    by: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by.setdefault(str(row["policy"]), []).append(row)
    pooled = []
    for name, mine in by.items():
        row = {"policy": name}
        for key in _SHARES:
            values = [r[key] for r in mine if isinstance(r.get(key), int | float)]
            if values:
                row[key] = float(np.mean(values))
        pooled.append(row)
    return pooled


def causal_kv_modes(text: str) -> list[bool]:
    """``causal_kv=`` as the KV models to run: ``both``, or one bool as every command
    spells it (true/false, yes/no, on/off, 1/0)."""
    if text.lower() == "both":
        return [False, True]
    try:
        return [parse_value(text, True)]
    except ValueError:
        raise UsageError(
            f"experiments.reproduce: causal_kv must be both or a bool (true/false, yes/no, "
            f"on/off, 1/0), got {echoed(text)}{FROM_COMMAND_LINE}"
        ) from None


@releasing_out_dirs
def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv, sim_options = split_sim_options("experiments.reproduce", argv)
    refuse_cluster_options(
        "experiments.reproduce",
        argv,
        "it reproduces the published setups (setups=); compare runs one's own cluster",
    )
    options = parse_args("experiments.reproduce", DEFAULTS, argv, sim_help)
    options["workload"] = resolve_workload("experiments.reproduce", options)
    check_workload("experiments.reproduce", options["workload"])
    options["sim"] = sim_options  # sim.NAME=VALUE (experiments._sim_options)
    if not options["setups"]:
        raise UsageError(
            f"experiments.reproduce: setups is empty{FROM_COMMAND_LINE}; known: {', '.join(SETUPS)}"
        )
    check_setups("experiments.reproduce", options["setups"])
    modes = causal_kv_modes(options["causal_kv"])
    if options["jobs"] < 1:
        raise UsageError(
            f"experiments.reproduce: jobs must be >= 1, got "
            f"{echoed(options['jobs'], quoted=False)}{FROM_COMMAND_LINE}"
        )
    policies = list(options["policies"])
    if BASELINE not in policies:
        policies.insert(0, BASELINE)
    options["policies"] = policies
    # what each task would find out only once the runs have started
    check_policies("experiments.reproduce", policies)
    if options["windows"] < 0:
        raise UsageError(
            f"experiments.reproduce: windows must be >= 0 (0 = all test windows), "
            f"got {echoed(options['windows'], quoted=False)}{FROM_COMMAND_LINE}"
        )
    with naming_sim_options(sim_options):
        checked = with_sim_options(
            sim_config_of("experiments.reproduce", True, options["copy_model"]), sim_options
        )
        for setup in options["setups"]:
            checked.check_cluster(SETUPS[setup][2])  # before any window runs
    try:
        seeds = [int(x) for x in options["workload_seeds"]] or [options["workload_seed"]]
    except ValueError:
        raise UsageError(
            f"experiments.reproduce: workload_seeds={echoed(','.join(options['workload_seeds']))} "
            f"must be integers >= 0, comma-separated{FROM_COMMAND_LINE}"
        ) from None
    seeds_key = "workload_seeds" if options["workload_seeds"] else "workload_seed"
    for key, values in (("seed", [options["seed"]]), (seeds_key, seeds)):
        if any(value < 0 for value in values):
            raise UsageError(
                f"experiments.reproduce: {key} must be >= 0, got "
                f"{echoed(min(values), quoted=False)}{FROM_COMMAND_LINE}"
            )
    models = [SETUPS[name][0] for name in options["setups"] if name in SETUPS]
    options["workload_params"] = workload_params("experiments.reproduce", options, models)
    for seed in seeds:
        count_windows(
            options["workload"], options["windows"] or None, seed, options["workload_params"]
        )
    if options["workload"] == TRACE_WORKLOAD:  # its warnings said here, once, not by each worker
        params = tuple(options["workload_params"].items())  # (every window run: kept for jobs=1)
        _windows(options["workload"], options["windows"] or None, seeds[0], params)
    tasks = [
        (seed, setup, causal) for seed in seeds for causal in modes for setup in options["setups"]
    ]
    out_dir = claim_run_dir(
        options["out_dir"],
        default_out_dir(
            {**options, "setup": "all"},
            "reproduce",
            workload_label(options["workload"], options["workload_params"]),
        ),
        "experiments.reproduce: out_dir",
        ("results.json",),
        options["overwrite"],
        input_paths(options.get),
    )
    stamp_trace(options["workload"], options["workload_params"])
    bar = None
    if options["progress"]:
        from tqdm import tqdm

        bar = tqdm(total=len(tasks), desc="reproduce", unit="setup")
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    try:
        if options["jobs"] == 1:
            for seed, setup, causal in tasks:
                rows += _task(seed, setup, causal, options)
                if bar is not None:
                    bar.update(1)
        else:
            # workers ignore Ctrl-C (else each would take the next task and finish it);
            # the parent's interrupt, or any error, ends them and cancels the rest. A
            # worker that dies mid-task breaks the pool: an error, never a hang.
            parts = run_in_processes(
                _task,
                [(*task, options) for task in tasks],
                min(options["jobs"], len(tasks)),
                initializer=_start_worker,
                on_result=None if bar is None else lambda _: bar.update(1),
            )
            for part in parts:
                rows += part
    finally:
        if bar is not None:
            bar.close()
    tables = build_tables(rows, options["workload"], policies)
    shown = workload_label(options["workload"], options["workload_params"])
    print(f"{shown} · test windows: {rows[0]['windows'] if rows else 0}")
    ran = rows[0]["windows"] if rows else 0
    total = None
    if published(options["workload"])[0]:  # the windows the published figures are over
        total = count_windows(options["workload"], None, PUBLISHED_SEED, warn=False)
    notes = btb_lines(pooled_rows(rows))
    print(reproduction_tables(tables, [*policies, FLOOR], TOLERANCE_PP, ran, total, notes))
    result = {
        "rows": rows,
        "config": {
            **options,
            "wall_s": time.perf_counter() - started,
            "out_dir": str(out_dir),
            **workload_file(options["workload"], options["workload_params"]),
        },
        "tables": tables,
    }
    from experiments.provenance import provenance

    path = write_json_atomic(out_dir / "results.json", {**result, "provenance": provenance()})
    print(f"wrote {path}")
    return result


if __name__ == "__main__":
    raise SystemExit(main_guard(main, TRACE_PATHS))
