"""Shared CLI plumbing: the registry options every command takes, output helpers."""

from __future__ import annotations

import contextlib
import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import refuse_inputs
from dualpath_plan.profiles.registry import Overrides, Registry
from dualpath_plan.profiles.schemas import MAX_MAGNITUDE

if TYPE_CHECKING:
    from dualpath_plan.profiles.schemas import WorkloadProfile
    from dualpath_plan.scenario import Scenario

ProfilesOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--profiles",
        help="Extra profile directory (repeatable); shadows built-in profiles by kind and id. "
        "Also read from $DUALPATH_PLAN_PROFILES.",
        show_default=False,
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override a profile field, KIND.FIELD=VALUE (repeatable), e.g. node.snic_gbit_s=200; "
        "an engine curve's field as engine.CURVE.FIELD=VALUE.",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]

_TTY = sys.stdout is not None and sys.stdout.isatty()
stdout = Console(highlight=False, soft_wrap=True, width=None if _TTY else 120)


class GlobalState:
    """Options given before the subcommand (``dualpath-plan --set ... size``)."""

    profiles: list[Path] = []  # noqa: RUF012
    overrides: list[str] = []  # noqa: RUF012
    argv: list[str] = []  # noqa: RUF012  # the arguments main() was given (after the program)
    registries: list[Registry] = []  # noqa: RUF012  # what load_registry made in this run


def command_line() -> str:
    """The command line this run was given, quoted for a shell (reports print it)."""
    import shlex  # here: only the reports that quote their command line need it

    return shlex.join(["dualpath-plan", *GlobalState.argv])


def load_registry(profiles: list[Path] | None, overrides: list[str] | None) -> Registry:
    dirs = [*GlobalState.profiles, *(profiles or [])]
    merged = Overrides.parse(GlobalState.overrides).merged(Overrides.parse(overrides or []))
    registry = Registry.load(dirs, overrides=merged)
    GlobalState.registries.append(registry)
    return registry


# What a --set of a kind the run does not read would have needed, by kind.
_UNUSED_HINT = {
    "engine": "no node names an engine profile and no --engine is given",
    "storage": "--storage none",
}


def unused_override_warnings() -> list[str]:
    """A warning per ``--set`` of a kind of profile the run read none of (each set nothing:
    ``--set engine.CURVE.FIELD`` on nodes without an engine profile was dropped silently)."""
    lines = []
    for registry in GlobalState.registries:
        for assignment in registry.unused_overrides():
            kind = assignment.partition(".")[0]
            why = _UNUSED_HINT.get(kind)
            lines.append(
                f"warning: --set {assignment} set nothing: this run reads no {kind} profile"
                + (f" ({why})" if why else "")
            )
    return list(dict.fromkeys(lines))


def _check_finite(value: Any, path: str = "$") -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"non-finite number in output at {path}")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_finite(v, f"{path}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _check_finite(v, f"{path}[{i}]")


def print_json(payload: Any) -> None:
    """JSON on stdout; a NaN or inf anywhere is a bug, never printed."""
    import json  # (--json only: a plain size prints tables)

    _check_finite(payload)
    sys.stdout.write(json.dumps(payload, indent=2, allow_nan=False) + "\n")


def require_positive(value: float | int, name: str) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise PlanInputError(f"expected a finite number > 0, got {value!r}", field=name)


def parse_pairs(
    specs: list[str] | None, option: str, what: str, whole: bool
) -> list[tuple[str, float]]:
    """``ID:NUMBER`` items (a group's node count, a class's weight)."""
    out: list[tuple[str, float]] = []
    for item in specs or []:
        ident, _, count = item.partition(":")
        try:
            n = (int(count) if whole else float(count)) if count else 1
        except ValueError:
            raise PlanInputError(f"expected {what}, got {item!r}", field=option) from None
        if not ident or not (math.isfinite(n) and n > 0) or (whole and n > 1_000_000):
            raise PlanInputError(f"expected {what} with a number > 0, got {item!r}", field=option)
        out.append((ident, n))
    return out


def parse_token_counts(text: str, name: str) -> list[float]:
    """'16384,32768' or '16K,64K' -> token counts (K = 1024)."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            # '1,,2' lost an item silently.
            raise PlanInputError(f"an empty item between commas in {text!r}", field=name)
        scale = 1.0
        if part[-1] in "kK":
            scale, part = 1024.0, part[:-1]
        try:
            value = float(part) * scale
        except ValueError:
            raise PlanInputError(
                f"expected token counts like 16384 or 16K, got {text!r}", field=name
            ) from None
        if not (math.isfinite(value) and 1 <= value <= MAX_MAGNITUDE and value == int(value)):
            # (1.5 was shown as 2 in a table and as 1.5 in the JSON)
            raise PlanInputError(
                f"expected whole token counts from 1 to {MAX_MAGNITUDE:g}, got {text!r}",
                field=name,
            )
        out.append(value)
    if not out:
        raise PlanInputError("expected at least one token count", field=name)
    return out


def refuse_input(out: Path, sc: Scenario, registry: Registry, flag: str = "--out") -> None:
    """An output never replaces what the run read: a profile on the search path or the
    workload's trace file."""
    refuse_overwrites({flag: out}, registry, workloads=[sc.workload])


def refuse_overwrites(
    outputs: Mapping[str, Path | None],
    registry: Registry,
    *,
    workloads: Sequence[WorkloadProfile] = (),
    inputs: Sequence[Path] = (),
) -> None:
    """No output of a run replaces what the run reads (a profile on the search path, the trace
    of one of ``workloads``, one of ``inputs``) or another of its outputs: each is one line
    naming the file and its flag, before anything is written."""
    from dualpath_plan.physics.workload import trace_path

    read = [*registry.indexed, *registry.origins.values(), *inputs]
    for w in workloads:
        if w.trace_file:
            read.append(trace_path(w, registry.origins.get(("workload", w.id))))
    given = [(flag, out) for flag, out in outputs.items() if out is not None]
    refuse_inputs([(out, flag) for flag, out in given], read)
    for k, (flag, out) in enumerate(given):
        for other_flag, other in given[:k]:
            # The same path (the file need not exist yet), or one file by two names.
            same = out.resolve() == other.resolve() or (
                out.exists() and other.exists() and out.samefile(other)
            )
            if same:
                raise PlanInputError(
                    f"is also this run's {other_flag}; write each output to a file of its own",
                    source=str(out),
                    field=flag,
                )


@contextlib.contextmanager
def task_progress(label: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar over tasks on standard error (a terminal only, as sweep's), erased when
    done: yields ``hook(done, total)`` (the total may grow as a search yields more tasks)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    err = Console(stderr=True)
    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as bar:
        task = bar.add_task(label, total=None)

        def hook(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield hook


WorkersOpt = Annotated[
    int | None,
    typer.Option(
        "--workers",
        help="Tasks (simulations; a large sweep's chunks) run at once on a local process "
        "pool (default: the machine's cores; 1 runs them in this process). The results do not "
        "depend on it.",
        show_default=False,
    ),
]
RayOpt = Annotated[
    str | None,
    typer.Option(
        "--ray",
        help="Run the tasks on a Ray cluster: its address (ray://HEAD:10001 or "
        "HEAD:6379), 'auto' (the cluster this machine belongs to) or 'local' (start one here "
        "with --workers CPUs). Needs pip install 'dualpath-plan\\[ray]'.",
        show_default=False,
    ),
]
