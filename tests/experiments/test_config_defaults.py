"""One configuration source: every default is set once, where its schema lives
(SimConfig, the envs' signatures, SETUPS and the registry's names), and the Hydra
schemas and the key=value commands take it from there."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import yaml

from envs.sim import SETUPS, SimConfig
from envs.sim.config import DEFAULT_SETUP
from envs.workloads.bursted import PUBLISHED_SEED
from envs.workloads.registry import DEFAULT_WORKLOAD
from experiments import bench, compare, reproduce
from experiments.config import EnvConf, SimConf, setup_options

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("envs", "baselines", "agents", "experiments")
# A default of one of these names (a keyword argument's, a dataclass field's, a
# key=value command's DEFAULTS entry) with the default's value may be written as a
# literal only in its home; elsewhere it names the constant or reads the schema.
HOMES = {
    "setup": ("envs/sim/config.py", DEFAULT_SETUP),
    "workload": ("envs/workloads/registry.py", DEFAULT_WORKLOAD),
    "causal_kv": ("envs/sim/config.py", SimConfig().causal_kv),
    "copy_model": ("envs/sim/config.py", SimConfig().copy_model),
    "reward_scale": ("envs/cluster_env.py", 1.0),
    "data_seed": ("envs/workloads/bursted.py", PUBLISHED_SEED),
    "workload_seed": ("envs/workloads/bursted.py", PUBLISHED_SEED),
    "seed": ("envs/workloads/bursted.py", PUBLISHED_SEED),
    "model": ("envs/sim/config.py", SETUPS[DEFAULT_SETUP][0]),
    "node": ("envs/sim/config.py", SETUPS[DEFAULT_SETUP][1]),
    "mfu": ("envs/sim/timing.py", SimConfig().mfu),
    "mbu": ("envs/sim/timing.py", SimConfig().mbu),
    "max_batch": ("envs/sim/config.py", SimConfig().max_batch),
}


def _literal_defaults(tree: ast.AST) -> list[tuple[str, int]]:
    """``(name, line)`` of every default of a name in HOMES written as its literal value."""
    found: list[tuple[str, int, ast.Constant]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arguments):
            positional = [*node.posonlyargs, *node.args]
            pairs = list(zip(positional[len(positional) - len(node.defaults) :], node.defaults))
            pairs += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults) if d is not None]
            found += [(a.arg, d.lineno, d) for a, d in pairs if isinstance(d, ast.Constant)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if isinstance(node.value, ast.Constant):
                found.append((node.target.id, node.lineno, node.value))
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                    found.append((str(key.value), value.lineno, value))
    return [
        (name, line)
        for name, line, value in found
        if name in HOMES
        and type(value.value) is type(HOMES[name][1])
        and value.value == HOMES[name][1]
    ]


def test_no_default_is_written_twice() -> None:
    twice = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            where = path.relative_to(ROOT).as_posix()
            for name, line in _literal_defaults(ast.parse(path.read_text())):
                if HOMES[name][0] != where:
                    twice.append(f"{where}:{line}: {name}")
    assert twice == [], "defaults written again outside their home: " + ", ".join(twice)


def test_the_scan_finds_a_default_written_again() -> None:
    source = (
        "def f(setup='70b_h100x4', n=1):\n    pass\n"
        "class C:\n    copy_model: str = 'reference'\n"
        "DEFAULTS = {'workload': 'bursted_synthetic', 'windows': 5}\n"
    )
    assert _literal_defaults(ast.parse(source)) == [
        ("setup", 1),
        ("copy_model", 4),
        ("workload", 5),
    ]


def test_the_sim_and_env_schemas_are_the_objects_own_fields() -> None:
    sim = {f.name: f.default for f in dataclasses.fields(SimConf)}
    assert sim == {f.name: f.default for f in dataclasses.fields(SimConfig)}
    env = {f.name: f.default for f in dataclasses.fields(EnvConf)}
    assert env["reward_scale"] == 1.0 and env["epoch_s"] == 1.0  # the envs' own defaults
    assert env["kind"] == "route" and "data_seed" not in env  # set by the run's groups


def test_the_commands_defaults_are_the_schemas() -> None:
    for defaults in (compare.DEFAULTS, bench.DEFAULTS):
        assert defaults["setup"] == DEFAULT_SETUP
        assert defaults["copy_model"] == SimConfig().copy_model
        assert defaults["causal_kv"] is SimConfig().causal_kv
    assert compare.DEFAULTS["workload"] == reproduce.DEFAULTS["workload"] == DEFAULT_WORKLOAD


def test_the_setup_group_is_the_table_of_published_setups() -> None:
    options = setup_options()
    assert list(options) == list(SETUPS)
    model, node, n_nodes = SETUPS["glm52_h100x8"]
    assert options["glm52_h100x8"]["defaults"][:2] == [
        {"override /model": model},
        {"override /cluster": f"{node}_x{n_nodes}"},
    ]
    for name, (model, node, n_nodes) in SETUPS.items():  # each names options that exist
        assert (ROOT / "conf" / "model" / f"{model}.yaml").is_file(), name
        assert (ROOT / "conf" / "cluster" / f"{node}_x{n_nodes}.yaml").is_file(), name


def test_the_primary_configs_choose_the_default_setup_and_workload() -> None:
    """Hydra's defaults lists cannot name a Python constant: they must agree with it."""
    for name in ("train", "evaluate", "tune_btb"):
        config = yaml.safe_load((ROOT / "conf" / f"{name}.yaml").read_text())
        chosen = {
            k: v for item in config["defaults"] if isinstance(item, dict) for k, v in item.items()
        }
        assert chosen["setup"] == DEFAULT_SETUP, name
        assert chosen["workload"] == DEFAULT_WORKLOAD, name
