"""Learned agents: the node-set networks, the algorithms' builders and
checkpoints, and the adapter that lets agents act as Policies."""

from __future__ import annotations

import json
import tempfile

import gymnasium as gym
import numpy as np
import pytest
import torch

import envs  # noqa: F401  (registers the environments)
from agents.adapter import AgentPolicy
from agents.algorithms import AgentSpec, build_model, load_agent, load_spec, save_agent
from agents.networks import NodeSetNetwork
from envs.encoder import NODE_FEATURES, REQUEST_FEATURES
from envs.sim import ClusterSpec, SimConfig, Simulator, setup_cluster
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

SMALL = BurstedSyntheticConfig(n_bursts=2, burst_requests=30, n_decoys=4, burst_window_s=4.0)
TINY_HP = {
    "ppo": {"n_steps": 64, "batch_size": 32, "n_epochs": 2},
    "maskable_ppo": {"n_steps": 64, "batch_size": 32, "n_epochs": 2},
    "a2c": {"n_steps": 8},
    "dqn": {"learning_starts": 32, "buffer_size": 500},
}


@pytest.fixture(scope="module")
def window():
    return synthetic_window(SMALL, window=2)


def test_node_set_network_is_permutation_equivariant():
    torch.manual_seed(0)
    net = NodeSetNetwork(len(NODE_FEATURES), len(REQUEST_FEATURES), hidden=16)
    n = 5
    obs = torch.rand(3, n * len(NODE_FEATURES) + len(REQUEST_FEATURES))
    perm = [3, 0, 4, 1, 2]
    nodes = obs[:, : n * len(NODE_FEATURES)].reshape(3, n, -1)
    permuted = torch.cat([nodes[:, perm].reshape(3, -1), obs[:, n * len(NODE_FEATURES) :]], 1)
    scores, context = net.embed(obs)
    p_scores, p_context = net.embed(permuted)
    assert torch.allclose(context, p_context, atol=1e-6)
    assert torch.allclose(scores[:, perm], p_scores, atol=1e-6)


@pytest.mark.parametrize(
    ("algo", "kind", "net"),
    [
        ("ppo", "route", "set"),
        ("a2c", "route", "mlp"),
        ("dqn", "route", "set"),
        ("maskable_ppo", "route_warm", "set"),
        ("ppo", "route_warm", "set"),
        ("ppo", "thresholds", "set"),
    ],
)
def test_agent_acts_identically_through_env_and_adapter(algo, kind, net, window, tmp_path):
    spec = AgentSpec(algo=algo, env=kind, net=net, hidden=16)
    env = gym.make(spec.env_id, windows=[window])
    model = build_model(spec, env, TINY_HP[algo])
    model.learn(96)
    save_agent(model, spec, tmp_path / "agent")
    policy = AgentPolicy.load(tmp_path / "agent")
    assert policy.spec.timesteps == model.num_timesteps

    rollout = gym.make(spec.env_id, windows=[window]).unwrapped
    obs, _ = rollout.reset(seed=4)
    done = False
    while not done:
        masks = {"action_masks": rollout.action_masks()} if algo == "maskable_ppo" else {}
        action, _ = policy.model.predict(obs, deterministic=True, **masks)
        obs, _, done, _, _ = rollout.step(action)

    sim = Simulator(
        setup_cluster("70b_h100x4"),
        window,
        SimConfig(),
        np.random.default_rng(rollout._episode["sim_seed"]),
    )
    records = policy.run(sim)
    assert np.array_equal(records.ttft_s, rollout.sim.records.ttft_s)
    assert len(records.ttft_s) == len(window)

    policy.deterministic = False  # sampled (DQN: epsilon-greedy): the same draws on a rerun
    sampled = [
        policy.run(Simulator(setup_cluster("70b_h100x4"), window, SimConfig(), rng)).ttft_s
        for rng in (np.random.default_rng([0, 1]), np.random.default_rng([0, 1]))
    ]
    assert len(sampled[0]) == len(window) and np.array_equal(sampled[0], sampled[1])


