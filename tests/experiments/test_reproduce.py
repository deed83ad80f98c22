"""The published-table reproduction: tables from rows, and the CLI on one small setup."""

from __future__ import annotations

import json

import pytest

from experiments import report, reproduce


def row(setup: str, policy: str, causal: bool, mean_red: float, p95_red: float) -> dict:
    return {
        "setup": setup,
        "policy": policy,
        "causal_kv": causal,
        "ttft_mean_s": 1.0 - mean_red / 100,
        "ttft_mean_reduction_pct": mean_red,
        "ttft_p95_reduction_pct": p95_red,
        "ttft_mean_s_per_window": [1.0],
    }


def test_tables_compare_btb_with_the_published_column() -> None:
    rows = [
        row("70b_h100x4", "cache_aware", False, 0.0, 0.0),
        row("70b_h100x4", "btb", False, 60.5, 10.0),
        row("qwen3_8b_h100x4", "cache_aware", False, 0.0, 0.0),
        row("qwen3_8b_h100x4", "btb", False, 30.0, 5.0),
        row("70b_h100x4", "cache_aware", True, 0.0, 0.0),
        row("70b_h100x4", "btb", True, 20.0, 1.0),
    ]
    tables = reproduce.build_tables(rows, "bursted_synthetic", ["cache_aware", "btb"])
    by = {(t["setup"], t["causal_kv"]): t for t in tables}
    assert set(by) == {("70b_h100x4", False), ("qwen3_8b_h100x4", False), ("70b_h100x4", True)}
    assert by[("70b_h100x4", False)]["diff_mean_pp"] == pytest.approx(60.5 - 62.0)
    assert by[("70b_h100x4", False)]["within_tolerance"] is True
    assert by[("qwen3_8b_h100x4", False)]["diff_mean_pp"] == pytest.approx(30.0 - 41.9)
    assert by[("qwen3_8b_h100x4", False)]["within_tolerance"] is False
    assert "published_p95_pct" not in by[("70b_h100x4", False)]
    # the causal row shows the published figure and the gap but is not judged
    assert by[("70b_h100x4", True)]["diff_mean_pp"] == pytest.approx(20.0 - 62.0)
    assert "within_tolerance" not in by[("70b_h100x4", True)]
    mixed = reproduce.build_tables(rows, "bursted_art", ["cache_aware", "btb"])
    assert mixed[0]["published_mean_pct"] == 54.0 and mixed[0]["published_p95_pct"] == 0.0
    assert (
        "published_mean_pct" not in reproduce.build_tables(rows, "bursted_synthetic_1s", ["btb"])[0]
    )
    text = report.reproduction_tables(tables, ["cache_aware", "btb"], reproduce.TOLERANCE_PP)
    assert "causal_kv=false" in text and "causal_kv=true" in text and "+62.0" in text
    assert text.splitlines()[-1] == (
        "BTB d mean within +-3 pp of the published figure: 1 of 2 rows ok, 1 off; 1 causal KV "
        "row not judged (the published figures assume reference KV, causal_kv=false)"
    )
    causal_line = [line for line in text.splitlines() if line.startswith("70b_h100x4")][1]
    # BTB d mean, published, diff pp, verdict
    assert causal_line.split()[3:7] == ["+20.0", "+62.0", "-42.0", "-"]
    causal_only = [t for t in tables if t["causal_kv"]]
    text = report.reproduction_tables(causal_only, ["cache_aware", "btb"], 3.0, 15, 15)
    assert text.splitlines()[-1] == (
        "no row is checked against the published figure: 1 causal KV row not judged "
        "(the published figures assume reference KV, causal_kv=false)"
    )


