"""Agent settings at evaluation time (``agents.adapter.AGENT_SETTINGS``): a
threshold agent runs with another ``y_tokens`` than it was trained with, given
as compare's ``policy_kwargs=AGENT.y_tokens=...`` or evaluate's
``+policy_kwargs.AGENT.y_tokens=...``; other agents and other keys are refused."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from agents.adapter import AgentPolicy
from envs.sim import SimConfig, Simulator, setup_cluster
from envs.workloads.bursted import synthetic_window
from experiments import compare
from experiments._cli import UsageError
from tests.envs.thresholds_replay import TWO_BLOCK_SUFFIX

ZOO = Path(__file__).resolve().parents[2] / "agents" / "zoo"


def _copies(agent: AgentPolicy) -> int:
    window = synthetic_window(TWO_BLOCK_SUFFIX, window=1)
    sim = Simulator(setup_cluster("70b_h100x4"), window, SimConfig(), np.random.default_rng(0))
    records = agent.run(sim)
    assert np.isfinite(records.ttft_s).all()  # every request served
    return len(sim.copies)


def test_a_threshold_agent_fires_on_such_bursts_only_with_y_tokens() -> None:
    agent = AgentPolicy.load(ZOO / "ppo_thresholds")
    assert "y_tokens" not in agent.spec.env_kwargs
    assert _copies(agent) == 0
    agent.configure(y_tokens=16384)
    assert agent.spec.env_kwargs["y_tokens"] == 16384
    assert _copies(agent) > 0
    # the saved agent is untouched: a fresh load keys as it was trained
    assert "y_tokens" not in AgentPolicy.load(ZOO / "ppo_thresholds").spec.env_kwargs
    with pytest.raises(ValueError, match=r"^y_tokens = 512 is below the shortest minimum"):
        agent.configure(y_tokens=512)
    agent.check_workload(synthetic_window(TWO_BLOCK_SUFFIX, window=1))
    with pytest.raises(ValueError, match=r"^agent 'ppo_thresholds' \(policy_kwargs\): y_tokens "
                       r"= 16384 is shorter than one 32768"):  # fmt: skip
        agent.check_workload(synthetic_window(
            dataclasses.replace(TWO_BLOCK_SUFFIX, block_tokens=32768), window=1
        ))  # fmt: skip


def test_compare_parses_an_agents_setting_and_refuses_others() -> None:
    agents = {
        "ppo_thresholds": AgentPolicy.load(ZOO / "ppo_thresholds"),
        "bc_route_warm": AgentPolicy.load(ZOO / "bc_route_warm"),
    }
    parsed = compare.policy_kwargs(["ppo_thresholds.y_tokens=8192", "btb.x=3"], ["btb"], agents)
    assert parsed == {"ppo_thresholds": {"y_tokens": 8192}, "btb": {"x": 3}}
    assert compare.configure_agents(agents, parsed) == {"btb": {"x": 3}}
    assert agents["ppo_thresholds"].spec.env_kwargs["y_tokens"] == 8192
    typed = compare.policy_settings({"ppo_thresholds": {"y_tokens": None}}, ["btb"], agents)
    assert typed == {"ppo_thresholds": {"y_tokens": None}}
    with pytest.raises(UsageError, match=r"agent ppo_thresholds has no setting 'x' "
                       r"\(settings: y_tokens\)"):  # fmt: skip
        compare.policy_kwargs(["ppo_thresholds.x=3"], ["btb"], agents)
    with pytest.raises(UsageError, match=r"agent bc_route_warm has no setting 'y_tokens' "
                       r"\(settings: -\)"):  # fmt: skip
        compare.policy_kwargs(["bc_route_warm.y_tokens=8192"], ["btb"], agents)
    with pytest.raises(UsageError, match=r"ppo_thresholds.y_tokens='many' is not a valid int"):
        compare.policy_kwargs(["ppo_thresholds.y_tokens=many"], ["btb"], agents)
    with pytest.raises(UsageError, match=r"policy_kwargs: ppo_thresholds: y_tokens"):
        compare.configure_agents(agents, {"ppo_thresholds": {"y_tokens": 0}})


def test_a_name_several_agents_share_sets_each_of_them() -> None:
    """Agents of one name from different folders are labelled ``NAME@folder``; a
    setting given to the bare name goes to every one of them, one given to a label to
    that one only (compare and evaluate alike)."""
    agents = {
        label: AgentPolicy.load(ZOO / "ppo_thresholds")
        for label in ("ppo_thresholds@a/agent", "ppo_thresholds@zoo/ppo_thresholds")
    }
    both = {label: {"y_tokens": 8192} for label in agents}
    assert compare.policy_kwargs(["ppo_thresholds.y_tokens=8192"], ["btb"], agents) == both
    typed = compare.policy_settings({"ppo_thresholds": {"y_tokens": 8192}}, ["btb"], agents)
    assert typed == both
    one = compare.policy_kwargs(["ppo_thresholds@a/agent.y_tokens=4096"], ["btb"], agents)
    assert one == {"ppo_thresholds@a/agent": {"y_tokens": 4096}}
    with pytest.raises(UsageError, match=r"names agent 'ppo_thresholds_eft', which is not among"):
        compare.policy_kwargs(["ppo_thresholds_eft.y_tokens=8192"], ["btb"], agents)
