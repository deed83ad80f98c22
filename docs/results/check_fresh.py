"""Are the stored results still what today's code gives? Re-measures a sample of them.

    python docs/results/check_fresh.py [FAMILY ...]

A numeric change to the simulator, the forecast or a router moves figures that the
results pages store; the pages' tests compare the pages with their stored rows,
not the rows with the code. This script runs again, on today's code, the rows
that need no training (all 15 test windows, evaluation seed 0, causal KV, greedy):
- the baselines and ``oracle_warm`` of ``capacity_floor.json`` on the three setups
  (the yardsticks of target_cells.md and thresholds_cells.md);
- the shipped route-and-warm agents of the spare-node lineage, ``bc_route_warm_spare``
  to ``improve_warm_anchored``, on the three setups (``spare_lineage_today.json``;
  ``improve_warm_anchored``'s from ``warm_rising.json``);
- the shipped seeds in the thresholds tables: ``ppo_thresholds`` (seed 1, 70b,
  ``agents_vs_baselines_thresholds_rerun1207_*``), ``ppo_thresholds_eft`` (seed 0, 70b,
  ``agents_vs_baselines_thresholds_eft_rerun1207_*``) and ``ppo_thresholds_spread`` (seed 0,
  qwen3-8b, ``agents_vs_baselines_thresholds_spread_qwen3_8b_rerun1206_*``);
- ``bc_route_warm`` and the shipped seed of each ``finetune_*`` recipe on the three
  setups (``bc_lineage_today.json``).
It prints every row that moved, with both figures, and exits 1 if any did (0 if
none). FAMILY limits it to some families (default: all five; 5-15 minutes on
2 cores). Rows of agents whose weights are not shipped (other training seeds) are
not checked: retrain them to measure them again.
"""

from __future__ import annotations

import json
import sys

import torch
from bc_lineage_today import OUT as BC_LINEAGE
from bc_lineage_today import shipped as bc_shipped
from capacity_floor_table import BASELINES, FAMILIES, HERE, SETUPS, yardstick_rows
from evaluate_thresholds import rows_on_test_windows
from warm_rising import shipped_rows

from agents.adapter import AgentPolicy
from baselines.policy import Policy, make_policy

ZOO = HERE.parents[1] / "agents" / "zoo"
SHIPPED_SEEDS = (
    # (zoo agent, setup, stored file tag, its row's name there)
    ("ppo_thresholds", "70b_h100x4", "_rerun1207", "s1_det"),
    ("ppo_thresholds_eft", "70b_h100x4", "_eft_rerun1207", "s0_det"),
    ("ppo_thresholds_spread", "qwen3_8b_h100x4", "_spread_qwen3_8b_rerun1206", "s0_det"),
)
STATS = ("ttft_mean_s", "ttft_p95_s")


def stored() -> dict[tuple[str, str, str], dict]:
    """The stored rows to check, by (setup, family, policy as run here)."""
    measured = (*BASELINES, "oracle_warm")  # the yardsticks that need no training
    rows = {key: row for key, row in yardstick_rows().items() if key[2] in measured}
    rows |= shipped_rows()
    lineage = json.loads(BC_LINEAGE.read_text())
    labels = {"bc_route_warm": "bc_route_warm"}
    labels |= {f"{recipe}_s{seed}": recipe for recipe, seed in bc_shipped(lineage).items()}
    for row in lineage["rows"]:
        if row["policy"] in labels:
            rows[(row["setup"], row["workload"], labels[row["policy"]])] = row
    for agent, setup, tag, label in SHIPPED_SEEDS:
        for family in FAMILIES:
            path = HERE / f"agents_vs_baselines_thresholds{tag}_{family}.json"
            for row in json.loads(path.read_text())["rows"]:
                if row["policy"] == label:
                    rows[(setup, family, agent)] = row
    return rows


def measured(setup: str, family: str, names: list[str]) -> dict[str, dict]:
    """Today's rows of ``names`` (baselines, or shipped agents by zoo name)."""
    policies: dict[str, Policy] = {}
    for name in names:
        if (ZOO / name / "agent.json").is_file():
            policies[name] = AgentPolicy.load(ZOO / name, name=name)
        else:
            policies[name] = make_policy(name)
    return {row["policy"]: row for row in rows_on_test_windows(policies, setup, family)}


def main(families: list[str]) -> int:
    torch.set_num_threads(1)
    old = stored()
    moved = checked = 0
    for setup in SETUPS:
        for family in families:
            names = [p for (s, f, p) in old if (s, f) == (setup, family)]
            if not names:
                continue
            now = measured(setup, family, names)
            for name in names:
                checked += 1
                before, after = old[(setup, family, name)], now[name]
                changes = [
                    f"{stat} {before[stat]:.6g} -> {after[stat]:.6g} "
                    f"({100 * (after[stat] / before[stat] - 1):+.3f} %)"
                    for stat in STATS
                    if before[stat] != after[stat]
                ]
                if changes:
                    moved += 1
                    print(f"moved: {setup} {family} {name}: {'; '.join(changes)}", flush=True)
    print(f"{checked} stored rows measured again, {moved} moved")
    return 1 if moved else 0


if __name__ == "__main__":
    asked = sys.argv[1:] or list(FAMILIES)
    unknown = [f for f in asked if f not in FAMILIES]
    if unknown:
        print(
            f"error: unknown family {unknown[0]!r} (known: {', '.join(FAMILIES)})", file=sys.stderr
        )
        raise SystemExit(2)
    raise SystemExit(main(asked))
