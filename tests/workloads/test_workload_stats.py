"""Busiest windows and same-prefix fan-out, checked on numbers worked out by hand."""

from __future__ import annotations

import pytest

from envs.workloads import BurstedSyntheticConfig, Request, Workload, synthetic_window
from envs.workloads.stats import audit_windows, audit_workload, busiest, largest_fanout


def test_busiest_uses_half_open_windows() -> None:
    # [0, 1) holds 0, 0.5, 0.9 -- 1.0 is excluded; [0.5, 1.5) holds 0.5, 0.9, 1.0, 1.4
    assert busiest([0.0, 0.5, 0.9, 1.0, 1.4, 5.0], 1.0) == (4, 0.5)
    assert busiest([], 1.0) == (0, 0.0)
    with pytest.raises(ValueError, match="window_s"):
        busiest([1.0], 0.0)


def test_busiest_arrivals_a_window_apart_never_share_it() -> None:
    # 3.012 + 1.0 < 4.012 in floating point; [3.012, 4.012) holds 3.012 alone
    assert busiest([0.0, 3.012, 4.012], 1.0) == (1, 0.0)
    # every 4 ms (as a reader makes them: ms / 1000): [t, t + 1) holds 1000 / 4 = 250,
    # [t, t + 0.1) holds 25, [t, t + 10) all 1,000 (they span 3.996 s)
    every_4ms = [4 * k / 1000 for k in range(1000)]
    assert busiest(every_4ms, 1.0)[0] == 250
    assert busiest(every_4ms, 0.1)[0] == 25
    assert busiest(every_4ms, 10.0)[0] == 1000
    # 0.1 s apart: 0.1 * 3 = 0.30000000000000004, so [0.2, 0.3) holds 0.2 alone with
    # window 0.1, and [0, 0.3) holds 0, 0.1, 0.2
    tenths = [k / 10 for k in range(10)]
    assert busiest(tenths, 0.1)[0] == 1
    assert busiest(tenths, 0.3)[0] == 3
    # one instant: any window holds both; a window under 1 ns is taken as 1 ns
    assert busiest([2.5, 2.5, 7.0], 1e-12) == (2, 2.5)
    assert busiest([0.0, 1.0, 2.0], float("inf")) == (3, 0.0)


def test_largest_fanout_groups_by_key() -> None:
    arrivals = [0.0, 1.0, 2.0, 3.0, 20.0, 21.0, 0.5]
    keys = ["a", "a", "a", "b", "a", "a", None]
    fan = largest_fanout(arrivals, keys, 10.0)
    assert (fan.requests, fan.start_s, fan.key) == (3, 0.0, "a")
    assert largest_fanout(arrivals, keys, 1.5).requests == 2


def _request(i: int, t: float, blocks: tuple[int, ...]) -> Request:
    return Request(i, f"r{i}", t, 256 * len(blocks), 1, blocks)


def test_audit_workload_by_hand() -> None:
    shared = tuple(range(1, 17))  # a 16-block prefix
    requests = [
        _request(0, 0.0, (*shared, 100)),
        _request(1, 0.2, (*shared, 101)),
        _request(2, 9.0, (*shared, 102)),
        _request(3, 12.0, (*shared, 103)),
        _request(4, 0.3, (*shared[:15], 200)),  # differs at block 16: another prefix
        _request(5, 0.4, (7,)),
    ]
    audit = audit_workload(Workload("w", 256, requests), min_tokens=4096, window_s=10.0)
    assert audit["requests"] == 6 and audit["duration_s"] == 12.0
    assert audit["busiest"]["1s"]["requests"] == 4
    assert audit["busiest"]["10s"]["requests"] == 5
    assert audit["fanout"]["requests"] == 3 and audit["fanout"]["min_tokens"] == 4096
    assert audit["fanout"]["example_request_id"] == "r0"
    assert audit["input_tokens"]["max"] == 256 * 17


def test_fanout_leaves_out_prompts_short_of_min_tokens() -> None:
    # Both have 17 block ids; only the first reaches 4,096 tokens (16 whole blocks).
    shared = tuple(range(1, 18))
    long = Request(0, "long", 0.0, 4097, 1, shared)
    short = Request(1, "short", 0.1, 4000, 1, shared[:16])  # 16 ids, block 16 partial
    audit = audit_workload(Workload("w", 256, [long, short]), min_tokens=4096, window_s=10.0)
    assert audit["fanout"]["requests"] == 1
    audit = audit_workload(Workload("w", 256, [long, short]), min_tokens=4000, window_s=10.0)
    assert audit["fanout"]["requests"] == 2  # 4,000 tokens: 16 blocks, both reach it


def test_synthetic_window_fanout_by_hand() -> None:
    # 500 requests evenly over 60 s: one every 0.12 s, so [t, t + 10) holds ceil(10/0.12) = 84
    workload = synthetic_window(BurstedSyntheticConfig(n_bursts=1, n_decoys=0))
    audit = audit_workload(workload, min_tokens=4096, window_s=10.0)
    assert audit["fanout"]["requests"] == 84
    assert audit["busiest"]["1s"]["requests"] == 9  # 0, 0.12, ..., 0.96


def test_audit_windows_reports_the_maxima() -> None:
    small = BurstedSyntheticConfig(n_bursts=1, burst_requests=20, n_decoys=0)
    big = BurstedSyntheticConfig(n_bursts=1, burst_requests=50, n_decoys=0)
    result = audit_windows([synthetic_window(small, 0), synthetic_window(big, 1)], window_s=60.0)
    assert result["overall"]["windows"] == 2 and result["overall"]["requests"] == 70
    assert result["overall"]["fanout"]["requests"] == 50
    assert result["overall"]["fanout"]["window"] == "bursted_synthetic[1]"
    with pytest.raises(ValueError, match="no workloads"):
        audit_windows([])
