"""A cluster of one's own on the key=value commands: ``compare`` and ``costs`` take
the Hydra commands' options (``cluster.nodes``, ``model.<field>``,
``+cluster.gpus.NAME.<field>``), built by the same code (``cluster_of``), with
``setup=`` the base they change; ``reproduce``, ``bench`` and ``tune_btb_table``
refuse them in one line. Figures worked out by hand; errors one line naming the
option; compare's rows and record those of ``evaluate`` on the same cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir

from envs.sim import ClusterSpec
from experiments import costs
from experiments._cli import split_cluster_options
from experiments.config import (
    cluster_from_options,
    cluster_of,
    cluster_overrides,
    register_configs,
    setup_label,
)
from tests.experiments.test_own_clusters import MINE, MIXED, MYGPU

ROOT = Path(__file__).resolve().parents[2]
register_configs()

SMALL = ["params=n_bursts=2,burst_requests=40,n_decoys=6", "windows=1", "agents=none"]
QUIET = ["progress=false", "charts=false"]


def _compose(overrides: list[str], name: str = "evaluate") -> Any:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name=name, overrides=overrides)


def _built(args: list[str], setup: str = "70b_h100x4") -> tuple[Any, ClusterSpec]:
    rest, given, added = split_cluster_options("X", args)
    assert rest == []
    return cluster_from_options("X", setup, given, added)


def test_the_options_make_the_cluster_the_hydra_commands_make() -> None:
    """The same options on both kinds of command: one cluster, one label."""
    for args in ([MIXED], MINE, [*MYGPU, "cluster.node=2xMYGPU", "cluster.n_nodes=3"],
                 [*MINE, *MYGPU, "cluster.nodes=[2xMYGPU,4xH100]"], []):  # fmt: skip
        cfg, cluster = _built(args)
        hydra = _compose(args)
        assert cluster == cluster_of(hydra)
        assert setup_label(cfg) == setup_label(hydra)
    # brackets optional, as the key=value commands' other lists
    assert _built(["cluster.nodes=4xH100,4xH100,8xH200"])[1] == _built([MIXED])[1]
    # the overrides a note prints for an agent's own cluster make it again here
    own = _built([*MINE, *MYGPU, "cluster.nodes=[2xMYGPU,4xH100,4xH100]"])[1]
    assert _built(cluster_overrides(own))[1] == own


def test_setup_is_the_base_the_options_change() -> None:
    """setup=glm45_h100x4 gives glm-4.5 on four 4xH100; each option replaces its part."""
    cfg, cluster = _built(["cluster.nodes=[4xH100,8xH200]"], "glm45_h100x4")
    assert cluster.model.name == "glm-4.5"
    assert [node.name for node in cluster.nodes] == ["4xH100", "8xH200"]
    assert setup_label(cfg) == "glm-4.5_4xH100_x1+8xH200_x1"
    # as on the Hydra commands: recorded with node null and n_nodes the count
    assert (cfg.cluster.node, cfg.cluster.n_nodes) == (None, 2)
    cfg, cluster = _built(["cluster.n_nodes=2"], "glm45_h100x4")
    assert cluster == ClusterSpec.uniform("glm-4.5", "4xH100", 2)
    assert setup_label(cfg) == "glm-4.5_4xH100_x2"
    # nothing changed, or changed to what it was: the setup, by its name
    assert setup_label(_built([], "glm45_h100x4")[0]) == "glm45_h100x4"
    assert setup_label(_built(["cluster.n_nodes=4"], "glm45_h100x4")[0]) == "glm45_h100x4"
    # another setup's model and cluster: that setup's name, as the Hydra commands say it
    assert setup_label(_built(["model.name=qwen3-8b"], "glm45_h100x4")[0]) == "qwen3_8b_h100x4"


def test_compare_on_mixed_nodes_is_evaluate_on_them(tmp_path: Path) -> None:
    """compare on cluster.nodes=[4xH100,4xH100,8xH200] names and records the cluster
    as evaluate does, and its rows are evaluate's on the same window, to the bit."""
    from experiments import compare
    from experiments.evaluate import evaluate

    out = tmp_path / "compare"
    result = compare.main([*SMALL, *QUIET, "policies=least_load", MIXED, f"out_dir={out}"])
    config = result["config"]
    label = "llama-3.3-70b_4xH100_x2+8xH200_x1"
    assert config["setup"] == label and {row["setup"] for row in result["rows"]} == {label}
    assert config["cluster"] == {
        "node": None, "n_nodes": 3, "nodes": ["4xH100", "4xH100", "8xH200"], "gpus": {}
    }  # fmt: skip
    assert config["model"]["name"] == "llama-3.3-70b"
    figures = config["cluster_figures"]
    assert [node["n_gpus"] for node in figures["nodes"]] == [4, 4, 8]
    # H100: 989 TFLOP/s dense BF16 and 80 GB; H200: 141 GB of HBM at 4.8 TB/s
    assert figures["nodes"][0]["gpu"]["flops"] == 989e12
    assert figures["nodes"][0]["gpu"]["hbm_bytes"] == 80e9
    assert figures["nodes"][2]["gpu"]["hbm_bytes"] == 141e9
    assert figures["nodes"][2]["gpu"]["hbm_bw"] == 4.8e12
    assert json.loads((out / "results.json").read_text())["config"]["cluster_figures"] == figures

    cfg = _compose(
        ["logger=none", "workload=bursted_synthetic", "+workload.params.n_bursts=2",
         "+workload.params.burst_requests=40", "+workload.params.n_decoys=6",
         "workload.eval_windows=1", "progress=false", "policies=[least_load]", MIXED,
         f"out_dir={tmp_path / 'evaluate'}"],
    )  # fmt: skip
    evaluate(cfg)
    hydra = json.loads((tmp_path / "evaluate" / "results.json").read_text())
    assert hydra["config"]["cluster_figures"] == figures
    # the same record but config.setup: compare's the name, evaluate's {"name": ...}
    # (docs/commands.md says which)
    assert (config["model"], config["cluster"]) == (
        hydra["config"]["model"],
        hydra["config"]["cluster"],
    )
    assert hydra["config"]["setup"] == {"name": label}
    theirs = {row["policy"]: row for row in hydra["rows"]}
    for row in result["rows"]:
        other = theirs[row["policy"]]
        assert (row["setup"], row["workload"]) == (other["setup"], other["workload"])
        for key in ("requests", "ttft_mean_s", "ttft_p95_s", "ttft_p99_s"):
            assert row[key] == other[key], (row["policy"], key)


