"""Where a scenario's efficiencies and latency floors come from (docs/model.md section 6):
one record per node profile in use, which every report prints as one line and carries in its
JSON (``efficiencies``)."""

from __future__ import annotations

from typing import Protocol

from dualpath_plan.formatting import number, plain
from dualpath_plan.frozen import record
from dualpath_plan.physics.links import PathOptions
from dualpath_plan.profiles.schemas import (
    EngineProfile,
    GpuProfile,
    NodeProfile,
    partial_fit_fields,
)


class Scenario(Protocol):
    """What the efficiencies read of a scenario (scenario/bundle.py's ``Scenario``, which
    imports this module: a protocol rather than an import back)."""

    @property
    def options(self) -> PathOptions: ...
    @property
    def overridden(self) -> tuple[str, ...]: ...
    @property
    def prefill_node(self) -> NodeProfile: ...
    @property
    def decode_node(self) -> NodeProfile: ...
    @property
    def prefill_gpu(self) -> GpuProfile: ...
    @property
    def decode_gpu(self) -> GpuProfile: ...
    def engine_for(self, node: NodeProfile) -> EngineProfile | None: ...


# Short labels of the calibration fields for the one-line summary, with their display scale
# and unit.
LABELS: dict[str, tuple[str, float, str]] = {
    "snic_efficiency": ("SNIC", 1.0, ""),
    "cnic_efficiency": ("CNIC", 1.0, ""),
    "pcie_efficiency": ("PCIe", 1.0, ""),
    "dram_efficiency": ("DRAM", 1.0, ""),
    "prefill_mfu": ("prefill MFU", 1.0, ""),
    "decode_hbm_efficiency": ("decode HBM", 1.0, ""),
    "prefill_hbm_reserve_gbyte": ("HBM reserve", 1.0, " GB"),
    "layer_fixed_s": ("layer floor", 1e3, " ms"),
    "ep_latency_s": ("EP latency", 1e6, " us"),
    "ep_link_efficiency": ("EP links", 1.0, ""),
    "tp_allreduce_latency_s": ("TP all-reduce", 1e6, " us"),
}
# The calibration fields an engine profile's operator model replaces (physics/operators.py):
# a node with an engine times its passes and steps from its operator curves, not these.
OPERATOR_REPLACED: tuple[str, ...] = (
    "prefill_mfu",
    "decode_hbm_efficiency",
    "layer_fixed_s",
    "ep_latency_s",
    "ep_link_efficiency",
    "tp_allreduce_latency_s",
)


# A node's efficiency_source in a few words, as every report says it.
SOURCE_WORDS = {
    "measured": "measured",
    "fitted, partial": "fitted in part",
    "transferred": "transferred",
    "datasheet": "not calibrated",
}


