"""Columns of numbers as text, a block of rows at a time, without a Python call per value.

``sweep --out`` writes millions of rows; formatting each float with ``repr`` or ``%`` costs
more than computing it. Here the cells of a column are a matrix of bytes with a column per
cell, byte by byte down its rows (0 marks an unused byte: cells differ in length); the
columns of a block are stacked, turned into rows, and the 0 bytes dropped in one pass: the
rows' text.

Floats are written with ``FLOAT_DIGITS`` significant digits, as Python's ``'%.9g' % value``
writes them (the shorter of fixed and exponent notation, trailing zeros dropped), with ``.0``
appended where that leaves neither a point nor an exponent, so that a float reads back as a
float (``128.0``, not ``128``). Values within rounding of a tie at the last digit, and values
beyond 1e-13..1e15, are formatted by Python itself; the result is that text for every value
(``tests/test_recommend_sweep.py::test_float_columns_are_percent_g``).
"""

from __future__ import annotations

import numpy as np

# Significant digits of every float written by ``sweep --out`` (a relative rounding error of
# at most 5e-9: far below what the model knows, and plenty for a spreadsheet).
FLOAT_DIGITS = 9

# The digits of 0..999, one table per place (hundreds, tens, units), as ASCII.
_PLACES = [
    np.frombuffer("".join(f"{i:03d}"[k] for i in range(1000)).encode(), dtype=np.uint8)
    for k in range(3)
]
_POW10 = 10.0 ** np.arange(23)  # exact
_INT_POW10 = np.asarray([10**k for k in range(1, 19)], dtype=np.int64)  # 10 .. 10^18
_ZERO, _DOT, _MINUS, _PLUS, _E = (ord(c) for c in "0.-+e")


def text_matrix(texts: list[bytes]) -> np.ndarray:
    """Byte strings as the columns of a matrix (b'': an empty cell)."""
    width = max((len(t) for t in texts), default=0)
    out = np.zeros((max(width, 1), len(texts)), dtype=np.uint8)
    for i, t in enumerate(texts):
        if t:
            out[: len(t), i] = np.frombuffer(t, dtype=np.uint8)
    return out


