"""The fast reading paths give what the plain ones give: chained ids against the
one-dict chainer they replace, field helpers against their plain rules, orjson
lines against the standard library's, on generated traces and on odd input."""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tracekit import write_jsonl

from envs.sim.request import BlockChainer
from envs.workloads import read_mooncake, read_qwen_bailian, rows_to_workload
from envs.workloads.conversation import ConversationConfig, conversation_rows
from envs.workloads.readers import ReadOptions, TraceFormatError, sources
from envs.workloads.readers.base import (
    RowLocation,
    get_hash_ids,
    get_int,
    get_str,
    get_time,
)


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


# --- orjson lines against the standard library's ------------------------------------


def read_both(
    path: Path, monkeypatch: pytest.MonkeyPatch, reader: Any = read_mooncake, **options: Any
) -> tuple[Any, Any]:
    """What ``reader`` makes of ``path`` (requests or the error's text) with orjson,
    then with the standard library alone."""

    def read() -> Any:
        try:
            workload = reader(path, ReadOptions(**options))
        except TraceFormatError as error:
            return str(error)
        return [
            (r.index, r.request_id, r.arrival_s, r.input_tokens, r.output_tokens, r.blocks,
             r.group_id, r.job_kind, r.chat_id)
            for r in workload.requests
        ]  # fmt: skip

    with_orjson = read()
    monkeypatch.setattr(sources, "_fast_loads", lambda: None)
    return with_orjson, read()


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
    assert fast == plain and len(fast) == len(rows) > 50
    # and the ids are the one-dict chainer's, in arrival order
    assert [row[5] for row in fast] == [reference.chain(row["hash_ids"]) for row in rows]


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
    with pytest.warns(UserWarning):
        fast, plain = read_both(
            path, monkeypatch, strict_block_count=False, skip_bad_rows=True, max_bad_fraction=0.1
        )
    assert fast == plain


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
    assert fast == plain and len(fast) == 30
