"""Traces stored as datasets on a hub, read through the ``datasets`` library.

Any dataset whose rows follow one of the supported layouts (Mooncake, ART-Chat,
Qwen-Bailian, Bursted-ART) can be read; ``datasets`` is imported only when this
reader is called. The same call reads local files with the generic builders,
e.g. ``read_hub_dataset("json", data_files="trace.jsonl")`` or
``read_hub_dataset("parquet", data_files="rows.parquet")``, which downloads nothing.
"""

from __future__ import annotations

import codecs
import contextlib
import itertools
import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from envs.sim.errors import ConfigError
from envs.sim.request import Workload
from envs.workloads.readers.base import (
    AS_IS,
    MissingDependencyError,
    ReadOptions,
    ReadReport,
    RowPlaces,
    RowSource,
    TraceFormatError,
    assemble_trace,
    assemble_windows,
)
from envs.workloads.readers.detect import FORMATS, canonical_format, format_of_row
from envs.workloads.readers.sources import (
    DECOMPRESS_ERRORS,
    NOT_UTF8,
    file_rows,
    first_line,
    first_row,
    is_parquet,
    jsonl_rows,
)


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


HUB_OPTION_REMEDY = ("it reads without {format}=hub", ("format",))
"""What a trace read with ``format=hub`` (``workload.format=hub``) says to do when the
``datasets`` library's rows of a local file are not the file's lines (:func:`own_rows`)."""
READ_TRACE_REMEDY = ("read_trace reads it by line, without the datasets library", ())
"""What :func:`read_hub_dataset`, which has no ``format=hub`` option, says then."""


def own_rows(
    file: str | os.PathLike[str],
    read: Iterable[Any],
    remedy: tuple[str, tuple[str, ...]],
) -> RowSource:
    """The rows of a local ``file`` as the file reader reads them (its own values,
    numbered by line), one for each row the ``datasets`` library ``read`` of it
    gives, so that the same checks see the same values with and without the
    library. The library converts some before a row is seen (in a JSON file, a
    column of numbers with a ``"512"`` in it is read as numbers, and ids past 64
    bits as floats), so its rows are read (a file it cannot read is its error)
    but not used. A file the library reads more or fewer rows of than the file's
    lines hold is an error naming the line where they part (where it reads more: the
    first line the file reader reads as no row, a line of two objects say; else the
    file) and saying ``remedy`` (its text, and the read options it names as
    ``{name}``: the caller's way round the library, :data:`HUB_OPTION_REMEDY` or
    :data:`READ_TRACE_REMEDY`)."""
    advice, options = remedy
    mine = iter(file_rows(file))
    count = 0
    first_bad: TraceFormatError | None = None  # the first line the file reader refuses
    for _ in read:
        count += 1
        taken = next(mine, None)
        if taken is None:
            where = (
                f"; the first line it may read otherwise is this one, which the file "
                f"reader reads as no row ({first_bad.reason})"
                if first_bad is not None
                else ""
            )
            raise TraceFormatError(
                str(file),
                first_bad.line if first_bad is not None else 0,
                None,
                f"the datasets library reads more rows of the file than its lines hold "
                f"({count - 1:,}){where}; {advice}",
                options,
            )
        if first_bad is None and isinstance(taken[1], TraceFormatError):
            first_bad = taken[1]
        yield taken
    for line, _ in mine:
        raise TraceFormatError(
            str(file),
            line,
            None,
            f"the datasets library reads {count:,} rows of the file, and none from this "
            f"line on; {advice}",
            options,
        )


