"""Which of issue #16's thresholds-agent cells each agent meets: ``thresholds_cells.md``.

    python docs/results/thresholds_cells.py

The thresholds target: 5 % lower mean TTFT than btb_tuned on each burst family,
with p95 no worse, on all 15 test windows (evaluation seed 0, causal KV). One cell
is one setup and family, both statistics. The issue's targets also carry a floor
rule: where the best baseline (of btb, btb_tuned, btb_pending, cache_aware,
least_load, dynamo and llmd, as in ``target_cells.md``) already sits within 10 %
of ``floor`` on a statistic, the agent must come within 3 % of ``floor`` on it
instead (stated beside the route-and-warm targets; applying it here is a
reading). The table counts the cells both ways.

Reads the agents' rows from the stored ``agents_vs_baselines_thresholds*_<family>.json``
(written by ``evaluate_thresholds.py``) and the baselines' and the floor's rows from
``capacity_floor.json``; the two files' btb_tuned rows must agree, so both come
from the same windows and simulator. Agents are the
mean over their training seeds, greedy (``det``) and sampled (``stoch``).
"""

from __future__ import annotations

import json

import numpy as np
from capacity_floor_table import (
    BURSTS,
    HERE,
    SETUPS,
    Rows,
    best_baseline,
    floor_rule,
    merged_rows,
)

RUNS = (
    # (agent, how it was run, file tag, setup)
    ("ppo_thresholds", "trained on 70b", "", "70b_h100x4"),
    ("ppo_thresholds_eft", "trained on 70b", "_eft", "70b_h100x4"),
    ("ppo_thresholds_eft", "trained on 70b", "_eft_qwen3_8b", "qwen3_8b_h100x4"),
    ("ppo_thresholds_eft", "trained on 70b", "_eft_glm45", "glm45_h100x4"),
    ("ppo_thresholds_spread", "trained on qwen3-8b", "_spread_qwen3_8b_on_70b", "70b_h100x4"),
    ("ppo_thresholds_spread", "trained on qwen3-8b", "_spread_qwen3_8b", "qwen3_8b_h100x4"),
    ("ppo_thresholds_spread", "trained on qwen3-8b", "_spread_qwen3_8b_on_glm45", "glm45_h100x4"),
)
RERUN = {
    "ppo_thresholds": "_rerun1207",
    "ppo_thresholds_eft": "_rerun1207",
    "ppo_thresholds_spread": "_rerun1206",
}
"""The file tag's suffix of each recipe's seeds 0-2 as the recipes train today: the
first two trained and evaluated on 2026-12-07 by their plain commands, the spread
recipe's on 2026-12-06 (with ``sim.copy_landing_check=false``, which it does not
meet: its plain command gave the same rows on 2026-12-07)."""
RERUNS = tuple(
    (agent, how, tag + RERUN[agent], setup) for agent, how, tag, setup in RUNS if agent in RERUN
)
STATS = ("mean", "p95")


BASELINES_FILE = "capacity_floor.json"
"""The baselines and the floor. Measured again after the copy-waiting rule of
2026-12-05 (evening), where the agents' rows were measured before it; the rule
did not move btb_tuned, whose rows both files must agree on, but it moved
btb_pending (70b `mixed` and `rising_load`, +0.09 % and +0.19 %), whose rule the
`pending` agents use: their rows may have moved as little (not measured: the
three seeds' reruns are not kept)."""


def baseline_rows() -> Rows:
    return merged_rows(BASELINES_FILE)


def agent_ttft(tag: str, family: str, mode: str, tuned: dict) -> dict[str, float]:
    """The agent's mean and p95 TTFT on ``family``, averaged over its seeds."""
    path = HERE / f"agents_vs_baselines_thresholds{tag}_{family}.json"
    rows = {row["policy"]: row for row in json.loads(path.read_text())["rows"]}
    same = rows["btb_tuned"]
    for stat in STATS:
        assert same[f"ttft_{stat}_s"] == tuned[f"ttft_{stat}_s"], (path, stat)
    seeds = [row for name, row in rows.items() if name.endswith(f"_{mode}")]
    assert len(seeds) >= 3, (path, mode, len(seeds))
    return {stat: float(np.mean([r[f"ttft_{stat}_s"] for r in seeds])) for stat in STATS}


