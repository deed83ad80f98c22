"""Structured configs (Hydra 1.3) for the training, evaluation and tuning commands.

The dataclasses are the schema: Hydra checks every value against the field's
type and rejects keys the schema does not have. The YAML files under ``conf/``
choose the values: one folder per group (``setup``, ``model``, ``cluster``,
``workload``, ``sim``, ``env``, ``agent``, ``logger``), one file per option.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from agents.imitation_settings import ImitationSettings
from envs.sim import SETUPS, ClusterSpec, ConfigError, SimConfig
from envs.sim.hardware import model_preset


@dataclass
class ModelConf:
    name: str = "llama-3.3-70b"
    """A model preset of envs.sim.MODELS."""


@dataclass
class ClusterConf:
    node: str = "4xH100"
    """GPUs per node and GPU preset, e.g. 8xH100."""
    n_nodes: int = 4
    """Replicas."""


@dataclass
class SetupConf:
    name: str = "70b_h100x4"
    """A label for results; the model and cluster groups say what it is."""


@dataclass
class WorkloadConf:
    name: str = "bursted_synthetic"
    """A registered workload (envs.workloads.registry)."""
    seed: int = 20260721
    """Generator seed (the published one by default)."""
    train_pool: int | None = 4
    """Training windows in the episode pool (None: all of the train split)."""
    eval_windows: int | None = 3
    """Held-out test windows evaluated after training (None: all)."""
    params: dict[str, Any] = field(default_factory=dict)
    """Generator parameter overrides, e.g. {burst_requests: 50}."""


@dataclass
class SimConf:
    causal_kv: bool = True
    copy_model: str = "reference"
    max_batch: int = 256
    mfu: float = 0.5
    mbu: float = 0.8
    disk_tier: bool = False
    host_ram_bytes: float = math.inf
    transfer_latency_s: float = 0.0
    attention_flops: bool = False
    chunked_prefill_tokens: int = 0


@dataclass
class EnvConf:
    kind: str = "route"
    """route (btb/Route-v0), route_warm (btb/RouteWarm-v0) or thresholds (btb/Thresholds-v0)."""
    reward_scale: float = 10.0
    """Return = -(sum of TTFT) / reward_scale."""
    slo_s: float | None = None
    tail_penalty: float = 0.0
    copy_cost_per_gb: float = 0.0
    epoch_s: float = 1.0
    """Thresholds env only: seconds per decision epoch."""
    n_envs: int = 1
    """Parallel environments for training."""
    vec: str = "dummy"
    """dummy (one process) or subproc."""


@dataclass
class AgentConf:
    algo: str = "ppo"
    """ppo, a2c, dqn or maskable_ppo."""
    net: str = "set"
    """set (node-set network, works on other cluster sizes) or mlp."""
    hidden: int = 64
    hyperparams: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the SB3 algorithm (n_steps, learning_rate, ...)."""


@dataclass
class LoggerConf:
    kind: str = "wandb"
    """wandb or none."""
    mode: str = "offline"
    """W&B mode: offline (runs land in a local folder for `wandb sync`), online, disabled."""
    project: str = "btb-gym"
    entity: str | None = None
    group: str | None = None
    """W&B group; by default the sweep's folder name in a multirun."""
    tags: list[str] = field(default_factory=list)


@dataclass
class TrainConf:
    total_timesteps: int = 20_000
    checkpoint_every: int = 10_000
    """Save a checkpoint every this many steps (0: only at the end)."""
    eval_policies: list[str] = field(default_factory=lambda: ["btb", "cache_aware", "least_load"])
    evaluate: bool = True
    progress: bool = True
    torch_threads: int = 1


@dataclass
class _World:
    """The groups every command composes: what is simulated, and where it is logged."""

    setup: SetupConf = field(default_factory=SetupConf)
    model: ModelConf = field(default_factory=ModelConf)
    cluster: ClusterConf = field(default_factory=ClusterConf)
    workload: WorkloadConf = field(default_factory=WorkloadConf)
    sim: SimConf = field(default_factory=SimConf)
    logger: LoggerConf = field(default_factory=LoggerConf)
    seed: int = 0
    out_dir: str | None = None
    """Run folder; by default Hydra's (runs/<command>/<time>, or the multirun job folder)."""


@dataclass
class TrainConfig(_World):
    env: EnvConf = field(default_factory=EnvConf)
    agent: AgentConf = field(default_factory=AgentConf)
    train: TrainConf = field(default_factory=TrainConf)
    imitation: ImitationSettings = field(default_factory=ImitationSettings)
    """Behavioural cloning from agents.teacher.CausalTeacher before RL."""
    resume: str | None = None
    """A checkpoint folder to continue training from."""


@dataclass
class EvaluateConfig(_World):
    checkpoint: list[str] = field(default_factory=list)
    """Agent checkpoint folders (each with agent.json and model.zip)."""
    policies: list[str] = field(default_factory=lambda: ["btb", "cache_aware", "least_load"])
    progress: bool = True


@dataclass
class TuneBtbConfig(_World):
    x: int = 2
    y: int = 256
    z: float = 1.0
    m: int = 4


def register_configs() -> None:
    """Make the schemas known to Hydra (``conf/*.yaml`` extend them)."""
    store = ConfigStore.instance()
    store.store(name="train_schema", node=TrainConfig)
    store.store(name="evaluate_schema", node=EvaluateConfig)
    store.store(name="tune_btb_schema", node=TuneBtbConfig)
    # out_dir is null unless given (``oc.select`` would keep the null); this falls back
    # to the dated default instead (conf/*.yaml: hydra.run.dir, hydra.sweep.dir).
    if not OmegaConf.has_resolver("btb_dir"):
        OmegaConf.register_new_resolver(
            "btb_dir", lambda chosen, default: default if chosen in (None, "") else chosen
        )


def cluster_of(cfg: Any) -> ClusterSpec:
    """The cluster the model and cluster groups describe."""
    return ClusterSpec.uniform(cfg.model.name, cfg.cluster.node, int(cfg.cluster.n_nodes))


def setup_label(cfg: Any) -> str:
    """The setup a run simulated, for result rows and run names: the published setup's
    name (as ``experiments.compare`` writes it) when the model and cluster groups are
    that setup's (a model alias such as ``70b`` counts as its preset), else
    ``MODEL_NODE_xN`` (``llama-3.3-70b_4xH100_x6``)."""
    model, node, n_nodes = str(cfg.model.name), str(cfg.cluster.node), int(cfg.cluster.n_nodes)
    with contextlib.suppress(ConfigError):  # an unknown model: cluster_of reports it
        model = model_preset(model).name  # an alias (70b, glm52) as the preset it names
    chosen = (model, node, n_nodes)
    if SETUPS.get(cfg.setup.name) == chosen:
        return str(cfg.setup.name)
    same = [name for name, spec in SETUPS.items() if spec == chosen]
    return same[0] if same else f"{model}_{node}_x{n_nodes}"


def workload_label(cfg: Any) -> str:
    """The workload a run used: its registered name, followed by the generator
    parameters the workload group changes, if any
    (``bursted_synthetic[n_bursts=2,burst_requests=40]``)."""
    params = OmegaConf.to_container(cfg.workload.params, resolve=True)
    assert isinstance(params, dict)
    if not params:
        return str(cfg.workload.name)
    changed = ",".join(f"{key!s}={value!s}" for key, value in params.items())
    return f"{cfg.workload.name}[{changed}]"


def sim_of(cfg: Any) -> SimConfig:
    """The simulator settings of the sim group."""
    return SimConfig(**{key: cfg.sim[key] for key in cfg.sim})
