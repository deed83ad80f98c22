"""An agent trained on a trace, evaluated on that trace's windows (experiments.trained_on):
the windows it trained and validated on are told apart from held-out ones by their
time spans in the file, whatever window length, split shares or time unit either
run read it with; evaluate and compare refuse them unless allow_seen_windows=true."""

from __future__ import annotations

import dataclasses
import json
import re
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from envs.sim.errors import SettingWarning
from envs.workloads.registry import stream_seed
from envs.workloads.trace_file import TraceOptions
from experiments.trained_on import (
    check_seen_windows,
    dataset_windows,
    seen_in_dataset,
    seen_registered,
    seen_windows,
    started_from,
    trace_notes,
    trained_path,
    trained_trace,
    trained_windows,
)
from tests.workloads.tracekit import write_jsonl


def _rows(n: int = 60) -> list[dict[str, Any]]:
    """``n`` Mooncake rows 0.5 s apart (timestamps in ms): 10 a 5 s window."""
    return [
        {"timestamp": 500 * i, "input_length": 600, "output_length": 2, "hash_ids": [i, 1000 + i]}
        for i in range(n)
    ]


def _params(path: Path, **options: Any) -> dict[str, Any]:
    return dataclasses.asdict(TraceOptions(path=str(path), **options))


# the training run's split of six 5 s windows (0-30 s): share(6, 0.25) = 2 test
# (20-30 s), share(6, 0.2) = 1 val (15-20 s), 3 train (0-15 s)
TRAINED = {"window_s": 5.0, "val_fraction": 0.2}


def _spec(path: Path, n_train: int = 3, n_val: int = 1, record: bool = True) -> Any:
    params = _params(path, **TRAINED)
    trace = trained_trace("trace", params, n_train, n_val) if record else None
    return SimpleNamespace(
        env_kwargs={"workload": "trace", "workload_params": params},
        trace_file=trace,
        registered_windows=None,
    )


@pytest.mark.parametrize(
    ("options", "split", "expected"),
    [
        # its own split: the test windows are held out, the val window is its own
        ({**TRAINED}, "test", (0, 3, 0, 1)),
        ({**TRAINED}, "val", (0, 3, 0, 0)),
        # share(6, 0.7) = 4 test windows, 10-30 s: train 10-15 s and val 15-20 s
        ({"window_s": 5.0, "test_fraction": 0.7}, "test", (1, 3, 1, 1)),
        # three 10 s windows, share(3, 0.5) = 2 test, 10-30 s: the same two
        ({"window_s": 10.0, "test_fraction": 0.5}, "test", (1, 3, 1, 1)),
        # share(3, 0.34) = 1 test window, 20-30 s: its own test windows
        ({"window_s": 10.0, "test_fraction": 0.34}, "test", (0, 3, 0, 1)),
        # windows from 12.5 s: 12.5-17.5, ..., 27.5-32.5; share(4, 0.75) = 3 test from
        # 17.5 s, which overlap the val window (15-20 s), no train window (to 15 s)
        ({"window_s": 5.0, "start_s": 12.5, "test_fraction": 0.75}, "test", (0, 3, 1, 1)),
        # the ms timestamps read as seconds: a window a row; share(60, 0.5) = 30 test
        # rows from row 30 (15,000 ms), inside the val window's span, after the train's
        ({"window_s": 5.0, "time_unit": "s", "test_fraction": 0.5}, "test", (0, 3, 1, 1)),
    ],
)
def test_the_windows_an_agent_trained_on_are_told_by_their_time_spans(
    tmp_path: Path, options: dict[str, Any], split: str, expected: tuple[int, ...]
) -> None:
    path = write_jsonl(tmp_path / "mc.jsonl", _rows())
    spec = _spec(path)
    assert seen_windows(spec, tmp_path / "agent", _params(path, **options), split, None) == expected


def test_only_the_windows_the_run_used_count(tmp_path: Path) -> None:
    """A run of workload.train_pool=2 without validation used windows 0-10 s: a test
    split from 10 s (share(6, 0.7) = 4) overlaps none of them; an agent saved before
    agent.json recorded them counts its whole train and val splits."""
    path = write_jsonl(tmp_path / "mc.jsonl", _rows())
    here = _params(path, window_s=5.0, test_fraction=0.7)
    assert seen_windows(_spec(path, 2, 0), tmp_path, here, "test", None) == (0, 2, 0, 0)
    assert seen_windows(_spec(path, record=False), tmp_path, here, "test", None) == (1, 3, 1, 1)
    # the first 2 of the 4 test windows (10-20 s): train 10-15 s and val 15-20 s
    assert seen_windows(_spec(path), tmp_path, here, "test", 2) == (1, 3, 1, 1)
    assert seen_windows(_spec(path), tmp_path, here, "test", 1) == (1, 3, 0, 1)


def test_the_same_bytes_elsewhere_are_the_same_trace_and_other_bytes_are_not(
    tmp_path: Path,
) -> None:
    path = write_jsonl(tmp_path / "mc.jsonl", _rows())
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(path.read_bytes())
    other = write_jsonl(tmp_path / "other.jsonl", _rows(61))
    spec = _spec(path)
    options = {"window_s": 5.0, "test_fraction": 0.7}
    assert seen_windows(spec, tmp_path, _params(copy, **options), "test", None) == (1, 3, 1, 1)
    assert seen_windows(spec, tmp_path, _params(other, **options), "test", None) is None
    # the trace was rewritten since: its sha256 is no longer the one recorded
    path.write_bytes(other.read_bytes())
    assert seen_windows(spec, tmp_path, _params(path, **options), "test", None) is None


def test_an_older_agent_s_relative_path_is_read_from_its_run_s_folder(tmp_path: Path) -> None:
    """Without ``trace_file``, the path its run was given, taken from the folder the
    run started in (its train.json's provenance.cwd)."""
    start = tmp_path / "where_it_ran"
    start.mkdir()
    path = write_jsonl(start / "mc.jsonl", _rows())
    run = tmp_path / "run"
    (run / "checkpoints" / "step_64").mkdir(parents=True)
    (run / "train.json").write_text(json.dumps({"train": {}, "provenance": {"cwd": str(start)}}))
    spec = _spec(Path("mc.jsonl"), record=False)
    assert trained_path(spec, run / "agent") == str(start / "mc.jsonl")
    assert trained_path(spec, run / "checkpoints" / "step_64") == str(start / "mc.jsonl")
    here = _params(path, window_s=5.0, test_fraction=0.7)
    assert seen_windows(spec, run / "agent", here, "test", None) == (1, 3, 1, 1)
    agents = {"ppo_route": SimpleNamespace(spec=spec)}
    (note,) = trace_notes(agents, {"ppo_route": str(run / "agent")}, "bursted_synthetic")
    assert note == (
        f"note: ppo_route was trained on a trace ({path}); these windows are "
        f"bursted_synthetic's: workload=trace workload.path={path} workload.window_s=5.0 "
        "workload.val_fraction=0.2 evaluates it on that trace's windows"
    )


