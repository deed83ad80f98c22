"""Malformed rows: errors name file, line and field; skipping; ordering; defaults."""

from __future__ import annotations

import gzip
import json
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tracekit import art_rows, bursted_rows, mooncake_rows, qwen_rows, write_jsonl

from envs.workloads import (
    ReadOptions,
    ReadReport,
    TraceFormatError,
    TraceWarning,
    UnsortedTraceError,
    iter_bursted_windows,
    read_art_chat,
    read_mooncake,
    read_qwen_bailian,
)
from envs.workloads.readers.base import check_block_count
from envs.workloads.readers.sources import first_row

READERS: dict[str, tuple[Callable[..., Any], Callable[[], list[dict[str, Any]]]]] = {
    "mooncake": (read_mooncake, mooncake_rows),
    "art": (read_art_chat, art_rows),
    "qwen": (read_qwen_bailian, qwen_rows),
    "bursted": (
        lambda path, **kw: list(iter_bursted_windows(path, **kw)),
        lambda: bursted_rows("w"),
    ),
}

# (format, how to break the third row, the field the error must name)
CASES: list[tuple[str, Callable[[dict[str, Any]], dict[str, Any] | str], str | None]] = [
    ("mooncake", lambda r: '{"timestamp": 5, "input_length": ', None),
    ("mooncake", lambda r: "[1, 2, 3]", None),
    ("mooncake", lambda r: {k: v for k, v in r.items() if k != "timestamp"}, "timestamp"),
    ("mooncake", lambda r: {**r, "input_length": "long"}, "input_length"),
    ("mooncake", lambda r: {**r, "input_length": 0}, "input_length"),
    ("mooncake", lambda r: {**r, "input_length": 12.5}, "input_length"),
    ("mooncake", lambda r: {**r, "output_length": -1}, "output_length"),
    ("mooncake", lambda r: {**r, "hash_ids": []}, "hash_ids"),
    ("mooncake", lambda r: {**r, "hash_ids": "1,2"}, "hash_ids"),
    ("mooncake", lambda r: {**r, "hash_ids": [1, None]}, "hash_ids"),
    ("mooncake", lambda r: {**r, "hash_ids": [1, 2, 3, 4, 5]}, "hash_ids"),
    ("mooncake", lambda r: {**r, "timestamp": float("nan")}, "timestamp"),
    ("art", lambda r: {**r, "timestamp_ms": "noon"}, "timestamp_ms"),
    ("art", lambda r: {**r, "hash_ids": [["nested"]]}, "hash_ids"),
    ("art", lambda r: {**r, "system_prompt_hash": [1]}, "system_prompt_hash"),
    ("art", lambda r: {**r, "input_length": True}, "input_length"),
    ("qwen", lambda r: {**r, "turn": -2}, "turn"),
    ("qwen", lambda r: {**r, "timestamp": None}, "timestamp"),
    ("qwen", lambda r: {**r, "parent_chat_id": 1.5}, "parent_chat_id"),
    ("bursted", lambda r: {**r, "arrival_s": -1.0}, "arrival_s"),
    ("bursted", lambda r: {k: v for k, v in r.items() if k != "trace_id"}, "trace_id"),
    ("bursted", lambda r: {**r, "metadata": "burst"}, "metadata"),
    ("bursted", lambda r: {**r, "metadata": {"job_kind": 3}}, "metadata.job_kind"),
    ("bursted", lambda r: {**r, "metadata": {"tenant": [1]}}, "metadata.tenant"),
]


@pytest.mark.parametrize(("fmt", "breaker", "field"), CASES)
def test_bad_row_names_file_line_and_field(
    tmp_path: Path, fmt: str, breaker: Callable[[dict[str, Any]], Any], field: str | None
) -> None:
    reader, make_rows = READERS[fmt]
    rows: list[Any] = make_rows()
    rows[2] = breaker(rows[2])
    path = write_jsonl(tmp_path / f"{fmt}.jsonl", rows)
    with pytest.raises(TraceFormatError) as info:
        reader(path)
    error = info.value
    assert (error.path, error.line, error.field) == (str(path), 3, field)
    assert str(path) in str(error) and "line 3" in str(error)
    if field is not None:
        assert repr(field) in str(error)


