"""Write a registered workload as a dataset in the Bursted-ART layout.

Usage::

    python -m experiments.make_dataset workload=NAME out_dir=PATH [seed=20260721]
        [train_windows=N] [test_windows=N] [params=key=value,key=low/high] [progress=true]
    python -m experiments.make_dataset workload=trace workload.path=FILE out_dir=PATH
        [workload.window_s=300 workload.test_fraction=0.25 ...]
        [overwrite=false]
    python -m experiments.make_dataset workload=plugin workload.factory=MODULE:FUNCTION
        out_dir=PATH [train_windows=N] [test_windows=N] [params=key=value,...]

Writes ``train.jsonl`` and ``test.jsonl`` (one row per request, grouped by window,
split by whole window; a split of no windows, ``train_windows=0``, has no file and
no entry in the info's ``splits``), ``dataset_info.json`` (generator arguments,
counts and a window manifest) and a ``README.md`` card. A window with no request
is refused, naming it (every run refuses it), and nothing is written. Every file
is written to a temporary file and renamed into place once every split is
complete (SIGTERM and SIGHUP end the run as Ctrl-C does; ``make_dataset()`` called
from Python raises ``SystemExit(143)`` on SIGTERM), so a crash never leaves half a
dataset or a stray temporary file. The output depends only on the arguments: the same seed gives
byte-identical files. The default workload, ``bursted_art``, reproduces the published composition.
``workload=trace`` writes a trace file's windows in the same layout (and a
``val.jsonl`` when the trace has a val split); ``dataset_info.json`` records the
file's size and sha256.
An ``out_dir`` that holds anything already (or that another run is writing in) is
refused unless ``overwrite=true``: then the new files replace the old ones as
they land, together, so a failed run leaves the old dataset whole; an old
``val.jsonl`` the new dataset does not have is removed as it lands. Other files
in the folder are left alone.
"""

from __future__ import annotations

import inspect
import json
import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tqdm import tqdm

from envs.files import dumps_strict, file_mode, naming, naming_file
from envs.sim.errors import echoed, plural
from envs.workloads.bursted import PUBLISHED_SEED
from envs.workloads.plugins import PLUGIN_PREFIX, is_plugin, load_plugin
from envs.workloads.readers.bursted import DATASET_INFO, DATASET_LAYOUT
from envs.workloads.readers.sources import trace_stem
from envs.workloads.registry import (
    PUBLISHED_WORKLOAD,
    SPLIT_PARAMETERS,
    WindowSpec,
    config_dict,
    configure,
    family_configs,
    plan,
    window_rows,
)
from envs.workloads.trace_file import TRACE_WORKLOAD
from experiments._cli import (
    FROM_COMMAND_LINE,
    TRACE_PATHS,
    UsageError,
    check_workload,
    generator_params,
    main_guard,
    naming_params,
    parse_args,
    plugin_defaults,
    resolve_workload,
    terminating_as_interrupt,
    trace_defaults,
    workload_params,
)
from experiments._io import claim_out_dir, releasing_out_dirs
from experiments.evaluation import no_requests

COMMAND = "experiments.make_dataset"
DEFAULTS: dict[str, Any] = {
    "workload": PUBLISHED_WORKLOAD,
    "out_dir": "",
    "seed": PUBLISHED_SEED,
    "train_windows": -1,
    "test_windows": -1,
    "params": [],
    "progress": True,
    **trace_defaults(),
    **plugin_defaults(),
    "overwrite": False,
}
DATASET_FILES = ("train.jsonl", "val.jsonl", "test.jsonl", DATASET_INFO, "README.md")
"""Every file a dataset may have (``val.jsonl`` only when a trace has a val split):
one of these a new dataset does not write is an earlier dataset's and is removed
as the new one lands."""


