"""Simulator settings and the cluster description."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from envs.sim.checks import check_int, is_number
from envs.sim.errors import ConfigError
from envs.sim.timing import (
    DEFAULT_MBU,
    DEFAULT_MFU,
    ModelSpec,
    NodeSpec,
    model_preset,
    parse_node,
)

COPY_MODELS = ("reference", "contention")
CACHE_CAPACITIES = ("headroom", "budget")
MATCH_TIERS = ("hbm", "hbm_ram")
LRU_UNITS = ("run", "block")

# The accounting settings whose default follows the KV model: btb-gym's physics
# under causal KV, the reference simulator's under causal_kv=False.
KV_MODEL_DEFAULTS: dict[bool, dict[str, bool | str]] = {
    True: {
        "hbm_hit_load": True,
        "one_token_decode_step": False,
        "cache_capacity": "headroom",
        "match_tiers": "hbm",
        "lru_unit": "run",
        "decode_overshoot": False,
    },
    False: {
        "hbm_hit_load": False,
        "one_token_decode_step": True,
        "cache_capacity": "budget",
        "match_tiers": "hbm_ram",
        "lru_unit": "block",
        "decode_overshoot": True,
    },
}
_CHOICES = {"cache_capacity": CACHE_CAPACITIES, "match_tiers": MATCH_TIERS, "lru_unit": LRU_UNITS}


@dataclass(frozen=True)
class SimConfig:
    """How the cluster is simulated. Defaults are btb-gym's causal model.

    The accounting settings from ``hbm_hit_load`` to ``decode_overshoot`` default
    to None, which means "as the KV model has it": btb-gym's physics under
    ``causal_kv=True``, the reference simulator's under ``causal_kv=False``
    (``KV_MODEL_DEFAULTS``; :meth:`reference` builds the latter). Set one to
    switch it alone. After construction every field holds its value, never None.
    What each setting means for the physics: docs/physics.md.
    """

    causal_kv: bool = True
    """KV is usable (and copyable) only once computed or landed; False restores
    the reference behaviour (a request's blocks are resident from admission)."""
    copy_model: str = "reference"
    """"reference": a warm copy occupies the target node's timeline (the BTB write-up's model);
    "contention": concurrent copies share source and target NICs fairly."""
    max_batch: int = 256
    """Most sequences a node runs at once."""
    mfu: float = DEFAULT_MFU
    """Achieved fraction of peak FLOP/s in prefill."""
    mbu: float = DEFAULT_MBU
    """Achieved fraction of HBM bandwidth in decode."""
    disk_tier: bool = False
    """Keep blocks evicted from a full host RAM on local NVMe (unbounded)."""
    host_ram_bytes: float = math.inf
    """Host RAM for KV per node; inf (the reference) means unbounded. Realism option."""
    transfer_latency_s: float = 0.0
    """Fixed latency added to every KV transfer (RDMA copies, RAM and disk loads).
    Realism option; the contention copy model is usually run with a few microseconds."""
    attention_flops: bool = False
    """Add attention FLOPs (growing with context) to prefill. Realism option."""
    chunked_prefill_tokens: int = 0
    """Split prefills into chunks of this many tokens with one decode step of the
    running batch between chunks; a sequence whose last token comes out at one of
    those steps finishes (and frees its KV) there. 0 (the reference) prefills in
    one go. Realism option."""
    hbm_hit_load: bool | None = None
    """Charge a prefix hit in HBM its bytes / HBM bandwidth of reuse time (causal
    default); False charges nothing for HBM, only for runs loaded from RAM or disk
    (reference default)."""
    one_token_decode_step: bool | None = None
    """A request with one output token runs one decode step after its prefill,
    holding its KV and counting as load until the step ends (reference default);
    False finishes it at the end of its prefill (causal default). Its TTFT is the
    prefill's end either way."""
    cache_capacity: str | None = None
    """HBM the prefix cache may hold: "headroom", the KV budget minus the running
    sequences' reservations (causal default), or "budget", the whole KV budget
    (reference default)."""
    match_tiers: str | None = None
    """What cache_aware (and BTB when it falls back to it) counts as a node's
    matched prefix: "hbm" (causal default) or "hbm_ram", the leading run cached in
    HBM and host RAM together (reference default)."""
    lru_unit: str | None = None
    """LRU bookkeeping of the prefix cache: "run", a hit refreshes the whole
    radix-tree run it reaches into (causal default), or "block", a hit refreshes
    exactly the blocks it used, so the unused rest of a run ages and is evicted
    first (reference default). Either way eviction takes exactly the blocks it
    needs, deepest first, so what stays cached is a prefix."""
    decode_overshoot: bool | None = None
    """A quirk of the reference loop (reference default; causal default False): at
    each arrival, a node whose decode segment ends within the decode step in
    progress finishes that step (its sequences complete, freed KV admits queued
    requests) before the router decides, so the router sees the node as it will
    be after the step, not as it is at the arrival."""

    # -- speculative prefill (Simulator.speculate; docs/cache_actions.md) --
    speculative_chunk_tokens: int = 2048
    """Speculative prefill runs in chunks of this many tokens (rounded down to whole
    blocks, at least one): a real request arriving at a speculating node waits at
    most for the chunk in progress. Used only when a policy calls speculate."""

    @classmethod
    def reference(cls, **overrides: Any) -> SimConfig:
        """The reference (Infer-Sim) model: ``causal_kv=False`` and every accounting
        setting at its reference default, unless overridden."""
        return cls(causal_kv=False, **overrides)

    def __post_init__(self) -> None:
        # numpy scalars (e.g. from np.linspace sweeps) are stored as Python values
        if isinstance(self.causal_kv, np.bool_):
            object.__setattr__(self, "causal_kv", bool(self.causal_kv))
        if isinstance(self.causal_kv, bool):
            for name, value in KV_MODEL_DEFAULTS[self.causal_kv].items():
                if getattr(self, name) is None:
                    object.__setattr__(self, name, value)
        for name in (
            "causal_kv",
            "disk_tier",
            "attention_flops",
            "hbm_hit_load",
            "one_token_decode_step",
            "decode_overshoot",
        ):
            value = getattr(self, name)
            if isinstance(value, np.bool_):
                object.__setattr__(self, name, bool(value))
            elif not isinstance(value, bool):  # "false" would be truthy
                raise ConfigError(f"sim.{name} must be true or false (a bool), got {value!r}")
        for name in ("max_batch", "chunked_prefill_tokens"):
            value = getattr(self, name)
            if isinstance(value, np.integer):
                object.__setattr__(self, name, int(value))
        for name in ("mfu", "mbu", "host_ram_bytes", "transfer_latency_s"):
            value = getattr(self, name)
            if isinstance(value, (np.integer, np.floating)):
                object.__setattr__(self, name, float(value))
            elif not is_number(value):
                raise ConfigError(f"sim.{name} must be a number, got {value!r}")
        for name, choices in (("copy_model", COPY_MODELS), *_CHOICES.items()):
            value = getattr(self, name)
            if value not in choices:
                raise ConfigError(f"sim.{name} must be one of {', '.join(choices)}, got {value!r}")
        check_int("sim.max_batch", self.max_batch, 1, ConfigError)
        if not (self.host_ram_bytes >= 0):
            raise ConfigError(f"sim.host_ram_bytes must be >= 0, got {self.host_ram_bytes!r}")
        if not (0 <= self.transfer_latency_s < math.inf):
            raise ConfigError(
                f"sim.transfer_latency_s must be finite and >= 0, got {self.transfer_latency_s!r}"
            )
        check_int("sim.chunked_prefill_tokens", self.chunked_prefill_tokens, 0, ConfigError)
        for name in ("mfu", "mbu"):
            value = getattr(self, name)
            if not (0 < value <= 1):
                raise ConfigError(f"sim.{name} must be in (0, 1], got {value!r}")
        self._check_speculation()

    def _check_speculation(self) -> None:
        """The speculative-prefill settings (their own block, above)."""
        if isinstance(self.speculative_chunk_tokens, np.integer):
            object.__setattr__(self, "speculative_chunk_tokens", int(self.speculative_chunk_tokens))
        check_int("sim.speculative_chunk_tokens", self.speculative_chunk_tokens, 1, ConfigError)


@dataclass(frozen=True)
class ClusterSpec:
    """The served model and the replicas (possibly of different kinds)."""

    model: ModelSpec
    nodes: tuple[NodeSpec, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ConfigError("cluster.nodes is empty: a cluster needs at least one node")

    @classmethod
    def uniform(cls, model: str | ModelSpec, node: str | NodeSpec, n_nodes: int) -> ClusterSpec:
        """``n_nodes`` identical replicas, e.g. ``uniform("llama-3.3-70b", "4xH100", 4)``."""
        check_int("cluster.n_nodes", n_nodes, 1, ConfigError)
        spec = node if isinstance(node, NodeSpec) else parse_node(node)
        model_spec = model if isinstance(model, ModelSpec) else model_preset(model)
        return cls(model_spec, tuple([spec] * n_nodes))

    @property
    def name(self) -> str:
        kinds = sorted({n.name for n in self.nodes})
        return f"{self.model.name} on {len(self.nodes)} x {'/'.join(kinds)}"


# The published setups of the BTB write-up's results table: four replicas each.
SETUPS: dict[str, tuple[str, str, int]] = {
    "70b_h100x4": ("llama-3.3-70b", "4xH100", 4),
    "qwen3_8b_h100x4": ("qwen3-8b", "4xH100", 4),
    "glm45_h100x4": ("glm-4.5", "4xH100", 4),
    "glm52_h100x8": ("glm-4.6", "8xH100", 4),
    "kimi_k2_h100x8": ("kimi-k2", "8xH100", 4),
    "dense1t_b300x4": ("dense-1t", "4xB300", 4),
}
DEFAULT_SETUP = "70b_h100x4"
"""The setup every command and env simulates unless told otherwise."""


def setup_cluster(name: str) -> ClusterSpec:
    """The cluster of a named published setup, e.g. ``"70b_h100x4"``."""
    if name not in SETUPS:
        raise ConfigError(f"unknown setup {name!r}; known: {', '.join(SETUPS)}")
    model, node, n_nodes = SETUPS[name]
    return ClusterSpec.uniform(model, node, n_nodes)
