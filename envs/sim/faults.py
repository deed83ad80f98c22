"""Faults: lost nodes and failed warm copies (the ``SimConfig.fault_*`` options).

All off by default. Losses come from a fixed schedule (``fault_node_loss_s`` /
``fault_node_loss_nodes``) and/or a rate (``fault_node_loss_rate_per_s``, a
Poisson process until the last arrival, the node drawn uniformly among those
up); random draws come from a generator of the faults' own (:func:`fault_rng`),
derived from the seed of the simulator's ``rng`` and ``fault_seed``: each window
and episode (each simulator seed) meets faults of its own, a run is
deterministic under its seeds, and the policies' ``sim.rng`` draws are the same
as without faults. The rules (docs/faults.md):

* **Node loss at t.** The node is *down* (``node.down``): it stops its work
  item, its KV is gone (HBM, RAM and disk), every warm copy from or to it that
  has not landed fails, and it serves nothing. A loss that would take down the
  last node still up is skipped (counted), so requests always have a node.
* **Its requests are re-routed by a fixed rule**, not by the policy: those
  queued, in prefill and decoding, in arrival order, each to the least-loaded
  node up that admits now (not draining or loading weights for an upgrade; any
  node up if none does), ties to the lower index, where they start over. A request whose
  first token was already out keeps that TTFT: its record (``node``, admission,
  hits, reuse, prefill, first token) describes the service that delivered it,
  and only ``finish_s`` is the rerun's (the request's end); the rerun's
  admission and node are in ``RunTotals.reruns``.
* **Routing to a down node** (a policy that does not look at ``node.down``)
  sends the request to the least-loaded node up by the same rule (counted);
  warm copies from or to a down node are refused with ``"node_down"``.
* **Coming back.** After ``fault_node_down_s`` the node is up again, empty. One
  lost while draining for an upgrade switched at the loss, one lost while loading
  its weights had its load ended (``Versions.lost``): both serve at once, as
  does one whose upgrade came while it was down (it switched then).
* **A NIC down** (``fault_nic_down_s`` / ``fault_nic_down_nodes``, for
  ``fault_nic_down_for_s``; ``node.nic_down``): the node keeps serving, but
  its copies that have not landed fail and warm copies from or to it are
  refused with ``"nic_down"`` until it is back.
* **A slow copy** (``fault_copy_slow_prob``, drawn when it is issued) moves its
  bytes ``fault_copy_slowdown`` times slower: under the reference copy model
  its work item on the target lasts latency + slowdown x bytes / bandwidth;
  under the contention model it needs slowdown x its bytes of NIC share. The
  slowdown is unseen until the copy moves: the forecasts (``landing_s``,
  ``_causal_landing_s``, ``copy_queue_s``) price a copy queued on its target or
  waiting for its source at full speed, and count the slowdown only of a copy
  under way: a contention-model copy moving (its bytes as they flow), and, in
  ``_causal_landing_s`` (the observation's node rows, the ``eft`` family), a
  reference-model copy being written now (the rest of its work item on the
  target, its slowdown and the transfer latency included).
* **A failed copy** (``fault_copy_fail_prob``, drawn when it would land): its
  bytes and time were spent but nothing lands. A failed copy's state is
  ``FAILED`` (``sim.copies``); it leaves the target's ``inflight`` at once, and
  a node waiting for it recomputes.
"""

from __future__ import annotations

import bisect
import math
from typing import TYPE_CHECKING

import numpy as np

from envs.sim.errors import ConfigError
from envs.sim.events import FAULT_EVENT
from envs.sim.node import COPY, DECODE, IDLE, PREFILL, SPECULATE
from envs.sim.streams import seed_child
from envs.sim.transfers import ENDED, FAILED, MOVING, QUEUED, WAIT_SOURCE

if TYPE_CHECKING:
    from envs.sim.node import Node
    from envs.sim.request import Request
    from envs.sim.simulator import Simulator
    from envs.sim.speculation import SpeculativeChunk
    from envs.sim.transfers import Copy

_LOSS = 0
_BACK = 1
_NIC_DOWN = 2
_NIC_UP = 3

NODE_DOWN = "node_down"
"""The warm refusal for a copy from or to a down node (only with faults on)."""
NIC_DOWN = "nic_down"
"""The warm refusal for a copy from or to a node whose NIC is down."""
REFUSALS = (NODE_DOWN, NIC_DOWN)


