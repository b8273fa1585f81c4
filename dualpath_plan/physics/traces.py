"""Request traces of other tools as per-turn workloads (``dualpath-plan workload import``).

Each format is read as a stream of requests, and every request becomes one turn: its cached
(hit) tokens, appended tokens = input - hit, generated tokens = output, and the session it
belongs to. Where a format has block hashes, the hit is the longest prefix of the request's
hash blocks already seen in its scope, times the block size (:func:`prefix_blocks`); the
request's blocks are then marked seen. Scopes: one global scope for Mooncake, the session file
for kv-cache-tester (``hash_id_scope = "local"``; one scope across files for ``"global"``), the
chat tree (``parent_chat_id`` links followed to the root) for Bailian. BurstGPT has no hashes:
the cached part of a turn is the stated assumption that the session's previous prompt and
response are cached. A prompt wholly in cache still computes its last token (the first output
token needs its logits, as vLLM and SGLang do), so a hit is at most input - 1
(:func:`cached_tokens`).

Sessions are rebuilt where the format says what they are (an explicit session id, parent links,
one file per session); where it does not (Mooncake without ``session_id``) every request is a
one-turn session of its own with its measured hit, and the summary says so: no turn chaining is
invented.

Every failure is a :class:`PlanInputError` naming the file, the line (the field path in a
kv-cache-tester session, which is one JSON document) and the field. Memory stays bounded: the
files are streamed, and what is kept is the seen blocks of the open scopes, a count per session
and a timestamp per request.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import takewhile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from dualpath_plan import plausible
from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import (
    MAX_IMPORT_BYTES,
    MAX_IMPORT_LINE_BYTES,
    MAX_SESSION_FILE_BYTES,
    MAX_TRACE_BYTES,
    MAX_TRACE_ROWS,
    iter_csv_rows,
    iter_jsonl_objects,
    iter_jsonl_stream,
    load_json,
    number,
    rows_read,
)
from dualpath_plan.frozen import record
from dualpath_plan.physics.workload import TRACE_COLUMNS, load_trace, session_id
from dualpath_plan.plausible import QUANTITIES
from dualpath_plan.profiles.schemas import MAX_MAGNITUDE

# A turn's tokens, at most: the plausibility table's bound (above it, number() names the slip).
TURN_TOKENS_MAX = QUANTITIES["turn_tokens"].high

FORMATS: tuple[str, ...] = ("mooncake", "kv-cache-tester", "bailian", "burstgpt", "csv")
# Hash block size in tokens where the format does not state it in the file.
DEFAULT_BLOCK_SIZE = {"mooncake": 512, "bailian": 16}
# The session field a format names its sessions by, where it has one (--session-field).
DEFAULT_SESSION_FIELD = {"mooncake": "session_id", "burstgpt": "Session ID"}
# BurstGPT's Model column (github.com/HPMLL/BurstGPT: ChatGPT and GPT-4 conversation and API
# logs).
BURSTGPT_MODELS = ("ChatGPT", "GPT-4")
BURSTGPT_ASSUMPTION = (
    "BurstGPT has no block hashes: assumed that the session's previous prompt and response are "
    "cached, hit = min(previous request tokens + previous response tokens, request tokens - 1)"
)


@record
class ImportOptions:
    """How to read a trace: its format, and where the format allows, the hash block size and
    the field that names sessions."""

    format: str
    block_size: int | None = None
    session_field: str | None = None


class Turn(NamedTuple):
    """One request as a turn: its session, prompt (input) tokens, generated (output) tokens,
    cached (hit) tokens, its time in seconds on the trace's clock (None without one) and
    whether a sub-agent made it (kv-cache-tester). (A tuple: a million are made per import.)"""

    session: str
    input_tokens: float
    output_tokens: float
    hit_tokens: float
    timestamp_s: float | None = None
    subagent: bool = False
    # For ``workload hitcurve`` (physics/hitcurve.py), which needs each request's blocks in order:
    # the request's hash ids and the hash scope they are in (formats with hashes), or the tokens
    # its prompt shares with its session's previous request before the last-token cap (formats
    # without: its blocks are derived from the session's growing prefix).
    hash_ids: Sequence[int] | None = None
    scope: str = ""
    shared_tokens: float | None = None

    @property
    def append_tokens(self) -> float:
        return self.input_tokens - self.hit_tokens


@dataclass
class TraceRead:
    """A trace being read: its turns (a stream, consumed once) and what the reading found out
    about it, complete once the stream is exhausted."""

    turns: Iterator[Turn]
    sources: tuple[str, ...]
    block_size: int | None
    clock: str | None  # what the timestamps are, None when requests share no clock
    notes: list[str] = field(default_factory=list)
    # The plausibility table's quantity for the gap between requests, in the clock's
    # unit (a unit slip in the timestamps: seconds or microseconds where milliseconds are
    # meant), and the seconds one unit of that clock is; None: not checked.
    gap_quantity: str | None = None
    clock_unit_s: float = 1.0


def prefix_blocks(hash_ids: Sequence[Any], seen: set[Any]) -> int:
    """How many of the request's leading blocks were seen before in its scope; then every
    block of the request is marked seen."""
    k = len(list(takewhile(seen.__contains__, hash_ids)))
    seen.update(hash_ids)
    return k


def cached_tokens(cached: float, input_tokens: float) -> float:
    """The hit of a request: the cached tokens, at most input - 1 (the last prompt token is
    always computed: the first output token needs its logits)."""
    return max(min(cached, input_tokens - 1), 0)


# --- field checks --------------------------------------------------------------------------


def _tokens(
    value: object, *, source: str, line: int | None, field: str, low: int, text: bool = False
) -> int:
    if type(value) is int and low <= value <= TURN_TOKENS_MAX:  # the common case, quickly
        return value
    what = "at least one token" if low == 1 else "a token count"
    return int(
        number(
            value,
            source=source,
            line=line,
            field=field,
            integer=True,
            text=text,
            low=low,
            high=MAX_MAGNITUDE,
            what=what,
            quantity="turn_tokens",
        )
    )


def _seconds(value: object, *, source: str, line: int | None, field: str) -> float:
    if (type(value) is int or type(value) is float) and 0 <= value <= MAX_MAGNITUDE:  # type: ignore[operator]
        return float(value)  # type: ignore[arg-type]
    return number(value, source=source, line=line, field=field, low=0, high=MAX_MAGNITUDE)


def _hash_ids(
    value: object, *, input_tokens: int, block: int, source: str, line: int | None, field: str
) -> list[int]:
    if not isinstance(value, list):
        raise PlanInputError(
            f"expected a list of whole numbers, got {type(value).__name__}",
            source=source,
            line=line,
            field=field,
        )
    if not set(map(type, value)) <= {int}:
        bad = next(v for v in value if type(v) is not int)
        raise PlanInputError(
            f"expected a list of whole numbers, got {bad!r} in it",
            source=source,
            line=line,
            field=field,
        )
    # Full blocks at least (kv-cache-tester lists those), a partial last one at most (Mooncake
    # lists it too): fewer ids would undercount the hit, more cannot be.
    most = -(-input_tokens // block)
    least = input_tokens // block
    if not least <= len(value) <= most:
        raise PlanInputError(
            f"{len(value):,} blocks of {block} tokens for an input of {input_tokens:,} tokens; "
            f"expected {least:,} to {most:,} hash ids (the input's full blocks, and its "
            "partial last one or not)",
            source=source,
            line=line,
            field=field,
        )
    return value


def _block_size(options: ImportOptions) -> int:
    return options.block_size or DEFAULT_BLOCK_SIZE[options.format]


def _no_option(options: ImportOptions, name: str, why: str) -> None:
    given = options.block_size if name == "--block-size" else options.session_field
    if given is not None:
        raise PlanInputError(f"does not apply to --format {options.format}: {why}", field=name)


# --- formats -------------------------------------------------------------------------------


def _mooncake(paths: Sequence[Path], options: ImportOptions) -> TraceRead:
    (path,) = paths
    source = str(path)
    block = _block_size(options)
    session_field = options.session_field or DEFAULT_SESSION_FIELD["mooncake"]
    read = TraceRead(
        iter(()), (source,), block, "timestamp (ms)", gap_quantity="mooncake.request_gap_ms",
        clock_unit_s=1e-3,
    )  # fmt: skip

    def turns() -> Iterator[Turn]:
        seen: set[int] = set()
        has_session: bool | None = None
        last_ts, last_line = 0.0, 0
        rows = iter_jsonl_stream(
            path,
            what="Mooncake trace",
            max_bytes=MAX_IMPORT_BYTES,
            max_rows=MAX_TRACE_ROWS,
            max_line_bytes=MAX_IMPORT_LINE_BYTES,
            required=("timestamp", "input_length", "output_length", "hash_ids"),
        )
        for index, (line, obj) in enumerate(rows, 1):
            inp = _tokens(
                obj["input_length"], source=source, line=line, field="input_length", low=1
            )
            out = _tokens(
                obj["output_length"], source=source, line=line, field="output_length", low=0
            )
            ts = _seconds(obj["timestamp"], source=source, line=line, field="timestamp")
            if ts < last_ts:
                # The hits are counted in the file's order, which a Mooncake trace gives as the
                # order of arrival (FAST'25 release): out of order, both were wrong silently.
                raise PlanInputError(
                    f"{ts:g} ms is earlier than the request before it ({last_ts:g} ms, line "
                    f"{last_line}); a Mooncake trace lists its requests in the order they "
                    "arrive (sort it by timestamp)",
                    source=source,
                    line=line,
                    field="timestamp",
                )
            last_ts, last_line = ts, line
            ids = _hash_ids(
                obj["hash_ids"],
                input_tokens=inp,
                block=block,
                source=source,
                line=line,
                field="hash_ids",
            )
            present = session_field in obj
            if has_session is None:
                if not present and options.session_field is not None:
                    # A field --session-field names is in the trace, as burstgpt's column is
                    # (a missing one was a note here and an error there: found in a trial).
                    raise PlanInputError(
                        "missing; --session-field names it", source=source, line=line,
                        field=session_field,
                    )  # fmt: skip
                has_session = present
            elif present != has_session:
                raise PlanInputError(
                    "missing, but earlier requests have it; expected it in every request or none"
                    if has_session
                    else "present, but earlier requests have none; expected it in every "
                    "request or none",
                    source=source,
                    line=line,
                    field=session_field,
                )
            session = (
                session_id(obj[session_field], source=source, line=line, field=session_field)
                if present
                else f"request-{index}"
            )
            hit = cached_tokens(prefix_blocks(ids, seen) * block, inp)
            yield Turn(session, inp, out, hit, ts / 1000.0, False, ids)
        if not has_session:
            read.notes.append(
                f"no '{session_field}' in the trace: each request is a one-turn session of its "
                "own with its measured hit (one global hash scope); no turn chaining is invented"
            )

    read.turns = turns()
    return read


class _Count:
    def __init__(self) -> None:
        self.rows = 0


@dataclass
class _KvtSession:
    """One kv-cache-tester session file's requests, sub-agents included (depth first)."""

    source: str
    block: int
    seen: set[int]
    main: str
    count: _Count
    scope: str  # the hash scope: the file's main session ("local"), or "" for all ("global")
    subagents: int = 0

    def walk(self, requests: object, where: str, session: str, sub: bool) -> Iterator[Turn]:
        source = self.source
        if not isinstance(requests, list):
            raise PlanInputError(
                f"expected a list of requests, got {type(requests).__name__}",
                source=source,
                field=where,
            )
        for i, req in enumerate(requests):
            at = f"{where}[{i}]"
            if not isinstance(req, dict):
                raise PlanInputError(
                    f"expected a JSON object, got {type(req).__name__}", source=source, field=at
                )
            if req.get("type") == "subagent":
                self.subagents += 1
                name = f"{self.main}/sub-{self.subagents}"
                yield from self.walk(req.get("requests"), f"{at}.requests", name, True)
                continue
            for key in ("in", "out", "hash_ids"):
                if key not in req:
                    raise PlanInputError(
                        "missing; expected in, out and hash_ids in every request",
                        source=source,
                        field=f"{at}.{key}",
                    )
            if "model" in req and not isinstance(req["model"], str):
                raise PlanInputError(
                    f"expected a model name, got {req['model']!r}",
                    source=source,
                    field=f"{at}.model",
                )
            inp = _tokens(req["in"], source=source, line=None, field=f"{at}.in", low=1)
            out = _tokens(req["out"], source=source, line=None, field=f"{at}.out", low=0)
            ids = _hash_ids(
                req["hash_ids"],
                input_tokens=inp,
                block=self.block,
                source=source,
                line=None,
                field=f"{at}.hash_ids",
            )
            self.count.rows += 1
            if self.count.rows > MAX_TRACE_ROWS:
                raise PlanInputError(
                    f"more than {MAX_TRACE_ROWS:,} requests in all; a trace may have at most "
                    f"{MAX_TRACE_ROWS:,}",
                    source=source,
                    field=at,
                )
            hit = cached_tokens(prefix_blocks(ids, self.seen) * self.block, inp)
            yield Turn(session, inp, out, hit, None, sub, ids, self.scope)


