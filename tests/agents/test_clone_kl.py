"""The penalty towards the clone (agent.clone_kl_coef): the KL of two known
categoricals, the loss term's gradient, and coefficient 0 leaving the update as
the algorithm's own."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

import envs  # noqa: F401  (registers the environments)
from agents.algorithms import AgentSpec, CloneKL, build_model
from agents.distributions import LeanCategoricals, kl_divergence
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

SMALL = BurstedSyntheticConfig(n_bursts=2, burst_requests=30, n_decoys=4, burst_window_s=4.0)
HP = {"n_steps": 64, "batch_size": 32, "n_epochs": 2}


def _dist(
    logits: list[float], dims: list[int], masks: list[bool] | None = None
) -> LeanCategoricals:
    dist = LeanCategoricals(dims)
    dist.proba_distribution(torch.tensor([logits]))
    dist.apply_masking(None if masks is None else np.array([masks]))
    return dist


def test_kl_of_two_known_categoricals() -> None:
    # dimension 0: p = [1/2, 1/2], q = [1/4, 3/4]; dimension 1 (3 choices, the
    # middle one masked in both): p = [1/2, 0, 1/2], q = softmax([0, ., ln 3]) = [1/4, 0, 3/4]
    masks = [True, True, True, False, True]
    p = _dist([0.0, 0.0, 0.0, 9.0, 0.0], [2, 3], masks)
    q = _dist([0.0, math.log(3.0), 0.0, -2.0, math.log(3.0)], [2, 3], masks)
    one_dim = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)  # = ln(4/3) / 2
    assert kl_divergence(p, q).item() == pytest.approx(2 * one_dim, abs=1e-6)
    assert kl_divergence(p, p).item() == pytest.approx(0.0, abs=1e-7)
    # the padded layout (dimensions of 2 and 3 choices) adds nothing and stays finite
    assert torch.isfinite(kl_divergence(q, p)).all()
    with pytest.raises(ValueError, match="kl_divergence"):
        kl_divergence(p, _dist([0.0, 0.0], [2]))


@pytest.fixture(scope="module")
def window():
    return synthetic_window(SMALL, window=2)


def _model(window, seed: int = 0):
    spec = AgentSpec(algo="maskable_ppo", env="route_warm", hidden=16, seed=seed)
    env = gym.make(spec.env_id, windows=[window])
    return build_model(spec, env, dict(HP))


def test_the_loss_term_adds_coef_times_the_kl_gradient(window) -> None:
    model = _model(window)
    policy = model.policy
    regulariser = CloneKL(model, coef=0.5)
    with torch.no_grad():  # move the policy away from its clone
        for param in policy.parameters():
            param.add_(0.1 * torch.randn_like(param))
    obs = torch.rand(5, policy.observation_space.shape[0])
    masks = np.ones((5, sum(policy.action_dist.action_dims)), dtype=bool)
    actions = torch.zeros(5, len(policy.action_dist.action_dims))
    policy.evaluate_actions(obs, actions, action_masks=masks)
    policy.optimizer.zero_grad()  # the wrapped one: zeroes, then back-propagates the term
    got = {n: p.grad.clone() for n, p in policy.named_parameters() if p.grad is not None}

    # by hand: KL(clone || policy) from the two networks' own masked distributions
    for param in policy.parameters():
        param.grad = None
    clone = regulariser.clone.get_distribution(obs, action_masks=masks)
    mine = policy.get_distribution(obs, action_masks=masks)
    log_c, log_p = clone.log_p.detach(), mine.log_p
    by_hand = torch.where(clone._keep, log_c.exp() * (log_c - log_p), 0.0).sum(dim=(1, 2))
    assert regulariser.history[-1][1] == pytest.approx(float(by_hand.mean().detach()), rel=1e-5)
    assert regulariser.history[-1][1] > 0
    (0.5 * by_hand.mean()).backward()
    assert got and any(g.abs().sum() > 0 for g in got.values())
    for name, param in policy.named_parameters():
        expected = param.grad if param.grad is not None else torch.zeros_like(param)
        torch.testing.assert_close(got.get(name, torch.zeros_like(param)), expected)
    assert all(not p.requires_grad for p in regulariser.clone.parameters())


def test_coef_zero_updates_exactly_as_without_it_and_coef_pulls_towards_the_clone(window) -> None:
    def trained(coef: float | None) -> tuple[dict[str, torch.Tensor], CloneKL | None]:
        model = _model(window)
        regulariser = None if coef is None else CloneKL(model, coef)
        model.learn(64)
        return {n: p.detach().clone() for n, p in model.policy.named_parameters()}, regulariser

    plain, _ = trained(None)
    zero, watched = trained(0.0)
    assert plain.keys() == zero.keys()
    assert all(torch.equal(plain[n], zero[n]) for n in plain)  # bit-identical
    assert watched is not None and len(watched.history) == 4  # 2 epochs x 2 minibatches
    start, _ = (_model(window).policy.state_dict(), None)
    strong, pulled = trained(1e4)
    assert pulled is not None and watched.history[-1][1] > 0

    def distance(params: dict[str, torch.Tensor]) -> float:
        return sum(float((params[n] - start[n]).abs().sum()) for n in params)

    assert distance(strong) < distance(plain)
    assert [r["step"] for r in pulled.per_rollout()] == [64]


def test_bad_values_are_refused(window) -> None:
    model = _model(window)
    with pytest.raises(ValueError, match=r"agent\.clone_kl_coef"):
        CloneKL(model, -1.0)
    with pytest.raises(ValueError, match=r"agent\.clone_kl_schedule"):
        CloneKL(model, 1.0, "cosine")
    mlp = AgentSpec(algo="ppo", env="route_warm", net="mlp", hidden=16)
    env = gym.make(mlp.env_id, windows=[window])
    with pytest.raises(ValueError, match="node-set actor-critic"):
        CloneKL(build_model(mlp, env, dict(HP)), 1.0)


def test_linear_schedule_falls_with_progress(window) -> None:
    model = _model(window)
    regulariser = CloneKL(model, 2.0, "linear")
    model._current_progress_remaining = 0.25
    assert regulariser.current_coef() == pytest.approx(0.5)


def test_each_update_s_kl_reaches_the_run_logger(window) -> None:
    """helper-78's audit: the KL was kept in the run's record only; UpdateStats
    (update/*, W&B) now reads it with the other update statistics: the mean of the
    update's minibatch KLs, as CloneKL.per_rollout gives it."""
    from agents.callbacks import UpdateStats

    model = _model(window)
    regulariser = CloneKL(model, 1.0)
    stats = UpdateStats()
    model.learn(128, callback=stats)  # two rollouts of 64: the first update read at the second
    (first, *_) = regulariser.per_rollout()
    assert stats.history[0]["clone_kl"] == pytest.approx(first["clone_kl"], rel=1e-6)
