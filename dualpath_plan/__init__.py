"""dualpath-plan: capacity planning for P/D-disaggregated LLM inference whose KV-cache lives in
external storage, with DeepSeek's DualPath dual read path (arXiv 2602.21548).

The Python API (docs/api.md) is exported here: ``dp.evaluate(dp.spec(prefill_nodes=2))``,
``dp.size``, ``dp.recommend``, ``dp.sweep``, ``dp.paths``, ``dp.simulate``,
``dp.aps_search``. Its names load on first use, so that importing the package (as the CLI
does first) imports no library. The library never imports the CLI.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Each exported name and the module that defines it.
_EXPORTS = {
    "costs": "dualpath_plan.api",
    "aps_search": "dualpath_plan.api",
    "evaluate": "dualpath_plan.api",
    "load_profiles": "dualpath_plan.api",
    "paths": "dualpath_plan.api",
    "recommend": "dualpath_plan.api",
    "records": "dualpath_plan.api",
    "scenario": "dualpath_plan.api",
    "simulate": "dualpath_plan.api",
    "size": "dualpath_plan.api",
    "spec": "dualpath_plan.api",
    "sweep": "dualpath_plan.api",
    "SweepResult": "dualpath_plan.api",
    "ModeOutcome": "dualpath_plan.outcomes.serving",
    "PlanCost": "dualpath_plan.outcomes.cost",
    "SizeReport": "dualpath_plan.outcomes.serving",
    "SizingReport": "dualpath_plan.outcomes.sizing",
    "RecommendReport": "dualpath_plan.outcomes.recommend",
    "Registry": "dualpath_plan.profiles.registry",
    "Scenario": "dualpath_plan.scenario.bundle",
    "ScenarioSpec": "dualpath_plan.scenario.spec",
    "ServingConfig": "dualpath_plan.scenario.spec",
    "PlanInputError": "dualpath_plan.errors",
    "InfeasibleError": "dualpath_plan.errors",
}
__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:  # the names as the checkers see them ('X as X': a re-export)
    from dualpath_plan.api import (
        SweepResult as SweepResult,
    )
    from dualpath_plan.api import (
        aps_search as aps_search,
    )
    from dualpath_plan.api import (
        costs as costs,
    )
    from dualpath_plan.api import (
        evaluate as evaluate,
    )
    from dualpath_plan.api import (
        load_profiles as load_profiles,
    )
    from dualpath_plan.api import (
        paths as paths,
    )
    from dualpath_plan.api import (
        recommend as recommend,
    )
    from dualpath_plan.api import (
        records as records,
    )
    from dualpath_plan.api import (
        scenario as scenario,
    )
    from dualpath_plan.api import (
        simulate as simulate,
    )
    from dualpath_plan.api import (
        size as size,
    )
    from dualpath_plan.api import (
        spec as spec,
    )
    from dualpath_plan.api import (
        sweep as sweep,
    )
    from dualpath_plan.errors import (
        InfeasibleError as InfeasibleError,
    )
    from dualpath_plan.errors import (
        PlanInputError as PlanInputError,
    )
    from dualpath_plan.outcomes.cost import (
        PlanCost as PlanCost,
    )
    from dualpath_plan.outcomes.recommend import (
        RecommendReport as RecommendReport,
    )
    from dualpath_plan.outcomes.serving import (
        ModeOutcome as ModeOutcome,
    )
    from dualpath_plan.outcomes.serving import (
        SizeReport as SizeReport,
    )
    from dualpath_plan.outcomes.sizing import (
        SizingReport as SizingReport,
    )
    from dualpath_plan.profiles.registry import (
        Registry as Registry,
    )
    from dualpath_plan.scenario.bundle import (
        Scenario as Scenario,
    )
    from dualpath_plan.scenario.spec import (
        ScenarioSpec as ScenarioSpec,
    )
    from dualpath_plan.scenario.spec import (
        ServingConfig as ServingConfig,
    )


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dualpath_plan' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups find it without this hook
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