def test_compare_on_a_published_setup_is_as_before(tmp_path: Path) -> None:
    """Nodes of the setup's one kind, listed, are the setup: the same rows, named
    as it; no option, the setup as always."""
    from experiments import compare

    run = [*SMALL, *QUIET, "policies=least_load", "setup=qwen3_8b_h100x4"]
    plain = compare.main([*run, f"out_dir={tmp_path / 'a'}"])
    listed = compare.main(
        [*run, "cluster.nodes=4xH100,4xH100,4xH100,4xH100", f"out_dir={tmp_path / 'b'}"]
    )
    assert plain["config"]["setup"] == listed["config"]["setup"] == "qwen3_8b_h100x4"

    def same(row: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in row.items() if k not in ("wall_s", "requests_per_s")}

    assert [same(r) for r in plain["rows"]] == [same(r) for r in listed["rows"]]
    assert (
        plain["config"]["cluster_figures"] == ClusterSpec.uniform("qwen3-8b", "4xH100", 4).figures()
    )


def test_a_plus_is_refused_where_hydra_refuses_it() -> None:
    """``+KEY=`` on a key that holds a value (the setup's model and node, its node
    count) is refused as evaluate refuses it (Hydra: "Could not append to config");
    it was taken as ``KEY=``. A list, or a key that holds nothing (``cluster.nodes``,
    a GPU kind of one's own), takes its ``+`` as on the Hydra commands."""
    from experiments._cli import UsageError

    for arg in ("+cluster.node=8xH200", "+cluster.n_nodes=2", "+model.name=qwen3-8b",
                "+cluster.node=null"):  # fmt: skip
        key = arg[1:].partition("=")[0]
        with pytest.raises(UsageError, match=rf"an item is already at '{key}' \(from setup="):
            _built([arg])
    _, cluster = _built(["+cluster.nodes=[4xH100,8xH200]"])
    assert [node.n_gpus for node in cluster.nodes] == [4, 8]
    assert _built([*MYGPU, "cluster.node=4xMYGPU"])[1].nodes[0].gpu.flops > 0


