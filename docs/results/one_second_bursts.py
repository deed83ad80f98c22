"""What is left on the 1 s bursts: the numbers of the sections "What is left on
the 1 s bursts" (one-step changes of the spare-node clone) and "How much room
the 1 s target leaves the decoys" of ``rollout_improvement.md``.

    python docs/results/one_second_bursts.py decisions [STATES] [HOLD_S]
    python docs/results/one_second_bursts.py warm [WINDOW]
    python docs/results/one_second_bursts.py idle
    python docs/results/one_second_bursts.py decoys
    python docs/results/one_second_bursts.py rules

``decisions`` measures, as ``agents.rollout_improvement.measure_window`` does
with the whole past replayed (``lead_requests=None``; seed 7), ``STATES``
(default 48) decisions drawn at random among those where the clone
(``agents/zoo/bc_route_warm_spare``) would hold its node at least ``HOLD_S``
seconds (default 0.25: the long decisions; 0: any arrival) in each of the five
``bursted_synthetic_1s`` train windows of ``+experiment=improve_spare``, every
node tried with the clone acting everywhere after, the next 300 requests' TTFTs
summed. It prints, per window, the decisions measured, those with a node that
saves >= 0.5 s, and the seconds saved; then, over the changed ones, whether the
request is a decoy (a prefix of its own) or a burst's, whether the better node
was idle (no work, no backlog in the observation), and how long before the next
burst it arrived.

``warm`` tries, at the first two requests of every burst of one train window
(default 0), every route and every set of warm copies the action mask allows
(4 x 16), the clone acting everywhere after, and prints the best gain over the
600 requests from the decision on. About 2 minutes a window for each command
on one core (2 processes).

``decoys`` asks how much room the target leaves the decoys: on every test
window of the 1 s bursts (15) it runs each policy on the window and on the
window without its 120 decoys (the 4,000 burst requests alone, the same
arrivals), and prints the window's mean TTFT beside the mean it would have if
the decoys changed nothing for the bursts and each decoy took only its own
per-request floor (the bursts-alone TTFTs plus the decoys' floors, over all
requests); with ``floor_capacity`` of the window and of the bursts alone (with
the decoys at their floor). About 10 minutes on 2 cores
(2 processes) shared with a training run.

``rules`` works on the five 1 s train windows with the clone: which decoys
cost the most (the window's mean TTFT with the decoys that arrive in the 4.7 s
before a burst, or in the 8 s after its start, removed and charged their floor
instead), and two ways of placing decoys: ``stack`` (a prefix not seen before
whose request would hold its node >= 0.25 s, arriving while a prefix has had
>= 20 arrivals in the last 8 s, goes to the node that got the fewest of those
arrivals, the most backlog breaking ties) and ``clairvoyant`` (it knows when
every burst starts and sends each decoy to the node that minimises its own
first token plus ``lam`` times the seconds its prefill overlaps a burst's first
7.5 s). About 2 minutes on one core.

``idle`` scores, on the 8 validation windows of ``+experiment=improve_spare``
(geometric mean of their mean TTFTs), the clone and the clone with one rule
added: a long decision goes to an idle node when one exists.
"""

from __future__ import annotations

import collections
import itertools
import multiprocessing
import sys
from abc import abstractmethod
from pathlib import Path
from typing import Any

import numpy as np
from hydra import compose, initialize_config_dir

from agents.adapter import AgentPolicy
from agents.algorithms import load_agent
from agents.improvement_settings import ImprovementSettings
from agents.rollout_improvement import _Probe, _serve, measure_window
from baselines import make_policy
from baselines.policy import Policy
from envs.encoder import NODE_FEATURES, from_log_seconds, hold_s
from envs.sim.floor import floor_bounds
from envs.sim.request import Workload
from experiments.config import cluster_of, register_configs, sim_of, window_pool_of
from experiments.evaluation import evaluate_policies, run_window

ROOT = Path(__file__).resolve().parents[2]
CLONE = ROOT / "agents" / "zoo" / "bc_route_warm_spare"
IMPROVED = ROOT / "agents" / "zoo" / "improve_spare"
BUSY, BACKLOG = NODE_FEATURES.index("busy"), NODE_FEATURES.index("backlog")
FIRST_TOKEN = NODE_FEATURES.index("first_token")


