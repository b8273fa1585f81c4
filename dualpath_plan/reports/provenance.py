"""What every report says about its inputs' provenance: the efficiencies in force and where
they come from (one line, and ``efficiencies`` in JSON), and the intervals' basis."""

from __future__ import annotations

from typing import Any

from dualpath_plan.outcomes.uncertainty import Interval, OutcomeIntervals
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.provenance import Efficiencies


def efficiency_line(sc: Scenario | Efficiencies) -> str:
    return (sc if isinstance(sc, Efficiencies) else sc.efficiencies).line()


def efficiency_payload(sc: Scenario | Efficiencies) -> dict[str, Any]:
    e = sc if isinstance(sc, Efficiencies) else sc.efficiencies
    return {
        "in_force": e.in_force,
        "source": e.source,
        "line": e.line(),
        "nodes": [
            {
                "node": n.node,
                "sides": n.sides,
                "efficiency_source": n.source,
                "efficiencies_from": n.origin,
                "values": n.values,
                "stderr": n.stderr,
                "set_on_command_line": list(n.overridden),
            }
            for n in e.nodes
        ],
    }


def interval_pair(i: Interval | None) -> list[float] | None:
    return [i.low, i.high] if i is not None else None


def intervals_payload(iv: OutcomeIntervals) -> dict[str, Any]:
    return {
        "confidence": iv.confidence,
        "fields": list(iv.fields),
        "reason": iv.reason,
    }


def intervals_line(iv: OutcomeIntervals) -> str:
    if iv.reason is not None:
        return iv.reason
    return (
        f"intervals: {iv.confidence:.0%} from the calibration's standard errors of "
        f"{', '.join(iv.fields)} (taken as independent)"
    )
