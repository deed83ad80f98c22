"""The lean categorical distributions against SB3's and sb3-contrib's."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces
from sb3_contrib.common.maskable.distributions import MaskableMultiCategoricalDistribution
from stable_baselines3.common.distributions import CategoricalDistribution

from agents.distributions import LeanCategoricals, lean_distribution

ROUTE_WARM_DIMS = [4, 2, 2, 2, 2, 5]  # MultiDiscrete([n] + [2] * n + [n + 1]) on 4 nodes


def test_worked_example_masked() -> None:
    # dimension 0: logits [0, ln 3] -> p = [1/4, 3/4]; dimension 1: [0, 5, 0] with the
    # middle choice masked -> p = [1/2, 0, 1/2]
    dist = LeanCategoricals([2, 3])
    dist.proba_distribution(torch.tensor([[0.0, math.log(3.0), 0.0, 5.0, 0.0]]))
    dist.apply_masking(np.array([[True, True, True, False, True]]))
    log_prob = dist.log_prob(torch.tensor([[1, 2]]))
    assert log_prob.item() == pytest.approx(math.log(0.75) + math.log(0.5), abs=1e-6)
    entropy = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75)) + math.log(2.0)
    assert dist.entropy().item() == pytest.approx(entropy, abs=1e-6)
    assert dist.mode().tolist() == [[1, 0]]  # ties: the first choice, as argmax gives
    dist.apply_masking(None)  # unmasked again: [1/4, 3/4] and softmax([0, 5, 0])
    middle = math.exp(5.0) / (2.0 + math.exp(5.0))
    assert dist.log_prob(torch.tensor([[0, 1]])).item() == pytest.approx(
        math.log(0.25) + math.log(middle), abs=1e-6
    )


def _random_case(seed: int, batch: int = 64) -> tuple[torch.Tensor, np.ndarray, torch.Tensor]:
    """Random logits, masks with at least one allowed choice per dimension, and
    actions among the allowed choices (what a masked rollout stores)."""
    rng = np.random.default_rng(seed)
    logits = torch.as_tensor(
        rng.normal(0.0, 3.0, (batch, sum(ROUTE_WARM_DIMS))), dtype=torch.float32
    )
    masks = rng.random((batch, sum(ROUTE_WARM_DIMS))) < 0.6
    actions = np.zeros((batch, len(ROUTE_WARM_DIMS)), dtype=np.int64)
    offset = 0
    for d, n in enumerate(ROUTE_WARM_DIMS):
        for b in range(batch):
            allowed = masks[b, offset : offset + n]
            allowed[rng.integers(n)] = True
            actions[b, d] = rng.choice(np.flatnonzero(allowed))
        offset += n
    return logits, masks, torch.as_tensor(actions)


def test_every_choice_masked_is_uniform() -> None:
    # sb3-contrib sets every logit to -1e8 and subtracts their logsumexp in float32,
    # where -1e8 + ln 3 rounds to -1e8: its log-probabilities are 0 (summing to 3);
    # the lean distribution's are the uniform -ln 3, and the entropy 0 in both
    dist = LeanCategoricals([3]).proba_distribution(torch.tensor([[1.0, 2.0, 3.0]]))
    dist.apply_masking(np.array([[False, False, False]]))
    assert dist.log_prob(torch.tensor([[2]])).item() == pytest.approx(-math.log(3.0))
    assert dist.entropy().item() == 0.0


@pytest.mark.parametrize("masked", [True, False])
def test_same_log_prob_entropy_and_gradients_as_sb3_contrib(masked: bool) -> None:
    for seed in range(3):
        logits, masks, actions = _random_case(seed)
        results = []
        for dist in (
            LeanCategoricals(ROUTE_WARM_DIMS),
            MaskableMultiCategoricalDistribution(ROUTE_WARM_DIMS),
        ):
            leaf = logits.clone().requires_grad_(True)
            dist.proba_distribution(leaf)
            dist.apply_masking(masks if masked else None)
            log_prob, entropy = dist.log_prob(actions), dist.entropy()
            (log_prob.sum() + 0.5 * entropy.sum()).backward()
            assert leaf.grad is not None and torch.isfinite(leaf.grad).all()
            results.append((log_prob.detach(), entropy.detach(), leaf.grad, dist.mode()))
        (lean_lp, lean_h, lean_g, lean_mode), (ref_lp, ref_h, ref_g, ref_mode) = results
        torch.testing.assert_close(lean_lp, ref_lp, rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(lean_h, ref_h, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(lean_g, ref_g, rtol=1e-4, atol=1e-5)
        assert torch.equal(lean_mode, ref_mode)


def test_discrete_matches_sb3_categorical() -> None:
    logits, _, _ = _random_case(7)
    logits = logits[:, :4]
    actions = torch.as_tensor(np.random.default_rng(7).integers(0, 4, len(logits)))
    lean = lean_distribution(spaces.Discrete(4)).proba_distribution(logits)
    ref = CategoricalDistribution(4).proba_distribution(logits)
    torch.testing.assert_close(lean.log_prob(actions), ref.log_prob(actions))
    torch.testing.assert_close(lean.entropy(), ref.entropy())
    assert torch.equal(lean.mode(), ref.mode())
    assert lean.sample().shape == (len(logits),)  # a Discrete action per sample


def test_masked_choices_never_sampled_and_frequencies_follow_probabilities() -> None:
    torch.manual_seed(0)
    logits, masks, _ = _random_case(11, batch=8)
    one = LeanCategoricals(ROUTE_WARM_DIMS).proba_distribution(logits)
    one.apply_masking(masks)
    dist = LeanCategoricals(ROUTE_WARM_DIMS).proba_distribution(logits.repeat(4000, 1))
    dist.apply_masking(np.tile(masks, (4000, 1)))
    draws = dist.sample().reshape(4000, len(logits), -1)  # (draws, batch, dims)
    probs = one.log_p.exp()  # (batch, dims, largest)
    offsets = np.cumsum([0, *ROUTE_WARM_DIMS[:-1]])
    for d, (n, offset) in enumerate(zip(ROUTE_WARM_DIMS, offsets)):
        chosen = draws[:, :, d].numpy()
        allowed = masks[:, offset : offset + n]
        for b in range(len(logits)):
            if allowed[b].any():  # a dimension with every choice masked is uniform
                assert allowed[b][chosen[:, b]].all()
            share = np.bincount(chosen[:, b], minlength=n) / len(chosen)
            np.testing.assert_allclose(share, probs[b, d, :n].numpy(), atol=0.03)