def setting() -> tuple[Any, list[Any]]:
    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=["+experiment=improve_spare"])
    pool = [w for w in window_pool_of(cfg, "train", None) if "/synthetic1s-" in w.name]
    return cfg, pool


def idle_nodes(obs: np.ndarray, n_nodes: int) -> set[int]:
    """The nodes with no work and no backlog, read from a route observation's node rows."""
    rows = np.asarray(obs[: n_nodes * len(NODE_FEATURES)]).reshape(n_nodes, -1)
    return {k for k in range(n_nodes) if rows[k, BUSY] == 0 and rows[k, BACKLOG] == 0}


def users_of(window: Workload) -> dict[int, list[int]]:
    """Each first block's requests (a burst's 500, a decoy's 1)."""
    users: dict[int, list[int]] = collections.defaultdict(list)
    for r in window.requests:
        users[r.blocks[0]].append(r.index)
    return users


def measure(job: tuple[int, int, float]) -> dict[str, Any]:
    position, states, hold = job
    cfg, pool = setting()
    window = pool[position]
    model, spec = load_agent(CLONE)
    settings = ImprovementSettings(
        states_per_window=states, lead_requests=None, anchor_per_window=0, hold_s=hold, repeat=1
    )
    demos, stats = measure_window(
        AgentPolicy(model, spec), window, cluster_of(cfg), sim_of(cfg), settings, 7
    )
    users = users_of(window)
    starts = sorted(window.requests[v[0]].arrival_s for v in users.values() if len(v) >= 100)
    changed = []
    n_nodes = len(cluster_of(cfg).nodes)
    for decision, obs in zip(stats.decisions, demos.obs):
        chosen, label = decision["chosen"], decision["label"]
        if chosen == label:
            continue
        request = window.requests[decision["index"]]
        idle = idle_nodes(obs, n_nodes)
        later = [b - request.arrival_s for b in starts if b > request.arrival_s]
        changed.append(
            {
                "decoy": len(users[request.blocks[0]]) == 1,
                "gain_s": decision["sums_s"][chosen] - decision["sums_s"][label],
                "to_idle": label in idle,
                "idle_existed": bool(idle),
                "next_burst_s": later[0] if later else None,
            }
        )
    return {
        "window": window.name,
        "decisions": stats.long_decisions,
        "measured": stats.measured,
        "changed": stats.changed,
        "saved_s": stats.saved_s,
        "window_sum_s": stats.before_s[0],
        "details": changed,
    }


def decisions(states: int, hold: float) -> None:
    _, pool = setting()
    jobs = [(i, states, hold) for i in range(len(pool))]
    with multiprocessing.get_context("fork").Pool(2) as workers:
        rows = workers.map(measure, jobs, chunksize=1)
    print(
        "| window | decisions that qualify | measured | changed | saved (s) | of the window's sum |"
    )
    print("|---|--:|--:|--:|--:|--:|")
    for r in rows:
        print(
            f"| {r['window']} | {r['decisions']} | {r['measured']} | {r['changed']} | "
            f"{r['saved_s']:.1f} | {100 * r['saved_s'] / r['window_sum_s']:.2f} % |"
        )
    details = [d for r in rows for d in r["details"]]
    if not details:
        return
    total = sum(d["gain_s"] for d in details)
    print(f"\nchanged: {len(details)}, {total:.1f} s saved")
    print(f"decoys: {sum(d['decoy'] for d in details)}")
    idle = [d for d in details if d["to_idle"]]
    print(
        f"the better node idle: {len(idle)} ({sum(d['gain_s'] for d in idle):.1f} s); an idle "
        f"node existed at {sum(d['idle_existed'] for d in details)}"
    )
    for lo, hi in ((0, 2), (2, 10), (10, 20), (20, 45)):
        band = [
            d for d in details if d["next_burst_s"] is not None and lo <= d["next_burst_s"] < hi
        ]
        print(
            f"next burst {lo}-{hi} s later: {len(band)} changed, "
            f"{sum(d['gain_s'] for d in band):.1f} s"
        )
    after = [d for d in details if d["next_burst_s"] is None]
    print(f"after the last burst: {len(after)} changed, {sum(d['gain_s'] for d in after):.1f} s")


