"""make_dataset: layout, split by whole window, manifest, determinism, the CLI."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from envs.workloads import iter_bursted_windows
from experiments import make_dataset
from experiments._cli import main_guard

SMALL = ["params=burst_requests=6,n_decoys=2,rows_per_window=15", "progress=false"]
BURSTS = ["params=burst_requests=6,n_decoys=2", "progress=false"]  # (bursted_synthetic's)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_default_workload_has_the_published_composition(tmp_path: Path) -> None:
    info = make_dataset.main([f"out_dir={tmp_path}", *SMALL])
    assert info["name"] == "bursted_art" and info["seed"] == 20260721
    assert info["splits"]["train"]["windows"] == 10 and info["splits"]["test"]["windows"] == 30
    manifest = info["windows"]
    assert sorted((w["family"], w["split"]) for w in manifest).count(("art", "train")) == 5
    assert sum(w["family"] == "synthetic" and w["split"] == "test" for w in manifest) == 15
    # 8 bursts x 6 + 2 decoys = 50 rows a synthetic window, 15 an ART-like one
    assert info["splits"]["train"]["rows"] == 5 * 15 + 5 * 50
    assert info["splits"]["test"]["rows"] == 15 * 15 + 15 * 50
    train, test = _rows(tmp_path / "train.jsonl"), _rows(tmp_path / "test.jsonl")
    assert (
        len(train) == info["splits"]["train"]["rows"]
        and len(test) == info["splits"]["test"]["rows"]
    )
    assert not {r["trace_id"] for r in train} & {r["trace_id"] for r in test}
    assert {r["split"] for r in train} == {"train"} and {r["split"] for r in test} == {"test"}
    fields = {"request_id", "trace_id", "source", "arrival_s", "input_length", "output_length",
              "hash_ids", "group_id", "split", "metadata"}  # fmt: skip
    assert set(test[0]) == fields and {r["source"] for r in test} == {"art", "synthetic"}
    on_disk = json.loads((tmp_path / "dataset_info.json").read_text())
    assert on_disk["splits"] == info["splits"] and on_disk["generator"]["params"] == {
        "burst_requests": 6, "n_decoys": 2, "rows_per_window": 15,
    }  # fmt: skip
    for split, rows in (("train", train), ("test", test)):  # input + output, the longest
        longest = max(r["input_length"] + r["output_length"] for r in rows)
        assert info["splits"][split]["longest_tokens"] == longest
    card = (tmp_path / "README.md").read_text()
    assert "bursted_art" in card and "| test | 30 |" in card
    windows = list(iter_bursted_windows(tmp_path / "test.jsonl"))
    assert [w.meta["trace_id"] for w in windows] == [
        w["trace_id"] for w in manifest if w["split"] == "test"
    ]


def test_bursted_synthetic_writes_20_windows_5_train(tmp_path: Path) -> None:
    info = make_dataset.main(["workload=bursted_synthetic", f"out_dir={tmp_path}",
                              "params=burst_requests=2,n_decoys=0", "progress=false"])  # fmt: skip
    assert (info["splits"]["train"]["windows"], info["splits"]["test"]["windows"]) == (5, 15)
    assert {w["family"] for w in info["windows"]} == {"synthetic"}
    assert all(w["rows"] == 16 for w in info["windows"])


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    args = ["workload=bursted_art", "train_windows=1", "test_windows=1", *SMALL]
    make_dataset.main([f"out_dir={tmp_path / 'a'}", *args])
    make_dataset.main([f"out_dir={tmp_path / 'b'}", *args])
    make_dataset.main([f"out_dir={tmp_path / 'c'}", "seed=5", *args])
    for name in ("train.jsonl", "test.jsonl", "dataset_info.json", "README.md"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a" / "test.jsonl").read_bytes() != (
        tmp_path / "c" / "test.jsonl"
    ).read_bytes()
    assert not list((tmp_path / "a").glob(".*.tmp"))


def test_a_failed_run_leaves_no_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> object:
        raise RuntimeError("generator failed")
        yield  # pragma: no cover

    monkeypatch.setattr(make_dataset, "window_rows", broken)
    with pytest.raises(RuntimeError):
        make_dataset.main([f"out_dir={tmp_path}", *SMALL])
    assert list(tmp_path.iterdir()) == []


DIES_MIDWAY = """
import os, signal, sys
from experiments import make_dataset

