"""``btb/Thresholds-v0``: an adaptive-threshold controller for BTB."""

from __future__ import annotations

import math
from collections.abc import Generator
from typing import Any

import numpy as np
from gymnasium import spaces

from baselines.btb import BTB
from baselines.btb_pending import BTBPending
from baselines.eft_pull_spread import EarliestFirstTokenPullSpread
from envs.cluster_env import ClusterEnv, only_options_error, refuse_other_envs_options
from envs.encoder import (
    ARRIVALS,
    OBSERVATION_OPTIONS,
    EpochEncoder,
    EpochStats,
    ModulesByName,
    check_time_unit,
)
from envs.sim.checks import check_flag, check_int, check_number
from envs.sim.errors import ConfigError
from envs.sim.request import Request
from envs.sim.simulator import Simulator
from envs.sim.tokens import check_key_tokens, whole_blocks

X_CHOICES = (1, 2, 3, 4, 6, 8, 16)
Z_CHOICES = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
M_FRACTIONS = (0.25, 0.5, 0.75, 1.0)  # of the cluster's nodes, rounded up (at least 1)
MIN_PREFIX_CHOICES = (1024, 4096, 16384, 32768, 65536)  # tokens
ROUTE_CHOICES = ("resident", "pending")
"""Where an active prefix's requests go: ``resident``, the published rule (nodes
holding it); ``pending``, btb_pending's (also copies in flight and nodes computing it)."""
EFT_ROUTE_CHOICES = (*ROUTE_CHOICES, "resident+eft", "pending+eft")
"""The rules with ``eft_rules=True``: the two above, then each with btb_eft's
fallback (a request BTB does not route itself goes to the node with the earliest
expected first token instead of cache_aware)."""
SPREAD_ROUTE_CHOICES = ("resident+spread", "pending+spread", "spread")
"""Added after the others with ``spread_rules=True``: the two first rules with
``eft_pull_spread`` as the fallback (btb-gym's router, which also copies a prefix
on demand and opens idle nodes to a burst whose prefix is still being computed),
then ``spread``: BTB stands aside and ``eft_pull_spread`` routes every request
(BTB neither counts the epoch's arrivals nor copies, so its X-in-Z count starts
from nothing when it comes back)."""


def route_choices(eft_rules: bool, spread_rules: bool) -> tuple[str, ...]:
    """The routing rules of the action's last entry, in their index order."""
    return (
        *(EFT_ROUTE_CHOICES if eft_rules else ROUTE_CHOICES),
        *(SPREAD_ROUTE_CHOICES if spread_rules else ()),
    )


def thresholds_action_sizes(eft_rules: bool, spread_rules: bool) -> tuple[int, ...]:
    """The ``btb/Thresholds-v0`` action's MultiDiscrete sizes: X, Z, M, the minimum
    prefix and the routing rule (:func:`route_choices`)."""
    return (
        len(X_CHOICES),
        len(Z_CHOICES),
        len(M_FRACTIONS),
        len(MIN_PREFIX_CHOICES),
        len(route_choices(eft_rules, spread_rules)),
    )


# The observation scales the minimum prefix in units of 256 tokens (the published
# block), so it reads the same whatever the workload's block size.
PREFIX_FEATURE_TOKENS = 256


def check_epoch_s(value: Any) -> None:
    """``epoch_s`` (simulated seconds per decision epoch) must be a number > 0."""
    check_number("epoch_s", value, positive=True)


def check_y_tokens(value: Any) -> None:
    """``y_tokens`` (the controller's BTB key, in tokens) must be None or a whole
    number of at least the smallest minimum prefix an action sets (below it every
    action's minimum exceeds Y, and BTB never fires)."""
    if value is None:
        return
    check_int("y_tokens", value, 1)
    if value < MIN_PREFIX_CHOICES[0]:
        raise ConfigError.about(
            "y_tokens",
            f"= {value} is below the shortest minimum prefix an action sets "
            f"({MIN_PREFIX_CHOICES[0]:,} tokens): BTB would never fire",
        )


