"""What the capacity floor says about the mean-TTFT targets: ``capacity_floor.md``.

    python docs/results/capacity_floor_table.py EVAL_ROOT   # read the runs, write both files
    python docs/results/capacity_floor_table.py             # the table again from the JSON

Reads ``EVAL_ROOT/<setup>/<family>/results.json``, each written by

    python -m experiments.evaluate \\
        checkpoint=[agents/zoo/finetune_families_long,agents/zoo/ppo_thresholds] \\
        policies=[oracle_warm,btb,btb_tuned,btb_pending,cache_aware,least_load,dynamo,llmd] \\
        workload=FAMILY workload.eval_windows=15 setup=SETUP logger=none \\
        out_dir=EVAL_ROOT/SETUP/FAMILY

(all 15 test windows, evaluation seed 0, causal KV), keeps the rows' mean and p95 TTFT
in ``capacity_floor.json`` and writes ``capacity_floor.md`` here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETUPS = ("70b_h100x4", "qwen3_8b_h100x4", "glm45_h100x4")
FAMILIES = ("bursted_synthetic", "bursted_synthetic_1s", "rising_load", "mixed", "art_like")
BURSTS = FAMILIES[:4]
BELOW_ORACLE = ("bursted_synthetic", "rising_load", "mixed")
BASELINES = ("btb", "btb_tuned", "btb_pending", "cache_aware", "least_load", "dynamo", "llmd")
AGENTS = ("finetune_families_long", "ppo_thresholds")
KEPT = ("setup", "workload", "policy", "windows", "requests", "ttft_mean_s", "ttft_p95_s")

Rows = dict[tuple[str, str, str], dict]

REPLACED = "\n".join(
    [
        "> **Replaced agents.** The figures of `bc_route_warm_spare` and the `improve_*`",
        "> agents on this page are of the weights shipped until 2026-12-07: all but",
        "> `improve_warm_anchored` trained before 2026-12-05, and that one trained on",
        "> 2026-12-07 from the `improve_spare_no1s` shipped then. The zoo now ships the",
        "> whole lineage trained again in today's simulator",
        "> ([spare_lineage_today.md](spare_lineage_today.md)), and `improve_warm_anchored`",
        "> again later that day by a changed recipe ([warm_rising.md](warm_rising.md)).",
    ]
)
"""The note atop the pages that measured the spare-node lineage shipped until
2026-12-07 (spare_lineage_today.md has the lineage that replaced it)."""


def read_runs(root: Path) -> list[dict]:
    rows = []
    for setup in SETUPS:
        for family in FAMILIES:
            path = root / setup / family / "results.json"
            for row in json.loads(path.read_text())["rows"]:
                rows.append({key: row[key] for key in KEPT})
    return rows


def verdict(required: float, bound: float) -> str:
    """A target's required mean TTFT against the capacity floor."""
    if bound > required:
        return f"**infeasible in this simulator** (bound {bound / required - 1:+.1%} above)"
    return f"room {required - bound:.3g} s ({1 - bound / required:.1%} of it)"


def met(agent: float, required: float) -> str:
    return f"{'met' if agent <= required else 'missed'} ({agent / required - 1:+.1%})"


def best_baseline(rows: Rows, setup: str, family: str, stat: str) -> tuple[str, float]:
    """The best of :data:`BASELINES` on one family and statistic: (name, TTFT)."""
    key = f"ttft_{stat}_s"
    best = min(BASELINES, key=lambda p: rows[(setup, family, p)][key])
    return best, rows[(setup, family, best)][key]


def floor_rule(rows: Rows, setup: str, family: str, stat: str) -> float | None:
    """The issue's floor rule: where the best baseline already sits within 10 % of
    ``floor`` on the statistic, the TTFT it requires instead (3 % above ``floor``);
    None where it does not apply."""
    floor = rows[(setup, family, "floor")][f"ttft_{stat}_s"]
    _, value = best_baseline(rows, setup, family, stat)
    return 1.03 * floor if value <= 1.10 * floor else None


def targets(rows: Rows, setup: str, family: str, stat: str = "mean") -> list[tuple[str, float]]:
    """The issue's targets on one family and statistic (``"mean"`` or ``"p95"``):
    (what, the TTFT it requires). The 5 % below oracle_warm target is on the mean."""
    best, value = best_baseline(rows, setup, family, stat)
    ruled = floor_rule(rows, setup, family, stat)
    out = []
    if ruled is not None:
        out.append(("within 3 % of floor", ruled))
    elif family in BURSTS:
        out.append((f"10 % below {best}", 0.90 * value))
    else:
        out.append((f"at most 1 % above {best}", 1.01 * value))
    if stat == "mean" and family in BELOW_ORACLE:
        out.append(
            ("5 % below oracle_warm", 0.95 * rows[(setup, family, "oracle_warm")]["ttft_mean_s"])
        )
    return out


