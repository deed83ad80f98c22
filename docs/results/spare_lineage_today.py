"""The spare-node clone and the agents improved from it, trained again in today's
simulator: ``spare_lineage_today.md``.

    python docs/results/spare_lineage_today.py RUNS   # evaluate, write the JSON and the page
    python docs/results/spare_lineage_today.py        # the page again from the JSON
    python docs/results/spare_lineage_today.py seeds RUNS  # add the lineage seeds' rows

RUNS holds the runs of the zoo's commands with no ``sim.copy_landing_check=false``:
- ``RUNS/bc_route_warm_spare_sS`` for S = 0, 1, 2 (``python -m experiments.train
  +experiment=bc_route_warm_spare seed=S out_dir=...``);
- ``RUNS/improve_spare_no1s_cloneS``: ``+experiment=improve_spare_no1s`` from each
  (``train.init_from=RUNS/bc_route_warm_spare_sS/agent``). The clone whose run scores
  best on validation is shipped, and that run as ``improve_spare_no1s``;
- ``RUNS/NAME`` for each other recipe of :data:`IMPROVED` (``python -m experiments.train
  +experiment=NAME out_dir=RUNS/NAME``), each started from the zoo folder its recipe
  names, that folder holding the new agent;
- ``RUNS/improve_warm_anchored_sS`` for S = 0, 1, 2, from the new ``improve_spare_no1s``.

Measures, causal KV, evaluation seed 0:
- the clones on 4 validation windows of each burst family, 70b_h100x4;
- on all 15 test windows of each family and setup, every new agent greedy and with its
  actions sampled.
``seeds RUNS`` measures the same way the ``improve_spare_no1s`` runs from the clones not
shipped (``RUNS/improve_spare_no1s_cloneS``) and adds their rows to the JSON as
``lineage_seed_rows``: the recipe over its three lineage seeds.
Keeps each row's windows, requests, mean and p95 TTFT in ``spare_lineage_today.json``
with the runs' improvement records. The agents they replace are
``rollout_improvement_test.json``'s rows (measured in today's simulator, greedy); the
baselines, ``oracle_warm`` and the floors are ``capacity_floor.json``'s.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch
from capacity_floor_table import (
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
from evaluate_thresholds import rows_on_split

from agents.adapter import AgentPolicy
from envs.files import write_json_atomic

CLONE = "bc_route_warm_spare"
IMPROVED = (
    "improve_spare",
    "improve_spare_all",
    "improve_spare_no1s",
    "improve_warm",
    "improve_warm_reference",
    "improve_warm_step",
)
ANCHORED = "improve_warm_anchored"
CHOOSER = "improve_spare_no1s"
"""The recipe run from each clone seed whose validation score picks the clone."""
SEEDS = (0, 1, 2)
SETUP = "70b_h100x4"
"""The setup the agents train and are chosen on."""
VAL_FAMILIES = FAMILIES[:4]
VAL_WINDOWS = 4
"""The clone's choice: these families' first validation windows, 70b."""
SAMPLED = "_stochastic"
SHIPPED = (CLONE, *IMPROVED, ANCHORED)
"""The zoo's names, in the tables' order."""
KEPT = ("setup", "workload", "policy", "windows", "requests", "ttft_mean_s", "ttft_p95_s")
OUT = HERE / "spare_lineage_today.json"
PAGE = HERE / "spare_lineage_today.md"


def seeded(name: str, seed: int) -> str:
    return f"{name}_s{seed}"


def from_clone(seed: int) -> str:
    """The run folder of :data:`CHOOSER` from clone seed ``seed``."""
    return f"{CHOOSER}_clone{seed}"


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def validation_rows(runs: Path, family: str) -> list[dict]:
    torch.set_num_threads(1)  # one decision's forward pass is tiny: more threads only wait
    policies = {
        seeded(CLONE, s): AgentPolicy.load(runs / seeded(CLONE, s) / "agent", seeded(CLONE, s))
        for s in SEEDS
    }
    got = rows_on_split(policies, SETUP, family, "val", VAL_WINDOWS)
    return [{key: row[key] for key in KEPT} for row in got]


def rows_on_test(runs: Path, folders: dict[str, str], setup: str, family: str) -> list[dict]:
    """Every new agent's rows on one setup and family's test windows, greedy and sampled."""
    torch.set_num_threads(1)
    policies = {}
    for name, folder in folders.items():
        policies[name] = AgentPolicy.load(runs / folder / "agent", name)
        policies[name + SAMPLED] = AgentPolicy.load(runs / folder / "agent", name + SAMPLED, False)
    got = rows_on_split(policies, setup, family, "test", None)
    print(f"{setup} {family}: {len(got)} rows", flush=True)
    return [{key: row[key] for key in KEPT} for row in got]


ROUND_KEYS = ("round", "score", "families_ttft_mean_s", "measured", "changed", "warm_windows")
"""What the page keeps of each round (the runs' ``train.json`` keeps every decision)."""


def compact(record: dict) -> dict:
    """A run's improvement record as the page keeps it: each round's validation score
    by family and its counts, and the round kept ({} for a run with no rounds)."""
    if not record:
        return {}
    return {
        "rounds": [{k: r[k] for k in ROUND_KEYS if k in r} for r in record["rounds"]],
        "best_round": record["best_round"],
        "best_score": record["best_score"],
    }


def improvement(runs: Path, folder: str) -> dict:
    """A run's rounds, from its ``train.json`` (:func:`compact`)."""
    record = json.loads((runs / folder / "train.json").read_text())["train"]
    return compact(record.get("improvement", {}))


def best_seed(improved: dict, run: Callable[[int], str]) -> int:
    """The seed of :data:`SEEDS` whose run (``run(seed)``, a key of ``improved``) keeps
    the best validation score, the first on a tie."""
    scores = [improved[run(s)]["best_score"] for s in SEEDS]
    return SEEDS[scores.index(min(scores))]


def shipped(data: dict) -> dict[str, int]:
    """This page's shipped seeds, by the rules it states: the clone whose
    :data:`CHOOSER` run keeps the best validation score, and the best of
    :data:`ANCHORED`'s seeds."""
    return {
        CLONE: best_seed(data["improvement"], from_clone),
        ANCHORED: best_seed(data["improvement"], lambda s: seeded(ANCHORED, s)),
    }


def measured_on_test(runs: Path, folders: dict[str, str]) -> list[dict]:
    """The agents of ``folders`` (name: run folder under ``runs``) on every setup and
    family's test windows, greedy and sampled, two processes at a time."""
    cells = [(setup, family) for setup in SETUPS for family in FAMILIES]
    with ProcessPoolExecutor(2) as pool:
        args = [(runs, folders, s, f) for s, f in cells]
        return [row for got in pool.map(rows_on_test, *zip(*args)) for row in got]


def measure(runs: Path) -> dict:
    with ProcessPoolExecutor(2) as pool:
        val = [row for got in pool.map(validation_rows, [runs] * 4, VAL_FAMILIES) for row in got]
    rounds = {from_clone(s): improvement(runs, from_clone(s)) for s in SEEDS}
    clone = best_seed(rounds, from_clone)
    folders = {name: name for name in IMPROVED} | {CLONE: seeded(CLONE, clone)}
    folders[CHOOSER] = from_clone(clone)
    rounds |= {name: improvement(runs, folder) for name, folder in folders.items()}
    rounds |= {seeded(ANCHORED, s): improvement(runs, seeded(ANCHORED, s)) for s in SEEDS}
    folders |= {seeded(ANCHORED, s): seeded(ANCHORED, s) for s in SEEDS}
    return {"validation_rows": val, "improvement": rounds, "rows": measured_on_test(runs, folders)}


SPREAD_HEAD = "greedy mean (s) | greedy p95 (s) | sampled mean (s) | sampled p95 (s)"
"""The heads of :func:`spread_cells`' four cells."""


def spread_cells(rows: Rows, setup: str, family: str, names: list[str]) -> str:
    """Four table cells: the mean ± std (as a share of the mean) of ``names``' rows on
    ``setup`` and ``family``, greedy and sampled, mean TTFT and p95."""
    cells = []
    for suffix in ("", SAMPLED):
        for key in ("ttft_mean_s", "ttft_p95_s"):
            v = np.array([rows[(setup, family, name + suffix)][key] for name in names])
            cells.append(f"{v.mean():.4g} ± {100 * v.std() / v.mean():.1f} %")
    return " | ".join(cells)


def lineage_seed_rows(runs: Path, data: dict) -> list[dict]:
    """The :data:`CHOOSER` runs from the clones not shipped, on every setup and family's
    test windows, greedy and sampled."""
    clone = shipped(data)[CLONE]
    return measured_on_test(runs, {from_clone(s): from_clone(s) for s in SEEDS if s != clone})


def lineage_names(data: dict) -> list[str]:
    """:data:`CHOOSER` at each clone seed, as the rows name it (the shipped one by its
    zoo name)."""
    clone = shipped(data)[CLONE]
    return [CHOOSER if s == clone else from_clone(s) for s in SEEDS]


def lineage_table(data: dict, rows: Rows) -> list[str]:
    """:data:`CHOOSER` over its three lineage seeds (each clone seed and its own run):
    mean ± std, greedy and sampled, and the cells each meets."""
    names = lineage_names(data)
    lines = [f"| setup | family | {SPREAD_HEAD} |", "|---|---|--:|--:|--:|--:|"]
    for setup in SETUPS:
        for family in FAMILIES:
            lines.append(f"| {setup} | {family} | {spread_cells(rows, setup, family, names)} |")
    lines += [
        "",
        "| clone seed | run | cells met, greedy (70b / qwen3-8b / glm-4.5) | sampled "
        "| feasible cells missed, greedy |",
        "|--:|---|--:|--:|---|",
    ]
    for seed, name in zip(SEEDS, names):
        lines.append(f"| {seed} | `{name}` | {' | '.join(cell_columns(rows, name))} |")
    return lines


def zoo_names(data: dict) -> dict[str, str]:
    """The zoo name of each row policy that measures a shipped agent (greedy)."""
    names = {name: name for name in (CLONE, *IMPROVED)}
    return names | {seeded(ANCHORED, shipped(data)[ANCHORED]): ANCHORED}


def shipped_rows(data: dict | None = None) -> Rows:
    """This page's shipped agents' greedy rows by (setup, family, zoo name) (``data``:
    the JSON's, by default). ``improve_warm_anchored``'s are those of the agent
    shipped until later on 2026-12-07; ``warm_rising.shipped_rows`` puts today's in
    their place for target_cells.py and check_fresh.py."""
    data = json.loads(OUT.read_text()) if data is None else data
    names = zoo_names(data)
    return {
        (row["setup"], row["workload"], names[row["policy"]]): row
        for row in data["rows"]
        if row["policy"] in names
    }


OLD = "_replaced"
"""The suffix of a replaced agent's rows on this page."""


def as_rows(data: dict) -> Rows:
    """The page's rows, the replaced agents' (``NAME_replaced``) and capacity_floor.json's
    baselines, oracle_warm and floors."""
    rows = yardstick_rows()
    for row in json.loads((HERE / "rollout_improvement_test.json").read_text())["rows"]:
        if row["policy"] in SHIPPED:
            rows[(row["setup"], row["workload"], row["policy"] + OLD)] = row
    for row in [*data["rows"], *data.get("lineage_seed_rows", [])]:
        rows[(row["setup"], row["workload"], row["policy"])] = row
    rows |= shipped_rows(data)
    return rows


def clone_table(data: dict) -> list[str]:
    by = {(r["policy"], r["workload"]): r["ttft_mean_s"] for r in data["validation_rows"]}
    head = " | ".join(VAL_FAMILIES)
    lines = [
        f"| seed | {head} | geometric mean | `{CHOOSER}` from it: kept |",
        "|--:|" + "--:|" * (len(VAL_FAMILIES) + 2),
    ]
    for s in SEEDS:
        values = [by[(seeded(CLONE, s), f)] for f in VAL_FAMILIES]
        chooser = data["improvement"][from_clone(s)]["best_score"]
        text = [f"{v:.4f}" for v in (*values, geomean(values), chooser)]
        if s == shipped(data)[CLONE]:
            text = [f"**{t}**" for t in text]
        lines.append(f"| {s} | {' | '.join(text)} |")
    return lines


def rounds_table(data: dict) -> list[str]:
    lines = ["| run | start | rounds 1, 2, ... | kept |", "|---|--:|---|---|"]
    names = [from_clone(s) for s in SEEDS] + [n for n in IMPROVED[:-1] if n != CHOOSER]
    names += [seeded(ANCHORED, s) for s in SEEDS]
    seeds = shipped(data)
    bold = (from_clone(seeds[CLONE]), seeded(ANCHORED, seeds[ANCHORED]))
    for name in names:
        record = data["improvement"][name]
        scores = [r["score"] for r in record["rounds"]]
        kept = record["best_round"]
        text = "the start" if kept == 0 else f"round {kept}, {record['best_score']:.4f}"
        label = f"`{name}`"
        if name in bold:
            label, text = f"**{label}**", f"**{text}**"
        rounds = ", ".join(f"{v:.4f}" for v in scores[1:])
        lines.append(f"| {label} | {scores[0]:.4f} | {rounds} | {text} |")
    return lines


def pct(new: float, old: float) -> str:
    return f"{100 * (new / old - 1):+.1f} %"


def means_table(rows: Rows) -> list[str]:
    """Each shipped agent's greedy mean TTFT, and its change from the agent it replaces."""
    names = [CLONE, "improve_spare_no1s", "improve_warm_step", ANCHORED]
    head = " | ".join(f"`{n}`" for n in names)
    lines = [f"| setup | family | {head} |", "|---|---|" + "--:|" * len(names)]
    for setup in SETUPS:
        for family in FAMILIES:
            cells = []
            for n in names:
                new, old = rows[(setup, family, n)], rows[(setup, family, n + OLD)]
                cells.append(
                    f"{new['ttft_mean_s']:.4g} ({pct(new['ttft_mean_s'], old['ttft_mean_s'])})"
                )
            lines.append(f"| {setup} | {family} | {' | '.join(cells)} |")
    return lines


def anchored_table(data: dict, rows: Rows) -> list[str]:
    """improve_warm_anchored over its three seeds: greedy and sampled, mean ± std."""
    lines = [
        f"| setup | family | {SPREAD_HEAD} | replaced agent mean / p95 |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    names = [seeded(ANCHORED, s) for s in SEEDS]
    for setup in SETUPS:
        for family in FAMILIES:
            old = rows[(setup, family, ANCHORED + OLD)]
            lines.append(
                f"| {setup} | {family} | {spread_cells(rows, setup, family, names)} "
                f"| {old['ttft_mean_s']:.4g} / {old['ttft_p95_s']:.4g} |"
            )
    return lines


def counted(rows: Rows, name: str) -> tuple[int, list[int], list[str]]:
    found = [agent_cells(rows, setup, name) for setup in SETUPS]
    missed = [f"{setup} {m}" for setup, f in zip(SETUPS, found) for m in f[3]]
    return sum(f[0] for f in found), [f[0] for f in found], missed


def cell_columns(rows: Rows, name: str, sampled: str | None = None) -> tuple[str, str, str]:
    """A cells table's columns for agent ``name``: the cells met greedy (with each
    setup's), sampled (the rows of ``sampled``, by default ``name``'s), and the
    feasible cells missed greedy."""
    met, per, missed = counted(rows, name)
    drawn = counted(rows, (sampled or name) + SAMPLED)[0]
    return f"{met} ({' / '.join(map(str, per))})", str(drawn), "; ".join(missed) or "none"


def cells_table(data: dict, rows: Rows) -> list[str]:
    """The 39 cells each new agent meets, greedy and sampled, and the replaced agent's."""
    lines = [
        "| agent | greedy (70b / qwen3-8b / glm-4.5) | sampled | replaced agent "
        "| feasible cells missed, greedy (over what they require) |",
        "|---|--:|--:|--:|---|",
    ]
    anchored = seeded(ANCHORED, shipped(data)[ANCHORED])
    for name in [CLONE, *IMPROVED, *(seeded(ANCHORED, s) for s in SEEDS)]:
        greedy, drawn, missed = cell_columns(rows, name)
        replaced = name if name in (CLONE, *IMPROVED) else ANCHORED
        old = counted(rows, replaced + OLD)[0]
        label = f"`{name}`" + (" (shipped until later that day)" if name == anchored else "")
        lines.append(f"| {label} | {greedy} | {drawn} | {old} | {missed} |")
    return lines


BEGIN, END = "<!-- spare_lineage_today.py: begin -->", "<!-- spare_lineage_today.py: end -->"


def render(data: dict) -> str:
    rows = as_rows(data)
    return block(
        BEGIN,
        END,
        [
            (
                f"The clone's seeds on validation ({SETUP}, {VAL_WINDOWS} windows a family, "
                f"mean TTFT in s), and `{CHOOSER}`'s run from each (the shipped clone bold)",
                clone_table(data),
            ),
            (
                "The rounds (validation score of each round, 8 windows; the shipped runs bold)",
                rounds_table(data),
            ),
            (
                "Test: mean TTFT (s), greedy, and the change from the agent each replaces",
                means_table(rows),
            ),
            (
                f"`{ANCHORED}`'s three seeds on test, against the agent it replaces",
                anchored_table(data, rows),
            ),
            ("Target cells met (39: 13 a setup)", cells_table(data, rows)),
            (
                f"`{CHOOSER}` over its three lineage seeds (each clone seed with its own "
                f"`{CHOOSER}` run; test, mean ± std)",
                lineage_table(data, rows),
            ),
        ],
    )


def main(args: list[str]) -> None:
    if args[:1] == ["seeds"] and len(args) == 2:
        runs = Path(args[1])
        data = json.loads(OUT.read_text())
        folders = [from_clone(s) for s in SEEDS if s != shipped(data)[CLONE]]
        inputs = ("agent/agent.json", "agent/model.zip")
        refuse_missing([runs / folder / name for folder in folders for name in inputs])
        data["lineage_seed_rows"] = lineage_seed_rows(runs, data)
        write_json_atomic(OUT, data)
    elif args:
        if len(args) != 1:
            print(__doc__, file=sys.stderr)
            raise SystemExit(2)
        runs = Path(args[0])
        folders = [seeded(CLONE, s) for s in SEEDS] + [from_clone(s) for s in SEEDS]
        folders += [name for name in IMPROVED if name != CHOOSER]
        folders += [seeded(ANCHORED, s) for s in SEEDS]
        inputs = ("agent/agent.json", "agent/model.zip", "train.json")
        refuse_missing([runs / folder / name for folder in folders for name in inputs])
        write_json_atomic(OUT, measure(runs))
    publish(OUT, PAGE, BEGIN, END, render)


if __name__ == "__main__":
    main(sys.argv[1:])
