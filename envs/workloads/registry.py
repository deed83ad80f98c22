"""Named workloads: each yields train, validation and test windows, deterministically
from a seed.

A workload (scenario) is made of one or more *families* of windows; a family has
a generator, its configuration and how many windows go to train, to test and to
validation. Windows are split whole: a family's first ``train_windows +
test_windows`` window indices are shuffled by the seed and the first
``train_windows`` of them go to train, the rest to test (the published layout).
The ``val_windows`` validation windows are held out after them: window indices
``train_windows + test_windows`` onwards of the same generator. Every window
index draws from its own random stream, so validation never shares a window
with train or test, and adding it changed neither. A train window draws from a
seed of its own as well (``train_streams``, :data:`TRAIN_STREAMS`), so no train
window shares a prompt with a test or validation window of any family, the
sibling burst families included. Model choices (checkpoints,
hyperparameters, tuned thresholds) use train and validation windows; test
windows are for final tables only. A family keeps its name, trace ids and split
across workloads, so the synthetic half of ``bursted_art`` is exactly
``bursted_synthetic`` and its ART-like half is ``art_like``.

Use :func:`windows` for ready-to-simulate :class:`Workload` objects (one at a
time), :func:`window_rows` for rows in the Bursted-ART layout, :func:`plan` for
the manifest and :func:`list_workloads` for the names.
"""

from __future__ import annotations

import dataclasses
import warnings
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from envs.sim.checks import check_int, checked_number
from envs.sim.errors import ConfigError, NamedFields, SettingWarning, caller_stacklevel, echoed
from envs.sim.request import Workload
from envs.workloads.art_like import ArtLikeConfig, art_like_window_rows
from envs.workloads.bursted import (
    PUBLISHED_SEED,
    BurstedSyntheticConfig,
    rows_to_workload,
    synthetic_window_rows,
)
from envs.workloads.conversation import ConversationConfig, conversation_rows
from envs.workloads.plugins import (
    NO_FACTORY,
    PLUGIN_WORKLOAD,
    is_plugin,
    load_plugin,
    plugin_rows,
    raised_at,
)
from envs.workloads.scenarios import (
    AgentFanoutConfig,
    MixedConfig,
    MultiTenantConfig,
    RisingLoadConfig,
    agent_fanout_rows,
    mixed_rows,
    multi_tenant_rows,
    rising_load_rows,
)
from envs.workloads.stats import PRIVATE_KEY_EFFECT, private_key_ends, private_key_note
from envs.workloads.trace_file import (
    TRACE_WORKLOAD,
    no_windows_error,
    trace_options,
    trace_windows,
)

DEFAULT_WORKLOAD = "bursted_synthetic"
"""What a run (an env, ``compare``, ``train``, ...) simulates unless told otherwise."""
PUBLISHED_WORKLOAD = "bursted_art"
"""The published dataset's composition: ``make_dataset``'s default, listed first."""
SPLITS = ("train", "val", "test", "all")
"""``all`` is the published layout, train and test (what ``make_dataset`` writes);
``val`` is asked for by name."""
WINDOW_COUNTS = ("train_windows", "test_windows", "val_windows")
"""A family's window counts (:func:`configure`): the seed shuffles the first
train_windows + test_windows indices between train and test, so other counts split
other windows to test; the val_windows after them are never shuffled."""
SPLIT_PARAMETERS = (*WINDOW_COUNTS, "train_streams")
"""Workload parameters that decide a family's splits and how they are drawn, not
its generator's configuration (:func:`configure` takes them apart)."""
MAX_WINDOWS = 100_000
"""The most windows of a split a family may be asked for (``train_windows``, ...)."""
_SPLIT_STREAM = 0x5B17
_TRAIN_STREAM = 0x7EA1
TRAIN_STREAMS = ("own", "shared")
"""How a family's train windows draw their random streams (``train_streams``, a
workload parameter). ``own`` (the default): train window i is window i of a seed of
its own, derived from the workload's (:func:`stream_seed`), so no train window shares
a stream, and so a prompt, with a test or validation window of any family: window i
of ``synthetic``, ``synthetic1s`` and ``mixed`` sends the same bursts, and their
splits are each their own. ``shared``: every window i draws from the workload's seed
(the layout before 2026-12-06, which the zoo's agents were trained and the shipped
btb_tuned thresholds tuned on; their recipes say so)."""

