"""Property-based runs: random small workloads on the toy cluster, routed at
random with random warm and evict actions under random settings, must keep
every invariant: all requests finish once, budgets and cache capacities hold
at every decision point, caches stay consistent and (causal KV) nothing is
reused or copied before it exists."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from simkit import (
    BLOCK_BYTES,
    Prompts,
    Script,
    check_causal,
    check_nodes,
    check_run,
    toy_cluster,
)

from envs.sim import SimConfig, Simulator

N_NODES = 3

request_st = st.tuples(
    st.floats(0.0, 0.4, allow_nan=False),  # arrival
    st.integers(0, 2),  # which shared stem
    st.integers(1, 6),  # shared blocks
    st.integers(0, 2),  # own blocks
    st.integers(0, 15),  # tokens short of full blocks
    st.integers(1, 24),  # output tokens
    st.integers(0, N_NODES - 1),  # route
)
action_st = st.one_of(
    st.tuples(  # from the node a chosen earlier request was routed to, its shared prefix
        st.just("warm_like"),
        st.integers(0, 13),
        st.integers(0, N_NODES - 1),
        st.integers(1, 7),
        st.just(0),
    ),
    st.tuples(
        st.just("warm"),
        st.integers(0, N_NODES - 1),
        st.integers(0, N_NODES - 1),
        st.integers(0, 2),
        st.integers(0, 7),
    ),
    st.tuples(
        st.just("evict"),
        st.integers(0, N_NODES - 1),
        st.integers(0, 2),
        st.integers(1, 7),
        st.integers(0, 3),
    ),
)
config_st = st.builds(
    SimConfig,
    copy_model=st.sampled_from(["reference", "contention"]),
    max_batch=st.sampled_from([1, 2, 256]),
    host_ram_bytes=st.sampled_from([math.inf, 0.0, 2 * BLOCK_BYTES, 5 * BLOCK_BYTES]),
    disk_tier=st.booleans(),
    transfer_latency_s=st.sampled_from([0.0, 1e-3]),
    attention_flops=st.booleans(),
    chunked_prefill_tokens=st.sampled_from([0, 16, 40]),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    requests=st.lists(request_st, min_size=1, max_size=14),
    actions=st.dictionaries(st.integers(0, 13), st.lists(action_st, max_size=3), max_size=6),
    config=config_st,
)
def test_random_runs_keep_every_invariant(
    requests: list[tuple], actions: dict[int, list[tuple]], config: SimConfig
) -> None:
    p = Prompts()
    stems = [[f"s{k}-{i}" for i in range(7)] for k in range(3)]
    for j, (arrival, stem, shared, own, short, output, _) in enumerate(requests):
        raw = stems[stem][:shared] + [f"own{j}-{i}" for i in range(own)]
        p.add(arrival, raw, input_tokens=max(len(raw) * 16 - short, 1), output_tokens=output)
    routes_by_id = {f"r{j}": r[-1] for j, r in enumerate(requests)}
    workload = p.workload()  # sorts by arrival and renumbers
    routes = [routes_by_id[r.request_id] for r in workload.requests]

    def make(act: tuple):  # type: ignore[no-untyped-def]
        kind, a, b, c, d = act
        if kind == "warm_like":
            j = a % len(requests)
            src, blocks = requests[j][-1], p.blocks(stems[requests[j][1]][: min(c, requests[j][2])])
            return lambda sim: (check_nodes(sim), sim.warm(src, b, blocks))[1]
        if kind == "warm":
            blocks = p.blocks(stems[c][: max(d, 1)])
            return lambda sim: (check_nodes(sim), sim.warm(a, b, blocks))[1]
        blocks = p.blocks(stems[b][:c])
        return lambda sim: (check_nodes(sim), sim.evict(a, blocks, keep_blocks=d))[1]

    script = Script(routes, {i: [make(a) for a in acts] for i, acts in actions.items()})
    sim = Simulator(toy_cluster(N_NODES, budget_tokens=256), workload, config)
    sim.run(script)
    check_run(sim)
    assert check_causal(sim) == []
    for results in script.results.values():
        for result in results:
            assert isinstance(result, int) or result in ("ok", *sim.warm_refused)
    n_warms = sum(
        1
        for i, acts in actions.items()
        if i < len(workload.requests)
        for a in acts
        if a[0].startswith("warm")
    )
    assert sum(sim.warm_refused.values()) + len(sim.copies) == n_warms
