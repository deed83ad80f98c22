"""The results pages written from stored rows are what their scripts write now:
``docs/results/capacity_floor.md``, ``target_cells.md``, ``thresholds_cells.md``,
``eft_step.md``, ``eft_pull.md``, ``eval_seeds.md``,
``finetune_families_val20_test.md``, ``leak_check.md``, ``leak_free.md``,
``bc_lineage_today.md``, ``spare_lineage_today.md``, ``noise_floor.md`` and the agents' test tables
``agents_vs_baselines[_TAG]_table.md`` and ``agents_vs_baselines_thresholds[_TAG]_table.md``
(a rule or a row changed without regenerating them would leave a stale count in
the docs)."""

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
                "summarize_agent_evals",
                "evaluate_thresholds",
                "finetune_families_val20_table",
                "leak_check",
                "leak_free",
                "zoo_today",
                "check_fresh",
                "bc_lineage_today",
                "spare_lineage_today",
                "warm_rising",
                "noise_floor",
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
    # every seed: improve_warm_step meets 31 cells, improve_warm_anchored 32; the
    # latter's seed-0 rows are zoo_today.md's
    module = scripts["eval_seeds"]
    for agent, count in (("improve_warm_step", 31), ("improve_warm_anchored", 32)):
        for rows in runs.values():
            cells = module.route_warm_cells(module.as_rows(rows), agent)
            assert sum(c[0] for c in cells.values()) == count, agent
    shipped = json.loads((RESULTS / "zoo_today_anchored_command.json").read_text())["rows"]
    seed0 = module.as_rows(runs[0])
    for row in shipped:
        if row["policy"] == "improve_warm_anchored":
            got = seed0[(row["setup"], row["workload"], row["policy"])]
            assert (got["ttft_mean_s"], got["ttft_p95_s"]) == (
                row["ttft_mean_s"],
                row["ttft_p95_s"],
            )


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


def test_route_agents_test_tables_are_their_rows(scripts: dict[str, ModuleType]) -> None:
    """Each line of ``agents_vs_baselines[_all]_table.md`` is what
    ``summarize_agent_evals`` writes from that family's stored rows for that setup."""
    summarize = scripts["summarize_agent_evals"]
    tables = sorted(RESULTS.glob("agents_vs_baselines_*table.md"))
    tables = [t for t in tables if "thresholds" not in t.name]
    assert [t.name for t in tables] == [
        "agents_vs_baselines_all_table.md",
        "agents_vs_baselines_table.md",
    ]
    for table in tables:
        prefix = table.name.removesuffix("table.md")
        lines = table.read_text().splitlines()
        assert tuple(lines[:2]) == summarize.HEADER
        assert len(lines) == 2 + 5 * 3, table.name  # 5 families x 3 setups
        for line in lines[2:]:
            family, setup = (cell.strip() for cell in line.strip("|").split("|")[:2])
            rows = json.loads((RESULTS / f"{prefix}{family}.json").read_text())["rows"]
            got = {r["policy"]: r for r in rows if r["setup"] == setup}
            (agent,) = set(got) - {*summarize.BASELINES, "oracle_warm"}
            assert line == summarize.row(family, setup, got, agent), (table.name, line)


def test_thresholds_agents_test_tables_are_their_rows(scripts: dict[str, ModuleType]) -> None:
    """Each ``agents_vs_baselines_thresholds[_TAG]_table.md`` is what
    ``evaluate_thresholds`` writes from its families' stored rows: 3 training seeds,
    greedy and sampled, each family's two lines (the ``eft_qwen3_8b_trained`` table,
    written before the ``eft_pull_spread`` column, without it)."""
    thresholds = scripts["evaluate_thresholds"]
    tables = sorted(RESULTS.glob("agents_vs_baselines_thresholds*_table.md"))
    assert len(tables) == 19
    for table in tables:
        tag = table.name.removeprefix("agents_vs_baselines_thresholds").removesuffix("_table.md")
        lines = table.read_text().splitlines()
        setup = lines[0].split(",")[0].removeprefix("Setup ")
        shown = thresholds.SHOWN
        if "eft_pull_spread" not in lines[2]:
            shown = tuple(name for name in shown if name != "eft_pull_spread")
        expected = thresholds.header(setup, 3, shown)
        for family in thresholds.FAMILIES:
            path = RESULTS / f"agents_vs_baselines_thresholds{tag}_{family}.json"
            rows = json.loads(path.read_text())["rows"]
            assert {r["setup"] for r in rows} == {setup}
            got = {r["policy"]: r for r in rows}
            runs = [name.removesuffix("_det") for name in got if name.endswith("_det")]
            assert len(runs) == 3 and {f"{r}_stoch" for r in runs} <= set(got)
            expected += thresholds.family_lines(family, got, runs, shown)
        assert lines == expected, table.name


