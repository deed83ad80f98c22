"""Both lower bounds (envs.sim.floor: ``floor`` per request, ``floor_capacity`` on the
mean) against runs on random small clusters, windows and settings: every registered
policy that does not speculate (the bounds' claim: docs/physics.md, "The capacity
floor"), a policy that warms, evicts, pins, demotes, promotes and routes at random,
and on the smallest windows every routing with and without copies of every other
request's prompt to every node, on both simulator cores. No request's TTFT may be
under its floor and no run's mean under the capacity bound, beyond rounding.

BTB_FUZZ_CASES scales the number of cases (as for test_sim_fuzz.py): the audit of
2026-12-06 ran 5,000 + 3,000 random cases (80,000 runs) and 3,000 smallest windows
(124,000 runs), none under either bound."""

from __future__ import annotations

import itertools
import math
import os
import warnings

import numpy as np
import pytest
from simkit import CORES, TOY_MODEL, Prompts, toy_gpu

from baselines.policy import POLICIES, Policy, make_policy
from envs.sim import ClusterSpec, NodeSpec, SimConfig, Simulator, setup_cluster
from envs.sim.config import SETUPS
from envs.sim.floor import floor_bounds
from envs.sim.request import Request, Workload
from envs.sim.timing import NodeCosts

CASES = int(os.environ.get("BTB_FUZZ_CASES", "40"))
SPECULATING = {"btb_speculative"}  # the bounds do not cover speculation (floor.py)
POLICY_NAMES = sorted(set(POLICIES) - SPECULATING)


class RandomActs(Policy):
    """Copies prefixes of any request (earlier or later: a copy of one not yet
    computed waits for it), evicts, pins, unpins, demotes and promotes at random, and
    routes at random, sometimes first and copying the new prompt from there."""

    name = "random_acts"

    def decide(self, sim: Simulator, request: Request) -> int | None:
        rng = sim.rng
        for _ in range(int(rng.integers(6))):
            other = sim.requests[int(rng.integers(len(sim.requests)))]
            blocks = other.blocks[: int(rng.integers(1, len(other.blocks) + 1))]
            src, dst = (int(v) for v in rng.integers(sim.n_nodes, size=2))
            if other.index < request.index and rng.random() < 0.6:
                src = int(sim.records.node[other.index])
            roll = rng.random()
            if roll < 0.6:
                sim.warm(src, dst, blocks)
            elif roll < 0.75:
                sim.evict(dst, blocks, keep_blocks=int(rng.integers(3)))
            else:
                getattr(sim, ("pin", "unpin", "demote", "promote")[int(rng.integers(4))])(
                    dst, blocks
                )
        node = int(rng.integers(sim.n_nodes))
        if rng.random() < 0.3:
            sim.route(node)
            for dst in range(sim.n_nodes):
                if rng.random() < 0.5:
                    sim.warm(node, dst, request.blocks[: int(rng.integers(1, 99))])
            return None
        return node


class Plan(Policy):
    """Routes by a fixed table; with ``copies`` 1 copies every other request's whole
    prompt from its node to every node at each decision, with 2 each of its prefixes."""

    name = "plan"

    def __init__(self, routes: tuple[int, ...], copies: int) -> None:
        self.routes, self.copies = routes, copies

    def decide(self, sim: Simulator, request: Request) -> int | None:
        sim.route(self.routes[request.index])
        for other in sim.requests if self.copies else ():
            src = self.routes[other.index]
            n = len(other.blocks)
            for depth in [n] if self.copies == 1 else range(1, n + 1):
                for dst in range(sim.n_nodes):
                    if other.index != request.index and dst != src:
                        sim.warm(src, dst, other.blocks[:depth])
        return None