class _Fork(_Probe):
    """The clone, with the route and the warm copies of arrival ``fork`` replaced."""

    def __init__(self, agent: AgentPolicy, fork: int, route: int, warms: tuple[int, ...]):
        super().__init__(agent)
        self.fork, self.route, self.warms = fork, route, warms

    def decide(self, sim: Any, request: Any) -> None:
        obs, mask = self.agent.observe(sim, request)
        action = np.array(self.agent.act(obs, mask), dtype=np.int64)
        if request.index == self.fork:
            action[0] = self.route
            action[1 : 1 + sim.n_nodes] = self.warms
        self.agent.apply(sim, request, action)


def warm(position: int, horizon: int = 600) -> None:
    cfg, pool = setting()
    window = pool[position]
    model, spec = load_agent(CLONE)
    agent = AgentPolicy(model, spec)
    cluster, sim = cluster_of(cfg), sim_of(cfg)
    n = len(cluster.nodes)
    users = users_of(window)
    firsts = sorted(v[:2] for v in users.values() if len(v) >= 100)
    print(f"{window.name}: {len(firsts)} bursts")
    for index in (i for pair in firsts for i in pair):
        cut = Workload(window.name, window.block_tokens, window.requests[: index + horizon])
        own = _Probe(agent, [index])
        base = float(_serve(own, cluster, cut, sim, 0)[index:].sum())
        _, mask, action = own.seen[index]
        best, what = 0.0, "its own"
        for route in (k for k in range(n) if mask[k]):
            for warms in itertools.product((0, 1), repeat=n):
                if any(w and not mask[n + 2 * k + 1] for k, w in enumerate(warms)):
                    continue
                if route == action[0] and warms == tuple(int(x) for x in action[1 : 1 + n]):
                    continue
                fork = _Fork(agent, index, route, warms)
                gain = base - float(_serve(fork, cluster, cut, sim, 0)[index:].sum())
                if gain > best:
                    best, what = gain, f"route {route}, warm {warms}"
        print(
            f"request {index} (its route {int(action[0])}, warm "
            f"{tuple(int(x) for x in action[1 : 1 + n])}): best gain {best:.1f} s ({what})",
            flush=True,
        )


class CloneRerouted(Policy):
    """The clone, with its route replaced where :meth:`route` says so."""

    name = "clone_rerouted"

    def __init__(self, clone: AgentPolicy) -> None:
        self.clone, self.n_nodes, self.changes = clone, 0, 0

    def reset(self, sim: Any) -> None:
        self.clone.reset(sim)
        self.n_nodes = sim.n_nodes

    def node_rows(self, obs: np.ndarray) -> np.ndarray:
        return np.asarray(obs[: self.n_nodes * len(NODE_FEATURES)]).reshape(self.n_nodes, -1)

    @abstractmethod
    def route(self, sim: Any, request: Any, obs: np.ndarray, mask: Any, own: int) -> int:
        """The node for this arrival; ``own`` is the clone's."""

    def decide(self, sim: Any, request: Any) -> None:
        obs, mask = self.clone.observe(sim, request)
        action = np.array(self.clone.act(obs, mask), dtype=np.int64)
        own = int(action[0])
        action[0] = self.route(sim, request, obs, mask, own)
        self.changes += int(action[0]) != own
        self.clone.apply(sim, request, action)


class IdleFirst(CloneRerouted):
    """The clone, except that a long decision goes to the first idle node (no work,
    no backlog in the observation) when there is one."""

    name = "idle_first"

    def route(self, sim: Any, request: Any, obs: np.ndarray, mask: Any, own: int) -> int:
        if hold_s(obs, own) >= 0.25:
            idle = sorted(k for k in idle_nodes(obs, self.n_nodes) if mask[k])
            if idle and own not in idle:
                return idle[0]
        return own


def idle() -> None:
    cfg, _ = setting()
    windows = window_pool_of(cfg, "val", cfg.workload.val_windows)
    model, spec = load_agent(CLONE)
    rule = IdleFirst(AgentPolicy(model, spec))
    policies = {"the clone": AgentPolicy(model, spec), "idle first": rule}
    runs = evaluate_policies(
        policies, cluster_of(cfg), windows, sim_of(cfg), seed=0, baseline=None, trace_window=None
    )
    print("windows:", ", ".join(w.name.rsplit("/", 1)[-1] for w in windows))
    for name, run in zip(policies, runs):
        means = [float(np.mean(w.ttft_s)) for w in run.windows]
        print(
            f"{name}: geometric mean {float(np.exp(np.mean(np.log(means)))):.4f}, windows "
            f"{[round(m, 4) for m in means]}"
        )
    print(f"idle first changed {rule.changes} decisions")


