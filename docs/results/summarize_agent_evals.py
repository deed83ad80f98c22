"""Merge the agents' evaluation runs into
docs/results/agents_vs_baselines_<family>.json and agents.md.

    python docs/results/summarize_agent_evals.py runs/agent_evals/eval AGENT_NAME [TAG]

Reads ``<root>/<setup>/<family>/results.json`` (written by ``python -m
experiments.evaluate``), writes one JSON per family (all setups' rows) and a
markdown table (``agents_vs_baselines_[TAG_]table.md``): the agent against btb, cache_aware,
least_load and oracle_warm, the best baseline, the reductions, whether the
issue's target is met and how much of the btb -> oracle_warm gap the agent closes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

FAMILIES = ("bursted_synthetic", "bursted_synthetic_1s", "rising_load", "mixed", "art_like")
SETUPS = ("70b_h100x4", "qwen3_8b_h100x4", "glm45_h100x4")
BASELINES = ("btb", "cache_aware", "least_load")
HEADER = (
    "| family | setup | windows | agent mean / p95 (s) | btb | cache_aware | least_load "
    "| oracle_warm | best baseline (mean) | agent vs best baseline: mean / p95 "
    "| target met | btb→oracle gap closed |",
    "|---|---|--:|--:|--:|--:|--:|--:|---|--:|---|--:|",
)


def verdict(family: str, got: dict, agent: dict) -> str:
    """The issue's target, per statistic against the best baseline on that statistic."""
    checks = []
    for stat in ("mean", "p95"):
        key = f"ttft_{stat}_s"
        a, o = agent[key], got["oracle_warm"][key]
        b = min(got[p][key] for p in BASELINES)
        if family == "art_like":
            checks.append(a <= 1.01 * b)
        elif b <= 1.10 * o:
            checks.append(a <= 1.05 * o)
        else:
            checks.append(a <= 0.90 * b)
    return "yes" if all(checks) else "no"


def ms(r: dict) -> str:
    return f"{r['ttft_mean_s']:.3f} / {r['ttft_p95_s']:.3f}"


def row(family: str, setup: str, got: dict[str, dict], agent_name: str) -> str:
    """The table's line of one family and setup from its rows (``got``, by policy)."""
    agent, oracle = got[agent_name], got["oracle_warm"]
    best_name = min(BASELINES, key=lambda p: got[p]["ttft_mean_s"])
    red = [
        100 * (1 - agent[f"ttft_{s}_s"] / min(got[p][f"ttft_{s}_s"] for p in BASELINES))
        for s in ("mean", "p95")
    ]
    gap = got["btb"]["ttft_mean_s"] - oracle["ttft_mean_s"]
    closed = (
        f"{100 * (got['btb']['ttft_mean_s'] - agent['ttft_mean_s']) / gap:.0f}%"
        if gap > 1e-9
        else "n/a"
    )
    return (
        f"| {family} | {setup} | {agent['windows']} | {ms(agent)} | {ms(got['btb'])} "
        f"| {ms(got['cache_aware'])} | {ms(got['least_load'])} | {ms(oracle)} "
        f"| {best_name} | {red[0]:+.1f}% / {red[1]:+.1f}% "
        f"| {verdict(family, got, agent)} | {closed} |"
    )


def main(root: str, agent_name: str, tag: str = "") -> None:
    out = Path(__file__).resolve().parent
    prefix = f"agents_vs_baselines_{tag}_" if tag else "agents_vs_baselines_"
    lines = list(HEADER)
    for family in FAMILIES:
        rows = []
        for setup in SETUPS:
            path = Path(root) / setup / family / "results.json"
            if not path.is_file():
                continue
            got = {r["policy"]: r for r in json.loads(path.read_text())["rows"]}
            rows.extend(got.values())
            lines.append(row(family, setup, got, agent_name))
        if rows:
            (out / f"{prefix}{family}.json").write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    (out / f"{prefix}table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(*sys.argv[1:4])
