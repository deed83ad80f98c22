"""``btb/Route-v0``: pick the node for every arriving request."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from envs.cluster_env import ClusterEnv, refuse_other_envs_options
from envs.encoder import ObservationEncoder, observation_options
from envs.sim.errors import echoed

NEEDS_RESET = (
    "a policy first used after the episode's first request needs "
    "policy.reset(env.unwrapped.sim) by hand before it (policy_action resets a "
    "policy only at the first request)"
)
"""What ``RouteEnv.policy_action`` says of a policy not reset on its episode."""


def _policy_name(policy: Any) -> str:
    return str(getattr(policy, "name", type(policy).__name__))


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

    ``Box(0, 1, (n_nodes * 10 + 6,), float32)``, built by
    :class:`envs.encoder.ObservationEncoder` (the agent adapter uses the same
    encoder). Ten entries per node ``j``, node-major (entry ``10 j + i`` is
    feature ``i`` of node ``j``, so a set-based network can reshape the first
    ``10 n`` entries to ``(n, 10)``, ``n = n_nodes``), then six for the arriving
    request from index ``10 n``. The *prefix* is the request's prompt blocks but
    the last (:func:`envs.encoder.prefix_of`): a request whose own suffix spans
    more than one block has a prefix no other request shares, and its prefix
    features see no sharing (docs/traces.md,
    "Small blocks and the prefix a copy moves (a known limitation)").

    | index    | feature            | what it is                               | scale             |
    |----------|--------------------|------------------------------------------|-------------------|
    | 10 j + 0 | `load`             | running + waiting requests on node j     | x / (x + 16)      |
    | 10 j + 1 | `wait`             | estimated queue wait on j (s)            | x / (x + 1)       |
    | 10 j + 2 | `kv_used`          | KV reserved on j / its KV budget         | as is             |
    | 10 j + 3 | `copies_in`        | warm copies in flight to j               | x / (x + 1)       |
    | 10 j + 4 | `hit`              | request's blocks in j's HBM / its blocks | as is             |
    | 10 j + 5 | `prefix_in_flight` | a copy of the prefix is coming to j      | 0 or 1            |
    | 10 j + 6 | `busy`             | j is prefilling, decoding or copying     | 0 or 1            |
    | 10 j + 7 | `backlog`          | seconds of prefill/copy work on j        | log seconds       |
    | 10 j + 8 | `first_token`      | expected seconds to first token on j     | log seconds       |
    | 10 j + 9 | `first_token_gap`  | first_token on j - the best node's       | log seconds       |
    | 10 n + 0 | `prefix_tokens`    | the prompt's length in tokens            | log, 1 at 262,144 |
    | 10 n + 1 | `same_1s`          | arrivals of the prefix in the last 1 s   | x / (x + 4)       |
    | 10 n + 2 | `same_10s`         | ... in the last 10 s                     | x / (x + 16)      |
    | 10 n + 3 | `same_60s`         | ... in the last 60 s                     | x / (x + 64)      |
    | 10 n + 4 | `age`              | seconds since the prefix first came      | x / (x + 10)      |
    | 10 n + 5 | `holders`          | share of nodes with the prefix in HBM    | as is             |

    With ``hints=True`` nine more entries follow, from index ``h = 10 n + 6``:
    what the trace says of the request beyond its prompt (Bursted-ART's
    ``source`` and ``metadata.job_kind``, its ``group_id``; other formats carry
    none, and the entries stay 0). ``Box(0, 1, (n_nodes * 10 + 15,), float32)``.

    | index | feature        | what it is                                     | scale        |
    |-------|----------------|------------------------------------------------|--------------|
    | h + k | `hint_class_k` | the (source, job kind) class is k (0-7)        | 0 or 1       |
    | h + 8 | `group_seen`   | earlier requests of the request's group so far | x / (x + 16) |

    The class (:func:`envs.encoder.hint_class`; no entry set when the trace gives
    neither) of each pair the shipped generators write has its own column:
    0 synthetic/burst, 1 synthetic/decoy, 2 art/background, 3 synthetic/agent,
    4 synthetic/conversation (``envs.workloads.hint_labels.SHIPPED_CLASSES``).
    Any other pair (a trace's own) takes column ``5 + crc32("<source>/<job kind>")
    % 3``. ``group_seen`` counts from the episode's start.

    With ``spare_features=True`` three more entries follow (after the hints, if
    on), from index ``s``: what a rule that keeps a node spare for short prefills
    weighs (the causal teacher's ``long_prefill_s``, ``baselines.spare_node``).
    The request *holds* its soonest node (earliest ``first_token``, ties by
    ``load``, then index) for its ``first_token`` less its ``backlog`` there; it
    is *short* when that is under 0.25 s. All three are read from the node rows,
    so they carry those entries' rounding.

    | index | feature          | what it is                                        | scale        |
    |-------|------------------|---------------------------------------------------|--------------|
    | s + 0 | `short_rate`     | short arrivals per second over the last 5 s       | x / (x + 4)  |
    | s + 1 | `hold`           | seconds this request holds its soonest node       | log seconds  |
    | s + 2 | `spare_pressure` | short_rate x blocked^2 / 2 (s)                    | log seconds  |

    ``blocked`` is the sooner of the soonest node's ``first_token`` and the other
    nodes' ``backlog``: how long short arrivals would find no node free if the
    request stays. ``short_rate`` counts the earlier arrivals, not this one.
    Nodes that are down (the fault options) are left out of both.

    Times are in seconds. "log seconds" is :func:`envs.encoder.log_seconds`,
    ``min(log1p(s / 0.01) / log1p(1000 / 0.01), 1)``: 0 at 0 s, 0.40 at 1 s,
    0.60 at 10 s, 1 from 1,000 s on; ``prefix_tokens`` is
    ``min(log1p(tokens) / log1p(262,144), 1)``. ``wait`` is the rest of the
    node's current work item plus a recent mean prefill per queued request.
    ``same_*`` count this arrival too. ``backlog`` and ``first_token`` come from
    a causal cost model: queued prefills are costed with what they will find
    cached, copies in flight and prefixes being computed count from when they
    will exist, and recomputing wins where it is sooner than waiting; decode and
    admission limits are left out. So is the rest of the decode step a node is
    running (an admission cuts decode at a step boundary: on llama-3.3-70b a step
    takes 13 ms or more), unless ``step_wait=True``, which adds it to the node's
    ``backlog`` and ``first_token`` (and so to ``first_token_gap``).

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
    only (it never joins the pool; ``info["window"]`` is then -1, or the pool's
    index when the Workload is one of the pool's own objects, ``env.windows[i]``).
    ``options={"sim_seed": s}`` seeds the simulator's generator (``sim.rng``,
    which baselines acting through :meth:`policy_action` draw their tie-breaks
    from) with ``np.random.default_rng(s)`` (``s`` a whole number, a list, tuple or
    1-D integer array of them, or a ``np.random.SeedSequence``): with the comparison run's
    ``[seed, window position]`` (``experiments.evaluation``) such a policy
    serves every request exactly as in that run. With fault options on, the
    faults' draws derive from the same seed (docs/faults.md): each episode's
    seed meets faults of its own.

    ## Episode End

    Terminates when the window's last request has been served (after the last
    arrival's action, the simulator runs to completion and the final step
    carries the remaining TTFTs; its ``info["ttft_s"]`` holds every request's
    TTFT in arrival order). No truncation. ``set_windows(windows)`` replaces the
    pool for later episodes (a curriculum's stages).

    ## Arguments

    ``gymnasium.make("btb/Route-v0", setup="70b_h100x4", workload="bursted_synthetic",
    split="train", n_windows=4, windows=None, workload_params=None, sim=None, reward_scale=1.0,
    slo_s=None, tail_penalty=0.0, copy_cost_per_gb=0.0, reward_baseline=None,
    reward_timing="first_token", hints=False, spare_features=False, time_unit="seconds",
    step_wait=False, data_seed=20260721, seed=None, render_mode=None)``:
    ``setup`` a published setup name or a ClusterSpec;
    ``seed`` seeds the first ``reset()`` called without a seed, as
    ``reset(seed=seed)`` would (None: unseeded; later resets continue its stream);
    ``workload``/``split``/``n_windows``/``data_seed`` choose the window pool
    (or pass ``windows``, a list of Workloads, which replaces the pool and leaves
    those four unused), ``workload_params`` override the generator's parameters
    (refused with ``windows``); ``sim`` a SimConfig or a dict of
    its fields; ``hints`` appends the request-hint features and
    ``spare_features`` the spare-node features (above); ``time_unit``
    ``"seconds"`` shows durations (``wait``, ``backlog``, ``first_token``,
    ``first_token_gap``, and the spare-node features read from them) as they
    are, ``"reference"`` as the seconds the same prefill work takes on a
    llama-3.3-70b 4xH100 node at the default ``sim.mfu`` (each times that
    node's prefill seconds per token over this cluster's: 1 on ``70b_h100x4``,
    8.62 on ``qwen3_8b_h100x4``, 2.21 on ``glm45_h100x4``), so an agent trained
    on one model reads another's load in the units it learned (nodes of one
    prefill speed only; the request entries stay in workload seconds);
    ``step_wait`` adds each node's rest of its decode step to its ``backlog`` and
    ``first_token`` (above; off: the estimates the first agents were trained on);
    ``render_mode`` ``"ansi"`` or ``"rgb_array"``.

    ## Version History

    * v0: initial version.
    * v0, after btb-gym 0.1.0 (CHANGELOG.md, Unreleased): with ``hints=True``, each
      (source, job kind) pair of the shipped generators has a column of its own;
      every pair was hashed to ``crc32 % 8``, which gave bursts and decoys one.
    """

    def __init__(self, **kwargs: Any) -> None:
        refuse_other_envs_options(kwargs, type(self))  # (RouteWarmEnv has taken its own)
        super().__init__(**kwargs)
        self.encoder = ObservationEncoder(self.n_nodes, **observation_options(self._kwargs))
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
        there, as in a direct run) and its node becomes the routing action. At the
        episode's first request a policy is reset on this episode's simulator
        (``policy.reset(sim)``, once, as a direct run does before its first
        request), so a policy used from the first step decides as in a direct run
        of the window (on a copy of the env too, whose simulator keeps the
        original's ``run_id``). A policy first used later must have been reset by hand on
        this episode's simulator: one a baselines ``Policy`` reset on another (an
        earlier episode's: its state is that episode's) is refused before it decides,
        and one never reset that fails in its decide is said to need it. A copy of
        the env (pickled mid-episode) leaves its policy's state alone: its simulator
        keeps the ``run_id`` a copy of the policy was reset on."""
        sim = self.sim
        assert sim is not None and self.request is not None
        reset_on = getattr(policy, "reset_run_id", None)  # baselines.Policy records it
        known = any(done is policy for done in self._reset_policies)
        # at the first request only this episode's own reset counts: a copy of the
        # env keeps its simulator's run_id, which a policy run on the original has
        if self.request.index > 0 and reset_on == sim.run_id:
            known = True
        if self.request.index == 0 and not known:
            reset = getattr(policy, "reset", None)  # baselines.Policy has one
            if reset is not None:
                reset(sim)
            self._reset_policies.append(policy)
            known = True
        if not known and reset_on is not None:
            raise RuntimeError(
                f"policy {_policy_name(policy)!r} was reset on another simulator than this "
                f"episode's (an earlier episode's?), at request {self.request.index}: "
                f"{NEEDS_RESET}"
            )
        # the policy's own warms, evictions and routing are journalled so that a
        # pickled episode replays them before the action of the next step
        sim.journal = []
        try:
            choice = policy.decide(sim, self.request)
        except (IndexError, KeyError) as error:
            # a planner (oracle_warm) not reset for this episode fails this way
            if known or not hasattr(policy, "reset"):
                raise
            raise RuntimeError(
                f"policy {_policy_name(policy)!r} failed at request {self.request.index} of "
                f"the episode with {type(error).__name__}: {error}. If it was not reset for "
                f"this episode: {NEEDS_RESET}"
            ) from error
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
            raise ValueError(f"action {echoed(action)} is not a node of Discrete({self.n_nodes})")
        node = action
        if not 0 <= node < self.n_nodes:
            raise ValueError(f"action {echoed(action)} is outside Discrete({self.n_nodes})")
        sim = self.sim
        assert sim is not None
        try:
            if sim.routed_node() is None:  # the decision awaits its answer: the node
                self.request = self._gen.send(node)
            else:
                # refuses, before any change, a node other than the one policy_action's
                # policy has already routed the request to
                sim.route(node)
                self.request = self._gen.send(None)
        except StopIteration:
            return True
        return False
