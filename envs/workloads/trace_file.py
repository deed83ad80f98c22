"""A trace file as a workload: its windows, its splits and where it came from.

:class:`TraceOptions` describes a trace workload once. The registry reads it
(``windows("trace", split="test", path=FILE)``), the Hydra schema extends it
(``experiments.config.WorkloadConf``) and the ``key=value`` commands take its
fields as ``workload.<field>=``.

Windows. A Bursted-ART file keeps its own windows (``trace_id``). Any other file
is cut into windows of ``window_s`` seconds of arrival time (default 300 s,
about the length of a Bursted-ART window), counted from ``start_s`` after the
first arrival. Each window is replayed on a fresh cluster from 0 s (caches
start cold); windows without arrivals are left out.

Splits. Windows are split by time: the last ``test_fraction`` of them are
``test``, the ``val_fraction`` before those ``val``, the rest ``train``, so no
window is in two splits. A Bursted-ART file whose rows all name their split
(train, val or test, as ``make_dataset`` writes them) keeps those splits unless
``file_splits`` is false.

Streaming. A read makes two passes over the file. The first checks every row and
keeps only each row's time and line (16 bytes a row); the second builds one
window's requests at a time. The first pass's plan is kept while the file's size
and modification time stay the same.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
from array import array
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from envs.sim.checks import check_range, is_number
from envs.workloads.readers import detect
from envs.workloads.readers.base import (
    TIME_UNITS,
    ReadOptions,
    ReadReport,
    RowSource,
    RowStream,
    TraceFormat,
    TraceFormatError,
    finish_report,
    make_request,
    time_units_per_s,
    window_again,
    window_units_per_s,
)
from envs.workloads.readers.hub import require_datasets
from envs.workloads.readers.sources import PARQUET_MAGIC, file_rows, first_bytes
from envs.workloads.request import BlockChainer, Request, Workload

TRACE_WORKLOAD = "trace"
"""The workload name that reads a file (``workload=trace workload.path=FILE``)."""
DEFAULT_WINDOW_S = 300.0
TRACE_SPLITS = ("train", "val", "test", "all")
HUB = "hub"


@dataclass
class TraceOptions:
    """A trace file and how to cut it into windows. Every field has a default but ``path``."""

    path: str = ""
    """The trace file: JSONL (gzip-compressed or not) or parquet."""
    format: str = "auto"
    """auto (told by the first row's fields), mooncake, art_chat, bursted, qwen_bailian,
    or hub: ``path`` is a dataset read through the ``datasets`` library (a local JSONL
    or parquet file, or a dataset name), its layout told by the first row."""
    block_tokens: int | None = None
    """Tokens a hash covers (None: the format's: Mooncake 512, ART-Chat and Bursted-ART
    256, Qwen-Bailian 16)."""
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
    skip_bad_rows: bool = False
    """Skip malformed rows (counted) instead of stopping at the first."""
    max_bad_fraction: float = 0.01
    """With skip_bad_rows: fail when more than this fraction of the rows is malformed."""
    strict_block_count: bool = True
    """Require len(hash_ids) to cover input_length at block_tokens a block."""
    file_splits: bool = True
    """Keep the splits a Bursted-ART file's rows name."""
    hub_split: str = "train"
    """With format=hub and a dataset name: the dataset's split to read."""

    def __post_init__(self) -> None:
        owner = "TraceOptions"
        if not isinstance(self.path, str):
            raise ValueError(f"{owner}.path must be a string, got {self.path!r}")
        if self.format not in ("auto", HUB):
            try:
                detect.canonical_format(self.format)
            except ValueError as error:
                raise ValueError(f"{owner}.format: {error}") from None
        if not is_number(self.window_s) or not 0 < self.window_s < math.inf:
            raise ValueError(f"{owner}.window_s must be a finite number > 0, got {self.window_s!r}")
        for name in ("test_fraction", "val_fraction"):
            check_range(f"{owner}.{name}", getattr(self, name), 0.0, 1.0)
        if self.test_fraction + self.val_fraction > 1.0:
            raise ValueError(
                f"{owner}.test_fraction + val_fraction must be <= 1, got "
                f"{self.test_fraction!r} + {self.val_fraction!r}"
            )
        if self.start_s is not None:
            check_range(f"{owner}.start_s", self.start_s, 0.0, finite=True)
        if self.end_s is not None:
            check_range(f"{owner}.end_s", self.end_s, 0.0)
            if not self.end_s > (self.start_s or 0.0):
                raise ValueError(
                    f"{owner}.end_s must be > start_s ({self.start_s or 0.0}), got {self.end_s!r}"
                )
        for name in ("skip_bad_rows", "strict_block_count", "file_splits"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(
                    f"{owner}.{name} must be true or false, got {getattr(self, name)!r}"
                )
        try:  # the reader's own checks (block_tokens, max_rows, ...), named as ours
            self.read_options()
        except ValueError as error:
            raise ValueError(str(error).replace("ReadOptions.", f"{owner}.", 1)) from None

    def read_options(self) -> ReadOptions:
        """The reader's options for this trace (rows are ordered here, by window)."""
        return ReadOptions(
            skip_bad_rows=self.skip_bad_rows,
            unsorted="sort",
            strict_block_count=self.strict_block_count,
            block_tokens=self.block_tokens,
            max_rows=self.max_rows,
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


def trace_label(path: str | os.PathLike[str]) -> str:
    """The workload label of a trace's results: ``trace:<file name>``."""
    return f"{TRACE_WORKLOAD}:{Path(path).name}"


@dataclass(frozen=True)
class TraceWindow:
    """One window of a trace file."""

    position: int
    """Its place among the file's (non-empty) windows."""
    key: str | int
    """The Bursted-ART ``trace_id``, or the index of its ``window_s`` slot."""
    trace_id: str
    split: str
    first_line: int
    rows: int
    start_s: float
    """Where the window starts, in seconds after the trace's first arrival (0 for Bursted-ART)."""


@dataclass(frozen=True)
class TracePlan:
    """What the first pass found: format, time unit, windows and splits."""

    options: TraceOptions
    format: str
    block_tokens: int
    units_per_s: float
    origin: float
    """The earliest timestamp, in the file's own unit (0 for Bursted-ART)."""
    windows: tuple[TraceWindow, ...]
    rows_read: int
    rows_skipped: int
    split_from: str
    """"file" (the rows' own split field) or "time"."""

    def split(self, name: str) -> list[TraceWindow]:
        if name not in TRACE_SPLITS:
            raise ValueError(f"split must be one of {', '.join(TRACE_SPLITS)}, got {name!r}")
        return [w for w in self.windows if name == "all" or w.split == name]

    def describe(self) -> dict[str, Any]:
        """JSON-ready summary for results files."""
        counts = {s: sum(w.split == s for w in self.windows) for s in TRACE_SPLITS[:-1]}
        unit = next((n for n, v in TIME_UNITS.items() if v == self.units_per_s), None)
        return {
            "format": self.format,
            "block_tokens": self.block_tokens,
            "time_unit": unit,
            "rows_read": self.rows_read,
            "rows_skipped": self.rows_skipped,
            "windows": counts,
            "split_from": self.split_from,
        }


def _check_path(options: TraceOptions) -> Path | None:
    """The trace file, checked; None for a hub dataset given by name."""
    path = options.path
    if not path:
        raise ValueError("TraceOptions.path is empty: a trace workload needs the file to read")
    file = Path(path)
    if file.is_dir():
        raise ValueError(f"TraceOptions.path={path!r} is a folder; give one trace file")
    if file.is_file():
        return file
    if options.format == HUB:
        return None
    raise ValueError(f"TraceOptions.path={path!r}: no such file")


def _hub_rows(options: TraceOptions) -> tuple[str, RowSource]:
    """A dataset's rows through the ``datasets`` library, streamed (a local JSONL or
    parquet file through its generic builder: nothing is downloaded)."""
    datasets = require_datasets()
    file = Path(options.path)
    if file.is_file():
        builder = "parquet" if first_bytes(file) == PARQUET_MAGIC else "json"
        dataset = datasets.load_dataset(
            builder, data_files=str(file), split="train", streaming=True
        )
        return str(file), enumerate(iter(dataset), start=1)
    dataset = datasets.load_dataset(options.path, split=options.hub_split, streaming=True)
    return f"{options.path}[{options.hub_split}]", enumerate(iter(dataset), start=1)


def _open(options: TraceOptions) -> tuple[str, TraceFormat, RowSource]:
    """The trace's name in messages, its format and its rows (read lazily)."""
    file = _check_path(options)
    if options.format == HUB:
        source, rows = _hub_rows(options)
        head = list(itertools.islice(rows, 1))
        if not head or isinstance(head[0][1], TraceFormatError):
            raise TraceFormatError(source, 1, None, "no rows to tell the layout from")
        name = detect.format_of_row(head[0][1])
        if name is None:
            raise TraceFormatError(
                source, 1, None, f"cannot tell the layout from fields {sorted(head[0][1])}"
            )
        return source, detect.FORMATS[name], itertools.chain(head, rows)
    assert file is not None
    name = (
        detect.detect_format(file)
        if options.format == "auto"
        else detect.canonical_format(options.format)
    )
    return str(file), detect.FORMATS[name], file_rows(file)


_PLANS: dict[tuple[Any, ...], TracePlan] = {}
_PLAN_CACHE_SIZE = 8


def plan_trace(options: TraceOptions) -> TracePlan:
    """The first pass over the file: every row checked, windows and splits found.

    Raises :class:`~envs.workloads.readers.TraceFormatError` (file, line, field) for
    a malformed row (unless skipped), too many skipped rows, an empty file or rows
    out of time order across windows."""
    file = _check_path(options)
    key: tuple[Any, ...] | None = None
    if file is not None:  # a dataset by name may change under the same name: never kept
        stat = file.stat()
        key = (str(file.resolve()), stat.st_size, stat.st_mtime_ns, *asdict(options).values())
        if key in _PLANS:
            return _PLANS[key]
    source, fmt, rows = _open(options)
    read = options.read_options()
    report = ReadReport(source=source)
    stream = RowStream(rows, fmt, read, report)
    if fmt.windowed:
        plan = _plan_windowed(options, fmt, stream, report, read)
    else:
        plan = _plan_timed(options, fmt, stream, report, read)
    if key is not None:
        if len(_PLANS) >= _PLAN_CACHE_SIZE:
            _PLANS.pop(next(iter(_PLANS)))
        _PLANS[key] = plan
    return plan


def _split_names(n: int, options: TraceOptions) -> list[str]:
    """Split of each of ``n`` windows in time order."""
    n_test = max(1, round(n * options.test_fraction)) if options.test_fraction > 0 else 0
    n_val = max(1, round(n * options.val_fraction)) if options.val_fraction > 0 else 0
    n_test = min(n_test, n)
    n_val = min(n_val, n - n_test)
    return ["train"] * (n - n_test - n_val) + ["val"] * n_val + ["test"] * n_test


def _plan_windowed(
    options: TraceOptions,
    fmt: TraceFormat,
    stream: RowStream,
    report: ReadReport,
    read: ReadOptions,
) -> TracePlan:
    for name in ("start_s", "end_s"):
        if getattr(options, name) is not None:
            raise ValueError(
                f"TraceOptions.{name} does not apply to a Bursted-ART file: its windows are its own"
            )
    found: list[list[Any]] = []  # [trace_id, split, first line, rows]
    seen: set[str] = set()
    for loc, parsed in stream:
        if not found or parsed.window != found[-1][0]:
            if parsed.window in seen:
                raise window_again(loc, parsed.window)
            seen.add(parsed.window)
            found.append([parsed.window, parsed.split, loc.line, 0])
        found[-1][3] += 1
    _check_rows(report, read)
    own = [entry[1] for entry in found]
    from_file = options.file_splits and all(s in ("train", "val", "test") for s in own)
    splits = own if from_file else _split_names(len(found), options)
    windows = tuple(
        TraceWindow(i, tid, tid, split, line, rows, 0.0)
        for i, ((tid, _, line, rows), split) in enumerate(zip(found, splits, strict=True))
    )
    return TracePlan(
        options,
        fmt.name,
        read.block_tokens or fmt.block_tokens,
        window_units_per_s(fmt, options.time_unit),
        0.0,
        windows,
        report.rows_read,
        report.rows_skipped,
        "file" if from_file else "time",
    )


def _check_rows(report: ReadReport, read: ReadOptions) -> None:
    finish_report(report, read, stacklevel=5)  # too many bad rows; or one warning if skipped
    if not report.rows_read:
        raise TraceFormatError(report.source, 0, None, "no usable rows")


def _slot(seconds: float, start_s: float, window_s: float) -> int:
    """The ``window_s`` slot an arrival ``seconds`` after the first falls in."""
    return math.floor((seconds - start_s) / window_s)


def _plan_timed(
    options: TraceOptions,
    fmt: TraceFormat,
    stream: RowStream,
    report: ReadReport,
    read: ReadOptions,
) -> TracePlan:
    times = array("d")
    lines = array("q")
    for loc, parsed in stream:
        times.append(parsed.time)
        lines.append(loc.line)
    _check_rows(report, read)
    origin = min(times)
    ups = time_units_per_s(fmt, options.time_unit, origin, max(times), report.source, 4)
    start_s = options.start_s or 0.0
    end_s = math.inf if options.end_s is None else options.end_s
    slots: dict[int, list[int]] = {}  # slot -> [first line, rows]
    highest = -1
    for raw, line in zip(times, lines, strict=True):
        seconds = (raw - origin) / ups
        if not start_s <= seconds < end_s:
            continue
        slot = _slot(seconds, start_s, options.window_s)
        if slot < highest:
            raise TraceFormatError(
                report.source,
                line,
                fmt.time_field,
                f"{raw!r} falls in the window starting at {start_s + slot * options.window_s:g} s, "
                f"before an earlier line's window; a trace is read one window at a time, so "
                f"its rows must be in time order (sort the file by {fmt.time_field})",
            )
        highest = slot
        entry = slots.setdefault(slot, [line, 0])
        entry[1] += 1
    if not slots:
        raise ValueError(
            f"{report.source}: no arrivals between TraceOptions.start_s={start_s:g} and "
            f"end_s={end_s:g} seconds after the first (the trace spans "
            f"{(max(times) - origin) / ups:g} s)"
        )
    stem = Path(options.path).stem
    splits = _split_names(len(slots), options)
    windows = tuple(
        TraceWindow(
            i, slot, f"{stem}-{slot:04d}", split, line, rows, start_s + slot * options.window_s
        )
        for i, ((slot, (line, rows)), split) in enumerate(zip(slots.items(), splits, strict=True))
    )
    return TracePlan(
        options,
        fmt.name,
        read.block_tokens or fmt.block_tokens,
        ups,
        origin,
        windows,
        report.rows_read,
        report.rows_skipped,
        "time",
    )


def trace_windows(
    options: TraceOptions, split: str = "test", limit: int | None = None
) -> Iterator[Workload]:
    """The windows of ``split`` ("train", "val", "test" or "all"), the first ``limit``
    of them (None: all), one :class:`Workload` at a time. The file is planned (and
    checked) when this is called, before the first window is asked for."""
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit!r}")
    plan = plan_trace(options)
    wanted = plan.split(split)[:limit]
    return _stream(plan, {w.key: w for w in wanted})


def _stream(plan: TracePlan, wanted: dict[str | int, TraceWindow]) -> Iterator[Workload]:
    options = plan.options
    if not wanted:
        return
    source, fmt, rows = _open(options)
    stream = RowStream(rows, fmt, options.read_options(), ReadReport(source=source))
    start_s = options.start_s or 0.0
    end_s = math.inf if options.end_s is None else options.end_s
    last = max(w.position for w in wanted.values())
    current: TraceWindow | None = None
    requests: list[Request] = []
    chainer = BlockChainer()
    for _, parsed in stream:
        if fmt.windowed:
            key: str | int = parsed.window
            arrival_s = parsed.time / plan.units_per_s
        else:
            seconds = (parsed.time - plan.origin) / plan.units_per_s
            if not start_s <= seconds < end_s:
                continue
            key = _slot(seconds, start_s, options.window_s)
            arrival_s = max(0.0, seconds - start_s - key * options.window_s)
        if current is None or key != current.key:
            if current is not None:
                yield _window(plan, current, requests)
                if current.position >= last:
                    return
            current = wanted.get(key)
            requests, chainer = [], BlockChainer()
        if current is not None:
            requests.append(make_request(parsed, arrival_s, chainer, ""))
    if current is not None:
        yield _window(plan, current, requests)


def _window(plan: TracePlan, window: TraceWindow, requests: list[Request]) -> Workload:
    stem = Path(plan.options.path).stem
    meta = {
        "workload": TRACE_WORKLOAD,
        "path": plan.options.path,
        "format": plan.format,
        "trace_id": window.trace_id,
        "split": window.split,
        "first_line": window.first_line,
        "start_s": window.start_s,
    }
    return Workload(
        name=f"{stem}/{window.trace_id}",
        block_tokens=plan.block_tokens,
        requests=requests,
        meta=meta,
    )


_STAMPS: dict[tuple[str, int, int], dict[str, Any]] = {}


def file_stamp(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Where a result's data came from: the file's path, name, size in bytes and the
    sha256 of its bytes (read in 1 MiB pieces, never whole)."""
    file = Path(path)
    stat = file.stat()
    key = (str(file.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _STAMPS:
        digest = hashlib.sha256()
        with file.open("rb") as handle:
            for piece in iter(lambda: handle.read(1 << 20), b""):
                digest.update(piece)
        _STAMPS[key] = {
            "path": str(path),
            "file": file.name,
            "bytes": stat.st_size,
            "sha256": digest.hexdigest(),
        }
    return dict(_STAMPS[key])


def provenance(options: TraceOptions) -> dict[str, Any]:
    """The file's stamp and what the plan found, for results.json and W&B (a hub
    dataset given by name has no bytes of its own here: its name and split, sha256 None)."""
    if Path(options.path).is_file():
        stamp = file_stamp(options.path)
    else:
        stamp = {"path": options.path, "split": options.hub_split, "bytes": None, "sha256": None}
    return {**stamp, **plan_trace(options).describe()}


def window_rows(window: Workload) -> list[dict[str, Any]]:
    """A trace window's requests as rows in the Bursted-ART layout (for datasets);
    ``hash_ids`` are the chained block ids, which read back to the same sharing."""
    meta = window.meta
    return [
        {
            "request_id": r.request_id,
            "trace_id": meta["trace_id"],
            "source": TRACE_WORKLOAD,
            "arrival_s": r.arrival_s,
            "input_length": r.input_tokens,
            "output_length": r.output_tokens,
            "hash_ids": list(r.blocks),
            "group_id": r.group_id,
            "split": meta["split"],
            "metadata": {"job_kind": r.job_kind},
            **({"tenant": r.tenant} if r.tenant else {}),
        }
        for r in window.requests
    ]
