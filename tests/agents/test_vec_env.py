"""InProcessVecEnv: SB3's DummyVecEnv without the deep copy of every step's infos
gives the same steps, and so the same training, as DummyVecEnv; and training with
two torch threads in its updates (``train.update_threads``' default) is the same
as with one. WorkerVecEnv's workers outlive a Ctrl-C."""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest
import torch
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv

import envs  # noqa: F401  (registers the environments)
from agents import WorkerDied, WorkerFailed
from agents.algorithms import AgentSpec, build_model
from agents.callbacks import UpdateThreads, usable_threads
from agents.vec_env import InProcessVecEnv, WorkerVecEnv, how_ended, workers_ended
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

SMALL = BurstedSyntheticConfig(n_bursts=2, burst_requests=30, n_decoys=4, burst_window_s=4.0)


@pytest.fixture(scope="module")
def window():
    return synthetic_window(SMALL, window=2)


def _vec(cls, env_id, window, n_envs=3, **vec_kwargs):
    return make_vec_env(
        env_id,
        n_envs=n_envs,
        seed=7,
        vec_env_cls=cls,
        env_kwargs={"windows": [window]},
        vec_env_kwargs=vec_kwargs or None,
    )


@pytest.mark.parametrize("env_id", ["btb/Route-v0", "btb/RouteWarm-v0", "btb/Thresholds-v0"])
def test_steps_equal_dummy_vec_env_through_episode_ends(env_id, window):
    lean, dummy = _vec(InProcessVecEnv, env_id, window), _vec(DummyVecEnv, env_id, window)
    lean.action_space.seed(0)
    assert np.array_equal(lean.reset(), dummy.reset())
    ends = 0
    steps = 60 if env_id == "btb/Thresholds-v0" else 300  # a few episodes each
    for _ in range(steps):
        actions = np.stack([lean.action_space.sample() for _ in range(lean.num_envs)])
        obs, rewards, dones, infos = lean.step(actions)
        obs_d, rewards_d, dones_d, infos_d = dummy.step(actions)
        assert np.array_equal(obs, obs_d)
        assert np.array_equal(rewards, rewards_d)
        assert np.array_equal(dones, dones_d)
        assert [sorted(i) for i in infos] == [sorted(i) for i in infos_d]
        for info, info_d in zip(infos, infos_d):
            for key, value in info.items():
                if key == "terminal_observation":
                    assert np.array_equal(value, info_d[key])
                elif key == "episode":  # Monitor's; "t" is wall-clock time
                    assert value["r"] == info_d[key]["r"] and value["l"] == info_d[key]["l"]
                else:
                    assert value == info_d[key], key
        ends += int(dones.sum())
        assert lean.reset_infos == dummy.reset_infos
    assert ends >= 2  # the episode ends (terminal observations, resets) were covered
    lean.close()
    dummy.close()


def test_infos_are_the_callers_own(window):
    """What a step returns is not changed by the steps after it (the guarantee
    DummyVecEnv's deep copy gave)."""
    vec = _vec(InProcessVecEnv, "btb/Route-v0", window, n_envs=2)
    vec.reset()
    _, _, _, first = vec.step(np.zeros(2, dtype=np.int64))
    kept = [dict(info) for info in first]
    ended = 0
    for _ in range(100):  # episodes of 64 steps
        _, _, dones, infos = vec.step(np.zeros(2, dtype=np.int64))
        assert all(a is not b for a, b in zip(infos, first))
        if dones.any():
            ended += 1
            terminal = [
                i["terminal_observation"].copy() for i in infos if "terminal_observation" in i
            ]
            vec.step(np.zeros(2, dtype=np.int64))
            after = [i["terminal_observation"] for i in infos if "terminal_observation" in i]
            assert all(np.array_equal(a, b) for a, b in zip(terminal, after))
    assert ended and first == kept
    vec.close()


def test_a_worker_outlives_ctrl_c_and_closes_when_asked(window):
    """A terminal's Ctrl-C reaches the workers too: one it stopped left the command,
    stopping, a closed pipe as it closed the envs (``error: ... Broken pipe``, exit 2,
    instead of ``interrupted``). A worker ignores it: it answers the next step and
    exits when closed."""
    vec = _vec(WorkerVecEnv, "btb/Route-v0", window, n_envs=1)
    try:
        vec.reset()
        os.kill(vec.processes[0].pid, signal.SIGINT)  # SubprocVecEnv's worker: EOFError below
        vec.step(np.array([0]))
    finally:
        vec.close()
    assert vec.processes[0].exitcode == 0


