"""Blocks per second of the hit curve (``workload hitcurve``'s stack distances and histogram).

    python bench/bench_hitcurve.py [--blocks 10000000] [--fixture tests/data/traces/...jsonl]

Times :func:`dualpath_plan.physics.hitcurve.hit_curve` on the block accesses of the public
Mooncake trace (read once, not timed) and on a generated trace of BLOCKS accesses (requests of
1 to 120 blocks, each a shared prefix of one of 20,000 conversations plus 1 to 3 fresh blocks,
as bench_import.py writes), and in the same run a NumPy reference: one stable argsort of the
keys (the least any stack-distance method sorts), so the ratio shows how far the curve is from
the machine's sorting speed. The target (issue 32): at least 10^6 blocks/s. Reading the trace
is ``workload import``'s cost, timed by bench_import.py.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np

from dualpath_plan.physics.hitcurve import BlockCollector, BlockTrace, hit_curve
from dualpath_plan.physics.traces import ImportOptions, read_trace

FIXTURE = (
    Path(__file__).parent.parent / "tests" / "data" / "traces" / "mooncake_synthetic_trace.jsonl"
)


def generated(blocks: int, seed: int = 1) -> BlockTrace:
    rng = np.random.default_rng(seed)
    sizes = []
    total = 0
    while total < blocks:
        n = rng.integers(1, 200_000)
        shared = rng.integers(1, 120, n)
        new = rng.integers(1, 4, n)
        sizes.append((shared, new))
        total += int((shared + new).sum())
    shared = np.concatenate([s for s, _ in sizes])
    new = np.concatenate([n for _, n in sizes])
    conv = rng.integers(0, 20_000, shared.size)
    lengths = shared + new
    request = np.repeat(np.arange(shared.size), lengths)
    within = np.arange(request.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    is_shared = within < np.repeat(shared, lengths)
    keys = np.where(
        is_shared,
        np.repeat(conv, lengths) * 120 + within,
        20_000 * 120 + np.cumsum(~is_shared),
    )
    keep = slice(0, blocks)
    request = request[keep]
    return BlockTrace(
        keys=keys[keep].astype(np.int64),
        request=request.astype(np.int64),
        counted=np.ones(request.size, dtype=bool),
        tokens=np.full(request.size, 512, dtype=np.int64),
        requests=int(request[-1]) + 1,
        input_tokens=512 * request.size,
        block_size=512,
    )


def fixture(path: Path) -> BlockTrace:
    read = read_trace([path], ImportOptions("mooncake"))
    col = BlockCollector(512)
    for turn in read.turns:
        col.add(turn)
    return col.trace()


def timed(name: str, trace: BlockTrace, runs: int) -> None:
    n = trace.keys.size
    best = ref = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        curve = hit_curve(trace)
        best = min(best, time.perf_counter() - t0)
        t0 = time.perf_counter()
        np.argsort(trace.keys, kind="stable")
        ref = min(ref, time.perf_counter() - t0)
    print(
        f"{name}: {n:,} blocks, {curve.distinct:,} distinct; hit curve {best:.3f} s = "
        f"{n / best:,.0f} blocks/s (target 1,000,000); NumPy stable argsort of the keys "
        f"{ref:.3f} s = {n / ref:,.0f} blocks/s; ratio {best / ref:.1f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, NumPy {np.__version__}"
    )
    timed(f"Mooncake {args.fixture.name}", fixture(args.fixture), args.runs)
    timed("generated", generated(args.blocks), args.runs)


if __name__ == "__main__":
    main()