def agent_cells(rows: Rows, setup: str, agent: str) -> tuple[int, int, int, list[str]]:
    """How many of the issue's cells on ``setup`` the agent meets, of how many, how
    many it misses that no policy can meet (a mean below ``floor_capacity``), and the
    other missed ones (what, by how much over what they require)."""
    met = total = infeasible = 0
    missed = []
    for family in FAMILIES:
        for stat in ("mean", "p95"):
            got = rows[(setup, family, agent)][f"ttft_{stat}_s"]
            for what, required in targets(rows, setup, family, stat):
                total += 1
                bound = rows[(setup, family, "floor_capacity")]["ttft_mean_s"]
                if got <= required:
                    met += 1
                elif stat == "mean" and required < bound:  # (no policy can: below the bound)
                    infeasible += 1
                else:
                    missed.append(f"{family} {stat} ({what}) {100 * (got / required - 1):+.1f} %")
    return met, total, infeasible, missed


def merged_rows(*names: str) -> Rows:
    """The rows of the JSON files ``names`` of this folder by (setup, family, policy),
    a later file's row over an earlier one's."""
    rows: Rows = {}
    for name in names:
        for row in json.loads((HERE / name).read_text())["rows"]:
            rows[(row["setup"], row["workload"], row["policy"])] = row
    return rows


def yardstick_rows() -> Rows:
    """capacity_floor.json's baselines, ``oracle_warm`` and floors, the yardsticks the
    other pages' cells are counted against."""
    keep = (*BASELINES, "oracle_warm", "floor", "floor_capacity")
    rows = merged_rows("capacity_floor.json")
    return {key: row for key, row in rows.items() if key[2] in keep}


def block(begin: str, end: str, sections: list[tuple[str, list[str]]]) -> str:
    """A generated block of a page: ``begin``, each section's ``### heading`` and
    lines, ``end``, a blank line between each."""
    lines = [begin, ""]
    for heading, body in sections:
        lines += [f"### {heading}", "", *body, ""]
    return "\n".join([*lines, end])


def refuse_missing(paths: list[Path]) -> None:
    """A script's inputs that are not there: one line naming them, exit 2."""
    missing = [str(path) for path in paths if not path.is_file()]
    if missing:
        print(f"error: missing {', '.join(missing)}", file=sys.stderr)
        raise SystemExit(2)


def publish(data_file: Path, page: Path, begin: str, end: str, render: Callable) -> None:
    """The page's generated block again from its JSON (``render(data)``), printed."""
    body = render(json.loads(data_file.read_text()))
    write_block(page, begin, end, body)
    print(body)


def write_block(page: Path, begin: str, end: str, body: str) -> None:
    """Put ``body`` between the lines ``begin`` and ``end`` of ``page`` (which
    ``body`` repeats), the text around them kept; no page yet: nothing written."""
    if page.is_file():
        head, _, rest = page.read_text().partition(begin)
        _, _, tail = rest.partition(end)
        page.write_text(head + body + tail)


def cells_table(rows: Rows, labels: dict[str, str]) -> list[str]:
    """A table of the cells each agent of ``labels`` (policy -> how the table names
    it) meets over the three setups (:func:`agent_cells`)."""
    lines = [
        "| agent | cells met | infeasible cells missed "
        "| feasible cells missed (over what they require) |",
        "|---|--:|--:|---|",
    ]
    for agent, label in labels.items():
        found = [agent_cells(rows, setup, agent) for setup in SETUPS]
        missed = [f"{setup} {m}" for setup, (*_, ms) in zip(SETUPS, found) for m in ms]
        lines.append(
            f"| {label} | {sum(f[0] for f in found)} of {sum(f[1] for f in found)} "
            f"| {sum(f[2] for f in found)} | {'; '.join(missed) or 'none'} |"
        )
    return lines