def copies_for(fraction: float, n_nodes: int) -> int:
    """M for a fraction of a cluster of ``n_nodes``: rounded up, at least one node."""
    return max(1, min(n_nodes, math.ceil(fraction * n_nodes - 1e-9)))


class ThresholdsEnv(ClusterEnv):
    """
    ## Description

    The cluster of ``btb/Route-v0`` is routed by BTB, but BTB's thresholds are
    not fixed: every decision epoch (``epoch_s`` of simulated time, default
    1 s) the agent sets X (arrivals that make a prefix active), Z (the window
    they must fall in, seconds), M (the nodes that should hold an active
    prefix, as a fraction of the cluster), the minimum prefix length that may
    fire (tokens) and the routing rule, and BTB acts with them until the next
    epoch. BTB's prefix is each request's prompt but its last block; the
    minimum prefix is turned into blocks with the workload's block size. So the
    minimum prefix bounds the prompt's length, not the length the requests share:
    on the 60 s and 1 s bursts every prompt's prefix so read is 65,536 tokens, and
    no choice of it changes anything there. Where a request's own suffix spans
    more than one block (a trace with small blocks, or long suffixes), that
    prefix ends in blocks no other request has and BTB never fires; ``y_tokens``
    keys it instead on the first Y tokens (whole blocks), as ``btb`` does: BTB
    then counts, copies and routes by that prefix, requests shorter than Y never
    fire, and a minimum prefix above Y turns BTB off. The observation's prefix
    counts and busiest prefix follow the same key (a request shorter than Y is
    counted under its prompt but its last block).

    BTB's "X arrivals within Z" count carries over from epoch to epoch, and an
    arrival is counted under the settings in force when it comes: it is recorded
    only in an epoch whose minimum prefix the request reaches, and forgotten for
    good once it is older than that epoch's Z (the count trims its arrival times
    by the current Z). So the count after a change depends on earlier epochs'
    Z and minimum prefix, not on the new settings alone. Measured on a steady
    prefix (one arrival every 0.4 s, ``tests/envs/test_thresholds_count.py``),
    X=4 and Z=8 s set from t=10 s issue the first copy after the switch at
    10.8 s when the earlier Z was 4 s, at 11.6 s when it was 0.25 s, and at
    12.0 s when the earlier minimum prefix was 65,536 tokens (above the
    prompt). The shipped agents were trained, and the results pages measured,
    with this count. A redesign that kept every arrival's time up to the largest
    Z choice (8 s) and recorded every arrival would count what the new settings
    say: 10.8 s in all three cases. Under ``spread`` BTB sees no arrival at all
    (below).

    The routing rule is part of the action because no threshold alone can help
    on fast bursts under causal KV: the published rule (``resident``, as in
    ``baselines.btb``) routes an active prefix's requests only to nodes on which
    it is resident, so while the first prefill of a long prefix is running it
    copies nothing and routes like cache_aware. ``pending`` (the rule of
    ``baselines.btb_pending``) also routes to copies in flight and counts nodes
    still computing the prefix. Which rule is better depends on the traffic
    (``docs/thresholds.md``), so the agent chooses it per epoch.

    ## Action Space

    ``MultiDiscrete([7, 6, 4, 5, 2])``, the same on every cluster size:

    | index | sets | choices |
    |---|---|---|
    | 0 | X, arrivals | 1, 2, 3, 4, 6, 8, 16 |
    | 1 | Z, seconds | 0.25, 0.5, 1, 2, 4, 8 |
    | 2 | M, share of the nodes (rounded up) | 0.25, 0.5, 0.75, 1 |
    | 3 | minimum prefix, tokens | 1,024, 4,096, 16,384, 32,768, 65,536 |
    | 4 | routing rule | 0 resident (published), 1 pending; with ``eft_rules``: |
    |   |  | also 2 resident+eft, 3 pending+eft (``MultiDiscrete([7, 6, 4, 5, 4])``); |
    |   |  | with ``spread_rules``, then resident+spread, pending+spread, spread |

    ## Observation Space

    ``Box(0, 1, (n_nodes * 7 + 18,), float32)`` (``envs.encoder.EpochEncoder``;
    unbounded counts squashed as ``x / (x + scale)``): seven entries per node,
    node-major (entry ``7 j + i`` is feature ``i`` of node ``j``), then eighteen for
    the cluster, row ``k`` below at index ``7 n + k`` (``n = n_nodes``):

    | entries | feature |
    |---|---|
    | per node (7) | load (at 16), wait (at 1 s), KV reserved / budget, copies in (at 1), busy, |
    |  | holds the epoch's busiest prefix in HBM, a copy of that prefix on its way |
    | 0 | arrivals in the last epoch (at 16) |
    | 1 | arrivals in the last 10 s (at 64) |
    | 2 | share of the epoch's arrivals whose prefix was seen in the 10 s before |
    | 3 | the busiest prefix's share of the epoch's arrivals |
    | 4 | most arrivals of one prefix within 1 s, over the epoch (at 8) |
    | 5 | most arrivals of one prefix within 10 s (at 32) |
    | 6 | the prompt length of a request of the busiest prefix (its last block |
    |   |  included), log-scaled (1 at 262,144 tokens) |
    | 7 | mean HBM hit fraction where the epoch's requests were routed |
    | 8 | warm copies issued in the last epoch (at 4) |
    | 9 | copies in flight in the cluster (at 4) |
    | 10 | requests queued in the cluster (at 64) |
    | 11 | seconds since the previous epoch ended (at 10 s; epochs without arrivals are skipped) |
    | 12-16 | the settings in force: X / 16, log Z (``log1p(Z) / log1p(8)``), M as |
    |  | nodes / the cluster's nodes (the share chosen, rounded up to whole nodes: |
    |  | 0.333 for 0.25 of 6 nodes), log minimum prefix |
    |  | (``log1p(tokens / 256) / log1p(256)``), rule index / (rules - 1) |
    | 17 | the busiest prefix's holders / nodes |

    ## Rewards

    As ``btb/Route-v0``: TTFT credited as it becomes known, so the return is
    ``-(sum of TTFT) / reward_scale`` to floating-point rounding (plus optional
    penalties). With ``reward_baseline`` set (the shipped agent uses ``btb``),
    each request's TTFT under that policy on the same window and simulator seed
    is subtracted: the traffic's own variance, which no action controls, drops
    out of the return.

    ## Starting State

    A window from the pool and an empty cluster (``reset`` options as in
    ``btb/Route-v0``). The first observation shows BTB's published constants
    (X=2, Z=1 s, M=every node up to 4, minimum prefix 65,536 tokens, resident
    rule) as the settings in force; the first action replaces them at the first
    arrival, before any request is routed.

    ``info["thresholds"]`` holds the settings in force (``x``, ``z_s``, ``m`` in
    nodes, ``min_prefix_tokens``, ``rule``): after ``reset`` the published
    constants, after each step those its action set.

    ## Episode End

    Terminates when the window's last request has been served. Every epoch opens at
    an arrival, the first at or after the previous epoch's end, and holds the
    arrivals of the next ``epoch_s``: epochs without arrivals are skipped, and epoch
    starts are at least ``epoch_s`` apart, not on a fixed grid.

    ## Arguments

    Those of ``btb/Route-v0`` plus ``epoch_s`` (seconds per decision epoch),
    ``eft_rules`` (False: the two rules above; True: four, adding btb_eft's
    fallback routing to each), ``spread_rules`` (True: three more rules, the
    first two with ``eft_pull_spread`` as the fallback and ``spread``, in which
    ``eft_pull_spread`` routes every request and BTB stands aside) and
    ``y_tokens`` (None: each prompt but its last block; tokens, at least 1,024
    and one of the workload's blocks: BTB's prefix is the first Y tokens), except
    ``hints`` and ``spare_features`` (its observation is per epoch, not per
    request: only False), ``time_unit`` (only ``"seconds"``) and ``step_wait``
    (only False).

    ## Version History

    * v0, option added later, off by default (the observation and action as
      before): ``y_tokens``, BTB's prefix the first Y tokens.
    * v0, options added later, off by default (the action space as before):
      ``eft_rules`` (four rules, ``MultiDiscrete([7, 6, 4, 5, 4])``) and
      ``spread_rules`` (three more: five rules alone, ``[7, 6, 4, 5, 5]``,
      seven with ``eft_rules``, ``[7, 6, 4, 5, 7]``).
    * v0, after btb-gym 0.1.0 (CHANGELOG.md, Unreleased): M is a share of the
      cluster (the action space no longer depends on the node count), the
      routing rule is an action, and the
      observation holds burst features (same-prefix arrival counts over 1 s and
      10 s, the busiest prefix's holders and copies, cluster queue, idle gap).
      The old design could not adapt: its observation showed only the last
      epoch's totals, so a burst was visible one epoch late and a 1 s burst not
      at all, and no threshold of the published rule helps there.
    * v0, btb-gym 0.1.0: ``MultiDiscrete([7, 6, n_nodes, 5])`` (X, Z, M, minimum
      prefix) driving the published rule; ``n_nodes * 5 + 9`` features.
    """

    ROUTE_ONLY = (*OBSERVATION_OPTIONS, "step_wait", "time_unit")

    def __init__(
        self,
        epoch_s: float = 1.0,
        eft_rules: bool = False,
        spread_rules: bool = False,
        y_tokens: int | None = None,
        **kwargs: Any,
    ) -> None:
        check_epoch_s(epoch_s)
        check_y_tokens(y_tokens)
        refuse_other_envs_options(kwargs, type(self))
        # taken at its default, so a value no route env takes is said to be one
        for o in self.ROUTE_ONLY:
            if o == "time_unit" and o in kwargs:
                check_time_unit(kwargs[o])
            elif o in kwargs:
                check_flag(o, kwargs[o])
        route_only = [
            o
            for o in self.ROUTE_ONLY
            if (kwargs.get(o, "seconds") != "seconds" if o == "time_unit" else kwargs.get(o))
        ]
        if route_only:
            raise only_options_error(route_only, "btb/Route-v0 and btb/RouteWarm-v0")
        for name, flag in (("eft_rules", eft_rules), ("spread_rules", spread_rules)):
            check_flag(name, flag)
        self._y_tokens = y_tokens  # read by _check_window, which the constructor calls
        super().__init__(**kwargs)
        self._kwargs["epoch_s"] = epoch_s
        if eft_rules:  # recorded only when set, as agents saved before it were made
            self._kwargs["eft_rules"] = True
        if spread_rules:
            self._kwargs["spread_rules"] = True
        if y_tokens is not None:
            self._kwargs["y_tokens"] = y_tokens
        self.epoch_s = float(epoch_s)
        self.controller = EpochController(
            self.n_nodes,
            self.epoch_s,
            bool(eft_rules),
            spread_rules=bool(spread_rules),
            y_tokens=y_tokens,
        )
        self.action_space = spaces.MultiDiscrete(list(self.controller.bounds))
        self.observation_space = spaces.Box(
            0.0, 1.0, (self.controller.encoder.size,), dtype=np.float32
        )

    def thresholds(self) -> tuple[int, float, int, int, str]:
        """(X, Z, M, minimum prefix tokens, routing rule) in force."""
        return self.controller.thresholds()

    def _check_window(self, window: Any, where: str) -> None:
        """Also: ``y_tokens`` holds one of the window's blocks at least. Checked
        wherever a window comes in (the constructor, ``set_windows``, ``reset``'s
        ``options['window']``), so a window the controller would refuse is refused
        before a reset changes anything. (A run's reset checks again: the adapter's.)"""
        super()._check_window(window, where)
        try:
            check_key_tokens("y_tokens", self._y_tokens, window.block_tokens)
        except ConfigError as error:
            raise ConfigError(
                f"{error.template}, in {where} ({window.name!r})",
                error.fields,
                error.owner,
            ) from None

    def _info(self) -> dict[str, Any]:
        info = super()._info()
        x, z, m, min_prefix, rule = self.controller.thresholds()
        info["thresholds"] = {
            "x": x,
            "z_s": z,
            "m": m,
            "min_prefix_tokens": min_prefix,
            "rule": rule,
        }
        return info

    def _start(self) -> np.ndarray:
        assert self.sim is not None
        self.controller.reset(self.sim)
        self.request = next(self._gen)
        return self._observe()

    def _observe(self) -> np.ndarray:
        assert self.sim is not None
        return self.controller.observe(self.sim).copy()

    def _act(self, action: Any) -> bool:
        sim = self.sim
        request = self.request
        assert sim is not None and request is not None
        controller = self.controller
        controller.apply(action, request.arrival_s)
        following = controller.run(sim, self._gen, request)
        controller.close_epoch(sim)
        if following is None:
            return True
        self.request = following
        return False


