"""What a node's queue of prefills costs, kept from one forecast to the next.

:func:`envs.sim.forecast.node_backlog` walks a node's queue in order: each
queued request costs its prefill with what it will find cached, and a request
whose prefix is on its way (a copy in flight, a prefill under way) costs the
prefill of its suffix but starts no sooner than the prefix lands. At every
arrival the observation asks this of every node, and in a burst the queues run
to hundreds of requests.

:class:`QueueCosts` keeps what does not change between two forecasts while the
node's cache is unchanged and its queue has only grown at the tail: each queued
request's cold and warm prefill seconds, where each prefix key first appears,
and where a request could wait for its prefix. :meth:`QueueCosts.fold` then
adds the costs in the same order as the walk (the same float additions, so the
same seconds to the last bit), with ``itertools.accumulate`` doing the
additions between the few places where a landing prefix can hold the queue up.

The simulator appends to a queue and pops its head only; a queue seen otherwise
(or a cache that changed) is costed afresh.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate, islice
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envs.sim.node import Node
    from envs.sim.request import Request


class QueueCosts:
    """A node's queued requests (in queue order) and what each costs, valid for
    one cache version of the node."""

    __slots__ = ("costs", "first", "first_short", "requests", "version", "warm")

    def __init__(self, version: int) -> None:
        self.version = version
        self.requests: list[Request] = []
        self.costs: list[float] = []
        """Seconds per request when no prefix is on its way from outside the
        queue: cold for a key's first request, then warm if its prefix is not
        in HBM (an earlier request computes it)."""
        self.warm: list[float] = []
        """Seconds per request with its whole prefix cached."""
        self.first: dict[int, int] = {}
        """Prefix key -> position of its first request."""
        self.first_short: dict[int, int] = {}
        """Prefix key -> position of its first request that lacks the prefix in HBM."""

    def matches(self, version: int, queue: Sequence[Request]) -> bool:
        """Is this still ``queue`` (grown at the tail only) under cache ``version``?"""
        n = len(self.requests)
        return (
            version == self.version
            and len(queue) >= n
            and (n == 0 or (queue[0] is self.requests[0] and queue[n - 1] is self.requests[-1]))
        )

    def extend(self, node: Node, queue: Sequence[Request], block_tokens: int) -> None:
        """Cost the requests of ``queue`` past the ones already kept."""
        if len(queue) == len(self.requests):
            return
        match = node.view.hbm_match  # what the router sees (the stale view, if any)
        costs = node.costs
        per_token = costs.prefill_s_per_token
        linear = not costs.attention_s_coef  # prefill_s is n x per_token then
        first, first_short = self.first, self.first_short
        for position in range(len(self.requests), len(queue)):
            request = queue[position]
            blocks = request.blocks
            n_blocks = len(blocks)
            hit = match(blocks)
            depth = n_blocks - 1 or 1
            n_in = request.input_tokens
            have = min(hit * block_tokens, n_in - 1)
            whole = min(depth * block_tokens, n_in - 1)
            if linear:
                cold, warm = (n_in - have) * per_token, (n_in - whole) * per_token
            else:
                cold = costs.prefill_s(n_in - have, have)
                warm = costs.prefill_s(n_in - whole, whole)
            key = blocks[-2] if n_blocks > 1 else blocks[-1]
            short = depth > hit
            seen = key in first
            if not seen:
                first[key] = position
            if short and key not in first_short:
                first_short[key] = position
            self.requests.append(request)
            self.costs.append(warm if seen and short else cold)
            self.warm.append(warm)

    def fold(self, start_s: float, coming: dict[int, float]) -> tuple[float, list[float]]:
        """(seconds until the queue is prefilled, the running total after each
        request, ``start_s`` first) from ``start_s``, with ``coming`` the prefixes
        already on their way (key -> seconds until they are on the node). A
        request whose prefix is on its way starts no sooner than it lands; only
        a key's first request lacking it can be held up (the total never falls)."""
        costs = self.costs
        first_short = self.first_short
        events = None
        if first_short and coming:
            for key, arriving in coming.items():
                position = first_short.get(key)
                if position is not None:
                    if events is None:
                        events = []
                    events.append((position, arriving))
        if events is None:  # nothing outside the queue holds it up
            running = list(accumulate(costs, initial=start_s))
            return running[-1], running
        events.sort()
        running = [start_s]
        total = start_s
        begin = 0
        for position, arriving in events:
            if position > begin:
                running += islice(accumulate(costs[begin:position], initial=total), 1, None)
                total = running[-1]
            if arriving > total:
                total = arriving
            total += self.warm[position]
            running.append(total)
            begin = position + 1
        if begin < len(costs):
            running += islice(accumulate(costs[begin:], initial=total), 1, None)
            total = running[-1]
        return total, running


NO_QUEUE = QueueCosts(-1)
"""The costs of an empty queue (shared, never extended)."""


class Coming:
    """Prefix key -> seconds until it is on the node: the prefixes on their way
    (copies in flight, the prefill under way), then each queued key's first
    request's finish; ``total_s``: until the queue is prefilled, from ``start_s``.

    The queue's running totals (:meth:`QueueCosts.fold`) are added up the first
    time they are needed, so ask before the node's queue or cache changes."""

    __slots__ = ("_running", "costs", "outside", "start_s")

    def __init__(
        self,
        outside: dict[int, float],
        costs: QueueCosts,
        start_s: float,
        running: list[float] | None = None,
    ) -> None:
        self.outside = outside
        self.costs = costs
        self.start_s = start_s
        self._running = running

    @property
    def running(self) -> list[float]:
        """``start_s``, then the running total after each queued request."""
        running = self._running
        if running is None:
            running = self._running = self.costs.fold(self.start_s, self.outside)[1]
        return running

    @property
    def total_s(self) -> float:
        """Seconds until the queue is prefilled (what :meth:`QueueCosts.fold` gives)."""
        return self.running[-1]

    def get(self, key: int) -> float | None:
        """Seconds until prefix ``key`` is on the node, or None if it is not coming."""
        value = self.outside.get(key)
        if value is not None:
            return value
        position = self.costs.first.get(key)
        return None if position is None else self.running[position + 1]