def toy_node(rng: np.random.Generator) -> NodeSpec:
    """A toy node with a KV budget of 64 to 2,048 tokens, one or two GPUs, and at
    random quicker or slower FLOP/s, HBM (slower than the host link, even), host link,
    disk and RDMA."""
    figures = {"rdma_bw": float(rng.choice([2.048e6, 1e9, 1e12]))}
    for field, values in (
        ("flops", [1e12, 2e12, 8e12]),
        ("hbm_bw", [1024 / 0.4e-3, 1024 / 2e-3, 1e8]),
        ("pcie_bw", [1e9, 1e13]),
        ("nvme_bw", [1e9, 1e13]),
    ):
        if rng.random() < 0.3:
            figures[field] = float(rng.choice(values))
    budget = int(rng.choice([64, 128, 256, 512, 2048]))
    return NodeSpec(toy_gpu(budget, **figures), int(rng.choice([1, 1, 2])))


def random_cluster(rng: np.random.Generator) -> tuple[ClusterSpec, int]:
    """A toy cluster of 1-3 nodes of one kind or several (16-token blocks), or 1-4
    nodes of a published setup, one of them at times of twice the GPUs."""
    if rng.random() < 0.55:
        n = int(rng.integers(1, 4))
        same = rng.random() < 0.5
        nodes = (toy_node(rng),) * n if same else tuple(toy_node(rng) for _ in range(n))
        return ClusterSpec(TOY_MODEL, nodes), 16
    setup = setup_cluster(str(rng.choice(list(SETUPS))))
    nodes = setup.nodes[: int(rng.integers(1, 5))]
    if len(nodes) > 1 and rng.random() < 0.25 and nodes[0].n_gpus < 8:
        nodes = (NodeSpec(nodes[0].gpu, 2 * nodes[0].n_gpus), *nodes[1:])
    return ClusterSpec(setup.model, nodes), int(rng.choice([16, 64, 256]))


def random_config(rng: np.random.Generator, n_nodes: int) -> SimConfig:
    settings: dict = {
        "causal_kv": bool(rng.integers(2)),
        "copy_model": str(rng.choice(["reference", "contention"])),
        "max_batch": int(rng.choice([1, 2, 256])),
        "transfer_latency_s": float(rng.choice([0.0, 0.0, 1e-5, 1e-3])),
        "attention_flops": bool(rng.integers(2)),
        "chunked_prefill_tokens": int(rng.choice([0, 0, 16, 40, 512])),
        "copy_landing_check": bool(rng.random() < 0.8),
        "pin_budget_fraction": float(rng.choice([0.0, 0.25, 0.9])),
        "replica_ttl_s": float(rng.choice([math.inf, math.inf, 0.01])),
        "reclaim_order": str(rng.choice(["lru", "replicas_first"])),
    }
    if rng.random() < 0.4:  # host RAM (a few blocks, or plenty) and, at times, disk
        settings["host_ram_bytes"] = float(rng.choice([0.0, 32768.0, 131072.0, 1e12]))
        settings["disk_tier"] = bool(rng.integers(2))
    for field in ("hbm_hit_load", "one_token_decode_step", "decode_overshoot"):
        if rng.random() < 0.3:  # else as the KV model has it
            settings[field] = bool(rng.integers(2))
    for field, values in (
        ("cache_capacity", ["headroom", "budget"]),
        ("match_tiers", ["hbm", "hbm_ram"]),
        ("lru_unit", ["run", "block"]),
    ):
        if rng.random() < 0.3:
            settings[field] = str(rng.choice(values))
    if rng.random() < 0.2:
        settings["router_view_delay_s"] = float(rng.choice([1e-3, 0.05]))
    if rng.random() < 0.1:  # a rolling upgrade, or nodes of two model versions
        settings["upgrade_at_s"] = tuple(
            float(rng.choice([0.0, 0.01, math.inf])) for _ in range(n_nodes)
        )
    elif rng.random() < 0.1 and n_nodes > 1:
        settings["model_versions"] = tuple(str(rng.choice(["v1", "v2"])) for _ in range(n_nodes))
    return SimConfig(**settings)


