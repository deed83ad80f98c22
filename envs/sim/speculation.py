"""Speculative prefill: a node computes a prefix that no request on it has asked
for, from scratch, on compute it would otherwise leave idle (no source copy).

A policy asks with ``Simulator.speculate(node, blocks, tokens=None)``: the whole
prefix ``blocks``, or its first ``tokens`` tokens rounded down to whole blocks.
The request joins the node's FIFO of speculations and runs in chunks of
``SimConfig.speculative_chunk_tokens`` (whole blocks, at least one).

The priority rule: speculation is the node's lowest-priority work. A chunk
starts only when the node has nothing else to do: no request queued (admissible
or waiting for a copy), no warm copy to land on its timeline, no decode batch.
A chunk, once started, runs to its end: it is preemptible at chunk boundaries,
so a request (or a copy) arriving meanwhile waits at most for the chunk in
progress, then goes first.

Each chunk continues from what the node holds in HBM and costs the simulator's
one prefill timing (``NodeCosts.prefill_s`` of its tokens after the cached
ones). Its blocks enter the node's prefix cache in HBM when the chunk ends
(under ``causal_kv=False``, the reference model, when it starts, as a
request's prompt does), so a request arriving later reuses exactly the chunks
done. They count against HBM like any cached prefix and are evicted by LRU
like any other. A speculation ends when the node holds the whole prefix (a
request may have computed it), or is dropped when blocks it computed were
evicted before it finished.

Waste: each chunk's blocks carry a tag (the cache's copy-id tag, in a range of
its own), so a request that reuses any of its blocks, in any tier, marks the
chunk *used*. The compute seconds of chunks no request used (evicted, or still
cached at the end) are the wasted speculative seconds
(``speculative_wasted_s`` in the run summary). A chunk cut short by a node loss
(``SpeculativeChunk.cut``) was not computed: what ran of it counts in the
compute and wasted seconds, and in no count of chunks or tokens.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from envs.sim.cache import ORIGIN_SPECULATIVE
from envs.sim.tokens import whole_blocks

if TYPE_CHECKING:
    from envs.sim.node import Node

SPECULATE_OK = "ok"
SPECULATE_REFUSALS = (
    "bad_prefix",  # no block asked for (empty, or fewer tokens than one block)
    "node_has_prefix",  # the node holds the whole prefix in HBM
    "already_in_flight",  # a warm copy of the prefix is on its way to the node
    "already_speculating",  # the node has the same prefix queued or in progress
    "no_room",  # the missing blocks exceed what the node's cache may hold now (pins aside)
    "node_down",  # the node is lost (SimConfig fault options) or drains for an upgrade
)
CHUNK_ID_BASE = 1 << 40
"""Chunk tags start here, far above any warm copy's id (copies count from 0)."""


class SpeculativeJob:
    """One accepted ``speculate`` call: a prefix to compute on one node."""

    __slots__ = ("blocks", "done_blocks", "issued_s", "key")

    def __init__(self, blocks: tuple[int, ...], issued_s: float) -> None:
        self.blocks = blocks
        self.key = blocks[-1]
        self.issued_s = issued_s
        self.done_blocks = 0  # leading blocks this job has computed


class SpeculativeChunk:
    """A chunk of speculative prefill: blocks ``start_blocks`` to ``end_blocks`` of
    its job's prefix on node ``node``. ``cut``: its node was lost before it ended
    (``compute_s`` is then what ran of it; it counts as no chunk computed)."""

    __slots__ = (
        "compute_s",
        "cut",
        "end_blocks",
        "id",
        "job",
        "node",
        "start_blocks",
        "start_s",
        "tokens",
    )

    def __init__(
        self,
        chunk_id: int,
        node: int,
        job: SpeculativeJob,
        start_blocks: int,
        end_blocks: int,
        tokens: int,
        compute_s: float,
        start_s: float,
    ) -> None:
        self.id = chunk_id
        self.node = node
        self.job = job
        self.start_blocks = start_blocks
        self.end_blocks = end_blocks
        self.tokens = tokens
        self.compute_s = compute_s
        self.start_s = start_s
        self.cut = False


