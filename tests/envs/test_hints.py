"""Request hints: the trace's source, job kind and group reach the Request and,
with ``hints=True``, the observation of btb/Route-v0 and btb/RouteWarm-v0."""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np
import pytest

from envs.encoder import (
    HASHED_HINT_CLASSES,
    HINT_CLASSES,
    HINT_FEATURES,
    NODE_FEATURES,
    REQUEST_FEATURES,
    ObservationEncoder,
    hint_class,
)
from envs.route import RouteEnv
from envs.route_warm import RouteWarmEnv
from envs.sim import Simulator, setup_cluster
from envs.sim.request import Request, Workload
from envs.thresholds import ThresholdsEnv
from envs.workloads.hint_labels import SHIPPED_CLASSES
from envs.workloads.readers.bursted import iter_bursted_windows
from envs.workloads.registry import _SCENARIOS
from tests.workloads.tracekit import bursted_rows, write_jsonl

HINT_ROW = re.compile(r"^\s*\|\s*h \+ (\d+|k)\s*\|\s*`(\w+)`\s*\|[^|]+\|\s*([^|]+?)\s*\|")


@pytest.mark.parametrize("env_class", [RouteEnv, RouteWarmEnv])
def test_the_hint_table_lists_the_hint_features(env_class: type) -> None:
    rows = [m.groups() for m in map(HINT_ROW.match, (env_class.__doc__ or "").splitlines()) if m]
    assert rows == [("k", "hint_class_k", "0 or 1"), ("8", "group_seen", "x / (x + 16)")]
    assert (*(f"hint_class_{k}" for k in range(8)), "group_seen") == HINT_FEATURES


def test_hints_are_off_by_default_and_add_nine_entries() -> None:
    base = len(NODE_FEATURES) * 4 + len(REQUEST_FEATURES)
    assert RouteEnv(n_windows=1).observation_space.shape == (base,)
    assert RouteWarmEnv(n_windows=1, hints=True).observation_space.shape == (base + 9,)
    with pytest.raises(ValueError, match="hints"):
        ThresholdsEnv(n_windows=1, hints=True)
    with pytest.raises(ValueError, match="hints"):
        RouteEnv(n_windows=1, hints="yes")


def test_bursted_rows_carry_their_hints_to_the_request(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "b.jsonl", bursted_rows("w0", n=2))
    (window,) = iter_bursted_windows(path)
    request = window.requests[0]
    hints = (request.source, request.job_kind, request.group_id)
    assert hints == ("synthetic", "burst", "w0-burst")


def test_hint_features_by_hand() -> None:
    """Three requests of group g (a labelling job) and one without hints: the class
    entry is set for the hinted ones, and the k-th of the group sees k / (k + 16)."""

    def request(i: int, group: str, source: str, kind: str) -> Request:
        blocks = (100 * i + 1, 100 * i + 2)
        return Request(i, f"r{i}", 0.1 * i, 512, 1, blocks, "", group, kind, source)

    requests = [
        request(0, "g", "batch", "labelling"),
        request(1, "", "", ""),
        request(2, "g", "batch", "labelling"),
        request(3, "g", "batch", "labelling"),
    ]
    sim = Simulator(setup_cluster("70b_h100x4"), Workload("w", 256, requests))
    encoder = ObservationEncoder(sim.n_nodes, hints=True)
    encoder.reset()
    # not a shipped pair: column 5 + crc32 % 3; crc32(b"batch/labelling") is
    # 4,259,553,082, whose digits sum to 43, so % 3 is 1: column 6
    assert zlib.crc32(b"batch/labelling") == 4259553082
    bucket = 6
    assert hint_class(requests[0]) == bucket and hint_class(requests[1]) == -1
    expected_seen = [0.0, 0.0, 1 / 17, 2 / 18]
    decisions = sim.decisions()
    arrived = next(decisions)
    for k in range(4):
        obs = encoder.encode(sim, arrived)
        hints = obs[-len(HINT_FEATURES) :]
        onehot = np.zeros(8, dtype=np.float32)
        if k != 1:
            onehot[bucket] = 1.0
        assert hints[:8].tolist() == onehot.tolist()
        assert hints[8] == pytest.approx(expected_seen[k], abs=1e-7)
        try:
            arrived = decisions.send(0)
        except StopIteration:
            break


