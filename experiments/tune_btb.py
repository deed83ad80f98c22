"""BTB's thresholds as an objective: mean TTFT on the train windows.

    python -m experiments.tune_btb x=3 y=128 z=0.5 m=2      # one evaluation
    python -m experiments.tune_btb -m                    # the Optuna sweep of conf/tune_btb.yaml
    python -m experiments.tune_btb -m hydra.sweeper.n_trials=50 workload=rising_load

Each job writes ``objective.json`` (thresholds, mean TTFT, the rows) to its folder.
"""

from __future__ import annotations

from typing import Any

import hydra
from omegaconf import DictConfig

from experiments.config import (
    cluster_of,
    register_configs,
    setup_label,
    sim_of,
    workload_label,
)
from experiments.jobs import check_world, hydra_entry, run_dir, run_job, workload_params

register_configs()


def search_space_bound(text: str) -> float | None:
    """The largest value a sweeper's search-space override can draw (``int(interval(1,
    4))``, ``choice(1, 2)``, ``range(1, 5)``, or a plain value); None if not numeric."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep

    value = OverridesParser.create().parse_override(f"key={text}").value()
    if isinstance(value, IntervalSweep):
        values: list[Any] = [value.end]
    elif isinstance(value, RangeSweep):
        values = list(value.range()) if hasattr(value, "range") else [value.stop]
    elif isinstance(value, ChoiceSweep):
        values = list(value.list)
    else:
        values = [value]
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return max(numbers) if numbers else None


def check_thresholds(cfg: Any) -> None:
    """BTB's M counts warm copies, so at most the cluster's nodes; checked for the
    value of this job and, in a sweep, for the whole search space of M."""
    from hydra.core.hydra_config import HydraConfig

    n_nodes = int(cfg.cluster.n_nodes)
    where = f"the cluster's nodes, cluster.n_nodes={n_nodes}"
    if HydraConfig.initialized():
        space = HydraConfig.get().sweeper.get("params") or {}
        if "m" in space:
            top = search_space_bound(str(space["m"]))
            if top is not None and top > n_nodes:
                raise ValueError(
                    f"hydra.sweeper.params.m={space['m']} allows m up to {top:g}, above {where}; "
                    f"e.g. hydra.sweeper.params.m='int(interval(1, {n_nodes}))'"
                )
    if not 1 <= int(cfg.m) <= n_nodes:
        raise ValueError(f"m must be in 1..{n_nodes} ({where}), got {cfg.m}")
    for field, low in (("x", 1), ("y", 1)):
        if cfg[field] < low:
            raise ValueError(f"{field} must be >= {low}, got {cfg[field]}")
    if not cfg.z > 0:
        raise ValueError(f"z must be > 0 (seconds), got {cfg.z}")


def objective(cfg: DictConfig) -> float:
    from baselines.btb import BTB
    from envs.windows import window_pool
    from experiments._io import write_json_atomic
    from experiments.evaluation import evaluate_policies

    check_world(cfg)
    check_thresholds(cfg)
    m = int(cfg.m)
    out_dir = run_dir(cfg, "tune_btb")
    params = workload_params(cfg)
    windows = window_pool(
        cfg.workload.name, "train", int(cfg.workload.seed), cfg.workload.train_pool, params
    )
    policy = BTB(x=int(cfg.x), y=int(cfg.y), z=float(cfg.z), m=m)
    runs = evaluate_policies(
        {"btb": policy},
        cluster_of(cfg),
        windows,
        sim_of(cfg),
        seed=int(cfg.seed),
        workload=workload_label(cfg),
        baseline=None,
        trace_window=None,
        setup_name=setup_label(cfg),
    )
    row = runs[0].row
    value = float(row["ttft_mean_s"])
    write_json_atomic(
        out_dir / "objective.json",
        {"x": cfg.x, "y": cfg.y, "z": cfg.z, "m": cfg.m, "ttft_mean_s": value, "row": row},
    )
    print(f"btb x={cfg.x} y={cfg.y} z={cfg.z:.3g} m={cfg.m}: mean TTFT {value:.4f} s")
    return value


@hydra.main(version_base="1.3", config_path="../conf", config_name="tune_btb")
def main(cfg: DictConfig) -> float:
    return run_job(objective, cfg)


if __name__ == "__main__":
    raise SystemExit(hydra_entry("experiments.tune_btb", main))
