"""What a learned agent was trained on when that was a trace file, and what the
commands that evaluate agents (``evaluate``, ``compare``) make of it.

A training run on a trace records in its agents' ``agent.json`` (``trace_file``)
the file's resolved path, size and sha256 as the run started, and how many of
the first windows of its train and val splits it used (:func:`trained_trace`).
Evaluating such an agent on the same file (the same sha256; for an agent saved
before it was recorded, the same file at its recorded path) with windows whose
time spans overlap those it trained or was validated on is refused in one line
(:func:`check_seen_windows`): its rows would read as held-out results while they
measure windows the agent learned from or was picked on. ``allow_seen_windows=true``
evaluates anyway, with a one-line warning (and the option in the results' config).
Evaluated on a registered workload instead, a note gives the trace's command line
(:func:`trace_notes`).

A training run on a registered workload records there (``registered_windows``,
:func:`trained_windows`) the workload, its generator parameters (window counts
given as ``+workload.params.train_windows=N`` included) and seed, and the names of
the train and validation windows it used. A window is the same window wherever it
is drawn (:func:`_window_key`: its family, that family's generator configuration,
the seed and its index), and the seed shuffles a family's indices between train and
test by the counts asked for: other counts, or another workload of the same family,
can make its train or validation windows test windows. The same check refuses them
(an agent saved before the record: its whole train and validation splits, from its
``env_kwargs``). ``registered_windows`` is a list of such records: the training
workload's, then one for each workload behavioural cloning collected teacher
demonstrations on (``imitation.workloads``: the train windows its episodes ran on),
each checked alike; an agent saved before the list has one record.

A dataset ``make_dataset`` wrote from a registered workload holds that workload's
windows, and its ``dataset_info.json`` lists them (family, index, seed and each
family's generator configuration: :func:`dataset_windows`). A run trained on such a
split as a trace records the registered windows it used as well (``registered_windows``
with the split's path as ``dataset`` and the families' configurations), so the
workload's own windows are refused it; and evaluated on such a split, an agent
trained on the registered workload (or on another split of it) is refused the
windows it trained or validated on. A workload of one's own is matched by its code
too (:func:`_same_code`: the sha256 a record and the workload or dataset evaluated
hold), so the same code under another module name makes the same windows.

Window i of the sibling families ``synthetic``, ``synthetic1s`` and ``mixed`` draws its
bursts and decoys from one random stream while each family's split is its own
(docs/workloads.md): such windows are not refused, but evaluating an agent on test
windows whose siblings of the same index it trained on prints one note
(:func:`sibling_notes`; docs/results/leak_check.md).
"""

from __future__ import annotations

import functools
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envs.sim.errors import SettingWarning, plural
from envs.workloads.bursted import PUBLISHED_SEED
from envs.workloads.trace_options import (
    TRACE_FIELDS,
    TRACE_WORKLOAD,
    TraceOptions,
    changed_fields,
)

ALLOW_OPTION = "allow_seen_windows"
"""The option of ``evaluate`` and ``compare`` that evaluates an agent on windows of
its own training trace that overlap its train or validation windows."""

SPLIT_OPTIONS = (
    "format",
    "time_unit",
    "window_s",
    "start_s",
    "end_s",
    "test_fraction",
    "val_fraction",
    "file_splits",
    "max_rows",
    "hub_split",
)
"""The trace options that decide which rows a window holds and its split."""

RECORDS = ("train.json", "results.json")
"""A training run's record of itself, in the order read (``train.json`` without an
evaluation, else ``results.json``)."""


def trained_trace(
    workload: str, params: Mapping[str, Any], n_train: int | None, n_val: int | None
) -> Any:
    """``agent.json``'s ``trace_file`` for a training run on ``workload`` with trace
    options ``params`` that uses the first ``n_train`` train windows and ``n_val``
    validation windows (0: it validates on none; None: all of the split, for an agent
    saved before they were recorded): the file's resolved path, bytes and sha256 (a
    hub dataset by name: its name, bytes and sha256 None); None for a registered
    workload."""
    from envs.workloads.trace_file import file_stamp

    if workload != TRACE_WORKLOAD:
        return None
    path = str(params["path"])
    if Path(path).is_file():
        stamp = file_stamp(path)
        record = {"path": str(Path(path).resolve()), "bytes": stamp["bytes"]}
        record["sha256"] = stamp["sha256"]
    elif Path(path).is_dir():  # a dataset's folder (format=hub): found however spelt
        record = {"path": str(Path(path).resolve()), "bytes": None, "sha256": None}
    else:
        record = {"path": path, "bytes": None, "sha256": None}
    counts = {"train_windows": n_train, "val_windows": n_val}
    return {**record, **{k: None if n is None else int(n) for k, n in counts.items()}}


def trained_windows(
    workload: str, params: Mapping[str, Any], seed: int, n_train: int | None, n_val: int | None
) -> Any:
    """``agent.json``'s ``registered_windows`` for a training run on the registered
    workload ``workload`` with generator parameters ``params`` (window counts
    included) and seed ``seed`` that uses the first ``n_train`` train windows and
    ``n_val`` validation windows (None: all of the split): the workload, parameters
    and seed, and the names of those windows. On a trace (``params``: its options)
    that is a split of a registered workload's dataset (:func:`dataset_windows`),
    the same of the dataset's workload, with the split's resolved path
    (``dataset``) and each family's generator configuration (``families``); None
    for any other trace."""
    from envs.workloads.registry import configure, plan

    if workload == TRACE_WORKLOAD:
        return _dataset_record(params, n_train, n_val)
    scenario = configure(workload, **params)
    specs = plan(scenario, seed)
    names = {
        split: [s.trace_id for s in specs if s.split == split][:count]
        for split, count in (("train", n_train), ("val", n_val))
    }
    record = {"workload": workload, "params": dict(params), "seed": int(seed)}
    streams = {f.train_streams for f in scenario.families}
    if streams:  # (one value: configure sets it on every family)
        record["train_streams"] = streams.pop()
    drawn = _drawn_seeds(scenario, specs, int(seed), set(names["train"]))
    if drawn:
        record["stream_seeds"] = drawn
    return {**record, **names, **plugin_code(workload)}


def trained_streams(spec: Any) -> str | None:
    """How the train windows of the registered workload an agent trained on were
    drawn (``registry.TRAIN_STREAMS``): its ``registered_windows`` record of that
    workload (its env's ``workload``) says so (``train_streams``); a record without
    it, or an agent without a record, was saved before the option, when every
    window was drawn from the workload's seed: ``"shared"``. None for an agent
    trained on a trace."""
    from envs.workloads.registry import DEFAULT_WORKLOAD

    workload = str(spec.env_kwargs.get("workload", DEFAULT_WORKLOAD))
    if workload == TRACE_WORKLOAD:
        return None
    saved = spec.registered_windows
    records = saved if isinstance(saved, list) else [] if saved is None else [saved]
    own = [
        record
        for record in records
        if isinstance(record, Mapping)
        and record.get("workload") == workload
        and not record.get("dataset")  # (a dataset's record is of a run on a trace)
    ]
    return str(own[0].get("train_streams", "shared")) if own else "shared"


