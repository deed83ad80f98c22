"""The measurements behind ``experiments.bench``, each meant to run in a fresh process.

Every function returns one row of ``bench.json``. Throughput is the best of
``repeats`` plain runs; the wall-time breakdown comes from one more run with
stopwatches around the policy's ``decide`` (and, for agents, around the
network's ``act``), so the stopwatches never slow the figure reported as
throughput. Time inside ``decide`` is the policy's, including the simulator
calls it makes itself (warm copies, ``route``, cache queries); the rest of a
run is the simulator's.
"""

from __future__ import annotations

import itertools
import json
import math
import resource
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from baselines.policy import Policy
from envs.sim.request import Request, Workload
from envs.sim.simulator import Simulator

BURSTED = "bursted_synthetic"
PARTS = ("read_s", "simulate_s", "policy_s", "inference_s")
"""The wall-time breakdown's parts, in table order."""


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB.

    Linux: ``VmHWM``, the high-water mark of this process's own memory since it
    started its program (``ru_maxrss`` would also count the parent's pages at the
    moment it forked us); elsewhere ``ru_maxrss`` (KiB on Linux, bytes on macOS).
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return maxrss / 1024.0 / (1024.0 if sys.platform == "darwin" else 1.0)


LOOP_ADDITIONS = 10_000_000
"""The machine yardstick's loop: this many additions of a pure-Python ``for`` loop."""

_LOOP = compile(f"total = 0\nfor i in range({LOOP_ADDITIONS}):\n    total += i\n", "<loop>", "exec")
"""The loop as top-level code (its names looked up in a dict, as ``python -c`` runs
it: the form the docs quote by hand; a function's locals run it about twice as fast)."""


def machine_yardstick(options: dict[str, Any]) -> dict[str, Any]:
    """How fast this machine runs plain Python at the moment of the benchmark: the
    best of ``repeats`` timings of a loop of :data:`LOOP_ADDITIONS` additions.
    Every figure of a run moves with it, so two runs on a shared machine, or on
    two machines, compare by it."""
    best = math.inf
    for _ in range(options["repeats"]):
        start = time.perf_counter()
        exec(_LOOP, {})
        best = min(best, time.perf_counter() - start)
    return {"python_loop_s": best, "loop_additions": LOOP_ADDITIONS}


def bench_window(workload: str, window: int, trace: Mapping[str, Any] | None = None) -> Workload:
    """The benchmarked window of a registered workload: for ``bursted_synthetic`` the
    generator's window ``window`` (as bench has always measured), for ``trace`` (the
    file ``trace``'s TraceOptions fields describe) its ``window``-th window of all
    splits, otherwise the ``window``-th test window of the registry."""
    from envs.workloads.bursted import synthetic_window
    from envs.workloads.registry import windows

    if workload == BURSTED:
        return synthetic_window(window=window)
    if workload == "trace":
        every = windows("trace", "all", **dict(trace or {}))
        found = next(itertools.islice(every, window, None), None)
        if found is None:
            raise ValueError(f"experiments.bench: the trace has no window {window}")
        return found
    test = windows(workload, "test", limit=window + 1)
    found = next(itertools.islice(test, window, None), None)
    if found is None:
        raise ValueError(f"experiments.bench: workload {workload!r} has no test window {window}")
    return found


class TimedPolicy(Policy):
    """Another policy with a stopwatch around each decision."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name = inner.name
        self.decide_s = 0.0

    def reset(self, sim: Simulator) -> None:
        self.inner.reset(sim)

    def decide(self, sim: Simulator, request: Request) -> int | None:
        start = time.perf_counter()
        choice = self.inner.decide(sim, request)
        self.decide_s += time.perf_counter() - start
        return choice


def best_run_s(make_sim: Any, policy: Policy, repeats: int) -> float:
    """The fastest of ``repeats`` runs of ``policy`` on fresh simulators."""
    return best_runs(make_sim, policy, repeats)[0]


def best_runs(make_sim: Any, policy: Policy, repeats: int) -> tuple[float, float]:
    """(the fewest wall seconds, the fewest CPU seconds of this process) of ``repeats``
    runs of ``policy`` on fresh simulators: on a machine other jobs share, the CPU
    seconds move less than the wall clock."""
    best, best_cpu = math.inf, math.inf
    for _ in range(repeats):
        sim = make_sim()
        start, cpu_start = time.perf_counter(), time.process_time()
        policy.run(sim)
        best = min(best, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - cpu_start)
    return best, best_cpu


def timed_run(make_sim: Any, policy: Policy) -> tuple[float, float]:
    """One run with a stopwatch on ``decide``: (wall seconds, seconds inside decide)."""
    timed = TimedPolicy(policy)
    sim = make_sim()
    start = time.perf_counter()
    timed.run(sim)
    return time.perf_counter() - start, timed.decide_s


def sim_factory(options: dict[str, Any], workload: Workload) -> Any:
    from envs.sim import SimConfig, setup_cluster

    cluster = setup_cluster(options["setup"])
    config = SimConfig(causal_kv=options["causal_kv"], copy_model=options["copy_model"])
    return lambda: Simulator(cluster, workload, config)


def bench_sim(
    workload_name: str, workload: Workload, policy_name: str, options: dict[str, Any]
) -> dict[str, Any]:
    """Simulated requests/s of one policy on one workload's window."""
    from baselines import make_policy

    make_sim = sim_factory(options, workload)
    best, best_cpu = best_runs(make_sim, make_policy(policy_name), options["repeats"])
    wall_s, policy_s = timed_run(make_sim, make_policy(policy_name))
    n = len(workload)
    return {
        "workload": workload_name,
        "policy": policy_name,
        "requests": n,
        "requests_per_s": n / best,
        "cpu_requests_per_s": n / max(best_cpu, 1e-9),
        "peak_rss_mb": peak_rss_mb(),
        "simulate_s": wall_s - policy_s,
        "policy_s": policy_s,
    }


