"""Milliseconds to make N tokens of KV resident, from each source (the published check table).

    python -m experiments.costs [setup=70b_h100x4] [model=PRESET] [node=GPUsxGPU]
                                [tokens=500,1000,2000,8000,16000,32000] [mfu=0.5]
                                [out_dir=PATH]

``setup=`` (one of the published setups, e.g. ``glm52_h100x8``) chooses the model
and the node; ``model=`` and ``node=``, when given, win over the setup's, as
``model=`` and ``cluster=`` do on the Hydra commands (``setup=qwen3_8b_h100x4
model=glm-4.5`` is glm-4.5 on a 4xH100 node; the table's first line names the
model and node it is for). ``mfu=`` is the prefill's model FLOPs utilisation,
in (0, 1] (``sim.mfu`` on the Hydra commands; the default is its default): it
sets the prefill row only. Prints the table and, with ``out_dir``, writes
``costs.json``: ``{"model", "node", "mfu", "kv_bytes_per_token",
"budget_tokens", "tokens": [...], "ms": {"prefill": [...], "disk": [...],
"rdma": [...], "ram": [...], "hbm": [...]}}``.
"""

from __future__ import annotations

from typing import Any

from envs.files import write_json_atomic
from envs.sim.config import DEFAULT_SETUP, SETUPS, SimConfig
from envs.sim.timing import NodeCosts, model_preset, parse_node
from experiments._cli import UsageError, main_guard, naming_value, parse_args
from experiments._io import claim_out_dir, releasing_out_dirs

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


def cost_table(
    model: str, node: str, tokens: list[int], mfu: float = SimConfig.mfu
) -> dict[str, Any]:
    """The table as a dict (see the module docstring)."""
    costs = NodeCosts(parse_node(node), model_preset(model), mfu=mfu)
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
    options = parse_args("experiments.costs", DEFAULTS, argv)
    if options["setup"] not in SETUPS:
        raise UsageError(
            f"experiments.costs: unknown setup {options['setup']!r}; known: {', '.join(SETUPS)}"
        )
    setup_model, setup_node, _ = SETUPS[options["setup"]]
    model, node = options["model"] or setup_model, options["node"] or setup_node
    with naming_value("model", model):  # named as the option typed, as Hydra's model.name
        model_preset(model)
    with naming_value("node", node):
        parse_node(node)
    try:
        tokens = [int(t) for t in options["tokens"]]
    except ValueError:
        raise UsageError(
            f"experiments.costs: tokens must be integers, got {options['tokens']!r}"
        ) from None
    if not tokens:
        raise UsageError("experiments.costs: tokens is empty; give at least one token count")
    if any(t <= 0 for t in tokens):
        raise UsageError(f"experiments.costs: tokens must be positive, got {tokens!r}")
    if not 0 < options["mfu"] <= 1:
        raise UsageError(f"experiments.costs: mfu must be in (0, 1], got {options['mfu']}")
    if options["out_dir"]:
        claim_out_dir(
            options["out_dir"], "experiments.costs: out_dir", ("costs.json",), options["overwrite"]
        )
    table = cost_table(model, node, tokens, options["mfu"])
    print(
        f"ms to make N tokens of KV resident: {table['model']} on one {table['node']} node "
        f"(KV {table['kv_bytes_per_token']:,.0f} B/token, budget {table['budget_tokens']:,} "
        f"tokens, prefill at MFU {table['mfu']:g})"
    )
    header = f"{'source':<8}" + "".join(f"{n:>10,}" for n in tokens)
    print(header)
    for source in SOURCES:
        print(f"{source:<8}" + "".join(f"{_fmt(v):>10}" for v in table["ms"][source]))
    ratio_rdma = table["ms"]["prefill"][0] / table["ms"]["rdma"][0]
    ratio_ram = table["ms"]["prefill"][0] / table["ms"]["ram"][0]
    print(f"prefill is {ratio_rdma:.0f}x an RDMA copy and {ratio_ram:.0f}x a RAM load")
    if options["out_dir"]:
        path = write_json_atomic(f"{options['out_dir']}/costs.json", table)
        print(f"wrote {path}")
    return table


if __name__ == "__main__":
    raise SystemExit(main_guard(main))
