"""Small trace files for the reader tests, written by hand in each format."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

COMPRESSIONS = ("gzip", "bzip2", "xz", "zstd")
"""The compressions a JSONL trace is read through (zstd with the zstandard module)."""


def compress(kind: str, data: bytes) -> bytes:
    """``data`` compressed as ``kind`` (one of :data:`COMPRESSIONS`); zstd frames are
    written with their checksum, as the zstd command writes them, and the test is
    skipped without the zstandard module."""
    if kind == "gzip":
        return gzip.compress(data)
    if kind == "bzip2":
        return bz2.compress(data)
    if kind == "xz":
        return lzma.compress(data)
    zstandard = pytest.importorskip("zstandard")
    return bytes(zstandard.ZstdCompressor(write_checksum=True).compress(data))


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any] | str]) -> Path:
    """One row a line; a string row is written as it is (for malformed lines)."""
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return path


def mooncake_rows() -> list[dict[str, Any]]:
    """Four requests; the first three share a 2-block prefix, the last shares nothing."""
    return [
        {"timestamp": 1000, "input_length": 1500, "output_length": 10, "hash_ids": [1, 2, 3]},
        {"timestamp": 1500, "input_length": 1100, "output_length": 0, "hash_ids": [1, 2, 4]},
        {"timestamp": 2200, "input_length": 1024, "hash_ids": [1, 2]},
        {"timestamp": 4000, "input_length": 100, "output_length": 5, "hash_ids": [9]},
    ]


def art_rows() -> list[dict[str, Any]]:
    """Three ART-Chat requests (24-hex hashes, 256-token blocks)."""
    a, b, c, d = (f"{i:024x}" for i in (10, 11, 12, 13))
    return [
        {"request_id": "r1", "token_hash": "t1", "system_prompt_hash": "sp1",
         "timestamp_ms": 1_700_000_000_000, "input_length": 600, "output_length": 128,
         "hash_ids": [a, b, c], "messages": []},
        {"request_id": "r2", "token_hash": "t2", "system_prompt_hash": "sp1",
         "timestamp_ms": 1_700_000_000_250, "input_length": 512, "output_length": 3,
         "hash_ids": [a, b], "messages": []},
        {"request_id": "r3", "token_hash": "t3", "system_prompt_hash": "sp2",
         "timestamp_ms": 1_700_000_001_000, "input_length": 200, "output_length": 7,
         "hash_ids": [d], "messages": []},
    ]  # fmt: skip


def qwen_rows() -> list[dict[str, Any]]:
    """A three-turn conversation (chat 1 -> 2 -> 3) and an unrelated chat 4; 16-token blocks."""
    return [
        {"chat_id": 1, "parent_chat_id": -1, "timestamp": 10.0, "input_length": 40,
         "output_length": 5, "type": "text", "turn": 1, "hash_ids": [7, 8, 9]},
        {"chat_id": 4, "parent_chat_id": -1, "timestamp": 10.5, "input_length": 16,
         "output_length": 2, "type": "search", "turn": 1, "hash_ids": [50]},
        {"chat_id": 2, "parent_chat_id": 1, "timestamp": 12.0, "input_length": 70,
         "output_length": 5, "type": "text", "turn": 2, "hash_ids": [7, 8, 9, 10, 11]},
        {"chat_id": 3, "parent_chat_id": 2, "timestamp": 15.0, "input_length": 100,
         "output_length": 5, "type": "text", "turn": 3, "hash_ids": [7, 8, 9, 10, 11, 12, 13]},
    ]  # fmt: skip


def bursted_rows(trace_id: str, n: int = 4, split: str = "test") -> list[dict[str, Any]]:
    """``n`` requests of one window sharing a 2-block prefix, each with its own last block."""
    prefix = [f"{trace_id}-p0", f"{trace_id}-p1"]
    return [
        {
            "request_id": f"{trace_id}-{i}",
            "trace_id": trace_id,
            "source": "synthetic",
            "arrival_s": 1.0 + i,
            "input_length": 700,
            "output_length": 1,
            "hash_ids": [*prefix, f"{trace_id}-s{i}"],
            "group_id": f"{trace_id}-burst",
            "split": split,
            "metadata": {"job_kind": "burst"},
        }
        for i in range(n)
    ]
