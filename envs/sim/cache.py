"""A node's prefix KV cache: a radix tree of block runs over three tiers.

Requests name their prompt by *chained* block ids (``envs.sim.request``):
the id at position i identifies blocks 0..i, so a run of blocks is identified
by its last id and a tree edge can be matched by comparing one id.

Each tree segment holds a run of blocks that live in one tier: HBM, host RAM or
disk. Along any root-to-leaf path the tiers never go up (HBM, then RAM, then
disk), because eviction always takes the least recently used *leaf* of a tier
and using or inserting a path brings the whole path into HBM. This keeps hits
cheap to compute: the longest cached leading run of a request is one walk down
the tree, and its split by tier falls out of the walk. That one walk
(``PrefixCache._walk``) serves every query and update; updates then climb back
from the deepest segment it reached, along the parent links.

Capacity is in blocks. HBM capacity is set by the node for each call to
:meth:`PrefixCache.evict_to` (it shrinks while running requests reserve KV);
host RAM is unbounded unless ``ram_capacity_blocks`` is given; the disk tier,
when enabled, is unbounded. Blocks evicted from HBM go to RAM; blocks evicted
from a full RAM go to disk or are dropped.

LRU is by segment: a hit refreshes every segment it reaches into, wholly. With
``touch_used_only`` (``SimConfig.lru_unit="block"``) a hit splits a segment it
uses only partly, so the unused rest keeps its older time, as if every block
had its own. Eviction takes exactly the blocks it needs either way (a leaf's
tail first), so what stays cached is always a prefix. The cache in the
model as a whole: docs/physics.md, "The prefix cache".

Segments written by a warm copy carry the copy's id, so the simulator can tell
whether a copy was used before it was evicted, and every segment carries its
*origin* (``ORIGIN_REQUEST``, ``ORIGIN_WARM``, ``ORIGIN_SPECULATIVE``): who wrote
it. With ``replicas_first`` the LRU eviction takes replica leaves (any origin
but a request's) before ordinary ones.

A prefix may be *pinned* (:meth:`PrefixCache.pin`): its segments stay in HBM,
whatever LRU or capacity pressure says, until unpinned. Pins are counted per
segment, so pinned blocks always form a prefix-closed set (a pinned segment's
parent is pinned) and eviction, which takes leaves, never reaches them. Who may
pin how much, and what pins do to admission: ``envs.sim.lifecycle``.

This module is the readable reference. ``envs/sim/_native/cache.pyx`` is its
compiled twin, step for step, and ``envs.sim.native`` chooses which one the
simulator runs; tests/sim/test_native_*.py hold the two equal. Change both.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from envs.sim.errors import echoed

HBM = 0
RAM = 1
DISK = 2
GONE = 3

# who wrote a segment (Segment.origin): a request's own prefill, a warm copy
# that landed, or a speculative prefill
ORIGIN_REQUEST = 0
ORIGIN_WARM = 1
ORIGIN_SPECULATIVE = 2
ORIGINS = ("request", "warm", "speculative")


class Segment:
    """A run of blocks in one tier; an edge of the radix tree."""

    __slots__ = (
        "blocks",
        "children",
        "copy_id",
        "hbm_kids",
        "last_used",
        "origin",
        "parent",
        "pins",
        "tier",
        "upper_kids",
    )

    def __init__(self, blocks: list[int], parent: Segment | None, tier: int, now: float) -> None:
        self.blocks = blocks
        self.parent = parent
        self.children: dict[int, Segment] = {}
        self.tier = tier
        self.last_used = now
        self.hbm_kids = 0  # children in HBM
        self.upper_kids = 0  # children in HBM or RAM
        self.copy_id = -1
        self.origin = ORIGIN_REQUEST
        self.pins = 0  # pinned prefixes reaching into this segment


class PrefixCache:
    """Per-node prefix cache. See the module docstring for the model."""

    def __init__(
        self,
        ram_capacity_blocks: float = math.inf,
        disk_tier: bool = False,
        touch_used_only: bool = False,
        replicas_first: bool = False,
    ) -> None:
        if not ram_capacity_blocks >= 0:
            raise ValueError(f"ram_capacity_blocks must be >= 0, got {echoed(ram_capacity_blocks)}")
        self.root = Segment([], None, HBM, 0.0)
        if not math.isinf(ram_capacity_blocks):
            ram_capacity_blocks = math.floor(ram_capacity_blocks)  # whole blocks only
        self.ram_capacity_blocks = ram_capacity_blocks
        self.disk_tier = disk_tier
        # LRU per block: a hit splits a run it uses only partly, so the unused
        # rest keeps its older last-use time (SimConfig.lru_unit == "block")
        self.touch_used_only = touch_used_only
        self.blocks_in = [0, 0, 0]  # blocks per tier
        self._hbm_heap: list[tuple[float, int, Segment]] = []
        self._ram_heap: list[tuple[float, int, Segment]] = []
        self._seq = 0
        # SimConfig.reclaim_order == "replicas_first": replica leaves in HBM wait in
        # a heap of their own, evicted before the ordinary LRU heap is touched
        self.replicas_first = replicas_first
        self._replica_heap: list[tuple[float, int, Segment]] = []
        self.pins: dict[int, tuple[int, ...]] = {}  # pinned prefixes by their last block id
        self.pinned_blocks = 0
        self.evicted_request_blocks = 0  # HBM blocks of ORIGIN_REQUEST evicted by LRU
        self.copy_hit_blocks = 0  # blocks of warm copies requests hit in HBM
        self.used_copies_hbm: set[int] = set()
        self.used_copies_any: set[int] = set()
        self.evicted_hbm_blocks = 0
        self.version = 0  # bumped by every change that can alter a match

    # ------------------------------------------------------------------ queries
    @property
    def hbm_blocks(self) -> int:
        return self.blocks_in[HBM]

    def match(self, blocks: Sequence[int]) -> tuple[int, int, int]:
        """Leading blocks of ``blocks`` cached, split by tier: (hbm, ram, disk)."""
        seg, depth, start = self._walk(blocks, len(blocks), DISK)
        counts = [0, 0, 0]
        counts[seg.tier] += depth - start
        seg = seg.parent  # type: ignore[assignment]  # None only above the root
        while seg is not None:
            counts[seg.tier] += len(seg.blocks)
            seg = seg.parent  # type: ignore[assignment]
        return counts[0], counts[1], counts[2]

    def match_touch(self, blocks: Sequence[int], now: float) -> tuple[int, int, int]:
        """:meth:`match`, also marking the HBM part used at ``now`` (as
        ``use(blocks, hbm, now)`` would), from the same walk."""
        seg, depth, start = self._walk(blocks, len(blocks), DISK)
        counts = [0, 0, 0]
        root = self.root
        k = depth - start  # the deepest segment may be reached only partly
        while seg.tier != HBM:  # tiers never go up along a path
            counts[seg.tier] += k
            seg = seg.parent  # type: ignore[assignment]  # the root is in HBM
            k = len(seg.blocks)
        last_hbm = seg
        if self.touch_used_only and k < len(seg.blocks):
            self._split(seg, k)  # the tail keeps its last use
        counts[HBM] += k - len(seg.blocks)  # the loop adds whole segments
        if seg.origin == ORIGIN_WARM:
            self.copy_hit_blocks += k - len(seg.blocks)
        while seg is not root:
            counts[HBM] += len(seg.blocks)
            seg.last_used = now
            if seg.copy_id >= 0:
                self.used_copies_any.add(seg.copy_id)
                self.used_copies_hbm.add(seg.copy_id)
                if seg.origin == ORIGIN_WARM:  # (speculative chunks carry ids too)
                    self.copy_hit_blocks += len(seg.blocks)
            seg = seg.parent  # type: ignore[assignment]
        if last_hbm is not root and last_hbm.hbm_kids == 0:
            self._push(self._hbm_heap, last_hbm)
        return counts[0], counts[1], counts[2]

    def hbm_match(self, blocks: Sequence[int]) -> int:
        """Leading blocks of ``blocks`` cached in HBM."""
        return self._walk(blocks, len(blocks), HBM)[1]

    # ------------------------------------------------------------------ updates
    def use(self, blocks: Sequence[int], n: int, now: float) -> None:
        """Bring the first ``n`` blocks (all cached) into HBM and mark them used."""
        self.version += 1
        last, depth, start = self._walk(blocks, n, DISK)
        if depth != n:
            raise ValueError(f"use: only {depth} of the first {n} blocks are cached")
        if depth - start < len(last.blocks) and (last.tier != HBM or self.touch_used_only):
            self._split(last, depth - start)
        self._bring_up(last, now, True)
        if last is not self.root and last.hbm_kids == 0:
            self._push(self._hbm_heap, last)

    def insert(
        self,
        blocks: Sequence[int],
        now: float,
        copy_id: int = -1,
        tail: Sequence[int] = (),
        origin: int = ORIGIN_REQUEST,
    ) -> int:
        """Make all of ``blocks`` (followed by the ids in ``tail``, blocks unique to
        this context) resident in HBM; the path is brought up and touched.
        The new blocks carry ``origin`` (a warm copy's: ``ORIGIN_WARM``);
        blocks already cached keep theirs. Returns how many blocks were new."""
        self.version += 1
        n = len(blocks)
        node, depth, start = self._walk(blocks, n, DISK)
        if depth - start < len(node.blocks):
            self._split(node, depth - start)
        self._bring_up(node, now, False)
        added = 0
        if depth < n or tail:
            fresh = list(blocks[depth:]) + list(tail) if depth < n else list(tail)
            child = Segment(fresh, node, HBM, now)
            child.copy_id = copy_id
            child.origin = origin
            node.children[fresh[0]] = child
            node.hbm_kids += 1
            node.upper_kids += 1
            added = len(fresh)
            self.blocks_in[HBM] += added
            node = child
        if node is not self.root and node.hbm_kids == 0:
            self._push(self._hbm_heap, node)
        return added

    def evict_to(self, capacity_blocks: int) -> int:
        """Evict least recently used HBM leaves until HBM holds at most
        ``capacity_blocks`` (replica leaves first under ``replicas_first``;
        pinned segments never); returns the number of blocks evicted."""
        excess = self.blocks_in[HBM] - capacity_blocks
        if excess <= 0:
            return 0
        self.version += 1
        evicted = 0
        replicas = self._replica_heap
        while evicted < excess:
            if replicas:  # only ever filled under replicas_first
                evicted += self._evict_lru(replicas, excess - evicted, False)
                if evicted >= excess:
                    break
            # an ordinary leaf's eviction may leave a replica parent a leaf: back to it
            moved = self._evict_lru(self._hbm_heap, excess - evicted, self.replicas_first)
            if not moved and not replicas:
                break
            evicted += moved
        self.evicted_hbm_blocks += evicted
        self._shrink_ram()
        heap = self._hbm_heap
        if len(heap) > 4 * 1024 and len(heap) > 8 * (self.blocks_in[HBM] + 1):
            self._compact()
        return evicted

    def _evict_lru(
        self, heap: list[tuple[float, int, Segment]], excess: int, yield_to_replicas: bool
    ) -> int:
        """Move up to ``excess`` blocks of the least recently used leaves in ``heap``
        to RAM, a leaf's tail first (with ``yield_to_replicas``, stop once a replica
        leaf waits); returns the blocks moved."""
        evicted = 0
        while excess > 0 and heap:
            last_used, _, seg = heapq.heappop(heap)
            if (
                seg.tier != HBM
                or seg.hbm_kids
                or seg.last_used != last_used
                or seg.parent is None
                or seg.pins
            ):
                continue  # stale, not a leaf, or pinned (unpin pushes it again)
            length = len(seg.blocks)
            if length > excess:
                keep = length - excess
                children = seg.children
                only = next(iter(children.values())) if len(children) == 1 else None
                if (
                    only is not None
                    and only.tier == RAM
                    and only.copy_id == seg.copy_id
                    and only.origin == seg.origin
                ):
                    # Nibbling a long segment block by block: grow its RAM tail
                    # instead of creating a new segment each time.
                    del children[only.blocks[0]]
                    only.blocks = seg.blocks[keep:] + only.blocks
                    children[only.blocks[0]] = only
                    del seg.blocks[keep:]
                    self.blocks_in[HBM] -= excess
                    self.blocks_in[RAM] += excess
                else:
                    tail = self._split(seg, keep)
                    self._set_tier(tail, RAM)
                self._push(heap, seg)
                moved = excess
            else:
                self._set_tier(seg, RAM)
                moved = length
            if not seg.origin:
                self.evicted_request_blocks += moved
            evicted += moved
            excess -= moved
            if yield_to_replicas and self._replica_heap:
                break
        return evicted

    def evict_prefix(self, blocks: Sequence[int], keep_blocks: int = 0) -> int:
        """Move the HBM blocks of ``blocks``' cached path at depth >= ``keep_blocks``,
        and everything in HBM below them, to host RAM (pinned segments stay).
        Returns blocks moved."""
        found = self._subtree(blocks, keep_blocks)
        if found is None:
            return 0
        seg, first = found
        start = self._split(seg, keep_blocks - first) if first < keep_blocks else seg
        self.version += 1
        before = self.blocks_in[HBM]
        stack = [start]
        order: list[Segment] = []
        while stack:
            seg = stack.pop()
            if seg.tier == HBM:
                if not seg.pins:  # a pinned segment's descendants may still move
                    order.append(seg)
                stack.extend(seg.children.values())
        for seg in reversed(order):  # deepest first keeps tiers monotone
            self._set_tier(seg, RAM)
        moved = before - self.blocks_in[HBM]
        self.evicted_hbm_blocks += moved
        self._shrink_ram()
        return moved

    def hbm_below(self, blocks: Sequence[int], keep_blocks: int = 0) -> int:
        """The blocks :meth:`evict_prefix` would move now (read-only)."""
        found = self._subtree(blocks, keep_blocks)
        if found is None:
            return 0
        start, first = found
        count = -(keep_blocks - first) if first < keep_blocks and not start.pins else 0
        stack = [start]
        while stack:
            seg = stack.pop()
            if seg.tier == HBM:
                if not seg.pins:
                    count += len(seg.blocks)
                stack.extend(seg.children.values())
        return count

    def promote(self, blocks: Sequence[int], now: float) -> int:
        """Bring the cached part of ``blocks``' path (from RAM or disk) into HBM,
        marked used at ``now`` but not counted as a warm copy's use. Returns the
        blocks that moved up."""
        last, depth, start = self._walk(blocks, len(blocks), DISK)
        if depth == 0 or last.tier == HBM:
            return 0
        self.version += 1
        if depth - start < len(last.blocks):
            self._split(last, depth - start)
        before = self.blocks_in[HBM]
        self._bring_up(last, now, False)
        if last.hbm_kids == 0:
            self._push(self._hbm_heap, last)
        return self.blocks_in[HBM] - before

    # ------------------------------------------------------------------ pins
    def pinned_depth(self, blocks: Sequence[int]) -> int:
        """Leading blocks of ``blocks`` that are pinned (pins are prefix-closed)."""
        seg, depth, start = self._walk(blocks, len(blocks), HBM)
        while seg is not self.root and not seg.pins:
            seg = seg.parent  # type: ignore[assignment]  # the root ends the chain
            depth = start
            start -= len(seg.blocks)
        return depth if seg is not self.root else 0

    def pin(self, blocks: Sequence[int]) -> int:
        """Pin the prefix ``blocks``, which must be wholly in HBM and not pinned yet
        (the caller checks, see ``envs.sim.lifecycle``). Returns blocks newly pinned."""
        key = blocks[-1]
        last, depth, start = self._walk(blocks, len(blocks), HBM)
        if depth != len(blocks) or key in self.pins:
            raise ValueError("pin: the prefix must be wholly in HBM and not pinned yet")
        if depth - start < len(last.blocks):
            self._split(last, depth - start)
        self.pins[key] = tuple(blocks)
        added = 0
        seg = last
        while seg is not self.root:
            if not seg.pins:
                added += len(seg.blocks)
            seg.pins += 1
            seg = seg.parent  # type: ignore[assignment]  # the root ends the chain
        self.pinned_blocks += added
        return added

    def unpin(self, blocks: Sequence[int]) -> int:
        """Release the pin on ``blocks``; returns blocks no longer pinned (0 if it
        was not pinned, or every block stays pinned by another pin)."""
        if not blocks or self.pins.pop(blocks[-1], None) is None:
            return 0
        seg = self._walk(blocks, len(blocks), HBM)[0]  # pinned: wholly in HBM
        released = 0
        while seg is not self.root:
            seg.pins -= 1
            if not seg.pins:
                released += len(seg.blocks)
                if seg.hbm_kids == 0:  # evictable again: its heap entry was dropped
                    self._push(self._hbm_heap, seg)
            seg = seg.parent  # type: ignore[assignment]  # the root ends the chain
        self.pinned_blocks -= released
        return released

    # ------------------------------------------------------------------ replica lifetime
    def expire_copy(
        self, blocks: Sequence[int], copy_id: int, now: float, ttl_s: float
    ) -> tuple[int, float | None]:
        """Reclaim (to RAM, with what hangs below them) the HBM blocks of warm copy
        ``copy_id`` along ``blocks`` that no request used for ``ttl_s``. Returns
        (blocks moved, when to look again or None if none of the copy is left in
        HBM). A pinned segment ends the copy's TTL: it is not looked at again."""
        seg, _, start = self._walk(blocks, len(blocks), HBM)
        chain: list[tuple[Segment, int]] = []  # (segment, depth it starts at), deepest first
        while seg is not self.root:
            chain.append((seg, start))
            seg = seg.parent  # type: ignore[assignment]  # the root ends the chain
            start -= len(seg.blocks)
        again: float | None = None
        for seg, first in reversed(chain):  # last use never grows with depth
            if seg.copy_id != copy_id:
                continue
            if seg.pins:
                return 0, None
            due = seg.last_used + ttl_s
            if due <= now:
                return self.evict_prefix(blocks, first), again
            again = due if again is None else min(again, due)
        return 0, again

    # ------------------------------------------------------------------ internals
    def _walk(self, blocks: Sequence[int], n: int, top_tier: int) -> tuple[Segment, int, int]:
        """The one walk down the tree, shared by every query and update.

        Follows the longest cached leading run of ``blocks[:n]`` through segments
        in tiers up to ``top_tier`` (``HBM`` stops at the first slower segment,
        ``DISK`` takes every tier). Returns ``(last, depth, start)``: the deepest
        segment reached (the root if none), the run's length in blocks, and the
        depth at which ``last`` begins; ``last`` is reached partly when
        ``depth - start < len(last.blocks)``. The segments above it are its
        ``parent`` chain. Read-only: callers change the tree after the walk, on
        that chain (docs/physics.md, "The prefix cache")."""
        node = self.root
        pos = 0
        while pos < n:
            child = node.children.get(blocks[pos])
            if child is None or child.tier > top_tier:
                break
            seg = child.blocks
            end = pos + len(seg)
            if end <= n and blocks[end - 1] == seg[-1]:
                pos = end
                node = child
                continue
            return child, pos + _common(blocks, pos, seg, n), pos
        return node, pos, pos - len(node.blocks)

    def _subtree(self, blocks: Sequence[int], keep_blocks: int) -> tuple[Segment, int] | None:
        """The segment holding depth ``keep_blocks`` of ``blocks``' HBM path and the
        depth it starts at, or None if the path is no deeper than ``keep_blocks``."""
        seg, depth, first = self._walk(blocks, len(blocks), HBM)
        if depth <= keep_blocks:
            return None
        while first > keep_blocks:  # climb to the segment holding depth keep_blocks
            seg = seg.parent  # type: ignore[assignment]  # first > 0: not the root
            first -= len(seg.blocks)
        return seg, first

    def _bring_up(self, seg: Segment, now: float, count_copies: bool) -> None:
        """Move ``seg`` and every segment above it into HBM, used at ``now``;
        with ``count_copies`` record the warm copies this use reaches."""
        root = self.root
        while seg is not root:
            if count_copies and seg.copy_id >= 0:
                self.used_copies_any.add(seg.copy_id)
                if seg.tier == HBM:
                    self.used_copies_hbm.add(seg.copy_id)
            if seg.tier != HBM:
                self._set_tier(seg, HBM)
            seg.last_used = now
            seg = seg.parent  # type: ignore[assignment]  # the root ends the chain

    def _push(self, heap: list[tuple[float, int, Segment]], seg: Segment) -> None:
        self._seq += 1
        if seg.origin and self.replicas_first and heap is self._hbm_heap:
            heap = self._replica_heap
        heapq.heappush(heap, (seg.last_used, self._seq, seg))

    def _split(self, seg: Segment, k: int) -> Segment:
        """Keep the first ``k`` blocks in ``seg``; the rest become its only child."""
        tail = Segment(seg.blocks[k:], seg, seg.tier, seg.last_used)
        tail.copy_id = seg.copy_id
        tail.origin = seg.origin
        tail.pins = seg.pins  # a pin covers its segments whole
        tail.children = seg.children
        tail.hbm_kids = seg.hbm_kids
        tail.upper_kids = seg.upper_kids
        for grandchild in tail.children.values():
            grandchild.parent = tail
        del seg.blocks[k:]
        seg.children = {tail.blocks[0]: tail}
        seg.hbm_kids = 1 if tail.tier == HBM else 0
        seg.upper_kids = 1 if tail.tier <= RAM else 0
        if tail.tier == HBM and tail.hbm_kids == 0:
            self._push(self._hbm_heap, tail)
        elif tail.tier == RAM and tail.upper_kids == 0:
            self._push(self._ram_heap, tail)
        return tail

    def _set_tier(self, seg: Segment, tier: int) -> None:
        old = seg.tier
        length = len(seg.blocks)
        blocks_in = self.blocks_in
        if old < GONE:
            blocks_in[old] -= length
        if tier < GONE:
            blocks_in[tier] += length
        seg.tier = tier
        parent = seg.parent
        if parent is None:
            return
        if (old == HBM) != (tier == HBM):
            parent.hbm_kids += 1 if tier == HBM else -1
            if (
                old == HBM
                and parent.hbm_kids == 0
                and parent.tier == HBM
                and parent.parent is not None
            ):
                self._push(self._hbm_heap, parent)
        if (old <= RAM) != (tier <= RAM):
            parent.upper_kids += 1 if tier <= RAM else -1
            if tier > RAM and parent.upper_kids == 0 and parent.tier == RAM:
                self._push(self._ram_heap, parent)
        if tier == RAM and seg.upper_kids == 0:
            self._push(self._ram_heap, seg)
        if tier == GONE:
            del parent.children[seg.blocks[0]]

    def _shrink_ram(self) -> None:
        excess = self.blocks_in[RAM] - self.ram_capacity_blocks
        heap = self._ram_heap
        while excess > 0 and heap:
            last_used, _, seg = heapq.heappop(heap)
            if seg.tier != RAM or seg.upper_kids or seg.last_used != last_used:
                continue
            length = len(seg.blocks)
            if length > excess:
                seg_tail = self._split(seg, length - math.ceil(excess))
                self._push(heap, seg)
                seg = seg_tail
                length = len(seg.blocks)
            if self.disk_tier:
                self._set_tier(seg, DISK)
            else:
                self._set_tier(seg, GONE)
            excess -= length

    def _compact(self) -> None:
        live = [
            entry
            for entry in self._hbm_heap
            if entry[2].tier == HBM and not entry[2].hbm_kids and entry[2].last_used == entry[0]
        ]
        heapq.heapify(live)
        self._hbm_heap = live

    # ------------------------------------------------------------------ checks
    def check_invariants(self) -> None:
        """Recount everything from the tree and compare (for tests)."""
        counts = [0, 0, 0]
        stack = [self.root]
        while stack:
            seg = stack.pop()
            hbm_kids = upper_kids = 0
            for first, child in seg.children.items():
                if child.parent is not seg or child.blocks[0] != first:
                    raise AssertionError("tree links are inconsistent")
                if child.tier < seg.tier:
                    raise AssertionError("a child sits in a faster tier than its parent")
                hbm_kids += child.tier == HBM
                upper_kids += child.tier <= RAM
                counts[child.tier] += len(child.blocks)
                stack.append(child)
            if (hbm_kids, upper_kids) != (seg.hbm_kids, seg.upper_kids):
                raise AssertionError("child tier counters are inconsistent")
        if counts != self.blocks_in:
            raise AssertionError(f"tier block counts {self.blocks_in} != recount {counts}")
        self._check_pins()

    def _check_pins(self) -> None:
        """Every pinned prefix wholly in HBM; each segment's pin count is the number
        of pinned prefixes reaching into it; ``pinned_blocks`` is their union."""
        reach: dict[int, int] = {}
        for key, blocks in self.pins.items():
            seg, depth, start = self._walk(blocks, len(blocks), HBM)
            if blocks[-1] != key or depth != len(blocks) or depth - start != len(seg.blocks):
                raise AssertionError(f"pinned prefix {key} is not a whole HBM path")
            while seg is not self.root:
                reach[id(seg)] = reach.get(id(seg), 0) + 1
                seg = seg.parent  # type: ignore[assignment]
        pinned = 0
        stack = [self.root]
        while stack:
            seg = stack.pop()
            for child in seg.children.values():
                if child.pins != reach.get(id(child), 0):
                    raise AssertionError("a segment's pin count is wrong")
                if child.pins:
                    pinned += len(child.blocks)
                stack.append(child)
        if pinned != self.pinned_blocks:
            raise AssertionError(f"pinned blocks {self.pinned_blocks} != recount {pinned}")


def _common(blocks: Sequence[int], pos: int, seg: list[int], n: int) -> int:
    """How many leading ids of ``seg`` equal ``blocks[pos:n]`` (chained ids)."""
    length = len(seg)
    avail = n - pos
    if avail >= length and blocks[pos + length - 1] == seg[-1]:
        return length
    lo, hi = 1, min(length, avail)  # seg[0] matches by construction (dict key)
    if blocks[pos + hi - 1] == seg[hi - 1]:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if blocks[pos + mid - 1] == seg[mid - 1]:
            lo = mid
        else:
            hi = mid
    return lo
