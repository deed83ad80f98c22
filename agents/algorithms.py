"""Building, saving and loading the learned agents (stable-baselines3 / sb3-contrib).

An agent is an algorithm (``ppo``, ``a2c``, ``dqn``, ``maskable_ppo``), an
environment kind (``route``, ``route_warm``, ``thresholds``) and a network
(``set``: the node-set body of ``agents.networks``; ``mlp``: SB3's flat MLP).
A checkpoint is a folder with SB3's ``model.zip`` and ``agent.json`` (what the
agent is and the environment arguments it was trained with), so the adapter can
rebuild the exact observation and action handling.
"""

from __future__ import annotations

import copy
import inspect
import json
import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from sb3_contrib import MaskablePPO
from stable_baselines3 import A2C, DQN, PPO
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.logger import Logger

from agents import note_read
from agents import run_state as state_file
from agents.distributions import LeanCategoricals, kl_divergence
from agents.networks import (
    CRITICS,
    NETWORK_OPTIONS,
    MaskableNodeScoringPolicy,
    NodeScoringPolicy,
    NodeSetExtractor,
)
from envs.cluster_env import env_arguments, flag_arguments
from envs.encoder import OBSERVATION_OPTIONS
from envs.files import folder_atomic, fsync_file, naming_file, read_json, write_json_atomic
from envs.sim.checks import check_flag, check_int, checked_number
from envs.sim.errors import ConfigError, SettingWarning, echoed
from envs.workloads.registry import TRAIN_STREAMS

ALGORITHMS: dict[str, type[BaseAlgorithm]] = {
    "ppo": PPO,
    "a2c": A2C,
    "dqn": DQN,
    "maskable_ppo": MaskablePPO,
}
ENV_IDS = {
    "route": "btb/Route-v0",
    "route_warm": "btb/RouteWarm-v0",
    "thresholds": "btb/Thresholds-v0",
}
NETS = ("set", "mlp")
SAVED_SETUP_KEYS = ("model", "node", "n_nodes", "cluster")
"""Keys of a saved agent's ``env_kwargs`` that are no env argument: the cluster it
was trained on (``experiments.train.env_kwargs``), rebuilt as ``setup``: a uniform
one of presets by their names, any other by its figures too (``cluster``,
``ClusterSpec.figures``; an agent saved before has none)."""


