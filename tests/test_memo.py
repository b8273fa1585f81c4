"""IdentityMemo: values of frozen objects by identity (param_counts, ProfileCache's demands)."""

from __future__ import annotations

from dualpath_plan.memo import IdentityMemo


def test_a_value_is_computed_once_per_object_and_the_memo_is_bounded() -> None:
    memo: IdentityMemo[int] = IdentityMemo(2)
    calls: list[object] = []

    def value(o: object) -> int:
        return memo.get((o,), lambda: calls.append(o) or len(calls))

    a, b, c = [1.5], [1.5], [2.5]  # a and b equal but not the same object
    assert value(a) == 1 and value(a) == 1 and calls == [a]
    assert value(b) == 2 and calls == [a, b]  # equal contents, another object: computed
    assert value(c) == 3  # past two entries the memo starts over
    assert value(a) == 4 and calls == [a, b, c, a]
