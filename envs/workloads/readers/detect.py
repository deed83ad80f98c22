"""The supported formats by name, and guessing a file's format from its first row."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envs.sim.errors import echoed
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
        raise ValueError(f"unknown trace format {echoed(name)} (known: {known})")
    return name


FORMAT_MARKS: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("bursted", ("trace_id", "arrival_s"), True),
    ("art", ("timestamp_ms",), True),
    ("qwen", ("chat_id", "parent_chat_id"), False),
    ("mooncake", ("timestamp", "hash_ids"), True),
)
"""How a row's fields tell its format, tried in this order: (format, fields, whether
it takes all of them; else any one)."""


def format_of_row(row: Mapping[str, Any]) -> str | None:
    """The format whose fields a row has, or None."""
    told = told_by(row)
    return told[0] if told is not None else None


def told_by(row: Mapping[str, Any]) -> tuple[str, str] | None:
    """The format whose fields a row has and those fields in words (``its field
    'chat_id'``), or None: what a run header says of a format it guessed."""
    for name, marks, every in FORMAT_MARKS:
        found = [mark for mark in marks if mark in row]
        if found and (not every or len(found) == len(marks)):
            quoted = " and ".join(repr(mark) for mark in found)
            return name, f"its field{'s' if len(found) > 1 else ''} {quoted}"
    return None


def detect_format(path: str | os.PathLike[str]) -> str:
    """Guess a trace file's format (JSONL or parquet) from the fields of its first row."""
    return guess_format(path)[0]


def guess_format(path: str | os.PathLike[str]) -> tuple[str, str]:
    """:func:`detect_format`'s guess and what told it (:func:`told_by`)."""
    file = Path(path)
    first = first_row(file)  # when no row is readable, raises the first one's error
    if first is None:
        raise TraceFormatError(  # about the file: no line 1 to blame
            str(file),
            0,
            None,
            "the file is empty (or blank lines only): no row to detect the format from",
        )
    line, row = first
    told = told_by(row)
    if told is None:
        raise TraceFormatError(
            str(file),
            line,
            None,
            f"cannot tell the format from fields {sorted(row)}; pass {{format}}= one of "
            + ", ".join(FORMATS),
            ("format",),
        )
    return told


def file_format(path: str | os.PathLike[str], format: str) -> str:
    """The canonical name of a file's format: guessed (:func:`detect_format`) for
    ``auto``, else the one named, once the file is known to hold rows at all (a
    file with no JSON object row, such as a CSV file, is in no supported format
    whatever format is named)."""
    return file_format_told(path, format)[0]


def file_format_told(path: str | os.PathLike[str], format: str) -> tuple[str, str]:
    """:func:`file_format` and what told it: the row's fields for a guess, "" for a
    format named."""
    if format == "auto":
        return guess_format(path)
    name = canonical_format(format)
    first_row(Path(path))  # raises for a file of no JSON object rows
    return name, ""
