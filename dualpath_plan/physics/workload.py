"""Workload physics: turns of agentic trajectories and what each demands.

A :class:`TurnMix` is a weighted set of turns (cached, appended and generated tokens): one row
for a profile given by its means, one row per turn for a trace file. :class:`TurnDemand` is
what the path model and the outcome models consume: per turn, bytes to load (hit), KV bytes of
the missed tokens, bytes written back, prefill FLOPs, tokens to decode. It is built from a model
and a mix, or abstractly from a cache-compute ratio before a model is chosen.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import field, replace
from pathlib import Path
from typing import Any

import numpy as np

from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import (
    MAX_TRACE_BYTES,
    MAX_TRACE_ROWS,
    iter_csv_rows,
    iter_jsonl_objects,
    number,
    rows_read,
)
from dualpath_plan.frozen import record
from dualpath_plan.physics import model as phys
from dualpath_plan.physics.links import Demand
from dualpath_plan.physics.model import FloatArray
from dualpath_plan.profiles.schemas import MAX_MAGNITUDE, ModelProfile, WorkloadProfile


@record
class TurnCounts:
    """How many turns trajectories have, as a survival function S over the turn index k.

    Steps: segment j covers ``length[j]`` turns during which the share ``surviving[j]`` of
    trajectories is still running (non-increasing). Then ``ramp_turns`` more turns over which
    S falls linearly from the last step's share to 0 (the tail of a uniform distribution; 0
    for observed counts). The mean turn count is the area under S.
    """

    length: FloatArray
    surviving: FloatArray
    ramp_turns: float = 0.0

    @property
    def mean(self) -> float:
        ramp_share = float(self.surviving[-1]) if self.surviving.size else 1.0
        return float(np.sum(self.length * self.surviving)) + self.ramp_turns * ramp_share / 2

    @property
    def longest(self) -> float:
        return float(np.sum(self.length)) + self.ramp_turns

    @classmethod
    def uniform(cls, mean_turns: float, spread: float) -> TurnCounts:
        """Turn counts uniform on [mean (1 - spread), mean (1 + spread)] (spread 0: all equal):
        S = 1 up to the shortest, then a linear ramp to 0 at the longest."""
        if not (np.isfinite(mean_turns) and mean_turns > 0):
            raise PlanInputError(f"expected turns > 0, got {mean_turns!r}", field="turns")
        if not (np.isfinite(spread) and 0.0 <= spread <= 1.0):
            raise PlanInputError(f"expected 0 <= spread <= 1, got {spread!r}", field="turns_spread")
        low = mean_turns * (1.0 - spread)
        return cls(np.array([low]), np.ones(1), ramp_turns=2.0 * mean_turns * spread)

    @classmethod
    def observed(cls, turns_per_trajectory: FloatArray) -> TurnCounts:
        """The empirical distribution of a trace's trajectories (each one equally likely)."""
        counts = np.sort(np.asarray(turns_per_trajectory, dtype=np.float64))
        # Where each level first appears in the sorted counts (np.unique's, without numpy.ma).
        first = np.flatnonzero(np.concatenate(([True], counts[1:] != counts[:-1]))[: counts.size])
        levels = counts[first]
        surviving = 1.0 - first / counts.size  # share with at least levels[j] turns
        length = np.diff(np.concatenate([[0.0], levels]))
        return cls(length, surviving)


@record
class TurnMix:
    """Turns with their share of all turns (``weight`` sums to 1)."""

    cached_tokens: FloatArray
    append_tokens: FloatArray
    generated_tokens: FloatArray
    weight: FloatArray
    trajectory_turns: TurnCounts  # observed in a trace, else the profile's uniform spread
    tool_latency_s: float = 0.0
    # A trace's: the file, each row's line in it, whether rows give their context, and each
    # row's trajectory (numbered by first appearance; rows of one in turn order).
    source: str = ""
    lines: tuple[int, ...] = ()
    context_given: bool = True
    trajectory: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def mean(self, values: FloatArray) -> float:
        return float(np.sum(values * self.weight))

    @property
    def turns_per_trajectory(self) -> float:
        return self.trajectory_turns.mean

    @property
    def hit_rate(self) -> float:
        cached = self.mean(self.cached_tokens)
        return cached / (cached + self.mean(self.append_tokens))


