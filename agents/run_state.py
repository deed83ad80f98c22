"""What a checkpoint needs beyond its weights for ``resume=`` to go on exactly as
the run would have: ``run_state.pkl`` beside ``model.zip`` and ``agent.json``.

A checkpoint is saved between rollouts. SB3's ``model.zip`` holds the weights, the
optimizer and the step count, but a resumed run used to start its envs afresh (each
on a new episode, drawn by the seed's first draws), re-seeded torch's, numpy's and
Python's streams from the run's seed (SB3 does so when it loads a model) and zeroed
``VecNormalize``'s running return: the weights then parted from the uninterrupted
run's at the first step after the checkpoint. The run state holds each of these as
the run had them when the checkpoint was saved:

- the envs, pickled with their wrappers: a ``ClusterEnv`` pickles as its arguments,
  its episode's actions (replayed when read) and its random generators' states. The
  in-process ``DummyVecEnv``'s (``env.vec=dummy``) are pickled here; each worker of
  ``env.vec=subproc`` pickles its own env and sends the bytes (``RunStateSnapshots``,
  the outermost wrapper of a worker's env, through ``env_method``), and a resumed
  run sends them back to its workers;
- the observations and episode starts SB3 acts on next (``_last_obs``,
  ``_last_episode_starts``, and ``_last_original_obs`` under ``VecNormalize``);
- torch's, numpy's (the minibatch order) and Python's global generators and the
  action space's (DQN's random actions);
- ``VecNormalize``'s running statistics and each env's running discounted return;
- a DQN's replay buffer, its transitions so far (up to ``buffer_size``: 20 MB for
  the shipped ``agent=dqn``'s 50,000 of the default 16 envs, full), unless the run
  leaves it out (``train.run_state_max_mb``: :func:`buffer_bytes`), saying why in
  the state (``replay_buffer_left_out``): a resume from it is then not exact;
- with ``train.val_every``, the validation so far (``KeepBestByValidation.snapshot``:
  the scores, the best one and the best model's files), so that a resumed run
  chooses ``agent/`` among the whole run's scores.

The run's train windows (and a curriculum's segments), which each env holds, are not
in it: the pickle names each by its position in :class:`RunWindows`, and holds each
one's digest, so that a resumed run puts its own windows, built again from the same
config, in their place, and goes on exactly only when they are the same (and when
its curriculum's stages end where the run's did, up to the checkpoint: each stage's
``until`` and segments are in it too). Each env tells the windows it holds by their
digests (a worker's are copies of the run's); a resumed run sends each worker the
windows its env names only.

Checkpoints saved before the run state existed (on ``env.vec=subproc``, and of DQN,
before it was kept there), and a resume on another ``env.vec`` than the
checkpoint's, resume as before: from their weights, with fresh envs and streams, and
a note says so.
"""

from __future__ import annotations

import copy
import pickle
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.buffers import NStepReplayBuffer, ReplayBuffer
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from agents import note_run_state
from agents.env_pickles import RunWindows, error_text, restore_env, snapshot_env
from agents.vec_env import WorkerVecEnv
from envs.files import write_bytes_atomic

RUN_STATE_FILE = "run_state.pkl"
"""The run state's file in a checkpoint folder."""
RUN_STATE_VERSION = 1


def _vec_envs(model: BaseAlgorithm) -> tuple[Any, VecNormalize | None]:
    """The model's innermost vectorised env and its ``VecNormalize`` (or None)."""
    env = model.get_env()
    norm = model.get_vec_normalize_env()
    inner = env
    while inner is not None and hasattr(inner, "venv"):
        inner = inner.venv
    return inner, norm


BUFFER_ARRAYS = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")
"""The arrays of SB3's ``ReplayBuffer`` a run state holds (``next_observations`` is
None under ``optimize_memory_usage``)."""
SAVED_BUFFERS = (ReplayBuffer, NStepReplayBuffer)
"""The replay buffers a run state holds: their transitions are those arrays (an
n-step one's ``n_steps`` and ``gamma`` are the model's settings, loaded with it)."""


def unsaved_reason(model: BaseAlgorithm) -> str | None:
    """Why ``model``'s run state cannot be saved (None: it can)."""
    if isinstance(model, OffPolicyAlgorithm):
        if type(model.replay_buffer) not in SAVED_BUFFERS:
            return f"its replay buffer is a {type(model.replay_buffer).__name__}"
    elif not isinstance(model, OnPolicyAlgorithm):
        return f"{type(model).__name__} is not an algorithm its run state knows"
    inner, _ = _vec_envs(model)
    if not isinstance(inner, DummyVecEnv | WorkerVecEnv):
        return f"its envs run in a {type(inner).__name__}"
    if model._last_obs is None:  # type: ignore[has-type]
        return "its envs were never stepped"
    return None


