"""What the commands show and draw: terminal tables and PNG charts.

Tables:

* :func:`comparison_table`: a comparison run's rows (``compare``, ``evaluate``,
  ``train``'s evaluation); :func:`write_run` writes its charts and ``results.json``;
  :func:`replication_table`: the copying rows' replication metrics.
* :func:`reproduction_tables`: ``reproduce``'s tables against the published figures.
* :func:`audit_table`: ``audit``'s statistics of a trace.

Charts (matplotlib, Agg backend, imported lazily):

* :func:`plot_reductions`: mean and p95 TTFT reduction of each policy vs the baseline.
* :func:`plot_ttft_cdf`: the TTFT distribution of each policy (log time axis).
* :func:`plot_burst_timeline`: one window, per policy: each node's queue length
  (routed, not yet admitted) over time, with the warm copies' landings marked.
* :func:`plot_thresholds_timeline`: one window of an adaptive-threshold agent: the
  cluster's queue and the settings it chose every epoch.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from envs.files import file_mode, naming_file, write_json_atomic
from envs.sim.errors import plural
from envs.thresholds import route_choices
from envs.workloads.stats import PRIVATE_KEY_SHARE
from experiments.evaluation import FLOOR, FLOOR_CAPACITY, GAP_REFERENCE, PolicyRun, WindowTrace

TIMELINE_POLICIES = ("cache_aware", "btb", "oracle_warm")
CHARTS = ("ttft_reduction.png", "ttft_cdf.png", "burst_timeline.png")
"""The charts of a comparison run, in the order :func:`write_charts` draws them."""
THRESHOLDS_CHART = "thresholds_timeline.png"
"""Written only when a threshold agent (``btb/Thresholds-v0``) is among the policies."""
THRESHOLDS_LOG = "thresholds_settings.json"
"""Every threshold agent's settings, epoch by epoch, on every window of a run
(written only when one is among the policies, with or without the charts)."""


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | Path) -> Path:
    """Save atomically: render to a temporary file in the folder, then rename."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    # a name of its own, so two runs saving the same chart never share a temporary file
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp.png", dir=target.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        with naming_file(target):
            fig.savefig(tmp, dpi=110, bbox_inches="tight")
            os.chmod(tmp, file_mode())
            tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def run_title(row: Mapping[str, Any]) -> str:
    """A comparison run's charts' title, from a row: setup, workload and how many
    windows ran (``70b_h100x4 · bursted_art · 5 windows``)."""
    title = f"{row.get('setup', '')} · {row.get('workload', '')}"
    windows = row.get("windows")
    return title if windows is None else f"{title} · {plural(windows, 'window')}"


def bar_text(value: float) -> str:
    """A reduction bar's label: whole percent with its sign, or, where that rounds to
    zero (``-0`` for -0.4 %), the table's one decimal (:func:`signed`: ``-0.4``, and
    ``0.0`` for none)."""
    whole = f"{value:+.0f}"
    return whole if float(whole) != 0 else signed(value, 0)


def plot_reductions(rows: Sequence[Mapping[str, Any]], baseline: str, path: str | Path) -> Path:
    """Grouped bars: mean and p95 TTFT reduction (%) per policy vs ``baseline``,
    titled as the CDF is (:func:`run_title`)."""
    plt = _pyplot()
    names = [row["policy"] for row in rows]
    mean = [row.get("ttft_mean_reduction_pct") or 0.0 for row in rows]
    p95 = [row.get("ttft_p95_reduction_pct") or 0.0 for row in rows]
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(names) + 2), 4.0))
    # a policy more than twice as slow as the baseline is drawn clipped at the
    # floor, hatched, with its true value as the label
    from matplotlib.patches import Patch

    floor = -100.0
    handles = []
    for offset, values, label in ((-0.2, mean, "mean TTFT"), (0.2, p95, "p95 TTFT")):
        bars = ax.bar(x + offset, [max(v, floor) for v in values], 0.4)
        for bar, value in zip(bars, values, strict=True):
            if value < floor:
                bar.set_hatch("//")
        ax.bar_label(bars, labels=[bar_text(v) for v in values], fontsize="x-small", padding=1)
        # legend swatches drawn plainly: the first bar may be a hatched, clipped one
        handles.append(Patch(facecolor=bars.patches[0].get_facecolor(), label=label))
    if min([*mean, *p95, 0.0]) < floor:
        clipped = f"below {floor:.0f} %, clipped"
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label=clipped))
    ax.axhline(0.0, color="black", linewidth=0.8)
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylabel(f"TTFT reduction vs {baseline} (%)")
    low = min([*mean, *p95, 0.0])
    high = max([*mean, *p95, 0.0])
    ax.set_ylim(max(low, floor) * 1.15 - 5.0, high * 1.15 + 5.0)
    ax.set_title(run_title(rows[0] if rows else {}))
    ax.legend(handles=handles)
    ax.grid(axis="y", alpha=0.3)
    path = _save(fig, path)
    plt.close(fig)
    return path


LINE_STYLES: tuple[Any, ...] = ("-", "--", "-.", (0, (1, 1)))
"""The CDF's line styles, ten policies each (one of each colour); past them each
ten have a dash pattern of their own (:func:`cdf_style`)."""


def cdf_style(i: int, colors: Sequence[str]) -> dict[str, Any]:
    """The ``i``-th policy's line in the CDF: a colour of ``colors`` (ten) and, for each
    ten policies, a line style of its own, so no two policies are drawn alike (three
    styles repeated the 31st policy's line, ``make run``'s, as the 21st's)."""
    k = i // len(colors)
    style = LINE_STYLES[k] if k < len(LINE_STYLES) else (0, (k, 1.5, 1, 1.5))
    return {"color": colors[i % len(colors)], "linestyle": style}


