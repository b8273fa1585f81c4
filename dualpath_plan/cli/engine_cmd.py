"""``dualpath-plan engine``: one engine at one shape, operator by operator."""

from __future__ import annotations

import math
from typing import Annotated

import typer

from dualpath_plan.cli.common import (
    JsonOpt,
    ProfilesOpt,
    SetOpt,
    load_registry,
    parse_token_counts,
    print_json,
    stdout,
)
from dualpath_plan.errors import PlanInputError
from dualpath_plan.outcomes.engine import EngineQuery, engine_at
from dualpath_plan.reports import engine as report
from dualpath_plan.scenario.spec import DEFAULT_SPEC

MAX_BATCH = 1_000_000


def _whole(value: int | None, flag: str, top: int) -> int | None:
    if value is not None and not 1 <= value <= top:
        raise PlanInputError(f"expected a whole number from 1 to {top:,}, got {value}", field=flag)
    return value


def _tokens(text: str | None, flag: str) -> float | None:
    if text is None:
        return None
    values = parse_token_counts(text, flag)
    if len(values) != 1:
        raise PlanInputError(f"expected one token count, got {text!r}", field=flag)
    return values[0]


def engine(
    phase: Annotated[
        str,
        typer.Option(
            "--phase",
            help="prefill (one forward pass of the batch) or decode (one step; its time is "
            "the TPOT).",
            show_default=False,
        ),
    ],
    context: Annotated[
        str,
        typer.Option(
            "--context",
            help="Tokens of each request's prompt, K = 1024: prefill reads its cached part "
            "and computes --new-tokens; decode attends it plus half the generated tokens.",
            show_default=False,
        ),
    ],
    batch: Annotated[
        int,
        typer.Option(
            "--batch",
            help="Requests per attention-DP rank (a replica runs batch x dp; AIConfigurator's "
            "batch).",
        ),
    ] = 1,
    new_tokens: Annotated[
        str | None,
        typer.Option(
            "--new-tokens",
            help="prefill: tokens computed per request (default the whole --context: no "
            "cache hit); decode: tokens generated per request, the step being their mean "
            "(default 1).",
            show_default=False,
        ),
    ] = None,
    model: Annotated[str, typer.Option("--model", help="Model profile id.")] = DEFAULT_SPEC.model,
    node: Annotated[str, typer.Option("--node", help="Node profile id.")] = "dgx-h200",
    gpu: Annotated[
        str | None,
        typer.Option("--gpu", help="GPU profile (default the node's).", show_default=False),
    ] = None,
    engine_id: Annotated[
        str | None,
        typer.Option(
            "--engine",
            help="Engine profile (a framework's measured per-operator curves; default the node's).",
            show_default=False,
        ),
    ] = None,
    tp: Annotated[
        int | None,
        typer.Option("--tp", help="Tensor-parallel GPUs per replica.", show_default=False),
    ] = None,
    dp: Annotated[
        int | None,
        typer.Option("--dp", help="Attention data-parallel ranks.", show_default=False),
    ] = None,
    ep: Annotated[
        int | None,
        typer.Option("--ep", help="Expert-parallel GPUs.", show_default=False),
    ] = None,
    speed_of_light: Annotated[
        bool,
        typer.Option(
            "--speed-of-light",
            help="Datasheet rates, no launch latency: a lower bound of every time.",
        ),
    ] = False,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """One engine at one shape, as AIConfigurator's `cli estimate` gives one worker: the
    pass time (prefill) or step time and TPOT (decode) of one model replica, operator by
    operator (GEMM, attention, MoE, communication, fixed), each with the bound it hits.
    The layout defaults to the one size runs: a MoE model data-parallel attention with
    expert parallelism over the node's GPUs, a dense model tensor parallel over them."""
    if phase not in ("prefill", "decode"):
        raise PlanInputError(f"expected prefill or decode, got {phase!r}", field="--phase")
    registry = load_registry(profiles, set_)
    query = EngineQuery(
        phase=phase,
        batch=_whole(batch, "--batch", MAX_BATCH) or 1,
        context_tokens=_tokens(context, "--context") or math.nan,
        new_tokens=_tokens(new_tokens, "--new-tokens"),
        tp=_whole(tp, "--tp", 1024),
        dp=_whole(dp, "--dp", 1024),
        ep=_whole(ep, "--ep", 1024),
        speed_of_light=speed_of_light,
    )
    result = engine_at(registry, model, node, gpu, engine_id, query)
    if as_json:
        print_json(report.engine_json(result))
    else:
        report.render_engine(result, stdout)


def register(app: typer.Typer) -> None:
    app.command("engine")(engine)