def check_not_replaced(path: str, out_dir: str) -> None:
    """Refuse a trace to read that is one of the files the dataset written to
    ``out_dir`` replaces: the first split written would be read back half-made
    (rows of the other splits lost)."""
    where = Path(path).expanduser().resolve()
    if where.parent == Path(out_dir).expanduser().resolve() and where.name in DATASET_FILES:
        raise UsageError(
            f"{COMMAND}: workload.path={path!r} is the dataset's {where.name} in "
            f"out_dir={out_dir!r}, which this command replaces (copy it out of the "
            "folder, or choose another out_dir)"
        )


class AtomicLineWriter:
    """A text file written line by line to a temporary file in its folder.

    :meth:`finish` makes the temporary file durable, :meth:`land` renames it
    into place, and :meth:`discard` (always safe to call) removes whatever has
    not landed, so a set of writers can finish together and then land together.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        self._tmp = Path(tmp)
        self._handle = os.fdopen(fd, "w", encoding="utf-8")
        self.bytes = 0

    def write(self, line: str) -> None:
        try:  # once a row: no context manager built each time
            self._handle.write(line)
        except OSError as error:
            raise naming(error, self.path) from None
        self.bytes += len(line.encode("utf-8"))

    def finish(self) -> None:
        with naming_file(self.path):
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            os.chmod(self._tmp, file_mode())

    def land(self) -> None:
        with naming_file(self.path):
            os.replace(self._tmp, self.path)

    def discard(self) -> None:
        self._handle.close()
        self._tmp.unlink(missing_ok=True)


def make_dataset(
    workload: str,
    out_dir: str | os.PathLike[str],
    seed: int = PUBLISHED_SEED,
    train_windows: int | None = None,
    test_windows: int | None = None,
    params: dict[str, Any] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Write the dataset and return its ``dataset_info`` record. ``workload="trace"``
    writes a trace file's windows instead (``params``: the TraceOptions fields).
    SIGTERM meanwhile raises ``SystemExit(143)`` (SIGHUP ``SystemExit(129)``) once the
    files not landed are removed, unless the caller handles the signal itself (its
    handler is left in place)."""
    params = dict(params or {})
    if workload == TRACE_WORKLOAD:
        source = _trace_source(params)  # (its windows are those its rows fill: none is empty)
    else:
        source = _registry_source(workload, seed, train_windows, test_windows, params)
    description, block_tokens, generator, n_windows, rows_iter = source
    out = Path(out_dir)
    manifest: list[dict[str, Any]] = []
    counts = {split: _counts() for split in ("train", "test")}  # (their order in the info)
    writers: list[AtomicLineWriter] = []
    files: dict[str, AtomicLineWriter] = {}
    try:
        with terminating_as_interrupt(exiting=True):  # (SystemExit(143), as it always was)
            bar = tqdm(
                rows_iter, total=n_windows, desc=workload, unit="window", disable=not progress
            )
            for spec, rows in bar:
                if not rows:  # its statistics would be NaN, and every run refuses it
                    bar.close()
                    raise no_requests(
                        workload, spec.split, spec.trace_id, f"seed={seed}", "params= or seed="
                    )
                if spec.split not in files:  # a split's file is made by its first window
                    files[spec.split] = AtomicLineWriter(out / f"{spec.split}.jsonl")
                    writers.append(files[spec.split])
                    counts.setdefault(spec.split, _counts())  # a trace's val split
                file = files[spec.split]
                for row in rows:
                    file.write(json.dumps(row, separators=(",", ":"), allow_nan=False) + "\n")
                counts[spec.split]["windows"] += 1
                counts[spec.split]["rows"] += len(rows)
                longest = max((r["input_length"] + r["output_length"] for r in rows), default=0)
                counts[spec.split]["longest_tokens"] = max(
                    counts[spec.split]["longest_tokens"], longest
                )
                manifest.append(
                    {
                        "trace_id": spec.trace_id,
                        "family": spec.family,
                        "index": spec.index,
                        "split": spec.split,
                        "rows": len(rows),
                        "first_arrival_s": rows[0]["arrival_s"] if rows else None,
                        "last_arrival_s": rows[-1]["arrival_s"] if rows else None,
                        "job_kinds": dict(Counter(r["metadata"]["job_kind"] for r in rows)),
                    }
                )
            # a split of no windows has no file, and no entry
            counts = {split: c for split, c in counts.items() if split in files}
            for split, writer in files.items():
                counts[split]["bytes"] = writer.bytes
            info = {
                "name": workload,
                "description": description,
                "format": DATASET_LAYOUT,  # so the readers read the splits at block_tokens
                "block_tokens": block_tokens,
                "seed": seed,
                "generator": generator,
                "splits": counts,
                "windows": manifest,
            }
            for name, text in (
                (DATASET_INFO, dumps_strict(info, indent=2) + "\n"),
                ("README.md", dataset_card(info)),
            ):
                writers.append(AtomicLineWriter(out / name))
                writers[-1].write(text)
            for writer in writers:
                writer.finish()
            # an earlier dataset's file this one has no counterpart of (its val.jsonl)
            # goes first: it would describe windows the new dataset_info.json does not list
            landing = {writer.path.name for writer in writers}
            for name in DATASET_FILES:
                if name not in landing:
                    (out / name).unlink(missing_ok=True)
            # the data and the files describing it land together, after all are complete
            for writer in writers:
                writer.land()
    finally:
        for writer in writers:
            writer.discard()
    return info


