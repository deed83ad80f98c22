"""Environment tests: keep every test from leaking the process-wide GC threshold
that environments and simulator runs raise (an env holds it until it is closed
or collected)."""

from __future__ import annotations

import gc

import pytest


@pytest.fixture(autouse=True)
def _restore_gc_threshold():  # type: ignore[no-untyped-def]
    threshold = gc.get_threshold()
    yield
    gc.set_threshold(*threshold)
