"""How far copies of every turn go with a routing rule: the numbers of the
``rising_load`` bullet under "Not done" and of "The rest of a decode step" in
``rollout_improvement.md``.

    python docs/results/warm_everywhere_rule.py [SETUP] [FAMILY] [WINDOWS] [POLICY,...] [split]

(from the repository's root: ``zoo:NAME`` loads ``agents/zoo/NAME``.)

Serves the first WINDOWS validation windows of FAMILY (default ``rising_load``,
5; more than 5 are the validation windows ``val_windows=WINDOWS`` holds out
after train and test, window indices 20 onwards, the first 5 the usual ones) on
SETUP (default ``70b_h100x4``), causal KV, window ``i`` on the simulator seed
``[0, i]`` (what ``python -m experiments.evaluate split=val`` gives), with
each POLICY: a registered baseline (``oracle_warm``; ``eft_step`` is ``eft``
with each node's rest of its decode step added to its estimates, as the
observation's ``step_wait`` adds it), a zoo agent (``zoo:improve_warm``) or
``everywhere:ROUTER``, the rule probed here: route as ROUTER would (``eft``,
``eft_step``, ``least_load``, ``zoo:NAME`` or ``oracle_warm`` with their own
copies too, ...), then copy the
request's prefix (its blocks but the last, at least 4 blocks) from that node
to every other node that lacks it in HBM and has no copy of it in flight (each
copy starts once the routed node has computed it). ``background:ROUTER`` does
the same for the workload's background requests only (``job_kind``; the
generator's label, which no policy sees: a probe of where the copies pay).
``gate:T:ROUTER`` copies everywhere only when no prompt of at least 32k tokens
with a prefix no earlier request had (what a ``mixed`` window's decoys are)
arrived in the last ``T`` seconds; ROUTER decides alone otherwise. Prints each policy's mean
TTFT over all requests, the geometric mean of the windows' means, each
window's mean and p95, and the copies made; with ``split``, instead, the
excess over the floor split as ``teacher_diagnosis.py split`` splits it (each
column's share of the mean over all requests; ``SETUP`` must be
``70b_h100x4``, the setup that script measures). A probe of what a policy could
reach, not a policy of the project: it is not registered.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from agents.adapter import AgentPolicy
from baselines import make_policy
from baselines.policy import Policy
from envs.sim import SimConfig, Simulator, setup_cluster
from envs.sim.forecast import prefix_of
from envs.sim.request import Request
from envs.workloads.registry import windows

MIN_PREFIX_BLOCKS = 4
DECOY_TOKENS = 32768


class WarmEverywhere(Policy):
    """``router``'s route, then the prefix copied onto every node lacking it."""

    name = "everywhere"

    def __init__(self, router: Policy, kinds: tuple[str, ...] | None = None) -> None:
        self.router = router
        self.kinds = kinds  # copy only requests of these job kinds (None: all)

    def reset(self, sim: Simulator) -> None:
        self.router.reset(sim)

    def decide(self, sim: Simulator, request: Request) -> int | None:
        node = self.router.decide(sim, request)
        routed = node is None  # it routed (and maybe warmed) itself: an agent, oracle_warm
        if routed:
            node = sim.routed_node()
        prefix = prefix_of(request)
        if (
            node is None
            or len(prefix) < MIN_PREFIX_BLOCKS
            or (self.kinds is not None and request.job_kind not in self.kinds)
        ):
            return None if routed else node
        if not routed:
            sim.route(node)
        key = prefix[-1]
        for other in sim.nodes:
            if other.index == node or other.down or key in other.inflight:
                continue
            if other.view.hbm_match(prefix) < len(prefix):
                sim.warm(node, other.index, prefix)
        return None


class DecoyGate(WarmEverywhere):
    """Copies everywhere except within ``seconds`` of a long prompt with a new prefix."""

    name = "gate"

    def __init__(self, router: Policy, seconds: float) -> None:
        super().__init__(router)
        self.seconds = seconds

    def reset(self, sim: Simulator) -> None:
        super().reset(sim)
        self.seen: set[int] = set()
        self.last_decoy = -math.inf

    def decide(self, sim: Simulator, request: Request) -> int | None:
        key = prefix_of(request)[-1]
        if request.input_tokens >= DECOY_TOKENS and key not in self.seen:
            self.last_decoy = request.arrival_s
        self.seen.add(key)
        if request.arrival_s - self.last_decoy < self.seconds:
            return self.router.decide(sim, request)
        return super().decide(sim, request)


def policy_of(name: str) -> Policy:
    if name.startswith("zoo:"):
        return AgentPolicy.load("agents/zoo/" + name[len("zoo:") :])
    if name.startswith("everywhere:"):
        return WarmEverywhere(policy_of(name[len("everywhere:") :]))
    if name.startswith("gate:"):
        seconds, router = name[len("gate:") :].split(":", 1)
        return DecoyGate(policy_of(router), float(seconds))
    if name.startswith("background:"):
        return WarmEverywhere(policy_of(name[len("background:") :]), ("background",))
    return make_policy(name)


def main(argv: list[str]) -> None:
    setup = argv[0] if argv else "70b_h100x4"
    family = argv[1] if len(argv) > 1 else "rising_load"
    n = int(argv[2]) if len(argv) > 2 else 5
    names = argv[3].split(",") if len(argv) > 3 else ["oracle_warm", "everywhere:eft"]
    cluster = setup_cluster(setup)
    # more than the registry's 5 validation windows: held out after train and test
    pool = list(windows(family, split="val", limit=n, val_windows=max(n, 5)))
    if argv[4:] == ["split"]:
        print_split(setup, pool, names)
        return
    for name in names:
        means, p95s, total, count, copies = [], [], 0.0, 0, 0
        for i, window in enumerate(pool):
            rng = np.random.default_rng([0, i])
            sim = Simulator(cluster, window, SimConfig(causal_kv=True), rng)
            records = policy_of(name).run(sim)
            ttft = np.asarray(records.ttft_s, dtype=float)
            total += float(ttft.sum())
            count += len(ttft)
            means.append(records.summary["ttft_mean_s"])
            p95s.append(records.summary["ttft_p95_s"])
            copies += int(records.summary["warm_copies"])
        geomean = math.exp(float(np.mean(np.log(means))))
        print(
            f"{name:24s} mean {total / count:.5f}  geomean {geomean:.5f}  windows "
            + " ".join(f"{m:.4f}" for m in means)
            + "  p95 "
            + " ".join(f"{p:.3f}" for p in p95s)
            + f"  copies {copies}"
        )


def print_split(setup: str, pool: list, names: list[str]) -> None:
    """Each policy's excess over the floor, split as teacher_diagnosis.py does (ms)."""
    from teacher_diagnosis import COLUMNS, SETUP, split_rows

    if setup != SETUP:
        sys.exit(f"split: the split is measured on {SETUP} only, not {setup}")
    stats = ("ttft", "floor", "excess", *COLUMNS)
    print("policy | " + " | ".join(stats))
    for name in names:
        rows = [
            row for i, window in enumerate(pool) for row in split_rows(policy_of(name), window, i)
        ]
        print(
            name
            + " | "
            + " | ".join(f"{1e3 * sum(r[c] for r in rows) / len(rows):.2f}" for c in stats)
        )


if __name__ == "__main__":
    main(sys.argv[1:])
