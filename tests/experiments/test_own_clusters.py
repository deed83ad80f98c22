"""Clusters of one's own from the Hydra commands' config: mixed nodes
(``cluster.nodes``), a model of one's own (ModelSpec's fields beside a new
``model.name``), a GPU kind of one's own (``cluster.gpus.NAME``); their figures
worked out by hand, their errors one line naming the key and its source, and
their record in results.json and agent.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir

from envs.sim import ClusterSpec, ConfigError, ModelSpec, NodeCosts, model_preset, parse_node
from experiments.config import cluster_of, register_configs, setup_label
from experiments.train import env_kwargs, make_env_fn_kwargs

ROOT = Path(__file__).resolve().parents[2]
register_configs()

MIXED = "cluster.nodes=[4xH100,4xH100,8xH200]"
# a dense model of one's own: 8e9 params at 2 bytes, 32 layers, 8 KV heads of 128
MINE = [
    "model.name=mine",
    "model.total_params=8e9",
    "model.active_params=8e9",
    "model.bytes_per_elem=2",
    "model.layers=32",
    "model.kv_heads=8",
    "model.head_dim=128",
]
# a GPU of one's own: 1 PFLOP/s, 4 TB/s HBM of 100 GB, 50 GB/s PCIe, 40 GB/s RDMA, 5 GB/s NVMe
MYGPU = [
    f"+cluster.gpus.MYGPU.{key}={value}"
    for key, value in (
        ("flops", "1e15"),
        ("hbm_bw", "4e12"),
        ("hbm_bytes", "100e9"),
        ("pcie_bw", "50e9"),
        ("rdma_bw", "40e9"),
        ("nvme_bw", "5e9"),
    )
]


def _compose(overrides: list[str], name: str = "train") -> Any:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name=name, overrides=overrides)


def test_a_mixed_cluster_from_config_by_hand() -> None:
    cfg = _compose([MIXED])
    cluster = cluster_of(cfg)
    assert [node.name for node in cluster.nodes] == ["4xH100", "4xH100", "8xH200"]
    costs = [NodeCosts(node, cluster.model) for node in cluster.nodes]
    # llama-3.3-70b, 327,680 KV bytes a token, 141.2 GB of weights:
    # 4xH100: (320e9 - 141.2e9) / 327,680 = 545,654.3 -> 545,654 tokens
    # 8xH200: (8 x 141e9 - 141.2e9) / 327,680 = 3,011,474.6 -> 3,011,474 tokens
    assert [c.budget_tokens for c in costs] == [545_654, 545_654, 3_011_474]
    # prefill 2 x 70.6e9 / (4 x 989e12 x 0.5) = 71.385 us a token; on 8 GPUs half that
    assert costs[0].prefill_s_per_token == pytest.approx(71.385e-6, rel=1e-4)
    assert costs[2].prefill_s_per_token == pytest.approx(35.693e-6, rel=1e-4)
    # decode's weight read: 141.2e9 / (4 x 3.35e12 x 0.8) = 13.172 ms; 8 x 4.8e12: 4.5964 ms
    assert costs[0].decode_weight_s == pytest.approx(13.172e-3, rel=1e-4)
    assert costs[2].decode_weight_s == pytest.approx(4.5964e-3, rel=1e-4)
    # the rows' label names each kind with its count
    assert setup_label(cfg) == "llama-3.3-70b_4xH100_x2+8xH200_x1"


def test_a_model_of_ones_own_by_hand() -> None:
    cfg = _compose(MINE)
    cluster = cluster_of(cfg)
    assert cluster.model == ModelSpec("mine", 8e9, 8e9, 2, 32, 8, 128)
    costs = NodeCosts(cluster.nodes[0], cluster.model)
    # KV: 2 x 32 x 8 x 128 x 2 = 131,072 B a token
    assert costs.kv_bytes_per_token == 131_072
    # budget on 4xH100: (320e9 - 16e9) / 131,072 = 2,319,335.9 -> 2,319,335 tokens
    assert costs.budget_tokens == 2_319_335
    # RDMA: 131,072 B over 4 x 50e9 B/s = 0.65536 us a token
    assert costs.load_s(1, "rdma") == pytest.approx(0.65536e-6, rel=1e-9)
    assert setup_label(cfg) == "mine_4xH100_x4"


def test_a_gpu_of_ones_own_by_hand() -> None:
    cfg = _compose([*MYGPU, "cluster.node=2xMYGPU", "cluster.n_nodes=3"])
    cluster = cluster_of(cfg)
    assert [node.name for node in cluster.nodes] == ["2xMYGPU"] * 3
    costs = NodeCosts(cluster.nodes[0], cluster.model)
    # llama: (2 x 100e9 - 141.2e9) / 327,680 = 179,443.4 -> 179,443 tokens
    assert costs.budget_tokens == 179_443
    # prefill 141.2e9 / (2 x 1e15 x 0.5) = 141.2 us a token; decode weights 141.2e9 /
    # (2 x 4e12 x 0.8) = 22.0625 ms; RDMA 327,680 / (2 x 40e9) = 4.096 us a token
    assert costs.prefill_s_per_token == pytest.approx(141.2e-6, rel=1e-9)
    assert costs.decode_weight_s == pytest.approx(22.0625e-3, rel=1e-9)
    assert costs.load_s(1, "rdma") == pytest.approx(4.096e-6, rel=1e-9)
    # disk: one NVMe of 5e9 B/s, not doubled
    assert costs.load_s(1, "disk") == pytest.approx(327_680 / 5e9, rel=1e-9)
    assert setup_label(cfg) == "llama-3.3-70b_2xMYGPU_x3"
    # a mixed cluster of it and a preset node
    mixed = cluster_of(_compose([*MYGPU, "cluster.nodes=[2xMYGPU,4xH100]"]))
    assert [node.name for node in mixed.nodes] == ["2xMYGPU", "4xH100"]


def test_the_presets_stay_as_they_were() -> None:
    cfg = _compose(["setup=glm45_h100x4"])
    assert cluster_of(cfg) == ClusterSpec.uniform("glm-4.5", "4xH100", 4)
    assert setup_label(cfg) == "glm45_h100x4"
    assert "cluster" not in env_kwargs(cfg)  # an agent's record of a preset, as before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            [MIXED, "cluster.n_nodes=3"],
            "cluster.n_nodes and cluster.nodes are both given (from the command line): "
            "cluster.nodes lists every node (give it alone, or node and n_nodes)",
        ),
        (  # the option chosen was dropped for the nodes without a word
            ["cluster=4xH100_x2", MIXED],
            "cluster=4xH100_x2 and cluster.nodes are both given (from the command line): "
            "cluster.nodes lists every node (give it alone, or the cluster option)",
        ),
        (
            [MIXED, "cluster=8xH200_x4"],
            "cluster=8xH200_x4 and cluster.nodes are both given (from the command line): "
            "cluster.nodes lists every node (give it alone, or the cluster option)",
        ),
        (
            ["cluster.nodes=[4xH100,1xH100]"],
            "cluster.nodes[1]='1xH100' (from the command line): a node (1xH100, 80 GB HBM) "
            "cannot hold llama-3.3-70b: its weights need 141.2 GB (model.name="
            "'llama-3.3-70b' from conf/model/llama-3.3-70b.yaml)",
        ),
        (
            ["cluster.nodes=[]"],
            "cluster.nodes must be a list of one node kind or more ([4xH100,8xH200]), got [] "
            "(from the command line)",
        ),
        (  # said to be an unknown GPU preset "['4xH100']"
            ["cluster.nodes=[[4xH100]]"],
            "cluster.nodes[0] must be a node kind like 4xH100, got ['4xH100'] (from the "
            "command line)",
        ),
        (
            ["model.name=70b", "model.layers=3"],
            "model.layers is given, but model.name='70b' is the preset llama-3.3-70b (give a "
            "model of one's own a new name) (from the command line)",
        ),
        (
            MINE[:2],
            "model.active_params is missing: model.name='mine' is no preset, so a model of "
            "one's own gives each of total_params, active_params, bytes_per_elem, layers, "
            "kv_heads, head_dim (model.total_params from the command line)",
        ),
        (
            [*MINE[:-1], "model.head_dim=0"],
            "model.head_dim must be an integer >= 1, got 0 (from the command line)",
        ),
        (
            [*MINE[:2], "model.active_params=9e9", *MINE[3:]],
            "model.active_params (9e+09) exceeds model.total_params (8e+09) (from the "
            "command line)",
        ),
        (
            [*MYGPU[:1], "cluster.node=4xMYGPU"],
            "cluster.gpus.MYGPU.hbm_bw is missing: a GPU of one's own gives each of flops, "
            "hbm_bw, hbm_bytes, pcie_bw, rdma_bw, nvme_bw (from the command line)",
        ),
        (
            [*MYGPU, "+cluster.gpus.MYGPU.bogus=1"],
            "unknown key cluster.gpus.MYGPU.bogus (from the command line); a GPU of one's "
            "own takes: flops, hbm_bw, hbm_bytes, pcie_bw, rdma_bw, nvme_bw",
        ),
        (
            ["+cluster.gpus.h100.flops=1"],
            "cluster.gpus.h100 is named as the preset H100: give a GPU of one's own a new "
            "name (from the command line)",
        ),
        (
            [*MYGPU[1:], "+cluster.gpus.MYGPU.flops=-1", "cluster.node=4xMYGPU"],
            "cluster.gpus.MYGPU.flops must be a positive finite number, got -1 (from the "
            "command line)",
        ),
    ],
)
def test_a_bad_cluster_is_one_line_naming_the_key_and_its_source(
    args: list[str], message: str, run_command: Any, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    proc = run_command(
        "experiments.evaluate",
        ["logger=none", "workload=tiny", "policies=[least_load]", *args, f"out_dir={out}"],
        tmp_path,
    )
    assert proc.returncode == 2
    assert proc.stderr == f"error: experiments.evaluate: {message}\n"
    assert not out.exists()


def test_a_null_node_beside_the_nodes_is_no_second_cluster(
    run_command: Any, tmp_path: Path
) -> None:
    """cluster.node=null gives no node: it was refused as given beside cluster.nodes."""
    out = tmp_path / "run"
    proc = run_command(
        "experiments.evaluate",
        ["logger=none", "workload=tiny", "policies=[least_load]", "cluster.node=null",
         MIXED, f"out_dir={out}", "progress=false"],
        tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (out / "results.json").is_file()


def test_a_model_of_ones_own_in_a_config_file_is_named_by_its_file(
    run_command: Any, tmp_path: Path
) -> None:
    (tmp_path / "model").mkdir()
    mine = tmp_path / "model" / "mine.yaml"
    mine.write_text(
        "name: mine\ntotal_params: 8.0e9\nactive_params: 8.0e9\nbytes_per_elem: 2\n"
        "layers: 32\nkv_heads: -8\nhead_dim: 128\n"
    )
    (tmp_path / "cluster").mkdir()
    (tmp_path / "cluster" / "mixed.yaml").write_text("nodes: [4xH100, 8xH200]\nnode: 4xH100\n")
    search = f"hydra.searchpath=[file://{tmp_path}]"
    for args, message in (
        (["model=mine"], f"model.kv_heads must be an integer >= 1, got -8 (from {mine})"),
        (
            ["cluster=mixed"],
            f"cluster.node and cluster.nodes are both given (from {tmp_path}/cluster/"
            "mixed.yaml): cluster.nodes lists every node (give it alone, or node and n_nodes)",
        ),
    ):
        proc = run_command(
            "experiments.evaluate",
            ["logger=none", "workload=tiny", search, *args, f"out_dir={tmp_path / 'run'}"],
            tmp_path,
        )
        assert (proc.returncode, proc.stderr) == (2, f"error: experiments.evaluate: {message}\n")


def test_results_and_agents_record_the_figures(tmp_path: Path) -> None:
    """results.json records the cluster's figures in full; an agent trained on a
    cluster of one's own records them in its env_kwargs, and its env is made of
    them, not of the names (a preset's agent, or one saved before, as before)."""
    from experiments.evaluate import evaluate

    overrides = [*MINE, "cluster.nodes=[4xH100,8xH200]"]
    cfg = _compose(
        ["logger=none", "workload=tiny", "workload.eval_windows=1", "progress=false",
         "policies=[least_load]", *overrides, f"out_dir={tmp_path}"],
        "evaluate",
    )  # fmt: skip
    evaluate(cfg)
    result = json.loads((tmp_path / "results.json").read_text())
    figures = result["config"]["cluster_figures"]
    assert figures["model"]["kv_heads"] == 8 and figures["model"]["total_params"] == 8e9
    assert [n["n_gpus"] for n in figures["nodes"]] == [4, 8]
    assert figures["nodes"][1]["gpu"]["hbm_bytes"] == 141e9  # H200
    assert ClusterSpec.from_figures(figures) == cluster_of(cfg)
    assert result["config"]["cluster"]["n_nodes"] == 2
    assert {row["setup"] for row in result["rows"]} == {"mine_4xH100_x1+8xH200_x1"}

    kwargs = json.loads(json.dumps(env_kwargs(_compose(overrides))))  # as agent.json holds it
    assert kwargs["n_nodes"] == 2 and kwargs["cluster"] == figures
    kwargs["model"] = "llama-3.3-70b"  # the names are not what the env is made of
    assert make_env_fn_kwargs(kwargs, [])["setup"] == ClusterSpec.from_figures(figures)
    saved_before = {"model": "qwen3-8b", "node": "8xH200", "n_nodes": 2}
    assert make_env_fn_kwargs(saved_before, [])["setup"] == ClusterSpec(
        model_preset("qwen3-8b"), (parse_node("8xH200"),) * 2
    )


def test_figures_are_checked_again_when_read() -> None:
    figures = ClusterSpec.uniform("qwen3-8b", "4xH100", 1).figures()
    figures["model"]["layers"] = 0
    with pytest.raises(ConfigError, match=r"^figures\.model\.layers must be an integer"):
        ClusterSpec.from_figures(figures)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda f: f["model"].update(layers=0), "model.layers must be an integer >= 1, got 0"),
        (
            lambda f: f["nodes"][1]["gpu"].update(flops="1e15"),
            "nodes[1].gpu.flops must be a positive finite number, got '1e15'",
        ),
        (
            lambda f: f["nodes"][0].update(n_gpus=0),
            "nodes[0].n_gpus must be an integer >= 1, got 0",
        ),
        (lambda f: f["model"].pop("kv_heads"), "model: missing key 'kv_heads'; known: name, "),
        (lambda f: f.update(nodes=[]), "nodes must be a non-empty list of nodes, got []"),
        (lambda f: f.pop("model"), ": missing key 'model'; known: model, nodes"),
    ],
)
def test_a_saved_agent_s_cluster_figures_are_checked_when_it_loads(
    edit: Any, message: str, tmp_path: Path
) -> None:
    """agent.json's env_kwargs.cluster is made again when the agent loads: a figure
    that makes no cluster is one line naming the file and the key below it."""
    import shutil

    from agents.algorithms import load_spec

    folder = tmp_path / "agent"
    shutil.copytree(ROOT / "agents" / "zoo" / "scratch_route_warm", folder)
    data = json.loads((folder / "agent.json").read_text())
    data["env_kwargs"]["cluster"] = ClusterSpec.uniform("qwen3-8b", "4xH100", 2).figures()
    (folder / "agent.json").write_text(json.dumps(data))
    assert load_spec(folder).env_kwargs["cluster"]["nodes"][1]["n_gpus"] == 4  # whole: loads
    edit(data["env_kwargs"]["cluster"])
    (folder / "agent.json").write_text(json.dumps(data))
    with pytest.raises(ConfigError) as raised:
        load_spec(folder)
    assert str(raised.value).startswith(
        f"{folder / 'agent.json'}: env_kwargs.cluster{'' if message[0] == ':' else '.'}{message}"
    )


