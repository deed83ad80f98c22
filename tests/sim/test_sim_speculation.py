"""Speculative prefill (``Simulator.speculate``) on the toy cluster: prefill is
1 ms a token, a block 16 tokens (16 ms), and with ``speculative_chunk_tokens=64``
a chunk is 4 blocks, 64 ms. An HBM hit costs its bytes over HBM bandwidth
(``HBM_S`` a token) under causal KV."""

from __future__ import annotations

import pytest
from simkit import HBM_S, Prompts, check_causal, names, run_script, toy_cluster

from envs.sim import ConfigError, SimConfig
from envs.sim.speculation import SPECULATE_REFUSALS

CHUNK_64 = SimConfig(speculative_chunk_tokens=64)


def _speculated_then_asked(arrival_s: float, config: SimConfig = CHUNK_64):  # type: ignore[no-untyped-def]
    """At 0 node 0 starts speculating the 12-block prefix P (192 ms in full, three
    64 ms chunks) while an unrelated request goes to node 1; a request for P plus
    one block of its own arrives at ``arrival_s`` and goes to node 0."""
    p = Prompts()
    p.add(0.0, ["x0"])
    p.add(arrival_s, [*names("P", 12), "own"])
    prefix = p.blocks(names("P", 12))
    return run_script(
        toy_cluster(2), p, [1, 0], {0: [lambda sim: sim.speculate(0, prefix)]}, config
    )


def test_a_request_reuses_exactly_the_chunks_done_and_waits_for_the_one_in_progress() -> None:
    # The node is idle for T = 96 ms, half of P's 192 ms prefill. Chunk 1 ends at
    # 64 ms, chunk 2 runs 64..128 ms: the request arriving at 96 ms waits for it
    # (32 ms, less than a chunk), then reuses 2 chunks = 128 tokens and prefills
    # its other 208 - 128 = 80 tokens.
    sim, script = _speculated_then_asked(0.096)
    assert script.results[0] == ["ok"]
    rec = sim.records
    assert rec.admit_s[1] == pytest.approx(0.128)
    assert rec.hit_hbm_tokens[1] == 128
    assert rec.ttft_s[1] == pytest.approx(0.032 + 128 * HBM_S + 0.080, rel=1e-12)
    summary = rec.summary
    assert summary["speculative_chunks"] == 2  # the request computed the rest of P
    assert summary["speculative_tokens"] == 128
    assert summary["speculative_compute_s"] == pytest.approx(0.128)
    assert summary["speculative_used_chunks"] == 2
    assert summary["speculative_wasted_s"] == 0.0
    # node 0's timeline: 128 ms speculating, then the request's reuse and prefill
    assert sim.nodes[0].prefill_s == pytest.approx(0.128 + 128 * HBM_S + 0.080)
    assert sim.nodes[0].busy_s == pytest.approx(sim.nodes[0].prefill_s)
    assert check_causal(sim) == []


def test_without_speculation_the_same_request_computes_everything() -> None:
    sim, _ = _speculated_then_asked(0.096, CHUNK_64)
    p = Prompts()
    p.add(0.0, ["x0"])
    p.add(0.096, [*names("P", 12), "own"])
    cold, _ = run_script(toy_cluster(2), p, [1, 0], config=CHUNK_64)
    assert cold.records.ttft_s[1] == pytest.approx(0.208)
    assert cold.records.summary["speculative_chunks"] == 0
    assert sim.records.ttft_s[1] < cold.records.ttft_s[1]


def test_the_whole_prefix_done_before_the_request_is_all_reused() -> None:
    # arriving at 1 s: all three chunks (192 ms) are done; only "own" is computed
    sim, _ = _speculated_then_asked(1.0)
    rec = sim.records
    assert rec.admit_s[1] == 1.0
    assert rec.hit_hbm_tokens[1] == 192
    assert rec.ttft_s[1] == pytest.approx(192 * HBM_S + 0.016, rel=1e-12)
    assert rec.summary["speculative_chunks"] == 3
    assert rec.summary["speculative_used_chunks"] == 3


def test_unused_chunks_are_wasted_compute() -> None:
    # node 0 speculates P (8 blocks, two chunks); a later request reuses only P's
    # first 4 blocks: chunk 1 is used, chunk 2 (64 ms) is wasted
    p = Prompts()
    p.add(0.0, ["x0"])
    p.add(1.0, [*names("P", 4), "own"])
    prefix = p.blocks(names("P", 8))
    sim, _ = run_script(
        toy_cluster(2), p, [1, 0], {0: [lambda sim: sim.speculate(0, prefix)]}, CHUNK_64
    )
    summary = sim.records.summary
    assert summary["speculative_chunks"] == 2
    assert summary["speculative_used_chunks"] == 1
    assert summary["speculative_used_tokens"] == 64
    assert summary["speculative_wasted_s"] == pytest.approx(0.064)
    assert summary["speculative_compute_s"] == pytest.approx(0.128)