@record
class NodeEfficiencies:
    """One node profile's calibration: its source, the values that differ from the
    datasheet (1 or 0), their standard errors, and which were set on the command line."""

    node: str
    sides: str  # "prefill and decode", "prefill" or "decode"
    source: str  # measured, fitted, partial, transferred or datasheet (efficiency_source)
    origin: str | None  # the measured node a transfer takes them from
    values: dict[str, float]
    stderr: dict[str, float]
    overridden: tuple[str, ...]
    own: tuple[str, ...] = ()  # of a transferred node: the fields it sets itself
    set_to: tuple[float, ...] = ()  # the value of each field of ``overridden``
    gpu_note: str = ""  # the node's calibration applied to another GPU (--gpu)
    engine: str = ""  # the engine profile timing its passes and steps, described
    # Of a partial fit ("fitted, partial"): the calibration fields its fit did not pin down.
    unconfirmed: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        node: NodeProfile,
        sides: str,
        overridden: tuple[str, ...],
        gpu: str | None = None,
        engine: EngineProfile | None = None,
    ) -> NodeEfficiencies:
        defaults = NodeProfile.model_fields
        replaced = OPERATOR_REPLACED if engine is not None else ()
        values = {
            f: float(getattr(node, f))
            for f in NodeProfile.CALIBRATION_FIELDS
            if getattr(node, f) != defaults[f].default and f not in replaced
        }
        set_here = tuple(f for f in overridden if f in NodeProfile.CALIBRATION_FIELDS)
        own = (
            tuple(f for f in values if f not in set_here and node.calibrated_by(f) == node.id)
            if node.efficiency_source == "transferred"
            else ()
        )
        return cls(
            node=node.id,
            sides=sides,
            source=node.efficiency_source,
            origin=node.efficiencies_from,
            values=values,
            stderr={f: v for f, v in node.calibration_stderr.items() if f in values},
            overridden=set_here,
            set_to=tuple(float(getattr(node, f)) for f in set_here),
            own=own,
            gpu_note=(
                f"calibrated with {node.gpu}, run on {gpu} (--gpu)"
                if gpu is not None and gpu != node.gpu and values
                else ""
            ),
            engine=describe_engine(engine, gpu or node.gpu) if engine is not None else "",
            unconfirmed=partial_fit_fields(node),
        )

    def _shown(self, fields: list[str]) -> str:
        return ", ".join(
            f"{LABELS[f][0]} {number(self.values[f] * LABELS[f][1])}{LABELS[f][2]}" for f in fields
        )

    def describe(self) -> str:
        where = {
            "measured": "measured (its profile cites each fit or measurement)",
            "fitted, partial": "fitted in part (calibrate --allow-partial: "
            + (", ".join(self.unconfirmed) or "some fields")
            + " not pinned down by the points; its profile's unconfirmed table says why)",
            "transferred": f"transferred from {self.origin} (measured there, not on this node)",
            "datasheet": "datasheet speed of light (no calibration: upper bounds)",
        }[self.source]
        taken = [f for f in self.values if f not in self.own]
        shown = self._shown(taken)
        text = f"{self.node} ({self.sides})"
        if self.engine:
            text += f" {self.engine}; its links {where}"
        else:
            text += f" {where}"
        text += f": {shown}" if shown else ""
        if self.own:
            text += f"; its own: {self._shown(list(self.own))}"
        if self.gpu_note:
            text += f"; {self.gpu_note}"
        if self.overridden:
            # With the value: one set to its datasheet value is in no other part of the line.
            given = (f"{f}={plain(v)}" for f, v in zip(self.overridden, self.set_to, strict=True))
            text += f"; --set {', '.join(given)}"
        return text


@record
class Efficiencies:
    """The efficiencies in force for a scenario: off under --speed-of-light (or the paper's
    assumptions), else each node's calibration."""

    in_force: bool
    nodes: tuple[NodeEfficiencies, ...]

    @classmethod
    def of(cls, sc: Scenario) -> Efficiencies:
        return cls.of_nodes(
            sc,
            [sc.prefill_node],
            [sc.decode_node],
            {sc.prefill_node.id: sc.prefill_gpu.id, sc.decode_node.id: sc.decode_gpu.id},
        )

    @classmethod
    def of_nodes(
        cls,
        sc: Scenario,
        prefill: list[NodeProfile],
        decode: list[NodeProfile],
        gpus: dict[str, str] | None = None,
    ) -> Efficiencies:
        """The nodes of each side (a mixed cluster has several), each profile once; ``gpus``:
        the GPU each node runs (when --gpu overrides the node's own)."""
        sides: dict[str, tuple[NodeProfile, list[str]]] = {}
        for side, nodes in (("prefill", prefill), ("decode", decode)):
            for node in nodes:
                entry = sides.setdefault(node.id, (node, []))
                if side not in entry[1]:
                    entry[1].append(side)
        return cls(
            in_force=sc.options.efficiencies,
            nodes=tuple(
                NodeEfficiencies.of(
                    node,
                    " and ".join(names),
                    sc.overridden,
                    (gpus or {}).get(node.id),
                    sc.engine_for(node),
                )
                for node, names in sides.values()
            ),
        )

    @property
    def source(self) -> str:
        """One word for the whole scenario: speed-of-light, or the nodes' sources."""
        if not self.in_force:
            return "speed-of-light"
        return "+".join(dict.fromkeys(n.source for n in self.nodes))

    def line(self) -> str:
        if not self.in_force:
            return (
                "efficiencies: speed of light (--speed-of-light or --paper-term efficiencies): "
                "datasheet rates, no HBM reserve, no latency floors; throughput and APS are "
                "upper bounds, JCT a lower bound"
            )
        return "efficiencies: " + "; ".join(n.describe() for n in self.nodes)


def describe_engine(engine: EngineProfile, gpu: str) -> str:
    """An engine profile in the efficiencies line: whose curves time the passes and steps,
    and whether they were measured on the GPU they run on."""
    where = (
        f"measured on {engine.gpu}"
        if engine.gpu == gpu
        else f"measured on {engine.gpu}, transferred to {gpu}"
    )
    return (
        f"passes and steps timed by engine '{engine.id}' ({engine.framework} "
        f"{engine.framework_version} per-operator curves, {where})"
    )
