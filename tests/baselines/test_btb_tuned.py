"""btb_tuned: BTB with the thresholds of its table's (setup, workload) cell, and the
command that writes that table from train windows."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from baselines import BTB, make_policy
from baselines.btb_tuned import TABLE_PATH, BTBTuned, btb_settings, read_table
from envs.sim import SimConfig, Simulator, setup_cluster
from envs.sim.errors import ConfigError
from envs.workloads.registry import windows
from experiments import tune_btb_table

ROOT = Path(__file__).resolve().parents[2]

# generator parameters of another traffic (btb_tuned's cells do not apply to it)
SMALL = {"burst_requests": 30, "n_decoys": 4, "burst_window_s": 12.0}


def _run(policy, window, setup="70b_h100x4"):
    sim = Simulator(setup_cluster(setup), window, SimConfig(), np.random.default_rng([0, 0]))
    return policy.run(sim)


def _table(tmp_path: Path, cells: dict) -> Path:
    path = tmp_path / "btb_tuned.json"
    path.write_text(json.dumps({"cells": cells}))
    return path


def test_a_cell_sets_x_y_z_m_and_other_cells_run_the_published_constants(tmp_path):
    cell = {"x": 3, "z_s": 0.5, "m": 2, "y_tokens": 16384}
    path = _table(tmp_path, {"70b_h100x4": {"bursted_synthetic": cell}})
    assert btb_settings(cell, 256) == {"x": 3, "y_tokens": 16384, "z": 0.5, "m": 2}
    assert btb_settings({**cell, "y_tokens": 256}, 512)["y_tokens"] == 512  # one whole block
    window = next(windows("bursted_synthetic", "train", limit=1))  # its own parameters
    tuned = BTBTuned(str(path))
    got = _run(tuned, window)
    want = _run(BTB(x=3, y_tokens=16384, z=0.5, m=2), window)
    assert np.array_equal(got.ttft_s, want.ttft_s) and (tuned.x, tuned.y, tuned.m) == (3, 64, 2)
    assert tuned.metrics()["tuned_rate"] == 1.0
    assert not np.array_equal(want.ttft_s, _run(BTB(), window).ttft_s)  # the cell matters
    # another setup, or a workload without a cell: BTB's published constants
    for setup, name in (("qwen3_8b_h100x4", "bursted_synthetic"), ("70b_h100x4", "decoy_heavy")):
        other = next(windows(name, "train", limit=1))
        got = _run(tuned, other, setup)
        assert np.array_equal(got.ttft_s, _run(BTB(), other, setup).ttft_s)
        assert tuned.metrics()["tuned_rate"] == 0.0 and (tuned.x, tuned.y, tuned.m) == (2, 256, 4)


@pytest.mark.parametrize("params", [SMALL, {"block_tokens": 64}, {"burst_requests": 50}])
def test_a_workload_with_changed_parameters_runs_the_published_constants(tmp_path, params):
    """A user audit: the cell was applied to windows of changed generator parameters
    (other traffic, which it was not tuned on) with tuned_rate 1.0. A parameter
    set to its registered value (burst_window_s=60 on bursted_synthetic) is the
    workload's own traffic, and its cell applies."""
    from envs.workloads.registry import at_registered_parameters

    cell = {"x": 3, "z_s": 0.5, "m": 2, "y_tokens": 16384}
    tuned = BTBTuned(str(_table(tmp_path, {"70b_h100x4": {"bursted_synthetic": cell}})))
    other = next(windows("bursted_synthetic", "train", limit=1, **params))
    assert other.meta["workload"] == "bursted_synthetic" and not at_registered_parameters(other)
    got = _run(tuned, other)
    assert tuned.metrics() == {"tuned_rate": 0.0} and (tuned.x, tuned.z, tuned.m) == (2, 1.0, 4)
    assert np.array_equal(got.ttft_s, _run(BTB(), other).ttft_s)
    own = next(windows("bursted_synthetic", "train", limit=1, burst_window_s=60.0))
    assert at_registered_parameters(own)
    _run(tuned, own)
    assert tuned.metrics() == {"tuned_rate": 1.0} and (tuned.x, tuned.z, tuned.m) == (3, 0.5, 2)