def trace_path(workload: WorkloadProfile, profile_path: Path | None) -> Path:
    """Where a profile's ``trace_file`` is: relative to the profile's own directory (the
    working directory for a profile that has no file), never outside it: no absolute path, no
    ``..`` climbing out, also when set with ``--set workload.trace_file=...``."""
    assert workload.trace_file
    base = profile_path.parent if profile_path else Path.cwd()
    source = str(profile_path) if profile_path else f"workload '{workload.id}'"
    name = workload.trace_file

    def refuse(why: str) -> PlanInputError:
        return PlanInputError(
            f"{why}; expected a path relative to the profile's directory, inside it",
            source=source,
            field="trace_file",
        )

    if "\0" in name:
        raise refuse("a NUL character in the path")
    if Path(name).is_absolute() or Path(name).anchor:
        raise refuse(f"{name!r} is an absolute path")
    try:
        inside = (base / name).resolve().is_relative_to(base.resolve())
    except (OSError, RuntimeError, ValueError):  # a symlink loop, an unreadable directory
        inside = False
    if not inside:
        raise refuse(f"{name!r} leaves the profile's directory")
    if not (base / name).exists():  # what else is wrong with it, the files layer says
        raise refuse(f"no such file {name!r}")
    return base / name


def turn_mix(workload: WorkloadProfile, *, profile_path: Path | None = None) -> TurnMix:
    """The workload's turns: its trace file when it names one, else its per-turn means.

    A profile's ``trace_file`` is relative to the profile's own directory (the working
    directory for a profile that has no file) and may not leave it: no absolute path, no
    ``..`` climbing out, also when set with ``--set workload.trace_file=...``. (A path given
    to :func:`load_trace` directly is the caller's choice.)"""
    if workload.trace_file:
        path = trace_path(workload, profile_path)
        return replace(load_trace(path), tool_latency_s=workload.tool_latency_s)
    one = np.ones(1)
    return TurnMix(
        cached_tokens=one * workload.context_tokens,
        append_tokens=one * workload.append_tokens,
        generated_tokens=one * workload.generated_tokens,
        weight=one,
        trajectory_turns=TurnCounts.uniform(workload.turns, workload.turns_spread),
        tool_latency_s=workload.tool_latency_s,
    )


TRACE_COLUMNS = ("trajectory_id", "append_tokens", "generated_tokens")


def _tokens(row: dict[str, Any], name: str, source: str, line: int, jsonl: bool) -> float:
    """A token count of a trace row: a whole number (text in CSV, a JSON number in JSON Lines)
    from 0 to the profiles' MAX_MAGNITUDE, which keeps every product the model forms finite
    (1.5 tokens was taken, and shown rounded)."""
    return number(
        row[name],
        source=source,
        field=name,
        line=line,
        integer=True,
        text=not jsonl,
        low=0,
        high=MAX_MAGNITUDE,
        what="a token count",
        quantity="turn_tokens",
    )


# The longest session (trajectory) id a trace may give: ids are echoed in reports and errors.
MAX_SESSION_ID_CHARS = 200


