"""What every trace reader shares: options, errors, row fields and assembly.

A reader turns a *row source* (an iterator of ``(line, row)`` pairs from a JSONL
file, a parquet file or a hub dataset) into :class:`~envs.sim.request.Workload`
objects, using a :class:`TraceFormat` that knows one format's fields. Malformed
rows raise :class:`TraceFormatError` naming the file, the line and the field, or
are skipped and counted when ``ReadOptions.skip_bad_rows`` is set.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal, NamedTuple, NoReturn, TypedDict, TypeVar

import numpy as np

from envs.sim import native
from envs.sim.checks import check_int, check_range
from envs.sim.errors import ConfigError, NamedFields, caller_stacklevel, echoed, plural
from envs.sim.request import BlockChainer, Request, Workload
from envs.workloads.readers import compiled

UnsortedPolicy = Literal["warn", "sort", "error"]


class TraceFormatError(ConfigError):
    """A row of a trace that cannot be read; names the file, the line and the field.

    Attributes:
        path: the file (or dataset) the row came from.
        line: 1-based line number (row number for parquet and hub datasets; 0:
            the file as a whole, e.g. one with no usable rows).
        field: the offending field, or ``None`` when the whole row is unreadable.
        reason: what is wrong, without the file, line and field.
        fields: the read options ``message`` names as a remedy, each written
            ``{name}`` in it (``{skip_bad_rows}=true``; see ``NamedFields``).
        at: how the message names the row in place of ``line N`` ("": so; an element
            of a JSON array, ``element 37 (line 112)``: :class:`RowPlaces`).
    """

    def __init__(
        self,
        path: str,
        line: int,
        field: str | None,
        message: str,
        options: tuple[str, ...] = (),
        at: str = "",
    ) -> None:
        self.path = path
        self.line = line
        self.field = field
        self.reason = message
        self.at = at
        if line > 0:
            where = f"{path}, {at or f'line {line}'}, " + (
                f"field {field!r}" if field is not None else "row"
            )
        else:  # about the file, not a row of it (no usable rows)
            where = path if field is None else f"{path}, field {field!r}"
        super().__init__(f"{where}: {message}", options)

    def __reduce__(self) -> tuple[Any, ...]:
        """Rebuilt from its parts, so it crosses to another process (a worker's error)."""
        parts = (self.path, self.line, self.field, self.reason, self.fields, self.at)
        return (type(self), parts)


_Item = TypeVar("_Item")


class RowPlaces:
    """How a read's messages name a row of its source by the number the source gives
    it (its ``line``): as ``line N`` of the source (this class: a file's own lines).
    A source whose numbers are not a file's own lines says more: a split of several
    data files (``hub.SplitRows``: the file and its own line), a JSON array
    (``hub.DocumentRows``: the element and the line it starts on)."""

    def placed(self, error: TraceFormatError) -> TraceFormatError:
        """``error`` naming its row as this source's row is named (here: itself)."""
        return error

    def line(self, line: int, spec: str = "") -> str:
        """How a message names row ``line`` (``spec``: the number's format, ``,``)."""
        return f"line {line:{spec}}"

    def raise_placed(self, error: TraceFormatError) -> NoReturn:
        """Raise ``error`` named as this source names a row (``error`` itself, as it
        was raised, when :meth:`placed` leaves it)."""
        placed = self.placed(error)
        if placed is error:
            raise error
        raise placed from None

    def placing(self, read: Iterable[_Item]) -> Iterator[_Item]:
        """``read``'s items (a read's rows, or its workloads), an error naming a row
        raised as :meth:`raise_placed` raises it."""
        try:
            yield from read
        except TraceFormatError as error:
            self.raise_placed(error)


AS_IS = RowPlaces()
"""The rows of a file numbered by its own lines (or a dataset's, by their place)."""


class UnsortedTraceError(TraceFormatError):
    """A timestamp earlier than one before it, with ``unsorted="error"``."""


class MissingDependencyError(ImportError):
    """An optional package (pyarrow, datasets) needed by one reader is not installed."""


class TraceWarning(NamedFields, UserWarning):
    """Something in a trace was repaired or skipped rather than rejected; ``fields``:
    the read options the message names, each written ``{name}`` in it (``set
    {time_unit}= to choose``; see ``NamedFields``)."""

    def __init__(self, message: str, fields: tuple[str, ...] = ()) -> None:
        super().__init__(self._name(message, fields, ""))


class TooManyBadRowsError(ConfigError):
    """With ``skip_bad_rows``, more rows were malformed than ``max_bad_fraction`` allows."""


TIME_UNITS: dict[str, float] = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}
"""Timestamp unit -> units per second."""
PLAUSIBLE_SPAN_S = 31 * 86_400.0
"""The longest span a trace is believed to cover under ``time_unit="auto"`` (a month)."""
LATEST_EPOCH_S = 7.3e9
"""The latest timestamp believed under ``time_unit="auto"``: seconds since 1970 (year ~2200)."""
UNIX_SECONDS_FROM = 1e9
"""Under ``time_unit="auto"``, timestamps from here (2001 in Unix seconds) that the
format's finer unit puts in 1970 are said to look like Unix seconds."""


class RowLocation(NamedTuple):
    """Where a row came from, for error messages."""

    path: str
    line: int


