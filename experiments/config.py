"""Structured configs (Hydra 1.3) for the training, evaluation and tuning commands.

The dataclasses are the schema: Hydra checks every value against the field's
type and rejects keys the schema does not have. The YAML files under ``conf/``
choose the values: one folder per group (``setup``, ``model``, ``cluster``,
``workload``, ``sim``, ``env``, ``agent``, ``logger``), one file per option.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import re
import typing
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from agents.imitation_settings import ImitationSettings
from agents.improvement_settings import ImprovementSettings
from envs.cluster_env import ClusterEnv
from envs.route_warm import RouteWarmEnv
from envs.sim import SETUPS, ClusterSpec, ConfigError, SimConfig
from envs.sim.config import DEFAULT_SETUP
from envs.sim.errors import NamedFields, echoed
from envs.sim.timing import (
    GpuSpec,
    ModelSpec,
    NodeCosts,
    gpu_preset,
    model_preset,
    parse_node,
)
from envs.thresholds import ThresholdsEnv
from envs.workloads.bursted import PUBLISHED_SEED
from envs.workloads.plugins import FACTORY_OPTION, is_plugin, misplaced_factory
from envs.workloads.registry import DEFAULT_WORKLOAD
from envs.workloads.trace_file import (
    TRACE_FIELDS,
    TRACE_WORKLOAD,
    TraceOptions,
    TracePlan,
    changed_fields,
    check_trace_path,
    plan_trace,
    trace_label,
)
from experiments._cli import TRACE_PATHS
from experiments._cli import naming_value as naming_option
from experiments._io import claim_new_out_dir, nearest_existing

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


def schema_of(name: str, source: Any, skip: Collection[str] = (), doc: str = "") -> type[Any]:
    """A structured config (a dataclass Hydra checks values against) whose fields are
    ``source``'s: a dataclass's fields, or a callable's keyword parameters (those
    not in ``skip``), with their names, types and defaults. The source is the one
    place each is set; the schema is derived from it, never re-typed."""
    hints = typing.get_type_hints(source)
    if dataclasses.is_dataclass(source):
        found = [(f.name, hints[f.name], f.default) for f in dataclasses.fields(source)]
    else:
        found = [
            (p.name, hints[p.name], p.default)
            for p in inspect.signature(source).parameters.values()
            if p.default is not inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD
        ]
    schema = dataclasses.make_dataclass(
        name,
        [(n, kind, field(default=default)) for n, kind, default in found if n not in skip],
        namespace={"__doc__": doc or f"The fields of {source.__qualname__}."},
    )
    schema.__module__ = __name__
    return schema


_DEFAULT_MODEL, _DEFAULT_NODE, _DEFAULT_N_NODES = SETUPS[DEFAULT_SETUP]


def _own_fields(source: Any) -> list[tuple[str, Any, Any]]:
    """``source``'s fields but its name, each optional (None: not given): a model or
    GPU of one's own is given field by field beside its name, and a preset none."""
    hints = typing.get_type_hints(source)
    return [
        (f.name, typing.Optional[hints[f.name]], field(default=None))  # noqa: UP045
        for f in dataclasses.fields(source)
        if f.name != "name"
    ]


ModelConf = dataclasses.make_dataclass(
    "ModelConf",
    [("name", str, field(default=_DEFAULT_MODEL)), *_own_fields(ModelSpec)],
    namespace={
        "__doc__": """The model group: ``name``, a preset of envs.sim.MODELS (or an alias);
        or a new name and ModelSpec's fields (total_params, active_params,
        bytes_per_elem, layers, kv_heads, head_dim; attn_dim and max_context_tokens
        optional), a model of one's own (:func:`model_of`)."""
    },
)
ModelConf.__module__ = __name__
MODEL_FIELDS = tuple(f.name for f in dataclasses.fields(ModelSpec) if f.name != "name")
"""ModelSpec's fields a model of one's own gives (the model group's, but ``name``)."""
GPU_FIELDS = tuple(f.name for f in dataclasses.fields(GpuSpec) if f.name != "name")
"""GpuSpec's fields a GPU kind of one's own gives, every one (``cluster.gpus.NAME``)."""


@dataclass
class ClusterConf:
    node: str | None = _DEFAULT_NODE
    """GPUs per node and GPU kind, e.g. 8xH100 (a preset's or one of ``gpus``)."""
    n_nodes: int = _DEFAULT_N_NODES
    """Replicas."""
    nodes: list[str] | None = None
    """A cluster of mixed nodes instead of node and n_nodes, one entry a node:
    ``[4xH100, 4xH100, 8xH200]`` (null: n_nodes of ``node``)."""
    gpus: dict[str, Any] = field(default_factory=dict)
    """GPU kinds of one's own by name, each with every GpuSpec field:
    ``{MYGPU: {flops: 1.2e15, hbm_bw: 4e12, hbm_bytes: 96e9, pcie_bw: 55e9, rdma_bw:
    50e9, nvme_bw: 7e9}}``; ``node`` and ``nodes`` then name ``4xMYGPU``."""


@dataclass
class SetupConf:
    name: str = DEFAULT_SETUP
    """A label for results; the model and cluster groups say what it is."""


@dataclass
class WorkloadConf(TraceOptions):
    """A registered workload, or ``name: trace`` and a file (the TraceOptions fields:
    ``workload=trace workload.path=FILE``; they apply to nothing else), or a function
    of one's own (``workload=plugin workload.factory=MODULE:FUNCTION``)."""

    name: str = DEFAULT_WORKLOAD
    """A registered workload (envs.workloads.registry), or trace; ``workload=plugin``
    makes it ``plugin:<factory>``."""
    factory: str = ""
    """With ``workload=plugin``: MODULE:FUNCTION, a generator function of one's own
    (envs.workloads.plugins; ``workload.factory=examples.own_workload:make_rows``)."""
    seed: int = PUBLISHED_SEED
    """Generator seed (the published one by default)."""
    train_pool: int | None = 4
    """Training windows in the episode pool (None: all of the train split)."""
    eval_windows: int | None = 3
    """Windows evaluated: the held-out test windows after training, and evaluate's
    on its split (``split=val`` too: not ``val_windows``; None: all)."""
    val_windows: int | None = 3
    """Validation windows that choose the checkpoint (train.val_every; None: all)."""
    params: dict[str, Any] = field(default_factory=dict)
    """Generator parameter overrides, e.g. {burst_requests: 50}."""


SimConf = schema_of(
    "SimConf",
    SimConfig,
    doc="""envs.sim.SimConfig's fields (its docstrings are the reference). The accounting
    settings from hbm_hit_load on are null by default: "as causal_kv has it"
    (btb-gym's physics under causal KV, the reference simulator's under
    causal_kv=false, i.e. sim=reference); set one to switch it alone.""",
)

# The env's own keyword arguments (envs.ClusterEnv, envs.ThresholdsEnv): the run sets
# these from the other groups (setup, workload, sim, seed); the rest are the env group's.
ENV_SET_BY_THE_RUN = (
    "setup",
    "workload",
    "split",
    "n_windows",
    "windows",
    "workload_params",
    "sim",
    "data_seed",
    "seed",
    "render_mode",
)
_ENV_ARGS = schema_of("_EnvArgs", ClusterEnv.__init__, skip=ENV_SET_BY_THE_RUN)
_THRESHOLDS_ARGS = schema_of("_ThresholdsArgs", ThresholdsEnv.__init__)
ENV_ARGS = tuple(f.name for f in dataclasses.fields(_ENV_ARGS))
"""The env group's fields that are gymnasium.make arguments of every env kind."""
THRESHOLDS_ARGS = tuple(f.name for f in dataclasses.fields(_THRESHOLDS_ARGS))
"""The env group's fields that are gymnasium.make arguments of btb/Thresholds-v0 only."""
_ROUTE_WARM_ARGS = schema_of("_RouteWarmArgs", RouteWarmEnv.__init__)
ROUTE_WARM_ARGS = tuple(f.name for f in dataclasses.fields(_ROUTE_WARM_ARGS))
"""The env group's fields that are gymnasium.make arguments of btb/RouteWarm-v0 only
(``speculate``)."""
ENV_ARG_DEFAULTS: dict[str, Any] = {
    f.name: f.default
    for f in (
        *dataclasses.fields(_ENV_ARGS),
        *dataclasses.fields(_THRESHOLDS_ARGS),
        *dataclasses.fields(_ROUTE_WARM_ARGS),
    )
}
"""Each env argument's default, the envs' own (what a checkpoint that does not
record an argument was trained with)."""
DEFAULT_N_ENVS = 16
"""Training's parallel envs in one process (``agents.vec_env.InProcessVecEnv``, SB3's
DummyVecEnv without its deep copy of the infos): one batched forward pass
serves them all (``env.n_envs``)."""
LATER_ENV_ARGS = (
    "reward_baseline",
    "reward_timing",
    "hints",
    "spare_features",
    "time_unit",
    "step_wait",
    "speculate",
    "cache_actions",
    "eft_rules",
    "spread_rules",
    "y_tokens",
)
"""Env arguments added after agents were first saved: left out of a run's
env_kwargs at their default, so older agents' env arguments stay as they were."""


