"""``dualpath-plan simulate``: the discrete-event simulation of a cluster, optionally beside the
analytical model."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from dualpath_plan.cli.common import (
    JsonOpt,
    ProfilesOpt,
    RayOpt,
    SetOpt,
    WorkersOpt,
    load_registry,
    print_json,
    refuse_input,
    stdout,
    task_progress,
)
from dualpath_plan.cli.options import given_flags, scenario_options
from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import AtomicWriter
from dualpath_plan.formatting import plain
from dualpath_plan.outcomes.executor import Executor, make_executor
from dualpath_plan.outcomes.sim_plans import (
    DEFAULT_PLAN_SEEDS,
    DEFAULT_TOLERANCE,
    run_seeds,
    search_aps,
)
from dualpath_plan.outcomes.simulation import (
    SIM_SCHEDULERS,
    SimConfig,
    SimResult,
    TurnRecord,
    simulate,
)
from dualpath_plan.physics.modes import mode as mode_named
from dualpath_plan.reports import simulate as report
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ScenarioSpec, ServingConfig


def _output(path: Path | None, flag: str, suffixes: tuple[str, ...]) -> None:
    """An output file needs a known suffix."""
    if path is not None and path.suffix.lower() not in suffixes:
        raise PlanInputError(
            f"{path}: expected a file ending in {' or '.join(suffixes)}", field=flag
        )


# The analytical imbalance model that stands for each simulated scheduler (--compare): the
# least-loaded scheduler balances by queues as the paper's does, and has no model of its own.
ANALYTICAL_SCHEDULER = {
    "queue_aware": "queue_aware",
    "round_robin": "round_robin",
    "least_loaded": "queue_aware",
}


def _caveats(r: SimResult) -> tuple[str, ...]:
    """What the run simulates that the analytical model does not represent."""
    from dualpath_plan.physics.modes import MODE_TABLE

    out = []
    if r.scheduler == "round_robin" and MODE_TABLE[r.mode].split != "pe_only":
        out.append(
            "the simulated round robin alternates the two read paths (half the reads each "
            "way, (P + D) / (2P) of the mean on a prefill node's SNIC), which the analytical "
            f"model does not: it splits reads {MODE_TABLE[r.mode].split}ly and takes round "
            "robin as an imbalance factor only"
        )
    if r.scheduler == "least_loaded":
        out.append(
            "the simulated least_loaded scheduler has no analytical model of its own: the "
            "analytical side runs queue_aware's imbalance model"
        )
    if r.config.context_growth:
        out.append(
            "--context-growth: the simulated turns grow over each agent's life and the "
            "measured span sees some of them; the analytical model runs the mean turn"
        )
    return tuple(out)


def _compare(sc: Scenario, r: SimResult, slo: ServingConfig) -> report.Analytical:
    """The analytical model for the same cluster, scheduler and load: ``size``'s offline
    operating point, or the online model at the simulated arrival rate."""
    import math
    from dataclasses import replace

    import numpy as np

    from dualpath_plan.outcomes.at_rate import rate_points
    from dualpath_plan.outcomes.serving import evaluate_mode

    c = r.config
    policy = ANALYTICAL_SCHEDULER[r.scheduler]
    sc = replace(sc, scheduling=replace(sc.scheduling, policy=policy))  # type: ignore[arg-type]
    what = f"--scheduler {policy}"
    caveats = _caveats(r)
    if not c.online:
        assert c.agents is not None
        o = evaluate_mode(sc, r.mode, replace(slo, agents=c.agents))
        # The operating point: the saturated rate, or the agents over their critical path.
        return report.Analytical(
            o.throughput_turns_per_s,
            o.ttft_s,
            o.ttft_span_s,
            o.tpot_s,
            o.jct_s,
            f"size, offline, {what}",
            caveats,
        )
    assert c.aps is not None
    p = rate_points(sc, r.mode, np.asarray([c.aps]))
    beyond = bool(p.beyond[0])

    def value(a: np.ndarray) -> float | None:
        v = float(a[0])
        return None if beyond or not math.isfinite(v) else v

    offered = c.aps * sc.turn_demand.trajectory_turns.mean
    return report.Analytical(
        min(offered, p.saturated_turns_per_s),
        value(p.ttft_s),
        None,  # online the measured span's TTFT is the one
        value(p.tpot_s),
        value(p.agent_jct_s),
        f"size --aps {plain(c.aps)} {what}",
        caveats,
    )


@scenario_options(
    groups=("profiles", "cluster", "serving", "terms"),
    exclude=("max_utilization",),
)
def simulate_cmd(
    spec: ScenarioSpec,
    mode: Annotated[
        str,
        typer.Option(
            "--mode", help="basic, basic_layerwise, dualpath_unscheduled, even, dualpath or oracle."
        ),
    ] = "dualpath",
    aps: Annotated[
        float | None,
        typer.Option(
            "--aps",
            help="Online: Poisson arrivals of this many agents/s (otherwise offline: --agents "
            "started together).",
            show_default=False,
        ),
    ] = None,
    duration: Annotated[
        float | None,
        typer.Option(
            "--duration",
            help="Online: seconds of arrivals (default four lifetimes of the longest agent at "
            "light load).",
            show_default=False,
        ),
    ] = None,
    warmup: Annotated[
        float | None,
        typer.Option(
            "--warmup",
            help="Online: seconds before turns are measured (default two such lifetimes).",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Random seed (same seed, same output).")] = 0,
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler",
            help=f"{', '.join(SIM_SCHEDULERS[:-1])} or {SIM_SCHEDULERS[-1]} (default: the mode's "
            "own: queue_aware, the paper's scheduler, for even, dualpath and oracle, "
            "round_robin for the others; least_loaded sends each choice to the least-loaded "
            "unit, without the paper's thresholds). --compare runs the analytical model with "
            "the same scheduler's imbalance model (queue_aware's for least_loaded).",
            show_default=False,
        ),
    ] = None,
    window: Annotated[
        float,
        typer.Option("--window", help="Seconds per window of the time series and of max/avg."),
    ] = 10.0,
    context_growth: Annotated[
        bool,
        typer.Option(
            "--context-growth",
            help="Grow each agent's context over its turns (turn k of n caches 2 x mean x "
            "(k + 1/2) / n tokens) instead of every turn being the profile's mean turn.",
        ),
    ] = False,
    compare: Annotated[
        bool,
        typer.Option(
            "--compare",
            help="Also run the analytical model (size's, with the matching scheduler) and print "
            "both with the error, like with like (offline the TTFT over the saturated span, "
            "10% to 50% of the turns done, and over the whole run).",
        ),
    ] = False,
    series_out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write the time series per window (.csv) or a chart (.svg).",
            show_default=False,
        ),
    ] = None,
    trace_out: Annotated[
        Path | None,
        typer.Option("--trace-out", help="Write every turn's record (.jsonl).", show_default=False),
    ] = None,
    seeds: Annotated[
        int | None,
        typer.Option(
            "--seeds",
            help="Run N seeds (--seed to --seed + N - 1) and give every metric as the mean "
            "with its 95% confidence interval across them (Student t). Default 1; with "
            f"--aps-search, {DEFAULT_PLAN_SEEDS} per simulated rate.",
            show_default=False,
        ),
    ] = None,
    aps_search: Annotated[
        bool,
        typer.Option(
            "--aps-search",
            help="Find the highest APS whose SLOs (means, or --slo-percentile) hold in the "
            "simulation, by bisection bracketed by the analytical APS with and without the "
            "headroom cap; the bracket widens where the simulation disagrees.",
        ),
    ] = False,
    tolerance: Annotated[
        float,
        typer.Option(
            "--tolerance",
            help="--aps-search stops when its bracket is at most this share of its high end.",
        ),
    ] = DEFAULT_TOLERANCE,
    workers: WorkersOpt = None,
    ray: RayOpt = None,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Simulate the cluster event by event (agents replaying turns, the paper's scheduler,
    round robin or least-loaded, bandwidth shared on every link): JCT, throughput, TTFT and
    TPOT percentiles, storage-read balance and the KV working set; on the paper's default
    (DeepSeek-V3.2, 2P4D, paper-64k, 2,048 agents offline) unless told otherwise."""
    m = mode_named(mode).name
    slo = spec.serving
    _check_plan_flags(
        aps, seeds, aps_search, tolerance, workers, ray, compare, series_out, trace_out
    )
    if aps_search:
        # The search sets the rate of every run; 1 agent/s until then.
        aps = 1.0
    cfg = SimConfig(
        mode=m,
        agents=None if aps is not None else spec.agents,
        aps=aps,
        duration_s=duration,
        warmup_s=warmup,
        seed=seed,
        scheduler=scheduler,  # type: ignore[arg-type]  # checked by SimConfig
        window_s=window,
        context_growth=context_growth,
    )
    if aps is not None and given_flags(spec, ("agents",)):
        # Online agents arrive at --aps: a number started together was ignored.
        raise PlanInputError(
            "is the offline run's agents started together; --aps runs online (agents arrive "
            "at that rate): give one",
            field="--agents",
        )
    if aps is None and (duration is not None or warmup is not None):
        raise PlanInputError(
            "--duration and --warmup are for online runs (--aps)", field="--duration"
        )
    _output(series_out, "--out", (".csv", ".svg"))
    _output(trace_out, "--trace-out", (".jsonl",))
    registry = load_registry(profiles, set_)
    sc = Scenario.from_spec(registry, spec)
    if aps_search or (seeds or 1) > 1:
        _plan(sc, cfg, slo, seeds, aps_search, tolerance, make_executor(workers, ray), as_json)
        return
    for path, flag in ((series_out, "--out"), (trace_out, "--trace-out")):
        if path is not None:
            refuse_input(path, sc, registry, flag)
    progress = _progress() if sys.stderr.isatty() else None
    # Both files are opened (a missing folder or a read-only place found) before the run; the
    # per-turn log streams to its file as turns finish (memory stays bounded); each is put in
    # place only when the run completes.
    log = AtomicWriter(trace_out, field="--trace-out") if trace_out is not None else None
    try:
        series = (
            AtomicWriter(series_out, field="--out", newline="") if series_out is not None else None
        )
    except BaseException:
        if log is not None:
            log.abort()
        raise
    writers = [w for w in (log, series) if w is not None]
    try:
        sink = None
        if log is not None:
            handle = log.handle

            def sink(rec: TurnRecord) -> None:
                handle.write(report.turn_line(rec))

        result = simulate(sc, cfg, progress, sink)
        analytical = _compare(sc, result, slo) if compare else None
        if series is not None and series_out is not None:
            if series_out.suffix.lower() == ".svg":
                series.handle.write(report.simulate_svg(sc, result))
            else:
                series.handle.writelines(report.series_csv_lines(result, sc.decode_nodes))
    except BaseException:
        for w in writers:
            w.abort()
        raise
    finally:
        if progress is not None:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
    for w in writers:
        w.commit()
    if as_json:
        print_json(report.simulate_payload(sc, result, slo, analytical))
    else:
        report.render_simulate(sc, result, stdout, slo, analytical)


