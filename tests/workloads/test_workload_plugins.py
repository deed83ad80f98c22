"""A workload of one's own (envs.workloads.plugins): a user's generator function,
``workload=plugin workload.factory=MODULE:FUNCTION``, split, seeded, checked and
recorded as a registered workload is; every mistake is one line naming it."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any

import pytest

from envs.sim.errors import ConfigError, SettingWarning
from envs.workloads.plugins import load_plugin
from envs.workloads.registry import configure, plan, window_rows, windows

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = "plugin:examples.own_workload:make_rows"
DOCS_COMMAND = (
    "python -m experiments.compare workload=plugin "
    "workload.factory=examples.own_workload:make_rows agents=none windows=2"
)

MODULE = '''
import numpy as np


def two_rows(window, seed, split, trace_id, gap_s=2.0, block_tokens=4):
    """Two requests sharing their first block, the later one listed first."""
    own = int(np.random.default_rng([seed, window]).integers(1, 1000))
    return [
        {"arrival_s": gap_s, "input_length": 8, "hash_ids": ["p", own + 1], "output_length": 0},
        {"arrival_s": 0.0, "input_length": 6, "hash_ids": ["p", own], "group_id": "g",
         "metadata": {"job_kind": "burst"}, "tenant": "t"},
    ]


NOT_A_FUNCTION = 3


def returns_dict(window, seed, split, trace_id):
    return {"arrival_s": 0.0}


def row_is_a_list(window, seed, split, trace_id):
    return [[0.0, 300]]


def bad_length(window, seed, split, trace_id):
    return [{"arrival_s": 0.0, "input_length": 300, "hash_ids": ["a", "b"]},
            {"arrival_s": 1.0, "input_length": 0, "hash_ids": ["c"]}]


def few_blocks(window, seed, split, trace_id):
    return [{"arrival_s": 0.0, "input_length": 3000, "hash_ids": ["a", "b"]}]


def misspelt(window, seed, split, trace_id):
    return [{"arrival_s": 0.0, "input_length": 300, "output_lenght": 3, "hash_ids": ["a", "b"]}]


def other_window(window, seed, split, trace_id):
    return [{"trace_id": "mine", "arrival_s": 0.0, "input_length": 300, "hash_ids": ["a", "b"]}]


def two_args(window, seed):
    return []


def bad_default(window, seed, split, trace_id, rates=None):
    return []


def numpy_rows(window, seed, split, trace_id, block_tokens=4):
    """two_rows's rows as a numpy generator writes them."""
    return [
        {"arrival_s": np.float64(2.0), "input_length": np.int64(8),
         "hash_ids": np.array([7, 9], dtype=np.int64), "output_length": np.int32(0)},
        {"arrival_s": np.float32(0.5), "input_length": np.uint16(6),
         "hash_ids": [np.int64(7), 8], "request_id": np.int64(12)},
    ]


def unchained(window, seed, split, trace_id, block_tokens=4):
    """Raw hashes that are no chain: "b" at two depths and after two parents."""
    hashes = [["a", "b"], ["b", "a"], ["c", "b"], ["a", "b", "c"]]
    return [{"arrival_s": float(i), "input_length": 4 * len(h), "hash_ids": h}
            for i, h in enumerate(hashes)]


def numpy_strings(window, seed, split, trace_id, block_tokens=4):
    """Hashes as numpy draws strings: a list of np.str_, and a 1-d array of them."""
    return [
        {"arrival_s": 0.0, "input_length": 8, "hash_ids": list(np.array(["p", "q"]))},
        {"arrival_s": 1.0, "input_length": 8, "hash_ids": np.array(["p", "r"])},
    ]


def flag_pair(window, seed, split, trace_id, pair=(True, True), sizes=(1, 2.5)):
    return [{"arrival_s": 0.0, "input_length": 300, "hash_ids": ["a", "b"],
             "group_id": repr((pair, sizes))}]


def numpy_matrix(window, seed, split, trace_id):
    return [{"arrival_s": 0.0, "input_length": 300, "hash_ids": np.ones((2, 1), dtype=int)}]


def numpy_fraction(window, seed, split, trace_id):
    return [{"arrival_s": 0.0, "input_length": np.float64(300.5), "hash_ids": [1, 2]}]


def unix_time(window, seed, split, trace_id):
    return [{"arrival_s": 1_700_000_000, "input_length": 300, "hash_ids": ["a", "b"]}]


def two_lines(window, seed, split, trace_id):
    raise ValueError("rate must be > 0\\n  (got -1)")


def poisson(window, seed, split, trace_id, rate=-1.0):
    n = int(np.random.default_rng(seed).poisson(rate))  # the failing line
    return [{"arrival_s": 0.0, "input_length": 1, "hash_ids": [1]}] * n