def test_an_agent_of_a_cluster_of_its_own_run_on_another_is_told_how_to_run_it_on_its_own() -> None:
    """An agent whose agent.json records a cluster of its own gets a note naming
    the overrides of that cluster, which compose back to it; on its own cluster,
    or recorded on a preset cluster (no figures), no note."""
    from types import SimpleNamespace

    from experiments.config import cluster_overrides
    from experiments.trained_on import cluster_notes

    own = cluster_of(_compose([*MINE, *MYGPU, "cluster.nodes=[2xMYGPU,4xH100,4xH100]"]))
    overrides = cluster_overrides(own)
    assert overrides == [
        "model.name=mine", "model.total_params=8e+09", "model.active_params=8e+09",
        "model.bytes_per_elem=2", "model.layers=32", "model.kv_heads=8", "model.head_dim=128",
        "model.attn_dim=8192", "+cluster.gpus.MYGPU.flops=1e+15",
        "+cluster.gpus.MYGPU.hbm_bw=4e+12", "+cluster.gpus.MYGPU.hbm_bytes=1e+11",
        "+cluster.gpus.MYGPU.pcie_bw=5e+10",
        "+cluster.gpus.MYGPU.rdma_bw=4e+10", "+cluster.gpus.MYGPU.nvme_bw=5e+09",
        "cluster.nodes=[2xMYGPU,4xH100,4xH100]",
    ]  # fmt: skip
    assert cluster_of(_compose(overrides)) == own
    # an int figure as it is: 1e+06 would be read as a float, which the int refuses
    million = cluster_of(_compose([*MINE, "model.max_context_tokens=1000000"]))
    long_overrides = cluster_overrides(million)
    assert "model.max_context_tokens=1000000" in long_overrides
    assert cluster_of(_compose(long_overrides)) == million
    mixed = cluster_of(_compose([MIXED]))
    assert cluster_overrides(mixed) == [
        "model.name=llama-3.3-70b",
        "cluster.nodes=[4xH100,4xH100,8xH200]",
    ]
    assert cluster_overrides(ClusterSpec.uniform("qwen3-8b", "8xH200", 2)) == [
        "model.name=qwen3-8b", "cluster.node=8xH200", "cluster.n_nodes=2"
    ]  # fmt: skip

    def agent(kwargs: dict[str, Any]) -> Any:
        return SimpleNamespace(spec=SimpleNamespace(env_kwargs=kwargs))

    agents = {
        "a": agent({"cluster": json.loads(json.dumps(own.figures()))}),
        "preset": agent({"model": "qwen3-8b", "node": "4xH100", "n_nodes": 4}),
    }
    here = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 4)
    assert cluster_notes(agents, here, "70b_h100x4", "experiments.evaluate with ") == [
        "note: a was trained on a cluster of its own (mine_2xMYGPU_x1+4xH100_x2), not the "
        f"70b_h100x4 it runs on here: experiments.evaluate with {' '.join(overrides)} runs it "
        "on its own cluster"
    ]
    assert cluster_notes(agents, own, "mine_2xMYGPU_x1+4xH100_x2") == []