def capture(
    model: BaseAlgorithm,
    windows: RunWindows,
    validation: dict[str, Any] | None = None,
    buffer_left_out: str | None = None,
) -> dict[str, Any] | None:
    """``model``'s run state as :func:`restore_envs` and :func:`restore_random` take
    it, its envs' ``windows`` named by position, and the run's ``validation`` (its
    scores so far and best model, ``KeepBestByValidation.snapshot``; None without
    ``train.val_every``), or None when it cannot be saved (:func:`unsaved_reason`).
    With ``buffer_left_out`` (why), a replay buffer is not in it, and the state says
    why. Reads each generator's state without drawing."""
    if unsaved_reason(model) is not None:
        return None
    inner, norm = _vec_envs(model)
    space_rng = model.action_space._np_random
    envs: Any
    if isinstance(inner, DummyVecEnv):
        vec, (envs, _) = "dummy", snapshot_env(inner.envs, windows.digests, windows.known)
    else:  # each worker pickles its env: (bytes, the window positions it names)
        vec, envs = "subproc", inner.env_method("run_state_snapshot", windows.digests)
    state: dict[str, Any] = {
        "version": RUN_STATE_VERSION,
        "timesteps": int(model.num_timesteps),
        "n_envs": int(inner.num_envs),
        "windows": windows.digests,
        "curriculum": [list(stage) for stage in windows.curriculum],
        "vec": vec,
        "envs": envs,
        "last_obs": copy.deepcopy(model._last_obs),  # type: ignore[has-type]
        "last_episode_starts": copy.deepcopy(model._last_episode_starts),  # type: ignore[has-type]
        "last_original_obs": copy.deepcopy(getattr(model, "_last_original_obs", None)),
        "torch_rng": torch.get_rng_state(),
        "numpy_rng": np.random.get_state(),
        "python_rng": random.getstate(),
        "action_space_rng": None if space_rng is None else space_rng.bit_generator.state,
        "reward_norm": None,
        "validation": validation,
        "replay_buffer": None,
        "replay_buffer_left_out": None,
    }
    if isinstance(model, OffPolicyAlgorithm):
        if buffer_left_out is None:
            state["replay_buffer"] = _buffer_state(model.replay_buffer)
        else:
            state["replay_buffer_left_out"] = buffer_left_out
    if norm is not None:
        state["reward_norm"] = {
            "mean": np.copy(norm.ret_rms.mean),
            "var": np.copy(norm.ret_rms.var),
            "count": norm.ret_rms.count,
            "returns": np.copy(norm.returns),
        }
    return state


