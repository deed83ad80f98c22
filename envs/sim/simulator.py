"""The discrete-event cluster simulator.

Arrivals come from the workload in time order; every other event (a node
finishing a work item, a copy's bytes arriving under the contention model)
sits in a heap ordered by ``(time, sequence)``, so ties resolve the same way
every run. Events at the same time as an arrival are handled first: KV that
exists at time t is visible to a request arriving at t.

Each arrival is a decision point. A policy answers with a node index, and
before answering may act on the caches through :meth:`Simulator.warm` and
:meth:`Simulator.evict` (and the cache lifecycle's ``pin`` / ``unpin``,
``demote`` / ``promote``: ``envs.sim.lifecycle``). Two ways to drive it:

* ``sim.run(policy)``: the fast path; calls ``policy.reset(sim)`` (when it has
  one), then ``policy.decide(sim, request)`` at each arrival.
* ``sim.decisions()``: a generator that yields each request and receives the
  node index through ``send`` (what a Gymnasium environment uses).

Off by default, a stale router view (policies read ``node.view``,
:mod:`envs.sim.view`) and faults (:mod:`envs.sim.faults`) hook into the loop.

This module is the readable reference. Its per-event methods (the loop,
routing, admission, decode segments, completions) have a compiled twin,
``envs/sim/_native/core.pyx``: :data:`CompiledSimulator` is that twin's typed
base class followed by this :class:`Simulator`, so every other method is this
module's own; ``Simulator(...)`` builds it when the compiled core runs
(``envs.sim.native``). Change the two together; tests/sim/test_native_sim.py
demands the same runs of both.

The simulator never imports a policy, an environment or a config library.
"""

from __future__ import annotations

import heapq
import math
import os
from collections.abc import Callable, Generator
from typing import Any, Protocol

import numpy as np

from envs.sim import native, rare_gc
from envs.sim.cache import PrefixCache
from envs.sim.checks import check_int
from envs.sim.config import ClusterSpec, SimConfig
from envs.sim.errors import ConfigError, SimulationError, echoed, policy_label, raise_for_policy
from envs.sim.events import (
    FAULT_EVENT,
    FLOW_EVENT,
    LAND_EVENT,
    LIFE_EVENT,
    UPGRADE_EVENT,
    WAKE_EVENT,
)
from envs.sim.faults import REFUSALS, Faults
from envs.sim.forecast import (
    computes_prefix,
    copy_bytes,
    queued_copy_s,
    reuse_plan,
    will_hold,
    worth_waiting,
)
from envs.sim.lifecycle import CacheLifecycle
from envs.sim.metrics import Records, RunTotals
from envs.sim.node import COPY, DECODE, IDLE, PREFILL, SPECULATE, Node
from envs.sim.request import Request, Workload, has_prefix, shared_blocks
from envs.sim.speculation import SPECULATE_OK, Speculation, SpeculativeChunk
from envs.sim.tenancy import VERSION_REFUSALS, Versions
from envs.sim.timing import NodeCosts
from envs.sim.transfers import FAILED, WAIT_SOURCE, Copy, CopyMachinery
from envs.sim.view import Views, pristine_copy

INF = math.inf

WARM_OK = "ok"
WARM_REFUSALS = (
    "same_node",
    "bad_prefix",
    "target_has_prefix",
    "already_in_flight",
    "no_room",
    "source_lacks_prefix",
)
TARGET_HOLDS = ("target_has_prefix", "already_in_flight")
"""The refusals that mean the target holds the prefix, or has it coming."""


class Router(Protocol):
    """Anything that answers a decision point with a node index."""

    def decide(self, sim: Simulator, request: Request) -> int | None:
        """The node for ``request``, or None if the policy routed it with ``sim.route``."""
        ...