def test_finetune_families_val20_page_is_current(scripts: dict[str, ModuleType]) -> None:
    table = scripts["finetune_families_val20_table"]
    rows = table.stored_rows()
    new = json.loads((RESULTS / "finetune_families_val20_test.json").read_text())["rows"]
    rows.update({(row["workload"], row["policy"]): row for row in new})
    assert (RESULTS / "finetune_families_val20_test.md").read_text() == table.render(rows)


def test_each_shipped_thresholds_agent_is_its_recipe_s_seed(
    scripts: dict[str, ModuleType],
) -> None:
    """Each zoo thresholds agent, evaluated alone under evaluation seed 0
    (eval_seeds.json), gives its seed's rows in the stored test tables of its
    recipe's three seeds as they train today (thresholds_cells.RERUNS), on every
    setup they cover; capacity_floor.json's ``ppo_thresholds`` rows are the same
    agent's; check_fresh measures each shipped seed's rows again."""
    seed0 = scripts["eval_seeds"].as_rows(
        json.loads((RESULTS / "eval_seeds.json").read_text())["0"]
    )
    reruns = scripts["thresholds_cells"].RERUNS
    zoo = RESULTS.parents[1] / "agents" / "zoo"
    shipped = {  # each zoo agent's training seed, as its agent.json records it
        agent: json.loads((zoo / agent / "agent.json").read_text())["seed"] for agent, *_ in reruns
    }
    assert set(shipped) == {"ppo_thresholds", "ppo_thresholds_eft", "ppo_thresholds_spread"}
    fresh = scripts["check_fresh"]
    for agent, _, tag, setup in reruns:
        label = f"s{shipped[agent]}_det"
        for family in scripts["evaluate_thresholds"].FAMILIES:
            path = RESULTS / f"agents_vs_baselines_thresholds{tag}_{family}.json"
            (row,) = [r for r in json.loads(path.read_text())["rows"] if r["policy"] == label]
            got = seed0[(setup, family, agent)]
            assert (got["ttft_mean_s"], got["ttft_p95_s"]) == (
                row["ttft_mean_s"],
                row["ttft_p95_s"],
            ), (agent, setup, family)
    assert {agent for agent, *_ in fresh.SHIPPED_SEEDS} == set(shipped)
    for agent, setup, tag, label in fresh.SHIPPED_SEEDS:
        assert tag in {t for a, _, t, s in reruns if (a, s) == (agent, setup)}
        assert label == f"s{shipped[agent]}_det"
    stored = fresh.stored()
    for agent, setup, *_ in fresh.SHIPPED_SEEDS:
        assert all((setup, f, agent) in stored for f in fresh.FAMILIES)
    floor_rows = scripts["capacity_floor_table"].merged_rows("capacity_floor.json")
    for (setup, family, policy), row in floor_rows.items():
        if policy == "ppo_thresholds":
            got = seed0[(setup, family, policy)]
            assert (row["ttft_mean_s"], row["ttft_p95_s"]) == (
                got["ttft_mean_s"],
                got["ttft_p95_s"],
            )


