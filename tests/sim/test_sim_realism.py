"""The opt-in realism options, each against a hand-worked toy case: attention
FLOPs in prefill, a fixed per-transfer latency, bounded host RAM (drop or spill
to disk) and chunked prefill."""

from __future__ import annotations

import pytest
from simkit import (
    BLOCK_BYTES,
    DECODE_KV_S,
    DISK_S,
    HBM_S,
    RAM_S,
    Prompts,
    check_causal,
    decode_s,
    names,
    run_script,
    toy_cluster,
)

from envs.sim import SimConfig, Simulator


def test_realism_options_are_off_by_default() -> None:
    c = SimConfig()
    assert (c.attention_flops, c.transfer_latency_s, c.chunked_prefill_tokens) == (False, 0.0, 0)
    assert c.host_ram_bytes == float("inf") and c.disk_tier is False


def test_attention_flops_lengthen_prefill_by_the_formula() -> None:
    # toy: 4 x 1 layer x attn_dim 1000 / (4e12 x 0.5) = 2e-9 s a (query, key) pair
    p = Prompts()
    p.add(0.0, names("P", 63), input_tokens=1000)
    p.add(10.0, [*names("P", 4), "b0"])  # on node 1: 16 new tokens after 64 cached
    p.add(0.0, names("P", 4))
    config = SimConfig(attention_flops=True)
    sim, _ = run_script(toy_cluster(), p, [0, 1, 1], config=config)
    ttft = sim.records.ttft_s
    order = [r.request_id for r in sim.requests]
    a, c, b = (order.index(x) for x in ("r0", "r2", "r1"))
    assert ttft[a] == pytest.approx(1.0 + 2e-9 * (1000 * 1001 / 2), rel=1e-12)
    assert ttft[c] == pytest.approx(0.064 + 2e-9 * (64 * 65 / 2), rel=1e-12)
    pairs = 16 * 64 + 16 * 17 / 2
    assert ttft[b] == pytest.approx(64 * HBM_S + 0.016 + 2e-9 * pairs, rel=1e-9)
    plain, _ = run_script(toy_cluster(), p, [0, 1, 1])
    assert plain.records.ttft_s[a] == pytest.approx(1.0, rel=1e-12)


def _evicted_then_reused(config: SimConfig, **gpu: float) -> Simulator:
    """A computes P (4 blocks) on node 0; at 1 s, before B (P + one block) is
    routed there, P and A's output block are evicted from HBM."""
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(1.0, [*names("P", 4), "b0"])
    prefix = p.blocks(names("P", 4))
    sim, _ = run_script(toy_cluster(**gpu), p, [0, 0], {1: [lambda s: s.evict(0, prefix)]}, config)
    return sim


def test_transfer_latency_is_added_to_ram_loads_not_hbm_hits() -> None:
    sim = _evicted_then_reused(SimConfig(transfer_latency_s=0.005))
    assert sim.records.hit_ram_tokens[1] == 64
    assert sim.records.reuse_s[1] == pytest.approx(64 * RAM_S + 0.005, rel=1e-12)
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(1.0, [*names("P", 4), "b0"])
    hbm, _ = run_script(toy_cluster(), p, [0, 0], config=SimConfig(transfer_latency_s=0.005))
    assert hbm.records.reuse_s[1] == pytest.approx(64 * HBM_S, rel=1e-12)


def test_transfer_latency_is_added_to_disk_loads() -> None:
    config = SimConfig(transfer_latency_s=0.005, host_ram_bytes=0.0, disk_tier=True)
    sim = _evicted_then_reused(config)
    assert sim.records.hit_disk_tokens[1] == 64
    assert sim.records.reuse_s[1] == pytest.approx(64 * DISK_S + 0.005, rel=1e-12)


def test_unbounded_host_ram_keeps_everything() -> None:
    sim = _evicted_then_reused(SimConfig())
    assert sim.records.hit_ram_tokens[1] == 64
    assert sim.records.reuse_s[1] == pytest.approx(64 * RAM_S, rel=1e-12)


def test_no_host_ram_drops_evicted_blocks() -> None:
    sim = _evicted_then_reused(SimConfig(host_ram_bytes=0.0))
    rec = sim.records
    assert rec.hit_ram_tokens[1] == rec.hit_hbm_tokens[1] == rec.hit_disk_tokens[1] == 0
    assert rec.ttft_s[1] == pytest.approx(0.080, rel=1e-9)


def test_no_host_ram_with_a_disk_tier_spills_to_disk() -> None:
    sim = _evicted_then_reused(SimConfig(host_ram_bytes=0.0, disk_tier=True))
    rec = sim.records
    assert rec.hit_disk_tokens[1] == 64 and rec.hit_ram_tokens[1] == 0
    assert rec.reuse_s[1] == pytest.approx(64 * DISK_S, rel=1e-12)
    assert rec.summary["disk_hit_rate"] == pytest.approx(64 / 144, rel=1e-12)