RowMaker = Callable[[Any, int, int, str, str], list[dict[str, Any]]]
"""(config, window index, seed, split, trace id) -> rows in arrival order."""


@dataclass(frozen=True)
class Family:
    """Windows of one kind within a workload."""

    name: str
    """Family name; also the trace id prefix (``<name>-0007``)."""
    make_rows: RowMaker
    config: Any
    train_windows: int = 5
    test_windows: int = 15
    val_windows: int = 5
    train_streams: str = "own"
    """:data:`TRAIN_STREAMS`."""

    @property
    def windows(self) -> int:
        """Train and test windows: the indices the seed shuffles between them."""
        return self.train_windows + self.test_windows


@dataclass(frozen=True)
class Scenario:
    """A named workload: a description and its families."""

    name: str
    description: str
    families: tuple[Family, ...]
    block_tokens: int = 256


@dataclass(frozen=True)
class WindowSpec:
    """One window of a workload: which family, which index, which split."""

    workload: str
    family: str
    index: int
    split: str
    trace_id: str


def _synthetic(config: Any, window: int, seed: int, split: str, trace_id: str) -> list[dict]:
    return synthetic_window_rows(config, window, seed=seed, split=split, trace_id=trace_id)


def _art(config: Any, window: int, seed: int, split: str, trace_id: str) -> list[dict]:
    return art_like_window_rows(config, window, seed, split=split, trace_id=trace_id)


_SYNTHETIC = Family("synthetic", _synthetic, BurstedSyntheticConfig())
_SYNTHETIC_1S = Family("synthetic1s", _synthetic, BurstedSyntheticConfig(burst_window_s=1.0))
_ART = Family("art", _art, ArtLikeConfig())
_RISING = Family("rising", rising_load_rows, RisingLoadConfig())
_MIXED = Family("mixed", mixed_rows, MixedConfig())

_SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "bursted_art",
            "The published Bursted-ART composition: 20 ART-like windows of 1,000 rows and "
            "20 synthetic burst windows of 4,120 rows; 10 train (5 + 5) / 30 test (15 + 15).",
            (_ART, _SYNTHETIC),
        ),
        Scenario(
            "bursted_synthetic",
            "The synthetic half of Bursted-ART: 8 bursts of 500 requests over 60 s sharing a "
            "65,536-token prefix, plus 120 decoys; 5 train / 15 test windows.",
            (_SYNTHETIC,),
        ),
        Scenario(
            "bursted_synthetic_1s",
            "The hard variant: each burst's 500 requests arrive within 1 s.",
            (_SYNTHETIC_1S,),
        ),
        Scenario(
            "art_like",
            "ART-like background traffic only (chat sessions, surges, spikes, fan-out "
            "jobs): windows of 1,000 rows.",
            (_ART,),
        ),
        Scenario(
            "rising_load",
            "One hot 65,536-token prefix whose rate ramps from 0.1 to 8 requests/s over "
            "10 minutes, over ART-like background traffic.",
            (_RISING,),
        ),
        Scenario(
            "decoy_heavy",
            "Bursted-ART bursts among 600 decoy prefixes that each arrive twice within "
            "0.5 s and never again (enough to trigger a 2-in-1-s detector).",
            (
                Family(
                    "decoy",
                    _synthetic,
                    BurstedSyntheticConfig(n_decoys=600, decoy_requests=2, decoy_spread_s=0.5),
                ),
            ),
        ),
        Scenario(
            "multi_tenant",
            "Bursted-ART bursts sent by 4 tenants with identical prompts; tenants never "
            "share KV (their block ids are chained under the tenant).",
            (Family("tenant", multi_tenant_rows, MultiTenantConfig()),),
        ),
        Scenario(
            "agent_fanout",
            "Agent trees: a long parent context fans out to 4-32 sub-agents that extend it "
            "turn by turn, then the parent gathers the results; over background traffic.",
            (Family("agent", agent_fanout_rows, AgentFanoutConfig()),),
        ),
        Scenario(
            "mixed",
            "A synthetic burst window and ART-like background traffic in one window.",
            (_MIXED,),
        ),
        Scenario(
            "burst_families",
            "The windows of bursted_synthetic, bursted_synthetic_1s, rising_load and mixed "
            "in one pool, interleaved (the same windows as those workloads': for one agent "
            "trained across burst regimes); 20 train / 60 test / 20 validation windows.",
            (_SYNTHETIC, _SYNTHETIC_1S, _RISING, _MIXED),
        ),
        Scenario(
            "conversation_like",
            "Multi-turn chat sessions after the Mooncake conversation trace: about 12,000 "
            "requests an hour of ~12,000-token prompts and ~340-token outputs, each turn "
            "extending the previous prompt and answer behind a shared system-prompt head; "
            "512-token blocks, one-hour windows.",
            (Family("conversation", conversation_rows, ConversationConfig()),),
            block_tokens=512,
        ),
    )
}


