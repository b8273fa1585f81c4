"""Columns of numbers as text, a block of rows at a time, without a Python call per value.

``sweep --out`` writes millions of rows; formatting each float with ``repr`` or ``%`` costs
more than computing it. Here a column's cells are :class:`Cells`: each cell's text packed in
64-bit words, 8 bytes a word, its first byte the word's lowest (little-endian), and its
length in bytes. Digits are made by integer arithmetic on the packed words, 8 at a time
(``_digits8``), the decimal point, leading zeros and signs by shifting whole words, so that a
column costs a few dozen NumPy operations whatever its values.

:func:`join_cells` puts each row's cells after one another in one buffer. Each column's cells,
with the constant text before them, are fixed-size items of whole words, assigned at their
rows' byte offsets in one indexed assignment per column, column after column: the bytes an
item holds past its cell's end are overwritten by the next column's. The last column of a row
(and any column whose items could reach past its row's end) is written exactly, a group of
equal items at a time.

Floats are written with ``FLOAT_DIGITS`` significant digits, as Python's ``'%.9g' % value``
writes them (the shorter of fixed and exponent notation, trailing zeros dropped), with ``.0``
appended where that leaves neither a point nor an exponent, so that a float reads back as a
float (``128.0``, not ``128``). Values within rounding of a tie at the last digit, and values
beyond 1e-13..1e15, are formatted by Python itself; the result is that text for every value
(``tests/test_recommend_sweep.py::test_float_columns_are_percent_g``).

Where it was built (``_rowtext.c``, compiled when the package is installed and a C compiler is
there), :func:`format_rows` writes the same rows in one compiled pass over the columns' values
(:class:`Floats`, :class:`Ints`, :class:`Picked`): the same text, each cell made by the same
rules, at a few nanoseconds a cell. :data:`rowtext` is that module, or None where it was not
built or ``DUALPATH_PLAN_PURE_WRITER=1`` asks for NumPy; :func:`column_cells` gives a column's
cells for :func:`join_cells` either way, the reference the compiled writer is tested against.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Sequence
from types import ModuleType

import numpy as np

from dualpath_plan.frozen import record

# Significant digits of every float written by ``sweep --out`` (a relative rounding error of
# at most 5e-9: far below what the model knows, and plenty for a spreadsheet).
FLOAT_DIGITS = 9

# Words hold text little-endian whatever the machine: byte i of a word is its bits 8i..8i+7.
_WORD = np.dtype("<u8")
_U = np.uint64
_ASCII_ZEROS = _U(0x3030303030303030)
_POW10 = 10.0 ** np.arange(23)  # exact
_MINUS, _DOT, _ZERO = _U(ord("-")), _U(ord(".")), _U(ord("0"))


@record
class Cells:
    """A column of text cells. ``words[j, i]`` is word j of cell i (bytes past its
    ``length[i]`` are undefined); ``codes``, when given, picks a cell per row (a column of a
    few distinct texts, or of one text per P/D pair), else row i is cell i. One cell and no
    codes: the same text on every row."""

    words: np.ndarray  # (k, m) uint64
    length: np.ndarray  # (m,) int64
    codes: np.ndarray | None = None  # (n,) intp

    @property
    def constant(self) -> bool:
        return self.codes is None and self.length.size == 1

    def take(self, rows: np.ndarray) -> Cells:
        """The cells of ``rows`` (cell indices), as codes: nothing copied."""
        if self.constant:
            return self
        return Cells(self.words, self.length, rows if self.codes is None else self.codes[rows])

    def dense(self) -> tuple[np.ndarray, np.ndarray]:
        """Each row's words and length (the codes applied)."""
        if self.codes is None:
            return self.words, self.length
        return np.take(self.words, self.codes, axis=1), np.take(self.length, self.codes)

    def text(self, i: int) -> bytes:
        """Cell i's text."""
        return self.words[:, i].astype(_WORD).tobytes()[: int(self.length[i])]


