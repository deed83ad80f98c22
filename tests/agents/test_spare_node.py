"""The causal teacher's spare-node rule (``long_prefill_s``; baselines/spare_node.py)."""

from __future__ import annotations

import numpy as np
import pytest

from agents.teacher import CausalTeacher
from baselines.spare_node import spare_choice
from envs.encoder import ShortArrivals
from envs.sim import ClusterSpec, SimConfig, Simulator, setup_cluster
from envs.sim.forecast import INF
from envs.sim.request import Workload
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window
from tests.baselines.statekit import BT, request

# llama-70b on 4xH100: 2 x 70.6e9 FLOP a token / (4 x 989e12 x 0.5) = 71.39 us a token
TOKEN_S = 2 * 70.6e9 / (4 * 989e12 * 0.5)
LONG_S = 64 * BT * TOKEN_S  # a cold 64-block (16,384-token) prompt: 1.1697 s


def test_spare_choice_weighs_the_short_requests_wait_against_the_move() -> None:
    # Node 0 gives the long request (4 s of its own) its first token in 4 s;
    # nodes 1 and 2 are busy for 2 and 3 s, so there in 6 and 7 s. Staying blocks
    # the short requests for min(4, 2, 3) = 2 s: at r a second they wait
    # r x 2**2 / 2 = 2r s in total; moving to node 1 costs 6 - 4 = 2 s. Moved
    # when 2r > 2.
    first, backlog, loads = [4.0, 6.0, 7.0], [0.0, 2.0, 3.0], [0, 5, 5]
    assert spare_choice(0, first, 4.0, backlog, [0, 1, 2], loads, 1.5, 1.0) == 1
    assert spare_choice(0, first, 4.0, backlog, [0, 1, 2], loads, 1.0, 1.0) == 0  # 2 = 2: stays
    assert spare_choice(0, first, 4.0, backlog, [0, 1, 2], loads, 9.0, 5.0) == 0  # short
    assert spare_choice(0, first, 4.0, backlog, [0], loads, 9.0, 1.0) == 0  # nowhere else
    # ties in first-token time go to the lower load, then the lower index
    assert spare_choice(0, [4.0, 6.0, 6.0], 4.0, backlog, [0, 1, 2], [0, 5, 4], 9.0, 1.0) == 2


def test_short_arrivals_count_the_window_ending_now() -> None:
    shorts = ShortArrivals(5.0)
    for t in (0.0, 1.0, 2.0):
        shorts.add(t)
    assert shorts.rate_per_s(5.0) == pytest.approx(3 / 5)  # 0.0 is 5 s ago: still in
    assert shorts.rate_per_s(5.5) == pytest.approx(2 / 5)
    shorts.reset()
    assert shorts.rate_per_s(5.5) == 0.0


def _two_nodes(short_arrivals: list[float], teacher: CausalTeacher) -> Simulator:
    """Two idle nodes; a long request at 0 s, short ones at ``short_arrivals``, a
    second long request at 0.5 s. Nothing shares a prefix: nothing is warmed."""
    requests = [request(range(1, 65), 0.0, 0)]
    requests += [request([1000 + i], t, 1 + i) for i, t in enumerate(short_arrivals)]
    requests.append(request(range(101, 165), 0.5, len(requests)))
    cluster = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 2)
    sim = Simulator(cluster, Workload("hand", BT, requests), SimConfig(), np.random.default_rng(0))
    teacher.run(sim)
    return sim


@pytest.mark.parametrize("routing", ["clock", "backlog"])
def test_a_long_prefill_leaves_the_idle_node_to_a_stream_of_short_ones(routing: str) -> None:
    # The first long request takes node 0 until 1.1697 s. Each short one (one
    # 256-token block, 18.3 ms) goes to node 1 and is done before the next. The
    # second long request, at 0.5 s, would get its first token 1.1697 s later on
    # the idle node 1, or 0.6697 + 1.1697 s later behind the first on node 0.
    # Staying blocks short requests for min(1.1697, 0.6697) s; with the last 1 s
    # holding 4 short arrivals (4/s) they would wait 4 x 0.6697**2 / 2 = 0.897 s
    # in total, more than the 0.6697 s the move costs: node 0. With 2 (2/s),
    # 0.449 s, less: node 1, as without the rule.
    four = [0.1, 0.2, 0.3, 0.4]
    rule = {"routing": routing, "long_prefill_s": 1.0, "short_window_s": 1.0}
    sim = _two_nodes(four, CausalTeacher(**rule))  # type: ignore[arg-type]
    assert list(sim.records.node) == [0, 1, 1, 1, 1, 0]
    assert sim.records.ttft_s[-1] == pytest.approx(2 * LONG_S - 0.5, rel=1e-9)
    sim = _two_nodes(four[:2], CausalTeacher(**rule))  # type: ignore[arg-type]
    assert list(sim.records.node) == [0, 1, 1, 1]
    assert sim.records.ttft_s[-1] == pytest.approx(LONG_S, rel=1e-9)
    sim = _two_nodes(four, CausalTeacher(routing=routing))  # the rule off
    assert list(sim.records.node) == [0, 1, 1, 1, 1, 1]
    # a long threshold above the request's 1.1697 s: it is short, it stays
    rule["long_prefill_s"] = 1.2
    sim = _two_nodes(four, CausalTeacher(**rule))  # type: ignore[arg-type]
    assert list(sim.records.node)[-1] == 1


