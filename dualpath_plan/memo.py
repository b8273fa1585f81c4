"""A bounded memo of values computed from frozen objects, keyed by the objects' identity.

Profiles are frozen, so the same objects give the same value; identity is a cheaper key than
their contents (a model profile hashes dozens of fields). Each entry holds its objects, so that
their ids are not reused by other objects while it stands; past ``max_entries`` the memo starts
over (a sweep over many values of a field builds as many profiles).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
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


class KeyedMemo(Generic[K, V]):
    """Values by the identity of some frozen objects, then by a key of plain values (counts,
    a turn, the bytes of an array): an :class:`IdentityMemo` of bounded dicts. Past
    ``max_each`` values for one set of objects, that set's dict starts over; the bound is
    given at each call, so that a caller's module constant stays the one place it is set."""

    def __init__(self, max_entries: int) -> None:
        self.by_objects: IdentityMemo[dict[K, V]] = IdentityMemo(max_entries)

    def get(
        self, objects: tuple[object, ...], key: K, compute: Callable[[], V], max_each: int
    ) -> V:
        """The value for these very objects and this key, ``compute()`` the first time."""
        kept = self.by_objects.get(objects, dict)
        found = kept.get(key)
        if found is None:
            if len(kept) >= max_each:
                kept.clear()
            found = kept[key] = compute()
        return found
