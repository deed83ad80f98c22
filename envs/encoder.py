"""The one encoder that turns the simulator's state at a decision point into an
observation. The Gymnasium environments and the agent adapter both use it, so
what an agent sees in training and in evaluation cannot drift apart.

Layout of the flat ``float32`` vector (every entry in [0, 1]):

* ``n_nodes`` rows of :data:`NODE_FEATURES`, node-major (so a set-based
  network can reshape it to ``(n_nodes, len(NODE_FEATURES))``), then
* :data:`REQUEST_FEATURES` for the arriving request and its traffic, then
* with ``hints=True`` only, :data:`HINT_FEATURES`: what the trace says of the
  request beyond its prompt (its source and job kind, its group).

Unbounded quantities are squashed with ``x / (x + scale)``: 0 stays 0, ``scale``
maps to 0.5, and nothing reaches 1.

The node rows (the forecast of every node at every decision, most of an env
step) have a compiled twin, ``envs._native.observation`` (Cython, built by
``pip install -e .`` when a C compiler is there), that writes the same floats to
the bit. :data:`NATIVE` is the one place that chooses: the compiled rows when
they import, the Python below (the reference) when ``BTB_GYM_PURE_PYTHON`` is set
(to anything but ``0`` or nothing), or with one line on stderr when the compiled
module is missing. :data:`ENCODER_CORE` says which runs.
"""

from __future__ import annotations

import functools
import importlib
import math
import os
import sys
import zlib
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any, NamedTuple

import numpy as np

from envs.sim.errors import ConfigError, echoed
from envs.sim.forecast import (
    HitMemo,
    estimates_with_hits,
    first_token_estimates,
    node_backlog,
    prefix_key,
    prefix_of,
)
from envs.sim.native import PURE_PYTHON_ENV
from envs.sim.node import IDLE
from envs.sim.request import Request
from envs.sim.simulator import Simulator
from envs.workloads.hint_labels import SHIPPED_CLASSES

NODE_FEATURES = (
    "load",  # running + waiting requests, squashed at 16
    "wait",  # estimated queue wait, squashed at 1 s
    "kv_used",  # reserved KV / budget
    "copies_in",  # warm copies in flight to the node, squashed at 1
    "hit",  # this request's leading blocks in the node's HBM / its blocks
    "prefix_in_flight",  # a copy of this request's prefix is on its way here
    "busy",  # the node is working right now
    "backlog",  # seconds of work ahead (current item + queued prefills), log-scaled
    "first_token",  # expected seconds to this request's first token here, log-scaled
    "first_token_gap",  # first_token here minus the best node's, log-scaled (0: best)
)
_BACKLOG = NODE_FEATURES.index("backlog")
_FIRST_TOKEN = NODE_FEATURES.index("first_token")
REQUEST_FEATURES = (
    "prefix_tokens",  # log-scaled prompt length, 1 at 262,144 tokens
    "same_1s",  # arrivals with this request's prefix in the last 1 s, squashed at 4
    "same_10s",  # ... last 10 s, squashed at 16
    "same_60s",  # ... last 60 s, squashed at 64
    "age",  # seconds since this prefix was first seen, squashed at 10 s
    "holders",  # fraction of nodes holding the prefix in HBM
)
OBSERVATION_OPTIONS = ("hints", "spare_features")
"""The env options that append observation features (in this order), each a
keyword of :class:`ObservationEncoder`."""
HINT_CLASSES = 8
"""Columns of the (source, job kind) class in :data:`HINT_FEATURES` (:func:`hint_class`):
one for each pair a shipped generator writes (``SHIPPED_CLASSES``), then
:data:`HASHED_HINT_CLASSES` that any other pair hashes into."""
HASHED_HINT_CLASSES = HINT_CLASSES - len(SHIPPED_CLASSES)
"""The columns left to the pairs of other traces (3 of 8: five are the shipped pairs')."""
assert HASHED_HINT_CLASSES >= 1, "HINT_CLASSES must leave other traces a column"
_SHIPPED_COLUMNS = {pair: column for column, pair in enumerate(SHIPPED_CLASSES)}
HINT_FEATURES = (
    *(f"hint_class_{i}" for i in range(HINT_CLASSES)),  # one-hot of the class
    "group_seen",  # earlier requests of the request's group this episode, squashed at 16
)
SPARE_FEATURES = (
    "short_rate",  # short arrivals (hold under 0.25 s) in the last 5 s, per second, squashed at 4
    "hold",  # seconds this request holds its soonest node (first token - backlog there), log-scaled
    "spare_pressure",  # short_rate x blocked**2 / 2: short requests' wait if it stays, log-scaled
)
SHORT_HOLD_S = 0.25
"""A request is *short* when it holds its soonest node for less than this (s)."""
SHORT_WINDOW_S = 5.0
"""The span of ``short_rate`` (s)."""
WINDOWS_S = (1.0, 10.0, 60.0)
_MAX_TOKENS_LOG = math.log1p(262_144)
_TIME_UNIT_S = 0.01
_MAX_TIME_LOG = math.log1p(1000.0 / _TIME_UNIT_S)