def list_workloads() -> list[str]:
    """Names of the registered workloads, the published one first."""
    return [PUBLISHED_WORKLOAD, *(name for name in _SCENARIOS if name != PUBLISHED_WORKLOAD)]


def describe(name: str) -> Scenario:
    """The registered scenario called ``name``, or a plugin's (``plugin:MODULE:FUNCTION``,
    :mod:`envs.workloads.plugins`: one family, its function's)."""
    if is_plugin(name):
        return _plugin_scenario(name)
    try:
        return _SCENARIOS[name]
    except KeyError:
        if name == PLUGIN_WORKLOAD:
            raise ValueError(f"{NO_FACTORY}, or the name plugin:MODULE:FUNCTION") from None
        known = ", ".join(list_workloads())
        raise ValueError(f"unknown workload {echoed(name)} (known: {known})") from None


_PLUGIN_SCENARIOS: dict[str, Scenario] = {}


def _plugin_scenario(name: str) -> Scenario:
    """The scenario of the plugin ``name``: one family of its function's windows, at
    the registered families' window counts, hashed at its ``block_tokens`` (256 unless
    it takes that parameter)."""
    if name not in _PLUGIN_SCENARIOS:
        plugin = load_plugin(name)
        family = Family(plugin.family, plugin_rows, plugin.config)
        block_tokens = getattr(plugin.config, "block_tokens", Scenario.block_tokens)
        _PLUGIN_SCENARIOS[name] = Scenario(name, plugin.description, (family,), block_tokens)
    return _PLUGIN_SCENARIOS[name]