def test_nodes_of_one_preset_node_are_named_as_the_uniform_cluster() -> None:
    """cluster.nodes of four 4xH100 serving llama-3.3-70b is the default cluster,
    named as it (70b_h100x4), before and after check_world rewrites the group; two of
    them, the uniform path's name; a GPU or model of one's own keeps its own."""
    from experiments.jobs import check_world

    four = _compose(["cluster.nodes=[4xH100,4xH100,4xH100,4xH100]"])
    assert cluster_of(four) == cluster_of(_compose([]))
    assert setup_label(four) == "70b_h100x4"
    check_world(four)
    assert setup_label(four) == "70b_h100x4"
    assert setup_label(_compose(["model.name=70b", "cluster.nodes=[4xh100,4xh100]"])) == (
        "llama-3.3-70b_4xH100_x2"
    )
    assert setup_label(_compose([*MINE, "cluster.nodes=[4xH100,4xH100]"])) == "mine_4xH100_x2"
    own = _compose([*MYGPU, "cluster.nodes=[4xMYGPU,4xMYGPU]"])
    assert setup_label(own) == "llama-3.3-70b_4xMYGPU_x2"


def test_a_resumed_run_on_other_cluster_figures_says_the_clusters_by_their_labels() -> None:
    """resume of an agent of a cluster of its own on the default cluster: the change
    reads as the two clusters' labels, not the figures (about 1,500 characters)."""
    from experiments.train import resume_changes

    saved = json.loads(
        json.dumps(env_kwargs(_compose([*MINE, *MYGPU, "cluster.nodes=[2xMYGPU,4xH100,4xH100]"])))
    )
    asked = env_kwargs(_compose([]))
    changes = resume_changes(saved, asked)
    assert changes["cluster"] == ["mine_2xMYGPU_x1+4xH100_x2", "llama-3.3-70b_4xH100_x4"]
    assert changes["model.name"] == ["mine", "llama-3.3-70b"]