def _drawn_seeds(scenario: Any, specs: Any, seed: int, names: set[str]) -> dict[str, int]:
    """The seed each window of ``specs`` named in ``names`` was drawn from where it is
    not the workload's ``seed`` (a train window of its own stream:
    ``registry.TRAIN_STREAMS``), by trace id."""
    from envs.workloads.registry import stream_seed

    streams = {f.name: f.train_streams for f in scenario.families}
    drawn = {s.trace_id: stream_seed(seed, s.split, streams[s.family]) for s in specs}
    return {name: value for name, value in drawn.items() if name in names and value != seed}


def plugin_code(workload: str) -> dict[str, str]:
    """``{"plugin_sha256": ...}``, the sha256 of the module of a workload of one's own
    (``plugin:MODULE:FUNCTION``) as this process imported it, for a
    ``registered_windows`` record: what :func:`plugin_notes` compares; ``{}`` for any
    other workload, or a module without a file."""
    from envs.workloads.plugins import is_plugin, load_plugin

    if not is_plugin(workload):
        return {}
    sha256 = load_plugin(workload).sha256
    return {} if sha256 is None else {"plugin_sha256": sha256}


def plugin_notes(agents: Mapping[str, Any], folders: Mapping[str, Any], workload: str) -> list[str]:
    """A note for each agent (by label, its folder in ``folders``) evaluated on the
    workload of one's own ``workload`` whose records (its own ``registered_windows``,
    then those of the agents it started from) name that workload with the sha256 of
    another version of its module than the one imported here: the rows its windows
    hold may differ from those it was trained on (they are still counted as its own
    by :func:`check_seen_windows`, whose keys hold the function, not its code). An
    agent saved before the sha256 was recorded is told nothing."""
    from envs.workloads.plugins import is_plugin, load_plugin

    if not is_plugin(workload):
        return []
    plugin = load_plugin(workload)
    if plugin.sha256 is None:
        return []
    notes = []
    for label, agent in agents.items():
        if label not in folders:  # (a sampling twin of an agent told already)
            continue
        for spec, _, via in _lineage(agent.spec, folders[label]):
            saved = spec.registered_windows
            records = saved if isinstance(saved, list) else [] if saved is None else [saved]
            trained = next(
                (
                    r["plugin_sha256"]
                    for r in records
                    if isinstance(r, Mapping)
                    and r.get("workload") == workload
                    and r.get("plugin_sha256") not in (None, plugin.sha256)
                ),
                None,
            )
            if trained is not None:
                # the sha256s cover the module, the modules of one's own it imports and
                # the packages it is imported through (plugins.code_sha256): "code", and
                # the files of now named
                code = f"{_code_said(plugin.name, plugin.path, plugin.imports)} "
                code += "is" if code == f"{plugin.path} " else "are"
                notes.append(
                    f"note: {label} ({folders[label]}) {via}was trained on {workload} with "
                    f"code of sha256 {trained[:12]}; {code} {plugin.sha256[:12]} now: the code "
                    "that makes these windows changed since (they are still counted as its own)"
                )
                break
    return notes


def _code_said(name: str, path: str | None, imports: Sequence[str]) -> str:
    """The files a plugin's sha256 covers, as a note names them: its module's ``path``,
    then how many of ``imports`` are modules of one's own it imports and how many the
    ``__init__.py`` of a package on its dotted path (``name``, ``plugin:MODULE:FUNC``),
    which it is imported through, not a module it imports."""
    module = name.removeprefix("plugin:").rpartition(":")[0]
    depth = module.count(".")  # the packages on its dotted path
    parents = Path(path).parents if path else ()
    packages = {str(parents[i] / "__init__.py") for i in range(min(depth, len(parents)))}
    n_packages = sum(1 for file in imports if file in packages)
    n_modules = len(imports) - n_packages
    parts = []
    if n_modules:
        modules = "module" if n_modules == 1 else plural(n_modules, "module")
        parts.append(f"the {modules} of one's own it imports")
    if n_packages:
        inits = "" if n_packages == 1 else f"{n_packages} "
        parts.append(f"the __init__.py of the {inits}package{'s' * (n_packages > 1)} it is "
                     "imported through")  # fmt: skip
    if len(parts) == 2:
        return f"{path}, {parts[0]} and {parts[1]}"
    return " and ".join([str(path), *parts])


