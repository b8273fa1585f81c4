"""The operator model against AIConfigurator's own estimates (issue 29's accuracy table).

bench/aic_reference.csv holds AIConfigurator 0.12.0's estimates (``cli estimate``: the static
prefill pass, and the TPOT at a batch), SGLang 0.5.14 kernels, for models x GPUs x layouts x
batches x contexts; bench/aic_reference.py regenerates it (it needs the ``fit`` extra). This
script times every row with the operator model (dualpath_plan/physics/operators.py) and the
stock engine profile of its GPU, and prints the relative error, ours / theirs - 1: median
and worst |error| per phase, and per model, GPU and layout.

    python bench/bench_engine.py                 # the table
    python bench/bench_engine.py --markdown      # the table as the README shows it
    python bench/bench_engine.py --rows errors.csv   # every row with its error
    python bench/bench_engine.py --no-shape-table    # MoE at the smooth curves alone
    python bench/bench_engine.py --reference bench/aic_reference_heldout.csv  # held out

The first table is every row; the second the grid issue 29 measures against (DeepSeek-V3,
Llama-3.1-70B, Qwen3-235B-A22B and gpt-oss-120b, Qwen3-32B on H100, H200 and B200).
``--no-shape-table`` drops the MoE curves' per-shape factors: what a model whose expert
shapes were never measured gets.
"""

from __future__ import annotations

import argparse
import csv
from collections import defaultdict
from pathlib import Path

import numpy as np

from dualpath_plan.physics.operators import Layout, time_pass
from dualpath_plan.profiles.registry import Registry

HERE = Path(__file__).parent
# AIConfigurator system -> the stock engine profile fitted on it.
ENGINES = {
    "h100_sxm": "h100-sglang-0.5.14",
    "h200_sxm": "h200-sglang-0.5.14",
    "b200_sxm": "b200-sglang-0.5.14",
    "b300_sxm": "b300-sglang-0.5.14",
}


# Issue 29's grid: four models (an MoE such as Qwen3-235B-A22B or gpt-oss-120b, both here)
# on three GPUs.
ISSUE_GRID_MODELS = frozenset(
    {
        "deepseek-ai/DeepSeek-V3",
        "meta-llama/Meta-Llama-3.1-70B",
        "Qwen/Qwen3-235B-A22B",
        "openai/gpt-oss-120b",
        "Qwen/Qwen3-32B",
    }
)
ISSUE_GRID_SYSTEMS = frozenset({"h100_sxm", "h200_sxm", "b200_sxm"})


def in_issue_grid(row: dict[str, str]) -> bool:
    return row["model_hf"] in ISSUE_GRID_MODELS and row["system"] in ISSUE_GRID_SYSTEMS


def without_shape_table(registry: Registry) -> Registry:
    """The registry with every engine's MoE curves stripped of their per-shape factors."""
    for engine_id in ENGINES.values():
        engine = registry.engine(engine_id)
        curves = {
            name: getattr(engine, name).model_copy(update={"shapes": ()})
            for name in ("moe_bf16", "moe_fp8", "moe_fp4")
            if getattr(engine, name) is not None
        }
        registry.profiles["engine"][engine_id] = engine.model_copy(update=curves)
    return registry


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def ours_s(registry: Registry, row: dict[str, str]) -> float:
    model = registry.model_by_hf_name(row["model_hf"])
    if model is None:
        raise SystemExit(f"no model profile lists {row['model_hf']!r} in hf_names")
    engine = registry.engine(ENGINES[row["system"]])
    gpu = registry.gpu(engine.gpu)
    tp, dp = int(row["tp"]), int(row["attention_dp"])
    layout = Layout(tp=tp, dp=dp, ep=int(row["moe_ep"] or 1))  # dense: no experts
    batch, isl, prefix = float(row["batch"]), float(row["isl"]), float(row["prefix"] or 0)
    if row["phase"] == "prefill":
        timing = time_pass(
            model, gpu, engine, layout, batch=batch, context=isl, new_tokens=isl - prefix
        )
    else:  # AIConfigurator's TPOT at isl: the step over a context of isl
        timing = time_pass(model, gpu, engine, layout, batch=batch, context=isl, new_tokens=1.0)
    return float(timing.time_s)


