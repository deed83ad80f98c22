"""Generators: Bursted-ART windows exactly as published, ART-like statistics, scenarios."""

from __future__ import annotations

import itertools
import math
import re
from collections import defaultdict

import numpy as np
import pytest

from envs.workloads import BurstedSyntheticConfig, rows_to_workload, synthetic_window_rows
from envs.workloads.art_like import (
    ART_CHAT_FIGURES,
    ArtLikeConfig,
    art_like_drafts,
    art_like_window_rows,
    day_statistics,
    draft_prefix_keys,
)
from envs.workloads.scenarios import (
    AgentFanoutConfig,
    MixedConfig,
    MultiTenantConfig,
    RisingLoadConfig,
    agent_fanout_rows,
    mixed_rows,
    multi_tenant_rows,
    rising_load_rows,
)
from envs.workloads.segments import SegmentHasher, block_keys, prefix_key
from envs.workloads.stats import audit_workload, largest_fanout

SEED = 20260721
HEX24 = re.compile(r"[0-9a-f]{24}")


def _by_group(rows: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[row["group_id"]].append(row)
    return groups


# --- Bursted-ART synthetic windows ------------------------------------------------------


@pytest.mark.parametrize("window", [0, 7])
def test_synthetic_window_matches_the_published_layout(window: int) -> None:
    rows = synthetic_window_rows(BurstedSyntheticConfig(), window, seed=SEED)
    assert len(rows) == 4_120
    assert [r["arrival_s"] for r in rows] == sorted(r["arrival_s"] for r in rows)
    groups = _by_group(rows)
    bursts = [g for name, g in groups.items() if "-burst-" in name]
    decoys = [g for name, g in groups.items() if "-decoy-" in name]
    assert len(bursts) == 8 and len(decoys) == 120
    for rank, burst in enumerate(sorted(bursts, key=lambda g: g[0]["arrival_s"])):
        assert len(burst) == 500
        start = burst[0]["arrival_s"]
        assert abs(start - (20.0 + 40.0 * rank)) <= 2.0
        gaps = np.diff([r["arrival_s"] for r in burst])
        assert np.allclose(gaps, 60.0 / 500, rtol=0, atol=1e-9)  # evenly spaced over 60 s
        prefixes = {tuple(r["hash_ids"][:256]) for r in burst}
        assert len(prefixes) == 1  # 65,536 tokens = 256 shared blocks
        assert len({r["hash_ids"][256] for r in burst}) == 500  # each its own suffix
        for r in burst:
            assert (r["input_length"], r["output_length"], len(r["hash_ids"])) == (65_792, 1, 257)
            assert r["metadata"]["job_kind"] == "burst" and r["source"] == "synthetic"
    decoy_prefixes = {tuple(g[0]["hash_ids"][:256]) for g in decoys}
    assert len(decoy_prefixes) == 120
    assert all(len(g) == 1 and 14.0 <= g[0]["arrival_s"] <= 340.0 for g in decoys)
    assert all(HEX24.fullmatch(h) for h in rows[0]["hash_ids"])


def test_one_second_variant_and_decoy_groups() -> None:
    config = BurstedSyntheticConfig(burst_window_s=1.0, n_decoys=10, decoy_requests=2)
    rows = synthetic_window_rows(config, 0, seed=SEED)
    assert len(rows) == 4_000 + 20 == config.requests_per_window
    for name, group in _by_group(rows).items():
        times = [r["arrival_s"] for r in group]
        if "-burst-" in name:
            assert np.allclose(np.diff(times), 1.0 / 500, atol=1e-9)
        else:
            assert len(group) == 2 and times[1] - times[0] <= 0.5
            assert group[0]["hash_ids"][:256] == group[1]["hash_ids"][:256]


def test_synthetic_windows_are_deterministic_and_distinct() -> None:
    config = BurstedSyntheticConfig(burst_requests=10, n_decoys=2)
    assert synthetic_window_rows(config, 3, seed=1) == synthetic_window_rows(config, 3, seed=1)
    assert synthetic_window_rows(config, 3, seed=1) != synthetic_window_rows(config, 4, seed=1)


# --- ART-like background ----------------------------------------------------------------


def test_art_like_window_shape() -> None:
    rows = art_like_window_rows(ArtLikeConfig(), 0, SEED)
    assert len(rows) == 1_000
    times = [r["arrival_s"] for r in rows]
    assert times == sorted(times) and times[0] >= 0.0
    for r in rows:
        assert 1 <= r["output_length"] <= 128
        assert 1 <= r["input_length"] <= 262_144
        assert len(r["hash_ids"]) == math.ceil(r["input_length"] / 256)
        assert r["metadata"]["job_kind"] == "background" and r["source"] == "art"
    assert all(HEX24.fullmatch(h) for h in rows[0]["hash_ids"])
    assert art_like_window_rows(ArtLikeConfig(), 0, SEED) == rows


def test_art_like_sessions_grow_their_prefix_turn_by_turn() -> None:
    rows = art_like_window_rows(ArtLikeConfig(), 1, SEED)
    multi_turn = 0
    for name, turns in _by_group(rows).items():
        if "-session-" not in name or len(turns) < 2:
            continue
        multi_turn += 1
        for before, after in itertools.pairwise(turns):
            assert after["input_length"] > before["input_length"]
            shared = 0
            for a, b in zip(before["hash_ids"], after["hash_ids"], strict=False):
                if a != b:
                    break
                shared += 1
            # every full block of the earlier turn is reused, the partial last one is not
            assert shared == before["input_length"] // 256
    assert multi_turn >= 10


def test_art_like_system_prompts_are_shared_across_sessions() -> None:
    rows = art_like_window_rows(ArtLikeConfig(), 2, SEED)
    first_turns = [g[0] for name, g in _by_group(rows).items() if "-session-" in name]
    first_blocks = [r["hash_ids"][0] for r in first_turns if r["input_length"] >= 512]
    assert len(set(first_blocks)) < len(first_blocks) / 2


def test_art_like_duration_mode_and_config_checks() -> None:
    _, drafts = art_like_drafts(ArtLikeConfig(), 0, SEED, duration_s=60.0)
    assert drafts and all(0.0 <= d.arrival_s < 60.0 for d in drafts)
    with pytest.raises(ValueError, match="diurnal_amplitude"):
        ArtLikeConfig(diurnal_amplitude=1.5)
    with pytest.raises(ValueError, match=r"^ArtLikeConfig\.mean_rate_per_s must exceed"):
        ArtLikeConfig(mean_rate_per_s=0.01)
    with pytest.raises(ValueError, match="surge_rate_per_s"):
        ArtLikeConfig(surge_rate_per_s=(30.0, 10.0))


def test_segment_keys_name_the_same_prefixes_as_chained_ids() -> None:
    config = ArtLikeConfig()
    _, drafts = art_like_drafts(config, 3, SEED)
    drafts = drafts[: config.rows_per_window]
    arrivals = [d.arrival_s for d in drafts]
    by_keys = largest_fanout(arrivals, draft_prefix_keys(drafts, 4, 256), 10.0)
    rows = art_like_window_rows(config, 3, SEED)
    audited = audit_workload(rows_to_workload(rows, 256, "w"), min_tokens=1024, window_s=10.0)
    assert by_keys.requests == audited["fanout"]["requests"] > 1


def test_block_keys_by_hand() -> None:
    segments = [(1, 300), (2, 100), (3, 400)]  # 800 tokens: blocks end at 256, 512, 768, 800
    assert block_keys(segments, 3, 256) == [(1, 256), (3, 112), (3, 368), (3, 400)]
    assert block_keys(segments, 2, 256) == [(1, 256), (2, 100)]
    assert prefix_key(segments, 3, 2, 256) == (3, 112)
    assert prefix_key(segments, 2, 3, 256) is None
    hasher = SegmentHasher(256, b"salt")
    assert hasher.hash_ids(segments, 3)[0] == hasher.hash_ids(segments, 2)[0]
    assert hasher.hash_ids(segments, 3)[1] != hasher.hash_ids(segments, 2)[1]
    assert SegmentHasher(256, b"other").hash_ids(segments, 2) != hasher.hash_ids(segments, 2)


def test_art_like_day_statistics_within_stated_tolerances() -> None:
    """A simulated day against ART-Chat's published figures (docs/workloads.md).

    Stated tolerances: the mean rate within 5%; the median over seeds 1-3 of each
    busiest count and of the fan-out within 20% (single days vary more: maxima of a
    day depend on whether two surges overlap).
    """
    days = [day_statistics(seed=seed) for seed in (1, 2, 3)]
    for day in days:
        want = ART_CHAT_FIGURES["mean_rate_per_s"]
        assert day["mean_rate_per_s"] == pytest.approx(want, rel=0.05)
        assert day["input_tokens_max"] <= 262_144 and day["output_tokens_max"] == 128
    for key in ("busiest_1s", "busiest_10s", "busiest_60s", "largest_fanout"):
        median = float(np.median([day[key] for day in days]))
        assert median == pytest.approx(ART_CHAT_FIGURES[key], rel=0.20), key


# --- scenarios --------------------------------------------------------------------------


def test_rising_load_ramps_up() -> None:
    config = RisingLoadConfig(background_rate_per_s=0.0)
    rows = rising_load_rows(config, 0, SEED)
    times = np.array([r["arrival_s"] for r in rows])
    assert times.min() >= config.lead_s and times.max() < config.duration_s
    early = np.sum((times >= 20) & (times < 120))
    late = np.sum((times >= 520) & (times < 620))
    assert late > 5 * early
    expected = (config.start_rate_per_s + config.peak_rate_per_s) / 2 * 600 + 8.0 * 60
    assert len(rows) == pytest.approx(expected, rel=0.1)
    assert len({tuple(r["hash_ids"][:256]) for r in rows}) == 1  # one hot prefix
    assert config.rate_at(20.0) == pytest.approx(0.1) and config.rate_at(620.0) == 8.0


def test_multi_tenant_identical_prompts_never_share_kv() -> None:
    config = MultiTenantConfig(n_bursts=2, burst_requests=40, n_decoys=4, tenants=4)
    rows = multi_tenant_rows(config, 0, SEED)
    workload = rows_to_workload(rows, 256, "mt")
    by_prompt: dict[tuple, list] = defaultdict(list)
    for row, request in zip(rows, workload.requests, strict=True):
        by_prompt[tuple(row["hash_ids"])].append(request)
    identical = [reqs for reqs in by_prompt.values() if len(reqs) > 1]
    assert identical, "the scenario must send identical prompts from several tenants"
    for requests in identical:
        assert len({r.tenant for r in requests}) == len(requests) == 4
        for a in requests:
            for b in requests:
                if a is not b:
                    assert not set(a.blocks) & set(b.blocks)
    # requests of one tenant in one burst still share the burst prefix
    tenant0 = [r for r in workload.requests if r.tenant == "tenant-0" and r.job_kind == "burst"]
    assert len({r.blocks[255] for r in tenant0}) == 2


def test_agent_fanout_children_extend_the_parent_context() -> None:
    config = AgentFanoutConfig(trees=2, background_rate_per_s=0.0, fanout=(5, 5))
    rows = agent_fanout_rows(config, 0, SEED)
    trees = _by_group(rows)
    assert len(trees) == 2
    for tree in trees.values():
        root = tree[0]
        context_blocks = root["input_length"] // 256 - 1
        sharing = [
            r
            for r in tree[1:]
            if r["hash_ids"][:context_blocks] == root["hash_ids"][:context_blocks]
        ]
        assert len(sharing) == len(tree) - 1  # every later request extends the parent context
        assert all(r["metadata"]["job_kind"] == "agent" for r in tree)
        assert len(tree) >= 1 + 5 + 1  # parent, five sub-agents, the gathering request


def test_mixed_window_holds_bursts_and_background() -> None:
    config = MixedConfig(n_bursts=2, burst_requests=50, n_decoys=5)
    rows = mixed_rows(config, 0, SEED, split="test")
    kinds = {r["metadata"]["job_kind"] for r in rows}
    assert kinds == {"burst", "decoy", "background"}
    assert [r["arrival_s"] for r in rows] == sorted(r["arrival_s"] for r in rows)
    assert len({r["request_id"] for r in rows}) == len(rows)
    assert {r["trace_id"] for r in rows} == {"mixed-0000"} and {r["split"] for r in rows} == {
        "test"
    }


def _shared_blocks(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), len(a))


