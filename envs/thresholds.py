"""``btb/Thresholds-v0``: an adaptive-threshold controller for BTB."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium import spaces

from baselines.btb import BTB
from envs.cluster_env import ClusterEnv
from envs.encoder import EpochEncoder, EpochStats
from envs.sim.checks import check_number
from envs.sim.request import Request
from envs.sim.simulator import Simulator

X_CHOICES = (1, 2, 3, 4, 6, 8, 16)
Z_CHOICES = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
MIN_PREFIX_CHOICES = (1024, 4096, 16384, 32768, 65536)  # tokens
# The observation scales the minimum prefix in units of 256 tokens (the published
# block), so it reads the same whatever the workload's block size.
PREFIX_FEATURE_TOKENS = 256


class ThresholdsEnv(ClusterEnv):
    """
    ## Description

    The cluster of ``btb/Route-v0`` is routed by BTB (``baselines.btb``), but
    BTB's thresholds are not fixed: every decision epoch (``epoch_s`` of
    simulated time, default 1 s) the agent sets X (arrivals that make a prefix
    active), Z (the window they must fall in, seconds), M (warm copies to keep)
    and the minimum prefix length that may fire. BTB acts with them until the
    next epoch. BTB's prefix is each request's prompt but its last block.
    BTB is the published rule (``baselines.btb``): an active prefix's requests
    go to the least-loaded node on which it is resident, and a copy in flight
    joins those nodes once it has landed. The minimum prefix is in tokens,
    turned into blocks with the workload's block size.

    ## Action Space

    ``MultiDiscrete([7, 6, n_nodes, 5])``: indices into
    X in (1, 2, 3, 4, 6, 8, 16), Z in (0.25, 0.5, 1, 2, 4, 8) s, M = index + 1,
    minimum prefix in (1024, 4096, 16384, 32768, 65536) tokens (4 to 256
    blocks of 256 tokens; 2 to 128 blocks of 512).

    ## Observation Space

    ``Box(0, 1, (n_nodes * 5 + 9,), float32)`` (``envs.encoder.EpochEncoder``):
    per node its load, estimated wait, KV reserved / budget, copies in flight
    to it and whether it is busy; then the last epoch's arrivals, the fraction
    of them whose prefix had been seen in the 10 s before, the busiest prefix's
    share, the mean HBM hit fraction where they were routed, the warm copies
    issued, and the thresholds in force.

    ## Rewards

    As ``btb/Route-v0``: TTFT credited as it becomes known, so the return is
    ``-(sum of TTFT) / reward_scale`` to floating-point rounding (plus optional
    penalties; relative to ``reward_baseline``'s TTFTs when that is set).

    ## Starting State

    A window from the pool and an empty cluster (``reset`` options as in
    ``btb/Route-v0``); the first epoch starts at the first arrival, with BTB's
    published constants in force until the first action.

    ## Episode End

    Terminates when the window's last request has been served. Epochs without
    arrivals are skipped: the next epoch starts at the next arrival.

    ## Arguments

    Those of ``btb/Route-v0`` plus ``epoch_s`` (seconds per decision epoch).

    ## Version History

    * v0: initial version. Since btb-gym 0.1.0's published-rule change BTB is the published
      rule; before, it also routed to copies in flight and to nodes computing
      the prefix (now ``btb_pending``), and the minimum prefix was given in
      blocks (4 to 256), which on 512-token blocks meant twice the tokens.
    """

    def __init__(self, epoch_s: float = 1.0, **kwargs: Any) -> None:
        check_number("epoch_s", epoch_s, positive=True)
        super().__init__(**kwargs)
        self._kwargs["epoch_s"] = epoch_s
        self.epoch_s = float(epoch_s)
        self.controller = EpochController(self.n_nodes, self.epoch_s)
        self.action_space = spaces.MultiDiscrete(list(self.controller.bounds))
        self.observation_space = spaces.Box(
            0.0, 1.0, (self.controller.encoder.size,), dtype=np.float32
        )

    def thresholds(self) -> tuple[int, float, int, int]:
        """(X, Z, M, minimum prefix tokens) in force."""
        return self.controller.thresholds()

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
        route = controller.route
        gen = self._gen
        try:
            while controller.in_epoch(request):
                request = gen.send(route(sim, request))
        except StopIteration:
            controller.close_epoch(sim)
            return True
        controller.close_epoch(sim)
        self.request = request
        return False


class EpochController:
    """BTB under thresholds that an agent resets every epoch.

    The environment and the agent adapter (``agents.adapter``) both drive this
    class, so an agent acts in evaluation exactly as it did in training:
    :meth:`observe` at an epoch boundary, :meth:`apply` the agent's action
    (the epoch starts at the pending arrival), then :meth:`route` every arrival
    while :meth:`in_epoch`, and :meth:`close_epoch`.
    """

    def __init__(self, n_nodes: int, epoch_s: float) -> None:
        self.n_nodes = n_nodes
        self.epoch_s = epoch_s
        self.encoder = EpochEncoder(n_nodes)
        self.limits = (
            float(X_CHOICES[-1]),
            float(Z_CHOICES[-1]),
            float(n_nodes),
            float(MIN_PREFIX_CHOICES[-1]) / PREFIX_FEATURE_TOKENS,
        )
        self.bounds = (len(X_CHOICES), len(Z_CHOICES), n_nodes, len(MIN_PREFIX_CHOICES))
        self.btb = BTB(y_tokens=None, min_prefix_tokens=MIN_PREFIX_CHOICES[-1])
        self.stats = EpochStats()
        self.epoch_end = -np.inf
        self._copies_before = 0

    def reset(self, sim: Simulator) -> None:
        self.encoder.reset()
        self.btb = BTB(y_tokens=None, min_prefix_tokens=MIN_PREFIX_CHOICES[-1])
        self.btb.reset(sim)
        self.stats = EpochStats()
        self.epoch_end = -np.inf
        self._copies_before = 0

    def thresholds(self) -> tuple[int, float, int, int]:
        min_prefix = self.btb.min_prefix_tokens
        assert min_prefix is not None  # set at construction and by every action
        return self.btb.x, self.btb.z, self.btb.m, min_prefix

    def observe(self, sim: Simulator) -> np.ndarray:
        x, z, m, min_prefix = self.thresholds()
        scaled = (x, z, m, min_prefix / PREFIX_FEATURE_TOKENS)
        return self.encoder.encode(sim, self.stats, scaled, self.limits)

    def apply(self, action: Any, start_s: float) -> None:
        a = np.asarray(action).ravel()
        if a.shape != (4,):
            raise ValueError(f"action must have 4 entries, got shape {a.shape}")
        for i, (value, bound) in enumerate(zip(a, self.bounds)):
            if not 0 <= value < bound:
                raise ValueError(f"action[{i}] must be in 0..{bound - 1}, got {value}")
        self.btb.set_thresholds(
            X_CHOICES[a[0]], None, Z_CHOICES[a[1]], int(a[2]) + 1, MIN_PREFIX_CHOICES[a[3]]
        )
        self.stats = EpochStats()
        # the epoch always holds the arrival it starts at, even when epoch_s is below
        # the float resolution at start_s (else no request would ever be routed)
        self.epoch_end = max(start_s + self.epoch_s, math.nextafter(start_s, math.inf))

    def in_epoch(self, request: Request) -> bool:
        return request.arrival_s < self.epoch_end

    def route(self, sim: Simulator, request: Request) -> int:
        """BTB's decision for ``request``, with the epoch's traffic recorded."""
        self.encoder.record(self.stats, request, sim.now)
        node = self.btb.decide(sim, request)
        self.stats.hit_sum += sim.nodes[node].cache.hbm_match(request.blocks) / len(request.blocks)
        return node

    def close_epoch(self, sim: Simulator) -> None:
        self.stats.copies = len(sim.copies) - self._copies_before
        self._copies_before = len(sim.copies)
