"""Train a learned agent, then evaluate it against the baselines on held-out windows.

    python -m experiments.train agent=ppo env=route setup=70b_h100x4 \\
        workload=bursted_synthetic train.total_timesteps=50000 [seed=0] [out_dir=PATH]
    python -m experiments.train resume=runs/train/<time>/checkpoints/step_N ...
    python -m experiments.train -m seed=0,1,2 agent=ppo,a2c hydra/launcher=joblib
    python -m experiments.train +experiment=NAME

The run folder (``out_dir``, or Hydra's) gets ``checkpoints/step_N/`` at the first
rollout's end past each multiple of ``train.checkpoint_every`` steps (with the
run's state, ``run_state.pkl``, so that ``resume=`` goes on exactly), the agent in
``agent/``, and after the evaluation ``results.json`` (the comparison run's schema)
and charts. With ``train.val_every`` > 0 the model is scored (mean TTFT, greedy actions) on the
first ``workload.val_windows`` validation windows at the start, every
``val_every`` steps and at the end; ``agent/`` is the best-scoring one, the last
one goes to ``last/``, and ``results.json``'s ``train.validation`` says which
step won (``train.json`` holds that record when ``train.evaluate`` is false).
Test windows are used only by the final evaluation. Returns the best validation
score (``train.val_score`` of the kept agent, or the kept round's): what a sweeper
such as Optuna minimises, never a test figure; ``inf`` for a run that does not
validate.
"""

from __future__ import annotations

import copy
import itertools
import math
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import hydra
import numpy as np
from omegaconf import DictConfig, OmegaConf

from agents import WorkerDied, WorkerFailed
from envs.cluster_env import REWARD_ARGS
from envs.files import folder_leftovers
from envs.sim.checks import check_number, checked_number, is_number
from envs.sim.errors import SettingWarning, echoed, plural
from experiments import sweeps
from experiments._cli import LEGACY_SEED_MAX, cap_note
from experiments.config import (
    ENV_ARG_DEFAULTS,
    ENV_ARGS,
    LATER_ENV_ARGS,
    ROUTE_WARM_ARGS,
    THRESHOLDS_ARGS,
    cluster_label,
    cluster_of,
    cluster_size,
    clusters_told_apart,
    experiment_name,
    is_preset_cluster,
    naming_fields,
    register_configs,
    set_by_user,
    setup_label,
    sim_of,
    value_origin,
    window_pool_of,
    workload_label,
    workload_params,
    workload_paths,
)
from experiments.jobs import (
    check_policy_names,
    check_world,
    eval_windows,
    evaluate_and_write,
    evaluation_header,
    hydra_entry,
    job_logger,
    measured_on,
    multirun,
    run_dir,
    run_job,
    sweep_overrides,
)
from experiments.trained_on import (
    own_entry,
    same_windows,
    started_from,
    trained_streams,
    trained_trace,
    trained_windows,
)

register_configs()


KIND_ARGS = {"thresholds": THRESHOLDS_ARGS, "route_warm": ROUTE_WARM_ARGS}
"""The env arguments of one env kind only, besides every kind's ENV_ARGS."""
MAX_ENVS = 1024
"""The most envs a run steps (``env.n_envs``; the rollout, n_envs x n_steps,
has its own ceiling: ``agents.algorithms.check_rollout``)."""
MAX_HIDDEN = 65_536
"""The most units a layer has (``agent.hidden``)."""
MAX_THREADS = 1024
"""The most threads ``train.torch_threads`` and ``train.update_threads`` ask for."""
TRAIN_OUTPUTS = (
    "agent",
    "last",
    *folder_leftovers("agent"),
    *folder_leftovers("last"),
    "checkpoints",
    "train.json",
    "rescore_val[0-9]*.json",
)
"""What a training run writes in its folder besides a comparison's (the agents, what
a save killed half-way leaves of them, and ``train_rescore``'s records of them):
``overwrite=true`` clears these too."""


def env_kwargs(cfg: Any) -> dict[str, Any]:
    """The gymnasium.make arguments the config describes (JSON-ready; see make_env)."""
    kwargs: dict[str, Any] = {
        "model": cfg.model.name,
        "node": cfg.cluster.node,
        "n_nodes": cluster_size(cfg),
        "workload": cfg.workload.name,
        "workload_params": workload_params(cfg),
        "data_seed": int(cfg.workload.seed),
        "sim": OmegaConf.to_container(cfg.sim, resolve=True),
    }
    if not is_preset_cluster(cfg):  # a cluster of one's own: its figures, not only names
        kwargs["cluster"] = cluster_of(cfg).figures()
    names = ENV_ARGS + KIND_ARGS.get(cfg.env.kind, ())
    for name in names:
        if name in LATER_ENV_ARGS and cfg.env[name] == ENV_ARG_DEFAULTS[name]:
            continue
        kwargs[name] = cfg.env[name]
    return kwargs


# The config path of each gymnasium.make argument env_kwargs fills from a group
# value (the sim group's fields and the workload parameters are named by their
# groups: see env_paths).
ENV_ARG_PATHS = {
    "n_nodes": "cluster.n_nodes",
    "data_seed": "workload.seed",
    **{name: f"env.{name}" for name in ENV_ARGS + THRESHOLDS_ARGS + ROUTE_WARM_ARGS},
}


def env_paths(cfg: Any) -> dict[str, str]:
    """For naming_fields: the config path of every value the env is built from."""
    from experiments.config import group_paths

    return {**workload_paths(cfg), **group_paths("sim", cfg.sim), **ENV_ARG_PATHS}


def make_env_fn_kwargs(saved: dict[str, Any], windows: list[Any]) -> dict[str, Any]:
    """gymnasium.make keyword arguments from :func:`env_kwargs` and a window pool."""
    from agents.algorithms import SAVED_SETUP_KEYS
    from envs.sim import ClusterSpec

    kwargs = {k: v for k, v in saved.items() if k not in (*SAVED_SETUP_KEYS, "workload_params")}
    if "cluster" in saved:  # a cluster of one's own (a mixed one, a model or GPU of one's own)
        kwargs["setup"] = ClusterSpec.from_figures(saved["cluster"])
    else:
        kwargs["setup"] = ClusterSpec.uniform(saved["model"], saved["node"], saved["n_nodes"])
    kwargs["windows"] = windows
    return kwargs


def worker_options(cfg: Any) -> dict[str, Any] | None:
    """``make_vec_env``'s ``vec_env_kwargs`` for ``cfg.env.vec``: on ``subproc``, whether
    each worker works out its windows' digests as it starts (``digest_windows``: only
    a run that keeps checkpoints, ``train.checkpoint_every`` > 0, uses them); None
    in process."""
    if cfg.env.vec != "subproc":
        return None
    return {"digest_windows": int(cfg.train.checkpoint_every) > 0}


def imitation_sources(
    cfg: Any, saved_kwargs: dict[str, Any], pool: list[Any]
) -> list[dict[str, Any]]:
    """gymnasium.make arguments of every (setup, workload) pair to collect teacher
    demonstrations on: the training env's own first, then the extra ones."""
    from envs.windows import window_pool

    sources = [make_env_fn_kwargs(saved_kwargs, pool)]
    setups = [None, *cfg.imitation.setups]
    workloads = [cfg.workload.name, *cfg.imitation.workloads]
    for setup in setups:
        for workload in workloads:
            if setup is None and workload == cfg.workload.name:
                continue
            # the training workload on another setup: its own parameters (a trace's file)
            params = workload_params(cfg) if workload == cfg.workload.name else streams_of(cfg)
            seed, limit = int(cfg.workload.seed), cfg.workload.train_pool
            kwargs = make_env_fn_kwargs(
                saved_kwargs, window_pool(workload, "train", seed, limit, params)
            )
            if setup is not None:
                kwargs["setup"] = setup
            sources.append(kwargs)
    return sources


def imitation_windows(cfg: Any) -> list[dict[str, Any]]:
    """``agent.json``'s ``registered_windows`` records of the extra workloads
    behavioural cloning collects on (:func:`imitation_sources`: each workload's first
    ``workload.train_pool`` train windows, at its own parameters and
    ``workload.seed``), of the windows its teacher episodes run on
    (``agents.imitation.collect``: the first ``imitation.episodes``, in turn); none
    without imitation or for a resumed run (it clones nothing)."""
    episodes = int(cfg.imitation.episodes)
    if cfg.resume or episodes == 0:
        return []
    seed, limit = int(cfg.workload.seed), cfg.workload.train_pool
    used = episodes if limit is None else min(episodes, int(limit))
    extra = [w for w in dict.fromkeys(cfg.imitation.workloads) if w != cfg.workload.name]
    return [trained_windows(str(w), streams_of(cfg), seed, used, 0) for w in extra]


def streams_of(cfg: Any) -> dict[str, Any]:
    """The training workload's ``train_streams`` (``workload.params``), as the
    parameters of the other workloads a run collects on (``imitation.workloads``):
    their train windows drawn as the training workload's are; ``{}`` when not given
    (the registry's default), or for a trace."""
    from envs.workloads.trace_options import TRACE_WORKLOAD

    params = workload_params(cfg) if cfg.workload.name != TRACE_WORKLOAD else {}
    return {k: params[k] for k in ("train_streams",) if k in params}


def imitation_settings(cfg: Any) -> Any:
    """The ``imitation`` group as checked :class:`ImitationSettings`."""
    from agents.imitation_settings import ImitationSettings

    return ImitationSettings(**OmegaConf.to_container(cfg.imitation, resolve=True))  # type: ignore[arg-type]


def imitate(
    model: Any, spec: Any, cfg: Any, saved_kwargs: dict[str, Any], pool: list[Any]
) -> dict[str, float]:
    """Behavioural cloning from the causal teacher (the ``imitation`` config group)."""
    from agents.imitation import run_imitation

    settings = imitation_settings(cfg)
    sources = imitation_sources(cfg, saved_kwargs, pool)
    return run_imitation(model, spec.env_id, sources, settings, int(cfg.seed))


def agent_hyperparams(cfg: Any) -> dict[str, Any]:
    """``agent.hyperparams`` as a plain dict of SB3 keyword arguments."""
    hyperparams = OmegaConf.to_container(cfg.agent.hyperparams, resolve=True)
    assert isinstance(hyperparams, dict)
    return {str(k): v for k, v in hyperparams.items()}


