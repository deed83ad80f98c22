"""Throughput benchmark of the real paths: simulator, trace reader, agents, envs, memory.

    python -m experiments.bench [out_dir=PATH] [repeats=3]
        [workloads=bursted_synthetic,conversation_like]
        [policies=cache_aware,btb,dynamo,oracle_warm] [agents=zoo]
        [envs=btb/Route-v0,btb/RouteWarm-v0,btb/Thresholds-v0]
        [learn=btb/Route-v0,btb/RouteWarm-v0,btb/Thresholds-v0] [learn_steps=8192]
        [read_rows=12000] [replay_windows=15] [overwrite=false]
        [workload=trace workload.path=FILE ...]
        [workload=plugin workload.factory=MODULE:FUNCTION]

Each measurement runs in a fresh process, so its peak RSS is its own; llama-3.3-70b
on four 4xH100 nodes (``setup=``, a published setup; a cluster of one's own,
``model.*`` or ``cluster.*`` as ``compare`` takes them, is refused in one line: a
benchmark measures the code's speed, not a cluster's), causal KV. Throughput is
the best of ``repeats`` runs (the least disturbed by other load on the machine); making
windows and files is never timed.

- ``machine``: a yardstick for the machine's speed at the time of the run: the
  best of ``repeats`` timings of a pure-Python loop of 10 million additions run
  as top-level code (``python_loop_s``). Runs on a shared machine, or on two
  machines, compare by it: where the loop took half as long again, expect the
  other figures about a third lower.
- ``sim``: simulated requests/s of each policy on one window of each workload
  (``requests_per_s`` by the wall clock, ``cpu_requests_per_s`` by the measuring
  process's CPU seconds, the figure to read on a machine other jobs share; they
  count every thread of the process, so numpy's BLAS threads can put it below the
  wall-clock figure)
  (``bursted_synthetic``: the Bursted-ART synthetic window ``window``, 4,120
  requests; another registered workload: its ``window``-th test window, for
  ``conversation_like`` about 12,000 requests).
- ``read``: rows/s of the Mooncake reader on a ``read_rows``-row JSONL of
  conversation-like traffic that bench writes to a temporary folder (0: skip), and
  rows per CPU second of the reading process (``cpu_rows_per_s``).
- ``agents``: decisions/s of each agent (``zoo``: those in agents/zoo/) in
  evaluation on the first workload's window; a decision is one forward pass. An
  agent that runs windows in lockstep (``agents.lockstep``) runs as many
  simulators of the window at once as ``evaluate`` runs test windows
  (``lockstep_windows``); ``decisions_per_s_alone`` is one window at a time.
- ``env``: steps/s of each environment over an episode of random actions
  (pre-drawn) on the first workload's window (``cpu_steps_per_s`` per CPU second),
  and the requests/s that implies.
  A Thresholds-v0 step is a whole decision epoch (about 13 requests on the
  Bursted window).
- ``learn``: env steps/s of learning (rollout collection and gradient updates)
  in each of the ``learn`` envs, with the algorithm ``train`` uses there (PPO,
  MaskablePPO on RouteWarm-v0) and the default ``conf/env`` and ``conf/agent``
  settings (``n_envs``, ``n_steps``, ``batch_size``, ...) and ``train``'s torch
  threads (``update_threads``: two in the gradient updates where two CPUs are
  usable; one in the rollouts), on the first workload's window: the best of
  ``repeats`` calls of ``learn(learn_steps)`` on one model, with the rollout
  and update seconds.
- ``replay``: peak RSS of replaying ``replay_windows`` test windows of the first
  workload with cache_aware, one window at a time as ``compare`` does (0: skip).
- ``breakdown``: where the wall time of one extra, instrumented run of each
  ``sim`` and ``agents`` row went, plus the ``read`` row's best read: reading,
  simulating, policy decisions (inside ``decide``, including the simulator calls
  a policy makes) and agent inference; each row carries its own parts too.
  ``peak_rss_mb``: the replay's, else the largest row's.

``workload=NAME`` measures that one workload instead of ``workloads`` (a
workload of one's own: ``workload=plugin workload.factory=MODULE:FUNCTION``, or
``plugin:MODULE:FUNCTION`` in ``workloads``; ``bench.json``'s ``workload_plugins``
records each one's module and sha256);
``workload=trace workload.path=FILE`` (and the other ``workload.*`` options, as in
every command) measures the ``window``-th window of a trace file, all splits
counted (reading it is not timed).

``core`` says which simulator core ran (its event loop, nodes and prefix caches,
and the block chainer): ``compiled`` or ``python``
(the reference; ``BTB_GYM_PURE_PYTHON=1`` forces it, see ``envs.sim.native``);
``encoder_core`` the same of the observation's node rows (``envs.encoder``).

Prints tables and writes ``bench.json`` (atomically) to ``out_dir`` when given; an
``out_dir`` holding a bench.json already is refused unless ``overwrite=true``.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.encoder import ENCODER_CORE
from envs.files import write_json_atomic
from envs.sim import native
from envs.sim.config import DEFAULT_SETUP
from envs.sim.errors import echoed, plural
from envs.workloads.plugins import PLUGIN_WORKLOAD, is_plugin
from experiments import _bench, _bench_learn
from experiments._bench import PARTS
from experiments._cli import (
    FROM_COMMAND_LINE,
    PLUGIN_OPTION,
    TRACE_PATHS,
    UsageError,
    check_policies,
    check_setups,
    check_workload,
    input_paths,
    main_guard,
    parse_args,
    plugin_defaults,
    refuse_cluster_options,
    resolve_workload,
    sim_config_of,
    sim_defaults,
    stamp_trace,
    trace_defaults,
    workload_file,
    workload_params,
)
from experiments._io import claim_out_dir, releasing_out_dirs
from experiments.report import aligned_table

MAX_READ_ROWS = 10_000_000
"""The most rows the reader's benchmark writes and reads (``read_rows``)."""
DEFAULTS: dict[str, Any] = {
    "out_dir": "",
    "repeats": 3,
    "workloads": ["bursted_synthetic", "conversation_like"],
    "policies": ["cache_aware", "btb", "dynamo", "oracle_warm"],
    "agents": ["zoo"],
    "setup": DEFAULT_SETUP,
    "window": 0,
    **sim_defaults(),
    "envs": ["btb/Route-v0", "btb/RouteWarm-v0", "btb/Thresholds-v0"],
    "learn": ["btb/Route-v0", "btb/RouteWarm-v0", "btb/Thresholds-v0"],
    "learn_steps": 8192,
    "read_rows": 12_000,
    "replay_windows": 15,
    "workload": "",
    **trace_defaults(),
    **plugin_defaults(),
    "overwrite": False,
}
COMMAND = "experiments.bench"


