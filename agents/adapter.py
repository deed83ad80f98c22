"""Any saved agent as a :class:`baselines.policy.Policy`, so learned agents run in
the comparison run exactly where the baselines do.

The adapter builds observations with the environments' own encoder and carries
out actions with the environments' own functions, so an agent acts in
evaluation exactly as in training.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from agents.algorithms import AgentSpec, load_agent
from baselines.policy import Policy
from envs.encoder import ObservationEncoder
from envs.route_warm import apply_route_warm, route_warm_masks
from envs.sim.simulator import Simulator
from envs.thresholds import EpochController
from envs.workloads.request import Request


class AgentPolicy(Policy):
    """A learned agent behind the Policy interface.

    Args:
        model: a trained SB3 model.
        spec: what it is (env kind, environment arguments such as ``epoch_s``).
        deterministic: act greedily (the default for evaluation).
    """

    def __init__(self, model: Any, spec: AgentSpec, deterministic: bool = True) -> None:
        self.model = model
        self.spec = spec
        self.name = spec.name
        self.deterministic = deterministic
        self._encoder: ObservationEncoder | None = None
        self._controller: EpochController | None = None
        self._masked = spec.algo == "maskable_ppo"

    @classmethod
    def load(cls, folder: str | Path, name: str | None = None) -> AgentPolicy:
        model, spec = load_agent(folder)
        policy = cls(model, spec)
        if name:
            policy.name = name
        return policy

    def reset(self, sim: Simulator) -> None:
        if self.spec.env == "thresholds":
            epoch_s = float(self.spec.env_kwargs.get("epoch_s", 1.0))
            self._controller = EpochController(sim.n_nodes, epoch_s)
            self._controller.reset(sim)
        else:
            self._encoder = ObservationEncoder(sim.n_nodes)
            self._encoder.reset()

    def decide(self, sim: Simulator, request: Request) -> Any:
        if self.spec.env == "thresholds":
            controller = self._controller
            assert controller is not None, "reset() must be called before decide()"
            if not controller.in_epoch(request):
                if controller.epoch_end > -np.inf:
                    controller.close_epoch(sim)
                obs = controller.observe(sim)
                action, _ = self.model.predict(obs, deterministic=self.deterministic)
                controller.apply(action, request.arrival_s)
            return controller.route(sim, request)
        encoder = self._encoder
        assert encoder is not None, "reset() must be called before decide()"
        obs = encoder.encode(sim, request)
        if self.spec.env == "route":
            action, _ = self.model.predict(obs, deterministic=self.deterministic)
            return int(action)
        if self._masked:
            action, _ = self.model.predict(
                obs, deterministic=self.deterministic, action_masks=route_warm_masks(sim, request)
            )
        else:
            action, _ = self.model.predict(obs, deterministic=self.deterministic)
        apply_route_warm(sim, request, action)
        return None  # routed already, by apply_route_warm
