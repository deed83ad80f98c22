"""audit: busiest windows and fan-out of any trace, as a table and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import audit, make_dataset
from experiments._cli import UsageError


def _mooncake(path: Path) -> Path:
    """Five requests: four share a 2-block prefix (0, 0.2, 0.5, 30 s), one is alone (0.3 s)."""
    rows = [
        (0, [1, 2, 3]), (200, [1, 2, 4]), (300, [9, 8]), (500, [1, 2, 5]), (30_000, [1, 2, 6]),
    ]  # fmt: skip
    lines = [
        json.dumps(
            {"timestamp": t, "input_length": 512 * len(h), "output_length": 4, "hash_ids": h}
        )
        for t, h in rows
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_audit_mooncake_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _mooncake(tmp_path / "mc.jsonl")
    out_dir = tmp_path / "out"
    result = audit.main([f"path={path}", "min_tokens=1024", "fanout_s=10", f"out_dir={out_dir}"])
    assert result["format"] == "mooncake"
    overall = result["overall"]
    assert overall["windows"] == 1 and overall["requests"] == 5 and overall["block_tokens"] == 512
    assert overall["busiest"]["1s"]["requests"] == 4
    assert overall["busiest"]["60s"]["requests"] == 5
    assert overall["fanout"]["requests"] == 3  # 0, 0.2, 0.5 s; the 30 s one is outside
    assert json.loads((out_dir / "audit.json").read_text()) == result
    table = capsys.readouterr().out
    assert "busiest 1s" in table and "largest fan-out, >= 1,024 tokens (2 blocks) in 10 s" in table
    assert "wrote" in table


def test_audit_arrivals_a_window_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 0, 3.012 and 4.012 s: the last two are exactly 1 s apart, so no [t, t + 1) holds both
    path = tmp_path / "edge.jsonl"
    rows = [{"timestamp": t, "input_length": 512, "hash_ids": [t]} for t in (0, 3012, 4012)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    busiest = audit.main([f"path={path}"])["overall"]["busiest"]
    assert [busiest[w]["requests"] for w in ("1s", "10s", "60s")] == [1, 3, 3]
    assert "at 3.01 s" not in capsys.readouterr().out


def test_audit_streams_bursted_windows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_dataset.main([
        "workload=bursted_synthetic", f"out_dir={tmp_path}", "train_windows=0", "test_windows=2",
        "params=n_bursts=2,burst_requests=50,n_decoys=3", "progress=false",
    ])  # fmt: skip
    capsys.readouterr()
    result = audit.main([f"path={tmp_path / 'test.jsonl'}", "per_window=true"])
    assert result["format"] == "bursted" and result["overall"]["windows"] == 2
    # 50 requests evenly over 60 s: one every 1.2 s, so 10 s hold ceil(10 / 1.2) = 9
    assert result["overall"]["fanout"]["requests"] == 9
    assert [w["requests"] for w in result["windows"]] == [103, 103]
    table = capsys.readouterr().out
    assert "test:synthetic-" in table and "fan-out" in table


def test_audit_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _mooncake(tmp_path / "mc.jsonl")
    audit.main([f"path={path}", "json=true", "format=mooncake"])
    printed = json.loads(capsys.readouterr().out)
    assert printed["overall"]["requests"] == 5 and printed["min_tokens"] == 4096
    assert printed["overall"]["fanout"]["requests"] == 0  # no prompt has 16 blocks


def test_audit_json_with_out_dir_prints_the_json_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _mooncake(tmp_path / "mc.jsonl")
    out_dir = tmp_path / "out"
    options = ["json=true", f"out_dir={out_dir}", "block_tokens=256", "strict_block_count=false"]
    audit.main([f"path={path}", *options])
    captured = capsys.readouterr()
    printed = json.loads(captured.out)
    assert printed == json.loads((out_dir / "audit.json").read_text())
    assert captured.err.strip() == f"wrote {out_dir / 'audit.json'}"
    # the settings of the read: the timestamps are ms (Mooncake's), the rest as given
    assert printed["read_settings"] == {
        "time_unit": "auto",
        "time_unit_read": "ms",
        "block_tokens": 256,
        "block_tokens_read": 256,
        "skip_bad_rows": False,
        "max_bad_fraction": 0.01,
        "strict_block_count": False,
    }


def test_audit_records_the_time_unit_it_read(tmp_path: Path) -> None:
    path = _mooncake(tmp_path / "mc.jsonl")
    read = audit.main([f"path={path}", "time_unit=s", "merge_blocks=2"])["read_settings"]
    assert (read["time_unit"], read["time_unit_read"]) == ("s", "s")
    assert (read["block_tokens"], read["block_tokens_read"]) == (None, 512)  # read, then merged


def test_audit_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="path=FILE"):
        audit.main([])
    with pytest.raises(UsageError, match="no such file"):
        audit.main([f"path={tmp_path / 'missing.jsonl'}"])
    path = _mooncake(tmp_path / "mc.jsonl")
    with pytest.raises(UsageError, match="format="):
        audit.main([f"path={path}", "format=csv"])
    with pytest.raises(UsageError, match="min_tokens"):
        audit.main([f"path={path}", "min_tokens=0"])
    for bad in ("inf", "-inf", "nan", "0"):  # the whole trace is a row of its own
        with pytest.raises(UsageError, match=f"fanout_s must be a finite number > 0, got {bad}"):
            audit.main([f"path={path}", f"fanout_s={bad}"])


def test_audit_reads_window_s_as_fanout_s_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``window_s=60`` meant an extra fan-out interval, not the trace's
    ``workload.window_s``: a user who meant a window's length got no word (and a
    header saying 1 window). The option is ``fanout_s``; the old spelling is read as
    it, with one note line on stderr (stdout stays the JSON with ``json=true``)."""
    path = _mooncake(tmp_path / "mc.jsonl")
    new = audit.main([f"path={path}", "min_tokens=1024", "fanout_s=0.4", "json=true"])
    assert capsys.readouterr().err == ""
    old = audit.main([f"path={path}", "min_tokens=1024", "window_s=0.4", "json=true"])
    captured = capsys.readouterr()
    assert json.loads(captured.out) == old == new
    assert old["fanout_s"] == 0.4 and old["overall"]["fanout"]["requests"] == 2  # 0 and 0.2 s
    assert captured.err == (
        "note: experiments.audit: window_s= is now fanout_s=, an extra interval for the "
        "fan-out rows, not a window's length (audit reads the file's own windows); read as "
        "fanout_s=0.4\n"
    )
    with pytest.raises(UsageError, match="window_s= is fanout_s='s old spelling; give fanout"):
        audit.main([f"path={path}", "fanout_s=1", "window_s=2"])


