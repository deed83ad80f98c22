"""What the three btb-gym environments share: the window pool, building a
simulator for an episode, crediting TTFT as it becomes known, rendering, and a
pickle round trip that replays the episode's actions (the simulator is
deterministic, and its generator cannot be pickled).

Subclasses implement ``_start`` (first observation), ``_act`` (apply an action,
advance the simulator, return whether the episode ended) and ``_observe``.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from typing import Any
from weakref import finalize

import gymnasium as gym
import numpy as np

from envs.encoder import check_time_unit, cluster_time_scale
from envs.sim import rare_gc
from envs.sim.checks import check_flag, check_number, check_whole_number, is_number
from envs.sim.config import DEFAULT_SETUP, ClusterSpec, SimConfig, setup_cluster
from envs.sim.errors import ConfigError, SettingWarning, SimulationError, caller_stacklevel, echoed
from envs.sim.request import Request, Workload
from envs.sim.simulator import Simulator
from envs.windows import window_pool
from envs.workloads.bursted import PUBLISHED_SEED
from envs.workloads.registry import DEFAULT_WORKLOAD
from envs.workloads.trace_options import TRACE_WORKLOAD


@functools.cache
def options_of_one_env() -> dict[str, str]:
    """The keyword arguments only one env kind takes, each with that env's id: read
    from the classes' own ``__init__`` signatures (beyond ``ClusterEnv``'s). Given
    to another kind, they are refused in one line naming the kind that takes them,
    not with Python's TypeError about ``ClusterEnv``."""
    import envs

    shared = _keyword_arguments(ClusterEnv)
    own: dict[str, str] = {}
    for env_id in envs.ENTRY_POINTS:
        for name in _keyword_arguments(_env_class(env_id)) - shared:
            own.setdefault(name, env_id)
    return own


@functools.cache
def env_arguments(env_id: str) -> frozenset[str]:
    """The keyword arguments ``gymnasium.make(env_id, ...)`` takes: ``ClusterEnv``'s and
    the env class's own (read from their ``__init__`` signatures)."""
    return _keyword_arguments(ClusterEnv) | _keyword_arguments(_env_class(env_id))


@functools.cache
def flag_arguments(env_id: str) -> frozenset[str]:
    """The flags among :func:`env_arguments` (those whose default is a bool: ``hints``,
    ``speculate``, ...): each must be a bool (``check_flag``), which the env checks
    when it is made."""
    return frozenset(
        p.name
        for cls in (ClusterEnv, _env_class(env_id))
        for p in inspect.signature(cls.__init__).parameters.values()  # type: ignore[misc]
        if isinstance(p.default, bool)
    )