def _kv_cache_tester(paths: Sequence[Path], options: ImportOptions) -> TraceRead:
    _no_option(
        options, "--session-field", "a session is a file, its sub-agents sessions of their own"
    )
    read = TraceRead(iter(()), tuple(map(str, paths)), options.block_size, None)

    def turns() -> Iterator[Turn]:
        shared: set[int] = set()
        scopes: set[str] = set()  # the files' hash_id_scope: one for all
        count = _Count()
        sessions: set[str] = set()
        subagents = 0
        for path in paths:
            source = str(path)
            data = load_json(path, what="kv-cache-tester session", max_bytes=MAX_SESSION_FILE_BYTES)
            if not isinstance(data, dict):
                raise PlanInputError(
                    f"expected a JSON object (a session), got {type(data).__name__}", source=source
                )
            for name in ("block_size", "hash_id_scope", "requests"):
                if name not in data:
                    raise PlanInputError(
                        "missing; expected block_size, hash_id_scope and requests",
                        source=source,
                        field=name,
                    )
            block = int(
                number(
                    data["block_size"],
                    source=source,
                    field="block_size",
                    integer=True,
                    low=1,
                    high=1 << 20,
                )
            )
            if read.block_size is None:
                read.block_size = block
            elif block != read.block_size:
                given = "--block-size says" if options.block_size else "an earlier session has"
                raise PlanInputError(
                    f"{block}, but {given} {read.block_size}; expected one block size",
                    source=source,
                    field="block_size",
                )
            scope = data["hash_id_scope"]
            if scope not in ("local", "global"):
                raise PlanInputError(
                    f"expected 'local' or 'global', got {scope!r}",
                    source=source,
                    field="hash_id_scope",
                )
            if scopes and scope not in scopes:
                # Mixed scopes were resolved one way silently (a global file's hashes then
                # counted as hits of another's local ones, or not): one scope, as one block
                # size (found in a trial).
                raise PlanInputError(
                    f"{scope!r}, but an earlier session has {next(iter(scopes))!r}; expected one "
                    "hash scope",
                    source=source,
                    field="hash_id_scope",
                )
            scopes.add(scope)
            seen: set[int] = set() if scope == "local" else shared
            name = data.get("id", path.stem)
            main = session_id(name, source=source, line=None, field="id")
            if main in sessions:
                raise PlanInputError(
                    f"session '{main}' is in two files; expected one file per session",
                    source=source,
                    field="id",
                )
            sessions.add(main)

            session = _KvtSession(source, block, seen, main, count, "" if seen is shared else main)
            yield from session.walk(data["requests"], "requests", main, False)
            subagents += session.subagents
        read.notes.append(
            "one session per file; request times are relative to each session's start, so "
            "the sessions share no clock and the arrival rate is not derived"
        )
        if subagents:
            read.notes.append(
                f"{subagents} sub-agent(s): each a session of its own, sharing its file's hash "
                "scope, reported separately"
            )

    read.turns = turns()
    return read


