"""Hand-built cluster states for testing routing rules one decision at a time.

:func:`cluster_state` builds a simulator that has not started (llama-3.3-70b on
4xH100 nodes, 256-token blocks) and sets each node's load (running requests),
waiting queue and cached prefix directly, so a test can call
``policy.decide(sim, request)`` on exactly the state it describes. Block ids
are small integers; a prefix of k blocks is ``(1, ..., k)`` (ids are chained,
so any tuple of distinct ids works).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from envs.sim import ClusterSpec, SimConfig, Simulator
from envs.sim.request import Request, Workload

BT = 256


def request(blocks: Sequence[int], arrival_s: float = 0.0, index: int = 0) -> Request:
    """A request whose prompt is exactly ``blocks`` (full blocks, one output token)."""
    return Request(
        index=index,
        request_id=f"q{index}",
        arrival_s=arrival_s,
        input_tokens=len(blocks) * BT,
        output_tokens=1,
        blocks=tuple(blocks),
    )


def filler(i: int) -> Request:
    """A waiting request that shares nothing with anything (ids from 10^6)."""
    return request([1_000_000 + i], index=i)


def cluster_state(
    loads: Sequence[int],
    cached: Sequence[Sequence[int]] | None = None,
    waiting: Sequence[int] | None = None,
    config: SimConfig | None = None,
    seed: int = 0,
) -> Simulator:
    """A fresh simulator with node i running ``loads[i]`` requests (minus the waiting
    ones), ``waiting[i]`` queued, and ``cached[i]`` resident in HBM."""
    n = len(loads)
    cluster = ClusterSpec.uniform("llama-3.3-70b", "4xH100", n)
    workload = Workload("state", BT, [request([999_999])])
    sim = Simulator(cluster, workload, config, np.random.default_rng(seed))
    waiting = waiting or [0] * n
    for i, node in enumerate(sim.nodes):
        node.queue.extend(filler(k) for k in range(waiting[i]))
        node.running = loads[i] - waiting[i]
        if cached and cached[i]:
            node.cache.insert(tuple(cached[i]), 0.0)
    return sim


def prefix(k: int, start: int = 1) -> tuple[int, ...]:
    """The block ids ``start .. start + k - 1``."""
    return tuple(range(start, start + k))