@dataclass(frozen=True)
class ReadOptions:
    """How strictly to read a trace. The defaults reject every malformed row."""

    skip_bad_rows: bool = False
    """Skip malformed rows (counted in the :class:`ReadReport`, one warning) instead of raising."""
    unsorted: UnsortedPolicy = "warn"
    """Timestamps out of order: "warn" sorts and warns once, "sort" sorts quietly,
    "error" raises :class:`UnsortedTraceError`."""
    rebase_time: bool = True
    """Shift absolute timestamps so the earliest request arrives at 0 s. Bursted-ART
    ``arrival_s`` is already relative to its window and is never shifted."""
    strict_block_count: bool = True
    """Require floor(input/block) <= len(hash_ids) <= ceil(input/block)."""
    block_tokens: int | None = None
    """Override the format's block size (e.g. a Qwen trace hashed at another size)."""
    namespace: str = ""
    """Tenant namespace for rows that name none, so two traces read with different
    namespaces never share KV."""
    max_rows: int | None = None
    """Stop after this many good rows (None: read everything)."""
    max_context_tokens: int | None = None
    """Refuse a row whose input + output tokens exceed this (the served model's
    ``ModelSpec.max_context_tokens``), or skip it with ``skip_bad_rows``; None: no limit."""
    max_bad_fraction: float = 0.01
    """With ``skip_bad_rows``: a read that skips more than this fraction of its rows
    fails (:class:`TooManyBadRowsError`) with the count, rather than going on with
    what is left."""
    time_unit: str = "auto"
    """Unit of the timestamps: "s", "ms", "us", "ns", or "auto": the format's own
    unit, unless the timestamps would then span more than a month (see
    :func:`time_units_per_s`)."""

    def __post_init__(self) -> None:
        if self.unsorted not in ("warn", "sort", "error"):
            raise ConfigError.about(
                "ReadOptions.unsorted",
                f"must be 'warn', 'sort' or 'error', got {echoed(self.unsorted)}",
            )
        if self.block_tokens is not None:
            check_int("ReadOptions.block_tokens", self.block_tokens, 1)
        if self.max_rows is not None:
            check_int("ReadOptions.max_rows", self.max_rows, 0)
        if self.max_context_tokens is not None:
            check_int("ReadOptions.max_context_tokens", self.max_context_tokens, 1)
        check_range("ReadOptions.max_bad_fraction", self.max_bad_fraction, 0.0, 1.0)
        if self.time_unit not in ("auto", *TIME_UNITS):
            raise ConfigError.about(
                "ReadOptions.time_unit",
                f"must be one of auto, {', '.join(TIME_UNITS)}, got {echoed(self.time_unit)}",
            )


@dataclass
class ReadReport:
    """What a read did: rows used, rows skipped (with the first few reasons), reordering."""

    source: str
    rows_read: int = 0
    rows_skipped: int = 0
    errors: list[str] = field(default_factory=list)
    out_of_order: int = 0
    first_out_of_order_line: int | None = None
    first_error: TraceFormatError | None = field(default=None, repr=False, compare=False)
    """The first skipped row's error, for messages that quote it (options named as data)."""
    unknown_keys: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    """Keys the format does not read, each with the first line that has it."""
    time_unit: str = field(default="", compare=False)
    """The timestamps' unit the read took (``s``, ``ms``, ``us``, ``ns``; a
    ``time_unit="auto"`` read's choice), once it is known."""
    places: RowPlaces = field(default=AS_IS, repr=False, compare=False)
    """How the read's warnings name a row by its number (:class:`RowPlaces`)."""

    MAX_ERRORS = 10

    def skip(self, error: TraceFormatError) -> None:
        """Count a skipped row, its ``error`` named as :attr:`places` names a row (so
        that every message quoting it, a warning or the too-many-bad-rows error,
        says the file and line a user can go to)."""
        self.rows_skipped += 1
        kept = len(self.errors) < self.MAX_ERRORS
        if not kept and self.first_error is not None:
            return  # (named only when kept: naming may scan a split's files)
        error = self.places.placed(error)
        if self.first_error is None:
            self.first_error = error
        if kept:
            self.errors.append(str(error))

    def first_skipped(self) -> tuple[str, tuple[str, ...]]:
        """The first skipped row's reason, as a message template and the options it
        names (see ``NamedFields``), for a message that quotes it."""
        first = self.first_error
        return (first.template, first.fields) if first is not None else (self.errors[0], ())

    def as_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "rows_read": self.rows_read,
            "rows_skipped": self.rows_skipped,
            "errors": list(self.errors),
            "out_of_order": self.out_of_order,
            "first_out_of_order_line": self.first_out_of_order_line,
        }


@dataclass(slots=True)
class ParsedRow:
    """One row, checked and converted, before its hashes are chained."""

    request_id: str
    time: float
    """Arrival in the trace's own unit (see ``TraceFormat.time_units_per_s``)."""
    input_tokens: int
    output_tokens: int
    hash_ids: list[Hashable]
    group_id: str = ""
    tenant: str = ""
    job_kind: str = ""
    window: str = ""
    source: str = ""
    split: str = ""
    chat_id: str = ""
    parent_chat_id: str = ""


RowParser = Callable[[Mapping[str, Any], RowLocation], ParsedRow]
RowSource = Iterable[tuple[int, "Mapping[str, Any] | TraceFormatError"]]


