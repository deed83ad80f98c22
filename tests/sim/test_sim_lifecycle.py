"""Cache lifecycle actions (pin / unpin, demote / promote, replica TTL and reclaim
order) and the replication metrics, on the toy cluster with numbers worked out
by hand (simkit's docstring has the toy physics: 16-token blocks, prefill 1 ms a
token, RAM load 0.1 ms a token, RDMA 8 ms a block)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from simkit import (
    BLOCK_BYTES,
    BT,
    CORES,
    HBM_S,
    PREFILL_S,
    RAM_S,
    Prompts,
    Script,
    check_causal,
    check_nodes,
    check_run,
    decode_s,
    fuzz_config,
    names,
    records_equal,
    run_script,
    toy_cluster,
)

from envs.sim import SimConfig, Simulator
from envs.sim.cache import ORIGIN_WARM, RAM, PrefixCache
from envs.sim.errors import ConfigError
from envs.sim.floor import floor_bounds
from envs.sim.request import BlockChainer


def _chain(*paths: str) -> list[tuple[int, ...]]:
    chainer = BlockChainer()
    return [chainer.chain(list(p)) for p in paths]


# ---------------------------------------------------------------- the cache
def test_pinned_prefix_survives_eviction_and_unpin_releases_it() -> None:
    a, b = _chain("PPAA", "PPBB")
    cache = PrefixCache()
    cache.insert(a, 0.0)
    cache.insert(b, 1.0)
    assert cache.pin(a) == 4
    assert cache.evict_to(0) == 2  # only b's own tail can go
    assert cache.match(a) == (4, 0, 0) and cache.match(b) == (2, 2, 0)
    cache.check_invariants()
    assert cache.unpin(a) == 4 and cache.pinned_blocks == 0
    assert cache.evict_to(0) == 4
    cache.check_invariants()


def test_nested_pins_count_shared_blocks_once() -> None:
    (a,) = _chain("PPAA")
    cache = PrefixCache()
    cache.insert(a, 0.0)
    assert cache.pin(a[:2]) == 2
    assert cache.pin(a) == 2  # the first two are pinned already
    assert cache.pinned_blocks == 4 and cache.pinned_depth(a) == 4
    assert cache.unpin(a) == 2  # the shared two stay pinned by the first pin
    assert cache.pinned_depth(a) == 2
    assert cache.evict_prefix(a) == 2  # the explicit evict moves only the unpinned tail
    assert cache.match(a) == (2, 2, 0)
    assert cache.unpin(a) == 0  # not pinned any more
    cache.check_invariants()


def test_replicas_first_evicts_a_newer_copy_before_older_request_blocks() -> None:
    a, b = _chain("AAAA", "BBBB")
    for replicas_first, request_evicted in ((False, 4), (True, 0)):
        cache = PrefixCache(replicas_first=replicas_first)
        cache.insert(a, 0.0)
        cache.insert(b, 1.0, copy_id=0, origin=ORIGIN_WARM)
        assert cache.evict_to(4) == 4
        assert cache.evicted_request_blocks == request_evicted
        kept = a if replicas_first else b
        assert cache.match(kept) == (4, 0, 0)
        cache.check_invariants()


def test_replicas_first_reaches_a_copy_once_requests_below_it_are_gone() -> None:
    """A copy W with a request's block X below it, and an older request run A: LRU
    takes A, then X; W, now a leaf, goes before anything ordinary is left."""
    w, x, a = _chain("WW", "WWX", "AAAA")
    cache = PrefixCache(replicas_first=True)
    cache.insert(a, 1.0)
    cache.insert(w, 5.0, copy_id=0, origin=ORIGIN_WARM)
    cache.insert(x, 5.0)
    assert cache.evict_to(2) == 5  # A (4), X (1): W is not a leaf until X goes
    assert cache.match(x) == (2, 1, 0)
    cache.insert(a[:1], 2.0)  # an ordinary block, used before W
    assert cache.evict_to(1) == 2  # W goes first all the same
    assert cache.match(w) == (0, 2, 0) and cache.match(a) == (1, 3, 0)
    cache.check_invariants()


def test_expire_copy_reclaims_an_unused_copy_after_its_ttl() -> None:
    (a,) = _chain("PPPP")
    cache = PrefixCache()
    cache.insert(a[:2], 0.0)
    cache.insert(a, 1.0, copy_id=7, origin=ORIGIN_WARM)  # the copy sent the last two
    assert cache.expire_copy(a, 7, 1.5, ttl_s=1.0) == (0, 2.0)
    cache.match_touch(a, 1.8)  # a hit refreshes it (and the request's blocks above)
    assert cache.expire_copy(a, 7, 2.0, ttl_s=1.0) == (0, 2.8)
    assert cache.expire_copy(a, 7, 2.8, ttl_s=1.0) == (2, None)
    assert cache.match(a) == (2, 2, 0)  # only the copy's blocks went, to RAM
    assert cache.blocks_in[RAM] == 2
    cache.check_invariants()


def test_a_pinned_copy_loses_its_ttl() -> None:
    (a,) = _chain("PPPP")
    cache = PrefixCache()
    cache.insert(a, 1.0, copy_id=3, origin=ORIGIN_WARM)
    cache.pin(a)
    assert cache.expire_copy(a, 3, 5.0, ttl_s=1.0) == (0, None)  # never looked at again
    assert cache.match(a) == (4, 0, 0)


# ---------------------------------------------------------------- pins in a run
def _prompt_node0(p: Prompts, n_blocks: int = 32) -> tuple[int, ...]:
    """r0 at t=0 computes a ``n_blocks``-block prefix P on node 0 (one token short,
    and one output token: its context is exactly P, cached at its prefill's end)."""
    p.add(0.0, names("P", n_blocks), input_tokens=n_blocks * BT - 1)
    return p.blocks(names("P", n_blocks))


def test_pin_refusals_and_budget() -> None:
    p = Prompts()
    prefix = _prompt_node0(p, 20)  # 320 tokens; the pin budget is 0.25 x 1024 = 256
    p.add(1.0, names("x", 1))
    p.add(1.1, names("y", 1))
    pin = lambda blocks: lambda sim: sim.pin(0, blocks)  # noqa: E731
    actions = {
        1: [pin(prefix), pin(prefix[:16]), pin(prefix[:16]), pin(()), lambda s: s.pin(1, prefix)],
        2: [lambda s: s.unpin(0, prefix[:16]), lambda s: s.unpin(0, prefix[:16])],
    }
    sim, script = run_script(toy_cluster(2), p, [0, 1, 1], actions)
    assert script.results[1] == ["over_budget", "ok", "already_pinned", "bad_prefix", "not_in_hbm"]
    assert script.results[2] == [16, 0]
    summary = sim.records.summary
    assert summary["pins"] == 1
    assert summary["pin_refused"] == {
        "bad_prefix": 1,
        "already_pinned": 1,
        "not_in_hbm": 1,
        "over_budget": 1,
    }


def test_pins_hold_admission_back_until_a_running_request_ends() -> None:
    """Node 0 (budget 1024 tokens) pins P, 512 tokens. r1 (320 + 50 tokens) runs;
    r2 (400 + 1) arrives during r1's decode: 512 + 370 + 401 > 1024, so it waits for
    r1 to finish instead of cutting r1's decode (as it would without the pin)."""
    config = SimConfig(pin_budget_fraction=0.5)
    r1_first_token = 1.0 + 320 * PREFILL_S
    r1_done = r1_first_token + decode_s(49, 1, 320)
    for pinned in (True, False):
        p = Prompts()
        prefix = _prompt_node0(p)
        p.add(1.0, names("a", 20), output_tokens=50)
        p.add(1.33, names("b", 25))
        p.add(3.0, names("c", 1))
        actions = {1: [lambda s, b=prefix: s.pin(0, b)]} if pinned else {}
        actions[2] = [check_nodes]
        actions[3] = [lambda s, b=prefix: s.nodes[0].cache.match(b)]
        sim, script = run_script(toy_cluster(1), p, [0, 0, 0, 0], actions, config)
        rec = sim.records
        if pinned:
            assert script.results[1] == ["ok"]
            assert rec.admit_s[2] == pytest.approx(r1_done)
            assert rec.ttft_s[2] == pytest.approx(r1_done - 1.33 + 400 * PREFILL_S)
            assert rec.summary["pins_yielded"] == 0
        else:
            assert rec.admit_s[2] < r1_done - 0.01  # cut in at the next decode step
        # P stays in HBM through r1's and r2's contexts (pinned) or not (LRU)
        assert (script.results[3][0][0] == 32) is pinned
        assert sim.nodes[0].pinned_tokens == (512 if pinned else 0)


def test_pins_give_way_to_a_request_that_could_not_run_beside_them() -> None:
    """An idle node with 512 pinned tokens and a 640 + 1 token request: 1153 > 1024,
    and nothing running will ever free room, so the pin is released at once."""
    p = Prompts()
    prefix = _prompt_node0(p)
    p.add(1.0, names("big", 40))
    sim, _ = run_script(
        toy_cluster(1),
        p,
        [0, 0],
        {1: [lambda s: s.pin(0, prefix)]},
        SimConfig(pin_budget_fraction=0.5),
    )
    rec = sim.records
    assert rec.admit_s[1] == 1.0
    assert rec.ttft_s[1] == pytest.approx(640 * PREFILL_S)
    assert rec.summary["pins_yielded"] == 1 and sim.nodes[0].pinned_tokens == 0


def test_a_pinned_node_refuses_a_copy_that_would_need_its_pinned_room() -> None:
    """Node 1 pins 48 of its 64 blocks: a 32-block copy no longer fits (16 do)."""
    p = Prompts()
    prefix = _prompt_node0(p)
    p.add(0.0, names("Q", 48))
    p.add(1.0, names("x", 1))
    held = p.blocks(names("Q", 48))
    actions = {2: [lambda s: s.pin(1, held), lambda s: s.warm(0, 1, prefix)]}
    config = SimConfig(pin_budget_fraction=0.8)
    _, script = run_script(toy_cluster(2), p, [0, 1, 0], actions, config)
    assert script.results[2] == ["ok", "no_room"]


# ---------------------------------------------------------------- demote / promote
def test_demote_then_promote_take_time_at_the_ram_rate() -> None:
    """P (32 blocks, 512 tokens) moves at 0.1 ms a token: 51.2 ms each way. The
    demotion asked at 1.0 ends at 1.0512 (P usable in HBM until then); the
    promotion asked at 1.06 ends at 1.1112."""
    move_s = 512 * RAM_S
    p = Prompts()
    prefix = _prompt_node0(p)
    for k, t in enumerate((1.0, 1.02, 1.06, 1.1, 1.12)):
        p.add(t, names(f"own{k}-", 1))
    p.add(1.2, names("P", 32) + names("q", 1))
    where = lambda s: s.nodes[0].cache.match(prefix)  # noqa: E731
    actions = {
        1: [lambda s: s.demote(0, prefix), lambda s: s.promote(0, prefix)],
        2: [where, lambda s: s.demote(0, prefix)],
        3: [where, lambda s: s.promote(0, prefix), lambda s: s.promote(0, prefix)],
        4: [where],
        5: [where, lambda s: s.promote(0, prefix)],
    }
    sim, script = run_script(toy_cluster(2), p, [0, 1, 1, 1, 1, 1, 0], actions)
    assert script.results[1] == ["ok", "in_progress"]
    assert script.results[2] == [(32, 0, 0), "in_progress"]
    assert script.results[3] == [(0, 32, 0), "ok", "in_progress"]
    assert script.results[4] == [(0, 32, 0)]  # 1.1 < 1.06 + 51.2 ms
    assert script.results[5] == [(32, 0, 0), "nothing_to_move"]
    assert [(m.start_s, m.end_s) for m in sim.moves] == [
        (1.0, pytest.approx(1.0 + move_s)),
        (1.06, pytest.approx(1.06 + move_s)),
    ]
    rec = sim.records
    assert rec.hit_hbm_tokens[6] == 512
    assert rec.ttft_s[6] == pytest.approx(512 * HBM_S + 16 * PREFILL_S)
    s = rec.summary
    assert (s["demotions"], s["demoted_blocks"], s["promotions"], s["promoted_blocks"]) == (
        1,
        32,
        1,
        32,
    )


def test_a_request_needing_a_prefix_being_promoted_waits_for_the_promotion() -> None:
    """P is in RAM; a promotion starts at 1.06 and ends at 1.1112. A request for P
    admitted at 1.08 takes it when the promotion lands, 31.2 ms later, instead of
    loading it itself (51.2 ms), and then reads it from HBM like any HBM hit."""
    p = Prompts()
    prefix = _prompt_node0(p)
    p.add(1.0, names("x", 1))
    p.add(1.06, names("y", 1))
    p.add(1.08, names("P", 32) + names("q", 1))
    p.add(2.0, names("P", 32) + names("r", 1))
    actions = {1: [lambda s: s.evict(0, prefix)], 2: [lambda s: s.promote(0, prefix)]}
    sim, _ = run_script(toy_cluster(2, budget_tokens=2048), p, [0, 1, 1, 0, 0], actions)
    rec = sim.records
    assert rec.hit_ram_tokens[3] == 512
    waited = 1.06 + 512 * RAM_S - 1.08
    assert rec.reuse_s[3] == pytest.approx(waited + 512 * HBM_S, rel=1e-12)
    assert rec.ttft_s[3] == pytest.approx(waited + 512 * HBM_S + 16 * PREFILL_S, rel=1e-12)
    assert rec.summary["promoted_blocks"] == 0  # the request brought P up already


@pytest.mark.parametrize("core", CORES)
def test_a_request_recomputes_rather_than_wait_for_a_promotion_queued_too_long(
    core: str,
) -> None:
    """P (4 blocks) is in RAM; at 3.0 s A (64 blocks) is demoted, 102.4 ms on the
    host link, and P's promotion queues behind it, to 3.1088. A request for P plus
    a block arriving at 3.01 would wait 98.8 ms for it (and then prefill its own
    16 tokens); recomputing all 80 tokens takes 80 ms, so it recomputes. (Until
    2026-12-05 it waited, whatever the promotion's queue.)"""
    from envs.sim import Simulator

    p = Prompts()
    prefix = _prompt_node0(p, 4)
    p.add(1.0, names("A", 64), input_tokens=64 * BT - 1)
    p.add(3.0, names("x", 1))
    p.add(3.01, names("P", 4) + names("q", 1))
    big = p.blocks(names("A", 64))
    actions = {
        2: [
            lambda s: s.evict(0, prefix),
            lambda s: s.demote(0, big),
            lambda s: s.promote(0, prefix),
        ]
    }
    sim = Simulator(toy_cluster(2, budget_tokens=2048), p.workload(), SimConfig(), core=core)
    script = Script([0, 0, 1, 0], actions)
    sim.run(script)
    assert script.results[2][1:] == ["ok", "ok"]
    assert [(m.start_s, m.end_s) for m in sim.moves] == [
        (3.0, pytest.approx(3.0 + 1024 * RAM_S)),
        (pytest.approx(3.0 + 1024 * RAM_S), pytest.approx(3.0 + 1088 * RAM_S)),
    ]
    rec = sim.records
    assert (rec.hit_hbm_tokens[3], rec.hit_ram_tokens[3]) == (0, 0)
    assert rec.ttft_s[3] == pytest.approx(80 * PREFILL_S, rel=1e-12)


def test_a_request_admitted_as_its_promotion_ends_pays_what_an_hbm_hit_does() -> None:
    """Admitted 0.1 us before the promotion of P lands, the request waits 0.1 us and
    reads P's 512 tokens from HBM: never less than its floor (a request admitted
    just after the promotion would find P in HBM and pay the same read)."""
    p = Prompts()
    prefix = _prompt_node0(p)
    p.add(1.0, names("x", 1))
    p.add(1.06, names("y", 1))
    p.add(1.06 + 512 * RAM_S - 1e-7, names("P", 32) + names("q", 1))
    actions = {1: [lambda s: s.evict(0, prefix)], 2: [lambda s: s.promote(0, prefix)]}
    cluster = toy_cluster(2, budget_tokens=2048)
    sim, _ = run_script(cluster, p, [0, 1, 1, 0], actions)
    rec = sim.records
    assert rec.hit_ram_tokens[3] == 512
    assert rec.ttft_s[3] == pytest.approx(1e-7 + 512 * HBM_S + 16 * PREFILL_S, rel=1e-6)
    floor, capacity_mean = floor_bounds(cluster, p.workload(), SimConfig())
    assert np.all(rec.ttft_s >= floor - 1e-12)
    assert float(rec.ttft_s.mean()) >= capacity_mean - 1e-12


def test_host_link_runs_one_move_at_a_time() -> None:
    """Two demotions asked together: the second starts when the first ends."""
    p = Prompts()
    p.add(0.0, names("P", 10), input_tokens=159)  # contexts of exactly 10 and 20 blocks
    p.add(0.0, names("Q", 20), input_tokens=319)
    p.add(1.0, names("x", 1))
    a, b = p.blocks(names("P", 10)), p.blocks(names("Q", 20))
    actions = {2: [lambda s: s.demote(0, a), lambda s: s.demote(0, b)]}
    sim, _ = run_script(toy_cluster(2), p, [0, 0, 1], actions)
    first, second = sim.moves
    assert first.end_s == pytest.approx(1.0 + 160 * RAM_S)
    assert second.start_s == first.end_s
    assert second.end_s == pytest.approx(first.end_s + 320 * RAM_S)


# ---------------------------------------------------------------- replica lifetime
def _copy_run(config: SimConfig, hit_at: float | None = None) -> tuple:
    """P on node 0; at 1.0 it is copied to node 1 (32 blocks x 8 ms: lands at
    1.256); checks of node 1's cache at 1.7 and 1.8; a request for P on node 1 at
    ``hit_at`` if given."""
    p = Prompts()
    prefix = _prompt_node0(p)
    p.add(1.0, names("x", 1))
    if hit_at is not None:
        p.add(hit_at, names("P", 32) + names("h", 1))
    p.add(1.7, names("y", 1))
    p.add(1.8, names("z", 1))
    where = lambda s: s.nodes[1].cache.match(prefix)  # noqa: E731
    n = len(p.requests)
    actions = {1: [lambda s: s.warm(0, 1, prefix)], n - 2: [where], n - 1: [where]}
    routes = [0] * n
    if hit_at is not None:
        routes[2] = 1
    return run_script(toy_cluster(2), p, routes, actions, config)


def test_an_unused_copy_is_reclaimed_to_ram_after_its_ttl() -> None:
    sim, script = _copy_run(SimConfig(replica_ttl_s=0.5))  # due at 1.256 + 0.5
    assert script.results[2] == [(32, 0, 0)]
    assert script.results[3] == [(0, 32, 0)]
    assert sim.records.summary["replica_expired_blocks"] == 32


def test_a_used_copy_lives_a_ttl_past_its_last_use() -> None:
    sim, script = _copy_run(SimConfig(replica_ttl_s=0.5), hit_at=1.4)  # due at 1.4 + 0.5
    assert script.results[3] == script.results[4] == [(32, 0, 0)]
    # due at 1.9, after the last decision: P goes with the request's 2 blocks below it
    assert sim.records.summary["replica_expired_blocks"] == 34
    assert sim.records.summary["warm_hit_rate"] == 1.0


def test_without_a_ttl_the_copy_stays() -> None:
    sim, script = _copy_run(SimConfig())
    assert script.results[3] == [(32, 0, 0)]
    assert sim.records.summary["replica_expired_blocks"] == 0


# ---------------------------------------------------------------- replication metrics
def _displacing_run(order: str) -> tuple:
    """Node 1 holds r0's context, 49 blocks (768 + 1 tokens); node 0 holds P. At 1.0
    P is copied to nodes 1 and 2; node 1 (64 blocks) must make room for 17; at
    2.0 a request for P runs on node 1."""
    p = Prompts()
    p.add(0.0, names("R", 48))
    prefix = p.blocks(names("P", 32))
    p.add(0.0, names("P", 32))
    p.add(1.0, names("x", 1))
    p.add(2.0, names("P", 32) + names("q", 1))
    actions = {2: [lambda s: s.warm(0, 1, prefix), lambda s: s.warm(0, 2, prefix)]}
    return run_script(toy_cluster(3), p, [1, 0, 0, 1], actions, SimConfig(reclaim_order=order))


def test_replication_metrics_by_hand() -> None:
    sim, script = _displacing_run("lru")
    assert script.results[2] == ["ok", "ok"]
    s = sim.records.summary
    assert s["warm_bytes"] == 2 * 32 * BLOCK_BYTES
    assert s["displaced_by_copies_blocks"] == 17
    assert s["normal_displaced_by_copies_blocks"] == 17  # r0's blocks, LRU
    assert s["replication_amplification"] == 2.0  # one 32-block prefix, landed twice
    assert s["warm_amplification"] == 0.5  # the copy to node 2: no request used it
    # the request at 2.0 hits the 32 copied blocks: 512 tokens of cold prefill saved
    assert sim.records.hit_hbm_tokens[3] == 512
    assert s["copy_prefill_saved_s"] == pytest.approx(32 * BT * PREFILL_S)
    assert s["copy_bytes_per_prefill_s_saved"] == pytest.approx(2 * 32 * BLOCK_BYTES / 0.512)


def test_replicas_first_makes_the_landing_copy_give_way() -> None:
    sim, _ = _displacing_run("replicas_first")
    s = sim.records.summary
    assert s["displaced_by_copies_blocks"] == 17  # the room the copy needed ...
    assert s["normal_displaced_by_copies_blocks"] == 0  # ... came out of the copy itself
    # so the request at 2.0 finds 15 copied blocks in HBM and 17 in RAM
    assert (sim.records.hit_hbm_tokens[3], sim.records.hit_ram_tokens[3]) == (240, 272)
    assert s["copy_prefill_saved_s"] == pytest.approx(15 * BT * PREFILL_S)


def test_no_copies_no_replication_figures() -> None:
    p = Prompts()
    p.add(0.0, names("P", 2))
    sim, _ = run_script(toy_cluster(1), p, [0])
    s = sim.records.summary
    assert s["copy_bytes_per_prefill_s_saved"] == 0.0
    assert s["replication_amplification"] == 0.0


# ---------------------------------------------------------------- config
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("pin_budget_fraction", 1.0),
        ("pin_budget_fraction", -0.1),
        ("pin_budget_fraction", "half"),
        ("replica_ttl_s", 0.0),
        ("reclaim_order", "fifo"),
    ],
)
def test_bad_lifecycle_settings_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=f"sim.{field}"):
        SimConfig(**{field: value})  # type: ignore[arg-type]


