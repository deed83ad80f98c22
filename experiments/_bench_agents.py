"""Agents in evaluation for ``experiments.bench``: decisions/s of a saved agent
driving the simulator as ``compare`` and ``evaluate`` run it, and where the time
goes (imports torch, so it is loaded only in the process that measures agents)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.adapter import AgentPolicy
from agents.algorithms import AgentSpec, load_agent
from agents.lockstep import can_lockstep, run_lockstep
from envs.sim.request import Workload
from experiments._bench import best_run_s, peak_rss_mb, sim_factory, timed_run
from experiments.evaluation import LOCKSTEP_WINDOWS


class TimedAgent(AgentPolicy):
    """An agent with a stopwatch and a counter on its network's decisions (``act``)."""

    def __init__(self, model: Any, spec: AgentSpec) -> None:
        super().__init__(model, spec)
        self.inference_s = 0.0
        self.decisions = 0

    def act(self, obs: np.ndarray, mask: np.ndarray | None = None) -> Any:
        start = time.perf_counter()
        action = super().act(obs, mask)
        self.inference_s += time.perf_counter() - start
        self.decisions += 1
        return action


def bench_agent(folder: str, workload: Workload, options: dict[str, Any]) -> dict[str, Any]:
    """Decisions/s of the agent saved in ``folder`` on ``workload``, the first
    workload's window, on one torch thread as ``compare`` and ``evaluate`` run it:
    an agent that runs windows in lockstep (``agents.lockstep``) runs
    ``LOCKSTEP_WINDOWS`` simulators of the window at once, as the evaluator runs
    that many test windows (``decisions_per_s_alone``: one window at a time).

    A decision is one forward pass of the network for one decision point: one per
    request for the routing agents, one per decision epoch for a threshold
    controller.
    """
    torch.set_num_threads(1)
    workload_name = options["workloads"][0]
    make_sim = sim_factory(options, workload)
    agent = AgentPolicy.load(folder)
    alone_s = best_run_s(make_sim, agent, options["repeats"])
    timed = TimedAgent(*load_agent(folder))
    wall_s, decide_s = timed_run(make_sim, timed)
    n = len(workload)
    windows = LOCKSTEP_WINDOWS if can_lockstep(agent) else 1
    best = alone_s
    if windows > 1:
        best = math.inf
        for _ in range(options["repeats"]):
            sims = [make_sim() for _ in range(windows)]
            start = time.perf_counter()
            run_lockstep(agent, sims)
            best = min(best, (time.perf_counter() - start) / windows)
    return {
        "name": timed.name,
        "folder": str(Path(folder)),
        "env": timed.spec.env,
        "workload": workload_name,
        "decisions": timed.decisions,
        "decisions_per_s": timed.decisions / best,
        "decisions_per_s_alone": timed.decisions / alone_s,
        "lockstep_windows": windows,
        "requests": n,
        "requests_per_s": n / best,
        "peak_rss_mb": peak_rss_mb(),
        "simulate_s": wall_s - decide_s,
        "policy_s": decide_s - timed.inference_s,
        "inference_s": timed.inference_s,
    }
