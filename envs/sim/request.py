"""The request record every workload produces and the simulator consumes.

A request carries its prompt as a tuple of *chained block ids*: the id at
position i identifies blocks 0..i together, so two requests share a prefix of
k blocks exactly when their first k ids are equal, and a single id names a whole
prefix. Trace formats differ (Mooncake ids are already chained, Qwen-Bailian and
ART ids hash one block each); :class:`BlockChainer` turns any of them into this
canonical form, and folds a namespace (tenant, model version, KV layout) into
the root so that identical prompts from different namespaces never share KV.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from envs.sim.checks import check_int, is_number
from envs.sim.errors import ConfigError, echoed


def has_prefix(blocks: Sequence[int], depth: int, key: int) -> bool:
    """Do the chained ids ``blocks`` start with the ``depth``-block prefix whose
    last id is ``key``? (A chained id names its block and all before it.)"""
    return len(blocks) >= depth and blocks[depth - 1] == key


def shared_blocks(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading blocks the chained ids ``a`` and ``b`` share (equal ids at
    a position mean equal ids before it, so a binary search finds the last)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[mid - 1] == b[mid - 1]:
            low = mid
        else:
            high = mid - 1
    return low


def merged_blocks(blocks: tuple[int, ...], k: int) -> tuple[int, ...]:
    """The chained ids of ``blocks`` with each ``k`` consecutive blocks made one: the
    id of each group's last block (it names the group and everything before it),
    and a partial last group's own last id."""
    if k == 1:
        return blocks
    merged = blocks[k - 1 :: k]
    return merged + blocks[-1:] if len(blocks) % k else merged


def merged_workload(workload: Workload, k: int) -> Workload:
    """``workload`` in blocks ``k`` times as long (:func:`merged_blocks`; its
    requests' ids were cut to their prompts when it was made, so no merged block
    names KV past a prompt): the same requests, block size and name otherwise."""
    if k == 1:
        return workload
    requests = [replace(r, blocks=merged_blocks(r.blocks, k)) for r in workload.requests]
    return Workload(workload.name, workload.block_tokens * k, requests, dict(workload.meta))


@dataclass(slots=True)
class Request:
    """One inference request as the simulator sees it.

    Attributes:
        index: position in its workload, 0..n-1 in arrival order (set by Workload).
        request_id: the trace's own id, kept for reports.
        arrival_s: arrival time in seconds from the start of the window.
        input_tokens: prompt length in tokens (>= 1).
        output_tokens: tokens to generate, the first one by the prefill (>= 1).
        blocks: chained prompt block ids (see the module docstring).
        tenant: namespace the prefix ids were chained under ("" for none).
        group_id: the job a request belongs to (a burst, a session), "" if none.
        job_kind: "burst", "decoy", "background", ... ("" if unknown).
        source: where the trace says the request comes from (Bursted-ART
            ``source``: "art" or "synthetic"), "" if it does not say.
        chat_id: the trace's conversation-turn id (Qwen-Bailian ``chat_id``), "" if none.
        parent_chat_id: the turn this one follows ("" for a first turn or none).
    """

    index: int
    request_id: str
    arrival_s: float
    input_tokens: int
    output_tokens: int
    blocks: tuple[int, ...]
    tenant: str = ""
    group_id: str = ""
    job_kind: str = ""
    source: str = ""
    chat_id: str = ""
    parent_chat_id: str = ""


_INF = float("inf")
_NO_RUN: Any = object()
"""``BlockChainer._next`` of an id that no block continues (equal to no hash)."""


