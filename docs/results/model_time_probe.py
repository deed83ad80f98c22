"""A 70b-trained agent on another model, its observation's seconds counted in
llama-3.3-70b's: the numbers of "Time in the model's own units" in
``rollout_improvement.md``.

    BTB_GYM_PURE_PYTHON=1 python docs/results/model_time_probe.py \
        SETUP FAMILY [WINDOWS] [AGENT] [SCALE]

(from the repository's root). Serves the first WINDOWS (5) validation windows
of FAMILY on SETUP, causal KV, window ``i`` on the simulator seed ``[0, i]``
(what ``python -m experiments.evaluate split=val`` gives), with
``agents/zoo/AGENT`` (``improve_warm``), after multiplying by SCALE every
duration the route-and-warm observation shows: each node's estimated wait,
backlog, expected first token and its gap to the best node's. SCALE defaults to
llama-3.3-70b's prefill seconds per token over SETUP's node's (8.62 for
qwen3-8b, 2.21 for glm-4.5, 1 for llama-3.3-70b itself): a duration on SETUP
is shown as the time the same work would take on the nodes the agent was
trained on. Prints each window's mean TTFT, p95 and copies, then the mean over
all requests, the p95 of all of them, and the copies.

The probe that led to the environments' ``time_unit="reference"`` option (which
now does the same in both encoders; ``agents/zoo/improve_warm_reference``): it
patches the Python observation encoder (``envs.encoder.log_seconds``) and the
Python node's ``estimated_wait_s``, so it needs the pure-Python core
(``BTB_GYM_PURE_PYTHON=1``; about 10 times slower), and takes any SCALE. With
SCALE 1 it reproduces ``experiments.evaluate``'s figures.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any

import numpy as np

REFERENCE_SETUP = "70b_h100x4"


def main(argv: list[str]) -> None:
    if os.environ.get("BTB_GYM_PURE_PYTHON") != "1":
        print(
            "error: run with BTB_GYM_PURE_PYTHON=1 (the probe patches the Python core)",
            file=sys.stderr,
        )
        sys.exit(2)
    if len(argv) < 2:
        print("usage: model_time_probe.py SETUP FAMILY [WINDOWS] [AGENT] [SCALE]", file=sys.stderr)
        sys.exit(2)
    import envs.encoder as encoder
    from agents.adapter import AgentPolicy
    from envs.sim import SimConfig, Simulator, setup_cluster
    from envs.sim import node as python_node
    from envs.sim.timing import NodeCosts
    from envs.workloads.registry import windows

    setup, family = argv[0], argv[1]
    n = int(argv[2]) if len(argv) > 2 else 5
    agent = argv[3] if len(argv) > 3 else "improve_warm"
    cluster = setup_cluster(setup)
    reference = setup_cluster(REFERENCE_SETUP)
    per_token = NodeCosts(cluster.nodes[0], cluster.model).prefill_s_per_token
    ref_per_token = NodeCosts(reference.nodes[0], reference.model).prefill_s_per_token
    scale = float(argv[4]) if len(argv) > 4 else ref_per_token / per_token

    log_seconds = encoder.log_seconds
    wait_s = python_node.Node.estimated_wait_s

    def scaled_log_seconds(seconds: float, _log1p: Any = math.log1p) -> float:
        return log_seconds(seconds * scale)

    def scaled_wait_s(self: Any, now: float) -> float:
        return float(wait_s(self, now)) * scale

    encoder.log_seconds = scaled_log_seconds  # type: ignore[assignment]
    python_node.Node.estimated_wait_s = scaled_wait_s  # type: ignore[method-assign]

    ttfts, copies = [], 0
    for i, window in enumerate(windows(family, split="val", limit=n)):
        rng = np.random.default_rng([0, i])
        sim = Simulator(cluster, window, SimConfig(causal_kv=True), rng)
        records = AgentPolicy.load(f"agents/zoo/{agent}").run(sim)
        ttft = np.asarray(records.ttft_s, dtype=float)
        ttfts.append(ttft)
        copies += int(records.summary["warm_copies"])
        print(
            f"window {i}: mean {records.summary['ttft_mean_s']:.5f} "
            f"p95 {records.summary['ttft_p95_s']:.4f} copies {records.summary['warm_copies']}",
            flush=True,
        )
    every = np.concatenate(ttfts)
    print(
        f"{agent} on {setup} {family}, durations x {scale:.4g}: mean {every.mean():.5f} "
        f"p95 {np.percentile(every, 95):.4f} copies {copies}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
