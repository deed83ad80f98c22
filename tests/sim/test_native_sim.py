"""Whole simulations with the compiled core and with the reference give the same
per-request records (every field), summaries and final caches; and the choice
between them (envs/sim/native.py) falls back to the reference as documented.

The compiled core is two parts: the prefix cache (``envs/sim/_native/cache.pyx``)
and the simulator's hot path with its typed nodes (``envs/sim/_native/core.pyx``,
``CompiledSimulator``). Each run here is made twice in one process: the
reference (``core="python"`` and the Python cache) and the compiled (both
compiled); a third run pairs the reference simulator with the compiled cache
where that separates the two parts.

The cases are test_sim_all_options.py's (every option at once, under
test_sim_fuzz.py's Chaos policy or a baseline) and real windows of the
registered workloads under the baselines, with chunked prefill and with decode
overshoot, and under random faults at two simulator seeds. The equivalence
tests skip when the compiled modules are not built; the fallback tests always
run."""

from __future__ import annotations

import copy
import functools
import os
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from simkit import records_equal
from test_sim_all_options import _case, _run

from baselines import make_policy
from envs.sim import SimConfig, Simulator, native, setup_cluster
from envs.sim.cache import PrefixCache
from envs.sim.node import Node
from envs.sim.request import BlockChainer, Workload
from envs.sim.simulator import CompiledSimulator

try:
    from envs.sim._native import cache as compiled  # type: ignore[attr-defined]
    from envs.sim._native import core as compiled_core  # type: ignore[attr-defined]
except ImportError:
    compiled = compiled_core = None

needs_compiled = pytest.mark.skipif(
    CompiledSimulator is None, reason="the compiled core is not built or not chosen"
)
CASES = int(os.environ.get("BTB_FUZZ_CASES", "40"))
"""All-options cases in the default suite; BTB_FUZZ_CASES scales them."""


def _same_runs(reference: Simulator, native_run: Simulator) -> None:
    from test_native_cache import cache_state

    assert type(reference) is Simulator and reference.core == "python"
    assert all(type(node) is Node for node in reference.nodes)
    assert all(type(node.cache) is PrefixCache for node in reference.nodes)
    assert type(native_run) is CompiledSimulator and native_run.core == "compiled"
    assert all(type(node) is compiled_core.Node for node in native_run.nodes)
    assert all(type(node.cache) is compiled.PrefixCache for node in native_run.nodes)
    records_equal(reference.records, native_run.records)
    assert repr(native_run.records.summary) == repr(reference.records.summary)
    for a, b in zip(reference.nodes, native_run.nodes):
        assert cache_state(b.cache) == cache_state(a.cache)
        assert cache_state(b.view) == cache_state(a.view)
        assert _node_fields(b) == _node_fields(a)


def _node_fields(node: Any) -> list[Any]:
    """A node's counters and times (its queues and objects are compared through the
    records and caches)."""
    return [
        getattr(node, name)
        for name in Node.__slots__
        if isinstance(getattr(node, name), (bool, int, float))
    ]


