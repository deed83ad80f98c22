"""tune_btb_table's options: an existing table is never replaced silently, and the
seeds are checked up front, each error one line naming the option."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiments import tune_btb_table
from experiments._cli import main_guard

FAST = ["setups=qwen3_8b_h100x4", "workloads=art_like", "trials=1"]


@pytest.fixture
def no_search(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """tune_cell replaced by a stub that records the cells it was asked for."""
    asked: list[str] = []

    def cell(setup: str, workload: str, options: dict[str, Any]) -> dict[str, Any]:
        asked.append(f"{setup}/{workload}")
        return {"x": 2, "z_s": 1.0, "m": 4, "y_tokens": 65536, "train_ttft_mean_s": 1.0,
                "published_train_ttft_mean_s": 1.0, "train_windows": []}  # fmt: skip

    monkeypatch.setattr(tune_btb_table, "tune_cell", cell)
    return asked


def test_the_shipped_table_is_kept_unless_overwrite(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_search: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    shipped = tmp_path / "baselines" / "btb_tuned.json"
    shipped.parent.mkdir()
    shipped.write_text('{"cells": {}}\n')
    monkeypatch.setattr(tune_btb_table, "TABLE_PATH", shipped)
    assert main_guard(lambda: tune_btb_table.main(FAST)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(shipped) in err and "overwrite=true" in err
    assert shipped.read_text() == '{"cells": {}}\n' and no_search == []
    table = tune_btb_table.main([*FAST, "overwrite=true"])
    assert no_search == ["qwen3_8b_h100x4/art_like"]
    assert "overwrite" not in table["options"]
    assert "qwen3_8b_h100x4" in shipped.read_text()


def test_an_out_dir_holding_a_table_is_refused_unless_overwrite(
    tmp_path: Path, no_search: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "btb_tuned.json").write_text("old\n")
    (tmp_path / "notes.txt").write_text("mine\n")
    assert main_guard(lambda: tune_btb_table.main([*FAST, f"out_dir={tmp_path}"])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "out_dir=" in err and "btb_tuned.json" in err
    assert (tmp_path / "btb_tuned.json").read_text() == "old\n" and no_search == []
    tune_btb_table.main([*FAST, f"out_dir={tmp_path}", "overwrite=true"])
    assert "qwen3_8b_h100x4" in (tmp_path / "btb_tuned.json").read_text()
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("seed=-1", "tune_btb_table: seed must be between 0 and 2**32 - 1 (a numpy seed), got -1"),
        ("seed=4294967296", "seed must be between 0 and 2**32 - 1 (a numpy seed), got 4294967296"),
        ("workload_seed=-1", "tune_btb_table: workload_seed must be between 0 and 2**32 - 1"),
    ],
)
def test_seeds_are_checked_before_any_search(
    arg: str, message: str, tmp_path: Path, no_search: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main_guard(lambda: tune_btb_table.main([*FAST, arg, f"out_dir={out}"])) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: experiments.tune_btb_table: ")
    assert err.count("\n") == 1 and message in err
    assert no_search == [] and not out.exists()


def test_a_trace_is_refused_as_a_trace_not_as_an_unknown_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """workloads=trace was refused as ``unknown workload 'trace'``, beside a list of
    workloads that left out the one every other command takes; the table holds
    registered workloads only, and tune_btb tunes a trace."""
    out = tmp_path / "table"
    assert main_guard(lambda: tune_btb_table.main(["workloads=trace", f"out_dir={out}"])) == 2
    assert capsys.readouterr().err == (
        "error: experiments.tune_btb_table: workloads: 'trace' is a trace file's workload; "
        "the btb_tuned table holds registered workloads only (btb_tuned reads a cell for a "
        "window at its workload's registered parameters): tune its thresholds with python -m "
        "experiments.tune_btb -m workload=trace workload.path=FILE\n"
    )
    assert not out.exists()
    # any other name the registry does not know: as before (test_cli_errors pins the start)
    assert main_guard(lambda: tune_btb_table.main(["workloads=nope", f"out_dir={out}"])) == 2
    assert capsys.readouterr().err.startswith(
        "error: experiments.tune_btb_table: workloads: unknown workload 'nope' (from the "
        "command line); known: bursted_art, "
    )
