"""Round trips of every trace format, format detection, streaming and the hub reader."""

from __future__ import annotations

import gc
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
from tracekit import art_rows, bursted_rows, mooncake_rows, qwen_rows, write_jsonl

from envs.workloads import (
    BurstedSyntheticConfig,
    MissingDependencyError,
    TraceFormatError,
    iter_bursted_windows,
    iter_trace_windows,
    read_art_chat,
    read_hub_dataset,
    read_mooncake,
    read_qwen_bailian,
    read_trace,
    rows_to_workload,
    synthetic_window_rows,
)
from envs.workloads.readers import ReadOptions, detect_format


def test_mooncake_round_trip(tmp_path: Path) -> None:
    workload = read_mooncake(write_jsonl(tmp_path / "mc.jsonl", mooncake_rows()))
    assert workload.block_tokens == 512
    assert [r.arrival_s for r in workload.requests] == [0.0, 0.5, 1.2, 3.0]
    assert [r.request_id for r in workload.requests] == ["1", "2", "3", "4"]
    # output_length 0 and a missing output_length are both read as 1
    assert [r.output_tokens for r in workload.requests] == [10, 1, 1, 5]
    first, second, third, last = (r.blocks for r in workload.requests)
    assert first[:2] == second[:2] == third
    assert first[2] != second[2]
    assert not set(last) & set(first)
    assert workload.meta["time_origin_s"] == 1.0


