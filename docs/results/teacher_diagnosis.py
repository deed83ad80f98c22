"""Where oracle_warm's and the causal teacher's TTFT above the floor goes, and the
rules tried against it: the numbers of ``teacher_diagnosis.md``.

    python docs/results/teacher_diagnosis.py split [WINDOWS]   # the split tables
    python docs/results/teacher_diagnosis.py rules [WINDOWS]   # rule x family table
    python docs/results/teacher_diagnosis.py test [WINDOWS]    # the final table (test)
    python docs/results/teacher_diagnosis.py setups [WINDOWS]  # other setups (validation)

llama-3.3-70b on four 4xH100 nodes (``70b_h100x4``), causal KV, the first
``WINDOWS`` (default 4) *validation* windows of each family (``split="val"``,
the generator's published seed), evaluation seed 0 (window i runs with
``default_rng([0, i])``, as ``experiments.evaluation`` does).

**split**: each request's TTFT is ``admit - arrival + reuse + prefill``
(``envs.sim.metrics.Records``); its floor (``envs.sim.floor``) is ``wait +
prefill'``, the cheapest of its options (cold, or reuse of a shared prefix
once its KV can exist). The excess ``TTFT - floor`` is split into the queueing
after the floor's own wait (``[arrival + wait, admit]``), by what the node was
doing meanwhile (prefilling a burst request, a decoy, a background one;
a warm copy on its timeline; a decode segment; nothing: waiting for a copy to
land), the reuse seconds (loading the hit from HBM, which the floor leaves
out), and the prefill above the floor's (a hit the request did not get).
``rest`` is what is left (negative when a request recomputed sooner than the
floor's option would have waited). The node timelines come from the reference
(Python) core, which gives the same run as the compiled one.

**rules**: the mean TTFT of each rule on each family, against oracle_warm.

**setups**: oracle_warm, the teacher and the teacher with the chosen rule on the
validation windows of ``qwen3_8b_h100x4`` and ``glm45_h100x4``.

**test**: the rule chosen on validation (the spare node, ``long_prefill_s=0.25``)
beside oracle_warm and the teacher without it, on the first ``WINDOWS`` (default
15: all) *test* windows; mean / p95 TTFT.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from agents.teacher import CausalTeacher
from baselines.oracle import OracleWarm
from baselines.policy import Policy
from baselines.routers import soonest_node
from envs.sim import SimConfig, Simulator, setup_cluster
from envs.sim.floor import _request_options
from envs.sim.forecast import copy_bytes, copy_s, estimates_with_hits, usable_tokens
from envs.sim.node import COPY, DECODE, PREFILL, Node
from envs.sim.request import Request, Workload
from envs.sim.simulator import WARM_OK
from envs.windows import window_pool
from envs.workloads.bursted import PUBLISHED_SEED
from experiments.evaluation import run_window

SETUP = "70b_h100x4"
FAMILIES = ("bursted_synthetic", "bursted_synthetic_1s", "rising_load", "mixed", "art_like")
SPLIT_FAMILIES = ("bursted_synthetic", "rising_load", "mixed")
MIN_PULL_TOKENS = 4096
COLUMNS = (
    "behind burst",
    "behind decoy",
    "behind background",
    "copy",
    "decode",
    "idle",
    "reuse",
    "extra prefill",
    "rest",
)


# ------------------------------------------------------------------ the split
class Traced(Simulator):
    """The reference core, keeping each node's work items (start, end, kind, request)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.items: list[list[tuple[float, float, int, Any]]] = [[] for _ in self.nodes]

    def _begin(self, node: Node, t: float, end: float) -> None:
        log = self.items[node.index]
        if log and node.work == DECODE and log[-1][2] == DECODE and log[-1][0] == t:
            log[-1] = (t, end, DECODE, None)  # a decode segment cut short (an arrival)
        else:
            log.append((t, end, node.work, node.work_obj if node.work == PREFILL else None))
        super()._begin(node, t, end)