def served(sim: Simulator, t: float) -> bool:
    """Is the run's workload served by ``t`` (every request arrived and finished)? A
    fault, a return or an upgrade scheduled after that happens after the run: it
    changes nothing and is not counted (a loss at 100,000 s stretched the busy
    span the time shares are taken over to 99,985 s and counted one loss)."""
    requests = sim.requests
    if not requests or t < requests[-1].arrival_s:
        return not requests
    finish = sim.records.finish_s
    i, n = sim.finished_upto, len(finish)  # (a cursor: each request is looked at once
    while i < n and finish[i] == finish[i]:  # until it finishes; NaN until then)
        i += 1
    sim.finished_upto = i
    return i == n


MAX_RANDOM_LOSSES = 100_000
"""The most random node losses ``fault_node_loss_rate_per_s`` may draw over a window's
arrivals (the rate times their span): more is a mistyped rate, not a fault model."""

FAULT_STREAM_KEY = 0x6661756C74
"""The spawn-key word ("fault" in ASCII) that sets the faults' stream apart from
the children ``sim.rng.spawn`` would give a policy (numbered 0, 1, ...)."""


def fault_rng(rng: np.random.Generator, fault_seed: int) -> np.random.Generator:
    """The faults' own generator: a child of the seed sequence that made the
    simulator's ``rng``, keyed by ``fault_seed``.

    The fault draws thus follow the simulator's seed, which names the window and
    run (``default_rng([seed, window position])`` in ``experiments.evaluation``, an
    episode's ``sim_seed`` in the envs): two windows or two episodes meet
    independent faults, the same seeds meet the same faults. The child comes from
    the seed, not from draws, so it does not depend on what was drawn from ``rng``
    and leaves its stream as it was: the policies draw what they would without
    faults. Seeded with ``fault_seed`` alone (before 2026-12-05), every window and
    episode met the same faults.
    """
    child = seed_child(rng, FAULT_STREAM_KEY, fault_seed)
    if child is None:
        raise TypeError(
            "Simulator: with faults on, rng must be a Generator made from a seed "
            "(np.random.default_rng(seed)): the faults' draws derive from that seed, "
            f"and this one has none ({rng.bit_generator!r})"
        )
    return np.random.default_rng(child)


