"""Shared helpers for the simulator tests.

A *toy* cluster with round numbers makes hand calculations easy: one GPU a node,
a 1e9-parameter model with 1,024 KV bytes a token, 16-token blocks, and

    prefill 1 ms a token            RAM load 0.1 ms a token
    RDMA copy 0.5 ms a token        disk load 0.25 ms a token
    (8 ms a block)                  decode: 1 ms a step + 1.024 ns a KV token read

Hand-built workloads go through :class:`Prompts` (one shared ``BlockChainer``);
:class:`Script` is a policy that routes by a fixed table and runs warm / evict
actions at chosen decision points; :func:`check_run` and :func:`check_causal`
are the invariants every run must keep.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pytest

from envs.sim import (
    ClusterSpec,
    GpuSpec,
    ModelSpec,
    NodeSpec,
    SimConfig,
    Simulator,
    model_preset,
)
from envs.sim.request import BlockChainer, Request, Workload
from envs.sim.simulator import CompiledSimulator
from envs.sim.transfers import CANCELLED, FAILED
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

# ---------------------------------------------------------------- toy physics
CORES = [
    "python",
    pytest.param(
        "compiled",
        marks=pytest.mark.skipif(
            CompiledSimulator is None, reason="the compiled core is not built or not chosen"
        ),
    ),
]
"""``@pytest.mark.parametrize("core", CORES)``: a test on both simulator cores (the
compiled one skipped where it is not built, or ``BTB_GYM_PURE_PYTHON=1``)."""


def fuzz_config(**settings: Any) -> SimConfig:
    """A SimConfig of drawn settings, the disk tier off where host RAM is unbounded
    (the pair is refused: such a disk is never used)."""
    if settings.get("host_ram_bytes", math.inf) == math.inf:
        settings["disk_tier"] = False
    return SimConfig(**settings)


BT = 16
KV_BYTES = 1024
WEIGHT_BYTES = 1e9
PREFILL_S = 1e-3  # 2 x 1e9 / (4e12 x 0.5)
RAM_S = 1e-4  # 1024 / 10.24e6
DISK_S = 2.5e-4  # 1024 / 4.096e6
RDMA_S = 5e-4  # 1024 / 2.048e6
HBM_S = 1024 / 1.25e12
DECODE_STEP_S = 1e-3  # 1e9 / (1.25e12 x 0.8)
DECODE_KV_S = 1024 / 1e12  # 1024 / (1.25e12 x 0.8)
BLOCK_BYTES = BT * KV_BYTES
BLOCK_COPY_S = BT * RDMA_S  # 8 ms
RDMA_BW = 2.048e6

TOY_MODEL = ModelSpec("toy-1b", 1e9, 1e9, 1, 1, 1, 512, attn_dim=1000)


def toy_gpu(budget_tokens: int = 1024, **overrides: float) -> GpuSpec:
    """A GPU whose HBM holds the toy weights plus exactly ``budget_tokens`` of KV."""
    fields: dict[str, Any] = {
        "flops": 4e12,
        "hbm_bw": 1.25e12,
        "hbm_bytes": WEIGHT_BYTES + budget_tokens * KV_BYTES,
        "pcie_bw": 10.24e6,
        "rdma_bw": RDMA_BW,
        "nvme_bw": 4.096e6,
    }
    fields.update(overrides)
    return GpuSpec("toy", **fields)


def toy_cluster(n_nodes: int = 2, budget_tokens: int = 1024, **overrides: float) -> ClusterSpec:
    return ClusterSpec(TOY_MODEL, (NodeSpec(toy_gpu(budget_tokens, **overrides), 1),) * n_nodes)


def decode_s(steps: int, batch: int, context_tokens: int) -> float:
    """The decode-segment equation, written out for the toy node."""
    kv_read = steps * context_tokens + batch * steps * (steps - 1) / 2
    return DECODE_STEP_S * steps + DECODE_KV_S * kv_read


def names(stem: str, n: int, start: int = 0) -> list[str]:
    """Raw block hashes ``stem0 .. stem{n-1}`` for hand-built prompts."""
    return [f"{stem}{i}" for i in range(start, start + n)]


class Prompts:
    """Hand-chosen requests whose raw block hashes are chained by one BlockChainer."""

    def __init__(self, block_tokens: int = BT) -> None:
        self.block_tokens = block_tokens
        self.chainer = BlockChainer()
        self.requests: list[Request] = []

    def blocks(self, raw: Sequence[str], tenant: str = "") -> tuple[int, ...]:
        return self.chainer.chain(raw, namespace=tenant)

    def add(
        self,
        arrival_s: float,
        raw: Sequence[str],
        input_tokens: int | None = None,
        output_tokens: int = 1,
        tenant: str = "",
    ) -> Request:
        """A request whose prompt is the blocks ``raw`` (full blocks unless told),
        sent by ``tenant``."""
        request = Request(
            index=len(self.requests),
            request_id=f"r{len(self.requests)}",
            arrival_s=arrival_s,
            input_tokens=input_tokens if input_tokens is not None else len(raw) * self.block_tokens,
            output_tokens=output_tokens,
            blocks=self.blocks(raw, tenant),
            tenant=tenant,
        )
        self.requests.append(request)
        return request

    def workload(self, name: str = "hand") -> Workload:
        return Workload(name, self.block_tokens, list(self.requests))


Action = Callable[[Simulator], Any]


class Script:
    """Routes request ``i`` to ``routes[i]``; before answering runs ``actions[i]``
    (callables on the simulator) and keeps what they return in ``results[i]``."""

    def __init__(self, routes: Sequence[int], actions: dict[int, list[Action]] | None = None):
        self.routes = list(routes)
        self.actions = actions or {}
        self.results: dict[int, list[Any]] = {}

    def decide(self, sim: Simulator, request: Request) -> int:
        acts = self.actions.get(request.index, [])
        self.results[request.index] = [act(sim) for act in acts]
        return self.routes[request.index]


def run_script(
    cluster: ClusterSpec,
    prompts: Prompts,
    routes: Sequence[int],
    actions: dict[int, list[Action]] | None = None,
    config: SimConfig | None = None,
) -> tuple[Simulator, Script]:
    sim = Simulator(cluster, prompts.workload(), config)
    script = Script(routes, actions)
    sim.run(script)
    check_run(sim)
    return sim, script


# ---------------------------------------------------------------- synthetic windows
SMALL_WINDOW = BurstedSyntheticConfig(
    n_bursts=2,
    burst_requests=24,
    prefix_tokens=8192,
    suffix_tokens=256,
    output_tokens=8,
    first_burst_s=6.0,
    burst_interval_s=3.0,
    start_jitter_s=1.0,
    burst_window_s=1.0,
    n_decoys=6,
    decoy_lead_s=5.0,
)
"""Two 24-request bursts sharing a 32-block prefix within 1 s, and 6 decoys (54 requests)."""
SMALL_PREFIX_BLOCKS = 32


def small_window(seed: int = 1) -> Workload:
    return synthetic_window(SMALL_WINDOW, window=0, seed=seed)


def tight_h100_cluster(n_nodes: int = 4) -> ClusterSpec:
    """llama-3.3-70b on nodes of four 40 GB H100s: a KV budget of 57,373 tokens
    (224 blocks), so a small window already evicts."""
    gpu = GpuSpec("H100-40GB", 989e12, 3.35e12, 40e9, 55e9, 50e9, 7e9)
    return ClusterSpec(model_preset("llama-3.3-70b"), (NodeSpec(gpu, 4),) * n_nodes)


# ---------------------------------------------------------------- invariants
def check_nodes(sim: Simulator) -> None:
    """What must hold on every node at any moment between events."""
    bt = sim.block_tokens
    for node in sim.nodes:
        assert 0 <= node.reserved_tokens <= node.budget_tokens, (node.index, node.reserved_tokens)
        assert 0 <= node.running <= sim.config.max_batch
        capacity = node.cache_capacity_blocks(bt)
        assert node.cache.hbm_blocks <= capacity, (node.index, node.cache.hbm_blocks, capacity)
        ram_cap = node.cache.ram_capacity_blocks
        assert node.cache.blocks_in[1] <= ram_cap
        node.cache.check_invariants()
        for key, copy in node.inflight.items():
            assert copy.dst == node.index and copy.key == key and copy.land_s < 0


def check_run(sim: Simulator) -> None:
    """What must hold once a run has finished."""
    rec = sim.records
    n = len(sim.requests)
    assert sim.done
    assert rec.summary["completed"] == n
    for field in ("admit_s", "first_token_s", "finish_s"):
        values = np.asarray(getattr(rec, field), dtype=float)
        assert values.shape == (n,) and np.isfinite(values).all(), field
    node = np.asarray(rec.node)
    assert ((node >= 0) & (node < sim.n_nodes)).all()
    arrival = np.array([r.arrival_s for r in sim.requests])
    eps = 1e-9
    assert (rec.admit_s >= arrival - eps).all()
    assert (rec.first_token_s > rec.admit_s).all()
    assert (rec.finish_s >= rec.first_token_s - eps).all()
    inputs = np.array([r.input_tokens for r in sim.requests])
    hits = rec.hit_hbm_tokens + rec.hit_ram_tokens + rec.hit_disk_tokens
    assert (rec.prefill_tokens + hits == inputs).all()
    assert (rec.prefill_tokens >= 1).all()
    for k, request in enumerate(sim.requests):
        costs = sim.nodes[int(rec.node[k])].costs
        # TTFT is never below the prefill time of the uncached part.
        floor = costs.prefill_s(int(rec.prefill_tokens[k]), int(hits[k]))
        assert rec.ttft_s[k] >= floor * (1 - 1e-9), (k, rec.ttft_s[k], floor)
        # TTFT = admission - arrival + reuse + prefill (chunked
        # prefill adds the decode steps run between chunks)
        service = rec.first_token_s[k] - rec.admit_s[k]
        if sim.config.chunked_prefill_tokens == 0:
            assert service == pytest.approx(rec.reuse_s[k] + floor, rel=1e-9, abs=1e-12), k
        else:
            assert service >= (rec.reuse_s[k] + floor) * (1 - 1e-9), k
        assert request.index == k
    # at no instant did a node hold more sequences, or reserve more KV, than it has
    assert 0.0 < rec.summary["batch_occupancy_peak"] <= 1.0
    assert 0.0 < rec.summary["kv_occupancy_peak"] <= 1.0
    for node_state in sim.nodes:
        assert node_state.running == 0 and node_state.reserved_tokens == 0
        assert not node_state.queue and not node_state.inflight
        node_state.cache.check_invariants()
        assert node_state.cache.hbm_blocks <= node_state.budget_tokens // sim.block_tokens
    for copy in sim.copies:
        # a failed copy (faults) and one an upgrade cancels never land
        if copy.state not in (FAILED, CANCELLED):
            assert copy.land_s >= copy.start_s >= copy.issued_s >= 0


def check_causal(sim: Simulator, computed_at: str = "first_token_s") -> list[str]:
    """Violations of causality in a finished run (empty when causal).

    KV for a prefix exists on a node from the ``computed_at`` time of a request
    there whose prompt holds it, from the landing of a copy of it, or from the end
    of the speculative chunk that computed it. Every
    reused prefix must exist on its node at admission; every copy must start
    no earlier than its source KV exists and land no earlier than its start
    plus its bytes over the slower NIC.
    """
    rec = sim.records
    bt = sim.block_tokens
    ready = np.asarray(getattr(rec, computed_at), dtype=float)
    exists: dict[tuple[int, int], float] = {}

    def note(node: int, blocks: Iterable[int], t: float) -> None:
        for key in blocks:
            if t < exists.get((node, key), math.inf):
                exists[(node, key)] = t

    for k, request in enumerate(sim.requests):
        note(int(rec.node[k]), request.blocks, float(ready[k]))
    for copy in sorted(sim.copies, key=lambda c: c.land_s):
        if copy.land_s >= 0:
            note(copy.dst, copy.blocks, copy.land_s)
    if sim.speculation is not None:  # a speculative chunk's blocks exist at its end
        for chunk in sim.speculation.chunks:
            blocks = chunk.job.blocks[chunk.start_blocks : chunk.end_blocks]
            note(chunk.node, blocks, chunk.start_s + chunk.compute_s)
    problems: list[str] = []
    latency = sim.config.transfer_latency_s
    for copy in sim.copies:
        if copy.state == CANCELLED:  # an upgrade cancelled it: it never moved
            continue
        if copy.state == FAILED and copy.start_s < 0:  # failed before it started
            continue
        src_ready = exists.get((copy.src, copy.key), math.inf)
        if copy.start_s < src_ready - 1e-12:
            problems.append(
                f"copy {copy.id} starts at {copy.start_s} before its KV exists ({src_ready})"
            )
        bw = sim.nodes[copy.dst].spec.rdma_bw  # the reference model times by the target
        if sim.config.copy_model != "reference":  # a flow never beats either NIC
            bw = min(bw, sim.nodes[copy.src].spec.rdma_bw)
        earliest = copy.start_s + latency + copy.bytes / bw
        if copy.state == FAILED and copy.land_s < 0:  # it never landed
            continue
        if copy.land_s < earliest * (1 - 1e-12) - 1e-12:
            problems.append(f"copy {copy.id} lands at {copy.land_s}, before {earliest}")
    hits = rec.hit_hbm_tokens + rec.hit_ram_tokens + rec.hit_disk_tokens
    for k, request in enumerate(sim.requests):
        if hits[k] <= 0:
            continue
        depth = -(-int(hits[k]) // bt)
        key = request.blocks[depth - 1]
        t = exists.get((int(rec.node[k]), key), math.inf)
        if t > rec.admit_s[k] + 1e-12:
            problems.append(
                f"request {k} reuses {depth} blocks at {rec.admit_s[k]}, computed at {t}"
            )
    return problems


class Checked:
    """Wraps a policy: checks the node invariants at every decision point."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.decisions = 0

    def decide(self, sim: Simulator, request: Request) -> int:
        check_nodes(sim)
        self.decisions += 1
        return int(self.policy.decide(sim, request))


def records_equal(a: Any, b: Any) -> None:
    """Per-request records of two runs are identical, field by field."""
    fields_a, fields_b = a.as_dict(), b.as_dict()
    assert fields_a.keys() == fields_b.keys()
    for name, values in fields_a.items():
        np.testing.assert_array_equal(values, fields_b[name], err_msg=name)
