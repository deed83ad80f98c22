"""The compiled block chainer (envs/sim/_native/chainer.pyx) against the reference
(``BlockChainer`` in envs/sim/request.py): random prompts (shared heads, branches,
repeats, int and string hashes, namespaces) give the same ids and the same
internal state after every call, and a trace read with either gives the same
requests. Skipped when the compiled module is not built."""

from __future__ import annotations

import json
from dataclasses import astuple
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from envs.sim import native
from envs.sim.request import _NO_RUN, BlockChainer
from envs.workloads.readers import ReadOptions, read_mooncake

compiled = pytest.importorskip(
    "envs.sim._native.chainer", reason="the compiled core is not built (no C compiler at install?)"
)


def _state(chainer: Any) -> tuple[Any, ...]:
    return (chainer._roots, chainer._next, chainer._branches, chainer._ids, len(chainer))


def _prompt(rng: np.random.Generator) -> list[Any]:
    stem = int(rng.integers(4))
    length = int(rng.integers(0, 9))
    cut = int(rng.integers(length + 1))  # where the prompt leaves its stem
    return [f"s{stem}-{i}" for i in range(cut)] + [
        int(rng.integers(6)) for _ in range(length - cut)
    ]


@pytest.mark.parametrize("seed", range(12))
def test_random_prompts_give_the_reference_ids_and_state(seed: int) -> None:
    rng = np.random.default_rng(seed)
    reference, twin = BlockChainer(), compiled.BlockChainer()
    forms = (list, tuple, iter)  # a list or tuple is walked as it is, anything else listed
    for _ in range(300):
        raws = _prompt(rng)
        form = forms[int(rng.integers(3))]
        namespace = ["", "t1"][int(rng.integers(2))]
        ids = twin.chain(form(raws), namespace)
        assert ids == reference.chain(form(raws), namespace=namespace)
        assert _state(twin) == _state(reference)
    assert twin._next[-1] is _NO_RUN  # the reference's own sentinel, not a look-alike


def test_ids_are_shared_objects_as_in_the_reference() -> None:
    """Both return ids that are the chainer's own int objects (no int per request)."""
    twin = compiled.BlockChainer()
    first = twin.chain(list(range(300)))
    again = twin.chain([*range(290), "x", "y"])
    assert again[:290] == first[:290] and again[290:] == (301, 302)
    assert all(a is b for a, b in zip(first, again[:290]))
    assert all(i is twin._ids[i] for i in again)


def test_a_trace_reads_the_same_with_either_chainer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Mooncake file of multi-turn sessions (prefixes that grow and branch) reads
    into the same requests, field by field, with the compiled chainer."""
    rng = np.random.default_rng(3)
    rows = []
    for i in range(400):
        session = int(rng.integers(20))
        turn = int(rng.integers(1, 6))
        ids = [session * 100 + k for k in range(turn * 3)] + [10_000 + i]
        rows.append(
            {
                "timestamp": 10 * i,
                "input_length": 512 * len(ids),
                "output_length": 4,
                "hash_ids": ids,
            }
        )
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    reads = []
    for cls in (BlockChainer, compiled.BlockChainer):
        monkeypatch.setattr(native, "BlockChainer", cls)
        reads.append(read_mooncake(path, ReadOptions(namespace="t")))
    reference, twin = reads
    assert [astuple(r) for r in twin.requests] == [astuple(r) for r in reference.requests]
    assert len({r.blocks[:3] for r in twin.requests}) < 25  # sessions do share heads
    assert twin.meta == reference.meta