def plot_ttft_cdf(ttfts: Mapping[str, np.ndarray], path: str | Path, title: str = "") -> Path:
    """Empirical CDF of TTFT per policy, from 0 (below the shortest TTFT) to 1."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, values) in enumerate(ttfts.items()):
        values = np.sort(values[np.isfinite(values)])
        if values.size == 0:
            continue
        values = np.insert(values, 0, values[0])  # from 0 at the shortest TTFT
        y = np.arange(values.size) / (values.size - 1)
        # the bound in black dots, apart from every policy (no policy's colour is black)
        style = {"color": "black", "linestyle": ":"} if name == FLOOR else cdf_style(i, colors)
        ax.step(np.maximum(values, 1e-4), y, where="post", label=name, **style)
    ax.set_xscale("log")
    ax.set_xlabel("TTFT (s)")
    ax.set_ylabel("fraction of requests")
    ax.set_title(title or "TTFT distribution")
    ax.grid(alpha=0.3, which="both")
    # beside the axes: no curve hidden, and no search of every point for a place ("best")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    path = _save(fig, path)
    plt.close(fig)
    return path


def queue_lengths(trace: WindowTrace, node: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Step function (times, queue length after each time) of requests routed to
    ``node`` (None: to any node) and not yet admitted, from the records' arrival and
    admission times. A request admitted as it arrives never waits and is not
    counted; the times are distinct, each with the queue once all that happened at
    it did (a request arriving as another is admitted draws no spike)."""
    mine = slice(None) if node is None else trace.node == node
    arrive = trace.arrival_s[mine]
    admit = trace.admit_s[mine]
    waits = admit != arrive  # never admitted (NaN) too
    arrive, admit = arrive[waits], admit[waits]
    admit = admit[np.isfinite(admit)]
    times = np.concatenate([arrive, admit])
    steps = np.concatenate([np.ones(arrive.size), -np.ones(admit.size)])
    at, which = np.unique(times, return_inverse=True)
    return at, np.cumsum(np.bincount(which, weights=steps, minlength=at.size), dtype=float)


