"""Whole runs on small Bursted-ART synthetic windows (54 requests: two 24-request
bursts sharing a 32-block prefix within 1 s, and 6 decoys) under the baseline
policies: invariants checked at every decision point and after the run,
causality, determinism and the run summary."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest
from simkit import (
    BLOCK_BYTES,
    SMALL_PREFIX_BLOCKS,
    Checked,
    Prompts,
    Script,
    check_causal,
    check_nodes,
    check_run,
    names,
    records_equal,
    run_script,
    small_window,
    tight_h100_cluster,
    toy_cluster,
)

from baselines import make_policy
from envs.sim import SimConfig, Simulator, setup_cluster

POLICIES = ["least_load", "cache_aware", "btb", "btb_pending"]


def _policy(name: str):  # type: ignore[no-untyped-def]
    if name in ("btb", "btb_pending"):
        return make_policy(name, y_tokens=SMALL_PREFIX_BLOCKS * 256)
    return make_policy(name)


def _run(
    policy: str,
    config: SimConfig | None = None,
    seed: int = 7,
    cluster=None,  # type: ignore[no-untyped-def]
    window_seed: int = 1,
) -> Simulator:
    sim = Simulator(
        cluster or tight_h100_cluster(),
        small_window(window_seed),
        config or SimConfig(),
        rng=np.random.default_rng(seed),
    )
    policy_obj = _policy(policy)
    policy_obj.reset(sim)
    checked = Checked(policy_obj)
    for node in sim.nodes:  # after every eviction pass HBM is within the headroom
        node.cache.evict_to = _checked_evict(node.cache.evict_to, node.cache)  # type: ignore[method-assign]
    sim.run(checked)
    assert checked.decisions == len(sim.requests)
    check_run(sim)
    return sim


def _checked_evict(evict_to, cache):  # type: ignore[no-untyped-def]
    def wrapped(capacity_blocks: int) -> int:
        moved = evict_to(capacity_blocks)
        assert cache.hbm_blocks <= capacity_blocks
        return moved

    return wrapped


@pytest.mark.parametrize("copy_model", ["reference", "contention"])
@pytest.mark.parametrize("policy", POLICIES)
def test_invariants_and_causality_on_a_synthetic_window(policy: str, copy_model: str) -> None:
    sim = _run(policy, SimConfig(copy_model=copy_model))
    assert check_causal(sim) == []
    # the window exercises what it should: reuse, and eviction on these small nodes
    assert sim.records.summary["hbm_hit_rate"] > 0.3
    assert sum(n.cache.evicted_hbm_blocks for n in sim.nodes) > 0
    if policy.startswith("btb"):
        assert sim.records.summary["warm_copies_landed"] > 0


def test_invariants_with_bounded_ram_disk_and_every_realism_option() -> None:
    block_bytes = 256 * 327_680
    config = SimConfig(
        host_ram_bytes=40 * block_bytes,
        disk_tier=True,
        attention_flops=True,
        transfer_latency_s=5e-6,
        chunked_prefill_tokens=2048,
        copy_model="contention",
    )
    sim = _run("btb", config)
    assert check_causal(sim) == []
    # RAM overflowed onto disk somewhere
    assert sum(node.cache.blocks_in[2] for node in sim.nodes) > 0


def test_invariants_hold_between_decisions_when_driven_step_by_step() -> None:
    sim = Simulator(
        tight_h100_cluster(), small_window(2), SimConfig(), rng=np.random.default_rng(0)
    )
    policy = _policy("btb")
    policy.reset(sim)
    gen = sim.decisions()
    steps = 0
    try:
        request = next(gen)
        while True:
            check_nodes(sim)
            steps += 1
            request = gen.send(policy.decide(sim, request))
    except StopIteration:
        pass
    assert steps == len(sim.requests)
    check_run(sim)
    assert check_causal(sim) == []


def test_reference_behaviour_shows_up_on_a_window() -> None:
    causal = _run("btb", SimConfig(causal_kv=True))
    reference = _run("btb", SimConfig(causal_kv=False))
    problems = check_causal(reference)
    assert problems, "BTB under causal_kv=False should copy KV before it is computed"
    assert check_causal(reference, computed_at="admit_s") == []
    # reusing KV before it exists makes the reference run look faster
    assert reference.records.summary["ttft_mean_s"] < causal.records.summary["ttft_mean_s"]


@pytest.mark.parametrize("policy", POLICIES)
def test_same_seed_gives_identical_records(policy: str) -> None:
    config = SimConfig(copy_model="contention")
    a = _run(policy, config, seed=11)
    b = _run(policy, config, seed=11)
    records_equal(a.records, b.records)
    assert [(c.src, c.dst, c.key, c.start_s, c.land_s) for c in a.copies] == [
        (c.src, c.dst, c.key, c.start_s, c.land_s) for c in b.copies
    ]
    assert a.records.summary == b.records.summary


def test_least_load_breaks_ties_with_the_injected_rng() -> None:
    # on a fresh window every arrival at an idle cluster is a tie
    runs = [_run("least_load", seed=s, cluster=setup_cluster("70b_h100x4")) for s in (1, 2)]
    assert runs[0].records.node.tolist() != runs[1].records.node.tolist()


def test_two_simulators_interleaved_do_not_share_state() -> None:
    alone = [_run(p, seed=3) for p in ("cache_aware", "btb")]
    sims = [
        Simulator(tight_h100_cluster(), small_window(1), SimConfig(), rng=np.random.default_rng(3))
        for _ in range(2)
    ]
    policies = [_policy("cache_aware"), _policy("btb")]
    for policy, sim in zip(policies, sims, strict=True):
        policy.reset(sim)  # as run() does
    gens = [s.decisions() for s in sims]
    pending = [next(g) for g in gens]
    live = [True, True]
    while any(live):
        for i in range(2):
            if live[i]:
                try:
                    pending[i] = gens[i].send(policies[i].decide(sims[i], pending[i]))
                except StopIteration:
                    live[i] = False
    for sim, reference in zip(sims, alone):
        records_equal(sim.records, reference.records)


SUMMARY_KEYS = {
    "requests",
    "completed",
    "ttft_mean_s",
    "ttft_p50_s",
    "ttft_p90_s",
    "ttft_p95_s",
    "ttft_p99_s",
    "e2e_mean_s",
    "queue_mean_s",
    "throughput_rps",
    "utilisation_mean",
    "request_hit_rate",
    "token_hit_rate",
    "byte_hit_rate",
    "hbm_hit_rate",
    "ram_hit_rate",
    "disk_hit_rate",
    "warm_copies",
    "warm_bytes",
    "warm_hit_rate",
    "warm_byte_hit_rate",
    "warm_amplification",
    "displaced_by_copies_blocks",
    "rdma_busy_s",
}


@pytest.mark.parametrize("policy", ["cache_aware", "btb"])
def test_summary_is_complete_and_consistent(policy: str) -> None:
    sim = _run(policy, SimConfig(host_ram_bytes=8 * 256 * 327_680, disk_tier=True))
    rec = sim.records
    s = rec.summary
    assert set(s) >= SUMMARY_KEYS
    n = len(sim.requests)
    assert s["requests"] == s["completed"] == n
    ttft = rec.ttft_s
    assert s["ttft_mean_s"] == pytest.approx(float(np.mean(ttft)), rel=1e-12)
    assert s["ttft_p50_s"] == pytest.approx(float(np.median(ttft)), rel=1e-12)
    ordered = [s[k] for k in ("ttft_p50_s", "ttft_p90_s", "ttft_p95_s", "ttft_p99_s", "ttft_max_s")]
    assert ordered == sorted(ordered) and ordered[-1] == float(ttft.max())
    assert s["queue_mean_s"] == pytest.approx(float(np.mean(rec.admit_s - rec.arrival_s)))
    assert s["e2e_mean_s"] >= s["ttft_mean_s"] > 0
    makespan = float(rec.finish_s.max() - rec.arrival_s.min())
    assert s["makespan_s"] == pytest.approx(makespan, rel=1e-12)
    assert s["throughput_rps"] == pytest.approx(n / makespan, rel=1e-12)
    for key in (
        "request_hit_rate",
        "token_hit_rate",
        "byte_hit_rate",
        "hbm_hit_rate",
        "ram_hit_rate",
        "disk_hit_rate",
        "hbm_request_hit_rate",
        "warm_hit_rate",
        "warm_byte_hit_rate",
        "warm_used_any_rate",
        "warm_amplification",
        "utilisation_mean",
    ):
        assert 0.0 <= s[key] <= 1.0, key
    assert all(0.0 <= u <= 1.0 for u in s["utilisation_per_node"])
    total_in = sum(r.input_tokens for r in sim.requests)
    hits = rec.hit_hbm_tokens + rec.hit_ram_tokens + rec.hit_disk_tokens
    assert s["token_hit_rate"] == pytest.approx(hits.sum() / total_in, rel=1e-12)
    assert s["token_hit_rate"] == pytest.approx(
        s["hbm_hit_rate"] + s["ram_hit_rate"] + s["disk_hit_rate"], rel=1e-12
    )
    assert s["request_hit_rate"] == pytest.approx(float(np.mean(hits > 0)), rel=1e-12)
    assert s["prefill_tokens"] == int(rec.prefill_tokens.sum()) == total_in - int(hits.sum())
    landed = [c for c in sim.copies if c.land_s >= 0]
    assert s["warm_copies"] == len(sim.copies)
    assert s["warm_copies_landed"] == len(landed)
    assert s["warm_bytes"] == pytest.approx(sum(c.bytes for c in landed), rel=1e-12)
    assert s["warm_hit_rate"] <= s["warm_used_any_rate"]
    assert s["warm_byte_hit_rate"] <= 1.0 - s["warm_amplification"] + 1e-12
    assert s["byte_hit_rate"] == s["token_hit_rate"]
    assert s["warm_refused"] == sim.warm_refused
    assert s["rdma_busy_s"] >= 0.0 and s["copy_busy_s"] >= 0.0
    if policy == "btb":
        assert s["warm_copies"] > 0 and s["rdma_busy_s"] > 0
    else:
        assert s["warm_copies"] == 0 and s["rdma_busy_s"] == 0.0
    assert not math.isnan(s["utilisation_mean"])


def test_records_as_dict_round_trips_the_fields() -> None:
    p = Prompts()
    p.add(0.0, names("P", 2))
    p.add(0.5, names("P", 3))
    sim, _ = run_script(toy_cluster(), p, [0, 0])
    d = sim.records.as_dict()
    assert d["node"] == [0, 0]
    assert d["hit_hbm_tokens"] == [0, 32]
    assert d["ttft_s"] == pytest.approx(sim.records.ttft_s.tolist())
    assert len({len(v) for v in d.values()}) == 1


def test_records_are_built_on_first_read_after_the_run_pickled_or_not() -> None:
    import pickle

    p = Prompts()
    p.add(0.0, names("P", 2))
    p.add(0.5, names("P", 3))
    sim = Simulator(toy_cluster(), p.workload())
    records = sim.run(Script([0, 1]))  # (run_script checks the run: it reads them)
    assert records._ending is not None  # nothing read yet: nothing built
    # what happens after the run does not reach its summary, built later
    assert sim.pin(0, p.blocks(names("P", 2))) == "ok"
    copied = pickle.loads(pickle.dumps(records))  # carries what the build needs
    for rec in (records, copied):
        assert rec.summary["completed"] == 2
        assert rec.summary["pins"] == 0
        assert rec._ending is None
        assert rec.node.tolist() == [0, 1]
        assert isinstance(rec.first_token_s, np.ndarray)
        assert rec.ttft_s.tolist() == (rec.first_token_s - rec.arrival_s).tolist()
        assert rec.hit_hbm_tokens.tolist() == [0, 0]  # the second went to the other node
    records_equal(records, copied)
    with pytest.raises(AttributeError, match="no attribute 'nonesuch'"):
        records.nonesuch  # noqa: B018


def test_warm_bytes_count_only_landed_block_bytes() -> None:
    p = Prompts()
    p.add(0.0, names("P", 4))
    p.add(1.0, ["y"])
    prefix = p.blocks(names("P", 4))
    acts = {1: [lambda s: s.warm(0, 1, prefix), lambda s: s.warm(0, 2, prefix[:2])]}
    sim, _ = run_script(toy_cluster(3), p, [0, 0], acts)
    assert sim.records.summary["warm_bytes"] == 6 * BLOCK_BYTES


def _two_overlapping_runs() -> None:
    p = Prompts()
    for i in range(3):
        p.add(0.1 * i, names("P", 2))
    gens = [Simulator(toy_cluster(), p.workload()).decisions() for _ in range(2)]
    for gen in gens:
        next(gen)
    for gen in gens:  # the first to start also finishes first
        with pytest.raises(StopIteration):
            while True:
                gen.send(0)


def test_a_run_leaves_the_garbage_collector_as_it_found_it() -> None:
    gc.set_threshold(700, 10, 10)  # the conftest fixture restores the caller's setting
    p = Prompts()
    p.add(0.0, names("P", 2))
    run_script(toy_cluster(), p, [0])
    assert gc.get_threshold() == (700, 10, 10)


def test_overlapping_runs_leave_the_garbage_collector_as_they_found_it() -> None:
    gc.set_threshold(700, 10, 10)
    _two_overlapping_runs()
    assert gc.get_threshold() == (700, 10, 10)


def test_parts_of_the_wrong_kind_are_named_before_they_fail_deep() -> None:
    from envs.sim import ClusterSpec
    from envs.sim.request import Request, Workload

    window = Workload("w", 256, [Request(0, "a", 0.0, 300, 1, (1, 2))])
    cluster = setup_cluster("70b_h100x4")
    cases = [
        (("70b_h100x4", window), r"^Simulator: cluster must be a ClusterSpec, got '70b_h100x4'"),
        (
            (cluster, window, {"causal_kv": False}),
            r"^Simulator: config must be a SimConfig or None",
        ),
        ((cluster, window, None, 5), r"^Simulator: rng must be a Generator or None, got 5"),
        ((cluster, [window]), r"^Simulator: workload must be a Workload"),
    ]
    for args, message in cases:
        with pytest.raises(TypeError, match=message):
            Simulator(*args)
    with pytest.raises(TypeError, match=r"^cluster\.nodes\[0\] must be a NodeSpec, got '1xH100'"):
        ClusterSpec(cluster.model, ("1xH100",))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^cluster\.model must be a ModelSpec, got 'qwen3-8b'"):
        ClusterSpec("qwen3-8b", cluster.nodes)  # type: ignore[arg-type]


@pytest.mark.parametrize("answer", [True, np.bool_(False), np.array(True)])
def test_a_policy_answering_a_bool_is_refused_not_sent_to_node_1(answer: object) -> None:
    from envs.sim.request import Request, Workload

    window = Workload("w", 256, [Request(0, "a", 0.0, 300, 1, (1, 2))])
    sim = Simulator(setup_cluster("70b_h100x4"), window)
    decisions = sim.decisions()
    next(decisions)
    with pytest.raises(ValueError, match=r"^policy must answer with a node index, got"):
        decisions.send(answer)


def test_bad_values_from_python_name_their_field() -> None:
    """They failed deep inside: an AttributeError in the cache, numpy's OverflowError
    and 'expected non-negative integer'."""
    from envs.sim.request import Request, Workload
    from envs.workloads.registry import windows

    window = Workload("w", 256, [Request(0, "a", 0.0, 300, 1, (1, 2))])
    sim = Simulator(setup_cluster("70b_h100x4"), window)
    with pytest.raises(ValueError, match=r"^evict: keep_blocks must be an integer >= 0, got -1$"):
        sim.evict(0, (1, 2), keep_blocks=-1)
    with pytest.raises(
        ValueError,
        match=r"^workload 'bursted_synthetic': BurstedSyntheticConfig\.first_burst_s must be "
        "finite",
    ):
        next(windows("bursted_synthetic", first_burst_s=float("nan")))
    with pytest.raises(ValueError, match=r"^seed must be an integer >= 0, got -1$"):
        next(windows("bursted_synthetic", seed=-1))
