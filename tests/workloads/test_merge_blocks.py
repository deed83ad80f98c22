"""``workload.merge_blocks=K``: a trace read in blocks K times as long. Each K
consecutive blocks of a prompt become one (the id of the group's last block, which
names it and all before it), a partial last group a block of its own; prefixes
are then shared in whole merged blocks."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from envs.sim.errors import ConfigError
from envs.sim.request import merged_blocks, shared_blocks
from envs.workloads.registry import windows
from envs.workloads.trace_file import TraceOptions, plan_trace
from tests.workloads.tracekit import write_jsonl


def test_merged_ids_are_each_group_s_last_and_a_partial_group_s_own() -> None:
    blocks = (11, 12, 13, 14, 15, 16, 17)
    assert merged_blocks(blocks, 1) == blocks
    assert merged_blocks(blocks, 2) == (12, 14, 16, 17)
    assert merged_blocks(blocks, 3) == (13, 16, 17)
    assert merged_blocks(blocks, 7) == (17,)
    assert merged_blocks(blocks, 8) == (17,)
    assert merged_blocks(blocks[:6], 3) == (13, 16)  # whole groups only


def _rows() -> list[dict]:
    """Three Mooncake rows (512-token blocks): a and b share 5 blocks, then differ;
    c is a's first 3 blocks and one more token (a 4-block prompt)."""
    prompts = [(0, 3584, [1, 2, 3, 4, 5, 6, 7]), (10, 3584, [1, 2, 3, 4, 5, 8, 9]),
               (20, 1537, [1, 2, 3, 10])]  # fmt: skip
    return [
        {"timestamp": t, "input_length": n, "output_length": 1, "hash_ids": ids}
        for t, n, ids in prompts
    ]


@pytest.mark.parametrize(("k", "lengths", "ab", "ac"), [
    (1, [7, 7, 4], 5, 3),
    (2, [4, 4, 2], 2, 1),  # 5 shared blocks: 2 whole pairs; a and c: the pair (1, 2)
    (3, [3, 3, 2], 1, 1),  # c's partial group (10) is its own
    (4, [2, 2, 1], 1, 0),  # c's only block is its partial group
])  # fmt: skip
def test_a_trace_read_with_merged_blocks_shares_whole_merged_blocks(
    tmp_path: Path, k: int, lengths: list[int], ab: int, ac: int
) -> None:
    path = write_jsonl(tmp_path / "m.jsonl", _rows())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (window,) = windows("trace", split="all", path=str(path), merge_blocks=k)
    assert window.block_tokens == 512 * k
    a, b, c = window.requests
    assert [len(r.blocks) for r in window.requests] == lengths
    assert shared_blocks(a.blocks, b.blocks) == ab
    assert shared_blocks(a.blocks, c.blocks) == ac
    assert plan_trace(TraceOptions(path=str(path), merge_blocks=k)).describe()["block_tokens"] == (
        512 * k
    )


def test_merge_blocks_must_be_a_whole_number_of_at_least_one(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "m.jsonl", _rows())
    for value in (0, -2, 1.5, "2"):
        with pytest.raises(ConfigError, match="merge_blocks"):
            TraceOptions(path=str(path), merge_blocks=value)  # type: ignore[arg-type]


def test_merged_blocks_fit_a_two_block_suffix_in_the_last_block(tmp_path: Path) -> None:
    """Ten requests share 4 blocks and each ends in 2 blocks of its own: read as
    they are, the prefix-key warning names them; in blocks twice as long, each
    suffix is one block of its own and the prompt less it is the shared prefix."""
    rows = [
        {"timestamp": i * 100, "input_length": 3000, "output_length": 1,
         "hash_ids": [1, 2, 3, 4, 10 + 2 * i, 11 + 2 * i]}
        for i in range(10)
    ]  # fmt: skip
    path = write_jsonl(tmp_path / "suffix.jsonl", rows)
    with pytest.warns(UserWarning, match="workload.merge_blocks=K reads the trace in blocks"):
        list(windows("trace", split="all", path=str(path)))
    path2 = write_jsonl(tmp_path / "suffix2.jsonl", rows)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: the key is the shared prefix now
        (window,) = windows("trace", split="all", path=str(path2), merge_blocks=2)
    keys = {r.blocks[-2] for r in window.requests}
    assert len(keys) == 1 and all(len(r.blocks) == 3 for r in window.requests)


def test_a_merged_read_is_the_trace_written_at_the_coarser_blocks(tmp_path: Path) -> None:
    """The same prompts written at 512-token blocks and at 1,024: read with
    merge_blocks=2, the first gives the second's block counts and the same shared
    prefix between every two requests (ids are renamed, structure is not)."""
    import random

    rng = random.Random(3)
    shared = {  # two shared prefixes: 12 and 8 blocks of 512 tokens, 6 and 4 of 1,024
        512: [list(range(100, 112)), list(range(200, 208))],
        1024: [list(range(300, 306)), list(range(400, 404))],
    }
    rows: dict[int, list[dict]] = {512: [], 1024: []}
    next_id = {512: 1000, 1024: 5000}
    for i in range(30):
        group = rng.randrange(3)  # 0, 1: a shared prefix; 2: a prompt of its own
        tokens = rng.randint(300, 3000)
        for bt in (512, 1024):
            base = shared[bt][group] if group < 2 else []
            own = -(-(len(base) * bt + tokens) // bt) - len(base)
            ids = base + list(range(next_id[bt], next_id[bt] + own))
            next_id[bt] += own
            rows[bt].append(
                {"timestamp": i * 50, "input_length": len(base) * bt + tokens,
                 "output_length": 1, "hash_ids": ids}
            )  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (merged,) = windows(
            "trace", split="all", path=str(write_jsonl(tmp_path / "a.jsonl", rows[512])),
            merge_blocks=2,
        )  # fmt: skip
        (native,) = windows(
            "trace", split="all", path=str(write_jsonl(tmp_path / "b.jsonl", rows[1024])),
            block_tokens=1024,
        )  # fmt: skip
    assert merged.block_tokens == native.block_tokens == 1024
    a, b = merged.requests, native.requests
    assert [len(r.blocks) for r in a] == [len(r.blocks) for r in b]
    for i in range(len(a)):
        for j in range(len(a)):
            assert shared_blocks(a[i].blocks, a[j].blocks) == shared_blocks(
                b[i].blocks, b[j].blocks
            )


def test_ids_past_the_prompt_are_cut_before_they_are_merged(tmp_path: Path) -> None:
    """With strict_block_count=false a row may carry more ids than its prompt fills:
    the short row's ids 1-8 with a 2,100-token prompt (5 blocks of 512). Cut first,
    its merged blocks are (2, 4, 5) and it shares 2 of them (2,048 tokens) with the
    long row; merged first, (2, 4, 6) would share 3, more than its prompt holds."""
    rows = [
        {"timestamp": t, "input_length": n, "output_length": 1, "hash_ids": ids}
        for t, n, ids in (
            (0, 2100, [1, 2, 3, 4, 5, 6, 7, 8]),
            (10, 4096, [1, 2, 3, 4, 5, 6, 9, 10]),
        )
    ]
    path = write_jsonl(tmp_path / "over.jsonl", rows)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (window,) = windows(
            "trace", split="all", path=str(path), merge_blocks=2, strict_block_count=False
        )
    short, long = window.requests
    assert len(short.blocks) == 3 and shared_blocks(short.blocks, long.blocks) == 2
