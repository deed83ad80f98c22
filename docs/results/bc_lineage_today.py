"""The clone and its four fine-tuning recipes trained again in today's simulator:
``bc_lineage_today.md``.

    python docs/results/bc_lineage_today.py RUNS OLD   # evaluate, write the JSON and the page
    python docs/results/bc_lineage_today.py            # the page again from the JSON

RUNS holds the runs of the zoo's commands with no ``sim.copy_landing_check=false``:
``RUNS/bc_route_warm`` (``python -m experiments.train +experiment=bc_route_warm_general
out_dir=RUNS/bc_route_warm``) and ``RUNS/RECIPE_sS`` (``python -m experiments.train
+experiment=RECIPE seed=S out_dir=RUNS/RECIPE_sS``) for each recipe of :data:`RECIPES`
and S = 0, 1, 2, each fine-tuned from that clone (put in ``agents/zoo/bc_route_warm``).
OLD holds the agents they replace (the zoo's folders of the same names, trained before
2026-12-05). Measures, all 15 test windows of each family, causal KV, evaluation seed 0:
- on 70b_h100x4 (the recipes' setup), every new agent greedy and sampled, and every
  old agent greedy;
- on the two other setups, each recipe's shipped seed (the best on its validation
  windows) and the clone, greedy.
Keeps each row's windows, requests, mean and p95 TTFT in ``bc_lineage_today.json``; the baselines,
``oracle_warm`` and the floors come from ``capacity_floor.json`` (the targets and the
floor rule of ``target_cells.py``).
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch
from capacity_floor_table import (
    BASELINES,
    FAMILIES,
    HERE,
    SETUPS,
    Rows,
    agent_cells,
    block,
    publish,
    refuse_missing,
    yardstick_rows,
)
from evaluate_thresholds import rows_on_test_windows

from agents.adapter import AgentPolicy
from envs.files import write_json_atomic

CLONE = "bc_route_warm"
RECIPES = (
    "finetune_route_warm",
    "finetune_families",
    "finetune_families_kl",
    "finetune_families_long",
)
SEEDS = (0, 1, 2)
SETUP = "70b_h100x4"
SAMPLED = "_stochastic"
OLD = "_old"
"""The suffix of an old (replaced) agent's rows."""
KEPT = ("setup", "workload", "policy", "windows", "requests", "ttft_mean_s", "ttft_p95_s")
OUT = HERE / "bc_lineage_today.json"
PAGE = HERE / "bc_lineage_today.md"


def seeded(recipe: str, seed: int) -> str:
    return f"{recipe}_s{seed}"


def record(run: Path) -> Path:
    """A training run's record: its ``train.json``, or its ``results.json`` where the
    run evaluated on test windows at its end."""
    return run / "train.json" if (run / "train.json").is_file() else run / "results.json"


def shipped_seed(history: dict, recipe: str) -> int:
    """The recipe's seed with the best validation score (the lowest; the first on a
    tie), from the runs' validation records by run name."""
    return min(SEEDS, key=lambda s: history[seeded(recipe, s)]["best_score"])


def shipped(data: dict) -> dict[str, int]:
    """Each recipe's shipped seed, derived from the page's validation records
    (:func:`shipped_seed`)."""
    return {recipe: shipped_seed(data["validation"], recipe) for recipe in RECIPES}


def cell_rows(runs: Path, old: Path, shipped: dict[str, int], setup: str, family: str) -> list:
    """The rows of one setup and family (see the module's docstring)."""
    torch.set_num_threads(1)  # one decision's forward pass is tiny: more threads only wait
    clone = runs / CLONE / "agent"
    folders = {CLONE: clone}
    for recipe in RECIPES:
        for seed in SEEDS if setup == SETUP else (shipped[recipe],):
            folders[seeded(recipe, seed)] = runs / seeded(recipe, seed) / "agent"
    policies = {name: AgentPolicy.load(folder, name) for name, folder in folders.items()}
    if setup == SETUP:
        for name, folder in folders.items():
            policies[name + SAMPLED] = AgentPolicy.load(folder, name + SAMPLED, False)
        for name in (CLONE, *RECIPES):
            policies[name + OLD] = AgentPolicy.load(old / name, name + OLD)
    got = rows_on_test_windows(policies, setup, family)
    print(f"{setup} {family}: {len(got)} rows", flush=True)
    return [{key: row[key] for key in KEPT} for row in got]


