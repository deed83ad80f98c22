"""The thresholds-over-time chart: its series, worked out by hand, and the file a
threshold agent's run writes."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agents.adapter import AgentPolicy
from envs.sim import SimConfig, setup_cluster
from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window
from experiments.evaluation import WindowTrace, run_window
from experiments.report import (
    cluster_queue,
    plot_thresholds_timeline,
    setting_series,
    thresholds_figure,
)

ZOO = Path(__file__).resolve().parents[2] / "agents" / "zoo"


def _trace(settings: list) -> WindowTrace:
    # node 0: arrivals at 0 and 1, admitted at 2 and 3; node 1: arrival at 1.5, admitted at 4
    return WindowTrace(
        window="hand",
        n_nodes=2,
        arrival_s=np.array([0.0, 1.0, 1.5]),
        admit_s=np.array([2.0, 3.0, 4.0]),
        node=np.array([0, 0, 1]),
        copies=[],
        settings=settings,
    )


def test_cluster_queue_sums_the_nodes_queues():
    times, queued = cluster_queue(_trace([]))
    assert times.tolist() == [0.0, 1.0, 1.5, 2.0, 3.0, 4.0]
    assert queued.tolist() == [1, 2, 3, 2, 1, 0]


def test_cluster_queue_nets_what_happens_at_one_time_on_different_nodes():
    # node 0: arrival at 0, admitted at 2; node 1: arrival at 2 (as node 0 admits),
    # admitted at 3; node 1 again: arrival at 2.5, admitted at once (never queued)
    trace = WindowTrace(
        window="hand",
        n_nodes=2,
        arrival_s=np.array([0.0, 2.0, 2.5]),
        admit_s=np.array([2.0, 3.0, 2.5]),
        node=np.array([0, 1, 1]),
        copies=[],
    )
    times, queued = cluster_queue(trace)
    assert times.tolist() == [0.0, 2.0, 3.0]
    assert queued.tolist() == [1, 1, 0]


def test_setting_series_has_one_row_per_epoch():
    log = [
        (0.0, (2, 1.0, 4, 65536, "resident")),
        (1.0, (3, 0.5, 2, 1024, "pending")),
        (2.0, (3, 0.5, 2, 1024, "pending+eft")),
        (3.0, (1, 8.0, 1, 4096, "resident+spread")),
        (4.0, (1, 8.0, 1, 4096, "spread")),
    ]
    times, values = setting_series(_trace(log))
    assert times.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert values.tolist() == [
        [2, 1.0, 4, 65536, 0.0],
        [3, 0.5, 2, 1024, 1.0],
        [3, 0.5, 2, 1024, 3.0],
        [1, 8.0, 1, 4096, 4.0],
        [1, 8.0, 1, 4096, 6.0],
    ]


def test_each_settings_panel_is_ticked_at_the_values_chosen():
    from experiments.report import setting_ticks

    assert setting_ticks("Z (s)", np.array([0.5, 8.0, 0.5, 0.25])) == (
        [0.25, 0.5, 8.0],
        ["0.25", "0.5", "8"],
    )
    assert setting_ticks("M (nodes)", np.array([3.0, 3.0])) == ([3.0], ["3"])  # whole nodes
    assert setting_ticks("min prefix (tokens)", np.array([65536.0, 1024.0])) == (
        [1024.0, 65536.0],
        ["1,024", "65,536"],
    )
    assert setting_ticks("rule", np.array([6.0, 1.0])) == ([1.0, 6.0], ["pending", "spread"])


def test_a_threshold_agents_run_draws_its_settings(tmp_path):
    agent = AgentPolicy.load(ZOO / "ppo_thresholds")
    window = synthetic_window(
        BurstedSyntheticConfig(n_bursts=2, burst_requests=30, n_decoys=4, burst_window_s=4.0), 2
    )
    result = run_window(agent, setup_cluster("70b_h100x4"), window, SimConfig(), (0, 0), True)
    trace = result.trace
    assert trace is not None and trace.settings == agent.settings_log
    assert [t for t, _ in trace.settings] == sorted(t for t, _ in trace.settings)
    path = plot_thresholds_timeline({"ppo_thresholds": trace}, tmp_path / "t.png")
    assert path.stat().st_size > 0
    with pytest.raises(ValueError, match="settings log"):
        plot_thresholds_timeline({"btb": _trace([])}, tmp_path / "none.png")


def test_a_threshold_agents_settings_are_written_for_every_window(tmp_path):
    """compare writes thresholds_settings.json: each window's epochs, as many as the
    row's epochs_rule_* counts, each the agent's log entry."""
    import json

    from experiments import compare

    out = tmp_path / "run"
    compare.main(["windows=2", "agents=ppo_thresholds", "policies=btb", f"out_dir={out}",
                  "charts=false", "progress=false"])  # fmt: skip
    log = json.loads((out / "thresholds_settings.json").read_text())
    assert list(log) == ["ppo_thresholds"]
    entry = log["ppo_thresholds"]
    assert entry["fields"] == ["start_s", "x", "z_s", "m", "min_prefix_tokens", "rule"]
    assert len(entry["windows"]) == 2
    row = next(
        r for r in json.loads((out / "results.json").read_text())["rows"]
        if r["policy"] == "ppo_thresholds"
    )  # fmt: skip
    epochs = sum(v for k, v in row.items() if k.startswith("epochs_rule_"))
    assert sum(len(epochs_of) for epochs_of in entry["windows"].values()) == epochs
    for epochs_of in entry["windows"].values():
        starts = [e[0] for e in epochs_of]
        assert starts == sorted(starts) and all(len(e) == 6 for e in epochs_of)


def test_the_timeline_window_is_chosen_and_checked(tmp_path):
    """``timeline_window=K`` draws the K-th window run (compare); one past the
    windows run is one line naming the option."""
    from experiments import compare
    from experiments._cli import UsageError
    from experiments.evaluation import evaluate_policies, split_windows

    runs = evaluate_policies(
        ["btb"], "70b_h100x4", split_windows("bursted_synthetic", 2), trace_window=1
    )
    names = [w.window for w in runs[0].windows]
    assert runs[0].trace is not None and runs[0].trace.window == names[1]
    out = tmp_path / "run"
    compare.main(["windows=2", "agents=none", "policies=btb", "timeline_window=1",
                  f"out_dir={out}", "progress=false"])  # fmt: skip
    assert (out / "burst_timeline.png").stat().st_size > 0
    with pytest.raises(
        (UsageError, ValueError),
        match=r"^timeline_window must be an integer in \[0, 1\], got 2 \(from the command line\)$",
    ):
        compare.main(["windows=2", "agents=none", "policies=btb", "timeline_window=2",
                      f"out_dir={tmp_path / 'refused'}", "progress=false"])  # fmt: skip
    assert not (tmp_path / "refused").exists()


def _drawn_tick_labels(monkeypatch, tmp_path, settings: list) -> list[list[Any]]:
    """The settings panels' drawn (non-blank) y tick labels of a chart of ``settings``,
    bottom up, each as (text, bottom px, top px) on the rendered figure."""
    from experiments import report

    figures = []
    monkeypatch.setattr(report, "_save", lambda fig, path: figures.append(fig) or Path(path))
    report.plot_thresholds_timeline({"agent": _trace(settings)}, tmp_path / "t.png")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    (fig,) = figures
    canvas = FigureCanvasAgg(fig)  # (pyplot closed the figure once saved)
    canvas.draw()
    renderer = canvas.get_renderer()
    panels = []
    for ax in fig.axes[1:]:  # (the first is the queue)
        drawn = [
            (t.get_text(), t.get_window_extent(renderer).y0, t.get_window_extent(renderer).y1)
            for t in ax.get_yticklabels()
            if t.get_text() and t.get_visible()
        ]
        panels.append(sorted(drawn, key=lambda d: d[1]))
    return panels


def test_no_settings_tick_label_is_drawn_over_another(monkeypatch, tmp_path):
    """Every choice of every setting in one window: X's 1, 2, 3 and 4 were drawn
    over one another (a linear panel 1.2 inches tall for 1 ... 16 arrivals); now
    X is on a log scale, as Z and the minimum prefix, and a label that would
    still touch the last one drawn is left blank (its grid line stays)."""
    from envs.thresholds import MIN_PREFIX_CHOICES, X_CHOICES, Z_CHOICES
    from experiments.report import RULES

    n = max(len(X_CHOICES), len(Z_CHOICES), len(MIN_PREFIX_CHOICES), len(RULES))
    settings = [
        (float(k), (X_CHOICES[k % 7], Z_CHOICES[k % 6], 1 + k % 4, MIN_PREFIX_CHOICES[k % 5],
                    RULES[k % len(RULES)]))
        for k in range(n * 6)
    ]  # fmt: skip
    panels = _drawn_tick_labels(monkeypatch, tmp_path, settings)
    assert panels[0][0][0] == "1"  # X's lowest is always named
    for drawn in panels:
        assert len(drawn) >= 2
        for (_, _, top), (label, bottom, _) in itertools.pairwise(drawn):
            assert bottom >= top - 0.5, f"{label!r} is drawn over the label below it"
    # the rule and M panels have room for every choice
    assert [label for label, _, _ in panels[2]] == ["1", "2", "3", "4"]
    assert [label for label, _, _ in panels[4]] == list(RULES)


def test_spaced_labels_blanks_a_label_closer_than_a_line_of_text():
    """Ticks at 0, 5, 8 and 30 px, 10 px of text: 5 is within 10 px of 0, so blank;
    8 is 8 px from 0 (the last kept), blank too; 30 is kept."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from experiments.report import spaced_labels

    fig = Figure(figsize=(1.0, 1.0), dpi=72)  # 1 pt = 1 px
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))  # 72 px tall
    ax.set_ylim(0.0, 72.0)  # 1 unit = 1 px
    assert spaced_labels(ax, [0.0, 5.0, 8.0, 30.0], ["a", "b", "c", "d"], 10.0) == [
        "a", "", "", "d",
    ]  # fmt: skip
    assert spaced_labels(ax, [0.0, 10.0, 20.0], ["a", "b", "c"], 10.0) == ["a", "b", "c"]