def log_seconds(seconds: float, _log1p: Callable[[float], float] = math.log1p) -> float:
    """Seconds on a log scale in [0, 1]: 0 at 0, 1 at 1,000 s (10 ms resolution)."""
    # the same floats as min(log1p(max(s, 0) / unit) / top, 1), without two calls
    scaled = _log1p((0.0 if seconds < 0.0 else seconds) / _TIME_UNIT_S) / _MAX_TIME_LOG
    return 1.0 if scaled > 1.0 else scaled


def from_log_seconds(value: float) -> float:
    """The seconds :func:`log_seconds` mapped to ``value`` (1,000 s for 1)."""
    return math.expm1(value * _MAX_TIME_LOG) * _TIME_UNIT_S


def hold_s(obs: np.ndarray, node: int) -> float:
    """Seconds the arriving request would hold ``node`` (its ``first_token`` less its
    ``backlog`` there), read from a route observation's node rows."""
    row = node * len(NODE_FEATURES)
    return from_log_seconds(float(obs[row + _FIRST_TOKEN])) - from_log_seconds(
        float(obs[row + _BACKLOG])
    )


def max_backlog_s(obs: np.ndarray, n_nodes: int) -> float:
    """The most seconds of work ahead on any node (its ``backlog``), read from a route
    observation's node rows."""
    width = len(NODE_FEATURES)
    return from_log_seconds(float(np.max(obs[_BACKLOG : n_nodes * width : width])))


class ShortArrivals:
    """Arrival times of the short requests of the last ``window_s`` seconds."""

    __slots__ = ("_times", "window_s")

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._times: deque[float] = deque()

    def reset(self) -> None:
        self._times.clear()

    def add(self, now: float) -> None:
        self._times.append(now)

    def rate_per_s(self, now: float) -> float:
        """Short arrivals per second over the window ending at ``now`` (inclusive)."""
        times = self._times
        start = now - self.window_s
        while times and times[0] < start:
            times.popleft()
        return len(times) / self.window_s