class SplitRows(RowPlaces):
    """The rows of the data files of one split of a dataset, one file after another,
    for one read (iterate it for ``(line, row)`` pairs). Its lines count on through
    the files: a file's line ``k`` is line ``k`` after the last line the file before
    it has a row on, so that a line names one row of the split, as a file's does;
    :meth:`placed` says an error naming the split and such a line as the file and
    its own line, and :meth:`line` a warning's line so."""

    def __init__(
        self, label: str, files: Sequence[Path], rows_of: Callable[[Path], RowSource]
    ) -> None:
        self.label = label
        """The split's name in messages (``folder[train]``)."""
        self.files = list(files)
        self.rows_of = rows_of
        """A file's rows (line, row) as its own lines number them."""
        self.starts: list[tuple[int, Path, RowSource]] = []
        """Each file read so far, after how many of the split's lines it starts, and
        its rows (a :class:`RowPlaces` of its own when they are no lines of it)."""

    def __iter__(self) -> Iterator[tuple[int, Mapping[str, Any] | TraceFormatError]]:
        before = 0
        self.starts.clear()
        for file in self.files:
            rows = self.rows_of(file)
            self.starts.append((before, file, rows))
            last = 0
            for line, row in rows:
                last = line
                yield before + line, row
            before += last

    def locate(self, line: int) -> tuple[str, int, RowPlaces | None]:
        """The file and its own line of the split's line ``line`` (read already), and
        how that file names its rows when not by its lines (a JSON array's)."""
        before, file, rows = next(
            ((before, file, rows) for before, file, rows in reversed(self.starts) if before < line),
            (0, Path(self.label), None),
        )
        return str(file), line - before, rows if isinstance(rows, RowPlaces) else None

    def placed(self, error: TraceFormatError) -> TraceFormatError:
        """``error`` naming the file and its own line where it names the split and a
        line of it (the file reader's own errors name the file already); else itself.
        Another line its message names is the split's, which it then says of this one."""
        if error.path != self.label or error.line <= 0 or not self.starts:
            return error
        file, line, rows = self.locate(error.line)
        reason = error.reason
        if "line " in reason:
            reason += (
                f" (lines counted on through {self.label}'s files, in order: this is its "
                f"line {error.line})"
            )
        mine = type(error)(file, line, error.field, reason, error.fields)
        return rows.placed(mine) if rows is not None else mine

    def line(self, line: int, spec: str = "") -> str:
        """The split's line ``line`` as a warning names it: its file and own line."""
        if line <= 0 or not self.starts:
            return super().line(line, spec)
        file, own, rows = self.locate(line)
        return f"{file}, {rows.line(own, spec) if rows is not None else super().line(own, spec)}"


def read_by_line(file: Path) -> bool:
    """Whether the file reader reads a local ``file`` row for row as the library
    does: a parquet file, or JSON Lines (its first line that is not blank a JSON
    object of its own). A JSON file of one document (an array of rows, or an object
    spread over lines) the library reads too, and the file reader by line does not:
    :func:`document_rows` reads it."""
    if is_parquet(file):
        return True
    rows = jsonl_rows(file)
    lines = rows.raw_lines()
    try:
        for line, raw in enumerate(lines, start=1):
            row = rows.row_of(raw, line)
            if row is not None:
                return not isinstance(row, TraceFormatError)
    finally:
        lines.close()  # type: ignore[attr-defined]
    return True


_BLANKS = re.compile(r"[ \t\n\r]*")
"""JSON's whitespace between values."""


def one_document(file: Path) -> bool:
    """Whether a local file whose first line is no row of its own (:func:`read_by_line`
    false) is one JSON document, which :func:`document_rows` reads: one whose first
    character that is not blank (past a UTF-8 byte-order mark) opens an array, or an
    object the whole file is (spread over lines). The ``datasets`` library reads any
    file that does not open an array as JSON Lines first, so a file that opens an
    object it is not whole is JSON Lines whose first line is bad (a row cut short),
    which the file reader names; any other (a CSV file) is no JSON the file reader
    reads. A compressed file that cannot be decompressed to its end is none (the
    file reader names the line where it breaks)."""
    rows = jsonl_rows(file)
    try:
        with rows.open_bytes() as handle:
            head = handle.read(3).removeprefix(codecs.BOM_UTF8)
            while head:
                start = head.lstrip(b" \t\r\n")
                if start:
                    if start[:1] != b"{":
                        return start[:1] == b"["
                    try:
                        json.loads((start + handle.read()).decode("utf-8"))
                    except ValueError:  # (not UTF-8, as document_rows reads it, or not JSON)
                        return False
                    return True
                head = handle.read(1 << 16)
    except rows.READ_ERRORS:
        return False
    return False


def document_rows(file: Path) -> DocumentRows:
    """The rows of a local JSON file of one document (:class:`DocumentRows`)."""
    return DocumentRows(file)