def test_eval_seeds_replaces_only_the_rows_given(scripts: dict[str, ModuleType]) -> None:
    module = scripts["eval_seeds"]

    def row(policy: str, mean: float) -> dict:
        return {"setup": "s", "workload": "w", "policy": policy, "ttft_mean_s": mean}

    stored = {0: [row("a", 1.0), row("b", 2.0)], 1: [row("a", 3.0), row("b", 4.0)]}
    new = {0: [row("b", 5.0)], 1: [row("b", 6.0)]}
    assert module.replaced(stored, new) == {
        0: [row("a", 1.0), row("b", 5.0)],
        1: [row("a", 3.0), row("b", 6.0)],
    }
    with pytest.raises(SystemExit, match=r"seed 0: no stored row for \('s', 'w', 'c'\)"):
        module.replaced(stored, {0: [row("c", 1.0)], 1: []})


def test_leak_check_page_is_current(scripts: dict[str, ModuleType]) -> None:
    assert (RESULTS / "leak_check.md").read_text() == scripts["leak_check"].render()


def test_leak_check_windows_by_hand(scripts: dict[str, ModuleType]) -> None:
    """docs/workloads.md: the 60 s bursts train on windows 1, 4, 5, 6 and 14, so an
    agent trained on them alone (``scratch_route_warm``) has seen the bursts of the
    test windows among those of ``mixed`` (all five) and the 1 s bursts (1, 4, 14:
    5 and 6 are their train windows), and of none of its own family's; one whose
    lineage took train windows of all three (``improve_warm_step``, by
    ``bc_route_warm_spare``'s cloning and ``burst_families``) those of 7 of each one's
    15 (tests/workloads/test_workload_registry.py)."""
    leak = scripts["leak_check"]
    scratch = leak.train_windows_seen("scratch_route_warm")
    assert {i for f, i in scratch if f == "synthetic"} == {1, 4, 5, 6, 14}
    assert leak.leaked(scratch, "mixed") == {1, 4, 5, 6, 14}
    assert leak.leaked(scratch, "synthetic1s") == {1, 4, 14}
    assert leak.leaked(scratch, "synthetic") == set()
    assert leak.lineage("improve_warm_step")[-1] == "bc_route_warm_spare"
    step = leak.train_windows_seen("improve_warm_step")
    for family in leak.SIBLINGS:
        assert len(leak.test_indices(family)) == 15 and len(leak.leaked(step, family)) == 7
    # pooled by requests: windows of 1 and 3 requests with means 1 s and 3 s
    assert leak._pooled([1.0, 3.0], (1, 3), [0, 1]) == 2.5


def test_leak_free_page_is_current(scripts: dict[str, ModuleType]) -> None:
    """leak_free.md holds what leak_free.py prints; its shipped and baseline rows,
    measured with the rebuilt agent, are target_cells.md's stored rows to the last
    digit (one simulator for both agents), 135 of them; the shipped agent meets the
    31 cells target_cells.md counts, the lineage rebuilt on shared windows 30."""
    leak_free = scripts["leak_free"]
    table = scripts["capacity_floor_table"]
    agent_cells = table.agent_cells
    assert leak_free.render() in (RESULTS / "leak_free.md").read_text()
    stored = table.merged_rows("capacity_floor.json", "rollout_improvement_test.json")
    rows = json.loads((RESULTS / "leak_free_route_warm.json").read_text())["rows"]
    same = [r for r in rows if (r["setup"], r["workload"], r["policy"]) in stored]
    assert len(same) == 135 and len(rows) == 165  # (+15 a rebuild: own, and shared)
    for row in same:
        old = stored[(row["setup"], row["workload"], row["policy"])]
        assert (row["ttft_mean_s"], row["ttft_p95_s"]) == (old["ttft_mean_s"], old["ttft_p95_s"])
    merged = leak_free.route_warm_rows()
    found = [agent_cells(merged, s, "improve_warm_step") for s in leak_free.SETUPS]
    assert sum(f[0] for f in found) == 31 and sum(f[2] for f in found) == 6
    # the rebuild on the zoo's shared windows meets 70b's rising_load cell, which
    # the shipped agent misses, and 30 cells in all
    found = [agent_cells(merged, s, "improve_warm_step_shared") for s in leak_free.SETUPS]
    assert sum(f[0] for f in found) == 30 and sum(f[2] for f in found) == 6
    assert not any("rising_load" in missed for missed in found[0][3])


