"""The warming planner behind ``oracle_warm`` and the causal teacher.

One mechanism, two ways of knowing which prefixes will be reused. A
:class:`Recurrence` predicate says, for each arriving request, how deep its
shared prefix is and how many nodes should hold it: ``oracle_warm`` reads the
whole window in advance (:class:`baselines.oracle.FutureUsers`), the causal
teacher counts recent arrivals with BTB's X-in-Z window
(:class:`baselines.window.RecentArrivals`). Given that answer the planner:

* routes the request to the node where its first token is expected soonest,
  from a per-node clock of queued work it keeps itself (prefill times from the
  node's costs, copies on the target's timeline under the reference copy
  model), counting a prefix being computed or copied there as a hit from the
  moment it is expected to be ready (:func:`envs.sim.forecast.earliest_node`);
* remembers the node that computes a shared prefix, as a copy source, until
  the request's first token;
* copies a recurring prefix, from the node that holds it or computes it
  soonest, to the soonest-free nodes until as many nodes as wanted hold it or
  will, skipping a node that could compute the prefix itself before a copy
  would land (then a request routed there computes it);
* does so at the earliest causal moment: a request that will compute a
  recurring prefix is routed by the planner itself (``sim.route``) and the
  copies are issued from its node at once; the simulator starts them when the
  KV exists (when the prefill ends under causal KV, at admission under the
  reference model).

Everything but the predicate uses only the past and the cluster's current
state, so with a causal predicate the decisions are labels a causal agent can
learn. It is a strong heuristic, not a proven bound: the clock ignores decode
and admission limits, and each decision is greedy for the request at hand.
Because it routes some requests itself, a driver must accept ``None`` from
:meth:`WarmPlanner.decide` (``sim.run`` does).
"""

from __future__ import annotations

from typing import Protocol

from baselines.policy import Policy
from baselines.routers import up_nodes
from envs.sim.checks import check_int
from envs.sim.forecast import (
    catch_up,
    copy_bytes,
    copy_s,
    copy_start_s,
    copy_targets,
    earliest_node,
)
from envs.sim.node import Node
from envs.sim.request import Request
from envs.sim.simulator import WARM_OK, Simulator
from envs.sim.tokens import blocks_reaching


class Recurrence(Protocol):
    """Which prefixes will be reused: the planner's one source of foresight."""

    def reset(self, sim: Simulator, min_blocks: int) -> None:
        """Start a run on ``sim``; a prefix shorter than ``min_blocks`` is never shared."""

    def __call__(self, sim: Simulator, request: Request) -> tuple[int, int]:
        """(depth, nodes wanted) for ``request`` as it arrives: its shared prefix is
        ``request.blocks[:depth]`` (0: none), and that many nodes, this request's
        included, should hold it (0: it will not recur, copy nothing)."""
        ...


