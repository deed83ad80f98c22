"""conversation_like: statistics against the target figures, multi-turn prefix reuse
with hand-worked block counts, the shared system-prompt head, bad settings."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from envs.workloads import Request, windows
from envs.workloads.conversation import (
    TARGET_FIGURES,
    ConversationConfig,
    conversation_rows,
    conversation_statistics,
)

# Every length fixed (sigma 0: each draw is its median) and three turns a session
# (max_turns=3 with a geometric mean of a million turns), so each block is countable:
# turn 1 = head 1024 + first message 2048 = 3072 tokens = 6 blocks of 512; each later
# turn adds the 512-token answer and a 512-token message: 4096 (8 blocks), 5120 (10).
FIXED = ConversationConfig(
    requests_per_hour=600.0,
    duration_s=1200.0,
    warmup_s=0.0,
    mean_turns=1e6,
    max_turns=3,
    head_tokens=1024,
    first_message_median_tokens=2048.0,
    first_message_sigma=0.0,
    message_median_tokens=512.0,
    message_sigma=0.0,
    output_median_tokens=512.0,
    output_sigma=0.0,
    think_median_s=60.0,
    think_sigma=0.0,
)


def _sessions(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_session[row["group_id"]].append(row)
    return by_session


def test_next_turn_extends_the_previous_prompt_and_answer_blocks() -> None:
    rows = conversation_rows(FIXED, window=0, seed=7)
    sessions = _sessions(rows)
    full = [turns for turns in sessions.values() if turns[0]["arrival_s"] < 1200.0 - 120.0]
    assert len(full) > 20  # about 600 / 3 / 3600 x 1200 = 67 sessions start in the window
    for turns in full:
        assert [r["input_length"] for r in turns] == [3072, 4096, 5120]
        assert [len(r["hash_ids"]) for r in turns] == [6, 8, 10]
        assert all(r["output_length"] == 512 for r in turns)
        assert [r["arrival_s"] - turns[0]["arrival_s"] for r in turns] == pytest.approx(
            [0.0, 60.0, 120.0]
        )
        first, second, third = (r["hash_ids"] for r in turns)
        assert second[:6] == first and third[:8] == second  # prompt blocks reused
        assert second[6] == third[6]  # turn 1's answer block, reused by every later turn
        assert len(set(first + second + third)) == 10  # nothing else repeats
    assert all(r["metadata"]["job_kind"] == "conversation" for r in rows)
    assert len(rows) == sum(len(turns) for turns in sessions.values())


def test_every_prompt_begins_with_the_shared_system_prompt_head() -> None:
    rows = conversation_rows(FIXED, window=1, seed=7)
    assert len({tuple(r["hash_ids"][:2]) for r in rows}) == 1  # 1024 tokens: 2 whole blocks
    first_turns = [turns[0] for turns in _sessions(rows).values()]
    assert len({r["hash_ids"][2] for r in first_turns}) == len(first_turns)
    # A head that ends inside a block shares only its whole blocks: 1000 tokens -> 1.
    ragged = conversation_rows(
        ConversationConfig(**{**FIXED.__dict__, "head_tokens": 1000}), window=1, seed=7
    )
    assert len({r["hash_ids"][0] for r in ragged}) == 1
    assert len({r["hash_ids"][1] for r in ragged if r["input_length"] == 3048}) > 1


def test_windows_are_512_token_chained_workloads() -> None:
    window = next(windows("conversation_like", "test", seed=3, limit=1, duration_s=300.0))
    assert window.block_tokens == 512 and window.meta["workload"] == "conversation_like"
    previous: dict[str, Request] = {}
    extended = 0
    for r in window.requests:
        assert len(r.blocks) == -(-r.input_tokens // 512)
        before = previous.get(r.group_id)
        if before is not None:
            # every whole block of the previous prompt again; its partial last block
            # now holds more tokens (the answer's), so it is a new block
            whole = before.input_tokens // 512
            assert r.blocks[:whole] == before.blocks[:whole]
            if whole < len(before.blocks):
                assert r.blocks[whole] != before.blocks[whole]
            extended += 1
        previous[r.group_id] = r
    assert extended > 50
    # chained: an id names its whole prefix, so equal ids imply equal ids before them
    owner: dict[int, tuple[int, ...]] = {}
    for r in window.requests:
        for i, block in enumerate(r.blocks):
            assert owner.setdefault(block, r.blocks[:i]) == r.blocks[:i]


def test_default_window_is_near_the_target_figures() -> None:
    stats = conversation_statistics(ConversationConfig(), window=0, seed=20260721)
    assert TARGET_FIGURES["block_tokens"] == ConversationConfig().block_tokens
    for name in ("requests_per_hour", "input_tokens_mean", "output_tokens_mean"):
        assert stats[name] == pytest.approx(TARGET_FIGURES[name], rel=0.05), name
    assert stats["context_tokens_max"] <= 131_072
    assert 2.0 < stats["turns_mean"] < 4.0 and stats["reused_block_share"] > 0.5


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"max_context_tokens": 2000}, "max_context_tokens must exceed head_tokens"),
        ({"mean_turns": 0.5}, "mean_turns must be >= 1"),
        ({"block_tokens": 0}, "block_tokens"),
        (
            {"duration_s": 0.0},
            r"ConversationConfig.duration_s must be a finite number > 0, got 0.0",
        ),
        ({"think_median_s": -1.0}, "think_median_s must be >= 0"),
    ],
)
def test_bad_settings_name_the_field(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ConversationConfig(**changes)
    with pytest.raises(ValueError, match=message):
        next(windows("conversation_like", **changes))
