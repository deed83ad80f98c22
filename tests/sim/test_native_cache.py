"""The compiled prefix cache (envs/sim/_native/cache.pyx) against the reference
(envs/sim/cache.py): random operation sequences applied to both, with every
return value (or error), ``check_invariants`` and the whole state equal after
every step. The state is the tree (every segment's fields, children in dict
order), the counters and the three LRU heaps' entries, so the two stay equal
where a later eviction would tell them apart, not only where this step shows.

Skipped when the compiled module is not built (no C compiler at install)."""

from __future__ import annotations

import copy
import math
import os
from typing import Any

import numpy as np
import pytest

from envs.sim.cache import ORIGIN_REQUEST, ORIGIN_SPECULATIVE, ORIGIN_WARM, PrefixCache
from envs.sim.request import BlockChainer

LONG_RUNS = max(int(os.environ.get("BTB_FUZZ_CASES", "40")) // 6, 1)
"""Slow sweep's runs; BTB_FUZZ_CASES scales them, as for test_sim_fuzz.py."""

compiled = pytest.importorskip(
    "envs.sim._native.cache", reason="the compiled core is not built (no C compiler at install?)"
)


def _segment_key(seg: Any) -> tuple[Any, ...]:
    return (tuple(seg.blocks), seg.tier, seg.last_used)


def cache_state(cache: Any) -> dict[str, Any]:
    """Everything either implementation holds, in plain values: the tree in
    depth-first, dict order; counters; the heaps' entries (in key order)."""
    tree = []
    stack = [(cache.root, 0)]
    while stack:
        seg, depth = stack.pop()
        tree.append(
            (
                depth,
                tuple(seg.blocks),
                seg.tier,
                seg.last_used,
                seg.copy_id,
                seg.origin,
                seg.pins,
                seg.hbm_kids,
                seg.upper_kids,
                tuple(seg.children),
            )
        )
        stack.extend((child, depth + 1) for child in seg.children.values())
    if isinstance(cache, PrefixCache):
        heaps = {"hbm": cache._hbm_heap, "ram": cache._ram_heap, "replica": cache._replica_heap}
    else:
        heaps = {name: cache._heap_entries(name) for name in ("hbm", "ram", "replica")}
    return {
        "tree": tree,
        "heaps": {
            name: sorted((t, seq, _segment_key(seg)) for t, seq, seg in entries)
            for name, entries in heaps.items()
        },
        "blocks_in": list(cache.blocks_in),
        "hbm_blocks": cache.hbm_blocks,
        "ram_capacity_blocks": cache.ram_capacity_blocks,
        "flags": (cache.disk_tier, cache.touch_used_only, cache.replicas_first),
        "pins": dict(cache.pins),
        "pinned_blocks": cache.pinned_blocks,
        "evicted_request_blocks": cache.evicted_request_blocks,
        "copy_hit_blocks": cache.copy_hit_blocks,
        "used_copies_hbm": set(cache.used_copies_hbm),
        "used_copies_any": set(cache.used_copies_any),
        "evicted_hbm_blocks": cache.evicted_hbm_blocks,
        "version": cache.version,
    }


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        return "ok", call()
    except (ValueError, AttributeError, AssertionError, IndexError) as error:
        return type(error).__name__, str(error)


class Twins:
    """One reference and one compiled cache, driven by the same calls."""

    def __init__(self, **settings: Any) -> None:
        self.caches = [PrefixCache(**settings), compiled.PrefixCache(**settings)]

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        reference, native = (
            _outcome(lambda c=c: getattr(c, name)(*args, **kwargs)) for c in self.caches
        )
        assert native == reference, (name, args, kwargs)
        checks = [_outcome(c.check_invariants) for c in self.caches]
        assert checks[0] == checks[1] == ("ok", None), (name, checks)
        assert cache_state(self.caches[1]) == cache_state(self.caches[0]), (name, args, kwargs)
        return reference[1]


def _random_run(seed: int, steps: int) -> Twins:
    rng = np.random.default_rng(seed)
    chainer = BlockChainer()
    twins = Twins(
        ram_capacity_blocks=[math.inf, 0, 2, 3.5, 6][int(rng.integers(5))],
        disk_tier=bool(rng.random() < 0.5),
        touch_used_only=bool(rng.random() < 0.5),
        replicas_first=bool(rng.random() < 0.5),
    )
    now = 0.0
    fresh = 0
    for _ in range(steps):
        now += [0.0, 0.5, 1.0][int(rng.integers(3))]  # equal times: ties broken by seq
        path = "".join("abc"[int(i)] for i in rng.integers(3, size=int(rng.integers(1, 9))))
        blocks = chainer.chain(list(path))
        op = int(rng.integers(14))
        if op <= 2:
            extra = int(rng.integers(3))
            tail = tuple(range(fresh - 1, fresh - 1 - extra, -1))
            fresh -= extra
            origin = (ORIGIN_REQUEST, ORIGIN_WARM, ORIGIN_SPECULATIVE)[int(rng.integers(3))]
            copy_id = int(rng.integers(-1, 4))
            twins.call("insert", blocks, now, copy_id=copy_id, tail=tail, origin=origin)
        elif op == 3:
            twins.call("evict_to", int(rng.integers(0, 25)))
        elif op == 4:
            cached = sum(twins.caches[0].match(blocks))
            n = int(rng.integers(cached + 2))  # now and then one too many: refused alike
            twins.call("use", blocks, n, now)
        elif op == 5:
            twins.call("match_touch", blocks, now)
        elif op == 6:
            twins.call("match", blocks)
            twins.call("hbm_match", (*blocks, 12345))
        elif op == 7:
            twins.call("evict_prefix", blocks, keep_blocks=int(rng.integers(0, 9)))
        elif op == 8:
            twins.call("hbm_below", blocks, int(rng.integers(0, 9)))
        elif op == 9:
            twins.call("promote", blocks, now)
        elif op == 10:
            twins.call("pinned_depth", blocks)
            depth = twins.caches[0].hbm_match(blocks)  # mostly a prefix wholly in HBM
            twins.call("pin", blocks[: depth or None])  # refused alike unless so, and new
        elif op == 11:
            pinned = sorted(twins.caches[0].pins.values())
            if pinned and rng.random() < 0.7:
                blocks = pinned[int(rng.integers(len(pinned)))]
            twins.call("unpin", blocks)
        elif op == 12:
            ttl = [0.0, 0.5, 2.0, math.inf][int(rng.integers(4))]
            twins.call("expire_copy", blocks, int(rng.integers(-1, 4)), now, ttl)
        else:  # a deep copy carries on exactly as the original (envs.sim.view copies caches)
            twins.caches = [copy.deepcopy(c) for c in twins.caches]
            twins.call("hbm_match", blocks)
    return twins


@pytest.mark.parametrize("seed", range(24))
def test_random_operations_give_the_reference_results_step_by_step(seed: int) -> None:
    _random_run(seed, steps=150)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 100 + LONG_RUNS))
