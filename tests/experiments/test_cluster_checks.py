"""Settings that need the cluster's size are checked before any window runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envs.sim import SimConfig
from envs.sim.errors import ConfigError
from experiments import compare
from experiments._cli import main_guard


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"model_versions": ("a", "b")}, "sim.model_versions names 2 versions for a cluster of 3"),
        ({"upgrade_at_s": (1.0, 2.0, 3.0, 4.0)}, "sim.upgrade_at_s has 4 times for a cluster of 3"),
        (
            {"fault_node_loss_s": (1.0, 2.0), "fault_node_loss_nodes": (0, 3)},
            "sim.fault_node_loss_nodes[1] = 3 is not a node of the cluster (nodes 0..2)",
        ),
        (
            {"fault_nic_down_s": (1.0,), "fault_nic_down_nodes": (5,)},
            "sim.fault_nic_down_nodes[0] = 5 is not a node of the cluster (nodes 0..2)",
        ),
    ],
)
def test_check_cluster_names_the_field(options: dict[str, object], message: str) -> None:
    config = SimConfig(**options)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=re.escape(message)):
        config.check_cluster(3)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"model_versions": ("a", "b")}, "names 2 versions for a cluster of 1 node; give one"),
        ({"upgrade_at_s": (1.0, 2.0)}, "has 2 times for a cluster of 1 node; give at most one"),
    ],
)
def test_check_cluster_counts_one_node_in_the_singular(
    options: dict[str, object], message: str
) -> None:
    """It said "for a cluster of 1 nodes"."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        SimConfig(**options).check_cluster(1)  # type: ignore[arg-type]


def test_check_cluster_accepts_what_fits() -> None:
    SimConfig(model_versions=("a", "b", "a")).check_cluster(3)
    SimConfig(
        upgrade_at_s=(1.0,), fault_node_loss_s=(1.0,), fault_node_loss_nodes=(2,)
    ).check_cluster(3)


def test_compare_refuses_before_its_progress_bar(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the progress bar on, the error is still the only line on stderr: the
    bar had not started (it used to run a window first)."""
    out = tmp_path / "run"
    argv = ["agents=none", "sim.model_versions=[1,2]", f"out_dir={out}"]
    assert main_guard(lambda: compare.main(argv)) == 2
    err = capsys.readouterr().err
    want = "sim.model_versions names 2 versions for a cluster of 4 nodes; give one per node"
    assert err == f"error: experiments.compare: {want} (from the command line)\n"
    assert not out.exists()