def _schema_fields(schema: Any) -> list[tuple[str, Any, Any]]:
    return [(f.name, f.type, field(default=f.default)) for f in dataclasses.fields(schema)]


EnvConf = dataclasses.make_dataclass(
    "EnvConf",
    [
        ("kind", str, field(default="route")),
        *_schema_fields(_ENV_ARGS),
        ("normalize_reward", bool, field(default=False)),
        *_schema_fields(_THRESHOLDS_ARGS),
        *_schema_fields(_ROUTE_WARM_ARGS),
        ("n_envs", int, field(default=DEFAULT_N_ENVS)),
        ("vec", str, field(default="dummy")),
    ],
    namespace={
        "__doc__": """The env group: ``kind`` (route: btb/Route-v0, route_warm:
        btb/RouteWarm-v0, thresholds: btb/Thresholds-v0); the envs' own keyword
        arguments (reward_scale, slo_s, ..., epoch_s for thresholds: their defaults
        and meaning are the envs'); normalize_reward (SB3's VecNormalize of rewards);
        n_envs and vec (dummy or subproc) for training."""
    },
)
EnvConf.__module__ = __name__


@dataclass
class AgentConf:
    algo: str = "ppo"
    """ppo, a2c, dqn or maskable_ppo."""
    net: str = "set"
    """set (node-set network, works on other cluster sizes) or mlp."""
    hidden: int = 64
    critic: str = "shared"
    """The node-set critic: shared (the actor's body), separate (its own) or detached
    (the actor's context, gradient stopped)."""
    lr_schedule: str = "constant"
    """constant, or linear (hyperparams.learning_rate down to 0 over the run)."""
    warm_prior: float = 0.0
    """route_warm with the node-set network, fresh weights only: the warm heads'
    starting log-odds of "yes" (-4: each node warmed with probability 0.018 at
    first; 0: even odds). A prior towards not copying, learned from there."""
    clone_kl_coef: float = 0.0
    """Fine-tuning with train.init_from, node-set actor-critics: the loss adds this
    times KL(starting network || policy) on each minibatch's observations, a pull
    towards the clone (0: the algorithm's own loss)."""
    clone_kl_schedule: str = "constant"
    """constant, or linear (clone_kl_coef down to 0 over the run)."""
    init_logit_scale: float = 1.0
    """Fine-tuning with train.init_from: the started agent's action logits times this
    (its action head's weights and biases scaled). Greedy actions stay the same; above
    1 the policy samples closer to them and a small update flips fewer of them. A
    power of 2 scales exactly (the same greedy actions to the bit)."""
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
class CurriculumStage:
    """One stage of ``train.curriculum``: until ``until`` env steps, episodes are
    segments of the train windows, each from one burst's start to the start of
    the burst ``bursts`` later (``envs.windows.burst_segments``)."""

    bursts: int = 1
    until: int = 0


@dataclass
class TrainConf:
    total_timesteps: int = 20_000
    checkpoint_every: int = 10_000
    """Save a checkpoint every this many steps (0: only at the end)."""
    run_state_max_mb: float = 256.0
    """The most MB (10**6 bytes) of a DQN's replay buffer a checkpoint's
    ``run_state.pkl`` may hold: a run whose buffer would take more leaves it out of
    its checkpoints, said at its start, and ``resume=`` from them is not exact (256:
    some 660,000 transitions of the default observation, 388 bytes each; each
    checkpoint holds its own)."""
    val_every: int = 0
    """Score the model on the validation windows at the start, every this many steps
    and at the end, and keep the best as ``agent/`` (0: no validation, the last)."""
    eval_policies: list[str] = field(default_factory=lambda: ["btb", "cache_aware", "least_load"])
    evaluate: bool = True
    progress: bool = True
    torch_threads: int = 1
    """Torch threads of the job (rollouts' forward passes, cloning, rollout
    improvement's fits, evaluation)."""
    update_threads: int = 2
    """Torch threads of ``learn()``'s gradient updates, at most the CPUs the job
    may use (``agents.callbacks.UpdateThreads``): about a fifth off each update
    on two cores, the same weights as with one."""
    init_from: str | None = None
    """A saved agent (folder) whose weights the new network starts from (every
    parameter of the same name and shape; e.g. a separate critic starts fresh)."""
    critic_warmup_steps: int = 0
    """Env steps at the start of RL that train the critic alone (policy frozen)."""
    eval_seed: int | None = None
    """The simulator's random stream validation and the evaluation after training
    draw (``[eval_seed, window position]``, as ``evaluate seed=`` does); by default
    the run's ``seed``, so training seeds are also scored on different streams
    (baselines' tie-breaks, BTB inside a thresholds agent). Fix it to compare the
    runs of a seed sweep on one stream: a sweep names a best job only then."""
    curriculum: list[CurriculumStage] = field(default_factory=list)
    """Stages of a curriculum over burst segments, in order (none: whole windows
    from the start): e.g. ``[{bursts: 1, until: 30000}, {bursts: 2, until: 60000}]``
    trains on the train windows cut at every burst's start up to step 30,000, at
    every second burst's start up to 60,000, then on whole windows. A segment
    starts ``curriculum_lead_s`` before a burst (a group, ``group_id``, of at least
    ``curriculum_min_requests`` requests) and ends that long before the burst
    ``bursts`` later starts (``envs.windows.burst_segments``)."""
    curriculum_lead_s: float = 5.0
    curriculum_min_requests: int = 32
    val_score: str = "mean"
    """What validation minimises: ``mean`` (mean TTFT over the windows' pooled
    requests), ``geomean`` (geometric mean of the windows' mean TTFTs: every window
    counts by its relative change, whatever its scale) or ``worst_family`` (the
    largest ratio, over the windows' families, of a family's geometric mean to its
    value at the first validation: a checkpoint wins only by doing better on every
    family than the starting model)."""


@dataclass
class _World:
    """The groups every command composes: what is simulated, and where it is logged."""

    setup: SetupConf = field(default_factory=SetupConf)
    model: Any = field(default_factory=ModelConf)  # a derived schema (mypy cannot name it)
    cluster: ClusterConf = field(default_factory=ClusterConf)
    workload: WorkloadConf = field(default_factory=WorkloadConf)
    sim: Any = field(default_factory=SimConf)  # a derived schema (mypy cannot name it)
    logger: LoggerConf = field(default_factory=LoggerConf)
    seed: int = 0
    out_dir: str | None = None
    """Run folder; by default Hydra's (runs/<command>/<time>__<workload>, a new one: ``-2``,
    ... added for a run started in the same second as another; or the multirun job folder)."""
    overwrite: bool = False
    """Replace the run in an out_dir that holds one (else such an out_dir is refused)."""


@dataclass
class TrainConfig(_World):
    env: Any = field(default_factory=EnvConf)
    agent: AgentConf = field(default_factory=AgentConf)
    train: TrainConf = field(default_factory=TrainConf)
    imitation: ImitationSettings = field(default_factory=ImitationSettings)
    """Behavioural cloning from agents.teacher.CausalTeacher before RL."""
    improvement: ImprovementSettings = field(default_factory=ImprovementSettings)
    """Rollout policy improvement (agents.rollout_improvement) before PPO's steps."""
    resume: str | None = None
    """A checkpoint folder to continue training from."""


@dataclass
class EvaluateConfig(_World):
    checkpoint: list[str] = field(default_factory=list)
    """Agent checkpoint folders (each with agent.json and model.zip)."""
    policies: list[str] = field(default_factory=lambda: ["btb", "cache_aware", "least_load"])
    policy_kwargs: dict[str, Any] = field(default_factory=dict)
    """Settings of the baselines run, ``+policy_kwargs.btb.y_tokens=8192`` (compare's
    ``policy_kwargs=btb.y_tokens=8192``; checked as compare checks them), and of the
    agents (``agents.adapter.AGENT_SETTINGS``: ``+policy_kwargs.ppo_thresholds.y_tokens=8192``)."""
    progress: bool = True
    split: str = "test"
    """Windows to evaluate on: test (final tables) or val (model choices)."""
    stochastic: bool = False
    """Also evaluate each agent sampling its actions (rows ``<agent>_stochastic``)."""
    timeline_window: int = 0
    """Which of the evaluated windows (its position, from 0) the timeline charts draw."""
    allow_seen_windows: bool = False
    """Evaluate an agent on windows of the trace it was trained on that overlap its
    own train or validation windows in time (refused otherwise: ``experiments.trained_on``)."""


@dataclass
class TuneBtbConfig(_World):
    x: int = 2
    y_tokens: int = 65536
    """BTB's Y in tokens (the published 256 blocks of 256 tokens)."""
    z: float = 1.0
    m: int = 4


COMMAND_SCHEMAS: dict[str, type[Any]] = {
    "experiments.train": TrainConfig,
    "experiments.evaluate": EvaluateConfig,
    "experiments.tune_btb": TuneBtbConfig,
}
"""Each Hydra command's schema (stored as ``<name>_schema``: ``conf/<name>.yaml``)."""