def plot_burst_timeline(traces: Mapping[str, WindowTrace], path: str | Path) -> Path:
    """One panel per policy: each node's queue length over the window, copies marked;
    one queue scale for all panels, so the policies compare at a glance."""
    plt = _pyplot()
    names = list(traces)
    fig, axes = plt.subplots(
        len(names), 1, figsize=(10.0, 2.4 * len(names) + 0.6), sharex=True, squeeze=False
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    queues = {
        name: [queue_lengths(traces[name], node) for node in range(traces[name].n_nodes)]
        for name in names
    }
    top = max([1.0] + [float(q.max()) for per in queues.values() for _, q in per if q.size])
    for ax, name in zip(axes[:, 0], names, strict=True):
        trace = traces[name]
        for node, (times, lengths) in enumerate(queues[name]):
            if times.size:
                ax.step(
                    times,
                    lengths,
                    where="post",
                    color=colors[node % len(colors)],
                    linewidth=0.9,
                    label=f"node {node}",
                )
        landed = [(land, dst) for _, _, land, _, dst in trace.copies if land >= 0]
        if landed:
            ax.scatter(
                [t for t, _ in landed],
                [top * 1.05] * len(landed),
                marker="v",
                s=28,
                c=[colors[dst % len(colors)] for _, dst in landed],
                label="warm copy lands (colour: target)",
                zorder=3,
            )
        ax.set_ylim(0, top * 1.15)
        ax.set_ylabel("requests queued")
        ax.set_title(f"{name} · {trace.window} · {len(trace.copies)} copies", fontsize="medium")
        ax.grid(alpha=0.3)
    drawn: dict[str, Any] = {}  # every panel's nodes and marks, once each, in the first panel
    for ax in axes[:, 0]:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            drawn.setdefault(label, handle)
    nodes = sorted((k for k in drawn if k.startswith("node ")), key=lambda k: int(k[5:]))
    order = [*nodes, *(k for k in drawn if k not in nodes)]
    if order:  # (no queue and no copy anywhere: nothing to name)
        axes[0, 0].legend(
            [drawn[k] for k in order], order, fontsize="x-small", ncol=min(len(order), 6),
            loc="upper left",
        )  # fmt: skip
    axes[-1, 0].set_xlabel("time in window (s)")
    path = _save(fig, path)
    plt.close(fig)
    return path


# ---------------------------------------------------------------- tables
def comparison_table(rows: Sequence[dict[str, Any]], baseline: str) -> str:
    """The terminal table of a run; each column is as wide as its widest cell."""

    def pct(value: float | None) -> str:
        return signed(value, 0)

    def rate(value: float | None) -> str:  # "-" for rows without the column (bounds, older runs)
        return f"{value:.3f}" if value is not None else "-"

    places = time_decimals(r["ttft_mean_s"] for r in rows)

    def secs(value: float | None) -> str:
        return f"{value:.{places}f}" if value is not None else "-"

    # (header, narrowest width, cell)
    columns: list[tuple[str, int, Any]] = [
        ("policy", 13, lambda r: str(r["policy"])),
        ("requests", 8, lambda r: str(r["requests"])),
        ("TTFT mean", 9, lambda r: secs(r["ttft_mean_s"])),
        ("p50", 7, lambda r: secs(r["ttft_p50_s"])),
        ("p95", 7, lambda r: secs(r["ttft_p95_s"])),
        ("p99", 7, lambda r: secs(r["ttft_p99_s"])),
        ("e2e mean", 8, lambda r: secs(r.get("e2e_mean_s"))),
        ("queue", 7, lambda r: secs(r.get("queue_mean_s"))),
        ("HBM hit", 7, lambda r: rate(r.get("hbm_hit_rate"))),
        ("copies", 6, lambda r: str(r.get("warm_copies", "-"))),
        ("warm hit", 8, lambda r: rate(r.get("warm_hit_rate"))),
        ("warm byte hit", 13, lambda r: rate(r.get("warm_byte_hit_rate"))),
        ("prefill", 7, lambda r: rate(r.get("prefill_busy_fraction"))),
        ("decode", 6, lambda r: rate(r.get("decode_busy_fraction"))),
        ("batch", 5, lambda r: rate(r.get("batch_occupancy_mean"))),
        ("KV", 5, lambda r: rate(r.get("kv_occupancy_mean"))),
        ("imbal", 5, lambda r: f"{r['load_imbalance']:.2f}" if "load_imbalance" in r else "-"),
        ("d mean%", 8, lambda r: pct(r["ttft_mean_reduction_pct"])),
        ("d p95%", 8, lambda r: pct(r["ttft_p95_reduction_pct"])),
    ]
    if any("floor_gap_closed_mean_pct" in r for r in rows):
        columns.append(("floor gap%", 10, lambda r: pct(r.get("floor_gap_closed_mean_pct"))))
    if any("floor_capacity_gap_closed_mean_pct" in r for r in rows):
        columns.append(("cap gap%", 8, lambda r: pct(r.get("floor_capacity_gap_closed_mean_pct"))))
    columns += fault_columns(rows)
    speculated = any("speculative_chunks" in r for r in rows)
    if speculated:
        columns.append(("spec s", 6, lambda r: rate(r.get("speculative_compute_s"))))
        columns.append(("spec waste s", 12, lambda r: rate(r.get("speculative_wasted_s"))))
    cells = [[cell(row) for _, _, cell in columns] for row in rows]
    widths = [
        max([narrowest, *(len(values[k]) for values in cells)])
        for k, (_, narrowest, _) in enumerate(columns)
    ]

    def line(values: Sequence[str]) -> str:
        right = (f"{v:>{w}}" for v, w in zip(values[1:], widths[1:], strict=True))
        return " ".join([f"{values[0]:<{widths[0]}}", *right])

    head = line([name for name, _, _ in columns])
    lines = [head, "-" * len(head), *(line(values) for values in cells)]
    if baseline:
        lines.append(f"times in seconds; d = TTFT reduction vs {baseline} (positive is better)")
    else:
        lines.append("times in seconds; no baseline (baseline=), so no reductions (d)")
    if any("warm_copies" in r for r in rows):
        lines.append(
            "copies = warm copies issued; warm hit / warm byte hit = share of the copies "
            "that landed / of their bytes that a request used in HBM"
        )
    if any("load_imbalance" in r for r in rows):
        lines.append(
            "prefill / decode = share of node time busy prefilling / decoding; batch = mean "
            "running sequences / max batch; KV = mean KV reserved / budget; imbal = max / "
            "mean of the nodes' prefill time"
        )
    if fault_columns(rows):
        lines.append(
            "lost = node losses; rerouted = requests taken off a lost node; failed = warm "
            "copies failed (docs/faults.md)"
        )
    if speculated:
        lines.append(
            "spec s = node seconds of speculative prefill; spec waste s = the part of it "
            "no request reused"
        )
    if any(r["policy"] == FLOOR for r in rows):
        lines.append(
            f"{FLOOR}: a lower bound on each request's TTFT (cold prefill, or once the "
            f"prefix can exist the rest's prefill and the reused tokens' least load, on the "
            f"quickest node kind; no queueing); floor gap = share of "
            f"{GAP_REFERENCE}'s mean-TTFT gap to it closed (- where {GAP_REFERENCE} sits on it "
            f"or is not run)"
        )
    if any(r["policy"] == FLOOR_CAPACITY for r in rows):
        lines.append(
            f"{FLOOR_CAPACITY}: a lower bound on mean TTFT only (no percentiles) that also "
            f"counts the cluster's prefill capacity (docs/physics.md); cap gap = share of "
            f"{GAP_REFERENCE}'s mean-TTFT gap to it closed"
        )
    lines += btb_lines(rows)
    lines += tenant_lines(rows)
    return "\n".join(lines)


def time_decimals(means: Iterable[float | None]) -> int:
    """Decimals of a table's times in seconds: 3, or more (at most 6) so that the
    shortest mean TTFT among ``means`` shows 3 significant digits. qwen3-8b's means
    of 0.022 to 0.025 s (0.0245 and 0.0232 s printed alike at 3) read 0.0245."""
    shortest = min(
        (float(m) for m in means if m is not None and math.isfinite(m) and m > 0), default=1.0
    )
    return max(3, min(6, 2 - math.floor(math.log10(shortest))))


def fault_columns(rows: Sequence[dict[str, Any]]) -> list[tuple[str, int, Any]]:
    """The comparison table's fault columns, when any row has fault counts."""
    if not any("fault_node_losses" in r for r in rows):
        return []

    def count(key: str) -> Any:
        return lambda r: str(r.get(key, "-"))

    return [
        ("lost", 4, count("fault_node_losses")),
        ("rerouted", 8, count("fault_rerouted_requests")),
        ("failed", 6, count("fault_copies_failed")),
    ]


def btb_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The table's notes on the BTB rows: windows where no prompt reached a BTB's Y
    (btb, btb_pending, btb_eft, a thresholds agent's BTB: it made no copy, its
    fallback routed), and where
    btb_tuned's table had no cell (it ran btb's published thresholds) or was tuned
    under another simulator."""
    lines: list[str] = []
    unreached: dict[str, list[str]] = {}  # share of windows -> the BTBs that never fired
    for row in rows:  # a BTB that never fired is its fallback: say so, once a share
        rate_ = row.get("y_unreached_rate")
        if isinstance(rate_, int | float) and rate_ > 0:
            share = "every window" if rate_ == 1 else f"{rate_ * 100:.0f} % of the windows"
            unreached.setdefault(share, []).append(str(row["policy"]))
    for share, names in unreached.items():
        lines.append(
            f"{', '.join(names)}: in {share} no prompt reached Y, so BTB made no copy there "
            "and its fallback routed every request (cache_aware; btb_eft's: eft; a thresholds "
            "agent's: its rule's); a Y the "
            f"prompts reach lets BTB fire (compare: policy_kwargs={names[0]}.y_tokens=...; "
            f"evaluate: +policy_kwargs.{names[0]}.y_tokens=...)"
        )
    for row in rows:  # a tuned BTB that found no tuned thresholds is btb: say so
        rate_ = row.get("tuned_rate")
        if isinstance(rate_, int | float) and rate_ < 1:
            share = "any window" if rate_ == 0 else f"{(1 - rate_) * 100:.0f} % of the windows"
            lines.append(
                f"{row['policy']}: no tuned thresholds for {share} (their setup and "
                "workload are not in baselines/btb_tuned.json, or the workload's generator "
                "parameters were changed): there it ran btb's published "
                "ones; tune_btb finds a workload's, and btb runs them (compare: "
                "policy_kwargs=btb.x=...; evaluate: +policy_kwargs.btb.x=...)"
            )
        elsewhere = row.get("tuned_elsewhere_rate")
        if isinstance(elsewhere, int | float) and elsewhere > 0:
            share = "every window" if elsewhere == 1 else f"{elsewhere * 100:.0f} % of the windows"
            lines.append(
                f"{row['policy']}: on {share} it ran thresholds tuned under another simulator "
                "(baselines/btb_tuned.json's options: causal_kv, copy_model) than this run's; "
                "they may not suit it (tune_btb_table causal_kv=... copy_model=... tunes a "
                "table for it)"
            )
    return lines


def tenant_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per-tenant TTFT of the rows whose requests came from more than one tenant
    (``ttft_by_tenant``): a table of policy x tenant, after a blank line; none otherwise."""
    tenants = [
        (str(row["policy"]), tenant, stats)
        for row in rows
        for tenant, stats in row.get("ttft_by_tenant", {}).items()
    ]
    places = time_decimals(stats["ttft_mean_s"] for _, _, stats in tenants)
    cells = [
        [
            policy,
            tenant,
            str(stats["requests"]),
            f"{stats['ttft_mean_s']:.{places}f}",
            f"{stats['ttft_p95_s']:.{places}f}",
        ]
        for policy, tenant, stats in tenants
    ]
    if not cells:
        return []
    header = ("policy", "tenant", "requests", "TTFT mean", "p95")
    return ["", *aligned_table(header, cells, right=(2, 3, 4)), "per-tenant TTFT in seconds"]


