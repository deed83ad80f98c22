"""The fast reading paths give what the plain ones give: chained ids against the
one-dict chainer they replace, field helpers against their plain rules, orjson
lines against the standard library's, on generated traces and on odd input."""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import warnings
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracekit import COMPRESSIONS, compress, qwen_rows, write_jsonl

from envs.sim.request import BlockChainer
from envs.workloads import read_mooncake, read_qwen_bailian, rows_to_workload
from envs.workloads.conversation import ConversationConfig, conversation_rows
from envs.workloads.readers import ReadOptions, TraceFormatError, compiled, sources
from envs.workloads.readers.base import (
    RowLocation,
    get_hash_ids,
    get_int,
    get_str,
    get_time,
)
from envs.workloads.trace_file import TraceOptions, trace_windows


class ReferenceChainer:
    """Chaining as it is defined: one ``{(parent, raw hash): id}`` dict, ids numbered
    from 1 in order of first appearance, a prefix's first block under its namespace."""

    def __init__(self) -> None:
        self.ids: dict[tuple[Any, Hashable], int] = {}

    def chain(self, raw_hashes: Iterable[Hashable], namespace: str = "") -> tuple[int, ...]:
        parent: Any = ("ns", namespace)
        out = []
        for raw in raw_hashes:
            block_id = self.ids.setdefault((parent, raw), len(self.ids) + 1)
            out.append(block_id)
            parent = block_id
        return tuple(out)


PROMPTS = st.lists(
    st.tuples(
        st.sampled_from(["", "a", "b"]),
        st.lists(st.one_of(st.integers(0, 3), st.sampled_from(["x", "y"])), max_size=8),
    ),
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(PROMPTS)
def test_chained_ids_are_the_one_dict_chainers(prompts: list[tuple[str, list[Any]]]) -> None:
    # a tiny alphabet: prompts share prefixes, branch inside runs and repeat hashes
    fast, reference = BlockChainer(), ReferenceChainer()
    for namespace, raws in prompts:
        assert fast.chain(raws, namespace) == reference.chain(raws, namespace)
    assert len(fast) == len(reference.ids)


def test_chained_ids_of_generated_traffic_are_the_one_dict_chainers() -> None:
    fast, reference = BlockChainer(), ReferenceChainer()
    for window in range(2):
        for row in conversation_rows(ConversationConfig(duration_s=600.0), window, seed=window):
            raws = row["hash_ids"]
            assert fast.chain(iter(raws)) == reference.chain(raws)  # any iterable
    assert len(fast) == len(reference.ids) > 1000


def test_a_shared_prefix_shares_its_id_objects() -> None:
    # one int object an id, whoever holds it (ints past 256 are made afresh otherwise)
    chainer = BlockChainer()
    first = chainer.chain(list(range(300)))
    chainer.chain(["other"])  # the next prompt's new tail starts elsewhere
    second = chainer.chain([*range(300), "more"])
    third = chainer.chain([*range(150), "branch", "x"])
    assert second[:300] == first and all(a is b for a, b in zip(first, second, strict=False))
    assert all(a is b for a, b in zip(first[:150], third, strict=False))
    assert second[300] == 302 and third[150:] == (303, 304)


# --- the field helpers' common-case shortcuts against their plain rules ----------------


def plain_int(value: Any, minimum: int, default: int | None) -> int:
    if value is None:
        if default is None:
            raise ValueError("missing")
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("type")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("type")
        value = int(value)
    if value < minimum:
        raise ValueError("minimum")
    return value


def plain_time(value: Any, minimum: float | None) -> float:
    if isinstance(value, str):
        value = float(value.strip())
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("type")
    number = float(value)
    if not math.isfinite(number) or (minimum is not None and number < minimum):
        raise ValueError("range")
    return number


def outcome(fn: Any, *args: Any) -> Any:
    try:
        return ("ok", fn(*args))
    except (ValueError, OverflowError):
        return ("error",)


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.sampled_from(["12", " 3.5 ", "nan", "1e400"]),
    st.lists(st.integers(0, 3), max_size=3),
)
LOC = RowLocation("t.jsonl", 7)