real = make_dataset.window_rows


def dies_midway(*args, **kwargs):
    for k, item in enumerate(real(*args, **kwargs)):
        if k == 2:
            if sys.argv[1] == "sigterm":
                os.kill(os.getpid(), signal.SIGTERM)
            raise RuntimeError("generator failed")
        yield item


make_dataset.window_rows = dies_midway
handler = signal.getsignal(signal.SIGTERM)
try:
    make_dataset.main(sys.argv[2:])
except SystemExit as stop:
    print("SystemExit", stop.code, flush=True)
except RuntimeError as error:
    print("RuntimeError", error, flush=True)
print("handler kept" if signal.getsignal(signal.SIGTERM) == handler else "handler changed")
"""


@pytest.mark.parametrize("how", ["error", "sigterm"])
def test_an_interrupted_run_keeps_the_old_dataset_whole(tmp_path: Path, how: str) -> None:
    """A run that dies after writing some windows (an error, or SIGTERM) leaves
    the previous train/test pair as it was and no temporary files. Run in a process
    of its own: a SIGTERM the run does not handle ends that process, not the tests'."""
    import subprocess
    import sys

    make_dataset.main([f"out_dir={tmp_path}", *SMALL])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop("BTB_PLUGINS", None)
    args = [f"out_dir={tmp_path}", "seed=5", "overwrite=true", *SMALL]
    child = subprocess.run(
        [sys.executable, "-c", DIES_MIDWAY, how, *args],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert child.returncode == 0, f"status {child.returncode}: {child.stderr[-2000:]}"
    # called from Python, SIGTERM raises SystemExit(143), as before 2026-12-06
    ended = "SystemExit 143" if how == "sigterm" else "RuntimeError generator failed"
    assert child.stdout.splitlines() == [ended, "handler kept"]
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_sigterm_under_the_command_is_terminated_and_a_callers_handler_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the command (main_guard), SIGTERM ends make_dataset as it ends every
    command: ``terminated``, 143. Called by a program with a SIGTERM handler of its
    own, make_dataset() leaves it in place: the handler runs and the dataset is
    written (the handler was replaced, and the run ended)."""
    real = make_dataset.window_rows

    def signalled(*args: object, **kwargs: object) -> object:
        for k, item in enumerate(real(*args, **kwargs)):  # type: ignore[arg-type]
            if k == 1:
                os.kill(os.getpid(), signal.SIGTERM)
            yield item

    monkeypatch.setattr(make_dataset, "window_rows", signalled)
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        make_dataset.main([f"out_dir={tmp_path / 'own'}", *SMALL])
        assert signal.getsignal(signal.SIGTERM) is not previous
        assert seen == [signal.SIGTERM]
        assert (tmp_path / "own" / "dataset_info.json").is_file()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a command's start
        out = tmp_path / "cmd"
        assert main_guard(lambda: make_dataset.main([f"out_dir={out}", *SMALL])) == 143
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert capsys.readouterr().err.splitlines()[-1] == "terminated"
    assert not out.exists()


def test_a_run_that_fails_describing_its_data_keeps_the_old_dataset_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The data files land with dataset_info.json and README.md, never before them."""
    make_dataset.main([f"out_dir={tmp_path}", *SMALL])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def broken_card(info: object) -> str:
        raise RuntimeError("card failed")

    monkeypatch.setattr(make_dataset, "dataset_card", broken_card)
    with pytest.raises(RuntimeError, match="card failed"):
        make_dataset.main([f"out_dir={tmp_path}", "seed=5", "overwrite=true", *SMALL])
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_cli_usage_errors() -> None:
    from experiments._cli import UsageError

    with pytest.raises(UsageError, match="out_dir"):
        make_dataset.main(["workload=bursted_synthetic"])
    with pytest.raises(ValueError, match="unknown workload"):
        make_dataset.main(["workload=nope", "out_dir=/tmp/never-written"])
    with pytest.raises(UsageError, match="key=value"):
        make_dataset.main(["out_dir=/tmp/x", "params=burst_requests"])
    with pytest.raises(
        UsageError,
        match=r"^experiments\.make_dataset: workload 'bursted_art': params=n_bursts must be an "
        r"integer >= 0",
    ):  # named as it was typed, not as the generator's config class
        make_dataset.main(["out_dir=/tmp/never-written", "params=n_bursts=-1"])
    # a window count is an option of its own, no generator parameter (configure's
    # train_windows given twice was a TypeError's traceback); compare has none
    with pytest.raises(UsageError) as refused:
        make_dataset.main(["out_dir=/tmp/never-written", "params=train_windows=1"])
    assert str(refused.value) == (
        "experiments.make_dataset: params=train_windows=1: train_windows is a window count, "
        "not a generator parameter (give train_windows=N test_windows=N)"
    )
    with pytest.raises(UsageError) as refused:  # (it suggested train_windows=N test_windows=N)
        make_dataset.main(["out_dir=/tmp/never-written", "params=val_windows=2"])
    assert str(refused.value) == (
        "experiments.make_dataset: params=val_windows=2: val_windows is a window count, "
        "not a generator parameter (a registered workload's dataset has no validation "
        "windows; give train_windows=N test_windows=N)"
    )
    from experiments import compare

    with pytest.raises(UsageError) as refused:
        compare.main(["out_dir=/tmp/never-written", "agents=none", "params=val_windows=2"])
    assert str(refused.value) == (
        "experiments.compare: params=val_windows=2: val_windows is a window count, not a "
        "generator parameter (compare runs a workload's own split; evaluate takes "
        "+workload.params.train_windows=N)"
    )
    # train_streams draws train windows: make_dataset takes it, compare (test windows
    # alone) refuses it in one line (it was a StopIteration's traceback), a workload of
    # one's own's too
    options = ["out_dir=/tmp/never-written", "agents=none", "params=train_streams=shared"]
    for workload in ([], ["workload=plugin", "workload.factory=examples.own_workload:make_rows"]):
        with pytest.raises(UsageError) as refused:
            compare.main([*options, *workload])
        assert str(refused.value) == (
            "experiments.compare: params=train_streams=shared: train_streams is how train "
            "windows are drawn, not a generator parameter (compare runs test windows, the "
            "same either way) (from the command line)"
        )


def test_runs_as_a_module_with_a_progress_bar(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    root = Path(__file__).resolve().parents[2]
    result = run_command(
        "experiments.make_dataset",
        ["workload=multi_tenant", f"out_dir={tmp_path}", "train_windows=1", "test_windows=1",
         "params=burst_requests=8,n_decoys=1,tenants=2"],
        root,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "multi_tenant" in result.stderr and "2/2" in result.stderr  # tqdm's bar
    assert "test: 1 window, 65 rows" in result.stdout  # 8 bursts x 8 + 1 decoy
    rows = _rows(tmp_path / "test.jsonl")
    assert {r["tenant"] for r in rows} == {"tenant-0", "tenant-1"}
    bad = run_command("experiments.make_dataset", ["workload=nope", f"out_dir={tmp_path}"], root)
    assert bad.returncode == 2 and "unknown workload" in bad.stderr


def test_overwrite_removes_a_val_split_the_new_dataset_does_not_have(tmp_path: Path) -> None:
    """A trace dataset with a val split, made again without one: no stale val.jsonl
    is left beside the new files; a file of someone else's is kept."""
    trace = Path(__file__).resolve().parents[2] / "examples" / "mooncake_example.jsonl"
    args = ["workload=trace", f"workload.path={trace}", f"out_dir={tmp_path}", "progress=false"]
    first = make_dataset.main([*args, "workload.val_fraction=0.2"])
    assert first["splits"]["val"]["windows"] > 0 and (tmp_path / "val.jsonl").exists()
    (tmp_path / "notes.txt").write_text("mine\n")
    second = make_dataset.main([*args, "overwrite=true"])
    assert "val" not in second["splits"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "README.md", "dataset_info.json", "notes.txt", "test.jsonl", "train.jsonl",
    ]  # fmt: skip


def test_an_empty_dataset_is_refused_and_given_counts_are_said(tmp_path: Path) -> None:
    from experiments._cli import UsageError

    out = tmp_path / "none"
    with pytest.raises(UsageError, match="train_windows=0 and test_windows=0 make a dataset of"):
        make_dataset.main(["train_windows=0", "test_windows=0", f"out_dir={out}"])
    assert not out.exists()
    # the workload's description states its own counts: the card says these differ
    make_dataset.main(["workload=bursted_synthetic", "train_windows=1", "test_windows=1",
                       f"out_dir={tmp_path / 'one'}", "params=burst_requests=2,n_decoys=0",
                       "progress=false"])  # fmt: skip
    card = (tmp_path / "one" / "README.md").read_text()
    assert "5 train / 15 test windows. This dataset has the windows given on its command" in card
    assert "| train | 1 |" in card and "| test | 1 |" in card
    # the workload's own counts, given: nothing to say
    make_dataset.main(["workload=bursted_synthetic", "train_windows=5", "test_windows=15",
                       f"out_dir={tmp_path / 'own'}", "params=burst_requests=2,n_decoys=0",
                       "progress=false"])  # fmt: skip
    assert "This dataset has the windows" not in (tmp_path / "own" / "README.md").read_text()
    # the description's figures (500 requests a burst, 120 decoys) are the workload's:
    # the card and dataset_info.json say these parameters differ
    said = (
        "Its generator parameters are not the workload's (burst_requests=2, n_decoys=0): "
        "the figures above describe the workload, not this dataset."
    )
    assert said in (tmp_path / "own" / "README.md").read_text()
    info = json.loads((tmp_path / "own" / "dataset_info.json").read_text())
    assert info["description"].endswith(said)


def test_requests_over_a_model_s_context_are_said_with_how_to_read_them() -> None:
    """131,072 tokens is the shortest context of a published setup's model: one
    token more in a split is said, naming the split and the option that reads it."""
    splits = {"train": {"longest_tokens": 9}, "test": {"longest_tokens": 131_072}}
    assert make_dataset.context_note({"splits": splits}) is None
    splits["test"]["longest_tokens"] = 131_073
    note = make_dataset.context_note({"splits": splits})
    assert note is not None
    assert note.startswith("Its longest request holds 131,073 tokens (input + output; in test)")
    assert "`workload.max_context_tokens=131073` reads them as generated" in note


def test_a_split_of_the_dataset_being_replaced_is_refused_as_its_trace(tmp_path: Path) -> None:
    """make_dataset overwrite=true reading one of the dataset's own splits would write
    the other split from it (empty) before replacing it: refused, the dataset whole."""
    from experiments._cli import UsageError

    trace = Path(__file__).resolve().parents[2] / "examples" / "mooncake_example.jsonl"
    args = ["workload=trace", f"out_dir={tmp_path}", "progress=false"]
    make_dataset.main([*args, f"workload.path={trace}"])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for split in ("test.jsonl", "train.jsonl"):
        given = tmp_path / split
        with pytest.raises(UsageError, match=f"is the dataset's {split} in out_dir="):
            make_dataset.main([*args, f"workload.path={given}", "overwrite=true"])
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    # another folder may read it
    info = make_dataset.main([*args[:1], f"workload.path={tmp_path / 'test.jsonl'}",
                              f"out_dir={tmp_path / 'again'}", "progress=false"])  # fmt: skip
    assert info["splits"]["test"]["rows"] > 0


@pytest.mark.parametrize("split", ["train", "test"])
def test_a_window_with_no_requests_is_refused_and_nothing_is_written(
    tmp_path: Path, split: str
) -> None:
    """A window with no request (a rate so low that the hour holds none) is one line
    naming it, as evaluate refuses it, whichever split it is in; no folder is left,
    and an earlier dataset stays whole (it wrote empty files and ``"rows": 0``)."""
    from experiments._cli import main_guard

    counts = [f"train_windows={int(split == 'train')}", f"test_windows={int(split == 'test')}"]
    args = ["workload=conversation_like", "params=requests_per_hour=0.0001", *counts,
            "progress=false"]  # fmt: skip
    out = tmp_path / "new" / "deep"
    said = (
        f"workload conversation_like: {split} window 'conversation-0000' has no requests "
        "(seed=20260721); every window needs some: change params= or seed="
    )
    with pytest.raises(ValueError, match=f"^{re.escape(said)}$"):
        make_dataset.main([*args, f"out_dir={out}"])
    assert not (tmp_path / "new").exists()
    make_dataset.main([f"out_dir={tmp_path / 'old'}", "workload=bursted_synthetic", *BURSTS])
    before = {p.name: p.read_bytes() for p in (tmp_path / "old").iterdir()}
    assert main_guard(lambda: make_dataset.main([*args, f"out_dir={tmp_path / 'old'}",
                                                 "overwrite=true"])) == 2  # fmt: skip
    assert {p.name: p.read_bytes() for p in (tmp_path / "old").iterdir()} == before


def test_a_split_of_no_windows_is_not_written(tmp_path: Path) -> None:
    """``train_windows=0``: no train.jsonl (an empty one was written, which no reader
    takes) and no ``train`` entry; over a dataset that had one, it goes as the new
    files land."""
    args = ["workload=bursted_synthetic", "test_windows=1", f"out_dir={tmp_path}", *BURSTS]
    make_dataset.main(args)
    assert (tmp_path / "train.jsonl").exists()
    info = make_dataset.main([*args, "train_windows=0", "overwrite=true"])
    assert list(info["splits"]) == ["test"] and info["splits"]["test"]["windows"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "README.md", "dataset_info.json", "test.jsonl",
    ]  # fmt: skip
    assert "`test.jsonl` holds one JSON object per request" in (tmp_path / "README.md").read_text()


def test_a_user_generator_s_value_error_is_one_line_naming_the_parameter_as_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A workload of the user's own whose generator checks nothing: numpy's refusal of
    a negative rate is one line naming the workload, the window and ``params=`` as
    typed (it named neither), exit 2, and no folder is left."""
    from dataclasses import dataclass

    import numpy as np

    from envs.workloads import registry
    from experiments._cli import main_guard

    @dataclass(frozen=True)
    class Config:
        rate_per_s: float = 5.0

    def rows(config: Config, window: int, seed: int, split: str, trace_id: str) -> list[dict]:
        np.random.default_rng(seed).poisson(config.rate_per_s)
        return []

    family = registry.Family("hot", rows, Config(), 1, 1, 1)
    monkeypatch.setitem(registry._SCENARIOS, "hot_set", registry.Scenario("hot_set", "", (family,)))
    out = tmp_path / "hot"
    argv = ["workload=hot_set", "params=rate_per_s=-5", f"out_dir={out}", "progress=false"]
    assert main_guard(lambda: make_dataset.main(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "error: experiments.make_dataset: workload 'hot_set': "
    )
    assert "(seed 20260721, params=rate_per_s=-5.0): " in err
    # where the value came from, at the end, as the Hydra commands say it
    assert err.endswith("ValueError: lam < 0 or lam is NaN (from the command line)\n")
    assert not out.exists()


def test_the_card_says_how_train_windows_were_drawn(tmp_path: Path) -> None:
    """The default draws train windows from a seed of their own, and the card says so;
    ``params=train_streams=shared`` draws every window from the dataset's seed: the card
    says that instead, and lists it among no generator parameters. Test windows are
    the same bytes either way; the train windows are not."""
    for streams in ("own", "shared"):
        params = f"params=burst_requests=2,n_decoys=0,train_streams={streams}"
        make_dataset.main(["workload=bursted_synthetic", "train_windows=1", "test_windows=1",
                           f"out_dir={tmp_path / streams}", "progress=false", params])  # fmt: skip
    own, shared = ((tmp_path / s / "README.md").read_text() for s in ("own", "shared"))
    assert "Train windows are drawn from a seed of their own" in own
    assert "Every window is drawn from the dataset's seed (`train_streams=shared`)" in shared
    assert "train_streams" not in shared.split("Its generator parameters")[-1].split(".")[0]
    said = "Its generator parameters are not the workload's (burst_requests=2, n_decoys=0):"
    assert said in shared and said in own
    assert (tmp_path / "own" / "test.jsonl").read_bytes() == (
        tmp_path / "shared" / "test.jsonl"
    ).read_bytes()
    assert (tmp_path / "own" / "train.jsonl").read_bytes() != (
        tmp_path / "shared" / "train.jsonl"
    ).read_bytes()
    info = json.loads((tmp_path / "shared" / "dataset_info.json").read_text())
    assert info["generator"]["families"]["synthetic"]["train_streams"] == "shared"
