"""The compiled node rows (``envs._native.observation``) and the compiled forecast
under them (``envs.sim._native.forecast``) against the Python reference
(``envs.sim.forecast.estimates_with_hits``, with and without the decode step
left, and the encoder's own rows):
the same estimates and the same observation, to the bit, at every decision of
busy episodes with copies in flight, copies waiting for their source, long
queues, attention FLOPs (a prefill that is not linear) and a stale router view."""

from __future__ import annotations

import os
import sys

import gymnasium as gym
import numpy as np
import pytest

import envs
import envs.encoder
from envs.encoder import NATIVE, ObservationEncoder
from envs.sim.forecast import estimates_with_hits
from envs.sim.native import PURE_PYTHON_ENV
from envs.sim.transfers import WAIT_SOURCE
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

assert envs.ENV_IDS  # registers the environments

native = pytest.importorskip("envs._native.observation", reason="compiled rows not built")
forecast = pytest.importorskip("envs.sim._native.forecast", reason="compiled forecast not built")

BURSTS = BurstedSyntheticConfig(
    n_bursts=2,
    burst_requests=50,
    prefix_tokens=8192,
    first_burst_s=6.0,
    burst_interval_s=3.0,
    burst_window_s=1.0,
    n_decoys=8,
)


@pytest.mark.parametrize(
    "sim",
    [{}, {"attention_flops": True}, {"router_view_delay_s": 0.3}],
    ids=["plain", "attention_flops", "view_delay"],
)
def test_compiled_rows_give_the_reference_floats(sim):
    window = synthetic_window(BURSTS, window=2)
    env = gym.make("btb/RouteWarm-v0", windows=[window], sim=sim).unwrapped
    compiled = ObservationEncoder(env.n_nodes, compiled=True)
    reference = ObservationEncoder(env.n_nodes, compiled=False)
    compiled_memo: dict = {}
    reference_memo: dict = {}
    env.action_space.seed(3)
    rng = np.random.default_rng(5)
    env.reset(seed=7)
    decisions = waiting = longest = 0
    done = False
    while not done:
        s, request = env.sim, env.request
        for step_wait in (False, True):  # one memo each: the queue costs do not depend on it
            expected = estimates_with_hits(s, request, reference_memo, step_wait)
            got = forecast.estimates_with_hits(s, request, compiled_memo, step_wait)
            assert got == expected, (decisions, step_wait)
        # each encoder keeps its own memo and traffic: the whole observation, bit for bit
        assert compiled.encode(s, request).tobytes() == reference.encode(s, request).tobytes()
        decisions += 1
        waiting += sum(c.state == WAIT_SOURCE for n in s.nodes for c in n.inflight.values())
        longest = max(longest, *(len(n.queue) for n in s.nodes))
        action = env.action_space.sample()
        action[1:-1] = rng.random(env.n_nodes) < 0.3
        _, _, done, _, _ = env.step(action)
    assert decisions == len(window.requests)
    assert waiting > 0 and longest >= 10  # copies waited for a source; queues were long


def test_the_process_choice_is_the_default(monkeypatch, capsys):
    opted_out = os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0")
    assert NATIVE is (None if opted_out else native)
    assert ObservationEncoder(2)._native is NATIVE
    assert ObservationEncoder(2, compiled=True)._native is native
    assert ObservationEncoder(2, compiled=False)._native is None
    monkeypatch.delenv(PURE_PYTHON_ENV, raising=False)
    assert envs.encoder._choose_native() == (native, "compiled")
    assert capsys.readouterr().err == ""


def test_opting_out_chooses_the_python_rows_silently(monkeypatch, capsys):
    monkeypatch.setenv(PURE_PYTHON_ENV, "1")
    assert envs.encoder._choose_native() == (None, "python")
    assert capsys.readouterr().err == ""


def test_missing_compiled_rows_fall_back_with_one_line_on_stderr(monkeypatch, capsys):
    monkeypatch.delenv(PURE_PYTHON_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "envs._native.observation", None)  # hides the module
    assert envs.encoder._choose_native() == (None, "python")
    err = capsys.readouterr().err
    assert err.startswith("btb-gym: compiled observation encoder unusable (")
    assert err.endswith("); using the Python one\n") and err.count("\n") == 1