def _bailian(paths: Sequence[Path], options: ImportOptions) -> TraceRead:
    _no_option(options, "--session-field", "a session is a chat tree (parent_chat_id links)")
    (path,) = paths
    source = str(path)
    block = _block_size(options)
    read = TraceRead(iter(()), (source,), block, "timestamp (s)")

    def turns() -> Iterator[Turn]:
        root_of: dict[str, str] = {}
        scopes: dict[str, set[int]] = {}
        orphans = 0
        rows = iter_jsonl_stream(
            path,
            what="Bailian trace",
            max_bytes=MAX_IMPORT_BYTES,
            max_rows=MAX_TRACE_ROWS,
            max_line_bytes=MAX_IMPORT_LINE_BYTES,
            required=(
                "chat_id",
                "parent_chat_id",
                "timestamp",
                "input_length",
                "output_length",
                "turn",
                "hash_ids",
            ),
        )
        for line, obj in rows:
            chat = session_id(obj["chat_id"], source=source, line=line, field="chat_id")
            parent_value = obj["parent_chat_id"]
            root_parent = parent_value == -1 and not isinstance(parent_value, bool)
            parent = (
                None
                if root_parent
                else session_id(parent_value, source=source, line=line, field="parent_chat_id")
            )
            inp = _tokens(
                obj["input_length"], source=source, line=line, field="input_length", low=1
            )
            out = _tokens(
                obj["output_length"], source=source, line=line, field="output_length", low=0
            )
            ts = _seconds(obj["timestamp"], source=source, line=line, field="timestamp")
            _tokens(obj["turn"], source=source, line=line, field="turn", low=0)
            ids = _hash_ids(
                obj["hash_ids"],
                input_tokens=inp,
                block=block,
                source=source,
                line=line,
                field="hash_ids",
            )
            if chat in root_of:
                raise PlanInputError(
                    f"chat {chat} appears twice; expected every chat_id once",
                    source=source,
                    line=line,
                    field="chat_id",
                )
            if parent is None:
                root = chat
            elif parent in root_of:
                root = root_of[parent]
            else:
                root = chat
                orphans += 1
            root_of[chat] = root
            seen = scopes.setdefault(root, set())
            hit = cached_tokens(prefix_blocks(ids, seen) * block, inp)
            yield Turn(root, inp, out, hit, ts, False, ids, root)
        read.notes.append(
            "sessions are chat trees (parent_chat_id followed to the root), each its own hash scope"
        )
        if orphans:
            read.notes.append(
                f"{orphans:,} request(s) name a parent that is not earlier in the file: each "
                "starts a chat tree of its own"
            )

    read.turns = turns()
    return read