def test_longer_random_operations_give_the_reference_results(seed: int) -> None:
    _random_run(seed, steps=400)


def test_compaction_of_the_lru_heap_matches_the_reference() -> None:
    """Thousands of touches leave stale entries behind an old live leaf; past 4,096
    entries (and 8 per HBM block) the reference compacts its heap after an
    eviction, and so does the compiled one: the same entries stay."""
    chainer = BlockChainer()
    twins = Twins()
    old, *touched = (chainer.chain(list(p)) for p in ("a", "bb", "cc"))
    for blocks in (old, *touched):
        twins.call("insert", blocks, 0.0)
    for i in range(5000):
        for cache in twins.caches:
            cache.match_touch(touched[i % 2], float(i + 1))
    assert len(twins.caches[0]._hbm_heap) == len(twins.caches[1]._heap_entries("hbm")) > 5000
    assert twins.call("evict_to", 4) == 1  # the old leaf goes; then the heap is compacted
    assert len(twins.caches[0]._hbm_heap) == 2  # the two touched leaves' last entries


def test_a_view_can_watch_the_compiled_cache_through_instance_attributes() -> None:
    """envs.sim.view logs a cache's changes by setting its methods on the instance;
    expire_copy calls evict_prefix through the attribute, so both calls are seen."""
    cache = compiled.PrefixCache()
    seen: list[str] = []
    for name in ("expire_copy", "evict_prefix"):
        method = getattr(cache, name)
        setattr(cache, name, lambda *a, _m=method, _n=name, **k: (seen.append(_n), _m(*a, **k))[1])
    blocks = BlockChainer().chain(list("abc"))
    cache.insert(blocks, 0.0, copy_id=7, origin=ORIGIN_WARM)
    assert cache.expire_copy(blocks, 7, 5.0, 1.0) == (3, None)
    assert seen == ["expire_copy", "evict_prefix"]
    assert cache.blocks_in == [0, 3, 0]
    twin = copy.deepcopy(cache)
    assert "expire_copy" in vars(twin) and twin.blocks_in == [0, 3, 0]


def test_a_dropped_compiled_cache_is_freed_by_one_collection() -> None:
    """The heaps hold segments from C arrays the collector cannot see, and a parent
    and its children refer to each other: the cache unlinks its segments as it
    goes, so the collection that drops it frees them too (before, they stayed
    until a later collection of an older generation). Segments are outside the
    collector now (``no_gc``): the module counts them."""
    import gc

    def live_segments() -> int:
        return int(compiled.live_segments())

    chainer = BlockChainer()
    gc.collect()
    before = live_segments()
    for copied in (False, True):  # a deep copy of a cache goes too
        cache = compiled.PrefixCache()
        for i, path in enumerate(("abc", "abd", "abce", "xy", "xyz")):
            cache.insert(chainer.chain(list(path)), float(i))
        if copied:
            cache = copy.deepcopy(cache)
        assert live_segments() > before + 4  # a tree: segments with children
        del cache
        gc.collect()
        assert live_segments() == before
