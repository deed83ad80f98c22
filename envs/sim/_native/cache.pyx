# cython: language_level=3, cdivision=True, auto_pickle=False
"""A node's prefix KV cache, compiled: :mod:`envs.sim.cache` for a C compiler.

The model, every rule and every docstring that matters live in
``envs/sim/cache.py``, the readable reference. This module repeats its
algorithm step for step with typed segments (C ints and doubles), C binary heaps
for the LRU orders and direct dict lookups, so that a run gives the same
results, call for call: the same return values, the same tree, the same heap
entries (tests/sim/test_native_cache.py checks all three against the reference).
Change the two together.

What differs is only how, never what:

- a heap entry is a C struct ``(last_used, seq, segment)``; entries are unique
  by ``seq``, so any binary heap pops them in the order ``heapq`` does;
- ``blocks_in`` is three C counters, seen through a list-like view (read,
  compared, set item by item as the reference's list);
- the tier and origin constants are compile-time copies, checked at import
  against the reference's (an ImportError if they ever differ, and the
  simulator then runs the reference; see ``envs.sim.native``).
- a cache being freed unlinks its segments (children maps and parents): the
  heaps' C arrays hide their references from the cyclic collector, which would
  otherwise keep a dropped cache's tree for several collections (the
  reference's heaps are lists, which it sees).
"""

import copy
import math

cimport cython
from cpython.dict cimport PyDict_GetItemWithError, PyDict_Next
from cpython.list cimport PyList_GET_SIZE
from cpython.number cimport PyNumber_Index
from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from libc.stdlib cimport free, realloc

from envs.sim import cache as _reference


cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object obj, int* overflow) except? -1

cdef enum:
    HBM = 0
    RAM = 1
    DISK = 2
    GONE = 3
    ORIGIN_REQUEST = 0
    ORIGIN_WARM = 1

if (HBM, RAM, DISK, GONE, ORIGIN_REQUEST, ORIGIN_WARM) != (
    _reference.HBM,
    _reference.RAM,
    _reference.DISK,
    _reference.GONE,
    _reference.ORIGIN_REQUEST,
    _reference.ORIGIN_WARM,
):
    raise ImportError("envs.sim._native.cache: tier or origin constants differ from envs.sim.cache")

cdef long long _UNBOUNDED = 1LL << 62  # a RAM capacity no run can fill

# how _evict_lru treats a leaf longer than the excess left (evict_to's argument)
cdef enum:
    _WHOLE_OR_SPLIT = 0  # an int: cut the leaf
    _WHOLE_ONLY = 1  # an integral float: the reference fails to slice by it
    _WHOLE_BELOW = 2  # a fractional one, rounded up: a leaf of that length fails too

_SLICE_ERROR = "slice indices must be integers or None or have an __index__ method"

# the cache's numbers and flags besides blocks_in, as _state saves them in order
_NUMBERS = (
    "ram_capacity_blocks",
    "disk_tier",
    "touch_used_only",
    "replicas_first",
    "_seq",
    "pinned_blocks",
    "evicted_request_blocks",
    "copy_hit_blocks",
    "evicted_hbm_blocks",
    "version",
)


cdef long long _live_segments = 0


def live_segments():
    """Segments alive in this process. They are outside the cyclic collector
    (``no_gc`` below), so a cycle of them that nothing unlinks would never be
    freed: the tests check this comes back to where it was once runs are dropped."""
    return _live_segments


# Outside the cyclic collector: a run makes tens of thousands of segments that
# live as long as its cache, and each collection scanned them all again (about a
# tenth of btb/Thresholds-v0's env step). Their only references are block lists,
# other segments and the children dicts; the parent <-> children cycles are
# unlinked by PrefixCache.__dealloc__ (every segment still in the tree) and by
# eviction (a segment leaves its parent's children when it goes), so reference
# counting frees every one (docs/results/learning_speed.md).
@cython.no_gc
cdef class Segment:
    """A run of blocks in one tier; an edge of the radix tree (as in the reference)."""

    def __cinit__(self):
        global _live_segments
        _live_segments += 1

    def __dealloc__(self):
        global _live_segments
        _live_segments -= 1

    def __init__(self, list blocks, Segment parent, int tier, double now):
        self.blocks = blocks
        self.parent = parent
        self.children = {}
        self.tier = tier
        self.last_used = now
        self.copy_id = -1
        self.origin = ORIGIN_REQUEST


cdef inline Segment _segment(list blocks, Segment parent, int tier, double now, dict children):
    cdef Segment seg = Segment.__new__(Segment)
    seg.blocks = blocks
    seg.parent = parent
    seg.children = children
    seg.tier = tier
    seg.last_used = now
    seg.copy_id = -1
    seg.origin = ORIGIN_REQUEST
    return seg