def random_window(rng: np.random.Generator, block_tokens: int, most_tokens: int) -> Workload:
    """1-10 requests drawn from 1-3 prefix trees (some of no tree), at one instant,
    spread, in two or three waves or as a Poisson stream; last blocks full or not,
    some prompts longer than their blocks; at times of a second tenant."""
    p = Prompts(block_tokens)
    most_blocks = max(1, min(12, (most_tokens - 2) // block_tokens))
    stems = [int(rng.integers(1, most_blocks + 1)) for _ in range(int(rng.integers(1, 4)))]
    mode = str(rng.choice(["burst", "spread", "waves", "poisson"]))
    scale = float(rng.choice([1e-4, 1e-3, 0.01, 0.1, 1.0])) * block_tokens / 16
    t = 0.0
    for k in range(int(rng.integers(1, 11))):
        if mode == "burst":
            arrival = 0.0 if rng.random() < 0.8 else float(rng.uniform(0, scale))
        elif mode == "spread":
            arrival = float(rng.uniform(0, scale))
        elif mode == "poisson":
            t += float(rng.exponential(scale / 3))
            arrival = t
        else:
            arrival = float(rng.choice([0.0, scale / 2, scale]))
        raw: list[str] = []
        if rng.random() < 0.85:
            stem = int(rng.integers(len(stems)))
            raw = [f"s{stem}_{i}" for i in range(int(rng.integers(1, stems[stem] + 1)))]
        own = int(rng.integers(0, 3)) if raw else int(rng.integers(1, most_blocks + 1))
        raw = [*raw, *(f"own{k}_{i}" for i in range(own))][:most_blocks]
        tokens = max(1, len(raw) * block_tokens - int(rng.integers(0, block_tokens)))
        if rng.random() < 0.1:  # more tokens than its blocks hold
            tokens = min(tokens + int(rng.integers(1, 2 * block_tokens)), most_tokens - 2)
        output = max(1, min(int(rng.choice([1, 1, 2, 3, 8, 20])), most_tokens - tokens))
        tenant = "t1" if rng.random() < 0.1 else ""
        p.add(arrival, raw, input_tokens=tokens, output_tokens=output, tenant=tenant)
    return p.workload()


def random_case(seed: int) -> tuple[np.random.Generator, ClusterSpec, Workload, SimConfig]:
    rng = np.random.default_rng([seed, 142])
    cluster, block_tokens = random_cluster(rng)
    config = random_config(rng, len(cluster.nodes))
    budget = min(
        NodeCosts.under(config, node, cluster.model).budget_tokens for node in cluster.nodes
    )
    window = random_window(rng, block_tokens, min(budget, 40_000))
    return rng, cluster, window, config


def check_bounds(
    cluster: ClusterSpec, window: Workload, config: SimConfig, policy: Policy, core: str
) -> None:
    floor, bound = floor_bounds(cluster, window, config)
    sim = Simulator(cluster, window, config, np.random.default_rng(0), core=core)
    ttft = np.asarray(sim.run(policy).ttft_s, dtype=float)
    assert np.all(ttft >= floor - 1e-9 * np.maximum(floor, 1.0)), (policy.name, ttft - floor)
    assert float(ttft.mean()) >= bound * (1 - 1e-9), (policy.name, float(ttft.mean()), bound)


@pytest.mark.parametrize("core", CORES)
def test_no_policy_beats_either_bound_on_random_cases(core: str) -> None:
    # each case: the next registered policy in turn and the random one
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (settings that do nothing in a drawn case)
        for seed in range(4 * CASES):
            _, cluster, window, config = random_case(seed)
            name = POLICY_NAMES[seed % len(POLICY_NAMES)]
            for policy in (make_policy(name), RandomActs()):
                check_bounds(cluster, window, config, policy, core)


@pytest.mark.parametrize("core", CORES)
def test_no_routing_or_copying_beats_either_bound_on_the_smallest_windows(core: str) -> None:
    # 1-4 requests, every routing (at most 27 drawn) with no copies, each prompt
    # copied everywhere, or each of its prefixes copied everywhere
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed in range(CASES // 4):
            rng, cluster, window, config = random_case(10_000 + seed)
            window = Workload(
                "small", window.block_tokens, window.requests[: int(rng.integers(1, 5))]
            )
            routes = list(itertools.product(range(len(cluster.nodes)), repeat=len(window)))
            if len(routes) > 27:
                routes = [routes[k] for k in rng.choice(len(routes), 27, replace=False)]
            for route, copies in itertools.product(routes, range(3)):
                check_bounds(cluster, window, config, Plan(route, copies), core)
