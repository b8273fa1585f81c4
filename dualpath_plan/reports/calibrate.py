"""The ``calibrate`` report: JSON payload and terminal rendering of a fit."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dualpath_plan.formatting import number, percent, plain
from dualpath_plan.validation.calibrate import ONLINE_METRICS, Calibration, PointResult

# RMS log error above which calibrate suggests more starts: 5% per point on average.
POOR_FIT_RMS = 0.05


def _rows(results: list[PointResult]) -> list[dict[str, Any]]:
    return [
        {
            "row": r.point.row,
            "metric": r.point.metric,
            "mode": r.point.mode,
            "prefill_nodes": r.point.prefill_nodes,
            "decode_nodes": r.point.decode_nodes,
            "measured": r.point.value,
            "model": r.model,
            "error": r.error,
        }
        for r in results
    ]


def _slo(cal: Calibration) -> dict[str, float]:
    return {
        "ttft_slo_s": cal.slo.ttft_slo_s,
        "tpot_slo_s": cal.slo.tpot_slo_s,
        "max_utilization": cal.slo.max_utilization,
    }


def slo_line(cal: Calibration) -> str:
    """What the online points (APS, TTFT, TPOT) were evaluated at."""
    return (
        f"online points at TTFT <= {plain(cal.slo.ttft_slo_s)} s and TPOT <= "
        f"{plain(cal.slo.tpot_slo_s * 1e3)} ms (--ttft-slo, --tpot-slo), no headroom (max "
        "utilization 1: a measured APS is what the system sustained)"
    )


def calibrate_payload(cal: Calibration, written: list[str] | None) -> dict[str, Any]:
    return {
        "node": cal.node.id,
        "workload": cal.workload.id,
        "fitted": cal.fitted,
        "stderr": cal.stderr,
        "stderr_basis": cal.stderr_basis,
        "correlation": cal.correlation,
        "online_points_at": _slo(cal),
        "start": cal.start,
        "train": _rows(cal.train),
        "holdout": _rows(cal.holdout),
        "train_rms_log_error": Calibration.rms(cal.train),
        "holdout_rms_log_error": Calibration.rms(cal.holdout) if cal.holdout else None,
        "overlay": written,
        # Fitted fields the points did not pin down, with why (an overlay with any is written
        # only with --allow-partial, labelled efficiency_source 'fitted, partial').
        "partial": cal.partial(),
    }


def render_calibrate(
    cal: Calibration, written: list[str] | None, starts: int, out: str, console: Console
) -> None:
    t = Table(title=f"fitted fields of node '{cal.node.id}', workload '{cal.workload.id}'")
    for col in ("field", "start", "fitted", "std. error"):
        t.add_column(col)
    for f, v in cal.fitted.items():
        err = cal.stderr.get(f)
        t.add_row(
            f,
            # Each row its own field (a share, GB, seconds): 4 significant digits a cell.
            number(cal.start[f], 4),
            number(v, 4),
            f"{number(err, 2)} ({percent(err / abs(v))})"
            if err is not None and v
            else "-"
            if err is None
            else number(err, 2),
        )
    console.print(t)
    basis = cal.stderr_basis
    console.print(
        (basis if basis.startswith("not determined") else f"standard errors from {basis}")
        + ("; -: no standard error" if any(e is None for e in cal.stderr.values()) else "")
    )
    r = Table(title="points (model vs measured)")
    for col in ("row", "set", "metric", "mode", "P/D", "measured", "model", "error"):
        r.add_column(col)
    for name, results in (("fit", cal.train), ("held out", cal.holdout)):
        for x in results:
            r.add_row(
                str(x.point.row),
                name,
                x.point.metric,
                x.point.mode,
                f"{x.point.prefill_nodes}P{x.point.decode_nodes}D",
                number(x.point.value, 4),
                number(x.model, 4),
                percent(x.error, 1, sign=True),
            )
    console.print(r)
    if any(x.point.metric in ONLINE_METRICS for x in [*cal.train, *cal.holdout]):
        console.print(escape(slo_line(cal)), highlight=False)
    train_rms, held_rms = Calibration.rms(cal.train), Calibration.rms(cal.holdout)
    console.print(
        f"RMS log error: fit {number(train_rms)}"
        + (f", held out {number(held_rms)}" if cal.holdout else "")
    )
    if train_rms > POOR_FIT_RMS and starts == 1:
        console.print(
            f"a poor fit (RMS log error above {plain(POOR_FIT_RMS)}): least squares is local; "
            "try --starts 8, or start nearer with --set"
        )
    for name, why in cal.partial().items():
        console.print(escape(f"{name}: {why}"), highlight=False)
    if written:
        console.print(f"overlay written to {', '.join(written)}; use it with --profiles {out}")
