"""Fine-tuning knobs: the critic's body, critic warm-up, starting from a saved
agent, the learning-rate schedule, and keeping the best checkpoint by validation."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import envs  # noqa: F401  (registers the environments)
from agents.algorithms import AgentSpec, build_model, load_spec, save_agent
from agents.callbacks import KeepBestByValidation
from agents.finetune import critic_parameters, init_from, learning_rate, warm_up_critic
from agents.networks import NodeSetNetwork
from envs.encoder import NODE_FEATURES, REQUEST_FEATURES
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

SMALL = BurstedSyntheticConfig(n_bursts=2, burst_requests=30, n_decoys=4, burst_window_s=4.0)
HP = {"n_steps": 64, "batch_size": 32, "n_epochs": 2}


@pytest.fixture(scope="module")
def window():
    return synthetic_window(SMALL, window=2)


def _model(window, critic="shared", seed=0):
    spec = AgentSpec(algo="maskable_ppo", env="route_warm", hidden=16, critic=critic, seed=seed)
    env = gym.make(spec.env_id, windows=[window])
    return build_model(spec, env, dict(HP)), spec


def _grads_of_value_loss(critic: str) -> dict[str, bool]:
    """Which parameter groups the value's gradient reaches, per critic kind."""
    torch.manual_seed(0)
    net = NodeSetNetwork(len(NODE_FEATURES), len(REQUEST_FEATURES), hidden=8, critic=critic)
    obs = torch.rand(4, 3 * len(NODE_FEATURES) + len(REQUEST_FEATURES))
    head = torch.nn.Linear(8, 1)  # the value head
    head(net.forward(obs)[1]).sum().backward()
    assert head.weight.grad is not None

    def reached(prefix: str) -> bool:
        return any(
            p.grad is not None and bool(p.grad.abs().sum() > 0)
            for n, p in net.named_parameters()
            if n.startswith(prefix)
        )

    return {"actor": reached("node_net.") or reached("context_net."), "critic": reached("critic_")}


def test_the_value_gradient_reaches_the_actor_body_only_when_shared():
    assert _grads_of_value_loss("shared") == {"actor": True, "critic": False}
    assert _grads_of_value_loss("separate") == {"actor": False, "critic": True}
    assert _grads_of_value_loss("detached") == {"actor": False, "critic": False}
    with pytest.raises(ValueError, match=r"agent\.critic"):
        NodeSetNetwork(3, 2, critic="both")
    with pytest.raises(ValueError, match=r"agent\.critic"):
        AgentSpec(algo="dqn", env="route", critic="separate")


@pytest.mark.parametrize(
    ("algo", "net", "critic", "critic_names"),
    [
        ("maskable_ppo", "set", "separate", None),
        ("maskable_ppo", "set", "shared", {"value_net.weight", "value_net.bias"}),
        (
            "ppo",
            "mlp",
            "shared",
            {
                *(f"mlp_extractor.value_net.{i}.{p}" for i in (0, 2) for p in ("weight", "bias")),
                "value_net.weight",
                "value_net.bias",
            },
        ),
    ],
)
def test_critic_warm_up_trains_the_critic_and_leaves_the_policy(
    algo, net, critic, critic_names, window
):
    spec = AgentSpec(algo=algo, env="route_warm", net=net, hidden=16, critic=critic)
    model = build_model(spec, gym.make(spec.env_id, windows=[window]), dict(HP))
    before = {n: p.detach().clone() for n, p in model.policy.named_parameters()}
    ids = {id(p) for p in critic_parameters(model.policy)}
    names = {n for n, p in model.policy.named_parameters() if id(p) in ids}
    if critic_names is not None:  # the flat MLP: its whole critic branch, none of the actor
        assert names == critic_names
    else:
        assert any(n.startswith("mlp_extractor.critic_") for n in names)
    warm_up_critic(model, 64)
    assert model.num_timesteps == 64
    for name, param in model.policy.named_parameters():
        changed = not torch.equal(before[name], param.detach())
        assert changed == (name in names), name
        assert param.requires_grad  # unfrozen again


def test_init_from_copies_the_shared_weights_and_starts_a_new_critic(window, tmp_path):
    source, spec = _model(window, critic="shared", seed=1)
    save_agent(source, spec, tmp_path / "clone")
    model, new_spec = _model(window, critic="separate", seed=2)
    fresh = init_from(model, new_spec, tmp_path / "clone")
    assert fresh and all(name.startswith("mlp_extractor.critic_") for name in fresh)
    saved = source.policy.state_dict()
    for name, value in model.policy.state_dict().items():
        if name not in fresh:
            assert torch.equal(value, saved[name]), name
    other = AgentSpec(algo="maskable_ppo", env="route_warm", hidden=32)
    with pytest.raises(ValueError, match=r"agent\.hidden=16"):
        init_from(model, other, tmp_path / "clone")


