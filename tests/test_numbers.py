"""The one number formatter of the human reports (dualpath_plan/formatting.py)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from dualpath_plan.formatting import (
    EXPONENT_FROM,
    ZERO_BELOW,
    column,
    durations,
    gbyte,
    interval_text,
    number,
    percent,
    with_interval,
)

FLOATS = st.floats(allow_nan=True, allow_infinity=True)
SHOWN = st.floats(min_value=-EXPONENT_FROM, max_value=EXPONENT_FROM, allow_nan=False).filter(
    lambda v: ZERO_BELOW <= abs(v) < EXPONENT_FROM
)


def _value(text: str) -> float:
    return float(text.split(" ")[0].replace(",", ""))


def _decimals(text: str) -> int:
    figure = text.split(" ")[0]
    return len(figure.partition(".")[2])


@given(FLOATS, st.integers(min_value=1, max_value=8))
def test_no_exponent_below_a_million_and_never_nan_or_inf(v: float, sig: int) -> None:
    text = number(v, sig)
    assert "nan" not in text.lower() and "inf" not in text.lower()
    if math.isfinite(v) and abs(v) < EXPONENT_FROM:
        assert "e" not in text.lower()
    if not math.isfinite(v):
        assert text == "-"


@given(SHOWN, st.integers(min_value=1, max_value=8))
def test_round_trips_within_its_significant_digits(v: float, sig: int) -> None:
    back = _value(number(v, sig))
    # Within half a unit of the last significant digit (rounding may carry into a new digit).
    assert abs(back - v) <= 0.5 * 10 ** (math.floor(math.log10(abs(v))) - sig + 1) * (1 + 1e-9)


@given(st.floats(min_value=-ZERO_BELOW, max_value=ZERO_BELOW).filter(lambda v: abs(v) < ZERO_BELOW))
def test_zero_to_within_rounding_prints_as_zero(v: float) -> None:
    assert number(v) == "0"


@given(st.lists(st.one_of(SHOWN, st.just(0.0), st.just(math.nan)), min_size=1, max_size=12))
def test_a_column_gets_one_precision(values: list[float]) -> None:
    cells = column(values)
    shown = [c for c, v in zip(cells, values, strict=True) if math.isfinite(v) and v != 0]
    assert len({_decimals(c) for c in shown}) <= 1
    for c in cells:
        assert "e" not in c and "nan" not in c and "inf" not in c
    for c, v in zip(cells, values, strict=True):
        if shown and math.isfinite(v) and v != 0:
            # Each cell within half a unit of the column's last decimal of its value.
            assert abs(_value(c) - v) <= 0.5 * 10 ** -_decimals(c) * (1 + 1e-9) + 1e-12 * abs(v)


@given(st.lists(st.floats(min_value=1e-7, max_value=1e5), min_size=1, max_size=8))
def test_durations_share_one_unit_and_precision(values: list[float]) -> None:
    cells = durations(values)
    assert len({c.split(" ")[1] for c in cells}) == 1
    assert len({_decimals(c) for c in cells if _value(c) != 0}) <= 1


def test_the_issues_examples() -> None:
    assert number(1540.0) == "1,540"
    assert gbyte(7.19e-17) == "0 GB"
    assert durations([0.0, math.nan]) == ["0 s", "-"]
    assert column([81.0, 56.71]) == ["81.0", "56.7"]
    assert durations([81.0, 56.71]) == ["81.0 s", "56.7 s"]
    assert durations([0.0123]) == ["12.3 ms"]
    assert durations([5400.0]) == ["1.50 h"]
    assert interval_text(0.584, 0.5841, 0.5839, column) == "0.584 (no spread)"
    assert interval_text(0.584, 0.5, 0.7, column) == "0.584 (0.500 to 0.700)"
    assert with_interval("1", None, None) == "1"
    assert number(2.5e6) == "2.50e+06"
    assert number(-0.0004, 1) == "-0.0004"
    assert percent(-0.001) == "0%"
    assert percent(0.123, 1, sign=True) == "+12.3%"
