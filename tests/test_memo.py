"""IdentityMemo: values of frozen objects by identity (param_counts, ProfileCache's demands);
KeyedMemo: by identity, then by a key of values (the decode step costs of a model, the weights
per GPU and the decode groups of one node count, the sweep's weights tables)."""

from __future__ import annotations

from dualpath_plan.memo import IdentityMemo, KeyedMemo


def test_a_value_is_computed_once_per_object_and_the_memo_is_bounded() -> None:
    memo: IdentityMemo[int] = IdentityMemo(2)
    calls: list[object] = []

    def value(o: object) -> int:
        def compute() -> int:
            calls.append(o)
            return len(calls)

        return memo.get((o,), compute)

    a, b, c = [1.5], [1.5], [2.5]  # a and b equal but not the same object
    assert value(a) == 1 and value(a) == 1 and calls == [a]
    assert value(b) == 2 and calls == [a, b]  # equal contents, another object: computed
    assert value(c) == 3  # past two entries the memo starts over
    assert value(a) == 4 and calls == [a, b, c, a]


def test_a_keyed_value_is_computed_once_per_object_and_key_and_each_is_bounded() -> None:
    memo: KeyedMemo[float, int] = KeyedMemo(2)
    calls: list[tuple[object, float]] = []

    def value(o: object, key: float, each: int = 2) -> int:
        def compute() -> int:
            calls.append((o, key))
            return len(calls)

        return memo.get((o,), key, compute, each)

    a, b = [1.5], [1.5]
    assert value(a, 1.0) == 1 and value(a, 1.0) == 1 and value(a, 2.0) == 2
    assert value(b, 1.0) == 3  # another object, the same key: computed
    assert value(a, 1.0) == 1 and len(calls) == 3  # a's values kept beside b's
    assert value(a, 3.0) == 4  # a third key past a bound of two: a's values start over
    assert value(a, 1.0) == 5 and value(b, 1.0) == 3
    assert value(a, 1.0, each=1) == 5 and value(a, 2.0, each=1) == 6 and value(a, 3.0) == 7


def test_kept_decode_step_costs_are_decode_steps(registry, monkeypatch) -> None:
    # engines._decode_step keeps decode_step's costs by model and the batches' and context's
    # values: for every shipped model, batches and contexts asked in a shuffled order (again
    # and again, and with a bound so small that it starts over), each cost is decode_step's,
    # bit for bit, and read-only.
    import numpy as np
    import pytest

    from dualpath_plan.physics import engines
    from dualpath_plan.physics.model import decode_step

    rng = np.random.default_rng(3)
    models = [registry.get("model", m) for m in registry.ids("model")]
    batches = [np.ones(5), np.arange(1.0, 6.0), np.array([2.0]), np.full((2, 3), 7.0)]
    asks = [(m, b, c) for m in models for b in batches for c in (1000.0, 33238.0)]
    for each in (64, 2):
        monkeypatch.setattr(engines, "_STEP_COSTS_EACH", each)
        for k in [*rng.permutation(len(asks)), *rng.permutation(len(asks))]:
            m, b, c = asks[k]
            got, want = engines._decode_step(m, b, c), decode_step(m, b, c)
            for name in ("weight_bytes", "kv_bytes", "flops", "routed_weight_bytes"):
                assert np.array_equal(getattr(got, name), getattr(want, name)), name
            with pytest.raises(ValueError):
                got.flops[...] = 0.0


def test_kept_weights_and_decode_groups_are_computed_ones(registry, monkeypatch) -> None:
    # engines.gpu_weight_bytes keeps the weights per GPU of one node count by model, the
    # weights_key and the count; engines.decode_group keeps a group of one node count by
    # model, node and GPU and the values asked: for every shipped model and node, counts and
    # turns in a shuffled order (again, and with bounds so small that they start over), each
    # is what computing it gives, bit for bit; a kept group's step table is read-only.
    import dataclasses

    import numpy as np
    import pytest

    from dualpath_plan.physics import engines

    rng = np.random.default_rng(5)
    models = [registry.get("model", m) for m in registry.ids("model")]
    nodes = [registry.get("node", n) for n in registry.ids("node")]
    asks = [
        (m, node, count, turn, e)
        for m in models
        for node in nodes
        for count in (1.0, 2.0, np.float64(3.0), np.asarray(4.0), 8)
        for turn in ((30000.0, 400.0), (1000.0, 2000.0))
        for e in (True, False)
    ]
    for each in (64, 2):
        monkeypatch.setattr(engines, "_WEIGHT_BYTES_EACH", each)
        monkeypatch.setattr(engines, "_DECODE_GROUPS_EACH", each)
        for k in [*rng.permutation(len(asks)), *rng.permutation(len(asks))]:
            m, node, count, (ctx, gen), e = asks[k]
            gpu = registry.get("gpu", node.gpu)
            got = engines.gpu_weight_bytes(m, node, gpu, count)
            assert got == engines._gpu_weight_bytes(m, node, gpu, count)
            group = engines.decode_group(m, node, gpu, count, ctx, gen, e)
            fresh = engines._decode_group(m, node, gpu, count, ctx, gen, e)
            for f in dataclasses.fields(fresh):
                a, b = getattr(group, f.name), getattr(fresh, f.name)
                assert a is b if f.name == "model" else np.array_equal(a, b), f.name
            b, t = group.step_table
            assert np.array_equal(t, fresh.step_table[1]) and np.array_equal(b, fresh.step_table[0])
            assert group.entry(0) is group  # one node count: its own entry
            with pytest.raises(ValueError):
                t[...] = 0.0