@dataclass
class AgentSpec:
    """What an agent is; saved as ``agent.json`` beside ``model.zip``."""

    algo: str
    env: str
    net: str = "set"
    hidden: int = 64
    critic: str = "shared"
    """The node-set network's critic: shared, separate or detached (agents.networks)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    timesteps: int = 0
    name: str = ""
    normalize_reward: bool | None = None
    """Whether training scaled its rewards by SB3's VecNormalize (``env.normalize_reward``);
    None: a checkpoint saved before it was recorded."""
    reward_norm: dict[str, float] | None = None
    """VecNormalize's running statistics of the discounted return (``mean``, ``var``,
    ``count``) when it did, so a resumed run scales as the checkpoint's did (None
    without it, or if they were not finite)."""
    trace_file: dict[str, Any] | None = None
    """The trace file it was trained on (``workload=trace``): its resolved ``path``,
    ``bytes`` and ``sha256`` as the run started, and how many of the first windows of
    the trace's train and val splits the run used (``train_windows``, ``val_windows``;
    0: it validated on none); None for a registered workload, or a checkpoint saved
    before it was recorded (``experiments.trained_on``)."""
    registered_windows: list[dict[str, Any]] | dict[str, Any] | None = None
    """The registered workloads' windows it was trained and validated on, a record a
    workload: the training workload's, then each one behavioural cloning collected
    teacher demonstrations on (``imitation.workloads``: its first train windows, no
    validation window). A record is the ``workload``, its generator ``params``
    (window counts given included) and ``seed``, and the names of the ``train`` and
    ``val`` windows the run used (for a trace that is a split of a dataset
    ``make_dataset`` wrote, the dataset's, with its ``dataset`` path and each
    family's configuration, ``families``; for a workload of one's own, the sha256
    of its module as imported, ``plugin_sha256``). One record, not a list, for a checkpoint
    saved before the list; None for any other trace not cloned on a workload, or a
    checkpoint saved before it was recorded (its ``env_kwargs`` then say the
    workload, ``experiments.trained_on``)."""
    started_from: list[dict[str, Any]] | None = None
    """The windows of the agents whose weights it started from (``train.init_from``,
    or the checkpoint ``resume=`` continued), each an object of that agent's folder
    (``agent``), env ``workload`` and ``workload_params`` and its ``trace_file`` and
    ``registered_windows`` (every window of its train and val splits for one saved
    before those were recorded), then those it started from itself; [] for a run
    from scratch, None for a checkpoint saved before it was recorded
    (``experiments.trained_on.started_from``)."""

    def __post_init__(self) -> None:
        if self.algo not in ALGORITHMS:
            raise ValueError(
                f"agent.algo: unknown {echoed(self.algo)}; known: {', '.join(ALGORITHMS)}"
            )
        if self.env not in ENV_IDS:
            raise ValueError(f"agent.env: unknown {echoed(self.env)}; known: {', '.join(ENV_IDS)}")
        if self.net not in NETS:
            raise ValueError(f"agent.net: unknown {echoed(self.net)}; known: {', '.join(NETS)}")
        if self.critic not in CRITICS:
            raise ValueError(
                f"agent.critic: unknown {echoed(self.critic)}; known: {', '.join(CRITICS)}"
            )
        if self.critic != "shared" and (self.net != "set" or self.algo == "dqn"):
            raise ValueError(
                f"agent.critic={self.critic} is an option of the node-set actor-critic "
                f"(agent.net=set with ppo, a2c or maskable_ppo), got agent.net={self.net}, "
                f"agent.algo={self.algo}"
            )
        if self.algo == "dqn" and self.env != "route":
            raise ValueError(
                f"agent.algo=dqn needs a Discrete action space (env=route), "
                f"got env={echoed(self.env)}"
            )
        if self.algo == "maskable_ppo" and self.env != "route_warm":
            raise ValueError(
                "agent.algo=maskable_ppo uses action masks, which env=route_warm has; "
                f"got {echoed(self.env)}"
            )
        if not self.name:  # e.g. ppo_route; ppo_route_mlp for SB3's flat MLP
            self.name = f"{self.algo}_{self.env}" + ("_mlp" if self.net == "mlp" else "")

    @property
    def env_id(self) -> str:
        return ENV_IDS[self.env]


def policy_for(spec: AgentSpec) -> tuple[Any, dict[str, Any]]:
    """The SB3 policy (class or name) and policy_kwargs for ``spec``."""
    if spec.net == "mlp":
        return ("MlpPolicy", {"net_arch": [spec.hidden, spec.hidden]})
    if spec.algo == "dqn":
        return (
            "MlpPolicy",
            {
                "features_extractor_class": NodeSetExtractor,
                "features_extractor_kwargs": {
                    "kind": spec.env,
                    "hidden": spec.hidden,
                    **_set_options(spec, OBSERVATION_OPTIONS),
                },
                "net_arch": [spec.hidden],
            },
        )
    policy = MaskableNodeScoringPolicy if spec.algo == "maskable_ppo" else NodeScoringPolicy
    kwargs = {"kind": spec.env, "hidden": spec.hidden, "critic": spec.critic}
    return (
        policy,
        kwargs | _set_options(spec, NETWORK_OPTIONS),
    )


def _set_options(spec: AgentSpec, names: tuple[str, ...]) -> dict[str, bool]:
    """The env options among ``names`` that ``spec`` was trained with and the
    node-set network follows (only those on: a default agent's policy_kwargs are
    as before the options existed)."""
    return {name: True for name in names if spec.env_kwargs.get(name)}


MAX_ROLLOUT = 2**20
"""The most steps an env's rollout (``n_steps``) or a minibatch holds: numpy
allocates the rollout buffer up front, so 10**12 failed with an allocation error."""
MAX_BUFFER = 10**8
"""The most transitions DQN's replay buffer holds (SB3 allocates it up front)."""
# Ranges of the SB3 hyperparameters that SB3 2.9 (and torch's optimizers) let
# through when the model is built, probed on each algorithm that takes them, or
# refuse only once it is built (a negative learning_rate, clip_range_vf <= 0): (low,
# high, low is open, integer). Checked without a model, so that a sweep refuses them
# before any job trains; what SB3 refuses of several values together is checked by
# check_hyperparams and check_rollout. build_model still relabels any refusal of
# SB3's with the config path.
_RANGES: dict[str, tuple[float, float, bool, bool]] = {
    # torch refuses a negative rate or nan itself, once SB3 has built the model (and
    # warned about other settings); inf trains the weights to nan
    "learning_rate": (0.0, math.inf, False, False),
    # never checked: a discount or a lambda outside [0, 1] trains to the end (gamma=2)
    "gamma": (0.0, 1.0, False, False),
    "gae_lambda": (0.0, 1.0, False, False),
    # never checked: SB3 takes a clip range <= 0
    "clip_range": (0.0, math.inf, True, False),
    # PPO and MaskablePPO assert it > 0 as they build the model (None: no clipping)
    "clip_range_vf": (0.0, math.inf, True, False),
    # never checked: SB3 takes target_kl <= 0 (None turns the early stop off)
    "target_kl": (0.0, math.inf, True, False),
    # never checked: a negative coefficient makes the loss grow the term it weighs
    "ent_coef": (0.0, math.inf, False, False),
    "vf_coef": (0.0, math.inf, False, False),
    # never checked: SB3 takes max_grad_norm <= 0 (inf turns clipping off)
    "max_grad_norm": (0.0, math.inf, True, False),
    # torch refuses a negative epsilon, but takes 0 (a division by zero) and inf
    "rms_prop_eps": (0.0, math.inf, True, False),
    # never checked: DQN takes tau=2 and exploration rates outside [0, 1]
    "tau": (0.0, 1.0, False, False),
    "exploration_fraction": (0.0, 1.0, False, False),
    "exploration_initial_eps": (0.0, 1.0, False, False),
    "exploration_final_eps": (0.0, 1.0, False, False),
    # PPO refuses n_steps x n_envs <= 1 (check_rollout); A2C and MaskablePPO take n_steps=0 (and
    # fail inside learn(), after the run folder) or -1 (numpy's "negative dimensions")
    "n_steps": (1, MAX_ROLLOUT, False, True),
    # MaskablePPO and DQN take 0 and fail inside learn(); PPO refuses 1 too, with
    # normalize_advantage (check_hyperparams)
    "batch_size": (1, MAX_ROLLOUT, False, True),
    # never checked: n_epochs=0 fails inside learn() (an UnboundLocalError)
    "n_epochs": (1, math.inf, False, True),
    # never checked: DQN takes buffer_size=-1, learning_starts=-1, target_update_interval=0
    "buffer_size": (1, MAX_BUFFER, False, True),
    "learning_starts": (0, math.inf, False, True),
    "target_update_interval": (1, math.inf, False, True),
    "gradient_steps": (-1, math.inf, False, True),  # -1: as many as the env steps taken
    "sde_sample_freq": (-1, math.inf, False, True),  # -1: only at the rollout's start
    # never checked: SB3 takes stats_window_size=0
    "stats_window_size": (1, math.inf, False, True),
}
# May be None (off), or a schedule (a callable SB3 checks) instead of a number.
_MAY_BE_NONE = {"target_kl", "clip_range_vf"}
_SCHEDULES = {"learning_rate", "clip_range", "clip_range_vf"}
# May be infinite: max_grad_norm=inf turns gradient clipping off.
_MAY_BE_INFINITE = {"max_grad_norm"}
# Normalise an epoch's last minibatch even of one step, to nan (sb3-contrib 2.9's
# MaskablePPO; PPO skips such a minibatch).
_NORMALIZES_ONE = {"maskable_ppo"}
# Errors SB3 (or torch) raises for a value it refuses when the model is built
_SB3_REFUSALS = (TypeError, ValueError, AssertionError)
_TRAIN_FREQ_UNITS = ("step", "episode")
# Set by build_model from the agent's spec and the run (agent.net, agent.hidden, seed).
_SET_BY_THE_RUN = {"self", "policy", "env", "policy_kwargs", "verbose", "seed", "device"}


