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
in its worker and a resumed run puts one back (:mod:`agents.run_state`). A worker
killed by a signal (the out-of-memory killer's SIGKILL) is said as
:class:`agents.WorkerDied`, naming it and how it ended, where ``SubprocVecEnv``
raised a ``BrokenPipeError`` or ``EOFError`` from its pipe; a worker that exited with
a status (its env raised: a bug, whose traceback the worker printed, headed by
its name: ``Process env worker 1 of 16 (pid 4242):``) as :class:`agents.WorkerFailed`.
Workers that ended the same way are named once (``env workers 0-15 of 16 (pids
...) died, killed by signal 9 ...``); the others are closed all the same.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from copy import deepcopy
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from agents import WorkerDied, WorkerFailed
from agents.env_pickles import WindowDigests, error_text, restore_env, snapshot_env
from envs.sim.request import Workload

PIPE_ERRORS = (EOFError, ConnectionError)
"""What a worker's pipe raises once the worker is gone: ``EOFError`` on a read,
``BrokenPipeError`` or ``ConnectionResetError`` on a write."""

DEATH_WAIT_S = 2.0
"""How long a pipe error waits for its worker's exit to be known (the process that
started it reaps it and tells its status a moment after the pipe closes)."""
SETTLE_S = 0.1
"""Once a worker's end is known, how long no other may end for the ends to be told
(workers ending together, each a moment apart, are named in one message)."""
FAILED = "a worker exits with a status when its env's code fails: a bug (btb-gym's or a plugin's)"
"""What :class:`agents.WorkerFailed` says after the workers it names."""
PIDS_SHOWN = 3
"""The most pids a message lists of workers that ended the same way (then "and N more")."""


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

    def __init__(
        self,
        env_fns: list[Callable[[], gym.Env]],
        start_method: str | None = None,
        digest_windows: bool = False,
    ):
        """``digest_windows``: each worker works out its windows' digests as it starts
        (:class:`RunStateSnapshots`), for a run that keeps checkpoints."""
        try:
            with self._workers():  # (a worker dead before it sent its env's spaces)
                n = len(env_fns)
                super().__init__(
                    [
                        partial(_ignoring_ctrl_c, make, k, n, digest_windows)
                        for k, make in enumerate(env_fns)
                    ],
                    start_method,
                )
        except (WorkerDied, WorkerFailed):  # the workers still alive are closed too
            self.close()
            raise

    def step_async(self, actions: np.ndarray) -> None:
        with self._workers():
            super().step_async(actions)

    def step_wait(self) -> VecEnvStepReturn:
        """``SubprocVecEnv``'s step, its rewards float32 as ``DummyVecEnv``'s (the
        default ``env.vec=dummy``, which every shipped agent was trained with)."""
        with self._workers():
            obs, rewards, dones, infos = super().step_wait()
        return obs, rewards.astype(np.float32), dones, infos

    def reset(self) -> Any:
        with self._workers():
            return super().reset()

    def get_images(self) -> Any:
        with self._workers():
            return super().get_images()

    def has_attr(self, attr_name: str) -> bool:
        with self._workers():
            return super().has_attr(attr_name)

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        with self._workers():
            return super().get_attr(attr_name, indices)

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        with self._workers():
            super().set_attr(attr_name, value, indices)

    def env_method(
        self, method_name: str, *method_args: Any, indices: Any = None, **method_kwargs: Any
    ) -> list[Any]:
        with self._workers():
            return super().env_method(method_name, *method_args, indices=indices, **method_kwargs)

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: Any = None) -> list[bool]:  # type: ignore[type-arg]
        with self._workers():
            return super().env_is_wrapped(wrapper_class, indices)

    @contextlib.contextmanager
    def _workers(self) -> Iterator[None]:
        """A pipe error raised inside, once a worker has ended, is raised again naming
        each worker ended and how (:func:`workers_ended`): as :class:`WorkerFailed`
        when one exited with a status (its env raised: a bug), else as
        :class:`WorkerDied` (killed by a signal). A pipe error with every worker alive
        is raised as it is."""
        try:
            yield
        except PIPE_ERRORS as error:
            ended = self._ended(wait_s=DEATH_WAIT_S)
            if not ended:
                raise
            said = "env.vec=subproc: " + workers_ended(ended, len(self.processes))
            if any(code >= 0 for _, _, code in ended):
                raise WorkerFailed(f"{said}; {FAILED}") from error
            raise WorkerDied(said) from error

    def _ended(self, wait_s: float = 0.0) -> list[tuple[int, int | None, int]]:
        """The workers that have ended, as (index, pid, exit code), waiting up to
        ``wait_s`` for one to be known, and then until no other has ended for
        :data:`SETTLE_S` (within ``wait_s``)."""
        deadline = time.monotonic() + wait_s
        settled = deadline
        known = 0
        while True:
            ended = [
                (k, process.pid, process.exitcode)
                for k, process in enumerate(self.processes)
                if process.exitcode is not None
            ]
            now = time.monotonic()
            if len(ended) > known:
                known, settled = len(ended), min(deadline, now + SETTLE_S)
            if len(ended) == len(self.processes) or now >= (settled if ended else deadline):
                return ended
            time.sleep(0.02)

    def close(self) -> None:
        """Close the workers. A step cut short (Ctrl-C in ``step_wait``) leaves some
        results read and some not: ``SubprocVecEnv.close`` would wait for one from
        every worker, and hang on a worker whose result was read (it has nothing
        more to send, and lives on now). So take only the results already there; a
        worker still stepping sends its result, then reads the close and exits. A
        worker that has died is passed over: the others are closed, none raises."""
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
        remotes = getattr(self, "remotes", ())
        for remote, process in zip(remotes, self.processes):
            if process.exitcode is None:
                with contextlib.suppress(*PIPE_ERRORS, OSError):  # (it died just now)
                    remote.send(("close", None))
        for process in self.processes:
            process.join()
        for remote in remotes:
            remote.close()
        self.closed = True


