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
"""

from __future__ import annotations

from baselines.planner import WarmPlanner
from baselines.routers import soonest_node
from baselines.window import RecentArrivals
from envs.sim.checks import check_int, is_number
from envs.sim.forecast import first_token_estimates
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
    ) -> None:
        if routing not in ROUTINGS:
            raise ValueError(f"causal_teacher.routing must be clock or backlog, got {routing!r}")
        check_int("causal_teacher.x", x, 1)
        if not is_number(z) or not z > 0:
            raise ValueError(f"causal_teacher.z must be > 0 seconds, got {z!r}")
        super().__init__(RecentArrivals(x, float(z)), min_prefix_tokens, max_nodes)
        self.routing = routing
        self.x = x
        self.z = float(z)

    def _choose(
        self, sim: Simulator, request: Request, depth: int, key: int
    ) -> tuple[int, float, float, bool]:
        if self.routing == "clock":
            return super()._choose(sim, request, depth, key)
        estimates = first_token_estimates(sim, request)
        choice = soonest_node(sim, estimates)  # the eft router's rule
        node = sim.nodes[choice]
        computes = depth > node.view.hbm_match(request.blocks) and self._planned(node, key) is None
        return choice, sim.now + estimates[choice][0], sim.now + estimates[choice][1], computes