def test_seen_windows_are_refused_in_one_line_or_warned_of_when_allowed(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mc.jsonl", _rows())
    agents = {"ppo_route": SimpleNamespace(spec=_spec(path))}
    folders = {"ppo_route": "runs/x/agent"}
    here = _params(path, window_s=5.0, test_fraction=0.7)
    said = (
        "agent ppo_route (runs/x/agent) was trained on this trace: the 4 test windows "
        "evaluated overlap in time 1 of its 3 train windows and 1 of its 1 validation "
        "window; trained with workload.test_fraction=0.25 workload.val_fraction=0.2, "
        "here workload.test_fraction=0.7 workload.val_fraction=0.0"
    )
    with pytest.raises(ValueError) as refused:
        check_seen_windows(agents, folders, "trace", here, "test", None, allow=False)
    assert str(refused.value) == (
        f"{said}: they are no held-out windows for it (evaluate it with the trace options "
        "it was trained with, or allow_seen_windows=true to run anyway)"
    )
    with pytest.warns(SettingWarning) as warned:
        check_seen_windows(agents, folders, "trace", here, "test", None, allow=True)
    assert [str(w.message) for w in warned] == [f"{said} (allow_seen_windows=true)"]
    # its own split, another workload, an agent of no folder given: nothing to say
    own = _params(path, **TRAINED)
    check_seen_windows(agents, folders, "trace", own, "test", None, allow=False)
    check_seen_windows(agents, folders, "bursted_synthetic", {}, "test", None, allow=False)
    check_seen_windows(agents, {}, "trace", here, "test", None, allow=False)


# The registered workloads. bursted_synthetic's one family, seed 20260721: at its own
# counts (5 train / 15 test) the seed's shuffle puts synthetic-0001, -0004, -0005,
# -0006 and -0014 in train and synthetic-0000, -0002, -0003, -0007, ... in test, its
# 5 validation windows are synthetic-0020 to -0024; at train_windows=1
# test_windows=1 it puts synthetic-0000 in train, synthetic-0001 in test, and the
# validation windows are synthetic-0002 onwards; at train_windows=1 test_windows=19,
# synthetic-0004 alone is train (registry.plan). Those are the windows of the
# workload's seed; a train window is drawn from it only with train_streams=shared
# (the zoo's layout, SHARED): by default (own) from a seed of its own
# (registry.stream_seed), so it is no window of any test or validation split.
SMALL = {"train_windows": 1, "test_windows": 1}
SHARED = {"train_streams": "shared"}


def _registered(n_train: int = 1, n_val: int = 1, params: Any = None, **kwargs: Any) -> Any:
    """An agent trained on bursted_synthetic at ``params`` (SMALL with SHARED),
    recorded (the first ``n_train`` / ``n_val`` windows) unless ``kwargs`` give its
    env_kwargs (an agent saved before the record)."""
    params = {**SMALL, **SHARED} if params is None else params
    if kwargs:
        return SimpleNamespace(env_kwargs=kwargs, registered_windows=None, trace_file=None)
    record = trained_windows("bursted_synthetic", params, 20260721, n_train, n_val)
    return SimpleNamespace(
        env_kwargs={"workload": "bursted_synthetic", "workload_params": params},
        registered_windows=record,
        trace_file=None,
    )


def test_a_run_records_the_registered_windows_it_used() -> None:
    shared = {**SMALL, **SHARED}
    assert trained_windows("bursted_synthetic", shared, 20260721, 1, 2) == {
        "workload": "bursted_synthetic", "params": shared, "seed": 20260721,
        "train_streams": "shared", "train": ["synthetic-0000"],
        "val": ["synthetic-0002", "synthetic-0003"],
    }  # fmt: skip
    assert trained_windows("bursted_synthetic", {}, 20260721, 2, 0)["train"] == [
        "synthetic-0001",
        "synthetic-0004",
    ]
    assert trained_windows("trace", {"path": "x"}, 0, 1, 1) is None


def test_a_run_of_the_default_records_the_seed_its_train_windows_were_drawn_from() -> None:
    """train_streams=own (the default): synthetic-0000, its train window, is drawn from
    the seed registry.stream_seed derives from the workload's, which the record keeps
    by name; its validation windows are the workload seed's (none recorded)."""
    drawn = stream_seed(20260721, "train", "own")
    assert drawn != 20260721
    assert trained_windows("bursted_synthetic", SMALL, 20260721, 1, 2) == {
        "workload": "bursted_synthetic", "params": SMALL, "seed": 20260721,
        "train_streams": "own", "stream_seeds": {"synthetic-0000": drawn},
        "train": ["synthetic-0000"], "val": ["synthetic-0002", "synthetic-0003"],
    }  # fmt: skip
    # no train window used: none drawn from a seed of its own
    record = trained_windows("bursted_synthetic", SMALL, 20260721, 0, 1)
    assert record["train_streams"] == "own" and "stream_seeds" not in record


@pytest.mark.parametrize(
    ("workload", "params", "split", "limit", "expected"),
    [
        # its own counts: its test windows are held out (and its validation windows
        # for split=val are what they are for)
        ("bursted_synthetic", SMALL, "test", None, ([], 1, [], 1)),
        ("bursted_synthetic", SMALL, "val", None, ([], 1, [], 0)),
        # the workload's own counts: its train window (drawn from the workload's seed:
        # SHARED) is the first test window and its validation window the second
        ("bursted_synthetic", {}, "test", None, (["synthetic-0000"], 1, ["synthetic-0002"], 1)),
        ("bursted_synthetic", {}, "test", 1, (["synthetic-0000"], 1, [], 1)),
        ("bursted_synthetic", {}, "val", None, ([], 1, [], 0)),
        # another workload of the same family: burst_families' synthetic windows
        ("burst_families", {}, "test", None, (["synthetic-0000"], 1, ["synthetic-0002"], 1)),
        # the same indices of another generator configuration are other windows
        ("bursted_synthetic", {"n_bursts": 2}, "test", None, ([], 1, [], 1)),
        ("bursted_synthetic_1s", {}, "test", None, ([], 1, [], 1)),
    ],
)
def test_the_registered_windows_an_agent_trained_on_are_told_by_family_seed_and_index(
    workload: str, params: Any, split: str, limit: Any, expected: Any
) -> None:
    spec = _registered()
    assert seen_registered(spec, workload, params, 20260721, split, limit) == expected
    # another seed draws other windows
    assert seen_registered(spec, workload, params, 7, split, limit)[::2] == ([], [])


def test_an_agent_saved_before_the_record_counts_its_whole_train_and_val_splits() -> None:
    """As the zoo's: the workload, parameters and seed of its env_kwargs, at the
    workload's own counts: no test window of the same counts is one of its own."""
    old = _registered(workload="burst_families", workload_params={}, data_seed=20260721)
    for workload in ("bursted_synthetic", "burst_families", "bursted_art", "mixed"):
        found = seen_registered(old, workload, {}, 20260721, "test", None)
        assert found is not None and found[::2] == ([], [])
    assert seen_registered(old, "burst_families", {}, 20260721, "test", None) == ([], 20, [], 20)
    # at train_windows=1 test_windows=19 four of its synthetic train windows are test
    found = seen_registered(
        old, "bursted_synthetic", {"train_windows": 1, "test_windows": 19}, 20260721, "test", None
    )
    assert found == (
        ["synthetic-0001", "synthetic-0005", "synthetic-0006", "synthetic-0014"], 20, [], 20
    )  # fmt: skip
    # env_kwargs without a workload: the env's default, bursted_synthetic
    assert seen_registered(_registered(n_windows=2), "bursted_synthetic", SMALL, 20260721,
                           "test", None) == (["synthetic-0001"], 5, [], 5)  # fmt: skip
    # an agent of a trace is the trace check's
    trace = SimpleNamespace(
        env_kwargs={"workload": "trace", "workload_params": {"path": "x"}},
        registered_windows=None,
        trace_file=None,
    )
    assert seen_registered(trace, "bursted_synthetic", {}, 20260721, "test", None) is None


def test_seen_registered_windows_are_refused_in_one_line_or_warned_of_when_allowed() -> None:
    agents = {"ppo_route": SimpleNamespace(spec=_registered())}
    folders = {"ppo_route": "runs/x/agent"}
    said = (
        "agent ppo_route (runs/x/agent) was trained on some of these windows (seed 20260721): "
        "the 15 test windows evaluated include 1 of its 1 train window (synthetic-0000) and "
        "1 of its 1 validation window (synthetic-0002); trained on bursted_synthetic "
        "(train_windows=1 test_windows=1 train_streams=shared), here bursted_synthetic (its own "
        "window counts)"
    )
    with pytest.raises(ValueError) as refused:
        check_seen_windows(agents, folders, "bursted_synthetic", {}, "test", None, allow=False)
    assert str(refused.value) == (
        f"{said}: they are no held-out windows for it (evaluate it with the workload and "
        "window counts it was trained with, or allow_seen_windows=true to run anyway)"
    )
    with pytest.warns(SettingWarning) as warned:
        check_seen_windows(agents, folders, "bursted_synthetic", {}, "test", None, allow=True)
    assert [str(w.message) for w in warned] == [f"{said} (allow_seen_windows=true)"]
    # its own counts, another seed, an agent of no folder given: nothing to say
    check_seen_windows(agents, folders, "bursted_synthetic", SMALL, "test", None, allow=False)
    check_seen_windows(agents, folders, "bursted_synthetic", {}, "test", None, False, seed=7)
    check_seen_windows(agents, {}, "bursted_synthetic", {}, "test", None, allow=False)
    # more than three seen are named three and a count
    old = {"old": SimpleNamespace(spec=_registered(workload_params={}))}
    said = re.escape(
        "the 19 test windows evaluated include 4 of its 5 train windows (synthetic-0001, "
        "synthetic-0005, synthetic-0006, ... (1 more)); trained on bursted_synthetic (its own "
        "window counts, train_streams=shared), here bursted_synthetic (train_windows=1 "
        "test_windows=19)"
    )
    counts = {"train_windows": 1, "test_windows": 19}
    with pytest.raises(ValueError, match=said):
        check_seen_windows(old, {"old": "o"}, "bursted_synthetic", counts, "test", None, False)


def test_an_agent_of_the_default_is_refused_only_its_validation_window_at_other_counts() -> None:
    """Trained at train_windows=1 test_windows=1 with the default train_streams=own:
    its train window synthetic-0000 is drawn from a seed of its own, so it is not the
    first test window of the workload's own counts (synthetic-0000 of the workload's
    seed); its validation window synthetic-0002 is a test window there and refused.
    At the seed its train window was drawn from, that window is refused."""
    spec = _registered(params=SMALL)
    found = seen_registered(spec, "bursted_synthetic", {}, 20260721, "test", None)
    assert found == ([], 1, ["synthetic-0002"], 1)
    agents, folders = {"ppo_route": SimpleNamespace(spec=spec)}, {"ppo_route": "runs/x/agent"}
    with pytest.raises(ValueError) as refused:
        check_seen_windows(agents, folders, "bursted_synthetic", {}, "test", None, allow=False)
    assert str(refused.value) == (
        "agent ppo_route (runs/x/agent) was trained on some of these windows (seed 20260721): "
        "the 15 test windows evaluated include 1 of its 1 validation window (synthetic-0002); "
        "trained on bursted_synthetic (train_windows=1 test_windows=1), here "
        "bursted_synthetic (its own window counts): they are no held-out windows for it "
        "(evaluate it with the workload and window counts it was trained with, or "
        "allow_seen_windows=true to run anyway)"
    )
    # the windows are keyed by the seed they are drawn from: at that seed, the
    # workload's own counts test first on synthetic-0000, the very window it trained on
    drawn = stream_seed(20260721, "train", "own")
    assert seen_registered(spec, "bursted_synthetic", {}, drawn, "test", 1) == (
        ["synthetic-0000"], 1, [], 1
    )  # fmt: skip


def test_docs_give_the_refusals_of_an_agent_of_the_default_and_of_shared() -> None:
    """docs/workloads.md ("The registry and splits") quotes the line an agent trained
    at train_windows=1 test_windows=1 is refused at the workload's own counts: its
    validation window alone by default, its train window too with train_streams=shared;
    each quote is the line check_seen_windows gives, up to its ": ..."."""
    root = Path(__file__).resolve().parents[2]
    text = (root / "docs" / "workloads.md").read_text()
    quoted = re.findall(
        r"`error: experiments\.evaluate: (agent ppo_route \(runs/t/agent\)[^`]*): \.\.\.`", text
    )
    said = []
    for params in (SMALL, {**SMALL, **SHARED}):
        agents = {"ppo_route": SimpleNamespace(spec=_registered(params=params))}
        with pytest.raises(ValueError) as refused:
            check_seen_windows(agents, {"ppo_route": "runs/t/agent"}, "bursted_synthetic", {},
                               "test", None, allow=False)  # fmt: skip
        said.append(str(refused.value).partition(": they are no held-out")[0])
    assert quoted == said


def _compose(name: str, overrides: list[str]) -> Any:
    from hydra import compose, initialize_config_dir

    from experiments.config import register_configs

    register_configs()
    root = Path(__file__).resolve().parents[2]
    with initialize_config_dir(config_dir=str(root / "conf"), version_base="1.3"):
        return compose(config_name=name, overrides=overrides)


@pytest.mark.slow
def test_train_records_the_registered_windows_and_evaluate_and_compare_refuse_them(
    tmp_path: Path,
) -> None:
    """workload=tiny trained at train_windows=1 test_windows=1 train_streams=shared (a
    run of no RL step: the agent is saved as built) trained on synthetic-0000 of the
    workload's seed, tiny's first test window at its own counts: evaluate and compare
    refuse it before any run folder, run it with allow_seen_windows=true (a warning,
    the option in results.json) and evaluate it without a word at the counts it was
    trained with."""
    from agents.algorithms import load_spec
    from envs.files import read_json
    from experiments import compare
    from experiments.evaluate import evaluate
    from experiments.train import train

    counts = ["+workload.params.train_windows=1", "+workload.params.test_windows=1"]
    shared = "+workload.params.train_streams=shared"
    train(_compose("train", ["workload=tiny", *counts, shared, "logger=none",
                             "train.total_timesteps=0",
                             "train.evaluate=false", "train.progress=false",
                             f"out_dir={tmp_path / 'run'}"]))  # fmt: skip
    agent = tmp_path / "run" / "agent"
    spec = load_spec(agent)
    tiny = {"n_bursts": 2, "burst_requests": 40, "n_decoys": 6, "burst_window_s": 4.0}
    assert spec.registered_windows == [{
        "workload": "bursted_synthetic", "params": {**tiny, **SMALL, **SHARED},
        "seed": 20260721, "train_streams": "shared", "train": ["synthetic-0000"], "val": [],
    }]  # fmt: skip
    seen = re.escape(
        "was trained on some of these windows (seed 20260721): the 1 test window evaluated "
        "is 1 of its 1 train window (synthetic-0000)"
    )
    for allow in (False, True):
        out = tmp_path / f"eval_{allow}"
        cfg = _compose("evaluate", [f"checkpoint=[{agent}]", "workload=tiny", "logger=none",
                                    "policies=[cache_aware]", "progress=false",
                                    f"allow_seen_windows={allow}", f"out_dir={out}"])  # fmt: skip
        if allow:
            with pytest.warns(SettingWarning, match=seen):
                evaluate(cfg)
            assert read_json(out / "results.json")["config"]["allow_seen_windows"] is True
        else:
            with pytest.raises(ValueError, match=seen):
                evaluate(cfg)
            assert not out.exists()
    with pytest.raises(ValueError, match=seen):
        compare.main([f"agents={agent}", "params=" + ",".join(f"{k}={v}" for k, v in tiny.items()),
                      "policies=cache_aware", "windows=1", "charts=false", "progress=false",
                      f"out_dir={tmp_path / 'cmp'}"])  # fmt: skip
    assert not (tmp_path / "cmp").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SettingWarning)
        evaluate(_compose("evaluate", [f"checkpoint=[{agent}]", "workload=tiny", *counts,
                                       "logger=none", "policies=[cache_aware]", "progress=false",
                                       f"out_dir={tmp_path / 'own'}"]))  # fmt: skip
    assert (tmp_path / "own" / "results.json").is_file()