def test_closing_after_a_step_cut_short_takes_only_the_results_there(window):
    """Ctrl-C in ``step_wait`` after one worker's result was read: SubprocVecEnv's
    ``close`` waited for a result from every worker, and the one read, alive now,
    had nothing more to send (helper-76's review: the command hung). The close is
    run in a thread so that a hang fails the test instead of stopping the suite."""
    vec = _vec(WorkerVecEnv, "btb/Route-v0", window, n_envs=2)
    vec.reset()
    vec.step_async(np.array([0, 0]))
    vec.remotes[0].recv()  # read one result; the step is cut short here
    closing = threading.Thread(target=vec.close, daemon=True)
    closing.start()
    closing.join(120)  # a guard against a hang, not a measurement
    assert not closing.is_alive(), "close() waited for a result already read"
    assert [p.exitcode for p in vec.processes] == [0, 0]


def _killed(vec, k, sig=signal.SIGKILL):
    """Kill worker ``k`` of ``vec`` and wait until it is gone (as the OOM killer would)."""
    os.kill(vec.processes[k].pid, sig)
    vec.processes[k].join(60)
    assert vec.processes[k].exitcode == -sig
    return vec.processes[k].pid


@pytest.mark.parametrize("when", ["step", "step_wait"])
def test_a_killed_worker_is_named_with_its_signal_and_the_others_close(window, when):
    """A worker killed (the out-of-memory killer's SIGKILL) left SubprocVecEnv's
    BrokenPipeError (a write to it) or EOFError (a read), and a close that raised
    one again: WorkerVecEnv names the worker and how it ended, and closes the
    others. (Every call that talks to the workers goes through the same guard.)"""
    vec = _vec(WorkerVecEnv, "btb/Route-v0", window, n_envs=2)
    try:
        vec.reset()
        pid = _killed(vec, 1)
        if when == "step_wait":  # killed while it steps: the read meets its end
            # (worker 0 is sent its step; worker 1 died before sending its result:
            # killed after step_async, it may have sent it already)
            vec.remotes[0].send(("step", np.int64(0)))
            vec.waiting = True
        with pytest.raises(WorkerDied) as raised:
            vec.step_wait() if when == "step_wait" else vec.step(np.array([0, 0]))
        assert str(raised.value) == (
            f"env.vec=subproc: env worker 1 of 2 (pid {pid}) died, killed by signal 9 "
            "(SIGKILL: the kernel's out-of-memory killer sends it, as does kill -9)"
        )
        assert isinstance(raised.value.__cause__, (EOFError, ConnectionError))
    finally:
        vec.close()  # raises nothing, and ends the other worker
    assert vec.closed
    assert [p.exitcode for p in vec.processes] == [0, -signal.SIGKILL]


def test_a_worker_whose_env_raised_ends_as_a_bug_naming_it(window, capfd):
    """Its env raising (a bug of ours or of a plugin's) ended the worker with status 1,
    which was said as WorkerDied, one line and exit 2, as the out-of-memory killer's
    SIGKILL: now WorkerFailed, exit 1, and a last line naming the worker under the
    traceback the worker printed."""
    from experiments._cli import exit_status, main_guard, user_error_message

    # (spawned: each worker's stderr is this test's, where a fork server's is that of
    # the test that started it)
    vec = _vec(WorkerVecEnv, "btb/Route-v0", window, n_envs=2, start_method="spawn")
    try:
        vec.reset()
        with pytest.raises(WorkerFailed) as raised:
            vec.env_method("no_such_method", indices=[1])  # raises in worker 1's env
        pid = vec.processes[1].pid
        assert str(raised.value) == (
            f"env.vec=subproc: env worker 1 of 2 (pid {pid}) died, exited with status 1 (its "
            "traceback, if it raised, is above); a worker exits with a status when its env's "
            "code fails: a bug (btb-gym's or a plugin's)"
        )
    finally:
        vec.close()
    assert [p.exitcode for p in vec.processes] == [0, 1]
    assert user_error_message(raised.value) is None  # a bug, not the user's or the machine's
    assert exit_status(raised.value) == 1

    def run() -> None:
        raise raised.value

    # the worker's traceback is headed by the name the last line gives it: it was
    # "Process SpawnProcess-2:" (ForkServerProcess-2 under the default forkserver)
    assert f"Process env worker 1 of 2 (pid {pid}):\nTraceback" in capfd.readouterr().err
    assert main_guard(run) == 1
    assert capfd.readouterr().err == f"error: {raised.value}\n"  # one line: the worker's is above


