"""One replica's state: its queue, running batch, timeline and prefix cache.

The node's timeline is serial. At any moment it does one work item: a prefill
(reuse of cached KV, then computing the rest), a decode segment (every running
sequence advances until the next one finishes, in closed form; a chunked
prefill runs one step of the batch between chunks), under the reference
copy model a warm copy landing on it, or a chunk of speculative prefill (only
when it has nothing else to do: envs/sim/speculation.py). Admissions pause
decode: when a new request can be admitted, a decode segment in progress is cut at the
next step boundary. The scheduling rules in words: docs/physics.md.

This is the readable reference; ``envs/sim/_native/core.pyx`` has its compiled
twin (the same fields, C integers and doubles for the counters and times), which
the compiled simulator builds (``envs.sim.native``). Change the two together.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from envs.sim.cache import PrefixCache
from envs.sim.timing import NodeCosts, NodeSpec

if TYPE_CHECKING:
    from envs.sim.request import Request
    from envs.sim.transfers import Copy

IDLE = 0
PREFILL = 1
DECODE = 2
COPY = 3
SPECULATE = 4  # a speculative-prefill chunk (envs/sim/speculation.py)


class Node:
    """A replica. Policies may read any attribute; only the simulator writes them.

    Attributes worth reading:
        queue: requests routed here and not yet admitted (FIFO).
        running: admitted requests not yet finished (prefill or decode).
        reserved_tokens: KV reserved by running requests (input + output each).
        pinned_tokens: KV of the prefixes pinned in its cache (``Simulator.pin``).
        budget_tokens: KV tokens that fit beside the weights.
        cache: the node's :class:`~envs.sim.cache.PrefixCache` (the physics).
        view: the same cache as the router sees it: policies and the observation
            read prefix holdings here. It *is* ``cache`` unless
            ``SimConfig.router_view_delay_s`` > 0 (then: ``cache`` as it was that
            long ago; :mod:`envs.sim.view`).
        down: the node is lost (``SimConfig`` fault options; :mod:`envs.sim.faults`):
            it serves nothing and holds no KV until it comes back.
        nic_down: > 0 while the node's RDMA NIC is down (a fault option): no
            warm copies from or to it.
        inflight: warm copies to this node that have not landed, by prefix key
            (the last block id of the copied prefix).
        computing: the request being prefilled now, or None.
    """

    __slots__ = (
        "batch_heap",
        "budget_tokens",
        "busy_s",
        "cache",
        "cache_beside_reservations",
        "chunk_breaks",
        "copy_queue",
        "copy_s",
        "costs",
        "ctx_tokens",
        "decode_n",
        "decode_s",
        "down",
        "draining",
        "free_s",
        "index",
        "inflight",
        "item_decode_s",
        "nic_down",
        "pinned_tokens",
        "prefill_ewma_s",
        "prefill_s",
        "queue",
        "rdma_busy_s",
        "reserved_tokens",
        "running",
        "seg_batch",
        "seg_ctx",
        "seg_start",
        "seg_steps",
        "spec",
        "step",
        "version",
        "view",
        "waiting_for",
        "waiting_src",
        "work",
        "work_end",
        "work_obj",
        "work_start",
    )

    def __init__(self, index: int, spec: NodeSpec, costs: NodeCosts, cache: PrefixCache) -> None:
        self.index = index
        self.spec = spec
        self.costs = costs
        self.cache = cache
        self.view = cache  # what routers see of it (envs.sim.view)
        self.down = False  # lost and not back yet (envs.sim.faults)
        self.nic_down = 0  # > 0 while its RDMA NIC is down (envs.sim.faults)
        self.cache_beside_reservations = True  # SimConfig.cache_capacity == "headroom"
        self.budget_tokens = costs.budget_tokens
        self.queue: deque[Request] = deque()
        self.running = 0
        self.reserved_tokens = 0
        self.pinned_tokens = 0  # KV of pinned prefixes (admission leaves room for it)
        # timeline
        self.work = IDLE
        self.work_obj: Request | Copy | None = None
        self.work_start = 0.0
        self.work_end = 0.0
        self.version = 0
        self.free_s = 0.0  # an idle node starts no work before this (decode overshoot)
        self.draining = False  # an upgrade is due: admit nothing (envs.sim.tenancy)
        # decode batch: heap of (finish_step, order, request)
        self.batch_heap: list[tuple[int, int, Request]] = []
        self.decode_n = 0
        self.step = 0
        self.ctx_tokens = 0
        self.seg_start = 0.0
        self.seg_steps = 0
        self.seg_batch = 0
        self.seg_ctx = 0
        # a chunked prefill in progress: the decode steps run up to each moment a
        # sequence finishes during it, the last such moment first
        self.chunk_breaks: list[int] = []
        # the decode seconds between the chunks of the prefill in progress (0: none)
        self.item_decode_s = 0.0
        # copies
        self.copy_queue: deque[Copy] = deque()
        self.inflight: dict[int, Copy] = {}
        self.waiting_src: list[Copy] = []
        self.waiting_for: Copy | None = None
        # accounting (seconds)
        self.busy_s = 0.0
        self.prefill_s = 0.0
        self.prefill_ewma_s = 0.0  # moving average of recent admissions' reuse + prefill
        self.decode_s = 0.0
        self.copy_s = 0.0
        self.rdma_busy_s = 0.0

    @property
    def load(self) -> int:
        """Running plus waiting requests (the routers' shared definition of load)."""
        return self.running + len(self.queue)

    @property
    def computing(self) -> Request | None:
        if self.work == PREFILL:
            return self.work_obj  # type: ignore[return-value]
        return None

    def estimated_wait_s(self, now: float) -> float:
        """Rough wait for a request routed here now: the rest of the current work
        item plus one recent average prefill per queued request."""
        rest = self.work_end - now if self.work != IDLE else 0.0
        return max(rest, 0.0) + len(self.queue) * self.prefill_ewma_s

    def cache_capacity_blocks(self, block_tokens: int) -> int:
        """HBM blocks the prefix cache may hold now: the KV headroom (budget minus
        reservations), or the whole budget under ``cache_capacity="budget"``."""
        if self.cache_beside_reservations:
            return (self.budget_tokens - self.reserved_tokens) // block_tokens
        return self.budget_tokens // block_tokens

    def copy_room_blocks(self, block_tokens: int) -> int:
        """HBM blocks a copy or promotion may bring in now: the cache's capacity
        less its pinned blocks, which nothing evicts."""
        return self.cache_capacity_blocks(block_tokens) - self.pinned_tokens // block_tokens
