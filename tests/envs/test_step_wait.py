"""The ``step_wait`` option of btb/Route-v0 and btb/RouteWarm-v0: the node rows'
backlog and first-token estimates count the rest of the decode step a node is
running (an admission cuts decode at a step boundary, never inside a step)."""

from __future__ import annotations

import numpy as np
import pytest

from agents.adapter import AgentPolicy
from envs.encoder import NODE_FEATURES, ObservationEncoder, observation_options
from envs.route_warm import RouteWarmEnv
from envs.sim import SimConfig, Simulator, setup_cluster
from envs.sim.forecast import decode_step_left_s, work_left_s
from envs.sim.node import DECODE
from envs.sim.simulator import CompiledSimulator
from envs.sim.timing import NodeCosts
from envs.thresholds import ThresholdsEnv
from envs.workloads.registry import windows

WIDTH = len(NODE_FEATURES)
SHIFTED = {NODE_FEATURES.index(name) for name in ("backlog", "first_token", "first_token_gap")}


def _run(
    steps: int, step_wait: bool, compiled: bool, core: str | None = None
) -> tuple[np.ndarray, list[list[float]]]:
    """The observations of the first ``steps`` arrivals of a rising_load validation
    window on llama-3.3-70b (on the simulator ``core``, the process's by default),
    each routed to node k mod 4, and each node's :func:`decode_step_left_s` at
    every arrival."""
    window = next(windows("rising_load", split="val", limit=1))
    sim = Simulator(setup_cluster("70b_h100x4"), window, SimConfig(causal_kv=True), core=core)
    encoder = ObservationEncoder(sim.n_nodes, compiled=compiled, step_wait=step_wait)
    encoder.reset()
    decisions = sim.decisions()
    request = next(decisions)
    rows, left = [], []
    for k in range(steps):
        left.append([decode_step_left_s(node, sim.now) for node in sim.nodes])
        rows.append(encoder.encode(sim, request).copy())
        request = decisions.send(k % sim.n_nodes)
    return np.array(rows), left


def test_the_steps_by_an_elapsed_time_are_the_fewest_that_take_that_long() -> None:
    """``NodeCosts.decode_steps_by`` (the simulator's cut of a decode segment)
    against counting steps one by one, on segments of several sizes."""
    cluster = setup_cluster("70b_h100x4")
    costs = NodeCosts(cluster.nodes[0], cluster.model)
    rng = np.random.default_rng(0)
    for _ in range(200):
        batch = int(rng.integers(1, 257))
        context = int(rng.integers(batch, 4_000_000))
        elapsed = float(rng.uniform(0.0, 2.0))
        steps = 0
        while costs.decode_s(steps, batch, context) < elapsed:
            steps += 1
        assert costs.decode_steps_by(elapsed, batch, context) == steps


def test_the_rest_of_a_step_by_hand() -> None:
    """A decoding node's rest of its step: its segment's first step boundary at
    or after now, counted step by step from the segment's start with the step
    time of the docs (weights once a step plus every running sequence's KV)."""
    window = next(windows("rising_load", split="val", limit=1))
    sim = Simulator(setup_cluster("70b_h100x4"), window, SimConfig(causal_kv=True))
    decisions = sim.decisions()
    next(decisions)
    checked = 0
    for k in range(400):
        for node in sim.nodes:
            left = decode_step_left_s(node, sim.now)
            if node.work != DECODE:
                assert left == 0.0
                continue
            costs, b, ctx = node.costs, node.seg_batch, node.seg_ctx
            boundary, step = node.seg_start, 0
            while boundary < sim.now and step < node.seg_steps:
                # step k (from 0) reads the weights and ctx + b k tokens of KV
                kv_tokens = ctx + b * step
                boundary += costs.decode_weight_s + costs.decode_kv_s_per_token * kv_tokens
                step += 1
            expected = max(min(boundary, node.work_end) - sim.now, 0.0)
            assert left == pytest.approx(expected, rel=1e-9, abs=1e-12)
            assert 0.0 <= left <= costs.decode_s(1, b, ctx + b * (step - 1)) * (1 + 1e-9)
            checked += 1
        decisions.send(k % sim.n_nodes)
    assert checked > 100  # the window keeps nodes decoding


needs_compiled = pytest.mark.skipif(
    CompiledSimulator is None, reason="the compiled core is not built or not chosen"
)