def test_tune_btb_s_m_range_names_the_nodes_the_user_listed(
    run_command: Any, tmp_path: Path
) -> None:
    """M counts warm copies, at most the cluster's nodes: on cluster.nodes of three
    nodes, a run's and a sweep's M beyond 3 are refused naming cluster.nodes (what
    the user set), not cluster.n_nodes (which they did not); n_nodes as before."""
    out = tmp_path / "run"
    proc = run_command(
        "experiments.tune_btb",
        ["logger=none", "workload=tiny", MIXED, "m=4", f"out_dir={out}"],
        tmp_path,
    )
    assert (proc.returncode, proc.stderr) == (
        2,
        "error: experiments.tune_btb: m must be in 1..3 (the cluster's nodes, "
        "cluster.nodes=[4xH100,4xH100,8xH200]: 3 nodes), got 4 (from the command line)\n",
    )
    assert not out.exists()
    proc = run_command(
        "experiments.tune_btb",
        ["-m", "logger=none", "workload=tiny", MIXED, "m=int(interval(1,4))"],
        tmp_path,
    )
    assert (proc.returncode, proc.stderr) == (
        2,
        "error: experiments.tune_btb: m=int(interval(1,4)) (from the command line) lets the "
        "sweep draw m from 1 to 4, outside 1..3 (BTB's M counts warm copies: at most the "
        "nodes of the cluster, cluster.nodes=[4xH100,4xH100,8xH200]: 3 nodes); e.g. "
        "'m=int(interval(1, 3))'\n",
    )
    proc = run_command(
        "experiments.tune_btb",
        ["logger=none", "workload=tiny", "cluster.n_nodes=2", "m=3", f"out_dir={out}"],
        tmp_path,
    )
    assert proc.stderr == (
        "error: experiments.tune_btb: m must be in 1..2 (the cluster's nodes, "
        "cluster.n_nodes=2), got 3 (from the command line)\n"
    )


