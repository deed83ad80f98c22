"""The results pages written from stored rows are what their scripts write now:
``docs/results/capacity_floor.md``, ``target_cells.md``, ``thresholds_cells.md``,
``eft_step.md``, ``eft_pull.md`` and ``eval_seeds.md`` (a rule or a row changed
without regenerating them would leave a stale count in the docs)."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"


@pytest.fixture
def scripts() -> Iterator[dict[str, ModuleType]]:
    """The scripts as modules (target_cells imports capacity_floor_table as its
    neighbour, as it does when run)."""
    sys.path.insert(0, str(RESULTS))
    try:
        yield {
            name: importlib.import_module(name)
            for name in (
                "capacity_floor_table",
                "target_cells",
                "thresholds_cells",
                "eft_step_table",
                "eft_pull_table",
                "eval_seeds",
            )
        }
    finally:
        sys.path.remove(str(RESULTS))


def test_capacity_floor_page_is_current(scripts: dict[str, ModuleType]) -> None:
    table = scripts["capacity_floor_table"]
    rows = json.loads((RESULTS / "capacity_floor.json").read_text())["rows"]
    written = (RESULTS / "capacity_floor.md").read_text()
    assert written == table.TEXT + table.render(rows) + "\n"


def test_eft_step_page_is_current(scripts: dict[str, ModuleType]) -> None:
    rows = json.loads((RESULTS / "eft_step_test.json").read_text())["rows"]
    assert (RESULTS / "eft_step.md").read_text() == scripts["eft_step_table"].table(rows)


def test_eft_pull_page_is_current(scripts: dict[str, ModuleType]) -> None:
    data = json.loads((RESULTS / "eft_pull_test.json").read_text())
    agent_rows = json.loads((RESULTS / "rollout_improvement_test.json").read_text())["rows"]
    written = (RESULTS / "eft_pull.md").read_text()
    assert written == scripts["eft_pull_table"].table(data, agent_rows)


def test_eval_seeds_page_is_current(scripts: dict[str, ModuleType]) -> None:
    stored = json.loads((RESULTS / "eval_seeds.json").read_text())
    runs = {int(seed): rows for seed, rows in stored.items()}
    assert (RESULTS / "eval_seeds.md").read_text() == scripts["eval_seeds"].render(runs)


def test_target_cells_page_is_current(scripts: dict[str, ModuleType]) -> None:
    cells = scripts["target_cells"]
    assert (RESULTS / "target_cells.md").read_text() == cells.render(cells.load())


def test_every_cell_has_a_target_and_the_count_is_the_issue_s(
    scripts: dict[str, ModuleType],
) -> None:
    # 3 setups x 5 families x (mean, p95), plus the mean 5 % below oracle_warm on
    # the 60 s bursts, rising_load and mixed
    cells = scripts["target_cells"].cells(scripts["target_cells"].load())
    assert len(cells) == 3 * 5 * 2 + 3 * 3
    assert {(c[0], c[1], c[2]) for c in cells} == {
        (s, f, stat)
        for s in ("70b_h100x4", "qwen3_8b_h100x4", "glm45_h100x4")
        for f in ("bursted_synthetic", "bursted_synthetic_1s", "rising_load", "mixed", "art_like")
        for stat in ("mean", "p95")
    }


def test_thresholds_cells_page_is_current(scripts: dict[str, ModuleType]) -> None:
    cells = scripts["thresholds_cells"]
    assert (RESULTS / "thresholds_cells.md").read_text() == cells.render(cells.baseline_rows())


def test_thresholds_floor_rule_by_hand(scripts: dict[str, ModuleType]) -> None:
    required = scripts["thresholds_cells"].required
    baselines = scripts["capacity_floor_table"].BASELINES

    def rows(mean: dict[str, float], p95: dict[str, float]) -> dict:
        return {
            ("s", "f", p): {"ttft_mean_s": mean.get(p, 9.0), "ttft_p95_s": p95.get(p, 9.0)}
            for p in (*baselines, "floor")
        }

    # the best baseline (btb, 1.08) sits 8 % above the floor (1.0): within 3 % of it,
    # 1.03, replaces 5 % below btb_tuned (2.0 -> 1.9); on the p95 the best (dynamo,
    # 1.2) is 20 % above its floor, so p95 no worse than btb_tuned's (1.5) stands
    r = rows(
        {"btb_tuned": 2.0, "btb": 1.08, "floor": 1.0},
        {"btb_tuned": 1.5, "dynamo": 1.2, "floor": 1.0},
    )
    plain, ruled, why = required(r, "s", "f", "mean")
    assert (plain, ruled) == pytest.approx((1.9, 1.03)) and why == "btb +8.0% of floor"
    assert required(r, "s", "f", "p95") == (1.5, 1.5, "")
    # exactly 10 % above the floor still counts as within it
    r = rows({"btb_tuned": 1.1, "floor": 1.0}, {})
    assert required(r, "s", "f", "mean")[1] == pytest.approx(1.03)