def _check_plan_flags(
    aps: float | None,
    seeds: int | None,
    aps_search: bool,
    tolerance: float,
    workers: int | None,
    ray: str | None,
    compare: bool,
    series_out: Path | None,
    trace_out: Path | None,
) -> None:
    """--seeds and --aps-search against the flags of one run: a flag that would be ignored is
    an error."""
    if seeds is not None and not 1 <= seeds <= 1000:
        raise PlanInputError(f"expected 1 to 1,000 seeds, got {seeds}", field="--seeds")
    plan = aps_search or (seeds or 1) > 1
    if aps_search and aps is not None:
        raise PlanInputError("--aps-search chooses the rate; give one of them", field="--aps")
    if tolerance != DEFAULT_TOLERANCE and not aps_search:
        raise PlanInputError("is --aps-search's", field="--tolerance")
    if not plan:
        for flag, value in (("--workers", workers), ("--ray", ray)):
            if value is not None:
                raise PlanInputError(
                    "runs the simulations of --seeds N (N > 1) or --aps-search; one run runs here",
                    field=flag,
                )
        return
    for flag, given in (
        ("--compare", compare),
        ("--out", series_out is not None),
        ("--trace-out", trace_out is not None),
    ):
        if given:
            raise PlanInputError(
                f"is one run's; --seeds or --aps-search runs many (run one seed with {flag})",
                field=flag,
            )


