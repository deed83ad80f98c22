"""A router of your own, written against the simulator and the baseline API,
compared with cache_aware on the same windows.

``SoonestPrefill`` sends each request to the node where its prefill would
end soonest by a simple estimate: the node's estimated queue wait plus the
prefill of the part of the prompt the node does not hold in HBM. It never
warms or evicts. A policy implements ``decide(sim, request) -> node``; it may
read the cluster through ``sim.nodes`` (queues, timing costs, and each node's
cache as the router sees it, ``node.view``: late under a stale router view,
docs/faults.md) and must draw any randomness from ``sim.rng`` so that runs are
reproducible.

    python examples/custom_policy.py

Pass generator parameters to :func:`main` for smaller windows, e.g.
``main(n_windows=1, n_bursts=2, burst_requests=50, n_decoys=10)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from baselines import Policy, make_policy
from envs.sim import SimConfig, Simulator, setup_cluster
from envs.sim.node import Node
from envs.sim.request import Request
from envs.workloads.registry import windows


def prefill_end_s(sim: Simulator, node: Node, request: Request) -> float:
    """Seconds from now until ``request`` would have been prefilled on ``node``:
    the estimated wait for the node's queue, then the prefill of the tokens not
    in its HBM (at least the last prompt token is always computed)."""
    hit_tokens = node.view.hbm_match(request.blocks) * sim.block_tokens
    cached_tokens = min(hit_tokens, request.input_tokens - 1)
    new_tokens = request.input_tokens - cached_tokens
    return node.estimated_wait_s(sim.now) + node.costs.prefill_s(new_tokens, cached_tokens)


class SoonestPrefill(Policy):
    """Route to the node whose estimated prefill end is soonest (ties: the lower index)."""

    name = "soonest_prefill"

    def decide(self, sim: Simulator, request: Request) -> int:
        ends = [prefill_end_s(sim, node, request) for node in sim.nodes]
        return ends.index(min(ends))


def main(
    setup: str = "70b_h100x4", n_windows: int = 2, **workload_params: Any
) -> dict[str, dict[str, Any]]:
    """Run cache_aware and SoonestPrefill on the first ``n_windows`` test windows
    (each window on a fresh cluster, the same seed for both); print and return the
    summaries of each policy's runs, by policy and window (trace id)."""
    cluster = setup_cluster(setup)
    policies: list[Policy] = [make_policy("cache_aware"), SoonestPrefill()]
    results: dict[str, dict[str, Any]] = {policy.name: {} for policy in policies}
    for i, window in enumerate(
        windows("bursted_synthetic", split="test", limit=n_windows, **workload_params)
    ):
        for policy in policies:
            sim = Simulator(cluster, window, SimConfig(), np.random.default_rng(i))
            results[policy.name][window.meta["trace_id"]] = policy.run(sim).summary
    print(f"{'policy':<16} {'window':<16} {'requests':>8} {'TTFT mean':>10} {'p95':>8}")
    for name, runs in results.items():
        for window_name, summary in runs.items():
            print(
                f"{name:<16} {window_name:<16} {summary['requests']:>8} "
                f"{summary['ttft_mean_s']:>10.3f} {summary['ttft_p95_s']:>8.3f}"
            )
    return results


if __name__ == "__main__":
    main()
