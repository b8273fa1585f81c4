"""Reference latencies from AIConfigurator (AIC) 0.12.0, backend sglang.

AIConfigurator is NVIDIA's Apache-2.0 LLM-serving performance model
(https://github.com/ai-dynamo/aiconfigurator); this script pins
aiconfigurator==0.12.0 (with aiconfigurator_core). It runs, in process and
point by point, the same code as ``aiconfigurator cli estimate
--estimate-mode static_ctx|static_gen``: the CLI's own argparse parser and
``aiconfigurator.cli.main.main``, with ``cli_estimate`` wrapped only to
capture the result object. The perf-database version is resolved once per
system with AIC's default (``get_latest_database_version``) and passed as
``--backend-version``; quantization is left to AIC's own inference.

Prefill = one static prefill pass (TTFT, ms); decode = TPOT (ms) at osl 2.
``batch`` is AIC's batch per attention-DP rank; ``concurrency`` = batch * dp.
Points that AIC refuses or flags as out of memory have an empty latency_ms
and a reason in ``note``. Per-op rows list AIC's per-op breakdown in pass order.

Run (from the repository root):
    /tmp/aicvenv/bin/python bench/aic_reference.py \\
        --out bench/aic_reference.csv --per-op-out bench/aic_reference_ops.csv
    /tmp/aicvenv/bin/python bench/aic_reference.py --held-out \\
        --out bench/aic_reference_heldout.csv --per-op-out /tmp/heldout_ops.csv
(about 27 min for 1856 points on 2 CPUs, ~1.2 points/s). Add ``--verify-cli`` to compare
a few rows of --out with the real ``aiconfigurator cli estimate`` afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import math
import multiprocessing
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

AIC_VERSION = "0.12.0"
BACKEND = "sglang"
SYSTEMS = ("h100_sxm", "h200_sxm", "b200_sxm")
ISLS = (4096, 8192, 16384, 32768)
PREFIX_POINTS = ((33150, 32721), (16384, 15360), (8192, 4096))
PREFILL = [(b, s, 0) for b in (1, 2, 4, 8, 16, 64) for s in ISLS]
PREFILL += [(b, s, p) for b in (1, 4) for s, p in PREFIX_POINTS]
DECODE = [(b, s, 0) for b in (1, 2, 4, 8, 16, 32, 64) for s in ISLS]
MODES = {"prefill": "static_ctx", "decode": "static_gen"}
KEY_COLS = ["model_hf", "system", "backend", "backend_version", "phase", "batch", "isl", "prefix"]
KEY_COLS += ["tp", "attention_dp", "moe_tp", "moe_ep"]
OUT_COLS = [*KEY_COLS, "gemm_quant", "moe_quant", "kv_quant", "fmha_quant", "latency_ms"]
OUT_COLS += ["concurrency", "memory_gb", "note"]
OP_COLS = [*KEY_COLS, "op_index", "op_name", "op_latency_ms"]


@dataclass(frozen=True)
class Layout:
    model: str
    tp: int
    dp: int = 1
    moe_tp: int | None = None
    moe_ep: int | None = None
    systems: tuple[str, ...] = SYSTEMS

    def flags(self) -> list[str]:
        out = ["--tp-size", str(self.tp), "--attention-dp-size", str(self.dp)]
        if self.moe_tp is not None and self.moe_ep is not None:
            out += ["--moe-tp-size", str(self.moe_tp), "--moe-ep-size", str(self.moe_ep)]
        return out


LAYOUTS = (
    Layout("deepseek-ai/DeepSeek-V3", 1, 8, 1, 8),
    Layout("meta-llama/Meta-Llama-3.1-70B", 8),
    Layout("meta-llama/Meta-Llama-3.1-70B", 4),
    Layout("Qwen/Qwen3-235B-A22B", 8, 1, 1, 8),
    Layout("Qwen/Qwen3-235B-A22B", 4, 1, 4, 1),
    Layout("Qwen/Qwen3-32B", 2),
    Layout("Qwen/Qwen3-32B", 4),
    Layout("openai/gpt-oss-120b", 4, 1, 1, 4),
    Layout("meta-llama/Meta-Llama-3.1-8B", 1),
    Layout("Qwen/Qwen3-30B-A3B", 2, 1, 2, 1),
    Layout("moonshotai/Kimi-K2-Instruct", 1, 8, 1, 8, ("h200_sxm", "b200_sxm")),
)


# Held out from the fit's checks (bench/bench_engine.py --reference
# bench/aic_reference_heldout.csv): layouts the table above does not run, on fewer points.
HELD_OUT_LAYOUTS = (
    Layout("Qwen/Qwen3-235B-A22B", 8, 1, 8, 1),
    Layout("Qwen/Qwen3-235B-A22B", 4, 1, 1, 4),
    Layout("openai/gpt-oss-120b", 8, 1, 1, 8),
    Layout("openai/gpt-oss-120b", 2, 1, 1, 2),
    Layout("deepseek-ai/DeepSeek-V3", 8, 1, 1, 8),
    Layout("Qwen/Qwen3-30B-A3B", 4, 1, 4, 1),
    Layout("Qwen/Qwen3-30B-A3B", 1, 1, 1, 1),
    Layout("Qwen/Qwen3-32B", 8),
    Layout("Qwen/Qwen3-32B", 1),
    Layout("meta-llama/Meta-Llama-3.1-8B", 2),
)
HELD_OUT_PREFILL = [(b, s, 0) for b in (1, 4) for s in (4096, 16384)] + [(1, 33150, 32721)]
HELD_OUT_DECODE = [(b, s, 0) for b in (1, 8, 32) for s in (4096, 16384)]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def fmt(value: Any) -> str:
    """Fixed text form: None -> empty, floats with 6 significant digits."""
    return "" if value is None else f"{value:.6g}" if isinstance(value, float) else str(value)


def model_arg(model: str) -> str:
    """HF id if AIC ships it as a default model, else a local dir with AIC's bundled config.

    (Kimi-K2-Instruct's config.json is bundled in aiconfigurator_core but the id is not in
    DefaultHFModels, so the CLI would try to download it from Hugging Face.)
    """
    from aiconfigurator_core.sdk.common import DefaultHFModels
    from aiconfigurator_core.sdk.utils import _get_model_config_path

    if model in DefaultHFModels:
        return model
    name = model.replace("/", "--")
    target = Path(tempfile.gettempdir()) / "aic_reference_configs" / name
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(
        Path(str(_get_model_config_path())) / f"{name}_config.json", target / "config.json"
    )
    return str(target)


def cli_argv(
    lay: Layout, model: str, system: str, phase: str, point: tuple[int, int, int]
) -> list[str]:
    """Arguments of `aiconfigurator cli estimate` for one point (without the `cli` word)."""
    batch, isl, prefix = point
    argv = ["estimate", "--model-path", model, "--system", system, "--backend", BACKEND]
    argv += ["--estimate-mode", MODES[phase], "--batch-size", str(batch), "--isl", str(isl)]
    return [*argv, "--osl", "2", "--prefix", str(prefix), *lay.flags()]


Points = list[tuple[int, int, int]]


def run_task(
    task: tuple[Layout, str, str, Points, Points],
) -> tuple[list[list[Any]], list[list[Any]]]:
    """All points of one (layout, system) through the CLI's parser and main()."""
    import aiconfigurator.cli.api as api
    from aiconfigurator.cli.main import configure_parser
    from aiconfigurator.cli.main import main as cli_main

    lay, system, version, prefill, decode = task
    captured: list[Any] = []
    original = api.cli_estimate

    def capture(**kwargs: Any) -> Any:
        captured.append(original(**kwargs))
        return captured[-1]

    api.cli_estimate = capture  # _run_estimate_mode imports it from the module at call time
    parser = argparse.ArgumentParser()
    configure_parser(parser)
    rows: list[list[Any]] = []
    ops: list[list[Any]] = []
    model = model_arg(lay.model)
    for phase, points in (("prefill", prefill), ("decode", decode)):
        for point in points:
            argv = cli_argv(lay, model, system, phase, point)
            argv += ["--backend-version", version, "--log-level", "ERROR"]
            captured.clear()
            sink, note = io.StringIO(), ""
            try:
                with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                    cli_main(parser.parse_args(argv))
            except (SystemExit, Exception) as exc:  # AIC refusals surface as SystemExit
                text = str(exc) if not str(exc).isdigit() else sink.getvalue().strip()
                note = "refused: " + " ".join(text.split()[-60:])
            key = [lay.model, system, BACKEND, version, phase, *point]
            if note or not captured:
                layout = [lay.tp, lay.dp, lay.moe_tp, lay.moe_ep]
                rows.append([*key, *layout, *[None] * 7, note or "refused: no result"])
                continue
            res = captured[-1]
            raw, summary = res.raw, res.summary
            key += [raw["tp"], raw["dp"], raw.get("moe_tp"), raw.get("moe_ep")]
            latency = float(res.ttft if phase == "prefill" else res.tpot)
            memory = float(raw["memory"])
            if summary.check_oom():
                cap = (summary.get_mem_capacity_bytes() or 0) / 2**30
                note, latency = f"oom: needs {memory:.1f} GB of {cap:.1f} GB", None
            quant = [raw["gemm"], raw["moe"], raw["kvcache"], raw["fmha"]]
            rows.append([*key, *quant, latency, int(raw["concurrency"]), memory, note])
            if note:
                continue
            per_op = summary.get_context_latency_dict() if phase == "prefill" else None
            per_op = per_op if per_op is not None else summary.get_generation_latency_dict()
            ops += [[*key, i, name, float(v)] for i, (name, v) in enumerate(per_op.items())]
    return rows, ops


