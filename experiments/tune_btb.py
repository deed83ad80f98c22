"""BTB's thresholds as an objective: mean TTFT on the train windows.

    python -m experiments.tune_btb x=3 y=128 z=0.5 m=2      # one evaluation
    python -m experiments.tune_btb -m                    # the Optuna sweep of conf/tune_btb.yaml
    python -m experiments.tune_btb -m hydra.sweeper.n_trials=50 workload=rising_load

Each job writes ``objective.json`` (thresholds, mean TTFT, the rows) to its folder.
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from experiments.config import cluster_of, register_configs, sim_of
from experiments.jobs import hydra_entry, run_dir, run_job, workload_params

register_configs()


def objective(cfg: DictConfig) -> float:
    from baselines.btb import BTB
    from envs.windows import window_pool
    from experiments._io import write_json_atomic
    from experiments.evaluation import evaluate_policies

    m = int(cfg.m)
    n_nodes = int(cfg.cluster.n_nodes)
    if not 1 <= m <= n_nodes:
        raise ValueError(f"m must be in 1..{n_nodes} (the cluster's nodes), got {m}")
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
        workload=cfg.workload.name,
        baseline=None,
        trace_window=None,
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
