"""Clusters of one's own: custom GPUs and models, mixed node kinds; their timing
worked out by hand, and how they are named and checked."""

from __future__ import annotations

import pytest
from simkit import CORES

from envs.sim import (
    ClusterSpec,
    ConfigError,
    GpuSpec,
    ModelSpec,
    NodeCosts,
    NodeSpec,
    SimConfig,
    SimulationError,
    Simulator,
    model_preset,
    parse_node,
)
from envs.sim.request import Request, Workload

LLAMA = model_preset("llama-3.3-70b")


def test_a_mixed_cluster_is_named_with_each_kind_and_its_count() -> None:
    uniform = ClusterSpec.uniform(LLAMA, "4xH100", 4)
    assert uniform.name == "llama-3.3-70b on 4 x 4xH100"
    h100, h200 = parse_node("4xH100"), parse_node("8xH200")
    two_one = ClusterSpec(LLAMA, (h100, h200, h100))
    one_two = ClusterSpec(LLAMA, (h100, h200, h200))
    assert two_one.name == "llama-3.3-70b on 2 x 4xH100 + 1 x 8xH200"
    assert one_two.name == "llama-3.3-70b on 1 x 4xH100 + 2 x 8xH200"
    # a GPU of one's own under a preset's name is another kind, counted apart
    other = NodeSpec(GpuSpec("H100", 989e12, 3.35e12, 40e9, 55e9, 50e9, 7e9), 4)
    assert ClusterSpec(LLAMA, (h100, other)).name == "llama-3.3-70b on 1 x 4xH100 + 1 x 4xH100"


def test_a_node_of_a_gpu_name_is_refused_when_made() -> None:
    with pytest.raises(TypeError, match=r"NodeSpec\.gpu must be a GpuSpec, got 'H100'"):
        NodeSpec("H100", 4)  # type: ignore[arg-type]


def test_nodes_given_as_a_list_are_kept_as_a_tuple() -> None:
    nodes = [parse_node("4xH100"), parse_node("8xH200")]
    cluster = ClusterSpec(LLAMA, nodes)  # type: ignore[arg-type]
    nodes.append(parse_node("1xH100"))  # the caller's list, not the cluster's
    assert cluster.nodes == (parse_node("4xH100"), parse_node("8xH200"))
    assert hash(cluster) == hash(ClusterSpec(LLAMA, tuple(cluster.nodes)))


# ------------------------------------------- hand-worked numbers of one's own
# an H200 NVL (835 TFLOP/s, 4.8 TB/s, 141 GB) and an A100 with 40 GB (1.555 TB/s)
H200_NVL = GpuSpec("H200-NVL", 835e12, 4.8e12, 141e9, 55e9, 50e9, 7e9)
A100_40 = GpuSpec("A100-40", 312e12, 1.555e12, 40e9, 25e9, 25e9, 5e9)
# an MoE model at 1 byte an element, 48 layers, 4 KV heads (GQA) of 128
MOE = ModelSpec("my-moe", 120e9, 12e9, 1, 48, 4, 128)
# a dense model at 2 bytes, 40 layers, 8 KV heads of 128
DENSE = ModelSpec("my-dense", 13e9, 13e9, 2, 40, 8, 128)


def test_an_moe_model_on_two_h200_nvl_by_hand() -> None:
    costs = NodeCosts(NodeSpec(H200_NVL, 2), MOE)
    # KV: 2 x 48 x 4 x 128 x 1 = 49,152 B a token
    assert costs.kv_bytes_per_token == 49_152
    # budget: (2 x 141e9 - 120e9) / 49,152 = 3,295,898.4 -> 3,295,898 tokens
    assert costs.budget_tokens == 3_295_898
    # prefill: 2 x 12e9 (active) / (2 x 835e12 x 0.5) = 28.743 us a token
    assert costs.prefill_s(1000) == pytest.approx(0.028743, rel=1e-4)
    # decode, 1 step of 1 sequence at 1,000 tokens: (12e9 + 49,152 x 1,000) / 7.68e12
    assert costs.decode_s(1, 1, 1000) == pytest.approx(0.0015689, rel=1e-4)
    # RDMA: a 256-token block is 12,582,912 B over 2 x 50e9 B/s = 125.83 us
    assert costs.load_s(256, "rdma") == pytest.approx(125.83e-6, rel=1e-4)
    # RAM over 2 x 55e9 B/s; disk over one 7e9 B/s NVMe (not doubled)
    assert costs.load_s(1000, "ram") == pytest.approx(446.84e-6, rel=1e-4)
    assert costs.load_s(1000, "disk") == pytest.approx(7.0217e-3, rel=1e-4)


