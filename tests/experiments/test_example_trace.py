"""example_trace's out=: a folder is refused in one line naming the option."""

from __future__ import annotations

from pathlib import Path

import pytest

from envs.workloads.bursted import PUBLISHED_SEED
from envs.workloads.example_trace import example_mooncake_text
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


def test_a_file_on_the_way_a_trailing_slash_and_a_link_are_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file where a folder of out='s path must be (it said "File exists"), an out=
    ending in / (it wrote a file of that name), a link to nothing at out= (it was
    replaced without overwrite=true)."""
    (tmp_path / "ex.jsonl").write_text("mine\n")
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "nowhere")
    said = {
        f"{tmp_path}/ex.jsonl/x.jsonl": f": {tmp_path}/ex.jsonl is a file, not a folder",
        f"{tmp_path}/new.jsonl/": " names a folder (it ends in /); give a file path",
        f"{tmp_path}/dangling.jsonl": " exists (a broken symlink); overwrite=true replaces it",
    }
    for out, reason in said.items():
        assert main_guard(lambda out=out: example_trace.main([f"out={out}"])) == 2
        assert capsys.readouterr().err == f"error: experiments.example_trace: out={out!r}{reason}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling.jsonl", "ex.jsonl"]
    assert (tmp_path / "dangling.jsonl").is_symlink()
    # with overwrite=true the link is replaced by the file (what it named is not made)
    assert (
        main_guard(lambda: example_trace.main([f"out={tmp_path}/dangling.jsonl", "overwrite=true"]))
        == 0
    )
    assert not (tmp_path / "dangling.jsonl").is_symlink() and not (tmp_path / "nowhere").exists()
    assert (tmp_path / "dangling.jsonl").read_text() == example_mooncake_text(PUBLISHED_SEED)