@dataclass(frozen=True)
class TraceFormat:
    """One trace format: its name, block size, timestamp field and row parser factory."""

    name: str
    block_tokens: int
    time_field: str
    new_parser: Callable[[], RowParser]
    """Returns a fresh parser for one read (a parser may remember earlier rows)."""
    time_units_per_s: float = 1.0
    """Units of the time field per second (1000 for milliseconds)."""
    windowed: bool = False
    """Rows carry a window id (``trace_id``) and are replayed window by window."""
    rebase: bool = True
    """Whether ``ReadOptions.rebase_time`` applies (False when times are window-relative)."""
    fields: frozenset[str] = frozenset()
    """The keys a row may have: those the format reads and those it knowingly leaves
    (ART-Chat's ``messages``); any other is named in one warning a read (a misspelt
    field would take its default silently). Empty: not checked."""


# --- field helpers: each raises TraceFormatError naming the field -----------------------


def _missing(row: Mapping[str, Any], name: str, loc: RowLocation) -> TraceFormatError:
    return TraceFormatError(loc.path, loc.line, name, "missing (a required field)")


def get_int(
    row: Mapping[str, Any],
    name: str,
    loc: RowLocation,
    minimum: int = 0,
    default: int | None = None,
) -> int:
    """An integer field (integral floats and numpy numbers accepted, as Python ints);
    ``default`` when absent or null."""
    value = row.get(name)
    if type(value) is int and value >= minimum:
        return value  # the common case first
    if value is None:
        if default is None:
            raise _missing(row, name, loc)
        return default
    if isinstance(value, _NUMPY_NUMBERS):  # a generator's (np.int64): a Python number
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TraceFormatError(
            loc.path, loc.line, name, f"expected an integer, got {echoed(value)}"
        )
    if isinstance(value, float):
        if not value.is_integer():
            raise TraceFormatError(
                loc.path, loc.line, name, f"expected an integer, got {echoed(value)}"
            )
        value = int(value)
    if value < minimum:
        raise TraceFormatError(
            loc.path, loc.line, name, f"must be >= {minimum}, got {echoed(value)}"
        )
    return value