def test_a_resumed_run_whose_own_gpu_kept_its_name_says_the_figure_that_changed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """MYGPU's FLOP/s doubled, its name kept: both clusters are labelled
    mine_2xMYGPU_x1+4xH100_x2, so the note says the figure on each side; a model's
    figure and the nodes' order likewise; another label alone, as before."""
    from experiments.train import print_resume_changes, resume_changes

    nodes = "cluster.nodes=[2xMYGPU,4xH100,4xH100]"
    saved = json.loads(json.dumps(env_kwargs(_compose([*MINE, *MYGPU, nodes]))))
    faster = [*MYGPU[1:], "+cluster.gpus.MYGPU.flops=2e15"]
    changes = resume_changes(saved, env_kwargs(_compose([*MINE, *faster, nodes])))
    label = "mine_2xMYGPU_x1+4xH100_x2"
    assert changes["cluster"] == [
        f"{label} (cluster.gpus.MYGPU.flops=1e+15)",
        f"{label} (cluster.gpus.MYGPU.flops=2e+15)",
    ]
    print_resume_changes("CKPT", changes, None)
    assert capsys.readouterr().out == (
        f"note: resume=CKPT was trained with cluster='{label} (cluster.gpus.MYGPU.flops=1e+15)'"
        f"; training goes on with cluster='{label} (cluster.gpus.MYGPU.flops=2e+15)' "
        "(recorded in results.json)\n"
    )
    deeper = [*MINE[:4], "model.layers=40", *MINE[5:]]
    reordered = "cluster.nodes=[4xH100,2xMYGPU,4xH100]"
    asked = env_kwargs(_compose([*deeper, *MYGPU, "cluster.nodes=[4xH100,4xH100,2xMYGPU]"]))
    before = json.loads(json.dumps(env_kwargs(_compose([*MINE, *MYGPU, reordered]))))
    assert resume_changes(before, asked)["cluster"] == [
        "mine_4xH100_x2+2xMYGPU_x1 (model.layers=32, cluster.nodes=[4xH100,2xMYGPU,4xH100])",
        "mine_4xH100_x2+2xMYGPU_x1 (model.layers=40, cluster.nodes=[4xH100,4xH100,2xMYGPU])",
    ]
    other = env_kwargs(_compose([*MINE, *MYGPU, "cluster.nodes=[4xH100,4xH100,2xMYGPU]"]))
    assert resume_changes(saved, other)["cluster"] == [label, "mine_4xH100_x2+2xMYGPU_x1"]


