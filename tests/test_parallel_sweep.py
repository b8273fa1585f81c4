"""A sweep's chunks on workers (issue 33, deliverable 3; INV-110): the same summary, rows and
files as the sweep in one process, whatever runs them (a local process pool, a Ray instance),
in the grid's order; a task's summary merges into the whole one's as its chunks would add; the
tasks are counted as they are made; an interrupted parallel sweep leaves no file and no
worker."""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualpath_plan.outcomes import executor as ex
from dualpath_plan.outcomes.sweep import (
    SweepJob,
    SweepSummary,
    parse_axis,
    run_sweep,
    sweep_tasks,
)
from dualpath_plan.scenario.spec import DEFAULT_SPEC

# Profile axes and P/D axes whose small P holds no DeepSeek-V3.2 weights: infeasible points,
# their reasons, every binding set; a chunk of 150 points makes many tasks of few chunks.
GRID = (
    "P=1:6",
    "D=1:5",
    "agents=64,2048",
    "workload.append_tokens=128:4096:3log",
    "node.snic_gbit_s=100,400",
)


def _summary_fields(s: SweepSummary) -> str:
    return repr([(f.name, getattr(s, f.name)) for f in fields(s)])


def _same_rows(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys()
        for k in x:
            u, v = np.asarray(x[k]), np.asarray(y[k])
            assert u.dtype == v.dtype, k
            assert np.array_equal(u, v, equal_nan=u.dtype.kind == "f"), k


@pytest.mark.parametrize("objective", ["throughput_per_gpu", "jct_s"])
@pytest.mark.parametrize("write", [False, True])
def test_a_parallel_sweep_is_the_sweep_in_one_process(registry, write: bool, objective: str):
    axes = [parse_axis(g) for g in GRID]
    runs = []
    for executor in (None, ex.LocalPool(2)):
        rows: list[dict[str, Any]] = []
        done: list[int] = []
        summary = run_sweep(
            registry, DEFAULT_SPEC, axes, ("basic", "dualpath"), DEFAULT_SPEC.serving,
            objective=objective, chunk=150, top=3, executor=executor,
            on_chunk=rows.append if write else None, progress=done.append,
        )  # fmt: skip
        runs.append((summary, rows, sum(done)))
    (alone, rows_alone, done_alone), (pooled, rows_pooled, done_pooled) = runs
    assert _summary_fields(pooled) == _summary_fields(alone)
    assert alone.feasible < alone.points and alone.modes["dualpath"].infeasible_reason
    assert done_pooled == done_alone == 6 * 5 * 2 * 3 * 2
    _same_rows(rows_pooled, rows_alone)
    assert bool(rows_alone) == write


@pytest.mark.parametrize(
    ("solver", "aps", "modes"),
    [("closed", False, ("basic", "dualpath", "oracle")), ("closed", True, ("dualpath",)),
     ("lp", False, ("dualpath",))],
)  # fmt: skip
def test_combinations_solved_together_write_the_same_bytes(
    registry, monkeypatch: pytest.MonkeyPatch, solver: str, aps: bool, modes: tuple[str, ...]
) -> None:
    """A sweep's combinations of profile values solved as one stack (``_SweepState.prepare``,
    INV-56) give every row and the summary as each solved alone, bit for bit: the P x D grid,
    the pairs the online APS or the LP take, every mode; and the stack is used."""
    from dualpath_plan.outcomes import sweep

    axes = [parse_axis(g) for g in GRID]
    stacked: list[int] = []
    each = sweep.saturated_each

    def counted(scenarios, *args):
        stacked.append(len(scenarios))
        return each(scenarios, *args)

    monkeypatch.setattr(sweep, "saturated_each", counted)
    runs = []
    for points in (sweep.STACK_POINTS, 0):
        monkeypatch.setattr(sweep, "STACK_POINTS", points)
        rows: list[dict[str, Any]] = []
        summary = run_sweep(
            registry, DEFAULT_SPEC, axes, modes, DEFAULT_SPEC.serving, chunk=400, top=3,
            on_chunk=rows.append, solver=solver, aps=aps,
        )  # fmt: skip
        runs.append((summary, rows))
    assert stacked and min(stacked) >= 2  # the first run stacked, the second never
    assert _summary_fields(runs[0][0]) == _summary_fields(runs[1][0])
    _same_rows(runs[0][1], runs[1][1])


@pytest.mark.parametrize("chunk", [7, 60, 400])
def test_a_best_points_lazy_jct_is_its_rows(registry, chunk: int) -> None:
    """A sweep without rows computes a best point's offline JCT and drain alone
    (``_LazyColumn``: its cluster picked from the chunk's, on the grid of whole P rows or on a
    chunk's pairs), bit for bit what the whole chunk gives the same point when every row is
    written."""
    axes = [parse_axis(g) for g in GRID]
    modes = ("basic", "dualpath")
    kw = dict(chunk=chunk, top=6, objective="throughput_per_gpu")
    lazy = run_sweep(registry, DEFAULT_SPEC, axes, modes, DEFAULT_SPEC.serving, **kw)
    rows: list[dict[str, Any]] = []
    run_sweep(registry, DEFAULT_SPEC, axes, modes, DEFAULT_SPEC.serving, on_chunk=rows.append, **kw)
    written = {}
    for r in rows:
        mode = str(np.asarray(r["mode"])[()])
        for i, point in enumerate(np.asarray(r["point"]).tolist()):
            written[mode, point] = (r["jct_s"][i], r["drain_s"][i])
    checked = 0
    for mode, part in lazy.modes.items():
        for best in part.best:
            jct, drain = written[mode, int(best["point"])]
            assert np.float64(best["jct_s"]).tobytes() == np.float64(jct).tobytes()
            assert np.float64(best["drain_s"]).tobytes() == np.float64(drain).tobytes()
            checked += 1
    assert checked == 12


@settings(max_examples=25, deadline=None)
@given(cuts=st.lists(st.integers(1, 23), max_size=6, unique=True), top=st.integers(1, 4))
def test_merging_summaries_is_adding_their_chunks(registry, cuts: list[int], top: int) -> None:
    """The chunks of a sweep cut into runs anywhere: the runs' summaries merged in order are
    the summary of every chunk added in order."""
    axes = [parse_axis(g) for g in GRID]
    rows: list[dict[str, Any]] = []
    whole = run_sweep(
        registry, DEFAULT_SPEC, axes, ("basic", "dualpath"), DEFAULT_SPEC.serving,
        chunk=150, top=top, on_chunk=rows.append,
    )  # fmt: skip
    bounds = [0, *sorted(c for c in cuts if c < len(rows)), len(rows)]
    merged = SweepSummary(objective=whole.objective, top=top)
    for lo, hi in itertools.pairwise(bounds):
        part = SweepSummary(objective=whole.objective, top=top)
        for r in rows[lo:hi]:
            part.add(r)
        merged.merge(part)
    assert _summary_fields(merged) == _summary_fields(whole)


@settings(max_examples=80, deadline=None)
@given(
    p=st.integers(1, 40),
    d=st.integers(1, 40),
    a=st.integers(1, 30),
    combos=st.lists(st.integers(1, 6), max_size=3),
    chunk=st.integers(1, 5000),
)
def test_the_tasks_are_counted_as_they_are_made(
    p: int, d: int, a: int, combos: list[int], chunk: int
) -> None:
    axes = [parse_axis(f"P=1:{p}"), parse_axis(f"D=1:{d}"), parse_axis(f"agents=1:{a}")]
    fields_ = (("workload.append_tokens", 100.0), ("node.snic_gbit_s", 100.0),
               ("node.prefill_mfu", 0.1))  # fmt: skip
    axes += [parse_axis(f"{f}={','.join(str(v + i / 100) for i in range(n))}")
             for (f, v), n in zip(fields_, combos, strict=False)]  # fmt: skip
    job = SweepJob(
        registry=None, spec=DEFAULT_SPEC,  # type: ignore[arg-type]  # the tasks read neither
        profile_axes=tuple(x for x in axes if not x.is_vector),
        p_vals=axes[0].values, d_vals=axes[1].values, a_vals=axes[2].values,
        modes=("dualpath",), cfg=DEFAULT_SPEC.serving, chunk=chunk, solver="closed",
        aps=False, write=False, lazy_jct=True, objective="throughput_per_gpu", top=1,
    )  # fmt: skip
    tasks = list(job.tasks())
    assert sweep_tasks(axes, DEFAULT_SPEC, DEFAULT_SPEC.serving, chunk) == len(tasks)
    assert [i for t in tasks for i in t] == list(job.items())  # every chunk once, in order
    assert all(sum(job.item_points(i) for i in t) <= chunk or len(t) == 1 for t in tasks)


def test_a_task_is_named_by_its_points() -> None:
    def job(*grid: str, chunk: int) -> SweepJob:
        axes = [parse_axis(g) for g in grid]
        vec = {a.name: a.values for a in axes if a.is_vector}
        return SweepJob(
            registry=None, spec=DEFAULT_SPEC,  # type: ignore[arg-type]
            profile_axes=tuple(a for a in axes if not a.is_vector), p_vals=vec["P"],
            d_vals=vec["D"], a_vals=vec["agents"], modes=("dualpath",),
            cfg=DEFAULT_SPEC.serving, chunk=chunk, solver="closed", aps=False, write=False,
            lazy_jct=True, objective="throughput_per_gpu", top=1,
        )  # fmt: skip

    big = job("P=1:10", "D=1:10", "agents=1:10", chunk=300)
    tasks = list(big.tasks())
    assert (
        big.describe(("", b"", tasks[1]))
        == "sweep, points 300 to 599 of the 1,000 of P x D x agents"
    )
    grid = job("P=1:2", "D=1:2", "agents=1", "node.snic_gbit_s=100,200,400", chunk=8)
    (first, *_) = grid.tasks()
    assert grid.describe(("", b"", first)) == "sweep, node.snic_gbit_s=100 to node.snic_gbit_s=200"


class _Counting:
    """An in-process executor that runs a task when it is waited for and counts the tasks
    submitted ahead of the results taken."""

    name = "counting"
    workers = 1

    def __init__(self) -> None:
        self.ahead = 0
        self.most = 0
        self.closed: bool | None = None

    def submit(self, fn: Any, arg: Any) -> Any:
        self.ahead += 1
        self.most = max(self.most, self.ahead)
        return ex.InProcess().submit(fn, arg)

    def wait(self, handles: Any) -> list[Any]:
        return list(handles)

    def result(self, handle: Any) -> Any:
        self.ahead -= 1
        return ex.InProcess().result(handle)

    def close(self, cancel: bool) -> None:
        self.closed = cancel


def test_run_ordered_keeps_the_order_and_the_window(tmp_path: Path) -> None:
    from tests.test_sim_plans import broken, flaky

    counting = _Counting()
    args = [(str(tmp_path / f"m{i}"), i) for i in range(9)]
    got = list(ex.run_ordered(counting, flaky, args, lambda a: f"task {a[1]}", window=3))
    assert got == list(range(9))  # each failed once, was run again, and came in order
    assert counting.most <= 3 and counting.closed is False
    pool = ex.LocalPool(2)
    assert list(ex.run_ordered(pool, flaky, args, lambda a: f"task {a[1]}", 4)) == got
    failing = _Counting()
    with pytest.raises(ex.TaskFailedError, match=r"failed twice \(task 2\)"):
        list(ex.run_ordered(failing, broken, args[2:4], lambda a: f"task {a[1]}", 2))
    assert failing.closed is True


def test_cli_sweep_is_the_same_on_workers(cli, tmp_path: Path) -> None:
    grid = [x for g in GRID for x in ("--grid", g)]
    outs = []
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}.csv"
        r = cli("sweep", *grid, "--mode", "basic,dualpath", "--top", "2", "--chunk", "150",
                "--workers", workers, "--out", str(out), "--json")  # fmt: skip
        assert r.code == 0, r.err
        outs.append((out.read_bytes(), r.out.replace(str(out), "OUT")))
    assert outs[0] == outs[1]