def test_improvement_rounds_count_a_registered_workload_s_validation_windows() -> None:
    """Rounds score on the first workload.val_windows validation windows whether or not
    PPO validates: tiny's 1, burst_families' 5 of each of its 4 families (null: all);
    without rounds or validation, none."""
    from experiments.train import scored_val_windows

    rounds = "improvement.iterations=1"
    assert scored_val_windows(_compose("train", ["workload=tiny", rounds]), []) == 1
    every = ["workload=burst_families", rounds, "workload.val_windows=null"]
    assert scored_val_windows(_compose("train", every), []) == 20
    assert scored_val_windows(_compose("train", ["workload=tiny"]), []) == 0


# A dataset make_dataset writes of a registered workload holds its windows, its
# dataset_info.json listing them: the same windows as the workload's, wherever read.
TINY = {"n_bursts": 2, "burst_requests": 40, "n_decoys": 6, "burst_window_s": 4.0}


def _dataset(folder: Path, seed: int = 20260721, streams: str = "shared", **counts: Any) -> Path:
    """bursted_synthetic at TINY written by make_dataset in ``folder`` (seed
    ``seed``, window counts ``counts``, its train windows drawn as ``streams`` says:
    train_streams=shared unless told, the workload's seed; "own" is the default)."""
    from experiments.make_dataset import make_dataset

    params = {**TINY, "train_streams": streams} if streams == "shared" else TINY
    make_dataset("bursted_synthetic", folder, seed, params=params, progress=False, **counts)
    return folder


def test_a_run_on_a_dataset_s_split_records_the_registered_windows_it_holds(
    tmp_path: Path,
) -> None:
    """At train_windows=1 test_windows=1 (train_streams=shared), train.jsonl is
    synthetic-0000 of the workload's seed (and test.jsonl synthetic-0001), recorded
    with the generator's parameters alone (the dataset's train_streams is its
    families'; no stream_seeds); a trace that is no such dataset records none."""
    split = _dataset(tmp_path / "d", train_windows=1, test_windows=1) / "train.jsonl"
    record = trained_windows("trace", _params(split), 0, 1, 0)
    assert {k: v for k, v in record.items() if k != "families"} == {
        "workload": "bursted_synthetic", "params": TINY, "seed": 20260721,
        "train": ["synthetic-0000"], "val": [], "dataset": str(split.resolve()),
    }  # fmt: skip
    assert list(record["families"]) == ["synthetic"]
    assert record["families"]["synthetic"]["n_bursts"] == 2
    # no train window used: none recorded; a Mooncake file: no record
    assert trained_windows("trace", _params(split), 0, 0, 0)["train"] == []
    mooncake = write_jsonl(tmp_path / "mc.jsonl", _rows())
    assert trained_windows("trace", _params(mooncake), 0, 1, 0) is None
    # the test split with file_splits=false read as train: synthetic-0001
    test = _params(split.with_name("test.jsonl"), file_splits=False, test_fraction=0.0)
    assert trained_windows("trace", test, 0, 1, 0)["train"] == ["synthetic-0001"]