def test_mooncake_keeps_absolute_times_when_asked(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mc.jsonl", mooncake_rows())
    workload = read_mooncake(path, options=ReadOptions(rebase_time=False))
    assert workload.requests[0].arrival_s == 1.0


def test_art_chat_jsonl_and_parquet_agree(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = art_rows()
    from_jsonl = read_art_chat(write_jsonl(tmp_path / "art.jsonl", rows))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "art.parquet")
    from_parquet = read_art_chat(tmp_path / "art.parquet")
    assert from_jsonl.block_tokens == from_parquet.block_tokens == 256
    for a, b in zip(from_jsonl.requests, from_parquet.requests, strict=True):
        assert (a.request_id, a.arrival_s, a.input_tokens, a.output_tokens, a.blocks) == (
            b.request_id, b.arrival_s, b.input_tokens, b.output_tokens, b.blocks,
        )  # fmt: skip
    r1, r2, r3 = from_jsonl.requests
    assert [r.arrival_s for r in (r1, r2, r3)] == [0.0, 0.25, 1.0]
    assert r1.blocks[:2] == r2.blocks and r3.blocks[0] not in r1.blocks
    assert (r1.group_id, r3.group_id) == ("sp1", "sp2")
    assert detect_format(tmp_path / "art.parquet") == "art"


def test_qwen_round_trip_follows_conversations(tmp_path: Path) -> None:
    workload = read_qwen_bailian(write_jsonl(tmp_path / "qwen.jsonl", qwen_rows()))
    assert workload.block_tokens == 16
    by_id = {r.request_id: r for r in workload.requests}
    assert [by_id[c].group_id for c in ("1", "2", "3", "4")] == ["1", "1", "1", "4"]
    assert by_id["4"].job_kind == "search"
    assert by_id["3"].blocks[:5] == by_id["2"].blocks
    assert by_id["2"].blocks[:3] == by_id["1"].blocks
    assert [r.arrival_s for r in workload.requests] == [0.0, 0.5, 2.0, 5.0]


def test_bursted_round_trip_matches_the_generator(tmp_path: Path) -> None:
    config = BurstedSyntheticConfig(n_bursts=2, burst_requests=6, n_decoys=3)
    windows = [synthetic_window_rows(config, w, seed=7, split="test") for w in range(2)]
    path = write_jsonl(tmp_path / "test.jsonl", [row for rows in windows for row in rows])
    read = list(iter_bursted_windows(path))
    assert [w.meta["trace_id"] for w in read] == ["synthetic-0000", "synthetic-0001"]
    for rows, workload in zip(windows, read, strict=True):
        expected = rows_to_workload(rows, 256, "expected")
        assert workload.block_tokens == 256
        assert workload.meta["split"] == "test" and workload.meta["source"] == "synthetic"
        got = [
            (r.request_id, r.arrival_s, r.blocks, r.group_id, r.job_kind) for r in workload.requests
        ]
        want = [
            (r.request_id, r.arrival_s, r.blocks, r.group_id, r.job_kind) for r in expected.requests
        ]
        assert got == want


def test_bursted_windows_stream_one_at_a_time(tmp_path: Path) -> None:
    rows = bursted_rows("w0") + bursted_rows("w1") + bursted_rows("w2")
    rows[-1] = {**rows[-1], "input_length": -5}  # only the third window is broken
    windows = iter_bursted_windows(write_jsonl(tmp_path / "test.jsonl", rows))
    assert isinstance(windows, Iterator) and not isinstance(windows, list)
    first = next(windows)
    ref = weakref.ref(first)
    assert first.meta["trace_id"] == "w0" and len(first) == 4
    del first
    second = next(windows)
    gc.collect()
    assert ref() is None, "the reader must not keep earlier windows alive"
    assert second.meta["trace_id"] == "w1"
    with pytest.raises(TraceFormatError) as info:
        next(windows)
    assert info.value.line == 12 and info.value.field == "input_length"


def test_bursted_windows_are_independent_block_spaces(tmp_path: Path) -> None:
    rows = bursted_rows("w0") + bursted_rows("w1")
    a, b = iter_bursted_windows(write_jsonl(tmp_path / "t.jsonl", rows))
    # each window gets a fresh chainer: ids restart, so windows never share by accident
    assert a.requests[0].blocks[0] == b.requests[0].blocks[0] == 1


def test_bursted_source_filter(tmp_path: Path) -> None:
    art = [{**row, "source": "art"} for row in bursted_rows("a0")]
    path = write_jsonl(tmp_path / "t.jsonl", art + bursted_rows("s0"))
    kept = list(iter_bursted_windows(path, sources={"synthetic"}))
    assert [w.meta["trace_id"] for w in kept] == ["s0"]


def test_detect_and_read_any_format(tmp_path: Path) -> None:
    files = {
        "mooncake": write_jsonl(tmp_path / "a.jsonl", mooncake_rows()),
        "art": write_jsonl(tmp_path / "b.jsonl", art_rows()),
        "qwen": write_jsonl(tmp_path / "c.jsonl", qwen_rows()),
        "bursted": write_jsonl(tmp_path / "d.jsonl", bursted_rows("w0")),
    }
    for name, path in files.items():
        assert detect_format(path) == name
        assert len(read_trace(path)) == len(read_trace(path, format=name)) > 0
    assert read_trace(files["qwen"]).block_tokens == 16


def test_read_trace_refuses_several_windows(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "t.jsonl", bursted_rows("w0") + bursted_rows("w1"))
    with pytest.raises(TraceFormatError, match="several windows"):
        read_trace(path)
    assert len(list(iter_trace_windows(path))) == 2


def test_unknown_layout_is_named(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [{"foo": 1}])
    with pytest.raises(TraceFormatError, match="cannot tell the format"):
        detect_format(path)
    with pytest.raises(ValueError, match="unknown trace format"):
        iter_trace_windows(path, format="csv")


def test_hub_reader_on_local_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    path = write_jsonl(tmp_path / "mc.jsonl", mooncake_rows())
    cache = str(tmp_path / "cache")
    (hub,) = read_hub_dataset("json", data_files=str(path), cache_dir=cache)
    direct = read_mooncake(path)
    assert hub.block_tokens == 512
    assert [r.blocks for r in hub.requests] == [r.blocks for r in direct.requests]
    assert [r.arrival_s for r in hub.requests] == [r.arrival_s for r in direct.requests]
    bursted = write_jsonl(tmp_path / "b.jsonl", bursted_rows("w0") + bursted_rows("w1"))
    windows = read_hub_dataset("json", "bursted", data_files=str(bursted), cache_dir=cache)
    assert [w.meta["trace_id"] for w in windows] == ["w0", "w1"]


def test_hub_reader_names_dataset_and_row(tmp_path: Path) -> None:
    pytest.importorskip("datasets")
    rows = mooncake_rows()
    rows[2] = {**rows[2], "input_length": -1}
    path = write_jsonl(tmp_path / "mc.jsonl", rows)
    with pytest.raises(TraceFormatError) as info:
        list(read_hub_dataset("json", "mooncake", data_files=str(path), cache_dir=str(tmp_path)))
    assert info.value.line == 3 and info.value.field == "input_length"
    assert "json[train]" in str(info.value)


def test_missing_optional_packages_are_explained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(MissingDependencyError, match="datasets"):
        read_hub_dataset("json", data_files="x.jsonl")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    (tmp_path / "x.parquet").write_bytes(b"PAR1")
    with pytest.raises(MissingDependencyError, match="pyarrow"):
        read_art_chat(tmp_path / "x.parquet")


def test_detection_errors_name_the_row_they_come_from(tmp_path: Path) -> None:
    from envs.workloads.readers import TraceFormatError, detect_format

    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text('[1, 2]\n{"x": 1}\n')  # line 1 unreadable, line 2 of no known format
    with pytest.raises(TraceFormatError, match=r"line 2, row: cannot tell the format"):
        detect_format(unknown)
    unreadable = tmp_path / "unreadable.jsonl"
    unreadable.write_text("[1, 2]\nnot json\n")
    with pytest.raises(TraceFormatError, match=r"line 1, row: expected a JSON object"):
        detect_format(unreadable)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(TraceFormatError) as said:
        detect_format(empty)
    assert str(said.value) == (  # it said "line 1, row:", of a file with no line
        f"{empty}: the file is empty (or blank lines only): no row to detect the format from"
    )


def test_a_read_s_warnings_name_the_line_that_asked_for_the_read(tmp_path: Path) -> None:
    """A misspelt key and rows out of order are warned about at the script's own
    call (read_trace, windows("trace"), gym.make on the trace, a SimConfig), not at
    a line of btb-gym's readers, envs/workloads/__init__.py or gymnasium."""
    import warnings

    import gymnasium as gym

    import envs
    from envs.sim import SimConfig
    from envs.workloads import windows

    assert envs.ENV_IDS  # registers the environments
    rows = mooncake_rows()
    rows[1] = {**rows[1], "output_lenght": 3}
    rows[2], rows[3] = rows[3], rows[2]  # out of time order
    path = write_jsonl(tmp_path / "t.jsonl", rows)
    makers = {
        "read_trace": lambda: read_trace(path),
        "windows": lambda: list(windows("trace", split="test", path=str(path))),
        "gym.make": lambda: gym.make(
            "btb/Route-v0",
            workload="trace",
            workload_params={"path": str(path), "test_fraction": 0},
            n_windows=1,
        ),
        "SimConfig": lambda: SimConfig(fault_seed=4),
    }
    for label, make_one in makers.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            make_one()
        assert caught, label
        assert {w.filename for w in caught} == {__file__}, (label, caught)


def test_a_row_s_long_value_is_said_back_cut(tmp_path: Path) -> None:
    """The readers' row checks say back the first 60 characters of a value they
    refuse, then ``...`` (a field of 200 characters was said whole)."""
    rows = mooncake_rows()
    rows[1]["input_length"] = "7" * 200
    path = write_jsonl(tmp_path / "long.jsonl", rows)
    with pytest.raises(TraceFormatError) as caught:
        read_trace(path)
    assert str(caught.value) == (
        f"{path}, line 2, field 'input_length': expected an integer, got '{'7' * 59}..."
    )
    rows[1]["input_length"] = -(10**200)  # a number: its first 60 characters
    with pytest.raises(TraceFormatError) as caught:
        read_trace(write_jsonl(tmp_path / "big.jsonl", rows))
    assert str(caught.value).endswith(f"must be >= 1, got -1{'0' * 58}...")


def test_a_source_s_row_places_name_an_error_raised_through_them(tmp_path: Path) -> None:
    """``RowPlaces.raise_placed`` and ``placing``, shared by ``plan_trace`` and
    ``read_hub_dataset``: a JSON array's row 2 is named ``element 2 (line 3)`` (it
    starts on line 3); a file's own lines (``AS_IS``) raise the error itself."""
    from envs.workloads.readers import TraceFormatError
    from envs.workloads.readers.base import AS_IS
    from envs.workloads.readers.hub import DocumentRows

    file = tmp_path / "rows.json"
    file.write_text('[\n  {"a": 1},\n  {"a": 2}\n]\n')
    rows = DocumentRows(file)
    assert [line for line, _ in rows] == [1, 2]
    error = TraceFormatError(str(file), 2, "a", "bad")

    def failing() -> Iterator[int]:
        yield 1
        raise error

    with pytest.raises(TraceFormatError) as placed:
        list(rows.placing(failing()))
    assert str(placed.value) == f"{file}, element 2 (line 3), field 'a': bad"
    with pytest.raises(TraceFormatError) as same:
        AS_IS.raise_placed(error)
    assert same.value is error
