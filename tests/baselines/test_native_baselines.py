"""The compiled routers and BTB decision (``baselines/_native``) against the Python
reference (``baselines.routers.REFERENCE``, ``BTB.decide`` with its twin off): the
same choices and the same random draws at every decision, and whole runs with
the same per-request records and copies, on a real Bursted window and on the
all-options fuzz cases (faults that take nodes down, stale router views, the
two-tier match, copies that fail). Both paths run in one process on the compiled
simulator; the equivalence tests skip when the compiled modules are not built or
not chosen. The choice itself (``baselines.native``) is tested at the end."""

from __future__ import annotations

import copy
import functools
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import baselines.btb as btb_module
import baselines.btb_pending as btb_pending_module
import baselines.native as baselines_native
from baselines import make_policy, routers
from baselines.btb import BTB
from baselines.btb_pending import BTBPending
from baselines.policy import Policy
from baselines.window import ArrivalWindow
from envs.sim import SimConfig, Simulator, setup_cluster
from envs.sim.forecast import first_token_estimates
from envs.sim.native import PURE_PYTHON_ENV
from envs.sim.request import Request, Workload
from envs.thresholds import SwitchedBTB
from envs.workloads.bursted import synthetic_window

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sim"))
from simkit import records_equal
from test_sim_all_options import _case

needs_compiled = pytest.mark.skipif(
    baselines_native.ROUTERS is None, reason="the compiled baselines are not built or not chosen"
)
SCANS = ("up_nodes", "least_loaded", "cache_aware_choice", "soonest_node")


@functools.cache
def _bursted() -> Workload:
    return synthetic_window(window=0)


def _reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every module's router names and BTB's decision back to the Python reference."""
    for module in (routers, btb_module, btb_pending_module):
        for name in SCANS:
            if hasattr(module, name):
                monkeypatch.setattr(module, name, getattr(routers.REFERENCE, name))
    monkeypatch.setattr(btb_module, "btb_twin", lambda policy, sim: None)


class Probe(Policy):
    """Routes as the reference cache_aware does; at every decision first asks each
    compiled scan and its reference the same question on the same state and random
    generator, and demands the same answer and the same draws."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.asked = 0

    def _same(self, sim: Simulator, name: str, *args: Any) -> Any:
        state = copy.deepcopy(sim.rng.bit_generator.state)
        compiled = getattr(routers, name)(sim, *args)
        after = copy.deepcopy(sim.rng.bit_generator.state)
        sim.rng.bit_generator.state = state
        reference = getattr(routers.REFERENCE, name)(sim, *args)
        if name == "up_nodes":
            assert [n.index for n in compiled] == [n.index for n in reference]
        else:
            assert compiled == reference and type(compiled) is type(reference), name
        assert sim.rng.bit_generator.state == after, name
        self.asked += 1
        return reference

    def decide(self, sim: Simulator, request: Request) -> int:
        r = self.rng
        self._same(sim, "up_nodes")
        self._same(sim, "least_loaded")
        some = [int(i) for i in r.permutation(sim.n_nodes)[: int(r.integers(1, sim.n_nodes + 1))]]
        self._same(sim, "least_loaded", some)
        self._same(sim, "soonest_node", first_token_estimates(sim, request))
        # balanced (the longest match) and, with low bounds, imbalanced (least load)
        self._same(sim, "cache_aware_choice", request, 0, 1.0)
        self._same(sim, "cache_aware_choice", request, float(r.integers(0, 4)), 1.5)
        node: int = self._same(sim, "cache_aware_choice", request)
        return node


@needs_compiled
def test_the_compiled_scans_answer_as_the_reference_on_a_bursted_window() -> None:
    assert all(getattr(routers, n) is not getattr(routers.REFERENCE, n) for n in SCANS)
    sim = Simulator(setup_cluster("70b_h100x4"), _bursted(), SimConfig(causal_kv=True))
    probe = Probe(0)
    probe.run(sim)
    assert probe.asked == 7 * len(_bursted())


