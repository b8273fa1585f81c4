"""``workload import``: a trace of another tool as a normalized per-turn trace and a workload
profile whose means come from it, both written or neither."""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import AtomicGroup, refuse_inputs
from dualpath_plan.frozen import record
from dualpath_plan.physics.traces import (
    ImportOptions,
    TraceStats,
    TraceSummary,
    read_trace,
)
from dualpath_plan.physics.workload import TRACE_COLUMNS
from dualpath_plan.profiles.registry import profile_to_toml, validate_profile
from dualpath_plan.profiles.schemas import WorkloadProfile, profile_id_error


@record
class ImportResult:
    summary: TraceSummary
    profile: WorkloadProfile
    written: tuple[str, ...]  # the profile and the normalized trace, when --out was given


def trace_files(paths: Sequence[Path], options: ImportOptions) -> list[Path]:
    """The files to read: a directory stands for its ``*.json`` sessions (kv-cache-tester, one
    file per session), in name order."""
    out: list[Path] = []
    for path in paths:
        if options.format == "kv-cache-tester" and path.is_dir():
            found = sorted(p for p in path.glob("*.json") if p.is_file())
            if not found:
                raise PlanInputError("no *.json session files in the directory", source=str(path))
            out += found
        else:
            out.append(path)
    return out


def workload_id(paths: Sequence[Path], given: str | None) -> str:
    """The imported workload's id: ``--id``, else the (first) file's name made an id."""
    if given is not None:
        why = profile_id_error(given)
        if why is not None:
            raise PlanInputError(why, field="--id")
        return given
    stem = paths[0].stem if paths else "trace"
    made = re.sub(r"[^a-z0-9._-]+", "-", stem.lower()).strip("-._") or "trace"
    return made[:100]


def _tokens_text(value: float) -> str:
    if type(value) is int:
        return str(value)
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def import_workload(
    paths: Sequence[Path],
    options: ImportOptions,
    *,
    out: Path | None = None,
    profile_id: str | None = None,
    command: str = "",
) -> ImportResult:
    """Read a trace (:func:`physics.traces.read_trace`), and with ``out`` write
    ``out/workload/<id>.csv`` (trajectory_id, append_tokens, generated_tokens, context_tokens,
    one row per request in the trace's order) and ``out/workload/<id>.toml`` (a workload
    profile naming it, with the trace's means): both through temporary files renamed together
    when the whole trace has been read, so a bad line anywhere leaves nothing behind."""
    files = trace_files(paths, options)
    read = read_trace(files, options)
    pid = workload_id(files, profile_id)
    stats = TraceStats(read.sources[0])
    if out is None:
        for turn in read.turns:
            stats.add(turn)
        summary = stats.summary(read, options.format)
        return ImportResult(summary, _profile(summary, pid, command), ())
    folder = out / "workload"
    # The trace read is never the one written (it was replaced by its normalized copy).
    refuse_inputs([(folder / f"{pid}.{ext}", "--out") for ext in ("csv", "toml")], files)
    with AtomicGroup() as group:
        group.make_dirs(folder, field="--out")
        trace_path = folder / f"{pid}.csv"
        handle = group.stream(trace_path, field="--out")
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow((*TRACE_COLUMNS, "context_tokens"))
        for turn in read.turns:
            stats.add(turn)
            writer.writerow(
                (
                    turn.session,
                    _tokens_text(turn.input_tokens - turn.hit_tokens),
                    _tokens_text(turn.output_tokens),
                    _tokens_text(turn.hit_tokens),
                )
            )
        summary = stats.summary(read, options.format)
        profile = _profile(summary, pid, command)
        profile_path = folder / f"{pid}.toml"
        group.add(profile_path, profile_to_toml(profile), field="--out")
    return ImportResult(summary, profile, (str(profile_path), str(trace_path)))


def _profile(summary: TraceSummary, pid: str, command: str) -> WorkloadProfile:
    s = summary.all
    names = ", ".join(Path(p).name for p in summary.sources[:3]) + (
        f" and {len(summary.sources) - 3} more" if len(summary.sources) > 3 else ""
    )
    if s.mean_generated_tokens <= 0:
        raise PlanInputError(
            "every request generates 0 tokens; a workload generates some",
            source=", ".join(summary.sources[:3]),
        )
    cited = f"{names}: the trace's mean (dualpath-plan {command})".replace("  ", " ")
    data: dict[str, Any] = {
        "kind": "workload",
        "id": pid,
        "name": f"Imported {summary.format} trace {names}",
        "description": (
            f"{s.requests:,} requests in {s.sessions:,} sessions, hit rate "
            f"{s.hit_rate:.1%} (dualpath-plan workload import --format {summary.format}); "
            + " ".join(f"{n}." for n in summary.notes)
        ).strip(),
        "turns": summary.turns_mean,
        "append_tokens": s.mean_append_tokens,
        "generated_tokens": s.mean_generated_tokens,
        "context_tokens": s.mean_context_tokens,
        "max_len_tokens": max(math.ceil(summary.longest_request_tokens), 1),
        "trajectories": s.sessions,
        "turns_spread": 0.0,
        "tool_latency_s": 0.0,
        "trace_file": f"{pid}.csv",
    }
    sources = {k: [cited] for k in ("turns", "append_tokens", "generated_tokens", "context_tokens")}
    sources["max_len_tokens"] = [cited.replace("the trace's mean", "its longest request")]
    sources["trajectories"] = [cited.replace("the trace's mean", "its sessions")]
    sources["tool_latency_s"] = [
        f"{names}: 0, not derived from the trace (the paper's replay assumes 0; set your own)"
    ]
    sources["turns_spread"] = [f"{names}: 0, the trace gives each session's turn count"]
    sources["trace_file"] = [f"{names}, normalized by dualpath-plan {command}".replace("  ", " ")]
    unconfirmed: dict[str, str] = {}
    if summary.arrival_rate_per_s is not None and summary.arrival_cv is not None:
        data["arrival_rate_per_s"] = summary.arrival_rate_per_s
        data["arrival_cv"] = summary.arrival_cv
        how = f"{names}: from the {summary.clock} of consecutive requests"
        sources["arrival_rate_per_s"] = [f"{how}, requests over the span"]
        sources["arrival_cv"] = [f"{how}, the gaps' standard deviation over their mean"]
    else:
        data["arrival_cv"] = 1.0
        unconfirmed["arrival_cv"] = f"{summary.no_rate_because}: 1.0 (Poisson arrivals) assumed"
    data["sources"] = sources
    data["unconfirmed"] = unconfirmed
    profile = validate_profile(data, source=f"workload '{pid}' imported from {names}")
    assert isinstance(profile, WorkloadProfile)
    return profile
