"""A run's folder: one run at a time (a lock), never a silent overwrite of an earlier
run (``overwrite=true`` replaces what the command writes, kept aside until the run
finishes), nothing
half-written on a failure or Ctrl-C, and no bare folder left by a failed Hydra job."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hydra import compose, initialize_config_dir

from experiments import compare, make_dataset, report
from experiments._cli import Terminated, main_guard
from experiments.config import register_configs
from experiments.jobs import hydra_entry, run_dir, run_job

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
COMPARE = [  # one small window (1,560 requests): the run folder is what these check
    "windows=1", "agents=none", "policies=least_load", "progress=false", "workload=agent_fanout",
]  # fmt: skip
DATASET = [
    "workload=bursted_synthetic", "train_windows=1", "test_windows=1", "progress=false",
    "params=n_bursts=1,burst_requests=4,n_decoys=0",
]  # fmt: skip

register_configs()


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def test_a_claimed_folder_is_refused_to_a_second_run_until_released(tmp_path: Path) -> None:
    from experiments._io import OutDirError, claim_out_dir

    first = claim_out_dir(tmp_path / "run", "x: out_dir", ())
    with pytest.raises(OutDirError, match="another run is writing in that folder now"):
        claim_out_dir(tmp_path / "run", "x: out_dir", ())
    first.release()
    assert not (tmp_path / "run").exists()  # made by the claim, left empty: removed
    again = claim_out_dir(tmp_path / "run", "x: out_dir", ())
    (tmp_path / "run" / "results.json").write_text("{}")
    again.release()
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["results.json"]  # no lock file


def test_a_refused_run_removes_the_folders_it_made_on_the_way(tmp_path: Path) -> None:
    from experiments._io import claim_out_dir

    claim_out_dir(tmp_path / "a" / "b" / "run", "x: out_dir", ()).release()
    assert list(tmp_path.iterdir()) == []  # a/ and a/b/ were made for it: gone too
    (tmp_path / "a").mkdir()
    claim_out_dir(tmp_path / "a" / "b" / "run", "x: out_dir", ()).release()
    assert [p.name for p in tmp_path.iterdir()] == ["a"]  # there before: kept


def test_a_refused_hydra_job_removes_the_folders_hydra_made_on_the_way(tmp_path: Path) -> None:
    folder = tmp_path / "a" / "b" / "run"
    overrides = ["logger=none", f"out_dir={folder}"]

    def fails(cfg: Any) -> float:
        raise ValueError("a bad value")

    def main() -> None:  # as Hydra runs it: the run folder (and a/, a/b/) made first
        with _hydra_job("evaluate", overrides) as cfg:
            run_job(fails, cfg)

    with pytest.raises(SystemExit) as stop:  # run_job's exit: one line, status 2
        hydra_entry("experiments.evaluate", main, overrides)
    assert stop.value.code == 2
    assert list(tmp_path.iterdir()) == []


def test_another_process_is_refused_a_folder_in_use(tmp_path: Path) -> None:
    """make_dataset into a folder another run holds: exit 2, one line, nothing written."""
    from experiments._io import claim_out_dir

    held = claim_out_dir(tmp_path, "x: out_dir", ())
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "experiments.make_dataset", f"out_dir={tmp_path}", *DATASET],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        held.release()
    assert proc.returncode == 2
    assert proc.stderr == (
        f"error: experiments.make_dataset: out_dir='{tmp_path}': another run is writing in "
        "that folder now (wait for it to end, or choose another out_dir)\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_second_compare_is_refused_and_overwrite_clears_the_old_charts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    compare.main([*COMPARE, f"out_dir={out}"])
    before = _files(out)
    assert set(before) == {"results.json", *compare.CHARTS}
    capsys.readouterr()
    assert main_guard(lambda: compare.main([*COMPARE, "seed=1", f"out_dir={out}"])) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: experiments.compare: out_dir='{out}' already holds ")
    assert "overwrite=true" in err and err.count("\n") == 1
    assert _files(out) == before
    result = compare.main([*COMPARE, "seed=1", "charts=false", "overwrite=true", f"out_dir={out}"])
    assert set(_files(out)) == {"results.json"}  # no chart of the earlier run beside it
    assert result["config"]["seed"] == 1


def test_a_second_make_dataset_is_refused_and_overwrite_replaces_the_dataset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_dataset.main([*DATASET, f"out_dir={tmp_path}"])
    before = _files(tmp_path)
    assert main_guard(lambda: make_dataset.main([*DATASET, "seed=7", f"out_dir={tmp_path}"])) == 2
    assert "already holds README.md, dataset_info.json, test.jsonl, ..." in capsys.readouterr().err
    assert _files(tmp_path) == before
    info = make_dataset.main([*DATASET, "seed=7", "overwrite=true", f"out_dir={tmp_path}"])
    assert info["seed"] == 7 and "seed=7" in (tmp_path / "README.md").read_text()


def test_two_saves_of_one_chart_at_once_do_not_share_a_temporary_file(tmp_path: Path) -> None:
    """A second save of the same chart, while the first is being rendered (another
    run into the folder), no longer moves the first one's temporary file away."""
    plt = report._pyplot()
    outer, inner = plt.figure(), plt.figure()
    target = tmp_path / "ttft_cdf.png"
    real = outer.savefig

    def savefig_with_a_rival(path: Any, **kwargs: Any) -> None:
        real(path, **kwargs)
        report._save(inner, target)  # the rival saves and lands before this save lands

    outer.savefig = savefig_with_a_rival  # type: ignore[method-assign]
    assert report._save(outer, target) == target
    assert [p.name for p in tmp_path.iterdir()] == ["ttft_cdf.png"]  # no temporary file left
    plt.close("all")


def _full_disk(*args: Any, **kwargs: Any) -> Any:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_compare_on_a_full_disk_leaves_no_half_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Charts first, results.json last; a failure removes what this run wrote. The
    error names the file being written (a full disk's OSError names none)."""
    from matplotlib.figure import Figure

    monkeypatch.setattr(Figure, "savefig", _full_disk)
    out = tmp_path / "run"
    assert main_guard(lambda: compare.main([*COMPARE, f"out_dir={out}"])) == 2
    err = capsys.readouterr().err
    assert err == f"error: experiments.compare: {out}/ttft_cdf.png: No space left on device\n"
    assert not out.exists()  # the folder it made, empty again, is gone too


def test_a_full_disk_while_writing_a_dataset_split_names_the_split(tmp_path: Path) -> None:
    writer = make_dataset.AtomicLineWriter(tmp_path / "train.jsonl")
    writer._handle.close()  # the real temporary file's handle, replaced by a full disk
    writer._handle = SimpleNamespace(write=_full_disk, close=lambda: None)  # type: ignore[assignment]
    with pytest.raises(OSError) as caught:
        writer.write("{}\n")
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(writer.path))
    writer.discard()
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_while_saving_an_agent_names_the_file_and_leaves_no_temp(
    tmp_path: Path,
) -> None:
    import gymnasium as gym

    import envs  # noqa: F401
    from agents.algorithms import AgentSpec, build_model, save_agent
    from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window

    window = synthetic_window(BurstedSyntheticConfig(n_bursts=1, burst_requests=4), window=0)
    spec = AgentSpec(algo="a2c", env="route", hidden=8)
    model = build_model(spec, gym.make(spec.env_id, windows=[window]), {"n_steps": 4})

    def save_half(path: Any, *args: Any, **kwargs: Any) -> None:
        Path(path).write_bytes(b"PK\x03\x04 half a zip")
        _full_disk()

    model.save = save_half  # type: ignore[method-assign]
    with pytest.raises(OSError) as caught:
        save_agent(model, spec, tmp_path / "agent")
    assert caught.value.errno == errno.ENOSPC
    assert caught.value.filename == str(tmp_path / "agent" / "model.zip")
    assert list(tmp_path.iterdir()) == []  # no agent folder, empty or half-filled


def test_ctrl_c_is_one_line_exit_130_and_leaves_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(compare, "evaluate_policies", interrupted)
    out = tmp_path / "run"
    assert main_guard(lambda: compare.main([*COMPARE, f"out_dir={out}"])) == 130
    assert capsys.readouterr().err == "interrupted\n"
    assert not out.exists()


