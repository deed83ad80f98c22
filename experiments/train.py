"""Train a learned agent, then evaluate it against the baselines on held-out windows.

    python -m experiments.train agent=ppo env=route setup=70b_h100x4 \\
        workload=bursted_synthetic train.total_timesteps=50000 [seed=0] [out_dir=PATH]
    python -m experiments.train resume=runs/train/<time>/checkpoints/step_10000 ...
    python -m experiments.train -m seed=0,1,2 agent=ppo,a2c hydra/launcher=joblib
    python -m experiments.train +experiment=NAME

The run folder (``out_dir``, or Hydra's) gets ``checkpoints/step_N/`` every
``train.checkpoint_every`` steps, the final agent in ``agent/``, and after the
evaluation ``results.json`` (the comparison run's schema) and charts. Returns
the agent's mean TTFT on the evaluation windows (what a sweeper minimises).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import hydra
import numpy as np
from omegaconf import DictConfig, OmegaConf

from experiments.config import cluster_of, register_configs, setup_label, workload_label
from experiments.jobs import (
    check_policy_names,
    check_world,
    evaluate_and_write,
    hydra_entry,
    job_logger,
    run_dir,
    run_job,
    workload_params,
)

register_configs()


def env_kwargs(cfg: Any) -> dict[str, Any]:
    """The gymnasium.make arguments the config describes (JSON-ready; see make_env)."""
    kwargs: dict[str, Any] = {
        "model": cfg.model.name,
        "node": cfg.cluster.node,
        "n_nodes": int(cfg.cluster.n_nodes),
        "workload": cfg.workload.name,
        "workload_params": workload_params(cfg),
        "data_seed": int(cfg.workload.seed),
        "sim": OmegaConf.to_container(cfg.sim, resolve=True),
        "reward_scale": float(cfg.env.reward_scale),
        "slo_s": cfg.env.slo_s,
        "tail_penalty": float(cfg.env.tail_penalty),
        "copy_cost_per_gb": float(cfg.env.copy_cost_per_gb),
    }
    if cfg.env.kind == "thresholds":
        kwargs["epoch_s"] = float(cfg.env.epoch_s)
    return kwargs


def make_env_fn_kwargs(saved: dict[str, Any], windows: list[Any]) -> dict[str, Any]:
    """gymnasium.make keyword arguments from :func:`env_kwargs` and a window pool."""
    from envs.sim import ClusterSpec

    kwargs = {
        k: v for k, v in saved.items() if k not in ("model", "node", "n_nodes", "workload_params")
    }
    kwargs["setup"] = ClusterSpec.uniform(saved["model"], saved["node"], saved["n_nodes"])
    kwargs["windows"] = windows
    return kwargs


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
            kwargs = make_env_fn_kwargs(
                saved_kwargs,
                window_pool(workload, "train", int(cfg.workload.seed), cfg.workload.train_pool),
            )
            if setup is not None:
                kwargs["setup"] = setup
            sources.append(kwargs)
    return sources


def imitate(
    model: Any, spec: Any, cfg: Any, saved_kwargs: dict[str, Any], pool: list[Any]
) -> dict[str, float]:
    """Behavioural cloning from the causal teacher (the ``imitation`` config group)."""
    from agents.imitation import ImitationSettings, run_imitation

    settings = ImitationSettings(**OmegaConf.to_container(cfg.imitation, resolve=True))  # type: ignore[arg-type]
    sources = imitation_sources(cfg, saved_kwargs, pool)
    return run_imitation(model, spec.env_id, sources, settings, int(cfg.seed))


def check_train(cfg: Any) -> None:
    """Reject values the schema's types allow but training cannot use (before any run)."""
    check_world(cfg)
    check_policy_names(cfg.train.eval_policies, "train.eval_policies")
    from agents.algorithms import ENV_IDS

    if cfg.env.kind not in ENV_IDS:  # AgentSpec would name it agent.env
        raise ValueError(f"env.kind must be one of {', '.join(ENV_IDS)}, got {cfg.env.kind!r}")
    if cfg.env.vec not in ("dummy", "subproc"):
        raise ValueError(f"env.vec must be dummy or subproc, got {cfg.env.vec!r}")
    if cfg.env.n_envs < 1:
        raise ValueError(f"env.n_envs must be >= 1, got {cfg.env.n_envs}")
    if cfg.agent.hidden < 1:
        raise ValueError(f"agent.hidden must be >= 1 (units per layer), got {cfg.agent.hidden}")
    for field, low in (("total_timesteps", 0), ("checkpoint_every", 0), ("torch_threads", 1)):
        value = cfg.train[field]
        if value < low:
            raise ValueError(f"train.{field} must be >= {low}, got {value}")


def check_resume(cfg: Any, resumed: Any) -> None:
    """A checkpoint to resume (its AgentSpec ``resumed``) must be the network the config
    describes, on as many nodes; and the step count continues, so the target cannot be
    below the checkpoint's."""
    asked = {
        "agent.algo": cfg.agent.algo,
        "env.kind": cfg.env.kind,
        "agent.net": cfg.agent.net,
        "agent.hidden": int(cfg.agent.hidden),
        "cluster.n_nodes": int(cfg.cluster.n_nodes),
    }
    saved = {
        "agent.algo": resumed.algo,
        "env.kind": resumed.env,
        "agent.net": resumed.net,
        "agent.hidden": int(resumed.hidden),
        "cluster.n_nodes": resumed.env_kwargs.get("n_nodes"),
    }
    for field, value in asked.items():
        if saved[field] is not None and saved[field] != value:
            raise ValueError(
                f"resume={cfg.resume}: that checkpoint is {resumed.algo}/{resumed.env}/"
                f"{resumed.net} with {field}={saved[field]}, the config asks for "
                f"{field}={value} (resume with {field}={saved[field]})"
            )
    target = int(cfg.train.total_timesteps)
    if target < resumed.timesteps:
        raise ValueError(
            f"train.total_timesteps={target} is below the {resumed.timesteps} steps the "
            f"checkpoint resume={cfg.resume} has already trained (the step count continues; "
            f"ask for >= {resumed.timesteps})"
        )


