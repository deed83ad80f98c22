"""Bursted-ART synthetic windows (the published generator), the built-in workload.

A synthetic window holds ``n_bursts`` burst jobs of ``burst_requests`` requests
that share one long prefix, each request with its own suffix, plus
``n_decoys`` one-request decoy jobs with their own long prefix. The published
parameters are the defaults; ``burst_window_s=1.0`` gives the hard 1-second
variant. Rows follow the Bursted-ART layout (``request_id``, ``trace_id``,
``source``, ``arrival_s``, ``input_length``, ``output_length``, ``hash_ids``,
``group_id``, ``split``, ``metadata.job_kind``); :func:`rows_to_workload` turns
them into simulator requests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from envs.sim.checks import check_int
from envs.sim.errors import ConfigError, echoed
from envs.sim.request import BlockChainer, Request, Workload
from envs.workloads.hint_labels import BURST, DECOY, SYNTHETIC

PUBLISHED_SEED = 20260721


@dataclass(frozen=True)
class BurstedSyntheticConfig:
    """Parameters of one synthetic Bursted-ART window (defaults: as published)."""

    n_bursts: int = 8
    """Burst jobs per window."""
    burst_requests: int = 500
    """Requests per burst job."""
    prefix_tokens: int = 65_536
    """Shared prefix length of a burst (and of each decoy's own prefix)."""
    suffix_tokens: int = 256
    """Each request's own suffix after the prefix."""
    output_tokens: int = 1
    """Tokens generated per request."""
    first_burst_s: float = 20.0
    """Nominal start of the first burst."""
    burst_interval_s: float = 40.0
    """Nominal gap between burst starts."""
    start_jitter_s: float = 2.0
    """Each burst start is jittered uniformly by +- this."""
    burst_window_s: float = 60.0
    """A burst's requests are evenly spaced over this window (1.0: the hard variant)."""
    n_decoys: int = 120
    """One-request decoy jobs, each with its own prefix."""
    decoy_lead_s: float = 6.0
    """Decoys start uniformly between (first burst - decoy_lead_s) and
    (first burst + n_bursts x burst_interval_s)."""
    block_tokens: int = 256
    """Tokens per hashed block."""
    decoy_requests: int = 1
    """Requests per decoy job, all sharing the decoy's prefix (1 as published)."""
    decoy_spread_s: float = 0.5
    """A decoy job's extra requests arrive uniformly within this many seconds of its first."""

    def __post_init__(self) -> None:
        where = "BurstedSyntheticConfig"
        for name in ("n_bursts", "burst_requests", "n_decoys"):
            value = getattr(self, name)
            check_int(f"{where}.{name}", value, 0)
        for name in (
            "prefix_tokens",
            "suffix_tokens",
            "output_tokens",
            "block_tokens",
            "decoy_requests",
        ):
            value = getattr(self, name)
            check_int(f"{where}.{name}", value, 1)
        for name in (
            "first_burst_s",
            "burst_interval_s",
            "start_jitter_s",
            "burst_window_s",
            "decoy_lead_s",
            "decoy_spread_s",
        ):
            value = getattr(self, name)
            if not (value >= 0.0) or value == float("inf"):
                raise ConfigError.about(
                    f"{where}.{name}", f"must be finite and >= 0, got {echoed(value)}"
                )
        if self.requests_per_window == 0 and not self._has_other_traffic():
            raise ConfigError.about(
                f"{where}.n_bursts",
                "x {burst_requests} + {n_decoys} must be >= 1, or every window is empty; got "
                f"n_bursts={self.n_bursts}, burst_requests={self.burst_requests}, "
                f"n_decoys={self.n_decoys}",
                "burst_requests",
                "n_decoys",
            )
        lowest_start_s = min(
            self.first_burst_s - self.start_jitter_s, self.first_burst_s - self.decoy_lead_s
        )
        if lowest_start_s < 0:
            raise ConfigError.about(
                "BurstedSyntheticConfig.first_burst_s",
                "must be at least start_jitter_s and "
                f"decoy_lead_s so no arrival is negative, got first_burst_s={self.first_burst_s!r}"
                f" (start_jitter_s={self.start_jitter_s!r}, decoy_lead_s={self.decoy_lead_s!r})",
            )

    def _has_other_traffic(self) -> bool:
        """Whether a window has requests besides the bursts and decoys (a subclass's
        background traffic): then no bursts and no decoys is not an empty window."""
        return False

    @property
    def requests_per_window(self) -> int:
        return self.n_bursts * self.burst_requests + self.n_decoys * self.decoy_requests

    @property
    def window_end_s(self) -> float:
        """Latest possible arrival: the last burst's jittered window, or the decoys' range."""
        last_burst = (
            self.first_burst_s
            + (self.n_bursts - 1) * self.burst_interval_s
            + self.start_jitter_s
            + self.burst_window_s
        )
        decoys = self.first_burst_s + self.n_bursts * self.burst_interval_s + self.decoy_spread_s
        return max(last_burst if self.n_bursts else 0.0, decoys if self.n_decoys else 0.0)


def _hex_ids(rng: np.random.Generator, n: int) -> list[str]:
    raw = rng.bytes(12 * n)
    return [raw[12 * i : 12 * i + 12].hex() for i in range(n)]


def _blocks(tokens: int, block_tokens: int) -> int:
    return -(-tokens // block_tokens)


def shared_prefix_blocks(prefix_tokens: int, block_tokens: int) -> int:
    """Blocks whose tokens all belong to a shared ``prefix_tokens``-token prefix
    (a partial last block also holds a request's own tokens, so it is not shared)."""
    return prefix_tokens // block_tokens


def synthetic_window_rows(
    config: BurstedSyntheticConfig,
    window: int,
    seed: int = PUBLISHED_SEED,
    split: str = "",
    trace_id: str | None = None,
    source: str = SYNTHETIC,
) -> list[dict[str, Any]]:
    """Rows of synthetic window number ``window``, in arrival order.

    Each window draws from its own stream, ``numpy.random.default_rng([seed, window])``,
    so any window can be generated alone and the result does not depend on
    which other windows were made. ``trace_id`` (default ``synthetic-NNNN``) and
    ``source`` only label the rows; they do not change what is drawn.
    """
    rng = np.random.default_rng([seed, window])
    trace_id = trace_id if trace_id is not None else f"synthetic-{window:04d}"
    # Only whole blocks of the prefix are shared: a block that holds the prefix's
    # last tokens and the start of a request's own suffix differs per request.
    prefix_blocks = shared_prefix_blocks(config.prefix_tokens, config.block_tokens)
    suffix_blocks = _blocks(config.prefix_tokens + config.suffix_tokens, config.block_tokens)
    suffix_blocks -= prefix_blocks
    input_length = config.prefix_tokens + config.suffix_tokens
    rows: list[dict[str, Any]] = []

    def add(arrival_s: float, prefix: list[str], group_id: str, kind: str) -> None:
        rows.append(
            {
                "request_id": f"{trace_id}-{len(rows):05d}",
                "trace_id": trace_id,
                "source": source,
                "arrival_s": float(arrival_s),
                "input_length": input_length,
                "output_length": config.output_tokens,
                "hash_ids": prefix + _hex_ids(rng, suffix_blocks),
                "group_id": group_id,
                "split": split,
                "metadata": {"job_kind": kind},
            }
        )

    for burst in range(config.n_bursts):
        nominal = config.first_burst_s + burst * config.burst_interval_s
        start = nominal + rng.uniform(-config.start_jitter_s, config.start_jitter_s)
        prefix = _hex_ids(rng, prefix_blocks)
        spacing = config.burst_window_s / max(config.burst_requests, 1)
        for i in range(config.burst_requests):
            add(start + i * spacing, prefix, f"{trace_id}-burst-{burst}", BURST)
    lo = config.first_burst_s - config.decoy_lead_s
    hi = config.first_burst_s + config.n_bursts * config.burst_interval_s
    for decoy in range(config.n_decoys):
        start = rng.uniform(lo, hi)
        prefix = _hex_ids(rng, prefix_blocks)
        for i in range(config.decoy_requests):
            arrival = start if i == 0 else start + rng.uniform(0.0, config.decoy_spread_s)
            add(arrival, prefix, f"{trace_id}-decoy-{decoy}", DECOY)
    rows.sort(key=lambda row: row["arrival_s"])
    return rows


def rows_to_workload(
    rows: Iterable[Mapping[str, Any]],
    block_tokens: int,
    name: str,
    chainer: BlockChainer | None = None,
    meta: dict[str, Any] | None = None,
) -> Workload:
    """Turn Bursted-ART rows (already validated) into a :class:`Workload`."""
    chainer = chainer if chainer is not None else BlockChainer()
    requests = [
        Request(
            index=0,
            request_id=str(row["request_id"]),
            arrival_s=float(row["arrival_s"]),
            input_tokens=int(row["input_length"]),
            output_tokens=int(row["output_length"]),
            blocks=chainer.chain(row["hash_ids"], namespace=str(row.get("tenant", ""))),
            tenant=str(row.get("tenant", "")),
            group_id=str(row.get("group_id", "")),
            job_kind=str((row.get("metadata") or {}).get("job_kind", "")),
            source=str(row.get("source", "")),
        )
        for row in rows
    ]
    return Workload(name=name, block_tokens=block_tokens, requests=requests, meta=dict(meta or {}))


def synthetic_window(
    config: BurstedSyntheticConfig | None = None,
    window: int = 0,
    seed: int = PUBLISHED_SEED,
) -> Workload:
    """One synthetic window as a ready-to-simulate :class:`Workload`."""
    config = config or BurstedSyntheticConfig()
    rows = synthetic_window_rows(config, window, seed)
    return rows_to_workload(
        rows,
        config.block_tokens,
        name=f"bursted_synthetic[{window}]",
        meta={"generator": "bursted_synthetic", "window": window, "seed": seed, **asdict(config)},
    )