def get_number(row: Mapping[str, Any], name: str, loc: RowLocation, minimum: float | None) -> float:
    """A required finite number (a numpy one taken as a Python float), optionally
    bounded below."""
    value = row.get(name)
    if type(value) is int and (minimum is None or value >= minimum):
        return float(value)  # the common case first (an int is always finite)
    if value is None:
        raise _missing(row, name, loc)
    if isinstance(value, _NUMPY_NUMBERS):  # a generator's (np.float64): a Python number
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TraceFormatError(loc.path, loc.line, name, f"expected a number, got {echoed(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise TraceFormatError(loc.path, loc.line, name, f"must be finite, got {echoed(value)}")
    if minimum is not None and number < minimum:
        raise TraceFormatError(
            loc.path, loc.line, name, f"must be >= {minimum}, got {echoed(value)}"
        )
    return number


def get_time(row: Mapping[str, Any], name: str, loc: RowLocation, minimum: float | None) -> float:
    """A timestamp: a finite number, or a number written as a string (``"1700000000123"``)."""
    value = row.get(name)
    if type(value) is int and (minimum is None or value >= minimum):
        return float(value)  # the common case first
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise TraceFormatError(
                loc.path, loc.line, name, f"expected a number, got {_short(value)}"
            ) from None
        return get_number({name: number}, name, loc, minimum)
    return get_number(row, name, loc, minimum)


def get_str(
    row: Mapping[str, Any],
    name: str,
    loc: RowLocation,
    default: str | None,
    label: str | None = None,
) -> str:
    """A string field; integers are accepted and converted (ids are often numbers).
    Errors name the field ``label`` if given (a nested one: ``metadata.tenant``)."""
    value = row.get(name)
    if type(value) is str:
        return value  # the common case first
    if value is None:
        if default is None:
            raise _missing(row, name, loc)
        return default
    if isinstance(value, np.integer):  # a generator's id (np.int64): a Python int
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TraceFormatError(
            loc.path, loc.line, label or name, f"expected a string, got {echoed(value)}"
        )
    return str(value)


def get_hash_ids(row: Mapping[str, Any], name: str, loc: RowLocation) -> list[Hashable]:
    """A non-empty list of block hashes, each an integer or a string (numpy integers
    and strings, and a 1-d numpy array of either for the list, taken as Python ones)."""
    value = row.get(name)
    if type(value) is list and value and _HASH_TYPES.issuperset(map(type, value)):
        return value  # the common case first: a list from a parser, of ints or strings
    if value is None:
        raise _missing(row, name, loc)
    if isinstance(value, np.ndarray):  # a generator's: a 1-d array, as Python ints or strs
        if value.ndim != 1 or value.dtype.kind not in "iuU":
            raise TraceFormatError(
                loc.path,
                loc.line,
                name,
                f"expected a list or a 1-d array of integers or strings, got a "
                f"{value.ndim}-d array of {value.dtype}",
            )
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        raise TraceFormatError(loc.path, loc.line, name, f"expected a list, got {_short(value)}")
    if not value:
        raise TraceFormatError(loc.path, loc.line, name, "is empty; a prompt has >= 1 block")
    hashes = list(value)
    for position, item in enumerate(hashes):
        kind = type(item)
        if kind is not str and kind is not int:
            if isinstance(item, (np.integer, np.str_)):  # a generator's: a Python int or str
                hashes[position] = item.item()
                continue
            raise TraceFormatError(
                loc.path,
                loc.line,
                name,
                f"item {position} must be an integer or a string, got {_short(item)}",
            )
    return hashes


_HASH_TYPES = frozenset((int, str))
"""The types a block hash may have (exactly: not bool, not a subclass)."""
_NUMPY_NUMBERS = (np.integer, np.floating)
"""numpy's number scalars, which the row checks take as the Python number they hold
(``.item()``): a generator of one's own (``envs.workloads.plugins``) draws them. A
file's rows never hold them; the simulator's cores are given Python numbers only."""


def output_tokens(row: Mapping[str, Any], name: str, loc: RowLocation) -> int:
    """Output length; absent means 1, and 0 is read as 1 (prefill makes the first token)."""
    return max(1, get_int(row, name, loc, minimum=0, default=1))


class RequestFields(TypedDict):
    """The :class:`ParsedRow` fields every trace format has, for ``ParsedRow(**fields)``."""

    time: float
    input_tokens: int
    output_tokens: int
    hash_ids: list[Hashable]


def request_fields(
    row: Mapping[str, Any], loc: RowLocation, time_field: str, time_minimum: float | None = None
) -> RequestFields:
    """The fields every format shares, read in this order: the timestamp ``time_field``
    (a number or a numeric string, >= ``time_minimum`` if given), ``input_length`` (>= 1),
    ``output_length`` (see :func:`output_tokens`) and ``hash_ids``."""
    return {
        "time": get_time(row, time_field, loc, minimum=time_minimum),
        "input_tokens": get_int(row, "input_length", loc, minimum=1),
        "output_tokens": output_tokens(row, "output_length", loc),
        "hash_ids": get_hash_ids(row, "hash_ids", loc),
    }


def block_size_origin(
    fmt: TraceFormat, given: bool, recorded_in: str = "", told_by: str = ""
) -> str:
    """Where a read's block size came from, as a block-count error says it: the
    ``{block_tokens}`` option (``given``), the dataset file that records it
    (``recorded_in``), or the format's, with what told the format when it was guessed
    (``told_by``: ``its field 'chat_id'``)."""
    if given:
        return "{block_tokens}"
    if recorded_in:
        return f"the {recorded_in} beside it"
    return f"the {fmt.name} format's" + (f", guessed from {told_by}" if told_by else "")


BLOCK_REMEDY = (
    "if its hashes cover blocks of another size, set {block_tokens}= to that size, "
    "else {strict_block_count}=false accepts it",
    ("block_tokens", "strict_block_count"),
)
"""What a block-count error says to do about a trace file, and the read options it
names (each written ``{name}``)."""


def check_block_count(
    parsed: ParsedRow,
    block_tokens: int,
    loc: RowLocation,
    origin: str = "",
    remedy: tuple[str, tuple[str, ...]] = BLOCK_REMEDY,
) -> None:
    """Reject a hash list that cannot cover ``input_tokens`` at ``block_tokens`` a block
    (most often a file hashed at another block size: the message says so first).
    ``origin``: where the block size came from (the format's, and what told the
    format when it was guessed), said in brackets after it; ``remedy``: what to do
    and the settings it names (a trace file's read options by default)."""
    n = len(parsed.hash_ids)
    low = parsed.input_tokens // block_tokens
    high = -(-parsed.input_tokens // block_tokens)
    if not low <= n <= high:
        raise TraceFormatError(
            loc.path,
            loc.line,
            "hash_ids",
            f"has {plural(n, 'block')} but input_length {parsed.input_tokens} at "
            f"{block_tokens} tokens "
            + (f"a block ({origin}) " if origin else "a block ")
            + f"needs {high}"
            + (f" (or {low})" if low != high and low > 0 else "")
            + f"; {remedy[0]}",
            remedy[1],
        )


def check_context(
    parsed: ParsedRow, max_context_tokens: int, loc: RowLocation, skipping: bool = False
) -> None:
    """Reject a request longer than the model's context (prompt + output tokens);
    the message says ``skip_bad_rows`` would skip it unless the read is ``skipping``
    such rows already (its warning quotes the first)."""
    total = parsed.input_tokens + parsed.output_tokens
    if total > max_context_tokens:
        remedy = "" if skipping else "; skip such rows with {skip_bad_rows}=true"
        raise TraceFormatError(
            loc.path,
            loc.line,
            "input_length",
            f"{parsed.input_tokens} + output_length {parsed.output_tokens} = {total} tokens "
            f"exceed the model's context of {max_context_tokens} tokens "
            f"({{max_context_tokens}}={max_context_tokens}){remedy}",
            ("max_context_tokens",) if skipping else ("max_context_tokens", "skip_bad_rows"),
        )


TIME_REMEDY = ("if it counts a finer unit, set {time_unit}= to it", ("time_unit",))
"""What a window-time error says to do about a trace file, and the read options it
names (each written ``{name}``)."""


def check_window_time(
    parsed: ParsedRow,
    fmt: TraceFormat,
    units_per_s: float,
    loc: RowLocation,
    remedy: tuple[str, tuple[str, ...]] = TIME_REMEDY,
) -> None:
    """Reject a window-relative time (Bursted-ART ``arrival_s``) more than
    :data:`PLAUSIBLE_SPAN_S` (a month) after its window's start: no window is that
    long, and at such a time (an absolute one, Unix seconds or nanoseconds) a
    prefill's milliseconds are lost to rounding, so its TTFT would read 0. ``remedy``:
    what to do and the settings it names (a trace file's read options by default)."""
    seconds = parsed.time / units_per_s
    if seconds > PLAUSIBLE_SPAN_S:
        time = plain_number(parsed.time) if parsed.time < 1e21 else f"{parsed.time:.4g}"
        raise TraceFormatError(
            loc.path,
            loc.line,
            fmt.time_field,
            f"{time} is {_days(seconds)} days after the start of "
            f"window {parsed.window!r}, read as {unit_name(units_per_s)}: {fmt.time_field} "
            f"counts from its window's start, and no window spans more than "
            f"{PLAUSIBLE_SPAN_S / 86_400:.0f} days (an absolute time such as Unix seconds "
            f"is not one; {remedy[0]})",
            remedy[1],
        )


def plain_number(number: float) -> str:
    """A timestamp or a count of seconds as a message says it: a whole number as a
    file writes it (``1700001497495``, not ``1700001497495.0``), any other to the
    thousandth (``1100.421``), never in exponent form (``1700000``, not ``1.7e+06``);
    an infinite or NaN one as Python writes it."""
    if not math.isfinite(number):
        return repr(number)
    rounded = round(number, 3)
    if rounded.is_integer():
        return str(int(rounded))
    return f"{rounded:.3f}".rstrip("0")


def written_number(number: float | Decimal) -> str:
    """A number the user gave (an option's value, ``end_s``) as a message says it:
    the shortest decimal that reads back as it, whole or not, never rounded and never
    in exponent form (``1234567.5``, where ``:g`` wrote ``1.23457e+06``; ``300``, not
    ``300.0``; ``1e-07`` as ``0.0000001``); an infinite or NaN one as Python writes it.
    A :class:`~decimal.Decimal` (a sum of such numbers, worked in decimal) is written
    the same way."""
    if not isinstance(number, Decimal):
        number = float(number)
        if not math.isfinite(number):
            return repr(number)
        number = Decimal(repr(number))
    text = format(number, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


NO_PLACES = 99
"""What :func:`decimal_places` says of a number written in exponent form."""


def decimal_places(number: float) -> int:
    """The decimal places of the shortest decimal that reads back as ``number``
    (``1003.773``: 3; ``1000.0``: 0), the places a file wrote it with; a number
    Python writes in exponent form (``1e-07``) has :data:`NO_PLACES`."""
    number = float(number)
    if number.is_integer():
        return 0
    text = repr(number)
    return NO_PLACES if "e" in text else len(text) - text.index(".") - 1


def rebased(time: float, opens: float, places: int, units_per_s: float) -> float:
    """Seconds from ``opens`` to ``time`` (both in the trace's own unit, ``opens``
    written with at most ``places`` decimals): the difference is taken in that unit
    and, when both are decimals of few places, rounded to their places, so decimal
    seconds come out as written (``1063.773 - 1060.0`` is 3.773, not the binary
    difference 3.7729999999999109). Rounding is skipped where the numbers' float
    spacing is too coarse for their places to be exact (it could move the value),
    and for negative times: rounding one of two arrivals a float apart, and not the
    other, could put them out of order."""
    if time.is_integer() and places == 0:
        return (time - opens) / units_per_s  # integers below 2**53 subtract exactly
    places = max(places, decimal_places(time))
    difference = time - opens
    if opens >= 0.0 and 10.0**-places > 8 * math.ulp(max(abs(time), abs(opens))):
        difference = round(difference, places)
    return difference / units_per_s


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --- assembly -------------------------------------------------------------------------


class RowStream:
    """Parses rows, applies skip/limit options and tracks ordering, for one reader call."""

    def __init__(
        self,
        rows: RowSource,
        fmt: TraceFormat,
        options: ReadOptions,
        report: ReadReport,
        block_origin: str = "",
        block_remedy: tuple[str, tuple[str, ...]] = BLOCK_REMEDY,
        time_remedy: tuple[str, tuple[str, ...]] = TIME_REMEDY,
    ) -> None:
        self.rows = rows
        self.fmt = fmt
        self.block_origin = block_origin or block_size_origin(fmt, options.block_tokens is not None)
        """Where the block size came from, said in a block-count error
        (:func:`block_size_origin`; a caller that knows more gives it)."""
        self.block_remedy = block_remedy
        """What a block-count error says to do (:data:`BLOCK_REMEDY`: a trace file's)."""
        self.time_remedy = time_remedy
        """What a window-time error says to do (:data:`TIME_REMEDY`: a trace file's)."""
        self.options = options
        self.report = report
        self.block_tokens = options.block_tokens or fmt.block_tokens
        self.window_units_per_s = (
            window_units_per_s(fmt, options.time_unit) if fmt.windowed else None
        )
        """Units per second of a windowed format's window-relative times, which
        :func:`check_window_time` bounds (None: a format of absolute times)."""
        self.parse_row = fmt.new_parser()
        self.fields = fmt.fields
        self.stopped_at: tuple[int, Mapping[str, Any] | TraceFormatError] | None = None
        """The line and row a read stopped at, unread, when ``max_rows`` stopped it
        before the end of the rows (None: read to the end)."""

    def __iter__(self) -> Iterator[tuple[RowLocation, ParsedRow]]:
        report, take = self.report, self.take
        max_rows = self.options.max_rows
        for line, row in self.rows:
            if max_rows is not None and report.rows_read >= max_rows:
                self.stopped_at = (line, row)
                return
            taken = take(line, row)
            if taken is not None:
                yield taken

    def take(
        self, line: int, row: Mapping[str, Any] | TraceFormatError
    ) -> tuple[RowLocation, ParsedRow] | None:
        """Line ``line``'s row parsed and checked, and counted as read; None when it is
        malformed and skipped (``skip_bad_rows``); else its error is raised."""
        loc = RowLocation(self.report.source, line)
        options = self.options
        try:
            if isinstance(row, TraceFormatError):
                raise row
            parsed = self.parse_row(row, loc)
            if options.strict_block_count:
                check_block_count(
                    parsed, self.block_tokens, loc, self.block_origin, self.block_remedy
                )
            if options.max_context_tokens is not None:
                check_context(parsed, options.max_context_tokens, loc, options.skip_bad_rows)
            if self.window_units_per_s is not None:
                check_window_time(parsed, self.fmt, self.window_units_per_s, loc, self.time_remedy)
        except TraceFormatError as error:
            if not options.skip_bad_rows:
                raise
            self.report.skip(error)
            return None
        report = self.report
        report.rows_read += 1
        if self.fields and not self.fields.issuperset(row):
            for key in row:
                if key not in self.fields:
                    report.unknown_keys.setdefault(str(key), line)
        return loc, parsed

    def next_row(self) -> ParsedRow | None:
        """The row ``max_rows`` stopped the read at, parsed (not counted as read); None
        when the read went to the end, or that row is malformed."""
        if self.stopped_at is None:
            return None
        line, row = self.stopped_at
        if isinstance(row, TraceFormatError):
            return None
        try:
            return self.parse_row(row, RowLocation(self.report.source, line))
        except TraceFormatError:
            return None

    def note_out_of_order(self, line: int, time: float, last: float) -> None:
        """Line ``line``'s row arrives at ``time``, before an earlier line's ``last``
        (:func:`_note_out_of_order`)."""
        loc = RowLocation(self.report.source, line)
        _note_out_of_order(self.report, self.options, self.fmt, loc, time, last)


def _note_out_of_order(
    report: ReadReport,
    options: ReadOptions,
    fmt: TraceFormat,
    loc: RowLocation,
    t: float,
    last: float,
) -> None:
    """Count a row that arrives before an earlier line's; raise if the trace must be sorted."""
    report.out_of_order += 1
    if report.first_out_of_order_line is None:
        report.first_out_of_order_line = loc.line
    if options.unsorted == "error":
        raise UnsortedTraceError(
            loc.path,
            loc.line,
            fmt.time_field,
            f"{plain_number(t)} is earlier than {plain_number(last)} on an earlier line; the "
            "trace must be sorted by time (or read it with ReadOptions(unsorted='warn'))",
        )


def check_bad_rows(report: ReadReport, options: ReadOptions) -> None:
    """Raise :class:`TooManyBadRowsError` when the read skipped more than
    ``options.max_bad_fraction`` of its rows."""
    total = report.rows_read + report.rows_skipped
    if report.rows_skipped and report.rows_skipped > options.max_bad_fraction * total:
        first, named = report.first_skipped()
        raise TooManyBadRowsError(
            f"{report.source}: {report.rows_skipped:,} of {total:,} rows are malformed "
            f"({100.0 * report.rows_skipped / total:.1f}%), more than {{max_bad_fraction}}="
            f"{options.max_bad_fraction:g} allows (first: {first})",
            ("max_bad_fraction", *named),
        )


def time_units_per_s(
    fmt: TraceFormat,
    time_unit: str,
    earliest: float,
    latest: float,
    source: str,
) -> float:
    """Units per second of a trace's timestamps, from the ``earliest`` and ``latest``
    (in the file's own numbers). ``time_unit="auto"`` takes the format's unit unless
    that is implausible: the trace would span more than :data:`PLAUSIBLE_SPAN_S`, or
    its timestamps would lie after :data:`LATEST_EPOCH_S` seconds since 1970 (integer
    nanoseconds read as milliseconds do both). Then it takes the first finer unit
    (us, then ns) that is plausible, with a warning naming both; if none is, it
    keeps the format's unit, with a warning. Timestamps that look like Unix
    seconds (from 2001 on) in a format counting finer units, where they would all
    fall in 1970, are kept in the format's unit with a warning too."""
    if time_unit != "auto":
        return TIME_UNITS[time_unit]

    def plausible(ups: float) -> bool:
        return (latest - earliest) / ups <= PLAUSIBLE_SPAN_S and latest / ups <= LATEST_EPOCH_S

    ups = fmt.time_units_per_s
    own = unit_name(ups)
    reach = f"{_days(latest / ups)} days after 1970"
    if plausible(ups):
        if ups > 1 and UNIX_SECONDS_FROM <= earliest <= latest <= LATEST_EPOCH_S:
            warnings.warn(
                TraceWarning(
                    f"{source}: {fmt.time_field} from {earliest:.0f} looks like Unix seconds; "
                    f"read as {own}, as the format counts, it falls {reach}, "
                    f"{span_text((latest - earliest) / ups)} (set {{time_unit}}=s if it is "
                    "in seconds)",
                    ("time_unit",),
                ),
                stacklevel=caller_stacklevel(),
            )
        return ups
    span = f"span {_days((latest - earliest) / ups)} days"
    for name, value in TIME_UNITS.items():
        if value > ups and plausible(value):
            warnings.warn(
                TraceWarning(
                    f"{source}: {fmt.time_field} read as {own} would reach {reach} and "
                    f"{span}; reading it as {name} ({span_text((latest - earliest) / value)}); "
                    "set {time_unit}= to choose",
                    ("time_unit",),
                ),
                stacklevel=caller_stacklevel(),
            )
            return value
    warnings.warn(
        TraceWarning(
            f"{source}: {fmt.time_field} read as {own} would reach {reach} and {span}, and "
            f"no finer unit makes it plausible; reading it as {own} (set {{time_unit}}= to "
            "choose, or check the file's timestamps)",
            ("time_unit",),
        ),
        stacklevel=caller_stacklevel(),
    )
    return ups


def _days(seconds: float) -> str:
    days = seconds / 86_400
    return f"{days:,.0f}" if days < 1e15 else f"{days:.3g}"


def span_text(seconds: float) -> str:
    """A span of seconds in words, in days or hours when that long (``a span of 1.8 s``)."""
    if seconds >= 86_400:
        return f"a span of {seconds / 86_400:.1f} days"
    if seconds >= 3_600:
        return f"a span of {seconds / 3_600:.1f} h"
    return f"a span of {seconds:.1f} s"


def finish_report(report: ReadReport, options: ReadOptions) -> None:
    """At the end of a read: too many bad rows is an error; skipped rows and rows out
    of order (with ``unsorted="warn"``) are one warning each."""
    check_bad_rows(report, options)
    places = report.places
    if report.rows_skipped:
        first, named = report.first_skipped()
        warnings.warn(
            TraceWarning(
                f"{report.source}: skipped {plural(report.rows_skipped, 'malformed row')} "
                f"(first: {first})",
                named,
            ),
            stacklevel=caller_stacklevel(),
        )
    if report.unknown_keys:
        keys = sorted(report.unknown_keys.items(), key=lambda item: item[1])
        listed = ", ".join(f"{key!r} (first on {places.line(line)})" for key, line in keys[:5])
        more = f" and {len(keys) - 5} more" if len(keys) > 5 else ""
        warnings.warn(
            TraceWarning(
                f"{report.source}: rows have keys this format does not read, ignored: "
                f"{listed}{more} (a misspelt field takes its default)"
            ),
            stacklevel=caller_stacklevel(),
        )
    if report.out_of_order and options.unsorted == "warn":
        warnings.warn(
            f"{report.source}: {plural(report.out_of_order, 'row')} arrived out of time order "
            f"(first at {places.line(report.first_out_of_order_line or 0)}); sorted by arrival",
            TraceWarning,
            stacklevel=caller_stacklevel(),
        )


def make_request(
    parsed: ParsedRow, arrival_s: float, chainer: BlockChainer, namespace: str, index: int = 0
) -> Request:
    """The simulator's request for a parsed row, arriving at ``arrival_s``; ``index``
    is its position in its workload (a Workload renumbers any that is not)."""
    tenant = parsed.tenant or namespace
    return Request(
        index=index,
        request_id=parsed.request_id,
        arrival_s=arrival_s,
        input_tokens=parsed.input_tokens,
        output_tokens=parsed.output_tokens,
        blocks=chainer.chain(parsed.hash_ids, namespace=tenant),
        tenant=tenant,
        group_id=parsed.group_id,
        job_kind=parsed.job_kind,
        source=parsed.source,
        chat_id=parsed.chat_id,
        parent_chat_id=parsed.parent_chat_id,
    )


Collected = tuple[list[Request], Sequence[float], Sequence[int]]
"""A read's requests in file order (``arrival_s`` and ``index`` not yet set), with
each one's time in the trace's own unit and its line."""


def collect_rows(stream: RowStream, chainer: BlockChainer) -> Collected:
    """Every row of ``stream`` made a request (its hashes chained by ``chainer``), with
    its time and line; rows out of time order are noted (:func:`_note_out_of_order`).
    The reference: a compiled twin may do it (:mod:`envs.workloads.readers.compiled`)."""
    report, options, fmt = stream.report, stream.options, stream.fmt
    requests: list[Request] = []
    times: list[float] = []
    lines: list[int] = []
    last = -math.inf
    namespace = options.namespace
    for loc, parsed in stream:
        time = parsed.time
        if time < last:
            _note_out_of_order(report, options, fmt, loc, time, last)
        else:
            last = time
        times.append(time)
        lines.append(loc.line)
        requests.append(make_request(parsed, 0.0, chainer, namespace))
    return requests, times, lines


def place_rows(
    stream: RowStream,
    requests: list[Request],
    times: Sequence[float],
    lines: Sequence[int],
    origin: float,
    units_per_s: float,
) -> list[Request]:
    """The requests that arrive a finite, non-negative time after ``origin`` (in the
    trace's unit), each given its ``arrival_s`` and its ``index`` among them; any
    other is an error naming its line (or is skipped with ``skip_bad_rows``). An
    arrival is :func:`rebased` from ``origin``, as a window's is from its opening
    (decimal seconds as written: 3.773 s, not 3.772999999999911)."""
    report, options, fmt = stream.report, stream.options, stream.fmt
    kept: list[Request] = []
    places = decimal_places(origin)
    for request, time, line in zip(requests, times, lines, strict=True):
        arrival_s = rebased(time, origin, places, units_per_s)
        if not 0.0 <= arrival_s < math.inf:
            why = (
                "is negative; arrivals must be >= 0 without rebasing "
                "(read it with ReadOptions(rebase_time=True))"
                if arrival_s < 0
                else f"is {time - origin!r} after the earliest arrival, too far to simulate"
            )
            error = TraceFormatError(report.source, line, fmt.time_field, f"{echoed(time)} {why}")
            if not options.skip_bad_rows:
                raise error
            report.rows_read -= 1
            report.skip(error)
            continue
        request.arrival_s = arrival_s
        request.index = len(kept)  # its position, so the Workload need not renumber it
        kept.append(request)
    return kept


def assemble_trace(
    rows: RowSource,
    fmt: TraceFormat,
    name: str,
    options: ReadOptions | None = None,
    report: ReadReport | None = None,
    chainer: BlockChainer | None = None,
) -> Workload:
    """Read a whole (non-windowed) trace into one :class:`Workload`."""
    options = options or ReadOptions()
    report = report if report is not None else ReadReport(source=name)
    chainer = chainer if chainer is not None else native.BlockChainer()
    stream = RowStream(rows, fmt, options, report)
    collected = compiled.collect_rows(rows, stream, chainer, make_request) or collect_rows(
        stream, chainer
    )
    requests, times, lines = collected
    # subtract in the trace's own unit first, so integer milliseconds rebase exactly
    origin = min(times, default=0.0) if options.rebase_time and fmt.rebase else 0.0
    earliest, latest = min(times, default=0.0), max(times, default=0.0)
    ups = time_units_per_s(fmt, options.time_unit, earliest, latest, report.source)
    report.time_unit = unit_name(ups)
    if not compiled.place_rows(requests, times, origin, ups):
        requests = place_rows(stream, requests, times, lines, origin, ups)
    if not requests:
        raise TraceFormatError(report.source, 0, None, "no usable rows")
    origin /= ups
    finish_report(report, options)
    block_tokens = options.block_tokens or fmt.block_tokens
    meta = {"format": fmt.name, "time_origin_s": origin, "read": report.as_dict()}
    return Workload(name=name, block_tokens=block_tokens, requests=requests, meta=meta)


def assemble_windows(
    rows: RowSource,
    fmt: TraceFormat,
    name: str,
    options: ReadOptions | None = None,
    report: ReadReport | None = None,
    chainer: BlockChainer | None = None,
    sources: Iterable[str] | None = None,
) -> Iterator[Workload]:
    """Stream a windowed trace: one :class:`Workload` per window, holding one at a time.

    Rows must be grouped by window (all rows of a ``trace_id`` together); a window id
    that comes back after another window is an error, since streaming could not
    honour it. Each window gets a fresh :class:`BlockChainer` unless ``chainer`` is
    given (then ids are shared, and its memory grows, across windows). ``sources``
    keeps only windows whose rows have one of these ``source`` values.
    """
    options = options or ReadOptions()
    report = report if report is not None else ReadReport(source=name)
    wanted = set(sources) if sources is not None else None
    block_tokens = options.block_tokens or fmt.block_tokens
    ups = window_units_per_s(fmt, options.time_unit)
    report.time_unit = unit_name(ups)
    seen: set[str] = set()
    window: _Window | None = None
    for loc, parsed in RowStream(rows, fmt, options, report):
        if window is None or parsed.window != window.trace_id:
            if parsed.window in seen:
                raise window_again(loc, parsed.window)
            if window is not None and window.wanted:
                yield window.close(name, fmt, block_tokens, report.source)
            seen.add(parsed.window)
            window = _Window(parsed, loc, chainer, wanted)
        if not window.wanted:
            continue
        if parsed.time < window.last:
            _note_out_of_order(report, options, fmt, loc, parsed.time, window.last)
        window.last = max(window.last, parsed.time)
        arrival_s = parsed.time / ups
        position = len(window.requests)
        window.requests.append(
            make_request(parsed, arrival_s, window.chainer, options.namespace, position)
        )
    if window is None:
        raise TraceFormatError(report.source, 0, None, "no usable rows")
    if window.wanted:
        yield window.close(name, fmt, block_tokens, report.source)
    finish_report(report, options)


def window_again(loc: RowLocation, trace_id: str) -> TraceFormatError:
    """The error for a window id that comes back after other windows (streaming needs
    a file grouped by window)."""
    return TraceFormatError(
        loc.path,
        loc.line,
        "trace_id",
        f"window {trace_id!r} appears again after other windows; the file "
        "must be grouped by window to stream (sort it by trace_id first)",
    )


def unit_name(units_per_s: float) -> str:
    """The name in :data:`TIME_UNITS` of ``units_per_s`` (else ``N/s``)."""
    return next(
        (name for name, ups in TIME_UNITS.items() if ups == units_per_s), f"{units_per_s:g}/s"
    )


def window_units_per_s(fmt: TraceFormat, time_unit: str) -> float:
    """Units per second of window-relative times (Bursted-ART ``arrival_s``): the
    format's unless ``time_unit`` names one (its span says nothing of the unit)."""
    return fmt.time_units_per_s if time_unit == "auto" else TIME_UNITS[time_unit]


class _Window:
    """The rows of the window being read (the only one held in memory)."""

    def __init__(
        self,
        first: ParsedRow,
        loc: RowLocation,
        chainer: BlockChainer | None,
        wanted: set[str] | None,
    ) -> None:
        self.trace_id = first.window
        self.source = first.source
        self.split = first.split
        self.first_line = loc.line
        self.wanted = wanted is None or first.source in wanted
        self.chainer = chainer if chainer is not None else native.BlockChainer()
        self.requests: list[Request] = []
        self.last = -math.inf

    def close(self, name: str, fmt: TraceFormat, block_tokens: int, path: str) -> Workload:
        meta = {
            "format": fmt.name,
            "trace_id": self.trace_id,
            "source": self.source,
            "split": self.split,
            "path": path,
            "first_line": self.first_line,
        }
        requests, self.requests = self.requests, []
        return Workload(
            name=f"{name}:{self.trace_id}",
            block_tokens=block_tokens,
            requests=requests,
            meta=meta,
        )