def _digits(out: np.ndarray, rows: range | slice, values: np.ndarray, count: int) -> None:
    """The ``count`` decimal digits of non-negative whole ``values`` (leading zeros
    included), most significant first, into ``out``'s rows ``rows``."""
    slots = list(range(rows.start, rows.stop, rows.step or 1))
    assert len(slots) == count
    rest = values
    for g in range((count + 2) // 3 - 1, -1, -1):
        scale = 10 ** (3 * g)
        top = rest // scale if g else rest
        if g:
            rest = rest - top * scale
        for k in range(3):
            place = count - 3 * g - 3 + k  # this digit's place among the count
            if place >= 0:
                np.take(_PLACES[k], top, out=out[slots[place]], mode="clip")


def int_cells(values: np.ndarray) -> np.ndarray:
    """Whole numbers (an integer array) as their decimal text, a column per value."""
    v = np.asarray(values, dtype=np.int64).ravel()
    neg = v < 0
    a = np.abs(v)
    top = int(a.max()) if a.size else 0
    width = len(str(top))
    out = np.zeros((width + 1, v.size), dtype=np.uint8)
    _digits(out, range(1, width + 1), a, width)
    # Leading zeros are not written (the last digit always is).
    length = np.searchsorted(_INT_POW10, a, side="right") + 1
    for k in range(width - 1):  # the digit at row 1 + k is a leading zero where length is short
        out[1 + k, length < width - k] = 0
    if neg.any():
        out[0, neg] = _MINUS
        return out
    return out[1:]


def float_cells(values: np.ndarray, empty: bytes = b"", digits: int = FLOAT_DIGITS) -> np.ndarray:
    """Floats as ``'%.{digits}g'`` text (``.0`` appended where it has neither a point nor an
    exponent), a column per value; NaN and infinities as ``empty``."""
    x = np.asarray(values, dtype=np.float64).ravel()
    n = x.size
    finite = np.isfinite(x)
    a = np.where(finite, np.abs(x), 1.0)
    zero = a == 0
    a = np.where(zero, 1.0, a)
    # Python formats what the fast path cannot decide: outside the exact powers of ten,
    # and within rounding of a tie at the last digit.
    slow = (a < 1e-13) | (a >= 1e15)
    a = np.where(slow, 1.0, a)
    e = np.floor(np.log10(a)).astype(np.int64)
    scaled = _scale(a, digits - 1 - e)
    lo, hi = 10.0 ** (digits - 1), 10.0**digits
    fix = scaled < lo  # log10 rounded up across a power of ten
    if fix.any():
        e = np.where(fix, e - 1, e)
        scaled = np.where(fix, _scale(a, digits - 1 - e), scaled)
    fix = scaled >= hi
    if fix.any():
        e = np.where(fix, e + 1, e)
        scaled = np.where(fix, _scale(a, digits - 1 - e), scaled)
    m = np.rint(scaled)
    slow |= np.abs(scaled - np.floor(scaled) - 0.5) < 1e-5
    up = m >= hi  # rounded up to the next power of ten: 1.00000000 of it
    if up.any():
        m = np.where(up, lo, m)
        e = np.where(up, e + 1, e)
    mi = np.where(zero, 0, m.astype(np.int64))
    e = np.where(zero | ~finite, 0, e)
    # Layout, a row per byte: sign, "0.000" (fixed notation below 1), each digit followed
    # by a slot for the point, ".0" (a whole number in fixed notation), "e+XX" / "e-XXX".
    width = 1 + 5 + 2 * digits + 2 + 5
    out = np.zeros((width, n), dtype=np.uint8)
    body = out[6 : 6 + 2 * digits]
    _digits(out, range(6, 6 + 2 * digits, 2), mi, digits)
    # How many digits are significant: trailing zeros are dropped (a zero keeps one), found
    # on the few values that end in a zero.
    sig = np.full(n, digits, dtype=np.int64)
    ends = np.flatnonzero((mi % 10 == 0) & finite)
    if ends.size:
        tail = body[::2, ends]
        sig[ends] = np.maximum(digits - np.argmax(tail[::-1] != _ZERO, axis=0), 1)
        sig[zero] = 1
    sci = ((e < -4) | (e >= digits)) & finite
    neg = np.signbit(x) & finite
    if neg.any():
        out[0, neg] = _MINUS
    small = ~sci & (e < 0)
    if small.any():
        pre = np.array([[_ZERO, _DOT, 0, 0, 0]] * 4, dtype=np.uint8)
        for k in range(1, 4):
            pre[k, 2 : 2 + k] = _ZERO
        out[1:6, small] = pre[-e[small] - 1].T
    # A whole number in fixed notation keeps its digits up to the units (zeros included)
    # and gets ".0"; any other value only its significant digits.
    whole = ~sci & (e >= 0) & (sig <= e + 1) & finite
    if ends.size:
        place = np.arange(digits)[:, None]
        keep = (place < sig[ends]) | (whole[ends] & (place <= e[ends]))
        body[::2, ends] = np.where(keep, body[::2, ends], 0)
    if whole.any():
        out[6 + 2 * digits, whole] = _DOT
        out[7 + 2 * digits, whole] = _ZERO
    # The point after digit q: in fixed notation after the units digit when a fraction
    # follows, in exponent notation after the first digit when more follow.
    q = np.where(sci, 0, e)
    dotted = np.where(sci, sig > 1, (e >= 0) & (sig > e + 1))
    # By the digit it follows: a row of the matrix at a time (few distinct places).
    after = np.bincount(q[dotted], minlength=digits) if dotted.any() else np.zeros(digits)
    for k in np.flatnonzero(after).tolist():
        body[2 * k + 1][dotted & (q == k)] = _DOT
    if sci.any():
        rows = np.flatnonzero(sci)
        ex = e[rows]
        mag = np.minimum(np.abs(ex), 999)
        three = mag >= 100
        tail = np.zeros((5, rows.size), dtype=np.uint8)
        tail[0] = _E
        tail[1] = np.where(ex < 0, _MINUS, _PLUS)
        tail[2] = np.where(three, _PLACES[0][mag], _PLACES[1][mag])
        tail[3] = np.where(three, _PLACES[1][mag], _PLACES[2][mag])
        tail[4] = np.where(three, _PLACES[2][mag], 0)
        out[-5:, rows] = tail
    # Only the byte rows some value uses: fewer bytes to join.
    used = np.zeros(width, dtype=bool)
    used[0] = bool(neg.any())
    used[1:6] = bool(small.any())
    used[6 : 6 + 2 * digits : 2] = True
    used[6 + 2 * q[dotted] + 1] = True
    used[6 + 2 * digits : 8 + 2 * digits] = bool(whole.any())
    used[-5:] = bool(sci.any())
    bad = np.flatnonzero(~finite)
    slow_rows = np.flatnonzero(slow & finite & ~zero)
    if bad.size and not slow_rows.size and not empty:
        out[:, bad] = 0  # empty cells
    elif bad.size or slow_rows.size:
        texts = [empty, *(_python_float(float(x[i]), digits) for i in slow_rows)]
        which = np.concatenate([np.zeros(bad.size, np.intp), np.arange(1, slow_rows.size + 1)])
        extra = np.take(text_matrix(texts), which, axis=1)
        if extra.shape[0] > width:
            grow = extra.shape[0] - width
            out = np.concatenate([out, np.zeros((grow, n), dtype=np.uint8)])
            used = np.concatenate([used, np.zeros(grow, dtype=bool)])
        at = np.concatenate([bad, slow_rows])
        out[:, at] = 0
        out[: extra.shape[0], at] = extra
        used[: extra.shape[0]] |= extra.any(axis=1)
    return out[used]


def _scale(a: np.ndarray, k: np.ndarray) -> np.ndarray:
    """a x 10^k in one rounding (k within +-22: the powers are exact)."""
    if not k.size:
        return a.copy()
    low, high = int(k.min()), int(k.max())
    if low >= 0 and high <= 22:
        return a * np.take(_POW10, k)
    k = np.clip(k, -22, 22)
    if high <= 0:
        return a / np.take(_POW10, -k)
    return np.where(k >= 0, a * _POW10[np.maximum(k, 0)], a / _POW10[np.maximum(-k, 0)])


def _python_float(v: float, digits: int = FLOAT_DIGITS) -> bytes:
    """One float as :func:`float_cells` writes it, by Python's formatting."""
    text = f"{v:.{digits}g}"
    if not any(c in text for c in ".eni"):
        text += ".0"
    return text.encode()


def format_float(v: float, digits: int = FLOAT_DIGITS) -> str:
    """The text :func:`float_cells` gives a finite float (for tests and one-off values)."""
    return _python_float(v, digits).decode()


def join_cells(cells: list[np.ndarray], rows: int) -> bytes:
    """Cell matrices (a column per row of text, or one column every row shares) in order,
    the 0 bytes dropped: each row's text, rows one after another."""
    stacked = np.concatenate([np.broadcast_to(c, (c.shape[0], rows)) for c in cells])
    return stacked.T.tobytes().translate(None, b"\0")


def cells_text(cells: np.ndarray) -> list[str]:
    """Each cell of a matrix as text (for tests)."""
    return [bytes(c[c != 0]).decode() for c in cells.T]