def register_configs() -> None:
    """Make the schemas known to Hydra (``conf/*.yaml`` extend them)."""
    store = ConfigStore.instance()
    for command, schema in COMMAND_SCHEMAS.items():
        store.store(name=f"{command.rpartition('.')[2]}_schema", node=schema)
    for name, node in setup_options().items():
        store.store(group="setup", name=name, node=node, package="_global_")
    # out_dir is null unless given (``oc.select`` would keep the null); this falls back
    # to the dated default instead (conf/*.yaml: hydra.run.dir, hydra.sweep.dir). Cached:
    # a config resolves its folder once (Hydra copies the cache to a sweep's jobs).
    if not OmegaConf.has_resolver("btb_dir"):
        OmegaConf.register_new_resolver("btb_dir", run_folder, use_cache=True)
    # the run folder names the workload: its name, or trace-<file name> for a trace
    if not OmegaConf.has_resolver("btb_workload"):
        OmegaConf.register_new_resolver("btb_workload", run_folder_workload)
    # the cluster's node count, cluster.nodes' entries where given (tune_btb's M range)
    if not OmegaConf.has_resolver("btb_nodes"):
        OmegaConf.register_new_resolver("btb_nodes", nodes_count)


DEFAULT_RUN_PARENTS: dict[Path, Path] = {}
"""The parent of each dated default run folder resolved so far (``runs/<kind>``), and
the nearest of its ancestors that existed when it was first resolved, before Hydra
made the folder: what a rejected run's tidy-up keeps (``experiments.jobs``)."""


_CLAIMING: list[tuple[str, Callable[[Path], None] | None]] = []
"""The Hydra command running in this process (``jobs.hydra_entry`` sets it), if any,
and what it calls with an ``out_dir`` it is given."""


@contextlib.contextmanager
def claiming_run_folders(
    command: str, chosen: Callable[[Path], None] | None = None
) -> Iterator[None]:
    """While Hydra command ``command`` runs, the ``btb_dir`` resolver claims the default
    folder it names (:func:`run_folder`), and calls ``chosen`` with an ``out_dir``
    given (on the command line or in a config file) before Hydra writes its files
    there; a config composed elsewhere (a test, a notebook) only names it."""
    _CLAIMING.append((command, chosen))
    try:
        yield
    finally:
        _CLAIMING.pop()


def run_folder(chosen: Any, default: str) -> Any:
    """The ``btb_dir`` resolver: ``chosen`` (``out_dir``; passed to
    :func:`claiming_run_folders`' ``chosen`` first) when given, else the dated
    ``default``, whose parent's existing ancestors are noted (:data:`DEFAULT_RUN_PARENTS`).
    While a Hydra command runs (:func:`claiming_run_folders`) it is a new folder, claimed
    now, before Hydra writes its files in it: ``default``, or ``default-2``, ... when
    a run started in the same second has it (``_io.claim_new_out_dir``; ``jobs.run_dir``
    keeps that claim)."""
    if chosen not in (None, ""):
        if _CLAIMING and _CLAIMING[-1][1] is not None:
            _CLAIMING[-1][1](Path(str(chosen)))
        return chosen
    parent = Path(default).parent
    DEFAULT_RUN_PARENTS.setdefault(parent.resolve(), nearest_existing(parent).resolve())
    if not _CLAIMING:
        return default
    return str(claim_new_out_dir(default, f"{_CLAIMING[-1][0]}: out_dir").path)


def setup_options() -> dict[str, dict[str, Any]]:
    """The ``setup`` group's options, one per published setup of ``envs.sim.SETUPS``
    (the one table of them): each chooses the ``model`` and ``cluster`` groups'
    options (``setup=glm45_h100x4`` is ``model=glm-4.5 cluster=4xH100_x4``; a
    ``cluster=`` or ``model=`` on the command line still wins) and names the setup."""
    return {
        name: {
            "defaults": [
                {"override /model": model},
                {"override /cluster": f"{node}_x{n_nodes}"},
                "_self_",
            ],
            "setup": {"name": name},
        }
        for name, (model, node, n_nodes) in SETUPS.items()
    }


def run_folder_workload(name: str, path: str | None, params: Any = None) -> str:
    """The workload part of a Hydra run folder's name: the workload as result rows
    name it, with the generator parameters changed (``workload.params``), as
    ``compare``'s folders name it (``bursted_synthetic-burst_requests-30-``), or
    ``trace-<file name>`` for ``workload=trace`` (a file's name, never a path), or
    ``trace`` before the file is known (a sweep over ``workload.path``: each job's
    folder is in the sweep's, ``trace``) or when none is given (the job's own check
    then says so); as ``_io.folder_part`` makes it: no blanks or brackets, cut when
    long."""
    from experiments._cli import workload_label
    from experiments._io import folder_part

    if name == TRACE_WORKLOAD:
        if not path:
            return TRACE_WORKLOAD
        return folder_part(f"{TRACE_WORKLOAD}-{Path(str(path)).name}")
    changed = (
        OmegaConf.to_container(params, resolve=True) if OmegaConf.is_config(params) else params
    )
    if not isinstance(changed, dict):  # (none given)
        changed = {}
    return folder_part(workload_label(str(name), {str(k): v for k, v in changed.items()}))


def cluster_of(cfg: Any) -> ClusterSpec:
    """The cluster the model and cluster groups describe: ``cluster.n_nodes`` of
    ``cluster.node``, or the nodes of ``cluster.nodes`` (not both given), of the
    preset GPUs and those of ``cluster.gpus``, serving :func:`model_of`'s model; a
    value that makes no cluster is named by its config path (``cluster.node='0xH100'
    ...: ...``)."""
    model = model_of(cfg)
    own = gpus_of(cfg)
    nodes = cfg.cluster.get("nodes")
    if nodes is None:
        if cfg.cluster.node is None:
            raise ConfigError(  # (as the command line spelled it: costs' node=)
                null_refusal("cluster.node", _typed_as("cluster.node"))
                + value_origin("cluster.node")
            )
        node = _node_of(cfg, "cluster.node", cfg.cluster.node, model, own)
        with naming_fields({"n_nodes": "cluster.n_nodes"}):
            return ClusterSpec.uniform(model, node, int(cfg.cluster.n_nodes))
    _refuse_node_beside_nodes(cfg)
    if not _is_sequence(nodes) or not nodes:
        raise ConfigError(
            f"cluster.nodes must be a list of one node kind or more ([4xH100,8xH200]), "
            f"got {echoed(_plain(nodes))}{value_origin('cluster.nodes')}"
        )
    kinds: dict[str, Any] = {}  # each kind made and checked once
    for i, text in enumerate(nodes):
        if not isinstance(text, str):
            raise ConfigError(
                f"cluster.nodes[{i}] must be a node kind like 4xH100, got "
                f"{echoed(_plain(text))}{value_origin('cluster.nodes')}"
            )
        if text not in kinds:
            kinds[text] = _node_of(cfg, f"cluster.nodes[{i}]", text, model, own)
    return ClusterSpec(model, tuple(kinds[text] for text in nodes))


def _node_of(cfg: Any, path: str, text: Any, model: ModelSpec, own: Mapping[str, GpuSpec]) -> Any:
    """The node ``text`` at config ``path`` names, which must hold ``model``'s weights."""
    origin_path = path.partition("[")[0]
    with naming_option(_typed_as(path), text, lambda _: value_origin(origin_path)):
        node = parse_node(text, own)
        try:
            NodeCosts(node, model, node_label="a node")  # its HBM holds the model's weights
        except ConfigError as error:  # the pair clashes: where the model came from too
            origin = value_origin("model.name")
            if not origin:
                raise
            said = f"{_typed_as('model.name')}={cfg.model.name!r}"
            raise ConfigError(f"{error} ({said} {origin[2:]}") from None
    return node


def _refuse_node_beside_nodes(cfg: Any) -> None:
    """``cluster.nodes`` replaces ``cluster.node`` and ``cluster.n_nodes``: one of
    them given by the user too (on the command line, in the ``+experiment`` file,
    or in the cluster option's file that gives ``nodes``) is refused, not ignored, and
    so is a cluster option chosen on the command line (``cluster=4xH100_x2``) beside
    ``nodes`` given there or in the ``+experiment`` file; the default option's own
    node and n_nodes do not count."""
    from hydra.core.hydra_config import HydraConfig

    nodes_where = _where_set("cluster.nodes")
    if (
        nodes_where is not None
        and nodes_where[0] in ("line", "experiment")
        and HydraConfig.initialized()  # (a key=value command has no cluster= option)
    ):
        for override in _parsed_overrides(list(HydraConfig.get().overrides.task)):
            if override.key_or_group == "cluster" and not override.is_delete():
                said = value_origin("cluster.nodes")  # (from the command line)
                if nodes_where[0] == "experiment":  # (cluster= from the command line; ...)
                    said = f" (cluster= from the command line; cluster.nodes {said[2:]}"
                raise ConfigError(
                    f"cluster={override.value()} and cluster.nodes are both given{said}: "
                    "cluster.nodes lists every node (give it alone, or the cluster option)"
                )
    # what else the command takes: costs' tables are one node's (it takes no n_nodes)
    other = "node and n_nodes"
    if _KEY_VALUE and not _KEY_VALUE[-1][3]:
        other = f"{_typed_as('cluster.node')} alone"
    for key in ("node", "n_nodes"):
        if cfg.cluster.get(key) is None:  # null gives no value (cluster.node=null)
            continue
        where = _where_set(f"cluster.{key}")
        if where is None or nodes_where is None:
            return
        if where[0] in ("line", "experiment") or (where[0] == "group" == nodes_where[0]):
            path = f"cluster.{key}"
            raise ConfigError(
                f"{_typed_as(path)} and cluster.nodes are both given{value_origin(path)}: "
                f"cluster.nodes lists every node (give it alone, or {other})"
            )