def test_sigterm_ends_a_run_as_ctrl_c_does_exit_143(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGTERM (``kill``, ``timeout``, a scheduler) mid-run of an overwrite=true
    compare: the earlier run's results.json is put back, no .btb-replaced/ or lock
    is left, one line ``terminated``, exit 143, and SIGTERM is at its default again.
    (Killed outright, the run left the earlier results in .btb-replaced/ and the
    folder refused.)"""
    import signal

    out = tmp_path / "run"
    out.mkdir()
    (out / "results.json").write_text('{"earlier": 1}')

    def terminated(*args: Any, **kwargs: Any) -> Any:
        assert (out / ".btb-replaced" / "results.json").is_file()  # (kept aside meanwhile)
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("SIGTERM did not stop the run")

    monkeypatch.setattr(compare, "evaluate_policies", terminated)
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as a command starts
    try:
        code = main_guard(lambda: compare.main([*COMPARE, f"out_dir={out}", "overwrite=true"]))
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert code == 143
    assert capsys.readouterr().err == "terminated\n"
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]
    assert (out / "results.json").read_text() == '{"earlier": 1}'


HANGS_UP = """
import sys
from experiments import compare
from experiments._cli import main_guard

def waits(*args, **kwargs):
    print("ready", flush=True)
    import time
    time.sleep(600)

compare.evaluate_policies = waits
raise SystemExit(main_guard(lambda: compare.main(sys.argv[1:])))
"""


def test_a_terminal_hanging_up_ends_a_run_as_sigterm_does_exit_129(tmp_path: Path) -> None:
    """An ssh session dropping mid-run (its terminal closed: SIGHUP, then EIO on every
    write) of an overwrite=true compare: the earlier results.json is put back, no
    .btb-replaced/ or lock is left, and the command exits with 129. (SIGHUP killed
    it outright, stranding the earlier results in .btb-replaced/.) Run on a real
    pseudo-terminal, closed as sshd closes it."""
    import pty
    import select
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "run"
    out.mkdir()
    (out / "results.json").write_text('{"earlier": 1}')
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop("BTB_PLUGINS", None)
    master, terminal = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-c", HANGS_UP, *COMPARE, f"out_dir={out}", "overwrite=true"],
        stdin=terminal, stdout=terminal, stderr=terminal, start_new_session=True, env=env,
        preexec_fn=lambda: _take_as_terminal(0),
    )  # fmt: skip
    os.close(terminal)
    said = b""
    try:
        deadline = time.monotonic() + 120  # a guard against a hang, not a measurement
        while b"ready" not in said and time.monotonic() < deadline:
            if select.select([master], [], [], 1)[0]:
                said += os.read(master, 4096)
        assert b"ready" in said, said.decode(errors="replace")
        assert (out / ".btb-replaced" / "results.json").is_file()  # (kept aside meanwhile)
    finally:
        os.close(master)  # the terminal hangs up: SIGHUP to the run
    try:
        code = child.wait(120)
    finally:
        if child.poll() is None:
            child.kill()
    assert code == 128 + signal.SIGHUP
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]
    assert (out / "results.json").read_text() == '{"earlier": 1}'


def _take_as_terminal(fd: int) -> None:
    """In the child (a new session): make ``fd``, a pseudo-terminal, its controlling
    terminal, as a login shell's is, so that closing the other end hangs it up."""
    import fcntl
    import termios

    fcntl.ioctl(fd, termios.TIOCSCTTY, 0)


def test_a_callers_own_sigterm_handler_is_left_in_place(tmp_path: Path) -> None:
    """main_guard run by a program with a SIGTERM handler of its own (a scheduler's
    wrapper, a notebook's) leaves it in place: that handler runs, and the run goes
    on (it was replaced, and the run ended with 143)."""
    import signal

    seen: list[int] = []

    def mine(signum: int, frame: Any) -> None:
        seen.append(signum)

    def signalled() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        (tmp_path / "went_on").write_text("")

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        assert main_guard(signalled) == 0
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert seen == [signal.SIGTERM] and (tmp_path / "went_on").is_file()


def test_an_ignored_sigterm_stays_ignored() -> None:
    """A command started with SIGTERM ignored (by its parent) keeps ignoring it."""
    import signal

    from experiments._cli import terminating_as_interrupt

    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        with terminating_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)  # (raised Terminated)
            assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_forked_worker_ends_on_sigterm_as_without_the_handler() -> None:
    """A worker forked inside the block (a fork pool's) is killed by SIGTERM, as
    before: it does not raise the command's Terminated."""
    import signal

    from experiments._cli import terminating_as_interrupt

    with terminating_as_interrupt():
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child)
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                os._exit(0)
            except BaseException:
                os._exit(3)
        _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM


