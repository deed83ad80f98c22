"""Row sources: JSONL (optionally compressed: gzip, bzip2, xz, or zstd with the
``zstandard`` module) and parquet files, read lazily.

A source yields ``(line, row)`` pairs, where ``row`` is a mapping or, for a line
that is not a JSON object, the :class:`TraceFormatError` describing it (so a
reader can skip it and go on). Blank lines are ignored. Nothing is loaded whole:
JSONL is read line by line and parquet in record batches.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import json
import lzma
import os
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from envs.sim.request import Workload
from envs.workloads.readers.base import (
    MissingDependencyError,
    ReadOptions,
    ReadReport,
    TraceFormat,
    TraceFormatError,
    assemble_trace,
)

PARQUET_BATCH_ROWS = 1024
_DIGIT_OR_BLANK = bytes(48 if 48 <= byte <= 57 else 32 for byte in range(256))
"""A bytes.translate table: every digit to "0", every other byte to a blank."""
_LONG_DIGITS = b"0" * 19


GZIP_MAGIC = b"\x1f\x8b"
BZIP2_MAGIC = b"BZh"
XZ_MAGIC = b"\xfd7zXZ\x00"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
ZIP_MAGIC = b"PK\x03\x04"
PARQUET_MAGIC = b"PAR1"

COMPRESSIONS = (
    (GZIP_MAGIC, "gzip", "gunzip -k"),
    (BZIP2_MAGIC, "bzip2", "bunzip2 -k"),
    (XZ_MAGIC, "xz", "unxz -k"),
    (ZSTD_MAGIC, "zstd", "zstd -d"),
)
"""The compressions a JSONL file is read through, told by their first bytes (not by
the file's name): each one's magic number, name and the command that unpacks it.
gzip, bzip2 and xz are the standard library's; zstd needs the ``zstandard`` module
(:func:`zstd_module`), and a zstd file is refused without it."""
COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zst")
"""The names' endings of compressed files: a trace's windows and a dataset's splits
are named as the file they hold (:func:`without_compression`)."""
DECOMPRESS_ERRORS = (EOFError, OSError, zlib.error, lzma.LZMAError)
"""What reading a file through :data:`COMPRESSIONS` raises when it cannot be read
further: cut short, damaged (zstd's errors are :class:`OSError`: ``_ZstdRaw``)."""
READ_JSONL = "JSONL (plain or compressed with gzip, bzip2, xz or zstd)"
"""What a trace file is read as, besides parquet, as messages say it."""


def without_compression(name: str) -> str:
    """A file's name less a compressed file's ending (:data:`COMPRESSED_SUFFIXES`:
    ``moon.jsonl`` for ``moon.jsonl.gz`` and ``moon.jsonl.bz2``): the name of what it
    holds, compressed or not."""
    for suffix in COMPRESSED_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return name


def compressed_names(name: str) -> tuple[str, ...]:
    """``name`` and its compressed files' names (``test.jsonl``, ``test.jsonl.gz``,
    ...): where a split ``make_dataset`` wrote is looked for."""
    return (name, *(name + suffix for suffix in COMPRESSED_SUFFIXES))


def trace_stem(path: str | os.PathLike[str]) -> str:
    """The name a trace file's windows take: its name less a compressed file's ending
    and then its last suffix (``moon`` for ``moon.jsonl``, ``moon.jsonl.gz`` and
    ``moon.jsonl.xz`` alike)."""
    return Path(without_compression(Path(path).name)).stem


def first_bytes(path: Path, size: int = 4) -> bytes:
    """The first ``size`` bytes of a file (its magic number)."""
    with path.open("rb") as handle:
        return handle.read(size)


def zstd_module() -> Any:
    """The ``zstandard`` module, or None when it is not installed (it is no dependency
    of btb-gym: ``pip install zstandard`` reads zstd-compressed traces)."""
    try:
        import zstandard
    except ImportError:
        return None
    return zstandard


class _ZstdRaw(io.RawIOBase):
    """A zstd file's decompressed bytes, frame after frame (``zstandard``'s
    decompressor), for an :class:`io.BufferedReader` to read by line. A frame that
    cannot be decompressed, or a file that ends inside one (cut short), raises an
    :class:`OSError` (one of :attr:`JsonlRows.READ_ERRORS`), as gzip's, bzip2's and
    xz's readers do."""

    CHUNK = 1 << 16
    """The compressed bytes read at a time."""

    def __init__(self, zstandard: Any, path: Path) -> None:
        self._new_frame = zstandard.ZstdDecompressor().decompressobj
        self._error = zstandard.ZstdError
        self._file = path.open("rb")
        self._frame = self._new_frame()
        self._out = b""
        self._at = 0  # of _out, given already

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self._at == len(self._out):
            data = self._file.read(self.CHUNK)
            if not data:
                if not self._frame.eof:  # (a file opens a frame: its magic number told it)
                    raise OSError("zstd: the file ends inside a frame: it is cut short")
                return 0
            self._out, self._at = self._decompress(data), 0
        with memoryview(buffer) as view, view.cast("B") as target:
            size = min(len(target), len(self._out) - self._at)
            target[:size] = self._out[self._at : self._at + size]
        self._at += size
        return size

    def _decompress(self, data: bytes) -> bytes:
        """The bytes ``data`` decompresses to, a frame that ends in it followed by the next."""
        out = []
        try:
            while data:
                if self._frame.eof:
                    self._frame = self._new_frame()
                out.append(self._frame.decompress(data))
                data = self._frame.unused_data if self._frame.eof else b""
        except self._error as error:
            raise OSError(f"zstd: {error}") from None
        return b"".join(out)

    def close(self) -> None:
        if not self.closed:
            self._file.close()
        super().close()


def _open_bytes(path: Path) -> IO[bytes]:
    """The file's bytes, decompressed when it starts with the magic number of one of
    :data:`COMPRESSIONS` (whatever its name). A zstd file without the ``zstandard``
    module is a :class:`TraceFormatError` naming it and how to unpack it."""
    head = first_bytes(path, 6)
    if head.startswith(GZIP_MAGIC):
        return gzip.GzipFile(path, "rb")  # type: ignore[return-value]
    if head.startswith(BZIP2_MAGIC):
        return bz2.BZ2File(path, "rb")  # type: ignore[return-value]
    if head.startswith(XZ_MAGIC):
        return lzma.LZMAFile(path, "rb")  # type: ignore[return-value]
    if head.startswith(ZSTD_MAGIC):
        zstandard = zstd_module()
        if zstandard is None:
            raise TraceFormatError(
                str(path),
                0,
                None,
                "the file is zstd-compressed, which is read with the zstandard module, not "
                f"installed: unpack it first (zstd -d {path.name}), or pip install zstandard",
            )
        return io.BufferedReader(_ZstdRaw(zstandard, path))
    return path.open("rb")


class JsonlRows:
    """Rows of a JSON-lines file with their 1-based line numbers (iterate it for
    ``(line, row)`` pairs), read lazily.

    A line that is not UTF-8 is a bad row like any other (named by its line); a
    compressed file (gzip, bzip2, xz or zstd: :func:`_open_bytes`) that cannot be
    decompressed to the end stops the read with a :class:`TraceFormatError` naming
    the file and the line it broke at.

    Each line is parsed by orjson when it is installed; a line orjson refuses, one
    that is not an object, or one that may hold an integer orjson read as a float
    (:func:`read_exactly`) goes through :func:`stdlib_row`, so the rows read and
    the errors given are the standard library's (which also reads ``NaN`` and lone
    surrogates, and strips Unicode blanks).

    The compiled reader (:mod:`envs.workloads.readers.compiled`) reads the file's
    bytes itself (:meth:`open_bytes`) and asks :meth:`row_of` for every line it does
    not read.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.name = str(self.path)
        self._fast = _fast_loads()

    def __iter__(self) -> Iterator[tuple[int, Mapping[str, Any] | TraceFormatError]]:
        row_of = self.row_of
        for line_no, raw in enumerate(self.raw_lines(), start=1):
            row = row_of(raw, line_no)
            if row is not None:
                yield line_no, row

    READ_ERRORS = DECOMPRESS_ERRORS
    """What reading a line raises when the file cannot be read further (see :meth:`read_error`)."""

    def open_bytes(self) -> IO[bytes]:
        """The file's bytes, decompressed when it starts with the magic bytes of one of
        :data:`COMPRESSIONS`."""
        return _open_bytes(self.path)

    def read_error(self, line_no: int, error: BaseException) -> TraceFormatError:
        """The error for a file whose line ``line_no`` could not be read (``error``,
        one of :attr:`READ_ERRORS`)."""
        return TraceFormatError(
            self.name, line_no, None, f"cannot read the file past this line ({error})"
        )

    def raw_lines(self) -> Iterator[bytes]:
        """The file's lines as bytes (decompressed), blank ones included."""
        line_no = 0
        with self.open_bytes() as handle:
            try:
                for raw in handle:
                    line_no += 1
                    yield raw
            except self.READ_ERRORS as error:  # raised reading the file
                raise self.read_error(line_no + 1, error) from None

    def row_of(self, raw: bytes, line_no: int) -> Mapping[str, Any] | TraceFormatError | None:
        """Line ``line_no``'s row: its object, the error that names what is wrong with
        it, or None for a blank line. A UTF-8 byte-order mark opening the file (as
        some Windows editors write) is not part of the first row."""
        if line_no == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8) :]
        fast = self._fast
        if fast is not None and read_exactly(raw):
            try:
                row = fast(raw)
            except ValueError:  # orjson.JSONDecodeError is one
                pass
            else:
                if type(row) is dict:
                    return row
        return stdlib_row(raw, self.name, line_no)