@needs_compiled
@pytest.mark.parametrize("seed", range(12))
def test_the_compiled_scans_answer_as_the_reference_under_every_option(seed: int) -> None:
    config, _, budgets, workload = _case(seed)
    config["match_tiers"] = ("hbm", "hbm_ram")[seed % 2]
    probe = Probe(seed)
    sim = _run_with(config, probe, budgets, workload, seed)
    assert probe.asked == 7 * len(workload)
    assert sim.done


def _run_with(
    config: dict[str, Any], policy: Policy, budgets: tuple[int, ...], workload: Workload, seed: int
) -> Simulator:
    """test_sim_all_options' run of a case, with ``policy``."""
    from simkit import TOY_MODEL, toy_gpu

    from envs.sim import ClusterSpec, NodeSpec

    cluster = ClusterSpec(TOY_MODEL, tuple(NodeSpec(toy_gpu(b), 1) for b in budgets))
    sim = Simulator(cluster, workload, SimConfig(**config), np.random.default_rng(seed))
    policy.run(sim)
    return sim


def _same_runs(a: Simulator, b: Simulator) -> None:
    records_equal(a.records, b.records)
    assert [(c.src, c.dst, c.blocks, c.issued_s) for c in a.copies] == [
        (c.src, c.dst, c.blocks, c.issued_s) for c in b.copies
    ]
    assert repr(a.records.summary) == repr(b.records.summary)