@settings(max_examples=400, deadline=None)
@given(VALUES, st.integers(-1, 2), st.sampled_from([None, 1]))
def test_get_int_shortcut_keeps_the_rule(value: Any, minimum: int, default: int | None) -> None:
    got = outcome(get_int, {"f": value}, "f", LOC, minimum, default)
    assert got == outcome(plain_int, value, minimum, default)
    if got[0] == "ok":
        assert type(got[1]) is int


@settings(max_examples=400, deadline=None)
@given(VALUES, st.sampled_from([None, 0.0, 2.0]))
def test_get_time_shortcut_keeps_the_rule(value: Any, minimum: float | None) -> None:
    got = outcome(get_time, {"t": value}, "t", LOC, minimum)
    assert got == outcome(plain_time, value, minimum)
    if got[0] == "ok":
        assert type(got[1]) is float


@settings(max_examples=200, deadline=None)
@given(VALUES)
def test_get_str_shortcut_keeps_the_rule(value: Any) -> None:
    expected = (
        ("ok", "d")
        if value is None
        else ("ok", str(value))
        if type(value) in (str, int)
        else ("error",)
    )
    assert outcome(get_str, {"s": value}, "s", LOC, "d") == expected


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        VALUES,
        st.lists(st.one_of(st.integers(), st.text(max_size=2), st.booleans(), st.floats())),
        st.tuples(st.integers(), st.text(max_size=2)),
    )
)
def test_get_hash_ids_shortcut_keeps_the_rule(value: Any) -> None:
    ok = (
        isinstance(value, (list, tuple))
        and len(value) > 0
        and all(type(item) in (int, str) for item in value)
    )
    assert outcome(get_hash_ids, {"h": value}, "h", LOC) == (
        ("ok", list(value)) if ok else ("error",)
    )


# --- the compiled read loop, orjson and the standard library against each other -----


def read_ways(
    path: Path, monkeypatch: pytest.MonkeyPatch, reader: Any = read_mooncake, **options: Any
) -> list[Any]:
    """What ``reader`` makes of ``path`` (every field of every request, the meta and
    the warnings, or the error's type and text) three ways: as it runs here (the
    compiled loop when built), with the Python loop and orjson, then with the Python
    loop and the standard library alone."""

    def read() -> Any:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                workload = reader(path, ReadOptions(**options))
            except TraceFormatError as error:
                return type(error).__name__, str(error)
        said = [f"{w.category.__name__}: {w.message}" for w in caught]
        return [dataclasses.astuple(r) for r in workload.requests], workload.meta, said

    ways = [read()]
    monkeypatch.setattr(compiled, "READER", None)
    ways.append(read())
    monkeypatch.setattr(sources, "_fast_loads", lambda: None)
    ways.append(read())
    return ways


def read_both(
    path: Path, monkeypatch: pytest.MonkeyPatch, reader: Any = read_mooncake, **options: Any
) -> tuple[Any, Any]:
    """The first read of :func:`read_ways` and the last, once the middle one is
    checked equal to the first."""
    fast, python, plain = read_ways(path, monkeypatch, reader, **options)
    assert fast == python
    return fast, plain


def test_orjson_is_the_fast_path_here() -> None:
    assert sources._fast_loads() is not None  # else the comparisons below compare nothing


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_generated_mooncake_traces_read_the_same_both_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    config = ConversationConfig(duration_s=300.0)
    window = rows_to_workload(conversation_rows(config, 0, seed), 512, name="c")
    reference = ReferenceChainer()
    rows = [
        {"timestamp": round(r.arrival_s * 1000.0) + 7, "input_length": r.input_tokens,
         "output_length": r.output_tokens, "hash_ids": list(r.blocks)}
        for r in window.requests
    ]  # fmt: skip
    path = write_jsonl(tmp_path / "mc.jsonl", rows)
    fast, plain = read_both(path, monkeypatch)
    assert fast == plain and len(fast[0]) == len(rows) > 50
    # and the ids are the one-dict chainer's, in arrival order
    assert [row[5] for row in fast[0]] == [reference.chain(row["hash_ids"]) for row in rows]


