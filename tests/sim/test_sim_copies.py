"""Warm copies: refusals with reasons, copies in flight, the reference copy
model (a copy occupies the target's timeline) and the contention model
(concurrent copies share NICs max-min fairly). Toy cluster: a block is
16 x 1,024 = 16,384 bytes and every NIC moves 2.048e6 B/s, 8 ms a block alone."""

from __future__ import annotations

import pytest
from simkit import (
    BLOCK_BYTES,
    CORES,
    HBM_S,
    Prompts,
    Script,
    check_causal,
    decode_s,
    names,
    run_script,
    toy_cluster,
)

from envs.sim import WARM_OK, WARM_REFUSALS, SimConfig

CONTENTION = SimConfig(copy_model="contention")


def _done_prefix(n_nodes: int = 3, later: int = 2) -> tuple[Prompts, tuple[int, ...]]:
    """A computes the 4-block prefix P on node 0 (done at 64 ms); ``later``
    unrelated one-block requests arrive at 1.000 s, 1.016 s, ..."""
    p = Prompts()
    p.add(0.0, names("P", 4))
    for i in range(later):
        p.add(1.0 + 0.016 * i, [f"x{i}"])
    return p, p.blocks(names("P", 4))


def test_every_refusal_reason() -> None:
    p = Prompts()
    p.add(0.0, names("P", 4))  # node 0, done at 64 ms
    p.add(0.0, names("R", 1), output_tokens=1000)  # node 1 reserves 1,016 of 1,024 tokens
    p.add(0.5, ["y"])
    prefix = p.blocks(names("P", 4))
    other = p.blocks(names("Q", 2))

    def first(sim):  # type: ignore[no-untyped-def]
        return sim.warm(0, 1, prefix)  # nobody holds or computes P yet

    def later(sim):  # type: ignore[no-untyped-def]
        return [
            sim.warm(0, 0, prefix),
            sim.warm(0, 2, ()),
            sim.warm(2, 0, prefix),  # node 0 already holds P
            sim.warm(0, 1, prefix),  # node 1's headroom is (1024 - 1016) // 16 = 0 blocks
            sim.warm(2, 1, other[:0] + other),  # room is checked before the source
            sim.warm(0, 2, prefix),
            sim.warm(0, 2, prefix),
            sim.warm(1, 2, other),
        ]

    sim, script = run_script(toy_cluster(3), p, [0, 1, 0], {0: [first], 2: [later]})
    assert script.results[0] == ["source_lacks_prefix"]
    assert script.results[2] == [
        [
            "same_node",
            "bad_prefix",
            "target_has_prefix",
            "no_room",
            "no_room",
            "ok",
            "already_in_flight",
            "source_lacks_prefix",
        ]
    ]
    assert set(WARM_REFUSALS) == set(sim.warm_refused) and WARM_OK == "ok"
    expected = {
        "same_node": 1,
        "bad_prefix": 1,
        "target_has_prefix": 1,
        "already_in_flight": 1,
        "no_room": 2,
        "source_lacks_prefix": 2,
    }
    assert sim.warm_refused == expected
    assert sim.records.summary["warm_refused"] == expected
    assert sim.records.summary["warm_copies"] == len(sim.copies) == 1


def test_copies_in_flight_are_visible() -> None:
    p, prefix = _done_prefix()
    views = []

    def warm_and_look(sim):  # type: ignore[no-untyped-def]
        assert sim.warm(0, 2, prefix) == "ok"
        copy = sim.nodes[2].inflight[prefix[-1]]
        views.append((sim.holders(prefix), copy.src, copy.dst, copy.blocks, copy.bytes))

    def look_again(sim):  # type: ignore[no-untyped-def]
        views.append((sim.holders(prefix), dict(sim.nodes[2].inflight)))

    sim, _ = run_script(toy_cluster(3), p, [0, 1, 1], {1: [warm_and_look], 2: [look_again]})
    assert views[0] == (([0], [2]), 0, 2, prefix, 4 * BLOCK_BYTES)
    # at 1.016 s the 32 ms copy is still in flight
    assert views[1] == (([0], [2]), {prefix[-1]: sim.copies[0]})
    assert sim.copies[0].land_s == pytest.approx(1.032, rel=1e-12)
    assert sim.holders(prefix) == ([0, 2], [])


