"""The causal teacher and behavioural cloning (agents/teacher.py, agents/imitation.py)."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

import envs  # noqa: F401  (registers the environments)
from agents.algorithms import AgentSpec, build_model
from agents.distributions import kl_divergence
from agents.imitation import Demonstrations, ImitationSettings, collect, pretrain, run_imitation
from agents.teacher import CausalTeacher
from envs.encoder import first_token_estimates, prefix_of
from envs.sim import SimConfig, Simulator, setup_cluster
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

SMALL = BurstedSyntheticConfig(n_bursts=2, burst_requests=30, n_decoys=4, burst_window_s=4.0)


@pytest.fixture(scope="module")
def window():
    return synthetic_window(SMALL, window=2)


def test_teacher_warms_bursts_onto_every_node_and_never_a_decoy(window):
    sim = Simulator(setup_cluster("70b_h100x4"), window, SimConfig(), np.random.default_rng(0))
    CausalTeacher().run(sim)
    burst_keys = {prefix_of(r)[-1] for r in window.requests if r.job_kind == "burst"}
    copied = [c.key for c in sim.copies]
    assert set(copied) == burst_keys  # both bursts warmed, no decoy
    assert len(copied) == 2 * 3  # each onto the three nodes that did not compute it


def test_teacher_rejects_bad_settings():
    with pytest.raises(ValueError, match=r"causal_teacher\.x"):
        CausalTeacher(x=0)
    with pytest.raises(ValueError, match=r"causal_teacher\.z"):
        CausalTeacher(z=0.0)
    with pytest.raises(ValueError, match="max_nodes"):
        CausalTeacher(max_nodes=0)


def test_collected_labels_replay_the_teacher_run(window):
    env = gym.make("btb/RouteWarm-v0", windows=[window]).unwrapped
    demos = collect(env, CausalTeacher(), episodes=1)
    n = env.n_nodes
    assert len(demos) == len(window.requests) == len(demos.masks) == len(demos.returns)
    actions = np.stack(demos.actions)
    assert actions.shape == (len(window.requests), 2 + n)
    assert actions[:, 1 + n].sum() == 0  # the teacher never evicts
    assert actions[:, 1 : 1 + n].sum() == 6  # the six copies of the teacher run
    masks = np.stack(demos.masks)
    warm_yes = masks[:, n + 1 : 3 * n + 1 : 2]
    assert warm_yes[actions[:, 1 : 1 + n] == 1].all()  # labels never pick a masked choice
    assert demos.returns[0] < 0 and np.isfinite(demos.returns).all()


def _model_and_teacher_demos(window):
    """A small route-and-warm model (torch seed 0) and one teacher episode's labels."""
    torch.manual_seed(0)
    spec = AgentSpec(algo="maskable_ppo", env="route_warm", hidden=16)
    env = gym.make(spec.env_id, windows=[window])
    model = build_model(spec, env, {"n_steps": 64, "batch_size": 32})
    return model, collect(env.unwrapped, CausalTeacher(), episodes=1), env.unwrapped.n_nodes


def test_pretraining_fits_the_labels(window):
    model, demos, _ = _model_and_teacher_demos(window)
    first = pretrain(model, demos, ImitationSettings(epochs=1, learning_rate=3e-3))
    later = pretrain(model, demos, ImitationSettings(epochs=8, learning_rate=3e-3))
    assert later["bc_action_loss"] < first["bc_action_loss"]
    assert later["bc_accuracy"] >= first["bc_accuracy"]


def test_run_imitation_on_route_env_and_empty_demos(window, capsys):
    spec = AgentSpec(algo="ppo", env="route", hidden=16)
    env = gym.make(spec.env_id, windows=[window])
    model = build_model(spec, env, {"n_steps": 64, "batch_size": 32})
    stats = run_imitation(
        model, spec.env_id, [{"windows": [window]}], ImitationSettings(episodes=1, epochs=1)
    )
    assert stats["bc_steps"] == len(window.requests)
    said = capsys.readouterr().out.splitlines()[0]  # one of each: no "1 windows", "1 ... episodes"
    assert said.endswith("(llama-3.3-70b, 1 window of bursted_synthetic[2]): 1 teacher episode"), (
        said
    )
    with pytest.raises(ValueError, match="no demonstrations"):
        pretrain(model, Demonstrations(), ImitationSettings())


def test_first_token_estimates_by_hand(window):
    sim = Simulator(setup_cluster("70b_h100x4"), window, SimConfig(), np.random.default_rng(0))
    decisions = sim.decisions()
    first = next(decisions)
    # llama-70b on 4xH100: 2 x 70.6e9 FLOP a token / (4 x 989e12 x 0.5) = 71.39 us a token
    prefill_s = first.input_tokens * 2 * 70.6e9 / (4 * 989e12 * 0.5)
    for backlog, first_token in first_token_estimates(sim, first):
        assert backlog == 0.0
        assert first_token == pytest.approx(prefill_s, rel=1e-9)
    second = decisions.send(0)
    estimates = first_token_estimates(sim, second)
    left = max(prefill_s - (second.arrival_s - first.arrival_s), 0.0)
    assert estimates[0][0] == pytest.approx(left, abs=1e-9)
    assert [e[0] for e in estimates[1:]] == [0.0, 0.0, 0.0]


