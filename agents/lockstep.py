"""A greedy node-set agent on several windows at once: one batched forward pass a step.

One forward pass of an agent's small network costs mostly numpy's per-call
overhead, paid again at every decision. :func:`run_lockstep` advances the
simulators of several windows together: at each step it encodes every
unfinished simulator's decision point with that simulator's own encoder, runs
the observations through :meth:`NumpyNodeSetActor.batch_logits` at once, and
hands each simulator its own action, exactly as :meth:`AgentPolicy.decide` would.
The simulators never see each other (each has its workload, random stream and
encoder) and the batched pass gives each observation the very floats of a pass
alone, so each one's records are those of ``agent.run(sim)``
(``tests/agents/test_inference.py`` compares them on the zoo agents).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

import numpy as np

from agents.adapter import AgentPolicy
from baselines.policy import Policy
from envs.encoder import ObservationEncoder, observation_options
from envs.route_warm import apply_route_warm, route_warm_masks
from envs.sim.request import Request
from envs.sim.simulator import Simulator


def can_lockstep(policy: Policy) -> bool:
    """Whether ``policy`` acts through :func:`run_lockstep`: a greedy agent with a
    numpy forward pass that decides once a request (route or route_warm). Only an
    :class:`AgentPolicy` itself: a subclass may decide or act otherwise."""
    return (
        type(policy) is AgentPolicy
        and policy.deterministic
        and policy.spec.env in ("route", "route_warm")
        and policy.batch_actor is not None
    )


class _Run:
    """One simulator's decision loop, paused at its next decision point."""

    def __init__(self, sim: Simulator, observation: dict[str, Any]) -> None:
        self.sim = sim
        self.encoder = ObservationEncoder(sim.n_nodes, **observation)
        self.encoder.reset()
        self.decisions: Generator[Request, int | None, None] = sim.decisions()
        self.request: Request | None = next(self.decisions, None)

    def answer(self, node: int | None) -> None:
        try:
            self.request = self.decisions.send(node)
        except StopIteration:
            self.request = None


def run_lockstep(agent: AgentPolicy, sims: Sequence[Simulator]) -> list[Any]:
    """Serve every simulator's workload with ``agent`` (see :func:`can_lockstep`),
    all in lockstep; the records of each, in order. The simulators must have the
    same number of nodes (one action layout)."""
    if not can_lockstep(agent):
        raise ValueError(f"agent {agent.name!r} cannot run in lockstep (see can_lockstep)")
    if len({sim.n_nodes for sim in sims}) > 1:
        raise ValueError("run_lockstep: the simulators have different node counts")
    actor = agent.batch_actor
    assert actor is not None
    for sim in sims:
        agent.reset(sim)  # checks the node count; the action layout is the same for all
    route = agent.spec.env == "route"
    masked = agent.spec.algo == "maskable_ppo"
    options = agent.spec.env_kwargs  # the env options the agent was trained with
    speculate = bool(options.get("speculate", False))
    cache_actions = bool(options.get("cache_actions", False))
    runs = [_Run(sim, observation_options(options)) for sim in sims]
    active = [run for run in runs if run.request is not None]
    # the batch's rows, written in place (cheaper than stacking fresh arrays each step)
    obs_rows = np.empty((len(active), runs[0].encoder.size if runs else 0), dtype=np.float32)
    mask_rows: np.ndarray | None = None
    while active:
        requests = [run.request for run in active]
        obs = obs_rows[: len(active)]
        for i, (run, r) in enumerate(zip(active, requests)):
            assert r is not None
            obs[i] = run.encoder.encode(run.sim, r)
        masks = None
        if masked:
            for i, (run, r) in enumerate(zip(active, requests)):
                assert r is not None
                mask = route_warm_masks(run.sim, r, speculate, cache_actions)
                if mask_rows is None:
                    mask_rows = np.empty((len(active), mask.size), dtype=bool)
                mask_rows[i] = mask
            assert mask_rows is not None
            masks = mask_rows[: len(active)]
        choices = agent.greedy(actor.batch_logits(obs), masks)
        for run, request, choice in zip(active, requests, choices):
            assert request is not None
            if route:
                run.answer(int(choice[0]))
            else:
                apply_route_warm(run.sim, request, choice, speculate, cache_actions)
                run.answer(None)  # routed already, by apply_route_warm
        active = [run for run in active if run.request is not None]
    return [run.sim.records for run in runs]
