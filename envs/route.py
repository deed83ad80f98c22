"""``btb/Route-v0``: pick the node for every arriving request."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from envs.cluster_env import ClusterEnv
from envs.encoder import ObservationEncoder


class RouteEnv(ClusterEnv):
    """
    ## Description

    An LLM serving cluster of identical-model replicas, each with its own prefix
    KV cache, serves one workload window (an episode). At each request arrival
    the agent picks the replica that serves it. A replica that holds the
    request's prefix in HBM skips most of the prefill; one that doesn't
    recomputes it. The world is the btb-gym simulator (``envs.sim``), the same
    one the baselines run on.

    ## Action Space

    ``Discrete(n_nodes)``: the node the arriving request is routed to.

    ## Observation Space

    ``Box(0, 1, (n_nodes * 10 + 6,), float32)`` built by
    :class:`envs.encoder.ObservationEncoder`: per node (node-major) its load,
    estimated queue wait, KV reserved / budget, copies in flight to it, this
    request's HBM hit fraction there, whether this request's prefix is in flight
    to it, whether it is busy, its backlog of work, the expected time to this
    request's first token there and how far that is behind the best node's
    (a causal cost model: queued prefills costed with what they will find
    cached); then the request's prompt length and its
    prefix's traffic (arrivals in the last 1 / 10 / 60 s, age, fraction of nodes
    holding it). See ``envs/encoder.py`` for the exact scaling.

    ## Rewards

    Each request's TTFT is credited, as ``-ttft_s / reward_scale``, at the step
    in which its first token comes out, so an episode's return is
    ``-(sum of TTFT) / reward_scale`` (up to floating-point rounding: the terms
    are summed per step, not in one go). Optional costs, divided by
    ``reward_scale`` like the TTFT: ``tail_penalty x (ttft - slo_s)`` for every
    request over the SLO, and ``copy_cost_per_gb`` per GB copied.
    ``reward_baseline`` (a registered policy's name) credits each request's TTFT
    *less* its TTFT when that policy serves the same window on the same simulator
    seed (run at ``reset``): the return is then ``-(sum of TTFT - the reference's
    sum) / reward_scale``, zero for acting as the reference does. The traffic's
    own variance (a heavy window costs every policy more) cancels out of it.
    ``reward_timing="accrued"`` credits, at each step, the waiting time every
    arrived request spent since the previous step instead (less the reference's,
    with ``reward_baseline``): the same episode return, but a request that waits
    costs from the steps right after its routing, not only when its first token
    comes out (``envs.cluster_env.WaitAccrual``).

    ## Starting State

    ``reset`` picks a window from the pool uniformly with ``np_random``, and an
    empty cluster. ``options={"window": i}`` takes pool window ``i`` instead,
    with the simulator seed that ``reset(seed=s)`` would have used had it drawn
    ``i``; ``options={"window": workload}`` runs any Workload for this episode
    only (it never joins the pool; ``info["window"]`` is then -1).
    ``options={"sim_seed": s}`` seeds the simulator's generator (``sim.rng``,
    which baselines acting through :meth:`policy_action` draw their tie-breaks
    from) with ``np.random.default_rng(s)``: with the comparison run's
    ``[seed, window position]`` (``experiments.evaluation``) such a policy
    serves every request exactly as in that run.

    ## Episode End

    Terminates when the window's last request has been served (after the last
    arrival's action, the simulator runs to completion and the final step
    carries the remaining TTFTs). No truncation.

    ## Arguments

    ``gymnasium.make("btb/Route-v0", setup="70b_h100x4", workload="bursted_synthetic",
    split="train", n_windows=4, windows=None, workload_params=None, sim=None, reward_scale=1.0,
    slo_s=None, tail_penalty=0.0, copy_cost_per_gb=0.0, reward_baseline=None,
    reward_timing="first_token", data_seed=20260721, seed=None, render_mode=None)``:
    ``setup`` a published setup name or a ClusterSpec;
    ``workload``/``split``/``n_windows``/``data_seed`` choose the window pool
    (or pass ``windows``, a list of Workloads, which replaces the pool and leaves
    those four unused), ``workload_params`` override the generator's parameters
    (refused with ``windows``); ``sim`` a SimConfig or a dict of
    its fields; ``render_mode`` ``"ansi"`` or ``"rgb_array"``.

    ## Version History

    * v0: initial version.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.encoder = ObservationEncoder(self.n_nodes)
        self.action_space = spaces.Discrete(self.n_nodes)
        self.observation_space = spaces.Box(0.0, 1.0, (self.encoder.size,), dtype=np.float32)

    def _start(self) -> np.ndarray:
        self.encoder.reset()
        self.request = next(self._gen)
        return self._observe()

    def _observe(self) -> np.ndarray:
        assert self.sim is not None and self.request is not None
        return self.encoder.encode(self.sim, self.request).copy()

    def policy_action(self, policy: Any) -> Any:
        """The action that lets a baseline ``policy`` act through this env: the
        policy decides on the simulator directly (its warms and evictions happen
        there, as in a direct run) and its node becomes the routing action."""
        sim = self.sim
        assert sim is not None and self.request is not None
        # the policy's own warms, evictions and routing are journalled so that a
        # pickled episode replays them before the action of the next step
        sim.journal = []
        try:
            choice = policy.decide(sim, self.request)
        finally:
            self._pending_ops.extend(sim.journal)
            sim.journal = None
        # a policy that routed the request itself (sim.route) answers None
        node = int(sim.records.node[self.request.index] if choice is None else choice)
        if isinstance(self.action_space, spaces.Discrete):
            return node
        action = np.zeros(self.action_space.shape or (), dtype=np.int64)
        action[0] = node
        return action

    def _act(self, action: Any) -> bool:
        if type(action) is tuple and len(action) == 1:
            action = action[0]
        if type(action) is not int:
            raise ValueError(f"action {action!r} is not a node of Discrete({self.n_nodes})")
        node = action
        if not 0 <= node < self.n_nodes:
            raise ValueError(f"action {action!r} is outside Discrete({self.n_nodes})")
        assert self.sim is not None
        # refuses, before any change, a node other than the one policy_action's
        # policy may already have routed the request to
        self.sim.route(node)
        try:
            self.request = self._gen.send(None)
        except StopIteration:
            return True
        return False
