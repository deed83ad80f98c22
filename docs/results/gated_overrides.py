"""The clone everywhere but at long decisions: the numbers of the section "The
clone everywhere but at long decisions" of ``rollout_improvement.md``.

    python docs/results/gated_overrides.py rounds SEED [ROUNDS]   # fit rounds (validation)
    python docs/results/gated_overrides.py confident FITTED P,...  # overrides where sure
    python docs/results/gated_overrides.py test FITTED P          # the chosen one (test)

``rounds`` serves 4 train windows a round (one a family, ``round_windows``)
with the combined policy: ``agents/zoo/bc_route_warm_spare`` everywhere, a
second copy of it choosing the route where the clone's own route is long
(``hold_s`` >= 0.25 s; the rest of the action stays the clone's). At 24 long
decisions a window every node is measured by
``agents.rollout_improvement.measure_window`` (600 requests of past, 300 of
horizon); the second copy is fitted to the
measured decisions (4 copies, the best node where it saves >= 0.5 s) and to
every other long decision of the window with the route taken, every round's
labels kept (5 epochs, lr 3e-4), and scored on the 8 validation windows of
``+experiment=improve_spare`` (geometric mean of their mean TTFTs). The copy
of round R is saved as ``OUT/fitted_sSEED_rR.zip``.

``confident`` scores, on the same validation windows, the clone with an
override wherever a fitted copy's own route probability is at least P;
``test`` runs the clone and that policy on all 15 test windows of each family
of ``70b_h100x4``. ``--out`` (default ``runs/gated_overrides``) holds the
fitted copies. 2 measuring processes; a round takes 45-50 s on an idle 2-core
machine.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from pathlib import Path
from typing import Any

import numpy as np
from hydra import compose, initialize_config_dir
from sb3_contrib import MaskablePPO

from agents.adapter import AgentPolicy
from agents.algorithms import load_agent
from agents.imitation import Demonstrations, pretrain
from agents.imitation_settings import ImitationSettings
from agents.improvement_settings import ImprovementSettings
from agents.rollout_improvement import _Probe, _serve, measure_window
from baselines.policy import Policy
from envs.encoder import hold_s
from envs.sim.request import Workload
from experiments.config import cluster_of, sim_of, window_pool_of
from experiments.evaluation import evaluate_policies
from experiments.train import round_windows

ROOT = Path(__file__).resolve().parents[2]
CLONE = ROOT / "agents" / "zoo" / "bc_route_warm_spare"
FAMILIES = ("bursted_synthetic", "bursted_synthetic_1s", "rising_load", "mixed", "art_like")
HOLD_S, MIN_GAIN_S, LEAD, HORIZON, STATES, WINDOWS, REPEAT = 0.25, 0.5, 600, 300, 24, 4, 4


class Gated(Policy):
    """The clone's action; where its route is long, the fitted copy's route
    (every time, or with ``confidence`` only where the copy's own probability
    of its route is at least that)."""

    name = "gated"

    def __init__(self, base: AgentPolicy, fitted: AgentPolicy | None, confidence: float = 0.0):
        self.base, self.fitted, self.confidence = base, fitted, confidence
        self.overrides = 0
        self.n_nodes = 0

    def reset(self, sim: Any) -> None:
        self.n_nodes = sim.n_nodes
        self.base.reset(sim)
        if self.fitted is not None:
            self.fitted.reset(sim)

    def observe(self, sim: Any, request: Any) -> Any:
        return self.base.observe(sim, request)

    def apply(self, sim: Any, request: Any, action: Any) -> None:
        self.base.apply(sim, request, action)

    def act(self, obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        action = np.array(self.base.act(obs, mask), dtype=np.int64)
        fitted = self.fitted
        if fitted is None or hold_s(obs, int(action[0])) < HOLD_S:
            return action
        n = self.n_nodes  # the route's logits come first
        if self.confidence > 0.0:
            assert fitted.batch_actor is not None
            logits = np.where(mask[:n], fitted.batch_actor.logits(obs)[:n], -np.inf)
            prob = np.exp(logits - logits.max())
            prob /= prob.sum()
            route = int(prob.argmax())
            if prob[route] < self.confidence:
                return action
        else:
            route = int(fitted.act(obs, mask)[0])
        if route != action[0]:
            self.overrides += 1
            action[0] = route
        return action

    def decide(self, sim: Any, request: Any) -> None:
        obs, mask = self.observe(sim, request)
        self.apply(sim, request, self.act(obs, mask))


_JOB: dict[str, Any] = {}


def measure(job: tuple[Workload, int]) -> tuple[Demonstrations, Demonstrations, int]:
    """One window: ``agents.rollout_improvement.measure_window`` at STATES long
    decisions (its labels, each REPEAT times), and the window's other long
    decisions with the action taken (the anchors); returns (anchors, labels,
    measured decisions changed)."""
    window, seed = job
    agent, cluster, sim = _JOB["agent"], _JOB["cluster"], _JOB["sim"]
    settings = ImprovementSettings(
        states_per_window=STATES,
        lead_requests=LEAD,
        horizon_requests=HORIZON,
        min_gain_s=MIN_GAIN_S,
        hold_s=HOLD_S,
        anchor_per_window=0,
        repeat=REPEAT,
    )
    labels, stats = measure_window(agent, window, cluster, sim, settings, seed)
    # the same run again, remembering every decision: the long ones not measured
    everything = _Probe(agent, range(len(window.requests)), long_s=HOLD_S)
    _serve(everything, cluster, window, sim, seed)
    measured = {d["index"] for d in stats.decisions}
    anchors = Demonstrations()
    for index in everything.long:
        if index not in measured:
            obs, mask, action = everything.seen[index]
            anchors.obs.append(obs), anchors.masks.append(mask)
            anchors.actions.append(action), anchors.returns.append(0.0)
    return anchors, labels, stats.changed


def config(overrides: list[str], name: str = "train") -> Any:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(name, overrides=overrides)


def serve(policies: dict[str, Policy], cfg: Any, windows: list[Any]) -> list[Any]:
    """Each policy's run over ``windows`` (evaluation seed 0, as the commands use)."""
    return evaluate_policies(
        policies, cluster_of(cfg), windows, sim_of(cfg), seed=0, baseline=None, trace_window=None
    )


