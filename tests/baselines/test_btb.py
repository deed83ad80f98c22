"""BTB as published: when it fires, how many copies, from where, and when it stays inert."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from statekit import cluster_state, prefix, request

from baselines import BTB, BTBPending, make_policy
from envs.sim import ClusterSpec, SimConfig, Simulator
from envs.sim.request import Workload
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

HOT = prefix(8)


def arrivals(policy: BTB, sim: Simulator, times: list[float]) -> list[int]:
    """Feed requests sharing HOT at ``times``; the number of copies after each."""
    counts = []
    for i, t in enumerate(times):
        sim.now = t
        policy.decide(sim, request((*HOT, 500 + i), arrival_s=t, index=i))
        counts.append(len(sim.copies))
    return counts


def test_fires_on_the_xth_arrival_within_z_and_not_before() -> None:
    sim = cluster_state([0, 0, 0, 0], cached=[HOT, [], [], []])
    policy = BTB(x=3, y_tokens=2048, z=1.0, m=4)
    policy.reset(sim)
    assert arrivals(policy, sim, [0.0, 0.4, 0.8]) == [0, 0, 3]
    assert {c.src for c in sim.copies} == {0}
    assert {c.dst for c in sim.copies} == {1, 2, 3}


def test_arrivals_further_apart_than_z_never_fire() -> None:
    sim = cluster_state([0, 0, 0, 0], cached=[HOT, [], [], []])
    policy = BTB(x=2, y_tokens=2048, z=1.0)
    policy.reset(sim)
    assert arrivals(policy, sim, [0.0, 1.5, 3.0, 4.01]) == [0, 0, 0, 0]


def test_the_window_includes_its_edge() -> None:
    sim = cluster_state([0, 0, 0, 0], cached=[HOT, [], [], []])
    policy = BTB(x=2, y_tokens=2048, z=1.0)
    policy.reset(sim)
    assert arrivals(policy, sim, [0.0, 1.0]) == [0, 3]


def test_routes_active_prefix_to_least_loaded_warm_node() -> None:
    sim = cluster_state([5, 9, 1, 0], cached=[HOT, HOT, [], []])
    policy = BTB(x=1, y_tokens=2048, m=2)  # already warm on two nodes: no copy
    policy.reset(sim)
    assert policy.decide(sim, request((*HOT, 77))) == 0
    assert sim.copies == []


@pytest.mark.parametrize(("name", "node"), [("btb", 0), ("btb_pending", 1)])
def test_a_copy_in_flight_counts_but_is_routed_to_only_by_btb_pending(name: str, node: int) -> None:
    """HOT is resident on node 0 (load 5) and on its way to node 1 (load 0). With
    M = 2 both count, so no copy is made. Published BTB routes to the nodes on which
    HOT is resident: node 0. btb_pending also routes to the copy's target: node 1."""
    sim = cluster_state([5, 0, 0, 0], cached=[HOT, [], [], []])
    assert sim.warm(0, 1, HOT) == "ok"
    policy = make_policy(name, x=1, y_tokens=2048, m=2)
    policy.reset(sim)
    assert policy.decide(sim, request((*HOT, 77))) == node
    assert len(sim.copies) == 1


def test_copies_to_the_least_loaded_cold_nodes_up_to_m() -> None:
    sim = cluster_state([3, 7, 1, 4], cached=[HOT, [], [], []])
    policy = BTB(x=1, y_tokens=2048, m=3)
    policy.reset(sim)
    policy.decide(sim, request((*HOT, 77)))
    assert sorted(c.dst for c in sim.copies) == [2, 3]


