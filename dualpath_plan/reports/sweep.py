"""The ``sweep`` report: every point to CSV or JSON Lines (through a temporary file), the
summary as JSON or a table."""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
from rich import box
from rich.console import Console
from rich.table import Table

from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import AtomicWriter, BlockWriter
from dualpath_plan.formatting import column, plain
from dualpath_plan.outcomes.objectives import OBJECTIVE_TABLE, Objective, lower_is_better
from dualpath_plan.outcomes.online import APS_LIMITS
from dualpath_plan.outcomes.sweep import SweepSummary, binding_label
from dualpath_plan.physics.modes import MODE_TABLE, ModeName
from dualpath_plan.profiles.schemas import NodeProfile
from dualpath_plan.reports import text_columns
from dualpath_plan.reports.provenance import efficiency_payload
from dualpath_plan.reports.text_columns import (
    Cells,
    Column,
    Floats,
    Ints,
    Picked,
    TextBuffer,
    column_cells,
    format_rows,
    join_cells,
    text_cells,
    writer_in_use,
)
from dualpath_plan.scenario.provenance import Efficiencies

OUT_COLUMNS = (
    "point",
    "mode",
    "P",
    "D",
    "agents",
    "gpus",
    "throughput_turns_per_s",
    "throughput_per_gpu",
    "saturated_turns_per_s",
    "jct_s",
    "drain_s",
    "decode_path_fraction",
    "bottleneck",
    "aps",
    "aps_limit",
    "feasible",
    "reason",
)


def _clean(v: object) -> object:
    """No NaN or inf in any output: infeasible points have empty (null) metrics."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, np.bool_):
        return bool(v)
    return v


class PointWriter:
    """Every point of a sweep, streamed to a temporary file beside ``path`` and renamed over it
    only when the sweep completes: a failed or interrupted sweep leaves the previous file as it
    was (a ``kill -9`` may leave a hidden ``.NAME.*.tmp`` beside it)."""

    def __init__(self, path: Path, extra: list[str]):
        suffix = path.suffix.lower()
        if suffix not in (".csv", ".jsonl", ".ndjson"):
            raise PlanInputError(
                f"expected a .csv or .jsonl file, got {path.name!r}", field="--out"
            )
        # An exception being handled already when the sweep starts is not the sweep's failure.
        self.outer = sys.exc_info()[1]
        self.file = AtomicWriter(path, binary=True, field="--out")
        self.handle = self.file.handle
        self.jsonl = suffix != ".csv"
        self.columns = [*extra, *OUT_COLUMNS]
        self.glue = self._glue()
        # The compiled writer where it was built (text_columns.rowtext), on a thread of its
        # own (``blocks``); else NumPy's, in ``buffer``.
        compiled = text_columns.rowtext is not None
        self.buffer = TextBuffer()
        # Each int column's last values and cells: P, D and the GPUs repeat block after block
        # in a grid with profile axes (the same P/D pairs for each combination).
        self.last: dict[str, tuple[np.ndarray, Cells]] = {}
        self.blocks: BlockWriter | None = None
        try:  # from here the temporary file exists: nothing may leave it behind
            if not self.jsonl:
                header = io.StringIO()
                csv.writer(header).writerow(self.columns)
                self.handle.write(header.getvalue().encode("utf-8", "backslashreplace"))
            # After the header: the thread writes every block after it, in order.
            if compiled:
                try:
                    self.blocks = BlockWriter(self.handle)
                except RuntimeError:  # no thread to be had (a process or thread limit):
                    self.blocks = None  # NumPy's writer in line, the same bytes
        except BaseException:
            self.file.abort()
            raise

    def write(self, rows: dict[str, np.ndarray]) -> None:
        """A chunk's points, in blocks of rows, the same text as writing one row at a time,
        floats with ``FLOAT_DIGITS`` significant digits. The compiled writer formats a
        block's rows in one pass (``text_columns.format_rows``), on the writer's thread
        (``files.BlockWriter``: the chunk's arrays are not changed once written, run_sweep's
        rows); NumPy's formats each column's
        cells at once (``text_columns``: the columns that are one P/D pair's, ``_by_pair``,
        once per pair; a column constant over the block once) and joins the rows
        (``text_columns.join_cells``)."""
        n = int(np.size(rows["point"]))
        by_pair = set(np.asarray(rows["_by_pair"]).tolist()) if "_pair" in rows else set()
        for start in range(0, n, _BLOCK):
            part = slice(start, min(start + _BLOCK, n))
            if self.blocks is not None:
                columns: list[bytes | Column] = []
                for glue, name in zip(self.glue, self.columns, strict=False):
                    block = _of_block(rows, name, part, self.jsonl)
                    column = block if isinstance(block, bytes) else _values(*block, self.jsonl)
                    columns += [glue, column]
                columns.append(self.glue[-1])
                self.blocks.submit(functools.partial(_formatted, columns, part.stop - part.start))
                continue
            pairs = _pairs(rows["_pair"][part]) if by_pair else None
            parts: list[bytes | Cells] = []
            for glue, name in zip(self.glue, self.columns, strict=False):
                cells = _column(rows, name, part, self.jsonl, by_pair, pairs, self.last)
                parts += [glue, cells]
            parts.append(self.glue[-1])
            self.handle.write(join_cells(parts, part.stop - part.start, self.buffer).data)

    def _glue(self) -> list[bytes]:
        """The text before each column and at the end of a row: CSV's commas and line end,
        or JSON's keys and braces."""
        if self.jsonl:
            texts = [
                ("{" if k == 0 else ", ") + json.dumps(c) + ": " for k, c in enumerate(self.columns)
            ]
            texts.append("}\n")
        else:
            texts = ["", *[","] * (len(self.columns) - 1), "\r\n"]
        return [t.encode() for t in texts]

    def close(self) -> None:
        """Called from the sweep's ``finally``: put the file in place if the sweep completed,
        else (an exception on its way out, Ctrl-C included) drop it."""
        failed = sys.exc_info()[1] not in (None, self.outer)
        if self.blocks is not None:
            try:
                if failed:
                    self.blocks.cancel()
                else:
                    self.blocks.finish()  # a block the system refused raises here
            except BaseException:  # that, or Ctrl-C while waiting for the thread
                self.file.abort()
                raise
        if failed:
            self.file.abort()
        else:
            self.file.commit()


