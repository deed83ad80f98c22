"""bench: the shape of bench.json, its helpers and its bad-option errors (no timings
are checked: figures only have to be positive and finite)."""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from baselines import make_policy
from envs.sim import SimConfig, Simulator, setup_cluster
from envs.workloads import Request, Workload, read_mooncake
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window
from experiments import bench
from experiments._bench import PARTS, TimedPolicy, mooncake_rows
from experiments._bench_learn import default_configs
from experiments._cli import UsageError, main_guard

ZOO = Path(__file__).resolve().parents[2] / "agents" / "zoo"


def _positive(row: dict[str, Any], *keys: str) -> None:
    for key in keys:
        assert math.isfinite(row[key]) and row[key] > 0, (key, row[key])


def test_bench_writes_every_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # each part runs here, not in a fresh process (what the timings need, not the shape)
    monkeypatch.setattr(bench, "_in_fresh_process", lambda fn, *args: fn(*args))
    result = bench.main(
        [
            "repeats=1",
            "workloads=bursted_synthetic,agent_fanout",  # the second one small
            "policies=least_load",
            f"agents={ZOO / 'ppo_thresholds'}",
            "envs=btb/Route-v0,btb/Thresholds-v0",
            "learn=btb/RouteWarm-v0",
            "learn_steps=1",  # one rollout of the default n_steps x n_envs
            "read_rows=300",
            "replay_windows=1",
            f"out_dir={tmp_path}",
        ]
    )
    assert json.loads((tmp_path / "bench.json").read_text()) == result
    options = result["options"]  # what was measured, the defaults included
    assert options["workloads"] == ["bursted_synthetic", "agent_fanout"]
    assert options["learn_steps"] == 1 and options["setup"] == "70b_h100x4"
    assert options["out_dir"] == str(tmp_path) and "overwrite" not in options
    assert set(options) == set(bench.DEFAULTS) - {"overwrite"}
    machine = result["machine"]
    assert machine["loop_additions"] == 10_000_000
    _positive(machine, "python_loop_s")
    bursted, second = result["sim"]
    assert (bursted["workload"], bursted["policy"], bursted["requests"]) == (
        "bursted_synthetic",
        "least_load",
        4120,
    )
    assert (second["workload"], second["requests"]) == ("agent_fanout", 1560)
    for row in result["sim"]:
        _positive(row, "requests_per_s", "cpu_requests_per_s", "peak_rss_mb", "simulate_s")
        _positive(row, "policy_s")
    (read,) = result["read"]
    assert read["format"] == "mooncake" and read["rows"] == 300
    _positive(read, "rows_per_s", "cpu_rows_per_s", "read_s", "file_mb")
    (agent,) = result["agents"]
    assert agent["name"] == "ppo_thresholds" and agent["env"] == "thresholds"
    _positive(agent, "decisions_per_s", "requests_per_s", "simulate_s", "policy_s", "inference_s")
    # a threshold controller decides once an epoch: it never runs windows in lockstep
    assert agent["lockstep_windows"] == 1
    assert agent["decisions_per_s_alone"] == agent["decisions_per_s"]
    route, thresholds = result["env"]
    assert route["env_id"] == "btb/Route-v0"
    assert route["steps"] == route["requests"] == 4120  # one step per arrival
    assert route["requests_per_s"] == pytest.approx(route["steps_per_s"])
    _positive(route, "cpu_steps_per_s")
    assert thresholds["env_id"] == "btb/Thresholds-v0"
    # one step per 1 s epoch with arrivals: far fewer steps than requests
    assert 0 < thresholds["steps"] < thresholds["requests"] // 4
    per_step = thresholds["requests"] / thresholds["steps"]
    assert thresholds["requests_per_s"] == pytest.approx(thresholds["steps_per_s"] * per_step)
    # the agent decides once an epoch, as the env steps once an epoch
    assert agent["decisions"] == thresholds["steps"] and agent["requests"] == 4120
    (learn,) = result["learn"]
    n_envs, hyperparams = default_configs("route_warm", "maskable_ppo")
    assert (learn["env"], learn["algo"], learn["n_envs"]) == (
        "btb/RouteWarm-v0",
        "maskable_ppo",
        n_envs,
    )
    assert learn["steps"] == n_envs * hyperparams["n_steps"]
    assert learn["update_threads"] == min(2, len(os.sched_getaffinity(0)))  # train's default
    _positive(learn, "steps_per_s", "rollout_s", "update_s", "cpu_s")
    replay = result["replay"]
    assert (replay["windows"], replay["requests"]) == (1, 4120)
    said = "\nreplay of 1 bursted_synthetic test window (4120 requests, cache_aware): peak RSS "
    assert said in capsys.readouterr().out  # (one window: no plural)
    assert result["peak_rss_mb"] == replay["peak_rss_mb"] > 0
    breakdown = result["breakdown"]
    rows = [*result["sim"], read, agent]
    for part in PARTS:
        assert breakdown[part] == pytest.approx(sum(row.get(part, 0.0) for row in rows))
    assert breakdown["total_s"] == pytest.approx(sum(breakdown[p] for p in PARTS))


def test_stopwatch_changes_no_decision() -> None:
    window = synthetic_window(BurstedSyntheticConfig(n_bursts=2, burst_requests=40, n_decoys=5))
    cluster = setup_cluster("70b_h100x4")

    def nodes(policy: Any) -> list[int]:
        return list(policy.run(Simulator(cluster, window, SimConfig())).node)

    timed = TimedPolicy(make_policy("btb"))
    assert nodes(timed) == nodes(make_policy("btb"))
    assert timed.decide_s > 0 and timed.name == "btb"