class SpareTracker:
    """The spare-node features (:data:`SPARE_FEATURES`) of an episode's arrivals:
    what the causal teacher's spare-node rule (``baselines.spare_node``) weighs,
    read from the node rows already written (so the compiled and the Python rows
    give the same floats). The soonest node is the one with the earliest
    ``first_token`` (ties by ``load``, then index); ``blocked`` is the sooner of
    its ``first_token`` and the other nodes' ``backlog``."""

    __slots__ = ("_shorts",)

    def __init__(self) -> None:
        self._shorts = ShortArrivals(SHORT_WINDOW_S)

    def reset(self) -> None:
        self._shorts.reset()

    def observe(
        self, rows: np.ndarray, n_nodes: int, now: float, up: list[int] | None = None
    ) -> list[float]:
        """The spare-node features of the request whose node rows are ``rows``
        (the first ``n_nodes * len(NODE_FEATURES)`` entries of the observation);
        counts it among the short arrivals when it is short. ``up``: the nodes
        that are up (None: all); a node down is neither the soonest nor one of the
        others (its rows look idle), as the spare-node rule skips it."""
        width = len(NODE_FEATURES)
        firsts = rows[_FIRST_TOKEN : n_nodes * width : width].tolist()
        backlogs = rows[_BACKLOG : n_nodes * width : width].tolist()
        loads = rows[0 : n_nodes * width : width].tolist()
        nodes = list(range(n_nodes)) if up is None else up
        if not nodes:  # every node down: nothing to weigh
            return [0.0, 0.0, 0.0]
        choice = min(nodes, key=lambda i: (firsts[i], loads[i], i))
        first = from_log_seconds(firsts[choice])
        hold = first - from_log_seconds(backlogs[choice])
        rate = self._shorts.rate_per_s(now)
        if hold < SHORT_HOLD_S:
            self._shorts.add(now)
        others = [from_log_seconds(backlogs[i]) for i in nodes if i != choice]
        blocked = min([first, *others])
        pressure = rate * blocked * blocked / 2.0
        return [rate / (rate + 4.0), log_seconds(hold), log_seconds(pressure)]


class TrafficTracker:
    """Arrival times per prefix key (the chained id of a request's prefix)."""

    __slots__ = ("_first", "_times")

    def __init__(self) -> None:
        self._times: dict[int, list[float]] = {}
        self._first: dict[int, float] = {}

    def reset(self) -> None:
        self._times.clear()
        self._first.clear()

    def observe(self, key: int, now: float) -> tuple[int, int, int, float]:
        """Record an arrival; return arrivals in the last 1 / 10 / 60 s (this
        one included) and seconds since the key was first seen."""
        times = self._times.get(key)
        if times is None:
            times = self._times[key] = []
            self._first[key] = now
        times.append(now)
        if len(times) > 64 and times[0] < now - WINDOWS_S[-1]:
            del times[: bisect_left(times, now - WINDOWS_S[-1])]
        n = len(times)
        counts = (
            n - bisect_left(times, now - WINDOWS_S[0]),
            n - bisect_left(times, now - WINDOWS_S[1]),
            n - bisect_left(times, now - WINDOWS_S[2]),
        )
        return counts[0], counts[1], counts[2], now - self._first[key]


def hint_class(request: Request) -> int:
    """The column of a request's (source, job kind) class, 0..HINT_CLASSES - 1, or -1
    when the trace gives neither. A pair a shipped generator writes has its own
    column, its index in ``envs.workloads.hint_labels.SHIPPED_CLASSES`` (0 for
    synthetic bursts, 1 for decoys, ...); any other pair hashes into the columns
    after those: ``len(SHIPPED_CLASSES) + crc32("<source>/<job kind>") %
    HASHED_HINT_CLASSES`` (a stable hash, the same in every process)."""
    source, kind = request.source, request.job_kind
    if not source and not kind:
        return -1
    column = _SHIPPED_COLUMNS.get((source, kind))
    if column is not None:
        return column
    hashed = zlib.crc32(f"{source}/{kind}".encode()) % HASHED_HINT_CLASSES
    return len(SHIPPED_CLASSES) + hashed


class HintTracker:
    """The request-hint features (:data:`HINT_FEATURES`) of an episode's arrivals."""

    __slots__ = ("_groups",)

    def __init__(self) -> None:
        self._groups: dict[str, int] = {}

    def reset(self) -> None:
        self._groups.clear()

    def observe(self, request: Request) -> list[float]:
        """The hint features of ``request``; records it in its group."""
        values = [0.0] * len(HINT_FEATURES)
        bucket = hint_class(request)
        if bucket >= 0:
            values[bucket] = 1.0
        group = request.group_id
        if group:
            seen = self._groups.get(group, 0)
            self._groups[group] = seen + 1
            values[-1] = seen / (seen + 16.0)
        return values


