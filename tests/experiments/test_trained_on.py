"""An agent trained on a trace, evaluated on that trace's windows (experiments.trained_on):
the windows it trained and validated on are told apart from held-out ones by their
time spans in the file, whatever window length, split shares or time unit either
run read it with; evaluate and compare refuse them unless allow_seen_windows=true."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from envs.sim.errors import SettingWarning
from envs.workloads.trace_file import TraceOptions
from experiments.trained_on import (
    check_seen_windows,
    seen_windows,
    trace_notes,
    trained_path,
    trained_trace,
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
        env_kwargs={"workload": "trace", "workload_params": params}, trace_file=trace
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
