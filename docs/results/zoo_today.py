"""The tables of ``zoo_today.md``: the headline recipe trained again on today's simulator.

    python docs/results/zoo_today.py

Reads, all 15 test windows of each family, evaluation seed 0, causal KV, greedy:
- ``zoo_today_route_warm.json``: ``improve_warm_step``'s lineage trained with the
  zoo's commands less ``sim.copy_landing_check=false``, under three pairs of seeds
  (:data:`SEEDS`), and the shipped ``improve_warm_step`` measured beside them;
- ``capacity_floor.json`` for the baselines, ``oracle_warm`` and the floors (the
  targets and the floor rule).

Prints the page's tables (``zoo_today.md`` holds them between its markers).
"""

from __future__ import annotations

import numpy as np
from capacity_floor_table import (
    FAMILIES,
    SETUPS,
    Rows,
    cells_table,
    merged_rows,
)

SHIPPED = "improve_warm_step"
SEEDS = ((4, 0), (0, 1), (1, 2))
"""(``improve_spare_no1s``'s seed, ``improve_warm_reference``'s seed) of each
lineage; the first pair is the recipes' own."""
TODAY = tuple(f"improve_warm_step_today_{a}_{b}" for a, b in SEEDS)
SAMPLED = "_stochastic"
"""The suffix of an agent's rows with its actions sampled (else greedy)."""
STATS = ("ttft_mean_s", "ttft_p95_s")
BEGIN, END = "<!-- zoo_today.py: begin -->", "<!-- zoo_today.py: end -->"


def load() -> Rows:
    """capacity_floor.json's rows with zoo_today_route_warm.json's over them."""
    return merged_rows("capacity_floor.json", "zoo_today_route_warm.json")


def seeds_mean(rows: Rows) -> Rows:
    """``rows`` with two more agents, ``today_mean`` and ``today_mean_stochastic``:
    each statistic averaged over the three lineages, greedy or sampled (the figure
    the issue's targets are read against)."""
    out = dict(rows)
    for setup in SETUPS:
        for family in FAMILIES:
            for how in ("", SAMPLED):
                got = [rows[(setup, family, name + how)] for name in TODAY]
                out[(setup, family, "today_mean" + how)] = {
                    key: float(np.mean([r[key] for r in got])) for key in STATS
                }
    return out


def figures_table(rows: Rows) -> list[str]:
    """The greedy figures, the seeds' mean read from :func:`seeds_mean`'s rows."""
    lines = [
        "| setup | family | shipped mean / p95 (s) | today, 3 seeds: mean (s) ± std "
        "| today: p95 (s) ± std | today vs shipped: mean / p95 | oracle_warm mean (s) |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for setup in SETUPS:
        for family in FAMILIES:
            shipped = rows[(setup, family, SHIPPED)]
            mean = rows[(setup, family, "today_mean")]
            spread = [
                f"{mean[key]:.4g} ± "
                f"{100 * np.std([rows[(setup, family, n)][key] for n in TODAY]) / mean[key]:.1f} %"
                for key in STATS
            ]
            change = " / ".join(f"{100 * (mean[key] / shipped[key] - 1):+.1f} %" for key in STATS)
            lines.append(
                f"| {setup} | {family} | {shipped['ttft_mean_s']:.4g} / "
                f"{shipped['ttft_p95_s']:.4g} | {spread[0]} | {spread[1]} | {change} "
                f"| {rows[(setup, family, 'oracle_warm')]['ttft_mean_s']:.4g} |"
            )
    return lines


def render() -> str:
    rows = seeds_mean(load())
    labels = {SHIPPED: "shipped `improve_warm_step`"}
    labels |= {name: f"today, seeds {a} / {b}" for name, (a, b) in zip(TODAY, SEEDS)}
    labels["today_mean"] = "today, the 3 seeds' mean"
    sampled = {name + SAMPLED: f"{label}, sampled" for name, label in labels.items()}
    lines = [BEGIN, "", *figures_table(rows), "", *cells_table(rows, labels | sampled)]
    return "\n".join([*lines, "", END])


if __name__ == "__main__":
    print(render())