def replication_table(rows: Sequence[dict[str, Any]]) -> str:
    """The replication metrics of the rows whose policy copied KV (empty if none):
    what the copies cost in bytes against the prefill they saved
    (docs/cache_actions.md, "Replication metrics")."""
    copying = [r for r in rows if r.get("warm_copies") and "replication_amplification" in r]
    if not copying:
        return ""
    width = max(13, *(len(str(r["policy"])) for r in copying))
    head = f"{'policy':<{width}} {'copy GB':>8} {'prefill saved s':>15} {'MB / saved s':>12}"
    head += f" {'amplification':>13} {'normal displaced':>16}"
    lines = [head, "-" * len(head)]
    for r in copying:
        lines.append(
            f"{r['policy']:<{width}} {r['warm_bytes'] / 1e9:>8.2f} "
            f"{r['copy_prefill_saved_s']:>15.2f} "
            f"{r['copy_bytes_per_prefill_s_saved'] / 1e6:>12.1f} "
            f"{r['replication_amplification']:>13.2f} "
            f"{r['normal_displaced_by_copies_blocks']:>16}"
        )
    lines.append(
        "prefill saved = cold-prefill seconds of the copied blocks requests hit in HBM; "
        "amplification = copy bytes / bytes of the distinct prefixes copied; normal "
        "displaced = request-computed blocks the landings evicted"
    )
    return "\n".join(lines)


