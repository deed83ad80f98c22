"""``resume=`` from a checkpoint goes on exactly as the run would have: a run of 2N
steps and a run of N steps resumed to 2N end with the same weights, bit for bit
(its envs mid-episode, SB3's next observations, the random streams and the reward
statistics are in the checkpoint's ``run_state.pkl``). A checkpoint without one
resumes as before, from its weights, and says that it is not exact."""

from __future__ import annotations

import copy
import gc
import hashlib
import json
import multiprocessing
import os
import pickle
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir
from stable_baselines3 import DQN, PPO
from stable_baselines3.common.vec_env import DummyVecEnv

from agents import WorkerDied
from agents.algorithms import load_agent, quiet
from agents.env_pickles import RunWindows, restore_env, snapshot_env, window_digest
from agents.run_state import RUN_STATE_FILE, buffer_bytes, capture, restore_envs
from agents.run_state import load as load_run_state
from agents.vec_env import RunStateSnapshots
from envs.route import RouteEnv
from envs.sim.request import Request, Workload
from experiments._cli import exit_status, user_error_message
from experiments.config import register_configs
from experiments.train import train

CONF = Path(__file__).resolve().parents[2] / "conf"
TINY = [
    "workload=tiny",
    "logger=none",
    "env.n_envs=2",
    "train.progress=false",
    "train.evaluate=false",
    "agent=ppo",
    "agent.hyperparams.n_steps=32",  # rollouts of 64 steps
    "agent.hyperparams.batch_size=32",
    "env.normalize_reward=true",  # VecNormalize's running return is part of the state
    "train.total_timesteps=256",
]

register_configs()


# DQN on the same: a replay buffer of 96 transitions an env, which the run fills at
# step 192 and then overwrites, learning from step 32 and its target network updated
# every 16 steps of the 2 envs
TINY_DQN = [
    *(o for o in TINY if not o.startswith(("agent=", "agent.hyperparams."))),
    "agent=dqn",
    "agent.hyperparams.buffer_size=192",
    "agent.hyperparams.learning_starts=32",
    "agent.hyperparams.target_update_interval=32",
]


def _train(overrides, base=TINY):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        train(compose(config_name="train", overrides=[*base, *overrides]))


def _whole_and_resumed(tmp_path, overrides=(), base=TINY):
    """A run of 256 steps checkpointed at 128 (``whole``), and a run resumed from that
    checkpoint with the same ``overrides`` (``resumed``): (whole, checkpoint, resumed)."""
    whole = tmp_path / "whole"
    _train([*overrides, "train.checkpoint_every=128", f"out_dir={whole}"], base)
    checkpoint = whole / "checkpoints" / "step_128"
    resumed = tmp_path / "resumed"
    _train(
        [*overrides, "train.checkpoint_every=0", f"resume={checkpoint}", f"out_dir={resumed}"],
        base,
    )
    return whole, checkpoint, resumed


def _weights(folder):
    model, _ = load_agent(folder)
    return model.policy.state_dict()