def test_zoo_today_page_is_current(scripts: dict[str, ModuleType]) -> None:
    """zoo_today.md holds what zoo_today.py prints; the shipped agent's rows, measured
    beside the three agents trained today, are target_cells.md's stored rows to the
    last digit; each of the three meets 29 cells and misses the same four feasible
    ones, the shipped agent 31."""
    today = scripts["zoo_today"]
    table = scripts["capacity_floor_table"]
    agent_cells = table.agent_cells
    assert today.render(today.seeds_mean(today.load())) in (RESULTS / "zoo_today.md").read_text()
    stored = table.merged_rows("rollout_improvement_test.json")
    rows = json.loads((RESULTS / "zoo_today_route_warm.json").read_text())["rows"]
    assert len(rows) == 120  # 15 rows each: the shipped agent and three seeds, greedy, sampled
    shipped = [r for r in rows if r["policy"] == "improve_warm_step"]
    assert len(shipped) == 15
    for row in shipped:
        old = stored[(row["setup"], row["workload"], row["policy"])]
        assert (row["ttft_mean_s"], row["ttft_p95_s"]) == (old["ttft_mean_s"], old["ttft_p95_s"])
    merged = today.seeds_mean(today.load())
    # the seeds' mean on 70b's 1 s bursts, by hand: (5.89174 + 5.72000 + 6.39095) / 3
    mean = merged[("70b_h100x4", "bursted_synthetic_1s", "today_mean")]["ttft_mean_s"]
    assert mean == pytest.approx(6.00090, abs=2e-5)
    agents = ("improve_warm_step", *today.TODAY, "today_mean")
    count = {
        agent + how: [agent_cells(merged, s, agent + how) for s in today.SETUPS]
        for agent in agents
        for how in ("", today.SAMPLED)
    }
    assert sum(f[0] for f in count["improve_warm_step"]) == 31
    # sampled: the shipped agent 30, the seeds 28, 28 and 29, their mean 28
    met = [sum(f[0] for f in count[agent + today.SAMPLED]) for agent in agents]
    assert met == [30, 28, 28, 29, 28]
    missed = set()
    for agent in (*today.TODAY, "today_mean"):
        assert sum(f[0] for f in count[agent]) == 29 and sum(f[2] for f in count[agent]) == 6
        missed.add(tuple(m.rsplit(" ", 2)[0] for f in count[agent] for m in f[3]))
    assert len(missed) == 1  # the same four cells (their margins differ)


def _three_seeds_block(today: ModuleType, render: str, data: str, names: tuple) -> dict:
    """Checks that zoo_today.md holds what ``today.RENDER`` prints and that
    ``zoo_today_DATA.json`` holds 15 rows of each of ``names``, greedy and sampled;
    the page's rows with the seeds' means."""
    merged = today.seeds_mean(today.load())
    assert getattr(today, render)(merged) in (RESULTS / "zoo_today.md").read_text()
    rows = json.loads((RESULTS / f"zoo_today_{data}.json").read_text())["rows"]
    assert len(rows) == 90  # 15 rows each: three seeds, greedy and sampled
    assert {r["policy"] for r in rows} == {
        name + how for name in names for how in ("", today.SAMPLED)
    }
    return merged


def test_zoo_today_anchored_block_is_current(scripts: dict[str, ModuleType]) -> None:
    """zoo_today.md's second block is what zoo_today.py prints; the three agents of
    ``improve_warm_anchored`` meet 32, 31 and 29 cells greedily (their mean 30),
    31, 31 and 30 sampled (their mean 30), and
    every one of them meets 70b's rising_load cell against oracle_warm, which the
    shipped agent and today's ``improve_warm_step`` miss."""
    today = scripts["zoo_today"]
    agent_cells = scripts["capacity_floor_table"].agent_cells
    merged = _three_seeds_block(today, "render_anchored", "anchored", today.ANCHORED)
    # the seeds' mean on 70b's rising_load, by hand: (0.061358 + 0.061499 + 0.061558) / 3
    mean = merged[("70b_h100x4", "rising_load", "anchored_mean")]["ttft_mean_s"]
    assert mean == pytest.approx(0.061472, abs=2e-6)

    def met(agent: str) -> int:
        return sum(agent_cells(merged, setup, agent)[0] for setup in today.SETUPS)

    assert [met(a) for a in (*today.ANCHORED, "anchored_mean")] == [32, 31, 29, 30]
    assert [met(a + today.SAMPLED) for a in (*today.ANCHORED, "anchored_mean")] == [31, 31, 30, 30]
    for agent in (*today.ANCHORED, "anchored_mean", "improve_warm_step", "today_mean"):
        missed = agent_cells(merged, "70b_h100x4", agent)[3]
        cell = any(m.startswith("rising_load mean (5 % below oracle_warm)") for m in missed)
        assert cell == (agent in ("improve_warm_step", "today_mean"))


