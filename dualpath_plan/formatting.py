"""How every report writes numbers for a reader: the one formatter of every table, line and chart.

A leaf module (it imports nothing of the package) so that every layer that writes a line of
text for a reader, the scenario's efficiency line included, uses it.

Machine-readable outputs (``--json``, ``--out`` CSV, the baseline) keep full precision and do
not come through here; only human text does. The rules:

- ``SIG`` (3) significant digits by default, by magnitude: ``0.584``, ``56.7``, ``1,540``
  (thousands grouped with commas);
- never an exponent below ``EXPONENT_FROM`` (10^6), never ``nan`` or ``inf`` (a value that is
  not finite prints as ``-``);
- a value whose magnitude is below ``ZERO_BELOW`` (10^-9 of its unit) is zero to within
  rounding (``HBM reserve 7.19e-17 GB`` from a fit's arithmetic) and prints as ``0``;
- units scaled to the value (s/ms/us/h, MB/GB/TB), one unit for a whole column;
- one precision within a column (:func:`column`): every cell with the same decimals;
- an interval whose ends print as the value prints once, as ``0.584 (no spread)``
  (:func:`with_interval`);
- a value as it was given (a flag, a profile field) keeps its digits, up to 6 or all of them,
  written out positionally: ``0.00004023``, not ``4.023e-05`` (:func:`plain`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from decimal import Decimal

from dualpath_plan.frozen import record

# Significant digits a report gives a figure unless it says otherwise: the model's inputs
# (efficiencies, bandwidths) are known to a few percent, so a fourth digit would be noise.
SIG = 3
# From here up, exponent notation ("1.23e+06"): below it, grouped digits read better.
EXPONENT_FROM = 1e6
# Below this magnitude (in the unit shown) a value is rounding noise and prints as 0.
ZERO_BELOW = 1e-9
# A column's decimals go at most this far past what its largest value needs for SIG digits,
# to give its smaller values 2 significant digits (a column of 1,540 and 0.5: "1,540.0",
# "0.5"); smaller values than that round to the column's decimals.
EXTRA_DECIMALS = 3
# What a value that is not finite prints as.
MISSING = "-"


def finite(v: float) -> float | None:
    """A number for JSON: itself, or null where it is not finite (no NaN or inf in output)."""
    return v if math.isfinite(v) else None


def _decimals(v: float, sig: int) -> int:
    """Decimals that give ``v`` (finite, not zero) ``sig`` significant digits (none for a value
    of ``sig`` or more whole digits), after rounding."""
    a = abs(v)
    e = math.floor(math.log10(a))
    # 9.996 to 3 digits is 10.0: the exponent after rounding.
    if round(a, sig - 1 - e) >= 10 ** (e + 1):
        e += 1
    return max(sig - 1 - e, 0)


def _fixed(v: float, decimals: int) -> str:
    text = f"{v:,.{decimals}f}"
    # "-0", "-0.00": a negative value that rounds to zero is zero.
    if text.startswith("-") and not text.strip("-0.,"):
        text = text[1:]
    return text


def number(v: float, sig: int = SIG) -> str:
    """One figure: ``sig`` significant digits, grouped, no exponent below 10^6, "-" where it
    is not finite, 0 where it is zero to within rounding."""
    if not math.isfinite(v):
        return MISSING
    if abs(v) < ZERO_BELOW:
        return "0"
    if abs(v) >= EXPONENT_FROM:
        return f"{v:.{sig - 1}e}"
    return _fixed(v, _decimals(v, sig))


def plain(v: float, sig: int | None = 6) -> str:
    """A value as it was given (a flag, a profile field, an SLO): its shortest form to ``sig``
    significant digits (all of them, as Python's ``repr``, for None), trailing zeros dropped,
    written out without exponent below 10^6 ("0.00004023", "400", "0.05"); "-" where it is not
    finite. Not grouped, so that it reads as the value a user would type."""
    if not math.isfinite(v):
        return MISSING
    short = repr(float(v)) if sig is None else f"{v:.{sig}g}"
    if math.isinf(float(short)):  # rounded past the largest float (1.5e308 to 1 digit: 2e308)
        short = repr(float(v))
    if abs(v) >= EXPONENT_FROM:
        return short if "e" in short else f"{float(short):.{sig or 17}g}"
    text = format(Decimal(short).normalize(), "f")
    return "0" if not text.strip("-0.") else text


def fixed(v: float, decimals: int) -> str:
    """A figure to a given number of decimals, grouped, "-" where it is not finite (a chart's
    tick labels: every tick with the decimals of the step between them)."""
    if not math.isfinite(v):
        return MISSING
    return _fixed(v, max(decimals, 0))


def column_decimals(values: Sequence[float], sig: int = SIG) -> int | None:
    """The decimals of a column of figures: its largest value's for ``sig`` significant
    digits, raised (by at most ``EXTRA_DECIMALS``) to give each smaller value 2; None where
    no value is finite, not zero, and below 10^6."""
    shown = [abs(v) for v in values if math.isfinite(v) and ZERO_BELOW <= abs(v) < EXPONENT_FROM]
    if not shown:
        return None
    top = _decimals(max(shown), sig)
    need = max(_decimals(v, min(sig, 2)) for v in shown)
    return min(max(top, need), top + EXTRA_DECIMALS)


def column(values: Sequence[float], sig: int = SIG) -> list[str]:
    """A column of figures with one precision: every cell with the same decimals
    (:func:`column_decimals`), else as :func:`number` (not finite, zero, 10^6 and up)."""
    decimals = column_decimals(values, sig)
    out = []
    for v in values:
        if decimals is None or not math.isfinite(v) or not ZERO_BELOW <= abs(v) < EXPONENT_FROM:
            out.append(number(v, sig))
        else:
            out.append(_fixed(v, decimals))
    return out


def unit_column(values: Sequence[float], units: Sequence[str], sig: int = SIG) -> list[str]:
    """A column whose rows carry their own units (a table of links: TFLOP/s beside GB/s): the
    rows of each unit formatted together as :func:`column` (one precision per unit), the unit
    after each figure."""
    out = [""] * len(values)
    for u in dict.fromkeys(units):
        rows = [i for i, w in enumerate(units) if w == u]
        for i, text in zip(rows, column([values[i] for i in rows], sig), strict=True):
            out[i] = text if text == MISSING or not u else f"{text} {u}"
    return out


def trimmed_column(values: Sequence[float], sig: int) -> list[str]:
    """:func:`column` to many digits (a recorded metric and its value now, to 8), less the
    trailing zeros every fixed-point cell shares: one precision still, but 2,048 beside 2,048
    is not "2,048.0000000"."""
    cells = column(values, sig)
    fixed_cells = [i for i, c in enumerate(cells) if "." in c and "e" not in c]
    while fixed_cells and all(cells[i].endswith("0") for i in fixed_cells):
        for i in fixed_cells:
            cells[i] = cells[i][:-1]
    for i in fixed_cells:
        cells[i] = cells[i].removesuffix(".")
    return cells


@record
class Unit:
    """A unit to show a quantity in: its name and how many base units (s, GB) one is."""

    name: str
    scale: float


# Durations, longest first: a value is shown in the first unit it reaches one of.
TIME_UNITS = (Unit("h", 3600.0), Unit("s", 1.0), Unit("ms", 1e-3), Unit("us", 1e-6))
# Sizes in GB (1e9 B), largest first.
BYTE_UNITS = (Unit("TB", 1e3), Unit("GB", 1.0), Unit("MB", 1e-3))
# Rates in GB/s, largest first.
RATE_UNITS = (Unit("TB/s", 1e3), Unit("GB/s", 1.0), Unit("MB/s", 1e-3))


def unit_for(values: Sequence[float], units: Sequence[Unit]) -> Unit:
    """The one unit of a column: the first of ``units`` (largest first) that its largest
    finite magnitude reaches one of; the smallest unit where none does."""
    top = max((abs(v) for v in values if math.isfinite(v)), default=0.0)
    if top < ZERO_BELOW:  # zero (or nothing): said in the base unit, "0 s", "0 GB"
        return next((u for u in units if u.scale == 1.0), units[-1])
    return next((u for u in units if top >= u.scale * (1 - 5e-4)), units[-1])


def scaled_column(values: Sequence[float], units: Sequence[Unit], sig: int = SIG) -> list[str]:
    """A column of one quantity in one unit (the largest value's) and one precision, the unit
    after each figure; "-" where a value is not finite."""
    u = unit_for(values, units)
    cells = column([v / u.scale for v in values], sig)
    return [c if c == MISSING else f"{c} {u.name}" for c in cells]


def duration(v: float, sig: int = SIG) -> str:
    """A duration in seconds as h, s, ms or us."""
    return scaled_column([v], TIME_UNITS, sig)[0]


def durations(values: Sequence[float], sig: int = SIG) -> list[str]:
    """A column of durations in seconds: one unit and one precision."""
    return scaled_column(values, TIME_UNITS, sig)


def gbyte(g: float, sig: int = SIG) -> str:
    """A size in GB as MB, GB or TB."""
    return scaled_column([g], BYTE_UNITS, sig)[0]


def rate(v: float, unit: str, sig: int = SIG) -> str:
    """A rate with its unit: ``1,540 turns/s``."""
    return f"{number(v, sig)} {unit}"


def percent(v: float, decimals: int = 0, sign: bool = False) -> str:
    """A share as a percentage, "-" where it is not finite."""
    if not math.isfinite(v):
        return MISSING
    if abs(v) >= EXPONENT_FROM / 100:
        # 10^6 % and up, with an exponent; in decimal, as v x 100 overflows near 1.8e306.
        return f"{Decimal(v) * 100:{'+' if sign else ''}.{SIG - 1}e}%"
    text = f"{v:{'+' if sign else ''}.{decimals}%}"
    # "-0%": a negative share that rounds to zero is zero.
    return text[1:] if text[0] in "+-" and not text.strip("+-0.%") else text


def with_interval(value: str, low: str | None, high: str | None) -> str:
    """``value (low to high)``; where both ends print as the value, ``value (no spread)``:
    the interval was computed and has no width at this precision."""
    if low is None or high is None:
        return value
    if low == value and high == value:
        return f"{value} (no spread)"
    return f"{value} ({low} to {high})"


def interval_text(
    v: float, low: float | None, high: float | None, fmt: Callable[[Sequence[float]], list[str]]
) -> str:
    """A value and its interval, the three formatted together by ``fmt`` (a column formatter:
    one unit and one precision for all three)."""
    if low is None or high is None:
        return fmt([v])[0]
    a, b, c = fmt([v, low, high])
    return with_interval(a, b, c)


def interval_column(
    values: Sequence[float],
    intervals: Sequence[tuple[float, float] | None],
    fmt: Callable[[Sequence[float]], list[str]] = column,
) -> list[str]:
    """A table column of values, each with its interval (low, high) or None: the values and
    every interval's ends formatted as one column by ``fmt`` (one unit, one precision), then
    each cell as :func:`with_interval` writes it."""
    ends = [e for i in intervals if i is not None for e in i]
    texts = fmt([*values, *ends])
    cells, k = [], len(values)
    for text, i in zip(texts[: len(values)], intervals, strict=True):
        if i is None:
            cells.append(text)
        else:
            cells.append(with_interval(text, texts[k], texts[k + 1]))
            k += 2
    return cells


def count(n: float, noun: str, sig: int | None = None) -> str:
    """A count and its noun, singular for exactly one: "1 agent", "2,048 agents"; a mean
    count to ``sig`` significant digits (:func:`number`), less trailing zeros: "7.6 turns",
    "20 turns" (a count's zeros are not digits it was measured to)."""
    text = f"{n:,}" if sig is None else number(n, sig)
    if sig is not None and "." in text and "e" not in text:
        text = text.rstrip("0").removesuffix(".")
    return f"{text} {noun}{'' if n == 1 else 's'}"
