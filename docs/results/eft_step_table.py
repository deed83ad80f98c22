"""``eft_step`` against ``eft`` on the test windows: ``eft_step.md``.

    python docs/results/eft_step_table.py EVAL_ROOT   # read the runs, write both files
    python docs/results/eft_step_table.py             # the table again from the JSON

Reads ``EVAL_ROOT/<setup>/<family>/results.json``, each written by

    python -m experiments.evaluate policies=[eft,eft_step] workload=FAMILY \\
        workload.eval_windows=null setup=SETUP logger=none out_dir=EVAL_ROOT/SETUP/FAMILY

(all 15 test windows, evaluation seed 0, causal KV), keeps the rows' mean and p95
TTFT in ``eft_step_test.json`` and writes ``eft_step.md`` here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SETUPS = ("70b_h100x4", "qwen3_8b_h100x4", "glm45_h100x4")
FAMILIES = ("bursted_synthetic", "bursted_synthetic_1s", "rising_load", "mixed", "art_like")
POLICIES = ("eft", "eft_step", "floor")
KEPT = ("setup", "workload", "policy", "windows", "requests", "ttft_mean_s", "ttft_p95_s")


def read_runs(
    root: Path, policies: tuple[str, ...] = POLICIES, extra: tuple[str, ...] = ()
) -> list[dict]:
    """The rows of ``policies`` in ``root/<setup>/<family>/results.json``."""
    return [
        row
        for setup in SETUPS
        for family in FAMILIES
        for row in kept_rows(root / setup / family / "results.json", policies, extra)
    ]


def kept_rows(path: Path, policies: tuple[str, ...], extra: tuple[str, ...] = ()) -> list[dict]:
    """The rows of ``policies`` in one run's ``results.json``: the ``KEPT`` fields,
    and the ``extra`` ones (None where a row lacks one)."""
    rows = []
    for row in json.loads(path.read_text())["rows"]:
        if row["policy"] in policies:
            kept = {key: row[key] for key in KEPT}
            kept.update({key: row.get(key) for key in extra})
            rows.append(kept)
    return rows


def change(new: float, old: float) -> str:
    return f"{(new / old - 1) * 100:+.1f} %"


def table(rows: list[dict]) -> str:
    by = {(r["setup"], r["workload"], r["policy"]): r for r in rows}
    lines = [
        "# `eft_step` against `eft` (test windows)",
        "",
        "`eft_step` is `eft` whose first-token estimates also count the rest of the",
        "decode step each node is running ([baselines.md](../baselines.md)). All 15",
        "test windows of each family, evaluation seed 0, causal KV; mean and p95 TTFT",
        "(s) over the windows' pooled requests; the change is `eft_step`'s against",
        "`eft`'s. Written by [eft_step_table.py](eft_step_table.py) from",
        "`eft_step_test.json`.",
        "",
        "| setup | family | `eft` mean / p95 | `eft_step` mean / p95 "
        "| change of the mean / p95 | floor mean |",
        "|---|---|--:|--:|--:|--:|",
    ]
    for setup in SETUPS:
        for family in FAMILIES:
            eft, step, floor = (by[(setup, family, p)] for p in POLICIES)
            lines.append(
                f"| {setup} | {family} "
                f"| {eft['ttft_mean_s']:.4g} / {eft['ttft_p95_s']:.4g} "
                f"| {step['ttft_mean_s']:.4g} / {step['ttft_p95_s']:.4g} "
                f"| {change(step['ttft_mean_s'], eft['ttft_mean_s'])} / "
                f"{change(step['ttft_p95_s'], eft['ttft_p95_s'])} "
                f"| {floor['ttft_mean_s']:.4g} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    data = HERE / "eft_step_test.json"
    if argv:
        data.write_text(json.dumps({"rows": read_runs(Path(argv[0]))}, indent=1) + "\n")
    rows = json.loads(data.read_text())["rows"]
    (HERE / "eft_step.md").write_text(table(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
