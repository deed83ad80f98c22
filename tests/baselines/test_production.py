"""The production routers pick what their formulas say."""

from __future__ import annotations

import math

import pytest
from statekit import BT, cluster_state, prefix, request

from baselines import make_policy
from baselines.production import DynamoKV
from envs.sim import ClusterSpec, SimConfig, Simulator
from envs.sim.forecast import decode_context_tokens
from envs.sim.request import Request, Workload
from envs.sim.timing import NodeCosts
from tests.sim.simkit import CORES

TEN = prefix(10)


# ---------------------------------------------------------------- sglang
@pytest.mark.parametrize(
    ("cached_blocks", "threshold", "expected"),
    [
        (3, 0.3, 1),  # match rate 3/10 = 0.3 is not above the threshold: least load
        (4, 0.3, 0),  # 0.4 > 0.3: the best-matching node, despite its load
        (4, 0.5, 1),  # a higher threshold: least load again
        (10, 0.99, 0),
    ],
)
def test_sglang_honours_its_cache_threshold(
    cached_blocks: int, threshold: float, expected: int
) -> None:
    sim = cluster_state([2, 1, 3, 4], cached=[prefix(cached_blocks), [], [], []])
    policy = make_policy("sglang", cache_threshold=threshold)
    assert policy.decide(sim, request(TEN)) == expected


@pytest.mark.parametrize(
    ("loads", "expected"),
    [
        ([70, 5, 6, 6], 1),  # 70 - 5 = 65 > 64 and 70 > 7.5: imbalanced, least load
        ([69, 5, 6, 6], 0),  # 69 - 5 = 64 is not above 64: cache routing
        ([200, 134, 150, 150], 0),  # 66 > 64 but 200 <= 1.5 x 134 = 201
        ([202, 134, 150, 150], 1),  # 202 > 201: imbalanced
    ],
)
def test_sglang_balance_thresholds_are_absolute_and_relative(
    loads: list[int], expected: int
) -> None:
    sim = cluster_state(loads, cached=[TEN, [], [], []])
    assert make_policy("sglang").decide(sim, request(TEN)) == expected


def one_id_prompt() -> Request:
    """A 10-block prompt (2,560 tokens) whose trace gave one block id: its other
    nine blocks are cached nowhere (a trace read with ``strict_block_count=false``)."""
    return Request(0, "q", 0.0, 10 * BT, 1, (1,))


def test_sglang_rates_a_match_over_the_blocks_the_prompt_fills() -> None:
    """An audit found the rate taken over the prompt's block ids: node 0's one
    block of ten rated 1.0 and drew the request there, past the lighter nodes."""
    sim = cluster_state([40, 2, 1, 3], cached=[prefix(1), [], [], []])
    assert make_policy("sglang").decide(sim, one_id_prompt()) == 2  # 0.1 <= 0.3: least load
    assert make_policy("sglang", cache_threshold=0.05).decide(sim, one_id_prompt()) == 0


def test_sglang_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match=r"sglang\.cache_threshold"):
        make_policy("sglang", cache_threshold=1.5)


@pytest.mark.parametrize(
    ("name", "setting"),
    [("sglang", "balance_abs"), ("sglang", "balance_rel"), ("dynamo", "overlap_weight"),
     ("dynamo", "temperature"), ("llmd", "queue_weight"), ("llmd", "kv_weight"),
     ("llmd", "prefix_weight")],
)  # fmt: skip
def test_an_infinite_weight_or_threshold_is_refused(name: str, setting: str) -> None:
    """helper-77's audit: llmd.prefix_weight=inf ended in an IndexError inside its
    pick (inf - inf scores), dynamo.overlap_weight=inf routed on NaN costs, and
    sglang took an infinite balance_abs that cache_aware refuses."""
    with pytest.raises(ValueError, match=rf"^{name}\.{setting} must be a finite number"):
        make_policy(name, **{setting: math.inf})


# ---------------------------------------------------------------- dynamo
def dynamo_state():  # type: ignore[no-untyped-def]
    """Node 0 holds 6 of the request's 10 blocks and decodes 1,000 context tokens
    (4 blocks); node 1 holds nothing and decodes nothing."""
    sim = cluster_state([1, 0], cached=[prefix(6), []])
    sim.nodes[0].ctx_tokens = 1000
    return sim