def _hinted(source: str, kind: str) -> Request:
    return Request(0, "r", 0.0, 512, 1, (1, 2), "", "", kind, source)


def test_every_shipped_workloads_classes_have_columns_of_their_own() -> None:
    """One window of each family of every shipped workload: each (source, job kind)
    pair its rows carry is in the table, the table's pairs all occur, and each has
    its own column, its place in the table (bursts and decoys shared crc32 % 8 = 4)."""
    seen: set[tuple[str, str]] = set()
    families = {id(f): f for s in _SCENARIOS.values() for f in s.families}
    for family in families.values():
        rows = family.make_rows(family.config, 0, 0, "test", "x")
        seen |= {(row["source"], row["metadata"]["job_kind"]) for row in rows}
    assert seen == set(SHIPPED_CLASSES)
    assert [hint_class(_hinted(*pair)) for pair in SHIPPED_CLASSES] == [0, 1, 2, 3, 4]
    assert SHIPPED_CLASSES[:3] == (
        ("synthetic", "burst"),
        ("synthetic", "decoy"),
        ("art", "background"),
    )
    assert HASHED_HINT_CLASSES == HINT_CLASSES - 5 == 3


def test_other_pairs_hash_into_the_columns_left() -> None:
    """5 + crc32("<source>/<job kind>") % 3 (a number is congruent to its digit sum
    mod 3): crc32(b"/background") (an ART-chat trace's rows: no source) is
    553,719,515, digit sum 41, so column 5 + 2 = 7; crc32(b"art/burst") (a shipped
    kind under another source) is 379,913,170, digit sum 40: column 6."""
    assert zlib.crc32(b"/background") == 553719515
    assert zlib.crc32(b"art/burst") == 379913170
    assert hint_class(_hinted("", "background")) == 7
    assert hint_class(_hinted("art", "burst")) == 6
    columns = {hint_class(_hinted(f"tenant{i}", "job")) for i in range(50)}
    assert columns == {5, 6, 7}


def test_the_docstring_lists_the_shipped_columns() -> None:
    doc = " ".join((RouteEnv.__doc__ or "").split())
    listed = ", ".join(f"{i} {source}/{kind}" for i, (source, kind) in enumerate(SHIPPED_CLASSES))
    assert listed in doc
    assert (
        "Any other pair (a trace's own) takes column "
        f'``{len(SHIPPED_CLASSES)} + crc32("<source>/<job kind>") % {HASHED_HINT_CLASSES}``' in doc
    )


def test_route_warm_masks_warms_the_simulator_refuses_for_versions() -> None:
    """Node 0 (v1) holds P's prefix: a warm onto node 1 (v2) is masked, onto node 2
    (v1) allowed; once node 2 has upgraded to v2 (at 2 s), a warm onto it is masked too."""
    raw = (11, 12, 13)
    requests = [
        Request(0, "a", 0.0, 768, 1, raw),
        Request(1, "b", 1.0, 768, 1, raw),
        Request(2, "c", 3.0, 768, 1, raw),
    ]
    window = Workload("w", 256, requests)
    sim = {"model_versions": ["v1", "v2", "v1", "v2"], "upgrade_at_s": [9.0, 9.0, 2.0]}
    env = RouteWarmEnv(windows=[window], sim=sim)
    env.reset(seed=0)
    n = env.n_nodes
    env.step(np.array([0] + [0] * n + [0]))  # r0 computes P on node 0
    mask = env.action_masks()
    assert not mask[n + 2 * 1 + 1] and mask[n + 2 * 2 + 1]
    env.step(np.array([0, 0, 1, 0, 0, 0]))  # warm onto node 1 anyway
    assert env.sim is not None and env.sim.warm_refused["version_mismatch"] == 1
    mask = env.action_masks()  # at 3 s: node 2 was idle at 2 s and switched at once
    assert env.sim.versions is not None and env.sim.versions.version[2] == "v2"
    assert not mask[n + 2 * 2 + 1]
