"""Intervals on outcomes from the calibration's standard errors (docs/model.md section 8).

Every fitted field with a ``calibration_stderr`` (on the nodes, and on the workload) is moved
by one standard error each way, within its schema bounds; an outcome's log changes by
d_i = (log y(theta_i + s_i) - log y(theta_i - s_i)) / 2 per standard error of field i (a
central difference, rescaled where a bound cut the step), and its interval at confidence c is
y exp(+- z_c sqrt(sum d_i^2)). Fields are treated as independent (the fit's correlations,
printed by ``calibrate``, are not carried into the profiles), and a transferred calibration
carries its source's errors only: the error of the transfer itself is not known.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace

from dualpath_plan.errors import PlanInputError
from dualpath_plan.frozen import record
from dualpath_plan.outcomes.read_choice import read_scenario
from dualpath_plan.outcomes.serving import (
    ModeCore,
    ModeOutcome,
    SizeReport,
    cores_by_mode,
    cores_each,
    outcomes_of,
    size_report,
)
from dualpath_plan.physics.modes import REPORT_MODES, ModeName
from dualpath_plan.physics.workload import workload_demand
from dualpath_plan.profiles.schemas import NodeProfile, ProfileBase, numeric_bounds
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.provenance import OPERATOR_REPLACED, SOURCE_WORDS
from dualpath_plan.scenario.spec import ServingConfig

# Two-sided 95% normal quantile.
CONFIDENCE = 0.95
Z = 1.959963984540054


@record
class Interval:
    low: float
    high: float


@record
class Perturbation:
    """One fitted field: which profile (``node`` for the nodes, ``workload``), its value,
    its standard error and the scenarios one error below and above."""

    kind: str
    field: str
    value: float
    stderr: float
    below: Scenario
    above: Scenario
    step: float  # (above - below) / (2 stderr): 1 unless a bound cut the step


def _moved(profile: ProfileBase, field: str, value: float) -> ProfileBase:
    return profile.model_copy(update={field: value})


def _uncalibrated_sides(sc: Scenario) -> list[tuple[str, NodeProfile]]:
    """The nodes of the cluster that carry no standard error (not calibrated, a fit that
    determined none, or every calibrated field replaced with --set), each once with its label:
    "prefill node 'x'", "node 'y'" (both sides)."""
    out: list[tuple[str, NodeProfile]] = []
    for side, node in (("prefill", sc.prefill_node), ("decode", sc.decode_node)):
        if any(err > 0 for err in node.calibration_stderr.values()):
            continue
        if side == "decode" and node.id == sc.prefill_node.id and out:
            out[0] = (f"node '{node.id}'", node)  # the same node on both sides: named once
        else:
            out.append((f"{side} node '{node.id}'", node))
    return out


def perturbations(sc: Scenario) -> list[Perturbation]:
    """The scenario moved one standard error each way, per fitted field with one; none when
    efficiencies are off (speed of light) or a node of the cluster carries no standard error:
    its datasheet values are an upper bound of unknown error, and the other node's errors
    alone would make the cluster look better known than it is."""
    out: list[Perturbation] = []
    if not sc.options.efficiencies or _uncalibrated_sides(sc):
        return out  # an upper bound, not an estimate: no interval
    # One fitted value, one move: nodes whose calibration comes from the same fit (a measured
    # node and the nodes that transfer from it) move together, fully correlated.
    fits: dict[tuple[str, str], tuple[float, float]] = {}
    for node in (sc.prefill_node, sc.decode_node):
        # Fields an engine profile's operator model replaces move nothing on its node.
        replaced = OPERATOR_REPLACED if sc.engine_for(node) is not None else ()
        # (A field set with --set has lost its standard error: profiles/registry.py.)
        for field, err in node.calibration_stderr.items():
            if err > 0 and field not in replaced:
                fits[(node.calibrated_by(field), field)] = (float(getattr(node, field)), err)
    for (origin, field), (value, err) in fits.items():
        out.append(_perturb_fit(sc, origin, field, value, err))
    w = sc.workload
    if not w.trace_file:
        for field, err in w.calibration_stderr.items():
            if err <= 0:
                continue
            value = float(getattr(w, field))
            lo, hi = _clipped(type(w), field, value, err)
            if hi <= lo:
                continue
            scenarios = []
            for v in (lo, hi):
                moved = _moved(w, field, v)
                assert isinstance(moved, type(w))
                scenarios.append(sc.with_turns(workload_demand(sc.model, moved), workload=moved))
            out.append(
                Perturbation(
                    "workload", field, value, err, scenarios[0], scenarios[1], (hi - lo) / (2 * err)
                )
            )
    return out


def _clipped(
    schema: type[ProfileBase], field: str, value: float, err: float
) -> tuple[float, float]:
    bounds = numeric_bounds(schema, field) or (-math.inf, math.inf)
    return max(value - err, bounds[0]), min(value + err, bounds[1])


def _perturb_fit(sc: Scenario, origin: str, field: str, value: float, err: float) -> Perturbation:
    """The scenario with ``field`` of every node calibrated by ``origin``'s fit moved to one
    standard error below and above its value."""
    lo, hi = _clipped(NodeProfile, field, value, err)

    def moved(node: NodeProfile, v: float) -> NodeProfile:
        if field not in node.calibration_stderr or node.calibrated_by(field) != origin:
            return node
        out = _moved(node, field, v)
        assert isinstance(out, NodeProfile)
        return out

    below, above = (
        replace(sc, prefill_node=moved(sc.prefill_node, v), decode_node=moved(sc.decode_node, v))
        for v in (lo, hi)
    )
    step = (hi - lo) / (2 * err) if err > 0 else 0.0
    return Perturbation("node", field, value, err, below, above, step)


def interval(
    value: float, moves: list[tuple[float, float, float]], z: float = Z
) -> Interval | None:
    """The interval of ``value`` from its values one error below and above each field
    (``(below, above, step)``); None where the value is not positive (no log scale)."""
    if not (value > 0 and math.isfinite(value)):
        return None
    var = 0.0
    for below, above, step in moves:
        if not (below > 0 and above > 0 and math.isfinite(below) and math.isfinite(above)):
            return None
        if step <= 0:
            continue
        var += ((math.log(above) - math.log(below)) / (2.0 * step)) ** 2
    sd = math.sqrt(var)
    if z * sd > _MAX_LOG_WIDTH:
        # An error that moves the value by a factor beyond e^40 (a standard error larger than
        # its field's range, in a hand-written profile) bounds nothing: no interval (exp
        # overflowed: an internal error, found in a trial).
        return None
    return Interval(value * math.exp(-z * sd), value * math.exp(z * sd))


_MAX_LOG_WIDTH = 40.0


def intervals_of(
    sc: Scenario,
    outcome: Callable[[Scenario], dict[str, float]],
    moves: list[Perturbation] | None = None,
    centre: dict[str, float] | None = None,
) -> dict[str, Interval | None] | None:
    """Intervals of every named value ``outcome`` returns for a scenario (``centre``: its
    values for ``sc`` where the caller has them already); None when nothing in the scenario
    carries a standard error (not calibrated, or speed of light)."""
    moves = perturbations(sc) if moves is None else moves
    if not moves:
        return None
    centre = outcome(sc) if centre is None else centre
    shifted = [(outcome(p.below), outcome(p.above), p.step) for p in moves]
    return {
        name: interval(v, [(lo[name], hi[name], step) for lo, hi, step in shifted])
        for name, v in centre.items()
    }


def no_interval_reason(sc: Scenario) -> str:
    """Why there are no intervals, in the words the efficiency line uses for each node (a
    measured node whose fit determined no error is not called "not calibrated")."""
    if not sc.options.efficiencies:
        return "no interval: speed of light (an upper bound, not an estimate)"
    sides = _uncalibrated_sides(sc) or [("a node", sc.prefill_node)]
    said = [
        f"{label} {SOURCE_WORDS[node.efficiency_source]}"
        + (", without standard errors" if node.efficiency_source != "datasheet" else "")
        for label, node in sides
    ]
    if sc.overridden:
        # --set takes a field's standard error away (profiles/registry.py).
        why = "no calibration_stderr in its profile, or every calibrated field set with --set"
    else:
        why = "no calibration_stderr in its profile"
    return f"no interval: {' and '.join(said)} ({why})"


# The outcomes of a mode that get intervals.
METRICS = ("saturated_turns_per_s", "jct_s", "aps")


@record
class OutcomeIntervals:
    """Per mode, per metric (``METRICS``): the interval at ``confidence``, None where a value
    has none (0: an unreachable APS); ``reason`` instead when the scenario has no interval."""

    confidence: float
    by_mode: dict[str, dict[str, Interval | None]]
    reason: str | None = None
    fields: tuple[str, ...] = ()  # the fitted fields the intervals rest on


def mode_intervals(
    sc: Scenario,
    cfg: ServingConfig,
    modes: tuple[ModeName, ...] = REPORT_MODES,
    known: Mapping[ModeName, ModeOutcome] | None = None,
) -> OutcomeIntervals:
    """Intervals of every mode's throughput, JCT and APS from the calibration's errors;
    ``known``: the modes' outcomes on ``sc`` already evaluated (not evaluated again)."""
    moves = perturbations(sc)
    centre = _centre(known, modes) if known is not None and all(m in known for m in modes) else None
    # A step that a schema bound cut to nothing (paper-64k's turns_spread sits at its upper
    # bound) leaves the scenario as it was: its outcomes are the centre's, known already.
    shifted = [
        s for p in moves for s in (p.below, p.above) if centre is None or not _unmoved(sc, p, s)
    ]
    # Every perturbed scenario's outcomes at once: the saturated optimum and JCT per
    # scenario and mode, then one APS search over all of them (online.stack_queues: each
    # cluster's APS is what it is alone); the centre with them where it is not known and
    # there is an interval to give.
    found = [sc, *shifted] if centre is None and moves else shifted
    table = {id(s): v for s, v in zip(found, _mode_outcomes(sc, found, modes, cfg), strict=True)}
    return _intervals(sc, modes, moves, centre, table)