def busy_with(items: list[tuple[float, float, int, Any]], a: float, b: float) -> dict[str, float]:
    """Seconds of [a, b] the node spent on each kind of work item."""
    out = dict.fromkeys(COLUMNS[:6], 0.0)
    if b <= a:
        return out
    for start, end, kind, obj in items:
        if end <= a or start >= b:
            continue
        seconds = min(end, b) - max(start, a)
        if kind == PREFILL:
            job = obj.job_kind if obj.job_kind in ("burst", "decoy") else "background"
            out[f"behind {job}"] += seconds
        elif kind == COPY:
            out["copy"] += seconds
        elif kind == DECODE:
            out["decode"] += seconds
    out["idle"] = (b - a) - sum(out.values())
    return out


def split_rows(policy: Policy, window: Workload, position: int) -> list[dict[str, Any]]:
    """Per request: its kind, TTFT, floor and the excess split into :data:`COLUMNS`."""
    cluster = setup_cluster(SETUP)
    config = SimConfig()
    sim = Traced(cluster, window, config, np.random.default_rng([0, position]))
    rec = policy.run(sim)
    floor, options = _request_options(cluster, window, config)
    costs = sim.nodes[0].costs
    rows = []
    for r in window.requests:
        k = r.index
        hit = int(rec.hit_hbm_tokens[k] + rec.hit_ram_tokens[k] + rec.hit_disk_tokens[k])
        prefill = costs.prefill_s(int(rec.prefill_tokens[k]), hit)
        start, floor_prefill = min(options[k], key=lambda o: o[0] + o[1])
        admit = float(rec.admit_s[k])
        parts = busy_with(sim.items[int(rec.node[k])], start, admit)
        parts["reuse"] = float(rec.reuse_s[k])
        parts["extra prefill"] = prefill - floor_prefill
        excess = float(rec.ttft_s[k]) - float(floor[k])
        parts["rest"] = excess - sum(parts.values())
        rows.append(
            {
                "kind": r.job_kind or "background",
                "ttft": float(rec.ttft_s[k]),
                "floor": float(floor[k]),
                "excess": excess,
                **parts,
            }
        )
    return rows


SPLIT_POLICIES: dict[str, Callable[[], Policy]] = {
    "oracle_warm": OracleWarm,
    "causal_teacher (clock)": lambda: CausalTeacher(routing="clock"),
    "causal_teacher (backlog)": lambda: CausalTeacher(routing="backlog"),
    "causal_teacher (backlog, long_prefill_s=0.25)": lambda: CausalTeacher(
        routing="backlog", long_prefill_s=0.25
    ),
}


def split_table(windows: int) -> list[str]:
    out = []
    for family in SPLIT_FAMILIES:
        pool = window_pool(family, "val", PUBLISHED_SEED, windows)
        out += [
            f"#### {family} ({windows} validation windows)",
            "",
            "| policy | kind (requests) | mean TTFT | floor | excess | "
            + " | ".join(COLUMNS)
            + " |",
            "|---|---|" + "--:|" * (3 + len(COLUMNS)),
        ]
        for name, make in SPLIT_POLICIES.items():
            rows = [row for i, w in enumerate(pool) for row in split_rows(make(), w, i)]
            n = len(rows)
            kinds = sorted({row["kind"] for row in rows})
            for kind in ("all", *kinds):
                sel = [row for row in rows if kind == "all" or row["kind"] == kind]
                # each kind's share of the all-request mean: the kinds' rows add up to "all"
                total = {
                    c: sum(row[c] for row in sel) / n for c in ("ttft", "floor", "excess", *COLUMNS)
                }
                out.append(
                    f"| {name if kind == 'all' else ''} | {kind} ({len(sel)}) | "
                    + " | ".join(f"{total[c]:.4f}" for c in ("ttft", "floor", "excess", *COLUMNS))
                    + " |"
                )
        out.append("")
    return out