class WarmPlanner(Policy):
    """Earliest-first-token routing plus warm copies of the prefixes ``recurrence``
    says will recur, onto at most ``max_nodes`` nodes (default: all)."""

    copies_metric = "copies_issued"
    """The name of :meth:`metrics`' count of copies issued."""

    def __init__(
        self, recurrence: Recurrence, min_prefix_tokens: int = 4096, max_nodes: int | None = None
    ) -> None:
        check_int(f"{self.name}.min_prefix_tokens", min_prefix_tokens, 1)
        if max_nodes is not None:
            check_int(f"{self.name}.max_nodes", max_nodes, 1)
        self.recurrence = recurrence
        self.min_prefix_tokens = min_prefix_tokens
        self.max_nodes = max_nodes
        self._max_nodes = 0
        self._free_at: list[float] = []
        self._plan: dict[tuple[int, int], tuple[float, bool]] = {}
        self._computing: dict[int, tuple[int, int]] = {}
        self._cursor = 0
        self._copies = 0

    def reset(self, sim: Simulator) -> None:
        self.recurrence.reset(sim, blocks_reaching(self.min_prefix_tokens, sim.block_tokens))
        self._free_at = [0.0] * sim.n_nodes
        self._plan = {}
        self._computing = {}
        self._cursor = 0
        self._copies = 0
        limit = self.max_nodes if self.max_nodes is not None else sim.n_nodes
        self._max_nodes = min(limit, sim.n_nodes)

    def metrics(self) -> dict[str, float]:
        return {self.copies_metric: self._copies}

    def decide(self, sim: Simulator, request: Request) -> int | None:
        free_at = self._free_at
        catch_up(free_at, sim)
        self._sync(sim)
        d, wanted = self.recurrence(sim, request)
        key = request.blocks[d - 1] if d else 0
        prefix = request.blocks[:d]
        want = min(self._max_nodes, wanted)
        if wanted:
            sources = self._sources(sim, prefix)
            if sources:
                self._spread(sim, prefix, sources, want)
        choice, start, finish, computes = self._choose(sim, request, d, key)
        free_at[choice] = finish
        if not (d and computes):
            return choice
        # This request computes the shared prefix on ``choice``: remember it as
        # a source. When the prefix recurs, route the request now, so that
        # copies can be issued from it at once (they start when its KV exists).
        self._plan[(choice, key)] = (finish if sim.config.causal_kv else start, False)
        self._computing[request.index] = (choice, key)
        if not wanted:
            return choice
        sim.route(choice)
        self._spread(sim, prefix, self._sources(sim, prefix), want)
        return None

    def _choose(
        self, sim: Simulator, request: Request, depth: int, key: int
    ) -> tuple[int, float, float, bool]:
        """(node, start, first token, whether it computes the prefix there): the
        node where the first token is expected soonest by the planner's clock."""
        return earliest_node(
            sim, request, self._free_at, depth, lambda node: self._planned(node, key)
        )

    # ------------------------------------------------------------------ helpers
    def _sync(self, sim: Simulator) -> None:
        """Forget the plans of requests whose prefill has ended (their KV is resident)."""
        log = sim.first_token_log
        for k in range(self._cursor, len(log)):
            entry = self._computing.pop(log[k].index, None)
            if entry is not None:
                self._plan.pop(entry, None)
        self._cursor = len(log)

    def _planned(self, node: Node, key: int) -> float | None:
        """When ``node`` is expected to hold the prefix ``key`` by a plan still under way."""
        entry = self._plan.get((node.index, key))
        if entry is None:
            return None
        if entry[1] and key not in node.inflight:  # the copy landed (or was dropped)
            del self._plan[(node.index, key)]
            return None
        return entry[0]

    def _sources(self, sim: Simulator, prefix: tuple[int, ...]) -> list[int]:
        """Nodes that hold ``prefix`` in HBM or are computing it (by this planner's plan)."""
        depth = len(prefix)
        key = prefix[-1]
        out = []
        for node in up_nodes(sim):
            if node.view.hbm_match(prefix) >= depth:
                out.append(node.index)
            else:
                entry = self._plan.get((node.index, key))
                if entry is not None and not entry[1]:
                    out.append(node.index)
        return out

    def _spread(
        self, sim: Simulator, prefix: tuple[int, ...], sources: list[int], want: int
    ) -> None:
        """Copy ``prefix`` to the soonest-free nodes until ``want`` nodes hold it or will,
        skipping a node that would compute the prefix itself sooner than a copy lands."""
        if not sources:
            return
        nodes = sim.nodes
        key = prefix[-1]
        free_at = self._free_at
        targets = copy_targets(nodes, key, sources, want, free_at)
        if not targets:
            return
        now = sim.now
        plan = self._plan
        ready = {i: max(plan[(i, key)][0], now) if (i, key) in plan else now for i in sources}
        src = min(sources, key=lambda i: (ready[i], i))
        reference = sim.config.copy_model == "reference"
        latency = sim.config.transfer_latency_s
        bt = sim.block_tokens
        for dst in targets:
            target = nodes[dst]
            missing = len(prefix) - target.view.hbm_match(prefix)
            duration_s = copy_s(copy_bytes(missing, bt, target), target, latency)
            begin = copy_start_s(target, ready[src], reference)
            if begin + duration_s >= free_at[dst] + target.costs.prefill_s(missing * bt):
                continue
            if sim.warm(src, dst, prefix) != WARM_OK:
                continue
            self._copies += 1
            plan[(dst, key)] = (begin + duration_s, True)
            if reference:
                free_at[dst] += duration_s
