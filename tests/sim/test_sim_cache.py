"""The tiered radix prefix cache: hand cases and property-based tests against a
brute-force model of which chained block ids are cached in which tier."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.sim.cache import DISK, HBM, RAM, PrefixCache
from envs.sim.request import BlockChainer


def _chain(*paths: str) -> list[tuple[int, ...]]:
    """Chained ids for paths written one character a block ("abcd")."""
    chainer = BlockChainer()
    return [chainer.chain(list(p)) for p in paths]


def cached_tiers(cache: PrefixCache) -> dict[int, int]:
    """Brute force: every cached block id and its tier, read off the tree."""
    out: dict[int, int] = {}
    stack = [cache.root]
    while stack:
        seg = stack.pop()
        for child in seg.children.values():
            for block in child.blocks:
                assert block not in out, "a block id is cached twice"
                out[block] = child.tier
            stack.append(child)
    return out


def brute_match(tiers: dict[int, int], blocks: tuple[int, ...]) -> tuple[int, int, int]:
    counts = [0, 0, 0]
    for block in blocks:
        if block not in tiers:
            break
        counts[tiers[block]] += 1
    return counts[0], counts[1], counts[2]


# ---------------------------------------------------------------- hand cases
def test_insert_and_match_split_on_shared_prefix() -> None:
    a, b = _chain("PPPP", "PPQQ")
    assert a[:2] == b[:2] and a[2] != b[2] and a[3] != b[3]
    cache = PrefixCache()
    assert cache.insert(a, now=0.0) == 4
    assert cache.match(b) == (2, 0, 0)
    assert cache.hbm_match(b) == 2
    assert cache.insert(b, now=1.0) == 2
    assert cache.hbm_blocks == 6
    assert cache.match((*a, 99)) == (4, 0, 0)
    assert cache.match(a[:3]) == (3, 0, 0)
    assert cache.insert(a[:3], now=2.0) == 0
    cache.check_invariants()


def test_lru_eviction_moves_least_recent_leaves_to_ram() -> None:
    a, b = _chain("PPPP", "PPQQ")
    cache = PrefixCache()
    cache.insert(a, now=0.0)
    cache.insert(b, now=1.0)  # touches the shared P P, newer than a's tail
    assert cache.evict_to(4) == 2  # a's tail (used at 0) goes first
    assert cache.match(a) == (2, 2, 0)
    assert cache.match(b) == (4, 0, 0)
    assert cache.evict_to(1) == 3  # then b's tail, then the deeper shared block
    assert cache.match(a) == (1, 3, 0)
    assert cache.match(b) == (1, 3, 0)
    assert cache.blocks_in == [1, 5, 0]
    assert cache.evicted_hbm_blocks == 5
    cache.check_invariants()
    # using a brings its whole path back to HBM, b's tail stays in RAM
    cache.use(a, 4, now=2.0)
    assert cache.match(a) == (4, 0, 0)
    assert cache.match(b) == (2, 2, 0)
    cache.check_invariants()


def test_evict_prefix_keeps_the_first_blocks() -> None:
    (a,) = _chain("PPPPPP")
    cache = PrefixCache()
    cache.insert(a, now=0.0)
    assert cache.evict_prefix(a, keep_blocks=2) == 4
    assert cache.match(a) == (2, 4, 0)
    assert cache.evict_prefix(a, keep_blocks=3) == 0  # nothing of a in HBM at depth >= 3
    assert cache.evict_prefix(a) == 2
    assert cache.match(a) == (0, 6, 0)
    cache.check_invariants()


def test_evict_prefix_takes_what_hangs_below() -> None:
    a, b = _chain("PPAA", "PPBBB")
    cache = PrefixCache()
    cache.insert(a, 0.0)
    cache.insert(b, 1.0)
    # evicting the shared two-block prefix moves both branches below it
    assert cache.evict_prefix(a[:2]) == 7
    assert cache.hbm_blocks == 0 and cache.blocks_in[RAM] == 7
    cache.check_invariants()


def test_bounded_ram_drops_deepest_blocks_first() -> None:
    (a,) = _chain("PPPPP")
    cache = PrefixCache(ram_capacity_blocks=2)
    cache.insert(a, 0.0)
    assert cache.evict_to(0) == 5
    assert cache.match(a) == (0, 2, 0)  # the leading blocks survive
    assert cache.blocks_in == [0, 2, 0]
    cache.check_invariants()


def test_bounded_ram_spills_to_disk() -> None:
    (a,) = _chain("PPPPP")
    cache = PrefixCache(ram_capacity_blocks=2, disk_tier=True)
    cache.insert(a, 0.0)
    cache.evict_to(0)
    assert cache.match(a) == (0, 2, 3)
    cache.use(a, 5, now=1.0)  # loading from disk brings the path back to HBM
    assert cache.match(a) == (5, 0, 0)
    assert cache.blocks_in == [5, 0, 0]
    cache.check_invariants()


def test_copy_ids_record_use_in_hbm_and_any_tier() -> None:
    a, b = _chain("PPPP", "QQQQ")
    cache = PrefixCache()
    cache.insert(a, 0.0, copy_id=7)
    cache.insert(b, 0.0, copy_id=8)
    cache.use(a, 3, now=1.0)
    assert cache.used_copies_hbm == {7} and cache.used_copies_any == {7}
    cache.evict_to(0)
    cache.use(b, 4, now=2.0)  # b was used only after it had left HBM
    assert cache.used_copies_hbm == {7}
    assert cache.used_copies_any == {7, 8}


def test_insert_with_unique_tail_blocks() -> None:
    (a,) = _chain("PPP")
    cache = PrefixCache()
    assert cache.insert(a, 0.0, tail=(-1, -2)) == 5
    assert cache.insert(a, 1.0, tail=(-3,)) == 1
    assert cache.match((*a, -1, -2)) == (5, 0, 0)
    assert cache.match((*a, -3)) == (4, 0, 0)
    cache.check_invariants()


def test_fractional_ram_capacity_does_not_crash() -> None:
    (a,) = _chain("PPPPP")
    cache = PrefixCache(ram_capacity_blocks=2.5)
    cache.insert(a, 0.0)
    cache.evict_to(0)
    assert cache.blocks_in[RAM] <= 2.5
    cache.check_invariants()


# ---------------------------------------------------------------- properties
ALPHABET = "abc"
paths = st.text(alphabet=ALPHABET, min_size=1, max_size=8)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), paths, st.sampled_from([-1, -1, 0, 1]), st.integers(0, 2)),
        st.tuples(st.just("use"), paths, st.floats(0.0, 1.0)),
        st.tuples(st.just("capacity"), st.integers(0, 24)),
        st.tuples(st.just("evict_prefix"), paths, st.integers(0, 8)),
        st.tuples(st.just("match"), paths),
    ),
    max_size=60,
)


def _check_cache(
    cache: PrefixCache, inserted: set[int], lossless: bool, queries: list[tuple[int, ...]]
) -> dict[int, int]:
    cache.check_invariants()
    tiers = cached_tiers(cache)
    assert set(tiers) <= inserted
    if lossless:  # unbounded RAM or a disk tier: nothing is ever dropped
        assert set(tiers) == inserted
    assert cache.blocks_in[RAM] <= cache.ram_capacity_blocks
    assert sum(cache.blocks_in) == len(tiers)
    for q in queries:
        assert cache.match(q) == brute_match(tiers, q)
        assert cache.hbm_match(q) == cache.match(q)[0]
    return tiers


@settings(max_examples=250, deadline=None)
@given(
    ops=operations,
    ram_capacity=st.one_of(st.just(math.inf), st.integers(0, 6)),
    disk_tier=st.booleans(),
)
def test_random_operations_keep_the_cache_consistent(
    ops: list[tuple], ram_capacity: float, disk_tier: bool
) -> None:
    chainer = BlockChainer()
    cache = PrefixCache(ram_capacity_blocks=ram_capacity, disk_tier=disk_tier)
    lossless = disk_tier or ram_capacity == math.inf
    inserted: set[int] = set()
    capacity = 12
    fresh = 0
    now = 0.0
    for op in ops:
        now += 1.0
        kind = op[0]
        if kind == "capacity":
            capacity = op[1]
            before = cache.hbm_blocks
            assert cache.evict_to(capacity) == max(before - capacity, 0)
            assert cache.hbm_blocks <= capacity
            _check_cache(cache, inserted, lossless, [])
            continue
        blocks = chainer.chain(list(op[1]))
        if kind == "insert":
            tail = tuple(range(fresh - 1, fresh - 1 - op[3], -1))
            fresh -= op[3]
            new = sum(1 for b in blocks + tail if b not in cached_tiers(cache))
            assert cache.insert(blocks, now, copy_id=op[2], tail=tail) == new
            inserted.update(blocks + tail)
            assert cache.match(blocks + tail) == (len(blocks + tail), 0, 0)
            cache.evict_to(capacity)
            assert cache.hbm_blocks <= capacity
            if capacity >= len(blocks + tail):  # just used: the last to go
                assert cache.hbm_match(blocks + tail) == len(blocks + tail)
        elif kind == "use":
            n = int(sum(cache.match(blocks)) * op[2])
            cache.use(blocks, n, now)
            assert cache.hbm_match(blocks) >= n
            cache.evict_to(capacity)
            assert cache.hbm_blocks <= capacity
            if capacity >= n:
                assert cache.hbm_match(blocks) >= n
        elif kind == "evict_prefix":
            keep = op[2]
            before_match = cache.hbm_match(blocks)
            before_hbm = cache.hbm_blocks
            total = sum(cache.blocks_in)
            moved = cache.evict_prefix(blocks, keep_blocks=keep)
            assert cache.hbm_blocks == before_hbm - moved
            assert cache.hbm_match(blocks) == min(before_match, keep)
            if lossless:
                assert sum(cache.blocks_in) == total
        _check_cache(cache, inserted, lossless, [blocks, blocks[:1], (*blocks, 12345)])


@settings(max_examples=100, deadline=None)
@given(path_list=st.lists(paths, min_size=1, max_size=12), capacity=st.integers(0, 30))
def test_tiers_never_go_up_along_a_path(path_list: list[str], capacity: int) -> None:
    chainer = BlockChainer()
    cache = PrefixCache(ram_capacity_blocks=4, disk_tier=True)
    for i, p in enumerate(path_list):
        cache.insert(chainer.chain(list(p)), float(i))
        cache.evict_to(capacity)
    tiers = cached_tiers(cache)
    for p in path_list:
        blocks = chainer.chain(list(p))
        seen = [tiers[b] for b in blocks if b in tiers]
        assert seen == sorted(seen)
        assert all(t in (HBM, RAM, DISK) for t in seen)


def _snapshot(cache: PrefixCache) -> tuple[dict[int, tuple[int, float]], set[int], set[int]]:
    """Every cached block's (tier, last use), and the copies recorded as used."""
    out: dict[int, tuple[int, float]] = {}
    stack = [cache.root]
    while stack:
        seg = stack.pop()
        for child in seg.children.values():
            for block in child.blocks:
                out[block] = (child.tier, child.last_used)
            stack.append(child)
    return out, set(cache.used_copies_hbm), set(cache.used_copies_any)


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(
        st.one_of(
            st.tuples(st.just("insert"), paths, st.sampled_from([-1, 0, 1])),
            st.tuples(st.just("touch"), paths),
            st.tuples(st.just("capacity"), st.integers(0, 16)),
        ),
        max_size=40,
    ),
    touch_used_only=st.booleans(),
)
def test_match_touch_is_match_then_use_of_the_hbm_part(
    ops: list[tuple], touch_used_only: bool
) -> None:
    chainer = BlockChainer()
    fused, plain = (
        PrefixCache(ram_capacity_blocks=5, disk_tier=True, touch_used_only=touch_used_only)
        for _ in range(2)
    )
    for i, op in enumerate(ops):
        now = float(i + 1)
        if op[0] == "capacity":
            assert fused.evict_to(op[1]) == plain.evict_to(op[1])
        else:
            blocks = chainer.chain(list(op[1]))
            if op[0] == "insert":
                fused.insert(blocks, now, copy_id=op[2])
                plain.insert(blocks, now, copy_id=op[2])
            else:
                counts = plain.match(blocks)
                plain.use(blocks, counts[HBM], now)
                assert fused.match_touch(blocks, now) == counts
        fused.check_invariants()
        assert _snapshot(fused) == _snapshot(plain)


def test_use_refuses_blocks_that_are_not_cached() -> None:
    a, b = _chain("PPPP", "PPQQ")
    cache = PrefixCache()
    cache.insert(a, now=0.0)
    with pytest.raises(ValueError, match="only 2 of the first 3 blocks"):
        cache.use(b, 3, now=1.0)
    cache.check_invariants()