def _env_class(env_id: str) -> type:
    import envs

    module, name = envs.ENTRY_POINTS[env_id].split(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def _keyword_arguments(cls: type) -> frozenset[str]:
    """The named arguments of ``cls.__init__`` (not ``self``, not ``**kwargs``)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    parameters = inspect.signature(cls.__init__).parameters.values()  # type: ignore[misc]
    return frozenset(p.name for p in parameters if p.name != "self" and p.kind in kinds)


def only_options_error(names: Sequence[str], envs: str) -> ConfigError:
    """The error for options ``names`` given to an env that does not take them,
    named as data (a command writes ``env.<name> ... (from ...)``)."""
    listed = ", ".join(f"{{{name}}}" for name in names)
    what = "are options" if len(names) > 1 else "is an option"
    return ConfigError(f"{listed} {what} of {envs} only", tuple(names))


def refuse_other_envs_options(kwargs: Mapping[str, Any], env: type[ClusterEnv]) -> None:
    """Refuse keyword arguments of another env kind (:func:`options_of_one_env`), those
    of one kind named together: ``speculate is an option of btb/RouteWarm-v0 only``;
    then those no env kind takes (a misspelling), naming every option ``env`` (the
    class being built) takes (not its ``ROUTE_ONLY``, which it refuses). A class
    calls it with the keyword arguments left after its own, before
    ``ClusterEnv.__init__`` would raise Python's TypeError."""
    if not kwargs:
        return
    owners = options_of_one_env()
    foreign = [name for name in kwargs if name in owners]
    if foreign:
        owner = owners[foreign[0]]
        raise only_options_error([n for n in foreign if owners[n] == owner], owner)
    shared = _keyword_arguments(ClusterEnv)
    unknown = [name for name in kwargs if name not in shared]
    if unknown:
        takes = frozenset().union(
            *(_keyword_arguments(c) for c in env.__mro__ if issubclass(c, ClusterEnv))
        ) - set(env.ROUTE_ONLY)
        listed = ", ".join(f"{{{name}}}" for name in unknown)
        what = "are not options" if len(unknown) > 1 else "is not an option"
        raise ConfigError(
            f"{listed} {what} of {_env_id(env)}; it takes: {', '.join(sorted(takes))}",
            tuple(unknown),
        )


def _env_id(cls: type) -> str:
    """The id ``cls`` is registered under (``btb/Route-v0``), else its class name."""
    import envs

    for env_id in envs.ENTRY_POINTS:
        if _env_class(env_id) is cls:
            return env_id
    return cls.__name__


def sim_config(value: SimConfig | Mapping[str, Any] | None) -> SimConfig:
    """A SimConfig from a SimConfig, a dict of its fields, or None (defaults)."""
    if value is None:
        return SimConfig()
    if isinstance(value, SimConfig):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError.about(
            "sim", f"must be a SimConfig or a dict of its fields, got {type(value).__name__}"
        )
    value = dict(value)
    known = {f.name for f in fields(SimConfig)}
    unknown = sorted(set(value) - known, key=str)
    if unknown:
        raise ConfigError(f"{{sim}}: unknown field(s) {unknown}; known: {sorted(known)}", ("sim",))
    return SimConfig(**value)


class ClusterEnv(gym.Env, ABC):  # type: ignore[type-arg]
    """Base class; see the subclasses' docstrings for the environment specs."""

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    ROUTE_ONLY: tuple[str, ...] = ()
    """Options of ``ClusterEnv`` this env kind refuses away from their defaults (the
    routing envs' alone): not among those a misspelt option's error lists."""

    def __init__(
        self,
        setup: str | ClusterSpec = DEFAULT_SETUP,
        workload: str = DEFAULT_WORKLOAD,
        split: str = "train",
        n_windows: int | None = 4,
        windows: Sequence[Workload] | None = None,
        workload_params: dict[str, Any] | None = None,
        sim: SimConfig | dict[str, Any] | None = None,
        reward_scale: float = 1.0,
        slo_s: float | None = None,
        tail_penalty: float = 0.0,
        copy_cost_per_gb: float = 0.0,
        reward_baseline: str | None = None,
        reward_timing: str = "first_token",
        hints: bool = False,
        spare_features: bool = False,
        time_unit: str = "seconds",
        step_wait: bool = False,
        data_seed: int = PUBLISHED_SEED,
        seed: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be one of {self.metadata['render_modes']} or None, "
                f"got {echoed(render_mode)}"
            )
        # named here: Python's own TypeError (a list is no dict key) would not name them,
        # and gymnasium.make appends every argument, windows and all, to a TypeError
        if not isinstance(setup, (str, ClusterSpec)):
            raise ConfigError.about(
                "setup",
                f"must be a published setup's name or a ClusterSpec, got {type(setup).__name__}",
            )
        if windows is None and not isinstance(workload, str):
            raise ConfigError.about(
                "workload", f"must be a workload's name, got {type(workload).__name__}"
            )
        check_number("reward_scale", reward_scale, positive=True)
        if slo_s is not None:
            check_number("slo_s", slo_s, positive=True)
        check_number("tail_penalty", tail_penalty)
        check_number("copy_cost_per_gb", copy_cost_per_gb)
        if tail_penalty and slo_s is None:
            raise ConfigError.about(
                "tail_penalty", "needs {slo_s} (the TTFT SLO in seconds)", "slo_s"
            )
        if reward_baseline is not None:
            from baselines.policy import is_registered, known_policies

            if not isinstance(reward_baseline, str) or not is_registered(reward_baseline):
                # (is_registered loads a subproc env's worker's plugins too)
                raise ConfigError.about(
                    "reward_baseline",
                    f"must be a registered policy, "
                    f"got {echoed(reward_baseline)}; {known_policies()}",
                )
        if reward_timing not in REWARD_TIMINGS:
            raise ConfigError.about(
                "reward_timing",
                f"must be one of {', '.join(REWARD_TIMINGS)}, got {echoed(reward_timing)}",
            )
        for name, flag in (
            ("hints", hints),
            ("spare_features", spare_features),
            ("step_wait", step_wait),
        ):
            check_flag(name, flag)
        check_time_unit(time_unit)
        if n_windows is not None:
            check_whole_number("n_windows", n_windows, minimum=1)
        check_whole_number("data_seed", data_seed, minimum=0)
        if seed is not None:
            check_whole_number("seed", seed, minimum=0)
            seed = int(seed)  # gymnasium's reset takes Python ints only
        self._kwargs = {
            "setup": setup,
            "workload": workload,
            "split": split,
            "n_windows": n_windows,
            "windows": windows,
            "workload_params": workload_params,
            "sim": sim,
            "reward_scale": reward_scale,
            "slo_s": slo_s,
            "tail_penalty": tail_penalty,
            "copy_cost_per_gb": copy_cost_per_gb,
            "reward_baseline": reward_baseline,
            "reward_timing": reward_timing,
            "hints": hints,
            "spare_features": spare_features,
            "time_unit": time_unit,
            "step_wait": step_wait,
            "data_seed": data_seed,
            "seed": seed,
            "render_mode": render_mode,
        }
        self.cluster = setup if isinstance(setup, ClusterSpec) else setup_cluster(setup)
        self.sim_config = sim_config(sim)
        if time_unit == "reference":
            cluster_time_scale(self.cluster, self.sim_config)  # one speed, else refused
        self.n_nodes = len(self.cluster.nodes)
        if windows is not None:
            if workload_params:
                raise ValueError(
                    "workload_params shapes generated windows; with windows= given there "
                    "are none to shape (pass one or the other)"
                )
            self.windows = self._window_list(windows, "windows")
            self._kwargs["windows"] = list(self.windows)  # an iterator would be spent
        else:
            self.windows = window_pool(workload, split, data_seed, n_windows, workload_params)
            if n_windows is not None and len(self.windows) < n_windows:
                held = len(self.windows)
                warnings.warn(
                    f"n_windows={n_windows}: workload {workload!r} has {held} {split} "
                    f"window{'' if held == 1 else 's'}; the env's pool holds "
                    f"{'it' if held == 1 else 'those'} (n_windows=None takes all)",
                    SettingWarning,
                    stacklevel=caller_stacklevel(),
                )
            for i, w in enumerate(self.windows):
                self._check_window(w, f"window {i} of workload {workload!r} ({split} split)")
        self.reward_scale = float(reward_scale)
        self.slo_s = slo_s
        self.tail_penalty = float(tail_penalty)
        self.copy_cost_per_gb = float(copy_cost_per_gb)
        self.reward_baseline = reward_baseline
        self._reference_ttft_s: np.ndarray | None = None
        self.hints = bool(hints)
        self.spare_features = bool(spare_features)
        self.reward_timing = reward_timing
        self._accrual: WaitAccrual | None = None
        self.render_mode = render_mode
        self._default_seed = seed
        self.sim: Simulator | None = None
        self.request: Request | None = None
        self._gen: Any = None
        self._credited = 0
        self._copies_charged = 0
        self._episode: dict[str, Any] | None = None
        self._pending_ops: list[tuple[Any, ...]] = []
        # the baselines policy_action reset at this episode's first request
        self._reset_policies: list[Any] = []
        self._history: list[tuple[float, list[int]]] = []
        self._first_token_s: list[float] = []
        self.invalid_actions = 0
        # the simulator's rare-GC stretch, held from the first episode to close()
        self._rare_gc: finalize | None = None

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is None and self._default_seed is not None and self._episode is None:
            seed = self._default_seed
        # options are checked before anything changes, so a refused reset leaves
        # the random state (and the episode in progress) as they were
        if options is not None and not isinstance(options, Mapping):
            raise ValueError(
                "reset: options must be a dict (keys 'sim_seed', 'window'), got "
                f"{type(options).__name__} {echoed(options)}"
            )
        options = options or {}
        unknown = sorted(set(options) - {"window", "sim_seed"}, key=str)
        if unknown:
            raise ValueError(f"reset: unknown option(s) {unknown}; known: ['sim_seed', 'window']")
        given_sim_seed = _sim_seed_option(options.get("sim_seed"))
        given = options.get("window")
        if isinstance(given, Workload):
            self._check_window(given, "options['window']")
        elif given is not None and not (
            is_number(given, integer=True) and 0 <= given < len(self.windows)
        ):
            raise ValueError(
                "options['window'] must be a Workload or an index in "
                f"0..{len(self.windows) - 1}, got {echoed(given)}"
            )
        super().reset(seed=seed)
        # drawn even when the window is given, so that reset(seed=s, options={"window": i})
        # replays the episode reset(seed=s) had when it drew window i
        window: int | Workload = int(self.np_random.integers(len(self.windows)))
        if isinstance(given, Workload):
            # a window outside the pool is used for this episode only (never sampled later)
            known = [i for i, w in enumerate(self.windows) if w is given]
            window = known[0] if known else given
        elif given is not None:
            window = int(given)
        sim_seed: SimSeed = int(self.np_random.integers(2**62))
        if given_sim_seed is not None:  # drawn anyway, as the window is: same stream after
            sim_seed = given_sim_seed
        index = window if isinstance(window, int) else -1  # kept if set_windows comes
        self._episode = {"window": window, "index": index, "sim_seed": sim_seed, "actions": []}
        obs = self._begin_episode()
        return obs, self._info()

    def _check_running(self, call: str) -> None:
        """Raise for ``call`` (``step()``, ``action_masks()``) outside an episode: before
        the first ``reset()`` and after an episode ends."""
        if self._gen is None or self._episode is None:
            raise RuntimeError(f"call reset() before {call}, and again after an episode ends")

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._check_running("step()")
        assert self._episode is not None
        frozen = _freeze(action)
        pending = self._pending_ops
        ops = tuple(pending) if pending else ()
        done = self._act(frozen)  # raises on an invalid action before changing anything
        if pending:
            self._pending_ops = []
        self._episode["actions"].append((ops, frozen) if ops else frozen)
        reward = self._credit(final=done)
        if done:
            self._gen = None
            obs = np.zeros(self.observation_space.shape or (), dtype=np.float32)
        else:
            obs = self._observe()
        if self.render_mode is not None:
            self._remember_loads()
        info = self._info()
        if done:  # the episode's TTFTs, whose sum the return is (over reward_scale)
            assert self.sim is not None
            arrivals = np.fromiter((r.arrival_s for r in self.sim.workload.requests), float)
            # a tuple: infos compare with == (an array would not)
            info["ttft_s"] = tuple(
                (np.asarray(self._first_token_s, dtype=float) - arrivals).tolist()
            )
        return obs, reward, done, False, info

    def set_windows(self, windows: Sequence[Workload] | Workload) -> None:
        """Draw later episodes from ``windows`` instead (a curriculum's next stage;
        through a vectorised env, ``vec_env.env_method("set_windows", windows)``):
        Workloads, or one Workload, as the constructor's ``windows``. An episode in
        progress goes on on its own window, and a copy of the env (pickling)
        replays it there."""
        pool = self._window_list(windows, "set_windows: windows")
        if self._episode is not None and not isinstance(self._episode["window"], Workload):
            self._episode["window"] = self.windows[self._episode["window"]]
        self.windows = pool
        self._kwargs = {**self._kwargs, "windows": pool, "workload_params": None}

    def render(self) -> Any:
        if self.render_mode is None:
            gym.logger.warn(
                "render() called without a render_mode; pass render_mode='ansi' or 'rgb_array'"
            )
            return None
        from envs.render import render_ansi, render_rgb

        if self.sim is None:
            raise RuntimeError("call reset() before render()")
        if self.render_mode == "ansi":  # no request arriving once the episode is over
            return render_ansi(self.sim, self.request if self._gen is not None else None)
        return render_rgb(self.sim, self._history)

    def close(self) -> None:
        self._gen = None
        if self._rare_gc is not None:
            self._rare_gc()  # the caller's GC threshold is back once no run is left

    def _remember_loads(self) -> None:
        """One point of the rgb_array timeline (each node's load now)."""
        if self.render_mode is not None and self.sim is not None:
            self._history.append((self.sim.now, self.sim.loads()))

    # ------------------------------------------------------------------ internals
    def _window_list(self, windows: Any, where: str) -> list[Workload]:
        """The pool ``windows`` gives (the constructor's ``windows`` and
        :meth:`set_windows`' argument): one Workload, or an iterable of them, each
        checked (:meth:`_check_window`); refused when empty."""
        if isinstance(windows, Workload):
            windows = [windows]
        elif isinstance(windows, (str, bytes)) or not isinstance(windows, Iterable):
            raise ValueError(
                f"{where} must be a Workload or a list of them, got {type(windows).__name__}"
            )
        pool = list(windows)
        if not pool:
            raise ValueError(f"{where} is empty: give at least one Workload")
        for i, w in enumerate(pool):
            self._check_window(w, f"{where}[{i}]")
        return pool

    def _check_window(self, window: Any, where: str) -> None:
        """A window an episode can run: a Workload with requests, each of which fits
        a node of this cluster (the simulator's own check, made before any episode)."""
        _check_window(window, where)
        try:
            Simulator(self.cluster, window, self.sim_config)
        except SimulationError as error:
            raise ValueError(f"{where} ({window.name!r}): {error}") from None

    def _begin_episode(self) -> np.ndarray:
        assert self._episode is not None
        window = self._episode["window"]
        workload = window if isinstance(window, Workload) else self.windows[window]
        seed = self._episode["sim_seed"]
        if self._rare_gc is None or not self._rare_gc.alive:
            self._rare_gc = rare_gc.hold(self)
        if self.reward_baseline is not None:
            self._reference_ttft_s = self._reference_ttft(workload, seed)
        self.sim = Simulator(self.cluster, workload, self.sim_config, np.random.default_rng(seed))
        # the list the run writes first tokens into: read as it is, so the episode's
        # last step does not build the run's arrays and summary (Records.finalize)
        self._first_token_s = self.sim.records.first_token_s
        if self.reward_timing == "accrued":
            self._accrual = WaitAccrual(workload, self._reference_ttft_s)
        self._credited = 0
        self._copies_charged = 0
        self._history = []
        self._pending_ops = []
        self._reset_policies = []
        self.invalid_actions = 0
        self._gen = self.sim.decisions()
        return self._start()

    def _reference_ttft(self, workload: Workload, seed: Any) -> np.ndarray:
        """Each request's TTFT (s) when ``reward_baseline`` serves this window on
        this simulator seed (the simulator is deterministic: what the agent's own
        run would have given, had it acted as the reference)."""
        from baselines.policy import make_policy

        assert self.reward_baseline is not None
        sim = Simulator(self.cluster, workload, self.sim_config, np.random.default_rng(seed))
        return np.asarray(make_policy(self.reward_baseline).run(sim).ttft_s, dtype=float)

    def _credit(self, final: bool = False) -> float:
        """-(TTFT of every request whose first token came out since the last
        step, less its TTFT under ``reward_baseline`` if set) / reward_scale, plus
        the optional tail and copy penalties. With ``reward_timing="accrued"`` the
        TTFT part is instead the waiting time every request accrued since the last
        step (the same sum over an episode, credited as it is spent; ``final``, the
        episode's last step, also credits the reference's waiting after the run's
        end)."""
        sim = self.sim
        assert sim is not None
        log = sim.first_token_log
        first_token = self._first_token_s
        reference = self._reference_ttft_s if self.reward_baseline is not None else None
        accrual = self._accrual if self.reward_timing == "accrued" else None
        total = 0.0
        tail = 0.0
        slo = self.slo_s
        for k in range(self._credited, len(log)):
            request = log[k]
            ttft = first_token[request.index] - request.arrival_s
            if accrual is not None:
                accrual.served(first_token[request.index])
            else:
                total += ttft
                if reference is not None:
                    total -= reference[request.index]
            if slo is not None and ttft > slo:
                tail += ttft - slo
        self._credited = len(log)
        if accrual is not None:
            total = accrual.since_last(sim.now, final)
        cost = total + self.tail_penalty * tail
        if self.copy_cost_per_gb and len(sim.copies) > self._copies_charged:
            copied = sum(c.bytes for c in sim.copies[self._copies_charged :])
            self._copies_charged = len(sim.copies)
            cost += self.copy_cost_per_gb * copied / 1e9
        return float(-cost / self.reward_scale)

    def _info(self) -> dict[str, Any]:
        sim = self.sim
        assert sim is not None and self._episode is not None
        return {
            "time_s": float(sim.now),
            "window": self._episode["index"],
            "requests_served": len(sim.first_token_log),
            "warm_copies": len(sim.copies),
            "invalid_actions": self.invalid_actions,
        }

    # pickling: rebuild from the constructor arguments and replay the episode
    def __getstate__(self) -> dict[str, Any]:
        kwargs = self._kwargs
        if kwargs["windows"] is None and kwargs["workload"] == TRACE_WORKLOAD:
            # the copy serves the windows read here, not the file read again: a relative
            # path names another file (or none) from another folder, and a file or a
            # hub dataset may have changed since
            kwargs = {**kwargs, "windows": list(self.windows), "workload_params": None}
        return {
            "kwargs": kwargs,
            "episode": self._episode,
            "rng_state": self.np_random.bit_generator.state
            if self._np_random is not None
            else None,
            # policies acting through policy_action draw from sim.rng, which the
            # replay does not repeat: the state is restored after it instead
            "sim_rng_state": self.sim.rng.bit_generator.state if self.sim is not None else None,
            # the copy's simulator is this episode's run: a policy reset on it (its
            # run_id recorded) goes on without another reset
            "sim_run_id": self.sim.run_id if self.sim is not None else None,
            "pending_ops": list(self._pending_ops),
            "np_random_seed": self._np_random_seed,  # what env.np_random_seed says
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state["kwargs"])  # type: ignore[misc]
        episode = state["episode"]
        if episode is None:
            self._restore_rng(state)
            return
        self._episode = {
            "window": episode["window"],
            "index": episode["index"],
            "sim_seed": episode["sim_seed"],
            "actions": [],
        }
        self._begin_episode()
        sim = self.sim
        assert sim is not None
        sim.run_id = state.get("sim_run_id", sim.run_id)
        for entry in episode["actions"]:
            self._episode["actions"].append(entry)
            action = entry
            if isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], tuple):
                ops, action = entry  # the policy's own simulator calls, then the action
                _replay(sim, ops)
            done = self._act(action)
            self._remember_loads()
            if done:
                self._gen = None
                break
            self._observe()  # keeps the encoder's traffic history as it was
        self._credit(final=self._gen is None)
        pending = state.get("pending_ops", [])
        _replay(sim, pending)  # made after the last step
        self._pending_ops = list(pending)
        if state.get("sim_rng_state") is not None:
            sim.rng.bit_generator.state = state["sim_rng_state"]
        self._restore_rng(state)

    def _restore_rng(self, state: dict[str, Any]) -> None:
        """The env's own generator and its seed as they were when pickled."""
        if state["rng_state"] is not None:
            self.np_random.bit_generator.state = state["rng_state"]
            self._np_random_seed = state.get("np_random_seed", self._np_random_seed)

    # ------------------------------------------------------------------ subclass hooks
    @abstractmethod
    def _start(self) -> np.ndarray:
        """Advance to the first decision point; return the first observation."""

    @abstractmethod
    def _act(self, action: Any) -> bool:
        """Carry out ``action`` and advance; True when the episode has ended."""

    @abstractmethod
    def _observe(self) -> np.ndarray:
        """The observation at the current decision point (a fresh array)."""


