"""A plan's cost in a report (issue 32; outcomes/cost.py): a JSON object per mode and a table
of text. Nothing is printed or written where no profile of the scenario has a price; a plan
whose price is partly unknown says which, never a number."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from dualpath_plan.formatting import MISSING, column
from dualpath_plan.outcomes.cost import PlanCost


def cost_payload(c: PlanCost) -> dict[str, Any]:
    """The ``cost`` object of a mode (every figure in US dollars; ``unknown``: why none)."""
    if not c.known:
        return {"unknown": c.unknown}
    return {
        "usd_per_hour": c.usd_per_hour,
        "nodes_usd_per_hour": c.nodes_usd_per_hour,
        "store_usd_per_hour": c.store_usd_per_hour,
        "power_usd_per_hour": c.power_usd_per_hour,
        "storage_nodes": c.storage_nodes,
        "usd_per_agent": c.usd_per_agent,
        "usd_per_agent_offline": c.usd_per_agent_offline,
        "usd_per_mtok": c.usd_per_mtok,
        "usd_per_mtok_offline": c.usd_per_mtok_offline,
        **({"power_note": c.power_note} if c.power_note else {}),
    }


def _dollars(values: list[float | None]) -> list[str]:
    """A column of dollars with one precision (formatting.column); "-" where there is none."""
    cells = column([math.nan if v is None else v for v in values])
    return [c if c == MISSING else f"${c}" for c in cells]


def render_costs(costs: Mapping[Any, PlanCost], console: Console) -> None:
    """A row per mode: $/h (nodes + store + power), $/agent and $/M tokens online and offline."""
    for m, c in costs.items():
        if not c.known:  # one line each, never a number made of a missing price
            console.print(f"{m}: cost unknown: {c.unknown}", highlight=False, soft_wrap=True)
    costs = {m: c for m, c in costs.items() if c.known}
    if not costs:
        return
    table = Table(title="cost (public list prices; docs/model.md section 13)", title_justify="left")
    cols = ("mode", "$/h", "nodes", "store", "power", "$/agent", "$/agent off.", "$/M tok")
    for col in (*cols, "$/M tok off."):
        table.add_column(col, justify="left" if col == "mode" else "right")
    figures = {
        f: _dollars([getattr(c, f) for c in costs.values()])
        for f in (
            "usd_per_hour",
            "nodes_usd_per_hour",
            "store_usd_per_hour",
            "power_usd_per_hour",
            "usd_per_agent",
            "usd_per_agent_offline",
            "usd_per_mtok",
            "usd_per_mtok_offline",
        )
    }
    for k, (m, c) in enumerate(costs.items()):
        row = {f: cells[k] for f, cells in figures.items()}
        table.add_row(
            m,
            row["usd_per_hour"],
            row["nodes_usd_per_hour"],
            f"{row['store_usd_per_hour']} ({c.storage_nodes:,})",
            row["power_usd_per_hour"],
            row["usd_per_agent"],
            row["usd_per_agent_offline"],
            row["usd_per_mtok"],
            row["usd_per_mtok_offline"],
        )
    console.print(table)
    notes = dict.fromkeys(c.power_note for c in costs.values() if c.power_note)
    console.print(
        "$/agent: $/h over the APS x 3,600 (online), or the JCT run's over its agents (off.); "
        "$/M tok: per million tokens processed (each turn's whole prompt and its output); "
        "store: its nodes in brackets" + "".join(f"; {n}" for n in notes),
        highlight=False,
    )
