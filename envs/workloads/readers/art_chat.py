"""ART-Chat rows (JSONL or parquet): ``timestamp_ms``, lengths and per-block ``hash_ids``.

Fields: ``timestamp_ms`` (required), ``input_length`` (required, up to ~260k),
``output_length`` (default 1; 0 is read as 1), ``hash_ids`` (required: 24-hex
strings, one per 256-token block, chained here), ``request_id`` (default: the
line or row number), ``system_prompt_hash`` (default ""; kept as the request's
``group_id``). ``token_hash`` and ``messages`` are ignored. Times are shifted so
the first request arrives at 0 s unless ``ReadOptions(rebase_time=False)``.
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

BLOCK_TOKENS = 256


def parse_row(row: Mapping[str, Any], loc: RowLocation) -> ParsedRow:
    """One ART-Chat row, checked."""
    return ParsedRow(
        request_id=get_str(row, "request_id", loc, default=str(loc.line)),
        **request_fields(row, loc, "timestamp_ms"),
        group_id=get_str(row, "system_prompt_hash", loc, default=""),
        job_kind="background",
    )


FORMAT = TraceFormat(
    name="art",
    block_tokens=BLOCK_TOKENS,
    time_field="timestamp_ms",
    new_parser=lambda: parse_row,
    time_units_per_s=1000.0,
    fields=frozenset(
        (
            "request_id",
            "token_hash",
            "system_prompt_hash",
            "timestamp_ms",
            "input_length",
            "output_length",
            "hash_ids",
            "messages",
        )
    ),
)


def read_art_chat(
    path: str | os.PathLike[str],
    options: ReadOptions | None = None,
    report: ReadReport | None = None,
    name: str | None = None,
) -> Workload:
    """Read ART-Chat rows from ``.jsonl`` or ``.parquet`` into one :class:`Workload`."""
    return read_file(path, FORMAT, options, report, name)
