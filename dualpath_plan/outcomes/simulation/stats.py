"""Latency statistics: a distribution's mean and percentiles, and the bounded-memory histogram
the event loop fills."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Distribution:
    """Mean and percentiles of a latency over the turns measured."""

    mean: float
    p50: float
    p90: float
    p99: float
    count: int

    @classmethod
    def of(cls, values: np.ndarray) -> Distribution:
        if values.size == 0:
            return cls(math.nan, math.nan, math.nan, math.nan, 0)
        p50, p90, p99 = np.percentile(values, [50, 90, 99])
        return cls(float(values.mean()), float(p50), float(p90), float(p99), int(values.size))


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
        cum = self.zeros + np.cumsum(counts)
        edges = 10.0 ** (self.LOW + np.arange(self.BINS + 1) / self.PER_DECADE)

        def q(share: float) -> float:
            rank = share * self.count
            if rank <= self.zeros:
                return 0.0
            i = int(np.searchsorted(cum, rank, side="left"))
            i = min(i, self.BINS - 1)
            below = cum[i - 1] if i > 0 else self.zeros
            inside = (rank - below) / counts[i] if counts[i] > 0 else 0.5
            # Geometric interpolation within the bin.
            return float(edges[i] * (edges[i + 1] / edges[i]) ** inside)

        return Distribution(self.total / self.count, q(0.5), q(0.9), q(0.99), self.count)


_PER_DECADE, _LOW, _BINS = Histogram.PER_DECADE, Histogram.LOW, Histogram.BINS
log10 = math.log10