def test_each_row_says_ok_or_off_and_the_last_line_counts_them() -> None:
    rows = [
        row("70b_h100x4", "cache_aware", False, 0.0, 0.0),
        row("70b_h100x4", "btb", False, 60.5, 10.0),  # 62.0 published: -1.5, ok
        row("qwen3_8b_h100x4", "cache_aware", False, 0.0, 0.0),
        row("qwen3_8b_h100x4", "btb", False, 30.0, 5.0),  # 41.9 published: -11.9, off
        row("glm45_h100x4", "cache_aware", False, 0.0, 0.0),
        row("glm45_h100x4", "btb", False, 73.3, 5.0),  # 70.3 published: +3.0, ok (the edge)
    ]
    tables = reproduce.build_tables(rows, "bursted_synthetic", ["cache_aware", "btb"])
    text = report.reproduction_tables(tables, ["cache_aware", "btb"], 3.0, 15, 15)
    lines = text.splitlines()
    head = next(line for line in lines if line.startswith("setup"))
    assert "diff pp   +-3" in head  # the verdict column follows diff pp
    verdicts = {line.split()[0]: line.split()[6] for line in lines if "_h100x4" in line}
    assert verdicts == {"70b_h100x4": "ok", "qwen3_8b_h100x4": "off", "glm45_h100x4": "ok"}
    # mean TTFTs with 3 decimals: 1 - 60.5 % = 0.395, cache_aware's 1.000
    assert next(line for line in lines if line.startswith("70b")).split()[1:3] == ["1.000", "0.395"]
    assert lines[-1] == "BTB d mean within +-3 pp of the published figure: 2 of 3 rows ok, 1 off"
    assert "note:" not in text  # every window ran
    fewer = report.reproduction_tables(tables, ["cache_aware", "btb"], 3.0, 1, 15)
    assert (
        "note: 1 of the 15 test windows ran; the published figures are over all 15 "
        "(windows=0 runs them all)"
    ) in fewer.splitlines()
    unpublished = reproduce.build_tables(rows, "bursted_synthetic_1s", ["cache_aware", "btb"])
    text = report.reproduction_tables(unpublished, ["cache_aware", "btb"], 3.0, 1, None)
    assert text.splitlines()[-1] == (
        "no published figure for this workload: no row is checked against one"
    )
    assert "note: 1 of" not in text


def test_a_btb_that_never_fired_gets_compare_s_note_once() -> None:
    """btb's rows of two setups and two KV models: Y unreached in every window of
    three, in none of the fourth: 3 of 4 = 75 % of the windows, said once."""
    rows = [
        {"policy": "cache_aware", "setup": "a"},
        *({"policy": "btb", "setup": s, "y_unreached_rate": 1.0} for s in "abc"),
        {"policy": "btb", "setup": "d", "y_unreached_rate": 0.0},
        *({"policy": "btb_pending", "setup": s, "y_unreached_rate": 1.0} for s in "ab"),
    ]
    pooled = reproduce.pooled_rows(rows)
    assert pooled == [
        {"policy": "cache_aware"},
        {"policy": "btb", "y_unreached_rate": 0.75},
        {"policy": "btb_pending", "y_unreached_rate": 1.0},
    ]
    notes = report.btb_lines(pooled)
    assert [note.split(":")[0] for note in notes] == ["btb", "btb_pending"]
    assert notes[1].startswith("btb_pending: in every window no prompt reached Y")
    assert notes[0].startswith("btb: in 75 % of the windows no prompt reached Y")


def test_published_figures_are_the_btb_write_up_s() -> None:
    assert list(reproduce.PUBLISHED_SYNTHETIC_MEAN.values()) == [62.0, 41.9, 70.3, 64.0, 58.5, 11.0]
    assert list(reproduce.PUBLISHED_MIXED_MEAN.values()) == [54.0, 33.3, 60.0, 53.5, 48.1, 10.3]
    assert list(reproduce.PUBLISHED_MIXED_P95.values()) == [0.0, 81.8, 59.0, 78.0, 79.9, 7.4]