def jsonl_rows(path: str | os.PathLike[str]) -> JsonlRows:
    """Rows of a JSON-lines file with their 1-based line numbers (see :class:`JsonlRows`)."""
    return JsonlRows(path)


def read_exactly(raw: bytes) -> bool:
    """Whether orjson surely reads the line ``raw`` as the standard library does: it
    has no 19 digits in a row, which may be an integer past 64 bits (orjson reads
    it as a float, the standard library as an int). Digits in a string count too;
    such a line only takes the slower path."""
    return _LONG_DIGITS not in raw.translate(_DIGIT_OR_BLANK)


def _fast_loads() -> Callable[[bytes], Any] | None:
    """``orjson.loads``, or None when orjson is not installed (then every line takes
    the standard library's path)."""
    try:
        import orjson
    except ImportError:
        return None
    return orjson.loads


NOT_UTF8 = "is not UTF-8 text"
"""How a line's error ends when the line does not decode as UTF-8."""
UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def stdlib_row(raw: bytes, name: str, line_no: int) -> Mapping[str, Any] | TraceFormatError | None:
    """One JSONL line read with the standard library: its object, the error that
    names what is wrong with it, or None for a blank line."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return TraceFormatError(
            name,
            line_no,
            None,
            f"byte 0x{raw[error.start]:02x} at column {error.start + 1} {NOT_UTF8}",
        )
    if not line.strip():
        return None
    try:  # without the line's end, so a cut-off row's column is on its own line
        row = json.loads(line.rstrip("\r\n"))
    except json.JSONDecodeError as error:
        # json's msg leaves the place out ("Unterminated string starting at"): say it
        return TraceFormatError(
            name, line_no, None, f"not valid JSON ({error.msg}, column {error.colno})"
        )
    if not isinstance(row, dict):
        return TraceFormatError(
            name, line_no, None, f"expected a JSON object, got {type(row).__name__}"
        )
    return row


def require_pyarrow() -> Any:
    """Import ``pyarrow.parquet`` or explain how to install it."""
    try:
        import pyarrow.parquet as pq
    except ImportError as error:
        raise MissingDependencyError(
            "reading parquet traces needs pyarrow: pip install 'btb-gym[data]' (or pyarrow)"
        ) from error
    return pq


def parquet_rows(
    path: str | os.PathLike[str], batch_rows: int = PARQUET_BATCH_ROWS
) -> Iterator[tuple[int, Mapping[str, Any] | TraceFormatError]]:
    """Rows of a parquet file, numbered from 1, read one record batch at a time.

    A file pyarrow cannot open (not parquet, truncated) or cannot read to its end
    (corrupt pages) is a :class:`TraceFormatError` naming the file and the first row
    it could not read (the first of its record batch)."""
    pq = require_pyarrow()
    import pyarrow

    errors = (OSError, pyarrow.ArrowException)
    name = str(path)
    try:
        parquet = pq.ParquetFile(name)
    except errors as error:
        raise TraceFormatError(
            name, 1, None, f"cannot open the file as parquet ({first_line(error)})"
        ) from None
    row_no = 0
    batches = parquet.iter_batches(batch_size=batch_rows)
    batch_no = 0
    while True:
        batch_no += 1
        try:
            rows = next(batches).to_pylist()
        except StopIteration:
            return
        except errors as error:
            raise TraceFormatError(
                name, row_no + 1, None,
                f"cannot read the file past this row (record batch {batch_no}: "
                f"{first_line(error)})",
            ) from None  # fmt: skip
        for row in rows:
            row_no += 1
            yield row_no, row


def first_line(error: BaseException) -> str:
    """An exception's message, its first line only (a one-line error quotes it)."""
    return next((line for line in str(error).splitlines() if line.strip()), type(error).__name__)


