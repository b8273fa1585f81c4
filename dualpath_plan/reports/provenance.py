"""What every report says about its inputs' provenance, the same way in every report: the
nodes' datasheet specs, the efficiencies in force and where they come from (one line, and
``efficiencies`` in JSON), and the intervals' basis."""

from __future__ import annotations

from typing import Any

from dualpath_plan.formatting import plain
from dualpath_plan.outcomes.uncertainty import METRICS, Interval, OutcomeIntervals
from dualpath_plan.profiles.schemas import NodeProfile
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


def interval_fields(iv: OutcomeIntervals | None, mode: str) -> dict[str, list[float] | None]:
    """``<metric>_interval`` for every metric of a mode: [low, high], or null where there is
    none (the JSON always carries the keys; ``intervals.reason`` says why)."""
    values = iv.by_mode.get(mode, {}) if iv is not None else {}
    return {f"{k}_interval": interval_pair(values.get(k)) for k in METRICS}


def intervals_payload(iv: OutcomeIntervals) -> dict[str, Any]:
    return {
        "confidence": iv.confidence,
        "fields": list(iv.fields),
        "reason": iv.reason,
    }


def intervals_line(iv: OutcomeIntervals) -> str:
    if iv.reason is not None:
        return iv.reason
    missing = [
        f"{m} {k.removesuffix('_s').replace('_turns_per', '').replace('_', ' ')}"
        for m, values in iv.by_mode.items()
        for k, v in values.items()
        if v is None
    ]
    return (
        f"intervals: {iv.confidence:.0%} from the calibration's standard errors of "
        f"{', '.join(iv.fields)} (taken as independent)"
        + (
            f"; none for {', '.join(missing)}: 0, or one standard error away the cluster no "
            "longer runs or serves no agent"
            if missing
            else ""
        )
    )


def node_line(node: NodeProfile, gpu_id: str) -> str:
    """A node's datasheet specs in a line: GPUs, storage and compute NICs, DRAM."""
    return (
        f"{node.id}: {node.gpus_per_node} x {gpu_id}, SNIC {node.snic_count} x "
        f"{plain(node.snic_gbit_s)} Gb/s, CNIC {node.cnic_count} x {plain(node.cnic_gbit_s)} Gb/s "
        f"(PCIe Gen{node.cnic_pcie_gen} x{node.cnic_pcie_lanes}), DRAM {node.dram_gbyte:,.0f} GB "
        f"at {plain(node.dram_gbyte_s)} GB/s"
    )


def node_lines(sc: Scenario) -> list[str]:
    """The prefill and decode nodes' specs, one line when they are the same node."""
    pe = node_line(sc.prefill_node, sc.prefill_gpu.id)
    de = node_line(sc.decode_node, sc.decode_gpu.id)
    return [f"nodes: {pe}"] if pe == de else [f"prefill node: {pe}", f"decode node: {de}"]
