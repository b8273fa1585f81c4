"""Errors the tool reports to a user as one line, with exit code 2.

Every check of user input raises :class:`PlanInputError`; the CLI prints ``error: <message>``
and exits 2. Nothing else is allowed to reach the user as a traceback.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# Longest message echoed to a user: long enough for a list of known ids, short enough that a
# megabyte-long id from a hostile file does not flood the terminal.
MAX_MESSAGE_CHARS = 2000

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: object, max_chars: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` as one printable line: newlines, control characters, lone surrogates and other
    unprintable characters become backslash escapes (``\\n``, ``\\x1b``, ``\\ud800``); over
    ``max_chars`` it is cut and says how much was left out. Applying it twice changes nothing
    (backslashes themselves are kept as they are), so every layer may call it."""
    s = str(text)
    if not s.isprintable():
        out = []
        for ch in s:
            if ch.isprintable():
                out.append(ch)
            elif ch in _ESCAPES:
                out.append(_ESCAPES[ch])
            else:
                code = ord(ch)
                out.append(
                    f"\\x{code:02x}"
                    if code < 0x100
                    else f"\\u{code:04x}"
                    if code < 0x10000
                    else f"\\U{code:08x}"
                )
        s = "".join(out)
    if len(s) > max_chars:
        # The cut text with its note fits in max_chars, so a second call leaves it alone.
        keep = max(max_chars - 40, 0)
        s = f"{s[:keep]}... ({len(s) - keep:,} more characters)"
    return s


class PlanInputError(Exception):
    """Bad input: names where (file, and line where known), what (field) and what was expected.

    The message is one printable line (see :func:`printable`): ids and values echoed from a
    file or the command line cannot start a second line on the user's terminal."""

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        field: str | None = None,
        line: int | None = None,
    ):
        self.source = source
        self.field = field
        self.line = line
        self.detail = message  # without where: for a caller that names the place itself
        parts = []
        if source:
            parts.append(source)
        if line is not None:
            parts.append(f"line {line}")
        if field:
            parts.append(f"field '{field}'")
        prefix = ": ".join(parts)
        super().__init__(printable(f"{prefix}: {message}" if prefix else message))

    def __reduce__(self) -> tuple[Any, ...]:
        # Raised in a worker process (outcomes/executor.py) and pickled back: keep where.
        return (_rebuild, (type(self), self.detail, self.source, self.field, self.line))


def _rebuild(
    cls: type[PlanInputError], message: str, source: str | None, field: str | None, line: int | None
) -> PlanInputError:
    return cls(message, source=source, field=field, line=line)


class TaskFailedError(Exception):
    """A task of a parallel run (a simulation) failed twice for a reason other than bad
    input: the CLI prints ``error: <message>`` naming the task's inputs and exits 1."""


class InfeasibleError(PlanInputError):
    """The input is well formed but describes a cluster or target that cannot work."""


# The seeds NumPy's generators take from every command that has --seed (a run's random draws).
MAX_SEED = 2**32 - 1


def check_seed(seed: int, field: str = "--seed") -> int:
    """``seed`` if it is a seed every command takes (0 to MAX_SEED), else the one-line error."""
    if not 0 <= seed <= MAX_SEED:
        raise PlanInputError(f"expected 0 to {MAX_SEED:,}, got {seed}", field=field)
    return seed


def echoed_input(err: Mapping[str, Any]) -> str:
    """ " (got X)" for a pydantic error's input, where that says something: not for a missing or
    an unknown key, nor for our own checks (a value error says what it got), nor for a list or
    a table (a duplicate scenario id echoed the whole baseline, 2 KB on one line)."""
    if "input" not in err or err.get("type") in ("missing", "extra_forbidden", "value_error"):
        return ""
    value = err["input"]
    if isinstance(value, dict | list | tuple | set):
        return ""
    if isinstance(value, float) and math.isnan(value):
        return " (got nan)"
    return f" (got {value!r})"
