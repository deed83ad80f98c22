"""A trace file as a workload: windows by time, splits, streaming order, time units,
string timestamps, gzip by content, bad-row limits, and the shipped example trace."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import warnings
from pathlib import Path

import pytest

from envs.sim.errors import ConfigError
from envs.sim.request import Workload
from envs.workloads.example_trace import example_mooncake_text
from envs.workloads.readers import (
    ReadOptions,
    TooManyBadRowsError,
    TraceFormatError,
    TraceWarning,
    dataset_block_tokens,
    iter_bursted_windows,
    read_art_chat,
    read_hub_dataset,
    read_mooncake,
    read_qwen_bailian,
    read_trace,
)
from envs.workloads.readers.base import written_number
from envs.workloads.registry import windows
from envs.workloads.trace_file import TraceOptions, file_stamp, plan_trace, trace_windows
from tests.workloads.tracekit import (
    COMPRESSIONS,
    art_rows,
    bursted_rows,
    compress,
    qwen_rows,
    write_jsonl,
)

ROOT = Path(__file__).resolve().parents[2]


def _mooncake(times_ms: list[int | str], **extra: object) -> list[dict[str, object]]:
    return [
        {"timestamp": t, "input_length": 600, "output_length": 2, "hash_ids": [1, i + 2], **extra}
        for i, t in enumerate(times_ms)
    ]


def test_a_last_window_holding_a_sliver_of_the_trace_is_named_in_a_warning(
    tmp_path: Path,
) -> None:
    """Three windows of 20 arrivals, then one arrival 0.4 s into a fourth: that
    window, the test split, would measure one request."""
    times = [w * 5000 + i * 200 for w in range(3) for i in range(20)] + [15_400]
    path = write_jsonl(tmp_path / "t.jsonl", _mooncake(times))
    with pytest.warns(TraceWarning) as caught:
        plan = plan_trace(TraceOptions(path=str(path), window_s=5.0, test_fraction=0.25))
    assert [w.rows for w in plan.windows] == [20, 20, 20, 1]
    assert str(caught[0].message) == (
        f"{path}: the last window (t-0003, a test window) holds 1 row against a median "
        "of 20 in the others, arriving within 0.0 s of a 5 s window (set end_s=15 to "
        "leave it out)"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ending the trace before it: no warning
        plan = plan_trace(TraceOptions(path=str(path), window_s=5.0, end_s=15.0))
        assert [w.rows for w in plan.windows] == [20, 20, 20]
        # a cut inside the last window is the user's own
        plan = plan_trace(TraceOptions(path=str(path), window_s=5.0, end_s=15.5))
        assert [w.rows for w in plan.windows] == [20, 20, 20, 1]
        # a quiet last window whose arrivals span most of it is a window like the others
        quiet = [w * 5000 + i * 200 for w in range(3) for i in range(20)] + [15_000, 19_500]
        plan = plan_trace(
            TraceOptions(path=str(write_jsonl(tmp_path / "q.jsonl", _mooncake(quiet))), window_s=5)
        )
        assert [w.rows for w in plan.windows] == [20, 20, 20, 2]
    # a stray row far into a window of its own (helper-56's review: no warning then)
    stray = [w * 5000 + i * 200 for w in range(3) for i in range(20)] + [18_000]
    with pytest.warns(TraceWarning, match=r"\(s-0003, a test window\) holds 1 row .* within 0.0 s"):
        plan_trace(
            TraceOptions(path=str(write_jsonl(tmp_path / "s.jsonl", _mooncake(stray))), window_s=5)
        )
    # two windows: the commonest form, a trace that runs just past its one window
    two = write_jsonl(tmp_path / "two.jsonl", _mooncake([i * 200 for i in range(25)] + [5_300]))
    with pytest.warns(TraceWarning, match=r"\(two-0001, a test window\) holds 1 row against a"):
        plan_trace(TraceOptions(path=str(two), window_s=5.0))


def test_max_rows_stopping_inside_the_last_window_is_named_in_a_warning(tmp_path: Path) -> None:
    """max_rows=5 of arrivals at 0, 1, 2, 11, 12, 13 s in 10 s windows stops the read
    at line 6, inside the second window: it holds 2 rows, 2.0 s of its 10 (the audit:
    a 300 s test window held its first 89.5 s, without a word)."""
    path = write_jsonl(tmp_path / "m.jsonl", _mooncake([0, 1000, 2000, 11_000, 12_000, 13_000]))
    with pytest.warns(TraceWarning) as caught:
        plan = plan_trace(TraceOptions(path=str(path), window_s=10.0, max_rows=5))
    assert [w.rows for w in plan.windows] == [3, 2]
    assert [str(w.message) for w in caught] == [
        f"{path}: max_rows=5 stops the read at line 6, inside the last window (m-0001, a "
        "test window): it holds 2 rows, arriving in its first 2.0 s of 10 (raise max_rows "
        "to read it whole, or set end_s=10 to leave it out)"
    ]
    # a single window cut short: leaving it out leaves nothing, so only max_rows is named
    whole = r"in its first 1.0 s of 10 \(raise max_rows to read it whole\)$"
    with pytest.warns(
        TraceWarning, match=r"\(m-0000, a test window\): it holds 2 rows, .*" + whole
    ):
        plan_trace(TraceOptions(path=str(path), window_s=10.0, max_rows=2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # the row it stops at opens another window: the windows read are whole
        plan = plan_trace(TraceOptions(path=str(path), window_s=10.0, max_rows=3))
        assert [w.rows for w in plan.windows] == [3]
        # or end_s leaves that row out anyway; or the read reaches the end of the file
        plan_trace(TraceOptions(path=str(path), window_s=10.0, max_rows=5, end_s=13.0))
        plan_trace(TraceOptions(path=str(path), window_s=10.0, max_rows=6))
    # a Bursted-ART window: the row it stops at is of the window read last
    bursted = write_jsonl(tmp_path / "b.jsonl", bursted_rows("w-0") + bursted_rows("w-1"))
    with pytest.warns(TraceWarning) as caught:
        plan = plan_trace(TraceOptions(path=str(bursted), max_rows=6))
    assert [w.rows for w in plan.windows] == [4, 2]
    assert [str(w.message) for w in caught] == [
        f"{bursted}: max_rows=6 stops the read at line 7, inside the last window (w-1, a "
        "test window): it holds its first 2 rows (raise max_rows to read it whole)"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan_trace(TraceOptions(path=str(bursted), max_rows=4))


def test_trace_messages_give_large_window_options_as_written(tmp_path: Path) -> None:
    """start_s, end_s and window_s in the trace's messages are the values given, and an
    end_s offered is where the window opens, worked in decimal: ``:g`` wrote 1234567.5
    as 1.23457e+06 (1234570 read back) and 3703702.6 as 3.7037e+06."""
    path = write_jsonl(tmp_path / "t.jsonl", _mooncake([0, 100, 200]))
    with pytest.raises(ConfigError) as none:
        plan_trace(TraceOptions(path=str(path), start_s=1234567.5, end_s=2345678.25))
    assert str(none.value) == (
        f"{path}: no arrivals between TraceOptions.start_s=1234567.5 and end_s=2345678.25 "
        "seconds after the first (the trace spans 0.2 s)"
    )
    # windows of 1234567.5 s from 0.1 s after the first arrival (at 0, left out): window
    # k opens at 0.1 + 1234567.5 k s, and holds 20 rows from 1 s into it; a stray row
    # 1 s into window 3, which opens at 0.1 + 3703702.5 = 3703702.6 s
    opens = [100 + k * 1_234_567_500 for k in range(4)]
    times = [0] + [opens[k] + 1000 * (i + 1) for k in range(3) for i in range(20)]
    stray = write_jsonl(tmp_path / "s.jsonl", _mooncake([*times, opens[3] + 1000]))
    big = {"window_s": 1234567.5, "start_s": 0.1, "time_unit": "ms"}
    with pytest.warns(TraceWarning) as caught:
        plan = plan_trace(TraceOptions(path=str(stray), **big))  # type: ignore[arg-type]
    assert [w.rows for w in plan.windows] == [20, 20, 20, 1]
    assert [str(w.message) for w in caught] == [
        f"{stray}: the last window (s-0003, a test window) holds 1 row against a median of "
        "20 in the others, arriving within 0.0 s of a 1234567.5 s window (set "
        "end_s=3703702.6 to leave it out)"
    ]
    # max_rows=23 (the row at 0 counts) stops inside window 1, which holds its first 2
    # rows (1 and 2 s into it)
    with pytest.warns(TraceWarning) as caught:
        plan_trace(TraceOptions(path=str(stray), max_rows=23, **big))  # type: ignore[arg-type]
    assert [str(w.message) for w in caught] == [
        f"{stray}: max_rows=23 stops the read at line 24, inside the last window (s-0001, a "
        "test window): it holds 2 rows, arriving in its first 2.0 s of 1234567.5 (raise "
        "max_rows to read it whole, or set end_s=1234567.6 to leave it out)"
    ]
    bursted = write_jsonl(tmp_path / "b.jsonl", bursted_rows("w-0"))
    with pytest.warns(TraceWarning) as caught:
        plan_trace(TraceOptions(path=str(bursted), window_s=1234567.5))
    assert [str(w.message) for w in caught] == [
        f"window_s=1234567.5 does nothing: {bursted}'s windows are its own (trace_id)"
    ]
    assert [written_number(x) for x in (300.0, 1e-07, 1e20, 2.5, float("inf"))] == [
        "300", "0.0000001", "100000000000000000000", "2.5", "inf"
    ]  # fmt: skip


def test_a_rate_no_replay_means_under_the_formats_unit_is_warned_of(tmp_path: Path) -> None:
    """A seconds trace read as Mooncake's milliseconds, and a milliseconds trace read
    as Qwen's seconds: each is warned of, naming the unit that would fit."""
    seconds = write_jsonl(tmp_path / "s.jsonl", _mooncake([i * 0.5 for i in range(200)]))
    with pytest.warns(TraceWarning) as caught:
        plan_trace(TraceOptions(path=str(seconds)))
    # 200 rows, 0.5 ms apart read as ms: 199 gaps in 99.5 ms, 2,000 a second
    assert [str(w.message) for w in caught] == [
        f"{seconds}: 200 rows in a span of 0.1 s read as ms: 2,000 a second on average; "
        "if timestamp counts s, set time_unit=s"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # read as seconds, no warning
        plan_trace(TraceOptions(path=str(seconds), time_unit="s"))
    rows = [{**row, "timestamp": 1000.0 * i} for i, row in enumerate(qwen_rows())]
    millis = write_jsonl(tmp_path / "q.jsonl", rows)
    with pytest.warns(TraceWarning) as caught:
        plan_trace(TraceOptions(path=str(millis)))
    # 4 rows 1,000 s apart read as s: one every 1,000 s, over a 300 s window
    assert [str(w.message) for w in caught] == [
        f"{millis}: 4 rows in a span of 3000.0 s read as s: one every 1,000 s on average, "
        "more than a window_s=300 s window: most windows hold one row or none; if "
        "timestamp counts ms, set time_unit=ms"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan_trace(TraceOptions(path=str(millis), time_unit="ms"))
        # rows at one instant (an offline batch) have no rate; nor 100 rows at 1,000 a second
        batch = write_jsonl(tmp_path / "f.jsonl", _mooncake([0] * 150))
        plan_trace(TraceOptions(path=str(batch)))
        steady = write_jsonl(tmp_path / "t.jsonl", _mooncake(list(range(100))))
        plan_trace(TraceOptions(path=str(steady)))


def test_a_seconds_trace_of_a_low_rate_read_as_ms_is_told_by_its_fractions(
    tmp_path: Path,
) -> None:
    """120 rows 2.5 s apart written in seconds (0.0, 2.5, 5.0, ...): read as Mooncake's
    milliseconds they span 0.2975 s at 400 a second, under the dense rate, and fall in
    one window; 60 of them (2.5, 7.5, ...) have a fraction of a millisecond, but that
    is not more than half. At 2.25 s apart, 90 do (0.25, 0.5, 0.75 in every 4): warned
    (the audit: a 30-minute trace in relative seconds replayed as 1.8 s)."""
    half = write_jsonl(tmp_path / "h.jsonl", _mooncake([i * 2.5 for i in range(120)]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(plan_trace(TraceOptions(path=str(half))).windows) == 1
    seconds = write_jsonl(tmp_path / "s.jsonl", _mooncake([i * 2.25 for i in range(120)]))
    with pytest.warns(TraceWarning) as caught:
        plan = plan_trace(TraceOptions(path=str(seconds)))
    assert len(plan.windows) == 1
    # 119 gaps of 2.25 ms: 0.26775 s; rows 2, 3, 4 are 2.25, 4.5, 6.75, row 5 is 9.0
    assert [str(w.message) for w in caught] == [
        f"{seconds}: 120 rows in a span of 0.3 s read as ms: 90 of them have a fraction of "
        "a ms (2.25 on line 2), as seconds written with decimals do; if timestamp counts s, "
        "set time_unit=s"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan = plan_trace(TraceOptions(path=str(seconds), time_unit="s"))  # chosen: no warning
        assert len(plan.windows) == 1 and plan.windows[0].rows == 120  # 267.75 s < 300
        # fewer than 100 rows is no sign
        few = write_jsonl(tmp_path / "f.jsonl", _mooncake([i * 2.25 for i in range(99)]))
        plan_trace(TraceOptions(path=str(few)))
        # nor fractions of a ms in a trace that read as seconds would span over a month
        # (milliseconds with microseconds: 1,000 rows 3.00025 s apart span 49.95 min,
        # 2,997,247.75 ms, which as seconds would be 34.7 days)
        fine = [i * 3000.25 for i in range(1000)]
        plan_trace(TraceOptions(path=str(write_jsonl(tmp_path / "u.jsonl", _mooncake(fine)))))
        # nor in one whose rows read as seconds would arrive a window or more apart (a
        # review of 2026-12-06: 300 rows 4,000.25 ms apart, 20 minutes, read as
        # seconds one every 4,000 s against a 300 s window)
        sparse = [i * 4000.25 for i in range(300)]
        plan_trace(TraceOptions(path=str(write_jsonl(tmp_path / "v.jsonl", _mooncake(sparse)))))


def test_a_block_count_error_says_whose_block_size_it_used(tmp_path: Path) -> None:
    """A guessed format's block size is named with the field that told the format; a
    block size given is named as the option."""
    rows = [{**row, "hash_ids": row["hash_ids"][:1]} for row in qwen_rows()]
    path = write_jsonl(tmp_path / "q.jsonl", rows)
    with pytest.raises(TraceFormatError, match=(
        r"line 1, field 'hash_ids': has 1 block but input_length 40 at 16 tokens a block "
        r"\(the qwen format's, guessed from its fields 'chat_id' and 'parent_chat_id'\) "
        r"needs 3 \(or 2\);"
    )):  # fmt: skip
        plan_trace(TraceOptions(path=str(path)))
    with pytest.raises(TraceFormatError, match=r"at 16 tokens a block \(the qwen format's\) "):
        plan_trace(TraceOptions(path=str(path), format="qwen"))
    with pytest.raises(TraceFormatError, match=r"at 8 tokens a block \(block_tokens\) needs 5"):
        plan_trace(TraceOptions(path=str(path), block_tokens=8))


def test_a_trace_is_cut_into_windows_of_window_s_and_split_by_time(tmp_path: Path) -> None:
    # arrivals at 0, 1, 2.5 | 7, 9.5 | (nothing in 10..15) | 15.25 s: three windows of 5 s
    path = write_jsonl(tmp_path / "t.jsonl", _mooncake([0, 1000, 2500, 7000, 9500, 15250]))
    options = TraceOptions(path=str(path), window_s=5.0, test_fraction=1 / 3)
    plan = plan_trace(options)
    assert [(w.trace_id, w.split, w.rows) for w in plan.windows] == [
        ("t-0000", "train", 3),
        ("t-0001", "train", 2),
        ("t-0003", "test", 1),
    ]
    train = list(trace_windows(options, "train"))
    assert [w.name for w in train] == ["t/t-0000", "t/t-0001"]
    assert [r.arrival_s for r in train[0].requests] == [0.0, 1.0, 2.5]
    assert [r.arrival_s for r in train[1].requests] == [2.0, 4.5]  # from the window's start
    (test,) = trace_windows(options, "test")
    assert test.requests[0].arrival_s == 0.25
    assert test.block_tokens == 512 and test.meta["start_s"] == 15.0
    # a window's arrivals are taken from its start in whole milliseconds, so they are
    # the decimal values exactly: 1.496 s, where 301.496 - 300 in seconds is 1.4959999...
    # (the audit: make_dataset wrote "arrival_s": 1.4960000000000946)
    start = 1_700_000_000_000
    exact = write_jsonl(tmp_path / "x.jsonl", _mooncake([start, start + 301_496, start + 597_495]))
    read = trace_windows(TraceOptions(path=str(exact)), "all")
    assert [[r.arrival_s for r in w.requests] for w in read] == [[0.0], [1.496, 297.495]]
    # the registry's entry point reads the same windows
    registry = windows("trace", split="train", path=str(path), window_s=5.0)
    assert [w.name for w in registry] == ["t/t-0000", "t/t-0001"]  # 0.25 of 3 rounds to 1 test


def test_train_val_and_test_never_share_a_window(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", _mooncake([1000 * i for i in range(10)]))
    options = TraceOptions(path=str(path), window_s=1.0, test_fraction=0.2, val_fraction=0.3)
    names = {s: [w.name for w in trace_windows(options, s)] for s in ("train", "val", "test")}
    assert [len(names[s]) for s in ("train", "val", "test")] == [5, 3, 2]
    assert names["val"] == ["t/t-0005", "t/t-0006", "t/t-0007"]  # just before the test ones
    assert names["test"] == ["t/t-0008", "t/t-0009"]
    everything = [w.name for w in trace_windows(options, "all")]
    assert sorted(everything) == sorted(names["train"] + names["val"] + names["test"])
    assert [len(w) for w in trace_windows(options, "all", limit=3)] == [1, 1, 1]


def test_start_and_end_leave_arrivals_out(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", _mooncake([0, 1000, 2500, 7000, 9500]))
    options = TraceOptions(path=str(path), window_s=5.0, start_s=1.0, end_s=9.0, test_fraction=0)
    (first, second) = trace_windows(options, "all")
    assert [r.arrival_s for r in first.requests] == [0.0, 1.5]  # 1 s and 2.5 s, from 1 s
    assert [r.arrival_s for r in second.requests] == [1.0]  # 7 s, in the window from 6 s


def test_rows_out_of_order_across_windows_are_refused_naming_the_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", _mooncake([0, 6000, 1000]))
    with pytest.raises(TraceFormatError, match=r"t.jsonl, line 3, field 'timestamp'.*sort"):
        plan_trace(TraceOptions(path=str(path), window_s=5.0))
    inside = write_jsonl(tmp_path / "u.jsonl", _mooncake([0, 3000, 1000]))  # one window: sorted
    with pytest.warns(TraceWarning, match=r"u.jsonl: 1 row arrived out of time order"):
        (window,) = trace_windows(TraceOptions(path=str(inside), test_fraction=1.0), "test")
    assert [r.arrival_s for r in window.requests] == [0.0, 1.0, 3.0]


def _trace_warnings(options: TraceOptions, split: str) -> tuple[list[str], list[Workload]]:
    """The TraceWarnings reading ``split``'s windows gives, and the windows."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read = list(trace_windows(options, split))
    return [str(w.message) for w in caught if issubclass(w.category, TraceWarning)], read


def test_rows_out_of_time_order_in_a_window_are_sorted_with_one_warning(tmp_path: Path) -> None:
    # 1 s, 3 s, -0.5 s, 2 s: lines 3 and 4 arrive before line 2; the earliest (-0.5 s,
    # line 3) is the origin, so the arrivals are 0, 1.5, 2.5 and 3.5 s
    path = write_jsonl(tmp_path / "t.jsonl", _mooncake([1000, 3000, -500, 2000]))
    said, (window,) = _trace_warnings(TraceOptions(path=str(path), test_fraction=1.0), "test")
    assert said == [
        f"{path}: 2 rows arrived out of time order (first at line 3); sorted by arrival"
    ]
    assert [(r.request_id, r.arrival_s) for r in window.requests] == [
        ("3", 0.0), ("1", 1.5), ("4", 2.5), ("2", 3.5)
    ]  # fmt: skip
    # a Bursted-ART window: line 3 (2 s) after line 2 (3 s); the next window is in order
    rows = bursted_rows("w-a")
    rows = [rows[0], rows[2], rows[1], rows[3], *bursted_rows("w-b")]
    bursted = write_jsonl(tmp_path / "b.jsonl", rows)
    said, (a, _) = _trace_warnings(TraceOptions(path=str(bursted)), "test")
    assert said == [
        f"{bursted}: 1 row arrived out of time order (first at line 3); sorted by arrival"
    ]
    assert [r.arrival_s for r in a.requests] == [1.0, 2.0, 3.0, 4.0]
    ordered = write_jsonl(tmp_path / "o.jsonl", _mooncake([-500, 1000, 2000, 3000]))
    said, (window,) = _trace_warnings(TraceOptions(path=str(ordered), test_fraction=1.0), "test")
    assert said == [] and len(window.requests) == 4


def test_a_bursted_file_keeps_its_windows_and_splits(tmp_path: Path) -> None:
    rows = bursted_rows("w-a", split="train") + bursted_rows("w-b") + bursted_rows("w-c")
    path = write_jsonl(tmp_path / "b.jsonl", rows)
    plan = plan_trace(TraceOptions(path=str(path)))
    assert [(w.trace_id, w.split) for w in plan.windows] == [
        ("w-a", "train"),
        ("w-b", "test"),
        ("w-c", "test"),
    ]
    assert plan.split_from == "file"
    by_time = plan_trace(TraceOptions(path=str(path), file_splits=False, test_fraction=0.34))
    assert [w.split for w in by_time.windows] == ["train", "train", "test"]
    (a,) = trace_windows(TraceOptions(path=str(path)), "train")
    assert a.name == "b/w-a" and [r.arrival_s for r in a.requests] == [
        row["arrival_s"] for row in rows[:4]
    ]


def test_a_bursted_file_s_splits_are_named_on_every_window_or_none(tmp_path: Path) -> None:
    """A split the commands do not know, a window whose rows disagree, and windows of
    which only some name a split are refused, naming the line; none named: by time."""

    def refused(rows: list[dict[str, object]], match: str, **options: object) -> None:
        path = write_jsonl(tmp_path / "b.jsonl", rows)
        with pytest.raises(ConfigError, match=match):
            plan_trace(TraceOptions(path=str(path), **options))  # type: ignore[arg-type]

    a, b = bursted_rows("w-a", split="train"), bursted_rows("w-b")
    # line 5 opens w-b, named 'validation'
    refused(
        a + bursted_rows("w-b", split="validation"),
        r"b\.jsonl, line 5, field 'split': 'validation' \(window 'w-b'\) is not a split: "
        r"train, val or test \(file_splits=false splits the windows by time instead\)",
    )
    refused(
        [*a, b[0], {**b[1], "split": "train"}, *b[2:]],
        r"line 6, field 'split': 'train', but window 'w-b' began as 'test' \(line 5\)",
    )
    refused(
        a + bursted_rows("w-b", split=""),
        r"line 5, field 'split': window 'w-b' names no split, while window 'w-a' "
        r"\(line 1\) names 'train': name one on every window or on none",
    )
    # the fractions and window_s do nothing for splits and windows the file gives
    path = write_jsonl(tmp_path / "b.jsonl", a + b)
    for name, value in (("test_fraction", 1.0), ("val_fraction", 0.5), ("window_s", 10.0)):
        with pytest.warns(TraceWarning) as said:
            plan = plan_trace(TraceOptions(path=str(path), **{name: value}))  # type: ignore[arg-type]
        assert [str(w.message) for w in said] == [
            f"{name}={value:g} does nothing: {path}'s "
            + (
                "windows are its own (trace_id)"
                if name == "window_s"
                else "rows name their splits (file_splits=false splits its windows by "
                "test_fraction and val_fraction)"
            )
        ]
        assert [w.split for w in plan.windows] == ["train", "test"]
    # with file_splits=false none of that is read: the windows are split by time
    path = write_jsonl(tmp_path / "b.jsonl", a + bursted_rows("w-b", split="validation"))
    plan = plan_trace(TraceOptions(path=str(path), file_splits=False, test_fraction=0.5))
    assert [w.split for w in plan.windows] == ["train", "test"] and plan.split_from == "time"
    # no window names one: split by time, the fractions apply
    path = write_jsonl(
        tmp_path / "n.jsonl", bursted_rows("w-a", split="") + bursted_rows("w-b", split="")
    )
    plan = plan_trace(TraceOptions(path=str(path), test_fraction=0.5))
    assert [w.split for w in plan.windows] == ["train", "test"] and plan.split_from == "time"


def test_a_row_in_an_earlier_window_names_the_line_that_ran_ahead(tmp_path: Path) -> None:
    """Line 3 jumps a day ahead (a glitch): line 4, back in the first window, is
    refused, and the message names line 3 as the one that opened the later window."""
    path = write_jsonl(tmp_path / "g.jsonl", _mooncake([0, 1000, 86_400_000, 2000]))
    with pytest.raises(
        TraceFormatError,
        match=r"g\.jsonl, line 4, field 'timestamp': 2000 \(2 s after the earliest arrival\) "
        r"falls in the window starting at 0 s, before line 3's \(86400000, 86400 s, in the "
        r"window starting at 86400 s\); .* or drop line 3 if it is a glitch\)",
    ):
        plan_trace(TraceOptions(path=str(path)))
    # whole timestamps as the file writes them, seconds to the ms, never as 1.7e+06
    path = write_jsonl(tmp_path / "e.jsonl", _mooncake([250, 1000, -1_700_000_000]))
    with pytest.raises(
        TraceFormatError,
        match=r"line 3, field 'timestamp': -1700000000 \(0 s after the earliest arrival\) "
        r"falls in the window starting at 0 s, before line 1's \(250, 1700000\.25 s, in the "
        r"window starting at 1699800 s\)",
    ):
        plan_trace(TraceOptions(path=str(path), time_unit="ms"))


def test_a_cut_off_json_row_is_said_at_its_own_column(tmp_path: Path) -> None:
    """The line's end is not part of the row: a row cut off after its last comma is
    refused at the column where the value is missing, not at column 1 of a next line."""
    path = tmp_path / "cut.jsonl"
    good = json.dumps(_mooncake([0])[0])
    path.write_text(good + "\n" + '{"timestamp": 5, "input_length": \n')
    with pytest.raises(
        TraceFormatError, match=r"line 2, row: not valid JSON \(Expecting value, column 34\)"
    ):
        plan_trace(TraceOptions(path=str(path)))


def test_a_file_with_no_usable_rows_is_named_without_a_line(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    with pytest.raises(TraceFormatError, match=r"empty\.jsonl: no usable rows$"):
        plan_trace(TraceOptions(path=str(path), format="mooncake"))


def test_a_dataset_s_split_is_read_at_the_block_size_the_dataset_records(tmp_path: Path) -> None:
    # 1,500 tokens in 3 hashes: 512 tokens a block (at the layout's own 256 they need 6)
    rows = [{**row, "input_length": 1500} for row in bursted_rows("w-0")]
    test = write_jsonl(tmp_path / "test.jsonl", rows)
    info = {"format": "bursted-art-jsonl", "block_tokens": 512, "splits": {"test": {}}}
    (tmp_path / "dataset_info.json").write_text(json.dumps(info))
    assert dataset_block_tokens(test) == 512
    plan = plan_trace(TraceOptions(path=str(test)))
    assert plan.block_tokens == 512 and plan.describe()["block_tokens"] == 512
    (window,) = trace_windows(TraceOptions(path=str(test)))
    assert (window.block_tokens, len(window.requests)) == (512, 4)
    assert [w.block_tokens for w in iter_bursted_windows(test)] == [512]
    assert read_trace(test).block_tokens == 512
    # a block size given wins; at 256 the rows are refused, the block size named first
    with pytest.raises(
        TraceFormatError,
        match=r"needs 6 \(or 5\); if its hashes cover blocks of another size, set "
        r"block_tokens= to that size, else strict_block_count=false accepts it",
    ):
        plan_trace(TraceOptions(path=str(test), block_tokens=256))
    # a row of too few ids at the recorded size names the record, not the option
    # (helper-76's review: "(block_tokens)", which the user never set)
    short = write_jsonl(tmp_path / "test.jsonl", [{**rows[0], "hash_ids": ["a"]}, *rows[1:]])
    with pytest.raises(TraceFormatError, match=r"at 512 tokens a block \(the dataset_info\.json "
                       r"beside it\) needs 3 \(or 2\)"):  # fmt: skip
        plan_trace(TraceOptions(path=str(short)))
    write_jsonl(tmp_path / "test.jsonl", rows)
    # a file the dataset does not list, or beside another library's dataset_info.json
    assert dataset_block_tokens(write_jsonl(tmp_path / "mine.jsonl", rows)) is None
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "dataset_info.json").write_text('{"splits": {"test": {}}}')
    assert dataset_block_tokens(write_jsonl(tmp_path / "hf" / "test.jsonl", rows)) is None
    # a whole float is taken, as a row's integer fields take one (512.0 was refused)
    (tmp_path / "dataset_info.json").write_text(json.dumps({**info, "block_tokens": 512.0}))
    assert dataset_block_tokens(test) == 512 and type(dataset_block_tokens(test)) is int
    # a dataset_info.json that cannot say is named
    for bad in (0, 512.5, 0.0, True, "512"):
        (tmp_path / "dataset_info.json").write_text(json.dumps({**info, "block_tokens": bad}))
        with pytest.raises(
            ValueError, match=r"dataset_info.json, field 'block_tokens': must be an integer >= 1 "
        ):
            dataset_block_tokens(test)
    (tmp_path / "dataset_info.json").write_text('{"format": ')
    with pytest.raises(ValueError, match=r"dataset_info.json: not valid JSON \(Expecting value"):
        dataset_block_tokens(test)


def test_a_symlinked_or_gzipped_split_keeps_the_dataset_s_block_size(tmp_path: Path) -> None:
    """A link to a split, from a folder of links, finds the dataset_info.json beside the
    split it points at; a gzipped split is the split the dataset lists without `.gz`
    (the audit: a linked test.jsonl was read at 256 tokens a block and refused)."""
    # 1,500 tokens in 3 hashes: 512 tokens a block (at the layout's own 256 they need 6)
    rows = [{**row, "input_length": 1500} for row in bursted_rows("w-0")]
    data = tmp_path / "ds"
    data.mkdir()
    test = write_jsonl(data / "test.jsonl", rows)
    info = {"format": "bursted-art-jsonl", "block_tokens": 512, "splits": {"test": {}}}
    (data / "dataset_info.json").write_text(json.dumps(info))
    links = tmp_path / "links"
    links.mkdir()
    (links / "test.jsonl").symlink_to(test)
    (links / "mine.jsonl").symlink_to(test)  # renamed: the split's own name counts
    for link in (links / "test.jsonl", links / "mine.jsonl"):
        assert dataset_block_tokens(link) == 512
        (window,) = trace_windows(TraceOptions(path=str(link)))
        assert (window.block_tokens, len(window.requests)) == (512, 4)
    zipped = data / "test.jsonl.gz"
    zipped.write_bytes(gzip.compress(test.read_bytes()))
    assert dataset_block_tokens(zipped) == 512
    assert plan_trace(TraceOptions(path=str(zipped))).block_tokens == 512
    packed = data / "test.jsonl.xz"  # as bunzip2, unxz and zstd -d are named too
    packed.write_bytes(compress("xz", test.read_bytes()))
    assert dataset_block_tokens(packed) == 512
    assert plan_trace(TraceOptions(path=str(packed))).block_tokens == 512
    # a file the dataset does not list stays the format's, zipped or linked
    other = data / "mine.jsonl.gz"
    other.write_bytes(gzip.compress(test.read_bytes()))
    (links / "other.jsonl").symlink_to(other)
    assert dataset_block_tokens(other) is None
    assert dataset_block_tokens(links / "other.jsonl") is None
    # a dataset_info.json beside the link that lists it wins over the one it points at
    (links / "dataset_info.json").write_text(json.dumps({**info, "block_tokens": 300}))
    assert dataset_block_tokens(links / "test.jsonl") == 300
    assert dataset_block_tokens(links / "mine.jsonl") == 512  # not listed there: beside its target


def test_time_unit_auto_picks_a_plausible_unit_and_says_so(tmp_path: Path) -> None:
    start = 1_700_000_000_000_000_000  # integer nanoseconds: read as ms, a million days
    path = write_jsonl(tmp_path / "ns.jsonl", _mooncake([start, start + 1_500_000_000]))
    with pytest.warns(
        TraceWarning, match=r"read as ms would reach [\d,.]+ days after 1970 .*; reading it as ns"
    ):
        workload = read_mooncake(path)
    assert [r.arrival_s for r in workload.requests] == [0.0, 1.5]
    ms = read_mooncake(path, options=ReadOptions(time_unit="ns"))  # chosen: no warning
    assert ms.requests[1].arrival_s == 1.5
    seconds = write_jsonl(tmp_path / "s.jsonl", _mooncake([10, 12]))
    assert read_mooncake(seconds, options=ReadOptions(time_unit="s")).requests[1].arrival_s == 2.0
    # Unix seconds in a millisecond format: kept in ms (a 2 s trace), with a warning
    unix = write_jsonl(tmp_path / "unix.jsonl", _mooncake([1_733_400_000, 1_733_400_002]))
    with pytest.warns(TraceWarning) as caught:
        assert read_mooncake(unix).requests[1].arrival_s == 0.002
    assert str(caught[0].message) == (
        f"{unix}: timestamp from 1733400000 looks like Unix seconds; read as ms, as the "
        "format counts, it falls 20 days after 1970, a span of 0.0 s (set time_unit=s "
        "if it is in seconds)"
    )
    # implausible in every unit: kept, and said (helper-56's review: silent)
    far = write_jsonl(tmp_path / "far.jsonl", _mooncake([0, 1e300]))
    with pytest.warns(TraceWarning, match=r"1.16e\+292 days, and no finer unit makes it plaus"):
        read_mooncake(far)


def test_numeric_timestamps_written_as_strings_are_read(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", _mooncake(["1000", " 2500.5 "]))
    assert [r.arrival_s for r in read_mooncake(path).requests] == [0.0, 1.5005]
    bad = write_jsonl(tmp_path / "bad.jsonl", _mooncake(["1000", "soon"]))
    with pytest.raises(TraceFormatError, match=r"line 2, field 'timestamp': expected a number"):
        read_mooncake(bad)


SUFFIXES = {"gzip": ".gz", "bzip2": ".bz2", "xz": ".xz", "zstd": ".zst"}


@pytest.mark.parametrize("kind", COMPRESSIONS)
def test_compression_is_told_by_its_bytes_not_its_name(kind: str, tmp_path: Path) -> None:
    text = "".join(json.dumps(row) + "\n" for row in _mooncake([0, 1000]))
    packed = tmp_path / "packed.jsonl"  # compressed data without its ending
    packed.write_bytes(compress(kind, text.encode()))
    plain = tmp_path / f"plain.jsonl{SUFFIXES[kind]}"  # plain text named as compressed
    plain.write_text(text)
    assert len(read_mooncake(packed)) == len(read_mooncake(plain)) == 2


def test_the_readers_of_a_compressed_file_stop_on_one_set_of_errors(tmp_path: Path) -> None:
    """The file reader, the packing check, the encoding note and the hub reader catch
    one tuple (``sources.DECOMPRESS_ERRORS``) for a file that cannot be decompressed to
    its end; a cut-short xz file is left to the JSONL reader, which names its line."""
    pytest.importorskip("datasets")
    from envs.workloads.readers.hub import _hub_read_errors
    from envs.workloads.readers.sources import DECOMPRESS_ERRORS, JsonlRows, refuse_other_packing

    assert JsonlRows.READ_ERRORS is DECOMPRESS_ERRORS
    assert set(DECOMPRESS_ERRORS) <= set(_hub_read_errors())
    text = "".join(json.dumps(row) + "\n" for row in _mooncake([0, 1000]))
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(compress("xz", text.encode())[:40])
    assert refuse_other_packing(cut) is None


@pytest.mark.parametrize("kind", COMPRESSIONS)
def test_a_compressed_trace_s_windows_are_named_as_the_uncompressed_file_s(
    kind: str, tmp_path: Path
) -> None:
    """moon.jsonl.gz's windows are moon/moon-0000, as moon.jsonl's are (they were
    moon.jsonl/moon.jsonl-0000: the name less its last suffix only); so are
    moon.jsonl.bz2's, .xz's and .zst's."""
    text = "".join(json.dumps(row) + "\n" for row in _mooncake([0, 1000, 400_000]))
    packed = f"moon.jsonl{SUFFIXES[kind]}"
    (tmp_path / "moon.jsonl").write_text(text)
    (tmp_path / packed).write_bytes(compress(kind, text.encode()))
    for name in ("moon.jsonl", packed):
        options = TraceOptions(path=str(tmp_path / name), test_fraction=0.5)
        assert [w.trace_id for w in plan_trace(options).windows] == ["moon-0000", "moon-0001"]
        assert [w.name for w in trace_windows(options, "all")] == [
            "moon/moon-0000",
            "moon/moon-0001",
        ]
        assert read_mooncake(tmp_path / name).name == "moon"
    bursted = "".join(json.dumps(row) + "\n" for row in bursted_rows("w-0"))
    (tmp_path / f"b.jsonl{SUFFIXES[kind]}").write_bytes(compress(kind, bursted.encode()))
    assert [w.name for w in iter_bursted_windows(tmp_path / f"b.jsonl{SUFFIXES[kind]}")] == [
        "b:w-0"
    ]


def test_too_many_skipped_rows_fail_with_the_count(tmp_path: Path) -> None:
    rows: list[object] = [*_mooncake([0, 1000, 2000]), "not json"]
    path = write_jsonl(tmp_path / "t.jsonl", rows)  # type: ignore[arg-type]
    with pytest.raises(TooManyBadRowsError, match=r"1 of 4 rows are malformed \(25.0%\)"):
        plan_trace(TraceOptions(path=str(path), skip_bad_rows=True))
    with pytest.warns(TraceWarning, match=r"skipped 1 malformed row \(first: .*line 4"):
        plan = plan_trace(TraceOptions(path=str(path), skip_bad_rows=True, max_bad_fraction=0.25))
    assert (plan.rows_read, plan.rows_skipped) == (3, 1)


def test_strict_block_count_can_be_turned_off(tmp_path: Path) -> None:
    short = [{"timestamp": 0, "input_length": 5000, "hash_ids": [1, 2]}]  # 5000 needs 10 blocks
    path = write_jsonl(tmp_path / "t.jsonl", short)
    with pytest.raises(TraceFormatError, match="strict_block_count=false accepts it"):
        plan_trace(TraceOptions(path=str(path)))
    plan = plan_trace(TraceOptions(path=str(path), strict_block_count=False))
    assert plan.rows_read == 1


def test_a_qwen_trace_s_decimal_seconds_come_out_of_its_windows_as_written(
    tmp_path: Path,
) -> None:
    """Qwen-Bailian's timestamps are decimal seconds: 1063.773 - 1060.0 in binary is
    3.772999999999911 (the audit's figure), which a window's arrival was; taken in
    the trace's unit and rounded to the places both were written with, it is 3.773."""
    times = [1000.0, 1001.5, 1003.773, 1061.25, 1063.773, 1125.117]
    rows = [{**qwen_rows()[1], "chat_id": 10 + i, "timestamp": t} for i, t in enumerate(times)]
    path = write_jsonl(tmp_path / "q.jsonl", rows)
    assert 1063.773 - 1060.0 == 3.772999999999911  # what the windows gave
    read = trace_windows(TraceOptions(path=str(path), window_s=60.0), "all")
    arrivals = [[r.arrival_s for r in w.requests] for w in read]
    assert arrivals == [[0.0, 1.5, 3.773], [1.25, 3.773], [5.117]]
    # a window opening at a decimal time (start_s=0.117: at 1000.117, 1060.117, 1120.117)
    read = trace_windows(TraceOptions(path=str(path), window_s=60.0, start_s=0.117), "all")
    arrivals = [[r.arrival_s for r in w.requests] for w in read]
    assert arrivals == [[1.383, 3.656], [1.133, 3.656], [5.0]]


def test_a_decimal_row_on_a_window_boundary_opens_the_later_window(tmp_path: Path) -> None:
    """1060.1 s is 60 s after 1000.1 s, but 59.999999999999886 s in binary: the window
    was chosen from that (the first) and the arrival in it from the rounded
    difference, 60.0 s, at window_s=60. A row on a boundary opens the later window at
    0 s; start_s and end_s are boundaries the same way (time_unit=s: the rows are
    too far apart for auto to read them without a warning)."""
    times = [1000.1, 1030.0, 1060.1, 1120.1, 1300.1, 1301.0]
    rows = [{**qwen_rows()[1], "chat_id": 10 + i, "timestamp": t} for i, t in enumerate(times)]
    path = write_jsonl(tmp_path / "q.jsonl", rows)
    assert 1060.1 - 1000.1 == 59.999999999999886
    windows = list(trace_windows(TraceOptions(path=str(path), time_unit="s", window_s=60.0), "all"))
    found = [(w.meta["trace_id"], [r.arrival_s for r in w.requests]) for w in windows]
    assert found == [("q-0000", [0.0, 29.9]), ("q-0001", [0.0]), ("q-0002", [0.0]),
                     ("q-0005", [0.0, 0.9])]  # fmt: skip
    plan = plan_trace(TraceOptions(path=str(path), time_unit="s", window_s=60.0))
    assert [(w.key, w.rows) for w in plan.windows] == [(0, 2), (1, 1), (2, 1), (5, 2)]
    # the row at start_s=60 is kept, the row at end_s=120 is not
    cut = TraceOptions(path=str(path), time_unit="s", window_s=60.0, start_s=60.0, end_s=120.0)
    found = [[r.chat_id for r in w.requests] for w in trace_windows(cut, "all")]
    assert found == [["12"]]
    for window_s in (0.1, 7.5, 300.0):  # every row on a boundary of 0.1 s windows
        for window in trace_windows(
            TraceOptions(path=str(path), time_unit="s", window_s=window_s), "all"
        ):
            assert all(0.0 <= r.arrival_s < window_s for r in window.requests)


def test_windows_of_decimal_length_open_at_their_decimal_times(tmp_path: Path) -> None:
    """A window of a decimal ``window_s`` (or after a decimal ``start_s``) opens at
    the decimal it is: at window_s=0.1 from 1000.1, window 600 opens at 1060.1, not
    at 1000.1 + 600 x 0.1 in binary (60.00000000000001 s: 1060.1000000000001), which
    put the row at 1060.1 a window early, at 0.09999999999990905 s. A row at
    start_s=100.2 (1100.3, 100.19999999999993 s after 1000.1 in binary) is kept."""
    times = [1000.1, 1030.0, 1060.1, 1100.3, 1300.1]
    rows = [{**qwen_rows()[1], "chat_id": 10 + i, "timestamp": t} for i, t in enumerate(times)]
    path = write_jsonl(tmp_path / "q.jsonl", rows)

    def found(**options: float) -> list[tuple[str, list[float]]]:
        read = trace_windows(TraceOptions(path=str(path), time_unit="s", **options), "all")
        return [(w.meta["trace_id"], [r.arrival_s for r in w.requests]) for w in read]

    assert found(window_s=0.1) == [("q-0000", [0.0]), ("q-0299", [0.0]), ("q-0600", [0.0]),
                                   ("q-1002", [0.0]), ("q-3000", [0.0])]  # fmt: skip
    assert found(window_s=0.3) == [("q-0000", [0.0]), ("q-0099", [0.2]), ("q-0200", [0.0]),
                                   ("q-0334", [0.0]), ("q-1000", [0.0])]  # fmt: skip
    plan = plan_trace(TraceOptions(path=str(path), time_unit="s", window_s=0.1))
    assert [w.key for w in plan.windows] == [0, 299, 600, 1002, 3000]
    assert found(window_s=120.0, start_s=100.2) == [("q-0000", [0.0]), ("q-0001", [79.8])]
    # end_s on a row leaves it out, a row before it is kept
    assert found(window_s=120.0, start_s=29.9, end_s=100.2) == [("q-0000", [0.0, 30.1])]


def test_negative_decimal_times_keep_their_order_in_a_window(tmp_path: Path) -> None:
    """Rounding to the written places is for non-negative times: with a window
    opening at -259.538, -13.165000000000001 (binary difference 246.37299999999999)
    and -13.165 (rounded to 246.373, then 246.37300000000002 against it) swapped
    places in a review's run."""
    times = [-559.538, -400.0, -13.165000000000001, -13.165, 10.0, 100.0]
    rows = [{**qwen_rows()[1], "chat_id": 10 + i, "timestamp": t} for i, t in enumerate(times)]
    path = write_jsonl(tmp_path / "q.jsonl", rows)
    read = trace_windows(TraceOptions(path=str(path), window_s=300.0), "all")
    for window in read:
        arrivals = [r.arrival_s for r in window.requests]
        assert arrivals == sorted(arrivals)
        ids = [r.chat_id for r in window.requests]
        assert ids == sorted(ids)  # the file's order, which is the times' order


def test_qwen_chat_ids_are_kept_on_the_request(tmp_path: Path) -> None:
    workload = read_qwen_bailian(write_jsonl(tmp_path / "q.jsonl", qwen_rows()))
    ids = [(r.chat_id, r.parent_chat_id) for r in workload.requests]
    assert ids == [("1", ""), ("4", ""), ("2", "1"), ("3", "2")]


def test_bad_options_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"TraceOptions.window_s must be a finite number > 0"):
        TraceOptions(path="x", window_s=0)
    with pytest.raises(ValueError, match=r"test_fraction \+ val_fraction must be <= 1"):
        TraceOptions(path="x", test_fraction=0.7, val_fraction=0.5)
    every = "auto, mooncake, art, bursted, qwen, art_chat, qwen_bailian, hub"  # hub is taken
    with pytest.raises(
        ValueError, match=rf"TraceOptions.format: unknown trace format 'csv' \(known: {every}\)$"
    ):
        TraceOptions(path="x", format="csv")
    with pytest.raises(ValueError, match=r"TraceOptions.path is empty"):
        plan_trace(TraceOptions())


def test_the_file_stamp_is_its_size_and_sha256(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", _mooncake([0, 1000]))
    stamp = file_stamp(path)
    data = path.read_bytes()
    assert stamp["bytes"] == len(data) and stamp["file"] == "t.jsonl"
    assert stamp["sha256"] == hashlib.sha256(data).hexdigest()


def test_the_shipped_example_trace_is_the_generator_s_output() -> None:
    shipped = ROOT / "examples" / "mooncake_example.jsonl"
    assert shipped.read_text() == example_mooncake_text()
    plan = plan_trace(TraceOptions(path=str(shipped)))
    assert (plan.format, plan.block_tokens, plan.rows_read) == ("mooncake", 512, 3068)
    assert [sum(w.split == s for w in plan.windows) for s in ("train", "test")] == [7, 2]


def test_a_trace_without_val_windows_names_the_option_that_makes_them(tmp_path: Path) -> None:
    from envs.windows import window_pool

    path = write_jsonl(tmp_path / "t.jsonl", _mooncake([0, 1000, 7000]))
    with pytest.raises(ValueError, match=r"has no 'val' windows \(workload\.val_fraction, 0 by"):
        window_pool("trace", "val", 0, None, {"path": str(path), "window_s": 5.0})


def test_windows_refuses_a_trace_split_the_file_leaves_empty_as_the_envs_do(
    tmp_path: Path,
) -> None:
    """``windows("trace", split="train", path=short)`` returned [] where ``gym.make``
    (``window_pool``) refuses the same file: it raises the same error. One 60 s window
    at ``test_fraction=0.25`` is a test window (ceil(0.25 * 1) = 1), so no train one."""
    from envs.windows import window_pool

    path = write_jsonl(tmp_path / "t.jsonl", _mooncake([0, 100]))
    said = (
        "workload 'trace' has no 'train' windows (workload.test_fraction=0.25 and "
        "workload.val_fraction=0 leave it none)"
    )
    with pytest.raises(ValueError) as env_error:
        window_pool("trace", "train", 0, None, {"path": str(path)})
    with pytest.raises(ValueError) as api_error:
        list(windows("trace", split="train", path=str(path)))
    assert str(api_error.value) == str(env_error.value) == said
    # what the file has, and a split asked for none, are as they were
    assert len(list(windows("trace", split="test", path=str(path)))) == 1
    assert list(windows("trace", split="train", limit=0, path=str(path))) == []
    assert len(list(windows("trace", split="train", test_fraction=0, path=str(path)))) == 1


def test_one_error_says_a_split_without_windows_for_the_envs_the_api_and_the_commands(
    tmp_path: Path,
) -> None:
    """``no_windows_error`` is the message ``window_pool``, ``windows`` and
    ``count_windows`` raise: a trace's names what leaves it empty, a generated
    workload's (``val_windows=0``) nothing more."""
    from envs.windows import window_pool
    from envs.workloads.trace_file import no_windows_error
    from experiments.evaluation import count_windows

    path = write_jsonl(tmp_path / "t.jsonl", _mooncake([0, 100]))
    params = {"path": str(path), "test_fraction": 0}
    said = "workload 'trace' has no 'test' windows (workload.test_fraction=0)"
    assert str(no_windows_error("trace", "test", params)) == said
    with pytest.raises(ValueError) as counted:
        count_windows("trace", params=params)
    with pytest.raises(ValueError) as pooled:
        window_pool("trace", "test", 0, None, params)
    assert str(counted.value) == str(pooled.value) == said
    generated = no_windows_error("bursted_synthetic", "val")
    assert str(generated) == "workload 'bursted_synthetic' has no 'val' windows"
    with pytest.raises(ValueError) as empty:
        window_pool("bursted_synthetic", "val", 0, None, {"val_windows": 0})
    assert str(empty.value) == str(generated)


def test_a_byte_order_mark_opening_the_file_is_not_part_of_its_first_row(tmp_path: Path) -> None:
    rows = _mooncake([0, 1000])
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(r) + "\n" for r in rows).encode())
    options = TraceOptions(path=str(path), test_fraction=1.0)
    assert plan_trace(options).format == "mooncake"
    (window,) = trace_windows(options)
    assert [r.arrival_s for r in window.requests] == [0.0, 1.0]
    # only at the start of the file: a mark inside it is a bad row
    path.write_bytes(path.read_bytes() + b"\xef\xbb\xbf" + json.dumps(rows[0]).encode() + b"\n")
    with pytest.raises(TraceFormatError, match=r"line 3, row: not valid JSON"):
        plan_trace(options)


def test_a_trace_error_crosses_to_another_process() -> None:
    """A worker's TraceFormatError is pickled to the parent (reproduce's jobs): it is
    rebuilt from its parts, message and named options alike."""
    import pickle

    error = TraceFormatError(
        "f.jsonl", 3, "timestamp", "{skip_bad_rows}=true skips it", ("skip_bad_rows",)
    )
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is TraceFormatError and str(copy) == str(error)
    assert (copy.path, copy.line, copy.field, copy.reason, copy.fields) == (
        "f.jsonl", 3, "timestamp", "{skip_bad_rows}=true skips it", ("skip_bad_rows",)
    )  # fmt: skip
    assert copy.named({"skip_bad_rows": "workload.skip_bad_rows"}).endswith(
        "workload.skip_bad_rows=true skips it"
    )


def test_requests_whose_prefix_key_ends_in_their_own_blocks_are_warned_about_once(
    tmp_path: Path,
) -> None:
    """Ten requests share block 1; each has a 2-block suffix of its own (1,200 tokens
    at 512-token blocks), so its prompt less its last block ends in a block no other
    request has: all ten are counted, once per file. A 1-block suffix is not."""
    rows = [
        {
            "timestamp": i * 100,
            "input_length": 1200,
            "output_length": 1,
            "hash_ids": [1, 2 + i, 50 + i],
        }
        for i in range(10)
    ]
    path = write_jsonl(tmp_path / "long.jsonl", rows)
    with pytest.warns(TraceWarning) as caught:
        assert len(list(windows("trace", split="all", path=str(path)))) == 1
    said = [str(w.message) for w in caught if "no other request has" in str(w.message)]
    assert len(said) == 1
    assert said[0].startswith(  # the path as given, as the reader's other warnings say it
        f"{path}: in window long-0000, 10 of 10 requests share leading blocks with others, "
        "but their prompt less its last block ends in 512-token blocks no other request has"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same file again: said already
        list(windows("trace", split="all", path=str(path)))
        short = [{**r, "input_length": 1000, "hash_ids": r["hash_ids"][:2]} for r in rows]
        list(windows("trace", split="all", path=str(write_jsonl(tmp_path / "s.jsonl", short))))


def test_the_prefix_key_warning_looks_past_a_first_window_without_them(tmp_path: Path) -> None:
    """Three windows 600 s apart (late-0000, -0002, -0004 of 300 s): the first has
    one-block suffixes; in the others each request ends in a 2-block suffix of its
    own. The warning names the first such window read, once."""
    rows = [
        {
            "timestamp": w * 600_000 + i * 100,
            "input_length": 1000 if w == 0 else 1200,
            "output_length": 1,
            "hash_ids": [1 + 100 * w, 2 + i + 100 * w] + ([] if w == 0 else [50 + i]),
        }
        for w in range(3)
        for i in range(10)
    ]
    path = write_jsonl(tmp_path / "late.jsonl", rows)
    with pytest.warns(TraceWarning) as caught:
        read = list(windows("trace", split="all", path=str(path), window_s=300.0))
    assert len(read) == 3
    said = [str(w.message) for w in caught if "no other request has" in str(w.message)]
    assert len(said) == 1 and said[0].startswith(f"{path}: in window late-0002, 10 of 10 ")


def test_a_hub_split_on_a_file_read_otherwise_warns_that_it_does_nothing(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "h.jsonl", _mooncake([0, 100, 200]))
    with pytest.warns(TraceWarning, match=r"^hub_split='dev' does nothing: .* format=hub$"):
        plan_trace(TraceOptions(path=str(path), hub_split="dev"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan_trace(TraceOptions(path=str(path), window_s=60.0))


def _datasets_offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The ``datasets`` library offline, its cache in ``tmp_path``: nothing is fetched."""
    for name in ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))


def test_a_hub_split_on_a_file_read_with_format_hub_warns_that_it_does_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local file read through the datasets library is its one split ("train"),
    whatever ``hub_split`` says: it was taken without a word."""
    pytest.importorskip("datasets")
    _datasets_offline(monkeypatch, tmp_path)
    path = write_jsonl(tmp_path / "h.jsonl", _mooncake([0, 100, 200]))
    with pytest.warns(TraceWarning) as caught:
        plan = plan_trace(TraceOptions(path=str(path), format="hub", hub_split="test"))
    assert [str(w.message) for w in caught] == [
        "hub_split='test' does nothing: it names the split of a dataset read with format=hub "
        "by its name or folder; a file has one"
    ]
    assert plan.rows_read == 3


def test_format_hub_checks_a_local_file_s_own_values_as_the_file_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The datasets library reads a JSON column of numbers with a "600" in it as
    numbers, and ids past 64 bits as floats: with format=hub, "600" was taken as 600
    where the file reader refuses it, and an id of 2**64 + 1 made every id of the
    file a float, refused on line 1. The file's own values are checked, by the
    file reader's checks: the same one-line error, or the same requests."""
    pytest.importorskip("datasets")
    _datasets_offline(monkeypatch, tmp_path)
    text = _mooncake([0, 100, 200])
    text[1]["input_length"] = "600"
    path = write_jsonl(tmp_path / "text.jsonl", text)
    errors = []
    for fmt in ("auto", "hub"):
        with pytest.raises(TraceFormatError) as caught:
            plan_trace(TraceOptions(path=str(path), format=fmt))
        errors.append(str(caught.value))
    assert errors == [f"{path}, line 2, field 'input_length': expected an integer, got '600'"] * 2
    with pytest.raises(TraceFormatError, match=r", line 2, field 'input_length': expected an int"):
        list(read_hub_dataset("json", data_files=str(path)))
    big = _mooncake([0, 100, 200])
    big[1]["hash_ids"] = [1, 2**64 + 1]
    path = write_jsonl(tmp_path / "big.jsonl", big)
    read = {}
    for fmt in ("auto", "hub"):
        (window,) = trace_windows(TraceOptions(path=str(path), format=fmt), "all")
        read[fmt] = [(r.request_id, r.arrival_s, r.blocks) for r in window.requests]
    assert read["hub"] == read["auto"] and len(read["hub"]) == 3
    (whole,) = read_hub_dataset("json", data_files=str(path))
    assert [(r.request_id, r.blocks) for r in whole.requests] == [
        (r[0], r[2]) for r in read["auto"]
    ]


def test_format_hub_checks_a_dataset_folder_s_own_values_as_the_file_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dataset's folder read with format=hub was checked on the datasets library's
    values: a "600" among numbers was taken as 600, and an id of 2**64 + 1 made every
    id a float, refused on line 1. Its data files are read as a file given alone is:
    the same one-line error, naming the file and line, or the same requests."""
    pytest.importorskip("datasets")
    _datasets_offline(monkeypatch, tmp_path)
    text = _mooncake([0, 100, 200])
    text[1]["input_length"] = "600"
    folder = tmp_path / "text"
    folder.mkdir()
    path = write_jsonl(folder / "train.jsonl", text)
    errors = []
    for given, fmt in ((path, "auto"), (folder, "hub")):
        with pytest.raises(TraceFormatError) as caught:
            plan_trace(TraceOptions(path=str(given), format=fmt))
        errors.append(str(caught.value))
    assert errors == [f"{path}, line 2, field 'input_length': expected an integer, got '600'"] * 2
    big = _mooncake([0, 100, 200])
    big[1]["hash_ids"] = [1, 2**64 + 1]
    folder = tmp_path / "big"
    folder.mkdir()
    path = write_jsonl(folder / "train.jsonl", big)
    read = {}
    for given, fmt in ((path, "auto"), (folder, "hub")):
        (window,) = trace_windows(TraceOptions(path=str(given), format=fmt), "all")
        read[fmt] = [(r.arrival_s, r.blocks) for r in window.requests]
    assert read["hub"] == read["auto"] and len(read["hub"]) == 3


def test_read_hub_dataset_by_name_checks_its_files_own_values_as_format_hub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """read_hub_dataset of a dataset's folder (a name) read the datasets library's
    rows: a "600" among numbers was taken as 600, where format=hub (the commands)
    refuses it on the file's line 2. It reads the split's data files as format=hub
    does: the same one-line error, the same requests, a split of two files' error
    naming the file and its own line, and a split the dataset lacks named as its
    own option."""
    pytest.importorskip("datasets")
    _datasets_offline(monkeypatch, tmp_path)
    rows = _mooncake([0, 100, 200])
    text = [dict(row) for row in rows]
    text[1]["input_length"] = "600"
    folder = tmp_path / "text"
    folder.mkdir()
    path = write_jsonl(folder / "train.jsonl", text)
    said = f"{path}, line 2, field 'input_length': expected an integer, got '600'"
    with pytest.raises(TraceFormatError) as caught:
        plan_trace(TraceOptions(path=str(folder), format="hub"))
    assert str(caught.value) == said
    with pytest.raises(TraceFormatError) as caught:
        list(read_hub_dataset(str(folder)))
    assert str(caught.value) == said
    with pytest.raises(ConfigError) as refused:
        list(read_hub_dataset(str(folder), split="test"))
    assert str(refused.value) == (
        f"read_hub_dataset.split='test': the dataset {folder} has the splits train"
    )
    # an id past 64 bits: read exactly, as the file reader reads it (the library: a float)
    big = [dict(row) for row in rows]
    big[1]["hash_ids"] = [1, 2**64 + 1]
    folder = tmp_path / "big"
    folder.mkdir()
    write_jsonl(folder / "train.jsonl", big)
    (want,) = trace_windows(TraceOptions(path=str(folder), format="hub"), "all")
    (got,) = read_hub_dataset(str(folder))
    assert [(r.arrival_s, r.blocks) for r in got.requests] == [
        (r.arrival_s, r.blocks) for r in want.requests
    ]
    # a split of two files: the second file's own line 2
    data = tmp_path / "two" / "data"
    data.mkdir(parents=True)
    write_jsonl(data / "train-00000-of-00002.jsonl", rows)
    second = write_jsonl(
        data / "train-00001-of-00002.jsonl", [rows[0], {**rows[1], "output_length": -1}]
    )
    with pytest.raises(TraceFormatError) as caught:
        list(read_hub_dataset(str(data.parent)))
    assert str(caught.value) == f"{second}, line 2, field 'output_length': must be >= 0, got -1"


def test_format_hub_reads_a_split_of_several_files_naming_each_file_s_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A split in two data files (a JSONL file and a parquet file) reads as the file of
    both files' rows; a bad value on the second file's line 2 is named so (the rows'
    lines count on through the files: it is the split's line 5), not as a row of
    the split."""
    pytest.importorskip("datasets")
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    _datasets_offline(monkeypatch, tmp_path)
    rows = _mooncake([0, 100, 200, 5300, 5400, 5500])
    whole = write_jsonl(tmp_path / "whole.jsonl", rows)
    (want,) = trace_windows(TraceOptions(path=str(whole)), "all")
    data = tmp_path / "repo" / "data"
    data.mkdir(parents=True)
    for k, part in enumerate((rows[:3], rows[3:])):
        file = data / f"train-0000{k}-of-00002.jsonl"
        write_jsonl(file, part)
    (got,) = trace_windows(TraceOptions(path=str(data.parent), format="hub"), "all")
    assert [(r.arrival_s, r.blocks) for r in got.requests] == [
        (r.arrival_s, r.blocks) for r in want.requests
    ]
    second = data / "train-00001-of-00002.jsonl"
    write_jsonl(second, [rows[3], {**rows[4], "output_length": -1}, rows[5]])
    with pytest.raises(TraceFormatError) as caught:
        plan_trace(TraceOptions(path=str(data.parent), format="hub"))
    assert str(caught.value) == f"{second}, line 2, field 'output_length': must be >= 0, got -1"
    # a parquet file's rows are numbered as its lines; and a row the plan itself refuses
    # (out of time order across windows) is placed too, the other line it names being
    # the split's (the second file's first: the split's line 4)
    for k, part in enumerate((rows[:3], [rows[3], rows[0], rows[5]])):
        (data / f"train-0000{k}-of-00002.jsonl").unlink(missing_ok=True)
        pq.write_table(pa.Table.from_pylist(part), data / f"train-0000{k}-of-00002.parquet")
    with pytest.raises(TraceFormatError) as caught:
        plan_trace(TraceOptions(path=str(data.parent), format="hub", window_s=5.0))
    said = str(caught.value)
    assert said.startswith(
        f"{data / 'train-00001-of-00002.parquet'}, line 2, field 'timestamp': 0 (0 s after "
        "the earliest arrival) falls in the window starting at 0 s, before line 4's (5300, "
    )
    assert said.endswith(
        f"drop line 4 if it is a glitch) (lines counted on through {data.parent}[train]'s "
        "files, in order: this is its line 5)"
    )


def test_format_hub_warnings_name_a_split_s_file_and_its_own_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a split of several data files, a warning named a row by the split's running
    line count ("first on line 5", of a split whose files hold 3 lines each): no line
    of any file. It names the file and that file's own line, as an error does."""
    pytest.importorskip("datasets")
    _datasets_offline(monkeypatch, tmp_path)
    rows = _mooncake([0, 100, 200, 300, 400, 500])
    data = tmp_path / "repo" / "data"
    data.mkdir(parents=True)
    first = write_jsonl(data / "train-00000-of-00002.jsonl", rows[:3])
    second = data / "train-00001-of-00002.jsonl"
    # the second file's line 2: a key no format reads, and an arrival before line 1's
    write_jsonl(second, [rows[4], {**rows[3], "oops": 1}, rows[5]])
    assert first.exists()
    with pytest.warns(TraceWarning) as caught:
        plan_trace(TraceOptions(path=str(data.parent), format="hub"))
    said = [str(w.message) for w in caught]
    label = f"{data.parent}[train]"
    assert (
        f"{label}: rows have keys this format does not read, ignored: 'oops' (first on "
        f"{second}, line 2) (a misspelt field takes its default)"
    ) in said
    assert (
        f"{label}: 1 row arrived out of time order (first at {second}, line 2); sorted by arrival"
    ) in said
    # a skipped row's warning quotes its error as the file and its own line names it
    write_jsonl(second, [rows[3], {**rows[4], "output_length": -1}, rows[5]])
    skip = {"skip_bad_rows": True, "max_bad_fraction": 0.5}
    with pytest.warns(TraceWarning) as caught:
        plan_trace(TraceOptions(path=str(data.parent), format="hub", **skip))  # type: ignore[arg-type]
    said = [str(w.message) for w in caught]
    assert (
        f"{label}: skipped 1 malformed row (first: {second}, line 2, field 'output_length': "
        "must be >= 0, got -1)"
    ) in said


def test_format_hub_reads_a_json_document_as_the_library_gives_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local JSON file of one document (an array of rows, pretty-printed or not)
    is no JSONL file the file reader reads, but the datasets library reads it: with
    format=hub (or read_hub_dataset("json", data_files=FILE)) it gives the rows the
    JSONL file of the same rows gives; it was refused as "line 1, row: not valid
    JSON" once a local file's rows were read by line."""
    pytest.importorskip("datasets")
    _datasets_offline(monkeypatch, tmp_path)
    rows = _mooncake([0, 100, 200])
    lines = write_jsonl(tmp_path / "rows.jsonl", rows)
    (expected,) = trace_windows(TraceOptions(path=str(lines)), "all")
    want = [(r.request_id, r.arrival_s, r.blocks) for r in expected.requests]
    for name, indent in (("pretty.json", 1), ("flat.json", None)):
        path = tmp_path / name
        path.write_text(json.dumps(rows, indent=indent))
        (window,) = trace_windows(TraceOptions(path=str(path), format="hub"), "all")
        assert [(r.request_id, r.arrival_s, r.blocks) for r in window.requests] == want
        (whole,) = read_hub_dataset("json", data_files=str(path))
        assert [(r.request_id, r.blocks) for r in whole.requests] == [(w[0], w[2]) for w in want]


def test_format_hub_checks_a_json_document_s_own_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JSON file of one document read with format=hub (alone, or as a folder's data
    file) was the datasets library's rows: a "600" among numbers made the column text,
    refused as row 1's '600' for its 600, and an id past 64 bits failed the library,
    said as line 1 not being JSON of a supported format. It is read as the standard
    library reads it: the same checks on its own values, its rows numbered by their
    place in it (as the library's and a parquet file's are)."""
    pytest.importorskip("datasets")
    _datasets_offline(monkeypatch, tmp_path)
    rows = _mooncake([0, 100, 200])
    text = [dict(row) for row in rows]
    text[1]["input_length"] = "600"
    folder = tmp_path / "repo"
    folder.mkdir()
    path = folder / "train.json"
    path.write_text(json.dumps(text, indent=2))
    for given in (path, folder):
        with pytest.raises(TraceFormatError) as caught:
            plan_trace(TraceOptions(path=str(given), format="hub"))
        assert str(caught.value) == (  # element 1 takes lines 2 to 10 (its hash_ids 4)
            f"{path}, element 2 (line 11), field 'input_length': expected an integer, got '600'"
        )
    big = [dict(row) for row in rows]
    big[1]["hash_ids"] = [1, 2**64 + 1]
    lines = write_jsonl(tmp_path / "big.jsonl", big)
    (want,) = trace_windows(TraceOptions(path=str(lines)), "all")
    path.write_text(json.dumps(big, indent=2))
    for given in (path, folder):
        (window,) = trace_windows(TraceOptions(path=str(given), format="hub"), "all")
        assert [(r.request_id, r.arrival_s, r.blocks) for r in window.requests] == [
            (r.request_id, r.arrival_s, r.blocks) for r in want.requests
        ]
    # an element that is no object is a bad row (skipped as such); a broken document
    # is named where it breaks
    path.write_text("[" + json.dumps(rows[0]) + ",\n7,\n" + json.dumps(rows[2]) + "]")
    with pytest.raises(TraceFormatError, match=r"json, element 2 \(line 2\), row: expected a "):
        plan_trace(TraceOptions(path=str(path), format="hub"))
    skip = {"skip_bad_rows": True, "max_bad_fraction": 0.5}
    with pytest.warns(TraceWarning, match="skipped 1 malformed row"):
        plan = plan_trace(TraceOptions(path=str(path), format="hub", **skip))  # type: ignore[arg-type]
    assert plan.rows_read == 2
    path.write_text("[" + json.dumps(rows[0]) + "\n" + json.dumps(rows[1]) + "]")  # no comma
    with pytest.raises(TraceFormatError) as caught:
        plan_trace(TraceOptions(path=str(path), format="hub"))
    assert str(caught.value) == (
        f"{path}: not valid JSON at line 2, column 1 (Expecting ',' delimiter)"
    )


def test_format_hub_names_a_json_array_s_bad_row_by_its_element_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JSON array's rows are numbered by their place in it, and an error named that
    number as a line ("line 3") while the row began on line 6 of the file: no line a
    user could go to. It names the element and the line it starts on, read alone, as
    a folder's one data file, or as one of a split's files; a warning too."""
    pytest.importorskip("datasets")
    _datasets_offline(monkeypatch, tmp_path)
    rows = _mooncake([0, 100, 200])
    bad = {**rows[2], "output_length": -1}
    folder = tmp_path / "repo"
    folder.mkdir()
    path = folder / "train.json"
    # line 1 "[", element 1 on lines 2-3, a blank line 4, element 2 on line 5, element 3
    # (the bad one) on line 6 after a line of its own with the comma
    path.write_text(
        "[\n" + json.dumps(rows[0])[:-1] + ",\n" + '"x": 1}' + ",\n\n"
        + json.dumps(rows[1]) + "\n,\n" + json.dumps(bad) + "\n]\n"
    )  # fmt: skip
    for given in (path, folder):
        with pytest.raises(TraceFormatError) as caught:
            plan_trace(TraceOptions(path=str(given), format="hub"))
        assert str(caught.value) == (
            f"{path}, element 3 (line 7), field 'output_length': must be >= 0, got -1"
        )
    # read_hub_dataset too, by its builder (it said "json[train], line 3") or its folder
    for read in (lambda: read_hub_dataset("json", data_files=str(path)),
                 lambda: read_hub_dataset(str(folder))):  # fmt: skip
        with pytest.raises(TraceFormatError) as caught:
            list(read())
        assert str(caught.value) == (
            f"{path}, element 3 (line 7), field 'output_length': must be >= 0, got -1"
        )
    # the unknown key "x" of element 1 is named in the warning by its element and line
    path.write_text(path.read_text().replace(json.dumps(bad), json.dumps(rows[2])))
    with pytest.warns(TraceWarning) as caught_warnings:
        plan_trace(TraceOptions(path=str(path), format="hub"))
    said = [str(w.message) for w in caught_warnings]
    assert f"{path}: rows have keys this format does not read, ignored: 'x' (first on " \
        "element 1 (line 2)) (a misspelt field takes its default)" in said  # fmt: skip
    # a split of two files, the second the array: its file, element and line
    (folder / "train.json").rename(folder / "train-00001-of-00002.json")
    first = write_jsonl(folder / "train-00000-of-00002.jsonl", _mooncake([0, 100]))
    second = folder / "train-00001-of-00002.json"
    second.write_text(second.read_text().replace(json.dumps(rows[2]), json.dumps(bad)))
    assert first.exists()
    with pytest.raises(TraceFormatError) as caught:
        plan_trace(TraceOptions(path=str(folder), format="hub"))
    assert str(caught.value) == (
        f"{second}, element 3 (line 7), field 'output_length': must be >= 0, got -1"
    )


def test_too_many_bad_rows_names_the_first_as_its_warning_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With skip_bad_rows, the refusal of too many bad rows quotes the first one as
    the skipped-rows warning does: a JSON array's by its element and the line it
    starts on, a split's by its file and own line (it said "line 3", the element's
    number, and the split's running count, "repo[train], line 5")."""
    pytest.importorskip("datasets")
    _datasets_offline(monkeypatch, tmp_path)
    rows = _mooncake([0, 100, 200, 300])
    rows[2]["output_length"] = -1
    array = tmp_path / "train.json"
    # "[" on line 1, then one element every three lines: element 3 on line 8
    array.write_text("[\n" + ",\n\n\n".join(json.dumps(row) for row in rows) + "\n]\n")
    first = "field 'output_length': must be >= 0, got -1"
    skipping = {"format": "hub", "skip_bad_rows": True}
    with pytest.warns(TraceWarning) as said:  # 1 of 4 is allowed here
        plan_trace(TraceOptions(path=str(array), max_bad_fraction=0.5, **skipping))
    assert f"(first: {array}, element 3 (line 8), {first})" in str(said[0].message)
    with pytest.raises(TooManyBadRowsError) as caught:
        plan_trace(TraceOptions(path=str(array), max_bad_fraction=0.1, **skipping))
    assert str(caught.value).endswith(f"(first: {array}, element 3 (line 8), {first})")
    # a split of two JSONL files, the bad row on line 2 of the second
    folder = tmp_path / "repo"
    folder.mkdir()
    write_jsonl(folder / "train-00000-of-00002.jsonl", _mooncake([0, 50, 60]))
    second = write_jsonl(folder / "train-00001-of-00002.jsonl", rows[1:])
    with pytest.raises(TooManyBadRowsError) as caught:
        plan_trace(TraceOptions(path=str(folder), max_bad_fraction=0.1, **skipping))
    assert str(caught.value).endswith(f"(first: {second}, line 2, {first})")


def test_format_hub_names_a_jsonl_file_s_cut_first_line_as_the_file_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JSONL file whose first line is a row cut short (it opens an object it does not
    close) was read with format=hub as one JSON document, and refused as "not valid
    JSON at line 2, column 1 (Expecting ',' delimiter)": line 2 is a good row. The
    library reads such a file as JSON Lines (only an array is a document before it
    tries), and the file reader names line 1, alone or as a folder's data file; a
    pretty-printed object that is one document is still one row."""
    pytest.importorskip("datasets")
    _datasets_offline(monkeypatch, tmp_path)
    rows = _mooncake([0, 100, 200])
    folder = tmp_path / "repo"
    folder.mkdir()
    path = folder / "train.jsonl"
    path.write_text(
        '{"timestamp": 0, "input_length": 600\n' + "".join(json.dumps(r) + "\n" for r in rows[1:])
    )
    said = f"{path}, line 1, row: not valid JSON (Expecting ',' delimiter, column 37)"
    with pytest.raises(TraceFormatError) as caught:
        plan_trace(TraceOptions(path=str(path)))
    assert str(caught.value) == said
    for given in (path, folder):
        with pytest.raises(TraceFormatError) as caught:
            plan_trace(TraceOptions(path=str(given), format="hub"))
        assert str(caught.value) == said, given
    one = tmp_path / "one.json"
    one.write_text(json.dumps(rows[0], indent=2))
    (window,) = trace_windows(TraceOptions(path=str(one), format="hub"), "all")
    assert [(r.arrival_s, r.blocks) for r in window.requests] == [(0.0, (1, 2))]


def test_read_hub_dataset_reads_a_slice_of_a_local_file_s_split(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``split="train[:2]"`` (the library's slice of a split) of a local file gives its
    first two rows; it was refused as "the datasets library reads 2 rows of the file,
    and none from this line on" once a local file's rows were its own by line."""
    pytest.importorskip("datasets")
    _datasets_offline(monkeypatch, tmp_path)
    path = write_jsonl(tmp_path / "rows.jsonl", _mooncake([0, 100, 300]))
    for split, arrivals in (("train", [0.0, 0.1, 0.3]), ("train[:2]", [0.0, 0.1]),
                            ("train[1:]", [0.0, 0.2])):  # fmt: skip
        (part,) = read_hub_dataset("json", data_files=str(path), split=split)
        assert [r.arrival_s for r in part.requests] == arrivals


def test_a_local_file_whose_rows_the_library_counts_otherwise_says_each_caller_s_way_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Line 3 holds two rows, which the ``datasets`` library reads and the file
    reader skips (``skip_bad_rows``): 4 rows against 3 lines. A trace read with
    ``format=hub`` says to read it without; ``read_hub_dataset``, which has no such
    option, said so too, and now names ``read_trace``. The error names that line,
    the first the file reader reads as no row (it named the file alone)."""
    pytest.importorskip("datasets")
    _datasets_offline(monkeypatch, tmp_path)
    lines = [json.dumps(row) for row in _mooncake([0, 100, 200, 300])]
    path = tmp_path / "two.jsonl"
    path.write_text(f"{lines[0]}\n\n{lines[1]} {lines[2]}\n{lines[3]}\n")
    skip = {"skip_bad_rows": True, "max_bad_fraction": 0.9}
    said = (
        f"{path}, line 3, row: the datasets library reads more rows of the file than its "
        "lines hold (3); the first line it may read otherwise is this one, which the file "
        f"reader reads as no row (not valid JSON (Extra data, column {len(lines[1]) + 2})); "
    )
    with pytest.raises(TraceFormatError) as hub:
        list(trace_windows(TraceOptions(path=str(path), format="hub", **skip), "all"))
    assert str(hub.value) == said + "it reads without format=hub"
    with pytest.raises(TraceFormatError) as whole:
        list(read_hub_dataset("json", data_files=str(path), options=ReadOptions(**skip)))
    assert str(whole.value) == said + "read_trace reads it by line, without the datasets library"


def test_a_file_changed_while_a_run_reads_it_is_refused_naming_it(tmp_path: Path) -> None:
    """helper-56's review: a trace copied over while its windows were read gave a
    run windows of both files, without a word."""
    times = [w * 5000 + i * 200 for w in range(3) for i in range(20)]
    path = write_jsonl(tmp_path / "t.jsonl", _mooncake(times))
    options = TraceOptions(path=str(path), window_s=5.0, test_fraction=1.0)
    read = trace_windows(options, "test")
    assert len(next(read).requests) == 20
    write_jsonl(path, _mooncake(times, output_length=3))  # another file under the same name
    with pytest.raises(ConfigError) as changed:
        next(read)
    assert str(changed.value).startswith(
        f"TraceOptions.path='{path}' changed while this run read it ("
    )
    assert [len(w.requests) for w in trace_windows(options, "test")] == [20, 20, 20]  # planned anew
    read = trace_windows(options, "test")
    next(read)
    os.utime(path, ns=(1, 1))  # touched only, the same bytes: said as what it is
    with pytest.raises(ConfigError, match=r"\(its modification time changed\)"):
        next(read)


def test_keys_a_format_does_not_read_are_named_in_one_warning(tmp_path: Path) -> None:
    """helper-56's review: a misspelt ``output_lenght`` was ignored without a word,
    and the request took output_length's default, 1 token."""
    rows = _mooncake([0, 1000, 2000])
    rows[1]["output_lenght"] = 500
    rows[2]["output_lenght"] = 500
    rows[2]["tenant"] = "b"  # Mooncake rows have no tenant: the rows still share KV
    path = write_jsonl(tmp_path / "t.jsonl", rows)
    with pytest.warns(TraceWarning) as caught:
        workload = read_mooncake(path)
    assert [r.output_tokens for r in workload.requests] == [2, 2, 2]
    assert [str(w.message) for w in caught] == [
        f"{path}: rows have keys this format does not read, ignored: 'output_lenght' (first "
        "on line 2), 'tenant' (first on line 3) (a misspelt field takes its default)"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ART-Chat's messages and token_hash are known
        read_art_chat(write_jsonl(tmp_path / "art.jsonl", art_rows()))
        read_qwen_bailian(write_jsonl(tmp_path / "qwen.jsonl", qwen_rows()))
        tenants = [{**row, "tenant": "t1"} for row in bursted_rows("w0")]
        read_trace(write_jsonl(tmp_path / "bursted.jsonl", tenants))


def test_split_fractions_round_half_up() -> None:
    """helper-56's review: Python's round (half to even) gave 10 windows x 0.25 two
    test windows and 18 x 0.25 four; half up gives 3 and 5 (2 x 0.25: at least 1)."""
    from envs.workloads.trace_file import _split_names

    counts = {
        n: _split_names(n, TraceOptions(path="x", test_fraction=0.25, val_fraction=0.25))
        for n in (2, 8, 10, 14, 18)
    }
    assert {n: names.count("test") for n, names in counts.items()} == {
        2: 1, 8: 2, 10: 3, 14: 4, 18: 5,
    }  # fmt: skip
    assert {n: names.count("val") for n, names in counts.items()} == {
        2: 1, 8: 2, 10: 3, 14: 4, 18: 5,
    }  # fmt: skip
    # as written, not as the float product (90 x 0.35 = 31.499... in floats)
    names = _split_names(90, TraceOptions(path="x", test_fraction=0.35))
    assert names.count("test") == 32
