"""The feature fuzz (feature_fuzz.py) in the suite: seeded cases of random node
losses and returns, NIC outages, failed and slow copies, rolling upgrades, model
versions, RDMA contention, transfer latency, host RAM and disk tiers, nodes of two
speeds, tenants and either KV model, under btb, btb_pending, cache_aware,
least_load, eft, eft_pull, oracle_warm, btb/RouteWarm-v0 at random (masked or not)
and a chaos policy. Each case checks that every request is served once, KV stays
within every tier's budget at every event, no TTFT is under its floor, no node
admits while down, draining or loading, no copy lands across an outage, the fault
and upgrade counts, and that the two cores and a rerun give the same records.

BTB_FUZZ_CASES scales the number of cases (as for test_sim_fuzz.py); the script
runs any range: ``python tests/sim/feature_fuzz.py FIRST N`` (FUZZ_BIG=1 for larger
windows on a published setup). The audit of 2026-12-06 ran 32,000 toy and 26,600
published-setup seeds."""

from __future__ import annotations

import os

import pytest
from feature_fuzz import check_case

CASES = int(os.environ.get("BTB_FUZZ_CASES", "40"))


@pytest.mark.parametrize("seed", range(4 * CASES))
def test_random_feature_cases_keep_every_invariant(seed: int) -> None:
    check_case(seed)


@pytest.mark.parametrize("seed", [*range(CASES // 2), 20059, 45757])
def test_random_published_setup_cases_keep_every_invariant(seed: int) -> None:
    check_case(seed, big=True)


# Published-setup cases 20059 and 45757 found a warm onto a node whose upgrade switch
# decode overshoot had run ahead of the router's clock, and decode overshoot running a
# node's step past its upgrade time (test_sim_tenancy.py has both worked by hand).
