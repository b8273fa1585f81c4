"""Benchmark: `dualpath-plan size` cold against importing its four big dependencies cold;
`size` on a stock node and `engine` cold beside them.

    python bench/bench_cold.py [--runs 15] [--exe PATH]

Each run starts a fresh interpreter: the `dualpath-plan size` console script (output to a pipe,
as in a shell pipeline), then `python -c "import numpy, pydantic, typer, rich"` (the reference)
then the stack's floor and the stack's minimum, with the same interpreter, in turn, so that all
four see the same machine load. Prints each one's median, best and worst wall time and the
ratios of the medians (issue 15: size over the reference at most 1.25).

The floor is what any `size` built on the design's stack pays before its own work: the
reference's imports, the profile schemas defined (``dualpath_plan.profiles.schemas``: pydantic
models) and the validators of the five kinds `size` reads built (pydantic builds one when its
kind is first validated: ``defer_build``; the reference's ``import pydantic`` loads none of
that, pydantic importing its model machinery on first use) and one rich table printed.
``size`` over the floor is what the tool itself costs: its other modules, the profiles read
and validated, the model, the intervals and the report.

The minimum is less than any program on this stack that validates its input with pydantic and
prints a rich table can pay: the reference's imports, one pydantic model of one int field
defined and used once, and the same table. It has nothing of ``dualpath_plan``: where the
minimum alone is above 1.25 of the reference, no ``size`` on the design's stack reaches 1.25.
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
TABLE = (
    "from rich.console import Console\n"
    "from rich.table import Table\n"
    "table = Table('mode', 'JCT (s)')\n"
    "table.add_row('dualpath', '1.0')\n"
    "Console().print(table)\n"
)
FLOOR = (
    "import numpy, pydantic, typer, rich\n"
    "from dualpath_plan.profiles import schemas\n"
    "for kind in ('gpu', 'node', 'storage', 'model', 'workload'):\n"
    "    schemas.schema_for(kind).model_rebuild()\n" + TABLE
)
MINIMUM = (
    "import numpy, pydantic, typer, rich\n"
    "class One(pydantic.BaseModel):\n"
    "    x: int\n"
    "One(x=1)\n" + TABLE
)


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
    floor_cmd = [sys.executable, "-c", FLOOR]
    minimum_cmd = [sys.executable, "-c", MINIMUM]
    # A stock node times its passes with its engine profile (the operator model); `engine`
    # answers one shape (issue 29: at most 0.5 s cold).
    stock_cmd = [args.exe, "size", "--node", "dgx-h200"]
    engine_cmd = [
        args.exe, "engine", "--model", "qwen3-235b-a22b", "--node", "dgx-h200",
        "--phase", "decode", "--batch", "16", "--context", "8192",
    ]  # fmt: skip
    commands = (size_cmd, ref_cmd, floor_cmd, minimum_cmd, stock_cmd, engine_cmd)
    # The package's bytecode written first, as `pip install .` writes it: an editable install
    # run with PYTHONDONTWRITEBYTECODE set compiles every module from source at each start
    # (about 0.1 s of a cold size), which no installed copy does.
    import compileall

    import dualpath_plan

    compileall.compile_dir(os.path.dirname(dualpath_plan.__file__), quiet=1)
    for cmd in commands:  # warm the file cache
        wall(cmd)
    size, ref, floor, minimum, stock, engine = [], [], [], [], [], []
    for _ in range(args.runs):
        for cmd, times in zip(commands, (size, ref, floor, minimum, stock, engine), strict=True):
            times.append(wall(cmd))
    import numpy

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, NumPy {numpy.__version__}"
    )
    for name, times in (
        ("`dualpath-plan size`", size),
        (f'`python -c "{REFERENCE}"` (the reference)', ref),
        ("the floor (the reference, the profile schemas defined, one rich table)", floor),
        (
            "the minimum (the reference, a one-field pydantic model used once, one rich table)",
            minimum,
        ),
        ("`dualpath-plan size --node dgx-h200` (a stock node: the operator model)", stock),
        ("`dualpath-plan engine` (Qwen3-235B-A22B decode on dgx-h200)", engine),
    ):
        print(
            f"{name} cold wall time: median {statistics.median(times):.3f} s, "
            f"best {min(times):.3f} s, worst {max(times):.3f} s of {len(times)}"
        )
    s, r, f, m = (statistics.median(t) for t in (size, ref, floor, minimum))
    print(f"ratio of the medians, size over the reference: {s / r:.2f}")
    print(f"floor over the reference: {f / r:.2f}; size over the floor: {s / f:.2f}")
    print(f"minimum over the reference: {m / r:.2f}; size over the minimum: {s / m:.2f}")
    print(f"engine median {statistics.median(engine):.3f} s (issue 29: at most 0.5 s)")


if __name__ == "__main__":
    main()
