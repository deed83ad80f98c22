"""Which of issue #16's target cells each route-and-warm agent meets: ``target_cells.md``.

    python docs/results/target_cells.py

Reads the stored rows, all 15 test windows of each family and setup, evaluation
seed 0, causal KV, greedy agents: the baselines, oracle_warm and the bounds from
``capacity_floor.json`` (see ``capacity_floor_table.py``), the shipped agents from
``spare_lineage_today.json`` but ``improve_warm_anchored``, whose rows and other
training seeds are ``warm_rising.json``'s (``warm_rising.shipped_rows``). A cell is
one target on one setup, family and statistic, by the rules of
``capacity_floor_table.targets``: 3 setups x 5 families x (mean, p95), plus the mean
5 % below oracle_warm on three families, 39 in all.
Infeasible marks a mean target below ``floor_capacity``.
"""

from __future__ import annotations

import json

from capacity_floor_table import FAMILIES, HERE, SETUPS, Rows, merged_rows, targets
from spare_lineage_today import ANCHORED, SHIPPED
from warm_rising import OUT as WARM_RISING
from warm_rising import other_seeds as anchored_seeds
from warm_rising import shipped_rows

AGENTS = SHIPPED
"""The route-and-warm agents the page counts: the spare-node lineage, in its order."""
STATS = ("mean", "p95")


def other_seeds(rows: Rows) -> list[str]:
    """``improve_warm_anchored``'s training seeds that are not shipped, as ``rows``
    name them."""
    return sorted({key[2] for key in rows if key[2].startswith(f"{ANCHORED}_s")})


def load() -> Rows:
    data = json.loads(WARM_RISING.read_text())
    return merged_rows("capacity_floor.json") | shipped_rows(data) | anchored_seeds(data)


def cells(rows: Rows) -> list[tuple[str, str, str, str, float, bool]]:
    """(setup, family, statistic, target, the TTFT it requires, ruled out) of every cell."""
    out = []
    for setup in SETUPS:
        for family in FAMILIES:
            bound = rows[(setup, family, "floor_capacity")]["ttft_mean_s"]
            for stat in STATS:
                for what, required in targets(rows, setup, family, stat):
                    out.append(
                        (setup, family, stat, what, required, stat == "mean" and bound > required)
                    )
    return out


def render(rows: Rows) -> str:
    every = cells(rows)
    head = (
        "| setup | family | stat | target: requires | "
        + " | ".join(f"`{a}`" for a in AGENTS)
        + " |"
    )
    lines = [head, "|---|---|---|---|" + "--:|" * len(AGENTS)]
    met = dict.fromkeys(AGENTS, 0)
    for setup, family, stat, what, required, ruled_out in every:
        marks = []
        for agent in AGENTS:
            value = rows[(setup, family, agent)][f"ttft_{stat}_s"]
            ok = value <= required
            met[agent] += ok
            marks.append(f"{'met' if ok else 'missed'} ({value / required - 1:+.1%})")
        target = f"{what}: {required:.4g}" + (" (infeasible)" if ruled_out else "")
        lines.append(f"| {setup} | {family} | {stat} | {target} | " + " | ".join(marks) + " |")
    infeasible = sum(cell[-1] for cell in every)
    totals = " | ".join(f"**{met[a]}**" for a in AGENTS)
    lines.append(f"| **met, of {len(every)}** ({infeasible} infeasible) | | | | {totals} |")
    lines += ["", SEEDS_TEXT.format(n=len(every))]
    for seed in other_seeds(rows):
        values = [(cell, rows[(cell[0], cell[1], seed)][f"ttft_{cell[2]}_s"]) for cell in every]
        missed = [
            f"{s}'s {f} {stat} ({value / req - 1:+.1%})"
            for (s, f, stat, _, req, ruled_out), value in values
            if value > req and not ruled_out
        ]
        count = sum(value <= cell[4] for cell, value in values)
        lines.append(f"- `{seed}`: {count}; feasible cells missed: " + ", ".join(missed) + ".")
    return TEXT + "\n".join(lines) + "\n"


SEEDS_TEXT = """Other training seeds of `improve_warm_anchored`, cells met of {n} (not in
`agents/zoo/`; `+experiment=improve_warm_anchored seed=S`, trained and measured on
2026-12-07 with the shipped seed, [warm_rising.md](warm_rising.md)):"""


TEXT = """# Target cells met by the route-and-warm agents

Issue #16's targets, one cell per setup, family and statistic: the mean and p95
TTFT 10 % below the best of {btb, btb_tuned, btb_pending, cache_aware, least_load,
dynamo, llmd} on the four burst families and at most 1 % above it on art_like, or,
where that baseline sits within 10 % of `floor` on the statistic, within 3 % of
`floor`; and the mean 5 % below oracle_warm on the 60 s bursts, rising_load and
mixed. All 15 test windows of each family, evaluation seed 0, causal KV, greedy
agents (trained on llama-3.3-70b only; on the other two setups they run
unchanged). `improve_warm_reference` is `improve_warm`'s recipe reading the
observation's durations in llama-3.3-70b's seconds (`time_unit: reference`, the
same agent on 70b); `improve_warm_step` is that agent with the rest of each
node's decode step in its first-token estimates (`step_wait: true`);
`improve_warm_anchored` is `improve_spare_no1s` improved by warm rounds that
measure and warm on `rising_load` only, keeping its own decisions on the other
families and its own copies among the labels. In brackets: the agent against what the
cell requires. "infeasible": a mean below `floor_capacity`, which no policy that
does not speculate can reach ([capacity_floor.md](capacity_floor.md)).

These are the agents `agents/zoo/` ships, trained again in today's simulator on
2026-12-07 ([spare_lineage_today.md](spare_lineage_today.md)). In that lineage
no warm round beat its start, so `improve_warm`, `improve_warm_reference` and
`improve_warm_step` hold `improve_spare_no1s`'s weights. `improve_warm_anchored`
was trained again later that day with its recipe changed, and its rounds beat
their start ([warm_rising.md](warm_rising.md)). The agents they replaced (all trained
before 2026-12-05 except `improve_warm_anchored`, trained on 2026-12-07 from the
`improve_spare_no1s` shipped then) met up to 32 cells (`improve_warm_anchored`; under
evaluation seeds 1 and 2 too: [eval_seeds.md](eval_seeds.md)).
[spare_lineage_today.md](spare_lineage_today.md) compares each with the agent
that replaced it.

Written by [target_cells.py](target_cells.py) from `capacity_floor.json`,
`spare_lineage_today.json` and `warm_rising.json`.

"""


def main() -> None:
    text = render(load())
    (HERE / "target_cells.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