ODD_LINES = [
    '{"timestamp": NaN, "input_length": 10, "hash_ids": [1]}',  # stdlib reads NaN
    '{"timestamp": 5, "input_length": 100000000000000000000000, "hash_ids": [1]}',
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1, 200000000000000000000]}',
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1, -9223372036854775809]}',
    '{"timestamp": 5, "input_length": 10, "hash_ids": ["\\ud800"]}',  # a lone surrogate
    "\u00a0",  # a Unicode blank: skipped
    "[1, 2]",
    "{not json",
    '\ufeff{"timestamp": 5, "input_length": 10, "hash_ids": [1]}',
    '{"timestamp": "6", "input_length": 10.0, "output_length": 2.0, "hash_ids": [1, "b"]}',
    '{"timestamp": 1e400, "input_length": 10, "hash_ids": [1]}',
    '{"timestamp": 8, "input_length": true, "hash_ids": [1]}',
    '{"timestamp": 9, "input_length": 10, "hash_ids": [1, 2.5]}',
]


@pytest.mark.parametrize("line", ODD_LINES)
def test_odd_lines_read_or_fail_the_same_both_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str
) -> None:
    good = json.dumps({"timestamp": 1, "input_length": 10, "hash_ids": [1, 2]})
    path = write_jsonl(tmp_path / "odd.jsonl", [good, line, good])
    fast, plain = read_both(path, monkeypatch, strict_block_count=False)
    assert fast == plain


def test_odd_lines_skipped_the_same_both_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = [
        json.dumps({"timestamp": t, "input_length": 10, "hash_ids": [1, t]}) for t in range(200)
    ]
    path = write_jsonl(tmp_path / "odd.jsonl", good[:100] + ODD_LINES + good[100:])
    fast, plain = read_both(
        path, monkeypatch, strict_block_count=False, skip_bad_rows=True, max_bad_fraction=0.1
    )
    assert fast == plain and any("skipped" in said for said in fast[2])


def test_qwen_conversations_read_the_same_both_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows: list[Mapping[str, Any]] = [
        {"chat_id": k, "parent_chat_id": k - 1 if k % 3 else -1, "timestamp": k / 4,
         "input_length": 16 * (k % 3 + 1), "output_length": 2, "type": "text",
         "turn": k % 3 + 1, "hash_ids": [k // 3 * 10 + j for j in range(k % 3 + 1)]}
        for k in range(30)
    ]  # fmt: skip
    path = write_jsonl(tmp_path / "q.jsonl", rows)
    fast, plain = read_both(path, monkeypatch, reader=read_qwen_bailian)
    assert fast == plain and len(fast[0]) == 30


# --- the compiled line reader: lines it reads itself and lines it hands over ---------

GOOD = '"timestamp": 5, "input_length": 10, "hash_ids": [1, 2]'
PARSER_LINES = [
    '{"timestamp":5,"input_length":10,"output_length":3,"hash_ids":[1,2],"request_id":"r"}',
    ' \t{ "timestamp" : 5 ,"input_length":\t10 , "hash_ids" : [ 1 , 2 ] } \r',
    '{"request_id": "r-9", "hash_ids": [-3, 0], "output_length": 0, "input_length": 10, '
    '"timestamp": -0}',
    '{"timestamp": 05, "input_length": 10, "hash_ids": [1]}',  # a leading zero: not JSON
    '{"timestamp": 5, "input_length": 10, "hash_ids": [999999999999999999, 1]}',  # 18 digits
    '{"timestamp": 5, "input_length": 10, "hash_ids": [9223372036854775807, 1]}',  # 19
    '{"timestamp": 5, "input_length": 10, "hash_ids": [9223372036854775808, 1]}',  # past 64 bits
    '{"timestamp": 5, "input_length": 10, "hash_ids": [-9223372036854775808, 1]}',
    '{"timestamp": 5.0, "input_length": 10, "hash_ids": [1]}',
    '{"timestamp": 5e3, "input_length": 1E1, "hash_ids": [1]}',
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1.5]}',
    '{"timestamp": 5, "timestamp": 7, "input_length": 10, "hash_ids": [1]}',  # the last wins
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1], "extra": {"a": [1, "}"]}}',
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1], "request_id": "a\\"b"}',
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1], "request_id": "\u00e9t\u00e9"}',
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1], "request_id": "a\tb"}',  # raw tab
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1], "request_id": 12}',
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1], "request_id": ""}',
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1], "request_id": null}',
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1], "output_length": null}',
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1], "output_length": -1}',
    '{"timestamp": 5, "input_length": 0, "hash_ids": [1]}',
    '{"timestamp": 5, "input_length": 10, "hash_ids": []}',
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1,]}',
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1 2]}',
    '{"timestamp": 5, "input_length": 10, "hash_ids": [[1]]}',
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1],}',
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1]} x',
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1]}{"timestamp": 6}',
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1]\u0000}',
    '{"timestamp": 5, "input_length": 10}',
    '{"input_length": 10, "hash_ids": [1]}',
    "{}",
    '{"timestamp": 5, "input_length": 10, "hash_ids": [1, 2, 3, 4, 5]}',  # too many blocks
    '{"timestamp": 5, "input_length": 100000, "hash_ids": [1]}',  # too few
    "{" + GOOD + "}\r",  # a CRLF line end
]


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("line", PARSER_LINES)
def test_lines_the_compiled_reader_meets_read_or_fail_the_same_every_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, strict: bool
) -> None:
    good = json.dumps({"timestamp": 1, "input_length": 10, "hash_ids": [1, 2]})
    path = write_jsonl(tmp_path / "odd.jsonl", [good, line, good])
    fast, plain = read_both(path, monkeypatch, strict_block_count=strict)
    assert fast == plain