def hyperparameter_names(algo: str) -> list[str]:
    """The keyword arguments of ``algo``'s SB3 class that ``agent.hyperparams`` may set."""
    names = inspect.signature(ALGORITHMS[algo].__init__).parameters
    return [n for n in names if n not in _SET_BY_THE_RUN and not n.startswith("_")]


_MINIBATCH_WARNING = r"You have specified a mini-batch size"
"""SB3's warning (four lines) where minibatches do not cut the rollout evenly."""


def hyperparameter_refusal(algo: str, name: str) -> str | None:
    """Why ``agent.hyperparams.<name>`` is no setting of ``algo`` (one the run sets
    itself, or a name its SB3 class does not take), or None when it is one: the one
    way it is said, by :func:`check_hyperparams` and for Hydra's refusal of the key
    typed without ``+`` (``experiments.jobs``)."""
    path = f"agent.hyperparams.{name}"
    if name in _SET_BY_THE_RUN:
        return f"{path}: set by the run (seed, agent.net, agent.hidden), not agent.hyperparams"
    known = hyperparameter_names(algo)
    if name not in known:
        return f"{path}: not a {algo} hyperparameter; known: {', '.join(known)}"
    return None


def hyperparameter_default(algo: str, name: str) -> Any:
    """The default SB3 gives ``algo``'s keyword argument ``name``."""
    return inspect.signature(ALGORITHMS[algo].__init__).parameters[name].default


def normalizes_advantages(algo: str, hyperparams: Mapping[str, Any]) -> bool:
    """Whether ``algo`` normalises the advantages of each minibatch (A2C: of the
    rollout) by their mean and std (``normalize_advantage``: PPO's and
    MaskablePPO's default, not A2C's). Over one step that is nan: PPO asserts
    minibatches and rollouts of 2 steps or more as it builds the model;
    MaskablePPO and A2C train to nan weights and fail at the next rollout."""
    if "normalize_advantage" not in hyperparameter_names(algo):
        return False
    default = hyperparameter_default(algo, "normalize_advantage")
    return bool(hyperparams.get("normalize_advantage", default))


def check_rollout(algo: str, hyperparams: Mapping[str, Any], n_envs: int) -> int | None:
    """An on-policy rollout of ``n_steps`` x ``env.n_envs`` steps (SB3 allocates it up
    front) holds at most :data:`MAX_ROLLOUT` steps, as each factor does, and, where
    ``algo`` normalises advantages (:func:`normalizes_advantages`), no minibatch
    of one step: a rollout of 2 steps or more, and for MaskablePPO a
    ``batch_size`` that does not leave an epoch's last minibatch one step. DQN's
    ``train_freq`` in episodes takes one env (SB3 asserts it at the first step).
    ValueError naming the fields; returns the rollout's size (None for an
    off-policy ``algo``, whose ``n_steps`` is not a rollout)."""
    if "train_freq" in hyperparameter_names(algo):  # DQN's n_steps: its n-step return
        freq = hyperparams.get("train_freq", hyperparameter_default(algo, "train_freq"))
        if isinstance(freq, (list, tuple)) and freq[1] == "episode" and n_envs > 1:
            raise ValueError(
                f"agent.hyperparams.train_freq={list(freq)} counts episodes, which SB3 "
                f"collects from one env only: env.n_envs must be 1, got {n_envs}"
            )
        return None
    n_steps = int(whole(hyperparams.get("n_steps", hyperparameter_default(algo, "n_steps"))))
    rollout = n_steps * n_envs
    if rollout > MAX_ROLLOUT:
        raise ValueError(
            f"agent.hyperparams.n_steps={n_steps} x env.n_envs={n_envs} = {rollout} steps "
            f"a rollout; at most {MAX_ROLLOUT}"
        )
    if not normalizes_advantages(algo, hyperparams):
        return rollout
    normalized = "agent.hyperparams.normalize_advantage normalises advantages: over one step, nan"
    if rollout < 2:
        raise ValueError(
            f"agent.hyperparams.n_steps={n_steps} x env.n_envs={n_envs} = 1 step a rollout; "
            f"at least 2 ({normalized})"
        )
    if algo not in _NORMALIZES_ONE:  # (A2C takes no batch_size: one update a rollout)
        return rollout
    batch = int(whole(hyperparams.get("batch_size", hyperparameter_default(algo, "batch_size"))))
    if batch < rollout and rollout % batch == 1:
        raise ValueError(
            f"agent.hyperparams.batch_size={batch} leaves each epoch's last minibatch one step "
            f"of a rollout of n_steps x env.n_envs = {rollout} steps, and {algo} normalises it "
            f"({normalized}): take one that leaves none or 2 steps or more"
        )
    return rollout


def note_minibatches(algo: str, hyperparams: Mapping[str, Any], rollout: int | None) -> None:
    """Say in one line (SettingWarning) where ``batch_size`` does not cut the
    ``rollout`` (:func:`check_rollout`'s) into whole minibatches, as SB3 does in four
    when the model is built."""
    if rollout is None or "batch_size" not in hyperparameter_names(algo):
        return
    batch = int(whole(hyperparams.get("batch_size", hyperparameter_default(algo, "batch_size"))))
    size = f"a rollout of n_steps x env.n_envs = {rollout} steps"
    if batch > rollout:
        says = f"is larger than {size}: each update trains on the whole rollout at once"
    elif rollout % batch:
        says = f"does not divide {size}: each epoch's last minibatch holds {rollout % batch}"
    else:
        return
    warnings.warn(f"agent.hyperparams.batch_size={batch} {says}", SettingWarning, stacklevel=3)


