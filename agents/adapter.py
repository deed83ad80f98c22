"""Any saved agent as a :class:`baselines.policy.Policy`, so learned agents run in
the comparison run exactly where the baselines do.

The adapter builds observations with the environments' own encoder and carries
out actions with the environments' own functions, so an agent acts in
evaluation exactly as in training.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from agents.algorithms import AgentSpec, load_agent
from agents.inference import NumpyNodeSetActor
from baselines.policy import Policy
from envs.encoder import (
    EPOCH_FEATURES,
    EPOCH_NODE_FEATURES,
    OBSERVATION_OPTIONS,
    ObservationEncoder,
    cluster_time_scale,
    epoch_observation_size,
    observation_options,
    observation_size,
)
from envs.route_warm import apply_route_warm, route_warm_masks, route_warm_sizes
from envs.sim.errors import echoed
from envs.sim.request import Request, Workload
from envs.sim.simulator import Simulator
from envs.sim.streams import seed_child
from envs.sim.tokens import check_key_tokens
from envs.thresholds import (
    EpochController,
    ThresholdsEnv,
    check_y_tokens,
    thresholds_action_sizes,
)

AGENT_SETTINGS: dict[str, tuple[type[Any], dict[str, Callable[[Any], None]]]] = {
    "thresholds": (ThresholdsEnv, {"y_tokens": check_y_tokens}),
}
"""The env arguments an agent of each kind may run with other than those it was
trained with (compare's ``policy_kwargs=AGENT.KEY=VALUE``): the env whose
signature types them, and each one's check. They change what a prefix is keyed
on, not the layout of the observation or the action."""


class AgentPolicy(Policy):
    """A learned agent behind the Policy interface.

    Args:
        model: a trained SB3 model.
        spec: what it is (env kind, environment arguments such as ``epoch_s``).
        deterministic: act greedily (the default for evaluation). A sampling agent
            draws from its own torch stream, made at each :meth:`reset` from the
            simulator's seed (:func:`sampling_stream`): a window's sampled run
            depends on the agent, the window and the seed, not on the policies run
            before it.
    """

    def __init__(self, model: Any, spec: AgentSpec, deterministic: bool = True) -> None:
        self.model = model
        self.spec = spec
        self.name = spec.name
        self.deterministic = deterministic
        self._encoder: ObservationEncoder | None = None
        self._controller: EpochController | None = None
        self._masked = spec.algo == "maskable_ppo"
        # RouteWarm-v0's options that add action parts
        self._speculate = bool(spec.env_kwargs.get("speculate", False))
        self._cache_actions = bool(spec.env_kwargs.get("cache_actions", False))
        self._sizes: list[int] = []
        self._choices = np.zeros((0, 0), dtype=np.int64)
        check_model_spaces(model, spec)
        model.policy.set_training_mode(False)
        self._numpy: NumpyNodeSetActor | None = None
        self._stream: torch.Generator | None = None
        self.configured: dict[str, Any] = {}
        """The settings given at evaluation (:meth:`configure`), not as trained."""
        if spec.net == "set" and spec.algo != "dqn":  # weights read once, here
            self._numpy = NumpyNodeSetActor(model.policy)

    @classmethod
    def load(
        cls, folder: str | Path, name: str | None = None, deterministic: bool = True
    ) -> AgentPolicy:
        """The agent saved in ``folder``, or the shipped agent of that name
        (``AgentPolicy.load("improve_warm_step")`` reads ``agents/zoo/improve_warm_step``),
        greedy unless ``deterministic`` is false (then it samples its actions)."""
        from agents import agent_folder, zoo_names

        if not isinstance(folder, (str, Path)):
            raise TypeError(
                f"folder must be a path or a shipped agent's name, got {echoed(folder)}"
            )
        found = agent_folder(str(folder))
        if found is None and not Path(folder).exists():
            # a mistyped zoo name: say which names there are, as the commands do
            raise FileNotFoundError(
                f"{folder}: no such file or folder, nor a shipped agent's name "
                f"(agents/zoo/: {', '.join(zoo_names())})"
            )
        where = found or folder
        model, spec = load_agent(where)
        try:
            policy = cls(model, spec, deterministic)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        if name:
            policy.name = name
        return policy

    def setting_names(self) -> tuple[str, ...]:
        """The env arguments this agent may run with other than its own (:data:`AGENT_SETTINGS`)."""
        return tuple(AGENT_SETTINGS[self.spec.env][1]) if self.spec.env in AGENT_SETTINGS else ()

    def configure(self, **settings: Any) -> None:
        """Run with these env arguments instead of those saved with the agent."""
        for key, value in settings.items():
            if key not in self.setting_names():
                known = ", ".join(self.setting_names()) or "-"
                raise ValueError(
                    f"agent {self.name!r} has no setting {echoed(key)} (settings: {known})"
                )
            AGENT_SETTINGS[self.spec.env][1][key](value)
        kwargs = {**self.spec.env_kwargs, **settings}
        self.spec = dataclasses.replace(self.spec, env_kwargs=kwargs)
        self.configured.update(settings)

    def check_workload(self, workload: Workload) -> None:
        """Refuse, in one line naming the agent and where its setting came from, a
        workload its settings cannot run on (a ``y_tokens`` shorter than one block)."""
        if self.spec.env != "thresholds":
            return
        y = self.spec.env_kwargs.get("y_tokens")
        try:
            check_key_tokens("y_tokens", y, workload.block_tokens)
        except ValueError as error:
            given = "policy_kwargs" if "y_tokens" in self.configured else "as trained"
            raise ValueError(f"agent {self.name!r} ({given}): {error}") from None

    @property
    def batch_actor(self) -> NumpyNodeSetActor | None:
        """The numpy forward pass of a node-set actor-critic (None for DQN and the
        flat MLP), for acting on a batch of observations (``agents.lockstep``)."""
        return self._numpy

    @property
    def trained_nodes(self) -> int:
        """The node count of the cluster the agent was trained on (from its action space)."""
        space = self.model.action_space
        if isinstance(space, spaces.Discrete):
            return int(space.n)
        if self.spec.env == "thresholds":  # its actions do not depend on the node count
            size = int(np.prod(self.model.observation_space.shape))
            return (size - len(EPOCH_FEATURES)) // len(EPOCH_NODE_FEATURES)
        return int(space.nvec[0])

    @property
    def settings_log(self) -> list[Any]:
        """A threshold agent's (epoch start s, setting) per epoch of the last run
        (``EpochController.log``); empty for the other kinds."""
        return self._controller.log if self._controller is not None else []

    def metrics(self) -> dict[str, float]:
        """A threshold agent's epochs of the last run under each routing rule it chose
        (``epochs_rule_<rule>``; summed over windows in a result row), and its BTB's
        ``y_unreached_rate`` (1 when no prompt of the run reached its ``y_tokens``, so
        BTB never fired: only then, as btb's); none for the other kinds."""
        counts: dict[str, float] = {}
        for _, setting in self.settings_log:
            key = f"epochs_rule_{setting[4]}"
            counts[key] = counts.get(key, 0.0) + 1.0
        if self._controller is not None:
            counts.update(self._controller.metrics())
        return counts

    def action_sizes(self, n_nodes: int) -> list[int]:
        """How the network's output splits into action dimensions on ``n_nodes`` nodes.

        The node-set network's per-node heads emit the live cluster's layout
        (route: ``n`` logits; route_warm: ``[n] + [2] * n + [n + 1]``, then ``[2] * n``
        with ``speculate`` and ``[2 * n + 1] * 2`` with ``cache_actions``). The
        threshold controller's heads read the pooled context, so their sizes stay
        those it was trained with (M is a share of the live cluster).
        """
        if self.spec.env == "route":
            return [n_nodes]
        if self.spec.env == "route_warm":
            return route_warm_sizes(n_nodes, self._speculate, self._cache_actions)
        return [int(n) for n in self.model.action_space.nvec]

    def check_nodes(self, n_nodes: int) -> None:
        """Refuse, with a ValueError naming the agent, a cluster its network cannot run on."""
        trained = self.trained_nodes
        if n_nodes == trained:
            return
        if self.spec.net != "set" or self.spec.algo == "dqn":
            raise ValueError(
                f"agent {self.name!r}: its network (agent.net={self.spec.net}, "
                f"agent.algo={self.spec.algo}) is fixed to the {trained} nodes it was trained "
                f"on; this cluster has {n_nodes} (only net=set with ppo, a2c or maskable_ppo "
                "runs on other node counts)"
            )

    def check_cluster(self, cluster: Any, config: Any) -> None:
        """Refuse, with a ValueError naming the agent, a cluster (a ``ClusterSpec``,
        simulated under the SimConfig ``config``) it cannot run on: too many or too few
        nodes for its network (:meth:`check_nodes`), or, for an observation counted in
        ``time_unit=reference``, nodes that prefill at several speeds (a cluster of
        one's own of mixed nodes), which it said only at its first window's reset."""
        self.check_nodes(len(cluster.nodes))
        if self.spec.env == "thresholds":  # its epoch features count no durations
            return
        if observation_options(self.spec.env_kwargs)["time_unit"] != "reference":
            return
        try:
            cluster_time_scale(cluster, config)
        except ValueError as error:
            raise ValueError(f"agent {self.name!r} (as trained): {error}") from None

    def reset(self, sim: Simulator) -> None:
        self.check_nodes(sim.n_nodes)
        self._stream = sampling_stream(sim.rng)
        self._sizes = self.action_sizes(sim.n_nodes)
        self._choices = self._choice_index()
        if self.spec.env == "thresholds":
            epoch_s = float(self.spec.env_kwargs.get("epoch_s", 1.0))
            kwargs = self.spec.env_kwargs
            self._controller = EpochController(
                sim.n_nodes,
                epoch_s,
                bool(kwargs.get("eft_rules", False)),
                spread_rules=bool(kwargs.get("spread_rules", False)),
                y_tokens=kwargs.get("y_tokens"),
            )
            self.check_workload(sim.workload)
            self._controller.reset(sim)
        else:
            options = observation_options(self.spec.env_kwargs)
            self._encoder = ObservationEncoder(sim.n_nodes, **options)
            self._encoder.reset()

    def decide(self, sim: Simulator, request: Request) -> Any:
        if self.spec.env == "thresholds":
            controller = self._controller
            assert controller is not None, "reset() must be called before decide()"
            if not controller.in_epoch(request):
                if controller.epoch_end > -np.inf:
                    controller.close_epoch(sim)
                controller.apply(self.act(controller.observe(sim)), request.arrival_s)
            return controller.route(sim, request)
        if self.spec.env == "route":
            return int(self.act(self.observe(sim, request)[0]))
        obs, mask = self.observe(sim, request)
        self.apply(sim, request, self.act(obs, mask))
        return None  # routed already, by apply

    def observe(self, sim: Simulator, request: Request) -> tuple[np.ndarray, np.ndarray | None]:
        """A route or route-warm agent's observation of ``request`` arriving now (a
        view of the encoder's buffer) and, for a masked agent, its action mask.
        Call it once per arrival: it records the arrival in the encoder's traffic."""
        encoder = self._encoder
        assert encoder is not None, "reset() must be called before decide()"
        obs = encoder.encode(sim, request)
        if self.spec.env == "route" or not self._masked:
            return obs, None
        return obs, route_warm_masks(sim, request, self._speculate, self._cache_actions)

    def apply(self, sim: Simulator, request: Request, action: Any) -> None:
        """Carry out a route-warm ``action`` for ``request`` (route, warm, evict)."""
        apply_route_warm(sim, request, action, self._speculate, self._cache_actions)

    def act(self, obs: np.ndarray, mask: np.ndarray | None = None) -> Any:
        """The model's action for one observation (and action mask).

        The network's logits (or Q-values), masked, split by :meth:`action_sizes`
        for the live cluster, then the argmax of each dimension (greedy, what
        ``predict(deterministic=True)`` returns on the trained node count) or a
        sample from it. Greedy actions of the node-set actor-critics come from
        the numpy forward pass (:class:`agents.inference.NumpyNodeSetActor`);
        everything else from :meth:`act_torch`, the reference.
        """
        if self._numpy is None or not self.deterministic:
            return self.act_torch(obs, mask)
        choice = self.greedy(self._numpy.logits(obs), mask)
        if isinstance(self.model.action_space, spaces.Discrete):
            return int(choice[0])
        return choice

    def greedy(self, scores: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """The greedy choice of each action dimension from the flat ``scores`` (logits,
        masked by ``mask``) of one observation, or of each row of a batch's."""
        if not self._sizes:
            raise RuntimeError("reset() must be called before act()")
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        # one argmax over (dimension, choice); padding reads the -inf appended last
        padding = np.full((*scores.shape[:-1], 1), -np.inf, dtype=scores.dtype)
        return np.concatenate((scores, padding), axis=-1)[..., self._choices].argmax(axis=-1)

    def _choice_index(self) -> np.ndarray:
        """For the numpy path: ``[dimension, k]`` -> the position of choice ``k`` in
        the flat logits, or one past their end (padding)."""
        total = sum(self._sizes)
        index = np.full((len(self._sizes), max(self._sizes)), total, dtype=np.int64)
        start = 0
        for k, size in enumerate(self._sizes):
            index[k, :size] = np.arange(start, start + size)
            start += size
        return index

    def act_torch(self, obs: np.ndarray, mask: np.ndarray | None = None) -> Any:
        """:meth:`act` with the torch network (the reference path), not SB3's
        ``predict``, which checks the observation against the trained node count
        and samples from torch's global stream. Sampling draws from the agent's
        own stream; DQN samples epsilon-greedily at its model's final epsilon."""
        if not self._sizes or self._stream is None:
            raise RuntimeError("reset() must be called before act()")
        policy = self.model.policy
        with torch.no_grad():
            obs_t = torch.as_tensor(obs, dtype=torch.float32).unsqueeze(0)
            if self.spec.algo == "dqn":
                scores = policy.q_net(obs_t)[0]
            else:
                features = policy.extract_features(obs_t, policy.pi_features_extractor)
                scores = policy.action_net(policy.mlp_extractor.forward_actor(features))[0]
            if mask is not None:
                scores = scores.masked_fill(~torch.as_tensor(mask), -torch.inf)
            parts = list(torch.split(scores, self._sizes))
            if self.deterministic:
                choice = [int(part.argmax()) for part in parts]
            elif self.spec.algo == "dqn":  # epsilon-greedy, at the model's final epsilon
                draw = float(torch.rand((), generator=self._stream))
                explore = draw < self.model.exploration_rate
                choice = [self._uniform(p) if explore else int(p.argmax()) for p in parts]
            else:
                choice = [self._sample(torch.softmax(p, dim=0)) for p in parts]
        if isinstance(self.model.action_space, spaces.Discrete):
            return choice[0]
        return np.array(choice)

    def _sample(self, probs: torch.Tensor) -> int:
        """One choice drawn from ``probs`` with the agent's own stream."""
        return int(torch.multinomial(probs, 1, generator=self._stream)[0])

    def _uniform(self, scores: torch.Tensor) -> int:
        """A choice drawn uniformly among those ``scores`` (masked) leaves open."""
        return self._sample(torch.isfinite(scores).to(torch.float32))


SAMPLING_KEY = 0x5A17
"""The spawn key the sampling stream adds to the simulator's seed sequence (numpy's
own children are numbered from 0; this one is far from them)."""


def check_model_spaces(model: Any, spec: AgentSpec) -> None:
    """Refuse, in one line, a model whose observation and action spaces are not those
    ``spec`` (agent.json) makes on the model's own node count: a ``model.zip`` and an
    ``agent.json`` that do not belong together would otherwise fail inside torch at
    the first decision, or act on an observation laid out differently."""
    observed, acts = model.observation_space, model.action_space
    n_obs = int(np.prod(observed.shape)) if observed.shape is not None else -1
    if isinstance(acts, spaces.Discrete):
        sizes, n_nodes = [int(acts.n)], int(acts.n)
    elif isinstance(acts, spaces.MultiDiscrete):
        sizes = [int(n) for n in acts.nvec]
        n_nodes = sizes[0]
    else:
        raise ValueError(f"the model's action space {acts} is none of btb-gym's envs'")
    kwargs = spec.env_kwargs
    read = "actions"  # where the node count comes from
    if spec.env == "thresholds":  # its actions do not depend on it
        read = "observation"
        n_nodes = max((n_obs - len(EPOCH_FEATURES)) // len(EPOCH_NODE_FEATURES), 1)
        want_obs = epoch_observation_size(n_nodes)
        eft, spread = bool(kwargs.get("eft_rules")), bool(kwargs.get("spread_rules"))
        want = list(thresholds_action_sizes(eft, spread))
    else:
        options = observation_options(kwargs)
        want_obs = observation_size(n_nodes, options["hints"], options["spare_features"])
        want = (
            [n_nodes]
            if spec.env == "route"
            else route_warm_sizes(
                n_nodes, bool(kwargs.get("speculate")), bool(kwargs.get("cache_actions"))
            )
        )
    if (
        n_obs == want_obs
        and sizes == want
        and isinstance(acts, spaces.Discrete) == (spec.env == "route")
    ):
        return
    options_named = {k: v for k, v in kwargs.items() if k in _SPACE_OPTIONS and v}
    raise ValueError(
        f"model.zip does not fit agent.json: the model observes {n_obs} values and acts in "
        f"{acts}, agent.json's env={spec.env}"
        + (f" with {options_named}" if options_named else "")
        + f" on {n_nodes} nodes (as the model's {read} read) makes {want_obs} values and "
        + (f"Discrete({want[0]})" if spec.env == "route" else f"MultiDiscrete({want})")
    )


_SPACE_OPTIONS = (*OBSERVATION_OPTIONS, "speculate", "cache_actions", "eft_rules", "spread_rules")
"""The env arguments that change an observation's or an action's layout."""


def sampling_stream(rng: np.random.Generator) -> torch.Generator:
    """A torch stream for a sampling agent on the simulator whose policies draw from
    ``rng``: seeded from ``rng``'s seed sequence and :data:`SAMPLING_KEY`, so it leaves
    ``rng``'s own draws (the baselines' tie-breaks) as they were. A generator without
    a seed sequence (one built from a bare state) gives one draw for the seed."""
    child = seed_child(rng, SAMPLING_KEY)
    if child is not None:
        seed = int(child.generate_state(1, np.uint64)[0])
    else:
        seed = int(rng.integers(2**63))
    return torch.Generator().manual_seed(seed)
