"""The comparison run: evaluation rows, option parsing, charts, and the CLI end to end."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from envs.sim import SimConfig
from experiments import compare
from experiments._cli import UsageError, main_guard
from experiments.evaluation import (
    WindowResult,
    WindowTrace,
    add_reductions,
    evaluate_policies,
    summarize_windows,
)
from experiments.report import queue_lengths
from tests.sim.simkit import small_window

REQUIRED = (
    "setup", "workload", "policy", "requests", "ttft_mean_s", "ttft_p50_s", "ttft_p95_s",
    "ttft_p99_s", "e2e_mean_s", "queue_mean_s", "hbm_hit_rate", "warm_copies", "warm_bytes",
    "warm_hit_rate", "ttft_mean_reduction_pct", "ttft_p95_reduction_pct",
)  # fmt: skip


def window(
    ttft: list[float],
    hits: int,
    landed: int,
    hit_rate: float,
    copies: int,
    byte_rate: float = 0.0,
    **capacity: float,
) -> WindowResult:
    """A window's result; ``capacity`` sets records.capacity_metrics' values (and
    ``busy_span_s``, the time they are shares of), 0 (1 s) unless given."""
    values = np.asarray(ttft)
    shares = ("prefill_busy_fraction", "decode_busy_fraction", "batch_occupancy_mean")
    capacity = {
        "busy_span_s": 1.0,
        "load_imbalance": 1.0,
        "kv_occupancy_mean": 0.0,
        "batch_occupancy_peak": 0.0,
        "kv_occupancy_peak": 0.0,
        "warm_amplification": 0.0,
        **dict.fromkeys(shares, 0.0),
        **capacity,
    }
    return WindowResult(
        window="w",
        ttft_s=values,
        e2e_s=values + 1.0,
        queue_s=values / 2,
        input_tokens=1000,
        hit_hbm_tokens=hits,
        summary={
            "completed": len(ttft),
            "warm_copies": copies,
            "warm_copies_landed": landed,
            "warm_copies_lost": 1,
            "warm_bytes": 10.0 * landed,
            "warm_hit_rate": hit_rate,
            "warm_byte_hit_rate": byte_rate,
            "displaced_by_copies_blocks": 0,
            **capacity,
        },
        metrics={"shadow_copies": 2, "shadow_hit_rate": hit_rate},
        wall_s=0.5,
    )


def test_rows_pool_requests_and_weight_rates_by_tokens_and_copies() -> None:
    results = [
        window([1.0, 3.0], 600, 4, 0.5, 5, 0.25, warm_amplification=0.2),
        window([2.0, 10.0], 200, 1, 1.0, 1, 1.0, warm_amplification=1.0),
    ]
    row = summarize_windows(results, "70b_h100x4", "toy", "btb", SimConfig())
    assert row["requests"] == 4 and row["windows"] == 2
    assert row["ttft_mean_s"] == pytest.approx(4.0)
    assert row["ttft_p50_s"] == pytest.approx(2.5)
    assert row["e2e_mean_s"] == pytest.approx(5.0)
    assert row["queue_mean_s"] == pytest.approx(2.0)
    assert row["hbm_hit_rate"] == pytest.approx(800 / 2000)
    assert row["warm_copies"] == 6 and row["warm_copies_landed"] == 5
    assert row["warm_copies_lost"] == 2
    assert row["warm_bytes"] == pytest.approx(50.0)
    assert row["warm_hit_rate"] == pytest.approx((0.5 * 4 + 1.0 * 1) / 5)
    # bytes: 40 copied at 0.25 used and 10 at 1.0
    assert row["warm_byte_hit_rate"] == pytest.approx((0.25 * 40 + 1.0 * 10) / 50)
    assert row["warm_amplification"] == pytest.approx((0.2 * 40 + 1.0 * 10) / 50)  # unused bytes
    assert row["ttft_mean_s_per_window"] == [2.0, 6.0]
    assert row["shadow_copies"] == 4 and row["shadow_hit_rate"] == pytest.approx(0.75)
    assert row["requests_per_s"] == pytest.approx(4.0)


def test_rows_pool_capacity_by_each_windows_time() -> None:
    # a 10 s window at 0.2 prefill-busy and a 30 s one at 0.6: (2 + 18) / 40 = 0.5
    shares = ("prefill_busy_fraction", "decode_busy_fraction", "batch_occupancy_mean")

    def timed(busy_span_s: float, share: float, kv: float, imbalance: float) -> WindowResult:
        capacity = {"kv_occupancy_mean": kv, "load_imbalance": imbalance}
        capacity |= {"kv_occupancy_peak": 2 * kv, "batch_occupancy_peak": 1 - kv}
        return window([1.0], 0, 0, 0.0, 0, busy_span_s=busy_span_s, **capacity,
                      **dict.fromkeys(shares, share))  # fmt: skip

    first, second = timed(10.0, 0.2, 0.1, 1.0), timed(30.0, 0.6, 0.5, 2.0)
    row = summarize_windows([first, second], "s", "w", "p", SimConfig())
    assert [row[key] for key in shares] == pytest.approx([0.5] * 3)
    assert row["kv_occupancy_mean"] == pytest.approx((1 + 15) / 40)
    assert row["load_imbalance"] == pytest.approx(1.5)  # the windows' mean
    assert (row["kv_occupancy_peak"], row["batch_occupancy_peak"]) == (1.0, 0.9)  # the highest


def test_reductions_are_relative_to_the_baseline_of_the_same_setup() -> None:
    rows = [
        {"setup": "a", "workload": "w", "causal_kv": True, "copy_model": "reference",
         "policy": p, "ttft_mean_s": m, "ttft_p95_s": q}
        for p, m, q in (("cache_aware", 2.0, 10.0), ("btb", 0.5, 12.0))
    ]  # fmt: skip
    add_reductions(rows, "cache_aware")
    assert rows[0]["ttft_mean_reduction_pct"] == 0.0
    assert rows[1]["ttft_mean_reduction_pct"] == pytest.approx(75.0)
    assert rows[1]["ttft_p95_reduction_pct"] == pytest.approx(-20.0)
    add_reductions(rows, "nobody")
    assert rows[1]["ttft_mean_reduction_pct"] is None


def test_queue_length_is_routed_minus_admitted() -> None:
    trace = WindowTrace(
        window="w",
        n_nodes=2,
        arrival_s=np.array([0.0, 1.0, 2.0, 1.5]),
        admit_s=np.array([0.5, 3.0, 3.0, 1.5]),
        node=np.array([0, 0, 0, 1]),
        copies=[],
    )
    times, lengths = queue_lengths(trace, 0)
    assert times.tolist() == [0.0, 0.5, 1.0, 2.0, 3.0]  # two admitted at 3: one step
    assert lengths.tolist() == [1, 0, 1, 2, 0]
    assert queue_lengths(trace, 1)[0].size == 0  # admitted as it arrived: never queued


def test_a_request_admitted_on_arrival_is_never_queued() -> None:
    """Counting an arrival before an admission at the same time drew a queue of 1
    for every request admitted as it arrived."""
    trace = WindowTrace("w", 1, np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0, 2.0]),
                        np.array([0, 0, 0]), [])  # fmt: skip
    times, lengths = queue_lengths(trace, 0)
    assert times.size == 0 and lengths.size == 0
    # A at 0 and C at 2 go straight in; B waits from 1 to 3, D from 3 (as B goes in) to 4
    trace = WindowTrace("w", 1, np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.0, 3.0, 2.0, 4.0]),
                        np.array([0, 0, 0, 0]), [])  # fmt: skip
    times, lengths = queue_lengths(trace, 0)
    assert times.tolist() == [1.0, 3.0, 4.0]
    assert lengths.tolist() == [1, 1, 0]  # at 3: B out and D in, no spike to 2 nor dip to 0


def test_policy_kwargs_parse_and_name_the_policy() -> None:
    parsed = compare.policy_kwargs(["btb.m=2", "btb.z=0.5", "btb.shadow=true"], ["btb"])
    assert parsed == {"btb": {"m": 2, "z": 0.5, "shadow": True}}
    with pytest.raises(UsageError, match=r"names baseline 'dynamo', which is not among the "
                       r"baselines run \(policies: btb\)$"):  # fmt: skip
        compare.policy_kwargs(["dynamo.temperature=1"], ["btb"])
    with pytest.raises(UsageError, match=r"names agent 'ppo_thresholds', which is not among "
                       r"the agents run \(policies: btb\)$"):  # fmt: skip
        compare.policy_kwargs(["ppo_thresholds.y_tokens=8192"], ["btb"])
    with pytest.raises(UsageError, match=r"names 'btbb', which is no baseline nor agent run "
                       r"\(policies: btb\)$"):  # fmt: skip
        compare.policy_kwargs(["btbb.x=1"], ["btb"])
    with pytest.raises(UsageError, match=r"POLICY\.KEY=VALUE"):
        compare.policy_kwargs(["m=2"], ["btb"])


@pytest.mark.parametrize(("text", "value"), [("no", False), ("off", False), ("0", False),
                                             ("yes", True), ("TRUE", True)])  # fmt: skip
def test_policy_kwargs_bools_parse_strictly(text: str, value: bool) -> None:
    assert compare.policy_kwargs([f"btb.shadow={text}"], ["btb"]) == {"btb": {"shadow": value}}


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (
            "btb.shadow=maybe",
            r"policy_kwargs: btb\.shadow='maybe' is not a valid bool \(from the command line\)$",
        ),
        (
            "btb.m=2.5",
            r"policy_kwargs: btb\.m='2\.5' is not a valid int \(from the command line\)$",
        ),
        (
            "btb.z=soon",
            r"policy_kwargs: btb\.z='soon' is not a valid float \(from the command line\)$",
        ),
        (
            "btb.x=none",
            r"policy_kwargs: btb\.x='none' is not a valid int \(from the command line\)$",
        ),
        ("btb.q=1", r"'btb\.q=1': btb has no setting 'q' \(settings: x, y_tokens, z"),
    ],
)
def test_policy_kwargs_of_the_wrong_type_name_the_setting(item: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        compare.policy_kwargs([item], ["btb"])
    assert compare.policy_kwargs(["btb.m=none"], ["btb"]) == {"btb": {"m": None}}


def test_bad_options_exit_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    assert main_guard(lambda: compare.main(["setup=nope"])) == 2
    assert "unknown setup 'nope'" in capsys.readouterr().err
    assert main_guard(lambda: compare.main(["policies=cache_aware,nope"])) == 2
    assert "unknown policy 'nope'" in capsys.readouterr().err
    # a list in brackets, as the Hydra commands write it (was: unknown policy '[cache_aware')
    assert main_guard(lambda: compare.main(["policies=[cache_aware, nope]"])) == 2
    assert "unknown policy 'nope' (from the command line); known:" in capsys.readouterr().err


def test_compare_end_to_end_writes_results_and_charts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "run"
    compare.main(
        ["policies=btb,oracle_warm", "windows=1", f"out_dir={out}", "progress=false",
         "policy_kwargs=btb.m=3", "agents=none"]
    )  # fmt: skip
    payload = json.loads((out / "results.json").read_text())
    assert set(payload) == {"rows", "config", "provenance"}
    made = payload["provenance"]  # what made the file: the code, the core, the machine
    assert made["btb_gym"] and made["core"] in ("compiled", "python") and made["cpus"] >= 1
    assert made["commit"] is None or len(made["commit"]) == 40
    assert made["cwd"] == str(Path.cwd()) and made["agent_files"] == {}  # agents=none
    rows = payload["rows"]
    # baseline added first, the lower bound last
    assert [r["policy"] for r in rows] == [
        "cache_aware",
        "btb",
        "oracle_warm",
        "floor",
        "floor_capacity",
    ]
    assert rows[3]["ttft_mean_s"] < rows[2]["ttft_mean_s"] and rows[3]["requests"] == 4120
    rows = rows[:3]
    for row in rows:
        assert set(REQUIRED) <= set(row)
        assert row["setup"] == "70b_h100x4" and row["workload"] == "bursted_synthetic"
        assert row["requests"] == 4120 and row["windows"] == 1
    assert rows[0]["ttft_mean_reduction_pct"] == 0.0
    assert rows[1]["warm_copies"] > 0 and rows[0]["warm_copies"] == 0
    assert rows[2]["ttft_mean_s"] < rows[0]["ttft_mean_s"]
    assert payload["config"]["policy_kwargs"] == {"btb": {"m": 3}}
    assert payload["config"]["sim"] == {"causal_kv": True, "copy_model": "reference"}
    for name in ("ttft_reduction.png", "ttft_cdf.png", "burst_timeline.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert not list(out.glob(".*"))  # no temporary files left behind


def test_a_btb_whose_y_no_prompt_reaches_gets_a_note_under_the_table(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """btb made no copy, equal to cache_aware, and only btb_tuned had a note."""
    from experiments.report import btb_lines

    out = tmp_path / "run"
    code = main_guard(lambda: compare.main(
        ["policies=btb,btb_pending", "policy_kwargs=btb.y_tokens=1048576", "windows=1",
         "agents=none", "charts=false", "progress=false", f"out_dir={out}"]
    ))  # fmt: skip
    assert code == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if "reached Y" in line]
    assert notes == [
        "btb: in every window no prompt reached Y, so BTB made no copy there and its "
        "fallback routed every request (cache_aware; btb_eft's: eft; a thresholds agent's: "
        "its rule's); a Y the prompts reach lets BTB fire (compare: "
        "policy_kwargs=btb.y_tokens=...; evaluate: "
        "+policy_kwargs.btb.y_tokens=...)"
    ]  # btb_pending's default Y is reached: no note
    rows = {r["policy"]: r for r in json.loads((out / "results.json").read_text())["rows"]}
    assert rows["btb"]["y_unreached_rate"] == 1.0 and rows["btb"]["warm_copies"] == 0
    assert "y_unreached_rate" not in rows["btb_pending"] and rows["btb_pending"]["warm_copies"] > 0
    # the windows where it was so, said once for the BTBs that share the share
    shares = [
        {"policy": "btb", "y_unreached_rate": 0.4},
        {"policy": "btb_eft", "y_unreached_rate": 0.4},
    ]
    (line,) = btb_lines(shares)
    assert line.startswith("btb, btb_eft: in 40 % of the windows no prompt reached Y, ")


def test_a_thresholds_agent_whose_y_no_prompt_reaches_gets_the_note(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A thresholds agent given a Y longer than every prompt (the window's are
    65,536 + 256 tokens and less) routed as its fallbacks do with no word: its row
    now carries its BTB's y_unreached_rate and the table the note btb gets."""
    out = tmp_path / "run"
    code = main_guard(lambda: compare.main(
        ["policies=cache_aware", "agents=ppo_thresholds,ppo_thresholds_eft",
         "policy_kwargs=ppo_thresholds.y_tokens=262144", "windows=1", "charts=false",
         "progress=false", f"out_dir={out}"]
    ))  # fmt: skip
    assert code == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if "reached Y" in line]
    assert len(notes) == 1
    assert notes[0].startswith("ppo_thresholds: in every window no prompt reached Y, so BTB ")
    assert notes[0].endswith("(compare: policy_kwargs=ppo_thresholds.y_tokens=...; evaluate: "
                             "+policy_kwargs.ppo_thresholds.y_tokens=...)")  # fmt: skip
    rows = {r["policy"]: r for r in json.loads((out / "results.json").read_text())["rows"]}
    assert rows["ppo_thresholds"]["y_unreached_rate"] == 1.0
    assert rows["ppo_thresholds"]["warm_copies"] == 0  # its BTB never fired
    assert "y_unreached_rate" not in rows["ppo_thresholds_eft"]  # its own key is reached
    assert rows["ppo_thresholds_eft"]["warm_copies"] > 0


