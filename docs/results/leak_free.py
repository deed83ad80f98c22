"""The tables of ``leak_free.md``: agents rebuilt on train windows of their own streams.

    python docs/results/leak_free.py

Reads, all 15 test windows of each family, evaluation seed 0, causal KV:
- ``leak_free_route_warm.json``: the baselines, ``oracle_warm``, the shipped
  ``improve_warm_step`` and its lineage rebuilt with ``train_streams=own``
  (``improve_warm_step_own``), greedy, on the three setups, measured on one commit;
  and the lineage rebuilt with the zoo's ``shared`` on the code of a later day
  (``improve_warm_step_shared``), whose rows of the others had not moved;
- ``capacity_floor.json`` for the floors (the floor rule of the targets);
- ``agents_vs_baselines_thresholds_leakfree_*.json`` (``ppo_thresholds``'s recipe,
  seeds 0-2, ``train_streams=own``) and ``agents_vs_baselines_thresholds_*.json``
  (the same recipe and seeds on the zoo's ``shared`` windows), 70b_h100x4.

Prints the page's tables (``leak_free.md`` holds them between its markers).
"""

from __future__ import annotations

import json

import numpy as np
from capacity_floor_table import (
    FAMILIES,
    HERE,
    SETUPS,
    Rows,
    cells_table,
    merged_rows,
)

AGENTS = ("improve_warm_step", "improve_warm_step_own", "improve_warm_step_shared")
BURSTS = FAMILIES[:4]
BEGIN, END = "<!-- leak_free.py: begin -->", "<!-- leak_free.py: end -->"


def route_warm_rows() -> Rows:
    """capacity_floor.json's rows with leak_free_route_warm.json's over them."""
    return merged_rows("capacity_floor.json", "leak_free_route_warm.json")


def route_warm_table(rows: Rows) -> list[str]:
    lines = [
        "| setup | family | shipped mean / p95 (s) | `own` rebuilt mean / p95 (s) "
        "| `shared` rebuilt mean / p95 (s) | `own` vs shipped: mean / p95 "
        "| `shared` vs shipped | `own` vs `shared` | oracle_warm mean (s) |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]

    def change(new: dict, old: dict) -> str:
        d = [100 * (new[s] / old[s] - 1) for s in ("ttft_mean_s", "ttft_p95_s")]
        return f"{d[0]:+.1f} % / {d[1]:+.1f} %"

    for setup in SETUPS:
        for family in FAMILIES:
            shipped, own, shared = (rows[(setup, family, agent)] for agent in AGENTS)
            figures = " | ".join(
                f"{r['ttft_mean_s']:.4g} / {r['ttft_p95_s']:.4g}" for r in (shipped, own, shared)
            )
            lines.append(
                f"| {setup} | {family} | {figures} | {change(own, shipped)} "
                f"| {change(shared, shipped)} | {change(own, shared)} "
                f"| {rows[(setup, family, 'oracle_warm')]['ttft_mean_s']:.4g} |"
            )
    return [*lines, "", *cells_table(rows, {agent: f"`{agent}`" for agent in AGENTS})]


def thresholds_rows(tag: str, family: str) -> dict[str, dict]:
    path = HERE / f"agents_vs_baselines_thresholds{tag}_{family}.json"
    return {row["policy"]: row for row in json.loads(path.read_text())["rows"]}


def thresholds_table() -> list[str]:
    lines = [
        "| family | `shared` (zoo layout): mean ± std (s) | vs btb_tuned | met "
        "| `own`: mean ± std (s) | vs btb_tuned | met |",
        "|---|--:|--:|---|--:|--:|---|",
    ]
    for family in BURSTS:
        parts = []
        for tag in ("", "_leakfree"):
            got = thresholds_rows(tag, family)
            tuned = got["btb_tuned"]
            names = [name for name in got if name.endswith("_det")]
            means = np.array([got[n]["ttft_mean_s"] for n in names])
            gains = [100 * (1 - got[n]["ttft_mean_s"] / tuned["ttft_mean_s"]) for n in names]
            p95 = [100 * (1 - got[n]["ttft_p95_s"] / tuned["ttft_p95_s"]) for n in names]
            met = "yes" if np.mean(gains) >= 5.0 and np.mean(p95) >= 0.0 else "no"
            parts.append(
                f"{means.mean():.4f} ± {means.std():.4f} | {np.mean(gains):+.1f} % | {met}"
            )
        lines.append(f"| {family} | {parts[0]} | {parts[1]} |")
    return lines


def render() -> str:
    lines = [BEGIN, "", "### Route and warm: `improve_warm_step`", ""]
    lines += route_warm_table(route_warm_rows())
    lines += ["", "### Thresholds: `ppo_thresholds`, 70b_h100x4, greedy, 3 seeds", ""]
    lines += thresholds_table()
    return "\n".join([*lines, "", END])


if __name__ == "__main__":
    print(render())
