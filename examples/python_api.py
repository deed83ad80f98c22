"""The Python API: one test window of the Bursted-ART synthetic workload
(8 bursts of 500 requests sharing a 65,536-token prefix, and 120 one-off
decoys), served by the published BTB rule on llama-3.3-70b over four 4xH100
nodes under causal KV.

    python examples/python_api.py

Generator parameters can be passed to :func:`main` to make the window smaller,
e.g. ``main(n_bursts=2, burst_requests=50, n_decoys=10)``.
"""

from __future__ import annotations

from typing import Any

from baselines import make_policy
from envs.sim import SimConfig, Simulator, setup_cluster
from envs.workloads.registry import windows


def main(**workload_params: Any) -> dict[str, Any]:
    """Serve the first test window with BTB; print and return the run's summary."""
    window = next(windows("bursted_synthetic", split="test", **workload_params))
    sim = Simulator(setup_cluster("70b_h100x4"), window, SimConfig(causal_kv=True))
    records = make_policy("btb").run(sim)
    summary = records.summary
    print(
        f"{summary['requests']} requests: mean TTFT {summary['ttft_mean_s']:.3f} s, "
        f"p95 {summary['ttft_p95_s']:.3f} s, {summary['warm_copies']} warm copies"
    )
    return summary


if __name__ == "__main__":
    main()
