"""train_rescore: a finished run's checkpoints scored again on more validation windows."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from experiments._cli import UsageError, main_guard
from experiments._io import release_out_dirs
from experiments.config import register_configs
from experiments.train import train
from experiments.train_rescore import best_of, candidates, main

ROOT = Path(__file__).resolve().parents[2]
CLONE = ROOT / "agents" / "zoo" / "bc_route_warm"

register_configs()


def test_the_best_is_the_lowest_score_the_earliest_of_equals_never_nan():
    assert best_of([(0, 0.70), (10, 0.69), (20, math.nan), (30, 0.69)]) == (10, 0.69)
    assert best_of([(0, math.nan), (5, 2.0)]) == (5, 2.0)
    step, score = best_of([(0, math.nan)])
    assert step == -1 and math.isnan(score)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny fine-tuning run from the clone: 1 validation window, checkpoints at 32 and
    64 steps, the run's config saved where Hydra saves it."""
    folder = tmp_path_factory.mktemp("run")
    overrides = [
        "workload=tiny",
        "logger=none",
        "train.progress=false",
        "train.evaluate=false",
        "agent=maskable_ppo",
        "env=route_warm",
        "env.n_envs=1",
        "agent.hyperparams.n_steps=32",
        "agent.hyperparams.batch_size=32",
        "agent.hyperparams.n_epochs=1",
        "train.total_timesteps=64",
        "train.val_every=32",
        "train.checkpoint_every=32",
        "train.val_score=geomean",
        f"train.init_from={CLONE}",
        f"out_dir={folder}",
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides)
    objective = train(cfg)
    release_out_dirs(finished=True)  # (as the command's main does: the run has ended)
    # what a sweeper (Optuna) minimises: the kept validation score, never a test figure
    kept = json.loads((folder / "train.json").read_text())["train"]["validation"]
    assert objective == kept["best_score"]
    (folder / ".hydra").mkdir()
    OmegaConf.save(cfg, folder / ".hydra" / "config.yaml")
    return folder


def test_rescoring_on_two_windows_keeps_the_first_and_takes_their_geomean(run):
    assert [s for s, _ in candidates(run, str(CLONE))] == [0, 32, 64]
    assert main_guard(lambda: main([f"run={run}", "val_windows=2"])) == 0
    record = json.loads((run / "rescore_val2.json").read_text())
    trained = json.loads((run / "train.json").read_text())["train"]["validation"]
    assert record["windows"][:1] == trained["windows"]  # the run's window, then one more
    assert len(set(record["windows"])) == 2 and all("-00" in w for w in record["windows"])
    assert [h["step"] for h in record["history"]] == [0, 32, 64]
    for mine, theirs in zip(record["history"], trained["history"]):
        assert mine["step"] == theirs["step"]
        first, second = mine["window_ttft_mean_s"]
        assert first == pytest.approx(theirs["score"], rel=1e-12)  # same window, position, model
        assert mine["score"] == pytest.approx(math.sqrt(first * second), rel=1e-12)
    best = min(record["history"], key=lambda h: h["score"])
    assert (record["best_step"], record["best_folder"]) == (best["step"], best["folder"])


def test_a_rescore_is_not_overwritten_and_bad_runs_are_one_line(run, tmp_path, capsys):
    assert main_guard(lambda: main([f"run={run}", "val_windows=1"])) == 0
    before = (run / "rescore_val1.json").read_text()
    assert main_guard(lambda: main([f"run={run}", "val_windows=1"])) == 2
    assert "rescore_val1.json exists; overwrite=true replaces it" in capsys.readouterr().err
    assert (run / "rescore_val1.json").read_text() == before
    with pytest.raises(UsageError, match="val_windows=6, but the run's workload has 5"):
        main([f"run={run}", "val_windows=6"])
    with pytest.raises(UsageError, match=r"no \.hydra/config\.yaml"):
        main([f"run={tmp_path}"])
    with pytest.raises(UsageError, match="run=RUN"):
        main([])


def test_a_run_folder_another_run_is_writing_in_is_refused(run, capsys):
    """Another process's lock on the run's folder (a training run going on in it, or
    another rescore): refused in one line, nothing written; the lock is the rescore's
    while it runs and is given up after (a second rescore then runs)."""
    from experiments._io import LOCK_NAME, claim_out_dir

    held = claim_out_dir(run, "x: out_dir", (), True)  # a lock on another descriptor
    try:
        assert main_guard(lambda: main([f"run={run}", "val_windows=3"])) == 2
    finally:
        held.release()
    assert capsys.readouterr().err == (
        f"error: experiments.train_rescore: run={str(run)!r}: another run is writing in "
        "that folder now (wait for it to end)\n"  # (it has no out_dir to choose)
    )
    assert not (run / "rescore_val3.json").exists()
    assert main_guard(lambda: main([f"run={run}", "val_windows=3"])) == 0
    assert (run / "rescore_val3.json").is_file() and not (run / LOCK_NAME).exists()
    assert (run / "train.json").is_file() and (run / "last").is_dir()  # the run's: kept


