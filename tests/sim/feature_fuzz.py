"""Random runs under the options no other simulator has: node losses and returns,
NIC outages, failed and slow copies, rolling upgrades and model versions, RDMA
contention and transfer latency, host RAM and disk tiers, nodes of two speeds,
tenants, causal KV on or off, a stale router view.

Each case draws a small cluster (toy nodes of one or two speeds, or two to four
nodes of a published setup with a small bursted window), a short workload
(hand-built prompts of two tenants sharing stems, or the project's own
generator), valid settings of those options, and a router: a baseline
(btb, btb_pending, cache_aware, least_load, eft, eft_pull, oracle_warm) or
``btb/RouteWarm-v0`` stepped with random actions. It then checks:

- every request served exactly once (one first token each; a restarted one too),
  and none finished on a node lost during its service without a rerun;
- at every event of the reference core, no node reserves more KV than its
  budget, runs more sequences than its batch, caches more HBM blocks than its
  capacity or more host-RAM blocks than its RAM holds; a down node holds no KV;
- each TTFT at least its floor (``envs.sim.floor.ttft_floor_s``);
- the reference (pure-Python) and compiled cores give identical records and
  summaries;
- a rerun under the same seed gives identical records.

``python tests/sim/feature_fuzz.py FIRST N`` runs cases FIRST..FIRST+N-1 and prints
the ones that fail; test_sim_feature_fuzz.py runs a few in the suite.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from simkit import TOY_MODEL, Prompts, check_causal, check_run, records_equal, toy_gpu
from test_sim_fuzz import Chaos, check_kv_keys

from baselines.policy import make_policy
from envs.sim import ClusterSpec, GpuSpec, NodeSpec, SimConfig, Simulator, native, setup_cluster
from envs.sim.cache import PrefixCache
from envs.sim.floor import ttft_floor_s
from envs.sim.request import Workload
from envs.sim.simulator import CompiledSimulator
from envs.sim.transfers import ENDED, FAILED, LANDED

BIG = os.environ.get("FUZZ_BIG", "") not in ("", "0")
"""FUZZ_BIG=1 (the script): only published-setup cases, windows of up to 3 bursts of 40."""
POLICIES = ("btb", "btb_pending", "cache_aware", "least_load", "eft", "eft_pull", "oracle_warm")
ROUTERS = (*POLICIES, "env_random", "env_masked", "chaos")

try:
    from envs.sim._native import cache as _compiled_cache  # type: ignore[attr-defined]
except ImportError:
    _compiled_cache = None


def _pick(r: np.random.Generator, *values: Any) -> Any:
    return values[int(r.integers(len(values)))]


def _toy_cluster(r: np.random.Generator) -> ClusterSpec:
    """1-4 toy nodes; at times of two speeds (the second kind twice the FLOP/s and
    HBM bandwidth) and of two KV budgets."""
    n = int(r.integers(1, 5))
    two_speeds = r.random() < 0.5
    budgets = [int(_pick(r, 64, 96, 160, 256, 512)) for _ in range(2)]
    nodes = []
    for i in range(n):
        fast = two_speeds and i % 2 == 1
        figures = {"flops": 8e12, "hbm_bw": 2.5e12} if fast else {}
        nodes.append(NodeSpec(toy_gpu(budgets[i % 2] if two_speeds else budgets[0], **figures), 1))
    return ClusterSpec(TOY_MODEL, tuple(nodes))


def _toy_workload(r: np.random.Generator, most_tokens: int) -> Workload:
    p = Prompts()
    horizon = float(_pick(r, 0.05, 0.3, 1.0))
    most_blocks = max(1, min(8, (most_tokens - 2) // 16))
    for j in range(int(r.integers(1, 31))):
        stem, shared, own = int(r.integers(3)), int(r.integers(1, 7)), int(r.integers(0, 3))
        raw = [f"s{stem}-{i}" for i in range(shared)] + [f"own{j}-{i}" for i in range(own)]
        raw = raw[:most_blocks]
        tokens = max(len(raw) * 16 - int(r.integers(16)), 1)
        output = max(1, min(int(r.integers(1, 24)), most_tokens - tokens))
        arrival = 0.0 if r.random() < 0.15 else float(r.uniform(0, horizon))
        p.add(arrival, raw, input_tokens=tokens, output_tokens=output, tenant=_pick(r, "", "t1"))
    return p.workload()


def _real_case(r: np.random.Generator, big: bool) -> tuple[ClusterSpec, Workload]:
    """2-4 nodes of llama-3.3-70b on 4xH100, at times with half of them on a GPU of
    twice the speed, and a small bursted window (tens of requests)."""
    from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

    base = setup_cluster("70b_h100x4")
    n = int(r.integers(2, 5))
    node = base.nodes[0]
    nodes = [node] * n
    if r.random() < 0.5:
        g = node.gpu
        fast = GpuSpec(
            "H100-fast", 2 * g.flops, 2 * g.hbm_bw, g.hbm_bytes, g.pcie_bw, g.rdma_bw, g.nvme_bw
        )
        nodes = [NodeSpec(fast, node.n_gpus) if i % 2 else node for i in range(n)]
    config = BurstedSyntheticConfig(
        n_bursts=int(r.integers(1, 3 + big)),
        burst_requests=int(r.integers(4, 16 + 24 * big)),
        prefix_tokens=int(_pick(r, 2048, 8192)),
        suffix_tokens=256,
        output_tokens=int(_pick(r, 4, 32)),
        first_burst_s=2.0,
        burst_interval_s=float(_pick(r, 0.5, 2.0)),
        start_jitter_s=0.5,
        burst_window_s=float(_pick(r, 0.2, 1.0)),
        n_decoys=int(r.integers(0, 4)),
        decoy_lead_s=1.5,
    )
    return ClusterSpec(base.model, tuple(nodes)), synthetic_window(
        config, window=0, seed=int(r.integers(1000))
    )


def _config(r: np.random.Generator, n: int, arrivals: list[float]) -> dict[str, Any]:
    """Valid settings of the options under test, times scaled to the window; a
    scheduled time is at times an arrival's or another scheduled event's instant."""
    horizon = max(arrivals) + 1e-3
    instants = [0.0, *arrivals]

    def at() -> float:
        t = float(_pick(r, *instants)) if r.random() < 0.4 else float(r.uniform(0, horizon))
        instants.append(t)
        return t

    c: dict[str, Any] = {
        "causal_kv": bool(r.random() < 0.7),
        "copy_model": _pick(r, "reference", "contention"),
        "transfer_latency_s": float(_pick(r, 0.0, 0.0, 1e-5, 1e-3)),
        "max_batch": int(_pick(r, 2, 256, 256)),
        "chunked_prefill_tokens": int(_pick(r, 0, 0, 0, 32)),
        "attention_flops": bool(r.random() < 0.2),
    }
    for name, values in (  # the accounting settings, at times away from the KV model's
        ("hbm_hit_load", (True, False)),
        ("one_token_decode_step", (True, False)),
        ("decode_overshoot", (True, False)),
        ("cache_capacity", ("headroom", "budget")),
        ("lru_unit", ("run", "block")),
        ("reclaim_order", ("lru", "replicas_first")),
        ("replica_ttl_s", (0.01, horizon / 5)),
        ("max_batch", (1,)),
    ):
        if r.random() < 0.1:
            c[name] = _pick(r, *values)
    if r.random() < 0.5:
        c["host_ram_bytes"] = float(_pick(r, 0.0, 2 * 16384.0, 5 * 16384.0, 1e9))
        c["disk_tier"] = bool(r.random() < 0.5)
    if r.random() < 0.2:
        c["router_view_delay_s"] = float(_pick(r, 0.01, horizon / 10))
    if r.random() < 0.5:  # node losses (scheduled and/or random)
        k = int(r.integers(1, 3))
        c["fault_node_loss_s"] = tuple(at() for _ in range(k))
        c["fault_node_loss_nodes"] = tuple(int(r.integers(n)) for _ in range(k))
        c["fault_node_down_s"] = float(_pick(r, horizon / 20, horizon / 4, math.inf))
    if r.random() < 0.2:
        c["fault_node_loss_rate_per_s"] = float(_pick(r, 1.0, 10.0)) / horizon
        c["fault_node_down_s"] = float(_pick(r, horizon / 20, horizon / 4, math.inf))
    if r.random() < 0.4:
        c["fault_copy_fail_prob"] = float(_pick(r, 0.0, 0.3, 1.0))
        c["fault_copy_slow_prob"] = float(_pick(r, 0.3, 1.0))
        c["fault_copy_slowdown"] = float(_pick(r, 1.0, 5.0))
    if r.random() < 0.3:
        c["fault_nic_down_s"] = (at(), at())
        c["fault_nic_down_nodes"] = (int(r.integers(n)), int(r.integers(n)))
        c["fault_nic_down_for_s"] = float(_pick(r, horizon / 20, horizon / 3))
    c["fault_seed"] = int(r.integers(3))
    roll = r.random()
    if roll < 0.25:  # a rolling upgrade (or restart)
        c["upgrade_at_s"] = tuple(float(_pick(r, 0.0, at(), at(), math.inf)) for _ in range(n))
        c["upgrade_downtime_s"] = float(_pick(r, 0.0, horizon / 20))
        c["upgrade_version"] = _pick(r, "v2", "v1")
    elif roll < 0.4 and n > 1:
        c["model_versions"] = tuple(_pick(r, "v1", "v2") for _ in range(n))
        if r.random() < 0.5:
            c["upgrade_at_s"] = tuple(float(_pick(r, at(), math.inf)) for _ in range(n))
    if not c.get("fault_node_loss_s") and not c.get("fault_node_loss_rate_per_s"):
        c.pop("fault_node_down_s", None)
    if not (c.get("fault_copy_slow_prob") or 0) and "fault_copy_slowdown" in c:
        c.pop("fault_copy_slowdown")
    if not any(math.isfinite(t) for t in c.get("upgrade_at_s", ())):
        c.pop("upgrade_at_s", None)
        c.pop("upgrade_downtime_s", None)
        c.pop("upgrade_version", None)
    if (
        not c.get("fault_node_loss_rate_per_s")
        and not c.get("fault_copy_fail_prob")
        and not (c.get("fault_copy_slow_prob"))
    ):
        c.pop("fault_seed")
    return c


Case = tuple[ClusterSpec, Workload, dict[str, Any], str]


def case(seed: int, big: bool = False) -> Case:
    """Case ``seed``; ``big``: only published-setup cases, of larger windows."""
    r = np.random.default_rng([seed, 177])
    if r.random() < (0.0 if big else 0.6):
        cluster = _toy_cluster(r)
        most = min(n.gpu.hbm_bytes - 1e9 for n in cluster.nodes) / 1024
        workload = _toy_workload(r, int(most))
    else:
        cluster, workload = _real_case(r, big)
    config = _config(r, len(cluster.nodes), [q.arrival_s for q in workload.requests])
    return cluster, workload, config, str(_pick(r, *ROUTERS))


# ------------------------------------------------------------------ the checks
def check_event(sim: Simulator) -> None:
    bt = sim.block_tokens
    for node in sim.nodes:
        assert 0 <= node.reserved_tokens <= node.budget_tokens, (node.index, node.reserved_tokens)
        assert 0 <= node.running <= sim.config.max_batch, (node.index, node.running)
        cache = node.cache
        assert cache.hbm_blocks <= node.cache_capacity_blocks(bt), (
            "hbm",
            node.index,
            cache.hbm_blocks,
            node.cache_capacity_blocks(bt),
            sim.now,
        )
        assert cache.blocks_in[1] <= cache.ram_capacity_blocks, ("ram", node.index, sim.now)
        if node.down:
            assert sum(cache.blocks_in) == 0 and node.running == 0, ("down", node.index, sim.now)


class Timeline:
    """Each node's states (down, NIC down, draining, loading weights) as the events
    of the reference core leave them: ``spans[(node, state)]`` is a list of
    [start, end) intervals."""

    STATES = ("down", "nic_down", "draining", "loading")

    def __init__(self, n_nodes: int) -> None:
        self.since: dict[tuple[int, str], float] = {}
        self.spans: dict[tuple[int, str], list[tuple[float, float]]] = {
            (j, s): [] for j in range(n_nodes) for s in self.STATES
        }

    def note(self, sim: Simulator) -> None:
        t = sim.now
        for node in sim.nodes:
            versions = sim.versions
            loading = versions is not None and versions.loading(node, t)
            states = (node.down, node.nic_down > 0, bool(node.draining), loading)
            for name, on in zip(self.STATES, states):
                key = (node.index, name)
                if on and key not in self.since:
                    self.since[key] = t
                elif not on and key in self.since:
                    self.spans[key].append((self.since.pop(key), t))

    def close(self) -> None:
        for key, start in self.since.items():
            self.spans[key].append((start, math.inf))
        self.since = {}

    def inside(self, node: int, state: str, t: float) -> bool:
        """Whether ``t`` lies strictly inside one of the node's spans of ``state``."""
        return any(a + 1e-12 < t < b - 1e-12 for a, b in self.spans[(node, state)])

    def starts_within(self, node: int, state: str, a: float, b: float) -> bool:
        return any(a + 1e-12 < s < b - 1e-12 for s, _ in self.spans[(node, state)])


