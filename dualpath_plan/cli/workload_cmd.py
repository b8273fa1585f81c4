"""``dualpath-plan workload import``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dualpath_plan.cli.common import JsonOpt, command_line, print_json, stdout
from dualpath_plan.outcomes.workload_import import import_workload
from dualpath_plan.physics.traces import FORMATS, ImportOptions
from dualpath_plan.reports import workload as report

app = typer.Typer(help="Import request traces as workloads.", no_args_is_help=True)


@app.command("import")
def import_trace(
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE...",
            help="The trace (kv-cache-tester: one JSON file per session, or their directory).",
        ),
    ],
    format: Annotated[
        str,
        typer.Option("--format", help=f"The trace's format: {', '.join(FORMATS)}."),
    ],
    block_size: Annotated[
        int | None,
        typer.Option(
            "--block-size",
            help="Tokens per hash block (default: mooncake 512, bailian 16, kv-cache-tester "
            "the file's block_size).",
            show_default=False,
        ),
    ] = None,
    session_field: Annotated[
        str | None,
        typer.Option(
            "--session-field",
            help="The field naming sessions (mooncake: session_id, burstgpt: 'Session ID').",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write DIR/workload/<id>.toml and DIR/workload/<id>.csv (all or nothing); "
            "without it only the summary is printed.",
            show_default=False,
        ),
    ] = None,
    profile_id: Annotated[
        str | None,
        typer.Option(
            "--id", help="The workload's id (default: the file's name).", show_default=False
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Read a trace, derive each request's cached (hit), appended and generated tokens and its
    session, print a summary, and with --out write a normalized per-turn trace and a workload
    profile whose means come from it (use it with --profiles DIR --workload ID)."""
    options = ImportOptions(format=format, block_size=block_size, session_field=session_field)
    command = command_line().removeprefix("dualpath-plan ")
    result = import_workload(files, options, out=out, profile_id=profile_id, command=command)
    if as_json:
        print_json(report.import_payload(result))
    else:
        report.render_import(result, stdout)


def register(parent: typer.Typer) -> None:
    parent.add_typer(app, name="workload")
