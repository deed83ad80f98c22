"""Checks of numbers given by a user, shared by every layer that takes settings.

The simulator, the workloads, the environments and the policies all validate
numbers from configs, command lines and constructors. The checks live here, in
the lowest layer, so every package may import them. Each raises with the field
as its caller names it (``"btb.x"``, ``"sim.max_batch"``) and the bad value, as a
:class:`~envs.sim.errors.ConfigError` that carries the field as data (an edge that
knows the field's config path names it so); ``error`` may ask for a subclass.

One family: :func:`checked_number` is the rule (what a number is, its bounds, the
message); the other checkers are it with fixed arguments. A number is a Python or
numpy int or float (a Gymnasium env's keyword arguments often come from numpy);
``bool`` is never a number: ``True`` is not 1.
"""

from __future__ import annotations

import math
import sys
from dataclasses import fields
from typing import Any

import numpy as np

from envs.sim.errors import ConfigError, echoed


def is_number(value: Any, integer: bool = False) -> bool:
    """Whether ``value`` is a real number: a Python or numpy int or float (an int or
    numpy integer if ``integer``), never a bool of either kind."""
    if isinstance(value, (bool, np.bool_)):
        return False
    return isinstance(
        value, (int, np.integer) if integer else (int, float, np.integer, np.floating)
    )


_FLOAT_MAX = sys.float_info.max


def _finite(value: Any) -> bool:
    """``math.isfinite(value)`` for a number, an int beyond every float (which it
    raises OverflowError on) not finite: the simulator computes in floats."""
    if isinstance(value, (int, np.integer)):
        return abs(int(value)) <= _FLOAT_MAX
    return math.isfinite(value)


def checked_number(
    field: str,
    value: Any,
    low: float = 0.0,
    high: float = math.inf,
    *,
    integer: bool = False,
    above: bool = False,
    below: bool = False,
    finite: bool = False,
    type_apart: bool = False,
    error: type[ValueError] = ValueError,
) -> Any:
    """``value`` if it is a number (:func:`is_number`; an integer if ``integer``) in
    ``[low, high]`` (``(low`` if ``above``, ``high)`` if ``below``; finite too if
    ``finite``), as a Python int or float; else a ConfigError (``error`` if that is
    one) about ``field`` naming the rule and the value (``sim.max_batch must be an
    integer >= 1, got 0``). With ``type_apart`` a value that is no number says so
    alone (``sim.mfu must be a number, got '0.5'``) and one out of range names its
    bounds alone (``sim.mfu must be in (0, 1], got 1.5``)."""
    typed = is_number(value, integer)
    kind_of = error if issubclass(error, ConfigError) else ConfigError
    if typed and isinstance(value, (int, np.integer)) and not _finite(value):
        digits = len(str(abs(int(value))))
        raise kind_of.about(
            field,
            f"must be a number a float can hold (at most {_FLOAT_MAX:.4g}: the simulator "
            f"computes in floats), got an integer of {digits:,} digits",
        )
    ok = typed
    if ok:
        ok = (value > low if above else value >= low) and (value < high if below else value <= high)
        ok = ok and (_finite(value) or (not finite and not integer and value == high))
    if not ok:
        lo, hi = (int(b) if float(b).is_integer() else b for b in (low, high))
        if low == -math.inf and high == math.inf:
            bounds = ""
        elif high == math.inf:
            bounds = f"{'>' if above else '>='} {lo}"
        else:
            bounds = f"in {'(' if above else '['}{lo}, {hi}{')' if below else ']'}"
        if type_apart:
            rule = "a number" if not typed else f"finite and {bounds}" if finite else bounds
        else:
            kind = "an integer" if integer else "a finite number" if finite else "a number"
            rule = f"{kind} {bounds}" if bounds else kind
        raise kind_of.about(field, f"must be {rule}, got {echoed(value)}")
    return int(value) if integer else float(value)


def check_int(field: str, value: Any, minimum: int, error: type[ValueError] = ValueError) -> None:
    """``value`` must be an integer >= ``minimum``."""
    checked_number(field, value, minimum, integer=True, error=error)


def check_range(
    field: str, value: Any, low: float, high: float = math.inf, finite: bool = False
) -> float:
    """``value`` must be a number in ``[low, high]`` (finite too if ``finite``: an
    unbounded ``high`` then excludes infinity); returned as a float."""
    return float(checked_number(field, value, low, high, finite=finite))


def check_number(field: str, value: Any, positive: bool = False) -> None:
    """``value`` must be a finite number, > 0 if ``positive`` else >= 0."""
    checked_number(field, value, 0, above=positive, finite=True)


def check_whole_number(field: str, value: Any, minimum: int) -> None:
    """``value`` must be an integer >= ``minimum``."""
    checked_number(field, value, minimum, integer=True)


def check_flag(field: str, value: Any) -> None:
    """``value`` must be true or false: a Python or numpy bool (a string such as
    ``"false"`` would be truthy, and ``1`` is no setting's spelling of true)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ConfigError.about(field, f"must be true or false (a bool), got {echoed(value)}")


def check_fields_non_negative(where: str, config: Any) -> None:
    """Every field of the dataclass ``config`` must be a finite number >= 0, or a
    ``(low, high)`` pair of them with low <= high; ``where`` names the class."""
    for f in fields(config):
        value = getattr(config, f.name)
        values = value if isinstance(value, tuple) else (value,)
        for v in values:
            if not is_number(v) or not _finite(v):
                raise ConfigError.about(
                    f"{where}.{f.name}", f"must be finite numbers, got {echoed(value)}"
                )
            if v < 0:
                raise ConfigError.about(f"{where}.{f.name}", f"must be >= 0, got {echoed(value)}")
        if isinstance(value, tuple) and (len(value) != 2 or value[0] > value[1]):
            raise ConfigError.about(
                f"{where}.{f.name}", f"must be a (low, high) pair, got {echoed(value)}"
            )