class SwitchedBTB(BTBPending):
    """BTB whose routing rule can change mid-run: ``pending`` False is the
    published rule (:class:`baselines.btb.BTB`), True btb_pending's; ``eft_fallback``
    (:class:`baselines.btb.BTB`) switches btb_eft's fallback routing on, and
    ``fallback_router`` an ``eft_pull_spread`` fallback."""

    pending = False
    _twin_rules = True  # (the compiled decision follows the flag: baselines.native)

    def _holders(
        self, sim: Simulator, prefix: tuple[int, ...]
    ) -> tuple[list[int], list[int], list[int]]:
        if self.pending:
            return super()._holders(sim, prefix)
        return BTB._holders(self, sim, prefix)

    def _issued(self, route_to: list[int], dst: int) -> None:
        if self.pending:
            route_to.append(dst)


Setting = tuple[int, float, int, int, str]
"""(X, Z, M, minimum prefix tokens, routing rule)."""


class EpochController(ModulesByName):
    """BTB under thresholds that an agent resets every epoch.

    The environment and the agent adapter (``agents.adapter``) both drive this
    class, so an agent acts in evaluation exactly as it did in training:
    :meth:`observe` at an epoch boundary, :meth:`apply` the agent's action
    (the epoch starts at the pending arrival), then :meth:`route` every arrival
    while :meth:`in_epoch`, and :meth:`close_epoch`. :attr:`log` keeps
    ``(epoch start s, setting)`` of every epoch of the run (for the chart).
    """

    def __init__(
        self,
        n_nodes: int,
        epoch_s: float,
        eft_rules: bool = False,
        compiled: bool = True,
        spread_rules: bool = False,
        y_tokens: int | None = None,
    ) -> None:
        check_y_tokens(y_tokens)
        self.y_tokens = y_tokens
        """BTB's key, in tokens (None: each prompt but its last block; see the env)."""
        self.n_nodes = n_nodes
        # the per-arrival work compiled (envs._native.arrivals), where it is built;
        # ``compiled=False`` runs the Python below (the reference)
        self._arrivals = ARRIVALS if compiled else None
        self.epoch_s = epoch_s
        self.rules = route_choices(eft_rules, spread_rules)
        # the ``+spread`` rules' fallback: one router for the whole run, so what it
        # has seen of each prefix's arrivals outlasts the epoch
        self.spread = EarliestFirstTokenPullSpread()
        self.encoder = EpochEncoder(n_nodes, compiled)
        self.bounds = thresholds_action_sizes(eft_rules, spread_rules)
        self._rule = 0
        self.btb = self._published()
        self.stats = EpochStats()
        self.epoch_end = -np.inf
        self.log: list[tuple[float, Setting]] = []
        self._copies_before = 0

    def _published(self) -> SwitchedBTB:
        return SwitchedBTB(y_tokens=self.y_tokens, min_prefix_tokens=MIN_PREFIX_CHOICES[-1])

    def reset(self, sim: Simulator) -> None:
        y = self.y_tokens
        check_key_tokens("y_tokens", y, sim.block_tokens)
        self.encoder.reset()
        self.encoder.key_blocks = 0 if y is None else whole_blocks(y, sim.block_tokens)
        self.btb = self._published()
        self.btb.reset(sim)
        self.spread.reset(sim)
        self.stats = EpochStats()
        self.epoch_end = -np.inf
        self.log = []
        self._copies_before = 0
        self._rule = 0

    def metrics(self) -> dict[str, float]:
        """The last run's ``y_unreached_rate`` = 1 when no prompt reached ``y_tokens``,
        so BTB could never fire (:meth:`BTB.metrics`; absent otherwise)."""
        return {k: v for k, v in self.btb.metrics().items() if k == "y_unreached_rate"}

    @property
    def aside(self) -> bool:
        """Whether BTB stands aside this epoch (the ``spread`` rule)."""
        return self.rules[self._rule] == "spread"

    def thresholds(self) -> Setting:
        btb = self.btb
        min_prefix = btb.min_prefix_tokens
        assert min_prefix is not None  # set at construction and by every action
        return btb.x, btb.z, btb.m, min_prefix, self.rules[self._rule]

    def observe(self, sim: Simulator) -> np.ndarray:
        x, z, m, min_prefix, _ = self.thresholds()
        settings = (
            x / X_CHOICES[-1],
            math.log1p(z) / math.log1p(Z_CHOICES[-1]),
            m / self.n_nodes,
            math.log1p(min_prefix / PREFIX_FEATURE_TOKENS)
            / math.log1p(MIN_PREFIX_CHOICES[-1] / PREFIX_FEATURE_TOKENS),
            self._rule / (len(self.rules) - 1),
        )
        end = self.epoch_end
        gap_s = sim.now - end if end > -np.inf else 0.0
        return self.encoder.encode(sim, self.stats, settings, gap_s)

    def apply(self, action: Any, start_s: float) -> None:
        bounds = self.bounds
        a: Any = action
        # the env hands over a tuple of ints (ClusterEnv._freeze): checked as it is
        if not (
            type(a) is tuple
            and len(a) == len(bounds)
            and all(type(v) is int and 0 <= v < b for v, b in zip(a, bounds))
        ):
            a = np.asarray(action).ravel()
            if a.shape != (len(bounds),):
                raise ValueError(f"action must have {len(bounds)} entries, got shape {a.shape}")
            for i, (value, bound) in enumerate(zip(a, bounds)):
                if not 0 <= value < bound:
                    raise ValueError(f"action[{i}] must be in 0..{bound - 1}, got {value}")
        btb = self.btb
        btb.set_thresholds(
            X_CHOICES[a[0]],
            self.y_tokens,
            Z_CHOICES[a[1]],
            copies_for(M_FRACTIONS[a[2]], self.n_nodes),
            MIN_PREFIX_CHOICES[a[3]],
        )
        self._rule = int(a[4])
        routing, _, fallback = self.rules[self._rule].partition("+")
        btb.pending = routing == "pending"
        btb.eft_fallback = fallback == "eft"
        btb.fallback_router = self.spread if fallback == "spread" else None
        self.log.append((float(start_s), self.thresholds()))
        self.stats = EpochStats()
        # the epoch always holds the arrival it starts at, even when epoch_s is below
        # the float resolution at start_s (else no request would ever be routed)
        self.epoch_end = max(start_s + self.epoch_s, math.nextafter(start_s, math.inf))

    def in_epoch(self, request: Request) -> bool:
        return request.arrival_s < self.epoch_end

    def route(self, sim: Simulator, request: Request) -> int:
        """BTB's decision for ``request``, with the epoch's traffic recorded."""
        if self._arrivals is not None:
            node: int = self._arrivals.route(self, sim, request)
            return node
        self.encoder.record(self.stats, request, sim.now)
        node = (self.spread if self.aside else self.btb).decide(sim, request)
        assert node is not None  # both route by returning the node
        self.stats.hit_sum += sim.nodes[node].view.hbm_match(request.blocks) / len(request.blocks)
        return node

    def run(
        self, sim: Simulator, decisions: Generator[Request, int | None, None], request: Request
    ) -> Request | None:
        """Route the arrivals of the epoch from ``request`` on (``decisions`` is the
        simulator's, which yielded ``request``); the first arrival after the epoch,
        or None once the window's last request is served."""
        if self._arrivals is not None:
            following: Request | None = self._arrivals.run(self, sim, decisions, request)
            return following
        route = self.route
        try:
            while self.in_epoch(request):
                request = decisions.send(route(sim, request))
        except StopIteration:
            return None
        return request

    def close_epoch(self, sim: Simulator) -> None:
        self.stats.copies = len(sim.copies) - self._copies_before
        self._copies_before = len(sim.copies)
