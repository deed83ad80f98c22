"""The Hydra commands: every config group composes, bad values are rejected,
training (each algorithm), resuming, multirun sweeps on the joblib and
submitit-local launchers, the Optuna objective, and what W&B offline mode writes."""

from __future__ import annotations

import glob
import json
import math
import re
import struct
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from agents.algorithms import AgentSpec, load_spec
from envs.sim.timing import model_preset
from experiments._cli import HungUp, Terminated
from experiments.config import cluster_of, register_configs, sim_of
from experiments.train import resume_changes, train

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
TINY = [
    "workload=tiny",
    "logger=none",
    "env.n_envs=1",  # whole rollouts of n_steps: the step counts below are worked out for one
    "train.progress=false",
    "train.checkpoint_every=0",
]
ALGO_OVERRIDES = {
    "ppo": ["agent.hyperparams.n_steps=64", "agent.hyperparams.batch_size=32"],
    "maskable_ppo": ["agent.hyperparams.n_steps=64", "agent.hyperparams.batch_size=32"],
    "a2c": [],
    "dqn": ["agent.hyperparams.learning_starts=50"],
}

register_configs()


def compose_train(overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="train", overrides=list(overrides))


def options(group):
    """The group's options as Hydra finds them: conf/ files and registered ones (setup)."""
    from hydra.core.global_hydra import GlobalHydra

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        found = GlobalHydra.instance().config_loader().get_group_options(group)
    assert found, f"no options in group {group}"
    return sorted(found)


@pytest.mark.parametrize(
    "group", ["setup", "model", "cluster", "workload", "sim", "env", "agent", "logger"]
)
def test_every_option_of_every_group_composes(group):
    for option in options(group):
        cfg = compose_train([f"{group}={option}"])
        if group == "model" and model_preset(option).weight_bytes > 320e9:
            # too big for the default 4xH100 node: refused where the cluster is made
            with pytest.raises(ValueError, match=r"^cluster\.node='4xH100': a node .* cannot hold"):
                cluster_of(cfg)
            continue
        cluster = cluster_of(cfg)
        assert len(cluster.nodes) == cfg.cluster.n_nodes
        sim_of(cfg)
        if cfg.agent.algo == "dqn" or cfg.agent.algo == "maskable_ppo":
            continue  # these pair with one env kind; checked below
        AgentSpec(algo=cfg.agent.algo, env=cfg.env.kind, net=cfg.agent.net)


def test_sim_reference_is_the_reference_model_and_one_setting_switches_alone():
    from envs.sim import SimConfig

    assert sim_of(compose_train(["sim=reference"])) == SimConfig.reference()
    assert sim_of(compose_train(["sim=causal"])) == SimConfig()
    one = sim_of(compose_train(["sim=reference", "sim.decode_overshoot=false"]))
    assert one == SimConfig.reference(decode_overshoot=False)
    assert sim_of(compose_train(["sim.lru_unit=block"])) == SimConfig(lru_unit="block")
    with pytest.raises(ValueError, match=r"sim\.cache_capacity must be one of headroom, budget"):
        sim_of(compose_train(["sim.cache_capacity=all"]))
    # the key=value commands' causal_kv=false is the same model
    from experiments._cli import sim_config_of

    assert sim_config_of("experiments.compare", False, "reference") == SimConfig.reference()


def test_setups_pick_their_model_and_cluster():
    cfg = compose_train(["setup=glm52_h100x8"])
    assert (cfg.model.name, cfg.cluster.node, cfg.cluster.n_nodes) == ("glm-4.6", "8xH100", 4)
    cfg = compose_train(["setup=dense1t_b300x4"])
    assert cluster_of(cfg).nodes[0].name == "4xB300"


def test_experiment_configs_compose():
    for option in options("experiment"):
        cfg = compose_train([f"+experiment={option}"])
        AgentSpec(algo=cfg.agent.algo, env=cfg.env.kind, net=cfg.agent.net)


@pytest.mark.parametrize(
    "option", ["ppo_thresholds", "ppo_thresholds_eft", "ppo_thresholds_spread"]
)
def test_the_thresholds_recipes_draw_the_progress_bar(option):
    """ppo_thresholds (and the two recipes built on it) turned the bar off since it
    was written: its validation lines went into the bar's line. They start lines of
    their own now, and a run of minutes shows how far it is."""
    assert compose_train([f"+experiment={option}"]).train.progress is True


def test_every_recipe_that_takes_rl_steps_draws_the_progress_bar():
    """scratch_route_warm, finetune_route_warm and finetune_families (and the recipes
    built on them) turned the bar off as ppo_thresholds did, each beside
    train.val_every: validation lines went into the bar's line, which they no longer
    do. Runs of minutes to hours show how far they are. (bc_route_warm_general and
    improve_spare take no RL step: theirs is not a training bar.)"""
    shown = {}
    for option in options("experiment"):
        cfg = compose_train([f"+experiment={option}"])
        if cfg.train.total_timesteps > 0:
            shown[option] = cfg.train.progress
    built_on = {"scratch_route_warm_long", "finetune_families_long", "finetune_spare_obs"}
    assert {"scratch_route_warm", "finetune_route_warm", "finetune_families", *built_on} <= set(
        shown
    )
    assert [option for option, drawn in shown.items() if drawn is not True] == []


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("agent.hidden=wide", "agent.hidden"),
        ("agent.nonsense=1", "nonsense"),
        ("train.total_timesteps=lots", "total_timesteps"),
        ("model=gpt-9", "model"),
    ],
)
def test_wrong_types_and_unknown_keys_are_rejected(override, needle):
    with pytest.raises(Exception, match=needle):
        compose_train([override])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("algo", "env"),
    [
        ("ppo", "route"),
        ("a2c", "route"),
        ("dqn", "route"),
        ("maskable_ppo", "route_warm"),
        ("ppo", "thresholds"),
    ],
)
def test_training_smoke_run_for_each_algorithm(algo, env, tmp_path):
    cfg = compose_train(
        [
            *TINY,
            f"agent={algo}",
            f"env={env}",
            "train.total_timesteps=200",
            f"out_dir={tmp_path}",
            *ALGO_OVERRIDES[algo],
        ]
    )
    objective = train(cfg)
    spec = load_spec(tmp_path / "agent")
    assert spec.algo == algo and spec.env == env and spec.timesteps >= 200
    results = json.loads((tmp_path / "results.json").read_text())
    policies = {row["policy"] for row in results["rows"]}
    assert {"btb", "cache_aware", "least_load", spec.name} <= policies
    # what a sweeper minimises: the kept validation score (test_train_rescore), never
    # the test row's; a run without validation gives it nothing
    assert objective == float("inf") and "validation" not in results["train"]
    assert results["config"]["agent"]["algo"] == algo
    record = results["train"]
    assert record["timesteps_asked"] == 200 and record["timesteps"] == spec.timesteps
    assert record["resumed_from"] is None and record["resume_changes"] == {}
    assert record["rollout_s"] > 0 and record["update_s"] > 0 and record["n_envs"] == 1
    if algo in ("ppo", "maskable_ppo"):  # whole rollouts of n_steps=64: 200 -> 256
        assert spec.timesteps == 256
    for chart in ("ttft_cdf.png", "ttft_reduction.png", "burst_timeline.png"):
        assert (tmp_path / chart).stat().st_size > 0