def _plan(
    sc: Scenario,
    cfg: SimConfig,
    slo: ServingConfig,
    seeds: int | None,
    aps_search: bool,
    tolerance: float,
    executor: Executor,
    as_json: bool,
) -> None:
    """--seeds N or --aps-search: the simulations on ``executor``, a progress bar over them."""
    from dualpath_plan.reports import sim_plans as plans

    if aps_search:
        n = DEFAULT_PLAN_SEEDS if seeds is None else seeds
        with task_progress("simulations") as hook:
            found = search_aps(sc, cfg, slo, executor, n, tolerance, hook)
        if as_json:
            print_json(plans.aps_search_payload(sc, found, slo, cfg.seed))
        else:
            plans.render_aps_search(sc, found, stdout, slo, cfg.seed)
        return
    assert seeds is not None
    with task_progress("simulations") as hook:
        results = run_seeds(sc, cfg, seeds, executor, hook)
    if as_json:
        print_json(plans.seeds_payload(sc, results, slo))
    else:
        plans.render_seeds(sc, results, stdout, slo)


def _progress():  # type: ignore[no-untyped-def]
    def show(done: int, total: int) -> None:
        sys.stderr.write(f"\rsimulating: {done:,} of {total:,} turns done ")
        sys.stderr.flush()

    return show


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_cmd)
