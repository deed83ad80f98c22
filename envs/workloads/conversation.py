"""Conversation-like traffic: long multi-turn chat sessions, after the published
Mooncake conversation trace (about 12,000 requests an hour, prompts of about
12,000 tokens, outputs of about 340, 512-token chained blocks).

A window is ``duration_s`` seconds (an hour by default) of the sum of chat
sessions. Sessions start as a Poisson process (``requests_per_hour`` over the
mean number of turns), from ``warmup_s`` before the window opens so sessions are
already under way when it does. Every prompt begins with the same system-prompt
head (``head_tokens``); a session's first user message is long (pasted documents
and files: lognormal, median ``first_message_median_tokens``), later ones short.
Turn k+1's prompt is turn k's prompt, the model's answer and a new user message,
so a next turn's blocks extend the previous turn's prompt and answer blocks. A
session ends after a geometric number of turns, or when its next turn would not
fit ``max_context_tokens`` (prompt plus output). Turns are a lognormal think time
apart. Outputs are lognormal, capped at ``max_output_tokens``. Every request is a
``conversation`` job; its ``group_id`` is its session.

Blocks are hashed from content segments (:mod:`envs.workloads.segments`): a
block's id names all tokens up to its end, so ids are chained as Mooncake's are.
docs/workloads.md lists the generator's statistics beside the target figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.sim.checks import check_fields_non_negative, check_int, check_number
from envs.sim.errors import ConfigError, echoed
from envs.workloads.art_like import (
    Draft,
    drafts_to_rows,
    lognormal_tokens,
    truncated_geometric_mean,
)
from envs.workloads.hint_labels import CONVERSATION, SYNTHETIC
from envs.workloads.scenarios import stream_id
from envs.workloads.segments import Segment

TARGET_FIGURES = {
    "requests_per_hour": 12_000.0,
    "input_tokens_mean": 12_000.0,
    "output_tokens_mean": 340.0,
    "block_tokens": 512.0,
}
"""The published Mooncake conversation trace's figures that the generator approximates."""


@dataclass(frozen=True)
class ConversationConfig:
    """Parameters of the conversation-like generator (defaults: tuned to TARGET_FIGURES)."""

    requests_per_hour: float = 12_000.0
    """Long-run arrival rate of all turns of all sessions."""
    duration_s: float = 3600.0
    """Length of a window."""
    warmup_s: float = 1800.0
    """Sessions start this long before the window opens, so some are under way."""
    mean_turns: float = 3.0
    """Mean turns of a session (geometric)."""
    max_turns: int = 30
    """Most turns a session may have."""
    head_tokens: int = 1536
    """The system-prompt head every prompt begins with (shared by all sessions)."""
    first_message_median_tokens: float = 4700.0
    """Median first user message of a session (lognormal): documents, files, code."""
    first_message_sigma: float = 1.1
    """Log-space spread of first messages."""
    message_median_tokens: float = 350.0
    """Median later user message (lognormal)."""
    message_sigma: float = 1.0
    """Log-space spread of later messages."""
    output_median_tokens: float = 268.0
    """Median output (lognormal, then capped)."""
    output_sigma: float = 0.7
    """Log-space spread of outputs."""
    max_output_tokens: int = 2048
    """Longest output."""
    think_median_s: float = 60.0
    """Median gap between a session's turns (lognormal; includes reading the answer)."""
    think_sigma: float = 0.8
    """Log-space spread of the gap between turns."""
    max_context_tokens: int = 131_072
    """Longest prompt + output; a session ends when its next turn would exceed it."""
    block_tokens: int = 512
    """Tokens per hashed block (Mooncake's)."""

    def __post_init__(self) -> None:
        where = "ConversationConfig"
        for name in ("requests_per_hour", "duration_s"):  # each > 0, or every window is empty
            check_number(f"{where}.{name}", getattr(self, name), positive=True)
        check_fields_non_negative(where, self)
        for name in ("max_turns", "max_output_tokens", "block_tokens"):
            check_int(f"{where}.{name}", getattr(self, name), 1)
        check_int(f"{where}.head_tokens", self.head_tokens, 0)
        if self.mean_turns < 1:
            raise ConfigError.about(
                f"{where}.mean_turns", f"must be >= 1, got {echoed(self.mean_turns)}"
            )
        room = self.max_context_tokens - self.head_tokens - self.max_output_tokens
        if room < 1:
            raise ConfigError.about(
                f"{where}.max_context_tokens",
                "must exceed head_tokens + max_output_tokens, got "
                f"max_context_tokens={self.max_context_tokens!r} (head_tokens="
                f"{self.head_tokens!r}, max_output_tokens={self.max_output_tokens!r})",
            )

    @property
    def expected_turns(self) -> float:
        """Mean turns of the geometric distribution truncated at ``max_turns``."""
        return truncated_geometric_mean(self.mean_turns, self.max_turns)

    @property
    def sessions_per_s(self) -> float:
        """Session start rate that makes all turns average ``requests_per_hour``."""
        return self.requests_per_hour / 3600.0 / self.expected_turns