def mooncake_rows(workload: Workload) -> list[dict[str, Any]]:
    """A workload as Mooncake rows: integer millisecond timestamps, chained integer ids."""
    return [
        {
            "timestamp": round(r.arrival_s * 1000.0),
            "input_length": r.input_tokens,
            "output_length": r.output_tokens,
            "hash_ids": list(r.blocks),
        }
        for r in workload.requests
    ]


def conversation_sample(rows: int, seed: int) -> Workload:
    """The first ``rows`` arrivals of conversation-like traffic (one long window)."""
    from envs.workloads.bursted import rows_to_workload
    from envs.workloads.conversation import ConversationConfig, conversation_rows

    config = ConversationConfig()
    duration_s = 1.2 * 3600.0 * rows / config.requests_per_hour + 60.0
    while True:
        long = ConversationConfig(duration_s=duration_s)
        drawn = conversation_rows(long, window=0, seed=seed)
        if len(drawn) >= rows:
            return rows_to_workload(drawn[:rows], long.block_tokens, name="conversation_sample")
        duration_s *= 2.0


def bench_read(options: dict[str, Any]) -> dict[str, Any]:
    """Rows/s of the Mooncake reader on a file of conversation-like rows written to a
    temporary folder (writing it is not timed)."""
    from envs.workloads.bursted import PUBLISHED_SEED
    from envs.workloads.readers import read_mooncake

    sample = conversation_sample(options["read_rows"], PUBLISHED_SEED)
    with tempfile.TemporaryDirectory(prefix="btb-bench-") as folder:
        path = Path(folder) / "conversation.jsonl"
        with path.open("w") as out:
            for row in mooncake_rows(sample):
                out.write(json.dumps(row) + "\n")
        size_mb = path.stat().st_size / 1e6
        best = best_cpu = math.inf
        read = sample
        for _ in range(options["repeats"]):
            start, start_cpu = time.perf_counter(), time.process_time()
            read = read_mooncake(path)
            best = min(best, time.perf_counter() - start)
            best_cpu = min(best_cpu, time.process_time() - start_cpu)
    if [r.blocks for r in read.requests] != [r.blocks for r in sample.requests]:
        raise RuntimeError("experiments.bench: the Mooncake file did not read back as written")
    return {
        "format": "mooncake",
        "rows": len(read),
        "file_mb": size_mb,
        "rows_per_s": len(read) / best,
        "read_s": best,
        "cpu_rows_per_s": len(read) / max(best_cpu, 1e-9),  # the figure for a busy machine
    }


def bench_replay(options: dict[str, Any]) -> dict[str, Any]:
    """Peak memory of a replay of ``replay_windows`` test windows, one at a time, with
    cache_aware (as ``compare`` replays them; generating the windows is not timed)."""
    from baselines import make_policy
    from envs.workloads.registry import windows

    workload_name = options["workloads"][0]
    n = replayed = 0
    simulate_s = 0.0
    params = options.get("workload_params") or {}  # a trace's TraceOptions fields
    for workload in windows(workload_name, "test", limit=options["replay_windows"], **params):
        simulate_s += best_run_s(sim_factory(options, workload), make_policy("cache_aware"), 1)
        n += len(workload)
        replayed += 1
    return {
        "workload": workload_name,
        "policy": "cache_aware",
        "windows": replayed,  # the workload's test windows, at most replay_windows
        "requests": n,
        "requests_per_s": n / simulate_s if simulate_s > 0 else 0.0,
        "peak_rss_mb": peak_rss_mb(),
    }


def bench_agent(folder: str, workload: Workload, options: dict[str, Any]) -> dict[str, Any]:
    """:func:`experiments._bench_agents.bench_agent`, imported here so that only the
    measuring process loads torch."""
    from experiments._bench_agents import bench_agent

    return bench_agent(folder, workload, options)


def bench_env(env_id: str, workload: Workload, options: dict[str, Any]) -> dict[str, Any]:
    """Steps/s of one environment over an episode of random actions (pre-drawn, so
    sampling is not timed) on ``workload``, the first workload's window."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the environments)

    env = gym.make(env_id, setup=options["setup"], windows=[workload])
    env.action_space.seed(0)
    best = best_cpu = 0.0
    steps = 0
    for repeat in range(options["repeats"]):
        env.reset(seed=repeat)
        actions = [env.action_space.sample() for _ in range(len(workload))]
        steps = 0
        done = False
        start, cpu_start = time.perf_counter(), time.process_time()
        while not done:
            _, _, done, _, _ = env.step(actions[steps])
            steps += 1
        best = max(best, steps / (time.perf_counter() - start))
        best_cpu = max(best_cpu, steps / max(time.process_time() - cpu_start, 1e-9))
    n = len(workload)
    return {
        "env_id": env_id,
        "workload": options["workloads"][0],
        "steps": steps,
        "steps_per_s": best,
        "cpu_steps_per_s": best_cpu,
        "requests": n,
        "requests_per_s": best * n / steps,
    }