def text_cells(texts: Sequence[bytes]) -> Cells:
    """Byte strings as cells (b'': an empty cell)."""
    width = max((len(t) for t in texts), default=0)
    k = max((width + 7) // 8, 1)
    raw = b"".join(t.ljust(8 * k, b"\0") for t in texts)
    words = np.frombuffer(raw, dtype=_WORD).reshape(len(texts), k).T.astype(_U)
    return Cells(words, np.asarray([len(t) for t in texts], dtype=np.int64))


def cells_text(cells: Cells) -> list[str]:
    """Each row's cell as text (for tests)."""
    words, length = cells.dense()
    dense = Cells(words, length)
    return [dense.text(i).decode() for i in range(length.size)]


# Up to this many values (a column constant over a block: one) Python formats faster than
# the dozens of NumPy operations that format a whole column.
_FEW_VALUES = 8


def _digits8(v: np.ndarray, ascii: bool = True) -> np.ndarray:
    """The 8 decimal digits of each of ``v`` (uint64 below 10^8, leading zeros included) as
    ASCII (else as bytes 0..9), the first digit in the lowest byte: split in halves of 4
    digits, each in a 32-bit lane, then pairs in 16-bit lanes, then digits in bytes, the
    lanes divided at once by multiplying by a reciprocal (exact for these ranges:
    x * 5243 >> 19 == x // 100 for x < 43699, x * 103 >> 10 == x // 10 for x < 179) and no
    lane overflowing into the next."""
    hi = v // _U(10_000)
    x = v - hi * _U(10_000)
    x <<= _U(32)
    x |= hi
    y = x * _U(5243)
    y >>= _U(19)
    y &= _U(0x0000007F0000007F)
    x -= y * _U(100)
    x <<= _U(16)
    x |= y
    y = x * _U(103)
    y >>= _U(10)
    y &= _U(0x000F000F000F000F)
    x -= y * _U(10)
    x <<= _U(8)
    x |= y
    if ascii:
        x |= _ASCII_ZEROS
    return x


def _ndigits(a: np.ndarray, top: int) -> np.ndarray:
    """How many decimal digits each of ``a`` (non-negative, at most ``top``) has."""
    n = np.ones(a.shape, dtype=np.int64)
    for k in range(1, len(str(top))):
        n += a >= _U(10**k)
    return n


# The cells of 0..9999 (P, D, GPUs: small numbers a table gives at once), made when first
# needed.
_SMALL = 10_000


@functools.cache
def _small() -> tuple[np.ndarray, np.ndarray]:
    v = np.arange(_SMALL, dtype=_U)
    length = _ndigits(v, _SMALL - 1)
    return _digits8(v) >> (_U(8) * (_U(8) - length.astype(_U))), length


def _shift_in(
    lo: np.ndarray, hi: np.ndarray, head: np.ndarray | np.uint64, nbytes: np.ndarray | int
) -> None:
    """Two-word texts moved ``nbytes`` later (0..7, per cell or for all), ``head`` (bytes that
    fit in ``nbytes``) put before them, in place."""
    s = _U(8) * np.asarray(nbytes).astype(_U)
    hi <<= s
    hi |= lo >> (_U(64) - s)  # a shift by 64 gives 0 (NumPy's shifts saturate)
    lo <<= s
    lo |= head


def int_cells(values: np.ndarray) -> Cells:
    """Whole numbers (an integer array) as their decimal text."""
    v = np.asarray(values, dtype=np.int64).ravel()
    if v.size <= _FEW_VALUES:
        return text_cells([str(i).encode() for i in v.tolist()])
    neg = v < 0
    a = v.astype(_U)
    any_neg = bool(neg.any())
    if any_neg:
        a[neg] = _U(0) - a[neg]  # two's complement: the magnitude, -2^63 included
    top = int(a.max()) if a.size else 0
    if top < _SMALL:
        words, lengths = _small()
        lo = np.take(words, a)
        length = np.take(lengths, a)
        hi = np.zeros_like(lo)
    elif top < 10**8:
        lo = _digits8(a)
        if len(str(int(a.min()))) == len(str(top)):  # one length (a block's point numbers)
            length = np.full(v.size, len(str(top)), dtype=np.int64)
            lo >>= _U(8 * (8 - len(str(top))))  # the leading zeros dropped
        else:
            length = _ndigits(a, top)
            lo >>= _U(8) * (_U(8) - length.astype(_U))
        hi = np.zeros_like(lo)
    elif top < 10**16 // (10 if any_neg else 1):  # the text, "-" included, in two words
        # 16 digits, leading zeros included, in two words; then moved back over the zeros.
        upper = a // _U(10**8)
        d0 = _digits8(upper)
        d1 = _digits8(a - upper * _U(10**8))
        length = _ndigits(a, top)
        s = _U(8) * (_U(16) - length.astype(_U))  # bits of leading zeros: 8..120
        lo = (d0 >> s) | (d1 << (_U(64) - s)) | (d1 >> (s - _U(64)))  # out-of-range shifts: 0
        hi = d1 >> s
    else:  # beyond 16 characters: rare enough for Python
        return _patch(
            Cells(np.zeros((3, v.size), dtype=_U), np.zeros(v.size, dtype=np.int64)),
            np.arange(v.size),
            [str(i).encode() for i in v.tolist()],
        )
    if any_neg:
        rows = np.flatnonzero(neg)
        lo_n, hi_n = lo[rows], hi[rows]
        _shift_in(lo_n, hi_n, _MINUS, 1)
        lo[rows], hi[rows] = lo_n, hi_n
        length = length + neg
    return Cells(np.stack([lo, hi]), length)


def _patch(cells: Cells, rows: np.ndarray, texts: list[bytes]) -> Cells:
    """``cells`` with the cells of ``rows`` replaced by ``texts`` (widened if need be)."""
    extra = text_cells(texts)
    words, length = cells.words, cells.length.copy()
    k = max(words.shape[0], extra.words.shape[0])
    if k > words.shape[0]:
        words = np.concatenate([words, np.zeros((k - words.shape[0], words.shape[1]), _U)])
    else:
        words = words.copy()
    words[: extra.words.shape[0], rows] = extra.words
    length[rows] = extra.length
    return Cells(words, length)


# The digits of 0..999 as 3 ASCII bytes; how many are significant in digits 0..2, 3..5 and
# 6..8 of a 9-digit mantissa (up to the last not 0; 1 for the mantissa 0).
_TEXT3 = np.asarray([int.from_bytes(f"{g:03d}".encode(), "little") for g in range(1000)], _U)
_SIG3 = np.asarray(
    [
        [(len(f"{g:03d}".rstrip("0")) + 3 * k if g else (k == 0)) for g in range(1000)]
        for k in range(3)
    ],
    dtype=np.int64,
)

# Where the decimal point goes, by the digit it follows (0..8) in a 10-byte text of two
# words: the bytes kept before it (masks of the low and high word) and the point itself.
_KEEP_LO = np.asarray([(1 << min(8 * (q + 1), 64)) - 1 for q in range(9)], dtype=_U)
_KEEP_HI = np.asarray([(1 << max(8 * (q + 1) - 64, 0)) - 1 for q in range(9)], dtype=_U)
_MOVE_LO, _MOVE_HI = ~_KEEP_LO, ~_KEEP_HI
_DOT_LO = np.asarray([ord(".") << 8 * (q + 1) if q < 7 else 0 for q in range(9)], dtype=_U)
_DOT_HI = np.asarray([ord(".") << 8 * (q + 1) - 64 if q >= 7 else 0 for q in range(9)], _U)
# "0", "00", ... before the digits of 0.0001234 (fixed notation below 1).
_ZEROS = np.asarray([int.from_bytes(b"0" * z, "little") for z in range(5)], dtype=_U)
# The exponent "e-13" .. "e+15" (the fast path's range, 1e15 by rounding up), by exponent
# + 13, as 4 bytes.
_EXPONENT = np.asarray(
    [int.from_bytes(f"e{e:+03d}".encode(), "little") for e in range(-13, 16)], dtype=_U
)


def float_cells(values: np.ndarray, empty: bytes = b"") -> Cells:
    """Floats as ``'%.9g'`` text (``.0`` appended where it has neither a point nor an
    exponent); NaN and infinities as ``empty``."""
    digits = FLOAT_DIGITS
    x = np.asarray(values, dtype=np.float64).ravel()
    n = x.size
    if n <= _FEW_VALUES:
        return text_cells([_python_float(v) if math.isfinite(v) else empty for v in x.tolist()])
    a = np.abs(x)
    # Python formats what the fast path cannot decide: outside the exact powers of ten,
    # and within rounding of a tie at the last digit. Zero takes the fast path as 1, its
    # digits zeroed below. (Checks on a column's least and largest value where they can
    # spare a mask: NaN fails them.)
    every = bool(a.min() >= 1e-13) and bool(a.max() < 1e15)
    other = None  # the few others: zero, NaN, infinities, beyond the range
    if not every:
        fast = a >= 1e-13
        fast &= a < 1e15
        np.logical_not(fast, out=fast)
        other = np.flatnonzero(fast)
        a[other] = 1.0
    e = np.log10(a)
    np.floor(e, out=e)
    e = e.astype(np.int64)
    # The exponents' range (widened by one where a fix below moves one): the scale's powers
    # and the notations needed.
    e_min, e_max = int(e.min()), int(e.max())
    scaled = _scale(a, digits - 1 - e, (digits - 1 - e_max, digits - 1 - e_min))
    lo_m, hi_m = 10.0 ** (digits - 1), 10.0**digits
    if scaled.min() < lo_m:  # log10 rounded up across a power of ten
        fix = scaled < lo_m
        e[fix] -= 1
        e_min -= 1
        scaled[fix] = _scale(a[fix], digits - 1 - e[fix])
    if scaled.max() >= hi_m:
        fix = scaled >= hi_m
        e[fix] += 1
        e_max += 1
        scaled[fix] = _scale(a[fix], digits - 1 - e[fix])
    m = np.rint(scaled)
    # A tie: the scaled value within 1e-5 of halfway between two integers (its rounding
    # error is below 1e-7).
    scaled -= m
    np.abs(scaled, out=scaled)
    slow = scaled > 0.5 - 1e-5
    if m.max() >= hi_m:  # rounded up to the next power of ten: 1.00000000 of it
        up = m >= hi_m
        m[up] = lo_m
        e[up] += 1
        e_max += 1
    mi = m.astype(np.int64)  # (table indices: intp, not converted by each look-up)
    if other is not None:
        zero = other[x[other] == 0]
        mi[zero] = 0
        e[zero] = 0
    # The 9 digits by groups of 3 from a table, then "0" after the last (the ".0" of a whole
    # number); the significant digits (trailing zeros dropped, a zero keeps one) from the
    # last group not 000.
    g0 = mi // 10**6
    mi -= g0 * 10**6
    g1 = mi // 1000
    mi -= g1 * 1000
    sig = np.take(_SIG3[2], mi)
    rest = np.flatnonzero(sig == 0)  # the last 3 digits 000: the few others tell
    if rest.size:
        sig[rest] = np.maximum(_SIG3[1][g1[rest]], _SIG3[0][g0[rest]])
    words = np.empty((2, n), dtype=_U)
    lo, hi = words
    np.take(_TEXT3, mi, out=hi)  # the last 3 digits, for now
    np.left_shift(hi, _U(48), out=lo)
    hi >>= _U(16)
    hi |= _U(0x3000)
    lo |= np.take(_TEXT3, g0)
    lo |= np.take(_TEXT3, g1) << _U(24)
    sci = (e < -4) | (e >= digits) if e_min < -4 or e_max >= digits else None
    # Fixed notation below 1: "0" and the zeros after the point before the digits.
    z = None
    if e_min < 0:
        z = np.negative(e)
        np.maximum(z, 0, out=z)
        if sci is not None:
            z[sci] = 0
        _shift_in(lo, hi, np.take(_ZEROS, z), z)
    # The point after digit q (fixed notation: after the units; exponent notation or below
    # 1: after the first digit). A 10-byte text: the point moves the bytes after it.
    q = np.maximum(e, 0)
    if sci is not None:
        q[sci] = 0
    moved = np.take(_MOVE_LO, q)
    moved &= lo
    lo &= np.take(_KEEP_LO, q)
    lo |= moved << _U(8)
    lo |= np.take(_DOT_LO, q)
    if e_max >= 7:  # the point may be in the second word
        hi_moved = hi & np.take(_MOVE_HI, q)
        hi &= np.take(_KEEP_HI, q)
        hi |= hi_moved << _U(8)
        hi |= np.take(_DOT_HI, q)
    else:
        hi <<= _U(8)
    hi |= moved >> _U(56)
    # Length: a whole number in fixed notation keeps its digits up to the units and ".0",
    # any other value its significant digits (and the zeros and point before them).
    length = np.maximum(sig if z is None else sig + z, q + 2)
    length += 1
    if sci is not None:
        rows = np.flatnonzero(sci)
        s_lo, s_hi = lo[rows], hi[rows]
        at = np.where(sig[rows] > 1, sig[rows] + 1, 1)  # the point only before more digits
        bits = _U(8) * at.astype(_U)
        s_lo &= (_U(1) << bits) - _U(1)  # a shift by 64 gives 0: all bits kept
        s_hi &= (_U(1) << (_U(8) * np.maximum(at - 8, 0).astype(_U))) - _U(1)
        # (Shifts by a count that wrapped below 0 give 0: the exponent's part in each word.)
        ex = np.take(_EXPONENT, e[rows] + 13)
        s_lo |= ex << bits
        s_hi |= (ex >> (_U(64) - bits)) | (ex << (bits - _U(64)))
        lo[rows], hi[rows] = s_lo, s_hi
        length[rows] = at + 4
    neg = np.flatnonzero(np.signbit(x))
    if neg.size:
        n_lo, n_hi = lo[neg], hi[neg]
        _shift_in(n_lo, n_hi, _MINUS, 1)
        lo[neg], hi[neg] = n_lo, n_hi
        length[neg] += 1
    cells = Cells(words, length)
    slow_rows = np.flatnonzero(slow)
    if other is not None:
        # NaN and infinities empty, values beyond the fast path's range as Python has them.
        xo = x[other]
        bad = other[~np.isfinite(xo)]
        if bad.size:
            filler = _filler(empty)
            width = filler.words.shape[0]
            if width > 2:
                words = np.concatenate([words, np.zeros((width - 2, n), dtype=_U)])
                cells = Cells(words, length)
            for j in range(width):
                words[j, bad] = filler.words[j, 0]
            length[bad] = filler.length[0]
        beyond = other[np.isfinite(xo) & (xo != 0)]
        if beyond.size:
            slow_rows = np.union1d(slow_rows, beyond)
    if slow_rows.size:
        texts = [_python_float(float(x[i]), digits) for i in slow_rows.tolist()]
        cells = _patch(cells, slow_rows, texts)
    return cells


@functools.lru_cache(maxsize=4)
def _filler(empty: bytes) -> Cells:
    """The cell of NaN and infinities."""
    return text_cells([empty])


def _scale(a: np.ndarray, k: np.ndarray, bounds: tuple[int, int] | None = None) -> np.ndarray:
    """a x 10^k in one rounding (k within +-22: the powers are exact); ``bounds``: k's least
    and largest, or bounds of them, if known."""
    if not k.size:
        return a.copy()
    low, high = bounds or (int(k.min()), int(k.max()))
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


class TextBuffer:
    """Memory for a block's text and the words joined into it, kept from block to block:
    fresh memory for each block (NumPy takes arrays over 128 KB straight from the system)
    costs a page fault every 4 KB, as much as joining the text."""

    def __init__(self) -> None:
        self.text = np.empty(0, dtype=np.uint8)
        self.words = np.empty(0, dtype=_U)

    def get(self, size: int) -> np.ndarray:
        if self.text.size < size:
            self.text = np.empty(size + size // 4, dtype=np.uint8)
        return self.text

    def items(self, rows: int, count: int) -> np.ndarray:
        if self.words.size < rows * count:
            self.words = np.empty(rows * count + rows * count // 4, dtype=_U)
        return self.words[: rows * count].reshape(rows, count)


def join_cells(
    parts: Sequence[bytes | Cells], rows: int, buffer: TextBuffer | None = None
) -> np.ndarray:
    """``rows`` rows of text, each the parts in order (a bytes part as it is, a Cells part
    that row's cell, a constant one its cell), one row after another, as bytes (uint8), in
    ``buffer`` if given."""
    buffer = buffer or TextBuffer()
    # Each column that varies, with the text before it: its cells, or for a column of a few
    # texts picked by codes (and the next such columns, while their combinations are few),
    # the texts that occur. The text of a column that does not vary joins the constant text.
    segments: list[tuple[bytes, Cells] | _Picked] = []
    pending = b""
    for part in parts:
        if not isinstance(part, Cells):
            pending += part
        elif part.constant:
            pending += part.text(0)
        elif part.codes is not None and part.length.size <= _FEW:
            picked = _Picked.of(part, pending)
            previous = segments[-1] if segments else None
            if len(picked.texts) == 1:  # (its text holds the text before it)
                pending = next(iter(picked.texts.values()))
                continue
            if isinstance(previous, _Picked):
                both = previous.then(picked)
                if both is not None:
                    segments[-1] = both
                    pending = b""
                    continue
            segments.append(picked)
            pending = b""
        else:
            segments.append((pending, part))
            pending = b""
    if not segments or not rows:
        return np.frombuffer(pending * rows, dtype=np.uint8)
    if isinstance(segments[-1], _Picked):  # the row's end written with the last texts
        segments[-1] = segments[-1].then_text(pending)
        pending = b""
    # Each segment's bytes per row (the row's end with the last).
    sizes: list[np.ndarray] = []
    dense: list[tuple[np.ndarray, np.ndarray]] = []
    for k, segment in enumerate(segments):
        if isinstance(segment, _Picked):
            sizes.append(segment.sizes())
        else:
            words, length = segment[1].dense()
            dense.append((words, length))
            after = len(pending) if k == len(segments) - 1 else 0
            sizes.append(length + (len(segment[0]) + after))
    row = sizes[0].copy()
    for size in sizes[1:]:
        row += size
    # The fewest bytes from each segment's start to its row's end (an item reaching no
    # further cannot reach the next row).
    least = np.cumsum([int(size.min()) for size in sizes[::-1]])[::-1].tolist()
    end = np.cumsum(row)
    total = int(end[-1])
    # Room for the bytes an item holds past the last row's end.
    need = total + 8 * max(c.words.shape[0] + len(p) // 8 + 1 for p, c in _cells_of(segments))
    buf = buffer.get(need + 8)
    pos = end - row
    dense_ = iter(dense)
    for k, (segment, size) in enumerate(zip(segments, sizes, strict=True)):
        if isinstance(segment, _Picked):
            # A few distinct texts: each written exactly where it goes.
            only = len(segment.texts) == 1
            for code, text in segment.texts.items():
                at = pos if only else pos[segment.codes == code]
                _put(buf, at, np.frombuffer(text, dtype=np.uint8)[None, :])
        else:
            prefix = segment[0]
            words, length = next(dense_)
            last = k == len(segments) - 1
            items = _prefixed(prefix, words, int(length.max()), buffer)
            # An item's bytes past its cell are the next column's place, but must not reach
            # the next row, written already.
            if not last and least[k] >= 8 * items.shape[1]:
                _put(buf, pos, items)
            else:
                _put_exact(buf, pos, items, size - len(pending) * last, pending * last)
        pos += size
    return buf[:total]


def _cells_of(segments: list[tuple[bytes, Cells] | _Picked]) -> list[tuple[bytes, Cells]]:
    return [s for s in segments if not isinstance(s, _Picked)] or [(b"", text_cells([]))]


@record
class _Picked:
    """Consecutive columns of a few texts each: each combination of their cells that occurs
    (the text before each column included) by its code, and each row's code."""

    texts: dict[int, bytes]
    codes: np.ndarray
    space: int  # the codes are below this

    @staticmethod
    def of(cells: Cells, prefix: bytes) -> _Picked:
        assert cells.codes is not None
        space = cells.length.size
        there = np.flatnonzero(np.bincount(cells.codes, minlength=space)).tolist()
        return _Picked({c: prefix + cells.text(c) for c in there}, cells.codes, space)

    def then(self, other: _Picked) -> _Picked | None:
        """This column and the next, where their combinations are few enough to be written
        a combination at a time (fewer writes than a column at a time); else None."""
        if self.space * other.space > _FEW * _FEW:
            return None
        codes = self.codes * other.space + other.codes
        there = np.flatnonzero(np.bincount(codes, minlength=self.space * other.space))
        if there.size > _COMBINATIONS:
            return None
        texts = {
            c: self.texts[c // other.space] + other.texts[c % other.space] for c in there.tolist()
        }
        return _Picked(texts, codes, self.space * other.space)

    def then_text(self, text: bytes) -> _Picked:
        return _Picked({c: t + text for c, t in self.texts.items()}, self.codes, self.space)

    def sizes(self) -> np.ndarray:
        """Each row's bytes."""
        lengths = np.zeros(self.space, dtype=np.int64)
        lengths[list(self.texts)] = [len(t) for t in self.texts.values()]
        return np.take(lengths, self.codes)


# Combinations of consecutive columns of a few texts written a combination at a time, at most.
_COMBINATIONS = 16


# Columns of at most this many distinct cells are written a cell at a time.
_FEW = 64


def _prefixed(prefix: bytes, words: np.ndarray, width: int, buffer: TextBuffer) -> np.ndarray:
    """Items of ``prefix`` and each cell (``words``, at most ``width`` bytes): a row of whole
    words per cell, little-endian (in ``buffer``'s memory)."""
    a, b = divmod(len(prefix), 8)
    bits = _U(8 * b)
    k = min((width + 7) // 8, words.shape[0])  # the cells' words that hold text
    count = max((len(prefix) + width + 7) // 8, 1)
    head = np.frombuffer(prefix.ljust(8 * count, b"\0"), dtype=_WORD).astype(_U)
    out = buffer.items(words.shape[1], count)
    for j in range(count):
        # Word j: the cell's word j - a moved b bytes on, the end of the one before it, the
        # prefix's; the last operation writes it in its place in the rows.
        col = out[:, j]
        src = j - a
        terms: list[np.ndarray | np.uint64] = []
        if 0 <= src < k:
            terms.append(words[src])
        if b and 0 <= src - 1 < k:
            terms.append(words[src - 1] >> (_U(64) - bits))
        if head[j]:
            terms.append(head[j])
        if not terms:
            col[...] = 0
        elif 0 <= src < k and b:
            np.left_shift(terms[0], bits, out=col)
            for t in terms[1:]:
                col |= t
        elif len(terms) == 1:
            col[...] = terms[0]
        else:
            np.bitwise_or(terms[0], terms[1], out=col)
            for t in terms[2:]:
                col |= t
    return out


def _put(buf: np.ndarray, at: np.ndarray, items: np.ndarray) -> None:
    """Each item (a row of ``items``, uint64 words or bytes) into ``buf`` at its offset."""
    raw = np.ascontiguousarray(items.astype(_WORD, copy=False) if items.itemsize > 1 else items)
    size = raw.shape[1] * raw.itemsize
    if not size:
        return
    kind = np.dtype(f"V{size}")
    # A view whose items start at every byte: item i of it is buf[i : i + size].
    view = np.ndarray(shape=(buf.size - size + 1,), dtype=kind, buffer=buf, strides=(1,))
    view[at] = raw.view(kind).reshape(-1)


def _put_exact(
    buf: np.ndarray, at: np.ndarray, items: np.ndarray, size: np.ndarray, after: bytes
) -> None:
    """Each item's first ``size`` bytes and ``after`` into ``buf`` at its offset, no byte
    beyond: a group of items of one size at a time."""
    raw = items.astype(_WORD, copy=False).view(np.uint8)
    tail = np.frombuffer(after, dtype=np.uint8)
    for s in np.flatnonzero(np.bincount(size)).tolist():
        rows = np.flatnonzero(size == s)
        group = raw[rows, :s]
        if tail.size:
            group = np.concatenate([group, np.broadcast_to(tail, (rows.size, tail.size))], axis=1)
        _put(buf, at[rows], group)


@record
class Floats:
    """A column of floats (float64, one a row), NaN and infinities as ``empty``."""

    values: np.ndarray
    empty: bytes = b""


@record
class Ints:
    """A column of whole numbers (int64, one a row)."""

    values: np.ndarray


@record
class Picked:
    """A column of a few texts: ``texts[codes[i]]`` on row i (codes: ints or bools), or
    ``texts[0]`` on every row where ``codes`` is None."""

    texts: tuple[bytes, ...]
    codes: np.ndarray | None = None


Column = Floats | Ints | Picked


def column_cells(column: Column) -> Cells:
    """A column's cells (the NumPy writer's)."""
    if isinstance(column, Floats):
        return float_cells(column.values, column.empty)
    if isinstance(column, Ints):
        return int_cells(column.values)
    table = text_cells(column.texts)
    return table if column.codes is None else table.take(column.codes.astype(np.intp, copy=False))


def _pure_writer_asked() -> bool:
    """Whether ``DUALPATH_PLAN_PURE_WRITER`` (set, and not 0) asks for the NumPy writer."""
    return os.environ.get("DUALPATH_PLAN_PURE_WRITER", "") not in ("", "0")


def _load_rowtext() -> ModuleType | None:
    """The compiled writer, unless not built or ``DUALPATH_PLAN_PURE_WRITER`` asks for NumPy."""
    if _pure_writer_asked():
        return None
    global _ROWTEXT_ERROR
    try:
        from dualpath_plan.reports import _rowtext
    except ImportError as exc:
        _ROWTEXT_ERROR = str(exc)
        return None
    return _rowtext


_ROWTEXT_ERROR = ""  # why the compiled writer did not load (its ImportError)


rowtext = _load_rowtext()


def writer_in_use() -> str:
    """Which writer ``sweep --out`` uses, said in its summary: a file written slowly says why."""
    if rowtext is not None:
        return "compiled"
    if _pure_writer_asked():
        return "numpy (DUALPATH_PLAN_PURE_WRITER)"
    # Its ImportError, not a guess (it said 'no C compiler at install' beside a compiler).
    why = f": {_ROWTEXT_ERROR}" if _ROWTEXT_ERROR else ""
    return f"numpy (the compiled writer did not load{why})"


def format_rows(parts: Sequence[bytes | Column], rows: int, out: bytearray) -> int:
    """``rows`` rows of text, each the parts in order (a bytes part as it is, a column that
    row's cell), one row after another, written by the compiled writer into ``out`` (grown if
    too small); returns the bytes written. The text :func:`join_cells` gives the parts' cells
    (:func:`column_cells`)."""
    assert rowtext is not None, "the compiled writer was not built"
    columns: list[tuple[bytes, str, np.ndarray, bytes | tuple[bytes, ...] | None]] = []
    pending = b""  # text that does not vary, joined into the next column's prefix
    for part in parts:
        if isinstance(part, bytes):
            pending += part
        elif isinstance(part, Floats):
            floats = np.ascontiguousarray(part.values, dtype=np.float64).ravel()
            columns.append((pending, "f", floats, part.empty))
            pending = b""
        elif isinstance(part, Ints):
            ints = np.ascontiguousarray(part.values, dtype=np.int64).ravel()
            columns.append((pending, "i", ints, None))
            pending = b""
        elif part.codes is None:
            pending += part.texts[0]
        else:
            columns.append((pending, "c", _codes(part.codes), part.texts))
            pending = b""
    written: int = rowtext.format_rows(out, rows, tuple(columns), pending)
    return written


def _codes(codes: np.ndarray) -> np.ndarray:
    """Codes as the compiled writer reads them: 1-byte (bools) or 8-byte integers."""
    codes = np.ascontiguousarray(codes).ravel()
    if codes.dtype.itemsize == 1 or codes.dtype == np.intp:
        return codes
    return codes.astype(np.intp)
