"""The thresholds agents on a trace whose requests end in a suffix of more than one
block, with and without ``y_tokens``: ``thresholds.md`` (section "Your own trace").

    python docs/results/suffix_key.py [FOLDER]

Writes two Mooncake traces into FOLDER (default: a new temporary folder; an
existing FOLDER must hold no run folders of an earlier run): 16 windows
of 120 s at 512-token blocks, each with two bursts of 50 requests 0.1 s apart
sharing 12,288 tokens (24 blocks) and 150 one-off requests of 1,000-8,000
tokens. In ``one_block.jsonl`` each burst request's own suffix is 300 tokens (one
block), in ``two_blocks.jsonl`` 800 (two blocks); everything else is drawn the
same. Then runs ``experiments.compare`` on the 4 test windows of each (70b_h100x4,
causal KV, seed 0) with the agents' own key, with ``y_tokens=12288`` (the
shared prefix) and ``y_tokens=8192`` (part of it), and prints the table: mean
TTFT (s), p95 (s), warm copies. Then runs every policy and shipped agent on
``two_blocks.jsonl`` read as it is and with ``workload.merge_blocks=2`` (blocks of
1,024 tokens, each suffix one block of its own), and prints that table
(traces.md). Last, it writes ``two_blocks_1024.jsonl``, the same trace at
1,024-token blocks, runs it as well, and says how many rows have the merged
read's mean TTFT to the bit.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

AGENTS = ("ppo_thresholds", "ppo_thresholds_eft", "ppo_thresholds_spread")
BASELINES = ("cache_aware", "btb", "btb_pending")
SUFFIXES = {"one_block": 300, "two_blocks": 800}


def write_trace(path: Path, suffix_tokens: int, block_tokens: int = 512) -> None:
    rng = random.Random(7)
    next_id = 0

    def fresh(n: int) -> list[int]:
        nonlocal next_id
        next_id += n
        return list(range(next_id - n, next_id))

    rows = []
    for w in range(16):
        t0 = w * 120.0
        for b in range(2):
            shared = fresh(12288 // block_tokens)
            start = t0 + 10 + b * 55 + rng.uniform(0, 5)
            for i in range(50):
                own = fresh(-(-suffix_tokens // block_tokens))
                rows.append((start + i * 0.1, 12288 + suffix_tokens, 64, shared + own))
        for _ in range(150):
            n = rng.randint(1000, 8000)
            blocks = fresh(-(-n // block_tokens))
            rows.append((t0 + rng.uniform(0, 120), n, rng.randint(20, 200), blocks))
    rows.sort(key=lambda r: r[0])
    with path.open("w") as f:
        for t, n, out, ids in rows:
            row = {"timestamp": int(t * 1000), "input_length": n, "output_length": out}
            f.write(json.dumps({**row, "hash_ids": ids}) + "\n")


def run_compare(trace: Path, out: Path, *options: str) -> dict[str, dict]:
    """``experiments.compare`` on the trace's 4 test windows: its rows by policy."""
    command = [
        sys.executable,
        "-m",
        "experiments.compare",
        "workload=trace",
        f"workload.path={trace}",
        "workload.window_s=120",
        "workload.val_fraction=0.25",
        "windows=0",
        f"out_dir={out}",
        *options,
    ]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    rows = json.loads((out / "results.json").read_text())["rows"]
    return {row["policy"]: row for row in rows}


def compare(trace: Path, out: Path, y_tokens: int | None) -> dict[str, dict]:
    names = AGENTS if y_tokens is None else (*BASELINES, *AGENTS)
    keyed = [name for name in names if y_tokens and name != "cache_aware"]
    settings = [f"{name}.y_tokens={y_tokens}" for name in keyed]
    options = [
        f"policies={'cache_aware' if y_tokens is None else ','.join(BASELINES)}",
        f"agents={','.join(AGENTS)}",
    ]
    if settings:
        options.append("policy_kwargs=" + ",".join(settings))
    return run_compare(trace, out, *options)


def cell(row: dict) -> str:
    copies = row.get("warm_copies")  # (none for the floor)
    return (
        f"{row['ttft_mean_s']:.3f} / {row['ttft_p95_s']:.3f} / {'-' if copies is None else copies}"
    )


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    folder.mkdir(parents=True, exist_ok=True)
    earlier = sorted(p.name for p in folder.iterdir() if p.is_dir())
    if earlier:  # compare refuses to write over a run: say so before anything runs
        sys.exit(f"suffix_key.py: {folder} holds run folders already ({', '.join(earlier)})")
    runs: dict[tuple[str, int | None], dict[str, dict]] = {}
    for name, suffix in SUFFIXES.items():
        trace = folder / f"{name}.jsonl"
        write_trace(trace, suffix)
        for y in (None, 12288, 8192):
            runs[name, y] = compare(trace, folder / f"{name}_y{y or 'own'}", y)
    print("| policy | key | one-block suffix: mean / p95 / copies | two blocks |")
    print("|---|---|--:|--:|")
    order = [("cache_aware", None)] + [(b, y) for b in BASELINES[1:] for y in (12288, 8192)]
    order += [(a, y) for a in AGENTS for y in (None, 12288, 8192)]
    for policy, y in order:
        key = "each prompt but its last block" if y is None else f"first {y:,} tokens"
        if policy == "cache_aware":
            key = "-"
        cells = [cell(runs[name, y][policy]) for name in SUFFIXES]
        print(f"| {policy} | {key} | {' | '.join(cells)} |")
    merged = {
        k: run_compare(
            folder / "two_blocks.jsonl", folder / f"merge{k}", f"workload.merge_blocks={k}"
        )
        for k in (1, 2)
    }
    # the merged read against the same trace written at 1,024-token blocks: every row
    coarse = folder / "two_blocks_1024.jsonl"
    write_trace(coarse, SUFFIXES["two_blocks"], block_tokens=1024)
    written = run_compare(coarse, folder / "written1024", "workload.block_tokens=1024")
    same = [p for p in merged[2] if merged[2][p]["ttft_mean_s"] == written[p]["ttft_mean_s"]]
    print(f"merge_blocks=2 against the trace written at 1,024-token blocks: {len(same)} of "
          f"{len(merged[2])} rows have the same mean TTFT to the last bit")  # fmt: skip
    print()
    print("| policy | two-block suffix, 512-token blocks | merge_blocks=2 (1,024-token blocks) |")
    print("|---|--:|--:|")
    for policy in merged[1]:
        if policy in merged[2] and not policy.startswith("floor_"):
            print(f"| {policy} | {cell(merged[1][policy])} | {cell(merged[2][policy])} |")


if __name__ == "__main__":
    main()