# ------------------------------------------------------------------ rules tried
def decode_wait_s(node: Node, now: float) -> float:
    """Seconds until the decode step in progress on ``node`` ends (0 if not decoding):
    an admission waits for it (prefill priority cuts a segment at a step boundary)."""
    if node.work != DECODE:
        return 0.0
    costs = node.costs
    elapsed = now - node.seg_start
    steps = 1
    while costs.decode_s(steps, node.seg_batch, node.seg_ctx) < elapsed:
        steps += 1
    step_end = min(
        costs.decode_s(steps, node.seg_batch, node.seg_ctx), node.work_end - node.seg_start
    )
    return max(step_end - elapsed, 0.0)


class Tried(CausalTeacher):
    """The causal teacher (backlog routing) with rules not shipped: ``decode``
    counts the wait for the decode step in progress; ``pull`` ("part" or "full")
    copies the request's longest cached prefix (all of it, or only when a node
    holds the whole ``blocks[:-1]``, which is what RouteWarm-v0's warm action
    copies) onto a node where that makes its first token sooner, and routes
    there; ``keep_one`` moves a long request (>= 1 s) off the last node free of
    long work, without the spare-node rule's weighing; ``long_prefill_s`` adds
    the spare-node rule on top of the others."""

    def __init__(
        self,
        decode: bool = False,
        pull: str = "",
        keep_one: bool = False,
        long_prefill_s: float | None = None,
    ) -> None:
        super().__init__(routing="backlog", long_prefill_s=long_prefill_s)
        self.decode = decode
        self.pull = pull
        self.keep_one = keep_one

    def _choose(
        self, sim: Simulator, request: Request, depth: int, key: int
    ) -> tuple[int, float, float, bool]:
        now = sim.now
        est = estimates_with_hits(sim, request, None)
        if self.decode:
            est = [
                (b + w, f + w, h)
                for (b, f, h), w in zip(
                    est, [decode_wait_s(n, now) for n in sim.nodes], strict=True
                )
            ]
        choice = soonest_node(sim, [(b, f) for b, f, _ in est])
        if self.pull:
            choice = self._pull(sim, request, est, choice)
        if self.keep_one:
            backlog, first = est[choice][:2]
            others = [n.index for n in sim.nodes if n.index != choice]
            if first - backlog >= 1.0 and all(est[i][0] >= 1.0 for i in others):
                choice = min(others, key=lambda i: (est[i][1], sim.nodes[i].load, i))
        if self.long_prefill_s is not None:
            backlog, first = est[choice][:2]
            if self._may_move(sim, first - backlog):
                firsts = [f for _, f, _ in est]
                choice = self._spare(sim, choice, firsts, first - backlog, [b for b, _, _ in est])
        node = sim.nodes[choice]
        computes = depth > node.view.hbm_match(request.blocks) and self._planned(node, key) is None
        return choice, now + est[choice][0], now + est[choice][1], computes

    def _pull(self, sim: Simulator, request: Request, est: list, choice: int) -> int:
        bt = sim.block_tokens
        blocks = request.blocks
        n_in = request.input_tokens
        hits = [h for _, _, h in est]
        holder = max(range(len(hits)), key=lambda i: (hits[i], -sim.nodes[i].load))
        depth = hits[holder]
        if self.pull == "full":
            if depth < len(blocks) - 1:
                return choice
            depth = len(blocks) - 1
        if depth * bt < MIN_PULL_TOKENS:
            return choice
        best, best_first = choice, est[choice][1]
        have = usable_tokens(depth, bt, n_in)
        for node in sim.nodes:
            j = node.index
            missing = depth - hits[j]
            if missing <= 0 or blocks[depth - 1] in node.inflight:
                continue
            if missing > node.copy_room_blocks(bt):
                continue
            seconds = copy_s(copy_bytes(missing, bt, node), node, sim.config.transfer_latency_s)
            first = est[j][0] + seconds + node.costs.prefill_s(n_in - have, have)
            if first < best_first:
                best, best_first = j, first
        if best != choice and sim.warm(holder, best, blocks[:depth]) == WARM_OK:
            return best
        return choice


