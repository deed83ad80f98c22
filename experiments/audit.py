"""Audit a trace for the bursts that KV warming targets.

Usage::

    python -m experiments.audit path=FILE [format=auto|mooncake|art|bursted|qwen]
        [min_tokens=4096] [fanout_s=10] [out_dir=PATH] [json=false] [per_window=false]
        [skip_bad_rows=false] [max_bad_fraction=0.01] [strict_block_count=true]
        [block_tokens=N] [merge_blocks=1] [time_unit=auto|s|ms|us|ns]

Reports raw arrival bursts (the busiest 1 s / 10 s / 60 s) and the largest
same-prefix fan-out: the most requests sharing their first ``min_tokens`` tokens
(the fewest whole blocks of the trace that hold them; 4,096 tokens = 16 blocks
of 256 tokens, 8 of 512) that arrive within 1 s, 10 s, 60 s, ``fanout_s``
seconds and the whole trace (definitions in envs/workloads/stats.py), and how
many requests share leading blocks with others while their prompt less its last
block ends in blocks of their own (a suffix longer than one block: the copying
policies see no shared prefix there). ``merge_blocks=K`` audits the trace in
blocks K times as long, as ``workload.merge_blocks`` reads it.
Bursted-ART files are audited window by window (streamed) and the maxima are
reported with the window they come from. ``fanout_s`` is a finite number of
seconds (the whole trace is a row of its own): an interval of the fan-out rows,
not a window's length, which the file's own windows set (``window_s=``, its old
spelling, is read as it with a note). Prints a table (or the JSON with
``json=true``: stdout holds the JSON alone); with ``out_dir`` also writes
``audit.json`` there, atomically. Besides the figures, ``audit.json`` records the
read: ``read_settings`` (``time_unit`` as given and ``time_unit_read``, the unit
taken; ``block_tokens`` as given, null for the format's, and ``block_tokens_read``;
``skip_bad_rows``, ``max_bad_fraction``, ``strict_block_count``) and ``read``
(rows read and skipped, rows out of order).
"""

from __future__ import annotations

import gzip
import math
import sys
import zlib
from pathlib import Path
from typing import Any

from envs.files import dumps_strict, write_json_atomic
from envs.sim.errors import echoed
from envs.sim.request import merged_workload
from envs.workloads.readers import (
    ReadOptions,
    ReadReport,
    canonical_format,
    detect_format,
    iter_trace_windows,
)
from envs.workloads.stats import audit_windows
from experiments._cli import (
    FROM_COMMAND_LINE,
    UsageError,
    given_twice,
    input_paths,
    main_guard,
    parse_args,
)
from experiments._io import claim_out_dir, releasing_out_dirs
from experiments.report import audit_table

COMMAND = "experiments.audit"
DEFAULTS: dict[str, Any] = {
    "path": "",
    "format": "auto",
    "min_tokens": 4096,
    "fanout_s": 10.0,
    "out_dir": "",
    "json": False,
    "per_window": False,
    "skip_bad_rows": False,
    "max_bad_fraction": 0.01,
    "strict_block_count": True,
    "block_tokens": 0,
    "merge_blocks": 1,
    "time_unit": "auto",
    "overwrite": False,
}


def _not_utf8(path: str, error: UnicodeDecodeError) -> str:
    """Where the first byte that is not UTF-8 is: line and column (1-based) and the byte."""
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as bad:
                byte = line[bad.start]
                return f"line {number}, column {bad.start + 1}: byte 0x{byte:02x} is not UTF-8 text"
    return f"not UTF-8 text ({error.reason})"  # e.g. a compressed file's content


def check_numbers(min_tokens: int, fanout_s: float, merge_blocks: int, where: str = "") -> None:
    """Refuse a ``min_tokens``, ``fanout_s`` or ``merge_blocks`` out of range in one
    line; ``where`` says where the value came from (`` (from the command line)``)."""
    if min_tokens < 1:
        raise UsageError(
            f"{COMMAND}: min_tokens must be >= 1, got {echoed(min_tokens, quoted=False)}{where}"
        )
    if not (fanout_s > 0 and math.isfinite(fanout_s)):  # the whole trace is a row already
        raise UsageError(
            f"{COMMAND}: fanout_s must be a finite number > 0, got "
            f"{echoed(fanout_s, quoted=False)}{where}"
        )
    if merge_blocks < 1:
        raise UsageError(
            f"{COMMAND}: merge_blocks must be an integer >= 1, got "
            f"{echoed(merge_blocks, quoted=False)}{where}"
        )