def table(rows: Rows, setup: str) -> list[str]:
    lines = [
        "| family | floor | **floor_capacity** | oracle_warm | best baseline "
        "| `finetune_families_long` | `ppo_thresholds` | target: requires | against the bound "
        "| `finetune_families_long` vs target |",
        "|---|--:|--:|--:|---|--:|--:|---|---|---|",
    ]
    for family in FAMILIES:
        mean = {
            p: rows[(setup, family, p)]["ttft_mean_s"]
            for p in (*BASELINES, *AGENTS, "oracle_warm", "floor", "floor_capacity")
        }
        best = min(BASELINES, key=lambda p: mean[p])
        bound = mean["floor_capacity"]
        head = (
            f"| {family} | {mean['floor']:.4g} | **{bound:.4g}** | {mean['oracle_warm']:.4g} "
            f"| {best} {mean[best]:.4g} | {mean[AGENTS[0]]:.4g} | {mean[AGENTS[1]]:.4g} "
        )
        for k, (what, required) in enumerate(targets(rows, setup, family)):
            lead = head if k == 0 else "| | | | | | | "
            lines.append(
                f"{lead}| {what}: {required:.4g} | {verdict(required, bound)} "
                f"| {met(mean[AGENTS[0]], required)} |"
            )
    return lines


def render(kept: list[dict]) -> str:
    rows: Rows = {(r["setup"], r["workload"], r["policy"]): r for r in kept}
    out = []
    for setup in SETUPS:
        out += [f"### {setup}", "", *table(rows, setup), ""]
    return "\n".join([*summary(rows), "", "## The tables", "", *out])


def summary(rows: Rows) -> list[str]:
    """The targets the bound rules out, and which of them the capacity term decides."""
    out = ["## Ruled out", ""]
    for setup in SETUPS:
        for family in FAMILIES:
            bound = rows[(setup, family, "floor_capacity")]["ttft_mean_s"]
            floor = rows[(setup, family, "floor")]["ttft_mean_s"]
            for what, required in targets(rows, setup, family):
                if bound > required:
                    by = "capacity" if floor <= required else "the floor alone"
                    out.append(
                        f"- {setup}, {family}: {what} requires {required:.4g} s, the bound is "
                        f"{bound:.4g} s ({by} rules it out)"
                    )
    return out if len(out) > 2 else [*out, "- none"]


