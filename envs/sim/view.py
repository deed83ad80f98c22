"""The router's view of the nodes' caches, ``SimConfig.router_view_delay_s`` late.

Production routers learn what a node holds from KV events (a block entering or
leaving its HBM) that reach them late. With a delay d > 0, every policy and the
observation read a node's prefix holdings from ``node.view``: the node's cache
exactly as it was d seconds ago. The simulator's own physics (admission, hits,
what a copy must carry) always uses the true cache, ``node.cache``.

How: every call that changes a node's cache is logged with the time it
happened, and replayed in the same order into a second cache (built with the
same settings) once d seconds have passed. The cache is deterministic, so the
replayed copy passes through exactly the true cache's states, d seconds late.
The views are brought up to date at each decision point (:meth:`Views.sync`).
With d = 0 there is no log and ``node.view`` *is* ``node.cache``: no cost.

What stays live: loads, queues, the request being computed, copies in flight
and their states, and which nodes are down. The router routed those requests
and issued those copies itself; only the caches' contents travel as KV events.
A copy that has landed therefore drops out of ``node.inflight`` at once but
shows in the target's view only d seconds later.

Any new method that changes a :class:`~envs.sim.cache.PrefixCache` must be
listed in :data:`CACHE_CHANGES`, or the view never sees its effect.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envs.sim.cache import PrefixCache
    from envs.sim.node import Node

CACHE_CHANGES = (
    "use",
    "insert",
    "evict_to",
    "evict_prefix",
    "match_touch",
    "pin",
    "unpin",
    "promote",
    "expire_copy",
)
"""The PrefixCache methods that change what it holds or its LRU order."""

_RESET = "__reset__"

Event = tuple[float, str, tuple[Any, ...], dict[str, Any]]
"""(visible from, method name, args, kwargs)."""


class DelayedView:
    """One node's cache as the router sees it: the true cache ``delay_s`` ago."""

    def __init__(self, cache: PrefixCache, delay_s: float, clock: Callable[[], float]) -> None:
        self.delay_s = delay_s
        self.clock = clock
        self.cache = copy.deepcopy(cache)  # same settings and (empty) state
        self.events: deque[Event] = deque()
        self._watch(cache)

    def _watch(self, cache: PrefixCache) -> None:
        """Log every change to ``cache`` (its changing methods, on this instance)."""
        for name in CACHE_CHANGES:
            setattr(cache, name, self._recorder(name, getattr(cache, name)))

    def _recorder(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        events = self.events
        clock = self.clock
        delay_s = self.delay_s

        def record(*args: Any, **kwargs: Any) -> Any:
            events.append((clock() + delay_s, name, args, kwargs))
            return method(*args, **kwargs)

        return record

    def replaced(self, cache: PrefixCache) -> None:
        """The node's cache was replaced by ``cache`` (e.g. emptied by a node loss):
        the view becomes a copy of it as it is now, ``delay_s`` from now."""
        events = self.events
        events.append((self.clock() + self.delay_s, _RESET, (copy.deepcopy(cache),), {}))
        self._watch(cache)

    def sync(self, now: float) -> None:
        """Replay every change that has become visible by ``now``."""
        events = self.events
        while events and events[0][0] <= now:
            _, name, args, kwargs = events.popleft()
            if name == _RESET:
                self.cache = args[0]
            else:
                getattr(self.cache, name)(*args, **kwargs)


def pristine_copy(cache: PrefixCache) -> PrefixCache:
    """A deep copy of ``cache`` that logs nothing (without a view's recorders)."""
    twin = copy.deepcopy(cache)
    for name in CACHE_CHANGES:
        vars(twin).pop(name, None)
    return twin


class Views:
    """Every node's :class:`DelayedView`; keeps ``node.view`` pointing at it."""

    def __init__(self, nodes: list[Node], delay_s: float, clock: Callable[[], float]) -> None:
        self.nodes = nodes
        self.views = [DelayedView(node.cache, delay_s, clock) for node in nodes]
        for node, view in zip(nodes, self.views):
            node.view = view.cache

    def sync(self, now: float) -> None:
        """Bring every node's view up to ``now``."""
        for node, view in zip(self.nodes, self.views):
            if view.events and view.events[0][0] <= now:
                view.sync(now)
                node.view = view.cache

    def replaced(self, node: Node) -> None:
        """``node.cache`` was replaced (see :meth:`DelayedView.replaced`)."""
        self.views[node.index].replaced(node.cache)