def test_mooncake_rows_read_back_as_written(tmp_path: Path) -> None:
    requests = [
        Request(0, "a", 0.0, 1000, 5, (11, 12)),
        Request(1, "b", 1.5, 600, 1, (11, 13)),
    ]
    rows = mooncake_rows(Workload("w", 512, requests))
    assert rows == [
        {"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [11, 12]},
        {"timestamp": 1500, "input_length": 600, "output_length": 1, "hash_ids": [11, 13]},
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    read = read_mooncake(path)
    assert [r.arrival_s for r in read.requests] == [0.0, 1.5]
    first, second = (r.blocks for r in read.requests)
    assert first[0] == second[0] and first[1] != second[1]  # one shared block, then apart


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("envs=btb/Nope-v0", "unknown env 'btb/Nope-v0'"),
        ("learn=btb/Nope-v0", "unknown env 'btb/Nope-v0' in learn"),
        ("learn_steps=0", "learn_steps must be an integer >= 1"),
        ("repeats=0", "repeats must be an integer >= 1"),
        ("read_rows=-1", "read_rows must be an integer >= 0"),
        ("policies=bogus", "unknown policy 'bogus'"),
        (
            "workloads=nope",
            "workloads: unknown workload 'nope' \\(from the command line\\); known: ",
        ),
        # spelled as on the other commands, and said as they say it (the origin was last)
        (
            "workload=nope",
            "^experiments.bench: unknown workload 'nope' \\(from the command "
            "line\\); known: bursted_art, ",
        ),
        ("agents=/no/such/agent", "is not an agent checkpoint"),
    ],
)
def test_bench_rejects_bad_options_before_running(arg: str, message: str) -> None:
    with pytest.raises((UsageError, ValueError), match=message):
        bench.main([arg])


def test_a_count_past_what_a_machine_holds_is_refused_before_any_work(tmp_path: Path) -> None:
    """A typo's 10**12 rows or windows failed deep in numpy with a 2.9 TiB allocation."""
    from envs.sim.errors import ConfigError
    from envs.workloads.registry import configure
    from experiments._cli import UsageError

    with pytest.raises(UsageError, match=r"^experiments\.bench: read_rows must be at most 10,000,"):
        bench.main(["read_rows=1000000000000", f"out_dir={tmp_path / 'b'}"])
    assert not (tmp_path / "b").exists()
    # a count of runs or steps with no ceiling ran for ever
    for arg, message in [
        ("repeats=1000000000000", "repeats must be at most 100,000, got 1000000000000"),
        ("learn_steps=1000000000000", "learn_steps must be at most 1,048,576, got 1000000000000"),
    ]:
        with pytest.raises(
            UsageError, match=rf"^experiments\.bench: {message} \(from the command line\)$"
        ):
            bench.main([arg, f"out_dir={tmp_path / 'b'}"])
        assert not (tmp_path / "b").exists()
    bench._check(
        bench.parse_args(
            bench.COMMAND,
            bench.DEFAULTS,
            ["repeats=100000", "learn_steps=1048576", "envs=", "learn=", "agents=none"],
        )
    )  # the ceilings themselves pass
    with pytest.raises(ConfigError, match=r"test_windows must be an integer in \[0, 100000\]"):
        configure("bursted_synthetic", test_windows=10**12)


def test_an_unknown_env_lists_the_known_ones_as_learn_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main_guard(lambda: bench.main(["envs=bogus"])) == 2
    assert capsys.readouterr().err == (
        "error: experiments.bench: unknown env 'bogus' in envs (known: btb/Route-v0, "
        "btb/RouteWarm-v0, btb/Thresholds-v0)\n"
    )


def test_more_replay_windows_than_the_split_has_are_said() -> None:
    """bursted_synthetic has 15 test windows: 16 replays the 15 and says so (it
    silently replayed fewer); 15 says nothing."""
    from envs.sim.errors import SettingWarning
    from experiments._cli import parse_args

    quiet = ["envs=", "learn=", "agents=none", "workloads=bursted_synthetic"]
    with pytest.warns(SettingWarning) as said:
        bench._check(parse_args(bench.COMMAND, bench.DEFAULTS, [*quiet, "replay_windows=16"]))
    assert [str(w.message) for w in said] == [
        "replay_windows=16: workload 'bursted_synthetic' has 15 test windows; all of them run"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bench._check(parse_args(bench.COMMAND, bench.DEFAULTS, [*quiet, "replay_windows=15"]))


def test_plural_counts_one_without_an_s() -> None:
    from envs.sim.errors import plural

    assert [plural(n, "train window") for n in (0, 1, 2, 1200)] == [
        "0 train windows",
        "1 train window",
        "2 train windows",
        "1,200 train windows",
    ]


def test_a_fresh_process_leaves_the_trace_s_warnings_and_ctrl_c_to_the_command() -> None:
    """helper-56's review: bench said a trace's warning twice, the second time from
    its fresh process as a raw Python warning. And a Ctrl-C printed the worker's
    traceback (``Process SpawnPoolWorker-1:``) before the command's ``interrupted``."""
    import signal
    import warnings

    from envs.workloads.readers import TraceWarning

    handler = signal.getsignal(signal.SIGINT)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            bench._start_worker()  # what each fresh process runs first
            warnings.warn(TraceWarning("said by the command already"), stacklevel=1)
            warnings.warn(UserWarning("anything else"), stacklevel=1)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, handler)
    assert [str(w.message) for w in caught] == ["anything else"]
