"""The RL recipe's knobs on a built model: start from a saved agent's weights,
warm up the critic with the policy frozen, decay the learning rate, and start a
fresh route + warm policy with a prior towards not warming.

Behavioural cloning (``agents.imitation``) leaves the critic untrained; PPO
started from such a clone takes its first updates with advantages from an
untrained value function, and on a shared body the value loss's gradient
dwarfs the policy's. :func:`warm_up_critic` fits the value function first, on
rollouts of the frozen policy, so RL starts from advantages that mean something.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agents.algorithms import AgentSpec, load_agent
from envs.sim.errors import echoed

LR_SCHEDULES = ("constant", "linear")


def learning_rate(value: float, schedule: str) -> float | Callable[[float], float]:
    """SB3's ``learning_rate`` for ``agent.lr_schedule``: ``constant`` (the number) or
    ``linear`` (from ``value`` down to 0 at the end of the run)."""
    if schedule not in LR_SCHEDULES:
        raise ValueError(
            f"agent.lr_schedule must be one of {', '.join(LR_SCHEDULES)}, got {echoed(schedule)}"
        )
    if schedule == "constant":
        return value
    return _Linear(value)


def schedule_of(learning_rate: Any) -> tuple[str, float] | None:
    """The inverse of :func:`learning_rate`: ``(agent.lr_schedule, the rate it starts
    from)`` of a model's saved ``learning_rate``; None for a schedule of other code."""
    if isinstance(learning_rate, _Linear):
        return "linear", learning_rate.value
    if isinstance(learning_rate, (int, float)) and not isinstance(learning_rate, bool):
        return "constant", float(learning_rate)
    return None


class _Linear:
    """``value x progress remaining`` (a class, so a saved model pickles it)."""

    def __init__(self, value: float) -> None:
        self.value = float(value)

    def __call__(self, progress_remaining: float) -> float:
        return self.value * progress_remaining


def init_from(model: Any, spec: AgentSpec, folder: str | Path) -> list[str]:
    """Copy a saved agent's weights into ``model`` (built for ``spec``): every
    parameter of the same name and shape. Returns the names left as initialised
    (e.g. a separate critic's, when the saved agent's critic was shared). The saved
    agent must be the same algorithm on the same env kind and network."""
    saved_model, saved = load_agent(folder)
    for field in ("algo", "env", "net", "hidden"):
        if getattr(saved, field) != getattr(spec, field):
            path = "env.kind" if field == "env" else f"agent.{field}"
            raise ValueError(
                f"train.init_from={folder}: that agent has {path}={getattr(saved, field)}, "
                f"the config asks for {getattr(spec, field)} (start from an agent of the "
                "same algorithm, env kind and network)"
            )
    source = saved_model.policy.state_dict()
    target = model.policy.state_dict()
    copied = {k: v for k, v in source.items() if k in target and target[k].shape == v.shape}
    model.policy.load_state_dict(copied, strict=False)
    return sorted(set(target) - set(copied))


def scale_logits(policy: Any, factor: float) -> None:
    """Multiply ``policy``'s action logits by ``factor`` (> 0): every weight and bias
    of its action head (``action_net``, a linear layer or the node-set heads, whose
    logits are each one linear output). Its greedy actions are unchanged (a power of
    2 scales every float exactly); its sampled actions come closer to them."""
    import torch

    head = getattr(policy, "action_net", None)
    if head is None or not list(head.parameters()):
        raise ValueError(f"{type(policy).__name__} has no action head to scale")
    if any(not isinstance(m, (torch.nn.Linear, type(head))) for m in head.modules()):
        raise ValueError(
            f"{type(policy).__name__}'s action head is not linear layers alone: "
            "scaling its weights would not scale its logits"
        )
    with torch.no_grad():
        for param in head.parameters():
            param.mul_(factor)


def set_warm_prior(policy: Any, log_odds: float) -> None:
    """Start ``policy`` (the node-set MaskablePPO / PPO policy of ``route_warm``)
    warming each node with probability ``sigmoid(log_odds)``: the warm heads'
    output weights (started near 0) are kept and their biases set to
    ``[0, log_odds]`` for (no, yes). From scratch, the even odds of a fresh head
    send a copy to half the nodes at every arrival."""
    import torch

    head = getattr(getattr(policy, "action_net", None), "node_logits", None)
    if getattr(policy, "kind", None) != "route_warm" or head is None:
        raise ValueError(
            "agent.warm_prior is for env.kind=route_warm with agent.net=set "
            f"(a node-set policy with warm heads), got {type(policy).__name__}"
        )
    with torch.no_grad():
        head.bias[1] = 0.0  # warm: no
        head.bias[2] = float(log_odds)  # warm: yes


def critic_parameters(policy: Any) -> list[Any]:
    """The parameters only the value function uses: the value head, a separate
    critic's body (``agent.critic=separate``), and SB3's ``MlpPolicy`` critic branch
    (``mlp_extractor.value_net``; ``vf_features_extractor`` when features are not
    shared)."""
    return [param for name, param in policy.named_parameters() if name.startswith(CRITIC_PREFIXES)]


CRITIC_PREFIXES = (
    "value_net.",  # the value head
    "mlp_extractor.critic_",  # the node-set network's separate critic
    "mlp_extractor.value_net.",  # SB3's MlpExtractor: the critic's hidden layers
    "vf_features_extractor.",  # SB3: the critic's own extractor (share_features_extractor=False)
)


@contextmanager
def actor_frozen(policy: Any) -> Iterator[None]:
    """Within the block, only :func:`critic_parameters` get gradients."""
    critic = {id(p) for p in critic_parameters(policy)}
    frozen = [p for p in policy.parameters() if id(p) not in critic and p.requires_grad]
    for param in frozen:
        param.requires_grad_(False)
    try:
        yield
    finally:
        for param in frozen:
            param.requires_grad_(True)


def warm_up_critic(model: Any, steps: int, callback: Any = None) -> None:
    """Train ``model`` (PPO / A2C / MaskablePPO) for ``steps`` env steps with every
    parameter but the critic's frozen: the policy acts, and is left, as it was.
    The learning rate stays at its start value (a schedule begins after)."""
    if steps <= 0:
        return
    schedule = model.lr_schedule
    start_lr = float(schedule(1.0))
    model.lr_schedule = _Constant(start_lr)
    try:
        with actor_frozen(model.policy):
            model.learn(steps, callback=callback, reset_num_timesteps=False)
    finally:
        model.lr_schedule = schedule


class _Constant:
    def __init__(self, value: float) -> None:
        self.value = value

    def __call__(self, progress_remaining: float) -> float:
        return self.value
