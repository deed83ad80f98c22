"""The compiled cache and chainer called directly, as a user might, against the
references: odd arguments give the same value or the same exception type, and a
pickled or copied compiled object is the same object and goes on the same way.

Skipped when the compiled modules are not built (no C compiler at install)."""

from __future__ import annotations

import copy
import math
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from envs.sim import cache as reference
from envs.sim import native
from envs.sim.request import BlockChainer
from tests.sim.test_native_cache import cache_state

compiled = pytest.importorskip(
    "envs.sim._native.cache", reason="the compiled core is not built (no C compiler at install?)"
)
compiled_chainer = pytest.importorskip("envs.sim._native.chainer")

CHAINER = BlockChainer()
A = CHAINER.chain(list("abcdef"))  # a 6-block prompt ...
B = CHAINER.chain(list("abxy"))  # ... and one sharing its first 2 blocks: 8 blocks in HBM
NEW = CHAINER.chain(list("zz"))


def _filled(module: Any, **settings: Any) -> Any:
    cache = module.PrefixCache(**settings)
    cache.insert(A, 1.0)
    cache.insert(B, 2.0)
    return cache


def _outcome(call: Callable[[Any], Any], cache: Any) -> tuple[Any, ...]:
    try:
        result: Any = ("value", call(cache))
    except Exception as error:  # the type is what must agree
        result = ("error", type(error))
    return result, list(cache.blocks_in), cache.version


CALLS: dict[str, Callable[[Any], Any]] = {
    "match an unhashable id": lambda c: c.match([[1]]),
    "hbm_match an unhashable id": lambda c: c.hbm_match([[1]]),
    "evict_to an int": lambda c: c.evict_to(3),
    "evict_to an integral float": lambda c: c.evict_to(3.0),  # the ref cannot cut by it
    "evict_to a fraction": lambda c: c.evict_to(3.5),
    "evict_to a float that needs no cut": lambda c: c.evict_to(2.0 + 2.0),
    "evict_to infinity": lambda c: c.evict_to(math.inf),
    "evict_to minus infinity": lambda c: c.evict_to(-math.inf),
    "evict_to NaN": lambda c: c.evict_to(math.nan),
    "evict_to a numpy int": lambda c: c.evict_to(np.int64(3)),
    "evict_to None": lambda c: c.evict_to(None),
    "evict_to a huge int": lambda c: c.evict_to(2**70),
    "evict_to a huge negative int": lambda c: c.evict_to(-(2**70)),
    "insert copy_id None": lambda c: c.insert(NEW, 3.0, copy_id=None),
    "insert origin None": lambda c: c.insert(NEW, 3.0, origin=None),
    "set ram_capacity_blocks": lambda c: (setattr(c, "ram_capacity_blocks", 1), c.evict_to(0)),
    "write into blocks_in": lambda c: (c.blocks_in.__setitem__(0, 99), list(c.blocks_in)),
    "pickle": lambda c: cache_state(pickle.loads(pickle.dumps(c))) == cache_state(c),
    "copy.copy": lambda c: list(copy.copy(c).blocks_in),
}


@pytest.mark.parametrize("settings", [{}, {"ram_capacity_blocks": 2, "disk_tier": True}])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_direct_call_gives_the_reference_outcome(name: str, settings: dict[str, Any]) -> None:
    call = CALLS[name]
    want = _outcome(call, _filled(reference, **settings))
    assert _outcome(call, _filled(compiled, **settings)) == want


def test_a_float_capacity_evicts_whole_leaves_then_fails_where_a_cut_is_needed() -> None:
    """8 blocks in HBM, leaves of 4 (used at 1.0) and 2 (at 2.0), the shared 2 above:
    evict_to(3.5) moves the 4-block leaf (0.5 block still to go), then cannot cut."""
    after = []
    for module in (reference, compiled):
        cache = _filled(module)
        with pytest.raises(TypeError):
            cache.evict_to(3.5)
        assert list(cache.blocks_in) == [4, 4, 0]
        # the 2-block leaf left the heap when popped, in both: nothing is evictable now
        after.append((cache.evict_to(math.inf), cache.evict_to(2), cache_state(cache)))
    assert after[0][:2] == (0, 0) and after[1] == after[0]