def check_train(cfg: Any, read_trace: bool = True) -> None:
    """Reject values the schema's types allow but training cannot use (before any run);
    a trace file is read through unless not ``read_trace`` (:func:`check_world`)."""
    check_world(cfg, read_trace)
    if cfg.seed > LEGACY_SEED_MAX:  # SB3 seeds numpy's legacy generator and the envs with it
        raise ValueError(f"seed must be in 0..{LEGACY_SEED_MAX} to train, got {cfg.seed}")
    check_policy_names(cfg.train.eval_policies, "train.eval_policies")
    from agents.algorithms import ALGORITHMS, ENV_IDS, check_hyperparams, check_rollout

    if cfg.env.kind not in ENV_IDS:  # AgentSpec would name it agent.env
        raise ValueError(
            f"env.kind must be one of {', '.join(ENV_IDS)}, got {echoed(cfg.env.kind)}"
        )
    if cfg.agent.algo not in ALGORITHMS:
        raise ValueError(
            f"agent.algo must be one of {', '.join(ALGORITHMS)}, got {echoed(cfg.agent.algo)}"
        )
    if cfg.env.vec not in ("dummy", "subproc"):
        raise ValueError(f"env.vec must be dummy or subproc, got {echoed(cfg.env.vec)}")
    for kind, names in KIND_ARGS.items():  # another kind's option would be dropped silently
        for name in names:
            if kind != cfg.env.kind and cfg.env[name] != ENV_ARG_DEFAULTS[name]:
                raise ValueError(
                    f"env.{name} is an option of env.kind={kind}, not of "
                    f"env.kind={cfg.env.kind} (leave it at {ENV_ARG_DEFAULTS[name]!r})"
                )
    if cfg.env.kind == "thresholds":  # before any window is read (its warnings first)
        from envs.thresholds import check_y_tokens

        with naming_fields({"y_tokens": "env.y_tokens"}):
            check_y_tokens(cfg.env.y_tokens)
    # ceilings far above any use, below what a machine can allocate (a typo's 10**12
    # envs, units or threads hung or failed deep in numpy or torch)
    checked_number("env.n_envs", cfg.env.n_envs, 1, MAX_ENVS, integer=True)
    checked_number("agent.hidden", cfg.agent.hidden, 1, MAX_HIDDEN, integer=True)
    checked_number("train.run_state_max_mb", cfg.train.run_state_max_mb, 0, finite=True)
    limits = (
        ("total_timesteps", 0, None),
        ("checkpoint_every", 0, None),
        ("val_every", 0, None),
        ("torch_threads", 1, MAX_THREADS),
        ("update_threads", 1, MAX_THREADS),
        ("critic_warmup_steps", 0, None),
    )
    for field, low, high in limits:
        value = cfg.train[field]
        if high is not None:
            checked_number(f"train.{field}", value, low, high, integer=True)
        elif value < low:
            raise ValueError(f"train.{field} must be >= {low}, got {value}")
    warmup, total = int(cfg.train.critic_warmup_steps), int(cfg.train.total_timesteps)
    if warmup > 0 and cfg.agent.algo == "dqn":  # no critic: nothing would get a gradient
        raise ValueError(
            f"train.critic_warmup_steps={warmup} warms up an actor-critic's value function "
            "(agent.algo ppo, a2c or maskable_ppo), got agent.algo=dqn (set it to 0)"
        )
    named = agent_hyperparams(cfg)
    check_hyperparams(cfg.agent.algo, named)
    if not cfg.resume:  # a resume collects the checkpoint's n_steps: checked once adopted
        rollout = check_rollout(cfg.agent.algo, named, int(cfg.env.n_envs))  # before the envs
        if total > 0 and warmup > 0 and rollout is not None:
            runs = whole_rollouts(min(warmup, total), rollout)  # what the warm-up runs
            if runs >= total:
                asked = (
                    f"train.critic_warmup_steps={warmup}"
                    if warmup >= total
                    else f"train.critic_warmup_steps={warmup} runs {runs} steps (rounded up "
                    f"to whole rollouts of n_steps x env.n_envs = {rollout})"
                )
                warnings.warn(
                    f"{asked} >= train.total_timesteps={total}: the whole run warms the "
                    "critic up with the policy frozen; the policy never trains",
                    SettingWarning,
                    stacklevel=2,
                )
    if cfg.train.eval_seed is not None and cfg.train.eval_seed < 0:
        raise ValueError(f"train.eval_seed must be >= 0 (or null), got {cfg.train.eval_seed}")
    check_curriculum(cfg)
    check_imitation(cfg)
    check_finetune(cfg)
    check_improvement(cfg)


def warn_unscored_validation(cfg: Any) -> None:
    """A trace's ``workload.val_fraction`` holds windows out of training for
    validation: say so in one line when this run scores none of them
    (``train.val_every=0`` and no improvement rounds, which score each round on
    them). The trace was planned already (the checks, the train windows): the
    plan is the one kept in memory, no second read."""
    from envs.workloads.trace_file import TRACE_WORKLOAD, plan_trace, trace_options

    if cfg.workload.name != TRACE_WORKLOAD or int(cfg.train.val_every) > 0:
        return
    fraction = float(cfg.workload.val_fraction)
    if not fraction > 0 or int(cfg.improvement.iterations) > 0:
        return
    plan = plan_trace(trace_options(workload_params(cfg)))
    held = len(plan.split("val"))
    if plan.split_from != "time" or not held:  # a file's own splits: val_fraction unused
        return
    them = "it" if held == 1 else "them"
    warnings.warn(
        f"workload.val_fraction={fraction:g}{value_origin('workload.val_fraction')} holds "
        f"{plural(held, 'window')} out of training that this run never scores "
        f"(train.val_every=0): set train.val_every to score {them}, or "
        f"workload.val_fraction=0 to train on {them}",
        SettingWarning,
        stacklevel=2,
    )


def scored_val_windows(cfg: Any, val_pool: Sequence[Any]) -> int:
    """How many validation windows this run scores: PPO's ``val_pool``, or, with
    improvement rounds, which score each round on them whether or not PPO validates,
    the first ``workload.val_windows`` of the workload's (a trace's counted on the
    plan the run has made already)."""
    from envs.workloads.registry import configure, plan
    from envs.workloads.trace_file import TRACE_WORKLOAD, plan_trace, trace_options

    if val_pool or int(cfg.improvement.iterations) == 0:
        return len(val_pool)
    if cfg.workload.name == TRACE_WORKLOAD:
        held = len(plan_trace(trace_options(workload_params(cfg))).split("val"))
    else:
        specs = plan(configure(cfg.workload.name, **workload_params(cfg)), int(cfg.workload.seed))
        held = sum(s.split == "val" for s in specs)
    cap = cfg.workload.val_windows
    return held if cap is None else min(int(cap), held)


def warn_unreached_y(cfg: Any, pool: Sequence[Any]) -> None:
    """A thresholds run's ``env.y_tokens`` longer than any prefix two requests of its
    train windows share, in whole blocks (tune_btb's check of Y: ``y_shares_no_prefix``):
    its BTB can never fire, so no action changes what it does; say so in one line.
    A Y no prompt reaches is such a Y."""
    y = cfg.env.get("y_tokens") if cfg.env.kind == "thresholds" else None
    if y is None or not pool:
        return
    from envs.workloads.stats import y_shares_no_prefix

    longest = y_shares_no_prefix(int(y), pool)
    if longest is None:
        return
    warnings.warn(
        f"env.y_tokens={y}{value_origin('env.y_tokens')} is longer than any prefix two "
        f"requests of the {plural(len(pool), 'train window')} share ({longest:,} tokens at "
        "most): the agent's BTB never fires on them, so no X, Z, M or minimum prefix it "
        "chooses changes anything; a Y at or below the prefix their bursts share lets it fire",
        SettingWarning,
        stacklevel=2,
    )


def note_init_from_units(cfg: Any, spec: Any) -> None:
    """Say where ``train.init_from``'s agent read its observation in other units
    (``env.time_unit``, ``env.step_wait``): same shapes, so its weights load, but
    they meet numbers of another scale (a qwen3-8b node's seconds are 8.62 times
    fewer than llama-3.3-70b's for the same work)."""
    from agents.algorithms import load_spec

    saved = load_spec(cfg.train.init_from).env_kwargs
    for name, default in (("time_unit", "seconds"), ("step_wait", False)):
        was, now = saved.get(name, default), spec.env_kwargs.get(name, default)
        if was != now:
            print(
                f"note: train.init_from={cfg.train.init_from} was trained with env.{name}="
                f"{was}; this run has env.{name}={now}, so its weights read the observation's "
                f"durations otherwise (env.{name}={was} keeps them as trained)"
            )


def eval_seed(cfg: Any) -> int:
    """The simulator stream validation and evaluation draw: ``train.eval_seed``, by
    default the run's ``seed`` (also for a run saved before the option)."""
    chosen = cfg.train.get("eval_seed")
    return int(cfg.seed if chosen is None else chosen)


def check_curriculum(cfg: Any) -> None:
    """``train.curriculum``'s stages: whole bursts, and steps that rise."""
    before = 0
    for i, stage in enumerate(cfg.train.curriculum):
        where = f"train.curriculum[{i}]"
        if stage.bursts < 1:
            raise ValueError(
                f"{where}.bursts must be >= 1 (bursts a segment spans), got {stage.bursts}"
            )
        if stage.until <= before:
            raise ValueError(
                f"{where}.until must be above {before:,} (the stages' steps rise), "
                f"got {stage.until}"
            )
        before = stage.until
    check_number("train.curriculum_lead_s", cfg.train.curriculum_lead_s)  # nan and inf too
    if cfg.train.curriculum_min_requests < 2:
        raise ValueError(
            f"train.curriculum_min_requests must be >= 2, got {cfg.train.curriculum_min_requests}"
        )


def curriculum_stages(cfg: Any, pool: list[Any]) -> list[tuple[int, list[Any]]]:
    """Each stage of ``train.curriculum`` as (until, its segments of ``pool``)."""
    from envs.windows import burst_segments

    stages = []
    for i, stage in enumerate(cfg.train.curriculum):
        segments = [
            segment
            for window in pool
            for segment in burst_segments(
                window,
                int(stage.bursts),
                float(cfg.train.curriculum_lead_s),
                int(cfg.train.curriculum_min_requests),
            )
        ]
        if not segments:
            raise ValueError(
                f"train.curriculum[{i}]: the train windows of workload={cfg.workload.name} hold "
                f"no burst (a group of at least train.curriculum_min_requests="
                f"{cfg.train.curriculum_min_requests} requests) to cut segments at"
            )
        stages.append((int(stage.until), segments))
    return stages


def improvement_settings(cfg: Any) -> Any:
    """The ``improvement`` group as checked :class:`ImprovementSettings`."""
    from agents.improvement_settings import ImprovementSettings

    return ImprovementSettings(**OmegaConf.to_container(cfg.improvement, resolve=True))  # type: ignore[arg-type]


def check_improvement(cfg: Any) -> None:
    """The ``improvement`` group's values, and, when it is on, an agent it can
    improve (a node-set MaskablePPO on RouteWarm-v0 without its extra action parts)
    and validation windows to choose the round by."""
    settings = improvement_settings(cfg)
    if settings.iterations == 0:
        return
    head = f"improvement.iterations={settings.iterations}"
    if cfg.env.kind != "route_warm" or cfg.agent.algo != "maskable_ppo" or cfg.agent.net != "set":
        raise ValueError(
            f"{head}: rollout improvement trains a node-set MaskablePPO agent on "
            f"env.kind=route_warm, got agent.algo={cfg.agent.algo}, agent.net={cfg.agent.net}, "
            f"env.kind={cfg.env.kind}"
        )
    if cfg.env.speculate or cfg.env.cache_actions:
        option = "env.speculate" if cfg.env.speculate else "env.cache_actions"
        raise ValueError(f"{head}: it measures routes only; run it without {option}")
    if cfg.resume:
        raise ValueError(
            f"{head} with resume: rollout improvement runs before a run's first PPO step; "
            "resume continues a run (start a new one from the agent with train.init_from)"
        )
    if int(cfg.train.total_timesteps) > 0 and int(cfg.train.val_every) == 0:
        raise ValueError(
            f"{head} with train.total_timesteps={cfg.train.total_timesteps} and "
            "train.val_every=0: PPO's last model would replace the best round unscored; "
            "set train.val_every (PPO's steps are then scored against the improved "
            "policy) or train.total_timesteps=0"
        )
    if settings.pool_seeds is not None:
        from envs.workloads.trace_options import TRACE_WORKLOAD

        if cfg.workload.name == TRACE_WORKLOAD:
            raise ValueError(
                f"improvement.pool_seeds: a trace has no other seeds to draw train windows "
                f"from (workload={TRACE_WORKLOAD}); run it without improvement.pool_seeds"
            )
        if int(cfg.workload.seed) in settings.pool_seeds:
            raise ValueError(
                f"improvement.pool_seeds: {int(cfg.workload.seed)} is workload.seed, whose "
                "train windows join the rounds anyway; name other seeds"
            )
    if cfg.workload.val_windows is not None and int(cfg.workload.val_windows) < 1:
        raise ValueError(
            f"{head}: each round is scored on validation windows; "
            f"workload.val_windows must be >= 1, got {cfg.workload.val_windows}"
        )


