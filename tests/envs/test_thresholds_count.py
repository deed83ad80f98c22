"""``btb/Thresholds-v0``'s X-in-Z count depends on earlier epochs' Z and minimum
prefix (documented in the env's docstring and docs/thresholds.md): an arrival is
counted within the Z in force when it comes and forgotten past it, and one that
comes in an epoch whose minimum prefix the request does not reach is never
recorded. The shipped agents were trained with this count; these figures pin it,
so that changing it is a deliberate act (agents retrained, docs rewritten).

A steady prefix: one request every 0.4 s, 16 shared blocks of 256 tokens (4,096
tokens) and one of its own. Before t=10 s nothing fires (X=16, or a minimum
prefix above the prompt); the first epoch whose action comes at t >= 10 s (its
first arrival, 10.8 s: epochs are 1 s from an arrival) sets X=4, Z=8 s, M=every
node, the minimum prefix 1,024 tokens. A copy is issued at the first arrival
whose count reaches 4:

* earlier Z = 4 s: the arrivals of the last 4 s are still held, so 10.8 s fires;
* earlier Z = 0.25 s: each count kept only its own arrival (0.4 s apart), so the
  count goes 2 at 10.8 s (10.4 and 10.8), 3 at 11.2 s, 4 at 11.6 s;
* earlier minimum prefix 65,536 tokens: no arrival before the switch was
  recorded, so the count goes 1 at 10.8 s ... 4 at 12.0 s.

Counting every arrival, kept up to the largest Z (8 s), would give 10.8 s in all
three cases.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the environments)
from envs.sim.request import Request, Workload
from envs.thresholds import MIN_PREFIX_CHOICES, X_CHOICES, Z_CHOICES, EpochController

SHARED = tuple(range(16))
STEADY = Workload(
    name="steady",
    block_tokens=256,
    requests=[
        Request(
            index=i,
            request_id=str(i),
            arrival_s=0.4 * i,
            input_tokens=17 * 256,
            output_tokens=8,
            blocks=(*SHARED, 1000 + i),
        )
        for i in range(60)
    ],
)
AFTER = [X_CHOICES.index(4), Z_CHOICES.index(8.0), 3, MIN_PREFIX_CHOICES.index(1024), 0]


def first_copy_after_switch(before: list[int], compiled: bool) -> float:
    """The first copy issued at or after 10 s, with ``before`` as every action
    chosen before 10 s and ``AFTER`` from then on."""
    env = gym.make("btb/Thresholds-v0", setup="70b_h100x4", workload="bursted_synthetic")
    inner = env.unwrapped
    inner.controller = EpochController(inner.n_nodes, inner.epoch_s, compiled=compiled)
    env.reset(options={"window": STEADY, "sim_seed": [0, 0]})
    done = False
    while not done:
        action = before if inner.request.arrival_s < 10 else AFTER
        done = env.step(np.array(action))[2]
    return min(c.issued_s for c in inner.sim.copies if c.issued_s >= 10)


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize(
    ("before", "expected"),
    [
        ([X_CHOICES.index(16), Z_CHOICES.index(4.0), 3, 0, 0], 10.8),  # Z was 4 s
        ([X_CHOICES.index(16), Z_CHOICES.index(0.25), 3, 0, 0], 11.6),  # Z was 0.25 s
        ([X_CHOICES.index(4), Z_CHOICES.index(8.0), 3, MIN_PREFIX_CHOICES.index(65536), 0], 12.0),
    ],
    ids=["z_was_4s", "z_was_0.25s", "min_prefix_was_65536"],
)
def test_the_count_depends_on_earlier_epochs(
    before: list[int], expected: float, compiled: bool
) -> None:
    assert first_copy_after_switch(before, compiled) == pytest.approx(expected)
