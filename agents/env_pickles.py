"""Pickling a run's envs for its checkpoints' run state (:mod:`agents.run_state`),
each of the run's windows (:class:`RunWindows`) named by its position rather than
stored, told by its :func:`window_digest` (:func:`snapshot_env`, :func:`restore_env`):
one way for the training process's envs (``env.vec=dummy``), which hold the run's
windows themselves, and a ``SubprocVecEnv`` worker's, which holds copies. Imports
nothing of the agents' own, so both :mod:`agents.vec_env` (the worker's side) and
:mod:`agents.run_state` take it."""

from __future__ import annotations

import hashlib
import io
import pickle
import weakref
from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np

from envs.sim.request import Workload


class RunWindows:
    """The windows a run's envs draw episodes from (the train windows, then each
    curriculum stage's segments): its run state names them by position, and
    :attr:`digests` tells another run's apart. ``curriculum`` is each stage's
    ``(until, segments)``: the step it ends at (``train.curriculum[i].until``, which
    the windows do not show) and how many of the windows are its segments."""

    def __init__(self, windows: Sequence[Any], curriculum: Sequence[tuple[int, int]] = ()) -> None:
        self.windows = list(windows)
        self.curriculum = [(int(until), int(segments)) for until, segments in curriculum]
        self.known = WindowDigests()  # the in-process envs' windows are these objects
        self._digests: list[str] | None = None

    @property
    def digests(self) -> list[str]:
        """Each window's :func:`window_digest` (worked out once)."""
        if self._digests is None:
            self._digests = [self.known(window) for window in self.windows]
        return self._digests


def window_digest(window: Any) -> str:
    """A sha256 of what a window's requests are (its name, block size, and each
    request's fields; a request's blocks by Python's hash of their ids, which is
    the same in every process): equal for a window built again from the same
    workload. About 0.1 s for 16,000 requests."""
    requests = window.requests
    digest = hashlib.sha256(f"{window.name}\0{window.block_tokens}\0{len(requests)}".encode())
    digest.update(np.array([r.arrival_s for r in requests], dtype=np.float64).tobytes())
    numbers = [
        (r.index, r.input_tokens, r.output_tokens, len(r.blocks), hash(r.blocks)) for r in requests
    ]
    digest.update(np.array(numbers, dtype=np.int64).tobytes())
    texts = (
        (r.request_id, r.tenant, r.group_id, r.job_kind, r.source, r.chat_id, r.parent_chat_id)
        for r in requests
    )
    digest.update("\0".join("\0".join(text) for text in texts).encode())
    return digest.hexdigest()


class WindowDigests:
    """Each window's :func:`window_digest`, worked out once for each window object and
    kept while it lives (by its ``id``, a weak reference telling a later object at the
    same address apart): a worker's checkpoints each name the same windows, which
    would else be digested again at every one (half of a 16-env subproc checkpoint's
    time). A window is not changed once made: a ``Workload``'s requests are set in
    its constructor, nothing in btb-gym changes them after, and a worker's are
    copies only it holds. Code of one's own that changes a window all the same is
    seen where it is cheap to see (:meth:`_same`): a window renamed, given another
    block size, or another list of requests (``window.requests = ...``), or whose
    list was lengthened or shortened, is digested again (and, being no longer one of
    the run's, pickled whole in the run state). A request changed in place, or one
    put in another's place in the same list, is not seen: the window keeps the
    digest it had, and a resume goes on with the window as built."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[weakref.ref[Any], tuple[Any, ...], str]] = {}

    def __call__(self, window: Any) -> str:
        known = self._known.get(id(window))
        if known is not None and known[0]() is window and self._same(known[1], window):
            return known[2]
        digest = window_digest(window)
        key = id(window)
        ref = weakref.ref(window, partial(self._forget, key))
        self._known[key] = (ref, self._marks(window), digest)
        return digest

    @staticmethod
    def _marks(window: Any) -> tuple[Any, ...]:
        """What :meth:`_same` compares: the window's name and block size, its list of
        requests (the object itself, held: a list cannot be weakly referenced, and
        an id could be a later list's) and that list's length."""
        return (window.name, window.block_tokens, window.requests, len(window.requests))

    @staticmethod
    def _same(marks: tuple[Any, ...], window: Any) -> bool:
        """Whether ``window`` is as it was when ``marks`` were taken, as far as they
        tell: the same name and block size, the same list object, as long."""
        name, block_tokens, requests, length = marks
        return (
            window.name == name
            and window.block_tokens == block_tokens
            and window.requests is requests
            and len(requests) == length
        )

    def __len__(self) -> int:
        return len(self._known)

    def _forget(self, key: int, gone: weakref.ref[Any]) -> None:
        known = self._known.get(key)
        if known is not None and known[0] is gone:
            del self._known[key]


class _WindowPickler(pickle.Pickler):
    """Pickles each window whose digest (``known``'s) is among ``digests`` as its
    position there; ``used`` gathers the positions named. A window is told by what
    it holds, not by identity: a worker's windows are copies of the run's. Told so
    in the training process too, whose windows' digests the run works out anyway,
    the envs pickle to the same bytes as by identity (a window equal to an earlier
    one, as a stage's segments repeating an earlier stage's, is named as that one:
    the same requests, and so the same episode)."""

    def __init__(self, file: Any, digests: Sequence[str], known: WindowDigests) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._positions: dict[str, int] = {}
        for k, digest in enumerate(digests):
            self._positions.setdefault(digest, k)
        self._known = known
        self.used: set[int] = set()

    def persistent_id(self, obj: Any) -> Any:
        if not isinstance(obj, Workload):
            return None
        k = self._positions.get(self._known(obj))
        if k is None:
            return None
        self.used.add(k)
        return ("window", k)


class _Unpickler(pickle.Unpickler):
    """Reads what :class:`_WindowPickler` wrote (and an identity pickler before it,
    naming windows the same way), each position as that window of ``windows``."""

    def __init__(self, file: Any, windows: dict[int, Any]) -> None:
        super().__init__(file)
        self._windows = windows

    def persistent_load(self, pid: Any) -> Any:
        kind, k = pid
        if kind != "window" or k not in self._windows:
            raise pickle.UnpicklingError(f"no window {pid!r}")
        return self._windows[k]


def snapshot_env(
    env: Any, digests: Sequence[str], known: WindowDigests | None = None
) -> tuple[bytes, list[int]]:
    """``env`` (a worker's, with its wrappers; or the in-process envs' list) pickled,
    each window whose digest is among ``digests`` (the run's
    :attr:`RunWindows.digests`) named by its position, and the positions named (the
    windows :func:`restore_env` is to be given); the digests taken from ``known``
    (the worker's, kept between checkpoints, or :attr:`RunWindows.known`). Runs in
    the worker (``RunStateSnapshots``) and, for ``env.vec=dummy``, in the run's."""
    data = io.BytesIO()
    pickler = _WindowPickler(data, digests, WindowDigests() if known is None else known)
    pickler.dump(env)
    return data.getvalue(), sorted(pickler.used)


def error_text(error: BaseException) -> str:
    """``error`` on one line, with its kind."""
    return f"{type(error).__name__}: {' '.join(str(error).split())}"


def restore_env(data: bytes, windows: dict[int, Any]) -> Any:
    """The env :func:`snapshot_env` pickled as ``data``, each position it names as
    that window of ``windows``. Runs in the worker (``RunStateSnapshots``)."""
    return _Unpickler(io.BytesIO(data), windows).load()