def test_only_the_blocks_the_target_lacks_are_sent() -> None:
    p, prefix = _done_prefix(later=1)
    p.add(0.0, names("P", 2))  # node 1 computes the first two blocks of P itself
    sim, _ = run_script(toy_cluster(3), p, [0, 1, 0], {2: [lambda s: s.warm(0, 1, prefix)]})
    (copy,) = sim.copies
    assert (copy.n_blocks, copy.bytes) == (2, 2 * BLOCK_BYTES)
    assert copy.land_s == pytest.approx(1.0 + 0.016, rel=1e-12)
    assert sim.nodes[1].cache.hbm_match(prefix) == 4


def test_reference_copy_occupies_the_target_timeline() -> None:
    # At 1 s a 32 ms copy starts on node 1; requests routed there meanwhile wait.
    p, prefix = _done_prefix()
    sim, _ = run_script(toy_cluster(3), p, [0, 1, 1], {1: [lambda s: s.warm(0, 1, prefix)]})
    rec = sim.records
    (copy,) = sim.copies
    assert (copy.start_s, copy.land_s) == (1.0, pytest.approx(1.032, rel=1e-12))
    assert rec.admit_s[1] == pytest.approx(1.032, rel=1e-12)
    assert rec.admit_s[2] == pytest.approx(1.048, rel=1e-12)  # behind request 1's 16 ms
    assert sim.nodes[1].copy_s == pytest.approx(0.032, rel=1e-12)
    assert sim.nodes[0].rdma_busy_s == pytest.approx(0.032, rel=1e-12)
    assert sim.nodes[1].rdma_busy_s == pytest.approx(0.032, rel=1e-12)
    assert rec.summary["copy_busy_s"] == pytest.approx(0.032, rel=1e-12)
    assert rec.summary["rdma_busy_s"] == pytest.approx(0.064, rel=1e-12)


def test_reference_copy_time_counts_as_busy() -> None:
    p, prefix = _done_prefix(later=1)
    sim, _ = run_script(toy_cluster(3), p, [0, 1], {1: [lambda s: s.warm(0, 1, prefix)]})
    # node 1: the 32 ms copy, then request 1's 16-token prefill
    assert sim.nodes[1].busy_s == pytest.approx(0.032 + 0.016, rel=1e-9)


def test_reference_copy_cuts_the_target_decode_at_a_step_boundary() -> None:
    p = Prompts()
    p.add(0.0, names("P", 4))  # node 0, done at 64 ms
    p.add(0.0, names("R", 1), output_tokens=501)  # node 1 decodes from 16 ms on
    p.add(0.1005, ["y"])
    prefix = p.blocks(names("P", 4))
    sim, _ = run_script(toy_cluster(), p, [0, 1, 0], {2: [lambda s: s.warm(0, 1, prefix)]})
    (copy,) = sim.copies
    boundary = 0.016 + decode_s(85, 1, 16)  # first step boundary after 100.5 ms
    assert copy.start_s == pytest.approx(boundary, rel=1e-12)
    assert copy.land_s == pytest.approx(boundary + 0.032, rel=1e-12)
    expected = boundary + 0.032 + decode_s(415, 1, 101)
    assert sim.records.finish_s[1] == pytest.approx(expected, rel=1e-12)


def test_contention_copies_do_not_occupy_the_target_timeline() -> None:
    p, prefix = _done_prefix()
    sim, _ = run_script(
        toy_cluster(3), p, [0, 1, 1], {1: [lambda s: s.warm(0, 1, prefix)]}, CONTENTION
    )
    assert sim.records.admit_s[1] == 1.0
    assert sim.copies[0].land_s == pytest.approx(1.032, rel=1e-12)
    assert sim.nodes[1].copy_s == 0.0


def test_two_copies_from_one_source_share_its_nic() -> None:
    # alone: 65,536 B / 2.048e6 B/s = 32 ms; two at once from node 0: 1.024e6 B/s each
    p, prefix = _done_prefix(n_nodes=3, later=1)
    acts = [lambda s: s.warm(0, 1, prefix), lambda s: s.warm(0, 2, prefix)]
    sim, _ = run_script(toy_cluster(3), p, [0, 0], {1: acts}, CONTENTION)
    assert [c.land_s for c in sim.copies] == pytest.approx([1.064, 1.064], rel=1e-9)
    assert sim.nodes[0].rdma_busy_s == pytest.approx(0.064, rel=1e-9)
    assert sim.nodes[1].rdma_busy_s == pytest.approx(0.064, rel=1e-9)
    assert check_causal(sim) == []

    alone, _ = run_script(
        toy_cluster(3), p, [0, 0], {1: [lambda s: s.warm(0, 1, prefix)]}, CONTENTION
    )
    assert alone.copies[0].land_s == pytest.approx(1.032, rel=1e-9)