def test_a_long_column_title_is_wrapped_within_its_column(monkeypatch, tmp_path):
    """An agent labelled NAME@folder made a title one line of any length, past its
    column and over the next column's; a run of one epoch said "1 epochs"."""
    from experiments import report

    label = "ppo_thresholds@" + "/".join(["a_long_sweep_folder"] * 4)  # 94 characters
    title = report.column_title(label, "synthetic-0003", 1)
    assert title == (
        # 60 characters at most a line: the label cut at the 60th, then parts kept whole
        "ppo_thresholds@a_long_sweep_folder/a_long_sweep_folder/a_lon\n"
        "g_sweep_folder/a_long_sweep_folder · synthetic-0003\n"
        "1 epoch"
    )
    assert max(len(line) for line in title.splitlines()) == report.TITLE_CHARS == 60
    assert report.column_title("ppo_thresholds", "hand", 2) == "ppo_thresholds · hand · 2 epochs"
    figures = []
    monkeypatch.setattr(report, "_save", lambda fig, path: figures.append(fig) or Path(path))
    settings = [(0.0, (2, 1.0, 4, 65536, "resident"))]
    report.plot_thresholds_timeline({label: _trace(settings), "b": _trace(settings)}, tmp_path)
    (fig,) = figures
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles == [report.column_title(label, "hand", 1), "b · hand · 1 epoch"]


