"""The numpy forward pass gives the torch path's actions (the reference)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import envs  # noqa: F401  (registers the environments)
from agents.adapter import AgentPolicy
from agents.algorithms import AgentSpec, build_model, load_agent
from agents.inference import NumpyNodeSetActor
from envs.sim import ClusterSpec, SimConfig, Simulator
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

ZOO = Path(__file__).resolve().parents[2] / "agents" / "zoo"
SMALL = BurstedSyntheticConfig(n_bursts=2, burst_requests=30, n_decoys=4, burst_window_s=4.0)


@pytest.fixture(autouse=True)
def one_torch_thread():
    """As compare, evaluate and bench run agents (two threads on two shared cores crawl)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class BothPaths(AgentPolicy):
    """Acts with the numpy path and records the torch path's action beside it."""

    def __init__(self, model: Any, spec: AgentSpec) -> None:
        super().__init__(model, spec)
        self.pairs: list[tuple[Any, Any]] = []

    def act(self, obs: np.ndarray, mask: np.ndarray | None = None) -> Any:
        action = super().act(obs, mask)
        self.pairs.append(
            (np.asarray(action).tolist(), np.asarray(self.act_torch(obs, mask)).tolist())
        )
        return action


@pytest.mark.parametrize(
    ("name", "windows", "n_nodes"),
    [  # (generator config, window index): made in the test, not while collecting
        ("bc_route_warm", [(None, 0)], 4),
        ("bc_route_warm", [(SMALL, 2)], 6),
        ("ppo_thresholds", [(None, k) for k in range(3)], 4),
    ],
)
def test_numpy_actions_equal_torch_actions_on_zoo_agents(name, windows, n_nodes):
    agent = BothPaths(*load_agent(ZOO / name))
    cluster = ClusterSpec.uniform("llama-3.3-70b", "4xH100", n_nodes)
    for config, index in windows:
        window = synthetic_window(config, window=index)
        agent.run(Simulator(cluster, window, SimConfig(), np.random.default_rng(0)))
    numpy_actions = [a for a, _ in agent.pairs]
    torch_actions = [b for _, b in agent.pairs]
    assert len(agent.pairs) >= (300 if name == "ppo_thresholds" else 4000) or n_nodes != 4
    assert numpy_actions == torch_actions
    if name == "bc_route_warm":  # the decisions exercised warming, not only routing
        assert sum(sum(a[1 : 1 + n_nodes]) for a in numpy_actions) > 0


@pytest.mark.parametrize(
    ("algo", "env", "critic"),
    [
        ("ppo", "route", "shared"),
        ("maskable_ppo", "route_warm", "separate"),
        ("a2c", "thresholds", "detached"),
    ],
)
def test_numpy_logits_match_a_fresh_network(algo, env, critic):
    spec = AgentSpec(algo=algo, env=env, critic=critic, hidden=16)
    window = synthetic_window(SMALL, window=0)
    model = build_model(spec, gym.make(spec.env_id, windows=[window]), {"n_steps": 8})
    actor = NumpyNodeSetActor(model.policy)
    policy: Any = model.policy
    rng = np.random.default_rng(0)
    shape: Any = model.observation_space.shape
    for obs in rng.normal(0.0, 2.0, (50, *shape)).astype(np.float32):
        with torch.no_grad():
            latent = policy.mlp_extractor.forward_actor(torch.as_tensor(obs)[None])
            expected = policy.action_net(latent)[0].numpy()
        np.testing.assert_allclose(actor.logits(obs), expected, rtol=1e-5, atol=1e-6)