def _centre(known: Mapping[ModeName, ModeOutcome], modes: tuple[ModeName, ...]) -> dict[str, float]:
    """The cluster's own values of METRICS per mode, from its outcomes."""
    return {f"{m}.{k}": float(getattr(known[m], k)) for m in modes for k in METRICS}


def _intervals(
    sc: Scenario,
    modes: tuple[ModeName, ...],
    moves: list[Perturbation],
    centre: dict[str, float] | None,
    table: Mapping[int, dict[str, float]],
) -> OutcomeIntervals:
    """The intervals from the perturbed scenarios' values (``table``, by ``id``; a scenario
    not in it is one a bound left unmoved: the centre's values)."""

    def outcome(s: Scenario) -> dict[str, float]:
        got = table.get(id(s), centre)
        assert got is not None  # every moved scenario was evaluated
        return got

    values = intervals_of(sc, outcome, moves, centre)
    if values is None:
        return OutcomeIntervals(CONFIDENCE, {}, no_interval_reason(sc))
    by_mode: dict[str, dict[str, Interval | None]] = {
        m: {k: values[f"{m}.{k}"] for k in METRICS} for m in modes
    }
    fields = tuple(f"{p.kind}.{p.field}" for p in moves)
    return OutcomeIntervals(CONFIDENCE, by_mode, None, fields)


