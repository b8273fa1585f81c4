"""Where a report's numbers come from, in lines any report can print: the nodes' datasheet
specs and the efficiencies in force. One place, so that every report says it the same way."""

from __future__ import annotations

from dualpath_plan.profiles.schemas import NodeProfile
from dualpath_plan.scenario.bundle import Scenario

# The node fields that derate a datasheet rate to an achieved one (profiles/schemas.py): each
# defaults to 1.0, the speed of light.
EFFICIENCY_FIELDS: tuple[str, ...] = tuple(
    name
    for name in NodeProfile.model_fields
    if name.endswith("_efficiency") or name.endswith("_mfu")
)


def _efficiencies(node: NodeProfile) -> str:
    return ", ".join(f"{name} {getattr(node, name):g}" for name in EFFICIENCY_FIELDS)


def efficiency_line(sc: Scenario) -> str:
    """The efficiencies in force, per node profile: each efficiency field and its value, or
    that they are off (the paper's assumptions: every link at its datasheet rate)."""
    if not sc.options.efficiencies:
        return "efficiencies: off (paper assumptions), every link at its datasheet rate"
    pe, de = sc.prefill_node, sc.decode_node
    if pe.id == de.id and _efficiencies(pe) == _efficiencies(de):
        return f"efficiencies ({pe.id}): {_efficiencies(pe)}"
    return (
        f"efficiencies: prefill {pe.id}: {_efficiencies(pe)}; decode {de.id}: {_efficiencies(de)}"
    )


def node_line(node: NodeProfile, gpu_id: str) -> str:
    """A node's datasheet specs in a line: GPUs, storage and compute NICs, DRAM."""
    return (
        f"{node.id}: {node.gpus_per_node} x {gpu_id}, SNIC {node.snic_count} x "
        f"{node.snic_gbit_s:g} Gb/s, CNIC {node.cnic_count} x {node.cnic_gbit_s:g} Gb/s "
        f"(PCIe Gen{node.cnic_pcie_gen} x{node.cnic_pcie_lanes}), DRAM {node.dram_gbyte:,.0f} GB "
        f"at {node.dram_gbyte_s:g} GB/s"
    )


def node_lines(sc: Scenario) -> list[str]:
    """The prefill and decode nodes' specs, one line when they are the same node."""
    pe = node_line(sc.prefill_node, sc.prefill_gpu.id)
    de = node_line(sc.decode_node, sc.decode_gpu.id)
    return [f"nodes: {pe}"] if pe == de else [f"prefill node: {pe}", f"decode node: {de}"]