# ---------------------------------------------------------------- every invariant, at random
N_FUZZ_NODES = 3
life_action_st = st.tuples(
    st.sampled_from(["pin", "unpin", "demote", "promote", "warm", "evict"]),
    st.integers(0, N_FUZZ_NODES - 1),  # node (the target of a warm)
    st.integers(0, 2),  # which stem
    st.integers(1, 7),  # prefix blocks
    st.integers(0, N_FUZZ_NODES - 1),  # source of a warm
    st.sampled_from([True, True, False]),  # aim: act on what the node holds (a warm: from one)
)
life_config_st = st.builds(
    fuzz_config,
    causal_kv=st.booleans(),
    copy_model=st.sampled_from(["reference", "contention"]),
    max_batch=st.sampled_from([1, 256]),
    host_ram_bytes=st.sampled_from([math.inf, 3 * BLOCK_BYTES]),
    disk_tier=st.booleans(),
    transfer_latency_s=st.sampled_from([0.0, 1e-3]),
    chunked_prefill_tokens=st.sampled_from([0, 16]),
    pin_budget_fraction=st.sampled_from([0.0, 0.25, 0.9]),
    replica_ttl_s=st.sampled_from([math.inf, 0.01, 0.1]),
    reclaim_order=st.sampled_from(["lru", "replicas_first"]),
)


