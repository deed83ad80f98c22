"""Simulator tests: make the shared helpers in ``simkit.py`` importable as
``simkit`` whatever pytest's import mode (the project uses importlib, which does
not put test directories on ``sys.path``), and keep every test from leaking the
process-wide GC threshold that simulator runs tune."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


@pytest.fixture(autouse=True)
def _restore_gc_threshold():  # type: ignore[no-untyped-def]
    """Simulator runs tune the process-wide GC threshold; no test may leak it."""
    threshold = gc.get_threshold()
    yield
    gc.set_threshold(*threshold)