def _counts() -> dict[str, int]:
    """A split's tally: windows, rows, bytes, and its longest request (input +
    output tokens), which a reader compares with the served model's context."""
    return {"windows": 0, "rows": 0, "bytes": 0, "longest_tokens": 0}


def context_note(info: dict[str, Any]) -> str | None:
    """What a reader needs to know when requests exceed the shortest context of a
    published setup's model (llama-3.3-70b's 131,072 tokens, ...): None if none does."""
    from envs.sim import SETUPS
    from envs.sim.timing import model_preset

    longest = max(c["longest_tokens"] for c in info["splits"].values())
    contexts = {model: model_preset(model).max_context_tokens for model, *_ in SETUPS.values()}
    context = min(c for c in contexts.values() if c is not None)
    if longest <= context:
        return None
    over = sorted(s for s, c in info["splits"].items() if c["longest_tokens"] > context)
    models = ", ".join(sorted(m for m, c in contexts.items() if c == context))
    return (
        f"Its longest request holds {longest:,} tokens (input + output; in {', '.join(over)}), "
        f"more than a {context:,}-token context ({models}): the generator does not bound "
        "requests by a model's context, and btb-gym's "
        "own runs of this workload serve them. Reading the files for such a model refuses "
        f"those rows, naming each; `workload.max_context_tokens={longest}` reads them as "
        "generated, `workload.skip_bad_rows=true` drops them."
    )


Source = tuple[str, int, dict[str, Any], int, Iterator[tuple[WindowSpec, list[dict[str, Any]]]]]
"""(description, block tokens, generator record, number of windows, (spec, rows) per window)."""