def model_of(cfg: Any) -> ModelSpec:
    """The model group's model: the preset (or alias) ``model.name`` names, or, when
    any of ModelSpec's fields is given too, a model of one's own of that (new)
    name, every field checked by ModelSpec and named ``model.<field>``."""
    given = {name: cfg.model.get(name) for name in MODEL_FIELDS}
    given = {name: _plain(value) for name, value in given.items() if value is not None}
    name = cfg.model.name
    said = _typed_as("model.name")
    if not given:
        with naming_value(said, name, "model.name"):
            return model_preset(name)
    first = next(iter(given))
    preset = _preset_name(model_preset, name)
    if preset:
        raise ConfigError(
            f"model.{first} is given, but {said}={name!r} is the preset {preset} "
            f"(give a model of one's own a new name){value_origin(f'model.{first}')}"
        )
    required = [
        f.name
        for f in dataclasses.fields(ModelSpec)
        if f.name != "name" and f.default is dataclasses.MISSING
    ]
    missing = [field for field in required if field not in given]
    if missing:
        origin = value_origin(f"model.{first}")
        raise ConfigError(
            f"model.{missing[0]} is missing: {said}={name!r} is no preset, so a model "
            f"of one's own gives each of {', '.join(required)}"
            + (f" (model.{first} {origin[2:]}" if origin else "")
        )
    with naming_fields({field: f"model.{field}" for field in MODEL_FIELDS}):
        return ModelSpec(str(name), **given)


def gpus_of(cfg: Any) -> dict[str, GpuSpec]:
    """The GPU kinds of one's own of ``cluster.gpus``, by name: every GpuSpec field
    given and checked by GpuSpec, named ``cluster.gpus.NAME.<field>``; a preset's
    name is refused."""
    own: dict[str, GpuSpec] = {}
    for name, figures in (_plain(cfg.cluster.get("gpus")) or {}).items():
        path = f"cluster.gpus.{name}"
        origin = value_origin(path) or _typed_below(path)
        preset = _preset_name(gpu_preset, name)
        if preset:
            raise ConfigError(
                f"{path} is named as the preset {preset}: give a GPU of one's own a new "
                f"name{origin}"
            )
        if not isinstance(figures, dict):
            raise ConfigError(
                f"{path} must be the GPU's figures ({', '.join(GPU_FIELDS)}), got "
                f"{echoed(figures)}{origin}"
            )
        unknown = [key for key in figures if key not in GPU_FIELDS]
        if unknown:
            raise ConfigError(
                unknown_key_message(f"{path}.{unknown[0]}", GPU_FIELDS, origin).replace(
                    f"{path} takes", "a GPU of one's own takes"
                )
            )
        missing = [key for key in GPU_FIELDS if figures.get(key) is None]
        if missing:
            raise ConfigError(
                f"{path}.{missing[0]} is missing: a GPU of one's own gives each of "
                f"{', '.join(GPU_FIELDS)}{origin}"
            )
        with naming_fields({key: f"{path}.{key}" for key in GPU_FIELDS}):
            own[str(name)] = GpuSpec(str(name), **figures)
    return own


def _preset_name(preset: Callable[[str], Any], name: Any) -> str:
    """The name of the preset ``preset(name)`` finds, or '' when there is none."""
    try:
        return str(preset(str(name)).name)
    except ConfigError:
        return ""


def _plain(value: Any) -> Any:
    """A config value as plain Python (a list for a ListConfig)."""
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def _is_sequence(value: Any) -> bool:
    return isinstance(_plain(value), list)


_KEY_VALUE: list[tuple[str, frozenset[str], Mapping[str, str], bool]] = []
"""While :func:`cluster_from_options` builds a ``key=value`` command's cluster: its
``setup=``, the cluster options it was given (what :func:`_where_set` says), the
short options some of them were given as (what :func:`_typed_as` says) and whether
the command takes ``cluster.n_nodes`` (what :func:`_refuse_node_beside_nodes` offers)."""
_FROM_SETUP = ("model.name", "cluster.node", "cluster.n_nodes")
"""What a ``key=value`` command's ``setup=`` gives when no option changes it."""


_NULL_HINTS = {
    "model.name": "a model preset's name ({typed}=llama-3.3-70b), or a new name beside "
    "ModelSpec's fields (a model of one's own)",
    "cluster.node": "a node kind ({typed}=4xH100) or the nodes (cluster.nodes=[4xH100,8xH200])",
    "cluster.n_nodes": "a node count ({typed}=4), or the nodes (cluster.nodes=[4xH100,8xH200])",
}
"""What :func:`null_refusal` asks for instead of a null, by config path (else a value)."""


def null_refusal(path: str, typed: str = "") -> str:
    """``model is null: give a model preset's name (model=llama-3.3-70b), ...``: a null
    given to config ``path``, whose schema takes none (OmegaConf says ``field
    'model.name' is not Optional``), named ``typed`` (as the command line spelled it:
    ``costs``' ``model=``; ``path`` itself by default), as ``cluster.node is null``
    is said; the origin is the caller's to add."""
    typed = typed or path
    return f"{typed} is null: give " + _NULL_HINTS.get(path, "a value").format(typed=typed)


def _typed_as(path: str) -> str:
    """Config ``path`` as the command line spelled it: while :func:`cluster_from_options`
    builds a ``key=value`` command's cluster, the short option it was given as
    (``costs``' ``node=`` for ``cluster.node``, ``model=`` for ``model.name``); else
    ``path`` itself."""
    return _KEY_VALUE[-1][2].get(path, path) if _KEY_VALUE else path


