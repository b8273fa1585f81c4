"""Validation against the DualPath paper: one TOML file per published claim.

Each case names the claim, its source (section, figure, table), the paper's value, a relative
tolerance, what to compute (``kind``) and its inputs. A case the model is known not to
reproduce carries ``known_gap`` with the reason: it is reported as a gap (never as a pass), and
it fails the run if it starts passing, so the marker is removed when the model improves.
Adding a case is adding a file (here, or in a directory given with ``--cases``).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, Strict, StrictBool, StrictStr, ValidationError

from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import MAX_CASE_BYTES, load_toml
from dualpath_plan.profiles.registry import Registry

CASES_DIR = Path(__file__).resolve().parent / "cases"

Kind = Literal[
    "ratio",
    "workload_ratio",
    "trend",
    "bounds",
    "speedup_jct",
    "speedup_aps",
    "jct",
    "aps",
    "ordering",
    "storage_ceiling",
]


_Id = Annotated[StrictStr, Field(max_length=200)]
_Count = Annotated[int, Strict(), Field(ge=1, le=1_000_000)]
_Tokens = Annotated[float, Strict(), Field(ge=0, le=1e12)]


class CaseInputs(BaseModel):
    """What a case computes from: every key one of these, of this type (strict: no bool or
    string as a number); which keys a kind needs is :data:`KIND_INPUTS`."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    model: _Id | None = None
    workload: _Id | None = None
    node: _Id | None = None
    prefill_nodes: _Count | None = None
    decode_nodes: _Count | None = None
    agents: _Count | None = None
    context_tokens: _Tokens | None = None
    append_tokens: _Tokens | None = None
    base: _Id | None = None
    gpu: _Id | None = None
    dtype: Literal["bf16", "fp8", "fp4", "best"] | None = None
    metric: _Id | None = None
    mode: _Id | None = None
    modes: Annotated[list[_Id], Field(min_length=2, max_length=20)] | None = None
    paper_assumptions: StrictBool | None = None


KIND_INPUTS: dict[str, tuple[str, ...]] = {
    "ratio": ("model", "context_tokens", "append_tokens"),
    "workload_ratio": ("model", "workload"),
    "trend": ("base", "dtype", "gpu", "metric"),
    "bounds": ("metric",),
    "jct": ("mode",),
    "aps": ("mode",),
    "ordering": ("modes",),
    "storage_ceiling": ("prefill_nodes", "decode_nodes"),
}