@needs_compiled
@pytest.mark.parametrize("policy", ["btb", "btb_pending", "btb_eft", "btb_tuned"])
@pytest.mark.parametrize("options", [{}, {"causal_kv": False}, {"decode_overshoot": True}])
def test_btb_decides_as_the_reference_on_a_bursted_window(
    policy: str, options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def run() -> tuple[Simulator, Policy]:
        config = SimConfig(**{"causal_kv": True, **options})
        sim = Simulator(setup_cluster("70b_h100x4"), _bursted(), config)
        chosen = make_policy(policy)
        chosen.run(sim)
        return sim, chosen

    compiled, twin = run()
    assert isinstance(twin, BTB) and twin._twin is baselines_native.BTB_TWIN.decide
    assert compiled.copies  # it warmed: the copy path ran
    with monkeypatch.context() as patch:
        _reference(patch)
        reference, python = run()
        assert isinstance(python, BTB) and python._twin is None
    _same_runs(compiled, reference)


@needs_compiled
@pytest.mark.parametrize("seed", range(16))
def test_btb_decides_as_the_reference_under_every_option(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    config, _, budgets, workload = _case(seed)
    name = ("btb", "btb_pending", "btb_eft")[seed % 3]
    kwargs = {"x": 1 + seed % 2, "y_tokens": 16 * (1 + seed % 3), "m": 1 + seed % 3}
    compiled = _run_with(config, make_policy(name, **kwargs), budgets, workload, seed)
    with monkeypatch.context() as patch:
        _reference(patch)
        reference = _run_with(config, make_policy(name, **kwargs), budgets, workload, seed)
    _same_runs(compiled, reference)


class Switching(Policy):
    """The threshold env's switched BTB with thresholds and rule redrawn at random
    every few arrivals (as an agent sets them each epoch)."""

    def __init__(self, seed: int) -> None:
        self.btb = SwitchedBTB(y_tokens=None, min_prefix_tokens=1024)
        self.rng = np.random.default_rng(seed)

    def reset(self, sim: Simulator) -> None:
        self.btb.reset(sim)

    def decide(self, sim: Simulator, request: Request) -> int:
        r = self.rng
        if r.random() < 0.2:
            x, z = int(r.choice([1, 2, 3, 8])), float(r.choice([0.25, 1.0, 8.0]))
            m = int(r.integers(1, sim.n_nodes + 1))
            low = int(r.choice([16, 256, 1024, 65536]))
            self.btb.set_thresholds(x, None, z, m, low)
            self.btb.pending = bool(r.random() < 0.5)
            self.btb.eft_fallback = bool(r.random() < 0.3)
        return self.btb.decide(sim, request)


@needs_compiled
@pytest.mark.parametrize("seed", range(4))
def test_the_switched_btb_decides_as_the_reference(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    def run() -> Simulator:
        sim = Simulator(setup_cluster("70b_h100x4"), _bursted(), SimConfig(causal_kv=True))
        Switching(seed).run(sim)
        return sim

    compiled = run()
    with monkeypatch.context() as patch:
        _reference(patch)
        reference = run()
    _same_runs(compiled, reference)
    config, _, budgets, workload = _case(seed)
    compiled = _run_with(config, Switching(seed), budgets, workload, seed)
    with monkeypatch.context() as patch:
        _reference(patch)
        reference = _run_with(config, Switching(seed), budgets, workload, seed)
    _same_runs(compiled, reference)


@needs_compiled
def test_the_compiled_window_counts_as_the_reference() -> None:
    twin = baselines_native.BTB_TWIN
    r = np.random.default_rng(7)
    window = ArrivalWindow()
    seen: dict[int, Any] = {}
    now = 0.0
    for _ in range(5000):
        now += float(r.exponential(0.05)) if r.random() < 0.9 else 0.0  # ties too
        key, z = int(r.integers(6)), float(r.choice([0.1, 0.5, 1.0, 4.0]))
        assert twin.window_count(seen, key, now, z) == window.count(key, now, z)
    assert {k: list(v) for k, v in seen.items()} == {k: list(v) for k, v in window._seen.items()}


class _OwnHolders(BTBPending):
    def _holders(self, sim: Simulator, prefix: tuple[int, ...]) -> Any:
        return super()._holders(sim, prefix)


class _Published(BTB):
    _twin_rules = True


@needs_compiled
def test_the_twin_runs_only_where_it_repeats_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = Simulator(setup_cluster("70b_h100x4"), _bursted())
    reference = Simulator(setup_cluster("70b_h100x4"), _bursted(), core="python")
    decide = baselines_native.BTB_TWIN.decide
    for name in ("btb", "btb_pending", "btb_eft", "btb_tuned"):
        policy = make_policy(name)
        assert baselines_native.btb_twin(policy, compiled) is decide, name
        assert baselines_native.btb_twin(policy, reference) is None, name
    assert baselines_native.btb_twin(SwitchedBTB(), compiled) is decide
    assert baselines_native.btb_twin(_Published(), compiled) is decide
    assert baselines_native.btb_twin(make_policy("btb", shadow=True), compiled) is None
    assert baselines_native.btb_twin(make_policy("btb_speculative"), compiled) is None
    assert baselines_native.btb_twin(_OwnHolders(), compiled) is None
    # on the reference simulator's nodes the scans are the reference's
    probe = Probe(1)
    probe.run(Simulator(setup_cluster("70b_h100x4"), _bursted(), core="python"))
    assert probe.asked == 7 * len(_bursted())


def test_opting_out_or_a_missing_module_chooses_the_reference(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(PURE_PYTHON_ENV, "1")
    reference = (None, None, None, "python")
    assert baselines_native._choose() == reference
    assert capsys.readouterr().err == ""
    monkeypatch.delenv(PURE_PYTHON_ENV)
    if baselines_native.sim_native.CORE != "compiled":
        assert baselines_native._choose() == reference
        return
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "baselines._native.btb", None)  # hides the module
        assert baselines_native._choose() == reference
        assert capsys.readouterr().err.startswith("btb-gym: compiled baselines unusable (")
    with monkeypatch.context() as patch:  # the estimates alone: the rest stays compiled
        patch.setitem(sys.modules, "envs.sim._native.forecast", None)
        routers_twin, btb_twin, forecast, core = baselines_native._choose()
        assert forecast is None and core == "compiled" and btb_twin is not None
        err = capsys.readouterr().err
        assert err.startswith("btb-gym: compiled first-token estimates unusable (")
    if baselines_native.ROUTERS is not None:
        assert baselines_native._choose()[3] == "compiled"
        assert routers.cache_aware_choice is baselines_native.ROUTERS.cache_aware_choice
    else:
        assert routers.cache_aware_choice is routers.REFERENCE.cache_aware_choice
