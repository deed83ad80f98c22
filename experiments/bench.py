"""Throughput benchmark: simulated requests per second and peak memory.

    python -m experiments.bench [out_dir=PATH] [repeats=3] [policies=cache_aware,btb]
        [envs=btb/Route-v0,btb/RouteWarm-v0,btb/Thresholds-v0]
        [workload=trace workload.path=FILE ...]

Runs each policy on one Bursted-ART synthetic window (4,120 requests,
llama-3.3-70b on four 4xH100 nodes) in a fresh process, so peak RSS is the
policy's own. Workload generation is not timed. Throughput is the best of
``repeats`` runs (the least disturbed by other load on the machine). Prints a
table and writes ``bench.json`` to ``out_dir`` when given. Each environment
then runs one episode on the same window with random actions (pre-drawn, so
sampling is not timed) through ``gymnasium.make``: steps per second, best of
``repeats``, and the simulated requests per second that implies. A
Thresholds-v0 step is a whole decision epoch (about 13 requests on this window),
so its steps/s is bounded by the simulator's requests/s over 13.
``workload=trace workload.path=FILE`` benchmarks the ``window``-th window of a
trace file instead (all splits counted; reading it is not timed, but its memory
is in the peak RSS).
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import resource
import time
from typing import Any

from envs.files import write_json_atomic
from experiments._cli import (
    UsageError,
    main_guard,
    parse_args,
    sim_config_of,
    trace_defaults,
    workload_file,
    workload_params,
)
from experiments._io import claim_out_dir, releasing_out_dirs

DEFAULTS: dict[str, Any] = {
    "out_dir": "",
    "repeats": 3,
    "policies": ["cache_aware", "btb"],
    "setup": "70b_h100x4",
    "window": 0,
    "causal_kv": True,
    "copy_model": "reference",
    "envs": ["btb/Route-v0", "btb/RouteWarm-v0", "btb/Thresholds-v0"],
    "workload": "bursted_synthetic",
    **trace_defaults(),
    "overwrite": False,
}


def _window(options: dict[str, Any]) -> Any:
    """The benchmarked window: a synthetic Bursted-ART one, or one of a trace file."""
    from envs.workloads.bursted import synthetic_window
    from envs.workloads.trace_file import TraceOptions, trace_windows

    params = options["workload_params"]
    if not params:
        return synthetic_window(window=options["window"])
    index = options["window"]
    return next(itertools.islice(trace_windows(TraceOptions(**params), "all"), index, None))


def _bench_sim(policy_name: str, options: dict[str, Any]) -> dict[str, Any]:
    from baselines import make_policy
    from envs.sim import SimConfig, Simulator, setup_cluster

    cluster = setup_cluster(options["setup"])
    config = SimConfig(causal_kv=options["causal_kv"], copy_model=options["copy_model"])
    best = float("inf")
    n = 0
    for _ in range(options["repeats"]):
        workload = _window(options)
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


def _bench_env(env_id: str, options: dict[str, Any]) -> dict[str, Any]:
    import gymnasium as gym

    import envs  # noqa: F401  (registers the environments)

    workload = _window(options)
    env = gym.make(env_id, setup=options["setup"], windows=[workload])
    env.action_space.seed(0)
    best = 0.0
    steps = 0
    for repeat in range(options["repeats"]):
        env.reset(seed=repeat)
        actions = [env.action_space.sample() for _ in range(len(workload))]
        steps = 0
        done = False
        start = time.perf_counter()
        while not done:
            _, _, done, _, _ = env.step(actions[steps])
            steps += 1
        best = max(best, steps / (time.perf_counter() - start))
    n = len(workload)
    return {
        "env_id": env_id,
        "steps": steps,
        "steps_per_s": best,
        "requests": n,
        "requests_per_s": best * n / steps,
    }


def _in_fresh_process(fn: Any, *args: Any) -> Any:
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(fn, args)


def _check(options: dict[str, Any]) -> None:
    """Fail before any run starts on options that cannot work."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the environments)
    from baselines import make_policy
    from envs.sim import setup_cluster

    if options["repeats"] < 1:  # parse_args has made it an int
        raise UsageError(
            f"experiments.bench: repeats must be an integer >= 1, got {options['repeats']!r}"
        )
    if options["window"] < 0:
        raise UsageError(
            f"experiments.bench: window must be >= 0 (a synthetic window's index), "
            f"got {options['window']}"
        )
    if options["workload"] not in ("bursted_synthetic", "trace"):
        raise UsageError(
            f"experiments.bench: workload must be bursted_synthetic or trace, "
            f"got {options['workload']!r}"
        )
    from envs.sim import SETUPS

    if options["setup"] not in SETUPS:
        raise UsageError(f"unknown setup {options['setup']!r}; known: {', '.join(SETUPS)}")
    model = SETUPS[options["setup"]][0]
    options["workload_params"] = workload_params("experiments.bench", options, [model])
    if options["workload_params"]:
        from envs.workloads.trace_file import TraceOptions, plan_trace

        n = len(plan_trace(TraceOptions(**options["workload_params"])).windows)
        if options["window"] >= n:
            raise UsageError(
                f"experiments.bench: window={options['window']} but the trace has {n} "
                f"windows (0..{n - 1})"
            )
    if options["out_dir"]:
        claim_out_dir(
            options["out_dir"], "experiments.bench: out_dir", ("bench.json",), options["overwrite"]
        )
    setup_cluster(options["setup"])
    sim_config_of("experiments.bench", options["causal_kv"], options["copy_model"])
    for name in options["policies"]:
        make_policy(name)
    known = sorted(k for k in gym.registry if k.startswith("btb/"))
    for env_id in options["envs"]:
        if env_id not in known:
            raise UsageError(f"experiments.bench: unknown env {env_id!r} in envs (known: {known})")


@releasing_out_dirs
def main(argv: list[str] | None = None) -> dict[str, Any]:
    options = parse_args("experiments.bench", DEFAULTS, argv)
    _check(options)
    rows = [_in_fresh_process(_bench_sim, name, options) for name in options["policies"]]
    print(f"{'policy':<14} {'requests':>9} {'requests/s':>12} {'peak RSS MB':>12}")
    for row in rows:
        print(
            f"{row['policy']:<14} {row['requests']:>9} {row['requests_per_s']:>12,.0f} "
            f"{row['peak_rss_mb']:>12.1f}"
        )
    trace_file = workload_file(options["workload"], options["workload_params"])
    result: dict[str, Any] = {"sim": rows, **trace_file}
    if options["envs"]:
        env_rows = [_in_fresh_process(_bench_env, env_id, options) for env_id in options["envs"]]
        print(f"\n{'env':<20} {'steps/episode':>14} {'steps/s':>10} {'requests/s':>11}")
        for row in env_rows:
            print(
                f"{row['env_id']:<20} {row['steps']:>14} {row['steps_per_s']:>10,.0f} "
                f"{row['requests_per_s']:>11,.0f}"
            )
        result["env"] = env_rows
    if options["out_dir"]:
        path = write_json_atomic(f"{options['out_dir']}/bench.json", result)
        print(f"wrote {path}")
    return result


if __name__ == "__main__":
    raise SystemExit(main_guard(main))