def file_rows(
    path: str | os.PathLike[str],
) -> Iterable[tuple[int, Mapping[str, Any] | TraceFormatError]]:
    """Rows of a parquet file or of a JSONL file, compressed (:data:`COMPRESSIONS`) or
    not; both are told by their first bytes (:func:`is_parquet`)."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"trace file not found: {file}")
    if is_parquet(file):
        return parquet_rows(file)
    refuse_other_packing(file)
    return jsonl_rows(file)


def refuse_other_packing(file: Path) -> None:
    """A :class:`TraceFormatError` naming ``file`` when it is packed in a way no reader
    reads: a zip archive (told by its first bytes), a zstd file without the
    ``zstandard`` module, or parquet compressed (parquet compresses its own pages).
    Read as JSONL, its bytes were said to be text in another encoding, with an
    ``iconv`` line that cannot help."""
    head = first_bytes(file, 6)
    if head.startswith(ZIP_MAGIC):
        raise TraceFormatError(
            str(file),
            0,
            None,
            f"the file is zip-compressed, and only {READ_JSONL} and parquet are read: "
            f"unpack it first (unzip {file.name})",
        )
    for magic, name, unpack in COMPRESSIONS:
        if not head.startswith(magic):
            continue
        try:
            with _open_bytes(file) as handle:  # a zstd file without zstandard: refused
                inner = handle.read(len(PARQUET_MAGIC))
        except DECOMPRESS_ERRORS:
            return  # the JSONL reader names where it breaks
        if inner == PARQUET_MAGIC:
            raise TraceFormatError(
                str(file),
                0,
                None,
                f"the file is {'an' if name == 'xz' else 'a'} {name}-compressed parquet file, "
                "which is not read (parquet compresses its own pages): decompress it first "
                f"({unpack} {file.name})",
            )
        return


def is_parquet(file: Path) -> bool:
    """Whether a file is parquet, told by its first bytes, not by its name (any other
    is read as JSONL, compressed or not); but a file named ``*.parquet`` without
    parquet's first bytes is a :class:`TraceFormatError` saying so, not JSON that is
    not valid."""
    head = first_bytes(file)
    if head == PARQUET_MAGIC:
        return True
    if file.suffix.lower() == ".parquet":
        raise TraceFormatError(
            str(file),
            1,
            None,
            f"not a valid parquet file: it begins with {head!r}, not parquet's {PARQUET_MAGIC!r}",
        )
    return False


def first_row(path: str | os.PathLike[str]) -> tuple[int, Mapping[str, Any]] | None:
    """The first well-formed row of a file and its line (used to guess the
    format), or None for a file without rows. When no row is well formed (a CSV
    file, say), raises the first row's own :class:`TraceFormatError` (with its
    line), saying that the file is in no supported format."""
    rows = iter(file_rows(path))
    first_error: TraceFormatError | None = None
    undecoded = True  # every bad line so far failed to decode as UTF-8
    try:
        for line, row in rows:
            if not isinstance(row, TraceFormatError):
                return line, row
            if first_error is None:
                first_error = row
            undecoded = undecoded and row.reason.endswith(NOT_UTF8)
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            close()
    if first_error is not None:
        encoding = _encoding_note(Path(path), undecoded)
        raise TraceFormatError(
            first_error.path,
            first_error.line,
            first_error.field,
            f"{first_error.reason}, and "
            + (
                encoding
                or "no line of the file is a JSON object: it is not a trace in a supported "
                "format (JSONL, compressed or not, or parquet)"
            ),
        )
    return None


def _encoding_note(file: Path, undecoded: bool) -> str:
    """Why no line of ``file`` is a row, when it is text in another encoding than
    UTF-8: UTF-16 (told by its byte-order mark, or the NUL bytes its ASCII
    characters carry), or another (every bad line failed to decode: ``undecoded``;
    Latin-1, say); "" when neither."""
    try:
        with _open_bytes(file) as handle:
            head = handle.read(64)
    except DECOMPRESS_ERRORS:
        head = b""
    remedy = "; save it as UTF-8 (iconv -f {} -t UTF-8 converts it)"
    if head.startswith(UTF16_BOMS):
        return "the file is UTF-16 text, not UTF-8: it begins with UTF-16's byte-order mark" + (
            remedy.format("UTF-16")
        )
    if b"\x00" in head[:2]:
        order = "UTF-16BE" if head[0] == 0 else "UTF-16LE"  # ASCII's NUL byte first or second
        return f"the file holds NUL bytes, as {order} text does: it is not UTF-8" + (
            remedy.format(order)
        )
    if undecoded:
        return "no line of the file is UTF-8 text: it is in another encoding (Latin-1, say)" + (
            remedy.format("LATIN1")
        )
    return ""


def read_file(
    path: str | os.PathLike[str],
    fmt: TraceFormat,
    options: ReadOptions | None = None,
    report: ReadReport | None = None,
    name: str | None = None,
) -> Workload:
    """Read a whole (single-window) trace file of format ``fmt`` into one Workload."""
    report = report if report is not None else ReadReport(source=str(path))
    return assemble_trace(
        file_rows(path), fmt, name or trace_stem(path), options=options, report=report
    )