def _bursts_alone(window: Workload) -> Workload:
    return Workload(
        window.name, window.block_tokens, [r for r in window.requests if r.job_kind == "burst"]
    )


def _decoys_row(position: int) -> dict[str, Any]:
    cfg, _ = setting()
    window = [w for w in window_pool_of(cfg, "test", None) if "/synthetic1s-" in w.name][position]
    cluster, sim = cluster_of(cfg), sim_of(cfg)
    bursts = _bursts_alone(window)
    floor, capacity = floor_bounds(cluster, window, sim)
    _, bursts_capacity = floor_bounds(cluster, bursts, sim)
    decoys = [r.index for r in window.requests if r.job_kind == "decoy"]
    decoy_floor_s = float(floor[decoys].sum())
    n = len(window.requests)
    row: dict[str, Any] = {
        "window": window.name.rsplit("/", 1)[-1],
        "floor_capacity": capacity,
        "bursts_alone_floor_capacity": (bursts_capacity * len(bursts.requests) + decoy_floor_s) / n,
    }
    model, spec = load_agent(CLONE)
    improved, improved_spec = load_agent(IMPROVED)
    for name, make in (
        ("btb_pending", lambda: make_policy("btb_pending")),
        ("oracle_warm", lambda: make_policy("oracle_warm")),
        ("bc_route_warm_spare", lambda: AgentPolicy(model, spec)),
        ("improve_spare", lambda: AgentPolicy(improved, improved_spec)),
    ):
        # the random stream experiments.evaluate gives this window (seed 0)
        whole, alone = (
            run_window(make(), cluster, w, sim, (0, position)) for w in (window, bursts)
        )
        row[name] = (
            float(np.mean(whole.ttft_s)),
            (float(np.sum(alone.ttft_s)) + decoy_floor_s) / n,
        )
    return row


def decoys() -> None:
    with multiprocessing.get_context("fork").Pool(2) as workers:
        rows = workers.map(_decoys_row, range(15), chunksize=1)
    names = ("btb_pending", "oracle_warm", "bc_route_warm_spare", "improve_spare")
    print(
        "| window | floor_capacity: window / bursts alone | "
        + " | ".join(f"{n}: window / bursts alone" for n in names)
        + " |"
    )
    print("|---|--:|" + "--:|" * len(names))
    for r in rows:
        cells = [f"{r[n][0]:.4f} / {r[n][1]:.4f}" for n in names]
        print(
            f"| {r['window']} | {r['floor_capacity']:.4f} / "
            f"{r['bursts_alone_floor_capacity']:.4f} | " + " | ".join(cells) + " |"
        )
    mean = {n: np.mean([r[n] for r in rows], axis=0) for n in names}
    capacity = np.mean([[r["floor_capacity"], r["bursts_alone_floor_capacity"]] for r in rows], 0)
    print(
        f"| mean of 15 | {capacity[0]:.4f} / {capacity[1]:.4f} | "
        + " | ".join(f"{mean[n][0]:.4f} / {mean[n][1]:.4f}" for n in names)
        + " |"
    )


class StackDuringBursts(CloneRerouted):
    """The clone, except that a long request with a prefix not seen before, arriving
    while a burst is being served, goes to the node the burst uses least."""

    name = "stack_during_bursts"
    burst_arrivals, span_s = 20, 8.0

    def __init__(self, clone: AgentPolicy) -> None:
        super().__init__(clone)
        self.seen: collections.Counter[int] = collections.Counter()
        self.recent: collections.deque[list[Any]] = collections.deque()  # [time, prefix, node]

    def reset(self, sim: Any) -> None:
        super().reset(sim)
        self.seen.clear()
        self.recent.clear()

    def route(self, sim: Any, request: Any, obs: np.ndarray, mask: Any, own: int) -> int:
        key, entry = request.blocks[0], [sim.now, request.blocks[0], own]
        self.recent.append(entry)
        while self.recent[0][0] < sim.now - self.span_s:
            self.recent.popleft()
        new, self.seen[key] = self.seen[key] == 0, self.seen[key] + 1
        if new and hold_s(obs, own) >= 0.25:
            counts = collections.Counter(e[1] for e in self.recent)
            hot = {k for k, c in counts.items() if c >= self.burst_arrivals and k != key}
            if hot:
                share = collections.Counter(e[2] for e in self.recent if e[1] in hot)
                rows = self.node_rows(obs)
                allowed = [k for k in range(self.n_nodes) if mask[k]]
                entry[2] = min(allowed, key=lambda k: (share[k], -rows[k, BACKLOG]))
        return int(entry[2])