def test_an_agent_trained_on_a_dataset_s_split_is_refused_the_workload_s_same_windows(
    tmp_path: Path,
) -> None:
    """Trained on train.jsonl (synthetic-0000 of the workload's seed: the dataset
    made with train_streams=shared): the workload at its own counts tests
    first on synthetic-0000; at the dataset's counts synthetic-0001 is held out;
    another generator configuration is other windows."""
    split = _dataset(tmp_path / "d", train_windows=1, test_windows=1) / "train.jsonl"
    params = _params(split)
    spec = SimpleNamespace(
        env_kwargs={"workload": "trace", "workload_params": params},
        trace_file=trained_trace("trace", params, 1, 0),
        registered_windows=trained_windows("trace", params, 0, 1, 0),
    )
    found = seen_registered(spec, "bursted_synthetic", TINY, 20260721, "test", None)
    assert found == (["synthetic-0000"], 1, [], 0)
    here = {**TINY, **SMALL}
    assert seen_registered(spec, "bursted_synthetic", here, 20260721, "test", None) == (
        [], 1, [], 0
    )  # fmt: skip
    assert seen_registered(spec, "bursted_synthetic", {}, 20260721, "test", None) == (
        [], 1, [], 0
    )  # fmt: skip
    agents = {"ppo_route": SimpleNamespace(spec=spec)}
    folders = {"ppo_route": "runs/x/agent"}
    said = (
        "agent ppo_route (runs/x/agent) was trained on some of these windows (seed 20260721): "
        "the 1 test window evaluated is 1 of its 1 train window (synthetic-0000); trained on "
        f"{split.resolve()} (a make_dataset split of bursted_synthetic, seed 20260721), here "
        "bursted_synthetic (its own window counts)"
    )
    with pytest.raises(ValueError) as refused:
        check_seen_windows(agents, folders, "bursted_synthetic", TINY, "test", 1, allow=False)
    assert str(refused.value).startswith(f"{said}: they are no held-out windows for it")
    with pytest.warns(SettingWarning):
        seen = check_seen_windows(agents, folders, "bursted_synthetic", TINY, "test", 1, True)
    assert seen == ["ppo_route"]
    # every row of train.jsonl is a train window: the held-out ones are test.jsonl's
    # (synthetic-0001), which is refused it none
    test = split.with_name("test.jsonl")
    (note,) = trace_notes(agents, folders, "tiny", seen)
    assert note == (
        f"note: ppo_route was trained on a trace ({split}); some of these windows of tiny are "
        f"that trace's (allow_seen_windows=true): workload=trace workload.path={test} "
        "evaluates it on its dataset's held-out windows (the trace holds no test window)"
    )
    (note,) = trace_notes(agents, folders, "tiny")
    assert "; these windows are tiny's: " in note
    check_seen_windows(agents, folders, "trace", _params(test), "test", None, allow=False)
    # read by time (file_splits=false), train.jsonl's own windows: its last is a test window
    by_time = _params(split, file_splits=False, test_fraction=0.5)
    spec.env_kwargs["workload_params"] = by_time
    (note,) = trace_notes(agents, folders, "tiny")
    assert note.endswith(
        f"workload.path={split} workload.test_fraction=0.5 workload.file_splits=false "
        "evaluates it on that trace's windows"
    )


def test_a_dataset_s_split_evaluated_is_refused_the_registered_windows_an_agent_used(
    tmp_path: Path,
) -> None:
    """The dataset at the workload's own counts: its test.jsonl holds synthetic-0000
    and -0002 (of 15 test windows), the train and validation windows of a run at
    train_windows=1 test_windows=1; an agent saved before the record (the workload's
    own counts: trained on synthetic-0001, ...) is refused the 1/1 dataset's test.jsonl
    (synthetic-0001); another seed's dataset holds other windows. (The agent's
    windows of the workload's seed: train_streams=shared.)"""
    own = _dataset(tmp_path / "own") / "test.jsonl"
    small = _dataset(tmp_path / "small", train_windows=1, test_windows=1) / "test.jsonl"
    other = _dataset(tmp_path / "seed7", 7) / "test.jsonl"
    spec = _registered(params={**TINY, **SMALL, **SHARED})
    assert seen_in_dataset(spec, _params(own), "test", None) == (
        ["synthetic-0000"], 1, ["synthetic-0002"], 1
    )  # fmt: skip
    assert seen_in_dataset(spec, _params(small), "test", None) == ([], 1, [], 1)
    assert seen_in_dataset(spec, _params(other), "test", None) == ([], 1, [], 1)
    old = _registered(workload="bursted_synthetic", workload_params=TINY, data_seed=20260721)
    assert seen_in_dataset(old, _params(small), "test", None) == (["synthetic-0001"], 5, [], 5)
    # a trace that is no dataset, an agent of a trace that is none: nothing to tell
    mooncake = write_jsonl(tmp_path / "mc.jsonl", _rows())
    assert seen_in_dataset(spec, _params(mooncake), "test", None) is None
    assert seen_in_dataset(_spec(mooncake), _params(own), "test", None) is None
    agents = {"ppo_route": SimpleNamespace(spec=spec)}
    said = re.escape(
        "agent ppo_route (runs/x/agent) was trained on some of these windows (seed 20260721): "
        "the 2 test windows evaluated include 1 of its 1 train window (synthetic-0000) and 1 of "
        "its 1 validation window (synthetic-0002); trained on bursted_synthetic "
        "(train_windows=1 test_windows=1 train_streams=shared), here "
        f"{own} (a make_dataset split of bursted_synthetic, seed 20260721): they are"
    )
    with pytest.raises(ValueError, match=said):
        check_seen_windows(agents, {"ppo_route": "runs/x/agent"}, "trace", _params(own),
                           "test", 2, allow=False)  # fmt: skip


