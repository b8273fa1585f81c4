"""``aic check``: whether the storage read path can feed an AIConfigurator result.

AIConfigurator (AIC) treats cached prefix tokens as free: no storage read, no SNIC, no
P->D transfer. For each row of its result (``best_config_topn_disagg.csv`` or ``..._agg.csv``)
this module computes (docs/model.md section 9):

- the KV read demand its throughput implies: seq/s x the KV bytes of its prefix (our model
  physics, ``kv_bytes_for_context``: prefix x KV bytes/token for full attention), GB/s;
- the row's model: the profile listing the row's ``model`` among the names it is published
  under (``hf_names``), its KV cache in the row's ``kvcache`` dtype (disagg: ``(p)kvcache``,
  the prefill side writes what storage holds), bytes per token from the model's architecture
  (``physics/model.py``);
- the row's cluster on ``--node``: disagg, (p)workers x (p)tp x (p)pp x (p)dp prefill GPUs and
  the same for decode, each side rounded up to whole nodes; agg, num_total_gpus on nodes that
  each prefill and decode. A side of G GPUs on n nodes of g GPUs gets G / (n g) of their NICs
  (storage and compute): a worker smaller than a node shares the node with other work;
- the storage-bound throughput: the one assembly of that cluster (``scenario/assemble.py``)
  with a workload of one turn (context = prefix, appended = isl - prefix, generated = osl),
  solved by the closed form with only the I/O links counting (every other capacity taken as
  unlimited): with basic loading (every hit byte through the prefill nodes' SNICs) and with
  dualpath (both paths, the optimal split); the binding links are the solver's;
- the verdict: 'storage can feed it' when basic loading sustains the row's seq/s, else
  'storage-bound: X seq/s basic, Y dualpath'.

An aggregated worker reads its own prefixes into its own HBM: there is no P->D transfer and no
second read path, so the agg bound counts the storage read links (SNICs, the per-client limit,
the storage aggregate) of all its nodes, and dualpath equals basic.
"""

from __future__ import annotations

import csv
import math
from dataclasses import replace
from pathlib import Path
from typing import Literal

import numpy as np

from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import MAX_AIC_CSV_BYTES, MAX_AIC_ROWS, iter_csv_rows, number, read_text
from dualpath_plan.formatting import number as figure
from dualpath_plan.frozen import record
from dualpath_plan.physics import model as phys
from dualpath_plan.physics.engines import Scheduling
from dualpath_plan.physics.links import IO_LINKS, LINK_TABLE, PathOptions
from dualpath_plan.physics.modes import MODE_TABLE
from dualpath_plan.physics.workload import workload_demand
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.profiles.schemas import (
    MAX_MAGNITUDE,
    KvDtype,
    ModelProfile,
    NodeProfile,
    WorkloadProfile,
)
from dualpath_plan.scenario.assemble import assemble
from dualpath_plan.scenario.bundle import Scenario
from dualpath_plan.scenario.provenance import Efficiencies
from dualpath_plan.scenario.spec import MAX_SIDE_NODES
from dualpath_plan.solvers.closed_form import solve

