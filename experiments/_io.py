"""A run's folder: checked writable before the run, then claimed (locked against a
second run, and refused if it holds a run already unless ``overwrite=true``). The
files themselves are written atomically with :mod:`envs.files`. An earlier run's
files that ``overwrite=true`` replaces are kept aside until the new run finishes
(:data:`REPLACED_NAME`)."""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import functools
import hashlib
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar


class UnwritableDirError(ValueError):
    """A run folder that cannot be created or written to."""


def check_writable_dir(path: str | os.PathLike[str], what: str, source: str = "") -> Path:
    """Fail now, not after a long run, when ``path`` cannot become a folder we write in.

    ``what`` names the command and option (``experiments.compare: out_dir``),
    ``source`` where the value came from (``the command line``), if not obvious.
    Nothing is created: the nearest existing folder on the way is tried with a
    temporary file, which is removed again.
    """
    target = Path(path)
    label = f"{what}={str(path)!r}" + (f" (from {source})" if source else "")
    check_not_home_shorthand(target, label)
    existing = target
    while not existing.exists() and existing != existing.parent:
        if existing.is_symlink():  # a dangling link: mkdir would fail on it
            raise UnwritableDirError(f"{label}: {existing} is a broken symlink")
        existing = existing.parent
    if not existing.is_dir():
        raise UnwritableDirError(f"{label}: {existing} is a file, not a folder")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".btb-write-test.", dir=existing)
    except OSError as error:
        reason = error.strerror or str(error)
        raise UnwritableDirError(f"{label}: cannot write in {existing} ({reason})") from None
    os.close(fd)
    os.unlink(tmp)
    return target


def check_not_home_shorthand(path: str | os.PathLike[str], label: str) -> None:
    """Refuse a path to write to that begins with ``~`` (``~/runs/x``, ``~me/x``),
    which only a shell expands, unquoted at the start of a word (not ``sh``'s
    ``out_dir=~/x``, a quoted one or a config file's): it would make a folder named
    ``~`` in the working directory. The message gives the path expanded.
    ``label`` names the option (``experiments.compare: out_dir='~/x'``)."""
    parts = Path(path).parts
    if not parts or not parts[0].startswith("~"):
        return
    expanded = os.path.expanduser(str(path))
    shown = f"write it out ({expanded})" if expanded != str(path) else "write it out in full"
    raise UnwritableDirError(
        f"{label}: a path beginning with '~' is not expanded here, only by a shell; {shown}"
    )


def nearest_existing(path: str | os.PathLike[str]) -> Path:
    """``path`` itself if it exists, else its nearest ancestor that does: what a
    refused run's tidy-up must not remove (see :func:`remove_empty_dirs`)."""
    existing = Path(path)
    while not existing.exists() and not existing.is_symlink() and existing != existing.parent:
        existing = existing.parent
    return existing


def remove_empty_dirs(folder: Path, keep: Path) -> None:
    """Remove ``folder`` and then each parent below ``keep`` while it is empty (the
    folders a run made on the way to its out_dir); anything not empty is left."""
    keep = keep.resolve()
    current = folder.resolve()
    while current != keep and keep in current.parents:
        try:
            current.rmdir()
        except OSError:
            return
        current = current.parent


LOCK_NAME = ".btb-run.lock"
"""The lock file a run holds in its folder while it writes there."""
_PATTERN = re.compile(r"[*?\[]")
"""Marks an ``outputs`` entry as a shell pattern (:mod:`fnmatch`)."""


REPLACED_NAME = ".btb-replaced"
"""The folder inside a run folder where ``overwrite=true`` keeps the earlier run's
files while the new run runs: removed when the run finishes; put back when it ends
otherwise (an error found mid-run, Ctrl-C) before writing any of its outputs (its
own log and W&B run then go: they describe a run that left nothing; a W&B run
holding what it logged counts as an output, :func:`keep_companion`); left, and
said, when it ends otherwise after writing some (so neither run's files are
lost)."""


class OutDirError(ValueError):
    """A run folder that is in use by another run, or holds a run already."""