class Speculation:
    """Every node's queue of speculations, the chunks computed and the refusals.

    Made by the simulator on the first ``speculate`` call; the simulator puts the
    chunks on the nodes' timelines (see the module docstring for the rules)."""

    def __init__(self, n_nodes: int, block_tokens: int, chunk_tokens: int, causal_kv: bool):
        self.block_tokens = block_tokens
        self.chunk_blocks = max(whole_blocks(chunk_tokens, block_tokens), 1)
        self.causal_kv = causal_kv
        self.jobs: list[deque[SpeculativeJob]] = [deque() for _ in range(n_nodes)]
        self.chunks: list[SpeculativeChunk] = []
        self.accepted = 0
        self.refused: dict[str, int] = dict.fromkeys(SPECULATE_REFUSALS, 0)

    def submit(self, node: Node, blocks: Sequence[int], tokens: int | None, now: float) -> str:
        """Queue the prefix (its first ``tokens`` tokens, whole blocks) on ``node``;
        ``"ok"`` or the reason it was refused (one of ``SPECULATE_REFUSALS``)."""
        if tokens is not None:
            blocks = blocks[: whole_blocks(tokens, self.block_tokens)]
        reason = refusal(node, blocks, self.block_tokens, self)
        if reason:
            self.refused[reason] += 1
            return reason
        self.jobs[node.index].append(SpeculativeJob(tuple(blocks), now))
        self.accepted += 1
        return SPECULATE_OK

    def totals(self) -> dict[str, Any]:
        """The ``RunTotals`` fields of speculation (see ``envs.sim.metrics``)."""
        return {
            "speculative_chunks": tuple(self.chunks),
            "speculative_accepted": self.accepted,
            "speculative_refused": dict(self.refused),
        }

    def pending(self, node: Node) -> int:
        """Speculations queued or in progress on ``node``."""
        return len(self.jobs[node.index])

    def speculating(self, node: Node, key: int) -> bool:
        """Has ``node`` the prefix ending in block ``key`` queued or in progress?"""
        return any(job.key == key for job in self.jobs[node.index])

    def next_chunk(self, node: Node, t: float) -> SpeculativeChunk | None:
        """The chunk ``node`` computes from ``t`` (it has nothing else to do), or
        None when no speculation is left; finished or broken ones are dropped."""
        jobs = self.jobs[node.index]
        bt = self.block_tokens
        while jobs:
            job = jobs[0]
            have = node.cache.hbm_match(job.blocks)
            depth = len(job.blocks)
            if have >= depth or have < job.done_blocks:  # done, or lost what it computed
                jobs.popleft()
                continue
            end = min(have + self.chunk_blocks, depth)
            tokens = (end - have) * bt
            compute_s = node.costs.prefill_s(tokens, have * bt)
            chunk = SpeculativeChunk(
                CHUNK_ID_BASE + len(self.chunks), node.index, job, have, end, tokens, compute_s, t
            )
            self.chunks.append(chunk)
            if not self.causal_kv:  # the reference model: KV resident from the start
                self._insert(node, chunk, t)
            return chunk
        return None

    def finish_chunk(self, node: Node, chunk: SpeculativeChunk, t: float) -> tuple[int, ...]:
        """The chunk's compute ended at ``t``: its blocks are in HBM (returned)."""
        if self.causal_kv:
            self._insert(node, chunk, t)
        chunk.job.done_blocks = chunk.end_blocks
        return chunk.job.blocks[: chunk.end_blocks]

    def _insert(self, node: Node, chunk: SpeculativeChunk, t: float) -> None:
        cache = node.cache
        blocks = chunk.job.blocks[: chunk.end_blocks]
        cache.insert(blocks, t, copy_id=chunk.id, origin=ORIGIN_SPECULATIVE)
        cache.evict_to(node.cache_capacity_blocks(self.block_tokens))


def refusal(
    node: Node, blocks: Sequence[int], block_tokens: int, speculation: Speculation | None
) -> str:
    """Why ``speculate`` would refuse the prefix ``blocks`` on ``node`` now (one of
    ``SPECULATE_REFUSALS``), or "" if it would accept it (also the action masks'
    rule). ``speculation`` is the simulator's (None before the first call)."""
    if not blocks:
        return "bad_prefix"
    if node.down or node.draining:
        return "node_down"
    key = blocks[-1]
    have = node.cache.hbm_match(blocks)
    if have >= len(blocks):
        return "node_has_prefix"
    if key in node.inflight:
        return "already_in_flight"
    if speculation is not None and speculation.speculating(node, key):
        return "already_speculating"
    if len(blocks) - have > node.copy_room_blocks(block_tokens):
        return "no_room"
    return ""
