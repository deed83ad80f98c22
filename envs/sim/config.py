"""Simulator settings and the cluster description."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from envs.sim.checks import check_int, is_number
from envs.sim.errors import ConfigError
from envs.sim.hardware import ModelSpec, NodeSpec, model_preset, parse_node

COPY_MODELS = ("reference", "contention")


@dataclass(frozen=True)
class SimConfig:
    """How the cluster is simulated. Defaults are the causal reference model."""

    causal_kv: bool = True
    """KV is usable (and copyable) only once computed or landed; False restores
    the reference behaviour (a request's blocks are resident from admission)."""
    copy_model: str = "reference"
    """"reference": a warm copy occupies the target node's timeline (SPEC section 7);
    "contention": concurrent copies share source and target NICs fairly."""
    max_batch: int = 256
    """Most sequences a node runs at once."""
    mfu: float = 0.5
    """Achieved fraction of peak FLOP/s in prefill."""
    mbu: float = 0.8
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

    def __post_init__(self) -> None:
        # numpy scalars (e.g. from np.linspace sweeps) are stored as Python values
        for name in ("causal_kv", "disk_tier", "attention_flops"):
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
        if self.copy_model not in COPY_MODELS:
            raise ConfigError(
                f"sim.copy_model must be one of {', '.join(COPY_MODELS)}, got {self.copy_model!r}"
            )
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


# The published setups of SPEC section 9: four replicas each.
SETUPS: dict[str, tuple[str, str, int]] = {
    "70b_h100x4": ("llama-3.3-70b", "4xH100", 4),
    "qwen3_8b_h100x4": ("qwen3-8b", "4xH100", 4),
    "glm45_h100x4": ("glm-4.5", "4xH100", 4),
    "glm52_h100x8": ("glm-4.6", "8xH100", 4),
    "kimi_k2_h100x8": ("kimi-k2", "8xH100", 4),
    "dense1t_b300x4": ("dense-1t", "4xB300", 4),
}


def setup_cluster(name: str) -> ClusterSpec:
    """The cluster of a named published setup, e.g. ``"70b_h100x4"``."""
    if name not in SETUPS:
        raise ConfigError(f"unknown setup {name!r}; known: {', '.join(SETUPS)}")
    model, node, n_nodes = SETUPS[name]
    return ClusterSpec.uniform(model, node, n_nodes)
