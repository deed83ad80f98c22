"""audit's largest same-prefix fan-out at 1 s, 10 s, 60 s and over the whole trace,
counted by hand on a Mooncake file the test writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import audit

SHARED = list(range(1, 19))  # 18 shared 512-token blocks: long enough for any default minimum
P_S = [0.0, 0.3, 0.9, 5.0, 8.0, 12.0, 50.0, 200.0]  # prefix P
Q_S = [100.0, 100.2, 100.4, 100.6]  # prefix Q: four within a second


def _trace(path: Path) -> Path:
    rows = [(t, [*SHARED, 1000 + i]) for i, t in enumerate(P_S)]
    rows += [(t, [500 + b for b in SHARED] + [2000 + i]) for i, t in enumerate(Q_S)]
    rows.append((150.0, [9000 + b for b in range(19)]))  # a prompt of its own
    rows.sort()
    path.write_text(
        "".join(
            json.dumps({"timestamp": round(t * 1000), "input_length": 512 * len(h), "hash_ids": h})
            + "\n"
            for t, h in rows
        )
    )
    return path


def test_fanout_at_each_window_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = audit.main([f"path={_trace(tmp_path / 'mc.jsonl')}"])
    fan = result["overall"]["fanout_by_window"]
    got = {label: (entry["requests"], entry["start_s"]) for label, entry in fan.items()}
    assert got == {
        "1s": (4, 100.0),  # Q's four; P has three in [0, 1)
        "10s": (5, 0.0),  # P at 0, 0.3, 0.9, 5, 8
        "60s": (7, 0.0),  # ... and 12, 50
        "whole": (8, 0.0),  # ... and 200: every P request
    }
    assert fan["whole"]["window_s"] is None
    table = capsys.readouterr().out
    for span, count in (("1 s", 4), ("10 s", 5), ("60 s", 7), ("the whole trace", 8)):
        line = next(
            row
            for row in table.splitlines()
            if row.startswith("largest fan-out") and row.split(" blocks) in ")[1].startswith(span)
        )
        assert f" {count} " in f"{line} "


@pytest.mark.parametrize(
    ("min_tokens", "expected"),
    [
        ("4096", 0),  # 3,600 tokens do not reach 4,096, though they fill 8 blocks' ids
        ("3601", 0),  # one token short
        ("3600", 10),  # reached: 8 blocks, all ten share block 8, within 0.09 s
        ("3584", 10),  # 7 whole blocks
    ],
)
def test_fanout_counts_only_prompts_reaching_min_tokens(
    tmp_path: Path, min_tokens: str, expected: int
) -> None:
    path = tmp_path / "short.jsonl"
    rows = [
        {"timestamp": i * 10, "input_length": 3600, "hash_ids": list(range(1, 9))}
        for i in range(10)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    overall = audit.main([f"path={path}", f"min_tokens={min_tokens}"])["overall"]
    assert overall["fanout"]["requests"] == expected
    assert [w["requests"] for w in overall["fanout_by_window"].values()] == [expected] * 4
    assert overall["fanout"]["example_request_id"] == (None if expected == 0 else "1")  # line 1
