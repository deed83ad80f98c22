"""``eft_pull`` against the other routers on the test windows: ``eft_pull.md``.

    python docs/results/eft_pull_table.py EVAL_ROOT   # read the runs, write both files
    python docs/results/eft_pull_table.py             # the table again from the JSON

Reads ``EVAL_ROOT/<setup>/<family>/results.json``, each written by

    python -m experiments.evaluate "policies=[eft_step,eft_pull,btb_pending,oracle_warm]" \\
        workload=FAMILY workload.eval_windows=null setup=SETUP logger=none \\
        out_dir=EVAL_ROOT/SETUP/FAMILY

(all 15 test windows, evaluation seed 0, causal KV), keeps the rows' mean and p95
TTFT and warm copies in ``eft_pull_test.json`` and writes ``eft_pull.md`` here,
with ``improve_warm_step``'s test means from ``rollout_improvement_test.json``
(the same windows and seed). Shares the runs' reading with ``eft_step_table.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from eft_step_table import FAMILIES, SETUPS, change, read_runs

HERE = Path(__file__).resolve().parent
POLICIES = ("eft_step", "btb_pending", "oracle_warm", "eft_pull", "floor")
AGENT = "improve_warm_step"


def table(rows: list[dict], agent_rows: list[dict]) -> str:
    by = {(r["setup"], r["workload"], r["policy"]): r for r in rows}
    agent = {(r["setup"], r["workload"]): r for r in agent_rows if r["policy"] == AGENT}
    lines = [
        "# `eft_pull` against the other routers (test windows)",
        "",
        "`eft_pull` is `eft_step` that also copies a request's prefix from a node",
        "holding it to the node where, copied, its first token is expected soonest",
        "([baselines.md](../baselines.md)). All 15 test windows of each family,",
        "evaluation seed 0, causal KV; mean and p95 TTFT (s) over the windows' pooled",
        "requests, and the warm copies of all 15 windows. `oracle_warm` is",
        "clairvoyant; the last column is the RL agent `improve_warm_step`'s mean (from",
        "`rollout_improvement_test.json`). Written by",
        "[eft_pull_table.py](eft_pull_table.py) from `eft_pull_test.json`.",
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
                f"| {oracle['ttft_mean_s']:.4g} / {oracle['ttft_p95_s']:.4g} "
                f"({oracle['warm_copies']:,}) "
                f"| {pull['ttft_mean_s']:.4g} / {pull['ttft_p95_s']:.4g} ({pull['warm_copies']:,}) "
                f"| {change(pull['ttft_mean_s'], oracle['ttft_mean_s'])} / "
                f"{change(pull['ttft_p95_s'], oracle['ttft_p95_s'])} "
                f"| {agent_mean} | {floor['ttft_mean_s']:.4g} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    data = HERE / "eft_pull_test.json"
    if argv:
        rows = read_runs(Path(argv[0]), POLICIES, ("warm_copies",))
        data.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    rows = json.loads(data.read_text())["rows"]
    agent_rows = json.loads((HERE / "rollout_improvement_test.json").read_text())["rows"]
    (HERE / "eft_pull.md").write_text(table(rows, agent_rows))


if __name__ == "__main__":
    main(sys.argv[1:])
