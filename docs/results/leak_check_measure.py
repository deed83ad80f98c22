"""The route-and-warm agents' and the baselines' rows on the clean and the leaked test
windows apart: ``leak_check.json`` (read by ``leak_check.py``).

    python docs/results/leak_check_measure.py [SETUP ...]   # default: 70b_h100x4
    python docs/results/leak_check_measure.py 70b_h100x4 qwen3_8b_h100x4 glm45_h100x4

(the second wrote the stored file, about 8 minutes a setup on 2 busy cores; a run
replaces its setups' rows and keeps the others).

Runs what ``target_cells.py``'s rows come from (``python -m experiments.evaluate
checkpoint=[agents/zoo/NAME,...] policies=[oracle_warm,btb,...,llmd]
workload=FAMILY workload.eval_windows=15 setup=SETUP``: all 15 test windows,
evaluation seed 0, causal KV, greedy agents, the floors) on the three families whose
window i sends the same bursts (``leak_check.SIBLINGS``), in the same order and on
the same simulator streams, and keeps each row pooled over all 15 windows, over the
clean ones and over the leaked ones (``leak_check.leaked``), with its per-window means.
The rows over all 15 must equal the stored ones (``capacity_floor.json``,
``rollout_improvement_test.json``; ``leak_check.check_measured``, run by
``leak_check.py``), so both are the same measurement.
Nothing is trained and no split changes.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from capacity_floor_table import BASELINES
from leak_check import HERE, ROOT, SIBLINGS, leaked, train_windows_seen
from target_cells import AGENTS

OUT = HERE / "leak_check.json"
WORKLOADS = {
    "synthetic": "bursted_synthetic",
    "synthetic1s": "bursted_synthetic_1s",
    "mixed": "mixed",
}
POLICIES = ("oracle_warm", *BASELINES)
KEPT = ("windows", "requests", "ttft_mean_s", "ttft_p95_s", "ttft_mean_s_per_window")


def _config(setup: str, workload: str):  # type: ignore[no-untyped-def]
    from hydra import compose, initialize_config_dir

    from experiments.config import register_configs

    register_configs()
    overrides = [
        "checkpoint=[" + ",".join(f"agents/zoo/{a}" for a in AGENTS) + "]",
        "policies=[" + ",".join(POLICIES) + "]",
        f"workload={workload}",
        "workload.eval_windows=15",
        f"setup={setup}",
        "logger=none",
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="evaluate", overrides=overrides)


def measure(setup: str, family: str, dirty: set[int]) -> list[dict]:
    """Every policy's rows on ``family``'s 15 test windows as ``experiments.evaluate``
    runs them, pooled over all, the clean and the leaked windows."""
    from omegaconf import OmegaConf

    from agents.adapter import AgentPolicy
    from baselines.policy import make_policy
    from experiments.compare import configure_agents, policy_settings
    from experiments.config import cluster_of, setup_label, sim_of, workload_label
    from experiments.evaluation import DEFAULT_BASELINE, evaluate_policies, summarize_windows
    from experiments.jobs import eval_windows

    cfg = _config(setup, WORKLOADS[family])
    agents = {}
    for name in AGENTS:
        agent = AgentPolicy.load(ROOT / "agents" / "zoo" / name)
        agent.name = name
        agent.check_cluster(cluster_of(cfg), sim_of(cfg))
        agents[name] = agent
    names = list(dict.fromkeys([DEFAULT_BASELINE, *cfg.policies]))
    every = policy_settings(
        OmegaConf.to_container(cfg.policy_kwargs, resolve=True),  # type: ignore[arg-type]
        names,
        agents,
    )
    settings = configure_agents(agents, every)
    policies = {name: make_policy(name, **settings.get(name, {})) for name in names}
    policies.update(agents)
    windows = eval_windows(cfg, cfg.workload.eval_windows, "test")
    index = [int(w.name.rpartition("-")[2]) for w in windows]
    sizes = [len(w.requests) for w in windows]
    runs = evaluate_policies(
        policies,
        cluster_of(cfg),
        windows,
        sim_of(cfg),
        seed=int(cfg.seed),
        workload=workload_label(cfg),
        setup_name=setup_label(cfg),
        floor=True,
        trace_window=None,
    )
    rows = []
    for run in runs:
        row = {"setup": setup, "workload": WORKLOADS[family], "policy": run.row["policy"]}
        if not run.windows:  # the floors: no simulation; their bounds split by window
            rows += _floor_rows(run, row, sizes, index, dirty)
            continue
        for subset in ("all", "clean", "leaked"):
            at = [
                p
                for p, i in enumerate(index)
                if subset == "all" or (i in dirty) == (subset == "leaked")
            ]
            chosen = [run.windows[p] for p in at]
            kept = summarize_windows(chosen, setup, row["workload"], row["policy"], sim_of(cfg))
            rows.append(
                {
                    **row,
                    "subset": subset,
                    "trace_ids": [windows[p].name for p in at],
                    **{k: kept[k] for k in KEPT},
                }
            )
    return rows


def _floor_rows(run, row: dict, sizes: list[int], index: list[int], dirty: set[int]) -> list[dict]:  # type: ignore[no-untyped-def]
    """``floor`` and ``floor_capacity`` over all, the clean and the leaked windows:
    ``floor``'s per-request bounds split by window, ``floor_capacity``'s per-window
    means pooled by their requests (it bounds no percentile)."""
    import numpy as np

    from experiments.evaluation import ttft_stats

    means = run.row["ttft_mean_s_per_window"]
    ends = np.cumsum(sizes)
    parts = np.split(run.ttft_s, ends[:-1]) if run.ttft_s.size else []
    out = []
    for subset in ("all", "clean", "leaked"):
        at = [
            p
            for p, i in enumerate(index)
            if subset == "all" or (i in dirty) == (subset == "leaked")
        ]
        n = [sizes[p] for p in at]
        kept: dict[str, Any] = {"windows": len(at), "requests": int(sum(n))}
        if parts:
            kept.update(ttft_stats(np.concatenate([parts[p] for p in at])))
        else:
            kept["ttft_mean_s"] = float(np.dot([means[p] for p in at], n) / sum(n))
            kept["ttft_p95_s"] = None
        kept["ttft_mean_s_per_window"] = [means[p] for p in at]
        out.append({**row, "subset": subset, **{k: kept[k] for k in KEPT}})
    return out


def main() -> None:
    setups = sys.argv[1:] or ["70b_h100x4"]
    seen = {tuple(sorted(train_windows_seen(a))) for a in AGENTS}
    assert len(seen) == 1, "the agents' leaked windows differ: measure them apart"
    (one,) = seen
    stored = json.loads(OUT.read_text())["rows"] if OUT.exists() else []
    rows = [r for r in stored if r["setup"] not in setups]
    for setup in setups:
        for family in SIBLINGS:
            dirty = leaked(set(one), family)
            print(f"{setup} {family}: leaked {sorted(dirty)}", flush=True)
            rows += measure(setup, family, dirty)
    OUT.write_text(json.dumps({"agents": list(AGENTS), "rows": rows}, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
