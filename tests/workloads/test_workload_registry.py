"""The workload registry: names, splits by whole window, counts, determinism, overrides."""

from __future__ import annotations

import types

import pytest

from envs.sim.errors import ConfigError
from envs.workloads import list_workloads, plan, window_rows, windows
from envs.workloads.bursted import PUBLISHED_SEED
from envs.workloads.registry import configure, describe

EXPECTED = {
    "bursted_art", "bursted_synthetic", "bursted_synthetic_1s", "rising_load", "decoy_heavy",
    "multi_tenant", "agent_fanout", "art_like", "mixed", "burst_families", "conversation_like",
}  # fmt: skip
BLOCK_TOKENS = {"conversation_like": 512}  # the others: 256
SPLITS3 = ("train", "test", "val")

SMALL = {
    "burst_requests": 10,
    "n_decoys": 3,
    "rows_per_window": 50,
    "trees": 2,
    "background_rate_per_s": 0.5,
    "ramp_s": 30.0,
    "duration_s": 120.0,
}


def _small(name: str) -> dict:
    scenario = describe(name)
    fields = {f for fam in scenario.families for f in type(fam.config).__dataclass_fields__}
    return {k: v for k, v in SMALL.items() if k in fields}


def test_every_workload_is_listed_with_the_default_first() -> None:
    names = list_workloads()
    assert set(names) == EXPECTED and names[0] == "bursted_art"
    with pytest.raises(ValueError, match="unknown workload 'nope'"):
        describe("nope")


def test_bursted_art_plan_is_the_published_composition() -> None:
    specs = plan("bursted_art")
    assert len(specs) == 50  # the published 40, and 5 + 5 validation windows
    train = [s for s in specs if s.split == "train"]
    test = [s for s in specs if s.split == "test"]
    val = [s for s in specs if s.split == "val"]
    assert sorted(s.family for s in train) == ["art"] * 5 + ["synthetic"] * 5
    assert sorted(s.family for s in test) == ["art"] * 15 + ["synthetic"] * 15
    assert sorted(s.family for s in val) == ["art"] * 5 + ["synthetic"] * 5
    assert not {s.trace_id for s in train} & {s.trace_id for s in test}
    assert len({s.trace_id for s in specs}) == 50
    scenario = describe("bursted_art")
    art, synthetic = scenario.families
    rows = {"art": art.config.rows_per_window, "synthetic": synthetic.config.requests_per_window}
    assert (rows["art"], rows["synthetic"]) == (1_000, 4_120)
    assert sum(rows[s.family] for s in train) == 25_600
    assert sum(rows[s.family] for s in test) == 76_800


def test_bursted_synthetic_is_the_synthetic_half() -> None:
    half = [s for s in plan("bursted_art") if s.family == "synthetic"]
    alone = plan("bursted_synthetic")
    assert [(s.trace_id, s.split) for s in half] == [(s.trace_id, s.split) for s in alone]
    assert sum(s.split == "train" for s in alone) == 5 and len(alone) == 25