def whole(value: Any) -> Any:
    """A float with a whole value (``1e3`` from YAML or the command line) as an int;
    anything else unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def check_hyperparams(algo: str, hyperparams: Mapping[str, Any]) -> None:
    """Refuse ``agent.hyperparams`` that ``algo`` does not take or that are out of
    range, alone or together (:func:`_check_together`; ValueError naming
    ``agent.hyperparams.<name>``), without building a model, so a sweep refuses them
    before any job trains: SB3 checks few of its arguments (``gamma=2`` or
    ``buffer_size=-1`` would run), some only as it builds the model."""
    for name, value in hyperparams.items():
        path = f"agent.hyperparams.{name}"
        refused = hyperparameter_refusal(algo, name)
        if refused is not None:
            raise ValueError(refused)
        if name == "train_freq":  # n, or (n, "step" | "episode"); a list from YAML
            pair = isinstance(value, (list, tuple))
            if pair and (len(value) != 2 or value[1] not in _TRAIN_FREQ_UNITS):
                raise ValueError(
                    f"{path} must be an integer >= 1 or a pair [n, step | episode], "
                    f"got {echoed(value)}"
                )
            check_int(path, value[0] if pair else value, 1)
        if name not in _RANGES or (value is None and name in _MAY_BE_NONE):
            continue
        if name in _SCHEDULES and callable(value):
            continue  # a schedule: SB3 calls it
        low, high, open_low, integer = _RANGES[name]
        finite = high == math.inf and name not in _MAY_BE_INFINITE
        checked_number(
            path, whole(value) if integer else value, low, high,
            integer=integer, above=open_low, finite=finite,
        )  # fmt: skip
    _check_together(algo, hyperparams)


def _check_together(algo: str, hyperparams: Mapping[str, Any]) -> None:
    """What SB3 refuses as it builds the model (or trains to nan) that no one
    value's range says: ``batch_size`` 1 with normalised advantages
    (:func:`normalizes_advantages`), ``use_sde`` on discrete actions (every env's
    are) and DQN's ``optimize_memory_usage`` beside its replay buffer's default
    ``handle_timeout_termination``. The rollout's own (with ``env.n_envs``) are
    :func:`check_rollout`'s."""
    if "batch_size" in hyperparams and normalizes_advantages(algo, hyperparams):
        batch = whole(hyperparams["batch_size"])
        if batch < 2:
            raise ValueError(
                f"agent.hyperparams.batch_size must be an integer >= 2 with "
                f"agent.hyperparams.normalize_advantage on (a minibatch's advantages are "
                f"normalised: over one step, nan), got {batch}"
            )
    if hyperparams.get("use_sde"):
        raise ValueError(
            "agent.hyperparams.use_sde must be false: gSDE explores continuous actions, and "
            f"every env's are discrete, got {echoed(hyperparams['use_sde'])}"
        )
    buffer = hyperparams.get("replay_buffer_kwargs") or {}
    timeouts = not isinstance(buffer, Mapping) or buffer.get("handle_timeout_termination", True)
    if hyperparams.get("optimize_memory_usage") and timeouts:
        raise ValueError(
            "agent.hyperparams.optimize_memory_usage=true needs agent.hyperparams."
            "replay_buffer_kwargs={handle_timeout_termination:false}: SB3's replay buffer "
            "does not do both"
        )


def build_model(
    spec: AgentSpec,
    env: Any,
    hyperparams: dict[str, Any] | None = None,
    device: str = "cpu",
    *,
    trains: bool = True,
) -> BaseAlgorithm:
    """A fresh SB3 model for ``spec`` on ``env`` (a gym env or an SB3 VecEnv);
    ``hyperparams`` are checked by :func:`check_hyperparams` and
    :func:`check_rollout` first, and a value SB3 refuses is a ValueError naming
    ``agent.hyperparams.<name>``. Minibatches that do not cut the rollout evenly
    are said in one line (:func:`note_minibatches`), unless ``trains`` is False:
    the model takes no RL step (cloning, improvement rounds)."""
    policy, policy_kwargs = policy_for(spec)
    kwargs = dict(hyperparams or {})
    check_hyperparams(spec.algo, kwargs)
    rollout = check_rollout(spec.algo, kwargs, int(getattr(env, "num_envs", 1)))
    if trains:
        note_minibatches(spec.algo, kwargs, rollout)
    if isinstance(kwargs.get("train_freq"), list):  # YAML / Hydra give [n, unit]; SB3 a tuple
        kwargs["train_freq"] = tuple(kwargs["train_freq"])
    for name, (_, _, _, integer) in _RANGES.items():  # 1e3 reads as a float
        if integer and name in kwargs:
            kwargs[name] = whole(kwargs[name])

    def construct(chosen: dict[str, Any]) -> BaseAlgorithm:
        with warnings.catch_warnings():
            # note_minibatches says it in one line
            warnings.filterwarnings("ignore", _MINIBATCH_WARNING, UserWarning)
            return ALGORITHMS[spec.algo](
                policy,
                env,
                policy_kwargs=policy_kwargs,
                seed=spec.seed,
                device=device,
                verbose=0,
                **chosen,
            )

    try:
        return quiet(construct(kwargs))
    except _SB3_REFUSALS as error:
        raise _refusal(error, kwargs, construct, spec.algo) from None