def test_set_policy_trained_on_four_nodes_runs_on_six(window, tmp_path):
    spec = AgentSpec(algo="ppo", env="route", net="set", hidden=16)
    model = build_model(spec, gym.make(spec.env_id, windows=[window]), TINY_HP["ppo"])
    model.learn(64)
    six = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 6)
    env6 = gym.make(spec.env_id, setup=six, windows=[window])
    model6 = build_model(spec, env6, TINY_HP["ppo"])
    model6.policy.load_state_dict(model.policy.state_dict())
    obs, _ = env6.reset(seed=0)
    action, _ = model6.predict(obs, deterministic=True)
    assert 0 <= int(action) < 6
    policy = AgentPolicy(model6, spec)
    records = policy.run(Simulator(six, window, SimConfig()))
    assert set(np.unique(records.node)) <= set(range(6))


def test_checkpoint_round_trip_and_errors(window, tmp_path):
    spec = AgentSpec(algo="a2c", env="route", net="set", hidden=8)
    model = build_model(spec, gym.make(spec.env_id, windows=[window]), TINY_HP["a2c"])
    model.learn(16)
    save_agent(model, spec, tmp_path / "a")
    loaded, loaded_spec = load_agent(tmp_path / "a")
    assert loaded_spec == spec
    obs = np.zeros(loaded.observation_space.shape, dtype=np.float32)
    assert loaded.predict(obs, deterministic=True)[0] == model.predict(obs, deterministic=True)[0]
    with pytest.raises(FileNotFoundError, match="missing: no such file or folder"):
        load_agent(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"not an agent checkpoint \(no agent\.json\)$"):
        load_agent(tmp_path / "empty")


def _interrupted(*args, **kwargs):
    raise KeyboardInterrupt


def _files(folder):
    return {path.name: path.read_bytes() for path in folder.iterdir()}


def test_a_save_stopped_half_way_leaves_no_half_checkpoint(window, tmp_path, monkeypatch):
    """Ctrl-C between model.zip and agent.json (a train stopped mid-save left an empty
    checkpoints/step_N that resume= refused): no new folder is seen, and an earlier
    checkpoint at the path keeps both its files as they were."""
    import agents.algorithms

    spec = AgentSpec(algo="a2c", env="route", net="set", hidden=8)
    model = build_model(spec, gym.make(spec.env_id, windows=[window]), TINY_HP["a2c"])
    save_agent(model, spec, tmp_path / "agent")
    before = _files(tmp_path / "agent")
    model.learn(16)
    with monkeypatch.context() as patch:
        patch.setattr(agents.algorithms, "write_json_atomic", _interrupted)
        for name in ("agent", "checkpoints/step_16"):  # one replaced, one new
            with pytest.raises(KeyboardInterrupt):
                save_agent(model, spec, tmp_path / name)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["agent", "checkpoints"]
    assert list((tmp_path / "checkpoints").iterdir()) == []
    assert _files(tmp_path / "agent") == before
    save_agent(model, spec, tmp_path / "agent")
    assert load_spec(tmp_path / "agent").timesteps == 16


def test_a_save_stopped_as_it_replaces_a_checkpoint_keeps_the_earlier_one(
    window, tmp_path, monkeypatch
):
    """The new folder takes the place of the earlier one in two renames: Ctrl-C between
    them puts the earlier one back; a process killed there left it moved aside, which
    the next save puts back before it writes (here stopped again)."""
    from pathlib import Path

    import agents.algorithms

    spec = AgentSpec(algo="a2c", env="route", net="set", hidden=8)
    model = build_model(spec, gym.make(spec.env_id, windows=[window]), TINY_HP["a2c"])
    save_agent(model, spec, tmp_path / "agent")
    before = _files(tmp_path / "agent")
    model.learn(16)
    rename = Path.rename

    def stopped_at_the_second(self, target):
        if self.name == ".agent.partial":
            raise KeyboardInterrupt
        return rename(self, target)

    with monkeypatch.context() as patch:
        patch.setattr(Path, "rename", stopped_at_the_second)
        with pytest.raises(KeyboardInterrupt):
            save_agent(model, spec, tmp_path / "agent")
    assert [path.name for path in tmp_path.iterdir()] == ["agent"]
    assert _files(tmp_path / "agent") == before
    (tmp_path / "agent").rename(tmp_path / ".agent.replaced")  # as a SIGKILL leaves it
    (tmp_path / ".agent.partial").mkdir()
    (tmp_path / ".agent.partial" / "model.zip").write_bytes(b"PK half")
    with monkeypatch.context() as patch:
        patch.setattr(agents.algorithms, "write_json_atomic", _interrupted)
        with pytest.raises(KeyboardInterrupt):
            save_agent(model, spec, tmp_path / "agent")
    assert [path.name for path in tmp_path.iterdir()] == ["agent"]
    assert _files(tmp_path / "agent") == before