def test_a_recurring_prefix_is_never_moved() -> None:
    # The arrivals that move the second long request above, but with x=1 every
    # prefix of 16 blocks or more recurs from its first arrival: others will
    # wait for its KV, so it stays on node 1, the soonest.
    rule = {"routing": "backlog", "long_prefill_s": 1.0, "short_window_s": 1.0, "x": 1}
    sim = _two_nodes([0.1, 0.2, 0.3, 0.4], CausalTeacher(**rule))  # type: ignore[arg-type]
    assert list(sim.records.node) == [0, 1, 1, 1, 1, 1]


def test_no_hold_is_weighed_while_every_node_drains() -> None:
    """Under ``routing=backlog`` a request arriving while every node drains for an
    upgrade has first token and backlog ``inf`` on each: the rule weighed their
    difference, ``inf - inf`` = NaN (deciding nothing, by comparisons that all fail).
    It weighs no hold then: the request stays where routing chose, as with the rule
    off. Two nodes each prefill a long request from 0 s (1.1697 s) and start
    upgrading at 0.1 s (1 s of weights); a long request at 0.5 s and a one-block one
    at 0.6 s arrive with both draining. Routing picks the least-loaded (ties by index):
    node 0, then node 1 (node 0 holds the first in its queue)."""
    weighed: list[float] = []

    class Probe(CausalTeacher):
        def _may_move(self, sim, hold_s):  # type: ignore[no-untyped-def]
            weighed.append(hold_s)
            return super()._may_move(sim, hold_s)

    requests = [request(range(1, 65), 0.0, 0), request(range(101, 165), 0.0, 1)]
    requests += [request(range(201, 265), 0.5, 2), request([999], 0.6, 3)]
    cluster = ClusterSpec.uniform("llama-3.3-70b", "4xH100", 2)
    upgrade = SimConfig(upgrade_at_s=(0.1, 0.1), upgrade_downtime_s=1.0)
    runs = []
    for teacher in (Probe(routing="backlog", long_prefill_s=1.0), CausalTeacher(routing="backlog")):
        sim = Simulator(cluster, Workload("hand", BT, requests), upgrade, np.random.default_rng(0))
        teacher.run(sim)
        runs.append((list(sim.records.node), list(sim.records.ttft_s)))
    assert weighed == [pytest.approx(LONG_S, rel=1e-9)] * 2  # the two before the upgrade
    ready_s = LONG_S + 1.0  # drained (its request done at its first token), weights in
    assert runs[0][0] == runs[1][0] == [0, 1, 0, 1]
    assert runs[0][1] == pytest.approx(
        [LONG_S, LONG_S, ready_s + LONG_S - 0.5, ready_s + BT * TOKEN_S - 0.6], rel=1e-9
    )
    assert runs[0][1] == runs[1][1]
    with pytest.raises(ValueError, match=r"spare_choice: hold_s is NaN"):
        spare_choice(0, [INF, INF], INF - INF, [INF, INF], [0, 1], [0, 0], 1.0, 1.0)


def _window() -> Workload:
    return synthetic_window(
        BurstedSyntheticConfig(n_bursts=2, burst_requests=40, n_decoys=12, burst_window_s=8.0), 3
    )


def _run(teacher: CausalTeacher, window: Workload) -> Simulator:
    sim = Simulator(setup_cluster("70b_h100x4"), window, SimConfig(), np.random.default_rng(0))
    teacher.run(sim)
    return sim


@pytest.mark.parametrize("routing", ["clock", "backlog"])
def test_the_rule_moves_only_long_requests_and_never_to_a_sooner_node(routing: str) -> None:
    moves: list[tuple[float, int, int, list[float]]] = []

    class Probe(CausalTeacher):
        def _spare(self, sim, choice, first_s, hold_s, backlog_s):  # type: ignore[no-untyped-def]
            result = super()._spare(sim, choice, first_s, hold_s, backlog_s)
            moves.append((hold_s, choice, result, list(first_s)))
            return result

    window = _window()
    on = _run(Probe(routing=routing, long_prefill_s=0.25), window)
    assert moves, "the window has long requests to decide on"
    for hold_s, choice, result, first_s in moves:
        assert hold_s >= 0.25
        assert first_s[result] >= first_s[choice]
    assert any(result != choice for _, choice, result, _ in moves)
    # a threshold no request reaches changes nothing
    off = _run(CausalTeacher(routing=routing), window)
    never = _run(CausalTeacher(routing=routing, long_prefill_s=1e9), window)
    assert list(never.records.node) == list(off.records.node)
    assert np.array_equal(never.records.ttft_s, off.records.ttft_s)
    assert list(on.records.node) != list(off.records.node)


def test_the_rule_is_causal() -> None:
    # The first k requests are routed, and copies issued, alike whether the run
    # holds the whole window or those k requests only.
    window = _window()

    def decisions(k: int, whole: bool) -> tuple[list[int], list[tuple[int, int, int]]]:
        requests = window.requests if whole else window.requests[:k]
        sim = _run(
            CausalTeacher(routing="backlog", long_prefill_s=0.25),
            Workload("w", window.block_tokens, requests),
        )
        until_s = window.requests[k].arrival_s
        copies = [(c.src, c.dst, c.key) for c in sim.copies if c.issued_s < until_s]
        return list(sim.records.node[:k]), copies

    for k in (10, 45, 70):
        assert decisions(k, False) == decisions(k, True)


def test_rule_settings_are_checked() -> None:
    with pytest.raises(ValueError, match=r"causal_teacher\.long_prefill_s must be > 0"):
        CausalTeacher(long_prefill_s=0.0)
    with pytest.raises(ValueError, match=r"causal_teacher\.short_window_s must be > 0"):
        CausalTeacher(long_prefill_s=1.0, short_window_s=float("inf"))