def test_a_restored_compiled_cache_equals_the_original_and_goes_on_the_same_way() -> None:
    original = _filled(compiled, ram_capacity_blocks=3, disk_tier=True)
    original.evict_to(5)  # some of each tier, stale heap entries
    original.pin(A[:2])
    for twin in (
        pickle.loads(pickle.dumps(original)),
        copy.copy(original),
        copy.deepcopy(original),
    ):
        assert cache_state(twin) == cache_state(original)
        runs = []
        for cache in (original, twin):
            probe = copy.deepcopy(cache)
            runs.append(
                (probe.insert(NEW, 4.0), probe.evict_to(1), probe.match(A), cache_state(probe))
            )
            probe.check_invariants()
        assert runs[0] == runs[1]


def test_a_restored_compiled_chainer_gives_the_ids_the_original_would() -> None:
    history = (list("abc"), list("abd"))
    prompts = (list("abdq"), list("abcz"), list("xy"), list("abd"))  # abdq: the last run goes on
    chainers = [compiled_chainer.BlockChainer(), BlockChainer()]
    for chainer in chainers:
        for raw in history:
            chainer.chain(raw)
    original = chainers[0]
    chainers += [pickle.loads(pickle.dumps(original)), copy.deepcopy(original)]
    states = [(c._roots, c._next, c._branches, c._ids) for c in chainers]
    assert states[2] == states[0] and states[3] == states[0]
    ids = [[chainer.chain(raw) for raw in prompts] for chainer in chainers]
    assert ids[0] == ids[1] == ids[2] == ids[3]
    # the restored end of a run is the module's sentinel still: abdq extends it in place
    assert [(c._next, c._branches) for c in chainers[1:]] == [
        (original._next, original._branches)
    ] * 3


def test_node_costs_are_read_only_once_built() -> None:
    """The compiled core copies a node's cost coefficients once, so NodeCosts may
    not change afterwards on either core (else the two cores would disagree)."""
    from envs.sim import SimConfig, Simulator, setup_cluster
    from envs.workloads.bursted import synthetic_window

    window = synthetic_window(window=0)
    for core in ("python", native.CORE):
        sim = Simulator(setup_cluster("70b_h100x4"), window, SimConfig(), core=core)
        with pytest.raises(AttributeError, match="read-only once built"):
            sim.nodes[0].costs.prefill_s_per_token *= 3


def test_a_subclass_runs_its_own_core_and_refuses_the_other() -> None:
    from envs.sim import SimConfig, Simulator, setup_cluster
    from envs.workloads.bursted import synthetic_window

    class Mine(Simulator):
        pass

    args = (setup_cluster("70b_h100x4"), synthetic_window(window=0), SimConfig())
    assert Mine(*args).core == "python" == Mine(*args, core="python").core
    with pytest.raises(ValueError, match="core must be 'compiled', 'python' or None"):
        Mine(*args, core="bogus")
    if native.CORE == "compiled":
        with pytest.raises(ValueError, match="Mine: core='compiled', but this class runs"):
            Mine(*args, core="compiled")


def test_both_cores_say_a_long_refused_value_back_cut_alike() -> None:
    """The compiled cache's capacity check and the compiled core's route()-then-answer
    check say back the first 60 characters of the value, then ``...``, as the
    references do (``envs.sim.errors.echoed``): they said all of it."""
    from envs.sim import ClusterSpec, SimConfig, Simulator
    from envs.sim.request import Request, Workload

    huge = -(10**100)  # 101 characters
    want = f"ram_capacity_blocks must be >= 0, got -{'1' + '0' * 58}..."
    for module in (reference, compiled):
        with pytest.raises(ValueError) as refused:
            module.PrefixCache(ram_capacity_blocks=huge)
        assert str(refused.value) == want, module

    class RoutesThenAnswersOtherwise:
        def decide(self, sim: Simulator, request: Request) -> Any:
            sim.route(0)
            return "x" * 200

    window = Workload("w", 256, [Request(0, "a", 0.0, 512, 2, (1, 2))])
    cluster = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 2)
    for core in ("python", native.CORE):
        with pytest.raises(ValueError) as refused:
            Simulator(cluster, window, SimConfig(), core=core).run(RoutesThenAnswersOtherwise())
        assert str(refused.value) == (
            f"request 'a' was routed to node 0 with route(); the answer '{'x' * 59}... differs"
        ), core