def _drawn(trace: WindowTrace) -> list[tuple[list[float], list[float]]]:
    """The (x, y) of each line of the chart's one column, top to bottom."""
    import matplotlib.pyplot as plt

    fig = thresholds_figure({"agent": trace})
    try:
        return [(ax.lines[0].get_xdata().tolist(), ax.lines[0].get_ydata().tolist())
                for ax in fig.axes]  # fmt: skip
    finally:
        plt.close(fig)


def test_the_queue_line_runs_to_the_end_of_the_settings_panels():
    """An audit: the queue line ended at the last queued request's admission (4 s)
    while the settings ran to a second after the last epoch opened (10 s), as if
    data were missing; it now holds 0 to 10 s too."""
    log = [(0.0, (2, 1.0, 4, 65536, "resident")), (9.0, (3, 0.5, 2, 1024, "pending"))]
    lines = _drawn(_trace(log))
    assert lines[0] == ([0.0, 1.0, 1.5, 2.0, 3.0, 4.0, 10.0], [1, 2, 3, 2, 1, 0, 0])
    assert lines[1] == ([0.0, 9.0, 10.0], [2, 3, 3])  # X
    assert lines[5] == ([0.0, 9.0, 10.0], [0, 1, 1])  # rule: resident, pending
    assert {x[-1] for x, _ in lines} == {10.0}


def test_a_queue_that_outlasts_the_epochs_sets_the_end():
    lines = _drawn(_trace([(0.0, (2, 1.0, 4, 65536, "resident"))]))  # ends at 1 s
    assert lines[0] == ([0.0, 1.0, 1.5, 2.0, 3.0, 4.0], [1, 2, 3, 2, 1, 0])
    assert lines[3] == ([0.0, 4.0], [4, 4])  # M, held to the queue's end


def test_a_window_where_nothing_queued_draws_a_queue_of_0():
    trace = WindowTrace(
        window="hand",
        n_nodes=1,
        arrival_s=np.array([0.5, 2.0]),
        admit_s=np.array([0.5, 2.0]),  # each admitted as it arrives
        node=np.array([0, 0]),
        copies=[],
        settings=[(0.5, (2, 1.0, 4, 65536, "resident")), (2.0, (2, 1.0, 4, 65536, "resident"))],
    )
    lines = _drawn(trace)
    assert lines[0] == ([0.5, 3.0], [0, 0])
    assert lines[1][0] == [0.5, 2.0, 3.0]
