"""ART-like background traffic: an approximation of ART-Chat, which cannot be downloaded here.

The generator is a small generative model of a chat service, tuned so that a
simulated day comes close to ART-Chat's published figures (docs/workloads.md) (about
3.37 requests/s; busiest 1 s / 10 s / 60 s holding 98 / 343 / 1,656 arrivals;
a largest same-prefix fan-out of 25 requests at >= 16 blocks within 10 s). It is
an approximation, not a replay: docs/workloads.md lists the measured figures.

Traffic is the sum of four processes:

- **Chat sessions** start as a Poisson process whose rate follows a daily sine
  (``diurnal_amplitude``). A session picks a system prompt from a shared pool
  (Zipf popularity, lognormal lengths), then runs a geometric number of turns;
  each turn's prompt is the previous prompt plus the model's reply plus a new
  user message, so prefixes grow turn by turn. User messages are lognormal, and a
  fraction are pasted documents with a Pareto tail; a prompt never exceeds
  ``max_input_tokens`` (a session ends when its next turn would).
- **Surges**: rare minutes of batch traffic at 14-23.5 requests/s, opening with
  a dump of up to 80 requests within a second; each request has its own content
  behind the surge's short shared template (under 16 blocks).
- **Spikes**: a client submitting dozens of distinct requests within one second.
- **Fan-out jobs**: several questions about one long shared document (>= 16
  blocks, behind the job's own short template) within a few seconds: the
  same-prefix bursts present in real traffic.

Outputs are lognormal, capped at ``max_output_tokens`` (128). Every request is
a ``background`` job. A window (:func:`art_like_window_rows`) starts at a random
time of day, after a warm-up so sessions are already under way, and holds the
next ``rows_per_window`` arrivals (or ``duration_s`` seconds of them).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from envs.sim.checks import check_fields_non_negative, check_int
from envs.sim.errors import ConfigError, echoed
from envs.workloads.hint_labels import ART, BACKGROUND
from envs.workloads.segments import Segment, SegmentHasher, prefix_key

DAY_S = 86_400.0


@dataclass(frozen=True)
class ArtLikeConfig:
    """Parameters of the ART-like generator (defaults: tuned to ART-Chat's published figures)."""

    mean_rate_per_s: float = 3.37
    """Long-run arrival rate of all traffic, requests per second."""
    diurnal_amplitude: float = 0.35
    """Chat sessions start at mean x (1 + amplitude x sin(2 pi t / day))."""
    system_prompts: int = 400
    """Size of the shared system-prompt pool."""
    system_prompt_zipf: float = 1.1
    """Zipf exponent of system-prompt popularity."""
    system_prompt_median_tokens: float = 1200.0
    """Median system prompt length (lognormal)."""
    system_prompt_sigma: float = 0.8
    """Log-space spread of system prompt lengths."""
    system_prompt_max_tokens: int = 16_000
    """Longest system prompt."""
    mean_turns: float = 2.5
    """Mean turns per session (geometric)."""
    max_turns: int = 40
    """Most turns a session may have."""
    think_median_s: float = 20.0
    """Median gap between a session's turns (lognormal; includes the model's reply)."""
    think_sigma: float = 1.0
    """Log-space spread of the gap between turns."""
    user_median_tokens: float = 250.0
    """Median user message (lognormal)."""
    user_sigma: float = 1.3
    """Log-space spread of user messages."""
    document_probability: float = 0.06
    """Chance that a user message is a pasted document instead."""
    document_min_tokens: float = 2000.0
    """Smallest document; sizes are Pareto above it."""
    document_pareto_alpha: float = 1.2
    """Pareto tail index of document sizes (smaller: heavier tail)."""
    max_input_tokens: int = 262_144
    """Longest prompt (ART-Chat reaches about 260k tokens)."""
    output_median_tokens: float = 60.0
    """Median output (lognormal, then capped)."""
    output_sigma: float = 0.8
    """Log-space spread of outputs."""
    max_output_tokens: int = 128
    """Longest output (ART-Chat's cap)."""
    surges_per_day: float = 8.0
    """Batch surges per day."""
    surge_duration_s: tuple[float, float] = (45.0, 150.0)
    """A surge lasts uniformly between these."""
    surge_rate_per_s: tuple[float, float] = (14.0, 23.5)
    """A surge's own arrival rate, uniformly between these."""
    surge_opening_requests: tuple[int, int] = (0, 80)
    """A surge opens with this many requests (uniform, inclusive) within ``spike_span_s``."""
    template_median_tokens: float = 600.0
    """Median length of a surge's, spike's or fan-out job's own template (under 16 blocks)."""
    spikes_per_day: float = 20.0
    """Spikes (many distinct requests within a second) per day."""
    spike_requests: tuple[int, int] = (25, 85)
    """Requests in a spike, uniformly between these (inclusive)."""
    spike_span_s: float = 0.6
    """A spike's requests arrive within this many seconds."""
    fanouts_per_hour: float = 6.0
    """Fan-out jobs (questions about one shared document) per hour."""
    fanout_max_requests: int = 25
    """Most requests in a fan-out job; sizes 2.. this, Zipf-distributed."""
    fanout_zipf: float = 1.5
    """Zipf exponent of fan-out sizes."""
    fanout_span_s: tuple[float, float] = (0.5, 8.0)
    """A fan-out job's requests arrive within a span drawn uniformly between these."""
    fanout_document_median_tokens: float = 16_000.0
    """Median shared document of a fan-out job (at least 16 blocks)."""
    block_tokens: int = 256
    """Tokens per hashed block."""
    rows_per_window: int = 1000
    """Arrivals in a window (the published ART windows hold 1,000 rows)."""
    warmup_s: float = 900.0
    """Simulated time before a window opens, so sessions are already under way."""

    def __post_init__(self) -> None:
        where = "ArtLikeConfig"
        check_fields_non_negative(where, self)
        positive = (
            "mean_rate_per_s",
            "system_prompts",
            "mean_turns",
            "max_turns",
            "max_input_tokens",
            "max_output_tokens",
            "block_tokens",
            "fanout_max_requests",
            "think_median_s",  # (a lognormal's median: its log is drawn around)
            "document_pareto_alpha",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError.about(
                    f"{where}.{name}", f"must be > 0, got {echoed(getattr(self, name))}"
                )
        check_int(f"{where}.rows_per_window", self.rows_per_window, 1)  # 0: empty windows
        if self.mean_turns < 1:
            raise ConfigError.about(
                f"{where}.mean_turns", f"must be >= 1, got {echoed(self.mean_turns)}"
            )
        if not self.diurnal_amplitude < 1:
            raise ConfigError.about(
                f"{where}.diurnal_amplitude", f"must be < 1, got {echoed(self.diurnal_amplitude)}"
            )
        if self.fanout_max_requests < 2:
            raise ConfigError.about(
                f"{where}.fanout_max_requests",
                f"must be >= 2, got {echoed(self.fanout_max_requests)}",
            )
        if self.session_rate_per_s <= 0:
            raise ConfigError.about(
                f"{where}.mean_rate_per_s",
                "must exceed the rate surges, spikes and fan-outs alone send, got "
                f"{self.mean_rate_per_s!r}; lower them or raise the rate",
            )

    @property
    def expected_turns(self) -> float:
        """Mean turns of the geometric distribution truncated at ``max_turns``."""
        return truncated_geometric_mean(self.mean_turns, self.max_turns)

    @property
    def fanout_sizes(self) -> tuple[np.ndarray, np.ndarray]:
        """Fan-out job sizes 2..max and their probabilities."""
        sizes = np.arange(2, self.fanout_max_requests + 1)
        weights = sizes.astype(float) ** -self.fanout_zipf
        return sizes, weights / weights.sum()

    @property
    def session_rate_per_s(self) -> float:
        """Session start rate that makes all traffic average ``mean_rate_per_s``."""
        surge = self.surges_per_day * (
            _mid(self.surge_duration_s) * _mid(self.surge_rate_per_s)
            + _mid(self.surge_opening_requests)
        )
        spike = self.spikes_per_day * _mid(self.spike_requests)
        sizes, probs = self.fanout_sizes
        fanout = self.fanouts_per_hour * 24.0 * float(sizes @ probs)
        other_per_s = (surge + spike + fanout) / DAY_S
        return (self.mean_rate_per_s - other_per_s) / self.expected_turns


def truncated_geometric_mean(mean: float, most: int) -> float:
    """Mean of min(G, ``most``) for G geometric on 1, 2, ... with mean ``mean``."""
    p = 1.0 / mean
    return (1.0 - (1.0 - p) ** most) / p


def lognormal_tokens(rng: np.random.Generator, median: float, sigma: float, n: int) -> np.ndarray:
    """``n`` lognormal token counts (median at least 1), rounded to integers."""
    return np.rint(rng.lognormal(math.log(max(median, 1.0)), sigma, n)).astype(np.int64)


def _mid(pair: tuple[float, float]) -> float:
    return (pair[0] + pair[1]) / 2.0


@dataclass(slots=True)
class Draft:
    """A generated request before hashing: its prompt is ``segments[:n_segments]``."""

    arrival_s: float
    segments: list[Segment]
    n_segments: int
    input_tokens: int
    output_tokens: int
    group: str


class _Simulation:
    """One run of the traffic model over [start_s, end_s) of a day."""

    def __init__(self, config: ArtLikeConfig, rng: np.random.Generator) -> None:
        self.c = config
        self.rng = rng
        self.next_id = 0
        lengths = self._lognormal(
            config.system_prompt_median_tokens, config.system_prompt_sigma, config.system_prompts
        )
        lengths = np.clip(lengths, 16, config.system_prompt_max_tokens)
        self.system_prompts: list[Segment] = [(self._new_id(), int(n)) for n in lengths]
        ranks = np.arange(1, config.system_prompts + 1, dtype=float) ** -config.system_prompt_zipf
        self.system_prompt_p = ranks / ranks.sum()

    def _new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _lognormal(self, median: float, sigma: float, n: int) -> np.ndarray:
        return lognormal_tokens(self.rng, median, sigma, n)

    def _outputs(self, n: int) -> np.ndarray:
        c = self.c
        return np.clip(
            self._lognormal(c.output_median_tokens, c.output_sigma, n), 1, c.max_output_tokens
        )

    def _user_messages(self, n: int) -> np.ndarray:
        c = self.c
        chat = self._lognormal(c.user_median_tokens, c.user_sigma, n)
        docs = np.rint(c.document_min_tokens * (1.0 + self.rng.pareto(c.document_pareto_alpha, n)))
        is_doc = self.rng.random(n) < c.document_probability
        tokens = np.where(is_doc, docs.astype(np.int64), chat)
        return np.clip(tokens, 1, c.max_input_tokens)

    def run(self, start_s: float, end_s: float) -> list[Draft]:
        drafts: list[Draft] = []
        self._sessions(start_s, end_s, drafts)
        self._surges(start_s, end_s, drafts)
        self._spikes(start_s, end_s, drafts)
        self._fanouts(start_s, end_s, drafts)
        drafts.sort(key=lambda d: d.arrival_s)
        return drafts

    def _sessions(self, start_s: float, end_s: float, drafts: list[Draft]) -> None:
        c, rng = self.c, self.rng
        peak = c.session_rate_per_s * (1.0 + c.diurnal_amplitude)
        n = int(rng.poisson(peak * (end_s - start_s)))
        starts = np.sort(rng.uniform(start_s, end_s, n))
        phase = np.sin(2.0 * math.pi * starts / DAY_S)
        keep = rng.random(n) * (1.0 + c.diurnal_amplitude) < 1.0 + c.diurnal_amplitude * phase
        starts = starts[keep]
        n = starts.size
        prompts = rng.choice(c.system_prompts, size=n, p=self.system_prompt_p)
        turns = np.minimum(rng.geometric(1.0 / c.mean_turns, n), c.max_turns)
        total_turns = int(turns.sum())
        users = self._user_messages(total_turns)
        outputs = self._outputs(total_turns)
        gaps = rng.lognormal(math.log(c.think_median_s), c.think_sigma, total_turns)
        # Plain lists (numpy scalars are slow to index one by one); ids counted
        # locally and handed back to self.next_id, in the order _new_id would give.
        system_prompts = self.system_prompts
        prompt_of, turns_of = prompts.tolist(), turns.tolist()
        users_of, outputs_of, gaps_of = users.tolist(), outputs.tolist(), gaps.tolist()
        starts_of = starts.tolist()
        max_input = c.max_input_tokens
        next_id = self.next_id
        append = drafts.append
        cursor = 0
        for s in range(n):
            segments: list[Segment] = [system_prompts[prompt_of[s]]]
            total = segments[0][1]
            t = starts_of[s]
            group = f"session-{s}"
            n_turns = turns_of[s]
            for j in range(cursor, cursor + n_turns):
                user = users_of[j]
                if total + user > max_input:
                    if j > cursor:
                        break
                    user = max_input - total
                next_id += 1
                segments.append((next_id, user))
                total += user
                if t >= end_s:
                    break
                output = outputs_of[j]
                append(Draft(t, segments, len(segments), total, output, group))
                next_id += 1
                segments.append((next_id, output))
                total += output
                t += gaps_of[j]
            cursor += n_turns
        self.next_id = next_id

    def _one_shot(
        self, times: np.ndarray, template: Segment, group: str, drafts: list[Draft]
    ) -> None:
        users = self._user_messages(times.size)
        outputs = self._outputs(times.size)
        for i, t in enumerate(times):
            user = min(int(users[i]), self.c.max_input_tokens - template[1])
            segments = [template, (self._new_id(), user)]
            drafts.append(Draft(float(t), segments, 2, template[1] + user, int(outputs[i]), group))

    def _template(self) -> Segment:
        limit = 16 * self.c.block_tokens - 1
        tokens = int(np.clip(self._lognormal(self.c.template_median_tokens, 0.6, 1)[0], 16, limit))
        return (self._new_id(), tokens)

    def _surges(self, start_s: float, end_s: float, drafts: list[Draft]) -> None:
        c, rng = self.c, self.rng
        for i in range(int(rng.poisson(c.surges_per_day * (end_s - start_s) / DAY_S))):
            begin = rng.uniform(start_s, end_s)
            duration = rng.uniform(*c.surge_duration_s)
            rate = rng.uniform(*c.surge_rate_per_s)
            times = rng.uniform(begin, begin + duration, int(rng.poisson(rate * duration)))
            opening = int(
                rng.integers(c.surge_opening_requests[0], c.surge_opening_requests[1] + 1)
            )
            times = np.concatenate([begin + rng.uniform(0.0, c.spike_span_s, opening), times])
            self._one_shot(times, self._template(), f"surge-{i}", drafts)

    def _spikes(self, start_s: float, end_s: float, drafts: list[Draft]) -> None:
        c, rng = self.c, self.rng
        for i in range(int(rng.poisson(c.spikes_per_day * (end_s - start_s) / DAY_S))):
            begin = rng.uniform(start_s, end_s)
            size = int(rng.integers(c.spike_requests[0], c.spike_requests[1] + 1))
            times = begin + rng.uniform(0.0, c.spike_span_s, size)
            self._one_shot(times, self._template(), f"spike-{i}", drafts)

    def _fanouts(self, start_s: float, end_s: float, drafts: list[Draft]) -> None:
        c, rng = self.c, self.rng
        sizes, probs = c.fanout_sizes
        min_doc = 16 * c.block_tokens + 1
        for i in range(int(rng.poisson(c.fanouts_per_hour * (end_s - start_s) / 3600.0))):
            begin = rng.uniform(start_s, end_s)
            size = int(rng.choice(sizes, p=probs))
            span = rng.uniform(*c.fanout_span_s)
            system = self._template()
            room = c.max_input_tokens - system[1] - 1024
            doc_tokens = self._lognormal(c.fanout_document_median_tokens, 0.8, 1)[0]
            document = (self._new_id(), int(np.clip(doc_tokens, min_doc, max(room, min_doc))))
            questions = np.clip(self._lognormal(80.0, 0.8, size), 1, 1024)
            outputs = self._outputs(size)
            times = begin + np.sort(rng.uniform(0.0, span, size))
            for k in range(size):
                segments = [system, document, (self._new_id(), int(questions[k]))]
                total = system[1] + document[1] + int(questions[k])
                drafts.append(
                    Draft(float(times[k]), segments, 3, total, int(outputs[k]), f"fanout-{i}")
                )


def simulate_drafts(
    config: ArtLikeConfig, rng: np.random.Generator, start_s: float, end_s: float
) -> list[Draft]:
    """All requests of the traffic model arriving in [start_s, end_s), by arrival.

    Sessions, surges and jobs that began before ``start_s`` are not included; callers
    that want traffic already under way start earlier and drop the warm-up.
    """
    if not end_s > start_s:
        raise ValueError(f"simulate_drafts: end_s ({end_s!r}) must exceed start_s ({start_s!r})")
    drafts = _Simulation(config, rng).run(start_s, end_s)
    return [d for d in drafts if start_s <= d.arrival_s < end_s]


def _window_salt(seed: int, trace_id: str) -> bytes:
    return hashlib.blake2b(f"{seed}:{trace_id}".encode(), digest_size=16).digest()


def art_like_drafts(
    config: ArtLikeConfig,
    window: int,
    seed: int,
    duration_s: float | None = None,
    stream: int = 1,
) -> tuple[float, list[Draft]]:
    """The window's requests (times relative to the window start) and its time of day.

    ``duration_s`` None: the first ``rows_per_window`` arrivals; otherwise every
    arrival in the first ``duration_s`` seconds. ``stream`` separates uses of the
    same seed and window (the ART-like family, mixed backgrounds, ...).
    """
    day_rng = np.random.default_rng([seed, 0xA27, stream, window])
    opens_s = float(day_rng.uniform(0.0, DAY_S))
    if duration_s is not None:
        horizon = duration_s
    else:
        low_rate = config.mean_rate_per_s * (1.0 - config.diurnal_amplitude)
        horizon = 1.5 * config.rows_per_window / low_rate + 60.0
    for attempt in range(20):
        rng = np.random.default_rng([seed, 0xA27, stream, window, attempt])
        drafts = simulate_drafts(
            config, rng, opens_s - config.warmup_s, opens_s + horizon * 2**attempt
        )
        drafts = [d for d in drafts if d.arrival_s >= opens_s]
        if duration_s is not None:
            drafts = [d for d in drafts if d.arrival_s < opens_s + duration_s]
            break
        if len(drafts) >= config.rows_per_window:
            drafts = drafts[: config.rows_per_window]
            break
    else:  # pragma: no cover - needs a pathological config
        raise ValueError(f"ArtLikeConfig: could not draw {config.rows_per_window} arrivals")
    for d in drafts:
        d.arrival_s -= opens_s
    return opens_s, drafts


def drafts_to_rows(
    drafts: list[Draft],
    block_tokens: int,
    trace_id: str,
    seed: int,
    split: str = "",
    source: str = ART,
) -> Iterator[dict[str, Any]]:
    """Bursted-ART rows for drafts, hashing each block (24-hex, salted by window)."""
    hasher = SegmentHasher(block_tokens, _window_salt(seed, trace_id))
    for i, d in enumerate(drafts):
        yield {
            "request_id": f"{trace_id}-{i:05d}",
            "trace_id": trace_id,
            "source": source,
            "arrival_s": round(d.arrival_s, 6),
            "input_length": d.input_tokens,
            "output_length": d.output_tokens,
            "hash_ids": hasher.hash_ids(d.segments, d.n_segments),
            "group_id": f"{trace_id}-{d.group}",
            "split": split,
            "metadata": {"job_kind": BACKGROUND},
        }


def art_like_window_rows(
    config: ArtLikeConfig,
    window: int,
    seed: int,
    split: str = "",
    trace_id: str | None = None,
    duration_s: float | None = None,
    stream: int = 1,
) -> list[dict[str, Any]]:
    """Rows of ART-like window number ``window`` in the Bursted-ART layout, by arrival.

    Each window opens at its own random time of day and draws from its own stream
    (``seed``, ``stream``, ``window``), so windows can be made alone and in any order.
    """
    trace_id = trace_id if trace_id is not None else f"art-{window:04d}"
    _, drafts = art_like_drafts(config, window, seed, duration_s=duration_s, stream=stream)
    return list(drafts_to_rows(drafts, config.block_tokens, trace_id, seed, split=split))


def draft_prefix_keys(drafts: list[Draft], min_blocks: int, block_tokens: int) -> list[Any]:
    """For each draft, a key naming its first ``min_blocks`` blocks (None if shorter)."""
    return [prefix_key(d.segments, d.n_segments, min_blocks, block_tokens) for d in drafts]


ART_CHAT_FIGURES = {
    "mean_rate_per_s": 3.37,
    "busiest_1s": 98,
    "busiest_10s": 343,
    "busiest_60s": 1656,
    "largest_fanout": 25,
}
"""ART-Chat's published figures that the generator approximates."""


def day_statistics(
    config: ArtLikeConfig | None = None,
    seed: int = 0,
    duration_s: float = DAY_S,
    min_blocks: int = 16,
    window_s: float = 10.0,
) -> dict[str, float]:
    """Simulate ``duration_s`` of uncut traffic and measure it as ART-Chat's
    published figures were measured.

    Returns the keys of :data:`ART_CHAT_FIGURES` plus length statistics. The fan-out is
    computed from segment keys (no hashing), which names the same prefixes as the
    chained block ids of the generated rows.
    """
    from envs.workloads.stats import busiest, largest_fanout

    config = config or ArtLikeConfig()
    rng = np.random.default_rng([seed, 0xDA7])
    drafts = simulate_drafts(config, rng, -config.warmup_s, duration_s)
    drafts = [d for d in drafts if d.arrival_s >= 0.0]
    arrivals = np.array([d.arrival_s for d in drafts])
    inputs = np.array([d.input_tokens for d in drafts])
    outputs = np.array([d.output_tokens for d in drafts])
    keys = draft_prefix_keys(drafts, min_blocks, config.block_tokens)
    return {
        "requests": float(len(drafts)),
        "mean_rate_per_s": len(drafts) / duration_s,
        "busiest_1s": float(busiest(arrivals, 1.0)[0]),
        "busiest_10s": float(busiest(arrivals, 10.0)[0]),
        "busiest_60s": float(busiest(arrivals, 60.0)[0]),
        "largest_fanout": float(largest_fanout(arrivals, keys, window_s).requests),
        "input_tokens_mean": float(inputs.mean()),
        "input_tokens_p50": float(np.percentile(inputs, 50)),
        "input_tokens_p99": float(np.percentile(inputs, 99)),
        "input_tokens_max": float(inputs.max()),
        "output_tokens_mean": float(outputs.mean()),
        "output_tokens_max": float(outputs.max()),
    }