TEXT = """# What the capacity floor says about the targets

`floor_capacity` is a lower bound on the mean TTFT of a window that counts the
cluster's prefill capacity as well as when each prefix's KV can first exist
([the argument](../physics.md#the-capacity-floor)); `floor` is the per-request bound
without queueing. Neither depends on a policy, so a target that asks for a mean
TTFT below `floor_capacity` cannot be met by any router, warming or eviction in this
simulator; above it, the bound leaves room, which says the target is not ruled out,
not that it can be reached. The bound is on the mean only: it says nothing about the
p95 targets.

Each setup: all 15 test windows of each family, causal KV, evaluation seed 0, one
training seed of each shipped agent (both were trained on 70b_h100x4; on the other
two setups they run unchanged; the rows of both are the agents shipped on
2026-12-07, `finetune_families_long`'s measured for
[bc_lineage_today.md](bc_lineage_today.md)). Mean TTFT in seconds; best baseline = the lowest
mean of {btb, btb_tuned, btb_pending, cache_aware, least_load, dynamo, llmd}. The
targets (issue #16): 10 % below the best baseline on the burst families, at most
1 % above it on art_like (or, where the best baseline sits within 10 % of `floor`,
within 3 % of `floor`), and 5 % below oracle_warm on the 60 s, rising_load and mixed
families. "room" is the required value minus the bound, and its share of the
required value.

Written by [capacity_floor_table.py](capacity_floor_table.py) (the commands are in
its docstring; the rows it read are in `capacity_floor.json`). Measured again on
2026-12-05, when a warm copy whose source or target lost its KV before it landed
came to land nothing ([physics.md](../physics.md#warm-copies-rdma)): only 70b's
`rising_load`, `mixed` and `art_like` rows moved (`oracle_warm`'s `mixed` mean
+1.3 %, the others at most 0.5 %; on `rising_load` btb_pending was then the
best baseline, 0.1 % ahead of btb). Measured again that evening, after a request
came to wait for a copy in flight only when that beats loading the prefix from
its node's host RAM: btb_pending's 70b `mixed` and `rising_load` means moved
+0.09 % and +0.19 %, and btb is the best baseline of `rising_load` again.
dynamo's rows were measured again on 2026-12-06, after its active decode blocks
came to count the decode steps run so far in the segment in progress
([baselines.md](../baselines.md)): its means on the burst families are the same
to the last digit, on `rising_load`, `mixed` and `art_like` they moved -0.3 to
+2.6 % (70b's most: +2.6, +1.6 and +0.7 %). Every row was measured again later
that day, after the forecast came to count a copy in flight on the reference
copy model from when it lands, being written or queued on its target: the
baselines and `oracle_warm` did not move, `finetune_families_long` by at most
0.05 % (70b's 60 s bursts' p95; the agent shipped until 2026-12-07).

## What it says

- On 70b_h100x4 no mean-TTFT target is ruled out. The capacity term counts most on
  the 1 s bursts, where 500 requests wait for one prefix and then queue for four
  nodes: 5.39 s against the floor's 4.23. "10 % below btb_pending" there asks for
  5.46 s, 0.06 s (1.2 %) above the bound, while oracle_warm (5.79) and the
  fine-tuned agent (6.13) sit 0.39-0.73 s above it: the target is tight but not
  ruled out. A bound that also kept each 4.7 s decoy prefill whole on one node
  (a node cannot preempt a prefill) would not rule it out either: in such a
  relaxed model a clairvoyant placement of the decoys costs 0.023-0.048 s of the
  mean on the five validation windows, below the 0.054 s the target leaves them
  ([the probe](rollout_improvement.md#a-non-preemptive-bound-for-the-1-s-target-2026-12-04)).
  On the 60 s bursts, rising_load, mixed and art_like the bound is
  0.1-1.9 % above the floor, far below every policy (60 s bursts: 0.35 against
  the best policies' 0.70-0.78): at those loads it says little about whether the
  targets can be reached.
- On the other two setups six targets are infeasible in this simulator (the list
  below): four by the per-request floor alone ("5 % below oracle_warm" asks for
  less than the floor on qwen3_8b_h100x4's 60 s bursts, rising_load and mixed,
  and on glm45_h100x4's rising_load) and two by the capacity term (the 1 s bursts:
  on glm45_h100x4 10 % below btb_pending is 2.07 s, the bound 2.16 s; on
  qwen3_8b_h100x4 10 % below cache_aware is 0.2386 s, the bound 0.2401 s).
- Since 2026-12-03 (evening) the capacity term also takes SRPT's completions
  rank by rank against each request's own end (step 6 of [the
  argument](../physics.md#the-capacity-floor)): no schedule ends its k-th request
  before SRPT's k-th completion, nor before the k-th smallest of the requests'
  own ends. It raised the bound by up to 2.1 % (qwen3-8b's 1 s bursts, 0.2350 to
  0.2401 s, which rules out their mean target; 70b's 1 s bursts 5.372 to 5.392 s,
  its 60 s bursts and mixed +1.9 %, glm45's 1 s bursts 2.139 to 2.156 s), where a
  long request (a decoy, a 64k-token cold prefill) ends late whatever the schedule
  while the fast machine of the SRPT bound ends the short ones early.
- The bound holds for policies that do not speculate (`sim.speculate`; the
  shipped agents and the baselines above do not) and bounds the mean only: the
  p95 targets are not addressed here.
- Since 2026-12-03 both bounds charge each reused token its load from HBM, which
  the simulator charges every HBM hit under causal KV (`SimConfig.hbm_hit_load`).
  That moved the per-request floor's mean by +0.01 to +0.5 % on 70b and glm45
  (70b's rising_load +1.6 %) and by +2.9 to +6.2 % on qwen3-8b's 60 s bursts,
  rising_load and mixed, where loading a 64k-token prefix (0.72 ms) costs a third
  of prefilling the rest of the prompt (2.12 ms); there the floor's p95 on the 60 s
  bursts now equals the agents' (0.00284 s). The capacity term grew more on the
  1 s bursts (qwen3-8b 0.2075 to 0.2350 s, 70b 5.28 to 5.37 s, glm45 2.12 to
  2.14 s): the loads occupy the nodes the burst queues for. Without the load, two
  qwen3-8b targets asked for less than any router can reach (the 60 s bursts'
  "within 3 % of floor", 0.02151 s, and rising_load's "10 % below btb",
  0.006546 s); with it, the best baseline sits within 10 % of the floor on both,
  and the targets are 3 % above it.
- A check of the bound: on each of the 225 windows (3 setups x 5 families x 15),
  it lies below the lowest per-window mean TTFT of the ten policies (at most 0.9985
  of it, measured on 2026-12-03 with the HBM load and again with the rank-by-rank
  step; 0.988 on 2026-12-01, before the changes of 2026-12-02 and 2026-12-03).

"""


def main(*roots: str) -> None:
    data = HERE / "capacity_floor.json"
    if roots:
        kept = [row for root in roots for row in read_runs(Path(root))]
        data.write_text(json.dumps({"rows": kept}, indent=1) + "\n")
    kept = json.loads(data.read_text())["rows"]
    body = render(kept)
    (HERE / "capacity_floor.md").write_text(TEXT + body + "\n")
    print(body)


if __name__ == "__main__":
    main(*sys.argv[1:])