def _same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_a_resumed_run_ends_with_the_uninterrupted_runs_weights(tmp_path, capsys):
    whole, checkpoint, resumed = _whole_and_resumed(tmp_path)
    assert (checkpoint / RUN_STATE_FILE).is_file()
    assert _same(_weights(whole / "agent"), _weights(resumed / "agent"))
    written = json.loads((resumed / "train.json").read_text())
    record = written["train"]
    assert record["resume_exact"] is True and record["timesteps"] == 256
    assert "is not exact" not in capsys.readouterr().out
    # its provenance says which run state it resumed from, by content
    read = written["provenance"]["agent_files"][str(checkpoint.resolve())]
    state_bytes = (checkpoint / RUN_STATE_FILE).read_bytes()
    assert read[RUN_STATE_FILE] == hashlib.sha256(state_bytes).hexdigest()

    # a run that changes the checkpoint's workload goes on as fine-tuning, not exactly
    _train(
        [
            "train.checkpoint_every=0",
            "workload.seed=7",
            f"resume={checkpoint}",
            f"out_dir={tmp_path / 'other'}",
        ]
    )
    out = capsys.readouterr().out
    assert f"note: resume={checkpoint} is not exact (this run changes workload.seed)" in out

    # another seed goes on as fine-tuning on that seed's envs: the run state's streams
    # are the checkpoint's seed's, and resumes of a seed sweep would all be one run
    reseeded = tmp_path / "reseeded"
    _train(["train.checkpoint_every=0", "seed=1", f"resume={checkpoint}", f"out_dir={reseeded}"])
    out = capsys.readouterr().out
    assert (
        f"note: resume={checkpoint} is not exact (this run changes seed: the checkpoint's "
        "run had seed=0)" in out
    )
    assert json.loads((reseeded / "train.json").read_text())["train"]["resume_exact"] is False
    assert not _same(_weights(whole / "agent"), _weights(reseeded / "agent"))

    # a run state whose envs do not load (pickled by other code) is refused the same way
    _refused_when_env_does_not_load(checkpoint, 0, tmp_path / "unloadable")

    # a damaged run state is refused in one line, which says how to go on
    state = checkpoint / RUN_STATE_FILE
    state.write_bytes(state.read_bytes()[:100])
    with pytest.raises(ValueError, match=r"run_state\.pkl: not a run state .* remove it"):
        _train([f"resume={checkpoint}", f"out_dir={tmp_path / 'damaged'}"])

    # a checkpoint saved before the run state (or without one) resumes from its
    # weights alone, as before, and says so; its envs start afresh, so it parts
    (checkpoint / RUN_STATE_FILE).unlink()
    old = tmp_path / "old"
    _train(["train.checkpoint_every=0", f"resume={checkpoint}", f"out_dir={old}"])
    out = capsys.readouterr().out
    assert f"note: resume={checkpoint} is not exact (it records no run state" in out
    written = json.loads((old / "train.json").read_text())
    assert written["train"]["resume_exact"] is False
    assert RUN_STATE_FILE not in written["provenance"]["agent_files"][str(checkpoint.resolve())]
    assert not _same(_weights(whole / "agent"), _weights(old / "agent"))