def _registry_source(
    workload: str,
    seed: int,
    train_windows: int | None,
    test_windows: int | None,
    params: dict[str, Any],
) -> Source:
    scenario = configure(workload, train_windows, test_windows, **params)
    applied = {
        key: config_dict(fam.config)[key]
        for key in params
        for fam in scenario.families
        if key in config_dict(fam.config)
    }
    command = f"python -m {COMMAND} workload={workload} seed={seed}"
    if train_windows is not None:
        command += f" train_windows={train_windows}"
    if test_windows is not None:
        command += f" test_windows={test_windows}"
    if params:
        command += " params=" + ",".join(f"{k}={v}" for k, v in params.items())
    generator = {
        "command": command,
        "workload": workload,
        "params": applied,
        "families": family_configs(scenario),
    }
    if is_plugin(workload):  # the code that made the rows (not its path: the same files anywhere)
        stamp = load_plugin(workload).stamp()
        generator["plugin"] = {key: stamp[key] for key in ("factory", "sha256")}
    rows = window_rows(workload, "all", seed, None, train_windows, test_windows, **params)
    n = sum(spec.split != "val" for spec in plan(scenario, seed))  # the published layout
    description = scenario.description
    own = configure(workload, None, None, **params)  # the workload's own counts
    if family_configs(own) != family_configs(scenario):  # counts the text may state
        description += (
            " This dataset has the windows given on its command line (the tables below), "
            "not the workload's own counts."
        )
    generator_given = {k: v for k, v in params.items() if k not in SPLIT_PARAMETERS}
    given = ", ".join(f"{k}={v}" for k, v in generator_given.items())
    if generator_given and is_plugin(workload):  # its docstring, if any, is of its defaults
        if inspect.getdoc(load_plugin(workload).function):
            description += (
                f" Its parameters are not the function's defaults ({given}): its docstring "
                "above may describe other rows than this dataset's."
            )
    elif generator_given:  # figures the text states (bursts, requests, decoys) may be others here
        description += (
            f" Its generator parameters are not the workload's ({given}): the figures "
            "above describe the workload, not this dataset."
        )
    return description, scenario.block_tokens, generator, n, rows


def _trace_source(params: dict[str, Any]) -> Source:
    from envs.workloads.trace_file import (
        TraceOptions,
        TraceWindow,
        plan_trace,
        provenance,
        trace_windows,
    )
    from envs.workloads.trace_file import window_rows as trace_window_rows

    options = TraceOptions(**params)
    trace_plan = plan_trace(options)
    stamp = provenance(options)
    changed = {k: v for k, v in params.items() if v != getattr(TraceOptions(), k)}
    command = f"python -m {COMMAND} workload={TRACE_WORKLOAD} " + " ".join(
        f"workload.{k}={v}" for k, v in changed.items()
    )
    generator = {"command": command, "workload": TRACE_WORKLOAD, "params": params, "file": stamp}
    description = (
        f"The {trace_plan.format} trace {stamp['file']} (sha256 {stamp['sha256'][:12]}...), "
        f"cut into {len(trace_plan.windows)} windows and split by {trace_plan.split_from}."
    )

    def rows() -> Iterator[tuple[WindowSpec, list[dict[str, Any]]]]:
        plan_windows: list[TraceWindow] = list(trace_plan.windows)
        for window, workload in zip(plan_windows, trace_windows(options, "all"), strict=True):
            spec = WindowSpec(
                TRACE_WORKLOAD, trace_stem(options.path), window.position, window.split,
                window.trace_id,
            )  # fmt: skip
            yield spec, trace_window_rows(workload)

    return description, trace_plan.window_block_tokens, generator, len(trace_plan.windows), rows()


def _fields(info: dict[str, Any], generated: bool) -> list[str]:
    """The README's list of a row's fields, of a registered workload's dataset
    (``generated``) or a trace file's."""
    return [
        "- `request_id`, `trace_id` (the window), `source` (`art`: ART-like background "
        "traffic; `synthetic`: generated bursts, decoys, agents)",
        "- `arrival_s`: seconds from the window's start",
        "- `input_length`, `output_length`: tokens",
        (
            f"- `hash_ids`: one 24-hex hash per {info['block_tokens']}-token prompt block "
            "(per-block, not chained); equal leading hashes mean a shared prefix"
            if generated
            else f"- `hash_ids`: the trace's chained block ids, {info['block_tokens']} tokens a "
            "block"
        ),
        "- `group_id` (the job), `split`, `metadata.job_kind` "
        "(`burst`, `decoy`, `background`, `agent`)",
        "- `tenant` (multi-tenant workloads only): prompts of different tenants never share KV",
    ]


