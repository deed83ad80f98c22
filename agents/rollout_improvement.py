"""Rollout policy improvement: approximate policy iteration on the simulator.

PPO estimates how good an action was from the returns of sampled episodes, in
which thousands of other decisions and the traffic itself move the sum of TTFT
far more than one routing choice does. The simulator is deterministic, so the
value of an action can be measured instead: replay the window up to a decision,
take each possible action there, let the current policy act everywhere after,
and compare the summed TTFT. That is Monte-Carlo policy evaluation of each
action with one sample of the future (the window's own arrivals), and fitting
the policy to the best measured action is a policy-improvement step
(classification-based approximate policy iteration).

One round (:func:`improve_round`) of a btb/RouteWarm-v0 agent:

1. The agent serves each of a set of train windows greedily; every arrival it
   routes to a node it would hold for at least ``hold_s`` seconds is a *long*
   decision (a cold prefill, the decisions that move TTFT most).
2. At ``states_per_window`` long decisions drawn at random, the window is cut
   ``horizon_requests`` after the decision (and, with ``lead_requests``, that
   many before it; by default the whole past is replayed, so the state is the
   one the agent met). On each node the action mask allows, the
   agent's action with only the route changed is played there, the agent acts
   everywhere else, and the TTFTs of the requests from the decision on are
   summed (every request of the cut window is served, so effects within the
   horizon all count).
3. The label is the node with the lowest sum when it saves at least
   ``min_gain_s`` seconds over the agent's own, else the agent's own choice; the
   rest of the action is the agent's. ``anchor_per_window`` of the agent's own
   greedy decisions per window join the labels, so fitting the measured ones
   moves nothing else; with ``warm_anchor_repeat``, so does every decision of
   the agent's that warms a node, that many times (rare, and decisive on the
   burst families).
4. The policy is fitted to the labels by cross-entropy
   (:func:`agents.imitation.pretrain`). The fitted policy serves the round's
   windows again; unless the geometric mean of their summed TTFTs is lower
   than before the fit (a plain sum over windows whose sums differ a
   hundredfold between families would weigh one family only), the fit is
   undone: a fit can move decisions other than the measured ones, and labels
   measured on one future can mislead on others.

With ``warm_variant`` each window is also served by the agent warming the
arriving prefix onto every node the mask allows (with ``warm_calm_s``, only at
arrivals where no node has that many seconds of work ahead). Where that lowers
the window's summed TTFT by at least ``warm_variant_gain`` (a share), the
window's anchors are taken from that trajectory, and its measured decisions'
labels warm every allowed node too (calm or not: they are long decisions,
measured on the agent's own trajectory). A choice measured over the whole
window, because a copy pays off minutes later (the next turn of a
conversation) and step 2's 300-request horizon does not see it.

The caller scores the policy on validation windows after every round and keeps
the best (``experiments.train``, ``improvement.iterations``).
"""

from __future__ import annotations

import copy
import math
import multiprocessing
import signal
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agents.adapter import AgentPolicy
from agents.imitation import Demonstrations, pretrain
from agents.imitation_settings import ImitationSettings
from agents.improvement_settings import ImprovementSettings
from baselines.policy import Policy
from envs.encoder import hold_s, max_backlog_s
from envs.processes import run_in_processes
from envs.route_warm import allowed_warms
from envs.sim import ClusterSpec, SimConfig, Simulator
from envs.sim.request import Request, Workload


class _Probe(Policy):
    """The agent acting greedily, which remembers (observation, mask, action) at
    the arrivals in ``record`` (and, with ``keep_warms``, in ``warms`` at every
    arrival where it warms a node), lists its long decisions when ``long_s`` is set,
    routes the arrival ``fork`` to ``node`` instead of its own choice, and with
    ``warm_all`` warms onto every node the mask allows at every arrival (with
    ``calm_s``, only where no node has that many seconds of work ahead)."""

    name = "rollout_probe"

    def __init__(
        self,
        agent: AgentPolicy,
        record: Sequence[int] = (),
        long_s: float | None = None,
        fork: int = -1,
        node: int = -1,
        warm_all: bool = False,
        calm_s: float | None = None,
        keep_warms: bool = False,
    ) -> None:
        self.agent = agent
        self.keep_warms = keep_warms
        self.warms: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.warm_all = warm_all
        self.calm_s = math.inf if calm_s is None else calm_s
        self.record = set(record)
        self.long_s = long_s
        self.fork = fork
        self.node = node
        self.seen: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.long: list[int] = []

    def reset(self, sim: Simulator) -> None:
        self.agent.reset(sim)
        self.seen.clear()
        self.warms.clear()
        self.long.clear()

    def decide(self, sim: Simulator, request: Request) -> None:
        agent = self.agent
        obs, mask = agent.observe(sim, request)
        assert mask is not None, "rollout improvement needs a masked route-warm agent"
        action = np.array(agent.act(obs, mask), dtype=np.int64)
        n = sim.n_nodes
        if self.warm_all and max_backlog_s(obs, n) < self.calm_s:
            action[1 : 1 + n] = allowed_warms(mask, n)
        index = request.index
        if index in self.record:
            self.seen[index] = (obs.copy(), mask.copy(), action.copy())
        if self.keep_warms and action[1 : 1 + n].any():
            self.warms.append((obs.copy(), mask.copy(), action.copy()))
        if self.long_s is not None and hold_s(obs, int(action[0])) >= self.long_s:
            self.long.append(index)
        if index == self.fork:
            action[0] = self.node
        agent.apply(sim, request, action)