def run_improvement(
    model: Any,
    spec: Any,
    cfg: Any,
    pool: list[Any],
    out_dir: Path,
    vec: Any,
    logger: Any = None,
) -> tuple[Any, dict[str, Any]]:
    """Rounds of rollout policy improvement on ``pool`` (the train windows), each
    scored on the validation windows (and logged to ``logger`` as
    ``improve/val_score``, ``improve/changed``, ``improve/fit_change`` by round);
    the best-scoring policy (the start
    included) is saved to ``out_dir / "agent"`` and returned with the record."""
    from agents.algorithms import load_agent, save_agent
    from agents.callbacks import score_text
    from agents.imitation import Demonstrations
    from agents.rollout_improvement import improve_round

    settings = improvement_settings(cfg)
    pool = [*pool, *seeds_pool(cfg, settings.pool_seeds)]
    pool, anchored = round_pool(pool, settings.families, settings.anchor_families)
    tried = settings.warm_variant_families if settings.warm_variant else None
    variant_windows = variant_pool(pool, tried)
    val_pool = window_pool_of(cfg, "val", cfg.workload.val_windows)
    if not val_pool:
        raise ValueError("improvement: the workload has no validation windows to score rounds on")
    score = ValidationScore(cfg, spec, val_pool, str(cfg.train.val_score))
    cluster, sim = cluster_of(cfg), sim_of(cfg)
    seed = int(cfg.seed)
    labels = Demonstrations() if settings.aggregate else None
    best_round, best_score = 0, float(score(model))
    save_agent(model, spec, out_dir / "agent")
    rounds: list[dict[str, Any]] = [{"round": 0, "score": best_score, **score.records[-1]}]
    print(f"rollout improvement: start, validation {score_text(best_score)}", flush=True)
    for number in range(1, settings.iterations + 1):
        start = time.perf_counter()
        stats = improve_round(
            model,
            spec,
            round_windows(
                pool, min(settings.windows, len(pool)), number, seed, settings.families_in_turn
            ),
            cluster,
            sim,
            settings,
            seed * 1000 + number,
            labels,
            anchored,
            variant_windows,
        )
        value = float(score(model))
        kept = value < best_score
        if kept:
            best_round, best_score = number, value
            save_agent(model, spec, out_dir / "agent")
        wall = time.perf_counter() - start
        if logger is not None:
            logger.log(
                {
                    "improve/val_score": value,
                    "improve/changed": stats.changed,
                    "improve/fit_change": stats.change,
                },
                step=number,
            )
        rounds.append(
            {
                "round": number,
                "score": value,
                **score.records[-1],
                **stats.as_dict(),
                "wall_s": wall,
            }
        )
        best = "best so far" if kept else f"best {score_text(best_score)} at round {best_round}"
        verdict = "" if not settings.undo_worse else "kept" if stats.accepted else "undone"
        fitted = f"the fit {verdict}: " if verdict else "after the fit: "
        fitted += f"the round's windows {stats.change * 100:+.2f} %"
        if settings.warm_variant:
            fitted += f"; the warm variant won {stats.warm_windows} of {len(stats.windows)} windows"
        print(
            f"rollout improvement: round {number}/{settings.iterations}: "
            f"{stats.changed} of {stats.measured} measured decisions changed "
            f"({stats.saved_s:.1f} s of TTFT saved as measured); {fitted}; "
            f"validation {score_text(value)} ({best}) [{wall:.0f} s]",
            flush=True,
        )
    model, _ = load_agent(out_dir / "agent", env=vec)
    record = {
        "settings": OmegaConf.to_container(cfg.improvement, resolve=True),
        "validation_windows": [w.name for w in val_pool],
        "score": str(cfg.train.val_score),
        "rounds": rounds,
        "best_round": best_round,
        "best_score": best_score,
    }
    return model, record


def check_finetune(cfg: Any) -> None:
    """The fine-tuning knobs: a known critic and learning-rate schedule, a reference
    policy that exists, an agent folder to start from (not with resume)."""
    from agents.finetune import LR_SCHEDULES
    from agents.networks import CRITICS

    if cfg.train.val_score not in VAL_SCORES:
        raise ValueError(
            f"train.val_score must be one of {', '.join(VAL_SCORES)}, "
            f"got {echoed(cfg.train.val_score)}"
        )

    for field, known in (("critic", CRITICS), ("lr_schedule", LR_SCHEDULES)):
        if cfg.agent[field] not in known:
            raise ValueError(
                f"agent.{field} must be one of {', '.join(known)}, got {echoed(cfg.agent[field])}"
            )
    if cfg.env.reward_baseline is not None:
        check_policy_names([cfg.env.reward_baseline], "env.reward_baseline")
    from envs.cluster_env import REWARD_TIMINGS

    if cfg.env.reward_timing not in REWARD_TIMINGS:
        raise ValueError(
            f"env.reward_timing must be one of {', '.join(REWARD_TIMINGS)}, "
            f"got {echoed(cfg.env.reward_timing)}"
        )
    prior = cfg.agent.warm_prior
    if not (is_number(prior) and math.isfinite(prior)):  # nan / inf: nan probabilities
        raise ValueError(f"agent.warm_prior must be finite log-odds, got {echoed(prior)}")
    if cfg.agent.warm_prior:
        if cfg.env.kind != "route_warm" or cfg.agent.net != "set":
            raise ValueError(
                f"agent.warm_prior={cfg.agent.warm_prior}: the warm heads' prior is for "
                f"env.kind=route_warm with agent.net=set, got env.kind={cfg.env.kind}, "
                f"agent.net={cfg.agent.net}"
            )
        if cfg.train.init_from or cfg.resume:
            raise ValueError(
                f"agent.warm_prior={cfg.agent.warm_prior} starts fresh warm heads; with "
                "train.init_from or resume the saved agent's are used (set it to 0)"
            )
    check_clone_kl(cfg)
    scale = cfg.agent.init_logit_scale
    if not (is_number(scale) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"agent.init_logit_scale must be a number > 0, got {echoed(scale)}")
    if scale != 1 and not cfg.train.init_from:
        raise ValueError(
            f"agent.init_logit_scale={scale} scales the logits of the agent training starts "
            "from: give that agent as train.init_from"
        )
    if cfg.train.init_from:
        if cfg.resume:
            raise ValueError(
                "train.init_from and resume are both set: resume continues a run, "
                "init_from starts a new one from an agent's weights (give one)"
            )
        from agents import agent_folder, zoo_names

        folder = agent_folder(str(cfg.train.init_from))
        if folder is None:
            raise ValueError(
                f"train.init_from={cfg.train.init_from}: not an agent folder (give the "
                "folder of the agent to start from, a run's agent/, or a shipped agent's "
                f"name: {', '.join(zoo_names())})"
            )
        cfg.train.init_from = str(folder)  # a shipped agent's name: its folder from here on


def check_clone_kl(cfg: Any) -> None:
    """``agent.clone_kl_coef``: a number >= 0 and a known schedule; above 0 it needs
    the clone (``train.init_from``) and a node-set actor-critic."""
    from agents.algorithms import check_clone_kl_args

    coef = check_clone_kl_args(cfg.agent.clone_kl_coef, cfg.agent.clone_kl_schedule)
    if coef == 0:
        return
    if not cfg.train.init_from:
        raise ValueError(
            f"agent.clone_kl_coef={coef} pulls the policy towards the agent it starts "
            "from: give that agent as train.init_from"
        )
    if cfg.agent.net != "set" or cfg.agent.algo == "dqn":
        raise ValueError(
            f"agent.clone_kl_coef={coef} is for the node-set actor-critic (agent.net=set "
            f"with ppo, a2c or maskable_ppo), got agent.net={cfg.agent.net}, "
            f"agent.algo={cfg.agent.algo}"
        )


def check_imitation(cfg: Any) -> None:
    """The ``imitation`` group's values (before any env is built): counts in range,
    extra setups and workloads that exist, teacher arguments the teacher takes, and
    an agent behavioural cloning can train (an actor-critic on a route env, on the
    extra setups' node counts too if its network is fixed to one)."""
    from agents.teacher import CausalTeacher
    from envs.sim import SETUPS

    imitation = cfg.imitation
    imitation_settings(cfg)  # counts, setups and workloads (ImitationSettings checks them)
    teacher = OmegaConf.to_container(imitation.teacher, resolve=True)
    assert isinstance(teacher, dict)
    try:
        CausalTeacher(**{str(k): v for k, v in teacher.items()})
    except TypeError as error:  # an argument it does not take
        raise ValueError(f"imitation.teacher: {error}") from None
    except ValueError as error:  # named causal_teacher.<argument>
        raise ValueError(str(error).replace("causal_teacher.", "imitation.teacher.")) from None
    if imitation.episodes == 0:
        return
    if cfg.env.kind == "route_warm" and (cfg.env.speculate or cfg.env.cache_actions):
        option = "env.speculate" if cfg.env.speculate else "env.cache_actions"
        raise ValueError(
            f"imitation.episodes={imitation.episodes}: the teacher labels no speculate, pin "
            f"or move actions; behavioural cloning runs without {option}"
        )
    if cfg.env.kind not in ("route", "route_warm") or cfg.agent.algo == "dqn":
        raise ValueError(
            f"imitation.episodes={imitation.episodes}: behavioural cloning trains an "
            "actor-critic (agent.algo ppo, a2c or maskable_ppo) on env.kind route or "
            f"route_warm, got agent.algo={cfg.agent.algo}, env.kind={cfg.env.kind}"
        )
    if cfg.agent.net != "set":  # SB3's flat MLP is fixed to the training cluster's size
        n_nodes = int(cfg.cluster.n_nodes)
        for name in imitation.setups:
            if SETUPS[name][2] != n_nodes:
                raise ValueError(
                    f"imitation.setups: {name!r} has {SETUPS[name][2]} nodes, but "
                    f"agent.net={cfg.agent.net} is fixed to the training cluster's {n_nodes} "
                    "(agent.net=set runs on other node counts)"
                )


RESUME_FIXED = ("agent.algo", "agent.net", "env.kind", "cluster.n_nodes")
"""What a resumed run cannot adopt from its checkpoint: each picks a config group
(or the cluster) whose other defaults would not follow."""
NONE_IS_A_VALUE = ("env.y_tokens",)
"""Resume fields whose None a checkpoint records as a value (the default), not as
"not recorded"."""


def check_resume(cfg: Any, resumed: Any) -> dict[str, Any]:
    """A checkpoint to resume (its AgentSpec ``resumed``) must be the network the config
    describes, on as many nodes; and the step count continues, so the target cannot be
    below the checkpoint's. A field of the network's shape or of the env's layout
    that the user did not set (all but :data:`RESUME_FIXED`) takes the checkpoint's value
    in ``cfg`` instead (returned as ``{path: value}``); one the user set that differs,
    and another algorithm, network kind, env kind or node count, is refused naming the
    field. Outside a Hydra job (no way to tell what the user set) every difference is
    refused."""
    asked = {
        "agent.algo": cfg.agent.algo,
        "env.kind": cfg.env.kind,
        "agent.net": cfg.agent.net,
        "agent.hidden": int(cfg.agent.hidden),
        "agent.critic": str(cfg.agent.critic),
        "cluster.n_nodes": int(cfg.cluster.n_nodes),
    }
    saved = {
        "agent.algo": resumed.algo,
        "env.kind": resumed.env,
        "agent.net": resumed.net,
        "agent.hidden": int(resumed.hidden),
        "agent.critic": resumed.critic,
        "cluster.n_nodes": resumed.env_kwargs.get("n_nodes"),
    }
    if cfg.env.kind in ("route", "route_warm"):
        from agents.networks import NETWORK_OPTIONS

        for name in NETWORK_OPTIONS:  # another observation or action layout
            asked[f"env.{name}"] = bool(cfg.env.get(name, False))
            saved[f"env.{name}"] = bool(resumed.env_kwargs.get(name, False))
        # the same layout, other numbers in it: durations in another unit
        asked["env.time_unit"] = str(cfg.env.get("time_unit", "seconds"))
        saved["env.time_unit"] = str(resumed.env_kwargs.get("time_unit", "seconds"))
        asked["env.step_wait"] = bool(cfg.env.get("step_wait", False))
        saved["env.step_wait"] = bool(resumed.env_kwargs.get("step_wait", False))
    if cfg.env.kind == "thresholds":  # the routing rules: another action space
        for name in ("eft_rules", "spread_rules"):
            asked[f"env.{name}"] = bool(cfg.env.get(name, False))
            saved[f"env.{name}"] = bool(resumed.env_kwargs.get(name, False))
        # the same layout, another key: what BTB counts as one prefix (None: the default)
        asked["env.y_tokens"] = cfg.env.get("y_tokens")
        saved["env.y_tokens"] = resumed.env_kwargs.get("y_tokens")
    adopted: dict[str, Any] = {}
    refused = []  # every field at once: each would else be met one run at a time
    for field, value in asked.items():
        unknown = saved[field] is None and field not in NONE_IS_A_VALUE  # not recorded
        if unknown or saved[field] == value:
            continue
        if field not in RESUME_FIXED and set_by_user(field) is False:
            OmegaConf.update(cfg, field, saved[field])
            adopted[field] = saved[field]
        else:
            refused.append(field)
    if refused:
        hints = dict.fromkeys(_resume_with(f, saved[f], resumed) for f in refused)
        raise ValueError(
            f"resume={cfg.resume}{value_origin('resume')}: that checkpoint is "
            f"{resumed.algo}/{resumed.env}/{resumed.net} with "
            + ", ".join(f"{f}={saved[f]}" for f in refused)
            + ", the config asks for "
            + ", ".join(f"{f}={asked[f]}" for f in refused)
            + f" (resume with {' '.join(hints)})"
        )
    target = int(cfg.train.total_timesteps)
    if target < resumed.timesteps:
        raise ValueError(
            f"train.total_timesteps={target} is below the {resumed.timesteps} steps the "
            f"checkpoint resume={cfg.resume} has already trained (the step count continues; "
            f"ask for >= {resumed.timesteps})"
        )
    return adopted


