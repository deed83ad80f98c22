"""The one small interface every routing policy implements, and a registry.

A policy answers each decision point (an arriving request) with a node index.
Before answering it may act on the caches through ``sim.warm`` and
``sim.evict``. ``reset`` is called once before a run with the fresh simulator,
so a policy object can be reused across windows. Learned agents implement the
same interface (``agents/``), so the comparison run cannot tell them apart.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from envs.sim.request import Request
from envs.sim.simulator import Simulator


class Policy(ABC):
    """Base class: override :meth:`decide`; :meth:`reset` when the policy keeps state."""

    name = "policy"

    def reset(self, sim: Simulator) -> None:
        """Forget everything from a previous run; called before each run."""
        return None

    @abstractmethod
    def decide(self, sim: Simulator, request: Request) -> int | None:
        """The node index for ``request``; ``None`` if the policy routed it itself
        with ``sim.route(node)`` (to act on the caches after routing)."""

    def metrics(self) -> dict[str, float]:
        """Policy-specific totals of the last run, added to its result row (none by default)."""
        return {}

    def run(self, sim: Simulator) -> Any:
        """Serve ``sim``'s workload (``sim.run`` resets the policy on it first);
        returns the records."""
        return sim.run(self)


POLICIES: dict[str, Callable[..., Policy]] = {}


def register(name: str) -> Callable[[type[Policy]], type[Policy]]:
    """Class decorator: make a policy constructible by name."""

    def wrap(cls: type[Policy]) -> type[Policy]:
        cls.name = name
        POLICIES[name] = cls
        return cls

    return wrap


def make_policy(name: str, **kwargs: Any) -> Policy:
    """Build the policy registered as ``name`` with keyword settings."""
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}")
    try:
        return POLICIES[name](**kwargs)
    except TypeError as error:
        raise ValueError(f"policy {name!r}: {error}") from None