cdef inline bint _same(object a, object b) except -1:
    return a is b or a == b


cdef Py_ssize_t _common(object blocks, Py_ssize_t pos, list seg, Py_ssize_t n) except -1:
    """How many leading ids of ``seg`` equal ``blocks[pos:n]`` (chained ids)."""
    cdef Py_ssize_t length = PyList_GET_SIZE(seg)
    cdef Py_ssize_t avail = n - pos
    cdef Py_ssize_t lo, hi, mid
    if avail >= length and _same(blocks[pos + length - 1], seg[length - 1]):
        return length
    lo = 1
    hi = length if length < avail else avail  # seg[0] matches by construction (dict key)
    if _same(blocks[pos + hi - 1], seg[hi - 1]):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _same(blocks[pos + mid - 1], seg[mid - 1]):
            lo = mid
        else:
            hi = mid
    return lo


# ---------------------------------------------------------------------- heaps
cdef inline bint _before(Entry* a, Entry* b) noexcept:
    return a.last_used < b.last_used or (a.last_used == b.last_used and a.seq < b.seq)


cdef class _Heap:
    """A binary min-heap of (last_used, seq, segment), as the reference keeps in a
    list with ``heapq``; stale entries stay until popped or compacted, as there."""

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.size):
            Py_XDECREF(self.items[i].seg)
        free(self.items)

    def __len__(self):
        return self.size

    cdef int _reserve(self) except -1:
        cdef Py_ssize_t capacity
        cdef Entry* grown
        if self.size < self.capacity:
            return 0
        capacity = self.capacity * 2 if self.capacity else 64
        grown = <Entry*>realloc(self.items, capacity * sizeof(Entry))
        if grown == NULL:
            raise MemoryError()
        self.items = grown
        self.capacity = capacity
        return 0

    cdef int append(self, double last_used, long long seq, Segment seg) except -1:
        """Add an entry at the end without ordering it (copying a valid heap)."""
        self._reserve()
        Py_INCREF(seg)
        self.items[self.size].last_used = last_used
        self.items[self.size].seq = seq
        self.items[self.size].seg = <PyObject*>seg
        self.size += 1
        return 0

    cdef int push(self, double last_used, long long seq, Segment seg) except -1:
        cdef Entry entry
        cdef Py_ssize_t i, parent
        self._reserve()
        Py_INCREF(seg)
        entry.last_used = last_used
        entry.seq = seq
        entry.seg = <PyObject*>seg
        i = self.size
        self.size += 1
        while i > 0:
            parent = (i - 1) >> 1
            if _before(&entry, &self.items[parent]):
                self.items[i] = self.items[parent]
                i = parent
            else:
                break
        self.items[i] = entry
        return 0

    cdef void _sift_down(self, Py_ssize_t i) noexcept:
        cdef Entry entry = self.items[i]
        cdef Py_ssize_t child
        cdef Py_ssize_t n = self.size
        while True:
            child = 2 * i + 1
            if child >= n:
                break
            if child + 1 < n and _before(&self.items[child + 1], &self.items[child]):
                child += 1
            if _before(&self.items[child], &entry):
                self.items[i] = self.items[child]
                i = child
            else:
                break
        self.items[i] = entry

    cdef Segment pop(self, double* last_used):
        """The least entry's segment (the caller checks the heap is not empty)."""
        cdef Entry top = self.items[0]
        cdef Segment seg
        self.size -= 1
        if self.size:
            self.items[0] = self.items[self.size]
            self._sift_down(0)
        last_used[0] = top.last_used
        seg = <Segment>top.seg  # a new reference; the heap's is released below
        Py_XDECREF(top.seg)
        return seg

    cdef void keep_live_leaves(self) noexcept:
        """Drop the HBM heap's entries that can never be evicted as they stand
        (the reference's ``_compact``), then restore the heap order."""
        cdef Py_ssize_t i, kept = 0
        cdef Segment seg
        for i in range(self.size):
            seg = <Segment>self.items[i].seg
            if seg.tier == HBM and not seg.hbm_kids and seg.last_used == self.items[i].last_used:
                self.items[kept] = self.items[i]
                kept += 1
            else:
                Py_XDECREF(self.items[i].seg)
        self.size = kept
        for i in range(kept // 2 - 1, -1, -1):
            self._sift_down(i)

    cdef list entries(self):
        """(last_used, seq, segment) of every entry, in the heap's array order."""
        cdef Py_ssize_t i
        return [
            (self.items[i].last_used, self.items[i].seq, <Segment>self.items[i].seg)
            for i in range(self.size)
        ]


# ---------------------------------------------------------------------- the cache
cdef long long _ram_cap_of(object blocks) except? -1:
    """RAM capacity in whole blocks for the C counters: ``_UNBOUNDED`` for
    infinity, NaN (the reference then never evicts) or anything above it."""
    if blocks != blocks or blocks >= _UNBOUNDED:
        return _UNBOUNDED
    if blocks <= -_UNBOUNDED:
        return -_UNBOUNDED
    return math.floor(blocks)


def _blank():
    """A cache to restore a state into (pickling, copies)."""
    return PrefixCache.__new__(PrefixCache)


cdef class _TierCounts:
    """A cache's blocks per tier as the reference's list shows them: read, compared
    with a list, iterated or set item by item, the cache's own counters."""

    def __cinit__(self, PrefixCache cache):
        self.cache = cache

    cpdef list as_list(self):
        return [self.cache._blocks_in[0], self.cache._blocks_in[1], self.cache._blocks_in[2]]

    def __len__(self):
        return 3

    def __getitem__(self, index):
        return self.as_list()[index]

    def __setitem__(self, index, value):
        self.cache._blocks_in[range(3)[index]] = value  # an int index, as a list's

    def __iter__(self):
        return iter(self.as_list())

    def __eq__(self, other):
        return self.as_list() == (other.as_list() if isinstance(other, _TierCounts) else other)

    def __ne__(self, other):
        return not self == other

    def __repr__(self):
        return repr(self.as_list())


@cython.no_gc_clear  # (the cycle through the counters' view is cleared from the view's side)
cdef class PrefixCache:
    """Per-node prefix cache; the model and every method: envs/sim/cache.py."""

    def __cinit__(self, *args, **kwargs):
        self._blocks_view = _TierCounts(self)
        self._hbm_heap = _Heap()
        self._ram_heap = _Heap()
        self._replica_heap = _Heap()

    def __dealloc__(self):
        # A parent and its children refer to each other, and segments are outside
        # the cyclic collector (``no_gc``, above): this unlinking is what frees a
        # dropped cache's tree. Every edge goes (both ways: no chain of parents
        # is left to free recursively), so each segment goes by reference
        # counting as soon as the heaps, whose C arrays hold references too,
        # let go, just after this.
        cdef list stack
        cdef Segment seg, child
        if self.root is None:
            return
        stack = [self.root]
        while stack:
            seg = stack.pop()
            if seg.children:
                for child in seg.children.values():
                    child.parent = None
                    stack.append(child)
                seg.children.clear()

    def __init__(
        self,
        ram_capacity_blocks=math.inf,
        disk_tier=False,
        touch_used_only=False,
        replicas_first=False,
    ):
        if not ram_capacity_blocks >= 0:
            from envs.sim.errors import echoed

            raise ValueError(
                f"ram_capacity_blocks must be >= 0, got {echoed(ram_capacity_blocks)}"
            )
        self.root = _segment([], None, HBM, 0.0, {})
        if not math.isinf(ram_capacity_blocks):
            ram_capacity_blocks = math.floor(ram_capacity_blocks)  # whole blocks only
        self.ram_capacity_blocks = ram_capacity_blocks
        self.disk_tier = disk_tier
        self.touch_used_only = touch_used_only
        self.replicas_first = replicas_first
        self.pins = {}
        self.used_copies_hbm = set()
        self.used_copies_any = set()

    # ------------------------------------------------------------------ state
    @property
    def ram_capacity_blocks(self):
        return self._ram_capacity

    @ram_capacity_blocks.setter
    def ram_capacity_blocks(self, blocks):
        """A plain attribute in the reference: set as given, used from the next
        eviction on (in whole blocks here, which that eviction comes to)."""
        self._ram_cap = _ram_cap_of(blocks)
        self._ram_capacity = blocks

    @property
    def blocks_in(self):
        """Blocks per tier (hbm, ram, disk): a list-like view of the counters."""
        return self._blocks_view

    @blocks_in.setter
    def blocks_in(self, counts):
        hbm, ram, disk = counts
        self._blocks_in[0] = hbm
        self._blocks_in[1] = ram
        self._blocks_in[2] = disk

    @property
    def hbm_blocks(self):
        return self._blocks_in[HBM]

    def _heap_entries(self, str name):
        """(last_used, seq, segment) of one heap ("hbm", "ram", "replica"), in any
        order: for the tests that hold this cache to the reference's heaps."""
        heap = {"hbm": self._hbm_heap, "ram": self._ram_heap, "replica": self._replica_heap}[name]
        return (<_Heap>heap).entries()

    def __deepcopy__(self, memo):
        """A copy of the whole state (tree, heaps, counters, instance attributes)."""
        cdef PrefixCache twin = <PrefixCache>_blank()
        memo[id(self)] = twin
        tree, heaps, numbers, objects = self._state()
        twin.__setstate__((tree, heaps, numbers, copy.deepcopy(objects, memo)))
        return twin

    def __reduce__(self):
        """Pickling and ``copy.copy``: the state as plain lists and numbers. A
        ``copy.copy`` gets a tree and heaps of its own (the reference's shares
        them with the original; it shares ``pins``, the copy-id sets and the
        instance attributes' values, as the reference's does)."""
        return _blank, (), self._state()

    cdef tuple _state(self):
        """(tree, heaps, numbers, objects): every segment the tree or a heap holds
        as a row (its fields, its parent's row, its children as (first id, row) in
        dict order; row 0 the root), each heap's (last_used, seq, row) in array
        order, the C counters and flags, and the Python containers."""
        cdef Segment seg
        rows = {}  # id(segment) -> its row
        order = []  # the segments by row
        found = [self.root]
        for heap in (self._hbm_heap, self._ram_heap, self._replica_heap):
            found.extend(entry[2] for entry in (<_Heap>heap).entries())
        at = 0
        while found:  # every segment linked to one seen, once
            for linked in found:
                if linked is not None and id(linked) not in rows:
                    rows[id(linked)] = len(order)
                    order.append(linked)
            found = []
            while at < len(order):
                seg = order[at]
                at += 1
                found.append(seg.parent)
                found.extend(seg.children.values())
        tree = [
            (
                list(seg.blocks),
                rows[id(seg.parent)] if seg.parent is not None else -1,
                [(first, rows[id(child)]) for first, child in seg.children.items()],
                seg.tier,
                seg.last_used,
                seg.hbm_kids,
                seg.upper_kids,
                seg.copy_id,
                seg.origin,
                seg.pins,
            )
            for seg in order
        ]
        heaps = [
            [(last_used, seq, rows[id(seg)]) for last_used, seq, seg in (<_Heap>heap).entries()]
            for heap in (self._hbm_heap, self._ram_heap, self._replica_heap)
        ]
        numbers = (self._blocks_view.as_list(), *[getattr(self, name) for name in _NUMBERS])
        objects = (self.pins, self.used_copies_hbm, self.used_copies_any, dict(vars(self)))
        return tree, heaps, numbers, objects

    def __setstate__(self, state):
        cdef Segment seg
        cdef _Heap heap
        tree, heaps, numbers, objects = state
        segments = [
            _segment(list(row[0]), None, row[3], row[4], None) for row in tree
        ]
        for seg, (_, parent, children, _, _, hbm_kids, upper_kids, copy_id, origin, pins) in zip(
            segments, tree
        ):
            seg.parent = segments[parent] if parent >= 0 else None
            seg.children = {first: segments[child] for first, child in children}
            seg.hbm_kids = hbm_kids
            seg.upper_kids = upper_kids
            seg.copy_id = copy_id
            seg.origin = origin
            seg.pins = pins
        self.root = segments[0]
        for heap, entries in zip((self._hbm_heap, self._ram_heap, self._replica_heap), heaps):
            for last_used, seq, row in entries:
                heap.append(last_used, seq, segments[row])
        self.blocks_in = numbers[0]
        for name, value in zip(_NUMBERS, numbers[1:]):
            setattr(self, name, value)
        self.pins, self.used_copies_hbm, self.used_copies_any, attributes = objects
        vars(self).update(attributes)

    # ------------------------------------------------------------------ queries
    def match(self, blocks):
        cdef Py_ssize_t depth, start
        cdef long long counts[3]
        cdef Segment seg = self._walk(blocks, len(blocks), DISK, &depth, &start)
        counts[0] = counts[1] = counts[2] = 0
        counts[seg.tier] += depth - start
        seg = seg.parent
        while seg is not None:
            counts[seg.tier] += PyList_GET_SIZE(seg.blocks)
            seg = seg.parent
        return counts[0], counts[1], counts[2]

    def match_touch(self, blocks, double now):
        cdef long long counts[3]
        self.c_match_touch(blocks, now, counts)
        return counts[0], counts[1], counts[2]

    cdef int c_match_touch(self, object blocks, double now, long long* counts) except -1:
        cdef Py_ssize_t depth, start, k, length
        cdef Segment seg = self._walk(blocks, len(blocks), DISK, &depth, &start)
        cdef Segment root = self.root
        cdef Segment last_hbm
        counts[0] = counts[1] = counts[2] = 0
        k = depth - start  # the deepest segment may be reached only partly
        while seg.tier != HBM:  # tiers never go up along a path
            counts[seg.tier] += k
            seg = seg.parent  # the root is in HBM
            k = PyList_GET_SIZE(seg.blocks)
        last_hbm = seg
        if self.touch_used_only and k < PyList_GET_SIZE(seg.blocks):
            self._split(seg, k)  # the tail keeps its last use
        length = PyList_GET_SIZE(seg.blocks)
        counts[HBM] += k - length  # the loop adds whole segments
        if seg.origin == ORIGIN_WARM:
            self.copy_hit_blocks += k - length
        while seg is not root:
            length = PyList_GET_SIZE(seg.blocks)
            counts[HBM] += length
            seg.last_used = now
            if seg.copy_id >= 0:
                self.used_copies_any.add(seg.copy_id)
                self.used_copies_hbm.add(seg.copy_id)
                if seg.origin == ORIGIN_WARM:  # (speculative chunks carry ids too)
                    self.copy_hit_blocks += length
            seg = seg.parent
        if last_hbm is not root and last_hbm.hbm_kids == 0:
            self._push(self._hbm_heap, last_hbm)
        return 0

    def hbm_match(self, blocks):
        cdef Py_ssize_t depth, start
        self._walk(blocks, len(blocks), HBM, &depth, &start)
        return depth

    # ------------------------------------------------------------------ updates
    def use(self, blocks, Py_ssize_t n, double now):
        cdef Py_ssize_t depth, start
        cdef Segment last
        self.version += 1
        last = self._walk(blocks, n, DISK, &depth, &start)
        if depth != n:
            raise ValueError(f"use: only {depth} of the first {n} blocks are cached")
        if depth - start < PyList_GET_SIZE(last.blocks) and (
            last.tier != HBM or self.touch_used_only
        ):
            self._split(last, depth - start)
        self._bring_up(last, now, True)
        if last is not self.root and last.hbm_kids == 0:
            self._push(self._hbm_heap, last)

    def insert(self, blocks, double now, copy_id=-1, tail=(), origin=ORIGIN_REQUEST):
        # None, which the reference stores as given, is taken as the default here
        return self._insert(
            blocks,
            now,
            -1 if copy_id is None else copy_id,
            tail,
            ORIGIN_REQUEST if origin is None else origin,
        )

    cdef Py_ssize_t c_insert(self, object blocks, double now, object tail) except -1:
        return self._insert(blocks, now, -1, tail, ORIGIN_REQUEST)

    cdef Py_ssize_t _insert(
        self, object blocks, double now, long long new_copy_id, object tail, int new_origin
    ) except -1:
        cdef Py_ssize_t depth, start, added = 0
        cdef Py_ssize_t n = len(blocks)
        cdef Segment node, child
        cdef list fresh
        self.version += 1
        node = self._walk(blocks, n, DISK, &depth, &start)
        if depth - start < PyList_GET_SIZE(node.blocks):
            self._split(node, depth - start)
        self._bring_up(node, now, False)
        if depth < n or tail:
            if depth < n:
                fresh = list(blocks[depth:])
                fresh.extend(tail)
            else:
                fresh = list(tail)
            child = _segment(fresh, node, HBM, now, {})
            child.copy_id = new_copy_id
            child.origin = new_origin
            node.children[fresh[0]] = child
            node.hbm_kids += 1
            node.upper_kids += 1
            added = PyList_GET_SIZE(fresh)
            self._blocks_in[HBM] += added
            node = child
        if node is not self.root and node.hbm_kids == 0:
            self._push(self._hbm_heap, node)
        return added

    def evict_to(self, capacity_blocks):
        cdef int overflow = 0
        cdef long long capacity
        if isinstance(capacity_blocks, int):  # the simulator's case
            capacity = PyLong_AsLongLongAndOverflow(capacity_blocks, &overflow)
            if overflow > 0 or (not overflow and capacity >= self._blocks_in[HBM]):
                return 0
            if overflow < 0 or capacity < -_UNBOUNDED:
                capacity = -_UNBOUNDED  # more than any cache holds: everything goes
            return self._evict(self._blocks_in[HBM] - capacity, _WHOLE_OR_SPLIT)
        return self._evict_to_other(capacity_blocks)

    cdef long long c_evict_to(self, long long capacity_blocks) except -1:
        """``evict_to`` of an int in the C range (the simulator's capacities)."""
        if capacity_blocks >= self._blocks_in[HBM]:
            return 0
        if capacity_blocks < -_UNBOUNDED:
            capacity_blocks = -_UNBOUNDED  # more than any cache holds: everything goes
        return self._evict(self._blocks_in[HBM] - capacity_blocks, _WHOLE_OR_SPLIT)

    cdef object _evict_to_other(self, object capacity_blocks):
        """``evict_to`` for a capacity that is not an int, with the reference's
        outcome: its arithmetic on Python numbers (a TypeError for None), an
        ``__index__`` type as that int, nothing for NaN or a capacity above HBM's
        (infinity), everything for minus infinity, and for any other number the
        whole leaves that fit the excess, then the TypeError the reference's
        slicing by a non-integer raises at the first leaf it would have to cut."""
        excess = self._blocks_in[HBM] - capacity_blocks
        if excess <= 0:
            return 0
        try:
            whole = PyNumber_Index(capacity_blocks)
        except TypeError:
            whole = None
        if whole is not None:
            return self.evict_to(whole)
        if excess != excess:  # NaN: the reference's loop never starts
            return self._evict(0, _WHOLE_OR_SPLIT)
        if excess >= _UNBOUNDED:
            return self._evict(_UNBOUNDED, _WHOLE_OR_SPLIT)
        whole = math.ceil(excess)
        return self._evict(whole, _WHOLE_ONLY if whole == excess else _WHOLE_BELOW)

    cdef long long _evict(self, long long excess, int cut) except -1:
        """The reference's ``evict_to`` past its ``excess <= 0`` return (0 stands
        for NaN's excess, which starts no eviction); ``cut`` says what a leaf
        longer than what is left to evict does (see _evict_lru)."""
        cdef long long evicted = 0, moved
        cdef _Heap replicas = self._replica_heap
        cdef _Heap heap
        self.version += 1
        while evicted < excess:
            if replicas.size:  # only ever filled under replicas_first
                evicted += self._evict_lru(replicas, excess - evicted, False, cut)
                if evicted >= excess:
                    break
            # an ordinary leaf's eviction may leave a replica parent a leaf: back to it
            moved = self._evict_lru(self._hbm_heap, excess - evicted, self.replicas_first, cut)
            if not moved and not replicas.size:
                break
            evicted += moved
        self.evicted_hbm_blocks += evicted
        self._shrink_ram()
        heap = self._hbm_heap
        if heap.size > 4 * 1024 and heap.size > 8 * (self._blocks_in[HBM] + 1):
            heap.keep_live_leaves()
        return evicted

    cdef long long _evict_lru(
        self, _Heap heap, long long excess, bint yield_to_replicas, int cut
    ) except -1:
        """The reference's ``_evict_lru``. A leaf longer than the ``excess`` left is
        cut (``_WHOLE_OR_SPLIT``) or ends the eviction with the reference's
        TypeError for a non-integer excess: ``_WHOLE_ONLY`` for an integral one,
        ``_WHOLE_BELOW`` for one of ``excess - 1`` and a fraction, where a leaf of
        exactly ``excess`` blocks is longer too."""
        cdef long long evicted = 0, moved, length, keep
        cdef double last_used
        cdef Segment seg, only, tail
        cdef dict children
        cdef Py_ssize_t pos
        cdef PyObject* key
        cdef PyObject* value
        while excess > 0 and heap.size:
            seg = heap.pop(&last_used)
            if (
                seg.tier != HBM
                or seg.hbm_kids
                or seg.last_used != last_used
                or seg.parent is None
                or seg.pins
            ):
                continue  # stale, not a leaf, or pinned (unpin pushes it again)
            length = PyList_GET_SIZE(seg.blocks)
            if length > excess or (cut == _WHOLE_BELOW and length == excess):
                if cut != _WHOLE_OR_SPLIT:
                    raise TypeError(_SLICE_ERROR)
                keep = length - excess
                children = seg.children
                only = None
                if len(children) == 1:
                    pos = 0
                    PyDict_Next(children, &pos, &key, &value)
                    only = <Segment>value
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
                    self._blocks_in[HBM] -= excess
                    self._blocks_in[RAM] += excess
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
            if yield_to_replicas and self._replica_heap.size:
                break
        return evicted

    def evict_prefix(self, blocks, Py_ssize_t keep_blocks=0):
        cdef Py_ssize_t first
        cdef long long before, moved
        cdef Segment seg, start
        found = self._subtree(blocks, keep_blocks, &first)
        if found is None:
            return 0
        seg = <Segment>found
        start = self._split(seg, keep_blocks - first) if first < keep_blocks else seg
        self.version += 1
        before = self._blocks_in[HBM]
        stack = [start]
        order = []
        while stack:
            seg = stack.pop()
            if seg.tier == HBM:
                if not seg.pins:  # a pinned segment's descendants may still move
                    order.append(seg)
                stack.extend(seg.children.values())
        for seg in reversed(order):  # deepest first keeps tiers monotone
            self._set_tier(seg, RAM)
        moved = before - self._blocks_in[HBM]
        self.evicted_hbm_blocks += moved
        self._shrink_ram()
        return moved

    def hbm_below(self, blocks, Py_ssize_t keep_blocks=0):
        cdef Py_ssize_t first
        cdef long long count
        cdef Segment seg, start
        found = self._subtree(blocks, keep_blocks, &first)
        if found is None:
            return 0
        start = <Segment>found
        count = -(keep_blocks - first) if first < keep_blocks and not start.pins else 0
        stack = [start]
        while stack:
            seg = stack.pop()
            if seg.tier == HBM:
                if not seg.pins:
                    count += PyList_GET_SIZE(seg.blocks)
                stack.extend(seg.children.values())
        return count

    def promote(self, blocks, double now):
        cdef Py_ssize_t depth, start
        cdef long long before
        cdef Segment last = self._walk(blocks, len(blocks), DISK, &depth, &start)
        if depth == 0 or last.tier == HBM:
            return 0
        self.version += 1
        if depth - start < PyList_GET_SIZE(last.blocks):
            self._split(last, depth - start)
        before = self._blocks_in[HBM]
        self._bring_up(last, now, False)
        if last.hbm_kids == 0:
            self._push(self._hbm_heap, last)
        return self._blocks_in[HBM] - before

    # ------------------------------------------------------------------ pins
    def pinned_depth(self, blocks):
        cdef Py_ssize_t depth, start
        cdef Segment seg = self._walk(blocks, len(blocks), HBM, &depth, &start)
        while seg is not self.root and not seg.pins:
            seg = seg.parent  # the root ends the chain
            depth = start
            start -= PyList_GET_SIZE(seg.blocks)
        return depth if seg is not self.root else 0

    def pin(self, blocks):
        cdef Py_ssize_t depth, start
        cdef long long added = 0
        cdef Segment last, seg
        key = blocks[-1]
        last = self._walk(blocks, len(blocks), HBM, &depth, &start)
        if depth != len(blocks) or key in self.pins:
            raise ValueError("pin: the prefix must be wholly in HBM and not pinned yet")
        if depth - start < PyList_GET_SIZE(last.blocks):
            self._split(last, depth - start)
        self.pins[key] = tuple(blocks)
        seg = last
        while seg is not self.root:
            if not seg.pins:
                added += PyList_GET_SIZE(seg.blocks)
            seg.pins += 1
            seg = seg.parent
        self.pinned_blocks += added
        return added

    def unpin(self, blocks):
        cdef Py_ssize_t depth, start
        cdef long long released = 0
        cdef Segment seg
        if not blocks or self.pins.pop(blocks[-1], None) is None:
            return 0
        seg = self._walk(blocks, len(blocks), HBM, &depth, &start)  # pinned: wholly in HBM
        while seg is not self.root:
            seg.pins -= 1
            if not seg.pins:
                released += PyList_GET_SIZE(seg.blocks)
                if seg.hbm_kids == 0:  # evictable again: its heap entry was dropped
                    self._push(self._hbm_heap, seg)
            seg = seg.parent
        self.pinned_blocks -= released
        return released

    # ------------------------------------------------------------------ replica lifetime
    def expire_copy(self, blocks, long long copy_id, double now, double ttl_s):
        cdef Py_ssize_t depth, start
        cdef Segment seg = self._walk(blocks, len(blocks), HBM, &depth, &start)
        chain = []  # (segment, depth it starts at), deepest first
        while seg is not self.root:
            chain.append((seg, start))
            seg = seg.parent
            start -= PyList_GET_SIZE(seg.blocks)
        again = None
        for seg, first in reversed(chain):  # last use never grows with depth
            if seg.copy_id != copy_id:
                continue
            if seg.pins:
                return 0, None
            due = seg.last_used + ttl_s
            if due <= now:
                # through the attribute, as the reference does (a stale view logs it)
                return self.evict_prefix(blocks, first), again
            again = due if again is None else min(again, due)
        return 0, again

    # ------------------------------------------------------------------ internals
    cdef Segment _walk(
        self, object blocks, Py_ssize_t n, int top_tier, Py_ssize_t* depth, Py_ssize_t* start
    ):
        """The reference's ``_walk``: (last, depth, start), the last two by pointer."""
        cdef Segment node = self.root
        cdef Segment child
        cdef PyObject* found
        cdef list seg
        cdef Py_ssize_t pos = 0, end, length
        while pos < n:
            found = PyDict_GetItemWithError(node.children, blocks[pos])  # raises as .get does
            if found == NULL:
                break
            child = <Segment>found
            if child.tier > top_tier:
                break
            seg = child.blocks
            length = PyList_GET_SIZE(seg)
            end = pos + length
            if end <= n and _same(blocks[end - 1], seg[length - 1]):
                pos = end
                node = child
                continue
            depth[0] = pos + _common(blocks, pos, seg, n)
            start[0] = pos
            return child
        depth[0] = pos
        start[0] = pos - PyList_GET_SIZE(node.blocks)
        return node

    cdef object _subtree(self, object blocks, Py_ssize_t keep_blocks, Py_ssize_t* first):
        """The reference's ``_subtree``: the segment (or None), its first depth by pointer."""
        cdef Py_ssize_t depth, start
        cdef Segment seg = self._walk(blocks, len(blocks), HBM, &depth, &start)
        if depth <= keep_blocks:
            return None
        while start > keep_blocks:  # climb to the segment holding depth keep_blocks
            seg = seg.parent
            if seg is None:  # (as the reference, which fails on the root's parent)
                raise AttributeError("'NoneType' object has no attribute 'blocks'")
            start -= PyList_GET_SIZE(seg.blocks)
        first[0] = start
        return seg

    cdef int _bring_up(self, Segment seg, double now, bint count_copies) except -1:
        cdef Segment root = self.root
        while seg is not root:
            if count_copies and seg.copy_id >= 0:
                self.used_copies_any.add(seg.copy_id)
                if seg.tier == HBM:
                    self.used_copies_hbm.add(seg.copy_id)
            if seg.tier != HBM:
                self._set_tier(seg, HBM)
            seg.last_used = now
            seg = seg.parent
        return 0

    cdef int _push(self, _Heap heap, Segment seg) except -1:
        self._seq += 1
        if seg.origin and self.replicas_first and heap is self._hbm_heap:
            heap = self._replica_heap
        heap.push(seg.last_used, self._seq, seg)
        return 0

    cdef Segment _split(self, Segment seg, Py_ssize_t k):
        """Keep the first ``k`` blocks in ``seg``; the rest become its only child."""
        cdef Segment tail = _segment(seg.blocks[k:], seg, seg.tier, seg.last_used, seg.children)
        cdef Segment grandchild
        tail.copy_id = seg.copy_id
        tail.origin = seg.origin
        tail.pins = seg.pins  # a pin covers its segments whole
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

    cdef int _set_tier(self, Segment seg, int tier) except -1:
        cdef int old = seg.tier
        cdef Py_ssize_t length = PyList_GET_SIZE(seg.blocks)
        cdef Segment parent
        if old < GONE:
            self._blocks_in[old] -= length
        if tier < GONE:
            self._blocks_in[tier] += length
        seg.tier = tier
        parent = seg.parent
        if parent is None:
            return 0
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
        return 0

    cdef int _shrink_ram(self) except -1:
        cdef long long excess = self._blocks_in[RAM] - self._ram_cap
        cdef long long length
        cdef double last_used
        cdef _Heap heap = self._ram_heap
        cdef Segment seg
        while excess > 0 and heap.size:
            seg = heap.pop(&last_used)
            if seg.tier != RAM or seg.upper_kids or seg.last_used != last_used:
                continue
            length = PyList_GET_SIZE(seg.blocks)
            if length > excess:
                seg_tail = self._split(seg, length - excess)
                self._push(heap, seg)
                seg = seg_tail
                length = PyList_GET_SIZE(seg.blocks)
            if self.disk_tier:
                self._set_tier(seg, DISK)
            else:
                self._set_tier(seg, GONE)
            excess -= length
        return 0

    # ------------------------------------------------------------------ checks
    def check_invariants(self):
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

    def _check_pins(self):
        cdef Py_ssize_t depth, start
        cdef Segment seg
        reach = {}
        for key, blocks in self.pins.items():
            seg = self._walk(blocks, len(blocks), HBM, &depth, &start)
            if (
                blocks[-1] != key
                or depth != len(blocks)
                or depth - start != PyList_GET_SIZE(seg.blocks)
            ):
                raise AssertionError(f"pinned prefix {key} is not a whole HBM path")
            while seg is not self.root:
                reach[id(seg)] = reach.get(id(seg), 0) + 1
                seg = seg.parent
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
