"""Policies kept outside the package: the modules ``BTB_GYM_PLUGINS`` names.

A router of your own lives in a module of your own that registers it
(``@register("hitmax")``, :mod:`baselines.policy`). Every command imports the
modules the environment variable ``BTB_GYM_PLUGINS`` lists (comma-separated,
importable from ``PYTHONPATH`` or the folder the command runs in) before it reads
its options, so their policies are known by name there::

    BTB_GYM_PLUGINS=mypolicy python -m experiments.compare policies=hitmax,btb,cache_aware

A module that cannot be imported is one line naming it (exit 2)."""

from __future__ import annotations

import importlib
import os
import sys

VARIABLE = "BTB_GYM_PLUGINS"
_LOADED: set[str] = set()


def load_plugins() -> list[str]:
    """Import each module ``BTB_GYM_PLUGINS`` names (once a process); returns them.
    A module that fails to import is a ValueError naming the variable and the module
    (its own error after it)."""
    names = [n.strip() for n in os.environ.get(VARIABLE, "").split(",") if n.strip()]
    if names and "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` finds the project's own modules
    for name in names:
        if name in _LOADED:
            continue
        try:
            importlib.import_module(name)
        except Exception as error:  # its own error, whatever it is, in the one line
            raise ValueError(
                f"{VARIABLE}={os.environ[VARIABLE]}: importing {name!r} failed: "
                f"{type(error).__name__}: {' '.join(str(error).split())}"
            ) from None
        _LOADED.add(name)
    return names
