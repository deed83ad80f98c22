"""Torch networks that treat the cluster's nodes as a set.

Observations from ``envs.encoder`` start with ``n_nodes`` rows of per-node
features followed by global features. :class:`NodeSetNetwork` embeds every node
with shared weights, pools the embeddings (mean and max) with the global
features into a context, and gives each node a score embedding from its own
embedding and the context. No weight depends on the number of nodes, so a
policy trained on four nodes loads into a policy for six.

* :class:`NodeScoringPolicy` (PPO / A2C; :class:`MaskableNodeScoringPolicy` for
  MaskablePPO) plugs it in as the actor-critic body: the value comes from a
  context, and the action logits from per-node heads (route: one logit per
  node; route + warm: route, warm no / yes and evict per node, plus an
  evict-nothing logit from the context; with RouteWarm-v0's ``speculate``,
  speculate no / yes per node; with its ``cache_actions``, pin and unpin, demote
  and promote per node, plus a do-nothing logit of each part from the context).
  For other action spaces (the threshold controller) the heads read the
  context. With the env's ``hints`` or ``spare_features`` those features join
  the global features the context reads. ``critic`` says whose
  context the value reads: ``shared`` (the actor's: the value loss trains the
  actor's body too), ``separate`` (a second node-set body of its own, the same
  shape: the actor and the critic share no weight) or ``detached`` (the actor's
  context with its gradient stopped: the value loss trains the value head only).
* :class:`NodeSetExtractor` is the same body as an SB3 features extractor
  (per-node score embeddings and the context, flattened), for DQN.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from agents.distributions import lean_distribution
from envs.encoder import (
    EPOCH_FEATURES,
    EPOCH_NODE_FEATURES,
    HINT_FEATURES,
    NODE_FEATURES,
    OBSERVATION_OPTIONS,
    REQUEST_FEATURES,
    SPARE_FEATURES,
)
from envs.sim.errors import echoed

NETWORK_OPTIONS = ("speculate", "cache_actions", *OBSERVATION_OPTIONS)
"""The route envs' options the node-set network follows: action parts
(``speculate``, ``cache_actions``) and observation features. An agent trained
with one on has another layout than one trained with it off."""


def feature_layout(kind: str, hints: bool = False, spare_features: bool = False) -> tuple[int, int]:
    """(per-node features, global features) of an env kind's observation; ``hints``
    and ``spare_features``: the env's request-hint and spare-node features follow
    the request's (route kinds only)."""
    if kind in ("route", "route_warm"):
        extra = (len(HINT_FEATURES) if hints else 0) + (
            len(SPARE_FEATURES) if spare_features else 0
        )
        return len(NODE_FEATURES), len(REQUEST_FEATURES) + extra
    if kind == "thresholds":
        return len(EPOCH_NODE_FEATURES), len(EPOCH_FEATURES)
    raise ValueError(f"unknown env kind {echoed(kind)}; known: route, route_warm, thresholds")


CRITICS = ("shared", "separate", "detached")