def test_a_run_under_another_simulator_than_the_table_s_says_so(tmp_path):
    """helper-77's audit: thresholds tuned under causal KV ran under the reference KV
    model (qwen3-8b's 1 s bursts: 0.410 s against btb's 0.047 s) with no word."""
    from experiments.report import btb_lines

    cell = {"x": 3, "z_s": 0.5, "m": 2, "y_tokens": 16384}
    path = tmp_path / "btb_tuned.json"
    options = {"causal_kv": True, "copy_model": "reference"}
    path.write_text(
        json.dumps({"options": options, "cells": {"70b_h100x4": {"bursted_synthetic": cell}}})
    )
    window = next(windows("bursted_synthetic", "train", limit=1))
    tuned = BTBTuned(str(path))
    _run(tuned, window)
    assert "tuned_elsewhere_rate" not in tuned.metrics()  # as tuned: the row as before
    sim = Simulator(setup_cluster("70b_h100x4"), window, SimConfig(causal_kv=False))
    tuned.run(sim)
    assert tuned.metrics()["tuned_elsewhere_rate"] == 1.0
    row = {"policy": "btb_tuned", "tuned_rate": 1.0, "tuned_elsewhere_rate": 0.5}
    assert btb_lines([row])[0].startswith("btb_tuned: on 50 % of the windows it ran thresholds")


def test_btb_tuned_leaves_the_note_on_an_unreached_y_to_its_own(tmp_path):
    """Without a cell it runs btb's published Y, which no prompt here reaches: its
    note (no tuned thresholds: tune_btb, btb's settings) says what to do, not the note
    that points to a y_tokens setting, which btb_tuned does not take."""
    path = _table(tmp_path, {"70b_h100x4": {}})
    window = next(windows("bursted_synthetic", "train", limit=1, prefix_tokens=16384, **SMALL))
    assert max(len(r.blocks) for r in window.requests) < 256  # the published Y, in blocks
    tuned = BTBTuned(str(path))
    _run(tuned, window)
    assert tuned.metrics() == {"tuned_rate": 0.0}
    published = BTB()
    _run(published, window)
    assert published.metrics() == {"y_unreached_rate": 1.0}


def test_a_table_without_a_threshold_is_refused(tmp_path):
    path = _table(tmp_path, {"70b_h100x4": {"mixed": {"x": 2, "z_s": 1.0, "m": 4}}})
    with pytest.raises(ConfigError, match=r"cells\.70b_h100x4\.mixed lacks y_tokens$"):
        read_table(path)


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("x", 0, r"\.x must be an integer >= 1, got 0$"),
        ("y_tokens", 2.5, r"\.y_tokens must be an integer >= 1, got 2\.5$"),
        ("z_s", -1, r"\.z_s must be a number > 0, got -1$"),
        ("m", 9, r"\.m = 9 copies exceeds the 70b_h100x4 cluster's 4 nodes$"),
    ],
)
def test_a_cell_value_no_btb_takes_is_named_with_the_file_and_cell(tmp_path, key, value, said):
    """Such values were refused only at the run's reset, under BTB's own names."""
    cell = {"x": 2, "z_s": 1.0, "m": 4, "y_tokens": 16384, key: value}
    path = _table(tmp_path, {"70b_h100x4": {"mixed": cell}})
    with pytest.raises(
        ConfigError,
        match=rf"^btb_tuned\.path={re.escape(repr(str(path)))}: cells\.70b_h100x4\.mixed{said}",
    ):
        read_table(path)


