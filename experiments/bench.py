"""Throughput benchmark: simulated requests per second and peak memory.

    python -m experiments.bench [out_dir=PATH] [repeats=3] [policies=cache_aware,btb]

Runs each policy on one Bursted-ART synthetic window (4,120 requests,
llama-3.3-70b on four 4xH100 nodes) in a fresh process, so peak RSS is the
policy's own. Workload generation is not timed. Throughput is the best of
``repeats`` runs (the least disturbed by other load on the machine). Prints a
table and writes ``bench.json`` to ``out_dir`` when given.
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import time
from typing import Any

from experiments._cli import main_guard, parse_args
from experiments._io import write_json_atomic

DEFAULTS: dict[str, Any] = {
    "out_dir": "",
    "repeats": 3,
    "policies": ["cache_aware", "btb"],
    "setup": "70b_h100x4",
    "window": 0,
    "causal_kv": True,
    "copy_model": "reference",
}


def _bench_sim(policy_name: str, options: dict[str, Any]) -> dict[str, Any]:
    from baselines import make_policy
    from envs.sim import SimConfig, Simulator, setup_cluster
    from envs.workloads.bursted import synthetic_window

    cluster = setup_cluster(options["setup"])
    config = SimConfig(causal_kv=options["causal_kv"], copy_model=options["copy_model"])
    best = float("inf")
    n = 0
    for _ in range(max(1, options["repeats"])):
        workload = synthetic_window(window=options["window"])
        sim = Simulator(cluster, workload, config)
        policy = make_policy(policy_name)
        start = time.perf_counter()
        policy.run(sim)
        best = min(best, time.perf_counter() - start)
        n = len(workload)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "policy": policy_name,
        "requests": n,
        "requests_per_s": n / best,
        "peak_rss_mb": peak_kb / 1024.0,
    }


def _in_fresh_process(fn: Any, *args: Any) -> Any:
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(fn, args)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    options = parse_args("experiments.bench", DEFAULTS, argv)
    rows = [_in_fresh_process(_bench_sim, name, options) for name in options["policies"]]
    print(f"{'policy':<14} {'requests':>9} {'requests/s':>12} {'peak RSS MB':>12}")
    for row in rows:
        print(
            f"{row['policy']:<14} {row['requests']:>9} {row['requests_per_s']:>12,.0f} "
            f"{row['peak_rss_mb']:>12.1f}"
        )
    result: dict[str, Any] = {"sim": rows}
    if options["out_dir"]:
        path = write_json_atomic(f"{options['out_dir']}/bench.json", result)
        print(f"wrote {path}")
    return result


if __name__ == "__main__":
    raise SystemExit(main_guard(main))
