"""The numpy forward pass gives the torch path's actions (the reference), and zoo
agents run in lockstep (one batched forward pass a step) serve every window exactly
as they do one window at a time."""

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
from agents.lockstep import can_lockstep, run_lockstep
from envs.sim import ClusterSpec, SimConfig, Simulator
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window
from experiments.evaluation import evaluate_policies

ZOO = Path(__file__).resolve().parents[2] / "agents" / "zoo"
SMALL = BurstedSyntheticConfig(n_bursts=2, burst_requests=30, n_decoys=4, burst_window_s=4.0)
# overlapping 60 s bursts and decoys as in the published windows, 372 requests (not 4,120)
MEDIUM = BurstedSyntheticConfig(n_bursts=3, burst_requests=120, n_decoys=12)


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


ALL_OPTIONS = {"speculate": True, "cache_actions": True, "hints": True, "spare_features": True}


@pytest.mark.parametrize(
    ("algo", "env", "critic", "options"),
    [
        ("ppo", "route", "shared", {}),
        ("maskable_ppo", "route_warm", "separate", {}),
        ("a2c", "thresholds", "detached", {}),
        ("ppo", "route", "shared", {"hints": True}),
        ("ppo", "route", "shared", {"spare_features": True}),
        ("maskable_ppo", "route_warm", "shared", ALL_OPTIONS),
        ("ppo", "route_warm", "shared", {"cache_actions": True}),
    ],
)
def test_numpy_logits_match_a_fresh_network(algo, env, critic, options):
    spec = AgentSpec(algo=algo, env=env, critic=critic, hidden=16, env_kwargs=options)
    window = synthetic_window(SMALL, window=0)
    model = build_model(spec, gym.make(spec.env_id, windows=[window], **options), {"n_steps": 8})
    actor = NumpyNodeSetActor(model.policy)
    policy: Any = model.policy
    rng = np.random.default_rng(0)
    shape: Any = model.observation_space.shape
    for obs in rng.normal(0.0, 2.0, (50, *shape)).astype(np.float32):
        with torch.no_grad():
            latent = policy.mlp_extractor.forward_actor(torch.as_tensor(obs)[None])
            expected = policy.action_net(latent)[0].numpy()
        np.testing.assert_allclose(actor.logits(obs), expected, rtol=1e-5, atol=1e-6)


# --- lockstep: several windows, one batched forward pass a step -----------------------


def _records(records) -> list[tuple[int, float, int]]:
    return list(zip(records.node, records.ttft_s, records.hit_hbm_tokens, strict=True))


@pytest.mark.parametrize(
    ("name", "n_nodes"), [("bc_route_warm", 4), ("finetune_route_warm", 4), ("bc_route_warm", 6)]
)
def test_lockstep_serves_each_window_as_one_at_a_time(name: str, n_nodes: int) -> None:
    agent = AgentPolicy.load(ZOO / name)
    assert can_lockstep(agent)
    cluster = ClusterSpec.uniform("llama-3.3-70b", "4xH100", n_nodes)
    # windows of different lengths, so some finish while others still step
    windows = [synthetic_window(MEDIUM, window=0), synthetic_window(SMALL, window=1)]
    windows.append(synthetic_window(MEDIUM, window=2))

    def sims() -> list[Simulator]:
        return [
            Simulator(cluster, w, SimConfig(), np.random.default_rng([0, i]))
            for i, w in enumerate(windows)
        ]

    one_at_a_time = [_records(agent.run(sim)) for sim in sims()]
    lockstep = [_records(records) for records in run_lockstep(agent, sims())]
    assert lockstep == one_at_a_time
    assert len(lockstep[0]) == len(windows[0]) > len(lockstep[1]) == len(windows[1])


def test_threshold_agents_and_subclasses_do_not_lockstep() -> None:
    assert not can_lockstep(BothPaths(*load_agent(ZOO / "bc_route_warm")))  # its own act
    agent = AgentPolicy.load(ZOO / "ppo_thresholds")
    assert not can_lockstep(agent)
    with pytest.raises(ValueError, match="cannot run in lockstep"):
        run_lockstep(agent, [])


