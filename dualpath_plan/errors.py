"""Errors the tool reports to a user as one line, with exit code 2.

Every check of user input raises :class:`PlanInputError`; the CLI prints ``error: <message>``
and exits 2. Nothing else is allowed to reach the user as a traceback.
"""

from __future__ import annotations


class PlanInputError(Exception):
    """Bad input: names where (file), what (field) and what was expected."""

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None):
        self.source = source
        self.field = field
        parts = []
        if source:
            parts.append(source)
        if field:
            parts.append(f"field '{field}'")
        prefix = ": ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class InfeasibleError(PlanInputError):
    """The input is well formed but describes a cluster or target that cannot work."""
