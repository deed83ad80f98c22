"""The production routers, as their projects document them:
SGLang's gateway, Dynamo's KV router, llm-d.

Each reads the real HBM prefix cache of every node (a production router keeps
an approximation of it, built from KV events or from what it routed). None of
them copies KV ahead of a burst. Each skips the nodes that are down
(``baselines.routers.up_nodes``: a production router's health checks).

* ``sglang``: the gateway as shipped. If the cluster is imbalanced
  ((max - min) load > ``balance_abs`` and max > ``balance_rel`` x min) route by
  least load; else if the best match rate (matched blocks / prompt blocks, the
  blocks the prompt's tokens fill: :func:`prompt_blocks`) exceeds
  ``cache_threshold``, the best-matching node (ties by load, then at random);
  else least load.
* ``dynamo``: minimise ``overlap_weight`` x prefill blocks still to compute on
  the node (this request's uncached blocks plus those of requests routed there
  that have not produced their first token; one that a lost node's re-routing
  moved counts, with its blocks, on the node it moved to, as Dynamo's request
  migration re-adds it there) + the node's active decode blocks
  (its decode batch's context at the decision, in blocks: the batch's tokens,
  with those of the decode steps ended so far in the segment in progress,
  rounded up once, where counting each sequence's own blocks would add up to
  one a sequence; :func:`envs.sim.forecast.decode_context_tokens`).
  Temperature 0 takes the minimum
  (ties at random); T > 0 samples softmax(-normalised cost / T), costs
  normalised to [0, 1] by their range.
* ``llmd``: maximise a weighted sum of scores in [0, 1]: queue (waiting
  requests, min-max normalised, fewer is better; all 1 when equal), KV-cache
  utilisation (1 - reserved / budget tokens) and prefix match (matched blocks,
  at most the prompt blocks, as dynamo counts them / prompt blocks); weights
  2, 2, 3. Ties at random.
"""

from __future__ import annotations

import math

from baselines.policy import Policy, register
from baselines.routers import least_loaded, pick, up_nodes
from envs.sim.checks import check_range
from envs.sim.floor import reruns
from envs.sim.forecast import decode_context_tokens
from envs.sim.request import Request
from envs.sim.simulator import Simulator
from envs.sim.tokens import blocks_reaching


def prompt_blocks(sim: Simulator, request: Request) -> int:
    """The blocks ``request``'s prompt fills: its tokens over the block size, rounded
    up. A trace may give fewer block ids than that (its tail is then cached
    nowhere), so a match rate over ``len(request.blocks)`` would count the tail
    as matched."""
    return blocks_reaching(request.input_tokens, sim.block_tokens)


@register("sglang")
class SGLangGateway(Policy):
    """SGLang's cache-aware gateway as shipped (balance thresholds and a cache threshold)."""

    def __init__(
        self, balance_abs: float = 64, balance_rel: float = 1.5, cache_threshold: float = 0.3
    ) -> None:
        self.balance_abs = check_range("sglang.balance_abs", balance_abs, 0, finite=True)
        self.balance_rel = check_range("sglang.balance_rel", balance_rel, 1, finite=True)
        self.cache_threshold = check_range("sglang.cache_threshold", cache_threshold, 0, 1)

    def decide(self, sim: Simulator, request: Request) -> int:
        nodes = up_nodes(sim)
        loads = [n.load for n in nodes]
        high = max(loads)
        low = min(loads)
        if high - low > self.balance_abs and high > self.balance_rel * low:
            return least_loaded(sim)
        blocks = request.blocks
        matches = [n.view.hbm_match(blocks) for n in nodes]
        best = max(matches)
        if best / prompt_blocks(sim, request) > self.cache_threshold:
            ties = [k for k, m in enumerate(matches) if m == best]
            if len(ties) > 1:
                fewest = min(loads[k] for k in ties)
                ties = [k for k in ties if loads[k] == fewest]
            return pick(sim, [nodes[k].index for k in ties])
        return least_loaded(sim)