def check_resume_hyperparams(cfg: Any) -> None:
    """A resumed run keeps the SB3 settings saved in the checkpoint's ``model.zip``;
    ``agent.hyperparams`` asking for other values would be recorded (results.json,
    W&B) but not used, so they are refused, naming the saved value."""
    from stable_baselines3.common.save_util import load_from_zip_file

    path = Path(cfg.resume) / "model.zip"
    if not path.is_file():
        raise FileNotFoundError(f"{cfg.resume}: agent.json but no model.zip")
    saved, _, _ = load_from_zip_file(path, device="cpu", print_system_info=False)
    asked = OmegaConf.to_container(cfg.agent.hyperparams, resolve=True)
    assert isinstance(asked, dict)
    plain = (bool, int, float, str)
    for key, value in asked.items():
        name = str(key)
        old = (saved or {}).get(name)
        if isinstance(old, plain) and isinstance(value, plain) and old != value:
            raise ValueError(
                f"resume={cfg.resume}: that checkpoint was trained with "
                f"agent.hyperparams.{name}={old}, the config asks for {value} (a resumed run "
                f"keeps the checkpoint's settings; resume with agent.hyperparams.{name}={old})"
            )


def train(cfg: DictConfig) -> float:
    import torch
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    import envs  # noqa: F401  (registers the environments)
    from agents.adapter import AgentPolicy
    from agents.algorithms import AgentSpec, build_model, load_agent, load_spec, save_agent
    from agents.callbacks import CheckpointEvery, MetricsLogger, ProgressBar
    from envs.windows import window_pool

    check_train(cfg)
    if cfg.resume:
        check_resume(cfg, load_spec(cfg.resume))
        check_resume_hyperparams(cfg)
    out_dir = run_dir(cfg, "train")
    torch.set_num_threads(int(cfg.train.torch_threads))
    saved_kwargs = env_kwargs(cfg)
    spec = AgentSpec(
        algo=cfg.agent.algo,
        env=cfg.env.kind,
        net=cfg.agent.net,
        hidden=int(cfg.agent.hidden),
        env_kwargs=saved_kwargs,
        seed=int(cfg.seed),
    )
    pool = window_pool(
        cfg.workload.name,
        "train",
        int(cfg.workload.seed),
        cfg.workload.train_pool,
        saved_kwargs["workload_params"],
    )
    cluster_of(cfg)  # fail early on an impossible cluster
    vec = make_vec_env(
        spec.env_id,
        n_envs=int(cfg.env.n_envs),
        seed=int(cfg.seed),
        vec_env_cls=SubprocVecEnv if cfg.env.vec == "subproc" else DummyVecEnv,
        env_kwargs=make_env_fn_kwargs(saved_kwargs, pool),
    )
    logger = job_logger(cfg, out_dir, f"train-{spec.name}")
    try:
        hyperparams = OmegaConf.to_container(cfg.agent.hyperparams, resolve=True)
        if cfg.resume:
            model, resumed = load_agent(cfg.resume, env=vec)
            spec.name = resumed.name
        else:
            model = build_model(spec, vec, hyperparams)  # type: ignore[arg-type]
            if cfg.imitation.episodes > 0:
                bc = imitate(model, spec, cfg, saved_kwargs, pool)
                logger.summary(bc)
                print("behavioural cloning: " + ", ".join(f"{k}={v:.4g}" for k, v in bc.items()))
        remaining = int(cfg.train.total_timesteps) - int(model.num_timesteps)
        print(
            f"training {spec.name} on {spec.env_id} ({setup_label(cfg)}, {workload_label(cfg)}): "
            f"{model.num_timesteps} -> {cfg.train.total_timesteps} steps; run folder {out_dir}"
        )
        callbacks = [
            ProgressBar(int(cfg.train.total_timesteps), enabled=bool(cfg.train.progress)),
            MetricsLogger(logger),
        ]
        if cfg.train.checkpoint_every > 0:
            callbacks.append(
                CheckpointEvery(int(cfg.train.checkpoint_every), spec, out_dir / "checkpoints")
            )
        start = time.perf_counter()
        if remaining > 0:
            model.learn(remaining, callback=callbacks, reset_num_timesteps=False)
        elapsed = time.perf_counter() - start
        save_agent(model, spec, out_dir / "agent")
        steps_per_s = max(remaining, 0) / max(elapsed, 1e-9)
        logger.summary({"train/steps_per_s": steps_per_s, "train/timesteps": model.num_timesteps})
        print(f"trained to {model.num_timesteps} steps at {steps_per_s:,.0f} steps/s")
        metric = float("nan")
        if cfg.train.evaluate:
            agent = AgentPolicy(model, spec)
            rows = evaluate_and_write(
                {spec.name: agent},
                list(cfg.train.eval_policies),
                cfg,
                out_dir,
                logger,
                bool(cfg.train.progress),
            )
            metric = next(r["ttft_mean_s"] for r in rows if r["policy"] == spec.name)
            logger.summary({"eval/ttft_mean_s": metric})
        return metric
    finally:
        vec.close()
        logger.finish()


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> float:
    value = run_job(train, cfg)
    return value if np.isfinite(value) else float("inf")


if __name__ == "__main__":
    raise SystemExit(hydra_entry("experiments.train", main))