class ClairvoyantDecoys(CloneRerouted):
    """The clone, except that each decoy goes to the node minimising its own first
    token plus ``lam`` x the seconds its prefill overlaps any burst's first
    ``span_s`` seconds (it knows when every burst starts)."""

    name = "clairvoyant_decoys"
    prefill_s, span_s = 4.7, 7.5

    def __init__(self, clone: AgentPolicy, window: Workload, lam: float) -> None:
        super().__init__(clone)
        self.lam = lam
        firsts: dict[int, float] = {}
        for r in window.requests:
            if r.job_kind == "burst":
                firsts.setdefault(r.blocks[0], r.arrival_s)
        self.starts = sorted(firsts.values())

    def route(self, sim: Any, request: Any, obs: np.ndarray, mask: Any, own: int) -> int:
        if request.job_kind != "decoy":
            return own
        rows = self.node_rows(obs)

        def cost(k: int) -> float:
            end = sim.now + from_log_seconds(float(rows[k, FIRST_TOKEN]))
            overlap = sum(
                max(0.0, min(end, b + self.span_s) - max(end - self.prefill_s, b))
                for b in self.starts
            )
            return end - sim.now + self.lam * overlap

        return min((k for k in range(self.n_nodes) if mask[k]), key=lambda k: (cost(k), k != own))


def _window_mean_without(cfg: Any, window: Workload, policy: Policy, lo: float, hi: float) -> float:
    """The window's mean TTFT with the decoys arriving ``lo``..``hi`` s from a burst's
    start removed, each charged its per-request floor instead."""
    starts = [window.requests[v[0]].arrival_s for v in users_of(window).values() if len(v) > 1]
    gone = {
        r.index
        for r in window.requests
        if r.job_kind == "decoy" and any(lo <= r.arrival_s - b < hi for b in starts)
    }
    cluster, sim = cluster_of(cfg), sim_of(cfg)
    floor, _ = floor_bounds(cluster, window, sim)
    kept = Workload(
        window.name, window.block_tokens, [r for r in window.requests if r.index not in gone]
    )
    served = run_window(policy, cluster, kept, sim, (0, 0))
    return (float(np.sum(served.ttft_s)) + float(floor[sorted(gone)].sum())) / len(window.requests)


def rules() -> None:
    cfg, pool = setting()
    model, spec = load_agent(CLONE)
    cluster, sim = cluster_of(cfg), sim_of(cfg)
    rows: dict[str, list[float]] = collections.defaultdict(list)
    for window in pool:
        clone = AgentPolicy(model, spec)
        for name, lo, hi in (
            ("the clone", 0.0, 0.0),
            ("the clone, decoys 4.7 s before a burst at their floor", -4.7, 0.0),
            ("the clone, decoys 0-8 s into a burst at their floor", 0.0, 8.0),
            ("the clone, every decoy at its floor", -1e9, 1e9),
        ):
            rows[name].append(_window_mean_without(cfg, window, clone, lo, hi))
        policies: dict[str, Policy] = {"stack during bursts": StackDuringBursts(clone)}
        for lam in (0.0, 30.0, 100.0, 1000.0):
            policies[f"clairvoyant decoys, lam={lam:g}"] = ClairvoyantDecoys(clone, window, lam)
        for name, policy in policies.items():
            rows[name].append(
                float(np.mean(run_window(policy, cluster, window, sim, (0, 0)).ttft_s))
            )
    print("windows:", ", ".join(w.name.rsplit("/", 1)[-1] for w in pool))
    for name, means in rows.items():
        print(f"{name}: mean {np.mean(means):.4f}, windows {[round(m, 4) for m in means]}")


def main() -> None:
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "decisions":
        states = int(sys.argv[2]) if len(sys.argv) > 2 else 48
        decisions(states, float(sys.argv[3]) if len(sys.argv) > 3 else 0.25)
    elif what == "warm":
        warm(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
    elif what == "idle":
        idle()
    elif what == "decoys":
        decoys()
    elif what == "rules":
        rules()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
