"""Tune BTB's thresholds for every setup x workload family: the ``btb_tuned`` table.

    python -m experiments.tune_btb_table [setups=70b_h100x4,...] [workloads=...]
        [trials=24] [seed=0] [workload_seed=20260721] [train_streams=shared]
        [out_dir=PATH] [overwrite=false]

For each cell, an Optuna TPE search (seeded; the published constants are its
first trial) over X (1-8 arrivals), Z (0.1-8 s, log scale), M (1 to the
cluster's nodes) and the prefix length Y in tokens (4,096, 16,384 or 65,536)
minimises BTB's mean TTFT over the cell's *train* windows (causal KV, the
comparison run's random streams). Validation and test windows are never seen.
``train_streams`` (default ``shared``, the layout the shipped table was tuned on:
every window drawn from the workload's seed) is the workload parameter of that
name (docs/workloads.md): ``own`` tunes on train windows drawn from a seed of their
own. A cell is tuned on its own family's train windows alone, so either way it
shares no window with that family's test windows.
The winners go to one file, ``btb_tuned.json`` in ``out_dir`` (default
``baselines/``: the shipped table that the ``btb_tuned`` policy reads), written
atomically. An existing table is never replaced silently: without ``out_dir`` the
shipped ``baselines/btb_tuned.json`` is refused unless ``overwrite=true`` (which
regenerating it needs), and an ``out_dir`` that holds anything already is refused
unless ``overwrite=true`` (the table is then replaced as it lands, so a failed
run keeps the old one). About a minute for the 15 default cells on 2 cores.
A cluster of one's own (``model.*``, ``cluster.*``) is refused in one line: the
table is kept by published setup (``tune_btb`` tunes BTB on one's own cluster).
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path
from typing import Any

from baselines.btb import BTB
from baselines.btb_tuned import TABLE_PATH, btb_settings
from envs.files import write_json_atomic
from envs.sim import setup_cluster
from envs.sim.errors import echoed
from envs.workloads.bursted import PUBLISHED_SEED
from envs.workloads.plugins import PLUGIN_WORKLOAD, is_plugin
from experiments._cli import (
    FROM_COMMAND_LINE,
    LEGACY_SEED_MAX,
    UsageError,
    check_setups,
    check_workload,
    main_guard,
    parse_args,
    refuse_cluster_options,
    sim_config_of,
    sim_defaults,
)
from experiments._io import check_writable_dir, claim_out_dir, releasing_out_dirs
from experiments.evaluation import evaluate_policies

COMMAND = "experiments.tune_btb_table"
FAMILIES = ["bursted_synthetic", "bursted_synthetic_1s", "rising_load", "mixed", "art_like"]
Y_TOKENS = (4096, 16384, 65536)
PUBLISHED = {"x": 2, "z_s": 1.0, "m": 4, "y_tokens": 65536}
DEFAULTS: dict[str, Any] = {
    "setups": ["70b_h100x4", "qwen3_8b_h100x4", "glm45_h100x4"],
    "workloads": FAMILIES,
    "trials": 24,
    "seed": 0,
    "workload_seed": PUBLISHED_SEED,
    "train_streams": "shared",
    **sim_defaults(),
    "out_dir": "",
    "overwrite": False,
}


def train_ttft_s(cell: dict[str, Any], setup: str, windows: list[Any], options: dict) -> float:
    """BTB's mean TTFT (s) with a cell's thresholds over ``windows``."""
    block_tokens = windows[0].block_tokens
    policy = BTB(**btb_settings(cell, block_tokens))
    runs = evaluate_policies(
        {"btb": policy},
        setup,
        windows,
        sim_config_of(COMMAND, options["causal_kv"], options["copy_model"]),
        seed=options["seed"],
        baseline=None,
        trace_window=None,
    )
    return float(runs[0].row["ttft_mean_s"])


def tune_cell(setup: str, workload: str, options: dict[str, Any]) -> dict[str, Any]:
    """The best thresholds of one cell and their train-window mean TTFT."""
    import optuna

    from envs.workloads.registry import windows as registry_windows

    streams = options["train_streams"]
    pool = list(
        registry_windows(workload, "train", seed=options["workload_seed"], train_streams=streams)
    )
    n_nodes = len(setup_cluster(setup).nodes)

    def objective(trial: optuna.Trial) -> float:
        cell = {
            "x": trial.suggest_int("x", 1, 8),
            "z_s": trial.suggest_float("z_s", 0.1, 8.0, log=True),
            "m": trial.suggest_int("m", 1, n_nodes),
            "y_tokens": trial.suggest_categorical("y_tokens", Y_TOKENS),
        }
        return train_ttft_s(cell, setup, pool, options)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    sampler = optuna.samplers.TPESampler(seed=options["seed"])
    study = optuna.create_study(direction="minimize", sampler=sampler)
    study.enqueue_trial({**PUBLISHED, "m": min(PUBLISHED["m"], n_nodes)})
    study.optimize(objective, n_trials=options["trials"])
    published = study.trials[0].value
    return {
        **study.best_params,
        "train_ttft_mean_s": study.best_value,
        "published_train_ttft_mean_s": published,
        "train_windows": [w.name for w in pool],
        **({"train_streams": streams} if streams != "shared" else {}),
    }


def check_options(options: dict[str, Any]) -> None:
    from envs.workloads.registry import MAX_WINDOWS, TRAIN_STREAMS
    from envs.workloads.trace_file import TRACE_WORKLOAD

    check_setups(COMMAND, options["setups"], "setups")
    for name in options["workloads"]:
        if name == PLUGIN_WORKLOAD or is_plugin(name):  # its cell would never be read
            raise UsageError(
                f"{COMMAND}: workloads: {echoed(name)} is a workload of one's own; the btb_tuned "
                "table holds registered workloads only (btb_tuned reads a cell for a window "
                "at its workload's registered parameters): tune its thresholds with "
                "python -m experiments.tune_btb -m workload=plugin "
                "workload.factory=MODULE:FUNCTION"
            )
        if name == TRACE_WORKLOAD:  # (check_workload leaves it to the commands that read it)
            raise UsageError(
                f"{COMMAND}: workloads: {echoed(name)} is a trace file's workload; the btb_tuned "
                "table holds registered workloads only (btb_tuned reads a cell for a window "
                "at its workload's registered parameters): tune its thresholds with "
                "python -m experiments.tune_btb -m workload=trace workload.path=FILE"
            )
        check_workload(COMMAND, name, "workloads")
    if options["train_streams"] not in TRAIN_STREAMS:
        raise UsageError(
            f"{COMMAND}: train_streams must be one of {', '.join(TRAIN_STREAMS)}, got "
            f"{echoed(options['train_streams'])}{FROM_COMMAND_LINE}"
        )
    for key in ("seed", "workload_seed"):
        if not 0 <= options[key] <= LEGACY_SEED_MAX:
            raise UsageError(
                f"{COMMAND}: {key} must be between 0 and 2**32 - 1 (a numpy seed), "
                f"got {echoed(options[key], quoted=False)}{FROM_COMMAND_LINE}"
            )
    if not 1 <= options["trials"] <= MAX_WINDOWS:  # (a typo's 10**12 ran for ever)
        raise UsageError(
            f"{COMMAND}: trials must be between 1 and {MAX_WINDOWS:,}, got "
            f"{echoed(options['trials'], quoted=False)}"
            f"{FROM_COMMAND_LINE}"
        )
    if not options["setups"] or not options["workloads"]:
        raise UsageError(
            f"{COMMAND}: setups= and workloads= must each name at least one{FROM_COMMAND_LINE}"
        )
    sim_config_of(COMMAND, options["causal_kv"], options["copy_model"])


def claim_output(options: dict[str, Any]) -> Path:
    """Where the table goes, checked before any search: an ``out_dir`` is claimed as
    every command claims its folder (``_io.claim_out_dir``: refused if it holds
    anything, unless ``overwrite``; nothing cleared, the table is replaced as it
    lands); without one, the shipped table is refused unless ``overwrite``."""
    if options["out_dir"]:
        claim_out_dir(options["out_dir"], f"{COMMAND}: out_dir", (), options["overwrite"])
        return Path(options["out_dir"]) / TABLE_PATH.name
    check_writable_dir(TABLE_PATH.parent, f"{COMMAND}: out_dir")
    if TABLE_PATH.exists() and not options["overwrite"]:
        raise UsageError(
            f"{COMMAND}: {TABLE_PATH} exists (the shipped table; out_dir= not given); "
            "refusing to overwrite it (overwrite=true replaces it; or choose an out_dir)"
        )
    return TABLE_PATH


@releasing_out_dirs
def main(argv: list[str] | None = None) -> dict[str, Any]:
    refuse_cluster_options(
        COMMAND,
        argv,
        "the btb_tuned table is kept by published setup (setups=); tune_btb tunes BTB "
        "on one's own cluster",
    )
    options = parse_args(COMMAND, DEFAULTS, argv)
    check_options(options)
    out = claim_output(options)
    cells: dict[str, dict[str, Any]] = {}
    start = time.perf_counter()
    for setup in options["setups"]:
        for workload in options["workloads"]:
            cell = tune_cell(setup, workload, options)
            cells.setdefault(setup, {})[workload] = cell
            print(
                f"{setup:16s} {workload:22s} x={cell['x']} z={cell['z_s']:.3g}s m={cell['m']} "
                f"y={cell['y_tokens']} tokens: train mean TTFT {cell['train_ttft_mean_s']:.4f} s "
                f"(published constants {cell['published_train_ttft_mean_s']:.4f} s)",
                flush=True,
            )
    table = {
        "about": "BTB thresholds per setup and workload, tuned on train windows only "
        "(objective: mean TTFT); read by the btb_tuned policy",
        "command": " ".join(
            [f"python -m {COMMAND}", *(argv if argv is not None else sys.argv[1:])]
        ),
        "search": {"x": [1, 8], "z_s": [0.1, 8.0], "m": [1, "n_nodes"], "y_tokens": Y_TOKENS},
        "options": {k: v for k, v in options.items() if k not in ("out_dir", "overwrite")},
        "cells": cells,
    }
    replaced = out.exists()
    write_json_atomic(out, table)
    print(
        f"wrote {out}{' (replacing the previous table)' if replaced else ''} in "
        f"{time.perf_counter() - start:.0f} s"
    )
    return table


if __name__ == "__main__":
    raise SystemExit(main_guard(main))
