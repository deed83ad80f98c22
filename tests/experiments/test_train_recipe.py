"""train's fine-tuning recipe: validation picks the saved agent; the knobs reach the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from agents.algorithms import load_spec
from experiments.config import register_configs
from experiments.train import family_geomeans, train

CONF = Path(__file__).resolve().parents[2] / "conf"
ZOO_CLONE = Path(__file__).resolve().parents[2] / "agents" / "zoo" / "bc_route_warm"
TINY = [
    "workload=tiny",
    "logger=none",
    "train.progress=false",
    "train.checkpoint_every=0",
    "agent=maskable_ppo",
    "env=route_warm",
    "env.n_envs=1",
    "agent.hyperparams.n_steps=64",
    "agent.hyperparams.batch_size=32",
]

register_configs()


def compose_train(overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="train", overrides=list(overrides))


def test_fine_tuning_keeps_the_best_validation_checkpoint(tmp_path):
    cfg = compose_train(
        [
            *TINY,
            "train.total_timesteps=192",
            "train.val_every=64",
            f"train.init_from={ZOO_CLONE}",
            "train.critic_warmup_steps=64",
            "agent.critic=separate",
            "agent.lr_schedule=linear",
            "env.reward_baseline=cache_aware",
            "env.normalize_reward=true",
            "train.val_score=worst_family",
            "agent.clone_kl_coef=0.5",
            "agent.clone_kl_schedule=linear",
            f"out_dir={tmp_path}",
        ]
    )
    train(cfg)
    record = json.loads((tmp_path / "results.json").read_text())["train"]
    clone_kl = record["clone_kl"]  # attached after the warm-up: updates at 128 and 192 steps
    assert clone_kl["coef"] == 0.5 and clone_kl["schedule"] == "linear"
    assert [r["step"] for r in clone_kl["per_rollout"]] == [128, 192]
    assert all(r["clone_kl"] >= 0 for r in clone_kl["per_rollout"])
    assert record["init_from"] == str(ZOO_CLONE) and record["critic_warmup_steps"] == 64
    curve = record["curve"]  # the training curve: episode returns as episodes end
    assert curve and all(64 < c["timesteps"] <= 192 and c["episode_length_mean"] > 0 for c in curve)
    steps = [c["timesteps"] for c in curve]  # whole steps, each point once
    assert all(type(s) is int for s in steps) and steps == sorted(set(steps))
    assert record["cpu_s"] > 0 and record["wall_s"] > 0
    validation = record["validation"]
    history = validation["history"]
    assert [h["step"] for h in history] == [64, 128, 192]  # start (after warm-up), every 64, end
    assert validation["windows"] == ["bursted_synthetic/synthetic-0020"]  # a val window
    # worst_family: each family's TTFT over its value at the first validation
    start = history[0]["families_ttft_mean_s"]
    assert list(start) == ["synthetic"]
    assert start["synthetic"] == pytest.approx(history[0]["ttft_mean_s"], rel=1e-12)
    for h in history:
        assert h["score"] == h["families_ttft_mean_s"]["synthetic"] / start["synthetic"]
    best = min(history, key=lambda h: h["score"])  # the earliest of equal scores
    assert validation["score"] == "worst_family" and validation["best_step"] == best["step"]
    assert validation["best_score"] == best["score"]
    assert validation["best_ttft_mean_s"] == best["ttft_mean_s"]
    assert load_spec(tmp_path / "agent").timesteps == best["step"]
    assert load_spec(tmp_path / "last").timesteps == validation["last_step"] == 192
    assert load_spec(tmp_path / "agent").critic == "separate"
    assert load_spec(tmp_path / "agent").env_kwargs["reward_baseline"] == "cache_aware"


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["agent.critic=both"], "agent.critic must be one of shared, separate, detached"),
        (["agent.lr_schedule=cosine"], "agent.lr_schedule must be one of constant, linear"),
        (["env.reward_baseline=nope"], "env.reward_baseline"),
        (["train.critic_warmup_steps=-1"], "train.critic_warmup_steps must be >= 0"),
        (["train.val_every=-5"], "train.val_every must be >= 0"),
        (["train.val_score=median"], "train.val_score must be one of mean, geomean, worst_family"),
        (["train.init_from=/nonexistent"], "train.init_from=/nonexistent: not an agent folder"),
        ([f"train.init_from={ZOO_CLONE}", f"resume={ZOO_CLONE}"], "init_from and resume"),
        (["workload.val_windows=0"], "workload.val_windows must be >= 1"),
        (["env.reward_timing=late"], "env.reward_timing must be one of first_token, accrued"),
        (["agent.clone_kl_coef=0.1"], "agent.clone_kl_coef=0.1 pulls the policy towards"),
        (["agent.clone_kl_coef=-1"], "agent.clone_kl_coef must be"),
        (["agent.clone_kl_schedule=cosine"], "agent.clone_kl_schedule must be one of constant"),
        (["seed=4294967296"], "seed must be in 0..4294967295 to train, got 4294967296"),
        (["agent.init_logit_scale=0"], "agent.init_logit_scale must be a number > 0, got 0.0"),
        (["agent.init_logit_scale=nan"], "agent.init_logit_scale must be a number > 0"),
        (["agent.init_logit_scale=4"], "agent.init_logit_scale=4.0 scales the logits of"),
        (["agent.warm_prior=nan"], "agent.warm_prior must be finite log-odds, got nan"),
        (["agent.warm_prior=inf"], "agent.warm_prior must be finite log-odds, got inf"),
        (
            ["agent.warm_prior=-inf"],
            "agent.warm_prior must be finite log-odds, got -inf",
        ),
        (
            ["agent.warm_prior=-4", f"train.init_from={ZOO_CLONE}"],
            "agent.warm_prior=-4.0 starts fresh warm heads",
        ),
    ],
)
def test_bad_recipe_values_are_named(overrides, needle, tmp_path):
    cfg = compose_train([*TINY, *overrides, f"out_dir={tmp_path / 'run'}"])
    with pytest.raises(ValueError, match=needle.replace(".", r"\.")):
        train(cfg)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("target_kl", [None, 1e-12])
def test_each_update_s_statistics_reach_the_record(target_kl, tmp_path):
    overrides = [*TINY, "train.total_timesteps=192", "train.evaluate=false", "train.val_every=0"]
    # a learning rate large enough that one gradient step moves the policy far above
    # float32 noise in SB3's KL estimate
    overrides += ["agent.lr_schedule=linear", "agent.hyperparams.learning_rate=3e-3"]
    overrides.append(f"out_dir={tmp_path}")
    if target_kl is not None:  # below any real KL: one gradient step, then stop
        overrides.append(f"+agent.hyperparams.target_kl={target_kl}")
    train(compose_train(overrides))
    record = json.loads((tmp_path / "train.json").read_text())["train"]
    updates = record["updates"]
    assert [u["timesteps"] for u in updates] == [64, 128, 192]  # one per rollout of 64
    # all 5 epochs ran, or the KL stop cut the update short in its first epoch; the
    # last update's learning rate is 0, so its policy never moves and all 5 run
    assert [u["epochs"] for u in updates] == ([5, 5, 5] if target_kl is None else [1, 1, 5])
    # the linear schedule: 3e-3 x the share of the run left after the update's rollout
    assert [u["learning_rate"] for u in updates] == pytest.approx([2e-3, 1e-3, 0.0], abs=1e-15)
    for u in updates:
        assert u["approx_kl"] >= 0 and 0 <= u["clip_fraction"] <= 1
        assert u["value_loss"] >= 0 and u["entropy_loss"] < 0  # loss = -entropy


def test_dqn_s_gradient_steps_reach_the_record(tmp_path):
    overrides = ["workload=tiny", "logger=none", "train.progress=false", "agent=dqn"]
    overrides += ["env=route", "env.n_envs=1", "train.total_timesteps=1100"]
    overrides += ["train.evaluate=false", "train.checkpoint_every=0", f"out_dir={tmp_path}"]
    train(compose_train(overrides))
    updates = json.loads((tmp_path / "train.json").read_text())["train"]["updates"]
    # learning_starts 1000, train_freq 4: one gradient step after each 4 steps past 1000
    assert [u["timesteps"] for u in updates] == list(range(1004, 1101, 4))
    assert all(u["epochs"] == 1 and u["loss"] >= 0 for u in updates)
    assert all(u["learning_rate"] == pytest.approx(1e-4, rel=1e-12) for u in updates)


def test_family_geomeans_by_hand():
    names = ["burst_families/synthetic-0020", "burst_families/mixed-0020", "x/synthetic-0021"]
    means = family_geomeans(names, [1.0, 3.0, 4.0])
    assert means == pytest.approx({"synthetic": 2.0, "mixed": 3.0}, rel=1e-12)


def test_evaluate_on_validation_windows_greedy_and_sampling(tmp_path):
    from experiments.evaluate import evaluate

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            config_name="evaluate",
            overrides=[
                "workload=tiny",
                "logger=none",
                "progress=false",
                f"checkpoint=[{ZOO_CLONE}]",
                "policies=[btb]",
                "split=val",
                "stochastic=true",
                f"out_dir={tmp_path}",
            ],
        )
    evaluate(cfg)
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert [r["policy"] for r in rows] == [
        "cache_aware", "btb", "bc_route_warm", "bc_route_warm_stochastic", "floor",
        "floor_capacity"
    ]  # fmt: skip
    assert {r["windows"] for r in rows} == {1}
    # cache_aware's row is its run on the tiny workload's validation window
    from envs.workloads.registry import windows
    from experiments.evaluation import evaluate_policies

    tiny = {"n_bursts": 2, "burst_requests": 40, "n_decoys": 6, "burst_window_s": 4.0}
    by_split = {
        split: evaluate_policies(
            ["cache_aware"], "70b_h100x4", [next(windows("bursted_synthetic", split, **tiny))]
        )[0].row["ttft_mean_s"]
        for split in ("val", "test")
    }
    assert rows[0]["ttft_mean_s"] == by_split["val"] != by_split["test"]


def test_a_curriculum_trains_on_burst_segments_then_whole_windows(tmp_path):
    """workload=tiny's train windows hold 2 bursts of 40 requests each: one-burst
    segments until step 64, two-burst ones until 128, then the whole windows. An
    episode of the first stage is one segment (at most its 40-odd requests)."""
    cfg = compose_train(
        [
            *TINY,
            "train.total_timesteps=192",
            "train.evaluate=false",
            "train.curriculum=[{bursts: 1, until: 64}, {bursts: 2, until: 128}]",
            f"out_dir={tmp_path}",
        ]
    )
    train(cfg)
    record = json.loads((tmp_path / "train.json").read_text())["train"]["curriculum"]
    assert [c["step"] for c in record["changes"]] == [0, 64, 128]
    assert [c["stage"] for c in record["changes"]] == [0, 1, 2]
    assert [s["segments"] for s in record["stages"]] == [4, 4]  # 2 windows x 2 bursts
    assert record["lead_s"] == 5.0 and record["min_requests"] == 32


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train.curriculum=[{bursts: 1, until: 64}, {bursts: 2, until: 64}]",
         r"train\.curriculum\[1\]\.until must be above 64 \(the stages' steps rise\), got 64"),
        ("train.curriculum=[{bursts: 0, until: 64}]",
         r"train\.curriculum\[0\]\.bursts must be >= 1"),
        ("train.curriculum_lead_s=-1", r"train\.curriculum_lead_s must be a finite number >= 0"),
        ("train.curriculum_lead_s=nan", r"train\.curriculum_lead_s must be a finite number >= 0"),
    ],
)  # fmt: skip
def test_a_curriculum_that_cannot_run_is_refused(tmp_path, override, message):
    cfg = compose_train([*TINY, override, f"out_dir={tmp_path / 'run'}"])
    with pytest.raises(ValueError, match=message):
        train(cfg)
    assert not (tmp_path / "run").exists()


def test_a_curriculum_on_windows_without_bursts_is_refused(tmp_path):
    cfg = compose_train(
        [
            *TINY,
            "train.curriculum=[{bursts: 1, until: 64}]",
            "train.curriculum_min_requests=100",  # tiny's bursts hold 40
            f"out_dir={tmp_path / 'run'}",
        ]
    )
    with pytest.raises(ValueError, match=r"train\.curriculum\[0\]: the train windows .* no burst"):
        train(cfg)
    assert not (tmp_path / "run").exists()


def test_a_checkpoint_holds_the_weights_its_steps_trained(tmp_path):
    """Rollouts of 64 steps, a checkpoint every 64: step_64 is saved after the
    update that learned from those 64 steps, the weights a 64-step run ends with
    (it used to be saved one update earlier: the start's weights under the label
    64), and step_128, the last, is the weights in last/."""
    import torch

    from agents.algorithms import load_agent

    def weights(folder):
        model, _ = load_agent(folder)
        return torch.cat([p.detach().flatten() for p in model.policy.parameters()])

    for total in (128, 64):
        cfg = compose_train(
            [*TINY, f"train.total_timesteps={total}", "train.checkpoint_every=64",
             "train.evaluate=false", "train.val_every=64", f"out_dir={tmp_path / str(total)}"]
        )  # fmt: skip
        train(cfg)
    run = tmp_path / "128"
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_128", "step_64"]
    assert load_spec(run / "checkpoints" / "step_64").timesteps == 64
    first = weights(run / "checkpoints" / "step_64")
    assert torch.equal(first, weights(tmp_path / "64" / "last"))
    assert torch.equal(weights(run / "checkpoints" / "step_128"), weights(run / "last"))
    assert not torch.equal(first, weights(run / "last"))


def test_init_from_an_agent_of_other_time_units_is_said(tmp_path, capsys):
    cfg = compose_train(
        [*TINY, "train.total_timesteps=0", "train.evaluate=false",
         f"train.init_from={ZOO_CLONE.parent / 'improve_warm_reference'}", f"out_dir={tmp_path}"]
    )  # fmt: skip
    train(cfg)
    assert "was trained with env.time_unit=reference; this run has env.time_unit=seconds" in (
        capsys.readouterr().out
    )


def test_init_from_takes_a_shipped_agent_s_name(tmp_path, capsys):
    """A bare zoo name (as evaluate's checkpoint= and compare's agents= take) starts
    from that agent's folder, which the record names; a name no folder or shipped
    agent has is refused with the shipped names."""
    cfg = compose_train(
        [*TINY, "train.total_timesteps=0", "train.evaluate=false",
         "train.init_from=bc_route_warm", f"out_dir={tmp_path / 'run'}"]
    )  # fmt: skip
    train(cfg)
    record = json.loads((tmp_path / "run" / "train.json").read_text())["train"]
    assert Path(record["init_from"]) == ZOO_CLONE
    assert f"starting from the weights of {ZOO_CLONE}" in capsys.readouterr().out
    cfg = compose_train([*TINY, "train.init_from=bc_route_warmm", f"out_dir={tmp_path / 'no'}"])
    with pytest.raises(ValueError, match=r"not an agent folder .*: bc_route_warm, bc_route_warm_"):
        train(cfg)
    assert not (tmp_path / "no").exists()


def test_the_warm_prior_is_recorded_in_train_json(tmp_path):
    run = [*TINY, "train.total_timesteps=64", "train.evaluate=false", "train.val_every=0"]
    train(compose_train([*run, "agent.warm_prior=-4", f"out_dir={tmp_path / 'prior'}"]))
    record = json.loads((tmp_path / "prior" / "train.json").read_text())["train"]
    assert record["warm_prior"] == -4.0
    train(compose_train([*run, f"out_dir={tmp_path / 'none'}"]))  # 0: no prior set
    assert "warm_prior" not in json.loads((tmp_path / "none" / "train.json").read_text())["train"]


def test_a_critic_warm_up_needs_an_actor_critic() -> None:
    from experiments.train import check_train

    overrides = ["agent=dqn", "env=route", "train.total_timesteps=256"]
    with pytest.raises(ValueError) as caught:
        check_train(compose_train([*overrides, "train.critic_warmup_steps=100"]))
    assert str(caught.value) == (
        "train.critic_warmup_steps=100 warms up an actor-critic's value function "
        "(agent.algo ppo, a2c or maskable_ppo), got agent.algo=dqn (set it to 0)"
    )
    check_train(compose_train([*overrides, "train.critic_warmup_steps=0"]))
    check_train(compose_train(["agent=a2c", "train.critic_warmup_steps=100"]))


def test_a_critic_warm_up_that_takes_the_whole_run_is_warned_about() -> None:
    import warnings

    from envs.sim.errors import SettingWarning
    from experiments.train import check_train

    rollout = ["agent.hyperparams.n_steps=64", "agent.hyperparams.batch_size=64", "env.n_envs=2"]
    with pytest.warns(SettingWarning, match=r"^train\.critic_warmup_steps=100 >= train\.total_"):
        check_train(compose_train(["train.total_timesteps=64", "train.critic_warmup_steps=100"]))
    with pytest.warns(SettingWarning) as caught:  # 64 steps run a whole rollout: 128
        check_train(
            compose_train([*rollout, "train.total_timesteps=128", "train.critic_warmup_steps=64"])
        )
    assert [str(w.message) for w in caught] == [
        "train.critic_warmup_steps=64 runs 128 steps (rounded up to whole rollouts of n_steps "
        "x env.n_envs = 128) >= train.total_timesteps=128: the whole run warms the critic "
        "up with the policy frozen; the policy never trains"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_train(
            compose_train([*rollout, "train.total_timesteps=256", "train.critic_warmup_steps=64"])
        )
        check_train(
            compose_train([*rollout, "train.total_timesteps=129", "train.critic_warmup_steps=64"])
        )