def exact_resume(
    cfg: Any, model: Any, changes: dict[str, Any], windows: Any, trained_seed: int
) -> dict[str, Any] | None:
    """The run state of checkpoint ``cfg.resume`` (:mod:`agents.run_state`) put in
    place on ``model`` (loaded on this run's envs): its envs mid-episode on this
    run's ``windows`` (a ``RunWindows``), SB3's next observations and the reward
    statistics; the random generators are set as training starts
    (``RestoreRandomState``). None, said in one line, where the resume cannot be
    exact: a checkpoint without one, a run that ``changes`` the checkpoint's
    workload, setup, simulator, reward or envs, or whose windows are not the
    checkpoint's, one on another ``env.vec`` than the checkpoint's, or one of another
    ``seed`` than the checkpoint's run (``trained_seed``, its agent.json's: the run
    state's streams are that seed's, and a seed sweep resumed from one checkpoint
    would run one run again and again), or one to another ``train.total_timesteps``
    under a linear ``agent.lr_schedule`` or of a DQN (:func:`decays_over_run`: no run
    had the rates it trains with; under a constant one, it goes on as a run to its
    own total would have), or whose ``train.curriculum`` ends a stage at another step at or
    before the checkpoint's (:func:`curriculum_moved`)."""
    from agents import run_state

    state = run_state.load(cfg.resume)
    why = None
    if state is None:
        why = (
            "it records no run state: only checkpoints/step_N do, of ppo, a2c and "
            "maskable_ppo since 2026-12-06 (on env.vec=subproc, and of dqn, since later "
            "that day)"
        )
    elif int(state["timesteps"]) != int(model.num_timesteps):
        why = (
            f"its {run_state.RUN_STATE_FILE} is of step {state['timesteps']}, "
            f"not its model's {model.num_timesteps}"
        )
    elif state.get("replay_buffer_left_out"):
        why = f"its run state holds no replay buffer: {state['replay_buffer_left_out']}"
    elif changes:
        why = f"this run changes {', '.join(changes)}"
    elif int(cfg.seed) != int(trained_seed):
        why = f"this run changes seed: the checkpoint's run had seed={trained_seed}"
    elif (decays := decays_over_run(model)) and int(model._total_timesteps) != int(
        cfg.train.total_timesteps
    ):
        why = (
            f"its run was to train.total_timesteps={model._total_timesteps}, this one to "
            f"{cfg.train.total_timesteps}: {' and '.join(decays)} over the run's steps"
        )
    elif run_state.state_vec(state) != cfg.env.vec:
        why = (
            f"its envs ran on env.vec={run_state.state_vec(state)}, "
            f"this run's on env.vec={cfg.env.vec}"
        )
    elif state["windows"] != windows.digests:
        why = "its envs' windows are not this run's (train windows, curriculum segments)"
    else:
        why = curriculum_moved(state.get("curriculum"), windows.curriculum, int(state["timesteps"]))
    if why is not None:
        print(
            f"note: resume={cfg.resume} is not exact ({why}): training goes on from its "
            "weights with fresh envs and random streams"
        )
        return None
    assert state is not None
    try:
        run_state.restore_envs(model, state, windows)
    except ValueError as error:  # e.g. a run state pickled by another btb-gym
        raise ValueError(
            f"{Path(cfg.resume) / run_state.RUN_STATE_FILE}: {error} (remove it to resume "
            "from the weights alone, not exactly)"
        ) from None
    return state


def replay_buffer_left_out(cfg: Any, model: Any) -> str | None:
    """Why the run's checkpoints leave its replay buffer out of their run state (a
    DQN's, which would take more than ``train.run_state_max_mb`` in a run of
    ``train.total_timesteps``), said once as the run starts; None where they keep
    it (:func:`agents.run_state.buffer_bytes`)."""
    from agents.run_state import RUN_STATE_FILE, buffer_bytes

    size, transitions = buffer_bytes(model, int(cfg.train.total_timesteps))
    limit = float(cfg.train.run_state_max_mb)
    if size <= limit * 1e6:
        return None
    why = (
        f"its replay buffer would take up to {size / 1e6:,.1f} MB ({transitions:,} "
        f"transitions), over train.run_state_max_mb={limit:g}"
    )
    print(
        f"note: {why}: checkpoints leave it out of their {RUN_STATE_FILE}, and resume= from "
        "them is not exact (raise train.run_state_max_mb to keep it)"
    )
    return why


def curriculum_moved(
    saved: list[list[int]] | None, stages: list[tuple[int, int]], step: int
) -> str | None:
    """Why a resume at ``step`` whose curriculum is ``stages`` (``RunWindows.curriculum``:
    each stage's until and segments) is not exact where the checkpoint's run had
    ``saved`` (its run state's; None in one saved before it was kept), or None. The
    segments are in the windows' digests; a stage's ``until`` is not, and a stage
    that ended at or before ``step`` in either run, at another step in the other,
    parted the runs before the checkpoint (and the envs, restored on a stage this run
    is past, would draw its segments to the end). Moved past ``step`` in both, the
    resume goes on as a run with this run's curriculum would."""
    if saved is None:
        return (
            "its run state does not record train.curriculum's steps (saved before "
            "2026-12-06, later the same day)"
            if stages
            else None
        )
    if [n for _, n in saved] != [n for _, n in stages]:
        return "its envs' windows are not this run's (train windows, curriculum segments)"
    for i, ((was, _), (now, _)) in enumerate(zip(saved, stages, strict=True)):
        if was != now and min(was, now) <= step:
            return (
                f"this run changes train.curriculum[{i}].until from {was} to {now}: the "
                f"stage ends by the checkpoint's step {step} in one run, not at the same step "
                "in the other"
            )
    return None


def decays_over_run(model: Any) -> list[str]:
    """What of ``model``'s decays over its run's ``train.total_timesteps`` (SB3's
    progress is the steps taken over the total), so that its value at a step depends
    on the total: the learning rate under ``agent.lr_schedule=linear``, a DQN's
    exploration rate (over ``exploration_fraction`` of the run)."""
    from stable_baselines3 import DQN

    from agents.finetune import schedule_of

    decays = []
    schedule = schedule_of(model.learning_rate)
    if schedule is None or schedule[0] != "constant":
        decays.append("agent.lr_schedule=linear decays")
    if isinstance(model, DQN) and model.exploration_initial_eps != model.exploration_final_eps:
        decays.append("DQN's exploration rate falls")
    return decays


def validation_basis(cfg: Any, val_pool: list[Any]) -> dict[str, Any]:
    """What a run's validation scores are of: ``train.val_every``, ``train.val_score``,
    the windows (by name) and the simulator's stream. A resumed run carries the
    checkpoint's scores over only when its own are of the same."""
    return {
        "train.val_every": int(cfg.train.val_every),
        "train.val_score": str(cfg.train.val_score),
        "windows": [w.name for w in val_pool],
        "seed": eval_seed(cfg),
    }


def carried_validation(
    cfg: Any, run_state: dict[str, Any] | None, basis: dict[str, Any]
) -> dict[str, Any] | None:
    """The validation of an exact resume's checkpoint (``run_state``), scores so far
    and best model, for this run to go on choosing ``agent/`` among: None when the
    resume is not exact, or the checkpoint's run scored none (said in one line when
    it scored others: another ``basis``)."""
    if run_state is None:
        return None
    saved = run_state.get("validation")
    if saved is None:  # no train.val_every, or a run state from before it was kept
        print(
            f"note: resume={cfg.resume}: its run state holds no validation scores; "
            "this run scores its own from its start"
        )
        return None
    if saved["basis"] != basis:
        differ = [key for key in basis if saved["basis"].get(key) != basis[key]]
        print(
            f"note: resume={cfg.resume}: the validation before it is not carried over "
            f"({', '.join(differ)} differs from its run's); this run scores its own from its start"
        )
        return None
    return dict(saved)


def _resume_with(field: str, saved: Any, resumed: Any) -> str:
    """What to pass to resume ``resumed`` (an AgentSpec) where the config's ``field``
    differs from its ``saved`` value: the config group for the algorithm, network
    kind and env (``agent=maskable_ppo``, ``agent=ppo_mlp``, ``env=thresholds``: the
    group's other defaults come with it), else ``field=saved``."""
    if field in ("agent.algo", "agent.net"):  # conf/agent has ppo_mlp, no other *_mlp
        if resumed.net != "mlp":
            return f"agent={resumed.algo}"
        return "agent=ppo_mlp" if resumed.algo == "ppo" else f"agent={resumed.algo} agent.net=mlp"
    if field == "env.kind":
        return f"env={resumed.env}"
    if field == "cluster.n_nodes":
        return f"a cluster of {saved} nodes: cluster=, cluster.nodes= or setup="
    return f"{field}={'null' if saved is None else saved}"


# What a resumed run may change from its checkpoint (check_resume refuses another
# network or number of nodes): the workload it trains on, the setup, the simulator
# and the reward, each named by its config path.
RESUME_CHANGEABLE = {
    "workload": "workload.name",
    "workload_params": "workload.params",
    "data_seed": "workload.seed",
    "model": "model.name",
    "node": "cluster.node",
    "cluster": "cluster",
    "sim": "sim",
    **{name: f"env.{name}" for name in ENV_ARGS + THRESHOLDS_ARGS + ROUTE_WARM_ARGS},
}


def resume_changes(
    saved: dict[str, Any], asked: dict[str, Any], streams: str | None = None
) -> dict[str, list[Any]]:
    """``{config path: [checkpoint's value, this run's value]}`` for each workload,
    setup, simulator or reward value (env_kwargs ``saved`` in the checkpoint,
    ``asked`` now) that differs, the simulator's field by field (``sim.copy_model``):
    resuming on another workload is allowed (fine-tuning) but must be said.
    ``streams``: how the checkpoint's train windows were drawn (``trained_streams``
    of its agent.json: its ``workload_params`` leave it out if saved before the
    option, when they were ``shared``); None: as ``saved``'s parameters configure.
    A change of it is said apart (``workload.params.train_streams``), not as one of
    the parameters."""
    changes: dict[str, list[Any]] = {}
    for key, path in RESUME_CHANGEABLE.items():
        if key == "workload_params":
            old_streams = _run_streams(saved) if streams is None else streams
            new_streams = _run_streams(asked)
            if None not in (old_streams, new_streams) and old_streams != new_streams:
                changes[f"{path}.train_streams"] = [old_streams, new_streams]
        if key not in saved and key not in ENV_ARG_DEFAULTS:
            continue
        # an env argument either side leaves out is at the env's default
        old = saved.get(key, ENV_ARG_DEFAULTS.get(key))
        new = asked.get(key, ENV_ARG_DEFAULTS.get(key))
        if old == new:
            continue
        if key == "workload_params" and _same_generators(saved, asked):
            continue  # e.g. a parameter now given at its default value (or train_streams)
        if key == "cluster":  # a cluster's figures (~1,500 characters): by its label
            changes[path] = _cluster_texts(saved, asked)
        elif key == "sim" and isinstance(old, dict) and isinstance(new, dict):
            for name in dict.fromkeys([*old, *new]):
                if old.get(name) != new.get(name):
                    changes[f"sim.{name}"] = [old.get(name), new.get(name)]
        else:
            changes[path] = [old, new]
    return changes