@dataclass
class RoundStats:
    """What one round measured and fitted."""

    windows: list[str] = field(default_factory=list)
    long_decisions: int = 0
    measured: int = 0
    changed: int = 0
    saved_s: float = 0.0
    """Summed TTFT the changed labels save over the agent's own choices, as measured."""
    labels: int = 0
    before_s: list[float] = field(default_factory=list)
    """Summed TTFT of each of the round's windows, served by the policy before the fit."""
    after_s: list[float] = field(default_factory=list)
    """... by the fitted policy."""
    warm_windows: int = 0
    """Windows the warm variant won (``warm_variant``): their anchors come from the
    variant's trajectory and their measured labels warm every allowed node."""
    warm_variant_s: list[float] = field(default_factory=list)
    """Summed TTFT of each window served by the warm variant (``warm_variant`` on)."""
    accepted: bool = True
    """The fit lowered the geometric mean of the windows' summed TTFTs (else the
    weights were restored)."""
    fit: dict[str, float] = field(default_factory=dict)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    """Per measured decision: window, index, the agent's node, the label's, and
    each node's summed TTFT (inf where the mask forbids the node)."""

    @property
    def change(self) -> float:
        """The fit's change of the geometric mean of the round's windows' summed
        TTFTs (-0.02: 2 % lower)."""
        if not self.after_s:
            return 0.0
        return float(np.exp(np.mean(np.log(np.divide(self.after_s, self.before_s)))) - 1.0)

    def add(self, other: RoundStats) -> None:
        """Count ``other``'s measurements (one window's) into these."""
        self.windows += other.windows
        self.long_decisions += other.long_decisions
        self.measured += other.measured
        self.changed += other.changed
        self.saved_s += other.saved_s
        self.decisions += other.decisions
        self.before_s += other.before_s
        self.warm_windows += other.warm_windows
        self.warm_variant_s += other.warm_variant_s

    def as_dict(self) -> dict[str, Any]:
        return {
            "windows": list(self.windows),
            "long_decisions": self.long_decisions,
            "measured": self.measured,
            "changed": self.changed,
            "saved_s": self.saved_s,
            "labels": self.labels,
            "before_s": self.before_s,
            "after_s": self.after_s,
            "warm_windows": self.warm_windows,
            "warm_variant_s": self.warm_variant_s,
            "change": self.change,
            "accepted": self.accepted,
            **{key: float(value) for key, value in self.fit.items()},
            "decisions": list(self.decisions),
        }


def _serve(
    probe: _Probe, cluster: ClusterSpec, workload: Workload, sim: SimConfig, seed: int
) -> np.ndarray:
    """Each request's TTFT (s) when ``probe`` serves ``workload``."""
    simulator = Simulator(cluster, workload, sim, np.random.default_rng(seed))
    return np.asarray(probe.run(simulator).ttft_s, dtype=float)


