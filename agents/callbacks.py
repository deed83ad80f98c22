"""stable-baselines3 callbacks for training runs: a progress bar, periodic
checkpoints, and metrics (episode returns, steps per second, each update's
statistics) for the logger."""

from __future__ import annotations

import copy
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from agents.algorithms import AgentSpec, save_agent
from agents.env_pickles import RunWindows
from envs.files import folder_atomic, fsync_file


def say(line: str) -> None:
    """Print ``line`` (stdout) beside the run's progress bar, if one is drawn: the bar
    cleared, the line, then the bar again (``tqdm.write``), so that the line never
    runs on from the bar's on a terminal."""
    from tqdm import tqdm

    tqdm.write(line)
    sys.stdout.flush()


class ProgressBar(BaseCallback):
    """A tqdm bar over the run's timesteps up to ``total_timesteps`` (the step learn()
    will end at; resumed runs start part-way); a run that goes further raises the
    total rather than passing 100%."""

    def __init__(self, total_timesteps: int, enabled: bool = True) -> None:
        super().__init__()
        self.total = total_timesteps
        self.enabled = enabled
        self._bar: Any = None

    def _on_training_start(self) -> None:
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(
                total=self.total, initial=self.model.num_timesteps, unit="step", desc="train"
            )

    def _on_step(self) -> bool:
        if self._bar is not None:
            if self.model.num_timesteps > self._bar.total:  # never past 100%
                self._bar.total = self.model.num_timesteps
            self._bar.update(self.model.num_timesteps - self._bar.n)
        return True

    def _on_training_end(self) -> None:
        self.close()

    def close(self) -> None:
        """End the bar's line. SB3 calls no callback when ``learn`` raises, so the
        caller closes it then, before the error is said: a bar left open was closed
        at exit, after the command's error line, which it had been written on."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class CheckpointEvery(BaseCallback):
    """Save ``checkpoints/step_N`` (agent.json + model.zip) at the first rollout's
    end at or past each multiple of ``every`` steps, between rollouts: after the
    update that learned from every step counted, so ``N`` (the folder's name,
    agent.json's ``timesteps``) is what its weights were trained on and ``resume=``
    goes on from there. N is a rollout's end (a multiple of ``n_steps x
    env.n_envs`` for PPO), so two checkpoints can be less than ``every`` apart;
    the last update's weights are saved at the end of training when due. Given
    the ``windows`` the envs draw from, each holds the run's state too where it
    can (``run_state.pkl``, :mod:`agents.run_state`), so that ``resume=`` goes on
    exactly as the run would; with ``validation`` (the run's
    :class:`KeepBestByValidation`), its scores so far and best model too; with
    ``buffer_left_out`` (why), a DQN's replay buffer is left out of it."""

    def __init__(
        self,
        every: int,
        spec: AgentSpec,
        folder: Path,
        windows: RunWindows | None = None,
        validation: KeepBestByValidation | None = None,
        buffer_left_out: str | None = None,
    ) -> None:
        super().__init__()
        self.every = every
        self.buffer_left_out = buffer_left_out
        self.spec = spec
        self.folder = Path(folder)
        self.windows = windows
        self.validation = validation
        self._next = every

    def _on_training_start(self) -> None:
        self._next = (self.model.num_timesteps // self.every + 1) * self.every

    def _save_if_due(self) -> None:
        steps = int(self.model.num_timesteps)
        if steps >= self._next:
            folder = self.folder / f"step_{steps}"
            scores = None
            if self.windows is not None and self.validation is not None:
                scores = self.validation.snapshot()
            save_agent(
                self.model,
                self.spec,
                folder,
                run_state=self.windows,
                validation=scores,
                buffer_left_out=self.buffer_left_out,
            )
            self._next = (steps // self.every + 1) * self.every

    def _on_rollout_start(self) -> None:  # the previous rollout's update is done
        self._save_if_due()

    def _on_training_end(self) -> None:
        self._save_if_due()

    def _on_step(self) -> bool:
        return True


class RestoreRandomState(BaseCallback):
    """At the start of a resumed run's training, after every callback before it
    (put it last), set torch's, numpy's, Python's and the action space's generators
    to a checkpoint's run state (:func:`agents.run_state.restore_random`): loading the
    model seeded them afresh."""

    def __init__(self, state: dict[str, Any]) -> None:
        super().__init__()
        self.state = state

    def _on_training_start(self) -> None:
        from agents.run_state import restore_random

        restore_random(self.model, self.state)

    def _on_step(self) -> bool:
        return True


class MetricsLogger(BaseCallback):
    """Logs mean episode return and length and steps per second, about every
    ``every`` steps and at the end of training; ``history`` keeps every record
    (the run's training curve)."""

    def __init__(self, logger: Any, every: int = 1000) -> None:
        super().__init__()
        self.run_logger = logger
        self.every = every
        self.history: list[dict[str, float]] = []
        self._last_steps = 0
        self._last_time = 0.0
        self._next = every

    def _on_training_start(self) -> None:
        self._last_steps = self.model.num_timesteps
        self._last_time = time.perf_counter()
        self._next = self.model.num_timesteps + self.every

    def _on_step(self) -> bool:
        if self.model.num_timesteps >= self._next:
            self._flush()
            self._next = self.model.num_timesteps + self.every
        return True

    def _on_training_end(self) -> None:
        if self.model.num_timesteps != self._last_steps or not self.history:
            self._flush()  # (the last rollout's point, unless it was just logged)

    def _flush(self) -> None:
        now = time.perf_counter()
        steps = self.model.num_timesteps
        metrics: dict[str, float] = {
            "train/steps_per_s": (steps - self._last_steps) / max(now - self._last_time, 1e-9),
            "train/timesteps": float(steps),
        }
        episodes = self.model.ep_info_buffer
        if episodes:
            metrics["train/episode_return_mean"] = float(np.mean([e["r"] for e in episodes]))
            metrics["train/episode_length_mean"] = float(np.mean([e["l"] for e in episodes]))
        self.run_logger.log(metrics, step=steps)
        self.history.append(metrics)
        self._last_steps = steps
        self._last_time = now


def score_text(value: float) -> str:
    """A validation score as printed: four decimals, more below 0.1 so that four
    significant digits show (a qwen3-8b score of 0.0295 s hid 0.02953 against
    0.02956)."""
    if value != 0 and math.isfinite(value) and abs(value) < 0.1:
        return f"{value:.{3 - math.floor(math.log10(abs(value)))}f}"
    return f"{value:.4f}"


class KeepBestByValidation(BaseCallback):
    """Score the model on validation windows at the start of training, every
    ``every`` steps and at the end; save the best-scoring one (lowest ``score``,
    e.g. mean TTFT in seconds; the earliest on a tie) to ``folder``.

    A score's step is the env steps collected when it is taken (``num_timesteps``,
    between two env steps), and the weights scored are those of the last update
    before it: a score at a rollout's last step (``every`` a multiple of the
    rollout) scores the weights the rollout was collected with, one update short
    of its label. With ``every`` shorter than a rollout, the same weights are
    scored more than once. Kept so: the shipped agents were chosen this way.

    ``score`` maps the model to a number and must not change it (a deterministic
    evaluation draws no random numbers, so training goes on exactly as without
    this callback). ``history`` holds ``(step, score)`` pairs; ``best_step`` and
    ``best_score`` the winner. ``echo`` prints one line per score (for a user
    following the run without a logger).

    :meth:`snapshot` is what a checkpoint's run state keeps of it (the scores so
    far, the best one and the best model's files); given one as ``restored``, a
    resumed run goes on from it as the run would have: no score at its start, the
    next at the step the run would have taken it, and ``folder`` holding the
    snapshot's best model until a score beats it. ``basis`` (what the scores are
    of: the windows, the score, the stream) goes in the snapshot, for a resumed run
    to tell whether its own scores are of the same.
    """

    def __init__(
        self,
        every: int,
        spec: AgentSpec,
        folder: Path,
        score: Any,
        logger: Any = None,
        echo: bool = False,
        restored: dict[str, Any] | None = None,
        basis: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.basis = basis
        self.every = every
        self.spec = spec
        self.folder = Path(folder)
        self.score = score
        self.run_logger = logger
        self.echo = echo
        self.restored = restored
        self.history: list[tuple[int, float]] = []
        self.best_step = -1
        self.best_score = float("inf")
        self._next = every

    def snapshot(self) -> dict[str, Any]:
        """The scores so far (with the score's ``records``), the best step and score,
        the next score's step, and the best model's files (``folder``'s ``model.zip``
        and ``agent.json``, as bytes; None before any score won): what a checkpoint's
        run state keeps so that a resumed run chooses among the whole run's scores."""
        best = None
        if self.best_step >= 0:
            best = {name: (self.folder / name).read_bytes() for name in ("model.zip", "agent.json")}
        return {
            "every": self.every,
            "basis": self.basis,
            "history": list(self.history),
            "records": copy.deepcopy(getattr(self.score, "records", None)),
            "best_step": self.best_step,
            "best_score": self.best_score,
            "next": self._next,
            "best_files": best,
        }

    def _restore(self, saved: dict[str, Any]) -> None:
        self.history = [(int(k), float(v)) for k, v in saved["history"]]
        if saved["records"] is not None:
            self.score.records[:] = copy.deepcopy(saved["records"])
        self.best_step, self.best_score = int(saved["best_step"]), float(saved["best_score"])
        self._next = int(saved["next"])
        if saved["best_files"] is not None:
            with folder_atomic(self.folder.resolve()) as partial:
                for name, data in saved["best_files"].items():
                    (partial / name).write_bytes(data)
                    fsync_file(partial / name)
        if self.echo:
            say(
                f"validation: {len(self.history)} scores carried over from the checkpoint "
                f"(best {score_text(self.best_score)} at {self.best_step:,}); "
                f"the next at step {self._next:,}"
            )

    def _on_training_start(self) -> None:
        if self.restored is not None:
            self._restore(self.restored)
            return
        self._validate()
        self._next = (self.model.num_timesteps // self.every + 1) * self.every

    def _on_step(self) -> bool:
        if self.model.num_timesteps >= self._next:
            self._validate()
            self._next += self.every
        return True

    def _on_training_end(self) -> None:
        if not self.history or self.history[-1][0] != self.model.num_timesteps:
            self._validate()

    def _validate(self) -> None:
        step = int(self.model.num_timesteps)
        value = float(self.score(self.model))
        self.history.append((step, value))
        if self.run_logger is not None:
            self.run_logger.log({"val/ttft_mean_s": value}, step=step)
        kept = value < self.best_score  # NaN never wins
        if kept:
            self.best_step, self.best_score = step, value
            save_agent(self.model, self.spec, self.folder)
        if self.echo:
            best = (
                "best so far"
                if kept
                else f"best {score_text(self.best_score)} at {self.best_step:,}"
            )
            say(f"validation at step {step:,}: {score_text(value)} ({best})")


class Curriculum(BaseCallback):
    """Episodes drawn from shorter pools first: ``stages`` are ``(until, pool)``
    pairs, steps rising; up to ``until`` env steps the envs draw their episodes
    from ``pool`` (e.g. burst segments, ``envs.windows.burst_segments``), and after
    the last stage from ``whole``. A stage change reaches each env at its next
    episode; at the start of training the envs begin afresh on the stage's pool
    (their first episodes would else be whole windows), unless ``restored``: the envs
    are a resumed run's, mid-episode as the checkpoint left them, and go on (the
    stage's pool reaches them at their next episode). ``changes`` records
    ``(step, stage)`` for each switch (stage ``len(stages)``: the whole windows)."""

    def __init__(
        self,
        stages: list[tuple[int, list[Any]]],
        whole: list[Any],
        echo: bool = True,
        restored: bool = False,
    ) -> None:
        super().__init__()
        self.restored = restored
        self.stages = stages
        self.whole = whole
        self.echo = echo
        self.stage = -1
        self.changes: list[tuple[int, int]] = []

    def _stage_at(self, step: int) -> int:
        return next(
            (i for i, (until, _) in enumerate(self.stages) if step < until), len(self.stages)
        )

    def _switch(self, stage: int) -> None:
        pool = self.stages[stage][1] if stage < len(self.stages) else self.whole
        self.training_env.env_method("set_windows", pool)
        self.stage = stage
        step = int(self.model.num_timesteps)
        self.changes.append((step, stage))
        if self.echo:
            what = (
                f"{len(pool)} segments (stage {stage + 1} of {len(self.stages)}, "
                f"until step {self.stages[stage][0]:,})"
                if stage < len(self.stages)
                else f"the {len(pool)} whole train windows"
            )
            say(f"curriculum at step {step:,}: episodes from {what}")

    def _on_training_start(self) -> None:
        stage = self._stage_at(int(self.model.num_timesteps))
        self.stage = stage  # past the last stage: the envs already draw whole windows
        if stage < len(self.stages):
            self._switch(stage)
            if self.restored:
                return
            # SB3 reset the envs before this callback: start their episodes afresh,
            # as SB3's own set-up does (off-policy algorithms keep the unscaled ones too)
            self.model._last_obs = self.training_env.reset()  # type: ignore[assignment]
            self.model._last_episode_starts = np.ones((self.training_env.num_envs,), dtype=bool)
            scaling = self.model.get_vec_normalize_env()
            if scaling is not None:
                self.model._last_original_obs = scaling.get_original_obs()

    def _on_step(self) -> bool:
        if self.stage < len(self.stages):
            stage = self._stage_at(int(self.model.num_timesteps))
            if stage != self.stage:
                self._switch(stage)
        return True


class RolloutClock(BaseCallback):
    """Splits a run's wall time into rollout collection (env steps, the policy's
    forward passes, and the callbacks that run between steps: checkpoints,
    validation) and updates (the gradient steps between rollouts); ``rollout_s``
    and ``update_s`` are the totals. With a ``logger``, each iteration logs
    ``train/rollout_steps_per_s`` and ``train/update_steps_per_s`` (its steps over
    the time of each part)."""

    def __init__(self, logger: Any = None) -> None:
        super().__init__()
        self.run_logger = logger
        self.rollout_s = 0.0
        self.update_s = 0.0
        self._rollout_start = 0.0
        self._update_start: float | None = None
        self._steps_at_start = 0
        self._rollout_steps = 0
        self._last_rollout_s = 0.0

    def _on_rollout_start(self) -> None:
        now = time.perf_counter()
        self._close_update(now)
        self._rollout_start = now
        self._steps_at_start = self.model.num_timesteps

    def _on_rollout_end(self) -> None:
        now = time.perf_counter()
        self._last_rollout_s = now - self._rollout_start
        self.rollout_s += self._last_rollout_s
        self._rollout_steps = self.model.num_timesteps - self._steps_at_start
        self._update_start = now

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        self._close_update(time.perf_counter())

    def _close_update(self, now: float) -> None:
        if self._update_start is None:
            return
        update_s = now - self._update_start
        self.update_s += update_s
        self._update_start = None
        if self.run_logger is not None and self._rollout_steps > 0:
            self.run_logger.log(
                {
                    "train/rollout_steps_per_s": self._rollout_steps
                    / max(self._last_rollout_s, 1e-9),
                    "train/update_steps_per_s": self._rollout_steps / max(update_s, 1e-9),
                },
                step=self.model.num_timesteps,
            )


def usable_cpus() -> int:
    """The CPUs this process may use (its affinity where the platform tells it,
    else the machine's CPUs)."""
    affinity = getattr(os, "sched_getaffinity", None)  # (not on macOS or Windows)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def usable_threads(asked: int) -> int:
    """``asked`` torch threads, at most as many as :func:`usable_cpus`."""
    return max(1, min(int(asked), usable_cpus()))


class UpdateThreads(BaseCallback):
    """Torch threads by phase of ``learn()``: ``update`` threads in the gradient
    updates (minibatches of 1,024, whose matrix products two threads split) and
    ``rollout`` while rollouts are collected (a forward pass of ``env.n_envs``
    observations), and again when learning ends. Which thread computes what
    changes, not the numbers: ``tests/agents/test_vec_env.py`` trains with one
    and with two update threads and gets the same weights."""

    def __init__(self, update: int, rollout: int = 1) -> None:
        super().__init__()
        self.update = update
        self.rollout = rollout

    def _set(self, threads: int) -> None:
        import torch

        torch.set_num_threads(threads)

    def _on_rollout_start(self) -> None:
        self._set(self.rollout)

    def _on_rollout_end(self) -> None:
        self._set(self.update)

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        self._set(self.rollout)


UPDATE_STATS = (
    "approx_kl",
    "clip_fraction",
    "entropy_loss",
    "policy_gradient_loss",
    "policy_loss",
    "value_loss",
    "loss",
    "explained_variance",
    "learning_rate",
    "clone_kl",
)
"""What an update of PPO / MaskablePPO / A2C / DQN records in SB3's logger
(under ``train/``) that ``UpdateStats`` keeps; an algorithm that lacks one
leaves it out (A2C records ``policy_loss`` where PPO records
``policy_gradient_loss``, and no KL or clip fraction; DQN only ``loss``, its TD
loss, and the learning rate); ``clone_kl`` is the mean KL to the clone of a run
with ``agent.clone_kl_coef`` (``agents.algorithms.CloneKL``). ``epochs`` is
added from SB3's update counter: the passes over the rollout that ran (fewer
than ``n_epochs`` when ``target_kl`` stopped the update), DQN's gradient steps."""


class UpdateStats(BaseCallback):
    """Each gradient update's statistics (``UPDATE_STATS``: approximate KL, clip
    fraction, entropy, losses, explained variance, learning rate, and the epochs
    that ran) as the update left them in SB3's logger, read when the next
    rollout starts and at the end;
    logged as ``update/NAME`` at the step the update followed, and kept in
    ``history`` (one dict per update, with ``timesteps``)."""

    def __init__(self, logger: Any = None) -> None:
        super().__init__()
        self.run_logger = logger
        self.history: list[dict[str, float]] = []
        self._n_updates = 0  # SB3's update counter at the last read

    def _on_training_start(self) -> None:
        self._n_updates = int(getattr(self.model, "_n_updates", 0))

    def _on_rollout_start(self) -> None:
        self._read()

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        self._read()

    def _read(self) -> None:
        recorded = self.model.logger.name_to_value
        if "train/n_updates" not in recorded:  # no update yet
            return
        n_updates = int(recorded["train/n_updates"])
        if n_updates == self._n_updates:  # no update since the last read
            return
        stats = {
            name: float(recorded[f"train/{name}"])
            for name in UPDATE_STATS
            if f"train/{name}" in recorded
        }
        stats["epochs"] = float(n_updates - self._n_updates)
        self._n_updates = n_updates
        steps = int(self.model.num_timesteps)
        if self.run_logger is not None:
            self.run_logger.log({f"update/{k}": v for k, v in stats.items()}, step=steps)
        self.history.append({"timesteps": float(steps), **stats})
