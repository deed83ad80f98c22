"""``time_unit="reference"``: the observation's durations counted as the seconds the
same prefill work takes on a llama-3.3-70b 4xH100 node."""

from __future__ import annotations

import numpy as np
import pytest

from agents.adapter import AgentPolicy
from envs.encoder import (
    NODE_FEATURES,
    ObservationEncoder,
    cluster_time_scale,
    log_seconds,
    observation_options,
    reference_time_scale,
)
from envs.route import RouteEnv
from envs.route_warm import RouteWarmEnv
from envs.sim import SimConfig, Simulator, setup_cluster
from envs.sim.config import ClusterSpec, model_preset, parse_node
from envs.sim.errors import ConfigError
from envs.sim.forecast import estimates_with_hits
from envs.sim.timing import NodeCosts
from envs.thresholds import ThresholdsEnv
from envs.workloads.registry import windows

WIDTH = len(NODE_FEATURES)
DURATIONS = [NODE_FEATURES.index(name) for name in ("wait", "backlog", "first_token")]


def _rows(
    setup: str, time_unit: str, compiled: bool, steps: int = 600, **options: bool
) -> np.ndarray:
    """The observations of the first ``steps`` arrivals of a validation window,
    each routed to node k mod 4 (the same run for every encoder); ``options``:
    the encoder's ``hints`` and ``spare_features``."""
    window = next(windows("bursted_synthetic", split="val", limit=1))
    sim = Simulator(setup_cluster(setup), window, SimConfig(causal_kv=True))
    encoder = ObservationEncoder(sim.n_nodes, compiled=compiled, time_unit=time_unit, **options)
    encoder.reset()
    decisions = sim.decisions()
    request = next(decisions)
    out = []
    for k in range(steps):
        out.append(encoder.encode(sim, request).copy())
        request = decisions.send(k % sim.n_nodes)
    return np.array(out)


def test_the_factor_is_the_reference_nodes_prefill_time_over_the_clusters() -> None:
    def per_token(setup: str) -> float:
        cluster = setup_cluster(setup)
        return NodeCosts(cluster.nodes[0], cluster.model).prefill_s_per_token

    def factor(setup: str) -> float:
        sim = Simulator(setup_cluster(setup), next(windows("bursted_synthetic", limit=1)))
        return reference_time_scale(sim.nodes)

    assert factor("70b_h100x4") == 1.0  # exactly: the reference itself
    assert factor("qwen3_8b_h100x4") == per_token("70b_h100x4") / per_token("qwen3_8b_h100x4")
    # 8.62 and 2.21 (the two models' FLOPs per token on the same nodes)
    assert factor("qwen3_8b_h100x4") == pytest.approx(8.620, abs=1e-3)
    assert factor("glm45_h100x4") == pytest.approx(2.206, abs=1e-3)


@pytest.mark.parametrize("compiled", [True, False])
def test_on_the_reference_setup_the_observation_is_unchanged(compiled: bool) -> None:
    seconds = _rows("70b_h100x4", "seconds", compiled)
    assert np.array_equal(_rows("70b_h100x4", "reference", compiled), seconds)


def test_compiled_and_python_rows_agree_on_another_model() -> None:
    reference = _rows("qwen3_8b_h100x4", "reference", compiled=True)
    assert np.array_equal(reference, _rows("qwen3_8b_h100x4", "reference", compiled=False))
    # and the durations did change (the rest of each row did not)
    seconds = _rows("qwen3_8b_h100x4", "seconds", compiled=True)
    changed = np.flatnonzero((reference != seconds).any(axis=0))
    assert changed.size > 0
    assert set(changed % WIDTH) <= {*DURATIONS, NODE_FEATURES.index("first_token_gap")}


@pytest.mark.parametrize("options", [{"hints": True}, {"spare_features": True}])
def test_with_the_other_observation_options_too(options: dict[str, bool]) -> None:
    """Hints and spare-node features beside it: the reference setup's observation
    unchanged, and the compiled and Python encoders agree on another model."""
    seconds = _rows("70b_h100x4", "seconds", True, 300, **options)
    assert np.array_equal(_rows("70b_h100x4", "reference", True, 300, **options), seconds)
    reference = _rows("qwen3_8b_h100x4", "reference", True, 300, **options)
    assert np.array_equal(reference, _rows("qwen3_8b_h100x4", "reference", False, 300, **options))
    assert not np.array_equal(reference, _rows("qwen3_8b_h100x4", "seconds", True, 300, **options))


def test_every_duration_is_multiplied_by_the_factor() -> None:
    window = next(windows("bursted_synthetic", split="val", limit=1))
    sim = Simulator(setup_cluster("qwen3_8b_h100x4"), window, SimConfig(causal_kv=True))
    k = reference_time_scale(sim.nodes)
    decisions = sim.decisions()
    request = next(decisions)
    while sim.nodes[0].estimated_wait_s(sim.now) == 0.0:  # every arrival to node 0
        request = decisions.send(0)  # until it has a queue
    encoder = ObservationEncoder(sim.n_nodes, compiled=False, time_unit="reference")
    encoder.reset()
    estimates = estimates_with_hits(sim, request, None)
    wait = sim.nodes[0].estimated_wait_s(sim.now)
    backlog, first, _ = estimates[0]
    best = min(e[1] for e in estimates)
    assert wait > 0 and backlog > 0
    row = encoder.encode(sim, request)[:WIDTH]
    expected = {
        "wait": k * wait / (k * wait + 1.0),
        "backlog": log_seconds(backlog * k),
        "first_token": log_seconds(first * k),
        "first_token_gap": log_seconds((first - best) * k),
    }
    for name, value in expected.items():
        assert row[NODE_FEATURES.index(name)] == np.float32(value), name


