"""bench: the shape of bench.json and its bad-option errors (no timings are checked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import bench
from experiments._cli import UsageError


def test_bench_writes_sim_and_env_rows(tmp_path: Path) -> None:
    result = bench.main(
        [
            "repeats=1",
            "policies=least_load",
            "envs=btb/Route-v0,btb/Thresholds-v0",
            f"out_dir={tmp_path}",
        ]
    )
    assert json.loads((tmp_path / "bench.json").read_text()) == result
    (sim,) = result["sim"]
    assert sim["policy"] == "least_load" and sim["requests"] == 4120
    assert sim["requests_per_s"] > 0 and sim["peak_rss_mb"] > 0
    route, thresholds = result["env"]
    assert route["env_id"] == "btb/Route-v0"
    assert route["steps"] == route["requests"] == 4120  # one step per arrival
    assert route["requests_per_s"] == pytest.approx(route["steps_per_s"])
    assert thresholds["env_id"] == "btb/Thresholds-v0"
    # one step per 1 s epoch with arrivals: far fewer steps than requests
    assert 0 < thresholds["steps"] < thresholds["requests"] // 4
    per_step = thresholds["requests"] / thresholds["steps"]
    assert thresholds["requests_per_s"] == pytest.approx(thresholds["steps_per_s"] * per_step)


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("envs=btb/Nope-v0", "unknown env 'btb/Nope-v0'"),
        ("repeats=0", "repeats must be an integer >= 1"),
        ("policies=bogus", "unknown policy 'bogus'"),
    ],
)
def test_bench_rejects_bad_options_before_running(arg: str, message: str) -> None:
    with pytest.raises((UsageError, ValueError), match=message):
        bench.main([arg])
