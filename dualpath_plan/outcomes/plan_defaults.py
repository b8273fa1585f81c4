"""The defaults of the plans by simulation (outcomes/sim_plans.py), apart from it: the commands'
options name them, and a plain ``size`` or ``recommend`` does not load the simulator to read
two numbers."""

from __future__ import annotations

# Seeds per simulated rate in the APS search and the plans, unless told: the rate is judged on
# their mean (--seeds 3 or more for intervals narrow enough to read; each seed is a run).
DEFAULT_PLAN_SEEDS = 2
# recommend --by simulation simulates the splits the analytical model ranks in this top.
DEFAULT_TOP_SPLITS = 3
