"""Frozen records (:func:`record`): the package's value types, frozen dataclasses whose
equality, hash and repr are one shared implementation of what
``dataclasses.dataclass(frozen=True)`` writes for each class.

The dataclass decorator writes the source of a class's ``__eq__``, ``__hash__`` and
``__repr__`` and compiles it when the class is defined (Python 3.11): about a quarter of a
millisecond a class, some 10 ms of a cold ``size``'s classes. :func:`record` is that decorator
with those three taken from here instead: the same results (equal when of the same class with
equal compared fields, as a tuple of them compares; the hash of that tuple of the hashed
fields; ``Name(field=value, ...)`` of the shown fields, ``...`` for an object within itself),
the fields' ``compare``, ``hash`` and ``repr`` flags read once, at definition. Everything else
is the dataclass's own (``__init__``, frozen assignment, ``fields``, ``replace``).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, TypeVar, dataclass_transform

T = TypeVar("T")


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: type[T]) -> type[T]:
    """``@dataclass(frozen=True)``, its equality, hash and repr the shared ones below (a method
    the class defines itself is kept, as the dataclass keeps it)."""
    own = dict(cls.__dict__)
    out = dataclasses.dataclass(frozen=True, eq=False, repr=False)(cls)
    fields = dataclasses.fields(out)  # type: ignore[arg-type]
    out.__record_compared__ = tuple(f.name for f in fields if f.compare)  # type: ignore[attr-defined]
    out.__record_hashed__ = tuple(  # type: ignore[attr-defined]
        f.name for f in fields if (f.compare if f.hash is None else f.hash)
    )
    out.__record_shown__ = tuple(f.name for f in fields if f.repr)  # type: ignore[attr-defined]
    if "__eq__" not in own:
        out.__eq__ = _eq  # type: ignore[assignment,method-assign]
    # The dataclass's rule: a frozen class with equality hashes its fields unless it states its
    # own hash (a class body's __eq__ alone sets __hash__ to None: not a stated hash).
    stated = own.get("__hash__", dataclasses.MISSING)
    if stated is dataclasses.MISSING or (stated is None and "__eq__" in own):
        out.__hash__ = _hash  # type: ignore[assignment,method-assign]
    if "__repr__" not in own:
        out.__repr__ = _repr  # type: ignore[assignment,method-assign]
    return out


def _eq(self: Any, other: Any) -> Any:
    if other.__class__ is self.__class__:
        names = self.__record_compared__
        return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(tuple(getattr(self, n) for n in self.__record_hashed__))


# Objects whose repr is being written, by thread: an object within itself shows as "...".
_WRITING: set[tuple[int, int]] = set()


def _repr(self: Any) -> str:
    key = (id(self), threading.get_ident())
    if key in _WRITING:
        return "..."
    _WRITING.add(key)
    try:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__record_shown__)
        return f"{self.__class__.__qualname__}({shown})"
    finally:
        _WRITING.discard(key)