def _copy_with(run: Path, to: Path, **train_values: object) -> Path:
    """The run's folder copied to ``to``, its saved config's train.* changed (None: removed)."""
    import shutil

    shutil.copytree(run, to, ignore=shutil.ignore_patterns("rescore_*"))
    cfg = OmegaConf.to_container(OmegaConf.load(to / ".hydra" / "config.yaml"))
    assert isinstance(cfg, dict)
    for key, value in train_values.items():
        if value is None:
            del cfg["train"][key]
        else:
            cfg["train"][key] = value
    OmegaConf.save(OmegaConf.create(cfg), to / ".hydra" / "config.yaml")
    return to


def test_a_config_that_is_not_a_training_run_s_is_named_in_one_line(run, tmp_path):
    old = _copy_with(run, tmp_path / "old", val_score=None)
    with pytest.raises(UsageError, match=r"config\.yaml has no train\.val_score"):
        main([f"run={old}"])
    other = tmp_path / "other"
    (other / ".hydra").mkdir(parents=True)
    (other / ".hydra" / "config.yaml").write_text("{}\n")
    with pytest.raises(UsageError, match=r"config\.yaml has no seed"):
        main([f"run={other}"])


def test_a_val_score_train_would_refuse_and_a_missing_folder_are_one_line(run, tmp_path, capsys):
    bogus = _copy_with(run, tmp_path / "bogus", val_score="bogus")
    assert main_guard(lambda: main([f"run={bogus}"])) == 2
    assert capsys.readouterr().err == (
        f"error: experiments.train_rescore: run={str(bogus)!r}: its .hydra/config.yaml has "
        "train.val_score='bogus'; it must be one of mean, geomean, worst_family\n"
    )
    assert sorted(p.name for p in bogus.glob("rescore_*")) == []
    assert main_guard(lambda: main([f"run={tmp_path / 'nowhere'}"])) == 2
    assert capsys.readouterr().err == (
        f"error: experiments.train_rescore: run={str(tmp_path / 'nowhere')!r}: no such folder\n"
    )
    assert not (tmp_path / "nowhere").exists()
    assert not list(tmp_path.glob("*/rescore_*"))


def test_worst_family_without_the_starting_model_is_refused(run, tmp_path, capsys):
    """worst_family divides by the step-0 model's scores; a run without init_from
    did not keep that model (unless validation kept it in agent/, as step 0), so a
    rescore would score on another scale."""
    import shutil

    scratch = _copy_with(run, tmp_path / "scratch", val_score="worst_family", init_from="")
    shutil.rmtree(scratch / "agent")  # a pick that is a checkpoint's weights: not step 0
    assert main_guard(lambda: main([f"run={scratch}", "val_windows=1"])) == 2
    assert "worst_family scores against the model the run started from" in capsys.readouterr().err
    assert not (scratch / "rescore_val1.json").exists()


def test_the_run_s_own_pick_is_scored_when_no_other_folder_holds_its_weights(run, tmp_path):
    """agent/ (the run's pick by validation) holds the clone's weights here, which
    init_from also gives: it is not scored twice. Without init_from (a fresh run
    keeps its starting model nowhere else) agent/ is scored, at its label."""
    from agents.algorithms import load_spec

    assert all(folder.name != "agent" for _, folder in candidates(run, str(CLONE)))
    scratch = _copy_with(run, tmp_path / "scratch", init_from="")
    found = candidates(scratch, "")
    label = load_spec(scratch / "agent").timesteps
    assert (label, scratch / "agent") in found and [s for s, _ in found] == sorted([label, 32, 64])
    assert main_guard(lambda: main([f"run={scratch}", "val_windows=1"])) == 0
    record = json.loads((scratch / "rescore_val1.json").read_text())
    assert str(scratch / "agent") in [h["folder"] for h in record["history"]]
    best = min(record["history"], key=lambda h: h["score"])
    assert record["best_folder"] == best["folder"]


