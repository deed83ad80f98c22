"""The package layers: the simulator core and the workloads need no RL or config
library, and nothing below ``experiments`` imports it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("gymnasium", "torch", "stable_baselines3", "sb3_contrib", "hydra", "omegaconf", "wandb")


def _imports(path: Path) -> set[str]:
    """Top-level package names a module imports (anywhere in it, lazily or not)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("folder", ["envs/sim", "envs/workloads", "baselines"])
def test_the_core_imports_no_rl_or_config_library(folder: str) -> None:
    for path in sorted((ROOT / folder).rglob("*.py")):
        heavy = _imports(path) & set(HEAVY)
        assert not heavy, f"{path.relative_to(ROOT)} imports {sorted(heavy)}"


@pytest.mark.parametrize("package", ["envs", "baselines", "agents"])
def test_nothing_below_experiments_imports_it(package: str) -> None:
    for path in sorted((ROOT / package).rglob("*.py")):
        assert "experiments" not in _imports(path), f"{path.relative_to(ROOT)} imports experiments"


def test_a_simulation_runs_with_the_heavy_libraries_unimportable() -> None:
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in HEAVY)
    code = (
        f"import sys; {blocked}\n"
        "from baselines import make_policy\n"
        "from envs.sim import Simulator, setup_cluster\n"
        "from envs.workloads import windows\n"
        "w = next(iter(windows('bursted_synthetic', 'test', limit=1)))\n"
        "records = make_policy('btb').run(Simulator(setup_cluster('70b_h100x4'), w))\n"
        "print(len(records.ttft_s), len(w))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    served, total = proc.stdout.split()
    assert served == total != "0"
