"""Issue 15: what ``size`` imports. A command imports only its own modules; SciPy (the LP,
calibration), matplotlib (PNG charts) and numpy.ma (which np.unique pulls in) cost start-up
time that ``size`` does not need. bench/bench_cold.py measures the time itself."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("scipy", "matplotlib", "numpy.ma")
# Modules a plain ``size`` (one cluster, no rate, no search) does not need: the search
# (--target-aps, --deadline), the model at a rate (--aps, --aps-curve), recommend's outcomes
# and report (which the rate report's chart borrows from), the bottleneck-free range (paths,
# recommend), the LP's mixed clusters, shlex (reports that quote their command line), and
# what no analytical run needs (NOT_ANALYTICAL).
NOT_PLAIN_SIZE = (
    "dualpath_plan.outcomes.sizing",
    "dualpath_plan.outcomes.at_rate",
    "dualpath_plan.reports.at_rate",
    "dualpath_plan.outcomes.recommend",
    "dualpath_plan.reports.recommend",
    "dualpath_plan.solvers.bounds",
    "dualpath_plan.scenario.groups",
    "shlex",
)
# The simulator and the plans by simulation (--by simulation alone), typer's help formatting
# (help alone: 60 ms of a cold size) and the trace readers (a store of finite size on a trace).
NOT_ANALYTICAL = (
    "dualpath_plan.outcomes.simulation",
    "dualpath_plan.outcomes.sim_plans",
    "dualpath_plan.outcomes.executor",
    "dualpath_plan.reports.sim_plans",
    "dualpath_plan.physics.traces",
    "dualpath_plan.physics.hitcurve",
    "typer.rich_utils",
)

# Runs a command in a fresh interpreter and prints its exit code and every module it imported.
_RUN = """
import contextlib, io, json, sys
from dualpath_plan.cli.app import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _imported(*args: str) -> tuple[int, list[str]]:
    out = subprocess.run(
        [sys.executable, "-c", _RUN, *args], capture_output=True, text=True, check=True
    )
    found = json.loads(out.stdout)
    return found["code"], found["modules"]


def test_size_imports_no_heavy_module() -> None:
    for args in (["size"], ["size", "--json", "--target-aps", "0.5"]):
        code, modules = _imported(*args)
        assert code == 0
        heavy = [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]
        assert not heavy, f"{args} imported {heavy}"
        # Only the invoked command's module among the commands.
        assert [m for m in modules if m.endswith("_cmd")] == ["dualpath_plan.cli.size_cmd"]


def test_plain_size_imports_only_its_path() -> None:
    for args in (["size"], ["size", "--json"]):
        code, modules = _imported(*args)
        assert code == 0
        extra = sorted(set(NOT_PLAIN_SIZE + NOT_ANALYTICAL) & set(modules))
        assert not extra, f"{args} imported {extra}"


def test_analytical_runs_load_no_simulator_nor_help() -> None:
    for args in (["recommend", "--budget-nodes", "4"], ["size", "--target-aps", "0.5"]):
        code, modules = _imported(*args)
        assert code == 0
        extra = sorted(set(NOT_ANALYTICAL) & set(modules))
        assert not extra, f"{args} imported {extra}"
    # Help still goes through the stacked panels (cli/app.py routes typer's format_help).
    code, modules = _imported("size", "--help")
    assert code == 0 and "typer.rich_utils" in modules


# The console script's command (cli/program.py): main() with the collector paused while the
# modules load and the objects frozen at exit.
_PROGRAM = """
import gc, json, sys
sys.argv = ["dualpath-plan", *sys.argv[1:]]
from dualpath_plan.cli import program
quiet_import = gc.isenabled() and gc.get_freeze_count() == 0
code = program.command()
sys.stdout.flush()
state = {"code": code, "quiet_import": quiet_import, "enabled": gc.isenabled(),
         "frozen": gc.get_freeze_count()}
print(json.dumps(state), file=sys.stderr)
"""
_MAIN = "import sys\nfrom dualpath_plan.cli.app import main\nsys.exit(main(sys.argv[1:]))"


def test_program_is_main_with_the_collector_paused_at_start_up() -> None:
    for args in (["size", "--json"], ["size", "-P", "1", "-D", "1"]):
        prog = subprocess.run(
            [sys.executable, "-c", _PROGRAM, *args], capture_output=True, text=True, check=True
        )
        *errors, state = prog.stderr.splitlines()
        found = json.loads(state)
        # Importing the module changes nothing; running leaves the collector on, the objects
        # of the run frozen.
        assert found["quiet_import"] and found["enabled"] and found["frozen"] > 0
        plain = subprocess.run([sys.executable, "-c", _MAIN, *args], capture_output=True, text=True)
        assert (found["code"], prog.stdout, errors) == (
            plain.returncode,
            plain.stdout,
            plain.stderr.splitlines(),
        )


# The console script's entry point: the command, then the process ends at once where nothing
# is left to tear down; "after" prints only where something is (an exit handler, a thread).
_ENDING = """
import atexit, sys, threading
left, sys.argv = sys.argv[1], ["dualpath-plan", *sys.argv[2:]]
if left == "handler":
    atexit.register(lambda: print("handler", file=sys.stderr))
done = threading.Event()
if left == "thread":  # a thread that outlives the command
    threading.Thread(target=done.wait).start()
from dualpath_plan.cli.program import run
code = run()
print("after", code, file=sys.stderr)
done.set()
sys.exit(code)
"""


def test_the_program_ends_when_nothing_is_left_to_tear_down() -> None:
    plain = subprocess.run(
        [sys.executable, "-c", _MAIN, "size", "--json"], capture_output=True, text=True
    )
    for left in ("nothing", "handler", "thread"):
        for args in (["size", "--json"], ["size", "-P", "0"]):
            ran = subprocess.run(
                [sys.executable, "-c", _ENDING, left, *args], capture_output=True, text=True
            )
            code = 0 if args == ["size", "--json"] else 2
            assert ran.returncode == code, ran.stderr
            lines = ran.stderr.splitlines()
            # The report and the one-line error out in full either way.
            assert lines[0].startswith("error: ") if code else ran.stdout == plain.stdout
            tail = [line for line in lines if not line.startswith("error: ")]
            if left == "nothing":
                assert tail == []  # ended in run(): nothing after it ran
            else:
                assert tail[0] == f"after {code}"
                assert tail[1:] == (["handler"] if left == "handler" else [])


def test_python_m_runs_the_program() -> None:
    """``python -m dualpath_plan`` is the console script (it had no __main__: found in a
    trial), its exit codes included."""
    ok = subprocess.run(
        [sys.executable, "-m", "dualpath_plan", "size", "--json"], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["modes"]["dualpath"]["throughput_turns_per_s"] > 0
    bad = subprocess.run(
        [sys.executable, "-m", "dualpath_plan", "size", "-P", "0"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error: ")