def test_linear_learning_rate_falls_to_zero():
    schedule = learning_rate(3e-4, "linear")
    assert callable(schedule)
    assert schedule(1.0) == pytest.approx(3e-4) and schedule(0.25) == pytest.approx(7.5e-5)
    assert learning_rate(1e-3, "constant") == 1e-3
    with pytest.raises(ValueError, match=r"agent\.lr_schedule"):
        learning_rate(1e-3, "cosine")


def test_the_best_validation_score_is_the_saved_agent(window, tmp_path, capsys):
    """A score lowest at step 128 of 256: that step's model is saved, and is kept;
    each score is one line."""
    model, spec = _model(window)
    saved_weights = {}

    def score(m):
        saved_weights[m.num_timesteps] = {k: v.clone() for k, v in m.policy.state_dict().items()}
        return abs(m.num_timesteps - 128) / 64.0

    keep = KeepBestByValidation(64, spec, tmp_path / "best", score, echo=True)
    model.learn(256, callback=keep)
    assert [step for step, _ in keep.history] == [0, 64, 128, 192, 256]
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("validation")]
    assert lines[2] == "validation at step 128: 0.0000 (best so far)"
    assert lines[4] == "validation at step 256: 2.0000 (best 0.0000 at 128)"
    assert (keep.best_step, keep.best_score) == (128, 0.0)
    assert load_spec(tmp_path / "best").timesteps == 128
    from agents.algorithms import load_agent

    best, _ = load_agent(tmp_path / "best")
    for name, value in best.policy.state_dict().items():
        assert torch.equal(value, saved_weights[128][name]), name
    assert not np.isnan(keep.best_score)


def test_a_warm_prior_sets_the_starting_odds_of_each_copy(window):
    """log-odds -4: every node's warm-yes probability is sigmoid(-4) = 0.0180 at
    the start (the head's weights start near 0, so the bias alone decides)."""
    from agents.finetune import set_warm_prior

    model, _ = _model(window)
    set_warm_prior(model.policy, -4.0)
    env = gym.make("btb/RouteWarm-v0", windows=[window])
    obs, _ = env.reset(seed=0)
    obs_t = torch.as_tensor(obs).unsqueeze(0)
    policy = model.policy
    with torch.no_grad():
        features = policy.extract_features(obs_t, policy.pi_features_extractor)
        logits = policy.action_net(policy.mlp_extractor.forward_actor(features))[0]
    n = env.unwrapped.n_nodes
    no, yes = logits[n : 3 * n].reshape(n, 2).T  # route n, then (no, yes) per node
    warm_yes = torch.sigmoid(yes - no).numpy()
    assert np.allclose(warm_yes, 1.0 / (1.0 + np.exp(4.0)), atol=2e-3)
    with pytest.raises(ValueError, match=r"agent\.warm_prior is for env\.kind=route_warm"):
        spec = AgentSpec(algo="ppo", env="route", hidden=16)
        set_warm_prior(build_model(spec, gym.make(spec.env_id, windows=[window])).policy, -4.0)


@pytest.mark.parametrize(
    ("algo", "kind", "net"), [("maskable_ppo", "route_warm", "set"), ("ppo", "route", "mlp")]
)
def test_scaled_logits_keep_the_greedy_actions_and_sharpen_the_samples(algo, kind, net, window):
    """agent.init_logit_scale: a power of 2 multiplies every logit exactly, so the
    greedy actions are those of the unscaled policy, and the entropy falls."""
    from agents.finetune import scale_logits

    spec = AgentSpec(algo=algo, env=kind, net=net, hidden=16, seed=1)
    env = gym.make(spec.env_id, windows=[window])
    model = build_model(spec, env, dict(HP))
    policy = model.policy
    obs = []
    o, _ = env.reset(seed=0)
    for k in range(40):
        obs.append(o)
        o, _, done, _, _ = env.step(env.action_space.sample())
        if done:
            o, _ = env.reset(seed=k)
    obs_t = torch.as_tensor(np.stack(obs))

    def logits_and_entropy():
        with torch.no_grad():
            features = policy.extract_features(obs_t, policy.pi_features_extractor)
            latent = policy.mlp_extractor.forward_actor(features)
            entropy = policy.get_distribution(obs_t).entropy().mean()
            return policy.action_net(latent), float(entropy)

    before, entropy_before = logits_and_entropy()
    greedy = model.predict(np.stack(obs), deterministic=True)[0]
    scale_logits(policy, 4.0)
    after, entropy_after = logits_and_entropy()
    assert torch.equal(after, 4.0 * before)
    assert np.array_equal(model.predict(np.stack(obs), deterministic=True)[0], greedy)
    assert entropy_after < entropy_before


def test_small_validation_scores_print_four_significant_digits():
    """A qwen3-8b score of 0.0295 s hid 0.02953 against 0.02956."""
    from agents.callbacks import score_text

    assert [score_text(v) for v in (2.23444, 0.029533, 0.0071, 0.0)] == [
        "2.2344",
        "0.02953",
        "0.007100",
        "0.0000",
    ]
