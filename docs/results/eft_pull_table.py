"""``eft_pull`` against the other routers on the test windows: ``eft_pull.md``.

    python docs/results/eft_pull_table.py EVAL_ROOT MORE_ROOT CONTENTION_ROOT
    python docs/results/eft_pull_table.py             # the tables again from the JSON

The first form reads ``EVAL_ROOT/<setup>/<family>/results.json``, each written by

    python -m experiments.evaluate "policies=[eft_step,eft_pull,btb_pending,oracle_warm]" \\
        workload=FAMILY workload.eval_windows=null setup=SETUP logger=none \\
        out_dir=EVAL_ROOT/SETUP/FAMILY

``MORE_ROOT/<family>/results.json`` for the other families on 70b, each by

    python -m experiments.evaluate "policies=[btb,btb_pending,eft_step,eft_pull,oracle_warm]" \\
        workload=FAMILY workload.eval_windows=null setup=70b_h100x4 logger=none \\
        out_dir=MORE_ROOT/FAMILY

and ``CONTENTION_ROOT/<family>/results.json``, the first command on 70b with
``sim.copy_model=contention`` and ``out_dir=CONTENTION_ROOT/FAMILY`` (all 15 test
windows, evaluation seed 0, causal KV).
It keeps the rows' mean and p95 TTFT and warm copies in ``eft_pull_test.json``;
both forms write ``eft_pull.md`` here from it, with ``improve_warm_step``'s test
means from ``rollout_improvement_test.json`` (the same windows and seed). The
runs are read with ``eft_step_table.py``'s ``read_runs`` and ``kept_rows``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from capacity_floor_table import REPLACED
from eft_step_table import FAMILIES, SETUPS, change, kept_rows, read_runs

HERE = Path(__file__).resolve().parent
POLICIES = ("eft_step", "btb_pending", "oracle_warm", "eft_pull", "floor")
AGENT = "improve_warm_step"
MORE_FAMILIES = ("decoy_heavy", "multi_tenant", "agent_fanout", "conversation_like")
MORE_POLICIES = ("btb", "btb_pending", "eft_step", "oracle_warm", "eft_pull", "floor")


def read_families(root: Path, families: tuple[str, ...], policies: tuple[str, ...]) -> list[dict]:
    """The rows of ``policies`` in ``root/<family>/results.json``, with their copies."""
    return [
        row
        for family in families
        for row in kept_rows(root / family / "results.json", policies, ("warm_copies",))
    ]


def cell(row: dict) -> str:
    """Mean / p95 (copies)."""
    copies = "" if row.get("warm_copies") is None else f" ({row['warm_copies']:,})"
    return f"{row['ttft_mean_s']:.4g} / {row['ttft_p95_s']:.4g}{copies}"


def table(data: dict, agent_rows: list[dict]) -> str:
    by = {(r["setup"], r["workload"], r["policy"]): r for r in data["rows"]}
    agent = {(r["setup"], r["workload"]): r for r in agent_rows if r["policy"] == AGENT}
    lines = [
        "# `eft_pull` against the other routers (test windows)",
        "",
        REPLACED,
        "",
        "`eft_pull` is `eft_step` that also copies a request's prefix from a node",
        "holding it to another node and routes it there when its first token is",
        "expected sooner there than anywhere without a copy",
        "([baselines.md](../baselines.md)).",
        "All 15 test windows of each family, evaluation seed 0, causal KV; mean and p95",
        "TTFT (s) over the windows' pooled requests, and the warm copies of all 15",
        "windows. `oracle_warm` is clairvoyant; the column before the floor's is the",
        "RL agent `improve_warm_step`'s mean (from `rollout_improvement_test.json`).",
        "Written by",
        "[eft_pull_table.py](eft_pull_table.py) from `eft_pull_test.json`; every row",
        "measured on 2026-12-05 (evening), after a request came to wait for a copy only",
        "when that beats loading from its node's RAM and the contention model's landing",
        "estimate was fixed ([physics.md](../physics.md#warm-copies-rdma)), and again on",
        "2026-12-06, after the forecast came to count a copy in flight from when it lands",
        "([baselines.md](../baselines.md)): only `eft_pull` moved (70b's `mixed` 0.8334",
        "to 0.8289 s, `rising_load` 0.06656 to 0.06645 s; elsewhere a few copies).",
        "",
        "| setup | family | `eft_step` mean | `btb_pending` mean | `oracle_warm` mean / p95 "
        "(copies) | `eft_pull` mean / p95 (copies) | `eft_pull` vs `oracle_warm` mean / p95 "
        f"| `{AGENT}` mean | floor mean |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for setup in SETUPS:
        for family in FAMILIES:
            step, pending, oracle, pull, floor = (by[(setup, family, p)] for p in POLICIES)
            learned = agent.get((setup, family))
            agent_mean = f"{learned['ttft_mean_s']:.4g}" if learned else ""
            lines.append(
                f"| {setup} | {family} "
                f"| {step['ttft_mean_s']:.4g} | {pending['ttft_mean_s']:.4g} "
                f"| {cell(oracle)} | {cell(pull)} "
                f"| {change(pull['ttft_mean_s'], oracle['ttft_mean_s'])} / "
                f"{change(pull['ttft_p95_s'], oracle['ttft_p95_s'])} "
                f"| {agent_mean} | {floor['ttft_mean_s']:.4g} |"
            )
    return "\n".join(lines + more_tables(data)) + "\n"


def more_tables(data: dict) -> list[str]:
    """The other families on 70b, and the five under the contention copy model."""
    more = {(r["workload"], r["policy"]): r for r in data["other_families"]}
    lines = [
        "",
        "## The other families (llama-3.3-70b)",
        "",
        "The same, on the families the targets leave out",
        "([workloads.md](../workloads.md)); mean / p95 TTFT (s) (warm copies).",
        "",
        "| family | " + " | ".join(f"`{p}`" for p in MORE_POLICIES[:-1]) + " | floor mean "
        "| `eft_pull` vs `oracle_warm` mean |",
        "|---|" + "--:|" * (len(MORE_POLICIES) + 1),
    ]
    for family in MORE_FAMILIES:
        rows = [more[(family, p)] for p in MORE_POLICIES]
        pull, oracle, floor = rows[-2], rows[-3], rows[-1]
        against = change(pull["ttft_mean_s"], oracle["ttft_mean_s"])
        cells = " | ".join(cell(r) for r in rows[:-1])
        lines.append(f"| {family} | {cells} | {floor['ttft_mean_s']:.4g} | {against} |")
    contention = {(r["workload"], r["policy"]): r for r in data["contention"]}
    lines += [
        "",
        "## Under the contention copy model (llama-3.3-70b)",
        "",
        "`sim.copy_model=contention`: copies run in the background and share the",
        "nodes' NICs ([physics.md](../physics.md)); `eft_pull` still prices a copy",
        "as the reference model runs it.",
        "",
        "| family | `eft_step` | `btb_pending` | `oracle_warm` | `eft_pull` "
        "| `eft_pull` vs `oracle_warm` mean / p95 |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for family in FAMILIES:
        step, pending, oracle, pull = (
            contention[(family, p)] for p in ("eft_step", "btb_pending", "oracle_warm", "eft_pull")
        )
        lines.append(
            f"| {family} | {cell(step)} | {cell(pending)} | {cell(oracle)} | {cell(pull)} "
            f"| {change(pull['ttft_mean_s'], oracle['ttft_mean_s'])} / "
            f"{change(pull['ttft_p95_s'], oracle['ttft_p95_s'])} |"
        )
    return lines


def main(argv: list[str]) -> None:
    data = HERE / "eft_pull_test.json"
    if argv:
        main_root, more_root, contention_root = (Path(a) for a in argv)
        runs = {
            "rows": read_runs(main_root, POLICIES, ("warm_copies",)),
            "other_families": read_families(more_root, MORE_FAMILIES, MORE_POLICIES),
            "contention": read_families(contention_root, FAMILIES, POLICIES),
        }
        data.write_text(json.dumps(runs, indent=1) + "\n")
    agent_rows = json.loads((HERE / "rollout_improvement_test.json").read_text())["rows"]
    (HERE / "eft_pull.md").write_text(table(json.loads(data.read_text()), agent_rows))


if __name__ == "__main__":
    main(sys.argv[1:])
