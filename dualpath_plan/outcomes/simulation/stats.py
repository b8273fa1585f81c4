"""Latency statistics: a distribution's mean and percentiles, and the bounded-memory histogram
the event loop fills."""

from __future__ import annotations

import functools
import math
from dataclasses import field

import numpy as np

from dualpath_plan.frozen import record


@record
class Distribution:
    """Mean and percentiles of a latency over the turns measured; ``percentile(p)`` at any p
    (from the histogram, or the values, it was built from)."""

    mean: float
    p50: float
    p90: float
    p99: float
    count: int
    # What any percentile is read from: the histogram's occupied bins, or the sorted values
    # (not compared: two runs with the same statistics are equal).
    source: _Bins | np.ndarray | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, values: np.ndarray) -> Distribution:
        if values.size == 0:
            return cls(math.nan, math.nan, math.nan, math.nan, 0)
        p50, p90, p99 = np.percentile(values, [50, 90, 99])
        return cls(
            float(values.mean()), float(p50), float(p90), float(p99), int(values.size),
            np.sort(values),
        )  # fmt: skip

    def percentile(self, p: float) -> float:
        """The p-th percentile (0 < p < 100) of the latencies; NaN where none was measured."""
        if not 0.0 < p < 100.0:
            raise ValueError(f"a percentile is above 0 and below 100, got {p!r}")
        if self.count == 0:
            return math.nan
        known = {50.0: self.p50, 90.0: self.p90, 99.0: self.p99}
        if float(p) in known:
            return known[float(p)]
        if isinstance(self.source, _Bins):
            return self.source.quantile(p / 100.0)
        if isinstance(self.source, np.ndarray):
            return float(np.percentile(self.source, p))
        raise ValueError("this distribution keeps p50, p90 and p99 only")


@record
class _Bins:
    """A histogram's occupied bins (index, count) and its zeros: any quantile, in memory
    proportional to the bins a run touched (a few thousand), not to its turns."""

    index: np.ndarray  # int64, increasing
    counts: np.ndarray  # float64, > 0
    zeros: int
    count: int

    def quantile(self, share: float) -> float:
        """The value below which ``share`` of the latencies lie: geometric interpolation
        within the bin (the histogram's bins are log-spaced)."""
        rank = share * self.count
        if rank <= self.zeros:
            return 0.0
        cum = self.zeros + np.cumsum(self.counts)
        j = min(int(np.searchsorted(cum, rank, side="left")), self.index.size - 1)
        below = cum[j - 1] if j > 0 else self.zeros
        inside = (rank - below) / self.counts[j]
        i = int(self.index[j])
        edges = _edges()
        return float(edges[i] * (edges[i + 1] / edges[i]) ** inside)


class Histogram:
    """Latencies on log-spaced bins (2,000 per decade from 1 us to 1e7 s: percentiles to 0.12%
    of the value), the mean exact: memory bounded however many turns a run has."""

    PER_DECADE = 2000
    LOW = -6.0  # log10 of the first bin's lower edge
    BINS = 13 * PER_DECADE

    __slots__ = ("count", "counts", "total", "zeros")

    def __init__(self) -> None:
        self.counts = [0] * self.BINS
        self.total = 0.0
        self.count = 0
        self.zeros = 0  # values of 0 (a turn generating no tokens has no TPOT to speak of)

    def add(self, v: float) -> None:
        self.count += 1
        self.total += v
        if v <= 0.0:
            self.zeros += 1
            return
        # The bin (class constants as module ones: this runs for every turn, three times).
        i = int((log10(v) - _LOW) * _PER_DECADE)
        self.counts[i if 0 <= i < _BINS else 0 if i < 0 else _BINS - 1] += 1

    def distribution(self) -> Distribution:
        if self.count == 0:
            return Distribution(math.nan, math.nan, math.nan, math.nan, 0)
        counts = np.asarray(self.counts, dtype=np.float64)
        index = np.flatnonzero(counts)
        bins = _Bins(index, counts[index], self.zeros, self.count)
        return Distribution(
            self.total / self.count, bins.quantile(0.5), bins.quantile(0.9),
            bins.quantile(0.99), self.count, bins,
        )  # fmt: skip


_PER_DECADE, _LOW, _BINS = Histogram.PER_DECADE, Histogram.LOW, Histogram.BINS


@functools.cache
def _edges() -> np.ndarray:
    """The histogram's bin edges (built once per process)."""
    return 10.0 ** (Histogram.LOW + np.arange(Histogram.BINS + 1) / Histogram.PER_DECADE)


log10 = math.log10
