"""Comparison rows: the ``floor`` row and the share of btb's gap to it each policy
closes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from baselines.policy import Policy
from envs.sim import SimConfig
from envs.sim.request import Workload
from experiments.evaluation import (
    FLOOR,
    FLOOR_CAPACITY,
    add_floor_gaps,
    add_reductions,
    evaluate_policies,
)
from experiments.report import comparison_table
from tests.sim.simkit import small_window


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


def test_gap_closed_by_hand() -> None:
    rows = [
        _row("btb", 1.0, 5.0),
        _row("oracle_warm", 0.8, 4.0),  # (1.0 - 0.8) / (1.0 - 0.6) = 50 %; p95 1/3
        _row("cache_aware", 1.2, 5.0),  # 0.2 worse than btb: -50 %; p95 level: 0 %
        _row(FLOOR, 0.6, 2.0),
    ]
    add_floor_gaps(rows)
    assert [r["floor_gap_closed_mean_pct"] for r in rows] == pytest.approx([0, 50, -50, 100])
    assert [r["floor_gap_closed_p95_pct"] for r in rows] == pytest.approx([0, 100 / 3, 0, 100])


def test_no_gap_without_btb_or_floor() -> None:
    rows = [_row("cache_aware", 1.0, 2.0), _row(FLOOR, 0.5, 1.0)]
    add_floor_gaps(rows)
    assert rows[0]["floor_gap_closed_mean_pct"] is None


def test_no_gap_where_btb_sits_on_the_floor() -> None:
    # p95 equal but for rounding (qwen3-8b's 60 s bursts): no share of a 5e-15 s gap
    rows = [
        _row("btb", 1.0, 0.002841129436902179),
        _row("cache_aware", 1.2, 0.002841129436902180),
        _row(FLOOR, 0.6, 0.002841129436897213),
    ]
    add_floor_gaps(rows)
    assert [r["floor_gap_closed_p95_pct"] for r in rows] == [None, None, None]
    assert [r["floor_gap_closed_mean_pct"] for r in rows] == pytest.approx([0, -50, 100])


def test_evaluate_policies_adds_the_floor_row_last() -> None:
    window = small_window()
    windows = [window, small_window(seed=2)]
    runs = evaluate_policies(["cache_aware", "btb"], "70b_h100x4", windows, SimConfig(), floor=True)
    rows = [run.row for run in runs]
    assert [r["policy"] for r in rows] == ["cache_aware", "btb", FLOOR, FLOOR_CAPACITY]
    floor = rows[-2]
    assert floor["requests"] == rows[0]["requests"] == 2 * len(window.requests)
    for row in rows[:-2]:
        for stat in ("mean", "p50", "p95", "p99", "max"):
            assert row[f"ttft_{stat}_s"] >= floor[f"ttft_{stat}_s"]
    assert (rows[1]["floor_gap_closed_mean_pct"], floor["floor_gap_closed_mean_pct"]) == (0, 100)
    table = comparison_table(rows, "cache_aware")
    assert "floor gap%" in table and f"\n{FLOOR} " in table
    # without floor=True nothing changes
    plain = evaluate_policies(["cache_aware"], "70b_h100x4", [window], SimConfig())
    assert [run.row["policy"] for run in plain] == ["cache_aware"]
    assert "floor_gap_closed_mean_pct" not in plain[0].row


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


class _Counting(Policy):
    """Every request to node 0; its figures: the window's decisions and the
    window's number (1, 2, ...) as a rate; ``also`` added to them."""

    def __init__(self, also: dict[str, float] | None = None) -> None:
        self.also = also or {}
        self.runs = 0
        self.n = 0

    def reset(self, sim: Any) -> None:
        self.runs += 1
        self.n = 0

    def decide(self, sim: Any, request: Any) -> int:
        self.n += 1
        return 0

    def metrics(self) -> dict[str, float]:
        return {"decisions": self.n, "run_rate": float(self.runs), **self.also}


def test_a_policy_s_metrics_are_summed_and_its_rates_averaged_over_windows() -> None:
    first, second = small_window(), small_window(seed=2)
    shorter = Workload("shorter", second.block_tokens, second.requests[:20])
    windows = [first, shorter]
    sizes = [len(w.requests) for w in windows]  # 54 and 20: a mean weighted by them is not 1.5
    assert sizes == [54, 20]
    (run,) = evaluate_policies({"counting": _Counting()}, "70b_h100x4", windows, SimConfig())
    row = run.row
    assert row["decisions"] == float(sizes[0] + sizes[1]) and type(row["decisions"]) is float
    assert row["run_rate"] == 1.5  # (1 + 2) / 2: unweighted