def test_a_save_into_a_folder_of_other_files_keeps_them(window, tmp_path, monkeypatch):
    """helper-76's review: a save replaced the whole folder, so ``save_agent(model,
    spec, "runs/my_ppo")`` beside a TensorBoard log deleted the log. A folder holding
    other files is written into, file by file; "." works too."""
    spec = AgentSpec(algo="a2c", env="route", net="set", hidden=8)
    model = build_model(spec, gym.make(spec.env_id, windows=[window]), TINY_HP["a2c"])
    run = tmp_path / "my_ppo"
    (run / "tb").mkdir(parents=True)
    (run / "train.log").write_text("log")
    save_agent(model, spec, run)
    assert sorted(p.name for p in run.iterdir()) == ["agent.json", "model.zip", "tb", "train.log"]
    assert (run / "train.log").read_text() == "log" and load_spec(run).algo == "a2c"
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    save_agent(model, spec, ".")  # an empty folder, named by "."
    assert sorted(p.name for p in here.iterdir()) == ["agent.json", "model.zip"]


def _saved_mlp(window, tmp_path, spec: AgentSpec):
    model = build_model(spec, gym.make(spec.env_id, windows=[window]), TINY_HP["ppo"])
    save_agent(model, spec, tmp_path / "a")
    return tmp_path / "a"


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        # acts in Discrete(4), observes 46 values (4 nodes x 10 + 6)
        (
            {"env": "route_warm"},
            r"acts in Discrete\(4\), agent\.json's env=route_warm on 4 nodes \(as the model's "
            r"actions read\) makes 46 values and MultiDiscrete\(\[4, 2, 2, 2, 2, 5\]\)$",
        ),
        ({"env": "thresholds"}, r"env=thresholds on 4 nodes \(.*\) makes 46 values and MultiD"),
        # the 9 hint features would make the observation longer: 46 + 9
        ({"env_kwargs": {"hints": True}}, r"env=route with \{'hints': True\} on 4 nodes \(.*55"),
    ],
)
def test_a_model_that_does_not_fit_its_agent_json_is_refused_in_one_line(
    window, tmp_path, claims, message
):
    """A model.zip beside an agent.json of another env (or observation option) would
    fail inside torch at the first decision; loading it names both instead."""
    folder = _saved_mlp(window, tmp_path, AgentSpec(algo="ppo", env="route", net="mlp", hidden=8))
    AgentPolicy.load(folder)  # as saved, it fits
    data = json.loads((folder / "agent.json").read_text())
    data.update(claims)
    (folder / "agent.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=rf"^{folder}: model\.zip does not fit agent\.json: "):
        AgentPolicy.load(folder)
    with pytest.raises(ValueError, match=message):
        AgentPolicy.load(folder)


@pytest.mark.parametrize(("algo", "cls"), [("ppo", "PPO"), ("dqn", "DQN")])
def test_an_mlp_of_sb3_default_width_is_refused_under_another_hidden(window, tmp_path, algo, cls):
    """A model built as docs/agents.md's own loop does (``PPO("MlpPolicy", env)``, no
    policy_kwargs saved: SB3's default two layers of 64) loads under hidden=64 and is
    refused under hidden=256, naming both widths. Saved untrained: nothing learns."""
    import stable_baselines3

    env = gym.make("btb/Route-v0", windows=[window])
    model = getattr(stable_baselines3, cls)("MlpPolicy", env, seed=0)
    folder = tmp_path / "a"
    save_agent(model, AgentSpec(algo=algo, env="route", net="mlp", hidden=64), folder)
    AgentPolicy.load(folder)  # as saved, it fits
    data = json.loads((folder / "agent.json").read_text())
    data["hidden"] = 256
    (folder / "agent.json").write_text(json.dumps(data))
    with pytest.raises(ValueError) as refused:
        AgentPolicy.load(folder)
    assert "\n" not in str(refused.value)
    assert str(refused.value).endswith(
        "the model's network has hidden layers [64, 64], agent.json's hidden=256 makes [256, 256]"
    )


def test_an_unknown_env_kwargs_key_in_agent_json_is_refused(window, tmp_path):
    """A misspelt env argument would be left out silently (the agent run without it)."""
    spec = AgentSpec(algo="ppo", env="route", net="mlp", hidden=8, env_kwargs={"step_wait": True})
    folder = _saved_mlp(window, tmp_path, spec)
    assert load_spec(folder).env_kwargs == {"step_wait": True}
    data = json.loads((folder / "agent.json").read_text())
    data["env_kwargs"] = {"step_wiat": True, "n_nodes": 4}
    (folder / "agent.json").write_text(json.dumps(data))
    with pytest.raises(
        ValueError, match=r"env_kwargs key 'step_wiat' is no argument of btb/Route-v0"
    ):
        load_spec(folder)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"algo": "sac", "env": "route"}, r"agent\.algo"),
        ({"algo": "ppo", "env": "nowhere"}, r"agent\.env"),
        ({"algo": "dqn", "env": "route_warm"}, "Discrete"),
        ({"algo": "maskable_ppo", "env": "route"}, "action masks"),
        ({"algo": "ppo", "env": "route", "net": "cnn"}, r"agent\.net"),
    ],
)
def test_agent_spec_rejects_bad_combinations(kwargs, message):
    with pytest.raises(ValueError, match=message):
        AgentSpec(**kwargs)


