"""Reading input files and writing output files, the one way every command does it.

Reading: every file the tool reads (profiles, traces, measured points, baselines, cases) goes
through :func:`read_text` and the parsers built on it. A reader accepts regular files only (a
FIFO would hang, ``/dev/zero`` would grow memory until killed), at most a stated number of bytes
(read up to the limit and one byte more, whatever the file claims its size is), UTF-8 text,
structures nested no deeper than :data:`MAX_NESTING_DEPTH` (checked before the parser runs,
so no parser can recurse until Python gives up) and finite numbers only. Every failure is a
:class:`PlanInputError` naming the file, the line where known, and the field.

Writing: every file is written to a temporary file in the same directory and renamed over the
target only when complete (:func:`atomic_write`, :class:`AtomicWriter` for streams); several
files of one command are staged together and renamed together (:class:`AtomicGroup`), so a
failure, an exception or Ctrl-C leaves every previous file as it was. A write the system
refuses part-way through a stream (a full disk, a quota, a file size limit, an I/O error) is a
:class:`PlanInputError` naming the target and its flag, like a refused open. A ``kill -9`` can
leave a hidden ``.NAME.*.tmp`` file beside the target, never a half-written target.

This module depends on nothing of the tool but :mod:`dualpath_plan.errors`.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import itertools
import math
import os
import re
import secrets
import stat
import threading
import tomllib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # json loads where JSON is read (a plain size reads none: start-up time)
    import json

from dualpath_plan import plausible
from dualpath_plan.errors import PlanInputError, printable

# --- limits --------------------------------------------------------------------------------

# A profile is a few kilobytes (the largest shipped one is under 5 KB); 1 MiB is far beyond any
# real one and small enough to parse in milliseconds.
MAX_PROFILE_BYTES = 1 << 20
# The most digits a number may have in any input: Python converts no longer integer text
# (sys.get_int_max_str_digits), and no quantity here needs a thousandth of it.
MAX_NUMBER_DIGITS = 4300
# Integers of more bits than this are beyond any float (the largest double is about 1.8e308,
# under 2^1024): from 310 to 4,300 digits they parsed, then failed where a float was made of
# them (OverflowError, an internal error). Refused where they are read (huge_integer).
MAX_INTEGER_BITS = 1024


def huge_integer(value: object) -> str | None:
    """Why ``value`` is refused if it is an integer beyond any float, else None."""
    if type(value) is not int or value.bit_length() <= MAX_INTEGER_BITS:
        return None
    digits = len(str(abs(value)))  # at most MAX_NUMBER_DIGITS: the parser took it
    return f"expected a finite number, got an integer of {digits:,} digits (beyond any float)"


def too_many_digits(exc: ValueError) -> str | None:
    """The message for Python's refusal of an integer of more than MAX_NUMBER_DIGITS digits
    ("Exceeds the limit (4300 digits) for integer string conversion...; use
    sys.set_int_max_str_digits()": advice for a programmer), else None."""
    if "integer string conversion" not in str(exc):
        return None
    return f"a number of more than {MAX_NUMBER_DIGITS:,} digits"


def non_decimal(text: str, *, yaml: bool = False) -> str | None:
    """Why the number ``text`` is refused if it is not written in decimal digits, else None:
    hexadecimal, octal or binary (``0x190``), digit separators (``4_00``), digits of other
    scripts (Python's float() reads ``１２３``), and in YAML 1.1 (``yaml``) sexagesimal
    (``1:30`` is 90) and a leading zero (``0400`` is octal, 256). The README promises decimal
    numbers; each of these was read as a number other than the one a reader sees."""
    t = text.strip().lstrip("+-").lower()
    odd = (
        t.startswith(("0x", "0o", "0b"))
        or "_" in t
        or not t.isascii()
        or (yaml and (":" in t or (len(t) > 1 and t[0] == "0" and t[1].isdigit())))
    )
    if not odd:
        return None
    return f"expected a number written in decimal digits (such as 16, 1000 or 1e3), got {text!r}"


# A validation case is a dozen lines; the same bound as a profile.
MAX_CASE_BYTES = 1 << 20
# A baseline records about 1.5 KB per scenario; 16 MiB is ten thousand scenarios, more than a
# check could recompute in reasonable time.
MAX_BASELINE_BYTES = 16 << 20
# Measured points for calibrate: every point is evaluated by the model in every least-squares
# iteration, so the fit's time grows with the count. A thousand points is far more than a
# benchmark campaign produces and still fits in minutes.
MAX_MEASURED_BYTES = 1 << 20
MAX_MEASURED_ROWS = 1_000
# A trace: the paper's traces are 500 trajectories of up to ~160 turns (about 80,000 rows of
# 20 to 60 bytes). A million rows is ten times that and keeps the loaded arrays to tens of MB.
MAX_TRACE_BYTES = 128 << 20
MAX_TRACE_ROWS = 1_000_000
# An AIConfigurator result (best_config_topn_*.csv): a few hundred bytes per row; ``aic check``
# assembles each distinct row's cluster (milliseconds each), so ten thousand rows, far more
# than the top-N files AIConfigurator writes, take seconds.
MAX_AIC_CSV_BYTES = 16 << 20
MAX_AIC_ROWS = 10_000
# A trace to import (``workload import``) is read as a stream, a line at a time, so its size
# bounds the time, not the memory: a million Mooncake requests with their hash lists are about
# 300 MB, a million Bailian requests (16-token blocks, thousands of hash ids each) some GB. Its
# rows are MAX_TRACE_ROWS at most (the normalized trace it writes must load). One line (one
# request) is at most 16 MiB: a 10^6-token prompt in 16-token blocks is about 0.5 MB of ids.
MAX_IMPORT_BYTES = 8 << 30
MAX_IMPORT_LINE_BYTES = 16 << 20
# A kv-cache-tester session is one JSON document (the fixtures: 40 to 200 KB); read whole.
MAX_SESSION_FILE_BYTES = 64 << 20
# Nesting of tables, arrays and dotted keys in TOML and JSON input: the deepest real file (a
# baseline: root, scenarios, scenario, metrics, metric) has 5 levels. 32 leaves room and keeps
# every recursive consumer (the TOML and JSON parsers, pydantic, json.dumps) far from Python's
# recursion limit.
MAX_NESTING_DEPTH = 32

# --- progress of long reads ----------------------------------------------------------------

# Rows between two reports of a long read (a million-row trace takes a few seconds).
PROGRESS_ROWS = 100_000
_on_rows: list[Callable[[str, int, bool], None]] = []


def report_read_progress(on_rows: Callable[[str, int, bool], None] | None) -> None:
    """Where long reads report their progress, ``on_rows(file, rows so far, done)`` every
    PROGRESS_ROWS rows and once at the end of a read that was reported (the CLI shows it on
    stderr); None: nowhere (the default)."""
    _on_rows[:] = [on_rows] if on_rows is not None else []


def rows_read(source: str, rows: int, done: bool = False) -> None:
    """A reader's count of rows so far (``done``: all of them); reported every PROGRESS_ROWS
    rows, and at the end when it was reported before."""
    if _on_rows and (rows % PROGRESS_ROWS == 0 if not done else rows >= PROGRESS_ROWS):
        _on_rows[0](source, rows, done)


__all__ = [
    "MAX_AIC_CSV_BYTES",
    "MAX_AIC_ROWS",
    "MAX_BASELINE_BYTES",
    "MAX_CASE_BYTES",
    "MAX_IMPORT_BYTES",
    "MAX_IMPORT_LINE_BYTES",
    "MAX_MEASURED_BYTES",
    "MAX_MEASURED_ROWS",
    "MAX_NESTING_DEPTH",
    "MAX_PROFILE_BYTES",
    "MAX_SESSION_FILE_BYTES",
    "MAX_TRACE_BYTES",
    "MAX_TRACE_ROWS",
    "AtomicGroup",
    "AtomicWriter",
    "atomic_write",
    "check_toml_nesting",
    "check_values",
    "has_toml_comment",
    "huge_integer",
    "iter_csv_rows",
    "iter_jsonl_objects",
    "iter_jsonl_stream",
    "load_json",
    "load_toml",
    "load_yaml",
    "non_decimal",
    "number",
    "parse_json",
    "parse_toml",
    "printable",
    "read_csv_rows",
    "read_text",
    "xml_text",
]


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} bytes"


