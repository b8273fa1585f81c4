"""The store of finite size in a report (issue 32): its capacity against the KV working set
and the hit rate at it, one line of text and one JSON object, for size, recommend and sweep.
Nothing is printed or written without a capacity (``Scenario.store`` None)."""

from __future__ import annotations

from typing import Any

from dualpath_plan.formatting import gbyte, percent, plain
from dualpath_plan.scenario import Scenario


def store_payload(sc: Scenario) -> dict[str, Any]:
    """The ``store`` object of a JSON report (only with a capacity given)."""
    s = sc.store
    assert s is not None
    return {
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