def test_a_policy_s_metric_named_as_a_field_of_its_row_is_refused() -> None:
    """metricky's ttft_mean_s of 123 s silently replaced its measured mean (as 246 s,
    summed over two windows)."""
    policy = _Counting({"ttft_mean_s": 123.0})
    with pytest.raises(
        ValueError,
        match=r"^policy 'metricky': metrics\(\) returned 'ttft_mean_s', a field its result "
        r"row already has; name the policy's own figure otherwise$",
    ):
        evaluate_policies({"metricky": policy}, "70b_h100x4", [small_window()], SimConfig())


def test_percentiles_interpolate_linearly_between_sorted_values() -> None:
    """metrics.md: of 5 values, p95 lies between the 4th and the 5th."""
    from experiments.evaluation import ttft_stats

    stats = ttft_stats(np.array([14.0, 1.0, 3.0, 2.0, 4.0]))
    assert stats["ttft_p50_s"] == 3.0  # position 0.5 * 4 = 2: the 3rd
    assert stats["ttft_p90_s"] == pytest.approx(10.0)  # position 3.6: 4 + 0.6 * (14 - 4)
    assert stats["ttft_p95_s"] == pytest.approx(12.0)  # position 3.8: 4 + 0.8 * 10
    assert stats["ttft_p99_s"] == pytest.approx(13.6)  # position 3.96


def test_no_gap_share_where_btb_is_within_one_percent_of_the_bound() -> None:
    """btb 1.0 s over a bound of 0.995 s: a gap of 0.5 % of btb's mean, under the
    1 % threshold: no share (a policy 0.01 s worse would be -200 %). At 0.985 s
    (1.5 %) the share is worked out: (1.0 - 1.01) / (1.0 - 0.985) = -66.7 %."""
    rows = [_row("btb", 1.0, 5.0), _row("cache_aware", 1.01, 5.0), _row(FLOOR, 0.995, 2.0)]
    add_floor_gaps(rows)
    assert [r["floor_gap_closed_mean_pct"] for r in rows] == [None, None, None]
    assert [r["floor_gap_closed_p95_pct"] for r in rows] == pytest.approx([0, 0, 100])
    rows[2]["ttft_mean_s"] = 0.985
    add_floor_gaps(rows)
    assert [r["floor_gap_closed_mean_pct"] for r in rows] == pytest.approx([0, -200 / 3, 100])
    # the rows' own figures are left as they were
    assert [r["ttft_mean_s"] for r in rows] == [1.0, 1.01, 0.985]


def test_a_bound_a_hair_above_a_policy_prints_no_minus_zero() -> None:
    """floor_capacity 5e-15 s above cache_aware's mean (float noise): its reduction,
    -6e-12 %, prints 0.0; the stored rows keep both figures; btb, here level with
    cache_aware, has no gap to floor_capacity to share: cap gap% -."""
    mean, bound = 0.07309848331648539, 0.07309848331649012
    rows = [
        _row("cache_aware", mean, 0.2),
        _row("btb", mean, 0.2),
        _row(FLOOR, 0.05, 0.1),
        _row(FLOOR_CAPACITY, bound, None),
    ]
    for row in rows:
        row.update(requests=5, ttft_p50_s=None, ttft_p99_s=None)
    add_floor_gaps(rows)
    add_reductions(rows, "cache_aware")
    assert rows[3]["ttft_mean_s"] == bound and rows[0]["ttft_mean_s"] == mean
    assert rows[3]["ttft_mean_reduction_pct"] < 0  # stored as computed
    assert [r["floor_capacity_gap_closed_mean_pct"] for r in rows] == [None] * 4
    lines = comparison_table(rows, "cache_aware").splitlines()

    def cell(line: str, column: str) -> str:  # right-aligned under its header
        end = lines[0].index(column) + len(column)
        return line[:end].split()[-1]

    assert lines[5].startswith(FLOOR_CAPACITY)
    # floor: 1 - 0.05 / 0.0730985 = +31.6 %; the others round to zero
    assert [cell(line, "d mean%") for line in lines[2:6]] == ["0.0", "0.0", "+31.6", "0.0"]
    assert [cell(line, "cap gap%") for line in lines[2:6]] == ["-"] * 4
    assert "-0.0" not in "\n".join(lines)
