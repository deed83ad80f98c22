"""Scenario generators beyond the published Bursted-ART windows.

Each generator makes the rows of one window in the Bursted-ART layout, from its
own random stream (``seed``, scenario, window), so a window can be made alone:

- :func:`rising_load_rows`: one hot long prefix whose request rate ramps up over
  ten minutes, over ART-like background traffic.
- :func:`multi_tenant_rows`: Bursted-ART bursts sent by several tenants with
  identical prompts; a ``tenant`` field keeps their KV apart.
- :func:`agent_fanout_rows`: agent trees, where a parent context fans out to
  sub-agents that extend it turn by turn, then the parent gathers their results.
- :func:`mixed_rows`: background traffic and Bursted-ART bursts in one window.

Decoy-heavy windows need no code of their own: they are Bursted-ART windows
with many two-request decoys (see the registry). Rows from bursts and agents say
``source: synthetic``; background rows say ``source: art`` (ART-like).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from envs.sim.checks import check_fields_non_negative, check_int, is_number
from envs.sim.errors import ConfigError, echoed
from envs.workloads.art_like import (
    ArtLikeConfig,
    Draft,
    art_like_drafts,
    drafts_to_rows,
)
from envs.workloads.bursted import (
    BurstedSyntheticConfig,
    shared_prefix_blocks,
    synthetic_window_rows,
)
from envs.workloads.hint_labels import AGENT, BURST, DECOY, SYNTHETIC
from envs.workloads.segments import Segment


def stream_id(name: str) -> int:
    """A stable integer for a name, to separate random streams."""
    return zlib.crc32(name.encode())


def background_config(rate_per_s: float, block_tokens: int = 256) -> ArtLikeConfig:
    """ART-like defaults scaled to ``rate_per_s`` (surges, spikes and fan-outs too)."""
    base = ArtLikeConfig(block_tokens=block_tokens)
    scale = rate_per_s / base.mean_rate_per_s
    return replace(
        base,
        mean_rate_per_s=rate_per_s,
        surges_per_day=base.surges_per_day * scale,
        spikes_per_day=base.spikes_per_day * scale,
        fanouts_per_hour=base.fanouts_per_hour * scale,
    )


def background_rows(
    rate_per_s: float,
    duration_s: float,
    window: int,
    seed: int,
    trace_id: str,
    stream: str,
    block_tokens: int = 256,
) -> list[dict[str, Any]]:
    """ART-like rows over ``[0, duration_s)`` at ``rate_per_s`` (none if the rate is 0),
    hashed at ``block_tokens`` a block (the scenario's own block size)."""
    if rate_per_s <= 0 or duration_s <= 0:
        return []
    config = background_config(rate_per_s, block_tokens)
    _, drafts = art_like_drafts(
        config, window, seed, duration_s=duration_s, stream=stream_id(stream)
    )
    return list(drafts_to_rows(drafts, config.block_tokens, f"{trace_id}/background", seed))


def merge_rows(trace_id: str, split: str, *parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Merge row lists by arrival; renumber request ids and set trace id and split."""
    rows = sorted((row for part in parts for row in part), key=lambda row: row["arrival_s"])
    for i, row in enumerate(rows):
        row["request_id"] = f"{trace_id}-{i:05d}"
        row["trace_id"] = trace_id
        row["split"] = split
        if row["group_id"].startswith(f"{trace_id}/background-"):
            row["group_id"] = trace_id + "-bg-" + row["group_id"].split("/background-", 1)[1]
    return rows


def _hex_ids(rng: np.random.Generator, n: int) -> list[str]:
    raw = rng.bytes(12 * n)
    return [raw[12 * i : 12 * i + 12].hex() for i in range(n)]


# --- rising load ------------------------------------------------------------------------


@dataclass(frozen=True)
class RisingLoadConfig:
    """One hot prefix whose request rate ramps up linearly, over background traffic."""

    lead_s: float = 20.0
    """Background only before the ramp starts."""
    ramp_s: float = 600.0
    """The hot prefix's rate rises from start to peak over this long."""
    hold_s: float = 60.0
    """Then stays at the peak this long (the window ends after it)."""
    start_rate_per_s: float = 0.1
    """Hot requests per second when the ramp starts."""
    peak_rate_per_s: float = 8.0
    """Hot requests per second at the end of the ramp."""
    prefix_tokens: int = 65_536
    """The hot prefix (256 blocks, as a Bursted-ART burst)."""
    suffix_tokens: int = 256
    """Each hot request's own suffix."""
    output_tokens: int = 1
    """Tokens generated per hot request."""
    background_rate_per_s: float = 3.37
    """ART-like background traffic (0: none)."""
    block_tokens: int = 256
    """Tokens per hashed block."""

    def __post_init__(self) -> None:
        check_fields_non_negative("RisingLoadConfig", self)
        if self.peak_rate_per_s < self.start_rate_per_s or self.peak_rate_per_s <= 0:
            raise ConfigError.about(
                "RisingLoadConfig.peak_rate_per_s",
                f"must be > 0 and >= start_rate_per_s, got {echoed(self.peak_rate_per_s)}",
            )
        for name in ("prefix_tokens", "suffix_tokens", "output_tokens", "block_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError.about(
                    f"RisingLoadConfig.{name}", f"must be >= 1, got {echoed(getattr(self, name))}"
                )
        if self.ramp_s + self.hold_s == 0 and self.background_rate_per_s * self.lead_s == 0:
            raise ConfigError.about(
                "RisingLoadConfig.ramp_s",
                "+ {hold_s} must be > 0 (when the hot prefix arrives), or "
                "{background_rate_per_s} and {lead_s} > 0, or every window is empty; got "
                f"ramp_s={self.ramp_s}, hold_s={self.hold_s}, background_rate_per_s="
                f"{self.background_rate_per_s}, lead_s={self.lead_s}",
                "hold_s",
                "background_rate_per_s",
                "lead_s",
            )

    def rate_at(self, t_s: float) -> float:
        """Hot requests per second at ``t_s`` seconds into the window."""
        if t_s < self.lead_s or t_s >= self.lead_s + self.ramp_s + self.hold_s:
            return 0.0
        progress = 1.0 if self.ramp_s == 0 else min(1.0, (t_s - self.lead_s) / self.ramp_s)
        return self.start_rate_per_s + (self.peak_rate_per_s - self.start_rate_per_s) * progress

    @property
    def duration_s(self) -> float:
        return self.lead_s + self.ramp_s + self.hold_s


def rising_load_rows(
    config: RisingLoadConfig, window: int, seed: int, split: str = "", trace_id: str = ""
) -> list[dict[str, Any]]:
    """Rows of one rising-load window: hot arrivals are a Poisson process with the ramp's rate."""
    trace_id = trace_id or f"rising-{window:04d}"
    rng = np.random.default_rng([seed, stream_id("rising_load"), window])
    begin, end = config.lead_s, config.duration_s
    candidates = np.sort(
        rng.uniform(begin, end, rng.poisson(config.peak_rate_per_s * (end - begin)))
    )
    rates = np.array([config.rate_at(t) for t in candidates])
    times = candidates[rng.random(candidates.size) * config.peak_rate_per_s < rates]
    bt = config.block_tokens
    prefix_blocks = shared_prefix_blocks(config.prefix_tokens, bt)
    suffix_blocks = -(-(config.prefix_tokens + config.suffix_tokens) // bt) - prefix_blocks
    prefix = _hex_ids(rng, prefix_blocks)
    hot = [
        {
            "request_id": "",
            "trace_id": trace_id,
            "source": SYNTHETIC,
            "arrival_s": float(t),
            "input_length": config.prefix_tokens + config.suffix_tokens,
            "output_length": config.output_tokens,
            "hash_ids": prefix + _hex_ids(rng, suffix_blocks),
            "group_id": f"{trace_id}-hot",
            "split": split,
            "metadata": {"job_kind": BURST},
        }
        for t in times
    ]
    background = background_rows(
        config.background_rate_per_s, end, window, seed, trace_id, "rising_load", bt
    )
    return merge_rows(trace_id, split, hot, background)


# --- multi-tenant -----------------------------------------------------------------------


@dataclass(frozen=True)
class MultiTenantConfig(BurstedSyntheticConfig):
    """Bursted-ART windows whose bursts are sent by ``tenants`` tenants with identical prompts.

    A burst's i-th request comes from tenant ``i % tenants`` and carries the same
    prompt (prefix and suffix) as the requests next to it from the other tenants.
    Decoy jobs are spread over the tenants round-robin.
    """

    tenants: int = 4
    """Tenants sharing the traffic (each identical prompt is sent once per tenant)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("MultiTenantConfig.tenants", self.tenants, 1)


def multi_tenant_rows(
    config: MultiTenantConfig, window: int, seed: int, split: str = "", trace_id: str = ""
) -> list[dict[str, Any]]:
    """Rows of one multi-tenant window, each with a top-level ``tenant`` field."""
    trace_id = trace_id or f"tenant-{window:04d}"
    rows = synthetic_window_rows(config, window, seed=seed, split=split, trace_id=trace_id)
    prefix_blocks = shared_prefix_blocks(config.prefix_tokens, config.block_tokens)
    position: dict[str, int] = {}
    suffixes: dict[tuple[str, int], list[Any]] = {}
    for row in rows:
        group = row["group_id"]
        i = position.get(group, 0)
        position[group] = i + 1
        if row["metadata"]["job_kind"] == DECOY:
            tenant = int(group.rsplit("-", 1)[1]) % config.tenants
        else:
            tenant = i % config.tenants
            suffix = suffixes.setdefault(
                (group, i // config.tenants), row["hash_ids"][prefix_blocks:]
            )
            row["hash_ids"] = row["hash_ids"][:prefix_blocks] + suffix
        row["tenant"] = f"tenant-{tenant}"
        row["group_id"] = f"{group}-t{tenant}"
    return rows


# --- agent fan-out ----------------------------------------------------------------------


@dataclass(frozen=True)
class AgentFanoutConfig:
    """Agent trees: a parent context fans out to sub-agents, then gathers their results."""

    trees: int = 12
    """Agent trees per window."""
    lead_s: float = 10.0
    """Trees start uniformly between lead_s ..."""
    span_s: float = 300.0
    """... and lead_s + span_s (the window runs until the last request)."""
    context_median_tokens: float = 24_000.0
    """Median shared parent context (lognormal, sigma 0.7)."""
    context_max_tokens: int = 131_072
    """Longest parent context."""
    fanout: tuple[int, int] = (4, 32)
    """Sub-agents per parent, uniformly between these (inclusive)."""
    depth: int = 1
    """Levels of fan-out (2: every sub-agent fans out again with ``child_fanout``)."""
    child_fanout: tuple[int, int] = (2, 4)
    """Sub-agents per sub-agent below the first level."""
    agent_turns: tuple[int, int] = (1, 4)
    """Turns of each agent (uniform, inclusive); each adds its output and a tool result."""
    instruction_median_tokens: float = 150.0
    """Median instruction a parent gives each sub-agent."""
    tool_median_tokens: float = 800.0
    """Median tool result between an agent's turns (lognormal, sigma 1)."""
    step_median_s: float = 4.0
    """Median gap between an agent's turns (lognormal, sigma 0.6)."""
    launch_delay_s: tuple[float, float] = (0.5, 3.0)
    """From a parent's request to its sub-agents' first requests."""
    launch_jitter_s: float = 0.5
    """Sub-agents of one parent start within this many seconds of each other."""
    output_median_tokens: float = 100.0
    """Median output of an agent turn (lognormal, sigma 0.8)."""
    max_output_tokens: int = 512
    """Longest output."""
    background_rate_per_s: float = 3.37
    """ART-like background traffic (0: none)."""
    block_tokens: int = 256
    """Tokens per hashed block."""

    def __post_init__(self) -> None:
        check_fields_non_negative("AgentFanoutConfig", self)
        for name in ("depth", "max_output_tokens", "block_tokens"):
            if getattr(self, name) < 1:
                raise ConfigError.about(
                    f"AgentFanoutConfig.{name}", f"must be >= 1, got {echoed(getattr(self, name))}"
                )
        if self.step_median_s <= 0:  # (a lognormal's median: its log is drawn around)
            raise ConfigError.about(
                "AgentFanoutConfig.step_median_s", f"must be > 0, got {echoed(self.step_median_s)}"
            )
        for name in ("fanout", "child_fanout", "agent_turns"):
            if getattr(self, name)[0] < 1:
                raise ConfigError.about(
                    f"AgentFanoutConfig.{name}",
                    f"must be a (low, high) pair >= 1, got {echoed(getattr(self, name))}",
                )
        if self.trees == 0 and self.background_rate_per_s * (self.lead_s + self.span_s) == 0:
            raise ConfigError.about(
                "AgentFanoutConfig.trees",
                "must be >= 1, or {background_rate_per_s} and {lead_s} + {span_s} > 0, or "
                "every window is empty; got trees=0, "
                f"background_rate_per_s={self.background_rate_per_s}, lead_s={self.lead_s}, "
                f"span_s={self.span_s}",
                "background_rate_per_s",
                "lead_s",
                "span_s",
            )


class _AgentTrees:
    def __init__(self, config: AgentFanoutConfig, rng: np.random.Generator) -> None:
        self.c = config
        self.rng = rng
        self.next_id = 0
        self.drafts: list[Draft] = []

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _lognormal(self, median: float, sigma: float) -> int:
        return max(1, round(float(self.rng.lognormal(math.log(max(median, 1.0)), sigma))))

    def _output(self) -> int:
        return min(self.c.max_output_tokens, self._lognormal(self.c.output_median_tokens, 0.8))

    def agent(self, prefix: list[Segment], t: float, level: int, group: str) -> float:
        """Run one agent from ``t`` on top of ``prefix``; returns when its last request arrives."""
        c, rng = self.c, self.rng
        segments = [*prefix, (self._id(), self._lognormal(c.instruction_median_tokens, 0.6))]
        total = sum(tokens for _, tokens in segments)
        turns = int(rng.integers(c.agent_turns[0], c.agent_turns[1] + 1))
        for k in range(turns):
            output = self._output()
            self.drafts.append(Draft(t, segments, len(segments), total, output, group))
            segments.append((self._id(), output))
            total += output
            if k < turns - 1:
                tool = self._lognormal(c.tool_median_tokens, 1.0)
                segments.append((self._id(), tool))
                total += tool
                t += float(rng.lognormal(math.log(c.step_median_s), 0.6))
        if level >= c.depth:
            return t
        low, high = c.fanout if level == 0 else c.child_fanout
        children = int(rng.integers(low, high + 1))
        launch = t + float(rng.uniform(*c.launch_delay_s))
        ends = [
            self.agent(
                list(segments), launch + float(rng.uniform(0, c.launch_jitter_s)), level + 1, group
            )
            for _ in range(children)
        ]
        results = sum(self._output() for _ in range(children))
        segments.append((self._id(), results))
        t = max(ends) + float(rng.lognormal(math.log(c.step_median_s), 0.6))
        self.drafts.append(
            Draft(t, segments, len(segments), total + results, self._output(), group)
        )
        return t


def agent_fanout_rows(
    config: AgentFanoutConfig, window: int, seed: int, split: str = "", trace_id: str = ""
) -> list[dict[str, Any]]:
    """Rows of one agent fan-out window (job kind ``agent``), with background traffic."""
    trace_id = trace_id or f"agent-{window:04d}"
    rng = np.random.default_rng([seed, stream_id("agent_fanout"), window])
    trees = _AgentTrees(config, rng)
    for i in range(config.trees):
        start = float(rng.uniform(config.lead_s, config.lead_s + config.span_s))
        system = (trees._id(), trees._lognormal(1500.0, 0.5))
        context_tokens = min(
            config.context_max_tokens, trees._lognormal(config.context_median_tokens, 0.7)
        )
        context = (trees._id(), context_tokens)
        trees.agent([system, context], start, 0, f"tree-{i}")
    drafts = sorted(trees.drafts, key=lambda d: d.arrival_s)
    agent_rows = list(
        drafts_to_rows(drafts, config.block_tokens, trace_id, seed, split, source=SYNTHETIC)
    )
    for row in agent_rows:
        row["metadata"] = {"job_kind": AGENT}
    end = max((row["arrival_s"] for row in agent_rows), default=config.lead_s + config.span_s)
    background = background_rows(
        config.background_rate_per_s,
        end,
        window,
        seed,
        trace_id,
        "agent_fanout",
        config.block_tokens,
    )
    return merge_rows(trace_id, split, agent_rows, background)


# --- mixed ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MixedConfig(BurstedSyntheticConfig):
    """A Bursted-ART synthetic window with ART-like background traffic in the same window."""

    background_rate_per_s: float = 3.37
    """ART-like background traffic over the whole window (0: none)."""

    def _has_other_traffic(self) -> bool:
        # background over [0, window_end_s): n_bursts >= 1 with burst_requests=0 and no
        # decoys is a background-only window; with no bursts either the window has no length
        rate = self.background_rate_per_s
        return is_number(rate) and math.isfinite(rate) and rate * self.window_end_s > 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (self.background_rate_per_s >= 0 and math.isfinite(self.background_rate_per_s)):
            raise ConfigError.about(
                "MixedConfig.background_rate_per_s",
                f"must be finite and >= 0, got {echoed(self.background_rate_per_s)}",
            )


def mixed_rows(
    config: MixedConfig, window: int, seed: int, split: str = "", trace_id: str = ""
) -> list[dict[str, Any]]:
    """Rows of one mixed window: the synthetic window's bursts and decoys plus background."""
    trace_id = trace_id or f"mixed-{window:04d}"
    bursts = synthetic_window_rows(config, window, seed=seed, split=split, trace_id=trace_id)
    background = background_rows(
        config.background_rate_per_s,
        config.window_end_s,
        window,
        seed,
        trace_id,
        "mixed",
        config.block_tokens,
    )
    return merge_rows(trace_id, split, bursts, background)