def test_zoo_today_shipped_anchored_block_is_current(scripts: dict[str, ModuleType]) -> None:
    """zoo_today.md's third block is what zoo_today.py prints (the
    ``improve_warm_anchored`` shipped until 2026-12-07 was its recipe's seed 2); the
    three seeds meet 30, 31 and 32 cells greedily (their mean 31) and 30, 29 and 32
    sampled (their mean 30); the shipped one misses no feasible cell but 70b's 1 s
    bursts' mean, seed 0 misses 70b's rising_load cell by 0.1 %."""
    today = scripts["zoo_today"]
    agent_cells = scripts["capacity_floor_table"].agent_cells
    merged = _three_seeds_block(today, "render_command", "anchored_command", today.COMMAND)
    # the seeds' mean on 70b's rising_load, by hand: (0.062029 + 0.061592 + 0.061891) / 3
    mean = merged[("70b_h100x4", "rising_load", "command_mean")]["ttft_mean_s"]
    assert mean == pytest.approx(0.061837, abs=2e-6)

    def found(agent: str) -> list:
        return [agent_cells(merged, setup, agent) for setup in today.SETUPS]

    def met(agent: str) -> int:
        return sum(f[0] for f in found(agent))

    assert [met(a) for a in (*today.COMMAND, "command_mean")] == [30, 31, 32, 31]
    assert [met(a + today.SAMPLED) for a in (*today.COMMAND, "command_mean")] == [30, 29, 32, 30]
    shipped = found(today.COMMAND[-1])
    assert sum(f[2] for f in shipped) == 6
    assert [m for f in shipped for m in f[3]] == [
        "bursted_synthetic_1s mean (10 % below btb_pending) +4.1 %"
    ]
    assert "rising_load mean (5 % below oracle_warm) +0.1 %" in found(today.COMMAND[0])[0][3]


