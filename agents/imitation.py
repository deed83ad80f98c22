"""Behavioural cloning: pretrain a route (+ warm) agent on a causal teacher's decisions.

The teacher (:class:`agents.teacher.CausalTeacher`) acts inside the very
environment the agent trains in (``env.policy_action``), so the observations
are the encoder's and the labels are actions in the env's own action space:

* ``btb/Route-v0``: the teacher's node;
* ``btb/RouteWarm-v0``: ``[node] + [1 for each node the teacher copied the
  prefix to] + [0]`` (the teacher never evicts), with the env's action mask.

:func:`pretrain` fits the SB3 policy by maximum likelihood of those labels
(cross-entropy over every action component). With ``value_coef > 0`` it also
regresses the value head on the discounted returns of the teacher's episodes;
the default (0) leaves the critic untrained, since for the node-set policies it
shares the body and fitting the large returns spoils the actor, so a later PPO /
MaskablePPO fine-tune needs a critic warm-up. Everything is driven by
:class:`ImitationSettings` (the ``imitation`` group of the train config).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from agents.distributions import LeanCategoricals, kl_from
from agents.imitation_settings import ImitationSettings
from agents.teacher import CausalTeacher
from envs.sim.errors import plural


@dataclass
class Demonstrations:
    """Observations, labelled actions, masks (RouteWarm only) and returns."""

    obs: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    masks: list[np.ndarray] = field(default_factory=list)
    returns: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.obs)


def collect(
    env: Any,
    teacher: CausalTeacher,
    episodes: int,
    gamma: float = 0.99,
    out: Demonstrations | None = None,
) -> Demonstrations:
    """Run ``teacher`` through ``env`` (an unwrapped btb Route / RouteWarm env)
    for ``episodes`` episodes (windows in turn) and record labelled steps."""
    out = out if out is not None else Demonstrations()
    warm = isinstance(env.action_space, spaces.MultiDiscrete)
    n = env.n_nodes
    for episode in range(episodes):
        obs, _ = env.reset(seed=episode, options={"window": episode % len(env.windows)})
        teacher.reset(env.sim)
        rewards: list[float] = []
        done = False
        while not done:
            if warm:
                out.masks.append(env.action_masks().copy())
            copies_before = len(env.sim.copies)
            action = env.policy_action(teacher)
            label = np.array(action, dtype=np.int64).reshape(-1)
            if warm:
                for copy in env.sim.copies[copies_before:]:
                    label[1 + copy.dst] = 1
            out.obs.append(np.array(obs, dtype=np.float32))
            out.actions.append(label if warm else label[:1])
            obs, reward, done, _, _ = env.step(action)
            rewards.append(float(reward))
        running = 0.0
        returns = [0.0] * len(rewards)
        for t in range(len(rewards) - 1, -1, -1):
            running = rewards[t] + gamma * running
            returns[t] = running
        out.returns.extend(returns)
        assert n == env.n_nodes
    return out


def pretrain(
    model: Any,
    demos: Demonstrations,
    settings: ImitationSettings,
    seed: int = 0,
    keep_agreeing: bool = False,
) -> dict[str, float]:
    """Fit ``model.policy`` (an SB3 actor-critic) to ``demos``; returns the last
    epoch's mean action loss, value loss and action accuracy (all components right).

    With ``keep_agreeing`` (node-set policies only), a label that the policy's
    greedy action equals in every component before the fit is fitted by the KL
    divergence from the policy's distribution there before the fit, instead of
    cross-entropy to the label, so the fit is pulled back towards that whole
    distribution (Adam's normalised steps still move the weights where every
    label agrees); the share of such labels is returned too (``bc_agreeing``)."""
    if not len(demos):
        raise ValueError("no demonstrations to pretrain on (imitation.episodes = 0?)")
    policy = model.policy
    device = policy.device
    obs = torch.as_tensor(np.stack(demos.obs), device=device)
    actions = torch.as_tensor(np.stack(demos.actions), device=device)
    returns = torch.as_tensor(np.asarray(demos.returns, dtype=np.float32), device=device)
    masks = torch.as_tensor(np.stack(demos.masks), device=device) if demos.masks else None
    if isinstance(model.action_space, spaces.Discrete):
        actions = actions[:, 0]
    optimizer = torch.optim.Adam(policy.parameters(), lr=settings.learning_rate)
    generator = torch.Generator().manual_seed(seed)
    n = obs.shape[0]
    stats = {"bc_action_loss": float("nan"), "bc_value_loss": float("nan"), "bc_accuracy": 0.0}
    agree = kept = keep = None
    if keep_agreeing:
        agree, kept, keep = _before_fit(policy, obs, actions, masks, settings.batch_size)
        stats["bc_agreeing"] = float(agree.float().mean())
    policy.set_training_mode(True)
    for _ in range(settings.epochs):
        order = torch.randperm(n, generator=generator)
        totals = np.zeros(3)
        for start in range(0, n, settings.batch_size):
            idx = order[start : start + settings.batch_size]
            batch_actions = actions[idx]
            dist = _distribution(policy, obs[idx], masks, idx)
            log_prob = dist.log_prob(batch_actions)
            if agree is None or kept is None or keep is None:
                action_loss = -log_prob.mean()
            else:
                kl = kl_from(kept[idx], keep[idx], dist)
                action_loss = torch.where(agree[idx], kl, -log_prob).mean()
            values = policy.predict_values(obs[idx]).flatten()
            value_loss = torch.nn.functional.mse_loss(values, returns[idx])
            loss = action_loss + settings.value_coef * value_loss
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
            optimizer.step()
            with torch.no_grad():
                greedy = dist.get_actions(deterministic=True).reshape(batch_actions.shape)
                right = (greedy == batch_actions).reshape(len(idx), -1).all(dim=1)
            totals += (
                action_loss.item() * len(idx),
                value_loss.item() * len(idx),
                float(right.float().sum()),
            )
        stats.update(
            bc_action_loss=totals[0] / n, bc_value_loss=totals[1] / n, bc_accuracy=totals[2] / n
        )
    policy.set_training_mode(False)
    return stats


def _distribution(
    policy: Any, obs: torch.Tensor, masks: torch.Tensor | None, idx: torch.Tensor
) -> Any:
    """``policy``'s action distribution at ``obs`` (rows ``idx`` of ``masks``)."""
    if masks is None:
        return policy.get_distribution(obs)
    return policy.get_distribution(obs, action_masks=masks[idx].cpu().numpy())