@needs_compiled
@pytest.mark.parametrize("causal_kv", [True, False])
def test_the_compiled_rest_of_a_step_is_the_reference_s_to_the_bit(causal_kv: bool) -> None:
    """The compiled core's ``Node.step_left_s`` (what the compiled observation
    reads) equals :func:`decode_step_left_s` exactly at every node of 600
    arrivals: the rest of a decoding node's step, 0 for any other node (under the
    reference KV model one held by decode overshoot's ``free_s`` too: that wait is
    its work left)."""
    window = next(windows("rising_load", split="val", limit=1))
    sim = Simulator(
        setup_cluster("70b_h100x4"), window, SimConfig(causal_kv=causal_kv), core="compiled"
    )
    decisions = sim.decisions()
    next(decisions)
    decoding = held = 0
    for k in range(600):
        for node in sim.nodes:
            left = node.step_left_s(sim.now)
            assert left == decode_step_left_s(node, sim.now)
            assert node.work == DECODE or left == 0.0
            decoding += node.work == DECODE and left > 0
            held += node.work != DECODE and node.free_s > sim.now
        decisions.send(k % sim.n_nodes)
    assert decoding > 100
    assert (held > 0) == (not causal_kv)  # a node held by overshoot: reference only


def test_the_compiled_rows_read_a_python_core_s_nodes_too() -> None:
    """On the Python core's nodes the compiled rows take the rest of a step from
    the reference function: the same observations as the Python encoder's."""
    compiled, _ = _run(300, True, True, core="python")
    assert np.array_equal(compiled, _run(300, True, False, core="python")[0])


@pytest.mark.parametrize("compiled", [True, False])
def test_it_adds_the_rest_of_the_step_to_backlog_and_first_token(compiled: bool) -> None:
    """Off, the rows are as before; on, only backlog, first_token and the gap move,
    and only where a node is decoding; the compiled and Python rows agree."""
    plain, left = _run(300, False, compiled)
    shifted, _ = _run(300, True, compiled)
    assert np.array_equal(_run(300, False, not compiled)[0], plain)
    assert np.array_equal(_run(300, True, not compiled)[0], shifted)
    changed = np.flatnonzero((plain != shifted).any(axis=0))
    assert changed.size > 0
    assert set(changed % WIDTH) <= SHIFTED and changed.max() < 4 * WIDTH
    for k, lefts in enumerate(left):
        for j, seconds in enumerate(lefts):
            row = slice(j * WIDTH, (j + 1) * WIDTH)
            backlog = NODE_FEATURES.index("backlog")
            moved = plain[k, row][backlog] != shifted[k, row][backlog]
            if seconds == 0.0:
                assert not moved
            elif seconds > 1e-6:  # (a smaller one may vanish in float32 rounding)
                assert moved


def test_it_is_an_env_and_agent_option() -> None:
    assert observation_options({"step_wait": True})["step_wait"] is True
    assert observation_options({})["step_wait"] is False
    with pytest.raises(ValueError, match="step_wait must be true or false"):
        RouteWarmEnv(n_windows=1, step_wait="yes")
    with pytest.raises(ValueError, match="step_wait is an option of btb/Route-v0"):
        ThresholdsEnv(n_windows=1, step_wait=True)
    env = RouteWarmEnv(setup="70b_h100x4", workload="rising_load", n_windows=1, step_wait=True)
    obs, _ = env.reset(seed=0)
    agent = AgentPolicy.load("agents/zoo/improve_warm")
    agent.spec.env_kwargs["step_wait"] = True
    assert env.sim is not None and env.request is not None
    agent.reset(env.sim)
    assert agent._encoder is not None and agent._encoder.step_wait
    assert np.array_equal(agent._encoder.encode(env.sim, env.request)[: obs.size], obs)


def test_the_zoo_agent_is_improve_warm_reference_with_the_option() -> None:
    """``agents/zoo/improve_warm_step``: improve_warm_reference's weights byte for
    byte, and its agent.json but for the name, ``step_wait`` and the agent it started
    from (improve_warm_reference, before those it started from)."""
    import json
    import zipfile
    from pathlib import Path

    zoo = Path("agents/zoo")
    step, reference = zoo / "improve_warm_step", zoo / "improve_warm_reference"
    with (
        zipfile.ZipFile(step / "model.zip") as ours_zip,
        zipfile.ZipFile(reference / "model.zip") as theirs_zip,
    ):
        assert ours_zip.read("policy.pth") == theirs_zip.read("policy.pth")
    ours = json.loads((step / "agent.json").read_text())
    theirs = json.loads((reference / "agent.json").read_text())
    assert ours["env_kwargs"].pop("step_wait") is True
    assert (ours.pop("name"), theirs.pop("name")) == ("improve_warm_step", "improve_warm_reference")
    first, *rest = ours.pop("started_from")
    assert first["agent"] == "agents/zoo/improve_warm_reference"
    assert first["registered_windows"] == theirs.pop("registered_windows")
    assert rest == theirs.pop("started_from")
    ours.pop("registered_windows")  # its own run's (it trains on none of them)
    assert ours == theirs