# --- reading -------------------------------------------------------------------------------


def _open_regular(path: Path | str, *, what: str, max_bytes: int) -> IO[bytes]:
    """A regular file of at most ``max_bytes`` (as it says), opened for binary reading; else a
    PlanInputError. The caller still counts what it reads against the limit."""
    source = str(path)

    def fail(message: str) -> PlanInputError:
        return PlanInputError(message, source=source)

    def check_mode(mode: int) -> None:
        if stat.S_ISDIR(mode):
            raise fail(f"is a directory; expected a {what}")
        if not stat.S_ISREG(mode):
            kind = (
                "a FIFO"
                if stat.S_ISFIFO(mode)
                else "a device"
                if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "a socket"
                if stat.S_ISSOCK(mode)
                else "not a regular file"
            )
            raise fail(f"is {kind}, not a regular file; expected a {what}")

    try:
        st = os.stat(path)
        check_mode(st.st_mode)
        if st.st_size > max_bytes:
            raise _too_big(source, what, max_bytes, _size(st.st_size))
        # O_NONBLOCK: should the file be swapped for a FIFO after the stat, opening it does not
        # wait for a writer; the fstat below then refuses it.
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise fail(f"no such {what}") from None
    except (NotADirectoryError, IsADirectoryError):
        raise fail(f"no such {what} (a part of the path is not a directory)") from None
    except ValueError:  # an embedded NUL byte in the path
        raise fail(f"not a valid path for a {what}") from None
    except OSError as exc:
        raise fail(f"cannot read: {exc.strerror or exc}") from None
    try:
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    try:
        check_mode(os.fstat(handle.fileno()).st_mode)
    except BaseException:
        handle.close()
        raise
    return handle


def _too_big(source: str, what: str, max_bytes: int, size: str | None) -> PlanInputError:
    has = f"{size}, " if size else ""
    return PlanInputError(
        f"{has}more than the {_size(max_bytes)} allowed for a {what}", source=source
    )


