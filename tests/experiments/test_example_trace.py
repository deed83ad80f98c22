"""example_trace's out=: a folder is refused in one line naming the option."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments import example_trace
from experiments._cli import main_guard


@pytest.mark.parametrize("overwrite", ["false", "true"])
def test_out_naming_a_folder_is_refused(
    overwrite: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "kept.txt").write_text("mine\n")
    args = [f"out={tmp_path}", f"overwrite={overwrite}"]
    assert main_guard(lambda: example_trace.main(args)) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: experiments.example_trace: out='{tmp_path}' is a folder; give a file path\n"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["kept.txt"]