def _in_fresh_process(fn: Any, *args: Any) -> Any:
    ctx = mp.get_context("spawn")
    with ctx.Pool(1, initializer=_start_worker) as pool:
        return pool.apply(fn, args)


def _start_worker() -> None:
    """A fresh process's start: it ignores Ctrl-C, which the command's own process
    answers by stopping the pool (the worker printed its traceback, headed
    ``Process SpawnPoolWorker-1:``, before the command's ``interrupted``), and the
    trace's warnings, said by the command's own process once (a worker said them
    again, as a raw Python warning)."""
    from envs.workloads.readers import TraceWarning

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warnings.filterwarnings("ignore", category=TraceWarning)


def _check(options: dict[str, Any]) -> list[str]:
    """Fail before any run starts on options that cannot work; the agent folders."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the environments)
    from baselines import make_policy
    from envs.workloads.registry import describe
    from envs.workloads.trace_file import TRACE_WORKLOAD
    from experiments.compare import resolve_agents

    for name in ("repeats", "read_rows", "replay_windows", "learn_steps"):
        minimum = 1 if name in ("repeats", "learn_steps") else 0
        if options[name] < minimum:  # parse_args has made it an int
            raise UsageError(
                f"{COMMAND}: {name} must be an integer >= {minimum}, got {echoed(options[name])}"
                f"{FROM_COMMAND_LINE}"
            )
    from agents.algorithms import MAX_ROLLOUT
    from envs.workloads.registry import MAX_WINDOWS

    ceilings = {
        "read_rows": MAX_READ_ROWS,  # the rows are written to a file first
        "repeats": MAX_WINDOWS,  # (a typo's 10**12 ran for ever)
        "learn_steps": MAX_ROLLOUT,  # (a rollout's ceiling)
    }
    for name, most in ceilings.items():
        if options[name] > most:
            raise UsageError(
                f"{COMMAND}: {name} must be at most {most:,}, got {echoed(options[name])}"
                f"{FROM_COMMAND_LINE}"
            )
    if options["window"] < 0:
        raise UsageError(
            f"{COMMAND}: window must be >= 0 (a synthetic window's index, or a test "
            f"window's), got {echoed(options['window'], quoted=False)}{FROM_COMMAND_LINE}"
        )
    if options["workload"] or options[PLUGIN_OPTION]:  # one, spelled as in the other commands
        options["workload"] = resolve_workload(COMMAND, options)
        options["workloads"] = [options["workload"]]
    if not options["workloads"]:
        raise UsageError(f"{COMMAND}: workloads= names no workload")
    typed = "" if options["workload"] else "workloads"  # (the option the names came from)
    for name in options["workloads"]:
        if not (is_plugin(name) or name == PLUGIN_WORKLOAD):
            check_workload(COMMAND, name, typed)  # (a registered name, or trace)
            continue
        try:  # (loaded: a module that fails names its line; "plugin" needs a factory)
            describe(name)
        except ValueError as error:
            raise UsageError(f"{COMMAND}: workloads: {error}{FROM_COMMAND_LINE}") from None
    from envs.sim import SETUPS

    check_setups(COMMAND, [options["setup"]])

    traced = {
        **options,
        "workload": TRACE_WORKLOAD if TRACE_WORKLOAD in options["workloads"] else "",
    }
    options["workload_params"] = workload_params(COMMAND, traced, [SETUPS[options["setup"]][0]])
    if options["out_dir"]:
        claim_out_dir(
            options["out_dir"],
            f"{COMMAND}: out_dir",
            ("bench.json",),
            options["overwrite"],
            inputs=input_paths(options.get),
        )
    stamp_trace(  # a trace's stamp as the run starts (and no earlier run's)
        TRACE_WORKLOAD if options["workload_params"] else "", options["workload_params"]
    )
    sim_config_of(COMMAND, options["causal_kv"], options["copy_model"])
    for name in options["policies"]:
        check_policies(COMMAND, [name])  # (each before it is made, in turn)
        make_policy(name)
    known = sorted(k for k in gym.registry if k.startswith("btb/"))
    for env_id in options["envs"]:
        if env_id not in known:
            raise UsageError(
                f"{COMMAND}: unknown env {echoed(env_id)} in envs (known: {', '.join(known)})"
            )
    for env_id in options["learn"]:
        if env_id not in _bench_learn.LEARN_AGENTS:
            raise UsageError(
                f"{COMMAND}: unknown env {echoed(env_id)} in learn "
                f"(known: {', '.join(_bench_learn.LEARN_AGENTS)})"
            )
    if options["replay_windows"]:  # more than the split has: said, as compare says it
        from experiments.evaluation import count_windows

        count_windows(
            options["workloads"][0],
            options["replay_windows"],
            params=options["workload_params"],
            option="replay_windows",
        )
    return [str(folder) for folder in resolve_agents(options["agents"])]


RUN_PARTS = ("simulate_s", "policy_s", "inference_s")
"""The parts of a simulated run (a row's share columns)."""


def _shares(row: dict[str, Any]) -> list[str]:
    """The row's wall time split into RUN_PARTS, in per cent."""
    total = sum(row.get(part, 0.0) for part in RUN_PARTS)
    return [f"{100.0 * row.get(part, 0.0) / total:.1f}%" if total else "-" for part in RUN_PARTS]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], text_columns: int) -> None:
    """Print one of bench's tables: the first ``text_columns`` left-aligned, the
    numbers right-aligned."""
    right = range(text_columns, len(header))
    print("\n".join(aligned_table(header, rows, right=right)))


