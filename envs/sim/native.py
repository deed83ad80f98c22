"""Which implementation of the simulator's hottest parts runs: compiled or Python.

The prefix cache exists twice: :mod:`envs.sim.cache`, the readable pure-Python
reference and the tests' oracle, and its compiled twin
``envs.sim._native.cache`` (Cython, built by ``pip install -e .`` when a C
compiler is there), which gives the same results call for call. This module is
the one place that chooses between them; the simulator builds its caches from
:data:`PrefixCache`.

- The compiled cache when it imports.
- The reference when the environment variable ``BTB_GYM_PURE_PYTHON`` is set
  (to anything but ``0`` or nothing), without a word.
- The reference when the compiled module is missing or cannot load, with one
  line on stderr, once per process (:data:`NOTICE`).

:data:`CORE` says which one runs (``"compiled"`` or ``"python"``); ``bench``
records it.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

PURE_PYTHON_ENV = "BTB_GYM_PURE_PYTHON"
NOTICE = (
    "btb-gym: compiled core not built (no C compiler at install?); using the pure-Python simulator"
)


def _choose() -> tuple[type, str]:
    from envs.sim import cache

    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return cache.PrefixCache, "python"
    try:
        compiled = importlib.import_module("envs.sim._native.cache")
    except ModuleNotFoundError:
        print(NOTICE, file=sys.stderr)
        return cache.PrefixCache, "python"
    except ImportError as error:  # built, but for another Python or another cache.py
        print(
            f"btb-gym: compiled core unusable ({error}); using the pure-Python simulator",
            file=sys.stderr,
        )
        return cache.PrefixCache, "python"
    return compiled.PrefixCache, "compiled"


if TYPE_CHECKING:  # both implementations have the reference's interface
    from envs.sim.cache import PrefixCache

    CORE: str
else:
    PrefixCache, CORE = _choose()