def folder_refusal(error: BaseException) -> BaseException | None:
    """The :class:`OutDirError` or :class:`UnwritableDirError` ``error`` is, or was
    raised from or while handling (a refusal raised in a resolver comes out of
    OmegaConf wrapped in its own errors); None when there is none."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, (OutDirError, UnwritableDirError)):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def replaced_message(label: str) -> str:
    """The one line a run is refused with when its folder holds :data:`REPLACED_NAME`."""
    return (
        f"{label} holds {REPLACED_NAME}/, an earlier run's files that an overwrite=true "
        "run kept aside and did not finish: keep what you want of them and of the "
        "files beside them, then remove that folder"
    )


@dataclass
class RunFolder:
    """A run folder this process holds (see :func:`claim_out_dir`)."""

    path: Path
    created: bool
    _fd: int | None
    existed: Path | None = None
    """The nearest folder on the way that existed before the run (kept on release)."""
    where: Path | None = None
    """``path`` made absolute when claimed: a job that changes its working directory
    (``hydra.job.chdir=true``) still finds and releases it."""
    replaced: list[str] = field(default_factory=list)
    """The earlier run's files and folders moved into :data:`REPLACED_NAME`."""
    outputs: tuple[str, ...] = ()
    """What the run writes (names or patterns): whether it wrote any, at release."""
    filled: set[str] = field(default_factory=set)
    """Companions the run filled with records of its own (a W&B run holding what it
    logged, :func:`keep_companion`): they count as written at release."""

    def release(self, finished: bool = False) -> None:
        """Give the folder up: settle the earlier run's files ``overwrite=true``
        moved aside (removed if the run ``finished``, else put back unless the run
        wrote files of its own: :data:`REPLACED_NAME`), drop the lock (and its
        file), and remove the folder if this run made it and left nothing in it (a
        refused run)."""
        if self._fd is None:
            return
        path = self.where or self.path
        if self.replaced:
            written = (*self.outputs, *self.filled)
            _settle_replaced(path, self.replaced, written, finished)
            self.replaced = []
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            (path / LOCK_NAME).unlink()
        os.close(fd)  # closing the descriptor drops the flock
        if self.created:  # only if empty, and the folders made on the way to it
            remove_empty_dirs(path, self.existed or path.parent)
        with contextlib.suppress(ValueError):
            _HELD.remove(self)


# Folders claimed and not yet released, in order (released by release_out_dirs).
_HELD: list[RunFolder] = []


_LOCK_TRIES = 5
"""Tries at a folder's lock, 10 ms apart, before a run is refused as another's:
:func:`in_use` takes the lock for an instant to look."""


