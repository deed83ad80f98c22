"""The example trace shipped in ``examples/``: btb-gym's own generator, written in Mooncake format.

Eight windows of the ``mixed`` workload (three bursts of 80 requests sharing a
16,384-token prefix, ten one-off decoys, ART-like background traffic), laid end
to end: about 3,000 requests over 43 minutes. Rows are Mooncake's: ``timestamp``
(integer milliseconds from 0), ``input_length``, ``output_length`` and chained
``hash_ids`` of 512-token blocks, numbered from 0 in order of first use. The
generator's 256-token blocks become 512-token ones by keeping every second
chained id (a 512-token block is shared exactly when both of its halves are).
The same seed gives the same file, byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from envs.sim.request import BlockChainer
from envs.workloads.bursted import PUBLISHED_SEED
from envs.workloads.registry import window_rows

EXAMPLE_WORKLOAD = "mixed"
EXAMPLE_PARAMS: dict[str, Any] = {
    "n_bursts": 3,
    "burst_requests": 80,
    "burst_interval_s": 100.0,
    "prefix_tokens": 16_384,
    "n_decoys": 10,
    "background_rate_per_s": 0.4,
}
EXAMPLE_WINDOWS = 8
MOONCAKE_BLOCK_TOKENS = 512


def example_mooncake_rows(seed: int = PUBLISHED_SEED) -> Iterator[dict[str, Any]]:
    """The example trace's rows, in arrival order."""
    chainer = BlockChainer()  # one id space for the whole trace
    renumber: dict[int, int] = {}
    offset_s = 0.0
    # every window drawn from the seed's stream (train_streams="shared"), as the file
    # has been since it was first shipped: its train windows are test windows here
    windows = window_rows(
        EXAMPLE_WORKLOAD, "all", seed, EXAMPLE_WINDOWS, train_streams="shared", **EXAMPLE_PARAMS
    )
    for position, (_, rows) in enumerate(windows):
        end_s = 0.0
        for row in rows:
            chained = chainer.chain(row["hash_ids"], namespace=f"window-{position}")
            n_blocks = -(-int(row["input_length"]) // MOONCAKE_BLOCK_TOKENS)
            kept = [chained[min(2 * j + 1, len(chained) - 1)] for j in range(n_blocks)]
            yield {
                "timestamp": round((offset_s + float(row["arrival_s"])) * 1000.0),
                "input_length": int(row["input_length"]),
                "output_length": int(row["output_length"]),
                "hash_ids": [renumber.setdefault(block, len(renumber)) for block in kept],
            }
            end_s = max(end_s, float(row["arrival_s"]))
        offset_s += end_s + 1.0


def example_mooncake_text(seed: int = PUBLISHED_SEED) -> str:
    """The example trace as JSONL text."""
    return "".join(
        json.dumps(row, separators=(",", ":")) + "\n" for row in example_mooncake_rows(seed)
    )
