"""Milliseconds to make N tokens of KV resident, from each source (the published check table).

    python -m experiments.costs [setup=70b_h100x4] [model=PRESET] [node=GPUsxGPU]
                                [tokens=500,1000,2000,8000,16000,32000] [mfu=0.5]
                                [out_dir=PATH]
                                [model.name=NAME model.FIELD=...] [cluster.node=GPUsxGPU]
                                [cluster.nodes=[GPUsxGPU,...]] [+cluster.gpus.NAME.FIELD=...]

``setup=`` (one of the published setups, e.g. ``glm52_h100x8``) chooses the model
and the node; ``model=`` and ``node=``, when given, win over the setup's, as
``model=`` and ``cluster=`` do on the Hydra commands (``setup=qwen3_8b_h100x4
model=glm-4.5`` is glm-4.5 on a 4xH100 node; the table's first line names the
model and node it is for). ``mfu=`` is the prefill's model FLOPs utilisation,
in (0, 1] (``sim.mfu`` on the Hydra commands; the default is its default): it
sets the prefill row only. Each of ``tokens=`` is at most the node's KV budget
(``budget_tokens``, on the table's first line): more KV than that is never resident
on the node, and is refused in one line.

A cluster of one's own is given as on the Hydra commands and ``compare``, built by
the same code (``experiments.config.cluster_from_options``, docs/configuration.md):
a model of one's own (a new ``model.name`` and ModelSpec's fields), a GPU kind of
one's own (``+cluster.gpus.NAME.<field>=...``, every GpuSpec field; the ``+`` is
optional here) and the node (``cluster.node=4xNAME``), each changing the setup's.
``model=`` and ``node=`` are the short spellings of ``model.name=`` and
``cluster.node=`` (both spellings of one is refused; an error names the one
typed). ``cluster.nodes=[...]`` prints one table per node kind it lists, in order;
``cluster.n_nodes`` is refused (the table is one node's).

Prints the table and, with ``out_dir``, writes ``costs.json``: ``{"model", "node",
"mfu", "kv_bytes_per_token", "budget_tokens", "tokens": [...], "ms": {"prefill":
[...], "disk": [...], "rdma": [...], "ram": [...], "hbm": [...]}, "cluster_figures"}``
(``cluster_figures``: the model's and the node's figures, ``ClusterSpec.figures()``
of that one node, as ``results.json`` records a cluster); for ``cluster.nodes`` of
several kinds, ``{"nodes": [one such table per kind]}``.
"""

from __future__ import annotations

import math
from typing import Any

from envs.files import write_json_atomic
from envs.sim.checks import checked_number
from envs.sim.config import DEFAULT_SETUP, ClusterSpec, SimConfig
from envs.sim.errors import echoed
from envs.sim.timing import ModelSpec, NodeCosts, NodeSpec, model_preset, parse_node
from experiments._cli import (
    FROM_COMMAND_LINE,
    UsageError,
    check_setups,
    cluster_help,
    main_guard,
    parse_args,
    split_cluster_options,
)
from experiments._io import claim_out_dir, releasing_out_dirs

COMMAND = "experiments.costs"
DEFAULTS: dict[str, Any] = {
    "setup": DEFAULT_SETUP,
    "model": "",  # the setup's
    "node": "",  # the setup's
    "tokens": ["500", "1000", "2000", "8000", "16000", "32000"],
    "mfu": SimConfig.mfu,
    "out_dir": "",
    "overwrite": False,
}
SOURCES = ("prefill", "disk", "rdma", "ram", "hbm")
SHORT_OPTIONS = {"model": "model.name", "node": "cluster.node"}
"""``model=`` and ``node=``, the short spellings of the cluster options they give."""


def cost_table(
    model: str | ModelSpec, node: str | NodeSpec, tokens: list[int], mfu: float = SimConfig.mfu
) -> dict[str, Any]:
    """The table as a dict (see the module docstring): a preset's name or a spec each."""
    spec = model_preset(model) if isinstance(model, str) else model
    kind = parse_node(node) if isinstance(node, str) else node
    costs = NodeCosts(kind, spec, mfu=mfu)
    ms: dict[str, list[float]] = {source: [] for source in SOURCES}
    for n in tokens:
        ms["prefill"].append(costs.prefill_s(n) * 1e3)
        for tier in ("disk", "rdma", "ram", "hbm"):
            ms[tier].append(costs.load_s(n, tier) * 1e3)
    return {
        "model": costs.model.name,
        "node": costs.node.name,
        "mfu": mfu,
        "kv_bytes_per_token": costs.kv_bytes_per_token,
        "budget_tokens": costs.budget_tokens,
        "tokens": tokens,
        "ms": ms,
        "cluster_figures": ClusterSpec(spec, (kind,)).figures(),
    }


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 0.1:
        return f"{value:.2f}"
    return f"{value:.3f}"