@pytest.mark.slow
def test_resume_continues_the_step_count(tmp_path, capsys):
    first = tmp_path / "first"
    cfg = compose_train(
        [
            *TINY[:-1],
            "agent=a2c",
            "train.total_timesteps=160",
            "train.checkpoint_every=80",
            "train.evaluate=false",
            f"out_dir={first}",
        ]
    )
    train(cfg)
    checkpoint = first / "checkpoints" / "step_80"
    assert load_spec(checkpoint).timesteps == 80
    second = tmp_path / "second"
    cfg = compose_train(
        [
            *TINY,
            "agent=a2c",
            "train.total_timesteps=240",
            "train.evaluate=false",
            f"resume={checkpoint}",
            f"out_dir={second}",
        ]
    )
    train(cfg)
    assert load_spec(second / "agent").timesteps == 240
    # resuming on another workload (fine-tuning) goes on, says so and records it
    third = tmp_path / "third"
    cfg = compose_train(
        [
            *TINY,
            "agent=a2c",
            "train.total_timesteps=200",
            "workload.seed=7",
            "workload.params.n_bursts=3",
            f"resume={checkpoint}",
            f"out_dir={third}",
        ]
    )
    train(cfg)
    out = capsys.readouterr().out
    assert f"note: resume={checkpoint} was trained with workload.params=" in out
    seed = load_spec(checkpoint).env_kwargs["data_seed"]
    assert f"workload.seed={seed};" in out and "workload.seed=7 (recorded in results.json)" in out
    record = json.loads((third / "results.json").read_text())["train"]
    assert record["resumed_from"] == str(checkpoint)
    assert record["resume_changes"]["workload.seed"] == [seed, 7]
    assert record["resume_changes"]["workload.params"][1]["n_bursts"] == 3
    assert "workload.name" not in record["resume_changes"]
    assert load_spec(third / "agent").env_kwargs["data_seed"] == 7
    bad = compose_train([*TINY, "agent=ppo", f"resume={checkpoint}", f"out_dir={tmp_path / 'x'}"])
    with pytest.raises(ValueError, match="that checkpoint is a2c"):
        train(bad)


@pytest.mark.slow
def test_dqn_rollouts_are_train_freq_steps_and_a_resume_records_sim_and_reward(tmp_path, capsys):
    first = tmp_path / "first"
    dqn = [*TINY, "agent=dqn", "agent.hyperparams.learning_starts=10", "train.evaluate=false"]
    train(compose_train([*dqn, "train.total_timesteps=40", f"out_dir={first}"]))
    assert load_spec(first / "agent").timesteps == 40  # train_freq=4 divides 40
    capsys.readouterr()
    second = tmp_path / "second"
    cfg = compose_train(
        [
            *dqn,
            "env.n_envs=2",
            "sim=reference",
            "env.reward_scale=5",
            "train.total_timesteps=101",
            f"resume={first / 'agent'}",
            f"out_dir={second}",
        ]
    )
    train(cfg)
    out = capsys.readouterr().out
    # DQN's n_steps is its n-step return (1), not a rollout: 4 x 2 envs from 40 to 101
    assert load_spec(second / "agent").timesteps == 104
    assert (
        "note: 3 steps past train.total_timesteps=101: dqn collects whole rollouts of 8 steps "
        "(agent.hyperparams.train_freq x env.n_envs)" in out
    )
    # the simulator, the reward and the envs changed from the checkpoint: said and recorded
    assert "sim.causal_kv=True, env.reward_scale=10.0, env.n_envs=1; training goes on with" in out
    assert "env.n_envs=2 (recorded in results.json)" in out
    changes = resume_changes(
        load_spec(first / "agent").env_kwargs, load_spec(second / "agent").env_kwargs
    )
    assert changes == {"sim.causal_kv": [True, False], "env.reward_scale": [10.0, 5.0]}


@pytest.mark.slow
def test_dqn_trains_with_a_train_freq_in_episodes_given_as_a_list(tmp_path):
    # YAML and the command line give [n, unit] as a list; SB3 took only a tuple and
    # refused it ("The frequency of `train_freq` must be an integer and not [1, 'episode']")
    out_dir = tmp_path / "run"
    cfg = compose_train(
        [
            *TINY,
            "agent=dqn",
            "agent.hyperparams.learning_starts=0",
            "agent.hyperparams.train_freq=[1,episode]",
            "train.evaluate=false",
            "train.total_timesteps=8",
            f"out_dir={out_dir}",
        ]
    )
    train(cfg)
    assert load_spec(out_dir / "agent").timesteps >= 8


def test_resume_reports_only_a_real_change_of_the_workload_generators():
    from experiments.train import env_kwargs

    def kwargs(*overrides):
        return env_kwargs(compose_train([*TINY, *overrides]))

    saved = kwargs()
    # a parameter given at the generator's default value
    for same in (
        ["+workload.params.decoy_requests=1"],
        ["+workload.params.first_burst_s=20.0", "+workload.params.block_tokens=256"],
    ):
        assert kwargs(*same)["workload_params"] != saved["workload_params"]
        assert resume_changes(saved, kwargs(*same)) == {}, same
    changed = kwargs("+workload.params.decoy_requests=2")
    assert resume_changes(saved, changed) == {
        "workload.params": [saved["workload_params"], changed["workload_params"]]
    }
    # an explicit default of the generator, resumed without it: no change either
    bare = {**saved, "workload_params": {}}
    default = {**saved, "workload_params": {"n_bursts": 8}}
    assert resume_changes(bare, default) == {}
    # another workload: its name changed, and its parameters are compared as given
    art = {**default, "workload": "art_like", "workload_params": {}}
    assert resume_changes(default, art) == {
        "workload.name": ["bursted_synthetic", "art_like"],
        "workload.params": [{"n_bursts": 8}, {}],
    }
    assert resume_changes(bare, {**art, "workload_params": {}}) == {
        "workload.name": ["bursted_synthetic", "art_like"]
    }


