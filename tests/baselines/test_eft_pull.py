"""``eft_pull`` (``eft_step`` plus a copy of the prefix on demand) on hand-built
states whose first-token times are worked out from the cost model, and on a
short run whose pulled request's first token comes when the estimate said."""

from __future__ import annotations

import numpy as np
import pytest
from statekit import BT, cluster_state, prefix, request

from baselines import make_policy
from baselines.eft_pull import pull_option
from envs.sim import ClusterSpec, SimConfig, Simulator
from envs.sim.forecast import estimates_with_hits
from envs.sim.request import Workload

HOT = prefix(256)  # 65,536 tokens
ASK = request((*HOT, 9_999))  # the hot prefix and one block of its own
LATENCY_S = 0.002


def approx(value: float) -> object:
    return pytest.approx(value, rel=1e-12)


def _state(queued: int, cached_1: tuple[int, ...] = ()):  # type: ignore[no-untyped-def]
    """Two nodes, a 2 ms transfer latency: node 0 holds HOT with ``queued`` cold
    65,536-token requests waiting; node 1 is idle and holds ``cached_1``."""
    sim = cluster_state(
        [0, 0], cached=[HOT, cached_1], config=SimConfig(transfer_latency_s=LATENCY_S)
    )
    for k in range(queued):
        sim.nodes[0].queue.append(request(prefix(256, start=100_000 * (k + 1)), index=k + 1))
    return sim


def test_it_copies_the_prefix_to_the_idle_node_when_the_holder_is_queued() -> None:
    sim = _state(queued=2)
    target = sim.nodes[1]
    costs = target.costs
    suffix = costs.prefill_s(BT, 256 * BT)  # ASK's own block on top of HOT
    on_0 = 2 * costs.prefill_s(256 * BT, 0) + suffix  # the queue, then the suffix
    cold_1 = costs.prefill_s(257 * BT, 0)  # the whole prompt on node 1
    copy = LATENCY_S + 256 * BT * costs.kv_bytes_per_token / target.spec.rdma_bw
    pulled = copy + suffix
    # (eft_step alone sends ASK to node 1 cold; the copy is sooner than both)
    assert pulled < cold_1 < on_0
    estimates = estimates_with_hits(sim, ASK, None, step_wait=True)
    assert [first for _, first, _ in estimates] == [
        approx(on_0),
        approx(cold_1),
    ]
    source, dst, first = pull_option(sim, ASK, estimates)  # type: ignore[misc]
    assert (source, dst) == (0, 1)
    assert first == approx(pulled)
    assert make_policy("eft_pull").decide(sim, ASK) == 1
    assert [(c.src, c.dst, c.n_blocks) for c in sim.copies] == [(0, 1, 256)]


def test_it_routes_to_the_holder_when_the_copy_is_not_sooner() -> None:
    sim = _state(queued=0)
    suffix = sim.nodes[0].costs.prefill_s(BT, 256 * BT)
    estimates = estimates_with_hits(sim, ASK, None, step_wait=True)
    assert estimates[0][1] == approx(suffix)
    _, _, first = pull_option(sim, ASK, estimates)  # type: ignore[misc]
    assert first > suffix  # the same suffix, after the copy
    assert make_policy("eft_pull").decide(sim, ASK) == 0
    assert sim.copies == []


def test_it_copies_only_the_missing_blocks_and_never_twice() -> None:
    sim = _state(queued=2, cached_1=HOT[:200])  # node 1 holds the first 200 blocks
    costs = sim.nodes[1].costs
    copy = LATENCY_S + 56 * BT * costs.kv_bytes_per_token / sim.nodes[1].spec.rdma_bw
    estimates = estimates_with_hits(sim, ASK, None, step_wait=True)
    _, _, first = pull_option(sim, ASK, estimates)  # type: ignore[misc]
    assert first == approx(copy + costs.prefill_s(BT, 256 * BT))
    policy = make_policy("eft_pull")
    assert policy.decide(sim, ASK) == 1
    assert [(c.src, c.dst, c.n_blocks) for c in sim.copies] == [(0, 1, 56)]
    # while that copy is in flight, node 1 will hold HOT: no second copy
    again = request((*HOT, 8_888), index=9)
    assert pull_option(sim, again, estimates_with_hits(sim, again, None, step_wait=True)) is None


