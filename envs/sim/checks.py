"""Checks of numbers given by a user, shared by every layer that takes settings.

The simulator, the workloads, the environments and the policies all validate
numbers from configs, command lines and constructors. The checks live here, in
the lowest layer, so every package may import them. Each raises with the field
as its caller names it (``"btb.x"``, ``"sim.max_batch"``) and the bad value; a
caller that reports configuration errors passes ``error=ConfigError``.

Two families differ on purpose. :func:`is_number` and :func:`check_int` take
Python numbers only (a config value). :func:`check_number` and
:func:`check_whole_number` also take numpy scalars (a Gymnasium env's keyword
arguments often come from numpy). ``bool`` is never a number: ``True`` is not 1.
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

import numpy as np


def is_number(value: Any) -> bool:
    """Whether ``value`` is a Python int or float (not a bool; numpy's float64
    subclasses float and passes, other numpy scalars do not)."""
    return not isinstance(value, bool) and isinstance(value, (int, float))


def check_int(field: str, value: Any, minimum: int, error: type[ValueError] = ValueError) -> None:
    """``value`` must be a Python int (not a bool) >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise error(f"{field} must be an integer >= {minimum}, got {value!r}")


def check_range(
    field: str, value: Any, low: float, high: float = math.inf, finite: bool = False
) -> float:
    """``value`` must be a Python number in ``[low, high]`` (also finite if ``finite``:
    an unbounded ``high`` then excludes infinity); returned as a float."""
    if not is_number(value) or not low <= value <= high or (finite and not math.isfinite(value)):
        kind = "a finite number" if finite else "a number"
        bounds = f"in [{low}, {high}]" if high != math.inf else f">= {low}"
        raise ValueError(f"{field} must be {kind} {bounds}, got {value!r}")
    return float(value)


def check_number(field: str, value: Any, positive: bool = False) -> None:
    """``value`` must be a finite real number (numpy scalars too), > 0 if ``positive``
    else >= 0."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )
    if ok:
        ok = math.isfinite(value) and (value > 0 if positive else value >= 0)
    if not ok:
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{field} must be a finite number {bound}, got {value!r}")


def is_whole_number(value: Any) -> bool:
    """Whether ``value`` is an int or a numpy integer (not a bool of either kind)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_whole_number(field: str, value: Any, minimum: int) -> None:
    """``value`` must be an int or numpy integer >= ``minimum``."""
    if not is_whole_number(value):
        raise ValueError(f"{field} must be a whole number >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{field} must be >= {minimum}, got {value!r}")


def check_fields_non_negative(where: str, config: Any) -> None:
    """Every field of the dataclass ``config`` must be a finite number >= 0, or a
    ``(low, high)`` pair of them with low <= high; ``where`` names the class."""
    for f in fields(config):
        value = getattr(config, f.name)
        values = value if isinstance(value, tuple) else (value,)
        for v in values:
            if not is_number(v) or not math.isfinite(v):
                raise ValueError(f"{where}.{f.name} must be finite numbers, got {value!r}")
            if v < 0:
                raise ValueError(f"{where}.{f.name} must be >= 0, got {value!r}")
        if isinstance(value, tuple) and (len(value) != 2 or value[0] > value[1]):
            raise ValueError(f"{where}.{f.name} must be a (low, high) pair, got {value!r}")