def required(rows: Rows, setup: str, family: str, stat: str) -> tuple[float, float, str]:
    """(what the plain target requires, what it requires under the floor rule, why)."""
    key = f"ttft_{stat}_s"
    tuned = rows[(setup, family, "btb_tuned")][key]
    plain = 0.95 * tuned if stat == "mean" else tuned
    ruled = floor_rule(rows, setup, family, stat)
    if ruled is None:
        return plain, plain, ""
    best, value = best_baseline(rows, setup, family, stat)
    floor = rows[(setup, family, "floor")][key]
    return plain, ruled, f"{best} {value / floor - 1:+.1%} of floor"


def table(rows: Rows, mode: str, runs: tuple = RUNS) -> tuple[list[str], dict[str, list[int]]]:
    lines = [
        "| agent | setup | family | mean: agent / requires (plain; floor rule) "
        "| p95: agent / requires (plain; floor rule) | floor rule applies "
        "| met: plain / floor rule |",
        "|---|---|---|--:|--:|---|---|",
    ]
    counts: dict[str, list[int]] = {}
    for agent, _, tag, setup in runs:
        for family in BURSTS:
            tuned = rows[(setup, family, "btb_tuned")]
            got = agent_ttft(tag, family, mode, tuned)
            cells, why = [], []
            met_plain = met_floor = True
            for stat in STATS:
                plain, ruled, reason = required(rows, setup, family, stat)
                met_plain &= got[stat] <= plain
                met_floor &= got[stat] <= ruled
                cells.append(f"{got[stat]:.5g} / {plain:.5g}; {ruled:.5g}")
                if reason:
                    why.append(f"{stat}: {reason}")
            count = counts.setdefault(agent, [0, 0, 0])
            count[0] += met_plain
            count[1] += met_floor
            count[2] += 1
            lines.append(
                f"| {agent} | {setup} | {family} | {cells[0]} | {cells[1]} "
                f"| {', '.join(why) or '-'} | {'yes' if met_plain else 'no'} / "
                f"{'yes' if met_floor else 'no'} |"
            )
    return lines, counts