class DocumentRows(RowPlaces):
    """The rows of a local JSON file of one document (:func:`read_by_line` false), as
    the standard library reads it, the file reader's JSON reading (the file's own
    values: a ``"512"`` stays text, an id past 64 bits an exact integer, where the
    ``datasets`` library converts them or fails): each element of its top-level array,
    numbered by its place in it as a parquet file's rows are (the library's numbers
    too, and a row without an id takes its number), or the document itself when it
    is one object. An element that is no object is that row's error (a bad row, as a
    JSONL line that is not an object); a document that is not valid JSON, or not
    UTF-8, is an error about the file naming the line and column where it breaks
    (:func:`one_document` gives it an object only when that is the whole file).
    Iterate it for ``(number, row)`` pairs; a message names an element of an array
    by its number and the line of the file it starts on (``element 37 (line 112)``:
    :meth:`placed`, :meth:`line`), so that it can be found in the file."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self.starts: list[int] = []
        """The line each element read so far starts on (empty: no array)."""

    def placed(self, error: TraceFormatError) -> TraceFormatError:
        """``error`` naming an element of the array by its number and its line (a
        line its reason names is an element's number, which it then says)."""
        if error.path != str(self.file) or not 0 < error.line <= len(self.starts) or error.at:
            return error
        reason = error.reason
        if "line " in reason:
            reason += " (a line named here is an element's number in the array)"
        at = self.line(error.line)
        return type(error)(error.path, error.line, error.field, reason, error.fields, at)

    def line(self, line: int, spec: str = "") -> str:
        """Element ``line`` as a message names it, with the line it starts on."""
        if not 0 < line <= len(self.starts):
            return super().line(line, spec)
        return f"element {line:{spec}} (line {self.starts[line - 1]:{spec}})"

    def __iter__(self) -> Iterator[tuple[int, Mapping[str, Any] | TraceFormatError]]:
        file = self.file
        self.starts.clear()
        name = str(file)
        rows = jsonl_rows(file)
        try:
            with rows.open_bytes() as handle:
                data = handle.read()
        except rows.READ_ERRORS as error:  # a compressed file cut short or damaged
            raise TraceFormatError(name, 0, None, f"cannot read the file ({error})") from None
        try:
            text = data.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError as error:
            line = data.count(b"\n", 0, error.start) + 1
            raise TraceFormatError(
                name, 0, None, f"byte 0x{data[error.start]:02x} on line {line} {NOT_UTF8}"
            ) from None
        decoder = json.JSONDecoder()

        def broken(error: json.JSONDecodeError) -> TraceFormatError:
            return TraceFormatError(
                name,
                0,
                None,
                f"not valid JSON at line {error.lineno}, column {error.colno} ({error.msg})",
            )

        def value_at(at: int) -> tuple[Any, int]:
            try:
                return decoder.raw_decode(text, at)
            except json.JSONDecodeError as error:
                raise broken(error) from None

        def row_of(value: Any, row: int) -> Mapping[str, Any] | TraceFormatError:
            if isinstance(value, dict):
                return value
            return TraceFormatError(
                name, row, None, f"expected a JSON object, got {type(value).__name__}"
            )

        at = _BLANKS.match(text).end()  # type: ignore[union-attr]
        if not text.startswith("[", at):  # one object (or another value: a bad row)
            value, at = value_at(at)
            yield 1, row_of(value, 1)
        else:
            at = _BLANKS.match(text, at + 1).end()  # type: ignore[union-attr]
            row = 0
            counted, lines = 0, 1  # (the newlines before ``counted``: the line it is on)
            while not text.startswith("]", at):
                value, end = value_at(at)
                row += 1
                lines += text.count("\n", counted, at)
                counted = at
                self.starts.append(lines)
                yield row, row_of(value, row)
                at = _BLANKS.match(text, end).end()  # type: ignore[union-attr]
                if text.startswith(",", at):
                    at = _BLANKS.match(text, at + 1).end()  # type: ignore[union-attr]
                elif not text.startswith("]", at):
                    raise broken(json.JSONDecodeError("Expecting ',' delimiter", text, at))
            at += 1
        at = _BLANKS.match(text, at).end()  # type: ignore[union-attr]
        if at < len(text):
            raise broken(json.JSONDecodeError("Extra data", text, at))


CHECKED_BUILDERS = ("json", "parquet")
"""The ``datasets`` builders whose data files the file reader reads too, so that a
dataset's rows are checked on the files' own values (:func:`_split_files`)."""


SplitOption = tuple[str, str]
"""How a refusal of a split a dataset lacks names the option: its field and owner."""
HUB_SPLIT: SplitOption = ("hub_split", "TraceOptions")
"""A trace workload's ``hub_split`` (``workload.hub_split`` on the commands)."""


def dataset_split_rows(
    datasets: Any,
    path: str,
    split: str,
    remedy: tuple[str, tuple[str, ...]],
    option: SplitOption = HUB_SPLIT,
    **builder: Any,
) -> tuple[str, RowSource, RowPlaces]:
    """The rows of split ``split`` of the dataset ``path`` (a folder, or a name on the
    hub) as its data files' own values, each file read as one given alone is
    (:func:`_split_files`, :func:`hub_file_source`): the name messages give them (the
    file, or ``path[split]`` of several), the rows, and how a message names a row
    (:class:`RowPlaces`). ``remedy``: what an error about the library's reading of a
    file says to do; ``option``: the option a split the dataset lacks names;
    ``builder``: more arguments of ``load_dataset_builder`` (``name``, ``revision``,
    ``data_files``, ``cache_dir``; None: not given). The one reading of a dataset by
    name, for ``format=hub`` and ``read_hub_dataset`` alike."""
    files = _split_files(datasets, path, split, option, **builder)
    if len(files) == 1:
        return str(files[0]), *placed_source(hub_file_source(datasets, files[0], remedy))
    rows = SplitRows(
        f"{path}[{split}]", files, lambda data: hub_file_source(datasets, data, remedy)
    )
    return rows.label, iter(rows), rows


def placed_source(rows: RowSource) -> tuple[RowSource, RowPlaces]:
    """A file's rows and how messages name them: by its lines, or as ``rows`` says
    (a JSON array's: its element and the line it starts on)."""
    return iter(rows), rows if isinstance(rows, RowPlaces) else AS_IS


def hub_file_source(datasets: Any, file: Path, remedy: tuple[str, tuple[str, ...]]) -> RowSource:
    """A local data file's rows through the ``datasets`` library's generic builder, as
    the file reader reads them (:func:`_hub_file_rows`); ``remedy``: what an error
    about the library's reading of it says to do. A JSON file of one document is read
    by the standard library, as the library reads it less its conversions
    (:func:`document_rows`): its own values, by row."""
    if not read_by_line(file) and one_document(file):
        return document_rows(file)
    builder = "parquet" if is_parquet(file) else "json"
    try:
        with _datasets_quiet():
            dataset = datasets.load_dataset(
                builder, data_files=str(file), split="train", streaming=True
            )
    except StopIteration:  # the builder found no first row to take the columns from
        return iter(())
    except _hub_read_errors() as error:
        raise _hub_file_error(file, 0, error, remedy) from None
    return _hub_file_rows(file, dataset, remedy)


def _split_files(
    datasets: Any, path: str, split: str, option: SplitOption = HUB_SPLIT, **builder: Any
) -> list[Path]:
    """The data files of split ``split`` of the dataset ``path`` (a folder, or a name
    on the hub, whose files the library downloads to its cache), local, in the order
    the library reads them. A split the dataset lacks names ``option``; files the
    library reads with another builder than :data:`CHECKED_BUILDERS` (a CSV file,
    whose every value is the library's reading of text) are refused, naming the
    first: their own values cannot be checked."""
    with _datasets_quiet():
        made = datasets.load_dataset_builder(
            path, **{key: value for key, value in builder.items() if value is not None}
        )
    found = {str(name): list(files) for name, files in (made.config.data_files or {}).items()}
    if split not in found:
        raise ConfigError(
            f"{{{option[0]}}}={split!r}: the dataset {path} has "
            + (f"the splits {', '.join(found)}" if found else "no data files the library finds"),
            (option[0],),
            option[1],
        )
    if made.name not in CHECKED_BUILDERS:
        raise TraceFormatError(
            str(found[split][0]),
            0,
            None,
            f"the datasets library reads the dataset's data files with its {made.name!r} "
            "builder, whose values are its own reading of them (a column of text read as "
            "numbers), not the file's, and cannot be checked as a trace's are: save the rows "
            "as JSONL or parquet",
        )
    with _datasets_quiet():
        cache_dir = builder.get("cache_dir")  # (load_dataset's downloads go below it)
        config = (
            datasets.DownloadConfig(cache_dir=os.path.join(cache_dir, "downloads"))
            if cache_dir
            else None
        )
        local = datasets.DownloadManager(download_config=config).download(found[split])
    return [Path(name) for name in local]


SAVED_MARKS = ("dataset_dict.json", "state.json")
"""Files one of which a folder ``Dataset.save_to_disk`` or ``DatasetDict.save_to_disk``
wrote holds (``load_dataset`` refuses such a folder: ``load_from_disk`` reads it)."""


def saved_to_disk(folder: Path) -> bool:
    """Whether ``folder`` is a dataset the ``datasets`` library saved to disk."""
    return folder.is_dir() and any((folder / mark).is_file() for mark in SAVED_MARKS)


def saved_split(datasets: Any, folder: Path, split: str) -> Any:
    """The rows of split ``split`` of a dataset saved to ``folder`` (a ``Dataset``
    saved alone has one split, whatever its name)."""
    with _datasets_quiet():
        dataset = datasets.load_from_disk(str(folder))
    if isinstance(dataset, datasets.DatasetDict):
        if split not in dataset:
            raise ConfigError(
                f"{{hub_split}}={split!r}: the dataset saved in {folder} has the splits "
                + ", ".join(dataset),
                ("hub_split",),
                "TraceOptions",
            )
        dataset = dataset[split]
    return iter(dataset)


def _hub_file_rows(file: Path, dataset: Any, remedy: tuple[str, tuple[str, ...]]) -> RowSource:
    """A local file's rows, each once the ``datasets`` library has streamed it: the
    file's own values, by line, for the file reader's checks (:func:`own_rows`: the
    library converts some values first); an error reading them is
    :func:`_hub_file_error`'s; ``remedy``: what an error says to do."""
    return own_rows(file, _hub_read(file, dataset, remedy), remedy)


def _hub_read(file: Path, dataset: Any, remedy: tuple[str, tuple[str, ...]]) -> Iterator[Any]:
    """The rows the ``datasets`` library streams of a local file; an error reading
    them is :func:`_hub_file_error`'s, saying ``remedy``. (The errors are looked up
    before the first row: a generator left open is closed as the interpreter shuts
    down, when an import in its ``except`` clause fails.)"""
    read = 0
    errors = _hub_read_errors()
    with _datasets_quiet():
        try:
            for row in dataset:
                read += 1
                yield row
        except errors as error:
            raise _hub_file_error(file, read, error, remedy) from None


def _hub_read_errors() -> tuple[type[BaseException], ...]:
    """What the ``datasets`` library raises on a file it cannot read: a malformed,
    truncated or corrupt one (pyarrow's and the decompressors' errors among them)."""
    import pyarrow  # installed with datasets
    from datasets.exceptions import DatasetsError

    return (*DECOMPRESS_ERRORS, ValueError, pyarrow.ArrowException, DatasetsError)


def _hub_file_error(
    file: Path,
    read: int,
    error: BaseException,
    remedy: tuple[str, tuple[str, ...]] = HUB_OPTION_REMEDY,
) -> TraceFormatError:
    """The error for a local file the ``datasets`` library could not read past row
    ``read``: the first bad line the project's own reader finds in it (file, line,
    what is wrong; a file of no JSON object rows is in no supported format; a file
    of no rows, a header-only parquet file, has none to tell the layout from), else
    the library's message, from the line of the row after ``read`` on (blank lines
    are no rows; past the last row, the last row's line): the library reads rows in
    blocks, so the one it cannot read may be any of the block that row begins; then it
    says ``remedy`` (the way round the library: :data:`HUB_OPTION_REMEDY`)."""
    at = 0  # the line of row ``read + 1``, or of the last row
    try:
        if first_row(file) is None:  # raises for a file of no JSON object rows (a CSV file)
            return TraceFormatError(str(file), 0, None, "no rows to tell the layout from")
        for count, (line, row) in enumerate(file_rows(file), start=1):
            if isinstance(row, TraceFormatError):
                return row
            if count <= read + 1:
                at = line
    except TraceFormatError as found:  # a file that cannot be read to its end
        return found
    return TraceFormatError(
        str(file),
        at,
        None,
        f"the datasets library cannot read the file from this line on "
        f"({first_line(error)}); {remedy[0]}",
        remedy[1],
    )


_QUIET_LOGGERS = ("datasets", "huggingface_hub")
"""The loggers :func:`_datasets_quiet` holds back: the library's, and that of the hub
client it reads a dataset's folder with (``Repo card metadata block was not found``
for a folder whose README.md has no metadata)."""
_QUIET_DEPTH = [0]
"""How many :func:`_datasets_quiet` blocks are open."""
_QUIET_LEVELS: dict[str, int] = {}
"""The levels of :data:`_QUIET_LOGGERS` to restore when the outermost block ends."""


@contextlib.contextmanager
def _datasets_quiet() -> Iterator[None]:
    """The ``datasets`` library's log lines held back inside the block (it logs an
    error before raising it, which would print a second line)."""
    loggers = [logging.getLogger(name) for name in _QUIET_LOGGERS]
    if _QUIET_DEPTH[0] == 0:
        for logger in loggers:
            _QUIET_LEVELS[logger.name] = logger.level
            logger.setLevel(logging.CRITICAL + 1)
    _QUIET_DEPTH[0] += 1
    try:
        yield
    finally:
        _QUIET_DEPTH[0] -= 1
        if _QUIET_DEPTH[0] == 0:
            for logger in loggers:
                logger.setLevel(_QUIET_LEVELS[logger.name])


def _local_file(path: str, data_files: Any, split: str) -> Path | None:
    """The one local file ``read_hub_dataset`` reads whole with a generic builder
    (``read_hub_dataset("json", data_files="trace.jsonl")``) that the file reader
    reads row for row (:func:`read_by_line`), else None. A slice of its split
    (``split="train[:100]"``) is the library's rows."""
    if (
        path not in ("json", "parquet")
        or not isinstance(data_files, (str, os.PathLike))
        or split != "train"
    ):
        return None
    file = Path(data_files)
    return file if file.is_file() and read_by_line(file) else None


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
    One local file read with a generic builder is checked as the file reader checks
    it, on its own values (:func:`own_rows`), its lines numbered as the file's; and
    so is a dataset by name or folder (:func:`by_name`), whose split's data files are
    read as ``workload.format=hub`` reads them
    (:func:`dataset_split_rows`): an error names a data file
    and its line.
    """
    datasets = require_datasets()
    if by_name(path, split):
        source, rows, places = dataset_split_rows(
            datasets,
            path,
            split,
            READ_TRACE_REMEDY,
            ("split", "read_hub_dataset"),
            name=config_name,
            data_files=data_files,
            revision=revision,
            cache_dir=cache_dir,
        )
        return _read_placed(rows, places, source, format, path, options, report)
    document = _local_document(path, data_files, split)
    if document is not None:  # the file's own values, its elements named with their lines
        rows = document_rows(document)
        return _read_placed(rows, rows, str(document), format, path, options, report)
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
    local = _local_file(path, data_files, split)
    read: Iterator[tuple[int, Any]] = (
        iter(own_rows(local, dataset, READ_TRACE_REMEDY))
        if local is not None
        else enumerate(iter(dataset), start=1)
    )
    return _assemble(read, format, label, path, options, report)


def _local_document(path: str, data_files: Any, split: str) -> Path | None:
    """The one local JSON file of one document (an array of rows) that
    ``read_hub_dataset("json", data_files=FILE)`` reads whole, which
    :class:`DocumentRows` reads as ``workload.format=hub`` does; else None."""
    if path != "json" or not isinstance(data_files, (str, os.PathLike)) or split != "train":
        return None
    file = Path(data_files)
    return file if file.is_file() and not read_by_line(file) and one_document(file) else None


def _read_placed(
    rows: RowSource,
    places: RowPlaces,
    source: str,
    format: str,
    path: str,
    options: ReadOptions | None,
    report: ReadReport | None,
) -> Iterator[Workload]:
    """:func:`_assemble` of ``rows`` named ``source`` in messages, an error or warning
    naming a row as ``places`` says it (a split's file and line, an array's element)."""
    report = report if report is not None else ReadReport(source=source)
    report.places = places
    try:
        workloads = _assemble(iter(rows), format, source, path, options, report)
    except TraceFormatError as error:
        places.raise_placed(error)
    return places.placing(workloads)


def by_name(path: str, split: str) -> bool:
    """Whether :func:`read_hub_dataset` of ``path`` reads a dataset by its name or
    folder as its split's data files (their own values, as ``workload.format=hub``
    does): ``path`` is no generic builder of the library (``json``, ``parquet``,
    ``csv``, ...), nor a folder ``save_to_disk`` wrote (the library's own Arrow
    files), and ``split`` is a split's name, not a slice (``train[:100]``: the
    library's rows)."""
    from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES as builders

    saved = saved_to_disk(Path(path))
    return path not in builders and not saved and re.fullmatch(r"[\w.-]+", split) is not None


def _assemble(
    rows: Iterator[tuple[int, Any]],
    format: str,
    label: str,
    path: str,
    options: ReadOptions | None,
    report: ReadReport,
) -> Iterator[Workload]:
    """The workloads of ``rows`` in ``format`` (or the one their first row's fields
    tell: "auto"), named ``path``; ``label``: the rows' name in messages."""
    if format == "auto":
        head = list(itertools.islice(rows, 1))
        if not head:
            raise TraceFormatError(label, 0, None, "no rows")
        if isinstance(head[0][1], TraceFormatError):
            raise head[0][1]  # a local file's first line, which its reader refuses
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