def validation(policy: Policy, cfg: Any, windows: list[Any]) -> tuple[float, list[float]]:
    (run,) = serve({"gated": policy}, cfg, windows)
    means = [float(np.mean(w.ttft_s)) for w in run.windows]
    return float(np.exp(np.mean(np.log(means)))), means


def rounds(seed: int, count: int, out: Path) -> None:
    cfg = config(["+experiment=improve_spare", f"seed={seed}"])
    pool = window_pool_of(cfg, "train", None)
    val = window_pool_of(cfg, "val", cfg.workload.val_windows)
    base, spec = load_agent(CLONE)
    fitted, _ = load_agent(CLONE)
    print(f"clone: validation {validation(Gated(AgentPolicy(base, spec), None), cfg, val)[0]:.4f}")
    labels = Demonstrations()
    for number in range(1, count + 1):
        started = time.perf_counter()
        second = AgentPolicy(fitted, spec) if number > 1 else None
        windows = round_windows(pool, WINDOWS, number, seed, True)
        _JOB.update(
            agent=Gated(AgentPolicy(base, spec), second), cluster=cluster_of(cfg), sim=sim_of(cfg)
        )
        jobs = [(w, seed * 1000 + number * 100 + i) for i, w in enumerate(windows)]
        with multiprocessing.get_context("fork").Pool(2) as workers:
            results = workers.map(measure, jobs, chunksize=1)
        changed = 0
        for anchors, measured, count_changed in results:  # anchors first, as measured
            for part in (anchors, measured):
                for name in ("obs", "masks", "actions", "returns"):
                    getattr(labels, name).extend(getattr(part, name))
            changed += count_changed
        fit = pretrain(
            fitted,
            labels,
            ImitationSettings(epochs=5, batch_size=256, learning_rate=3e-4),
            seed * 1000 + number,
        )
        fitted.save(out / f"fitted_s{seed}_r{number}.zip")
        score, _ = validation(Gated(AgentPolicy(base, spec), AgentPolicy(fitted, spec)), cfg, val)
        print(
            f"round {number}: {changed} measured decisions changed, {len(labels)} labels, "
            f"fit accuracy {fit['bc_accuracy']:.3f}, validation {score:.4f} "
            f"[{time.perf_counter() - started:.0f} s]",
            flush=True,
        )


def gated(fitted: str, confidence: float) -> Gated:
    base, spec = load_agent(CLONE)
    copy = MaskablePPO.load(fitted, device="cpu")
    return Gated(AgentPolicy(base, spec), AgentPolicy(copy, spec), confidence)


def confident(fitted: str, levels: list[float]) -> None:
    cfg = config(["+experiment=improve_spare"])
    val = window_pool_of(cfg, "val", cfg.workload.val_windows)
    for level in levels:
        policy = gated(fitted, level)
        score, means = validation(policy, cfg, val)
        print(
            f"{fitted} p={level}: validation {score:.4f}, {policy.overrides} overrides, "
            f"windows {[round(m, 4) for m in means]}",
            flush=True,
        )


def test(fitted: str, level: float) -> None:
    rows: dict[str, Any] = {}
    for family in FAMILIES:
        cfg = config(["setup=70b_h100x4", f"workload={family}"], "evaluate")
        windows = window_pool_of(cfg, "test", 15)
        policy = gated(fitted, level)
        base, spec = load_agent(CLONE)
        runs = serve({"clone": AgentPolicy(base, spec), "gated": policy}, cfg, windows)
        rows[family] = {
            "overrides": policy.overrides,
            **{
                name: [r.row["ttft_mean_s"], r.row["ttft_p95_s"]]
                for name, r in zip(("clone", "gated"), runs)
            },
        }
        print(family, json.dumps(rows[family]), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("rounds", "confident", "test"))
    parser.add_argument("args", nargs="+")
    parser.add_argument("--out", type=Path, default=Path("runs/gated_overrides"))
    a = parser.parse_args()
    if a.what == "rounds":
        a.out.mkdir(parents=True, exist_ok=True)
        rounds(int(a.args[0]), int(a.args[1]) if len(a.args) > 1 else 4, a.out)
    elif a.what == "confident":
        confident(a.args[0], [float(x) for x in a.args[1].split(",")])
    else:
        test(a.args[0], float(a.args[1]))


if __name__ == "__main__":
    main()