def _burstgpt(paths: Sequence[Path], options: ImportOptions) -> TraceRead:
    _no_option(options, "--block-size", "BurstGPT has no block hashes")
    (path,) = paths
    source = str(path)
    session_field = options.session_field or DEFAULT_SESSION_FIELD["burstgpt"]
    read = TraceRead(iter(()), (source,), None, "Timestamp (s)", [BURSTGPT_ASSUMPTION])

    # The first public release (BurstGPT_1.csv) has no session column: without --session-field
    # each request is then a one-turn session of its own, and says so.
    given = options.session_field is not None

    def turns() -> Iterator[Turn]:
        previous: dict[str, int] = {}
        rows = iter_csv_rows(
            path,
            what="BurstGPT trace",
            max_bytes=MAX_TRACE_BYTES,
            max_rows=MAX_TRACE_ROWS,
            required=(
                "Timestamp",
                *((session_field,) if given else ()),
                "Model",
                "Request tokens",
                "Response tokens",
            ),
        )
        noted = False
        for line, row in rows:
            if session_field in row:
                session = session_id(
                    row[session_field], source=source, line=line, field=session_field
                )
            else:
                if not noted:
                    read.notes.append(
                        f"no '{session_field}' column: each request is a one-turn session of its "
                        "own, so nothing is cached (no turn chaining is invented)"
                    )
                    noted = True
                session = f"request-{line}"
            model = row["Model"].strip()
            if model not in BURSTGPT_MODELS:
                raise PlanInputError(
                    f"unknown model {model!r}; expected one of {', '.join(BURSTGPT_MODELS)}",
                    source=source,
                    line=line,
                    field="Model",
                )
            inp = _tokens(
                row["Request tokens"],
                source=source,
                line=line,
                field="Request tokens",
                low=1,
                text=True,
            )
            out = _tokens(
                row["Response tokens"],
                source=source,
                line=line,
                field="Response tokens",
                low=0,
                text=True,
            )
            if "Total tokens" in row:
                total = _tokens(
                    row["Total tokens"],
                    source=source,
                    line=line,
                    field="Total tokens",
                    low=0,
                    text=True,
                )
                if total != inp + out:
                    raise PlanInputError(
                        f"{total:,}, but request + response tokens are {inp + out:,}; expected "
                        "their sum",
                        source=source,
                        line=line,
                        field="Total tokens",
                    )
            ts = number(
                row["Timestamp"], source=source, line=line, field="Timestamp", low=0, text=True
            )
            shared = min(previous.get(session, 0), inp)
            previous[session] = inp + out
            yield Turn(
                session, inp, out, cached_tokens(shared, inp), ts, False, None, session, shared
            )

    read.turns = turns()
    return read