def audit_file(
    path: str,
    format: str = "auto",
    min_tokens: int = 4096,
    fanout_s: float = 10.0,
    skip_bad_rows: bool = False,
    max_bad_fraction: float = 0.01,
    strict_block_count: bool = True,
    block_tokens: int | None = None,
    time_unit: str = "auto",
    merge_blocks: int = 1,
) -> dict[str, Any]:
    """Audit one trace file; returns the report written as ``audit.json``."""
    if Path(path).is_dir():
        raise UsageError(f"{COMMAND}: path={path!r} is a folder; give one trace file")
    if not Path(path).is_file():
        why = " is not a regular file" if Path(path).exists() else ": no such file"
        raise UsageError(f"{COMMAND}: path={path!r}{why}")
    if format != "auto":
        try:
            format = canonical_format(format)
        except ValueError as error:
            raise UsageError(f"{COMMAND}: format={format!r}: {error}") from None
    check_numbers(min_tokens, fanout_s, merge_blocks)
    try:
        options = ReadOptions(
            skip_bad_rows=skip_bad_rows,
            max_bad_fraction=max_bad_fraction,
            strict_block_count=strict_block_count,
            block_tokens=block_tokens,
            time_unit=time_unit,
        )
    except ValueError as error:  # named as this command's option
        raise UsageError(f"{COMMAND}: {str(error).removeprefix('ReadOptions.')}") from None
    try:
        name = detect_format(path) if format == "auto" else format
        report = ReadReport(source=path)
        windows = iter_trace_windows(path, format=name, options=options, report=report)
        merged = (merged_workload(w, merge_blocks) for w in windows)
        result = audit_windows(merged, min_tokens=min_tokens, window_s=fanout_s)
    except UnicodeDecodeError as error:
        raise UsageError(f"{COMMAND}: path={path!r}: {_not_utf8(path, error)}") from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as error:  # a .gz cut short or damaged
        raise UsageError(
            f"{COMMAND}: path={path!r}: the gzip data is truncated or corrupt ({error})"
        ) from None
    return {
        "path": path,
        "format": name,
        "min_tokens": min_tokens,
        "fanout_s": fanout_s,
        "merge_blocks": merge_blocks,
        "read_settings": {
            "time_unit": time_unit,
            "time_unit_read": report.time_unit,
            "block_tokens": block_tokens,
            "block_tokens_read": result["overall"]["block_tokens"] // merge_blocks,
            "skip_bad_rows": skip_bad_rows,
            "max_bad_fraction": max_bad_fraction,
            "strict_block_count": strict_block_count,
        },
        "read": report.as_dict(),
        **result,
    }


OLD_FANOUT = "window_s"
"""``fanout_s``'s spelling until 2026-12-06, read as it with a note: it read as the
runs' ``workload.window_s`` (a window's length), which the audit does not take."""


def old_spellings(args: list[str]) -> list[str]:
    """``args`` with ``window_s=`` read as ``fanout_s=``, said in one note line (on
    stderr: with ``json=true`` stdout holds the JSON alone)."""
    given = [arg.partition("=")[0] for arg in args]
    if OLD_FANOUT not in given or any(a in {"-h", "--help"} for a in args):
        return args
    if given.count(OLD_FANOUT) > 1:  # (read as fanout_s=, it was said as fanout_s= twice)
        raise given_twice(COMMAND, OLD_FANOUT)
    if "fanout_s" in given:
        raise UsageError(
            f"{COMMAND}: {OLD_FANOUT}= is fanout_s='s old spelling; give fanout_s= alone"
        )
    read = [f"fanout_s={arg.partition('=')[2]}" if key == OLD_FANOUT else arg
            for key, arg in zip(given, args)]  # fmt: skip
    value = args[given.index(OLD_FANOUT)].partition("=")[2]
    print(
        f"note: {COMMAND}: {OLD_FANOUT}= is now fanout_s=, an extra interval for the fan-out "
        f"rows, not a window's length (audit reads the file's own windows); read as "
        f"fanout_s={value}",
        file=sys.stderr,
    )
    return read


@releasing_out_dirs
def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``key=value`` options, audit the file, print and optionally save the result."""
    options = parse_args(COMMAND, DEFAULTS, old_spellings(sys.argv[1:] if argv is None else argv))
    if not options["path"]:
        raise UsageError(f"{COMMAND}: path=FILE is required")
    check_numbers(
        options["min_tokens"], options["fanout_s"], options["merge_blocks"], FROM_COMMAND_LINE
    )
    if options["out_dir"]:
        claim_out_dir(
            options["out_dir"],
            f"{COMMAND}: out_dir",
            ("audit.json",),
            options["overwrite"],
            inputs=input_paths(options.get),
        )
    audit = audit_file(
        options["path"],
        format=options["format"],
        min_tokens=options["min_tokens"],
        fanout_s=options["fanout_s"],
        skip_bad_rows=options["skip_bad_rows"],
        max_bad_fraction=options["max_bad_fraction"],
        strict_block_count=options["strict_block_count"],
        block_tokens=options["block_tokens"] or None,
        time_unit=options["time_unit"],
        merge_blocks=options["merge_blocks"],
    )
    if options["json"]:
        print(dumps_strict(audit, indent=2))
    else:
        print(audit_table(audit, per_window=options["per_window"]))
    if options["out_dir"]:
        target = write_json_atomic(Path(options["out_dir"]) / "audit.json", audit)
        # with json=true, stdout is the JSON alone
        print(f"wrote {target}", file=sys.stderr if options["json"] else sys.stdout)
    return audit


if __name__ == "__main__":
    raise SystemExit(main_guard(main))