class RunStateSnapshots(gym.Wrapper):  # type: ignore[type-arg]
    """The outermost wrapper of a :class:`WorkerVecEnv` env, in its worker, which
    steps and resets as the env below it. ``vec_env.env_method`` reaches its two
    methods: :meth:`run_state_snapshot` pickles the env below it, with its other
    wrappers, for a checkpoint's run state; :meth:`run_state_restore` puts such a
    pickle in its place (:mod:`agents.run_state`). It keeps its windows' digests
    between checkpoints (``window_digests``), each worked out once: with
    ``digest_windows`` (a run that keeps checkpoints), those of the env's windows as
    the worker starts (the workers side by side, where the run's first checkpoint
    waited for all of them), else at its first checkpoint; a curriculum's segments
    at the first checkpoint after the envs get them."""

    def __init__(self, env: gym.Env, digest_windows: bool = False) -> None:
        super().__init__(env)
        self.window_digests = WindowDigests()
        if not digest_windows:  # a run without checkpoints never needs them
            return
        # worked out now, as the workers start side by side, rather than by all of them
        # at the run's first checkpoint (a curriculum's segments, which come later, are
        # worked out at the first checkpoint after them)
        for window in getattr(env.unwrapped, "windows", None) or ():
            if isinstance(window, Workload):
                self.window_digests(window)

    def run_state_snapshot(self, digests: list[str]) -> tuple[bytes, list[int]]:
        """The env below, pickled with each window whose digest is among the run's
        ``digests`` named by its position there, and the positions named."""
        return snapshot_env(self.env, digests, self.window_digests)

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


def workers_ended(ended: list[tuple[int, int | None, int]], n_workers: int) -> str:
    """The workers ``ended`` (index, pid, exit code) of ``n_workers``, those that
    ended the same way named once, in the order of their first index: ``env worker 1
    of 16 (pid 4242) died, killed by signal 9 (...)``, ``env workers 0-15 of 16 (pids
    4240, 4241, 4242 and 13 more) died, killed by signal 9 (...)``."""
    ways: dict[int, list[tuple[int, int | None]]] = {}
    for k, pid, code in sorted(ended):
        ways.setdefault(code, []).append((k, pid))
    said = []
    for code, workers in sorted(ways.items(), key=lambda way: way[1][0][0]):
        if len(workers) == 1:
            (k, pid), *_ = workers
            said.append(f"env worker {k} of {n_workers} (pid {pid}) died, {how_ended(code)}")
            continue
        pids = [str(pid) for _, pid in workers]
        cut = len(pids) > PIDS_SHOWN + 1  # ("and 1 more" would be no shorter)
        shown = ", ".join(pids[:PIDS_SHOWN] if cut else pids)
        more = f" and {len(pids) - PIDS_SHOWN} more" if cut else ""
        said.append(
            f"env workers {index_ranges([k for k, _ in workers])} of {n_workers} "
            f"(pids {shown}{more}) died, {how_ended(code, len(workers))}"
        )
    return "; ".join(said)


def index_ranges(indices: list[int]) -> str:
    """Sorted indices written as ranges: ``0-3, 5, 7-15``."""
    runs: list[list[int]] = []
    for k in indices:
        if runs and k == runs[-1][1] + 1:
            runs[-1][1] = k
        else:
            runs.append([k, k])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def how_ended(exit_code: int, processes: int = 1) -> str:
    """How a process (or ``processes`` of them alike) ended, from its ``exitcode``
    (``multiprocessing``: minus the signal that killed it): ``killed by signal 9
    (SIGKILL: ...)``, ``exited with status 1``."""
    if exit_code >= 0:
        whose = "its traceback" if processes == 1 else "each one's traceback"
        return f"exited with status {exit_code}" + (
            f" ({whose}, if it raised, is above)" if exit_code else ""
        )
    number = -exit_code
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"killed by signal {number}"
    if number == signal.SIGKILL:
        name += ": the kernel's out-of-memory killer sends it, as does kill -9"
    return f"killed by signal {number} ({name})"


def _ignoring_ctrl_c(
    make_env: Callable[[], gym.Env], k: int = 0, n: int = 1, digest_windows: bool = False
) -> gym.Env:
    """``make_env()``, in worker ``k`` of ``n``, after it has set SIGINT aside and
    taken its name (the first thing a ``SubprocVecEnv`` worker runs), wrapped in
    :class:`RunStateSnapshots` (its windows digested now with ``digest_windows``).
    The name heads the traceback the worker prints if its env raises,
    ``Process env worker 1 of 16 (pid 4242):``, as :class:`agents.WorkerFailed`
    names it (it was ``Process ForkServerProcess-2:``, whose number counts the
    processes started)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    multiprocessing.current_process().name = f"env worker {k} of {n} (pid {os.getpid()})"
    return RunStateSnapshots(make_env(), digest_windows)
