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

from envs.sim.checks import check_int


def has_prefix(blocks: Sequence[int], depth: int, key: int) -> bool:
    """Do the chained ids ``blocks`` start with the ``depth``-block prefix whose
    last id is ``key``? (A chained id names its block and all before it.)"""
    return len(blocks) >= depth and blocks[depth - 1] == key


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


class BlockChainer:
    """Maps raw per-trace block hashes to canonical chained integer ids.

    ``chain(raw)`` returns ids such that equal leading raw hashes (under the same
    namespace) give equal leading ids and any difference makes every later id
    differ. One chainer must be shared by all requests that may share KV.
    """

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids: dict[tuple[Any, Hashable], int] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def chain(self, raw_hashes: Iterable[Hashable], namespace: str = "") -> tuple[int, ...]:
        ids = self._ids
        parent: Any = ("ns", namespace)
        out: list[int] = []
        for raw in raw_hashes:
            key = (parent, raw)
            block_id = ids.get(key)
            if block_id is None:
                block_id = len(ids) + 1
                ids[key] = block_id
            out.append(block_id)
            parent = block_id
        return tuple(out)


@dataclass
class Workload:
    """A window (or a whole trace) of requests in arrival order.

    Attributes:
        name: a label for reports.
        block_tokens: tokens per KV block of this trace's hashes.
        requests: the requests, sorted by arrival (a new list). A request whose
            ``index`` is not its position is replaced by a renumbered copy, so the
            caller's objects (e.g. a whole trace cut into windows) never change.
        meta: free-form provenance (generator arguments, window id, split, ...).
    """

    name: str
    block_tokens: int
    requests: list[Request]
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_int(f"workload {self.name!r}: block_tokens", self.block_tokens, 1)
        ordered = sorted(self.requests, key=lambda r: r.arrival_s)
        self.requests = [r if r.index == i else replace(r, index=i) for i, r in enumerate(ordered)]
        validate_requests(self.requests, source=f"workload {self.name!r}")

    def __len__(self) -> int:
        return len(self.requests)


def validate_requests(requests: Sequence[Request], source: str) -> None:
    """Raise ValueError naming the request and field for impossible values."""
    for r in requests:
        where = f"{source}, request {r.request_id!r}"
        if not (r.arrival_s >= 0.0) or r.arrival_s == float("inf"):
            raise ValueError(f"{where}: arrival_s must be finite and >= 0, got {r.arrival_s!r}")
        check_int(f"{where}: input_tokens", r.input_tokens, 1)
        check_int(f"{where}: output_tokens", r.output_tokens, 1)
        if not r.blocks:
            raise ValueError(f"{where}: blocks is empty; every prompt has at least one block")
