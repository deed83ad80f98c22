"""A trace file as a workload: its windows, its splits and where it came from.

:class:`TraceOptions` (:mod:`envs.workloads.trace_options`) describes a trace
workload once; :func:`trace_windows` reads its windows, :func:`provenance` says
where the data came from.

Windows. A Bursted-ART file keeps its own windows (``trace_id``). Any other file
is cut into windows of ``window_s`` seconds of arrival time (default 300 s,
about the length of a Bursted-ART window), counted from ``start_s`` after the
first arrival; a row on a boundary opens the later window (``_Slots``). Each
window is replayed on a fresh cluster from 0 s (caches start cold); windows
without arrivals are left out. Rows out of time order within a window are sorted
by arrival, with one warning (the reader's, naming the count and the first
line); a row in an earlier window than a row before it is an error, since
windows are read one at a time.

Splits. Windows are split by time: the last ``test_fraction`` of them are
``test``, the ``val_fraction`` before those ``val``, the rest ``train``, so no
window is in two splits. A Bursted-ART file whose rows all name their split
(train, val or test, as ``make_dataset`` writes them) keeps those splits unless
``file_splits`` is false, and is read at the block size its ``dataset_info.json``
records (a dataset made from a Mooncake trace keeps its 512-token blocks).

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
import statistics
import warnings
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

from envs.sim import native
from envs.sim.errors import ConfigError, caller_stacklevel, echoed, plural
from envs.sim.request import Request, Workload, merged_workload
from envs.workloads.readers import bursted, detect
from envs.workloads.readers.base import (
    AS_IS,
    NO_PLACES,
    PLAUSIBLE_SPAN_S,
    TIME_UNITS,
    ParsedRow,
    ReadOptions,
    ReadReport,
    RowPlaces,
    RowSource,
    RowStream,
    TraceFormat,
    TraceFormatError,
    TraceWarning,
    block_size_origin,
    check_bad_rows,
    decimal_places,
    finish_report,
    make_request,
    plain_number,
    rebased,
    span_text,
    time_units_per_s,
    window_again,
    window_units_per_s,
    written_number,
)
from envs.workloads.readers.hub import (
    HUB_OPTION_REMEDY,
    dataset_split_rows,
    hub_file_source,
    placed_source,
    require_datasets,
    saved_split,
    saved_to_disk,
)
from envs.workloads.readers.sources import (
    compressed_names,
    file_rows,
    trace_stem,
)
from envs.workloads.stats import PRIVATE_KEY_EFFECT, private_key_ends, private_key_note
from envs.workloads.trace_options import (
    HUB,
    TRACE_FIELDS,
    TRACE_SPLITS,
    TRACE_WORKLOAD,
    TraceOptions,
    changed_fields,
    trace_label,
    trace_options,
)

__all__ = [
    "TRACE_FIELDS",
    "TRACE_WORKLOAD",
    "TraceOptions",
    "TracePlan",
    "TraceWindow",
    "changed_fields",
    "file_stamp",
    "no_windows_error",
    "no_windows_hint",
    "plan_trace",
    "provenance",
    "trace_label",
    "trace_options",
    "trace_windows",
    "window_rows",
]


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
    """Tokens a hash of the file covers (the windows' blocks: :attr:`window_block_tokens`)."""
    units_per_s: float
    origin: float
    """The earliest timestamp, in the file's own unit (0 for Bursted-ART)."""
    windows: tuple[TraceWindow, ...]
    rows_read: int
    rows_skipped: int
    split_from: str
    """"file" (the rows' own split field) or "time"."""
    file_stat: tuple[int, int] | None = None
    """The file's size and mtime (ns) when it was planned (None: a dataset by name)."""

    @property
    def window_block_tokens(self) -> int:
        """Tokens a block of the windows covers: the file's, times ``merge_blocks``."""
        return self.block_tokens * self.options.merge_blocks

    def split(self, name: str) -> list[TraceWindow]:
        if name not in TRACE_SPLITS:
            raise ValueError(f"split must be one of {', '.join(TRACE_SPLITS)}, got {echoed(name)}")
        return [w for w in self.windows if name == "all" or w.split == name]

    def describe(self) -> dict[str, Any]:
        """JSON-ready summary for results files."""
        counts = {s: sum(w.split == s for w in self.windows) for s in TRACE_SPLITS[:-1]}
        unit = next((n for n, v in TIME_UNITS.items() if v == self.units_per_s), None)
        return {
            "format": self.format,
            "block_tokens": self.window_block_tokens,  # the windows'
            "file_block_tokens": self.block_tokens,
            "merge_blocks": self.options.merge_blocks,
            "time_unit": unit,
            "rows_read": self.rows_read,
            "rows_skipped": self.rows_skipped,
            "windows": counts,
            "split_from": self.split_from,
        }


def check_trace_path(options: TraceOptions) -> Path | None:
    """The trace file, checked without reading it; None for a hub dataset given by name
    or by its folder."""
    path = options.path
    if not path:
        raise ConfigError.about(
            "TraceOptions.path", "is empty: a trace workload needs the file to read"
        )
    file = Path(path)
    if file.is_dir():
        if options.format == HUB:
            return None  # a dataset's folder, which the datasets library reads as a name
        raise ConfigError(
            f"{{path}}={path!r} is a folder; give one trace file (or {{format}}=hub to read "
            "a dataset's folder through the datasets library)",
            ("path", "format"),
            "TraceOptions",
        )
    if file.is_file():
        return file
    if file.exists():  # a device, a FIFO, a shell's <(...): read once, gone
        raise ConfigError(
            f"{{path}}={path!r} is not a regular file; a run reads a trace more than "
            "once, so save it to a file first",
            ("path",),
            "TraceOptions",
        )
    if options.format == HUB:
        return None
    raise ConfigError(f"{{path}}={path!r}: no such file", ("path",), "TraceOptions")


HUB_FOLDER_REMEDY = ("given alone as {path}, it reads without {format}=hub", ("path", "format"))
"""What an error about a data file of a dataset's folder or name read with
``format=hub`` says to do when the ``datasets`` library reads it otherwise than the
file reader (:data:`~envs.workloads.readers.hub.HUB_OPTION_REMEDY`'s twin)."""


def _hub_rows(options: TraceOptions) -> tuple[str, RowSource, RowPlaces]:
    """A dataset's rows through the ``datasets`` library, streamed (a local JSONL or
    parquet file through its generic builder: nothing is downloaded), the name its
    messages give it and how an error naming that name and a line is said
    (a :class:`RowPlaces`: a split's, :class:`~envs.workloads.readers.hub.SplitRows`,
    a JSON array's, :class:`~envs.workloads.readers.hub.DocumentRows`). A local file the
    library cannot read is a :class:`TraceFormatError` naming it (and its line where
    known), and the library's own log lines about it are held back.

    A dataset's folder or name is read as its split's data files, each as a file
    given alone is (:func:`~envs.workloads.readers.hub._split_files`): on the files'
    own values, by the file reader's checks, which the library's rows would not see
    (it converts some: a ``"512"`` among numbers to 512, ids past 64 bits to floats).
    A folder ``save_to_disk`` wrote is the library's own Arrow files, whose values
    are theirs."""
    datasets = require_datasets()
    file = Path(options.path)
    if file.is_file():
        return str(file), *placed_source(hub_file_source(datasets, file, HUB_OPTION_REMEDY))
    if saved_to_disk(file):
        rows = enumerate(saved_split(datasets, file, options.hub_split), start=1)
        return f"{options.path}[{options.hub_split}]", rows, AS_IS
    return dataset_split_rows(datasets, options.path, options.hub_split, HUB_FOLDER_REMEDY)


def _open(options: TraceOptions) -> tuple[str, TraceFormat, RowSource, str, RowPlaces]:
    """The trace's name in messages, its format, its rows (read lazily), what told the
    format when it was guessed ("" when named: :func:`detect.told_by`) and how an
    error or warning naming the trace and a line says it (:class:`RowPlaces`)."""
    file = check_trace_path(options)
    if options.format == HUB:
        source, rows, place = _hub_rows(options)
        head = list(itertools.islice(rows, 1))
        if not head:
            raise TraceFormatError(source, 0, None, "no rows to tell the layout from")
        line, first = head[0]
        if isinstance(first, TraceFormatError):
            place.raise_placed(first)  # a local file's first row, which its reader refuses
        told = detect.told_by(first)
        if told is None:
            raise place.placed(
                TraceFormatError(
                    source, line, None, f"cannot tell the layout from fields {sorted(first)}"
                )
            )
        return source, detect.FORMATS[told[0]], itertools.chain(head, rows), told[1], place
    assert file is not None
    name, told_by = detect.file_format_told(file, options.format)
    return str(file), detect.FORMATS[name], file_rows(file), told_by, AS_IS


def _block_origin(options: TraceOptions, read: ReadOptions, fmt: TraceFormat, told_by: str) -> str:
    """Where the windows' block size comes from, as a block-count error says it: the
    option given, the dataset's record of a ``make_dataset`` split, or the format's
    (and what told the format, when it was guessed)."""
    given = options.block_tokens is not None
    recorded = read.block_tokens is not None and not given  # bursted.dataset_options read it
    return block_size_origin(fmt, given, bursted.DATASET_INFO if recorded else "", told_by)


def _read_options(options: TraceOptions, fmt: TraceFormat) -> ReadOptions:
    """The reader's options for the file: a split of a dataset ``make_dataset`` wrote
    is read at the block size the dataset records, unless ``block_tokens`` is given
    (:func:`~envs.workloads.readers.bursted.dataset_options`); so is the split
    ``hub_split`` of such a dataset's folder read with ``format=hub``."""
    read = options.read_options()
    return bursted.dataset_options(split_file(options), read) if fmt.windowed else read


def split_file(options: TraceOptions) -> str:
    """The file a trace workload reads: ``path``, or for a folder read with
    ``format=hub``, the file of its split ``hub_split`` as ``make_dataset`` names it
    (``test.jsonl``, or compressed: ``test.jsonl.gz``, ``test.jsonl.xz``, ...) when the
    folder has one."""
    folder = Path(options.path)
    if options.format == HUB and folder.is_dir():
        for name in compressed_names(f"{options.hub_split}.jsonl"):
            if (folder / name).is_file():
                return str(folder / name)
    return options.path


_PLANS: dict[tuple[Any, ...], TracePlan] = {}
_PLAN_CACHE_SIZE = 8


def plan_trace(options: TraceOptions) -> TracePlan:
    """The first pass over the file: every row checked, windows and splits found.

    Raises :class:`~envs.workloads.readers.TraceFormatError` (file, line, field) for
    a malformed row (unless skipped), too many skipped rows, an empty file or rows
    out of time order across windows."""
    file = check_trace_path(options)
    key: tuple[Any, ...] | None = None
    if file is not None:  # a dataset by name may change under the same name: never kept
        stat = file.stat()
        key = (str(file.resolve()), stat.st_size, stat.st_mtime_ns, *asdict(options).values())
        if key in _PLANS:
            return _PLANS[key]
    source, fmt, rows, told_by, place = _open(options)
    if options.hub_split != TraceOptions.hub_split and (options.format != HUB or file):
        warnings.warn(
            TraceWarning(
                f"{{hub_split}}={options.hub_split!r} does nothing: it names the split "
                "of a dataset read with {format}=hub"
                + (" by its name or folder; a file has one" if options.format == HUB else ""),
                ("hub_split", "format"),
            ),
            stacklevel=caller_stacklevel(),
        )
    saved = Path(options.path)
    if (
        options.format == HUB
        and options.hub_split != TraceOptions.hub_split
        and saved_to_disk(saved)
        and not (saved / "dataset_dict.json").is_file()
    ):
        warnings.warn(
            TraceWarning(
                f"{{hub_split}}={options.hub_split!r} does nothing: the dataset saved in "
                f"{saved} is one split, read whole",
                ("hub_split",),
            ),
            stacklevel=caller_stacklevel(),
        )
    read = _read_options(options, fmt)
    report = ReadReport(source=source, places=place)
    stream = RowStream(rows, fmt, read, report, _block_origin(options, read, fmt, told_by))
    try:
        if fmt.windowed:
            plan = _plan_windowed(options, fmt, stream, report, read)
        else:
            plan = _plan_timed(options, fmt, stream, report, read)
    except TraceFormatError as error:
        place.raise_placed(error)
    if key is not None:
        plan = replace(plan, file_stat=(key[1], key[2]))
        if len(_PLANS) >= _PLAN_CACHE_SIZE:
            _PLANS.pop(next(iter(_PLANS)))
        _PLANS[key] = plan
    return plan


def _check_unchanged(plan: TracePlan) -> None:
    """The file still is the one ``plan`` was made from (same size and mtime): a
    run reads a trace more than once, and a file changed meanwhile would give it
    windows of both versions."""
    if plan.file_stat is None:
        return
    path = plan.options.path
    try:
        stat = os.stat(path)
    except OSError:
        now = "it is gone"
    else:
        if (stat.st_size, stat.st_mtime_ns) == plan.file_stat:
            return
        size = plan.file_stat[0]
        now = (
            f"{size:,} bytes, now {stat.st_size:,}"
            if stat.st_size != size
            else "its modification time changed"
        )
    raise ConfigError(
        f"{{path}}={path!r} changed while this run read it ({now}): a run reads a trace "
        "more than once, so keep the file as it is until the run ends (or run on a copy)",
        ("path",),
        "TraceOptions",
    )


def _share(n: int, fraction: float) -> int:
    """``fraction`` of ``n`` windows, rounded half up (10 x 0.25 is 3, as a reader
    expects; Python's round gives 2), at least one if ``fraction`` is above 0. The
    fraction is taken as written (``Fraction("0.35")``), so 90 x 0.35 is 31.5 and
    rounds to 32, where the float product is 31.499..."""
    if fraction <= 0:
        return 0
    return max(1, math.floor(Fraction(str(fraction)) * n + Fraction(1, 2)))


def _split_names(n: int, options: TraceOptions) -> list[str]:
    """Split of each of ``n`` windows in time order."""
    n_test = _share(n, options.test_fraction)
    n_val = _share(n, options.val_fraction)
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
    changed = changed_fields(asdict(options))
    for name in ("start_s", "end_s"):
        if name in changed:
            raise ConfigError.about(
                f"TraceOptions.{name}",
                "does not apply to a Bursted-ART file: its windows are its own",
            )
    if "window_s" in changed:
        _does_nothing(
            "window_s", options.window_s, f"{report.source}'s windows are its own (trace_id)"
        )
    found: list[list[Any]] = []  # [trace_id, split, first line, rows]
    seen: set[str] = set()
    last = -math.inf  # the latest arrival so far in the window
    for loc, parsed in stream:
        if not found or parsed.window != found[-1][0]:
            if parsed.window in seen:
                raise window_again(loc, parsed.window)
            seen.add(parsed.window)
            found.append([parsed.window, parsed.split, loc.line, 0])
            last = -math.inf
        elif options.file_splits and parsed.split != found[-1][1]:
            raise TraceFormatError(
                loc.path,
                loc.line,
                "split",
                f"{parsed.split!r}, but window {parsed.window!r} began as {found[-1][1]!r} "
                f"(line {found[-1][2]}): every row of a window names the same split",
            )
        found[-1][3] += 1
        if parsed.time < last:  # sorted when its window is built (_finish says so)
            stream.note_out_of_order(loc.line, parsed.time, last)
        last = max(last, parsed.time)
    _check_rows(report, read)
    from_file = options.file_splits and _file_splits(report.source, found, options, changed)
    splits = [entry[1] for entry in found] if from_file else _split_names(len(found), options)
    windows = tuple(
        TraceWindow(i, tid, tid, split, line, rows, 0.0)
        for i, ((tid, _, line, rows), split) in enumerate(zip(found, splits, strict=True))
    )
    if _stops_inside(stream, windows[-1], lambda row: row.window):
        _warn_cut_window(report.source, stream, windows[-1], options, None)
    _finish(report, read)
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


def _file_splits(
    source: str, found: list[list[Any]], options: TraceOptions, changed: list[str]
) -> bool:
    """Whether a Bursted-ART file's windows are split as its rows say: each names
    train, val or test (True), or none does (False: split by time). A split of
    another name, or windows of which only some name one, is an error;
    test_fraction and val_fraction set beside splits the file names (among the
    ``changed`` options) are warned of."""
    named = [(tid, split, line) for tid, split, line, _ in found if split]
    for tid, split, line in named:
        if split not in TRACE_SPLITS[:-1]:
            raise TraceFormatError(
                source,
                line,
                "split",
                f"{echoed(split)} (window {tid!r}) is not a split: train, val or test "
                "({file_splits}=false splits the windows by time instead)",
                ("file_splits",),
            )
    if not named:
        return False
    if len(named) < len(found):
        tid, _, line, _ = next(entry for entry in found if not entry[1])
        raise TraceFormatError(
            source,
            line,
            "split",
            f"window {tid!r} names no split, while window {named[0][0]!r} (line "
            f"{named[0][2]}) names {named[0][1]!r}: name one on every window or on none "
            "({file_splits}=false splits the windows by time instead)",
            ("file_splits",),
        )
    for name in ("test_fraction", "val_fraction"):
        if name in changed:
            _does_nothing(
                name,
                getattr(options, name),
                f"{source}'s rows name their splits ({{file_splits}}=false splits its "
                "windows by test_fraction and val_fraction)",
            )
    return True


def _does_nothing(name: str, value: Any, why: str) -> None:
    """The one-line warning for a trace option a Bursted-ART file leaves unused
    (``why`` may name ``{file_splits}``)."""
    warnings.warn(
        TraceWarning(
            f"{{{name}}}={written_number(value)} does nothing: {why}", (name, "file_splits")
        ),
        stacklevel=caller_stacklevel(),
    )


def _check_rows(report: ReadReport, read: ReadOptions) -> None:
    """Too many bad rows, or none good, is an error (the warnings about rows skipped
    or out of time order wait for :func:`_finish`, once the plan stands)."""
    check_bad_rows(report, read)
    if not report.rows_read:
        raise TraceFormatError(report.source, 0, None, "no usable rows")


def _finish(report: ReadReport, read: ReadOptions) -> None:
    """The read's warnings, to the caller of :func:`plan_trace`: one if rows were
    skipped, one if rows were out of time order (sorted when a window is built)."""
    finish_report(report, read)


def _unit_places(seconds: float, units_per_s: float) -> int:
    """The decimal places of ``seconds`` (as written) in a trace unit of
    ``units_per_s`` a second: 0.117 s has 3, or 0 in milliseconds;
    :data:`NO_PLACES` for a number in exponent form or a unit that is no power of
    ten (the binary product's places are then taken)."""
    places = decimal_places(seconds)
    shift = round(math.log10(units_per_s))
    if places >= NO_PLACES or 10.0**shift != units_per_s:
        return NO_PLACES
    return max(places - shift, 0)


class _Slots:
    """The one rule that puts a row of absolute times in its ``window_s`` window and
    says where in it the row arrives (the plan's windows and the windows built from
    them both ask it): the arrival is taken from the window's opening in the
    trace's own unit (:func:`~envs.workloads.readers.base.rebased`: integer
    milliseconds exact, decimal seconds as written), and the window is the one that
    puts it at ``0 <= arrival_s < window_s``. A first guess from the binary
    difference of times can be a window early on a boundary (1060.1 s, 60 s after
    1000.1 s, is 59.999999999999886 s after it in binary): the arrival then says
    ``window_s``, and the row opens the next window instead. ``start_s`` and
    ``end_s`` are boundaries the same way: a row at them is at, not before, them."""

    def __init__(
        self, origin: float, units_per_s: float, start_s: float, end_s: float, window_s: float
    ) -> None:
        self.origin = origin
        self.units_per_s = units_per_s
        self.start_s = start_s
        self.end_s = end_s
        self.window_s = window_s
        self.last_arrival = math.nextafter(window_s, 0.0)
        self.doubt = 1e-12 * (abs(origin) / units_per_s + abs(start_s) + window_s)
        """How far a binary guess is believed from the rounded arrival, less the
        part that grows with the time itself (see :meth:`slot`)."""
        self._window_places = max(
            _unit_places(start_s, units_per_s), _unit_places(window_s, units_per_s)
        )
        """The places of a window's opening, ``start_s`` plus whole windows, in the
        trace's unit (as the options were written)."""
        self._slot = 0
        self._opening = self.opening(start_s, self._window_places)

    def opening(self, offset_s: float, written: int) -> tuple[float, int]:
        """The trace's time ``offset_s`` seconds after the first arrival, as the
        decimal it is written as (a float), and its decimal places. ``written``:
        the offset's places in the trace's unit as the options were written, not
        the binary sum's (1000.1 + 600 x 0.1 opens at 1060.1, not at
        1060.1000000000001: 600 x 0.1 is 60.00000000000001)."""
        offset = offset_s * self.units_per_s
        if written < NO_PLACES:
            offset = round(offset, written)
        places = max(decimal_places(self.origin), decimal_places(offset))
        opens = self.origin + offset
        if places < NO_PLACES:  # the decimal the window opens at, as a float
            opens = round(opens, places)
        return opens, places

    def since(self, time: float, slot: int) -> float:
        """Seconds from the opening of window ``slot`` to ``time``."""
        if slot != self._slot:
            self._slot = slot
            self._opening = self.opening(self.start_s + slot * self.window_s, self._window_places)
        opens, places = self._opening
        return rebased(time, opens, places, self.units_per_s)

    def place(self, time: float) -> tuple[int, float] | None:
        """The window a row at ``time`` (the trace's unit) falls in and its arrival
        in it, ``0 <= arrival_s < window_s``; None for a row the options leave out
        (before ``start_s``, at or after ``end_s``)."""
        window_s = self.window_s
        seconds = (time - self.origin) / self.units_per_s  # a first guess, in binary
        slot = math.floor((seconds - self.start_s) / window_s)
        arrival_s = self.since(time, slot)
        if not 0.0 <= arrival_s < window_s:
            if arrival_s >= window_s:  # on the boundary: the later window
                slot += 1
                arrival_s = self.since(time, slot)
            elif (before := self.since(time, slot - 1)) < window_s:
                slot, arrival_s = slot - 1, before
            # (where a float's doubt puts it before the later window, it is on its boundary)
            arrival_s = min(max(arrival_s, 0.0), self.last_arrival)
        if slot < 0 or (seconds >= self.end_s - window_s and self._ended(time)):
            return None
        return slot, arrival_s

    def _ended(self, time: float) -> bool:
        """Whether ``time`` is at or after ``end_s`` (a boundary as a window's is)."""
        if self.end_s == math.inf:
            return False
        opens, places = self.opening(self.end_s, _unit_places(self.end_s, self.units_per_s))
        return rebased(time, opens, places, self.units_per_s) >= 0.0

    def slot(self, time: float) -> int | None:
        """The window of :meth:`place`, or None; where the binary guess lies far
        from any boundary (more than a millionth of a millionth of the numbers
        involved: the rounded arrival is a few of their floats' spacings from it),
        the guess, without rounding an arrival the plan does not keep."""
        seconds = (time - self.origin) / self.units_per_s
        into = seconds - self.start_s
        slot = math.floor(into / self.window_s)
        position = into - slot * self.window_s
        doubt = self.doubt + 1e-12 * abs(seconds)
        if slot >= 0 and doubt < position < self.window_s - doubt:
            if seconds < self.end_s - doubt:
                return slot
            if seconds > self.end_s + doubt:
                return None
        placed = self.place(time)
        return None if placed is None else placed[0]


def _plan_timed(
    options: TraceOptions,
    fmt: TraceFormat,
    stream: RowStream,
    report: ReadReport,
    read: ReadOptions,
) -> TracePlan:
    times = array("d")
    lines = array("q")
    last = -math.inf  # the latest arrival so far
    for loc, parsed in stream:
        if parsed.time < last:  # sorted when its window is built (_finish says so)
            stream.note_out_of_order(loc.line, parsed.time, last)
        last = max(last, parsed.time)
        times.append(parsed.time)
        lines.append(loc.line)
    _check_rows(report, read)
    origin = min(times)
    ups = time_units_per_s(fmt, options.time_unit, origin, last, report.source)
    start_s = options.start_s or 0.0
    end_s = math.inf if options.end_s is None else options.end_s
    slots: dict[int, list[int]] = {}  # slot -> [first line, rows]
    highest = -1
    ahead = (0, 0.0)  # the line and value that opened the window ``highest``
    latest = -math.inf  # the last arrival kept, seconds after the first
    earliest = math.inf  # the first arrival kept in the window ``highest``
    slotted = _Slots(origin, ups, start_s, end_s, options.window_s)
    for raw, line in zip(times, lines, strict=True):
        seconds = (raw - origin) / ups
        slot = slotted.slot(raw)
        if slot is None:
            continue
        latest = max(latest, seconds)
        if slot < highest:
            at = (ahead[1] - origin) / ups
            opens = start_s + slot * options.window_s
            opened = start_s + highest * options.window_s
            raise TraceFormatError(
                report.source,
                line,
                fmt.time_field,
                f"{plain_number(raw)} ({plain_number(seconds)} s after the earliest "
                f"arrival) falls in the window starting at {plain_number(opens)} s, before "
                f"line {ahead[0]}'s ({plain_number(ahead[1])}, {plain_number(at)} s, in the "
                f"window starting at {plain_number(opened)} s); a trace is read one window "
                f"at a time, so its rows must be in time order (sort the file by "
                f"{fmt.time_field}, or drop line {ahead[0]} if it is a glitch)",
            )
        if slot > highest:
            highest, ahead, earliest = slot, (line, raw), seconds
        earliest = min(earliest, seconds) if slot == highest else earliest
        entry = slots.setdefault(slot, [line, 0])
        entry[1] += 1
    if not slots:
        raise ConfigError(
            f"{report.source}: no arrivals between {{start_s}}={written_number(start_s)} and "
            f"{{end_s}}={written_number(end_s)} seconds after the first (the trace spans "
            f"{plain_number((last - origin) / ups)} s)",
            ("start_s", "end_s"),
            "TraceOptions",
        )
    stem = trace_stem(options.path)
    splits = _split_names(len(slots), options)
    windows = tuple(
        TraceWindow(
            i, slot, f"{stem}-{slot:04d}", split, line, rows, start_s + slot * options.window_s
        )
        for i, ((slot, (line, rows)), split) in enumerate(zip(slots.items(), splits, strict=True))
    )

    def key_of(row: ParsedRow) -> int | None:  # its window, None where none keeps it
        return slotted.slot(row.time)

    if _stops_inside(stream, windows[-1], key_of):
        _warn_cut_window(report.source, stream, windows[-1], options, latest)
    else:
        _warn_short_last(report.source, windows, latest - earliest, options)
    if options.time_unit == "auto":
        span_s = (last - origin) / ups
        _warn_implausible_rate(
            report.source, fmt, times, lines, span_s, ups, options.window_s, report.places
        )
    _finish(report, read)
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


DENSE_ROWS_PER_S = 1_000.0
"""Under ``time_unit="auto"``, a trace of at least :data:`DENSE_MIN_ROWS` rows
arriving faster than this on average (over its whole span) is warned of: a trace in
seconds read as milliseconds squeezes an hour into 3.6 s."""
DENSE_MIN_ROWS = 100
"""The fewest rows :data:`DENSE_ROWS_PER_S` and :data:`FRACTIONAL_SHARE` are judged
on (a handful of rows at one instant is no rate)."""
FRACTIONAL_SHARE = 0.5
"""Under ``time_unit="auto"``, a trace read in a unit finer than seconds (Mooncake's
milliseconds) more than this share of whose timestamps have a fraction of that unit
(``2.544``) is warned of, when read as seconds it would still span no more than
:data:`~envs.workloads.readers.base.PLAUSIBLE_SPAN_S`: a seconds trace of a low rate
read as milliseconds, which no rate catches (real Mooncake traces count whole
milliseconds)."""


def _warn_implausible_rate(
    source: str,
    fmt: TraceFormat,
    times: Sequence[float],
    lines: Sequence[int],
    span_s: float,
    ups: float,
    window_s: float,
    places: RowPlaces = AS_IS,
) -> None:
    """Warn when the unit the timestamps ``times`` (of the rows on ``lines``, named as
    ``places`` names them) were
    read in (the format's, under ``time_unit="auto"``) gives an arrival rate no
    cluster replay means, and another unit would not: the rows arrive one per window
    or more apart on average (a millisecond trace read as seconds: most windows hold
    one row or none), or faster than :data:`DENSE_ROWS_PER_S` (a seconds trace read
    as milliseconds). The month-long span :func:`time_units_per_s` catches is the
    extreme of the first; these catch a factor of a thousand either way. A seconds
    trace of a low rate read as milliseconds is told by its fractions of a
    millisecond (:data:`FRACTIONAL_SHARE`), unless read in seconds its rows would
    arrive a window or more apart (milliseconds written with microseconds)."""
    rows = len(times)
    if rows < 2:
        return
    units = sorted(TIME_UNITS.items(), key=lambda item: item[1])
    own = next((name for name, value in units if value == ups), None)
    if own is None:
        return
    at = [name for name, _ in units].index(own)
    gap_s = span_s / (rows - 1)
    if gap_s > window_s and at + 1 < len(units):
        finer = units[at + 1][0]
        says = (
            f"one every {gap_s:,.0f} s on average, more than a "
            f"{{window_s}}={written_number(window_s)} s window: most windows hold one row "
            f"or none; if {fmt.time_field} counts {finer}, set {{time_unit}}={finer}"
        )
    elif rows >= DENSE_MIN_ROWS and span_s > 0 and (rows - 1) / span_s > DENSE_ROWS_PER_S:
        # (rows all at one instant, an offline batch, have no rate a unit would change)
        if at == 0:
            return
        coarser = units[at - 1][0]
        says = (
            f"{(rows - 1) / span_s:,.0f} a second on average; if {fmt.time_field} counts "
            f"{coarser}, set {{time_unit}}={coarser}"
        )
    elif (
        rows >= DENSE_MIN_ROWS
        and at > 0
        and span_s * ups <= PLAUSIBLE_SPAN_S
        and gap_s * ups / units[at - 1][1] <= window_s  # (read coarser, no rows windows apart)
    ):
        fractional = [i for i, time in enumerate(times) if not time.is_integer()]
        if len(fractional) <= FRACTIONAL_SHARE * rows:
            return
        first = fractional[0]
        says = (
            f"{len(fractional):,} of them have a fraction of a {own} ({times[first]!r} on "
            f"{places.line(lines[first], ',')}), as seconds written with decimals do; if "
            f"{fmt.time_field} counts s, set {{time_unit}}=s"
        )
    else:
        return
    warnings.warn(
        TraceWarning(
            f"{source}: {rows:,} rows in {span_text(span_s)} read as {own}: {says}",
            ("window_s", "time_unit") if "window_s" in says else ("time_unit",),
        ),
        stacklevel=caller_stacklevel(),
    )


def _stops_inside(
    stream: RowStream, last: TraceWindow, key_of: Callable[[ParsedRow], str | int | None]
) -> bool:
    """Whether ``max_rows`` stopped ``stream`` inside its ``last`` window: the row it
    stopped at (unread) belongs to that window by ``key_of`` (or is malformed, so
    cannot say). Not when it opens another window, or lies where the window options
    leave it out: then the windows read are whole."""
    if stream.stopped_at is None:
        return False
    row = stream.next_row()
    return row is None or key_of(row) == last.key


def _warn_cut_window(
    source: str,
    stream: RowStream,
    last: TraceWindow,
    options: TraceOptions,
    latest_s: float | None,
) -> None:
    """Warn that ``max_rows`` stopped the read inside the ``last`` window
    (:func:`_stops_inside`): it holds only its first rows (those arriving up to
    ``latest_s`` seconds after the first arrival; None: a Bursted-ART window), and
    as a test window (the last ones are) would be measured as if it were whole."""
    assert stream.stopped_at is not None
    if latest_s is None:
        held = f"holds its first {plural(last.rows, 'row')}"
        remedy = "raise {max_rows} to read it whole"
    else:
        held = (
            f"holds {plural(last.rows, 'row')}, arriving in its first "
            f"{latest_s - last.start_s:.1f} s of {written_number(options.window_s)}"
        )
        remedy = "raise {max_rows} to read it whole" + (
            f", or set {{end_s}}={_opening_text(options, last)} to leave it out"
            if last.position
            else ""
        )
    warnings.warn(
        TraceWarning(
            f"{source}: {{max_rows}}={options.max_rows:,} stops the read at "
            f"{stream.report.places.line(stream.stopped_at[0], ',')}, inside the last "
            f"window ({last.trace_id}, a {last.split} window): it {held} ({remedy})",
            ("max_rows", "end_s"),
        ),
        stacklevel=caller_stacklevel(),
    )


def _opening_text(options: TraceOptions, window: TraceWindow) -> str:
    """Where a window of ``window_s`` slots opens, in seconds after the first arrival,
    as an ``end_s`` a message offers: ``start_s`` plus whole windows worked in
    decimal as the options were written (0.1 + 3 x 0.2 is 0.7, where the binary sum
    is 0.7000000000000001), never rounded (``:g`` wrote 1234567.5 as 1.23457e+06)."""
    assert isinstance(window.key, int)
    start = Decimal(repr(float(options.start_s or 0.0)))
    return written_number(start + window.key * Decimal(repr(float(options.window_s))))


SHORT_LAST_WINDOW = 0.1
"""A last window whose arrivals span less than this share of ``window_s`` and that
holds fewer rows than this share of the other windows' median is named in a
warning: the trace's leftover end (or a stray row past it), not a window like the
others."""


def _warn_short_last(
    source: str, windows: tuple[TraceWindow, ...], span_s: float, options: TraceOptions
) -> None:
    """Warn when the last window holds a sliver of the trace (its leftover end, or
    stray rows after it; its arrivals span ``span_s``): as a test window (the last
    ones are) it would measure a handful of requests. Not when ``end_s`` cuts that
    window (the user's own cut), nor for a quiet window whose arrivals span most of it."""
    window_s = options.window_s
    if len(windows) < 2:
        return
    last = windows[-1]
    if options.end_s is not None and options.end_s < last.start_s + window_s:
        return
    median = statistics.median(w.rows for w in windows[:-1])
    if span_s >= SHORT_LAST_WINDOW * window_s or last.rows >= SHORT_LAST_WINDOW * median:
        return
    warnings.warn(
        TraceWarning(
            f"{source}: the last window ({last.trace_id}, a {last.split} window) holds "
            f"{last.rows} row{'' if last.rows == 1 else 's'} against a median of "
            f"{median:g} in the others, arriving within {span_s:.1f} s of a "
            f"{written_number(window_s)} s window (set {{end_s}}={_opening_text(options, last)} "
            "to leave it out)",
            ("end_s",),
        ),
        stacklevel=caller_stacklevel(),
    )


def trace_windows(
    options: TraceOptions, split: str = "test", limit: int | None = None
) -> Iterator[Workload]:
    """The windows of ``split`` ("train", "val", "test" or "all"), the first ``limit``
    of them (None: all), one :class:`Workload` at a time. The file is planned (and
    checked) when this is called, before the first window is asked for."""
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {echoed(limit)}")
    plan = plan_trace(options)
    wanted = plan.split(split)[:limit]
    return _stream(plan, {w.key: w for w in wanted})


def _stream(plan: TracePlan, wanted: dict[str | int, TraceWindow]) -> Iterator[Workload]:
    options = plan.options
    if not wanted:
        return
    _check_unchanged(plan)
    source, fmt, rows, told_by, place = _open(options)
    read = _read_options(options, fmt)
    origin = _block_origin(options, read, fmt, told_by)
    report = ReadReport(source=source, places=place)
    stream = place.placing(RowStream(rows, fmt, read, report, origin))
    start_s = options.start_s or 0.0
    end_s = math.inf if options.end_s is None else options.end_s
    last = max(w.position for w in wanted.values())
    current: TraceWindow | None = None
    requests: list[Request] = []
    chainer = native.BlockChainer()
    slotted = _Slots(plan.origin, plan.units_per_s, start_s, end_s, options.window_s)
    for _, parsed in stream:
        if fmt.windowed:
            key: str | int = parsed.window
            arrival_s = parsed.time / plan.units_per_s
        else:
            placed = slotted.place(parsed.time)
            if placed is None:
                continue
            key, arrival_s = placed
        if current is None or key != current.key:
            if current is not None:
                _check_unchanged(plan)  # (a file replaced while it was read)
                yield _window(plan, current, requests)
                if current.position >= last:
                    return
            current = wanted.get(key)
            requests, chainer = [], native.BlockChainer()
        if current is not None:
            requests.append(make_request(parsed, arrival_s, chainer, "", len(requests)))
    if current is not None:
        _check_unchanged(plan)
        yield _window(plan, current, requests)


_KEYS_WARNED: set[tuple[Any, ...]] = set()  # (path, its size and mtime, merge_blocks) warned
_KEYS_CHECKED: set[tuple[Any, ...]] = set()  # ... and a window of it found clean


def _warn_private_key_ends(
    plan: TracePlan, trace_id: str, requests: list[Request], block_tokens: int
) -> None:
    """Warn, once per file, merge and process, at the first window read of a trace
    that has many requests whose prefix key is their own
    (:func:`~envs.workloads.stats.private_key_note`; docs/traces.md, "Small blocks
    and the prefix a copy moves (a known limitation)"). Every window is looked at
    once until one is: about 12 % of reading a window the first time."""
    path = str(plan.options.path)
    file = os.path.realpath(path) if os.path.exists(path) else path  # a dataset by name
    key = (file, plan.file_stat, plan.options.merge_blocks)
    if key in _KEYS_WARNED or (*key, trace_id) in _KEYS_CHECKED:
        return
    note = private_key_note(private_key_ends(requests), len(requests), block_tokens)
    _KEYS_CHECKED.add((*key, trace_id))
    if note is not None:
        _KEYS_WARNED.add(key)
        warnings.warn(
            TraceWarning(
                f"{path}: in window {trace_id}, {note}. {PRIVATE_KEY_EFFECT}; "
                "workload.merge_blocks=K reads the trace in blocks K times as long"
            ),
            stacklevel=caller_stacklevel(),
        )


def _window(plan: TracePlan, window: TraceWindow, requests: list[Request]) -> Workload:
    stem = trace_stem(plan.options.path)
    meta = {
        "workload": TRACE_WORKLOAD,
        "path": plan.options.path,
        "format": plan.format,
        "trace_id": window.trace_id,
        "split": window.split,
        "first_line": window.first_line,
        "start_s": window.start_s,
    }
    workload = merged_workload(
        Workload(
            name=f"{stem}/{window.trace_id}",
            block_tokens=plan.block_tokens,
            requests=requests,
            meta=meta,
        ),
        plan.options.merge_blocks,
    )
    _warn_private_key_ends(plan, window.trace_id, workload.requests, workload.block_tokens)
    return workload


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


def no_windows_hint(workload: str, split: str, params: dict[str, Any] | None = None) -> str:
    """What decides that a trace has no ``split`` windows, in brackets (to follow
    "workload 'trace' has no 'test' windows"): its rows' own split names, or the
    option that sets the split's share; "" for a generated workload."""
    if workload != TRACE_WORKLOAD or split not in ("train", "val", "test"):
        return ""
    options = trace_options(params or {})
    if plan_trace(options).split_from == "file":
        return (
            f" (the file's rows name their own splits and none names {split!r}; "
            "workload.file_splits=false splits its windows by workload.test_fraction "
            "and workload.val_fraction)"
        )
    if split == "val":
        return " (workload.val_fraction, 0 by default, sets a trace's share of 'val' windows)"
    if split == "test":
        return f" (workload.test_fraction={options.test_fraction:g})"
    return (
        f" (workload.test_fraction={options.test_fraction:g} and "
        f"workload.val_fraction={options.val_fraction:g} leave it none)"
    )


def no_windows_error(workload: str, split: str, params: dict[str, Any] | None = None) -> ValueError:
    """The error for ``workload``'s ``split`` without windows, saying what leaves it
    empty (:func:`no_windows_hint`): the one message of the envs
    (``envs.windows.window_pool``), ``registry.windows`` and the commands."""
    hint = no_windows_hint(workload, split, params)
    return ValueError(f"workload {workload!r} has no {split!r} windows{hint}")