def test_a_dataset_s_split_copied_without_its_record_is_said_to_run_as_held_out(
    tmp_path: Path,
) -> None:
    """test.jsonl of the dataset at the workload's own counts holds synthetic-0000 and
    -0002, an agent's train (train_streams=shared) and validation windows (refused it,
    beside its dataset_info.json). Copied elsewhere without that file, it ran as held-out in
    silence: its windows are known by name alone, which another seed names alike. It
    still runs, with one warning saying why; a copy of the 1/1 dataset's test.jsonl
    (synthetic-0001, no window of the agent's) is told nothing."""
    own = _dataset(tmp_path / "own") / "test.jsonl"
    small = _dataset(tmp_path / "small", train_windows=1, test_windows=1) / "test.jsonl"
    spec = _registered(params={**TINY, **SMALL, **SHARED})
    agents = {"ppo_route": SimpleNamespace(spec=spec)}
    folders = {"ppo_route": "runs/x/agent"}
    copy = tmp_path / "elsewhere" / "test.jsonl"
    copy.parent.mkdir()
    copy.write_bytes(own.read_bytes())
    with pytest.warns(SettingWarning) as caught:
        seen = check_seen_windows(agents, folders, "trace", _params(copy), "test", 2, False)
    assert seen == []  # it runs
    assert [str(w.message) for w in caught] == [
        "agent ppo_route (runs/x/agent) was trained on windows of bursted_synthetic named as "
        "2 windows evaluated here are (synthetic-0000, synthetic-0002), but "
        f"{copy} has no dataset_info.json beside it (a make_dataset split copied without "
        "it?): a name alone does not tell the same window (its family's configuration and "
        "seed), so it runs as held-out (keep the split beside its dataset_info.json to check)"
    ]
    # with its record beside it again: refused, as in its dataset's folder
    (copy.parent / "dataset_info.json").write_bytes((own.parent / "dataset_info.json").read_bytes())
    with pytest.raises(ValueError, match="they are no held-out windows for it"):
        check_seen_windows(agents, folders, "trace", _params(copy), "test", 2, allow=False)
    other = tmp_path / "other" / "test.jsonl"
    other.parent.mkdir()
    other.write_bytes(small.read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_seen_windows(agents, folders, "trace", _params(other), "test", 2, False) == []


def test_a_dataset_s_folder_read_with_format_hub_is_checked_as_its_split_file(
    tmp_path: Path,
) -> None:
    """The 1/1 dataset's folder (train_streams=shared) read with format=hub:
    hub_split=train is its train.jsonl (synthetic-0000 of the workload's seed),
    recorded as that file; an agent trained on the
    folder is refused the workload's first test window (synthetic-0000); an agent
    trained on the workload at its own counts (synthetic-0001 among its 5 train
    windows) is refused the folder's test split (synthetic-0001), as test.jsonl."""
    folder = _dataset(tmp_path / "d", train_windows=1, test_windows=1)
    hub = _params(folder, format="hub")
    record = trained_windows("trace", hub, 0, 1, 0)
    assert record is not None and record["train"] == ["synthetic-0000"]
    assert record["dataset"] == str((folder / "train.jsonl").resolve())
    spec = SimpleNamespace(
        env_kwargs={"workload": "trace", "workload_params": hub},
        trace_file=trained_trace("trace", hub, 1, 0),
        registered_windows=[record],
    )
    assert seen_registered(spec, "bursted_synthetic", TINY, 20260721, "test", None) == (
        ["synthetic-0000"], 1, [], 0
    )  # fmt: skip
    # the note points at the folder's test split (train.jsonl holds no test window)
    (note,) = trace_notes({"a": SimpleNamespace(spec=spec)}, {"a": "runs/x/agent"}, "tiny")
    assert note.endswith(
        f"workload=trace workload.path={folder} workload.format=hub workload.hub_split=test "
        "evaluates it on its dataset's held-out windows (the trace holds no test window)"
    )
    # the other way: an agent of the workload's own counts trained on synthetic-0001
    old = _registered(workload="bursted_synthetic", workload_params=TINY, data_seed=20260721)
    test = _params(folder, format="hub", hub_split="test")
    assert seen_in_dataset(old, test, "test", None) == (["synthetic-0001"], 5, [], 5)
    with pytest.raises(ValueError, match=re.escape(f"here {folder} (a make_dataset split")):
        check_seen_windows({"a": SimpleNamespace(spec=old)}, {"a": "runs/x/agent"}, "trace",
                           test, "test", None, allow=False)  # fmt: skip


def test_a_dataset_of_the_default_keys_its_train_windows_by_the_seed_they_were_drawn_from(
    tmp_path: Path,
) -> None:
    """The 1/1 dataset made with the default train_streams=own: train.jsonl's
    synthetic-0000 is drawn from the seed registry.stream_seed derives, test.jsonl's
    synthetic-0001 from the workload's. An agent trained on the workload's train
    window with the default (the same window, the same seed) is refused train.jsonl
    read by time (its windows the trace's test split); one trained with
    train_streams=shared (synthetic-0000 of the workload's seed: another window) is
    not. An agent trained on that train.jsonl records the derived seed, and is not
    refused the workload's first test window (synthetic-0000 of the workload's seed)."""
    drawn = stream_seed(20260721, "train", "own")
    split = _dataset(tmp_path / "d", streams="own", train_windows=1, test_windows=1)
    split = split / "train.jsonl"
    dataset = dataset_windows(split)
    assert dataset is not None
    assert {name: key[2:] for name, key in dataset["keys"].items()} == {
        "synthetic-0000": (drawn, 0), "synthetic-0001": (20260721, 1)
    }  # fmt: skip
    by_time = _params(split, file_splits=False, test_fraction=0.5)
    own = _registered(params={**TINY, **SMALL})
    assert seen_in_dataset(own, by_time, "test", None) == (["synthetic-0000"], 1, [], 1)
    shared = _registered(params={**TINY, **SMALL, **SHARED})
    assert seen_in_dataset(shared, by_time, "test", None) == ([], 1, [], 1)
    agents, folders = {"ppo_route": SimpleNamespace(spec=own)}, {"ppo_route": "runs/x/agent"}
    said = re.escape(
        "the 1 test window evaluated is 1 of its 1 train window (synthetic-0000); trained on "
        "bursted_synthetic (train_windows=1 test_windows=1), here "
        f"{split} (a make_dataset split of bursted_synthetic, seed 20260721): they are"
    )
    with pytest.raises(ValueError, match=said):
        check_seen_windows(agents, folders, "trace", by_time, "test", None, allow=False)
    check_seen_windows({"s": SimpleNamespace(spec=shared)}, {"s": "s"}, "trace", by_time,
                       "test", None, allow=False)  # fmt: skip
    # trained on the dataset's train.jsonl: its record keeps the seed drawn from
    params = _params(split)
    record = trained_windows("trace", params, 0, 1, 0)
    assert record["stream_seeds"] == {"synthetic-0000": drawn}
    spec = SimpleNamespace(
        env_kwargs={"workload": "trace", "workload_params": params},
        trace_file=trained_trace("trace", params, 1, 0),
        registered_windows=record,
    )
    assert seen_registered(spec, "bursted_synthetic", TINY, 20260721, "test", None) == (
        [], 1, [], 0
    )  # fmt: skip


def test_a_run_started_from_an_agent_records_its_windows_and_those_it_started_from() -> None:
    """started_from: the agent's own records, then those it started from itself, each
    once; an agent saved before the record enters with its whole train and val
    splits (bursted_synthetic at its own counts: synthetic-0001, -0004, -0005, -0006,
    -0014 and synthetic-0020 to -0024)."""
    first = _registered(params={**TINY, **SMALL, **SHARED})
    first.env_kwargs["workload_params"] = {**TINY, **SMALL, **SHARED}
    entries = started_from("runs/a/agent", first)
    assert entries == [
        {
            "agent": "runs/a/agent",
            "workload": "bursted_synthetic",
            "workload_params": {**TINY, **SMALL, **SHARED},
            "trace_file": None,
            "registered_windows": [first.registered_windows],
        }
    ]
    second = SimpleNamespace(
        env_kwargs={"workload": "bursted_synthetic", "workload_params": TINY},
        trace_file=None,
        registered_windows=trained_windows("bursted_synthetic", TINY, 20260721, 2, 0),
        started_from=entries,
    )
    chain = started_from("runs/b/agent", second)
    assert [e["agent"] for e in chain] == ["runs/b/agent", "runs/a/agent"]
    assert chain[0]["registered_windows"][0]["train"] == ["synthetic-0001", "synthetic-0004"]
    # an agent it started from twice (resumed on the same windows) is entered once
    again = SimpleNamespace(**{**vars(second), "started_from": chain})
    assert [e["agent"] for e in started_from("runs/b/last", again)] == [
        "runs/b/last",
        "runs/a/agent",
    ]
    old = _registered(workload="bursted_synthetic", workload_params={}, data_seed=20260721)
    (entry,) = started_from("agents/zoo/x", old)
    (record,) = entry["registered_windows"]
    assert record["train"] == [
        "synthetic-0001", "synthetic-0004", "synthetic-0005", "synthetic-0006", "synthetic-0014"
    ]  # fmt: skip
    assert record["val"] == [f"synthetic-00{i}" for i in range(20, 25)]
    # it is checked as the agent's own: the workload at its own counts tests first on
    # synthetic-0000, the first agent's train window
    started = SimpleNamespace(spec=second)
    folders = {"ppo_route": "runs/b/agent"}
    said = re.escape(
        "agent ppo_route (runs/b/agent) started from runs/a/agent, which was trained on "
        "some of these windows (seed 20260721): the 1 test window evaluated is 1 of its 1 "
        "train window (synthetic-0000); trained on bursted_synthetic (train_windows=1 "
        "test_windows=1 train_streams=shared), here bursted_synthetic (its own window counts): "
        "they are"
    )
    agents = {"ppo_route": started}
    with pytest.raises(ValueError, match=said):
        check_seen_windows(agents, folders, "bursted_synthetic", TINY, "test", 1, allow=False)
    # its own test windows at its counts hold none of either's
    none = SimpleNamespace(spec=SimpleNamespace(**{**vars(second), "started_from": []}))
    check_seen_windows({"x": none}, {"x": "x"}, "bursted_synthetic", TINY, "test", 1, False)


def test_a_trace_agent_it_started_from_is_checked_on_its_trace(tmp_path: Path) -> None:
    """An agent started from one trained on mc.jsonl is refused that trace's windows
    as that agent is: the test split from 10 s (test_fraction=0.7) overlaps its third
    train window (10-15 s) and its val window (15-20 s), not the first two (0-10 s);
    one saved before trace_file counts its whole splits, the file as it is now."""
    path = write_jsonl(tmp_path / "mc.jsonl", _rows())
    here = _params(path, window_s=5.0, test_fraction=0.7)
    for n_train, n_val, record, counts in (
        (3, 1, True, (1, 3, 1, 1)),
        (2, 0, True, (0, 2, 0, 0)),
        (2, 0, False, (1, 3, 1, 1)),
    ):
        (entry,) = started_from(str(tmp_path / "a"), _spec(path, n_train, n_val, record))
        assert entry["trace_file"]["sha256"] is not None
        assert entry["trace_file"]["train_windows"] == (n_train if record else None)
        kwargs = {"workload": "trace", "workload_params": entry["workload_params"]}
        view = SimpleNamespace(env_kwargs=kwargs, trace_file=entry["trace_file"])
        assert seen_windows(view, entry["agent"], here, "test", None) == counts
        spec = SimpleNamespace(**vars(_registered()), started_from=[entry])
        agents, folders = {"b": SimpleNamespace(spec=spec)}, {"b": "b"}
        if counts[0] == 0:
            check_seen_windows(agents, folders, "trace", here, "test", None, allow=False)
            continue
        said = f"started from {tmp_path / 'a'}, which was trained on this trace: the 4 test"
        with pytest.raises(ValueError, match=re.escape(said)):
            check_seen_windows(agents, folders, "trace", here, "test", None, allow=False)


def test_agent_json_s_started_from_is_checked_on_load(tmp_path: Path) -> None:
    from agents.algorithms import load_spec

    agent = tmp_path / "agent"
    agent.mkdir()
    base = {"algo": "ppo", "env": "route", "env_kwargs": {}}
    entry = {
        "agent": "a",
        "workload": "bursted_synthetic",
        "workload_params": {},
        "trace_file": None,
        "registered_windows": None,
    }
    for started, said in (
        ({"agent": "a"}, "started_from must be a JSON array, got {'agent': 'a'}"),
        (["a"], "started_from[0] must be a JSON object, got 'a'"),
        ([{**entry, "x": 1}], "started_from[0]: unknown key 'x'; known: agent, workload, "),
        ([{"agent": "a"}], "started_from[0]: missing key 'registered_windows'; known: "),
        (
            [{**entry, "trace_file": "f"}],
            "started_from[0].trace_file must be a JSON object or null, got 'f'",
        ),
    ):
        (agent / "agent.json").write_text(json.dumps({**base, "started_from": started}))
        with pytest.raises(ValueError, match=re.escape(f"{agent / 'agent.json'}: {said}")):
            load_spec(agent)
    (agent / "agent.json").write_text(json.dumps({**base, "started_from": [entry]}))
    assert load_spec(agent).started_from == [entry]


@pytest.mark.slow
def test_train_from_an_agent_records_its_windows_and_evaluate_refuses_them(
    tmp_path: Path,
) -> None:
    """tiny at train_windows=1 test_windows=1 train_streams=shared trains on
    synthetic-0000 of the workload's seed; a run from its
    weights at tiny's own counts (train.init_from, or resume=) trains on others, and
    evaluate refuses it tiny's first test window, synthetic-0000; resumed at the same
    counts, there is nothing more to record."""
    from agents.algorithms import load_spec
    from experiments.evaluate import evaluate
    from experiments.train import train

    quiet = ["logger=none", "train.total_timesteps=0", "train.evaluate=false",
             "train.progress=false"]  # fmt: skip
    counts = ["+workload.params.train_windows=1", "+workload.params.test_windows=1",
              "+workload.params.train_streams=shared"]  # fmt: skip
    train(_compose("train", ["workload=tiny", *counts, *quiet, f"out_dir={tmp_path / 'a'}"]))
    first = tmp_path / "a" / "agent"
    assert load_spec(first).started_from == []
    said = re.escape(f"started from {first}, which was trained on some of these windows")
    for option in ("train.init_from", "resume"):
        run = tmp_path / option
        train(_compose("train", ["workload=tiny", f"{option}={first}", *quiet, f"out_dir={run}"]))
        spec = load_spec(run / "agent")
        assert spec.registered_windows[0]["train"] == ["synthetic-0001", "synthetic-0004"]
        (entry,) = spec.started_from
        assert entry["agent"] == str(first)
        assert entry["registered_windows"] == load_spec(first).registered_windows
        cfg = _compose("evaluate", [f"checkpoint=[{run / 'agent'}]", "workload=tiny",
                                    "logger=none", "policies=[cache_aware]", "progress=false",
                                    f"out_dir={tmp_path / 'eval'}"])  # fmt: skip
        with pytest.raises(ValueError, match=said):
            evaluate(cfg)
    again = tmp_path / "again"
    train(_compose("train", ["workload=tiny", *counts, f"resume={first}", *quiet,
                             f"out_dir={again}"]))  # fmt: skip
    assert load_spec(again / "agent").started_from == []


# rising_load at its own counts, seed 20260721: its train windows are rising-0002,
# -0003, -0006, -0014 and -0016 (registry.plan); at train_windows=1 test_windows=19
# rising-0016 alone is train, and rising-0002 and -0003 are test windows.
RISING_1_19 = {"train_windows": 1, "test_windows": 19}


def _cloned(main: Any, episodes: int = 1) -> Any:
    """An agent whose ``registered_windows`` list ``main`` (None: trained on a Mooncake
    trace) then rising_load's first ``episodes`` train windows (imitation.workloads;
    train_streams=shared, as the training workload's)."""
    rising = trained_windows("rising_load", SHARED, 20260721, episodes, 0)
    if main is None:
        return SimpleNamespace(
            env_kwargs={"workload": "trace", "workload_params": {"path": "mc.jsonl"}},
            trace_file=None,
            registered_windows=[rising],
        )
    return SimpleNamespace(
        env_kwargs={"workload": "bursted_synthetic", "workload_params": main["params"]},
        trace_file=None,
        registered_windows=[main, rising],
    )


def test_the_workloads_an_agent_was_cloned_on_are_refused_too() -> None:
    """An agent trained on bursted_synthetic at SMALL (synthetic-0000) and cloned on
    rising_load's first train window (rising-0002), both with train_streams=shared:
    rising_load at 1/19 tests on rising-0002 (the first 2 test windows are rising-0000
    and -0001, held out); at its own counts rising-0002 is train. Its own workload is
    checked as before."""
    main = trained_windows("bursted_synthetic", {**SMALL, **SHARED}, 20260721, 1, 1)
    spec = _cloned(main)
    assert seen_registered(spec, "rising_load", RISING_1_19, 20260721, "test", None) == (
        ["rising-0002"], 1, [], 0
    )  # fmt: skip
    assert seen_registered(spec, "rising_load", RISING_1_19, 20260721, "test", 2)[::2] == ([], [])
    assert seen_registered(spec, "rising_load", {}, 20260721, "test", None)[::2] == ([], [])
    assert seen_registered(spec, "bursted_synthetic", {}, 20260721, "test", None) == (
        ["synthetic-0000"], 1, ["synthetic-0002"], 1
    )  # fmt: skip
    # two demonstration episodes: rising-0002 and -0003
    found = seen_registered(_cloned(main, 2), "rising_load", RISING_1_19, 20260721, "test", None)
    assert found == (["rising-0002", "rising-0003"], 2, [], 0)
    agents, folders = {"bc": SimpleNamespace(spec=spec)}, {"bc": "runs/bc/agent"}
    said = (
        "agent bc (runs/bc/agent) was trained on some of these windows (seed 20260721): the "
        "19 test windows evaluated include 1 of its 1 train window (rising-0002); trained on "
        "rising_load (its own window counts, train_streams=shared), here rising_load "
        "(train_windows=1 test_windows=19): they are no held-out windows for it"
    )
    with pytest.raises(ValueError, match=re.escape(said)):
        check_seen_windows(agents, folders, "rising_load", RISING_1_19, "test", None, False)
    check_seen_windows(agents, folders, "rising_load", {}, "test", None, allow=False)
    check_seen_windows(agents, folders, "rising_load", {}, "val", None, allow=False)
    # an agent of a trace that is no dataset, cloned on rising_load: that workload's
    trace = _cloned(None)
    found = seen_registered(trace, "rising_load", RISING_1_19, 20260721, "test", None)
    assert found == (["rising-0002"], 1, [], 0)
    with pytest.raises(ValueError, match=re.escape("include 1 of its 1 train window (rising")):
        check_seen_windows({"t": SimpleNamespace(spec=trace)}, {"t": "t"}, "rising_load",
                           RISING_1_19, "test", None, allow=False)  # fmt: skip
    # a run started from the cloned agent records its list, and is refused the same
    (entry,) = started_from("runs/bc/agent", spec)
    assert entry["registered_windows"] == [main, spec.registered_windows[1]]
    later = SimpleNamespace(**{**vars(_registered()), "started_from": [entry]})
    with pytest.raises(ValueError, match="started from runs/bc/agent, which was trained on"):
        check_seen_windows({"x": SimpleNamespace(spec=later)}, {"x": "x"}, "rising_load",
                           RISING_1_19, "test", None, allow=False)  # fmt: skip


def test_a_clone_records_the_windows_of_each_workload_it_collected_on() -> None:
    """workload=tiny (bursted_synthetic, train_pool 2) at train_streams=shared: one
    teacher episode a source runs on the first train window of rising_load
    (rising-0002), five on both of the pool's (rising-0002, -0003), drawn as the
    training workload's (train_streams=shared); the training workload named again and
    a name given twice are recorded once; no cloning, or a resumed run (which clones
    nothing), records none."""
    from experiments.train import imitation_windows

    extra = "imitation.workloads=[rising_load,bursted_synthetic,rising_load]"
    shared = "+workload.params.train_streams=shared"
    record = {"workload": "rising_load", "params": SHARED, "seed": 20260721,
              "train_streams": "shared", "val": []}  # fmt: skip
    for episodes, train in ((1, ["rising-0002"]), (5, ["rising-0002", "rising-0003"])):
        cfg = _compose("train", ["workload=tiny", extra, shared, f"imitation.episodes={episodes}"])
        assert imitation_windows(cfg) == [{**record, "train": train}]
    assert imitation_windows(_compose("train", ["workload=tiny", extra])) == []
    resumed = ["workload=tiny", extra, "imitation.episodes=1", "resume=runs/x/agent"]
    assert imitation_windows(_compose("train", resumed)) == []


def test_agent_json_s_registered_windows_is_a_record_or_a_list_of_them(tmp_path: Path) -> None:
    from agents.algorithms import load_spec

    agent = tmp_path / "agent"
    agent.mkdir()
    base = {"algo": "ppo", "env": "route", "env_kwargs": {}}
    record = trained_windows("bursted_synthetic", SMALL, 20260721, 1, 1)
    for saved in (record, [record, record], None):
        (agent / "agent.json").write_text(json.dumps({**base, "registered_windows": saved}))
        assert load_spec(agent).registered_windows == saved
    where = f"{agent / 'agent.json'}: registered_windows"
    for saved, said in (
        ([], " must be a JSON object or a non-empty array of objects (null: not recorded), got []"),
        ("x", " must be a JSON object or a non-empty array of objects (null: not recorded), got"),
        ([record, 3], "[1] must be a JSON object, got 3"),
    ):
        (agent / "agent.json").write_text(json.dumps({**base, "registered_windows": saved}))
        with pytest.raises(ValueError, match=re.escape(where + said)):
            load_spec(agent)


@pytest.mark.slow
def test_train_records_the_workloads_it_cloned_on_and_evaluate_refuses_them(
    tmp_path: Path,
) -> None:
    """A clone of workload=tiny (train_streams=shared) with one teacher episode on
    rising_load (rising-0002 of the workload's seed) is refused rising_load at
    train_windows=1 test_windows=19, before any run folder."""
    from agents.algorithms import load_spec
    from experiments.evaluate import evaluate
    from experiments.train import train

    train(_compose("train", ["workload=tiny", "env=route_warm", "agent=maskable_ppo",
                             "imitation.episodes=1", "imitation.epochs=1",
                             "imitation.workloads=[rising_load]", "train.total_timesteps=0",
                             "+workload.params.train_streams=shared",
                             "train.evaluate=false", "train.progress=false", "logger=none",
                             f"out_dir={tmp_path / 'run'}"]))  # fmt: skip
    agent = tmp_path / "run" / "agent"
    main, rising = load_spec(agent).registered_windows
    assert main["workload"] == "bursted_synthetic"
    assert main["train"] == ["synthetic-0001", "synthetic-0004"]
    assert rising == {"workload": "rising_load", "params": SHARED, "seed": 20260721,
                      "train_streams": "shared", "train": ["rising-0002"], "val": []}  # fmt: skip
    counts = ["+workload.params.train_windows=1", "+workload.params.test_windows=19"]
    cfg = _compose("evaluate", [f"checkpoint=[{agent}]", "workload=rising_load", *counts,
                                "logger=none", "policies=[cache_aware]", "progress=false",
                                f"out_dir={tmp_path / 'eval'}"])  # fmt: skip
    with pytest.raises(ValueError, match=re.escape("1 of its 1 train window (rising-0002)")):
        evaluate(cfg)
    assert not (tmp_path / "eval").exists()


def test_a_record_s_train_streams_is_checked_when_given_and_never_assumed(
    tmp_path: Path,
) -> None:
    """train_streams and stream_seeds are checked when a record gives them (one line
    naming the key); a record saved before them (no train_streams: its windows all
    drawn from the workload's seed, as shared draws them) loads as it was saved,
    nothing filled in, and its train window synthetic-0000 is read as the workload
    seed's: the first test window at the workload's own counts, refused."""
    from agents.algorithms import load_spec

    agent = tmp_path / "agent"
    agent.mkdir()
    base = {"algo": "ppo", "env": "route", "env_kwargs": {}}
    record = trained_windows("bursted_synthetic", SMALL, 20260721, 1, 1)
    for saved, said in (
        (
            {**record, "train_streams": "mine"},
            "registered_windows.train_streams must be one of own, shared, got 'mine'",
        ),
        ({**record, "train_streams": 1}, "registered_windows.train_streams must be a JSON string"),
        (
            {**record, "stream_seeds": {"synthetic-0000": -1}},
            "registered_windows.stream_seeds.synthetic-0000 must be",
        ),
    ):
        (agent / "agent.json").write_text(json.dumps({**base, "registered_windows": saved}))
        with pytest.raises(ValueError, match=re.escape(f"{agent / 'agent.json'}: {said}")):
            load_spec(agent)
    older = {
        "workload": "bursted_synthetic", "params": SMALL, "seed": 20260721,
        "train": ["synthetic-0000"], "val": ["synthetic-0002"],
    }  # fmt: skip
    (agent / "agent.json").write_text(json.dumps({**base, "registered_windows": older}))
    spec = load_spec(agent)
    assert spec.registered_windows == older
    assert seen_registered(spec, "bursted_synthetic", {}, 20260721, "test", None) == (
        ["synthetic-0000"], 1, ["synthetic-0002"], 1
    )  # fmt: skip


def test_a_registered_windows_record_is_checked_on_load(tmp_path: Path) -> None:
    """A hand-edited or partial record is refused in one line naming the file and the
    key (it was a KeyError from the seen-windows check); a dataset's record has both
    ``dataset`` and ``families``."""
    from agents.algorithms import load_spec

    agent = tmp_path / "agent"
    agent.mkdir()
    base = {"algo": "ppo", "env": "route", "env_kwargs": {}}
    record = trained_windows("bursted_synthetic", SMALL, 20260721, 1, 1)
    no_seed = {k: v for k, v in record.items() if k != "seed"}
    known = (
        "; known: workload, params, seed, train_streams, stream_seeds, train, val, dataset, "
        "families, plugin_sha256"
    )
    for saved, said in (
        ({}, f"registered_windows: missing key 'workload'{known}"),
        (no_seed, f"registered_windows: missing key 'seed'{known}"),
        ([record, no_seed], f"registered_windows[1]: missing key 'seed'{known}"),
        ({**record, "x": 1}, f"registered_windows: unknown key 'x'{known}"),
        (
            {**record, "dataset": "d/train.jsonl"},
            f"registered_windows: missing key 'families'{known}",
        ),
        ({**record, "seed": "7"}, "registered_windows.seed must be an integer"),
        ({**record, "seed": True}, "registered_windows.seed must be an integer"),
        ({**record, "train": [1]}, "registered_windows.train must be a JSON array of strings"),
        ({**record, "params": []}, "registered_windows.params must be a JSON object, got []"),
        (
            {**record, "dataset": "d", "families": {"synthetic": 1}},
            "registered_windows.families.synthetic must be a JSON object, got 1",
        ),
    ):
        (agent / "agent.json").write_text(json.dumps({**base, "registered_windows": saved}))
        with pytest.raises(ValueError, match=re.escape(f"{agent / 'agent.json'}: {said}")):
            load_spec(agent)
    entry = {"agent": "a", "workload": "bursted_synthetic", "workload_params": {},
             "trace_file": None, "registered_windows": {}}  # fmt: skip
    (agent / "agent.json").write_text(json.dumps({**base, "started_from": [entry]}))
    said = "started_from[0].registered_windows: missing key 'workload'"
    with pytest.raises(ValueError, match=re.escape(f"{agent / 'agent.json'}: {said}")):
        load_spec(agent)
    dataset = {**record, "dataset": "d", "families": {"synthetic": {"n_bursts": 2}}}
    (agent / "agent.json").write_text(json.dumps({**base, "registered_windows": [dataset]}))
    assert load_spec(agent).registered_windows == [dataset]


def test_a_dataset_folder_is_the_same_trace_however_spelt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dataset's folder read with format=hub is recorded resolved, and found again
    under another spelling (relative from another folder, absolute); it was compared
    as the text typed, so ``ds`` and ``/abs/ds`` were two traces to the check."""
    from experiments.trained_on import _same_trace

    folder = tmp_path / "ds"
    folder.mkdir()
    monkeypatch.chdir(tmp_path)
    params = {"path": "ds", "format": "hub", "hub_split": "train"}
    record = trained_trace("trace", params, 1, 0)
    assert record["path"] == str(folder.resolve())
    spec = SimpleNamespace(trace_file=record, env_kwargs={"workload_params": params})
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    for spelt in (str(folder), "../ds"):
        assert _same_trace(
            spec, tmp_path / "run" / "agent", TraceOptions(path=spelt, hub_split="train")
        )
        assert not _same_trace(
            spec, tmp_path / "run" / "agent", TraceOptions(path=spelt, hub_split="test")
        )


def test_a_refusal_plans_the_windows_evaluated_and_reads_a_dataset_s_record_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The windows evaluated were planned twice for each agent's refusal text (once
    to find them, once to count them), and a dataset's dataset_info.json read twice:
    each is done once now, for any number of agents, and the text is the same."""
    import envs.workloads.readers.bursted as bursted
    import envs.workloads.registry as registry
    import envs.workloads.trace_file as trace_file

    calls: dict[str, int] = {}

    def counted(module: Any, name: str) -> None:
        real = getattr(module, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            calls[name] = calls.get(name, 0) + 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, call)

    own = _dataset(tmp_path / "own") / "test.jsonl"
    spec = _registered()  # (their records)
    in_dataset = _registered(params={**TINY, **SMALL, **SHARED})
    for module, name in ((registry, "plan"), (bursted, "dataset_info"), (trace_file, "plan_trace")):
        counted(module, name)
    agents = {"a": SimpleNamespace(spec=spec), "b": SimpleNamespace(spec=spec)}
    folders = {"a": "runs/a/agent", "b": "runs/b/agent"}
    with pytest.warns(SettingWarning) as warned:
        seen = check_seen_windows(agents, folders, "bursted_synthetic", {}, "test", None, True)
    assert seen == ["a", "b"] and calls == {"plan": 1}  # (4 before)
    assert str(warned[1].message) == (
        "agent b (runs/b/agent) was trained on some of these windows (seed 20260721): the 15 "
        "test windows evaluated include 1 of its 1 train window (synthetic-0000) and 1 of its "
        "1 validation window (synthetic-0002); trained on bursted_synthetic (train_windows=1 "
        "test_windows=1 train_streams=shared), here bursted_synthetic (its own window counts) "
        "(allow_seen_windows=true)"
    )
    calls.clear()
    agents = {"a": SimpleNamespace(spec=in_dataset), "b": SimpleNamespace(spec=in_dataset)}
    with pytest.warns(SettingWarning) as warned:
        seen = check_seen_windows(agents, folders, "trace", _params(own), "test", 2, True)
    # (the other read of dataset_info.json is the trace reader's, for its block size, as
    # it plans the windows; 5 reads and 4 plans before)
    assert seen == ["a", "b"] and calls == {"dataset_info": 2, "plan_trace": 1}
    assert str(warned[1].message) == (
        "agent b (runs/b/agent) was trained on some of these windows (seed 20260721): the 2 "
        "test windows evaluated include 1 of its 1 train window (synthetic-0000) and 1 of its "
        "1 validation window (synthetic-0002); trained on bursted_synthetic (train_windows=1 "
        f"test_windows=1 train_streams=shared), here {own} (a make_dataset split of "
        "bursted_synthetic, seed "
        "20260721) (allow_seen_windows=true)"
    )


ZOO_DIR = Path(__file__).resolve().parents[2] / "agents" / "zoo"


def _zoo(name: str) -> tuple[dict[str, Any], dict[str, str]]:
    from agents.algorithms import load_spec

    folder = ZOO_DIR / name
    return {name: SimpleNamespace(spec=load_spec(folder))}, {name: str(folder)}


def test_test_windows_whose_siblings_an_agent_trained_on_get_a_note() -> None:
    """Window i of synthetic, synthetic1s and mixed sends the same bursts while each
    family's split is its own: evaluating a zoo agent on test windows whose sibling
    of the same index is among the train windows its agent.json records (an agent
    saved before the record: its workload's whole train split) gives one note, the
    windows docs/results/leak_check.md lists. finetune_families trained on
    burst_families, and the clone it started from on the windows its agent.json
    records (its cloning's, among them bursted_synthetic's and
    bursted_synthetic_1s's, mixed's siblings):
    7 of mixed's 15 (0001, 0004, 0005, 0006, 0013, 0014, 0015);
    scratch_route_warm on bursted_synthetic (synthetic-0001, -0004, -0005, -0006,
    -0014): 5 of them, none of its own family's, which check_seen_windows refuses."""
    from experiments.trained_on import sibling_notes

    seed = 20260721
    agents, folders = _zoo("finetune_families")
    (note,) = sibling_notes(agents, folders, "mixed", {}, seed, "test", None)
    assert note == (
        "note: agent finetune_families: 7 of 15 test windows of mixed evaluated share their "
        "prompts, window for window, with train windows of a sibling family it or an agent it "
        "started from trained on (burst_families, bursted_synthetic, bursted_synthetic_1s, seed "
        "20260721: synthetic-0001, synthetic-0004, synthetic-0005, ... (6 more)); held out by "
        "family, not by prompt (see docs/results/leak_check.md)"
    )
    (both,) = sibling_notes(agents, folders, "burst_families", {}, seed, "test", None)
    assert (
        "7 of 15 test windows of synthetic, 7 of 15 test windows of synthetic1s, 7 of 15 " in both
    )
    agents, folders = _zoo("scratch_route_warm")
    (note,) = sibling_notes(agents, folders, "mixed", {}, seed, "test", None)
    assert note.startswith("note: agent scratch_route_warm: 5 of 15 test windows of mixed ")
    assert (
        "(bursted_synthetic, seed 20260721: synthetic-0001, synthetic-0004, synthetic-0005, "
        in note
    )
    (note,) = sibling_notes(agents, folders, "bursted_synthetic_1s", {}, seed, "test", None)
    assert note.startswith("note: agent scratch_route_warm: 3 of 15 test windows of synthetic1s ")
    # its own family (check_seen_windows' part), mixed-0000 alone, other bursts, another seed
    assert sibling_notes(agents, folders, "bursted_synthetic", {}, seed, "test", None) == []
    assert sibling_notes(agents, folders, "mixed", {}, seed, "test", 1) == []
    assert sibling_notes(agents, folders, "mixed", {"burst_requests": 20}, seed, "test", None) == []
    assert sibling_notes(agents, folders, "mixed", {}, 7, "test", None) == []
    assert sibling_notes(agents, folders, "mixed", {}, seed, "val", None) == []  # (20-24)


def test_an_agent_of_the_default_gets_no_sibling_note() -> None:
    """burst_families at TINY, 2 train / 2 test windows a family, seed 20260721:
    synthetic-0000 and mixed-0001 are train windows, mixed-0000 and synthetic-0001
    test windows. Trained with train_streams=shared, the train windows are the
    workload seed's and share their prompts with the test windows of the same index
    of each sibling family: a note. Trained with the default (own), they are drawn
    from a seed of their own and share none: no note."""
    from experiments.trained_on import sibling_notes

    params = {**TINY, "train_windows": 2, "test_windows": 2}
    folders = {"a": "runs/a/agent"}
    notes = {}
    for streams in ("shared", "own"):
        given = {**params, "train_streams": streams}
        spec = SimpleNamespace(
            env_kwargs={"workload": "burst_families", "workload_params": given},
            registered_windows=trained_windows("burst_families", given, 20260721, None, 0),
            trace_file=None,
        )
        agents = {"a": SimpleNamespace(spec=spec)}
        notes[streams] = sibling_notes(
            agents, folders, "burst_families", params, 20260721, "test", None
        )
    assert notes["shared"] == [
        "note: agent a: 1 of 2 test windows of mixed, 1 of 2 test windows of synthetic, 1 of "
        "2 test windows of synthetic1s evaluated share their prompts, window for window, with "
        "train windows of a sibling family it trained on (burst_families, seed 20260721: "
        "mixed-0001, synthetic-0000, synthetic1s-0000); held out by family, not by prompt "
        "(see docs/results/leak_check.md)"
    ]
    assert notes["own"] == []


def test_evaluate_prints_the_sibling_note_before_its_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``experiments.evaluate`` on mixed's first 2 test windows (mixed-0000, -0001) with
    finetune_families: mixed-0001's sibling synthetic-0001 is a train window of its
    burst_families; a note, no refusal, the table after it."""
    from envs.files import read_json
    from experiments.evaluate import evaluate

    out = tmp_path / "eval"
    evaluate(_compose("evaluate", ["checkpoint=[finetune_families]", "workload=mixed",
                                   "workload.eval_windows=2", "policies=[cache_aware]",
                                   "logger=none", "progress=false", f"out_dir={out}"]))  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    note = (
        "note: agent finetune_families: 1 of 2 test windows of mixed evaluated share their "
        "prompts, window for window, with train windows of a sibling family it or an agent it "
        "started from trained on (burst_families, bursted_synthetic, seed 20260721: "
        "synthetic-0001); held out by family, not by prompt (see docs/results/leak_check.md)"
    )
    assert lines.count(note) == 1
    assert lines.index(note) < next(i for i, line in enumerate(lines) if line.startswith("policy"))
    rows = read_json(out / "results.json")["rows"]
    assert {row["policy"] for row in rows} >= {"cache_aware", "finetune_families"}
