"""``btb_tuned``: BTB with thresholds tuned per setup and workload family.

The thresholds live in one data file, ``baselines/btb_tuned.json``, written by
``python -m experiments.tune_btb_table`` (an Optuna search per cell over X, Z, M
and the prefix length, minimising mean TTFT on the cell's *train* windows; test
and validation windows are never seen). Each cell holds ``x``, ``z_s``, ``m`` and
the prefix length in tokens, ``y_tokens`` (BTB keys a prefix by its first Y
blocks and fires on no shorter prompt), so the file does not depend on how BTB's
constructor names its arguments: :func:`btb_settings` is the one place that
turns a cell into them.

At ``reset`` the policy looks up the simulator's setup (a published setup whose
cluster equals the simulated one) and the window's workload
(``Workload.meta["workload"]``), when the window was generated at that workload's
registered parameters (:func:`envs.workloads.registry.at_registered_parameters`:
changed generator parameters make other traffic, which no cell was tuned on). A
(setup, workload) pair without tuned thresholds, and a window of changed
parameters, runs BTB's published constants; the row's ``tuned_rate`` (the share
of windows that found their cell) says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from baselines.btb import BTB, PUBLISHED_M
from baselines.policy import register
from envs.files import read_json
from envs.sim.checks import check_int, checked_number
from envs.sim.config import SETUPS, setup_cluster
from envs.sim.errors import ConfigError
from envs.sim.simulator import Simulator
from envs.workloads.registry import at_registered_parameters

TABLE_PATH = Path(__file__).with_name("btb_tuned.json")
CELL_KEYS = ("x", "z_s", "m", "y_tokens")


def btb_settings(cell: dict[str, Any], block_tokens: int) -> dict[str, Any]:
    """BTB's constructor arguments for a tuned cell on a workload of ``block_tokens``
    tokens a block (BTB keeps the whole blocks of Y that fit: at least one)."""
    return {
        "x": int(cell["x"]),
        "y_tokens": max(int(cell["y_tokens"]), block_tokens),
        "z": float(cell["z_s"]),
        "m": int(cell["m"]),
    }


def read_table(path: str | Path = TABLE_PATH) -> dict[str, dict[str, dict[str, Any]]]:
    """``{setup: {workload: cell}}`` from a tuned-thresholds file, each cell checked.
    A file that cannot be read, is not JSON or holds no usable table is a
    :class:`ConfigError` naming ``btb_tuned.path`` and the file, in one line."""
    try:
        return _checked_cells(read_json(Path(path)))
    except (OSError, ValueError) as error:
        raise ConfigError(
            f"{{path}}={str(path)!r}: {_why_unread(error)}", ("path",), "btb_tuned"
        ) from None


def _why_unread(error: OSError | ValueError) -> str:
    """What kept a tuned-thresholds file from being read, said briefly."""
    if isinstance(error, FileNotFoundError):
        return "no such file"
    if isinstance(error, IsADirectoryError):
        return "is a folder, not a file"
    if isinstance(error, OSError):
        return f"cannot be read ({error.strerror or error})"
    if isinstance(error, json.JSONDecodeError):
        return f"not valid JSON ({error.msg}, line {error.lineno} column {error.colno})"
    if isinstance(error, UnicodeDecodeError):
        return "not UTF-8 text"
    return str(error)


def _checked_cells(data: Any) -> dict[str, dict[str, dict[str, Any]]]:
    """A table's ``cells``, each checked (a ValueError naming the cell otherwise)."""
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, dict):
        raise ValueError("expected an object with 'cells': {setup: {workload: ...}}")
    for setup, by_workload in cells.items():
        if not isinstance(by_workload, dict):
            raise ValueError(f"cells.{setup} must be an object {{workload: cell}}")
        for workload, cell in by_workload.items():
            where = f"cells.{setup}.{workload}"
            if not isinstance(cell, dict):
                raise ValueError(f"{where} must be an object of {', '.join(CELL_KEYS)}")
            missing = [k for k in CELL_KEYS if k not in cell]
            if missing:
                raise ValueError(f"{where} lacks {', '.join(missing)}")
            for key in ("x", "y_tokens", "m"):  # (btb_settings takes a whole float as an int)
                value = cell[key]
                whole = isinstance(value, float) and value.is_integer()
                check_int(f"{where}.{key}", int(value) if whole else value, 1)
            checked_number(f"{where}.z_s", cell["z_s"], 0, above=True)  # inf: as btb takes it
            if setup in SETUPS and cell["m"] > len(setup_cluster(setup).nodes):
                raise ValueError(
                    f"{where}.m = {cell['m']} copies exceeds the {setup} cluster's "
                    f"{len(setup_cluster(setup).nodes)} nodes"
                )
    return cells


def tuned_simulator(path: str | Path = TABLE_PATH) -> dict[str, Any]:
    """The simulator settings a table was tuned under (its ``options``: ``causal_kv``,
    ``copy_model``), those it records; a run under others takes its thresholds
    all the same, and its row says so (``tuned_elsewhere_rate``)."""
    data = read_json(Path(path))
    options = data.get("options") if isinstance(data, dict) else None
    if not isinstance(options, dict):
        return {}
    return {key: options[key] for key in ("causal_kv", "copy_model") if key in options}


def setup_of(sim: Simulator) -> str | None:
    """The published setup whose cluster is the simulated one, if any."""
    return next((name for name in SETUPS if setup_cluster(name) == sim.cluster), None)


@register("btb_tuned")
class BTBTuned(BTB):
    """BTB whose X, Y, Z, M come from the tuned table for the run's (setup, workload).

    Args:
        path: the thresholds file (default: the shipped ``baselines/btb_tuned.json``).
    """

    def __init__(self, path: str | None = None) -> None:
        super().__init__()
        self.table = read_table(path or TABLE_PATH)
        self.tuned_under = tuned_simulator(path or TABLE_PATH)
        self.cell: dict[str, Any] | None = None
        self._other_sim = False
        self._published = (self.x, self.y_tokens, self.z)

    def reset(self, sim: Simulator) -> None:
        setup = setup_of(sim)
        # a cell is tuned on its workload's own traffic: not on changed generator params
        window = sim.workload
        workload = window.meta.get("workload") if at_registered_parameters(window) else None
        self.cell = self.table.get(setup or "", {}).get(str(workload))
        self._n_nodes = None  # the last run's cluster does not bound this one's M
        if self.cell is None:
            self.set_thresholds(*self._published, PUBLISHED_M)
            self._default_m = True  # BTB.reset: the published M, at most every node
        else:
            settings = btb_settings(self.cell, sim.block_tokens)
            self.set_thresholds(settings["x"], settings["y_tokens"], settings["z"], settings["m"])
            self._default_m = False
        running = {"causal_kv": sim.config.causal_kv, "copy_model": sim.config.copy_model}
        self._other_sim = self.cell is not None and any(
            key in self.tuned_under and self.tuned_under[key] != value
            for key, value in running.items()
        )
        super().reset(sim)

    def metrics(self) -> dict[str, float]:
        out = {**super().metrics(), "tuned_rate": float(self.cell is not None)}
        # its Y is its table's (or btb's published one: tuned_rate's note says so), not
        # a setting of its own that y_unreached_rate's note could point to
        out.pop("y_unreached_rate", None)
        if self._other_sim:  # (only then: the rows of a run as tuned keep their fields)
            out["tuned_elsewhere_rate"] = 1.0
        return out
