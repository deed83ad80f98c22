"""costs: the check table's options, on figures worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments import costs
from experiments._cli import UsageError


def test_mfu_sets_the_prefill_row_and_is_recorded_and_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # llama-3.3-70b on 4xH100: 2 x 70.6e9 FLOPs a token / (4 x 989e12 FLOP/s x 0.5) is
    # 71.4 us a token (docs/physics.md), so 1,000 tokens take 71.4 ms; at MFU 0.25, twice
    default = costs.main(["tokens=1000"])
    assert default["mfu"] == 0.5 and default["ms"]["prefill"][0] == pytest.approx(71.4, abs=0.05)
    assert "prefill at MFU 0.5)" in capsys.readouterr().out
    half = costs.main(["tokens=1000", "mfu=0.25", f"out_dir={tmp_path}"])
    assert half["ms"]["prefill"][0] == pytest.approx(2 * default["ms"]["prefill"][0])
    assert half["ms"]["rdma"] == default["ms"]["rdma"]  # a copy does no FLOPs
    assert "prefill at MFU 0.25)" in capsys.readouterr().out
    assert json.loads((tmp_path / "costs.json").read_text())["mfu"] == 0.25


@pytest.mark.parametrize("tokens", ["1,,2", "1,2,", ",,", "[1,,2]"])
def test_an_empty_entry_in_tokens_is_refused(tokens: str) -> None:
    with pytest.raises(
        UsageError,
        match=r"^experiments.costs: tokens='.*' has an empty entry \(from the command line\)$",
    ):
        costs.main([f"tokens={tokens}"])


def test_node_takes_the_x_in_either_case() -> None:
    for node in ("4XH100", "4xh100", "4xH100"):
        table = costs.main(["tokens=500", f"node={node}"])
        assert table["node"] == "4xH100"


def test_a_node_of_400_digits_of_gpus_is_refused_by_its_size(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The "at most 72" bound ran first and wrote out all 400 digits of the count; the
    value said back is its first 60 characters (``echoed``)."""
    from experiments._cli import main_guard

    node = "1" + "0" * 400 + "xH100"
    assert main_guard(lambda: costs.main([f"node={node}"])) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: experiments.costs: node='{node[:59]}... (from the command line): n_gpus must be a "
        "number a float can hold (at most 1.798e+308: the simulator computes in floats), "
        "got an integer of 401 digits\n"
    )


def test_a_count_over_the_node_s_kv_budget_is_refused_and_the_budget_itself_is_not(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """llama-3.3-70b on 4xH100: (4 x 80e9 B of HBM - 2 x 70.6e9 B of weights) / 327,680
    B a token is 545,654.3, so 545,654 tokens of KV fit and one more does not (the
    table printed times for 100 million). A count of that many digits gets a column wide
    enough to keep two spaces before it (it ran into the column before)."""
    table = costs.main(["tokens=500,545654"])
    assert table["budget_tokens"] == 545_654
    header = capsys.readouterr().out.splitlines()[1]
    assert header == "source         500   545,654"
    with pytest.raises(
        UsageError,
        match=r"^experiments.costs: tokens=545655 is more KV than llama-3.3-70b has room for "
        r"on one 4xH100 node \(545,654 tokens, its KV budget\) \(from the command line\)$",
    ):
        costs.main(["tokens=500,545655"])
    # a node of 8 H100s holds 8 x 80e9 - 141.2e9 = 498.8e9 B: 1,522,216 tokens
    wide = costs.main(["tokens=1522216", "node=8xH100"])
    lines = capsys.readouterr().out.splitlines()
    assert wide["budget_tokens"] == 1_522_216
    assert lines[1] == "source    1,522,216"
    prefill = lines[2].split()
    assert prefill[0] == "prefill" and len(lines[2]) == len(lines[1])
