"""Validation against the DualPath paper: one TOML file per published claim.

Each case names the claim, its source (section, figure, table), the paper's value, a relative
tolerance, what to compute (``kind``) and its inputs. A case the model is known not to
reproduce carries ``known_gap`` with the reason: it is reported as a gap (never as a pass), and
it fails the run if it starts passing, so the marker is removed when the model improves.
Adding a case is adding a file (here, or in a directory given with ``--cases``).
"""

from __future__ import annotations

import itertools
import math
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dualpath_plan.errors import PlanInputError
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


class Case(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    claim: str
    source: str
    kind: Kind
    paper: float = Field(allow_inf_nan=False)
    tolerance: float = Field(ge=0, allow_inf_nan=False)  # relative
    note: str = ""
    known_gap: str = ""
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
    cases: dict[str, Case] = {}
    for directory in [CASES_DIR, *(extra_dirs or [])]:
        if not directory.is_dir():
            raise PlanInputError("no such case directory", source=str(directory), field="--cases")
        for path in sorted(directory.glob("*.toml")):
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except tomllib.TOMLDecodeError as exc:
                raise PlanInputError(f"malformed TOML: {exc}", source=str(path)) from None
            try:
                cases[path.stem] = Case.model_validate({"id": path.stem, **data})
            except ValidationError as exc:
                err = exc.errors()[0]
                loc = ".".join(str(p) for p in err["loc"])
                raise PlanInputError(err["msg"], source=str(path), field=loc) from None
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
