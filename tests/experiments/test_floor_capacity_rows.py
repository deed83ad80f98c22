"""The ``floor_capacity`` row of a comparison: a mean and per-window means only, and
how the table prints it (its gaps by hand: test_comparison_rows.py)."""

from __future__ import annotations

import json

import pytest

from envs.sim import SimConfig
from experiments.evaluation import FLOOR, FLOOR_CAPACITY, evaluate_policies
from experiments.report import comparison_table
from tests.sim.simkit import Prompts, names, toy_cluster


def test_the_row_from_a_comparison() -> None:
    # tests/sim/test_floor_capacity.py's burst: r0 computes a0..a3, four requests
    # wait for it at 0.010; the bound on the mean is 0.0752 s on each window
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
    assert capacity["ttft_mean_s"] == pytest.approx(0.0752)
    assert capacity["ttft_mean_s_per_window"] == pytest.approx([0.0752, 0.0752])
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
    # requests, mean (to 3 significant digits of the shortest mean: 4 decimals), p50, p95, p99
    assert line.split()[1:6] == ["10", "0.0752", "-", "-", "-"]
    assert "cap gap%" in comparison_table(rows, "cache_aware")