def test_bad_values_and_envs_without_it_are_refused() -> None:
    with pytest.raises(ValueError, match="time_unit must be one of seconds, reference"):
        RouteEnv(n_windows=1, time_unit="minutes")
    with pytest.raises(ValueError, match="time_unit is an option of btb/Route-v0") as refused:
        ThresholdsEnv(n_windows=1, time_unit="reference")
    # named as data, so a command writes env.time_unit (from the command line)
    assert getattr(refused.value, "fields", ()) == ("time_unit",)
    ThresholdsEnv(n_windows=1, time_unit="seconds")  # the default is fine
    with pytest.raises(ValueError) as several:  # every one given is named
        ThresholdsEnv(n_windows=1, hints=True, step_wait=True, time_unit="reference")
    assert str(several.value) == (
        "hints, step_wait, time_unit are options of btb/Route-v0 and btb/RouteWarm-v0 only"
    )
    assert getattr(several.value, "fields", ()) == ("hints", "step_wait", "time_unit")
    # taken at their defaults, so a value no route env takes is a bad value, not
    # "an option of the route envs only" (which a string "false" or None is not)
    for name, value, said in (
        ("hints", "false", "must be true or false (a bool), got 'false'"),
        ("step_wait", 0, "must be true or false (a bool), got 0"),
        ("spare_features", None, "must be true or false (a bool), got None"),
        ("time_unit", None, "must be one of seconds, reference, got None"),
        ("time_unit", "minutes", "must be one of seconds, reference, got 'minutes'"),
    ):
        with pytest.raises(ConfigError) as bad:
            ThresholdsEnv(n_windows=1, **{name: value})
        assert str(bad.value) == f"{name} {said}"
        assert bad.value.fields == (name,)
    ThresholdsEnv(n_windows=1, hints=np.bool_(False), step_wait=False, spare_features=False)
    mixed = ClusterSpec(model_preset("llama-3.3-70b"), (parse_node("4xH100"), parse_node("8xH100")))
    with pytest.raises(ValueError, match="time_unit=reference needs nodes that prefill at one"):
        RouteWarmEnv(setup=mixed, n_windows=1, time_unit="reference")  # refused when made
    RouteWarmEnv(setup=mixed, n_windows=1)  # in seconds it runs


def test_the_factor_known_before_a_run_is_the_one_a_run_uses() -> None:
    """An env checks its cluster when it is made (``cluster_time_scale``, from the
    cluster's specs); the encoder takes the factor from the simulator's nodes: the
    same number, on every preset setup and at another ``mfu``."""
    for setup in ("70b_h100x4", "qwen3_8b_h100x4", "glm45_h100x4"):
        for mfu in (0.5, 0.4):
            env = RouteWarmEnv(setup=setup, n_windows=1, sim={"mfu": mfu}, time_unit="reference")
            env.reset(seed=0)
            assert env.sim is not None
            assert cluster_time_scale(env.cluster, env.sim_config) == reference_time_scale(
                env.sim.nodes
            )


def test_an_agent_reads_it_from_its_env_arguments() -> None:
    """The agent adapter builds its encoder from the agent's env arguments, so an
    agent acts on the observation the env shows."""
    assert observation_options({"time_unit": "reference"})["time_unit"] == "reference"
    assert observation_options({})["time_unit"] == "seconds"
    env = RouteWarmEnv(setup="qwen3_8b_h100x4", n_windows=1, time_unit="reference")
    obs, _ = env.reset(seed=0)
    agent = AgentPolicy.load("agents/zoo/improve_spare_no1s")
    agent.spec.env_kwargs["time_unit"] = "reference"
    assert env.sim is not None and env.request is not None
    agent.reset(env.sim)
    assert agent._encoder is not None
    assert agent._encoder.time_unit == "reference"
    assert np.array_equal(agent._encoder.encode(env.sim, env.request)[: obs.size], obs)


def test_the_reference_zoo_agent_is_improve_warm_on_the_reference_setup() -> None:
    """``agents/zoo/improve_warm_reference`` (improve_warm's weights, time_unit
    reference) makes improve_warm's every decision on 70b_h100x4."""
    window = next(windows("bursted_synthetic", split="val", limit=1))
    runs = []
    for name in ("improve_warm", "improve_warm_reference"):
        sim = Simulator(setup_cluster("70b_h100x4"), window, SimConfig(causal_kv=True))
        records = AgentPolicy.load(f"agents/zoo/{name}").run(sim)
        runs.append((list(records.node), list(records.ttft_s), len(sim.copies)))
    assert runs[0] == runs[1]
    assert runs[0][2] > 0  # it warms: the warm bits were compared too


def test_the_batched_evaluation_path_reads_it_too() -> None:
    """``evaluate`` and ``compare`` serve windows in lockstep (one batched forward
    pass); on qwen3-8b that path must scale as the adapter does."""
    from agents.lockstep import run_lockstep

    cluster = setup_cluster("qwen3_8b_h100x4")
    pool = list(windows("bursted_synthetic_1s", split="val", limit=2))
    agent = AgentPolicy.load("agents/zoo/improve_warm_reference")
    alone = [list(agent.run(Simulator(cluster, w, SimConfig(causal_kv=True))).node) for w in pool]
    sims = [Simulator(cluster, w, SimConfig(causal_kv=True)) for w in pool]
    together = [list(records.node) for records in run_lockstep(agent, sims)]
    assert together == alone
    plain = AgentPolicy.load("agents/zoo/improve_warm")
    assert list(plain.run(Simulator(cluster, pool[0], SimConfig(causal_kv=True))).node) != alone[0]
