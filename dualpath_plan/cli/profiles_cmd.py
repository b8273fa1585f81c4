"""``dualpath-plan profiles list|show|validate``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dualpath_plan.cli.common import JsonOpt, ProfilesOpt, SetOpt, load_registry, print_json, stdout
from dualpath_plan.errors import PlanInputError
from dualpath_plan.physics.workload import load_trace, trace_path
from dualpath_plan.profiles.registry import builtin_profiles_dir, read_profile_file
from dualpath_plan.profiles.schemas import KINDS, NodeProfile, ProfileBase, WorkloadProfile
from dualpath_plan.reports import profiles as report
from dualpath_plan.reports.derived import derived_quantities

app = typer.Typer(
    help="List, show and validate hardware, model and workload profiles.", no_args_is_help=True
)

KindOpt = Annotated[
    str | None,
    typer.Option("--kind", help=f"Only this kind: {', '.join(KINDS)}.", show_default=False),
]


def _check_kind(kind: str | None) -> None:
    if kind is not None and kind not in KINDS:
        raise PlanInputError(
            f"unknown kind '{kind}'; expected one of {', '.join(KINDS)}", field="--kind"
        )


def _origin(path: Path) -> str:
    try:
        return "built-in" if path.is_relative_to(builtin_profiles_dir()) else str(path)
    except ValueError:
        return str(path)


@app.command("list")
def list_profiles(
    kind: KindOpt = None,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """List every known profile, by kind."""
    _check_kind(kind)
    registry = load_registry(profiles, set_)
    registry.check_all()  # a broken profile anywhere on the search path is an error here
    kinds = [kind] if kind else list(KINDS)
    rows = [
        (k, pid, registry.raw(k, pid).name, _origin(registry.origins[(k, pid)]))
        for k in kinds
        for pid in registry.ids(k)
    ]
    if as_json:
        print_json(report.list_payload(rows))
    else:
        report.render_list(rows, stdout)


@app.command("show")
def show_profile(
    profile_id: Annotated[str, typer.Argument(metavar="ID", help="Profile id, e.g. h100-sxm.")],
    kind: KindOpt = None,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Show one profile: its fields, their sources, and the quantities derived from them."""
    _check_kind(kind)
    registry = load_registry(profiles, set_)
    try:
        profile = registry.get(kind, profile_id) if kind else registry.find(profile_id)
    except PlanInputError as exc:
        if exc.source is not None:
            raise  # the profile's file is bad: it names the file and the field
        # The registry names the scenario flag of the kind (--node); here it is ID of --kind.
        raise PlanInputError(exc.detail, field="ID") from None
    derived = derived_quantities(profile, registry)
    origin = _origin(registry.origins[(profile.kind, profile.id)])
    if as_json:
        print_json(report.show_payload(profile, derived, origin))
    else:
        report.render_show(profile, derived, stdout)


def _missing_sources(profile: ProfileBase) -> list[str]:
    return [
        f
        for f in profile.numeric_fields_set()
        if f not in profile.sources and f not in profile.unconfirmed
    ]


@app.command("validate")
def validate_profiles(
    paths: Annotated[
        list[Path], typer.Argument(metavar="PATH...", help="Profile files or directories of them.")
    ],
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
) -> None:
    """Check profile files against their schema (exit 0 valid, 2 invalid). References to other
    profiles (a node's gpu, the measured node its efficiencies are transferred from) are
    resolved against the library and the files given."""
    registry = load_registry(profiles, None)
    registry.check_all()  # the references resolve against a valid library
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            # Every entry named like a profile, a broken link or a directory too: each is
            # reported (the other commands refuse such a directory).
            files += sorted(path.rglob("*.toml"))
        else:
            files.append(path)
    if not files:
        raise PlanInputError("no .toml files found", source=" ".join(map(str, paths)))
    results: list[tuple[Path, str | None, list[str]]] = []
    loaded: list[tuple[Path, ProfileBase]] = []
    for path in files:
        try:
            profile = read_profile_file(path)
        except PlanInputError as exc:
            results.append((path, str(exc), []))
            continue
        registry.profiles[profile.kind][profile.id] = profile
        loaded.append((path, profile))
    for path, profile in loaded:
        error = None
        try:
            if isinstance(profile, NodeProfile):
                registry.check_node(profile, str(path))
            if isinstance(profile, WorkloadProfile) and profile.trace_file:
                # Inside the profile's directory, there, and readable as size reads it (an
                # empty, binary or column-less trace passed here and failed in size).
                load_trace(trace_path(profile, path))
        except PlanInputError as exc:
            error = str(exc)
        results.append((path, error, _missing_sources(profile)))
    failed = [r for r in results if r[1]]
    if as_json:
        print_json(report.validate_payload(results))
    else:
        report.render_validate(results, stdout)
    if failed:
        raise typer.Exit(2)


def register(parent: typer.Typer) -> None:
    parent.add_typer(app, name="profiles")