def test_reproduce_end_to_end_on_one_setup(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "rep"
    reproduce.main(
        ["setups=qwen3_8b_h100x4", "policies=btb,btb_pending", "windows=1", "jobs=1",
         "progress=false",
         f"out_dir={out}"]
    )  # fmt: skip
    payload = json.loads((out / "results.json").read_text())
    assert set(payload) == {"rows", "config", "tables", "provenance"}
    got = {(r["policy"], r["causal_kv"]) for r in payload["rows"]}
    policies = ("cache_aware", "btb", "btb_pending", "floor", "floor_capacity")
    assert got == {(p, c) for p in policies for c in (False, True)}
    assert len(payload["tables"]) == 2
    for table in payload["tables"]:
        assert table["published_mean_pct"] == 41.9
        # published BTB gains under the reference model; under causal KV only
        # btb_pending, which routes to copies in flight, does on this window
        winner = "btb_pending" if table["causal_kv"] else "btb"
        assert table["ttft_mean_reduction_pct"][winner] > 0
        assert table["ttft_mean_s"]["floor"] <= table["ttft_mean_s"]["btb"]


def test_reproduce_rejects_a_bad_mode() -> None:
    with pytest.raises(ValueError, match="causal_kv must be both or a bool"):
        reproduce.main(["causal_kv=maybe", "progress=false"])


def test_several_workload_draws_average_with_their_spread() -> None:
    rows = []
    for seed, btb in ((1, 60.0), (2, 64.0)):
        for r in (row("70b_h100x4", "cache_aware", False, 0.0, 0.0),
                  row("70b_h100x4", "btb", False, btb, 0.0)):  # fmt: skip
            rows.append({**r, "workload_seed": seed})
    (table,) = reproduce.build_tables(rows, "bursted_synthetic", ["cache_aware", "btb"])
    assert table["workload_seeds"] == [1, 2]
    assert table["ttft_mean_reduction_pct"]["btb"] == pytest.approx(62.0)
    assert table["ttft_mean_reduction_pct_sd"]["btb"] == pytest.approx(2 * 2**0.5)
    assert table["ttft_mean_reduction_pct_per_draw"]["btb"] == [60.0, 64.0]
    assert table["diff_mean_pp"] == pytest.approx(0.0)
    text = report.reproduction_tables([table], ["cache_aware", "btb"], reproduce.TOLERANCE_PP)
    assert "sd" in text


def test_sim_options_reach_every_run_and_are_checked_first(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """sim.NAME=VALUE as compare takes it: half the MFU (0.25 against 0.5) doubles
    every prefill, most of the per-request floor; it is recorded; and a fault naming
    a node the setup lacks stops the command before any run folder."""
    base = ["setups=qwen3_8b_h100x4", "policies=cache_aware", "windows=1", "jobs=1",
            "causal_kv=true", "progress=false"]  # fmt: skip
    plain = reproduce.main([*base, f"out_dir={tmp_path / 'a'}"])
    slow = reproduce.main([*base, "sim.mfu=0.25", f"out_dir={tmp_path / 'b'}"])
    assert plain["config"]["sim"] == {} and slow["config"]["sim"] == {"mfu": 0.25}
    floor = {r["policy"]: r for r in plain["rows"]}["floor"]["ttft_mean_s"]
    slow_floor = {r["policy"]: r for r in slow["rows"]}["floor"]["ttft_mean_s"]
    assert slow_floor > 1.5 * floor  # prefill (most of the floor) takes twice as long
    with pytest.raises(ValueError, match=r"sim\.fault_node_loss_nodes\[0\] = 7 is not a node"):
        reproduce.main([*base, "sim.fault_node_loss_s=3", "sim.fault_node_loss_nodes=7",
                        f"out_dir={tmp_path / 'c'}"])  # fmt: skip
    assert not (tmp_path / "c").exists()


def test_policy_columns_name_each_policy_in_full_and_the_sd_says_its_ddof() -> None:
    """Columns were headed by a policy's first 11 characters: two plugin routers
    sharing them (my_router_v1_fast, my_router_v1_slow) read alike, and the shipped
    btb_speculative as btb_specula. The footnote did not say the sd's ddof."""
    names = ["cache_aware", "btb", "my_router_v1_fast", "my_router_v1_slow"]
    rows = []
    for seed, reductions in ((1, (60.0, 10.0, 20.0)), (2, (64.0, 12.0, 30.0))):
        for name, red in zip(names, (0.0, *reductions), strict=True):
            rows.append({**row("70b_h100x4", name, False, red, 0.0), "workload_seed": seed})
    tables = reproduce.build_tables(rows, "bursted_synthetic", names)
    lines = report.reproduction_tables(tables, names, 3.0).splitlines()
    head = next(line for line in lines if line.startswith("setup"))
    assert head.split()[:5] == ["setup", *names]
    # each value right-aligned under its name: 1 - 11 % = 0.890 and 1 - 25 % = 0.750
    line = next(line for line in lines if line.startswith("70b_h100x4"))
    for name, value in (("my_router_v1_fast", "0.890"), ("my_router_v1_slow", "0.750")):
        end = head.index(name) + len(name)
        assert line[end - len(value) : end] == value
    # the sd of 60 and 64 is 2.8 with ddof 1 (2.0 with ddof 0)
    assert line.split()[5:7] == ["+62.0", "2.8"]
    assert "averaged over 2 workload draws (sd: their sample standard deviation, ddof 1)" in (
        "\n".join(lines)
    )