def check_timeline(sim: Simulator, line: Timeline) -> None:
    """No admission to a node down, draining or loading its weights; no copy issued
    while its source or target is down or its NIC is; none landed across a loss or an
    outage of either."""
    rec = sim.records
    reruns = sim.totals().reruns
    states = ("down", "draining", "loading")
    for k in range(len(sim.requests)):
        services = [(int(rec.node[k]), float(rec.admit_s[k]))]
        if k in reruns:
            services.append((reruns[k][1], reruns[k][0]))
        if k not in reruns:  # served where it was admitted: no loss there in between
            node, admit = services[0]
            assert not line.starts_within(node, "down", admit, float(rec.finish_s[k])), k
        for node, admit in services:
            for state in states:
                assert not line.inside(node, state, admit), (k, node, admit, state)
    for c in sim.copies:
        for j in (c.src, c.dst):
            for state in ("down", "nic_down"):
                assert not line.inside(j, state, c.issued_s), (c.id, j, state, "issued")
                if c.state == LANDED:
                    assert not line.starts_within(j, state, c.issued_s, c.land_s), (c.id, j, state)
            assert not line.inside(j, "draining", c.issued_s), (c.id, j, "draining")


def check_counts(sim: Simulator, settings: dict[str, Any]) -> None:
    """Scheduled faults and upgrades timed before the last request's end count (and,
    for upgrades, leave the node on the new version); those after it change nothing."""
    end = float(np.max(sim.records.finish_s))
    summary = sim.records.summary

    def before(times: Any) -> int | None:
        times = [t for t in times if math.isfinite(t)]
        if any(abs(t - end) < 1e-9 for t in times):
            return None  # a tie with the end: either reading is defensible
        return sum(t < end for t in times)

    if not settings.get("fault_node_loss_rate_per_s"):
        n = before(settings.get("fault_node_loss_s", ()))
        if n is not None and "fault_node_losses" in summary:
            assert summary["fault_node_losses"] + summary["fault_node_losses_skipped"] == n
    n = before(settings.get("fault_nic_down_s", ()))
    if n is not None and "fault_nic_downs" in summary:
        assert summary["fault_nic_downs"] == n, (summary["fault_nic_downs"], n, end)
    upgrades = settings.get("upgrade_at_s", ())
    n = before(upgrades)
    if n is not None and upgrades:
        assert summary["upgrades_done"] == n, (summary["upgrades_done"], n, end)
        version = settings.get("upgrade_version", "v2")
        for j, t in enumerate(upgrades):
            if t < end:
                assert summary["model_versions"][j] == version, (j, summary["model_versions"])