def test_a_dense_model_on_two_a100_40gb_by_hand() -> None:
    costs = NodeCosts(NodeSpec(A100_40, 2), DENSE)
    # KV: 2 x 40 x 8 x 128 x 2 = 163,840 B a token
    assert costs.kv_bytes_per_token == 163_840
    # budget: (80e9 - 26e9) / 163,840 = 329,589.8 -> 329,589 tokens
    assert costs.budget_tokens == 329_589
    # prefill: 2 x 13e9 / (2 x 312e12 x 0.5) = 83.333 us a token
    assert costs.prefill_s(1000) == pytest.approx(0.083333, rel=1e-4)
    # decode, 2 steps of 1 sequence at 1,000 tokens:
    # (26e9 x 2 + 163,840 x (2 x 1,000 + 1)) / (2 x 1.555e12 x 0.8) = 21.0321 ms
    assert costs.decode_s(2, 1, 1000) == pytest.approx(0.0210321, rel=1e-4)
    # RDMA: 1,000 tokens = 163.84 MB over 50e9 B/s = 3.2768 ms
    assert costs.load_s(1000, "rdma") == pytest.approx(3.2768e-3, rel=1e-9)
    # one A100-40 holds it too: (40e9 - 26e9) / 163,840 = 85,449.2 -> 85,449 tokens
    assert NodeCosts(NodeSpec(A100_40, 1), DENSE).budget_tokens == 85_449
    # a 30e9-parameter one (60 GB) does not fit one: an error naming node, model, sizes
    bigger = ModelSpec("my-dense-30b", 30e9, 30e9, 2, 40, 8, 128)
    with pytest.raises(ConfigError, match=r"1xA100-40, 40 GB HBM.*my-dense-30b.*60 GB"):
        NodeCosts(NodeSpec(A100_40, 1), bigger)


def fixed(node: int) -> object:
    """A router that sends every request to ``node``."""
    return type("Fixed", (), {"name": "fixed", "decide": staticmethod(lambda sim, r: node)})()


@pytest.mark.parametrize("core", CORES)
def test_each_node_of_a_mixed_cluster_runs_at_its_own_speed(core: str) -> None:
    cluster = ClusterSpec(LLAMA, (parse_node("4xH100"), parse_node("8xH200")))
    # one request, 1,000 prompt tokens (4 blocks), 3 output tokens: its prefill,
    # then 2 decode steps from 1,000 tokens of KV
    request = Request(0, "a", 0.0, 1000, 3, (1, 2, 3, 4))
    expected = {
        # 4xH100: prefill 2 x 70.6e9 x 1,000 / (4 x 989e12 x 0.5) = 71.385 ms;
        # decode (141.2e9 x 2 + 327,680 x 2,001) / (4 x 3.35e12 x 0.8) = 26.404 ms
        0: (0.071385, 0.071385 + 0.026404),
        # 8xH200: prefill over 8 x 989e12 x 0.5: 35.693 ms;
        # decode over 8 x 4.8e12 x 0.8: 9.2140 ms
        1: (0.035693, 0.035693 + 0.0092140),
    }
    for node, (ttft, e2e) in expected.items():
        sim = Simulator(cluster, Workload("w", 256, [request]), SimConfig(), core=core)
        summary = sim.run(fixed(node)).summary  # type: ignore[arg-type]
        assert summary["ttft_mean_s"] == pytest.approx(ttft, rel=1e-4)
        assert summary["e2e_mean_s"] == pytest.approx(e2e, rel=1e-4)


def test_a_request_fitting_only_the_larger_nodes_is_refused() -> None:
    # llama on 2xH100: (160e9 - 141.2e9) / 327,680 = 57,373 tokens; on 8xH100 far more
    cluster = ClusterSpec(LLAMA, (parse_node("8xH100"), parse_node("2xH100")))
    prompt = 65_792  # a Bursted-ART burst request: 257 blocks
    request = Request(0, "big", 0.0, prompt, 1, tuple(range(1, 258)))
    with pytest.raises(SimulationError) as info:
        Simulator(cluster, Workload("w", 256, [request]))
    message = str(info.value)
    for part in ("'big'", "65793 KV tokens", "cluster.nodes[1] (2xH100)", "budget of 57373"):
        assert part in message, (part, message)
    Simulator(ClusterSpec(LLAMA, cluster.nodes[:1]), Workload("w", 256, [request]))
