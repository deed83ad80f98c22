"""Result and agent files: written atomically, so a crash never leaves half a file
behind, as strict JSON. Used by the agents (``agent.json``) and the experiment
commands (results); the simulator core does not use it.

JSON written here is strict (RFC 8259), which has no infinity or NaN: an infinite
float is written as the string ``"Infinity"`` or ``"-Infinity"`` (e.g. an
unbounded ``host_ram_bytes``) and NaN, a statistic with no value, as ``null``.
:func:`read_json` turns the two strings back into floats.
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary file in the same folder and a rename."""
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file in the same folder and a rename."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with naming_file(target):
            os.fchmod(fd, file_mode())  # mkstemp makes 0600; give the usual file mode
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def fsync_file(path: str | os.PathLike[str]) -> None:
    """Flush a file another library wrote (SB3's ``model.zip``) to the disk, as
    :func:`write_bytes_atomic` does its own before the rename that publishes it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def folder_atomic(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A folder that appears at ``path`` whole or not at all (an agent checkpoint:
    ``model.zip`` and ``agent.json`` belong together). The caller fills the folder
    yielded, a hidden sibling named by :func:`folder_leftovers`; on a clean exit it is
    renamed to ``path``, an earlier folder there being moved aside first and removed
    after. If the caller raises (Ctrl-C too), what it wrote goes and ``path`` is as it
    was. A process killed outright (SIGKILL, a power cut) can leave the hidden
    siblings, which no reader looks at: the next write of ``path`` clears them, and
    puts back an earlier folder caught moved aside. A symbolic link at ``path`` is
    followed, as a file written through it would be."""
    target = Path(path)
    if target.is_symlink():
        target = target.resolve()
    if target.exists() and not target.is_dir():
        raise FileExistsError(errno.EEXIST, "exists and is not a folder", str(target))
    partial, replaced = (target.with_name(name) for name in folder_leftovers(target.name))
    if replaced.is_dir() and not target.exists():  # killed between the two renames
        replaced.rename(target)
    for leftover in (partial, replaced):
        shutil.rmtree(leftover, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        yield partial
        if target.exists():
            target.rename(replaced)
        partial.rename(target)
    except BaseException:
        if replaced.is_dir() and not target.exists():  # interrupted between the two renames
            replaced.rename(target)
        raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
        if target.exists():
            shutil.rmtree(replaced, ignore_errors=True)


def folder_leftovers(name: str) -> tuple[str, str]:
    """The hidden siblings :func:`folder_atomic` writes folder ``name`` through: the
    one being filled and the earlier folder moved aside."""
    return f".{name}.partial", f".{name}.replaced"


@contextmanager
def naming_file(path: str | os.PathLike[str]) -> Iterator[None]:
    """An OSError that names no file (a full disk, a file-size limit: ``[Errno 28]
    No space left on device``) raised inside is raised again naming ``path``, the
    file being written, so the one-line error says which."""
    try:
        yield
    except OSError as error:
        raise naming(error, path) from None


def naming(error: OSError, path: str | os.PathLike[str]) -> OSError:
    """``error``, or, if it names no file, the same error naming ``path`` (what
    :func:`naming_file` raises; for a loop that catches its own errors)."""
    if error.filename is not None:
        return error
    return OSError(error.errno, error.strerror or str(error), str(path))


def file_mode() -> int:
    """The permissions an ordinary new file gets (temporary files are made 0600)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


INFINITIES = {"Infinity": math.inf, "-Infinity": -math.inf}


def strict_json(value: Any) -> Any:
    """``value`` with every non-finite float replaced as the module docstring says."""
    if isinstance(value, float) and not math.isfinite(value):
        if math.isnan(value):
            return None
        return "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {key: strict_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(item) for item in value]
    return value


def dumps_strict(payload: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`strict_json` (never a bare Infinity or NaN)."""
    return json.dumps(strict_json(payload), allow_nan=False, **kwargs)


def _revive(value: Any) -> Any:
    if isinstance(value, str):
        return INFINITIES.get(value, value)
    if isinstance(value, dict):
        return {key: _revive(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_revive(item) for item in value]
    return value


def read_json(path: str | os.PathLike[str]) -> Any:
    """A JSON file written by :func:`write_json_atomic`, infinities restored. Older
    files with bare ``Infinity`` (Python's non-standard JSON) read the same."""
    return _revive(json.loads(Path(path).read_text(encoding="utf-8")))


def write_json_atomic(path: str | os.PathLike[str], payload: Any) -> Path:
    """Write ``payload`` as indented strict JSON (see the module docstring), atomically."""
    return write_text_atomic(path, dumps_strict(payload, indent=2, sort_keys=False) + "\n")
