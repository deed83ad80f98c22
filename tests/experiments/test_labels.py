"""Result labels say what ran: the model and cluster groups and the workload's
generator parameters, in the style experiments.compare uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir

from experiments.config import register_configs, setup_label, workload_label

ROOT = Path(__file__).resolve().parents[2]
TINY = "bursted_synthetic[n_bursts=2,burst_requests=40,n_decoys=6,burst_window_s=4.0]"

register_configs()


def _compose(name: str, overrides: list[str]) -> Any:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name=name, overrides=overrides)


@pytest.mark.parametrize(
    ("overrides", "setup", "workload"),
    [
        ([], "70b_h100x4", "bursted_synthetic"),
        (["setup=glm52_h100x8"], "glm52_h100x8", "bursted_synthetic"),
        (["model=qwen3-8b"], "qwen3_8b_h100x4", "bursted_synthetic"),  # a published setup
        (["cluster=4xH100_x6"], "llama-3.3-70b_4xH100_x6", "bursted_synthetic"),
        (["model=glm-4.5", "cluster=8xH200_x4"], "glm-4.5_8xH200_x4", "bursted_synthetic"),
        (["workload=tiny"], "70b_h100x4", TINY),
        (["workload=mixed"], "70b_h100x4", "mixed"),
        (["model.name=70b"], "70b_h100x4", "bursted_synthetic"),  # an alias of the preset
        # the GPU in another case is the preset (was llama-3.3-70b_4xh100_x4: a sweep
        # took it for another setup)
        (["cluster.node=4xh100"], "70b_h100x4", "bursted_synthetic"),
        (["cluster.node=8xh200"], "llama-3.3-70b_8xH200_x4", "bursted_synthetic"),
        (["model.name=glm52", "cluster=8xH100_x4"], "glm52_h100x8", "bursted_synthetic"),
        # a model or cluster given beside a setup wins: the label is what runs
        (["setup=qwen3_8b_h100x4", "model=glm-4.5"], "glm45_h100x4", "bursted_synthetic"),
        (["setup=glm52_h100x8", "cluster=8xH200_x4"], "glm-4.6_8xH200_x4", "bursted_synthetic"),
    ],
)
def test_labels_follow_the_groups(overrides: list[str], setup: str, workload: str) -> None:
    cfg = _compose("train", overrides)
    assert (setup_label(cfg), workload_label(cfg)) == (setup, workload)


def test_evaluate_rows_name_the_cluster_and_workload_that_ran(tmp_path: Path) -> None:
    from experiments.evaluate import evaluate

    agent = ROOT / "agents" / "zoo" / "bc_route_warm"  # trained on four nodes
    cfg = _compose(
        "evaluate",
        ["logger=none", "workload=tiny", "cluster=4xH100_x6", "progress=false",
         "policies=[least_load]", f"checkpoint=[{agent}]", f"out_dir={tmp_path}"],
    )  # fmt: skip
    evaluate(cfg)
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert [r["policy"] for r in rows] == [
        "cache_aware", "least_load", "bc_route_warm", "floor", "floor_capacity"
    ]  # fmt: skip
    assert {(r["setup"], r["workload"]) for r in rows} == {("llama-3.3-70b_4xH100_x6", TINY)}
    assert all(r["requests"] == r["completed"] > 0 for r in rows[:-2])


def test_a_model_given_beside_a_setup_runs_and_is_recorded_as_what_ran(tmp_path: Path) -> None:
    """``setup=qwen3_8b_h100x4 model=glm-4.5`` simulates glm-4.5 on the setup's cluster,
    and results.json's config and rows name that (glm45_h100x4), not the setup it
    overrode."""
    from experiments.evaluate import evaluate

    cfg = _compose(
        "evaluate",
        ["logger=none", "workload=tiny", "workload.eval_windows=1", "progress=false",
         "policies=[least_load]", "setup=qwen3_8b_h100x4", "model=glm-4.5", f"out_dir={tmp_path}"],
    )  # fmt: skip
    evaluate(cfg)
    result = json.loads((tmp_path / "results.json").read_text())
    config = result["config"]
    assert (config["model"]["name"], config["cluster"]["node"]) == ("glm-4.5", "4xH100")
    assert config["setup"]["name"] == "glm45_h100x4"
    assert {row["setup"] for row in result["rows"]} == {"glm45_h100x4"}


def test_costs_takes_a_model_or_node_given_beside_a_setup_as_the_hydra_commands_do() -> None:
    from experiments import costs

    def ran(*args: str) -> tuple[str, str]:
        table = costs.main(["tokens=500", *args])
        return table["model"], table["node"]

    assert ran() == ("llama-3.3-70b", "4xH100")  # the default setup's
    assert ran("setup=glm52_h100x8") == ("glm-4.6", "8xH100")
    assert ran("setup=qwen3_8b_h100x4", "model=glm-4.5") == ("glm-4.5", "4xH100")
    assert ran("setup=glm52_h100x8", "node=8xH200") == ("glm-4.6", "8xH200")
    assert ran("model=qwen3-8b", "node=4xB300") == ("qwen3-8b", "4xB300")


def test_tune_btb_rows_use_the_same_labels(tmp_path: Path) -> None:
    from experiments.tune_btb import objective

    cfg = _compose("tune_btb", ["workload=tiny", "workload.train_pool=1", f"out_dir={tmp_path}"])
    objective(cfg)
    row = json.loads((tmp_path / "objective.json").read_text())["row"]
    assert (row["setup"], row["workload"]) == ("70b_h100x4", TINY)


def test_agent_labels_are_distinct() -> None:
    from experiments.jobs import agent_labels

    names = ["ppo_route"] * 3 + ["a2c_route"]
    folders = ["/r/A/agent", "/r/B/agent", "/r/C/agent", "/r/D/agent"]
    assert agent_labels(names, folders) == [
        "ppo_route@A/agent",
        "ppo_route@B/agent",
        "ppo_route@C/agent",
        "a2c_route",
    ]
    assert agent_labels(["x", "x"], ["/r/a", "/r/a"]) == ["x#1", "x#2"]  # the same folder twice
    assert agent_labels(["x", "x"], ["/r/a", "/s/b"]) == ["x@a", "x@b"]
    # a repeated folder is numbered, the other keeps its folder label
    assert agent_labels(["x", "x", "x"], ["/t/new", "/z/zoo", "/z/zoo"]) == [
        "x@new",
        "x@zoo#1",
        "x@zoo#2",
    ]


def test_evaluate_keeps_every_agent_of_the_same_name(tmp_path: Path) -> None:
    import shutil

    from experiments.evaluate import evaluate

    zoo = ROOT / "agents" / "zoo" / "bc_route_warm"
    folders = [tmp_path / run / "agent" for run in ("A", "B", "C")]
    for folder in folders:
        shutil.copytree(zoo, folder)
    out = tmp_path / "out"
    cfg = _compose(
        "evaluate",
        ["logger=none", "workload=tiny", "workload.eval_windows=1", "progress=false",
         "policies=[least_load]", f"checkpoint=[{','.join(map(str, folders))}]",
         f"out_dir={out}"],
    )  # fmt: skip
    evaluate(cfg)
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert [r["policy"] for r in rows] == [
        "cache_aware",
        "least_load",
        "bc_route_warm@A/agent",
        "bc_route_warm@B/agent",
        "bc_route_warm@C/agent",
        "floor",
        "floor_capacity",
    ]


def test_evaluate_refuses_one_checkpoint_under_two_spellings(tmp_path: Path) -> None:
    from experiments._cli import UsageError
    from experiments.evaluate import evaluate

    zoo = ROOT / "agents" / "zoo" / "bc_route_warm"
    out = tmp_path / "out"
    cfg = _compose(
        "evaluate",
        ["logger=none", "workload=tiny", "workload.eval_windows=1", "progress=false",
         "policies=[least_load]", f"checkpoint=[bc_route_warm,{zoo}]", f"out_dir={out}"],
    )  # fmt: skip
    with pytest.raises(UsageError, match=rf"^checkpoint: 'bc_route_warm' and '{zoo}' name one "
                       rf"agent folder \({zoo}\): name it once$"):  # fmt: skip
        evaluate(cfg)
    assert not out.exists()  # refused before the run folder


def test_agent_names_tell_the_networks_apart() -> None:
    from agents.algorithms import AgentSpec

    assert AgentSpec("ppo", "route").name == "ppo_route"
    assert AgentSpec("ppo", "route", net="mlp").name == "ppo_route_mlp"


def test_train_run_name_has_the_compare_form() -> None:
    from experiments.jobs import job_name

    cfg = _compose("train", ["workload=mixed", "seed=3"])
    assert job_name(cfg, "train-ppo_route", "T") == "70b_h100x4__mixed__train-ppo_route__3__T"
    # job 2 of a sweep: its jobs may start in the same second
    assert job_name(cfg, "train", "T", 2) == "70b_h100x4__mixed__train__3__T__job2"
