"""``frozen.record`` is ``dataclass(frozen=True)`` with one shared equality, hash and repr: for
every value (NaN, signed zeros, infinities, arrays, tuples), with fields that are not compared,
not hashed or not shown, for a subclass, an empty class and an object within itself, each gives
what the dataclass's own methods give; assignment still raises and ``replace`` still works."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualpath_plan.frozen import record


def _classes(decorate):  # type: ignore[no-untyped-def]
    @decorate
    class Point:
        x: object
        y: int = 3
        z: tuple = ()
        unseen: float = field(default=0.0, compare=False)
        hidden: str = field(default="s", repr=False)
        unhashed: float = field(default=1.0, hash=False)
        items: list = field(default_factory=list, hash=False)

    @decorate
    class Sub(Point):
        extra: float = 2.0

    @decorate
    class Empty:
        pass

    @decorate
    class Box:
        held: object = None

    return Point, Sub, Empty, Box


DATACLASS = _classes(dataclass(frozen=True))
RECORD = _classes(record)
VALUES = st.sampled_from([0.0, -0.0, 1.0, math.nan, math.inf, -math.inf, 2, "x", (1, 2), None])


def _outcomes(classes, a: dict, b: dict) -> list[object]:  # type: ignore[no-untyped-def]
    point, sub, empty, _ = classes
    p, q, s = point(**a), point(**b), sub(**a)
    out: list[object] = [p == q, p != q, p == s, s == p, p == p, p == 1, repr(p), repr(s)]
    out += [repr(empty()), empty() == empty()]
    for o in (p, q, s, empty()):
        try:
            out.append(hash(o))
        except TypeError as exc:  # an unhashable field: the same error, by the same type
            out.append(("TypeError", str(exc)))
    return out


@settings(max_examples=300, deadline=None)
@given(
    x=VALUES, x2=VALUES, y=st.integers(0, 3), z=st.sampled_from([(), (1,), (math.nan,), ([],)]),
    unseen=st.floats(allow_nan=False), hidden=st.text(max_size=3), unhashed=st.floats(),
)  # fmt: skip
def test_a_record_compares_hashes_and_shows_as_a_frozen_dataclass(
    x: object, x2: object, y: int, z: tuple, unseen: float, hidden: str, unhashed: float
) -> None:
    a = {"x": x, "y": y, "z": z, "unseen": unseen, "hidden": hidden, "unhashed": unhashed}
    b = dict(a, x=x2, unseen=unseen + 1.0)
    assert _outcomes(RECORD, a, b) == _outcomes(DATACLASS, a, b)


def test_a_record_within_itself_arrays_assignment_and_replace() -> None:
    for point, _, _, box in (DATACLASS, RECORD):
        inner = box()
        object.__setattr__(inner, "held", [inner])
        assert repr(inner).endswith("Box(held=[...])")
        arrays = point(np.array([1.0, 2.0]))
        assert arrays == arrays  # the same object: a tuple compares it by identity first
        with pytest.raises(ValueError):
            _ = arrays == point(np.array([1.0, 2.0]))  # two arrays: ambiguous, as before
        with pytest.raises(dataclasses.FrozenInstanceError):
            point(1).x = 2  # type: ignore[misc]
        moved = dataclasses.replace(point(1), x=5)
        assert moved.x == 5 and dataclasses.fields(moved)[0].name == "x"