def test_a_worker_whose_env_fails_to_build_closes_the_others(window):
    """Worker 0's env raising as it is built (before it sends its spaces) ended the
    constructor with WorkerFailed and left worker 1 alive, waiting on its pipe: only
    WorkerDied (a signal) closed the others there."""
    import functools
    import multiprocessing

    import gymnasium as gym

    before = set(multiprocessing.active_children())
    good = functools.partial(gym.make, "btb/Route-v0", windows=[window])
    bad = functools.partial(gym.make, "btb/Route-v0", windows=[window], no_such_option=1)
    with pytest.raises(WorkerFailed, match=r"env worker 0 of 2 .* exited with status 1"):
        WorkerVecEnv([bad, good], start_method="spawn")
    assert set(multiprocessing.active_children()) <= before  # worker 1 closed, joined


def test_workers_killed_together_are_named_once(window):
    """All of them killed the same way (the out-of-memory killer, kill -9 of a group)
    gave one clause a worker, "env worker 0 of 16 (pid ...) died, killed by signal 9
    (SIGKILL: ...)" sixteen times."""
    vec = _vec(WorkerVecEnv, "btb/Route-v0", window, n_envs=3)
    try:
        vec.reset()
        pids = [_killed(vec, k) for k in range(3)]
        with pytest.raises(WorkerDied) as raised:
            vec.step(np.array([0, 0, 0]))
        assert str(raised.value) == (
            f"env.vec=subproc: env workers 0-2 of 3 (pids {pids[0]}, {pids[1]}, {pids[2]}) "
            "died, killed by signal 9 (SIGKILL: the kernel's out-of-memory killer sends it, "
            "as does kill -9)"
        )
    finally:
        vec.close()


def test_workers_ended_names_each_way_once_with_a_few_pids():
    kill, term = -signal.SIGKILL, -signal.SIGTERM
    sigkill = (
        "killed by signal 9 (SIGKILL: the kernel's out-of-memory killer sends it, as does kill -9)"
    )
    ended = [(k, 100 + k, kill) for k in range(16)]
    assert workers_ended(ended, 16) == (
        f"env workers 0-15 of 16 (pids 100, 101, 102 and 13 more) died, {sigkill}"
    )
    # ways apart, in the order of their first worker; ranges and lone indices; four pids
    # are listed whole
    ended = [(5, 5, 1), (0, 10, kill), (1, 11, kill), (3, 13, kill), (4, 14, kill), (7, 7, term)]
    assert workers_ended(ended, 8) == (
        f"env workers 0-1, 3-4 of 8 (pids 10, 11, 13, 14) died, {sigkill}; "
        "env worker 5 of 8 (pid 5) died, exited with status 1 (its traceback, if it raised, "
        "is above); env worker 7 of 8 (pid 7) died, killed by signal 15 (SIGTERM)"
    )
    assert workers_ended([(2, 9, 3), (6, 8, 3)], 8) == (
        "env workers 2, 6 of 8 (pids 9, 8) died, exited with status 3 (each one's traceback, "
        "if it raised, is above)"
    )


def test_how_a_worker_ended_is_said_from_its_exit_code():
    assert how_ended(-signal.SIGTERM) == "killed by signal 15 (SIGTERM)"
    assert how_ended(1) == "exited with status 1 (its traceback, if it raised, is above)"
    assert how_ended(0) == "exited with status 0"
    assert how_ended(-200) == "killed by signal 200"