def _watch(sim: Simulator) -> Timeline:
    """Check :func:`check_event` after every event handler of the reference core,
    and keep the nodes' timeline."""
    line = Timeline(sim.n_nodes)

    def wrap(obj: Any, name: str) -> None:
        inner = getattr(obj, name)

        def checked(*args: Any) -> Any:
            out = inner(*args)
            check_event(sim)
            line.note(sim)
            return out

        setattr(obj, name, checked)

    for name in ("_on_wake", "_land", "_on_flow", "_on_life"):
        wrap(sim, name)
    if sim._faults is not None:
        wrap(sim._faults, "on_event")
    if sim.versions is not None:
        wrap(sim.versions, "start_drain")
    sim._timeline = line  # type: ignore[attr-defined]
    return line


def _set_core(core: str) -> Callable[[], None]:
    """Make ``core`` the process's choice (as BTB_GYM_PURE_PYTHON would); returns the undo."""
    saved = native.CORE, native.PrefixCache
    if core == "python":
        native.CORE, native.PrefixCache = "python", PrefixCache
    else:
        native.CORE, native.PrefixCache = "compiled", _compiled_cache.PrefixCache

    def undo() -> None:
        native.CORE, native.PrefixCache = saved

    return undo


def run(c: Case, seed: int, core: str, watch: bool = False) -> Simulator:
    cluster, workload, settings, router = c
    config = SimConfig(**settings)
    undo = _set_core(core)
    try:
        if router.startswith("env_"):
            return _run_env(cluster, workload, config, seed, watch, router == "env_masked")
        sim = Simulator(cluster, workload, config, np.random.default_rng(seed), core=core)
        if watch:
            _watch(sim)
        (Chaos() if router == "chaos" else make_policy(router)).run(sim)
        return sim
    finally:
        undo()