def _unmoved(sc: Scenario, p: Perturbation, s: Scenario) -> bool:
    """Whether ``s``, one side of ``p``, has the field's value of ``sc`` everywhere it was
    moved (the field is all a perturbation changes)."""
    if p.kind == "workload":
        return bool(getattr(s.workload, p.field) == getattr(sc.workload, p.field))
    return all(
        getattr(getattr(s, side), p.field) == getattr(getattr(sc, side), p.field)
        for side in ("prefill_node", "decode_node")
    )


def _mode_outcomes(
    sc: Scenario, scenarios: list[Scenario], modes: tuple[ModeName, ...], cfg: ServingConfig
) -> list[dict[str, float]]:
    """Per scenario (``sc``'s perturbed twins, or ``sc`` itself), each mode's throughput,
    JCT and APS (``mode_core``'s), NaN for a mode the scenario cannot run; the APS of every
    scenario and mode in one search."""
    return [_metrics(row, modes) for row in _held_reads(sc, scenarios, modes, cfg)]


def _held_reads(
    sc: Scenario, scenarios: list[Scenario], modes: tuple[ModeName, ...], cfg: ServingConfig
) -> list[dict[ModeName, ModeCore | PlanInputError]]:
    """``cores_each`` of ``scenarios`` (``sc`` and its perturbed twins), each reading, with a
    store of finite size, the share of the cache ``sc``'s plan reads in each mode
    (read_choice): the intervals are those of this plan, its reads held as the calibration
    moves (and one table per mode, not one per twin)."""
    if sc.store is None:
        return cores_each(scenarios, modes, cfg)

    def held(m: ModeName) -> list[Scenario]:
        plan = read_scenario(sc, m)
        share = 1.0 if plan.read_share is None else plan.read_share
        return [plan if s is sc else s.reading(share) for s in scenarios]

    return cores_by_mode(modes, cfg, held)


