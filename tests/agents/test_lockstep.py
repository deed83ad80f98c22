"""Zoo agents run in lockstep (one batched forward pass a step) serve every window
exactly as they do one window at a time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from agents.adapter import AgentPolicy
from agents.lockstep import can_lockstep, run_lockstep
from envs.sim import ClusterSpec, SimConfig, Simulator
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window
from experiments.evaluation import evaluate_policies

ZOO = Path(__file__).resolve().parents[2] / "agents" / "zoo"
SMALL = BurstedSyntheticConfig(n_bursts=2, burst_requests=30, n_decoys=4, burst_window_s=4.0)


@pytest.fixture(autouse=True)
def one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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
    windows = [synthetic_window(window=0), synthetic_window(SMALL, window=1)]
    windows.append(synthetic_window(window=2))

    def sims() -> list[Simulator]:
        return [
            Simulator(cluster, w, SimConfig(), np.random.default_rng([0, i]))
            for i, w in enumerate(windows)
        ]

    one_at_a_time = [_records(agent.run(sim)) for sim in sims()]
    lockstep = [_records(records) for records in run_lockstep(agent, sims())]
    assert lockstep == one_at_a_time
    assert len(lockstep[0]) == len(windows[0]) > len(lockstep[1]) == len(windows[1])


def test_threshold_agents_do_not_lockstep() -> None:
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
    assert [row["policy"] for row in lockstep] == ["bc_route_warm", "cache_aware", "floor"]


def test_batched_logits_are_each_observations_own() -> None:
    actor = AgentPolicy.load(ZOO / "bc_route_warm").batch_actor
    assert actor is not None
    size = actor.global_features + 5 * actor.node_features  # a 5-node cluster
    obs = np.random.default_rng(0).normal(0.0, 2.0, (16, size)).astype(np.float32)
    assert np.array_equal(actor.batch_logits(obs), np.stack([actor.logits(o) for o in obs]))