def test_ram_then_disk_hits_load_from_both_tiers() -> None:
    # RAM holds P's first two blocks; the rest of the evicted path spilled to disk
    config = SimConfig(host_ram_bytes=2 * BLOCK_BYTES, disk_tier=True, transfer_latency_s=0.005)
    sim = _evicted_then_reused(config)
    rec = sim.records
    assert (rec.hit_ram_tokens[1], rec.hit_disk_tokens[1]) == (32, 32)
    assert rec.reuse_s[1] == pytest.approx(32 * RAM_S + 32 * DISK_S + 2 * 0.005, rel=1e-12)
    assert rec.ttft_s[1] == pytest.approx(rec.reuse_s[1] + 0.016, rel=1e-9)


def test_slow_disk_is_recomputed_instead() -> None:
    config = SimConfig(host_ram_bytes=2 * BLOCK_BYTES, disk_tier=True)
    sim = _evicted_then_reused(config, nvme_bw=0.5e6)  # 2.048 ms a token from disk
    rec = sim.records
    assert (rec.hit_ram_tokens[1], rec.hit_disk_tokens[1]) == (32, 0)
    assert rec.prefill_tokens[1] == 48


def test_two_blocks_of_host_ram_keep_the_leading_two_blocks() -> None:
    sim = _evicted_then_reused(SimConfig(host_ram_bytes=2 * BLOCK_BYTES))
    rec = sim.records
    assert rec.hit_ram_tokens[1] == 32 and rec.prefill_tokens[1] == 48
    assert rec.ttft_s[1] == pytest.approx(32 * RAM_S + 0.048, rel=1e-9)


def test_host_ram_of_a_fractional_number_of_blocks() -> None:
    sim = _evicted_then_reused(SimConfig(host_ram_bytes=2.5 * BLOCK_BYTES))
    assert sim.records.hit_ram_tokens[1] == 32


def _chunked(chunk: int) -> Simulator:
    # A (16 tokens, 100 decode steps) is decoding when B (256 tokens) is admitted
    # at A's prefill end, 16 ms.
    p = Prompts()
    p.add(0.0, names("A", 1), output_tokens=101)
    p.add(0.001, names("B", 16))
    sim, _ = run_script(toy_cluster(), p, [0, 0], config=SimConfig(chunked_prefill_tokens=chunk))
    return sim


def test_chunked_prefill_interleaves_decode_steps() -> None:
    plain = _chunked(0).records
    chunked = _chunked(64).records
    assert plain.first_token_s[1] == pytest.approx(0.016 + 0.256, rel=1e-12)
    # 256 tokens in chunks of 64: 3 decode steps of A (batch 1, 16 tokens) in between
    b_first = 0.016 + 0.256 + decode_s(3, 1, 16)
    assert chunked.first_token_s[1] == pytest.approx(b_first, rel=1e-12)
    assert chunked.ttft_s[1] - plain.ttft_s[1] == pytest.approx(decode_s(3, 1, 16), rel=1e-9)
    # A got 3 of its steps during B's prefill and runs the other 97 after it; its
    # decode work is the same either way, so it finishes at the same moment
    assert plain.finish_s[0] == pytest.approx(0.272 + decode_s(100, 1, 16), rel=1e-12)
    assert chunked.finish_s[0] == pytest.approx(b_first + decode_s(97, 1, 19), rel=1e-12)
    assert chunked.finish_s[0] == pytest.approx(plain.finish_s[0], rel=1e-12)