RULES: dict[str, Callable[[], Policy]] = {
    "oracle_warm": OracleWarm,
    "causal_teacher (clock)": lambda: CausalTeacher(routing="clock"),
    "causal_teacher (backlog): T": lambda: CausalTeacher(routing="backlog"),
    "T + keep one node free of long work (>= 1 s), no weighing": lambda: Tried(keep_one=True),
    "T + spare node, long_prefill_s=1.0": lambda: CausalTeacher(
        routing="backlog", long_prefill_s=1.0
    ),
    "T + spare node, long_prefill_s=0.5": lambda: CausalTeacher(
        routing="backlog", long_prefill_s=0.5
    ),
    "**T + spare node, long_prefill_s=0.25**": lambda: CausalTeacher(
        routing="backlog", long_prefill_s=0.25
    ),
    "T + spare node, long_prefill_s=0.1": lambda: CausalTeacher(
        routing="backlog", long_prefill_s=0.1
    ),
    "causal_teacher (clock) + spare node, long_prefill_s=0.25": lambda: CausalTeacher(
        routing="clock", long_prefill_s=0.25
    ),
    "T + decode-step wait": lambda: Tried(decode=True),
    "T + pull copy (whole blocks[:-1] only)": lambda: Tried(pull="full"),
    "T + pull copy (longest cached prefix)": lambda: Tried(pull="part"),
    "T + decode-step wait + pull copy (longest)": lambda: Tried(decode=True, pull="part"),
    "T + decode-step wait + pull copy (longest) + spare node 0.25": lambda: Tried(
        decode=True, pull="part", long_prefill_s=0.25
    ),
}


def rules_table(windows: int) -> list[str]:
    cluster = setup_cluster(SETUP)
    config = SimConfig()
    means: dict[str, dict[str, float]] = {name: {} for name in RULES}
    for family in FAMILIES:
        pool = window_pool(family, "val", PUBLISHED_SEED, windows)
        for name, make in RULES.items():
            ttft = [
                run_window(make(), cluster, w, config, (0, i)).ttft_s for i, w in enumerate(pool)
            ]
            means[name][family] = float(np.concatenate(ttft).mean())
    out = ["| rule | " + " | ".join(FAMILIES) + " |", "|---|" + "--:|" * len(FAMILIES)]
    for name in RULES:
        cells = []
        for family in FAMILIES:
            mean = means[name][family]
            ref = means["oracle_warm"][family]
            cells.append(
                f"{mean:.4g}" + ("" if name == "oracle_warm" else f" ({mean / ref - 1:+.1%})")
            )
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out


FINAL = ("oracle_warm", "causal_teacher (backlog): T", "**T + spare node, long_prefill_s=0.25**")


def test_table(windows: int, split: str = "test", setup: str = SETUP) -> list[str]:
    cluster = setup_cluster(setup)
    config = SimConfig()
    out = ["| family | " + " | ".join(FINAL) + " |", "|---|" + "--:|" * len(FINAL)]
    for family in FAMILIES:
        pool = window_pool(family, split, PUBLISHED_SEED, windows)
        cells = []
        ref = 0.0
        for name in FINAL:
            ttft = np.concatenate(
                [
                    run_window(RULES[name](), cluster, w, config, (0, i)).ttft_s
                    for i, w in enumerate(pool)
                ]
            )
            mean = float(ttft.mean())
            ref = ref or mean
            change = "" if name == FINAL[0] else f" ({mean / ref - 1:+.1%})"
            cells.append(f"{mean:.4g}{change} / {np.percentile(ttft, 95):.4g}")
        out.append(f"| {family} | " + " | ".join(cells) + " |")
    return out


def setups_table(windows: int) -> list[str]:
    out = []
    for setup in ("qwen3_8b_h100x4", "glm45_h100x4"):
        out += [f"#### {setup}", "", *test_table(windows, "val", setup), ""]
    return out


def main(argv: list[str]) -> None:
    what = argv[0] if argv else "rules"
    tables = {
        "split": split_table,
        "rules": rules_table,
        "test": test_table,
        "setups": setups_table,
    }
    windows = int(argv[1]) if len(argv) > 1 else (15 if what == "test" else 4)
    print("\n".join(tables[what](windows)))


if __name__ == "__main__":
    main(sys.argv[1:])