def test_resume_compares_train_streams_as_the_checkpoint_drew_its_windows():
    from agents.algorithms import AgentSpec
    from experiments.train import env_kwargs
    from experiments.trained_on import trained_streams

    saved = env_kwargs(compose_train(TINY))
    shared = env_kwargs(compose_train([*TINY, "+workload.params.train_streams=shared"]))
    # a checkpoint's parameters alone: as they configure (left out: the default, own)
    assert resume_changes(saved, shared) == {"workload.params.train_streams": ["own", "shared"]}
    assert resume_changes(shared, shared) == {}
    # its agent.json's record says how its train windows were drawn; one saved before
    # the option (no train_streams in the record, or no record) drew them shared
    record = {"workload": "bursted_synthetic", "params": {}, "seed": 1, "train": ["x-0"]}
    for windows, streams in [
        ([{**record, "train_streams": "own"}], "own"),
        ([{**record, "train_streams": "shared"}], "shared"),
        ({**record, "train_streams": "shared"}, "shared"),  # (one record, not a list)
        ([record], "shared"),
        (None, "shared"),
        ([{**record, "workload": "art_like", "train_streams": "own"}], "shared"),
    ]:
        spec = AgentSpec(algo="ppo", env="route", env_kwargs=saved, registered_windows=windows)
        assert trained_streams(spec) == streams, windows
    assert resume_changes(saved, shared, "shared") == {}
    assert resume_changes(saved, saved, "shared") == {
        "workload.params.train_streams": ["shared", "own"]
    }
    # with other parameters changed: each said apart
    other = env_kwargs(compose_train([*TINY, "+workload.params.decoy_requests=2"]))
    assert resume_changes(saved, other, "shared") == {
        "workload.params.train_streams": ["shared", "own"],
        "workload.params": [saved["workload_params"], other["workload_params"]],
    }
    # a trace's agent has no train streams: none compared
    trace = {**saved, "workload": "trace", "workload_params": {}}
    spec = AgentSpec(algo="ppo", env="route", env_kwargs=trace)
    assert trained_streams(spec) is None


def test_a_sweep_with_a_value_no_job_can_use_stops_before_job_0(tmp_path, run_command):
    """Job 1's negative learning rate used to fail only when job 1 started, after
    job 0 had trained."""
    out = tmp_path / "sweep"
    rates = "agent.hyperparams.learning_rate=0.0003,-1"
    proc = run_command(
        "experiments.train",
        ["-m", rates, *TINY, "agent=a2c", "train.total_timesteps=64", f"out_dir={out}"],
        tmp_path,
        {"PYTHONPATH": str(ROOT), "WANDB_SILENT": "true"},
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert (
        "job 1 of the sweep (agent.hyperparams.learning_rate=-1): "
        "agent.hyperparams.learning_rate must be a finite number >= 0, got -1" in proc.stderr
    )
    assert not (out / "0").exists()


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ("logger.mode=ofline",
         "logger.mode must be one of offline, online, disabled, got 'ofline'"),
        ("agent.hyperparams.learning_rate=-1",
         "agent.hyperparams.learning_rate must be a finite number >= 0, got -1"),
        ("workload.window_s=-5", "workload.window_s must be a finite number > 0, got -5.0"),
        ("workload.path=nope.jsonl", "workload.path='nope.jsonl': no such file"),
    ],
)  # fmt: skip
def test_a_sweep_on_a_trace_checks_its_options_before_job_0(bad, said, tmp_path, run_command):
    """The sweep's check of every job left trace workloads to the jobs: a typo in
    any option failed each job in turn, and the sweep.json and job folders it left
    refused the corrected rerun. The options are checked up front as for a
    registered workload (the file is there, not read: each job reads it)."""
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp":0,"input_length":600,"output_length":10,"hash_ids":[1,2]}\n')
    out = tmp_path / "sweep"
    path = bad if bad.startswith("workload.path=") else f"workload.path={trace}"
    args = ["-m", "seed=0,1", "workload=trace", path, *TINY[1:], f"out_dir={out}"]
    args += [] if bad == path else [bad]
    proc = run_command("experiments.train", args, tmp_path, {"WANDB_SILENT": "true"})
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"error: experiments.train: job 0 of the sweep (seed=0): {said}" in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("sweep", "said"),
    [
        # ranges were left to the jobs: job 60 failed after 60 jobs had trained
        (["agent.hidden=range(65535,65538)", "seed=range(0,30)"],
         "job 60 of the sweep (agent.hidden=65537, seed=0): agent.hidden must be an integer "
         "in [1, 65536], got 65537 (from the command line)"),
        # more than 64 jobs were left to the jobs too
        ([f"agent.hidden={','.join(map(str, range(1, 65)))},0"],
         "job 64 of the sweep (agent.hidden=0): agent.hidden must be an integer in [1, 65536], "
         "got 0 (from the command line)"),
        # a group swept beside a range: each job's values on its group's config
        (["agent=a2c,ppo", "agent.hyperparams.n_steps=range(1,3)", "env.n_envs=1"],
         "job 2 of the sweep (agent=ppo, agent.hyperparams.n_steps=1): "
         "agent.hyperparams.n_steps=1 x env.n_envs=1 = 1 step a rollout"),
        # the refusal said no origin
        (["seed=0,1", "train.eval_seed=-1"],
         "job 0 of the sweep (seed=0): train.eval_seed must be >= 0 (or null), got -1 (from "
         "the command line)"),
    ],
)  # fmt: skip
def test_the_sweep_precheck_checks_every_job_and_names_where_the_value_came_from(
    sweep: list[str], said: str
) -> None:
    """Every job of a sweep over lists or ranges, however many, is checked before job 0
    trains, and the refusal says where the value came from."""
    from experiments.train import check_sweep

    swept = {arg.split("=", 1)[0] for arg in sweep}
    tiny = [arg for arg in TINY if arg.split("=", 1)[0] not in swept]
    with pytest.raises(ValueError) as refused:
        check_sweep(["-m", *sweep, *tiny])
    assert str(refused.value).startswith(said), str(refused.value)