def test_a_sim_larger_than_the_encoder_or_a_request_without_blocks_is_an_error():
    """The compiled rows write without bounds checks, so they check the sizes first:
    an encoder built for 2 nodes fed a 4-node cluster (an agent reset on one
    cluster and run on another) is an error, as it is for the reference, never a
    write past the buffer; so is a hand-made request without blocks."""
    import dataclasses

    env = gym.make("btb/Route-v0", windows=[synthetic_window(BURSTS, window=2)]).unwrapped
    env.reset(seed=0)
    assert env.n_nodes == 4
    for compiled in (True, False):
        small = ObservationEncoder(2, compiled=compiled)
        small.reset()
        with pytest.raises(ValueError):
            small.encode(env.sim, env.request)
        encoder = ObservationEncoder(4, compiled=compiled)
        encoder.reset()
        with pytest.raises(IndexError):
            encoder.encode(env.sim, dataclasses.replace(env.request, blocks=()))
    with pytest.raises(ValueError, match=r"4 nodes' rows \(40 floats\) do not fit"):
        native.node_rows(env.sim, env.request, {}, np.zeros(20, dtype=np.float32))


FUZZ_SETUPS = ("70b_h100x4", "qwen3_8b_h100x4", "glm45_h100x4")


@pytest.mark.parametrize("case", range(8))
def test_compiled_rows_agree_on_random_windows_options_and_play(case):
    """A fuzz: a random bursted window on a random setup, random simulator options
    (attention FLOPs, contention copies, the reference KV model, a stale router view,
    decode overshoot, no HBM read), random observation options (``time_unit``,
    ``step_wait``, ``hints``, ``spare_features``) and random masked play with warms
    and evictions: the compiled and the Python encoder give the env's observation
    to the bit at every decision (``BTB_GYM_PURE_PYTHON`` aside, the env's is the
    compiled one)."""
    rng = np.random.default_rng(1000 + case)
    setup = FUZZ_SETUPS[case % len(FUZZ_SETUPS)]
    config = BurstedSyntheticConfig(
        n_bursts=int(rng.integers(1, 3)),
        burst_requests=int(rng.integers(10, 40)),
        prefix_tokens=int(rng.choice([1024, 4096, 8192, 16384])),
        suffix_tokens=int(rng.choice([64, 256, 1024])),
        output_tokens=int(rng.choice([1, 8, 64])),
        first_burst_s=6.0,
        decoy_lead_s=5.0,
        burst_interval_s=float(rng.uniform(0.5, 4.0)),
        burst_window_s=float(rng.choice([0.2, 1.0, 4.0])),
        n_decoys=int(rng.integers(0, 10)),
    )
    window = synthetic_window(config, window=int(rng.integers(0, 5)))
    drawn = {
        "attention_flops": True,
        "copy_model": "contention",
        "causal_kv": False,
        "router_view_delay_s": 0.2,
        "decode_overshoot": True,
        "hbm_hit_load": False,
    }
    sim = {name: value for name, value in drawn.items() if rng.random() < 0.3}
    options = {
        "time_unit": str(rng.choice(["seconds", "reference"])),
        "step_wait": bool(rng.random() < 0.5),
        "hints": bool(rng.random() < 0.5),
        "spare_features": bool(rng.random() < 0.5),
    }
    env = gym.make("btb/RouteWarm-v0", setup=setup, windows=[window], sim=sim, **options).unwrapped
    n = env.n_nodes
    encoders = [ObservationEncoder(n, compiled=c, **options) for c in (True, False)]
    warm_p = float(rng.choice([0.0, 0.1, 0.5]))
    obs, _ = env.reset(seed=case)
    for encoder in encoders:
        encoder.reset()
    decisions, done = 0, False
    while not done:
        compiled, reference = (e.encode(env.sim, env.request).tobytes() for e in encoders)
        assert compiled == reference == obs.tobytes(), (decisions, setup, sim, options)
        decisions += 1
        mask = env.action_masks()
        action = np.zeros(env.action_space.shape, dtype=np.int64)
        action[0] = rng.choice(np.flatnonzero(mask[:n]))
        action[1 : 1 + n] = (rng.random(n) < warm_p) & mask[n + 1 : 3 * n : 2]
        if rng.random() < 0.05:
            action[1 + n] = rng.choice(np.flatnonzero(mask[3 * n : 4 * n + 1]))
        obs, _, done, _, _ = env.step(action)
    assert decisions == len(window.requests)