def _refusal(
    error: BaseException,
    kwargs: dict[str, Any],
    construct: Callable[[dict[str, Any]], BaseAlgorithm],
    algo: str,
) -> ValueError:
    """SB3's (or torch's) refusal of a model as one line about the hyperparameter it
    refused, named by its config path: SB3 names none as data, so it is the first of
    ``kwargs`` (in the order given) that makes the model fail when added to those
    before it (only on the failure path: each try builds a model). A model that
    fails with none of them is refused for another reason, given as it is."""
    try:
        construct({})
    except _SB3_REFUSALS:  # not about a hyperparameter
        return ValueError(f"{algo}: {' '.join(str(error).split())}")
    given: dict[str, Any] = {}
    for name, value in kwargs.items():
        given[name] = value
        try:
            construct(given)
        except _SB3_REFUSALS as refused:  # its message, which is about ``name``
            message = " ".join(str(refused).split())
            return ConfigError(f"{{{name}}}: {message}", (name,), "agent.hyperparams")
    message = " ".join(str(error).split())
    return ValueError(f"agent.hyperparams for {algo}: {message}")


def quiet(model: BaseAlgorithm) -> BaseAlgorithm:
    """``model`` with a logger that writes nowhere: what SB3 sets up for
    ``verbose=0`` on each ``learn``, but without the empty ``SB3-<time>`` folder
    it makes in the temporary directory every time. Values logged still reach
    ``model.logger.name_to_value`` until each dump, as before. A model given
    ``tensorboard_log`` keeps SB3's own logger, which writes the events there."""
    if model.tensorboard_log is None:
        model.set_logger(Logger(folder=None, output_formats=[]))
    return model


def save_agent(
    model: BaseAlgorithm,
    spec: AgentSpec,
    folder: str | Path,
    *,
    run_state: state_file.RunWindows | None = None,
    validation: dict[str, Any] | None = None,
    buffer_left_out: str | None = None,
) -> Path:
    """Write ``model.zip`` and ``agent.json`` as the folder ``folder``, which appears,
    or replaces an earlier checkpoint there, whole or not at all
    (:func:`envs.files.folder_atomic`): a run stopped mid-save (Ctrl-C) leaves no
    folder without its agent.json, nor a model.zip beside another save's agent.json.
    A folder that holds other files too (``runs/my_ppo`` with a TensorBoard log) is
    not replaced: the two files are written into it, each atomically. With
    ``run_state``, the windows its envs draw from (a training run's checkpoints),
    ``run_state.pkl`` goes beside them when the model's run can be resumed
    exactly (:mod:`agents.run_state`), holding ``validation`` too (the run's
    scores so far and best model, ``KeepBestByValidation.snapshot``), without a
    replay buffer given ``buffer_left_out`` (why: ``train.run_state_max_mb``)."""
    folder = Path(folder)
    spec.timesteps = int(model.num_timesteps)
    if model.get_env() is not None:  # a model loaded without one keeps what spec says
        norm = model.get_vec_normalize_env()
        spec.normalize_reward = norm is not None and bool(norm.norm_reward)
        spec.reward_norm = None
        if norm is not None and norm.norm_reward:
            stats = norm.ret_rms
            values = {
                "mean": float(stats.mean),
                "var": float(stats.var),
                "count": float(stats.count),
            }
            # statistics gone non-finite are no use to a resumed run: not recorded
            spec.reward_norm = values if _reward_norm_ok(values) else None
    if _holds_more_than_a_checkpoint(folder):  # the user's own folder: its files stay
        tmp = folder / ".model.tmp.zip"
        try:
            with naming_file(folder / "model.zip"):  # a full disk: SB3's message names no file
                model.save(tmp)
                fsync_file(tmp)  # on the disk before the rename publishes it
                tmp.replace(folder / "model.zip")
        finally:
            tmp.unlink(missing_ok=True)
        # an earlier save's run state is not this model's: it goes (a new one is
        # written in its place)
        (folder / state_file.RUN_STATE_FILE).unlink(missing_ok=True)
        if run_state is not None:
            with naming_file(folder / state_file.RUN_STATE_FILE):
                state_file.save(model, folder, run_state, validation, buffer_left_out)
        write_json_atomic(folder / "agent.json", asdict(spec))
        return folder
    with folder_atomic(folder.resolve()) as partial:
        with naming_file(folder / "model.zip"):
            model.save(partial / "model.zip")
            fsync_file(partial / "model.zip")  # on the disk before the folder's rename
        if run_state is not None:
            with naming_file(folder / state_file.RUN_STATE_FILE):
                if state_file.save(model, partial, run_state, validation, buffer_left_out):
                    fsync_file(partial / state_file.RUN_STATE_FILE)
        write_json_atomic(partial / "agent.json", asdict(spec))
    return folder


SAVED_FILES = frozenset({"model.zip", "agent.json", "run_state.pkl"})
"""What :func:`save_agent` writes in a checkpoint folder (``run_state.pkl``: a
training run's checkpoints, :mod:`agents.run_state`); :data:`agents.AGENT_FILES`
are those an agent is loaded from."""


def saved_weights(folder: str | Path) -> bytes:
    """The policy weights an agent folder saved (``model.zip``'s ``policy.pth``), as
    bytes: two folders hold the same weights when these are equal."""
    import zipfile

    with zipfile.ZipFile(Path(folder) / "model.zip") as archive:
        return archive.read("policy.pth")


def _holds_more_than_a_checkpoint(folder: Path) -> bool:
    """Whether ``folder`` is a folder holding anything besides a checkpoint's files (a
    run folder, a TensorBoard log beside the model): such a folder is written into,
    file by file, not replaced whole."""
    if not folder.is_dir():
        return False
    return any(entry.name not in SAVED_FILES for entry in folder.iterdir())


def run_folder_hint(folder: str | Path) -> str:
    """For a folder that is no checkpoint: ``; a run folder: its agents are in RUN/agent
    or RUN/last or RUN/checkpoints/step_N`` when it is a training run's, else ""."""
    inside = [name for name in ("agent", "last") if (Path(folder) / name / "agent.json").is_file()]
    checkpoints = sorted((Path(folder) / "checkpoints").glob("step_*/agent.json"))
    if not (inside or checkpoints):
        return ""
    held = [str(Path(folder) / name) for name in inside]
    if checkpoints:
        held.append(str(Path(folder) / "checkpoints" / "step_N"))
    return f"; a run folder: its agents are in {' or '.join(held)}"


