"""Trace readers: Mooncake, ART-Chat (JSONL/parquet), Bursted-ART, Qwen-Bailian and hub datasets.

Each reader returns :class:`~envs.sim.request.Workload` objects with the
format's block size. :func:`iter_trace_windows` reads any supported file,
yielding one workload per window for Bursted-ART (streamed) and a single
workload otherwise; :func:`read_trace` returns a single workload.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from envs.sim.request import Workload
from envs.workloads.readers.art_chat import read_art_chat
from envs.workloads.readers.base import (
    MissingDependencyError,
    ReadOptions,
    ReadReport,
    TooManyBadRowsError,
    TraceFormat,
    TraceFormatError,
    TraceWarning,
    UnsortedTraceError,
    assemble_trace,
    assemble_windows,
)
from envs.workloads.readers.bursted import (
    dataset_block_tokens,
    dataset_options,
    iter_bursted_windows,
)
from envs.workloads.readers.detect import (
    FORMAT_ALIASES,
    FORMATS,
    canonical_format,
    detect_format,
    file_format,
    format_of_row,
)
from envs.workloads.readers.hub import read_hub_dataset
from envs.workloads.readers.mooncake import read_mooncake
from envs.workloads.readers.qwen import read_qwen_bailian
from envs.workloads.readers.sources import file_rows, trace_stem


def iter_trace_windows(
    path: str | os.PathLike[str],
    format: str = "auto",
    options: ReadOptions | None = None,
    report: ReadReport | None = None,
) -> Iterator[Workload]:
    """Read any supported trace file: one workload per window (Bursted-ART) or one in all.
    A dataset's split is read at the block size the dataset records (:func:`dataset_options`)."""
    name = file_format(path, format)
    fmt = FORMATS[name]
    report = report if report is not None else ReadReport(source=str(path))
    rows = file_rows(path)
    if fmt.windowed:
        options = dataset_options(path, options or ReadOptions())
        return assemble_windows(rows, fmt, trace_stem(path), options=options, report=report)
    return iter([assemble_trace(rows, fmt, trace_stem(path), options=options, report=report)])


def read_trace(
    path: str | os.PathLike[str],
    format: str = "auto",
    options: ReadOptions | None = None,
    report: ReadReport | None = None,
) -> Workload:
    """Read a trace file holding a single window into one workload.

    A Bursted-ART file with several windows is an error: stream it with
    :func:`iter_trace_windows` or :func:`iter_bursted_windows` instead.
    """
    windows = iter_trace_windows(path, format=format, options=options, report=report)
    first = next(windows)
    for extra in windows:
        raise TraceFormatError(
            str(path),
            int(extra.meta.get("first_line", 0)),
            "trace_id",
            f"the file holds several windows ({first.meta.get('trace_id')!r}, "
            f"{extra.meta.get('trace_id')!r}, ...); use iter_trace_windows to stream them",
        )
    return first


__all__ = [
    "FORMATS",
    "FORMAT_ALIASES",
    "MissingDependencyError",
    "ReadOptions",
    "ReadReport",
    "TooManyBadRowsError",
    "TraceFormat",
    "TraceFormatError",
    "TraceWarning",
    "UnsortedTraceError",
    "canonical_format",
    "dataset_block_tokens",
    "dataset_options",
    "detect_format",
    "format_of_row",
    "iter_bursted_windows",
    "iter_trace_windows",
    "read_art_chat",
    "read_hub_dataset",
    "read_mooncake",
    "read_qwen_bailian",
    "read_trace",
]
