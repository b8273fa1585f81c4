"""Shared CLI plumbing: the registry options every command takes, output helpers."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from dualpath_plan.errors import PlanInputError
from dualpath_plan.profiles.registry import Overrides, Registry

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
        help="Override a profile field, KIND.FIELD=VALUE (repeatable), e.g. node.snic_gbit_s=200.",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]

stdout = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 120)


class GlobalState:
    """Options given before the subcommand (``dualpath-plan --set ... size``)."""

    profiles: list[Path] = []  # noqa: RUF012
    overrides: list[str] = []  # noqa: RUF012


def load_registry(profiles: list[Path] | None, overrides: list[str] | None) -> Registry:
    dirs = [*GlobalState.profiles, *(profiles or [])]
    merged = Overrides.parse(GlobalState.overrides).merged(Overrides.parse(overrides or []))
    return Registry.load(dirs, overrides=merged)


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
    _check_finite(payload)
    sys.stdout.write(json.dumps(payload, indent=2, allow_nan=False) + "\n")


def require_positive(value: float | int, name: str) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise PlanInputError(f"expected a finite number > 0, got {value!r}", field=name)


# Scenario options shared by paths, size and later commands.
ModelOpt = Annotated[str, typer.Option("--model", help="Model profile id.")]
WorkloadOpt = Annotated[str, typer.Option("--workload", help="Workload profile id.")]
NodeOpt = Annotated[str, typer.Option("--node", help="Node profile for both sides.")]
PrefillNodeOpt = Annotated[
    str | None,
    typer.Option(
        "--prefill-node", help="Prefill node profile (default --node).", show_default=False
    ),
]
DecodeNodeOpt = Annotated[
    str | None,
    typer.Option("--decode-node", help="Decode node profile (default --node).", show_default=False),
]
GpuOpt = Annotated[
    str | None, typer.Option("--gpu", help="Override the nodes' GPU profile.", show_default=False)
]
StorageOpt = Annotated[str, typer.Option("--storage", help="Storage profile id, or 'none'.")]
POpt = Annotated[int, typer.Option("-P", "--prefill-nodes", help="Prefill nodes.")]
DOpt = Annotated[int, typer.Option("-D", "--decode-nodes", help="Decode nodes.")]
PaperOpt = Annotated[
    bool,
    typer.Option(
        "--paper-assumptions",
        help="The paper's eq. (1)-(9) model: no miss KV, write-back, "
        "collectives' share, efficiencies, PCIe link or storage limits.",
    ),
]
PaperTermOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--paper-term",
        help="Switch one extended term to the paper's assumption (repeatable): miss_kv, "
        "writeback, collectives, efficiencies, pcie_link_limit, gpu_pcie, storage_limit.",
        show_default=False,
    ),
]
SchedulerOpt = Annotated[
    str,
    typer.Option("--scheduler", help="Load-imbalance model: ideal, round_robin or queue_aware."),
]


def storage_id(storage: str) -> str | None:
    """``--storage none`` means no storage-cluster limit."""
    return None if storage == "none" else storage