NOTICE = "btb-gym: compiled observation encoder unusable ({}); using the Python one"
"""The line on stderr when the compiled rows do not import (the reason in the braces)."""
ARRIVALS_NOTICE = (
    "btb-gym: compiled per-arrival env work unusable ({}); using the Python one "
    "(the compiled observation rows still run)"
)
"""The line on stderr when only the compiled per-arrival work does not import."""


def _import_native() -> Any:
    return importlib.import_module("envs._native.observation")


def _choose_native() -> tuple[Any, str]:
    """(the compiled module ``envs._native.observation`` or None for the reference,
    ENCODER_CORE)."""
    if os.environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return None, "python"
    try:
        module = _import_native()
    except ImportError as error:  # not built (no compiler), or built for another Python
        print(NOTICE.format(error), file=sys.stderr)
        return None, "python"
    return module, "compiled"


NATIVE, ENCODER_CORE = _choose_native()


def observation_size(n_nodes: int, hints: bool = False, spare_features: bool = False) -> int:
    """Entries of a route env's observation (:class:`ObservationEncoder`) on ``n_nodes``
    nodes with these options."""
    size = n_nodes * len(NODE_FEATURES) + len(REQUEST_FEATURES)
    if hints:
        size += len(HINT_FEATURES)
    if spare_features:
        size += len(SPARE_FEATURES)
    return size


def epoch_observation_size(n_nodes: int) -> int:
    """Entries of ``btb/Thresholds-v0``'s observation (:class:`EpochEncoder`) on
    ``n_nodes`` nodes."""
    return n_nodes * len(EPOCH_NODE_FEATURES) + len(EPOCH_FEATURES)


