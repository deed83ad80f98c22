"""A clairvoyant warming policy: the bound on what any burst predictor can gain.

``oracle_warm`` reads the whole window's arrivals at ``reset`` (``sim.requests``)
and knows, for every request, the longest prefix it shares with any other
request of the window, and how many later requests share it. It then:

* warms exactly the prefixes that will be reused (at least ``min_prefix_blocks``
  blocks deep, with later users still to come), to as many nodes as the prefix
  still has users, up to ``max_nodes`` nodes (default: all), picking the nodes
  that will be free soonest;
* does so at the earliest causal moment: when the first request of a prefix is
  routed, it routes it itself (``sim.route``) and at once issues the copies
  from that node; the simulator starts them when the KV exists (when the
  prefill ends under causal KV, at admission under the reference model);
* routes every request to the node where its first token is expected soonest,
  from a per-node clock of queued work it keeps itself (prefill times from the
  node's costs, copies on the target's timeline under the reference copy
  model), counting a copy in flight as a hit once it is expected to land.

The clock ignores decode and admission limits, so on decode-heavy traffic the
routing is a heuristic; the warming is what is clairvoyant. A prefix never
reused (a decoy) is never copied.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from itertools import chain

from baselines.policy import Policy, register
from envs.sim.node import IDLE
from envs.sim.simulator import WARM_OK, Simulator
from envs.workloads.request import Request


@register("oracle_warm")
class OracleWarm(Policy):
    """Clairvoyant warming of reused prefixes, with earliest-first-token routing."""

    def __init__(self, min_prefix_blocks: int = 16, max_nodes: int | None = None) -> None:
        for name, value in (("min_prefix_blocks", min_prefix_blocks), ("max_nodes", max_nodes)):
            if value is None and name == "max_nodes":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"oracle_warm.{name} must be an integer >= 1, got {value!r}")
        self.min_prefix_blocks = min_prefix_blocks
        self.max_nodes = max_nodes
        self._depth: list[int] = []
        self._users: dict[int, list[int]] = {}
        self._free_at: list[float] = []
        self._ready: dict[tuple[int, int], float] = {}
        self._computer: dict[int, tuple[int, Request]] = {}
        self._copies = 0

    def reset(self, sim: Simulator) -> None:
        requests = sim.requests
        counts = Counter(chain.from_iterable(r.blocks for r in requests))
        depth = [0] * len(requests)
        keys: set[int] = set()
        for r in requests:
            blocks = r.blocks
            lo, hi = 0, len(blocks)  # ids are chained: counts never grow along a prompt
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if counts[blocks[mid - 1]] >= 2:
                    lo = mid
                else:
                    hi = mid - 1
            if lo >= self.min_prefix_blocks:
                depth[r.index] = lo
                keys.add(blocks[lo - 1])
        users: dict[int, list[int]] = {key: [] for key in keys}
        for r in requests:
            for key in keys.intersection(r.blocks):
                users[key].append(r.index)
        self._depth = depth
        self._users = users
        self._free_at = [0.0] * sim.n_nodes
        self._ready = {}
        self._computer = {}
        self._copies = 0
        limit = self.max_nodes if self.max_nodes is not None else sim.n_nodes
        self._max_nodes = min(limit, sim.n_nodes)

    def metrics(self) -> dict[str, float]:
        return {"oracle_copies_issued": self._copies}

    def decide(self, sim: Simulator, request: Request) -> int | None:
        now = sim.now
        nodes = sim.nodes
        free_at = self._free_at
        for node in nodes:
            j = node.index
            if (node.work == IDLE and not node.queue and not node.copy_queue) or free_at[j] < now:
                free_at[j] = now
        d = self._depth[request.index]
        key = request.blocks[d - 1] if d else 0
        future = 0
        if d:
            users = self._users[key]
            future = len(users) - bisect_right(users, request.index)
        prefix = request.blocks[:d]
        want = min(self._max_nodes, 1 + future)
        sources: list[int] = []
        if future:
            sources = self._holders(sim, prefix)
            if sources:
                self._spread(sim, prefix, sources, want)
        choice, start, finish = self._earliest(sim, request, d, key)
        free_at[choice] = finish
        if future and not sources:
            # This request computes the prefix: route it now, copy from it at once.
            sim.route(choice)
            self._computer[key] = (choice, request)
            self._ready[(choice, key)] = finish if sim.config.causal_kv else start
            self._spread(sim, prefix, [choice], want)
            return None
        return choice

    # ------------------------------------------------------------------ helpers
    def _holders(self, sim: Simulator, prefix: tuple[int, ...]) -> list[int]:
        """Nodes that hold ``prefix`` in HBM or will compute it soon (by this policy)."""
        depth = len(prefix)
        out = [node.index for node in sim.nodes if node.cache.hbm_match(prefix) >= depth]
        computer = self._computer.get(prefix[-1])
        if computer is not None and computer[0] not in out:
            node = sim.nodes[computer[0]]
            request = computer[1]
            if node.computing is request or any(r is request for r in node.queue):
                out.append(node.index)
        return out

    def _spread(
        self, sim: Simulator, prefix: tuple[int, ...], sources: list[int], want: int
    ) -> None:
        """Copy ``prefix`` to the soonest-free nodes until ``want`` nodes hold it or will."""
        nodes = sim.nodes
        key = prefix[-1]
        warm = set(sources) | {n.index for n in nodes if key in n.inflight}
        if len(warm) >= want:
            return
        free_at = self._free_at
        src = min(sources, key=lambda i: (self._ready.get((i, key), sim.now), i))
        src_ready = max(self._ready.get((src, key), sim.now), sim.now)
        reference = sim.config.copy_model == "reference"
        latency = sim.config.transfer_latency_s
        cold = [i for i in range(sim.n_nodes) if i not in warm]
        cold.sort(key=lambda i: (free_at[i], i))
        for dst in cold[: want - len(warm)]:
            target = nodes[dst]
            missing = len(prefix) - target.cache.hbm_match(prefix)
            if sim.warm(src, dst, prefix) != WARM_OK:
                continue
            self._copies += 1
            copy_s = latency + missing * sim.block_tokens * target.costs.kv_bytes_per_token / (
                target.spec.rdma_bw
            )
            begin = src_ready
            if reference and target.work != IDLE:
                begin = max(begin, target.work_end)
            self._ready[(dst, key)] = begin + copy_s
            if reference:
                free_at[dst] += copy_s

    def _earliest(
        self, sim: Simulator, request: Request, d: int, key: int
    ) -> tuple[int, float, float]:
        """The node with the soonest expected first token, its start and that time."""
        bt = sim.block_tokens
        n_in = request.input_tokens
        cap = n_in - 1
        ready = self._ready
        best = -1
        best_start = best_finish = 0.0
        best_load = 0
        for node in sim.nodes:
            j = node.index
            start = self._free_at[j]
            costs = node.costs
            have = min(node.cache.hbm_match(request.blocks) * bt, cap)
            finish = start + costs.prefill_s(n_in - have, have)
            if d and d * bt > have:
                landing = ready.get((j, key))
                if landing is not None and (key in node.inflight or landing >= sim.now):
                    hit = min(d * bt, cap)
                    finish = min(finish, max(start, landing) + costs.prefill_s(n_in - hit, hit))
            load = node.running + len(node.queue)
            if best < 0 or finish < best_finish or (finish == best_finish and load < best_load):
                best, best_start, best_finish, best_load = j, start, finish, load
        return best, best_start, best_finish