def reproduction_tables(
    tables: Sequence[dict[str, Any]],
    policies: Sequence[str],
    tolerance_pp: float,
    windows: int | None = None,
    published_windows: int | None = None,
    notes: Sequence[str] = (),
) -> str:
    """The terminal tables of ``reproduce``: one per KV model, a row per setup;
    ``tolerance_pp`` is how far BTB's reduction may sit from the published one
    (each reference-KV row says ``ok`` or ``off``, and a last line counts them; a
    causal-KV row says ``-``: the published figures assume reference KV). With
    ``windows`` fewer than ``published_windows`` (the test windows the published
    figures are over), a note says the comparison is on fewer windows; ``notes``
    (:func:`btb_lines`) come before the count."""
    lines: list[str] = []
    draws = max((len(t["workload_seeds"]) for t in tables), default=1)
    verdict = f"+-{tolerance_pp:g}"
    for causal in dict.fromkeys(t["causal_kv"] for t in tables):
        model = "causal KV (corrected)" if causal else "reference KV (Infer-Sim compatible)"
        lines.append(f"\n== {model}: causal_kv={str(causal).lower()}")
        # each policy's column as wide as its name (at least 12): names cut to 11
        # characters (btb_specula) read alike where two share their first 11
        widths = [max(12, len(p) + 1) for p in policies]
        head = f"{'setup':<16}" + "".join(
            f"{p:>{w}}" for p, w in zip(policies, widths, strict=True)
        )
        head += f"{'BTB d mean':>11}" + (f"{'sd':>6}" if draws > 1 else "")
        head += f"{'published':>10}{'diff pp':>9}{verdict:>6}{'BTB d p95':>10}"
        head += "".join(f"{label:>10}" for _, label in _REPRODUCE_EXTRA)
        lines += [head, "-" * len(head)]
        for t in tables:
            if t["causal_kv"] != causal:
                continue
            red = t["ttft_mean_reduction_pct"]
            line = f"{t['setup']:<16}"
            places = time_decimals(t["ttft_mean_s"].values())  # (each setup's own)
            line += "".join(
                f"{t['ttft_mean_s'].get(p, float('nan')):>{w}.{places}f}"
                for p, w in zip(policies, widths, strict=True)
            )
            line += signed(red.get("btb"), 11)
            if draws > 1:
                sd = t["ttft_mean_reduction_pct_sd"].get("btb")
                line += f"{sd:>6.1f}" if sd is not None else f"{'-':>6}"
            line += signed(t.get("published_mean_pct"), 10)
            line += signed(t.get("diff_mean_pp"), 9)
            within = t.get("within_tolerance")
            line += f"{'-' if within is None else 'ok' if within else 'off':>6}"
            line += signed(t["ttft_p95_reduction_pct"].get("btb"), 10)
            line += "".join(signed(red.get(name), 10) for name, _ in _REPRODUCE_EXTRA)
            if t.get("published_p95_pct") is not None:
                line += f"  (p95 published {t['published_p95_pct']:+.1f})"
            lines.append(line)
    lines.append(
        "\nmean TTFT in seconds; d = TTFT reduction vs cache_aware in %"
        + (
            f", averaged over {draws} workload draws (sd: their sample standard deviation, ddof 1)"
            if draws > 1
            else ""
        )
        + f"; diff pp = BTB d mean - published; {verdict}: ok where |diff pp| <= "
        + f"{tolerance_pp:g}, off where not"
    )
    checked = [t["within_tolerance"] for t in tables if t.get("within_tolerance") is not None]
    if checked and windows is not None and published_windows and windows < published_windows:
        lines.append(
            f"note: {windows} of the {published_windows} test windows ran; the published "
            f"figures are over all {published_windows} (windows=0 runs them all)"
        )
    lines += notes
    unjudged = sum(1 for t in tables if t["causal_kv"] and t.get("published_mean_pct") is not None)
    why = (
        f"{unjudged} causal KV row{'s' if unjudged > 1 else ''} not judged (the published "
        "figures assume reference KV, causal_kv=false)"
    )
    if checked:
        ok = sum(checked)
        lines.append(
            f"BTB d mean within +-{tolerance_pp:g} pp of the published figure: {ok} of "
            f"{len(checked)} rows ok, {len(checked) - ok} off" + (f"; {why}" if unjudged else "")
        )
    elif unjudged:
        lines.append(f"no row is checked against the published figure: {why}")
    else:
        lines.append("no published figure for this workload: no row is checked against one")
    return "\n".join(lines)


_REPRODUCE_EXTRA = (("btb_pending", "pending d"), ("oracle_warm", "oracle d"))


def signed(value: float | None, width: int) -> str:
    """A share in % with its sign and one decimal, right-aligned in ``width``; one
    that rounds to zero is ``0.0`` (float noise, -6e-14, printed no ``-0.0``), and
    None is ``-``."""
    if value is None:
        return f"{'-':>{width}}"
    text = f"{value:+.1f}"
    return f"{'0.0' if float(text) == 0 else text:>{width}}"


def audit_table(audit: dict[str, Any], per_window: bool = False) -> str:
    """The audit as a terminal table."""
    overall = audit["overall"]
    several = overall["windows"] > 1

    def where(entry: dict[str, Any]) -> str:
        text = f"at {entry['start_s']:.2f} s"
        return f"{entry['window']} {text}" if several else text

    fan = overall["fanout"]
    rows = [
        (f"busiest {label}", f"{entry['requests']:,}", where(entry))
        for label, entry in overall["busiest"].items()
    ]
    by_window = overall.get("fanout_by_window", {})
    for entry in by_window.values():
        span = "the whole trace" if entry["window_s"] is None else f"{entry['window_s']:g} s"
        rows.append(
            (
                f"largest fan-out, >= {fan['min_tokens']:,} tokens ({fan['min_blocks']} blocks) "
                f"in {span}",
                f"{entry['requests']:,}",
                where(entry) if entry["requests"] else "-",
            )
        )
    if fan["window_s"] not in [entry["window_s"] for entry in by_window.values()]:
        fan_where = where(fan) if fan["requests"] else "-"
        if fan.get("group_id"):
            fan_where += f" (group {fan['group_id']})"
        rows.append(
            (
                f"largest fan-out, >= {fan['min_tokens']:,} tokens ({fan['min_blocks']} blocks) "
                f"in {fan['window_s']:g} s",
                f"{fan['requests']:,}",
                fan_where,
            )
        )
    private = overall.get("private_key_requests")
    if private is not None:  # (audits written before it have none)
        share = private / overall["requests"] if overall["requests"] else 0.0
        rows.append(
            (
                "requests sharing leading blocks whose prompt less its last block ends in "
                "blocks of their own",
                f"{private:,} ({share:.0%})",
                "merge_blocks=K reads coarser blocks" if share >= PRIVATE_KEY_SHARE else "",
            )
        )
    rows.append(("longest prompt (tokens)", f"{overall['input_tokens_max']:,.0f}", ""))
    rows.append(("longest output (tokens)", f"{overall['output_tokens_max']:,.0f}", ""))
    read = audit["read"]
    header = (
        f"audit of {audit['path']} (format {audit['format']}, "
        f"{plural(overall['windows'], 'window')}, {plural(overall['requests'], 'request')}, "
        f"{overall['block_tokens']}-token blocks"
        + (f", {plural(read['rows_skipped'], 'bad row')} skipped" if read["rows_skipped"] else "")
        + ")"
    )
    lines = [header, *aligned_table(("statistic", "value", "where"), rows)]
    if per_window and several:
        labels = list(overall["busiest"])
        window_rows = [
            (
                w["name"],
                f"{w['requests']:,}",
                *(f"{w['busiest'][label]['requests']:,}" for label in labels),
                f"{w['fanout']['requests']:,}",
            )
            for w in audit["windows"]
        ]
        lines += ["", *aligned_table(("window", "requests", *labels, "fan-out"), window_rows)]
    return "\n".join(lines)


