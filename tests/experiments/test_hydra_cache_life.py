"""The cache lifecycle's SimConfig fields reach the Hydra commands as sim.*, and
the sim=replica_lifetime preset composes to what it says."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from envs.sim import SimConfig
from experiments.config import register_configs, sim_of

CONF = Path(__file__).resolve().parents[2] / "conf"
register_configs()


def _sim(overrides: list[str]) -> SimConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return sim_of(compose(config_name="train", overrides=overrides))


def test_lifecycle_options_from_hydra() -> None:
    assert _sim([]) == SimConfig()  # off by default
    assert _sim(["sim=replica_lifetime"]) == SimConfig(
        reclaim_order="replicas_first", replica_ttl_s=30.0
    )
    assert _sim(["sim.pin_budget_fraction=0.5"]) == SimConfig(pin_budget_fraction=0.5)
    with pytest.raises(ValueError, match=r"sim\.reclaim_order must be one of lru, replicas_first"):
        _sim(["sim.reclaim_order=fifo"])