def _print_tables(result: dict[str, Any]) -> None:
    parts = ("simulate", "policy", "inference")
    machine = result["machine"]
    print(
        f"machine: a pure-Python loop of {machine['loop_additions']:,} additions "
        f"took {machine['python_loop_s']:.2f} s (best of the repeats)"
    )
    print(f"simulator core: {result['core']} (envs/sim/native.py)")
    print(f"observation encoder: {result['encoder_core']} (envs/encoder.py)")
    _table(
        ("workload", "policy", "requests", "requests/s", "per CPU-s", "RSS MB", *parts),
        [
            (
                row["workload"],
                row["policy"],
                str(row["requests"]),
                f"{row['requests_per_s']:,.0f}",
                f"{row['cpu_requests_per_s']:,.0f}",
                f"{row['peak_rss_mb']:.1f}",
                *_shares(row),
            )
            for row in result["sim"]
        ],
        text_columns=2,
    )
    for row in result.get("read", []):
        print(
            f"\nread {row['format']}: {row['rows']} rows ({row['file_mb']:.1f} MB), "
            f"{row['rows_per_s']:,.0f} rows/s ({row['cpu_rows_per_s']:,.0f} a CPU second)"
        )
    if result.get("agents"):
        print()
        _table(
            (
                "agent",
                "env",
                "decisions",
                "decisions/s",
                "windows",
                "alone/s",
                "requests/s",
                *parts,
            ),
            [
                (
                    row["name"],
                    row["env"],
                    str(row["decisions"]),
                    f"{row['decisions_per_s']:,.0f}",
                    str(row["lockstep_windows"]),
                    f"{row['decisions_per_s_alone']:,.0f}",
                    f"{row['requests_per_s']:,.0f}",
                    *_shares(row),
                )
                for row in result["agents"]
            ],
            text_columns=2,
        )
    if result.get("env"):
        print()
        _table(
            ("env", "steps/episode", "steps/s", "per CPU-s", "requests/s"),
            [
                (
                    row["env_id"],
                    str(row["steps"]),
                    f"{row['steps_per_s']:,.0f}",
                    f"{row['cpu_steps_per_s']:,.0f}",
                    f"{row['requests_per_s']:,.0f}",
                )
                for row in result["env"]
            ],
            text_columns=1,
        )
    if result.get("learn"):
        print()
        rows = []
        for row in result["learn"]:
            total = max(row["rollout_s"] + row["update_s"], 1e-9)
            rows.append(
                (
                    row["env"],
                    row["algo"],
                    str(row["n_envs"]),
                    str(row.get("update_threads", 1)),
                    str(row["steps"]),
                    f"{row['steps_per_s']:,.0f}",
                    f"{100 * row['rollout_s'] / total:.0f}%",
                    f"{100 * row['update_s'] / total:.0f}%",
                    f"{row['steps'] / max(row['cpu_s'], 1e-9):,.0f}",
                )
            )
        _table(
            (
                "learn",
                "algo",
                "n_envs",
                "update threads",
                "steps",
                "steps/s",
                "rollout",
                "update",
                "steps/cpu-s",
            ),
            rows,
            text_columns=2,
        )
    if "replay" in result:
        row = result["replay"]
        print(
            f"\nreplay of {plural(row['windows'], row['workload'] + ' test window')} "
            f"({row['requests']} "
            f"requests, {row['policy']}): peak RSS {row['peak_rss_mb']:.1f} MB"
        )
    total = result["breakdown"]
    print(
        "\nwall time of the instrumented runs: "
        + ", ".join(f"{part[:-2]} {total[part]:.2f} s" for part in PARTS)
        + f" (total {total['total_s']:.2f} s)"
    )