def _cluster_texts(saved: dict[str, Any], asked: dict[str, Any]) -> list[str]:
    """The clusters of two env_kwargs that differ, each by its label
    (:func:`_cluster_text`); when the labels are one, each followed by the figures
    that changed (``config.clusters_told_apart``:
    ``mine_4xMYGPU_x2 (cluster.gpus.MYGPU.flops=1e+15)``)."""
    from envs.sim import ClusterSpec

    old, new = _cluster_text(saved), _cluster_text(asked)
    if old != new:
        return [old, new]
    try:
        was, now = (ClusterSpec.from_figures(kwargs["cluster"]) for kwargs in (saved, asked))
    except (ValueError, KeyError, TypeError):  # not recorded in full: the labels alone
        return [old, new]
    return list(clusters_told_apart(was, now, old, new))


def _cluster_text(kwargs: dict[str, Any]) -> str:
    """The cluster env_kwargs ``kwargs`` describe, by its label (``cluster_label``:
    ``mine_2xMYGPU_x1+4xH100_x2``; a preset one by its names)."""
    from envs.sim import ClusterSpec

    try:
        if kwargs.get("cluster") is not None:
            return cluster_label(ClusterSpec.from_figures(kwargs["cluster"]))
        return cluster_label(
            ClusterSpec.uniform(kwargs["model"], kwargs["node"], kwargs["n_nodes"])
        )
    except (ValueError, KeyError, TypeError):  # not recorded in full: by its names
        return f"{kwargs.get('model')}_{kwargs.get('node')}_x{kwargs.get('n_nodes')}"


def print_resume_changes(
    checkpoint: Any, changes: dict[str, list[Any]], saved_sim: dict[str, Any] | None
) -> None:
    """Say what a resumed run changes (:func:`resume_changes`): the values the
    checkpoint records beside this run's, and, apart, the simulator options it does
    not record at all (added since it was trained), by name only."""
    recorded = saved_sim if isinstance(saved_sim, dict) else {}
    unrecorded = [
        k for k, (old, _) in changes.items()
        if old is None and k.startswith("sim.") and k[4:] not in recorded
    ]  # fmt: skip
    known = {k: v for k, v in changes.items() if k not in unrecorded}
    if known:
        print(
            f"note: resume={checkpoint} was trained with "
            + ", ".join(f"{k}={old!r}" for k, (old, _) in known.items())
            + "; training goes on with "
            + ", ".join(f"{k}={new!r}" for k, (_, new) in known.items())
            + " (recorded in results.json)"
        )
    if unrecorded:
        print(
            f"note: resume={checkpoint} does not record {', '.join(unrecorded)} "
            "(options added since it was trained); training goes on with this run's "
            "values (recorded in results.json)"
        )


def _same_generators(saved: dict[str, Any], asked: dict[str, Any]) -> bool:
    """Whether two env_kwargs' workload parameters configure the same generators
    (the same workload, with the same effective configuration of every family),
    how their train windows are drawn apart (:func:`resume_changes` compares that
    with the checkpoint's record: a checkpoint's parameters may leave it out)."""
    from envs.workloads.registry import configure, family_configs

    if saved.get("workload") != asked.get("workload"):
        return False
    try:
        before, after = (
            family_configs(
                configure(
                    str(kwargs["workload"]),
                    **{k: v for k, v in kwargs["workload_params"].items() if k != "train_streams"},
                )
            )
            for kwargs in (saved, asked)
        )
    except (KeyError, TypeError, ValueError, AttributeError):  # parameters no longer valid
        return False
    return before == after


def _run_streams(kwargs: dict[str, Any]) -> str | None:
    """How the train windows of the registered workload env_kwargs ``kwargs`` name
    are drawn (``registry.TRAIN_STREAMS``, as its ``workload_params`` configure:
    the registry's default when left out); None for a trace, or parameters this
    registry does not take."""
    from envs.workloads.registry import DEFAULT_WORKLOAD, configure
    from envs.workloads.trace_options import TRACE_WORKLOAD

    workload = str(kwargs.get("workload", DEFAULT_WORKLOAD))
    if workload == TRACE_WORKLOAD:
        return None
    try:
        families = configure(workload, **dict(kwargs.get("workload_params") or {})).families
    except (TypeError, ValueError):
        return None
    return families[0].train_streams if families else None


def jobs_at_once() -> int:
    """How many jobs of this Hydra sweep run at the same time on this machine: the
    launcher's ``n_jobs`` (joblib's; -1 every CPU, -2 all but one, ...), at most the
    sweep's jobs (:func:`sweep_size`); 1 for a single run or a launcher that runs its
    jobs one by one or elsewhere (basic, SLURM)."""
    from agents.callbacks import usable_cpus

    hydra = multirun()
    n_jobs = None if hydra is None else getattr(hydra.launcher, "n_jobs", None)
    if hydra is None or not isinstance(n_jobs, int) or n_jobs == 0:
        return 1
    cpus = usable_cpus()
    at_once = n_jobs if n_jobs > 0 else max(1, cpus + 1 + n_jobs)
    return max(1, min(at_once, sweep_size(Path(hydra.sweep.dir)) or at_once))


def sweep_size(folder: Path) -> int | None:
    """How many jobs the sweep in ``folder`` launches (``sweeps.sweep_plan`` of the
    ``multirun.yaml`` the sweep wrote before its jobs; None when that cannot be
    told: no file, an interval an optimiser draws from)."""
    try:
        return sweeps.sweep_plan(OmegaConf.load(folder / "multirun.yaml"))[1]
    except (OSError, AttributeError, ValueError):
        return None


def check_resume_hyperparams(cfg: Any) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """A resumed run keeps the SB3 settings saved in the checkpoint's ``model.zip``.
    An ``agent.hyperparams`` value the user set (command line, ``+experiment`` file)
    that differs would be recorded (results.json, W&B) but not used, so it is
    refused, naming the saved value. One the user never set (a group file's or
    the schema's default, e.g. after the defaults changed) takes the checkpoint's
    value in ``cfg``, so the run records what it uses, and so does ``env.n_envs``
    when the user did not set it (a rollout of n_steps x n_envs, as trained; one
    the user set is used, and returned as a change, ``{"env.n_envs": [saved,
    asked]}``); returns ``({path: saved value} adopted, changes)``. Outside a Hydra
    job (no way to tell) every difference of the SB3 settings is refused."""
    from stable_baselines3.common.save_util import load_from_zip_file

    from agents.algorithms import load_model_file, load_spec

    path = Path(cfg.resume) / "model.zip"
    if not path.is_file():
        raise FileNotFoundError(f"{cfg.resume}: agent.json but no model.zip")
    load_model_file(path, load_spec(cfg.resume))  # one SB3 can load, of agent.json's network
    saved, _, _ = load_from_zip_file(path, device="cpu", print_system_info=False)
    asked = OmegaConf.to_container(cfg.agent.hyperparams, resolve=True)
    assert isinstance(asked, dict)
    plain = (bool, int, float, str)
    differ: list[tuple[str, Any, Any]] = [  # every setting that differs: one message names all
        ("agent.hyperparams." + str(key), old, value)
        for key, value in asked.items()
        if isinstance(old := (saved or {}).get(str(key)), plain)
        and isinstance(value, plain)
        and old != value
    ]
    differ += _schedule_differs(cfg, (saved or {}).get("learning_rate"), asked)
    adopted = {name: old for name, old, _ in differ if set_by_user(name) is False}
    changes: dict[str, list[Any]] = {}
    trained_envs = (saved or {}).get("n_envs")
    if isinstance(trained_envs, int) and trained_envs != int(cfg.env.n_envs):
        # a rollout of n_steps x n_envs, as trained; a typed env.n_envs is used as asked
        if set_by_user("env.n_envs") is False:
            adopted["env.n_envs"] = trained_envs
        else:
            changes["env.n_envs"] = [trained_envs, int(cfg.env.n_envs)]
    for name, old in adopted.items():
        OmegaConf.update(cfg, name, old)
    differ = [entry for entry in differ if entry[0] not in adopted]
    if differ:
        trained = ", ".join(f"{path}={old}" for path, old, _ in differ)
        asks = ", ".join(str(value) for _, _, value in differ)
        again = " ".join(f"{path}={old}" for path, old, _ in differ)
        raise ValueError(
            f"resume={cfg.resume}: that checkpoint was trained with {trained}, the config "
            f"asks for {asks} (a resumed run keeps the checkpoint's settings; resume with "
            f"{again})"
        )
    return adopted, changes


def _schedule_differs(cfg: Any, saved: Any, asked: Mapping[Any, Any]) -> list[tuple[str, Any, Any]]:
    """``agent.lr_schedule`` and, under ``linear``, the rate it starts from, where the
    checkpoint's ``model.zip`` holds others: a linear schedule is saved as an object
    (:class:`agents.finetune._Linear`), which the plain-value comparison passed over,
    so a typed schedule or rate was recorded but not used."""
    from agents.finetune import schedule_of

    trained = schedule_of(saved)
    if trained is None:  # a schedule of other code: nothing to compare
        return []
    schedule, rate = trained
    out: list[tuple[str, Any, Any]] = []
    if cfg.agent.lr_schedule != schedule:
        out.append(("agent.lr_schedule", schedule, cfg.agent.lr_schedule))
    value = asked.get("learning_rate")
    # (a constant rate is compared with the other plain values)
    if schedule == "linear" and isinstance(value, (int, float)) and float(value) != rate:
        out.append(("agent.hyperparams.learning_rate", rate, value))
    return out


def resume_reward(cfg: Any, resumed: Any) -> dict[str, Any]:
    """The reward on resuming the checkpoint whose AgentSpec is ``resumed``: each of
    ``envs.cluster_env.REWARD_ARGS`` and ``env.normalize_reward`` the user did not
    set takes the checkpoint's value in ``cfg`` (returned as ``{path: value}``, as the adopted SB3
    settings are), so a plain resume goes on with the objective it trained on. One
    the user set that differs is used, as a change of the reward (said and recorded
    with the run's other changes: :func:`resume_changes`). A checkpoint from before
    ``normalize_reward`` was recorded (None) keeps the config's."""
    adopted: dict[str, Any] = {}
    trained: dict[str, Any] = {  # a later argument at its default is left out of env_kwargs
        f"env.{name}": resumed.env_kwargs.get(name, ENV_ARG_DEFAULTS[name])
        for name in REWARD_ARGS
        if name in resumed.env_kwargs or name in LATER_ENV_ARGS
    }
    if resumed.normalize_reward is not None:
        trained["env.normalize_reward"] = resumed.normalize_reward
    for path, value in trained.items():
        if value != OmegaConf.select(cfg, path) and set_by_user(path) is False:
            OmegaConf.update(cfg, path, value)
            adopted[path] = value
    return adopted


def rollout_steps(model: Any) -> int:
    """Steps one learn() iteration takes: n_steps x n_envs for on-policy algorithms,
    train_freq x n_envs for off-policy ones (DQN's ``n_steps`` is its n-step return,
    not a rollout; a train_freq in episodes ends at episode ends: n_envs)."""
    n_envs = int(model.n_envs)
    train_freq = getattr(model, "train_freq", None)
    if train_freq is not None:
        if getattr(train_freq.unit, "value", train_freq.unit) != "step":
            return n_envs
        return max(int(train_freq.frequency), 1) * n_envs
    return max(int(model.n_steps), 1) * n_envs


def rollout_words(model: Any) -> str:
    """What :func:`rollout_steps` multiplies, as the user sets it."""
    if getattr(model, "train_freq", None) is not None:
        return "agent.hyperparams.train_freq x env.n_envs"
    return "n_steps x env.n_envs"