def test_dynamo_cost_is_weighted_prefill_blocks_plus_decode_blocks() -> None:
    sim = dynamo_state()
    policy = make_policy("dynamo")
    policy.reset(sim)
    assert policy.costs(sim, request(TEN)) == [1.0 * 4 + 4, 1.0 * 10 + 0]
    assert policy.decide(sim, request(TEN)) == 0
    light = make_policy("dynamo", overlap_weight=0.25)
    light.reset(sim)
    assert light.costs(sim, request(TEN)) == [0.25 * 4 + 4, 0.25 * 10 + 0]
    assert light.decide(sim, request(TEN)) == 1


def test_dynamo_counts_prefill_still_to_compute_until_the_first_token() -> None:
    sim = dynamo_state()
    policy = make_policy("dynamo")
    policy.reset(sim)
    first = request(TEN, index=0)
    assert policy.decide(sim, first) == 0  # 4 new blocks now pending on node 0
    second = request(TEN, index=1)
    assert policy.costs(sim, second) == [(4 + 4) + 4, 10]
    assert policy.decide(sim, second) == 1
    sim.first_token_log.append(first)  # node 0 finished the first prefill
    assert policy.costs(sim, request(TEN, index=2)) == [4 + 4, 10 + 10]


def test_dynamo_temperature_samples_a_softmax_of_normalised_costs() -> None:
    sim = dynamo_state()
    policy = make_policy("dynamo", temperature=1.0)
    draws = 4000
    zeros = 0
    for _ in range(draws):
        policy.reset(sim)
        zeros += policy.decide(sim, request(TEN)) == 0
    # costs 8 and 10 normalise to 0 and 1: p(node 0) = 1 / (1 + e^-1)
    assert zeros / draws == pytest.approx(1 / (1 + math.exp(-1)), abs=0.03)


# ---------------------------------------------------------------- llm-d
def llmd_state():  # type: ignore[no-untyped-def]
    """Waiting queues 0, 2, 4; KV reserved 1/2, 0, 1/4 of the budget; node 0 holds
    2 of the request's 10 blocks and node 2 all 10."""
    sim = cluster_state([1, 2, 4], waiting=[0, 2, 4], cached=[prefix(2), [], TEN])
    budget = sim.nodes[0].budget_tokens
    for node, share in zip(sim.nodes, (0.5, 0.0, 0.25), strict=True):
        node.reserved_tokens = int(budget * share)
    return sim


def test_llmd_scores_are_the_weighted_sum_of_its_three_scorers() -> None:
    sim = llmd_state()
    policy = make_policy("llmd")
    # queue scores 1, 0.5, 0; KV scores 0.5, 1, 0.75; prefix scores 0.2, 0, 1
    expected = [2 * 1 + 2 * 0.5 + 3 * 0.2, 2 * 0.5 + 2 * 1 + 3 * 0, 2 * 0 + 2 * 0.75 + 3 * 1]
    assert policy.scores(sim, request(TEN)) == pytest.approx(expected, rel=1e-5)
    assert policy.decide(sim, request(TEN)) == 2
    shy = make_policy("llmd", prefix_weight=0.5)  # 3.1, 3.0, 2.0
    assert shy.decide(sim, request(TEN)) == 0


def test_llmd_equal_queues_all_score_one() -> None:
    sim = cluster_state([1, 1], waiting=[1, 1])
    assert make_policy("llmd").scores(sim, request(prefix(4))) == pytest.approx([4.0, 4.0])


