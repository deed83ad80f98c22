"""A causal teacher for behavioural cloning: ``oracle_warm``'s planner without its
clairvoyance.

:class:`CausalTeacher` is the warming planner of ``oracle_warm``
(:class:`baselines.planner.WarmPlanner`) with a causal recurrence predicate
(:class:`baselines.window.RecentArrivals`): a request's prefix (its prompt
blocks but the last, as the observation encoder defines it) counts as
*recurring* once it has arrived ``x`` times within ``z`` seconds (BTB's X-in-Z
window), and is then warmed onto every node (up to ``max_nodes``), from the
node that holds it or computes it, skipping a node that would compute it
sooner than a copy lands. Every step it takes uses only the past and the
current cluster state, so its decisions are labels a causal agent can learn.

``routing="backlog"`` routes by the observation's own first-token estimate
(:func:`envs.sim.forecast.first_token_estimates`) instead of the planner's
clock, so that the labels follow what the agent sees.

``long_prefill_s`` (off by default) keeps a node spare for short prefills
(:mod:`baselines.spare_node`): a request that would hold the chosen node for at
least that many seconds, and whose prefix does not recur, goes to the best
other node instead when the short requests that arrived in the last
``short_window_s`` seconds say that more of them would wait behind it than it
loses by moving. Under ``routing="backlog"`` a request that arrives while every
node up drains for an upgrade (none eligible: its first token is ``inf`` on each)
is chosen and timed by the planner's clock, as under ``routing="clock"`` (so the
clock never holds ``inf``), and has no hold to weigh: it stays on the node routing
chose and is not counted as a short arrival.
"""

from __future__ import annotations

from baselines.planner import WarmPlanner
from baselines.routers import soonest_node, up_nodes
from baselines.spare_node import check_seconds, spare_choice
from baselines.window import RecentArrivals
from envs.encoder import ShortArrivals
from envs.sim.checks import check_int, is_number
from envs.sim.errors import echoed
from envs.sim.forecast import INF, earliest_node, first_token_estimates
from envs.sim.request import Request
from envs.sim.simulator import Simulator

ROUTINGS = ("clock", "backlog")


class CausalTeacher(WarmPlanner):
    """Earliest-first-token routing plus warming of recurring prefixes (causal)."""

    name = "causal_teacher"
    copies_metric = "teacher_copies_issued"

    def __init__(
        self,
        x: int = 2,
        z: float = 10.0,
        min_prefix_tokens: int = 4096,
        max_nodes: int | None = None,
        routing: str = "clock",
        long_prefill_s: float | None = None,
        short_window_s: float = 5.0,
    ) -> None:
        if routing not in ROUTINGS:
            raise ValueError(
                f"causal_teacher.routing must be clock or backlog, got {echoed(routing)}"
            )
        check_int("causal_teacher.x", x, 1)
        if not is_number(z) or not z > 0:
            raise ValueError(f"causal_teacher.z must be > 0 seconds, got {echoed(z)}")
        if long_prefill_s is not None:
            long_prefill_s = check_seconds("causal_teacher.long_prefill_s", long_prefill_s)
        short_window_s = check_seconds("causal_teacher.short_window_s", short_window_s)
        recurrence = RecentArrivals(x, float(z))
        # the spare-node rule asks whether the request's prefix recurs
        self._recurring = _Recurring(recurrence) if long_prefill_s is not None else None
        super().__init__(self._recurring or recurrence, min_prefix_tokens, max_nodes)
        self.routing = routing
        self.x = x
        self.z = float(z)
        self.long_prefill_s = long_prefill_s
        self.short_window_s = short_window_s
        self._shorts = ShortArrivals(short_window_s)

    def reset(self, sim: Simulator) -> None:
        super().reset(sim)
        self._shorts.reset()

    def _choose(
        self, sim: Simulator, request: Request, depth: int, key: int
    ) -> tuple[int, float, float, bool]:
        if self.routing == "clock":
            chosen = super()._choose(sim, request, depth, key)
            if self.long_prefill_s is None:
                return chosen
            return self._spare_clock(sim, request, depth, key, chosen)
        estimates = first_token_estimates(sim, request)
        choice = soonest_node(sim, estimates)  # the eft router's rule
        backlog, first = estimates[choice]
        if first == INF:
            # every node up drains (none eligible, docs/tenancy.md): choose and time
            # by the planner's clock, which never holds inf; no hold to weigh
            choice, start, finish, _ = super()._choose(sim, request, depth, key)
        else:
            if self.long_prefill_s is not None and self._may_move(sim, first - backlog):
                firsts = [f for _, f in estimates]
                backlogs = [b for b, _ in estimates]
                choice = self._spare(sim, choice, firsts, first - backlog, backlogs)
            start, finish = sim.now + estimates[choice][0], sim.now + estimates[choice][1]
        node = sim.nodes[choice]
        computes = depth > node.view.hbm_match(request.blocks) and self._planned(node, key) is None
        return choice, start, finish, computes

    # ------------------------------------------------------------------ spare node
    def _may_move(self, sim: Simulator, hold_s: float) -> bool:
        """Is the request long (it would hold its node ``hold_s`` >= ``long_prefill_s``)
        with a prefix that does not recur? A short one is counted as a recent
        short arrival; a recurring one stays (others will wait for its KV)."""
        if hold_s < self.long_prefill_s:  # type: ignore[operator]  # the rule is on
            self._shorts.add(sim.now)
            return False
        return not self._recurring.wanted  # type: ignore[union-attr]

    def _spare(
        self,
        sim: Simulator,
        choice: int,
        first_s: list[float],
        hold_s: float,
        backlog_s: list[float],
    ) -> int:
        """:func:`baselines.spare_node.spare_choice` for a long request (seconds from now)."""
        return spare_choice(
            choice,
            first_s,
            hold_s,
            backlog_s,
            [node.index for node in up_nodes(sim)],
            [node.load for node in sim.nodes],
            self._shorts.rate_per_s(sim.now),
            self.long_prefill_s,  # type: ignore[arg-type]  # the rule is on
        )

    def _spare_clock(
        self,
        sim: Simulator,
        request: Request,
        depth: int,
        key: int,
        chosen: tuple[int, float, float, bool],
    ) -> tuple[int, float, float, bool]:
        """The rule under the planner's clock: a request holds its node from the
        node's clock time to its first token; the best other node is the clock's
        earliest with the chosen node left out."""
        choice, start, finish, _ = chosen
        if not self._may_move(sim, finish - start) or len(up_nodes(sim)) < 2:
            return chosen
        now = sim.now
        free_at = self._free_at
        without = list(free_at)
        without[choice] = INF
        other = earliest_node(sim, request, without, depth, lambda node: self._planned(node, key))
        first_s = [INF] * sim.n_nodes
        first_s[choice] = finish - now
        first_s[other[0]] = other[2] - now
        backlog_s = [t - now for t in free_at]  # caught up: never negative
        if self._spare(sim, choice, first_s, finish - start, backlog_s) == choice:
            return chosen
        return other


class _Recurring:
    """The teacher's recurrence predicate, remembering its last answer's nodes
    wanted (the spare-node rule never moves a request whose prefix recurs)."""

    __slots__ = ("inner", "wanted")

    def __init__(self, inner: RecentArrivals) -> None:
        self.inner = inner
        self.wanted = 0

    def reset(self, sim: Simulator, min_blocks: int) -> None:
        self.inner.reset(sim, min_blocks)
        self.wanted = 0

    def __call__(self, sim: Simulator, request: Request) -> tuple[int, int]:
        depth, wanted = self.inner(sim, request)
        self.wanted = wanted
        return depth, wanted