def configure(
    name: str,
    train_windows: int | None = None,
    test_windows: int | None = None,
    val_windows: int | None = None,
    **params: Any,
) -> Scenario:
    """The scenario with window counts and generator parameters overridden.

    ``train_windows``/``test_windows``/``val_windows`` apply to every family, and so
    does ``train_streams`` (:data:`TRAIN_STREAMS`). Each other parameter is set
    on every family whose configuration has a field of that name; a parameter no
    family has is an error. Values may be strings (from a command line): they are
    converted to the field's type, with ``low/high`` for a pair.
    """
    scenario = describe(name)
    params = dict(params)
    train_streams = params.pop("train_streams", None)
    if train_streams is not None and train_streams not in TRAIN_STREAMS:
        raise ConfigError(
            f"workload {name!r}: {{train_streams}} must be one of {', '.join(TRAIN_STREAMS)}, "
            f"got {echoed(train_streams)}",
            ("train_streams",),
        )
    counts = {
        "train_windows": train_windows,
        "test_windows": test_windows,
        "val_windows": val_windows,
    }
    for count_name, count in counts.items():
        if count is not None:  # a ceiling: the plan draws a permutation of each count
            checked_number(f"workload {name!r}: {count_name}", count, 0, MAX_WINDOWS, integer=True)
    used: set[str] = set()
    families = []
    for family in scenario.families:
        field_names = {f.name for f in dataclasses.fields(family.config) if f.init}
        changes = {
            key: _convert(name, family.config, key, value)
            for key, value in params.items()
            if key in field_names
        }
        used.update(changes)
        families.append(
            dataclasses.replace(
                family,
                config=_with_changes(name, family.config, changes),
                train_windows=family.train_windows if train_windows is None else train_windows,
                test_windows=family.test_windows if test_windows is None else test_windows,
                val_windows=family.val_windows if val_windows is None else val_windows,
                train_streams=family.train_streams if train_streams is None else train_streams,
            )
        )
    unknown = sorted(set(params) - used)
    if unknown:
        valid = sorted(
            {f.name for fam in scenario.families for f in dataclasses.fields(fam.config) if f.init}
        )
        named = ", ".join(f"{{{key}}}" for key in unknown)
        raise ConfigError(
            f"workload {name!r}: unknown parameter(s) {named} (known: {', '.join(valid)})",
            tuple(unknown),
        )
    # The windows' hashes are made at the families' block size, so the workload
    # (and what the simulator multiplies hit blocks by) must use the same one.
    sizes = {getattr(f.config, "block_tokens", scenario.block_tokens) for f in families}
    if len(sizes) != 1:
        raise ValueError(
            f"workload {name!r}: its families hash at different block sizes {sorted(sizes)}"
        )
    return dataclasses.replace(scenario, families=tuple(families), block_tokens=sizes.pop())


def _with_changes(workload: str, config: Any, changes: Mapping[str, Any]) -> Any:
    """``config`` with the parameters ``changes`` set, as its checks accept them; a
    check's refusal names the workload too (``workload 'art_like':
    ArtLikeConfig.mean_rate_per_s must be >= 0, got -5``), the field still as data."""
    if not changes:
        return config
    try:
        return dataclasses.replace(config, **changes)
    except ConfigError as error:
        raise ConfigError(
            f"workload {workload!r}: {error.template}", error.fields, error.owner
        ) from None
    except ValueError as error:  # (a check of a user's own config, without the field as data)
        raise ValueError(f"workload {workload!r}: {error}") from None


def _convert(workload: str, config: Any, key: str, value: Any) -> Any:
    current = getattr(config, key)
    if isinstance(current, tuple) and isinstance(value, (list, tuple)):
        return tuple(value)  # pairs from YAML/Hydra arrive as lists
    if isinstance(current, tuple) and not isinstance(value, str):
        raise ConfigError(
            f"workload {workload!r}: parameter {{{key}}}={echoed(value)} is not a (low, high) pair "
            f"(give [low, high] or low/high)",
            (key,),
        )
    if not isinstance(value, str):
        return value
    try:
        if isinstance(current, tuple):  # each part read as the default's item is
            parts = [p for p in value.split("/") if p]
            return tuple(_from_text(c, p) for c, p in zip(current, parts, strict=True))
        return _from_text(current, value)
    except ValueError:
        raise ConfigError(
            f"workload {workload!r}: parameter {{{key}}}={echoed(value)} is not a valid "
            f"{type(current).__name__}",
            (key,),
        ) from None
    return value


def _from_text(current: Any, text: str) -> Any:
    """A command line's ``text`` read as the type of ``current`` (a parameter's value,
    or an item of a tuple one); a ValueError when it is not one."""
    if isinstance(current, bool):  # strictly: a misspelling is no "false"
        word = text.strip().lower()
        if word in {"1", "true", "yes", "on"} or word in {"0", "false", "no", "off"}:
            return word in {"1", "true", "yes", "on"}
        raise ValueError(text)
    if isinstance(current, int):
        return int(text)
    if isinstance(current, float):
        return float(text)
    return text