def load_spec(folder: str | Path) -> AgentSpec:
    path = Path(folder) / "agent.json"
    if not path.is_file():
        if not Path(folder).exists():
            raise FileNotFoundError(f"{folder}: no such file or folder")
        hint = run_folder_hint(folder)
        raise FileNotFoundError(f"{folder}: not an agent checkpoint (no agent.json{hint})")
    try:
        data = read_json(path)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(data).__name__}")
    known = {f.name: f for f in fields(AgentSpec)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ValueError(f"{path}: unknown key {echoed(unknown[0])}; known: {', '.join(known)}")
    missing = [
        name
        for name, f in known.items()
        if name not in data and f.default is MISSING and f.default_factory is MISSING
    ]
    if missing:
        raise ValueError(f"{path}: missing key {echoed(missing[0])}")
    for name, kind in _FIELD_TYPES.items():
        if name not in data or (name in _NULLABLE and data[name] is None):
            continue
        value = data[name]
        if kind is int:
            check_int(f"{path}: {name}", value, 1 if name == "hidden" else 0)
        elif not isinstance(value, kind):
            raise ValueError(
                f"{path}: {name} must be a JSON {_JSON_NAMES[kind]}, got {echoed(value)}"
            )
    _check_registered(f"{path}: registered_windows", data.get("registered_windows"))
    for i, entry in enumerate(data.get("started_from") or []):
        _check_started_entry(f"{path}: started_from[{i}]", entry)
    norm = data.get("reward_norm")
    if norm is not None and not _reward_norm_ok(norm):
        raise ValueError(
            f"{path}: reward_norm must be an object of finite numbers mean, var >= 0 and "
            f"count > 0, got {echoed(norm)}"
        )
    if norm is not None and data.get("normalize_reward") is not True:
        raise ValueError(
            f"{path}: reward_norm is set but normalize_reward is "
            f"{json.dumps(data.get('normalize_reward'))} (statistics only go with true)"
        )
    try:
        spec = AgentSpec(**data)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    takes = env_arguments(spec.env_id) | set(SAVED_SETUP_KEYS)
    unknown = sorted(set(spec.env_kwargs) - takes)
    if unknown:  # a misspelt option would be left out silently
        raise ValueError(
            f"{path}: env_kwargs key {echoed(unknown[0])} is no argument of {spec.env_id}; known: "
            + ", ".join(sorted(takes))
        )
    try:
        check_saved_options(spec)
    except ConfigError as error:
        raise ConfigError(f"{path}: env_kwargs.{error}") from None
    return spec


def check_saved_options(spec: AgentSpec) -> None:
    """The ``env_kwargs`` values an agent reads itself when it runs without its env
    (``agents.adapter``, :func:`policy_for`), checked as the env checks them when it
    is made: each flag is a bool (``"false"`` would read as true), ``time_unit`` one
    of the units, a thresholds agent's ``epoch_s`` and ``y_tokens``, and the figures
    of a cluster of one's own (``cluster``, :meth:`ClusterSpec.from_figures`). A
    ConfigError naming the option."""
    from envs.encoder import check_time_unit
    from envs.sim import ClusterSpec
    from envs.thresholds import check_epoch_s, check_y_tokens

    kwargs = spec.env_kwargs
    for name in sorted(flag_arguments(spec.env_id) & set(kwargs)):
        check_flag(name, kwargs[name])
    if "time_unit" in kwargs:
        check_time_unit(kwargs["time_unit"])
    if spec.env == "thresholds":
        if "epoch_s" in kwargs:  # (absent: the env's own default)
            check_epoch_s(kwargs["epoch_s"])
        check_y_tokens(kwargs.get("y_tokens"))
    if "cluster" in kwargs:  # a cluster of one's own, by its figures: made again
        ClusterSpec.from_figures(kwargs["cluster"], "cluster")


def _check_registered(where: str, value: Any) -> None:
    """``registered_windows`` (an agent's, or a ``started_from`` entry's) is null, a
    record or a non-empty array of records, each an object of
    :data:`_REGISTERED_TYPES`' keys (``dataset`` and ``families`` only for a
    dataset's split, as a pair), each of its type; else a ValueError naming
    ``where`` and the key."""
    if value is None:
        return
    if isinstance(value, dict):
        _check_record(where, value)
        return
    if not isinstance(value, list) or not value:
        raise ValueError(
            f"{where} must be a JSON object or a non-empty array of objects (null: not "
            f"recorded), got {echoed(value)}"
        )
    for i, record in enumerate(value):
        _check_record(f"{where}[{i}]", record)


def _check_record(where: str, record: Any) -> None:
    """One ``registered_windows`` record (:func:`_check_registered`)."""
    if not isinstance(record, dict):
        raise ValueError(f"{where} must be a JSON object, got {echoed(record)}")
    known = ", ".join(_REGISTERED_TYPES)
    unknown = sorted(set(record) - set(_REGISTERED_TYPES))
    if unknown:
        raise ValueError(f"{where}: unknown key {echoed(unknown[0])}; known: {known}")
    needed = [k for k in _REGISTERED_TYPES if k not in (*_DATASET_KEYS, *_OPTIONAL_KEYS)]
    if "dataset" in record or "families" in record:  # a dataset's split: both
        needed += list(_DATASET_KEYS)
    missing = [k for k in needed if k not in record]
    if missing:
        raise ValueError(f"{where}: missing key {echoed(missing[0])}; known: {known}")
    for key, kind in _REGISTERED_TYPES.items():
        if key not in record:
            continue
        value = record[key]
        if key == "seed":
            check_int(f"{where}.seed", value, 0)
        elif kind is list:
            if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
                raise ValueError(
                    f"{where}.{key} must be a JSON array of strings, got {echoed(value)}"
                )
        elif not isinstance(value, kind):
            raise ValueError(
                f"{where}.{key} must be a JSON {_JSON_NAMES[kind]}, got {echoed(value)}"
            )
    for name, config in record.get("families", {}).items():
        if not isinstance(config, dict):
            raise ValueError(f"{where}.families.{name} must be a JSON object, got {echoed(config)}")
    for name, seed in record.get("stream_seeds", {}).items():
        check_int(f"{where}.stream_seeds.{name}", seed, 0)
    # (absent: a record saved before the option, whose windows were all drawn from the
    # workload's seed, as "shared" draws them; nothing is assumed here, only a value
    # given is checked)
    if "train_streams" in record and record["train_streams"] not in TRAIN_STREAMS:
        raise ValueError(
            f"{where}.train_streams must be one of {', '.join(TRAIN_STREAMS)}, got "
            f"{echoed(record['train_streams'])}"
        )


def _check_started_entry(where: str, entry: Any) -> None:
    """A ``started_from`` entry is an object of exactly :data:`_STARTED_TYPES`' keys,
    each of its type; else a ValueError naming ``where`` and the key."""
    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be a JSON object, got {echoed(entry)}")
    if set(entry) != set(_STARTED_TYPES):
        odd = sorted(set(entry) ^ set(_STARTED_TYPES))[0]
        said = "unknown" if odd in entry else "missing"
        raise ValueError(f"{where}: {said} key {echoed(odd)}; known: {', '.join(_STARTED_TYPES)}")
    for key, kinds in _STARTED_TYPES.items():
        if not isinstance(entry[key], kinds):
            shown = " or ".join("null" if k is type(None) else _JSON_NAMES[k] for k in kinds)
            raise ValueError(f"{where}.{key} must be a JSON {shown}, got {echoed(entry[key])}")
    _check_registered(f"{where}.registered_windows", entry["registered_windows"])


def _reward_norm_ok(norm: Mapping[str, Any]) -> bool:
    """``reward_norm`` is ``{mean, var >= 0, count > 0}``, each a finite JSON number."""
    if set(norm) != {"mean", "var", "count"}:
        return False
    for value in norm.values():
        if type(value) not in (int, float):  # not a bool
            return False
        try:
            if not math.isfinite(value):
                return False
        except OverflowError:  # an integer too large for a float
            return False
    return bool(norm["var"] >= 0 and norm["count"] > 0)


# agent.json's fields and their types (ints are checked >= 0, hidden >= 1)
_FIELD_TYPES: dict[str, type] = {
    "algo": str,
    "env": str,
    "net": str,
    "hidden": int,
    "env_kwargs": dict,
    "seed": int,
    "timesteps": int,
    "name": str,
    "normalize_reward": bool,
    "reward_norm": dict,
    "trace_file": dict,
    "started_from": list,
}
_NULLABLE = (
    "normalize_reward",
    "reward_norm",
    "trace_file",
    "started_from",
)  # null: not recorded
_JSON_NAMES: dict[type, str] = {
    str: "string",
    dict: "object",
    bool: "true or false",
    list: "array",
}
# a registered_windows record's keys and their types (lists: of strings; the seed an
# integer >= 0); dataset and families only a dataset's split has, plugin_sha256 only a
# workload of one's own; train_streams (registry.TRAIN_STREAMS) and stream_seeds (the
# seed each window drawn from a stream of its own was drawn from, by name) only a
# record saved since 2026-12-06
_REGISTERED_TYPES: dict[str, type] = {
    "workload": str,
    "params": dict,
    "seed": int,
    "train_streams": str,
    "stream_seeds": dict,
    "train": list,
    "val": list,
    "dataset": str,
    "families": dict,
    "plugin_sha256": str,
}
_DATASET_KEYS = ("dataset", "families")
_OPTIONAL_KEYS = ("plugin_sha256", "train_streams", "stream_seeds")  # (absent: see above)
# a started_from entry's keys and their types (None: null allowed)
_STARTED_TYPES: dict[str, tuple[type, ...]] = {
    "agent": (str,),
    "workload": (str,),
    "workload_params": (dict,),
    "trace_file": (dict, type(None)),
    "registered_windows": (dict, list, type(None)),
}


def _one_line(error: BaseException) -> str:
    return f"{type(error).__name__}: " + " ".join(str(error).split())


def load_model_file(
    model_path: Path, spec: AgentSpec, env: Any = None, device: str = "cpu"
) -> BaseAlgorithm:
    """``model.zip`` loaded as ``spec`` says (agent.json beside it): a file that is no
    SB3 model, a truncated one, one of another algorithm or another network than
    agent.json's ``algo``, ``net``, ``hidden`` and ``env`` is a ValueError naming both."""
    where = f"{model_path} (agent.json: algo={spec.algo}, net={spec.net}, hidden={spec.hidden})"
    try:
        model = ALGORITHMS[spec.algo].load(model_path, env=env, device=device)
    except Exception as error:  # zipfile, pickle, torch and SB3 each raise their own
        raise ValueError(
            f"{where}: stable-baselines3 cannot load it as a {spec.algo} model ({_one_line(error)})"
        ) from None
    policy, policy_kwargs = policy_for(spec)
    if isinstance(policy, str):  # SB3's name (MlpPolicy) for the algorithm's own class
        policy = ALGORITHMS[spec.algo].policy_aliases[policy]
    saved = dict(getattr(model, "policy_kwargs", None) or {})
    if model.policy_class is not policy:
        raise ValueError(
            f"{where}: the model's policy is {model.policy_class.__name__}, agent.json's "
            f"algo and net make {policy.__name__}"
        )
    for key, value in policy_kwargs.items():
        if key in saved and saved[key] != value:
            raise ValueError(
                f"{where}: the model's network has {key}={saved[key]!r}, agent.json's "
                f"fields make {key}={value!r}"
            )
    if spec.net == "mlp":
        built = _mlp_layers(getattr(model.policy, "net_arch", None))
        wanted = [spec.hidden, spec.hidden]
        if built != (wanted, wanted):  # SB3's default net_arch is saved as no policy_kwargs
            shown = built[0] if built[0] == built[1] else f"{built[0]} (actor), {built[1]} (critic)"
            raise ValueError(
                f"{where}: the model's network has hidden layers {shown}, agent.json's "
                f"hidden={spec.hidden} makes {wanted}"
            )
    return quiet(model)


def _mlp_layers(net_arch: Any) -> tuple[list[Any], list[Any]]:
    """The hidden layer widths of an SB3 ``MlpPolicy`` as built (its ``net_arch``:
    one list for both networks, or ``{"pi": [...], "vf": [...]}``), as (actor,
    critic); a DQN's Q-network reads as both."""
    if isinstance(net_arch, dict):
        return list(net_arch.get("pi", [])), list(net_arch.get("vf", []))
    layers = list(net_arch or [])
    return layers, layers


def load_agent(
    folder: str | Path, env: Any = None, device: str = "cpu"
) -> tuple[BaseAlgorithm, AgentSpec]:
    """Load a checkpoint folder (``env`` optional: needed only to keep training)."""
    spec = load_spec(folder)
    model_path = Path(folder) / "model.zip"
    if not model_path.is_file():
        raise FileNotFoundError(f"{folder}: agent.json but no model.zip")
    model = load_model_file(model_path, spec, env, device)
    note_read(folder)  # its files' sha256, for the run's provenance
    return model, spec


CLONE_KL_SCHEDULES = ("constant", "linear")


def check_clone_kl_args(coef: Any, schedule: Any) -> float:
    """``agent.clone_kl_coef`` (a finite number >= 0, returned as a float) and
    ``agent.clone_kl_schedule`` (one of :data:`CLONE_KL_SCHEDULES`), or a ValueError
    naming the field."""
    value = float(checked_number("agent.clone_kl_coef", coef, 0.0, math.inf, finite=True))
    if schedule not in CLONE_KL_SCHEDULES:
        raise ValueError(
            f"agent.clone_kl_schedule must be one of {', '.join(CLONE_KL_SCHEDULES)}, "
            f"got {echoed(schedule)}"
        )
    return value


class CloneKL:
    """A penalty towards the clone while PPO / A2C / MaskablePPO fine-tune it: the
    loss of every minibatch gains ``coef x mean KL(clone || policy)`` over the
    minibatch's observations (with their action masks), the clone being a frozen
    copy of the policy as it is when attached. ``schedule``: ``constant``, or
    ``linear`` (``coef`` down to 0 at the end of the run, as SB3's progress).

    SB3's ``train()`` evaluates a minibatch (``policy.evaluate_actions``), then
    zeroes the gradients and back-propagates its loss; the policy's
    ``evaluate_actions`` is wrapped to compute the KL from the distribution it
    has just built, and its optimizer's ``zero_grad`` to back-propagate the
    penalty into the zeroed gradients, so the loss's gradients add to it and the
    sum is clipped as one. With a coefficient of 0 nothing is back-propagated:
    the update is the algorithm's own. ``history`` keeps each minibatch's KL
    (also SB3's ``train/clone_kl``). The wrappers are instance attributes of the
    policy and its optimizer, which SB3 saves as state dicts: a saved model
    carries no trace of them."""

    def __init__(self, model: BaseAlgorithm, coef: float, schedule: str = "constant") -> None:
        check_clone_kl_args(coef, schedule)
        policy: Any = model.policy
        if not isinstance(getattr(policy, "action_dist", None), LeanCategoricals):
            raise ValueError(
                "agent.clone_kl_coef is for the node-set actor-critic (agent.net=set with "
                f"ppo, a2c or maskable_ppo), got {type(policy).__name__}"
            )
        self.model, self.coef, self.schedule = model, float(coef), schedule
        self.clone = copy.deepcopy(policy).requires_grad_(False).eval()
        self.history: list[tuple[int, float]] = []
        """(steps so far, KL) of every minibatch evaluated."""
        self._pending: Any = None
        self._evaluate = policy.evaluate_actions
        self._zero_grad = policy.optimizer.zero_grad
        policy.evaluate_actions = self._evaluate_actions  # type: ignore[method-assign]
        policy.optimizer.zero_grad = self._zero_grad_and_penalise  # type: ignore[method-assign]

    def current_coef(self) -> float:
        if self.schedule == "linear":
            return self.coef * float(self.model._current_progress_remaining)
        return self.coef

    def _evaluate_actions(self, obs: Any, actions: Any, **masks: Any) -> Any:
        out = self._evaluate(obs, actions, **masks)
        with torch.no_grad():
            clone = self.clone.get_distribution(obs, **masks)
        policy: Any = self.model.policy
        kl = kl_divergence(clone, policy.action_dist).mean()
        self.history.append((int(self.model.num_timesteps), float(kl.detach())))
        if getattr(self.model, "_logger", None) is not None:  # set up by learn()
            self.model.logger.record_mean("train/clone_kl", self.history[-1][1])
        coef = self.current_coef()
        self._pending = coef * kl if coef > 0 else None
        return out

    def _zero_grad_and_penalise(self, set_to_none: bool = True) -> None:
        self._zero_grad(set_to_none=set_to_none)
        pending, self._pending = self._pending, None
        if pending is not None:  # the loss shares the policy's forward graph: keep it
            pending.backward(retain_graph=True)

    def per_rollout(self) -> list[dict[str, float]]:
        """The mean KL(clone || policy) over each update's minibatches, by the step
        count the update followed (the run's record of how far the policy moved)."""
        steps: dict[int, list[float]] = {}
        for step, kl in self.history:
            steps.setdefault(step, []).append(kl)
        return [{"step": s, "clone_kl": sum(v) / len(v)} for s, v in steps.items()]