class Simulator(CacheLifecycle, CopyMachinery):
    """A cluster serving one workload window. See the module docstring.

    Args:
        cluster: the model and the replicas.
        workload: the requests (chained block ids) and their block size.
        config: simulator settings (causal KV, copy model, realism options).
        rng: the numpy Generator policies draw from (``sim.rng``); the
            simulator itself is deterministic. With faults on, the faults' own
            stream derives from its seed (``envs.sim.faults.fault_rng``).
        core: ``"compiled"``, ``"python"`` or None (the process's choice,
            :data:`envs.sim.native.CORE`): see :data:`CompiledSimulator`. Both
            give the same run.
    """

    core = "python"
    """Which core this simulator runs: ``"python"`` (this class, the reference) or
    ``"compiled"`` (:data:`CompiledSimulator`)."""
    _node_type: type = Node  # the class of its nodes

    def __new__(cls, *args: Any, core: str | None = None, **kwargs: Any) -> Simulator:
        """``Simulator(...)`` builds the core ``core`` names, by default the one
        :mod:`envs.sim.native` chose for the process (:data:`native.CORE`)."""
        if core not in (None, "python", "compiled"):
            raise ValueError(
                f"Simulator: core must be 'compiled', 'python' or None, got {echoed(core)}"
            )
        if cls is Simulator and (args or kwargs):  # (unpickling passes no arguments)
            chosen = native.CORE if core is None else core
            if chosen == "compiled":
                if CompiledSimulator is None:
                    raise ValueError(
                        "Simulator: core='compiled' is not available in this process "
                        f"(envs.sim.native.CORE is {native.CORE!r})"
                    )
                return CompiledSimulator.__new__(CompiledSimulator)  # type: ignore[no-any-return]
        return super().__new__(cls)

    def __init__(
        self,
        cluster: ClusterSpec,
        workload: Workload,
        config: SimConfig | None = None,
        rng: np.random.Generator | None = None,
        *,
        core: str | None = None,
    ) -> None:
        if core is not None and core != self.core:
            # a subclass runs the core it derives from (the reference, unless it derives
            # from CompiledSimulator): asking for the other one is an error, not a no-op
            raise ValueError(
                f"{type(self).__name__}: core={core!r}, but this class runs the "
                f"{self.core!r} core (only Simulator itself chooses; derive from "
                "CompiledSimulator for the compiled one)"
            )
        _check_parts(cluster, workload, config, rng)
        self.config = config = config or SimConfig()
        self.cluster = cluster
        self.workload = workload
        self.requests = workload.requests
        self.block_tokens = bt = workload.block_tokens
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.now = 0.0
        self.nodes: list[Node] = []
        for i, spec in enumerate(cluster.nodes):
            label = f"cluster.nodes[{i}]"
            costs = NodeCosts.under(config, spec, cluster.model, label)
            if costs.budget_tokens < bt:
                raise ConfigError(
                    f"{label} ({spec.name}) serving {cluster.model.name} has a KV budget of "
                    f"{costs.budget_tokens} tokens, less than one {bt}-token block"
                )
            ram_blocks = config.host_ram_bytes / (costs.kv_bytes_per_token * bt)
            cache = native.PrefixCache(  # compiled, or the reference (envs/sim/native.py)
                ram_capacity_blocks=ram_blocks,
                disk_tier=config.disk_tier,
                touch_used_only=config.lru_unit == "block",
                replicas_first=config.reclaim_order == "replicas_first",
            )
            node = self._node_type(i, spec, costs, cache)
            node.cache_beside_reservations = config.cache_capacity == "headroom"
            self.nodes.append(node)
        self.n_nodes = len(self.nodes)
        config.check_cluster(self.n_nodes)
        # settings the hot path reads at every event, read once (SimConfig is frozen)
        self._hbm_hit_load = bool(config.hbm_hit_load)
        self._one_token_step = config.one_token_decode_step
        self._max_batch = config.max_batch
        self._causal_kv = config.causal_kv
        self._latency_s = config.transfer_latency_s
        self._chunk_tokens = config.chunked_prefill_tokens
        # what cache_aware counts as a node's match (SimConfig.match_tiers)
        self.match_with_ram = config.match_tiers == "hbm_ram"
        smallest = min(self.nodes, key=lambda n: n.budget_tokens)
        for r in self.requests:
            if r.input_tokens + r.output_tokens > smallest.budget_tokens:
                raise SimulationError(
                    f"request {r.request_id!r} needs {r.input_tokens + r.output_tokens} KV tokens "
                    f"(input_tokens + output_tokens) but cluster.nodes[{smallest.index}] "
                    f"({smallest.spec.name}) has a budget of {smallest.budget_tokens} "
                    "(every node must fit every request: a policy may route it to any node)"
                )
        self.records = Records(len(self.requests))
        # names this run, whatever object holds it: a policy's reset records it
        # (baselines.policy.Policy.reset_run_id), so the route envs tell a policy reset
        # on their episode's simulator from one reset on an earlier episode's; a copy
        # (pickled, or an env's episode replayed after a pickle) keeps it
        self.run_id = int.from_bytes(os.urandom(8), "little")
        self.copies: list[Copy] = []
        self.warm_refused: dict[str, int] = dict.fromkeys(WARM_REFUSALS, 0)
        # model versions and upgrades (SimConfig.model_versions, upgrade_at_s); None: none
        self.versions = Versions.of(config, self.n_nodes)
        if self.versions is not None:
            self.warm_refused.update(dict.fromkeys(VERSION_REFUSALS, 0))
        self.evict_actions = 0
        self.evicted_by_action_blocks = 0
        # when a list, route/warm/evict calls are appended to it as (name, *args),
        # so a driver can replay a policy's actions (see envs.route.policy_action)
        self.journal: list[tuple[Any, ...]] | None = None
        self.displaced_by_copies_blocks = 0
        self.copies_lost = 0  # copies that found their KV gone on landing (CopyMachinery._lose)
        # speculative prefill: made by the first speculate() call (None: never used)
        self.speculation: Speculation | None = None
        self._heap: list[tuple[float, int, int, object, int]] = []
        self._seq = 0
        self._fresh_id = 0
        self._flows: list[Copy] = []
        self._flow_clock = 0.0
        self._flow_version = 0
        self._order = 0
        self._started = False
        self._who = "policy"  # who answers, in errors: the policy's name under run()
        self._pending: Request | None = None  # the decision's request, until routed
        self._deciding: Request | None = None  # the decision's request
        self.done = False
        # every request before this index has finished (faults.served's cursor)
        self.finished_upto = 0
        # Requests in the order their first token came out; readers (e.g. a
        # Gymnasium env crediting TTFT as it becomes known) keep their own cursor.
        self.first_token_log: list[Request] = []
        # stale router view and faults (envs/sim/view.py, envs/sim/faults.py): off by default
        self._faults: Faults | None = None
        # empty caches to restart from when a node loses its KV (_drop_kv)
        self._blank: list[PrefixCache] = []
        if config.faults_on or self.versions is not None:
            self._blank = [pristine_copy(node.cache) for node in self.nodes]
        if config.faults_on:
            self._faults = Faults(self)
            self.warm_refused.update(dict.fromkeys(REFUSALS, 0))
        self._views: Views | None = None
        if config.router_view_delay_s > 0:
            self._views = Views(self.nodes, config.router_view_delay_s, lambda: self.now)
        self._asked = -1  # the node route() was asked for (a down node sends elsewhere)
        if self.versions is not None:
            self.versions.schedule(self)
        self._init_lifecycle()  # pins, demote / promote, replica TTLs (envs.sim.lifecycle)

    # ================================================================== driving
    def run(self, policy: Router) -> Records:
        """Serve the whole workload, asking ``policy.decide(sim, request)`` at each
        arrival; first ``policy.reset(sim)`` when it has one (a policy reads the
        run's block size and nodes there: BTB turns its Y from tokens into blocks).

        An exception the policy's own code raises in either is a
        :class:`~envs.sim.errors.PolicyFailure` naming the policy and the request,
        raised from it (``errors.raise_for_policy``); a call the simulator refuses
        (``warm`` to a node that does not exist) stays a ValueError, which names them
        too."""
        self._who = policy_label(policy)
        reset = getattr(policy, "reset", None)
        if reset is not None:
            try:
                reset(self)
            except Exception as error:
                raise_for_policy(error, self._who, "reset")
        try:
            for _ in self._drive(policy.decide):
                pass  # the policy answers inside the loop: nothing is yielded
        except Exception as error:
            request, self._deciding = self._deciding, None  # (a later call is no decision)
            if request is None:  # the simulator's own error, not raised in a decision
                raise
            raise_for_policy(error, self._who, "decide", request.request_id)
        return self.records

    def decisions(self) -> Generator[Request, int | None, None]:
        """Yield each arriving request; ``send`` the chosen node index back."""
        return self._drive(None)

    def _drive(
        self, decide: Callable[[Simulator, Request], int | None] | None
    ) -> Generator[Request, int | None, None]:
        if self._started:
            raise RuntimeError("a Simulator runs its workload once; build a new one")
        self._started = True
        # The cache's segments point at their parents, so the cyclic garbage
        # collector would scan them again and again; run it rarely meanwhile.
        with rare_gc.RARE_GC:
            yield from self._loop(decide)
            self.done = True
            # the totals now (they read the nodes as the run left them); the records'
            # arrays and summary when first read (Records.finalize)
            self.records.finalize(self.requests, self.totals())

    def _loop(
        self, decide: Callable[[Simulator, Request], int | None] | None
    ) -> Generator[Request, int | None, None]:
        """The event loop. With ``decide`` the policy is called directly (the fast
        path of :meth:`run`); without, each decision point is yielded."""
        requests = self.requests
        n = len(requests)
        heap = self._heap
        pop = heapq.heappop
        nodes = self.nodes
        n_nodes = self.n_nodes
        overshoot = self.config.decode_overshoot
        views = self._views
        i = 0
        while True:
            t_arrival = requests[i].arrival_s if i < n else INF
            while heap and heap[0][0] <= t_arrival:
                t, _, kind, obj, version = pop(heap)
                self.now = t
                if kind == WAKE_EVENT:
                    node: Node = obj  # type: ignore[assignment]
                    if node.version == version:
                        self._on_wake(node, t)
                elif kind == FLOW_EVENT:
                    if version == self._flow_version:
                        self._on_flow(t)
                elif kind == LAND_EVENT:
                    self._land(obj, t)  # type: ignore[arg-type]
                elif kind == UPGRADE_EVENT:
                    self.versions.start_drain(self, obj, t)  # type: ignore[union-attr,arg-type]
                elif kind == FAULT_EVENT:
                    self._faults.on_event(obj, version, t)  # type: ignore[union-attr,arg-type]
                elif kind == LIFE_EVENT:
                    self._on_life(obj, t)  # type: ignore[arg-type]
            if i >= n:
                break
            self.now = t_arrival
            if views is not None:
                views.sync(t_arrival)
            if overshoot:
                for node in nodes:
                    if node.work == DECODE:
                        self._overshoot(node, t_arrival)
            request = requests[i]
            self._pending = self._deciding = request
            choice = decide(self, request) if decide is not None else (yield request)
            self._deciding = None
            if self._pending is None:  # routed during the decision by route()
                routed = self._asked
                if choice is not None and choice != routed:
                    raise ValueError(
                        f"request {request.request_id!r} was routed to node {routed} with "
                        f"route(); the answer {echoed(choice)} differs"
                    )
            else:
                self._pending = None
                if choice.__class__ is not int:
                    choice = _as_index(choice, n_nodes, self._who)
                elif not 0 <= choice < n_nodes:
                    raise ValueError(
                        f"{self._who} routed request {request.request_id!r} to node {choice}; "
                        f"valid nodes are 0..{n_nodes - 1}"
                    )
                self._route(request, nodes[choice])
            i += 1

    # ================================================================== actions
    def route(self, node: int) -> None:
        """Route the request of the current decision point now, before answering.

        For step-by-step drivers that act after routing (e.g. warm a prefix from
        the node that will compute it); the decision is then answered with
        ``send(None)`` (or with the same node). Routing again to the same node
        does nothing; to another node is an error.
        """
        request = self._deciding
        if request is None:
            raise RuntimeError("route() is only valid during a decision point")
        if not (node.__class__ is int and 0 <= node < self.n_nodes):
            node = _node_index("route: node", node, self.n_nodes)
        if self._pending is None:
            routed = self._asked
            if routed != node:
                raise ValueError(
                    f"route: request {request.request_id!r} is already routed to node {routed}"
                )
            return
        if self.journal is not None:
            self.journal.append(("route", int(node)))
        self._pending = None
        self._asked = int(node)
        self._route(request, self.nodes[int(node)])

    def routed_node(self) -> int | None:
        """At a decision point: the node its request was already routed to with
        :meth:`route`, or None while it awaits its answer (or outside one). If
        that node was down the request went elsewhere (``records.node``)."""
        request = self._deciding
        if request is None or self._pending is not None:
            return None
        return self._asked

    def warm(self, src: int, dst: int, blocks: tuple[int, ...]) -> str:
        """Copy the prefix ``blocks`` from node ``src`` to node ``dst`` over RDMA.

        The copy starts once the source's KV exists (now if it holds the prefix in
        HBM, else when the request computing or queued to compute it there
        finishes its prefill) and only the blocks the target lacks are sent.
        Returns ``"ok"`` or the reason it was refused (one of ``WARM_REFUSALS``).
        """
        nodes = self.nodes
        n_nodes = self.n_nodes
        if not (
            src.__class__ is int
            and dst.__class__ is int
            and 0 <= src < n_nodes
            and 0 <= dst < n_nodes
        ):  # the slow path only when it is not two plain ints in range
            src = _node_index("warm: src", src, n_nodes)
            dst = _node_index("warm: dst", dst, n_nodes)
        if self.journal is not None:
            self.journal.append(("warm", int(src), int(dst), tuple(blocks)))
        refused = self.warm_refused
        if src == dst:
            refused["same_node"] += 1
            return "same_node"
        if self._faults is not None:
            reason = self._faults.refusal(nodes[src], nodes[dst])
            if reason is not None:
                refused[reason] += 1
                return reason
        if self.versions is not None:
            reason = self.versions.warm_refusal(src, dst, self.now)
            if reason is not None:
                refused[reason] += 1
                return reason
        if not blocks:
            refused["bad_prefix"] += 1
            return "bad_prefix"
        depth = len(blocks)
        key = blocks[-1]
        target = nodes[dst]
        if key in target.inflight:
            refused["already_in_flight"] += 1
            return "already_in_flight"
        missing = depth - target.cache.hbm_match(blocks)
        if missing <= 0:
            refused["target_has_prefix"] += 1
            return "target_has_prefix"
        if missing > target.copy_room_blocks(self.block_tokens):
            refused["no_room"] += 1
            return "no_room"
        source = nodes[src]
        ready = source.cache.hbm_match(blocks) >= depth
        if ready and self._causal_kv and self._loading_prefix(source, blocks):
            ready = False  # brought up at admission, still on its way from RAM / disk
        if not ready and not will_hold(source, blocks):
            refused["source_lacks_prefix"] += 1
            return "source_lacks_prefix"
        n_bytes = copy_bytes(missing, self.block_tokens, target)
        copy = Copy(len(self.copies), src, dst, tuple(blocks), missing, n_bytes, self.now)
        self.copies.append(copy)
        target.inflight[key] = copy
        if self._faults is not None:
            self._faults.issued(copy)
        if ready:
            self._start_copy(copy, self.now)
        else:
            source.waiting_src.append(copy)
        return WARM_OK

    def _loading_prefix(self, node: Node, blocks: tuple[int, ...]) -> bool:
        """Is ``node`` still loading part of the prefix ``blocks`` from host RAM or
        disk for the request it prefills? Admission brings a loaded run up into HBM
        at once; under causal KV the run exists there only when that prefill ends,
        so a copy from it waits for the end, as a copy of a prefix being computed
        does (or, if the request's prompt does not hold the whole prefix, a copy
        having landed the rest, is refused: nothing would release it)."""
        request = node.computing
        if request is None:
            return False
        _, hbm_t, ram_t, disk_t, _, _ = self.records.admission[request.index]
        if not (ram_t or disk_t):
            return False
        shared = shared_blocks(request.blocks, blocks)
        return shared * self.block_tokens > hbm_t

    def evict(self, node: int, blocks: tuple[int, ...], keep_blocks: int = 0) -> int:
        """Move ``blocks``' cached HBM path on ``node`` below depth ``keep_blocks``
        (and what hangs below it) to host RAM, at once; pinned blocks stay
        (:meth:`demote` takes the host link's time). Returns the blocks moved."""
        if not (node.__class__ is int and 0 <= node < self.n_nodes):
            node = _node_index("evict: node", node, self.n_nodes)
        if not (keep_blocks.__class__ is int and keep_blocks >= 0):
            check_int("evict: keep_blocks", keep_blocks, 0)
        if self.journal is not None:
            self.journal.append(("evict", int(node), tuple(blocks), int(keep_blocks)))
        moved = self.nodes[node].cache.evict_prefix(blocks, keep_blocks)
        self.evict_actions += 1
        self.evicted_by_action_blocks += moved
        return moved

    def _node_arg(self, what: str, node: object) -> int:
        if node.__class__ is int and 0 <= node < self.n_nodes:  # type: ignore[operator]
            return node  # type: ignore[return-value]
        return _node_index(what, node, self.n_nodes)

    def speculate(self, node: int, blocks: tuple[int, ...], tokens: int | None = None) -> str:
        """Have ``node`` compute the prefix ``blocks`` (its first ``tokens`` tokens,
        rounded down to whole blocks) on idle compute, in chunks, at the lowest
        priority (rules: ``envs.sim.speculation``). Returns ``"ok"`` or the reason it
        was refused (one of ``SPECULATE_REFUSALS``)."""
        if not (node.__class__ is int and 0 <= node < self.n_nodes):
            node = _node_index("speculate: node", node, self.n_nodes)
        if tokens is not None and not (_is_integer(tokens) and tokens >= 0):
            raise ValueError(f"speculate: tokens must be an integer >= 0, got {echoed(tokens)}")
        if self.journal is not None:
            self.journal.append(("speculate", int(node), tuple(blocks), tokens))
        speculation = self.speculation
        if speculation is None:
            speculation = self.speculation = Speculation(
                self.n_nodes,
                self.block_tokens,
                self.config.speculative_chunk_tokens,
                self.config.causal_kv,
            )
        target = self.nodes[node]
        now = self.now
        answer = speculation.submit(target, blocks, tokens, now)
        if answer == SPECULATE_OK and target.work == IDLE:
            self._start_speculation(target, now if target.free_s <= now else target.free_s)
        return answer

    # ================================================================== views
    def loads(self) -> list[int]:
        """Running plus waiting requests per node."""
        return [n.load for n in self.nodes]

    def hbm_hits(self, blocks: tuple[int, ...]) -> list[int]:
        """Leading blocks of ``blocks`` in each node's HBM, as the router sees it
        (``node.view``: ``SimConfig.router_view_delay_s`` late)."""
        return [n.view.hbm_match(blocks) for n in self.nodes]

    def holders(self, blocks: tuple[int, ...]) -> tuple[list[int], list[int]]:
        """Nodes holding the whole prefix in HBM (as the router sees it), and nodes
        with it in flight."""
        key = blocks[-1]
        depth = len(blocks)
        resident = [n.index for n in self.nodes if n.view.hbm_match(blocks) >= depth]
        flying = [n.index for n in self.nodes if key in n.inflight]
        return resident, flying

    def down_nodes(self) -> list[int]:
        """Nodes lost and not back yet (``SimConfig`` fault options)."""
        return [n.index for n in self.nodes if n.down]

    def totals(self) -> RunTotals:
        """What the engine counted so far, besides the per-request records (the
        metrics' input)."""
        nodes = self.nodes
        used_hbm: set[int] = set()
        used_any: set[int] = set()
        for node in nodes:
            used_hbm |= node.cache.used_copies_hbm
            used_any |= node.cache.used_copies_any
        return RunTotals(
            copies=tuple(self.copies),
            used_copies_hbm=frozenset(used_hbm),
            used_copies_any=frozenset(used_any),
            warm_refused=dict(self.warm_refused),
            displaced_by_copies_blocks=self.displaced_by_copies_blocks,
            copies_lost=self.copies_lost,
            evict_actions=self.evict_actions,
            evicted_by_action_blocks=self.evicted_by_action_blocks,
            busy_s=[n.busy_s for n in nodes],
            prefill_s=[n.prefill_s for n in nodes],
            decode_s=[n.decode_s for n in nodes],
            copy_s=[n.copy_s for n in nodes],
            rdma_busy_s=[n.rdma_busy_s for n in nodes],
            budget_tokens=[n.budget_tokens for n in nodes],
            max_batch=self.config.max_batch,
            last_work_end_s=max((n.work_end for n in nodes if n.busy_s > 0), default=-math.inf),
            faults=dict(self._faults.counts) if self._faults is not None else {},
            reruns=dict(self._faults.reruns) if self._faults is not None else {},
            versions=self.versions.totals() if self.versions is not None else None,
            cache_life=self.lifecycle_totals(),
            **(self.speculation.totals() if self.speculation is not None else {}),
        )

    # ================================================================== internals
    def _drop_kv(self, node: Node) -> None:
        """Empty ``node``'s cache in every tier (a node loss, a model upgrade). What
        its copies achieved and what it evicted stay counted, and the cache's
        version moves on so that nothing keyed by it takes the empty cache for
        the old one."""
        old = node.cache
        fresh = pristine_copy(self._blank[node.index])
        fresh.used_copies_hbm |= old.used_copies_hbm
        fresh.used_copies_any |= old.used_copies_any
        fresh.evicted_hbm_blocks = old.evicted_hbm_blocks
        fresh.copy_hit_blocks = old.copy_hit_blocks
        fresh.version = old.version + 1
        node.cache = fresh
        # its pins, host moves and queued speculations go with its KV
        node.pinned_tokens = 0
        self._drop_moves(node)
        if self.speculation is not None:
            self.speculation.jobs[node.index].clear()
        if self._views is not None:
            self._views.replaced(node)
        else:
            node.view = fresh

    def _push(self, t: float, kind: int, obj: object, version: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, kind, obj, version))

    def _route(self, request: Request, node: Node) -> None:
        if node.down:
            node = self._faults.redirect()  # type: ignore[union-attr]
        self.records.node[request.index] = node.index
        queue = node.queue
        queue.append(request)
        if node.work == IDLE:
            now = self.now
            self._advance(node, now if node.free_s <= now else node.free_s)
        elif node.work == DECODE and len(queue) == 1 and self._admissible(node, request):
            self._interrupt(node, self.now)

    def _admissible(self, node: Node, request: Request) -> bool:
        return (
            node.running < self._max_batch
            and node.reserved_tokens
            + node.pinned_tokens
            + request.input_tokens
            + request.output_tokens
            <= node.budget_tokens
        )

    def _advance(self, node: Node, t: float) -> None:
        """The node is free at ``t``: start its next work item, if any (no sooner than
        ``node.free_s``, the end of a decode step run past an arrival: decode overshoot).
        A node loading new weights after an upgrade starts nothing before they are
        in: the wake then advances it, from the caches as they are then."""
        if node.free_s > self.now and self._loading(node):  # (no call in the common case)
            return
        if t < node.free_s:
            t = node.free_s
        config = self.config
        if node.copy_queue:
            copy = node.copy_queue.popleft()
            duration = queued_copy_s(copy, node, config.transfer_latency_s)
            copy.start_s = t
            node.work = COPY
            node.work_obj = copy
            self._begin(node, t, t + duration)
            node.copy_s += duration
            node.busy_s += duration
            node.rdma_busy_s += duration
            self.nodes[copy.src].rdma_busy_s += duration
            return
        queue = node.queue
        if queue and node.waiting_for is None and not node.draining:
            request = queue[0]
            if self._admissible(node, request):
                if node.inflight and self._should_wait(node, request, t):
                    if node.decode_n:
                        self._start_decode(node, t)
                    else:
                        node.work = IDLE
                    return
                queue.popleft()
                self._admit(node, request, t)
                return
            if node.pinned_tokens and not node.running:  # pins never deadlock admission
                self._yield_pins(node, request)
                self._advance(node, t)
                return
        if node.decode_n:
            self._start_decode(node, t)
        elif self.speculation is None or not self._start_speculation(node, t):
            node.work = IDLE
            if node.draining:
                self._drained(node, t)

    def _copy_failed(
        self, copy: Copy, target: Node, t: float, fail: Callable[[Copy, float], None]
    ) -> None:
        copy.state = FAILED
        if target.inflight.get(copy.key) is copy:
            del target.inflight[copy.key]
        if target.waiting_for is copy:
            target.waiting_for = None
            if not target.down:
                self._wake(target, t)
        for waiting in self._stranded():  # what only this copy would have brought
            fail(waiting, t)
        if target.draining and not target.down:  # its last copy in flight may be gone
            self._drained(target, t)

    def _stranded(self) -> list[Copy]:
        """Copies waiting for a source that will never hold their prefix: no request
        there computes it and no copy that will land there brings it, where a copy
        waiting in turn counts only if it can start itself (``will_hold`` counts any
        copy in flight, so two copies waiting on each other keep each other)."""
        waiting = [copy for node in self.nodes for copy in node.waiting_src]
        can: set[int] = set()
        grew = bool(waiting)
        while grew:
            grew = False
            for copy in waiting:
                if copy.id in can:
                    continue
                source = self.nodes[copy.src]
                depth, key = len(copy.blocks), copy.key
                if computes_prefix(source, depth, key) or any(
                    has_prefix(other.blocks, depth, key)
                    and (other.state != WAIT_SOURCE or other.id in can)
                    for other in source.inflight.values()
                ):
                    can.add(copy.id)
                    grew = True
        return [copy for copy in waiting if copy.id not in can]

    def _drained(self, node: Node, t: float) -> None:
        """``node`` drains for an upgrade: switch it if nothing is left (envs.sim.tenancy)."""
        self.versions.try_switch(self, node, t)  # type: ignore[union-attr]

    def _loading(self, node: Node) -> bool:
        """Is ``node`` loading new weights after an upgrade now? (A wake as they are
        in advances it; ``free_s`` first: the common case reads no dict.)"""
        now = self.now
        return node.free_s > now and self.versions is not None and self.versions.loading(node, now)

    def _start_speculation(self, node: Node, t: float) -> bool:
        """The node has nothing else to do: start its next speculative chunk, if any
        (not while it loads new weights: the wake as they are in starts it, after its
        queue)."""
        if node.queue or node.copy_queue or node.draining or self._loading(node):
            return False
        chunk = self.speculation.next_chunk(node, t)  # type: ignore[union-attr]
        if chunk is None:
            return False
        node.work = SPECULATE
        node.work_obj = chunk  # type: ignore[assignment]
        node.busy_s += chunk.compute_s
        node.prefill_s += chunk.compute_s
        self._begin(node, t, t + chunk.compute_s)
        return True

    def _begin(self, node: Node, t: float, end: float) -> None:
        node.work_start = t
        node.work_end = end
        version = node.version = node.version + 1
        seq = self._seq = self._seq + 1
        heapq.heappush(self._heap, (end, seq, WAKE_EVENT, node, version))

    def _should_wait(self, node: Node, request: Request, t: float) -> bool:
        """Wait for a warm copy in flight to this node rather than start now?"""
        best = worth_waiting(
            node, request, t, self.nodes, self.block_tokens, self._latency_s, self._hbm_hit_load
        )
        if best is None:
            return False
        node.waiting_for = best
        return True

    def _admit(self, node: Node, request: Request, t: float) -> None:
        bt = self.block_tokens
        costs = node.costs
        cache = node.cache
        blocks = request.blocks
        n_in = request.input_tokens
        node.running += 1
        node.reserved_tokens += n_in + request.output_tokens
        hbm, ram, disk = cache.match_touch(blocks, t)
        hbm_t, ram_t, disk_t, reuse_s, used_blocks = reuse_plan(
            costs, hbm, ram, disk, bt, n_in, self._latency_s, self._hbm_hit_load
        )
        hit = hbm_t + ram_t + disk_t
        if self._promotions_in_flight and hit > hbm_t:
            ram_t, disk_t, reuse_s, used_blocks = self._promoted_reuse(
                node, request, t, hbm, hbm_t, ram_t, disk_t, reuse_s, used_blocks
            )
            hit = hbm_t + ram_t + disk_t
        if used_blocks > hbm:  # bring the loaded RAM / disk runs up (HBM is touched)
            cache.use(blocks, used_blocks, t)
        new_tokens = n_in - hit
        prefill_s = costs.prefill_s(new_tokens, hit)
        chunk = self._chunk_tokens
        node.seg_steps = 0
        chunked = chunk and node.decode_n and new_tokens > chunk
        if chunked:
            decode_s, break_times = self._plan_chunks(node, t + reuse_s, new_tokens, hit, chunk)
        self.records.admission[request.index] = (t, hbm_t, ram_t, disk_t, reuse_s, new_tokens)
        cache.evict_to(node.cache_capacity_blocks(bt))
        if not self._causal_kv:
            self._insert_prompt(node, request, t)
        node.work = PREFILL
        node.work_obj = request
        compute_s = reuse_s + prefill_s
        node.prefill_s += compute_s
        node.prefill_ewma_s += 0.2 * (compute_s - node.prefill_ewma_s)
        if not chunked:  # the common case: the prefill alone
            node.item_decode_s = 0.0
            node.busy_s += compute_s
            self._begin(node, t, t + compute_s)
            return
        duration = compute_s + decode_s
        node.item_decode_s = decode_s
        node.decode_s += decode_s
        node.busy_s += duration
        self._begin(node, t, t + duration)
        for break_s in break_times:
            self._push(break_s, WAKE_EVENT, node, node.version)

    def _plan_chunks(
        self, node: Node, start: float, new_tokens: int, cached_tokens: int, chunk: int
    ) -> tuple[float, tuple[float, ...]]:
        """Plan a prefill of ``new_tokens`` in chunks of ``chunk`` beside the
        decoding batch: one decode step of the batch after every chunk but the
        last. Nothing joins the batch meanwhile (the node is busy), so the plan
        is exact. A sequence whose last token comes out at one of those steps
        finishes when that step ends (a break in the prefill, an event of its
        own); the batch then runs smaller. Sets ``node.chunk_breaks`` (the steps
        before each break, last break first) and ``node.seg_steps`` (the steps
        after the last break); returns the seconds of decode and the breaks'
        times."""
        costs = node.costs
        steps = (new_tokens - 1) // chunk
        heap = node.batch_heap
        last = node.step + steps
        if heap[0][0] > last:  # nothing finishes during the prefill
            node.seg_steps = steps
            return costs.decode_s(steps, node.decode_n, node.ctx_tokens), ()
        freed: dict[int, tuple[int, int]] = {}  # finish step -> (sequences, KV tokens)
        for finish, _, request in heap:
            if finish <= last:
                n, kv = freed.get(finish, (0, 0))
                kv += request.input_tokens + (request.output_tokens - 1 or 1)
                freed[finish] = (n + 1, kv)
        batch = node.decode_n
        ctx = node.ctx_tokens
        done = 0
        decode_s = 0.0
        breaks: list[int] = []
        times: list[float] = []
        for finish in sorted(freed):
            ahead = finish - node.step
            decode_s += costs.decode_s(ahead - done, batch, ctx)
            ctx += batch * (ahead - done)
            n, kv = freed[finish]
            batch -= n
            ctx -= kv
            breaks.append(ahead - done)
            times.append(start + costs.prefill_s(ahead * chunk, cached_tokens) + decode_s)
            done = ahead
        rest = steps - done if batch else 0
        if rest:
            decode_s += costs.decode_s(rest, batch, ctx)
        breaks.reverse()
        node.chunk_breaks = breaks
        node.seg_steps = rest
        return decode_s, tuple(times)

    def _insert_prompt(self, node: Node, request: Request, t: float) -> None:
        cache = node.cache
        cache.insert(request.blocks, t)
        cache.evict_to(node.cache_capacity_blocks(self.block_tokens))
        if node.waiting_src:
            self._release_sources(node, request.blocks, t)

    def _on_wake(self, node: Node, t: float) -> None:
        work = node.work
        if work == PREFILL:
            if node.chunk_breaks:  # a decode step between chunks ended a sequence
                self._advance_batch(node, node.chunk_breaks.pop(), t)
                return
            request: Request = node.work_obj  # type: ignore[assignment]
            if self._faults is None or self._faults.first_token(request):
                self.records.first_token_s[request.index] = t
                self.first_token_log.append(request)
            if node.seg_steps:
                self._advance_batch(node, node.seg_steps, t)
            if request.output_tokens > 1 or self._one_token_step:
                if self._causal_kv:
                    self._insert_prompt(node, request, t)
                order = self._order = self._order + 1
                heapq.heappush(
                    node.batch_heap, (node.step + (request.output_tokens - 1 or 1), order, request)
                )
                node.decode_n += 1
                node.ctx_tokens += request.input_tokens
            else:
                self._complete(node, request, t)
        elif work == DECODE:
            self._advance_batch(node, node.seg_steps, t)
        elif work == COPY:
            self._land(node.work_obj, t)  # type: ignore[arg-type]
        elif work == SPECULATE:
            chunk: SpeculativeChunk = node.work_obj  # type: ignore[assignment]
            blocks = self.speculation.finish_chunk(node, chunk, t)  # type: ignore[union-attr]
            if node.waiting_src:
                self._release_sources(node, blocks, t)
        node.work = IDLE
        node.work_obj = None
        self._advance(node, t)

    def _start_decode(self, node: Node, t: float) -> None:
        steps = node.batch_heap[0][0] - node.step
        duration = node.costs.decode_s(steps, node.decode_n, node.ctx_tokens)
        node.work = DECODE
        node.seg_start = t
        node.seg_steps = steps
        node.seg_batch = node.decode_n
        node.seg_ctx = node.ctx_tokens
        node.decode_s += duration
        node.busy_s += duration
        self._begin(node, t, t + duration)

    def _interrupt(self, node: Node, t: float) -> None:
        """Cut the decode segment in progress at the first step boundary >= t."""
        costs = node.costs
        b = node.seg_batch
        steps = costs.decode_steps_by(t - node.seg_start, b, node.seg_ctx)
        if steps >= node.seg_steps:
            return
        old = costs.decode_s(node.seg_steps, b, node.seg_ctx)
        new = costs.decode_s(steps, b, node.seg_ctx)
        node.decode_s -= old - new
        node.busy_s -= old - new
        node.seg_steps = steps
        self._begin(node, node.seg_start, node.seg_start + new)
        node.work_start = node.seg_start

    def _overshoot(self, node: Node, t: float) -> None:
        """``SimConfig.decode_overshoot``: if the decode step in progress at ``t`` is
        the segment's last, end it now (at its own end time), so the decision at
        ``t`` sees the node after the step."""
        last_step_start = node.seg_start + node.costs.decode_s(
            node.seg_steps - 1, node.seg_batch, node.seg_ctx
        )
        end = node.work_end
        if last_step_start <= t < end:
            versions = self.versions
            if versions is not None and versions.due_within(node.index, t, end):
                return  # the upgrade comes within the step: it drains first
            faults = self._faults
            if faults is not None and faults.loss_within(node.index, t, end):
                return  # so may a loss: it comes first
            node.version += 1  # the wake in the heap is now stale
            node.free_s = end
            self._on_wake(node, end)

    def _advance_batch(self, node: Node, steps: int, t: float) -> None:
        node.step += steps
        node.ctx_tokens += node.decode_n * steps
        heap = node.batch_heap
        step = node.step
        while heap and heap[0][0] <= step:
            _, _, request = heapq.heappop(heap)
            node.decode_n -= 1
            node.ctx_tokens -= request.input_tokens + (request.output_tokens - 1 or 1)
            self._complete(node, request, t)

    def _complete(self, node: Node, request: Request, t: float) -> None:
        self.records.finish_s[request.index] = t
        node.running -= 1
        node.reserved_tokens -= request.input_tokens + request.output_tokens
        bt = self.block_tokens
        extra = -(-(request.input_tokens + request.output_tokens) // bt) - len(request.blocks)
        if extra > 0:
            fresh = self._fresh_id
            self._fresh_id = fresh - extra
            node.cache.insert(request.blocks, t, tail=range(fresh - 1, fresh - 1 - extra, -1))
        else:
            node.cache.insert(request.blocks, t)
        if node.cache_beside_reservations:
            node.cache.evict_to((node.budget_tokens - node.reserved_tokens) // bt)
        else:
            node.cache.evict_to(node.budget_tokens // bt)
        if node.waiting_src:
            self._release_sources(node, request.blocks, t)


def _compiled_twin() -> type[Simulator] | None:
    """The compiled simulator class when the compiled core runs (envs/sim/native.py)."""
    if native.CORE != "compiled":
        return None
    base = native.compiled_core().SimCore

    class CompiledSimulator(base, Simulator):  # type: ignore[misc,valid-type]
        """:class:`Simulator` with the compiled hot path (``envs/sim/_native/core.pyx``):
        its typed per-event methods and nodes replace the reference's; everything
        else is the reference's own code."""

        core = "compiled"
        _node_type = native.compiled_core().Node

    CompiledSimulator.__qualname__ = "CompiledSimulator"  # pickles by this module's name
    return CompiledSimulator


CompiledSimulator = _compiled_twin()
""":class:`Simulator` with the compiled core, or None when the reference runs
(``BTB_GYM_PURE_PYTHON=1``, or not built). ``Simulator(...)`` builds one by
default when it exists; ``Simulator(..., core="python")`` the reference event
loop and nodes (with the process's :data:`envs.sim.native.PrefixCache`). A
simulator pickled with the compiled core loads only where it runs too."""


def _node_index(what: str, value: object, n_nodes: int) -> int:
    """``value`` as a node index (an int or numpy integer, not a bool, in range), or
    ValueError naming ``what``: the slow path of the actions' argument checks."""
    if _is_integer(value) and 0 <= value < n_nodes:  # type: ignore[operator]
        return int(value)  # type: ignore[call-overload]
    raise ValueError(f"{what} must be a node index in 0..{n_nodes - 1}, got {echoed(value)}")


def _is_integer(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check_parts(cluster: object, workload: object, config: object, rng: object) -> None:
    """A TypeError naming the argument of the wrong kind (a setup's name for the
    cluster, a dict for the config, a seed for the generator), before it fails
    somewhere deep with an AttributeError."""
    none = type(None)
    wanted = (
        ("cluster", cluster, ClusterSpec, "ClusterSpec", "envs.sim.setup_cluster(name) builds one"),
        ("workload", workload, Workload, "Workload", "Workload(name, block_tokens, requests)"),
        ("config", config, (SimConfig, none), "SimConfig or None", "SimConfig(**fields)"),
        (
            "rng",
            rng,
            (np.random.Generator, none),
            "Generator or None",
            "np.random.default_rng(seed)",
        ),
    )
    for name, value, kind, shown, hint in wanted:
        if not isinstance(value, kind):
            raise TypeError(f"Simulator: {name} must be a {shown}, got {echoed(value)} ({hint})")


def _as_index(choice: object, n_nodes: int, who: str = "policy") -> int:
    if isinstance(choice, bool) or getattr(choice, "dtype", None) == np.bool_:
        # int(True) is 1: not a node index (np.bool_ and boolean arrays have that dtype)
        raise ValueError(f"{who} must answer with a node index, got {echoed(choice)}")
    try:
        index = int(choice)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise ValueError(f"{who} must answer with a node index, got {echoed(choice)}") from None
    if index != choice or not 0 <= index < n_nodes:
        raise ValueError(f"{who} answered {echoed(choice)}; valid nodes are 0..{n_nodes - 1}")
    return index


__all__ = ["WAIT_SOURCE", "WARM_OK", "WARM_REFUSALS", "Router", "Simulator"]