REWARD_TIMINGS = ("first_token", "accrued")

SimSeed = int | tuple[int, ...] | np.random.SeedSequence
"""An episode's simulator seed (``options['sim_seed']``, :func:`_sim_seed_option`)."""

REWARD_ARGS = (
    "reward_scale",
    "slo_s",
    "tail_penalty",
    "copy_cost_per_gb",
    "reward_baseline",
    "reward_timing",
)
"""The constructor's arguments that define the reward (a resumed run keeps them)."""


class WaitAccrual:
    """Waiting time accrued by a window's requests up to a time ``t``, for the
    ``accrued`` reward timing: ``W(t) = sum over requests arrived by t of
    (min(t, first token) - arrival)``, which reaches the window's TTFT sum once
    every request is served. With reference TTFTs (``reward_baseline``) the
    reference run's own ``W(t)`` is subtracted. Each ``W`` is
    ``t x arrived - sum of arrivals - (t x served - sum of first-token times)``,
    kept with sorted arrays and running sums (O(log n) a step). The reference run
    may serve its last request after the agent's run has ended: the last call
    (``final``) counts up to the later of the two ends."""

    def __init__(self, workload: Workload, reference_ttft_s: np.ndarray | None) -> None:
        arrivals = np.array([r.arrival_s for r in workload.requests], dtype=float)
        self._arrival_s = arrivals  # in arrival order (Workload sorts them)
        self._arrival_sums = np.concatenate([[0.0], np.cumsum(arrivals)])
        self._reference: tuple[np.ndarray, np.ndarray] | None = None
        if reference_ttft_s is not None:
            done = np.sort(arrivals + reference_ttft_s)
            self._reference = (done, np.concatenate([[0.0], np.cumsum(done)]))
        self._served = 0
        self._served_sum_s = 0.0
        self._last = 0.0

    def served(self, first_token_s: float) -> None:
        """A request's first token came out at ``first_token_s`` (<= now)."""
        self._served += 1
        self._served_sum_s += first_token_s

    def _waited(self, t: float) -> float:
        arrived = int(np.searchsorted(self._arrival_s, t, side="right"))
        waited = t * arrived - self._arrival_sums[arrived]
        waited -= t * self._served - self._served_sum_s
        if self._reference is not None:
            done, sums = self._reference
            finished = int(np.searchsorted(done, t, side="right"))
            waited -= t * arrived - self._arrival_sums[arrived] - (t * finished - sums[finished])
        return float(waited)

    def since_last(self, t: float, final: bool = False) -> float:
        """Waiting accrued (less the reference's) since the previous call; with
        ``final`` (every request served), all that is left of it, the reference's
        waiting after ``t`` included."""
        if final and self._reference is not None:
            t = max(t, float(self._reference[0][-1]))  # its last first token
        now = self._waited(t)
        delta, self._last = now - self._last, now
        return delta