def _csv(paths: Sequence[Path], options: ImportOptions) -> TraceRead:
    _no_option(options, "--block-size", "the per-turn format has no block hashes")
    _no_option(options, "--session-field", "its sessions are its trajectory_id column")
    (path,) = paths
    source = str(path)
    read = TraceRead(iter(()), (source,), None, None)

    def turns() -> Iterator[Turn]:
        mix = load_trace(path)  # every row checked, with its line, before anything is yielded
        jsonl = path.suffix.lower() in (".jsonl", ".ndjson")
        rows: Iterator[tuple[int, dict[str, Any]]] = (
            iter_jsonl_objects(
                path, what="trace file", max_bytes=MAX_TRACE_BYTES, max_rows=MAX_TRACE_ROWS
            )
            if jsonl
            else iter_csv_rows(
                path,
                what="trace file",
                max_bytes=MAX_TRACE_BYTES,
                max_rows=MAX_TRACE_ROWS,
                required=TRACE_COLUMNS,
            )
        )
        for i, (line, row) in enumerate(rows):
            session = session_id(
                row["trajectory_id"], source=source, line=line, field="trajectory_id"
            )
            hit = float(mix.cached_tokens[i])
            a = float(mix.append_tokens[i])
            yield Turn(
                session,
                hit + a,
                float(mix.generated_tokens[i]),
                hit,
                None,
                False,
                None,
                session,
                hit,
            )
        if not mix.context_given:
            read.notes.append(
                "no context_tokens column: a turn's context is everything before it in its "
                "trajectory (the paper's replay)"
            )
        read.notes.append("no timestamps: the arrival rate is not derived")

    read.turns = turns()
    return read


