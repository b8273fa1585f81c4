"""``dualpath-plan aic import-system|check``: AIConfigurator's inputs and results."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dualpath_plan.cli.common import (
    JsonOpt,
    ProfilesOpt,
    SetOpt,
    load_registry,
    print_json,
    refuse_overwrites,
    stdout,
)
from dualpath_plan.cli.options import scenario_options
from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import atomic_write
from dualpath_plan.profiles.schemas import profile_id_error
from dualpath_plan.scenario.spec import DEFAULT_SPEC, ScenarioSpec

app = typer.Typer(
    help="AIConfigurator: import its system files as profiles, and check its results against "
    "the storage read path it treats as free.",
    no_args_is_help=True,
)


@app.command("import-system")
def import_system_cmd(
    system: Annotated[
        Path,
        typer.Argument(metavar="FILE.yaml", help="An AIConfigurator system file (systems/*.yaml)."),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out", help="Write DIR/gpu/ID.toml and DIR/node/ID.toml (for --profiles DIR)."
        ),
    ],
    profile_id: Annotated[
        str | None,
        typer.Option(
            "--id", help="Id of both profiles (default aic-<file name>).", show_default=False
        ),
    ] = None,
    snic_count: Annotated[
        int | None,
        typer.Option("--snic-count", help="Storage NICs per node. Required.", show_default=False),
    ] = None,
    snic_gbit_s: Annotated[
        float | None,
        typer.Option(
            "--snic-gbit-s",
            help="Line rate of each storage NIC, Gb/s. Required.",
            show_default=False,
        ),
    ] = None,
    dram_gbyte: Annotated[
        float | None,
        typer.Option(
            "--dram-gbyte",
            help="Host DRAM per node, GB (descriptive: the model applies no DRAM capacity "
            "limit). Required.",
            show_default=False,
        ),
    ] = None,
    dram_gbyte_s: Annotated[
        float | None,
        typer.Option(
            "--dram-gbyte-s",
            help="Host DRAM bandwidth per node, GB/s. Required.",
            show_default=False,
        ),
    ] = None,
    cnic_count: Annotated[
        int | None,
        typer.Option(
            "--cnic-count",
            help="Compute NICs per node (the file's inter_node_bw per GPU is spread over "
            "them; a rack-scale file's inter_rack_bw). Required.",
            show_default=False,
        ),
    ] = None,
    cnic_gbit_s: Annotated[
        float | None,
        typer.Option(
            "--cnic-gbit-s",
            help="Line rate of each compute NIC, Gb/s, instead of the file's. Required when "
            "the file's inter-node rate is NVLink (as fast as its intra_node_bw) and it gives "
            "no inter_rack_bw: NVLink is no compute NIC.",
            show_default=False,
        ),
    ] = None,
    release_year: Annotated[
        int | None,
        typer.Option(
            "--release-year", help="The GPU's release year. Required.", show_default=False
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Turn an AIConfigurator system file into a GPU and a node profile (units converted,
    every field citing the file and key); the storage side AIConfigurator lacks comes from the
    flags, all of them required. Both files are written, or neither."""
    from dualpath_plan.profiles.aic_system import NodeFlags, import_system
    from dualpath_plan.profiles.registry import write_profiles
    from dualpath_plan.reports import aic as report

    if profile_id is not None and (why := profile_id_error(profile_id)) is not None:
        raise PlanInputError(why, field="--id")
    flags = NodeFlags(
        snic_count, snic_gbit_s, dram_gbyte, dram_gbyte_s, cnic_count, release_year, cnic_gbit_s
    )
    gpu, node = import_system(system, flags, profile_id)
    written = write_profiles([gpu, node], out, field="--out", only_set=True, reads=[system])
    if as_json:
        print_json(report.import_payload(written, gpu.id, node.id))
    else:
        report.render_import(written, node.id, str(out), stdout)


@app.command("check")
@scenario_options(groups=("scheduling", "terms"))
def check_cmd(
    result: Annotated[
        Path,
        typer.Argument(
            metavar="BEST_CONFIG.csv",
            help="An AIConfigurator result: best_config_topn_disagg.csv or _agg.csv.",
        ),
    ],
    node: Annotated[str, typer.Option("--node", help="Node profile the configurations run on.")],
    storage: Annotated[
        str, typer.Option("--storage", help="Storage profile id, or 'none'.")
    ] = DEFAULT_SPEC.storage,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write AIConfigurator's CSV with kv_read_gbyte_s, storage_bound_seq_s_basic, "
            "storage_bound_seq_s_dualpath and kv_bandwidth_bottleneck appended.",
            show_default=False,
        ),
    ] = None,
    spec: ScenarioSpec = DEFAULT_SPEC,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """For each configuration of an AIConfigurator result: the KV read rate its seq/s implies,
    the seq/s the storage read path sustains with basic loading and with dualpath, the binding
    link, and whether storage can feed it. The row's model is the profile listing its name in
    hf_names, with the KV dtype of its kvcache column; a worker smaller than a node gets its
    share of the node's NICs; a result planned for another GPU than the node's is a warning
    on stderr. The node's calibration applies (the report says
    which efficiencies); --speed-of-light takes the datasheet rates, an upper bound."""
    from dualpath_plan.outcomes.aic import check_aic
    from dualpath_plan.reports import aic as report

    registry = load_registry(profiles, set_)
    # Neither the result being checked nor a profile on the search path.
    refuse_overwrites({"--out": out}, registry, inputs=[result])
    checked = check_aic(
        result,
        registry,
        node=node,
        storage=None if storage == "none" else storage,
        options=spec.options,
        scheduling=spec.scheduling,
    )
    for line in checked.warnings:
        typer.echo(f"warning: {line}", err=True)
    if out is not None:
        atomic_write(out, report.check_csv(checked), field="--out")
    if as_json:
        print_json({**report.check_payload(checked), "out": str(out) if out else None})
    else:
        report.render_check(checked, stdout)
        if out is not None:
            stdout.print(f"wrote {out}", highlight=False)


def register(parent: typer.Typer) -> None:
    parent.add_typer(app, name="aic")