def _replay(sim: Simulator, ops: Sequence[tuple[Any, ...]]) -> None:
    """Repeat journalled simulator calls (``Simulator.journal``) on ``sim``."""
    for name, *args in ops:
        getattr(sim, name)(*args)


def _freeze(action: Any) -> Any:
    """An immutable copy of ``action`` for the replay history: an int, or a
    tuple of ints. Raises ValueError for anything that is not whole numbers."""
    if type(action) is int:
        return action
    if isinstance(action, np.integer):
        return int(action)
    if type(action) is np.ndarray and action.ndim == 1 and action.dtype.kind in "iu":
        return tuple(action.tolist())  # what the general path gives, in one step
    a = np.asarray(action)
    if a.ndim > 1:
        raise ValueError(f"action must be a number or a flat array, got shape {a.shape}")
    if a.dtype.kind not in "iu":
        whole = a.dtype.kind == "f" and bool(np.all(np.isfinite(a)) and np.all(a == np.round(a)))
        if not whole:
            raise ValueError(f"action must be whole numbers, got {_one_line(action)}")
        a = a.astype(np.int64)
    if a.ndim == 0:
        return int(a)
    return tuple(a.ravel().tolist())


def _one_line(value: Any) -> str:
    """``value``'s repr on one line: numpy wraps a long array's over several (an
    action of 18 entries, a RouteWarm-v0 action on 16 nodes), and shows at most 16
    entries of it here (the first and last 3 then); a list or a torch tensor of more
    than 16, or one whose repr spans lines, is shown so too, after its type's name."""
    is_array = isinstance(value, np.ndarray)
    a = value if is_array else np.asarray(value)
    if not is_array:
        text = repr(value)
        if a.size <= 16 and "\n" not in text:
            return text
    shown = np.array2string(a, separator=", ", max_line_width=sys.maxsize, threshold=16)
    if is_array:
        return f"array({shown}, dtype={a.dtype})"
    return f"{type(value).__name__} {shown}"


