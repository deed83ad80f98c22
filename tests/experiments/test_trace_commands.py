"""``workload=trace workload.path=FILE`` through the commands: every format on files
the tests write, the same numbers as the registry's windows for the same rows, a
dataset made from a trace, the Hydra commands, and bad input (one line, exit 2,
nothing written)."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir

from envs.files import read_json
from envs.sim import SimConfig
from envs.sim.errors import SettingWarning
from envs.workloads.example_trace import example_mooncake_text
from envs.workloads.readers import TraceWarning
from envs.workloads.registry import windows as registry_windows
from envs.workloads.trace_file import TraceOptions
from experiments import bench, compare, make_dataset
from experiments._cli import main_guard
from experiments.config import register_configs
from experiments.evaluation import BOUNDS, evaluate_policies
from tests.workloads.tracekit import art_rows, bursted_rows, qwen_rows, write_jsonl

ROOT = Path(__file__).resolve().parents[2]
QUIET = ["agents=none", "charts=false", "progress=false"]
register_configs()


def _mooncake_rows(n: int = 12) -> list[dict[str, Any]]:
    """``n`` requests 0.5 s apart; every third starts a new 2-block prefix the next two share."""
    return [
        {"timestamp": 500 * i, "input_length": 1500, "output_length": 3,
         "hash_ids": [1000 + i // 3, 2000 + i // 3, 3000 + i]}
        for i in range(n)
    ]  # fmt: skip


def _compare(path: Path, out: Path, *extra: str) -> dict[str, Any]:
    args = [
        "workload=trace", f"workload.path={path}", "policies=cache_aware,least_load",
        f"out_dir={out}", *QUIET, *extra,
    ]  # fmt: skip
    return compare.main(args)


def _written(tmp_path: Path, fmt: str) -> tuple[Path, int]:
    """A trace file of format ``fmt`` and the requests its test windows hold."""
    if fmt == "mooncake":
        return write_jsonl(tmp_path / "mc.jsonl", _mooncake_rows()), 12
    if fmt == "mooncake_gz":
        text = "".join(json.dumps(r) + "\n" for r in _mooncake_rows())
        path = tmp_path / "mc.data"  # gzip told by its bytes
        path.write_bytes(gzip.compress(text.encode()))
        return path, 12
    if fmt == "art_chat":
        return write_jsonl(tmp_path / "art.jsonl", art_rows()), 3
    if fmt == "art_parquet":
        pa = pytest.importorskip("pyarrow")
        pq = pytest.importorskip("pyarrow.parquet")
        pq.write_table(pa.Table.from_pylist(art_rows()), tmp_path / "art.parquet")
        return tmp_path / "art.parquet", 3
    if fmt == "qwen_bailian":
        return write_jsonl(tmp_path / "qwen.jsonl", qwen_rows()), 4
    rows = bursted_rows("w-0", split="train") + bursted_rows("w-1") + bursted_rows("w-2", n=3)
    return write_jsonl(tmp_path / "bursted.jsonl", rows), 7


@pytest.mark.parametrize(
    "fmt", ["mooncake", "mooncake_gz", "art_chat", "art_parquet", "qwen_bailian", "bursted"]
)
def test_compare_runs_each_format_and_names_the_file(tmp_path: Path, fmt: str) -> None:
    path, test_requests = _written(tmp_path, fmt)
    # one window holds the whole of each small file (test_fraction=1: it is the test one),
    # except Bursted-ART's, which keeps its own windows and splits (two test windows)
    result = _compare(path, tmp_path / "run", "workload.test_fraction=1")
    rows = [r for r in result["rows"] if r["policy"] not in BOUNDS]  # the lower bounds
    assert [r["workload"] for r in result["rows"]] == [f"trace:{path.name}"] * 4
    for row in rows:  # every request of the test windows served once
        assert row["requests"] == row["completed"] == test_requests
    stamp = read_json(tmp_path / "run" / "results.json")["config"]["workload_file"]
    assert stamp["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert stamp["bytes"] == path.stat().st_size and stamp["file"] == path.name


def test_a_bursted_test_file_gives_the_registry_s_numbers(tmp_path: Path) -> None:
    params = ["n_bursts=2", "burst_requests=12", "n_decoys=3", "prefix_tokens=2048"]
    make_dataset.main(
        ["workload=bursted_synthetic", f"out_dir={tmp_path / 'ds'}", "train_windows=1",
         "test_windows=2", "progress=false", "params=" + ",".join(params)]
    )  # fmt: skip
    got = _compare(tmp_path / "ds" / "test.jsonl", tmp_path / "run", "causal_kv=false")
    generated = {k: int(v) for k, v in (p.split("=") for p in params)}
    windows = registry_windows(
        "bursted_synthetic", split="test", train_windows=1, test_windows=2, **generated
    )
    want = evaluate_policies(
        ["cache_aware", "least_load"], "70b_h100x4", windows, SimConfig(causal_kv=False)
    )
    assert got["config"]["windows_run"] == 2
    keys = ("requests", "ttft_mean_s", "ttft_p95_s", "e2e_mean_s", "hbm_hit_rate")
    rows = [r for r in got["rows"] if r["policy"] not in BOUNDS]
    for row, run in zip(rows, want, strict=True):
        assert {k: row[k] for k in keys} == {k: run.row[k] for k in keys}


def test_a_dataset_made_from_a_trace_reads_back_to_the_same_numbers(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mc.jsonl", _mooncake_rows(40))  # 20 s: four 5 s windows
    cut = ["workload.window_s=5", "workload.val_fraction=0.25"]
    info = make_dataset.main(
        ["workload=trace", f"workload.path={path}", f"out_dir={tmp_path / 'ds'}",
         "progress=false", *cut]
    )  # fmt: skip
    assert {s: c["windows"] for s, c in info["splits"].items()} == {"train": 2, "val": 1, "test": 1}
    assert {s: c["rows"] for s, c in info["splits"].items()} == {"train": 20, "val": 10, "test": 10}
    assert info["generator"]["file"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert info["block_tokens"] == 512  # Mooncake's, recorded in dataset_info.json
    direct = _compare(path, tmp_path / "a", *cut)
    # read back at the 512 tokens a block the dataset records, nothing passed: 1,500
    # tokens in 3 blocks (at Bursted-ART's own 256 they would need 6, and be refused)
    back = _compare(tmp_path / "ds" / "test.jsonl", tmp_path / "b")
    assert back["config"]["workload_file"]["block_tokens"] == 512
    for a, b in zip(direct["rows"], back["rows"], strict=True):  # the floor row too
        assert (a["requests"], a["ttft_mean_s"], a.get("hbm_hit_rate")) == (
            b["requests"], b["ttft_mean_s"], b.get("hbm_hit_rate"),
        )  # fmt: skip
    assert [r["requests"] for r in back["rows"]] == [10, 10, 10, 10]


def test_a_dataset_of_the_example_trace_reads_back_to_its_numbers(tmp_path: Path) -> None:
    """The shipped Mooncake example (512-token blocks) through make_dataset: its test
    split replays to the same numbers as the example's own test windows."""
    example = ROOT / "examples" / "mooncake_example.jsonl"
    info = make_dataset.main(
        ["workload=trace", f"workload.path={example}", f"out_dir={tmp_path / 'ds'}",
         "progress=false"]
    )  # fmt: skip
    assert info["block_tokens"] == 512
    assert {s: c["windows"] for s, c in info["splits"].items()} == {"train": 7, "test": 2}
    direct = _compare(example, tmp_path / "a")
    back = _compare(tmp_path / "ds" / "test.jsonl", tmp_path / "b")
    assert back["config"]["workload_file"]["block_tokens"] == 512
    assert back["config"]["windows_run"] == direct["config"]["windows_run"] == 2
    keys = ("requests", "ttft_mean_s", "ttft_p95_s", "hbm_hit_rate")
    for a, b in zip(direct["rows"], back["rows"], strict=True):  # the floor rows too
        assert {k: a.get(k) for k in keys} == {k: b.get(k) for k in keys}
    assert [r["requests"] for r in back["rows"]] == [info["splits"]["test"]["rows"]] * 4