def test_tune_btb_s_default_m_range_follows_the_nodes_listed() -> None:
    """conf/hydra/sweeper/btb_optuna.yaml's M is 1..the cluster's nodes: three for
    cluster.nodes of three entries (it followed cluster.n_nodes, the default
    option's 4, and the sweep was refused before it started); n_nodes as before."""
    from experiments.config import cluster_size
    from experiments.tune_btb import check_sweep

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        for overrides, m in (([MIXED], 3), (["cluster.n_nodes=2"], 2), ([], 4)):
            cfg = compose("tune_btb", overrides=overrides, return_hydra_config=True)
            assert cfg.hydra.sweeper.params.m == f"int(interval(1, {m}))"
            assert cluster_size(cfg) == m  # the resolver's count, by the one rule
    check_sweep(["-m", "workload=tiny", MIXED])


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (
            "cluster.nodes=[]",
            "cluster.nodes must be a list of one node kind or more ([4xH100,8xH200]), got []",
        ),
        ("cluster.n_nodes=0", "cluster.n_nodes must be an integer in [1, 4096], got 0"),
        ("cluster.n_nodes=0,2", "cluster.n_nodes must be an integer in [1, 4096], got 0"),
    ],
)
def test_a_tune_btb_sweep_on_a_cluster_of_no_node_is_refused_as_a_run_is(
    option: str, message: str, run_command: Any, tmp_path: Path
) -> None:
    """A sweep's cluster of no node says what a single run says; it said the default
    M range, int(interval(1, 0)), was outside 1..0 and suggested that range again."""
    out = tmp_path / "run"
    proc = run_command(
        "experiments.tune_btb", ["-m", "logger=none", "workload=tiny", option, f"out_dir={out}"],
        tmp_path,
    )  # fmt: skip
    said = f"error: experiments.tune_btb: {message} (from the command line)\n"
    assert (proc.returncode, proc.stderr) == (2, said)
    assert not out.exists()
    if option != "cluster.n_nodes=0,2":  # a single run: the same line
        proc = run_command(
            "experiments.tune_btb", ["logger=none", "workload=tiny", option, f"out_dir={out}"],
            tmp_path,
        )  # fmt: skip
        assert (proc.returncode, proc.stderr) == (2, said)


