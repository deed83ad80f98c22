"""How far one changed route moves a window's mean TTFT: the table of "One
route's reach" in ``rollout_improvement.md``.

    python docs/results/one_route.py [SETUP] [WINDOWS] [POLICY,...] [FAMILY,...]

(from the repository's root; defaults: ``70b_h100x4``, 5 validation windows a
family, ``eft,cache_aware,zoo:improve_warm_step``, the five families of issue
#16's targets.) Serves each window (simulator seed ``[0, i]``, causal KV) with
POLICY as it is, then once for each of the arrivals 500, 1,500, 3,000 and
4,500 (counted from 0; those the window has) with that one arrival routed to the next node
instead (index + 1 modulo the nodes, the next one its action mask allows for an
agent; every other decision the policy's own, in the state that follows).
Prints, per family and policy, the changes of the window's mean TTFT: their
median and largest size, and how many exceed 1 % and 10 %. A probe of how
chaotic each family is under a policy, not a policy of the project.
"""

from __future__ import annotations

import sys

import numpy as np

from agents.adapter import AgentPolicy
from baselines import make_policy
from baselines.policy import Policy
from envs.sim import ClusterSpec, SimConfig, Simulator, setup_cluster
from envs.sim.request import Request, Workload
from envs.workloads.registry import windows

FAMILIES = ("bursted_synthetic", "bursted_synthetic_1s", "rising_load", "mixed", "art_like")
ARRIVALS = (500, 1500, 3000, 4500)


class OneRouteMoved(Policy):
    """``name``'s decisions, but arrival ``moved`` (counted from 0) goes to the
    next node."""

    def __init__(self, name: str, moved: int) -> None:
        self.agent = AgentPolicy.load("agents/zoo/" + name[4:]) if name.startswith("zoo:") else None
        self.base = None if self.agent else make_policy(name)
        self.moved = moved
        self.seen = 0

    def reset(self, sim: Simulator) -> None:
        (self.agent or self.base).reset(sim)  # type: ignore[union-attr]
        self.seen = 0

    def decide(self, sim: Simulator, request: Request) -> int | None:
        here = self.seen == self.moved
        self.seen += 1
        n = sim.n_nodes
        if self.agent is None:
            assert self.base is not None
            node = self.base.decide(sim, request)
            return (node + 1) % n if here and node is not None else node
        obs, mask = self.agent.observe(sim, request)
        action = np.array(self.agent.act(obs, mask)).ravel().copy()
        if here:
            for step in range(1, n):
                if mask[(action[0] + step) % n]:
                    action[0] = (action[0] + step) % n
                    break
        self.agent.apply(sim, request, action)
        return None


def serve(cluster: ClusterSpec, window: Workload, i: int, name: str, moved: int) -> float:
    """The window's mean TTFT under ``name`` with arrival ``moved`` moved (-1: none)."""
    sim = Simulator(cluster, window, SimConfig(causal_kv=True), np.random.default_rng([0, i]))
    return float(OneRouteMoved(name, moved).run(sim).summary["ttft_mean_s"])


def main(argv: list[str]) -> None:
    setup = argv[0] if argv else "70b_h100x4"
    n = int(argv[1]) if len(argv) > 1 else 5
    names = argv[2].split(",") if len(argv) > 2 else ["eft", "cache_aware", "zoo:improve_warm_step"]
    families = argv[3].split(",") if len(argv) > 3 else list(FAMILIES)
    cluster = setup_cluster(setup)
    for family in families:
        pool = list(windows(family, split="val", limit=n))
        for name in names:
            changes = []
            for i, window in enumerate(pool):
                moves = [k for k in ARRIVALS if k < len(window.requests)]
                base, *moved = (serve(cluster, window, i, name, k) for k in (-1, *moves))
                changes.extend(m / base - 1.0 for m in moved)
            size = np.abs(np.array(changes)) * 100
            print(
                f"{family:22s} {name:24s} changes {len(size):3d}  median {np.median(size):6.2f} %"
                f"  largest {size.max():7.2f} %  > 1 %: {int((size > 1).sum()):2d}"
                f"  > 10 %: {int((size > 10).sum()):2d}",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1:])