def test_bench_times_a_window_of_a_trace(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mc.jsonl", _mooncake_rows())
    result = bench.main(
        ["workload=trace", f"workload.path={path}", "repeats=1", "policies=cache_aware",
         "envs=", "agents=none", "learn=", "read_rows=0", "replay_windows=0",
         f"out_dir={tmp_path / 'b'}"]
    )  # fmt: skip
    assert [(r["workload"], r["requests"]) for r in result["sim"]] == [("trace", 12)]
    assert result["workload_file"]["file"] == "mc.jsonl"
    # the replay records the windows it replayed, not the most it was allowed
    result = bench.main(
        ["workload=trace", f"workload.path={path}", "repeats=1", "policies=cache_aware",
         "envs=", "agents=none", "learn=", "read_rows=0", "replay_windows=15",
         f"out_dir={tmp_path / 'c'}"]
    )  # fmt: skip
    assert (result["replay"]["windows"], result["replay"]["requests"]) == (1, 12)


@pytest.mark.parametrize(
    ("content", "options", "needle"),
    [
        ("", [], r"bad\.jsonl: the file is empty \(or blank lines only\): no row to detect the "
         r"format from$"),
        ('{"timestamp": 0, "input_length": 600, "hash_ids": [1, 2]}\n{"timestamp": 5',
         [], r"bad\.jsonl, line 2, row: not valid JSON"),
        ('{"timestamp": 0, "input_length": -5, "hash_ids": [1]}\n', [],
         r"bad\.jsonl, line 1, field 'input_length': must be >= 1"),
        ('{"timestamp": 0, "input_length": 600, "hash_ids": [1, 2]}\n', ["workload.format=bursted"],
         r"bad\.jsonl, line 1, field 'trace_id': missing"),
        ('{"timestamp": 0, "input_length": 600, "hash_ids": [1, 2]}\n', ["workload.window_s=0"],
         r"workload\.window_s must be a finite number > 0"),
        ('{"timestamp": 0, "input_length": 5000, "hash_ids": [1, 2]}\n', [],
         r"bad\.jsonl, line 1, field 'hash_ids': has 2 blocks but input_length 5000 at 512 "
         r"tokens a block \(the mooncake format's, guessed from its fields 'timestamp' and "
         r"'hash_ids'\) needs 10 \(or 9\); if its hashes cover blocks of another size, set "
         r"workload\.block_tokens= to that size, else workload\.strict_block_count=false "
         r"accepts it"),
        (None, [], r"workload\.path='.*nowhere\.jsonl': no such file"),
        ('{"timestamp": 0, "input_length": 600, "hash_ids": [1, 2]}\n', ["workload.max_rows=0"],
         r"workload\.max_rows must be an integer >= 1, got 0"),
        ('{"timestamp": 0, "input_length": 600, "hash_ids": [1, 2]}\n',
         ["workload.test_fraction=0.6", "workload.val_fraction=0.6"],
         r"workload\.test_fraction \+ workload\.val_fraction must be <= 1 \(the shares of the "
         r"windows the test and val splits take\), got 0\.6 \+ 0\.6$"),
        ('{"timestamp": 0, "input_length": 600, "hash_ids": [1, 2]}\n',
         ["workload.test_fraction=0"], r"has no 'test' windows \(workload\.test_fraction=0\)"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str | None,
    options: list[str],
    needle: str,
) -> None:
    path = tmp_path / ("nowhere.jsonl" if content is None else "bad.jsonl")
    if content is not None:
        path.write_text(content)
    previous = tmp_path / "previous"
    previous.mkdir()
    (previous / "results.json").write_text("{}\n")
    for out in (tmp_path / "new", previous):
        argv = ["workload=trace", f"workload.path={path}", f"out_dir={out}", *QUIET, *options]
        assert main_guard(lambda argv=argv: compare.main(argv)) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: "), err
        assert __import__("re").search(needle, err), err
    assert not (tmp_path / "new").exists()
    assert (previous / "results.json").read_text() == "{}\n"  # never overwritten


def test_reproduce_refuses_a_trace_without_test_windows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from experiments import reproduce

    path = write_jsonl(tmp_path / "mc.jsonl", _mooncake_rows())
    argv = ["workload=trace", f"workload.path={path}", "workload.test_fraction=0",
            "setups=70b_h100x4", "progress=false", f"out_dir={tmp_path / 'run'}"]  # fmt: skip
    assert main_guard(lambda: reproduce.main(argv)) == 2
    assert "has no 'test' windows (workload.test_fraction=0)" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_trace_options_on_another_workload_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main_guard(lambda: compare.main(["workload.path=x.jsonl", *QUIET])) == 2
    assert "workload.path= is an option of workload=trace" in capsys.readouterr().err


def _compose(name: str, overrides: list[str]) -> Any:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name=name, overrides=overrides)


def test_the_hydra_commands_take_the_same_spelling(tmp_path: Path) -> None:
    from experiments.config import workload_label
    from experiments.evaluate import evaluate
    from experiments.jobs import check_world

    path = write_jsonl(tmp_path / "mc.jsonl", _mooncake_rows(40))
    cfg = _compose(
        "evaluate",
        ["workload=trace", f"workload.path={path}", "workload.window_s=5", "logger=none",
         "policies=[least_load]", f"out_dir={tmp_path / 'run'}", "progress=false"],
    )  # fmt: skip
    assert workload_label(cfg) == "trace:mc.jsonl"
    evaluate(cfg)
    result = read_json(tmp_path / "run" / "results.json")
    # one 5 s test window of four, in every row (the lower bounds' last)
    assert [r["requests"] for r in result["rows"]] == [10, 10, 10, 10]
    assert [r["policy"] for r in result["rows"][-2:]] == list(BOUNDS)
    assert (
        result["config"]["workload_file"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    )
    bad = _compose("evaluate", ["workload=trace", f"workload.path={path}", "workload.window_s=-1"])
    with pytest.raises(ValueError, match=r"workload\.window_s must be a finite number > 0"):
        check_world(bad)
    other = _compose("evaluate", [f"workload.path={path}"])
    with pytest.raises(ValueError, match=r"workload\.path is an option of workload=trace"):
        check_world(other)


@pytest.mark.parametrize(
    "command", ["experiments.train", "experiments.evaluate", "experiments.tune_btb"]
)
@pytest.mark.parametrize("given", [[], ["workload.path="]])
def test_a_hydra_command_without_a_trace_file_says_so_in_compare_s_words(
    tmp_path: Path, run_command: Any, command: str, given: list[str]
) -> None:
    """fixT1's audit: the run folder's name read workload.path, a KeyError, before the
    job's own check could name the empty path (out_dir given or not)."""
    for out in ([f"out_dir={tmp_path / 'run'}"], []):
        done = run_command(command, ["workload=trace", *given, "logger=none", *out], tmp_path)
        assert done.returncode == 2
        where = " (from the command line)" if given else ""
        assert done.stderr == (
            f"error: {command}: workload.path is empty: a trace workload needs the file "
            f"to read{where}\n"
        )
    assert not list(tmp_path.iterdir())  # no run folder left


def test_a_sweep_over_trace_files_runs_in_a_trace_folder(tmp_path: Path, run_command: Any) -> None:
    """fixT1's audit: a sweep over workload.path had no path to name its folder by
    at its start (a KeyError, every job lost); its folder is ``..._trace``, each job's
    results name its own file."""
    write_jsonl(tmp_path / "a.jsonl", _mooncake_rows())
    write_jsonl(tmp_path / "b.jsonl", _mooncake_rows(6))
    args = ["-m", "workload=trace", "workload.path=a.jsonl,b.jsonl", "workload.test_fraction=1",
            "policies=[least_load]", "logger=none", "progress=false"]  # fmt: skip
    done = run_command("experiments.evaluate", args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr
    (sweep,) = (tmp_path / "multirun" / "evaluate").iterdir()
    assert sweep.name.endswith("__trace")
    for job, name, requests in (("0", "a.jsonl", 12), ("1", "b.jsonl", 6)):
        rows = read_json(sweep / job / "results.json")["rows"]
        assert {row["workload"] for row in rows} == {f"trace:{name}"}
        assert rows[0]["requests"] == requests
    assert read_json(sweep / "sweep.json")["failed"] == []


def test_train_and_compare_say_a_capped_split_as_evaluate_does(
    tmp_path: Path, run_command: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """fixT1's audit: train's first line and compare's did not say they ran a subset
    of a split, and train's evaluation had no line before its table. 40 requests
    0.5 s apart in 1 s windows: 20 windows of 2 requests, 5 test (0.25), 4
    validation (0.2), 11 train; train runs 4 of the 11, scores 3 of the 4 and
    evaluates 3 of the 5 (6 requests); compare runs 5 of 5 (its windows=5)."""
    path = write_jsonl(tmp_path / "mc.jsonl", _mooncake_rows(40))
    trace = ["workload=trace", f"workload.path={path}", "workload.window_s=1"]
    args = [*trace, "workload.val_fraction=0.2", "train.total_timesteps=64", "env.n_envs=1",
            "agent.hyperparams.n_steps=64", "agent.hyperparams.batch_size=64",
            "train.val_every=64", "train.progress=false", "train.eval_policies=[]",
            "logger=none", f"out_dir={tmp_path / 'run'}"]  # fmt: skip
    done = run_command("experiments.train", args, tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert (
        "trace:mc.jsonl, 4 train windows (at most 4: workload.train_pool=4; null for all), "
        "3 validation (at most 3: workload.val_windows=3; null for all)): 0 -> 64 steps"
    ) in lines[0]
    table = next(i for i, line in enumerate(lines) if line.startswith("policy "))
    assert lines[table - 1] == (
        "70b_h100x4 · trace:mc.jsonl · 3 test windows "
        "(at most 3: workload.eval_windows=3; null for all) "
        "· causal_kv=True · copy_model=reference · seed=0"
    )
    rows = read_json(tmp_path / "run" / "results.json")["rows"]
    assert {row["requests"] for row in rows} == {6}

    capsys.readouterr()
    for given, note in (([], " (at most 5: windows=5; 0 for all)"), (["windows=0"], "")):
        out = tmp_path / f"compare{len(given)}"
        compare.main([*trace, "policies=cache_aware", f"out_dir={out}", *QUIET, *given])
        first = capsys.readouterr().out.splitlines()[0]
        assert f"· trace:mc.jsonl · 5 test windows{note} · causal_kv=" in first


def test_validation_windows_no_one_scores_are_warned_of(
    tmp_path: Path, run_command: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fixT1's audit: workload.val_fraction without train.val_every held windows out
    of training quietly. 40 requests 0.5 s apart in 1 s windows: 20 windows, 5 test
    (0.25), 4 validation (0.2), 11 train; the warning counts the 4 from the plan the
    run made already (the file is planned once). Improvement rounds score them
    (no warning), as does train.val_every."""
    import envs.workloads.trace_file as trace_file
    from experiments.train import warn_unscored_validation

    path = write_jsonl(tmp_path / "mc.jsonl", _mooncake_rows(40))
    trace = ["workload=trace", f"workload.path={path}", "workload.window_s=1"]
    planned = []
    real = trace_file._plan_timed
    monkeypatch.setattr(trace_file, "_plan_timed", lambda *a: planned.append(1) or real(*a))
    args = [*trace, "workload.val_fraction=0.2", "train.total_timesteps=64", "env.n_envs=1",
            "agent.hyperparams.n_steps=64", "agent.hyperparams.batch_size=64",
            "train.progress=false", "train.evaluate=false", "logger=none",
            f"out_dir={tmp_path / 'run'}"]  # fmt: skip
    done = run_command("experiments.train", args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        "warning: workload.val_fraction=0.2 (from the command line) holds 4 windows out of "
        "training that this run never scores (train.val_every=0): set train.val_every to "
        "score them, or workload.val_fraction=0 to train on them\n"
    )
    assert len(planned) == 1
    assert "4 train windows (at most 4: workload.train_pool=4; null for all), no validation" in (
        done.stdout
    )

    def said(*given: str) -> list[str]:
        cfg = _compose("train", [*trace, *given])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warn_unscored_validation(cfg)
        return [str(w.message) for w in caught]

    (line,) = said("workload.val_fraction=0.2")
    assert line.startswith("workload.val_fraction=0.2 holds 4 windows out of training")
    (one,) = said("workload.val_fraction=0.05")  # 20 x 0.05: 1 window
    assert "holds 1 window out of" in one and one.endswith(
        "score it, or workload.val_fraction=0 to train on it"
    )
    assert said("workload.val_fraction=0.2", "train.val_every=64") == []
    assert said("workload.val_fraction=0.2", "improvement.iterations=1") == []
    assert said() == []  # val_fraction=0: every window not test trains


@pytest.mark.parametrize(
    ("content", "options"),
    [
        ("", []),
        ('{"a": 1}\n', []),
        ('{"timestamp": 0, "input_length": 200000, "hash_ids": [1]}\n',
         ["workload.strict_block_count=false"]),
        ('{"timestamp": 0, "input_length": 5000, "hash_ids": [1]}\n', []),
    ],
)  # fmt: skip
def test_hydra_and_key_value_commands_name_a_bad_trace_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, options: list[str]
) -> None:
    """The same one line (after the command's name), each option as it is typed
    (``workload.skip_bad_rows=true``), and prose such as "the format" left alone."""
    from experiments.jobs import check_world

    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    argv = ["workload=trace", f"workload.path={path}", *QUIET, *options]
    assert main_guard(lambda: compare.main([*argv, f"out_dir={tmp_path / 'run'}"])) == 2
    key_value = capsys.readouterr().err.removeprefix("error: experiments.compare: ").strip()
    with pytest.raises(ValueError) as error:
        check_world(_compose("evaluate", ["workload=trace", f"workload.path={path}", *options]))
    assert str(error.value) == key_value
    assert "workload.workload." not in key_value and " format=" not in key_value
    assert "the workload.format" not in key_value


def test_a_trace_s_warning_is_one_line_naming_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        {**row, "timestamp": 1_700_000_000_000_000_000 + row["timestamp"] * 1_000_000}
        for row in _mooncake_rows()
    ]  # integer ns, which read as ms span ages
    path = write_jsonl(tmp_path / "ns.jsonl", rows)
    argv = ["workload=trace", f"workload.path={path}", "workload.test_fraction=1",
            "policies=cache_aware", f"out_dir={tmp_path / 'run'}", *QUIET]  # fmt: skip
    assert main_guard(lambda: compare.main(argv)) == 0
    err = capsys.readouterr().err
    assert err.startswith("warning: ") and err.count("\n") == 1, err
    assert "reading it as ns" in err and "set workload.time_unit= to choose" in err


def test_a_trace_s_warning_said_during_the_run_starts_a_line_of_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A window's warning (its requests' own 2-block suffixes) is said as compare
    reads the window, with its progress bar drawn: it went into the bar's line
    (``compare:   0%| ... |warning: ...``). The bar is cleared first and drawn again
    after it, so the warning starts its line on a terminal."""
    rows = [
        {"timestamp": 300 * i, "input_length": 1500, "output_length": 3,
         "hash_ids": [1, 2000 + i, 3000 + i]}
        for i in range(12)
    ]  # fmt: skip
    path = write_jsonl(tmp_path / "suffixes.jsonl", rows)
    argv = ["workload=trace", f"workload.path={path}", "workload.test_fraction=1",
            "policies=cache_aware", f"out_dir={tmp_path / 'run'}", "agents=none",
            "charts=false", "progress=true"]  # fmt: skip
    assert main_guard(lambda: compare.main(argv)) == 0
    err = capsys.readouterr().err
    assert "compare:" in err  # the bar was drawn
    shown = [line for line in err.replace("\r", "\n").split("\n") if "warning:" in line]
    assert len(shown) == 1 and shown[0].startswith("warning: "), err
    assert "blocks no other request has" in shown[0]


def test_rows_out_of_time_order_are_noted_once_in_audit_s_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """1 s, 3 s, -0.5 s, 2 s: lines 3 and 4 arrive before line 2. compare, evaluate and
    audit sort them and say so once, in the same words; an ordered file says nothing."""
    from experiments import audit
    from experiments.evaluate import evaluate

    rows = [{**row, "timestamp": t} for row, t in zip(_mooncake_rows(4), (1000, 3000, -500, 2000))]
    path = write_jsonl(tmp_path / "late.jsonl", rows)
    note = f"{path}: 2 rows arrived out of time order (first at line 3); sorted by arrival"
    again = write_jsonl(tmp_path / "again.jsonl", rows)  # this process keeps late.jsonl's plan
    argv = ["workload=trace", f"workload.path={path}", "workload.test_fraction=1",
            "policies=cache_aware", f"out_dir={tmp_path / 'run'}", *QUIET]  # fmt: skip
    assert main_guard(lambda: compare.main(argv)) == 0
    err = capsys.readouterr().err
    assert err == f"warning: {note}\n", err
    assert read_json(tmp_path / "run" / "results.json")["rows"][0]["requests"] == 4
    assert main_guard(lambda: audit.main([f"path={path}"])) == 0
    assert capsys.readouterr().err == f"warning: {note}\n"
    cfg = _compose(
        "evaluate",
        ["workload=trace", f"workload.path={again}", "workload.test_fraction=1", "logger=none",
         "policies=[cache_aware]", f"out_dir={tmp_path / 'eval'}", "progress=false"],
    )  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        evaluate(cfg)
    said = [str(w.message) for w in caught if issubclass(w.category, TraceWarning)]
    assert said == [note.replace(str(path), str(again))]
    ordered = write_jsonl(tmp_path / "ordered.jsonl", sorted(rows, key=lambda r: r["timestamp"]))
    argv = ["workload=trace", f"workload.path={ordered}", "workload.test_fraction=1",
            "policies=cache_aware", f"out_dir={tmp_path / 'run2'}", *QUIET]  # fmt: skip
    assert main_guard(lambda: compare.main(argv)) == 0
    assert capsys.readouterr().err == ""


def test_example_trace_writes_the_shipped_file_and_keeps_an_existing_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from experiments import example_trace

    out = tmp_path / "example.jsonl"
    example_trace.main([f"out={out}"])
    assert out.read_bytes() == (ROOT / "examples" / "mooncake_example.jsonl").read_bytes()
    out.write_text("mine\n")
    assert main_guard(lambda: example_trace.main([f"out={out}"])) == 2
    assert "exists; overwrite=true replaces it" in capsys.readouterr().err
    assert out.read_text() == "mine\n"


def test_format_hub_reads_a_local_file_through_datasets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("datasets")
    for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(name, "1")  # nothing is downloaded
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    path = write_jsonl(tmp_path / "mc.jsonl", _mooncake_rows())
    hub = _compare(path, tmp_path / "hub", "workload.format=hub", "workload.test_fraction=1")
    own = _compare(path, tmp_path / "own", "workload.test_fraction=1")
    assert [r["ttft_mean_s"] for r in hub["rows"]] == [r["ttft_mean_s"] for r in own["rows"]]
    assert hub["config"]["workload_file"]["format"] == "mooncake"


def test_format_hub_reads_a_dataset_s_folder_through_datasets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder of data files, one ``save_to_disk`` wrote and one ``make_dataset``
    wrote (at the block size its dataset_info.json records) read with
    ``workload.format=hub`` give the file's numbers; without it a folder is refused,
    naming the option. A folder was refused with format=hub too."""
    datasets = pytest.importorskip("datasets")
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(name, "1")  # nothing is downloaded
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    rows = _mooncake_rows()
    path = write_jsonl(tmp_path / "mc.jsonl", rows)
    own = _compare(path, tmp_path / "own", "workload.test_fraction=1")
    want = [(r["requests"], r["ttft_mean_s"]) for r in own["rows"]]
    assert want[0][0] == 12
    data = tmp_path / "repo" / "data"
    data.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), data / "train-00000-of-00001.parquet")
    (tmp_path / "repo" / "README.md").write_text("# a dataset card without metadata\n")
    saved = tmp_path / "saved"
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(rows[:3]), "test": datasets.Dataset.from_list(rows)}
    ).save_to_disk(str(saved))
    capsys.readouterr()
    for folder, split in ((tmp_path / "repo", "train"), (saved, "test")):
        out = tmp_path / f"out_{folder.name}"
        got = _compare(
            folder, out, "workload.format=hub", "workload.test_fraction=1",
            f"workload.hub_split={split}",
        )  # fmt: skip
        assert [(r["requests"], r["ttft_mean_s"]) for r in got["rows"]] == want
        assert got["config"]["workload_file"]["sha256"] is None  # no file of its own
    assert capsys.readouterr().err == ""  # no log line from the libraries
    make_dataset.main(
        ["workload=trace", f"workload.path={path}", f"out_dir={tmp_path / 'ds'}",
         "progress=false", "workload.test_fraction=1"]
    )  # fmt: skip
    got = _compare(
        tmp_path / "ds", tmp_path / "out_ds", "workload.format=hub", "workload.hub_split=test"
    )
    assert got["config"]["workload_file"]["block_tokens"] == 512  # dataset_info.json's
    assert [(r["requests"], r["ttft_mean_s"]) for r in got["rows"]] == want
    args = ["workload=trace", f"workload.path={saved}", *QUIET]
    assert main_guard(lambda: compare.main([*args, "policies=btb"])) == 2
    assert capsys.readouterr().err == (
        f"error: experiments.compare: workload.path='{saved}' is a folder; give one trace "
        "file (or workload.format=hub to read a dataset's folder through the datasets library)\n"
    )
    split = ["workload.format=hub", "workload.hub_split=val", "policies=btb"]
    assert main_guard(lambda: compare.main([*args, *split])) == 2
    assert capsys.readouterr().err == (
        f"error: experiments.compare: workload.hub_split='val': the dataset saved in {saved} "
        "has the splits train, test\n"
    )
    # one Dataset saved alone is one split, read whole: another hub_split is said to
    # do nothing (it was taken without a word)
    alone = tmp_path / "alone"
    datasets.Dataset.from_list(rows).save_to_disk(str(alone))
    said = f"hub_split='test' does nothing: the dataset saved in {alone} is one split"
    with pytest.warns(TraceWarning, match=said):
        got = _compare(
            alone, tmp_path / "out_alone", "workload.format=hub", "workload.test_fraction=1",
            "workload.hub_split=test",
        )  # fmt: skip
    assert [(r["requests"], r["ttft_mean_s"]) for r in got["rows"]] == want


def test_tune_btb_scores_thresholds_on_a_trace_s_train_windows(tmp_path: Path) -> None:
    from experiments.tune_btb import objective

    path = write_jsonl(tmp_path / "mc.jsonl", _mooncake_rows(40))
    cfg = _compose(
        "tune_btb",
        ["workload=trace", f"workload.path={path}", "workload.window_s=5", "y_tokens=1024",
         f"out_dir={tmp_path / 'job'}"],
    )  # fmt: skip
    value = objective(cfg)
    record = read_json(tmp_path / "job" / "objective.json")
    assert record["row"]["requests"] == 30  # three of the four 5 s windows are train
    assert record["row"]["workload"] == "trace:mc.jsonl"
    assert record["ttft_mean_s"] == value and record["workload_file"]["file"] == "mc.jsonl"


@pytest.mark.slow
def test_improvement_rounds_record_the_validation_windows_they_score(tmp_path: Path) -> None:
    """Rounds score on the validation windows without train.val_every (a review of
    2026-12-06: agent.json said it validated on none, so evaluate would not have
    refused those windows as test windows). 40 requests 0.5 s apart in 5 s windows:
    4 windows, 1 test, 1 validation (0.2 of 4, at least one), 2 train."""
    from agents.algorithms import load_spec
    from experiments.train import train

    path = write_jsonl(tmp_path / "mc.jsonl", _mooncake_rows(40))
    cfg = _compose(
        "train",
        ["workload=trace", f"workload.path={path}", "workload.window_s=5",
         "workload.val_fraction=0.2", "logger=none", "agent=maskable_ppo", "env=route_warm",
         "train.total_timesteps=0", "train.evaluate=false", "train.progress=false",
         "improvement.iterations=1", "improvement.windows=1",
         "improvement.states_per_window=1", "improvement.lead_requests=2",
         "improvement.horizon_requests=3", "improvement.anchor_per_window=4",
         "improvement.epochs=1", f"out_dir={tmp_path / 'run'}"],
    )  # fmt: skip
    train(cfg)
    trace = load_spec(tmp_path / "run" / "agent").trace_file
    assert (trace["train_windows"], trace["val_windows"]) == (2, 1)


@pytest.mark.slow
def test_train_on_a_trace_records_it_in_the_agent_and_the_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agents.algorithms import load_spec
    from experiments.train import train

    path = write_jsonl(tmp_path / "mc.jsonl", _mooncake_rows(40))
    cfg = _compose(
        "train",
        ["workload=trace", f"workload.path={path}", "workload.window_s=5", "logger=none",
         "train.total_timesteps=64", "agent.hyperparams.n_steps=64",
         "agent.hyperparams.batch_size=32", "train.progress=false", "train.checkpoint_every=0",
         f"out_dir={tmp_path / 'run'}"],
    )  # fmt: skip
    train(cfg)
    kwargs = load_spec(tmp_path / "run" / "agent").env_kwargs
    assert kwargs["workload"] == "trace" and kwargs["workload_params"]["path"] == str(path)
    results = read_json(tmp_path / "run" / "results.json")
    assert {r["workload"] for r in results["rows"]} == {"trace:mc.jsonl"}
    assert [r["requests"] for r in results["rows"]][:1] == [10]  # the one test window
    # evaluated with workload= left at its default: a note says how to give its trace
    from experiments.evaluate import evaluate

    agent = tmp_path / "run" / "agent"
    capsys.readouterr()  # (training's own output)
    for workload, noted in ((["workload.eval_windows=1"], True),
                            (["workload=trace", f"workload.path={path}", "workload.window_s=5"],
                             False)):  # fmt: skip
        out = tmp_path / f"eval_{noted}"
        evaluate(_compose("evaluate", [f"checkpoint=[{agent}]", "policies=[cache_aware]",
                                       "logger=none", "progress=false", f"out_dir={out}",
                                       *workload]))  # fmt: skip
        said = capsys.readouterr().out
        note = (
            f"note: ppo_route was trained on a trace ({path}); these windows are "
            f"bursted_synthetic's: workload=trace workload.path={path} workload.window_s=5.0 "
            "evaluates it on that trace's windows"
        )
        assert (note in said) == noted, said
    # agent.json records the file and the windows used: the first 3 of the 4 windows
    # (20 s of rows, 5 s windows; the last is test), no validation
    trace = load_spec(agent).trace_file
    assert trace is not None
    assert trace["path"] == str(path.resolve()) and trace["bytes"] == path.stat().st_size
    assert trace["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (trace["train_windows"], trace["val_windows"]) == (3, 0)
    # its own train windows as test windows (every window a test one) are refused, in
    # evaluate and in compare, before any run folder; allowed, they run, with a warning
    every = ["workload=trace", f"workload.path={path}", "workload.window_s=5",
             "workload.test_fraction=1", "workload.eval_windows=null"]  # fmt: skip
    seen = "the 4 test windows evaluated overlap in time 3 of its 3 train windows"
    for allow in (False, True):
        out = tmp_path / f"seen_{allow}"
        cfg = _compose("evaluate", [f"checkpoint=[{agent}]", "policies=[cache_aware]",
                                    "logger=none", "progress=false", f"out_dir={out}",
                                    f"allow_seen_windows={allow}", *every])  # fmt: skip
        if allow:
            with pytest.warns(SettingWarning, match=seen):
                evaluate(cfg)
            assert read_json(out / "results.json")["config"]["allow_seen_windows"] is True
        else:
            with pytest.raises(ValueError, match=seen):
                evaluate(cfg)
            assert not out.exists()
    with pytest.raises(ValueError, match=seen):
        compare.main(["workload=trace", f"workload.path={path}", "workload.window_s=5",
                      "workload.test_fraction=1", f"agents={agent}", "policies=cache_aware",
                      "charts=false", "progress=false", f"out_dir={tmp_path / 'cmp'}"])  # fmt: skip
    assert not (tmp_path / "cmp").exists()


def test_a_row_longer_than_the_served_model_s_context_is_refused(tmp_path: Path) -> None:
    """llama-3.3-70b (compare's default setup) serves 131,072 tokens: a 131,070 + 3 token
    row is one too many, named by line and field; a larger workload.max_context_tokens
    lets it through, and skip_bad_rows skips it (1 of 12 rows: under max_bad_fraction=0.1)."""
    rows = _mooncake_rows()
    rows[4] = {**rows[4], "input_length": 131_070, "hash_ids": list(range(256))}
    path = write_jsonl(tmp_path / "long.jsonl", rows)
    relaxed = "workload.strict_block_count=false"
    with pytest.raises(ValueError, match=r"line 5.*max_context_tokens"):
        _compare(path, tmp_path / "a", relaxed, "workload.test_fraction=1")
    ok = _compare(path, tmp_path / "b", relaxed, "workload.test_fraction=1",
                  "workload.max_context_tokens=140000")  # fmt: skip
    assert ok["rows"][0]["requests"] == 12
    skipped = _compare(path, tmp_path / "c", relaxed, "workload.test_fraction=1",
                       "workload.skip_bad_rows=true", "workload.max_bad_fraction=0.1")  # fmt: skip
    assert skipped["rows"][0]["requests"] == 11


def test_hydra_commands_limit_a_trace_to_the_served_model_s_context(tmp_path: Path) -> None:
    from experiments.config import workload_params

    path = write_jsonl(tmp_path / "mc.jsonl", _mooncake_rows())
    base = ["workload=trace", f"workload.path={path}"]
    assert workload_params(_compose("evaluate", base))["max_context_tokens"] == 131_072
    glm = _compose("evaluate", [*base, "model=glm-4.6"])
    assert workload_params(glm)["max_context_tokens"] == 202_752
    given = _compose("evaluate", [*base, "workload.max_context_tokens=1000"])
    assert workload_params(given)["max_context_tokens"] == 1000


def test_a_file_whose_own_splits_name_no_test_window_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Bursted-ART file whose rows all say split=train has no test window whatever
    workload.test_fraction says: the error names the file's splits and the way out."""
    from experiments import compare

    rows = [
        {
            "trace_id": w,
            "arrival_s": 0,
            "input_length": 600,
            "hash_ids": [1, 2, 3],
            "split": "train",
        }
        for w in ("w1", "w2")
    ]
    path = write_jsonl(tmp_path / "b.jsonl", rows)
    argv = ["workload=trace", f"workload.path={path}", "workload.test_fraction=1",
            f"out_dir={tmp_path / 'run'}"]  # fmt: skip
    assert main_guard(lambda: compare.main(argv)) == 2
    err = capsys.readouterr().err
    warning, error = err.splitlines()  # test_fraction=1 does nothing here, and says so
    assert warning.startswith("warning: workload.test_fraction=1 does nothing: ")
    assert "none names 'test'; workload.file_splits=false" in error
    # the same file's rows for train, named 'test' (a dataset's test.jsonl): train says so
    for row in rows:
        row["split"] = "test"
    write_jsonl(path, rows)
    from envs.windows import window_pool

    with pytest.raises(
        ValueError,
        match=r"has no 'train' windows \(the file's rows name their "
        r"own splits and none names 'train'; workload\.file_splits=false",
    ):
        window_pool("trace", "train", 0, None, {"path": str(path)})


def test_tune_btb_checks_y_against_a_trace_s_block_before_the_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mooncake's 512-token blocks: a Y search space that can draw 256 tokens is
    refused before any trial, from the plan the trace's check made (the file is
    read once; no window is built for it)."""
    from experiments import tune_btb

    path = write_jsonl(tmp_path / "mc.jsonl", _mooncake_rows(40))
    monkeypatch.setattr(tune_btb, "window_pool_of", lambda *a: pytest.fail("windows built"))
    args = ["-m", "workload=trace", f"workload.path={path}", "workload.window_s=5",
            "y_tokens=choice(256,4096)"]  # fmt: skip
    with pytest.raises(ValueError, match=r"shorter than one 512-token block of the workload"):
        tune_btb.check_sweep(args)
    tune_btb.check_sweep([*args[:-1], "y_tokens=choice(512,4096)"])  # one block is enough


def test_a_run_records_its_trace_as_it_started_and_refuses_one_changed_since(
    tmp_path: Path,
) -> None:
    """helper-56's review: a trace rewritten during a run gave results of both files,
    recorded under the new one's sha256 (and one removed after the run read it lost
    the results)."""
    from experiments._cli import UsageError, stamp_trace, workload_file

    path = tmp_path / "mc.jsonl"
    link = tmp_path / "cur.jsonl"
    text = example_mooncake_text()
    other = text.replace('"output_length":', '"output_length":1')
    path.write_text(text)
    link.symlink_to(path)
    params = dataclasses.asdict(TraceOptions(path=str(link)))
    stamp_trace("trace", params)  # a command starts
    first = workload_file("trace", params)["workload_file"]
    (tmp_path / "new.jsonl").write_text(other)
    link.unlink()
    link.symlink_to(tmp_path / "new.jsonl")  # repointed: another file under the name
    with pytest.raises(UsageError, match=r"changed during this run \(sha256 .* none are written"):
        workload_file("trace", params)
    link.unlink()  # gone after the run read it: its results keep the stamp of the start
    assert workload_file("trace", params)["workload_file"] == first
    link.symlink_to(tmp_path / "new.jsonl")
    stamp_trace("trace", params)  # the next command stamps the file anew
    assert workload_file("trace", params)["workload_file"]["sha256"] != first["sha256"]
    stamp_trace("bursted_synthetic", {})  # and a run on a generator forgets it:
    link.unlink()
    link.symlink_to(path)  # a change now is no run's concern
    assert workload_file("trace", params)["workload_file"]["sha256"] == first["sha256"]


def test_a_path_that_is_not_a_regular_file_and_late_trace_errors_are_named_as_typed(
    tmp_path: Path, run_command: Any
) -> None:
    """/dev/null, a FIFO or a shell's <(...) exist but read once: "no such file" was
    wrong. A trace's error raised after the checks (the file gone mid-run) named
    TraceOptions.path where the command line says workload.path."""
    from envs.sim.errors import ConfigError
    from envs.workloads.readers import TraceFormatError
    from experiments._cli import TRACE_PATHS, user_error_message

    for command, option in (
        ("experiments.compare", "workload.path"),
        ("experiments.audit", "path"),
    ):
        args = [f"{option}=/dev/null", f"out_dir={tmp_path / 'out'}"]
        if option == "workload.path":
            args += ["workload=trace", "agents=none", "policies=btb"]
        proc = run_command(command, args, tmp_path)
        assert proc.returncode == 2
        assert f"{option}='/dev/null' is not a regular file" in proc.stderr
    gone = ConfigError("{path}='/x.jsonl': no such file", ("path",), "TraceOptions")
    assert user_error_message(gone, "experiments.compare", TRACE_PATHS) == (
        "error: experiments.compare: workload.path='/x.jsonl': no such file"
    )
    # audit spells its options bare: its advice names them so (helper-59's review)
    blocks = TraceFormatError("t.jsonl", 1, "hash_ids", "set {block_tokens}=", ("block_tokens",))
    assert user_error_message(blocks, "experiments.audit") == (
        "error: experiments.audit: t.jsonl, line 1, field 'hash_ids': set block_tokens="
    )