def load_reference(path: Path) -> list[dict[str, str]]:
    """The reference rows with a latency (rows AIConfigurator marks out of memory have none)."""
    return [r for r in rows(path) if r["latency_ms"]]


def errors_of(
    table: list[dict[str, str]], registry: Registry
) -> tuple[dict[str, list[float]], list[dict[str, str]]]:
    """ours / theirs - 1 per row, grouped by phase, and every row with its error."""
    errors: dict[str, list[float]] = defaultdict(list)
    out_rows = []
    for row in table:
        theirs = float(row["latency_ms"]) / 1e3
        ours = ours_s(registry, row)
        err = ours / theirs - 1.0
        errors[row["phase"]].append(err)
        out_rows.append({**row, "ours_ms": f"{ours * 1e3:.6g}", "error": f"{err:.4f}"})
    return errors, out_rows


def summarize(
    table: list[dict[str, str]], registry: Registry, grid_only: bool = False
) -> dict[str, tuple[float, float]]:
    """(median, worst) |error| per phase (over issue 29's grid alone with ``grid_only``)."""
    errors, _ = errors_of([r for r in table if in_issue_grid(r) or not grid_only], registry)
    return {
        phase: (float(np.median(np.abs(v))), float(np.max(np.abs(v))))
        for phase, v in errors.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, default=HERE / "aic_reference.csv")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--rows", type=Path, help="write every row with its error here")
    parser.add_argument("--no-shape-table", action="store_true")
    args = parser.parse_args()
    registry = Registry.load()
    if args.no_shape_table:
        registry = without_shape_table(registry)
    errors, out_rows = errors_of(load_reference(args.reference), registry)
    grid: dict[str, list[float]] = defaultdict(list)
    for row in out_rows:
        if in_issue_grid(row):
            grid[row["phase"]].append(float(row["error"]))
    groups: dict[tuple[str, str, str, str], list[float]] = defaultdict(list)
    for row in out_rows:
        layout = f"tp{row['tp']} dp{row['attention_dp']} ep{row['moe_ep'] or 1}"
        groups[(row["phase"], row["model_hf"], row["system"], layout)].append(float(row["error"]))
    if args.rows:
        with args.rows.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(out_rows[0]))
            w.writeheader()
            w.writerows(out_rows)

    def stats(v: list[float]) -> tuple[int, float, float, float]:
        a = np.abs(np.asarray(v))
        return len(v), float(np.median(a)), float(np.percentile(a, 90)), float(a.max())

    if args.markdown:
        print("| rows | phase | points | median abs error | 90th pct | worst |")
        print("|---|---|---:|---:|---:|---:|")
        for label, table in (("all", errors), ("issue 29's grid", grid)):
            for phase, v in sorted(table.items()):
                n, med, p90, worst = stats(v)
                print(f"| {label} | {phase} | {n} | {med:.1%} | {p90:.1%} | {worst:.1%} |")
        print()
        print("| phase | model | GPU | layout | points | median | worst | mean signed |")
        print("|---|---|---|---|---:|---:|---:|---:|")
        for (phase, model, system, layout), v in sorted(groups.items()):
            n, med, _, worst = stats(v)
            print(
                f"| {phase} | {model} | {system} | {layout} | {n} | {med:.1%} | {worst:.1%} "
                f"| {np.mean(v):+.1%} |"
            )
        return
    for label, table in (("all", errors), ("grid", grid)):
        for phase, v in sorted(table.items()):
            n, med, p90, worst = stats(v)
            print(
                f"{label:4s} {phase:8s} {n:5d} points: median |error| {med:6.1%}, "
                f"p90 {p90:6.1%}, worst {worst:6.1%}"
            )
    print()
    for (phase, model, system, layout), v in sorted(groups.items()):
        n, med, _, worst = stats(v)
        print(
            f"{phase:8s} {model:32s} {system:9s} {layout:14s} {n:4d}  median {med:6.1%}  "
            f"worst {worst:6.1%}  mean {np.mean(v):+6.1%}"
        )


if __name__ == "__main__":
    main()