def _own_fields(info: dict[str, Any]) -> list[str]:
    """The README's list of a row's fields, of a workload of one's own's dataset: the
    values its function gave (docs/workloads.md, "A workload of one's own")."""
    return [
        "- `request_id` (where the function gave none, `<trace_id>-<n>`, n the row's "
        "place in the list it returned), `trace_id` (the window), `source` (as it gave it, "
        '"" where it gave none)',
        "- `arrival_s`: seconds from the window's start",
        "- `input_length`, `output_length`: tokens",
        f"- `hash_ids`: the prompt's block hashes as the function returned them, one per "
        f"{info['block_tokens']}-token block (strings or integers; per-block, not chained: "
        "btb-gym's readers chain them as they read); prompts share a block exactly when "
        "their hashes agree up to it",
        '- `group_id` (the job), `split`, `metadata.job_kind`: as the function gave them ("" '
        "where it gave none)",
        "- `tenant` (where the function gave one): prompts of different tenants never share KV",
    ]


def dataset_card(info: dict[str, Any]) -> str:
    """A short README for the dataset: what it is, how it was made, how to read it."""
    families = info["generator"].get("families", {})  # none for a trace file
    workload = str(info["generator"].get("workload", ""))
    own = workload.removeprefix(PLUGIN_PREFIX) if is_plugin(workload) else ""
    lines = [
        f"# {info['name']} (btb-gym generated dataset)",
        "",
        info["description"],
        "",
        f"Generated by `{info['generator']['command']}`; the same arguments give "
        + (
            "byte-identical files with the same code of the function (the sha256 "
            "`dataset_info.json` records)."
            if own
            else "byte-identical files."
        ),
        "",
        "| split | windows | rows | bytes | longest request (tokens) |",
        "|---|--:|--:|--:|--:|",
    ]
    for split in info["splits"]:
        c = info["splits"][split]
        lines.append(
            f"| {split} | {c['windows']:,} | {c['rows']:,} | {c['bytes']:,} "
            f"| {c['longest_tokens']:,} |"
        )
    note = context_note(info)
    if note is not None:
        lines += ["", note]
    if families:
        lines += [
            "",
            "| family | generator | train windows | test windows |",
            "|---|---|--:|--:|",
        ]
        for name, fam in families.items():
            lines.append(
                f"| {name} | {fam['generator']} | {fam['train_windows']} | {fam['test_windows']} |"
            )
        streams = {fam.get("train_streams", "shared") for fam in families.values()}
        if streams == {"own"}:
            lines += [
                "",
                "Train windows are drawn from a seed of their own, derived from the dataset's "
                "(`train_streams=own`): none shares a prompt with a test window.",
            ]
        elif streams == {"shared"}:
            lines += [
                "",
                "Every window is drawn from the dataset's seed (`train_streams=shared`): a "
                "train window may share its prompts with a test window of a sibling family "
                "(docs/workloads.md).",
            ]
        if info["generator"]["params"]:
            changed = ", ".join(f"`{k}={v}`" for k, v in info["generator"]["params"].items())
            owner = "function's" if own else "workload's"
            lines += ["", f"Parameters changed from the {owner} defaults: {changed}."]
    lines += [
        "",
        "## Layout",
        "",
        (
            "`train.jsonl` and `test.jsonl` hold one JSON object per request, grouped by "
            "window (`trace_id`) and in arrival order within a window. Windows are split "
            "whole: no window has rows in both files."
            if {"train", "test"} <= set(info["splits"])
            else f"`{next(iter(info['splits']))}.jsonl` holds one JSON object per request, "
            "grouped by window (`trace_id`) and in arrival order within a window (a split of "
            "no windows has no file)."
        ),
        "",
        *(_own_fields(info) if own else _fields(info, bool(families))),
        "",
        "`dataset_info.json` lists every window (rows, arrival span, job kinds) and the "
        "generator configuration of each family, and records the block size: btb-gym's "
        "readers read the splits at it."
        + (
            " It records the sha256 of the function's code as well (`generator.plugin`: "
            "its module and the modules of one's own it imports), not the code."
            if own
            else ""
        ),
        "",
        "## Reading",
        "",
        "```python",
        "from envs.workloads import iter_bursted_windows",
        "for window in iter_bursted_windows('test.jsonl'):  # one window in memory at a time",
        "    ...",
        "```",
        "",
        "## Caveats",
        "",
        (
            f"The rows are those `{own}` returned, checked as a trace file's rows are and put "
            "in arrival order: what they hold is the function's, synthetic or not."
            if own
            else "ART-like windows are generated to approximate ART-Chat's published "
            "statistics (docs/workloads.md in btb-gym lists how close they come); they are "
            "not ART-Chat data. All content is synthetic: hashes name no real text."
            if families
            else "The rows are the trace file's, cut into windows (`arrival_s` from each "
            "window's start); `dataset_info.json` names the file and its sha256."
        ),
        "",
    ]
    return "\n".join(lines)