def plan(scenario: Scenario | str, seed: int = PUBLISHED_SEED) -> list[WindowSpec]:
    """Every window of a workload with its split, families interleaved round-robin
    (each family's validation windows, the highest indices, last)."""
    scenario = describe(scenario) if isinstance(scenario, str) else scenario
    per_family: list[list[WindowSpec]] = []
    for family in scenario.families:
        order = np.random.default_rng(
            [seed, _SPLIT_STREAM, zlib.crc32(family.name.encode())]
        ).permutation(family.windows)
        train = set(int(i) for i in order[: family.train_windows])
        per_family.append(
            [
                WindowSpec(
                    workload=scenario.name,
                    family=family.name,
                    index=i,
                    split="train" if i in train else "test",
                    trace_id=f"{family.name}-{i:04d}",
                )
                for i in range(family.windows)
            ]
            + [
                WindowSpec(scenario.name, family.name, i, "val", f"{family.name}-{i:04d}")
                for i in range(family.windows, family.windows + family.val_windows)
            ]
        )
    out: list[WindowSpec] = []
    for i in range(max((len(specs) for specs in per_family), default=0)):
        out.extend(specs[i] for specs in per_family if i < len(specs))
    return out


def stream_seed(seed: int, split: str, train_streams: str) -> int:
    """The seed a window of ``split`` is drawn from at the workload seed ``seed``, its
    family's train windows drawing as ``train_streams`` says (:data:`TRAIN_STREAMS`):
    a train window's own, else ``seed``."""
    if split != "train" or train_streams == "shared":
        return seed
    return int(np.random.SeedSequence([seed, _TRAIN_STREAM]).generate_state(1)[0])


def _family(scenario: Scenario, name: str) -> Family:
    return next(f for f in scenario.families if f.name == name)


def window_rows(
    name: str,
    split: str = "test",
    seed: int = PUBLISHED_SEED,
    limit: int | None = None,
    train_windows: int | None = None,
    test_windows: int | None = None,
    val_windows: int | None = None,
    **params: Any,
) -> Iterator[tuple[WindowSpec, list[dict[str, Any]]]]:
    """Each window of ``split`` ("train", "val", "test" or "all": train and test) as
    rows, one window at a time."""
    _check_draw(split, limit, seed)
    scenario = configure(name, train_windows, test_windows, val_windows, **params)
    for spec, _, _, rows in _drawn_rows(scenario, name, split, seed, limit, params):
        yield spec, rows


def _check_draw(split: str, limit: int | None, seed: int) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {echoed(split)}")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {echoed(limit)}")
    check_int("seed", seed, 0)  # a numpy seed


def _drawn_rows(
    scenario: Scenario, name: str, split: str, seed: int, limit: int | None, params: Any
) -> Iterator[tuple[WindowSpec, Family, int, list[dict[str, Any]]]]:
    """:func:`window_rows` of a configured ``scenario`` (its arguments checked by
    :func:`_check_draw`), each window with its family and the seed it was drawn from
    (:func:`stream_seed`)."""
    wanted = ("train", "test") if split == "all" else (split,)
    specs = [s for s in plan(scenario, seed) if s.split in wanted]
    for spec in specs[:limit]:
        family = _family(scenario, spec.family)
        try:
            drawn = stream_seed(seed, spec.split, family.train_streams)
            rows = family.make_rows(family.config, spec.index, drawn, spec.split, spec.trace_id)
        except ValueError as error:
            if isinstance(error, NamedFields):  # a check that names its field already
                raise
            where = _window_named(name, spec, seed, family.config, params)
            fields = tuple(key for key in params if hasattr(family.config, key))
            raise _value_error(error, where, fields, _generator_name(family)) from error
        except Exception as error:
            if hasattr(error, "add_note"):  # (Python 3.11 on)
                where = _window_named(name, spec, seed, family.config, params, as_data=False)
                error.add_note(f"while generating {where}")
            raise
        if drawn != seed and family.make_rows is plugin_rows:
            _warn_seed_ignored(name, family, spec, seed, drawn, rows)
        yield spec, family, drawn, rows


_SEEDS_CHECKED: set[Any] = set()  # plugin configurations already looked at