class Case(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    id: str
    claim: StrictStr
    source: StrictStr
    kind: Kind
    paper: float = Field(allow_inf_nan=False)
    tolerance: float = Field(ge=0, allow_inf_nan=False)  # relative
    note: StrictStr = ""
    known_gap: StrictStr = ""
    inputs: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class CaseResult:
    case: Case
    model: float
    error: float  # relative: model / paper - 1

    @property
    def within(self) -> bool:
        return abs(self.error) <= self.case.tolerance + 1e-12

    @property
    def status(self) -> str:
        if self.case.known_gap:
            return "unexpected pass" if self.within else "gap"
        return "pass" if self.within else "FAIL"

    @property
    def ok(self) -> bool:
        """Does not fail the run: a pass, or a known gap that still misses."""
        return self.status in ("pass", "gap")


def load_cases(extra_dirs: list[Path] | None = None) -> list[Case]:
    """Every case file of the shipped directory and ``extra_dirs``, read through
    :mod:`dualpath_plan.files` (regular UTF-8 files, size and nesting limits, finite numbers) and
    checked: the case's keys and types (strict), its inputs' keys and types, the inputs its
    kind needs, a known mode and metric name. Every failure names the file and the field."""
    from typing import get_args

    from dualpath_plan.outcomes.serving import OutcomeMode
    from dualpath_plan.physics.trend import TrendRow

    modes = get_args(OutcomeMode)
    metrics = {
        "bounds": ("pd_min", "pd_max"),
        "trend": (
            "io_fall",
            *(f.name for f in dataclasses.fields(TrendRow) if f.type in (float, "float")),
        ),
    }
    cases: dict[str, Case] = {}
    for directory in [CASES_DIR, *(extra_dirs or [])]:
        if not directory.is_dir():
            raise PlanInputError("no such case directory", source=str(directory), field="--cases")
        for path in sorted(directory.glob("*.toml")):
            source = str(path)
            data = load_toml(path, what="case file (TOML)", max_bytes=MAX_CASE_BYTES)
            try:
                case = Case.model_validate({"id": path.stem, **data})
                inputs = CaseInputs.model_validate(case.inputs)
            except ValidationError as exc:
                err = exc.errors()[0]
                loc = ".".join(str(p) for p in err["loc"])
                if exc.title == CaseInputs.__name__:
                    loc = f"inputs.{loc}" if loc else "inputs"
                msg = err["msg"]
                if err["type"] not in ("missing", "extra_forbidden") and "input" in err:
                    msg += f" (got {err['input']!r})"
                raise PlanInputError(msg, source=source, field=loc) from None
            needed = KIND_INPUTS.get(case.kind, ())
            for key in needed:
                if getattr(inputs, key) is None:
                    raise PlanInputError(
                        f"a '{case.kind}' case needs inputs {', '.join(needed)}",
                        source=source,
                        field=f"inputs.{key}",
                    )
            for key, value in (("mode", inputs.mode), *(("modes", m) for m in inputs.modes or ())):
                if value is not None and value not in modes:
                    raise PlanInputError(
                        f"unknown mode {value!r}; expected one of {', '.join(modes)}",
                        source=source,
                        field=f"inputs.{key}",
                    )
            known = metrics.get(case.kind)
            if known and inputs.metric not in known:
                raise PlanInputError(
                    f"unknown {case.kind} metric {inputs.metric!r}; expected one of "
                    f"{', '.join(known)}",
                    source=source,
                    field="inputs.metric",
                )
            cases[path.stem] = case
    return list(cases.values())


def _scenario(registry: Registry, inputs: dict[str, Any]):  # type: ignore[no-untyped-def]
    from dualpath_plan.plan import Scenario

    keys = ("model", "workload", "node", "prefill_nodes", "decode_nodes")
    return Scenario.from_ids(registry, **{k: inputs[k] for k in keys if k in inputs})


def evaluate_case(case: Case, registry: Registry) -> float:
    """The model's value for a case."""
    from dualpath_plan.outcomes.serving import ServingConfig, evaluate, evaluate_mode
    from dualpath_plan.physics import model as phys
    from dualpath_plan.physics.links import Cluster, Demand, SideCaps
    from dualpath_plan.physics.trend import trend
    from dualpath_plan.physics.workload import turn_demand, turn_mix
    from dualpath_plan.solvers.closed_form import solve

    i = case.inputs
    cfg = ServingConfig(agents=int(i.get("agents", 2048)))
    if case.kind == "ratio":
        m = registry.model(i["model"])
        return float(
            phys.cache_compute_ratio_gb_per_pflop(m, i["context_tokens"], i["append_tokens"])
        )
    if case.kind == "workload_ratio":
        m = registry.model(i["model"])
        return turn_demand(m, turn_mix(registry.workload(i["workload"]))).gb_per_pflop
    if case.kind == "trend":
        gpus = [registry.gpu(g) for g in registry.ids("gpu")]
        rows = {r.gpu: r for r in trend(gpus, registry.gpu(i["base"]), i["dtype"])}
        row = rows[i["gpu"]]
        return 1.0 / row.io_to_compute_x if i["metric"] == "io_fall" else getattr(row, i["metric"])
    if case.kind == "bounds":
        from dualpath_plan.physics.links import PathOptions

        sc = _scenario(registry, i)
        if i.get("paper_assumptions"):
            sc = replace(sc, options=PathOptions.paper())
        return float(getattr(sc.bounds(), i["metric"]))
    if case.kind == "speedup_jct":
        return evaluate(_scenario(registry, i), cfg, ("basic", "dualpath")).speedup_jct
    if case.kind == "speedup_aps":
        return evaluate(_scenario(registry, i), cfg, ("basic", "dualpath")).speedup_aps
    if case.kind == "jct":
        return evaluate_mode(_scenario(registry, i), i["mode"], cfg).jct_s
    if case.kind == "aps":
        return evaluate_mode(_scenario(registry, i), i["mode"], cfg).aps
    if case.kind == "ordering":
        sc = _scenario(registry, i)
        jct = [evaluate_mode(sc, m, cfg).jct_s for m in i["modes"]]
        return 1.0 if all(a > b for a, b in itertools.pairwise(jct)) else 0.0
    if case.kind == "storage_ceiling":
        big = np.float64(1e18)
        caps = SideCaps(*(big for _ in range(10)))
        caps = replace(caps, snic_read=np.float64(50e9))
        cluster = Cluster(
            np.float64(i["prefill_nodes"]),
            np.float64(i["decode_nodes"]),
            caps,
            caps,
            big,
            np.float64(math.inf),
            np.float64(math.inf),
        )
        demand = Demand(*(np.float64(v) for v in (1.3e9, 0.0, 0.0, 0.0, 6e13, 176.0)))
        return float(
            solve(cluster, demand, "dualpath").throughput_turns_per_s
            / solve(cluster, demand, "basic").throughput_turns_per_s
        )
    raise PlanInputError(f"unknown kind {case.kind!r}", field="kind")


def run_validation(registry: Registry, cases: list[Case]) -> list[CaseResult]:
    out = []
    for case in cases:
        value = evaluate_case(case, registry)
        error = value / case.paper - 1.0 if case.paper else value
        out.append(CaseResult(case, value, error))
    return out
