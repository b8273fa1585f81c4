"""Parameter sweeps: a grid over profile fields and over P, D and agents.

Axes named ``P``, ``D`` and ``agents`` are evaluated together by the vectorized closed form
(:func:`saturated`), in chunks of a fixed number of points so memory does not grow with the
grid. Any other axis is a numeric profile field ``KIND.FIELD``; each combination of their values
is applied as a ``--set`` override (validated by the profile schema) and its P x D x agents
block evaluated in chunks. Within a chunk each P/D pair (a capacity set) is assembled and
solved once and spread over its agents. Per point: throughput, decode-path share, bottleneck,
GPUs, and the offline JCT of ``agents`` agents (the larger of the throughput and critical-path
bounds)."""

from __future__ import annotations

import contextlib
import functools
import math
import pickle
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from dualpath_plan import plausible
from dualpath_plan.errors import InfeasibleError, PlanInputError, printable
from dualpath_plan.formatting import plain
from dualpath_plan.memo import KeyedMemo
from dualpath_plan.outcomes.objectives import (
    OBJECTIVE_TABLE,
    Objective,
    lower_is_better,
    objective_of,
)
from dualpath_plan.outcomes.online import APS_LIMITS, online_aps, online_queue
from dualpath_plan.outcomes.read_choice import choose_reads, read_table
from dualpath_plan.outcomes.serving import (
    OutcomeMode,
    Saturated,
    ServingConfig,
    closed_cycle,
    evaluate_mode,
    light_load,
    offline_drain_s,
    offline_jct_s,
    operating_rate,
    saturated,
    saturated_each,
)
from dualpath_plan.physics.engines import check_weights_fit, weights_fit, weights_key
from dualpath_plan.physics.links import LINK_INDEX
from dualpath_plan.physics.model import FloatArray
from dualpath_plan.profiles.registry import Overrides, Registry
from dualpath_plan.profiles.schemas import (
    KINDS,
    GpuProfile,
    ModelProfile,
    NodeProfile,
    numeric_bounds,
    schema_for,
)
from dualpath_plan.scenario.assemble import assemble
from dualpath_plan.scenario.bundle import ProfileCache, Scenario
from dualpath_plan.scenario.feasibility import check_decode_fits
from dualpath_plan.scenario.spec import MAX_AGENTS, MAX_SIDE_NODES, ScenarioSpec
from dualpath_plan.solvers.closed_form import mask_names

if TYPE_CHECKING:  # a sweep in one process loads no executor (tests/test_cold_start.py)
    from dualpath_plan.outcomes.executor import Executor

VECTOR_AXES = ("P", "D", "agents")
MAX_AXIS_POINTS = 10_000_000
# Values of one profile-field axis, at most: each value rebuilds the scenario from its
# profiles (milliseconds), where P, D and agents values cost nanoseconds in the closed form.
MAX_PROFILE_AXIS_POINTS = 10_000
# Points of a grid (times its modes) a sweep evaluates unless --max-points raises it: 10^8 is
# about a minute of the closed form on one core, and more than a file of rows anyone reads.
DEFAULT_MAX_POINTS = 100_000_000
# Points of a grid that --max-points cannot raise the limit past: 10^11 is about 17 hours of the
# closed form on one core (a trial's 10^18-point grid was told "raise --max-points to run it").
MAX_GRID_POINTS = 10**11
# Points a sweep with --solver lp evaluates (an LP per P/D pair, about a millisecond each)
# unless --max-points raises it.
DEFAULT_MAX_LP_POINTS = 100_000
# Points evaluated at once, at most (--chunk): a chunk's columns and their temporaries take
# about 135 bytes a point (4.07 GB peak at 30 million), so a chunk of this many stays well
# under 2 GB with the writer's blocks beside it.
MAX_CHUNK = 5_000_000


@dataclass(frozen=True, eq=False)
class Axis:
    name: str  # "P", "D", "agents" or "kind.field"
    # Read-only float64: an axis of up to MAX_AXIS_POINTS values is built and checked by
    # whole-array operations, so a grid too large to run is refused in milliseconds.
    values: FloatArray

    @property
    def is_vector(self) -> bool:
        return self.name in VECTOR_AXES


def parse_values(name: str, spec: str, whole: bool = False) -> FloatArray:
    """``a,b,c`` | ``A:B`` (inclusive integers) | ``A:B:Nlog`` | ``A:B:Nlin``, as a read-only
    float64 array. A log or lin range's points are decimals of RANGE_DIGITS significant digits
    (a log point's own, a lin point's those of the range's larger end, so that 0 is 0), its
    ends the ones given, each point once: 50, not geomspace's 50.00000000000002, so that the
    value written in a row and the summary is the value evaluated. With ``whole`` (an axis of
    whole numbers) a range's points are the nearest whole numbers within it, each once, in
    order (P=1:64:7log is 1, 2, 4, ... 64)."""
    values = _parse_values(name, spec)
    if spec.count(":") == 2 and values.size:
        where = f"--grid {name}={printable(spec, 100)}"  # (a 5,000-digit spec cut short)
        lo, hi = float(values[0]), float(values[-1])
        if whole:
            first, last = math.ceil(lo), math.floor(hi)
            if first > last:
                raise PlanInputError(
                    f"{where}: no whole number from {lo:g} to {hi:g}", field="--grid"
                )
            values = np.clip(np.rint(values), first, last)
        elif values.size > MAX_PROFILE_AXIS_POINTS:
            raise PlanInputError(
                f"{where}: {values.size:,} values of a profile field; at most "
                f"{MAX_PROFILE_AXIS_POINTS:,} (each rebuilds the scenario)",
                field="--grid",
            )
        else:
            values = _decimals(values, log=spec.strip().lower().endswith("log"))
            values[0], values[-1] = lo, hi
        keep = np.ones(values.size, dtype=bool)
        keep[1:] = values[1:] != values[:-1]  # ranges rise: repeats are neighbours
        values = values[keep]
    values.flags.writeable = False
    return values


# Significant digits a log or lin range's points are given to (well above the 9 a sweep's
# file writes, well below the 15 to 17 where a range's rounding shows).
RANGE_DIGITS = 12


def _decimals(v: np.ndarray, log: bool) -> np.ndarray:
    """A range's points as decimals of RANGE_DIGITS significant digits, each the double nearest
    its decimal (Python's correctly rounded formatting and ``round``): a log point to its own
    digits, a lin point to the digits of the range's larger end (to its own, a point that
    should be 0 would stay 1e-17). A profile axis has at most MAX_PROFILE_AXIS_POINTS values."""
    if log:
        return np.array([float(f"{x:.{RANGE_DIGITS - 1}e}") for x in v.tolist()])
    scale = float(np.max(np.abs(v)))
    if scale == 0:
        return np.zeros_like(v)
    places = RANGE_DIGITS - 1 - math.floor(math.log10(scale))
    return np.array([round(x, places) + 0.0 for x in v.tolist()])  # + 0.0: no -0.0


