"""What a ranking optimizes: one vocabulary of objectives, each a metric's own name (the
field of ``ModeOutcome``, the JSON key, the CSV column), read by ``recommend``, ``sweep`` and
the ``check``/``validate`` registry. A spelling that was once taken is refused with the name
that replaced it, so that a script fails loudly rather than rank by something else."""

from __future__ import annotations

from typing import Literal, cast

from dualpath_plan.errors import PlanInputError

Objective = Literal[
    "throughput_per_gpu", "throughput_turns_per_s", "saturated_turns_per_s", "jct_s", "aps", "cost"
]
# Every objective: the metric's direction (True: lower is better) and its label.
OBJECTIVE_TABLE: dict[Objective, tuple[bool, str]] = {
    "throughput_per_gpu": (False, "turns/s per GPU"),
    "throughput_turns_per_s": (False, "turns/s"),
    "saturated_turns_per_s": (False, "saturated turns/s"),
    "jct_s": (True, "JCT"),
    "aps": (False, "APS"),
    # issue 32: $ per agent served online (outcomes/cost.py), the store and power included.
    "cost": (True, "$/agent"),
}
# Spellings an earlier release took, and the name that replaced each.
RENAMED = {"jct": "jct_s", "throughput-per-gpu": "throughput_per_gpu"}


def lower_is_better(objective: Objective) -> bool:
    return OBJECTIVE_TABLE[objective][0]


def objective_of(
    name: str, allowed: tuple[Objective, ...], field: str = "--objective"
) -> Objective:
    """``name`` as an objective of ``allowed``; an old spelling is refused with its new name."""
    if name in allowed:
        return cast(Objective, name)
    if name in RENAMED and RENAMED[name] in allowed:
        raise PlanInputError(
            f"{name!r} is now spelled {RENAMED[name]!r} (the metric's own name, as in JSON and "
            "CSV)",
            field=field,
        )
    raise PlanInputError(f"expected one of {', '.join(allowed)}, got {name!r}", field=field)
