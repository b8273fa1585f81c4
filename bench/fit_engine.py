# ruff: noqa: E501
"""Fit an engine profile (hardware_profiles/engine/<gpu>-<framework>-<version>.toml): one serving
framework's per-operator efficiency curves on one GPU, from the kernel timings AIConfigurator
measured on that GPU (docs/model.md section 6b, docs/extending.md "A framework's calibration").

Data: AIConfigurator's per-operator performance database, measured on real GPUs and shipped in
the ``aiconfigurator-core`` wheel under
``aiconfigurator_core/systems/data/<system>/<op>/<framework>/<version>/*.parquet``
(https://github.com/ai-dynamo/aiconfigurator, Apache-2.0). Needs the development extra:

    pip install -e '.[fit]'          # aiconfigurator==0.12.0 and pyarrow
    python bench/fit_engine.py       # writes the four stock engine profiles
    python bench/fit_engine.py --system h200_sxm --gpu h200-sxm --out /tmp/engine

Each curve is the operator model's (dualpath_plan/physics/operators.py)

    t = launch_s + max(F / (P e_c s(x)), B / (W e_m)),   s(x) = x / (x + half_size)

fitted by robust least squares on log time (soft-L1, scale 0.1: a kernel table's outliers,
config switches of a Triton kernel, move it little) over the rows of the shapes a transformer
uses (GEMMs with both weight dimensions at least 256, 128-wide attention heads, balanced MoE
routing). F, B and x are computed exactly as the operator model computes them, so a curve
means the same thing where it is fitted and where it is used. The fit's median and 90th
percentile relative error over its rows are written beside each curve.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from dualpath_plan.physics.operators import (
    hottest_rank_load,
    moe_slot_bytes,
    moe_tiles,
    touched_experts,
)

FRAMEWORK, VERSION = "sglang", "0.5.14"
# AIConfigurator system -> our GPU profile id (hardware_profiles/gpu).
STOCK = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200", "b300_sxm": "b300"}
TILE = 128.0


@dataclass
class Curve:
    launch_s: float
    compute_efficiency: float
    memory_efficiency: float
    half_size: float
    half_tiles: float
    slot_traffic: float
    rows: int
    median_error: float
    p90_error: float
    source: str
    # MoE curves: (hidden, local width, local experts, experts, top-k, f_c, f_m, launch_s).
    shapes: tuple[tuple[float, ...], ...] = ()
    shapes_median_error: float = 0.0
    shapes_p90_error: float = 0.0


def _data_dir() -> Path:
    import aiconfigurator_core  # the development extra

    return Path(aiconfigurator_core.__file__).parent / "systems" / "data"


def _read(system: str, op: str, name: str) -> object:
    import pandas as pd

    path = _data_dir() / system / op / FRAMEWORK / VERSION / name
    return pd.read_parquet(
        path
    ), f"aiconfigurator-core 0.12.0 systems/data/{system}/{op}/{FRAMEWORK}/{VERSION}/{name}"


def _main_kernel(table: object) -> str:
    """The attention kernel a framework runs by default on a GPU: the one measured most
    (FlashAttention 3 on Hopper, TensorRT-LLM's MHA kernels on Blackwell)."""
    counts = table.kernel_source.value_counts()  # type: ignore[attr-defined]
    return str(counts.index[0])


def _fit(
    flops: np.ndarray,
    nbytes: np.ndarray,
    size: np.ndarray,
    seconds: np.ndarray,
    peak: float,
    hbm: float,
    source: str,
    tiles: np.ndarray | None = None,
    slot_bytes: np.ndarray | None = None,
    memory_efficiency: float | None = None,
) -> Curve:
    """Least squares on log time of launch + max(F / (P e_c s), B / (W e_m)) [+ g S / W]."""
    with_tiles = tiles is not None
    with_slots = slot_bytes is not None

    def model(p: np.ndarray) -> np.ndarray:
        launch, ec, em, half = np.exp(p[:4])
        s = size / (size + half)
        if with_tiles:
            assert tiles is not None
            s = s * tiles / (tiles + np.exp(p[4]))
        t = launch + np.maximum(flops / (peak * ec * s), nbytes / (hbm * em))
        if with_slots:
            assert slot_bytes is not None
            t = t + np.exp(p[-1]) * slot_bytes / hbm
        return t

    p0 = [math.log(5e-6), math.log(0.5), math.log(0.7), math.log(max(np.median(size), 1.0))]
    # Efficiencies at most 1 (a curve never beats the datasheet: INV-25's speed of light).
    upper = [math.log(1e-2), 0.0, 0.0, math.log(1e9)]
    lower = [math.log(1e-8), math.log(1e-4), math.log(1e-4), math.log(1e-6)]
    if memory_efficiency is not None:  # held, not fitted (a term the rows cannot identify)
        p0[2] = math.log(memory_efficiency)
        lower[2], upper[2] = p0[2] - 1e-9, p0[2] + 1e-9
    if with_tiles:
        p0.append(math.log(50.0))
        upper.append(math.log(1e6))
        lower.append(math.log(1e-3))
    if with_slots:
        p0.append(math.log(0.5))
        upper.append(math.log(5.0))
        lower.append(math.log(1e-6))
    # A few starts of the saturation size (the fit has local minima along it); the best kept.
    sol = None
    for scale in (1.0, 0.1, 10.0):
        start = list(p0)
        start[3] += math.log(scale)
        start = [
            min(max(v, lo + 1e-9), hi - 1e-9) for v, lo, hi in zip(start, lower, upper, strict=True)
        ]
        trial = least_squares(
            lambda p: np.log(model(p)) - np.log(seconds),
            start,
            bounds=(lower, upper),
            loss="soft_l1",
            f_scale=0.1,
        )
        if sol is None or trial.cost < sol.cost:
            sol = trial
    assert sol is not None
    err = np.abs(np.exp(sol.fun) - 1.0)
    x = np.exp(sol.x)
    return Curve(
        launch_s=float(x[0]),
        compute_efficiency=float(x[1]),
        memory_efficiency=float(x[2]),
        half_size=float(x[3]),
        half_tiles=float(x[4]) if with_tiles else 0.0,
        slot_traffic=float(x[-1]) if with_slots else 0.0,
        rows=len(seconds),
        median_error=float(np.median(err)),
        p90_error=float(np.percentile(err, 90)),
        source=source,
    )


def _fit_shapes(
    curve: Curve,
    keys: np.ndarray,
    flops: np.ndarray,
    nbytes: np.ndarray,
    size: np.ndarray,
    tiles: np.ndarray,
    slot_bytes: np.ndarray,
    seconds: np.ndarray,
    peak: float,
    hbm: float,
    min_rows: int = 8,
) -> Curve:
    """The curve's (compute, memory) efficiency factors and launch time per measured shape
    (``keys``: one row of hidden, local width, local experts, experts, top-k per timing), the
    curve's saturation and slot traffic held: the efficiency of a Triton kernel's tuned tile
    configuration, and the fixed cost of its routing kernels, are properties of its shape. A
    factor never lifts an efficiency above 1."""
    s = size / (size + curve.half_size) * tiles / (tiles + curve.half_tiles)
    compute = flops / (peak * curve.compute_efficiency * s)
    memory = nbytes / (hbm * curve.memory_efficiency)
    slots = curve.slot_traffic * slot_bytes / hbm
    # The caps as the profile stores the efficiencies (4 significant digits), a hair below.
    cap_c = math.floor(1e3 * 0.999 / float(f"{min(curve.compute_efficiency, 1.0):.4g}")) / 1e3
    cap_m = math.floor(1e3 * 0.999 / float(f"{min(curve.memory_efficiency, 1.0):.4g}")) / 1e3
    lower = [math.log(0.05), math.log(0.05), math.log(1e-7)]
    upper = [math.log(max(cap_c, 1.0)), math.log(max(cap_m, 1.0)), math.log(1e-3)]
    start = [0.0, 0.0, math.log(curve.launch_s)]
    shapes: list[tuple[float, ...]] = []
    # rows of shapes left at the curve
    err = np.abs((curve.launch_s + slots + np.maximum(compute, memory)) / seconds - 1.0)
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    for j, key in enumerate(unique):
        i = np.flatnonzero(inverse == j)
        if len(i) < min_rows:
            continue

        def resid(p: np.ndarray, i: np.ndarray = i) -> np.ndarray:
            t = (
                math.exp(p[2])
                + slots[i]
                + np.maximum(compute[i] / math.exp(p[0]), memory[i] / math.exp(p[1]))
            )
            return np.log(t) - np.log(seconds[i])

        sol = least_squares(resid, start, bounds=(lower, upper), loss="soft_l1", f_scale=0.1)
        fc, fm, launch = (float(f"{math.exp(v):.3g}") for v in sol.x)
        # Rounding never crosses the peak.
        fc, fm = min(fc, cap_c), min(fm, cap_m)
        err[i] = np.abs(np.exp(resid(np.log([fc, fm, launch]))) - 1.0)
        shapes.append((*(float(v) for v in key), fc, fm, launch))
    curve.shapes = tuple(shapes)
    curve.shapes_median_error = float(np.median(err))
    curve.shapes_p90_error = float(np.percentile(err, 90))
    return curve


def fit_system(system: str, peaks: dict[str, float], hbm: float, link: float) -> dict[str, Curve]:
    """Every curve of one GPU. ``peaks`` dense FLOP/s by dtype, ``hbm`` B/s, ``link`` the
    NVLink rate per direction in B/s."""
    out: dict[str, Curve] = {}
    col: Callable[[object, str], np.ndarray] = lambda d, c: d[c].to_numpy(np.float64)  # type: ignore[index]  # noqa: E731
    gemm, src = _read(system, "gemm", "gemm_perf.parquet")
    for ours, theirs, wbytes in (
        ("gemm_bf16", "bfloat16", 2.0),
        ("gemm_fp8", "fp8_block", 1.0),
        ("gemm_fp4", "nvfp4", 0.5),
    ):
        g = gemm[(gemm.gemm_dtype == theirs) & (gemm.n >= 256) & (gemm.k >= 256)]  # type: ignore[index,attr-defined,operator]
        if len(g) == 0:
            continue
        m, n, k = col(g, "m"), col(g, "n"), col(g, "k")
        act = 2.0 if wbytes == 2.0 else 1.0
        flops = 2.0 * m * n * k
        nbytes = n * k * wbytes + m * k * act + m * n * 2.0
        tiles = np.ceil(m / TILE) * np.ceil(n / TILE)
        peak = peaks[{"gemm_bf16": "bf16", "gemm_fp8": "fp8", "gemm_fp4": "fp4"}[ours]]
        out[ours] = _fit(
            flops, nbytes, m, col(g, "latency") / 1e3, peak, hbm, f"{src} ({theirs})", tiles
        )
    ctx, src = _read(system, "attention", "context_attention_perf.parquet")
    kernel = _main_kernel(ctx)
    a = ctx[  # type: ignore[index]
        (ctx.window_size == 0)  # type: ignore[attr-defined]
        & (ctx.kernel_source == kernel)  # type: ignore[attr-defined]
        & (ctx.attn_dtype == "bfloat16")  # type: ignore[attr-defined]
        & (ctx.head_dim == 128)  # type: ignore[attr-defined]
    ]
    b, s, h, kv, hd = (
        col(a, c) for c in ("batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim")
    )
    kv_el = np.where(a.kv_cache_dtype.to_numpy() == "fp8", 1.0, 2.0)  # type: ignore[attr-defined]
    pairs = s * (s + 1.0) / 2.0
    flops = 4.0 * h * hd * b * pairs
    nbytes = b * s * 2.0 * kv * hd * kv_el + b * s * h * hd * 2.0 * 2.0
    prefill_rows = (
        flops,
        nbytes,
        pairs / s,
        col(a, "latency") / 1e3,
        f"{src} ({kernel}, head_dim 128)",
    )
    gen, src = _read(system, "attention", "generation_attention_perf.parquet")
    # BF16 caches (the GQA models' serving default); an FP8 cache halves B at the same curve.
    kernel = _main_kernel(gen)
    a = gen[  # type: ignore[index]
        (gen.window_size == 0)  # type: ignore[attr-defined]
        & (gen.kernel_source == kernel)  # type: ignore[attr-defined]
        & (gen.head_dim == 128)  # type: ignore[attr-defined]
        & (gen.kv_cache_dtype == "bfloat16")  # type: ignore[attr-defined]
    ]
    b, c, h, kv, hd = (
        col(a, x) for x in ("batch_size", "step", "num_heads", "num_key_value_heads", "head_dim")
    )
    kv_el = np.where(a.kv_cache_dtype.to_numpy() == "fp8", 1.0, 2.0)  # type: ignore[attr-defined]
    out["attention_decode"] = _fit(
        4.0 * h * hd * b * c,
        b * c * 2.0 * kv * hd * kv_el,
        c,
        col(a, "latency") / 1e3,
        peaks["bf16"],
        hbm,
        f"{src} ({kernel}, head_dim 128, BF16 cache; step = context)",
    )
    # Saturation by keys per query token (pairs / new tokens): the length of the kernel's
    # inner loop, what a cached prefix lengthens while its query tile count stays small.
    # The prompt-only tables are compute-bound wherever their bytes matter, so they cannot
    # tell the memory efficiency: a prefill over a long cached prefix reads its KV as decode
    # does, at the decode kernel's.
    em_read = out["attention_decode"].memory_efficiency
    f_, b_, x_, t_, label = prefill_rows
    out["attention_prefill"] = _fit(
        f_,
        b_,
        x_,
        t_,
        peaks["bf16"],
        hbm,
        label + "; memory efficiency the decode kernel's",
        memory_efficiency=em_read,
    )
    # MLA at DeepSeek-V3's dims: latent 512, RoPE 64, nope 128, v 128 (the tables' shapes).
    r, rope, nope, v = 512.0, 64.0, 128.0, 128.0
    cm, src = _read(system, "mla", "context_mla_perf.parquet")
    b, s, h = (col(cm, x) for x in ("batch_size", "isl", "num_heads"))
    pairs = s * (s + 1.0) / 2.0
    out["mla_prefill"] = _fit(
        b * pairs * h * (2.0 * (nope + rope) + 2.0 * v),
        b * s * h * (nope + rope + v) * 2.0,
        pairs / s,
        col(cm, "latency") / 1e3,
        peaks["bf16"],
        hbm,
        f"{src} (num_heads per GPU; memory efficiency the GQA decode kernel's)",
        memory_efficiency=em_read,
    )
    # FP8 latent caches (DeepSeek's serving layout: FlashMLA's FP8 with scales).
    gm, src = _read(system, "mla", "generation_mla_perf.parquet")
    gm = gm[gm.kv_cache_dtype == "fp8"]  # type: ignore[index,attr-defined]
    b, c, h = (col(gm, x) for x in ("batch_size", "step", "num_heads"))
    out["mla_decode"] = _fit(
        b * c * h * (2.0 * (r + rope) + 2.0 * r),
        b * c * (r + rope),
        b * c,
        col(gm, "latency") / 1e3,
        peaks["bf16"],
        hbm,
        f"{src} (FP8 cache, num_heads per GPU; step = context)",
    )
    moe, src = _read(system, "moe", "moe_perf.parquet")
    # Each dtype on the kernel the framework runs on this GPU (the one measured most: Triton's
    # fused MoE on Hopper, FlashInfer's TensorRT-LLM MoE on Blackwell), under skewed routing:
    # the power-law token distributions the tables hold (alpha 1.01 and 1.2), the load a real
    # router gives; balanced routing is the ideal no serving run sees. MXFP4 experts are
    # weight-only (w4a16: BF16 activations and tensor cores), as SGLang serves gpt-oss.
    for ours, theirs, wbytes, dtype in (
        ("moe_bf16", "bfloat16", 2.0, "bf16"),
        ("moe_fp8", "fp8_block", 1.0, "fp8"),
        ("moe_fp4", "w4a16_mxfp4", 0.5, "bf16"),
    ):
        of_dtype = moe[moe.moe_dtype == theirs]  # type: ignore[index,attr-defined]
        if len(of_dtype) == 0:
            continue
        kernel = _main_kernel(of_dtype)
        m = of_dtype[
            (of_dtype.kernel_source == kernel)
            & (of_dtype.distribution.str.startswith("power_law"))
            & (of_dtype.hidden_size >= 2048)
            # The shapes serving layouts run: no expert sliced below 128 columns, at least
            # four experts a rank (a rank of one or two is a kernel's pathology, not a layout).
            & (of_dtype.inter_size / of_dtype.moe_tp_size >= 128)
            & (of_dtype.num_experts / of_dtype.moe_ep_size >= 4)
        ]
        t, hh, inter, k, e, mtp, mep = (
            col(m, x)
            for x in (
                "num_tokens",
                "hidden_size",
                "inter_size",
                "topk",
                "num_experts",
                "moe_tp_size",
                "moe_ep_size",
            )
        )
        local_inter = inter / mtp
        local_experts = e / mep
        alpha = m.distribution.str.removeprefix("power_law_").astype(float).to_numpy()  # type: ignore[attr-defined]
        hot = np.array(
            [
                hottest_rank_load(ti, ki, ei, epi, ai)
                for ti, ki, ei, epi, ai in zip(t, k, e, mep, alpha, strict=True)
            ]
        )
        per_expert = t * k / e * hot
        touched = np.array(
            [
                touched_experts(ti, ki, ei, epi, ai)
                for ti, ki, ei, epi, ai in zip(t, k, e, mep, alpha, strict=True)
            ]
        )
        flops = 2.0 * t * k / mep * hot * 3.0 * hh * local_inter
        nbytes = touched * 3.0 * hh * local_inter * wbytes
        tiles = moe_tiles(local_experts, per_expert, local_inter)
        slots = moe_slot_bytes(t, k, hh, local_inter)
        seconds = col(m, "latency") / 1e3
        curve = _fit(
            flops,
            nbytes,
            per_expert,
            seconds,
            peaks[dtype],
            hbm,
            f"{src} ({theirs}, {kernel}, power-law routing, hidden >= 2048, local width >= 128, local experts >= 4; per-shape factors fitted with the curve held)",
            tiles,
            slots,
        )
        keys = np.column_stack([hh, local_inter, local_experts, e, k])
        out[ours] = _fit_shapes(
            curve, keys, flops, nbytes, per_expert, tiles, slots, seconds, peaks[dtype], hbm
        )
    ar, src = _read(system, "comm", "custom_allreduce_perf.parquet")
    a = ar[ar.backend == "sglang_graph"]  # type: ignore[index,attr-defined]
    n, size = col(a, "num_gpus"), col(a, "message_size")
    moved = 2.0 * (n - 1.0) / n * size * 2.0  # message_size in BF16 elements
    out["allreduce"] = _fit(
        np.zeros_like(moved),
        moved,
        np.ones_like(moved),
        col(a, "latency") / 1e3,
        peaks["bf16"],
        link,
        f"{src} (CustomAllReduce, CUDA graph; message_size in BF16 elements)",
    )
    return out


def _toml(curve: Curve) -> str:
    keys = (
        ("launch_s", curve.launch_s),
        ("compute_efficiency", min(curve.compute_efficiency, 1.0)),
        ("memory_efficiency", min(curve.memory_efficiency, 1.0)),
        ("half_size", curve.half_size),
        ("half_tiles", curve.half_tiles),
        ("slot_traffic", curve.slot_traffic),
        ("fit_rows", curve.rows),
        ("fit_median_error", curve.median_error),
        ("fit_p90_error", curve.p90_error),
    )
    parts = [
        f"{k} = {v}" if isinstance(v, int) else f"{k} = {float(f'{v:.4g}')!r}" for k, v in keys
    ]
    return "{ " + ", ".join(parts) + " }"


def write_profile(system: str, gpu_id: str, out: Path) -> Path:
    import tomllib

    gpu = tomllib.loads(
        (Path(__file__).parent.parent / "hardware_profiles" / "gpu" / f"{gpu_id}.toml").read_text()
    )
    peaks = {
        "bf16": gpu["bf16_dense_tflops"] * 1e12,
        "fp8": gpu.get("fp8_dense_tflops", gpu["bf16_dense_tflops"]) * 1e12,
        "fp4": gpu.get("fp4_dense_tflops", gpu.get("fp8_dense_tflops", gpu["bf16_dense_tflops"]))
        * 1e12,
    }
    curves = fit_system(
        system, peaks, gpu["hbm_tbyte_s"] * 1e12, gpu["nvlink_bidir_gbyte_s"] / 2.0 * 1e9
    )
    gemm_bf16 = curves["gemm_bf16"]
    engine_id = f"{gpu_id.split('-')[0]}-{FRAMEWORK}-{VERSION}"
    lines = [
        'kind = "engine"',
        f'name = "SGLang {VERSION} on {gpu_id} (AIConfigurator 0.12.0 kernel data)"',
        f'gpu = "{gpu_id}"',
        f'framework = "{FRAMEWORK}"',
        f'framework_version = "{VERSION}"',
    ]
    for name, curve in curves.items():
        if not curve.shapes:
            lines.append(f"{name} = {_toml(curve)}")
    # No elementwise table: AIConfigurator's ElementWise op assumes 0.8 of HBM bandwidth
    # (sdk/models/*.py); its launch latency is taken as the BF16 GEMM's.
    lines.append(
        "elementwise = { launch_s = "
        f"{float(f'{gemm_bf16.launch_s:.4g}')!r}, compute_efficiency = 1.0, memory_efficiency = 0.8 }}"
    )
    for name, curve in curves.items():
        if curve.shapes:
            # A table of its own: the per-shape factors, one row a line.
            lines += ["", f"[{name}]"]
            lines += [line.strip(" {},") for line in _toml(curve).split(", ")]
            lines.append(
                f"# {len(curve.shapes)} shapes: hidden, local width, local experts, experts, "
                "top-k, compute factor, memory factor, launch_s; fit with them: median "
                f"{curve.shapes_median_error:.3f}, p90 {curve.shapes_p90_error:.3f}"
            )
            quotes = '"' * 3
            lines.append(f"shapes = {quotes}")
            lines += [" ".join(f"{v:g}" for v in row) for row in curve.shapes]
            lines.append(quotes)
    lines += ["", "[sources]"]
    for name, curve in curves.items():
        lines.append(f'{name} = ["{curve.source}; fitted by bench/fit_engine.py"]')
    lines.append(
        'elementwise = ["aiconfigurator 0.12.0 sdk/models/llama.py and deepseek.py (ElementWise ops at 0.8 of HBM bandwidth)"]'
    )
    lines += [
        "",
        "[unconfirmed]",
        'elementwise = "Not measured: AIConfigurator has no elementwise kernel table; its own 0.8 of HBM bandwidth is taken, with the BF16 GEMM curve\'s launch latency."',
    ]
    if "moe_fp4" not in curves:
        lines.append(
            'moe_fp4 = "No MXFP4 MoE data on this GPU: FP4 experts are timed at the FP8 curve."'
        )
    if "gemm_fp4" not in curves:
        lines.append(
            'gemm_fp4 = "No FP4 GEMM data on this GPU: FP4 GEMMs are timed at the FP8 curve."'
        )
    target = out / "engine" / f"{engine_id}.toml"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(lines) + "\n")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", help="one AIConfigurator system (default: the stock three)")
    parser.add_argument("--gpu", help="its GPU profile id")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent.parent / "hardware_profiles"
    )
    args = parser.parse_args()
    pairs = {args.system: args.gpu} if args.system else STOCK
    for system, gpu_id in pairs.items():
        print(write_profile(system, gpu_id, args.out))


if __name__ == "__main__":
    main()
