"""Checking before a run that its folder can be written (the files themselves are
written with :mod:`envs.files`)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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