@pytest.mark.parametrize(("fmt", "breaker", "field"), CASES)
def test_bad_rows_can_be_skipped_and_counted(
    tmp_path: Path, fmt: str, breaker: Callable[[dict[str, Any]], Any], field: str | None
) -> None:
    reader, make_rows = READERS[fmt]
    rows: list[Any] = make_rows()
    rows[2] = breaker(rows[2])
    path = write_jsonl(tmp_path / f"{fmt}.jsonl", rows)
    report = ReadReport(source=str(path))
    with pytest.warns(TraceWarning, match=r"skipped 1 malformed row \("):
        result = reader(
            path, options=ReadOptions(skip_bad_rows=True, max_bad_fraction=0.5), report=report
        )
    total = sum(len(w) for w in result) if isinstance(result, list) else len(result)
    assert total == len(rows) - 1
    assert report.rows_skipped == 1 and report.rows_read == len(rows) - 1
    assert "line 3" in report.errors[0]


def _unsorted_mooncake(tmp_path: Path) -> Path:
    rows = mooncake_rows()
    rows[1], rows[3] = rows[3], rows[1]  # line 3 and 4 now arrive before line 2
    return write_jsonl(tmp_path / "mc.jsonl", rows)


def test_unsorted_timestamps_are_sorted_with_a_warning(tmp_path: Path) -> None:
    report = ReadReport(source="mc")
    with pytest.warns(TraceWarning, match=r"2 rows arrived out of time order \(first at line 3\)"):
        workload = read_mooncake(_unsorted_mooncake(tmp_path), report=report)
    assert [r.arrival_s for r in workload.requests] == [0.0, 0.5, 1.2, 3.0]
    assert report.out_of_order == 2


