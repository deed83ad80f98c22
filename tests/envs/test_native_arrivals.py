"""The compiled per-arrival work of the envs (``envs._native.arrivals``) against the
Python reference: the traffic counts of ``TrafficTracker``, the threshold
controller's epoch loop (``EpochController.run``: ``EpochEncoder.record``, BTB's
decision, the hit share) and single ``route`` calls (the agent adapter's path),
and the epoch observation (``EpochEncoder.encode``). Whole ``btb/Thresholds-v0``
episodes give the same observations, rewards and per-request records to the bit,
with the published and the eft rules, on a Bursted window and on a busy small
one. Both paths run in one process; the tests skip when the module is not built
or not chosen."""

from __future__ import annotations

import dataclasses
import functools
import sys
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import baselines.btb as btb_module
import envs
import envs.encoder
from baselines import routers
from envs.encoder import ARRIVALS, EpochEncoder, TrafficTracker
from envs.sim import SimConfig, Simulator, setup_cluster
from envs.sim.request import Workload
from envs.thresholds import EpochController
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

assert envs.ENV_IDS  # registers the environments

needs_compiled = pytest.mark.skipif(
    ARRIVALS is None, reason="the compiled per-arrival work is not built or not chosen"
)
BUSY = BurstedSyntheticConfig(
    n_bursts=3,
    burst_requests=80,
    prefix_tokens=16384,
    first_burst_s=6.0,
    burst_interval_s=2.0,
    burst_window_s=0.5,
    n_decoys=12,
)


@functools.cache
def _windows(suffix_tokens: int = 256) -> tuple[Workload, ...]:
    """Window 0 of the published Bursted layout and a busy small window 1 (each
    request's own suffix ``suffix_tokens``; past one block, y_tokens keys it)."""
    return (
        synthetic_window(BurstedSyntheticConfig(suffix_tokens=suffix_tokens), window=0),
        synthetic_window(dataclasses.replace(BUSY, suffix_tokens=suffix_tokens), window=1),
    )


def _episode(
    window: Workload,
    seed: int,
    compiled: bool,
    eft_rules: bool,
    spread_rules: bool = False,
    y_tokens: int | None = None,
) -> dict[str, Any]:
    """A Thresholds-v0 episode of random actions; every observation, reward and record."""
    env = gym.make(
        "btb/Thresholds-v0",
        setup="70b_h100x4",
        windows=[window],
        eft_rules=eft_rules,
        spread_rules=spread_rules,
        y_tokens=y_tokens,
    )
    inner = env.unwrapped
    inner.controller = EpochController(
        inner.n_nodes,
        inner.epoch_s,
        eft_rules,
        compiled=compiled,
        spread_rules=spread_rules,
        y_tokens=y_tokens,
    )
    env.action_space.seed(seed)
    obs, _ = env.reset(seed=seed)
    observations, rewards, done = [obs], [], False
    while not done:
        obs, reward, done, _, _ = env.step(env.action_space.sample())
        observations.append(obs)
        rewards.append(reward)
    sim = inner.sim
    return {
        "observations": np.array(observations),
        "rewards": np.array(rewards),
        "records": sim.records.as_dict(),
        "copies": [(c.src, c.dst, c.blocks, c.issued_s) for c in sim.copies],
        "log": inner.controller.log,
    }


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a["observations"].tobytes() == b["observations"].tobytes()  # to the bit
    assert a["rewards"].tobytes() == b["rewards"].tobytes()
    assert a["records"].keys() == b["records"].keys()
    for name, values in a["records"].items():
        np.testing.assert_array_equal(values, b["records"][name], err_msg=name)
    assert a["copies"] == b["copies"] and a["log"] == b["log"]


def _python_baselines(monkeypatch: pytest.MonkeyPatch) -> None:
    """BTB's decision and the routers' scans back to the Python reference."""
    monkeypatch.setattr(btb_module, "btb_twin", lambda policy, sim: None)
    for name in ("up_nodes", "least_loaded", "cache_aware_choice"):
        monkeypatch.setattr(btb_module, name, getattr(routers.REFERENCE, name))
        monkeypatch.setattr(routers, name, getattr(routers.REFERENCE, name))


