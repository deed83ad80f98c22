"""oracle_warm: warms only what will be reused, and beats BTB on a burst window."""

from __future__ import annotations

import numpy as np
import pytest

from baselines import OracleWarm, make_policy
from envs.sim import SimConfig, Simulator, setup_cluster
from envs.workloads.registry import windows


@pytest.fixture(scope="module")
def burst_window():  # type: ignore[no-untyped-def]
    """The first test window of Bursted-ART's synthetic half (4,120 requests)."""
    return next(windows("bursted_synthetic", split="test", limit=1))


@pytest.mark.parametrize("causal_kv", [True, False])
def test_oracle_beats_btb_and_cache_aware_on_a_burst_window(burst_window, causal_kv: bool) -> None:  # type: ignore[no-untyped-def]
    mean = {}
    for name in ("cache_aware", "btb", "oracle_warm"):
        sim = Simulator(
            setup_cluster("70b_h100x4"),
            burst_window,
            SimConfig(causal_kv=causal_kv),
            np.random.default_rng(0),
        )
        mean[name] = float(np.mean(make_policy(name).run(sim).ttft_s))
    assert mean["oracle_warm"] < mean["btb"] < mean["cache_aware"]


def test_oracle_copies_only_reused_prefixes_to_every_other_node(burst_window) -> None:  # type: ignore[no-untyped-def]
    sim = Simulator(
        setup_cluster("70b_h100x4"), burst_window, SimConfig(), np.random.default_rng(0)
    )
    OracleWarm().run(sim)
    bursts = {r.blocks[255] for r in burst_window.requests if r.job_kind == "burst"}
    decoys = {r.blocks[255] for r in burst_window.requests if r.job_kind == "decoy"}
    copied = {c.key for c in sim.copies}
    assert copied == bursts and not copied & decoys
    # each burst prefix is computed once and copied to the three other nodes
    assert len(sim.copies) == 3 * len(bursts)
    assert sim.records.summary["warm_hit_rate"] == 1.0


def test_oracle_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match=r"oracle_warm\.max_nodes"):
        OracleWarm(max_nodes=0)