@pytest.mark.slow
def test_its_experiment_rebuilds_the_zoo_agent(tmp_path) -> None:
    """``+experiment=improve_warm_step`` saves improve_warm_reference's weights with
    the option: the zoo agent's ``policy.pth`` to the byte, and its agent.json but for
    the name (the zoo names its agents by hand)."""
    import json
    import zipfile
    from pathlib import Path

    from experiments.train import train
    from tests.experiments.test_hydra_commands import compose_train

    train(compose_train(["+experiment=improve_warm_step", f"out_dir={tmp_path}"]))
    zoo = Path("agents/zoo/improve_warm_step")
    with (
        zipfile.ZipFile(tmp_path / "agent" / "model.zip") as ours,
        zipfile.ZipFile(zoo / "model.zip") as theirs,
    ):
        assert ours.read("policy.pth") == theirs.read("policy.pth")
    ours_json = json.loads((tmp_path / "agent" / "agent.json").read_text())
    theirs_json = json.loads((zoo / "agent.json").read_text())
    assert ours_json["env_kwargs"]["step_wait"] is True
    assert theirs_json.pop("name") == "improve_warm_step"
    ours_json.pop("name")
    # started from improve_warm_reference, with the burst_families windows its
    # run used: 20 train windows, 8 validation windows
    earlier = ours_json["started_from"][0]
    assert earlier["agent"] == "agents/zoo/improve_warm_reference"
    (record,) = earlier["registered_windows"]
    assert record["workload"] == "burst_families"
    assert [len(record[s]) for s in ("train", "val")] == [20, 8]
    assert ours_json == theirs_json


def test_the_batched_evaluation_path_reads_it_too() -> None:
    """``evaluate`` and ``compare`` serve windows in lockstep (one batched forward
    pass): with the option, the same routes as one window at a time, and not
    those of the agent without it."""
    from agents.lockstep import run_lockstep

    cluster = setup_cluster("70b_h100x4")
    pool = list(windows("rising_load", split="val", limit=2))
    agent = AgentPolicy.load("agents/zoo/improve_warm_step")
    alone = [list(agent.run(Simulator(cluster, w, SimConfig(causal_kv=True))).node) for w in pool]
    sims = [Simulator(cluster, w, SimConfig(causal_kv=True)) for w in pool]
    assert [list(records.node) for records in run_lockstep(agent, sims)] == alone
    without = AgentPolicy.load("agents/zoo/improve_warm_reference")
    assert (
        list(without.run(Simulator(cluster, pool[0], SimConfig(causal_kv=True))).node) != alone[0]
    )


@needs_compiled
def test_under_decode_overshoot_a_segment_not_started_yet_is_cut_to_nothing() -> None:
    """Decode overshoot (the reference KV model's default) can start a node's next
    decode segment at the end of a step run past an arrival, later than now. An
    admission now cuts that segment to no steps (it used to give -1 steps, which
    walked the batch back a step), and the rest of the step is the wait until the
    segment's start; a node not decoding waits for no step: its wait for
    ``free_s`` (idle, or in the work it starts then) is its work left. Both cores
    give the same run on such a window."""
    cluster = setup_cluster("70b_h100x4")
    costs = NodeCosts(cluster.nodes[0], cluster.model)
    assert costs.decode_steps_by(-0.0155, 2, 9808) == 0
    assert costs.decode_steps_by(0.0, 2, 9808) == 0
    window = next(windows("rising_load", split="val", limit=1))
    runs = []
    for core in ("python", "compiled"):
        sim = Simulator(cluster, window, SimConfig(causal_kv=False), core=core)
        decisions = sim.decisions()
        request = next(decisions)
        future = 0
        try:
            for _ in range(3000):
                for node in sim.nodes:
                    left = decode_step_left_s(node, sim.now)
                    if node.work == DECODE and node.seg_start > sim.now:
                        future += 1
                        assert left == node.seg_start - sim.now
                    elif node.work != DECODE:
                        assert left == 0.0
                        assert work_left_s(node, sim.now) >= max(node.free_s - sim.now, 0.0)
                request = decisions.send(request.index % sim.n_nodes)
        except StopIteration:
            pass
        assert future > 10
        runs.append((list(sim.records.first_token_s), [n.decode_s for n in sim.nodes]))
    assert runs[0] == runs[1]
