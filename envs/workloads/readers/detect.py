"""The supported formats by name, and guessing a file's format from its first row."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envs.workloads.readers import art_chat, bursted, mooncake, qwen
from envs.workloads.readers.base import TraceFormat, TraceFormatError
from envs.workloads.readers.sources import first_row

FORMATS: dict[str, TraceFormat] = {
    "mooncake": mooncake.FORMAT,
    "art": art_chat.FORMAT,
    "bursted": bursted.FORMAT,
    "qwen": qwen.FORMAT,
}
"""Format name -> its description (block size, time field, parser)."""
FORMAT_ALIASES = {"art_chat": "art", "qwen_bailian": "qwen"}
"""Longer names the commands accept for a format (``workload.format=art_chat``)."""


def canonical_format(name: str, also: Sequence[str] = ()) -> str:
    """A format name or alias as its key of :data:`FORMATS`; ValueError if unknown,
    listing every name the caller takes: ``auto`` (the caller tells the format from
    the first row), the formats, their aliases, and ``also``, names the caller
    handles itself (a trace workload's ``hub``)."""
    name = FORMAT_ALIASES.get(name, name)
    if name not in FORMATS:
        known = ", ".join(["auto", *FORMATS, *FORMAT_ALIASES, *also])
        raise ValueError(f"unknown trace format {name!r} (known: {known})")
    return name


def format_of_row(row: Mapping[str, Any]) -> str | None:
    """The format whose fields a row has, or None."""
    if "trace_id" in row and "arrival_s" in row:
        return "bursted"
    if "timestamp_ms" in row:
        return "art"
    if "chat_id" in row or "parent_chat_id" in row:
        return "qwen"
    if "timestamp" in row and "hash_ids" in row:
        return "mooncake"
    return None


def detect_format(path: str | os.PathLike[str]) -> str:
    """Guess a trace file's format (JSONL or parquet) from the fields of its first row."""
    file = Path(path)
    first = first_row(file)  # when no row is readable, raises the first one's error
    if first is None:
        raise TraceFormatError(str(file), 1, None, "the file has no rows to detect the format from")
    line, row = first
    name = format_of_row(row)
    if name is None:
        raise TraceFormatError(
            str(file),
            line,
            None,
            f"cannot tell the format from fields {sorted(row)}; pass {{format}}= one of "
            + ", ".join(FORMATS),
            ("format",),
        )
    return name


def file_format(path: str | os.PathLike[str], format: str) -> str:
    """The canonical name of a file's format: guessed (:func:`detect_format`) for
    ``auto``, else the one named, once the file is known to hold rows at all (a
    file with no JSON object row, such as a CSV file, is in no supported format
    whatever format is named)."""
    if format == "auto":
        return detect_format(path)
    name = canonical_format(format)
    first_row(Path(path))  # raises for a file of no JSON object rows
    return name
