"""Bursted-ART JSONL: many windows in one file, replayed one window at a time.

Fields: ``trace_id`` (required: the window), ``arrival_s`` (required, seconds
from the window's start, >= 0), ``input_length`` (required), ``output_length``
(default 1; 0 is read as 1), ``hash_ids`` (required, one hash per 256-token block,
chained here), ``request_id`` (default ``<trace_id>-<line>``), ``source``
(default ""), ``group_id`` (default ""), ``split`` (default ""),
``metadata.job_kind`` (default ""), and ``tenant`` (an extension: top-level or in
``metadata``, default ""; rows of different tenants never share KV).

The file must be grouped by window, as the dataset writer produces it;
:func:`iter_bursted_windows` then holds one window's requests at a time.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from envs.sim.request import BlockChainer, Workload
from envs.workloads.readers.base import (
    ParsedRow,
    ReadOptions,
    ReadReport,
    RowLocation,
    TraceFormat,
    TraceFormatError,
    assemble_windows,
    get_str,
    request_fields,
)
from envs.workloads.readers.sources import file_rows

BLOCK_TOKENS = 256


def parse_row(row: Mapping[str, Any], loc: RowLocation) -> ParsedRow:
    """One Bursted-ART row, checked."""
    trace_id = get_str(row, "trace_id", loc, default=None)
    metadata = row.get("metadata")
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, Mapping):
        raise TraceFormatError(
            loc.path, loc.line, "metadata", f"expected an object, got {metadata!r}"
        )
    tenant = get_str(row, "tenant", loc, default="") or get_str(
        metadata, "tenant", loc, default="", label="metadata.tenant"
    )
    return ParsedRow(
        request_id=get_str(row, "request_id", loc, default=f"{trace_id}-{loc.line}"),
        **request_fields(row, loc, "arrival_s", time_minimum=0.0),
        group_id=get_str(row, "group_id", loc, default=""),
        tenant=tenant,
        job_kind=_job_kind(metadata, loc),
        window=trace_id,
        source=get_str(row, "source", loc, default=""),
        split=get_str(row, "split", loc, default=""),
    )


def _job_kind(metadata: Mapping[str, Any], loc: RowLocation) -> str:
    value = metadata.get("job_kind", "")
    if not isinstance(value, str):
        raise TraceFormatError(
            loc.path, loc.line, "metadata.job_kind", f"expected a string, got {value!r}"
        )
    return value


FORMAT = TraceFormat(
    name="bursted",
    block_tokens=BLOCK_TOKENS,
    time_field="arrival_s",
    new_parser=lambda: parse_row,
    windowed=True,
    rebase=False,
)


def iter_bursted_windows(
    path: str | os.PathLike[str],
    options: ReadOptions | None = None,
    report: ReadReport | None = None,
    sources: Iterable[str] | None = None,
    chainer: BlockChainer | None = None,
) -> Iterator[Workload]:
    """Stream a Bursted-ART JSONL file as one :class:`Workload` per window.

    Only the current window's requests are in memory. ``sources`` keeps only windows
    whose ``source`` is listed (e.g. ``{"synthetic"}``). Each workload's ``meta``
    holds ``trace_id``, ``source``, ``split`` and the window's first line.
    """
    report = report if report is not None else ReadReport(source=str(path))
    return assemble_windows(
        file_rows(path),
        FORMAT,
        Path(path).stem,
        options=options,
        report=report,
        chainer=chainer,
        sources=sources,
    )