def test_evaluation_rows_are_those_of_one_window_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    windows = [synthetic_window(SMALL, window=k) for k in range(3)]

    def rows() -> list[dict]:
        agent = AgentPolicy.load(ZOO / "bc_route_warm")
        runs = evaluate_policies([agent, "cache_aware"], "70b_h100x4", iter(windows), floor=True)
        return [
            {k: v for k, v in run.row.items() if k not in ("wall_s", "requests_per_s")}
            for run in runs
        ]

    monkeypatch.setattr("experiments.evaluation.LOCKSTEP_WINDOWS", 2)  # windows 0-1, then 2
    lockstep = rows()
    monkeypatch.setattr("experiments.evaluation.lockstep_capable", lambda policy: False)
    assert lockstep == rows()
    assert [row["policy"] for row in lockstep] == [
        "bc_route_warm",
        "cache_aware",
        "floor",
        "floor_capacity",
    ]


def test_batched_logits_are_each_observations_own() -> None:
    actor = AgentPolicy.load(ZOO / "bc_route_warm").batch_actor
    assert actor is not None
    size = actor.global_features + 5 * actor.node_features  # a 5-node cluster
    obs = np.random.default_rng(0).normal(0.0, 2.0, (16, size)).astype(np.float32)
    assert np.array_equal(actor.batch_logits(obs), np.stack([actor.logits(o) for o in obs]))


def test_numpy_actions_equal_torch_actions_with_every_route_warm_option():
    """speculate, cache_actions, hints and spare_features: the new heads and the
    hint and spare-node features, on
    real env steps (masked), then on spread observations where every part varies."""
    spec = AgentSpec(algo="maskable_ppo", env="route_warm", hidden=16, env_kwargs=ALL_OPTIONS)
    window = synthetic_window(SMALL, window=0)
    env = gym.make(spec.env_id, windows=[window], **ALL_OPTIONS)
    model = build_model(spec, env, {"n_steps": 8})
    torch.manual_seed(0)
    with torch.no_grad():  # spread the near-zero fresh head so its choices differ
        for name, param in model.policy.action_net.named_parameters():
            param.normal_(0.0, 1.0) if name.endswith("weight") else param.zero_()
    agent = BothPaths(model, spec)
    cluster = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 4)
    agent.run(Simulator(cluster, window, SimConfig(), np.random.default_rng(0)))
    stepped = len(agent.pairs)
    assert stepped == len(window.requests)
    shape: Any = model.observation_space.shape
    for obs in np.random.default_rng(1).normal(0.0, 2.0, (300, *shape)).astype(np.float32):
        agent.act(obs)
    numpy_actions = [a for a, _ in agent.pairs]
    assert numpy_actions == [b for _, b in agent.pairs]
    n = 4
    assert len(numpy_actions[0]) == 2 + 2 * n + 2  # route, warms, evict, speculates, pin, move
    spread = numpy_actions[stepped:]
    for part in (slice(2 + n, 2 + 2 * n), slice(2 + 2 * n, 3 + 2 * n), slice(3 + 2 * n, None)):
        assert sum(sum(a[part]) for a in spread) > 0  # each new part chose something
    assert any(a[2 + 2 * n] > n for a in spread) and any(a[3 + 2 * n] > n for a in spread)
    actor = agent.batch_actor  # the batched pass (lockstep) gives each observation's own
    assert actor is not None
    obs = np.random.default_rng(2).normal(0.0, 2.0, (16, *shape)).astype(np.float32)
    assert np.array_equal(actor.batch_logits(obs), np.stack([actor.logits(o) for o in obs]))


@pytest.mark.parametrize("n_nodes", [5, 6, 7, 9, 12])
def test_nodes_in_the_same_state_get_the_same_logits(n_nodes):
    """The per-node products multiply each node's row alone: a BLAS that sums the
    rows of one matrix in different orders (OpenBLAS on some CPUs, from the fifth
    row) would give two identical nodes different logits, and the greedy route
    would break their tie otherwise than torch (at the first request of an episode,
    all nodes are empty)."""
    model, _ = load_agent(ZOO / "bc_route_warm")
    actor = NumpyNodeSetActor(model.policy)
    rng = np.random.default_rng(n_nodes)
    row = rng.random(actor.node_features).astype(np.float32)
    obs = np.concatenate([np.tile(row, n_nodes), rng.random(actor.global_features)])
    for logits in (actor.logits(obs), actor.batch_logits(np.stack([obs, obs]))[1]):
        route = logits[:n_nodes]
        assert np.all(route == route[0])
        warm = logits[n_nodes : 3 * n_nodes].reshape(n_nodes, 2)
        assert np.all(warm == warm[0])