def test_two_copies_into_one_target_share_its_nic() -> None:
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(0.0, names("Q", 4))
    p.add(1.0, ["y"])
    a, b = p.blocks(names("P", 4)), p.blocks(names("Q", 4))
    acts = [lambda s: s.warm(0, 2, a), lambda s: s.warm(1, 2, b)]
    sim, _ = run_script(toy_cluster(3), p, [0, 1, 0], {2: acts}, CONTENTION)
    assert [c.land_s for c in sim.copies] == pytest.approx([1.064, 1.064], rel=1e-9)


def test_staggered_copies_are_refilled_when_one_finishes() -> None:
    # copy 1 (0 -> 1) alone from 1.000 s: half its bytes by 1.016 s; copy 2 (0 -> 2)
    # joins, both at half rate: copy 1's last 32,768 B take 32 ms (lands 1.048 s),
    # copy 2 has 32,768 B left then and finishes alone in 16 ms (1.064 s).
    p, prefix = _done_prefix()
    acts = {1: [lambda s: s.warm(0, 1, prefix)], 2: [lambda s: s.warm(0, 2, prefix)]}
    sim, _ = run_script(toy_cluster(3), p, [0, 0, 0], acts, CONTENTION)
    assert [c.land_s for c in sim.copies] == pytest.approx([1.048, 1.064], rel=1e-9)
    assert sim.nodes[0].rdma_busy_s == pytest.approx(0.064, rel=1e-9)


@pytest.mark.parametrize("copy_model", ["reference", "contention"])
def test_transfer_latency_is_added_to_every_copy(copy_model: str) -> None:
    p, prefix = _done_prefix(later=1)
    config = SimConfig(copy_model=copy_model, transfer_latency_s=0.005)
    sim, _ = run_script(toy_cluster(3), p, [0, 0], {1: [lambda s: s.warm(0, 1, prefix)]}, config)
    assert sim.copies[0].land_s == pytest.approx(1.0 + 0.005 + 0.032, rel=1e-12)
    assert check_causal(sim) == []


def test_a_landed_copy_is_reused_and_counted() -> None:
    p, prefix = _done_prefix(later=1)
    p.add(2.0, [*names("P", 4), "z"])
    sim, _ = run_script(toy_cluster(3), p, [0, 0, 1], {1: [lambda s: s.warm(0, 1, prefix)]})
    rec = sim.records
    assert rec.hit_hbm_tokens[2] == 64
    s = rec.summary
    assert s["warm_copies"] == s["warm_copies_landed"] == 1
    assert s["warm_bytes"] == 4 * BLOCK_BYTES
    assert s["warm_hit_rate"] == 1.0 and s["warm_used_any_rate"] == 1.0
    assert s["warm_amplification"] == 0.0
    assert s["displaced_by_copies_blocks"] == 0


def test_warm_hit_rates_count_copies_and_bytes_used_before_eviction() -> None:
    # Node 0 computes P (4 blocks) and Q (1 block). At 1 s P is copied to node 1
    # (65,536 B) and Q to node 2 (16,384 B). At 2 s a request hits P on node 1 in
    # HBM; at 2.5 s Q is evicted from node 2's HBM, and at 3 s a request there
    # loads it back from host RAM: used, but only after eviction.
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(0.0, names("Q", 1))
    p.add(1.0, ["x"])
    p.add(2.0, [*names("P", 4), "z"])
    p.add(2.5, ["y"])
    p.add(3.0, [*names("Q", 1), "w"])
    prefix, q = p.blocks(names("P", 4)), p.blocks(names("Q", 1))
    acts = {
        2: [lambda s: s.warm(0, 1, prefix), lambda s: s.warm(0, 2, q)],
        4: [lambda s: s.evict(2, q)],
    }
    sim, script = run_script(toy_cluster(3), p, [0, 0, 0, 1, 0, 2], acts)
    assert script.results[2] == ["ok", "ok"] and script.results[4] == [1]
    rec = sim.records
    assert (rec.hit_hbm_tokens[3], rec.hit_ram_tokens[5]) == (64, 16)
    s = rec.summary
    assert s["warm_copies_landed"] == 2 and s["warm_bytes"] == 5 * BLOCK_BYTES
    assert s["warm_hit_rate"] == 1 / 2  # of the copies, P's was used in HBM
    assert s["warm_byte_hit_rate"] == 4 / 5  # of the bytes, P's 4 blocks of 5
    assert s["warm_used_any_rate"] == 1.0 and s["warm_amplification"] == 0.0
    # every token's KV has the same size, so the byte hit rate is the token hit rate
    assert s["byte_hit_rate"] == s["token_hit_rate"] == (64 + 16) / (16 * 14)