def _warn_seed_ignored(
    name: str, family: Family, spec: WindowSpec, seed: int, drawn: int, rows: list[dict]
) -> None:
    """Warn, once per plugin configuration in a process, when a plugin's first train
    window of its own stream (``train_streams=own``, drawn from ``drawn``) is the
    same rows as at the workload's ``seed``: its function ignores its seed, so its
    train windows are the same under ``own`` and ``shared``, and ``workload.seed``
    changes none of its windows."""
    if family.config in _SEEDS_CHECKED:
        return
    _SEEDS_CHECKED.add(family.config)
    at_seed = family.make_rows(family.config, spec.index, seed, spec.split, spec.trace_id)
    if at_seed == rows:
        warnings.warn(
            SettingWarning(
                f"workload {name} made the same rows for train window {spec.trace_id!r} at "
                f"seed {drawn} (train_streams=own) as at the workload's seed {seed}: its "
                "function seems to ignore its seed, so train_streams "
                "and workload.seed change none of its windows (draw from "
                "np.random.default_rng([seed, window]) if they should)"
            ),
            stacklevel=caller_stacklevel(),
        )


def _generator_name(family: Family) -> str:
    """A family's generator as an error names it: a plugin's ``MODULE:FUNCTION``, else
    its function's name (``hotset_rows``)."""
    if family.make_rows is plugin_rows:
        return str(family.config.factory)
    return str(getattr(family.make_rows, "__qualname__", repr(family.make_rows)))


def _window_named(
    workload: str,
    spec: WindowSpec,
    seed: int,
    config: Any,
    params: Mapping[str, Any],
    as_data: bool = True,
) -> str:
    """One window of a workload as an error names it: the workload, the window, the
    seed and the parameters given that its family takes, as its config holds them,
    each written ``{name}`` if ``as_data`` (a field as data, so a command names it as
    typed: ``workload.params.rate_per_s=-5``), else by its name."""
    given = ", ".join(
        f"{'{' + key + '}' if as_data else key}={getattr(config, key)!r}"
        for key in params
        if hasattr(config, key)
    )
    given = given or "the workload's own parameters"
    return f"workload {workload!r}: {spec.split} window {spec.trace_id!r} (seed {seed}, {given})"


def _value_error(
    error: ValueError, where: str, fields: tuple[str, ...], origin: str
) -> ConfigError:
    """A generator's ValueError on one window (``where``: :func:`_window_named`) as
    one line. A ValueError is taken for a value the generator cannot use (numpy's
    ``lam < 0`` for a negative rate), which a command prints in one line and exits 2:
    so the line names the generator's own line it came from, as no traceback is
    shown. Any other exception is taken for a bug in the generator and keeps its
    traceback (:func:`window_rows` adds ``where`` to it as a note). ``origin``: the
    generator as the line names it (:func:`_generator_name`); the error's own text on
    one line, as a plugin's import error's is (a user's message may span several)."""
    said = " ".join(str(error).split())
    return ConfigError(
        f"{where}: {origin} failed{raised_at(error)}: {type(error).__name__}: {said}", fields
    )


