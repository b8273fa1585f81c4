"""Calibration: fit a node's named efficiency fields to measured points (least squares).

Measured points are CSV rows ``metric,value,mode,prefill_nodes,decode_nodes[,agents]``;
``metric`` is an outcome of the model (``jct_s``, ``aps``, ``ttft_s``, ``tpot_s``,
``online_ttft_s``, ``online_tpot_s``, ``throughput_turns_per_s``, ``saturated_turns_per_s``).
The residual of a point is log(model / measured), so every metric weighs by its relative
error. Parameters are bounded by their own schema constraints (an efficiency in (0, 1], a
share in [0, 1), ...). With ``holdout`` K points are left out of the fit (chosen with a
seeded generator) and the fit's error on them is reported.

Standard errors (docs/model.md section 8): with J the Jacobian of the residuals at the optimum
and sigma_i a point's ``rel_stderr`` (the relative standard error of its measured value, an
optional column: how well a bar was read off a figure, or a measurement's repeatability), the
fitted fields' covariance is (J^T W J)^-1 with W = diag(1 / sigma_i^2), scaled up by the
reduced chi-square when the fit leaves more scatter than the sigmas explain. Without
``rel_stderr`` the residuals' own variance stands in, which needs more points than fields.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import field, replace
from pathlib import Path
from typing import TypeVar

import numpy as np

from dualpath_plan import plausible
from dualpath_plan.errors import PlanInputError, check_seed
from dualpath_plan.files import (
    MAX_MEASURED_BYTES,
    MAX_MEASURED_ROWS,
    number,
    read_csv_rows,
)
from dualpath_plan.frozen import record
from dualpath_plan.outcomes.serving import evaluate_mode
from dualpath_plan.physics.modes import MODE_TABLE
from dualpath_plan.physics.workload import workload_demand
from dualpath_plan.profiles.registry import validate_profile, write_profiles
from dualpath_plan.profiles.schemas import (
    MAX_MAGNITUDE,
    MIN_MAGNITUDE,
    PARTIAL_FIT_NOTE,
    NodeProfile,
    ProfileBase,
    WorkloadProfile,
    numeric_bounds,
)
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import DEFAULT_SPEC, MAX_AGENTS, MAX_SIDE_NODES, ServingConfig

P = TypeVar("P", bound=ProfileBase)

METRICS = (
    "jct_s",
    "aps",
    "ttft_s",
    "tpot_s",
    "online_ttft_s",
    "online_tpot_s",
    "throughput_turns_per_s",
    "saturated_turns_per_s",
)
# The metrics a cluster's SLOs and headroom move (the online operating point).
ONLINE_METRICS = ("aps", "online_ttft_s", "online_tpot_s")
DEFAULT_FIT = (
    "snic_efficiency",
    "prefill_mfu",
    "prefill_hbm_reserve_gbyte",
    "layer_fixed_s",
)


@record
class Point:
    metric: str
    value: float
    mode: str
    prefill_nodes: int
    decode_nodes: int
    agents: int
    row: int
    rel_stderr: float | None = None  # relative standard error of the measured value
    source: str = ""  # the file it was read from (errors name it and the row)


@record
class PointResult:
    point: Point
    model: float

    @property
    def error(self) -> float:
        return self.model / self.point.value - 1.0


@record
class Calibration:
    node: NodeProfile  # with the fitted fields
    workload: WorkloadProfile  # with the fitted workload fields (unchanged if none)
    fitted: dict[str, float]
    start: dict[str, float]
    train: list[PointResult]
    holdout: list[PointResult]
    # Per fitted field: its standard error (None: not determined, e.g. as many points as
    # fields and no rel_stderr); what it rests on; and the fields' correlation matrix.
    stderr: dict[str, float | None] = field(default_factory=dict)
    stderr_basis: str = ""
    correlation: list[list[float]] = field(default_factory=list)
    # The SLOs the online points were evaluated at (no headroom: max utilization 1).
    slo: ServingConfig = field(default_factory=lambda: measured_serving(ServingConfig()))

    def partial(self) -> dict[str, str]:
        """The fitted fields the points did not pin down, with why: no standard error (not
        determined by the points), or at a bound of the search (the points pushed it out of
        the range the field can take). A profile with such a field is not a measurement
        (``calibrate --allow-partial`` writes it labelled so)."""
        out: dict[str, str] = {}
        for name, value in self.fitted.items():
            bound = at_bound(value, self.start[name], field_bounds(name))
            if bound is not None:
                out[name] = f"at its bound {bound:g} (the points push it beyond)"
            elif self.stderr.get(name) is None:
                out[name] = "not determined by the points (no standard error)"
        return out

    @staticmethod
    def rms(results: list[PointResult]) -> float:
        if not results:
            return math.nan
        return math.sqrt(
            sum(math.log(r.model / r.point.value) ** 2 for r in results) / len(results)
        )


def load_points(path: Path) -> list[Point]:
    """Measured points from CSV (``#`` comment lines and blank lines skipped), through
    :mod:`dualpath_plan.files`: a regular UTF-8 file of at most MAX_MEASURED_ROWS rows, every row
    as many fields as the header; a bad cell names its line and column."""
    source = str(path)
    required = ("metric", "value", "mode", "prefill_nodes", "decode_nodes")
    rows = read_csv_rows(
        path,
        what="measurements file (CSV)",
        max_bytes=MAX_MEASURED_BYTES,
        max_rows=MAX_MEASURED_ROWS,
        required=required,
        comments=True,
    )
    if not rows:
        raise PlanInputError("no measured points", source=source)
    points = []
    for n, r in rows:
        if r["metric"] not in METRICS:
            raise PlanInputError(
                f"unknown metric {r['metric']!r}; expected one of {', '.join(METRICS)}",
                source=source,
                line=n,
                field="metric",
            )
        if r["mode"] not in MODE_TABLE:
            raise PlanInputError(
                f"unknown mode {r['mode']!r}; expected one of {', '.join(MODE_TABLE)}",
                source=source,
                line=n,
                field="mode",
            )
        # The profiles' bounds on any quantity; the spec's on node and agent counts.
        value = number(
            r["value"],
            source=source,
            field="value",
            line=n,
            text=True,
            low=MIN_MAGNITUDE,
            high=MAX_MAGNITUDE,
            what="a measured value",
            # A TPOT of 37.5 (milliseconds typed for seconds) fitted the model to a token
            # every 37 s: the metric's plausible range names the slip.
            quantity=plausible.metric_key(r["metric"]),
        )
        counts = {"agents": str(DEFAULT_SPEC.agents)} if not (r.get("agents") or "").strip() else {}
        p, d, agents = (
            number(
                counts[k] if k in counts else r[k],
                source=source,
                field=k,
                line=n,
                integer=True,
                text=True,
                low=1,
                high=top,
            )
            for k, top in (
                ("prefill_nodes", MAX_SIDE_NODES),
                ("decode_nodes", MAX_SIDE_NODES),
                ("agents", MAX_AGENTS),
            )
        )
        text = (r.get("rel_stderr") or "").strip()
        sigma = (
            number(
                text,
                source=source,
                field="rel_stderr",
                line=n,
                text=True,
                low=1e-6,
                high=10.0,
                what="a relative standard error",
                quantity="measured.rel_stderr",  # 5 for 5%: did you mean 0.05?
            )
            if text
            else None
        )
        points.append(
            Point(r["metric"], value, r["mode"], int(p), int(d), int(agents), n, sigma, source)
        )
    seen: dict[tuple[object, ...], int] = {}
    for pt in points:
        key = (pt.metric, pt.value, pt.mode, pt.prefill_nodes, pt.decode_nodes, pt.agents)
        if key in seen:
            # A copy is not a second measurement: each copy narrowed the fit's standard error
            # by sqrt(copies) (found in a trial). Repeated runs differ; identical ones are one.
            raise PlanInputError(
                f"repeats line {seen[key]} (the same metric, value, mode and cluster): one "
                "measurement counted twice narrows the fit's standard error; keep one row "
                "(repeated runs: their mean, with rel_stderr)",
                source=source,
                line=pt.row,
            )
        seen[key] = pt.row
    given = [pt.rel_stderr is not None for pt in points]
    if any(given) and not all(given):
        missing = next(pt for pt in points if pt.rel_stderr is None)
        raise PlanInputError(
            "rel_stderr is given for some points and not this one: give it for every point or none",
            source=source,
            line=missing.row,
            field="rel_stderr",
        )
    return points


def _target(name: str) -> tuple[str, str]:
    """(kind, field) of a --fit name: ``FIELD`` or ``node.FIELD`` (the node),
    ``workload.FIELD`` (the workload, e.g. its turns_spread)."""
    kind, _, field = name.rpartition(".")
    kind = kind or "node"
    if kind not in ("node", "workload"):
        raise PlanInputError(
            f"'{name}': calibrate fits node or workload fields (node.FIELD, workload.FIELD)",
            field="--fit",
        )
    return kind, field


def field_bounds(name: str) -> tuple[float, float]:
    """(low, high) of a node or workload field from its schema constraints (gt/ge/lt/le)."""
    kind, field = _target(name)
    schema = NodeProfile if kind == "node" else WorkloadProfile
    if field not in schema.model_fields:
        raise PlanInputError(f"{kind} has no field '{field}'", field="--fit")
    bounds = numeric_bounds(schema, field)
    if bounds is None:
        raise PlanInputError(f"{kind} field '{field}' is not a number", field="--fit")
    if schema.model_fields[field].annotation is not float:
        raise PlanInputError(
            f"{kind} field '{field}' is a count, not a continuous quantity least squares can fit",
            field="--fit",
        )
    # Within what the quantity is in any deployment, too: the profile refuses the rest (a
    # layer's fixed time of 5 s), so the search must not walk there.
    quantity = plausible.QUANTITIES.get(f"{kind}.{field}")
    if quantity is not None:
        bounds = (max(bounds[0], quantity.low), min(bounds[1], quantity.high))
    return bounds


def at_bound(value: float, start: float, bounds: tuple[float, float]) -> float | None:
    """The bound ``value`` ended at (within 1e-6 of the larger of the bound and the start, so
    that a reserve of 7e-17 GB fitted from 10 GB is at its bound 0), or None."""
    for bound in bounds:
        scale = max(abs(bound), abs(start))
        if abs(value - bound) <= (1e-6 * scale if scale > 0 else 1e-12):
            return bound
    return None


def _with(profile: P, values: dict[str, float]) -> P:
    data = {**profile.model_dump(), **values}
    source = f"calibration of {profile.KIND} '{profile.id}'"
    return validate_profile(data, source=source)  # type: ignore[return-value]


def _current(sc: Scenario, name: str) -> float:
    """The scenario's value of a --fit field (the node's, or the workload's)."""
    kind, field = _target(name)
    return float(getattr(sc.prefill_node if kind == "node" else sc.workload, field))


def _trial(sc: Scenario, values: dict[str, float]) -> Scenario:
    """The scenario with fitted values applied to its node (both sides) and workload."""
    by_kind: dict[str, dict[str, float]] = {"node": {}, "workload": {}}
    for name, v in values.items():
        kind, field = _target(name)
        by_kind[kind][field] = v
    node = _with(sc.prefill_node, by_kind["node"]) if by_kind["node"] else sc.prefill_node
    trial = replace(sc, prefill_node=node, decode_node=node)
    if by_kind["workload"]:
        workload = _with(sc.workload, by_kind["workload"])
        trial = trial.with_turns(workload_demand(sc.model, workload), workload=workload)
    return trial


def measured_serving(slo: ServingConfig) -> ServingConfig:
    """The SLOs a measured online point is evaluated at: the ones given, with no headroom kept
    (a measured APS is what the system sustained at its SLOs: max utilization 1)."""
    return replace(slo, max_utilization=1.0)


def _model_value(sc: Scenario, p: Point, slo: ServingConfig) -> float:
    trial = replace(sc, prefill_nodes=p.prefill_nodes, decode_nodes=p.decode_nodes)
    out = evaluate_mode(trial, p.mode, replace(slo, agents=p.agents))  # type: ignore[arg-type]
    return float(getattr(out, p.metric))


def _point_result(sc: Scenario, p: Point, slo: ServingConfig) -> PointResult:
    """The point at the fitted values; a cluster that cannot run there (its weights do not fit
    on P or D nodes, say) is an error naming the file and row, not a flag never given."""
    try:
        return PointResult(p, _model_value(sc, p, slo))
    except PlanInputError as exc:
        raise PlanInputError(
            f"{p.prefill_nodes}P{p.decode_nodes}D in {p.mode}: {exc.detail}",
            source=p.source or None,
            line=p.row,
            field="prefill_nodes",
        ) from None


def calibrate(
    sc: Scenario,
    points: list[Point],
    fit: tuple[str, ...] = DEFAULT_FIT,
    holdout: int = 0,
    seed: int = 0,
    starts: int = 1,
    progress: Callable[[int, int, float], None] | None = None,
    slo: ServingConfig = ServingConfig(),
) -> Calibration:
    """Least squares from the profiles' values, and from ``starts - 1`` more starts drawn
    around them (each field scaled by e^N(0, 1), clipped to its bounds; a field at 0 drawn
    uniformly within its bounds, capped at 1): the search is local, and the best fit wins.
    ``progress(start, evaluations, rms)`` hears of every evaluation of the model. Online
    points (APS, TTFT, TPOT) are evaluated at ``slo``'s SLOs with no headroom
    (:func:`measured_serving`)."""
    slo = measured_serving(slo)
    from scipy.optimize import least_squares

    if sc.prefill_node.id != sc.decode_node.id:
        raise PlanInputError(
            "calibrate fits one node profile: use --node for both sides", field="--node"
        )
    if not fit:
        raise PlanInputError("give at least one field to fit", field="--fit")
    named: dict[tuple[str, str], str] = {}
    for name in fit:
        first = named.setdefault(_target(name), name)
        if first != name or list(fit).count(name) > 1:
            # One field twice ('prefill_mfu,node.prefill_mfu') was fitted as two unknowns of
            # one value, accepted silently.
            said = f"{name!r} twice" if first == name else f"{first!r} and {name!r}, one field"
            raise PlanInputError(f"names {said}; give each field once", field="--fit")
    check_seed(seed)
    if not 1 <= starts <= 100:
        raise PlanInputError(f"expected 1 to 100 starts, got {starts}", field="--starts")
    if holdout < 0 or holdout >= len(points):
        raise PlanInputError(
            f"expected 0 to {len(points) - 1} points held out of {len(points)}, got {holdout}",
            field="--holdout",
        )
    order = np.random.default_rng(seed).permutation(len(points))
    held = sorted(order[:holdout].tolist())
    train = [pt for i, pt in enumerate(points) if i not in held]
    test = [points[i] for i in held]
    if len(train) < len(fit):
        raise PlanInputError(
            f"{len(train)} points cannot determine {len(fit)} fields; fit "
            "fewer (--fit) or measure more",
            field="--fit",
        )
    if sc.workload.trace_file and any(_target(f)[0] == "workload" for f in fit):
        raise PlanInputError(
            f"workload '{sc.workload.id}' is a trace file: its turns are observed, not fitted",
            field="--fit",
        )
    bounds = [field_bounds(f) for f in fit]
    start = {f: _current(sc, f) for f in fit}
    x0 = np.array([min(max(start[f], lo), hi) for f, (lo, hi) in zip(fit, bounds, strict=True)])

    evaluations = [0]
    current = [0]

    weights = np.array([1.0 / (p.rel_stderr or 1.0) for p in train])

    def residuals(x: np.ndarray) -> np.ndarray:
        try:
            trial = _trial(sc, dict(zip(fit, map(float, x), strict=True)))
            out = weights * np.array(
                [math.log(_model_value(trial, p, slo) / p.value) for p in train]
            )
        except (PlanInputError, ValueError, ZeroDivisionError):
            # Infeasible parameters: far from every point (a log error of 10, weighted like
            # the others, so that no feasible point looks worse).
            out = 10.0 * weights
        evaluations[0] += 1
        if progress is not None:
            progress(current[0] + 1, evaluations[0], float(np.sqrt(np.mean(out**2))))
        return out

    lo = np.array([b[0] for b in bounds])
    hi = np.array([b[1] for b in bounds])
    # Scale each variable by its Jacobian column: schema bounds (up to 1e12) say nothing about
    # a variable's natural size.
    rng = np.random.default_rng(seed)
    best_x, best_cost, best_jac = x0, math.inf, np.zeros((len(train), len(fit)))
    for k in range(starts):
        current[0] = k
        if k == 0:
            start_x = x0
        else:
            scaled = x0 * np.exp(rng.standard_normal(x0.size))
            drawn = rng.uniform(lo, np.minimum(hi, np.maximum(lo, 1.0)))
            start_x = np.clip(np.where(x0 > 0, scaled, drawn), lo, hi)
        res = least_squares(residuals, start_x, bounds=(lo, hi), x_scale="jac")
        if res.cost < best_cost:
            best_x, best_cost, best_jac = res.x, res.cost, np.asarray(res.jac)
    fitted = dict(zip(fit, map(float, best_x), strict=True))
    best = _trial(sc, fitted)
    weighted = all(p.rel_stderr is not None for p in train)
    errors, basis, corr = standard_errors(best_jac, 2.0 * best_cost, weighted)
    # A field whose error spans its whole range is not determined by the points (a nearly
    # flat column the rank test let through: snic_efficiency walked to its bound of 1, where
    # Basic is flat, and recorded an error of 264 that later overflowed: found in a trial).
    spanning = [k for k, err in enumerate(errors) if err is not None and not err < hi[k] - lo[k]]
    for k in spanning:
        errors[k] = None
    if spanning:
        basis += (
            f"; {len(spanning)} field{'s' if len(spanning) > 1 else ''} with an error spanning "
            "its whole range (not determined by the points)"
        )
    return Calibration(
        node=best.prefill_node,
        workload=best.workload,
        fitted=fitted,
        start=start,
        train=[_point_result(best, p, slo) for p in train],
        holdout=[_point_result(best, p, slo) for p in test],
        stderr=dict(zip(fit, errors, strict=True)),
        stderr_basis=basis,
        correlation=corr,
        slo=slo,
    )


# A direction of the fields whose singular value (columns scaled to unit norm) is below this
# share of the largest is one the points do not determine; a field loading on such directions
# by more than UNDETERMINED_LOADING (of its unit weight) has no standard error.
RANK_REL = 1e-6
UNDETERMINED_LOADING = 0.1


def standard_errors(
    jac: np.ndarray, chi2: float, weighted: bool
) -> tuple[list[float | None], str, list[list[float]]]:
    """Standard errors of the fitted fields from the residuals' Jacobian ``jac`` at the
    optimum (rows: points, columns: fields) and the residuals' sum of squares ``chi2``.
    Weighted (every point has rel_stderr): cov = (J^T J)^-1 x max(1, chi2 / dof); otherwise
    cov = (J^T J)^-1 x chi2 / dof, which needs dof = points - fields > 0 and some scatter.
    A field the points do not determine (a zero column, e.g. at a bound, or a combination of
    fields the points cannot tell apart: a near-null direction of J with its columns scaled
    to unit norm) has no standard error: None, never a falsely small number."""
    n, k = jac.shape
    dof = n - k
    if not weighted and dof <= 0:
        return (
            [None] * k,
            f"not determined: {n} points for {k} fields and no rel_stderr column",
            [],
        )
    if not weighted and chi2 <= 1e-20 * n:
        return (
            [None] * k,
            "not determined: the points are met exactly, so there is no scatter to estimate "
            "errors from; give each point's rel_stderr",
            [],
        )
    scale = max(1.0, chi2 / dof) if weighted and dof > 0 else 1.0
    if not weighted:
        scale = chi2 / dof
    basis = (
        "the points' rel_stderr"
        + (f", scaled by the reduced chi-square {chi2 / dof:.3g}" if scale > 1.0 else "")
        if weighted
        else f"the residuals' scatter ({dof} degrees of freedom)"
    )
    norms = np.linalg.norm(jac, axis=0)
    determined = norms > 0
    if determined.any():
        scaled = jac[:, determined] / norms[determined]
        _, sing, vt = np.linalg.svd(scaled, full_matrices=True)
        sing = np.concatenate([sing, np.zeros(vt.shape[0] - sing.size)])
        null = vt[sing <= RANK_REL * max(float(sing.max()), 1e-300)]
        loading = (null**2).sum(axis=0) if null.size else np.zeros(vt.shape[1])
        idx_det = np.flatnonzero(determined)
        determined[idx_det[loading > UNDETERMINED_LOADING]] = False
    cov = np.full((k, k), np.nan)
    idx = np.flatnonzero(determined)
    if idx.size:
        # In the basis of unit-norm columns, then back: the errors do not depend on the
        # fields' units (seconds beside gigabytes), which a plain pinv of J^T J would truncate.
        unit = norms[idx]
        sub = jac[:, idx] / unit
        cov[np.ix_(idx, idx)] = np.linalg.pinv(sub.T @ sub) / np.outer(unit, unit) * scale
    if idx.size < k:
        basis += (
            f"; {k - idx.size} field{'s' if k - idx.size > 1 else ''} not determined by the "
            "points (no effect on them, at a bound, or not separable from another)"
        )
    diag = np.diag(cov)
    errors: list[float | None] = [
        float(math.sqrt(d)) if math.isfinite(d) and d >= 0 else None for d in diag
    ]
    with np.errstate(invalid="ignore", divide="ignore"):
        sd = np.sqrt(np.abs(diag))
        corr = cov / np.outer(sd, sd)
    corr_list = [[float(v) if math.isfinite(v) else 0.0 for v in row] for row in corr]
    return errors, basis, corr_list


def overlay(
    cal: Calibration, measurements: Path, *, allow_partial: bool = False
) -> list[ProfileBase]:
    """The fitted profiles (the node, and the workload if any of its fields was fitted), each
    fitted field citing the fit. A fit with a field the points did not pin down
    (:meth:`Calibration.partial`) is refused (:class:`PartialFitError`) unless
    ``allow_partial``: then the node says ``efficiency_source = "fitted, partial"`` and each
    such field is listed in ``[unconfirmed]`` with why, so that every report says so."""
    partial = cal.partial()
    if partial and not allow_partial:
        raise PartialFitError(partial)
    partial_by_field = {_target(name): why for name, why in partial.items()}
    rms = Calibration.rms(cal.train)
    out: list[ProfileBase] = []
    for kind, profile in (("node", cal.node), ("workload", cal.workload)):
        fields = [_target(f)[1] for f in cal.fitted if _target(f)[0] == kind]
        if not fields:
            continue
        sources = dict(profile.sources)
        unconfirmed = dict(profile.unconfirmed)
        for f in fields:
            sources[f] = [
                f"fitted: dualpath-plan calibrate {measurements.name} ({len(cal.train)} "
                f"points, RMS log error {rms:.3g})"
            ]
            unconfirmed.pop(f, None)
            why = partial_by_field.get((kind, f))
            if why is not None:
                unconfirmed[f] = PARTIAL_FIT_NOTE.format(measurements.name, why)
        if isinstance(profile, NodeProfile):
            # A fitted node is measured, whatever it was before; in part if any of its fields
            # is not pinned down by the points.
            node_partial = any(kind_of == "node" for kind_of, _ in partial_by_field)
            profile = profile.model_copy(
                update={
                    "efficiency_source": "fitted, partial" if node_partial else "measured",
                    "efficiencies_from": None,
                }
            )
        stderr = dict(profile.calibration_stderr)
        for name, err in cal.stderr.items():
            kind_of, f = _target(name)
            if kind_of != kind:
                continue
            if err is None:
                stderr.pop(f, None)
            else:
                stderr[f] = err
        out.append(
            profile.model_copy(
                update={
                    "sources": sources,
                    "unconfirmed": unconfirmed,
                    "calibration_stderr": stderr,
                }
            )
        )
    return out


def write_overlays(
    cal: Calibration, measurements: Path, out: Path, *, allow_partial: bool = False
) -> list[str]:
    """The fitted profiles as overlays in ``out`` (``out/<kind>/<id>.toml``): every one
    written, through a temporary file renamed into place, or none (none when the fit is
    partial and ``allow_partial`` is not given: :class:`PartialFitError`)."""
    # (Over the profiles it read from DIR, as --profiles DIR: an overlay is written to be
    # updated so; never over the measurements.)
    profiles = overlay(cal, measurements, allow_partial=allow_partial)
    return write_profiles(profiles, out, field="--out", reads=[measurements])


class PartialFitError(Exception):
    """A fit with fields the points did not pin down, refused as an overlay: a gate, not bad
    input (the CLI reports the fit and exits 1)."""

    def __init__(self, fields: dict[str, str]) -> None:
        self.fields = fields
        listed = "; ".join(f"{name} {why}" for name, why in fields.items())
        super().__init__(
            f"no overlay written: {listed}. Measure more points (or give rel_stderr), fit "
            "fewer fields (--fit), or write it labelled efficiency_source = 'fitted, "
            "partial' with --allow-partial"
        )
