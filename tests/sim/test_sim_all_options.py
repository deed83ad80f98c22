"""Every simulator option of the cache actions, tenancy, stale view and faults at
once, under test_sim_fuzz's chaos policy (every action at random) and the baselines.

Each case draws a cluster of three toy nodes, a window of requests sharing
prefixes (two tenants), and SimConfig settings: faults (node losses by schedule
and rate, failed and slow copies, NICs down), a stale view, model versions and
upgrades, pins, host moves, replica TTLs, reclaim orders and speculation. The
invariants: every request is served exactly once with one first token, KV stays
within budget at every decision and at the end, KV never serves another tenant's
or version's request, causality holds where no node is lost, the stale view
converges to the true cache, and a rerun gives the same records and summary.
BTB_FUZZ_CASES scales the number of cases (as for test_sim_fuzz.py).
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import pytest
from simkit import (
    TOY_MODEL,
    Prompts,
    check_causal,
    check_run,
    records_equal,
    toy_gpu,
)
from test_sim_cache import cached_tiers
from test_sim_fuzz import Chaos, check_kv_keys

from baselines.policy import POLICIES, make_policy
from envs.sim import ClusterSpec, NodeSpec, SimConfig, Simulator
from envs.sim.request import Workload
from envs.sim.transfers import FAILED

N_NODES = 3
CASES = int(os.environ.get("BTB_FUZZ_CASES", "40")) * 3


def _case(seed: int) -> tuple[dict[str, Any], str, tuple[int, ...], Workload]:
    r = np.random.default_rng(seed)

    def pick(*values: Any) -> Any:
        return values[int(r.integers(len(values)))]

    config: dict[str, Any] = dict(
        causal_kv=bool(r.random() < 0.7),
        copy_model=pick("reference", "contention"),
        max_batch=pick(1, 2, 256),
        host_ram_bytes=pick(math.inf, 0.0, 2 * 16384.0, 5 * 16384.0),
        disk_tier=bool(r.random() < 0.5),
        transfer_latency_s=pick(0.0, 1e-3),
        chunked_prefill_tokens=pick(0, 16, 40),
        router_view_delay_s=pick(0.0, 0.01, 0.03),
        fault_node_loss_rate_per_s=pick(0.0, 0.0, 5.0, 40.0),
        fault_node_loss_s=(pick(0.0, 0.02, 0.05, 9.0, 9.0),),
        fault_node_loss_nodes=(int(r.integers(N_NODES)),),
        fault_node_down_s=pick(0.01, 0.05, 0.2, math.inf),
        fault_copy_fail_prob=pick(0.0, 0.5),
        fault_copy_slow_prob=pick(0.0, 0.5),
        fault_copy_slowdown=pick(1.0, 3.0),
        fault_seed=int(r.integers(4)),
        pin_budget_fraction=pick(0.0, 0.25, 0.9),
        replica_ttl_s=pick(math.inf, 0.02, 0.05),
        reclaim_order=pick("lru", "replicas_first"),
        speculative_chunk_tokens=pick(16, 40, 2048),
        upgrade_downtime_s=pick(0.0, 0.02),
        decode_overshoot=bool(r.random() < 0.3),
        lru_unit=pick("run", "block"),
    )
    if config["host_ram_bytes"] == math.inf:  # (the pair is refused: that disk is never used)
        config["disk_tier"] = False
    tenancy = int(r.integers(4))
    if tenancy == 1:
        config["model_versions"] = ("v1", "v2", "v1")
    elif tenancy == 2:
        config["upgrade_at_s"] = tuple(pick(0.0, 0.03, 0.06, 0.1) for _ in range(N_NODES))
    elif tenancy == 3:
        config.update(upgrade_at_s=(0.0, math.inf, 0.05), model_versions=("v2", "v1", "v1"))
    if r.random() < 0.5:
        config.update(
            fault_nic_down_s=(0.02, 0.1), fault_nic_down_nodes=(1, 2), fault_nic_down_for_s=0.03
        )
    policy = pick(*(["chaos"] * 3 + sorted(POLICIES)))
    budgets = tuple(pick(192, 256, 512) for _ in range(N_NODES))
    prompts = Prompts()
    for j in range(int(r.integers(1, 22))):
        stem, shared, own = int(r.integers(3)), int(r.integers(1, 7)), int(r.integers(0, 3))
        raw = [f"s{stem}-{i}" for i in range(shared)] + [f"own{j}-{i}" for i in range(own)]
        prompts.add(
            float(r.uniform(0, 0.3)),
            raw,
            input_tokens=max(len(raw) * 16 - int(r.integers(16)), 1),
            output_tokens=int(r.integers(1, 24)),
            tenant=pick("", "t1"),
        )
    return config, policy, budgets, prompts.workload()


def _run(
    config: dict[str, Any],
    policy_name: str,
    budgets: tuple[int, ...],
    workload: Workload,
    seed: int,
    core: str | None = None,
) -> Simulator:
    cluster = ClusterSpec(TOY_MODEL, tuple(NodeSpec(toy_gpu(b), 1) for b in budgets))
    sim = Simulator(cluster, workload, SimConfig(**config), np.random.default_rng(seed), core=core)
    policy = Chaos() if policy_name == "chaos" else make_policy(policy_name)
    policy.run(sim)
    return sim


@pytest.mark.parametrize("seed", range(CASES))
def test_every_option_at_once_keeps_every_invariant(seed: int) -> None:
    config, policy, budgets, workload = _case(seed)
    sim = _run(config, policy, budgets, workload, seed)
    check_run(sim)
    assert sorted(r.index for r in sim.first_token_log) == list(range(len(workload.requests)))
    no_loss = not config["fault_node_loss_rate_per_s"] and config["fault_node_loss_s"][0] > 1
    if no_loss:  # a lost node re-runs requests, which causality does not allow for
        assert check_kv_keys(sim) == []
        if config["causal_kv"]:
            failed = {f"copy {c.id} " for c in sim.copies if c.state == FAILED}
            problems = [p for p in check_causal(sim) if not any(p.startswith(f) for f in failed)]
            assert problems == []
    if sim._views is not None:  # the stale view converges to the true cache
        sim._views.sync(math.inf)
        for node in sim.nodes:
            assert cached_tiers(node.view) == cached_tiers(node.cache)
            assert node.view.pinned_blocks == node.cache.pinned_blocks
    again = _run(config, policy, budgets, workload, seed)
    records_equal(sim.records, again.records)
    assert repr(sim.records.summary) == repr(again.records.summary)
