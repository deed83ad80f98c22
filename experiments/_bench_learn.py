"""Learning throughput for ``experiments.bench``: env steps per second of a
short ``learn()`` (rollout collection and gradient updates) with the default
agent and env configs, as ``experiments.train`` runs them (imports torch and
SB3, so it is loaded only in the process that measures it)."""

from __future__ import annotations

import time
from typing import Any

from omegaconf import OmegaConf

from envs.sim.request import Workload
from experiments.config import CONF_DIR, DEFAULT_N_ENVS, TrainConf

LEARN_AGENTS = {
    "btb/Route-v0": ("route", "ppo"),
    "btb/RouteWarm-v0": ("route_warm", "maskable_ppo"),
    "btb/Thresholds-v0": ("thresholds", "ppo"),
}
"""The algorithm each env is learned with (and its conf/env option)."""


def default_configs(env_kind: str, algo: str) -> tuple[int, dict[str, Any]]:
    """(``env.n_envs``, ``agent.hyperparams``) of conf/env/ENV.yaml and
    conf/agent/ALGO.yaml, as ``train env=ENV agent=ALGO`` composes them."""
    env = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "env" / f"{env_kind}.yaml"))
    agent = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "agent" / f"{algo}.yaml"))
    assert isinstance(env, dict) and isinstance(agent, dict)
    hyperparams = agent.get("hyperparams") or {}
    n_envs = int(env.get("n_envs", DEFAULT_N_ENVS))
    return n_envs, {str(k): v for k, v in hyperparams.items()}


def bench_learn(env_id: str, workload: Workload, options: dict[str, Any]) -> dict[str, Any]:
    """Env steps/s of learning on ``workload`` (the first workload's window) with
    the default configs and ``train``'s torch threads (``train.update_threads``'
    default in the updates, at most the usable CPUs; ``train.torch_threads``' in
    the rollouts):
    ``repeats`` calls of ``learn(learn_steps)`` on one model, the fastest reported
    (the first pays torch's warm-up)."""
    import torch
    from stable_baselines3.common.env_util import make_vec_env

    import envs  # noqa: F401  (registers the environments)
    from agents.algorithms import AgentSpec, build_model
    from agents.callbacks import RolloutClock, UpdateThreads, usable_threads
    from agents.vec_env import InProcessVecEnv

    threads = usable_threads(TrainConf.update_threads)
    torch.set_num_threads(TrainConf.torch_threads)
    env_kind, algo = LEARN_AGENTS[env_id]
    n_envs, hyperparams = default_configs(env_kind, algo)
    vec = make_vec_env(
        env_id,
        n_envs=n_envs,
        seed=0,
        vec_env_cls=InProcessVecEnv,
        env_kwargs={"setup": options["setup"], "windows": [workload]},
    )
    try:
        model = build_model(AgentSpec(algo=algo, env=env_kind), vec, hyperparams)
        best: dict[str, Any] = {}
        for _ in range(options["repeats"]):
            clock = RolloutClock()
            first = model.num_timesteps
            start, cpu_start = time.perf_counter(), time.process_time()
            model.learn(
                options["learn_steps"],
                callback=[clock, UpdateThreads(threads, TrainConf.torch_threads)],
                reset_num_timesteps=False,
            )
            wall_s = time.perf_counter() - start
            cpu_s = time.process_time() - cpu_start
            steps = model.num_timesteps - first
            if not best or steps / wall_s > best["steps_per_s"]:
                best = {
                    "steps": steps,
                    "steps_per_s": steps / wall_s,
                    "rollout_s": clock.rollout_s,
                    "update_s": clock.update_s,
                    "cpu_s": cpu_s,
                }
    finally:
        vec.close()
    return {
        "env": env_id,
        "algo": algo,
        "n_envs": n_envs,
        "update_threads": threads,
        "workload": options["workloads"][0],
        **best,
        "rollout_steps_per_s": best["steps"] / max(best["rollout_s"], 1e-9),
        "update_steps_per_s": best["steps"] / max(best["update_s"], 1e-9),
    }