Schema = Literal["disagg", "agg"]
# The columns aic check appends to AIC's, in order.
OUTPUT_COLUMNS = (
    "kv_read_gbyte_s",
    "storage_bound_seq_s_basic",
    "storage_bound_seq_s_dualpath",
    "kv_bandwidth_bottleneck",
)
COMMON = ("model", "isl", "osl", "prefix", "seq/s")
REQUIRED: dict[Schema, tuple[str, ...]] = {
    "disagg": (
        *COMMON,
        "(p)workers",
        "(p)tp",
        "(p)pp",
        "(p)dp",
        "(d)workers",
        "(d)tp",
        "(d)pp",
        "(d)dp",
    ),
    "agg": (*COMMON, "num_total_gpus", "tp", "pp", "dp"),
}
FEEDS = "storage can feed it"
# The links an aggregated worker's reads cross: its SNICs and the storage's per-client limit
# (on the prefill side, where the assembly puts a node that prefills), and the storage
# cluster's aggregate out of storage (its reads).
AGG_LINKS = frozenset(
    link.name
    for link in LINK_TABLE
    if (link.reads_storage and link.side == "pe")
    or (link.side == "storage" and link.direction == "out")
)
MAX_GPUS = MAX_SIDE_NODES
# AIConfigurator's KV-cache quant modes (aiconfigurator_core/sdk/common.py, KVCacheQuantMode:
# bfloat16 2 B, int8 1 B, fp8 1 B per element) -> our cache dtypes. int8 has none.
AIC_KV_DTYPES: dict[str, KvDtype] = {"bfloat16": "bf16", "fp8": "fp8"}
# The column that names it, and the system the row was planned for, per schema.
KV_COLUMN: dict[Schema, str] = {"disagg": "(p)kvcache", "agg": "kvcache"}
SYSTEM_COLUMNS: dict[Schema, tuple[str, ...]] = {
    "disagg": ("(p)system", "(d)system"),
    "agg": ("system",),
}


@record
class AicRow:
    """One row of an AIC result, parsed: the numbers the check reads."""

    line: int
    fields: dict[str, str]
    model: ModelProfile
    seq_s: float
    isl: int
    osl: int
    prefix: int
    prefill_gpus: int
    decode_gpus: int  # agg: the same GPUs as prefill
    kv_from_row: bool = False  # the KV dtype is the row's kvcache column's, not the profile's


@record
class RowCheck:
    row: AicRow
    schema: Schema
    prefill_nodes: int
    decode_nodes: int
    prefill_nic_share: float  # of its nodes' NICs the prefill side gets: GPUs / nodes' GPUs
    decode_nic_share: float
    kv_bytes_per_token: float
    kv_read_gbyte_s: float
    basic_seq_s: float  # inf: no I/O limit
    dualpath_seq_s: float
    binding_basic: tuple[str, ...]
    binding_dualpath: tuple[str, ...]
    decode_path_share: float  # of the hit bytes, dualpath at its bound

    @property
    def feeds(self) -> bool:
        return self.basic_seq_s >= self.row.seq_s

    @property
    def verdict(self) -> str:
        if self.feeds:
            return FEEDS
        return (
            f"storage-bound: {_seq(self.basic_seq_s)} seq/s basic, "
            f"{_seq(self.dualpath_seq_s)} dualpath"
        )

    @property
    def bottleneck(self) -> str:
        """The links binding basic loading, the deployment AIC describes ("a + b" on a tie)."""
        return " + ".join(self.binding_basic)


@record
class AicCheck:
    source: str
    schema: Schema
    header: list[str]
    raw_lines: list[str]  # the header's and each row's line as in the file
    node: str
    storage: str | None
    rows: list[RowCheck]
    efficiencies: Efficiencies  # in force on the node (its calibration, or speed of light)
    warnings: tuple[str, ...] = ()  # one line each, for stderr


def _seq(v: float) -> str:
    return "unbounded" if math.isinf(v) else figure(v) if v < 10 else f"{v:,.1f}"


def _schema(header: list[str], source: str) -> Schema:
    if "(p)workers" in header or "(d)workers" in header:
        return "disagg"
    if "tp" in header or "num_total_gpus" in header:
        return "agg"
    raise PlanInputError(
        "neither AIConfigurator's disagg columns ((p)workers, (d)workers) nor its agg columns "
        "(num_total_gpus, tp); expected a best_config_topn_disagg.csv or _agg.csv",
        source=source,
        line=1,
    )


