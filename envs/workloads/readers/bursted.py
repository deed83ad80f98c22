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

A split of a dataset that ``experiments.make_dataset`` wrote (``train.jsonl``,
``val.jsonl``, ``test.jsonl``, compressed or not, or a symlink to one) is read
at the block size the ``dataset_info.json`` beside it records
(:func:`dataset_block_tokens`): 512 tokens for one made from a Mooncake trace, where
the format's own is 256.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from envs.sim.checks import is_number
from envs.sim.errors import ConfigError, echoed
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
from envs.workloads.readers.sources import file_rows, trace_stem, without_compression

BLOCK_TOKENS = 256
DATASET_INFO = "dataset_info.json"
"""The file describing a dataset, beside its splits (``experiments.make_dataset`` writes it)."""
DATASET_LAYOUT = "bursted-art-jsonl"
"""Its ``format`` when its splits are Bursted-ART JSONL files, each hash covering its
``block_tokens`` tokens."""


def parse_row(row: Mapping[str, Any], loc: RowLocation) -> ParsedRow:
    """One Bursted-ART row, checked."""
    trace_id = get_str(row, "trace_id", loc, default=None)
    metadata = row.get("metadata")
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, Mapping):
        raise TraceFormatError(
            loc.path, loc.line, "metadata", f"expected an object, got {echoed(metadata)}"
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
    """``metadata.job_kind``: a string, "" when absent or null (as a parquet struct
    gives a row that lacks a key others have)."""
    value = metadata.get("job_kind")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TraceFormatError(
            loc.path, loc.line, "metadata.job_kind", f"expected a string, got {echoed(value)}"
        )
    return value


FORMAT = TraceFormat(
    name="bursted",
    block_tokens=BLOCK_TOKENS,
    time_field="arrival_s",
    new_parser=lambda: parse_row,
    windowed=True,
    rebase=False,
    fields=frozenset(
        (
            "request_id",
            "trace_id",
            "source",
            "arrival_s",
            "input_length",
            "output_length",
            "hash_ids",
            "group_id",
            "split",
            "metadata",
            "tenant",
        )
    ),
)


def dataset_block_tokens(path: str | os.PathLike[str]) -> int | None:
    """The block size a dataset records for its split ``path``: the ``block_tokens`` of
    its :data:`DATASET_INFO` (:func:`dataset_info`); None for any other file. A
    :data:`DATASET_INFO` that is not JSON, or that describes such a dataset with no
    usable ``block_tokens``, is a ConfigError naming it."""
    found = dataset_info(path)
    if found is None:
        return None
    info_path, info = found
    value: Any = info.get("block_tokens")
    # a whole float (16.0) is taken, as a trace row's integer fields take one
    whole = is_number(value) and math.isfinite(value) and float(value).is_integer()
    if not whole or value < 1:
        raise ConfigError(
            f"{info_path}, field 'block_tokens': must be an integer >= 1 (the tokens a hash "
            f"of {Path(path).name} covers), got {echoed(value)}"
        )
    return int(value)


def dataset_info(path: str | os.PathLike[str]) -> tuple[Path, Mapping[str, Any]] | None:
    """The :data:`DATASET_INFO` file describing the split ``path`` and its JSON object:
    the one beside it, when that file describes a dataset of :data:`DATASET_LAYOUT`
    whose splits include ``path`` (``test.jsonl`` for a ``test`` split,
    compressed or not: ``test.jsonl.gz``, ``test.jsonl.xz``); None for any other file. A symlink is
    looked at where it is and where it points (a link to a split, from a folder of
    links, finds the dataset beside the split). A :data:`DATASET_INFO` that is not
    JSON is a ConfigError naming it."""
    file = Path(path)
    if not file.is_file():
        return None
    places = [file]
    with contextlib.suppress(OSError, RuntimeError):  # a loop of links: the path as given
        resolved = file.resolve()
        if resolved != file.absolute():  # a link (a relative path is no link)
            places.append(resolved)
    for place in places:
        found = _info_beside(place)
        if found is not None:
            return found
    return None


def _info_beside(file: Path) -> tuple[Path, Mapping[str, Any]] | None:
    """:func:`dataset_info` for the :data:`DATASET_INFO` beside ``file``."""
    info_path = file.with_name(DATASET_INFO)
    if not info_path.is_file():
        return None
    try:
        info = json.loads(info_path.read_bytes())
    except ValueError as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ConfigError(
            f"{info_path}: not valid JSON ({error}); the dataset_info.json beside a "
            f"trace file says the block size of its splits ({file.name})"
        ) from None
    if not isinstance(info, Mapping) or info.get("format") != DATASET_LAYOUT:
        return None
    splits = info.get("splits")
    name = without_compression(file.name)  # as the dataset lists it
    if not isinstance(splits, Mapping) or name not in {f"{s}.jsonl" for s in splits}:
        return None
    return info_path, info


def dataset_options(path: str | os.PathLike[str], options: ReadOptions) -> ReadOptions:
    """``options`` for reading the Bursted-ART file ``path``: with the block size its
    dataset records (:func:`dataset_block_tokens`) when they name none themselves."""
    if options.block_tokens is not None:
        return options
    recorded = dataset_block_tokens(path)
    return options if recorded is None else replace(options, block_tokens=recorded)


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
    holds ``trace_id``, ``source``, ``split`` and the window's first line. A dataset's
    split is read at the block size the dataset records (:func:`dataset_options`).
    """
    report = report if report is not None else ReadReport(source=str(path))
    return assemble_windows(
        file_rows(path),
        FORMAT,
        trace_stem(path),
        options=dataset_options(path, options or ReadOptions()),
        report=report,
        chainer=chainer,
        sources=sources,
    )