def test_the_sweep_precheck_applies_a_job_s_values_in_the_order_hydra_does() -> None:
    """Hydra applies a job's values in its line's order, the last winning: the swept
    ``agent.hyperparams.n_steps`` below is replaced by the dict after it in every job
    (64 steps). The pre-check applied the swept values after all the others, checked
    1 step and refused a sweep whose every job runs."""
    from experiments.train import check_sweep

    tiny = [arg for arg in TINY if arg != "env.n_envs=1"]
    check_sweep(
        ["-m", "env.n_envs=1", "agent.hyperparams.n_steps=1,2",
         "agent.hyperparams={n_steps:64,batch_size:32}", *tiny]
    )  # fmt: skip
    # and a refusal is still said when the swept value is the last word
    with pytest.raises(ValueError, match=r"^job 0 of the sweep \(agent.hyperparams.n_steps=1\)"):
        check_sweep(
            ["-m", "env.n_envs=1", "agent.hyperparams={n_steps:64,batch_size:32}",
             "agent.hyperparams.n_steps=1,2", *tiny]
        )  # fmt: skip


def test_the_sweep_precheck_checks_each_job_on_a_config_of_its_own() -> None:
    """The checks set values in the config they check (``cluster.node`` null beside
    ``cluster.nodes``): a config reused from job to job carried them into the next
    job, and ``cluster.nodes=null`` (the setup's node) was refused as a null node."""
    from experiments.train import check_sweep

    check_sweep(["-m", "cluster.nodes=[4xH100,8xH200],null", *TINY])


def test_the_sweep_precheck_reads_no_trace(tmp_path) -> None:
    """A trace's rows are the jobs' to read (and to say its warnings about, which a
    read here, its plan cached, would keep from their logs): a bad row passes the
    check, and the first job refuses it."""
    from experiments.train import check_sweep

    trace = tmp_path / "nan.jsonl"
    trace.write_text('{"timestamp":NaN,"input_length":600,"output_length":10,"hash_ids":[1,2]}\n')
    check_sweep(["-m", "seed=0,1", "workload=trace", f"workload.path={trace}", *TINY[1:]])


def test_the_sweep_precheck_takes_a_key_given_twice_as_hydra_does() -> None:
    """Hydra's sweeper keeps the last value of a key given twice: the precheck checks
    those jobs (it checked the earlier sweep's job 1, n_envs=2, which never runs)."""
    from experiments.train import check_sweep

    dqn = ["-m", "agent=dqn", "agent.hyperparams.train_freq=[1,episode]", *TINY]
    tiny = [arg for arg in dqn if not arg.startswith("env.n_envs=")]
    check_sweep([*tiny, "env.n_envs=1,2", "env.n_envs=1"])  # one job, n_envs=1: fine
    with pytest.raises(ValueError, match=r"job 1 of the sweep \(env.n_envs=2\)"):
        check_sweep([*tiny, "env.n_envs=1", "env.n_envs=1,2"])


@pytest.mark.parametrize(
    ("sweep", "said"),
    [
        # PPO asserts batch_size > 1 as it builds the model: job 0 failed while job 1 trained
        (["agent.hyperparams.batch_size=1,32", "agent.hyperparams.n_steps=64"],
         "job 0 of the sweep (agent.hyperparams.batch_size=1): agent.hyperparams.batch_size "
         "must be an integer >= 2 with agent.hyperparams.normalize_advantage on"),
        # a + key (not in the agent's conf): the check composed no job and left it to them
        (["agent.hyperparams.batch_size=32", "+agent.hyperparams.clip_range_vf=0.2,0"],
         "job 1 of the sweep (+agent.hyperparams.clip_range_vf=0): "
         "agent.hyperparams.clip_range_vf must be a finite number > 0, got 0"),
        (["agent.hyperparams.batch_size=32", "+agent.hyperparams.use_sde=false,true"],
         "job 1 of the sweep (+agent.hyperparams.use_sde=True): agent.hyperparams.use_sde "
         "must be false"),
        # SB3 asserts it at learn()'s first step
        (["agent=dqn", "agent.hyperparams.train_freq=[1,episode]", "env.n_envs=1,2"],
         "job 1 of the sweep (env.n_envs=2): agent.hyperparams.train_freq=[1, 'episode'] "
         "counts episodes"),
    ],
)  # fmt: skip
def test_a_sweep_with_a_value_sb3_refuses_stops_before_job_0(sweep, said, tmp_path, run_command):
    """Values SB3 refuses only as it builds the model or learns are refused up
    front too, in one line naming the job and the field."""
    out = tmp_path / "sweep"
    swept = {arg.split("=", 1)[0] for arg in sweep}
    tiny = [arg for arg in TINY if arg.split("=", 1)[0] not in swept]  # each key once
    proc = run_command(
        "experiments.train",
        ["-m", *sweep, *tiny, "train.total_timesteps=64", f"out_dir={out}"],
        tmp_path,
        {"PYTHONPATH": str(ROOT), "WANDB_SILENT": "true"},
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert said in proc.stderr
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["joblib", "submitit_local"])
def test_two_job_multirun(launcher, tmp_path, run_command):
    """The sweep's own process is this one (the launcher's jobs run in processes of
    their own, as they would). The jobs train only (no evaluation, charts or
    results.json, which the single-run tests check): what differs here is the launch."""
    out = tmp_path / "sweep"
    proc = run_command(
        "experiments.train",
        [
            "-m",
            "seed=0,1",
            f"hydra/launcher={launcher}",
            *TINY,
            "agent=a2c",
            "train.total_timesteps=64",
            "train.evaluate=false",
            f"out_dir={out}",
        ],
        tmp_path,
        {"PYTHONPATH": str(ROOT), "WANDB_SILENT": "true"},
    )
    summary = out / "sweep.json"  # each failed job's error, when one fails
    said = summary.read_text()[-3000:] if summary.exists() else ""
    assert proc.returncode == 0, proc.stderr[-3000:] + said
    from agents.callbacks import usable_threads

    # joblib runs a job per CPU at once: each takes its share of the update threads
    threads = 1 if launcher == "joblib" else usable_threads(2)
    for job in ("0", "1"):
        record = json.loads((out / job / "train.json").read_text())["train"]
        assert record["timesteps"] >= 64 and record["update_threads"] == threads
        assert load_spec(out / job / "agent").seed == int(job)
        assert not (out / job / "results.json").exists()