def read_aic_result(
    path: Path, registry: Registry
) -> tuple[Schema, list[str], list[str], list[AicRow]]:
    """(schema, header, raw lines, rows) of an AIC result CSV; every bad cell a
    PlanInputError naming the file, line and column."""
    source = str(path)
    text = read_text(path, what="AIConfigurator result (CSV)", max_bytes=MAX_AIC_CSV_BYTES)
    all_lines = text.splitlines()
    first = next((n for n, line in enumerate(all_lines, 1) if line.strip()), None)
    if first is None:
        raise PlanInputError(
            "empty; expected an AIConfigurator result with a header row", source=source
        )

    try:
        header = [h.strip() for h in next(csv.reader([all_lines[first - 1]]))]
    except csv.Error as exc:
        raise PlanInputError(f"malformed CSV: {exc}", source=source, line=first) from None
    schema = _schema(header, source)
    for name in OUTPUT_COLUMNS:
        if name in header:
            raise PlanInputError(
                "already has this column (an output of aic check?); give AIConfigurator's own file",
                source=source,
                line=first,
                field=name,
            )
    rows: list[AicRow] = []
    raw = [all_lines[first - 1]]
    models: dict[str, ModelProfile] = {}
    for n, cells in iter_csv_rows(
        path,
        what="AIConfigurator result (CSV)",
        max_bytes=MAX_AIC_CSV_BYTES,
        max_rows=MAX_AIC_ROWS,
        required=REQUIRED[schema],
        text=text,
    ):
        raw.append(all_lines[n - 1])
        rows.append(_row(n, cells, schema, source, registry, models))
    if not rows:
        raise PlanInputError("no rows; expected AIConfigurator's configurations", source=source)
    return schema, header, raw, rows


def _row(
    n: int,
    cells: dict[str, str],
    schema: Schema,
    source: str,
    registry: Registry,
    models: dict[str, ModelProfile],
) -> AicRow:
    def num(name: str, *, integer: bool = True, low: float = 1) -> float:
        return number(
            cells[name].strip(),
            source=source,
            field=name,
            line=n,
            text=True,
            integer=integer,
            low=low,
            high=MAX_MAGNITUDE,
        )

    hf = cells["model"].strip()
    if hf not in models:
        found = registry.model_by_hf_name(hf) if hf else None
        if found is None:
            raise PlanInputError(
                f"no model profile lists the Hugging Face name {hf!r} in hf_names; known: "
                + ", ".join(registry.hf_names()),
                source=source,
                line=n,
                field="model",
            )
        models[hf] = found
    model, kv_from_row = _kv_dtype(models[hf], cells, schema, source, n)
    seq_s = num("seq/s", integer=False, low=0)
    isl = int(num("isl"))
    osl = int(num("osl"))
    prefix = int(num("prefix", low=0))
    if prefix >= isl:
        raise PlanInputError(
            f"a prefix of {prefix:,} tokens leaves no new token of the isl of {isl:,}; expected "
            "prefix < isl",
            source=source,
            line=n,
            field="prefix",
        )

    def gpus(side: str) -> int:
        count = 1.0
        for part in ("tp", "pp", "dp"):
            count *= num(f"{side}{part}")
        return int(count)

    if schema == "disagg":
        p = int(num("(p)workers")) * gpus("(p)")
        d = int(num("(d)workers")) * gpus("(d)")
        total = (p, d)
        if "num_total_gpus" in cells and cells["num_total_gpus"].strip():
            stated = int(num("num_total_gpus"))
            if stated != p + d:
                raise PlanInputError(
                    f"{stated} GPUs, but (p)workers x (p)tp x (p)pp x (p)dp = {p} and the same "
                    f"for decode = {d} make {p + d}",
                    source=source,
                    line=n,
                    field="num_total_gpus",
                )
    else:
        per_worker = gpus("")
        all_gpus = int(num("num_total_gpus"))
        if all_gpus % per_worker:
            raise PlanInputError(
                f"{all_gpus} GPUs is not a whole number of workers of tp x pp x dp = {per_worker}",
                source=source,
                line=n,
                field="num_total_gpus",
            )
        total = (all_gpus, all_gpus)
    for g, name in zip(total, ("prefill", "decode"), strict=True):
        if g > MAX_GPUS:
            raise PlanInputError(
                f"{g:,} {name} GPUs; at most {MAX_GPUS:,}",
                source=source,
                line=n,
                field="num_total_gpus" if schema == "agg" else f"({name[0]})workers",
            )
    return AicRow(n, cells, model, seq_s, isl, osl, prefix, *total, kv_from_row=kv_from_row)