def test_a_copy_into_a_full_cache_displaces_entries() -> None:
    # node 1's budget is 8 blocks; it caches 7 blocks of its own (Q, 6 + 1 output
    # block), then a 4-block copy lands: 3 blocks fit, 3 of Q's go to RAM.
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(0.0, names("Q", 6))
    p.add(1.0, ["y"])
    prefix = p.blocks(names("P", 4))
    cluster = toy_cluster(2, budget_tokens=128)
    sim, _ = run_script(cluster, p, [0, 1, 0], {2: [lambda s: s.warm(0, 1, prefix)]})
    assert sim.displaced_by_copies_blocks == 3
    assert sim.records.summary["displaced_by_copies_blocks"] == 3
    assert sim.nodes[1].cache.blocks_in == [8, 3, 0]


def test_a_contention_copy_that_starts_a_moment_later_lands_that_moment_later() -> None:
    # two 4-block copies on separate NICs (0 -> 1 and 2 -> 3), 32 ms each at full
    # rate; the second starts 10 ns after the first, so it lands 10 ns after it too
    # (a tolerance of 1e-6 of a flow's bytes once landed it with the first one)
    delay_s = 1e-8
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(0.0, names("Q", 4))
    p.add(1.0, ["y"])
    p.add(1.0 + delay_s, ["z"])
    a, b = p.blocks(names("P", 4)), p.blocks(names("Q", 4))
    acts = {2: [lambda s: s.warm(0, 1, a)], 3: [lambda s: s.warm(2, 3, b)]}
    sim, _ = run_script(toy_cluster(4), p, [0, 2, 0, 2], acts, CONTENTION)
    assert [c.start_s for c in sim.copies] == [1.0, 1.0 + delay_s]
    assert sim.copies[0].land_s == pytest.approx(1.032, rel=1e-12)
    assert sim.copies[1].land_s == pytest.approx(1.032 + delay_s, rel=1e-12)
    assert check_causal(sim) == []


@pytest.mark.parametrize("model", ["reference", "contention"])
def test_a_copy_whose_target_lost_the_blocks_it_did_not_send_lands_nothing(model: str) -> None:
    """Node 1 holds P's first 3 blocks, so warming P onto it sends 1 block (8 ms);
    the same decision evicts those 3 (no host RAM: dropped). The copy's one block
    hangs on KV node 1 no longer has: it lands nothing (it used to make all 4
    blocks resident, 48 tokens of KV never sent), so the request at 0.2 s
    computes all 80 tokens of P + y there, 80 ms."""
    from envs.sim.transfers import FAILED

    p = Prompts()
    p.add(0.0, names("P", 3))  # node 1: holds P[:3] from 48 ms
    p.add(0.0, names("P", 4))  # node 0: holds P from 64 ms
    p.add(0.1, ["x"])
    p.add(0.2, [*names("P", 4), "y"])
    prefix, head = p.blocks(names("P", 4)), p.blocks(names("P", 3))
    actions = {2: [lambda sim: sim.warm(0, 1, prefix), lambda sim: sim.evict(1, head)]}
    config = SimConfig(copy_model=model, host_ram_bytes=0.0)
    sim, script = run_script(toy_cluster(2), p, [1, 0, 0, 1], actions, config)
    assert script.results[2] == [WARM_OK, 4]  # P[:3] and its output token's block
    (copy,) = sim.copies
    assert (copy.n_blocks, copy.bytes) == (1, BLOCK_BYTES)
    assert copy.start_s == pytest.approx(0.1) and copy.state == FAILED and copy.land_s == -1.0
    assert sim.records.hit_hbm_tokens[3] == 0
    assert sim.records.ttft_s[3] == pytest.approx(0.080, rel=1e-9)
    summary = sim.records.summary
    assert (summary["warm_copies"], summary["warm_copies_landed"]) == (1, 0)
    assert summary["warm_copies_lost"] == 1
    assert check_causal(sim) == []


