"""``dualpath-plan workload import``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dualpath_plan.cli.common import (
    JsonOpt,
    ProfilesOpt,
    command_line,
    load_registry,
    print_json,
    stdout,
)
from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import AtomicWriter, refuse_inputs
from dualpath_plan.outcomes.hitcurve import hitcurve, parse_blocks, parse_tiers, trace_files
from dualpath_plan.outcomes.workload_import import import_workload
from dualpath_plan.physics.model import kv_bytes_per_token
from dualpath_plan.physics.traces import FORMATS, ImportOptions
from dualpath_plan.profiles.schemas import ModelProfile
from dualpath_plan.reports import hitcurve as curve_report
from dualpath_plan.reports import workload as report
from dualpath_plan.scenario.spec import DEFAULT_SPEC

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


@app.command("hitcurve")
def hitcurve_cmd(
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="TRACE...",
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
            help="Tokens per block (default: mooncake 512, bailian 16, kv-cache-tester the "
            "file's block_size; csv and burstgpt, which have no hashes, 16).",
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
    blocks: Annotated[
        str | None,
        typer.Option(
            "--blocks",
            help="Capacities in blocks to give the hit rate at, in blocks and in tokens: "
            "1000,20000.",
            show_default=False,
        ),
    ] = None,
    tiers: Annotated[
        str | None,
        typer.Option(
            "--tiers",
            help="Cache tiers, top first, one LRU stack: NAME:CAPACITY,... with a capacity in "
            "blocks or bytes (hbm:20000,dram:512GB,ssd:30TB); gives the hits each serves.",
            show_default=False,
        ),
    ] = None,
    model: Annotated[
        str,
        typer.Option("--model", help="Model profile id: its KV bytes per token size a block."),
    ] = DEFAULT_SPEC.model,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write the whole curve: FILE.csv (one row per step) or FILE.svg (a chart).",
            show_default=False,
        ),
    ] = None,
    profiles: ProfilesOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The prefix-cache hit rate of a trace at every LRU capacity at once (exact, from the
    blocks' LRU stack distances): a block hits only if it and every block before it in its
    request are cached, and every block of a request is touched."""
    if out is not None and out.suffix.lower() not in (".csv", ".svg"):
        raise PlanInputError(f"{out}: expected a file ending in .csv or .svg", field="--out")
    options = ImportOptions(format=format, block_size=block_size, session_field=session_field)
    asked = parse_blocks(blocks)
    tier_list = parse_tiers(tiers)
    found = load_registry(profiles, None).get("model", model)
    assert isinstance(found, ModelProfile)
    if out is not None:
        refuse_inputs([(out, "--out")], trace_files(files, options))
    writer = AtomicWriter(out, field="--out", newline="") if out is not None else None
    try:
        result = hitcurve(
            files,
            options,
            model=model,
            kv_bytes_per_token=kv_bytes_per_token(found),
            capacities=asked,
            tiers=tier_list,
        )
        if writer is not None and out is not None:
            if out.suffix.lower() == ".svg":
                writer.handle.write(curve_report.curve_svg(result))
            else:
                writer.handle.writelines(curve_report.curve_csv_lines(result))
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    if writer is not None:
        writer.commit()
    if as_json:
        print_json(curve_report.hitcurve_payload(result))
    else:
        curve_report.render_hitcurve(result, stdout)
        if out is not None:
            stdout.print(f"wrote {out}")


def register(parent: typer.Typer) -> None:
    parent.add_typer(app, name="workload")
