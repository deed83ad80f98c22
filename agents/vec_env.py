"""The vectorised envs training runs its envs in: all in one process
(``env.vec=dummy``), or each in a process of its own (``env.vec=subproc``).

:class:`InProcessVecEnv` is stable-baselines3's ``DummyVecEnv`` without its
``deepcopy`` of every step's infos. ``DummyVecEnv`` copies the list of info dicts
deeply at each step, in case an env hands back a dict it later changes; our envs
build a new info dict at every step and reset, so the copy protects nothing. It
cost about 120 microseconds a step of 16 envs on the development machine, some 2 %
of a learning step (within the noise of whole learning runs there). Each info
dict is still copied once, shallowly, and an episode's last observation deeply, so
what a caller gets is its own; observations, rewards, dones and infos are those
``DummyVecEnv`` gives, value for value, and so is training
(``tests/agents/test_vec_env.py``).

:class:`WorkerVecEnv` is stable-baselines3's ``SubprocVecEnv`` whose workers
ignore Ctrl-C: the command alone stops, and closes them. Its rewards are float32,
as ``DummyVecEnv``'s (``SubprocVecEnv`` stacks the envs' float64s): with
``env.normalize_reward`` the running return was kept in float64 there, and training
moved from the in-process path's in the 7th digit. Each worker's env is wrapped in
:class:`RunStateSnapshots`, through which a checkpoint's run state pickles the env
in its worker and a resumed run puts one back (:mod:`agents.run_state`).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from copy import deepcopy
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from agents.env_pickles import error_text, restore_env, snapshot_env


class InProcessVecEnv(DummyVecEnv):
    """``DummyVecEnv`` whose ``step_wait`` copies each info dict shallowly instead of
    copying the list of them deeply (see the module docstring)."""

    def step_wait(self) -> VecEnvStepReturn:
        infos = self.buf_infos
        for k, env in enumerate(self.envs):
            obs, reward, terminated, truncated, info = env.step(self.actions[k])
            self.buf_rews[k] = reward
            done = terminated or truncated
            self.buf_dones[k] = done
            # the Gymnasium -> SB3 conventions DummyVecEnv keeps
            info["TimeLimit.truncated"] = truncated and not terminated
            if done:
                info["terminal_observation"] = deepcopy(obs)  # once an episode
                obs, self.reset_infos[k] = env.reset()
            infos[k] = info
            self._save_obs(k, obs)
        return (
            self._obs_from_buf(),
            np.copy(self.buf_rews),
            np.copy(self.buf_dones),
            [dict(info) for info in infos],
        )


class WorkerVecEnv(SubprocVecEnv):
    """``SubprocVecEnv`` whose workers ignore SIGINT. A terminal's Ctrl-C reaches
    every process of the command: a worker it stopped closed its pipe, and the
    command, stopping too, met the closed pipe as it closed the envs (a
    BrokenPipeError or EOFError in place of its KeyboardInterrupt: ``error: ...
    Broken pipe``, exit 2, not ``interrupted``, 130). Now the command alone stops,
    and its ``close`` lets each worker end its step and exit."""

    def __init__(self, env_fns: list[Callable[[], gym.Env]], start_method: str | None = None):
        super().__init__([partial(_ignoring_ctrl_c, make) for make in env_fns], start_method)

    def step_wait(self) -> VecEnvStepReturn:
        """``SubprocVecEnv``'s step, its rewards float32 as ``DummyVecEnv``'s (the
        default ``env.vec=dummy``, which every shipped agent was trained with)."""
        obs, rewards, dones, infos = super().step_wait()
        return obs, rewards.astype(np.float32), dones, infos

    def close(self) -> None:
        """Close the workers. A step cut short (Ctrl-C in ``step_wait``) leaves some
        results read and some not: ``SubprocVecEnv.close`` would wait for one from
        every worker, and hang on a worker whose result was read (it has nothing
        more to send, and lives on now). So take only the results already there; a
        worker still stepping sends its result, then reads the close and exits."""
        if self.closed:
            return
        if self.waiting:
            for remote in self.remotes:
                try:
                    while remote.poll():
                        remote.recv()
                except (EOFError, OSError):  # a worker gone: nothing to take
                    continue
            self.waiting = False
        super().close()


class RunStateSnapshots(gym.Wrapper):  # type: ignore[type-arg]
    """The outermost wrapper of a :class:`WorkerVecEnv` env, in its worker, which
    steps and resets as the env below it. ``vec_env.env_method`` reaches its two
    methods: :meth:`run_state_snapshot` pickles the env below it, with its other
    wrappers, for a checkpoint's run state; :meth:`run_state_restore` puts such a
    pickle in its place (:mod:`agents.run_state`)."""

    def run_state_snapshot(self, digests: list[str]) -> tuple[bytes, list[int]]:
        """The env below, pickled with each window whose digest is among the run's
        ``digests`` named by its position there, and the positions named."""
        return snapshot_env(self.env, digests)

    def run_state_restore(self, data: bytes, windows: dict[int, Any]) -> str | None:
        """Put the env :meth:`run_state_snapshot` pickled as ``data`` in place of the
        one below (closed), each position it names as that window of ``windows``;
        None, or why it does not load (on one line: an error raised here would end
        the worker, and the command with a broken pipe), the env below kept."""
        try:
            env = restore_env(data, windows)
        except Exception as error:
            return error_text(error)
        self.env.close()
        self.env = env
        return None


def _ignoring_ctrl_c(make_env: Callable[[], gym.Env]) -> gym.Env:
    """``make_env()``, in a worker, after it has set SIGINT aside (the first thing a
    ``SubprocVecEnv`` worker runs), wrapped in :class:`RunStateSnapshots`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return RunStateSnapshots(make_env())