def test_backlog_teacher_routes_to_the_soonest_first_token(window):
    class Probe(CausalTeacher):
        def decide(self, sim, request):
            estimates = first_token_estimates(sim, request)
            choice = super().decide(sim, request)
            assert estimates[choice][1] == min(e[1] for e in estimates)
            return choice

    sim = Simulator(setup_cluster("70b_h100x4"), window, SimConfig(), np.random.default_rng(0))
    Probe(routing="backlog").run(sim)
    with pytest.raises(ValueError, match="routing"):
        CausalTeacher(routing="psychic")


def test_a_warning_raised_in_run_imitation_names_the_caller_s_line(window):
    """A warning raised as run_imitation makes a source's env (more windows than the
    split holds) points at this file, the call, not at agents/imitation.py."""
    import warnings

    spec = AgentSpec(algo="ppo", env="route", hidden=16)
    model = build_model(spec, gym.make(spec.env_id, windows=[window]), {"n_steps": 64})
    params = {"n_bursts": 1, "burst_requests": 4, "n_decoys": 0}
    source = {"n_windows": 50, "workload_params": params}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_imitation(model, spec.env_id, [source], ImitationSettings(episodes=1, epochs=1))
    (said,) = [w for w in caught if "n_windows=50" in str(w.message)]
    assert said.filename == __file__, said.filename


def _own_labels(model, demos):
    """``demos`` relabelled with ``model``'s own greedy actions."""
    obs = torch.as_tensor(np.stack(demos.obs))
    masks = np.stack(demos.masks)
    with torch.no_grad():
        dist = model.policy.get_distribution(obs, action_masks=masks)
        greedy = dist.get_actions(deterministic=True).numpy()
    own = Demonstrations(list(demos.obs), list(greedy), list(demos.masks), list(demos.returns))
    return own, obs, masks


def _kl_to(start, model, obs, masks) -> float:
    with torch.no_grad():
        kept = start.get_distribution(obs, action_masks=masks)
        now = model.policy.get_distribution(obs, action_masks=masks)
        return float(kl_divergence(kept, now).mean())


def test_labels_the_policy_already_chooses_are_fitted_by_kl_the_rest_by_cross_entropy(window):
    model, teacher, n = _model_and_teacher_demos(window)
    own, obs, masks = _own_labels(model, teacher)
    fit = ImitationSettings(epochs=3, learning_rate=3e-3)
    # the model's own labels: every one agrees; cross-entropy sharpens the policy,
    # the KL to the policy before the fit keeps its distribution (its loss starts at 0)
    runs = {}
    for name in ("label", "start"):
        fitted = copy.deepcopy(model)
        got = pretrain(fitted, own, fit, 0, keep_agreeing=name == "start")
        runs[name] = got, _kl_to(model.policy, fitted, obs, masks)
    assert "bc_agreeing" not in runs["label"][0] and runs["start"][0]["bc_agreeing"] == 1.0
    assert runs["start"][0]["bc_action_loss"] < 1e-3 < runs["label"][0]["bc_action_loss"]
    assert runs["start"][1] < runs["label"][1] / 100
    # a quarter of the labels changed: that share no longer agrees
    changed = copy.deepcopy(own)
    for i in range(0, len(changed), 4):
        changed.actions[i] = changed.actions[i].copy()
        changed.actions[i][0] = (changed.actions[i][0] + 1) % n
    # at the start the loss is cross-entropy on the changed labels, 0 on the rest
    # (a fit at learning rate 0, one batch: the policy does not move)
    still = ImitationSettings(epochs=1, learning_rate=0.0, batch_size=len(changed))
    with torch.no_grad():
        log_p = model.policy.get_distribution(obs, action_masks=masks).log_prob(
            torch.as_tensor(np.stack(changed.actions))
        )
    differ = torch.zeros(len(changed), dtype=torch.bool)
    differ[::4] = True
    expected = float(torch.where(differ, -log_p, 0.0).mean())
    got = pretrain(copy.deepcopy(model), changed, still, 0, keep_agreeing=True)
    assert got["bc_action_loss"] == pytest.approx(expected, rel=1e-5) and expected > 0
    assert got["bc_agreeing"] == pytest.approx(0.75)
    again = copy.deepcopy(model)
    share = 1 - len(range(0, len(changed), 4)) / len(changed)
    assert pretrain(again, changed, fit, 0, keep_agreeing=True)["bc_agreeing"] == pytest.approx(
        share
    )
    # once more: agreement with the policy as this fit finds it (which has served
    # forward passes and a fit)
    now, _, _ = _own_labels(again, changed)
    same = (np.stack(now.actions) == np.stack(changed.actions)).all(axis=1).mean()
    assert pretrain(again, changed, fit, 0, keep_agreeing=True)["bc_agreeing"] == pytest.approx(
        same
    )
    # the teacher's labels: none agrees, so the fit is exactly the plain one
    assert (np.stack(teacher.actions) != np.stack(own.actions)).any(axis=1).all()
    plain, towards = copy.deepcopy(model), copy.deepcopy(model)
    assert {**pretrain(plain, teacher, fit, 0), "bc_agreeing": 0.0} == pretrain(
        towards, teacher, fit, 0, keep_agreeing=True
    )
    for a, b in zip(plain.policy.parameters(), towards.policy.parameters()):
        assert torch.equal(a, b)
