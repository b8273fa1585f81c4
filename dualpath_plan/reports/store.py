"""The store of finite size in a report (issue 32): its capacity against the KV working set
and the hit rate at it, one line of text and one JSON object, for size, recommend and sweep.
Nothing is printed or written without a capacity (``Scenario.store`` None)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dualpath_plan.formatting import gbyte, percent, plain
from dualpath_plan.outcomes.read_choice import READ_STEPS
from dualpath_plan.scenario import Scenario


def store_payload(sc: Scenario, reads: Mapping[str, float | None] | None = None) -> dict[str, Any]:
    """The ``store`` object of a JSON report (only with a capacity given); ``reads``: each
    mode's read share of the cached context (outcomes/read_choice.py), where the report has
    them."""
    s = sc.store
    assert s is not None
    return {
        **({"read_share": dict(reads)} if reads else {}),
        "capacity_bytes": s.capacity_bytes,
        "storage_nodes": sc.storage.storage_nodes if sc.storage else None,
        "working_set_bytes": s.working_set_bytes,
        "beyond_capacity": s.beyond,
        "resident_share": s.resident,
        "hit_rate": s.hit_rate,
        "hit_rate_infinite": s.hit_rate_full,
        "basis": s.basis,
    }


def store_lines(sc: Scenario) -> list[str]:
    """What a report says of the store's size: nothing without one."""
    s = sc.store
    if s is None:
        return []
    nodes = f" ({plain(sc.storage.storage_nodes)} nodes)" if sc.storage else ""
    head = (
        f"store {gbyte(s.capacity_bytes / 1e9)}{nodes}, KV working set "
        f"{gbyte(s.working_set_bytes / 1e9)}: hit rate {percent(s.hit_rate, 1)} "
        f"(infinite store {percent(s.hit_rate_full, 1)}); {s.basis}"
    )
    if not s.beyond:
        return [head]
    return [
        head,
        f"the KV working set is beyond the store's capacity: {percent(1 - s.resident, 1)} of "
        "the cached context is recomputed by prefill (and written back), not read",
    ]


def read_lines(sc: Scenario, reads: Mapping[str, float | None]) -> list[str]:
    """Which modes read less of the cached context than the store holds, and how much: the
    rest is recomputed, faster than reading it where a read link binds with prefill compute
    to spare (outcomes/read_choice.py). Nothing where every mode reads all it holds."""
    s = sc.store
    if s is None:
        return []
    less = {m: v for m, v in reads.items() if v is not None and v < s.resident}
    if not less:
        return []
    each = ", ".join(f"{m} {_apart(v, s.resident)}" for m, v in less.items())
    return [
        f"read of the cached context (the store holds {percent(s.resident, 1)}): {each}; the "
        "rest is recomputed, faster than reading it where a read link binds with compute to "
        f"spare (chosen on a grid of 1/{READ_STEPS})"
    ]


def _apart(share: float, resident: float) -> str:
    """``share`` as a percentage with the digits that tell it from ``resident`` (99.9999%,
    not 100.0%, for a share a millionth below a store that holds everything)."""
    for digits in range(1, 7):
        if percent(share, digits) != percent(resident, digits):
            return percent(share, digits)
    return percent(share, 6)
