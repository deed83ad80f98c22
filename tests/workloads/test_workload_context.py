"""Requests longer than the served model's context: every model preset has a
context length, and a trace row longer than it is refused naming the file, line
and field, or skipped with skip_bad_rows."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from envs.sim import MODELS, ConfigError, ModelSpec, model_preset
from envs.workloads.readers import ReadOptions, ReadReport, TraceFormatError, read_trace


def test_every_preset_has_a_context_length_the_published_prompts_fit() -> None:
    for model in MODELS.values():
        # at least 128k: every published Bursted-ART request (65,793 tokens) fits
        assert model.max_context_tokens is not None and model.max_context_tokens >= 131_072
    assert model_preset("llama-3.3-70b").max_context_tokens == 131_072
    assert model_preset("glm-4.6").max_context_tokens == 202_752


def test_a_context_length_must_be_a_positive_integer() -> None:
    with pytest.raises(ConfigError, match=r"max_context_tokens must be an integer >= 1, got 0"):
        ModelSpec("m", 1e9, 1e9, 2, 1, 1, 64, max_context_tokens=0)


def _mooncake(path: Path, inputs: list[int]) -> Path:
    rows = [
        {"timestamp": 100 * i, "input_length": n, "output_length": 8, "hash_ids": [i]}
        for i, n in enumerate(inputs)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_row_longer_than_the_context_is_refused_naming_it(tmp_path: Path) -> None:
    path = _mooncake(tmp_path / "mc.jsonl", [400, 131_065, 500])  # line 2: 131,073 tokens
    limit = model_preset("llama-3.3-70b").max_context_tokens
    options = ReadOptions(strict_block_count=False, max_context_tokens=limit)
    with pytest.raises(TraceFormatError) as error:
        read_trace(path, options=options)
    assert str(error.value) == (
        f"{path}, line 2, field 'input_length': 131065 + output_length 8 = 131073 tokens "
        "exceed the model's context of 131072 tokens (max_context_tokens=131072); skip such "
        "rows with skip_bad_rows=true"
    )
    # one token shorter fits; without a limit nothing is checked
    fits = _mooncake(tmp_path / "fits.jsonl", [400, 131_064, 500])
    assert len(read_trace(fits, options=options).requests) == 3
    assert len(read_trace(path, options=ReadOptions(strict_block_count=False)).requests) == 3


def test_skip_bad_rows_skips_and_counts_it(tmp_path: Path) -> None:
    path = _mooncake(tmp_path / "mc.jsonl", [400, 131_065, 500])
    options = ReadOptions(
        strict_block_count=False,
        max_context_tokens=131_072,
        skip_bad_rows=True,
        max_bad_fraction=0.5,  # one row of three
    )
    report = ReadReport(source=str(path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        workload = read_trace(path, options=options, report=report)
    assert [r.input_tokens for r in workload.requests] == [400, 500]
    assert (report.rows_read, report.rows_skipped) == (2, 1)
    assert "line 2, field 'input_length'" in report.errors[0]
    # the warning quotes the row without telling to set the option that skipped it
    assert [str(w.message) for w in caught] == [
        f"{path}: skipped 1 malformed row (first: {path}, line 2, field 'input_length': "
        "131065 + output_length 8 = 131073 tokens exceed the model's context of 131072 "
        "tokens (max_context_tokens=131072))"
    ]
