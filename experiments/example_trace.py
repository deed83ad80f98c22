"""Write the example Mooncake-format trace (``envs/workloads/example_trace.py`` says what it holds).

    python -m experiments.example_trace out=examples/mooncake_example.jsonl [seed=20260721]
        [overwrite=false]

The file is written atomically; an existing file is kept unless ``overwrite=true``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from envs.files import write_text_atomic
from envs.sim.errors import echoed
from envs.workloads.bursted import PUBLISHED_SEED
from envs.workloads.example_trace import example_mooncake_text
from experiments._cli import FROM_COMMAND_LINE, UsageError, main_guard, parse_args
from experiments._io import check_not_home_shorthand

COMMAND = "experiments.example_trace"
DEFAULTS: dict[str, Any] = {"out": "", "seed": PUBLISHED_SEED, "overwrite": False}


def main(argv: list[str] | None = None) -> Path:
    options = parse_args(COMMAND, DEFAULTS, argv)
    if not options["out"]:
        raise UsageError(f"{COMMAND}: out=FILE is required")
    if options["seed"] < 0:
        raise UsageError(
            f"{COMMAND}: seed must be >= 0, got "
            f"{echoed(options['seed'], quoted=False)}{FROM_COMMAND_LINE}"
        )
    out = Path(options["out"])
    label = f"{COMMAND}: out={options['out']!r}"
    check_not_home_shorthand(out, label)
    if out.is_dir():
        raise UsageError(f"{label} is a folder; give a file path")
    if options["out"].endswith(("/", os.sep)):
        raise UsageError(f"{label} names a folder (it ends in /); give a file path")
    folder = out.parent  # the folders on the way are made; each one there must be one
    while not folder.exists() and not folder.is_symlink() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        what = "a broken symlink" if folder.is_symlink() else "a file, not a folder"
        raise UsageError(f"{label}: {folder} is {what}")
    # a link (one to nowhere too) is replaced as a file is
    if (out.exists() or out.is_symlink()) and not options["overwrite"]:
        broken = " (a broken symlink)" if not out.exists() else ""
        raise UsageError(f"{label} exists{broken}; overwrite=true replaces it")
    text = example_mooncake_text(options["seed"])
    path = write_text_atomic(out, text)
    print(f"wrote {path} ({text.count(chr(10)):,} requests, {len(text.encode()):,} bytes)")
    return path


if __name__ == "__main__":
    raise SystemExit(main_guard(main))