def _parse_values(name: str, spec: str) -> FloatArray:
    where = f"--grid {name}={printable(spec, 100)}"  # (a 5,000-digit spec cut short)
    text = spec.strip()
    if not text:
        raise PlanInputError(f"{where}: no values", field="--grid")

    def number(s: str) -> float:
        try:
            v = float(s)
        except ValueError:
            raise PlanInputError(f"{where}: {s!r} is not a number", field="--grid") from None
        if not math.isfinite(v):
            raise PlanInputError(f"{where}: {s!r} is not finite", field="--grid")
        return v

    if ":" in text:
        parts = text.split(":")
        if len(parts) == 2:
            a, b = number(parts[0]), number(parts[1])
            if a != int(a) or b != int(b):
                raise PlanInputError(
                    f"{where}: A:B is a range of whole numbers; use A:B:Nlin for fractional steps",
                    field="--grid",
                )
            if b < a:
                raise PlanInputError(f"{where}: empty range ({b:g} < {a:g})", field="--grid")
            count = int(b - a) + 1
            if count > MAX_AXIS_POINTS:
                raise PlanInputError(
                    f"{where}: {count:,} points on one axis is too many", field="--grid"
                )
            return np.arange(int(a), int(b) + 1, dtype=np.float64)
        if len(parts) == 3:
            a, b = number(parts[0]), number(parts[1])
            step = parts[2].strip().lower()
            kind = step[-3:] if step.endswith(("log", "lin")) else ""
            count_text = step[:-3] if kind else step
            # (isascii: isdigit takes other scripts' digits, which int() reads as numbers)
            digits = count_text.isascii() and count_text.isdigit()
            if not kind or not digits or not count_text.strip("0"):
                raise PlanInputError(
                    f"{where}: the step must be Nlog or Nlin with N >= 1 points, got {parts[2]!r}",
                    field="--grid",
                )
            if len(count_text.lstrip("0")) > len(str(MAX_AXIS_POINTS)):
                # Counted by its digits: Python converts no integer of more than 4,300 (a
                # ValueError, an internal error), and no count of this many is needed.
                raise PlanInputError(
                    f"{where}: a count of {len(count_text):,} digits is too many points on one "
                    f"axis (at most {MAX_AXIS_POINTS:,})",
                    field="--grid",
                )
            n = int(count_text)
            if n > MAX_AXIS_POINTS:
                raise PlanInputError(
                    f"{where}: {n:,} points on one axis is too many", field="--grid"
                )
            if b < a:
                raise PlanInputError(f"{where}: empty range ({b:g} < {a:g})", field="--grid")
            if n == 1 and a != b:
                raise PlanInputError(
                    f"{where}: one point cannot span {a:g}..{b:g}; use N >= 2", field="--grid"
                )
            if kind == "log" and a <= 0:
                raise PlanInputError(f"{where}: a log range needs A > 0", field="--grid")
            with np.errstate(all="ignore"):
                points = (np.geomspace if kind == "log" else np.linspace)(a, b, n, dtype=np.float64)
            if not np.all(np.isfinite(points)):  # -1e308:1e308 overflows between its ends
                raise PlanInputError(f"{where}: the range's points overflow", field="--grid")
            return points
        raise PlanInputError(
            f"{where}: expected a,b,c or A:B or A:B:Nlog / A:B:Nlin", field="--grid"
        )
    items = text.split(",")
    if not text.strip():
        raise PlanInputError(f"{where}: no values", field="--grid")
    if any(not p.strip() for p in items):
        # 'P=1,,3' lost an item silently (a typo for 1,2,3?).
        raise PlanInputError(f"{where}: an empty item between commas", field="--grid")
    values = [number(p) for p in items]
    seen: set[float] = set()
    for v in values:
        if v in seen:
            # 'P=2,2,2' evaluated one point three times (a range's points are each once).
            raise PlanInputError(f"{where}: {v:g} is given twice", field="--grid")
        seen.add(v)
    return np.asarray(values, dtype=np.float64)


def parse_axis(text: str) -> Axis:
    name, eq, spec = text.partition("=")
    name = name.strip()
    if not eq:
        raise PlanInputError(f"--grid {text!r}: expected NAME=VALUES", field="--grid")
    if name in VECTOR_AXES:
        values = parse_values(name, spec, whole=True)
        # The limits -P, -D and --agents have (beyond them a count is no longer an exact
        # int64: 1e19 nodes came out negative).
        top = MAX_AGENTS if name == "agents" else MAX_SIDE_NODES
        bad = np.flatnonzero((values < 1) | (values > top) | (values != np.floor(values)))
        if bad.size:
            raise PlanInputError(
                f"--grid {name}: expected whole numbers from 1 to {top:,}, got "
                f"{values[bad[0]]:.12g}",
                field="--grid",
            )
        return Axis(name, values)
    kind, dot, fname = name.partition(".")
    if not dot or kind not in KINDS:
        raise PlanInputError(
            f"--grid {name!r}: expected P, D, agents or KIND.FIELD with KIND "
            f"one of {', '.join(KINDS)}",
            field="--grid",
        )
    fields = schema_for(kind).model_fields
    if fname not in fields:
        import difflib

        close = difflib.get_close_matches(fname, list(fields), n=1, cutoff=0.6)
        hint = f"; did you mean '{kind}.{close[0]}'?" if close else ""
        raise PlanInputError(f"--grid: {kind} has no field '{fname}'{hint}", field="--grid")
    annotation = str(fields[fname].annotation)
    if not any(t in annotation for t in ("float", "int")):
        raise PlanInputError(f"--grid: {kind}.{fname} is not numeric", field="--grid")
    whole = "int" in annotation and "float" not in annotation
    values = parse_values(name, spec, whole=whole)
    if whole:
        fractional = values[values != np.floor(values)]
        if fractional.size:
            raise PlanInputError(
                f"--grid {name}: a whole-number field, got {fractional[0]:g}", field="--grid"
            )
    # The field's own range and what the quantity plausibly is (plausible.py: the slip named,
    # "10: did you mean 0.1 (percent typed for a share of 1)?"), said before any work (and
    # naming --grid, not the profile).
    bounds = numeric_bounds(schema_for(kind), fname)
    low, high = bounds if bounds is not None else (-math.inf, math.inf)
    ok = (low <= values) & (values <= high)
    quantity = plausible.QUANTITIES.get(name)
    if quantity is not None:
        ok &= (quantity.low <= values) & (values <= quantity.high)
    for v in values[~ok][:1].tolist():
        inside = low <= v <= high
        why = plausible.problem(name, v) if inside else plausible.explained(name, v)
        if why is not None:
            raise PlanInputError(f"--grid {name}: {why}", field="--grid")
        if not inside:
            raise PlanInputError(
                f"--grid {name}: {plain(v)} is outside the field's range "
                f"[{plain(low)}, {plain(high)}]",
                field="--grid",
            )
    return Axis(name, values)


# What the best points maximize (jct_s: minimize): a column of every point. Not cost: a sweep
# prices no point (outcomes/cost.py is recommend's and size's), so --objective cost ranked by a
# column that is not there (a KeyError, found in a trial).
OBJECTIVES: tuple[Objective, ...] = tuple(o for o in OBJECTIVE_TABLE if o != "cost")


@dataclass
class ModeSummary:
    """One mode's part of a sweep: its points, the feasible ones, its best points by the
    objective (ties broken by the point's place in the grid, its ``point`` number, so the
    summary does not depend on the chunk size) and, where some point is infeasible, why the
    first one is."""

    points: int = 0
    feasible: int = 0
    best: list[dict[str, float | str]] = field(default_factory=list)
    infeasible_reason: str | None = None
    infeasible_point: int = -1


@dataclass
class SweepSummary:
    """Points, feasible points, how often each set of binding links binds, and per mode its
    best points by the objective."""

    objective: str = "throughput_per_gpu"
    points: int = 0
    feasible: int = 0
    binding_counts: dict[str, int] = field(default_factory=dict)
    modes: dict[str, ModeSummary] = field(default_factory=dict)
    top: int = 1

    def add(self, rows: dict[str, np.ndarray], reason: Callable[[int], str] | None = None) -> None:
        """A chunk's points (point numbers rising along it). Why a point is infeasible comes
        from ``rows["reason"]``, or from ``reason(i)`` for the chunk's point i when the rows
        have none (asked only for a mode's first infeasible point)."""
        mode, candidates = self.tally(rows, reason)
        part = self.modes[mode]
        # A point ranked at or below the last of ``top`` points kept would be dropped (ties
        # keep the earlier point): its row is not built.
        last = self._key(part.best[-1]) if len(part.best) >= self.top else None
        for rank, i in candidates:
            if last is not None and rank >= last:
                continue
            part.best.append(best_row(rows, i))
        part.best = sorted(part.best, key=self._key)[: self.top]

    def _key(self, row: dict[str, float | str]) -> tuple[float, int]:
        """A best point's rank: its objective (lower ranks first) and its point number."""
        sign = 1.0 if lower_is_better(self.objective) else -1.0  # type: ignore[arg-type]
        return sign * float(row[self.objective]), int(row["point"])

    def tally(
        self, rows: dict[str, np.ndarray], reason: Callable[[int], str] | None = None
    ) -> tuple[str, list[tuple[tuple[float, int], int]]]:
        """A chunk's points counted (``add``'s, but its best rows) and its mode, with the
        chunk's candidates for the best: the ranks (``_key``) and indices of the points
        ranked above its ``top``-th and the first at it, in that order (any of the mode's
        best points in the end is one of its chunk's candidates)."""
        objective = self.objective
        mode = str(np.asarray(rows["mode"])[()])
        part = self.modes.setdefault(mode, ModeSummary())
        ok = rows["feasible"].astype(bool, copy=False)
        n_ok = int(np.count_nonzero(ok))
        self.points += ok.size
        self.feasible += n_ok
        part.points += ok.size
        part.feasible += n_ok
        self._count_binding(rows, ok)
        if n_ok < ok.size:
            first = int(np.argmin(ok))  # points rise within a chunk
            point = int(rows["point"][first])
            if part.infeasible_point < 0 or point < part.infeasible_point:
                part.infeasible_point = point
                part.infeasible_reason = (
                    str(rows["reason"][first]) if "reason" in rows or reason is None
                    else reason(first)
                )  # fmt: skip
        if not n_ok:
            return mode, []
        sign = 1.0 if lower_is_better(objective) else -1.0  # type: ignore[arg-type]  # lower rank is better
        rank = np.where(ok, sign * rows[objective], np.inf)
        n_best = min(self.top, rank.size)
        if n_best == 1:  # the least, as partition has it (NaN last): one pass, no copy
            threshold = np.fmin.reduce(rank)
        else:
            threshold = np.partition(rank, n_best - 1)[n_best - 1]
        # The chunk's best: every point ranked above the threshold (fewer than top) and the
        # first points at it (ties go to the lower point number, and points rise). None is
        # above the least.
        better = np.flatnonzero((rank < threshold) & ok) if n_best > 1 else np.zeros(0, int)
        tied = np.flatnonzero((rank == threshold) & ok)[: max(self.top - better.size, 0)]
        return mode, [
            ((float(rank[i]), int(rows["point"][i])), i)
            for i in np.concatenate([better, tied]).tolist()
        ]

    def merge(self, other: SweepSummary) -> None:
        """Add the summary of later chunks of the grid (a parallel sweep's task): the same
        summary as adding their rows chunk by chunk. Counts add; the labels and modes first
        met in ``other`` follow this one's; a mode's best points are the best of both, ties
        to the lower point number (what ``add`` keeps: every point's key differs by its
        number); its first infeasible point the lower of the two."""
        self.points += other.points
        self.feasible += other.feasible
        for label, count in other.binding_counts.items():
            self.binding_counts[label] = self.binding_counts.get(label, 0) + count
        for mode, theirs in other.modes.items():
            part = self.modes.setdefault(mode, ModeSummary())
            part.points += theirs.points
            part.feasible += theirs.feasible
            if theirs.infeasible_point >= 0 and (
                part.infeasible_point < 0 or theirs.infeasible_point < part.infeasible_point
            ):
                part.infeasible_point = theirs.infeasible_point
                part.infeasible_reason = theirs.infeasible_reason
            part.best = sorted(part.best + theirs.best, key=self._key)[: self.top]

    def _count_binding(self, rows: dict[str, np.ndarray], ok: np.ndarray) -> None:
        """How often each set of binding links binds, over the feasible points: counted once
        per P/D pair (``_pair``, non-decreasing) weighted by its points."""
        mask = rows["binding_mask"]
        if "_pair" in rows and mask.size:
            pair = rows["_pair"]
            starts = np.flatnonzero(pair[1:] != pair[:-1]) + 1
            if starts.size + 1 == pair.size:  # a point per pair: every weight is 1
                found = _weighted_counts(mask[ok], None)
            else:
                starts = np.concatenate([[0], starts])
                weights = np.diff(np.append(starts, pair.size))
                keep = ok[starts]  # feasibility is the pair's
                found = _weighted_counts(mask[starts][keep], weights[keep])
        else:
            found = _weighted_counts(mask[ok], None)
        for m, count in found:
            label = binding_label(m)
            self.binding_counts[label] = self.binding_counts.get(label, 0) + count

    @property
    def best(self) -> list[dict[str, float | str]]:
        """Every mode's best points, mode by mode."""
        return [r for part in self.modes.values() for r in part.best]


