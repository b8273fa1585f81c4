"""The modes a cluster can run, as data: how the hit KV is split between the two read paths,
whether its I/O costs anything, the prefill style and the scheduler. Every solver and report
reads this table; adding a mode is a row here (docs/extending.md).

The paper's Basic reads on the PE path only, without layer-wise prefill, with the framework's
own scheduler; the ablation (Figure 12 right) adds layer-wise prefill, then dual-path loading,
then the token- and read-queue-aware scheduler (section 6). Oracle skips every disk read,
H2D/D2H and P-D transfer (the zero-I/O bound, paper 4.4).
"""

from __future__ import annotations

from typing import Literal

from dualpath_plan.errors import PlanInputError
from dualpath_plan.frozen import record

ModeName = Literal["basic", "basic_layerwise", "dualpath_unscheduled", "even", "dualpath", "oracle"]
# pe_only: every hit byte on the PE path (x = 0); even: the DE side's share of storage read
# capacity (the paper's even-sharing assumption); optimal: the split that maximizes throughput.
SplitRule = Literal["pe_only", "even", "optimal"]
SchedulerRole = Literal["baseline", "queue_aware"]


@record
class Mode:
    name: ModeName
    split: SplitRule
    io_free: bool  # the oracle: KV reads, copies and P-D transfers cost nothing
    layerwise: bool  # layer-wise prefill: HBM holds one layer's KV of the forward batch
    scheduler: SchedulerRole  # the scenario's baseline policy, or the paper's Algorithm 1
    description: str


MODE_TABLE: dict[ModeName, Mode] = {
    m.name: m
    for m in (
        Mode(
            "basic",
            "pe_only",
            False,
            False,
            "baseline",
            "PE reads only, no layer-wise prefill, baseline scheduler (the paper's Basic)",
        ),
        Mode(
            "basic_layerwise",
            "pe_only",
            False,
            True,
            "baseline",
            "Basic with layer-wise prefill (ablation)",
        ),
        Mode(
            "dualpath_unscheduled",
            "optimal",
            False,
            True,
            "baseline",
            "dual-path loading without the new scheduler (ablation)",
        ),
        Mode(
            "even",
            "even",
            False,
            True,
            "queue_aware",
            "both paths, split by the sides' storage read capacity",
        ),
        Mode(
            "dualpath",
            "optimal",
            False,
            True,
            "queue_aware",
            "both paths at the optimal split, the paper's scheduler (DualPath)",
        ),
        Mode(
            "oracle", "pe_only", True, True, "queue_aware", "no KV I/O at all: the zero-I/O bound"
        ),
    )
}
MODES: tuple[ModeName, ...] = tuple(MODE_TABLE)
REPORT_MODES: tuple[ModeName, ...] = ("basic", "even", "dualpath", "oracle")
ABLATION_MODES: tuple[ModeName, ...] = (
    "basic",
    "basic_layerwise",
    "dualpath_unscheduled",
    "dualpath",
)


def mode(name: str, option: str = "--mode") -> Mode:
    try:
        return MODE_TABLE[name]  # type: ignore[index]
    except KeyError:
        raise PlanInputError(
            f"unknown mode {name!r}; expected one of {', '.join(MODES)}", field=option
        ) from None


def parse_modes(text: str, option: str = "--mode") -> tuple[ModeName, ...]:
    """A comma list of modes (or 'all' for the report modes), each once, in the given order."""
    if text.strip() == "all":
        return REPORT_MODES
    out: list[ModeName] = []
    for part in text.split(","):
        if part.strip() == "all":
            # 'all,basic' said "unknown mode 'all'", where 'all' alone is known.
            raise PlanInputError(
                f"'all' ({', '.join(REPORT_MODES)}) cannot be combined with other modes; give "
                f"'all' alone or list the modes, got {text!r}",
                field=option,
            )
        name = mode(part.strip(), option).name
        if name not in out:
            out.append(name)
    if not out:
        raise PlanInputError("expected at least one mode", field=option)
    return tuple(out)