def session_id(value: object, *, source: str, line: int | None, field: str) -> str:
    """A trace's session or trajectory id: a string or a whole number, printable (no line
    break or control character: 'a\\nb' was taken, and an id printed on two lines), of 1 to
    MAX_SESSION_ID_CHARS characters."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise PlanInputError(
            f"expected a string or a whole number, got {value!r}",
            source=source,
            line=line,
            field=field,
        )
    text = str(value)
    if not text.strip() or not text.isprintable() or len(text) > MAX_SESSION_ID_CHARS:
        raise PlanInputError(
            f"expected a printable id of 1 to {MAX_SESSION_ID_CHARS} characters, got {text!r}",
            source=source,
            line=line,
            field=field,
        )
    return text


def load_trace(path: Path) -> TurnMix:
    """Per-turn rows from CSV (header row) or JSON Lines (``.jsonl``), in turn order within a
    trajectory: ``trajectory_id, append_tokens, generated_tokens[, context_tokens]``.

    Without ``context_tokens``, a turn's context is everything before it in its trajectory,
    context_{i+1} = A_1 + G_1 + ... + A_i + G_i (the paper's replay, appendix A.3).

    Read through :mod:`dualpath_plan.files`: a regular UTF-8 file of at most
    :data:`MAX_TRACE_BYTES` and :data:`MAX_TRACE_ROWS` rows; in JSON Lines every line an object
    with the columns, token counts JSON numbers (not strings or booleans) and trajectory ids
    strings or whole numbers."""
    source = str(path)
    jsonl = path.suffix.lower() in (".jsonl", ".ndjson")
    what = "trace file"
    rows: Iterator[tuple[int, dict[str, Any]]]
    if jsonl:
        rows = iter_jsonl_objects(
            path, what=what, max_bytes=MAX_TRACE_BYTES, max_rows=MAX_TRACE_ROWS
        )
    else:
        rows = iter_csv_rows(
            path,
            what=what,
            max_bytes=MAX_TRACE_BYTES,
            max_rows=MAX_TRACE_ROWS,
            required=TRACE_COLUMNS,
        )
    has_context: bool | None = None
    cached, append, generated = [], [], []
    lines: list[int] = []
    running: dict[str, float] = {}
    per_trajectory: dict[str, int] = {}
    number: dict[str, int] = {}  # trajectory id -> its index, by first appearance
    trajectory: list[int] = []
    known = (*TRACE_COLUMNS, "context_tokens")
    for line, row in rows:
        if has_context is None:
            # The first row sets the columns (a CSV header does so for every row).
            has_context = "context_tokens" in row
        for col in row:
            if col not in known:
                # A misspelt column was ignored: 'contxt_tokens' left every context to be
                # summed from the trajectory's earlier turns, silently.
                import difflib  # only here: not on every command's start-up path

                close = difflib.get_close_matches(str(col), known, n=1)
                hint = f"; did you mean {close[0]}?" if close else ""
                raise PlanInputError(
                    f"unknown column; a trace has {', '.join(TRACE_COLUMNS)}[, context_tokens]"
                    + hint,
                    source=source,
                    line=line,
                    field=str(col),
                )
        for col in (*TRACE_COLUMNS, *(("context_tokens",) if has_context else ())):
            if col not in row:
                raise PlanInputError(
                    f"missing; expected {', '.join(TRACE_COLUMNS)}[, context_tokens] in every row",
                    source=source,
                    line=line,
                    field=col,
                )

        a = _tokens(row, "append_tokens", source, line, jsonl)
        g = _tokens(row, "generated_tokens", source, line, jsonl)
        c = _tokens(row, "context_tokens", source, line, jsonl) if has_context else None
        if a <= 0:
            raise PlanInputError(
                "a turn appends at least one token", source=source, line=line, field="append_tokens"
            )
        tid = session_id(row["trajectory_id"], source=source, line=line, field="trajectory_id")
        ctx = c if c is not None else running.get(tid, 0.0)
        running[tid] = ctx + a + g
        per_trajectory[tid] = per_trajectory.get(tid, 0) + 1
        trajectory.append(number.setdefault(tid, len(number)))
        cached.append(ctx)
        append.append(a)
        generated.append(g)
        lines.append(line)
        rows_read(source, len(cached))
    count = len(cached)
    rows_read(source, count, done=True)
    if not count:
        raise PlanInputError("no turns in the trace", source=source)
    return TurnMix(
        cached_tokens=np.array(cached),
        append_tokens=np.array(append),
        generated_tokens=np.array(generated),
        weight=np.full(count, 1.0 / count),
        trajectory_turns=TurnCounts.observed(np.array(list(per_trajectory.values()))),
        source=source,
        lines=tuple(lines),
        context_given=bool(has_context),
        trajectory=np.array(trajectory, dtype=np.int64),
    )


@record
class TurnDemand:
    """What one turn asks of the cluster, per row of a mix (arrays broadcast together).

    hit_bytes: KV loaded from storage (the cached prefix).
    miss_bytes: KV the prefill computes for the appended tokens (moved P -> D on every path).
    generated_kv_bytes: KV of the generated tokens, written back from decode HBM.
    append_writeback_bytes: KV of the appended tokens, persisted from the decode buffer.
    prefill_flops: FLOPs to prefill the appended tokens.
    generated_tokens, context_tokens: for the decode model.
    """

    hit_bytes: FloatArray
    miss_bytes: FloatArray
    generated_kv_bytes: FloatArray
    append_writeback_bytes: FloatArray
    prefill_flops: FloatArray
    generated_tokens: FloatArray
    context_tokens: FloatArray  # cached + appended: the prompt
    weight: FloatArray
    trajectory_turns: TurnCounts
    append_tokens: FloatArray
    # A trace's: each row's trajectory (rows of one in turn order; empty for a profile), for
    # the simulation to replay them agent by agent.
    trajectory: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def mean(self, values: FloatArray) -> float:
        return float(np.sum(values * self.weight))

    @property
    def hit_rate(self) -> float:
        """Cached share of the prompts' tokens (the trace's own, for a trace)."""
        prompt = self.mean(self.context_tokens)
        return (prompt - self.mean(self.append_tokens)) / prompt if prompt > 0 else 0.0

    def means(self) -> Demand:
        """The mix's mean turn (every link load is linear in the demand, so means are exact
        for one common split); computed once (a frozen Demand of numbers: every assembly of
        the turns, one per mode and cluster, reads the same)."""
        return self._mean_turn

    @functools.cached_property
    def _mean_turn(self) -> Demand:
        f = np.float64
        return Demand(
            hit_bytes=f(self.mean(self.hit_bytes)),
            miss_bytes=f(self.mean(self.miss_bytes)),
            generated_kv_bytes=f(self.mean(self.generated_kv_bytes)),
            append_writeback_bytes=f(self.mean(self.append_writeback_bytes)),
            prefill_flops=f(self.mean(self.prefill_flops)),
            generated_tokens=f(self.mean(self.generated_tokens)),
        )

    @property
    def gb_per_pflop(self) -> float:
        """Cache-compute ratio of the mix: total bytes loaded over total prefill FLOPs."""
        return (self.mean(self.hit_bytes) / 1e9) / (self.mean(self.prefill_flops) / 1e15)


def trajectory_tokens(workload: WorkloadProfile, d: TurnDemand) -> float:
    """A trajectory's tokens at its end (its context grows from nothing to this): the
    profile's ``total_tokens``, else the mean turn's context plus its generated tokens. The
    KV working set (outcomes/serving.py) and the store's (physics/store.py) hold half of it
    per live agent."""
    return workload.total_tokens or (d.mean(d.context_tokens) + d.mean(d.generated_tokens))


def _tokens_text(value: float) -> str:
    return f"{value:,.10g}"


def context_window_limit(model: ModelProfile) -> str:
    """The model's window as an error states it, with the flag that lifts it (one phrasing for
    every command that checks a context against it)."""
    return (
        f"{model.id}'s context_window_tokens {model.context_window_tokens:,} (if the model "
        "serves longer contexts: --set model.context_window_tokens=N)"
    )


def check_context_window(model: ModelProfile, workload: WorkloadProfile, mix: TurnMix) -> None:
    """Every turn fits in the model's context window: context + appended + generated tokens
    (the sequence decode ends with) of the profile's mean turn or of each trace row, and the
    profile's ``max_len_tokens``, at most ``context_window_tokens``. A model profile without a
    window is not checked."""
    window = model.context_window_tokens
    if window is None:
        return
    limit = context_window_limit(model)
    total = mix.cached_tokens + mix.append_tokens + mix.generated_tokens
    over = np.flatnonzero(total > window)
    if over.size and mix.lines:  # a trace: the first row over, and how many are
        i = int(over[0])
        context = "context_tokens" if mix.context_given else "context (the turns before)"
        more = f"; {over.size:,} of {total.size:,} rows are over" if over.size > 1 else ""
        raise PlanInputError(
            f"{context} + append_tokens + generated_tokens = {_tokens_text(float(total[i]))} "
            f"exceeds {limit}{more}",
            source=mix.source or f"trace of workload '{workload.id}'",
            line=mix.lines[i],
        )
    if over.size:
        raise PlanInputError(
            f"context_tokens + append_tokens + generated_tokens = "
            f"{_tokens_text(float(total[0]))} exceeds {limit}",
            source=f"workload '{workload.id}'",
        )
    if workload.max_len_tokens is not None and workload.max_len_tokens > window:
        raise PlanInputError(
            f"{workload.max_len_tokens:,} exceeds {limit}",
            source=f"workload '{workload.id}'",
            field="max_len_tokens",
        )


def workload_demand(
    model: ModelProfile, workload: WorkloadProfile, profile_path: Path | None = None
) -> TurnDemand:
    """A workload's per-turn demand: from its abstract ratio when it gives one, else from the
    model's KV bytes and FLOPs over its turns. A turn beyond the model's context window is an
    input error (:func:`check_context_window`)."""
    if workload.is_abstract:
        check_context_window(model, workload, turn_mix(workload))
        assert workload.gb_per_pflop is not None and workload.kv_bytes_per_token is not None
        return abstract_turn_demand(
            gb_per_pflop=workload.gb_per_pflop,
            context_tokens=workload.context_tokens,
            append_tokens=workload.append_tokens,
            generated_tokens=workload.generated_tokens,
            kv_bytes_per_token=workload.kv_bytes_per_token,
            trajectory_turns=TurnCounts.uniform(workload.turns, workload.turns_spread),
        )
    mix = turn_mix(workload, profile_path=profile_path)
    check_context_window(model, workload, mix)
    return turn_demand(model, mix)


def turn_demand(model: ModelProfile, mix: TurnMix) -> TurnDemand:
    return TurnDemand(
        hit_bytes=phys.kv_bytes_for_context(model, mix.cached_tokens),
        miss_bytes=phys.kv_bytes_new_tokens(model, mix.append_tokens),
        generated_kv_bytes=phys.kv_bytes_new_tokens(model, mix.generated_tokens),
        append_writeback_bytes=phys.kv_bytes_new_tokens(model, mix.append_tokens),
        prefill_flops=phys.prefill_flops(model, mix.cached_tokens, mix.append_tokens),
        generated_tokens=mix.generated_tokens,
        context_tokens=mix.cached_tokens + mix.append_tokens,
        weight=mix.weight,
        trajectory_turns=mix.trajectory_turns,
        append_tokens=mix.append_tokens,
        trajectory=mix.trajectory,
    )


def abstract_turn_demand(
    *,
    gb_per_pflop: float,
    context_tokens: float,
    append_tokens: float,
    generated_tokens: float,
    kv_bytes_per_token: float,
    trajectory_turns: TurnCounts,
) -> TurnDemand:
    """A turn given by its cache-compute ratio, for planning before a model is chosen:
    hit bytes = context x KV bytes per token; prefill FLOPs = hit bytes / ratio."""
    for name, value in (
        ("gb_per_pflop", gb_per_pflop),
        ("append_tokens", append_tokens),
        ("kv_bytes_per_token", kv_bytes_per_token),
    ):
        if not (np.isfinite(value) and value > 0):
            raise PlanInputError(f"expected a finite number > 0, got {value!r}", field=name)
    for name, value in (("context_tokens", context_tokens), ("generated_tokens", generated_tokens)):
        if not (np.isfinite(value) and value >= 0):
            raise PlanInputError(f"expected a finite number >= 0, got {value!r}", field=name)
    one = np.ones(1)
    hit = one * context_tokens * kv_bytes_per_token
    flops = hit / 1e9 / gb_per_pflop * 1e15
    if context_tokens == 0:
        raise PlanInputError("a ratio needs cached context; got 0", field="context_tokens")
    return TurnDemand(
        hit_bytes=hit,
        miss_bytes=one * append_tokens * kv_bytes_per_token,
        generated_kv_bytes=one * generated_tokens * kv_bytes_per_token,
        append_writeback_bytes=one * append_tokens * kv_bytes_per_token,
        prefill_flops=flops,
        generated_tokens=one * generated_tokens,
        context_tokens=one * (context_tokens + append_tokens),
        weight=one,
        trajectory_turns=trajectory_turns,
        append_tokens=one * append_tokens,
    )
