"""The world's forecast (envs/sim/forecast.py) on the toy cluster, numbers by hand:
a block is 16 tokens x 1,024 B = 16,384 B, every NIC moves 2.048e6 B/s (8 ms a
block), prefill costs 1 ms a token."""

from __future__ import annotations

import pytest
from simkit import Prompts, names, run_script, toy_cluster

from envs.sim import SimConfig, Simulator
from envs.sim.forecast import (
    copy_bytes,
    copy_s,
    copy_targets,
    has_prefix,
    landing_s,
    transfer_s,
    usable_tokens,
)


def test_has_prefix_compares_the_chained_id_at_the_prefix_depth() -> None:
    p = Prompts()
    a = p.blocks(["A0", "A1", "A2"])
    b = p.blocks(["A0", "A1", "B2"])
    assert has_prefix(b, 2, a[1])
    assert not has_prefix(b, 3, a[2])
    assert not has_prefix(a[:1], 2, a[1])  # too short to hold it


def test_a_hit_never_covers_the_last_prompt_token() -> None:
    assert usable_tokens(3, 16, 48) == 47
    assert usable_tokens(2, 16, 48) == 32
    assert usable_tokens(0, 16, 48) == 0


def test_copy_bytes_and_seconds() -> None:
    p = Prompts()
    p.add(0.0, ["x"])
    node = Simulator(toy_cluster(2), p.workload()).nodes[1]
    n_bytes = copy_bytes(4, 16, node)
    assert n_bytes == 4 * 16 * 1024
    assert transfer_s(n_bytes, node) == pytest.approx(0.032, rel=1e-12)
    assert copy_s(n_bytes, node, 0.001) == pytest.approx(0.033, rel=1e-12)


def test_a_copy_waiting_for_its_source_is_forecast_to_land_when_it_does() -> None:
    """A computes the 4-block prefix P on node 0 (prefill ends at 64 ms); at 10 ms
    P is warmed to node 1: forecast 64 + 32 ms, and it lands then."""
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(0.010, ["x"])
    prefix = p.blocks(names("P", 4))
    seen: list[float] = []

    def warm_and_forecast(sim: Simulator) -> str:
        answer = sim.warm(0, 1, prefix)
        copy = sim.nodes[1].inflight[prefix[-1]]
        seen.append(landing_s(copy, sim.nodes, sim.now, sim.config.transfer_latency_s))
        return answer

    sim, _ = run_script(toy_cluster(2), p, [0, 0], {1: [warm_and_forecast]}, SimConfig())
    assert seen == [pytest.approx(0.096, rel=1e-12)]
    assert sim.copies[0].land_s == pytest.approx(0.096, rel=1e-12)


def test_copy_targets_take_the_soonest_free_nodes_that_lack_the_prefix() -> None:
    p = Prompts()
    p.add(0.0, ["x"])
    nodes = Simulator(toy_cluster(4), p.workload()).nodes
    free_at = [0.0, 5.0, 1.0, 2.0]
    assert copy_targets(nodes, 7, [0], 3, free_at) == [2, 3]
    assert copy_targets(nodes, 7, [0], 4, free_at) == [2, 3, 1]
    assert copy_targets(nodes, 7, [0], 1, free_at) == []