def measure_window(
    agent: AgentPolicy,
    window: Workload,
    cluster: ClusterSpec,
    sim: SimConfig,
    settings: ImprovementSettings,
    seed: int,
    measure: bool = True,
    variant: bool = True,
) -> tuple[Demonstrations, RoundStats]:
    """Steps 1-3 of a round on one window: its labels and what was measured.
    ``seed`` seeds the simulator and the draws of anchors and long decisions;
    ``measure`` False keeps the anchors only (``improvement.anchor_families``);
    ``variant`` False does not try the warm variant here
    (``improvement.warm_variant_families``)."""
    rng = np.random.default_rng(seed)
    demos, stats = Demonstrations(), RoundStats()
    requests = window.requests
    anchors = rng.choice(len(requests), min(settings.anchor_per_window, len(requests)), False)
    base = _Probe(
        agent, anchors.tolist(), long_s=settings.hold_s, keep_warms=settings.warm_anchor_repeat > 0
    )
    stats.before_s.append(float(_serve(base, cluster, window, sim, seed).sum()))
    labelled = base
    if settings.warm_variant and variant:
        warm_all = _Probe(agent, anchors.tolist(), warm_all=True, calm_s=settings.warm_calm_s)
        own_s = stats.before_s[-1]
        variant_s = float(_serve(warm_all, cluster, window, sim, seed).sum())
        stats.warm_variant_s.append(variant_s)
        if variant_s <= own_s * (1.0 - settings.warm_variant_gain):
            stats.warm_windows, labelled = 1, warm_all
    own_warms = base.warms * settings.warm_anchor_repeat if labelled is base else []
    for obs, mask, action in [*labelled.seen.values(), *own_warms]:
        demos.obs.append(obs)
        demos.masks.append(mask)
        demos.actions.append(action)
        demos.returns.append(0.0)
    stats.windows.append(window.name)
    stats.long_decisions += len(base.long)
    states = min(settings.states_per_window, len(base.long)) if measure else 0
    picks = sorted(rng.choice(base.long, states, False))
    n_nodes = len(cluster.nodes)
    lead = settings.lead_requests
    for index in picks:
        start = 0 if lead is None else max(0, int(index) - lead)
        cut = Workload(
            window.name,
            window.block_tokens,
            requests[start : int(index) + settings.horizon_requests],
        )
        at = int(index) - start
        own = _Probe(agent, [at])
        sums = np.full(n_nodes, np.inf)
        own_sum = float(_serve(own, cluster, cut, sim, seed)[at:].sum())
        obs, mask, action = own.seen[at]
        chosen = int(action[0])
        sums[chosen] = own_sum
        for node in range(n_nodes):
            if node != chosen and mask[node]:
                probe = _Probe(agent, fork=at, node=node)
                sums[node] = float(_serve(probe, cluster, cut, sim, seed)[at:].sum())
        best = int(np.argmin(sums))
        stats.measured += 1
        if own_sum - sums[best] < settings.min_gain_s:
            best = chosen
        if best != chosen:
            stats.changed += 1
            stats.saved_s += own_sum - float(sums[best])
        stats.decisions.append(
            {
                "window": window.name,
                "index": int(index),
                "chosen": chosen,
                "label": best,
                "sums_s": sums.tolist(),
            }
        )
        label = action.copy()
        label[0] = best
        if stats.warm_windows:
            label[1 : 1 + n_nodes] = allowed_warms(mask, n_nodes)
        for _ in range(settings.repeat):
            demos.obs.append(obs)
            demos.masks.append(mask)
            demos.actions.append(label)
            demos.returns.append(0.0)
    return demos, stats


_WORKER: dict[str, Any] = {}
"""What a forked measuring process reads: the round's agent, cluster, sim, settings."""


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _measure_in_worker(
    job: tuple[Workload, int, bool, bool],
) -> tuple[Demonstrations, RoundStats]:
    window, seed, measure, variant = job
    w = _WORKER
    return measure_window(
        w["agent"], window, w["cluster"], w["sim"], w["settings"], seed, measure, variant
    )


def improve_round(
    model: Any,
    spec: Any,
    windows: Sequence[Workload],
    cluster: ClusterSpec,
    sim: SimConfig,
    settings: ImprovementSettings,
    seed: int,
    demos: Demonstrations | None = None,
    anchored: Collection[str] = (),
    variant_windows: Collection[str] | None = None,
) -> RoundStats:
    """One round on ``windows``: measure with the model as it is, then fit it to
    the new labels, added to ``demos`` (the earlier rounds' labels when the caller
    keeps them: ``improvement.aggregate``). A window named in ``anchored`` gives
    its anchors only; with ``variant_windows`` the warm variant is tried on the
    windows it names only (None: on every window)."""
    agent = AgentPolicy(model, spec)  # reads the weights now: a new one each round
    demos = demos if demos is not None else Demonstrations()
    jobs = [
        (
            window,
            seed * 1000 + position,
            window.name not in anchored,
            variant_windows is None or window.name in variant_windows,
        )
        for position, window in enumerate(windows)
    ]
    if settings.workers > 1 and len(jobs) > 1:
        # forked processes inherit the agent; each window's result depends on its
        # own seed only, so the labels are the same for any number of workers
        _WORKER.update(agent=agent, cluster=cluster, sim=sim, settings=settings)
        try:
            # Ctrl-C is the parent's to handle: it ends the workers (a worker that took
            # it too printed its traceback); a worker lost is an error, never a hang
            results = run_in_processes(
                _measure_in_worker,
                [(job,) for job in jobs],
                min(settings.workers, len(jobs)),
                initializer=_ignore_sigint,
                context=multiprocessing.get_context("fork"),
            )
        finally:
            _WORKER.clear()
    else:
        results = [measure_window(agent, w, cluster, sim, settings, s, m, v) for w, s, m, v in jobs]
    stats = RoundStats()
    for part, measured in results:
        for name in ("obs", "masks", "actions", "returns"):
            getattr(demos, name).extend(getattr(part, name))
        stats.add(measured)
    stats.labels = len(demos)
    if not len(demos):  # no anchors asked for and no long decision met: nothing to fit
        stats.accepted = False
        return stats
    fit = ImitationSettings(
        epochs=settings.epochs,
        batch_size=settings.batch_size,
        learning_rate=settings.learning_rate,
    )
    before = copy.deepcopy(model.policy.state_dict())
    stats.fit = pretrain(model, demos, fit, seed, keep_agreeing=settings.agreeing == "start")
    # the improvement check: the fitted policy serves the round's windows again
    fitted = AgentPolicy(model, spec)
    stats.after_s = [float(_serve(_Probe(fitted), cluster, w, sim, s).sum()) for w, s, *_ in jobs]
    if settings.undo_worse and not stats.change < 0.0:
        stats.accepted = False
        model.policy.load_state_dict(before)
    return stats