def test_a_checkpoint_of_another_agent_is_refused_naming_the_field(run, tmp_path, capsys):
    """A folder of another run (an observation of another layout) failed deep in numpy."""
    copy = _copy_with(run, tmp_path / "copy")
    other = copy / "checkpoints" / "step_64"
    spec = json.loads((other / "agent.json").read_text())
    spec["env_kwargs"]["spare_features"] = True
    (other / "agent.json").write_text(json.dumps(spec))
    assert main_guard(lambda: main([f"run={copy}", "val_windows=1"])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{other}/agent.json has env_kwargs.spare_features=True, " in err
    assert "env_kwargs.spare_features=None; a rescore scores one run's checkpoints" in err
    assert not (copy / "rescore_val1.json").exists()


def test_a_trace_run_is_rescored_on_its_own_trace_read_from_where_it_ran(
    tmp_path, monkeypatch, capsys
):
    """A run given ``workload.path=mc.jsonl`` (relative) records the trace's sha256 in
    train.json; a rescore from another folder reads the path from the folder the run
    started in (and says so), and refuses the file once its bytes changed, naming
    both stamps; a file gone is named with where its path came from."""
    import hashlib

    from experiments.provenance import start_run
    from tests.workloads.tracekit import write_jsonl

    def rows(n):  # 0.5 s apart: four 5 s windows of 10 for 40 (train, train, val, test)
        return [
            {"timestamp": 500 * i, "input_length": 600, "output_length": 2,
             "hash_ids": [i, 1000 + i]}
            for i in range(n)
        ]  # fmt: skip

    start = tmp_path / "start"
    start.mkdir()
    trace = write_jsonl(start / "mc.jsonl", rows(40))
    sha = hashlib.sha256(trace.read_bytes()).hexdigest()
    folder = tmp_path / "run"
    monkeypatch.chdir(start)
    start_run()  # (as a command's start records where it ran)
    overrides = [
        "workload=trace", "workload.path=mc.jsonl", "workload.window_s=5",
        "workload.val_fraction=0.25", "logger=none", "train.progress=false",
        "train.evaluate=false", "env.n_envs=1", "agent.hyperparams.n_steps=32",
        "agent.hyperparams.batch_size=32", "agent.hyperparams.n_epochs=1",
        "train.total_timesteps=32", "train.val_every=32", "train.checkpoint_every=0",
        f"out_dir={folder}",
    ]  # fmt: skip
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides)
    train(cfg)
    release_out_dirs(finished=True)
    (folder / ".hydra").mkdir()
    OmegaConf.save(cfg, folder / ".hydra" / "config.yaml")
    record = json.loads((folder / "train.json").read_text())
    assert record["workload_file"]["sha256"] == sha
    assert record["provenance"]["cwd"] == str(start)
    monkeypatch.chdir(tmp_path)  # elsewhere: mc.jsonl is no file here
    capsys.readouterr()
    assert main_guard(lambda: main([f"run={folder}", "val_windows=0"])) == 0
    said = capsys.readouterr().out
    where = f"run={str(folder)!r}: workload.path='mc.jsonl' (its .hydra/config.yaml)"
    assert f"note: {where} is read from the folder the run started in: {trace}" in said
    rescored = json.loads((folder / "rescore_val1.json").read_text())
    assert rescored["workload_file"]["sha256"] == sha and len(rescored["windows"]) == 1
    write_jsonl(trace, rows(41))  # another trace at the same path
    other = hashlib.sha256(trace.read_bytes()).hexdigest()
    with pytest.raises(UsageError) as changed:
        main([f"run={folder}", "val_windows=0", "overwrite=true"])
    assert str(changed.value) == (
        f"experiments.train_rescore: {where} is not the trace the run trained on (sha256 "
        f"{sha[:12]}... in its train.json, {other[:12]}... now): its validation windows "
        "would be another trace's; put the run's trace back there"
    )
    trace.unlink()
    with pytest.raises(UsageError) as gone:
        main([f"run={folder}", "val_windows=0", "overwrite=true"])
    assert str(gone.value) == (
        f"experiments.train_rescore: {where}: no such file in the folder the run started "
        f"in ({start}), nor here"
    )
    del record["provenance"]["cwd"]
    (folder / "train.json").write_text(json.dumps(record))
    with pytest.raises(UsageError, match=r"no such file here \(the run recorded no provenance"):
        main([f"run={folder}", "val_windows=0", "overwrite=true"])
    assert json.loads((folder / "rescore_val1.json").read_text()) == rescored
    # a run moved from another machine: its folder there is gone, its trace is here
    record["provenance"]["cwd"] = "/nowhere/it/ran"
    (folder / "train.json").write_text(json.dumps(record))
    write_jsonl(tmp_path / "mc.jsonl", rows(40))
    assert main_guard(lambda: main([f"run={folder}", "val_windows=0", "overwrite=true"])) == 0
    assert json.loads((folder / "rescore_val1.json").read_text())["workload_file"]["sha256"] == sha


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("seed: 0\nsetup: [\n", "does not read as YAML (expected the node content, but found "
                                "'<stream end>', line 3)"),
        (b"\xff\xfe seed", "does not read as YAML ('utf-8' codec can't decode byte 0xff in "
                           "position 0: invalid start byte)"),
        ("- seed\n- setup\n", "holds a ListConfig, not a config (not the folder of a python -m "
                              "experiments.train run)"),
    ],
)  # fmt: skip
def test_a_config_that_does_not_read_is_one_line_naming_it(tmp_path, capsys, text, said):
    """A run's .hydra/config.yaml cut short (a copy or a disk that filled), not text,
    or no mapping: one line naming the file, exit 2 (a YAML parser's traceback, exit
    1, before; a list's, from OmegaConf)."""
    cut = tmp_path / "cut"
    (cut / ".hydra").mkdir(parents=True)
    config = cut / ".hydra" / "config.yaml"
    config.write_bytes(text) if isinstance(text, bytes) else config.write_text(text)
    assert main_guard(lambda: main([f"run={cut}"])) == 2
    assert capsys.readouterr().err == (
        f"error: experiments.train_rescore: run={str(cut)!r}: its .hydra/config.yaml {said}\n"
    )
