"""Speculative prefill from Hydra: ``env.speculate`` reaches btb/RouteWarm-v0's
arguments (and only when set), ``sim.speculative_chunk_tokens`` the SimConfig."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException

from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window
from experiments.config import register_configs, sim_of
from experiments.train import check_finetune, check_imitation, env_kwargs, make_env_fn_kwargs

CONF = Path(__file__).resolve().parents[2] / "conf"
register_configs()


def _compose(overrides: list[str]):  # type: ignore[no-untyped-def]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="train", overrides=["workload=tiny", *overrides])


def test_env_speculate_and_the_chunk_size_reach_the_env() -> None:
    cfg = _compose(["env=route_warm", "env.speculate=true", "sim.speculative_chunk_tokens=4096"])
    kwargs = env_kwargs(cfg)
    assert kwargs["speculate"] is True
    assert sim_of(cfg).speculative_chunk_tokens == 4096
    window = synthetic_window(BurstedSyntheticConfig(n_bursts=1, burst_requests=4, n_decoys=0))
    env = gym.make("btb/RouteWarm-v0", **make_env_fn_kwargs(kwargs, [window])).unwrapped
    n = env.n_nodes
    assert list(env.action_space.nvec) == [n] + [2] * n + [n + 1] + [2] * n


def test_by_default_a_run_records_no_speculate_argument() -> None:
    # a default run's env arguments are as before the option existed (saved agents)
    assert "speculate" not in env_kwargs(_compose(["env=route_warm"]))
    assert "speculate" not in env_kwargs(_compose(["env=route"]))
    assert "speculate" not in env_kwargs(_compose(["env=route", "env.speculate=true"]))


def test_a_bad_speculate_value_is_refused() -> None:
    with pytest.raises(ConfigCompositionException, match="speculate"):
        _compose(["env=route_warm", "env.speculate=maybe"])


def test_the_node_set_network_refuses_speculate() -> None:
    cfg = _compose(["env=route_warm", "agent=maskable_ppo", "env.speculate=true"])
    with pytest.raises(ValueError, match=r"env\.speculate=true: the node-set network"):
        check_finetune(cfg)
    check_finetune(_compose(["env=route_warm", "agent=maskable_ppo", "agent.net=mlp"]))


def test_behavioural_cloning_refuses_speculate() -> None:
    cfg = _compose(["env=route_warm", "env.speculate=true", "imitation.episodes=1"])
    with pytest.raises(
        ValueError,
        match=r"labels no speculate, pin or move actions; behavioural cloning runs without "
        r"env\.speculate$",
    ):
        check_imitation(cfg)