@pytest.mark.parametrize(
    ("make", "config"),
    [
        (synthetic_window_rows, BurstedSyntheticConfig(burst_requests=4, n_decoys=0)),
        (multi_tenant_rows, MultiTenantConfig(burst_requests=8, n_decoys=0, tenants=2)),
        (rising_load_rows, RisingLoadConfig(ramp_s=20.0, background_rate_per_s=0.0)),
    ],
)
@pytest.mark.parametrize("prefix_tokens", [300, 100, 65_536])
def test_a_partial_prefix_block_is_not_shared(make, config, prefix_tokens: int) -> None:  # type: ignore[no-untyped-def]
    # 300 tokens at 256 a block: block 0 holds prefix tokens only and is shared;
    # block 1 holds 44 prefix tokens and each request's own suffix, so sharing it
    # would give every request a 256-token hit of which 212 tokens are not its own.
    import dataclasses

    config = dataclasses.replace(config, prefix_tokens=prefix_tokens, suffix_tokens=256)
    rows = [r for r in make(config, 0, SEED) if r["metadata"]["job_kind"] == "burst"]
    workload = rows_to_workload(rows, 256, "w")
    by_group: dict[tuple[str, str], list] = defaultdict(list)
    for r in workload.requests:
        by_group[(r.group_id.split("-t")[0], r.tenant)].append(r)
    pairs = [(g[0], g[1]) for g in by_group.values() if len(g) > 1]
    assert pairs
    for a, b in pairs:
        assert len(a.blocks) == -(-(prefix_tokens + 256) // 256)
        assert _shared_blocks(a.blocks, b.blocks) == prefix_tokens // 256


def test_a_workload_never_renumbers_the_callers_requests():
    """Cutting one list of requests into windows must leave the originals (and the
    earlier windows) alone; a request listed twice gets two indices."""
    from envs.sim.request import Request, Workload

    def req(i, t):
        return Request(
            index=-1,
            request_id=f"r{i}",
            arrival_s=t,
            input_tokens=16,
            output_tokens=1,
            blocks=(i + 1,),
        )

    r0, r1, r2 = req(0, 0.0), req(1, 1.0), req(2, 2.0)
    whole = Workload("whole", 16, [r2, r0, r1])
    assert [r.index for r in whole.requests] == [0, 1, 2]
    assert [r.request_id for r in whole.requests] == ["r0", "r1", "r2"]
    tail = Workload("tail", 16, whole.requests[1:])
    assert [r.index for r in tail.requests] == [0, 1]
    assert [r.index for r in whole.requests] == [0, 1, 2]  # was [0, 0, 1]
    assert r0.index == -1  # the caller's own objects are untouched
    twice = Workload("twice", 16, [r1, r1])
    assert [r.index for r in twice.requests] == [0, 1]