@register("dynamo")
class DynamoKV(Policy):
    """Dynamo's KV router: overlap-weighted prefill blocks + active decode blocks."""

    def __init__(self, overlap_weight: float = 1.0, temperature: float = 0.0) -> None:
        self.overlap_weight = check_range("dynamo.overlap_weight", overlap_weight, 0, finite=True)
        self.temperature = check_range("dynamo.temperature", temperature, 0, finite=True)
        self._pending_blocks: list[int] = []
        self._routed: dict[int, tuple[int, int]] = {}
        self._cursor = 0
        self._moves = False

    def reset(self, sim: Simulator) -> None:
        self._pending_blocks = [0] * sim.n_nodes
        self._routed = {}
        self._cursor = 0
        self._moves = reruns(sim.config)

    def costs(self, sim: Simulator, request: Request) -> list[float]:
        """The cost of routing ``request`` to each node (also syncs the prefill tally)."""
        self._sync(sim)
        bt = sim.block_tokens
        blocks = request.blocks
        n_blocks = prompt_blocks(sim, request)
        weight = self.overlap_weight
        pending = self._pending_blocks
        now = sim.now
        out = []
        for i, node in enumerate(sim.nodes):
            new = n_blocks - min(node.view.hbm_match(blocks), n_blocks)
            decode_blocks = -(-decode_context_tokens(node, now) // bt)
            out.append(weight * (new + pending[i]) + decode_blocks)
        return out

    def decide(self, sim: Simulator, request: Request) -> int:
        all_costs = self.costs(sim, request)
        up = [node.index for node in up_nodes(sim)]
        costs = [all_costs[i] for i in up]
        low = min(costs)
        if self.temperature > 0:
            high = max(costs)
            span = high - low
            if span > 0:
                t = self.temperature
                weights = [math.exp(-(c - low) / span / t) for c in costs]
                draw = sim.rng.random() * sum(weights)
                choice = up[-1]
                for k, w in enumerate(weights):
                    draw -= w
                    if draw < 0:
                        choice = up[k]
                        break
            else:
                choice = pick(sim, up)
        else:
            choice = pick(sim, [i for i, c in zip(up, costs) if c == low])
        n_blocks = prompt_blocks(sim, request)
        node = sim.nodes[choice]
        new = n_blocks - min(node.view.hbm_match(request.blocks), n_blocks)
        self._pending_blocks[choice] += new
        self._routed[request.index] = (choice, new)
        return choice

    def _sync(self, sim: Simulator) -> None:
        """Drop requests that produced their first token from the per-node prefill
        tally; with node losses on, move those re-routed off a lost node
        (``envs.sim.faults``) to the node they are on now."""
        log = sim.first_token_log
        routed = self._routed
        pending = self._pending_blocks
        for k in range(self._cursor, len(log)):
            entry = routed.pop(log[k].index, None)
            if entry is not None:
                pending[entry[0]] -= entry[1]
        self._cursor = len(log)
        if self._moves:
            now_on = sim.records.node
            for index, (node, new) in routed.items():
                moved = int(now_on[index])
                if moved != node:
                    pending[node] -= new
                    pending[moved] += new
                    routed[index] = (moved, new)


@register("llmd")
class LLMD(Policy):
    """llm-d's scheduler: weighted queue, KV-utilisation and prefix-match scorers."""

    def __init__(
        self, queue_weight: float = 2.0, kv_weight: float = 2.0, prefix_weight: float = 3.0
    ) -> None:
        self.queue_weight = check_range("llmd.queue_weight", queue_weight, 0, finite=True)
        self.kv_weight = check_range("llmd.kv_weight", kv_weight, 0, finite=True)
        self.prefix_weight = check_range("llmd.prefix_weight", prefix_weight, 0, finite=True)

    def scores(self, sim: Simulator, request: Request) -> list[float]:
        """The weighted score of each node for ``request`` (higher is better; -inf
        for a node down)."""
        nodes = sim.nodes
        waiting = [len(n.queue) for n in nodes]
        up_waiting = [waiting[n.index] for n in up_nodes(sim)]
        q_low = min(up_waiting)
        q_span = max(up_waiting) - q_low
        blocks = request.blocks
        n_blocks = prompt_blocks(sim, request)
        out = []
        for i, node in enumerate(nodes):
            if node.down:  # never picked
                out.append(-math.inf)
                continue
            queue_score = 1.0 if q_span == 0 else 1.0 - (waiting[i] - q_low) / q_span
            kv_score = 1.0 - min(node.reserved_tokens / node.budget_tokens, 1.0)
            prefix_score = min(node.view.hbm_match(blocks), n_blocks) / n_blocks
            out.append(
                self.queue_weight * queue_score
                + self.kv_weight * kv_score
                + self.prefix_weight * prefix_score
            )
        return out

    def decide(self, sim: Simulator, request: Request) -> int:
        scores = self.scores(sim, request)
        best = max(scores)
        return pick(sim, [i for i, s in enumerate(scores) if s == best])