@pytest.mark.parametrize(
    ("write", "said"),
    [
        (None, "no such file"),
        ("folder", "is a folder, not a file"),
        ('{"cells": ', r"not valid JSON \(Expecting value, line 1 column 11\)"),
        ("[1, 2]", "expected an object with 'cells': {setup: {workload: ...}}"),
        ('{"cells": {"70b_h100x4": 3}}', r"cells\.70b_h100x4 must be an object {workload: cell}"),
    ],
)
def test_a_file_that_cannot_be_read_names_btb_tuned_path(tmp_path, write, said):
    """A missing file or bad JSON was a traceback from pathlib or json and a policy
    failure (exit 1) that never named the setting."""
    path = tmp_path / "table.json"
    if write == "folder":
        path.mkdir()
    elif write is not None:
        path.write_text(write)
    named = re.escape(repr(str(path)))
    with pytest.raises(ConfigError, match=rf"^btb_tuned\.path={named}: {said}$"):
        make_policy("btb_tuned", path=str(path))


@pytest.mark.parametrize(
    "command",
    [
        ["experiments.compare", "policy_kwargs=btb_tuned.path=/nonexistent.json"],
        ["experiments.evaluate", "+policy_kwargs.btb_tuned.path=/nonexistent.json"],
    ],
)
def test_the_commands_say_a_missing_table_in_one_line(tmp_path, command):
    import subprocess
    import sys

    module, setting = command
    args = ["windows=1", "agents=none", "policies=btb_tuned", f"out_dir={tmp_path / 'o'}"]
    if module == "experiments.evaluate":
        args = ["policies=[btb_tuned]", "workload.eval_windows=1", "logger=none",
                f"out_dir={tmp_path / 'o'}"]  # fmt: skip
    env = {**os.environ, "WANDB_MODE": "disabled", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", module, setting, *args],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"error: {module}: btb_tuned.path='/nonexistent.json': no such file\n"
    assert proc.stdout == ""


def test_the_shipped_table_covers_every_setup_and_family():
    cells = read_table(TABLE_PATH)
    for setup in tune_btb_table.DEFAULTS["setups"]:
        assert set(cells[setup]) == set(tune_btb_table.FAMILIES)
        for cell in cells[setup].values():
            # the published constants are the search's first trial: never worse on train
            assert cell["train_ttft_mean_s"] <= cell["published_train_ttft_mean_s"]
    assert isinstance(make_policy("btb_tuned"), BTBTuned)


def test_the_command_writes_a_table_the_policy_reproduces(tmp_path, capsys):
    # art_like: windows of 1,000 requests (the synthetic ones have 4,120); the check
    # is that the table written is the one the policy reads and reproduces
    table = tune_btb_table.main(
        ["setups=qwen3_8b_h100x4", "workloads=art_like", "trials=2", f"out_dir={tmp_path}"]
    )
    cell = table["cells"]["qwen3_8b_h100x4"]["art_like"]
    assert cell["train_ttft_mean_s"] <= cell["published_train_ttft_mean_s"]
    assert len(cell["train_windows"]) == 5
    assert read_table(tmp_path / "btb_tuned.json") == table["cells"]
    pool = list(windows("art_like", "train", train_streams="shared"))  # (the command's default)
    runs = [
        _run_seeded(BTBTuned(str(tmp_path / "btb_tuned.json")), w, i) for i, w in enumerate(pool)
    ]
    assert np.mean(np.concatenate(runs)) == pytest.approx(cell["train_ttft_mean_s"], rel=1e-12)
    for trials in (0, 10**12, 100_001):  # (a typo's 10**12 ran for ever)
        with pytest.raises(
            ValueError,
            match=rf"trials must be between 1 and 100,000, got {trials} \(from the command line\)$",
        ):
            tune_btb_table.main([f"trials={trials}", f"out_dir={tmp_path}"])


def _run_seeded(policy, window, i):
    sim = Simulator(
        setup_cluster("qwen3_8b_h100x4"), window, SimConfig(), np.random.default_rng([0, i])
    )
    return policy.run(sim).ttft_s
