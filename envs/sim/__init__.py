"""The world: a discrete-event model of an LLM serving cluster with prefix KV
caches and RDMA copies. Pure Python and numpy; never imports gymnasium, torch
or hydra."""

from envs.sim.cache import PrefixCache
from envs.sim.config import SETUPS, ClusterSpec, SimConfig, setup_cluster
from envs.sim.errors import ConfigError, PolicyFailure, SimulationError
from envs.sim.metrics import Records, RunTotals, summarize
from envs.sim.node import Node
from envs.sim.simulator import WARM_OK, WARM_REFUSALS, Router, Simulator
from envs.sim.timing import (
    GPUS,
    MODELS,
    GpuSpec,
    ModelSpec,
    NodeCosts,
    NodeSpec,
    gpu_preset,
    model_preset,
    parse_node,
)

__all__ = [
    "GPUS",
    "MODELS",
    "SETUPS",
    "WARM_OK",
    "WARM_REFUSALS",
    "ClusterSpec",
    "ConfigError",
    "GpuSpec",
    "ModelSpec",
    "Node",
    "NodeCosts",
    "NodeSpec",
    "PolicyFailure",
    "PrefixCache",
    "Records",
    "Router",
    "RunTotals",
    "SimConfig",
    "SimulationError",
    "Simulator",
    "gpu_preset",
    "model_preset",
    "parse_node",
    "setup_cluster",
    "summarize",
]
