"""Hardware and model presets (the published GPU and model figures) and the per-node timing model.

A :class:`NodeSpec` is ``n_gpus`` GPUs of one kind serving one model copy with
tensor parallelism: FLOP/s, HBM bandwidth and capacity, PCIe and RDMA scale
with ``n_gpus``; the node's NVMe is shared and does not. :class:`NodeCosts`
turns a node, a model and the simulator's efficiency settings into the numbers
the event loop uses (seconds per token, bytes per token, KV budget). The
equations, in words: docs/physics.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import TYPE_CHECKING

import numpy as np

from envs.sim.checks import check_int, checked_number, is_number
from envs.sim.errors import ConfigError, echoed

if TYPE_CHECKING:
    from envs.sim.config import SimConfig

DEFAULT_MFU = 0.5
"""Achieved fraction of peak FLOP/s in prefill, unless a SimConfig says otherwise."""
DEFAULT_MBU = 0.8
"""Achieved fraction of HBM bandwidth in decode, unless a SimConfig says otherwise."""
MAX_GPUS_PER_NODE = 72
"""The most GPUs a node has: its GPUs serve one model copy by tensor parallelism,
which spans one scale-up (NVLink) domain, and the largest built is a GB200 / GB300
NVL72 rack's 72 GPUs (an HGX or MI300X / MI355X platform has 8; docs/physics.md)."""


def _positive(owner: str, name: str, value: float) -> None:
    if not is_number(value) or not (0 < value < math.inf):
        raise ConfigError.about(
            f"{owner}.{name}", f"must be a positive finite number, got {echoed(value)}"
        )


def _store_plain(spec: object, fields: tuple[str, ...]) -> None:
    """Store each of ``spec``'s ``fields`` that holds a numpy number (a sweep's
    ``np.float32``) as the Python one: the pure-Python core would compute in it
    (float32 arithmetic) where the compiled core computes in doubles."""
    for field in fields:
        value = getattr(spec, field)
        if isinstance(value, np.generic):
            object.__setattr__(spec, field, value.item())


@dataclass(frozen=True)
class GpuSpec:
    """One GPU: peak dense BF16 FLOP/s and bandwidths in bytes/s, HBM in bytes."""

    name: str
    flops: float
    hbm_bw: float
    hbm_bytes: float
    pcie_bw: float
    rdma_bw: float
    nvme_bw: float

    def __post_init__(self) -> None:
        fields = ("flops", "hbm_bw", "hbm_bytes", "pcie_bw", "rdma_bw", "nvme_bw")
        for field in fields:
            _positive(f"GpuSpec({self.name!r})", field, getattr(self, field))
        _store_plain(self, fields)


