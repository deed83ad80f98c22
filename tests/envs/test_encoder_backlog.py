"""The encoder's backlog estimates, computed incrementally (queued requests'
costs memoised per node while its cache is unchanged, a source's estimate shared
between the copies that wait for it and its own row), give exactly the
observations of the plain formula kept here as the reference."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs
import envs.encoder
from envs.encoder import ObservationEncoder
from envs.sim import setup_cluster
from envs.sim.forecast import INF, prefix_key, transfer_s, usable_tokens
from envs.sim.node import COPY, PREFILL, SPECULATE
from envs.sim.transfers import MOVING, WAIT_SOURCE
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

assert envs.ENV_IDS  # registers the environments


# ------------------------------------------------------------ the plain formula
def _landing_s(sim, copy, now, depth):
    transfer = transfer_s(copy.bytes, sim.nodes[copy.dst])
    if copy.state == MOVING and copy.rate > 0:
        return copy.remaining / copy.rate
    if copy.state != WAIT_SOURCE:
        target = sim.nodes[copy.dst]
        if target.work == COPY and target.work_obj is copy:  # being written now
            return max(target.work_end - now, 0.0)
        queue = list(target.copy_queue)
        if any(queued is copy for queued in queue):  # after the current work and those ahead
            ahead = queue[: [id(q) for q in queue].index(id(copy))]
            busy = target.work_end - now if target.work in (PREFILL, COPY, SPECULATE) else 0.0
            return max(busy, 0.0) + sum(transfer_s(q.bytes, target) for q in ahead) + transfer
        return transfer
    source = sim.nodes[copy.src]
    if depth == 0:
        computed = _backlog(sim, source, now, depth + 1)[1].get(copy.key)
        if computed is not None:
            return computed + transfer
    wait = max(source.work_end - now, 0.0) if source.work == PREFILL else 0.0
    return wait + source.prefill_ewma_s * len(source.queue) + transfer


def _backlog(sim, node, now, depth=0):
    bt = sim.block_tokens
    coming = {key: _landing_s(sim, copy, now, depth) for key, copy in node.inflight.items()}
    backlog = max(node.work_end - now, 0.0) if node.work in (PREFILL, COPY) else 0.0
    if node.computing is not None:
        coming[prefix_key(node.computing)] = backlog
    for queued in node.queue:
        blocks = queued.blocks
        hit = node.cache.hbm_match(blocks)
        key = prefix_key(queued)
        arriving = coming.get(key)
        if arriving is not None and (len(blocks) - 1 or 1) > hit:
            hit = len(blocks) - 1 or 1
            backlog = max(backlog, arriving)
        have = usable_tokens(hit, bt, queued.input_tokens)
        backlog += node.costs.prefill_s(queued.input_tokens - have, have)
        coming.setdefault(key, backlog)
    return backlog, coming


def reference_estimates(sim, request, memo=None, step_wait=False):
    assert not step_wait  # the encoders compared here run without it
    bt = sim.block_tokens
    n_in = request.input_tokens
    key = prefix_key(request)
    depth = len(request.blocks) - 1 or 1
    out = []
    for node in sim.nodes:
        backlog, coming = _backlog(sim, node, sim.now)
        hit = node.cache.hbm_match(request.blocks)
        cold = usable_tokens(hit, bt, n_in)
        have, ready = cold, 0.0
        arriving = coming.get(key)
        if arriving is not None and depth > hit:
            have, ready = usable_tokens(depth, bt, n_in), arriving
        start = max(backlog, ready)
        prefill_s = node.costs.prefill_s
        first = min(start + prefill_s(n_in - have, have), backlog + prefill_s(n_in - cold, cold))
        out.append((backlog, first, hit))
    return out


assert INF > 0


# ------------------------------------------------------------ the comparison
WINDOWS = {
    "1s bursts": BurstedSyntheticConfig(
        n_bursts=2, burst_requests=150, n_decoys=20, burst_window_s=1.0
    ),
    "4s bursts": BurstedSyntheticConfig(
        n_bursts=3, burst_requests=60, n_decoys=10, burst_window_s=4.0
    ),
}


@pytest.mark.parametrize(
    ("name", "setup", "queue"),
    [
        ("1s bursts", "70b_h100x4", 40),
        ("4s bursts", "70b_h100x4", 10),
        ("1s bursts", "qwen3_8b_h100x4", 3),
    ],
)
def test_observations_equal_the_plain_formulas(name, setup, queue, monkeypatch):
    window = synthetic_window(WINDOWS[name], window=3)
    env = gym.make("btb/RouteWarm-v0", setup=setup_cluster(setup), windows=[window]).unwrapped
    reference = ObservationEncoder(env.n_nodes, compiled=False)  # the rows patched below
    env.action_space.seed(1)
    rng = np.random.default_rng(2)
    obs, _ = env.reset(seed=4)
    compared = copies = longest_queue = 0
    done = False
    while not done:
        with monkeypatch.context() as patch:
            patch.setattr(envs.encoder, "estimates_with_hits", reference_estimates)
            expected = reference.encode(env.sim, env.request)
        assert np.array_equal(obs, expected), f"decision {compared}"
        compared += 1
        copies += sum(len(node.inflight) for node in env.sim.nodes)
        longest_queue = max(longest_queue, *(len(node.queue) for node in env.sim.nodes))
        action = env.action_space.sample()
        action[1:-1] = rng.random(env.n_nodes) < 0.2  # some copies, not a flood
        obs, _, done, _, _ = env.step(action)
    assert compared == len(window.requests)
    assert copies > 0 and longest_queue >= queue  # copies in flight and long queues were seen