MIXED_OPTIONS = [
    {},
    {"skip_bad_rows": True, "max_bad_fraction": 0.9},
    {"skip_bad_rows": True, "max_bad_fraction": 0.9, "max_rows": 7},
    {"max_rows": 5},
    {"unsorted": "sort", "namespace": "tenant-a"},
    {"unsorted": "error"},
    {"rebase_time": False, "skip_bad_rows": True, "max_bad_fraction": 0.9},
    {"block_tokens": 256, "skip_bad_rows": True, "max_bad_fraction": 0.9},
    {"max_context_tokens": 1500, "skip_bad_rows": True, "max_bad_fraction": 0.9},
    {"time_unit": "s", "strict_block_count": False},
]


@pytest.mark.parametrize("options", MIXED_OPTIONS)
def test_a_mixed_file_reads_the_same_every_way_under_each_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, Any]
) -> None:
    # plain lines (read in C) between odd ones (handed over), out of time order, blank lines
    rows: list[Any] = []
    for k in range(40):
        rows.append(
            {"timestamp": 1_000 * k - (3_000 if k % 9 == 4 else 0), "input_length": 600 + k,
             "output_length": k % 3, "hash_ids": [k % 4, 100 + k]}
        )  # fmt: skip
        if k % 5 == 2:
            rows.append(PARSER_LINES[3 + k % (len(PARSER_LINES) - 3)])
        if k % 13 == 0:
            rows.append("")
    path = write_jsonl(tmp_path / "mixed.jsonl", rows)
    fast, plain = read_both(path, monkeypatch, **options)
    assert fast == plain