@needs_compiled
@pytest.mark.parametrize("window", [0, 1])
@pytest.mark.parametrize(
    ("eft_rules", "spread_rules", "y_tokens"),
    [(False, False, None), (True, False, None), (True, True, None), (True, False, 8192)],
)
def test_a_thresholds_episode_is_the_same_with_either_path(
    window: int,
    eft_rules: bool,
    spread_rules: bool,
    y_tokens: int | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workload = _windows(256 if y_tokens is None else 512)[window]
    compiled = _episode(workload, window, True, eft_rules, spread_rules, y_tokens)
    assert compiled["copies"] or window == 1  # BTB warmed on the Bursted window
    if spread_rules:  # BTB stood aside in some epochs
        assert "spread" in {setting[4] for _, setting in compiled["log"]}
    # the compiled loop on the Python BTB, then everything in Python
    with monkeypatch.context() as patch:
        _python_baselines(patch)
        _same(compiled, _episode(workload, window, True, eft_rules, spread_rules, y_tokens))
        _same(compiled, _episode(workload, window, False, eft_rules, spread_rules, y_tokens))


@needs_compiled
def test_single_routes_and_epoch_observations_are_the_reference() -> None:
    """The agent adapter's path: ``observe``, ``apply``, then ``route`` one arrival at
    a time; at every epoch the compiled observation equals the Python one."""
    workload = _windows()[1]
    rng = np.random.default_rng(3)
    runs = []
    for compiled in (True, False):
        sim = Simulator(setup_cluster("70b_h100x4"), workload, SimConfig(causal_kv=True))
        controller = EpochController(sim.n_nodes, 0.5, True, compiled=compiled)
        controller.reset(sim)
        actions = iter(rng.integers(0, controller.bounds, size=(len(workload), 5)))
        rng = np.random.default_rng(3)  # the same actions for both
        observations = []
        gen = sim.decisions()
        for request in gen:
            while True:
                if not controller.in_epoch(request):
                    if controller.epoch_end > -np.inf:
                        controller.close_epoch(sim)
                    obs = controller.observe(sim).copy()
                    if compiled:  # the reference on the same state (idempotent)
                        controller.encoder.compiled = False
                        assert controller.observe(sim).tobytes() == obs.tobytes()
                        controller.encoder.compiled = True
                    observations.append(obs)
                    controller.apply(next(actions), request.arrival_s)
                try:
                    request = gen.send(controller.route(sim, request))
                except StopIteration:
                    break
            break
        stats = controller.stats
        runs.append(
            (
                np.array(observations).tobytes(),
                sim.records.as_dict(),
                (stats.arrivals, stats.repeats, stats.hit_sum, stats.top_count),
                (stats.max_same_1s, stats.max_same_10s, stats.top and stats.top.index),
            )
        )
    assert runs[0][0] == runs[1][0] and runs[0][2:] == runs[1][2:]
    for name, values in runs[0][1].items():
        np.testing.assert_array_equal(values, runs[1][1][name], err_msg=name)


@needs_compiled
def test_the_compiled_traffic_counts_are_the_reference() -> None:
    rng = np.random.default_rng(11)
    compiled, reference = TrafficTracker(), TrafficTracker()
    now = 0.0
    trims = 0
    for i in range(20_000):
        # bursts of one key (over 64 arrivals in 60 s: the list is trimmed), ties in time
        now += 0.0 if rng.random() < 0.1 else float(rng.exponential(0.2 if i % 3000 < 400 else 2))
        key = 0 if i % 3000 < 400 else int(rng.integers(50))
        before = len(reference._times.get(key, ()))
        expected = reference.observe(key, now)
        trims += len(reference._times[key]) <= before
        got = ARRIVALS.observe(compiled, key, now)
        assert got == expected and type(got[3]) is float
    assert compiled._times == reference._times and compiled._first == reference._first
    assert trims > 10  # the lists were trimmed as they went


@needs_compiled
def test_a_compiled_epoch_encoder_writes_the_reference_floats() -> None:
    """Odd states: no arrivals, a negative gap, a top request of one block."""
    workload = _windows()[1]
    sim = Simulator(setup_cluster("70b_h100x4"), workload, SimConfig(causal_kv=True))
    controller = EpochController(sim.n_nodes, 1.0)
    controller.reset(sim)
    encoders = (EpochEncoder(sim.n_nodes), EpochEncoder(sim.n_nodes, compiled=False))
    settings = (0.5, 0.25, 1.0, 0.75, 1.0 / 3.0)
    stats = controller.stats
    for gap in (0.0, -0.0, -1.0, 3.5):
        a, b = (e.encode(sim, stats, settings, gap).copy() for e in encoders)
        assert a.tobytes() == b.tobytes()
    one_block = workload.requests[0].__class__(0, "x", 0.0, 10, 1, (123,))
    for encoder in encoders:
        encoder.record(stats, one_block, 0.0)
    stats.hit_sum = 0.3
    a, b = (e.encode(sim, stats, settings, 0.2).copy() for e in encoders)
    assert a.tobytes() == b.tobytes() and a[-1] == 0.0


@needs_compiled
@pytest.mark.parametrize(
    ("hints", "spare"), [(False, False), (True, False), (False, True), (True, True)]
)
def test_route_observations_are_the_reference_with_and_without_options(
    hints: bool, spare: bool
) -> None:
    """A Route-v0 episode, some steps through a baseline's ``policy_action`` (the
    request is then routed before the action): at every decision the compiled
    encoder writes the Python one's floats."""
    from baselines import make_policy

    workload = _windows()[1]
    env = gym.make(
        "btb/Route-v0", setup="70b_h100x4", windows=[workload], hints=hints, spare_features=spare
    )
    inner = env.unwrapped
    encoders = [
        envs.encoder.ObservationEncoder(inner.n_nodes, hints, c, spare) for c in (True, False)
    ]
    oracle = make_policy("oracle_warm")  # routes the request itself, then answers
    obs, _ = env.reset(seed=4)
    oracle.reset(inner.sim)
    env.action_space.seed(4)
    done, steps, routed = False, 0, 0
    while not done:
        a, b = (e.encode(inner.sim, inner.request).tobytes() for e in encoders)
        assert a == b == obs.tobytes(), steps
        if steps % 3 == 0:
            action = inner.policy_action(oracle)
            routed += inner.sim.routed_node() is not None
        else:
            action = env.action_space.sample()
        obs, _, done, _, _ = env.step(action)
        steps += 1
    assert steps == len(workload) and routed > 0


def test_a_missing_compiled_module_runs_the_python_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if envs.encoder.NATIVE is None:  # opted out or not built: the Python already runs
        assert envs.encoder._choose_arrivals() is None
        return
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "envs._native.arrivals", None)  # hides the module
        assert envs.encoder._choose_arrivals() is None
        assert capsys.readouterr().err.startswith("btb-gym: compiled per-arrival env work unusable")
    assert envs.encoder._choose_arrivals() is ARRIVALS
    controller = EpochController(4, 1.0, compiled=False)
    assert controller._arrivals is None and not controller.encoder.compiled