def planned_end(model: Any, remaining: int) -> int:
    """The step count learn(``remaining``) ends at: whole rollouts, so the asked-for
    total rounded up to the next multiple of :func:`rollout_steps`."""
    start = int(model.num_timesteps)
    if remaining <= 0:
        return start
    return start + whole_rollouts(remaining, rollout_steps(model))


def whole_rollouts(steps: int, rollout: int) -> int:
    """The steps learn(``steps``) takes from a rollout's start: ``steps`` rounded up to
    the next multiple of ``rollout``."""
    return -(-steps // rollout) * rollout


def throughput_split(steps: int, rollout_s: float, update_s: float) -> str:
    """Where a run's time went: rollout collection and updates, each as seconds,
    share and steps per second of that part alone."""
    total = max(rollout_s + update_s, 1e-9)
    return ", ".join(
        f"{name} {seconds:.1f} s, {100.0 * seconds / total:.0f} %, "
        f"{steps / max(seconds, 1e-9):,.0f} steps/s"
        for name, seconds in (("rollout", rollout_s), ("update", update_s))
    )


def scheduled(cfg: Any, hyperparams: Any) -> dict[str, Any]:
    """``agent.hyperparams`` with ``learning_rate`` as ``agent.lr_schedule`` asks
    (its value, or the algorithm's default, down to 0 for ``linear``)."""
    import inspect

    from agents.algorithms import ALGORITHMS
    from agents.finetune import learning_rate

    out = {str(k): v for k, v in dict(hyperparams).items()}
    if cfg.agent.lr_schedule != "constant":
        default = inspect.signature(ALGORITHMS[cfg.agent.algo]).parameters["learning_rate"].default
        out["learning_rate"] = learning_rate(
            float(out.get("learning_rate", default)), cfg.agent.lr_schedule
        )
    return out


VAL_SCORES = ("mean", "geomean", "worst_family")
"""``train.val_score``'s choices (see :class:`ValidationScore`)."""


class ValidationScore:
    """model -> its validation score (lower is better) on ``windows`` with greedy
    actions, each window on the comparison run's random stream (``[seed,
    position]``): ``mean`` TTFT over the pooled requests, the ``geomean`` of the
    windows' mean TTFTs, or ``worst_family``: the largest ratio, over the windows'
    families (a window ``.../NAME-0007`` is of family ``NAME``), of the family's
    geometric mean to its value at the first call. ``records`` holds each call's
    pooled mean TTFT, geometric mean per family and each window's mean TTFT (s)."""

    def __init__(self, cfg: Any, spec: Any, windows: list[Any], kind: str = "mean") -> None:
        self.cluster, self.sim = cluster_of(cfg), sim_of(cfg)
        self.seed = eval_seed(cfg)
        self.spec, self.windows, self.kind = spec, windows, kind
        self.records: list[dict[str, Any]] = []

    def __call__(self, model: Any) -> float:
        from agents.adapter import AgentPolicy
        from experiments.evaluation import evaluate_policies

        (run,) = evaluate_policies(
            {self.spec.name: AgentPolicy(model, self.spec)},
            self.cluster,
            self.windows,
            self.sim,
            seed=self.seed,
            baseline=None,
            trace_window=None,
        )
        means = [float(np.mean(w.ttft_s)) for w in run.windows]
        families = family_geomeans([w.name for w in self.windows], means)
        pooled = float(run.row["ttft_mean_s"])
        self.records.append(
            {"ttft_mean_s": pooled, "families_ttft_mean_s": families, "window_ttft_mean_s": means}
        )
        if self.kind == "mean":
            return pooled
        if self.kind == "geomean":
            return float(np.exp(np.mean(np.log(means))))
        start = self.records[0]["families_ttft_mean_s"]
        return max(families[name] / start[name] for name in families)


def family_of(name: str) -> str:
    """The family of a window named ``workload/family-0007`` (``family``)."""
    return name.rsplit("/", 1)[-1].rsplit("-", 1)[0]


def measured_pool(
    pool: list[Any], families: list[str] | None, key: str = "improvement.families"
) -> list[Any]:
    """The windows of ``pool`` whose family is in ``families`` (all of them when
    None), in pool order; a family with no window in the pool is an error naming
    ``key`` and the families the pool has."""
    if families is None:
        return pool
    present = sorted({family_of(window.name) for window in pool})
    missing = [name for name in families if name not in present]
    if missing:
        raise ValueError(
            f"{key}: no train window of family {missing[0]!r} "
            f"(the train windows' families: {', '.join(present)})"
        )
    return [window for window in pool if family_of(window.name) in families]


def round_pool(
    pool: list[Any], families: list[str] | None, anchor_families: list[str] | None
) -> tuple[list[Any], set[str]]:
    """The train windows the rounds draw from (those of ``families`` and of
    ``anchor_families``; every window when ``families`` is None), in pool order, and
    the names of those that give anchors only (the ``anchor_families`` ones). A family
    with no window in the pool is an error naming its key."""
    anchored: set[str] = set()
    if anchor_families is not None:
        anchored = {
            w.name for w in measured_pool(pool, anchor_families, "improvement.anchor_families")
        }
    if families is None:
        return pool, anchored
    measured = {w.name for w in measured_pool(pool, families)}
    return [w for w in pool if w.name in measured or w.name in anchored], anchored


def seeds_pool(cfg: Any, seeds: list[int] | None) -> list[Any]:
    """The train windows of the registered workload's other seeds ``seeds``
    (``improvement.pool_seeds``): ``workload.train_pool`` of each, at the run's
    parameters, each named ``WORKLOAD@seedS/family-0007`` (its own seed's windows keep
    ``WORKLOAD/family-0007``), seed by seed."""
    out: list[Any] = []
    for seed in seeds or ():
        drawn = window_pool_of(cfg, "train", cfg.workload.train_pool, seed)
        for window in drawn:
            window.name = f"{cfg.workload.name}@seed{seed}/{window.name.rsplit('/', 1)[-1]}"
        out.extend(drawn)
    return out


def seeds_windows(cfg: Any) -> list[dict[str, Any]]:
    """``agent.json``'s ``registered_windows`` records of the train windows
    ``improvement.pool_seeds`` adds to the rounds (:func:`seeds_pool`); none without
    rounds or the option."""
    seeds = cfg.improvement.pool_seeds
    if int(cfg.improvement.iterations) == 0 or not seeds:
        return []
    params = workload_params(cfg)
    limit = cfg.workload.train_pool
    return [trained_windows(str(cfg.workload.name), params, int(s), limit, 0) for s in seeds]


def variant_pool(pool: list[Any], families: list[str] | None) -> set[str] | None:
    """The names of the windows of ``pool`` the warm variant is tried on (those of
    ``improvement.warm_variant_families``), or None for every window."""
    if families is None:
        return None
    key = "improvement.warm_variant_families"
    return {w.name for w in measured_pool(pool, families, key)}


def round_windows(
    pool: list[Any], count: int, number: int, seed: int, families_in_turn: bool = True
) -> list[Any]:
    """The ``count`` train windows of improvement round ``number`` (from 1), from
    one seeded order of ``pool``: the families in turn, each family's windows in a
    seeded order (so that every round measures every family), or with
    ``families_in_turn`` False the whole pool in a seeded order."""
    families: dict[str, list[int]] = {}
    for i, window in enumerate(pool):
        key = family_of(window.name) if families_in_turn else ""
        families.setdefault(key, []).append(i)
    rng = np.random.default_rng(seed)
    orders = [[int(i) for i in rng.permutation(members)] for members in families.values()]
    turns = max(len(order) for order in orders)
    sequence = [order[k % len(order)] for k in range(turns) for order in orders]
    start = (number - 1) * count
    return [pool[sequence[(start + j) % len(sequence)]] for j in range(count)]


def family_geomeans(names: list[str], values: list[float]) -> dict[str, float]:
    """The geometric mean of ``values`` per family of the windows ``names``
    (``workload/family-0007`` is of family ``family``), families in first-seen order."""
    logs: dict[str, list[float]] = {}
    for name, value in zip(names, values):
        logs.setdefault(family_of(name), []).append(float(np.log(value)))
    return {family: float(np.exp(np.mean(v))) for family, v in logs.items()}


def train(cfg: DictConfig) -> float:
    import gymnasium
    import torch
    from stable_baselines3.common.env_util import make_vec_env

    import envs  # noqa: F401  (registers the environments)
    from agents.adapter import AgentPolicy
    from agents.algorithms import AgentSpec, build_model, load_agent, load_spec, save_agent
    from agents.callbacks import (
        CheckpointEvery,
        Curriculum,
        KeepBestByValidation,
        MetricsLogger,
        ProgressBar,
        RestoreRandomState,
        RolloutClock,
        UpdateStats,
        UpdateThreads,
        score_text,
        usable_cpus,
        usable_threads,
    )
    from agents.env_pickles import RunWindows
    from agents.vec_env import InProcessVecEnv, WorkerVecEnv

    check_train(cfg)
    adopted: dict[str, Any] = {}
    name = experiment_name()  # an experiment's agent is named after it (else algo_env)
    resumed_spec: AgentSpec | None = None
    rollout_changes: dict[str, list[Any]] = {}  # a typed env.n_envs other than trained
    if cfg.resume:
        try:
            resumed_spec = load_spec(cfg.resume)
        except FileNotFoundError as error:  # no folder, or not a checkpoint's: say which
            said = str(error).removeprefix(f"{cfg.resume}: ")
            raise ValueError(f"resume={cfg.resume!r}: {said}") from None
        adopted = check_resume(cfg, resumed_spec)
        name = resumed_spec.name  # a resumed agent keeps its name (and so does its W&B run)
        sb3_adopted, rollout_changes = check_resume_hyperparams(cfg)
        adopted |= sb3_adopted | resume_reward(cfg, resumed_spec)
        # the rollout the resumed run collects: the checkpoint's n_steps, the run's envs
        from agents.algorithms import check_rollout, note_minibatches

        resumed_hp = agent_hyperparams(cfg)
        rollout = check_rollout(cfg.agent.algo, resumed_hp, int(cfg.env.n_envs))
        if int(cfg.train.total_timesteps) > 0:
            note_minibatches(cfg.agent.algo, resumed_hp, rollout)
        if adopted:
            taken = ", ".join(f"{path}={value}" for path, value in adopted.items())
            print(f"note: resume={cfg.resume}: the checkpoint's {taken} (defaults you did not set)")
    torch.set_num_threads(int(cfg.train.torch_threads))
    update_threads = usable_threads(int(cfg.train.update_threads))
    beside = jobs_at_once()
    if beside > 1 and update_threads > 1:  # e.g. joblib: each job would take them all
        shared = max(1, usable_cpus() // beside)
        if shared < update_threads:
            print(
                f"note: {beside} jobs of this sweep run at once: train.update_threads="
                f"{shared} (asked {int(cfg.train.update_threads)}; the CPUs are shared)"
            )
            update_threads = shared
    saved_kwargs = env_kwargs(cfg)
    spec = AgentSpec(
        algo=cfg.agent.algo,
        env=cfg.env.kind,
        net=cfg.agent.net,
        hidden=int(cfg.agent.hidden),
        critic=str(cfg.agent.critic),
        env_kwargs=saved_kwargs,
        seed=int(cfg.seed),
        name=name,
    )
    pool = window_pool_of(cfg, "train", cfg.workload.train_pool)
    # a curriculum without bursts is refused before the run folder
    stages = curriculum_stages(cfg, pool) if int(cfg.train.total_timesteps) > 0 else []
    if stages and stages[-1][0] >= int(cfg.train.total_timesteps):
        print(
            f"note: train.curriculum's last stage runs until step {stages[-1][0]:,}, "
            f"train.total_timesteps={cfg.train.total_timesteps}: the run never trains on "
            "whole windows"
        )
    validate = int(cfg.train.val_every) > 0 and int(cfg.train.total_timesteps) > 0
    val_pool = window_pool_of(cfg, "val", cfg.workload.val_windows) if validate else []
    warn_unscored_validation(cfg)
    warn_unreached_y(cfg, pool)
    # the trace it trains on, for evaluate and compare to tell its own windows from
    # held-out ones; improvement rounds score on the validation windows (run_improvement)
    # whether or not PPO validates
    n_val = scored_val_windows(cfg, val_pool)
    spec.trace_file = trained_trace(
        cfg.workload.name, saved_kwargs["workload_params"], len(pool), n_val
    )
    # and a registered workload's windows (other window counts shuffle others to test),
    # then those of the workloads behavioural cloning collects on
    own = trained_windows(
        cfg.workload.name, saved_kwargs["workload_params"], int(cfg.workload.seed), len(pool), n_val
    )
    records = [*([] if own is None else [own]), *imitation_windows(cfg), *seeds_windows(cfg)]
    spec.registered_windows = records or None
    # and the windows of the agent whose weights it starts from, and of those it did
    spec.started_from = []
    earlier = cfg.resume or cfg.train.init_from
    if earlier:
        earlier_spec = resumed_spec if resumed_spec is not None else load_spec(earlier)
        own = own_entry(spec)
        spec.started_from = [
            entry
            for entry in started_from(str(earlier), earlier_spec)
            if not same_windows(entry, own)
        ]
    # the env's values (env.reward_scale, ...) are checked before the run folder; a
    # subproc worker's error would reach us only as a broken pipe, so one env is made here
    with naming_fields(env_paths(cfg)):
        if cfg.env.vec == "subproc":
            gymnasium.make(spec.env_id, **make_env_fn_kwargs(saved_kwargs, pool)).close()
        vec = make_vec_env(
            spec.env_id,
            n_envs=int(cfg.env.n_envs),
            seed=int(cfg.seed),
            vec_env_cls=WorkerVecEnv if cfg.env.vec == "subproc" else InProcessVecEnv,
            env_kwargs=make_env_fn_kwargs(saved_kwargs, pool),
            vec_env_kwargs=worker_options(cfg),
        )
    if cfg.env.normalize_reward:
        from stable_baselines3.common.vec_env import VecNormalize

        gamma = float(cfg.agent.hyperparams.get("gamma", 0.99))
        vec = VecNormalize(vec, norm_obs=False, norm_reward=True, gamma=gamma)
        if resumed_spec is not None and resumed_spec.reward_norm:  # as the checkpoint scaled
            stats = resumed_spec.reward_norm
            vec.ret_rms.mean = np.array(stats["mean"], dtype=np.float64)
            vec.ret_rms.var = np.array(stats["var"], dtype=np.float64)
            vec.ret_rms.count = float(stats["count"])
    test_windows = None
    hyperparams = agent_hyperparams(cfg)
    try:
        if cfg.train.evaluate:  # an empty test window is refused before the run folder
            test_windows = eval_windows(cfg, cfg.workload.eval_windows)
        # SB3 refuses its own hyperparameters when it builds the model: before the run folder
        built = (
            None
            if cfg.resume
            else build_model(
                spec,
                vec,
                scheduled(cfg, hyperparams),
                trains=int(cfg.train.total_timesteps) > 0,
            )
        )
        from experiments.compare import OUTPUTS

        out_dir = run_dir(cfg, "train", (*OUTPUTS, *TRAIN_OUTPUTS))
        logger = job_logger(cfg, out_dir, f"train-{spec.name}")
    except BaseException:
        vec.close()
        raise
    model: Any = None
    try:
        run_state: dict[str, Any] | None = None  # a checkpoint's, to resume exactly
        # what the envs draw episodes from, which a checkpoint's run state names
        run_windows = RunWindows(
            [*pool, *(w for _, segments in stages for w in segments)],
            [(until, len(segments)) for until, segments in stages],
        )
        train_record: dict[str, Any] = {
            "resumed_from": None,
            "resume_changes": {},
            "update_threads": update_threads,
        }
        if cfg.resume:
            model, resumed = load_agent(cfg.resume, env=vec)
            changes = (
                resume_changes(resumed.env_kwargs, saved_kwargs, trained_streams(resumed))
                | rollout_changes
            )
            normalized = bool(cfg.env.normalize_reward)  # a reward option outside env_kwargs
            if resumed.normalize_reward not in (None, normalized):
                changes["env.normalize_reward"] = [resumed.normalize_reward, normalized]
                if normalized:  # nothing recorded to go on from
                    print(f"note: resume={cfg.resume}: the reward statistics start afresh")
            train_record = {
                "resumed_from": str(cfg.resume),
                "resume_changes": changes,
                "resume_adopted": adopted,
            }
            print_resume_changes(cfg.resume, changes, resumed.env_kwargs.get("sim"))
            run_state = exact_resume(cfg, model, changes, run_windows, resumed.seed)
            train_record["resume_exact"] = run_state is not None
            if resumed.normalize_reward is None:  # a checkpoint from before it was recorded
                print(
                    f"note: resume={cfg.resume} does not record env.normalize_reward; training "
                    f"goes on with env.normalize_reward={bool(cfg.env.normalize_reward)}"
                    + (" (its running statistics start afresh)" if cfg.env.normalize_reward else "")
                    + (
                        ""
                        if experiment_name()
                        else " (a +experiment recipe sets it: pass it again to keep it)"
                    )
                )
        else:
            assert built is not None
            model = built
            if cfg.agent.warm_prior:
                from agents.finetune import set_warm_prior

                set_warm_prior(model.policy, float(cfg.agent.warm_prior))
                train_record["warm_prior"] = float(cfg.agent.warm_prior)
            if cfg.train.init_from:
                from agents.finetune import init_from

                fresh = init_from(model, spec, cfg.train.init_from)
                train_record["init_from"] = str(cfg.train.init_from)
                note_init_from_units(cfg, spec)
                print(
                    f"starting from the weights of {cfg.train.init_from}"
                    + (f" (initialised afresh: {', '.join(fresh)})" if fresh else "")
                )
                if cfg.agent.init_logit_scale != 1:
                    from agents.finetune import scale_logits

                    scale_logits(model.policy, float(cfg.agent.init_logit_scale))
                    train_record["init_logit_scale"] = float(cfg.agent.init_logit_scale)
            if cfg.imitation.episodes > 0:
                bc = imitate(model, spec, cfg, saved_kwargs, pool)
                logger.summary(bc)
                print("behavioural cloning: " + ", ".join(f"{k}={v:.4g}" for k, v in bc.items()))
            if int(cfg.improvement.iterations) > 0:
                started = time.perf_counter()
                model, train_record["improvement"] = run_improvement(
                    model, spec, cfg, pool, out_dir, vec, logger
                )
                train_record["improvement"]["wall_s"] = time.perf_counter() - started
        warmup = min(int(cfg.train.critic_warmup_steps), int(cfg.train.total_timesteps))
        if warmup > 0 and not cfg.resume:
            from agents.finetune import warm_up_critic

            warm_start = int(model.num_timesteps)
            warm_up_critic(model, warmup, MetricsLogger(logger))
            train_record["critic_warmup_steps"] = int(model.num_timesteps)
            rounded = (
                f" (train.critic_warmup_steps={warmup} rounded up to whole rollouts of "
                f"{rollout_words(model)} = {rollout_steps(model)})"
                if int(model.num_timesteps) - warm_start != warmup
                else ""
            )
            print(f"critic warm-up (policy frozen): {model.num_timesteps} steps{rounded}")
        clone_kl = None
        if cfg.agent.clone_kl_coef > 0:  # after the warm-up: the actor as init_from left it
            from agents.algorithms import CloneKL

            clone_kl = CloneKL(
                model, float(cfg.agent.clone_kl_coef), str(cfg.agent.clone_kl_schedule)
            )
        remaining = int(cfg.train.total_timesteps) - int(model.num_timesteps)
        if remaining > 0:
            print(
                f"training {spec.name} on {spec.env_id} ({setup_label(cfg)}, "
                f"{workload_label(cfg)}, {plural(len(pool), 'train window')}"
                + cap_note("workload.train_pool", cfg.workload.train_pool)
                + ", "
                + (
                    f"{len(val_pool)} validation"
                    + cap_note("workload.val_windows", cfg.workload.val_windows)
                    if val_pool
                    else "no validation"
                    + (" (train.val_every=0)" if int(cfg.train.val_every) <= 0 else "")
                )
                + f"): {model.num_timesteps} -> {cfg.train.total_timesteps} "
                f"steps; run folder {out_dir}"
            )
        buffer_left_out = None
        if int(cfg.train.checkpoint_every) > 0 and remaining > 0:
            buffer_left_out = replay_buffer_left_out(cfg, model)
        clock = RolloutClock(logger)
        metrics = MetricsLogger(logger)
        updates = UpdateStats(logger)
        bar = ProgressBar(planned_end(model, remaining), enabled=bool(cfg.train.progress))
        callbacks = [
            clock,
            bar,
            metrics,
            updates,
            UpdateThreads(update_threads, int(cfg.train.torch_threads)),
        ]
        keep_best = None
        val_score = ValidationScore(cfg, spec, val_pool, str(cfg.train.val_score))
        # an exact resume at its run's end (a run stopped after its last checkpoint,
        # e.g. in the evaluation) trains no step but still chooses agent/ among its
        # run's scores, as the run did
        basis = validation_basis(cfg, val_pool)
        saved_scores = None if run_state is None else run_state.get("validation")
        carried = None
        if validate and (
            remaining > 0 or (saved_scores is not None and saved_scores["basis"] == basis)
        ):
            carried = carried_validation(cfg, run_state, basis)
        if validate and (remaining > 0 or carried is not None):
            keep_best = KeepBestByValidation(
                int(cfg.train.val_every),
                spec,
                out_dir / "agent",
                val_score,
                logger,
                echo=True,
                restored=carried,
                basis=basis,
            )
        if cfg.train.checkpoint_every > 0:
            callbacks.append(
                CheckpointEvery(
                    int(cfg.train.checkpoint_every),
                    spec,
                    out_dir / "checkpoints",
                    run_windows,
                    validation=keep_best,
                    buffer_left_out=buffer_left_out,
                )
            )
        curriculum = None
        if stages and remaining > 0:
            curriculum = Curriculum(stages, pool, restored=run_state is not None)
            callbacks.append(curriculum)
        if keep_best is not None:
            callbacks.append(keep_best)
        if run_state is not None:  # last: after whatever runs as training starts
            callbacks.append(RestoreRandomState(run_state))
        start, start_cpu = time.perf_counter(), time.process_time()
        first_step = int(model.num_timesteps)
        if remaining > 0:
            try:
                model.learn(remaining, callback=callbacks, reset_num_timesteps=False)
            finally:  # (an error or Ctrl-C: its line is said below the bar's, not on it)
                bar.close()
        elif keep_best is not None:  # the scores carried over, and the end's if not taken
            keep_best.init_callback(model)
            keep_best.on_training_start({}, {})
            keep_best.on_training_end()
        elapsed = time.perf_counter() - start
        train_record.update(wall_s=elapsed, cpu_s=time.process_time() - start_cpu)
        if keep_best is None:
            save_agent(model, spec, out_dir / "agent")
        else:
            save_agent(model, spec, out_dir / "last")
            last_step = int(model.num_timesteps)
            model, _ = load_agent(out_dir / "agent", env=vec)
            train_record["validation"] = {
                "windows": [w.name for w in val_pool],
                "every": int(cfg.train.val_every),
                "score": str(cfg.train.val_score),
                "history": [
                    {"step": k, "score": v, **record}
                    for (k, v), record in zip(keep_best.history, val_score.records)
                ],
                "best_step": keep_best.best_step,
                "best_score": keep_best.best_score,
                "best_ttft_mean_s": next(
                    record["ttft_mean_s"]
                    for (k, _), record in zip(keep_best.history, val_score.records)
                    if k == keep_best.best_step
                )
                if keep_best.best_step >= 0
                else float("nan"),
                "last_step": last_step,
            }
            print(
                f"validation: best {cfg.train.val_score} score "
                f"{score_text(keep_best.best_score)} at step "
                f"{keep_best.best_step} of {last_step} (agent/; the last model is in last/)"
            )
        end_step = int(model.num_timesteps) if keep_best is None else last_step
        done = end_step - first_step
        steps_per_s = done / max(elapsed, 1e-9)
        asked = int(cfg.train.total_timesteps)
        train_record.update(
            timesteps_asked=asked,
            timesteps=end_step,
            steps_per_s=steps_per_s,
            rollout_s=clock.rollout_s,
            update_s=clock.update_s,
            n_envs=int(cfg.env.n_envs),
        )
        if clone_kl is not None:
            train_record["clone_kl"] = {
                "coef": clone_kl.coef,
                "schedule": clone_kl.schedule,
                "per_rollout": clone_kl.per_rollout(),
            }
        train_record["curve"] = [  # episode returns over the run (mean of the last 100)
            {
                k.removeprefix("train/"): int(v) if k == "train/timesteps" else v
                for k, v in m.items()
                if k != "train/steps_per_s"
            }
            for m in metrics.history
            if "train/episode_return_mean" in m
        ]
        train_record["updates"] = updates.history  # each gradient update's KL, entropy, losses
        if curriculum is not None:
            train_record["curriculum"] = {
                "stages": [
                    {"bursts": int(stage.bursts), "until": int(stage.until), "segments": len(seg)}
                    for stage, (_, seg) in zip(cfg.train.curriculum, curriculum.stages, strict=True)
                ],
                "lead_s": float(cfg.train.curriculum_lead_s),
                "min_requests": int(cfg.train.curriculum_min_requests),
                "changes": [{"step": k, "stage": v} for k, v in curriculum.changes],
            }
        logger.summary(
            {
                "train/steps_per_s": steps_per_s,
                "train/timesteps": end_step,
                "train/timesteps_asked": asked,
                "train/rollout_s": clock.rollout_s,
                "train/update_s": clock.update_s,
                # the whole run's, as printed (the history holds each interval's)
                "train/rollout_steps_per_s": done / max(clock.rollout_s, 1e-9),
                "train/update_steps_per_s": done / max(clock.update_s, 1e-9),
            }
        )
        if done > 0:
            print(
                f"trained to {end_step} steps at {steps_per_s:,.0f} steps/s "
                f"({throughput_split(done, clock.rollout_s, clock.update_s)})"
            )
        else:
            print(f"no RL steps; the agent is in {out_dir / 'agent'}")
        if end_step > asked:
            print(
                f"note: {end_step - asked} steps past train.total_timesteps={asked}: "
                f"{spec.algo} collects whole rollouts of {rollout_steps(model)} steps "
                f"({rollout_words(model)}); the saved agent"
                + (" and results.json record" if cfg.train.evaluate else " records")
                + " the steps taken"
            )
        chosen = train_record.get("validation") or train_record.get("improvement")
        if chosen is not None:  # what a sweep's best job is chosen by
            names = chosen.get("windows") or chosen.get("validation_windows") or []
            # worst_family: a ratio to the run's own start, which no other run shares
            own = {"run": str(out_dir)} if chosen["score"] == "worst_family" else {}
            # the simulator's stream too: a training seed draws it unless train.eval_seed is set
            basis = measured_on(cfg, names, score=chosen["score"], seed=eval_seed(cfg), **own)
            sweeps.note(f"validation {chosen['score']} score", chosen["best_score"], True, basis)
            logger.summary({"val/best_score": chosen["best_score"]})  # the kept agent's
        # what a sweeper minimises: the validation score the run kept (a test figure
        # would tune on the test windows; until 2026-12-05 it was the test mean TTFT)
        objective = float(chosen["best_score"]) if chosen is not None else float("inf")
        if cfg.train.evaluate:
            agent = AgentPolicy(model, spec)
            chosen_seed = cfg.train.get("eval_seed")
            print(  # as evaluate's first line; the simulator's stream is train.eval_seed's
                evaluation_header(
                    cfg,
                    len(test_windows or ()),
                    seed="" if chosen_seed is None else f"train.eval_seed={chosen_seed}",
                )
            )
            rows = evaluate_and_write(
                {spec.name: agent},
                list(cfg.train.eval_policies),
                cfg,
                out_dir,
                logger,
                bool(cfg.train.progress),
                extra={"train": train_record},
                windows=test_windows,
                sim_seed=eval_seed(cfg),
            )
            metric = next(r["ttft_mean_s"] for r in rows if r["policy"] == spec.name)
            sweeps.note("test mean TTFT (s)", metric)
            logger.summary({"eval/ttft_mean_s": metric})
        else:  # no results.json: the training record alone (a trace's stamp too, as results.json's)
            from envs.files import write_json_atomic
            from experiments.config import workload_record
            from experiments.provenance import provenance

            record = {"train": train_record, **workload_record(cfg), "provenance": provenance()}
            write_json_atomic(out_dir / "train.json", record)
        logger.finish()  # (ends the W&B run before the last line)
        print(wrote_line(out_dir, bool(cfg.train.evaluate)))
        return objective
    except (WorkerDied, WorkerFailed) as died:  # one line: which worker, how, what the run kept
        told = type(died)(f"{died}; {worker_died_kept(model, cfg, out_dir)}")
        logger.finish(told)
        raise told from died.__cause__
    except BaseException as error:  # W&B records the run as failed (or interrupted)
        logger.finish(error)
        raise
    finally:
        vec.close()
        logger.finish()


def wrote_line(out_dir: Path, evaluated: bool) -> str:
    """A finished run's last line, in ``evaluate``'s words: the file that marks it
    finished (``results.json``, or ``train.json`` with ``train.evaluate=false``) and
    what else it wrote there (the agent folders it made, the evaluation's charts and
    a thresholds agent's settings)."""
    from experiments.report import THRESHOLDS_LOG

    beside = [f"{name}/" for name in ("agent", "last", "checkpoints") if (out_dir / name).is_dir()]
    if evaluated:
        beside.append("charts")
        if (out_dir / THRESHOLDS_LOG).is_file():
            beside.append(THRESHOLDS_LOG)
    main = out_dir / ("results.json" if evaluated else "train.json")
    return f"wrote {main}" + (f" and what goes with it ({', '.join(beside)})" if beside else "")


def worker_died_kept(model: Any, cfg: Any, out_dir: Path) -> str:
    """What a run whose env worker died (:class:`agents.WorkerDied`, or
    :class:`agents.WorkerFailed`) says after the
    worker: the step it stopped at, and what it kept to go on from (its last
    checkpoint, which ``resume=`` goes on from exactly; its best agent so far)."""
    stopped = "training stopped"
    if model is not None:
        stopped += f" at step {int(model.num_timesteps):,} of {int(cfg.train.total_timesteps):,}"
    saved = []
    for found in (out_dir / "checkpoints").glob("step_*/agent.json"):
        number = found.parent.name.removeprefix("step_")
        if number.isdigit():
            saved.append((int(number), found.parent))
    if saved:
        folder = max(saved)[1]
        kept = f"its last checkpoint is {folder} (resume={folder} goes on from it)"
    else:
        kept = "it saved no checkpoint" + (
            " (train.checkpoint_every=0)" if int(cfg.train.checkpoint_every) <= 0 else ""
        )
    if (out_dir / "agent" / "agent.json").is_file():
        kept += f"; {out_dir / 'agent'} holds its best agent by validation so far"
    return f"{stopped}; {kept}"


def check_sweep(args: list[str]) -> None:
    """Before a ``-m`` sweep over lists of values or ranges (``seed=range(0,3)``) starts,
    every job's config is composed and checked as the job would check it
    (:func:`check_train`), however many jobs there are: a value no run can use is one
    line naming the job and where the value came from (``(from the command line)``),
    before job 0 trains (it used to fail only when its own job started, after the jobs
    before it had trained; ranges and sweeps of more than 64 jobs were left to the
    jobs). To keep it quick, the config is composed once for each choice of the
    swept config groups (``agent=ppo,a2c``) and each job's values are applied to it
    as Hydra applies them (its options are checked, no workload is built). A trace
    workload's options are checked, not its file, which each job reads (a read here
    would keep the trace's warnings from the jobs' logs: the plan is cached). Left
    to the jobs: a sweeper's own search (``hydra.*`` overrides), a ``glob()`` or an
    interval, the trace file, and a command that does not compose (Hydra says why)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    from experiments.config import CONF_DIR

    parsed = sweep_overrides(args)
    if parsed is None:
        return
    if any(o.key_or_group.startswith("hydra.") for o in parsed):
        return
    by_key = {o.get_key_element(): o for o in parsed}  # a key given twice: the last, as Hydra
    parsed = list(by_key.values())
    swept = [o for o in parsed if o.is_sweep_override()]
    if not swept or not all(o.is_choice_sweep() or o.is_range_sweep() for o in swept):
        return
    # get_key_element keeps a + or ++ (a key the config lacks): without it no job composed
    choices = [[f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()] for o in swept]
    parser = OverridesParser.create()
    with warnings.catch_warnings():  # each job says its own warnings
        warnings.simplefilter("ignore")
        try:
            with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
                loader = GlobalHydra.instance().config_loader()
                groups = {o.get_key_element() for o in parsed if _is_group(loader, o)}
                bases: dict[tuple[str, ...], Any] = {}
                for number, job in enumerate(itertools.product(*choices)):
                    # the job's line, in the order Hydra's sweeper gives it to the job
                    line = [job[swept.index(o)] if o in swept else o.input_line
                            for o in parsed]  # fmt: skip
                    chosen = tuple(a for o, a in zip(parsed, line) if o.get_key_element() in groups)
                    if chosen not in bases:  # composed once per choice of the config groups
                        bases[chosen] = compose(config_name="train", overrides=list(chosen))
                    cfg = copy.deepcopy(bases[chosen])  # (the checks may set values in it)
                    # values applied in the line's order, as Hydra applies them after the
                    # groups: a later value wins (agent.hyperparams.n_steps=1,2 then
                    # agent.hyperparams={n_steps:64} gives every job 64)
                    values = [a for o, a in zip(parsed, line) if o.get_key_element() not in groups]
                    _apply_overrides(cfg, parser.parse_overrides(values))
                    try:
                        check_train(cfg, read_trace=False)
                    except ValueError:
                        said = _said_in_job(line)
                        if said is None:  # the job, composed as Hydra composes it, passes
                            continue
                        raise ValueError(
                            f"job {number} of the sweep ({', '.join(job)}): {said}"
                        ) from None
        except HydraException:  # the config does not compose: Hydra says why
            return


def _is_group(loader: Any, override: Any) -> bool:
    """Whether ``override`` chooses a config group's option (``agent=ppo``), which
    changes the config's defaults list, rather than setting a value."""
    if isinstance(override.value(), dict):  # agent={...}: a value, as Hydra takes it
        return False
    return bool(loader.get_group_options(override.key_or_group))


def _said_in_job(line: list[str]) -> BaseException | None:
    """The refusal of a sweep's job (its overrides ``line``) as the job says it: its
    config composed whole, as Hydra gives it to the job, and checked where
    :func:`experiments.config.value_origin` sees the job's command line, so the
    message says where the value came from (``(from the command line)``, a group's
    file); None if that check passes (the job runs: a refusal of the pre-check's
    config is not the job's)."""
    from hydra import compose
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from experiments.config import with_value_origin

    previous = HydraConfig.instance().cfg
    cfg = compose(config_name="train", overrides=line, return_hydra_config=True)
    try:
        HydraConfig.instance().set_config(cfg)
        with open_dict(cfg):
            del cfg["hydra"]
        check_train(cfg, read_trace=False)
    except ValueError as again:
        return with_value_origin(again, cfg)
    finally:
        HydraConfig.instance().cfg = previous
    return None


def _apply_overrides(cfg: Any, overrides: list[Any]) -> None:
    """``overrides`` (of values, no config group) applied to a composed ``cfg`` as Hydra's
    compose applies them after building the config from its defaults list."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    ConfigLoaderImpl._apply_overrides_to_config(overrides, cfg)


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> float:
    value = run_job(train, cfg)
    return value if np.isfinite(value) else float("inf")


if __name__ == "__main__":
    raise SystemExit(hydra_entry("experiments.train", main, precheck=check_sweep))