@dataclass(frozen=True)
class ModelSpec:
    """A served model. ``attn_dim`` (query heads x head dim) is used only by the
    opt-in attention-FLOPs setting; it is an approximation where the reference model is silent.
    ``max_context_tokens`` is the longest request (prompt + output tokens) the model
    serves; None: no limit is known. Trace readers refuse longer rows
    (``ReadOptions.max_context_tokens``)."""

    name: str
    total_params: float
    active_params: float
    bytes_per_elem: float
    layers: int
    kv_heads: int
    head_dim: int
    attn_dim: int = 8192
    max_context_tokens: int | None = None

    def __post_init__(self) -> None:
        owner = f"ModelSpec({self.name!r})"
        for field in ("total_params", "active_params", "bytes_per_elem"):
            _positive(owner, field, getattr(self, field))
        for field in ("layers", "kv_heads", "head_dim", "attn_dim"):
            check_int(f"{owner}.{field}", getattr(self, field), 1, ConfigError)
        if self.max_context_tokens is not None:
            check_int(f"{owner}.max_context_tokens", self.max_context_tokens, 1, ConfigError)
        _store_plain(self, tuple(f.name for f in dataclass_fields(self) if f.name != "name"))
        if self.active_params > self.total_params:
            raise ConfigError(
                f"{{active_params}} ({self.active_params:g}) exceeds "
                f"{{total_params}} ({self.total_params:g})",
                ("active_params", "total_params"),
                owner,
            )

    @property
    def kv_bytes_per_token(self) -> float:
        """2 (K and V) x layers x KV heads x head dim x bytes per element."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.bytes_per_elem

    @property
    def weight_bytes(self) -> float:
        return self.total_params * self.bytes_per_elem

    @property
    def active_weight_bytes(self) -> float:
        return self.active_params * self.bytes_per_elem


GPUS: dict[str, GpuSpec] = {
    g.name: g
    for g in (
        GpuSpec("A100", 312e12, 2.00e12, 80e9, 25e9, 25e9, 5e9),
        GpuSpec("H100", 989e12, 3.35e12, 80e9, 55e9, 50e9, 7e9),
        GpuSpec("H200", 989e12, 4.80e12, 141e9, 55e9, 50e9, 7e9),
        GpuSpec("B200", 2250e12, 8.00e12, 192e9, 60e9, 100e9, 7e9),
        GpuSpec("B300", 2250e12, 8.00e12, 288e9, 120e9, 100e9, 7e9),
        GpuSpec("MI300X", 1307e12, 5.30e12, 192e9, 55e9, 50e9, 7e9),
        GpuSpec("MI355X", 2500e12, 8.00e12, 288e9, 120e9, 100e9, 7e9),
    )
}

# Context lengths (max_context_tokens), from each model's release notes / model card:
# llama-3.3-70b 128k = 131,072; qwen3-8b 32,768 native, 131,072 with YaRN rope scaling
# (the figure used: the published Bursted-ART prompts are 65,792 tokens long);
# glm-4.5 128k = 131,072; glm-4.6 200k, 202,752 in its released config; kimi-k2 (the
# first, July 2025 release) 128k = 131,072; dense-1t is not a released model, so no
# published figure exists: 131,072 is assumed, like the 128k models beside it.
MODELS: dict[str, ModelSpec] = {
    m.name: m
    # name, total / active params, bytes/elem, layers, KV heads, head dim, attn_dim, context
    for m in (
        ModelSpec("llama-3.3-70b", 70.6e9, 70.6e9, 2, 80, 8, 128, 64 * 128, 131_072),
        ModelSpec("qwen3-8b", 8.19e9, 8.19e9, 2, 36, 8, 128, 32 * 128, 131_072),
        ModelSpec("glm-4.5", 355e9, 32e9, 0.5, 92, 4, 128, 96 * 128, 131_072),
        ModelSpec("glm-4.6", 744e9, 40e9, 0.5, 78, 1, 288, 64 * 192, 202_752),
        ModelSpec("kimi-k2", 1e12, 32e9, 0.5, 61, 8, 128, 64 * 192, 131_072),
        ModelSpec("dense-1t", 1e12, 1e12, 1, 120, 8, 128, 128 * 128, 131_072),
    )
}
MODEL_ALIASES = {"glm52": "glm-4.6", "llama-70b": "llama-3.3-70b", "70b": "llama-3.3-70b"}


def gpu_preset(name: str, own: Mapping[str, GpuSpec] | None = None) -> GpuSpec:
    """The GPU preset called ``name`` (case-insensitive), or one of ``own`` (GPU
    kinds of one's own, by name)."""
    kinds = {**GPUS, **(own or {})}
    for key, spec in kinds.items():
        if key.lower() == str(name).lower():
            return spec
    raise ConfigError(f"unknown GPU preset {echoed(name)}; known: {', '.join(kinds)}")


def model_preset(name: str) -> ModelSpec:
    """The model preset called ``name`` (or an alias such as ``glm52``)."""
    key = MODEL_ALIASES.get(str(name).lower(), str(name).lower())
    if key in MODELS:
        return MODELS[key]
    known = ", ".join([*MODELS, *MODEL_ALIASES])
    raise ConfigError(f"unknown model preset {echoed(name)}; known: {known}")


@dataclass(frozen=True)
class NodeSpec:
    """A replica: ``n_gpus`` GPUs of one kind with tensor parallelism."""

    gpu: GpuSpec
    n_gpus: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.gpu, GpuSpec):  # a name would fail later, at the first figure read
            raise TypeError(
                f"NodeSpec.gpu must be a GpuSpec, got {echoed(self.gpu)} (gpu_preset(name) gives a "
                "preset's GpuSpec; parse_node('4xH100') a node of one)"
            )
        # an integer first: one no float holds is said by its size, not written out whole
        check_int("NodeSpec.n_gpus", self.n_gpus, 1, ConfigError)
        if self.n_gpus > MAX_GPUS_PER_NODE:
            raise ConfigError.about(
                "NodeSpec.n_gpus",
                f"must be at most {MAX_GPUS_PER_NODE}, got {echoed(self.n_gpus)}: a node's GPUs "
                "serve one model copy by tensor parallelism within one NVLink domain, and "
                f"the largest (GB200 / GB300 NVL72) has {MAX_GPUS_PER_NODE}; a cluster of "
                "more GPUs is more nodes",
            )
        _store_plain(self, ("n_gpus",))

    @property
    def name(self) -> str:
        return f"{self.n_gpus}x{self.gpu.name}"

    @property
    def flops(self) -> float:
        return self.gpu.flops * self.n_gpus

    @property
    def hbm_bw(self) -> float:
        return self.gpu.hbm_bw * self.n_gpus

    @property
    def hbm_bytes(self) -> float:
        return self.gpu.hbm_bytes * self.n_gpus

    @property
    def pcie_bw(self) -> float:
        return self.gpu.pcie_bw * self.n_gpus

    @property
    def rdma_bw(self) -> float:
        return self.gpu.rdma_bw * self.n_gpus

    @property
    def nvme_bw(self) -> float:
        """Shared by the node's GPUs: not multiplied."""
        return self.gpu.nvme_bw