def measure(runs: Path, old: Path) -> dict:
    """Every row the page needs (two setups and families at a time), and the runs'
    validation records."""
    history = {
        seeded(recipe, seed): json.loads(record(runs / seeded(recipe, seed)).read_text())["train"][
            "validation"
        ]
        for recipe in RECIPES
        for seed in SEEDS
    }
    seeds = shipped({"validation": history})
    cells = [(setup, family) for setup in SETUPS for family in FAMILIES]
    with ProcessPoolExecutor(2) as pool:
        done = pool.map(cell_rows, *zip(*[(runs, old, seeds, s, f) for s, f in cells]))
        rows = [row for got in done for row in got]
    return {"validation": history, "rows": rows}


def as_rows(data: dict) -> Rows:
    """The page's rows with capacity_floor.json's baselines, oracle_warm and floors."""
    rows = yardstick_rows()
    for row in data["rows"]:
        rows[(row["setup"], row["workload"], row["policy"])] = row
    return rows


def validation_table(data: dict) -> list[str]:
    kept = shipped(data)
    lines = [
        "| recipe | score | seed 0 | seed 1 | seed 2 | the clone (step 0) |",
        "|---|---|--:|--:|--:|--:|",
    ]
    for recipe in RECIPES:
        records = [data["validation"][seeded(recipe, s)] for s in SEEDS]
        cells = []
        for seed, record in zip(SEEDS, records):
            text = f"{record['best_score']:.4f} ({record['best_step']:,})"
            cells.append(f"**{text}**" if seed == kept[recipe] else text)
        start = records[0]["history"][0]["score"]
        lines.append(f"| `{recipe}` | {records[0]['score']} | {' | '.join(cells)} | {start:.4f} |")
    return lines


def spread(rows: Rows, family: str, names: list[str], key: str) -> str:
    values = np.array([rows[(SETUP, family, n)][key] for n in names])
    return f"{values.mean():.3f} ± {values.std():.3f}"


def test_table(data: dict, rows: Rows) -> list[str]:
    """70b's test windows: each recipe over its seeds (greedy and sampled), its shipped
    seed, the agent it replaces, and the yardsticks."""
    kept = shipped(data)
    lines = [
        "| family | agent | greedy mean (3 seeds) | greedy p95 | sampled mean | sampled p95 "
        "| shipped seed mean / p95 | replaced agent mean / p95 |",
        "|---|---|--:|--:|--:|--:|--:|--:|",
    ]

    def pair(name: str, family: str) -> str:
        row = rows[(SETUP, family, name)]
        return f"{row['ttft_mean_s']:.3f} / {row['ttft_p95_s']:.3f}"

    for family in FAMILIES:
        greedy, sampled = rows[(SETUP, family, CLONE)], rows[(SETUP, family, CLONE + SAMPLED)]
        lines.append(
            f"| {family} | `{CLONE}` (one seed) | {greedy['ttft_mean_s']:.3f} "
            f"| {greedy['ttft_p95_s']:.3f} | {sampled['ttft_mean_s']:.3f} "
            f"| {sampled['ttft_p95_s']:.3f} | {pair(CLONE, family)} | {pair(CLONE + OLD, family)} |"
        )
        for recipe in RECIPES:
            greedy = [seeded(recipe, s) for s in SEEDS]
            drawn = [n + SAMPLED for n in greedy]
            lines.append(
                f"| | `{recipe}` | {spread(rows, family, greedy, 'ttft_mean_s')} "
                f"| {spread(rows, family, greedy, 'ttft_p95_s')} "
                f"| {spread(rows, family, drawn, 'ttft_mean_s')} "
                f"| {spread(rows, family, drawn, 'ttft_p95_s')} "
                f"| {pair(seeded(recipe, kept[recipe]), family)} "
                f"| {pair(recipe + OLD, family)} |"
            )
        best = min(BASELINES, key=lambda p: rows[(SETUP, family, p)]["ttft_mean_s"])
        yard = "; ".join(
            f"{name} {pair(name, family)}"
            for name in dict.fromkeys(("btb_tuned", best, "oracle_warm", "floor"))
        )
        lines.append(f"| | yardsticks (mean / p95) | {yard} | | | | | |")
    return lines