def test_a_worker_forked_in_a_long_c_call_ends_on_sigterm_at_once() -> None:
    """A worker forked inside the block starts with SIGTERM at its default: one in
    a long C call (no bytecode for a Python handler to run between) is killed by
    it there, so a pool's ``terminate()`` does not wait for the call to return
    (it waited 16 s in a review's run). The wait below only guards against a hang."""
    import signal
    import time

    from experiments._cli import terminating_as_interrupt

    with terminating_as_interrupt():
        ready, told = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child)
            os.close(ready)
            if {signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)} != {
                signal.SIG_DFL
            }:
                os._exit(3)  # the parent's handler, inherited
            os.write(told, b"1")
            sum(range(10**12))  # hours in one C call
            os._exit(0)
        os.close(told)
        try:
            assert os.read(ready, 1) == b"1", "the worker inherited the command's handler"
            time.sleep(0.2)  # (in its C call by now)
            os.kill(pid, signal.SIGTERM)
            for _ in range(600):  # 60 s at most: a hang, not a measurement
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.1)
            else:
                raise AssertionError("the worker outlived SIGTERM in its C call")
        finally:
            os.close(ready)
            with contextlib.suppress(ProcessLookupError, ChildProcessError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM


_GROUP_SCRIPT = """
import multiprocessing, sys, time
from envs.processes import run_in_processes
from experiments._cli import main_guard

def task(i):
    if i == 0:
        time.sleep(60)  # one busy worker; the other idles for the rest
    return i

def main():
    print("mapping", flush=True)
    run_in_processes(task, [(0,), (1,), (2,)], 2, context=multiprocessing.get_context("fork"))

sys.exit(main_guard(main))
"""


@pytest.mark.parametrize("name", ["SIGHUP", "SIGTERM"])
def test_workers_stopped_with_their_command_by_a_group_signal_end_it(
    tmp_path: Path, name: str
) -> None:
    """A signal to the whole process group (a terminal closing, a scheduler's
    SIGTERM) kills the workers at their default and reaches the command as an
    interrupt. With a multiprocessing.Pool (the improvement rounds' until
    2026-12-06) the command then waited for ever in terminate(), on the task queue's
    lock that an idle worker died holding. The wait below only guards against a
    hang."""
    import signal
    import time

    script = tmp_path / "group.py"
    script.write_text(_GROUP_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=env,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "mapping\n"
        time.sleep(1.0)  # (the workers are up, one of them idle)
        os.killpg(process.pid, getattr(signal, name))
        code = process.wait(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    said = process.stderr.read() if process.stderr else ""
    assert code == {"SIGHUP": 129, "SIGTERM": 143}[name], said


@contextlib.contextmanager
def _hydra_job(name: str, overrides: list[str]) -> Iterator[Any]:
    """The config as a single Hydra job sees it (``HydraConfig.get()`` works), with
    Hydra's own files written in its run folder as Hydra writes them."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf, open_dict

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name=name, overrides=overrides, return_hydra_config=True)
    folder = Path(cfg.hydra.run.dir)
    with open_dict(cfg):  # what Hydra fills in when it runs the job
        cfg.hydra.runtime.output_dir = str(folder)
        cfg.hydra.job.name = name
    HydraConfig.instance().set_config(cfg)
    (folder / ".hydra").mkdir(parents=True)
    task = OmegaConf.to_yaml(list(cfg.hydra.overrides.task))
    (folder / ".hydra" / "overrides.yaml").write_text(task)
    (folder / f"{cfg.hydra.job.name}.log").write_text("")
    try:
        yield cfg
    finally:
        HydraConfig.instance().cfg = None  # type: ignore[assignment]


@pytest.mark.parametrize("error", [TypeError("a bug"), KeyboardInterrupt(), Terminated()])
def test_a_hydra_job_failing_in_any_way_leaves_no_bare_run_folder(
    error: BaseException, tmp_path: Path
) -> None:
    from experiments._io import LOCK_NAME

    folder = tmp_path / "runs" / "evaluate" / "dated"
    overrides = ["logger=none", f"hydra.run.dir={folder}"]

    def fails(cfg: Any) -> float:
        assert run_dir(cfg, "evaluate", ("results.json",)) == folder
        assert (folder / LOCK_NAME).is_file()
        raise error

    with _hydra_job("evaluate", overrides) as cfg, pytest.raises(type(error)):
        run_job(fails, cfg)
    assert not folder.exists()


def test_a_hydra_out_dir_holding_a_run_is_refused_before_hydra_starts(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text("{}")

    def never() -> None:
        raise AssertionError("Hydra started")

    code = hydra_entry("experiments.evaluate", never, ["logger=none", f"out_dir={tmp_path}"])
    assert code == 2
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_an_out_dir_set_in_a_config_file_keeps_the_earlier_run_s_record(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """An out_dir an ``+experiment`` file sets, holding a run, is refused as one on the
    command line is: naming the file, with the earlier run's ``.hydra/`` as it was
    (Hydra had written the refused run's over it, as the check came after Hydra)."""
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    record = {
        "config.yaml": "seed: 7\n",
        "hydra.yaml": "hydra: {}\n",
        "overrides.yaml": "- seed=7\n",
    }
    for name, text in record.items():
        (run / ".hydra" / name).write_text(text)
    (run / "results.json").write_text("{}")
    (tmp_path / "experiment").mkdir()
    mine = tmp_path / "experiment" / "mine.yaml"
    mine.write_text(f"# @package _global_\nout_dir: {run}\n")
    args = ["logger=none", "workload=tiny", f"hydra.searchpath=[file://{tmp_path}]"]
    proc = run_command("experiments.evaluate", [*args, "+experiment=mine"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"error: experiments.evaluate: out_dir='{run}' (from {mine.resolve()}) already holds "
        "results.json; refusing to overwrite it (overwrite=true replaces what this command "
        "writes; or choose another out_dir)\n"
    )
    assert sorted(p.name for p in run.iterdir()) == [".hydra", "results.json"]
    assert {p.name: p.read_text() for p in (run / ".hydra").iterdir()} == record
    # a sweep there: each job refused, and no multirun.yaml left beside compare's results
    (run / ".hydra").rename(tmp_path / "hydra")
    proc = run_command(
        "experiments.evaluate", ["-m", *args, "+experiment=mine", "seed=0,1"], tmp_path
    )
    assert proc.returncode == 2
    assert sorted(str(p.relative_to(run)) for p in run.rglob("*")) == ["results.json"]


@pytest.mark.parametrize("sweep", [False, True])
def test_out_dir_and_hydra_s_own_folder_naming_two_folders_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sweep: bool
) -> None:
    """``out_dir=A hydra.run.dir=B`` wrote the run in B, its record saying out_dir A."""

    def never() -> None:
        raise AssertionError("Hydra started")

    key = "hydra.sweep.dir" if sweep else "hydra.run.dir"
    a, b = tmp_path / "a", tmp_path / "b"
    args = ["logger=none", f"out_dir={a}", f"{key}={b}", *(["-m", "seed=0,1"] if sweep else [])]
    assert hydra_entry("experiments.evaluate", never, args) == 2
    assert capsys.readouterr().err == (
        f"error: experiments.evaluate: out_dir='{a}' (from the command line) and {key}='{b}' "
        "name different run folders; give one of them (out_dir= is enough)\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_swept_out_dir_is_refused_before_hydra_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``-m out_dir=A,B``: each job was refused, naming a hydra.sweep.dir the user
    never gave, after Hydra had written the sweep's folder."""

    def never() -> None:
        raise AssertionError("Hydra started")

    monkeypatch.chdir(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    args = ["-m", "logger=none", f"out_dir={a},{b}"]
    assert hydra_entry("experiments.evaluate", never, args) == 2
    assert capsys.readouterr().err == (
        f"error: experiments.evaluate: out_dir={a},{b} (from the command line): out_dir "
        "cannot be swept; a sweep writes its jobs in one folder, each in a numbered folder "
        "of it (out_dir=DIR or hydra.sweep.dir=DIR: DIR/0, DIR/1, ...): give one folder, "
        "or run each out_dir as a run of its own\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_hydra_s_own_folder_interpolating_out_dir_is_checked_resolved(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """``hydra.run.dir=${out_dir}`` names the out_dir's folder: it was refused before
    Hydra started, its text compared as a folder. One that resolves to another
    folder (``${out_dir}/x``) is refused once resolved, and the folders Hydra made
    go with it."""
    called: list[int] = []
    a = tmp_path / "a"
    args = ["logger=none", f"out_dir={a}", "hydra.run.dir=${out_dir}"]
    assert hydra_entry("experiments.evaluate", lambda: called.append(1), args) == 0
    assert called == [1]

    run = ["logger=none", "workload=tiny", f"out_dir={a}", "hydra.run.dir=${out_dir}/x"]
    proc = run_command("experiments.evaluate", run, tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"error: experiments.evaluate: out_dir='{a}' (from the command line) and "
        f"hydra.run.dir='{a / 'x'}' name different run folders; give one of them "
        "(out_dir= is enough)\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_an_out_dir_a_config_file_sets_and_another_hydra_run_dir_are_refused(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    (tmp_path / "experiment").mkdir()
    mine = tmp_path / "experiment" / "mine.yaml"
    mine.write_text(f"# @package _global_\nout_dir: {tmp_path / 'a'}\n")
    args = ["logger=none", "workload=tiny", f"hydra.searchpath=[file://{tmp_path}]"]
    run = [*args, "+experiment=mine", f"hydra.run.dir={tmp_path / 'b'}"]
    proc = run_command("experiments.evaluate", run, tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"error: experiments.evaluate: out_dir='{tmp_path / 'a'}' (from {mine.resolve()}) and "
        f"hydra.run.dir='{tmp_path / 'b'}' name different run folders; give one of them "
        "(out_dir= is enough)\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["experiment"]


def test_a_path_to_write_beginning_with_a_tilde_is_refused_not_made_here(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    run_command: Callable[..., Any],
) -> None:
    """``~`` is expanded only by a shell: ``sh``'s ``out_dir=~/x``, a quoted one or a
    config file's made a folder named ``~`` in the working directory."""
    from experiments import example_trace

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", "/home/me")
    said = "a path beginning with '~' is not expanded here, only by a shell; write it out"
    assert main_guard(lambda: compare.main([*COMPARE, "out_dir=~/runs/x"])) == 2
    assert main_guard(lambda: example_trace.main(["out=~/t.jsonl"])) == 2
    assert main_guard(lambda: compare.main([*COMPARE, "out_dir=~other/x"])) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: experiments.compare: out_dir='~/runs/x': {said} (/home/me/runs/x)",
        f"error: experiments.example_trace: out='~/t.jsonl': {said} (/home/me/t.jsonl)",
        f"error: experiments.compare: out_dir='~other/x': {said} in full",
    ]
    (tmp_path / "experiment").mkdir()
    mine = tmp_path / "experiment" / "mine.yaml"
    mine.write_text("# @package _global_\nout_dir: ~/runs/y\n")
    args = ["logger=none", "workload=tiny", f"hydra.searchpath=[file://{tmp_path}]"]
    proc = run_command("experiments.evaluate", [*args, "+experiment=mine"], tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"error: experiments.evaluate: out_dir='~/runs/y' (from {mine.resolve()}): {said} "
        "(/home/me/runs/y)\n"
    )
    proc = run_command("experiments.evaluate", [*args, "out_dir='~/runs/z'"], tmp_path)
    assert proc.stderr == (
        f"error: experiments.evaluate: out_dir='~/runs/z' (from the command line): {said} "
        "(/home/me/runs/z)\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["experiment"]


def test_a_hydra_job_with_overwrite_clears_what_it_writes(tmp_path: Path) -> None:
    from experiments._io import release_out_dirs

    (tmp_path / "objective.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "wandb" / "offline-run-1").mkdir(parents=True)  # the replaced results' W&B run
    with _hydra_job("tune_btb", ["logger=none", "overwrite=true", f"out_dir={tmp_path}"]) as cfg:
        assert run_dir(cfg, "tune_btb", ("objective.json",)) == tmp_path
        release_out_dirs(finished=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".hydra", "notes.txt", "tune_btb.log"]


def test_train_overwrite_clears_every_file_a_training_run_writes(tmp_path: Path) -> None:
    """An earlier run's last/, train.json and train_rescore's records described the
    run replaced (a rescore then offered the old run's last/ as a checkpoint)."""
    from experiments._io import release_out_dirs
    from experiments.compare import OUTPUTS
    from experiments.train import TRAIN_OUTPUTS

    for folder in ("agent", "last", "checkpoints/step_512"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "agent.json").write_text("{}")
    for name in ("train.json", "results.json", "rescore_val1.json", "rescore_val20.json"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "rescore_notes.txt").write_text("mine")
    (tmp_path / "rescore_val_notes.json").write_text("mine too")
    with _hydra_job("train", ["logger=none", "overwrite=true", f"out_dir={tmp_path}"]) as cfg:
        assert run_dir(cfg, "train", (*OUTPUTS, *TRAIN_OUTPUTS)) == tmp_path
        release_out_dirs(finished=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".hydra",
        "rescore_notes.txt",
        "rescore_val_notes.json",  # a user's file (not rescore_val<N>.json)
        "train.log",
    ]


def test_overwrite_never_clears_an_input_of_the_run(tmp_path: Path) -> None:
    """A checkpoint to resume inside the folder that overwrite=true clears would be
    gone before the run reads it (a user lost a whole run so): refused, naming it."""
    from experiments._io import OutDirError, claim_out_dir, release_out_dirs

    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "agent.json").write_text("{}")
    (tmp_path / "train.json").write_text("{}")
    outputs = ("train.json", "agent", "checkpoints")
    with pytest.raises(OutDirError, match=r"overwrite=true would move .*agent aside, which holds "):
        claim_out_dir(
            tmp_path, "x: out_dir", outputs, True, inputs=[("resume", str(tmp_path / "agent"))]
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent", "train.json"]
    # an output that is a link to the input: clearing unlinks the link only
    elsewhere = tmp_path.parent / f"{tmp_path.name}-zoo-agent"
    elsewhere.mkdir()
    (tmp_path / "checkpoints").symlink_to(elsewhere)
    inputs_linked = [("resume", str(elsewhere))]
    claim_out_dir(tmp_path, "x: out_dir", ("checkpoints",), True, inputs=inputs_linked).release(
        finished=True
    )
    assert elsewhere.is_dir() and not (tmp_path / "checkpoints").exists()
    # an input beside the outputs, not in one of them, stays and the run goes on
    (tmp_path / "trace.jsonl").write_text("")
    inputs = [("workload.path", str(tmp_path / "trace.jsonl"))]
    claim_out_dir(tmp_path, "x: out_dir", outputs, True, inputs=inputs).release(finished=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.jsonl"]

    # through a Hydra job: train resume= of the agent in its own out_dir
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "agent.json").write_text("{}")
    args = ["logger=none", "overwrite=true", f"out_dir={tmp_path}", f"resume={tmp_path}/agent"]
    with _hydra_job("train", args) as cfg, pytest.raises(OutDirError, match="resume="):
        run_dir(cfg, "train", outputs)
    release_out_dirs()
    assert (tmp_path / "agent" / "agent.json").is_file()


def test_a_refused_hydra_job_in_the_default_folder_leaves_no_empty_runs_folder(
    tmp_path: Path,
) -> None:
    """Without out_dir= the job's folder is runs/<kind>/<time>__...: a refused run
    removes the folders made on the way to it (runs/evaluate) and keeps those that
    were there before (runs)."""
    (tmp_path / "runs").mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "experiments.evaluate", "logger=none", "cluster.node=0xH100"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "cluster.node='0xH100'" in proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["runs"]
    assert list((tmp_path / "runs").iterdir()) == []


SAME_SECOND = "20261204-140156"


def test_default_compare_folders_of_the_same_second_are_new_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without out_dir= every run gets a folder of its own (``<time>-2``, ``-3``, ...
    for runs started in the same second); an out_dir the user names that holds a
    run is still refused."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(compare.time, "strftime", lambda fmt, *when: SAME_SECOND)
    made = [compare.main([*COMPARE, "charts=false"])["config"]["out_dir"] for _ in range(3)]
    first = f"runs/70b_h100x4__agent_fanout__compare__0__{SAME_SECOND}"
    assert made == [first, f"{first}-2", f"{first}-3"]
    assert all((tmp_path / folder / "results.json").is_file() for folder in made)
    capsys.readouterr()
    assert main_guard(lambda: compare.main([*COMPARE, "charts=false", f"out_dir={first}"])) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: experiments.compare: out_dir='{first}' already holds results")
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [
        Path(folder).name for folder in made
    ]


def test_a_default_folder_another_run_is_writing_in_is_passed_over(tmp_path: Path) -> None:
    """Two runs started at once with the same default name: the second finds the
    first's folder locked (empty still) and claims the next name, under the same lock."""
    from experiments._io import claim_new_out_dir

    base = tmp_path / "runs" / "dated"
    first = claim_new_out_dir(base, "x: out_dir")
    second = claim_new_out_dir(base, "x: out_dir")
    assert (first.path, second.path) == (base, tmp_path / "runs" / "dated-2")
    first.release()
    second.release()
    assert list((tmp_path / "runs").iterdir()) == []  # made by the claims, left empty: gone


def test_default_hydra_folders_of_the_same_second_are_new_ones(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """evaluate without out_dir=: the dated folder of conf/evaluate.yaml (its time
    fixed here) is claimed as Hydra names it, a new one for each run; out_dir= naming
    one of them is refused."""
    from experiments._io import LOCK_NAME

    dated = "runs/evaluate/2026-12-04_14-01-56__tiny"
    args = ["logger=none", "workload=tiny", "workload.eval_windows=1", "policies=[least_load]",
            "progress=false"]  # fmt: skip
    same_second = f"hydra.run.dir='${{btb_dir:${{out_dir}},{dated}}}'"
    for _ in range(2):
        proc = run_command("experiments.evaluate", [*args, same_second], tmp_path)
        assert proc.returncode == 0, proc.stderr
    folders = sorted((tmp_path / "runs" / "evaluate").iterdir())
    assert [p.name for p in folders] == [Path(dated).name, f"{Path(dated).name}-2"]
    for folder in folders:
        assert (folder / "results.json").is_file() and (folder / ".hydra").is_dir()
        assert not (folder / LOCK_NAME).exists()
    refused = run_command("experiments.evaluate", [*args, f"out_dir={dated}"], tmp_path)
    assert refused.returncode == 2
    assert "already holds files; refusing to overwrite them" in refused.stderr


def test_a_job_that_changes_its_working_directory_keeps_its_default_folder(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """``hydra.job.chdir=true``: the job runs inside the folder it claimed by a
    relative name, still knows it holds it (was refused as "another run is writing
    in that folder") and releases its lock at the end."""
    from experiments._io import LOCK_NAME

    args = ["logger=none", "workload=tiny", "workload.eval_windows=1", "policies=[least_load]",
            "progress=false", "hydra.job.chdir=true"]  # fmt: skip
    proc = run_command("experiments.evaluate", args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    (folder,) = (tmp_path / "runs" / "evaluate").iterdir()
    assert (folder / "results.json").is_file()
    assert not (folder / LOCK_NAME).exists()


def test_a_config_resolved_outside_a_command_claims_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only a running Hydra command claims its default folder: a config composed and
    resolved elsewhere (a test, a notebook) names the dated folders and makes none."""
    monkeypatch.chdir(tmp_path)
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="evaluate", overrides=["logger=none"], return_hydra_config=True)
    assert str(cfg.hydra.run.dir).startswith("runs/evaluate/20")
    assert str(cfg.hydra.sweep.dir).startswith("multirun/evaluate/20")
    assert list(tmp_path.iterdir()) == []


TINY_TRAIN = [
    "workload=tiny", "train.total_timesteps=128", "env.n_envs=1", "logger=none",
    "agent.hyperparams.n_steps=128", "agent.hyperparams.batch_size=64",
    "train.progress=false", "train.evaluate=false",
]  # fmt: skip


def test_a_refused_run_leaves_the_earlier_run_s_hydra_record(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """Hydra writes .hydra/ (and a sweep's multirun.yaml and each job's .hydra/)
    before the job's own checks: a run refused there (a bad value with
    overwrite=true) used to leave the earlier run's results beside its own
    settings. The record is put back; a sweep folder holding a run is refused
    before Hydra starts, naming hydra.sweep.dir."""
    single = tmp_path / "single"
    assert (
        run_command("experiments.train", [*TINY_TRAIN, f"out_dir={single}"], tmp_path).returncode
        == 0
    )
    before = {p.name: p.read_bytes() for p in (single / ".hydra").iterdir()}
    log = (single / "train.log").read_text()  # the job's printed lines
    assert f"run folder {single}" in log and "trained to 128 steps" in log
    args = [*TINY_TRAIN, "sim.mfu=3", f"out_dir={single}", "overwrite=true"]
    done = run_command("experiments.train", args, tmp_path)
    assert done.returncode == 2 and "sim.mfu must be in (0, 1], got 3.0" in done.stderr
    assert {p.name: p.read_bytes() for p in (single / ".hydra").iterdir()} == before
    assert (single / "train.log").read_text() == log  # refused before the folder was its
    assert (single / "agent" / "agent.json").is_file()

    sweep = tmp_path / "sweep"
    args = ["-m", "seed=0,1", *TINY_TRAIN, f"hydra.sweep.dir={sweep}"]
    assert run_command("experiments.train", args, tmp_path).returncode == 0
    # the sweep's summary and each job's outcome (.hydra/outcome.json) are its record too
    files = [sweep / "multirun.yaml", sweep / "sweep.json", *sorted(sweep.glob("*/.hydra/*"))]
    assert sweep / "0" / ".hydra" / "outcome.json" in files
    kept = {p: p.read_bytes() for p in files}
    done = run_command(
        "experiments.train", [*args, "agent.hyperparams.learning_rate=0.01"], tmp_path
    )
    assert done.returncode == 2
    assert f"hydra.sweep.dir='{sweep}' (from the command line) already holds files" in done.stderr
    done = run_command("experiments.train", [*args, "sim.mfu=3", "overwrite=true"], tmp_path)
    assert done.returncode == 2
    assert {p: p.read_bytes() for p in files} == kept
    assert sorted(p.name for p in sweep.iterdir()) == ["0", "1", "multirun.yaml", "sweep.json"]


@pytest.mark.slow
def test_a_sweep_job_that_ran_keeps_its_record_when_another_fails(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """joblib runs each job in a process of its own: whether a job ran is read from
    its folder, not from this process. Job 0 trains (seed=5) over an earlier sweep
    with overwrite=true while job 1 is refused (seed=-1): job 0's record is its own
    (seed=5), job 1's folder keeps the earlier run's record beside its results."""
    sweep = tmp_path / "sweep"
    base = ["-m", "hydra/launcher=joblib", *TINY_TRAIN, f"hydra.sweep.dir={sweep}"]
    env = {"PYTHONPATH": str(ROOT), "WANDB_SILENT": "true"}
    assert run_command("experiments.train", [*base, "seed=0,1"], tmp_path, env).returncode == 0
    earlier = (sweep / "1" / ".hydra" / "overrides.yaml").read_bytes()
    assert b"seed=1" in earlier
    done = run_command("experiments.train", [*base, "seed=5,-1", "overwrite=true"], tmp_path, env)
    assert done.returncode == 2
    assert b"seed=5" in (sweep / "0" / ".hydra" / "overrides.yaml").read_bytes()
    assert (sweep / "1" / ".hydra" / "overrides.yaml").read_bytes() == earlier
    assert b"seed=5,-1" in (sweep / "multirun.yaml").read_bytes()  # job 0 ran in the sweep
    # each worker's record reached the sweep's summary; job 1's folder is the earlier run's
    summary = json.loads((sweep / "sweep.json").read_text())
    assert [(j["job"], j["status"]) for j in summary["jobs"]] == [(0, "completed"), (1, "failed")]
    assert summary["jobs"][1]["kept"] == "its folder keeps the earlier run's files"


def test_hydra_sweep_dir_is_not_checked_in_a_single_run(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """Without -m Hydra does not use it: a folder holding files there is no reason to
    refuse (it was, for a while)."""
    unused = tmp_path / "unused"
    unused.mkdir()
    (unused / "notes.txt").write_text("mine")
    args = [*TINY_TRAIN, f"hydra.sweep.dir={unused}", f"out_dir={tmp_path / 'run'}"]
    assert run_command("experiments.train", args, tmp_path).returncode == 0
    assert [p.name for p in unused.iterdir()] == ["notes.txt"]


def test_a_hydra_job_into_a_folder_another_run_holds_is_refused_before_hydra_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run writing in its folder (its lock held) keeps its Hydra record: a second
    Hydra command naming that folder, even with overwrite=true, is refused before
    Hydra writes its own record over the running one's."""
    from experiments._io import claim_out_dir

    held = claim_out_dir(tmp_path, "x: out_dir", ())
    record = tmp_path / ".hydra" / "overrides.yaml"
    record.parent.mkdir()
    record.write_text("- seed=7\n")

    def never() -> None:
        raise AssertionError("Hydra started")

    try:
        args = ["logger=none", f"out_dir={tmp_path}", "overwrite=true"]
        code = hydra_entry("experiments.evaluate", never, args)
    finally:
        held.release()
    assert code == 2
    assert capsys.readouterr().err == (
        f"error: experiments.evaluate: out_dir='{tmp_path}' (from the command line): another "
        "run is writing in that folder now (wait for it to end, or choose another out_dir)\n"
    )
    assert sorted(p.name for p in tmp_path.rglob("*")) == [".hydra", "overrides.yaml"]
    assert record.read_text() == "- seed=7\n"


def test_a_refused_hydra_job_leaves_no_record_beside_another_command_s_results(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """compare writes no Hydra files: a train refused in its folder (a bad value,
    after Hydra wrote .hydra/ and train.log there) takes them away again, so the
    folder describes only the compare's results. In a folder that held no results,
    the refused job's record stays (what it was asked)."""
    out = tmp_path / "run"
    result = compare.main([*COMPARE, f"out_dir={out}"])
    assert result["rows"][0]["warm_copies_lost"] == 0  # (least_load copies nothing)
    before = sorted(p.name for p in out.rglob("*"))
    args = [*TINY_TRAIN, "sim.mfu=3", f"out_dir={out}", "overwrite=true"]
    done = run_command("experiments.train", args, tmp_path)
    assert done.returncode == 2 and "sim.mfu must be in (0, 1], got 3.0" in done.stderr
    assert sorted(p.name for p in out.rglob("*")) == before
    empty = tmp_path / "empty"
    empty.mkdir()
    args = [*TINY_TRAIN, "sim.mfu=3", f"out_dir={empty}"]
    assert run_command("experiments.train", args, tmp_path).returncode == 2
    assert (empty / ".hydra" / "overrides.yaml").is_file()


def test_a_sweep_into_a_folder_whose_job_is_running_is_refused_before_hydra_starts(
    tmp_path: Path,
) -> None:
    """A running sweep's jobs hold their own folders (``<sweep>/0``), not the sweep's:
    a second sweep naming that hydra.sweep.dir is refused before Hydra writes its
    multirun.yaml and the job's .hydra/ over the running ones'."""
    from experiments._io import claim_out_dir

    job = tmp_path / "0"
    held = claim_out_dir(job, "x: out_dir", ())
    (job / ".hydra").mkdir()
    (tmp_path / "multirun.yaml").write_text("running\n")

    def never() -> None:
        raise AssertionError("Hydra started")

    try:
        args = ["-m", "seed=0,1", "logger=none", f"hydra.sweep.dir={tmp_path}", "overwrite=true"]
        code = hydra_entry("experiments.train", never, args)
    finally:
        held.release()
    assert code == 2
    assert (tmp_path / "multirun.yaml").read_text() == "running\n"


@pytest.mark.parametrize(
    ("command", "name", "extra"),
    [
        ("experiments.compare", "results.json", ["agents=none", "policies=least_load"]),
        ("experiments.reproduce", "results.json", ["setups=70b_h100x4"]),
        ("experiments.bench", "bench.json", ["workloads=trace", "envs=", "learn="]),
        ("experiments.audit", "audit.json", []),
    ],
)
def test_the_key_value_commands_never_clear_the_trace_they_read(
    tmp_path: Path, run_command: Callable[..., Any], command: str, name: str, extra: list[str]
) -> None:
    """A trace named like the command's output, in its out_dir, with overwrite=true:
    the key=value commands removed it before reading it (helper-56's review);
    refused in one line naming the option, the file left as it was."""
    trace = tmp_path / name
    rows = '{"timestamp": 0, "input_length": 1024, "output_length": 5, "hash_ids": [1, 2]}\n'
    trace.write_text(rows)
    option = "path" if command == "experiments.audit" else "workload.path"
    args = [f"{option}={trace}", f"out_dir={tmp_path}", "overwrite=true", *extra]
    if command != "experiments.audit":
        args += ["workload=trace", "workload.test_fraction=1"]
    proc = run_command(command, args, tmp_path)
    assert proc.returncode == 2
    assert f"which holds {option}='{trace}', an input of this run" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert trace.read_text() == rows


def test_a_long_or_odd_trace_name_makes_a_short_safe_folder_name() -> None:
    """helper-56's review: a 236-character trace name made compare's and evaluate's
    default folder names too long for the file system; blanks and brackets stayed
    in the Hydra commands' folders."""
    from experiments._io import FOLDER_PART_MAX, folder_part
    from experiments.compare import default_out_dir
    from experiments.config import run_folder_workload

    assert folder_part("trace:my trace (v2).jsonl") == "trace-my-trace--v2-.jsonl"
    assert run_folder_workload("trace", "/d/my trace (v2).jsonl") == "trace-my-trace--v2-.jsonl"
    long = "x" * 236 + ".jsonl"
    part = run_folder_workload("trace", f"/d/{long}")
    assert len(part) == FOLDER_PART_MAX and part.startswith("trace-xxx")
    assert part != run_folder_workload("trace", f"/d/{long}y")  # the hash tells them apart
    options = {"workload": "trace", "setup": "70b_h100x4", "seed": 0}
    folder = default_out_dir(options, "compare", f"trace:{long}").name
    assert part in folder and len(folder) < 255
    assert run_folder_workload("trace", "") == run_folder_workload("trace", None) == "trace"
    assert run_folder_workload("bursted_synthetic", None) == "bursted_synthetic"
    assert run_folder_workload("bursted_synthetic", None, {}) == "bursted_synthetic"
    changed = {"n_bursts": 2, "burst_requests": 30}  # as compare's folder names them
    assert run_folder_workload("bursted_synthetic", None, changed) == (
        "bursted_synthetic-n_bursts-2-burst_requests-30-"
    )


def test_an_unquoted_value_with_blanks_says_how_to_quote_it(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    path = tmp_path / "my trace (v2).jsonl"
    proc = run_command(
        "experiments.evaluate", ["workload=trace", f"workload.path={path}", "logger=none"], tmp_path
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: experiments.evaluate: 'workload.path={path}' does not parse as an override: "
        f"quote a value with blanks, brackets, commas, '=' or letters beyond ASCII, as "
        f"\"workload.path='{path}'\" (Hydra's override grammar)"
    )


def test_an_override_that_does_not_parse_is_cut_unless_its_hint_repeats_it() -> None:
    """A quoted or list value the grammar refuses is said back cut (its message has no
    hint to copy); an unquoted one whole, as its quoting hint repeats it."""
    from experiments._cli import UsageError
    from experiments.jobs import _check_quoting

    with pytest.raises(UsageError) as refused:
        _check_quoting("x", ["checkpoint=[" + "a" * 200])
    said = str(refused.value)
    assert said.startswith("x: 'checkpoint=[" + "a" * 47 + "...") and "a" * 61 not in said
    path = "/d/" + "b" * 100 + " (v2).jsonl"
    with pytest.raises(UsageError) as refused:
        _check_quoting("x", [f"workload.path={path}"])
    assert str(refused.value).startswith(f"x: 'workload.path={path}' does not parse")


def test_the_quoting_hint_parses_back_to_the_value_typed() -> None:
    """helper-59's review: a value with a ' got a hint Hydra's grammar refused."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from experiments._cli import UsageError
    from experiments.jobs import _check_quoting

    # an '=' and a letter beyond ASCII got the grammar's bare message, naming no override
    for value in ("/d/bob's trace.jsonl", "/d/my trace (v2).jsonl", "/d/a=b", "/d/café.jsonl"):
        with pytest.raises(UsageError) as refused:
            _check_quoting("x", [f"workload.path={value}"])
        hint = str(refused.value).split('as "', 1)[1].rsplit('" (Hydra', 1)[0]
        assert OverridesParser.create().parse_override(hint).value() == value


def test_a_quoted_value_that_does_not_parse_is_named_with_the_grammars_reason() -> None:
    from experiments._cli import UsageError
    from experiments.jobs import _check_quoting

    with pytest.raises(
        UsageError, match=r"^x: 'checkpoint=\[a,b' does not parse as an override \("
    ):
        _check_quoting("x", ["checkpoint=[a,b"])
    _check_quoting("x", ["seed=0,1,2", "+experiment=a", "policies=[btb]", "-m"])  # they parse


def test_compare_s_policy_kwargs_given_to_evaluate_is_named_with_evaluate_s_spelling() -> None:
    """``policy_kwargs=ppo_thresholds.y_tokens=8192`` (compare's form) got the quoting
    hint, and quoted so it failed as "Cannot assign str to Dict[str, Any]"; either way
    it now names evaluate's overrides, which compose to the settings meant."""
    from hydra import compose, initialize_config_dir

    from experiments._cli import UsageError
    from experiments.jobs import _check_quoting

    conf = Path(__file__).resolve().parents[2] / "conf"
    for arg in ("policy_kwargs=ppo_thresholds.y_tokens=8192,btb.x=3",
                "policy_kwargs='ppo_thresholds.y_tokens=8192,btb.x=3'"):  # fmt: skip
        with pytest.raises(UsageError, match="is compare's spelling") as refused:
            _check_quoting("x", [arg])
        own = str(refused.value).split("its own override: ", 1)[1].split(" ")
        assert own == ["+policy_kwargs.ppo_thresholds.y_tokens=8192", "+policy_kwargs.btb.x=3"]
        with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
            cfg = compose(config_name="evaluate", overrides=own)
        assert cfg.policy_kwargs == {"ppo_thresholds": {"y_tokens": 8192}, "btb": {"x": 3}}
    _check_quoting("x", ["+policy_kwargs.btb.y_tokens=8192", "policy_kwargs={btb:{m:2}}"])


def test_compare_s_policy_kwargs_given_to_a_command_without_them_is_an_unknown_key() -> None:
    """train and tune_btb take no policy settings: compare's spelling is refused as the
    key it is, not told to become ``+policy_kwargs.btb.y_tokens=8192``, which they
    then refused as an unknown key all the same."""
    from experiments._cli import UsageError
    from experiments.jobs import _check_quoting

    for command, takes in (
        ("experiments.train", "setup, model, cluster, workload, sim, logger, seed, out_dir, "
         "overwrite, env, agent, train, imitation, improvement, resume"),
        ("experiments.tune_btb", "setup, model, cluster, workload, sim, logger, seed, "
         "out_dir, overwrite, x, y_tokens, z, m"),
    ):  # fmt: skip
        with pytest.raises(UsageError) as refused:
            _check_quoting(command, ["policy_kwargs=btb.y_tokens=8192"])
        assert str(refused.value) == (
            f"{command}: unknown key policy_kwargs (from the command line); "
            f"the command takes: {takes}"
        )
    with pytest.raises(UsageError, match="is compare's spelling"):
        _check_quoting("experiments.evaluate", ["policy_kwargs=btb.y_tokens=8192"])


def test_a_key_given_twice_is_said() -> None:
    """``sim=realistic sim=faults`` kept only faults, unsaid."""
    from envs.sim.errors import SettingWarning
    from experiments.jobs import _check_given_once

    said = r"^sim= is given twice \(sim=realistic, then sim=faults\): the last is used$"
    with pytest.warns(SettingWarning, match=said):
        _check_given_once(["sim=realistic", "logger=none", "sim=faults"])
    with pytest.warns(SettingWarning, match=r"^seed= is given twice"):
        _check_given_once(["-m", "seed=0,1", "+seed=2"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # other keys of one group, and flags, are no repeat
        _check_given_once(["+policy_kwargs.btb.m=1", "+policy_kwargs.btb.x=2", "-m"])


def test_a_warning_said_before_the_job_took_its_folder_is_in_its_log(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """helper-60's review: a batch larger than the rollout was said on stderr as the
    config was checked, before the job's log began; in a sweep the log is the job's
    only record. Said once on stderr, and first in the log."""
    tiny = [a for a in TINY_TRAIN if not a.startswith("agent.hyperparams.batch_size=")]
    args = [*tiny, "agent.hyperparams.batch_size=1024", f"out_dir={tmp_path / 'run'}"]
    done = run_command("experiments.train", args, tmp_path)
    assert done.returncode == 0, done.stderr
    said = "warning: agent.hyperparams.batch_size=1024 is larger than a rollout"
    assert done.stderr.count(said) == 1
    assert (tmp_path / "run" / "train.log").read_text().startswith(said)
    again = run_command("experiments.train", [*TINY_TRAIN, f"out_dir={tmp_path / 'b'}"], tmp_path)
    assert again.returncode == 0 and said not in (tmp_path / "b" / "train.log").read_text()


def test_overwrite_keeps_the_earlier_run_aside_until_the_new_one_finishes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """overwrite=true moves what the command writes into .btb-replaced/, with the
    companions (the records a run starts first: its W&B folder, moved, and its log,
    copied and emptied in place, so a handler open on it, as Hydra's is, writes the
    new run's lines there): removed when the run finishes, put back when it ends
    before writing any output (its companions are not outputs), and kept, and said,
    when it ends after writing some (neither run's files are lost). A folder still
    holding it is refused."""
    from experiments._io import REPLACED_NAME, OutDirError, claim_out_dir

    def earlier() -> dict[str, tuple[bytes, int]]:
        (tmp_path / "agent").mkdir(exist_ok=True)
        (tmp_path / "wandb" / "run-1").mkdir(parents=True, exist_ok=True)
        for name in ("results.json", "agent/agent.json", "run.log", "notes.txt", "wandb/run-1/x"):
            (tmp_path / name).write_text(f"earlier {name}")
        return _state()

    def _state() -> dict[str, tuple[bytes, int]]:
        return {
            str(p.relative_to(tmp_path)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(tmp_path.rglob("*"))
            if p.is_file()
        }

    outputs = ("results.json", "agent", "chart_*.png")
    companions = ("run.log", "wandb")
    before = earlier()
    with (tmp_path / "run.log").open("a") as handler:  # opened before the run, as Hydra's
        held = claim_out_dir(tmp_path, "x: out_dir", outputs, True, companions=companions)
        assert sorted(p.name for p in tmp_path.iterdir()) == [
            REPLACED_NAME,
            ".btb-run.lock",
            "notes.txt",
            "run.log",
        ]
        handler.write("this run's line\n")
    assert (tmp_path / "run.log").read_text() == "this run's line\n"
    (tmp_path / "wandb" / "run-2").mkdir(parents=True)  # companions: not the run's work
    held.release()  # ended (an error, Ctrl-C) before writing any output
    assert _state() == before and not (tmp_path / REPLACED_NAME).exists()
    assert capsys.readouterr().err == ""

    held = claim_out_dir(tmp_path, "x: out_dir", outputs, True, companions=companions)
    (tmp_path / "chart_queue.png").write_bytes(b"half a run")
    held.release()
    said = capsys.readouterr().err
    assert said == (
        "note: this run did not finish; the earlier run's files that overwrite=true "
        f"replaced are kept in {tmp_path / REPLACED_NAME}\n"
    )
    kept = sorted(p.name for p in (tmp_path / REPLACED_NAME).iterdir())
    assert kept == ["agent", "results.json", "run.log", "wandb"]
    assert (tmp_path / REPLACED_NAME / "agent" / "agent.json").read_text() == (
        "earlier agent/agent.json"
    )
    for overwrite in (False, True):
        with pytest.raises(OutDirError, match=rf"holds {REPLACED_NAME}/, an earlier run's"):
            claim_out_dir(tmp_path, "x: out_dir", outputs, overwrite)
    assert (tmp_path / "chart_queue.png").is_file()

    (tmp_path / "chart_queue.png").unlink()
    (tmp_path / "run.log").unlink()
    for entry in (tmp_path / REPLACED_NAME).iterdir():
        entry.rename(tmp_path / entry.name)
    (tmp_path / REPLACED_NAME).rmdir()
    held = claim_out_dir(tmp_path, "x: out_dir", outputs, True, companions=companions)
    (tmp_path / "results.json").write_text("this run's")
    held.release(finished=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "results.json", "run.log"]
    assert (tmp_path / "results.json").read_text() == "this run's"


def test_an_earlier_run_kept_aside_keeps_its_hydra_record_beside_it(tmp_path: Path) -> None:
    """Hydra writes the new run's .hydra/ before the job claims the folder: when the
    job then keeps the earlier run's files aside (it failed after writing some of its
    own), the earlier .hydra/ goes with them, so they stay matched to their config."""
    from experiments._io import REPLACED_NAME
    from experiments.jobs import hydra_record, restore_hydra_records

    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "overrides.yaml").write_text("- seed=1\n")
    (tmp_path / "results.json").write_text("earlier")
    records = {tmp_path: hydra_record(tmp_path)}
    (tmp_path / ".hydra" / "overrides.yaml").write_text("- seed=2\n")  # Hydra, as the run starts
    (tmp_path / REPLACED_NAME).mkdir()
    (tmp_path / "results.json").rename(tmp_path / REPLACED_NAME / "results.json")
    (tmp_path / "chart.png").write_text("half of the new run")
    restore_hydra_records(records)
    assert (tmp_path / REPLACED_NAME / ".hydra" / "overrides.yaml").read_text() == "- seed=1\n"
    assert (tmp_path / ".hydra" / "overrides.yaml").read_text() == "- seed=2\n"  # the new run's


def test_a_claim_that_fails_while_moving_puts_everything_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A move that fails half way (a file the system will not move, Ctrl-C) left some
    of the earlier run's files aside and said they were kept; one failing on the
    first move left an empty store that refused every later run."""
    from experiments import _io

    (tmp_path / "agent").mkdir()
    for name in ("results.json", "train.json", "agent/agent.json"):
        (tmp_path / name).write_text(name)
    before = {
        str(p.relative_to(tmp_path)): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()
    }
    real = os.rename
    for fail_at in (1, 2):
        calls: list[Any] = []

        def flaky(src: Any, dst: Any, fail_at: int = fail_at, calls: list[Any] = calls) -> None:
            calls.append(src)
            if len(calls) == fail_at:
                raise PermissionError(errno.EPERM, "Operation not permitted", str(src))
            real(src, dst)

        monkeypatch.setattr(_io.os, "rename", flaky)
        with pytest.raises(PermissionError):
            _io.claim_out_dir(tmp_path, "x: out_dir", ("agent", "results.json", "train.json"), True)
        monkeypatch.setattr(_io.os, "rename", real)
        after = {
            str(p.relative_to(tmp_path)): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()
        }
        assert after == before and not (tmp_path / _io.REPLACED_NAME).exists()
        assert capsys.readouterr().err == ""


def test_an_input_read_through_a_linked_output_is_refused(tmp_path: Path) -> None:
    """resume= through a link among the outputs: the link is moved aside, so the path
    the run reads would be gone (the check skipped links, which clearing unlinked)."""
    from experiments._io import OutDirError, claim_out_dir

    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "step_256").mkdir(parents=True)
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoints").symlink_to(elsewhere)
    given = str(run / "checkpoints" / "step_256")
    with pytest.raises(OutDirError, match=r"would move .*checkpoints aside, which holds resume="):
        claim_out_dir(run, "x: out_dir", ("checkpoints",), True, inputs=[("resume", given)])
    assert (run / "checkpoints").is_symlink()
    # what the link names, read by its own path, stays where it is: allowed
    real = [("resume", str(elsewhere / "step_256"))]
    claim_out_dir(run, "x: out_dir", ("checkpoints",), True, inputs=real).release(finished=True)
    assert not (run / "checkpoints").exists() and (elsewhere / "step_256").is_dir()


def test_a_kept_store_is_no_sweep_job_and_no_other_run_writes_into_it(tmp_path: Path) -> None:
    """.btb-replaced/.hydra/ made the store a job folder of the sweep; a later run,
    refused, wrote its own earlier record into a store another run had made."""
    from experiments import sweeps
    from experiments._io import REPLACED_NAME
    from experiments.jobs import hydra_record, restore_hydra_records

    for job in ("0", "1"):
        (tmp_path / job / ".hydra").mkdir(parents=True)
    (tmp_path / "0" / REPLACED_NAME / ".hydra").mkdir(parents=True)
    assert sweeps.job_folders(tmp_path) == [tmp_path / "0", tmp_path / "1"]

    run = tmp_path / "single"
    (run / ".hydra").mkdir(parents=True)
    (run / ".hydra" / "overrides.yaml").write_text("- seed=9\n")  # a killed run's record
    (run / REPLACED_NAME).mkdir()
    (run / REPLACED_NAME / "results.json").write_text("earlier")
    records = {run: hydra_record(run)}
    restore_hydra_records(records)  # (a refused run's tidy-up)
    assert not (run / REPLACED_NAME / ".hydra").exists()


def test_a_hydra_command_into_a_folder_holding_a_kept_store_says_so(tmp_path: Path) -> None:
    from experiments._io import REPLACED_NAME, OutDirError
    from experiments.jobs import _check_not_a_run

    (tmp_path / REPLACED_NAME).mkdir()
    for args in ([], ["overwrite=true"]):
        with pytest.raises(OutDirError, match=rf"holds {REPLACED_NAME}/, an earlier run's files"):
            _check_not_a_run(tmp_path, "out_dir='x'", args)


def test_a_job_says_each_warning_in_one_line_once_whatever_process_runs_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A joblib worker runs run_job without the command's main_guard: its warnings
    came in Python's two-line form, as often as each SimConfig was built."""
    from envs.sim.errors import SettingWarning

    def job(cfg: Any) -> float:
        for _ in range(3):
            warnings.warn(SettingWarning("sim.x does nothing"), stacklevel=1)
            warnings.simplefilter("default")  # (wipes Python's once-per-place record)
        return 1.0

    before = warnings.showwarning
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert run_job(job, SimpleNamespace()) == 1.0
    assert capsys.readouterr().err == "warning: sim.x does nothing\n"
    assert warnings.showwarning is before


WANDB_EVALUATE = ["logger=wandb", "logger.mode=offline", "workload=tiny", "progress=false"]


def _stops_evaluate(monkeypatch: pytest.MonkeyPatch, error: BaseException, logs: bool) -> None:
    """evaluate's run stopped by ``error`` (Ctrl-C, SIGTERM) as it starts its policies,
    its W&B run having logged one metric first (``logs``) or nothing."""
    from experiments import jobs

    def stopped(
        agents: Any, policies: Any, cfg: Any, out_dir: Path, logger: Any, *a: Any, **k: Any
    ) -> Any:
        if logs:
            logger.log({"probe": 1.0}, step=1)
        raise error

    monkeypatch.setattr(jobs, "evaluate_and_write", stopped)


@pytest.mark.parametrize(("error", "code"), [(KeyboardInterrupt(), 130), (Terminated(), 143)])
def test_an_interrupted_fresh_run_whose_wandb_run_logged_nothing_leaves_no_folder(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_command: Callable[..., Any],
    error: BaseException,
    code: int,
) -> None:
    """With W&B on (offline), a fresh evaluate stopped before it logged anything left
    its folder (.hydra/, its log and wandb/: a W&B run holding only its config), which
    refused the next run there; without W&B the folder went. Now it goes either way."""
    _stops_evaluate(monkeypatch, error, logs=False)
    out = tmp_path / "new" / "run"
    proc = run_command("experiments.evaluate", [*WANDB_EVALUATE, f"out_dir={out}"], tmp_path)
    assert proc.returncode == code
    assert "note:" not in proc.stderr
    assert list(tmp_path.iterdir()) == []  # (the folders made on the way to it too)


def test_an_interrupted_fresh_run_keeps_a_wandb_run_that_logged_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_command: Callable[..., Any]
) -> None:
    """A W&B offline run that logged something before Ctrl-C is the user's to sync:
    kept, with its run folder, and said in one line naming it."""
    _stops_evaluate(monkeypatch, KeyboardInterrupt(), logs=True)
    out = tmp_path / "run"
    proc = run_command("experiments.evaluate", [*WANDB_EVALUATE, f"out_dir={out}"], tmp_path)
    assert proc.returncode == 130
    (own,) = (out / "wandb").glob("offline-run-*")
    assert list(own.glob("*.wandb"))
    assert sorted(p.name for p in out.iterdir()) == [".hydra", "evaluate.log", "wandb"]
    assert proc.stderr.splitlines() == [
        f"note: this run did not finish; its W&B offline run {own} holds what it logged "
        f"and is kept (upload it with `wandb sync {own}`)",
        "interrupted",
    ]


@pytest.mark.parametrize("logs", [False, True])
def test_an_interrupted_overwrite_run_never_removes_a_wandb_run_that_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_command: Callable[..., Any], logs: bool
) -> None:
    """overwrite=true, stopped before any output: the earlier run's files are put
    back, the new W&B run going, when it logged nothing; when it logged something
    (it was removed to put the earlier wandb/ back) it counts as an output: kept in
    place, the earlier run's files kept aside in .btb-replaced/, both said."""
    from experiments._io import REPLACED_NAME

    out = tmp_path / "run"
    (out / "wandb" / "offline-run-earlier").mkdir(parents=True)
    (out / "wandb" / "offline-run-earlier" / "run-earlier.wandb").write_text("earlier")
    (out / "results.json").write_text('{"earlier": 1}')
    _stops_evaluate(monkeypatch, KeyboardInterrupt(), logs=logs)
    args = [*WANDB_EVALUATE, f"out_dir={out}", "overwrite=true"]
    proc = run_command("experiments.evaluate", args, tmp_path)
    assert proc.returncode == 130
    earlier = {"results.json", "wandb/offline-run-earlier/run-earlier.wandb"}
    where = out / REPLACED_NAME if logs else out
    assert earlier <= {str(p.relative_to(where)) for p in where.rglob("*") if p.is_file()}
    if not logs:
        assert sorted(p.name for p in (out / "wandb").iterdir()) == ["offline-run-earlier"]
        assert "note:" not in proc.stderr
        return
    (own,) = (out / "wandb").glob("offline-run-*")
    assert list(own.glob("*.wandb"))
    assert proc.stderr.splitlines() == [
        f"note: this run did not finish; its W&B offline run {own} holds what it logged "
        f"and is kept (upload it with `wandb sync {own}`)",
        "note: this run did not finish; the earlier run's files that overwrite=true "
        f"replaced are kept in {out / REPLACED_NAME}",
        "interrupted",
    ]


def test_a_fresh_run_stopped_as_its_wandb_run_starts_leaves_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_command: Callable[..., Any]
) -> None:
    """SIGTERM while W&B starts its run (it has made wandb/ and its run's folder):
    the folder W&B made went unremoved, and so the run folder stayed."""
    import wandb

    def stopped(**kwargs: Any) -> Any:
        (Path(kwargs["dir"]) / "wandb" / "offline-run-x" / "logs").mkdir(parents=True)
        (Path(kwargs["dir"]) / "wandb" / "debug.log").write_text("starting")
        raise Terminated

    monkeypatch.setattr(wandb, "init", stopped)
    out = tmp_path / "run"
    proc = run_command("experiments.evaluate", [*WANDB_EVALUATE, f"out_dir={out}"], tmp_path)
    assert proc.returncode == 143 and proc.stderr == "terminated\n"
    assert list(tmp_path.iterdir()) == []


HOLDS = """
import sys, time
from experiments._io import claim_out_dir

held = claim_out_dir(sys.argv[1], "x: out_dir", (), ignore=(".hydra",))
print("held", flush=True)
time.sleep(600)
"""


def test_an_out_dir_a_config_file_sets_that_another_run_holds_is_refused_before_hydra_writes(
    tmp_path: Path, run_command: Callable[..., Any]
) -> None:
    """An out_dir an ``+experiment`` file sets, naming a folder another run is
    writing in: refused before Hydra writes its record there (it wrote .hydra/ and
    its log over the running run's first, and left them: that run had worked
    there since), as one on the command line is; a sweep there too."""
    run = tmp_path / "run"
    (run / ".hydra").mkdir(parents=True)
    record = {"config.yaml": "seed: 7\n", "hydra.yaml": "hydra: {}\n", "overrides.yaml": "[]\n"}
    for name, text in record.items():
        (run / ".hydra" / name).write_text(text)
    held = subprocess.Popen(  # the running run: another process holding the folder
        [sys.executable, "-c", HOLDS, str(run)], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert held.stdout is not None and held.stdout.readline() == "held\n"
    (run / "checkpoints").mkdir()  # its work
    (tmp_path / "experiment").mkdir()
    mine = tmp_path / "experiment" / "mine.yaml"
    mine.write_text(f"# @package _global_\nout_dir: {run}\n")
    args = ["logger=none", "workload=tiny", f"hydra.searchpath=[file://{tmp_path}]"]
    try:
        proc = run_command("experiments.evaluate", [*args, "+experiment=mine"], tmp_path)
        swept = run_command(
            "experiments.evaluate", ["-m", *args, "+experiment=mine", "seed=0,1"], tmp_path
        )
    finally:
        held.kill()
        held.wait()
    assert proc.returncode == 2
    assert proc.stderr == (
        f"error: experiments.evaluate: out_dir='{run}' (from {mine.resolve()}): another run "
        "is writing in that folder now (wait for it to end, or choose another out_dir)\n"
    )
    assert swept.returncode == 2
    assert swept.stderr == (  # (the sweep's folder resolves before the file is known)
        f"error: experiments.evaluate: out_dir='{run}': another run is writing in that "
        "folder now (wait for it to end, or choose another out_dir)\n"
    )
    assert sorted(str(p.relative_to(run)) for p in run.rglob("*")) == [
        ".btb-run.lock",
        ".hydra",
        ".hydra/config.yaml",
        ".hydra/hydra.yaml",
        ".hydra/overrides.yaml",
        "checkpoints",
    ]  # fmt: skip (the lock file its holder, killed, left)
    assert {p.name: p.read_text() for p in (run / ".hydra").iterdir()} == record
