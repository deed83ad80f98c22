"""The stale-view and fault options from the command lines: Hydra's ``sim.*`` and
compare's ``sim.NAME=`` arguments, the fault counts in rows and the table, the
RouteWarm-v0 mask of a down node, and each evaluated window's faults of its own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from envs.sim import SimConfig
from experiments import compare
from experiments._cli import UsageError, main_guard
from experiments._sim_options import split_sim_options, with_sim_options
from experiments.config import register_configs, sim_of
from experiments.evaluation import WindowResult, evaluate_policies, summarize_windows
from experiments.report import comparison_table

CONF = Path(__file__).resolve().parents[2] / "conf"
register_configs()


def _sim(overrides: list[str]) -> SimConfig:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return sim_of(compose(config_name="train", overrides=overrides))


def test_hydra_sets_the_view_delay_and_the_fault_options() -> None:
    config = _sim(
        [
            "sim.router_view_delay_s=0.05",
            "sim.fault_node_loss_s=[30,60.5]",
            "sim.fault_node_loss_nodes=[0,2]",
            "sim.fault_copy_fail_prob=0.1",
        ]
    )
    assert config == SimConfig(
        router_view_delay_s=0.05,
        fault_node_loss_s=(30.0, 60.5),
        fault_node_loss_nodes=(0, 2),
        fault_copy_fail_prob=0.1,
    )
    assert _sim(["sim=faults"]).faults_on
    assert _sim(["sim=stale_view"]).router_view_delay_s == 0.05
    with pytest.raises(ValueError, match=r"sim\.fault_node_loss_s has 1 time but"):
        _sim(["sim.fault_node_loss_s=[30]"])


def test_compare_takes_sim_options_as_hydra_spells_them() -> None:
    argv = ["windows=1", "sim.router_view_delay_s=0.2", "sim.fault_node_loss_s=30,60"]
    argv += ["sim.fault_node_loss_nodes=[1, 0]", "sim.fault_seed=3"]
    rest, options = split_sim_options("experiments.compare", argv)
    assert rest == ["windows=1"]
    assert options == {
        "router_view_delay_s": 0.2,
        "fault_node_loss_s": (30.0, 60.0),
        "fault_node_loss_nodes": (1, 0),
        "fault_seed": 3,
    }
    config = with_sim_options(SimConfig.reference(), options)
    assert config == SimConfig.reference(**options)
    assert with_sim_options(SimConfig(), {}) == SimConfig()


def test_compare_takes_the_other_features_sim_options_too() -> None:
    argv = ["sim.model_versions=v1,v2,v1,v1", "sim.upgrade_at_s=0,inf", "sim.disk_tier=true"]
    argv += ["sim.reclaim_order=replicas_first", "sim.speculative_chunk_tokens=512"]
    argv += ["sim.host_ram_bytes=1e12"]  # (a disk tier needs a bounded host RAM)
    _, options = split_sim_options("experiments.compare", argv)
    assert options == {
        "model_versions": ("v1", "v2", "v1", "v1"),
        "upgrade_at_s": (0.0, float("inf")),
        "disk_tier": True,
        "host_ram_bytes": 1e12,
        "reclaim_order": "replicas_first",
        "speculative_chunk_tokens": 512,
    }
    assert with_sim_options(SimConfig(), options) == SimConfig(**options)


@pytest.mark.parametrize(
    ("arg", "needle"),
    [
        # compare's own options, spelled as the Hydra commands spell them
        ("sim.causal_kv=false", r"sim\.causal_kv= is an option of its own here: causal_kv=false$"),
        ("sim.copy_model=contention", r"an option of its own here: copy_model=contention$"),
        ("sim.hbm_hit_load=true", "unknown option 'sim.hbm_hit_load'"),
        # each value that does not parse says where it came from, as the Hydra commands do
        ("sim.disk_tier=yes", r"is not true or false \(from the command line\)$"),
        (
            "sim.fault_node_loss_nodes=a,b",
            r"not a comma-separated list of node indices \(from the command line\)$",
        ),
        (
            "sim.router_view_delay_s=soon",
            r"^experiments\.compare: sim\.router_view_delay_s='soon' is not a valid number "
            r"\(from the command line\)$",
        ),
        # an empty entry was dropped, so the versions after it moved to other nodes
        (
            "sim.model_versions=[v1,v2,,v1]",
            r"model_versions='\[v1,v2,,v1\]' has an empty entry \(from the command line\)$",
        ),
        ("sim.upgrade_at_s=1,,2", r"has an empty entry \(from the command line\)$"),
    ],
)
def test_bad_sim_options_are_named(arg: str, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        split_sim_options("experiments.compare", [arg])


def test_an_option_given_twice_is_refused_not_the_last_taken() -> None:
    from experiments._cli import parse_args

    twice = ["sim.fault_copy_fail_prob=0.5", "sim.fault_copy_fail_prob=0.2"]
    with pytest.raises(
        UsageError,
        match=r"^experiments\.compare: sim\.fault_copy_fail_prob= is given twice "
        r"\(from the command line\)$",
    ):
        split_sim_options("experiments.compare", twice)
    with pytest.raises(
        UsageError,
        match=r"^experiments\.compare: windows= is given twice \(from the command line\)$",
    ):
        parse_args("experiments.compare", compare.DEFAULTS, ["windows=1", "windows=2"])


def test_compare_refuses_a_bad_fault_value_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = [f"out_dir={tmp_path / 'run'}", "agents=none", "sim.fault_copy_fail_prob=2"]
    assert main_guard(lambda: compare.main(argv)) == 2
    err = capsys.readouterr().err.strip()
    assert "sim.fault_copy_fail_prob must be a number in [0, 1], got 2.0" in err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["sim.fault_node_loss_s=30", "sim.fault_node_loss_nodes=5"],
            "sim.fault_node_loss_nodes[0] = 5 is not a node of the cluster (nodes 0..3) (from "
            "the command line)",
        ),
        (
            ["sim.fault_nic_down_s=3", "sim.fault_nic_down_nodes=9"],
            "sim.fault_nic_down_nodes[0] = 9 is not a node of the cluster (nodes 0..3) (from "
            "the command line)",
        ),
        (  # the other setting was named bare, fault_node_loss_nodes
            ["sim.fault_node_loss_s=30,40", "sim.fault_node_loss_nodes=0"],
            "sim.fault_node_loss_s has 2 times but sim.fault_node_loss_nodes has 1 node: one "
            "node for each time (from the command line)",
        ),
        (  # the times are the default's: the nodes were given
            ["sim.fault_node_loss_nodes=0"],
            "sim.fault_node_loss_s has 0 times but sim.fault_node_loss_nodes has 1 node: one "
            "node for each time (sim.fault_node_loss_nodes from the command line)",
        ),
        (
            ["sim.model_versions=a,b"],
            "sim.model_versions names 2 versions for a cluster of 4 nodes; give one per node "
            "(from the command line)",
        ),
    ],
)
def test_compare_and_reproduce_say_a_bad_sim_option_came_from_the_command_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """As ``evaluate`` says the same values: the ``sim.`` option named as typed and
    where it came from (compare and reproduce said no origin)."""
    from experiments import reproduce

    for module in (compare, reproduce):
        argv = [f"out_dir={tmp_path / 'run'}", *args]
        if module is compare:
            argv.append("agents=none")
        assert main_guard(lambda: module.main(argv)) == 2  # noqa: B023 (called at once)
        said = f"error: experiments.{module.__name__.rpartition('.')[2]}: {message}\n"
        assert capsys.readouterr().err == said
        assert not (tmp_path / "run").exists()


def test_a_command_says_each_setting_warning_once(capsys: pytest.CaptureFixture[str]) -> None:
    """Each SimConfig a command builds checks its settings again, and any filter change
    (a ``catch_warnings`` block: ours, torch's, SB3's) wipes Python's once-per-place
    record, so ``train`` said the same line two or three times. Three configs built
    with Python told to say every warning: two distinct lines, each once; the next
    command says its own again."""
    import warnings

    slow = (
        "warning: sim.fault_copy_slowdown=2.0 does nothing while sim.fault_copy_slow_prob "
        "is 0.0 (the share of copies it slows)"
    )
    down = (
        "warning: sim.fault_node_down_s=30.0 does nothing while no node is lost "
        "(sim.fault_node_loss_s, sim.fault_node_loss_rate_per_s)"
    )

    def command() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            SimConfig(fault_copy_slowdown=2.0)
            SimConfig(fault_node_down_s=30.0)
            SimConfig(fault_copy_slowdown=2.0)

    assert main_guard(command) == 0
    assert capsys.readouterr().err.splitlines() == [slow, down]
    assert main_guard(command) == 0
    assert capsys.readouterr().err.splitlines() == [slow, down]


def _result(faults: dict[str, int]) -> WindowResult:
    ttft = np.array([1.0])
    summary = {
        "completed": 1,
        "warm_copies": 0,
        "warm_copies_landed": 0,
        "warm_copies_lost": 0,
        "warm_bytes": 0.0,
        "warm_hit_rate": 0.0,
        "warm_byte_hit_rate": 0.0,
        "warm_amplification": 0.0,
        "displaced_by_copies_blocks": 0,
        "busy_span_s": 0.0,  # no capacity metrics
        **faults,
    }
    return WindowResult("w", ttft, ttft, ttft, 10, 0, summary, {}, 0.1)


def test_rows_sum_the_fault_counts_and_the_table_shows_them() -> None:
    counts = [{"fault_node_losses": 1, "fault_rerouted_requests": 3}, {"fault_node_losses": 2}]
    row = summarize_windows([_result(c) for c in counts], "s", "w", "btb", SimConfig())
    assert (row["fault_node_losses"], row["fault_rerouted_requests"]) == (3, 3)
    plain = summarize_windows([_result({})], "s", "w", "btb", SimConfig())
    assert not any(key.startswith("fault_") for key in plain)
    for r in (row, plain):
        r.update(ttft_mean_reduction_pct=0.0, ttft_p95_reduction_pct=0.0)
    table = comparison_table([row], "cache_aware")
    assert "rerouted" in table.splitlines()[0] and "lost = node losses" in table
    assert "rerouted" not in comparison_table([plain], "cache_aware")


def test_route_warm_masks_a_down_node() -> None:
    from envs.route_warm import route_warm_masks
    from envs.sim import Simulator, setup_cluster
    from envs.sim.request import Request, Workload

    request = Request(0, "r0", 0.0, 512, 1, (1, 2))
    sim = Simulator(setup_cluster("70b_h100x4"), Workload("w", 256, [request]))
    n = sim.n_nodes
    before = route_warm_masks(sim, request)
    sim.nodes[2].down = True
    mask = route_warm_masks(sim, request)
    changed = np.flatnonzero(before != mask).tolist()
    assert changed == [2, n + 2 * 2 + 1]  # no routing there, no warm onto it
    assert mask[n + 2 * 2]  # "no warm" stays allowed
    sim.nodes[1].nic_down = 1
    changed = np.flatnonzero(mask != route_warm_masks(sim, request)).tolist()
    assert changed == [n + 2 * 1 + 1]  # a NIC down: no warm onto it; routing stays


def test_the_table_says_where_btb_tuned_found_no_tuned_thresholds() -> None:
    """tuned_rate is the share of windows that found their cell: 0.6 -> 40 %."""
    rows = []
    for policy, rate in (("btb_tuned", 0.6), ("mine", 0.0), ("tuned", 1.0)):
        row = summarize_windows([_result({})], "s", "w", policy, SimConfig())
        row.update(ttft_mean_reduction_pct=0.0, ttft_p95_reduction_pct=0.0, tuned_rate=rate)
        rows.append(row)
    lines = comparison_table(rows, "cache_aware").splitlines()
    assert [line.split(":")[0] for line in lines if "no tuned thresholds" in line] == [
        "btb_tuned",
        "mine",
    ]
    assert any(
        line.startswith("btb_tuned: no tuned thresholds for 40 % of the windows (")
        for line in lines
    )
    assert any(line.startswith("mine: no tuned thresholds for any window (") for line in lines)


def test_each_window_of_an_evaluation_meets_faults_of_its_own() -> None:
    """The same window three times: the random losses drawn (taken or skipped)
    follow each window position's stream, ``default_rng([seed, i])``; seeded with
    ``fault_seed`` alone (before 2026-12-05) every window drew the same."""
    from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

    small = BurstedSyntheticConfig(n_bursts=2, burst_requests=40, n_decoys=6, burst_window_s=4.0)
    window = synthetic_window(small, window=1)
    config = SimConfig(fault_node_loss_rate_per_s=0.05, fault_node_down_s=10.0)

    def drawn() -> list[int]:
        (run,) = evaluate_policies(["cache_aware"], "70b_h100x4", [window] * 3, config)
        summaries = [result.summary for result in run.windows]
        return [s["fault_node_losses"] + s["fault_node_losses_skipped"] for s in summaries]

    losses = drawn()
    assert len(set(losses)) > 1 and drawn() == losses
