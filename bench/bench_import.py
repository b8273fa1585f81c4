"""Time and peak memory of ``workload import`` on a generated Mooncake-like trace.

    python bench/bench_import.py [--rows 1000000] [--runs 1]

Writes a JSON Lines trace of ROWS requests to a temporary folder (prefix blocks of 512 tokens
shared through 20,000 conversations of up to 120 blocks, plus 1 to 3 fresh blocks per request,
so the seen set grows as a real trace's does; about 300 bytes a request), then runs
``dualpath-plan workload import FILE --format mooncake --out DIR`` in a child process and
prints its wall time and peak RSS. The target (issue 14): 10^6 rows in under 20 s, with
memory bounded by the seen blocks, not by the file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_trace(path: Path, rows: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    fresh = 20_000 * 120
    with path.open("w") as f:
        t = 0.0
        for _ in range(rows):
            conv = rng.randrange(20_000)
            shared = rng.randrange(1, 120)
            new = rng.randrange(1, 4)
            ids = [conv * 120 + k for k in range(shared)] + list(range(fresh, fresh + new))
            fresh += new
            t += rng.expovariate(1 / 5.0)
            row = {
                "timestamp": int(t),
                "input_length": len(ids) * 512 - rng.randrange(512),
                "output_length": rng.randrange(1, 400),
                "hash_ids": ids,
            }
            f.write(json.dumps(row, separators=(", ", ": ")) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trace = Path(tmp) / "trace.jsonl"
        t0 = time.perf_counter()
        write_trace(trace, args.rows)
        print(
            f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
            f"{platform.python_version()}"
        )
        print(
            f"trace: {args.rows:,} rows, {trace.stat().st_size / 1e6:,.0f} MB "
            f"(generated in {time.perf_counter() - t0:.1f} s)"
        )
        for run in range(args.runs):
            out = Path(tmp) / f"out{run}"
            cmd = [sys.executable, "-m", "dualpath_plan.cli.app"]
            code = (
                "import sys; from dualpath_plan.cli.app import main; sys.exit(main(sys.argv[1:]))"
            )
            cmd = [sys.executable, "-c", code, "workload", "import", str(trace)]
            cmd += ["--format", "mooncake", "--out", str(out), "--json"]
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            t0 = time.perf_counter()
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            wall = time.perf_counter() - t0
            peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            if done.returncode:
                sys.exit(f"import failed: {done.stderr.strip()}")
            summary = json.loads(done.stdout)
            print(
                f"import: {wall:.1f} s wall, peak RSS {max(peak, before) / 1024:,.0f} MB "
                f"(target: under 20 s), hit rate {summary['hit_rate']:.1%}, "
                f"{args.rows / wall:,.0f} rows/s"
            )


if __name__ == "__main__":
    main()
