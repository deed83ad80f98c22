"""What produced a result file: the code, the simulator core and the machine.

A run's ``results.json`` (and ``bench.json``) carries :func:`provenance` as
``provenance``, so a figure can be traced to the commit that made it, and told
apart from one another machine made: trained weights depend on the CPU's
floating-point kernels (docs/agents.md), and speeds on everything here."""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from envs.sim.errors import PROJECT_ROOT

ROOT = Path(PROJECT_ROOT)


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(  # (no optional locks: never in the way of the user's git)
            ["git", "--no-optional-locks", "-C", str(ROOT), *args],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


_RUN: dict[str, str] = {}
"""The running command's working directory and start time (:func:`start_run`)."""


def start_run() -> dict[str, Any]:
    """A command starts (its options are read, or a Hydra job begins): record the
    working directory its relative paths are read from and the time, and forget the
    agents read before it; returns :func:`provenance`."""
    from agents import FOLDERS_READ

    FOLDERS_READ.clear()
    _RUN.clear()
    return provenance()


def provenance() -> dict[str, Any]:
    """See :func:`_made_by`; the plugins as the environment names them now
    (``plugins``: the module names, as before) and, under ``plugin_files``, each
    one's file, the sha256 of its code and the files of its own imports that covers
    (:func:`plugin_file`), so two runs of different plugin code are told apart; the
    working directory the run started in (``cwd``: relative paths in its config are
    read from there) and its start time (``started``, UTC, ISO 8601, to the
    second), both as :func:`start_run` recorded them (or as first asked for); and,
    under ``agent_files``, each agent checkpoint folder the run read, resolved,
    with the sha256 of its agent.json and model.zip as read (``agents.note_read``),
    and of its run_state.pkl when a resume read one (``agents.note_run_state``)."""
    from agents import FOLDERS_READ
    from baselines.policy import plugin_names

    if not _RUN:
        _RUN["cwd"] = os.getcwd()
        _RUN["started"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    names = plugin_names()
    return {
        **_made_by(),
        "plugins": names,
        "plugin_files": {n: plugin_file(n) for n in names},
        "cwd": _RUN["cwd"],
        "started": _RUN["started"],
        "agent_files": {folder: dict(files) for folder, files in FOLDERS_READ.items()},
    }


_PLUGIN_FILES: dict[str, tuple[object, dict[str, Any]]] = {}


def plugin_file(name: str) -> dict[str, Any]:
    """``{"path": ..., "sha256": ..., "imports": [...]}`` of the plugin module
    ``name`` as imported (a package's ``__init__.py``; None, None and [] for a module
    not imported, or without a file), by the rule a workload of one's own is recorded
    by (``envs.workloads.plugins.code_stamp``): the sha256 covers the module's file
    and the modules of one's own it imports (``imports``, their files), so an edited
    helper module changes it; of a module that imports none, the sha256 of its bytes.
    Read once for each import of the module: the commands ask as they start, so a
    result file records the code that ran, even if a file is edited meanwhile."""
    import sys

    from envs.workloads.plugins import code_stamp

    module = sys.modules.get(name)
    known = _PLUGIN_FILES.get(name)
    if known is not None and known[0] is module:
        return known[1]
    path, digest, imported = code_stamp(module)
    said = {"path": path, "sha256": digest, "imports": list(imported)}
    _PLUGIN_FILES[name] = (module, said)
    return said


@functools.cache
def _made_by() -> dict[str, Any]:
    """The code (btb-gym's version; its git commit, ``dirty`` when tracked files
    differ from it, both None where btb-gym is not a git checkout's own folder, as
    when installed into another project's environment), the simulator core, the
    Python and library versions, and the CPU (its model and whether it has
    AVX-512: the kernels torch and MKL pick follow it). Worked out once a process:
    the commands ask for it as they start, so a file records the code its run
    started with."""
    from envs.sim.native import CORE

    top = _git("rev-parse", "--show-toplevel")
    own = top is not None and Path(top).resolve() == ROOT
    commit = _git("rev-parse", "HEAD") if own else None
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    try:
        avx512: bool | None = " avx512f" in Path("/proc/cpuinfo").read_text()
    except OSError:
        avx512 = None
    affinity = getattr(os, "sched_getaffinity", None)
    return {
        "btb_gym": _version("btb-gym"),
        "commit": commit,
        "dirty": None if status is None else bool(status),
        "core": CORE,
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "torch": _version("torch"),
        "stable_baselines3": _version("stable-baselines3"),
        "cpu": _cpu(),
        "avx512": avx512,
        "cpus": len(affinity(0)) if affinity else os.cpu_count(),
    }