def _kv_dtype(
    model: ModelProfile, cells: dict[str, str], schema: Schema, source: str, line: int
) -> tuple[ModelProfile, bool]:
    """``model`` with the KV-cache dtype the row states (its kvcache column), and whether the
    row stated one; the profile's own where the column is absent or empty. The bytes per token
    follow from the architecture and the dtype (physics/model.py): DeepSeek-V3's FP8 MLA cache
    as SGLang and TensorRT-LLM keep it, (512 + 64) x 1 B x 61 layers = 35,136 B. A DSA model's
    FP8 cache keeps the profile's FP8 layout (fp8_flashmla: the sparse FlashMLA kernels read
    only FlashMLA's FP8-with-scale layout)."""
    column = KV_COLUMN[schema]
    raw = cells.get(column, "").strip()
    if not raw:
        return model, False
    dtype = AIC_KV_DTYPES.get(raw.casefold())
    if dtype is None:
        raise PlanInputError(
            f"KV-cache dtype {raw!r} is not one dualpath-plan models; expected "
            + " or ".join(AIC_KV_DTYPES),
            source=source,
            line=line,
            field=column,
        )
    if dtype == "fp8" and model.kv_cache_dtype == "fp8_flashmla" and model.has_dsa:
        return model, True
    if dtype == model.kv_cache_dtype:
        return model, True
    return model.model_copy(update={"kv_cache_dtype": dtype}), True


def _system_warnings(
    schema: Schema, rows: list[AicRow], node: NodeProfile, gpu_systems: tuple[str, ...]
) -> tuple[str, ...]:
    """One line per AIConfigurator system the rows were planned for that is not ``node``'s GPU
    (its profile's ``aic_systems``): a result planned for other hardware."""
    seen = {
        cell.strip()
        for row in rows
        for column in SYSTEM_COLUMNS[schema]
        if (cell := row.fields.get(column, "")) and cell.strip()
    }
    known = {s.casefold() for s in gpu_systems}
    lines = []
    for system in sorted(seen):
        if system.casefold() in known:
            continue
        its = (
            f"which is AIConfigurator's {', '.join(gpu_systems)}"
            if gpu_systems
            else "whose profile names no AIConfigurator system (aic_systems)"
        )
        lines.append(
            f"the result was planned for AIConfigurator system {system!r}, not the GPU of "
            f"--node '{node.id}' ('{node.gpu}', {its}); its seq/s need not hold on this node"
        )
    return tuple(lines)


def _nic_share(node: NodeProfile, share: float) -> NodeProfile:
    """``node`` with ``share`` of its storage and compute NICs' rate (counts are whole)."""
    if share >= 1.0:
        return node
    return node.model_copy(
        update={"snic_gbit_s": node.snic_gbit_s * share, "cnic_gbit_s": node.cnic_gbit_s * share}
    )


def _scenario(base: Scenario, row: AicRow, source: str) -> Scenario:
    """``base`` (node, storage, options) with the row's model and a one-turn workload."""
    workload = WorkloadProfile(
        id="aic-row",
        name=f"{source} line {row.line}",
        turns=1.0,
        context_tokens=float(row.prefix),
        append_tokens=float(row.isl - row.prefix),
        generated_tokens=float(row.osl),
    )
    try:
        demand = workload_demand(row.model, workload)
    except PlanInputError as exc:
        raise PlanInputError(exc.detail, source=source, line=row.line, field="isl") from None
    return base.with_turns(demand, model=row.model, workload=workload)