def test_a_copy_whose_source_dropped_the_prefix_before_it_moved_lands_nothing() -> None:
    """Reference copy model: the copy of P (node 0 -> node 1, issued at 0.1 s)
    waits for node 1's 240-token prefill to end (0.24 s). Meanwhile a 240-token
    prompt on node 0, whose KV budget is 256 tokens, pushes P out (no host RAM:
    dropped). The copy moves from 0.24 s to 0.272 s (4 blocks, 8 ms each) but
    reads KV its source no longer holds: nothing lands, and P + y at 0.9 s on
    node 1 computes all 80 tokens (it used to hit 64)."""
    from simkit import TOY_MODEL, toy_gpu

    from envs.sim import ClusterSpec, NodeSpec
    from envs.sim.transfers import FAILED

    p = Prompts()
    p.add(0.0, names("P", 4))  # node 0: holds P from 64 ms
    p.add(0.0, names("L", 15))  # node 1: busy to 0.24 s
    p.add(0.1, ["x"])  # warms P onto node 1
    p.add(0.15, names("B", 15))  # node 0: its KV pushes P out
    p.add(0.9, [*names("P", 4), "y"])  # node 1
    prefix = p.blocks(names("P", 4))
    cluster = ClusterSpec(TOY_MODEL, (NodeSpec(toy_gpu(256), 1), NodeSpec(toy_gpu(1024), 1)))
    config = SimConfig(host_ram_bytes=0.0)
    sim, script = run_script(
        cluster, p, [0, 1, 0, 0, 1], {2: [lambda sim: sim.warm(0, 1, prefix)]}, config
    )
    assert script.results[2] == [WARM_OK]
    (copy,) = sim.copies
    assert copy.start_s == pytest.approx(0.24) and copy.state == FAILED
    assert sim.nodes[1].copy_s == pytest.approx(0.032)  # its timeline still carried it
    assert sim.records.hit_hbm_tokens[4] == 0
    assert sim.records.ttft_s[4] == pytest.approx(0.080, rel=1e-9)
    assert sim.records.summary["warm_copies_lost"] == 1


def test_without_the_landing_check_a_copy_lands_kv_its_source_dropped() -> None:
    """``copy_landing_check=False`` (btb-gym before 2026-12-05, kept to reproduce
    the agents trained then): the copy of the test above lands all 4 blocks,
    though node 0 dropped P before the copy moved, and P + y on node 1 hits 64
    tokens that no node held any more."""
    from simkit import TOY_MODEL, toy_gpu

    from envs.sim import ClusterSpec, NodeSpec
    from envs.sim.transfers import LANDED

    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(0.0, names("L", 15))
    p.add(0.1, ["x"])
    p.add(0.15, names("B", 15))
    p.add(0.9, [*names("P", 4), "y"])
    prefix = p.blocks(names("P", 4))
    cluster = ClusterSpec(TOY_MODEL, (NodeSpec(toy_gpu(256), 1), NodeSpec(toy_gpu(1024), 1)))
    config = SimConfig(host_ram_bytes=0.0, copy_landing_check=False)
    sim, _ = run_script(
        cluster, p, [0, 1, 0, 0, 1], {2: [lambda sim: sim.warm(0, 1, prefix)]}, config
    )
    (copy,) = sim.copies
    assert copy.state == LANDED and copy.land_s == pytest.approx(0.272)
    assert sim.nodes[0].cache.hbm_match(prefix) == 0  # gone from the source
    assert sim.records.hit_hbm_tokens[4] == 64
    assert sim.records.summary["warm_copies_lost"] == 0
    with pytest.raises(ValueError, match="copy_landing_check"):
        SimConfig(copy_landing_check="false")  # type: ignore[arg-type]


