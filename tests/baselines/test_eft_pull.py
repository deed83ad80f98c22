"""``eft_pull`` (``eft_step`` plus a copy of the prefix on demand) on hand-built
states whose first-token times are worked out from the cost model."""

from __future__ import annotations

import pytest
from statekit import BT, cluster_state, prefix, request

from baselines import make_policy
from baselines.eft_pull import pull_option
from envs.sim import SimConfig
from envs.sim.forecast import estimates_with_hits

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
    assert make_policy("eft_step").decide(_state(queued=2), ASK) == 1  # the same node, cold


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
    # a second request with HOT while the copy is in flight: no second copy
    again = request((*HOT, 8_888), index=9)
    assert pull_option(sim, again, estimates_with_hits(sim, again, None, step_wait=True)) is None
    policy.decide(sim, again)
    assert len(sim.copies) == 1


def test_no_holder_no_copy() -> None:
    sim = _state(queued=2)
    fresh = request((*prefix(64, start=500_000), 7), index=3)  # nobody holds its prefix
    assert pull_option(sim, fresh, estimates_with_hits(sim, fresh, None, step_wait=True)) is None
    assert make_policy("eft_pull").decide(sim, fresh) == make_policy("eft_step").decide(sim, fresh)
    assert sim.copies == []
