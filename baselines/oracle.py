"""A clairvoyant warming policy: a reference point for what a burst predictor can gain.

``oracle_warm`` reads the whole window's arrivals at ``reset`` (``sim.requests``)
and knows, for every request, the longest prefix it shares with any other
request of the window, and how many later requests share it. It then:

* warms exactly the prefixes that will be reused (at least ``min_prefix_tokens``
  tokens deep, 4,096 by default, with later users still to come), to as many nodes as the prefix
  still has users, up to ``max_nodes`` nodes (default: all), picking the nodes
  that will be free soonest, and skipping a node that could compute the prefix
  itself before a copy would land (then a request routed there computes it);
* does so at the earliest causal moment: a request that will compute a reused
  prefix is routed by the policy itself (``sim.route``) and the copies are
  issued from its node at once; the simulator starts them when the KV exists
  (when the prefill ends under causal KV, at admission under the reference model);
* routes every request to the node where its first token is expected soonest,
  from a per-node clock of queued work it keeps itself (prefill times from the
  node's costs, copies on the target's timeline under the reference copy
  model), counting a prefix being computed or copied there as a hit from the
  moment it is expected to be ready.

It is a strong heuristic, not a proven bound: the clock ignores decode and
admission limits, and each decision is greedy for the request at hand. A prefix
never reused (a decoy) is never copied. Because it routes some requests itself,
a driver must accept ``None`` from :meth:`OracleWarm.decide` (``sim.run`` does).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from itertools import chain

from baselines.policy import Policy, register
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


@register("oracle_warm")
class OracleWarm(Policy):
    """Clairvoyant warming of reused prefixes, with earliest-first-token routing."""

    def __init__(self, min_prefix_tokens: int = 4096, max_nodes: int | None = None) -> None:
        for name, value in (("min_prefix_tokens", min_prefix_tokens), ("max_nodes", max_nodes)):
            if value is None and name == "max_nodes":
                continue
            check_int(f"oracle_warm.{name}", value, 1)
        self.min_prefix_tokens = min_prefix_tokens
        self.max_nodes = max_nodes
        self._depth: list[int] = []
        self._users: dict[int, list[int]] = {}
        self._free_at: list[float] = []
        self._plan: dict[tuple[int, int], tuple[float, bool]] = {}
        self._computing: dict[int, tuple[int, int]] = {}
        self._cursor = 0
        self._copies = 0

    def reset(self, sim: Simulator) -> None:
        requests = sim.requests
        counts = Counter(chain.from_iterable(r.blocks for r in requests))
        depth = [0] * len(requests)
        keys: set[int] = set()
        min_blocks = blocks_reaching(self.min_prefix_tokens, sim.block_tokens)
        for r in requests:
            blocks = r.blocks
            lo, hi = 0, len(blocks)  # ids are chained: counts never grow along a prompt
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if counts[blocks[mid - 1]] >= 2:
                    lo = mid
                else:
                    hi = mid - 1
            if lo >= min_blocks:
                depth[r.index] = lo
                keys.add(blocks[lo - 1])
        users: dict[int, list[int]] = {key: [] for key in keys}
        for r in requests:
            for key in keys.intersection(r.blocks):
                users[key].append(r.index)
        self._depth = depth
        self._users = users
        self._free_at = [0.0] * sim.n_nodes
        self._plan = {}
        self._computing = {}
        self._cursor = 0
        self._copies = 0
        limit = self.max_nodes if self.max_nodes is not None else sim.n_nodes
        self._max_nodes = min(limit, sim.n_nodes)

    def metrics(self) -> dict[str, float]:
        return {"oracle_copies_issued": self._copies}

    def decide(self, sim: Simulator, request: Request) -> int | None:
        now = sim.now
        nodes = sim.nodes
        free_at = self._free_at
        catch_up(free_at, nodes, now)
        self._sync(sim)
        d = self._depth[request.index]
        key = request.blocks[d - 1] if d else 0
        future = 0
        if d:
            users = self._users[key]
            future = len(users) - bisect_right(users, request.index)
        prefix = request.blocks[:d]
        want = min(self._max_nodes, 1 + future)
        if future:
            sources = self._sources(sim, prefix)
            if sources:
                self._spread(sim, prefix, sources, want)
        choice, start, finish, computes = earliest_node(
            sim, request, free_at, d, lambda node: self._planned(node, key)
        )
        free_at[choice] = finish
        if not (future and computes):
            return choice
        # This request computes the prefix on ``choice``: route it now, so that
        # copies can be issued from it at once (they start when its KV exists).
        sim.route(choice)
        self._plan[(choice, key)] = (finish if sim.config.causal_kv else start, False)
        self._computing[request.index] = (choice, key)
        self._spread(sim, prefix, self._sources(sim, prefix), want)
        return None

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
        """Nodes that hold ``prefix`` in HBM or are computing it (routed by this policy)."""
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