_READERS: dict[str, Callable[[Sequence[Path], ImportOptions], TraceRead]] = {
    "mooncake": _mooncake,
    "kv-cache-tester": _kv_cache_tester,
    "bailian": _bailian,
    "burstgpt": _burstgpt,
    "csv": _csv,
}


def read_trace(paths: Sequence[Path], options: ImportOptions) -> TraceRead:
    """The turns of a trace in one of :data:`FORMATS` (several files only for
    kv-cache-tester, one session each), as a stream; errors name the file, line and field."""
    if options.format not in _READERS:
        raise PlanInputError(
            f"unknown format {options.format!r}; expected one of {', '.join(FORMATS)}",
            field="--format",
        )
    if not paths:
        raise PlanInputError("no trace file given", field="FILE")
    if len(paths) > 1 and options.format != "kv-cache-tester":
        raise PlanInputError(
            f"{len(paths)} files; --format {options.format} reads one (only kv-cache-tester "
            "takes one file per session)",
            field="FILE",
        )
    if options.block_size is not None and not 1 <= options.block_size <= 1 << 20:
        raise PlanInputError(
            f"expected a block size from 1 to {1 << 20:,} tokens, got {options.block_size}",
            field="--block-size",
        )
    if options.session_field is not None and not options.session_field.strip():
        # '' read as the format's default field, and the error then named a field not given.
        raise PlanInputError("expected a field name, got an empty one", field="--session-field")
    return _READERS[options.format](paths, options)