def _run_env(
    cluster: ClusterSpec,
    workload: Workload,
    config: SimConfig,
    seed: int,
    watch: bool,
    masked: bool = False,
) -> Simulator:
    from envs.route_warm import RouteWarmEnv

    env = RouteWarmEnv(setup=cluster, windows=[workload], sim=config, seed=seed)
    env.reset(seed=seed)
    assert env.sim is not None
    if watch:
        _watch(env.sim)
    env.action_space.seed(seed)
    rng = np.random.default_rng(seed)
    done = False
    while not done:
        if masked:  # each part drawn among the choices its mask allows
            mask, action, at = env.action_masks(), [], 0
            for size in env.action_space.nvec:
                allowed = np.flatnonzero(mask[at : at + size])
                action.append(int(rng.choice(allowed)) if allowed.size else 0)
                at += size
        else:
            action = env.action_space.sample()
        _, _, terminated, truncated, _ = env.step(np.array(action))
        done = terminated or truncated
    sim = env.sim
    assert sim is not None and sim.done
    return sim


def check_case(seed: int, big: bool = False) -> None:
    c = case(seed, big)
    cluster, workload, settings, router = c
    reference = run(c, seed, "python", watch=True)
    check_run(reference)
    line = reference._timeline  # type: ignore[attr-defined]
    line.close()
    check_timeline(reference, line)
    n = len(workload.requests)
    assert sorted(r.index for r in reference.first_token_log) == list(range(n))
    summary = reference.records.summary
    assert summary["warm_copies"] == len(reference.copies)
    assert all(c.state in ENDED for c in reference.copies)
    reruns = reference.totals().reruns
    # (a request restarted twice counts twice, and keeps its last rerun)
    assert len(reruns) <= summary.get("fault_restarted_requests", 0)
    assert reference._faults is None or not reference._faults._kept
    for k, (admit, _) in reruns.items():  # the record is the first service's
        rec = reference.records
        assert rec.first_token_s[k] <= admit <= rec.finish_s[k], k
    check_counts(reference, settings)
    if router not in ("env_random", "chaos"):  # they skip down nodes (docs/faults.md)
        assert summary.get("fault_routed_to_down", 0) == 0
        assert summary["warm_refused"].get("node_down", 0) == 0, summary["warm_refused"]
    lost = reference.records.summary.get("fault_node_losses", 0)
    if not lost:  # (a lost node re-runs requests, which these checks do not allow for)
        assert check_kv_keys(reference) == []
        if settings["causal_kv"]:
            failed = {f"copy {c.id} " for c in reference.copies if c.state == FAILED}
            problems = [p for p in check_causal(reference) if not any(map(p.startswith, failed))]
            assert problems == []
    floor = ttft_floor_s(cluster, workload, SimConfig(**settings))
    ttft = np.asarray(reference.records.ttft_s)
    low = np.flatnonzero(ttft < floor * (1 - 1e-9) - 1e-12)
    assert low.size == 0 or router == "chaos", [
        (int(k), float(ttft[k]), float(floor[k])) for k in low
    ]
    if CompiledSimulator is not None:
        compiled = run(c, seed, "compiled")
        records_equal(reference.records, compiled.records)
        assert repr(reference.records.summary) == repr(compiled.records.summary)
    again = run(c, seed, "compiled" if CompiledSimulator is not None else "python")
    records_equal(reference.records, again.records)


def main(first: int, count: int) -> int:
    import time
    import traceback

    failed = 0
    t0 = time.time()
    for seed in range(first, first + count):
        try:
            check_case(seed, BIG)
        except Exception as error:  # report and go on
            failed += 1
            c = case(seed, BIG)
            print(f"seed {seed} router {c[3]} nodes {len(c[0].nodes)} requests "
                  f"{len(c[1].requests)} config {c[2]}")  # fmt: skip
            print("   ", type(error).__name__, str(error)[:400])
            if "-v" in sys.argv:
                traceback.print_exc()
    print(f"{count} cases, {failed} failed, {time.time() - t0:.0f} s")
    return failed


if __name__ == "__main__":
    sys.exit(1 if main(int(sys.argv[1]), int(sys.argv[2])) else 0)
