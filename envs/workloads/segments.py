"""Prompts built from content segments, and their per-block hash ids.

The generators describe a prompt as a list of *segments* ``(segment_id, tokens)``
laid end to end: a system prompt, then user turns and model replies, or a shared
document and a question. A segment id names fixed content at a fixed position
(a session's third user message always follows the same history), so the raw hash
of a block can be ``(id of the segment holding the block's last token, offset of
that token within the segment)``. Two prompts then share a block exactly when
their tokens up to the block's end are the same, and a partial last block never
matches the full block at the same position. :class:`SegmentHasher` turns these
keys into 24-hex strings like ART-Chat's, salted so that different windows never
collide.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from envs.sim.errors import echoed

Segment = tuple[int, int]
"""(segment id, tokens)."""

BlockKey = tuple[int, int]
"""(segment id, offset of the block's last token within the segment, 1-based)."""


def block_keys(segments: Sequence[Segment], n_segments: int, block_tokens: int) -> list[BlockKey]:
    """The raw key of every block of a prompt made of the first ``n_segments`` segments."""
    keys: list[BlockKey] = []
    total = 0
    for _, tokens in segments[:n_segments]:
        total += tokens
    seg = 0
    seg_start = 0
    seg_end = segments[0][1]
    end = 0
    while end < total:
        end = min(end + block_tokens, total)
        while seg_end < end:
            seg += 1
            seg_start = seg_end
            seg_end += segments[seg][1]
        keys.append((segments[seg][0], end - seg_start))
    return keys


def prefix_key(
    segments: Sequence[Segment], n_segments: int, depth_blocks: int, block_tokens: int
) -> BlockKey | None:
    """The key of block ``depth_blocks - 1``, which alone names the whole prefix up to it.

    Returns None when the prompt has fewer than ``depth_blocks`` blocks.
    """
    total = 0
    for _, tokens in segments[:n_segments]:
        total += tokens
    if -(-total // block_tokens) < depth_blocks:
        return None
    end = min(depth_blocks * block_tokens, total)
    seg_start = 0
    for seg_id, tokens in segments[:n_segments]:
        if seg_start + tokens >= end:
            return (seg_id, end - seg_start)
        seg_start += tokens
    raise AssertionError("unreachable: end <= total")


class SegmentHasher:
    """Turns block keys into 24-hex hash strings, salted per window, with a cache."""

    __slots__ = ("_cache", "_salt", "block_tokens")

    def __init__(self, block_tokens: int, salt: bytes) -> None:
        if block_tokens < 1:
            raise ValueError(
                f"SegmentHasher: block_tokens must be >= 1, got {echoed(block_tokens)}"
            )
        self.block_tokens = block_tokens
        self._salt = salt
        self._cache: dict[BlockKey, str] = {}

    def hash_ids(self, segments: Sequence[Segment], n_segments: int) -> list[str]:
        """24-hex hash ids, one per block of the prompt."""
        cache = self._cache
        out: list[str] = []
        for key in block_keys(segments, n_segments, self.block_tokens):
            text = cache.get(key)
            if text is None:
                digest = hashlib.blake2b(
                    key[0].to_bytes(8, "little") + key[1].to_bytes(4, "little"),
                    digest_size=12,
                    key=self._salt,
                )
                text = digest.hexdigest()
                cache[key] = text
            out.append(text)
        return out