'''


POISSON_LINE = "    n = int(np.random.default_rng(seed).poisson(rate))  # the failing line"


@pytest.fixture
def own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module of one's own, importable as ``own_gen_<n>`` (a fresh name a test)."""
    name = f"own_gen_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)  # (files are named relative to the working folder)
    return name


def test_rows_are_checked_and_written_in_the_registered_layout(own: str) -> None:
    """two_rows's rows come back sorted by arrival, every field filled in (trace_id and
    split from the window, output_length 0 read as 1), and simulate as blocks of 4
    tokens (the function's block_tokens), the tenant's apart from the other's."""
    ((spec, rows),) = list(window_rows(f"plugin:{own}:two_rows", "test", seed=7, limit=1))
    assert spec.family == "two_rows" and spec.trace_id == f"two_rows-{spec.index:04d}"
    tid = spec.trace_id
    assert [r["arrival_s"] for r in rows] == [0.0, 2.0]
    assert rows[0] == {
        "request_id": f"{tid}-2", "trace_id": tid, "source": "", "arrival_s": 0.0,
        "input_length": 6, "output_length": 1, "hash_ids": ["p", rows[0]["hash_ids"][1]],
        "group_id": "g", "split": "test", "metadata": {"job_kind": "burst"}, "tenant": "t",
    }  # fmt: skip
    assert rows[1]["output_length"] == 1 and rows[1]["request_id"] == f"{tid}-1"
    assert rows[1]["hash_ids"][1] == rows[0]["hash_ids"][1] + 1
    window = next(windows(f"plugin:{own}:two_rows", "test", seed=7, limit=1))
    assert window.name == f"plugin:{own}:two_rows/{tid}" and window.block_tokens == 4
    assert window.meta["config"] == {"factory": f"{own}:two_rows", "gap_s": 2.0, "block_tokens": 4}
    first, second = window.requests
    assert (first.arrival_s, second.arrival_s) == (0.0, 2.0)
    assert (first.tenant, second.tenant) == ("t", "")  # tenants never share KV ...
    assert first.blocks[0] != second.blocks[0]


def test_numpy_numbers_are_taken_as_python_numbers(own: str) -> None:
    """numpy scalars (np.int64 lengths, np.float64 / np.float32 arrivals, an np.int64
    id) and hash lists as a 1-d integer array or holding np.int64 come back as the
    Python numbers they hold (exactly int and float: the cores compute with them);
    a 2-d array, or a length of 300.5, is refused as a file's row is."""
    ((spec, rows),) = list(window_rows(f"plugin:{own}:numpy_rows", "test", seed=7, limit=1))
    tid = spec.trace_id
    assert [
        (r["arrival_s"], r["input_length"], r["output_length"], r["hash_ids"], r["request_id"])
        for r in rows
    ] == [(0.5, 6, 1, [7, 8], "12"), (2.0, 8, 1, [7, 9], f"{tid}-1")]
    for row in rows:
        assert type(row["arrival_s"]) is float
        assert type(row["input_length"]) is int and type(row["output_length"]) is int
        assert {type(h) for h in row["hash_ids"]} == {int}
    window = next(windows(f"plugin:{own}:numpy_rows", "test", seed=7, limit=1))
    first, second = window.requests
    assert first.blocks[0] == second.blocks[0] and first.blocks[1] != second.blocks[1]
    assert type(first.arrival_s) is float and type(first.input_tokens) is int
    for function, said in (
        ("numpy_matrix", "field 'hash_ids': expected a list or a 1-d array of integers or "
                         "strings, got a 2-d array of int64"),
        ("numpy_fraction", "field 'input_length': expected an integer, got 300.5"),
    ):  # fmt: skip
        with pytest.raises(ConfigError, match=re.escape(said)):
            list(window_rows(f"plugin:{own}:{function}", "test", limit=1))


def test_numpy_strings_are_taken_as_python_strings(own: str) -> None:
    """Hashes numpy drew as strings (a list of np.str_, a 1-d array of them) come
    back as the Python strings they hold, and share the block they agree on (before:
    "item 0 must be an integer or a string, got np.str_('p')", and the array refused)."""
    ((_, rows),) = list(window_rows(f"plugin:{own}:numpy_strings", "test", seed=7, limit=1))
    assert [r["hash_ids"] for r in rows] == [["p", "q"], ["p", "r"]]
    assert {type(h) for r in rows for h in r["hash_ids"]} == {str}
    window = next(windows(f"plugin:{own}:numpy_strings", "test", seed=7, limit=1))
    first, second = window.requests
    assert first.blocks[0] == second.blocks[0] and first.blocks[1] != second.blocks[1]


def test_its_hashes_are_chained_as_a_trace_file_s(own: str, tmp_path: Path) -> None:
    """A generator's hash_ids are raw hashes, chained as the trace readers chain a
    file's (a block id names its whole prefix): "b" first and "b" after "a" are two
    blocks, "b" after "a" and after "c" two more; a prompt that extends ["a", "b"]
    shares its two ids. Worked by hand: ids count from 1 in order of first
    appearance of (parent, hash). Its dataset read back as a trace: the same ids."""
    from experiments import make_dataset

    name = f"plugin:{own}:unchained"
    (window,) = windows(name, "test", train_windows=1, test_windows=1, val_windows=0)
    assert [r.blocks for r in window.requests] == [(1, 2), (3, 4), (5, 6), (1, 2, 7)]
    make_dataset.main([f"workload={name}", "train_windows=1", "test_windows=1",
                       f"out_dir={tmp_path / 'd'}", "progress=false"])  # fmt: skip
    (read,) = windows("trace", "test", path=str(tmp_path / "d" / "test.jsonl"))
    assert [r.blocks for r in read.requests] == [(1, 2), (3, 4), (5, 6), (1, 2, 7)]


def test_parameters_splits_and_seeds_are_a_registered_workload_s(own: str) -> None:
    """The parameters after the four arguments are set by name (text read as the
    default's type); splits are disjoint and whole (5 / 15 / 5 by default, other
    counts by configure); the same seed gives the same rows, another seed others."""
    name = f"plugin:{own}:two_rows"
    (window,) = windows(name, "train", seed=7, limit=1, gap_s="0.5")
    assert [r.arrival_s for r in window.requests] == [0.0, 0.5]
    specs = plan(configure(name), 7)
    by_split = {s: {w.trace_id for w in specs if w.split == s} for s in ("train", "test", "val")}
    assert [len(by_split[s]) for s in ("train", "test", "val")] == [5, 15, 5]
    assert not by_split["train"] & by_split["test"]
    assert by_split["val"] == {f"two_rows-{i:04d}" for i in range(20, 25)}
    assert len(plan(configure(name, train_windows=1, test_windows=1, val_windows=0), 7)) == 2

    def own_ids(seed: int) -> list[Any]:
        return [rows[0]["hash_ids"][1] for _, rows in window_rows(name, "all", seed=seed)]

    assert own_ids(7) == own_ids(7) and own_ids(7) != own_ids(8)
    with pytest.raises(ConfigError, match=re.escape("unknown parameter(s) factory (known: ")):
        configure(name, factory="x:y")
    with pytest.raises(ValueError, match=r"\{?block_tokens\}? must be an integer >= 1, got 0"):
        configure(name, block_tokens=0)


def test_a_typed_parameter_value_is_taken_as_its_default_s_type(own: str) -> None:
    """A value typed already (as Hydra gives ``+workload.params.gap_s=3``) reaches the
    function as its default's type: an int for a float, an integral float for an int;
    one of another type (``block_tokens=2.5``, ``gap_s=true``) is refused in one line
    naming the parameter (before: passed on as it was, 2.5 blocks' tokens)."""
    name = f"plugin:{own}:two_rows"
    config = configure(name, gap_s=3, block_tokens=8.0).families[0].config
    assert (config.gap_s, config.block_tokens) == (3.0, 8)
    assert type(config.gap_s) is float and type(config.block_tokens) is int
    for key, value, rule in (
        ("block_tokens", 2.5, "an integer, as its default 4 is, got 2.5"),
        ("gap_s", True, "a number, as its default 2.0 is, got True"),
        ("gap_s", [1], "a number, as its default 2.0 is, got [1]"),
    ):
        with pytest.raises(ConfigError) as caught:
            configure(name, **{key: value})
        said = f"workload {name!r}: {own}:two_rows.{key} must be {rule}"
        assert str(caught.value) == said
        assert caught.value.fields[0] == key


def test_a_tuple_parameter_s_text_is_read_item_by_item(own: str) -> None:
    """``low/high`` text for a tuple parameter reads each item as its default's item:
    a bool strictly (before, ``false/false`` was ``bool("false")`` twice: (True, True))."""
    name = f"plugin:{own}:flag_pair"

    def made(**params: str) -> str:
        ((_, rows),) = list(window_rows(name, "test", limit=1, **params))
        return str(rows[0]["group_id"])

    assert made(pair="false/no", sizes="3/4") == "((False, False), (3, 4.0))"
    assert made(pair="1/off") == "((True, False), (1, 2.5))"
    with pytest.raises(ConfigError, match=re.escape("parameter pair='maybe/true' is not a valid")):
        made(pair="maybe/true")


def test_the_example_s_windows(own: str) -> None:
    """examples/own_workload.py: 3 bursts of 40 requests sharing 256 blocks of 256
    tokens, and 30 one-off requests, a window; fewer bursts by parameter."""
    (window,) = windows(EXAMPLE, "test", limit=1)
    kinds = [r.job_kind for r in window.requests]
    assert (kinds.count("burst"), kinds.count("background")) == (120, 30)
    bursts = {r.group_id for r in window.requests if r.job_kind == "burst"}
    assert len(bursts) == 3 and window.block_tokens == 256
    burst = [r for r in window.requests if r.job_kind == "burst"]
    assert {tuple(r.blocks[:256]) for r in burst if r.group_id == burst[0].group_id} == {
        tuple(burst[0].blocks[:256])
    }
    (small,) = windows(EXAMPLE, "test", limit=1, bursts=1)
    assert len(small.requests) == 40 + 30


def test_a_train_window_of_one_s_own_is_drawn_from_the_derived_seed(own: str) -> None:
    """At train_windows=1 test_windows=1, seed 20260721: by default (train_streams=own)
    the function is called for its train window make_rows-0001 with the seed
    registry.stream_seed derives, not the workload's: the window is make_rows(1, that
    seed, ...) (its meta and the run's record say the seed), other rows than
    make_rows-0001 under train_streams=shared, which is make_rows(1, 20260721, ...).
    Its test window make_rows-0000 is the workload seed's either way. A function that
    ignores its seed (numpy_rows) makes the same rows both ways."""
    from envs.workloads.registry import stream_seed
    from experiments.trained_on import trained_windows

    seed, drawn = 20260721, stream_seed(20260721, "train", "own")
    assert drawn != seed
    make_rows = load_plugin(EXAMPLE).function
    counts = {"train_windows": 1, "test_windows": 1, "bursts": 1}

    def arrivals(rows: list[dict[str, Any]]) -> list[float]:
        return sorted(float(r["arrival_s"]) for r in rows)

    made = {}
    for streams in ("own", "shared"):
        (window,) = windows(EXAMPLE, "train", seed, train_streams=streams, **counts)
        assert window.name == f"{EXAMPLE}/make_rows-0001"
        made[streams] = sorted(r.arrival_s for r in window.requests)
        assert window.meta.get("stream_seed") == (drawn if streams == "own" else None)
        (test,) = windows(EXAMPLE, "test", seed, train_streams=streams, **counts)
        assert test.name == f"{EXAMPLE}/make_rows-0000"
        made[f"test {streams}"] = sorted(r.arrival_s for r in test.requests)
    assert made["own"] == arrivals(make_rows(1, drawn, "train", "make_rows-0001", bursts=1))
    assert made["shared"] == arrivals(make_rows(1, seed, "train", "make_rows-0001", bursts=1))
    assert made["own"] != made["shared"]
    assert made["test own"] == made["test shared"]
    assert made["test own"] == arrivals(make_rows(0, seed, "test", "make_rows-0000", bursts=1))
    assert trained_windows(EXAMPLE, counts, seed, 1, 0)["stream_seeds"] == {"make_rows-0001": drawn}
    # numpy_rows never reads its seed: its train window is the same rows both ways,
    # and drawing it under own says so, once (make_rows, which reads it, said nothing)
    name = f"plugin:{own}:numpy_rows"
    small = {"train_windows": 1, "test_windows": 1}
    with pytest.warns(SettingWarning) as said:
        ((_, by_own),) = window_rows(name, "train", seed, None, **small, train_streams="own")
    assert [str(w.message) for w in said] == [
        f"workload {name} made the same rows for train window 'numpy_rows-0000' at seed "
        f"{drawn} (train_streams=own) as at the workload's seed {seed}: its function seems "
        "to ignore its seed, so train_streams and workload.seed change none of its windows "
        "(draw from np.random.default_rng([seed, window]) if they should)"
    ]
    ((_, by_shared),) = window_rows(name, "train", seed, None, **small, train_streams="shared")
    assert by_own == by_shared
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (once a process: not again)
        assert list(window_rows(name, "train", seed, None, **small))


@pytest.mark.parametrize(
    ("function", "said"),
    [
        ("NOT_A_FUNCTION", "{own}:NOT_A_FUNCTION is an int, not a function taking (window, "
         "seed, split, trace_id)"),
        ("missing", "module '{own}' ({own}.py) has no attribute 'missing' (its functions: "
         "bad_default, bad_length, "),
        ("two_args", "{own}:two_args(window, seed) cannot be called as (window, seed, split, "
         "trace_id): too many positional arguments"),
        ("bad_default", "{own}:bad_default's parameter 'rates' defaults to None; a generator "
         "parameter's default is a bool, int, float, str or a tuple of them"),
        ("returns_dict", "{own}:returns_dict on test window 'returns_dict-{i}' returned a dict; "
         "it returns the window's rows, a list of dicts"),
        ("row_is_a_list", "{own}:row_is_a_list on test window 'row_is_a_list-{i}': row 1 is a "
         "list, not a dict"),
        ("bad_length", "{own}:bad_length on test window 'bad_length-{i}': row 2, field "
         "'input_length': must be >= 1, got 0"),
        ("few_blocks", "{own}:few_blocks on test window 'few_blocks-{i}': row 1, field "
         "'hash_ids': has 2 blocks but input_length 3000 at 256 tokens a block "
         "({own}:few_blocks's) needs 12 (or 11); a hash covers 256 tokens unless the "
         "function takes a block_tokens=N parameter"),
        ("misspelt", "{own}:misspelt on test window 'misspelt-{i}': row 1 has the field "
         "'output_lenght', which the rows' layout has not"),
        ("other_window", "{own}:other_window on test window 'other_window-{i}': row 1, field "
         "'trace_id': is 'mine', but the window is 'other_window-{i}'"),
        ("unix_time", "{own}:unix_time on test window 'unix_time-{i}': row 1, field "
         "'arrival_s': 1700000000 is 19,676 days after the start of window 'unix_time-{i}', "
         "read as s: arrival_s counts from its window's start, and no window spans more "
         "than 31 days (an absolute time such as Unix seconds is not one; it returns "
         "seconds from the window's start)"),
        ("poisson", "test window 'poisson-{i}' (seed 20260721, the workload's own parameters): "
         "{own}:poisson failed at {own}.py:{line}: ValueError: lam < 0"),
    ],
)  # fmt: skip
def test_every_mistake_is_one_line_naming_the_function(own: str, function: str, said: str) -> None:
    name = f"plugin:{own}:{function}"
    index = ""
    if "{i}" in said:  # the first test window, by its family's (the function's) shuffle
        index = next(f"{s.index:04d}" for s in plan(configure(name)) if s.split == "test")
    line = 1 + textwrap.dedent(MODULE).splitlines().index(POISSON_LINE)
    expected = f"workload {name!r}: " + said.format(own=own, i=index, line=line)
    with pytest.raises(ValueError) as caught:
        next(windows(name, "test", limit=1))
    assert str(caught.value).startswith(expected)
    assert "\n" not in str(caught.value)


def test_a_generators_error_of_several_lines_is_said_on_one(own: str) -> None:
    """A ValueError whose message spans lines (pandas' and some of numpy's do) is
    said on one line, its words as they were, as a command prints an error."""
    with pytest.raises(ValueError) as caught:
        next(windows(f"plugin:{own}:two_lines", "test", limit=1))
    assert str(caught.value).endswith("ValueError: rate must be > 0 (got -1)")


@pytest.mark.parametrize(
    ("factory", "said"),
    [
        ("justamodule", "workload.factory='justamodule' is not MODULE:FUNCTION"),
        ("no_such_module_here:f", "module 'no_such_module_here' cannot be imported: "
         "ModuleNotFoundError: No module named 'no_such_module_here' (workload.factory names "
         "a module importable from the working folder"),
        ("sub/mine.py:f", "workload.factory names a module, not a file: sub.mine:f"),
    ],
)  # fmt: skip
def test_a_factory_that_names_no_function_is_one_line(factory: str, said: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"workload 'plugin:{factory}': {said}")):
        load_plugin(f"plugin:{factory}")


NO_FACTORY_SAID = (
    "workload=plugin needs workload.factory=MODULE:FUNCTION, a generator function of your "
    "own (examples.own_workload:make_rows; docs/workloads.md)"
)


def test_workload_plugin_without_a_factory_is_one_line_alike_on_every_command(
    tmp_path: Path,
) -> None:
    """The library, a key=value command and a Hydra command say one text (one place,
    ``plugins.NO_FACTORY``; the Hydra command adds where the option came from); the
    Hydra one named the workload ``'plugin:'``, a name of none (``workload 'plugin:':
    workload=plugin needs ...``)."""
    with pytest.raises(ConfigError) as caught:
        load_plugin("plugin:")
    assert str(caught.value) == NO_FACTORY_SAID
    for command, more, where in (
        ("compare", ["agents=none"], ""),
        ("evaluate", ["logger=none", f"out_dir={tmp_path / 'run'}"], " (from the command line)"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", f"experiments.{command}", "workload=plugin", *more],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert (done.returncode, done.stderr) == (
            2,
            f"error: experiments.{command}: {NO_FACTORY_SAID}{where}\n",
        )
    assert not (tmp_path / "run").exists()
    # and the bare name, where a list of workloads names one (bench's workloads=)
    done = subprocess.run(
        [sys.executable, "-m", "experiments.bench", "workloads=plugin"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (
        2,
        f"error: experiments.bench: workloads: {NO_FACTORY_SAID}, or the name "
        "plugin:MODULE:FUNCTION (from the command line)\n",
    )


@pytest.mark.parametrize("taken", ["limit", "name", "train_windows", "seed", "train_streams"])
def test_a_parameter_named_as_windows_own_keywords_is_one_line(
    taken: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A generator parameter called limit or name clashed with windows()'s own keyword
    (a TypeError traceback on params=limit=5); one called train_windows never reached
    the function (a window count), nor would one called train_streams (configure()
    takes it for every family). Each is refused naming it, as the module loads."""
    module = f"taken_{taken}"  # (a module a name: an imported one stays in sys.modules)
    (tmp_path / f"{module}.py").write_text(
        f"def rows(w, s, sp, t, {taken}=3):\n"
        "    return [{'arrival_s': 0.0, 'input_length': 1, 'hash_ids': [1]}]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    said = (
        f"workload 'plugin:{module}:rows': {module}:rows has a parameter named "
        f"{taken!r}, which windows() and the commands take themselves"
    )
    with pytest.raises(ConfigError, match=re.escape(said)):
        next(windows(f"plugin:{module}:rows", "test", limit=1))


def test_the_taken_names_are_windows_own_keywords() -> None:
    """Every keyword windows() takes beside a workload's parameters, and every split
    parameter configure() takes out of them (train_streams: registry.SPLIT_PARAMETERS),
    is refused as one."""
    import inspect

    from envs.workloads.plugins import TAKEN_NAMES
    from envs.workloads.registry import SPLIT_PARAMETERS

    keywords = [
        p.name for p in inspect.signature(windows).parameters.values() if p.kind != p.VAR_KEYWORD
    ]
    assert sorted(TAKEN_NAMES) == sorted({*keywords, *SPLIT_PARAMETERS})


def test_a_function_that_ignores_its_arguments_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A function whose rows do not follow from its arguments (an unseeded generator,
    here a count of its calls) is refused on the first window, made twice; one that
    follows them is called twice for that window only."""
    (tmp_path / "repeats.py").write_text(
        "CALLS = []\n"
        "def counted(window, seed, split, trace_id):\n"
        "    CALLS.append(window)\n"
        "    return [{'arrival_s': float(len(CALLS)), 'input_length': 1, 'hash_ids': [1]}]\n"
        "def follows(window, seed, split, trace_id):\n"
        "    CALLS.append(window)\n"
        "    return [{'arrival_s': float(window), 'input_length': 1, 'hash_ids': [1]}]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    name = "plugin:repeats:counted"
    first = next(s for s in plan(configure(name)) if s.split == "test").trace_id
    said = (
        f"workload {name!r}: repeats:counted on test window {first!r} (seed 20260721) "
        "returned other rows when called again with the same arguments (row 1 in arrival "
        "order, field 'arrival_s': 1.0, then 2.0): its rows must follow from its "
        "arguments alone"
    )
    with pytest.raises(ConfigError, match=re.escape(said)):
        next(windows(name, "test", limit=1))
    import repeats  # type: ignore[import-not-found]

    repeats.CALLS.clear()
    made = list(windows("plugin:repeats:follows", "test", limit=3))
    indices = [w.meta["index"] for w in made]
    assert [indices[0], *indices] == repeats.CALLS


def test_a_module_failing_as_it_loads_names_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "fails_loading.py").write_text("x = 1\nraise RuntimeError('oops')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    said = (
        "workload 'plugin:fails_loading:f': module 'fails_loading' cannot be imported at "
        "fails_loading.py:2: RuntimeError: oops"
    )
    with pytest.raises(ConfigError, match=re.escape(said)):
        load_plugin("plugin:fails_loading:f")


def test_an_agent_s_windows_are_told_apart_from_another_plugin_s(own: str) -> None:
    """A window's key is its family (the function's name), its configuration (with
    the factory), the seed it is drawn from and index: the agent (trained with
    train_streams=shared, its train window drawn from the workload's seed) is refused
    its own train window, and not the same-named window of the same function in
    another module, other traffic."""
    from types import SimpleNamespace

    from experiments.trained_on import seen_registered, trained_windows

    name = f"plugin:{own}:two_rows"
    counts = {"train_windows": 1, "test_windows": 1, "train_streams": "shared"}
    record = trained_windows(name, counts, 7, 1, 0)
    assert record["workload"] == name and len(record["train"]) == 1
    spec = SimpleNamespace(env_kwargs={"workload": name}, registered_windows=[record])
    every = {"train_windows": 0, "test_windows": 20}  # (all 20 indices test windows)
    assert seen_registered(spec, name, every, 7, "test", None) == (record["train"], 1, [], 0)
    # the same function in another module of other bytes: the same family name and trace
    # ids, other traffic (a copy of the same bytes is the same traffic: the test below)
    (Path.cwd() / f"{own}_copy.py").write_text(textwrap.dedent(MODULE) + "# a copy\n")
    other = f"plugin:{own}_copy:two_rows"
    assert [s.trace_id for s in plan(configure(other, **every), 7)][:2] == [
        "two_rows-0000",
        "two_rows-0001",
    ]
    assert seen_registered(spec, other, every, 7, "test", None) == ([], 1, [], 0)


def test_an_agent_s_windows_under_another_name_of_its_module_are_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent trained on gen:rows (run in the folder mine/, train_streams=shared)
    evaluated on mine.gen:rows (run from its parent): the module of the same bytes
    under another name makes the same windows, so its windows are seen (before: none
    was); a module of other bytes, the same function and defaults is other traffic."""
    from agents.algorithms import AgentSpec
    from experiments.trained_on import seen_registered, trained_windows

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "__init__.py").write_text("")
    code = (
        "def rows(window, seed, split, trace_id, gap=1.0):\n"
        "    return [{'arrival_s': gap * window, 'input_length': 1, 'hash_ids': [window]}]\n"
    )
    (tmp_path / "mine" / "gen.py").write_text(code)
    (tmp_path / "other.py").write_text(code + "# the same function, other bytes\n")
    monkeypatch.syspath_prepend(str(tmp_path / "mine"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    counts = {"train_windows": 1, "test_windows": 1, "train_streams": "shared"}
    record = trained_windows("plugin:gen:rows", counts, 20260721, None, None)
    spec = AgentSpec(algo="ppo", env="route", registered_windows=[record])
    own = (record["train"], 1, record["val"], 5)  # (rows-0002..6: test windows at 5/15/5)
    assert len(record["train"]) == 1 and len(record["val"]) == 5
    for name, seen in (("plugin:mine.gen:rows", own), ("plugin:other:rows", ([], 1, [], 5))):
        assert seen_registered(spec, name, {}, 20260721, "test", None) == seen, name


def test_an_agent_records_its_module_s_sha256_and_a_change_is_one_note(own: str) -> None:
    """The record of a training run's windows holds the sha256 of the module's bytes
    (agent.json loads it; an older record without it loads too, a sha256 that is no
    string is refused); evaluated on the plugin whose module is now other bytes, the
    agent gets one note naming both, and its windows are still refused as its own.
    No note for the same bytes, a record without a sha256, or another workload.
    (train_streams=shared: its train window is drawn from the workload's seed.)"""
    from types import SimpleNamespace

    from agents.algorithms import _check_registered
    from experiments.trained_on import plugin_notes, seen_registered, trained_windows

    name = f"plugin:{own}:two_rows"
    code = hashlib.sha256((Path.cwd() / f"{own}.py").read_bytes()).hexdigest()
    counts = {"train_windows": 1, "test_windows": 1, "train_streams": "shared"}
    record = trained_windows(name, counts, 7, 1, 0)
    assert record["plugin_sha256"] == code
    older = {key: value for key, value in record.items() if key != "plugin_sha256"}
    _check_registered("agent.json: registered_windows", [record])
    _check_registered("agent.json: registered_windows", [older])
    with pytest.raises(ValueError, match=re.escape("[0].plugin_sha256 must be a JSON string")):
        _check_registered("agent.json: registered_windows", [{**record, "plugin_sha256": 3}])

    def agent(*records: dict[str, Any]) -> Any:
        spec = SimpleNamespace(env_kwargs={"workload": name}, registered_windows=list(records))
        return SimpleNamespace(spec=spec)

    edited = {**record, "plugin_sha256": "ab" * 32}
    agents = {"a": agent(edited), "same": agent(record), "old": agent(older)}
    folders = {label: f"/runs/{label}" for label in agents}
    assert plugin_notes(agents, folders, name) == [
        f"note: a (/runs/a) was trained on {name} with code of sha256 abababababab; "
        f"{(Path.cwd() / f'{own}.py').resolve()} is {code[:12]} now: the code that makes "
        "these windows changed since (they are still counted as its own)"
    ]
    assert plugin_notes(agents, folders, "bursted_synthetic") == []
    every = {"train_windows": 0, "test_windows": 20}
    spec = agents["a"].spec
    assert seen_registered(spec, name, every, 7, "test", None) == (record["train"], 1, [], 0)


def test_an_installed_package_of_the_same_name_does_not_shadow_it(tmp_path: Path) -> None:
    """An installed package called ``examples`` (a regular one, on PYTHONPATH after
    the working folder) gives way to examples/ of the repository, a package of its
    own; a folder of one's own without __init__.py gives way to such a package,
    and the line says so (add the __init__.py)."""
    site = tmp_path / "site"
    for name in ("examples", "mine"):
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text("")
    code = "from envs.workloads.plugins import load_plugin; print(load_plugin({!r}).path)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", code.format(EXAMPLE)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str((ROOT / "examples" / "own_workload.py").resolve())
    own = tmp_path / "work"
    (own / "mine").mkdir(parents=True)
    (own / "mine" / "gen.py").write_text(textwrap.dedent(MODULE))
    done = subprocess.run(
        [sys.executable, "-c", code.format("plugin:mine.gen:two_rows")],
        cwd=own, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert (
        "ModuleNotFoundError: No module named 'mine.gen'; 'mine' is the package "
        f"{site / 'mine' / '__init__.py'}, not the folder mine/ here, which has no "
        "__init__.py and so gives way to a package of its name (add mine/__init__.py)"
    ) in done.stderr


def _dataset(out: Path, *more: str) -> dict[str, Any]:
    from experiments import make_dataset

    argv = ["workload=plugin", "workload.factory=examples.own_workload:make_rows", *more]
    return make_dataset.main([*argv, f"out_dir={out}", "progress=false"])


def test_make_dataset_writes_it_and_its_split_reads_back_as_a_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dataset holds the rows the generator made (150 a window; train 1, test 1),
    names the workload and the function in its info, and its test split read as a
    trace is the same requests as the workload's test window."""
    monkeypatch.chdir(ROOT)
    info = _dataset(tmp_path / "d", "train_windows=1", "test_windows=1", "params=bursts=2")
    assert info["name"] == EXAMPLE
    assert info["generator"]["command"].startswith(
        f"python -m experiments.make_dataset workload={EXAMPLE} seed=20260721"
    )
    (family,) = info["generator"]["families"].values()
    assert family["config"]["factory"] == "examples.own_workload:make_rows"
    assert family["config"]["bursts"] == 2
    code = hashlib.sha256((ROOT / "examples" / "own_workload.py").read_bytes()).hexdigest()
    assert info["generator"]["plugin"] == {
        "factory": "examples.own_workload:make_rows",
        "sha256": code,
    }
    assert {s: c["rows"] for s, c in info["splits"].items()} == {"train": 110, "test": 110}
    (made,) = windows(EXAMPLE, "test", train_windows=1, test_windows=1, bursts=2)
    (read,) = windows("trace", "test", path=str(tmp_path / "d" / "test.jsonl"))
    assert [(r.arrival_s, r.input_tokens, r.output_tokens) for r in read.requests] == [
        (r.arrival_s, r.input_tokens, r.output_tokens) for r in made.requests
    ]


def test_the_key_value_commands_resolve_workload_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    from experiments._cli import UsageError
    from experiments.compare import main

    monkeypatch.chdir(ROOT)
    for argv, said in (
        (["workload=plugin"], "workload=plugin needs workload.factory=MODULE:FUNCTION"),
        (
            ["workload.factory=examples.own_workload:make_rows"],
            "workload.factory= is an option of workload=plugin, not of workload=bursted_synthetic",
        ),
        (
            [f"workload={EXAMPLE}", "workload.factory=examples.own_workload:make_rows"],
            f"workload={EXAMPLE} names its function already",
        ),
    ):
        with pytest.raises(UsageError, match=re.escape(f"experiments.compare: {said}")):
            main([*argv, "agents=none"])
    # bench runs its workloads= unless workload= is given: the option alone says to add it
    from experiments import bench

    with pytest.raises(UsageError) as alone:
        bench.main(["workload.factory=examples.own_workload:make_rows"])
    assert str(alone.value) == (
        "experiments.bench: workload.factory= goes with workload=plugin: add it "
        "(workload=plugin workload.factory=examples.own_workload:make_rows)"
    )


def test_the_hydra_commands_name_it_plugin_module_function() -> None:
    """``workload=plugin workload.factory=M:F`` composes to the workload's name;
    workload.factory beside another workload is refused."""
    from hydra import compose, initialize_config_dir

    from experiments.config import check_workload, register_configs, workload_label

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            "evaluate",
            ["workload=plugin", "workload.factory=examples.own_workload:make_rows",
             "+workload.params.bursts=2"],
        )  # fmt: skip
        other = compose("evaluate", ["workload.factory=examples.own_workload:make_rows"])
    assert cfg.workload.name == EXAMPLE
    assert workload_label(cfg) == f"{EXAMPLE}[bursts=2]"
    assert check_workload(cfg) is None
    with pytest.raises(ConfigError) as hydra:
        check_workload(other)
    # the key=value commands say the same line (one place: plugins.misplaced_factory)
    from experiments._cli import UsageError
    from experiments.compare import main

    with pytest.raises(UsageError) as key_value:
        main(["workload.factory=examples.own_workload:make_rows", "agents=none"])
    said = "workload.factory= is an option of workload=plugin, not of workload=bursted_synthetic"
    assert str(key_value.value) == f"experiments.compare: {said}"
    assert str(hydra.value) == said  # (with where it came from, under a Hydra run)


def test_tune_btb_scores_thresholds_on_a_plugin_s_train_windows(own: str, tmp_path: Path) -> None:
    """tune_btb (Hydra) takes workload=plugin: its objective is BTB's mean TTFT over
    the function's train windows (two_rows: 2 requests each, the first 2 of 5 by
    workload.train_pool), and objective.json records the module's sha256."""
    from hydra import compose, initialize_config_dir

    from envs.files import read_json
    from experiments.config import register_configs
    from experiments.tune_btb import objective

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose("tune_btb", ["workload=plugin", f"workload.factory={own}:two_rows",
                                   "workload.train_pool=2", "y_tokens=4",
                                   f"out_dir={tmp_path / 'job'}"])  # fmt: skip
    value = objective(cfg)
    record = read_json(tmp_path / "job" / "objective.json")
    assert record["row"]["workload"] == f"plugin:{own}:two_rows"
    assert record["row"]["requests"] == 4 and record["ttft_mean_s"] == value
    code = hashlib.sha256((tmp_path / f"{own}.py").read_bytes()).hexdigest()
    assert record["workload_plugin"]["sha256"] == code


def test_reproduce_and_bench_take_it_and_tune_btb_table_refuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reproduce and bench resolve workload=plugin workload.factory=M:F as compare
    does (bench.json records the module's sha256); tune_btb_table refuses a workload
    of one's own in one line, as the btb_tuned table it writes is never read for one."""
    from experiments import bench, reproduce, tune_btb_table
    from experiments._cli import UsageError

    monkeypatch.chdir(ROOT)
    plugin = ["workload=plugin", "workload.factory=examples.own_workload:make_rows"]
    result = reproduce.main([*plugin, "setups=70b_h100x4", "policies=cache_aware",
                             "causal_kv=on", "windows=1", "progress=false",
                             f"out_dir={tmp_path / 'rep'}"])  # fmt: skip
    assert result["config"]["workload"] == EXAMPLE
    assert {row["workload"] for row in result["rows"]} == {EXAMPLE}
    code = hashlib.sha256((ROOT / "examples" / "own_workload.py").read_bytes()).hexdigest()
    assert result["config"]["workload_plugin"]["sha256"] == code
    measured = bench.main([*plugin, "policies=cache_aware", "agents=", "envs=", "learn=",
                           "replay_windows=0", "read_rows=0", "repeats=1",
                           f"out_dir={tmp_path / 'bench'}"])  # fmt: skip
    assert [row["workload"] for row in measured["sim"]] == [EXAMPLE]
    assert measured["workload_plugins"][EXAMPLE]["sha256"] == code
    for workloads in (EXAMPLE, "plugin"):
        with pytest.raises(UsageError, match=re.escape(
            f"experiments.tune_btb_table: workloads: {workloads!r} is a workload of one's own; "
            "the btb_tuned table holds registered workloads only"
        )):  # fmt: skip
            tune_btb_table.main([f"workloads={workloads}", f"out_dir={tmp_path / 'table'}"])


@pytest.mark.slow
def test_the_docs_command_runs(tmp_path: Path) -> None:
    """The command docs/workloads.md gives, run as written from the repository."""
    assert DOCS_COMMAND in (ROOT / "docs" / "workloads.md").read_text()
    argv = [*DOCS_COMMAND.split()[1:], f"out_dir={tmp_path / 'out'}", "charts=false"]
    done = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert f"70b_h100x4 · {EXAMPLE} · 2 test windows" in done.stdout
    result = json.loads((tmp_path / "out" / "results.json").read_text())
    rows = result["rows"]
    assert {row["workload"] for row in rows} == {EXAMPLE}
    code = ROOT / "examples" / "own_workload.py"
    assert result["config"]["workload"] == EXAMPLE
    assert result["config"]["workload_plugin"] == {
        "factory": "examples.own_workload:make_rows",
        "path": str(code.resolve()),
        "sha256": hashlib.sha256(code.read_bytes()).hexdigest(),
        "imports": [],
    }
    assert {row["requests"] for row in rows if row["policy"] == "cache_aware"} == {300}


@pytest.mark.slow
def test_train_records_its_windows_and_evaluate_and_compare_refuse_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run of no RL step on the example at train_windows=1 test_windows=1
    train_streams=shared trains on make_rows-0001 of the workload's seed, a test
    window at the example's own counts: agent.json records it under the plugin's
    name, and evaluate and compare refuse it before any run."""
    from hydra import compose, initialize_config_dir

    from agents.algorithms import load_spec
    from experiments import compare
    from experiments.config import register_configs
    from experiments.evaluate import evaluate
    from experiments.train import train

    monkeypatch.chdir(ROOT)
    register_configs()
    plugin = ["workload=plugin", "workload.factory=examples.own_workload:make_rows"]
    counts = ["+workload.params.train_windows=1", "+workload.params.test_windows=1",
              "+workload.params.train_streams=shared"]  # fmt: skip
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        trained = compose("train", [*plugin, *counts, "logger=none", "train.total_timesteps=0",
                                    "train.evaluate=false", "train.progress=false",
                                    f"out_dir={tmp_path / 'run'}"])  # fmt: skip
        agent = tmp_path / "run" / "agent"
        evaluated = compose("evaluate", [*plugin, f"checkpoint=[{agent}]", "logger=none",
                                         "policies=[cache_aware]", "progress=false",
                                         f"out_dir={tmp_path / 'eval'}"])  # fmt: skip
    train(trained)
    spec = load_spec(tmp_path / "run" / "agent")
    assert spec.env_kwargs["workload"] == EXAMPLE
    code = hashlib.sha256((ROOT / "examples" / "own_workload.py").read_bytes()).hexdigest()
    assert spec.registered_windows == [{
        "workload": EXAMPLE,
        "params": {"train_windows": 1, "test_windows": 1, "train_streams": "shared"},
        "seed": 20260721, "train_streams": "shared", "train": ["make_rows-0001"], "val": [],
        "plugin_sha256": code,
    }]  # fmt: skip

    def seen(n: int) -> str:
        return re.escape(
            f"was trained on some of these windows (seed 20260721): the {n} test windows "
            f"evaluated include 1 of its 1 train window (make_rows-0001); trained on {EXAMPLE} "
            "(train_windows=1 test_windows=1 train_streams=shared), here"
        )

    with pytest.raises(ValueError, match=seen(3)):  # (workload.eval_windows=3)
        evaluate(evaluated)
    assert not (tmp_path / "eval").exists()
    with pytest.raises(ValueError, match=seen(5)):  # (windows=5)
        compare.main([*plugin, f"agents={tmp_path / 'run' / 'agent'}", "policies=cache_aware",
                      "charts=false", "progress=false", f"out_dir={tmp_path / 'cmp'}"])  # fmt: skip
    assert not (tmp_path / "cmp").exists()
    # the module edited since (as agent.json saying another sha256 tells): one note,
    # the windows still the agent's own (refused above; run here with allow_seen_windows)
    saved = json.loads((agent / "agent.json").read_text())
    saved["registered_windows"][0]["plugin_sha256"] = "0" * 64
    (agent / "agent.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match=seen(5)):
        compare.main([*plugin, f"agents={agent}", "policies=cache_aware", "charts=false",
                      "progress=false", f"out_dir={tmp_path / 'cmp'}"])  # fmt: skip
    capsys.readouterr()
    with pytest.warns(UserWarning, match="allow_seen_windows=true"):
        compare.main([*plugin, f"agents={agent}", "policies=cache_aware", "charts=false",
                      "progress=false", "windows=1", "allow_seen_windows=true",
                      f"out_dir={tmp_path / 'cmp'}"])  # fmt: skip
    notes = [line for line in capsys.readouterr().out.splitlines() if "sha256" in line]
    assert notes == [
        f"note: ppo_route ({agent}) was trained on {EXAMPLE} with code of sha256 "
        "000000000000; "
        f"{(ROOT / 'examples' / 'own_workload.py').resolve()} is {code[:12]} now: the code "
        "that makes these windows changed since (they are still counted as its own)"
    ]


LAZY_SIBLING = '''
def rows(window, seed, split, trace_id):
    """Its rows from a module beside it, imported as it runs (not as it loads)."""
    import {helper}

    return {helper}.rows(window)