def test_bad_hyperparameters_name_the_algorithm(window):
    spec = AgentSpec(algo="ppo", env="route")
    with pytest.raises(ValueError, match=r"agent\.hyperparams\.not_a_knob: not a ppo hyperp"):
        build_model(spec, gym.make(spec.env_id, windows=[window]), {"not_a_knob": 1})


@pytest.mark.parametrize(("algo", "net"), [("a2c", "mlp"), ("dqn", "set")])
def test_fixed_size_networks_refuse_another_node_count_by_name(algo, net, window):
    spec = AgentSpec(algo=algo, env="route", net=net, hidden=8)
    model = build_model(spec, gym.make(spec.env_id, windows=[window]), TINY_HP[algo])
    six = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 6)
    with pytest.raises(ValueError, match=rf"agent\.net={net}.*trained on; this cluster has 6"):
        AgentPolicy(model, spec).run(Simulator(six, window, SimConfig()))


def test_a_whole_float_hyperparameter_reaches_sb3_as_an_int(window):
    # YAML and Hydra read 1e3 as a float; SB3 would compare and index with it as given
    env = gym.make("btb/Route-v0", windows=[window])
    floats = {"learning_starts": 1e3, "buffer_size": 64.0}
    model = build_model(AgentSpec("dqn", "route"), env, floats)
    assert model.learning_starts == 1000 and type(model.learning_starts) is int
    assert model.buffer_size == 64 and type(model.buffer_size) is int
    with pytest.raises(ValueError, match=r"agent\.hyperparams\.learning_starts must be an integer"):
        build_model(AgentSpec("dqn", "route"), env, {"learning_starts": 10.5})


def test_imitation_settings_check_their_values_when_made():
    from agents.imitation_settings import ImitationSettings

    with pytest.raises(ValueError, match=r"^imitation\.epochs must be >= 1, got 0$"):
        ImitationSettings(epochs=0)
    with pytest.raises(ValueError, match=r"^imitation\.setups: unknown setup 'nope'; known: "):
        ImitationSettings(setups=["nope"])
    assert ImitationSettings(episodes=2, workloads=["art_like"]).episodes == 2