def test_chunked_prefill_finishes_a_sequence_at_its_last_decode_step() -> None:
    # A (16 tokens, 2 decode steps left) and C (16 tokens, 100 left) are decoding
    # when B (160 tokens) is admitted at 32 ms. In chunks of 16: 10 chunks of
    # 16 ms, a decode step after each of the first 9. A's last token comes out
    # at the 2nd step, so A finishes (and frees its KV) there; C runs the other 7
    # steps alone.
    p = Prompts()
    p.add(0.0, names("A", 1), output_tokens=3)
    p.add(0.001, names("C", 1), output_tokens=101)
    p.add(0.002, names("B", 10))
    p.add(0.1, names("D", 1))  # to node 1: a look at node 0 at 0.1 s
    look = {3: [lambda s: (s.nodes[0].running, s.nodes[0].reserved_tokens)]}
    config = SimConfig(chunked_prefill_tokens=16)
    sim, script = run_script(toy_cluster(), p, [0, 0, 0, 1], look, config)
    rec = sim.records
    two_steps = decode_s(2, 2, 32)  # batch A + C, 16 context tokens each
    assert two_steps == pytest.approx(0.002 + 66 * DECODE_KV_S, rel=1e-15)
    # 2 chunks, 2 steps: 0.032 + 0.032 + 0.002 + 66 KV tokens read
    assert rec.finish_s[0] == pytest.approx(0.066 + 66 * DECODE_KV_S, rel=1e-12)
    # then 7 steps of C alone from 16 + 2 context tokens, and 8 more chunks
    seven_steps = decode_s(7, 1, 18)
    assert seven_steps == pytest.approx(0.007 + (7 * 18 + 21) * DECODE_KV_S, rel=1e-15)
    b_first = 0.032 + 0.160 + two_steps + seven_steps
    assert rec.first_token_s[2] == pytest.approx(0.201 + 213 * DECODE_KV_S, rel=1e-12)
    assert rec.first_token_s[2] == pytest.approx(b_first, rel=1e-12)
    # C has 91 of its 100 steps left after B's prefill, from 16 + 9 context tokens
    assert rec.finish_s[1] == pytest.approx(b_first + decode_s(91, 1, 25), rel=1e-12)
    # at 0.1 s, mid-prefill, A's KV is free: only C (16 + 101) and B (160 + 1) hold any
    assert script.results[3] == [(2, 117 + 161)]


def test_chunked_prefill_without_a_decoding_batch_changes_nothing() -> None:
    p = Prompts()
    p.add(0.0, names("B", 16))
    for chunk in (0, 64, 1024):
        sim, _ = run_script(toy_cluster(), p, [0], config=SimConfig(chunked_prefill_tokens=chunk))
        assert sim.records.ttft_s[0] == pytest.approx(0.256, rel=1e-12)


def test_all_realism_options_together_keep_the_invariants() -> None:
    config = SimConfig(
        attention_flops=True,
        transfer_latency_s=2e-3,
        host_ram_bytes=3 * BLOCK_BYTES,
        disk_tier=True,
        chunked_prefill_tokens=32,
        copy_model="contention",
    )
    p = Prompts()
    for i in range(16):
        p.add(0.01 * i, [*names(f"S{i % 3}-", 4), f"own{i}"], output_tokens=1 + 5 * (i % 4))
    prefix = p.blocks(names("S0-", 4))
    acts = {8: [lambda s: s.warm(0, 1, prefix)], 12: [lambda s: s.evict(0, prefix)]}
    sim, _ = run_script(
        toy_cluster(2, budget_tokens=256), p, [i % 2 for i in range(16)], acts, config
    )
    assert check_causal(sim) == []


def test_latency_can_make_recomputing_a_short_ram_run_cheaper() -> None:
    # one 16-token block in RAM: loading takes 1.6 ms + 50 ms latency, recomputing 16 ms
    p = Prompts()
    p.add(0.0, names("P", 1))
    p.add(1.0, [*names("P", 1), "b0"])
    prefix = p.blocks(names("P", 1))
    config = SimConfig(transfer_latency_s=0.05)
    sim, _ = run_script(toy_cluster(), p, [0, 0], {1: [lambda s: s.evict(0, prefix)]}, config)
    assert sim.records.ttft_s[1] == pytest.approx(0.032, rel=1e-9)


def test_with_attention_flops_a_ram_load_is_weighed_against_the_attention_it_saves() -> None:
    # RAM at 1.00003 ms a token: 64 tokens load in 64.00192 ms; recomputing them
    # costs 64 ms of linear FLOPs plus, with attention FLOPs, their own (query, key)
    # pairs: 64 x 65 / 2 = 2,080 x 2 ns = 4.16 us. So B loads them with attention
    # FLOPs on and recomputes them with it off.
    load_s = 1.00003e-3
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(1.0, [*names("P", 4), "b0"])
    prefix = p.blocks(names("P", 4))
    cluster = toy_cluster(pcie_bw=1024 / load_s)
    evict = {1: [lambda s: s.evict(0, prefix)]}
    on, _ = run_script(cluster, p, [0, 0], evict, SimConfig(attention_flops=True))
    assert on.records.hit_ram_tokens[1] == 64 and on.records.prefill_tokens[1] == 16
    expected = 64 * load_s + 0.016 + 2e-9 * (16 * 64 + 16 * 17 / 2)
    assert on.records.ttft_s[1] == pytest.approx(expected, rel=1e-12)
    assert on.records.ttft_s[1] < 0.080 + 2e-9 * 80 * 81 / 2  # recomputing all is slower
    check_causal(on)
    off, _ = run_script(cluster, p, [0, 0], evict)
    assert off.records.hit_ram_tokens[1] == 0 and off.records.prefill_tokens[1] == 80
    assert off.records.ttft_s[1] == pytest.approx(0.080, rel=1e-12)
