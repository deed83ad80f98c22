"""The tables of ``zoo_today.md``: the headline recipe trained again on today's simulator.

    python docs/results/zoo_today.py

Reads, all 15 test windows of each family, evaluation seed 0, causal KV, greedy
and sampled:
- ``zoo_today_route_warm.json``: ``improve_warm_step``'s lineage trained with the
  zoo's commands less ``sim.copy_landing_check=false``, under three pairs of seeds
  (:data:`SEEDS`), and the shipped ``improve_warm_step`` measured beside them;
- ``zoo_today_anchored.json``: ``+experiment=improve_warm_anchored`` run from each
  of those lineages' ``improve_spare_no1s`` at the same warm-step seed
  (:data:`ANCHORED`);
- ``zoo_today_anchored_command.json``: ``+experiment=improve_warm_anchored`` as
  shipped (from the shipped ``improve_spare_no1s``) at seeds 0, 1 and 2
  (:data:`COMMAND`; seed 2 is ``agents/zoo/improve_warm_anchored``);
- ``capacity_floor.json`` for the baselines, ``oracle_warm`` and the floors (the
  targets and the floor rule).

Prints the page's three blocks of tables (``zoo_today.md`` holds each between its
markers)."""

from __future__ import annotations

from collections.abc import Callable

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
ANCHORED = tuple(f"improve_warm_anchored_today_{a}_{b}" for a, b in SEEDS)
COMMAND = ("improve_warm_anchored seed 0", "improve_warm_anchored seed 1", "improve_warm_anchored")
"""The shipped recipe's three seeds, the last the shipped agent (the best of the
three on the recipe's validation windows)."""
MEANS = {"today_mean": TODAY, "anchored_mean": ANCHORED, "command_mean": COMMAND}
"""The means over seeds that :func:`seeds_mean` adds, and the agents each averages."""
SAMPLED = "_stochastic"
"""The suffix of an agent's rows with its actions sampled (else greedy)."""
STATS = ("ttft_mean_s", "ttft_p95_s")
BEGIN, END = "<!-- zoo_today.py: begin -->", "<!-- zoo_today.py: end -->"
ANCHORED_BEGIN = "<!-- zoo_today.py anchored: begin -->"
ANCHORED_END = "<!-- zoo_today.py anchored: end -->"
COMMAND_BEGIN = "<!-- zoo_today.py shipped: begin -->"
COMMAND_END = "<!-- zoo_today.py shipped: end -->"


def load() -> Rows:
    """capacity_floor.json's rows with zoo_today_route_warm.json's,
    zoo_today_anchored.json's and zoo_today_anchored_command.json's over them."""
    return merged_rows(
        "capacity_floor.json",
        "zoo_today_route_warm.json",
        "zoo_today_anchored.json",
        "zoo_today_anchored_command.json",
    )


def seeds_mean(rows: Rows) -> Rows:
    """``rows`` with each agent of :data:`MEANS` added, greedy and sampled
    (``today_mean`` and ``today_mean_stochastic``, ...): each statistic averaged
    over its three lineages (the figure the issue's targets are read against)."""
    out = dict(rows)
    for mean, names in MEANS.items():
        for setup in SETUPS:
            for family in FAMILIES:
                for how in ("", SAMPLED):
                    got = [rows[(setup, family, name + how)] for name in names]
                    out[(setup, family, mean + how)] = {
                        key: float(np.mean([r[key] for r in got])) for key in STATS
                    }
    return out


def spread(rows: Rows, setup: str, family: str, mean: str) -> list[str]:
    """Each statistic of the seeds' mean ``mean`` with its standard deviation over
    the seeds, as a share of it."""
    got = rows[(setup, family, mean)]
    return [
        f"{got[key]:.4g} ± "
        f"{100 * np.std([rows[(setup, family, n)][key] for n in MEANS[mean]]) / got[key]:.1f} %"
        for key in STATS
    ]


def change(new: dict[str, float], old: dict[str, float]) -> str:
    """``new``'s mean / p95 against ``old``'s, in per cent."""
    return " / ".join(f"{100 * (new[key] / old[key] - 1):+.1f} %" for key in STATS)


def figures(row: dict[str, float]) -> str:
    """A row's mean / p95 TTFT."""
    return f"{row['ttft_mean_s']:.4g} / {row['ttft_p95_s']:.4g}"


def per_pair(head: list[str], row: Callable[[str, str], str]) -> list[str]:
    """A table: ``head``, then ``row(setup, family)`` for every setup and family."""
    return [*head, *(row(setup, family) for setup in SETUPS for family in FAMILIES)]