def sort_key(row: list[Any]) -> tuple[Any, ...]:
    """model, system, backend, version, phase, layout, then batch, isl, prefix, rest."""
    order = [0, 1, 2, 3, 4, 8, 9, 10, 11, 5, 6, 7, *range(12, len(row))]
    return tuple((0, "") if row[i] is None else (1, row[i]) for i in order)


def write_csv(path: str, header: list[str], rows: list[list[Any]]) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows([[fmt(v) for v in row] for row in sorted(rows, key=sort_key)])


def verify_cli(path: str) -> None:
    """Re-run a few rows of `path` through the real `aiconfigurator cli estimate` (3 decimals)."""
    exe = str(Path(sys.executable).with_name("aiconfigurator"))
    checks = [
        ("deepseek-ai/DeepSeek-V3", 1, "h200_sxm", "decode", (16, 32768, 0)),
        ("deepseek-ai/DeepSeek-V3", 1, "h200_sxm", "prefill", (1, 4096, 0)),
        ("meta-llama/Meta-Llama-3.1-70B", 8, "b200_sxm", "decode", (64, 8192, 0)),
        ("Qwen/Qwen3-32B", 2, "h200_sxm", "prefill", (4, 33150, 32721)),
        ("Qwen/Qwen3-235B-A22B", 8, "h100_sxm", "prefill", (4, 16384, 0)),
        ("openai/gpt-oss-120b", 4, "h100_sxm", "decode", (32, 4096, 0)),
    ]
    with open(path) as handle:
        rows = list(csv.DictReader(handle))
    for model, tp, system, phase, point in checks:
        want = {"model_hf": model, "tp": str(tp), "system": system, "phase": phase}
        want |= dict(zip(("batch", "isl", "prefix"), map(str, point), strict=True))
        row = next(r for r in rows if all(r[k] == v for k, v in want.items()))
        lay = next(lay for lay in LAYOUTS if lay.model == model and str(lay.tp) == row["tp"])
        cmd = [exe, "cli", *cli_argv(lay, model, system, phase, point)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        label = "TTFT:" if phase == "prefill" else "TPOT:"
        cli_ms = next(ln.split()[1] for ln in out.splitlines() if ln.strip().startswith(label))
        ours = row["latency_ms"] or "nan"
        same = math.isclose(float(cli_ms), float(ours), rel_tol=1e-5, abs_tol=1e-3)
        verdict = "OK" if same else "MISMATCH"
        log(f"verify {model} {system} {phase} {point}: cli={cli_ms} csv={ours} {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench/aic_reference.csv")
    parser.add_argument("--per-op-out", default="bench/aic_reference_ops.csv")
    parser.add_argument("--jobs", type=int, default=max(1, multiprocessing.cpu_count()))
    parser.add_argument("--verify-cli", action="store_true")
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="the held-out layouts and points (write them to bench/aic_reference_heldout.csv)",
    )
    args = parser.parse_args()
    layouts, prefill, decode = (
        (HELD_OUT_LAYOUTS, HELD_OUT_PREFILL, HELD_OUT_DECODE)
        if args.held_out
        else (LAYOUTS, PREFILL, DECODE)
    )

    import aiconfigurator
    from aiconfigurator_core.sdk.perf_database import get_latest_database_version

    assert aiconfigurator.__version__ == AIC_VERSION, aiconfigurator.__version__
    versions = {s: get_latest_database_version(system=s, backend=BACKEND) for s in SYSTEMS}
    log(f"aiconfigurator {AIC_VERSION}; default {BACKEND} database versions: {versions}")
    tasks = [(lay, s, str(versions[s]), prefill, decode) for lay in layouts for s in lay.systems]
    rows: list[list[Any]] = []
    ops: list[list[Any]] = []
    start = time.time()
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        for done, (task_rows, task_ops) in enumerate(pool.imap_unordered(run_task, tasks), 1):
            rows += task_rows
            ops += task_ops
            first, rate = task_rows[0], len(rows) / (time.time() - start)
            log(f"[{done}/{len(tasks)}] {first[0]} {first[1]} tp{first[8]}: {rate:.2f} points/s")
    write_csv(args.out, OUT_COLS, rows)
    write_csv(args.per_op_out, OP_COLS, ops)
    counts = Counter((r[0], r[1], r[4], f"tp{r[8]}", r[-1].split(":")[0] or "ok") for r in rows)
    for key in sorted(counts):
        log(f"rows {' '.join(key)} {counts[key]}")
    for quant in sorted({(r[0], r[4], *map(str, r[12:16])) for r in rows if r[12] is not None}):
        log("quant gemm/moe/kv/fmha " + " ".join(quant))
    if args.verify_cli:
        verify_cli(args.out)


if __name__ == "__main__":
    main()
