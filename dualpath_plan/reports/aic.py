"""The ``aic check`` and ``aic import-system`` reports: JSON payloads, terminal tables and
AIC's CSV with our columns appended."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dualpath_plan.formatting import finite
from dualpath_plan.outcomes.aic import OUTPUT_COLUMNS, AicCheck, RowCheck
from dualpath_plan.reports.provenance import efficiency_line, efficiency_payload


def _layout(r: RowCheck) -> str:
    if r.schema == "agg":
        return f"{r.prefill_nodes} agg ({r.row.prefill_gpus} GPUs)"
    return f"{r.prefill_nodes}P{r.decode_nodes}D ({r.row.prefill_gpus}+{r.row.decode_gpus} GPUs)"


def _share_note(c: AicCheck) -> str | None:
    """A line when a side fills its nodes only in part (and so gets that share of their
    NICs), else None."""
    if all(r.prefill_nic_share >= 1 and r.decode_nic_share >= 1 for r in c.rows):
        return None
    return (
        "a side with fewer GPUs than its nodes hold gets that share of their storage and "
        "compute NICs (e.g. 4 of 8 GPUs: half); --json gives each row's share"
    )


def check_payload(c: AicCheck) -> dict[str, Any]:
    return {
        "file": c.source,
        "schema": c.schema,
        "node": c.node,
        "storage": c.storage,
        "efficiencies": efficiency_payload(c.efficiencies),
        "warnings": list(c.warnings),
        "rows": [
            {
                "line": r.row.line,
                "model": r.row.fields["model"].strip(),
                "model_profile": r.row.model.id,
                "kv_cache_dtype": r.row.model.kv_cache_dtype,
                "kv_cache_dtype_from": "kvcache column" if r.row.kv_from_row else "model profile",
                "kv_bytes_per_token": r.kv_bytes_per_token,
                "seq_s": r.row.seq_s,
                "isl": r.row.isl,
                "osl": r.row.osl,
                "prefix": r.row.prefix,
                "prefill_gpus": r.row.prefill_gpus,
                "decode_gpus": r.row.decode_gpus,
                "prefill_nodes": r.prefill_nodes,
                "decode_nodes": r.decode_nodes,
                "prefill_nic_share": r.prefill_nic_share,
                "decode_nic_share": r.decode_nic_share,
                "kv_read_gbyte_s": r.kv_read_gbyte_s,
                "storage_bound_seq_s_basic": finite(r.basic_seq_s),
                "storage_bound_seq_s_dualpath": finite(r.dualpath_seq_s),
                "binding_basic": list(r.binding_basic),
                "binding_dualpath": list(r.binding_dualpath),
                "decode_path_share": r.decode_path_share,
                "storage_feeds": r.feeds,
                "verdict": r.verdict,
            }
            for r in c.rows
        ],
    }


def _seq(v: float) -> str:
    return "unbounded" if math.isinf(v) else f"{v:,.1f}"


def render_check(c: AicCheck, console: Console) -> None:
    console.print(
        escape(
            f"{c.source}: AIConfigurator {c.schema} result, {len(c.rows)} rows, on "
            f"'{c.node}' nodes, storage {c.storage or 'none'}"
        )
    )
    console.print(escape(efficiency_line(c.efficiencies)), highlight=False)
    table = Table()
    for col, justify in (
        ("line", "right"),
        ("layout", "left"),
        ("seq/s", "right"),
        ("KV GB/s", "right"),
        ("basic", "right"),
        ("dualpath", "right"),
        ("binding (basic)", "left"),
        ("verdict", "left"),
    ):
        table.add_column(col, justify=justify, no_wrap=col != "verdict")  # type: ignore[arg-type]
    for r in c.rows:
        table.add_row(
            str(r.row.line),
            _layout(r),
            f"{r.row.seq_s:,.3f}",
            f"{r.kv_read_gbyte_s:,.1f}",
            _seq(r.basic_seq_s),
            _seq(r.dualpath_seq_s),
            escape(r.bottleneck),
            escape(r.verdict),
        )
    console.print(table)
    console.print(
        "KV GB/s: the read rate the row's seq/s needs, seq/s x prefix x KV bytes/token; basic, "
        "dualpath: the seq/s the cluster sustains with only its I/O links limiting (basic: the "
        "prefill nodes' SNICs read every hit byte; dualpath: both paths at the optimal split; "
        "agg: every node reads its own prefixes, no second path)"
    )
    kv = sorted(
        {(r.row.model.id, r.row.model.kv_cache_dtype, r.kv_bytes_per_token) for r in c.rows}
    )
    console.print(
        escape(
            "KV cache: "
            + "; ".join(f"{m} {d}, {b:,.0f} B/token" for m, d, b in kv)
            + (" (the kvcache column's dtype)" if any(r.row.kv_from_row for r in c.rows) else "")
        ),
        highlight=False,
    )
    if (note := _share_note(c)) is not None:
        console.print(note, highlight=False)


def _cell(v: float) -> str:
    return "inf" if math.isinf(v) else f"{v:.6g}"


def check_csv(c: AicCheck) -> str:
    """AIC's file, its lines as they were, with our four columns appended to each."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="")

    def cells(values: list[str]) -> str:
        out.seek(0)
        out.truncate()
        writer.writerow(values)
        return out.getvalue()

    lines = [f"{c.raw_lines[0]},{cells(list(OUTPUT_COLUMNS))}"]
    for raw, r in zip(c.raw_lines[1:], c.rows, strict=True):
        ours = [
            f"{r.kv_read_gbyte_s:.6g}",
            _cell(r.basic_seq_s),
            _cell(r.dualpath_seq_s),
            r.bottleneck,
        ]
        lines.append(f"{raw},{cells(ours)}")
    return "\n".join(lines) + "\n"


def import_payload(written: list[str], gpu_id: str, node_id: str) -> dict[str, Any]:
    return {"written": written, "gpu": gpu_id, "node": node_id}


def render_import(written: list[str], node_id: str, out: str, console: Console) -> None:
    for path in written:
        console.print(escape(f"wrote {path}"))
    console.print(
        escape(
            f"use it with: dualpath-plan --profiles {out} size --node {node_id}; check it with: "
            f"dualpath-plan --profiles {out} profiles validate {out}"
        )
    )