def _lognormal(rng: np.random.Generator, median: float, sigma: float, n: int) -> np.ndarray:
    return np.maximum(lognormal_tokens(rng, median, sigma, n), 1)


def conversation_drafts(config: ConversationConfig, window: int, seed: int) -> list[Draft]:
    """The window's requests before hashing, by arrival (times from the window's start).

    Draws from its own stream ``(seed, "conversation_like", window)``.
    """
    c = config
    rng = np.random.default_rng([seed, stream_id("conversation_like"), window])
    n = int(rng.poisson(c.sessions_per_s * (c.warmup_s + c.duration_s)))
    starts = np.sort(rng.uniform(-c.warmup_s, c.duration_s, n))
    turns = np.minimum(rng.geometric(1.0 / c.mean_turns, n), c.max_turns)
    first = _lognormal(rng, c.first_message_median_tokens, c.first_message_sigma, n)
    total_turns = int(turns.sum())
    messages = _lognormal(rng, c.message_median_tokens, c.message_sigma, total_turns)
    outputs = np.minimum(
        _lognormal(rng, c.output_median_tokens, c.output_sigma, total_turns), c.max_output_tokens
    )
    gaps = rng.lognormal(math.log(max(c.think_median_s, 1e-9)), c.think_sigma, total_turns)
    head: Segment = (1, c.head_tokens)
    next_id = 2
    drafts: list[Draft] = []
    cursor = 0
    for s in range(n):
        segments: list[Segment] = [head] if c.head_tokens else []
        total = c.head_tokens
        t = float(starts[s])
        for k in range(int(turns[s])):
            j = cursor + k
            user = int(first[s]) if k == 0 else int(messages[j])
            output = int(outputs[j])
            if total + user + output > c.max_context_tokens:
                if k > 0:
                    break
                user = c.max_context_tokens - total - output  # >= 1 by the config's check
            if t >= c.duration_s:
                break
            segments.append((next_id, user))
            next_id += 1
            total += user
            if t >= 0.0:
                drafts.append(Draft(t, segments, len(segments), total, output, f"session-{s}"))
            segments.append((next_id, output))
            next_id += 1
            total += output
            t += float(gaps[j])
        cursor += int(turns[s])
    drafts.sort(key=lambda d: d.arrival_s)
    return drafts


def conversation_rows(
    config: ConversationConfig, window: int, seed: int, split: str = "", trace_id: str = ""
) -> list[dict[str, Any]]:
    """Rows of one conversation-like window in the Bursted-ART layout, by arrival."""
    trace_id = trace_id or f"conversation-{window:04d}"
    return _rows(conversation_drafts(config, window, seed), config, seed, split, trace_id)


def _rows(
    drafts: list[Draft], config: ConversationConfig, seed: int, split: str, trace_id: str
) -> list[dict[str, Any]]:
    rows = list(
        drafts_to_rows(drafts, config.block_tokens, trace_id, seed, split, source=SYNTHETIC)
    )
    for row in rows:
        row["metadata"] = {"job_kind": CONVERSATION}
    return rows


def conversation_statistics(config: ConversationConfig, window: int, seed: int) -> dict[str, float]:
    """One window measured as the target figures are given, plus what reuse it offers.

    ``reused_block_share`` is the share of prompt blocks already in an earlier
    prompt of the window (what an unbounded cache could hit); ``turns_mean`` is the
    mean number of requests per session seen in the window.
    """
    drafts = conversation_drafts(config, window, seed)
    rows = _rows(drafts, config, seed, "", f"conversation-{window:04d}")
    inputs = np.array([d.input_tokens for d in drafts])
    outputs = np.array([d.output_tokens for d in drafts])
    seen: set[str] = set()
    reused = blocks = 0
    for row in rows:
        for block in row["hash_ids"]:
            reused += block in seen
            seen.add(block)
        blocks += len(row["hash_ids"])
    return {
        "requests": float(len(drafts)),
        "requests_per_hour": len(drafts) * 3600.0 / config.duration_s,
        "input_tokens_mean": float(inputs.mean()),
        "input_tokens_p50": float(np.percentile(inputs, 50)),
        "input_tokens_p99": float(np.percentile(inputs, 99)),
        "input_tokens_max": float(inputs.max()),
        "output_tokens_mean": float(outputs.mean()),
        "output_tokens_max": float(outputs.max()),
        "context_tokens_max": float((inputs + outputs).max()),
        "turns_mean": len(drafts) / len({d.group for d in drafts}),
        "reused_block_share": reused / blocks,
    }
