"""Mooncake traces (FAST'25): JSONL rows of ``timestamp`` (ms), lengths and chained ``hash_ids``.

Fields: ``timestamp`` (milliseconds, required), ``input_length`` (required),
``output_length`` (default 1; 0 is read as 1), ``hash_ids`` (required, 512-token
blocks; ids are already chained, and chaining them again changes nothing about
which requests share a prefix). Optional ``request_id`` defaults to the line
number. Times are shifted so the first request arrives at 0 s unless
``ReadOptions(rebase_time=False)``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from envs.sim.request import Workload
from envs.workloads.readers.base import (
    ParsedRow,
    ReadOptions,
    ReadReport,
    RowLocation,
    TraceFormat,
    get_str,
    request_fields,
)
from envs.workloads.readers.sources import read_file

BLOCK_TOKENS = 512


def parse_row(row: Mapping[str, Any], loc: RowLocation) -> ParsedRow:
    """One Mooncake row, checked."""
    return ParsedRow(
        request_id=get_str(row, "request_id", loc, default=str(loc.line)),
        **request_fields(row, loc, "timestamp"),
    )


FORMAT = TraceFormat(
    name="mooncake",
    block_tokens=BLOCK_TOKENS,
    time_field="timestamp",
    new_parser=lambda: parse_row,
    time_units_per_s=1000.0,
    fields=frozenset(("timestamp", "input_length", "output_length", "hash_ids", "request_id")),
)


def read_mooncake(
    path: str | os.PathLike[str],
    options: ReadOptions | None = None,
    report: ReadReport | None = None,
    name: str | None = None,
) -> Workload:
    """Read a Mooncake JSONL trace into one :class:`Workload` (512-token blocks)."""
    return read_file(path, FORMAT, options, report, name)
