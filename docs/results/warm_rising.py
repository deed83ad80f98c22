"""Warm rounds that measure and warm on ``rising_load`` only, from today's
``improve_spare_no1s``: ``warm_rising.md``.

    python docs/results/warm_rising.py RUNS          # evaluate, write the JSON and the page
    python docs/results/warm_rising.py rounds RUNS   # the runs' rounds again, test rows kept
    python docs/results/warm_rising.py later PROBE RUNS  # a LATER_TESTED probe's test rows again
    python docs/results/warm_rising.py kept20 RUNS   # every kept agent on all 20 validation windows
    python docs/results/warm_rising.py               # the page again from the JSON

RUNS holds, for S = 0, 1, 2, runs of ``python -m experiments.train
+experiment=improve_warm_anchored seed=S`` (from the shipped ``improve_spare_no1s``;
the recipe since 2026-12-07 is ``rising``'s):
- ``RUNS/variant_sS``: with ``improvement.families=[synthetic,rising,mixed]`` and
  ``improvement.anchor_families=[synthetic1s]`` (the variant tried on ``rising``
  only, every family but the 1 s bursts measured);
- ``RUNS/rising_sS``: the recipe as it is;
- ``RUNS/gain0_sS``: with ``improvement.warm_variant_gain=0``;
- later probes of the recipe, validation (:data:`LATER_PROBES`; ``anchors`` and
  ``val20``, :data:`LATER_TESTED`, on test too):
  ``RUNS/pool1_sS`` with ``improvement.pool_seeds=[1]``, ``RUNS/hold_sS`` with
  ``improvement.hold_s=0.05 improvement.min_gain_s=0.1
  improvement.states_per_window=24``, ``RUNS/anchors_sS`` with
  ``improvement.anchor_per_window=4000``, ``RUNS/own_sS`` with
  ``improvement.warm_variant=false``, ``RUNS/lr1e4_sS`` with
  ``improvement.learning_rate=0.0001``, ``RUNS/agree_sS`` with
  ``improvement.agreeing=start``, ``RUNS/ownagree_sS`` with
  ``improvement.agreeing=start improvement.warm_variant=false``, ``RUNS/val20_sS``
  with ``workload.val_windows=null`` (every round scored on all 20 validation
  windows, not 8).

Measures the ``rising_sS``, ``anchors_sS`` and ``val20_sS`` agents on all 15 test
windows of each family and setup, greedy and with their actions sampled (causal KV,
evaluation seed 0), and keeps each run's rounds (``spare_lineage_today.compact``). The start (the
``improve_warm_anchored`` shipped until then) and ``improve_spare`` are
``spare_lineage_today.json``'s rows; the baselines, ``oracle_warm`` and the floors
``capacity_floor.json``'s. The ``rising`` seed with the best kept validation score
is ``agents/zoo/improve_warm_anchored`` (:func:`shipped_rows`). ``kept20`` scores
every run's kept agent, where it is not the start, on all 20 validation windows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from capacity_floor_table import FAMILIES, HERE, SETUPS, Rows, block, publish, refuse_missing
from spare_lineage_today import (
    ANCHORED,
    SAMPLED,
    SEEDS,
    SPREAD_HEAD,
    as_rows,
    best_seed,
    cell_columns,
    improvement,
    measured_on_test,
    pct,
    seeded,
    shipped,
    spread_cells,
)
from spare_lineage_today import OUT as LINEAGE
from spare_lineage_today import shipped_rows as lineage_shipped_rows

from envs.files import write_json_atomic

PROBES = ("variant", "rising", "gain0")
"""The changes of the recipe, as the runs' folder names start (``gain0``: the shipped
recipe with ``improvement.warm_variant_gain=0``, tried after it shipped)."""
TESTED = "rising"
"""The probe whose agents are measured on test."""
LATER_SEEDS = (3, 4)
"""More seeds of :data:`TESTED`, run after it shipped: validation only, to say how
often the recipe beats its start (not candidates for the zoo)."""
LATER_PROBES = ("pool1", "hold", "anchors", "own", "lr1e4", "agree", "ownagree", "val20")
"""Changes of the shipped recipe tried later (validation, seeds 0-2): more train
windows (the workload's train windows at seed 1 too), more and shorter decisions
measured, 4,000 of a window's decisions among its anchors instead of 1,500, no warm
variant (a fit that teaches the agent its own decisions), the fits at a third
of the learning rate, and (later that evening) the labels the policy already
chooses fitted by the KL divergence from it, with the variant and without, and the
recipe as it is with its rounds scored on all 20 validation windows (``val20``:
its scores are not comparable with the others', which are on 8)."""
VAL20 = "val20"
"""The later probe whose rounds are scored on all 20 validation windows."""
LATER_TESTED = ("anchors", VAL20)
"""The later probes measured on test, each by a rule set before its results were
all known: ``anchors``'s kept validation scores beat :data:`TESTED`'s on their mean
with at least as many seeds improved (the rule set after its seeds 0 and 1 had
finished, while seed 2 ran); ``val20`` keeps a round other than the start at one
seed at least (the rule set before its runs)."""
ROUND_FAMILIES = ("synthetic", "synthetic1s", "rising", "mixed")
OUT = HERE / "warm_rising.json"
PAGE = HERE / "warm_rising.md"


def run_folders() -> list[str]:
    """Every run's folder in RUNS (the tested probe's later seeds, then the later probes)."""
    folders = [seeded(p, s) for p in PROBES for s in SEEDS]
    folders += [seeded(TESTED, s) for s in LATER_SEEDS]
    return folders + [seeded(p, s) for p in LATER_PROBES for s in SEEDS]


def rounds_of(runs: Path) -> dict:
    return {folder: improvement(runs, folder) for folder in run_folders()}


def tested_folders(probes: tuple[str, ...] = (TESTED, *LATER_TESTED)) -> dict[str, str]:
    return {seeded(p, s): seeded(p, s) for p in probes for s in SEEDS}


def measure(runs: Path) -> dict:
    return {"improvement": rounds_of(runs), "rows": measured_on_test(runs, tested_folders())}


def measure_later(runs: Path, data: dict, probe: str) -> dict:
    """``data`` with ``probe``'s test rows (one of :data:`LATER_TESTED`) measured
    again, the others kept."""
    later = tested_folders((probe,))
    kept = [r for r in data["rows"] if r["policy"].removesuffix(SAMPLED) not in later]
    return {**data, "rows": kept + measured_on_test(runs, later)}


def recipe_config() -> Any:
    """``+experiment=improve_warm_anchored`` composed as ``experiments.train`` does."""
    from gated_overrides import config

    return config([f"+experiment={ANCHORED}"])


def scored_on(cfg: Any, model: Any, spec: Any, windows: list[Any]) -> tuple[float, dict]:
    """``model``'s validation score on ``windows`` as the rounds score it
    (``experiments.train.ValidationScore``) and its families' geometric means."""
    from experiments.train import ValidationScore

    scorer = ValidationScore(cfg, spec, windows, cfg.train.val_score)
    return float(scorer(model)), scorer.records[-1]["families_ttft_mean_s"]


def scored_on_all_validation(runs: Path, data: dict) -> dict:
    """Every run's kept agent that is not its start, scored on all 20 validation
    windows as :data:`VAL20`'s rounds are (:func:`scored_on`), with the sha256 of
    its ``policy.pth`` (two runs may keep the same weights)."""
    import hashlib
    import zipfile

    from agents.algorithms import load_agent
    from experiments.config import window_pool_of

    cfg = recipe_config()
    windows = window_pool_of(cfg, "val", None)
    out = {}
    for folder, record in data["improvement"].items():
        if not record["best_round"]:
            continue
        score, _ = scored_on(cfg, *load_agent(runs / folder / "agent"), windows)
        weights = zipfile.ZipFile(runs / folder / "agent" / "model.zip").read("policy.pth")
        out[folder] = {"val20": score, "sha256": hashlib.sha256(weights).hexdigest()}
        print(folder, out[folder], flush=True)
    return out


def kept_table(data: dict) -> list[str]:
    """The kept agents on all 20 validation windows, best first."""
    kept = data["kept_on_20"]
    first = {}
    for folder, got in kept.items():
        first.setdefault(got["sha256"], folder)
    lines = [
        "| run | round kept | kept score (its own windows) | all 20 windows "
        "| the same weights as |",
        "|---|--:|--:|--:|---|",
    ]
    for folder in sorted(kept, key=lambda f: (kept[f]["val20"], f)):
        record = data["improvement"][folder]
        same = first[kept[folder]["sha256"]]
        lines.append(
            f"| `{folder}` | {record['best_round']} | {record['best_score']:.4f} "
            f"| {kept[folder]['val20']:.4f} | {f'`{same}`' if same != folder else ''} |"
        )
    return lines


def lineage() -> dict:
    return json.loads(LINEAGE.read_text())


def shipped_seed(data: dict) -> int:
    """The tested probe's seed whose kept validation score is best (the first on a
    tie): ``agents/zoo/improve_warm_anchored`` since later on 2026-12-07."""
    return best_seed(data["improvement"], lambda s: seeded(TESTED, s))


def shipped_rows(data: dict | None = None) -> Rows:
    """The zoo's route-and-warm agents' greedy rows by (setup, family, zoo name):
    spare_lineage_today.json's, but ``improve_warm_anchored``'s, which are this
    page's shipped seed's (``data``: the JSON's, by default). What target_cells.py
    counts and check_fresh.py measures again."""
    data = json.loads(OUT.read_text()) if data is None else data
    rows = {key: row for key, row in lineage_shipped_rows().items() if key[2] != ANCHORED}
    shipped = seeded(TESTED, shipped_seed(data))
    for row in data["rows"]:
        if row["policy"] == shipped:
            rows[(row["setup"], row["workload"], ANCHORED)] = row
    return rows


def other_seeds(data: dict) -> Rows:
    """The tested probe's seeds that are not shipped, greedy, named as
    ``improve_warm_anchored``'s training seeds (``improve_warm_anchored_s1``)."""
    names = {seeded(TESTED, s): seeded(ANCHORED, s) for s in SEEDS if s != shipped_seed(data)}
    return {
        (row["setup"], row["workload"], names[row["policy"]]): row
        for row in data["rows"]
        if row["policy"] in names
    }


def page_rows(data: dict, old: dict) -> Rows:
    """spare_lineage_today.json's rows (``old``: the shipped agents under their zoo
    names, the yardsticks) and this page's."""
    rows = as_rows(old)
    for row in data["rows"]:
        rows[(row["setup"], row["workload"], row["policy"])] = row
    return rows


def rounds_table(data: dict, old: dict) -> list[str]:
    """Each run's validation rounds, and its kept round's families against the start:
    the recipe as it was (spare_lineage_today.json's runs), each probe, then the
    tested probe's later seeds ("(later)")."""
    head = " / ".join(ROUND_FAMILIES)
    lines = [
        f"| run | start | rounds 1, 2, ... | kept | kept round against the start: {head} "
        "| windows the variant won, rounds 1, 2, ... |",
        "|---|--:|---|---|---|---|",
    ]
    records = {seeded(ANCHORED, s): old["improvement"][seeded(ANCHORED, s)] for s in SEEDS}
    records |= data["improvement"]
    runs = [(probe, s, "") for probe in (ANCHORED, *PROBES) for s in SEEDS]
    runs += [(TESTED, s, " (later)") for s in LATER_SEEDS]
    runs += [(probe, s, " (later)") for probe in LATER_PROBES for s in SEEDS]
    for probe, s, later in runs:
        record = records[seeded(probe, s)]
        scores = [r["score"] for r in record["rounds"]]
        kept = record["best_round"]
        start = record["rounds"][0]["families_ttft_mean_s"]
        at = record["rounds"][kept]["families_ttft_mean_s"]
        by = " / ".join(pct(at[f], start[f]) for f in ROUND_FAMILIES) if kept else "-"
        text = "the start" if kept == 0 else f"round {kept}, {record['best_score']:.4f}"
        rest = ", ".join(f"{v:.4f}" for v in scores[1:])
        won = ", ".join(str(r["warm_windows"]) for r in record["rounds"][1:])
        label = f"`{seeded(probe, s)}`{later}"
        lines.append(f"| {label} | {scores[0]:.4f} | {rest} | {text} | {by} | {won} |")
    return lines


def test_table(rows: Rows, probe: str) -> list[str]:
    """A tested probe's three seeds on test, mean ± std, against the shipped agent."""
    lines = [
        f"| setup | family | {SPREAD_HEAD} | the start (`{ANCHORED}` until then) mean / p95 "
        "| greedy mean against the start |",
        "|---|---|--:|--:|--:|--:|--:|--:|",
    ]
    names = [seeded(probe, s) for s in SEEDS]
    for setup in SETUPS:
        for family in FAMILIES:
            old = rows[(setup, family, ANCHORED)]
            mean = np.mean([rows[(setup, family, name)]["ttft_mean_s"] for name in names])
            lines.append(
                f"| {setup} | {family} | {spread_cells(rows, setup, family, names)} "
                f"| {old['ttft_mean_s']:.4g} / {old['ttft_p95_s']:.4g} "
                f"| {pct(mean, old['ttft_mean_s'])} |"
            )
    return lines


def cells_table(data: dict, rows: Rows, old: dict) -> list[str]:
    """The 39 cells each seed meets, greedy and sampled, beside the start's and
    ``improve_spare``'s."""
    lines = [
        "| agent | greedy (70b / qwen3-8b / glm-4.5) | sampled "
        "| feasible cells missed, greedy (over what they require) |",
        "|---|--:|--:|---|",
    ]
    names = [seeded(p, s) for p in (TESTED, *LATER_TESTED) for s in SEEDS]
    names += [ANCHORED, "improve_spare"]
    for name in names:
        sampled = seeded(ANCHORED, shipped(old)[ANCHORED]) if name == ANCHORED else name
        label = f"`{name}`" + {
            seeded(TESTED, shipped_seed(data)): f" (shipped as `{ANCHORED}`)",
            ANCHORED: " (the start: shipped until then)",
            "improve_spare": " (shipped)",
        }.get(name, "")
        lines.append(f"| {label} | {' | '.join(cell_columns(rows, name, sampled))} |")
    return lines


BEGIN, END = "<!-- warm_rising.py: begin -->", "<!-- warm_rising.py: end -->"


def render(data: dict) -> str:
    old = lineage()
    rows = page_rows(data, old)
    return block(
        BEGIN,
        END,
        [
            (
                "The rounds (validation score of each round, 8 windows, 70b_h100x4; "
                "`val20`'s on all 20)",
                rounds_table(data, old),
            ),
            (
                f"`{TESTED}`'s three seeds on test (all 15 windows a family and setup)",
                test_table(rows, TESTED),
            ),
            *(
                (f"`{probe}`'s three seeds on test (tried later)", test_table(rows, probe))
                for probe in LATER_TESTED
            ),
            ("Target cells met (39: 13 a setup)", cells_table(data, rows, old)),
            (
                "Every kept agent that is not its start, on all 20 validation windows "
                "(scored after `val20`'s test table; not used to ship anything)",
                kept_table(data),
            ),
        ],
    )


def main(args: list[str]) -> None:
    mode = args[0] if args and args[0] in ("rounds", "later", "kept20") else None
    if args:
        probe = args[1] if mode == "later" and len(args) == 3 else None
        if len(args) != 1 + (mode is not None) + (mode == "later") or (
            mode == "later" and probe not in LATER_TESTED
        ):
            print(__doc__, file=sys.stderr)
            raise SystemExit(2)
        runs = Path(args[-1])
        folders = list(tested_folders((probe,))) if probe else run_folders()
        inputs = (
            ["train.json"]
            if mode == "rounds"
            else ["agent/agent.json", "agent/model.zip", "train.json"]
        )
        refuse_missing([runs / folder / name for folder in folders for name in inputs])
        if mode == "kept20":
            data = json.loads(OUT.read_text())
            write_json_atomic(OUT, {**data, "kept_on_20": scored_on_all_validation(runs, data)})
        elif mode == "rounds":
            write_json_atomic(OUT, {**json.loads(OUT.read_text()), "improvement": rounds_of(runs)})
        elif probe:
            write_json_atomic(OUT, measure_later(runs, json.loads(OUT.read_text()), probe))
        else:
            write_json_atomic(OUT, measure(runs))
    publish(OUT, PAGE, BEGIN, END, render)


if __name__ == "__main__":
    main(sys.argv[1:])