def test_bc_lineage_today_page_is_current(scripts: dict[str, ModuleType]) -> None:
    """bc_lineage_today.md holds what bc_lineage_today.py prints; its JSON holds every
    row it needs (70b: the clone and 12 runs, greedy and sampled, and 5 replaced
    agents; the other setups: the clone and the 4 shipped seeds), each family's rows
    over the same requests as capacity_floor.json's; each recipe's shipped seed is
    the best of its seeds on validation and the zoo's (agent.json's seed and
    timesteps, the kept step; train.json's validation record where the zoo keeps
    one), capacity_floor.json's finetune_families_long rows are that seed's, and
    check_fresh measures the five shipped agents' rows again."""
    module = scripts["bc_lineage_today"]
    table = scripts["capacity_floor_table"]
    data = json.loads((RESULTS / "bc_lineage_today.json").read_text())
    text = (RESULTS / "bc_lineage_today.md").read_text()
    assert module.render(data) in text
    rows = data["rows"]
    assert len(rows) == 5 * (2 * 13 + 5) + 2 * 5 * 5
    floor = table.merged_rows("capacity_floor.json")
    for row in rows:
        assert row["requests"] == floor[(row["setup"], row["workload"], "btb")]["requests"]
    assert "shipped" not in data  # derived from the validation records, not stored
    assert module.shipped(data) == {
        "finetune_route_warm": 1,
        "finetune_families": 0,
        "finetune_families_kl": 2,
        "finetune_families_long": 2,
    }
    zoo = Path(__file__).resolve().parents[1] / "agents" / "zoo"
    for recipe, seed in module.shipped(data).items():
        scores = [data["validation"][f"{recipe}_s{s}"]["best_score"] for s in module.SEEDS]
        assert scores[seed] == min(scores)  # the best seed on validation
        saved = json.loads((zoo / recipe / "agent.json").read_text())
        assert (saved["name"], saved["seed"]) == (recipe, seed)
        record = data["validation"][f"{recipe}_s{seed}"]
        assert saved["timesteps"] == record["best_step"]  # the kept checkpoint's
        if (zoo / recipe / "train.json").is_file():
            kept = json.loads((zoo / recipe / "train.json").read_text())["train"]["validation"]
            assert kept == record
    mine = {(r["setup"], r["workload"]): r for r in rows if r["policy"].endswith("long_s2")}
    stats = ("ttft_mean_s", "ttft_p95_s")
    for key, row in floor.items():
        if key[2] == "finetune_families_long":
            assert [row[k] for k in stats] == [mine[key[:2]][k] for k in stats]
    # by hand: finetune_route_warm's seeds on 70b's 60 s bursts, 0.680165, 0.666422
    # and 0.685015 s: mean 0.677201, population std 0.007874 (from the unrounded means)
    assert "| | `finetune_route_warm` | 0.677 ± 0.008 |" in text
    merged = module.as_rows(data)

    def met(agent: str, setups: tuple = (module.SETUP,)) -> int:
        return sum(table.agent_cells(merged, setup, agent)[0] for setup in setups)

    assert [met(f"finetune_route_warm_s{s}") for s in module.SEEDS] == [10, 11, 11]
    shipped = ["bc_route_warm", *(f"{r}_s{s}" for r, s in module.shipped(data).items())]
    assert [met(name, table.SETUPS) for name in shipped] == [24, 22, 21, 18, 20]
    stored = scripts["check_fresh"].stored()  # it measures the shipped agents' rows again
    for agent in ("bc_route_warm", *module.shipped(data)):
        assert all((s, f, agent) in stored for s in table.SETUPS for f in table.FAMILIES)


def test_spare_lineage_today_page_is_current(scripts: dict[str, ModuleType]) -> None:
    """spare_lineage_today.md holds what spare_lineage_today.py prints; its JSON holds
    every agent's rows, greedy and sampled, on the three setups, each family's over
    the same requests as capacity_floor.json's; the shipped clone is the seed whose
    improve_spare_no1s keeps the best validation score, the shipped anchored seed the
    best of its three (the first on a tie), and both are the zoo's; the zoo's
    improvement records are the runs'; target_cells.md counts these agents and
    check_fresh measures them again."""
    module = scripts["spare_lineage_today"]
    table = scripts["capacity_floor_table"]
    data = json.loads((RESULTS / "spare_lineage_today.json").read_text())
    assert module.render(data) in (RESULTS / "spare_lineage_today.md").read_text()
    rows = data["rows"]
    assert len(rows) == 3 * 5 * 2 * (1 + len(module.IMPROVED) + 3)
    # the lineage's other two seeds of improve_spare_no1s, greedy and sampled
    assert len(data["lineage_seed_rows"]) == 3 * 5 * 2 * 2
    assert {r["policy"] for r in data["lineage_seed_rows"]} == {
        f"improve_spare_no1s_clone{s}{suffix}"
        for s in module.SEEDS
        if s != module.shipped(data)["bc_route_warm_spare"]
        for suffix in ("", "_stochastic")
    }
    floor = table.merged_rows("capacity_floor.json")
    for row in [*rows, *data["lineage_seed_rows"]]:
        assert row["requests"] == floor[(row["setup"], row["workload"], "btb")]["requests"]
    assert len(data["validation_rows"]) == 3 * len(module.VAL_FAMILIES)
    chooser = [data["improvement"][module.from_clone(s)]["best_score"] for s in module.SEEDS]
    anchored = [
        data["improvement"][f"improve_warm_anchored_s{s}"]["best_score"] for s in module.SEEDS
    ]
    seeds = module.shipped(data)
    assert seeds == {
        "bc_route_warm_spare": chooser.index(min(chooser)),
        "improve_warm_anchored": anchored.index(min(anchored)),
    }
    # as the page states: clone seed 2 (its improve_spare_no1s 0.5544), anchored seed 0
    # (all three kept the start, 0.5433: the first on the tie)
    assert seeds == {"bc_route_warm_spare": 2, "improve_warm_anchored": 0}
    assert "shipped" not in data  # derived from the runs' records, not stored
    zoo = Path(__file__).resolve().parents[1] / "agents" / "zoo"
    for name in module.SHIPPED:
        if name == module.ANCHORED:
            continue  # trained again later that day: test_warm_rising_page_is_current
        saved = json.loads((zoo / name / "agent.json").read_text())
        assert saved["name"] == name
        if name in seeds:
            assert saved["seed"] == seeds[name]
        if (zoo / name / "train.json").is_file():
            kept = json.loads((zoo / name / "train.json").read_text())["train"]["improvement"]
            run = name if name in data["improvement"] else f"{name}_s{seeds[name]}"
            assert module.compact(kept) == data["improvement"][run], name
    # by hand: the clone's geometric mean is the fourth root of the product of its
    # four families' validation means
    by = {(r["policy"], r["workload"]): r["ttft_mean_s"] for r in data["validation_rows"]}
    means = [by[("bc_route_warm_spare_s2", f)] for f in module.VAL_FAMILIES]
    product = means[0] * means[1] * means[2] * means[3]
    assert module.geomean(means) == pytest.approx(product**0.25, rel=1e-12)
    cells = scripts["target_cells"].load()
    shipped = module.shipped_rows(data)
    shipped = {key: row for key, row in shipped.items() if key[2] != module.ANCHORED}
    for key, row in shipped.items():
        assert cells[key] is row or cells[key] == row
    stored = scripts["check_fresh"].stored()
    assert all(key in stored for key in shipped)


