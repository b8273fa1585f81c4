"""The scenario layer: a scenario's inputs and defaults (``spec``), its profiles resolved
(``bundle``) and the one assembly of its per-link capacities (``assemble``)."""

from dualpath_plan.scenario.bundle import Scenario

__all__ = ["Scenario"]