class Faults:
    """The fault schedule of one run and what it did (see the module docstring)."""

    def __init__(self, sim: Simulator) -> None:
        config = sim.config
        self.sim = sim
        self.rng = fault_rng(sim.rng, config.fault_seed)
        self.counts = {
            "fault_node_losses": 0,
            "fault_node_losses_skipped": 0,
            "fault_node_recoveries": 0,
            "fault_copies_failed": 0,
            "fault_rerouted_requests": 0,
            "fault_restarted_requests": 0,
            "fault_routed_to_down": 0,
            "fault_nic_downs": 0,
            "fault_copies_slow": 0,
        }
        # request index -> (admission record, node) of the service that delivered its
        # first token
        self._kept: dict[int, tuple[tuple[float, int, int, int, float, int], int]] = {}
        # request -> (when its rerun was admitted, the rerun's node): its record keeps
        # the first service's, and the capacity metrics hold its KV from the rerun's
        self.reruns: dict[int, tuple[float, int]] = {}
        self._schedule("fault_node_loss_nodes", config.fault_node_loss_s, _LOSS)
        self._schedule("fault_nic_down_nodes", config.fault_nic_down_s, _NIC_DOWN)
        # every loss's time and node (-1: drawn when it happens), by time (loss_within)
        losses = sorted(zip(config.fault_node_loss_s, config.fault_node_loss_nodes))
        rate = config.fault_node_loss_rate_per_s
        if rate > 0 and sim.requests:
            end = sim.requests[-1].arrival_s
            if rate * end > MAX_RANDOM_LOSSES:  # (1e9 drew for minutes, then ran out of memory)
                raise ConfigError.about(
                    "sim.fault_node_loss_rate_per_s",
                    f"= {rate:g} would draw about {rate * end:,.0f} node losses over the "
                    f"{end:,.1f} s of arrivals; at most {MAX_RANDOM_LOSSES:,} (a rate in losses "
                    "per second over the whole cluster)",
                )
            t = float(self.rng.exponential(1 / rate))
            while t <= end:
                sim._push(t, FAULT_EVENT, -1, _LOSS)  # -1: drawn when it happens
                losses.append((t, -1))
                t += float(self.rng.exponential(1 / rate))
            losses.sort()
        self._loss_s = [at for at, _ in losses]
        self._loss_node = [j for _, j in losses]

    def loss_within(self, index: int, t: float, end: float) -> bool:
        """May node ``index`` be lost after ``t``, by ``end``? (A scheduled loss of it,
        or a random one, whose node is drawn then.) Decode overshoot does not run a
        node's step past such a loss: the loss comes first."""
        times = self._loss_s
        k = bisect.bisect_right(times, t)
        while k < len(times) and times[k] <= end:
            if self._loss_node[k] in (index, -1):
                return True
            k += 1
        return False

    def _schedule(self, nodes_field: str, times: tuple[float, ...], what: int) -> None:
        """Push a fault schedule's events (``SimConfig.<nodes_field>`` names the nodes)."""
        sim = self.sim
        for t, j in zip(times, getattr(sim.config, nodes_field)):
            sim._push(t, FAULT_EVENT, j, what)

    # ------------------------------------------------------------ events
    def on_event(self, node_index: int, what: int, t: float) -> None:
        """A scheduled fault event: a loss (``node_index`` -1: a random node up) or a
        return; none once the workload is served (:func:`served`)."""
        if served(self.sim, t):
            return
        nodes = self.sim.nodes
        if what == _BACK:
            node = nodes[node_index]
            node.down = False
            self.counts["fault_node_recoveries"] += 1  # (a node lost draining switched then)
            return
        if what == _NIC_DOWN:
            self.nic_down(nodes[node_index], t)
            return
        if what == _NIC_UP:
            node = nodes[node_index]
            node.nic_down -= 1
            return
        if node_index < 0:
            up = [n.index for n in nodes if not n.down]
            node_index = up[int(self.rng.integers(len(up)))]
        self.lose(nodes[node_index], t)

    def lose(self, node: Node, t: float) -> None:
        """``node`` is lost at ``t`` (the rules in the module docstring)."""
        sim = self.sim
        if node.down or sum(not n.down for n in sim.nodes) == 1:
            self.counts["fault_node_losses_skipped"] += 1
            return
        self.counts["fault_node_losses"] += 1
        node.down = True
        j = node.index
        self._fail_copies_of(j, t)
        lost = self._stop(node, t)
        sim._drop_kv(node)
        if sim.versions is not None:  # drained if draining; a load in progress is over
            sim.versions.lost(node, t)
        first_token_s = sim.records.first_token_s
        for request in sorted(lost, key=lambda r: r.index):
            k = request.index
            if not math.isnan(first_token_s[k]):
                self.counts["fault_restarted_requests"] += 1
                self._kept.setdefault(k, (sim.records.admission[k], sim.records.node[k]))
            self.counts["fault_rerouted_requests"] += 1
            sim._route(request, self.least_loaded_up())
        down_s = sim.config.fault_node_down_s
        if math.isfinite(down_s):
            sim._push(t + down_s, FAULT_EVENT, j, _BACK)

    def nic_down(self, node: Node, t: float) -> None:
        """``node``'s NIC is down from ``t`` for ``fault_nic_down_for_s``: its copies
        that have not landed fail; new ones are refused meanwhile."""
        sim = self.sim
        self.counts["fault_nic_downs"] += 1
        node.nic_down += 1  # a count: overlapping outages end one by one
        self._fail_copies_of(node.index, t)
        sim._push(t + sim.config.fault_nic_down_for_s, FAULT_EVENT, node.index, _NIC_UP)

    def _fail_copies_of(self, j: int, t: float) -> None:
        for copy in self.sim.copies:
            if copy.state not in ENDED and (copy.src == j or copy.dst == j):
                self.fail(copy, t)

    def refusal(self, src: Node, dst: Node) -> str | None:
        """Why a warm copy from ``src`` to ``dst`` is refused now, if it is."""
        if src.down or dst.down:
            return NODE_DOWN
        if src.nic_down or dst.nic_down:
            return NIC_DOWN
        return None

    def _stop(self, node: Node, t: float) -> list[Request]:
        """Stop everything on ``node`` at ``t``; the requests it held."""
        lost = list(node.queue)
        node.queue.clear()
        lost.extend(request for _, _, request in node.batch_heap)
        node.batch_heap = []
        if node.work == PREFILL:
            lost.append(node.work_obj)  # type: ignore[arg-type]
        self._cut(node, t)
        node.running = 0
        node.reserved_tokens = 0
        node.decode_n = 0
        node.ctx_tokens = 0
        node.chunk_breaks = []
        node.waiting_for = None
        node.free_s = t
        return lost

    def _cut(self, node: Node, t: float) -> None:
        """End ``node``'s work item at ``t``: its wake-up is void and the time it
        would still have taken is not counted (all of it, for an item dated to start
        after ``t``: a speculative chunk queued behind a decode step's end)."""
        work = node.work
        node.version += 1
        if work != IDLE and node.work_end > t:
            rest = node.work_end - max(t, node.work_start)
            node.busy_s -= rest
            if work in (PREFILL, SPECULATE):
                decode = node.item_decode_s if work == PREFILL else 0.0
                if decode > 0:  # a chunked prefill: decode steps between its chunks
                    # the rest's share of them, in proportion (the steps are spread
                    # over the item; their exact places are not kept)
                    decode *= rest / (node.work_end - node.work_start)
                    node.decode_s = max(node.decode_s - decode, 0.0)
                node.prefill_s = max(node.prefill_s - (rest - decode), 0.0)
                if work == SPECULATE:  # the chunk's compute: what ran of it; not computed
                    chunk: SpeculativeChunk = node.work_obj  # type: ignore[assignment]
                    chunk.compute_s = max(chunk.compute_s - rest, 0.0)
                    chunk.cut = True
            elif work == DECODE:
                node.decode_s = max(node.decode_s - rest, 0.0)
            elif work == COPY:
                node.copy_s -= rest
                node.rdma_busy_s -= rest
                copy: Copy = node.work_obj  # type: ignore[assignment]
                self.sim.nodes[copy.src].rdma_busy_s -= rest
        node.work = IDLE
        node.work_obj = None
        node.work_end = t

    def fail(self, copy: Copy, t: float) -> None:
        """``copy`` fails at ``t`` (its source or target was lost); nothing if it
        has ended already (failed earlier in the same cascade)."""
        if copy.state in ENDED:
            return
        sim = self.sim
        target = sim.nodes[copy.dst]
        state = copy.state
        cut = False
        if state == WAIT_SOURCE:
            sim.nodes[copy.src].waiting_src.remove(copy)
        elif state == QUEUED:
            if copy in target.copy_queue:
                target.copy_queue.remove(copy)
            elif target.work == COPY and target.work_obj is copy:  # being carried out
                self._cut(target, t)
                cut = True
        elif state == MOVING and copy in sim._flows:
            sim._reflow(t)
            sim._flows.remove(copy)
            sim._schedule_flows(t)
        # (a MOVING copy out of the flows has all its bytes: its landing finds it FAILED)
        self._failed(copy, target, t)
        if cut and not target.down and target.work == IDLE:  # (_failed may have woken it)
            sim._advance(target, t)

    def issued(self, copy: Copy) -> None:
        """A warm copy was issued: is it slow (``fault_copy_slow_prob``)?"""
        config = self.sim.config
        p = config.fault_copy_slow_prob
        if p and self.rng.random() < p:
            copy.slowdown = config.fault_copy_slowdown
            self.counts["fault_copies_slow"] += 1

    def lands(self, copy: Copy, t: float) -> bool:
        """Whether ``copy``, due to land at ``t``, does: False if it failed before or
        fails now (``fault_copy_fail_prob``)."""
        if copy.state == FAILED:
            return False
        p = self.sim.config.fault_copy_fail_prob
        if p == 0 or self.rng.random() >= p:
            return True
        self._failed(copy, self.sim.nodes[copy.dst], t)
        return False

    def _failed(self, copy: Copy, target: Node, t: float) -> None:
        self.counts["fault_copies_failed"] += 1
        self.sim._copy_failed(copy, target, t, self.fail)

    # ------------------------------------------------------------ routing
    def least_loaded_up(self) -> Node:
        """The re-routing rule: the least-loaded node up that admits now (not draining
        for an upgrade, not loading its new weights), ties to the lower index; the
        least-loaded node up if none admits."""
        sim = self.sim
        up = [n for n in sim.nodes if not n.down]
        admitting = [n for n in up if not n.draining and not sim._loading(n)]
        return min(admitting or up, key=lambda n: (n.load, n.index))

    def redirect(self) -> Node:
        """Where a request routed to a down node goes instead (counted)."""
        self.counts["fault_routed_to_down"] += 1
        return self.least_loaded_up()

    def first_token(self, request: Request) -> bool:
        """Whether ``request``'s prefill ending now delivers its first token: False
        for a rerun after a node loss (its first token was out; its record goes
        back to the service that delivered it, node included: every field but
        ``finish_s`` describes that one service)."""
        kept = self._kept.pop(request.index, None)
        if kept is None:
            return True
        k = request.index
        records = self.sim.records
        self.reruns[k] = (records.admission[k][0], records.node[k])  # (capacity metrics)
        records.admission[k], records.node[k] = kept
        return False
