"""The cache lifecycle in the commands: its SimConfig fields reach the Hydra
commands as sim.*, the sim=replica_lifetime preset composes to what it says, and
compare's rows pool the replication metrics and print them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
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


def test_rows_pool_the_replication_metrics_and_compare_prints_them() -> None:
    """Two windows: 300 B landed for 100 B of distinct prefix and 2 s saved, then
    100 B for 100 B and 3 s: pooled 400 / 5 = 80 B per saved second, 400 / 200 = 2x."""
    from experiments.evaluation import WindowResult, _replication
    from experiments.report import replication_table

    def window(landed: float, distinct: float, saved_s: float, normal: int) -> WindowResult:
        summary = {
            "copy_prefill_saved_s": saved_s,
            "copied_prefix_bytes": distinct,
            "normal_displaced_by_copies_blocks": normal,
        }
        return WindowResult("w", *([np.zeros(1)] * 3), 1, 0, summary, {}, 0.0)  # type: ignore[arg-type]

    pooled = _replication([window(300, 100, 2.0, 4), window(100, 100, 3.0, 1)], 400.0)
    assert pooled == {
        "copy_prefill_saved_s": 5.0,
        "copy_bytes_per_prefill_s_saved": 80.0,
        "normal_displaced_by_copies_blocks": 5,
        "replication_amplification": 2.0,
    }
    rows = [
        {"policy": "cache_aware", "warm_copies": 0, **pooled},
        {"policy": "btb", "warm_copies": 3, "warm_bytes": 4e9, **pooled},
    ]
    head, _, line, _ = replication_table(rows).splitlines()
    assert head.split()[:3] == ["policy", "copy", "GB"]
    assert line.split() == ["btb", "4.00", "5.00", "0.0", "2.00", "5"]
    assert replication_table(rows[:1]) == ""  # nobody copied
