"""The ``simulate --out FILE.svg`` turns/s line: averaged over a window derived from the run
(a few mean turn cycles) and stated in the chart, so that a steady run draws a curve rather
than the comb of its raw 10 s windows (issue 34)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dualpath_plan.outcomes.simulation import SimConfig, SimResult, simulate
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.reports.simulate import AVERAGE_CYCLES, simulate_svg, smoothed_rate
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ScenarioSpec


@pytest.fixture(scope="module")
def run() -> tuple[Scenario, SimResult]:
    sc = Scenario.from_spec(Registry.load(use_env=False), ScenarioSpec())
    return sc, simulate(sc, SimConfig(mode="dualpath", agents=1024))


def _steady(r: SimResult, series: np.ndarray) -> np.ndarray:
    """The windows of the saturated span (10% to 50% of the turns done)."""
    lo, hi = r.throughput_span_s
    inside = (r.window_end_s - r.window_s >= lo) & (r.window_end_s <= hi)
    return series[inside]


def _cv(x: np.ndarray) -> float:
    return float(np.std(x) / np.mean(x))


def test_a_steady_run_draws_a_curve(run: tuple[Scenario, SimResult]) -> None:
    _, r = run
    raw = _steady(r, r.turns_done / r.window_length_s)
    smooth = smoothed_rate(r)
    steady = _steady(r, smooth.turns_per_s)
    assert raw.size >= 10 and steady.size == raw.size
    # The raw windows are a comb (turns finish in waves: 9% spread on the default); the
    # averaged line is not.
    assert _cv(raw) > 0.05, _cv(raw)
    assert _cv(steady) < min(0.05, _cv(raw) / 2), (_cv(steady), _cv(raw))
    # The window: odd (centred), at least the stated turn cycles, in whole windows.
    cycle_s = float(np.mean(r.in_flight)) / (r.turns_done.sum() / r.window_length_s.sum())
    assert smooth.windows % 2 == 1
    assert smooth.span_s >= min(AVERAGE_CYCLES * cycle_s, 0.2 * r.window_end_s.size * r.window_s)
    # The average keeps the run's turns: the mean rate over the steady span is unchanged.
    assert abs(float(np.mean(steady)) / float(np.mean(raw)) - 1) < 0.05


def test_the_chart_states_its_window(run: tuple[Scenario, SimResult]) -> None:
    sc, r = run
    svg = simulate_svg(sc, r)
    said = re.search(r'class="window"[^>]*>([^<]*)<', svg)
    assert said is not None
    smooth = smoothed_rate(r)
    assert f"{smooth.windows} windows of 10.0 s" in said.group(1)
    assert "nan" not in svg and "inf" not in svg
