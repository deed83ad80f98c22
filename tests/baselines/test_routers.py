"""The routing-only rules on hand-built cluster states."""

from __future__ import annotations

import pytest
from statekit import cluster_state, prefix, request

from baselines import make_policy

HOT = prefix(8)  # node 0 holds it in every cache_aware state below


@pytest.mark.parametrize(
    ("loads", "expected"),
    [
        ([64, 10, 10, 10], 0),  # max load 64 is not past 64: longest match
        ([65, 12, 10, 11], 2),  # 65 > 64 and 65 > 1.5 x 10: least load
        ([65, 44, 50, 50], 0),  # 65 > 64 but 65 <= 1.5 x 44 = 66: longest match
        ([66, 44, 50, 50], 0),  # 66 is not past 1.5 x 44
        ([67, 44, 50, 50], 1),  # 67 > 66: least load
    ],
)
def test_cache_aware_falls_back_exactly_past_64_and_1_5x(loads: list[int], expected: int) -> None:
    sim = cluster_state(loads, cached=[HOT, [], [], []])
    assert make_policy("cache_aware").decide(sim, request((*HOT, 100))) == expected


def test_cache_aware_prefers_longest_match_then_lower_load() -> None:
    sim = cluster_state([3, 2, 5, 1], cached=[prefix(6), prefix(6), prefix(7), prefix(2)])
    assert make_policy("cache_aware").decide(sim, request(prefix(8))) == 2
    sim = cluster_state([3, 2, 5, 1], cached=[prefix(6), prefix(6), prefix(5), []])
    assert make_policy("cache_aware").decide(sim, request(prefix(8))) == 1


def test_cache_aware_breaks_full_ties_with_sim_rng() -> None:
    picks = set()
    for seed in range(40):
        sim = cluster_state([1, 1, 1, 1], seed=seed)
        picks.add(make_policy("cache_aware").decide(sim, request(prefix(4))))
    assert picks == {0, 1, 2, 3}


def test_least_load_counts_running_and_waiting() -> None:
    sim = cluster_state([5, 4, 6, 4], waiting=[0, 3, 0, 1])
    policy = make_policy("least_load")
    assert {policy.decide(sim, request(prefix(2))) for _ in range(20)} <= {1, 3}
    sim = cluster_state([5, 3, 6, 4], waiting=[5, 3, 0, 0])
    assert policy.decide(sim, request(prefix(2))) == 1


def test_round_robin_cycles_and_resets() -> None:
    sim = cluster_state([0, 0, 0])
    policy = make_policy("round_robin")
    assert [policy.decide(sim, request(prefix(1))) for _ in range(5)] == [0, 1, 2, 0, 1]
    policy.reset(sim)
    assert policy.decide(sim, request(prefix(1))) == 0


def test_make_policy_names_the_bad_policy_and_argument() -> None:
    with pytest.raises(ValueError, match="unknown policy 'nope'"):
        make_policy("nope")
    with pytest.raises(ValueError, match="'btb'"):
        make_policy("btb", w=3)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"balance_abs": "64"}, "balance_abs"),  # a string would raise TypeError mid-run
        ({"balance_abs": -1}, "balance_abs"),
        ({"balance_rel": float("nan")}, "balance_rel"),  # NaN would silently never rebalance
        ({"balance_rel": 0.5}, "balance_rel"),
        ({"balance_rel": True}, "balance_rel"),
    ],
)
def test_cache_aware_rejects_bad_thresholds_naming_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=rf"cache_aware\.{field}"):
        make_policy("cache_aware", **kwargs)


def test_btb_rejects_a_bool_window() -> None:
    with pytest.raises(ValueError, match=r"btb\.z"):
        make_policy("btb", z=True)
