"""What to simulate (``SimConfig``) and the bounds a run is held to."""

from __future__ import annotations

import math

from dualpath_plan import plausible
from dualpath_plan.errors import PlanInputError, check_seed
from dualpath_plan.frozen import record
from dualpath_plan.outcomes.simulation.schedulers import SIM_SCHEDULERS, SimScheduler
from dualpath_plan.physics.modes import ModeName

# Online, a run is stable when the turns that start after the warm-up are at least this share
# of those the arrivals offer (APS x mean turns x the measured span), or short of it by no more
# than three standard deviations of the arrivals' own variation: an unstable queue lets agents
# start ever fewer turns.
STABLE_SHARE = 0.9

# Agents of an offline simulation, at most: each keeps about 330 bytes of state for the whole
# run, so 4,000,000 peaked at 1.34 GB RSS (workload.turns=5, the first 3 million events) and
# the former bound of 10,000,000 passed 3.15 GB; this stays under 2 GB.
MAX_SIM_AGENTS = 4_000_000

# The most numbers the per-window time series may hold (windows x (servers + GPUs + nodes)):
# about 160 MB.
MAX_SERIES_CELLS = 20_000_000

# The most turns one run simulates (about 80 bytes of state per agent and a few per turn, but
# hours of wall time beyond this).
MAX_TURNS = 100_000_000


@record
class SimConfig:
    """What to simulate: ``agents`` started together (offline) or Poisson arrivals at ``aps``
    agents/s for ``duration_s`` (online, statistics from turns that start after ``warmup_s``)."""

    mode: ModeName = "dualpath"
    agents: int | None = 2048
    aps: float | None = None
    # Online: arrivals over this long (default four lifetimes of the longest agent at light
    # load) and turns measured after the warm-up (default two such lifetimes: the rate of
    # turns is steady only once the first agents' longest trajectories could end, and under
    # load a lifetime stretches).
    duration_s: float | None = None
    warmup_s: float | None = None
    seed: int = 0
    scheduler: SimScheduler | None = None  # default: the mode's (queue_aware or round robin)
    window_s: float = 10.0
    queued_utilization: float = 0.25
    prefill_quota_s: float | None = None  # a forward pass at most; default 300 ms x layers
    # The paper's PE choice orders engines by their "assigned, unfinished" tokens and skips
    # those over beta (section 6). The order here counts every unfinished turn; the overload
    # test only those waiting for a pass (reading or ready), so that a running pass does not
    # stop an engine from queueing its next one. True counts the running pass in the test
    # too: passes then stay near half of beta's 5 s of work and a compute-bound cluster loses
    # about 13% of its throughput (docs/model.md section 10).
    beta_counts_running_pass: bool = False
    # A profile's turns all the mean turn (as the analytical model), or an agent's context
    # growing over its turns (turn k of n caches 2 x mean x (k + 1/2) / n).
    context_growth: bool = False
    max_events: int = 500_000_000

    def __post_init__(self) -> None:
        self._check_load()
        check_seed(self.seed)
        if not (math.isfinite(self.window_s) and self.window_s > 0):
            raise PlanInputError(f"expected seconds > 0, got {self.window_s!r}", field="--window")
        # Within the bounds above, what a run plausibly asks (a unit slip named):
        # --duration 3600000 (milliseconds typed for an hour) simulated 42 days.
        for key, value, flag in (
            ("aps", self.aps, "--aps"),
            ("simulate.duration_s", self.duration_s, "--duration"),
            ("simulate.warmup_s", self.warmup_s, "--warmup"),
            ("simulate.window_s", self.window_s, "--window"),
        ):
            why = plausible.problem(key, value) if value is not None else None
            if why is not None:
                raise PlanInputError(why, field=flag)
        if not 0.0 <= self.queued_utilization <= 1.0:
            raise PlanInputError(
                f"expected 0 to 1, got {self.queued_utilization!r}", field="--queued-utilization"
            )
        self._check_scheduler()
        if self.prefill_quota_s is not None and not (
            math.isfinite(self.prefill_quota_s) and self.prefill_quota_s > 0
        ):
            raise PlanInputError(
                f"expected seconds > 0, got {self.prefill_quota_s!r}", field="--prefill-quota"
            )

    def _check_load(self) -> None:
        """Offline agents or an online rate, with its duration and warm-up."""
        if (self.agents is None) == (self.aps is None):
            raise PlanInputError(
                "give --agents (offline) or --aps (online), not both", field="--aps"
            )
        if self.agents is not None and not 1 <= self.agents <= MAX_SIM_AGENTS:
            raise PlanInputError(
                f"expected 1 to {MAX_SIM_AGENTS:,} agents (each holds about 330 bytes of state "
                f"for the whole run), got {self.agents:,}",
                field="--agents",
            )
        if self.aps is not None and not (math.isfinite(self.aps) and self.aps > 0):
            raise PlanInputError(f"expected a number > 0, got {self.aps!r}", field="--aps")
        if self.duration_s is not None and not (
            math.isfinite(self.duration_s) and 0 < self.duration_s <= 1e7
        ):
            raise PlanInputError(
                f"expected 0 < seconds <= 1e7, got {self.duration_s!r}", field="--duration"
            )
        if self.warmup_s is not None and not (
            0 <= self.warmup_s < (math.inf if self.duration_s is None else self.duration_s)
        ):
            limit = "" if self.duration_s is None else f" < --duration ({self.duration_s:g} s)"
            raise PlanInputError(
                f"expected 0 <= seconds{limit}, got {self.warmup_s!r}", field="--warmup"
            )

    def _check_scheduler(self) -> None:
        if self.scheduler == "paper":
            raise PlanInputError(
                "'paper' is now spelled 'queue_aware' (the paper's scheduler, as size names it)",
                field="--scheduler",
            )
        if self.scheduler is not None and self.scheduler not in SIM_SCHEDULERS:
            raise PlanInputError(
                f"unknown scheduler {self.scheduler!r}; expected one of "
                f"{', '.join(SIM_SCHEDULERS)}",
                field="--scheduler",
            )

    @property
    def online(self) -> bool:
        return self.aps is not None

    @property
    def duration(self) -> float:
        assert self.duration_s is not None, "simulate() sets the default duration"
        return self.duration_s

    @property
    def warmup(self) -> float:
        assert self.warmup_s is not None, "simulate() sets the default warm-up"
        return self.warmup_s