@releasing_out_dirs
def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``key=value`` options and write the dataset."""
    options = parse_args(COMMAND, DEFAULTS, argv)
    options["workload"] = resolve_workload(COMMAND, options)
    check_workload(COMMAND, options["workload"])
    if not options["out_dir"]:
        raise UsageError(f"{COMMAND}: out_dir=PATH is required")
    if options["seed"] < 0:
        raise UsageError(
            f"{COMMAND}: seed must be >= 0 (a numpy seed), got "
            f"{echoed(options['seed'], quoted=False)}{FROM_COMMAND_LINE}"
        )
    for key in ("train_windows", "test_windows"):  # -1, the default: the workload's own
        if options[key] < -1:
            raise UsageError(
                f"{COMMAND}: {key} must be >= 0 (or -1: the workload's own count), "
                f"got {echoed(options[key], quoted=False)}{FROM_COMMAND_LINE}"
            )
    counts = "give train_windows=N test_windows=N"
    params = generator_params(
        COMMAND,
        options["params"],
        {  # (a registered workload's dataset has no val split: _registry_source)
            "train_windows": counts,
            "test_windows": counts,
            "val_windows": f"a registered workload's dataset has no validation windows; {counts}",
        },
    )
    trace = workload_params(COMMAND, options)
    if trace and (params or options["train_windows"] >= 0 or options["test_windows"] >= 0):
        raise UsageError(
            f"{COMMAND}: workload=trace is split by workload.test_fraction and "
            "workload.val_fraction; params=, train_windows= and test_windows= do not apply"
        )
    train_windows = None if options["train_windows"] < 0 else options["train_windows"]
    test_windows = None if options["test_windows"] < 0 else options["test_windows"]
    if train_windows == 0 and test_windows == 0:
        raise UsageError(
            f"{COMMAND}: train_windows=0 and test_windows=0 make a dataset of no windows "
            "(give one of them at least 1, or -1 for the workload's own count)"
        )
    if not trace:  # checked before the folder is claimed
        with naming_params(COMMAND, params, options["workload"]):
            configure(options["workload"], train_windows, test_windows, None, **params)
    # nothing cleared up front with overwrite=true, so a failed run leaves the old
    # dataset whole: make_dataset replaces its files as they land (DATASET_FILES)
    if trace:
        check_not_replaced(trace["path"], options["out_dir"])
    claim_out_dir(options["out_dir"], f"{COMMAND}: out_dir", (), options["overwrite"])
    with naming_params(
        COMMAND, params, options["workload"]
    ):  # (a generator failing on a window names them too)
        info = make_dataset(
            workload=options["workload"],
            out_dir=options["out_dir"],
            seed=options["seed"],
            train_windows=train_windows,
            test_windows=test_windows,
            params=trace or params,
            progress=options["progress"],
        )
    for split in info["splits"]:
        c = info["splits"][split]
        print(
            f"{split}: {plural(c['windows'], 'window')}, {plural(c['rows'], 'row')}, "
            f"{c['bytes']:,} bytes"
        )
    print(f"wrote {Path(options['out_dir']) / DATASET_INFO}")
    note = context_note(info)
    if note is not None:
        print(f"note: {note}")
    return info


if __name__ == "__main__":
    raise SystemExit(main_guard(main, TRACE_PATHS))