# --- statistics ----------------------------------------------------------------------------


@record
class GroupStats:
    """Sessions and turns of a group of sessions (all, main agents, sub-agents)."""

    requests: int
    sessions: int
    hit_rate: float  # cached tokens over prompt tokens, all requests together
    mean_context_tokens: float  # the cached prefix
    mean_append_tokens: float
    mean_generated_tokens: float
    mean_input_tokens: float


@record
class TraceSummary:
    """What an imported trace holds."""

    format: str
    sources: tuple[str, ...]
    block_size: int | None
    all: GroupStats
    subagents: GroupStats | None  # kv-cache-tester sessions with sub-agents: theirs alone
    main: GroupStats | None  # and the main agents' alone
    turns_p50: float
    turns_p90: float
    turns_max: int
    turns_mean: float
    longest_request_tokens: float  # input + output of the longest request
    arrival_rate_per_s: float | None  # requests per second over the timestamps' span
    arrival_cv: float | None  # coefficient of variation of the gaps between requests
    span_s: float | None
    clock: str | None

    @property
    def no_rate_because(self) -> str:
        """Why no arrival rate is derived: no common clock, or every request at one time (a
        clock, but no span to count requests over)."""
        if self.clock is None:
            return "the trace gives no common clock for its requests"
        return "every request has the same time: no span to derive a rate from"

    notes: tuple[str, ...]


def _check_gaps(read: TraceRead, gaps: np.ndarray) -> None:
    """The gap between requests, in the trace's clock unit, is one the plausibility table
    takes: timestamps in seconds or microseconds where milliseconds are meant gave a rate
    1,000 times off, silently. The gap checked is the smaller of the median (idle hours do not
    move it) and the mean (whole seconds typed for milliseconds put most requests at the same
    time as the one before: a median of 0, a mean below a millisecond); a trace whose
    requests all arrive at once has no gap to check."""
    if read.gap_quantity is None or gaps.size == 0:
        return
    median = float(np.median(gaps)) / read.clock_unit_s
    mean = float(gaps.mean()) / read.clock_unit_s
    gap = min(median, mean) if median > 0 else mean
    why = plausible.problem(read.gap_quantity, gap) if gap > 0 else None
    if why is not None:
        raise PlanInputError(
            f"the gap between requests (the smaller of their median and mean) is {why}",
            source=", ".join(read.sources),
            field="timestamp",
        )