def _sim_seed_option(value: Any) -> SimSeed | None:
    """``options['sim_seed']``, what ``np.random.default_rng`` takes of a seed: None;
    a whole number >= 0; a non-empty list, tuple or 1-D integer numpy array of them
    (e.g. the comparison run's ``[seed, window position]``), returned as an int or a
    tuple of ints; or a ``np.random.SeedSequence``, returned as a fresh copy (its
    entropy, spawn key and pool size: the same stream however often the episode is
    replayed, whatever the caller later spawns from its own)."""
    if value is None:
        return None
    if isinstance(value, np.random.SeedSequence):
        entropy = _seed_words(value.entropy)
        assert entropy is not None  # SeedSequence has checked it
        return np.random.SeedSequence(
            entropy, spawn_key=tuple(value.spawn_key), pool_size=value.pool_size
        )
    words = _seed_words(value)
    if words is None:
        raise ValueError(
            "options['sim_seed'] must be a whole number >= 0, a non-empty list, tuple or "
            f"1-D integer array of them, or a np.random.SeedSequence, got {echoed(value)}"
        )
    return words


def _seed_words(value: Any) -> int | tuple[int, ...] | None:
    """``value`` as an int or a tuple of ints when it is a whole number >= 0 or a
    non-empty list, tuple or 1-D integer array of them; else None."""
    if isinstance(value, np.ndarray):
        if value.ndim > 1 or value.dtype.kind not in "iu":
            return None
        value = value.tolist() if value.ndim == 1 else value.item()
    many = isinstance(value, (list, tuple))
    entries = value if many else [value]
    if not entries or not all(is_number(v, integer=True) and v >= 0 for v in entries):
        return None
    return tuple(int(v) for v in entries) if many else int(value)


def _check_window(window: Any, where: str) -> None:
    if not isinstance(window, Workload):
        raise ValueError(f"{where} must be a Workload, got {type(window).__name__}")
    if len(window.requests) == 0:
        raise ValueError(
            f"{where} ({window.name!r}) has no requests: an episode needs at least one"
        )