def aligned_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], right: Collection[int] = (1,)
) -> list[str]:
    """A header, a rule and the rows, each column as wide as its widest cell; the
    columns whose index is in ``right`` are right-aligned (numbers), the others left."""
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        placed = [
            c.rjust(w) if k in right else c.ljust(w)
            for k, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(placed).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


# ---------------------------------------------------------------- thresholds over time
# The chart of an adaptive-threshold agent (``btb/Thresholds-v0``): one window's
# cluster queue on top and, on the same time axis, the settings the agent chose
# every epoch (X, Z, M, the minimum prefix, the routing rule). ``compare`` and
# ``evaluate`` write it (THRESHOLDS_CHART) when a policy kept a settings log
# (:attr:`WindowTrace.settings`).
PANELS = (
    "X (arrivals)",
    "Z (s)",
    "M (nodes)",
    "min prefix (tokens)",
    "rule",
)
LOG_PANELS = ("X (arrivals)", "Z (s)", "min prefix (tokens)")
"""The panels drawn on a log scale: their choices grow by factors (X 1 ... 16 arrivals,
``envs.thresholds.X_CHOICES``; on a linear scale 1, 2, 3 and 4 crowded into the
bottom of the panel, their labels drawn over one another)."""
TICK_FONT = "x-small"
"""The settings panels' tick labels."""
RULES = route_choices(eft_rules=True, spread_rules=True)
"""Every routing rule, in the index order of the chart's rule panel (that of an
agent with both ``eft_rules`` and ``spread_rules``; an agent with fewer rules is
drawn on the same scale, so its action index may differ)."""


def cluster_queue(trace: WindowTrace) -> tuple[np.ndarray, np.ndarray]:
    """Step function (times, requests queued in the whole cluster after each time;
    :func:`queue_lengths` of every node)."""
    return queue_lengths(trace, None)


def setting_series(trace: WindowTrace) -> tuple[np.ndarray, np.ndarray]:
    """(epoch start times, one row per epoch of X, Z, M, minimum prefix, rule)."""
    times = np.array([t for t, _ in trace.settings], dtype=float)
    values = np.array(
        [(x, z, m, p, float(RULES.index(rule))) for _, (x, z, m, p, rule) in trace.settings],
        dtype=float,
    ).reshape(-1, len(PANELS))
    return times, values


def thresholds_lines(
    trace: WindowTrace,
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The two step lines of a column of the thresholds chart, drawn ``where="post"``
    and both ending at one time, the end of its time axis (the queue's last change
    or a second after the last epoch opened, the later): the cluster queue (times,
    requests queued; :func:`cluster_queue`), held at its last value to the end (0
    once the last queued request is admitted; 0 throughout, from the first epoch,
    when no request queued), and the settings (times, one row per time of
    :func:`setting_series`), the last epoch's row repeated at the end."""
    times, queued = cluster_queue(trace)
    epochs, values = setting_series(trace)
    end = max(float(times[-1]) if times.size else 0.0, float(epochs[-1]) + 1.0)
    if not times.size:
        times, queued = np.array([float(epochs[0])]), np.zeros(1)
    if end > times[-1]:
        times, queued = np.append(times, end), np.append(queued, queued[-1])
    settings = (np.append(epochs, end), np.vstack([values, values[-1:]]))
    return (times, queued), settings


def setting_ticks(label: str, column: np.ndarray) -> tuple[list[float], list[str]]:
    """The chart's ticks of one settings panel: the values the policy chose (so the
    M panel has whole nodes, and the log-scaled X, Z and minimum-prefix panels no
    crowd of 2x10^0-style labels), each named as it was set; the rule panel's by
    the rule's name (:func:`spaced_labels` blanks those too close to draw)."""
    used = sorted({float(v) for v in column})
    if label == "rule":
        return used, [RULES[int(v)] for v in used]
    return used, [f"{v:g}" if label.startswith("Z") else f"{int(v):,}" for v in used]


def spaced_labels(
    ax: Any, ticks: Sequence[float], labels: Sequence[str], fontsize: str | float
) -> list[str]:
    """``labels`` of an axis' y ``ticks`` (its limits and scale set), each left
    blank ("") where it would be drawn over the last one kept: closer to it, on
    the figure, than a line of ``fontsize`` text. The lowest is always kept; a
    blank tick keeps its grid line."""
    from matplotlib.font_manager import FontProperties

    height = FontProperties(size=fontsize).get_size_in_points() * ax.figure.dpi / 72.0
    at = ax.transData.transform([(0.0, tick) for tick in ticks])[:, 1]
    kept: list[str] = []
    last = -np.inf
    for y, label in zip(at, labels, strict=True):
        if y - last >= height:
            kept.append(label)
            last = y
        else:
            kept.append("")
    return kept


TITLE_CHARS = 60
"""The longest line of a threshold chart's column title: a longer title (an agent
labelled ``NAME@folder``, a long window name) is wrapped (:func:`column_title`).
At the title's size, 60 characters of a typical label take about 80 % of a
column's width, so no title overhangs its column or meets its neighbour's."""


def column_title(name: str, window: str, epochs: int) -> str:
    """A threshold chart's column title: policy, window and epochs, joined by `` · ``
    on lines of at most :data:`TITLE_CHARS` characters; a part that does not fit on
    the line starts the next, and a part longer than a line is cut into lines."""
    lines: list[str] = []
    for part in (name, window, plural(epochs, "epoch")):
        if lines and len(lines[-1]) + len(" · ") + len(part) <= TITLE_CHARS:
            lines[-1] += f" · {part}"
        else:
            lines.extend(part[i : i + TITLE_CHARS] for i in range(0, len(part), TITLE_CHARS))
    return "\n".join(lines)


def plot_thresholds_timeline(traces: Mapping[str, WindowTrace], path: str | Path) -> Path:
    """One column per policy with a settings log: its queue, then its settings
    (:func:`thresholds_figure`), written to ``path``."""
    fig = thresholds_figure(traces)
    path = _save(fig, path)
    _pyplot().close(fig)
    return path


def thresholds_figure(traces: Mapping[str, WindowTrace]) -> Any:
    """The thresholds chart's figure: one column per policy with a settings log, its
    queue on top, then its settings, each a line of :func:`thresholds_lines`."""
    plt = _pyplot()
    names = [name for name, trace in traces.items() if trace.settings]
    if not names:
        raise ValueError("no trace has a settings log to draw")
    fig, axes = plt.subplots(
        1 + len(PANELS),
        len(names),
        figsize=(10.0 * len(names), 1.6 * (1 + len(PANELS)) + 0.6),
        sharex="col",
        squeeze=False,
    )
    for col, name in enumerate(names):
        trace = traces[name]
        top = axes[0, col]
        (times, queued), (epochs, values) = thresholds_lines(trace)
        top.step(times, queued, where="post", linewidth=0.9)
        top.set_ylabel("requests queued")
        top.set_title(column_title(name, trace.window, len(trace.settings)), fontsize="medium")
        for k, label in enumerate(PANELS):
            ax = axes[k + 1, col]
            ax.step(epochs, values[:, k], where="post", linewidth=0.9, color="tab:red")
            log = label in LOG_PANELS
            if log:
                ax.set_yscale("log")
            used, ticks = setting_ticks(label, values[:, k])
            ax.minorticks_off()
            low, high = used[0], used[-1]  # a margin of half a step (a factor, on log)
            ax.set_ylim(*((low / 1.5, high * 1.5) if log else (low - 0.5, high + 0.5)))
            ax.set_yticks(used, spaced_labels(ax, used, ticks, TICK_FONT), fontsize=TICK_FONT)
            ax.set_ylabel(label, fontsize="small")
            ax.grid(alpha=0.3)
        top.grid(alpha=0.3)
        axes[-1, col].set_xlabel("time in window (s)")
    return fig


# ---------------------------------------------------------------- a run's files
def _short(override: str) -> str:
    """An override for a chart's axis: a decimal value to 4 significant digits
    (``z=5.203``, not ``z=5.202563493226584``)."""
    key, _, value = override.partition("=")
    try:
        number = float(value)
    except ValueError:
        return override
    return f"{key}={number:.4g}" if "." in value else override


def plot_sweep(
    summary: Mapping[str, Any], path: str | Path, job_labels: Mapping[int, Sequence[str]]
) -> Path | None:
    """A sweep's figures, one panel each (``experiments.sweeps``' summary): a bar
    per completed job labelled by its swept overrides (``job_labels``, by number),
    the best job's bar marked;
    for a sweep over seeds, a bar per setting at the mean over its seeds, with
    the std as an error bar and each seed's value as a dot. None when no job
    gave a figure."""
    names = [
        n
        for n in summary["figures"]
        if any(job["figures"].get(n) is not None for job in summary["jobs"])
    ]
    if not names:
        return None
    plt = _pyplot()
    best = (summary.get("best") or {}).get("job")
    groups = summary.get("over_seeds") or []
    fig, axes = plt.subplots(
        1, len(names), figsize=(max(4.0, 0.6 * len(summary["jobs"]) + 2) * len(names), 3.6)
    )
    axes = np.atleast_1d(axes)
    for ax, name in zip(axes, names, strict=True):
        if groups:
            labels = [" ".join(_short(o) for o in g["overrides"]) or "all" for g in groups]
            stats = [g["figures"].get(name) for g in groups]
            # a figure that is a different policy's in each job has no mean: its
            # policies' own means are drawn instead (``sweeps._by_policy_over_seeds``)
            mixed = [bool(s) and "by_policy" in s for s in stats]
            means = [
                s["mean"] if s and not m else np.nan for s, m in zip(stats, mixed, strict=True)
            ]
            stds = [(s.get("std") or 0.0) if s else 0.0 for s in stats]
            ax.bar(range(len(groups)), means, yerr=stds, capsize=4, color="#8da0cb")
            figures = {job["job"]: job["figures"] for job in summary["jobs"]}
            for x, (group, stat, by) in enumerate(zip(groups, stats, mixed, strict=True)):
                if by:
                    policies = list(stat["by_policy"].items())
                    for k, (policy, got) in enumerate(policies):
                        at = x + (k - (len(policies) - 1) / 2) * 0.25
                        ax.errorbar(at, got["mean"], yerr=got["std"] or 0.0, fmt="o", capsize=3)
                        ax.annotate(policy, (at, got["mean"]), fontsize=7, rotation=90,
                                    xytext=(3, 3), textcoords="offset points")  # fmt: skip
                    continue
                values = [figures[n].get(name) for n in group["jobs"]]
                dots = [v for v in values if v is not None]
                ax.scatter([x] * len(dots), dots, color="black", s=12, zorder=3)
            ax.set_xlabel("setting")
        else:
            jobs = [job for job in summary["jobs"] if job["figures"].get(name) is not None]
            labels = [
                " ".join(_short(o) for o in job_labels.get(job["job"], [])) or f"job {job['job']}"
                for job in jobs
            ]
            colors = ["#fc8d62" if job["job"] == best else "#8da0cb" for job in jobs]
            ax.bar(range(len(jobs)), [job["figures"][name] for job in jobs], color=colors)
            marked = f" (orange: the best by {summary['chosen_by']})" if best is not None else ""
            ax.set_xlabel("job" + marked)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        chosen = name == summary.get("chosen_by")
        ax.set_title(name + ("" if chosen else " (reported, never chosen by)"), fontsize=10)
    # over seeds, what the marks mean is said once, above every panel (a panel's
    # own axis label is too short for it)
    over = "; bars: mean ± std over seeds, dots: each seed" if groups else ""
    if any("by_policy" in (g["figures"].get(n) or {}) for g in groups for n in names):
        over += "; a figure that is another policy's in each job: each policy's mean ± std"
    fig.suptitle(f"sweep {Path(summary['sweep_dir']).name}{over}", fontsize=10)
    try:
        return _save(fig, path)
    finally:
        plt.close(fig)


def timeline_choice(
    rows: Sequence[Mapping[str, Any]], traces: Mapping[str, WindowTrace]
) -> dict[str, WindowTrace]:
    """The policies the burst timeline draws: :data:`TIMELINE_POLICIES` that ran, and
    the fastest learned agent on the mean (else the fastest other policy), so an
    agent's own queues are beside the baselines' (the first three traced, if none
    of those ran)."""
    from baselines.policy import POLICIES

    chosen = {name: traces[name] for name in TIMELINE_POLICIES if name in traces}
    others = [
        row for row in rows
        if row["policy"] in traces and row["policy"] not in chosen
        and row["policy"] not in (FLOOR, FLOOR_CAPACITY)
    ]  # fmt: skip
    agents = [row for row in others if row["policy"] not in POLICIES]
    pool = agents or (others if chosen else [])
    if pool:
        best = min(pool, key=lambda row: row["ttft_mean_s"])["policy"]
        chosen[best] = traces[best]
    if not chosen:
        chosen = dict(list(traces.items())[:3])
    return chosen


def write_charts(runs: Sequence[PolicyRun], baseline: str, out_dir: Path) -> list[Path]:
    runs = [run for run in runs if run.row["policy"] != FLOOR_CAPACITY]  # a mean, no TTFTs
    rows = [run.row for run in runs]
    title = run_title(rows[0])
    paths = [
        plot_ttft_cdf({r.row["policy"]: r.ttft_s for r in runs}, out_dir / CHARTS[1], title),
    ]
    if baseline:  # without one there are no reductions to draw
        paths.insert(0, plot_reductions(rows, baseline, out_dir / CHARTS[0]))
    traces = {r.row["policy"]: r.trace for r in runs if r.trace is not None}
    chosen = timeline_choice(rows, traces)
    if chosen:
        paths.append(plot_burst_timeline(chosen, out_dir / CHARTS[2]))
    if any(trace.settings for trace in traces.values()):
        paths.append(plot_thresholds_timeline(traces, out_dir / THRESHOLDS_CHART))
    return paths


def write_run(
    out_dir: Path,
    result: dict[str, Any],
    runs: Sequence[PolicyRun],
    baseline: str,
    charts: bool = True,
) -> list[Path]:
    """Write a run's charts (if ``charts``) and its threshold agents' settings
    (:data:`THRESHOLDS_LOG`, if any ran), then ``results.json``, the mark of a
    finished run; if any of them fails (a full disk), the charts already
    written are removed again, so the folder never holds half a run (it is this
    run's folder: ``_io.claim_out_dir`` moved an earlier run's aside). Returns the paths
    written, results.json first."""
    try:
        written = write_charts(runs, baseline, out_dir) if charts else []
        log = settings_log(runs)
        if log:
            written.append(write_json_atomic(out_dir / THRESHOLDS_LOG, log))
        from experiments.provenance import provenance

        recorded = {**result, "provenance": provenance()}
        return [write_json_atomic(out_dir / "results.json", recorded), *written]
    except BaseException:
        for name in (*CHARTS, THRESHOLDS_CHART, THRESHOLDS_LOG):
            (out_dir / name).unlink(missing_ok=True)
        raise


def settings_log(runs: Sequence[PolicyRun]) -> dict[str, Any]:
    """``{policy: {"fields": [...], "windows": {window: [[epoch start s, X, Z s, M
    nodes, minimum prefix tokens, rule], ...]}}}`` for each threshold agent among
    ``runs`` (empty without one)."""
    out: dict[str, Any] = {}
    for run in runs:
        windows = {
            w.window: [[t, *setting] for t, setting in w.settings]
            for w in run.windows
            if w.settings
        }
        if windows:
            out[run.row["policy"]] = {
                "fields": ["start_s", "x", "z_s", "m", "min_prefix_tokens", "rule"],
                "windows": windows,
            }
    return out


NOT_A_COMMAND = (
    "error: experiments.report is a library module (the tables and charts the commands"
    " make), not a command: python -m experiments.compare (or evaluate, train) writes a"
    " run's table, charts and results.json"
)
"""What ``python -m experiments.report`` prints (exit status 2): it ran nothing
and said nothing, whatever it was given."""


if __name__ == "__main__":
    import sys

    print(NOT_A_COMMAND, file=sys.stderr)
    raise SystemExit(2)