def test_compare_runs_the_zoo_agents_next_to_the_baselines(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "run"
    compare.main(  # one smaller window (1,560 requests): which rows are written is the check
        ["policies=btb", "windows=1", "workload=agent_fanout", f"out_dir={out}",
         "progress=false", "charts=false"]
    )  # fmt: skip
    payload = json.loads((out / "results.json").read_text())
    zoo = sorted(p.parent.name for p in compare.ZOO.glob("*/agent.json"))
    assert zoo, "agents/zoo ships at least one agent"
    names = [row["policy"] for row in payload["rows"]]
    for folder in zoo:
        agent = json.loads((compare.ZOO / folder / "agent.json").read_text())
        assert agent["name"] in names
    with pytest.raises(UsageError, match="not an agent checkpoint"):
        compare.main([f"agents={tmp_path}", "progress=false"])


def test_table_columns_stay_aligned_with_long_values():
    from experiments.report import comparison_table

    row = {
        "policy": "btb",
        "requests": 4120,
        "ttft_mean_s": 1234.5,
        "ttft_p50_s": 1.0,
        "ttft_p95_s": 12345.678,
        "ttft_p99_s": 3.0,
        "e2e_mean_s": 4.0,
        "queue_mean_s": 0.5,
        "hbm_hit_rate": 0.9,
        "warm_copies": 12,
        "warm_hit_rate": 0.5,
        "ttft_mean_reduction_pct": -250.0,
        "ttft_p95_reduction_pct": None,
    }
    slow = dict(row, policy="cache_aware", ttft_mean_s=0.5, ttft_p95_s=1.0)
    head, rule, first, second, _, copies = comparison_table([row, slow], "cache_aware").splitlines()
    assert copies.startswith("copies = warm copies issued; warm hit / warm byte hit = share of ")
    assert len(head) == len(rule) == len(first) == len(second)
    end = head.index("p95 ") + len("p95")  # right-aligned: values end under the header's end
    assert first[:end].endswith("12345.678") and second[:end].endswith(" 1.000")
    assert first.endswith("-250.0        -")
    no_baseline = comparison_table([dict(row, ttft_mean_reduction_pct=None)], "").splitlines()[-2]
    assert no_baseline == "times in seconds; no baseline (baseline=), so no reductions (d)"


def test_reductions_chart_marks_clipped_bars_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    from experiments import report

    hatches: list[str] = []
    texts: list[str] = []
    swatches: list[str | None] = []

    def spy_save(fig, path):
        for ax in fig.axes:
            hatches.extend(p.get_hatch() for p in ax.patches)
            legend = ax.get_legend()
            texts.extend(t.get_text() for t in legend.get_texts())
            swatches.extend(h.get_hatch() for h in legend.legend_handles)
        return real_save(fig, path)

    real_save = report._save
    monkeypatch.setattr(report, "_save", spy_save)
    rows = [
        {"policy": "slow", "ttft_mean_reduction_pct": -250.0, "ttft_p95_reduction_pct": -40.0},
        {"policy": "ok", "ttft_mean_reduction_pct": 10.0, "ttft_p95_reduction_pct": 5.0},
    ]
    path = report.plot_reductions(rows, "cache_aware", tmp_path / "reductions.png")
    assert path.stat().st_size > 0
    assert [p.name for p in tmp_path.iterdir()] == ["reductions.png"]
    assert hatches.count("//") == 1  # only the -250 % bar is clipped
    assert texts == ["mean TTFT", "p95 TTFT", "below -100 %, clipped"]
    assert swatches[:2] == [None, None]  # plain swatches, though the first mean bar is hatched


def test_reductions_chart_labels_a_bar_that_rounds_to_zero_with_a_decimal(tmp_path, monkeypatch):
    """-0.4 % was labelled ``-0`` (and the reference's 0 ``+0``): a bar that rounds
    to zero in whole percent gets the table's one decimal."""
    from experiments import report

    figures = _spy_figures(monkeypatch)
    rows = [
        {"policy": "ref", "ttft_mean_reduction_pct": 0.0, "ttft_p95_reduction_pct": 0.0},
        {"policy": "near", "ttft_mean_reduction_pct": -0.4, "ttft_p95_reduction_pct": 0.49},
        {"policy": "far", "ttft_mean_reduction_pct": 41.3, "ttft_p95_reduction_pct": -250.0},
    ]
    report.plot_reductions(rows, "ref", tmp_path / "reductions.png")
    (fig,) = figures
    labels = [text.get_text() for text in fig.axes[0].texts]
    assert labels == ["0.0", "-0.4", "+41", "0.0", "+0.5", "-250"]  # the means, then the p95s


def _spy_figures(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The figures report's charts save, kept open for the test to read."""
    from experiments import report

    figures: list[Any] = []
    real_save = report._save

    def spy_save(fig: Any, path: Any) -> Any:
        figures.append(fig)
        return real_save(fig, path)

    monkeypatch.setattr(report, "_save", spy_save)
    return figures


def test_burst_timeline_names_every_panel_s_nodes_and_its_unit(tmp_path, monkeypatch):
    """The legend listed the first panel's nodes only, and the axis said "queued"."""
    from experiments.report import plot_burst_timeline

    figures = _spy_figures(monkeypatch)

    def waits_on(node: int) -> WindowTrace:  # one request waits, from 0 to 1 s, on node
        return WindowTrace("w", 3, np.array([0.0]), np.array([1.0]), np.array([node]), [])

    plot_burst_timeline({"a": waits_on(0), "b": waits_on(2)}, tmp_path / "t.png")
    (fig,) = figures
    first = fig.axes[0]
    assert [t.get_text() for t in first.get_legend().get_texts()] == ["node 0", "node 2"]
    assert {ax.get_ylabel() for ax in fig.axes} == {"requests queued"}


def test_ttft_cdf_rises_from_zero_and_counts_one_window(tmp_path, monkeypatch):
    """The CDF began at 1/n, and a run of one window was titled "1 windows"."""
    from experiments.report import write_charts

    figures = _spy_figures(monkeypatch)
    runs = evaluate_policies(["cache_aware"], "70b_h100x4", [small_window()], SimConfig())
    write_charts(runs, "", tmp_path)
    cdf = figures[0].axes[0]
    assert cdf.get_title().endswith(" · 1 window")
    (line,) = cdf.get_lines()
    y = line.get_ydata()
    n = len(runs[0].ttft_s)  # 54 requests: 0, 1/54, ..., 1
    assert len(y) == n + 1 and y[0] == 0.0 and y[1] == pytest.approx(1 / n) and y[-1] == 1.0


def test_reductions_chart_is_titled_with_the_window_count_as_the_cdf_is(tmp_path, monkeypatch):
    """ttft_reduction.png's title said setup and workload only; ttft_cdf.png's the
    windows too, so the two charts of one run were titled apart."""
    from experiments import report

    titles: dict[str, str] = {}
    real_save = report._save

    def spy_save(fig: Any, path: Any) -> Any:
        titles[Path(path).name] = fig.axes[0].get_title()
        return real_save(fig, path)

    monkeypatch.setattr(report, "_save", spy_save)
    windows = [small_window(seed) for seed in (1, 2)]
    policies = ["cache_aware", "btb"]
    runs = evaluate_policies(policies, "70b_h100x4", windows, SimConfig(), workload="small")
    report.write_charts(runs, "cache_aware", tmp_path)
    reductions, cdf = report.CHARTS[:2]
    assert titles[reductions] == titles[cdf] == "70b_h100x4 · small · 2 windows"


def test_compare_keeps_same_named_agents_apart(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    for copy in ("a", "b"):
        shutil.copytree(compare.ZOO / "bc_route_warm", tmp_path / copy / "agent")
    out = tmp_path / "run"
    compare.main(
        ["policies=cache_aware", "windows=1", f"out_dir={out}", "progress=false",
         "workload=agent_fanout",  # a small window: the names are what this checks
         "charts=false", f"agents={tmp_path / 'a' / 'agent'},{tmp_path / 'b' / 'agent'}"]
    )  # fmt: skip
    rows = json.loads((out / "results.json").read_text())["rows"]
    names = [row["policy"] for row in rows]
    assert names == [
        "cache_aware",
        "bc_route_warm@a/agent",
        "bc_route_warm@b/agent",
        "floor",
        "floor_capacity",
    ]
    assert rows[1]["ttft_mean_s"] == rows[2]["ttft_mean_s"]  # the same agent, twice


def test_a_shipped_agent_is_named_by_its_name_in_agents_and_hinted_at_in_policies() -> None:
    zoo = compare.ZOO
    assert compare.resolve_agents(["ppo_thresholds_spread"]) == [zoo / "ppo_thresholds_spread"]
    with pytest.raises(UsageError, match=r"nor a shipped agent's name \(agents/zoo/: bc_route"):
        compare.resolve_agents(["no_such_agent"])
    options = {"policies": ["eft_pull_spread", "ppo_thresholds_spread"], "baseline": None}
    with pytest.raises(
        UsageError,
        match=r"'ppo_thresholds_spread' is a shipped agent, not a baseline: pass it "
        r"as agents=ppo_thresholds_spread",
    ):
        compare.resolve_policies(options)


def test_one_agent_folder_under_two_spellings_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """ppo_thresholds and agents/zoo/ppo_thresholds are one folder: it would run twice."""
    zoo = compare.ZOO / "ppo_thresholds"
    with pytest.raises(UsageError, match=r"^agents: 'ppo_thresholds' and "
                       rf"'{zoo}' name one agent folder \({zoo}\): name it once$"):  # fmt: skip
        compare.resolve_agents(["ppo_thresholds", str(zoo)])
    with pytest.raises(UsageError, match=r"^agents: 'zoo' and 'ppo_thresholds' name one agent"):
        compare.resolve_agents(["zoo", "ppo_thresholds"])
    (tmp_path / "here").symlink_to(zoo)  # a link to the folder is the folder
    with pytest.raises(UsageError, match=r"^agents: 'ppo_thresholds' and '.*here' name one"):
        compare.resolve_agents(["ppo_thresholds", str(tmp_path / "here")])
    assert compare.resolve_agents(["ppo_thresholds", "ppo_thresholds_spread", "none"]) == [
        zoo,
        compare.ZOO / "ppo_thresholds_spread",
    ]


def test_a_setting_given_twice_in_policy_kwargs_is_refused() -> None:
    with pytest.raises(UsageError, match=r"^policy_kwargs: btb\.m is given twice "
                       r"\(btb\.m=2, then btb\.m=3\)$"):  # fmt: skip
        compare.policy_kwargs(["btb.m=2", "btb.z=0.5", "btb.m=3"], ["btb"])
    both = compare.policy_kwargs(["btb.m=2", "btb_pending.m=3"], ["btb", "btb_pending"])
    assert both == {"btb": {"m": 2}, "btb_pending": {"m": 3}}  # one key of two policies


def test_asking_more_windows_than_the_split_holds_warns_with_the_count() -> None:
    from envs.sim.errors import SettingWarning
    from experiments.evaluation import count_windows

    with pytest.warns(
        SettingWarning, match=r"^windows=100: .* has 15 test windows; all of them run$"
    ):
        assert count_windows("bursted_synthetic", 100) == 15
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert count_windows("bursted_synthetic", 15) == 15
        assert count_windows("bursted_synthetic", None) == 15


def test_help_lists_the_sim_options_with_their_defaults(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from experiments import reproduce

    for main in (compare.main, reproduce.main):
        with pytest.raises(SystemExit) as stop:
            main(["--help"])
        assert stop.value.code == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].startswith("usage: python -m experiments.")
        assert "  sim.router_view_delay_s=0.0" in out
        assert "  sim.reclaim_order=lru" in out
        assert "  sim.fault_node_loss_s=" in out  # an empty list


def test_typed_settings_of_a_hydra_command_are_checked_not_reparsed() -> None:
    """evaluate's +policy_kwargs values come typed from YAML: a whole float is an int,
    an int is a float where a float is taken, None where allowed; nothing goes back
    through text (8e3 was refused as the string '8000.0')."""
    settings = {"btb": {"y_tokens": 8e3, "z": 3, "shadow": True, "min_prefix_tokens": None}}
    got = compare.policy_settings(settings, ["cache_aware", "btb"])
    assert got == {"btb": {"y_tokens": 8000, "z": 3.0, "shadow": True, "min_prefix_tokens": None}}
    assert type(got["btb"]["y_tokens"]) is int and type(got["btb"]["z"]) is float
    for value, kind in ((2.5, "int"), (True, "int"), ("3", "int"), ({"y": 1}, "int")):
        if value == "3":  # a quoted number is text: parsed, as the key=value commands do
            assert compare.policy_settings({"btb": {"x": value}}, ["btb"]) == {"btb": {"x": 3}}
            continue
        with pytest.raises(compare.UsageError, match=rf"btb\.x={value!r} is not a valid {kind}"):
            compare.policy_settings({"btb": {"x": value}}, ["btb"])
    with pytest.raises(compare.UsageError, match=r"^policy_kwargs\.btb must hold settings"):
        compare.policy_settings({"btb": 3}, ["btb"])
    # YAML's 0 and 1 for a bool, as text 0 and 1 are (shadow=0 was refused, shadow=no taken)
    for value, flag in ((0, False), (1, True), ("no", False), ("on", True)):
        got = compare.policy_settings({"btb": {"shadow": value}}, ["btb"])
        assert got == {"btb": {"shadow": flag}} and type(got["btb"]["shadow"]) is bool
    with pytest.raises(compare.UsageError, match=r"btb\.shadow=2 is not a valid bool"):
        compare.policy_settings({"btb": {"shadow": 2}}, ["btb"])


def test_a_run_folder_given_as_an_agent_names_the_agents_it_holds(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """helper-78's audit: ``agents=RUN`` was refused as no checkpoint, with no word of
    RUN/agent."""
    for name in ("agent", "checkpoints/step_64"):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "agent.json").write_text("{}")
    with pytest.raises(UsageError, match=(
        rf"^agents: '{tmp_path}' is not an agent checkpoint \(no agent\.json there; a run "
        rf"folder: its agents are in {tmp_path}/agent or {tmp_path}/checkpoints/step_N\) nor "
    )):  # fmt: skip
        compare.resolve_agents([str(tmp_path)])


def test_the_burst_timeline_draws_the_fastest_agent_beside_the_baselines() -> None:
    """helper-78's audit: the timeline drew cache_aware, btb and oracle_warm only,
    never the agent evaluated."""
    from experiments.report import timeline_choice

    rows = [
        {"policy": name, "ttft_mean_s": mean}
        for name, mean in (("cache_aware", 1.3), ("btb", 1.2), ("btb_pending", 1.0),
                           ("slow_agent", 2.0), ("fast_agent", 0.5), ("floor", 0.3))
    ]  # fmt: skip
    traces: dict[str, object] = {row["policy"]: object() for row in rows}
    assert list(timeline_choice(rows, traces)) == ["cache_aware", "btb", "fast_agent"]
    baselines = [row for row in rows if "agent" not in row["policy"]]
    assert list(timeline_choice(baselines, traces)) == ["cache_aware", "btb", "btb_pending"]


def test_a_str_setting_gets_the_same_value_from_compare_and_evaluate(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """One rule for both commands: ``mode=none`` for a ``mode: str`` setting is the
    string 'none' (compare passed Python None, evaluate 'none'); None only where the
    type takes it (``limit: int | None``), from ``none`` or Hydra's ``null``."""
    from hydra import compose, initialize_config_dir

    from baselines.policy import POLICIES, Policy, register
    from experiments.evaluate import evaluate

    seen: list[tuple[object, object]] = []

    @register("probe_mode")
    class ProbeMode(Policy):
        def __init__(self, mode: str = "big", limit: int | None = 3) -> None:
            seen.append((mode, limit))

        def decide(self, sim, request):  # type: ignore[no-untyped-def]
            return 0

    conf = Path(__file__).resolve().parents[2] / "conf"
    try:
        argv = ["policies=probe_mode", "agents=none", "windows=1", "charts=false",
                "progress=false", "policy_kwargs=probe_mode.mode=none,probe_mode.limit=none",
                f"out_dir={tmp_path / 'compare'}"]  # fmt: skip
        assert main_guard(lambda: compare.main(argv)) == 0
        from_compare = set(seen)
        seen.clear()
        with initialize_config_dir(config_dir=str(conf), version_base="1.3"):
            cfg = compose(
                config_name="evaluate",
                overrides=["workload=tiny", "logger=none", "progress=false",
                           "policies=[probe_mode]", f"out_dir={tmp_path / 'evaluate'}",
                           "+policy_kwargs.probe_mode.mode=none",
                           "+policy_kwargs.probe_mode.limit=null"],
            )  # fmt: skip
        evaluate(cfg)
        from_evaluate = set(seen)
    finally:
        POLICIES.pop("probe_mode", None)
    assert from_compare == from_evaluate == {("none", None)}


def test_setting_values_follow_the_declared_type() -> None:
    """A str setting takes text as written; a number or null Hydra typed is no str
    (quoted, it is text); an annotation wins over its default's type (a float
    setting with the default 64 took no 2.5)."""
    from baselines.policy import POLICIES, Policy, register

    @register("probe_kinds")
    class ProbeKinds(Policy):
        def __init__(self, mode: str = "big", weight: float = 64) -> None:
            pass

        def decide(self, sim, request):  # type: ignore[no-untyped-def]
            return 0

    try:
        got = compare.policy_kwargs(
            ["probe_kinds.mode=3", "probe_kinds.weight=2.5"], ["probe_kinds"]
        )
        assert got == {"probe_kinds": {"mode": "3", "weight": 2.5}}
        assert compare.policy_kwargs(["probe_kinds.mode=null"], ["probe_kinds"]) == {
            "probe_kinds": {"mode": "null"}
        }
        typed = compare.policy_settings({"probe_kinds": {"mode": "3"}}, ["probe_kinds"])
        assert typed == {"probe_kinds": {"mode": "3"}}
        with pytest.raises(UsageError, match=r"^policy_kwargs: probe_kinds\.mode=3 is not a "
                           r"valid str \(to give it as text, quote it: "
                           r"\+policy_kwargs\.probe_kinds\.mode='3'\)$"):  # fmt: skip
            compare.policy_settings({"probe_kinds": {"mode": 3}}, ["probe_kinds"])
        with pytest.raises(UsageError, match=r"^policy_kwargs: probe_kinds\.mode=None is not "
                           r"a valid str$"):  # fmt: skip
            compare.policy_settings({"probe_kinds": {"mode": None}}, ["probe_kinds"])
        with pytest.raises(UsageError, match=r"probe_kinds\.weight='x' is not a valid float"):
            compare.policy_kwargs(["probe_kinds.weight=x"], ["probe_kinds"])
    finally:
        POLICIES.pop("probe_kinds", None)


def test_compare_takes_generator_parameters_as_make_dataset_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``params=key=value,...`` (compare refused workload.rate_per_s=, workload.params.
    rate_per_s= and params= alike): 8 bursts of 6 requests and 2 decoys are 50
    requests a window, and the rows say which workload ran, with the values the
    generator took (they named them as typed, ``06``). A value the generator
    refuses, a window with no request and params= beside a trace are one line each,
    exit 2, before any folder."""
    out = tmp_path / "run"
    argv = ["policies=btb", "agents=none", "windows=1", "charts=false", "progress=false",
            "params=burst_requests=06,n_decoys=2", f"out_dir={out}"]  # fmt: skip
    assert main_guard(lambda: compare.main(argv)) == 0
    result = json.loads((out / "results.json").read_text())
    assert {(r["workload"], r["requests"]) for r in result["rows"] if r["policy"] == "btb"} == {
        ("bursted_synthetic[burst_requests=6,n_decoys=2]", 50)
    }
    assert result["config"]["params"] == ["burst_requests=06", "n_decoys=2"]  # as typed
    # the rows name them as the generator took them (06 is 6), as evaluate's do
    capsys.readouterr()
    trace = Path(__file__).resolve().parents[2] / "examples" / "mooncake_example.jsonl"
    for given, said in (
        (["params=n_bursts=-1"],
         "workload 'bursted_synthetic': params=n_bursts must be an integer >= 0, got -1 "
         "(from the command line)"),
        (["workload=conversation_like", "params=requests_per_hour=0.0001"],
         "workload conversation_like: test window 'conversation_like/conversation-0000' has "
         "no requests (seed 20260721); every window needs some: change the "
         "generator's parameters or its seed"),
        (["workload=trace", f"workload.path={trace}", "params=n_bursts=1"],
         "params= sets a generator's parameters; workload=trace takes workload.* options "
         "instead"),
    ):  # fmt: skip
        refused = tmp_path / "refused"
        args = [*argv[:-2], *given, f"out_dir={refused}"]  # (argv less its params= and out_dir=)
        assert main_guard(lambda args=args: compare.main(args)) == 2
        assert capsys.readouterr().err == f"error: experiments.compare: {said}\n"
        assert not refused.exists()


def test_a_policys_ratio_figure_is_pooled_by_its_denominator() -> None:
    """btb's shadow_hit_rate over a window of 24 shadow copies, 6 used, and one of
    none: 6 / 24 = 0.25 (the windows' mean, (0.25 + 0) / 2, said 0.125); a plain
    ``_rate`` key stays the windows' unweighted mean."""
    first, second = window([1.0], 0, 0, 0.0, 0), window([1.0], 0, 0, 0.0, 0)
    first.metrics = {"shadow_copies": 24, "shadow_used": 6, "shadow_hit_rate": 0.25,
                     "y_unreached_rate": 0.0}  # fmt: skip
    second.metrics = {"shadow_copies": 0, "shadow_used": 0, "shadow_hit_rate": 0.0,
                      "y_unreached_rate": 1.0}  # fmt: skip
    ratios = {"shadow_hit_rate": ("shadow_used", "shadow_copies")}
    row = summarize_windows([first, second], "s", "w", "btb", SimConfig(), ratios)
    assert row["shadow_hit_rate"] == pytest.approx(0.25)
    assert (row["shadow_copies"], row["shadow_used"]) == (24.0, 6.0)
    assert row["y_unreached_rate"] == pytest.approx(0.5)
    none = summarize_windows([second], "s", "w", "btb", SimConfig(), ratios)
    assert none["shadow_hit_rate"] == 0.0  # no copy: 0.0, as a window's own figure


def test_btb_in_shadow_mode_pools_its_hit_rate_by_shadow_copies() -> None:
    """Two windows: 9 shadow copies, 3 used (1/3), and 3 copies, 2 used (2/3): the
    row's rate is 5 / 12, its counts' ratio (the windows' mean gave 0.5)."""
    from dataclasses import replace

    from baselines.policy import make_policy
    from envs.workloads.bursted import BurstedSyntheticConfig, synthetic_window
    from experiments.evaluation import evaluate_policies

    small = BurstedSyntheticConfig(n_bursts=3, burst_requests=40, prefix_tokens=8192,
                                   suffix_tokens=256, first_burst_s=6.0, burst_interval_s=4.0,
                                   burst_window_s=2.0, n_decoys=12)  # fmt: skip
    windows = [synthetic_window(small, 1), synthetic_window(replace(small, n_bursts=1), 1)]
    shadow = make_policy("btb", y_tokens=8192, shadow=True)
    (run,) = evaluate_policies({"btb": shadow}, "70b_h100x4", windows, SimConfig(causal_kv=False))
    counts = [(r.metrics["shadow_copies"], r.metrics["shadow_used"]) for r in run.windows]
    assert counts == [(9, 3), (3, 2)]
    assert run.row["shadow_hit_rate"] == pytest.approx(5 / 12)


def test_table_times_keep_three_significant_digits_of_the_shortest_mean():
    """qwen3-8b's means of 0.0245 and 0.0232 s printed alike at 3 decimals (0.024
    / 0.023 and 0.022 for both oracle_warm and the floor); the table now gives
    each time 4 decimals there (3 significant digits of the shortest mean, 0.0218),
    and 3, as before, where the shortest mean is 0.1 s or more."""
    from experiments.report import comparison_table, time_decimals

    def row(policy: str, mean: float, p95: float) -> dict:
        return {"policy": policy, "requests": 10, "ttft_mean_s": mean, "ttft_p50_s": 0.0031,
                "ttft_p95_s": p95, "ttft_p99_s": 0.545, "ttft_mean_reduction_pct": 0.0,
                "ttft_p95_reduction_pct": 0.0}  # fmt: skip

    rows = [row("cache_aware", 0.02447, 0.00312), row("oracle_warm", 0.02183, 0.00309)]
    lines = comparison_table(rows, "cache_aware").splitlines()
    assert lines[2].split()[:6] == ["cache_aware", "10", "0.0245", "0.0031", "0.0031", "0.5450"]
    assert lines[3].split()[2] == "0.0218"
    slow = [row("cache_aware", 1.3281, 6.5219), row("floor", 0.339, 3.516)]
    assert comparison_table(slow, "cache_aware").splitlines()[3].split()[2:5] == [
        "0.339", "0.003", "3.516",
    ]  # fmt: skip
    assert [time_decimals([m]) for m in (12.0, 0.1, 0.0999, 0.0031, 1e-9)] == [3, 3, 4, 5, 6]
    assert time_decimals([None, float("nan"), 0.0]) == 3  # nothing to size by: 3


def test_reproduce_table_gives_each_setups_times_three_significant_digits():
    from experiments.report import reproduction_tables

    table = {"setup": "qwen3_8b_h100x4", "causal_kv": False, "workload_seeds": [1],
             "ttft_mean_s": {"cache_aware": 0.0345, "btb": 0.0199, "floor": 0.0183},
             "ttft_mean_reduction_pct": {"btb": 42.2}, "ttft_p95_reduction_pct": {"btb": 99.4},
             "ttft_mean_reduction_pct_sd": {}}  # fmt: skip
    slow = dict(table, setup="70b_h100x4", ttft_mean_s={"cache_aware": 1.373, "btb": 0.518,
                                                         "floor": 0.155})  # fmt: skip
    text = reproduction_tables([table, slow], ["cache_aware", "btb", "floor"], 3.0)
    qwen = next(line for line in text.splitlines() if line.startswith("qwen3_8b"))
    llama = next(line for line in text.splitlines() if line.startswith("70b_h100x4"))
    assert qwen.split()[1:4] == ["0.0345", "0.0199", "0.0183"]
    assert llama.split()[1:4] == ["1.373", "0.518", "0.155"]


def test_every_policy_of_a_long_cdf_is_drawn_apart(tmp_path, monkeypatch):
    """make run draws 34 policies and the floor: with ten colours and three line
    styles the 21st and 31st policies (finetune_families_kl, ppo_thresholds_eft)
    were drawn alike, and three more pairs. 45 policies: every line is its own
    colour and dash pattern; the first ten solid, the next ten dashed."""
    from experiments.report import FLOOR, plot_ttft_cdf

    figures = _spy_figures(monkeypatch)
    ttfts = {f"policy{i:02d}": np.array([0.1, 0.2 + i]) for i in range(45)}
    plot_ttft_cdf({**ttfts, FLOOR: np.array([0.05, 0.1])}, tmp_path / "cdf.png")
    lines = figures[0].axes[0].get_lines()
    drawn = [(line.get_color(), line._unscaled_dash_pattern) for line in lines]
    assert len(lines) == 46 and len(set(drawn)) == 46
    assert {line.get_linestyle() for line in lines[:10]} == {"-"}
    assert {line.get_linestyle() for line in lines[10:20]} == {"--"}
    assert lines[20].get_color() == lines[30].get_color() == lines[40].get_color()
    assert (lines[-1].get_color(), lines[-1].get_linestyle()) == ("black", ":")