@settings(
    max_examples=int(os.environ.get("BTB_FUZZ_CASES", "60")),  # as test_sim_fuzz's audit runs
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    requests=st.lists(
        st.tuples(
            st.floats(0.0, 0.2, allow_nan=False),  # arrival, after 0.1 s a request
            st.integers(0, 2),  # stem
            st.integers(1, 6),  # shared blocks
            st.integers(0, 2),  # own blocks
            st.integers(1, 24),  # output tokens
            st.integers(0, N_FUZZ_NODES - 1),  # route
        ),
        min_size=4,
        max_size=14,
    ),
    actions=st.lists(st.tuples(st.integers(1, 13), life_action_st), min_size=4, max_size=20),
    config=life_config_st,
)
def test_random_lifecycle_actions_keep_every_invariant(
    requests: list[tuple], actions: list[tuple[int, tuple]], config: SimConfig
) -> None:
    """Requests served exactly once, KV never over budget (pins included), caches
    consistent at every decision, causal KV, and the same run twice."""
    stems = [names(f"s{k}-", 7) for k in range(3)]
    runs = []
    for _ in range(2):
        p = Prompts()
        for j, (arrival, stem, shared, own, output, _) in enumerate(requests):
            raw = stems[stem][:shared] + names(f"own{j}-", own)
            p.add(0.1 * j + arrival, raw, output_tokens=output)
        routes_by_id = {f"r{j}": r[-1] for j, r in enumerate(requests)}
        workload = p.workload()
        routes = [routes_by_id[r.request_id] for r in workload.requests]

        def make(act: tuple, p: Prompts = p) -> Callable[[Simulator], Any]:
            kind, node, stem, depth, src, aim = act
            blocks = p.blocks(stems[stem][:depth])

            def act_on(s: Simulator) -> Any:
                check_nodes(s)
                if kind == "warm":
                    held = [n.index for n in s.nodes if n.cache.hbm_match(blocks) == depth]
                    return s.warm(held[0] if aim and held else src, node, blocks)
                tiers = s.nodes[node].cache.match(blocks)
                hit = tiers[0] if kind in ("pin", "unpin", "demote") else sum(tiers)
                return getattr(s, kind)(node, blocks[:hit] if aim and hit else blocks)

            return act_on

        at: dict[int, list[Callable[[Simulator], Any]]] = {}
        for i, act in actions:
            at.setdefault(i, []).append(make(act))
        script = Script(routes, at)
        sim = Simulator(toy_cluster(N_FUZZ_NODES, budget_tokens=256), workload, config)
        sim.run(script)
        check_run(sim)
        if config.causal_kv:
            assert check_causal(sim) == []
        for node in sim.nodes:
            assert node.pinned_tokens == node.cache.pinned_blocks * BT
            assert node.pinned_tokens <= config.pin_budget_fraction * node.budget_tokens
        runs.append(sim)
    records_equal(runs[0].records, runs[1].records)
    assert runs[0].records.summary == runs[1].records.summary