def _formatted(columns: list[bytes | Column], rows: int, out: bytearray) -> memoryview:
    """A block's rows formatted by the compiled writer into ``out``: the bytes to write."""
    size = format_rows(columns, rows, out)  # before any view: it may grow ``out``
    return memoryview(out)[:size]


# Rows formatted and written at once: a block's strings, not the chunk's, are held at a time.
_BLOCK = 10_000


def _pairs(pair: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """A block's P/D pairs (``pair``: each point's, in order): the first point of each and
    each point's pair counted from 0; None where each point has a pair of its own."""
    if not pair.size:
        return None
    change = np.diff(pair, prepend=pair[0] - 1) != 0
    starts = np.flatnonzero(change)
    if starts.size == pair.size:
        return None
    change[0] = False
    return starts, np.cumsum(change)


def _of_block(
    rows: dict[str, np.ndarray], name: str, part: slice, jsonl: bool
) -> bytes | tuple[str, np.ndarray, np.ndarray]:
    """One column of a block of points (``part`` of the chunk): its text where it is the
    same on every row (a column not computed, the mode, a column of numbers constant over the
    block: formatted once), else its key in ``rows``, its values and the points' feasibility
    (``_values``' arguments but the format)."""
    key = "binding_mask" if name == "bottleneck" else name
    if key not in rows:  # aps and aps_limit when not computed
        return b"null" if jsonl else b""
    values = rows[key]
    if np.ndim(values) == 0:  # the mode
        return _text(values.item(), jsonl)
    values = values[part]
    feasible = rows["feasible"][part]
    # (Not the bottleneck: its text depends on the point's feasibility too.)
    if values.size and key != "binding_mask" and _constant(values):
        return _one_text(key, values[:1].tobytes(), values.dtype.str, jsonl)
    return key, values, feasible


@functools.lru_cache(maxsize=1024)
def _one_text(key: str, raw: bytes, dtype: str, jsonl: bool) -> bytes:
    """The text of a column of numbers holding one value (``raw``, of ``dtype``; its bytes, so
    that 0.0 and -0.0 differ), formatted once: the same values come back block after block (a
    profile field's, the agents)."""
    value = np.frombuffer(raw, dtype=dtype)
    return _cells(key, value, np.ones(1, dtype=bool), jsonl).text(0)


def _column(
    rows: dict[str, np.ndarray],
    name: str,
    part: slice,
    jsonl: bool,
    by_pair: set[str],
    pairs: tuple[np.ndarray, np.ndarray] | None,
    last: dict[str, tuple[np.ndarray, Cells]],
) -> Cells:
    """One column of a block of points (``part`` of the chunk) as cells (NumPy's writer): a
    column of the P/D pair (``by_pair``; ``pairs``: the block's, from ``_pairs``) formatted
    once per pair and spread over its points; an int column the same as in the previous block
    (``last``) not again."""
    block = _of_block(rows, name, part, jsonl)
    if isinstance(block, bytes):
        return text_cells([block])
    key, values, feasible = block
    if key in by_pair and pairs is not None:
        starts, which = pairs
        return _cells(key, values[starts], feasible[starts], jsonl).take(which)
    if values.dtype.kind in "iu" and key != "binding_mask":
        seen = last.get(key)
        if seen is not None and _same(seen[0], values):
            return seen[1]
        cells = _cells(key, values, feasible, jsonl)
        last[key] = (values.copy(), cells)
        return cells
    return _cells(key, values, feasible, jsonl)


def _same(before: np.ndarray, values: np.ndarray) -> bool:
    """Whether a column holds the values it held in the previous block (the first values
    first: a column of point numbers differs there)."""
    return (
        before.shape == values.shape
        and bool(values.size)
        and bool(before[0] == values[0])
        and np.array_equal(before, values)
    )


def _constant(values: np.ndarray) -> bool:
    """Whether a column of numbers holds one value (a profile field's np.full, the agents
    without an agents axis): formatted once."""
    return (
        values.dtype.kind in "fiu"
        and bool(values[0] == values[-1])
        and bool(np.all(values == values[0]))
    )


@functools.lru_cache(maxsize=1024, typed=True)
def _text(v: object, jsonl: bool) -> bytes:
    """A text cell (None: empty, null) as CSV (quoted where csv.writer quotes) or JSON (the
    same few texts, modes, links and reasons, are asked for block after block)."""
    if jsonl:
        return json.dumps(v).encode("utf-8", "backslashreplace")
    if v is None:
        return b""
    line = io.StringIO()
    csv.writer(line, lineterminator="").writerow([v, ""])
    return line.getvalue()[:-1].encode("utf-8", "backslashreplace")


def _labels(codes: np.ndarray, say: Callable[[int], object], jsonl: bool) -> Picked:
    """A column of a few distinct codes, each said once."""
    codes = np.ravel(codes)
    # The distinct codes one at a time while they are few (a block has a handful of sets of
    # binding links): faster than sorting the column.
    distinct: list[int] = []
    rest = codes
    while rest.size and len(distinct) < _PEEL:
        distinct.append(int(rest[0]))
        rest = rest[rest != rest[0]]
    if rest.size:
        distinct = np.unique(codes).tolist()
    texts = tuple(_text(say(c), jsonl) for c in distinct)
    if len(distinct) == 1:
        return Picked(texts)
    if len(distinct) > _PEEL:
        return Picked(texts, np.searchsorted(distinct, codes))
    which = np.zeros(codes.size, dtype=np.intp)
    for i, c in enumerate(distinct[1:], 1):
        which[codes == c] = i
    return Picked(texts, which)


# Distinct codes of a label column found one at a time up to this many.
_PEEL = 8


def _cells(name: str, values: np.ndarray, feasible: np.ndarray, jsonl: bool) -> Cells:
    """The cells of a column's values (NumPy's writer)."""
    return column_cells(_values(name, values, feasible, jsonl))


def _values(name: str, values: np.ndarray, feasible: np.ndarray, jsonl: bool) -> Column:
    """A column's values as the writers take them, their text as ``_clean`` and the row
    writers had it: labels, bools and reasons as texts picked by codes, numbers as numbers."""
    if name == "binding_mask":  # the bottleneck column: the names of the binding links
        codes = np.where(np.asarray(feasible, dtype=bool), values, -1)
        return _labels(codes, lambda m: binding_label(m) if m >= 0 else None, jsonl)
    if name == "aps_limit":
        return _labels(values, lambda v: APS_LIMITS[v] if v >= 0 else None, jsonl)
    kind = values.dtype.kind
    if kind == "b":
        return Picked((b"false", b"true") if jsonl else (b"False", b"True"), values)
    if kind in "iu":
        return Ints(values)
    if kind == "f":
        return Floats(values, b"null" if jsonl else b"")
    # object (the reason: text or None), each distinct text formatted once. Only an
    # infeasible point has a reason (run_sweep's rows): the others are not looked at, a
    # comparison with None per point costing more than the rest of the column.
    said: dict[object, int] = {None: 0}
    codes = np.zeros(values.size, dtype=np.intp)
    there = np.flatnonzero(~np.asarray(feasible, dtype=bool))
    if there.size:
        codes[there] = [said.setdefault(r, len(said)) for r in values[there].tolist()]
    return Picked(tuple(_text(r, jsonl) for r in said), codes)


def _share(summary: SweepSummary) -> dict[str, float]:
    """Per set of binding links ("a + b" on a tie), its share of the feasible points."""
    if not summary.feasible:
        return {}
    ranked = sorted(summary.binding_counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return {k: v / summary.feasible for k, v in ranked}


def _varied(extra: list[str]) -> list[str]:
    """The grid's axes over a node's calibration fields: efficiencies that vary by point."""
    return [
        name
        for name in extra
        if name.startswith("node.") and name.partition(".")[2] in NodeProfile.CALIBRATION_FIELDS
    ]


def efficiency_text(e: Efficiencies, extra: list[str]) -> str:
    """The efficiencies in force, and which of them the grid varies."""
    varied = _varied(extra)
    return e.line() + (f"; varied by --grid: {', '.join(varied)}" if varied else "")


def sweep_payload(
    summary: SweepSummary,
    objective: str,
    out: Path | None,
    aps: bool = False,
    efficiencies: Efficiencies | None = None,
    extra: list[str] | None = None,
) -> dict[str, Any]:
    return {
        "efficiencies": (
            {**efficiency_payload(efficiencies), "varied_by_grid": _varied(extra or [])}
            if efficiencies is not None
            else None
        ),
        "points": summary.points,
        "feasible": summary.feasible,
        "bottleneck_share": _share(summary),
        "objective": objective,
        "aps_computed": aps,
        "modes": {
            mode: {
                "points": part.points,
                "feasible": part.feasible,
                # without --aps, aps and aps_limit are null (not computed)
                "best": [
                    {k: _clean(v) for k, v in {"aps": None, "aps_limit": None, **r}.items()}
                    for r in part.best
                ],
                "infeasible_reason": part.infeasible_reason,
            }
            for mode, part in summary.modes.items()
        },
        "out": str(out) if out else None,
        "out_writer": writer_in_use() if out else None,
    }


# The summary table's columns: (row key, header, format: a format string for a cell, or the
# significant digits of a column of figures, one precision for the column); short headers, so
# that the table fits a 100-column terminal (the file written by --out has every column by its
# full name).
_TABLE: tuple[tuple[str, str, str | int], ...] = (
    ("agents", "agents", "{:,d}"),
    ("gpus", "GPUs", "{:d}"),
    ("throughput_turns_per_s", "turns/s", 4),
    ("throughput_per_gpu", "per GPU", 3),
    ("jct_s", "JCT s", "{:,.0f}"),
    ("aps", "APS", 3),
    ("aps_limit", "limit", "{}"),
    ("decode_path_fraction", "DE share", "{:.0%}"),
    ("bottleneck", "binding", "{}"),
)


def _missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and not math.isfinite(v))


def _summary_cells(values: list[object], fmt: str | int) -> list[str]:
    """A column of the summary: a figure column (``fmt`` its significant digits) with one
    precision, a grid axis (``fmt`` "") as the grid gave it, else each cell by its format; ""
    where a value is missing."""
    if fmt == "":
        return ["" if _missing(v) else plain(float(cast(float, v)), 12) for v in values]
    if isinstance(fmt, int):
        texts = iter(column([float(cast(float, v)) for v in values if not _missing(v)], fmt))
        return ["" if _missing(v) else next(texts) for v in values]
    return ["" if _missing(v) else fmt.format(v) for v in values]


def _header(name: str, extra: list[str]) -> str:
    """A profile-field axis by its field name alone where no other axis shares it; another
    column (the read share of a store's cache) by its own name."""
    if "." not in name:
        return name
    field = name.partition(".")[2]
    return field if sum(e.partition(".")[2] == field for e in extra) == 1 else name


def render_sweep(
    summary: SweepSummary,
    objective: str,
    modes: tuple[str, ...],
    extra: list[str],
    out: Path | None,
    console: Console,
    aps: bool = False,
    inputs: str = "",
    agents_axis: bool = False,
) -> None:
    """The summary: the grid, what binds how often, each mode's best points, why points are
    infeasible. ``inputs``: the scenario in a line; ``agents_axis``: agents vary (a column)."""
    console.print(
        f"[bold]{summary.points:,} point{'' if summary.points == 1 else 's'}[/bold] "
        f"({summary.feasible:,} feasible), "
        f"modes {', '.join(modes)}"
    )
    if inputs:
        console.print(inputs)
    share = _share(summary)
    if share:
        console.print("binding links: " + ", ".join(f"{k} {v:.0%}" for k, v in share.items()))
    best = "best point" if summary.top == 1 else f"best {summary.top} points"
    ranked = cast(Objective, objective)  # run_sweep took it (objective_of)
    sense = "lowest" if lower_is_better(ranked) else "highest"
    table = Table(
        title=f"{best} per mode ({sense} {OBJECTIVE_TABLE[ranked][1]})",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        collapse_padding=True,
        pad_edge=False,
    )
    # A profile axis's value as the grid gave it (to the 12 digits of a range's points), not
    # to 4: 123456 is not 1.235e+05, 0.00004 not 4e-05.
    cols: list[tuple[str, str, str | int]] = [(c, _header(c, extra), "") for c in extra]
    cols += [
        t
        for t in _TABLE
        if (aps or t[0] not in ("aps", "aps_limit")) and (agents_axis or t[0] != "agents")
    ]
    table.add_column("mode", no_wrap=True)
    table.add_column("P/D", no_wrap=True)
    for key, header, _ in cols:
        table.add_column(
            header,
            justify="left" if key in ("aps_limit", "bottleneck") else "right",
            min_width=len(header),
            no_wrap=key != "bottleneck",
            overflow="fold",
        )
    rows = [
        (mode, r)
        for mode in modes
        if (part := summary.modes.get(mode)) is not None
        for r in part.best
    ]
    by_col = [_summary_cells([r.get(key) for _, r in rows], fmt) for key, _, fmt in cols]
    for i, (mode, r) in enumerate(rows):
        # The oracle reads nothing: no share of reads, "-" as in size's table.
        io_free = MODE_TABLE[cast(ModeName, mode)].io_free
        table.add_row(
            mode,
            f"{r['P']}P{r['D']}D",
            *[
                "-" if io_free and key == "decode_path_fraction" else cells[i]
                for (key, _, _), cells in zip(cols, by_col, strict=True)
            ],
        )
    if summary.feasible:
        console.print(table)
    said: dict[tuple[int, int, str | None], list[str]] = {}  # modes that say the same
    for m in modes:
        part = summary.modes.get(m)
        if part is not None and part.feasible < part.points:
            said_key = (part.points, part.feasible, part.infeasible_reason)
            said.setdefault(said_key, []).append(m)
    for (points, feasible, reason), names in said.items():
        each = " each" if len(names) > 1 else ""
        if not feasible:
            console.print(f"{', '.join(names)}: no feasible point{each}: {reason}")
        else:
            console.print(
                f"{', '.join(names)}: {points - feasible:,} of {points:,} points "
                f"infeasible{each}, the first: {reason}"
            )
    if aps:
        console.print(
            "APS: online agents/s within both SLOs and the headroom; limit: what stops a "
            "higher one (ttft, tpot, throughput, utilization: --max-utilization caps it, or "
            "unreachable: even one agent misses an SLO)"
        )
    else:
        console.print("APS not computed (--aps or --objective aps adds it)")
    if out:
        console.print(f"every point written to {out} ({writer_in_use()} writer)")
