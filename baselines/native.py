"""Which implementation of the baselines' hottest parts runs: compiled or Python.

Three parts exist twice: the routers' per-node scans (:mod:`baselines.routers`),
BTB's per-arrival decision (:meth:`baselines.btb.BTB.decide`, its rule variants
and the X-in-Z count), and the first-token estimates the ``eft`` routers route by
(:func:`envs.sim.forecast.estimates_with_hits`). The Python is the readable
reference and the tests' oracle; the compiled twins ``baselines._native.routers``,
``baselines._native.btb`` and ``envs.sim._native.forecast`` (Cython, built by
``pip install -e .`` when a C compiler is there) make the same choices with the
same random draws and the same estimates, to the bit. The first two read the
compiled simulator's nodes as C structs (on the reference simulator's nodes they
call the Python); the estimates run on the nodes of either core. They are chosen
only where the simulator is compiled (:data:`envs.sim.native.CORE`); this module
is the one place that chooses, by the simulator's rule: the reference under
``BTB_GYM_PURE_PYTHON`` or when a compiled module is missing (one line on stderr,
:data:`NOTICE`; without the estimates' module alone, :data:`FORECAST_NOTICE`, and
the other two still run compiled). :data:`ROUTERS_CORE` says which runs.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from envs.sim import native as sim_native
from envs.sim.native import PURE_PYTHON_ENV

if TYPE_CHECKING:
    from baselines.btb import BTB
    from envs.sim.simulator import Simulator

NOTICE = "btb-gym: compiled baselines unusable ({}); using the Python routers and BTB"
FORECAST_NOTICE = (
    "btb-gym: compiled first-token estimates unusable ({}); the eft routers use the Python ones"
)


def _choose() -> tuple[Any, Any, Any, str]:
    """(``baselines._native.routers``, ``baselines._native.btb``,
    ``envs.sim._native.forecast``, ROUTERS_CORE); the modules are None for the
    reference. The estimates are chosen on their own."""
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0") or sim_native.CORE != "compiled":
        return None, None, None, "python"  # (a missing compiled simulator has said so already)
    try:
        routers = importlib.import_module("baselines._native.routers")
        btb = importlib.import_module("baselines._native.btb")
    except ImportError as error:  # not built, or built for another Python or simulator
        print(NOTICE.format(error), file=sys.stderr)
        return None, None, None, "python"
    try:
        forecast = importlib.import_module("envs.sim._native.forecast")
    except ImportError as error:
        print(FORECAST_NOTICE.format(error), file=sys.stderr)
        forecast = None
    return routers, btb, forecast, "compiled"


ROUTERS, BTB_TWIN, FORECAST, ROUTERS_CORE = _choose()

BTB_HOOKS = ("decide", "_otherwise", "_holders", "_warm_and_route", "_issued", "_computes")
"""The methods of a BTB class that the compiled decision repeats."""


def btb_twin(policy: BTB, sim: Simulator) -> Callable[[BTB, Simulator, Any], int] | None:
    """The compiled ``decide`` for ``policy`` on ``sim``, or None for the reference:
    only on the compiled simulator's nodes, not in shadow mode, on at most the
    twin's node count, and only for a class whose BTB methods are all those of the
    nearest class in its ancestry that says the twin repeats them
    (``_twin_rules = True`` in its body: BTB, btb_pending, the threshold env's)."""
    if BTB_TWIN is None or policy.shadow or sim.n_nodes > BTB_TWIN.NODES_MAX:
        return None
    if not sim.nodes or type(sim.nodes[0]) is not sim_native.compiled_core().Node:
        return None
    cls = type(policy)
    owner = next((c for c in cls.__mro__ if c.__dict__.get("_twin_rules")), None)
    if owner is None or any(
        getattr(cls, hook, None) is not getattr(owner, hook, None) for hook in BTB_HOOKS
    ):
        return None
    decide: Callable[[BTB, Simulator, Any], int] = BTB_TWIN.decide
    return decide