def figures_table(rows: Rows) -> list[str]:
    """The greedy figures, the seeds' mean read from :func:`seeds_mean`'s rows."""

    def row(setup: str, family: str) -> str:
        shipped = rows[(setup, family, SHIPPED)]
        mean, p95 = spread(rows, setup, family, "today_mean")
        return (
            f"| {setup} | {family} | {figures(shipped)} | {mean} | {p95} "
            f"| {change(rows[(setup, family, 'today_mean')], shipped)} "
            f"| {rows[(setup, family, 'oracle_warm')]['ttft_mean_s']:.4g} |"
        )

    head = [
        "| setup | family | shipped mean / p95 (s) | today, 3 seeds: mean (s) ± std "
        "| today: p95 (s) ± std | today vs shipped: mean / p95 | oracle_warm mean (s) |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    return per_pair(head, row)


def anchored_table(rows: Rows) -> list[str]:
    """The warm-anchored agents' greedy figures beside today's ``improve_warm_step``
    (both the seeds' mean) and the shipped one."""

    def row(setup: str, family: str) -> str:
        got = rows[(setup, family, "anchored_mean")]
        mean, p95 = spread(rows, setup, family, "anchored_mean")
        copies = [rows[(setup, family, names[0])]["warm_copies"] for names in (TODAY, ANCHORED)]
        return (
            f"| {setup} | {family} | {mean} | {p95} "
            f"| {change(got, rows[(setup, family, 'today_mean')])} "
            f"| {change(got, rows[(setup, family, SHIPPED)])} "
            f"| {copies[0]:,} / {copies[1]:,} |"
        )

    head = [
        "| setup | family | anchored, 3 seeds: mean (s) ± std | anchored: p95 (s) ± std "
        "| anchored vs today's `improve_warm_step`: mean / p95 "
        "| anchored vs shipped: mean / p95 | copies: today's step / anchored (seed 4 / 0) |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    return per_pair(head, row)


def command_table(rows: Rows) -> list[str]:
    """The shipped ``improve_warm_anchored``'s greedy figures, its recipe's three
    seeds' mean, and both against the shipped ``improve_warm_step``."""

    def row(setup: str, family: str) -> str:
        got, step = rows[(setup, family, COMMAND[-1])], rows[(setup, family, SHIPPED)]
        mean, p95 = spread(rows, setup, family, "command_mean")
        return (
            f"| {setup} | {family} | {figures(got)} | {mean} | {p95} | {change(got, step)} "
            f"| {change(rows[(setup, family, 'command_mean')], step)} "
            f"| {step['warm_copies']:,} / {got['warm_copies']:,} |"
        )

    head = [
        "| setup | family | this agent: mean / p95 (s) | 3 seeds: mean (s) ± std "
        "| 3 seeds: p95 (s) ± std | this agent vs `improve_warm_step`: mean / p95 "
        "| 3 seeds vs `improve_warm_step`: mean / p95 | copies: `improve_warm_step` / this agent |",
        "|---|---|--:|--:|--:|--:|--:|--:|",
    ]
    return per_pair(head, row)


def block(markers: tuple[str, str], table: list[str], rows: Rows, labels: dict[str, str]) -> str:
    """One block of the page between its ``markers``: ``table``, then the cells table
    of the agents of ``labels``."""
    return "\n".join([markers[0], "", *table, "", *cells_table(rows, labels), "", markers[1]])


def sampled(labels: dict[str, str], but: tuple[str, ...] = ()) -> dict[str, str]:
    """``labels`` with each agent's sampled rows after them (but those of ``but``)."""
    return labels | {
        n + SAMPLED: f"{label}, sampled" for n, label in labels.items() if n not in but
    }


def render(rows: Rows) -> str:
    """The first block (``rows``: :func:`seeds_mean` of :func:`load`, as for each block)."""
    labels = {SHIPPED: "shipped `improve_warm_step`"}
    labels |= {name: f"today, seeds {a} / {b}" for name, (a, b) in zip(TODAY, SEEDS)}
    labels["today_mean"] = "today, the 3 seeds' mean"
    return block((BEGIN, END), figures_table(rows), rows, sampled(labels))


def render_anchored(rows: Rows) -> str:
    """The second block."""
    labels = {SHIPPED: "shipped `improve_warm_step`", "today_mean": "today's step, 3 seeds' mean"}
    labels |= {name: f"anchored, seeds {a} / {b}" for name, (a, b) in zip(ANCHORED, SEEDS)}
    labels["anchored_mean"] = "anchored, the 3 seeds' mean"
    markers = (ANCHORED_BEGIN, ANCHORED_END)
    return block(markers, anchored_table(rows), rows, sampled(labels, but=(SHIPPED,)))


def render_command(rows: Rows) -> str:
    """The third block."""
    labels = {SHIPPED: "shipped `improve_warm_step`"}
    labels |= {name: f"seed {n}" for n, name in enumerate(COMMAND[:-1])}
    labels[COMMAND[-1]] = "seed 2, the shipped `improve_warm_anchored`"
    labels["command_mean"] = "the 3 seeds' mean"
    markers = (COMMAND_BEGIN, COMMAND_END)
    return block(markers, command_table(rows), rows, sampled(labels))


if __name__ == "__main__":
    loaded = seeds_mean(load())
    print("\n\n".join(make(loaded) for make in (render, render_anchored, render_command)))
