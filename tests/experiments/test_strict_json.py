"""Result files are strict JSON (RFC 8259 has no Infinity or NaN) and read back intact."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, NoReturn

from hydra import compose, initialize_config_dir

from agents.algorithms import load_spec
from envs.files import read_json, write_json_atomic
from experiments.config import register_configs

ROOT = Path(__file__).resolve().parents[2]
ZOO = ROOT / "agents" / "zoo"

register_configs()


def _no_constants(name: str) -> NoReturn:
    raise ValueError(f"not strict JSON: bare {name}")


def strict_loads(text: str) -> Any:
    return json.loads(text, parse_constant=_no_constants)


def test_non_finite_floats_are_written_strictly_and_read_back(tmp_path: Path) -> None:
    payload = {"ram": math.inf, "low": [1.0, -math.inf], "p95": math.nan, "name": "Infinity?"}
    path = write_json_atomic(tmp_path / "x.json", payload)
    assert strict_loads(path.read_text()) == {
        "ram": "Infinity",
        "low": [1.0, "-Infinity"],
        "p95": None,
        "name": "Infinity?",
    }
    assert read_json(path) == {"ram": math.inf, "low": [1.0, -math.inf], "p95": None,
                               "name": "Infinity?"}  # fmt: skip


def test_older_files_with_bare_infinity_still_read(tmp_path: Path) -> None:
    (tmp_path / "old.json").write_text('{"host_ram_bytes": Infinity}')
    assert read_json(tmp_path / "old.json") == {"host_ram_bytes": math.inf}


def test_zoo_agent_files_are_strict_and_keep_unbounded_host_ram() -> None:
    for folder in sorted(p.parent for p in ZOO.glob("*/agent.json")):
        strict_loads((folder / "agent.json").read_text())
        assert load_spec(folder).env_kwargs["sim"]["host_ram_bytes"] == math.inf


def test_evaluate_writes_strict_results_json(tmp_path: Path) -> None:
    from experiments.evaluate import evaluate

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            config_name="evaluate",
            overrides=[
                "logger=none",
                "workload=tiny",
                "progress=false",
                "policies=[least_load]",
                f"out_dir={tmp_path}",
            ],
        )
    evaluate(cfg)
    results = strict_loads((tmp_path / "results.json").read_text())
    assert results["config"]["sim"]["host_ram_bytes"] == "Infinity"
    assert read_json(tmp_path / "results.json")["config"]["sim"]["host_ram_bytes"] == math.inf