def _before_fit(
    policy: Any,
    obs: torch.Tensor,
    actions: torch.Tensor,
    masks: torch.Tensor | None,
    batch_size: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Whether ``policy``'s greedy action equals each label in every component, and
    its normalised log-probabilities and allowed choices at each observation."""
    agree, log_p, keep = [], [], []
    with torch.no_grad():
        for start in range(0, obs.shape[0], batch_size):
            idx = torch.arange(start, min(start + batch_size, obs.shape[0]))
            dist = _distribution(policy, obs[idx], masks, idx)
            if not isinstance(dist, LeanCategoricals):
                raise ValueError(
                    f"pretrain: keep_agreeing needs the node-set policies' distribution, "
                    f"got {type(dist).__name__}"
                )
            greedy = dist.get_actions(deterministic=True).reshape(actions[idx].shape)
            agree.append((greedy == actions[idx]).reshape(len(idx), -1).all(dim=1))
            log_p.append(dist.log_p.clone())
            keep.append(dist._keep.expand_as(dist.log_p).clone())
    return torch.cat(agree), torch.cat(log_p), torch.cat(keep)


def run_imitation(
    model: Any,
    env_id: str,
    sources: Sequence[dict[str, Any]],
    settings: ImitationSettings,
    seed: int = 0,
) -> dict[str, float]:
    """Collect ``settings.episodes`` teacher episodes in each source (gymnasium.make
    keyword arguments of ``env_id``) and pretrain ``model`` on all of them."""
    import gymnasium as gym

    import envs  # noqa: F401  (registers the environments)

    teacher = CausalTeacher(**settings.teacher)
    demos = Demonstrations()
    for k, kwargs in enumerate(sources):
        env: Any = gym.make(env_id, **kwargs).unwrapped  # a ClusterEnv
        family = env.windows[0].name.rsplit("/", 1)[0]
        where = f"{env.cluster.model.name}, {plural(len(env.windows), 'window')} of {family}"
        print(
            f"behavioural cloning: source {k + 1} of {len(sources)} ({where}): "
            f"{plural(settings.episodes, 'teacher episode')}",
            flush=True,
        )  # long work: say it as it starts
        collect(env, teacher, settings.episodes, float(getattr(model, "gamma", 0.99)), demos)
        env.close()
    print(f"behavioural cloning: fitting to {len(demos):,} decisions", flush=True)
    stats = pretrain(model, demos, settings, seed)
    stats["bc_steps"] = float(len(demos))
    return stats