def observation_options(env_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The encoder's keyword arguments in an env's (or an agent's) arguments: the
    :data:`OBSERVATION_OPTIONS`, ``time_unit`` and ``step_wait``."""
    options: dict[str, Any] = {
        name: bool(env_kwargs.get(name, False)) for name in OBSERVATION_OPTIONS
    }
    options["time_unit"] = env_kwargs.get("time_unit", "seconds")
    options["step_wait"] = bool(env_kwargs.get("step_wait", False))
    return options


TIME_UNITS = ("seconds", "reference")
"""How the observation counts durations (``time_unit``): ``seconds`` as they are;
``reference`` as the seconds the same prefill work takes on
:data:`REFERENCE_SETUP`'s nodes (each duration times the reference's prefill
seconds per token over the cluster's), so an agent trained on one model reads
another's load in the units it learned."""
REFERENCE_SETUP = "70b_h100x4"
"""The nodes whose seconds ``time_unit="reference"`` counts in (llama-3.3-70b on
4xH100: the setup the shipped route-and-warm agents were trained on; there the
factor is exactly 1)."""


def check_time_unit(value: Any) -> str:
    """``time_unit`` as given, or a ValueError naming the field."""
    if not isinstance(value, str) or value not in TIME_UNITS:
        raise ConfigError.about(
            "time_unit", f"must be one of {', '.join(TIME_UNITS)}, got {echoed(value)}"
        )
    return value


def reference_time_scale(nodes: Sequence[Any]) -> float:
    """The factor ``time_unit="reference"`` multiplies durations by on a cluster of
    ``nodes`` (a simulator's, each with its ``costs``): :data:`REFERENCE_SETUP`'s
    prefill seconds per token over theirs (a ValueError when its nodes prefill at
    different speeds)."""
    return _scale_for({node.costs.prefill_s_per_token for node in nodes})


def cluster_time_scale(cluster: Any, config: Any) -> float:
    """:func:`reference_time_scale` of the nodes a simulator builds from ``cluster``
    (a ``ClusterSpec``) under ``config`` (a ``SimConfig``), before any is built: so
    an env refuses a cluster it cannot count in reference seconds when it is made."""
    from envs.sim.timing import NodeCosts

    return _scale_for(
        {
            NodeCosts.under(config, spec, cluster.model, f"cluster.nodes[{i}]").prefill_s_per_token
            for i, spec in enumerate(cluster.nodes)
        }
    )


def _scale_for(speeds: set[float]) -> float:
    if len(speeds) != 1:
        raise ConfigError(
            "{time_unit}=reference needs nodes that prefill at one speed; this cluster's "
            f"take {', '.join(f'{s:.3g}' for s in sorted(speeds))} s a token",
            ("time_unit",),
        )
    return _reference_per_token() / speeds.pop()


@functools.cache
def _reference_per_token() -> float:
    """:data:`REFERENCE_SETUP`'s prefill seconds per token (at the default ``mfu``)."""
    from envs.sim import setup_cluster
    from envs.sim.timing import NodeCosts

    reference = setup_cluster(REFERENCE_SETUP)
    return NodeCosts(reference.nodes[0], reference.model).prefill_s_per_token


class ModulesByName:
    """A mix-in for objects that keep a compiled module in an attribute (the twin
    they run): a module does not pickle, so a pickled or copied object stores the
    module's name and imports it again (None where it is not built there: the
    object then runs the Python reference, the same numbers to the bit)."""

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key, value in state.items():
            if isinstance(value, ModuleType):
                state[key] = _ModuleName(value.__name__)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            if isinstance(value, _ModuleName):
                try:
                    state[key] = importlib.import_module(value.name)
                except ImportError:
                    state[key] = None
        self.__dict__.update(state)


class _ModuleName(NamedTuple):
    name: str


class ObservationEncoder(ModulesByName):
    """Builds the observation for a decision point into a preallocated buffer.

    Call :meth:`reset` at the start of every episode and :meth:`encode` exactly
    once per decision point (it records the arrival in the traffic tracker).
    ``hints=True`` appends :data:`HINT_FEATURES`, then ``spare_features=True``
    :data:`SPARE_FEATURES` (both off by default: the layout is then the one the
    first shipped agents were trained on). ``time_unit`` (:data:`TIME_UNITS`)
    is how the node rows count durations. ``step_wait=True`` adds to each node's
    ``backlog`` and ``first_token`` the rest of the decode step it is running
    (:func:`envs.sim.forecast.decode_step_left_s`), which the cost model leaves
    out; the layout stays the same. ``compiled`` picks the node
    rows' implementation: None (default) the process's choice (:data:`NATIVE`),
    True the compiled rows (a ValueError if they cannot be imported), False the
    Python reference; both give the same observation to the bit.
    """

    def __init__(
        self,
        n_nodes: int,
        hints: bool = False,
        compiled: bool | None = None,
        spare_features: bool = False,
        time_unit: str = "seconds",
        step_wait: bool = False,
    ) -> None:
        if n_nodes < 1:
            raise ValueError(f"n_nodes must be >= 1, got {echoed(n_nodes)}")
        self.n_nodes = n_nodes
        self.time_unit = check_time_unit(time_unit)
        self._rescale = time_unit != "seconds"
        self._scale = 1.0  # durations' factor (reference_time_scale of the nodes below)
        self._scaled_nodes: Any = None
        self.step_wait = bool(step_wait)
        self.size = observation_size(n_nodes, hints, spare_features)
        self.hints = HintTracker() if hints else None
        self.spare = SpareTracker() if spare_features else None
        self.buffer = np.zeros(self.size, dtype=np.float32)
        self.tracker = TrafficTracker()
        self._hits: HitMemo = {}
        self._native = NATIVE if compiled is None else None
        if compiled:
            try:
                self._native = NATIVE or _import_native()
            except ImportError as error:
                raise ValueError(
                    f"compiled=True, but the compiled rows do not import ({error})"
                ) from None
        self._node_size = n_nodes * len(NODE_FEATURES)
        self._arrivals = ARRIVALS if self._native is not None else None

    def reset(self) -> None:
        self.tracker.reset()
        if self.hints is not None:
            self.hints.reset()
        if self.spare is not None:
            self.spare.reset()
        self._hits.clear()
        self.buffer[:] = 0.0

    def encode(self, sim: Simulator, request: Request) -> np.ndarray:
        """The observation for ``request`` arriving now (a view of the buffer;
        copy it to keep it)."""
        out = self.buffer
        native = self._native
        if self._rescale and sim.nodes is not self._scaled_nodes:
            self._scale = reference_time_scale(sim.nodes)
            self._scaled_nodes = sim.nodes
        if native is None:
            holders = self._node_rows(sim, request)
        else:
            holders = native.node_rows(sim, request, self._hits, out, self._scale, self.step_wait)
        arrivals = self._arrivals
        if arrivals is not None and self.hints is None and self.spare is None:
            # the request's entries, compiled
            arrivals.request_entries(
                self.tracker, request, sim.now, holders, self.n_nodes, out, self._node_size
            )
            return out
        if arrivals is None:
            same_1, same_10, same_60, age = self.tracker.observe(prefix_key(request), sim.now)
        else:  # the same counts, compiled
            same_1, same_10, same_60, age = arrivals.observe(
                self.tracker, prefix_key(request), sim.now
            )
        values = [
            min(math.log1p(request.input_tokens) / _MAX_TOKENS_LOG, 1.0),
            same_1 / (same_1 + 4.0),
            same_10 / (same_10 + 16.0),
            same_60 / (same_60 + 64.0),
            age / (age + 10.0),
            holders / self.n_nodes,
        ]
        if self.hints is not None:
            values += self.hints.observe(request)
        if self.spare is not None:
            up = [node.index for node in sim.nodes if not node.down]
            values += self.spare.observe(
                out, self.n_nodes, sim.now, None if len(up) == self.n_nodes else up
            )
        if native is None:
            out[self._node_size :] = values
        else:
            native.put(out, self._node_size, values)
        return out

    def _node_rows(self, sim: Simulator, request: Request) -> int:
        """The reference node rows: :data:`NODE_FEATURES` of every node into the
        buffer; returns how many nodes hold the request's prefix in HBM."""
        now = sim.now
        n_blocks = len(request.blocks)
        key = prefix_key(request)
        depth = n_blocks - 1 or 1
        holders = 0
        estimates = estimates_with_hits(sim, request, self._hits, self.step_wait)
        best = min([e[1] for e in estimates])
        scale = self._scale  # durations in the time unit's seconds (1.0: as they are)
        values: list[float] = []
        for node, (backlog, first_token, hit) in zip(sim.nodes, estimates):
            load = node.load
            wait = node.estimated_wait_s(now) * scale
            inflight = node.inflight
            copies = len(inflight)
            if hit >= depth:
                holders += 1
            values += (
                load / (load + 16.0),
                wait / (wait + 1.0),
                node.reserved_tokens / node.budget_tokens,
                copies / (copies + 1.0),
                hit / n_blocks,
                1.0 if key in inflight else 0.0,
                0.0 if node.work == IDLE else 1.0,
                log_seconds(backlog * scale),
                log_seconds(first_token * scale),
                log_seconds((first_token - best if first_token != best else 0.0) * scale),
            )
        self.buffer[: self._node_size] = values
        return holders


EPOCH_NODE_FEATURES = (
    "load",  # running + waiting requests, squashed at 16
    "wait",  # estimated queue wait, squashed at 1 s
    "kv_used",  # reserved KV / budget
    "copies_in",  # warm copies in flight to the node, squashed at 1
    "busy",  # the node is working right now
    "holds_top",  # the epoch's busiest prefix is resident in the node's HBM
    "top_coming",  # a copy of the busiest prefix is on its way to the node
)
EPOCH_FEATURES = (
    "arrivals",  # arrivals in the last epoch, squashed at 16
    "arrivals_10s",  # arrivals in the last 10 s, squashed at 64
    "repeat_fraction",  # share of the epoch's arrivals whose prefix was seen in the 10 s before
    "top_prefix_share",  # the busiest prefix's share of the epoch's arrivals
    "same_1s",  # most arrivals of one prefix within 1 s seen in the epoch, squashed at 8
    "same_10s",  # ... within 10 s, squashed at 32
    "top_prefix_tokens",  # the busiest prefix's prompt length, log-scaled (1 at 262,144 tokens)
    "hbm_hit",  # mean fraction of prompt blocks in HBM at the node they were routed to
    "copies",  # warm copies issued in the last epoch, squashed at 4
    "copies_in_flight",  # warm copies in flight in the cluster, squashed at 4
    "queued",  # requests waiting in the cluster's queues, squashed at 64
    "gap",  # seconds since the previous epoch ended, squashed at 10 s
    "x",  # the settings in force: X / max X
    "z",  # log-scaled Z
    "m",  # M / n_nodes
    "min_prefix",  # log-scaled minimum prefix, in 256-token units
    "pending",  # the routing rule: 0 resident (published), 1 pending
    "top_holders",  # nodes holding the busiest prefix in HBM / nodes
)
RECENT_S = 10.0
"""The span of ``arrivals_10s``."""


class EpochStats:
    """Traffic seen during one decision epoch of the threshold controller."""

    __slots__ = (
        "arrivals",
        "copies",
        "hit_sum",
        "max_same_1s",
        "max_same_10s",
        "per_key",
        "repeats",
        "top",
        "top_count",
    )

    def __init__(self) -> None:
        self.arrivals = 0
        self.repeats = 0
        self.hit_sum = 0.0
        self.copies = 0
        self.per_key: dict[int, int] = {}
        self.max_same_1s = 0
        self.max_same_10s = 0
        self.top: Request | None = None  # a request of the busiest prefix
        self.top_count = 0


class EpochEncoder:
    """Observation of ``btb/Thresholds-v0`` at an epoch boundary (all in [0, 1]).

    ``compiled`` (default True) writes it with the compiled twin where that is
    built (``envs._native.arrivals``, the same floats to the bit); False runs the
    Python below (the reference)."""

    def __init__(self, n_nodes: int, compiled: bool = True) -> None:
        self.n_nodes = n_nodes
        self.compiled = compiled
        self.size = epoch_observation_size(n_nodes)
        self.buffer = np.zeros(self.size, dtype=np.float32)
        self.tracker = TrafficTracker()
        self._recent: deque[float] = deque()
        self.key_blocks = 0
        """How a request's prefix is keyed (as the controller's BTB keys it): 0, its
        prompt but the last block (:func:`prefix_of`); k > 0, its first k blocks
        when it has that many, else as with 0 (the threshold env's ``y_tokens``)."""

    def reset(self) -> None:
        self.tracker.reset()
        self._recent.clear()
        self.buffer[:] = 0.0

    def keyed(self, request: Request) -> bool:
        """Whether the request's prefix is its first :attr:`key_blocks` blocks (else
        its prompt but the last block)."""
        k = self.key_blocks
        return bool(k) and len(request.blocks) >= k

    def prefix(self, request: Request) -> tuple[int, ...]:
        """The request's prefix as this encoder keys it (:meth:`keyed`)."""
        return request.blocks[: self.key_blocks] if self.keyed(request) else prefix_of(request)

    def record(self, stats: EpochStats, request: Request, now: float) -> None:
        """Count one arrival of the epoch (before it is routed)."""
        keyed = self.keyed(request)
        key = request.blocks[self.key_blocks - 1] if keyed else prefix_key(request)
        stats.arrivals += 1
        count = stats.per_key.get(key, 0) + 1
        stats.per_key[key] = count
        if count > stats.top_count:
            stats.top_count, stats.top = count, request
        same_1, same_10, _, _ = self.tracker.observe(key, now)
        if same_10 > 1:
            stats.repeats += 1
        if same_1 > stats.max_same_1s:
            stats.max_same_1s = same_1
        if same_10 > stats.max_same_10s:
            stats.max_same_10s = same_10
        self._recent.append(now)

    def encode(
        self,
        sim: Simulator,
        stats: EpochStats,
        settings: tuple[float, float, float, float, float],
        gap_s: float,
    ) -> np.ndarray:
        """``settings``: the five settings in force, each already scaled to [0, 1];
        ``gap_s``: seconds since the previous epoch ended."""
        if self.compiled and ARRIVALS is not None:
            encoded: np.ndarray = ARRIVALS.encode(self, sim, stats, settings, gap_s)
            return encoded
        now = sim.now
        recent = self._recent
        while recent and recent[0] < now - RECENT_S:
            recent.popleft()
        top = stats.top
        prefix = self.prefix(top) if top is not None else ()
        key = prefix[-1] if prefix else None
        depth = len(prefix)
        out = self.buffer
        i = 0
        holders = 0
        in_flight = 0
        queued = 0
        for node in sim.nodes:
            load = node.running + len(node.queue)
            wait = node.estimated_wait_s(now)
            inflight = len(node.inflight)
            in_flight += inflight
            queued += len(node.queue)
            holds = bool(depth) and node.view.hbm_match(prefix) >= depth
            holders += holds
            out[i] = load / (load + 16.0)
            out[i + 1] = wait / (wait + 1.0)
            out[i + 2] = node.reserved_tokens / node.budget_tokens
            out[i + 3] = inflight / (inflight + 1.0)
            out[i + 4] = 0.0 if node.work == IDLE else 1.0
            out[i + 5] = 1.0 if holds else 0.0
            out[i + 6] = 1.0 if key is not None and key in node.inflight else 0.0
            i += len(EPOCH_NODE_FEATURES)
        n = stats.arrivals
        n_10 = len(recent)
        same_1, same_10 = stats.max_same_1s, stats.max_same_10s
        gap = max(gap_s, 0.0)
        out[i] = n / (n + 16.0)
        out[i + 1] = n_10 / (n_10 + 64.0)
        out[i + 2] = stats.repeats / n if n else 0.0
        out[i + 3] = stats.top_count / n if n else 0.0
        out[i + 4] = same_1 / (same_1 + 8.0)
        out[i + 5] = same_10 / (same_10 + 32.0)
        out[i + 6] = min(math.log1p(top.input_tokens) / _MAX_TOKENS_LOG, 1.0) if top else 0.0
        out[i + 7] = stats.hit_sum / n if n else 0.0
        out[i + 8] = stats.copies / (stats.copies + 4.0)
        out[i + 9] = in_flight / (in_flight + 4.0)
        out[i + 10] = queued / (queued + 64.0)
        out[i + 11] = gap / (gap + 10.0)
        out[i + 12 : i + 17] = settings
        out[i + 17] = holders / self.n_nodes
        return out


def _choose_arrivals() -> Any:
    """The compiled per-arrival work (``envs._native.arrivals``: the traffic counts,
    :meth:`EpochEncoder.record`, the threshold controller's routing) where the
    compiled rows run, else None (the Python here and in ``envs.thresholds``)."""
    if NATIVE is None:
        return None
    try:
        return importlib.import_module("envs._native.arrivals")
    except ImportError as error:  # not built, or the compiled baselines it reads are not
        if "baselines._native" not in str(error) and "envs.sim._native" not in str(error):
            print(ARRIVALS_NOTICE.format(error), file=sys.stderr)  # theirs said so already
        return None


ARRIVALS = _choose_arrivals()


# prefix_of, prefix_key, first_token_estimates and node_backlog are the world's
# forecast (envs.sim.forecast), re-exported for the observation's readers
__all__ = [
    "ENCODER_CORE",
    "EPOCH_FEATURES",
    "EPOCH_NODE_FEATURES",
    "NATIVE",
    "NODE_FEATURES",
    "OBSERVATION_OPTIONS",
    "REQUEST_FEATURES",
    "SPARE_FEATURES",
    "WINDOWS_S",
    "EpochEncoder",
    "EpochStats",
    "HitMemo",
    "ObservationEncoder",
    "ShortArrivals",
    "TrafficTracker",
    "first_token_estimates",
    "hold_s",
    "log_seconds",
    "node_backlog",
    "observation_options",
    "prefix_key",
    "prefix_of",
]