def _refused_when_env_does_not_load(checkpoint, k, out_dir, overrides=()):
    # the file reads, but env k's bytes inside it do not: one line, the file read as it was
    path = checkpoint / RUN_STATE_FILE
    good = path.read_bytes()
    state = pickle.loads(good)
    if state["vec"] == "dummy":
        state["envs"] = state["envs"][: len(state["envs"]) // 2]
        said = "its envs do not load"
    else:
        data, used = state["envs"][k]
        state["envs"][k] = (data[: len(data) // 2], used)
        said = f"its env {k} does not load in its worker"
    path.write_bytes(pickle.dumps(state))
    try:
        with pytest.raises(
            ValueError, match=rf"run_state\.pkl: {said} \(UnpicklingError.*remove it"
        ):
            _train([*overrides, f"resume={checkpoint}", f"out_dir={out_dir}"])
    finally:
        path.write_bytes(good)


def _window(arrival_s=0.5, blocks=(1, 2)):
    request = Request(0, "r0", arrival_s, 32, 4, blocks, group_id="g")
    return Workload("w", 16, [request, Request(1, "r1", 2.0, 16, 1, (1,))])


def test_a_window_rebuilt_the_same_has_the_same_digest_and_any_change_another():
    same = window_digest(_window())
    assert window_digest(_window()) == same and len(same) == 64
    assert window_digest(_window(arrival_s=0.25)) != same
    assert window_digest(_window(blocks=(1, 3))) != same


def test_a_worker_digests_its_windows_as_it_starts_only_in_a_run_that_checkpoints():
    """A run that keeps no checkpoints (train.checkpoint_every=0) never uses the
    digests: its workers do not work them out as they start; one that does, does
    (and a worker not told works them out at its first checkpoint)."""
    from omegaconf import OmegaConf

    from experiments.train import worker_options

    first, second = _window(), _window(arrival_s=0.25)
    idle = RunStateSnapshots(RouteEnv(windows=[first, second]))
    assert len(idle.window_digests) == 0
    _, used = idle.run_state_snapshot([window_digest(first), window_digest(second)])
    assert used == [0, 1] and len(idle.window_digests) == 2
    told = RunStateSnapshots(RouteEnv(windows=[first, second]), digest_windows=True)
    assert len(told.window_digests) == 2

    def options(vec: str, every: int) -> dict | None:
        return worker_options(
            OmegaConf.create({"env": {"vec": vec}, "train": {"checkpoint_every": every}})
        )

    assert options("subproc", 0) == {"digest_windows": False}
    assert options("subproc", 4096) == {"digest_windows": True}
    assert options("dummy", 4096) is None


def test_a_worker_digests_each_window_once_and_forgets_it_once_gone():
    # a worker's checkpoints name the same windows each time: each is digested once
    # (windows are not changed once made; see below for one changed all the same)
    first, second = _window(), _window(arrival_s=0.25)
    digests = [window_digest(first), window_digest(second)]
    # (gym.make's spec keeps them)
    env = RunStateSnapshots(RouteEnv(windows=[first, second]), digest_windows=True)
    # worked out as the worker starts, side by side with the others, not at its first
    # checkpoint (where the parent waited for all of them: 1.7 to 1.8 s of 16 workers)
    assert len(env.window_digests) == 2
    data, used = env.run_state_snapshot(digests)
    assert used == [0, 1] and len(env.window_digests) == 2
    # a window changed where it is cheap to see is digested again: no longer one of the
    # run's, it is pickled whole, as it is now (it kept its first digest, and the run
    # state named it as the run's window as built, which a resume would have put back)
    first.name = "changed"
    data_renamed, used = env.run_state_snapshot(digests)
    assert used == [1] and restore_env(data_renamed, {1: second}).windows[0].name == "changed"
    first.name = "w"
    assert env.run_state_snapshot(digests) == (data, [0, 1])
    first.requests = list(first.requests)  # another list: digested again, the same
    assert env.run_state_snapshot(digests) == (data, [0, 1])
    gone = first.requests.pop()  # shortened in place
    assert env.run_state_snapshot(digests)[1] == [1]
    first.requests.append(gone)
    assert env.run_state_snapshot(digests) == (data, [0, 1])
    # a request changed in place is not seen: the window keeps its digest (docs/agents.md)
    second.requests[1].output_tokens = 2
    assert window_digest(second) != digests[1]
    assert env.run_state_snapshot(digests)[1] == [0, 1]
    # a window the env no longer holds is forgotten with it
    third = _window(arrival_s=0.75)
    env.env.set_windows([third])
    del first, second
    gc.collect()
    assert len(env.window_digests) == 0
    assert env.run_state_snapshot([window_digest(third)])[1] == [0]
    assert len(env.window_digests) == 1


def test_the_in_process_envs_name_a_window_by_what_it_holds_as_a_workers_do():
    # one way for both vec envs: a window equal to one of the run's is named by its
    # position whichever object it is (a worker's are copies), and read back as the
    # run's own; before, the in-process envs named the run's objects only and pickled
    # an equal copy in full
    window = _window()
    run_windows = RunWindows([window])
    vec = DummyVecEnv([lambda: RouteEnv(windows=[copy.deepcopy(window)])])
    model = quiet(PPO("MlpPolicy", vec, n_steps=8, batch_size=8, n_epochs=1, seed=0))
    model.learn(8)
    state = capture(model, run_windows)
    assert state is not None and state["vec"] == "dummy"
    (env,) = restore_env(state["envs"], dict(enumerate(run_windows.windows)))
    assert env.windows[0] is window
    # and the in-process envs pickle to the bytes a worker's way gives them
    assert state["envs"] == snapshot_env(vec.envs, run_windows.digests)[0]


def _validation(folder):
    return json.loads((folder / "train.json").read_text())["train"]["validation"]


@pytest.mark.slow
def test_a_resumed_run_chooses_agent_among_the_uninterrupted_runs_scores(tmp_path, capsys):
    # the scores before the checkpoint, the best one and its weights go on with the
    # run: agent/, best_step and the history are the uninterrupted run's
    scored = ["train.val_every=64", "workload.val_windows=1"]
    whole, checkpoint, resumed = _whole_and_resumed(tmp_path, scored)
    assert "is not exact" not in capsys.readouterr().out
    expected, got = _validation(whole), _validation(resumed)
    assert [h["step"] for h in expected["history"]] == [0, 64, 128, 192, 256]
    assert got["history"] == expected["history"]
    assert expected["best_step"] < 128  # agent/ holds weights from before the checkpoint
    assert (got["best_step"], got["best_score"]) == (expected["best_step"], expected["best_score"])
    assert _same(_weights(whole / "agent"), _weights(resumed / "agent"))
    assert _same(_weights(whole / "last"), _weights(resumed / "last"))
    best = json.loads((resumed / "agent" / "agent.json").read_text())["timesteps"]
    assert best == expected["best_step"]

    # resumed from its last checkpoint (a run stopped after training, in its
    # evaluation), it trains no step and its agent/ is still the run's best, not last/
    ended = tmp_path / "ended"
    end = whole / "checkpoints" / "step_256"
    _train([*scored, "train.checkpoint_every=0", f"resume={end}", f"out_dir={ended}"])
    assert "is not exact" not in capsys.readouterr().out
    assert _validation(ended)["history"] == expected["history"]
    assert _same(_weights(whole / "agent"), _weights(ended / "agent"))
    assert _same(_weights(whole / "last"), _weights(ended / "last"))

    # a run that scores other windows starts its own history, as before, and says so
    other = tmp_path / "other"
    _train(
        [
            "train.val_every=128",
            "workload.val_windows=1",
            "train.checkpoint_every=0",
            f"resume={checkpoint}",
            f"out_dir={other}",
        ]
    )
    assert "validation before it is not carried over (train.val_every" in capsys.readouterr().out
    assert [h["step"] for h in _validation(other)["history"]] == [128, 256]


@pytest.mark.slow
def test_a_resumed_run_on_worker_processes_ends_with_the_uninterrupted_runs_weights(
    tmp_path, capsys
):
    # env.vec=subproc: each worker pickles its env into the run state and gets it back
    subproc = ["env.vec=subproc"]
    whole, checkpoint, resumed = _whole_and_resumed(tmp_path, subproc)
    assert (checkpoint / RUN_STATE_FILE).is_file()
    assert "is not exact" not in capsys.readouterr().out
    assert _same(_weights(whole / "agent"), _weights(resumed / "agent"))
    assert json.loads((resumed / "train.json").read_text())["train"]["resume_exact"] is True

    _refused_when_env_does_not_load(checkpoint, 1, tmp_path / "unloadable", subproc)

    # the envs of one kind of vectorised env are not put in the other's
    _train(["train.checkpoint_every=0", f"resume={checkpoint}", f"out_dir={tmp_path / 'dummy'}"])
    out = capsys.readouterr().out
    assert "is not exact (its envs ran on env.vec=subproc, this run's on env.vec=dummy)" in out


def _kill_a_worker_once(folder, deadline_s=600.0):
    """In a thread: once ``folder``'s first checkpoint is written, SIGKILL one of this
    process's worker processes (as the out-of-memory killer would); its pid."""
    killed = []

    def watch():
        until = time.monotonic() + deadline_s
        while not (folder / "checkpoints" / "step_128" / "agent.json").is_file():
            if time.monotonic() > until:
                return
            time.sleep(0.05)
        worker = multiprocessing.active_children()[0]
        killed.append(worker.pid)
        os.kill(worker.pid, signal.SIGKILL)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread, killed


@pytest.mark.slow
def test_a_run_whose_worker_is_killed_says_so_and_its_last_checkpoint_resumes_exactly(tmp_path):
    # a worker of env.vec=subproc killed mid-run ended train with SB3's BrokenPipeError
    # or EOFError (`error: experiments.train: [Errno 32] Broken pipe`, or a traceback):
    # now one line names the worker and its signal, and the checkpoint to go on from
    subproc = ["env.vec=subproc", "train.checkpoint_every=128"]
    killed = tmp_path / "killed"
    thread, pids = _kill_a_worker_once(killed)
    with pytest.raises(WorkerDied) as raised:
        _train([*subproc, "train.total_timesteps=1000000", f"out_dir={killed}"])
    thread.join()
    message = str(raised.value)
    said = re.fullmatch(
        rf"env\.vec=subproc: env worker [01] of 2 \(pid {pids[0]}\) died, killed by signal 9 "
        r"\(SIGKILL: the kernel's out-of-memory killer sends it, as does kill -9\); training "
        r"stopped at step [\d,]+ of 1,000,000; its last checkpoint is (\S+) "
        r"\(resume=\1 goes on from it\)",
        message,
    )
    assert said, message
    # the commands say it in one line (no traceback), exit 2, as a full disk
    assert user_error_message(raised.value, "experiments.train") == (
        f"error: experiments.train: {message}"
    )
    assert exit_status(raised.value) == 2
    # what the run wrote is kept: each checkpoint whole, none half-written
    last = Path(said.group(1))
    steps = sorted(int(p.name.removeprefix("step_")) for p in (killed / "checkpoints").iterdir())
    assert steps == list(range(128, steps[-1] + 1, 128)) and last.name == f"step_{steps[-1]}"
    for step in steps:
        folder = killed / "checkpoints" / f"step_{step}"
        assert sorted(p.name for p in folder.iterdir()) == [
            "agent.json",
            "model.zip",
            RUN_STATE_FILE,
        ]
    assert multiprocessing.active_children() == []  # the other worker was closed

    # the last checkpoint resumes exactly: 128 steps on, the weights of a run that
    # was never stopped
    end = f"train.total_timesteps={steps[-1] + 128}"
    resumed, whole = tmp_path / "resumed", tmp_path / "whole"
    _train([*subproc, end, f"resume={last}", f"out_dir={resumed}"])
    assert json.loads((resumed / "train.json").read_text())["train"]["resume_exact"] is True
    _train([*subproc, end, "train.checkpoint_every=0", f"out_dir={whole}"])
    assert _same(_weights(whole / "agent"), _weights(resumed / "agent"))


# a reference router of the user's own (env.reward_baseline, run at each episode's
# start) with a bug that shows once training is under way: in a worker, at the start
# of its second episode (an episode of workload=tiny is some 90 steps: past the first
# checkpoint, at step 128 of the 2 envs), and in one worker only (the first to claim
# the file beside it)
FAILS_IN_A_WORKER = """
import multiprocessing
import os

from baselines.policy import Policy, register

CLAIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "claimed")
EPISODES = [0]


@register("fails_in_a_worker")
class FailsInAWorker(Policy):
    def reset(self, sim):
        EPISODES[0] += 1
        if EPISODES[0] < 2 or multiprocessing.parent_process() is None:
            return
        try:
            os.close(os.open(CLAIM, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:  # another worker failed first
            return
        raise KeyError(f"a plugin's bug, in pid {os.getpid()}")

    def decide(self, sim, request):
        return 0
"""


@pytest.mark.slow
def test_a_run_whose_worker_env_raises_ends_as_a_bug_naming_it_and_keeps_its_checkpoints(
    tmp_path,
):
    # end to end, as `python -m experiments.train` in a process of its own: the worker's
    # traceback (its own stderr) is above the command's last line, which names it
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "fails_in_a_worker.py").write_text(FAILS_IN_A_WORKER)
    args = [a for a in TINY if not a.startswith("train.total_timesteps=")]
    out = tmp_path / "run"
    env = dict(os.environ, BTB_GYM_PLUGINS="fails_in_a_worker")
    env["PYTHONPATH"] = os.pathsep.join([str(plugins), *(p for p in sys.path if p)])
    env.pop("HYDRA_FULL_ERROR", None)
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.train", *args, "env.vec=subproc",
         "+env.reward_baseline=fails_in_a_worker", "train.checkpoint_every=128",
         "train.total_timesteps=2048", f"out_dir={out}"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-2000:]  # a bug: exit 1, not 2 (the user's)
    last = proc.stderr.rstrip("\n").rpartition("\n")[2]
    said = re.fullmatch(
        r"error: experiments\.train: env\.vec=subproc: env worker ([01]) of 2 \(pid (\d+)\) "
        r"died, exited with status 1 \(its traceback, if it raised, is above\); a worker exits "
        r"with a status when its env's code fails: a bug \(btb-gym's or a plugin's\); training "
        r"stopped at step ([\d,]+) of 2,048; its last checkpoint is (\S+) \(resume=\4 goes on "
        r"from it\)",
        last,
    )
    assert said, proc.stderr[-2000:]
    # the worker's traceback is above it: the plugin's own error, raised in that worker
    pid = said.group(2)
    assert f'KeyError: "a plugin\'s bug, in pid {pid}"' in proc.stderr
    # one worker failed (the other was closed), and the command printed no traceback
    # headed by the worker's name, as the last line gives it
    (header,) = [line for line in proc.stderr.splitlines() if line.startswith("Process ")]
    assert header == f"Process env worker {said.group(1)} of 2 (pid {pid}):"
    assert proc.stderr.count("Traceback (most recent call last)") == 2  # the worker's, chained
    assert "envs.sim.errors.PolicyFailure: policy 'fails_in_a_worker' failed in reset()" in (
        proc.stderr
    )
    # what the run wrote is kept: each checkpoint whole, the last before the failure
    stopped = int(said.group(3).replace(",", ""))
    steps = sorted(int(p.name.removeprefix("step_")) for p in (out / "checkpoints").iterdir())
    assert steps == list(range(128, stopped + 1, 128)) and steps
    assert said.group(4) == str(out / "checkpoints" / f"step_{steps[-1]}")
    for step in steps:
        folder = out / "checkpoints" / f"step_{step}"
        assert sorted(p.name for p in folder.iterdir()) == [
            "agent.json",
            "model.zip",
            RUN_STATE_FILE,
        ]
        state = load_run_state(folder)
        assert state is not None and state["timesteps"] == step and state["vec"] == "subproc"
        model, _ = load_agent(folder)
        assert model.num_timesteps == step


@pytest.mark.slow
def test_a_run_that_fails_mid_training_says_its_error_on_a_line_of_its_own(tmp_path, run_command):
    # SB3 calls no callback when learn() raises: the progress bar stayed open, the
    # error line was written on the bar's (`train: 1%|...| 192/... [00:01<...]error:
    # experiments.train: ...`) and the bar closed at exit, after it
    args = [a for a in TINY if not a.startswith(("train.progress=", "train.total_timesteps="))]
    out = tmp_path / "run"
    thread, pids = _kill_a_worker_once(out)
    proc = run_command(
        "experiments.train",
        [*args, "train.progress=true", "env.vec=subproc", "train.checkpoint_every=128",
         "train.total_timesteps=1000000", f"out_dir={out}"],
        tmp_path,
    )  # fmt: skip
    thread.join()
    assert pids and proc.returncode == 2
    before, said, after = proc.stderr.rpartition("error: experiments.train: ")
    assert said and before.endswith("\n") and "\r" not in after, proc.stderr[-600:]
    assert after.startswith("env.vec=subproc: env worker ") and after.count("\n") == 1
    assert before.rstrip("\n").rpartition("\r")[2].startswith("train: ")  # the bar, closed


@pytest.mark.slow
def test_a_resume_to_another_total_under_a_linear_schedule_is_not_exact(tmp_path, capsys):
    # the rate at a step is the starting rate x (1 - step / total): to the run's own
    # total the resumed run ends with its weights; to another, no run had its rates
    linear = ["agent.lr_schedule=linear"]
    whole, checkpoint, resumed = _whole_and_resumed(tmp_path, linear)
    assert "is not exact" not in capsys.readouterr().out
    assert _same(_weights(whole / "agent"), _weights(resumed / "agent"))

    longer = tmp_path / "longer"
    _train(
        [
            *linear,
            "train.checkpoint_every=0",
            "train.total_timesteps=384",
            f"resume={checkpoint}",
            f"out_dir={longer}",
        ]
    )
    out = capsys.readouterr().out
    assert (
        f"note: resume={checkpoint} is not exact (its run was to train.total_timesteps=256, "
        "this one to 384: agent.lr_schedule=linear decays over the run's steps)" in out
    )
    assert json.loads((longer / "train.json").read_text())["train"]["resume_exact"] is False


@pytest.mark.slow
def test_a_checkpoint_from_before_train_streams_resumes_on_shared_train_windows(tmp_path, capsys):
    # a checkpoint saved before train_streams existed: every window was drawn from the
    # workload's seed ("shared"), though its workload_params and registered_windows
    # record do not say so; both used to be read as today's default, "own"
    shared = ["+workload.params.train_streams=shared"]
    whole = tmp_path / "whole"
    _train([*shared, "train.checkpoint_every=128", f"out_dir={whole}"])
    checkpoint = whole / "checkpoints" / "step_128"
    saved = json.loads((checkpoint / "agent.json").read_text())
    assert saved["env_kwargs"]["workload_params"].pop("train_streams") == "shared"
    (record,) = saved["registered_windows"]
    assert record.pop("train_streams") == "shared" and "stream_seeds" not in record
    assert record["params"].pop("train_streams") == "shared"
    (checkpoint / "agent.json").write_text(json.dumps(saved))
    capsys.readouterr()

    # resumed as asked today, on its own streams: a change, said and recorded (it used
    # to say nothing), so not exact
    own = tmp_path / "own"
    _train(["train.checkpoint_every=0", f"resume={checkpoint}", f"out_dir={own}"])
    out = capsys.readouterr().out
    assert (
        f"note: resume={checkpoint} was trained with workload.params.train_streams='shared'; "
        "training goes on with workload.params.train_streams='own' (recorded in results.json)"
    ) in out
    assert "is not exact (this run changes workload.params.train_streams)" in out
    train_record = json.loads((own / "train.json").read_text())["train"]
    assert train_record["resume_changes"] == {"workload.params.train_streams": ["shared", "own"]}
    assert train_record["resume_exact"] is False

    # resumed on shared train windows, as it trained: no change (it used to report
    # workload.params as changed, and so not resume exactly), and exact
    again = tmp_path / "again"
    _train([*shared, "train.checkpoint_every=0", f"resume={checkpoint}", f"out_dir={again}"])
    out = capsys.readouterr().out
    assert "was trained with" not in out and "is not exact" not in out
    train_record = json.loads((again / "train.json").read_text())["train"]
    assert train_record["resume_changes"] == {} and train_record["resume_exact"] is True
    assert _same(_weights(whole / "agent"), _weights(again / "agent"))


@pytest.mark.slow
def test_a_resume_that_moves_a_curriculum_stage_change_before_the_checkpoint_is_not_exact(
    tmp_path, capsys
):
    # one-burst segments until step 192, then the whole windows; the checkpoint is at 128
    def curriculum(until):
        return [f"train.curriculum=[{{bursts: 1, until: {until}}}]"]

    whole, checkpoint, resumed = _whole_and_resumed(tmp_path, curriculum(192))
    assert "is not exact" not in capsys.readouterr().out
    assert _same(_weights(whole / "agent"), _weights(resumed / "agent"))

    # the stage ends at 64 now: the uninterrupted run would have drawn whole windows
    # from 64, and the checkpoint's envs draw segments (before: exact, and the resumed
    # envs drew segments to the end, no stage change being due)
    early = tmp_path / "early"
    _train(
        [*curriculum(64), "train.checkpoint_every=0", f"resume={checkpoint}", f"out_dir={early}"]
    )
    out = capsys.readouterr().out
    assert (
        f"note: resume={checkpoint} is not exact (this run changes train.curriculum[0].until "
        "from 192 to 64: the stage ends by the checkpoint's step 128 in one run, not at the "
        "same step in the other)" in out
    )
    assert json.loads((early / "train.json").read_text())["train"]["resume_exact"] is False

    # moved past the checkpoint, it goes on as a run with that curriculum would
    later = tmp_path / "later"
    _train(
        [*curriculum(224), "train.checkpoint_every=0", f"resume={checkpoint}", f"out_dir={later}"]
    )
    assert "is not exact" not in capsys.readouterr().out
    _train([*curriculum(224), "train.checkpoint_every=0", f"out_dir={tmp_path / 'later_whole'}"])
    assert _same(_weights(tmp_path / "later_whole" / "agent"), _weights(later / "agent"))

    # a run state saved before the stages' steps were kept cannot tell: not exact
    path = checkpoint / RUN_STATE_FILE
    state = pickle.loads(path.read_bytes())
    del state["curriculum"]
    path.write_bytes(pickle.dumps(state))
    _train(
        [
            *curriculum(192),
            "train.checkpoint_every=0",
            f"resume={checkpoint}",
            f"out_dir={tmp_path / 'older'}",
        ]
    )
    assert (
        f"note: resume={checkpoint} is not exact (its run state does not record "
        "train.curriculum's steps" in capsys.readouterr().out
    )


@pytest.mark.slow
def test_a_resumed_dqn_run_ends_with_the_uninterrupted_runs_weights(tmp_path, capsys):
    # its replay buffer is in the run state (before: DQN wrote none, and a resumed
    # run started an empty buffer on fresh envs)
    whole, checkpoint, resumed = _whole_and_resumed(tmp_path, base=TINY_DQN)
    assert "is not exact" not in capsys.readouterr().out
    assert _same(_weights(whole / "agent"), _weights(resumed / "agent"))
    assert json.loads((resumed / "train.json").read_text())["train"]["resume_exact"] is True
    saved = pickle.loads((checkpoint / RUN_STATE_FILE).read_bytes())["replay_buffer"]
    # 64 steps of 2 envs: the rows written and the next, of the 96
    assert (saved["pos"], saved["full"], len(saved["arrays"]["observations"])) == (64, False, 65)

    # its exploration rate falls over the run's steps: another total is another run
    longer = tmp_path / "longer"
    _train(
        [
            "train.checkpoint_every=0",
            "train.total_timesteps=384",
            f"resume={checkpoint}",
            f"out_dir={longer}",
        ],
        TINY_DQN,
    )
    assert (
        f"note: resume={checkpoint} is not exact (its run was to train.total_timesteps=256, "
        "this one to 384: DQN's exploration rate falls over the run's steps)"
        in capsys.readouterr().out
    )


@pytest.mark.parametrize("n_steps", [1, 3])  # one-step returns, and n-step (its own buffer)
def test_a_full_replay_buffer_goes_into_the_run_state_and_back_whole(n_steps):
    # a buffer of 8 transitions after 20 steps: full, and overwritten from its start
    window = _window()
    run_windows = RunWindows([window])

    def dqn(size):
        vec = DummyVecEnv([lambda: RouteEnv(windows=[window])])
        return quiet(
            DQN("MlpPolicy", vec, buffer_size=size, learning_starts=4, n_steps=n_steps, seed=0)
        )

    model = dqn(8)
    model.learn(20)
    buffer = model.replay_buffer
    assert type(buffer).__name__ == ("NStepReplayBuffer" if n_steps > 1 else "ReplayBuffer")
    assert buffer.full and buffer.pos == 4
    state = capture(model, run_windows)
    other = dqn(8)
    other.learn(1)  # a model stepped (its _last_obs set), its buffer holding 4 steps
    restore_envs(other, state, run_windows)
    for name in ("observations", "next_observations", "actions", "rewards", "dones"):
        assert np.array_equal(getattr(other.replay_buffer, name), getattr(buffer, name))
    assert (other.replay_buffer.pos, other.replay_buffer.full) == (4, True)
    # into a buffer of another size it is refused, before the envs are touched
    smaller = dqn(4)
    smaller.learn(1)
    with pytest.raises(ValueError, match=r"buffer holds 8 steps of 1 envs, the model's 4 of 1"):
        restore_envs(smaller, state, run_windows)


def test_the_bytes_a_replay_buffer_takes_in_a_run_state():
    # a transition: an observation and the next one (46 float32s each), an int64 action
    # and a float32 reward, done and timeout, 388 bytes; the buffer's rows hold one a env
    window = _window()
    vec = DummyVecEnv([lambda: RouteEnv(windows=[window]) for _ in range(2)])
    model = DQN("MlpPolicy", vec, buffer_size=192, seed=0)
    assert model.observation_space.shape == (46,)
    # full: its 96 rows of 2 envs
    assert buffer_bytes(model, 256) == (96 * 2 * 388, 192)
    # a run of 100 steps fills 50 rows, and the run state takes the next too (zeros)
    assert buffer_bytes(model, 100) == (51 * 2 * 388, 100)
    assert buffer_bytes(PPO("MlpPolicy", vec, n_steps=8, batch_size=8), 256) == (0, 0)


@pytest.mark.slow
def test_a_dqn_run_state_over_its_limit_leaves_the_buffer_out_and_says_so(tmp_path, capsys):
    # TINY_DQN's buffer, 192 transitions of 388 bytes, is 74,496 bytes: over 0.05 MB
    limit = ["train.run_state_max_mb=0.05"]
    whole, checkpoint, resumed = _whole_and_resumed(tmp_path, limit, base=TINY_DQN)
    why = (
        "its replay buffer would take up to 0.1 MB (192 transitions), over "
        "train.run_state_max_mb=0.05"
    )
    out = capsys.readouterr().out
    assert (
        out.count(
            f"note: {why}: checkpoints leave it out of their run_state.pkl, and resume= from "
            "them is not exact (raise train.run_state_max_mb to keep it)"
        )
        == 1
    )  # the run's, as it starts (the resumed run saves no checkpoint)
    state = load_run_state(checkpoint)
    assert state is not None and state["replay_buffer"] is None
    assert state["replay_buffer_left_out"] == why
    assert (
        f"note: resume={checkpoint} is not exact (its run state holds no replay buffer: "
        f"{why}): training goes on from its weights with fresh envs and random streams" in out
    )
    assert json.loads((resumed / "train.json").read_text())["train"]["resume_exact"] is False
    # at 0.075 MB it is kept, and the resume is exact (test_a_resumed_dqn_run_...)
    kept = tmp_path / "kept"
    _train(["train.run_state_max_mb=0.075", "train.checkpoint_every=128", f"out_dir={kept}"],
           TINY_DQN)  # fmt: skip
    assert "would take up to" not in capsys.readouterr().out
    state = load_run_state(kept / "checkpoints" / "step_128")
    assert state is not None and state["replay_buffer_left_out"] is None
    assert state["replay_buffer"]["arrays"]["observations"].shape == (65, 2, 46)