def test_the_contention_model_s_clock_never_goes_back_under_decode_overshoot() -> None:
    """Decode overshoot runs node 0's last decode step of R0 ahead of an arrival
    (0.2 ms before R0 ends), which starts the waiting copy of R1's prefix at that
    step's end; a second copy started at the arrival itself, earlier, used to set
    the NICs' clock back, and the first copy landed 0.2 ms before its two blocks
    could have crossed (16 ms at 2.048 MB/s). Every copy now lands no sooner than
    its start plus its bytes at the slower NIC."""
    from simkit import RDMA_BW

    from envs.sim import Simulator

    config = SimConfig(causal_kv=False, decode_overshoot=True, copy_model="contention", max_batch=1)

    def window(extra_at: float | None) -> Prompts:
        p = Prompts()
        p.add(0.0, ["a"], output_tokens=50)  # node 0: a long decode
        p.add(0.001, ["p0", "p1"], output_tokens=2)  # node 0: queued behind it
        p.add(0.0, ["q0", "q1"])  # node 2: holds Q
        p.add(0.02, ["x"])  # warms R1's prefix onto node 1
        if extra_at is not None:
            p.add(extra_at, ["y"])  # warms Q onto node 0
        return p

    class Policy:
        def decide(self, sim, request):  # type: ignore[no-untyped-def]
            blocks = {r.request_id: r.blocks for r in sim.requests}
            if request.request_id == "r3":
                assert sim.warm(0, 1, blocks["r1"]) == WARM_OK
                return 1
            if request.request_id == "r4":
                assert sim.warm(2, 0, blocks["r2"]) == WARM_OK
                return 2
            return {"r0": 0, "r1": 0, "r2": 2}[request.request_id]

    first = Simulator(toy_cluster(3), window(None).workload(), config)
    first.run(Policy())
    end = first.records.finish_s[0]
    sim = Simulator(toy_cluster(3), window(end - 0.0002).workload(), config)
    sim.run(Policy())
    assert len(sim.copies) == 2
    for copy in sim.copies:
        assert copy.land_s >= copy.start_s + copy.bytes / RDMA_BW - 1e-12


@pytest.mark.parametrize("core", CORES)
def test_a_copy_done_by_a_clock_run_ahead_does_not_land_at_an_earlier_arrival(core: str) -> None:
    """Found by a differential fuzz of the two cores (both did it). At one arrival
    decode overshoot runs the last decode steps of R0 (node 0) and R2 (node 1) ahead:
    R0 ends at E0 = 16 ms of prefill + 49 decode steps, R2 0.5 ms later at E1, and
    each end starts a waiting copy, P from node 0 and Q from node 1, both to node 2
    (NICs of 2.048 GB/s: a block crosses in 8 us). Q's start moves the NICs' clock
    to E1, by which P's bytes are done. The policy then copies S from node 2 to
    node 0 at the arrival itself, 0.2 ms before E0: the flows' next event was
    timed from the arrival, not from the clock, so P landed at the arrival, before
    it started. It now lands at E1 (the clock), Q and S 8 us later."""
    from simkit import TOY_MODEL, toy_gpu

    from envs.sim import ClusterSpec, NodeSpec, Simulator

    rdma_bw = 2.048e9
    config = SimConfig(causal_kv=False, decode_overshoot=True, copy_model="contention", max_batch=1)
    e0 = 0.016 + decode_s(49, 1, 16)  # R0: 16 prompt tokens, 50 output tokens
    e1 = e0 + 0.0005
    p = Prompts()
    p.add(0.0, ["a"], output_tokens=50)  # node 0: a long decode, ends at E0
    p.add(0.0, ["s0"])  # node 2 holds S
    p.add(0.0005, ["b"], output_tokens=50)  # node 1: the same, ends at E1
    p.add(0.001, ["p0"], output_tokens=2)  # node 0: admitted at E0
    p.add(0.0015, ["q0"], output_tokens=2)  # node 1: admitted at E1
    p.add(0.02, ["x"])  # warms P and Q to node 2: they wait for their sources
    p.add(e0 - 0.0002, ["y"])  # overshoot starts P at E0 and Q at E1; warms S 2 -> 0
    prefix_p, prefix_q, prefix_s = (p.blocks([name]) for name in ("p0", "q0", "s0"))
    actions = {
        5: [lambda s: s.warm(0, 2, prefix_p), lambda s: s.warm(1, 2, prefix_q)],
        6: [lambda s: s.warm(2, 0, prefix_s)],
    }
    script = Script([0, 2, 1, 0, 1, 2, 2], actions)
    cluster = ClusterSpec(TOY_MODEL, (NodeSpec(toy_gpu(rdma_bw=rdma_bw), 1),) * 3)
    sim = Simulator(cluster, p.workload(), config, core=core)
    sim.run(script)
    assert (script.results[5], script.results[6]) == ([WARM_OK, WARM_OK], [WARM_OK])
    copy_p, copy_q, copy_s = sim.copies
    assert sim.records.finish_s[0] == pytest.approx(e0, rel=1e-12)
    assert copy_p.start_s == pytest.approx(e0, rel=1e-12)
    assert copy_q.start_s == pytest.approx(e1, rel=1e-12)
    assert copy_s.start_s == pytest.approx(e0 - 0.0002, rel=1e-12)
    assert copy_p.land_s == pytest.approx(e1, rel=1e-12)  # landed at e0 - 0.0002 before
    assert copy_q.land_s == pytest.approx(e1 + 8e-6, rel=1e-12)
    assert copy_s.land_s == pytest.approx(e1 + 8e-6, rel=1e-12)
    for copy in sim.copies:
        assert copy.land_s >= copy.start_s + copy.bytes / rdma_bw