def dataset_windows(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The registered windows in ``path`` when it is a split of a dataset
    ``make_dataset`` wrote from a registered workload, as its ``dataset_info.json``
    lists them (:func:`envs.workloads.readers.bursted.dataset_info`): the
    ``workload``, its generator ``params``, the ``seed``, each family's generator
    configuration (``families``) and each window's key (:func:`_key`) by trace id
    (``keys``, every split's); None for any other file (a trace's dataset included)
    or a manifest that does not say."""
    from envs.workloads.readers.bursted import dataset_info
    from envs.workloads.registry import stream_seed

    found = dataset_info(path)
    if found is None:
        return None
    info = found[1]
    generator, seed, windows = info.get("generator"), info.get("seed"), info.get("windows")
    if not isinstance(generator, Mapping) or not isinstance(windows, list):
        return None
    workload, families = generator.get("workload"), generator.get("families")
    if not isinstance(workload, str) or workload == TRACE_WORKLOAD:
        return None
    if not isinstance(families, Mapping) or type(seed) is not int:
        return None
    configs = {
        str(name): dict(family["config"])
        for name, family in families.items()
        if isinstance(family, Mapping) and isinstance(family.get("config"), Mapping)
    }
    streams = {  # (a dataset made before the option: every window of the seed's stream)
        str(name): str(family.get("train_streams", "shared"))
        for name, family in families.items()
        if isinstance(family, Mapping)
    }
    keys = {
        window["trace_id"]: _key(
            window["family"],
            configs[window["family"]],
            stream_seed(seed, str(window.get("split")), streams[window["family"]]),
            window["index"],
        )
        for window in windows
        if isinstance(window, Mapping)
        and isinstance(window.get("trace_id"), str)
        and window.get("family") in configs
        and type(window.get("index")) is int
    }
    params = generator.get("params")
    found_code = generator.get("plugin")
    sha256 = found_code.get("sha256") if isinstance(found_code, Mapping) else None
    return {
        "workload": workload,
        "params": dict(params) if isinstance(params, Mapping) else {},
        "seed": seed,
        "families": configs,
        "keys": keys,
        **({"plugin_sha256": sha256} if isinstance(sha256, str) and sha256 else {}),
    }


def _dataset_code(dataset: Mapping[str, Any]) -> Code | None:
    """The :data:`Code` of a dataset's workload of one's own (:func:`dataset_windows`:
    the sha256 of the code that made its rows, as ``make_dataset`` recorded it), so it
    is matched by its code whatever module name it was made under; None for another
    workload's dataset, or one that recorded none."""
    sha256 = dataset.get("plugin_sha256")
    return (str(dataset["workload"]), sha256) if sha256 else None


def split_path(params: Mapping[str, Any]) -> str:
    """The file the trace options ``params`` read: ``path``, or of a dataset's folder
    read with ``format=hub``, the file of its split ``hub_split`` (``train.jsonl``:
    :func:`envs.workloads.trace_file.split_file`), so that a ``make_dataset`` split
    is known whichever way it is read."""
    from envs.workloads.trace_file import split_file

    return split_file(TraceOptions(**{k: v for k, v in params.items() if k in TRACE_FIELDS}))


def _dataset_record(params: Mapping[str, Any], n_train: int | None, n_val: int | None) -> Any:
    """:func:`trained_windows` of a trace: of a registered workload's dataset split,
    the windows among the first ``n_train`` train and ``n_val`` validation windows
    the trace options ``params`` make of it; else None."""
    from envs.workloads.trace_file import plan_trace

    path = split_path(params)
    dataset = dataset_windows(path)
    if dataset is None:
        return None
    options = TraceOptions(**{k: v for k, v in params.items() if k in TRACE_FIELDS})
    with warnings.catch_warnings():  # the run has said them already
        warnings.simplefilter("ignore")
        own = plan_trace(options)
    names = {
        split: [w.key for w in own.split(split)[:count] if w.key in dataset["keys"]]
        for split, count in (("train", n_train), ("val", n_val))
    }
    record = {key: dataset[key] for key in ("workload", "params", "seed")}
    drawn = {  # (the key's seed: the stream the window was drawn from)
        name: dataset["keys"][name][2]
        for name in (*names["train"], *names["val"])
        if dataset["keys"][name][2] != dataset["seed"]
    }
    if drawn:
        record["stream_seeds"] = drawn
    code = {k: dataset[k] for k in ("plugin_sha256",) if k in dataset}  # (the code that made it)
    return {
        **record,
        **names,
        "dataset": str(Path(path).resolve()),
        "families": dataset["families"],
        **code,
    }


def started_from(folder: str | os.PathLike[str], spec: Any) -> list[dict[str, Any]]:
    """``agent.json``'s ``started_from`` for a run that starts from the weights of the
    agent ``spec`` saved in ``folder`` (``train.init_from``, or the checkpoint
    ``resume=`` continues): that agent's windows (its folder as the run was given
    it, its env's workload and parameters, its ``trace_file`` and
    ``registered_windows``), then those of the agents it started from itself (each
    once; ``agents.algorithms.AgentSpec.started_from``). An agent saved before its
    windows were recorded is entered with every window of its train and val splits
    (a trace's file as it is now, at the path its run was given)."""
    from envs.workloads.registry import DEFAULT_WORKLOAD

    kwargs = spec.env_kwargs
    workload = str(kwargs.get("workload", DEFAULT_WORKLOAD))
    params = dict(kwargs.get("workload_params") or {})
    trace = spec.trace_file
    if workload == TRACE_WORKLOAD and trace is None:
        trace = trained_trace(workload, {"path": trained_path(spec, folder)}, None, None)
    try:
        registered = _registered_records(spec) or None
    except (ValueError, TypeError):  # a workload or parameters this registry does not know
        registered = None
    entry = {
        "agent": str(folder),
        "workload": workload,
        "workload_params": params,
        "trace_file": trace,
        "registered_windows": registered,
    }
    entries: list[dict[str, Any]] = []
    for earlier in [entry, *(getattr(spec, "started_from", None) or [])]:
        if not any(same_windows(earlier, e) for e in entries):
            entries.append(dict(earlier))
    return entries


def same_windows(one: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    """Whether two ``started_from`` entries (or an entry and a run's own records)
    record the same windows, whichever agent they name."""
    return all(one.get(k) == other.get(k) for k in (set(one) | set(other)) - {"agent"})


def own_entry(spec: Any) -> dict[str, Any]:
    """An agent's own records as a ``started_from`` entry's are (no ``agent``)."""
    kwargs = spec.env_kwargs
    return {
        "workload": kwargs.get("workload"),
        "workload_params": dict(kwargs.get("workload_params") or {}),
        "trace_file": spec.trace_file,
        "registered_windows": spec.registered_windows,
    }


def _lineage(spec: Any, folder: Any) -> list[tuple[Any, Any, str]]:
    """An agent's records to check, each as (a spec-like object, its folder, the words
    that introduce it): its own, then each ``started_from`` entry's."""
    from types import SimpleNamespace

    views: list[tuple[Any, Any, str]] = [(spec, folder, "")]
    for entry in getattr(spec, "started_from", None) or []:
        earlier = SimpleNamespace(
            env_kwargs={"workload": entry["workload"], "workload_params": entry["workload_params"]},
            trace_file=entry.get("trace_file"),
            registered_windows=entry.get("registered_windows"),
            started_from=None,
        )
        views.append((earlier, entry["agent"], f"started from {entry['agent']}, which "))
    return views


def agent_run(folder: str | os.PathLike[str]) -> Path:
    """The training run an agent folder belongs to: ``RUN/agent``, ``RUN/last`` and
    ``RUN/checkpoints/step_N`` all belong to ``RUN``."""
    run = Path(folder).parent
    return run.parent if run.name == "checkpoints" else run


def run_record_file(path: Path) -> dict[str, Any] | None:
    """A run record's JSON object, or None (no such file, no JSON object)."""
    from envs.files import read_json

    try:
        record = read_json(path)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def run_record(run: str | os.PathLike[str]) -> dict[str, Any] | None:
    """A training run's record (its ``train.json``, else its ``results.json``), or
    None when it has neither (or one that is no JSON object)."""
    for name in RECORDS:
        record = run_record_file(Path(run) / name)
        if record is not None:
            return record
    return None


def run_cwd(run: str | os.PathLike[str]) -> str | None:
    """The folder a training run started in (its record's ``provenance.cwd``: its
    config's relative paths are read from there), or None if it recorded none."""
    record = run_record(run) or {}
    cwd = (record.get("provenance") or {}).get("cwd")
    return cwd if isinstance(cwd, str) and cwd else None


def run_trace_stamp(run: str | os.PathLike[str]) -> tuple[str, dict[str, Any]] | None:
    """The trace stamp a training run recorded (:func:`experiments._cli.workload_file`:
    ``train.json``'s ``workload_file``, ``results.json``'s ``config.workload_file``)
    and the file it is in; None when it recorded none (a run on a registered workload,
    or a ``train.json`` written before the stamp was)."""
    for name in RECORDS:
        record = run_record_file(Path(run) / name)
        if record is None:
            continue
        stamp = record.get("workload_file") or (record.get("config") or {}).get("workload_file")
        return (name, stamp) if isinstance(stamp, dict) and stamp.get("sha256") else None
    return None


def trained_path(spec: Any, folder: str | os.PathLike[str]) -> str:
    """The trace an agent was trained on, as a path usable from here: the resolved
    path its ``agent.json`` records; for an agent saved before that, the path as its
    run was given it, taken from the folder the run started in when that is relative
    and the run recorded it."""
    record = spec.trace_file or {}
    if record.get("path"):
        return str(record["path"])
    path = str(spec.env_kwargs.get("workload_params", {}).get("path", ""))
    cwd = run_cwd(agent_run(folder))
    if path and not os.path.isabs(path) and cwd is not None:
        joined = os.path.join(cwd, path)
        if os.path.exists(joined):
            return joined
    return path


def _text(value: Any) -> str:
    """A value as a command line gives it (``null``, ``true``, ``300.0``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _options(params: Mapping[str, Any], names: Any) -> list[str]:
    return [f"workload.{name}={_text(params[name])}" for name in names]


def trace_notes(
    agents: Mapping[str, Any], folders: Mapping[str, Any], shown: str, seen: Any = ()
) -> list[str]:
    """A note for each agent (by label, its folder in ``folders``) trained on a trace
    and evaluated here on the registered workload ``shown``: the command line
    options that evaluate it on that trace's windows, its absolute path and the
    options it was split by (of a split of a dataset ``make_dataset`` wrote that
    holds no test window, as ``train.jsonl``: the dataset's test split,
    :func:`_held_out_split`). Of an agent in ``seen`` (:func:`check_seen_windows`
    warned that some of these windows are its trace's: a dataset of this workload),
    it says so rather than that these windows are others."""
    notes = []
    for label, agent in agents.items():
        kwargs = agent.spec.env_kwargs
        if kwargs.get("workload") != TRACE_WORKLOAD or label not in folders:
            continue
        params = kwargs.get("workload_params", {})
        path = trained_path(agent.spec, folders[label])
        shown_path = os.path.abspath(path) if os.path.exists(path) else path
        given = [name for name in changed_fields(params) if name in SPLIT_OPTIONS]
        split = split_path({**params, "path": path})
        held = _held_out_split(split, params)
        evaluated = held or shown_path
        if held and split != path:  # a dataset's folder read with format=hub: its test split
            evaluated, params = shown_path, {**params, "hub_split": "test"}
            given = [*[name for name in given if name != "hub_split"], "hub_split"]
        options = " ".join([f"workload.path={evaluated}", *_options(params, given)])
        these = (
            f"some of these windows of {shown} are that trace's ({ALLOW_OPTION}=true)"
            if label in seen
            else f"these windows are {shown}'s"
        )
        what = (
            "its dataset's held-out windows (the trace holds no test window)"
            if held
            else "that trace's windows"
        )
        notes.append(
            f"note: {label} was trained on a trace ({shown_path}); {these}: workload=trace "
            f"{options} evaluates it on {what}"
        )
    return notes


def cluster_notes(
    agents: Mapping[str, Any], here: Any, here_label: str, command: str = ""
) -> list[str]:
    """A note for each agent (by label) whose ``agent.json`` records a cluster of
    its own (``env_kwargs.cluster``) that is not ``here``, the cluster it runs on
    (named ``here_label``): the overrides that run it on its own cluster
    (:func:`experiments.config.cluster_overrides`; ``command`` before them). An
    agent of a preset cluster records none and is told nothing: the zoo's agents
    run on other setups on purpose."""
    from envs.sim import ClusterSpec
    from experiments.config import cluster_label, cluster_overrides, clusters_told_apart

    notes = []
    for label, agent in agents.items():
        figures = agent.spec.env_kwargs.get("cluster")
        if figures is None:
            continue
        own = ClusterSpec.from_figures(figures)  # checked when the agent loaded
        if own == here:
            continue
        # one label for both (a GPU kind of one's own that kept its name): the figures too
        was, now = clusters_told_apart(own, here, cluster_label(own), here_label)
        notes.append(
            f"note: {label} was trained on a cluster of its own ({was}), "
            f"not the {now} it runs on here: {command}"
            f"{' '.join(cluster_overrides(own))} runs it on its own cluster"
        )
    return notes


def _held_out_split(path: str, params: Mapping[str, Any]) -> str | None:
    """The test split of the dataset ``make_dataset`` wrote whose split ``path`` is
    (``test.jsonl`` beside its ``dataset_info.json``, compressed or not), when
    ``path`` read with the trace options ``params`` has no test window (its rows all
    name another split: a run trained on ``train.jsonl``); None otherwise, or when
    the file cannot be read as it was."""
    from envs.workloads.readers.bursted import dataset_info
    from envs.workloads.trace_file import plan_trace

    found = dataset_info(path)
    if found is None:
        return None
    options = {k: v for k, v in params.items() if k in TRACE_FIELDS}
    try:
        with warnings.catch_warnings():  # the training run's to say
            warnings.simplefilter("ignore")
            if plan_trace(TraceOptions(**{**options, "path": path})).split("test"):
                return None
    except (OSError, ValueError, TypeError):  # it changed since: the note says the file
        return None
    from envs.workloads.readers.sources import compressed_names

    for name in compressed_names("test.jsonl"):
        split = found[0].parent / name
        if split.is_file():
            return str(split.absolute())
    return None


def _same_trace(spec: Any, folder: Any, options: TraceOptions) -> bool:
    """Whether ``options`` (an evaluation's) read the trace the agent was trained on:
    the same sha256 as its ``agent.json`` records; else (a hub dataset by name, or an
    agent saved before it was recorded) the same dataset name and split, or the same
    file (resolved, or of the same sha256) at the path it was trained on."""
    from envs.workloads.trace_file import file_stamp

    record = spec.trace_file or {}
    here = Path(options.path)
    if not here.is_file():  # a hub dataset by name, or a dataset's folder
        trained = spec.env_kwargs.get("workload_params", {})
        same_split = trained.get("hub_split", TraceOptions.hub_split) == options.hub_split
        if here.is_dir():  # the same folder, however spelt (relative, absolute)
            path = Path(trained_path(spec, folder))
            return same_split and path.is_dir() and path.resolve() == here.resolve()
        return str(trained.get("path")) == options.path and same_split
    sha = file_stamp(here)["sha256"]
    if record.get("sha256"):
        return bool(record["sha256"] == sha)
    path = Path(trained_path(spec, folder))
    if not path.is_file():
        return False
    return path.resolve() == here.resolve() or file_stamp(path)["sha256"] == sha


def _spans(plan: Any, windows: Any) -> list[Any]:
    """Each window's place in the trace: a Bursted-ART window's ``trace_id``; a timed
    window's span of the file's own timestamps, ``[start, end)`` (so two reads of one
    file in other time units or window lengths compare)."""
    options = plan.options
    out: list[Any] = []
    for window in windows:
        if isinstance(window.key, str):
            out.append(window.key)
            continue
        end_s = window.start_s + options.window_s
        if options.end_s is not None:
            end_s = min(end_s, options.end_s)
        ups, origin = plan.units_per_s, plan.origin
        out.append((origin + window.start_s * ups, origin + end_s * ups))
    return out


def _overlap(one: Any, other: Any) -> bool:
    if isinstance(one, str) or isinstance(other, str):
        return bool(one == other)
    return bool(one[0] < other[1] and other[0] < one[1])


def seen_windows(
    spec: Any, folder: Any, params: Mapping[str, Any], split: str, limit: int | None
) -> tuple[int, int, int, int] | None:
    """For an agent (its ``spec``, saved in ``folder``) evaluated on the trace options
    ``params``' first ``limit`` windows of ``split`` (None: all): how many of its
    train windows they overlap, of how many, and the same of its validation windows
    (validation windows left out for ``split="val"``, which is what they are for);
    None when the agent was not trained on this trace. An agent saved before
    ``agent.json`` recorded the windows it used counts every window of its train and
    val splits."""
    from envs.workloads.trace_file import plan_trace

    kwargs = spec.env_kwargs
    if kwargs.get("workload") != TRACE_WORKLOAD:
        return None
    options = TraceOptions(**params)
    if not _same_trace(spec, folder, options):
        return None
    trained = {k: v for k, v in kwargs.get("workload_params", {}).items() if k in TRACE_FIELDS}
    trained["path"] = options.path  # the same file, as this evaluation reads it
    record = spec.trace_file or {}
    with warnings.catch_warnings():  # its warnings were the training run's
        warnings.simplefilter("ignore")
        own = plan_trace(TraceOptions(**trained))
        here = plan_trace(options)
    evaluated = _spans(here, here.split(split)[:limit])
    counts: list[int] = []
    for name, key in (("train", "train_windows"), ("val", "val_windows")):
        windows = own.split(name)[: record.get(key)] if split != name else []
        spans = _spans(own, windows)
        counts += [sum(any(_overlap(s, e) for e in evaluated) for s in spans), len(spans)]
    return counts[0], counts[1], counts[2], counts[3]


def _window_key(family: Any, seed: int, index: int) -> tuple[str, str, int, int]:
    """What makes a registered workload's window: its family (name and generator
    configuration), the seed it is drawn from (``registry.stream_seed``: a train
    window of its own stream has its own) and its index (its trace id only labels
    it)."""
    from envs.workloads.registry import config_dict

    return _key(family.name, config_dict(family.config), seed, index)


def _key(
    family: str, config: Mapping[str, Any], seed: int, index: int
) -> tuple[str, str, int, int]:
    """:func:`_window_key` of a family named ``family`` whose generator configuration,
    as plain JSON values (``registry.config_dict``), is ``config``."""
    return str(family), json.dumps(dict(config), sort_keys=True), int(seed), int(index)


def _families(record: Mapping[str, Any]) -> dict[str, Any]:
    """Each family's generator configuration of the workload a ``registered_windows``
    record names: its ``families`` (a dataset's), else its workload's and parameters'
    (a ValueError or TypeError if this registry does not know them)."""
    from envs.workloads.registry import config_dict, configure

    if isinstance(record.get("families"), Mapping):
        return {str(name): config for name, config in record["families"].items()}
    own = configure(str(record["workload"]), **record.get("params", {}))
    return {f.name: config_dict(f.config) for f in own.families}


def _seen_among(
    record: Mapping[str, Any], families: Mapping[str, Any], evaluated: set[Any], split: str
) -> tuple[list[str], int, list[str], int]:
    """The names of ``record``'s train windows whose keys are among ``evaluated``, how
    many it has, and the same of its validation windows (left out for
    ``split="val"``)."""
    out: list[Any] = []
    for name in ("train", "val"):
        names = [str(n) for n in record.get(name) or []] if split != name else []
        hit = []
        for trace_id in names:
            family, _, index = trace_id.rpartition("-")
            if family in families and index.isdigit():
                config = families[family]
                if _key(family, config, _record_seed(record, trace_id), int(index)) in evaluated:
                    hit.append(trace_id)
        out += [hit, len(names)]
    return out[0], out[1], out[2], out[3]


def _record_seed(record: Mapping[str, Any], trace_id: str) -> int:
    """The seed the window ``trace_id`` of a ``registered_windows`` record was drawn
    from: its ``stream_seeds`` entry (a train window of its own stream), else the
    record's seed (a record saved before the option: every window)."""
    drawn = record.get("stream_seeds")
    if isinstance(drawn, Mapping) and trace_id in drawn:
        return int(drawn[trace_id])
    return int(record["seed"])


def _registered_records(spec: Any) -> list[dict[str, Any]]:
    """The registered windows an agent trained and validated on, a record a workload
    (:func:`trained_windows`'s): its ``registered_windows`` (a list of records: the
    training workload's, then those behavioural cloning collected on,
    ``imitation.workloads``; one record for an agent saved before the list); for an
    agent saved before the record, its env's workload, parameters and seed with every
    window of their train and val splits (none: a trace's agent). A ValueError or
    TypeError for a workload or parameters this registry does not know."""
    from envs.workloads.registry import DEFAULT_WORKLOAD

    saved = spec.registered_windows
    if isinstance(saved, list):
        return [dict(record) for record in saved]
    if saved is not None:
        return [dict(saved)]
    kwargs = spec.env_kwargs
    workload = str(kwargs.get("workload", DEFAULT_WORKLOAD))
    if workload == TRACE_WORKLOAD:
        return []
    params = dict(kwargs.get("workload_params") or {})
    params.setdefault("train_streams", "shared")  # (saved before the option)
    seed = int(kwargs.get("data_seed", PUBLISHED_SEED))
    record = trained_windows(workload, params, seed, None, None)
    record.pop("plugin_sha256", None)  # (the module as it is now: not what it trained on)
    return [record]


Code = tuple[str, str | None]
"""A workload of one's own as a check sees it: its name and the sha256 of its code
(:attr:`envs.workloads.plugins.Plugin.sha256`; None if unknown)."""


def _seen_records(
    spec: Any,
    evaluated: set[Any],
    split: str,
    code: Code | None = None,
    dataset: Mapping[str, Any] | None = None,
    undecided: list[str] | None = None,
) -> tuple[dict[str, Any], tuple[list[str], int, list[str], int]] | None:
    """:func:`_seen_among` of an agent's records (:func:`_registered_records`; those of
    a workload or parameters this registry does not know left out): the first record
    with windows among ``evaluated`` and its answer, else the first record's; None
    when it has none. ``code``: the workload of one's own evaluated (on its own, or a
    dataset of it read as a trace), whose code may be a record's under another
    module name (:func:`_record_families`). ``dataset``: the dataset evaluated
    (:func:`dataset_windows`), whose recorded configurations stand for those of a
    record of its code whose module does not import here (:func:`_dataset_families`);
    why a record could not be told from it so is added to ``undecided``."""
    try:
        records = _registered_records(spec)
    except (ValueError, TypeError):
        return None
    answers = []
    for record in records:
        try:
            families = _record_families(record, code, dataset)
        except _Undecided as why:
            if undecided is not None:
                undecided.append(
                    f"{record.get('workload')}, whose module does not import here; {why}"
                )
            continue
        except (ValueError, TypeError):  # a workload or parameters this registry does not know
            continue
        answers.append((record, _seen_among(record, families, evaluated, split)))
    hits = [(record, found) for record, found in answers if found[0] or found[2]]
    return (hits or answers)[0] if answers else None


class _Undecided(Exception):
    """A record of an agent whose windows cannot be told from a dataset's: its workload
    of one's own does not import here, and the dataset's recorded configurations are
    not surely its (:func:`_dataset_families`); the message says why, for a note."""


def _plugin_code(workload: str) -> Code | None:
    """The :data:`Code` of ``workload`` when it is a workload of one's own (imported
    here), else None."""
    from envs.workloads.plugins import is_plugin, load_plugin

    return (workload, load_plugin(workload).sha256) if is_plugin(workload) else None


def _same_code(record: Mapping[str, Any], code: Code | None) -> bool:
    """Whether ``record`` names a workload of one's own of another module name than
    ``code``'s, of the same function name and code (its ``plugin_sha256``: the same
    bytes, and the same modules of one's own imported beside them): ``gen:rows`` run in
    the folder ``mine/``, ``mine.gen:rows`` from its parent. Such code makes the same
    windows."""
    from envs.workloads.plugins import is_plugin

    if code is None:
        return False
    workload, sha256 = code
    trained = record.get("workload")
    return bool(
        sha256
        and record.get("plugin_sha256") == sha256
        and trained != workload
        and is_plugin(trained)
        and is_plugin(workload)
        and str(trained).rpartition(":")[2] == workload.rpartition(":")[2]
    )


def _record_families(
    record: Mapping[str, Any], code: Code | None, dataset: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """:func:`_families` of ``record``; of a record of the same code as ``code`` under
    another module name (:func:`_same_code`), with ``code``'s function as each
    configuration's ``factory``, so that its windows' keys are the evaluated
    workload's (the configurations of the evaluated name's module when it imports
    here, else of the record's own; a dataset's split trained on: its own). Where
    neither imports here and ``dataset`` (the dataset evaluated) is of the record's
    code, the dataset's recorded configurations (:func:`_dataset_families`)."""
    if not _same_code(record, code):
        try:
            return _families(record)
        except (ValueError, TypeError) as error:
            if dataset is None:
                raise
            return _dataset_families(record, dataset, error)
    assert code is not None
    workload = code[0]
    try:
        families = _families(record if "families" in record else {**record, "workload": workload})
    except (ValueError, TypeError):  # (the evaluated name not importable here: a dataset's)
        try:
            families = _families(record)
        except (ValueError, TypeError) as error:
            if dataset is None:
                raise
            families = _dataset_families(record, dataset, error)
    factory = workload.partition(":")[2]
    return {
        name: {**config, "factory": factory}
        if isinstance(config, Mapping) and "factory" in config
        else config
        for name, config in families.items()
    }


def _dataset_families(
    record: Mapping[str, Any], dataset: Mapping[str, Any], error: BaseException
) -> dict[str, Any]:
    """The generator configurations of the windows of ``record``, a workload of one's
    own whose module does not import here (``error``, raised trying), from those a
    dataset evaluated (:func:`dataset_windows`) records of the same code (the same
    ``plugin_sha256``, under any module name): each family's configuration with the
    record's generator parameters in place of the dataset's. Raises ``error`` again
    where the record's windows cannot be the dataset's (another workload's dataset,
    or of other code under another name, whose keys differ whatever the
    configurations), and :class:`_Undecided` where they may be but cannot be told:
    the same workload of other code (edited since), or a parameter the dataset gave
    that the record left at its default (the default is not recorded)."""
    from envs.workloads.plugins import is_plugin
    from envs.workloads.registry import SPLIT_PARAMETERS

    trained, made = record.get("workload"), dataset.get("workload")
    if not (is_plugin(trained) and is_plugin(made)):
        raise error
    sha256 = record.get("plugin_sha256")
    if not sha256 or sha256 != dataset.get("plugin_sha256"):
        if trained != made:
            raise error  # other code under another name: other windows, as when it imports
        recorded = dataset.get("plugin_sha256")
        raise _Undecided(
            "the code it was trained on is not surely the dataset's ("
            + (f"sha256 {sha256[:12]}" if sha256 else "its sha256 is not recorded")
            + (f", the dataset's {recorded[:12]}" if recorded else ", the dataset's not recorded")
            + ")"
        )
    params = record.get("params") or {}
    mine = {k: v for k, v in params.items() if k not in SPLIT_PARAMETERS}
    given = {k: v for k, v in (dataset.get("params") or {}).items() if k not in SPLIT_PARAMETERS}
    left = sorted(set(given) - set(mine))
    if left:
        raise _Undecided(
            f"it was trained with {', '.join(left)} at "
            f"{'its default' if len(left) == 1 else 'their defaults'}, and the dataset was "
            f"made at {' '.join(f'{k}={given[k]}' for k in left)} and does not record "
            f"{'it' if len(left) == 1 else 'them'}"
        )
    families = {}
    for name, config in dataset["families"].items():
        unknown = sorted(set(mine) - set(config))
        if unknown:
            raise _Undecided(f"the dataset's configuration has no {', '.join(unknown)}")
        # (a value equal to the dataset's, 2 for 2.0, keeps the dataset's spelling)
        families[name] = {**config, **{k: v for k, v in mine.items() if config[k] != v}}
    return families


def _registered_evaluated(
    workload: str, params: Mapping[str, Any], seed: int, split: str, limit: int | None
) -> tuple[set[Any], int]:
    """The keys (:func:`_window_key`) of the first ``limit`` windows (None: all) of
    ``split`` of the registered workload ``workload`` at ``params`` and ``seed``, and
    how many they are: the workload planned once."""
    from envs.workloads.registry import configure, stream_seed

    families, windows = _planned(configure(workload, **params), seed, split, limit)
    keys = {
        _window_key(
            families[s.family],
            stream_seed(seed, s.split, families[s.family].train_streams),
            s.index,
        )
        for s in windows
    }
    return keys, len(windows)


def _planned(
    scenario: Any, seed: int, split: str, limit: int | None
) -> tuple[dict[str, Any], list[Any]]:
    """A registered workload's ``scenario`` planned at ``seed``: its families by name
    (the first of a name, as the windows are keyed) and the first ``limit`` windows
    (None: all) of ``split``."""
    from envs.workloads.registry import plan

    families: dict[str, Any] = {}
    for family in scenario.families:
        families.setdefault(family.name, family)
    return families, [s for s in plan(scenario, seed) if s.split == split][:limit]


def _registered_found(
    spec: Any, workload: str, params: Mapping[str, Any], seed: int, split: str, limit: int | None
) -> tuple[dict[str, Any], tuple[list[str], int, list[str], int]] | None:
    """:func:`seen_registered` with the record it answers of."""
    evaluated, _ = _registered_evaluated(workload, params, seed, split, limit)
    return _seen_records(spec, evaluated, split, _plugin_code(workload))


def seen_registered(
    spec: Any, workload: str, params: Mapping[str, Any], seed: int, split: str, limit: int | None
) -> tuple[list[str], int, list[str], int] | None:
    """For an agent (its ``spec``) evaluated on the first ``limit`` windows (None:
    all) of ``split`` of the registered workload ``workload`` with generator
    parameters ``params`` and seed ``seed``: the names of its train windows among
    them (by :func:`_window_key`), how many it trained on, and the same of its
    validation windows (left out for ``split="val"``), of the first of its records
    (:func:`_registered_records`: its training workload's, then each workload it was
    cloned on) that has any among them, else of its first; None for an agent trained
    on a trace that is no registered workload's dataset (nor cloned on any), or on a
    workload not registered here."""
    found = _registered_found(spec, workload, params, seed, split, limit)
    return None if found is None else found[1]


def seen_in_dataset(
    spec: Any, params: Mapping[str, Any], split: str, limit: int | None
) -> tuple[list[str], int, list[str], int] | None:
    """As :func:`seen_registered`, for an agent evaluated on the trace options
    ``params``' first ``limit`` windows of ``split`` when the file is a split of a
    registered workload's dataset (:func:`dataset_windows`); None when it is not, or
    the agent was trained on a trace that is none (nor cloned on a workload)."""
    found = _dataset_found(spec, params, split, limit)
    return None if found is None else found[1]


def _dataset_evaluated(
    params: Mapping[str, Any], split: str, limit: int | None
) -> tuple[dict[str, Any], set[Any], int] | None:
    """For the trace options ``params`` when their file is a split of a registered
    workload's dataset (:func:`dataset_windows`): that dataset, the keys of its
    first ``limit`` windows of ``split`` and how many they are (its
    ``dataset_info.json`` read once, the trace planned once); None when it is none."""
    dataset = dataset_windows(split_path(params))
    if dataset is None:
        return None
    keys = dataset["keys"]
    names = _evaluated_names(params, split, limit)
    return dataset, {keys[name] for name in names if name in keys}, len(names)


def _dataset_found(
    spec: Any, params: Mapping[str, Any], split: str, limit: int | None
) -> tuple[dict[str, Any], tuple[list[str], int, list[str], int]] | None:
    """:func:`seen_in_dataset` with the record it answers of."""
    found = _dataset_evaluated(params, split, limit)
    if found is None:
        return None
    return _seen_records(spec, found[1], split, _dataset_code(found[0]), found[0])


def _trained_text(record: Mapping[str, Any]) -> str:
    """What a ``registered_windows`` record was trained on, for a message."""
    if record.get("dataset"):
        return f"{record['dataset']} ({_dataset_text(record)})"
    return _counts_text(str(record.get("workload")), record.get("params") or {})


def _dataset_text(dataset: Mapping[str, Any]) -> str:
    return f"a make_dataset split of {dataset['workload']}, seed {dataset['seed']}"


def _counts_text(workload: str, params: Mapping[str, Any]) -> str:
    """``workload`` with the split parameters ``params`` give
    (``registry.SPLIT_PARAMETERS``: the window counts and ``train_streams``), for a
    message: ``bursted_synthetic (train_windows=1 test_windows=1
    train_streams=shared)``, ``bursted_synthetic (its own window counts)``."""
    from envs.workloads.registry import SPLIT_PARAMETERS, WINDOW_COUNTS

    given = " ".join(f"{name}={params[name]}" for name in SPLIT_PARAMETERS if name in params)
    if not any(name in params for name in WINDOW_COUNTS):
        given = ", ".join(["its own window counts", *([given] if given else [])])
    return f"{workload} ({given})"


def _some(names: list[str], most: int = 3) -> str:
    shown = ", ".join(names[:most])
    return shown + (f", ... ({len(names) - most} more)" if len(names) > most else "")


def check_seen_windows(
    agents: Mapping[str, Any],
    folders: Mapping[str, Any],
    workload: str,
    params: Mapping[str, Any],
    split: str,
    limit: int | None,
    allow: bool,
    seed: int = PUBLISHED_SEED,
) -> list[str]:
    """Refuse (a ValueError, one line) to evaluate an agent (by label; its folder in
    ``folders``) on windows of ``split`` it was trained or validated on: of the
    trace it was trained on, windows whose time spans overlap those of its own train
    or validation windows (:func:`seen_windows`); of a registered workload (seed
    ``seed``), or of a dataset of one as a trace, the same windows as its own
    (:func:`seen_registered`, :func:`seen_in_dataset`). The line names the agent,
    the counts and the options that differ from its training run's; with ``allow``,
    it is a one-line warning instead. The windows of the agents it started from
    (``started_from``) are checked the same way. Returns the labels of the agents
    warned of."""
    warned = []
    # the windows evaluated, planned (a dataset's record read) once, when first asked
    registered = functools.cache(
        lambda: _registered_evaluated(workload, params, seed, split, limit)
    )
    in_dataset = functools.cache(lambda: _dataset_evaluated(params, split, limit))
    names = functools.cache(lambda: _evaluated_windows(params, split, limit))
    for label, agent in agents.items():
        if label not in folders:  # (a sampling twin of an agent checked already)
            continue
        found = None
        undecided: list[tuple[str, str]] = []  # (via, why) of records no check could tell
        for spec, folder, via in _lineage(agent.spec, folders[label]):
            if workload == TRACE_WORKLOAD:
                said = _seen_in_trace(spec, folder, params, split, limit)
                if said is None:
                    reasons: list[str] = []
                    said = _seen_dataset_text(spec, in_dataset(), params, split, reasons)
                    undecided += [(via, reason) for reason in reasons]
            else:
                said = _seen_registered_text(spec, registered(), workload, params, seed, split)
            if said is not None:
                found = (via, *said)
                break
        if found is None:
            if undecided:  # not passed over in silence: it may be trained on these windows
                via, why = undecided[0]
                warnings.warn(
                    f"agent {label} ({folders[label]}) {via}was trained on {why}: whether "
                    f"{params.get('path')} holds its own windows cannot be told here, and it "
                    "runs as held-out (evaluate it where that module imports to check, as "
                    "the windows of the code it trained on are known then)",
                    SettingWarning,
                    stacklevel=2,
                )
            elif workload == TRACE_WORKLOAD and in_dataset() is None:
                _warn_copied_split(label, agent.spec, folders[label], params, names())
            continue
        via, message, remedy = found
        message = f"agent {label} ({folders[label]}) {via}was trained on {message}"
        if not allow:
            raise ValueError(
                f"{message}: they are no held-out windows for it (evaluate it with the "
                f"{remedy} it was trained with, or {ALLOW_OPTION}=true to run anyway)"
            )
        warnings.warn(f"{message} ({ALLOW_OPTION}=true)", SettingWarning, stacklevel=2)
        warned.append(label)
    return warned


SIBLING_FAMILIES = ("synthetic", "synthetic1s", "mixed")
"""Families whose window i draws its bursts and decoys from the same random stream
(``default_rng([seed, i])``; docs/workloads.md): at the same seed and generator
settings, but the fields of :data:`_PACKING`, window i of one sends the prompts of
window i of another."""
_PACKING = ("burst_window_s", "background_rate_per_s")
"""Generator fields that pack the same bursts into another span or add background
traffic: they leave a sibling window's prompts as they are."""


def _same_bursts(one: Any, other: Any) -> bool:
    """Whether two sibling families' generator configurations (plain JSON values)
    draw the same bursts from the same stream: equal in every field but
    :data:`_PACKING`."""
    if not isinstance(one, Mapping) or not isinstance(other, Mapping):
        return False
    return {k: v for k, v in one.items() if k not in _PACKING} == {
        k: v for k, v in other.items() if k not in _PACKING
    }


def sibling_notes(
    agents: Mapping[str, Any],
    folders: Mapping[str, Any],
    workload: str,
    params: Mapping[str, Any],
    seed: int,
    split: str,
    limit: int | None,
) -> list[str]:
    """One ``note:`` line per agent (by label; its folder in ``folders``) whose
    recorded train windows (:func:`_registered_records`, of it and of the agents it
    started from) include a sibling family's window of the same index, seed and
    bursts (:data:`SIBLING_FAMILIES`) as one of the first ``limit`` windows (None:
    all) of ``split`` of the registered workload ``workload`` evaluated: how many of
    them, per family, and which train windows. No refusal: each family's split is
    its own (:func:`check_seen_windows` checks them per family). Nothing for a
    trace."""
    from envs.workloads.registry import config_dict, configure, stream_seed

    if workload == TRACE_WORKLOAD:
        return []
    try:
        scenario = configure(workload, **params)
    except (ValueError, TypeError):  # (refused elsewhere, naming the parameter)
        return []
    families, windows = _planned(scenario, seed, split, limit)
    configs = {name: config_dict(family.config) for name, family in families.items()}
    evaluated = [  # (family, index, the seed it is drawn from)
        (s.family, s.index, stream_seed(seed, s.split, families[s.family].train_streams))
        for s in windows
        if s.family in SIBLING_FAMILIES
    ]
    if not evaluated:
        return []
    notes = []
    for label, agent in agents.items():
        if label not in folders:  # (a sampling twin of an agent noted already)
            continue
        # (family, index, seed drawn from) -> (trace id, its family's configuration, its
        # workload): a train window of its own stream shares no prompt with a test window
        trained: dict[tuple[str, int, int], list[tuple[str, Any, str]]] = {}
        earlier = False
        for spec, _, via in _lineage(agent.spec, folders[label]):
            try:
                records = _registered_records(spec)
            except (ValueError, TypeError):
                continue
            for record in records:
                if "seed" not in record:
                    continue
                try:
                    families = _families(record)
                except (ValueError, TypeError):  # a workload this registry does not know
                    continue
                for trace_id in [str(n) for n in record.get("train") or []]:
                    name, _, number = trace_id.rpartition("-")
                    if name in SIBLING_FAMILIES and name in families and number.isdigit():
                        drawn = _record_seed(record, trace_id)
                        trained.setdefault((name, int(number), drawn), []).append(
                            (trace_id, families[name], str(record.get("workload")))
                        )
                        earlier = earlier or bool(via)
        hits: dict[str, list[tuple[str, str]]] = {}  # family -> (train window, its workload)
        counts: dict[str, list[int]] = {}  # evaluated family -> [shared, evaluated]
        for family, index, drawn in evaluated:
            count = counts.setdefault(family, [0, 0])
            count[1] += 1
            shared = [
                (name, made_by)
                for other in SIBLING_FAMILIES
                if other != family
                for name, config, made_by in trained.get((other, index, drawn), [])
                if _same_bursts(config, configs[family])
            ]
            if shared:
                count[0] += 1
                hits.setdefault(family, []).extend(shared)
        if not hits:
            continue
        parts = [
            f"{counts[family][0]} of {counts[family][1]} {split} windows of {family}"
            for family in counts
            if counts[family][0]
        ]
        names = sorted({name for found in hits.values() for name, _ in found})
        workloads = dict.fromkeys(made_by for found in hits.values() for _, made_by in found)
        who = "it or an agent it started from" if earlier else "it"
        notes.append(
            f"note: agent {label}: {', '.join(parts)} evaluated share their prompts, window "
            f"for window, with train windows of a sibling family {who} trained on "
            f"({', '.join(workloads)}, seed {seed}: {_some(names)}); held out by family, "
            "not by prompt (see docs/results/leak_check.md)"
        )
    return notes


def _evaluated_windows(params: Mapping[str, Any], split: str, limit: int | None) -> list[str]:
    """The names of the Bursted-ART windows the trace options ``params`` evaluate (the
    first ``limit`` of ``split``); none of a trace by time (its windows are spans)."""
    from envs.workloads.trace_file import plan_trace

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        windows = plan_trace(TraceOptions(**params)).split(split)[:limit]
    return [w.trace_id for w in windows if isinstance(w.key, str)]


def _warn_copied_split(
    label: str, spec: Any, folder: Any, params: Mapping[str, Any], evaluated: list[str]
) -> None:
    """Warn (one line) when the trace evaluated, whose file has no ``dataset_info.json``
    beside it (:func:`dataset_windows` None), holds windows named as windows of a
    registered workload the agent (or one it started from) trained or validated on
    are (``synthetic-0000``): a ``make_dataset`` split copied without its record,
    maybe. Its windows are known only by name then, and a name is no window (another
    seed or configuration names others alike), so the agent runs as held-out; the
    warning says why, and what lets it be checked."""
    if not evaluated:
        return
    here = set(evaluated)
    for spec_seen, _, via in _lineage(spec, folder):
        try:
            records = _registered_records(spec_seen)
        except (ValueError, TypeError):  # a workload this registry does not know
            continue
        for record in records:
            own = {
                str(name)
                for key in ("train", "val")
                for name in (record.get(key) or [])
                if name in here
            }
            if not own:
                continue
            path = split_path(params)
            warnings.warn(
                f"agent {label} ({folder}) {via}was trained on windows of "
                f"{record.get('workload')} named as {plural(len(own), 'window')} evaluated "
                f"here are ({_some(sorted(own))}), but {path} has no dataset_info.json beside "
                "it (a make_dataset split copied without it?): a name alone does not tell "
                "the same window (its family's configuration and seed), so it runs as "
                "held-out (keep the split beside its dataset_info.json to check)",
                SettingWarning,
                stacklevel=3,
            )
            return


def _seen_in_trace(
    spec: Any, folder: Any, params: Mapping[str, Any], split: str, limit: int | None
) -> tuple[str, str] | None:
    """What :func:`check_seen_windows` says of a trace's windows the agent has seen
    (after "was trained on"), and what to evaluate it with instead; None if none."""
    found = seen_windows(spec, folder, params, split, limit)
    if found is None or not (found[0] or found[2]):
        return None
    train_hit, n_train, val_hit, n_val = found
    parts = []
    if train_hit:
        parts.append(f"{train_hit} of its {plural(n_train, 'train window')}")
    if val_hit:
        parts.append(f"{val_hit} of its {plural(n_val, 'validation window')}")
    trained = spec.env_kwargs.get("workload_params", {})
    differ = [n for n in SPLIT_OPTIONS if trained.get(n) != params.get(n)]
    said = ""
    if differ:
        said = (
            f"; trained with {' '.join(_options(trained, differ))}, "
            f"here {' '.join(_options(params, differ))}"
        )
    n_eval = len(_evaluated_names(params, split, limit))
    path = trained_path(spec, folder)
    copy = ""
    if os.path.abspath(path) != os.path.abspath(str(params["path"])):
        copy = f" (as {path}, of the same bytes)"
    return (
        f"this trace{copy}: the {plural(n_eval, split + ' window')} evaluated overlap in "
        f"time {' and '.join(parts)}{said}",
        "trace options",
    )


def _seen_registered_text(
    spec: Any,
    evaluated: tuple[set[Any], int],
    workload: str,
    params: Mapping[str, Any],
    seed: int,
    split: str,
) -> tuple[str, str] | None:
    """As :func:`_seen_in_trace`, of a registered workload's windows (``evaluated``:
    :func:`_registered_evaluated`'s answer)."""
    keys, n_eval = evaluated
    found = _seen_records(spec, keys, split, _plugin_code(workload))
    if found is None or not (found[1][0] or found[1][2]):
        return None
    return _registered_text(*found, seed, split, n_eval, _counts_text(workload, params))


def _seen_dataset_text(
    spec: Any,
    evaluated: tuple[dict[str, Any], set[Any], int] | None,
    params: Mapping[str, Any],
    split: str,
    undecided: list[str] | None = None,
) -> tuple[str, str] | None:
    """As :func:`_seen_in_trace`, of a registered workload's windows in a dataset's
    split read as a trace (``evaluated``: :func:`_dataset_evaluated`'s answer); why a
    record could not be told from them is added to ``undecided``."""
    if evaluated is None:
        return None
    dataset, keys, n_eval = evaluated
    found = _seen_records(spec, keys, split, _dataset_code(dataset), dataset, undecided)
    if found is None or not (found[1][0] or found[1][2]):
        return None
    here = f"{params['path']} ({_dataset_text(dataset)})"
    return _registered_text(*found, int(dataset["seed"]), split, n_eval, here)


def _registered_text(
    record: Mapping[str, Any], found: Any, seed: int, split: str, n_eval: int, here: str
) -> tuple[str, str]:
    """What :func:`check_seen_windows` says of ``found`` (:func:`seen_registered`'s
    answer, of the agent's record ``record``) of ``n_eval`` windows of ``split``
    evaluated on ``here``."""
    train_hit, n_train, val_hit, n_val = found
    parts = [
        f"{len(hit)} of its {plural(n, kind)} ({_some(hit)})"
        for hit, n, kind in (
            (train_hit, n_train, "train window"),
            (val_hit, n_val, "validation window"),
        )
        if hit
    ]
    return (
        f"some of these windows (seed {seed}): the {plural(n_eval, split + ' window')} "
        f"evaluated {'is' if n_eval == 1 else 'include'} {' and '.join(parts)}; trained on "
        f"{_trained_text(record)}, here {here}",
        "workload and window counts",
    )


def _evaluated_names(params: Mapping[str, Any], split: str, limit: int | None) -> list[str]:
    from envs.workloads.trace_file import plan_trace

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [w.trace_id for w in plan_trace(TraceOptions(**params)).split(split)[:limit]]
