"""The package layers (docs/layers.md): each module imports only its own floor
and the floors below it, no import circle remains, the world and the workloads
need no RL or config library, and nothing below ``experiments`` imports it.

Every import counts for the floors: at the top of a module, inside a function
(lazily) or under ``TYPE_CHECKING``. For circles every import that can run counts,
so a function-local import cannot hide one; a ``TYPE_CHECKING`` import never
runs (a node names the copies it holds, the copy machinery the nodes it moves
them between) and does not."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("gymnasium", "torch", "stable_baselines3", "sb3_contrib", "hydra", "omegaconf", "wandb")
PACKAGES = ("envs", "baselines", "agents", "experiments")

FLOORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("files", ("envs.files", "envs.processes")),  # standard library only: atomic result
    # files, work spread over worker processes
    ("world", ("envs.sim",)),
    ("workloads", ("envs.workloads",)),
    ("baselines", ("baselines",)),
    ("gym envs", ("envs",)),  # envs/*.py: the environments, the encoder
    ("agents", ("agents",)),
    ("experiments", ("experiments",)),
)
"""Lowest first. A module belongs to the floor of its longest matching prefix."""

KNOWN_CIRCLES = {
    # bench_agent is imported lazily by _bench so that only the measuring process
    # loads torch, and _bench_agents reuses _bench's timing helpers.
    frozenset({"experiments._bench", "experiments._bench_agents"}),
}


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _trees() -> dict[str, ast.Module]:
    return {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}


TREES = _trees()


def _imports(tree: ast.Module) -> set[str]:
    """Top-level package names a module imports (anywhere in it, lazily or not)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def _type_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:``."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    return out


def _project_imports(name: str, typing: bool = True) -> set[str]:
    """The project modules ``name`` imports (a package's submodule when named);
    ``typing=False`` leaves out the imports under ``TYPE_CHECKING``."""
    out: set[str] = set()
    tree = TREES[name]
    skip = set() if typing else _type_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                targets.append(sub if sub in MODULES else node.module)
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def _floor(name: str) -> int:
    best, best_len = -1, -1
    for level, (_, prefixes) in enumerate(FLOORS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = level, len(prefix)
    assert best >= 0, f"{name} is on no floor"
    return best


def _circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(frozenset(group))
    return found


def test_every_module_imports_only_its_floor_and_below() -> None:
    upward = []
    for name in MODULES:
        for target in sorted(_project_imports(name)):
            if _floor(target) > _floor(name):
                upward.append(
                    f"{name} ({FLOORS[_floor(name)][0]}) imports {target} "
                    f"({FLOORS[_floor(target)][0]})"
                )
    assert not upward, "\n".join(upward)


def test_no_import_circle_remains() -> None:
    graph = {name: _project_imports(name, typing=False) for name in MODULES}
    circles = [sorted(c) for c in _circles(graph) if c not in KNOWN_CIRCLES]
    assert not circles, f"import circles: {circles}"


def test_the_circle_finder_finds_a_circle_through_a_lazy_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [frozenset({"a", "b", "c"})]
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from envs.sim.cache import PrefixCache\n"
        "def f():\n    from envs.sim.simulator import Simulator\n"
    )
    TREES["envs.sim.node"], saved = tree, TREES["envs.sim.node"]
    try:
        assert _project_imports("envs.sim.node") == {"envs.sim.cache", "envs.sim.simulator"}
        assert _project_imports("envs.sim.node", typing=False) == {"envs.sim.simulator"}
    finally:
        TREES["envs.sim.node"] = saved


def test_the_floors_cover_every_package_and_the_world_sits_low() -> None:
    assert _floor("envs.sim.forecast") == 1
    assert _floor("envs.workloads.readers.base") == 2
    assert _floor("envs.encoder") == 4
    assert _floor("experiments.report") == len(FLOORS) - 1


@pytest.mark.parametrize("folder", ["envs/sim", "envs/workloads", "baselines"])
def test_the_core_imports_no_rl_or_config_library(folder: str) -> None:
    for path in sorted((ROOT / folder).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        heavy = _imports(tree) & set(HEAVY)
        assert not heavy, f"{path.relative_to(ROOT)} imports {sorted(heavy)}"


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