def cells_70b(data: dict, rows: Rows) -> list[str]:
    """The 13 cells of 70b_h100x4 each agent meets, seed by seed."""
    kept = shipped(data)
    lines = [
        "| agent | greedy: seeds 0 / 1 / 2 | sampled: seeds 0 / 1 / 2 | replaced agent | "
        "feasible cells the shipped seed misses (over what they require) |",
        "|---|--:|--:|--:|---|",
    ]
    clone = agent_cells(rows, SETUP, CLONE)
    lines.append(
        f"| `{CLONE}` | {clone[0]} of {clone[1]} | "
        f"{agent_cells(rows, SETUP, CLONE + SAMPLED)[0]} | "
        f"{agent_cells(rows, SETUP, CLONE + OLD)[0]} | {'; '.join(clone[3]) or 'none'} |"
    )
    for recipe in RECIPES:
        greedy = [agent_cells(rows, SETUP, seeded(recipe, s)) for s in SEEDS]
        drawn = [agent_cells(rows, SETUP, seeded(recipe, s) + SAMPLED)[0] for s in SEEDS]
        missed = greedy[kept[recipe]][3]
        lines.append(
            f"| `{recipe}` | {' / '.join(str(g[0]) for g in greedy)} | "
            f"{' / '.join(map(str, drawn))} | {agent_cells(rows, SETUP, recipe + OLD)[0]} | "
            f"{'; '.join(missed) or 'none'} |"
        )
    return lines


def cells_all(data: dict, rows: Rows) -> list[str]:
    """The 39 cells of the three setups the clone and each shipped seed meet (greedy)."""
    kept = shipped(data)
    lines = ["| agent | cells met | infeasible missed | per setup (70b / qwen3-8b / glm-4.5) |"]
    lines.append("|---|--:|--:|---|")
    for name in (CLONE, *(seeded(r, kept[r]) for r in RECIPES)):
        found = [agent_cells(rows, setup, name) for setup in SETUPS]
        lines.append(
            f"| `{name}` | {sum(f[0] for f in found)} of {sum(f[1] for f in found)} "
            f"| {sum(f[2] for f in found)} | {' / '.join(f'{f[0]} of {f[1]}' for f in found)} |"
        )
    return lines


BEGIN, END = "<!-- bc_lineage_today.py: begin -->", "<!-- bc_lineage_today.py: end -->"


def render(data: dict) -> str:
    rows = as_rows(data)
    return block(
        BEGIN,
        END,
        [
            (
                "Validation (the score each run kept; its step in brackets; the shipped seed bold)",
                validation_table(data),
            ),
            (
                f"Test, {SETUP}: mean ± std (population) over the three seeds (TTFT in s)",
                test_table(data, rows),
            ),
            (f"Target cells met on {SETUP} (13 cells)", cells_70b(data, rows)),
            (
                "Target cells met on the three setups (39 cells; greedy, the shipped seeds)",
                cells_all(data, rows),
            ),
        ],
    )


def main(args: list[str]) -> None:
    if args:
        if len(args) != 2:
            print(__doc__, file=sys.stderr)
            raise SystemExit(2)
        runs, old = Path(args[0]), Path(args[1])
        trained = [runs / seeded(r, s) for r in RECIPES for s in SEEDS]
        agents = [runs / CLONE / "agent", *(run / "agent" for run in trained)]
        agents += [old / name for name in (CLONE, *RECIPES)]
        files = [folder / name for folder in agents for name in ("agent.json", "model.zip")]
        refuse_missing(files + [record(run) for run in trained])
        write_json_atomic(OUT, measure(runs, old))
    publish(OUT, PAGE, BEGIN, END, render)


if __name__ == "__main__":
    main(sys.argv[1:])
