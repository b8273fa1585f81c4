"""The ``profiles list|show|validate`` reports: JSON payloads and terminal rendering."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dualpath_plan.errors import printable
from dualpath_plan.formatting import number, plain
from dualpath_plan.profiles.schemas import ProfileBase
from dualpath_plan.reports.derived import Derived

ListRow = tuple[str, str, str, str]  # kind, id, name, origin
Checked = tuple[Path, str | None, list[str]]  # file, error, numeric fields without a source


def list_payload(rows: list[ListRow]) -> dict[str, Any]:
    return {"profiles": [{"kind": k, "id": i, "name": n, "origin": o} for k, i, n, o in rows]}


def render_list(rows: list[ListRow], console: Console) -> None:
    table = Table(title="Profiles", show_lines=False)
    for col in ("kind", "id", "name", "origin"):
        table.add_column(col)
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    console.print(table)


def _fields(profile: ProfileBase) -> dict[str, Any]:
    return {
        k: v
        for k, v in profile.model_dump(mode="json").items()
        if k not in ("sources", "unconfirmed", "calibration_stderr")
    }


def show_payload(profile: ProfileBase, derived: list[Derived], origin: str) -> dict[str, Any]:
    return {
        "kind": profile.kind,
        "id": profile.id,
        "fields": _fields(profile),
        "sources": profile.sources,
        "unconfirmed": profile.unconfirmed,
        "calibration_stderr": profile.calibration_stderr,
        "derived": [
            {"name": d.name, "value": d.value, "unit": d.unit, "how": d.how} for d in derived
        ],
        "origin": origin,
    }


def _value(value: object) -> str:
    """A field as stored: a float with all its digits, written out (0.00004023, not 4.023e-05),
    inside an engine's curves and lists too (their repr said 'launch_s': 3.831e-06)."""
    if isinstance(value, float):
        return plain(value, None)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return str(value)


def render_show(profile: ProfileBase, derived: list[Derived], console: Console) -> None:
    table = Table(title=escape(f"{profile.kind} '{profile.id}': {profile.name}"))
    table.add_column("field")
    table.add_column("value")
    table.add_column("source / note", overflow="fold")
    for name, value in _fields(profile).items():
        if name in ("kind", "id", "name") or value is None or value == "":
            continue
        note = "; ".join(profile.sources.get(name, []))
        if name in profile.unconfirmed:
            note = (note + "; " if note else "") + "UNCONFIRMED: " + profile.unconfirmed[name]
        if name not in profile.model_fields_set:
            note = note or "default"
        err = profile.calibration_stderr.get(name)
        shown = _value(value) + (f" ± {number(err, 2)}" if err is not None else "")
        table.add_row(name, escape(shown), escape(note))
    console.print(table)
    if "*" in profile.sources or "*" in profile.unconfirmed:
        general = "; ".join(profile.sources.get("*", []))
        if "*" in profile.unconfirmed:
            general += ("; " if general else "") + "UNCONFIRMED: " + profile.unconfirmed["*"]
        console.print(f"[bold]profile sources:[/bold] {escape(general)}")
    if derived:
        dt = Table(title="derived (computed from the fields above)")
        for col in ("quantity", "value", "unit", "how"):
            dt.add_column(col)
        for d in derived:
            dt.add_row(d.name, number(d.value, 4), d.unit, d.how)
        console.print(dt)


def validate_payload(results: list[Checked]) -> dict[str, Any]:
    failed = sum(1 for _, e, _ in results if e)
    return {
        "files": [
            {"path": str(p), "valid": e is None, "error": e, "fields_without_source": w}
            for p, e, w in results
        ],
        "valid": len(results) - failed,
        "invalid": failed,
    }


def render_validate(results: list[Checked], console: Console) -> None:
    """Each valid file a line on ``console``; each invalid one an ``error:`` line on standard
    error, as every other error (it was "invalid FILE: ..." among the valid ones, on stdout)."""
    for path, error, missing in results:
        if error:
            sys.stderr.write(f"error: {printable(error)}\n")
        else:
            warn = f" (no source for: {', '.join(missing)})" if missing else ""
            console.print(f"[green]valid[/green]   {escape(f'{path}{warn}')}")