@pytest.mark.parametrize("name", ["btb", "btb_pending"])
@pytest.mark.parametrize("compiled", [True, False])
def test_a_refused_copy_goes_to_the_next_cold_node(
    name: str, compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """M copies are kept: node 1, the least-loaded cold node, has no room, so the
    copy goes on to node 3 (until 2026-12-05 only nodes 1 and 2 were tried, and
    the prefix stayed on 2 nodes against M = 3 for the whole burst)."""
    import baselines.btb as btb_module

    if not compiled:
        monkeypatch.setattr(btb_module, "btb_twin", lambda policy, sim: None)
    sim = cluster_state([5, 0, 1, 2, 3, 4], cached=[HOT, [], [], [], [], []])
    sim.nodes[1].reserved_tokens = sim.nodes[1].budget_tokens  # full: no room for a copy
    policy = make_policy(name, x=1, y_tokens=2048, m=3)
    policy.reset(sim)
    policy.decide(sim, request((*HOT, 77)))
    assert [(c.src, c.dst) for c in sim.copies] == [(0, 2), (0, 3)]
    assert sim.warm_refused["no_room"] == 1


@pytest.mark.parametrize("compiled", [True, False])
def test_a_node_a_delayed_view_sees_cold_but_holds_the_prefix_counts_among_m(
    compiled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nodes 0 and 1 computed P (at 0 and 0.5 s); at 0.7 s the router, 150 ms behind,
    sees only node 0 hold it. The copy to node 1 is refused (it holds P): with M = 2
    that is both copies, so none goes to node 2."""
    import baselines.btb as btb_module
    from tests.sim.simkit import Prompts, names, toy_cluster

    if not compiled:
        monkeypatch.setattr(btb_module, "btb_twin", lambda policy, sim: None)
    p = Prompts()
    for t, own in ((0.0, "a0"), (0.5, "b0"), (0.7, "c0")):
        p.add(t, [*names("P", 4), own])
    config = SimConfig(router_view_delay_s=0.15)
    sim = Simulator(toy_cluster(3), p.workload(), config)
    policy = make_policy("btb", x=1, y_tokens=64, m=2, z=10.0)
    policy.reset(sim)
    decisions = sim.decisions()
    next(decisions)
    decisions.send(0)
    request = decisions.send(1)
    assert policy.decide(sim, request) == 0
    assert sim.copies == [] and sim.warm_refused["target_has_prefix"] == 1


def test_m_is_bounded_by_the_node_count() -> None:
    sim = cluster_state([0, 0, 0, 0])
    with pytest.raises(ValueError, match=r"btb\.m = 5 copies exceeds the cluster's 4 nodes"):
        BTB(m=5).reset(sim)
    small = cluster_state([0, 0])
    policy = BTB()
    policy.reset(small)
    assert policy.m == 2  # the published default of 4, capped by a smaller cluster
    with pytest.raises(ValueError, match=r"btb\.m"):
        policy.set_thresholds(2, 2048, 1.0, 3)


@pytest.mark.parametrize(
    ("name", "m", "n", "said"),
    [
        ("btb_speculative", 3, 2, "btb_speculative.m = 3 copies exceeds the cluster's 2 nodes: "
         "M counts nodes holding the prefix, so it must be at most 2"),
        ("btb_pending", 2, 1, "btb_pending.m = 2 copies exceeds the cluster's 1 node: "
         "M counts nodes holding the prefix, so it must be at most 1"),
    ],
)  # fmt: skip
def test_an_m_refusal_names_the_variant_configured(name: str, m: int, n: int, said: str) -> None:
    """Every BTB variant's M refusal said ``btb.m``, and "the cluster's 1 nodes"."""
    with pytest.raises(ValueError) as caught:
        make_policy(name, m=m).check_nodes(n)
    assert str(caught.value) == said


# ---------------------------------------------------------------- whole runs
SMALL = BurstedSyntheticConfig(
    n_bursts=3,
    burst_requests=40,
    prefix_tokens=8192,  # 32 blocks
    suffix_tokens=256,
    first_burst_s=6.0,
    burst_interval_s=4.0,
    burst_window_s=2.0,
    n_decoys=12,
)
CLUSTER = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 4)


def _computes(node, blocks) -> bool:  # type: ignore[no-untyped-def]
    depth, key = len(blocks), blocks[-1]
    pending = list(node.queue) + ([node.computing] if node.computing is not None else [])
    return any(len(r.blocks) >= depth and r.blocks[depth - 1] == key for r in pending)


def _resident(node, blocks) -> bool:  # type: ignore[no-untyped-def]
    return node.cache.hbm_match(blocks) >= len(blocks)


def _holds(node, blocks) -> bool:  # type: ignore[no-untyped-def]
    return _resident(node, blocks) or _computes(node, blocks)


@pytest.mark.parametrize("name", ["btb", "btb_pending"])
@pytest.mark.parametrize("causal_kv", [True, False])
@pytest.mark.parametrize("m", [2, 4])
def test_never_exceeds_m_and_never_copies_from_a_node_without_the_kv(
    causal_kv: bool, m: int, name: str
) -> None:
    """Published BTB counts resident nodes and copies in flight, and copies from a
    resident node; btb_pending also counts (and copies from) nodes computing it."""
    sim = Simulator(
        CLUSTER,
        synthetic_window(SMALL, window=1),
        SimConfig(causal_kv=causal_kv),
        np.random.default_rng(0),
    )
    real_warm = sim.warm
    issued = []
    has = _resident if name == "btb" else _holds

    def checked_warm(src: int, dst: int, blocks: tuple[int, ...]) -> str:
        warm = [n.index for n in sim.nodes if has(n, blocks) or blocks[-1] in n.inflight]
        assert len(warm) < m, f"copy to node {dst} would make {len(warm) + 1} > M = {m}"
        assert has(sim.nodes[src], blocks), f"node {src} cannot be the source"
        result = real_warm(src, dst, blocks)
        issued.append(result)
        return result

    sim.warm = checked_warm  # type: ignore[method-assign]
    make_policy(name, y_tokens=8192, m=m).run(sim)
    assert issued and all(r == "ok" for r in issued)
    assert sim.warm_refused["source_lacks_prefix"] == 0
    assert len(sim.copies) >= (m - 1) * SMALL.n_bursts


@pytest.mark.parametrize(
    "config",
    [
        BurstedSyntheticConfig(n_bursts=0, n_decoys=40, prefix_tokens=8192),  # no repeats
        BurstedSyntheticConfig(
            n_bursts=2, burst_requests=60, prefix_tokens=4096, burst_window_s=2.0, n_decoys=10
        ),  # repeats, but 16-block prefixes: shorter than Y = 32
    ],
    ids=["unique-prefixes", "short-prefixes"],
)
def test_inert_without_repeated_long_prefixes(config: BurstedSyntheticConfig) -> None:
    workload = synthetic_window(config, window=2)
    nodes = {}
    for name, policy in (("btb", BTB(y_tokens=8192)), ("cache_aware", make_policy("cache_aware"))):
        sim = Simulator(CLUSTER, workload, SimConfig(), np.random.default_rng(3))
        nodes[name] = policy.run(sim).node
        if name == "btb":
            assert sim.copies == []
    assert np.array_equal(nodes["btb"], nodes["cache_aware"])


@pytest.mark.parametrize(("name", "causal_kv"), [("btb", False), ("btb_pending", True)])
def test_shadow_mode_records_copies_but_runs_exactly_as_cache_aware(
    name: str, causal_kv: bool
) -> None:
    """(Under causal KV cache_aware spreads a burst while the first prefill runs, so
    the prefix soon is resident everywhere and published BTB would use no copy.)"""
    workload = synthetic_window(SMALL, window=1)
    records = {}
    shadow = make_policy(name, y_tokens=8192, shadow=True)
    assert isinstance(shadow, BTB)
    for key, policy in (("shadow", shadow), ("cache_aware", make_policy("cache_aware"))):
        config = SimConfig(causal_kv=causal_kv)
        sim = Simulator(CLUSTER, workload, config, np.random.default_rng(5))
        records[key] = policy.run(sim)
        if key == "shadow":
            assert sim.copies == []
    assert np.array_equal(records["shadow"].node, records["cache_aware"].node)
    assert np.array_equal(records["shadow"].ttft_s, records["cache_aware"].ttft_s)
    metrics = shadow.metrics()
    assert metrics["shadow_copies"] == len(shadow.shadow_copies) >= 3 * SMALL.n_bursts
    assert 0 < metrics["shadow_used"] <= metrics["shadow_copies"]
    for copy in shadow.shadow_copies:
        assert copy.prefix_blocks == 32 and copy.src != copy.dst
        # a 32-block prefix of llama-70b over a 4xH100 NIC (200 GB/s)
        assert copy.land_s - copy.issued_s == pytest.approx(copy.bytes / 200e9)


@pytest.mark.parametrize("name", ["btb", "btb_pending", "btb_eft"])
def test_a_run_where_no_prompt_reaches_y_says_so_in_its_metrics(name: str) -> None:
    """A Y longer than every prompt made BTB cache_aware (btb_eft: eft) without a
    word; compare's note under the table (``experiments.report.btb_lines``) reads it."""
    workload = synthetic_window(SMALL, window=1)
    longest = max(len(r.blocks) for r in workload.requests)
    for y_blocks, unreached in ((longest, False), (longest + 1, True)):
        policy = make_policy(name, y_tokens=y_blocks * workload.block_tokens)
        sim = Simulator(CLUSTER, workload, SimConfig(), np.random.default_rng(2))
        policy.run(sim)
        if unreached:
            assert policy.metrics() == {"y_unreached_rate": 1.0} and sim.copies == []
        else:  # the longest prompt reaches it: the row as before
            assert "y_unreached_rate" not in policy.metrics()


class ScanningBTB(BTBPending):
    """btb_pending that scans queues instead of counting unprefilled requests."""

    def reset(self, sim: Simulator) -> None:
        super().reset(sim)
        self._tracked_y = None


@pytest.mark.parametrize("causal_kv", [True, False])
def test_counting_unprefilled_requests_matches_scanning_queues(causal_kv: bool) -> None:
    workload = synthetic_window(SMALL, window=3)
    runs = []
    for policy in (BTBPending(y_tokens=8192, m=3), ScanningBTB(y_tokens=8192, m=3)):
        sim = Simulator(CLUSTER, workload, SimConfig(causal_kv=causal_kv), np.random.default_rng(1))
        records = policy.run(sim)
        runs.append((records.node, [(c.src, c.dst, c.issued_s) for c in sim.copies]))
    assert np.array_equal(runs[0][0], runs[1][0])
    assert runs[0][1] == runs[1][1] and runs[0][1]


def rehash_at_512(workload: Workload) -> Workload:
    """The same requests hashed at 512-token blocks: chained ids name a whole prefix,
    so the id of 256-token block 2j + 1 names 512-token block j (a partial last
    block keeps the last id)."""
    requests = []
    for r in workload.requests:
        blocks = r.blocks[1::2] + ((r.blocks[-1],) if len(r.blocks) % 2 else ())
        requests.append(dataclasses.replace(r, blocks=blocks))
    return Workload(workload.name, 512, requests)


@pytest.mark.parametrize("name", ["btb", "btb_pending"])
def test_the_same_requests_at_256_and_512_token_blocks_get_the_same_decisions(name: str) -> None:
    """Y is tokens: 8,192 tokens are 32 blocks of 256 or 16 of 512, so hashing the
    same prompts at either block size changes neither a route nor a copy (this
    window never evicts, so the cache's granularity cannot matter either)."""
    at_256 = synthetic_window(SMALL, window=1)
    runs = []
    for workload in (at_256, rehash_at_512(at_256)):
        sim = Simulator(CLUSTER, workload, SimConfig(), np.random.default_rng(2))
        records = make_policy(name, y_tokens=8192).run(sim)
        assert sum(n.cache.evicted_hbm_blocks for n in sim.nodes) == 0
        runs.append((records.node, [(c.src, c.dst, c.issued_s, c.bytes) for c in sim.copies]))
    assert runs[0][1], "BTB fires at both block sizes"
    assert np.array_equal(runs[0][0], runs[1][0])
    assert runs[0][1] == runs[1][1]


def test_y_shorter_than_one_block_is_an_error_naming_the_field() -> None:
    sim = cluster_state([0, 0])
    with pytest.raises(
        ValueError,
        match=r"btb\.y_tokens = 100 is shorter than one 256-token block of the workload \(Y is "
        r"whole blocks: btb\.y_tokens=256 or more keys one\)$",
    ):
        BTB(y_tokens=100).reset(sim)


def test_a_minimum_prefix_at_or_below_y_never_exceeds_it() -> None:
    """Y counts the whole 256-token blocks in 1,000 tokens (3), the minimum the
    blocks 1,000 tokens reach into (4): a minimum equal to Y switched BTB off."""
    sim = cluster_state([0, 0, 0, 0], cached=[HOT, [], [], []])
    same = BTB(x=1, y_tokens=1000, min_prefix_tokens=1000, m=2)
    same.reset(sim)
    assert (same.y, same.min_prefix_blocks) == (3, 3)
    same.decide(sim, request((*HOT, 77)))
    assert len(sim.copies) == 1  # it fires
    above = BTB(x=1, y_tokens=1000, min_prefix_tokens=1025, m=2)
    above.reset(sim)
    assert (above.y, above.min_prefix_blocks) == (3, 5)  # above Y: never fires


@pytest.mark.parametrize("name", ["btb", "btb_pending", "btb_tuned", "btb_eft"])
def test_a_btb_not_reset_says_so_instead_of_running_another_rule(name: str) -> None:
    """Without reset, Y in blocks is unknown: btb ran the prompt-less-last-block
    rule silently, btb_pending failed with an AttributeError."""
    sim = cluster_state([0, 0, 0, 0])
    policy = make_policy(name)
    with pytest.raises(RuntimeError, match=r"was not reset for this run: call policy\.reset"):
        policy.decide(sim, request((*HOT, 500)))
    policy.reset(sim)
    policy.decide(sim, request((*HOT, 501), index=1))


def test_shadow_takes_true_or_false_only() -> None:
    """helper-77's audit: make_policy("btb", shadow="no") ran shadow mode (bool("no"))."""
    from baselines import make_policy

    assert make_policy("btb", shadow=False).shadow is False
    assert make_policy("btb", shadow=1).shadow is True
    for value in ("no", 0.5, None):
        with pytest.raises(ValueError, match=r"^btb\.shadow must be true or false, got "):
            make_policy("btb", shadow=value)
