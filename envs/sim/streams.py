"""Random streams derived from the simulator's seed.

A stream that must not draw from ``sim.rng`` (the policies' tie-breaks), yet must
follow the run's seed (so each window and episode gets its own, and the same
seeds the same), is a child of the seed sequence that made ``sim.rng``, keyed by
words of its own: the faults' stream (``envs.sim.faults``) and a sampling agent's
torch stream (``agents.adapter``).
"""

from __future__ import annotations

import numpy as np


def seed_child(rng: np.random.Generator, *words: int) -> np.random.SeedSequence | None:
    """The child of the seed sequence that made ``rng``, keyed by ``words`` after its
    own spawn key (far from the children ``rng.spawn`` numbers 0, 1, ...); None for
    a generator made without one (numpy's legacy seeding, a bare state)."""
    seq = rng.bit_generator.seed_seq
    if not isinstance(seq, np.random.SeedSequence):
        return None
    return np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, *words))