@pytest.mark.parametrize(("algo", "kind"), [("ppo", "route"), ("maskable_ppo", "route_warm")])
def test_training_is_identical_to_dummy_vec_env(algo, kind, window):
    env_id = {"route": "btb/Route-v0", "route_warm": "btb/RouteWarm-v0"}[kind]
    lean, dummy = (
        _learned(_vec(cls, env_id, window, n_envs=2), algo, kind)
        for cls in (InProcessVecEnv, DummyVecEnv)
    )
    assert all(torch.equal(lean[k], dummy[k]) for k in lean)


def _learned(vec, algo, kind):
    """The weights a seed-3 model of ``algo`` learns in 256 steps on ``vec`` (closed after)."""
    model = build_model(
        AgentSpec(algo=algo, env=kind, seed=3),
        vec,
        {"n_steps": 64, "batch_size": 32, "n_epochs": 2},
    )
    model.learn(256)
    vec.close()
    return {k: v.clone() for k, v in model.policy.state_dict().items()}


def test_worker_processes_train_as_the_in_process_envs_with_normalized_rewards(window):
    """SubprocVecEnv stacks the envs' float64 rewards, DummyVecEnv keeps float32:
    VecNormalize's running return then differed (7th digit), and so did the weights."""
    from stable_baselines3.common.vec_env import VecNormalize

    weights = []
    for cls in (InProcessVecEnv, WorkerVecEnv):
        vec = _vec(cls, "btb/RouteWarm-v0", window, n_envs=2)
        vec.reset()
        _, rewards, _, _ = vec.step(np.zeros((2, *vec.action_space.shape), dtype=np.int64))
        vec.close()
        assert rewards.dtype == np.float32, cls.__name__
        vec = VecNormalize(_vec(cls, "btb/RouteWarm-v0", window, n_envs=2), norm_obs=False)
        weights.append(_learned(vec, "maskable_ppo", "route_warm"))
    lean, workers = weights
    assert all(torch.equal(lean[k], workers[k]) for k in lean)


class ThreadsAtRolloutStart(BaseCallback):
    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []

    def _on_rollout_start(self) -> None:
        self.threads.append(torch.get_num_threads())

    def _on_step(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("algo", "kind"), [("ppo", "route"), ("maskable_ppo", "route_warm"), ("ppo", "thresholds")]
)
def test_two_update_threads_train_as_one_up_to_rounding_and_repeat_exactly(algo, kind, window):
    """Two update threads repeat their own run bit for bit. Against one thread they
    agree to float rounding only: where MKL splits a matrix product's sums over the
    threads (an AVX-512 Xeon, 2026-12-05), some weights differ in their last bits."""
    spec = AgentSpec(algo=algo, env=kind, seed=3)
    weights = []
    for threads in (1, 2, 2):
        vec = _vec(InProcessVecEnv, spec.env_id, window, n_envs=4)
        model = build_model(  # minibatches of the defaults' 1,024
            spec,
            vec,
            {"n_steps": 256, "batch_size": 1024, "n_epochs": 2},
        )
        seen = ThreadsAtRolloutStart()  # what the update before each rollout ran on
        try:
            model.learn(2048, callback=[seen, UpdateThreads(threads)])
            assert torch.get_num_threads() == 1  # the rollouts' count, when learning ends
        finally:
            torch.set_num_threads(1)
        assert seen.threads == [1, threads]
        weights.append({k: v.clone() for k, v in model.policy.state_dict().items()})
        vec.close()
    one, two, again = weights
    assert all(torch.equal(two[k], again[k]) for k in two)
    assert all(torch.allclose(one[k], two[k], rtol=1e-5, atol=1e-7) for k in one)
    vec = _vec(InProcessVecEnv, spec.env_id, window, n_envs=4)
    start = build_model(spec, vec).policy
    vec.close()
    moved = [k for k, v in start.state_dict().items() if not torch.allclose(v, one[k])]
    assert moved  # (the updates changed the weights: the comparison above compares training)


def test_usable_threads_is_capped_by_the_cpus_with_or_without_an_affinity(monkeypatch):
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert [usable_threads(n) for n in (1, 2, 8)] == [1, 2, 3]
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # macOS, Windows
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert [usable_threads(n) for n in (1, 2, 8)] == [1, 2, 2]
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # unknown: one
    assert usable_threads(4) == 1