def _dynamo_costs_mid_decode(core: str, steps_done: int) -> tuple[list[float], int]:
    """dynamo's costs when a request arrives ``steps_done`` and a half decode steps
    after a 1,024-token prompt's prefill ended on a one-node cluster; and
    ``decode_context_tokens`` of the node then."""
    costs_seen: list[list[float]] = []
    contexts: list[int] = []

    class Recording(DynamoKV):
        def decide(self, sim, request):  # type: ignore[no-untyped-def]
            costs_seen.append(self.costs(sim, request))
            contexts.append(decode_context_tokens(sim.nodes[0], sim.now))
            return super().decide(sim, request)

    cluster = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 1)
    node_costs = NodeCosts.under(SimConfig(), cluster.nodes[0], cluster.model)
    prefill = node_costs.prefill_s(4 * BT, 0)
    ran = node_costs.decode_s(steps_done, 1, 4 * BT)  # one sequence of 1,024 tokens
    step = node_costs.decode_s(steps_done + 1, 1, 4 * BT) - ran
    arrival = prefill + ran + step / 2
    first = Request(0, "a", 0.0, 4 * BT, 1001, prefix(4))  # 1,000 decode steps
    second = Request(1, "b", arrival, 4 * BT, 1, prefix(4, start=100))
    sim = Simulator(cluster, Workload("w", BT, [first, second]), SimConfig(), core=core)
    sim.run(Recording())
    return costs_seen[1], contexts[1]


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize(
    ("steps_done", "decode_blocks"),
    [(0, 4), (1, 5), (255, 5), (256, 5), (257, 6), (600, 7)],  # ceil((1024 + steps) / 256)
)
def test_dynamo_counts_the_decode_steps_run_so_far_in_the_segment(
    core: str, steps_done: int, decode_blocks: int
) -> None:
    """An audit found dynamo reading ``node.ctx_tokens``, the batch's context at the
    start of the decode segment in progress: a request arriving 600 steps into
    one sequence's 1,000-step segment saw 4 blocks (1,024 tokens), not 7 (1,624)."""
    costs, context = _dynamo_costs_mid_decode(core, steps_done)
    assert context == 4 * BT + steps_done
    assert costs == [4 + decode_blocks]  # 4 prompt blocks to prefill, nothing pending


def test_llmd_rates_a_match_over_the_blocks_the_prompt_fills() -> None:
    """The prefix scorer of :func:`one_id_prompt` on the node holding its one id is
    1 / 10, not 1 / 1 (an audit: 7.0 against 4.0)."""
    sim = cluster_state([1, 1, 1], waiting=[1, 1, 1], cached=[prefix(1), [], []])
    scores = make_policy("llmd").scores(sim, one_id_prompt())
    assert scores == pytest.approx([2 + 2 + 3 * 0.1, 4.0, 4.0])


@pytest.mark.parametrize("core", CORES)
def test_dynamo_moves_a_rerouted_request_s_prefill_to_the_node_it_moved_to(core: str) -> None:
    """An audit found dynamo's prefill tally keeping a request the simulator moved
    off a lost node on that node until its first token, elsewhere: a node back from
    a loss looked busy and the one doing the work idle (on 3 `mixed` validation
    windows with random losses, mean TTFT 11.0 s where the moved tally gives 9.0).

    Node 0 holds 20 of request A's 40 blocks, so A goes there with 20 to compute;
    node 0 is lost at 5 ms and A moves to node 1 (the least-loaded node up, the
    lower index). B (10 blocks, cached nowhere) arrives at 10 ms."""
    seen: list[list[float]] = []

    class Recording(DynamoKV):
        def decide(self, sim, request):  # type: ignore[no-untyped-def]
            seen.append(self.costs(sim, request))
            return super().decide(sim, request)

    a = Request(0, "a", 0.0, 40 * BT, 1, prefix(40))
    b = Request(1, "b", 0.01, 10 * BT, 1, prefix(10, start=100))
    config = SimConfig(fault_node_loss_s=(0.005,), fault_node_loss_nodes=(0,))
    cluster = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 3)
    sim = Simulator(cluster, Workload("w", BT, [a, b]), config, core=core)
    sim.nodes[0].cache.insert(prefix(20), 0.0)
    records = sim.run(Recording())
    assert seen[0] == [20, 40, 40]
    assert list(records.node) == [1, 2]
    assert seen[1] == [10 + 0, 10 + 20, 10 + 0]  # node 0 down, A's 20 blocks on node 1


def test_llmd_prefix_score_stays_within_one_when_a_trace_gives_more_ids() -> None:
    """A prompt of 2 blocks' tokens (512) whose trace gave 10 block ids, all of
    them in node 0's HBM: 10 matched over 2 filled would score 5 (3 x 5 = 15, an
    audit); the match counts at most the blocks the prompt fills, as dynamo's does,
    so the score is 1, in [0, 1] as docs/baselines.md says."""
    sim = cluster_state([1, 1], waiting=[1, 1], cached=[TEN, []])
    long_ids = Request(0, "q", 0.0, 2 * BT, 1, tuple(TEN))
    scores = make_policy("llmd").scores(sim, long_ids)
    assert scores == pytest.approx([2 + 2 + 3 * 1.0, 2 + 2 + 3 * 0.0])