@pytest.mark.parametrize("kind", COMPRESSIONS)
def test_a_compressed_file_and_a_cut_one_read_the_same_every_way(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gzip, bzip2, xz and zstd (bzip2 and xz were refused: "unpack it first")."""
    text = "".join(
        json.dumps({"timestamp": t, "input_length": 1024, "hash_ids": [t % 7, t]}) + "\n"
        for t in range(3000)
    )
    data = compress(kind, text.encode())
    plain_file = tmp_path / "mc.jsonl"
    plain_file.write_text(text)
    suffix = {"gzip": ".gz", "bzip2": ".bz2", "xz": ".xz", "zstd": ".zst"}[kind]
    whole, cut = tmp_path / f"packed/mc.jsonl{suffix}", tmp_path / "cut.jsonl"
    whole.parent.mkdir()
    whole.write_bytes(data)
    cut.write_bytes(data[: len(data) // 2])
    fast, plain = read_both(whole, monkeypatch)
    assert fast == plain and len(fast[0]) == 3000
    assert fast[0] == read_both(plain_file, monkeypatch)[0][0]  # the file unpacked's requests
    fast, plain = read_both(cut, monkeypatch)
    assert fast == plain and "cannot read the file past this line" in fast[1]


needs_compiled = pytest.mark.skipif(
    compiled.READER is None, reason="the compiled trace reader is not built (or is switched off)"
)


@needs_compiled
def test_the_compiled_reader_reads_plain_lines_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # else every comparison above would compare the reference with itself
    handed: list[int] = []
    row_of = sources.JsonlRows.row_of

    def counted(self: sources.JsonlRows, raw: bytes, line_no: int) -> Any:
        handed.append(line_no)
        return row_of(self, raw, line_no)

    monkeypatch.setattr(sources.JsonlRows, "row_of", counted)
    rows = [PARSER_LINES[0], PARSER_LINES[1], PARSER_LINES[2], "", PARSER_LINES[3]]
    path = write_jsonl(tmp_path / "plain.jsonl", rows)
    with pytest.raises(TraceFormatError, match="line 5"):
        read_mooncake(path, ReadOptions(strict_block_count=False))
    assert handed == [4, 5]  # the blank line and the leading zero


def test_the_compiled_reader_runs_only_with_the_compiled_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(compiled.native, "CORE", "python")  # BTB_GYM_PURE_PYTHON=1, or no build
    assert compiled._load() == (None, None)


@needs_compiled
def test_the_compiled_reader_stands_down_when_request_changes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # it sets Request's fields one by one: a field it does not know would be left unset
    assert compiled._load()[0] is compiled.READER
    monkeypatch.setattr(compiled.READER, "REQUEST_FIELDS", ("index", "request_id"))
    assert compiled._load() == (None, None)
    assert "out of date with Request" in capsys.readouterr().err


INT64 = st.integers(-(2**63), 2**63 - 1)


@needs_compiled
@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["", "a"]),
            st.lists(st.one_of(st.integers(0, 3), st.sampled_from([2**40, -(2**63)])), max_size=8),
            st.booleans(),
        ),
        max_size=25,
    )
)
def test_chain_ints_gives_chains_ids_and_state(prompts: list[tuple[str, list[int], bool]]) -> None:
    # the compiled reader's C-integer chaining, interleaved with the object one
    twin = native_chainer().BlockChainer()
    reference = BlockChainer()
    for namespace, raws, as_ints in prompts:
        got = twin.chain_int64(raws, namespace) if as_ints else twin.chain(raws, namespace)
        assert got == reference.chain(raws, namespace)
        assert (twin._roots, twin._next, twin._branches, twin._ids) == (
            reference._roots, reference._next, reference._branches, reference._ids
        )  # fmt: skip


def native_chainer() -> Any:
    return importlib.import_module("envs.sim._native.chainer")


def test_decimal_times_read_whole_arrive_as_in_a_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file read whole (``read_qwen_bailian``, ``read_mooncake``) and the same file
    read as one window give the same arrivals, to the bit, every way: decimal times
    as written (1063.773 - 1060.0 is 3.772999999999911 in binary, 3.773 here; 2544.773
    ms after 1000 ms, 1.5447730000000002 s in binary, 1.544773 s here). The compiled
    loop leaves a file of fractional milliseconds to the reference, which rounds."""

    def windowed(path: Path, unit: str) -> list[float]:
        (window,) = trace_windows(TraceOptions(path=str(path), time_unit=unit), "all")
        return [r.arrival_s for r in window.requests]

    times = [1060.0, 1061.25, 1063.773, 1100.117, 1125.5]
    rows = [{**qwen_rows()[1], "chat_id": 10 + i, "timestamp": t} for i, t in enumerate(times)]
    path = write_jsonl(tmp_path / "q.jsonl", rows)
    expected = [0.0, 1.25, 3.773, 40.117, 65.5]
    assert windowed(path, "s") == expected
    for way in read_ways(path, monkeypatch, reader=read_qwen_bailian):
        assert [r[2] for r in way[0]] == expected
    monkeypatch.undo()
    ms = [1000, 1002, 2544.773, 3000]
    rows = [{"timestamp": t, "input_length": 600, "hash_ids": [1, k]} for k, t in enumerate(ms)]
    path = write_jsonl(tmp_path / "mc.jsonl", rows)
    expected = [0.0, 0.002, 1.544773, 2.0]
    assert windowed(path, "ms") == expected
    for way in read_ways(path, monkeypatch):
        assert [r[2] for r in way[0]] == expected