def cluster_from_options(
    command: str,
    setup: str,
    given: Mapping[str, str],
    added: Collection[str] = frozenset(),
    spelled: Mapping[str, str] | None = None,
    takes_n_nodes: bool = True,
) -> tuple[Any, ClusterSpec]:
    """The cluster a ``key=value`` command (``compare``, ``costs``) runs on, and the
    config it is made of, as the Hydra commands' ``setup``, ``model`` and ``cluster``
    groups hold it: ``setup`` (a published setup) gives ``model.name``,
    ``cluster.node`` and ``cluster.n_nodes``, and ``given`` (the command line's
    options of a cluster of one's own, ``experiments._cli.split_cluster_options``)
    change them, each read as Hydra reads an override (one of ``added``, given with
    ``+``, is refused as Hydra refuses it: a value but a list or dict for a key that
    holds one, ``+cluster.node=8xH200``) (``8e9`` a float, ``null``
    None; ``cluster.nodes``' brackets optional, as the command's other lists') and
    typed by the groups' schema. :func:`cluster_of` makes the cluster, the one
    builder of both kinds of command, so the names and checks are the Hydra
    commands' (``cluster.nodes`` beside ``cluster.node`` is refused; an error names
    ``model.<field>`` or ``cluster.gpus.NAME.<field>`` and says ``(from the command
    line)``, or ``(from setup=NAME)`` for what the setup gave). A key the groups do
    not have, or a value their schema refuses, is one line naming the option.
    Beside ``cluster.nodes`` the config records ``cluster.node`` null and
    ``cluster.n_nodes`` the number of nodes, as a Hydra job does. ``spelled``: the
    options of ``given`` the command line gave under a short name of the command's
    (``costs``' ``node=`` is ``cluster.node``: ``{"cluster.node": "node"}``), which
    its errors name as typed. ``takes_n_nodes``: whether the command takes ``cluster.n_nodes``
    (``costs`` does not: its tables are one node's, so ``cluster.nodes`` beside
    ``cluster.node`` is told to give either alone)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException, ValidationError

    from experiments._cli import FROM_COMMAND_LINE, UsageError, unknown_option, value_said

    model, node, n_nodes = SETUPS[setup]
    cfg = OmegaConf.create(
        {
            "setup": SetupConf(name=setup),
            "model": ModelConf(name=model),
            "cluster": ClusterConf(node=node, n_nodes=n_nodes),
        }
    )
    known = [
        "model.name",
        *(f"model.{name}" for name in MODEL_FIELDS),
        *(f"cluster.{f.name}" for f in dataclasses.fields(ClusterConf) if f.name != "gpus"),
        "cluster.gpus.NAME.<field>",
    ]
    parser = OverridesParser.create()
    spelled = dict(spelled or {})
    for key, text in given.items():
        if key not in known and not (key.startswith("cluster.gpus.") and len(key) > 13):
            raise unknown_option(command, key, f"a cluster of one's own takes: {', '.join(known)}")
        body = text.strip()
        if key == "cluster.nodes" and body.lower() != "null":
            if (body[:1] == "[") != (body[-1:] == "]"):  # (else named as rewritten below)
                raise UsageError(
                    f"{command}: {value_said(key, text, FROM_COMMAND_LINE)}: its brackets do not "
                    "pair "
                    "(cluster.nodes=[4xH100,8xH200], or without them: 4xH100,8xH200)"
                )
            inner = body[1:-1] if body[:1] == "[" and body[-1:] == "]" else body
            if inner.strip() and "" in [item.strip() for item in inner.split(",")]:
                raise UsageError(  # as lists'
                    f"{command}: {key}={echoed(text)} has an empty entry{FROM_COMMAND_LINE}"
                )
            body = f"[{inner}]"  # brackets optional, as the command's other lists
        try:
            override = parser.parse_override(f"{key}={body}")
            if override.is_sweep_override():  # (its value is a sweep object, no value)
                said = value_said(spelled.get(key, key), text, FROM_COMMAND_LINE)
                raise UsageError(
                    f"{command}: {said}: several values are a sweep, which the Hydra commands "
                    f"run with -m; {command} takes one"
                    + (
                        " (nodes of several kinds: cluster.nodes=[...])"
                        if key == "cluster.node"
                        else ""
                    )
                )
            value = override.value()
            if (
                key in added
                and not isinstance(value, (dict, list))
                and OmegaConf.select(cfg, key, throw_on_missing=False) is not None
            ):  # Hydra's rule for a + override (its words)
                raise UsageError(
                    f"{command}: +{key}={text}: could not append to config: an item is "
                    f"already at '{key}' (from setup={setup}); remove the + prefix: "
                    f"{key}={text}"
                )
            OmegaConf.update(cfg, key, value, merge=True)
        except (HydraException, OmegaConfBaseException) as error:
            if isinstance(error, ValidationError) and "is not Optional" in str(error):
                said = null_refusal(key, spelled.get(key, key))  # (model.name=null)
                raise UsageError(f"{command}: {said}{FROM_COMMAND_LINE}") from None
            detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error)
            said = value_said(spelled.get(key, key), text, FROM_COMMAND_LINE)
            raise UsageError(f"{command}: {said}: {detail}") from None
    _KEY_VALUE.append((setup, frozenset(given), spelled, takes_n_nodes))
    try:
        cluster = cluster_of(cfg)
    finally:
        _KEY_VALUE.pop()
    if cfg.cluster.nodes is not None:  # as check_world records it
        cfg.cluster.node, cfg.cluster.n_nodes = None, len(cluster.nodes)
    return cfg, cluster


def nodes_count(nodes: Any, n_nodes: Any) -> int:
    """The cluster's node count from its two values: ``cluster.nodes``' entries where
    it is a list, else ``cluster.n_nodes``. The one rule: :func:`cluster_size` of a
    config, and the ``btb_nodes`` resolver of an interpolation
    (``${btb_nodes:${cluster.nodes},${cluster.n_nodes}}``)."""
    return len(nodes) if _is_sequence(nodes) else int(n_nodes)


def cluster_size(cfg: Any) -> int:
    """The cluster's node count: ``cluster.nodes``' entries, else ``cluster.n_nodes``
    (:func:`nodes_count` of the config's two values)."""
    return nodes_count(cfg.cluster.get("nodes"), cfg.cluster.n_nodes)


def cluster_size_said(cfg: Any) -> str:
    """The cluster's node count as the user gave it, for a message about it:
    ``cluster.nodes=[4xH100,4xH100,8xH200]: 3 nodes`` for a cluster of listed nodes,
    else ``cluster.n_nodes=4`` (:func:`cluster_size`)."""
    nodes = _plain(cfg.cluster.get("nodes"))
    if isinstance(nodes, list):
        return f"cluster.nodes=[{','.join(map(str, nodes))}]: {len(nodes)} nodes"
    return f"cluster.n_nodes={int(cfg.cluster.n_nodes)}"


def is_preset_cluster(cfg: Any) -> bool:
    """Whether the cluster is ``n_nodes`` of a preset node serving a preset model
    (what ``model.name``, ``cluster.node`` and ``cluster.n_nodes`` record in full)."""
    own_model = any(cfg.model.get(name) is not None for name in MODEL_FIELDS)
    return cfg.cluster.get("nodes") is None and not cfg.cluster.get("gpus") and not own_model


def value_origin(path: str) -> str:
    """Where the value at config ``path`` came from, as `` (from ...)``: the command
    line (``path=...``, or a parent's ``workload.params={...}`` that sets it), the
    ``+experiment`` file or the group option's file (found where Hydra finds it,
    ``hydra.searchpath`` included); empty when that is unknown (no Hydra job, or
    the schema's default)."""
    where = _where_set(path)
    if where is None or not where[0]:
        return ""
    if where[0] == "setup":  # a key=value command's setup= (cluster_from_options)
        return f" (from setup={_KEY_VALUE[-1][0]})"
    found = where[1]
    if found is None:  # "line"
        return " (from the command line)"
    return f" (from {_shown(found)})"


def experiment_name() -> str:
    """The ``+experiment=NAME`` of this Hydra job ('' without one, or outside a job)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return ""
    return str(HydraConfig.get().runtime.choices.get("experiment") or "")


def set_by_user(path: str) -> bool | None:
    """Whether the user set config ``path``: on the command line or in the
    ``+experiment`` file they chose (True), or only a group option's file or the
    schema's default did (False); None when no Hydra job runs (unknown)."""
    where = _where_set(path)
    return None if where is None else where[0] in ("line", "experiment")


def _where_set(path: str) -> tuple[str, Path | None] | None:
    """What set config ``path`` in this Hydra job: ``("line", None)`` an override on
    the command line, ``("experiment", file)`` the ``+experiment`` file,
    ``("group", file)`` the group option's file, ``("", None)`` none of them (the
    schema's default); None when no Hydra job runs. In a ``key=value`` command's
    :func:`cluster_from_options` (no Hydra job): ``("line", None)`` for an option it
    was given, ``("setup", None)`` for what its ``setup=`` gives."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        if not _KEY_VALUE:
            return None
        typed = _KEY_VALUE[-1][1]
        if any(key == path or key.startswith(path + ".") for key in typed):
            return "line", None
        return ("setup", None) if path in _FROM_SETUP else ("", None)
    hydra = HydraConfig.get()
    choices = hydra.runtime.choices
    if _typed_on_command_line(path, list(hydra.overrides.task), set(choices)):
        return "line", None
    group, _, rest = path.partition(".")
    files = []
    if choices.get("experiment"):  # @package _global_
        files.append(("experiment", f"experiment/{choices['experiment']}.yaml", path))
    if choices.get(group) and rest:
        files.append(("group", f"{group}/{choices[group]}.yaml", rest))
    missing = object()
    for kind, name, key in files:
        found = _config_file(hydra.runtime.config_sources, name)
        if (
            found is not None
            and OmegaConf.select(OmegaConf.load(found), key, default=missing) is not missing
        ):
            return kind, found
    return "", None


def _typed_on_command_line(path: str, overrides: list[str], groups: set[str]) -> bool:
    """Whether a command-line override sets config ``path``: ``path=value`` itself, or a
    parent's dict holding it (``workload.params={n_bursts: -1}``); choosing a group's
    option (``env=thresholds``) sets values from that option's file, not the line."""
    for override in _parsed_overrides(overrides):
        key = override.key_or_group
        if key == path:
            return True
        if key in groups or not path.startswith(key + "."):
            continue
        value = override.value()
        for part in path[len(key) + 1 :].split("."):
            if not isinstance(value, dict) or part not in value:
                break
            value = value[part]
        else:
            return True
    return False


def _parsed_overrides(overrides: list[str]) -> Iterator[Any]:
    """The overrides Hydra's parser reads (one it cannot is Hydra's to report)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    for text in overrides:
        try:
            (override,) = parser.parse_overrides([text])
        except HydraException:
            continue
        yield override


def _config_file(sources: Any, name: str) -> Path | None:
    """The file Hydra reads for config ``name`` (``env/thresholds.yaml``): the first of
    the file config sources (``conf/``, then any ``hydra.searchpath``) that has it."""
    for source in sources:
        if source.get("schema") == "file" and source.get("path"):
            file = Path(source["path"]) / name
            if file.is_file():
                return file.resolve()
    return None


@contextlib.contextmanager
def naming_fields(paths: Mapping[str, str]) -> Iterator[None]:
    """Where config values become objects: a :class:`ConfigError` about one of the
    objects' fields (its ``fields``, data the check gave; the keys of ``paths``:
    ``reward_scale``, ``n_bursts``) names each field by its config path instead
    (``env.reward_scale``, ``workload.params.n_bursts``) and says where the value
    came from (:func:`first_origin`), so the user reads the key they typed."""
    try:
        yield
    except ConfigError as error:
        named = [paths[name] for name in error.fields if name in paths]
        if not named:
            raise
        raise ConfigError(error.named(paths) + first_origin(named)) from error


def first_origin(paths: Sequence[str], origin_of: Callable[[str], str] | None = None) -> str:
    """Where the first of the config ``paths`` a message names that was set somewhere
    came from (``origin_of``, :func:`value_origin` by default): `` (from ...)`` for the
    first path, the one the message is about, `` (PATH from ...)`` for another
    (``sim.fault_node_loss_s has 0 times but sim.fault_node_loss_nodes has 1 node ...
    (sim.fault_node_loss_nodes from the command line)``); empty if none was."""
    for i, path in enumerate(paths):
        origin = (origin_of or value_origin)(path)
        if origin:
            return origin if i == 0 else f" ({path} {origin[2:]}"
    return ""


def naming_value(
    path: str, value: Any, config_path: str = ""
) -> contextlib.AbstractContextManager[None]:
    """Where one config value becomes one object (``cluster.node`` -> a NodeSpec):
    an error is prefixed ``path=value (from ...):``, and said without the object's
    name (``n_gpus must be ...``, not ``NodeSpec.n_gpus must be ...``); the
    ``key=value`` commands' :func:`experiments._cli.naming_value`, with the origin
    (of ``config_path``, where ``path`` is another spelling of it: ``costs``'
    ``model=`` for ``model.name``)."""
    return naming_option(path, value, lambda said: value_origin(config_path or said))


_LEADING_PATH = re.compile(r"([A-Za-z_]\w*(?:\.\w+)*)(?= must |=| is |: )")
"""The config path a check's message begins with (``train.total_timesteps must ...``,
``imitation.episodes=1: ...``, ``train.eval_policies: ...``)."""


def with_value_origin(error: BaseException, cfg: Any) -> BaseException:
    """``error`` saying where the value it is about came from: a ValueError whose
    message begins with a path of ``cfg`` (``train.total_timesteps must be >= 0,
    got -5``) and says no origin yet gets :func:`value_origin`'s ``(from ...)`` at
    its end, as the groups' checks (``sim.*``) say it; any other error, or one whose
    origin is unknown, is ``error`` itself. So every check of a Hydra job's values
    names the origin without code of its own (``jobs.run_job`` applies it). A
    :class:`ConfigError` naming its settings as data (``sim.model_versions names 1
    versions ...``, ``sim.upgrade_at_s[0] must ...``, raised by the simulator's
    checks too) gets the origin of the first of them set somewhere, another than the
    one it is about by its path (``(sim.fault_node_loss_nodes from the command line)``).
    A path the command line set a key under (``+agent.hyperparams.nope.x=1`` for
    ``agent.hyperparams.nope: not a ppo hyperparameter``) came from the command line,
    whatever file set the path before."""
    message = str(error)
    if not isinstance(error, ValueError) or "(from " in message or not OmegaConf.is_config(cfg):
        return error
    origin = _fields_origin(error, cfg) if isinstance(error, NamedFields) else ""
    if not origin:
        found = _LEADING_PATH.match(message)
        if found is None:
            return error
        origin = _value_made(found[1]) if _in_config(cfg, found[1]) else ""
    return ConfigError(message + origin) if origin else error


def _value_made(path: str) -> str:
    """Where the value at config ``path`` was made, for :func:`with_value_origin`: the
    command line when it set a key under ``path`` (``+agent.hyperparams.nope.x=1``
    makes ``agent.hyperparams.nope``, and ``+agent.hyperparams.learning_rate.x=1``
    replaces the group file's rate), else :func:`value_origin`."""
    return _typed_below(path) or value_origin(path)


def _fields_origin(error: NamedFields, cfg: Any) -> str:
    """:func:`first_origin` of the settings ``error`` names as data, as paths of
    ``cfg`` under its owner (``sim.upgrade_at_s`` for ``upgrade_at_s[0]``)."""
    paths = [f"{error.owner}.{name.partition('[')[0]}" for name in error.fields]
    return (
        first_origin([p for p in paths if _in_config(cfg, p)], _value_made) if error.owner else ""
    )


def _in_config(cfg: Any, path: str) -> bool:
    value = OmegaConf.select(cfg, path, default=_ABSENT, throw_on_resolution_failure=False)
    return value is not _ABSENT


def unknown_keys(cfg: Any, prefix: str = "") -> Iterator[tuple[str, list[str]]]:
    """``(config path, the keys its schema has)`` for each key of ``cfg`` that its
    group's schema (the dataclass Hydra composed it into) does not have. Hydra's
    ``+key=value`` adds a key past the schema; a group file's unknown key is refused
    by Hydra itself. Free-form dicts (``workload.params``, ``agent.hyperparams``) are
    checked by what reads them."""
    import dataclasses

    from omegaconf import DictConfig

    schema = OmegaConf.get_type(cfg)
    if not (isinstance(schema, type) and dataclasses.is_dataclass(schema)):
        return
    known = [f.name for f in dataclasses.fields(schema)]
    for key in cfg:
        path = f"{prefix}{key}"
        if path == "hydra":  # Hydra's own node (in a composed job's view), Hydra's to check
            continue
        if key not in known:
            yield path, known
        elif isinstance(child := cfg._get_node(key), DictConfig):
            yield from unknown_keys(child, f"{path}.")


def check_known_keys(cfg: Any) -> None:
    """Refuse the first key no schema knows (``+workload.bogus=1``), naming it, where
    it came from and the keys its group takes."""
    for path, known in unknown_keys(cfg):
        origin = value_origin(path) or _typed_below(path)
        group = path.rpartition(".")[0]
        schema = OmegaConf.get_type(OmegaConf.select(cfg, group) if group else cfg)
        raise ConfigError(unknown_key_message(path, known, origin, schema))


def keys_named(schema: Any, name: str, prefix: str = "") -> list[str]:
    """The paths of ``schema``'s fields named ``name`` in its groups (``train.progress``
    for ``progress`` in the train command's schema), nested dataclasses followed."""
    if not (isinstance(schema, type) and dataclasses.is_dataclass(schema)):
        return []
    hints = typing.get_type_hints(schema)
    found = []
    for f in dataclasses.fields(schema):
        kind = hints.get(f.name)
        dataclass_typed = isinstance(kind, type) and dataclasses.is_dataclass(kind)
        if not dataclass_typed and f.default_factory is not dataclasses.MISSING:
            kind = type(f.default_factory())  # a group typed Any (sim, env): its default's
        if isinstance(kind, type) and dataclasses.is_dataclass(kind):
            path = f"{prefix}{f.name}."
            found += [f"{path}{name}"] if name in {g.name for g in dataclasses.fields(kind)} else []
            found += keys_named(kind, name, path)
    return list(dict.fromkeys(found))


def unknown_key_message(path: str, known: Sequence[str], origin: str, schema: Any = None) -> str:
    """``unknown key env.bogus (from ...); env takes: kind, ...``: the one way an
    unknown key is said, by :func:`check_known_keys` and for Hydra's own refusal
    (``jobs``). ``schema`` (the group's, where the key was looked for) adds where a
    key of that name lives: ``progress`` on ``train`` is ``train.progress``."""
    group, _, leaf = path.rpartition(".")
    owner = f"{group} takes" if group else "the command takes"
    near = [f"{group}.{p}" if group else p for p in keys_named(schema, leaf)]
    hint = f" (did you mean {' or '.join(near)}?)" if near else ""
    return f"unknown key {path}{origin}{hint}; {owner}: {', '.join(known)}"


def check_bool_values(cfg: Any) -> None:
    """Refuse a true/false key given another value (``env.eft_rules=2``, ``yes``),
    on the command line (``key=...``, or a dict for a parent, ``sim={...}``) or in a
    config file (the ``+experiment`` file and the experiment files it builds on,
    the group option's file), naming it and where it came from: the structured
    config would quietly read 2 as true. The value as written is what is checked
    (None stays allowed where the schema allows it)."""
    for path in _bool_paths(cfg):
        for raw, origin in _written_values(path):
            if raw is not None and not isinstance(raw, bool):
                raise ConfigError(bool_message(path, raw, origin))


def bool_message(path: str, raw: Any, origin: str) -> str:
    """``env.eft_rules must be true or false, got 'yes' (from ...)``: the one way a
    true/false key given another value is said, by :func:`check_bool_values` and for
    a word OmegaConf refuses while Hydra merges it (``jobs``)."""
    return f"{path} must be true or false, got {echoed(raw)}{origin}"


def _bool_paths(cfg: Any, prefix: str = "") -> Iterator[str]:
    """The config paths of the schema's true/false fields."""
    from omegaconf import BooleanNode, DictConfig

    for key in cfg:
        node = cfg._get_node(key)
        path = f"{prefix}{key}"
        if path == "hydra":
            continue
        if isinstance(node, DictConfig):
            yield from _bool_paths(node, f"{path}.")
        elif isinstance(node, BooleanNode):
            yield path


_ABSENT = object()


def _written_values(path: str) -> Iterator[tuple[Any, str]]:
    """Every value this Hydra job's command line and config files write at ``path``,
    as written, each with `` (from ...)``; nothing when no Hydra job runs."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return
    hydra = HydraConfig.get()
    for override in _parsed_overrides(list(hydra.overrides.task)):
        key = override.key_or_group.lstrip("+~")
        if override.is_sweep_override() or not (key == path or path.startswith(key + ".")):
            continue
        value = override.value()
        for part in path[len(key) + 1 :].split(".") if key != path else ():
            value = value.get(part, _ABSENT) if isinstance(value, dict) else _ABSENT
        if value is not _ABSENT:
            yield value, " (from the command line)"
    sources, choices = hydra.runtime.config_sources, hydra.runtime.choices
    files: list[tuple[Path | None, str]] = []
    if choices.get("experiment"):  # @package _global_, and the experiments it builds on
        files += [(f, path) for f in _experiment_files(sources, str(choices["experiment"]))]
    group, _, rest = path.partition(".")
    if choices.get(group) and rest:
        files.append((_config_file(sources, f"{group}/{choices[group]}.yaml"), rest))
    for found, key in files:
        if found is None:
            continue
        value = OmegaConf.select(OmegaConf.load(found), key, default=_ABSENT)
        if value is not _ABSENT:
            yield value, f" (from {_shown(found)})"


def _experiment_files(sources: Any, name: str) -> list[Path]:
    """The ``experiment/NAME.yaml`` file and those its defaults list builds on (plain
    names in the same group), nearest first."""
    found: list[Path] = []
    todo = [name]
    while todo:
        file = _config_file(sources, f"experiment/{todo.pop(0)}.yaml")
        if file is None or file in found:
            continue
        found.append(file)
        defaults = OmegaConf.to_container(OmegaConf.load(file)).get("defaults", [])  # type: ignore[union-attr]
        todo += [d for d in defaults if isinstance(d, str) and d != "_self_" and "/" not in d]
    return found


def sweeper_param_origin(key: str, config_name: str, args: Sequence[str]) -> str:
    """Where a sweep's ``hydra.sweeper.params.KEY`` came from, as `` (PATH from ...)``,
    for an error about a value the sweeper gave a job (Hydra's ``Error merging
    override KEY=...``): the command line (its overrides ``args``), the
    ``+experiment`` file or the sweeper's own config file
    (``conf/hydra/sweeper/NAME.yaml``, or one's own on ``hydra.searchpath``), found
    as Hydra finds them (the command's config ``config_name`` composed with the
    line's overrides that are no sweep); `` (from PATH)`` when none of them says."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    path = f"hydra.sweeper.params.{key}"
    parsed = list(_parsed_overrides([a for a in args if not a.startswith("-")]))
    if any(o.key_or_group.lstrip("+~") in (path, "hydra.sweeper.params") for o in parsed):
        return f" ({path} from the command line)"
    fixed = [o.input_line for o in parsed if not o.is_sweep_override() and o.input_line]
    try:
        if GlobalHydra.instance().is_initialized():  # (the sweep's, which has ended)
            GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            hydra = compose(config_name=config_name, overrides=fixed, return_hydra_config=True)
    except HydraException:
        return f" (from {path})"
    choices = hydra.hydra.runtime.choices
    files = []
    if choices.get("experiment"):  # @package _global_
        files.append((f"experiment/{choices['experiment']}.yaml", path))
    if choices.get("hydra/sweeper"):  # @package hydra.sweeper
        files.append((f"hydra/sweeper/{choices['hydra/sweeper']}.yaml", f"params.{key}"))
    missing = object()
    for name, inside in files:
        found = _config_file(hydra.hydra.runtime.config_sources, name)
        if (
            found is not None
            and OmegaConf.select(OmegaConf.load(found), inside, default=missing) is not missing
        ):
            return f" ({path} from {_shown(found)})"
    return f" (from {path})"


def _shown(found: Path) -> str:
    """A config file as messages name it: ``conf/...`` inside the project's conf/."""
    try:
        return f"conf/{found.relative_to(CONF_DIR).as_posix()}"
    except ValueError:
        return str(found)


def _typed_below(path: str) -> str:
    """`` (from the command line)`` when an override sets a key under ``path``
    (``+agent.bogus=1`` makes an unknown ``agent``), else empty."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return ""
    overrides = _parsed_overrides(list(HydraConfig.get().overrides.task))
    if any(override.key_or_group.startswith(path + ".") for override in overrides):
        return " (from the command line)"
    return ""


def group_paths(group: str, cfg_group: Any) -> dict[str, str]:
    """``{field: "group.field"}`` for each key of a config group (``workload.params``)."""
    return {str(key): f"{group}.{key}" for key in cfg_group}


def setup_label(cfg: Any) -> str:
    """The setup a run simulated, for result rows and run names: the published setup's
    name (as ``experiments.compare`` writes it) when the model and cluster groups are
    that setup's (a model alias such as ``70b`` counts as its preset), else
    ``MODEL_NODE_xN`` (``llama-3.3-70b_4xH100_x6``); a cluster of mixed nodes names each
    kind with its count, in the order the kinds first appear,
    ``MODEL_NODE_xN+NODE_xN`` (``llama-3.3-70b_4xH100_x2+8xH200_x1``, :func:`cluster_label`).
    ``cluster.nodes`` of one preset node serving a preset model is named as
    ``cluster.node`` and ``cluster.n_nodes`` name it (``70b_h100x4``): the same
    cluster, one row name."""
    model, node, n_nodes = str(cfg.model.name), str(cfg.cluster.node), cluster_size(cfg)
    if not is_preset_cluster(cfg):
        with contextlib.suppress(ConfigError, ValueError):  # cluster_of reports it
            cluster = cluster_of(cfg)
            uniform = _as_uniform(cluster)
            if uniform is None:
                return cluster_label(cluster)
            model, node, n_nodes = uniform  # cluster.nodes of one preset node: as node=
    with contextlib.suppress(ConfigError):  # an unknown model: cluster_of reports it
        model = model_preset(model).name  # an alias (70b, glm52) as the preset it names
    with contextlib.suppress(ConfigError, ValueError):  # an unknown node: likewise
        node = parse_node(node).name  # 4xh100 as 4xH100, the preset's spelling
    chosen = (model, node, n_nodes)
    if SETUPS.get(cfg.setup.name) == chosen:
        return str(cfg.setup.name)
    same = [name for name, spec in SETUPS.items() if spec == chosen]
    return same[0] if same else f"{model}_{node}_x{n_nodes}"


def cluster_label(cluster: ClusterSpec) -> str:
    """A cluster of one's own for rows, run names and notes: ``MODEL_NODE_xN`` with
    each node kind and its count, in the order the kinds first appear
    (``llama-3.3-70b_4xH100_x2+8xH200_x1``, ``mine_4xMYGPU_x2``)."""
    counts: dict[str, int] = {}
    for spec in cluster.nodes:
        counts[spec.name] = counts.get(spec.name, 0) + 1
    kinds = "+".join(f"{kind}_x{n}" for kind, n in counts.items())
    return f"{cluster.model.name}_{kinds}"


def cluster_figure_changes(old: ClusterSpec, new: ClusterSpec) -> list[tuple[str, str, str]]:
    """``(option, old value, new value)`` for each figure two clusters of one
    :func:`cluster_label` differ in, named as :func:`cluster_overrides` gives it: the
    model's (``model.layers``), a GPU kind's by its name (``cluster.gpus.MYGPU.flops``),
    and the nodes' order (``cluster.nodes``), which the label does not show."""
    changes = [
        (
            f"model.{name}",
            _shown_figure(getattr(old.model, name)),
            _shown_figure(getattr(new.model, name)),
        )
        for name in MODEL_FIELDS
        if getattr(old.model, name) != getattr(new.model, name)
    ]
    new_gpus = {node.gpu.name: node.gpu for node in new.nodes}
    for gpu in dict.fromkeys(node.gpu for node in old.nodes):
        other = new_gpus.get(gpu.name)
        if other is None or other == gpu:
            continue
        changes += [
            (
                f"cluster.gpus.{gpu.name}.{name}",
                _number(getattr(gpu, name)),
                _number(getattr(other, name)),
            )
            for name in GPU_FIELDS
            if getattr(gpu, name) != getattr(other, name)
        ]
    old_names, new_names = [n.name for n in old.nodes], [n.name for n in new.nodes]
    if old_names != new_names:
        changes.append(("cluster.nodes", f"[{','.join(old_names)}]", f"[{','.join(new_names)}]"))
    return changes


def clusters_told_apart(
    old: ClusterSpec, new: ClusterSpec, old_label: str, new_label: str
) -> tuple[str, str]:
    """Two clusters that differ, each said by its label (``old_label``,
    ``new_label``); when the labels are one (a GPU kind or a model of one's own that
    kept its name but not a figure, or the nodes in another order), each followed by
    the figures that changed (:func:`cluster_figure_changes`:
    ``mine_4xMYGPU_x2 (cluster.gpus.MYGPU.flops=1e+15)``)."""
    changes = cluster_figure_changes(old, new) if old_label == new_label else []
    if not changes:
        return old_label, new_label
    said = [
        f"{label} ({', '.join(f'{name}={values[side]}' for name, *values in changes)})"
        for side, label in enumerate((old_label, new_label))
    ]
    return said[0], said[1]


def _shown_figure(value: Any) -> str:
    """A model's figure as :func:`cluster_overrides` writes it (``null`` for None)."""
    return "null" if value is None else _number(value)


def _as_uniform(cluster: ClusterSpec) -> tuple[str, str, int] | None:
    """``(model, node, n_nodes)`` by preset names when ``cluster`` is nodes of one
    preset node serving a preset model, with the presets' figures; else None."""
    with contextlib.suppress(ConfigError, ValueError):  # a model or GPU of one's own
        first = cluster.nodes[0]
        uniform = ClusterSpec.uniform(
            model_preset(cluster.model.name), parse_node(first.name), len(cluster.nodes)
        )
        if uniform == cluster:
            return cluster.model.name, first.name, len(cluster.nodes)
    return None


def cluster_overrides(cluster: ClusterSpec) -> list[str]:
    """The Hydra overrides that describe ``cluster`` (:func:`cluster_of` makes it
    again): the model by its preset's name, or a new name and its fields; each GPU
    kind of one's own by its figures (``+cluster.gpus.NAME.<field>``); the nodes as
    ``cluster.node`` and ``cluster.n_nodes`` when they are all one kind, else as
    ``cluster.nodes``."""
    model = cluster.model
    overrides = [f"model.name={model.name}"]
    if _preset_figures(model_preset, model) is None:
        overrides += [
            f"model.{name}={_number(getattr(model, name))}"
            for name in MODEL_FIELDS
            if getattr(model, name) is not None
        ]
    for gpu in dict.fromkeys(node.gpu for node in cluster.nodes):
        if _preset_figures(gpu_preset, gpu) is None:
            overrides += [
                f"+cluster.gpus.{gpu.name}.{name}={_number(getattr(gpu, name))}"
                for name in GPU_FIELDS
            ]
    names = [node.name for node in cluster.nodes]
    if len(set(names)) == 1:
        overrides += [f"cluster.node={names[0]}", f"cluster.n_nodes={len(names)}"]
    else:
        overrides.append(f"cluster.nodes=[{','.join(names)}]")
    return overrides


def _number(value: Any) -> str:
    """A figure as a command line gives it, short when that is exact (``1e+15``); an
    int as it is (``1e+06`` would be read as a float, which an int field refuses)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def _preset_figures(preset: Callable[[str], Any], spec: Any) -> Any:
    """The preset of ``spec``'s name when it has ``spec``'s figures; else None."""
    try:
        found = preset(spec.name)
    except ConfigError:
        return None
    return found if found == spec else None


def workload_label(cfg: Any, held_out: bool = False) -> str:
    """The workload a run used: its registered name, followed by the generator
    parameters the workload group changes, if any
    (``bursted_synthetic[n_bursts=2,burst_requests=40]``); ``trace:<file name>``
    for a trace file. ``held_out``: the label of its test or validation windows,
    which ``train_streams`` does not draw (``registry.TRAIN_STREAMS``), so it is
    left out: a recipe's evaluation rows (``train_streams: shared``) are labelled
    as the same windows are everywhere else."""
    if cfg.workload.name == TRACE_WORKLOAD:
        return trace_label(cfg.workload.path, cfg.workload.get("merge_blocks", 1))
    from experiments._cli import workload_label as label

    params = OmegaConf.to_container(cfg.workload.params, resolve=True)
    assert isinstance(params, dict)
    shown = {str(key): value for key, value in params.items()}
    return label(str(cfg.workload.name), held_out_params(shown) if held_out else shown)


def held_out_params(params: dict[str, Any]) -> dict[str, Any]:
    """A generated workload's ``params`` as its test and validation windows know them:
    without ``train_streams``, which draws train windows only
    (``registry.TRAIN_STREAMS``)."""
    return {key: value for key, value in params.items() if key != "train_streams"}


def sim_of(cfg: Any) -> SimConfig:
    """The simulator settings of the sim group."""
    with naming_fields(group_paths("sim", cfg.sim)):
        return SimConfig(**{key: cfg.sim[key] for key in cfg.sim})


def workload_params(cfg: Any) -> dict[str, Any]:
    """The workload group's generator overrides as a plain dict; for a trace, the
    TraceOptions fields (what ``registry.windows("trace", ...)`` takes)."""
    if cfg.workload.name == TRACE_WORKLOAD:
        values = OmegaConf.to_container(cfg.workload, resolve=True)
        assert isinstance(values, dict)
        trace = {name: values[name] for name in TRACE_FIELDS}
        if trace["max_context_tokens"] is None:  # the served model's context length
            with contextlib.suppress(ValueError):  # an unknown model is named elsewhere
                trace["max_context_tokens"] = model_of(cfg).max_context_tokens
        return trace
    params = OmegaConf.to_container(cfg.workload.params, resolve=True)
    assert isinstance(params, dict)
    return {str(k): v for k, v in params.items()}


def workload_paths(cfg: Any) -> dict[str, str]:
    """Config paths of the workload group's parameters, for naming_fields: a trace's
    options, or the generator parameters given and every other field of the
    workload's generators (a message may name one the user left at its default)."""
    import dataclasses

    from envs.workloads.registry import describe

    if cfg.workload.name == TRACE_WORKLOAD:
        return dict(TRACE_PATHS)
    paths = group_paths("workload.params", cfg.workload.params)
    with contextlib.suppress(ValueError):  # an unknown workload: configure names it
        for family in describe(cfg.workload.name).families:
            for f in dataclasses.fields(family.config):
                paths.setdefault(f.name, f"workload.params.{f.name}")
    return paths


def naming_workload_fields(cfg: Any) -> contextlib.AbstractContextManager[None]:
    """:func:`naming_fields` with the workload group's paths: a trace's options
    (``workload.window_s``), else the generators' parameters."""
    return naming_fields(workload_paths(cfg))


def window_pool_of(cfg: Any, split: str, limit: int | None, seed: int | None = None) -> list[Any]:
    """The first ``limit`` windows (None: all) of the workload group's ``split``, at
    ``workload.seed`` or another ``seed``."""
    from envs.windows import window_pool

    seed = int(cfg.workload.seed) if seed is None else int(seed)
    with naming_workload_fields(cfg):
        return window_pool(cfg.workload.name, split, seed, limit, workload_params(cfg))


PARAMS_ON_TRACE = (
    f"workload.params does not apply to workload={TRACE_WORKLOAD} (its options are "
    "workload.path, workload.window_s, ...)"
)
"""How a parameter given to a trace is refused, with ``+`` or without (where Hydra
would say to add it with ``+``: ``experiments.jobs``)."""


def check_workload(cfg: Any, read_trace: bool = True) -> TracePlan | None:
    """The workload group names a registered workload and its parameters are ones
    its generators take, with values they accept (no windows are generated); or a
    trace file, read through once (every row checked, windows and splits found):
    its plan is returned (None for a registered workload). Without ``read_trace``,
    a trace's options and that its file is there are checked, and the file is not
    read (None)."""
    from envs.workloads.registry import configure

    trace_values = {name: cfg.workload[name] for name in TRACE_FIELDS}
    if cfg.workload.get("factory") and not is_plugin(cfg.workload.name):
        said = misplaced_factory(str(cfg.workload.name), str(cfg.workload.factory))
        raise ConfigError(f"{said}{value_origin(FACTORY_OPTION)}")
    if cfg.workload.name == TRACE_WORKLOAD:
        if cfg.workload.params:  # (where from: the dict's, or its first key's)
            given = [f"workload.params.{key}" for key in cfg.workload.params]
            raise ConfigError(f"{PARAMS_ON_TRACE}{first_origin(['workload.params', *given])}")
        from experiments._cli import trace_option_warnings

        with naming_fields(TRACE_PATHS), trace_option_warnings():
            options = TraceOptions(**workload_params(cfg))
            if not read_trace:
                check_trace_path(options)
                return None
            return plan_trace(options)
    changed = changed_fields(trace_values)
    if changed:
        raise ConfigError(
            f"workload.{changed[0]} is an option of workload=trace, not of "
            f"workload={cfg.workload.name}{value_origin('workload.' + changed[0])}"
        )
    with naming_fields(workload_paths(cfg)):
        configure(cfg.workload.name, **workload_params(cfg))
    return None


def config_record(cfg: Any) -> dict[str, Any]:
    """The job's config as results.json and W&B record it: resolved, with the trace
    file's stamp (:func:`workload_record`) and ``setup.name`` the setup that ran
    (:func:`setup_label`, as the rows name it): a ``model=`` or ``cluster=`` given
    beside ``setup=`` wins over the setup's, so ``setup=qwen3_8b_h100x4 model=glm-4.5``
    is recorded as ``glm45_h100x4``, not as the setup it overrode. ``cluster_figures``
    records the cluster in full (``ClusterSpec.figures``: the model's and each node's
    figures), so a cluster of one's own can be made again."""
    record = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(record, dict)
    record["setup"] = {**record["setup"], "name": setup_label(cfg)}
    with contextlib.suppress(ConfigError, ValueError):  # a config no cluster is made of
        record["cluster_figures"] = cluster_of(cfg).figures()
    return {**record, **workload_record(cfg)}


def workload_record(cfg: Any) -> dict[str, Any]:
    """What a results file and the W&B config record of the workload beside its
    config: ``{"workload_file": ...}`` (the trace file's size, sha256 and plan) for
    a trace workload; for a generated one (registered or one's own) its
    ``train_streams``, how its train windows were drawn
    (``registry.TRAIN_STREAMS``), also when ``workload.params`` leaves it to the
    default, with ``{"workload_plugin": ...}`` for one's own."""
    from envs.workloads.registry import configure
    from experiments._cli import workload_file

    name, params = str(cfg.workload.name), workload_params(cfg)
    record = workload_file(name, params)
    if name != TRACE_WORKLOAD:
        with contextlib.suppress(ConfigError, ValueError):  # (a bad workload: named elsewhere)
            streams = {f.train_streams for f in configure(name, **params).families}
            if len(streams) == 1:  # (configure sets one value on every family)
                record["train_streams"] = streams.pop()
    return record