def _io_bound(
    sc: Scenario, mode: str, p: int, d: int, kept: frozenset[str] | tuple[str, ...]
) -> tuple[float, tuple[str, ...], float]:
    """(turns/s, binding links, DE-path share) of the one assembly with only ``kept`` links
    limiting: every other capacity unlimited."""
    asm = assemble(sc, mode, p, d)  # type: ignore[arg-type]
    inf = np.float64(np.inf)
    links = asm.links
    capacity = {k: (v if k in kept else inf) for k, v in links.capacity.items()}
    scaling = {k: s for k, s in links.scaling.items() if k in kept}
    sol = solve(replace(links, capacity=capacity, scaling=scaling))
    t = float(np.asarray(sol.throughput_turns_per_s))
    return t, tuple(sol.binding()), float(np.asarray(sol.decode_path_fraction))


def check_aic(
    path: Path,
    registry: Registry,
    *,
    node: str,
    storage: str | None,
    options: PathOptions = PathOptions(),
    scheduling: Scheduling = Scheduling(),
) -> AicCheck:
    """Every row of the AIC result at ``path`` checked on ``node`` nodes and ``storage``,
    with the path model's ``options`` (its terms: the node's calibration unless
    ``efficiencies`` is off) and ``scheduling`` (the imbalance that derates the links)."""
    source = str(path)
    schema, header, raw, rows = read_aic_result(path, registry)
    base = Scenario.from_ids(
        registry, node=node, storage=storage, options=options, scheduling=scheduling
    )
    per_node = base.prefill_node.gpus_per_node
    warnings = _system_warnings(
        schema, rows, base.prefill_node, registry.gpu(base.prefill_node.gpu).aic_systems
    )
    Bound = tuple[float, tuple[str, ...], float]
    cache: dict[tuple[object, ...], tuple[Bound, Bound]] = {}  # one per distinct cluster
    checks: list[RowCheck] = []
    for row in rows:
        p = math.ceil(row.prefill_gpus / per_node)
        d = math.ceil(row.decode_gpus / per_node)
        share_p = row.prefill_gpus / (p * per_node)
        share_d = row.decode_gpus / (d * per_node)
        key = (
            row.model.id,
            row.model.kv_cache_dtype,
            row.prefix,
            row.isl,
            row.osl,
            p,
            d,
            share_p,
            share_d,
        )
        if key not in cache:
            sc = replace(
                _scenario(base, row, source),
                prefill_node=_nic_share(base.prefill_node, share_p),
                decode_node=_nic_share(base.decode_node, share_d),
            )
            if schema == "disagg":
                basic = _io_bound(sc, "basic", p, d, IO_LINKS)
                dual = _io_bound(sc, "dualpath", p, d, IO_LINKS)
            else:
                basic = dual = _io_bound(sc, "basic", p, d, AGG_LINKS)
            cache[key] = (basic, dual)
        basic, dual = cache[key]
        hit = float(phys.kv_bytes_for_context(row.model, row.prefix))
        checks.append(
            RowCheck(
                row=row,
                schema=schema,
                prefill_nodes=p,
                decode_nodes=d,
                prefill_nic_share=share_p,
                decode_nic_share=share_d,
                kv_bytes_per_token=phys.kv_bytes_per_token(row.model),
                kv_read_gbyte_s=row.seq_s * hit / 1e9,
                basic_seq_s=basic[0],
                dualpath_seq_s=dual[0],
                binding_basic=basic[1],
                binding_dualpath=dual[1],
                decode_path_share=dual[2],
            )
        )
    return AicCheck(source, schema, header, raw, node, storage, checks, base.efficiencies, warnings)


__all__ = ["FEEDS", "MODE_TABLE", "OUTPUT_COLUMNS", "AicCheck", "RowCheck", "check_aic"]
