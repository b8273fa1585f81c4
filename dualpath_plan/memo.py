"""A bounded memo of values computed from frozen objects, keyed by the objects' identity.

Profiles are frozen, so the same objects give the same value; identity is a cheaper key than
their contents (a model profile hashes dozens of fields). Each entry holds its objects, so that
their ids are not reused by other objects while it stands; past ``max_entries`` the memo starts
over (a sweep over many values of a field builds as many profiles).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")


class IdentityMemo(Generic[V]):
    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self._entries: dict[tuple[int, ...], tuple[tuple[object, ...], V]] = {}

    def get(self, objects: tuple[object, ...], compute: Callable[[], V]) -> V:
        """The value for these very objects, ``compute()`` the first time."""
        key = tuple(id(o) for o in objects)
        hit = self._entries.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], objects, strict=True)):
            return hit[1]
        if len(self._entries) >= self.max_entries:
            self._entries.clear()
        value = compute()
        self._entries[key] = (objects, value)
        return value
