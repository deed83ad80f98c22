"""The options of a trace workload: one dataclass for every command.

:class:`TraceOptions` is read by the registry (``windows("trace", path=FILE)``),
extended by the Hydra schema (``experiments.config.WorkloadConf``, so
``workload.path=FILE`` is typed there) and spelled ``workload.<field>=`` by the
``key=value`` commands. What the options do: :mod:`envs.workloads.trace_file`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from envs.sim.checks import check_int, check_range, is_number
from envs.sim.errors import ConfigError, echoed
from envs.workloads.readers import detect
from envs.workloads.readers.base import ReadOptions

TRACE_WORKLOAD = "trace"
"""The workload name that reads a file (``workload=trace workload.path=FILE``)."""
DEFAULT_WINDOW_S = 300.0
TRACE_SPLITS = ("train", "val", "test", "all")
HUB = "hub"


@dataclass
class TraceOptions:
    """A trace file and how to cut it into windows. Every field has a default but ``path``."""

    path: str = ""
    """The trace file: JSONL (compressed or not) or parquet."""
    format: str = "auto"
    """auto (told by the first row's fields), mooncake, art_chat, bursted, qwen_bailian,
    or hub: ``path`` is a dataset read through the ``datasets`` library (a local JSONL
    or parquet file, a dataset's folder, or a dataset name: its split's data files,
    each read as such a file is), its layout told by the first row."""
    block_tokens: int | None = None
    """Tokens a hash covers (None: the format's: Mooncake 512, ART-Chat and Bursted-ART
    256, Qwen-Bailian 16; for a split of a dataset ``make_dataset`` wrote, the one its
    ``dataset_info.json`` records)."""
    merge_blocks: int = 1
    """Merge each this many consecutive blocks of a prompt into one block of
    ``block_tokens`` x this many tokens (a coarser cache: prefixes are reused,
    copied and keyed in whole merged blocks; a prompt's partial last group is a
    block of its own). 1: the trace's own blocks."""
    time_unit: str = "auto"
    """Unit of the timestamps: s, ms, us, ns, or auto (the format's, unless that makes
    the trace span more than a month: then the unit that does not, with a warning)."""
    window_s: float = DEFAULT_WINDOW_S
    """Seconds of arrivals a window holds (not used for Bursted-ART, whose windows are its own)."""
    test_fraction: float = 0.25
    """The last this fraction of the windows are the test split (at least one if > 0)."""
    val_fraction: float = 0.0
    """This fraction of the windows, just before the test ones, are the val split."""
    start_s: float | None = None
    """Leave out arrivals earlier than this many seconds after the first one."""
    end_s: float | None = None
    """Leave out arrivals this many seconds or more after the first one."""
    max_rows: int | None = None
    """Read at most this many good rows."""
    max_context_tokens: int | None = None
    """Refuse a row whose input + output tokens exceed this (skip it with
    skip_bad_rows). None: the commands use the served model's context length
    (``ModelSpec.max_context_tokens``); read from Python, None means no limit."""
    skip_bad_rows: bool = False
    """Skip malformed rows (counted) instead of stopping at the first."""
    max_bad_fraction: float = 0.01
    """With skip_bad_rows: fail when more than this fraction of the rows is malformed."""
    strict_block_count: bool = True
    """Require len(hash_ids) to cover input_length at block_tokens a block."""
    file_splits: bool = True
    """Keep the splits a Bursted-ART file's rows name."""
    hub_split: str = "train"
    """With format=hub and a dataset name or folder: the dataset's split to read."""

    def __post_init__(self) -> None:
        owner = "TraceOptions"
        if not isinstance(self.path, str):
            raise ConfigError.about(f"{owner}.path", f"must be a string, got {echoed(self.path)}")
        if self.format not in ("auto", HUB):
            try:
                detect.canonical_format(self.format, also=(HUB,))
            except ValueError as error:
                raise ConfigError(f"{{format}}: {error}", ("format",), owner) from None
        if not is_number(self.window_s) or not 0 < self.window_s < math.inf:
            raise ConfigError.about(
                f"{owner}.window_s", f"must be a finite number > 0, got {echoed(self.window_s)}"
            )
        for name in ("test_fraction", "val_fraction"):
            check_range(f"{owner}.{name}", getattr(self, name), 0.0, 1.0)
        if self.test_fraction + self.val_fraction > 1.0:
            raise ConfigError(
                "{test_fraction} + {val_fraction} must be <= 1 (the shares of the windows "
                f"the test and val splits take), got {echoed(self.test_fraction)} + "
                f"{echoed(self.val_fraction)}",
                ("test_fraction", "val_fraction"),
                owner,
            )
        if self.start_s is not None:
            check_range(f"{owner}.start_s", self.start_s, 0.0, finite=True)
        if self.end_s is not None:
            check_range(f"{owner}.end_s", self.end_s, 0.0)
            if not self.end_s > (self.start_s or 0.0):
                raise ConfigError.about(
                    f"{owner}.end_s",
                    f"must be > start_s ({self.start_s or 0.0}), got {echoed(self.end_s)}",
                )
        for name in ("skip_bad_rows", "strict_block_count", "file_splits"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError.about(
                    f"{owner}.{name}", f"must be true or false, got {echoed(getattr(self, name))}"
                )
        check_int(f"{owner}.merge_blocks", self.merge_blocks, 1)
        if self.max_rows is not None:  # the reader takes 0; a workload needs a row
            check_int(f"{owner}.max_rows", self.max_rows, 1)
        try:  # the reader's own checks (block_tokens, max_rows, ...), named as ours
            self.read_options()
        except ConfigError as error:
            raise error.in_owner(owner) from None

    def read_options(self) -> ReadOptions:
        """The reader's options for this trace (rows are ordered here, by window: rows
        out of time order are sorted, with the reader's one warning)."""
        return ReadOptions(
            skip_bad_rows=self.skip_bad_rows,
            unsorted="warn",
            strict_block_count=self.strict_block_count,
            block_tokens=self.block_tokens,
            max_rows=self.max_rows,
            max_context_tokens=self.max_context_tokens,
            max_bad_fraction=self.max_bad_fraction,
            time_unit=self.time_unit,
        )


TRACE_FIELDS = tuple(f.name for f in fields(TraceOptions))


def trace_options(values: Mapping[str, Any]) -> TraceOptions:
    """:class:`TraceOptions` from a mapping of its fields (other keys are an error)."""
    unknown = sorted(set(values) - set(TRACE_FIELDS))
    if unknown:
        raise ValueError(
            f"workload {TRACE_WORKLOAD!r}: unknown option(s) {', '.join(unknown)} "
            f"(known: {', '.join(TRACE_FIELDS)})"
        )
    return TraceOptions(**values)


def changed_fields(values: Mapping[str, Any]) -> list[str]:
    """The trace fields of ``values`` set to something other than their defaults
    (for refusing ``workload.path=`` on a workload that is not a trace)."""
    defaults = asdict(TraceOptions())
    return [name for name in TRACE_FIELDS if name in values and values[name] != defaults[name]]


def trace_label(path: str | os.PathLike[str], merge_blocks: int = 1) -> str:
    """The workload label of a trace's results: ``trace:<file name>``, and
    ``[merge_blocks=K]`` after it when its blocks were merged."""
    merged = f"[merge_blocks={merge_blocks}]" if merge_blocks != 1 else ""
    return f"{TRACE_WORKLOAD}:{Path(path).name}{merged}"
