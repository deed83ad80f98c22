"""The vectorised env training runs its envs in, in one process.

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
"""

from __future__ import annotations

from copy import deepcopy

import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn


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