def test_a_tune_btb_trial_says_its_windows_and_copies(tmp_path, run_command):
    """workload=tiny: the prefix (65,536 tokens, ~4.7 s of prefill on 70b) is ready
    only after each 4 s burst has arrived, so published BTB never copies there. The
    trial's result line is followed by the file it wrote, as the other commands end
    (it ended on the result line, naming no file)."""
    proc = run_command(
        "experiments.tune_btb", ["workload=tiny", f"out_dir={tmp_path / 'one'}"], tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    *_, result, wrote = proc.stdout.splitlines()
    assert result.endswith(
        "on 2 train windows (at most 2: workload.train_pool=2; null for all), 0 warm copies "
        "(none made: here BTB routes as its router alone does)"
    )
    assert wrote == f"wrote {tmp_path / 'one' / 'objective.json'}"
    record = json.loads((tmp_path / "one" / "objective.json").read_text())
    assert record["row"]["warm_copies"] == 0
    assert record["train_streams"] == "own"  # the default, named: the windows it tuned on
    # bursts sharing 2,048 tokens: Y=65,536 keys none of them, and the line says why
    args = [
        "workload=tiny",
        "+workload.params.prefix_tokens=2048",
        "+workload.params.train_streams=shared",
        f"out_dir={tmp_path / 'two'}",
    ]
    proc = run_command("experiments.tune_btb", args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    *_, result, wrote = proc.stdout.splitlines()
    assert result.endswith(
        "0 warm copies (none made: y_tokens=65536 is longer than any prefix two of these "
        "windows' requests share, 2,048 tokens)"
    )
    assert wrote == f"wrote {tmp_path / 'two' / 'objective.json'}"
    record = json.loads((tmp_path / "two" / "objective.json").read_text())
    assert record["train_streams"] == "shared"


@pytest.mark.slow
def test_optuna_sweep_over_btb_thresholds(tmp_path, run_command):
    out = tmp_path / "tune"
    proc = run_command(
        "experiments.tune_btb",
        ["-m", "workload=tiny", "hydra.sweeper.n_trials=3", f"out_dir={out}"],
        tmp_path,
        {"WANDB_SILENT": "true"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    best = OmegaConf.load(out / "optimization_results.yaml")
    values = [json.loads(p.read_text())["ttft_mean_s"] for p in out.glob("*/objective.json")]
    assert len(values) == 3
    assert best.best_value == pytest.approx(min(values))
    assert "alembic" not in proc.stdout + proc.stderr  # optuna's companion logs nothing of its own


def _wandb_records(path):
    """Protobuf records of an offline W&B run file (a leveldb-style log of 32 KiB blocks)."""
    from google.protobuf.message import DecodeError
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B"
    pos, block, partial = 7, 32768, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if length == 0 and kind == 0:
            pos += left
            continue
        if pos + 7 + length > len(data):
            return  # W&B is still writing this chunk (it writes from its own process)
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = pb.Record()
            try:
                record.ParseFromString(partial + chunk if kind == 4 else chunk)
            except DecodeError:
                return  # a record caught mid-write: the caller reads the file again
            partial = b""
            yield record
        else:
            partial = chunk if kind == 2 else partial + chunk


@pytest.mark.slow
def test_wandb_offline_run_holds_config_curves_table_and_charts(tmp_path):
    cfg = compose_train(
        [
            *TINY[:1],
            "logger=wandb",
            "logger.mode=offline",
            "train.progress=false",
            "train.checkpoint_every=0",
            "agent=a2c",
            "env.n_envs=1",  # 300 steps in one env finish an episode (a return to log)
            "train.total_timesteps=300",
            f"out_dir={tmp_path}",
        ]
    )
    train(cfg)
    (run_file,) = glob.glob(str(tmp_path / "wandb" / "offline-run-*" / "*.wandb"))
    media = Path(run_file).parent / "files" / "media"

    def missing() -> list[str]:
        """What the offline run does not hold (yet: W&B writes from its own process)."""
        records = list(_wandb_records(run_file))
        history: set[str] = set()
        config: dict[str, str] = {}
        for record in records:
            kind = record.WhichOneof("record_type")
            if kind == "history":
                history |= {item.key or "/".join(item.nested_key) for item in record.history.item}
            elif kind == "run":
                config |= {item.key: item.value_json for item in record.run.config.update}
        gaps = []
        if not any(r.WhichOneof("record_type") == "exit" for r in records):
            gaps.append("exit record")
        wanted = {
            "train/steps_per_s",
            "train/timesteps",
            "train/episode_return_mean",
            "train/rollout_steps_per_s",
            "train/update_steps_per_s",
            "update/value_loss",  # each update's statistics (A2C: no KL, no clip fraction)
            "update/entropy_loss",
            "update/epochs",
            "update/policy_loss",
        }
        gaps += sorted(wanted - history)
        if "agent" not in config or json.loads(config["agent"])["algo"] != "a2c":
            gaps.append("config agent.algo=a2c")
        if "train" not in config or json.loads(config["train"])["total_timesteps"] != 300:
            gaps.append("config train.total_timesteps=300")
        if json.loads(config.get("run_folder", "null")) != str(tmp_path):  # back to the files
            gaps.append("config run_folder")
        if not list(media.glob("table/evaluation_*.table.json")):
            gaps.append("evaluation table")
        charts = {"_".join(p.name.split("_")[:2]) for p in media.glob("images/charts/*.png")}
        gaps += sorted({"ttft_cdf", "ttft_reduction", "burst_timeline"} - charts)
        return gaps

    deadline = time.monotonic() + 60
    while (gaps := missing()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not gaps, f"the offline run lacks {gaps}"


def _wandb_exit_code(folder: Path) -> int | None:
    """The exit code of the one offline W&B run under ``folder`` (None: no exit record yet)."""
    (run_file,) = glob.glob(str(folder / "wandb" / "offline-run-*" / "*.wandb"))
    deadline = time.monotonic() + 30
    while True:  # W&B writes from its own process: read again until its exit record is in
        codes = [r.exit.exit_code for r in _wandb_records(run_file) if r.HasField("exit")]
        if codes or time.monotonic() > deadline:
            return codes[0] if codes else None
        time.sleep(0.2)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (None, 0), (RuntimeError("a bug"), 1), (KeyboardInterrupt(), 130), (Terminated(), 143),
        (HungUp(), 129),
    ],
)  # fmt: skip
def test_the_wandb_run_ends_with_the_command_s_exit_code(tmp_path, error, code):
    """A run ended by an exception or Ctrl-C was recorded by W&B as a success (exit code 0).
    (It logged a figure: one that logged nothing and did not finish is removed.)"""
    from experiments.tracking import RunLogger

    cfg = OmegaConf.create(
        {"kind": "wandb", "mode": "offline", "project": "btb-test", "entity": None,
         "group": None, "tags": []}
    )  # fmt: skip
    logger = RunLogger(cfg, {}, tmp_path, name="exit", job_type="evaluate")
    logger.log({"probe": 1.0}, step=1)
    logger.finish(error)
    logger.finish(RuntimeError("again"))  # the run ended once: a later call does nothing
    assert _wandb_exit_code(tmp_path) == code


@pytest.mark.parametrize("mode", ["offline", "disabled"])
def test_a_finished_offline_wandb_run_is_named_with_its_sync_command(tmp_path, capsys, mode):
    """Nothing said where a finished offline W&B run went or how to upload it
    (WANDB_SILENT keeps W&B's own lines out): one line names it, with the
    ``wandb sync`` command; a disabled run has nothing to upload."""
    from experiments.tracking import RunLogger

    cfg = OmegaConf.create(
        {"kind": "wandb", "mode": mode, "project": "btb-test", "entity": None,
         "group": None, "tags": []}
    )  # fmt: skip
    logger = RunLogger(cfg, {}, tmp_path, name="done", job_type="evaluate")
    logger.log({"probe": 1.0}, step=1)
    capsys.readouterr()
    logger.finish()
    out = capsys.readouterr().out
    if mode == "disabled":
        assert "wandb sync" not in out
        return
    (folder,) = glob.glob(str(tmp_path / "wandb" / "offline-run-*"))
    assert out == f"W&B offline run: upload it with `wandb sync {folder}`\n"


def test_the_sync_command_of_an_offline_run_quotes_a_folder_with_a_space(tmp_path, capsys):
    """A run folder with a space in its path gave `wandb sync /a/my runs/...`, which a
    shell splits in two: the path is quoted, and the command as a shell reads it
    names the run's folder."""
    import shlex

    from experiments.tracking import RunLogger

    cfg = OmegaConf.create(
        {"kind": "wandb", "mode": "offline", "project": "btb-test", "entity": None,
         "group": None, "tags": []}
    )  # fmt: skip
    out_dir = tmp_path / "my runs"
    out_dir.mkdir()
    logger = RunLogger(cfg, {}, out_dir, name="done", job_type="evaluate")
    logger.log({"probe": 1.0}, step=1)
    capsys.readouterr()
    logger.finish()
    out = capsys.readouterr().out
    (folder,) = glob.glob(str(out_dir / "wandb" / "offline-run-*"))
    command = out.split("`")[1]
    assert shlex.split(command) == ["wandb", "sync", folder]


def test_a_failed_evaluate_that_logged_nothing_leaves_no_wandb_run(tmp_path):
    """evaluate's policy failing ended the command with status 1 and its W&B run with 0;
    a W&B run that logged nothing before its job failed holds only its config, and
    goes (so a run folder the run made goes too, as without W&B)."""
    from baselines.policy import POLICIES, Policy, register
    from envs.sim.errors import PolicyFailure
    from experiments.evaluate import evaluate

    @register("probe_fails")
    class ProbeFails(Policy):
        def decide(self, sim, request):  # type: ignore[no-untyped-def]
            raise RuntimeError("probe")

    try:
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose(
                config_name="evaluate",
                overrides=["workload=tiny", "logger=wandb", "logger.mode=offline",
                           "progress=false", "policies=[probe_fails]", f"out_dir={tmp_path}"],
            )  # fmt: skip
        with pytest.raises(PolicyFailure, match="probe_fails"):
            evaluate(cfg)
    finally:
        POLICIES.pop("probe_fails", None)
    assert not (tmp_path / "wandb").exists()


@pytest.mark.parametrize("name", ["train", "evaluate", "tune_btb"])
def test_run_dir_defaults_to_dated_folder_without_out_dir(name: str) -> None:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name=name, return_hydra_config=True)
        chosen = compose(config_name=name, overrides=["out_dir=/tmp/x"], return_hydra_config=True)
    assert str(cfg.hydra.run.dir).startswith(f"runs/{name}/20")
    assert str(cfg.hydra.sweep.dir).startswith(f"multirun/{name}/20")
    assert chosen.hydra.run.dir == "/tmp/x" and chosen.hydra.sweep.dir == "/tmp/x"


@pytest.mark.parametrize("name", ["train", "evaluate", "tune_btb"])
def test_run_dir_names_the_workload_and_a_trace_s_file(name: str, tmp_path: Path) -> None:
    trace = ["workload=trace", f"workload.path={tmp_path / 'sub' / 'mine.jsonl'}"]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        generated = compose(config_name=name, overrides=["workload=tiny"], return_hydra_config=True)
        plain = compose(config_name=name, overrides=["workload=art_like"], return_hydra_config=True)
        changed = compose(
            config_name=name,
            overrides=["workload=art_like", "+workload.params.mean_rate_per_s=5"],
            return_hydra_config=True,
        )
        traced = compose(config_name=name, overrides=trace, return_hydra_config=True)
    # tiny is bursted_synthetic made small: its folder names what it changes, as its rows
    # do (bursted_synthetic[n_bursts=2,...]) and compare's folders do
    small = "__bursted_synthetic-n_bursts-2-burst_requests-40-n_decoys-6-burst_window_s-4.0-"
    assert str(generated.hydra.run.dir).endswith(small)
    assert str(generated.hydra.sweep.dir).endswith(small)
    assert str(traced.hydra.run.dir).endswith("__trace-mine.jsonl")  # the file's name, no path
    assert str(plain.hydra.run.dir).endswith("__art_like")  # nothing changed
    assert str(changed.hydra.run.dir).endswith("__art_like-mean_rate_per_s-5-")
    assert str(traced.hydra.sweep.dir).endswith("__trace-mine.jsonl")


@pytest.mark.parametrize(
    ("evaluate", "main", "beside"),
    [(False, "train.json", "agent/"), (True, "results.json", "agent/, charts")],
)
def test_train_s_last_line_names_what_it_wrote(evaluate, main, beside, tmp_path, capsys):
    """train named its run folder in its first line only (scrolled away behind the
    progress bars) and, with train.evaluate=false, ended on ``no RL steps`` or
    ``trained to N steps``: its last line names the file that marks the run
    finished and what goes with it, as evaluate's does."""
    out = tmp_path / "run"
    args = [*TINY, "train.total_timesteps=0", f"train.evaluate={evaluate}", f"out_dir={out}"]
    train(compose_train(args))
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == f"wrote {out / main} and what goes with it ({beside})"
    assert (out / main).is_file() and (out / "agent" / "agent.json").is_file()
    assert not (out / "last").exists() and not (out / "checkpoints").exists()


@pytest.mark.slow
def test_validation_lines_start_lines_of_their_own_beside_the_progress_bar(tmp_path, monkeypatch):
    """On a terminal stdout and stderr share the screen: each validation line went
    into the progress bar's line (``train:   0%| ... |validation at step 0: ...``),
    which is why recipes that validate turned the bar off. The bar is cleared
    before each line and drawn again after it."""
    import io
    import sys

    screen = io.StringIO()
    monkeypatch.setattr(sys, "stdout", screen)
    monkeypatch.setattr(sys, "stderr", screen)
    args = [*TINY, *ALGO_OVERRIDES["ppo"], "train.progress=true", "train.total_timesteps=128",
            "train.val_every=64", "train.evaluate=false", f"out_dir={tmp_path}"]  # fmt: skip
    train(compose_train(args))
    shown = screen.getvalue().replace("\r", "\n").split("\n")
    said = [line for line in shown if "validation at step" in line]
    assert len(said) == 3 and all(line.startswith("validation at step ") for line in said)
    assert any(line.startswith("train: 100%") for line in shown)  # the bar was drawn


def test_resume_reports_a_reward_option_the_checkpoint_left_at_its_default():
    # env_kwargs leave reward_baseline / reward_timing out at their defaults (older
    # agents never had them), so a change either way must still be said and recorded
    from experiments.train import env_kwargs

    plain = env_kwargs(compose_train(list(TINY)))
    assert "reward_timing" not in plain and "reward_baseline" not in plain
    accrued = env_kwargs(compose_train([*TINY, "env.reward_timing=accrued"]))
    relative = env_kwargs(compose_train([*TINY, "env.reward_baseline=btb"]))
    assert resume_changes(plain, accrued) == {"env.reward_timing": ["first_token", "accrued"]}
    assert resume_changes(accrued, plain) == {"env.reward_timing": ["accrued", "first_token"]}
    assert resume_changes(plain, relative) == {"env.reward_baseline": [None, "btb"]}
    assert resume_changes(plain, plain) == {}


def test_a_sweep_on_a_bad_trace_is_one_line_before_it_starts(tmp_path, run_command):
    """tune_btb -m reads a trace file its jobs share before the sweep starts: a bad
    row is one line and exit 2, not the sweeper's report of each job's failure."""
    trace = tmp_path / "nan.jsonl"
    trace.write_text(
        '{"timestamp":0,"input_length":600,"output_length":10,"hash_ids":[1,2]}\n'
        '{"timestamp":NaN,"input_length":600,"output_length":10,"hash_ids":[1,2]}\n'
    )
    out = tmp_path / "tune"
    args = ["-m", "hydra.sweeper.n_trials=1", "workload=trace", f"workload.path={trace}",
            "workload.train_pool=1", "m=int(interval(1, 4))", f"out_dir={out}"]  # fmt: skip
    proc = run_command("experiments.tune_btb", args, tmp_path, {"WANDB_SILENT": "true"})
    assert proc.returncode == 2
    assert proc.stderr == (
        "error: experiments.tune_btb: "
        f"{trace}, line 2, field 'timestamp': must be finite, got nan\n"
    )
    assert not out.exists()


def test_evaluation_logs_each_policy_s_figures_as_numbers(tmp_path):
    """Beside the table and charts, the logger's summary holds each policy's mean and
    p95 TTFT (W&B runs sort and plot by summary numbers, not by tables); the charts
    logged are the run folder's images, and only those (not results.json)."""
    from experiments.jobs import evaluate_and_write

    class Recorder:
        def __init__(self):
            self.summaries = {}
            self.images = []

        def log_table(self, name, rows):
            pass

        def log_images(self, paths):
            self.images += list(paths)

        def summary(self, values):
            self.summaries |= values

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=["workload=tiny", "logger=none"])
    logger = Recorder()
    rows = evaluate_and_write({}, ["btb"], cfg, tmp_path, logger, progress=False)
    got = {r["policy"]: r for r in rows}
    assert logger.summaries["eval/btb/ttft_mean_s"] == got["btb"]["ttft_mean_s"]
    assert logger.summaries["eval/cache_aware/ttft_p95_s"] == got["cache_aware"]["ttft_p95_s"]
    assert all(math.isfinite(v) for v in logger.summaries.values())
    assert sorted(logger.images) == sorted(tmp_path.glob("*.png"))
    assert {p.name for p in logger.images} >= {"ttft_cdf.png", "ttft_reduction.png"}


def test_sweep_size_counts_the_jobs_a_sweep_launches(tmp_path):
    from experiments.train import sweep_size

    task = ["seed=0,1,2", "agent.hyperparams.learning_rate=choice(0.1,0.01)", "x=range(1,3)", "y=4"]
    OmegaConf.save({"hydra": {"overrides": {"task": task}}}, tmp_path / "multirun.yaml")
    assert sweep_size(tmp_path) == 3 * 2 * 2  # y=4 is one value
    # an interval an optimiser draws from has no count; no file, none either
    OmegaConf.save(
        {"hydra": {"overrides": {"task": ["z=interval(0,1)"]}}}, tmp_path / "multirun.yaml"
    )
    assert sweep_size(tmp_path) is None
    assert sweep_size(tmp_path / "none") is None


def test_the_small_blocks_warning_gives_y_tokens_as_each_command_takes_it():
    """The warning about prompts keyed on blocks of their own names how to give the
    thresholds agents ``y_tokens``; each spelling it names composes in its command
    (evaluate refuses compare's ``policy_kwargs=AGENT.y_tokens=...``)."""
    from envs.workloads.stats import PRIVATE_KEY_EFFECT

    said = dict(
        (command, spelling.replace("AGENT", "ppo_thresholds").replace("...", "8192"))
        for spelling, command in re.findall(r"(\S+=\.\.\.) on (\w+)", PRIVATE_KEY_EFFECT)
    )
    assert set(said) == {"train", "compare", "evaluate"}
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        train_cfg = compose(config_name="train", overrides=["env=thresholds", said["train"]])
        evaluate_cfg = compose(config_name="evaluate", overrides=[said["evaluate"]])
    assert train_cfg.env.y_tokens == 8192
    assert evaluate_cfg.policy_kwargs.ppo_thresholds.y_tokens == 8192
    assert said["compare"] == "policy_kwargs=ppo_thresholds.y_tokens=8192"  # compare's own form


def test_evaluate_and_compare_give_a_threshold_agent_its_y_tokens(tmp_path, run_command):
    """Bursts whose requests each end in a 512-token suffix (two 256-token blocks):
    the shipped ppo_thresholds keys each request as its own prefix and copies nothing;
    given ``y_tokens=16384`` (the bursts' shared prefix) it copies. Both commands
    record the setting; one shorter than a block is refused before the run folder."""
    from experiments.evaluate import evaluate
    from tests.envs.thresholds_replay import TWO_BLOCK_SUFFIX

    shape = ("n_bursts", "burst_requests", "n_decoys", "burst_window_s", "prefix_tokens",
             "suffix_tokens")  # fmt: skip
    params = [f"+workload.params.{k}={getattr(TWO_BLOCK_SUFFIX, k)}" for k in shape]

    def copies(*overrides, out):
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            cfg = compose(
                config_name="evaluate",
                overrides=["logger=none", "progress=false", "policies=[btb]",
                           "checkpoint=[ppo_thresholds]", "workload.eval_windows=1",
                           f"out_dir={out}", *params, *overrides],
            )  # fmt: skip
        evaluate(cfg)
        result = json.loads((out / "results.json").read_text())
        rows = {r["policy"]: r for r in result["rows"]}
        return rows["ppo_thresholds"]["warm_copies"], result["config"]["policy_kwargs"]

    assert copies(out=tmp_path / "own") == (0, {})
    keyed = copies("+policy_kwargs.ppo_thresholds.y_tokens=16384", out=tmp_path / "y")
    assert keyed[0] > 0 and keyed[1] == {"ppo_thresholds": {"y_tokens": 16384}}
    with pytest.raises(ValueError, match=r"agent 'ppo_thresholds' \(policy_kwargs\): y_tokens"):
        copies("+policy_kwargs.ppo_thresholds.y_tokens=16384",
               "+workload.params.block_tokens=32768", out=tmp_path / "refused")  # fmt: skip
    assert not (tmp_path / "refused").exists()
    # compare, on the example trace's first test window: its own key copies; a Y
    # longer than the trace's shared prefixes (16,384 tokens) turns its BTB off
    made = []
    for extra in ([], ["policy_kwargs=ppo_thresholds.y_tokens=65536"]):
        out = tmp_path / f"compare{len(made)}"
        args = ["policies=btb", "agents=ppo_thresholds", "windows=1", f"out_dir={out}",
                "workload=trace", f"workload.path={ROOT / 'examples/mooncake_example.jsonl'}",
                *extra]  # fmt: skip
        assert run_command("experiments.compare", args, tmp_path).returncode == 0
        result = json.loads((out / "results.json").read_text())
        rows = {r["policy"]: r for r in result["rows"]}
        made.append((rows["ppo_thresholds"]["warm_copies"], result["config"]["policy_kwargs"]))
    assert made == [(9, {}), (0, {"ppo_thresholds": {"y_tokens": 65536}})]
    # a Y shorter than the workload's blocks: refused before any policy runs
    out = tmp_path / "coarse"
    args = ["policies=btb", "agents=ppo_thresholds", "windows=1", f"out_dir={out}",
            "workload=trace", f"workload.path={ROOT / 'examples/mooncake_example.jsonl'}",
            "workload.merge_blocks=4", "policy_kwargs=ppo_thresholds.y_tokens=1024"]  # fmt: skip
    refused = run_command("experiments.compare", args, tmp_path)
    assert refused.returncode == 2 and "run/s" not in refused.stderr  # (no progress bar)
    assert refused.stderr.endswith(
        "agent 'ppo_thresholds' (policy_kwargs): y_tokens = 1024 is shorter than one "
        "2048-token block of the workload (Y is whole blocks: y_tokens=2048 or more keys one)\n"
    )
    assert not out.exists()


def evaluated_tiny(out: Path, policies: str, *overrides: str) -> dict:
    """``evaluate`` of ``policies`` on workload=tiny into ``out``: its results.json."""
    from experiments.evaluate import evaluate

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            config_name="evaluate",
            overrides=["workload=tiny", "logger=none", "progress=false",
                       f"policies={policies}", f"out_dir={out}", *overrides],
        )  # fmt: skip
    evaluate(cfg)
    return json.loads((out / "results.json").read_text())