def test_workers_that_cannot_start(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no process is to be had (a process limit), the default runs in one process, the
    same output; asked-for workers are one error line, exit 1."""
    grid = [x for g in GRID for x in ("--grid", g)]
    alone = cli("sweep", *grid, "--chunk", "150", "--workers", "1", "--json")

    def refused(self: ex.LocalPool) -> None:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(ex.LocalPool, "start", refused)
    default = cli("sweep", *grid, "--chunk", "150", "--json")
    assert (default.code, default.out) == (0, alone.out)
    asked = cli("sweep", *grid, "--chunk", "150", "--workers", "2", "--json")
    assert asked.code == 1 and asked.out == ""
    assert asked.err.strip() == (
        "error: cannot start 2 workers: [Errno 11] Resource temporarily unavailable"
    )


def test_a_local_ray_instance_sweeps_the_same(cli) -> None:
    pytest.importorskip("ray", reason="Ray is the optional 'ray' extra (in 'test' for CI)")
    grid = [x for g in GRID for x in ("--grid", g)]
    alone = cli("sweep", *grid, "--chunk", "150", "--workers", "1", "--json")
    on_ray = cli("sweep", *grid, "--chunk", "150", "--ray", "local", "--workers", "2", "--json")
    assert alone.code == on_ray.code == 0, on_ray.err
    assert on_ray.out == alone.out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")
def test_an_interrupted_parallel_sweep_leaves_no_file_and_no_worker(tmp_path: Path) -> None:
    from tests.test_sim_plans import started_workers

    out = tmp_path / "points.csv"
    cmd = [
        sys.executable, "-m", "dualpath_plan", "sweep", "--grid", "P=1:100", "--grid",
        "D=1:100", "--grid", "node.prefill_mfu=0.1:0.5:400lin", "--workers", "2",
        "--out", str(out),
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    workers = started_workers(proc)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr.decode()
    assert stdout == b"" and list(tmp_path.iterdir()) == []  # no file, no temporary
    time.sleep(0.5)
    assert [p for p in workers if Path(f"/proc/{p}").exists()] == [], "workers outlived it"
