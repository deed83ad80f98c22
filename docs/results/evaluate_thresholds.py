"""The thresholds agent's test table: docs/results/agents_vs_baselines_thresholds_*.

    python docs/results/evaluate_thresholds.py SETUP [--tag=TAG] [--out=DIR] RUN_DIR [RUN_DIR ...]

Each RUN_DIR is a ``python -m experiments.train +experiment=ppo_thresholds seed=S
out_dir=RUN_DIR`` folder (or ``+experiment=ppo_thresholds_eft`` or
``ppo_thresholds_spread``; its ``agent/``, the checkpoint validation picked), or
an agent folder itself (``agents/zoo/NAME``). Each agent's rows are named after
its folder (the run folder's name, numbered when two are the same). On every
test window of the four burst families (and art_like) the agents run
deterministic (greedy) and stochastic (sampled; each window's draws come from the
agent's own stream, seeded from the evaluation seed and the window) next to
cache_aware, eft, btb, btb_tuned, btb_pending, btb_eft, eft_pull_spread and
oracle_warm (causal KV, seed 0). Writes
``agents_vs_baselines_thresholds[_TAG]_<family>.json`` (every row) and
``agents_vs_baselines_thresholds[_TAG]_table.md`` (mean ± std over the agents, ddof 0)
into DIR (default: this folder, docs/results/; an existing file is replaced, so
give a new TAG or DIR to keep a previous table).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

from agents.adapter import AgentPolicy
from baselines.policy import Policy, make_policy
from envs.files import write_json_atomic
from envs.sim import SimConfig
from experiments.evaluation import evaluate_policies, split_windows

FAMILIES = ("bursted_synthetic", "bursted_synthetic_1s", "rising_load", "mixed", "art_like")
BASELINES = (
    "cache_aware",
    "eft",
    "btb",
    "btb_tuned",
    "btb_pending",
    "btb_eft",
    "eft_pull_spread",
    "oracle_warm",
)
OUT = Path(__file__).resolve().parent


def pct(agent: float, ref: float) -> float:
    """TTFT reduction of ``agent`` against ``ref``, percent (positive: agent faster)."""
    return 100.0 * (1.0 - agent / ref)


def agent_folder(run: Path) -> Path:
    """The agent of RUN_DIR: its ``agent/`` (a training run), or RUN_DIR itself."""
    return run if (run / "agent.json").is_file() else run / "agent"


def labels(runs: list[Path]) -> list[str]:
    """One name per run: its folder's, numbered (``NAME#2``) where two are the same."""
    names = [run.name for run in runs]
    return [
        name if names.count(name) == 1 else f"{name}#{names[: i + 1].count(name)}"
        for i, name in enumerate(names)
    ]


def evaluate(setup: str, runs: list[Path], family: str) -> list[dict]:
    policies: dict[str, Policy] = {name: make_policy(name) for name in BASELINES}
    for run, label in zip(runs, labels(runs)):
        for mode, greedy in (("det", True), ("stoch", False)):
            agent = AgentPolicy.load(agent_folder(run), f"{label}_{mode}", greedy)
            policies[agent.name] = agent
    return rows_on_test_windows(policies, setup, family)


def rows_on_test_windows(policies: dict[str, Policy], setup: str, family: str) -> list[dict]:
    """Each policy's row on all of ``family``'s test windows on ``setup``: evaluation
    seed 0, causal KV (the default simulator), as the results pages measure them."""
    return rows_on_split(policies, setup, family, "test", None)


def rows_on_split(
    policies: dict[str, Policy], setup: str, family: str, split: str, limit: int | None
) -> list[dict]:
    """Each policy's row on the first ``limit`` windows (None: all) of ``family``'s
    ``split`` on ``setup``, evaluation seed 0, causal KV."""
    out = evaluate_policies(
        policies,
        setup,
        split_windows(family, limit=limit, split=split),
        SimConfig(),
        seed=0,
        workload=family,
        trace_window=None,
    )
    return [r.row for r in out]


def both(row: dict) -> str:
    return f"{row['ttft_mean_s']:.3f} / {row['ttft_p95_s']:.3f}"


def stats(rows: dict[str, dict], names: list[str], key: str) -> tuple[float, float]:
    values = np.array([rows[n][key] for n in names], dtype=float)
    return float(values.mean()), float(values.std())