def parse_node(text: str, own: Mapping[str, GpuSpec] | None = None) -> NodeSpec:
    """``"4xH100"`` (or ``4XH100``, ``4xh100``) -> NodeSpec(H100, 4); ``"H100"`` -> one GPU;
    the GPU a preset or one of ``own`` (:func:`gpu_preset`)."""
    text = str(text)
    count, sep, _ = text.lower().partition("x")
    if sep and count.isdigit():
        return NodeSpec(gpu_preset(text[len(count) + 1 :], own), int(count))
    return NodeSpec(gpu_preset(text, own), 1)


TIERS = ("hbm", "ram", "disk")


class NodeCosts:
    """The timing equations (docs/physics.md, "Step times") for one node serving one model.

    Attributes (all per node):
        kv_bytes_per_token: KV bytes one token occupies.
        budget_tokens: KV tokens that fit beside the weights.
        prefill_s_per_token: 2 x active params / (FLOP/s x MFU).
        load_s_per_token: seconds to bring one token of KV into HBM from each
            tier: ``{"hbm", "ram", "disk", "rdma"}``.
        decode_weight_s: one decode step's weight read, active bytes / (HBM bw x MBU).
        decode_kv_s_per_token: reading one token of KV in a decode step.
    """

    def __init__(
        self,
        node: NodeSpec,
        model: ModelSpec,
        mfu: float = DEFAULT_MFU,
        mbu: float = DEFAULT_MBU,
        attention_flops: bool = False,
        node_label: str = "node",
    ) -> None:
        # as Python floats, as SimConfig stores them: a numpy float32 share would make
        # every cost below a float32, which the pure-Python core computes on in
        mfu, mbu = (
            checked_number(
                f"sim.{name}", share, 0, 1, above=True, type_apart=True, error=ConfigError
            )
            for name, share in (("mfu", mfu), ("mbu", mbu))
        )
        self.node = node
        self.model = model
        if model.weight_bytes > node.hbm_bytes:
            raise ConfigError(
                f"{node_label} ({node.name}, {node.hbm_bytes / 1e9:g} GB HBM) cannot hold "
                f"{model.name}: its weights need {model.weight_bytes / 1e9:g} GB"
            )
        kv = model.kv_bytes_per_token
        self.kv_bytes_per_token = kv
        self.budget_tokens = int((node.hbm_bytes - model.weight_bytes) // kv)
        effective_flops = node.flops * mfu
        self.prefill_s_per_token = 2.0 * model.active_params / effective_flops
        self.attention_s_coef = (
            4.0 * model.layers * model.attn_dim / effective_flops if attention_flops else 0.0
        )
        effective_bw = node.hbm_bw * mbu
        self.decode_weight_s = model.active_weight_bytes / effective_bw
        self.decode_kv_s_per_token = kv / effective_bw
        self.load_s_per_token = {
            "hbm": kv / node.hbm_bw,
            "ram": kv / node.pcie_bw,
            "disk": kv / node.nvme_bw,
            "rdma": kv / node.rdma_bw,
        }
        self.load_hbm_s = self.load_s_per_token["hbm"]
        self.load_ram_s = self.load_s_per_token["ram"]
        self.load_disk_s = self.load_s_per_token["disk"]
        self._sealed = True

    def __setattr__(self, name: str, value: object) -> None:
        # the compiled simulator core copies the coefficients once, so a change made
        # afterwards would reach only the Python core: build a new NodeCosts instead
        if getattr(self, "_sealed", False):
            raise AttributeError(
                f"NodeCosts.{name} is read-only once built; make a new NodeCosts "
                "(e.g. with other mfu / mbu) instead"
            )
        object.__setattr__(self, name, value)

    def prefill_s(self, new_tokens: int, cached_tokens: int = 0) -> float:
        """Seconds to prefill ``new_tokens`` after ``cached_tokens`` already in KV.

        Linear in the new tokens; with attention FLOPs on, adds
        4 x layers x attn_dim x (N x P + N (N + 1) / 2) FLOPs.
        """
        seconds = new_tokens * self.prefill_s_per_token
        if self.attention_s_coef and new_tokens > 0:
            pairs = new_tokens * cached_tokens + new_tokens * (new_tokens + 1) / 2
            seconds += self.attention_s_coef * pairs
        return seconds

    @classmethod
    def under(
        cls, config: SimConfig, node: NodeSpec, model: ModelSpec, node_label: str = "node"
    ) -> NodeCosts:
        """The costs of ``node`` serving ``model`` with ``config``'s ``mfu``, ``mbu``
        and ``attention_flops`` (what a simulator run under ``config`` charges)."""
        return cls(node, model, config.mfu, config.mbu, config.attention_flops, node_label)

    def decode_s(self, steps: int, batch: int, context_tokens: int) -> float:
        """A decode segment of ``steps`` for ``batch`` sequences holding
        ``context_tokens`` KV tokens in total at its start."""
        kv_tokens_read = steps * context_tokens + batch * steps * (steps - 1) / 2
        return self.decode_weight_s * steps + self.decode_kv_s_per_token * kv_tokens_read

    def decode_steps_by(self, elapsed_s: float, batch: int, context_tokens: int) -> int:
        """The fewest steps of a decode segment (``batch`` sequences holding
        ``context_tokens`` KV tokens at its start) that take at least ``elapsed_s``
        seconds: the step boundary at or after ``elapsed_s`` into the segment, where
        an admission cuts it (prefill has priority, a step is never split); 0
        when ``elapsed_s <= 0``: a segment that has not started yet (decode
        overshoot starts the next one at the end of a step run past an arrival)."""
        if elapsed_s <= 0.0:
            return 0
        b = batch
        a = self.decode_weight_s + self.decode_kv_s_per_token * (context_tokens - b / 2)
        c = self.decode_kv_s_per_token * b / 2
        if c > 0:
            steps = math.ceil((-a + math.sqrt(a * a + 4 * c * elapsed_s)) / (2 * c))
        else:
            steps = math.ceil(elapsed_s / a)
        while steps > 0 and self.decode_s(steps - 1, b, context_tokens) >= elapsed_s:
            steps -= 1
        while self.decode_s(steps, b, context_tokens) < elapsed_s:
            steps += 1
        return steps

    def load_s(self, tokens: int, tier: str) -> float:
        """Seconds to move ``tokens`` of KV into HBM from ``tier``."""
        return tokens * self.load_s_per_token[tier]
