"""Clusters of one's own: custom GPUs and models, mixed node kinds; their timing
worked out by hand, and how they are named and checked."""

from __future__ import annotations

import pytest

from envs.sim import ClusterSpec, GpuSpec, NodeSpec, model_preset, parse_node

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
