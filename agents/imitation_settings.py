"""Behavioural-cloning settings: a plain dataclass (no torch import), so the
Hydra schema (``experiments.config``, group ``imitation``) can use it directly."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ImitationSettings:
    """Behavioural-cloning settings (``episodes=0`` switches pretraining off)."""

    episodes: int = 0
    """Teacher episodes per (setup, workload) source."""
    epochs: int = 10
    """Passes over the demonstrations."""
    batch_size: int = 256
    learning_rate: float = 1e-3
    value_coef: float = 0.0
    """Weight of the value regression next to the action cross-entropy. Keep 0 for the
    node-set policies: their critic shares the body, and fitting the (large) returns
    spoils the actor; a later RL fine-tune then needs a critic warm-up."""
    setups: list[str] = field(default_factory=list)
    """Extra setups to collect on (published names); the training env's own always."""
    workloads: list[str] = field(default_factory=list)
    """Extra workloads to collect on; the training env's own always."""
    teacher: dict[str, Any] = field(default_factory=dict)
    """CausalTeacher keyword arguments (x, z, min_prefix_blocks, max_nodes)."""