TEXT = """# Thresholds-agent cells met

Issue #16's thresholds target: 5 % lower mean TTFT than btb_tuned on each burst
family, with p95 no worse; all 15 test windows of each family, evaluation seed 0,
causal KV, the agents' mean over 3 training seeds. The issue also states a floor
rule among its targets: where the best baseline (of btb, btb_tuned, btb_pending,
cache_aware, least_load, dynamo and llmd) already sits within 10 % of `floor` on
a statistic, the agent must come within 3 % of `floor` on it instead. It is
stated beside the route-and-warm targets, where [target_cells.md](target_cells.md)
applies it; that it governs the thresholds target too is this page's reading,
so both counts are given. The rule can loosen a requirement as well as tighten
it: on qwen3-8b's 60 s bursts the p95 may be up to 3 % above the floor's, which
every policy there reaches. Each row gives what the cell requires both ways (TTFT
in seconds); a cell is met when both statistics are.

Written by [thresholds_cells.py](thresholds_cells.py) from the stored
`agents_vs_baselines_thresholds*` rows and `capacity_floor.json`. Measured
again on 2026-12-05, when a warm copy whose source or target lost its KV before
it landed came to land nothing ([physics.md](../physics.md#warm-copies-rdma)),
and a sampling agent came to draw from its own stream for each window: the three
seeds of `ppo_thresholds_eft` and `ppo_thresholds_spread` were trained again
with `sim.copy_landing_check=false`, the simulator they were trained in (the
shipped seed of each gave its zoo weights bit for bit, the other seeds their
validation curves), and evaluated with the check on. `ppo_thresholds`'s three
seeds are reruns of its recipe (the shipped seed 2 predates a change in how
actions are sampled and does not rebuild; its README), so its rows are of other
agents of the same recipe than the table of 2026-12-04. Against that table: the
greedy rows of the other two agents moved by at most 0.35 % (70b's `mixed`),
their sampled rows by -4 to +5 % (other draws). Two counts moved: the
`ppo_thresholds` reruns meet 70b's `rising_load` greedily (0.0942 s against the
0.0943 s required; the seeds of 2026-12-04 took 0.0996 s), so 4 of 4 (3 before);
sampled, `ppo_thresholds_spread` meets qwen3-8b's 60 s bursts under the floor
rule (22.14 ms against 22.23 ms; 22.24 ms before), so 11 (10 before).

Measured again on 2026-12-06. `ppo_thresholds`'s three runs were retrained by
their command and evaluated on that day's simulator: the forecast changes of
2026-12-05 and 06 (a request waits for a copy in flight only if that ends its
prefill sooner; a copy being written or queued counts from when it lands) had
moved its rows by at most 0.6 % and `btb_pending` by 0.2 %; no cell changed. The
`ppo_thresholds_eft` and `ppo_thresholds_spread` rows of the first two sections
are still 2026-12-05's runs. Their weights are no longer what the recipes train:
the same changes alter the routes their `eft`-based rules take while training
(`ppo_thresholds_eft` seed 0 now keeps validation 0.7026 at step 163,840 against
0.6971 at 98,304). The shipped seeds, evaluated greedily on 2026-12-06's
simulator, move by at most 0.70 % (`ppo_thresholds_eft` on 70b's `mixed`, 0.9281
to 0.9346 s; the rest by at most 0.01 %); the other seeds' weights were not kept.
Both recipes' seeds 0, 1 and 2 were retrained (`sim.copy_landing_check=false`) and
evaluated on 2026-12-06 (`agents_vs_baselines_thresholds*_rerun1206_*`): the
spread recipe met as many cells as before, the eft recipe 10 plainly and 11
under the floor rule.

On 2026-12-07 the three recipes were trained again by their plain commands (no
option), and the zoo ships the best seed of each on validation (`ppo_thresholds`
seed 1, the other two seed 0); the last two sections count these runs.
`ppo_thresholds`'s meet 3 of its 4 cells greedily: `rising_load` is missed,
0.0953 s against the 0.0943 s required (the shipped seed alone meets it,
0.0912 s). The spread recipe's test rows on the three setups equal its
`_rerun1206` rows to the last digit of every TTFT. The eft recipe meets
the copy landing check, so its plain command trains other agents than those of
2026-12-06: `agents_vs_baselines_thresholds_eft*_rerun1207_*`, 9 cells plainly and
9 under the floor rule, as the runs of the first section (it loses qwen3-8b's 60 s
bursts, which the runs of 2026-12-06 met: the seeds' mean is 0.5 % above
btb_tuned's where the target is 5 % below, and seeds 0 and 1 have a p95 of 76 and
84 ms against 2.8 ms). The rows of the first two sections are the runs
of the weights shipped until then (the eft agent: seed 0 of 2026-12-01's; the
spread agent: seed 1 of 2026-12-04's) or, for `ppo_thresholds`, reruns of its
recipe with the option.
"""


def render(rows: Rows) -> str:
    out = [TEXT]
    sections = (
        ("det", "Greedy", RUNS),
        ("stoch", "Sampled", RUNS),
        ("det", "The three recipes as they train today: greedy", RERUNS),
        ("stoch", "The three recipes as they train today: sampled", RERUNS),
    )
    for mode, title, runs in sections:
        lines, counts = table(rows, mode, runs)
        out.append(f"## {title}\n")
        out.extend(lines)
        out.append("")
        out.append(
            "Met, plain / under the floor rule: "
            + "; ".join(f"`{a}` {p} / {f} of {n}" for a, (p, f, n) in counts.items())
            + "."
        )
        out.append("")
    return "\n".join(out)


def main() -> None:
    assert {setup for *_, setup in RUNS} == set(SETUPS)
    path = HERE / "thresholds_cells.md"
    text = render(baseline_rows())
    path.write_text(text)
    print(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