def test_partial_speculation_takes_the_whole_blocks_of_the_first_tokens() -> None:
    # tokens=100 -> 6 whole blocks (96 tokens): a 64 ms chunk and a 32 ms one
    p = Prompts()
    p.add(0.0, ["x0"])
    p.add(1.0, ["y"])
    prefix = p.blocks(names("P", 16))
    sim, _ = run_script(
        toy_cluster(2),
        p,
        [1, 1],
        {0: [lambda sim: sim.speculate(0, prefix, tokens=100)]},
        CHUNK_64,
    )
    assert sim.nodes[0].cache.hbm_match(prefix) == 6
    summary = sim.records.summary
    assert summary["speculative_tokens"] == 96
    assert summary["speculative_compute_s"] == pytest.approx(0.096)
    assert summary["speculative_wasted_s"] == pytest.approx(0.096)  # nobody asked


def test_a_busy_node_speculates_only_once_its_queue_is_served() -> None:
    # request 0 is routed to node 0 first (a 64 ms prefill from 0), then node 0 is
    # asked to speculate P (4 blocks, one chunk): the chunk runs 64..128 ms, so P is
    # not there at 0.1 s and is at 0.2 s
    p = Prompts()
    p.add(0.0, names("A", 4))
    p.add(0.1, ["y"])
    p.add(0.2, ["z"])
    prefix = p.blocks(names("P", 4))

    def seen(sim):  # type: ignore[no-untyped-def]
        return sim.nodes[0].cache.hbm_match(prefix)

    sim, script = run_script(
        toy_cluster(2),
        p,
        [0, 1, 1],
        {0: [lambda sim: sim.route(0), lambda sim: sim.speculate(0, prefix)], 1: [seen], 2: [seen]},
        CHUNK_64,
    )
    assert script.results[1] == [0] and script.results[2] == [4]
    assert sim.speculation is not None
    assert sim.speculation.chunks[0].start_s == pytest.approx(0.064)
    assert sim.records.ttft_s[0] == pytest.approx(0.064)  # never delayed by speculation


def test_every_refusal_reason() -> None:
    p = Prompts()
    p.add(0.0, names("P", 2))  # node 0 holds P from 32 ms
    p.add(0.5, ["y"])
    prefix = p.blocks(names("P", 2))
    fresh = p.blocks(names("Q", 3))
    huge = p.blocks(names("H", 65))  # the 1,024-token budget holds 64 blocks

    def later(sim):  # type: ignore[no-untyped-def]
        return [
            sim.speculate(1, ()),
            sim.speculate(1, fresh, tokens=15),  # less than one block
            sim.speculate(0, prefix),
            sim.warm(0, 1, prefix),
            sim.speculate(1, prefix),  # a copy of it is on its way
            sim.speculate(1, fresh),
            sim.speculate(1, fresh),
            sim.speculate(1, huge),
        ]

    sim, script = run_script(toy_cluster(2), p, [0, 1], {1: [later]}, CHUNK_64)
    assert script.results[1] == [
        [
            "bad_prefix",
            "bad_prefix",
            "node_has_prefix",
            "ok",
            "already_in_flight",
            "ok",
            "already_speculating",
            "no_room",
        ]
    ]
    refused = sim.records.summary["speculative_refused"]
    assert set(refused) == set(SPECULATE_REFUSALS)
    assert refused == {
        "bad_prefix": 2,
        "node_has_prefix": 1,
        "already_in_flight": 1,
        "already_speculating": 1,
        "no_room": 1,
        "node_down": 0,  # (test_sim_fault_interplay.py: a lost node refuses)
    }
    assert sim.records.summary["speculative_accepted"] == 1


def test_bad_arguments_and_settings() -> None:
    p = Prompts()
    p.add(0.0, ["x"])
    prefix = p.blocks(["x"])
    with pytest.raises(ValueError, match="speculate: node"):
        run_script(toy_cluster(2), p, [0], {0: [lambda sim: sim.speculate(5, prefix)]})
    with pytest.raises(ValueError, match="speculate: tokens"):
        run_script(toy_cluster(2), p, [0], {0: [lambda sim: sim.speculate(0, prefix, -1)]})
    with pytest.raises(ConfigError, match=r"sim\.speculative_chunk_tokens"):
        SimConfig(speculative_chunk_tokens=0)


def test_reference_kv_model_holds_a_chunk_from_its_start() -> None:
    # under causal_kv=False a chunk's blocks are resident once it starts, as a
    # request's prompt is from its admission
    p = Prompts()
    p.add(0.0, ["x0"])
    p.add(0.010, ["y"])
    prefix = p.blocks(names("P", 8))

    def seen(sim):  # type: ignore[no-untyped-def]
        return sim.nodes[0].cache.hbm_match(prefix)

    config = SimConfig.reference(speculative_chunk_tokens=64)
    _, script = run_script(
        toy_cluster(2), p, [1, 1], {0: [lambda sim: sim.speculate(0, prefix)], 1: [seen]}, config
    )
    assert script.results[1] == [4]  # chunk 1 (0..64 ms) is under way at 10 ms
