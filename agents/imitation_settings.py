"""Behavioural-cloning settings: a plain dataclass (no torch import), so the
Hydra schema (``experiments.config``, group ``imitation``) can use it directly."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from envs.sim.errors import echoed


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
    """CausalTeacher keyword arguments (x, z, min_prefix_tokens, max_nodes)."""

    def __post_init__(self) -> None:
        """Counts in range and extra setups / workloads that exist, each named as its
        config key (``imitation.epochs``), so a run is refused before any env is built."""
        from envs.sim import SETUPS
        from envs.workloads.registry import list_workloads

        for name, low in (("episodes", 0), ("epochs", 1), ("batch_size", 1)):
            value = getattr(self, name)
            if value < low:
                raise ValueError(f"imitation.{name} must be >= {low}, got {value}")
        for name in ("learning_rate", "value_coef"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"imitation.{name} must be a finite number >= 0, got {value}")
        for name, known in (("setups", list(SETUPS)), ("workloads", list_workloads())):
            for item in getattr(self, name):
                if item not in known:
                    raise ValueError(
                        f"imitation.{name}: unknown {name[:-1]} "
                        f"{echoed(item)}; known: {', '.join(known)}"
                    )