@releasing_out_dirs
def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv, given, added = split_cluster_options(COMMAND, argv)
    options = parse_args(
        COMMAND,
        DEFAULTS,
        argv,
        cluster_help(n_nodes=False),
    )
    check_setups(COMMAND, [options["setup"]])
    if "cluster.n_nodes" in given:
        raise UsageError(
            f"{COMMAND}: cluster.n_nodes= does not apply: the table is one node's (cluster.node=, "
            "or cluster.nodes=[...] for a table per node kind)"
        )
    spelled: dict[str, str] = {}  # the builder's errors name these as typed (node=)
    for short, option in SHORT_OPTIONS.items():
        if options[short] and option in given:
            raise UsageError(
                f"{COMMAND}: {short}= and {option}= are one option: give one of them"
                f"{FROM_COMMAND_LINE}"
            )
        if options[short]:
            given = {**given, option: options[short]}
            spelled[option] = short
    try:
        tokens = [int(t) for t in options["tokens"]]
    except ValueError:
        raise UsageError(
            f"{COMMAND}: tokens must be integers, got "
            f"{echoed(options['tokens'])}{FROM_COMMAND_LINE}"
        ) from None
    if not tokens:
        raise UsageError(
            f"{COMMAND}: tokens is empty{FROM_COMMAND_LINE}; give at least one token count"
        )
    if any(t <= 0 for t in tokens):
        raise UsageError(
            f"{COMMAND}: tokens must be positive, got {echoed(tokens)}{FROM_COMMAND_LINE}"
        )
    for count in tokens:  # (one a float cannot hold ended in OverflowError's traceback)
        try:
            checked_number("tokens", count, 1, math.inf, integer=True)
        except ValueError as error:
            raise UsageError(f"{COMMAND}: {error}{FROM_COMMAND_LINE}") from None
    if not 0 < options["mfu"] <= 1:
        raise UsageError(
            f"{COMMAND}: mfu must be in (0, 1], got "
            f"{echoed(options['mfu'], quoted=False)}{FROM_COMMAND_LINE}"
        )
    from experiments.config import cluster_from_options

    _, cluster = cluster_from_options(
        COMMAND, options["setup"], given, added, spelled, takes_n_nodes=False
    )
    kinds = list({node.name: node for node in cluster.nodes}.values())  # each kind once
    if options["out_dir"]:
        claim_out_dir(
            options["out_dir"], f"{COMMAND}: out_dir", ("costs.json",), options["overwrite"]
        )
    tables = [cost_table(cluster.model, kind, tokens, options["mfu"]) for kind in kinds]
    for table in tables:
        over = [n for n in tokens if n > table["budget_tokens"]]
        if over:  # (a node can never hold them: no time makes them resident)
            raise UsageError(
                f"{COMMAND}: tokens={over[0]} is more KV than {table['model']} has room for "
                f"on one {table['node']} node ({table['budget_tokens']:,} tokens, its KV "
                f"budget){FROM_COMMAND_LINE}"
            )
    for table in tables:
        _print_table(table)
    result = tables[0] if len(tables) == 1 else {"nodes": tables}
    if options["out_dir"]:
        path = write_json_atomic(f"{options['out_dir']}/costs.json", result)
        print(f"wrote {path}")
    return result


def _print_table(table: dict[str, Any]) -> None:
    tokens = table["tokens"]
    print(
        f"ms to make N tokens of KV resident: {table['model']} on one {table['node']} node "
        f"(KV {table['kv_bytes_per_token']:,.0f} B/token, budget {table['budget_tokens']:,} "
        f"tokens, prefill at MFU {table['mfu']:g})"
    )
    cells = {source: [_fmt(v) for v in table["ms"][source]] for source in SOURCES}
    widths = [  # (at least two spaces between columns, however long a figure)
        max(10, 2 + len(f"{n:,}"), *(2 + len(cells[source][i]) for source in SOURCES))
        for i, n in enumerate(tokens)
    ]
    print(f"{'source':<8}" + "".join(f"{n:>{w},}" for n, w in zip(tokens, widths, strict=True)))
    for source in SOURCES:
        row = zip(cells[source], widths, strict=True)
        print(f"{source:<8}" + "".join(f"{cell:>{width}}" for cell, width in row))
    ratio_rdma = table["ms"]["prefill"][0] / table["ms"]["rdma"][0]
    ratio_ram = table["ms"]["prefill"][0] / table["ms"]["ram"][0]
    print(f"prefill is {ratio_rdma:.0f}x an RDMA copy and {ratio_ram:.0f}x a RAM load")


if __name__ == "__main__":
    raise SystemExit(main_guard(main))
