"""Traces stored as datasets on a hub, read through the ``datasets`` library.

Any dataset whose rows follow one of the supported layouts (Mooncake, ART-Chat,
Qwen-Bailian, Bursted-ART) can be read; ``datasets`` is imported only when this
reader is called. The same call reads local files with the generic builders,
e.g. ``read_hub_dataset("json", data_files="trace.jsonl")`` or
``read_hub_dataset("parquet", data_files="rows.parquet")``, which downloads nothing.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from envs.sim.request import Workload
from envs.workloads.readers.base import (
    MissingDependencyError,
    ReadOptions,
    ReadReport,
    TraceFormatError,
    assemble_trace,
    assemble_windows,
)
from envs.workloads.readers.detect import FORMATS, canonical_format, format_of_row


def require_datasets() -> Any:
    """Import the ``datasets`` library or explain how to install it."""
    try:
        import datasets
    except ImportError as error:
        raise MissingDependencyError(
            "reading hub datasets needs the 'datasets' package: "
            "pip install 'btb-gym[data]' (or datasets)"
        ) from error
    return datasets


def read_hub_dataset(
    path: str,
    format: str = "auto",
    *,
    split: str = "train",
    config_name: str | None = None,
    data_files: str | Sequence[str] | Mapping[str, Any] | None = None,
    revision: str | None = None,
    streaming: bool = False,
    cache_dir: str | None = None,
    options: ReadOptions | None = None,
    report: ReadReport | None = None,
) -> Iterator[Workload]:
    """Read one split of a dataset; yields one workload, or one per window (Bursted-ART).

    ``path``, ``config_name``, ``data_files``, ``revision``, ``streaming`` and
    ``cache_dir`` go to ``datasets.load_dataset`` unchanged. ``format`` is a key of
    :data:`FORMATS`, an alias of one (``art_chat``) or "auto" (guessed from the first
    row's fields). Error messages
    name the dataset and split in place of a file and the row number as the line.
    """
    datasets = require_datasets()
    dataset = datasets.load_dataset(
        path,
        name=config_name,
        data_files=data_files,
        split=split,
        revision=revision,
        streaming=streaming,
        cache_dir=cache_dir,
    )
    label = f"{path}[{split}]"
    report = report if report is not None else ReadReport(source=label)
    rows: Iterator[tuple[int, Any]] = enumerate(iter(dataset), start=1)
    if format == "auto":
        head = list(itertools.islice(rows, 1))
        if not head:
            raise TraceFormatError(label, 0, None, "no rows")
        guessed = format_of_row(head[0][1])
        if guessed is None:
            raise TraceFormatError(
                label, 1, None, f"cannot tell the format from fields {sorted(head[0][1])}"
            )
        format = guessed
        rows = itertools.chain(head, rows)
    fmt = FORMATS[canonical_format(format)]
    if fmt.windowed:
        return assemble_windows(rows, fmt, path, options=options, report=report)
    return iter([assemble_trace(rows, fmt, path, options=options, report=report)])
