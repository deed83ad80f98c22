"""Whether the compiled Mooncake read loop runs, and the calls into it.

``envs/workloads/_native/jsonl.pyx`` reads the plain lines of a Mooncake JSONL file
in C and hands every other line to the reference (``collect_rows`` and
``place_rows`` in :mod:`envs.workloads.readers.base`), which stays the readable
definition and the tests' oracle: both give the same requests, errors and
warnings. It runs where the compiled chainer runs (:mod:`envs.sim.native`: so
``BTB_GYM_PURE_PYTHON=1`` gives the reference), on a JSONL file of the Mooncake
format read into a compiled chainer; a build without it falls back to the
reference with one line on stderr, once per process.
"""

from __future__ import annotations

import dataclasses
import gc
import importlib
import sys
from array import array
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any, Protocol, runtime_checkable

from envs.sim import native
from envs.sim.request import BlockChainer, Request

if TYPE_CHECKING:
    from envs.workloads.readers.base import Collected, RowSource, RowStream

COMPILED_FORMATS = frozenset({"mooncake"})
"""The formats whose lines the compiled loop reads (their layout is written in it)."""


def _load() -> tuple[Any, type | None]:
    """The compiled module and the compiled chainer class it takes, or (None, None)
    (the reference runs)."""
    if native.CORE != "compiled":
        return None, None
    try:
        reader = importlib.import_module("envs.workloads._native.jsonl")
    except ImportError as error:
        print(
            f"btb-gym: compiled trace reader unusable ({error}); reading with the pure-Python one",
            file=sys.stderr,
        )
        return None, None
    fields = dataclasses.fields(Request)
    if tuple(f.name for f in fields) != getattr(reader, "REQUEST_FIELDS", None) or any(
        f.default != "" for f in fields[6:]
    ):  # the record changed since the compiled loop was written: it would make it wrong
        print(
            "btb-gym: compiled trace reader out of date with Request; reading with the "
            "pure-Python one",
            file=sys.stderr,
        )
        return None, None
    return reader, importlib.import_module("envs.sim._native.chainer").BlockChainer


READER, CHAINER = _load()
PLACES_INTEGERS_ONLY = bool(getattr(READER, "PLACES_INTEGERS_ONLY", False))
"""Whether the compiled ``place`` leaves times with a fraction to the reference (which
rounds decimals to their places); an older build took their binary difference."""


@runtime_checkable
class RawLines(Protocol):
    """What the compiled loop reads a file through (``sources.JsonlRows``): the file's
    bytes, what reading them may raise and the error to give then, and the reference's
    row of a line it does not read itself."""

    READ_ERRORS: tuple[type[BaseException], ...]

    def open_bytes(self) -> IO[bytes]: ...

    def read_error(self, line_no: int, error: BaseException) -> Exception: ...

    def row_of(self, raw: bytes, line_no: int) -> Any: ...


def collect_rows(
    rows: RowSource,
    stream: RowStream,
    chainer: BlockChainer,
    make_request: Callable[..., Request],
) -> Collected | None:
    """``base.collect_rows(stream, chainer)`` by the compiled loop (``make_request``:
    the reference's, for the lines it hands over), or None when it does not apply
    (no compiled reader, another format, another source, a reference chainer)."""
    if (
        READER is None
        or stream.fmt.name not in COMPILED_FORMATS
        or not isinstance(rows, RawLines)
        or CHAINER is None
        or not isinstance(chainer, CHAINER)
    ):
        return None
    with _collector_paused():
        collected: Collected = READER.collect(
            rows,
            stream,
            chainer,
            stream.options.namespace,
            Request,
            make_request,
            stream.note_out_of_order,
        )
    return collected


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cycle collector off while a read builds its requests, and back on
    after it if it was on. A read makes no cycles, but its ~2 new tracked objects a
    row (a request and its ids) set off collections that walk the growing heap:
    with them they were about 16 % of a read's instructions, paused about 12 %
    (the collection the backlog sets off after the read is smaller)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def place_rows(
    requests: list[Request], times: Sequence[float], origin: float, units_per_s: float
) -> bool:
    """``base.place_rows``' common case by the compiled loop (integer times, every
    arrival finite and >= 0): True when it placed them all; False, changing nothing,
    otherwise (a build from before it left fractions to the reference: never)."""
    if READER is None or not isinstance(times, array) or not PLACES_INTEGERS_ONLY:
        return False
    placed: bool = READER.place(requests, times, origin, units_per_s)
    return placed