def windows(
    name: str = DEFAULT_WORKLOAD,
    split: str = "test",
    seed: int = PUBLISHED_SEED,
    limit: int | None = None,
    train_windows: int | None = None,
    test_windows: int | None = None,
    val_windows: int | None = None,
    **params: Any,
) -> Iterator[Workload]:
    """Ready-to-simulate windows of a workload, generated one at a time.

    Each window is its own :class:`Workload` with its own block-id space, named
    ``<workload>/<trace_id>``; ``meta`` holds the workload, family, window index,
    split, trace id, seed and the generator's configuration.

    ``name="trace"`` reads a file instead: ``params`` are the fields of
    :class:`~envs.workloads.trace_file.TraceOptions` (``path=FILE``, ...), ``split``
    may also be "val", and ``seed`` is not used.

    A split given no windows (``val_windows=0``, ``limit=0``) yields none; the
    commands and the envs refuse such a split, naming what leaves it empty. A
    trace's split that its file leaves without windows (a file too short for a
    ``train`` window at ``test_fraction=0.25``) raises the ``ValueError`` the envs
    raise, ``workload 'trace' has no 'train' windows (...)``, saying why.
    """
    if name == TRACE_WORKLOAD:
        if train_windows is not None or test_windows is not None or val_windows is not None:
            raise ValueError(
                f"workload {TRACE_WORKLOAD!r}: its windows are split by test_fraction and "
                "val_fraction, not by train_windows / test_windows / val_windows"
            )
        read = trace_windows(trace_options(params), split, limit)
        first = next(read, None)
        if first is None and limit != 0:  # (as envs.windows.window_pool says it)
            raise no_windows_error(name, split, params)
        if first is not None:
            yield first
            yield from read
        return
    scenario = configure(name, train_windows, test_windows, val_windows, **params)
    _check_draw(split, limit, seed)
    for spec, family, drawn, rows in _drawn_rows(scenario, name, split, seed, limit, params):
        meta = {**asdict(spec), "seed": seed, "config": config_dict(family.config)}
        if drawn != seed:  # (a train window of its own stream)
            meta["stream_seed"] = drawn
        window = rows_to_workload(
            rows, scenario.block_tokens, name=f"{spec.workload}/{spec.trace_id}", meta=meta
        )
        if params:
            own = {
                "split": split, "seed": seed, "train_windows": train_windows,
                "test_windows": test_windows, "val_windows": val_windows,
            }  # fmt: skip
            _warn_private_key_ends(name, params, window, own)
        yield window


_KEYS_CHECKED: set[str] = set()  # generators with changed params already looked at


def _warn_private_key_ends(
    name: str, params: Mapping[str, Any], window: Workload, own: Mapping[str, Any]
) -> None:
    """Warn, once per workload and params in a process, when the first window of a
    generator whose params were changed (``+workload.params.block_tokens=64``) has
    many more requests whose prefix key is their own
    (:func:`~envs.workloads.stats.private_key_note`) than the same window at the
    generator's own parameters (``own``: the rest of the call): what the change
    did, as trace files are warned about."""
    given = ", ".join(f"{key}={value}" for key, value in sorted(params.items()))
    if f"{name}: {given}" in _KEYS_CHECKED:
        return
    _KEYS_CHECKED.add(f"{name}: {given}")
    private, total = private_key_ends(window.requests), len(window.requests)
    if private_key_note(private, total, window.block_tokens) is None:
        return  # (not even against none: no need to make the other window)
    default = next(windows(name, limit=1, **own))
    share = private_key_ends(default.requests) / max(1, len(default.requests))
    note = private_key_note(private, total, window.block_tokens, above=share)
    if note is not None:
        warnings.warn(
            SettingWarning(
                f"workload {name} with {given}: in window {window.name}, {note}; at the "
                f"workload's own parameters {share:.0%} of that window's requests. "
                f"{PRIVATE_KEY_EFFECT}"
            ),
            stacklevel=caller_stacklevel(),
        )


def at_registered_parameters(window: Workload) -> bool:
    """Whether ``window`` is a window of a registered workload generated at the
    parameters it is registered with: its ``meta`` (:func:`windows`) names the
    workload and family, and its configuration is the family's own (changed
    ``params`` give another configuration, recorded there: other traffic)."""
    meta = window.meta
    scenario = _SCENARIOS.get(str(meta.get("workload")))
    if scenario is None:
        return False
    own = [f.config for f in scenario.families if f.name == meta.get("family")]
    return bool(own) and meta.get("config") == config_dict(own[0])


def config_dict(config: Any) -> dict[str, Any]:
    """A generator configuration as plain JSON-ready values."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()}


def family_configs(scenario: Scenario) -> Mapping[str, dict[str, Any]]:
    """Each family's generator and configuration, for dataset cards and manifests."""
    return {
        f.name: {
            "generator": type(f.config).__name__,
            "train_windows": f.train_windows,
            "test_windows": f.test_windows,
            "train_streams": f.train_streams,
            "config": config_dict(f.config),
        }
        for f in scenario.families
    }