'''
SIBLING = """
def rows(window):
    return [{"arrival_s": 0.0, "input_length": 300, "hash_ids": [window, 1]},
            {"arrival_s": 1.0, "input_length": 300, "hash_ids": [window, 2]}]
"""


def _lazy_module(folder: Path) -> tuple[str, str]:
    """A module of one's own in ``folder`` (not on sys.path) whose function imports a
    module beside it as it runs: (its name, the sibling's name)."""
    stem = f"lazy_{abs(hash(str(folder))) % 10**8}"
    (folder / f"{stem}.py").write_text(LAZY_SIBLING.format(helper=f"{stem}_helper"))
    (folder / f"{stem}_helper.py").write_text(SIBLING)
    return stem, f"{stem}_helper"


def test_loading_and_running_it_leave_sys_path_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The working folder is on sys.path while the plugin's code runs (its import, each
    call: a module beside it imported as the function runs is found) and off it after:
    a file of the working folder does not shadow a module imported later (before, the
    folder stayed first on sys.path, and a colorsys.py of one's own there was what
    `import colorsys` gave for the rest of the process)."""
    import importlib.util

    stem, helper = _lazy_module(tmp_path)
    (tmp_path / "colorsys_of_mine.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    before = list(sys.path)
    name = f"plugin:{stem}:rows"
    load_plugin(name)
    assert sys.path == before
    (window,) = windows(name, "test", limit=1)
    assert [r.input_tokens for r in window.requests] == [300, 300]
    assert sys.path == before
    assert helper in sys.modules  # (imported as the function ran)
    assert importlib.util.find_spec("colorsys_of_mine") is None


@pytest.mark.slow  # (a worker process: some 8 s)
def test_a_subproc_env_s_worker_runs_it_with_its_siblings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """env.vec=subproc's workers (agents.vec_env.WorkerVecEnv, as train makes them)
    load the plugin themselves, with sys.path as this process has it (the working
    folder not on it): the function's module beside it, imported as it runs there,
    is found, and the episode runs (two requests a window)."""
    import gymnasium as gym
    import numpy as np

    from agents.vec_env import WorkerVecEnv

    stem, _ = _lazy_module(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    name = f"plugin:{stem}:rows"
    load_plugin(name)
    assert str(tmp_path) not in sys.path

    def make() -> gym.Env:
        from envs.route import RouteEnv  # (in the worker)

        return RouteEnv(workload=name, n_windows=1)

    vec = WorkerVecEnv([make])
    try:
        vec.reset()
        steps = 0
        done = np.array([False])
        while not done[0]:
            _, _, done, _ = vec.step(np.array([0]))
            steps += 1
        assert steps == 2  # one decision a request
    finally:
        vec.close()


def _sha256sum(folder: Path, names: list[str]) -> str:
    """The sha256 of ``sha256sum``'s lines of the files ``names`` in ``folder``, sorted."""
    lines = "".join(
        f"{hashlib.sha256((folder / n).read_bytes()).hexdigest()}  {n}\n" for n in sorted(names)
    )
    return hashlib.sha256(lines.encode()).hexdigest()


def test_its_sha256_covers_the_modules_of_one_s_own_it_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorded sha256 covers the module's file and every module of one's own it
    imports (at its top or as its function runs; theirs in turn), not the standard
    library, installed packages or btb-gym: the sha256 of their sha256sum lines,
    paths relative to the module's folder (before: the module's file alone, so an
    edited helper gave the same sha256 for other traffic). The same files in
    another folder have the same sha256; a module importing none keeps its file's."""
    from envs.workloads.plugins import code_sha256, own_imports

    tag = abs(hash(str(tmp_path))) % 10**8
    work = tmp_path / "work"
    (work / f"pkg_{tag}").mkdir(parents=True)
    (work / f"gen_{tag}.py").write_text(
        "import json\nimport numpy as np\nfrom envs.workloads.readers.bursted import BLOCK_TOKENS\n"
        f"import helper_{tag}\n\n\n"
        "def rows(window, seed, split, trace_id):\n"
        f"    from pkg_{tag} import helper\n"
        f"    return helper.rows(window, helper_{tag}.TOKENS)\n"
    )  # fmt: skip
    (work / f"helper_{tag}.py").write_text("TOKENS = 300\n")
    (work / f"pkg_{tag}" / "__init__.py").write_text("")
    (work / f"pkg_{tag}" / "helper.py").write_text(
        "from . import deeper\n\n\ndef rows(window, tokens):\n"
        "    return [{'arrival_s': 0.0, 'input_length': tokens, 'hash_ids': [window, 1]}]\n"
    )
    (work / f"pkg_{tag}" / "deeper.py").write_text("import os\n")
    monkeypatch.chdir(work)
    plugin = load_plugin(f"plugin:gen_{tag}:rows")
    names = [f"gen_{tag}.py", f"helper_{tag}.py", *(f"pkg_{tag}/{n}" for n in
             ("__init__.py", "deeper.py", "helper.py"))]  # fmt: skip
    assert plugin.path == str(work / f"gen_{tag}.py")
    assert plugin.imports == tuple(str(work / n) for n in sorted(names[1:]))
    assert plugin.sha256 == _sha256sum(work, names)
    assert plugin.stamp()["imports"] == list(plugin.imports)
    # a helper edited: other code (a module the function imports as it runs, two deep)
    (work / f"pkg_{tag}" / "deeper.py").write_text("import os  # edited\n")
    root = Path(plugin.path)
    imported = own_imports(f"gen_{tag}", root)
    assert imported == [Path(f) for f in plugin.imports]
    assert code_sha256(root, imported) == _sha256sum(work, names) != plugin.sha256
    # the same files elsewhere: the same sha256 (relative paths, not the folder)
    moved = tmp_path / "elsewhere"
    (moved / f"pkg_{tag}").mkdir(parents=True)
    for name in names:
        (moved / name).write_bytes((work / name).read_bytes())
    assert code_sha256(moved / names[0], [moved / n for n in names[1:]]) == code_sha256(
        root, imported
    )
    # a module of its own that imports none of one's own: its file's sha256, as before
    example = load_plugin(EXAMPLE)
    assert example.imports == ()
    code = hashlib.sha256((ROOT / "examples" / "own_workload.py").read_bytes()).hexdigest()
    assert example.sha256 == code


def test_its_sha256_covers_a_module_imported_by_a_name_written_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module imported by a call whose name is written out as a string
    (importlib.import_module("helper"), a relative one with package=__package__,
    __import__("helper")) was not covered: an edit of it left the sha256 as it was.
    It is now; a name made as the code runs (importlib.import_module("ext_" + kind))
    and a data file the code reads are not (the limit docs/workloads.md states)."""
    from envs.workloads.plugins import own_imports

    tag = abs(hash(str(tmp_path))) % 10**8
    work = tmp_path / "work"
    pkg = work / f"lit_{tag}"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "gen.py").write_text(
        "import importlib\n\n\n"
        "def rows(window, seed, split, trace_id, kind='a'):\n"
        f"    tokens = importlib.import_module('helper_{tag}').TOKENS\n"
        "    near = importlib.import_module('.near', package=__package__)\n"
        f"    __import__('built_{tag}')\n"
        f"    importlib.import_module('ext_{tag}_' + kind)\n"
        "    size = int(open('size.txt').read())\n"
        "    return [{'arrival_s': 0.0, 'input_length': tokens + near.MORE + size,\n"
        "             'hash_ids': [window, 1]}]\n"
    )
    for name in (f"helper_{tag}.py", f"built_{tag}.py", f"ext_{tag}_a.py"):
        (work / name).write_text("TOKENS = 300\n")
    (pkg / "near.py").write_text("MORE = 0\n")
    (work / "size.txt").write_text("0\n")
    monkeypatch.chdir(work)
    plugin = load_plugin(f"plugin:lit_{tag}.gen:rows")
    # (its package's __init__.py too, as any import of the package counts it)
    written = [
        f"built_{tag}.py",
        f"helper_{tag}.py",
        f"lit_{tag}/__init__.py",
        f"lit_{tag}/near.py",
    ]
    assert plugin.imports == tuple(str(work / name) for name in written)
    # an edit of one written out changes the sha256; of the computed one, or the data, not
    root = Path(plugin.path or "")
    from envs.workloads.plugins import code_sha256

    def now() -> str:
        return code_sha256(root, own_imports(f"lit_{tag}.gen", root))

    assert now() == plugin.sha256
    (work / f"ext_{tag}_a.py").write_text("TOKENS = 301\n")
    (work / "size.txt").write_text("1\n")
    assert now() == plugin.sha256  # not covered: said in docs/workloads.md
    (pkg / "near.py").write_text("MORE = 1\n")
    assert now() != plugin.sha256


def test_its_sha256_covers_a_name_written_out_by_keyword_or_with_a_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """importlib.import_module(name="helper") was not covered (only a name given by
    position was read), and __import__("near", globals(), locals(), [], 1), a relative
    import of the package's near.py, was taken as the top-level near.py beside the
    package: the sha256 covered another file than the one the code runs."""
    tag = abs(hash(str(tmp_path))) % 10**8
    work = tmp_path / "work"
    pkg = work / f"kw_{tag}"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "gen.py").write_text(
        "import importlib\n\n\n"
        "def rows(window, seed, split, trace_id):\n"
        f"    tokens = importlib.import_module(name='helper_{tag}').TOKENS\n"
        "    near = __import__('near', globals(), locals(), [], 1)\n"
        "    return [{'arrival_s': 0.0, 'input_length': tokens, 'hash_ids': [window, 1]}]\n"
    )
    (work / f"helper_{tag}.py").write_text("TOKENS = 300\n")
    (pkg / "near.py").write_text("MORE = 0\n")
    (work / "near.py").write_text("MORE = 1\n")  # not what the relative import runs
    monkeypatch.chdir(work)
    plugin = load_plugin(f"plugin:kw_{tag}.gen:rows")
    written = [f"helper_{tag}.py", f"kw_{tag}/__init__.py", f"kw_{tag}/near.py"]
    assert plugin.imports == tuple(str(work / name) for name in written)


def test_its_sha256_covers_the_packages_it_is_imported_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The __init__.py of each package of one's own on the module's dotted path runs as
    the module is imported (outer/__init__.py of outer.inner.gen): the sha256 covers
    it, and what it imports (before, neither: an edited outer/__init__.py gave the same
    sha256). One that runs nothing, empty or a docstring alone (inner/__init__.py, as
    examples/__init__.py), is left out: the example's sha256 is its file's, as before."""
    from envs.workloads.plugins import code_sha256, own_imports

    tag = abs(hash(str(tmp_path))) % 10**8
    work = tmp_path / "work"
    inner = work / f"outer_{tag}" / "inner"
    inner.mkdir(parents=True)
    (work / f"outer_{tag}" / "__init__.py").write_text(
        f"import helper_{tag}\n\nSCALE = helper_{tag}.SCALE\n"
    )
    (work / f"helper_{tag}.py").write_text("SCALE = 2\n")
    (inner / "__init__.py").write_text('"""A package of its docstring alone."""\n')
    (inner / "gen.py").write_text(
        "def rows(window, seed, split, trace_id):\n"
        "    return [{'arrival_s': 0.0, 'input_length': 10, 'hash_ids': [window]}]\n"
    )
    monkeypatch.chdir(work)
    plugin = load_plugin(f"plugin:outer_{tag}.inner.gen:rows")
    covered = [work / f"helper_{tag}.py", work / f"outer_{tag}" / "__init__.py"]
    assert plugin.imports == tuple(str(f) for f in covered)
    # sha256sum's lines, paths relative to gen.py's folder, sorted by path
    lines = [
        (f"../../helper_{tag}.py", covered[0]),
        ("../__init__.py", covered[1]),
        ("gen.py", inner / "gen.py"),
    ]
    listing = "".join(
        f"{hashlib.sha256(f.read_bytes()).hexdigest()}  {shown}\n" for shown, f in sorted(lines)
    )
    assert plugin.sha256 == hashlib.sha256(listing.encode()).hexdigest()
    # outer/__init__.py edited: other code
    (work / f"outer_{tag}" / "__init__.py").write_text(
        f"import helper_{tag}\n\nSCALE = 3 * helper_{tag}.SCALE\n"
    )
    root = inner / "gen.py"
    imported = own_imports(f"outer_{tag}.inner.gen", root)
    assert imported == covered and code_sha256(root, imported) != plugin.sha256
    # a package that runs nothing on its path: the module's file alone, as the example's
    (work / f"outer_{tag}" / "__init__.py").write_text("# nothing but a comment\n")
    assert own_imports(f"outer_{tag}.inner.gen", root) == []
    example = load_plugin(EXAMPLE)
    assert example.imports == ()
    code = hashlib.sha256((ROOT / "examples" / "own_workload.py").read_bytes()).hexdigest()
    assert example.sha256 == code


def test_a_module_of_the_same_bytes_with_other_helpers_is_other_traffic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent trained on a.gen:rows evaluated on b.gen:rows, gen.py the same bytes in
    both, each importing its own package's helper: with b's helper other bytes, b's
    windows are other traffic (before, the sha256 of gen.py alone matched and they
    were counted as the agent's own); with c's helper the same bytes as a's, they
    are its own (trained with train_streams=shared, its train window among them)."""
    from agents.algorithms import AgentSpec
    from experiments.trained_on import seen_registered, trained_windows

    tag = abs(hash(str(tmp_path))) % 10**8
    gen = (
        "from . import helper\n\n\ndef rows(window, seed, split, trace_id):\n"
        "    return [{'arrival_s': 0.0, 'input_length': helper.TOKENS, 'hash_ids': [window]}]\n"
    )
    for package, tokens in (("a", 200), ("b", 100), ("c", 200)):
        (tmp_path / f"{package}_{tag}").mkdir()
        (tmp_path / f"{package}_{tag}" / "__init__.py").write_text("")
        (tmp_path / f"{package}_{tag}" / "gen.py").write_text(gen)
        (tmp_path / f"{package}_{tag}" / "helper.py").write_text(f"TOKENS = {tokens}\n")
    monkeypatch.chdir(tmp_path)
    counts = {"train_windows": 1, "test_windows": 1, "train_streams": "shared"}
    record = trained_windows(f"plugin:a_{tag}.gen:rows", counts, 20260721, None, None)
    spec = AgentSpec(algo="ppo", env="route", registered_windows=[record])
    own = (record["train"], 1, record["val"], 5)
    for package, seen in (("b", ([], 1, [], 5)), ("c", own)):
        name = f"plugin:{package}_{tag}.gen:rows"
        assert seen_registered(spec, name, {}, 20260721, "test", None) == seen, name
    # its helper edited since training (as another sha256 in agent.json tells): the note
    # names the module, the module it imports (helper.py) and its package's __init__.py,
    # which it is imported through, all of which the sha256 covers (it called the
    # __init__.py one of "the 2 modules of one's own it imports")
    from types import SimpleNamespace

    from experiments.trained_on import plugin_notes

    edited = AgentSpec(algo="ppo", env="route", registered_windows=[
        {**record, "plugin_sha256": "ab" * 32}
    ])  # fmt: skip
    name = record["workload"]
    folder = tmp_path / f"a_{tag}"
    assert plugin_notes({"a": SimpleNamespace(spec=edited)}, {"a": "/runs/a"}, name) == [
        f"note: a (/runs/a) was trained on {name} with code of sha256 abababababab; "
        f"{folder / 'gen.py'}, the module of one's own it imports and the __init__.py of the "
        "package it is imported through are "
        f"{_sha256sum(folder, ['gen.py', 'helper.py', '__init__.py'])[:12]} now: the code "
        "that makes "
        "these windows changed since (they are still counted as its own)"
    ]


def test_the_note_of_a_module_that_imports_one_of_one_s_own_says_it_in_the_singular(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gen.py importing one helper of its own, edited since training: the note names
    both (the sha256 covers both) in the singular; it said "gen.py with the 1 module
    of one's own it imports are ..." after "its module of sha256", which covered the
    helper too."""
    from types import SimpleNamespace

    from agents.algorithms import AgentSpec
    from experiments.trained_on import plugin_notes, trained_windows

    tag = abs(hash(str(tmp_path))) % 10**8
    (tmp_path / f"gen_{tag}.py").write_text(
        f"import helper_{tag}\n\n\ndef rows(window, seed, split, trace_id):\n"
        f"    return [{{'arrival_s': 0.0, 'input_length': helper_{tag}.TOKENS, "
        "'hash_ids': [window]}]\n"
    )
    (tmp_path / f"helper_{tag}.py").write_text("TOKENS = 300\n")
    monkeypatch.chdir(tmp_path)
    name = f"plugin:gen_{tag}:rows"
    record = trained_windows(name, {"train_windows": 1, "test_windows": 1}, 20260721, None, None)
    edited = AgentSpec(algo="ppo", env="route", registered_windows=[
        {**record, "plugin_sha256": "ab" * 32}
    ])  # fmt: skip
    code = _sha256sum(tmp_path, [f"gen_{tag}.py", f"helper_{tag}.py"])
    assert record["plugin_sha256"] == code
    assert plugin_notes({"a": SimpleNamespace(spec=edited)}, {"a": "/runs/a"}, name) == [
        f"note: a (/runs/a) was trained on {name} with code of sha256 abababababab; "
        f"{tmp_path.resolve() / f'gen_{tag}.py'} and the module of one's own it imports are "
        f"{code[:12]} now: the code that makes these windows changed since (they are still "
        "counted as its own)"
    ]


def test_the_note_names_a_package_s_init_as_what_the_module_is_imported_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pkg.gen, imported through pkg/__init__.py (which runs code, so the sha256 covers
    it): the note said "gen.py and the module of one's own it imports are ...", but gen.py
    imports nothing; it is imported through the package. With a helper gen.py imports
    too, both are named, each for what it is."""
    from types import SimpleNamespace

    from agents.algorithms import AgentSpec
    from experiments.trained_on import plugin_notes, trained_windows

    tag = abs(hash(str(tmp_path))) % 10**8
    package = tmp_path / f"pkg_{tag}"
    package.mkdir()
    (package / "__init__.py").write_text("TOKENS = 300\n")
    (package / "gen.py").write_text(
        "def rows(window, seed, split, trace_id):\n"
        "    return [{'arrival_s': 0.0, 'input_length': 300, 'hash_ids': [window]}]\n"
    )
    monkeypatch.chdir(tmp_path)

    def note(name: str) -> list[str]:
        record = trained_windows(
            name, {"train_windows": 1, "test_windows": 1}, 20260721, None, None
        )
        edited = AgentSpec(algo="ppo", env="route", registered_windows=[
            {**record, "plugin_sha256": "ab" * 32}
        ])  # fmt: skip
        return plugin_notes({"a": SimpleNamespace(spec=edited)}, {"a": "/runs/a"}, name)

    name = f"plugin:pkg_{tag}.gen:rows"
    code = _sha256sum(package, ["__init__.py", "gen.py"])
    gen = package.resolve() / "gen.py"
    assert note(name) == [
        f"note: a (/runs/a) was trained on {name} with code of sha256 abababababab; {gen} and "
        f"the __init__.py of the package it is imported through are {code[:12]} now: the code "
        "that makes these windows changed since (they are still counted as its own)"
    ]
    (tmp_path / f"helper_{tag}.py").write_text("TOKENS = 300\n")
    (package / "gen2.py").write_text(f"import helper_{tag}\n\n" + (package / "gen.py").read_text())
    name = f"plugin:pkg_{tag}.gen2:rows"
    [said] = note(name)
    assert (
        f"; {package.resolve() / 'gen2.py'}, the module of one's own it imports and the "
        "__init__.py of the package it is imported through are "
    ) in said


def test_a_dataset_of_it_is_matched_by_its_code_whatever_its_module_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dataset make_dataset wrote of mine.gen:rows (from mine/'s parent), read back as
    a trace, holds the windows of an agent trained on gen:rows (in mine/): the same
    code (dataset_info.json's generator.plugin.sha256, the agent's plugin_sha256), so
    they are its own (before: none was, the keys holding the module's name); a
    module of other bytes is other traffic (the agents trained with
    train_streams=shared, their train window among the dataset's test windows). An
    agent trained on the dataset's train split (agent.json records the dataset's
    sha256; made with train_streams=shared, its windows of the workload's seed) is
    refused gen:rows's same windows too."""
    from agents.algorithms import AgentSpec
    from experiments import make_dataset
    from experiments.trained_on import seen_in_dataset, seen_registered, trained_windows

    tag = abs(hash(str(tmp_path))) % 10**8
    mine = tmp_path / f"mine_{tag}"
    mine.mkdir()
    (mine / "__init__.py").write_text("")
    code = (
        "def rows(window, seed, split, trace_id, gap=1.0):\n"
        "    return [{'arrival_s': gap * window, 'input_length': 1, 'hash_ids': [window]}]\n"
    )
    (mine / f"gen_{tag}.py").write_text(code)
    (mine / f"other_{tag}.py").write_text(code + "# the same function, other bytes\n")
    monkeypatch.syspath_prepend(str(mine))
    monkeypatch.chdir(tmp_path)
    made = make_dataset.main([
        "workload=plugin", f"workload.factory=mine_{tag}.gen_{tag}:rows",
        "params=train_streams=shared", f"out_dir={tmp_path / 'd'}", "progress=false",
    ])  # fmt: skip
    sha256 = hashlib.sha256((mine / f"gen_{tag}.py").read_bytes()).hexdigest()
    assert made["generator"]["plugin"]["sha256"] == sha256
    counts = {"train_windows": 1, "test_windows": 1, "train_streams": "shared"}
    record = trained_windows(f"plugin:gen_{tag}:rows", counts, 20260721, None, None)
    assert record["plugin_sha256"] == sha256
    other = trained_windows(f"plugin:other_{tag}:rows", counts, 20260721, None, None)
    test_split = {"path": str(tmp_path / "d" / "test.jsonl")}
    for trained, seen in ((record, (record["train"], 1, record["val"], 5)),
                          (other, ([], 1, [], 5))):  # fmt: skip
        spec = AgentSpec(algo="ppo", env="route", registered_windows=[trained])
        assert seen_in_dataset(spec, test_split, "test", None) == seen, trained["workload"]
    # as evaluate and compare refuse it (workload=trace on the dataset's test split)
    from types import SimpleNamespace

    from experiments.trained_on import check_seen_windows

    agents = {"a": SimpleNamespace(spec=AgentSpec(algo="ppo", env="route",
                                                  registered_windows=[record]))}  # fmt: skip
    with pytest.raises(ValueError, match=re.escape(
        "agent a (/runs/a) was trained on some of these windows (seed 20260721): the 15 test "
        f"windows evaluated include 1 of its 1 train window ({record['train'][0]})"
    )):  # fmt: skip
        check_seen_windows(agents, {"a": "/runs/a"}, "trace", test_split, "test", None, False)
    # trained on the dataset's train split: the registered gen:rows's same windows
    on_split = trained_windows("trace", {"path": str(tmp_path / "d" / "train.jsonl")}, 0, None, 0)
    assert on_split["plugin_sha256"] == sha256 and len(on_split["train"]) == 5
    spec = AgentSpec(algo="ppo", env="route", registered_windows=[on_split])
    every = {"train_windows": 0, "test_windows": 25}  # (all 25 indices test windows)
    assert seen_registered(spec, f"plugin:gen_{tag}:rows", every, 20260721, "test", None) == (
        on_split["train"],
        5,
        [],
        0,
    )


def test_a_copy_of_its_dataset_is_checked_where_its_module_does_not_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent trained on gen:rows, evaluated on a copy of the dataset make_dataset
    wrote of it from a folder where gen does not import (its module gone here): its
    train window is refused by the dataset's recorded configurations, the code being
    the same (the same sha256); before, its record was passed over (its workload could
    not be configured) and the run went on as held-out, with no word. Where the
    dataset's configurations cannot stand for the record's (trained at a parameter's
    default the dataset gave another value), one line says so; trained at another
    value, it is other traffic, as where the module imports."""
    import shutil
    from types import SimpleNamespace

    from agents.algorithms import AgentSpec
    from envs.sim.errors import SettingWarning
    from envs.workloads import plugins, registry
    from experiments import make_dataset
    from experiments.trained_on import check_seen_windows, trained_windows

    tag = abs(hash(str(tmp_path))) % 10**8
    work = tmp_path / "work"
    work.mkdir()
    (work / f"gen_{tag}.py").write_text(
        "def rows(window, seed, split, trace_id, gap=1.0):\n"
        "    return [{'arrival_s': gap * window, 'input_length': 1, 'hash_ids': [window]}]\n"
    )
    monkeypatch.chdir(work)
    name = f"plugin:gen_{tag}:rows"
    counts = ["train_windows=1", "test_windows=1"]
    make_dataset.main([
        "workload=plugin", f"workload.factory=gen_{tag}:rows", *counts, "params=gap=2.0",
        f"out_dir={tmp_path / 'd'}", "progress=false",
    ])  # fmt: skip
    windows = {"train_windows": 1, "test_windows": 1}
    records = {
        gap: trained_windows(name, {**windows, **({} if gap is None else {"gap": gap})},
                             20260721, None, None)
        for gap in (2.0, None, 3.0)
    }  # fmt: skip
    # a copy of the dataset elsewhere, evaluated from a folder where gen does not import
    copy = tmp_path / "copy"
    copy.mkdir()
    for file in ("train.jsonl", "dataset_info.json"):
        shutil.copy(tmp_path / "d" / file, copy / file)
    (work / f"gen_{tag}.py").unlink()
    monkeypatch.delitem(sys.modules, f"gen_{tag}")
    monkeypatch.delitem(plugins._LOADED, name)  # (this process's, as another's: gone)
    monkeypatch.delitem(registry._PLUGIN_SCENARIOS, name)
    (tmp_path / "else").mkdir()
    monkeypatch.chdir(tmp_path / "else")
    with pytest.raises(ConfigError, match=r"module 'gen_\d+' cannot be imported"):
        configure(name)
    params = {"path": str(copy / "train.jsonl"), "file_splits": False, "test_fraction": 1.0}

    def check(gap: float | None) -> list[str]:
        spec = AgentSpec(algo="ppo", env="route", registered_windows=[records[gap]])
        agents = {"a": SimpleNamespace(spec=spec)}
        return check_seen_windows(agents, {"a": "/runs/a"}, "trace", params, "test", None, False)

    with pytest.raises(ValueError, match=re.escape(
        "agent a (/runs/a) was trained on some of these windows (seed 20260721): the 1 test "
        f"window evaluated is 1 of its 1 train window ({records[2.0]['train'][0]})"
    )):  # fmt: skip
        check(2.0)
    with pytest.warns(SettingWarning) as said:
        assert check(None) == []
    assert [str(w.message) for w in said] == [
        f"agent a (/runs/a) was trained on {name}, whose module does not import here; it was "
        "trained with gap at its default, and the dataset was made at gap=2.0 and does not "
        f"record it: whether {copy / 'train.jsonl'} holds its own windows cannot be told here, "
        "and it runs as held-out (evaluate it where that module imports to check, as the "
        "windows of the code it trained on are known then)"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check(3.0) == []  # another gap: other windows, as where it imports


def test_a_dataset_s_readme_says_what_its_rows_hold(
    own: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """make_dataset's README of a workload of one's own describes the function's rows:
    its hashes as returned (not "24-hex hashes"), its own sources and job kinds (not
    ART-like traffic), the sha256 of its code; with parameters changed, its docstring
    (not "the figures above") may describe other rows, and a function without one is
    told nothing of it."""
    info = _dataset(tmp_path / "d", "train_windows=1", "test_windows=1", "params=bursts=2")
    card = (tmp_path / "d" / "README.md").read_text()
    for false in ("24-hex", "figures above", "ART", "`art`", "`decoy`"):
        assert false not in card, false
    assert info["description"].endswith(
        "Its parameters are not the function's defaults (bursts=2): its docstring above "
        "may describe other rows than this dataset's."
    )
    assert (
        "- `hash_ids`: the prompt's block hashes as the function returned them, one per "
        "256-token block (strings or integers; per-block, not chained: btb-gym's readers "
        "chain them as they read); prompts share a block exactly when their hashes agree "
        "up to it"
    ) in card
    assert "byte-identical files with the same code of the function" in card
    assert "Parameters changed from the function's defaults: `bursts=2`." in card
    assert card.endswith(
        "The rows are those `examples.own_workload:make_rows` returned, checked as a trace "
        "file's rows are and put in arrival order: what they hold is the function's, "
        "synthetic or not.\n"
    )
    from experiments import make_dataset

    plain = make_dataset.main([
        "workload=plugin", f"workload.factory={own}:flag_pair", "train_windows=1",
        "test_windows=1", "params=sizes=3/4.5", f"out_dir={tmp_path / 'plain'}",
        "progress=false",
    ])  # fmt: skip
    assert plain["description"] == f"Rows from {own}:flag_pair, a generator of one's own." + (
        " This dataset has the windows given on its command line (the tables below), not "
        "the workload's own counts."
    )


def test_relative_path_falls_back_to_the_file_on_another_drive() -> None:
    """code_sha256 and shown_path name a file relative to a folder through
    relative_path; on Windows, a helper on another drive than the plugin's has no
    relative path (ntpath.relpath raises ValueError), and the file is named whole
    rather than the run failing on an uncaught ValueError."""
    import ntpath

    from envs.workloads.plugins import relative_path

    with pytest.raises(ValueError):
        ntpath.relpath("D:\\lib\\helper.py", "C:\\work")
    assert relative_path("D:\\lib\\helper.py", "C:\\work", ntpath) == "D:\\lib\\helper.py"
    assert relative_path("C:\\lib\\helper.py", "C:\\work", ntpath) == "..\\lib\\helper.py"
    assert relative_path("/a/b/helper.py", "/a") == os.path.join("b", "helper.py")