def test_an_agent_whose_own_gpu_kept_its_name_is_told_the_figure_that_changed() -> None:
    """evaluate's and compare's note for an agent of a cluster of its own run on
    another: where both are one label (MYGPU's FLOP/s doubled, its name kept), each
    side names the figure that changed, as a resumed run's note does; it said
    'trained on ... (mine_2xMYGPU_x1+4xH100_x2), not the mine_2xMYGPU_x1+4xH100_x2 it
    runs on here'."""
    from types import SimpleNamespace

    from experiments.config import cluster_overrides
    from experiments.trained_on import cluster_notes

    nodes = "cluster.nodes=[2xMYGPU,4xH100,4xH100]"
    own = cluster_of(_compose([*MINE, *MYGPU, nodes]))
    here = cluster_of(_compose([*MINE, *MYGPU[1:], "+cluster.gpus.MYGPU.flops=2e15", nodes]))
    label = "mine_2xMYGPU_x1+4xH100_x2"
    assert setup_label(_compose([*MINE, *MYGPU, nodes])) == label
    figures = json.loads(json.dumps(own.figures()))
    agents = {"a": SimpleNamespace(spec=SimpleNamespace(env_kwargs={"cluster": figures}))}
    assert cluster_notes(agents, here, label, "experiments.compare with ") == [
        f"note: a was trained on a cluster of its own ({label} (cluster.gpus.MYGPU.flops="
        f"1e+15)), not the {label} (cluster.gpus.MYGPU.flops=2e+15) it runs on here: "
        f"experiments.compare with {' '.join(cluster_overrides(own))} runs it on its own "
        "cluster"
    ]
