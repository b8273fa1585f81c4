"""Benchmark: the sweep end to end, against the same run's ``np.multiply`` element rate.

    python bench/bench_sweep.py [--runs 1] [--case NAME ...] [--workers N]

Each case runs ``dualpath-plan sweep``'s library entry (``run_sweep``: profiles loaded, grid
expanded, every point evaluated, the summary; with ``--out`` every point written) in a child
process of its own, so that its peak memory (``ru_maxrss``) is the sweep's alone. The
reference is ``np.multiply`` on two 10^5-element float64 arrays into a third, measured in this
process just before the cases (best of several repetitions): the ratio of a sweep's points/s to
that element rate says how a sweep does on a machine independently of the machine's speed. With
``profile`` and a file case, the file case's rate over ``profile``'s (also by the child's CPU
time, which other processes on the machine disturb less than the wall clock) and what writing
adds per point. A file case says which writer wrote it: the compiled one (``_rowtext``, where
the install built it) or NumPy's (``DUALPATH_PLAN_PURE_WRITER=1`` asks for it). ``--workers
N`` (N > 1) runs each case's chunks on a local process pool of N workers (``run_sweep``'s
``executor``, as ``sweep --workers N``; started before the clock, as the CLI starts it before
the sweep); the default, one, in the child itself.

Cases (the default spec: DeepSeek-V3.2, dualpath-hopper, paper-64k, dualpath mode):
- ``pda``: P=1:100, D=1:100, agents=1:400, 4 million points;
- ``profile``: P=1:100, D=1:100 and three profile fields (workload.append_tokens 10 values,
  node.snic_gbit_s 8, node.prefill_mfu 5), 4 million points;
- ``profile-csv``: the same with ``--out`` to a CSV file;
- ``profile-jsonl``: the same with ``--out`` to a JSON Lines file;
- ``big``: P=1:100, D=1:100, agents=1:10000, 10^8 points, for the peak memory.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

PROFILE_AXES = (
    "workload.append_tokens=128:4096:10log",
    "node.snic_gbit_s=100:800:8lin",
    "node.prefill_mfu=0.1:0.5:5lin",
)
CASES: dict[str, tuple[tuple[str, ...], str | None]] = {
    "pda": (("P=1:100", "D=1:100", "agents=1:400"), None),
    "profile": (("P=1:100", "D=1:100", *PROFILE_AXES), None),
    "profile-csv": (("P=1:100", "D=1:100", *PROFILE_AXES), ".csv"),
    "profile-jsonl": (("P=1:100", "D=1:100", *PROFILE_AXES), ".jsonl"),
    "big": (("P=1:100", "D=1:100", "agents=1:10000"), None),
}

CHILD = """
import json, resource, sys, time
from pathlib import Path
grid, out, workers = json.loads(sys.argv[1]), sys.argv[2] or None, int(sys.argv[3])
t = time.perf_counter()
from dualpath_plan.outcomes.executor import LocalPool
from dualpath_plan.outcomes.sweep import grid_size, parse_axis, run_sweep
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.reports.sweep import PointWriter
from dualpath_plan.reports.text_columns import rowtext
from dualpath_plan.scenario.spec import DEFAULT_SPEC
t_import = time.perf_counter() - t
executor = None
if workers > 1:
    executor = LocalPool(workers)
    executor.start()
t = time.perf_counter()
cpu = time.process_time()
axes = [parse_axis(g) for g in grid]
writer = PointWriter(Path(out), [a.name for a in axes if not a.is_vector]) if out else None
try:
    run_sweep(
        Registry.load(), DEFAULT_SPEC, axes, ("dualpath",), DEFAULT_SPEC.serving,
        on_chunk=writer.write if writer else None, executor=executor,
    )
finally:
    if writer:
        writer.close()
dt = time.perf_counter() - t
cpu = time.process_time() - cpu
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"points": grid_size(axes), "seconds": dt, "cpu_seconds": cpu, "rss_mb": rss,
                  "writer": "compiled" if rowtext is not None else "NumPy"}))
"""


def multiply_rate(n: int = 100_000, repeats: int = 2000) -> float:
    """Elements/s of np.multiply on two n-element float64 arrays into a third (best of 5)."""
    rng = np.random.default_rng(0)
    a, b, c = rng.random(n), rng.random(n), np.empty(n)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeats):
            np.multiply(a, b, out=c)
        best = min(best, time.perf_counter() - t0)
    return n * repeats / best


def run_case(name: str, workers: int = 1) -> dict[str, Any]:
    grid, suffix = CASES[name]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, f"points{suffix}") if suffix else ""
        res = subprocess.run(
            [sys.executable, "-c", CHILD, json.dumps(grid), out, str(workers)],
            check=True,
            capture_output=True,
            text=True,
        )
        result: dict[str, Any] = json.loads(res.stdout)
        if out:
            result["out_mb"] = os.path.getsize(out) / 1e6
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument(
        "--case", action="append", choices=list(CASES), help="default: every case but big"
    )
    parser.add_argument("--workers", type=int, default=1, help="the sweep's workers")
    args = parser.parse_args()
    names = args.case or [c for c in CASES if c != "big"]
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, NumPy {np.__version__}"
        + (f"; each sweep on {args.workers} workers" if args.workers > 1 else "")
    )
    for run in range(args.runs):
        ref = multiply_rate()
        print(f"run {run + 1}: np.multiply on 10^5 float64: {ref:,.3g} elements/s")
        rates: dict[str, float] = {}
        results: dict[str, dict[str, Any]] = {}
        for name in names:
            r = run_case(name, args.workers)
            rate = r["points"] / r["seconds"]
            rates[name] = rate
            results[name] = r
            extra = f", file {r['out_mb']:,.0f} MB, {r['writer']} writer" if "out_mb" in r else ""
            print(
                f"  {name}: {int(r['points']):,} points in {r['seconds']:.2f} s "
                f"(CPU {r['cpu_seconds']:.2f} s), "
                f"{rate:,.0f} points/s = 1/{ref / rate:,.0f} of np.multiply, "
                f"peak RSS {r['rss_mb']:,.0f} MB{extra}"
            )
        # The file's cost: what a point takes more with --out than without (wall clock), and
        # the same by CPU time (user and system), which other processes disturb less.
        for name in ("profile-csv", "profile-jsonl"):
            if name in rates and "profile" in rates:
                base, out = results["profile"], results[name]
                write_ns = (out["seconds"] - base["seconds"]) / out["points"] * 1e9
                cpu_ratio = base["cpu_seconds"] / out["cpu_seconds"]
                print(
                    f"  {name} / profile: {rates[name] / rates['profile']:.2f} "
                    f"(by CPU time {cpu_ratio:.2f}), writing {write_ns:,.0f} ns/point"
                )


if __name__ == "__main__":
    main()
