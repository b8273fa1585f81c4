"""Benchmark: `dualpath-plan size` cold against importing its four big dependencies cold.

    python bench/bench_cold.py [--runs 15] [--exe PATH]

Each run starts a fresh interpreter: the `dualpath-plan size` console script (output to a pipe,
as in a shell pipeline) and then `python -c "import numpy, pydantic, typer, rich"` with the same
interpreter, alternating, so that both see the same machine load. Prints each one's median,
best and worst wall time and the ratio of the medians (issue 15: at most 1.25).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

REFERENCE = "import numpy, pydantic, typer, rich"


def wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument(
        "--exe",
        default=os.path.join(os.path.dirname(sys.executable), "dualpath-plan"),
        help="The dualpath-plan console script (default: beside this interpreter).",
    )
    args = parser.parse_args()
    size_cmd = [args.exe, "size"]
    ref_cmd = [sys.executable, "-c", REFERENCE]
    wall(size_cmd), wall(ref_cmd)  # warm the file cache: "cold" is a fresh process
    size, ref = [], []
    for _ in range(args.runs):
        size.append(wall(size_cmd))
        ref.append(wall(ref_cmd))
    import numpy

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, NumPy {numpy.__version__}"
    )
    for name, times in (("`dualpath-plan size`", size), (f'`python -c "{REFERENCE}"`', ref)):
        print(
            f"{name} cold wall time: median {statistics.median(times):.3f} s, "
            f"best {min(times):.3f} s, worst {max(times):.3f} s of {len(times)}"
        )
    print(f"ratio of the medians: {statistics.median(size) / statistics.median(ref):.2f}")


if __name__ == "__main__":
    main()