def buffer_bytes(model: BaseAlgorithm, timesteps: int) -> tuple[int, int]:
    """The bytes a run state of ``model`` holds for its replay buffer at most, in a
    run of ``timesteps`` steps in all, and the transitions they are: those of the
    rows :func:`_buffer_state` takes of the buffer full, or of the rows the run
    fills (and the next) if it stops short of that. (0, 0) without a buffer."""
    buffer = getattr(model, "replay_buffer", None)
    if not isinstance(model, OffPolicyAlgorithm) or buffer is None:
        return 0, 0
    rows = min(int(buffer.buffer_size), -(-int(timesteps) // int(buffer.n_envs)) + 1)
    row_bytes = 0
    for name in BUFFER_ARRAYS:
        array = getattr(buffer, name, None)
        if array is not None:
            row_bytes += array[0].nbytes
    return rows * row_bytes, min(rows * int(buffer.n_envs), int(timesteps))


def _buffer_state(buffer: Any) -> dict[str, Any]:
    """A ``ReplayBuffer``'s transitions so far, as :func:`_restore_buffer` takes them:
    its arrays up to the row it writes next, that row too (under
    ``optimize_memory_usage`` it holds the last transition's next observation; else
    it is zeros, as in a new buffer), the whole arrays once the buffer is full."""
    rows = buffer.buffer_size if buffer.full else min(buffer.pos + 1, buffer.buffer_size)
    arrays = {}
    for name in BUFFER_ARRAYS:
        array = getattr(buffer, name, None)
        if array is not None:
            arrays[name] = np.copy(array[:rows])
    return {
        "kind": type(buffer).__name__,
        "buffer_size": int(buffer.buffer_size),
        "n_envs": int(buffer.n_envs),
        "pos": int(buffer.pos),
        "full": bool(buffer.full),
        "arrays": arrays,
    }


def _restore_buffer(buffer: Any, saved: dict[str, Any]) -> None:
    """Put the transitions :func:`_buffer_state` took in ``buffer`` (a new one of the
    same size, loaded with the checkpoint's settings)."""
    if type(buffer).__name__ != saved["kind"] or type(buffer) not in SAVED_BUFFERS:
        raise ValueError(
            f"its replay buffer is a {saved['kind']}, the model's a {type(buffer).__name__}"
        )
    size = (int(buffer.buffer_size), int(buffer.n_envs))
    if (saved["buffer_size"], saved["n_envs"]) != size:
        raise ValueError(
            f"its replay buffer holds {saved['buffer_size']} steps of {saved['n_envs']} "
            f"envs, the model's {size[0]} of {size[1]}"
        )
    for name in BUFFER_ARRAYS:
        array, values = getattr(buffer, name, None), saved["arrays"].get(name)
        if array is None or values is None:
            fits = array is None and values is None
        else:
            rows = array.shape[0]
            fits = values.shape[1:] == array.shape[1:] and values.dtype == array.dtype
            fits = fits and len(values) <= rows
        if not fits:
            raise ValueError(f"its replay buffer's {name} are not the model's")
    for name, values in saved["arrays"].items():
        array = getattr(buffer, name)
        array[: len(values)] = values
        array[len(values) :] = 0  # as in a new buffer, whatever this one held
    buffer.pos, buffer.full = int(saved["pos"]), bool(saved["full"])


def state_vec(state: dict[str, Any]) -> str:
    """The ``env.vec`` whose envs ``state`` holds (run states before subproc's were
    all dummy's)."""
    return str(state.get("vec", "dummy"))


def save(
    model: BaseAlgorithm,
    folder: Path,
    windows: RunWindows,
    validation: dict[str, Any] | None = None,
    buffer_left_out: str | None = None,
) -> bool:
    """Write ``model``'s run state (:func:`capture`) as ``folder/run_state.pkl``;
    False (nothing written) when it cannot be saved."""
    state = capture(model, windows, validation, buffer_left_out)
    if state is None:
        return False
    # atomically: a run killed while it writes leaves the earlier file or none
    write_bytes_atomic(folder / RUN_STATE_FILE, pickle.dumps(state, pickle.HIGHEST_PROTOCOL))
    return True


def load(folder: str | Path) -> dict[str, Any] | None:
    """The run state saved in checkpoint ``folder``, or None if it has none; the
    sha256 of the bytes read goes in the run's provenance (``agents.note_run_state``).
    Like ``model.zip``, it is a pickle: read only checkpoints you trust."""
    path = Path(folder) / RUN_STATE_FILE
    if not path.is_file():
        return None
    data = path.read_bytes()
    note_run_state(folder, RUN_STATE_FILE, data)
    try:
        state = pickle.loads(data)
    except Exception as error:  # a truncated or foreign file: pickle raises its own
        raise ValueError(
            f"{path}: not a run state ({error_text(error)}; "
            "remove it to resume from the weights alone, not exactly)"
        ) from None
    if not isinstance(state, dict) or state.get("version") != RUN_STATE_VERSION:
        raise ValueError(
            f"{path}: not a run state of version {RUN_STATE_VERSION} (remove it to resume "
            "from the weights alone, not exactly)"
        )
    return state


def restore_envs(model: BaseAlgorithm, state: dict[str, Any], windows: RunWindows) -> None:
    """Put the envs, SB3's next observations, ``VecNormalize``'s statistics and a
    DQN's replay buffer of ``state`` in place of ``model``'s (loaded with a vectorised
    env of as many envs, of the same kind), ``windows`` (whose digests are
    ``state``'s) in place of the windows it names: ``learn()`` then steps them on
    without a reset. The envs built for the run are closed."""
    inner, norm = _vec_envs(model)
    if state.get("replay_buffer") is not None:  # first: a refusal leaves the envs as built
        _restore_buffer(getattr(model, "replay_buffer", None), state["replay_buffer"])
    if state_vec(state) == "dummy":
        try:
            envs = restore_env(state["envs"], dict(enumerate(windows.windows)))
        except Exception as error:  # e.g. envs pickled by other code: one line, not a trace
            raise ValueError(f"its envs do not load ({error_text(error)})") from None
        if not isinstance(inner, DummyVecEnv) or len(envs) != inner.num_envs:
            raise ValueError(f"the run state holds {len(envs)} in-process envs")
        for env in inner.envs:
            env.close()
        inner.envs = envs
    else:
        if not isinstance(inner, WorkerVecEnv) or len(state["envs"]) != inner.num_envs:
            raise ValueError(f"the run state holds {len(state['envs'])} worker envs")
        for k, (data, used) in enumerate(state["envs"]):  # each worker its windows only
            named = {p: windows.windows[p] for p in used}
            (why,) = inner.env_method("run_state_restore", data, named, indices=[k])
            if why is not None:
                raise ValueError(f"its env {k} does not load in its worker ({why})")
    inner._reset_seeds()  # a reset would draw a seed's first episode again
    inner._reset_options()
    model._last_obs = copy.deepcopy(state["last_obs"])
    model._last_episode_starts = copy.deepcopy(state["last_episode_starts"])
    if state["last_original_obs"] is not None:
        model._last_original_obs = copy.deepcopy(state["last_original_obs"])
    saved = state["reward_norm"]
    if norm is not None and saved is not None:
        norm.ret_rms.mean = np.copy(saved["mean"])
        norm.ret_rms.var = np.copy(saved["var"])
        norm.ret_rms.count = saved["count"]
        norm.returns = np.copy(saved["returns"])


def restore_random(model: BaseAlgorithm, state: dict[str, Any]) -> None:
    """Set torch's, numpy's and Python's generators and the action space's to
    ``state``'s (after the model is loaded, which seeds them afresh, and after
    whatever runs before the first step)."""
    torch.set_rng_state(state["torch_rng"])
    np.random.set_state(state["numpy_rng"])
    random.setstate(state["python_rng"])
    if state["action_space_rng"] is not None:
        model.action_space.np_random.bit_generator.state = state["action_space_rng"]
