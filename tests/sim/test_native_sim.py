"""Whole simulations with the compiled cache and with the reference give the same
per-request records (every field), summaries and final caches; and the choice
between them (envs/sim/native.py) falls back to the reference as documented.

The cases are test_sim_all_options.py's (every option at once, under
test_sim_fuzz.py's Chaos policy or a baseline) and real windows of the
registered workloads. The equivalence tests skip when the compiled module is not
built; the fallback tests always run."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import pytest
from simkit import records_equal
from test_sim_all_options import _case, _run

from baselines import make_policy
from envs.sim import SimConfig, Simulator, native, setup_cluster
from envs.sim.cache import PrefixCache
from envs.sim.request import BlockChainer, Workload

try:
    from envs.sim._native import cache as compiled  # type: ignore[attr-defined]
except ImportError:
    compiled = None

needs_compiled = pytest.mark.skipif(
    compiled is None, reason="the compiled core is not built (no C compiler at install?)"
)
CASES = int(os.environ.get("BTB_FUZZ_CASES", "40"))
"""All-options cases in the default suite; BTB_FUZZ_CASES scales them."""


def _same_runs(reference: Simulator, native_run: Simulator) -> None:
    from test_native_cache import cache_state

    assert all(type(node.cache) is compiled.PrefixCache for node in native_run.nodes)
    assert all(type(node.cache) is PrefixCache for node in reference.nodes)
    records_equal(reference.records, native_run.records)
    assert repr(native_run.records.summary) == repr(reference.records.summary)
    for a, b in zip(reference.nodes, native_run.nodes):
        assert cache_state(b.cache) == cache_state(a.cache)
        assert cache_state(b.view) == cache_state(a.view)


@needs_compiled
@pytest.mark.parametrize("seed", range(CASES))
def test_every_option_at_once_gives_the_same_run_with_either_cache(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, policy, budgets, workload = _case(seed)
    runs = []
    for cls in (PrefixCache, compiled.PrefixCache):
        monkeypatch.setattr(native, "PrefixCache", cls)
        runs.append(_run(config, policy, budgets, workload, seed))
    _same_runs(*runs)


def _real_runs(workload: Workload, policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = []
    for cls in (PrefixCache, compiled.PrefixCache):
        monkeypatch.setattr(native, "PrefixCache", cls)
        sim = Simulator(setup_cluster("70b_h100x4"), workload, SimConfig(causal_kv=True))
        make_policy(policy).run(sim)
        runs.append(sim)
    _same_runs(*runs)


@needs_compiled
@pytest.mark.parametrize("policy", ["btb", pytest.param("oracle_warm", marks=pytest.mark.slow)])
def test_a_bursted_window_gives_the_same_run_with_either_cache(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envs.workloads.bursted import synthetic_window

    _real_runs(synthetic_window(window=0), policy, monkeypatch)


@functools.cache
def _conversation_start() -> Workload:
    """The first 1,500 requests of a conversation_like test window (multi-turn reuse)."""
    from envs.workloads.registry import windows

    window = next(windows("conversation_like", "test", limit=1))
    return Workload(window.name, window.block_tokens, window.requests[:1500])


@needs_compiled
@pytest.mark.slow
@pytest.mark.parametrize("policy", ["cache_aware", "dynamo"])
def test_a_conversation_window_gives_the_same_run_with_either_cache(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _real_runs(_conversation_start(), policy, monkeypatch)


# ---------------------------------------------------------------- the choice
def test_a_missing_compiled_core_falls_back_with_one_line_on_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(native.PURE_PYTHON_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "envs.sim._native.cache", None)  # hides the module
    assert native._choose() == (PrefixCache, BlockChainer, "python")
    assert capsys.readouterr().err == native.NOTICE + "\n"


def test_opting_out_chooses_the_reference_silently(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(native.PURE_PYTHON_ENV, "1")
    assert native._choose() == (PrefixCache, BlockChainer, "python")
    assert capsys.readouterr().err == ""


def test_the_compiled_core_is_chosen_when_it_imports(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    opted_out = os.environ.get(native.PURE_PYTHON_ENV, "") not in ("", "0")
    if compiled is None or opted_out:
        assert (native.PrefixCache, native.CORE) == (PrefixCache, "python")
        assert native.BlockChainer is BlockChainer
    else:  # this process's own choice
        assert (native.PrefixCache, native.CORE) == (compiled.PrefixCache, "compiled")
        assert native.BlockChainer.__module__ == "envs.sim._native.chainer"
    if compiled is not None:
        monkeypatch.delenv(native.PURE_PYTHON_ENV, raising=False)
        assert native._choose()[::2] == (compiled.PrefixCache, "compiled")
        assert capsys.readouterr().err == ""


def test_the_compiled_modules_import_only_the_world_and_the_standard_library() -> None:
    """The layering test reads .py files only; the .pyx twins keep the world's rule too
    (no gymnasium, torch or hydra: envs/sim and the standard library)."""
    folder = Path(__file__).resolve().parents[2] / "envs" / "sim" / "_native"
    modules = []
    for pyx in sorted(folder.glob("*.pyx")):
        for line in pyx.read_text(encoding="utf-8").splitlines():
            words = line.split()
            if words[:1] in (["import"], ["from"]):
                modules.append(words[1])
    assert "envs.sim" in modules and "cpython.dict" in modules  # the lines are found
    allowed = ("copy", "math", "cpython", "libc", "envs.sim")
    assert [m for m in modules if not m.startswith(allowed)] == []