class BlockChainer:
    """Maps raw per-trace block hashes to canonical chained integer ids.

    ``chain(raw)`` returns ids such that equal leading raw hashes (under the same
    namespace) give equal leading ids and any difference makes every later id
    differ. One chainer must serve every request of a Workload: ids from two
    chainers collide (each counts from 1), so requests chained apart would share
    KV they do not share.

    Ids are 1, 2, 3, ... in order of first appearance of each (parent, raw hash)
    pair, where a prefix's first block has its namespace as parent. They are
    stored as runs: the blocks a prompt adds past what is known get consecutive
    ids, so id ``i + 1`` usually continues id ``i``, and ``_next[i]`` is then the
    raw hash of block ``i + 1`` (a list slot, not a dict entry a block). Children
    that start elsewhere (a prefix shared by prompts that go on differently) live
    in ``_branches``. Walking a known prefix is one comparison a block, and a new
    tail is one list extension; the ids are those of chaining block by block
    through one ``{(parent, raw): id}`` dict.

    This class is the readable reference; ``envs/sim/_native/chainer.pyx`` is its
    compiled twin, step for step (``envs.sim.native`` chooses which one the trace
    readers use; tests/sim/test_native_chainer.py holds them equal). Change both.
    """

    __slots__ = ("_branches", "_ids", "_next", "_roots")

    def __init__(self) -> None:
        self._roots: dict[str, dict[Hashable, int]] = {}
        self._next: list[Any] = [_NO_RUN]
        self._branches: dict[int, dict[Hashable, int]] = {}
        self._ids: list[int] = [0]
        """``_ids[i]`` is the int ``i``, one object that every request's ids share
        (an int made afresh for each request would cost 28 bytes a block)."""

    def __len__(self) -> int:
        return len(self._next) - 1

    def chain(self, raw_hashes: Iterable[Hashable], namespace: str = "") -> tuple[int, ...]:
        raws = raw_hashes if isinstance(raw_hashes, (list, tuple)) else list(raw_hashes)
        n = len(raws)
        if not n:
            return ()
        following = self._next
        ids = self._ids
        roots = self._roots.get(namespace)
        if roots is None:
            roots = self._roots[namespace] = {}
        block = roots.get(raws[0])
        if block is None:  # a new first block: the whole prompt is one new run
            start = len(following)
            roots[raws[0]] = start
            following.extend(raws[1:])
            following.append(_NO_RUN)
            ids.extend(range(start, start + n))
            return tuple(ids[start:])
        out: list[int] = []
        branches = self._branches
        stretch = block  # the first id of the stretch of consecutive ids walked
        known = 1
        while known < n:  # walk the known prefix
            raw = raws[known]
            if following[block] == raw:
                block += 1
            else:
                children = branches.get(block)
                child = children.get(raw) if children is not None else None
                if child is None:
                    break
                out += ids[stretch : block + 1]
                block = stretch = child
            known += 1
        out += ids[stretch : block + 1]
        if known == n:
            return tuple(out)
        start = len(following)  # the rest is new: ids start, start + 1, ...
        if block == start - 1 and following[block] is _NO_RUN:
            following[block] = raws[known]
        else:
            branches.setdefault(block, {})[raws[known]] = start
        following.extend(raws[known + 1 :])
        following.append(_NO_RUN)
        ids.extend(range(start, start + n - known))
        out += ids[start:]
        return tuple(out)


@dataclass
class Workload:
    """A window (or a whole trace) of requests in arrival order.

    Attributes:
        name: a label for reports.
        block_tokens: tokens per KV block of this trace's hashes.
        requests: the requests, sorted by arrival (a new list). A request whose
            ``index`` is not its position is replaced by a renumbered copy, so the
            caller's objects (e.g. a whole trace cut into windows) never change;
            so is one whose blocks are a list or numpy array of ids, its blocks
            made a tuple of ints (:func:`validate_requests`), and one with more
            blocks than its prompt fills, its blocks cut to
            ``ceil(input_tokens / block_tokens)`` (:func:`fit_blocks`).
        meta: free-form provenance (generator arguments, window id, split, ...).
    """

    name: str
    block_tokens: int
    requests: list[Request]
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_int(f"workload {self.name!r}: block_tokens", self.block_tokens, 1)
        # a Python int, as the compiled core takes it (a numpy int32 would wrap in the
        # reference core's products)
        self.block_tokens = int(self.block_tokens)
        source = f"workload {self.name!r}"
        try:
            ordered = sorted(self.requests, key=lambda r: r.arrival_s)
        except (TypeError, AttributeError):
            # arrivals that do not compare ("0.2" and 0.5), or an item that is no
            # Request (a dict): name it
            for k, r in enumerate(self.requests):
                if not isinstance(r, Request):
                    raise TypeError(
                        f"{source}: requests[{k}] must be a Request, got {type(r).__name__}"
                    ) from None
            validate_requests(self.requests, source=source)
            raise
        self.requests = [r if r.index == i else replace(r, index=i) for i, r in enumerate(ordered)]
        self.requests = validate_requests(self.requests, source=source)
        self.requests = fit_blocks(self.requests, self.block_tokens)
        if len({r.tenant for r in self.requests}) > 1:
            check_tenants_apart(self.requests, source=f"workload {self.name!r}")

    def __len__(self) -> int:
        return len(self.requests)