def test_audit_s_old_spelling_given_twice_is_said_as_typed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``window_s=1 window_s=2`` was read as fanout_s= twice: a note read as
    ``fanout_s=1`` (the first), then ``fanout_s= is given twice``, an option the user
    never typed. It is refused as typed, as any option given twice is, with no note."""
    path = _mooncake(tmp_path / "mc.jsonl")
    with pytest.raises(UsageError) as refused:
        audit.main([f"path={path}", "window_s=1", "window_s=2"])
    assert str(refused.value) == (
        "experiments.audit: window_s= is given twice (from the command line)"
    )
    assert capsys.readouterr().err == ""


def test_audit_can_skip_bad_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _mooncake(tmp_path / "mc.jsonl")
    path.write_text(path.read_text() + "not json\n")
    with pytest.raises(ValueError, match="line 6"):
        audit.main([f"path={path}"])
    with pytest.raises(ValueError, match=r"1 of 6 rows are malformed \(16.7%\), more than max_bad"):
        audit.main([f"path={path}", "skip_bad_rows=true"])  # the default allows 1%
    with pytest.warns(UserWarning, match="skipped 1"):
        result = audit.main([f"path={path}", "skip_bad_rows=true", "max_bad_fraction=0.2"])
    assert result["read"]["rows_skipped"] == 1
    table = capsys.readouterr().out
    assert "(format mooncake, 1 window, 5 requests, 512-token blocks, 1 bad row skipped)" in table
    path.write_text(path.read_text() + "not json either\n")  # 2 of 7 rows
    with pytest.warns(UserWarning, match=r"skipped 2 malformed rows \("):
        audit.main([f"path={path}", "skip_bad_rows=true", "max_bad_fraction=0.3"])
    assert "5 requests, 512-token blocks, 2 bad rows skipped)" in capsys.readouterr().out


def test_audit_header_counts_one_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"timestamp": 0, "input_length": 512, "hash_ids": [1]}) + "\n")
    audit.main([f"path={path}"])
    assert "(format mooncake, 1 window, 1 request, 512-token blocks)" in capsys.readouterr().out


def test_audit_counts_private_prefix_keys_and_merges_blocks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Six requests share blocks 1-2 and each ends in two blocks of its own (its
    prompt less its last block ends in one of them): all six are counted, 100 %,
    with the hint. With merge_blocks=2 each suffix is one 1,024-token block and the
    prompt less it is the shared prefix: none."""
    rows = [
        {"timestamp": i * 100, "input_length": 2048, "output_length": 4,
         "hash_ids": [1, 2, 10 + 2 * i, 11 + 2 * i]}
        for i in range(6)
    ]  # fmt: skip
    path = tmp_path / "suffix.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = audit.main([f"path={path}"])
    assert result["overall"]["private_key_requests"] == 6 and result["merge_blocks"] == 1
    table = capsys.readouterr().out
    assert "6 (100%)  merge_blocks=K reads coarser blocks" in table
    merged = audit.main([f"path={path}", "merge_blocks=2"])
    assert merged["overall"]["private_key_requests"] == 0
    assert merged["overall"]["block_tokens"] == 1024
    assert "1024-token blocks" in capsys.readouterr().out
    with pytest.raises(UsageError, match="merge_blocks must be an integer >= 1, got 0"):
        audit.main([f"path={path}", "merge_blocks=0"])
