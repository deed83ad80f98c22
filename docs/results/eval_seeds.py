"""How the target cells move with the evaluation seed: ``eval_seeds.md``.

    python docs/results/eval_seeds.py EVAL_ROOT   # read the runs, write both files
    python docs/results/eval_seeds.py EVAL_ROOT POLICY ...  # only these rows anew
    python docs/results/eval_seeds.py             # the page again from the JSON

The evaluation seed draws only the routers' tie-breaks (``seed=``, the random
stream of each window is ``default_rng([seed, window])``); the windows and the
simulator are the same. Reads ``EVAL_ROOT/seed<K>/<setup>/<family>/results.json``
for K = 0, 1, 2, each written by

    AGENTS=improve_warm_step,improve_warm_anchored,ppo_thresholds,ppo_thresholds_eft,ppo_thresholds_spread
    python -m experiments.evaluate "checkpoint=[$AGENTS]" \\
        "policies=[oracle_warm,btb,btb_tuned,btb_pending,cache_aware,least_load,dynamo,llmd]" \\
        workload=FAMILY workload.eval_windows=15 setup=SETUP seed=K logger=none \\
        out_dir=EVAL_ROOT/seedK/SETUP/FAMILY

(all 15 test windows, causal KV, greedy agents; given POLICY names, only their rows
are taken from EVAL_ROOT and every other stored row is kept: an agent shipped anew,
run alone with ``"checkpoint=[NAME]" "policies=[]"``), keeps each row's mean and
p95 TTFT in ``eval_seeds.json`` and writes ``eval_seeds.md``: for each seed, the
route-and-warm cells each of :data:`AGENTS` meets (the rules of
``target_cells.py``, every target recomputed from that seed's baselines), the
thresholds cells each shipped thresholds agent meets (the rules of
``thresholds_cells.py``, the shipped agent alone rather than three training
seeds), and how far the baselines' means move between seeds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from capacity_floor_table import (
    BASELINES,
    BURSTS,
    FAMILIES,
    HERE,
    REPLACED,
    SETUPS,
    Rows,
    best_baseline,
)
from target_cells import cells
from thresholds_cells import required

SEEDS = (0, 1, 2)
AGENTS = ("improve_warm_step", "improve_warm_anchored")
"""The route-and-warm agents whose cells the page counts."""
THRESHOLDS = ("ppo_thresholds", "ppo_thresholds_eft", "ppo_thresholds_spread")
STATS = ("mean", "p95")
KEPT = ("setup", "workload", "policy", "ttft_mean_s", "ttft_p95_s")
OUT = HERE / "eval_seeds.json"


def read(root: Path, only: tuple[str, ...] = ()) -> dict[int, list[dict]]:
    """The runs' rows by seed; with ``only``, just those policies' rows (each must be
    in every run)."""
    runs: dict[int, list[dict]] = {}
    for seed in SEEDS:
        runs[seed] = []
        for setup in SETUPS:
            for family in FAMILIES:
                path = root / f"seed{seed}" / setup / family / "results.json"
                rows = json.loads(path.read_text())["rows"]
                if only:
                    rows = [row for row in rows if row["policy"] in only]
                    missing = set(only) - {row["policy"] for row in rows}
                    if missing:
                        sys.exit(f"error: {path} has no row of {sorted(missing)[0]!r}")
                for row in rows:
                    runs[seed].append({k: row[k] for k in KEPT})
    return runs


def replaced(stored: dict[int, list[dict]], new: dict[int, list[dict]]) -> dict[int, list[dict]]:
    """``stored`` with each row of ``new`` in place of the stored row of the same
    setup, family and policy (stored order kept)."""
    out = {}
    for seed, rows in stored.items():
        fresh = {(r["setup"], r["workload"], r["policy"]): r for r in new[seed]}
        kept = [fresh.pop((r["setup"], r["workload"], r["policy"]), r) for r in rows]
        if fresh:
            sys.exit(f"error: seed {seed}: no stored row for {sorted(fresh)[0]}")
        out[seed] = kept
    return out


def as_rows(kept: list[dict]) -> Rows:
    return {(r["setup"], r["workload"], r["policy"]): r for r in kept}


Cell = tuple[str, str, str, int]
"""(setup, family, statistic, which of its targets: 0 the baselines', 1 oracle_warm's)."""


def route_warm_cells(rows: Rows, agent: str) -> dict[Cell, tuple[bool, float, float, bool, str]]:
    """Every target cell (``target_cells.cells``): (met, ``agent``'s TTFT, what the
    cell requires, infeasible, the target in words)."""
    out = {}
    seen: dict[tuple[str, str, str], int] = {}
    for setup, family, stat, what, needs, ruled_out in cells(rows):
        k = seen.get((setup, family, stat), 0)
        seen[(setup, family, stat)] = k + 1
        got = rows[(setup, family, agent)][f"ttft_{stat}_s"]
        out[(setup, family, stat, k)] = (got <= needs, got, needs, ruled_out, what)
    return out


def thresholds_cells(rows: Rows, agent: str, ruled: bool) -> dict[tuple[str, str], bool]:
    """Each setup and burst family: both statistics within what ``thresholds_cells.required``
    asks (``ruled``: under the floor rule)."""
    out = {}
    for setup in SETUPS:
        for family in BURSTS:
            ok = True
            for stat in STATS:
                plain, floor_ruled, _ = required(rows, setup, family, stat)
                need = floor_ruled if ruled else plain
                ok = ok and rows[(setup, family, agent)][f"ttft_{stat}_s"] <= need
            out[(setup, family)] = ok
    return out


def route_warm_section(agent: str, by_seed: dict[int, Rows]) -> list[str]:
    """``agent``'s route-and-warm cells under each seed, and the cells whose verdict
    differs between the seeds."""
    cells = {seed: route_warm_cells(rows, agent) for seed, rows in by_seed.items()}
    lines = [
        "",
        f"## `{agent}`'s route-and-warm cells (39)",
        "",
        "| seed | cells met | infeasible | feasible cells missed |",
        "|--:|--:|--:|---|",
    ]
    for seed in SEEDS:
        missed = [
            f"{s} {f} {st} ({w}: {100 * (a / r - 1):+.1f} %)"
            for (s, f, st, _), (ok, a, r, out, w) in cells[seed].items()
            if not ok and not out
        ]
        met = sum(c[0] for c in cells[seed].values())
        infeasible = sum(c[3] for c in cells[seed].values())
        lines.append(f"| {seed} | {met} | {infeasible} | {'; '.join(missed)} |")
    flips = [key for key in cells[0] if len({cells[seed][key][0] for seed in SEEDS}) > 1]
    lines += [
        "",
        "Cells whose verdict differs between the seeds (agent against what it requires):",
        "",
    ]
    if not flips:
        lines.append("- none")
    for key in flips:
        parts = []
        for seed in SEEDS:
            _, got, required, _, what = cells[seed][key]
            parts.append(f"seed {seed} ({what}) {100 * (got / required - 1):+.1f} %")
        s, f, st, _ = key
        lines.append(f"- {s} {f} {st}: {', '.join(parts)}")
    return lines


def render(runs: dict[int, list[dict]]) -> str:
    by_seed = {seed: as_rows(kept) for seed, kept in runs.items()}
    lines = [
        "# Target cells under other evaluation seeds",
        "",
        REPLACED,
        "",
        "The evaluation seed draws only the routers' tie-breaks; the windows and the",
        "simulator are the same. Every published cell table uses seed 0. Here all 15",
        "test windows of each family are run again with seeds 1 and 2, and every",
        "target is recomputed from that seed's own baselines. Written by",
        "[eval_seeds.py](eval_seeds.py) from `eval_seeds.json`. dynamo's rows were",
        "measured again on 2026-12-06, after its active decode blocks came to count",
        "the decode steps run so far in the segment in progress",
        "([baselines.md](../baselines.md)): no target cell changed, and its largest",
        "spread between seeds grew from 3.9 % to 7.0 %. `improve_warm_step`'s rows",
        "were measured again on 2026-12-07 (beside `improve_warm_anchored`'s first),",
        "after the forecast came to count a copy in flight from when it lands",
        "(2026-12-06): its means moved by at most 0.7 % (70b's `mixed`), and no",
        "cell changed. The three thresholds agents' rows are those of the agents",
        "shipped on 2026-12-07 (`python docs/results/eval_seeds.py EVAL_ROOT AGENT`,",
        "each agent run alone): the spread agent meets the same cells as the one shipped",
        "before it; the eft agent 9 under each seed, where the one before it met 10 (it",
        "loses qwen3-8b's 60 s bursts); `ppo_thresholds` 8, 8 and 7, where the one before",
        "it met 7 under each.",
    ]
    for agent in AGENTS:
        lines += route_warm_section(agent, by_seed)
    lines += [
        "",
        "## The shipped thresholds agents' cells (3 setups x 4 burst families)",
        "",
        "Met: mean 5 % below btb_tuned and p95 no worse; under the floor rule, "
        "within 3 % of floor where the best baseline is within 10 % of it.",
        "",
        "| agent | seed 0 | seed 1 | seed 2 | under the floor rule: 0 / 1 / 2 |",
        "|---|--:|--:|--:|---|",
    ]
    moved = []
    for agent in THRESHOLDS:
        plain = [thresholds_cells(by_seed[s], agent, False) for s in SEEDS]
        ruled = [thresholds_cells(by_seed[s], agent, True) for s in SEEDS]
        counts = [sum(c.values()) for c in plain]
        lines.append(
            f"| `{agent}` | {counts[0]} | {counts[1]} | {counts[2]} | "
            f"{' / '.join(str(sum(c.values())) for c in ruled)} |"
        )
        for how, per_seed in (("plain", plain), ("floor rule", ruled)):
            for key in per_seed[0]:
                verdicts = [per_seed[k][key] for k in range(len(SEEDS))]
                if len(set(verdicts)) > 1:
                    said = ", ".join(
                        f"seed {seed} {'met' if v else 'missed'}"
                        for seed, v in zip(SEEDS, verdicts)
                    )
                    moved.append(f"- `{agent}` {key[0]} {key[1]} ({how}): {said}")
    lines += [
        "",
        "Of 12 cells each (an agent trained on one setup runs unchanged on the",
        "others). Cells whose verdict differs between the seeds:",
        "",
    ]
    lines += moved or ["- none"]
    lines += [
        "",
        "## How far the means move with the seed",
        "",
        "Largest spread (max / min - 1) of a policy's mean TTFT over the three seeds,",
        "over the 15 setup-family pairs, and where:",
        "",
        "| policy | largest spread | where | median spread |",
        "|---|--:|---|--:|",
    ]
    for policy in (*BASELINES, "oracle_warm", *AGENTS, *THRESHOLDS):
        spreads = []
        for setup in SETUPS:
            for family in FAMILIES:
                means = [by_seed[s][(setup, family, policy)]["ttft_mean_s"] for s in SEEDS]
                spreads.append((max(means) / min(means) - 1, f"{setup} {family}"))
        spreads.sort()
        top, where = spreads[-1]
        where = where if top > 0 else "-"
        median = spreads[len(spreads) // 2][0]
        lines.append(f"| {policy} | {100 * top:.1f} % | {where} | {100 * median:.2f} % |")
    best = {
        seed: {
            (s, f): best_baseline(by_seed[seed], s, f, "mean")[0] for s in SETUPS for f in FAMILIES
        }
        for seed in SEEDS
    }
    changed = [key for key in best[0] if len({best[s][key] for s in SEEDS}) > 1]
    lines += [
        "",
        f"The best baseline on the mean changes with the seed on {len(changed)} of 15 pairs"
        + (
            ": "
            + "; ".join(
                f"{s} {f} ({', '.join(best[x][(s, f)] for x in SEEDS)})" for s, f in changed
            )
            if changed
            else "."
        ),
    ]
    return "\n".join(lines) + "\n"


def stored_runs() -> dict[int, list[dict]]:
    return {int(k): v for k, v in json.loads(OUT.read_text()).items()}


def main(*args: str) -> None:
    if args:
        root, only = Path(args[0]), tuple(args[1:])
        runs = replaced(stored_runs(), read(root, only)) if only else read(root)
        OUT.write_text(json.dumps({str(k): v for k, v in runs.items()}, indent=1) + "\n")
    else:
        runs = stored_runs()
    page = HERE / "eval_seeds.md"
    page.write_text(render(runs))
    print(f"wrote {page}")


if __name__ == "__main__":
    if {"-h", "--help"} & set(sys.argv[1:]):
        print(__doc__)
        sys.exit(0)
    main(*sys.argv[1:])
