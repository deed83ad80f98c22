"""Prefix lengths: settings are tokens, the cache counts blocks.

Every setting that measures a prefix (BTB's Y and minimum prefix, the oracle's
and the teacher's minimum prefix, audit's fan-out depth) is given in tokens and
turned into blocks with the workload's block size, so a threshold means the
same on 16-, 256- and 512-token blocks.
"""

from __future__ import annotations

from envs.sim.errors import ConfigError


def whole_blocks(tokens: int, block_tokens: int) -> int:
    """The whole blocks that fit in ``tokens`` (a prefix taken at most this long)."""
    return tokens // block_tokens


def blocks_reaching(tokens: int, block_tokens: int) -> int:
    """The fewest blocks (at least one) holding ``tokens`` (a prefix at least this long)."""
    return max(-(-tokens // block_tokens), 1)


def check_key_tokens(field: str, tokens: int | None, block_tokens: int) -> None:
    """A prefix key ``tokens`` long (BTB's Y; None: none) must hold one block of the
    workload at least: it is taken in whole blocks (:func:`whole_blocks`)."""
    if tokens is not None and tokens < block_tokens:
        raise ConfigError.about(
            field,
            f"= {tokens} is shorter than one {block_tokens}-token block of the workload "
            f"(Y is whole blocks: {field}={block_tokens} or more keys one)",
        )