def test_validation_windows_are_held_out_after_train_and_test() -> None:
    """Validation takes the window indices after the 20 train and test ones, so it
    shares no window (no index, no random stream, no prefix) with either, and the
    train / test split is the one without validation windows."""
    specs = plan("bursted_synthetic")
    val = [s for s in specs if s.split == "val"]
    assert [s.index for s in val] == [20, 21, 22, 23, 24]
    assert [s.trace_id for s in val] == [f"synthetic-{i:04d}" for i in range(20, 25)]
    without = plan(configure("bursted_synthetic", val_windows=0))
    assert [s for s in specs if s.split != "val"] == without
    params = {"burst_requests": 5, "n_decoys": 2}
    prefixes = {
        split: {
            row["hash_ids"][0]
            for _, rows in window_rows("bursted_synthetic", split, **params)
            for row in rows
        }
        for split in ("train", "val", "test")
    }
    assert not prefixes["val"] & (prefixes["train"] | prefixes["test"])
    got = list(windows("bursted_synthetic", "val", limit=2, **params))
    assert [w.meta["split"] for w in got] == ["val", "val"]
    assert [w.name for w in got] == [f"bursted_synthetic/synthetic-00{i}" for i in (20, 21)]
    assert len(list(windows("rising_load", "val", ramp_s=30.0, val_windows=2))) == 2
    # "all" stays the published layout (train and test), what make_dataset writes
    every = {s.split for s, _ in window_rows("bursted_synthetic", "all", **params)}
    assert every == {"train", "test"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_workload_yields_windows(name: str) -> None:
    got = windows(name, "all", seed=11, limit=2, **_small(name))
    assert isinstance(got, types.GeneratorType)
    first = next(got)
    assert first.block_tokens == BLOCK_TOKENS.get(name, 256) and len(first) > 0
    assert first.meta["workload"] == name and first.meta["seed"] == 11
    assert first.name == f"{name}/{first.meta['trace_id']}"
    again = next(windows(name, "all", seed=11, limit=1, **_small(name)))
    assert [(r.arrival_s, r.blocks) for r in again.requests] == [
        (r.arrival_s, r.blocks) for r in first.requests
    ]


def test_train_and_test_never_share_a_window() -> None:
    params = {"burst_requests": 5, "n_decoys": 1, "rows_per_window": 20}
    train = list(window_rows("bursted_art", "train", **params))
    test = list(window_rows("bursted_art", "test", **params))
    assert (len(train), len(test)) == (10, 30)
    train_ids = {row["trace_id"] for _, rows in train for row in rows}
    test_ids = {row["trace_id"] for _, rows in test for row in rows}
    assert len(train_ids) == 10 and len(test_ids) == 30 and not train_ids & test_ids
    assert all(row["split"] == spec.split for spec, rows in train + test for row in rows)


def test_seeds_change_windows_and_splits() -> None:
    a = [s.split for s in plan("bursted_synthetic", seed=1)]
    b = [s.split for s in plan("bursted_synthetic", seed=2)]
    assert a != b and a.count("train") == b.count("train") == 5


def test_overrides_and_their_errors() -> None:
    scenario = configure("bursted_art", train_windows=1, test_windows=2, burst_requests="7")
    art, synthetic = scenario.families
    assert synthetic.config.burst_requests == 7 and (art.train_windows, art.test_windows) == (1, 2)
    assert configure("art_like", val_windows=2).families[0].val_windows == 2
    with pytest.raises(ValueError, match="val_windows"):
        configure("art_like", val_windows=-1)
    assert configure("art_like", surge_rate_per_s="5/9").families[0].config.surge_rate_per_s == (
        5.0,
        9.0,
    )
    assert configure("art_like", spike_requests=[3, 4]).families[0].config.spike_requests == (3, 4)
    with pytest.raises(ValueError, match="unknown parameter"):
        configure("bursted_synthetic", rows_per_window=5)
    with pytest.raises(ValueError, match="not a valid int"):
        configure("bursted_synthetic", burst_requests="many")
    with pytest.raises(ValueError, match="split must be"):
        list(windows("bursted_synthetic", "validation"))
    assert len(list(windows("bursted_synthetic", "test", limit=2, burst_requests=3))) == 2


def test_a_true_false_parameter_is_read_strictly() -> None:
    """No generator has a true/false field today; one that does reads only the
    spellings of true and false (``maybe`` was read as false)."""
    import dataclasses

    from envs.workloads.registry import _convert

    @dataclasses.dataclass(frozen=True)
    class Config:
        flag: bool = False

    assert _convert("w", Config(), "flag", " Yes ") is True
    assert _convert("w", Config(), "flag", "off") is False
    with pytest.raises(ValueError, match="parameter flag='maybe' is not a valid bool"):
        _convert("w", Config(), "flag", "maybe")


@pytest.mark.slow
def test_full_bursted_art_counts() -> None:
    """The whole published composition, generated (about 4 s)."""
    counts = {"train": 0, "test": 0}
    for spec, rows in window_rows("bursted_art", "all"):
        counts[spec.split] += len(rows)
    assert counts == {"train": 25_600, "test": 76_800}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_block_size_override_reaches_the_workload_and_every_row(name: str) -> None:
    # Hashes made at 512 tokens a block, read by the simulator as 256-token blocks,
    # would halve every hit; the workload, the scenario and every row (background
    # rows too) must use the overridden size.
    params = {**_small(name), "block_tokens": 512}
    assert configure(name, **params).block_tokens == 512
    workload = next(windows(name, split="all", limit=1, **params))
    assert workload.block_tokens == 512
    for request in workload.requests:
        assert len(request.blocks) == -(-request.input_tokens // 512), request.request_id


def test_a_generator_whose_prefix_keys_end_in_own_blocks_is_warned_about_once(monkeypatch):
    """At 16-token blocks each burst request's own 256-token suffix spans 16 blocks, so
    its prompt less its last block is its own: 90 of the 100 requests (3 bursts of 30
    sharing a prefix; the 10 decoys share nothing), once per workload and params. At
    the default 256-token blocks the suffix is one block: nothing to say."""
    import warnings

    from envs.sim.errors import SettingWarning
    from envs.workloads import registry

    monkeypatch.setattr(registry, "_KEYS_CHECKED", set())
    small = {"burst_requests": 30, "n_bursts": 3, "n_decoys": 10}
    with pytest.warns(SettingWarning) as caught:
        first = next(registry.windows("bursted_synthetic", block_tokens=16, **small))
    said = [str(w.message) for w in caught]
    assert said == [
        "workload bursted_synthetic with block_tokens=16, burst_requests=30, n_bursts=3, "
        f"n_decoys=10: in window {first.name}, 90 of 100 requests share leading blocks with "
        "others, but their prompt less its last block ends in 16-token blocks no other "
        "request has (a suffix longer than one block); at the workload's own parameters 0% "
        f"of that window's requests. {registry.PRIVATE_KEY_EFFECT}"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        next(registry.windows("bursted_synthetic", block_tokens=16, **small))  # said already
        next(registry.windows("bursted_synthetic", block_tokens=256, **small))
        # art_like's conversations have such requests at any block size (a third of
        # them): a change that leaves them as they are says nothing
        next(registry.windows("art_like", block_tokens=256))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_family_s_validation_windows_come_after_its_train_and_test_ones(name: str) -> None:
    """In every workload, each family's splits are disjoint and its validation
    indices are the ones after all its train and test indices."""
    for family in describe(name).families:
        specs = [s for s in plan(name) if s.family == family.name]
        index = {split: {s.index for s in specs if s.split == split} for split in SPLITS3}
        assert not index["train"] & index["test"]
        assert len(index["train"] | index["test"]) == family.train_windows + family.test_windows
        assert index["val"] == set(range(family.windows, family.windows + family.val_windows))


def test_burst_families_share_prompts_across_families_but_not_with_validation() -> None:
    """What docs/workloads.md says of ``burst_families``: window i of ``synthetic``,
    ``synthetic1s`` and ``mixed`` draws from the same stream, so the three send the
    same prompts (``mixed`` adds background), while each family's split is its
    own: ``synthetic-0007`` is a test window and ``mixed-0007``, holding all of its
    requests, a train one. Validation (indices 20-24 of every family) shares no
    prompt with any train or test window of any family. That is the layout of
    ``train_streams="shared"``, the zoo's."""
    params = {**_small("burst_families"), "train_streams": "shared"}
    prompts = _prompts("burst_families", params)
    assert ("synthetic", "test", 7) in prompts and ("mixed", "train", 7) in prompts
    assert prompts["synthetic", "test", 7] < prompts["mixed", "train", 7]
    assert prompts["synthetic1s", "test", 7] == prompts["synthetic", "test", 7]
    val = set().union(*(p for (_, split, _), p in prompts.items() if split == "val"))
    seen = set().union(*(p for (_, split, _), p in prompts.items() if split != "val"))
    first_blocks = {p[0] for p in val}
    assert val and not val & seen and not first_blocks & {p[0] for p in seen}


def _prompts(name: str, params: dict) -> dict[tuple[str, str, int], set[tuple[str, ...]]]:
    """Each window's prompts (its rows' block-id lists) by (family, split, index)."""
    prompts: dict[tuple[str, str, int], set[tuple[str, ...]]] = {}
    for split in SPLITS3:
        for spec, rows in window_rows(name, split, **params):
            prompts[spec.family, spec.split, spec.index] = {tuple(r["hash_ids"]) for r in rows}
    return prompts


def test_own_train_streams_share_no_prompt_with_test_or_validation() -> None:
    """The default, ``train_streams="own"``: no train window of any family shares a
    prompt with a test or validation window of any family, while the test and
    validation windows are those of ``shared`` row for row; a train window records the
    seed it is drawn from, and drawing another of the same index from the same seed
    gives the same rows (siblings' train windows of one index still share)."""
    params = _small("burst_families")
    own = _prompts("burst_families", params)
    shared = _prompts("burst_families", {**params, "train_streams": "shared"})
    assert {k: v for k, v in own.items() if k[1] != "train"} == {
        k: v for k, v in shared.items() if k[1] != "train"
    }
    train = set().union(*(p for (_, split, _), p in own.items() if split == "train"))
    held_out = set().union(*(p for (_, split, _), p in own.items() if split != "train"))
    assert train and held_out and not train & held_out
    assert not {p[0] for p in train} & {p[0] for p in held_out}  # (not even a prefix block)
    assert own["mixed", "train", 7] != shared["mixed", "train", 7]
    window = next(windows("bursted_synthetic", "train", limit=1, **_small("bursted_synthetic")))
    test = next(windows("bursted_synthetic", "test", limit=1, **_small("bursted_synthetic")))
    assert window.meta["stream_seed"] not in (None, PUBLISHED_SEED)
    assert "stream_seed" not in test.meta
    again = next(windows("bursted_synthetic", "train", limit=1, **_small("bursted_synthetic")))
    assert again.requests == window.requests


def test_the_docs_mixed_0007_example_says_which_layout_it_holds_for() -> None:
    """docs/workloads.md's example of a split per family, ``burst_families``'
    ``synthetic-0007`` a test window and ``mixed-0007`` a train one: the train window
    holds every request of the test window with ``train_streams=shared`` and none by
    default (it said "which holds all of its requests" of the default, which since
    2026-12-06 draws it from a seed of its own)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "workloads.md").read_text()
    (said,) = [p for p in text.split("\n\n") if "`mixed-0007`" in p and "`synthetic-0007`" in p]
    said = " ".join(said.split())
    assert (
        "With `train_streams=shared` (the zoo's layout, below) that train window holds all "
        "of the test window's requests; by default it is drawn from a seed of its own and "
        "holds none of them."
    ) in said
    params = _small("burst_families")
    for streams, held in (("shared", True), ("own", False)):
        prompts = _prompts("burst_families", {**params, "train_streams": streams})
        test, train = prompts["synthetic", "test", 7], prompts["mixed", "train", 7]
        assert test and (test <= train) is held and bool(test & train) is held


def test_train_streams_must_be_own_or_shared() -> None:
    with pytest.raises(ConfigError, match=r"train_streams must be one of own, shared, got 'Own'"):
        configure("bursted_synthetic", train_streams="Own")
    assert {f.train_streams for f in configure("mixed").families} == {"own"}


def test_how_many_test_windows_send_prompts_a_sibling_family_trained_on() -> None:
    """The counts docs/results/agents.md gives: 60 s bursts' train windows are the
    bursts of 5 of ``mixed``'s test windows and 3 of the 1 s bursts'; with every
    sibling's train windows, 7 of each one's 15 test windows."""
    specs = plan("burst_families")
    index = {
        (family, split): {s.index for s in specs if (s.family, s.split) == (family, split)}
        for family in ("synthetic", "synthetic1s", "mixed")
        for split in ("train", "test")
    }
    assert len(index["synthetic", "train"] & index["mixed", "test"]) == 5
    assert len(index["synthetic", "train"] & index["synthetic1s", "test"]) == 3
    for family in ("synthetic", "synthetic1s", "mixed"):
        siblings = {"synthetic", "synthetic1s", "mixed"} - {family}
        others = set().union(*(index[f, "train"] for f in siblings))
        assert len(index[family, "test"]) == 15 and len(index[family, "test"] & others) == 7
