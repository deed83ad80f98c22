"""A causal teacher for behavioural cloning: ``oracle_warm``'s mechanics without its
clairvoyance.

``oracle_warm`` knows which prefixes will be reused. :class:`CausalTeacher`
only sees the past: a request's prefix (its prompt blocks but the last, as the
observation encoder defines it) counts as *recurring* once it has arrived
``x`` times within ``z`` seconds, and only then is it warmed, onto every node
(up to ``max_nodes``), from the node that holds it or is computing it. Routing
is the oracle's: the node where the first token is expected soonest, from a
per-node clock of queued prefill work, counting a copy in flight as a hit once
it is expected to land. Every step it takes uses only the past and the
current cluster state, so its decisions are labels a causal agent can learn.

Its routing asks the world's forecast (:func:`envs.sim.forecast.earliest_node`,
the one ``oracle_warm`` asks too) and its "recurring" test is BTB's X-in-Z
window (:class:`baselines.window.ArrivalWindow`). Its warming keeps rules of
its own, so the agents cloned from it do not move when the baseline's do:
it copies from where the prefix is or is being computed, to every node it can,
without the oracle's check that a node would compute the prefix sooner itself.
"""

from __future__ import annotations

from baselines.policy import Policy
from baselines.window import ArrivalWindow
from envs.sim.checks import check_int, is_number
from envs.sim.forecast import (
    catch_up,
    copy_bytes,
    copy_s,
    copy_start_s,
    copy_targets,
    earliest_node,
    first_token_estimates,
    prefix_of,
)
from envs.sim.node import Node
from envs.sim.request import Request
from envs.sim.simulator import WARM_OK, Simulator
from envs.sim.tokens import blocks_reaching


class CausalTeacher(Policy):
    """Earliest-first-token routing plus warming of recurring prefixes (causal)."""

    name = "causal_teacher"

    def __init__(
        self,
        x: int = 2,
        z: float = 10.0,
        min_prefix_tokens: int = 4096,
        max_nodes: int | None = None,
        routing: str = "clock",
    ) -> None:
        if routing not in ("clock", "backlog"):
            raise ValueError(f"causal_teacher.routing must be clock or backlog, got {routing!r}")
        self.routing = routing
        for name, value in (("min_prefix_tokens", min_prefix_tokens), ("max_nodes", max_nodes)):
            if value is None and name == "max_nodes":
                continue
            check_int(f"causal_teacher.{name}", value, 1)
        self.min_prefix_tokens = min_prefix_tokens
        self._min_prefix_blocks = 1
        self.max_nodes = max_nodes
        self._free_at: list[float] = []
        self._ready: dict[tuple[int, int], float] = {}
        self._computer: dict[int, tuple[int, Request]] = {}
        self._copies = 0
        self._max_nodes = 0
        check_int("causal_teacher.x", x, 1)
        if not is_number(z) or not z > 0:
            raise ValueError(f"causal_teacher.z must be > 0 seconds, got {z!r}")
        self.x = x
        self.z = float(z)
        self._window = ArrivalWindow()

    def reset(self, sim: Simulator) -> None:
        self._free_at = [0.0] * sim.n_nodes
        self._ready = {}
        self._computer = {}
        self._copies = 0
        self._window.reset()
        limit = self.max_nodes if self.max_nodes is not None else sim.n_nodes
        self._max_nodes = min(limit, sim.n_nodes)
        self._min_prefix_blocks = blocks_reaching(self.min_prefix_tokens, sim.block_tokens)

    def metrics(self) -> dict[str, float]:
        return {"teacher_copies_issued": self._copies}

    def decide(self, sim: Simulator, request: Request) -> int | None:
        now = sim.now
        free_at = self._free_at
        catch_up(free_at, sim.nodes, now)
        prefix = prefix_of(request)
        d = len(prefix) if len(prefix) >= self._min_prefix_blocks else 0
        key = prefix[-1] if d else 0
        recurring = bool(d) and self._window.count(key, now, self.z) >= self.x
        sources: list[int] = []
        if d:
            sources = self._holders(sim, prefix)
            if recurring and sources:
                self._spread(sim, prefix, sources, self._max_nodes)
        ready = self._ready

        def landing(node: Node) -> float | None:
            # a copy or computation of the prefix planned here, still under way
            when = ready.get((node.index, key))
            if when is not None and (key in node.inflight or when >= now):
                return when
            return None

        choice, start, finish, _ = earliest_node(sim, request, free_at, d, landing)
        if self.routing == "backlog":
            estimates = first_token_estimates(sim, request)
            choice = min(range(sim.n_nodes), key=lambda j: (estimates[j][1], sim.nodes[j].load, j))
            start = now + estimates[choice][0]
            finish = now + estimates[choice][1]
        free_at[choice] = finish
        if d and not sources:
            # This request computes the prefix: remember where, to copy from it later.
            self._computer[key] = (choice, request)
            self._ready[(choice, key)] = finish if sim.config.causal_kv else start
        return choice

    # ------------------------------------------------------------------ helpers
    def _holders(self, sim: Simulator, prefix: tuple[int, ...]) -> list[int]:
        """Nodes that hold ``prefix`` in HBM or are about to compute it."""
        depth = len(prefix)
        out = [node.index for node in sim.nodes if node.view.hbm_match(prefix) >= depth]
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
        targets = copy_targets(nodes, key, sources, want, self._free_at)
        if not targets:
            return
        free_at = self._free_at
        src = min(sources, key=lambda i: (self._ready.get((i, key), sim.now), i))
        src_ready = max(self._ready.get((src, key), sim.now), sim.now)
        reference = sim.config.copy_model == "reference"
        latency = sim.config.transfer_latency_s
        for dst in targets:
            target = nodes[dst]
            missing = len(prefix) - target.view.hbm_match(prefix)
            if sim.warm(src, dst, prefix) != WARM_OK:
                continue
            self._copies += 1
            duration_s = copy_s(copy_bytes(missing, sim.block_tokens, target), target, latency)
            begin = copy_start_s(target, src_ready, reference)
            self._ready[(dst, key)] = begin + duration_s
            if reference:
                free_at[dst] += duration_s
