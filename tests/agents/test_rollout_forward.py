"""The node-set policies' rollout forward pass (``forward``: actions, values,
log-probabilities) gives what SB3's and sb3-contrib's own ``forward`` give, to
the last bit and with the same draws from torch's random stream, for every
head, critic and action option: it only skips the actor latent's
concatenation and split, and normalising unmasked logits that masks replace."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.policies import ActorCriticPolicy

from agents.networks import MaskableNodeScoringPolicy, NodeScoringPolicy, feature_layout
from envs.route_warm import route_warm_sizes

N_NODES = 4


def _policy(cls, kind: str, critic: str, speculate=False, cache_actions=False, hints=False):
    node_features, global_features = feature_layout(kind, hints)
    size = N_NODES * node_features + global_features
    observations = spaces.Box(-5.0, 5.0, (size,), dtype=np.float32)
    if kind == "route":
        actions: spaces.Space = spaces.Discrete(N_NODES)
    elif kind == "route_warm":
        actions = spaces.MultiDiscrete(route_warm_sizes(N_NODES, speculate, cache_actions))
    else:
        actions = spaces.MultiDiscrete([4, 5, 3, 6])
    torch.manual_seed(0)
    policy = cls(
        observations,
        actions,
        lambda _: 3e-4,
        kind=kind,
        critic=critic,
        speculate=speculate,
        cache_actions=cache_actions,
        hints=hints,
    )
    for module in policy.action_net.modules():  # logits far from uniform
        if isinstance(module, torch.nn.Linear):
            torch.nn.init.normal_(module.weight, std=1.0)
    policy.set_training_mode(False)
    rng = np.random.default_rng(1)
    obs = torch.as_tensor(rng.normal(size=(16, size)).astype(np.float32))
    return policy, obs, rng


def _same(ours, theirs) -> None:
    for a, b in zip(ours, theirs, strict=True):
        assert a.shape == b.shape and torch.equal(a, b)


@pytest.mark.parametrize("critic", ["shared", "separate", "detached"])
@pytest.mark.parametrize(
    ("speculate", "cache_actions", "hints"),
    [(False, False, False), (True, False, False), (False, True, True), (True, True, False)],
)
@pytest.mark.parametrize("deterministic", [False, True])
def test_maskable_forward_is_sb3_contribs(critic, speculate, cache_actions, hints, deterministic):
    policy, obs, rng = _policy(
        MaskableNodeScoringPolicy, "route_warm", critic, speculate, cache_actions, hints
    )
    sizes = route_warm_sizes(N_NODES, speculate, cache_actions)
    masks = rng.random((16, sum(sizes))) < 0.6
    for start in np.cumsum([0, *sizes[:-1]]):  # every dimension keeps one choice
        masks[np.arange(16), start + rng.integers(0, 2, size=16)] = True
    for given in (masks, None):
        with torch.no_grad():
            torch.manual_seed(7)
            ours = policy(obs, deterministic, given)
            torch.manual_seed(7)
            theirs = MaskableActorCriticPolicy.forward(policy, obs, deterministic, given)
        _same(ours, theirs)
        if given is not None:  # a masked choice is never taken
            chosen = np.asarray(ours[0]) + np.cumsum([0, *sizes[:-1]])
            assert masks[np.arange(16)[:, None], chosen].all()


@pytest.mark.parametrize("kind", ["route", "route_warm", "thresholds"])
@pytest.mark.parametrize("critic", ["shared", "separate"])
def test_forward_is_sb3s(kind, critic):
    policy, obs, _ = _policy(NodeScoringPolicy, kind, critic)
    with torch.no_grad():
        torch.manual_seed(7)
        ours = policy(obs)
        torch.manual_seed(7)
        theirs = ActorCriticPolicy.forward(policy, obs)
    _same(ours, theirs)
    assert ours[0].shape == ((16,) if kind == "route" else (16, len(policy.action_space.nvec)))


@pytest.mark.parametrize("critic", ["shared", "separate", "detached"])
def test_threshold_controller_skips_the_score_embeddings(critic):
    """The threshold controller's head reads the context alone: its forward passes
    (rollout, evaluation, actor, critic) never run the per-node score layer, and
    the context they give is the one the per-node body computes beside it."""
    policy, obs, _ = _policy(NodeScoringPolicy, "thresholds", critic)
    body = policy.mlp_extractor
    calls = []
    body.score_net.register_forward_hook(lambda *_: calls.append(1))
    with torch.no_grad():
        actor, value_latent = body(obs)
        policy(obs)
        policy.evaluate_actions(obs, torch.zeros((16, 4), dtype=torch.long))
        actor_only = body.forward_actor(obs)
        body.forward_critic(obs)
    assert calls == []
    with torch.no_grad():
        scores, context = body.embed(obs)  # the per-node path, score layer and all
    assert calls == [1]
    assert torch.equal(actor, context) and torch.equal(actor_only, context)
    assert torch.equal(value_latent, body.critic_latent(obs, context))
