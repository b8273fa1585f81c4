"""The inputs of a scenario and their defaults, declared once.

:class:`ScenarioSpec` is what a user states: profile ids, node counts, agents, SLOs, the
scheduler and which extended terms apply. The CLI builds its shared option block from these
fields (``cli/options.py``: each field's flags and help are here), validation cases and
``check`` baselines validate their ``inputs`` against it, and Python users construct it
directly. ``Scenario.from_spec`` resolves the ids into profiles.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import replace
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from dualpath_plan import plausible
from dualpath_plan.errors import PlanInputError, echoed_input
from dualpath_plan.formatting import plain
from dualpath_plan.frozen import record
from dualpath_plan.physics.engines import Scheduling
from dualpath_plan.physics.links import PathOptions
from dualpath_plan.units import MIN_BYTES, parse_bytes

# Nodes on one side of a cluster, at most: far beyond any deployment (the paper's largest is
# 144 nodes), and it keeps every product of node counts and rates finite.
MAX_SIDE_NODES = 1_000_000
# The largest cluster a search (outcomes/sizing.py) may try: each size evaluates every split,
# so the work grows with the square of this; 4,096 nodes (32,768 GPUs at 8 per node) is beyond
# any deployment the paper or its peers describe (the paper's largest is 1,152 GPUs). Here, not
# in the search's module, so that size's --help text does not import the search.
MAX_NODES = 4096
# The largest cluster a search tries unless told (size --max-nodes).
DEFAULT_MAX_NODES = 1024


def check_max_nodes(max_nodes: int) -> int:
    """``max_nodes`` if a search may try clusters that large (2 to MAX_NODES): checked whether
    or not a search runs, so a bad --max-nodes is never silently accepted."""
    if not 2 <= max_nodes <= MAX_NODES:
        raise PlanInputError(
            f"expected 2 to {MAX_NODES:,} nodes, got {max_nodes}", field="--max-nodes"
        )
    return max_nodes


# Agents of an offline run, at most: the paper's largest is 48K; the bound keeps the JCT finite.
MAX_AGENTS = 1_000_000_000
PAPER_TERMS: tuple[str, ...] = tuple(PathOptions.__dataclass_fields__)
SCHEDULERS = ("ideal", "round_robin", "queue_aware")


def _opt(*flags: str, help: str, group: str, **kw: Any) -> Any:
    """A field with its command-line flags and its help text."""
    return Field(json_schema_extra={"flags": list(flags), "group": group}, description=help, **kw)


class ScenarioSpec(BaseModel):
    """A scenario as a user states it. Groups: ``profiles`` (which hardware, model and
    workload), ``cluster`` (node counts), ``serving`` (agents, SLOs), ``scheduling`` and
    ``terms`` (which extended terms of the path model apply)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    model: str = _opt(
        "--model", help="Model profile id.", group="profiles", default="deepseek-v3.2"
    )
    workload: str = _opt(
        "--workload", help="Workload profile id.", group="profiles", default="paper-64k"
    )
    node: str = _opt(
        "--node", help="Node profile for both sides.", group="profiles", default="dualpath-hopper"
    )
    prefill_node: str | None = _opt(
        "--prefill-node", help="Prefill node profile (default --node).", group="profiles",
        default=None,
    )  # fmt: skip
    decode_node: str | None = _opt(
        "--decode-node", help="Decode node profile (default --node).", group="profiles",
        default=None,
    )  # fmt: skip
    gpu: str | None = _opt(
        "--gpu", help="Override the nodes' GPU profile.", group="profiles", default=None
    )
    engine: str | None = _opt(
        "--engine",
        help="Engine profile (a framework's measured per-operator curves) for every node, "
        "instead of each node's own.",
        group="profiles",
        default=None,
    )
    storage: str = _opt(
        "--storage", help="Storage profile id, or 'none'.", group="profiles", default="3fs"
    )
    storage_capacity: str | None = _opt(
        "--storage-capacity",
        help="The store's KV capacity with its unit (500TB, 2PiB, 64GB): the cached context "
        "beyond it is recomputed by prefill (the hit rate at this capacity: a trace's LRU hit "
        "curve, else whole agent contexts resident with probability capacity / working set); "
        "each mode reads what of it is faster to read than to recompute; the store's "
        "bandwidth stays the profile's (default: no capacity limit).",
        group="store", default=None,
    )  # fmt: skip
    storage_nodes: int | None = _opt(
        "--storage-nodes",
        help="A store of N of the storage profile's nodes: N x its capacity and read/write "
        "bandwidth per node (instead of its own aggregate), the hit rate at that capacity.",
        group="store", default=None,
    )  # fmt: skip
    pue: float = _opt(
        "--pue",
        help="The site's power usage effectiveness (facility power over IT power): the power "
        "of owned nodes (priced by capital) is their power_w x PUE (default 1: no overhead).",
        group="cost", default=1.0, gt=0, allow_inf_nan=False,
    )  # fmt: skip
    power_price: float | None = _opt(
        "--power-price",
        help="Electricity, $/kWh, for nodes priced by capital (a price per hour includes "
        "power); default: power not priced (said so beside the cost).",
        group="cost", default=None, gt=0, allow_inf_nan=False,
    )  # fmt: skip
    prefill_nodes: int = _opt(
        "-P", "--prefill-nodes", help="Prefill nodes.", group="cluster", default=2,
    )  # fmt: skip
    decode_nodes: int = _opt(
        "-D", "--decode-nodes", help="Decode nodes.", group="cluster", default=4,
    )  # fmt: skip
    agents: int = _opt(
        "--agents", help="Agents started together (offline JCT).", group="serving", default=2048,
        ge=1, le=MAX_AGENTS,
    )  # fmt: skip
    ttft_slo_s: float = _opt(
        "--ttft-slo", help="TTFT SLO, seconds (paper 7.3).", group="serving", default=4.0, gt=0,
        allow_inf_nan=False,
    )  # fmt: skip
    tpot_slo_s: float = _opt(
        "--tpot-slo", help="TPOT SLO, seconds (paper 7.3).", group="serving", default=0.050,
        gt=0, allow_inf_nan=False,
    )  # fmt: skip
    slo_percentile: str | None = _opt(
        "--slo-percentile",
        help="Hold the SLOs on a percentile of the turns, not their mean: P (both) or "
        "P_TTFT,P_TPOT, each above 0 and below 100 or 'mean' (90,99: p90 TTFT and p99 TPOT). "
        "A tail approximation of the waits (docs/model.md section 6c).",
        group="serving", default=None,
    )  # fmt: skip
    max_utilization: float = _opt(
        "--max-utilization",
        help="Headroom: the busiest link's utilization at most U, 0 < U <= 1 (default 0.8, a "
        "fifth kept for bursts), for the online APS and for sizing to --target-aps: APS = "
        "min(APS under the SLOs, U x the saturated agents/s). The offline JCT runs saturated "
        "(agents started together) and is not capped; 1 is no headroom.",
        group="serving", default=0.8, gt=0, le=1, allow_inf_nan=False,
    )  # fmt: skip
    scheduler: str | None = _opt(
        "--scheduler",
        help="Load-imbalance model for every mode: ideal, round_robin or queue_aware "
        "(default: each mode's own, round_robin for basic and the unscheduled ablation modes, "
        "queue_aware for the others).",
        group="scheduling",
        default=None,
    )
    requests_per_engine: float = _opt(
        "--requests-per-engine",
        help="Requests in flight per engine, k, of the imbalance model "
        "(round_robin: 1 + v sqrt(2 ln n / k); queue_aware: 1 + 1/k across nodes, its GPUs "
        "balanced and batched at what beta admits).",
        group="scheduling", default=16.0, ge=1, le=1e6, allow_inf_nan=False,
    )  # fmt: skip
    load_cv: float = _opt(
        "--load-cv", help="Coefficient of variation v of per-request load (round_robin).",
        group="scheduling", default=0.5, ge=0, le=100, allow_inf_nan=False,
    )  # fmt: skip
    paper_assumptions: bool = _opt(
        "--paper-assumptions",
        help="The paper's eq. (1)-(9) model: no miss KV, write-back, collectives' share, "
        "efficiencies, PCIe link or storage limits, and balanced reads (the ideal scheduler "
        "unless --scheduler is given).",
        group="terms", default=False,
    )  # fmt: skip
    speed_of_light: bool = _opt(
        "--speed-of-light",
        help="Datasheet rates on purpose: every efficiency 1, no HBM reserve, no latency "
        "floors; the best case (throughput and APS can only be lower, the JCT only longer; "
        "default: each node's calibration, as its efficiency_source says).",
        group="terms", default=False,
    )  # fmt: skip
    paper_terms: tuple[str, ...] = _opt(
        "--paper-term",
        help="Switch one extended term to the paper's assumption (repeatable): "
        + ", ".join(PAPER_TERMS) + ".",
        group="terms", default=(),
    )  # fmt: skip

    @field_validator(
        "model", "workload", "node", "prefill_node", "decode_node", "gpu", "engine", "storage"
    )
    @classmethod
    def _an_id(cls, v: str | None, info: ValidationInfo) -> str | None:
        # An empty id read as none given: --storage '' ran with no storage limit, --gpu '' and
        # --engine '' with the nodes' own (found in a trial).
        if v is not None and not v.strip():
            none = " ('none' for no storage limit)" if info.field_name == "storage" else ""
            raise ValueError(f"expected a profile id{none}, got an empty one")
        return v

    @field_validator("prefill_nodes", "decode_nodes")
    @classmethod
    def _node_count(cls, v: int) -> int:
        if not 1 <= v <= MAX_SIDE_NODES:
            raise ValueError(
                f"a P/D cluster needs at least one node per side (at most {MAX_SIDE_NODES:,})"
            )
        return v

    @field_validator("storage_capacity")
    @classmethod
    def _capacity(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None:
            return v
        if info.data.get("storage") == "none":
            raise ValueError("a capacity of no store: give --storage with it, not 'none'")
        size = parse_bytes(v)
        if size is None or not (math.isfinite(size) and size >= MIN_BYTES):
            raise ValueError(
                "expected a finite size of at least 1 B with its unit (B, KB, MB, GB, TB, PB; "
                f"KiB to PiB: 500TB), got {v!r}"
            )
        return v

    @field_validator("storage_nodes")
    @classmethod
    def _store_nodes(cls, v: int | None, info: ValidationInfo) -> int | None:
        if v is None:
            return v
        if not 1 <= v <= MAX_SIDE_NODES:
            raise ValueError(f"expected 1 to {MAX_SIDE_NODES:,} storage nodes, got {v}")
        if info.data.get("storage_capacity") is not None:
            raise ValueError(
                "--storage-capacity gives the capacity, --storage-nodes the nodes that set it: "
                "give one of them"
            )
        if info.data.get("storage") == "none":
            raise ValueError("nodes of no store: give --storage with it, not 'none'")
        return v

    @field_validator("pue", "power_price")
    @classmethod
    def _plausible_cost(cls, v: float | None, info: ValidationInfo) -> float | None:
        # --pue 130 (a percent) or --power-price 12 (cents) priced power 100 times over.
        why = None if v is None else plausible.problem(str(info.field_name), v)
        if why is not None:
            raise ValueError(why)
        return v

    @field_validator("ttft_slo_s", "tpot_slo_s")
    @classmethod
    def _plausible(cls, v: float, info: ValidationInfo) -> float:
        # --ttft-slo 4000 (milliseconds typed where seconds are asked) planned for an hour.
        why = plausible.problem(str(info.field_name), v)
        if why is not None:
            raise ValueError(why)
        return v

    @field_validator("slo_percentile")
    @classmethod
    def _percentiles(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                SloPercentiles.parse(v)
            except PlanInputError as exc:
                raise ValueError(exc.detail) from None
        return v

    @field_validator("scheduler")
    @classmethod
    def _known_scheduler(cls, v: str | None) -> str | None:
        if v is not None and v not in SCHEDULERS:
            raise ValueError(f"expected {', '.join(SCHEDULERS)}, got {v!r}")
        return v

    @field_validator("paper_terms")
    @classmethod
    def _known_terms(cls, v: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        for term in v:
            if term not in PAPER_TERMS:
                raise ValueError(f"unknown term {term!r}; expected one of {', '.join(PAPER_TERMS)}")
        if v and info.data.get("paper_assumptions"):
            # --paper-assumptions switches every term: one more said nothing and was ignored.
            raise ValueError(
                "--paper-assumptions already switches every term to the paper's; give "
                "--paper-term without it"
            )
        return v

    @classmethod
    def build(
        cls, values: dict[str, Any], *, source: str | None = None, field_prefix: str = ""
    ) -> ScenarioSpec:
        """Validate ``values``; a bad one is a :class:`PlanInputError` naming its option (or,
        with ``source``, the file and the field)."""
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        if (
            values.get("node") is not None
            and values.get("prefill_node") is not None
            and values.get("decode_node") is not None
        ):
            # Both sides named, --node sets neither: said, not ignored.
            raise PlanInputError(
                "--node sets the sides --prefill-node and --decode-node do not; with both "
                "given it sets nothing: drop --node or one of them",
                source=source,
                field=f"{field_prefix}{'node' if source is not None else '--node'}",
            )
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            err = exc.errors()[0]
            name = str(err["loc"][0]) if err["loc"] else "inputs"
            info = cls.model_fields.get(name)
            where = (
                name
                if source is not None or info is None
                else "/".join((info.json_schema_extra or {}).get("flags", [name]))  # type: ignore[union-attr, arg-type]
            )
            msg = str(err["msg"]).removeprefix("Value error, ")
            slip = plausible.explained(name, err.get("input"))
            if slip is not None:
                msg = slip  # a bound crossed by a unit slip (--max-utilization 80) says so
            else:
                msg += echoed_input(err)  # our own checks say what they got; pydantic's do not
            raise PlanInputError(msg, source=source, field=f"{field_prefix}{where}") from None

    def with_(self, **changes: Any) -> ScenarioSpec:
        # What was given, and the changes: a default is not a choice (build's --node check).
        return type(self).build({**self.model_dump(exclude_unset=True), **changes})

    @property
    def options(self) -> PathOptions:
        """All extended terms, none (paper_assumptions), or all but the paper_terms ones."""
        if self.paper_assumptions:
            return PathOptions.paper()
        off = {t: False for t in self.paper_terms}
        if self.speed_of_light:
            off["efficiencies"] = False
        return replace(PathOptions(), **off)

    @property
    def scheduling(self) -> Scheduling:
        # The paper's model (eq. 1-9) assumes reads balanced over the nodes and GPUs: under
        # --paper-assumptions the scheduler is ideal unless --scheduler says otherwise.
        policy = "ideal" if self.scheduler is None and self.paper_assumptions else self.scheduler
        return Scheduling(
            policy=policy,  # type: ignore[arg-type]
            requests_per_engine=self.requests_per_engine,
            load_cv=self.load_cv,
        )

    @property
    def serving(self) -> ServingConfig:
        return ServingConfig(
            self.agents,
            self.ttft_slo_s,
            self.tpot_slo_s,
            self.max_utilization,
            SloPercentiles.parse(self.slo_percentile),
            self.pue,
            self.power_price,
        )

    @property
    def storage_capacity_bytes(self) -> float | None:
        """--storage-capacity in bytes (None: not given)."""
        if self.storage_capacity is None:
            return None
        size = parse_bytes(self.storage_capacity)
        assert size is not None  # validated
        return size

    @property
    def storage_id(self) -> str | None:
        """``none`` means no storage-cluster limit."""
        return None if self.storage == "none" else self.storage


def _default(name: str) -> Any:
    return ScenarioSpec.model_fields[name].default


@record
class SloPercentiles:
    """Which percentile of its turns each SLO holds (0 < p < 100; None: the mean, the
    default). ``--slo-percentile 90`` (both) or ``90,99`` (TTFT, TPOT), as Vidur's planner
    holds p90 TTFT and p99 TBT (docs/model.md section 6c)."""

    ttft: float | None = None
    tpot: float | None = None

    def __post_init__(self) -> None:
        for name in ("ttft", "tpot"):
            v = getattr(self, name)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0.0 < float(v) < 100.0:
                raise PlanInputError(
                    f"expected a percentile above 0 and below 100, got {v!r}",
                    field="--slo-percentile",
                )
            if float(v) < 1.0:
                raise PlanInputError(
                    f"{v!r}: a percentile is 0 to 100; did you mean {v * 100:g}?",
                    field="--slo-percentile",
                )

    @classmethod
    def parse(cls, text: str | None) -> SloPercentiles:
        """``--slo-percentile``'s text: None (the means), 'P' (both SLOs) or 'P,Q' (TTFT,
        TPOT), each a number or 'mean'."""
        if text is None:
            return cls()
        if not text.strip():
            # '' planned to the means without a word, as a flag not given (found in a trial;
            # 'mean' says that).
            raise PlanInputError(
                "expected P or P_TTFT,P_TPOT (each a percentile or 'mean'), got an empty value",
                field="--slo-percentile",
            )
        parts = [p.strip() for p in text.split(",")]
        if len(parts) > 2:
            raise PlanInputError(
                f"expected P or P_TTFT,P_TPOT, got {text!r}", field="--slo-percentile"
            )
        values: list[float | None] = []
        for part in parts:
            if part == "mean":
                values.append(None)
                continue
            try:
                v = float(part)
            except ValueError:
                raise PlanInputError(
                    f"expected a percentile (a number above 0 and below 100) or 'mean', got "
                    f"{part!r}",
                    field="--slo-percentile",
                ) from None
            values.append(v)
        ttft, tpot = values if len(values) == 2 else (values[0], values[0])
        return cls(ttft, tpot)

    def name(self, metric: Literal["TTFT", "TPOT"]) -> str:
        """'TTFT' for a mean SLO, 'p90 TTFT' for a percentile one (TPOT alike)."""
        v = self.ttft if metric == "TTFT" else self.tpot
        return metric if v is None else f"p{v:g} {metric}"

    @property
    def words(self) -> str:
        """How the SLOs read: 'means', 'p90' or 'p90 TTFT, p99 TPOT'."""
        if self.ttft is None and self.tpot is None:
            return "means"
        t = "mean" if self.ttft is None else f"p{self.ttft:g}"
        d = "mean" if self.tpot is None else f"p{self.tpot:g}"
        return t if t == d else f"{t} TTFT, {d} TPOT"


@record
class ServingConfig:
    """What the outcome models need beyond the cluster: agents started together (offline), the
    SLOs and the busiest link's utilization cap (online); the defaults are the spec's."""

    agents: int = _default("agents")
    ttft_slo_s: float = _default("ttft_slo_s")
    tpot_slo_s: float = _default("tpot_slo_s")
    max_utilization: float = _default("max_utilization")
    # Percentile SLOs (None: on the means, as the paper states them).
    slo_percentiles: SloPercentiles = SloPercentiles()
    # The site, for a plan's cost (outcomes/cost.py): --pue and --power-price ($/kWh; None:
    # power of owned nodes not priced).
    pue: float = _default("pue")
    power_price: float | None = None

    @property
    def slo_parts(self) -> tuple[str, str]:
        """The SLOs as every report writes them: ('TTFT 4 s', 'TPOT 50 ms'), or with
        percentiles ('p90 TTFT 4 s', 'p99 TPOT 50 ms')."""
        pct = self.slo_percentiles
        return (
            f"{pct.name('TTFT')} {plain(self.ttft_slo_s)} s",
            f"{pct.name('TPOT')} {plain(self.tpot_slo_s * 1e3)} ms",
        )

    def __post_init__(self) -> None:
        # The spec's own bounds, for a library caller too (agents=0 divided by zero, -5 gave a
        # negative JCT, NaN a NaN one).
        if not 0.0 < self.max_utilization <= 1.0:  # NaN fails too
            raise PlanInputError(
                f"expected 0 < U <= 1, got {self.max_utilization!r}", field="max_utilization"
            )
        if not (math.isfinite(self.pue) and self.pue > 0):
            raise PlanInputError(f"expected a finite PUE > 0, got {self.pue!r}", field="pue")
        pp = self.power_price
        if pp is not None and not (math.isfinite(pp) and pp > 0):
            raise PlanInputError(f"expected a finite $/kWh > 0, got {pp!r}", field="power_price")
        a = self.agents
        if isinstance(a, bool) or not isinstance(a, numbers.Integral) or not 1 <= a <= MAX_AGENTS:
            raise PlanInputError(
                f"expected whole agents from 1 to {MAX_AGENTS:,}, got {a!r}", field="agents"
            )
        for name in ("ttft_slo_s", "tpot_slo_s"):
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, numbers.Real)
                or not (math.isfinite(v) and v > 0)
            ):
                raise PlanInputError(f"expected seconds > 0, got {v!r}", field=name)
            why = plausible.problem(name, v)
            if why is not None:
                raise PlanInputError(why, field=name)


DEFAULT_SPEC = ScenarioSpec()
OPTION_GROUPS = ("profiles", "store", "cost", "cluster", "serving", "scheduling", "terms")
Group = Literal["profiles", "store", "cost", "cluster", "serving", "scheduling", "terms"]