def test_warm_rising_page_is_current(scripts: dict[str, ModuleType]) -> None:
    """warm_rising.md holds what warm_rising.py prints; its JSON holds the tested
    probe's three seeds, greedy and sampled, on every setup and family over
    capacity_floor.json's requests; each run keeps its best round; a seed that kept
    its start measures as the agent it started from (the same weights: the
    improve_warm_anchored seeds of spare_lineage_today.json, which kept theirs); the
    seed with the best kept score is the zoo's improve_warm_anchored, whose rows
    target_cells.md counts and check_fresh measures again, beside the other two."""
    module = scripts["warm_rising"]
    table = scripts["capacity_floor_table"]
    data = json.loads((RESULTS / "warm_rising.json").read_text())
    assert module.render(data) in (RESULTS / "warm_rising.md").read_text()
    rows = data["rows"]
    assert len(rows) == 3 * 5 * 2 * len(module.SEEDS) * (1 + len(module.LATER_TESTED))
    floor = table.merged_rows("capacity_floor.json")
    for row in rows:
        assert row["requests"] == floor[(row["setup"], row["workload"], "btb")]["requests"]
    assert set(data["improvement"]) == {
        f"{probe}_s{s}" for probe in module.PROBES for s in module.SEEDS
    } | {f"{module.TESTED}_s{s}" for s in module.LATER_SEEDS} | {
        f"{probe}_s{s}" for probe in module.LATER_PROBES for s in module.SEEDS
    }
    assert list(data["improvement"]) == module.run_folders()
    for record in data["improvement"].values():
        scores = [r["score"] for r in record["rounds"]]
        assert record["best_score"] == min(scores) == scores[record["best_round"]]
    lineage = table.merged_rows("spare_lineage_today.json")
    probes = (module.TESTED, *module.LATER_TESTED)
    improved = data["improvement"]
    kept_start = [
        f"{p}_s{s}" for p in probes for s in module.SEEDS if not improved[f"{p}_s{s}"]["best_round"]
    ]
    assert kept_start == ["rising_s2", "anchors_s0", "val20_s1"]  # (2026-12-07)
    for row in rows:
        for run in kept_start:
            for suffix in ("", "_stochastic"):
                if row["policy"] == f"{run}{suffix}":
                    start = lineage[
                        (row["setup"], row["workload"], f"improve_warm_anchored_s0{suffix}")
                    ]
                    assert (row["ttft_mean_s"], row["ttft_p95_s"]) == (
                        start["ttft_mean_s"],
                        start["ttft_p95_s"],
                    )
    seed = module.shipped_seed(data)
    kept = [data["improvement"][f"rising_s{s}"]["best_score"] for s in module.SEEDS]
    assert kept[seed] == min(kept) and seed == 0  # 0.5379 (2026-12-07)
    zoo = Path(__file__).resolve().parents[1] / "agents" / "zoo" / "improve_warm_anchored"
    assert json.loads((zoo / "agent.json").read_text())["seed"] == seed
    record = json.loads((zoo / "train.json").read_text())["train"]["improvement"]
    assert scripts["spare_lineage_today"].compact(record) == data["improvement"][f"rising_s{seed}"]
    kept = data["kept_on_20"]  # every kept agent that is not its start, on the 20 windows
    assert set(kept) == {run for run, r in data["improvement"].items() if r["best_round"]}
    assert min(kept, key=lambda run: kept[run]["val20"]) == "val20_s2"  # 0.5620 (2026-12-07)
    for s in module.SEEDS:  # a val20 run's kept score is on the 20 windows
        if data["improvement"][f"val20_s{s}"]["best_round"]:
            assert kept[f"val20_s{s}"]["val20"] == data["improvement"][f"val20_s{s}"]["best_score"]
    cells = scripts["target_cells"].load()
    stored = scripts["check_fresh"].stored()
    shipped = module.shipped_rows(data)
    for row in rows:
        key = (row["setup"], row["workload"], "improve_warm_anchored")
        if row["policy"] == f"rising_s{seed}":
            assert shipped[key] == cells[key] == stored[key] == row
        elif row["policy"].startswith("rising") and not row["policy"].endswith("_stochastic"):
            other = row["policy"].replace("rising", "improve_warm_anchored")
            assert cells[(row["setup"], row["workload"], other)] == row