@pytest.mark.parametrize("model", ["reference", "contention"])
def test_a_lost_copy_takes_the_copies_waiting_on_it_with_it_once_each(model: str) -> None:
    """Node 0 holds P. Copies 0->1, 1->2, 1->4, 2->3 and 3->1 (of P's first 3
    blocks) are issued at once: all but the first wait for a source that only an
    earlier copy of the chain would make hold P. Node 0 then drops P (no host
    RAM), so 0->1 lands nothing, and every copy waiting on it, directly or down
    the chain, fails with it: each counted once (the cycle back to node 1 used to
    fail copies twice: 6 lost of 5 issued) and none left waiting or in flight."""
    from envs.sim.transfers import FAILED

    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(0.1, ["x"])
    prefix = p.blocks(names("P", 4))

    def act(sim):  # type: ignore[no-untyped-def]
        pairs = ((0, 1, prefix), (1, 2, prefix), (1, 4, prefix), (2, 3, prefix), (3, 1, prefix[:3]))
        answers = [sim.warm(src, dst, blocks) for src, dst, blocks in pairs]
        sim.evict(0, prefix)
        return answers

    config = SimConfig(copy_model=model, host_ram_bytes=0.0)
    sim, script = run_script(toy_cluster(5), p, [0, 0], {1: [act]}, config)
    assert script.results[1] == [[WARM_OK] * 5]
    assert [c.state for c in sim.copies] == [FAILED] * 5
    summary = sim.records.summary
    assert (summary["warm_copies"], summary["warm_copies_landed"]) == (5, 0)
    assert summary["warm_copies_lost"] == 5
    assert all(not n.inflight and not n.waiting_src for n in sim.nodes)


@pytest.mark.parametrize("model", ["reference", "contention"])
def test_copies_left_waiting_on_each_other_are_lost_with_the_one_they_relied_on(
    model: str,
) -> None:
    """Node 1 computes P (9 blocks). Copies 1->3 of P, 3->2 and 2->3 of its first 8
    blocks are all accepted: each source will hold the prefix from a copy on its
    way. Node 1 then drops P (evicted, no host RAM), so 1->3 lands nothing; 3->2
    and 2->3 now wait on each other only. Both are lost with it (they used to stay
    waiting and in flight to the end, so every later copy of P to nodes 2 and 3
    was refused as already in flight)."""
    from envs.sim.transfers import FAILED

    p = Prompts()
    p.add(0.01, names("P", 9))  # node 1 computes P
    p.add(0.2, ["x"])  # node 1 drops P
    p.add(3.0, ["y"])
    prefix = p.blocks(names("P", 9))

    def chain(sim):  # type: ignore[no-untyped-def]
        sim.route(1)
        return [sim.warm(1, 3, prefix), sim.warm(3, 2, prefix[:8]), sim.warm(2, 3, prefix[:8])]

    actions = {0: [chain], 1: [lambda sim: sim.evict(1, prefix, 0)]}
    config = SimConfig(copy_model=model, host_ram_bytes=0.0)
    sim, script = run_script(toy_cluster(4), p, [1, 0, 0], actions, config)
    assert script.results[0] == [[WARM_OK] * 3]
    assert [c.state for c in sim.copies] == [FAILED] * 3
    assert sim.records.summary["warm_copies_lost"] == 3
    assert all(not n.inflight and not n.waiting_src for n in sim.nodes)


