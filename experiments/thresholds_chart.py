"""The thresholds-over-time chart of an adaptive-threshold agent (``btb/Thresholds-v0``).

One window: the cluster's queue (requests routed and not yet admitted, summed
over the nodes) on top, and below it, on the same time axis, the settings the
agent chose every epoch: X, Z, M, the minimum prefix and the routing rule.
``compare`` and ``evaluate`` write it (``thresholds_timeline.png``) when a
policy of the run kept a settings log (:attr:`WindowTrace.settings`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from experiments.charts import _pyplot, _save, queue_lengths
from experiments.evaluation import WindowTrace

PANELS = ("X (arrivals)", "Z (s)", "M (nodes)", "min prefix (tokens)", "rule (1 = pending)")


def cluster_queue(trace: WindowTrace) -> tuple[np.ndarray, np.ndarray]:
    """Step function (times, requests queued in the whole cluster after each time)."""
    times = [queue_lengths(trace, node) for node in range(trace.n_nodes)]
    at = np.concatenate([t for t, _ in times])
    steps = np.concatenate([np.diff(q, prepend=0.0) for _, q in times])
    order = np.argsort(at, kind="stable")
    return at[order], np.cumsum(steps[order])


def setting_series(trace: WindowTrace) -> tuple[np.ndarray, np.ndarray]:
    """(epoch start times, one row per epoch of X, Z, M, minimum prefix, rule)."""
    times = np.array([t for t, _ in trace.settings], dtype=float)
    values = np.array(
        [
            (x, z, m, p, 1.0 if rule == "pending" else 0.0)
            for _, (x, z, m, p, rule) in trace.settings
        ],
        dtype=float,
    ).reshape(-1, len(PANELS))
    return times, values


def plot_thresholds_timeline(traces: Mapping[str, WindowTrace], path: str | Path) -> Path:
    """One column per policy with a settings log: its queue, then its settings."""
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
        times, queued = cluster_queue(trace)
        if times.size:
            top.step(times, queued, where="post", linewidth=0.9)
        top.set_ylabel("queued")
        top.set_title(f"{name} · {trace.window} · {len(trace.settings)} epochs", fontsize="medium")
        epochs, values = setting_series(trace)
        end = max(float(times[-1]) if times.size else 0.0, float(epochs[-1]) + 1.0)
        for k, label in enumerate(PANELS):
            ax = axes[k + 1, col]
            ax.step(
                np.append(epochs, end),
                np.append(values[:, k], values[-1, k]),
                where="post",
                linewidth=0.9,
                color="tab:red",
            )
            if label.startswith("min prefix") or label.startswith("Z"):
                ax.set_yscale("log")
            ax.set_ylabel(label, fontsize="small")
            ax.grid(alpha=0.3)
        top.grid(alpha=0.3)
        axes[-1, col].set_xlabel("time in window (s)")
    path = _save(fig, path)
    plt.close(fig)
    return path