# Distinct binding masks of a chunk counted one at a time, at most: a chunk binds through a
# handful of link sets, and peeling each off is a few passes where a sort of the chunk is many.
PEELED_MASKS = 16


def _weighted_counts(values: np.ndarray, weights: np.ndarray | None) -> list[tuple[int, int]]:
    """Each distinct value, ascending, with its total weight (None: a weight of 1 each)."""
    found: dict[int, int] = {}
    rest, w = values, weights
    for _ in range(PEELED_MASKS):
        if rest.size == 0:
            break
        same = rest == rest[0]
        found[int(rest[0])] = int(np.count_nonzero(same) if w is None else np.sum(w[same]))
        rest = rest[~same]
        w = None if w is None else w[~same]
    if rest.size:  # many distinct values: by sorting
        masks, inverse = np.unique(rest, return_inverse=True)
        counts = np.bincount(np.ravel(inverse), weights=w, minlength=masks.size)
        found |= {int(m): int(n) for m, n in zip(masks, counts, strict=True)}
    return sorted(found.items())


def _scalar(v: object) -> float | str:
    if isinstance(v, np.generic):
        return v.item()  # type: ignore[return-value]
    return v  # type: ignore[return-value]


def grid_size(axes: list[Axis]) -> int:
    return math.prod(len(a.values) for a in axes)


def check_grid(axes: list[Axis], modes: int, max_points: int | None, solver: str) -> int:
    """The number of points a sweep will evaluate (grid x modes), refused beyond the limit:
    ``max_points``, or the default for the solver. Axes named twice are an error."""
    names = [a.name for a in axes]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise PlanInputError(f"--grid names the axis {twice[0]} twice", field="--grid")
    for a in axes:
        if not a.is_vector and len(a.values) > MAX_PROFILE_AXIS_POINTS:
            raise PlanInputError(
                f"--grid {a.name}: {len(a.values):,} values of a profile field; at most "
                f"{MAX_PROFILE_AXIS_POINTS:,} (each rebuilds the scenario)",
                field="--grid",
            )
    default = DEFAULT_MAX_LP_POINTS if solver == "lp" else DEFAULT_MAX_POINTS
    limit = default if max_points is None else max_points
    if not 1 <= limit <= MAX_GRID_POINTS:
        raise PlanInputError(
            f"expected 1 to {MAX_GRID_POINTS:,} (about 17 hours of the closed form on one core), "
            f"got {limit:,}",
            field="--max-points",
        )
    total = grid_size(axes) * modes
    if total > MAX_GRID_POINTS:
        raise PlanInputError(
            f"the grid has {total:,} points (axes x modes), more than any sweep evaluates "
            f"({MAX_GRID_POINTS:,}, about 17 hours of the closed form on one core): fewer "
            "points per axis or fewer axes",
            field="--grid",
        )
    if total > limit:
        raise PlanInputError(
            f"the grid has {total:,} points (axes x modes), more than {limit:,}; "
            "raise --max-points to run it",
            field="--max-points" if max_points is not None else "--grid",
        )
    return total


def run_sweep(
    registry: Registry,
    spec: ScenarioSpec,
    axes: list[Axis],
    modes: tuple[OutcomeMode, ...],
    cfg: ServingConfig,
    *,
    objective: str = "throughput_per_gpu",
    chunk: int = 200_000,
    on_chunk: Callable[[dict[str, np.ndarray]], None] | None = None,
    progress: Callable[[int], None] | None = None,
    top: int = 1,
    solver: str = "closed",
    max_points: int | None = None,
    aps: bool = False,
    executor: Executor | None = None,
) -> SweepSummary:
    """Evaluate every grid point; ``on_chunk`` receives each chunk's columns (to write them),
    ``progress`` the number of points done. Returns the summary, per mode. ``aps``: also each
    point's online APS under the SLOs and what limits it (the model ``size`` uses; always with
    the APS objective), computed once per P/D pair: it does not depend on the agents.

    ``executor`` (outcomes/executor.py; None: in this process): where the chunks are
    evaluated, in tasks of consecutive chunks of at most ``chunk`` points together, at most
    ``TASKS_AHEAD`` per worker in flight; the chunks come back, and reach ``on_chunk`` and the
    summary, in the grid's order, so the result is the same whatever runs them (each task
    evaluates its chunks as this process would, and a task's summary of its chunks merges
    into the whole one's exactly: ``SweepSummary.merge``). Closes the executor."""
    try:
        job = _sweep_job(
            registry, spec, axes, modes, cfg, objective, chunk, on_chunk is not None, top,
            solver, max_points, aps,
        )  # fmt: skip
        if executor is not None:  # the caller's: loaded already
            from dualpath_plan.outcomes.executor import InProcess

            if not isinstance(executor, InProcess):
                return _sweep_on(executor, job, on_chunk, progress)
            executor.close(cancel=False)  # nothing to release: one process
        return _sweep_here(job, on_chunk, progress)
    except BaseException:  # bad input, an interrupt: the workers ended
        if executor is not None:
            executor.close(cancel=True)
        raise


def _sweep_job(
    registry: Registry,
    spec: ScenarioSpec,
    axes: list[Axis],
    modes: tuple[OutcomeMode, ...],
    cfg: ServingConfig,
    objective: str,
    chunk: int,
    write: bool,
    top: int,
    solver: str,
    max_points: int | None,
    aps: bool,
) -> SweepJob:
    """``run_sweep``'s arguments checked, as the job its chunks are evaluated from."""
    objective = objective_of(objective, OBJECTIVES)
    aps = aps or objective == "aps"
    check_grid(axes, len(modes), max_points, solver)
    if not 1 <= chunk <= MAX_CHUNK:
        raise PlanInputError(
            f"expected a chunk of 1 to {MAX_CHUNK:,} points, got {chunk:,} (a chunk's columns "
            "are in memory at once: about 150 bytes a point)",
            field="--chunk",
        )
    p_vals, d_vals, a_vals = _vector_values(axes, spec, cfg)
    if spec.storage_capacity is not None or spec.storage_nodes is not None:
        spec = _store_agents(registry, spec, a_vals)
    return SweepJob(
        registry=registry,
        spec=spec,
        profile_axes=tuple(a for a in axes if not a.is_vector),
        p_vals=p_vals,
        d_vals=d_vals,
        a_vals=a_vals,
        modes=modes,
        cfg=cfg,
        chunk=chunk,
        solver=solver,
        aps=aps,
        write=write,
        # Without rows to write, the summary ranks by its objective and reads the other
        # columns only for a best point it keeps: the JCT (a Newton solve per point) waits
        # until then.
        lazy_jct=not write and objective not in ("jct_s",),
        objective=objective,
        top=top,
    )


