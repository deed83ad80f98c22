"""A workload of one's own: a tiny burst model that every command runs as it runs a
registered workload, without editing btb-gym. From the repository's folder::

    python -m experiments.compare workload=plugin \\
        workload.factory=examples.own_workload:make_rows agents=none windows=2

``workload.factory=MODULE:FUNCTION`` names any function importable from the
working folder or ``PYTHONPATH``. btb-gym calls it once a window, as
``make_rows(window, seed, split, trace_id, **parameters)``, splits its windows
into train, validation and test as it splits a registered workload's, and checks
the rows it returns as it checks a trace file's (docs/workloads.md, "A workload
of one's own"). The parameters after the first four, with their defaults, are the
generator's parameters: ``params=bursts=5`` on ``compare`` and ``make_dataset``,
``+workload.params.bursts=5`` on ``train`` and ``evaluate``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def make_rows(
    window: int,
    seed: int,
    split: str,
    trace_id: str,
    bursts: int = 3,
    burst_requests: int = 40,
    prefix_tokens: int = 65_536,
    block_tokens: int = 256,
) -> list[dict[str, Any]]:
    """Bursts of requests that share a long prefix (each with a 256-token suffix of
    its own, spread over 5 s), among 30 one-off requests of 1,000-4,000 tokens."""
    rng = np.random.default_rng([seed, window])  # a stream of its own: any window alone

    def hashes(n: int) -> list[str]:
        return [rng.bytes(8).hex() for _ in range(n)]

    def blocks(tokens: int) -> int:
        return -(-tokens // block_tokens)

    rows: list[dict[str, Any]] = []
    shared = prefix_tokens // block_tokens  # whole blocks only: the last one is each request's
    for burst in range(bursts):
        start = 10.0 + 30.0 * burst + rng.uniform(-2.0, 2.0)
        prefix = hashes(shared)
        for i in range(burst_requests):
            tokens = prefix_tokens + 256
            rows.append(
                {
                    "arrival_s": start + 5.0 * i / burst_requests,
                    "input_length": tokens,
                    "output_length": 16,
                    "hash_ids": prefix + hashes(blocks(tokens) - shared),
                    "group_id": f"{trace_id}-burst-{burst}",
                    "source": "own",
                    "metadata": {"job_kind": "burst"},
                }
            )
    for _ in range(30):
        tokens = int(rng.integers(1_000, 4_001))
        rows.append(
            {
                "arrival_s": float(rng.uniform(0.0, 30.0 * bursts + 10.0)),
                "input_length": tokens,
                "output_length": 64,
                "hash_ids": hashes(blocks(tokens)),
                "source": "own",
                "metadata": {"job_kind": "background"},
            }
        )
    return rows  # in any order: btb-gym puts them in arrival order