def test_noise_floor_page_is_current(scripts: dict[str, ModuleType]) -> None:
    """noise_floor.md holds what noise_floor.py prints; its start scores as the
    rounds of warm_rising.json start, and its shipped agent as the kept round of the
    zoo's improve_warm_anchored; each scale has its draws, and the rounds set
    beside them are every round of warm_rising.json's runs."""
    module = scripts["noise_floor"]
    data = json.loads((RESULTS / "noise_floor.json").read_text())
    assert module.render(data) in (RESULTS / "noise_floor.md").read_text()
    start, *draws = data["draws"]
    assert (start["scale"], start["seed"]) == (0.0, 0)
    assert [(d["scale"], d["seed"]) for d in draws] == [
        (scale, seed) for scale in module.SCALES for seed in range(module.DRAWS)
    ]
    rounds = json.loads((RESULTS / "warm_rising.json").read_text())["improvement"]
    assert start["val8"] == rounds["rising_s0"]["rounds"][0]["score"]
    zoo = Path(__file__).resolve().parents[1] / "agents" / "zoo" / "improve_warm_anchored"
    kept = json.loads((zoo / "train.json").read_text())["train"]["improvement"]["best_score"]
    assert data["shipped"]["val8"] == kept
    assert len(module.rounds(start["val8"])) == 5 * (len(rounds) - 3)
    # the shipped improve_warm_anchored is val20_s0's round 3, scored on the 20 windows
    assert data["shipped"]["val20"] == rounds["val20_s0"]["rounds"][3]["score"]
    below = {
        (split, scale): sum(d[split] < start[split] for d in draws if d["scale"] == scale)
        for split in module.SPLITS
        for scale in module.SCALES
    }  # the counts the page's prose cites (2026-12-07)
    assert below == {
        ("val8", 0.001): 3,
        ("val8", 0.01): 1,
        ("val20", 0.001): 0,
        ("val20", 0.01): 0,
    }
    # the three val20 runs start from the same weights, scored on all 20 windows
    assert {r["rounds"][0]["score"] for r in rounds.values()} == {start["val8"], start["val20"]}
