"""The baselines skip a node that is down (``baselines.routers.up_nodes``), as a
production router's health checks do: none sends a request to a lost node, so
the simulator redirects none (``fault_routed_to_down`` stays 0)."""

from __future__ import annotations

import pytest
from simkit import Prompts, check_run, names, toy_cluster

from baselines.policy import POLICIES, make_policy
from envs.sim import SimConfig, Simulator


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_no_baseline_routes_to_a_lost_node(name: str) -> None:
    # Node 0 is lost at 0.1 and never comes back. From 0.2 four requests arrive
    # 1 ms apart while node 1 is busy with the first of them (a 64 ms prefill):
    # to a router that ignores node.down, node 0 has load 0 and an equal (empty)
    # match, so least_load, cache_aware and the rest would pick it.
    p = Prompts()
    p.add(0.0, names("a", 4))
    for k in range(4):
        p.add(0.2 + 0.001 * k, names(f"b{k}", 4))
    config = SimConfig(fault_node_loss_s=(0.1,), fault_node_loss_nodes=(0,))
    sim = Simulator(toy_cluster(2), p.workload(), config)
    make_policy(name).run(sim)
    check_run(sim)
    assert sim.records.summary["fault_routed_to_down"] == 0
    assert list(sim.records.node[1:]) == [1, 1, 1, 1]
