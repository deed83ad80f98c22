"""The world's forecast: what the cluster's state says will happen next.

One module answers the questions every part of the project asks about the
future, so the simulator's own choices, the observation encoder, the
baselines and the teacher cannot drift apart:

* load: ``Node.load`` (running + waiting requests), the routers' shared measure;
* has-prefix: :func:`~envs.sim.request.has_prefix`, does a chained block list
  extend a prefix (beside the chained ids it reads);
* reuse: :func:`usable_tokens` (a hit never covers the last prompt token) and
  :func:`reuse_plan` (which cached runs to load, which to recompute);
* copy seconds and landing time: :func:`copy_bytes`, :func:`transfer_s`,
  :func:`copy_s`, :func:`copy_start_s`, :func:`landing_s` (the simulator's
  rule) and :func:`worth_waiting` (wait for a copy in flight rather than
  start now from the node's caches?); :func:`copy_targets` (where a prefix still lacks copies);
* expected first-token time per node: :func:`node_backlog` and
  :func:`first_token_estimates` (the causal estimate the observation shows),
  and :func:`earliest_node` over a policy's per-node clock of queued work
  (:func:`catch_up` keeps it current): ``oracle_warm``'s and the causal
  teacher's choice.

Everything here only reads the world (``catch_up`` writes the caller's own
clock); nothing changes the simulation. The questions policies and the
observation ask read a node's prefix holdings as the router sees them,
``node.view`` (``SimConfig.router_view_delay_s`` late; :mod:`envs.sim.view`);
those the simulator asks for its own physics (:func:`worth_waiting`,
:func:`will_hold`) read the true cache.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from envs.sim.node import COPY, DECODE, IDLE, PREFILL, SPECULATE, Node
from envs.sim.queue_costs import NO_QUEUE, Coming, QueueCosts
from envs.sim.request import has_prefix
from envs.sim.transfers import MOVING, WAIT_SOURCE, Copy

if TYPE_CHECKING:
    from envs.sim.config import SimConfig
    from envs.sim.request import Request
    from envs.sim.timing import NodeCosts

INF = math.inf


class ClusterView(Protocol):
    """What the forecast reads of a running simulation (a ``Simulator`` is one)."""

    @property
    def nodes(self) -> list[Node]: ...
    @property
    def block_tokens(self) -> int: ...
    @property
    def now(self) -> float: ...
    @property
    def config(self) -> SimConfig: ...


# ---------------------------------------------------------------- prefixes
def prefix_of(request: Request) -> tuple[int, ...]:
    """The part of a request worth sharing: its prompt blocks but the last
    (which usually holds the request's own suffix)."""
    blocks = request.blocks
    return blocks[:-1] if len(blocks) > 1 else blocks


def prefix_key(request: Request) -> int:
    """The chained id of :func:`prefix_of` (without building the tuple)."""
    blocks = request.blocks
    return blocks[-2] if len(blocks) > 1 else blocks[-1]


def computes_prefix(node: Node, depth: int, key: int) -> bool:
    """Is ``node`` prefilling, or queued to prefill, a request with this prefix?"""
    request = node.computing
    if request is not None and has_prefix(request.blocks, depth, key):
        return True
    return any(has_prefix(r.blocks, depth, key) for r in node.queue)


def will_hold(node: Node, blocks: tuple[int, ...]) -> bool:
    """Will ``node`` hold the prefix ``blocks`` without a new copy: a request there
    computes it, or a copy in flight to it carries it?"""
    depth = len(blocks)
    key = blocks[-1]
    if computes_prefix(node, depth, key):
        return True
    return any(has_prefix(c.blocks, depth, key) for c in node.inflight.values())


# ---------------------------------------------------------------- reuse
def usable_tokens(hit_blocks: int, block_tokens: int, input_tokens: int) -> int:
    """Tokens of a ``hit_blocks``-block hit a request can reuse: the last prompt
    token is always computed (it makes the first output token)."""
    return min(hit_blocks * block_tokens, input_tokens - 1)


def reuse_plan(
    costs: NodeCosts,
    hbm: int,
    ram: int,
    disk: int,
    block_tokens: int,
    input_tokens: int,
    latency_s: float,
    hbm_hit_load: bool,
) -> tuple[int, int, int, float, int]:
    """How a request reuses its cached run of ``hbm`` / ``ram`` / ``disk`` blocks:
    (HBM, RAM, disk tokens reused, reuse seconds, blocks used).

    Each slower tier's run is loaded unless recomputing it is cheaper; once a run
    is recomputed, everything after it is too (tiers only get slower).
    Recomputing t tokens after b costs ``prefill_s(t, b)``: their FLOPs and, with
    attention FLOPs, their own attention rows (the tokens after them attend to
    them whether they were loaded or recomputed)."""
    cap = input_tokens - 1
    hbm_t = min(hbm * block_tokens, cap)
    ram_t = min(ram * block_tokens, cap - hbm_t)
    disk_t = min(disk * block_tokens, cap - hbm_t - ram_t)
    reuse_s = hbm_t * costs.load_hbm_s if hbm_hit_load else 0.0
    used_blocks = hbm
    if ram_t == 0 or ram_t * costs.load_ram_s + latency_s < costs.prefill_s(ram_t, hbm_t):
        if ram_t:
            reuse_s += ram_t * costs.load_ram_s + latency_s
            used_blocks += ram
        if disk_t and disk_t * costs.load_disk_s + latency_s < costs.prefill_s(
            disk_t, hbm_t + ram_t
        ):
            reuse_s += disk_t * costs.load_disk_s + latency_s
            used_blocks += disk
        else:
            disk_t = 0
    else:
        ram_t = disk_t = 0
    return hbm_t, ram_t, disk_t, reuse_s, used_blocks


# ---------------------------------------------------------------- copies
def copy_bytes(missing_blocks: int, block_tokens: int, target: Node) -> float:
    """Bytes of a copy of ``missing_blocks`` blocks to ``target``."""
    return missing_blocks * block_tokens * target.costs.kv_bytes_per_token


def work_left_s(node: Node, now: float) -> float:
    """Seconds until ``node``'s current prefill, copy or speculative chunk ends; 0
    when it is decoding (a decode segment is cut at the next step for a prefill or
    a copy); when it is idle, until ``node.free_s``, before which it starts nothing
    (new weights loading after an upgrade; under decode overshoot, a step run past
    an arrival), else 0. The one rule for a node's current work left: its backlog
    starts from it (:func:`queue_forecast`), and a copy to it waits for it, queued
    or being written (:func:`_causal_landing_s`)."""
    work = node.work
    if work in (PREFILL, COPY, SPECULATE):
        return max(node.work_end - now, 0.0)
    return max(node.free_s - now, 0.0) if work == IDLE else 0.0


def transfer_s(n_bytes: float, target: Node) -> float:
    """Seconds to move ``n_bytes`` into ``target`` over its RDMA link alone."""
    return n_bytes / target.spec.rdma_bw


def copy_s(n_bytes: float, target: Node, latency_s: float) -> float:
    """A copy's duration on the target's timeline (the reference copy model):
    the transfer latency plus the bytes over the target's RDMA bandwidth."""
    return latency_s + transfer_s(n_bytes, target)


def queued_copy_s(copy: Copy, target: Node, latency_s: float) -> float:
    """A queued copy's work item on ``target`` (the reference copy model), as the
    simulator runs it: its :func:`copy_s`, a slow copy's bytes counted
    ``copy.slowdown`` times. Not a forecast: a router cannot see the slowdown
    before the copy moves (:func:`copy_queue_s`)."""
    return copy_s(copy.bytes * copy.slowdown, target, latency_s)


def copy_queue_s(node: Node, latency_s: float) -> float:
    """Seconds of the copies queued on ``node``, which run before its queued
    prefills, as a router can tell: each at full speed (a slow copy's slowdown is
    unseen until it moves, docs/faults.md); :func:`node_backlog` leaves them out."""
    return sum(copy_s(copy.bytes, node, latency_s) for copy in node.copy_queue)


def landing_s(copy: Copy, nodes: Sequence[Node], t: float, latency_s: float) -> float:
    """When a copy in flight will land, as far as the state at ``t`` tells: a
    contention-model copy moving, when its bytes are through plus the latency; one
    waiting for its source's prefill of the prefix, that prefill's end, the latency
    and its bytes at full speed; ``inf`` if its source KV has no known time to exist
    yet.

    Its one caller, :func:`worth_waiting` (the simulator's ``_should_wait``, both
    cores), asks as a node starts its next work item with its copy queue empty, so
    no copy to the node is then queued or being written on its timeline (the
    reference copy model). Such a copy (or one ended) is refused with a
    RuntimeError, a bug in the caller, not answered: its landing waits for its
    target's current work and the copies before it, which :func:`_causal_landing_s`
    estimates."""
    state = copy.state
    if state == MOVING:  # (its bytes as of the flows' last event, not t)
        return copy.bytes_end_s + latency_s
    if state != WAIT_SOURCE:  # (a bug in the caller: see above)
        raise RuntimeError(
            f"landing_s: copy {copy.id} to node {copy.dst} is neither moving nor waiting "
            f"for its source (state {state}: queued or being written on its target, or ended)"
        )
    source = nodes[copy.src]
    if source.work == PREFILL:
        r: Request = source.work_obj  # type: ignore[assignment]
        if has_prefix(r.blocks, len(copy.blocks), copy.key):
            return source.work_end + latency_s + transfer_s(copy.bytes, nodes[copy.dst])
    return INF


def worth_waiting(
    node: Node,
    request: Request,
    t: float,
    nodes: Sequence[Node],
    block_tokens: int,
    latency_s: float,
    hbm_hit_load: bool,
) -> Copy | None:
    """The copy in flight to ``node`` that ``request`` should wait for rather than
    start now: the deepest one carrying more of its prefix than the node holds in
    HBM, if waiting for it and then reusing it ends the prefill sooner than
    starting now from the node's caches as they are (its host RAM and disk runs
    loaded or recomputed as :func:`reuse_plan` says); else None."""
    blocks = request.blocks
    have = node.cache.hbm_match(blocks)
    best: Copy | None = None
    for copy in node.inflight.values():
        depth = len(copy.blocks)
        if (
            have < depth
            and has_prefix(blocks, depth, copy.key)
            and (best is None or depth > len(best.blocks))
        ):
            best = copy
    if best is None:
        return None
    land = landing_s(best, nodes, t, latency_s)
    if land == INF:
        return None
    hbm, ram, disk = node.cache.match(blocks)
    cached = hbm + ram + disk
    depth = len(best.blocks)
    ram_after = max(hbm + ram - depth, 0)  # the copy brings its blocks into HBM
    disk_after = max(cached - max(depth, hbm + ram), 0)
    costs = node.costs
    n_in = request.input_tokens

    def prefill_s(hbm: int, ram: int, disk: int) -> float:
        hbm_t, ram_t, disk_t, reuse_s, _ = reuse_plan(
            costs, hbm, ram, disk, block_tokens, n_in, latency_s, hbm_hit_load
        )
        hit = hbm_t + ram_t + disk_t
        return reuse_s + costs.prefill_s(n_in - hit, hit)

    now_s = prefill_s(hbm, ram, disk)
    if land - t + prefill_s(depth, ram_after, disk_after) >= now_s:
        return None
    return best


# ---------------------------------------------------------------- first tokens
HitMemo = dict[int, QueueCosts]
"""node -> what its queued requests cost (:class:`~envs.sim.queue_costs.QueueCosts`),
kept while the node's cache is unchanged and its queue only grows."""
Sources = dict[int, Coming]
"""node -> its :func:`queue_forecast` as a copy's source (depth 1), within one estimate."""


def _causal_landing_s(
    sim: ClusterView,
    copy: Copy,
    now: float,
    depth: int,
    memo: HitMemo | None = None,
    sources: Sources | None = None,
) -> float:
    """Seconds from now until a warm copy in flight lands (a causal estimate): a
    contention-model copy moving, the transfer latency after its bytes are through
    (its slowdown counted); a reference-model copy being written now, the rest of
    its work item on the target (its slowdown and the transfer latency counted);
    one queued on its target (the reference copy model), after the target's
    current work and the copies queued before it, each (and it) the transfer
    latency and its bytes over the target's bandwidth, as its work item there will
    be; a copy waiting for its source, once the source has computed the prefix,
    then the transfer latency and its bytes over the target's bandwidth (under
    the reference copy model the copy then starts only after the target's work
    item in progress and the copies queued before it: left out, so this is early
    for a busy target; docs/baselines.md); when the
    source's own forecast does not have the prefix coming (a copy asked at
    ``depth`` 1 or more, or a prefix shorter than the key its computation is
    known by), the source's :func:`work_left_s`, whatever it is doing, and one
    recent mean prefill per request queued there stand for it. A slow copy's
    slowdown is left out but for a copy under way (moving or being written).
    ``sources`` caches the sources' own estimates within one observation."""
    state = copy.state
    latency = sim.config.transfer_latency_s
    if state == MOVING and copy.rate > 0:  # (it lands the latency after its last byte)
        return max(copy.bytes_end_s + latency - now, 0.0)
    target = sim.nodes[copy.dst]
    transfer = transfer_s(copy.bytes, target)
    if state != WAIT_SOURCE:
        if target.work == COPY and target.work_obj is copy:  # being written now
            return work_left_s(target, now)
        ahead = 0.0  # queued on its target (the reference copy model): after the
        for queued in target.copy_queue:  # target's current work and the copies before it
            if queued is copy:  # (each work item starts with the latency)
                return work_left_s(target, now) + ahead + latency + transfer
            ahead += copy_s(queued.bytes, target, latency)
        return transfer
    source = sim.nodes[copy.src]
    if depth == 0:
        known = sources.get(copy.src) if sources is not None else None
        if known is None:
            known = queue_forecast(sim, source, now, depth + 1, memo)
            if sources is not None:
                sources[copy.src] = known
        computed = known.get(copy.key)
        if computed is not None:
            return computed + latency + transfer
    wait = work_left_s(source, now)  # (whatever the source is doing)
    return wait + source.prefill_ewma_s * len(source.queue) + latency + transfer


def waits_for_source(node: Node) -> bool:
    """Has ``node`` a copy in flight still waiting for its source's prefill? (Only
    then does its :func:`node_backlog` depend on ``depth``.)"""
    return any(copy.state == WAIT_SOURCE for copy in node.inflight.values())


def node_backlog(
    sim: ClusterView,
    node: Node,
    now: float,
    depth: int = 0,
    memo: HitMemo | None = None,
    sources: Sources | None = None,
) -> tuple[float, Coming]:
    """Seconds until ``node`` has finished its current prefill or copy and prefilled
    its queue (each queued request costed with what it will find cached, and not
    before that has arrived), and the prefix keys that will be on the node, with
    the seconds until they are (in flight, being computed, queued). A causal
    estimate: decode and admission limits are ignored. ``memo`` keeps queued
    requests' costs across calls (see :data:`HitMemo`)."""
    coming = queue_forecast(sim, node, now, depth, memo, sources)
    return coming.total_s, coming


def queue_forecast(
    sim: ClusterView,
    node: Node,
    now: float,
    depth: int = 0,
    memo: HitMemo | None = None,
    sources: Sources | None = None,
) -> Coming:
    """:func:`node_backlog`'s prefix keys, its seconds as ``total_s``: the queue's
    costs are only added up when they are asked for (a copy waiting for this node
    as its source often asks for a prefix already under way)."""
    inflight = node.inflight
    coming = (
        {
            key: _causal_landing_s(sim, copy, now, depth, memo, sources)
            for key, copy in inflight.items()
        }
        if inflight
        else {}
    )
    # a decode segment is cut at the next step when a request arrives (prefill priority)
    backlog = work_left_s(node, now)
    if node.work == PREFILL:  # node.computing
        coming[prefix_key(node.work_obj)] = backlog  # type: ignore[arg-type]
    queue = node.queue
    if not queue:  # what fold gives on an empty queue, without costing one
        return Coming(coming, NO_QUEUE, backlog, [backlog])
    version = node.view.version
    costs = memo.get(node.index) if memo is not None else None
    # (an entry of the compiled twin's, envs.sim._native.forecast, is rebuilt as its own)
    if type(costs) is not QueueCosts or not costs.matches(version, queue):
        costs = QueueCosts(version)
        if memo is not None:
            memo[node.index] = costs
    if len(queue) != len(costs.requests):
        costs.extend(node, queue, sim.block_tokens)
    return Coming(coming, costs, backlog)


def decode_step_left_s(node: Node, now: float) -> float:
    """Seconds until the decode step ``node`` is running at ``now`` ends (0 when it
    is not decoding): a request admitted now starts its prefill no sooner, since an
    admission cuts a decode segment at a step boundary, never inside a step. The
    estimates leave it out (a decoding node counts as free) unless asked with
    ``step_wait`` (:func:`estimates_with_hits`; the observation's option). Under decode
    overshoot (``SimConfig.decode_overshoot``) a step run past an arrival ends
    later than now (``node.free_s``), and the segment after it starts then: the
    wait runs to then. A node not decoding waits for no step: its wait until
    ``free_s`` (idle, or in the prefill, copy or chunk it starts then) is in its
    :func:`work_left_s`. A lower bound on the wait: a queue head held back by the
    batch or KV limits, or copies queued on the node, can make it longer."""
    if node.work != DECODE:
        return 0.0
    costs = node.costs
    batch, context = node.seg_batch, node.seg_ctx
    steps = costs.decode_steps_by(now - node.seg_start, batch, context)
    end = node.seg_start + costs.decode_s(min(steps, node.seg_steps), batch, context)
    return max(min(end, node.work_end) - now, 0.0)


def decode_context_tokens(node: Node, now: float) -> int:
    """KV tokens ``node``'s decode batch holds at ``now``: ``node.ctx_tokens`` plus
    a token a sequence for each step of the decode segment in progress that has
    ended by ``now``. The simulator brings ``ctx_tokens`` up to date only when a
    segment ends (it is the batch's context at the segment's start), so a
    decision taken inside a segment would read it up to a segment's steps
    late. The steps run between the chunks of a chunked prefill
    (``SimConfig.chunked_prefill_tokens``) count from that prefill's end."""
    if node.work != DECODE:
        return node.ctx_tokens
    costs = node.costs
    batch, context = node.seg_batch, node.seg_ctx
    elapsed = now - node.seg_start
    steps = costs.decode_steps_by(elapsed, batch, context)  # the boundary at or after now
    if steps and costs.decode_s(steps, batch, context) > elapsed:
        steps -= 1  # the step in progress has not ended
    return node.ctx_tokens + batch * min(steps, node.seg_steps)


def first_token_estimates(
    sim: ClusterView, request: Request, memo: HitMemo | None = None, step_wait: bool = False
) -> list[tuple[float, float]]:
    """(backlog, expected first-token time) in seconds from now, per node, for
    ``request`` arriving now: the causal cost model of the observation; with
    ``step_wait``, each plus the node's :func:`decode_step_left_s` (0 but for a
    decoding node: an idle node's wait until ``free_s`` is in its backlog,
    :func:`work_left_s`)."""
    estimates = estimates_with_hits(sim, request, memo, step_wait)
    return [(backlog, first) for backlog, first, _ in estimates]


def estimates_with_hits(
    sim: ClusterView, request: Request, memo: HitMemo | None, step_wait: bool = False
) -> list[tuple[float, float, int]]:
    """:func:`first_token_estimates` plus ``request``'s HBM hit (blocks) per node.

    A node draining for an upgrade (``node.draining``) is not eligible: its
    backlog and first token are ``inf``. The simulator queues a request routed to
    it, but admits nothing until the node has drained (its running sequences
    finished, its copies in flight landed), switched (dropping its KV) and loaded
    its new weights (``upgrade_downtime_s``); the request then prefills cold. Its
    hit is still what its HBM holds now."""
    now = sim.now
    bt = sim.block_tokens
    blocks = request.blocks
    n_in = request.input_tokens
    key = prefix_key(request)
    depth = len(blocks) - 1 or 1
    out = []
    sources: Sources = {}
    for node in sim.nodes:
        if node.draining:  # not eligible: see the docstring
            out.append((INF, INF, node.view.hbm_match(blocks)))
            continue
        # a node no copy of its own waits on has the same backlog as a copy's source
        shared = not node.inflight or not waits_for_source(node)
        coming = sources.get(node.index) if shared else None
        if coming is None:
            coming = queue_forecast(sim, node, now, 0, memo, sources)
            if shared:
                sources[node.index] = coming
        backlog = coming.total_s
        hit = node.view.hbm_match(blocks)
        cold = usable_tokens(hit, bt, n_in)
        prefill_s = node.costs.prefill_s
        first = backlog + prefill_s(n_in - cold, cold)
        arriving = coming.get(key) if depth > hit else None
        if arriving is not None:
            # recompute rather than wait when that is sooner (the simulator also
            # weighs the node's host RAM / disk copy, which this estimate leaves out)
            have = usable_tokens(depth, bt, n_in)
            first = min(max(backlog, arriving) + prefill_s(n_in - have, have), first)
        if step_wait:
            left = decode_step_left_s(node, now)
            backlog, first = backlog + left, first + left
        out.append((backlog, first, hit))
    return out


def catch_up(free_at: list[float], sim: ClusterView) -> None:
    """Bring a per-node clock of queued work (absolute seconds) up to ``sim.now``: a
    node with nothing to do, or whose clock has fallen behind, is free now, or, if
    it is idle until ``node.free_s`` (new weights loading after an upgrade; under
    decode overshoot, a step run past an arrival), then, as :func:`work_left_s`
    counts it. Such a node with work waiting (requests routed, or copies queued,
    while it could not start them: while it drained or loaded) is free no sooner
    than after that work too, from ``free_s``: its backlog by the forecast
    (:func:`queue_forecast`, each queued request costed with what it will find
    cached) plus its queued copies (:func:`copy_queue_s`)."""
    now = sim.now
    for node in sim.nodes:
        j = node.index
        if node.work != IDLE:
            floor = now
        elif node.free_s > now and (node.queue or node.copy_queue):
            floor = (
                now
                + queue_forecast(sim, node, now).total_s
                + copy_queue_s(node, sim.config.transfer_latency_s)
            )
        else:
            floor = max(node.free_s, now)
        if (node.work == IDLE and not node.queue and not node.copy_queue) or free_at[j] < floor:
            free_at[j] = floor


def copy_targets(
    nodes: Sequence[Node], key: int, holders: Sequence[int], want: int, free_at: Sequence[float]
) -> list[int]:
    """The nodes to copy the prefix ``key`` to so that ``want`` nodes hold it or
    will (``holders`` and the nodes with a copy of it in flight count), soonest
    free first by the clock ``free_at`` (ties to the lower index), never a node
    down; [] when enough already do."""
    warm = set(holders) | {n.index for n in nodes if key in n.inflight}
    if len(warm) >= want:
        return []
    cold = [i for i in range(len(nodes)) if i not in warm and not nodes[i].down]
    cold.sort(key=lambda i: (free_at[i], i))
    return cold[: want - len(warm)]


def copy_start_s(target: Node, ready_s: float, reference: bool) -> float:
    """When a copy whose source KV exists at ``ready_s`` starts: then, or under the
    reference copy model (the copy is a work item on the target's timeline) no
    sooner than the target's current work item ends, or, the target idle, than
    ``target.free_s`` (before which it starts nothing: :func:`work_left_s`)."""
    if reference:
        return max(ready_s, target.work_end if target.work != IDLE else target.free_s)
    return ready_s


def earliest_node(
    sim: ClusterView,
    request: Request,
    free_at: Sequence[float],
    depth: int,
    landing: Callable[[Node], float | None],
) -> tuple[int, float, float, bool]:
    """The node where ``request``'s first token is expected soonest, from a
    per-node clock of queued work (``free_at``, absolute seconds): (node, start,
    first token, whether the request would compute its ``depth``-block shared
    prefix there). ``landing(node)`` is when the prefix is expected on a node
    that lacks it (a copy or a computation under way), or None; a node whose
    prefix lands in time counts it as a hit. Ties go to the lower load, then the
    lower index. A node down is never the answer."""
    bt = sim.block_tokens
    n_in = request.input_tokens
    blocks = request.blocks
    best = -1
    best_start = best_finish = 0.0
    best_load = 0
    best_computes = False
    for node in sim.nodes:
        if node.down:  # lost (fault options): a router knows
            continue
        j = node.index
        start = free_at[j]
        prefill_s = node.costs.prefill_s
        matched = node.view.hbm_match(blocks)
        have = usable_tokens(matched, bt, n_in)
        finish = start + prefill_s(n_in - have, have)
        computes = depth > matched
        if computes:
            landed = landing(node)
            if landed is not None:
                hit = usable_tokens(depth, bt, n_in)
                wait = max(start, landed) + prefill_s(n_in - hit, hit)
                if wait <= finish:
                    finish = wait
                    computes = False
        load = node.load
        if best < 0 or finish < best_finish or (finish == best_finish and load < best_load):
            best, best_start, best_finish, best_load = j, start, finish, load
            best_computes = computes
    return best, best_start, best_finish, best_computes
