"""Lean categorical action distributions for the node-set policies.

SB3's ``MultiCategoricalDistribution`` and sb3-contrib's masked one build one
``torch.distributions.Categorical`` per action dimension at every forward pass
(route + warm on four nodes: six of them, each validating and normalising its
own logits), which cost more than the network itself. :class:`LeanCategoricals`
keeps every dimension in one padded ``(batch, dimensions, largest size)``
tensor and normalises it with one ``log_softmax``.

The maths is sb3-contrib's: a masked choice's logit becomes ``MASKED_LOGIT``
(-1e8, so its probability is 0 and a dimension with every choice masked is
uniform), log-probabilities are the normalised logits, and the entropy leaves
masked choices out. Samples are drawn from the same distribution, with a
different use of torch's random stream (one ``multinomial`` call for all the
dimensions).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.distributions import MultiCategoricalDistribution
from torch import nn

MASKED_LOGIT = -1e8
"""The logit of a masked choice (sb3-contrib's value)."""


class LeanCategoricals(MultiCategoricalDistribution):
    """Independent categoricals over the dimensions of a Discrete (``discrete``:
    actions of shape ``(batch,)``) or MultiDiscrete action, with optional masks
    (:meth:`apply_masking`, as MaskablePPO calls it)."""

    def __init__(self, action_dims: Sequence[int], discrete: bool = False) -> None:
        super().__init__([int(n) for n in action_dims])
        dims = self.action_dims
        self.discrete = discrete
        self.n_choices = sum(dims)
        self.largest = max(dims)
        # position of choice (d, k) in the flat logits; padding reads column n_choices
        index = np.full((len(dims), self.largest), self.n_choices, dtype=np.int64)
        offsets = np.cumsum([0, *dims[:-1]])
        for d, (n, offset) in enumerate(zip(dims, offsets)):
            index[d, :n] = np.arange(offset, offset + n)
        self._index = torch.as_tensor(index.reshape(-1))
        self._valid = torch.as_tensor(index < self.n_choices)
        self._padded_layout = self.largest * len(dims) != self.n_choices
        # what a choice that is not kept reads: MASKED_LOGIT, or -inf on the padding
        self._unkept = torch.where(self._valid, MASKED_LOGIT, -torch.inf)
        self._logits = torch.empty(0)
        self._keep: torch.Tensor = self._valid
        self._log_p: torch.Tensor | None = torch.empty(0)

    @property
    def log_p(self) -> torch.Tensor:
        """Normalised log-probabilities, ``(batch, dimensions, largest size)``;
        padding is -inf. Unmasked ones are normalised when first asked for:
        MaskablePPO masks every distribution it makes, so normalising the
        unmasked logits first would be work thrown away."""
        if self._log_p is None:
            self._log_p = self._logits.log_softmax(dim=-1)
        return self._log_p

    def proba_distribution_net(self, latent_dim: int) -> nn.Module:
        return nn.Linear(latent_dim, self.n_choices)

    def _pad(self, flat: torch.Tensor, fill: Any) -> torch.Tensor:
        """``(batch, n_choices)`` -> ``(batch, dimensions, largest)``, padding ``fill``."""
        if self._padded_layout:
            extra = flat.new_full((flat.shape[0], 1), fill)
            flat = torch.cat([flat, extra], dim=1)[:, self._index.to(flat.device)]
        return flat.reshape(flat.shape[0], len(self.action_dims), self.largest)

    def proba_distribution(self, action_logits: torch.Tensor) -> LeanCategoricals:
        self._valid = self._valid.to(action_logits.device)
        self._logits = self._pad(action_logits.reshape(-1, self.n_choices), -torch.inf)
        self._keep = self._valid
        self._log_p = None
        return self

    def apply_masking(self, masks: Any) -> None:
        """Mask choices (``masks``: True = allowed, flat per sample as MaskablePPO
        gives them); ``None`` removes any mask."""
        if masks is None:
            self._keep = self._valid
            self._log_p = None
            return
        flat = torch.as_tensor(masks, dtype=torch.bool, device=self._logits.device)
        flat = flat.reshape(-1, self.n_choices)
        self._keep = self._pad(flat, False)  # padding is never kept
        self._unkept = self._unkept.to(self._logits.device)
        self._log_p = torch.where(self._keep, self._logits, self._unkept).log_softmax(dim=-1)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        chosen = actions.long().reshape(-1, len(self.action_dims), 1)
        return self.log_p.gather(-1, chosen).squeeze(-1).sum(dim=-1)

    def entropy(self) -> torch.Tensor:
        # clamped so that 0 * -inf (padding) is 0, in the gradient too
        log_p = self.log_p.clamp(min=torch.finfo(self.log_p.dtype).min)
        p_log_p = torch.where(self._keep, log_p.exp() * log_p, 0.0)
        return -p_log_p.sum(dim=(-1, -2))

    def _shaped(self, choice: torch.Tensor) -> torch.Tensor:
        return choice[:, 0] if self.discrete else choice

    def sample(self) -> torch.Tensor:
        probs = self.log_p.exp().reshape(-1, self.largest)
        drawn = torch.multinomial(probs, 1, replacement=True)
        return self._shaped(drawn.reshape(-1, len(self.action_dims)))

    def mode(self) -> torch.Tensor:
        return self._shaped(self.log_p.argmax(dim=-1))

    def actions_from_params(
        self, action_logits: torch.Tensor, deterministic: bool = False
    ) -> torch.Tensor:
        self.proba_distribution(action_logits)
        return self.get_actions(deterministic=deterministic)

    def log_prob_from_params(
        self, action_logits: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        actions = self.actions_from_params(action_logits)
        return actions, self.log_prob(actions)


def lean_distribution(action_space: spaces.Space[Any]) -> LeanCategoricals:
    """The lean distribution of a Discrete or MultiDiscrete action space."""
    if isinstance(action_space, spaces.Discrete):
        return LeanCategoricals([int(action_space.n)], discrete=True)
    if isinstance(action_space, spaces.MultiDiscrete) and action_space.nvec.ndim == 1:
        return LeanCategoricals([int(n) for n in action_space.nvec])
    raise ValueError(f"no lean categorical distribution for the action space {action_space}")


def kl_divergence(p: LeanCategoricals, q: LeanCategoricals) -> torch.Tensor:
    """``KL(p || q)`` per sample, ``(batch,)``: the sum over the action dimensions
    of ``sum_k p_k (log p_k - log q_k)`` over the choices ``p`` allows (a choice
    ``p`` masks has probability 0 and adds nothing; padding adds nothing). Both
    must be over the same action dimensions, batch and masks (a choice ``q`` masks
    and ``p`` allows counts as log-probability -1e8)."""
    if p.action_dims != q.action_dims or p.log_p.shape != q.log_p.shape:
        raise ValueError(
            f"kl_divergence: distributions over {p.action_dims} x {tuple(p.log_p.shape)} "
            f"and {q.action_dims} x {tuple(q.log_p.shape)}"
        )
    return kl_from(p.log_p, p._keep, q)


def kl_from(log_p: torch.Tensor, keep: torch.Tensor, q: LeanCategoricals) -> torch.Tensor:
    """:func:`kl_divergence` from a distribution given by its normalised
    log-probabilities and the choices it allows (``log_p`` and ``_keep`` of a
    :class:`LeanCategoricals`, kept after its policy moved on) to ``q``."""
    if log_p.shape != q.log_p.shape:
        raise ValueError(
            f"kl_from: log-probabilities {tuple(log_p.shape)} and "
            f"{q.action_dims} x {tuple(q.log_p.shape)}"
        )
    tiny = torch.finfo(log_p.dtype).min  # so that 0 * -inf is 0, in the gradient too
    log_p, log_q = log_p.clamp(min=tiny), q.log_p.clamp(min=tiny)
    terms = torch.where(keep, log_p.exp() * (log_p - log_q), 0.0)
    return terms.sum(dim=(-1, -2))