def _node_net(node_features: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(node_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU()
    )


def _context_net(global_features: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(2 * hidden + global_features, hidden), nn.ReLU())


class NodeSetNetwork(nn.Module):
    """The body; ``forward`` returns (actor latent, critic latent).

    The actor latent is ``[per-node score embeddings (n x hidden), context (hidden)]``
    flattened, or only the context when ``per_node_actor`` is False. The critic
    latent is a context, by ``critic`` (see the module docstring).
    """

    def __init__(
        self,
        node_features: int,
        global_features: int,
        hidden: int = 64,
        per_node_actor: bool = True,
        critic: str = "shared",
    ) -> None:
        super().__init__()
        if critic not in CRITICS:
            raise ValueError(
                f"agent.critic must be one of {', '.join(CRITICS)}, got {echoed(critic)}"
            )
        self.node_features = node_features
        self.global_features = global_features
        self.hidden = hidden
        self.per_node_actor = per_node_actor
        self.critic = critic
        self.node_net = _node_net(node_features, hidden)
        self.context_net = _context_net(global_features, hidden)
        self.score_net = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU())
        if critic == "separate":
            self.critic_node_net = _node_net(node_features, hidden)
            self.critic_context_net = _context_net(global_features, hidden)
        self.latent_dim_pi = hidden  # nominal: the per-node actor latent grows with n
        self.latent_dim_vf = hidden

    def n_nodes(self, features: torch.Tensor) -> int:
        n, rest = divmod(features.shape[-1] - self.global_features, self.node_features)
        if rest or n < 1:
            raise ValueError(
                f"observation of size {features.shape[-1]} does not split into nodes of "
                f"{self.node_features} features plus {self.global_features} global features"
            )
        return n

    def _context(
        self, features: torch.Tensor, node_net: nn.Module, context_net: nn.Module
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(per-node embeddings, pooled context) of one body."""
        batch = features.shape[0]
        n = self.n_nodes(features)
        nodes = features[:, : n * self.node_features].reshape(batch, n, self.node_features)
        rest = features[:, n * self.node_features :]
        embedded = node_net(nodes)
        pooled = torch.cat([embedded.mean(dim=1), embedded.max(dim=1).values, rest], dim=-1)
        return embedded, context_net(pooled)

    def context(self, features: torch.Tensor) -> torch.Tensor:
        """The actor's pooled context alone (what the threshold controller's head and
        a shared critic read), without the per-node score embeddings."""
        return self._context(features, self.node_net, self.context_net)[1]

    def embed(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The actor's (per-node score embeddings, context)."""
        embedded, context = self._context(features, self.node_net, self.context_net)
        n = embedded.shape[1]
        scores = self.score_net(
            torch.cat([embedded, context.unsqueeze(1).expand(-1, n, -1)], dim=-1)
        )
        return scores, context

    def critic_latent(self, features: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """The critic's context, given the actor's ``context`` of the same features."""
        if self.critic == "separate":
            return self._context(features, self.critic_node_net, self.critic_context_net)[1]
        return context.detach() if self.critic == "detached" else context

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.per_node_actor:  # the score embeddings would go unread
            context = self.context(features)
            return context, self.critic_latent(features, context)
        scores, context = self.embed(features)
        critic = self.critic_latent(features, context)
        return torch.cat([scores.flatten(1), context], dim=-1), critic

    def forward_actor(self, features: torch.Tensor) -> torch.Tensor:
        if not self.per_node_actor:
            return self.context(features)
        scores, context = self.embed(features)
        return torch.cat([scores.flatten(1), context], dim=-1)

    def forward_critic(self, features: torch.Tensor) -> torch.Tensor:
        if self.critic == "separate":
            return self.critic_latent(features, features[:, :0])  # no actor context needed
        return self.critic_latent(features, self.context(features))


class NodeActionHead(nn.Module):
    """Logits from per-node score embeddings: ``route`` gives one per node;
    ``route_warm`` gives the ``MultiDiscrete([n] + [2] * n + [n + 1])`` layout, then
    ``[2] * n`` with ``speculate`` and ``[2 * n + 1] * 2`` with ``cache_actions``
    (``envs.route_warm.route_warm_sizes``). Without the options its layers, and so
    its parameters, are those of the head before the options existed."""

    def __init__(
        self, hidden: int, kind: str, speculate: bool = False, cache_actions: bool = False
    ) -> None:
        super().__init__()
        if kind not in ("route", "route_warm"):
            raise ValueError(f"per-node heads exist for route and route_warm, not {kind!r}")
        if kind == "route" and (speculate or cache_actions):
            raise ValueError("speculate and cache_actions are options of route_warm's head")
        self.hidden = hidden
        self.kind = kind
        self.speculate = speculate
        self.cache_actions = cache_actions
        self.node_logits = nn.Linear(hidden, 1 if kind == "route" else 4)
        self.no_evict = nn.Linear(hidden, 1)
        if speculate:  # speculate no / yes, per node
            self.speculate_logits = nn.Linear(hidden, 2)
        if cache_actions:  # pin, unpin, demote, promote per node; "nothing" of each part
            self.cache_logits = nn.Linear(hidden, 4)
            self.cache_none = nn.Linear(hidden, 2)

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        """Logits from the actor latent (per-node score embeddings and the
        context, flattened: :meth:`NodeSetNetwork.forward`'s)."""
        batch = latent.shape[0]
        n = latent.shape[1] // self.hidden - 1
        scores = latent[:, : n * self.hidden].reshape(batch, n, self.hidden)
        return self.logits(scores, latent[:, n * self.hidden :])

    def logits(self, scores: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """Logits from the per-node score embeddings ``(batch, n, hidden)`` and
        the context ``(batch, hidden)``."""
        batch, n = scores.shape[0], scores.shape[1]
        out = self.node_logits(scores)
        if self.kind == "route":
            return out[..., 0]
        route = out[..., 0]
        warm = out[..., 1:3].reshape(batch, 2 * n)
        evict = torch.cat([self.no_evict(context), out[..., 3]], dim=-1)
        parts = [route, warm, evict]
        if self.speculate:
            parts.append(self.speculate_logits(scores).reshape(batch, 2 * n))
        if self.cache_actions:
            cache = self.cache_logits(scores)
            none = self.cache_none(context)
            parts += [none[:, :1], cache[..., 0], cache[..., 1]]  # nothing, pin k, unpin k
            parts += [none[:, 1:], cache[..., 2], cache[..., 3]]  # nothing, demote, promote
        return torch.cat(parts, dim=-1)


class _NodeScoring:
    """Mixin for SB3 actor-critic policies; ``policy_kwargs``: ``kind``, ``hidden``,
    ``critic`` (see the module docstring), and the env options the network
    follows: ``speculate``, ``cache_actions`` (action parts), ``hints`` and
    ``spare_features`` (observation features)."""

    def __init__(
        self,
        *args: Any,
        kind: str = "route",
        hidden: int = 64,
        critic: str = "shared",
        speculate: bool = False,
        cache_actions: bool = False,
        hints: bool = False,
        spare_features: bool = False,
        **kwargs: Any,
    ) -> None:
        self.kind = kind
        self.hidden = hidden
        self.critic = critic
        self.speculate = speculate
        self.cache_actions = cache_actions
        self.hints = hints
        self.spare_features = spare_features
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]

    def _build_mlp_extractor(self) -> None:
        node_features, global_features = feature_layout(self.kind, self.hints, self.spare_features)
        self.mlp_extractor = NodeSetNetwork(
            node_features,
            global_features,
            self.hidden,
            per_node_actor=self.kind != "thresholds",
            critic=self.critic,
        )

    def _build(self, lr_schedule: Any) -> None:
        # one padded tensor for every action dimension, not a torch Categorical each
        self.action_dist = lean_distribution(self.action_space)  # type: ignore[attr-defined]
        super()._build(lr_schedule)  # type: ignore[misc]
        if self.kind == "thresholds":
            return
        self.action_net = NodeActionHead(self.hidden, self.kind, self.speculate, self.cache_actions)
        for module in self.action_net.children():  # node_logits first, as before the options
            assert isinstance(module, nn.Linear)
            nn.init.orthogonal_(module.weight, gain=0.01)
            nn.init.zeros_(module.bias)
        self.optimizer = self.optimizer_class(  # type: ignore[attr-defined]
            self.parameters(),  # type: ignore[attr-defined]
            lr=lr_schedule(1),
            **self.optimizer_kwargs,  # type: ignore[attr-defined]
        )

    def _forward_nodes(
        self, obs: torch.Tensor, deterministic: bool, action_masks: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
        """SB3's ``forward`` (actions, values, log-probabilities: a rollout step's
        forward pass) with the same operations in the same order, minus the
        actor latent's concatenation and split (the head takes the score
        embeddings and the context as they come); None where SB3's own applies
        (the threshold controller's head, or features not shared)."""
        if self.kind == "thresholds" or not self.share_features_extractor:  # type: ignore[attr-defined]
            return None
        features = self.extract_features(obs)  # type: ignore[attr-defined]
        net = self.mlp_extractor  # type: ignore[attr-defined]
        scores, context = net.embed(features)
        values = self.value_net(net.critic_latent(features, context))  # type: ignore[attr-defined]
        distribution = self.action_dist.proba_distribution(  # type: ignore[attr-defined]
            self.action_net.logits(scores, context)  # type: ignore[attr-defined]
        )
        if action_masks is not None:
            distribution.apply_masking(action_masks)
        actions = distribution.get_actions(deterministic=deterministic)
        log_prob = distribution.log_prob(actions)
        shape = self.action_space.shape  # type: ignore[attr-defined]
        return actions.reshape((-1, *shape)), values, log_prob

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()  # type: ignore[misc]
        data.update(kind=self.kind, hidden=self.hidden, critic=self.critic)
        for option in NETWORK_OPTIONS:
            if getattr(self, option):  # only when on: saved as before the options existed
                data[option] = True
        return data


class NodeScoringPolicy(_NodeScoring, ActorCriticPolicy):  # type: ignore[misc]
    """PPO / A2C policy with the node-set body and per-node action heads."""

    def forward(
        self, obs: torch.Tensor, deterministic: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out = self._forward_nodes(obs, deterministic)
        return super().forward(obs, deterministic) if out is None else out


class MaskableNodeScoringPolicy(_NodeScoring, MaskableActorCriticPolicy):  # type: ignore[misc]
    """MaskablePPO policy with the node-set body and per-node action heads."""

    def forward(
        self, obs: torch.Tensor, deterministic: bool = False, action_masks: Any = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out = self._forward_nodes(obs, deterministic, action_masks)
        return super().forward(obs, deterministic, action_masks) if out is None else out


class NodeSetExtractor(BaseFeaturesExtractor):
    """The node-set body as a features extractor (for DQN): per-node score
    embeddings and the context, flattened; its size fixes ``n_nodes``."""

    def __init__(
        self,
        observation_space: gym.spaces.Box,
        kind: str = "route",
        hidden: int = 64,
        hints: bool = False,
        spare_features: bool = False,
    ) -> None:
        node_features, global_features = feature_layout(kind, hints, spare_features)
        n = (observation_space.shape[0] - global_features) // node_features
        super().__init__(observation_space, features_dim=(n + 1) * hidden)
        self.body = NodeSetNetwork(node_features, global_features, hidden)

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.body(observations)[0]
