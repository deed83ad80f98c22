"""Qwen-Bailian traces: JSONL rows of conversations with per-block ``hash_ids`` (16 tokens).

Fields: ``timestamp`` (seconds, required), ``input_length`` (required),
``output_length`` (default 1; 0 is read as 1), ``hash_ids`` (required, one hash
per 16-token block, chained here), ``chat_id`` (default: the line number),
``parent_chat_id`` (default -1: a first turn), ``type`` (default "", kept as the
request's ``job_kind``), ``turn`` (default 1). ``chat_id`` and ``parent_chat_id``
are kept on the request (``Request.chat_id``, ``Request.parent_chat_id``; "" for
a first turn's parent). A request's ``group_id`` is the
``chat_id`` of its conversation's first turn, found by following
``parent_chat_id`` (a parent not in the file starts its own conversation).
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
    RowParser,
    TraceFormat,
    get_int,
    get_str,
    request_fields,
)
from envs.workloads.readers.sources import read_file

BLOCK_TOKENS = 16


def new_parser() -> RowParser:
    """A row parser that remembers each chat's conversation root."""
    roots: dict[str, str] = {}

    def parse_row(row: Mapping[str, Any], loc: RowLocation) -> ParsedRow:
        chat_id = get_str(row, "chat_id", loc, default=str(loc.line))
        parent = get_str(row, "parent_chat_id", loc, default="-1")
        get_int(row, "turn", loc, minimum=0, default=1)
        parsed = ParsedRow(
            request_id=chat_id,
            **request_fields(row, loc, "timestamp"),
            job_kind=get_str(row, "type", loc, default=""),
            chat_id=chat_id,
            parent_chat_id="" if parent in ("-1", "") else parent,
        )
        root = chat_id if parent in ("-1", "") else roots.get(parent, parent)
        roots[chat_id] = root
        parsed.group_id = root
        return parsed

    return parse_row


FORMAT = TraceFormat(
    name="qwen",
    block_tokens=BLOCK_TOKENS,
    time_field="timestamp",
    new_parser=new_parser,
    fields=frozenset(
        (
            "chat_id",
            "parent_chat_id",
            "timestamp",
            "input_length",
            "output_length",
            "type",
            "turn",
            "hash_ids",
        )
    ),
)


def read_qwen_bailian(
    path: str | os.PathLike[str],
    options: ReadOptions | None = None,
    report: ReadReport | None = None,
    name: str | None = None,
) -> Workload:
    """Read a Qwen-Bailian JSONL trace into one :class:`Workload` (16-token blocks)."""
    return read_file(path, FORMAT, options, report, name)