def _sweep_here(
    job: SweepJob,
    on_chunk: Callable[[dict[str, np.ndarray]], None] | None,
    progress: Callable[[int], None] | None,
) -> SweepSummary:
    """The sweep in this process, chunk by chunk."""
    summary = SweepSummary(objective=job.objective, top=job.top)
    state = _SweepState(job)
    for batch in job.tasks():
        state.prepare(batch)
        for item in batch:
            for rows, reason in state.rows(item):
                summary.add(rows, reason)
                if on_chunk is not None:
                    on_chunk(rows)
            if progress is not None:
                progress(job.item_points(item))
    return summary


def _sweep_on(
    executor: Executor,
    job: SweepJob,
    on_chunk: Callable[[dict[str, np.ndarray]], None] | None,
    progress: Callable[[int], None] | None,
) -> SweepSummary:
    """The sweep's tasks on ``executor``, their results taken in the grid's order."""
    from dualpath_plan.outcomes.executor import run_ordered

    summary = SweepSummary(objective=job.objective, top=job.top)
    payload = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
    token = uuid.uuid4().hex
    args = ((token, payload, items) for items in job.tasks())
    window = max(1, TASKS_AHEAD * executor.workers)
    # The stream closes the executor when it ends (its workers cancelled where the sweep
    # stops early); run_sweep, where it stops before the stream began.
    stream = run_ordered(executor, sweep_task, args, job.describe, window)
    with contextlib.closing(stream) as done:
        for points, result in done:
            if isinstance(result, PlanInputError):  # the first bad combination, as alone
                raise result
            if isinstance(result, SweepSummary):  # the task's counts and its best rows
                summary.merge(result)
            else:
                for rows in result:
                    summary.add(rows)
                    if on_chunk is not None:
                        on_chunk(rows)
            if progress is not None:
                progress(points)
    return summary


