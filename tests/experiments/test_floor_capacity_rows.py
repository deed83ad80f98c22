"""The ``floor_capacity`` row of comparisons: a mean and per-window means only,
its gap column, and how the table prints it."""

from __future__ import annotations

import json

import pytest

from envs.sim import SimConfig
from experiments.evaluation import (
    FLOOR,
    FLOOR_CAPACITY,
    add_floor_gaps,
    add_reductions,
    evaluate_policies,
)
from experiments.report import comparison_table
from tests.sim.simkit import Prompts, names, toy_cluster


def _row(policy: str, mean_s: float, p95_s: float | None) -> dict[str, object]:
    return {
        "setup": "s",
        "workload": "w",
        "causal_kv": True,
        "copy_model": "reference",
        "policy": policy,
        "ttft_mean_s": mean_s,
        "ttft_p95_s": p95_s,
    }


def test_capacity_gap_closed_by_hand() -> None:
    rows = [
        _row("cache_aware", 1.2, 6.0),
        _row("btb", 1.0, 5.0),
        _row("agent", 0.8, 4.0),  # (1.0 - 0.8) / (1.0 - 0.6) of the gap to the bound
        _row(FLOOR, 0.4, 3.0),
        _row(FLOOR_CAPACITY, 0.6, None),
    ]
    add_floor_gaps(rows)
    add_reductions(rows, "cache_aware")
    gaps = [r["floor_capacity_gap_closed_mean_pct"] for r in rows]
    assert gaps == pytest.approx([-50, 0, 50, 150, 100])
    capacity = rows[-1]
    assert capacity["floor_gap_closed_mean_pct"] == pytest.approx(100 * 0.4 / 0.6)
    assert capacity["floor_gap_closed_p95_pct"] is None
    assert capacity["ttft_mean_reduction_pct"] == pytest.approx(50)
    assert capacity["ttft_p95_reduction_pct"] is None


def test_no_capacity_gap_without_its_row() -> None:
    rows = [_row("btb", 1.0, 5.0), _row(FLOOR, 0.4, 3.0)]
    add_floor_gaps(rows)
    assert "floor_capacity_gap_closed_mean_pct" not in rows[0]


def test_the_row_from_a_comparison() -> None:
    # tests/sim/test_floor_capacity.py's burst: r0 computes a0..a3, four requests
    # wait for it at 0.010; the bound on the mean is 0.072 s on each window
    prompts = Prompts()
    prompts.add(0.0, names("a", 4))
    for k in range(4):
        prompts.add(0.010, [*names("a", 4), f"own{k}"])
    window = prompts.workload()
    runs = evaluate_policies(
        ["cache_aware", "btb"], toy_cluster(2), [window, window], SimConfig(), floor=True
    )
    rows = [run.row for run in runs]
    assert [r["policy"] for r in rows] == ["cache_aware", "btb", FLOOR, FLOOR_CAPACITY]
    capacity = rows[-1]
    assert capacity["ttft_mean_s"] == pytest.approx(0.072)
    assert capacity["ttft_mean_s_per_window"] == pytest.approx([0.072, 0.072])
    assert (capacity["windows"], capacity["requests"]) == (2, 10)
    assert all(capacity[f"ttft_{q}_s"] is None for q in ("p50", "p90", "p95", "p99", "max"))
    assert runs[-1].ttft_s.size == 0  # no per-request TTFTs to chart
    for row in rows[:2]:
        assert row["ttft_mean_s"] >= capacity["ttft_mean_s"] > rows[2]["ttft_mean_s"]
    json.dumps(capacity, allow_nan=False)
    line = next(
        x
        for x in comparison_table(rows, "cache_aware").splitlines()
        if x.startswith(FLOOR_CAPACITY)
    )
    assert line.split()[1:6] == ["10", "0.072", "-", "-", "-"]  # requests, mean, p50, p95, p99
    assert "cap gap%" in comparison_table(rows, "cache_aware")