def test_the_options_of_a_cluster_of_ones_own_are_one_list() -> None:
    """``CLUSTER_OPTIONS`` is the one list of them: the prefixes an argument is taken
    by are its keys', ``split_cluster_options`` takes each key, and ``--help`` names
    each once (``costs`` all but ``cluster.n_nodes``: its tables are one node's).
    The key set was written three times (prefixes, help text, the help's keys)."""
    import re

    from experiments._cli import CLUSTER_OPTIONS, CLUSTER_PREFIXES, cluster_help

    keys = list(CLUSTER_OPTIONS)
    assert CLUSTER_PREFIXES == ("model.", "cluster.")
    assert all(key.startswith(CLUSTER_PREFIXES) for key in keys)
    typed = [f"{key.replace('NAME', 'X').replace('FIELD', 'flops')}=1" for key in keys]
    rest, given, added = split_cluster_options("X", [*typed, "seed=1", "modelx=1"])
    assert (rest, len(given), added) == (["seed=1", "modelx=1"], len(keys), frozenset())
    for n_nodes in (True, False):
        named = re.findall(r"([\w.]+)=", "\n".join(cluster_help(n_nodes)))
        assert named[0] == "setup"  # (what the options change)
        assert sorted(named[1:]) == sorted(k for k in keys if n_nodes or k != "cluster.n_nodes")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["cluster.node=4xH100", MIXED],
            "cluster.node and cluster.nodes are both given (from the command line): "
            "cluster.nodes lists every node (give it alone, or node and n_nodes)",
        ),
        (
            ["setup=glm52_h100x8", "cluster.node=1xH100"],
            "cluster.node='1xH100' (from the command line): a node (1xH100, 80 GB HBM) cannot "
            "hold glm-4.6: its weights need 372 GB (model.name='glm-4.6' from setup=glm52_h100x8)",
        ),
        (
            ["cluster.n_nodes=abc"],
            "cluster.n_nodes='abc' (from the command line): Value 'abc' of type 'str' could not "
            "be converted to Integer",
        ),
        (  # a sweep's repr was taken as the node kind's name, "ChoiceSweep(tags=set(), ..."
            ["cluster.node=4xH100,8xH200"],
            "cluster.node='4xH100,8xH200' (from the command line): several values are a sweep, "
            "which the Hydra commands run with -m; experiments.compare takes one (nodes of "
            "several kinds: cluster.nodes=[...])",
        ),
        (
            ["model.layers=glob(*)"],
            "model.layers='glob(*)' (from the command line): several values are a sweep, which "
            "the Hydra commands run with -m; experiments.compare takes one",
        ),
        (
            ["cluster.node=[4xH100"],
            "cluster.node='[4xH100' (from the command line): no viable alternative at input "
            "'[4xH100'",
        ),
        (
            ["model.name=null"],
            "model.name is null: give a model preset's name (model.name=llama-3.3-70b), or a "
            "new name beside ModelSpec's fields (a model of one's own) (from the command line)",
        ),
        (
            ["cluster.n_nodes=null"],
            "cluster.n_nodes is null: give a node count (cluster.n_nodes=4), or the nodes "
            "(cluster.nodes=[4xH100,8xH200]) (from the command line)",
        ),
        (
            ["cluster.nodes=[4xH100,,8xH200]"],
            "cluster.nodes='[4xH100,,8xH200]' has an empty entry (from the command line)",
        ),
        (
            ["cluster.nodes=[4xH100]", "cluster.nodes=[8xH200]"],
            "cluster.nodes= is given twice (from the command line)",
        ),
        # as typed: it quoted the text with brackets added, "at input '[[4xH100,8xH200]'"
        (
            ["cluster.nodes=[4xH100,8xH200"],
            "cluster.nodes='[4xH100,8xH200' (from the command line): its brackets do not pair "
            "(cluster.nodes=[4xH100,8xH200], or without them: 4xH100,8xH200)",
        ),
        (
            ["cluster.nodes=4xH100,8xH200]"],
            "cluster.nodes='4xH100,8xH200]' (from the command line): its brackets do not pair "
            "(cluster.nodes=[4xH100,8xH200], or without them: 4xH100,8xH200)",
        ),
        (
            ["+cluster.node=8xH200"],
            "+cluster.node=8xH200: could not append to config: an item is already at "
            "'cluster.node' (from setup=70b_h100x4); remove the + prefix: cluster.node=8xH200",
        ),
        (
            ["cluster.nodes=[4xH100,4xQ100]"],
            "cluster.nodes[1]='4xQ100' (from the command line): unknown GPU preset 'Q100'; "
            "known: A100, H100, H200, B200, B300, MI300X, MI355X",
        ),
        (
            ["model.layers=40"],
            "model.layers is given, but model.name='llama-3.3-70b' is the preset llama-3.3-70b "
            "(give a model of one's own a new name) (from the command line)",
        ),
        (
            [*MINE[:-1]],
            "model.head_dim is missing: model.name='mine' is no preset, so a model of one's own "
            "gives each of total_params, active_params, bytes_per_elem, layers, kv_heads, "
            "head_dim (model.total_params from the command line)",
        ),
        (
            [*MYGPU[1:], "+cluster.gpus.MYGPU.flops=-1", "cluster.node=4xMYGPU"],
            "cluster.gpus.MYGPU.flops must be a positive finite number, got -1 (from the "
            "command line)",
        ),
        (
            [*MYGPU, "cluster.gpus.MYGPU.tflops=1"],
            "unknown key cluster.gpus.MYGPU.tflops (from the command line); a GPU of one's "
            "own takes: flops, hbm_bw, hbm_bytes, pcie_bw, rdma_bw, nvme_bw",
        ),
        (
            ["cluster.bogus=1"],
            "unknown option 'cluster.bogus' (from the command line); a cluster of one's own "
            "takes: model.name, "
            "model.total_params, model.active_params, model.bytes_per_elem, model.layers, "
            "model.kv_heads, model.head_dim, model.attn_dim, model.max_context_tokens, "
            "cluster.node, cluster.n_nodes, cluster.nodes, cluster.gpus.NAME.<field>",
        ),
    ],
)
def test_a_bad_cluster_option_is_one_line_naming_it(
    args: list[str], message: str, run_command: Any, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    proc = run_command("experiments.compare", [*SMALL, *args, f"out_dir={out}"], tmp_path)
    assert (proc.returncode, proc.stderr) == (2, f"error: experiments.compare: {message}\n")
    assert not out.exists()


def test_costs_on_a_node_and_model_of_ones_own_by_hand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = costs.main(["tokens=1000", *MINE, *MYGPU, "node=2xMYGPU", f"out_dir={tmp_path}"])
    assert (table["model"], table["node"]) == ("mine", "2xMYGPU")
    # KV: 2 x 32 layers x 8 heads x 128 x 2 bytes = 131,072 B a token
    assert table["kv_bytes_per_token"] == 131_072
    # (2 x 100e9 - 8e9 x 2 bytes of weights) / 131,072 = 1,403,808.6 -> 1,403,808 tokens
    assert table["budget_tokens"] == 1_403_808
    ms = {source: values[0] for source, values in table["ms"].items()}
    # prefill: 2 x 8e9 FLOPs x 1,000 tokens / (2 x 1e15 x 0.5) = 16 ms
    assert ms["prefill"] == pytest.approx(16.0, rel=1e-9)
    # RDMA: 131,072,000 B / (2 x 40e9) = 1.6384 ms; disk, one NVMe: / 5e9 = 26.2144 ms
    assert ms["rdma"] == pytest.approx(1.6384, rel=1e-9)
    assert ms["disk"] == pytest.approx(26.2144, rel=1e-9)
    assert table["cluster_figures"]["nodes"] == [
        {"gpu": {"name": "MYGPU", "flops": 1e15, "hbm_bw": 4e12, "hbm_bytes": 100e9,
                 "pcie_bw": 50e9, "rdma_bw": 40e9, "nvme_bw": 5e9}, "n_gpus": 2}
    ]  # fmt: skip
    assert json.loads((tmp_path / "costs.json").read_text()) == table
    assert "mine on one 2xMYGPU node (KV 131,072 B/token" in capsys.readouterr().out
    # cluster.node is node=; the + is optional here
    bare = [arg.removeprefix("+") for arg in MYGPU]
    assert costs.main(["tokens=1000", *MINE, *bare, "cluster.node=2xMYGPU"]) == table


def test_costs_prints_a_table_per_node_kind_listed(tmp_path: Path) -> None:
    result = costs.main(["tokens=1000", "cluster.nodes=[4xH100,8xH200,4xH100]"])
    assert [t["node"] for t in result["nodes"]] == ["4xH100", "8xH200"]
    h100, h200 = result["nodes"]
    assert h100 == costs.main(["tokens=1000"])  # the default setup's node, as before
    # llama-3.3-70b on 8xH200: (8 x 141e9 - 141.2e9) / 327,680 = 3,011,474.6 -> 3,011,474
    assert h200["budget_tokens"] == 3_011_474
    # prefill: 2 x 70.6e9 x 1,000 / (8 x 989e12 x 0.5) = 35.69 ms, half of 4xH100's
    assert h200["ms"]["prefill"][0] == pytest.approx(35.69, abs=0.005)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["cluster.n_nodes=2"],
            "cluster.n_nodes= does not apply: the table is one node's (cluster.node=, or "
            "cluster.nodes=[...] for a table per node kind)",
        ),
        (  # it offered "node and n_nodes", and costs refuses n_nodes
            ["cluster.node=4xH100", MIXED],
            "cluster.node and cluster.nodes are both given (from the command line): "
            "cluster.nodes lists every node (give it alone, or cluster.node alone)",
        ),
        (
            ["node=4xH100", "cluster.node=8xH200"],
            "node= and cluster.node= are one option: give one of them (from the command line)",
        ),
        (
            ["model=qwen3-8b", "model.name=glm-4.5"],
            "model= and model.name= are one option: give one of them (from the command line)",
        ),
        (
            ["setup=glm52_h100x8", "cluster.node=1xH100"],
            "cluster.node='1xH100' (from the command line): a node (1xH100, 80 GB HBM) cannot "
            "hold glm-4.6: its weights need 372 GB (model.name='glm-4.6' from setup=glm52_h100x8)",
        ),
    ],
)
def test_costs_refuses_a_bad_cluster_option_in_one_line(
    args: list[str], message: str, run_command: Any, tmp_path: Path
) -> None:
    proc = run_command("experiments.costs", args, tmp_path)
    assert (proc.returncode, proc.stderr) == (2, f"error: experiments.costs: {message}\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["node=4xH100", MIXED],
            "node and cluster.nodes are both given (from the command line): cluster.nodes "
            "lists every node (give it alone, or node alone)",
        ),
        (
            ["model=glm-4.5", "model.layers=40"],
            "model.layers is given, but model='glm-4.5' is the preset glm-4.5 (give a model of "
            "one's own a new name) (from the command line)",
        ),
        (
            ["model=mine", "model.layers=40"],
            "model.total_params is missing: model='mine' is no preset, so a model of one's own "
            "gives each of total_params, active_params, bytes_per_elem, layers, kv_heads, "
            "head_dim (model.layers from the command line)",
        ),
        (
            ["setup=glm52_h100x8", "node=1xH100"],
            "node='1xH100' (from the command line): a node (1xH100, 80 GB HBM) cannot hold "
            "glm-4.6: its weights need 372 GB (model.name='glm-4.6' from setup=glm52_h100x8)",
        ),
        (
            ["model=glm52", "node=1xH100"],
            "node='1xH100' (from the command line): a node (1xH100, 80 GB HBM) cannot hold "
            "glm-4.6: its weights need 372 GB (model='glm52' from the command line)",
        ),
        (
            ["node=0xMYGPU", *MYGPU],
            "node='0xMYGPU' (from the command line): n_gpus must be an integer >= 1, got 0",
        ),
        (["node=4xH100,8xH200"], "node='4xH100,8xH200' (from the command line): several values "
         "are a sweep, which the Hydra commands run with -m; experiments.costs takes one (nodes "
         "of several kinds: cluster.nodes=[...])"),
        (["node=100xH100"], "node='100xH100' (from the command line): n_gpus must be at most "
         "72, got 100: a node's GPUs serve one model copy by tensor parallelism within one "
         "NVLink domain, and the largest (GB200 / GB300 NVL72) has 72; a cluster of more GPUs "
         "is more nodes"),
        # it said "(cluster.node=4xH100)" to a user who typed node=
        (["node=null"], "node is null: give a node kind (node=4xH100) or the nodes "
         "(cluster.nodes=[4xH100,8xH200]) (from the command line)"),
        (["cluster.node=null"], "cluster.node is null: give a node kind (cluster.node=4xH100) "
         "or the nodes (cluster.nodes=[4xH100,8xH200]) (from the command line)"),
        # OmegaConf's words: "model='null' (from the command line): field 'model.name' is not
        # Optional"
        (["model=null"], "model is null: give a model preset's name (model=llama-3.3-70b), or "
         "a new name beside ModelSpec's fields (a model of one's own) (from the command line)"),
    ],
)  # fmt: skip
def test_costs_names_model_and_node_as_typed(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``model=`` and ``node=`` are ``model.name`` and ``cluster.node``, and an error
    about one names it as typed wherever the cluster's builder says it (beside another
    option it said ``cluster.node and cluster.nodes are both given``, ``model.name=``)."""
    from experiments._cli import main_guard

    assert main_guard(lambda: costs.main(args)) == 2
    assert capsys.readouterr().err == f"error: experiments.costs: {message}\n"


@pytest.mark.parametrize(
    ("command", "why"),
    [
        (
            "reproduce",
            "it reproduces the published setups (setups=); compare runs one's own cluster",
        ),
        ("bench", "it measures the code's speed on one published setup (setup=)"),
        (
            "tune_btb_table",
            "the btb_tuned table is kept by published setup (setups=); tune_btb tunes BTB "
            "on one's own cluster",
        ),
    ],
)
def test_the_published_setups_commands_refuse_a_cluster_of_ones_own(
    command: str, why: str, run_command: Any, tmp_path: Path
) -> None:
    for option in (MIXED, MYGPU[0], "model.name=mine"):
        key = option.partition("=")[0]
        proc = run_command(f"experiments.{command}", [option], tmp_path)
        assert (proc.returncode, proc.stderr) == (
            2,
            f"error: experiments.{command}: {key}= describes a cluster of one's own, which "
            f"experiments.{command} does not take: {why}\n",
        )


REFERENCE_ON_MIXED = (
    "time_unit=reference needs nodes that prefill at one speed; this cluster's take "
    "3.57e-05, 7.14e-05 s a token"
)  # llama-3.3-70b: 71.4 us a token on 4xH100, 35.7 us on 8xH200


def test_a_shipped_agent_that_counts_reference_seconds_is_refused_on_mixed_speeds_before_any_run(
    run_command: Any, tmp_path: Path
) -> None:
    """improve_warm_step counts time_unit=reference, which needs one prefill speed: on
    4xH100 and 8xH200 it is refused before any run, naming it (it failed at its first
    window, after the baselines had run, naming no agent); evaluate likewise."""
    out = tmp_path / "run"
    proc = run_command(
        "experiments.compare",
        [*SMALL[:2], *QUIET, "agents=improve_warm_step", MIXED, f"out_dir={out}"],
        tmp_path,
    )
    line = f"agent 'improve_warm_step' (as trained): {REFERENCE_ON_MIXED}"
    assert (proc.returncode, proc.stderr) == (2, f"error: experiments.compare: {line}\n")
    assert not out.exists()
    proc = run_command(
        "experiments.evaluate",
        ["logger=none", "workload=tiny", "checkpoint=[improve_warm_step]", MIXED,
         f"out_dir={out}"],
        tmp_path,
    )  # fmt: skip
    assert (proc.returncode, proc.stderr) == (2, f"error: experiments.evaluate: {line}\n")


def test_agents_zoo_on_mixed_speeds_leaves_out_the_agents_that_cannot_run_there(
    run_command: Any, tmp_path: Path
) -> None:
    """The main job's default agents=zoo on a cluster of mixed nodes runs every
    shipped agent that can, and says which it leaves out and why."""
    out = tmp_path / "run"
    proc = run_command(
        "experiments.compare", [*SMALL[:2], *QUIET, "policies=least_load", MIXED,
                                f"out_dir={out}"], tmp_path
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == (
        "note: agents=zoo leaves out improve_warm_anchored, improve_warm_reference, "
        "improve_warm_step, which cannot "
        f"run on llama-3.3-70b_4xH100_x2+8xH200_x1: {REFERENCE_ON_MIXED}; agents= naming one "
        "refuses it"
    )
    result = json.loads((out / "results.json").read_text())
    from agents import zoo_names

    reference = {"improve_warm_anchored", "improve_warm_reference", "improve_warm_step"}
    ran = {row["policy"] for row in result["rows"]}
    assert ran >= set(zoo_names()) - reference
    assert not ran & reference
    assert len(result["config"]["agents"]) == len(zoo_names()) - 3
    # the agents run, and they only, are the checkpoints provenance records (the three
    # left out were listed too, read to find they could not run); those apart, saying why
    run = {str(Path(folder).resolve()) for folder in result["config"]["agents"]}
    assert set(result["provenance"]["agent_files"]) == run
    left_out = result["config"]["agents_left_out"]
    assert {Path(folder).name for folder in left_out} == reference
    assert set(left_out.values()) == {REFERENCE_ON_MIXED}


def test_an_agent_named_beside_agents_zoo_that_counts_reference_seconds_is_refused(
    run_command: Any, tmp_path: Path
) -> None:
    """agents=zoo leaves out the shipped agents it brings that cannot run on mixed
    speeds; an agent of one's own named beside it is the user's and refused, as
    named alone (it was left out with the zoo's, and the note said agents=zoo left
    it out)."""
    import shutil

    mine = tmp_path / "mine"
    shutil.copytree(ROOT / "agents" / "zoo" / "improve_warm_step", mine)
    out = tmp_path / "run"
    proc = run_command(
        "experiments.compare",
        [*SMALL[:2], *QUIET, "policies=least_load", f"agents=zoo,{mine}", MIXED,
         f"out_dir={out}"],
        tmp_path,
    )  # fmt: skip
    # two agents named improve_warm_step: each labelled by its folder (agent_labels)
    line = f"agent 'improve_warm_step@mine' (as trained): {REFERENCE_ON_MIXED}"
    assert (proc.returncode, proc.stderr) == (2, f"error: experiments.compare: {line}\n")
    assert not out.exists()