SHOWN = ("btb", "btb_tuned", "btb_pending", "btb_eft", "eft_pull_spread")
"""The baselines whose mean / p95 the table shows, in its order."""


def header(setup: str, seeds: int, shown: tuple[str, ...] = SHOWN) -> list[str]:
    """The table's lines above its rows."""
    columns = "".join(f"| {name} mean / p95 " for name in shown)
    return [
        f"Setup {setup}, all 15 test windows per family, causal KV, seed 0; agent = "
        f"{seeds} training seeds (mean ± std over seeds); reductions vs btb_tuned "
        "(positive: agent faster).",
        "",
        f"| family | eval | agent mean (s) | agent p95 (s) {columns}"
        "| oracle_warm mean | vs btb_tuned: mean / p95 | target met |",
        "|---|---|--:|--:|" + "--:|" * len(shown) + "--:|--:|---|",
    ]


def family_lines(
    family: str, got: dict[str, dict], runs: list[str], shown: tuple[str, ...] = SHOWN
) -> list[str]:
    """The table's two lines of one family (det, stoch) from its rows (``got``, by
    policy; ``runs``, the agents' labels)."""
    tuned = got["btb_tuned"]
    lines = []
    for mode in ("det", "stoch"):
        names = [f"{label}_{mode}" for label in runs]
        mean, mean_sd = stats(got, names, "ttft_mean_s")
        p95, p95_sd = stats(got, names, "ttft_p95_s")
        d_mean = [pct(got[n]["ttft_mean_s"], tuned["ttft_mean_s"]) for n in names]
        d_p95 = [pct(got[n]["ttft_p95_s"], tuned["ttft_p95_s"]) for n in names]
        met = "yes" if np.mean(d_mean) >= 5.0 and np.mean(d_p95) >= 0.0 else "no"
        if family == "art_like":
            met = "-"
        columns = "".join(f"| {both(got[name])} " for name in shown)
        lines.append(
            f"| {family} | {mode} | {mean:.3f} ± {mean_sd:.3f} | {p95:.3f} ± {p95_sd:.3f} "
            f"{columns}| {got['oracle_warm']['ttft_mean_s']:.3f} "
            f"| {np.mean(d_mean):+.1f} ± {np.std(d_mean):.1f}% / "
            f"{np.mean(d_p95):+.1f} ± {np.std(d_p95):.1f}% | {met} |"
        )
    return lines


def main(setup: str, run_dirs: list[str], tag: str = "", out: Path = OUT) -> None:
    torch.set_num_threads(1)  # one epoch's forward pass is tiny: more threads only wait
    runs = [Path(r) for r in run_dirs]
    lines = header(setup, len(runs))
    for family in FAMILIES:
        rows = evaluate(setup, runs, family)
        path = out / f"agents_vs_baselines_thresholds{tag}_{family}.json"
        write_json_atomic(path, {"rows": rows})  # strict JSON: a non-finite figure is null
        got = {r["policy"]: r for r in rows}
        lines.extend(family_lines(family, got, labels(runs)))
        print(lines[-2], lines[-1], sep="\n", flush=True)
    table = out / f"agents_vs_baselines_thresholds{tag}_table.md"
    table.write_text("\n".join(lines) + "\n")
    print(f"wrote {table}")


if __name__ == "__main__":
    if len(sys.argv) < 2 or {"-h", "--help"} & set(sys.argv[1:]):
        print(__doc__)
        raise SystemExit(0 if len(sys.argv) > 1 else 2)
    args = sys.argv[2:]
    tags = [a.removeprefix("--tag=") for a in args if a.startswith("--tag=")]
    outs = [a.removeprefix("--out=") for a in args if a.startswith("--out=")]
    dirs = [a for a in args if not a.startswith(("--tag=", "--out="))]
    missing = [d for d in dirs if not (agent_folder(Path(d)) / "agent.json").is_file()]
    if not dirs or missing:
        print(f"error: no agent in {missing}" if missing else __doc__, file=sys.stderr)
        raise SystemExit(2)
    out = Path(outs[-1]) if outs else OUT
    out.mkdir(parents=True, exist_ok=True)
    main(sys.argv[1], dirs, f"_{tags[-1]}" if tags else "", out)