def in_use(path: str | os.PathLike[str]) -> bool:
    """Whether another run holds ``path`` now (its lock, :data:`LOCK_NAME`, taken).
    Creates nothing: a folder without a lock file is not in use. It takes the lock
    for an instant to look (flock has no query), which :func:`claim_out_dir` waits
    out."""
    try:
        fd = os.open(Path(path) / LOCK_NAME, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # (drops the lock if taken)
    return False


def in_use_message(label: str, movable: bool = True) -> str:
    """The one line a run is refused with when another run holds its folder;
    ``movable``: the run can write elsewhere (an ``out_dir``), which it suggests
    (``train_rescore`` writes in the run it rescores: it cannot)."""
    elsewhere = ", or choose another out_dir" if movable else ""
    return f"{label}: another run is writing in that folder now (wait for it to end{elsewhere})"


def claim_out_dir(
    path: str | os.PathLike[str],
    what: str,
    outputs: Sequence[str],
    overwrite: bool = False,
    source: str = "",
    ignore: Sequence[str] = (),
    inputs: Sequence[tuple[str, str]] = (),
    companions: Sequence[str] = (),
    movable: bool = True,
) -> RunFolder:
    """Make ``path`` this run's folder, before the run writes anything there.

    The folder is created if needed and locked (an ``flock`` on :data:`LOCK_NAME`,
    dropped by :meth:`RunFolder.release` or when the process ends, however it ends):
    a second run into the same folder is refused while the first one writes. A
    folder that already holds anything (besides ``ignore``: Hydra's own files) is
    refused unless ``overwrite``; with it, the files and folders this command writes
    (``outputs``, names in the folder or patterns of names) are moved aside first
    (into :data:`REPLACED_NAME`), so no earlier run's file is left beside this
    run's, and none is lost if the run does not finish (see
    :meth:`RunFolder.release`). So are ``companions``, the records a run starts
    before it writes any output (its W&B folder, its log), which do not count as
    its outputs there; a companion that is a plain file is copied aside and emptied
    in place instead (Hydra's log handler, open on it, then writes this run's lines
    into it); but not
    if one of them holds one of the run's ``inputs`` (``(option, path)``: a
    checkpoint to resume, a trace), which would be gone before the run reads it:
    that is refused, naming the option. A folder still holding
    :data:`REPLACED_NAME` (a run that ended without settling it) is refused too.
    ``what`` and ``source`` name the option as :func:`check_writable_dir` does;
    ``movable``: whether the run could write in another folder instead, as the
    refusals suggest (:func:`in_use_message`).
    Errors are :class:`OutDirError` (a ValueError).
    """
    target = check_writable_dir(path, what, source)
    label = f"{what}={str(path)!r}" + (f" (from {source})" if source else "")
    created = not target.exists()
    existed = nearest_existing(target)
    target.mkdir(parents=True, exist_ok=True)
    lock = target / LOCK_NAME
    fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
    held = RunFolder(target, created, fd, existed.resolve(), target.resolve(), [], tuple(outputs))
    # (a companion is never an output: what the run wrote is told by its outputs)
    companions = [name for name in companions if not _written(name, outputs)]
    try:
        for attempt in range(_LOCK_TRIES):  # (another command's in_use() holds it an instant)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == _LOCK_TRIES - 1:
                    raise
                time.sleep(0.01)
        # the file may have been removed (and the lock dropped) by its holder meanwhile
        if os.fstat(fd).st_ino != os.stat(lock).st_ino:
            raise BlockingIOError
    except (BlockingIOError, FileNotFoundError):
        os.close(fd)
        raise OutDirError(in_use_message(label, movable)) from None
    _HELD.append(held)
    made_store = False
    try:
        skip = {LOCK_NAME, *ignore}
        present = sorted(entry.name for entry in target.iterdir() if entry.name not in skip)
        # a pattern (``rescore_val*.json``) names what is there that matches it
        outputs = [
            name
            for output in outputs
            for name in (fnmatch.filter(present, output) if _PATTERN.search(output) else [output])
        ]
        if REPLACED_NAME in present:
            raise OutDirError(replaced_message(label))
        if present and not overwrite:
            listed = ", ".join(present[:3]) + (", ..." if len(present) > 3 else "")
            raise OutDirError(
                f"{label} already holds {listed}; refusing to overwrite it (overwrite=true "
                "replaces what this command writes; or choose another out_dir)"
            )
        for name in (*outputs, *companions) if present else ():
            moved = target / name
            spelt = Path(os.path.abspath(moved))  # (a path through a link to it goes too)
            removed = None if moved.is_symlink() else moved.resolve()  # (not what one names)
            for option, given in inputs:
                read = Path(given).expanduser()
                where, where_spelt = read.resolve(), Path(os.path.abspath(read))
                if (
                    where_spelt == spelt
                    or spelt in where_spelt.parents
                    or (removed is not None and (where == removed or removed in where.parents))
                ):
                    raise OutDirError(
                        f"{label}: overwrite=true would move {moved} aside, which holds "
                        f"{option}={given!r}, an input of this run (copy it out of the "
                        "folder, or choose another out_dir)"
                    )
        moving = [
            name
            for name in (*outputs, *companions)
            if (target / name).exists() or (target / name).is_symlink()
        ]
        if moving and overwrite:
            store = target / REPLACED_NAME
            store.mkdir()
            made_store = True
            for name in moving:  # (a link is moved, not what it names)
                path = target / name
                if name in companions and path.is_file() and not path.is_symlink():
                    shutil.copy2(path, store / name)  # (its time too: put back as it was)
                    held.replaced.append(name)
                    path.open("w").close()
                    continue
                os.rename(path, store / name)
                held.replaced.append(name)
    except BaseException:  # (refused, or failed moving: every move undone, whatever is there)
        if made_store:
            _put_back(target, held.replaced)
        held.replaced = []
        held.release()
        raise
    return held


def _put_back(folder: Path, replaced: Sequence[str]) -> None:
    """The earlier run's files, kept aside in :data:`REPLACED_NAME`, back in their
    places (what stands there now removed: a companion the run started over), and
    the emptied store removed. A file system error is said in one line, never
    raised over the run's own outcome."""
    store = folder / REPLACED_NAME
    try:
        for name in replaced[::-1]:
            if (folder / name).exists() or (folder / name).is_symlink():
                _remove(folder / name)
            os.rename(store / name, folder / name)
        store.rmdir()
    except OSError as error:
        print(
            f"warning: could not put back the earlier run's files from {store} ({error})",
            file=sys.stderr,
        )


def _settle_replaced(
    folder: Path, replaced: Sequence[str], outputs: Sequence[str], finished: bool
) -> None:
    """What :meth:`RunFolder.release` does with the earlier run's files it kept
    aside (:data:`REPLACED_NAME`); a file system error is said in one line, never
    raised over the run's own outcome."""
    store = folder / REPLACED_NAME
    try:
        if finished:
            _remove(store)
            return
        present = [entry.name for entry in folder.iterdir()]
        if any(_written(name, outputs) for name in present):
            print(
                f"note: this run did not finish; the earlier run's files that "
                f"overwrite=true replaced are kept in {store}",
                file=sys.stderr,
            )
            return
        _put_back(folder, replaced)
    except OSError as error:
        print(
            f"warning: could not settle the earlier run's files in {store} ({error})",
            file=sys.stderr,
        )


def _written(name: str, outputs: Sequence[str]) -> bool:
    """Whether ``name`` is one of ``outputs`` (names, or patterns of names)."""
    return any(
        fnmatch.fnmatch(name, output) if _PATTERN.search(output) else name == output
        for output in outputs
    )


def claim_new_out_dir(path: str | os.PathLike[str], what: str) -> RunFolder:
    """Claim a default run folder, one the user did not name: ``path`` if it is free,
    else the first free one of ``path-2``, ``path-3``, ... Each is tried as
    :func:`claim_out_dir` tries a folder (its lock, and never ``overwrite``), so runs
    given the same default (started in the same second) each get a folder of their
    own, whether they run one after another or at once."""
    base = Path(path)
    n = 1
    while True:
        folder = base if n == 1 else base.with_name(f"{base.name}-{n}")
        try:
            return claim_out_dir(folder, what, ())
        except OutDirError:  # another run's (or being written by one): the next name
            n += 1


FOLDER_PART_MAX = 80
"""The longest piece of a default run folder's name taken from a user's input (a
trace file's name): longer ones are cut, with a hash of the whole, so the folder's
name stays under the file system's 255 bytes."""


def folder_part(label: str) -> str:
    """``label`` as a piece of a run folder's name: characters other than word
    characters, ``.`` and ``-`` become ``-``, and a label longer than
    :data:`FOLDER_PART_MAX` is cut, ending in 8 hex digits of the whole one's sha1."""
    part = re.sub(r"[^\w.-]", "-", label)
    if len(part.encode()) <= FOLDER_PART_MAX:
        return part
    digest = hashlib.sha1(part.encode()).hexdigest()[:8]
    return part.encode()[: FOLDER_PART_MAX - 9].decode(errors="ignore") + f"-{digest}"


def claim_run_dir(
    chosen: str | os.PathLike[str] | None,
    default: Path,
    what: str,
    outputs: Sequence[str],
    overwrite: bool = False,
    inputs: Sequence[tuple[str, str]] = (),
    companions: Sequence[str] = (),
) -> Path:
    """The run's folder, claimed: ``chosen`` (the user's ``out_dir``) as
    :func:`claim_out_dir` claims it (refused if it holds a run, unless ``overwrite``;
    never clearing one of ``inputs``; ``companions`` as there), or, when none was
    chosen, a new folder named after ``default`` (see :func:`claim_new_out_dir`)."""
    if chosen:
        return claim_out_dir(
            chosen, what, outputs, overwrite, inputs=inputs, companions=companions
        ).path
    return claim_new_out_dir(default, what).path


def keep_companion(path: str | os.PathLike[str], name: str) -> None:
    """Count companion ``name`` (``wandb``) of the run folder ``path`` this process
    holds as something the run wrote: a run that ends without finishing then keeps
    it, and leaves the earlier run's files that ``overwrite=true`` kept aside where
    they are (said in a ``note:``), instead of putting them back over it."""
    target = Path(path).resolve()
    for held in _HELD:
        if (held.where or held.path.resolve()) == target:
            held.filled.add(name)


def holds_out_dir(path: str | os.PathLike[str]) -> bool:
    """Whether this process has claimed ``path`` and not released it yet."""
    target = Path(path).resolve()
    return any((held.where or held.path.resolve()) == target for held in _HELD)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def release_out_dirs(keep: int = 0, finished: bool = False) -> None:
    """Release every folder claimed after the first ``keep`` still held, by a run
    that ``finished`` or not (:meth:`RunFolder.release`)."""
    for held in _HELD[keep:][::-1]:
        held.release(finished)


F = TypeVar("F", bound=Callable[..., Any])


def releasing_out_dirs(fn: F) -> F:
    """Decorate a command's ``main``: the folders it claims are released when it
    returns (the run finished) or raises (a second call in the same process may use
    them again)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        keep = len(_HELD)
        try:
            result = fn(*args, **kwargs)
        except BaseException:
            release_out_dirs(keep)
            raise
        release_out_dirs(keep, finished=True)
        return result

    return wrapper  # type: ignore[return-value]
