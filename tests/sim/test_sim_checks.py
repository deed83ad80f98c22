"""The shared number checks: what they accept, and the message naming field and value."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from envs.sim.checks import (
    check_fields_non_negative,
    check_int,
    check_number,
    check_whole_number,
    checked_number,
    is_number,
)
from envs.sim.errors import ConfigError


def test_is_number_takes_python_and_numpy_numbers_but_not_bools() -> None:
    assert is_number(3) and is_number(0.5) and is_number(math.inf)
    assert is_number(np.float64(0.5)) and is_number(np.float32(0.5)) and is_number(np.int8(3))
    assert not is_number(True) and not is_number(np.bool_(True))
    assert not is_number("3") and not is_number(None)


def test_an_integer_is_an_int_or_numpy_integer_but_not_a_bool_or_float() -> None:
    assert is_number(2, integer=True) and is_number(np.int32(2), integer=True)
    assert not is_number(True, integer=True)
    assert not is_number(np.bool_(True), integer=True)
    assert not is_number(2.0, integer=True)


def test_one_checker_says_the_rule_and_returns_python_numbers() -> None:
    assert checked_number("a", np.int64(3), 1, integer=True) == 3
    assert type(checked_number("a", np.int64(3), 1, integer=True)) is int
    assert type(checked_number("a", np.float32(0.5), 0, 1)) is float
    with pytest.raises(ValueError, match=r"^a must be a number in \(0, 1\], got 0$"):
        checked_number("a", 0, 0, 1, above=True)
    with pytest.raises(ValueError, match=r"^a must be a finite number > 0, got inf$"):
        checked_number("a", math.inf, 0, above=True, finite=True)
    with pytest.raises(ValueError, match=r"^a must be an integer >= 1, got 2\.5$"):
        checked_number("a", 2.5, 1, integer=True)
    with pytest.raises(ConfigError, match=r"^a must be a number >= 0, got nan$"):
        checked_number("a", math.nan, error=ConfigError)


def test_check_int_accepts_the_minimum_and_names_field_and_value() -> None:
    check_int("btb.x", 1, 1)
    check_int("sim.chunked_prefill_tokens", 0, 0)
    with pytest.raises(ValueError, match=r"^btb\.x must be an integer >= 1, got 0$"):
        check_int("btb.x", 0, 1)
    with pytest.raises(ValueError, match=r"^btb\.x must be an integer >= 1, got True$"):
        check_int("btb.x", True, 1)
    with pytest.raises(ValueError, match=r"^btb\.x must be an integer >= 1, got 2\.0$"):
        check_int("btb.x", 2.0, 1)


def test_check_int_raises_the_error_class_it_is_given() -> None:
    with pytest.raises(ConfigError, match=r"^sim\.max_batch must be an integer >= 1, got -1$"):
        check_int("sim.max_batch", -1, 1, ConfigError)


def test_an_int_beyond_every_float_is_refused_naming_its_size_not_raising_overflow() -> None:
    """An int a float cannot hold (10**400 from a command line) is refused in one line;
    ``math.isfinite`` raised OverflowError on it, a traceback on every command."""
    big = 10**400
    said = (
        r"^sim\.speculative_chunk_tokens must be a number a float can hold \(at most "
        r"1\.798e\+308: the simulator computes in floats\), got an integer of 401 digits$"
    )
    for check in (
        lambda: check_int("sim.speculative_chunk_tokens", big, 1, ConfigError),
        lambda: checked_number("sim.speculative_chunk_tokens", -big, -math.inf),
        lambda: checked_number("sim.speculative_chunk_tokens", big, 0, math.inf, type_apart=True),
    ):
        with pytest.raises(ConfigError, match=said):
            check()
    with pytest.raises(ValueError, match=r"^_Config\.rate_per_s must be finite numbers, got 1"):
        check_fields_non_negative("_Config", _Config(rate_per_s=big))
    # the largest int a float holds is a number still
    assert checked_number("a", int(1.7e308), 1, integer=True) == int(1.7e308)


def test_check_number_bounds_and_numpy_scalars() -> None:
    check_number("tail_penalty", 0)
    check_number("reward_scale", np.float32(0.5), positive=True)
    with pytest.raises(ValueError, match=r"^reward_scale must be a finite number > 0, got 0$"):
        check_number("reward_scale", 0, positive=True)
    with pytest.raises(ValueError, match=r"^tail_penalty must be a finite number >= 0, got -1$"):
        check_number("tail_penalty", -1)
    with pytest.raises(ValueError, match=r"must be a finite number >= 0, got inf$"):
        check_number("tail_penalty", math.inf)
    with pytest.raises(ValueError, match=r"got False$"):
        check_number("tail_penalty", False)


def test_check_whole_number_says_the_rule() -> None:
    check_whole_number("seed", np.int64(0), minimum=0)
    with pytest.raises(ValueError, match=r"^seed must be an integer >= 0, got 1\.5$"):
        check_whole_number("seed", 1.5, minimum=0)
    with pytest.raises(ValueError, match=r"^n_windows must be an integer >= 1, got 0$"):
        check_whole_number("n_windows", 0, minimum=1)


@dataclass(frozen=True)
class _Config:
    rate_per_s: float = 1.0
    span_s: tuple[float, float] = (0.5, 2.0)


def test_check_fields_non_negative_reads_every_field_and_pair() -> None:
    check_fields_non_negative("_Config", _Config())
    check_fields_non_negative("_Config", _Config(rate_per_s=0, span_s=(1.0, 1.0)))
    with pytest.raises(ValueError, match=r"^_Config\.rate_per_s must be >= 0, got -0\.5$"):
        check_fields_non_negative("_Config", _Config(rate_per_s=-0.5))
    with pytest.raises(ValueError, match=r"^_Config\.rate_per_s must be finite numbers, got nan$"):
        check_fields_non_negative("_Config", _Config(rate_per_s=math.nan))
    with pytest.raises(
        ValueError, match=r"^_Config\.span_s must be a \(low, high\) pair, got \(2\.0, 1\.0\)$"
    ):
        check_fields_non_negative("_Config", _Config(span_s=(2.0, 1.0)))


def test_check_range_bounds_and_finiteness() -> None:
    from envs.sim.checks import check_range

    assert check_range("p.w", 3, 0) == 3.0 and isinstance(check_range("p.w", 3, 0), float)
    assert check_range("p.w", math.inf, 0) == math.inf  # unbounded and not asked finite
    assert check_range("p.t", 1, 0, 1) == 1.0
    with pytest.raises(ValueError, match=r"^p\.t must be a number in \[0, 1\], got 1\.5$"):
        check_range("p.t", 1.5, 0, 1)
    with pytest.raises(ValueError, match=r"^p\.w must be a number >= 0, got -1$"):
        check_range("p.w", -1, 0)
    with pytest.raises(ValueError, match=r"^p\.w must be a finite number >= 1, got inf$"):
        check_range("p.w", math.inf, 1, finite=True)
    for bad in (True, "2", float("nan"), None):
        with pytest.raises(ValueError, match=r"^p\.w must be a number >= 0"):
            check_range("p.w", bad, 0)


def test_open_high_bounds_type_apart_wording_and_no_bounds() -> None:
    assert checked_number("f", 0.0, 0, 1, below=True) == 0.0
    with pytest.raises(ConfigError, match=r"^f must be a number in \[0, 1\), got 1$"):
        checked_number("f", 1, 0, 1, below=True)
    # type_apart: a non-number says so alone, a number out of range names its bounds alone
    with pytest.raises(ConfigError, match=r"^sim\.mfu must be a number, got '0\.5'$"):
        checked_number("sim.mfu", "0.5", 0, 1, above=True, type_apart=True)
    with pytest.raises(ConfigError, match=r"^sim\.mfu must be in \(0, 1\], got 1\.5$"):
        checked_number("sim.mfu", 1.5, 0, 1, above=True, type_apart=True)
    with pytest.raises(ConfigError, match=r"^t must be finite and >= 0, got inf$"):
        checked_number("t", math.inf, finite=True, type_apart=True)
    # unbounded both ways: only the kind is checked
    assert checked_number("lr", -3.0, -math.inf, math.inf, finite=True) == -3.0
    with pytest.raises(ConfigError, match=r"^lr must be a finite number, got inf$"):
        checked_number("lr", math.inf, -math.inf, math.inf, finite=True)


def test_a_sim_config_error_says_a_long_value_back_cut() -> None:
    """SimConfig's and ClusterSpec's own checks say back the first 60 characters of
    a value they refuse, then ``...``, as ``echoed`` does (they said 200 whole)."""
    from envs.sim import ClusterSpec, SimConfig

    long = "a" * 200
    cut = "'" + "a" * 59 + "..."
    with pytest.raises(ConfigError) as caught:
        SimConfig(copy_model=long)
    assert str(caught.value) == f"sim.copy_model must be one of reference, contention, got {cut}"
    with pytest.raises(ConfigError) as caught:
        SimConfig(reclaim_order=long)
    assert str(caught.value).startswith("sim.reclaim_order must be one of ")
    assert str(caught.value).endswith(f", got {cut}")
    with pytest.raises(ConfigError) as caught:
        ClusterSpec.from_figures({"model": long, "nodes": []})
    assert str(caught.value).endswith(f", got {cut}")