class _Sums:
    __slots__ = ("generated", "hit", "input", "requests", "sessions")

    def __init__(self) -> None:
        self.requests = 0
        self.input = 0.0
        self.hit = 0.0
        self.generated = 0.0
        self.sessions: set[str] = set()

    def add(self, turn: Turn) -> None:
        self.requests += 1
        self.input += turn.input_tokens
        self.hit += turn.hit_tokens
        self.generated += turn.output_tokens

    def minus(self, other: _Sums) -> _Sums:
        out = _Sums()
        out.requests = self.requests - other.requests
        out.input = self.input - other.input
        out.hit = self.hit - other.hit
        out.generated = self.generated - other.generated
        return out

    def stats(self, sessions: int) -> GroupStats:
        n = max(self.requests, 1)
        return GroupStats(
            requests=self.requests,
            sessions=sessions,
            hit_rate=self.hit / self.input if self.input else 0.0,
            mean_context_tokens=self.hit / n,
            mean_append_tokens=(self.input - self.hit) / n,
            mean_generated_tokens=self.generated / n,
            mean_input_tokens=self.input / n,
        )


class TraceStats:
    """Statistics of a stream of turns, gathered as it passes (:meth:`add`), then
    :meth:`summary`."""

    def __init__(self, source: str = "trace") -> None:
        self.source = source
        self.per_session: dict[str, int] = {}
        self.sub_sessions: set[str] = set()
        self.all = _Sums()
        self.sub = _Sums()
        self.timestamps = array("d")
        self.longest = 0.0

    def add(self, turn: Turn) -> None:
        self.per_session[turn.session] = self.per_session.get(turn.session, 0) + 1
        self.all.add(turn)
        if turn.subagent:
            self.sub.add(turn)
            self.sub_sessions.add(turn.session)
        if turn.timestamp_s is not None:
            self.timestamps.append(turn.timestamp_s)
        self.longest = max(self.longest, turn.input_tokens + turn.output_tokens)
        rows_read(self.source, self.all.requests)

    def summary(self, read: TraceRead, format: str) -> TraceSummary:
        if not self.all.requests:
            raise PlanInputError("no requests in the trace", source=", ".join(read.sources))
        counts = np.fromiter(self.per_session.values(), dtype=np.int64, count=len(self.per_session))
        notes = list(read.notes)
        rate = cv = span = None
        if read.clock is not None and len(self.timestamps) >= 2:
            ts = np.sort(np.frombuffer(self.timestamps, dtype=np.float64))
            span = float(ts[-1] - ts[0])
            gaps = np.diff(ts)
            mean_gap = float(gaps.mean())
            if span > 0 and mean_gap > 0:
                rate = (ts.size - 1) / span
                cv = float(gaps.std()) / mean_gap
            _check_gaps(read, gaps)
        if read.clock is not None and rate is None:
            notes.append("fewer than two distinct timestamps: the arrival rate is not derived")
        subs = len(self.sub_sessions)
        return TraceSummary(
            format=format,
            sources=read.sources,
            block_size=read.block_size,
            all=self.all.stats(counts.size),
            subagents=self.sub.stats(subs) if subs else None,
            main=self.all.minus(self.sub).stats(counts.size - subs) if subs else None,
            turns_p50=float(np.percentile(counts, 50, method="inverted_cdf")),
            turns_p90=float(np.percentile(counts, 90, method="inverted_cdf")),
            turns_max=int(counts.max()),
            turns_mean=float(counts.mean()),
            longest_request_tokens=self.longest,
            arrival_rate_per_s=rate,
            arrival_cv=cv,
            span_s=span,
            clock=read.clock,
            notes=tuple(notes),
        )