def fit_blocks(requests: list[Request], block_tokens: int) -> list[Request]:
    """``requests`` with each one's blocks cut to the ``ceil(input_tokens /
    block_tokens)`` its prompt fills: a prefill computes KV for its own tokens
    only, so ids beyond them (a hand-built list too long, a trace hashed at a
    smaller block size and read with ``strict_block_count=False``) would give
    later requests hits on KV no one computed. Fewer ids than that are kept as
    they are (the prompt's tail is then shared with no one)."""
    over = [len(r.blocks) * block_tokens - r.input_tokens >= block_tokens for r in requests]
    if not any(over):
        return requests  # the common case: no copy of the list
    return [
        replace(r, blocks=r.blocks[: -(-r.input_tokens // block_tokens)]) if cut else r
        for r, cut in zip(requests, over, strict=True)
    ]


def check_tenants_apart(requests: Sequence[Request], source: str) -> None:
    """Raise ValueError if requests of two tenants share a prompt's first block id.
    The simulator keys cached KV by block ids alone, so two tenants' prompts keep
    apart only if their ids differ (the trace readers and generators chain every
    id under its tenant: :class:`BlockChainer`); ids are chained, so a shared id
    anywhere means a shared first one."""
    owner: dict[int, Request] = {}
    for r in requests:
        first = owner.setdefault(r.blocks[0], r)
        if first.tenant != r.tenant:
            raise ValueError(
                f"{source}: requests {first.request_id!r} (tenant {first.tenant!r}) and "
                f"{r.request_id!r} (tenant {r.tenant!r}) share block id {r.blocks[0]}; "
                "cached KV is keyed by block ids, so each tenant's prompts need ids of "
                "their own (envs.sim.request.BlockChainer chains them under the tenant)"
            )


def validate_requests(requests: Sequence[Request], source: str) -> list[Request]:
    """Raise ValueError naming the request and field for impossible values; return
    ``requests`` with each one's arrival a Python float, its token counts Python
    ints and its blocks a tuple of Python ints, as both simulator cores take them:
    a request with numpy numbers (a numpy ``float32`` arrival, ``int32`` token
    counts: the reference core would compute in them, in float32 or wrapping
    int32, where the compiled one computes in doubles and 64-bit ints) or blocks
    of another sequence of ids (a list, a numpy array, a tuple of numpy ints) is
    replaced by a copy with them so (:func:`block_ids`)."""
    checked = None
    for i, r in enumerate(requests):
        inputs, outputs, blocks = r.input_tokens, r.output_tokens, r.blocks
        if (
            type(r.arrival_s) is float
            and 0.0 <= r.arrival_s < _INF
            and type(inputs) is int
            and inputs >= 1
            and type(outputs) is int
            and outputs >= 1
            and type(blocks) is tuple
            and blocks
        ):
            # the common case, in two passes in C and without building the error's
            # label: the sum of ints is an int (of a float or a numpy int, not; a
            # bool passes, the int 0 or 1 to both cores), and the least is >= 0
            # (sum and min: 0.2 s for 200,000 prompts of 33 blocks; an unsigned
            # array in place of min took 0.37 s, 10 % of reading such a trace)
            try:
                if type(sum(blocks)) is int and min(blocks) >= 0:
                    continue
            except TypeError:
                pass
        where = f"{source}, request {r.request_id!r}"
        arrival = r.arrival_s
        if not (is_number(arrival) and 0.0 <= arrival < _INF):
            raise ValueError(f"{where}: arrival_s must be finite and >= 0, got {echoed(arrival)}")
        check_int(f"{where}: input_tokens", inputs, 1)
        check_int(f"{where}: output_tokens", outputs, 1)
        ids = block_ids(blocks, where)
        numpy_or_int = not (type(arrival) is float and type(inputs) is type(outputs) is int)
        if ids is not blocks or numpy_or_int:  # (a Python int arrival becomes a float too)
            checked = checked or list(requests)
            checked[i] = replace(
                r,
                arrival_s=float(arrival),
                input_tokens=int(inputs),
                output_tokens=int(outputs),
                blocks=ids,
            )
    if checked is None:  # the common case: no copy of the list
        return requests if isinstance(requests, list) else list(requests)
    return checked


def block_ids(blocks: Any, where: str) -> tuple[int, ...]:
    """``blocks``, a request's chained block ids, as a tuple of Python ints (``blocks``
    itself if it is one): a list, tuple, range or 1-d numpy array of ints >= 0 (numpy
    ints too; not floats, even whole ones, nor bools, except in a tuple, which
    :func:`validate_requests` checks in C and where a bool passes as 0 or 1);
    anything else a ConfigError of one line, ``where`` (``workload 'w', request
    'r0'``) naming the request."""
    kind = type(blocks).__name__
    is_array = isinstance(blocks, np.ndarray)
    accepted = (list, tuple, range)
    if not (is_array or isinstance(blocks, accepted)) or (is_array and blocks.ndim != 1):
        shape = f"{blocks.ndim}-d " if is_array else ""
        raise ConfigError(
            f"{where}: blocks must be a tuple of ints >= 0 (block ids), got {shape}{kind}"
        )
    if not len(blocks):
        raise ConfigError(f"{where}: blocks is empty; every prompt has at least one block")
    for b in blocks:
        if not is_number(b, integer=True):
            raise ConfigError(
                f"{where}: blocks must be ints >= 0 (block ids), got {kind} of "
                f"{type(b).__name__} ({echoed(b)})"
            )
    if min(blocks) < 0:
        raise ConfigError(
            f"{where}: blocks holds the negative id {min(blocks)}; block ids are >= 0 "
            "(the simulator names its generated tokens' KV blocks with negative ids)"
        )
    if type(blocks) is tuple and all(type(b) is int for b in blocks):
        return blocks
    return tuple(int(b) for b in blocks)