@releasing_out_dirs
def main(argv: list[str] | None = None) -> dict[str, Any]:
    refuse_cluster_options(
        COMMAND, argv, "it measures the code's speed on one published setup (setup=)"
    )
    options = parse_args(COMMAND, DEFAULTS, argv)
    agent_folders = _check(options)
    # made once, here (not timed), and handed to each measuring process
    params = options["workload_params"]
    windows = {
        name: _bench.bench_window(name, options["window"], params) for name in options["workloads"]
    }
    first = windows[options["workloads"][0]]
    result: dict[str, Any] = {
        # what was measured: every option as parsed (the defaults included)
        "options": {key: options[key] for key in DEFAULTS if key != "overwrite"},
        "machine": _in_fresh_process(_bench.machine_yardstick, options),
        "core": native.CORE,  # the compiled simulator core or the pure-Python reference
        "encoder_core": ENCODER_CORE,  # the compiled observation rows or the Python ones
        "sim": [
            _in_fresh_process(_bench.bench_sim, name, window, policy, options)
            for name, window in windows.items()
            for policy in options["policies"]
        ],
    }
    if options["read_rows"]:
        result["read"] = [_in_fresh_process(_bench.bench_read, options)]
    if agent_folders:
        result["agents"] = [
            _in_fresh_process(_bench.bench_agent, folder, first, options)
            for folder in agent_folders
        ]
    if options["envs"]:
        result["env"] = [
            _in_fresh_process(_bench.bench_env, env_id, first, options)
            for env_id in options["envs"]
        ]
    if options["learn"]:
        result["learn"] = [
            _in_fresh_process(_bench_learn.bench_learn, env_id, first, options)
            for env_id in options["learn"]
        ]
    if options["replay_windows"]:
        result["replay"] = _in_fresh_process(_bench.bench_replay, options)
    timed = [row for key in ("sim", "read", "agents") for row in result.get(key, [])]
    breakdown = {part: sum(row.get(part, 0.0) for row in timed) for part in PARTS}
    result["breakdown"] = {**breakdown, "total_s": sum(breakdown.values())}
    peaks = [row["peak_rss_mb"] for row in result["sim"] + result.get("agents", [])]
    result["peak_rss_mb"] = (
        result["replay"]["peak_rss_mb"] if "replay" in result else max(peaks, default=0.0)
    )
    if params:
        result.update(workload_file("trace", params))
    plugins = {name: workload_file(name, {}) for name in options["workloads"] if is_plugin(name)}
    if plugins:  # the code that made each workload of one's own's rows
        result["workload_plugins"] = {k: v["workload_plugin"] for k, v in plugins.items()}
    from experiments.provenance import provenance

    result["provenance"] = provenance()
    _print_tables(result)
    if options["out_dir"]:
        path = write_json_atomic(Path(options["out_dir"]) / "bench.json", result)
        print(f"wrote {path}")
    return result


if __name__ == "__main__":
    raise SystemExit(main_guard(main, TRACE_PATHS))
