"""Which implementation of the simulator's hottest parts runs: compiled or Python.

Three parts exist twice: the prefix cache (:mod:`envs.sim.cache`), the block
chainer (``BlockChainer`` in :mod:`envs.sim.request`, which trace readers use on
every row) and the simulator's hot path (the nodes of :mod:`envs.sim.node` and
the per-event methods of :class:`~envs.sim.simulator.Simulator`). The Python
modules are the readable reference and the tests' oracle; their compiled twins
``envs.sim._native.cache``, ``envs.sim._native.chainer`` and
``envs.sim._native.core`` (Cython, built by ``pip install -e .`` when a C
compiler is there) give the same results call for call and run for run. This
module is the one place that chooses between them: the simulator builds its
caches from :data:`PrefixCache`, the trace readers their chainers from
:data:`BlockChainer`, and ``Simulator(...)`` is a
:data:`~envs.sim.simulator.CompiledSimulator` when :data:`CORE` is
``"compiled"`` (``Simulator(..., core="python")`` builds the reference event
loop and nodes in the same process; its caches are still :data:`PrefixCache`).

- The compiled ones when they import.
- The reference when the environment variable ``BTB_GYM_PURE_PYTHON`` is set
  (to anything but ``0`` or nothing), without a word.
- The reference when a compiled module is missing or cannot load, with one
  line on stderr, once per process (:data:`NOTICE`).

:data:`CORE` says which one runs (``"compiled"`` or ``"python"``); ``bench``
records it.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

PURE_PYTHON_ENV = "BTB_GYM_PURE_PYTHON"
NOTICE = (
    "btb-gym: compiled core not built (no C compiler at install?); using the pure-Python simulator"
)


def _choose() -> tuple[type, type, str]:
    """(PrefixCache, BlockChainer, CORE) for this process."""
    from envs.sim import cache, request

    reference = (cache.PrefixCache, request.BlockChainer, "python")
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return reference
    try:
        compiled_cache = importlib.import_module("envs.sim._native.cache")
        compiled_chainer = importlib.import_module("envs.sim._native.chainer")
        importlib.import_module("envs.sim._native.core")  # the simulator's (compiled_core)
    except ModuleNotFoundError:
        print(NOTICE, file=sys.stderr)
        return reference
    except ImportError as error:  # built, but for another Python or another cache.py
        print(
            f"btb-gym: compiled core unusable ({error}); using the pure-Python simulator",
            file=sys.stderr,
        )
        return reference
    return compiled_cache.PrefixCache, compiled_chainer.BlockChainer, "compiled"


def compiled_core() -> Any:
    """The compiled simulator core (``envs.sim._native.core``: its ``Node`` and
    ``SimCore``); only when :data:`CORE` is ``"compiled"``."""
    return importlib.import_module("envs.sim._native.core")


if TYPE_CHECKING:  # both implementations have the reference's interface
    from envs.sim.cache import PrefixCache
    from envs.sim.request import BlockChainer

    CORE: str
else:
    PrefixCache, BlockChainer, CORE = _choose()
