"""The scripts in ``examples/`` run, in-process on small windows, and print and
return what they say; their pieces are checked on states worked out by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers btb/*)
from envs.sim import SimConfig, Simulator, setup_cluster
from envs.sim.request import Workload
from envs.workloads.registry import windows

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SMALL = {"n_bursts": 2, "burst_requests": 50, "n_decoys": 10}  # 110 requests a window
# llama-3.3-70b on 4xH100: 2 x 70.6e9 FLOP a token / (4 x 989e12 FLOP/s x MFU 0.5)
PREFILL_S_PER_TOKEN = 2 * 70.6e9 / (4 * 989e12 * 0.5)
ONE_REQUEST_TOKENS = 65_536 + 256  # a burst request: the shared prefix and its own suffix


def load(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` by its path, as its script runs (a module of its
    own, not ``examples.<name>``)."""
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def one_request_window() -> Workload:
    return next(windows("bursted_synthetic", "test", n_bursts=1, burst_requests=1, n_decoys=0))


def test_python_api(capsys: pytest.CaptureFixture[str]) -> None:
    summary = load("python_api").main(**SMALL)
    assert summary["requests"] == 110
    out = capsys.readouterr().out
    assert out == (
        f"110 requests: mean TTFT {summary['ttft_mean_s']:.3f} s, "
        f"p95 {summary['ttft_p95_s']:.3f} s, {summary['warm_copies']} warm copies\n"
    )
    # no request is served sooner than its own cold prefill of the suffix
    assert summary["ttft_mean_s"] >= 256 * PREFILL_S_PER_TOKEN


def test_custom_policy_pieces_by_hand() -> None:
    module = load("custom_policy")
    window = one_request_window()
    sim = Simulator(setup_cluster("70b_h100x4"), window, SimConfig())
    (request,) = window.requests
    assert request.input_tokens == ONE_REQUEST_TOKENS
    # an empty cluster: no wait, nothing cached, the whole prompt is prefilled (4.70 s)
    for node in sim.nodes:
        assert module.prefill_end_s(sim, node, request) == pytest.approx(
            ONE_REQUEST_TOKENS * PREFILL_S_PER_TOKEN, rel=1e-12
        )
    assert module.SoonestPrefill().decide(sim, request) == 0  # a tie: the lowest index
    records = module.SoonestPrefill().run(sim)
    assert records.ttft_s[0] == pytest.approx(4.6966, abs=1e-4)


def test_custom_policy_against_cache_aware(capsys: pytest.CaptureFixture[str]) -> None:
    results = load("custom_policy").main(n_windows=1, **SMALL)
    assert set(results) == {"cache_aware", "soonest_prefill"}
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["policy", "window", "requests", "TTFT", "mean", "p95"]
    assert len(lines) == 3
    for line, (name, runs) in zip(lines[1:], results.items()):
        ((window_name, summary),) = runs.items()
        assert summary["requests"] == 110
        assert line.split() == [
            name,
            window_name,
            "110",
            f"{summary['ttft_mean_s']:.3f}",
            f"{summary['ttft_p95_s']:.3f}",
        ]


@pytest.mark.parametrize(("slo_s", "on_time"), [(5.0, 1), (4.0, 0)])
def test_slo_reward_by_hand(slo_s: float, on_time: int) -> None:
    """One request alone: its TTFT is its cold prefill, 4.70 s."""
    module = load("reward_wrapper")
    env = module.SloReward(gym.make("btb/Route-v0", windows=[one_request_window()]), slo_s=slo_s)
    env.reset(seed=0)
    _, reward, terminated, _, info = env.step(0)
    assert terminated
    assert (info["slo_on_time"], info["slo_late"]) == (on_time, 1 - on_time)
    assert reward == (1.0 if on_time else -1.0)
    with pytest.raises(ValueError, match="slo_s must be > 0"):
        module.SloReward(env.env, slo_s=0.0)


def test_reward_wrapper_episode(capsys: pytest.CaptureFixture[str]) -> None:
    result = load("reward_wrapper").main(slo_s=1.0, **SMALL)
    assert result["on_time"] + result["late"] == 110  # every request counted exactly once
    assert result["return"] == result["on_time"] - result["late"]
    assert result["late"] > 0  # the first request of each burst prefills 65,792 tokens: 4.7 s
    assert capsys.readouterr().out == (
        f"SLO 1 s: {result['on_time']} requests on time, {result['late']} late, "
        f"episode return {result['return']:+.0f}\n"
    )


def test_examples_are_the_three_scripts_and_a_workload() -> None:
    """The scripts, the workload of one's own (tests/workloads/test_workload_plugins.py
    runs it) and the package's __init__.py."""
    scripts = sorted(path.name for path in EXAMPLES.glob("*.py"))
    assert scripts == [
        "__init__.py", "custom_policy.py", "own_workload.py", "python_api.py", "reward_wrapper.py"
    ]  # fmt: skip