def test_no_second_copy_of_a_prefix_of_a_copy_in_flight() -> None:
    sim = _state(queued=2)  # node 1 cold
    assert make_policy("eft_pull").decide(sim, ASK) == 1  # HOT's 256 blocks on their way
    shorter = request((*HOT[:200], 8_888), index=9)  # the simulator would take this copy
    assert (
        pull_option(sim, shorter, estimates_with_hits(sim, shorter, None, step_wait=True)) is None
    )


def test_no_holder_no_copy() -> None:
    sim = _state(queued=2)
    fresh = request((*prefix(64, start=500_000), 7), index=3)  # nobody holds its prefix
    assert pull_option(sim, fresh, estimates_with_hits(sim, fresh, None, step_wait=True)) is None
    assert make_policy("eft_pull").decide(sim, fresh) == make_policy("eft_step").decide(sim, fresh)
    assert sim.copies == []


def test_the_source_is_the_holder_with_the_least_backlog() -> None:
    """Three nodes: 0 and 1 hold HOT with 2 and 1 cold requests queued, node 2 is
    idle and cold: the copy to node 2 comes from node 1."""
    sim = cluster_state([0, 0, 0], cached=[HOT, HOT, []])
    for node, queued in ((0, 2), (1, 1)):
        for k in range(queued):
            cold = request(prefix(256, start=100_000 * (10 * node + k + 1)), index=10 * node + k)
            sim.nodes[node].queue.append(cold)
    assert make_policy("eft_pull").decide(sim, ASK) == 2
    assert [(c.src, c.dst) for c in sim.copies] == [(1, 2)]


class _Scripted:
    """Routes the requests in ``routes`` as given (``(node, (src, dst, blocks))``
    also starts a copy), asks ``eft_pull`` about the last one and keeps its estimate."""

    def __init__(self, routes: dict[int, tuple[int, tuple[int, int, tuple[int, ...]] | None]]):
        self.routes = routes
        self.pull = make_policy("eft_pull")
        self.asked: tuple[float, tuple[int, int, float] | None] | None = None

    def decide(self, sim, r):  # type: ignore[no-untyped-def]
        if r.index in self.routes:
            node, copy = self.routes[r.index]
            if copy is not None:
                assert sim.warm(*copy) == "ok"
            return node
        estimates = estimates_with_hits(sim, r, None, step_wait=True)
        self.asked = (sim.now, pull_option(sim, r, estimates))
        return self.pull.decide(sim, r)


@pytest.mark.parametrize("copy_queued", [False, True])
def test_the_estimate_is_when_the_pulled_request_s_first_token_comes(copy_queued: bool) -> None:
    """Run to the end: request 0 computes HOT on node 0 at t=0; at t=100 two cold
    65,536-token requests go to node 0 and ASK arrives. Node 1 is idle, or (with
    ``copy_queued``) prefilling 128 cold blocks with a copy of another 256-block
    prefix queued on it. ``eft_pull`` copies HOT to node 1, and ASK's first token
    comes when ``pull_option`` said (the HBM read of a hit, which the cost model
    leaves out, off)."""
    other = prefix(256, start=700_000)
    reqs = [request((*HOT, 50_000), 0.0, 0), request((*other, 60_000), 10.0, 1)]
    routes: dict[int, tuple[int, tuple[int, int, tuple[int, ...]] | None]] = {
        0: (0, None),
        1: (0, None),
    }
    k = 2
    if copy_queued:
        reqs.append(request(prefix(128, start=300_000), 100.0, k))
        reqs.append(request(prefix(8, start=900_000), 100.0, k + 1))
        routes[k], routes[k + 1] = (1, None), (0, (0, 1, other))
        k += 2
    for j in range(2):
        reqs.append(request(prefix(256, start=100_000 * (j + 1)), 100.0, k))
        routes[k] = (0, None)
        k += 1
    reqs.append(request((*HOT, 9_999), 100.0, k))
    config = SimConfig(transfer_latency_s=LATENCY_S, hbm_hit_load=False)
    cluster = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 2)
    sim = Simulator(cluster, Workload("w", BT, reqs), config, np.random.default_rng(0))
    policy = _Scripted(routes)
    records = sim.run(policy)
    assert policy.asked is not None
    now, pulled = policy.asked
    assert pulled is not None and pulled[:2] == (0, 1)
    assert records.node[k] == 1
    assert [c.n_blocks for c in sim.copies if c.key == HOT[-1]] == [256]
    assert records.first_token_s[k] - now == approx(pulled[2])
