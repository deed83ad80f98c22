"""PNG charts of a comparison run (matplotlib, Agg backend, imported lazily).

* :func:`plot_reductions`: mean and p95 TTFT reduction of each policy vs the baseline.
* :func:`plot_ttft_cdf`: the TTFT distribution of each policy (log time axis).
* :func:`plot_burst_timeline`: one window, per policy: each node's queue length
  (routed, not yet admitted) over time, with the warm copies' landings marked.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from envs.files import file_mode
from experiments.evaluation import WindowTrace


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
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        os.chmod(tmp, file_mode())
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def plot_reductions(rows: Sequence[Mapping[str, Any]], baseline: str, path: str | Path) -> Path:
    """Grouped bars: mean and p95 TTFT reduction (%) per policy vs ``baseline``."""
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
        ax.bar_label(bars, labels=[f"{v:+.0f}" for v in values], fontsize="x-small", padding=1)
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
    first = rows[0] if rows else {}
    ax.set_title(f"{first.get('setup', '')} · {first.get('workload', '')}")
    ax.legend(handles=handles)
    ax.grid(axis="y", alpha=0.3)
    path = _save(fig, path)
    plt.close(fig)
    return path


def plot_ttft_cdf(ttfts: Mapping[str, np.ndarray], path: str | Path, title: str = "") -> Path:
    """Empirical CDF of TTFT per policy."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 4.5))
    for name, values in ttfts.items():
        values = np.sort(values[np.isfinite(values)])
        if values.size == 0:
            continue
        y = np.arange(1, values.size + 1) / values.size
        ax.step(np.maximum(values, 1e-4), y, where="post", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("TTFT (s)")
    ax.set_ylabel("fraction of requests")
    ax.set_title(title or "TTFT distribution")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="small")
    path = _save(fig, path)
    plt.close(fig)
    return path


def queue_lengths(trace: WindowTrace, node: int) -> tuple[np.ndarray, np.ndarray]:
    """Step function (times, queue length after each time) of requests routed to
    ``node`` and not yet admitted, from the records' arrival and admission times."""
    mine = trace.node == node
    arrive = trace.arrival_s[mine]
    admit = trace.admit_s[mine]
    admit = admit[np.isfinite(admit)]
    times = np.concatenate([arrive, admit])
    steps = np.concatenate([np.ones(arrive.size), -np.ones(admit.size)])
    order = np.lexsort((-steps, times))  # at equal times count the arrival first
    return times[order], np.cumsum(steps[order])


def plot_burst_timeline(traces: Mapping[str, WindowTrace], path: str | Path) -> Path:
    """One panel per policy: each node's queue length over the window, copies marked."""
    plt = _pyplot()
    names = list(traces)
    fig, axes = plt.subplots(
        len(names), 1, figsize=(10.0, 2.4 * len(names) + 0.6), sharex=True, squeeze=False
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, name in zip(axes[:, 0], names, strict=True):
        trace = traces[name]
        top = 1.0
        for node in range(trace.n_nodes):
            times, lengths = queue_lengths(trace, node)
            if times.size:
                ax.step(
                    times,
                    lengths,
                    where="post",
                    color=colors[node % len(colors)],
                    linewidth=0.9,
                    label=f"node {node}",
                )
                top = max(top, float(lengths.max()))
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
        ax.set_ylabel("queued")
        ax.set_title(f"{name} · {trace.window} · {len(trace.copies)} copies", fontsize="medium")
        ax.grid(alpha=0.3)
    n_nodes = max(t.n_nodes for t in traces.values())
    axes[0, 0].legend(fontsize="x-small", ncol=min(n_nodes + 1, 6), loc="upper left")
    axes[-1, 0].set_xlabel("time in window (s)")
    path = _save(fig, path)
    plt.close(fig)
    return path
