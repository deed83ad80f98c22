"""The request labels the shipped generators write (Bursted-ART's ``source`` and
``metadata.job_kind``) and :data:`SHIPPED_CLASSES`, every (source, job kind) pair
they write. The generators write their rows with these constants and the
observation's hint class (``envs.encoder.hint_class``) gives each pair of the
table its own column, so a label and its column cannot drift apart."""

from __future__ import annotations

SYNTHETIC = "synthetic"
"""``source`` of the synthetic generators' rows (bursts, decoys, agents, conversations)."""
ART = "art"
"""``source`` of the ART-like rows (the background traffic)."""

BURST = "burst"
DECOY = "decoy"
BACKGROUND = "background"
AGENT = "agent"
CONVERSATION = "conversation"

SHIPPED_CLASSES: tuple[tuple[str, str], ...] = (
    (SYNTHETIC, BURST),
    (SYNTHETIC, DECOY),
    (ART, BACKGROUND),
    (SYNTHETIC, AGENT),
    (SYNTHETIC, CONVERSATION),
)
"""Every (source, job kind) pair a shipped generator writes, in the order of their
hint columns (0, 1, ...). A new generator's pair goes at the end (the columns of
the others, which an agent trained with hints has learnt, stay where they are)."""
