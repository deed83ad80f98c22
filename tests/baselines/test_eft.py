"""The earliest-first-token router (``eft``) and BTB with it as its fallback
(``btb_eft``) on hand-built states whose first-token times are worked out from
the cost model."""

from __future__ import annotations

import pytest
from statekit import BT, cluster_state, prefix, request

from baselines import make_policy
from envs.sim.forecast import first_token_estimates

HOT = prefix(256)  # 65,536 tokens, cached on node 0
ASK = request((*HOT, 9_999))  # the hot prefix and one block of its own


def _queued_state(queued: int):  # type: ignore[no-untyped-def]
    """Two nodes: node 0 holds HOT and has ``queued`` cold 65,536-token requests
    waiting (nothing cached of theirs); node 1 is empty and cold."""
    sim = cluster_state([0, 0], cached=[HOT, []])
    node = sim.nodes[0]
    for k in range(queued):
        node.queue.append(request(prefix(256, start=100_000 * (k + 1)), index=k + 1))
    return sim


@pytest.mark.parametrize(("queued", "eft_node"), [(0, 0), (2, 1)])
def test_eft_weighs_the_cached_prefix_against_the_queue_ahead(queued: int, eft_node: int) -> None:
    sim = _queued_state(queued)
    costs = sim.nodes[0].costs  # both nodes are 4xH100
    n_in = len(ASK.blocks) * BT
    # node 0: its queue's cold prefills, then ASK's last block on top of the cached prefix
    on_0 = queued * costs.prefill_s(256 * BT, 0) + costs.prefill_s(BT, 256 * BT)
    on_1 = costs.prefill_s(n_in, 0)  # node 1: the whole prompt, cold
    (_, first_0), (_, first_1) = first_token_estimates(sim, ASK)
    assert first_0 == pytest.approx(on_0, rel=1e-12)
    assert first_1 == pytest.approx(on_1, rel=1e-12)
    assert (on_1 < on_0) == (eft_node == 1)
    assert make_policy("eft").decide(sim, ASK) == eft_node
    assert make_policy("cache_aware").decide(sim, ASK) == 0  # the longest match, whatever the queue


def test_eft_step_counts_the_rest_of_the_decode_step_in_progress() -> None:
    """Both nodes hold HOT. Node 0 is decoding: 8 sequences holding 1,000,000 KV
    tokens, one step begun 1 ms ago. Node 1 has one cold one-block request
    queued. ``eft`` counts node 0 free and sends ASK there; ``eft_step`` adds
    the rest of node 0's step (its weights and KV read once, less the 1 ms)
    and sends ASK to node 1, whose queue takes less."""
    from envs.sim.node import DECODE

    sim = cluster_state([1, 1], cached=[HOT, HOT], waiting=[0, 1])
    node = sim.nodes[0]
    costs = node.costs
    batch, context = 8, 1_000_000
    node.work, node.seg_start, node.seg_steps = DECODE, -0.001, 50
    node.seg_batch, node.seg_ctx = batch, context
    node.work_end = node.seg_start + costs.decode_s(50, batch, context)
    step = costs.decode_weight_s + costs.decode_kv_s_per_token * context  # the first step
    rest = step - 0.001
    suffix = costs.prefill_s(BT, 256 * BT)  # ASK's own block on top of HOT
    queued = costs.prefill_s(BT, 0)  # node 1's one cold block
    assert queued < rest  # (about 18 ms against 43 ms)
    plain = first_token_estimates(sim, ASK)
    stepped = first_token_estimates(sim, ASK, step_wait=True)
    assert plain[0][1] == pytest.approx(suffix, rel=1e-12)
    assert plain[1][1] == pytest.approx(queued + suffix, rel=1e-12)
    assert stepped[0][1] == pytest.approx(rest + suffix, rel=1e-9)
    assert stepped[1] == plain[1]  # node 1 is not decoding
    assert make_policy("eft").decide(sim, ASK) == 0
    assert make_policy("eft_step").decide(sim, ASK) == 1


def test_btb_eft_routes_an_inactive_prefix_by_eft_and_an_active_one_as_btb() -> None:
    for name, first in (("btb", 0), ("btb_eft", 1)):
        sim = _queued_state(2)
        policy = make_policy(name)
        policy.reset(sim)
        # the first arrival: not active (X=2), so the fallback routes it
        assert policy.decide(sim, ASK) == first, name
        # the second within Z: active; both route to the node holding it and warm node 1
        assert policy.decide(sim, request((*HOT, 8_888), index=9)) == 0, name
        assert [(c.src, c.dst) for c in sim.copies] == [(0, 1)], name


def test_the_published_btb_never_takes_the_eft_fallback() -> None:
    assert make_policy("btb").eft_fallback is False  # type: ignore[attr-defined]
    assert make_policy("btb_pending").eft_fallback is False  # type: ignore[attr-defined]
    assert make_policy("btb_eft").eft_fallback is True  # type: ignore[attr-defined]