def read_bytes(path: Path | str, *, what: str, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; else a PlanInputError."""
    source = str(path)
    handle = _open_regular(path, what=what, max_bytes=max_bytes)
    try:
        with handle:
            # At most the limit and one byte more, whatever the file said its size was.
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise PlanInputError(f"cannot read: {exc.strerror or exc}", source=source) from None
    if len(data) > max_bytes:
        raise _too_big(source, what, max_bytes, None)
    return data


def iter_text_lines(
    path: Path | str, *, what: str, max_bytes: int, max_line_bytes: int
) -> Iterator[tuple[int, str]]:
    """(line number, line without its end) of a regular UTF-8 file, read as a stream: at most
    ``max_bytes`` in all and ``max_line_bytes`` per line (memory stays bounded whatever the
    file holds); blank lines skipped; a leading byte-order mark dropped."""
    source = str(path)
    handle = _open_regular(path, what=what, max_bytes=max_bytes)
    total = 0
    with handle:
        for n in itertools.count(1):
            try:
                raw = handle.readline(max_line_bytes + 1)
            except OSError as exc:
                raise PlanInputError(
                    f"cannot read: {exc.strerror or exc}", source=source, line=n
                ) from None
            if not raw:
                return
            total += len(raw)
            if total > max_bytes:
                raise _too_big(source, what, max_bytes, None)
            if len(raw) > max_line_bytes:
                raise PlanInputError(
                    f"a line of more than {_size(max_line_bytes)}; a {what} may have at most "
                    f"{_size(max_line_bytes)} per line",
                    source=source,
                    line=n,
                )
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise PlanInputError(
                    f"byte 0x{raw[exc.start]:02x} is not UTF-8; expected a {what} in UTF-8 text",
                    source=source,
                    line=n,
                ) from None
            if n == 1:
                line = line.removeprefix("\ufeff")
            line = line.rstrip("\r\n")
            if line.strip():
                yield n, line


def read_text(path: Path | str, *, what: str, max_bytes: int) -> str:
    """The text of a regular UTF-8 file of at most ``max_bytes`` (a leading byte-order mark is
    dropped); every failure a PlanInputError naming the file (and the line of a bad byte)."""
    data = read_bytes(path, what=what, max_bytes=max_bytes)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise PlanInputError(
            f"byte 0x{data[exc.start]:02x} is not UTF-8; expected a {what} in UTF-8 text",
            source=str(path),
            line=line,
        ) from None
    return text.removeprefix("\ufeff")


def _path_text(path: Sequence[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


# Lone surrogates: a JSON "\ud800" escape decodes to one, which no UTF-8 output can hold.
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_values(
    data: Any, *, source: str, line: int | None = None, max_depth: int = MAX_NESTING_DEPTH
) -> None:
    """Every number finite, every string Unicode text (no lone surrogate) and nothing nested
    deeper than ``max_depth`` in parsed data (walked without recursion); a PlanInputError
    naming the field otherwise."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > max_depth:
            raise PlanInputError(
                f"nested deeper than {max_depth} levels",
                source=source,
                line=line,
                field=_path_text(path),
            )
        if isinstance(value, str) and _SURROGATE.search(value):
            raise PlanInputError(
                "not Unicode text (a lone surrogate escape such as \\ud800)",
                source=source,
                line=line,
                field=_path_text(path),
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise PlanInputError(
                f"expected a finite number, got {value}",
                source=source,
                line=line,
                field=_path_text(path),
            )
        huge = huge_integer(value)
        if huge is not None:
            raise PlanInputError(huge, source=source, line=line, field=_path_text(path))
        if isinstance(value, dict):
            for k in value:
                if isinstance(k, str) and _SURROGATE.search(k):
                    raise PlanInputError(
                        "a key that is not Unicode text (a lone surrogate escape such as \\ud800)",
                        source=source,
                        line=line,
                        field=_path_text(path),
                    )
            stack.extend((v, (*path, str(k))) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, (*path, i)) for i, v in enumerate(value))


# Strings and comments of TOML (their brackets and dots are text, not structure): triple-quoted
# first, then one-line basic and literal strings, then comments.
_TOML_STRINGS = re.compile(
    r'"""(?:[^\\]|\\[\s\S])*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*'
)
_BRACKETS = re.compile(r"[\[\]{}]")
_DOTTED_KEY = re.compile(
    r"(?<![\w-])[\w-]+(?:[ \t]*\.[ \t]*[\w-]+){%d,}" % MAX_NESTING_DEPTH  # noqa: UP031
)


def _bracket_depth_ok(text: str, *, source: str, line_of: Any = None) -> None:
    """Raise if brackets nest deeper than MAX_NESTING_DEPTH (before any parser recurses)."""
    if text.count("[") + text.count("{") <= MAX_NESTING_DEPTH:
        return
    depth = 0
    for match in _BRACKETS.finditer(text):
        if match.group() in "[{":
            depth += 1
            if depth > MAX_NESTING_DEPTH:
                raise PlanInputError(
                    f"arrays or tables nested deeper than {MAX_NESTING_DEPTH} levels",
                    source=source,
                    line=line_of(match.start()) if line_of else None,
                )
        else:
            depth = max(depth - 1, 0)


def load_toml(path: Path | str, *, what: str, max_bytes: int) -> dict[str, Any]:
    """A TOML file as a dict: read by :func:`read_text`, nesting checked before parsing (also
    dotted keys, which the parser expands at a cost growing with the square of their length),
    then every number finite."""
    source = str(path)
    text = read_text(path, what=what, max_bytes=max_bytes)
    return parse_toml(text, source=source)


def check_toml_nesting(text: str, *, source: str) -> None:
    """Raise if TOML text nests arrays, inline tables or dotted keys deeper than
    MAX_NESTING_DEPTH: the parser recurses into the first and expands the last at a cost
    growing with the square of the key's length, so this runs before it."""
    stripped = _TOML_STRINGS.sub(lambda m: "" if m.group().startswith("#") else "s", text)
    _bracket_depth_ok(stripped, source=source)
    if stripped.count(".") > MAX_NESTING_DEPTH and _DOTTED_KEY.search(stripped):
        raise PlanInputError(f"a dotted key of more than {MAX_NESTING_DEPTH} parts", source=source)


def has_toml_comment(text: str) -> bool:
    """Whether TOML text holds a comment (a ``#`` outside its strings)."""
    return any(m.group().startswith("#") for m in _TOML_STRINGS.finditer(text))


def parse_toml(text: str, *, source: str) -> dict[str, Any]:
    """TOML text as a dict: nesting checked before parsing, then every number finite."""
    check_toml_nesting(text, source=source)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlanInputError(f"malformed TOML: {exc}", source=source) from None
    except RecursionError:  # not reached after the check above; never a traceback regardless
        raise PlanInputError("malformed TOML: nested too deeply", source=source) from None
    except ValueError:  # an integer beyond Python's conversion limit (4,300 digits)
        raise PlanInputError(
            f"a number of more than {MAX_NUMBER_DIGITS:,} digits", source=source
        ) from None
    check_values(data, source=source)
    _check_toml_decimal(text, source=source)
    return data


# A number of TOML text (strings and comments blanked first): a whole token, not part of a
# bare key, a dotted key or a date.
_TOML_NUMBER = re.compile(
    r"(?<![\w.+-])[+-]?(?:0[xob][0-9a-zA-Z_]*|[0-9][0-9_]*(?:\.[0-9_]+)?(?:[eE][+-]?[0-9_]+)?)"
    r"(?![\w.:-])(?!\s*=)"
)
# What a number not in decimal digits holds somewhere in the text (the TOML parser has read it:
# a separator stands between two digits, 1_000): without one, none is there. (An underscore
# alone was in nearly every profile's keys, snic_gbit_s.)
_MAYBE_NON_DECIMAL = re.compile(r"[0-9]_[0-9]|0[xob]")
_TOML_KEY = re.compile(r"^\s*([A-Za-z0-9_.\"' -]+?)\s*=")
_TOML_TABLE = re.compile(r"^\s*\[+\s*([^\]=]+?)\s*\]+\s*$")


def _check_toml_decimal(text: str, *, source: str) -> None:
    """Every number of TOML text in decimal digits (:func:`non_decimal`): TOML reads ``0x190``
    and ``4_00`` as 400, where the README promises decimal numbers. The error names the line
    and the key (with its table) the number is given to."""
    if not _MAYBE_NON_DECIMAL.search(text):
        return  # (the common case, at once)
    blank = _TOML_STRINGS.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)
    lines = blank.split("\n")
    for match in _TOML_NUMBER.finditer(blank):
        odd = non_decimal(match.group())
        if odd is None:
            continue
        row = blank.count("\n", 0, match.start())
        if _TOML_TABLE.match(lines[row]) and "=" not in lines[row]:
            continue  # a table's name ([a.1_2]), not a number
        key = _TOML_KEY.match(lines[row])
        table = next(
            (t.group(1) for ln in reversed(lines[:row]) if (t := _TOML_TABLE.match(ln))), None
        )
        name = key.group(1).strip() if key else None
        field = f"{table}.{name}" if table and name else name
        raise PlanInputError(odd, source=source, line=row + 1, field=field)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"expected a finite number, got {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {text}")
    return value


