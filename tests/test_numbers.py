"""The one number formatter of the human reports (dualpath_plan/formatting.py)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from dualpath_plan.formatting import (
    BYTE_UNITS,
    EXPONENT_FROM,
    MISSING,
    TIME_UNITS,
    ZERO_BELOW,
    column,
    column_decimals,
    count,
    duration,
    durations,
    finite,
    fixed,
    gbyte,
    interval_column,
    interval_text,
    number,
    percent,
    plain,
    rate,
    scaled_column,
    trimmed_column,
    unit_column,
    unit_for,
    with_interval,
)
from dualpath_plan.reports.recommend import nice_ticks, tick_label

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


# --- every public function of the formatter (issue 34): no exponent below 10^6, never "nan" or
# "inf", one precision within a column, and the figure reads back within its digits ---------

ANY = st.floats(allow_nan=True, allow_infinity=True)
BELOW = st.floats(min_value=-EXPONENT_FROM, max_value=EXPONENT_FROM, allow_nan=False).filter(
    lambda v: abs(v) < EXPONENT_FROM
)
SIGS = st.integers(min_value=1, max_value=8)


def _clean(text: str, v: float) -> None:
    """No "nan"/"inf" anywhere; no exponent where the value is finite and below 10^6."""
    low = text.lower()
    assert "nan" not in low and "inf" not in low, text
    if math.isfinite(v) and abs(v) < EXPONENT_FROM:
        assert "e+" not in low and "e-" not in low, (v, text)


def _within_sig(back: float, v: float, sig: int) -> bool:
    if v == 0:
        return back == 0
    return abs(back - v) <= 0.5 * 10 ** (math.floor(math.log10(abs(v))) - sig + 1) * (1 + 1e-9)


@given(ANY)
def test_finite_passes_numbers_and_nulls_the_rest(v: float) -> None:
    assert finite(v) == (v if math.isfinite(v) else None)


@given(ANY, st.one_of(st.none(), SIGS))
def test_plain_is_a_value_as_typed(v: float, sig: int | None) -> None:
    text = plain(v, sig)
    _clean(text, v)
    if not math.isfinite(v):
        assert text == MISSING
        return
    assert "," not in text  # not grouped: it reads as the value a user would type
    back = float(text)
    if sig is None:
        assert back == v  # every digit kept
    else:
        assert _within_sig(back, v, sig), (v, sig, text)


@given(ANY, st.integers(min_value=0, max_value=8))
def test_fixed_has_the_decimals_asked(v: float, decimals: int) -> None:
    text = fixed(v, decimals)
    _clean(text, v)
    if not math.isfinite(v):
        assert text == MISSING
        return
    assert _decimals(text) == decimals
    if abs(v) < 1e15:  # beyond, a float's own digits run out before the decimals asked
        assert abs(_value(text) - v) <= 0.5 * 10**-decimals * (1 + 1e-9) + 1e-15 * abs(v)


@given(st.floats(min_value=1e-6, max_value=1e9), st.floats(min_value=1e-4, max_value=1e5))
def test_tick_labels_share_the_steps_decimals(vmax: float, scale: float) -> None:
    ticks = nice_ticks(vmax * scale)
    step = ticks[1] - ticks[0]
    labels = [tick_label(v, step) for v in ticks]
    for v, text in zip(ticks, labels, strict=True):
        _clean(text, v)
    assert len({_decimals(t) for t in labels}) == 1
    assert len(set(labels)) == len(labels)  # every tick its own label
    for v, text in zip(ticks, labels, strict=True):
        assert math.isclose(_value(text), v, rel_tol=1e-9, abs_tol=step * 1e-6)


@given(st.lists(st.one_of(SHOWN, st.just(0.0), st.just(math.nan)), max_size=12), SIGS)
def test_column_decimals_give_the_largest_value_its_digits(values: list[float], sig: int) -> None:
    decimals = column_decimals(values, sig)
    shown = [abs(v) for v in values if math.isfinite(v) and abs(v) >= ZERO_BELOW]
    if not shown:
        assert decimals is None
        return
    assert decimals is not None and decimals >= 0
    top = max(shown)
    assert abs(round(top, decimals) - top) <= 0.5 * 10 ** (
        math.floor(math.log10(top)) - sig + 1
    ) * (1 + 1e-9)


UNITS = st.sampled_from(["TFLOP/s", "GB/s", "", "turns/s"])


@given(st.lists(st.tuples(st.one_of(SHOWN, st.just(math.nan)), UNITS), min_size=1, max_size=10))
def test_a_unit_column_has_one_precision_per_unit(rows: list[tuple[float, str]]) -> None:
    values = [v for v, _ in rows]
    units = [u for _, u in rows]
    cells = unit_column(values, units)
    for (v, u), c in zip(rows, cells, strict=True):
        _clean(c, v)
        if c != MISSING and u:
            assert c.endswith(f" {u}")
        if not math.isfinite(v):
            assert c == MISSING
    for u in set(units):
        got = {_decimals(c) for c, w in zip(cells, units, strict=True) if w == u and c != MISSING}
        assert len(got) <= 1, (u, cells)


@given(st.lists(st.one_of(SHOWN, st.just(0.0), st.integers(-5000, 5000).map(float)), max_size=10))
def test_a_trimmed_column_keeps_one_precision_and_its_values(values: list[float]) -> None:
    cells = trimmed_column(values, 8)
    fixed_cells = [c for c in cells if c not in ("0", MISSING)]
    assert len({_decimals(c) for c in fixed_cells if "." in c}) <= 1
    for v, c in zip(values, cells, strict=True):
        _clean(c, v)
        decimals = column_decimals(values, 8)
        if decimals is not None and abs(v) >= ZERO_BELOW:
            # Trimming drops only zeros: the figure is the column's, to its decimals.
            assert abs(_value(c) - v) <= 0.5 * 10**-decimals * (1 + 1e-9) + 1e-12 * abs(v)


SIZES = st.floats(min_value=0.0, max_value=5e5)


@given(st.lists(st.one_of(SIZES, st.just(math.nan)), min_size=1, max_size=8), SIGS)
def test_a_scaled_column_is_one_unit_and_reads_back(values: list[float], sig: int) -> None:
    for units, one in ((TIME_UNITS, duration), (BYTE_UNITS, gbyte)):
        cells = scaled_column(values, units, sig)
        u = unit_for(values, units)
        assert u in units
        for v, c in zip(values, cells, strict=True):
            _clean(c, v)
            if not math.isfinite(v):
                assert c == MISSING
                continue
            assert c.split(" ")[1] == u.name
        finite_values = [v for v in values if math.isfinite(v)]
        if finite_values:
            top = max(finite_values, key=abs)
            # The largest value reads back within its significant digits, in the column's unit.
            text = one(top, sig)
            scale = next(x.scale for x in units if x.name == text.split(" ")[1])
            shown = top / scale
            assert _within_sig(_value(text), shown, sig) or abs(shown) < ZERO_BELOW


@given(ANY, SIGS)
def test_a_rate_keeps_its_unit(v: float, sig: int) -> None:
    text = rate(v, "turns/s", sig)
    _clean(text, v)
    assert text.endswith(" turns/s")


@given(ANY, st.integers(min_value=0, max_value=3), st.booleans())
def test_a_percent_reads_back(v: float, decimals: int, sign: bool) -> None:
    text = percent(v, decimals, sign)
    if not math.isfinite(v):
        assert text == MISSING
        return
    _clean(text, v * 100 if abs(v) < 1e300 else v)
    assert text.endswith("%")
    if abs(v) < 1e4:
        back = float(text.rstrip("%")) / 100
        assert abs(back - v) <= 0.5 * 10 ** -(decimals + 2) * (1 + 1e-9) + 1e-15


@given(
    st.lists(
        st.tuples(SHOWN, st.one_of(st.none(), st.tuples(SHOWN, SHOWN))), min_size=1, max_size=6
    )
)
def test_an_interval_column_is_one_precision(rows: list) -> None:
    values = [v for v, _ in rows]
    intervals = [i for _, i in rows]
    cells = interval_column(values, intervals)
    figures = []
    for (v, i), c in zip(rows, cells, strict=True):
        _clean(c, v)
        head, _, rest = c.partition(" (")
        figures.append(head)
        if i is not None:
            assert rest.endswith(")")
            if rest != "no spread)":
                figures += rest[:-1].split(" to ")
            else:
                # No spread: both ends print as the value.
                assert interval_text(v, *i, column) is not None
    assert len({_decimals(f) for f in figures if _value(f) != 0}) <= 1


@given(st.integers(min_value=0, max_value=10**9), st.sampled_from(["agent", "turn"]))
def test_a_count_is_grouped_and_agrees_in_number(n: int, noun: str) -> None:
    text = count(n, noun)
    figure, word = text.split(" ")
    assert int(figure.replace(",", "")) == n
    assert word == (noun if n == 1 else noun + "s")


@given(st.floats(min_value=0, max_value=EXPONENT_FROM, exclude_max=True), SIGS)
def test_a_mean_count_has_its_digits(n: float, sig: int) -> None:
    text = count(n, "turn", sig)
    _clean(text, n)
    if n >= ZERO_BELOW:
        assert _within_sig(_value(text), n, sig)