def _both(run: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``run(core)`` under the reference (Python cache) and the compiled core."""
    sims = []
    for cls, core in ((PrefixCache, "python"), (compiled.PrefixCache, "compiled")):
        monkeypatch.setattr(native, "PrefixCache", cls)
        sims.append(run(core))
    _same_runs(*sims)


@needs_compiled
@pytest.mark.parametrize("seed", range(CASES))
def test_every_option_at_once_gives_the_same_run_with_either_core(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, policy, budgets, workload = _case(seed)
    _both(lambda core: _run(config, policy, budgets, workload, seed, core), monkeypatch)


def _real_runs(
    workload: Workload, policy: str, monkeypatch: pytest.MonkeyPatch, **options: Any
) -> None:
    def run(core: str) -> Simulator:
        config = SimConfig(causal_kv=True, **options)
        sim = Simulator(setup_cluster("70b_h100x4"), workload, config, core=core)
        make_policy(policy).run(sim)
        return sim

    _both(run, monkeypatch)


@functools.cache
def _bursted() -> Workload:
    from envs.workloads.bursted import synthetic_window

    return synthetic_window(window=0)


@needs_compiled
@pytest.mark.parametrize("policy", ["cache_aware", "btb", "btb_pending", "oracle_warm"])
def test_a_bursted_window_gives_the_same_run_with_either_core(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _real_runs(_bursted(), policy, monkeypatch)


@needs_compiled
def test_random_faults_give_the_same_run_with_either_core_and_differ_by_seed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Both cores draw faults from one stream (``envs.sim.faults.fault_rng``, from
    the simulator's seed): the same seed gives the same run under each, and two
    windows' seeds (evaluation's ``[0, 0]`` and ``[0, 1]``) meet other faults."""
    config = SimConfig(
        causal_kv=True,
        fault_copy_fail_prob=0.5,
        fault_copy_slow_prob=0.3,
        fault_copy_slowdown=3.0,
        fault_node_loss_rate_per_s=0.01,
        fault_node_down_s=30.0,
    )

    def fault_counts(rng_seed: list[int]) -> dict[str, int]:
        """btb's run under ``default_rng(rng_seed)``, the same under both cores."""
        sims: list[Simulator] = []

        def run(core: str) -> Simulator:
            rng = np.random.default_rng(rng_seed)
            sim = Simulator(setup_cluster("70b_h100x4"), _bursted(), config, rng, core=core)
            make_policy("btb").run(sim)
            sims.append(sim)
            return sim

        _both(run, monkeypatch)
        summary = sims[0].records.summary
        return {key: value for key, value in summary.items() if key.startswith("fault_")}

    faults = [fault_counts([0, 0]), fault_counts([0, 1])]
    assert all(f["fault_copies_failed"] and f["fault_node_losses"] for f in faults)
    # the losses drawn (taken or skipped) depend on the faults' stream alone (btb's
    # tie-breaks move the other counts too)
    drawn = [f["fault_node_losses"] + f["fault_node_losses_skipped"] for f in faults]
    assert drawn[0] != drawn[1]


@functools.cache
def _conversation_start() -> Workload:
    """The first 600 requests of a conversation_like test window (multi-turn reuse,
    long outputs: decode segments, interrupts)."""
    from envs.workloads.registry import windows

    window = next(windows("conversation_like", "test", limit=1))
    return Workload(window.name, window.block_tokens, window.requests[:600])


@needs_compiled
@pytest.mark.parametrize(
    ("policy", "options"),
    [
        ("cache_aware", {}),
        ("btb", {}),
        ("cache_aware", {"chunked_prefill_tokens": 2048}),
        ("dynamo", {"decode_overshoot": True}),
        ("btb", {"chunked_prefill_tokens": 512, "decode_overshoot": True, "causal_kv": False}),
    ],
)
def test_a_conversation_window_gives_the_same_run_with_either_core(
    policy: str, options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {"causal_kv": True, **options}
    workload = _conversation_start()

    def run(core: str) -> Simulator:
        sim = Simulator(setup_cluster("70b_h100x4"), workload, SimConfig(**options), core=core)
        make_policy(policy).run(sim)
        return sim

    _both(run, monkeypatch)


@needs_compiled
def test_the_reference_simulator_with_the_compiled_cache_gives_the_same_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The two compiled parts apart: the reference simulator on compiled caches
    gives the compiled core's run."""
    from test_native_cache import cache_state

    sims = []
    for core in ("python", "compiled"):
        monkeypatch.setattr(native, "PrefixCache", compiled.PrefixCache)
        sim = Simulator(setup_cluster("70b_h100x4"), _conversation_start(), core=core)
        make_policy("cache_aware").run(sim)
        sims.append(sim)
    records_equal(sims[0].records, sims[1].records)
    assert repr(sims[0].records.summary) == repr(sims[1].records.summary)
    assert [cache_state(n.cache) for n in sims[0].nodes] == [
        cache_state(n.cache) for n in sims[1].nodes
    ]


# ---------------------------------------------------------------- the nodes
@needs_compiled
def test_a_compiled_node_reads_writes_pickles_and_copies_as_the_reference() -> None:
    """Policies and the Python modules read and change nodes by name; vector envs
    and tests copy them. Both kinds of node behave alike mid-run."""
    nodes = []
    for core in ("python", "compiled"):
        sim = Simulator(setup_cluster("70b_h100x4"), _bursted(), core=core)
        run = sim.decisions()
        request = next(run)
        for _ in range(300):  # far enough that nodes hold queues, batches and caches
            request = run.send(request.index % sim.n_nodes)
        nodes.append(sim.nodes)
    for a, b in zip(*nodes):
        assert _node_fields(b) == _node_fields(a)
        assert (b.load, b.computing, b.estimated_wait_s(0.5)) == (
            a.load,
            a.computing,
            a.estimated_wait_s(0.5),
        )
        assert b.cache_capacity_blocks(256) == a.cache_capacity_blocks(256)
        assert b.copy_room_blocks(256) == a.copy_room_blocks(256)
        for twin in (pickle.loads(pickle.dumps(b)), copy.deepcopy(b)):
            assert type(twin) is type(b)
            assert _node_fields(twin) == _node_fields(b)
            assert list(twin.queue) == list(b.queue) and twin.batch_heap == b.batch_heap
            assert twin.costs.decode_s(3, 2, 100) == b.costs.decode_s(3, 2, 100)
    node = nodes[1][0]
    node.reserved_tokens += 512
    node.down = True
    assert (node.reserved_tokens, node.down) == (nodes[0][0].reserved_tokens + 512, True)


@needs_compiled
def test_a_compiled_simulator_pickles_and_copies_before_it_runs() -> None:
    sim = Simulator(setup_cluster("70b_h100x4"), _conversation_start())
    assert type(sim) is CompiledSimulator
    twins = [pickle.loads(pickle.dumps(sim)), copy.deepcopy(sim)]
    make_policy("cache_aware").run(sim)
    for twin in twins:
        assert type(twin) is CompiledSimulator and twin.block_tokens == sim.block_tokens
        make_policy("cache_aware").run(twin)
        records_equal(twin.records, sim.records)


def test_a_simulator_names_its_core() -> None:
    sim = Simulator(setup_cluster("70b_h100x4"), _conversation_start(), core="python")
    assert type(sim) is Simulator and sim.core == "python"
    default = Simulator(setup_cluster("70b_h100x4"), _conversation_start())
    assert default.core == native.CORE
    with pytest.raises(ValueError, match="core must be 'compiled', 'python' or None"):
        Simulator(setup_cluster("70b_h100x4"), _conversation_start(), core="fast")
    if CompiledSimulator is None:
        with pytest.raises(ValueError, match="core='compiled' is not available"):
            Simulator(setup_cluster("70b_h100x4"), _conversation_start(), core="compiled")


# ---------------------------------------------------------------- the choice
def test_a_missing_compiled_core_falls_back_with_one_line_on_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(native.PURE_PYTHON_ENV, raising=False)
    for module in ("envs.sim._native.cache", "envs.sim._native.core"):
        with monkeypatch.context() as patch:
            patch.setitem(sys.modules, module, None)  # hides the module
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
    if compiled_core is None or opted_out:
        assert (native.PrefixCache, native.CORE) == (PrefixCache, "python")
        assert native.BlockChainer is BlockChainer
        assert CompiledSimulator is None
    else:  # this process's own choice
        assert (native.PrefixCache, native.CORE) == (compiled.PrefixCache, "compiled")
        assert native.BlockChainer.__module__ == "envs.sim._native.chainer"
        assert CompiledSimulator.__mro__[1:3] == (compiled_core.SimCore, Simulator)
    if compiled_core is not None:
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
    allowed = ("collections", "copy", "heapq", "math", "cpython", "libc", "envs.sim")
    assert [m for m in modules if not m.startswith(allowed)] == []
    assert np  # (numpy is the tests' own)