def test_unsorted_timestamps_sorted_quietly(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        workload = read_mooncake(_unsorted_mooncake(tmp_path), options=ReadOptions(unsorted="sort"))
    assert [r.request_id for r in workload.requests] == ["1", "4", "3", "2"]


def test_unsorted_timestamps_rejected_when_configured(tmp_path: Path) -> None:
    path = _unsorted_mooncake(tmp_path)
    with pytest.raises(UnsortedTraceError) as info:
        read_mooncake(path, options=ReadOptions(unsorted="error"))
    assert (info.value.line, info.value.field) == (3, "timestamp")
    assert "2200 is earlier than 4000 on an earlier line" in str(info.value)


def test_unsorted_rows_within_a_bursted_window(tmp_path: Path) -> None:
    rows = bursted_rows("w")
    rows[0], rows[1] = rows[1], rows[0]
    path = write_jsonl(tmp_path / "b.jsonl", rows)
    with pytest.warns(TraceWarning, match="out of time order"):
        (window,) = iter_bursted_windows(path)
    assert [r.arrival_s for r in window.requests] == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(UnsortedTraceError, match="line 2"):
        list(iter_bursted_windows(path, options=ReadOptions(unsorted="error")))


def test_bursted_file_must_be_grouped_by_window(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "b.jsonl", bursted_rows("a") + bursted_rows("b") + bursted_rows("a")
    )
    with pytest.raises(TraceFormatError, match="appears again") as info:
        list(iter_bursted_windows(path))
    assert (info.value.line, info.value.field) == (9, "trace_id")


def test_block_count_check_can_be_relaxed(tmp_path: Path) -> None:
    rows = mooncake_rows()
    rows[0] = {**rows[0], "hash_ids": [1, 2, 3, 4, 5, 6]}
    path = write_jsonl(tmp_path / "mc.jsonl", rows)
    with pytest.raises(TraceFormatError, match="needs 3"):
        read_mooncake(path)
    workload = read_mooncake(path, options=ReadOptions(strict_block_count=False))
    # read, with its ids cut to the 3 blocks its tokens fill (6 let a later request
    # hit KV this one never computed)
    assert len(workload.requests[0].blocks) == 3


def test_a_request_with_more_blocks_than_its_tokens_fill_caches_only_those() -> None:
    """A 512-token prompt named 100 blocks: its prefill cached all 100, and a later
    25,856-token request sharing them hit 25,600 tokens (TTFT 0.019 s, cold 1.85 s)."""
    from baselines import make_policy
    from envs.sim import Simulator, setup_cluster
    from envs.sim.request import Request, Workload

    first = Request(0, "A", 0.0, 512, 1, tuple(range(1, 101)))
    later = Request(1, "B", 5.0, 101 * 256, 1, (*range(1, 101), 500))
    workload = Workload("w", 256, [first, later])
    assert workload.requests[0].blocks == (1, 2)
    records = make_policy("cache_aware").run(Simulator(setup_cluster("70b_h100x4"), workload))
    assert records.hit_hbm_tokens[1] == 512  # the two blocks A computed, no more


def test_block_count_accepts_floor_or_ceil() -> None:
    from envs.workloads.readers.base import ParsedRow, RowLocation

    loc = RowLocation("f", 1)
    for n in (2, 3):  # 600 tokens at 256 a block: 2 full blocks, 3 with the partial one
        check_block_count(ParsedRow("r", 0.0, 600, 1, list(range(n))), 256, loc)
    with pytest.raises(TraceFormatError, match=r"needs 3 \(or 2\)"):
        check_block_count(ParsedRow("r", 0.0, 600, 1, [1]), 256, loc)


def test_missing_optional_fields_get_defaults(tmp_path: Path) -> None:
    row = {"trace_id": "w", "arrival_s": 0.5, "input_length": 10, "hash_ids": ["x"]}
    (window,) = iter_bursted_windows(write_jsonl(tmp_path / "b.jsonl", [row]))
    (request,) = window.requests
    assert (request.request_id, request.output_tokens, request.group_id) == ("w-1", 1, "")
    assert (request.job_kind, request.tenant) == ("", "")
    assert (window.meta["source"], window.meta["split"]) == ("", "")
    qwen = {"timestamp": 3.0, "input_length": 20, "hash_ids": [1, 2]}
    (turn,) = read_qwen_bailian(write_jsonl(tmp_path / "q.jsonl", [qwen])).requests
    assert (turn.request_id, turn.group_id, turn.job_kind, turn.output_tokens) == ("1", "1", "", 1)


def test_blank_lines_are_ignored_and_max_rows_stops_early(tmp_path: Path) -> None:
    rows: list[Any] = mooncake_rows()
    rows.insert(1, "")
    path = write_jsonl(tmp_path / "mc.jsonl", rows)
    assert len(read_mooncake(path)) == 4
    assert len(read_mooncake(path, options=ReadOptions(max_rows=2))) == 2


def test_namespace_separates_two_reads(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mc.jsonl", mooncake_rows())
    plain = read_mooncake(path)
    tenant = read_mooncake(path, options=ReadOptions(namespace="tenant-b"))
    assert all(r.tenant == "tenant-b" for r in tenant.requests)
    assert [len(r.blocks) for r in plain.requests] == [len(r.blocks) for r in tenant.requests]


def test_empty_file_and_bad_options(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    with pytest.raises(TraceFormatError, match="no usable rows"):
        read_mooncake(path)
    with pytest.raises(ValueError, match="unsorted"):
        ReadOptions(unsorted="shuffle")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="block_tokens"):
        ReadOptions(block_tokens=0)
    with pytest.raises(FileNotFoundError):
        read_art_chat(tmp_path / "missing.parquet")


def test_a_line_that_is_not_utf8_is_a_bad_row_named_by_its_line(tmp_path: Path) -> None:
    rows = [json.dumps(row) for row in mooncake_rows()]
    path = tmp_path / "mc.jsonl"
    lines = [row.encode() for row in rows]
    lines[2] = lines[2][:-1] + b', "note": "\xff\xfe"}'
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(TraceFormatError) as info:
        read_mooncake(path)
    assert (info.value.path, info.value.line, info.value.field) == (str(path), 3, None)
    assert "byte 0xff at column" in str(info.value)
    with pytest.warns(TraceWarning, match=r"skipped 1 malformed row \("):
        assert (
            len(read_mooncake(path, options=ReadOptions(skip_bad_rows=True, max_bad_fraction=0.5)))
            == 3
        )


@pytest.mark.parametrize(
    ("encoding", "said"),
    [
        ("latin-1", r"byte 0xe9 at column \d+ is not UTF-8 text, and no line of the file is "
                    r"UTF-8 text: it is in another encoding \(Latin-1, say\); save it as UTF-8 "
                    r"\(iconv -f LATIN1 -t UTF-8 converts it\)$"),
        ("utf-16", r"byte 0xff at column 1 is not UTF-8 text, and the file is UTF-16 text, not "
                   r"UTF-8: it begins with UTF-16's byte-order mark; save it as UTF-8 \(iconv -f "
                   r"UTF-16 -t UTF-8 converts it\)$"),
        ("utf-16-le", r"byte 0xe9 at column \d+ is not UTF-8 text, and the file holds NUL "
                      r"bytes, as UTF-16LE text does: it is not UTF-8; save it as UTF-8 "
                      r"\(iconv -f UTF-16LE -t UTF-8"),
        ("utf-16-be", r"byte 0xe9 at column \d+ is not UTF-8 text, and the file holds NUL "
                      r"bytes, as UTF-16BE text does: it is not UTF-8; save it as UTF-8 "
                      r"\(iconv -f UTF-16BE -t UTF-8"),
    ],
)  # fmt: skip
def test_a_file_in_another_encoding_than_utf8_is_said_to_be(
    tmp_path: Path, encoding: str, said: str
) -> None:
    """Every line of a Latin-1 or UTF-16 file is a JSON object, in its encoding: the
    error says the encoding is not UTF-8, not that no line is a JSON object (the
    audit). gzip-compressed too; a CSV file is still in no supported format."""
    text = "".join(json.dumps({**row, "note": "caf\u00e9"}, ensure_ascii=False) + "\n"
                   for row in mooncake_rows())  # fmt: skip
    path = tmp_path / "enc.jsonl"
    path.write_bytes(text.encode(encoding))
    with pytest.raises(TraceFormatError, match=r"enc\.jsonl, line 1, row: " + said):
        first_row(path)
    path.write_bytes(gzip.compress(text.encode(encoding)))
    with pytest.raises(TraceFormatError, match=said):
        first_row(path)
    path.write_text("timestamp,input_length\n0,café\n")
    with pytest.raises(TraceFormatError, match=r"no line of the file is a JSON object: it is not"):
        first_row(path)


def test_a_truncated_gzip_file_names_the_file_and_line(tmp_path: Path) -> None:
    row = mooncake_rows()[0]
    text = "".join(json.dumps({**row, "timestamp": i}) + "\n" for i in range(3000))
    data = gzip.compress(text.encode())
    path = tmp_path / "mc.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError, match="cannot read the file") as info:
        read_mooncake(path)
    assert info.value.path == str(path) and 1 < info.value.line <= 3000


@pytest.mark.parametrize(
    ("times", "options", "line", "pattern"),
    [
        ([1000, -5, 2000], ReadOptions(rebase_time=False), 2, "negative"),
        ([1000, 1e308, -1e308], ReadOptions(), 2, "too far"),
    ],
)
def test_an_arrival_the_simulator_cannot_take_names_the_timestamp_and_line(
    tmp_path: Path, times: list[float], options: ReadOptions, line: int, pattern: str
) -> None:
    rows = [{**row, "timestamp": t} for row, t in zip(mooncake_rows(), times, strict=False)]
    path = write_jsonl(tmp_path / "mc.jsonl", rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceWarning)
        with pytest.raises(TraceFormatError, match=pattern) as info:
            read_mooncake(path, options=options)
    assert (info.value.path, info.value.line, info.value.field) == (str(path), line, "timestamp")


def test_skip_bad_rows_skips_an_arrival_the_simulator_cannot_take(tmp_path: Path) -> None:
    rows = [{**row, "timestamp": t} for row, t in zip(mooncake_rows(), [1000, -5, 2000])]
    path = write_jsonl(tmp_path / "mc.jsonl", rows)
    options = ReadOptions(
        rebase_time=False, skip_bad_rows=True, unsorted="sort", max_bad_fraction=0.5
    )
    with pytest.warns(TraceWarning, match=r"skipped 1 malformed row \(.*line 2"):
        workload = read_mooncake(path, options=options)
    assert [r.arrival_s for r in workload.requests] == [1.0, 2.0]
    assert workload.meta["read"]["rows_read"] == 2
    assert workload.meta["read"]["rows_skipped"] == 1


def test_true_is_not_a_count() -> None:
    # bool subclasses int in Python: each count refuses True rather than reading 1
    from envs.workloads import BurstedSyntheticConfig, Request, Workload
    from envs.workloads.registry import configure
    from envs.workloads.scenarios import MultiTenantConfig

    cases: list[tuple[Callable[[], Any], str]] = [
        (lambda: ReadOptions(max_rows=True), r"ReadOptions\.max_rows must be an integer >= 0"),
        (
            lambda: ReadOptions(block_tokens=True),
            r"ReadOptions\.block_tokens must be an integer >= 1, got True",
        ),
        (
            lambda: BurstedSyntheticConfig(n_bursts=True),
            r"BurstedSyntheticConfig\.n_bursts must be an integer >= 0, got True",
        ),
        (
            lambda: BurstedSyntheticConfig(block_tokens=True),
            r"BurstedSyntheticConfig\.block_tokens must be an integer >= 1, got True",
        ),
        (lambda: MultiTenantConfig(tenants=True), r"MultiTenantConfig\.tenants .* got True"),
        (
            lambda: configure("bursted_synthetic", train_windows=True),
            r"workload 'bursted_synthetic': train_windows must be an integer in "
            r"\[0, 100000\], got True",
        ),
        (
            lambda: Workload("w", True, []),
            r"workload 'w': block_tokens must be an integer >= 1, got True",
        ),
        (
            lambda: Workload("w", 16, [Request(0, "a", 0.0, True, 1, (1,))]),
            r"request 'a': input_tokens must be an integer >= 1, got True",
        ),
        (
            lambda: Workload("w", 16, [Request(0, "a", 0.0, 16, True, (1,))]),
            r"request 'a': output_tokens must be an integer >= 1, got True",
        ),
    ]
    for make, message in cases:
        with pytest.raises(ValueError, match=message):
            make()


def _hot_rows(config: Any, window: int, seed: int, split: str, trace_id: str) -> list[dict]:
    """A user's generator that checks nothing: numpy refuses a negative rate, and a
    0-token block divides by zero."""
    import numpy as np

    n = int(np.random.default_rng([seed, window]).poisson(config.rate_per_s))
    blocks = 256 // config.block_tokens
    return [
        {"request_id": f"{trace_id}-{i}", "trace_id": trace_id, "arrival_s": float(i),
         "input_length": 256, "output_length": 1, "hash_ids": [f"{i:024x}"] * blocks,
         "group_id": trace_id, "split": split, "source": "synthetic",
         "metadata": {"job_kind": "burst"}}
        for i in range(n)
    ]  # fmt: skip


@pytest.fixture
def hot_set(monkeypatch: pytest.MonkeyPatch) -> str:
    """A workload of the user's own, added to the registry as CONTRIBUTING.md says."""
    from dataclasses import dataclass

    from envs.workloads import registry

    @dataclass(frozen=True)
    class HotConfig:
        rate_per_s: float = 5.0
        block_tokens: int = 256

    family = registry.Family("hot", _hot_rows, HotConfig(), 1, 1, 1)
    monkeypatch.setitem(registry._SCENARIOS, "hot_set", registry.Scenario("hot_set", "", (family,)))
    return "hot_set"


def test_a_user_generator_s_failure_names_the_workload_window_and_parameters(
    hot_set: str,
) -> None:
    """numpy's ``lam < 0 or lam is NaN`` named neither the workload nor the parameter:
    a generator's ValueError is one ConfigError naming the workload, the window, the
    seed, the parameters given (as data, for the commands to name) and the
    generator's line; any other error keeps its type and traceback, with a note."""
    import os
    import sys

    from envs.sim.errors import ConfigError
    from envs.workloads import windows
    from envs.workloads.registry import configure, plan

    first = {s.split: s.trace_id for s in reversed(plan(configure(hot_set), 7))}
    with pytest.raises(ConfigError) as refused:
        next(windows(hot_set, seed=7, rate_per_s=-5))
    here = os.path.relpath(__file__)
    here = __file__ if here.startswith("..") else here
    line = _hot_rows.__code__.co_firstlineno + 5  # the poisson draw
    assert str(refused.value) == (
        f"workload 'hot_set': test window {first['test']!r} (seed 7, rate_per_s=-5): _hot_rows "
        f"failed at {here}:{line}: ValueError: lam < 0 or lam is NaN"
    )
    assert refused.value.fields == ("rate_per_s",)  # as data: a command names it as typed
    assert refused.value.named({"rate_per_s": "workload.params.rate_per_s"}).startswith(
        f"workload 'hot_set': test window {first['test']!r} (seed 7, "
        "workload.params.rate_per_s=-5): "
    )
    with pytest.raises(ZeroDivisionError) as bug:  # a bug: its own type, and its traceback
        next(windows(hot_set, split="train", seed=7, block_tokens=0))
    if sys.version_info >= (3, 11):  # (exception notes)
        assert bug.value.__notes__ == [
            f"while generating workload 'hot_set': train window {first['train']!r} "
            "(seed 7, block_tokens=0)"
        ]


@pytest.mark.parametrize(
    ("workload", "params", "said"),
    [
        ("art_like", {"think_median_s": 0.0}, "ArtLikeConfig.think_median_s must be > 0"),
        ("art_like", {"document_pareto_alpha": 0.0},
         "ArtLikeConfig.document_pareto_alpha must be > 0"),
        ("agent_fanout", {"step_median_s": 0.0}, "AgentFanoutConfig.step_median_s must be > 0"),
        ("bursted_art", {"mean_rate_per_s": -5.0}, "ArtLikeConfig.mean_rate_per_s must be >= 0"),
    ],
)  # fmt: skip
def test_shipped_generators_refuse_what_they_cannot_draw(
    workload: str, params: dict[str, float], said: str
) -> None:
    """Medians of lognormals and a Pareto index of 0 were numpy's ``math domain
    error`` / ``a <= 0`` at the first window; each is refused as the config is made,
    naming the workload and the field."""
    from envs.workloads.registry import configure

    with pytest.raises(ValueError, match=f"^workload '{workload}': {re.escape(said)}"):
        configure(workload, **params)


def _blocks_workload(blocks: Callable[[int], Any]) -> Any:
    """Four 48-token requests 0.5 s apart, each with three blocks of 16 tokens, the
    first two shared: ``blocks(i)`` gives request i's ids."""
    from envs.sim.request import Request, Workload

    requests = [Request(i, f"r{i}", 0.5 * i, 48, 2, blocks(i)) for i in range(4)]
    return Workload("mine", 16, requests)


def test_blocks_as_a_list_or_array_of_ints_become_a_tuple_of_ints() -> None:
    """Hand-built blocks as a list or a numpy array ran the reference core but
    crashed the compiled one (``Expected tuple, got list``; an array failed in both,
    "truth value of an array is ambiguous"): each becomes the tuple of Python ints
    the tuple version holds, and an episode of btb/Route-v0 under eft_pull gives the
    same decisions and TTFTs (whichever core this process runs)."""
    import gymnasium as gym
    import numpy as np

    import envs
    from baselines import make_policy

    assert envs.ENV_IDS
    made = {
        "tuple": _blocks_workload(lambda i: (1, 2, 10 + i)),
        "list": _blocks_workload(lambda i: [1, 2, 10 + i]),
        "array": _blocks_workload(lambda i: np.array([1, 2, 10 + i])),
        "numpy ints": _blocks_workload(lambda i: (np.int64(1), np.uint32(2), np.int8(10 + i))),
    }
    # a range (accepted before the check existed; a review of 2026-12-06)
    assert _blocks_workload(lambda i: range(i, i + 3)).requests[1].blocks == (1, 2, 3)
    results = {}
    for kind, workload in made.items():
        assert [r.blocks for r in workload.requests] == [(1, 2, 10 + i) for i in range(4)]
        assert all(type(b) is int for r in workload.requests for b in r.blocks), kind
        assert all(type(r.blocks) is tuple for r in workload.requests), kind
        env = gym.make("btb/Route-v0")
        env.reset(seed=0, options={"window": workload})
        policy, actions = make_policy("eft_pull"), []
        done = False
        while not done:
            actions.append(int(env.unwrapped.policy_action(policy)))
            _, _, terminated, truncated, info = env.step(actions[-1])
            done = terminated or truncated
        results[kind] = (actions, list(info["ttft_s"]))
        env.close()
    assert len(results["tuple"][0]) == 4
    assert results["list"] == results["array"] == results["numpy ints"] == results["tuple"]


@pytest.mark.parametrize(
    ("blocks", "said"),
    [
        (["a", "b", "c"], "blocks must be ints >= 0 (block ids), got list of str ('a')"),
        ((1.0, 2.0, 3.0), "blocks must be ints >= 0 (block ids), got tuple of float (1.0)"),
        ([1, 2.5, 3], "blocks must be ints >= 0 (block ids), got list of float (2.5)"),
        ([1, True], "blocks must be ints >= 0 (block ids), got list of bool (True)"),
        ((1, -2, 3), "blocks holds the negative id -2; block ids are >= 0"),
        ((), "blocks is empty; every prompt has at least one block"),
        ("abc", "blocks must be a tuple of ints >= 0 (block ids), got str"),
        (None, "blocks must be a tuple of ints >= 0 (block ids), got NoneType"),
        ("array of str", "blocks must be ints >= 0 (block ids), got ndarray of str_"),
        ("array of float", "blocks must be ints >= 0 (block ids), got ndarray of float64"),
        ("array of int", "blocks holds the negative id -2; block ids are >= 0"),
        ("2-d array", "blocks must be a tuple of ints >= 0 (block ids), got 2-d ndarray"),
    ],
)
def test_blocks_that_are_not_block_ids_are_refused_in_one_line(blocks: Any, said: str) -> None:
    """Strings failed in a comparison (``'>=' not supported``), whole floats ran
    silently, a numpy array failed in its truth value: each is a ConfigError of one
    line naming the workload, the request and ``blocks``."""
    import numpy as np

    from envs.sim.errors import ConfigError

    arrays = {
        "array of str": np.array(["a", "b"]),
        "array of float": np.array([1.0, 2.0]),
        "array of int": np.array([1, -2, 3]),
        "2-d array": np.array([[1, 2], [3, 4]]),
    }
    made = arrays.get(blocks, blocks) if isinstance(blocks, str) else blocks
    with pytest.raises(ConfigError) as refused:
        _blocks_workload(lambda i: made)
    assert str(refused.value).startswith(f"workload 'mine', request 'r0': {said}")
    assert "\n" not in str(refused.value)


def test_a_bursted_arrival_is_at_most_a_month_into_its_window(tmp_path: Path) -> None:
    """31 days (2,678,400 s) into a window is read, a second more is refused (or
    skipped and counted); the bound is in seconds, after ``time_unit``."""
    month = 31 * 86_400
    rows = bursted_rows("w", n=3)
    rows[2]["arrival_s"] = month
    path = write_jsonl(tmp_path / "month.jsonl", rows)
    (window,) = iter_bursted_windows(path)
    assert [r.arrival_s for r in window.requests] == [1.0, 2.0, month]
    rows[2]["arrival_s"] = month + 1
    path = write_jsonl(tmp_path / "past.jsonl", rows)
    with pytest.raises(TraceFormatError, match="line 3, field 'arrival_s': 2678401 is 31 days"):
        list(iter_bursted_windows(path))
    report = ReadReport(source=str(path))
    options = ReadOptions(skip_bad_rows=True, max_bad_fraction=0.5)
    with pytest.warns(TraceWarning, match="skipped 1 malformed row"):
        (window,) = iter_bursted_windows(path, options=options, report=report)
    assert [r.arrival_s for r in window.requests] == [1.0, 2.0]
    assert (report.rows_read, report.rows_skipped) == (2, 1)
    # the same number in milliseconds is 44.6 minutes into the window
    (window,) = iter_bursted_windows(path, options=ReadOptions(time_unit="ms"))
    assert [r.arrival_s for r in window.requests] == [0.001, 0.002, (month + 1) / 1000]


def test_a_bursted_parquet_file_whose_rows_lack_a_metadata_key_reads_as_its_jsonl(
    tmp_path: Path,
) -> None:
    """Parquet stores ``metadata`` as one struct for every row, so a row without the
    ``job_kind`` another row has reads it as null: that is its default "", as a null
    optional field is elsewhere. It was refused (``metadata.job_kind: expected a
    string, got None``), though the JSONL file of the same rows reads."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = bursted_rows("w", n=3)
    rows[0]["metadata"] = {"tenant": "A"}  # no job_kind
    rows[1]["metadata"] = {"job_kind": None}
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "b.parquet")
    assert pq.read_table(tmp_path / "b.parquet").column("metadata")[0].as_py() == {
        "tenant": "A",
        "job_kind": None,
    }
    for path in (tmp_path / "b.parquet", write_jsonl(tmp_path / "b.jsonl", rows)):
        (window,) = iter_bursted_windows(path)
        got = [(r.request_id, r.tenant, r.job_kind) for r in window.requests]
        assert got == [("w-0", "A", ""), ("w-1", "", ""), ("w-2", "", "burst")]
