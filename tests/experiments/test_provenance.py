"""What a result file records to rerun its run: the working directory its relative
paths are read from, the start time, and each agent checkpoint read, by content."""

from __future__ import annotations

import hashlib
import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_provenance_records_cwd_start_time_and_each_agent_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents.adapter import AgentPolicy
    from experiments.provenance import provenance, start_run

    shutil.copytree(ROOT / "agents" / "zoo" / "bc_route_warm", tmp_path / "runs" / "agent")
    monkeypatch.chdir(tmp_path)
    before = datetime.now(timezone.utc).replace(microsecond=0)
    first = start_run()
    after = datetime.now(timezone.utc)
    assert first["cwd"] == str(tmp_path) and first["agent_files"] == {}
    started = datetime.fromisoformat(first["started"])
    assert started.utcoffset() is not None and started.utcoffset().total_seconds() == 0
    assert before <= started <= after
    AgentPolicy.load("runs/agent")  # as typed: relative to the working directory
    made = provenance()
    folder = tmp_path / "runs" / "agent"
    assert made["agent_files"] == {
        str(folder.resolve()): {
            "agent.json": hashlib.sha256((folder / "agent.json").read_bytes()).hexdigest(),
            "model.zip": hashlib.sha256((folder / "model.zip").read_bytes()).hexdigest(),
        }
    }
    # the start time and folder are the run's, not the moment asked
    assert (made["cwd"], made["started"]) == (first["cwd"], first["started"])
    for field in ("commit", "core", "plugins", "plugin_files"):  # the fields before, kept
        assert field in made
    (folder / "model.zip").write_bytes(b"edited after the read")
    assert provenance()["agent_files"] == made["agent_files"]  # the bytes that were read
    monkeypatch.chdir(ROOT)
    again = start_run()  # the next command: its own folder, no agent read yet
    assert again["cwd"] == str(ROOT) and again["agent_files"] == {}


def test_provenance_records_the_run_state_a_resume_read(tmp_path: Path) -> None:
    # a resumed run's results say which run_state.pkl it read, by content, beside
    # the checkpoint's agent.json and model.zip
    import pickle

    from agents import run_state
    from experiments.provenance import provenance, start_run

    start_run()
    folder = tmp_path / "checkpoints" / "step_64"
    folder.mkdir(parents=True)
    data = pickle.dumps({"version": run_state.RUN_STATE_VERSION, "timesteps": 64})
    (folder / run_state.RUN_STATE_FILE).write_bytes(data)
    assert run_state.load(folder) == {"version": run_state.RUN_STATE_VERSION, "timesteps": 64}
    (folder / run_state.RUN_STATE_FILE).write_bytes(b"written after the read")
    assert provenance()["agent_files"] == {
        str(folder.resolve()): {"run_state.pkl": hashlib.sha256(data).hexdigest()}
    }
    assert run_state.load(tmp_path) is None  # a folder without one: nothing recorded
    assert list(provenance()["agent_files"]) == [str(folder.resolve())]
