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
import torch
from gymnasium import spaces

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
        model.policy.set_training_mode(False)

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
                controller.apply(self.act(controller.observe(sim)), request.arrival_s)
            return controller.route(sim, request)
        encoder = self._encoder
        assert encoder is not None, "reset() must be called before decide()"
        obs = encoder.encode(sim, request)
        if self.spec.env == "route":
            return int(self.act(obs))
        mask = route_warm_masks(sim, request) if self._masked else None
        apply_route_warm(sim, request, self.act(obs, mask))
        return None  # routed already, by apply_route_warm

    def act(self, obs: np.ndarray, mask: np.ndarray | None = None) -> Any:
        """The model's action for one observation (and action mask).

        Greedy actions skip SB3's ``predict`` (which builds a distribution object
        per action dimension): the network's logits or Q-values, masked, then
        argmax per dimension, which is what ``predict(deterministic=True)`` returns.
        """
        if not self.deterministic:
            kwargs = {"action_masks": mask} if mask is not None else {}
            action, _ = self.model.predict(obs, deterministic=False, **kwargs)
            return action
        policy = self.model.policy
        with torch.no_grad():
            obs_t = torch.as_tensor(obs, dtype=torch.float32).unsqueeze(0)
            if self.spec.algo == "dqn":
                scores = policy.q_net(obs_t)[0]
            else:
                features = policy.extract_features(obs_t, policy.pi_features_extractor)
                scores = policy.action_net(policy.mlp_extractor.forward_actor(features))[0]
            if mask is not None:
                scores = scores.masked_fill(~torch.as_tensor(mask), -torch.inf)
            space = self.model.action_space
            if isinstance(space, spaces.Discrete):
                return int(scores.argmax())
            parts = torch.split(scores, [int(n) for n in space.nvec])
            return np.array([int(part.argmax()) for part in parts])