def test_learning_and_loading_leave_no_sb3_folder_in_tmp(window, tmp_path, monkeypatch):
    """SB3's verbose=0 logger makes an empty ``SB3-<time>`` folder in the temporary
    directory on every learn(); ours writes nowhere, before and after a reload."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    spec = AgentSpec(algo="a2c", env="route", net="set", hidden=8)
    model = build_model(spec, gym.make(spec.env_id, windows=[window]), TINY_HP["a2c"])
    model.learn(16)
    save_agent(model, spec, tmp_path / "a")
    loaded, _ = load_agent(tmp_path / "a", env=gym.make(spec.env_id, windows=[window]))
    loaded.learn(16, reset_num_timesteps=False)
    assert tempfile.gettempdir() == str(tmp_path)
    assert not list(tmp_path.glob("SB3-*"))


def test_tensorboard_log_still_reaches_sb3(window, tmp_path):
    """The quiet logger stands aside when ``tensorboard_log`` is given: SB3 writes its
    events there (or, without tensorboard installed, says so), never ignores it."""
    spec = AgentSpec(algo="a2c", env="route", net="set", hidden=8)
    hyperparams = {**TINY_HP["a2c"], "tensorboard_log": str(tmp_path / "tb")}
    model = build_model(spec, gym.make(spec.env_id, windows=[window]), hyperparams)
    try:
        model.learn(16)
    except ImportError as error:
        assert "tensorboard" in str(error)
    else:
        assert list((tmp_path / "tb").rglob("events.out.tfevents.*"))


def test_a_refusal_not_about_a_hyperparameter_names_none():
    """A model that fails with no hyperparameter given is refused as it is, not
    pinned on the first hyperparameter tried."""
    from agents.algorithms import _refusal

    def construct(kwargs):
        raise ValueError("Seed must be between 0 and 2**32 - 1")

    error = _refusal(
        ValueError("Seed must be between 0 and 2**32 - 1"), {"n_steps": 64}, construct, "ppo"
    )
    assert str(error) == "ppo: Seed must be between 0 and 2**32 - 1"
    assert "n_steps" not in str(error)


@pytest.mark.parametrize(
    ("algo", "hyperparams", "said"),
    [
        ("ppo", {"n_steps": 64, "batch_size": 100}, "is larger than a rollout of n_steps x "
         "env.n_envs = 64 steps: each update trains on the whole rollout at once"),
        ("maskable_ppo", {"n_steps": 64, "batch_size": 48}, "does not divide a rollout of "
         "n_steps x env.n_envs = 64 steps: each epoch's last minibatch holds 16"),
        ("ppo", {"n_steps": 64, "batch_size": 32}, None),
        ("dqn", {"batch_size": 10_000, "buffer_size": 500}, None),  # off-policy: no rollout
    ],
)  # fmt: skip
def test_minibatches_that_do_not_cut_the_rollout_are_said_in_one_line(
    algo, hyperparams, said, window
):
    import warnings

    from envs.sim.errors import SettingWarning

    kind = "route_warm" if algo == "maskable_ppo" else "route"
    spec = AgentSpec(algo=algo, env=kind, hidden=16)
    for trains in (True, False):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            build_model(spec, gym.make(spec.env_id, windows=[window]), hyperparams, trains=trains)
        # SB3's own four-line warning is not shown beside it
        assert not any("mini-batch size" in str(w.message) for w in caught)
        ours = [str(w.message) for w in caught if w.category is SettingWarning]
        expected = (
            []
            if said is None or not trains
            else [f"agent.hyperparams.batch_size={hyperparams['batch_size']} {said}"]
        )
        assert ours == expected


def test_a_rollout_beyond_the_ceiling_is_refused_though_each_factor_is_within(window):
    from stable_baselines3.common.vec_env import DummyVecEnv

    spec = AgentSpec(algo="ppo", env="route", hidden=16)
    vec = DummyVecEnv([lambda: gym.make(spec.env_id, windows=[window])] * 2)
    with pytest.raises(ValueError, match=r"^agent\.hyperparams\.n_steps=1048576 x env\.n_envs=2 "):
        build_model(spec, vec, {"n_steps": 2**20})


def test_a_saved_model_zip_is_on_the_disk_before_it_is_published(window, tmp_path, monkeypatch):
    """SB3 writes model.zip without fsync: save_agent flushes it (the whole file, while
    it still sits in the folder being filled or under its temporary name) before the
    rename that makes it the checkpoint's, in both kinds of folder."""
    import zipfile
    from pathlib import Path

    import agents.algorithms
    from envs.files import fsync_file

    flushed = []

    def recording(path):
        assert zipfile.is_zipfile(path)  # whole
        assert not (target / "agent.json").exists()  # not yet published
        flushed.append(Path(path).name)
        fsync_file(path)

    spec = AgentSpec(algo="a2c", env="route", net="set", hidden=8)
    model = build_model(spec, gym.make(spec.env_id, windows=[window]), TINY_HP["a2c"])
    monkeypatch.setattr(agents.algorithms, "fsync_file", recording)
    target = tmp_path / "agent"
    save_agent(model, spec, target)
    target = tmp_path / "own"
    target.mkdir()
    (target / "events.log").write_text("a user's file")
    save_agent(model, spec, target)
    assert flushed == ["model.zip", ".model.tmp.zip"]