def _vector_values(
    axes: list[Axis], spec: ScenarioSpec, cfg: ServingConfig
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The P, D and agents values of a grid: its axes', or the spec's one value each."""
    vector = {a.name: np.asarray(a.values) for a in axes if a.is_vector}
    return (
        vector.get("P", np.asarray([float(spec.prefill_nodes)])),
        vector.get("D", np.asarray([float(spec.decode_nodes)])),
        vector.get("agents", np.asarray([float(cfg.agents)])),
    )


def sweep_tasks(axes: list[Axis], spec: ScenarioSpec, cfg: ServingConfig, chunk: int) -> int:
    """The tasks a parallel sweep of this grid runs (``SweepJob.tasks``): with one, workers
    would only add their start to the sweep's time. A chunk ``run_sweep`` refuses counts as
    one task (its refusal is the sweep's)."""
    if not 1 <= chunk <= MAX_CHUNK:
        return 1
    combos = math.prod(a.values.size for a in axes if not a.is_vector)
    block = math.prod(v.size for v in _vector_values(axes, spec, cfg))
    chunks = -(-block // chunk)
    if chunks > 1:  # a task per chunk
        return combos * chunks
    per_task = max(1, min(COMBINATIONS_PER_TASK, chunk // block))
    return -(-combos // per_task)


# Tasks in flight per worker of a parallel sweep: one running and one waiting, so that a
# worker never idles while the parent takes a result in; each holds at most a chunk's points
# (about 150 bytes a point, pickled) until the grid's order reaches it.
TASKS_AHEAD = 2

# Combinations of profile values in one task at most: each builds its scenario and assembles
# its block, about 2.5 ms of Python whatever the block's size (bench/bench_sweep.py's profile
# case), so 16 are a few tens of milliseconds, long beside what a task costs to send.
COMBINATIONS_PER_TASK = 16

# Points of the combinations of profile values whose closed forms are solved as one stack at
# most (``_SweepState.prepare``, within a task of at most ``COMBINATIONS_PER_TASK``): all 16
# of a task over a 100 x 100 grid, which pays the stack's Python once where each paid it (a
# few hundred NumPy calls; a stack of 6 gained nothing measurable, 16 about 10%), and bounds
# its work arrays (some 30 of the stack's size, ``closed_form._scratch``) to about 60 MB (the
# profile grid of bench/bench_sweep.py: peak RSS 65 -> 90 MB).
STACK_POINTS = 1 << 18

# A work item of a sweep: a combination of profile values (its index in the grid's order) and
# the start of one chunk of its P x D x agents block.
_Item = tuple[int, int]


@dataclass(frozen=True, eq=False)
class SweepJob:
    """What every chunk of one sweep is evaluated from, in this process or pickled to a
    worker (some kilobytes: the registry with its overrides and the profiles it has read; a
    profile it has not read yet it reads where it runs, from the same path)."""

    registry: Registry
    spec: ScenarioSpec
    profile_axes: tuple[Axis, ...]
    p_vals: np.ndarray
    d_vals: np.ndarray
    a_vals: np.ndarray
    modes: tuple[OutcomeMode, ...]
    cfg: ServingConfig
    chunk: int
    solver: str
    aps: bool
    write: bool
    lazy_jct: bool
    objective: str
    top: int

    @property
    def shape(self) -> tuple[int, int, int]:
        return (len(self.p_vals), len(self.d_vals), len(self.a_vals))

    @property
    def block(self) -> int:
        """Points of one combination of profile values: its P x D x agents block."""
        return math.prod(self.shape)

    def items(self) -> Iterator[_Item]:
        """Every chunk of the grid, in its order: combinations, then chunks of each block."""
        combos = math.prod(a.values.size for a in self.profile_axes)
        for c in range(combos):
            for start in range(0, self.block, self.chunk):
                yield c, start

    def item_points(self, item: _Item) -> int:
        return min(self.chunk, self.block - item[1])

    def tasks(self) -> Iterator[list[_Item]]:
        """The items in runs of consecutive ones, each run at most ``chunk`` points (a task's
        rows take no more memory than a chunk) and at most ``COMBINATIONS_PER_TASK``
        combinations (a grid of many small blocks still spreads over the workers)."""
        run: list[_Item] = []
        points = 0
        for item in self.items():
            n = self.item_points(item)
            if run and (points + n > self.chunk or item[0] - run[0][0] >= COMBINATIONS_PER_TASK):
                yield run
                run, points = [], 0
            run.append(item)
            points += n
        if run:
            yield run

    def index(self, c: int) -> list[int]:
        """Combination ``c``'s value on each profile axis, by its place (the last fastest)."""
        sizes = [a.values.size for a in self.profile_axes]
        return [int(i) for i in np.unravel_index(c, sizes)] if sizes else []

    def combination(self, c: int) -> list[float]:
        """The profile values of combination ``c``, one per profile axis."""
        return [a.values[i] for a, i in zip(self.profile_axes, self.index(c), strict=True)]

    def describe(self, arg: tuple[str, bytes, list[_Item]]) -> str:
        """A task's inputs, as a failure names them: its first and last combinations of
        profile values and, where it is part of a block, the block's points it evaluates
        (counted from 0 in the P x D x agents order, agents fastest)."""
        items = arg[2]
        first, last = self.combination(items[0][0]), self.combination(items[-1][0])
        where = [" ".join(f"{a.name}={_fmt(v)}" for a, v in zip(self.profile_axes, combo,
                 strict=True)) for combo in (first, last)]  # fmt: skip
        span = where[0] if where[0] == where[1] else f"{where[0]} to {where[1]}"
        start, end = items[0][1], items[-1][1] + self.item_points(items[-1]) - 1
        if len(items) == 1 and (start, end) != (0, self.block - 1):
            block = f"points {start:,} to {end:,} of the {self.block:,} of P x D x agents"
            span = f"{span}, {block}" if span else block
        return f"sweep, {span}" if span else "sweep"


class _SweepState:
    """What evaluating a sweep's chunks keeps from chunk to chunk in one process: each profile
    axis value's parsed assignment, the profiles validated, the block's chunk layouts (one per
    chunk, the same for every combination), the reasons already found and the scenario of
    the combination last built."""

    def __init__(self, job: SweepJob) -> None:
        self.job = job
        # Each value's assignment parsed once; per combination the registry takes their merge
        # and the scenario re-validates only the profiles whose kind's overrides changed.
        self.sets = [
            [Overrides.parse([f"{a.name}={_fmt(v)}"]) for v in a.values] for a in job.profile_axes
        ]
        self.profiles = ProfileCache()
        self.layouts: dict[int, _Chunk] = {}
        self.reasons = _Reasons()
        self.built: tuple[int, Scenario] | None = None
        # The scenarios of the batch ``prepare`` built, and the optimum of each (combination,
        # mode) it solved at once, until the combination's chunks read them.
        self.scenarios: dict[int, Scenario] = {}
        self.solved: dict[tuple[int, str], Saturated] = {}

    def scenario(self, c: int) -> Scenario:
        """The scenario of combination ``c``, built once while its chunks are evaluated."""
        if self.built is not None and self.built[0] == c:
            return self.built[1]
        if c in self.scenarios:
            return self.scenarios[c]
        job = self.job
        overrides = job.registry.overrides
        for axis_sets, i in zip(self.sets, job.index(c), strict=True):
            overrides = overrides.merged(axis_sets[i])
        reg = replace(job.registry, overrides=overrides)
        try:
            sc = Scenario.from_spec(reg, job.spec, self.profiles)
        except PlanInputError as exc:
            raise _at_combination(exc, list(job.profile_axes), job.combination(c)) from None
        self.built = (c, sc)
        return sc

    def prepare(self, items: list[_Item]) -> None:
        """Solve the closed form of the items' combinations that are a whole block each (a
        chunk of all its P x D x agents points) at once, per mode (``saturated_each``: each
        as it is alone, bit for bit), for ``rows`` to read: over a grid of 10^4 clusters a
        combination's own solve is half Python, a few hundred NumPy calls, which the stack
        makes once for all of them. The batch stops at the first combination whose scenario
        is bad input, and a batch that fails to assemble or solve is left unsolved: each
        item then evaluates itself, and fails where the sweep reaches it, as it did."""
        job = self.job
        self.solved.clear()
        self.scenarios.clear()
        per_stack = min(STACK_POINTS, job.chunk) // job.block
        if per_stack < 2:
            return
        combos: list[int] = []
        scenarios: list[Scenario] = []
        for c, _ in items:
            try:
                sc = self.scenario(c)
            except PlanInputError:
                break
            self.scenarios[c] = sc
            if sc.store is not None and sc.read_share is None:
                continue  # each pair reads its own share (``_by_reads``)
            combos.append(c)
            scenarios.append(sc)
        if len(combos) < 2:
            return
        _, P, D, _, _, grid = self.layout(0)
        P, D = _clusters(P, D, _grid_used(grid, job.solver, job.aps))
        try:
            for k in range(0, len(combos), per_stack):
                some = slice(k, k + per_stack)
                for mode in job.modes:
                    found = saturated_each(scenarios[some], mode, P, D)
                    self.solved.update(zip(((c, mode) for c in combos[some]), found, strict=True))
        except (PlanInputError, ValueError):  # each item evaluates itself, raising in order
            self.solved.clear()

    def layout(self, start: int) -> _Chunk:
        """The layout of the chunk from ``start``: kept where a block is one chunk (the same
        for every combination), laid out again each time otherwise (a large block's layouts
        would take the memory its chunks bound)."""
        found = self.layouts.get(start)
        if found is None:
            job = self.job
            found = _chunk(
                start, job.item_points((0, start)), job.shape, job.p_vals, job.d_vals, job.a_vals
            )
            if job.block <= job.chunk:
                self.layouts[start] = found
        return found

    def rows(
        self, item: _Item
    ) -> Iterator[tuple[dict[str, np.ndarray], Callable[[int], str] | None]]:
        """One chunk's rows per mode, and (with no rows to write) how to say why its point i
        is infeasible: the summary asks that of a mode's first infeasible point only."""
        job = self.job
        c, start = item
        sc = self.scenario(c)
        idx, P, D, local, agents, grid = self.layout(start)
        combo = job.combination(c)
        modes = job.modes
        for k, mode in enumerate(modes):
            rows = _evaluate_chunk(
                sc, mode, job.cfg, P, D, agents, job.solver, local, job.aps, grid, job.lazy_jct,
                self.solved.pop((c, mode), None),
            )  # fmt: skip
            rows["point"] = (c * len(modes) + k) * job.block + idx
            for a, v in zip(job.profile_axes, combo, strict=True):
                rows[a.name] = np.full(idx.size, v)
            if job.write:
                rows["reason"] = _reasons(
                    sc, mode, job.cfg, P, D, local, rows["feasible"], self.reasons,
                    rows["_assembled"],
                )  # fmt: skip
                yield rows, None
            else:
                at = functools.partial(_point_reason, sc, mode, job.cfg, P, D, local, self.reasons)
                yield rows, at


# A worker's state for the sweep it last ran a task of (by the sweep's token): the profiles it
# read and the layouts it laid out serve that sweep's next task on the same worker.
_WORKER_STATE: dict[str, _SweepState] = {}


_TaskResult = list[dict[str, np.ndarray]] | SweepSummary | PlanInputError


def sweep_task(arg: tuple[str, bytes, list[_Item]]) -> tuple[int, _TaskResult]:
    """One task of a parallel sweep, run on a worker: the points of its chunks' blocks (as
    ``progress`` counts them, per mode) and its chunks' rows (a sweep with ``on_chunk``) or
    their summary with its best rows (one without: a best row's offline JCT is its point's
    alone, ``_LazyColumn``, so a worker builds its few best rows as the sweep in one process
    does), or the bad input a combination of profile values makes (returned, not raised: the
    parent raises the first in the grid's order, as the sweep in one process does, and bad
    input is not a failed task to retry)."""
    token, payload, items = arg
    state = _WORKER_STATE.get(token)
    if state is None:
        _WORKER_STATE.clear()
        state = _WORKER_STATE[token] = _SweepState(pickle.loads(payload))
    job = state.job
    points = sum(job.item_points(item) for item in items)
    try:
        state.prepare(items)
        if job.write:
            return points, [rows for item in items for rows, _ in state.rows(item)]
        part = SweepSummary(objective=job.objective, top=job.top)
        for item in items:
            for rows, reason in state.rows(item):
                part.add(rows, reason)
        return points, part
    except PlanInputError as exc:
        return points, exc


def _store_agents(registry: Registry, spec: ScenarioSpec, agents: np.ndarray) -> ScenarioSpec:
    """The spec a sweep with a store of finite size builds its scenarios from: a workload
    profile's resident share rests on the live agents (physics/store.py: the working set is
    theirs), so its agents axis takes one value, the scenarios' own; a trace's hit curve does
    not depend on them."""
    if agents.size > 1 and not registry.workload(spec.workload).trace_file:
        raise PlanInputError(
            "with a store's capacity, a workload profile's KV working set is that of its live "
            "agents, so the agents axis takes one value here (a sweep per agents value)",
            field="--grid agents",
        )
    return spec.with_(agents=int(agents[0])) if agents.size == 1 else spec


# A chunk's layout: its point numbers within the block, its P/D pairs (P, D), each point's
# pair (into them), each point's agents and, where it is whole P rows, its grid (``_grid``).
_Chunk = tuple[
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    np.ndarray,
    tuple[np.ndarray, np.ndarray, np.ndarray] | None,
]


def _chunk(
    start: int,
    size: int,
    shape: tuple[int, int, int],
    p_vals: np.ndarray,
    d_vals: np.ndarray,
    a_vals: np.ndarray,
) -> _Chunk:
    """The layout of the ``size`` points from ``start``; its arrays read-only, as a layout
    may serve every combination of profile values."""
    idx = np.arange(start, start + size)
    # Agents vary fastest: a chunk is a run of P/D pairs, each a capacity set of its own,
    # evaluated once and spread over its agents.
    pair = idx // len(a_vals)
    first = int(pair[0])
    ip, idd = np.unravel_index(np.arange(first, int(pair[-1]) + 1), shape[:2])
    arrays = (idx, p_vals[ip], d_vals[idd], pair - first, a_vals[idx % len(a_vals)])
    for a in arrays:
        a.flags.writeable = False
    return (*arrays, _grid(start, size, shape, p_vals, d_vals, a_vals))


def _grid(
    start: int,
    size: int,
    shape: tuple[int, int, int],
    p_vals: np.ndarray,
    d_vals: np.ndarray,
    a_vals: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The chunk of ``size`` points from ``start`` as a product (P values, D values, agents),
    when it is whole rows of the P x D grid (every D value of its P values) with every agents
    value each: then ``_evaluate_chunk`` assembles per P value and per D value and broadcasts.
    None for a chunk that splits a row or a pair's agents."""
    _, n_d, n_a = shape
    row = n_d * n_a  # points of one P value
    if start % row or (start + size) % row:
        return None
    return p_vals[start // row : (start + size) // row], d_vals, a_vals


def _at_combination(exc: PlanInputError, axes: list[Axis], combo: list[float]) -> PlanInputError:
    """A profile the grid's values make invalid (or a workload its model cannot hold), named
    by those values: the error of the --set they are applied as would name --set and the
    whole profile, not the --grid that set them."""
    where = " ".join(f"{a.name}={_fmt(v)}" for a, v in zip(axes, combo, strict=True))
    what = exc.detail
    if exc.field not in (None, "(profile)"):
        what = f"field '{exc.field}': {what}"
    if exc.source and not exc.source.startswith("--set"):
        what = f"{exc.source}: {what}"
    kind = InfeasibleError if isinstance(exc, InfeasibleError) else PlanInputError
    return kind(f"--grid {where}: {what.removeprefix('Value error, ')}", field="--grid")


def _fmt(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else repr(float(v))


def evaluate_clusters(
    sc: Scenario, mode: OutcomeMode, cfg: ServingConfig, P: np.ndarray, D: np.ndarray, aps: bool
) -> dict[str, np.ndarray]:
    """Each cluster of ``sc`` with P[i] prefill and D[i] decode nodes and ``cfg.agents`` agents,
    evaluated at once: the sweep's columns (``feasible``, ``throughput_turns_per_s``,
    ``jct_s``; with ``aps`` also ``aps`` and its limit, ``aps_limit``, a code of
    ``APS_LIMITS``), each what ``evaluate_mode`` gives the cluster alone (INV-18), NaN (a code
    of -1) where the cluster does not run."""
    P = np.asarray(P, dtype=np.float64)
    D = np.asarray(D, dtype=np.float64)
    return _evaluate_chunk(sc, mode, cfg, P, D, np.full(P.size, float(cfg.agents)), aps=aps)


def _by_reads(
    evaluate_at: Callable[[float], dict[str, np.ndarray]],
    sc: Scenario,
    mode: OutcomeMode,
    P: np.ndarray,
    D: np.ndarray,
    pair: np.ndarray,
    grid: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
) -> dict[str, np.ndarray]:
    """A chunk where the store is of finite size, each P/D pair reading what the mode
    chooses on it (outcomes/read_choice.py, as ``size`` chooses for the cluster alone): the
    pairs' table of throughputs at the read points in one closed-form solve per point, then
    the chunk at each share some pair reads (``evaluate_at``), each point's columns from its
    pair's, and the share each point reads (``read_share``)."""
    assert sc.store is not None
    if grid is not None:  # the pairs of whole P rows: every D value of each P value
        table = read_table(sc, mode, grid[0][:, None], grid[1][None, :])
        table = table.reshape(table.shape[0], -1)
    else:
        table = read_table(sc, mode, P, D)
    shares = choose_reads(table, sc.store.resident)
    found = {share: evaluate_at(share) for share in np.unique(shares).tolist()}
    rows = dict(next(iter(found.values())))
    by_point = shares[pair]
    for share, got in found.items():
        for name, values in got.items():
            # The chunk's own (its mode, its layout) are every share's.
            if name in ("_pair", "_by_pair") or np.ndim(values) == 0:
                continue
            at = shares == share if name == "_assembled" else by_point == share
            if rows[name] is values:
                rows[name] = np.array(values)  # its own, not the first share's
            rows[name][at] = values[at]
    rows["read_share"] = by_point
    return rows


def _evaluate_chunk(
    sc: Scenario,
    mode: OutcomeMode,
    cfg: ServingConfig,
    P: np.ndarray,
    D: np.ndarray,
    agents: np.ndarray,
    solver: str = "closed",
    pair: np.ndarray | None = None,
    aps: bool = False,
    grid: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    lazy_jct: bool = False,
    sat: Saturated | None = None,
) -> dict[str, np.ndarray]:
    """Every point of a chunk. ``P`` and ``D`` are the chunk's P/D pairs and ``pair`` each
    point's pair (an index into them; None: one pair per point): what depends on the cluster
    alone (the assembly, the solver's optimum, the critical path, the online APS) is computed
    once per pair, by the closed form over the whole array or (``solver="lp"``) one LP per pair
    on the same assembly, and spread over the pair's points; the JCT and drain, which depend on
    the agents, per point from that solver's throughput. With ``aps``, also the online APS and
    its limit, from the closed form's optimum (as ``size``; the LP's equals it to 1e-6). The
    rows carry ``_pair``, each point's pair, ``_by_pair``, the columns that are the same
    for every point of a pair (a writer formats them once per pair), and ``_assembled``,
    whether the assembly runs each pair (by pair: ``_reasons``).

    ``lazy_jct``: the JCT and drain columns computed when first read (for a summary alone,
    ranking by another objective: ``_LazyColumn``).

    ``grid`` (P values, D values, agents values; from ``_grid``): the chunk is their product,
    P slowest and agents fastest. The closed form then runs on P as a column and D as a row,
    so that what depends on one side alone (its engines, capacities, loads per capacity) is
    computed per node count and broadcast, and the JCT on (P, D, agents) axes, so that what
    depends on the agents alone is computed per agents value. Every operation is elementwise,
    so each point gets the same numbers, bit for bit, as laid flat.

    ``sat``: the closed form's optimum of the chunk's clusters (as ``_clusters`` lays them
    out), where it was solved already (``_SweepState.prepare``)."""
    if pair is None:
        pair = np.arange(np.size(P))
    grid = _grid_used(grid, solver, aps)
    if sc.store is not None and sc.read_share is None:
        return _by_reads(
            lambda share: _evaluate_chunk(
                sc.reading(share), mode, cfg, P, D, agents, solver, pair, aps, grid
            ),
            sc, mode, P, D, pair, grid,
        )  # fmt: skip
    if sat is None:
        sat = saturated(sc, mode, *_clusters(P, D, grid))
    sol = sat.solution
    t = np.asarray(sol.throughput_turns_per_s, dtype=np.float64)
    x = np.asarray(sol.decode_path_fraction, dtype=np.float64)
    mask = np.asarray(sol.binding_mask)
    assembled = sat.feasible  # the assembly runs the pair: both sides hold a request
    feasible = assembled & np.isfinite(t) & (t > 0)
    if grid is not None:  # (P, D) -> pairs laid flat, P slowest, as P and D are
        t, x, mask, feasible, assembled = (
            np.broadcast_to(v, t.shape).ravel() for v in (t, x, mask, feasible, assembled)
        )
    if solver == "lp":
        from dualpath_plan.solvers.lp import LPProblem, solve_lp  # scipy.optimize: only here

        t, x, mask = t.copy(), x.copy(), mask.copy()
        for k in np.flatnonzero(feasible):
            lp = solve_lp(LPProblem.from_assembly(assemble(sc, mode, P[k], D[k])))
            t[k], x[k] = lp.throughput_turns_per_s, lp.decode_path_fraction
            mask[k] = sum(1 << LINK_INDEX[n] for n in lp.binding())
    counts = sc.turn_demand.trajectory_turns
    gpus = P * sc.prefill_node.gpus_per_node + D * sc.decode_node.gpus_per_node
    per_pair: dict[str, np.ndarray] = {
        "P": P.astype(np.int64),
        "D": D.astype(np.int64),
        "gpus": gpus.astype(np.int64),
        "saturated_turns_per_s": np.where(feasible, t, np.nan),
        "decode_path_fraction": np.where(feasible, x, np.nan),
        "binding_mask": mask,
        "feasible": feasible,
    }
    # The per-agent critical path at light load, per pair (serving.light_load, as size), and
    # as it rises with the agents running (serving.closed_cycle, as size); the online queue's
    # fixed part at no load is the same light load.
    light = light_load(sc, sat)
    if aps:
        on_aps, limit = _online(sc, cfg, sat, light)
        per_pair["aps"] = np.where(feasible, on_aps, np.nan)
        per_pair["aps_limit"] = np.where(feasible, limit, -1)
    if grid is not None:  # pairs in order, each over every agents value
        spread = grid[2].size > 1
    else:
        spread = pair.size != np.size(P) or not np.array_equal(pair, np.arange(pair.size))
    cycle_min = light[1]
    at = cycle_table = closed_cycle(sc, sat, light)
    if grid is not None:
        # On (P, D, agents) axes: the cycle per D value, the agents' terms per agents
        # value; laid flat afterwards, in the points' order.
        shape3 = (grid[0].size, grid[1].size, 1)
        t_pt = t.reshape(shape3)
        cycle_pt = np.reshape(cycle_min, (*np.shape(cycle_min), 1))
        at = at.expand(1)
        agents_pt = grid[2].reshape(1, 1, -1)
        ok = feasible.reshape(shape3)
        gpus_pt = gpus.reshape(shape3)
    else:
        t_pt = t[pair] if spread else t
        cycle_pt = np.broadcast_to(cycle_min, np.shape(t))[pair] if spread else cycle_min
        if spread:
            at = at.select(pair)
        agents_pt = agents
        ok = feasible[pair] if spread else feasible
        gpus_pt = gpus[pair] if spread else gpus
    with np.errstate(divide="ignore", invalid="ignore"):
        # The rate the agents run at (serving.operating_rate, as size), per point.
        rate = np.where(ok, operating_rate(agents_pt, t_pt, at(agents_pt)), np.nan)
        rate_per_gpu = np.ravel(rate / gpus_pt)
        rate = np.ravel(rate)

    @functools.cache
    def offline() -> tuple[np.ndarray, np.ndarray]:
        with np.errstate(divide="ignore", invalid="ignore"):
            jct = np.where(ok, offline_jct_s(agents_pt, t_pt, cycle_pt, counts, at), np.nan)
            drain = np.ravel(offline_drain_s(jct, agents_pt, t_pt, counts))
        return np.ravel(jct), drain

    @functools.cache
    def offline_at(i: int) -> tuple[float, float]:
        """Point i's JCT and drain alone: its cluster's inputs picked out and the same
        elementwise forms on arrays of one (INV-10: each value as in the whole chunk's)."""
        if grid is not None:
            shape = (grid[0].size, grid[1].size)
            p, d, a = (np.array([v]) for v in np.unravel_index(i, (*shape, grid[2].size)))
            k: tuple[np.ndarray, ...] = (p, d)
            agents_i = grid[2][a]
        else:
            shape = np.shape(t)
            k = (pair[i : i + 1],)
            agents_i = agents[i : i + 1]
        t_i, ok_i = t.reshape(shape)[k], feasible.reshape(shape)[k]
        cycle_i = np.broadcast_to(cycle_min, shape)[k]
        with np.errstate(divide="ignore", invalid="ignore"):
            one = offline_jct_s(agents_i, t_i, cycle_i, counts, cycle_table.pick(k, shape))
            jct_i = np.where(ok_i, one, np.nan)
            drain_i = np.asarray(offline_drain_s(jct_i, agents_i, t_i, counts))
        return float(jct_i[0]), float(drain_i[0])

    jct: np.ndarray
    drain: np.ndarray
    if lazy_jct:
        jct = cast(
            np.ndarray, _LazyColumn(lambda: offline()[0], lambda i: offline_at(i)[0], pair.size)
        )
        drain = cast(
            np.ndarray, _LazyColumn(lambda: offline()[1], lambda i: offline_at(i)[1], pair.size)
        )
    else:
        jct, drain = offline()
    rows: dict[str, np.ndarray] = {"mode": np.asarray(mode)}
    for name, values in per_pair.items():
        rows[name] = values[pair] if spread else values
    rows |= {
        "agents": agents.astype(np.int64),
        "throughput_turns_per_s": rate,
        "throughput_per_gpu": rate_per_gpu,
        "jct_s": jct,
        "drain_s": drain,
        "_pair": pair,
        "_by_pair": np.asarray(list(per_pair)),
        "_assembled": assembled,
    }
    return rows


def _grid_used(
    grid: tuple[np.ndarray, np.ndarray, np.ndarray] | None, solver: str, aps: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The chunk's grid where ``_evaluate_chunk`` evaluates on it: the LP and the online
    model take one pair per element."""
    return None if solver != "closed" or aps else grid


def _clusters(
    P: np.ndarray, D: np.ndarray, grid: tuple[np.ndarray, np.ndarray, np.ndarray] | None
) -> tuple[np.ndarray, np.ndarray]:
    """The P and D a chunk's closed form is solved over: its pairs, or over a grid P as a
    column and D as a row."""
    return (P, D) if grid is None else (grid[0][:, None], grid[1][None, :])


class _LazyColumn:
    """A chunk's column computed when read: the offline JCT and drain, which a sweep that
    writes no rows reads only for a best point it keeps (``SweepSummary.add`` builds such a
    row from a few of a chunk's points, and mostly none): a point read by its index is
    computed alone (``at``), the whole column only where it is read as an array."""

    ndim = 1

    def __init__(
        self, compute: Callable[[], np.ndarray], at: Callable[[int], float], size: int
    ) -> None:
        self._compute = compute
        self._at = at
        self.shape = (size,)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int | np.integer) and -self.shape[0] <= index < self.shape[0]:
            return np.float64(self._at(int(index) % self.shape[0]))
        return self._compute()[index]

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        return np.asarray(self._compute(), dtype=dtype)  # type: ignore[call-overload]


def _online(
    sc: Scenario, cfg: ServingConfig, sat: Saturated, light: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """The online APS and its limit code (``APS_LIMITS``) of every P/D pair of ``sat``;
    ``light``: its light load (``serving.light_load``), which the queue's fixed part reads."""
    feasible = sat.feasible & np.isfinite(sat.solution.throughput_turns_per_s)
    feasible &= np.asarray(sat.solution.throughput_turns_per_s) > 0
    on = online_aps(online_queue(sc, sat.assembly, sat.solution, light=light), cfg)
    return np.where(feasible, on.aps, np.nan), np.where(feasible, on.limit, -1)


def _reasons(
    sc: Scenario,
    mode: OutcomeMode,
    cfg: ServingConfig,
    P: np.ndarray,
    D: np.ndarray,
    pair: np.ndarray,
    feasible: np.ndarray,
    said: _Reasons,
    assembled: np.ndarray | None = None,
) -> np.ndarray:
    """Why each infeasible point is infeasible (None for the feasible ones): what ``size``
    says for that cluster (the weights, one request's or one sequence's KV, no turns), once
    per P/D pair (``pair``: each point's, into ``P`` and ``D``; ``assembled``: whether the
    assembly runs each pair, the chunk's ``_assembled``)."""
    out = np.empty(pair.shape, dtype=object)  # None throughout
    bad = np.flatnonzero(~feasible)
    if bad.size:
        out[bad] = said.of_points(sc, mode, cfg, P, D, pair, bad, assembled)
    return out


def _point_reason(
    sc: Scenario,
    mode: OutcomeMode,
    cfg: ServingConfig,
    P: np.ndarray,
    D: np.ndarray,
    pair: np.ndarray,
    said: _Reasons,
    i: int,
) -> str:
    """Why point ``i`` of a chunk is infeasible (``pair``: each point's, into P and D)."""
    k = pair[i : i + 1]
    return str(said.of_pairs(sc, mode, cfg, P[k], D[k])[0])


class _Reasons:
    """Why infeasible P/D pairs of a sweep's scenarios are infeasible: what ``evaluate_mode``
    says for that cluster (``_reason``), its checks in its order (``paths.check_feasible``:
    the prefill side's weights, the decode side's, then the rest), asked of it as little as
    that allows.

    Whether the weights fit on n nodes of a side, and where not the text of
    ``check_weights_fit``, are a function of the side, n, the model and the node and GPU's
    ``weights_key`` (the GPUs per node, the HBM of each): they are kept per node count under
    those (``_WeightsTable``; the model by identity, ``KeyedMemo``), so every scenario of a
    sweep with the same model and key finds them (a grid over any other field finds them
    once), and a chunk's pairs are looked up by whole-array operations. A layout of pairs
    that comes back chunk after chunk (one chunk per combination of profile values) keeps
    each pair's text while the model and keys stay. Any other reason depends on the whole
    scenario: ``evaluate_mode``'s, asked once per mode and pair of the scenario. Everything
    is bounded: ``MAX_MODELS`` models of ``MAX_TABLES`` tables each, of at most
    ``_WeightsTable.MAX_COUNTS`` node counts (about 17 bytes each, and the text of a count
    whose weights do not fit), one layout (a chunk's pairs), ``MAX_PAIRS`` pairs' texts."""

    MAX_MODELS = 4
    MAX_TABLES = 64
    MAX_PAIRS = 1 << 16

    def __init__(self) -> None:
        # Per model: per (side, weights_key), the table of node counts.
        self._tables: KeyedMemo[tuple[object, ...], _WeightsTable] = KeyedMemo(self.MAX_MODELS)
        self._scenario: Scenario | None = None
        self._said: dict[tuple[object, ...], str] = {}  # reasons of self._scenario, by key
        # The last layout (P, D, model, keys) asked for and, once asked again, its weights.
        self._seen: tuple[object, ...] | None = None
        self._layout: tuple[tuple[object, ...], np.ndarray, np.ndarray] | None = None

    def of_points(
        self,
        sc: Scenario,
        mode: OutcomeMode,
        cfg: ServingConfig,
        P: np.ndarray,
        D: np.ndarray,
        pair: np.ndarray,
        bad: np.ndarray,
        assembled: np.ndarray | None = None,
    ) -> np.ndarray:
        """The reason of each point ``bad`` of a chunk (``pair``: each point's, into P and D;
        ``assembled``: whether the assembly runs each pair)."""
        pairs = pair[bad]
        known = self._layout_weights(sc, P, D)
        if known is not None:
            fails, texts = (v[pairs] for v in known)
            if fails.all():
                return texts
            out = texts
            rest = np.flatnonzero(~fails)
            out[rest] = self._by_pairs(sc, mode, cfg, P, D, pairs[rest], assembled)
            return out
        return self._by_pairs(sc, mode, cfg, P, D, pairs, assembled)

    def _by_pairs(
        self,
        sc: Scenario,
        mode: OutcomeMode,
        cfg: ServingConfig,
        P: np.ndarray,
        D: np.ndarray,
        pairs: np.ndarray,
        assembled: np.ndarray | None,
    ) -> np.ndarray:
        """``of_pairs`` of pairs ``pairs`` (into P and D), each distinct one asked once."""
        back = None
        if pairs.size > 1 and not bool(np.all(pairs[1:] > pairs[:-1])):  # one over many points
            pairs, back = np.unique(pairs, return_inverse=True)
        runs = None if assembled is None else assembled[pairs]
        out = self.of_pairs(sc, mode, cfg, P[pairs], D[pairs], runs)
        return out if back is None else out[np.ravel(back)]

    def of_pairs(
        self,
        sc: Scenario,
        mode: OutcomeMode,
        cfg: ServingConfig,
        P: np.ndarray,
        D: np.ndarray,
        assembled: np.ndarray | None = None,
    ) -> np.ndarray:
        """The reason of each infeasible pair (P[k], D[k]), as ``_reason`` gives it
        (``assembled``: whether the assembly runs each pair, None: not known).

        Past the weights, evaluate_mode's next checks are: one request's KV on the decode
        side (``check_decode_fits``, of D alone), then the assembly (where it does not run
        the pair, the prefill side's message: of the mode and P alone), then the turns (of
        the pair). Each is asked once per its key within a scenario where ``assembled`` says
        which applies; without it, evaluate_mode once per mode and pair."""
        fails, out = self.weights(sc, P, D)
        if sc is not self._scenario:
            self._scenario, self._said = sc, {}
        said = self._said
        if len(said) >= self.MAX_PAIRS:
            said.clear()
        for k in np.flatnonzero(~fails).tolist():
            p, d = float(P[k]), float(D[k])
            if assembled is not None and p >= 1 and d >= 1:
                if ("decode", d) not in said:
                    said["decode", d] = _decode_text(sc, int(d))
                if said["decode", d]:
                    out[k] = said["decode", d]
                    continue
                if not assembled[k]:  # the prefill side's message, whatever the decode side
                    key: tuple[object, ...] = ("assembly", mode, p)
                    if key not in said:
                        said[key] = _reason(sc, mode, cfg, int(p), int(d))
                    out[k] = said[key]
                    continue
            key = ("pair", mode, p, d)
            if key not in said:
                said[key] = _reason(sc, mode, cfg, int(p), int(d))
            out[k] = said[key]
        return out

    def weights(self, sc: Scenario, P: np.ndarray, D: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per pair (P[k], D[k]): whether the weights do not fit on a side, and
        ``check_weights_fit``'s text for the first side that way (the prefill side's, then
        the decode side's; None where both fit). A pair without a node on a side is not
        asked: evaluate_mode says so first."""
        fails = np.zeros(P.size, dtype=bool)
        texts = np.empty(P.size, dtype=object)  # None throughout
        todo = np.flatnonzero((P >= 1) & (D >= 1))
        for side, counts, node, gpu in (
            ("prefill", P, sc.prefill_node, sc.prefill_gpu),
            ("decode", D, sc.decode_node, sc.decode_gpu),
        ):
            if todo.size == 0:
                break
            table = self._tables.get(
                (sc.model,),
                (side, *weights_key(node, gpu)),
                functools.partial(_WeightsTable, side),
                self.MAX_TABLES,
            )
            i = table.find(sc.model, node, gpu, counts[todo])
            failing = table.fails[i]
            fails[todo[failing]] = True
            texts[todo[failing]] = table.texts[i[failing]]
            todo = todo[~failing]
        return fails, texts

    def _layout_weights(
        self, sc: Scenario, P: np.ndarray, D: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """``weights`` of every pair of a layout asked for again (the same arrays P and D,
        the same model and keys as the last time; None the first time: a layout or keys
        that change chunk after chunk are looked up pair by infeasible pair instead)."""
        key = (
            P,
            D,
            sc.model,
            *weights_key(sc.prefill_node, sc.prefill_gpu),
            *weights_key(sc.decode_node, sc.decode_gpu),
        )
        if self._layout is not None and _same(self._layout[0], key):
            return self._layout[1], self._layout[2]
        if self._seen is None or not _same(self._seen, key):
            self._seen = key
            return None
        self._layout = (key, *self.weights(sc, P, D))
        return self._layout[1], self._layout[2]


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """The same arrays and profiles (identity) and equal numbers."""
    return all(
        x is y if isinstance(x, np.ndarray | ModelProfile) else x == y
        for x, y in zip(a, b, strict=True)
    )


class _WeightsTable:
    """``check_weights_fit``'s text at node counts of one side of one model and weights key
    ("" where the weights fit), by count ascending: at most ``MAX_COUNTS``, or the counts of
    one request if it has more."""

    MAX_COUNTS = 4096

    def __init__(self, side: str) -> None:
        self.side = side
        self.counts = np.zeros(0)
        self.texts = np.zeros(0, dtype=object)
        self.fails = np.zeros(0, dtype=bool)

    def find(
        self, model: ModelProfile, node: NodeProfile, gpu: GpuProfile, counts: np.ndarray
    ) -> np.ndarray:
        """Each count's place in the table, the counts not in it yet added first: tested at
        once (the assembly's vectorized test) and only those that fail asked for their
        text."""
        i, there = self._at(counts)
        if there.all():
            return i
        new = np.unique(counts[~there])
        if self.counts.size + new.size > self.MAX_COUNTS:  # start over with these counts alone
            self.counts, self.texts = np.zeros(0), np.zeros(0, dtype=object)
            new = np.unique(counts)
        fits = np.atleast_1d(weights_fit(model, node, gpu, new)).tolist()
        said = np.asarray(
            [
                "" if ok else _weights_text(model, node, gpu, n, self.side)
                for n, ok in zip(new.tolist(), fits, strict=True)
            ],
            dtype=object,
        )
        merged = np.concatenate([self.counts, new])
        order = np.argsort(merged, kind="stable")
        self.counts = merged[order]
        self.texts = np.concatenate([self.texts, said])[order]
        self.fails = self.texts.astype(bool)
        return self._at(counts)[0]

    def _at(self, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self.counts.size == 0:
            return np.zeros(counts.size, dtype=np.intp), np.zeros(counts.size, dtype=bool)
        i = np.minimum(np.searchsorted(self.counts, counts), self.counts.size - 1)
        return i, self.counts[i] == counts


def _weights_text(
    model: ModelProfile, node: NodeProfile, gpu: GpuProfile, n: float, side: str
) -> str:
    """What ``check_weights_fit`` says at ``n`` nodes of a side ("": nothing, they fit; then
    ``evaluate_mode`` says why the pair is infeasible)."""
    try:
        check_weights_fit(model, node, gpu, int(n), side)
    except InfeasibleError as exc:
        return exc.detail
    return ""


def _decode_text(sc: Scenario, d: int) -> str:
    """What ``check_decode_fits`` says at ``d`` decode nodes ("": one request fits)."""
    try:
        check_decode_fits(replace(sc, decode_nodes=d))
    except InfeasibleError as exc:
        return exc.detail
    return ""


def _reason(sc: Scenario, mode: OutcomeMode, cfg: ServingConfig, p: int, d: int) -> str:
    try:
        evaluate_mode(replace(sc, prefill_nodes=p, decode_nodes=d), mode, cfg)
    except InfeasibleError as exc:
        return exc.detail
    return "infeasible"  # not reached: the sweep's feasibility is evaluate_mode's


def best_row(rows: dict[str, np.ndarray], i: int) -> dict[str, float | str]:
    """Point i of a chunk as one of a mode's best points: its row, but its feasibility and
    reason."""
    row = _row(rows, i)
    row.pop("feasible")
    row.pop("reason", None)
    return row  # type: ignore[return-value]


def _row(rows: dict[str, np.ndarray], k: int) -> dict[str, object]:
    """Point k of a chunk: scalars as they are, the binding links and the APS limit by name
    (None if infeasible)."""
    out: dict[str, object] = {}
    for c, v in rows.items():
        if c.startswith("_"):
            continue  # how the chunk is laid out, not a column
        if c == "binding_mask":
            out["bottleneck"] = binding_label(int(v[k])) if rows["feasible"][k] else None
        elif c == "aps_limit":
            out[c] = APS_LIMITS[int(v[k])] if v[k] >= 0 else None
        else:
            out[c] = _scalar(v[()] if np.ndim(v) == 0 else v[k])
    return out


@functools.lru_cache(maxsize=4096)
def binding_label(mask: int) -> str:
    """The binding links of a point by name, "a + b" on a tie (its ``bottleneck``)."""
    return " + ".join(mask_names(mask))


def iter_rows(rows: dict[str, np.ndarray]) -> Iterator[dict[str, object]]:
    for k in range(len(rows["P"])):
        yield _row(rows, k)