@pytest.mark.parametrize("core", CORES)
def test_a_contention_copy_lands_when_its_bytes_at_the_current_rate_are_in(core: str) -> None:
    """The contention model: a request deciding whether to wait for a moving copy
    reads when the copy lands from the bytes it has left now, not from those it
    had at the flows' last event. A's prefill of P (64 tokens) ends at 64 ms; the
    copy of P to node 1 then moves 65,536 bytes at 819,200 B/s, 80 ms, to 144 ms.
    B (P plus a block) arrives on node 1 at 130 ms: the copy is 14 ms away, less
    than the 64 ms of prefill it saves, so B waits for it. (Until 2026-12-05 the
    estimate was 130 + 80 ms, and B computed all 80 tokens, to 210 ms.) The causal
    estimate the observations use (``_causal_landing_s``, transfer latency left
    out) reads it the same way: 14 ms from now, not 80."""
    from envs.sim import Simulator
    from envs.sim.forecast import _causal_landing_s, landing_s

    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(0.130, [*names("P", 4), "b0"])
    prefix = p.blocks(names("P", 4))
    seen: list[tuple[float, float]] = []

    def look(sim: Simulator) -> None:
        copy = sim.copies[0]
        seen.append(
            (landing_s(copy, sim.nodes, sim.now, 0.0), _causal_landing_s(sim, copy, sim.now, 1))
        )

    sim = Simulator(
        toy_cluster(rdma_bw=819_200.0), p.workload(), SimConfig(copy_model="contention"), core=core
    )

    def route_then_warm(sim: Simulator) -> str:
        sim.route(0)  # A is on node 0 (computing P) before the copy is asked for
        return sim.warm(0, 1, prefix)

    script = Script([None, 1], {0: [route_then_warm], 1: [look]})  # type: ignore[list-item]
    sim.run(script)
    assert script.results[0] == [WARM_OK]
    assert seen == [(pytest.approx(0.144, rel=1e-12), pytest.approx(0.014, rel=1e-9))]
    rec = sim.records
    assert rec.admission[1][0] == pytest.approx(0.144, rel=1e-12)
    assert rec.hit_hbm_tokens[1] == 64
    assert rec.first_token_s[1] == pytest.approx(0.144 + 64 * HBM_S + 0.016, rel=1e-12)


@pytest.mark.parametrize("core", CORES)
def test_a_request_does_not_wait_for_a_copy_of_what_it_loads_sooner_from_ram(core: str) -> None:
    """A copy in flight is waited for only if that ends the prefill sooner than
    starting now from the target's caches, host RAM included. Node 1 computed P
    (to 80 ms) and at 1 s moves it to host RAM; node 0 computes P again (1.0 to
    1.080 s) and a copy of P to node 1 waits for it, due to land at 1.112 s. C (P plus
    a block) reaches node 1 at 1.060: the copy is 52 ms away, less than the 64 ms
    of prefill it saves, but loading P from RAM takes 6.4 ms, so C starts at once:
    first token at 1.060 + 0.0064 + 0.016. (Until 2026-12-05 it waited for the
    copy: first token at 1.112 + 0.016 and the HBM reads.)"""
    from envs.sim import Simulator

    p = Prompts()
    p.add(0.0, [*names("P", 4), "a0"])
    p.add(1.0, [*names("P", 4), "b0"])
    p.add(1.060, [*names("P", 4), "c0"])
    prefix = p.blocks(names("P", 4))

    def to_ram_and_warm(sim: Simulator) -> list[object]:
        sim.route(0)  # B computes P on node 0
        return [sim.evict(1, prefix), sim.warm(0, 1, prefix)]

    sim = Simulator(toy_cluster(), p.workload(), SimConfig(), core=core)
    script = Script([1, None, 1], {1: [to_ram_and_warm]})  # type: ignore[list-item]
    sim.run(script)
    assert script.results[1] == [[6, WARM_OK]]  # P, a0 and A's output block
    rec = sim.records
    (copy,) = sim.copies
    # the copy then runs on node 1's timeline after C's prefill (reference copy model)
    assert (copy.start_s, copy.land_s) == (pytest.approx(1.0824), pytest.approx(1.1144))
    assert rec.admission[2][0] == 1.060 and rec.hit_ram_tokens[2] == 64
    assert rec.first_token_s[2] == pytest.approx(1.060 + 0.0064 + 0.016, rel=1e-12)
