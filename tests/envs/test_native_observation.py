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