class _KeyGivenTwice(ValueError):
    """A JSON object names a key twice: ``json`` would keep the last value silently, so the
    file would say one thing to a reader and another to the tool."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's members as a dict, refusing a key given twice (``object_pairs_hook``)."""
    members = dict(pairs)
    if len(members) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _KeyGivenTwice(key)
            seen.add(key)
    return members


def _key_given_twice(
    exc: _KeyGivenTwice, text: str, source: str, line: int | None
) -> PlanInputError:
    """The error for a key given twice: at the line of its second mention where the key's
    quoted text occurs exactly twice (else the line of the stream, if any: another object
    may name the key too)."""
    import json

    quoted = json.dumps(exc.key)
    if text.count(quoted) == 2:
        second = text.find(quoted, text.find(quoted) + len(quoted))
        line = (line or 1) + text.count("\n", 0, second)
    return PlanInputError("a key given twice", source=source, line=line, field=exc.key)


@functools.cache
def _stream_decoder() -> json.JSONDecoder:
    """One decoder for every line of a stream (json.loads with hooks builds one per call)."""
    import json

    return json.JSONDecoder(
        parse_constant=_refuse_constant, parse_float=_finite_float, object_pairs_hook=_unique_keys
    )


def parse_json(text: str, *, source: str, line: int | None = None, walk: bool = True) -> Any:
    """JSON text (a file, or the one line ``line`` of JSON Lines) with nesting checked before
    parsing and every number finite (``NaN``, ``Infinity`` and ``1e999`` are refused, naming the
    field).

    ``walk=False`` (a stream of many lines, ``workload import``): numbers are checked while
    parsing instead of by walking the result, so a refused number names the line, not its
    field, and strings are not checked for lone surrogates (the caller checks those it uses)."""
    import json

    if not walk:
        if text.count("[") + text.count("{") > MAX_NESTING_DEPTH:
            _bracket_depth_ok(_strip_json_strings(text), source=source, line_of=lambda _: line)
        try:
            return _stream_decoder().decode(text)
        except _KeyGivenTwice as exc:
            raise _key_given_twice(exc, text, source, line) from None
        except json.JSONDecodeError as exc:
            raise PlanInputError(
                f"not JSON: {exc.msg} (column {exc.colno})", source=source, line=line
            ) from None
        except (ValueError, RecursionError) as exc:
            why = too_many_digits(exc) if isinstance(exc, ValueError) else None
            raise PlanInputError(why or f"not JSON: {exc}", source=source, line=line) from None
    stripped = _strip_json_strings(text)

    def line_of(offset: int) -> int:
        # Offsets in the stripped text shift within a line, never across one: a JSON string
        # holds no raw newline.
        return (line or 1) + stripped.count("\n", 0, offset)

    _bracket_depth_ok(stripped, source=source, line_of=line_of)
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except _KeyGivenTwice as exc:
        raise _key_given_twice(exc, text, source, line) from None
    except json.JSONDecodeError as exc:
        raise PlanInputError(
            f"not JSON: {exc.msg} (column {exc.colno})",
            source=source,
            line=line if line is not None else exc.lineno,
        ) from None
    except ValueError as exc:  # an integer of more digits than Python converts
        why = too_many_digits(exc)
        raise PlanInputError(why or f"not JSON: {exc}", source=source, line=line) from None
    except RecursionError:  # not reached after the check above; never a traceback regardless
        raise PlanInputError("not JSON: nested too deeply", source=source, line=line) from None
    check_values(data, source=source, line=line)
    return data


def _strip_json_strings(text: str) -> str:
    """JSON text with every string emptied (their brackets are not structure)."""
    return re.sub(r'"(?:[^"\\\n]|\\.)*"', '""', text) if '"' in text else text


def load_json(path: Path | str, *, what: str, max_bytes: int) -> Any:
    """A JSON file: read by :func:`read_text`, then :func:`parse_json`."""
    return parse_json(read_text(path, what=what, max_bytes=max_bytes), source=str(path))