def _metrics(
    row: Mapping[ModeName, ModeCore | PlanInputError], modes: tuple[ModeName, ...]
) -> dict[str, float]:
    """One scenario's ``cores_each`` row as the intervals read it: each mode's METRICS in
    order, NaN for a mode it cannot run (one error away the cluster no longer runs, e.g. a
    larger HBM reserve leaves no room for a request: no interval for it, rather than a
    guess)."""
    out: dict[str, float] = {}
    for m in modes:
        got = row[m]
        if isinstance(got, PlanInputError):
            out |= {f"{m}.{k}": math.nan for k in METRICS}
        else:
            out |= {
                f"{m}.saturated_turns_per_s": got.t_max,
                f"{m}.jct_s": got.jct_s,
                f"{m}.aps": float(got.online.aps[0]),
            }
    return out


def evaluate_with_intervals(
    sc: Scenario, cfg: ServingConfig, modes: tuple[ModeName, ...] = REPORT_MODES
) -> tuple[SizeReport, OutcomeIntervals]:
    """``evaluate`` (not strict) and ``mode_intervals`` of the modes it gives, the cluster
    and its perturbed twins in one solve per mode and one APS search (``cores_each``: each
    as it gives alone). A plain `size` (two searches took a fifth of its cold start)."""
    moves = perturbations(sc)
    shifted = [s for p in moves for s in (p.below, p.above) if not _unmoved(sc, p, s)]
    rows = _held_reads(sc, [sc, *shifted], modes, cfg)
    report = size_report(sc, cfg, outcomes_of(sc, cfg, rows[0]), strict=False)
    shown = tuple(report.modes)
    table = {id(s): _metrics(row, shown) for s, row in zip(shifted, rows[1:], strict=True)}
    return report, _intervals(sc, shown, moves, _centre(report.modes, shown), table)


def answer_intervals(
    sc: Scenario, cfg: ServingConfig, answers: dict[ModeName, tuple[int, int, ModeOutcome]]
) -> OutcomeIntervals:
    """Intervals of each mode's outcome at its own cluster (``answers``: mode -> (P, D, the
    outcome there)), e.g. inverse sizing's smallest cluster or recommend's best split. The
    cluster itself is kept: the interval says how sure the answer's throughput, JCT and APS
    are there."""
    by_mode: dict[str, dict[str, Interval | None]] = {}
    fields: tuple[str, ...] = ()
    for m, (p, d, o) in answers.items():
        at = replace(sc, prefill_nodes=p, decode_nodes=d)
        iv = mode_intervals(at, cfg, (m,), {m: o})
        if iv.reason is not None:
            return OutcomeIntervals(CONFIDENCE, {}, iv.reason)
        by_mode[m] = iv.by_mode[m]
        fields = iv.fields
    if not by_mode:
        return OutcomeIntervals(CONFIDENCE, {}, "no interval: no mode reached the target")
    return OutcomeIntervals(CONFIDENCE, by_mode, None, fields)