def test_evaluate_runs_a_baseline_with_its_settings_and_checks_them(tmp_path):
    """``+policy_kwargs.btb_pending.m=1``: a burst's prefix on one node, where M=4
    copies it to the others (6 copies on workload=tiny; none with M=1), and the run
    records it; a setting btb lacks, a value btb refuses and a policy not run are one
    line each, before the run folder."""

    def rows(*overrides, out):
        return evaluated_tiny(out, "[btb,btb_pending]", *overrides)

    plain = rows(out=tmp_path / "plain")
    tuned = rows(
        "+policy_kwargs.btb_pending.m=1", "+policy_kwargs.btb.shadow=no", out=tmp_path / "m1"
    )
    # as typed, and as the baselines took them (shadow=no is a bool)
    assert tuned["config"]["policy_kwargs"] == {"btb_pending": {"m": 1}, "btb": {"shadow": "no"}}
    assert tuned["policy_settings"] == {"btb_pending": {"m": 1}, "btb": {"shadow": False}}
    assert "policy_settings" not in plain
    before = {r["policy"]: r for r in plain["rows"]}
    after = {r["policy"]: r for r in tuned["rows"]}
    assert (before["btb_pending"]["warm_copies"], after["btb_pending"]["warm_copies"]) == (6, 0)
    # another policy's settings: btb's row unchanged (but the wall time)
    timing = {"wall_s", "requests_per_s"}
    assert {k: v for k, v in after["btb"].items() if k not in timing} == {
        k: v for k, v in before["btb"].items() if k not in timing
    }
    for override, said in (
        ("+policy_kwargs.btb.nope=1", "policy_kwargs: 'btb.nope=1': btb has no setting 'nope'"),
        ("+policy_kwargs.btb.x=0", "btb.x must be an integer >= 1, got 0"),
        (
            "+policy_kwargs.dynamo.temperature=0.5",
            "names baseline 'dynamo', which is not among the baselines run",
        ),
    ):
        with pytest.raises(ValueError, match=re.escape(said)):
            rows(override, out=tmp_path / "refused")
        assert not (tmp_path / "refused").exists()


def test_evaluation_rows_are_labelled_without_train_streams(tmp_path, capsys):
    """train_streams draws train windows only, so evaluate's rows and header name the
    test windows as everywhere else (a recipe's +workload.params.train_streams=shared
    labelled them bursted_synthetic[...,train_streams=shared]); the parameters that
    make other test windows stay in the label."""

    def evaluated(*overrides, out):
        rows = evaluated_tiny(out, "[btb]", *overrides)["rows"]
        return {row["workload"] for row in rows}, capsys.readouterr().out

    tiny = "bursted_synthetic[n_bursts=2,burst_requests=40,n_decoys=6,burst_window_s=4.0]"
    for streams in ("own", "shared"):
        out = tmp_path / streams
        labels, said = evaluated(f"+workload.params.train_streams={streams}", out=out)
        assert labels == {tiny}
        assert f"70b_h100x4 · {tiny} · 1 test window" in said