def load_yaml(path: Path | str, *, what: str, max_bytes: int) -> tuple[Any, dict[str, int]]:
    """A YAML file (safe types only: mappings, lists, strings, numbers, booleans, null) and the
    line of every mapping key, by its dotted path (``gpu.mem_bw``). Read by :func:`read_text`;
    aliases (``*name``, which can expand a small file into an enormous structure) and
    duplicate keys are refused, nesting is checked while the parser composes the document
    (before any recursion could exhaust the stack), and every number must be finite. Every
    failure is a PlanInputError naming the file and the line."""
    import yaml  # only the commands that read YAML pay for its import

    source = str(path)
    text = read_text(path, what=what, max_bytes=max_bytes)

    class Loader(yaml.SafeLoader):
        depth = 0
        # (line, text) of every number not in decimal digits, named once the keys' lines are
        # known: YAML 1.1 reads 0x190, 4_00, 0620 (octal) and 6:40 (sexagesimal) as 400.
        odd_numbers: list[tuple[int, str]] = []  # noqa: RUF012  # set per loader below

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            line = event.start_mark.line + 1 if event.start_mark is not None else None
            if isinstance(event, yaml.AliasEvent):
                raise PlanInputError(
                    "a YAML alias (*name); expected plain values", source=source, line=line
                )
            self.depth += 1
            if self.depth > MAX_NESTING_DEPTH:
                raise PlanInputError(
                    f"nested deeper than {MAX_NESTING_DEPTH} levels", source=source, line=line
                )
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    def decimal_only(kind: str) -> Any:
        base = yaml.SafeLoader.yaml_constructors[f"tag:yaml.org,2002:{kind}"]

        def construct(self: Any, node: Any) -> Any:
            if non_decimal(str(node.value), yaml=True) is not None:
                self.odd_numbers.append((node.start_mark.line + 1, str(node.value)))
            return base(self, node)

        return construct

    Loader.add_constructor("tag:yaml.org,2002:int", decimal_only("int"))
    Loader.add_constructor("tag:yaml.org,2002:float", decimal_only("float"))

    loader: Any = None
    try:
        # The reader checks every character when it is made: a NUL or a control byte is a
        # ReaderError from here, a YAMLError as any other.
        loader = Loader(text)
        loader.odd_numbers = []
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PlanInputError(
            f"not YAML: {problem}",
            source=source,
            line=mark.line + 1 if mark is not None else None,
        ) from None
    except ValueError:  # an integer beyond Python's conversion limit (4,300 digits)
        raise PlanInputError(
            f"a number of more than {MAX_NUMBER_DIGITS:,} digits", source=source
        ) from None
    finally:
        if loader is not None:
            loader.dispose()
    lines: dict[str, int] = {}
    stack: list[tuple[Any, str]] = [(node, "")] if node is not None else []
    while stack:
        current, prefix = stack.pop()
        if isinstance(current, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in current.value:
                name = f"{prefix}{key.value}"
                if name in seen:
                    raise PlanInputError(
                        "a key given twice",
                        source=source,
                        line=key.start_mark.line + 1,
                        field=name,
                    )
                seen.add(name)
                lines[name] = key.start_mark.line + 1
                stack.append((value, f"{name}."))
        elif isinstance(current, yaml.SequenceNode):
            stack.extend((v, f"{prefix}{i}.") for i, v in enumerate(current.value))
    check_values(data, source=source)
    if loader.odd_numbers:
        line, value = min(loader.odd_numbers)
        key = next((name for name, at in lines.items() if at == line), None)
        raise PlanInputError(
            non_decimal(value, yaml=True) or value, source=source, line=line, field=key
        )
    return data, lines


# What str.splitlines splits on, so that a line's number is the one it always was.
_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _lines(text: str, comments: bool) -> Iterator[tuple[int, str]]:
    """The numbered lines of ``text`` as str.splitlines numbers them, one at a time: a list of
    them all held a 10^7-row file's lines at once (1 GB) before its row limit refused it."""
    start = 0
    n = 0
    for n, brk in enumerate(_LINE_BREAK.finditer(text), 1):
        line = text[start : brk.start()]
        start = brk.end()
        if line.strip() and not (comments and line.lstrip().startswith("#")):
            yield n, line
    line = text[start:]
    if line.strip() and not (comments and line.lstrip().startswith("#")):
        yield n + 1, line


def iter_csv_rows(
    path: Path | str,
    *,
    what: str,
    max_bytes: int,
    max_rows: int,
    required: Sequence[str] = (),
    comments: bool = False,
    text: str | None = None,
) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) of a CSV file with a header row: blank lines (and, with ``comments``,
    lines starting with ``#``) skipped; every row exactly as many fields as the header; at most
    ``max_rows`` rows; the ``required`` columns present. Raises PlanInputError naming the line
    and the column. The header is checked before the first row is yielded."""
    source = str(path)
    if text is None:
        text = read_text(path, what=what, max_bytes=max_bytes)
    current = [0]
    start = [0]  # the line the record being read starts on
    done = [0]  # the lines given to the reader by the end of its last record

    def numbered() -> Iterator[str]:
        for k, (n, line) in enumerate(_lines(text, comments)):
            current[0] = n
            if k == done[0]:  # the first line after a whole record: a record starts
                start[0] = n
            yield line

    def fail(message: str, field: str | None = None) -> PlanInputError:
        return PlanInputError(message, source=source, line=current[0], field=field)

    reader = csv.reader(numbered(), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise PlanInputError(f"empty; expected a {what} with a header row", source=source)
        header = [h.strip() for h in header]
        seen: set[str] = set()
        for name in header:
            if name in seen:
                raise fail("a column named twice in the header", field=name)
            seen.add(name)
        for name in required:
            if name not in seen:
                raise fail(f"missing column; expected {', '.join(required)}", field=name)
        done[0] = reader.line_num
        for count, fields in enumerate(reader, 1):
            if reader.line_num - done[0] > 1:
                # A quoted value over a line break: the reader joined its lines without the
                # break ('"a<newline>b"' became the id 'ab', silently).
                raise fail(
                    f"a quoted value runs over a line break from line {start[0]}; expected one "
                    "line per row"
                )
            done[0] = reader.line_num
            if count > max_rows:
                raise fail(f"more than {max_rows:,} rows; a {what} may have at most {max_rows:,}")
            if len(fields) != len(header):
                raise fail(
                    f"{len(fields)} fields, expected {len(header)} "
                    f"(the header's {', '.join(header)})"
                )
            yield current[0], dict(zip(header, fields, strict=True))
    except csv.Error as exc:
        raise fail(f"malformed CSV: {exc}") from None


def read_csv_rows(
    path: Path | str,
    *,
    what: str,
    max_bytes: int,
    max_rows: int,
    required: Sequence[str] = (),
    comments: bool = False,
) -> list[tuple[int, dict[str, str]]]:
    """:func:`iter_csv_rows` as a list."""
    return list(
        iter_csv_rows(
            path,
            what=what,
            max_bytes=max_bytes,
            max_rows=max_rows,
            required=required,
            comments=comments,
        )
    )


def iter_jsonl_objects(
    path: Path | str,
    *,
    what: str,
    max_bytes: int,
    max_rows: int,
    required: Sequence[str] = (),
    text: str | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of a JSON Lines file: blank lines skipped, every other line a JSON
    object with the ``required`` keys, at most ``max_rows`` of them."""
    if text is None:
        text = read_text(path, what=what, max_bytes=max_bytes)
    lines = _lines(text, comments=False)
    yield from _jsonl_objects(lines, str(path), what, max_rows, required, walk=True)


def iter_jsonl_stream(
    path: Path | str,
    *,
    what: str,
    max_bytes: int,
    max_rows: int,
    max_line_bytes: int,
    required: Sequence[str] = (),
) -> Iterator[tuple[int, dict[str, Any]]]:
    """:func:`iter_jsonl_objects` read as a stream (:func:`iter_text_lines`), each line parsed
    with ``walk=False``: for files too large to hold (a trace to import)."""
    lines = iter_text_lines(path, what=what, max_bytes=max_bytes, max_line_bytes=max_line_bytes)
    yield from _jsonl_objects(lines, str(path), what, max_rows, required, walk=False)


def _jsonl_objects(
    lines: Iterable[tuple[int, str]],
    source: str,
    what: str,
    max_rows: int,
    required: Sequence[str],
    *,
    walk: bool,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The checks of both readers: each line a JSON object with the ``required`` keys, at most
    ``max_rows`` of them."""
    for count, (n, line) in enumerate(lines, 1):
        if count > max_rows:
            raise PlanInputError(
                f"more than {max_rows:,} rows; a {what} may have at most {max_rows:,}",
                source=source,
                line=n,
            )
        obj = parse_json(line, source=source, line=n, walk=walk)
        if not isinstance(obj, dict):
            raise PlanInputError(
                f"expected a JSON object, got {type(obj).__name__}", source=source, line=n
            )
        for name in required:
            if name not in obj:
                raise PlanInputError(
                    f"missing; expected {', '.join(required)}", source=source, line=n, field=name
                )
        yield n, obj


def number(
    value: object,
    *,
    source: str,
    field: str,
    line: int | None = None,
    integer: bool = False,
    text: bool = False,
    low: float = -math.inf,
    high: float = math.inf,
    what: str | None = None,
    quantity: str | None = None,
) -> float:
    """A finite number: with ``text``, from a CSV cell; else a parsed JSON or TOML value, which
    must be an int or a float (never a bool, nor a number in a string). With ``integer``, a
    whole number; from ``low`` to ``high`` (``what`` names it in the message); with
    ``quantity``, a plausible one (:mod:`dualpath_plan.plausible`: a unit slip is named)."""
    expected = "a whole number" if integer else "a number"

    def fail(message: str) -> PlanInputError:
        return PlanInputError(message, source=source, line=line, field=field)

    if text and isinstance(value, str):
        try:
            result = float(value)
        except ValueError:
            raise fail(f"expected {expected}, got {value!r}") from None
        odd = non_decimal(value)
        if odd is not None:  # float() reads '1_000' as 1000 and '１２３' as 123
            raise fail(odd)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        try:
            result = float(value)
        except OverflowError:
            result = math.inf
    else:
        raise fail(
            f"expected {expected}, got {type(value).__name__} {value!r}{_hint(value, source)}"
        )
    if not math.isfinite(result):
        raise fail(f"expected a finite number, got {value!r}")
    if integer and not result.is_integer():
        raise fail(f"expected a whole number, got {value!r}")
    inside = low <= result <= high
    # Outside the bounds, the slip only where one explains the value (-1 keeps the bounds'
    # words); inside them, anything outside what the quantity plausibly is.
    check = plausible.problem if inside else plausible.explained
    slip = check(quantity, result) if quantity is not None else None
    if slip is not None:
        raise fail(slip)
    if not inside:
        # A whole number's least is the first whole number from low ('from 1e-09' said none).
        least = max(math.ceil(low), 0) if integer and 0 < low < 1 else low
        raise fail(
            f"expected {what or expected} from {_bound(least)} to {_bound(high)}, got {value!r}"
        )
    return result


def _hint(value: object, source: str) -> str:
    """Why a number reads as text, where it does: YAML 1.1 (PyYAML, as AIConfigurator reads its
    files too) takes an exponent without a point or a sign (``7.7e12``) for a string; quotes
    make any number one."""
    if not isinstance(value, str):
        return ""
    try:
        float(value)
    except ValueError:
        return ""
    if source.lower().endswith((".yaml", ".yml")) and re.fullmatch(
        r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+", value.strip()
    ):
        # YAML 1.1 takes an exponent only after a mantissa with a point and with a signed
        # exponent (1.0e-320, 7.7e+12): 1e-320 and 7.7e12 are text.
        mantissa, exponent = re.split("[eE]", value.strip())
        if "." not in mantissa:
            mantissa += ".0"
        if exponent[0] not in "+-":
            exponent = "+" + exponent
        return (
            " (YAML 1.1 reads an exponent as a number only with a point in the mantissa and a "
            f"sign: write {mantissa}e{exponent})"
        )
    return " (a number in quotes is text: write it without them)"


def _bound(v: float) -> str:
    return f"{int(v):,}" if float(v).is_integer() and abs(v) < 1e9 else f"{v:g}"


# --- output text ---------------------------------------------------------------------------


@functools.cache
def _xml_illegal() -> re.Pattern[str]:
    # Compiled when first used: its wide character ranges take milliseconds to compile, paid
    # at start-up by every command otherwise (only SVG and Markdown output needs it).
    return re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: object) -> str:
    """``text`` with every character XML 1.0 does not allow (control characters, lone
    surrogates, U+FFFE/U+FFFF) escaped as ``\\xNN``/``\\uNNNN``, so the document stays
    well-formed; ElementTree escapes ``<``, ``&`` and quotes itself."""
    return _xml_illegal().sub(lambda m: printable(m.group()), str(text))


# --- writing -------------------------------------------------------------------------------


def _write_error(path: Path, exc: OSError | str, field: str | None) -> PlanInputError:
    reason = exc if isinstance(exc, str) else (exc.strerror or str(exc))
    return PlanInputError(f"cannot write: {reason}", source=str(path), field=field)


def refuse_inputs(outputs: Sequence[tuple[Path, str]], inputs: Sequence[Path]) -> None:
    """No output (a path and its flag) is one of the run's ``inputs`` (the same file, by any
    name): one line naming it, before anything is written. A name the system refuses (too long,
    a loop of links) is refused here, as writing it would be."""
    for out, flag in outputs:
        try:
            os.stat(out)
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError as exc:
            raise _write_error(out, exc, flag) from None
        except ValueError as exc:  # a NUL in the name
            raise _write_error(out, str(exc), flag) from None
    for out, flag in outputs:
        if out.exists() and any(p.exists() and out.samefile(p) for p in inputs):
            raise PlanInputError(
                "is an input of this run (a profile, a trace or a file it reads); write elsewhere",
                source=str(out),
                field=flag,
            )


def _create_temp(target: Path, field: str | None) -> tuple[Path, int]:
    """A new hidden file beside ``target``, created exclusively with the mode a plain open
    would give it (0666 less the umask), or the mode of the file it will replace."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except (OSError, ValueError) as exc:
        raise _write_error(target, exc if isinstance(exc, OSError) else str(exc), field) from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        what = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise _write_error(target, f"is {what}; expected a file to (over)write", field)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        temp = target.with_name(_temp_name(target, secrets.token_hex(4)))
        try:
            fd = os.open(temp, flags, 0o666)
        except FileExistsError:
            continue
        except (OSError, ValueError) as exc:
            raise _write_error(
                target, exc if isinstance(exc, OSError) else str(exc), field
            ) from None
        if st is not None:
            with contextlib.suppress(OSError):
                os.chmod(fd, stat.S_IMODE(st.st_mode))
        return temp, fd
    raise _write_error(target, "no free temporary file name", field)


# The longest file name most file systems take, in bytes (NAME_MAX), where the system does not
# say its own.
_NAME_MAX = 255


def _temp_name(target: Path, token: str) -> str:
    """``.NAME.TOKEN.tmp`` beside ``target``, NAME shortened (whole characters) where the whole
    would exceed the directory's longest name: a legal output name of 242 to 255 bytes was
    refused as "File name too long" for its temporary name's 15 more."""
    try:
        limit = os.pathconf(target.parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = _NAME_MAX
    suffix = f".{token}.tmp"
    room = max(limit - len(suffix.encode()) - 1, 1)
    name = target.name.encode(errors="surrogateescape")[:room]
    return "." + name.decode(errors="ignore") + suffix


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


class _AllOrNothing:
    """Leaving a ``with`` block normally commits (or, inside :func:`deferred_commits`, stages
    the commit for the end of the run); leaving it by any exception aborts."""

    def commit(self) -> None:
        """Put the output in place, or (inside :func:`deferred_commits`) when the run ends."""
        if _DEFERRED:
            _DEFERRED[-1].append(self)
        else:
            self._commit_now()

    def _commit_now(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.commit()


# The outputs whose commit waits for the end of the run (deferred_commits), innermost last.
_DEFERRED: list[list[_AllOrNothing]] = []


@contextlib.contextmanager
def deferred_commits() -> Iterator[Callable[[], None]]:
    """Within it, every output that is complete waits, as a temporary file, for the run to end
    well: the function it yields renames them all into place (the CLI calls it once the report
    is on standard output); leaving the block without calling it (an error after the files
    were written, standard output refusing the report, a signal) removes them, so that a run
    that fails leaves every previous file as it was (a sweep whose report hit a full disk had
    replaced its --out file and exited 2)."""
    pending: list[_AllOrNothing] = []
    _DEFERRED.append(pending)

    def stop_deferring() -> None:
        # By identity: two empty lists are equal.
        _DEFERRED[:] = [p for p in _DEFERRED if p is not pending]

    def commit_all() -> None:
        stop_deferring()
        while pending:
            pending.pop(0)._commit_now()

    try:
        yield commit_all
    finally:
        stop_deferring()
        for output in pending:
            output.abort()
        pending.clear()


class WriteStream:
    """A temporary file's stream (:class:`AtomicWriter`'s ``handle``): what a caller writes
    goes to the file as it is; a write the system refuses (ENOSPC, EDQUOT, EFBIG, EIO) is a
    :class:`PlanInputError` naming the target and its flag rather than an OSError, which would
    be reported as a bug. The target is untouched either way (the writer aborts)."""

    def __init__(self, raw: IO[Any], path: Path, field: str | None):
        self.raw = raw
        self.path = path
        self.field = field

    def write(self, data: Any) -> int:
        try:
            return self.raw.write(data)
        except OSError as exc:
            raise _write_error(self.path, exc, self.field) from None

    def writelines(self, lines: Iterable[Any]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self.raw.flush()
        except OSError as exc:
            raise _write_error(self.path, exc, self.field) from None

    def fileno(self) -> int:
        return self.raw.fileno()

    @property
    def closed(self) -> bool:
        return bool(self.raw.closed)

    def close(self) -> None:
        """Close the file (what is buffered is written first: a refusal then is reported
        like any other)."""
        try:
            self.raw.close()
        except OSError as exc:
            raise _write_error(self.path, exc, self.field) from None


class AtomicWriter(_AllOrNothing):
    """A file written as a stream and put in place only when complete::

        with AtomicWriter(path, field="--out") as handle:
            handle.write(...)

    The stream goes to a temporary file in the target's directory; leaving the block normally
    flushes it (and fsyncs it with ``fsync=True``) and renames it over the target. Leaving it
    by any exception, KeyboardInterrupt included, removes the temporary file and leaves the
    target as it was. :meth:`commit` and :meth:`abort` do the same without a ``with``."""

    def __init__(
        self,
        path: Path | str,
        *,
        binary: bool = False,
        newline: str | None = None,
        fsync: bool = False,
        field: str | None = None,
    ):
        given = Path(path)
        # A link is written through: the file it points to is replaced and the link kept (a
        # rename over the link itself replaced it with a regular file, its target untouched).
        self.path = Path(os.path.realpath(given)) if given.is_symlink() else given
        self.field = field
        self.fsync = fsync
        self.temp, fd = _create_temp(self.path, field)
        raw: IO[Any]
        try:
            if binary:
                raw = os.fdopen(fd, "wb")
            else:
                # Lone surrogates (from a JSON "\ud800" escape) are written escaped rather than
                # failing half-way through the file.
                raw = os.fdopen(
                    fd, "w", encoding="utf-8", errors="backslashreplace", newline=newline
                )
        except BaseException:
            os.close(fd)
            _remove(self.temp)
            raise
        self.handle = WriteStream(raw, self.path, field)
        self.done = False

    def __enter__(self) -> WriteStream:
        return self.handle

    def _finish_temp(self) -> None:
        """Flush and close the temporary file (the data complete on disk before a rename);
        raises the OSError itself, which each caller reports with its own clean-up."""
        raw = self.handle.raw
        raw.flush()
        if self.fsync:
            os.fsync(raw.fileno())
        raw.close()

    def _commit_now(self) -> None:
        if self.done:
            return
        self.done = True
        try:
            self._finish_temp()
            os.replace(self.temp, self.path)
        except OSError as exc:
            _remove(self.temp)
            raise _write_error(self.path, exc, self.field) from None
        except BaseException:
            _remove(self.temp)
            raise

    def abort(self) -> None:
        if self.done:
            return
        self.done = True
        with contextlib.suppress(OSError):
            self.handle.raw.close()  # what is buffered may not fit either: dropped with it
        _remove(self.temp)


def atomic_write(
    path: Path | str, data: str | bytes, *, field: str | None = None, fsync: bool = False
) -> None:
    """Write a whole file at once: a temporary file beside it, renamed over it when written."""
    with AtomicWriter(path, binary=isinstance(data, bytes), field=field, fsync=fsync) as handle:
        handle.write(data)


class BlockWriter:
    """Blocks of a stream made and written in order on a thread of their own while the caller
    goes on: a sweep computes its next chunk while the last one's rows are formatted (the
    compiled writer releases the GIL) and handed to the system (a write does too), which on a
    machine with a free core overlaps the two.

    ``submit(make)`` takes one of ``buffers`` reusable buffers (waiting while every one is in
    use: memory stays bounded) and has the thread run ``make(buffer)`` and write the bytes it
    returns. The first error (a refused write: :class:`WriteStream`'s PlanInputError) stops the
    writing and is raised in the caller at its next ``submit`` or at ``finish``; ``cancel``
    drops what is not written yet. Either ends the thread: call one of them in a ``finally``.
    ``make`` must read only what the caller no longer changes."""

    def __init__(self, stream: WriteStream, buffers: int = 3):
        self.stream = stream
        self.free: list[bytearray] = [bytearray() for _ in range(buffers)]
        self.jobs: list[tuple[Callable[[bytearray], Any], bytearray] | None] = []
        self.ready = threading.Condition()
        self.error: BaseException | None = None
        self.dropped = False
        self.thread = threading.Thread(target=self._run, name="dualpath-plan-writer", daemon=True)
        self.thread.start()

    def submit(self, make: Callable[[bytearray], Any]) -> None:
        with self.ready:
            while not self.free and self.error is None:
                self.ready.wait()
            self._raise()
            self.jobs.append((make, self.free.pop()))
            self.ready.notify_all()

    def finish(self) -> None:
        """Every block written (or the first error raised); the thread ended."""
        self._stop()
        self._raise()

    def cancel(self) -> None:
        """What is not written yet dropped; the thread ended."""
        with self.ready:
            self.dropped = True
        self._stop()

    def _stop(self) -> None:
        with self.ready:
            self.jobs.append(None)
            self.ready.notify_all()
        self.thread.join()

    def _raise(self) -> None:
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        while True:
            with self.ready:
                while not self.jobs:
                    self.ready.wait()
                job = self.jobs.pop(0)
                skip = self.dropped or self.error is not None
            if job is None:
                return
            make, buffer = job
            data = None
            try:
                if not skip:
                    data = make(buffer)
                    self.stream.write(data)
            except BaseException as exc:  # handed to the caller's thread
                with self.ready:
                    self.error = self.error or exc
            finally:
                data = None  # no view of the buffer left when it is reused
                with self.ready:
                    self.free.append(buffer)
                    self.ready.notify_all()


class AtomicGroup(_AllOrNothing):
    """Several files of one command, all written or none::

        with AtomicGroup() as group:
            group.add(path_a, text_a, field="--junit")
            group.add(path_b, text_b, field="--update")

    ``add`` writes each file's temporary copy at once (a full disk or a missing directory fails
    there, before any target changes); leaving the block renames them all. Should a rename
    fail, the targets already renamed get their previous content back. An exception in the
    block removes every temporary file."""

    def __init__(self, *, fsync: bool = False):
        self.fsync = fsync
        self.staged: list[AtomicWriter] = []
        self.created: list[Path] = []  # folders make_dirs created, outermost first

    def make_dirs(self, folder: Path, *, field: str | None = None) -> None:
        """Create ``folder`` and its missing parents for the group's files; the ones created
        are removed again if the group aborts (an import whose report failed left empty
        folders: found in a trial)."""
        missing = []
        p = folder
        while not p.exists():
            missing.append(p)
            if p.parent == p:
                break
            p = p.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else str(exc)
            raise PlanInputError(
                f"cannot write: {reason}", source=str(folder), field=field
            ) from None
        self.created.extend(reversed(missing))

    def add(self, path: Path | str, data: str | bytes, *, field: str | None = None) -> None:
        writer = AtomicWriter(path, binary=isinstance(data, bytes), field=field, fsync=self.fsync)
        self.staged.append(writer)
        try:
            writer.handle.write(data)
            writer._finish_temp()
        except OSError as exc:
            raise _write_error(writer.path, exc, field) from None

    def stream(self, path: Path | str, *, field: str | None = None) -> WriteStream:
        """A text stream to ``path`` (UTF-8, ``\\n`` line ends) staged with the others: written
        by the caller, renamed with the rest when the group commits, removed if it aborts."""
        writer = AtomicWriter(path, newline="\n", field=field, fsync=self.fsync)
        self.staged.append(writer)
        return writer.handle

    def __enter__(self) -> AtomicGroup:
        return self

    def abort(self) -> None:
        for writer in self.staged:
            writer.abort()
        self.staged = []
        for folder in reversed(self.created):  # innermost first, each only if empty
            try:
                folder.rmdir()
            except OSError:
                break
        self.created = []

    def _commit_now(self) -> None:
        staged, self.staged = self.staged, []
        for writer in staged:  # streams the caller wrote: complete them on disk first
            if not writer.handle.closed:
                try:
                    writer._finish_temp()
                except OSError as exc:
                    for w in staged:
                        w.abort()
                    raise _write_error(writer.path, exc, writer.field) from None
        # Keep each existing target under a second name (a hard link: the target itself never
        # disappears) so that a failed rename can put the earlier ones back.
        backups: list[Path | None] = []
        existed: list[bool] = []
        renamed = 0
        try:
            for writer in staged:
                backup: Path | None = None
                existed.append(writer.path.exists())
                if existed[-1]:
                    backup = writer.temp.with_name(writer.temp.name + ".old")
                    try:
                        os.link(writer.path, backup)
                    except OSError:
                        backup = None  # no hard links here: this file cannot be rolled back
                backups.append(backup)
            try:
                for writer in staged:
                    os.replace(writer.temp, writer.path)
                    writer.done = True
                    renamed += 1
            except BaseException as exc:
                for k in range(renamed):
                    with contextlib.suppress(OSError):
                        backup = backups[k]
                        if backup is not None:
                            os.replace(backup, staged[k].path)
                        elif not existed[k]:
                            os.unlink(staged[k].path)
                if isinstance(exc, OSError):
                    failed = staged[renamed]
                    raise _write_error(failed.path, exc, failed.field) from None
                raise
        finally:
            for backup in backups:
                if backup is not None:
                    _remove(backup)
            for writer in staged:
                if not writer.done:
                    _remove(writer.temp)
                    writer.done = True
