"""Hostile files through every reader, and outputs that survive failures.

Whatever a profile, trace, measurements CSV, baseline or case file holds: exit 0 or 2 (1 only
for validate/check findings), at most one ``error:`` line, never "internal error" or a
traceback, JSON output without NaN or inf, and every output file that existed before a failed
run exactly as it was. Fixed regression tests below name each reported example; hypothesis
strategies generate the rest.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dualpath_plan.errors import PlanInputError, printable
from dualpath_plan.files import (
    MAX_MEASURED_ROWS,
    MAX_NESTING_DEPTH,
    AtomicGroup,
    AtomicWriter,
    BlockWriter,
    atomic_write,
    load_json,
    load_toml,
    parse_json,
    read_text,
)
from dualpath_plan.physics.workload import load_trace
from dualpath_plan.reports import sweep as sweep_report
from dualpath_plan.reports.sweep import PointWriter
from tests.conftest import BUILTIN, CliResult, fuzz_examples

PAPER_POINTS = Path(__file__).parent.parent / "bench" / "paper_points.csv"
AIC_RESULT = Path(__file__).parent / "data" / "aic" / "best_config_topn_disagg.csv"
PREVIOUS = "previous content\n"

FUZZ = settings(
    deadline=None,
    # The cli fixture reads and clears captured output on every call; every example works in
    # a fresh directory of its own under tmp_path.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _strict_json(text: str) -> object:
    def bad(token: str) -> object:
        raise AssertionError(f"non-finite number {token} in JSON output")

    return json.loads(text, parse_constant=bad)


def assert_clean(result: CliResult, *, allowed: tuple[int, ...] = (0, 2), json_out: bool = False):
    """The invariants of every run on hostile input."""
    text = result.out + result.err
    assert result.code in allowed, (result.code, result.err)
    assert "internal error" not in text, result.err
    assert "Traceback" not in text, result.err
    if result.err.startswith("error: "):
        assert result.err.count("\n") == 1, result.err
        assert result.err[:-1].isprintable(), result.err
    if result.code != 2 and json_out:
        _strict_json(result.out)
    return result


def fresh(tmp_path: Path) -> Path:
    return Path(tempfile.mkdtemp(dir=tmp_path))


def no_temp_files(directory: Path) -> bool:
    return not list(directory.glob(".*.tmp"))


# --- the reported examples -----------------------------------------------------------------


def _ratio_baseline(metric: dict) -> dict:
    return {
        "version": 1,
        "scenarios": [
            {
                "id": "ratio",
                "kind": "ratio",
                "inputs": {
                    "model": "deepseek-v3.2",
                    "context_tokens": [16384],
                    "append_tokens": 429,
                },
                "metrics": {"gb_per_pflop.16384": metric},
            }
        ],
    }


def _write_json_text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_check_rejects_nan_rel_tol(cli, tmp_path) -> None:
    text = json.dumps(_ratio_baseline({"value": 1.0, "rel_tol": 0.1})).replace("0.1", "NaN")
    path = _write_json_text(tmp_path / "b.json", text)
    result = assert_clean(cli("check", str(path)))
    assert result.code == 2
    assert "b.json" in result.err and "rel_tol" in result.err and "finite" in result.err


def test_check_rejects_nan_recorded_value(cli, tmp_path) -> None:
    text = json.dumps(_ratio_baseline({"value": 12.5, "rel_tol": 0.1})).replace("12.5", "NaN")
    path = _write_json_text(tmp_path / "b.json", text)
    result = assert_clean(cli("check", str(path)))
    assert result.code == 2 and "value" in result.err and "finite" in result.err


@pytest.mark.parametrize("token", ["Infinity", "-Infinity", "1e999"])
def test_check_rejects_infinite_numbers(cli, tmp_path, token) -> None:
    text = json.dumps(_ratio_baseline({"value": 12.5, "rel_tol": 0.1})).replace("12.5", token)
    result = assert_clean(cli("check", str(_write_json_text(tmp_path / "b.json", text))))
    assert result.code == 2 and "value" in result.err


def test_check_rejects_negative_rel_tol(cli, tmp_path) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps(_ratio_baseline({"value": 1.0, "rel_tol": -0.5})))
    result = assert_clean(cli("check", str(path)))
    assert result.code == 2 and "rel_tol" in result.err


@pytest.mark.parametrize(
    ("baseline", "field"),
    [
        ({"scenarios": [1]}, "scenarios[0]"),
        ({"scenarios": [{"id": "x", "kind": "size", "inputs": "x"}]}, "inputs"),
        ({"scenarios": [{"id": "x", "kind": "size", "inputs": {"agents": "512"}}]}, "agents"),
        ({"scenarios": [{"id": "x", "kind": "size", "inputs": {"agents": True}}]}, "agents"),
        ({"scenarios": [{"id": "x", "kind": "size", "inputs": {}, "metrics": [1]}]}, "metrics"),
        (
            {
                "scenarios": [
                    {"id": "x", "kind": "size", "inputs": {}, "metrics": {"a": {"value": "1"}}}
                ]
            },
            "value",
        ),
        ({"scenarios": [{"id": 5, "kind": "size", "inputs": {}}]}, "id"),
        ({"scenarios": [{"id": "x", "kind": "ratio", "inputs": {}}]}, "inputs"),
        ({"scenarios": [{"id": "x", "kind": "recommend", "inputs": {}}]}, "budget_nodes"),
        ({"scenarios": [{"id": "x", "kind": "size", "inputs": {"model": 5}}]}, "model"),
        ({"scenarios": [{"id": "x", "kind": "size", "inputs": {"nodes": 5}}]}, "nodes"),
        ({"default_rel_tol": None, "scenarios": []}, "default_rel_tol"),
        ([1, 2], "scenarios"),
    ],
)
def test_check_rejects_wrongly_shaped_baselines(cli, tmp_path, baseline, field) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps(baseline))
    result = assert_clean(cli("check", str(path)))
    assert result.code == 2 and field in result.err and "b.json" in result.err


def test_profile_rejects_bool_as_number(cli, tmp_path) -> None:
    src = (BUILTIN / "node" / "dgx-b200.toml").read_text()
    node = tmp_path / "profiles" / "node"
    node.mkdir(parents=True)
    (node / "dgx-b200.toml").write_text(src.replace("snic_gbit_s = 400.0", "snic_gbit_s = true"))
    assert "snic_gbit_s = true" in (node / "dgx-b200.toml").read_text()
    result = assert_clean(
        cli("size", "--node", "dgx-b200", "--profiles", str(tmp_path / "profiles"))
    )
    assert result.code == 2 and "snic_gbit_s" in result.err and "dgx-b200.toml" in result.err


def test_profile_rejects_string_number(cli, tmp_path) -> None:
    src = (BUILTIN / "node" / "dgx-b200.toml").read_text()
    node = tmp_path / "profiles" / "node"
    node.mkdir(parents=True)
    (node / "dgx-b200.toml").write_text(src.replace("snic_count = 2\n", 'snic_count = "2"\n'))
    result = assert_clean(cli("profiles", "validate", str(node / "dgx-b200.toml")))
    assert result.code == 2 and "snic_count" in result.out + result.err


@pytest.mark.parametrize(
    "assignment",
    [
        "node.snic_count=true",
        "node.snic_gbit_s=true",
        "node.snic_gbit_s=false",
        'node.snic_gbit_s="200"',
        "node.snic_count=8.0",
        "node.snic_gbit_s=200abc",
        "model.tie_word_embeddings=1",
        "workload.turns_spread=true",
    ],
)
def test_set_rejects_bool_and_string_numbers(cli, assignment) -> None:
    result = assert_clean(cli("size", "--set", assignment))
    assert result.code == 2
    assert assignment.split("=")[0].split(".")[1] in result.err


def test_set_still_takes_an_int_for_a_float_field(cli) -> None:
    assert cli("size", "--set", "node.snic_gbit_s=200", "--json").code == 0


def _sweep_args(out: Path, *extra: str) -> list[str]:
    return ["sweep", "--grid", "P=1:3", "--out", str(out), *extra]


@pytest.mark.parametrize(
    "bad",
    [
        ("--model", "nope"),
        ("--grid", "P=1:2"),  # P named twice
        ("--grid", "node.snic_gbit_s=100,-5"),  # fails on the second value, after rows
        ("--set", "node.snic_count=true"),
    ],
)
@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_failed_sweep_keeps_previous_out_file(cli, tmp_path, bad, suffix) -> None:
    out = tmp_path / f"prev{suffix}"
    out.write_text(PREVIOUS)
    result = assert_clean(cli(*_sweep_args(out, *bad)))
    assert result.code == 2
    assert out.read_text() == PREVIOUS
    assert no_temp_files(tmp_path)
    # The same sweep without the fault replaces the file.
    assert cli(*_sweep_args(out)).code == 0
    assert out.read_text() != PREVIOUS and no_temp_files(tmp_path)


def _start_big_sweep(out: Path) -> subprocess.Popen[bytes]:
    exe = Path(sys.executable).with_name("dualpath-plan")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "dualpath_plan.cli.app"]
    return subprocess.Popen(
        [
            *cmd,
            "sweep",
            "--grid",
            "node.snic_gbit_s=1:800:10000lin",
            "--grid",
            "P=1:8",
            "--out",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "80"},
        # Each signal as a terminal or a service manager sends it to a process that did not
        # ignore it: one started with a signal ignored keeps ignoring it (a shell's `&`
        # without job control ignores SIGINT and SIGQUIT, nohup SIGHUP; cli/program.py), and
        # the test run's own parent may have (a test run started that way: the sweep ran on to
        # the 30 s timeout). tests/test_parallel_sweep.py's interrupt does the same.
        preexec_fn=_default_dispositions,
    )


def _default_dispositions() -> None:
    for sig in KILLING_SIGNALS:
        if sig != signal.SIGKILL:
            signal.signal(sig, signal.SIG_DFL)


def _wait_for_temp(directory: Path, proc: subprocess.Popen[bytes]) -> None:
    """Until the sweep has written rows to its temporary file (so the signal hits mid-write)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        temps = list(directory.glob(".*.tmp"))
        if temps and temps[0].stat().st_size > 10_000:
            return
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.05)
    raise AssertionError("the sweep wrote no temporary file")


# The signals a killed sweep is sent.
KILLING_SIGNALS = (
    [signal.SIGKILL, signal.SIGINT, signal.SIGTERM]
    # issue 35: these left 135 to 234 MB of temporary file; now they unwind as SIGTERM does
    + [getattr(signal, n) for n in ("SIGHUP", "SIGQUIT", "SIGUSR1") if hasattr(signal, n)]
    # and these too (a trial: SIGALRM, SIGXCPU from a CPU-time limit, SIGVTALRM, SIGPROF)
    + [getattr(signal, n) for n in ("SIGALRM", "SIGXCPU", "SIGVTALRM", "SIGPROF", "SIGRTMIN")
       if hasattr(signal, n)]
)  # fmt: skip


@pytest.mark.parametrize("sig", KILLING_SIGNALS)
def test_killed_sweep_keeps_previous_out_file(tmp_path, sig) -> None:
    out = tmp_path / "f.csv"
    out.write_text(PREVIOUS)
    proc = _start_big_sweep(out)
    try:
        _wait_for_temp(tmp_path, proc)
        proc.send_signal(sig)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert out.read_text() == PREVIOUS
    if sig != signal.SIGKILL:
        # Ctrl-C: exit 130; SIGTERM unwinds alike, exit 143 (it left a 1.6 GB temporary file,
        # found in a trial), and so do the other signals that end a process, 128 + the
        # signal; the temporary file removed either way. SIGKILL cannot be caught.
        assert proc.returncode == (130 if sig == signal.SIGINT else 128 + sig)
        assert no_temp_files(tmp_path)
        assert b"internal error" not in (proc.stderr.read() if proc.stderr else b"")


# Writes the system refuses part-way through a file: a file size limit (RLIMIT_FSIZE, EFBIG;
# SIGXFSZ ignored, as a disk that fills up returns ENOSPC rather than a signal) far below each
# output, so that the first blocks are written and a later one is refused.
FILE_SIZE_LIMIT = 64 * 1024


def _limited_file_size() -> None:
    import resource

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("f.csv", ("sweep", "--grid", "P=1:30", "--grid", "D=1:30", "--grid", "agents=1:50")),
        ("f.jsonl", ("sweep", "--grid", "P=1:30", "--grid", "D=1:30", "--grid", "agents=1:50")),
        ("f.jsonl", ("simulate", "--agents", "64", "--trace-out")),
        ("f.csv", ("size", "--aps-curve", "0.1:2:3000")),
    ],
)
def test_a_write_refused_part_way_is_one_line(tmp_path, name, args) -> None:
    out = tmp_path / name
    out.write_text(PREVIOUS)
    exe = Path(sys.executable).with_name("dualpath-plan")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "dualpath_plan.cli.app"]
    flag = [] if args[-1] == "--trace-out" else ["--out"]
    proc = subprocess.run(
        [*cmd, *args, *flag, str(out)],
        capture_output=True,
        text=True,
        preexec_fn=_limited_file_size,
        timeout=120,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and str(out) in lines[0] and "cannot write: File too large" in lines[0]
    assert ("'--trace-out'" if args[-1] == "--trace-out" else "'--out'") in lines[0]
    assert out.read_text() == PREVIOUS
    assert no_temp_files(tmp_path)


def test_block_writer_writes_in_order_and_hands_errors_back(tmp_path) -> None:
    # In order, each block from a reused buffer (at most `buffers` of them), the bytes made.
    seen: set[int] = set()

    def block(k: int):
        def make(buffer: bytearray) -> memoryview:
            seen.add(id(buffer))
            buffer[:] = f"{k}\n".encode() * (k % 7 + 1)
            return memoryview(buffer)

        return make

    target = tmp_path / "f.txt"
    with AtomicWriter(target, binary=True) as handle:
        blocks = BlockWriter(handle, buffers=2)
        for k in range(200):
            blocks.submit(block(k))
        blocks.finish()
    assert target.read_text() == "".join(f"{k}\n" * (k % 7 + 1) for k in range(200))
    assert len(seen) <= 2
    # A block that fails: raised in the caller (at a later submit or at finish), nothing
    # written after it; cancel drops what is queued and ends the thread.
    for stop in ("submit", "finish"):
        out = tmp_path / f"{stop}.txt"
        with pytest.raises(PlanInputError), AtomicWriter(out, binary=True) as handle:
            blocks = BlockWriter(handle, buffers=1)

            def fail(buffer: bytearray, out: Path = out) -> bytes:
                raise PlanInputError("cannot write: refused", source=str(out), field="--out")

            blocks.submit(fail)
            try:
                if stop == "submit":
                    blocks.thread.join(0.01)
                    for k in range(50):
                        blocks.submit(block(k))
                blocks.finish()
            finally:
                blocks.cancel()
        assert not out.exists() and no_temp_files(tmp_path)
    writer = AtomicWriter(tmp_path / "c.txt", binary=True)
    blocks = BlockWriter(writer.handle)
    blocks.submit(block(1))
    blocks.cancel()
    writer.abort()
    assert not blocks.thread.is_alive() and no_temp_files(tmp_path)


def _baseline_with_regression() -> dict:
    return _ratio_baseline({"value": 1.0, "rel_tol": 0.0})


def test_failed_check_keeps_junit_report(cli, tmp_path) -> None:
    junit = tmp_path / "report.xml"
    junit.write_text(PREVIOUS)
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps({"scenarios": [{"id": "x", "kind": "size", "inputs": {"model": "nope"}}]})
    )
    assert assert_clean(cli("check", str(bad), "--junit", str(junit))).code == 2
    assert junit.read_text() == PREVIOUS


def test_check_junit_and_update_are_all_or_nothing(cli, tmp_path) -> None:
    baseline = tmp_path / "b.json"
    original = json.dumps(_baseline_with_regression())
    baseline.write_text(original)
    junit = tmp_path / "missing-dir" / "report.xml"
    result = assert_clean(cli("check", str(baseline), "--update", "--junit", str(junit)))
    assert result.code == 2 and "--junit" in result.err
    assert baseline.read_text() == original  # the update was not written either
    assert no_temp_files(tmp_path)
    assert cli("check", str(baseline), "--update").code == 0
    assert baseline.read_text() != original


def test_check_junit_is_well_formed_with_control_characters(cli, tmp_path) -> None:
    data = _baseline_with_regression()
    data["scenarios"][0]["id"] = "bad\x00id\x1b\uffff\nerror: injected"
    baseline = tmp_path / "b.json"
    baseline.write_text(json.dumps(data))  # ensure_ascii: the escapes are JSON \u escapes
    junit = tmp_path / "report.xml"
    junit.write_text(PREVIOUS)
    result = assert_clean(cli("check", str(baseline), "--junit", str(junit)), allowed=(1,))
    suite = ET.fromstring(junit.read_text(encoding="utf-8"))
    names = {case.get("classname") for case in suite}
    assert names == {"bad\\x00id\\x1b\\uffff\nerror: injected"}
    assert int(suite.get("failures", "0")) >= 1
    assert "error:" not in result.err
    # A metric the kind does not give, named with control characters: one printable line.
    data["scenarios"][0]["metrics"]["odd\x07metric\ufffe"] = {"value": 1.0}
    baseline.write_text(json.dumps(data))
    odd = assert_clean(cli("check", str(baseline), "--junit", str(junit)))
    assert odd.code == 2 and odd.err.count("\n") == 1 and "\x07" not in odd.err


def test_check_refuses_lone_surrogates(cli, tmp_path) -> None:
    """A JSON "\\ud800" escape is no text any output could hold: refused where it is read."""
    data = _baseline_with_regression()
    data["scenarios"][0]["id"] = "x\ud800"
    baseline = tmp_path / "b.json"
    baseline.write_text(json.dumps(data))
    junit = tmp_path / "report.xml"
    junit.write_text(PREVIOUS)
    result = assert_clean(cli("check", str(baseline), "--junit", str(junit)))
    assert result.code == 2 and "scenarios[0].id" in result.err and "surrogate" in result.err
    assert junit.read_text() == PREVIOUS


def test_calibrate_out_is_all_or_nothing(cli, tmp_path) -> None:
    out = tmp_path / "overlay"
    (out / "node").mkdir(parents=True)
    node = out / "node" / "dualpath-hopper.toml"
    node.write_text(PREVIOUS)
    (out / "workload").write_text("a file where the workload directory goes")
    args = ("calibrate", str(PAPER_POINTS), "--fit", "prefill_mfu,workload.turns_spread")
    args += ("--allow-partial",)  # the spread ends at its bound
    result = assert_clean(cli(*args, "--out", str(out)))
    assert result.code == 2 and "workload" in result.err
    assert node.read_text() == PREVIOUS  # the node overlay was not written alone
    assert no_temp_files(out / "node")
    (out / "workload").unlink()
    assert cli(*args, "--out", str(out)).code == 0
    assert node.read_text() != PREVIOUS and (out / "workload" / "paper-64k.toml").is_file()


def test_recommend_outputs_are_all_or_nothing(cli, tmp_path) -> None:
    report = tmp_path / "r.md"
    report.write_text(PREVIOUS)
    result = assert_clean(
        cli(
            "recommend",
            "--budget-nodes",
            "6",
            "--markdown",
            str(report),
            "--plot",
            str(tmp_path / "nodir" / "r.svg"),
        )
    )
    assert result.code == 2 and "--plot" in result.err
    assert report.read_text() == PREVIOUS and no_temp_files(tmp_path)
    png = tmp_path / "r.png"
    png.write_text(PREVIOUS)
    result = cli("recommend", "--budget-nodes", "6", "--markdown", str(report), "--plot", str(png))
    assert result.code == 0, result.err
    assert png.read_bytes().startswith(b"\x89PNG") and report.read_text() != PREVIOUS


def _trace_profile(tmp_path: Path, trace_file: str) -> Path:
    profiles = tmp_path / "profiles"
    (profiles / "workload").mkdir(parents=True, exist_ok=True)
    (profiles / "workload" / "tr.toml").write_text(
        'kind = "workload"\nname = "t"\nturns = 3\nappend_tokens = 100\n'
        f"generated_tokens = 10\ncontext_tokens = 1000\ntrace_file = {json.dumps(trace_file)}\n"
    )
    return profiles


TRACE = "trajectory_id,append_tokens,generated_tokens\na,100,10\na,50,5\nb,200,20\n"


@pytest.mark.parametrize(
    "trace_file", ["/etc/hostname", "../t.csv", "sub/../../t.csv", "/dev/zero"]
)
def test_trace_file_may_not_leave_its_profile_directory(cli, tmp_path, trace_file) -> None:
    (tmp_path / "t.csv").write_text(TRACE)
    profiles = _trace_profile(tmp_path, trace_file)
    result = assert_clean(cli("size", "--profiles", str(profiles), "--workload", "tr"))
    assert result.code == 2 and "trace_file" in result.err and "tr.toml" in result.err
    # Also when set on the command line.
    (profiles / "workload" / "t.csv").write_text(TRACE)
    ok = _trace_profile(tmp_path, "t.csv")
    assert cli("size", "--profiles", str(ok), "--workload", "tr", "--json").code == 0
    result = assert_clean(
        cli(
            "size",
            "--profiles",
            str(ok),
            "--workload",
            "tr",
            "--set",
            f"workload.trace_file={json.dumps(trace_file)}",
        )
    )
    assert result.code == 2 and "trace_file" in result.err


def test_trace_file_symlink_out_of_the_directory_is_refused(cli, tmp_path) -> None:
    profiles = _trace_profile(tmp_path, "z.csv")
    (profiles / "workload" / "z.csv").symlink_to("/dev/zero")
    result = assert_clean(cli("size", "--profiles", str(profiles), "--workload", "tr"))
    assert result.code == 2 and "trace_file" in result.err


def test_an_explicit_trace_path_is_the_callers_choice(tmp_path) -> None:
    elsewhere = tmp_path / "elsewhere" / "t.csv"
    elsewhere.parent.mkdir()
    elsewhere.write_text(TRACE)
    assert load_trace(elsewhere).turns_per_trajectory == 1.5


class _FifoGuard:
    """Opens a FIFO's write end after a delay, so a reader that wrongly waits on it fails the
    test instead of hanging it."""

    def __init__(self, path: Path, delay: float = 10.0):
        def release() -> None:
            time.sleep(delay)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)
            except OSError:
                pass

        threading.Thread(target=release, daemon=True).start()


def test_devices_and_fifos_are_refused_at_once(cli, tmp_path) -> None:
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    _FifoGuard(fifo)
    csv_fifo = tmp_path / "pipe.csv"
    os.mkfifo(csv_fifo)
    _FifoGuard(csv_fifo)
    json_fifo = tmp_path / "pipe.json"
    os.mkfifo(json_fifo)
    _FifoGuard(json_fifo)
    start = time.monotonic()
    for args in (
        ("profiles", "validate", str(fifo)),
        ("profiles", "validate", "/dev/zero"),
        ("calibrate", str(csv_fifo)),
        ("calibrate", "/dev/zero"),
        ("check", str(json_fifo)),
        ("check", "/dev/zero"),
        ("check", "/dev/null"),
    ):
        result = assert_clean(cli(*args))
        assert result.code == 2, args
        assert "regular file" in result.out + result.err, args
    cases = tmp_path / "cases"
    cases.mkdir()
    os.mkfifo(cases / "c.toml")
    _FifoGuard(cases / "c.toml")
    assert assert_clean(cli("validate", "--cases", str(cases))).code == 2
    profiles = _trace_profile(tmp_path, "p.csv")
    os.mkfifo(profiles / "workload" / "p.csv")
    _FifoGuard(profiles / "workload" / "p.csv")
    result = assert_clean(cli("size", "--profiles", str(profiles), "--workload", "tr"))
    assert result.code == 2 and "FIFO" in result.err
    assert time.monotonic() - start < 5


def test_directory_where_a_file_is_expected(cli, tmp_path) -> None:
    d = tmp_path / "dir.json"
    d.mkdir()
    for args in (("check", str(d)), ("calibrate", str(d))):
        result = assert_clean(cli(*args))
        assert result.code == 2 and "directory" in result.err
    cases = tmp_path / "cases"
    (cases / "c.toml").mkdir(parents=True)
    assert assert_clean(cli("validate", "--cases", str(cases))).code == 2
    profiles = _trace_profile(tmp_path, "tdir")
    (profiles / "workload" / "tdir").mkdir()
    assert assert_clean(cli("size", "--profiles", str(profiles), "--workload", "tr")).code == 2


def test_deeply_nested_toml_and_json_are_exit_2(cli, tmp_path) -> None:
    depth = 100_000
    node = tmp_path / "profiles" / "node"
    node.mkdir(parents=True)
    (node / "deep.toml").write_text("x = " + "[" * depth + "]" * depth + "\n")
    result = assert_clean(cli("profiles", "validate", str(node / "deep.toml")))
    assert result.code == 2 and "nested" in result.out + result.err
    (node / "deep.toml").write_text("a" + ".a" * depth + " = 1\n")
    assert assert_clean(cli("profiles", "validate", str(node / "deep.toml"))).code == 2
    (node / "deep.toml").write_text("x = " + "{a = " * 200 + "1" + "}" * 200 + "\n")
    assert assert_clean(cli("profiles", "validate", str(node / "deep.toml"))).code == 2
    baseline = tmp_path / "b.json"
    baseline.write_text('{"scenarios": ' + "[" * depth + "]" * depth + "}")
    result = assert_clean(cli("check", str(baseline)))
    assert result.code == 2 and "nested" in result.err
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "c.toml").write_text("claim = " + "[" * depth + "]" * depth + "\n")
    assert assert_clean(cli("validate", "--cases", str(cases))).code == 2
    assert (
        assert_clean(cli("size", "--set", "node.snic_gbit_s=" + "[" * depth + "]" * depth)).code
        == 2
    )
    profiles = _trace_profile(tmp_path / "trace", "t.jsonl")
    (profiles / "workload" / "t.jsonl").write_text("[" * depth + "]" * depth + "\n")
    result = assert_clean(cli("size", "--profiles", str(profiles), "--workload", "tr"))
    assert result.code == 2 and "line 1" in result.err


def test_non_utf8_bytes_are_exit_2(cli, tmp_path) -> None:
    bad = b"\xff\xfe\xc3\x28"
    measured = tmp_path / "m.csv"
    measured.write_bytes(PAPER_POINTS.read_bytes() + b"jct_s,3000,dualpath," + bad + b",4\n")
    result = assert_clean(cli("calibrate", str(measured)))
    assert result.code == 2 and "UTF-8" in result.err and "line" in result.err
    baseline = tmp_path / "b.json"
    baseline.write_bytes(b'{"scenarios": ["' + bad + b'"]}')
    assert "UTF-8" in assert_clean(cli("check", str(baseline))).err
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "c.toml").write_bytes(b'claim = "' + bad + b'"\n')
    assert "UTF-8" in assert_clean(cli("validate", "--cases", str(cases))).err
    profiles = _trace_profile(tmp_path, "t.csv")
    (profiles / "workload" / "t.csv").write_bytes(TRACE.encode() + b"c," + bad + b",1\n")
    result = assert_clean(cli("size", "--profiles", str(profiles), "--workload", "tr"))
    assert result.code == 2 and "UTF-8" in result.err and "line 5" in result.err
    node = tmp_path / "profiles" / "node"
    node.mkdir(parents=True)
    (node / "x.toml").write_bytes(b'kind = "node"\nname = "' + bad + b'"\n')
    result = assert_clean(cli("profiles", "validate", str(node / "x.toml")))
    assert result.code == 2 and "UTF-8" in result.out + result.err


@pytest.mark.parametrize(
    ("rows", "expect"),
    [
        ("metric,value,mode,prefill_nodes,decode_nodes\njct_s,3000,dualpath,2\n", "line 2"),
        ("metric,value,mode,prefill_nodes,decode_nodes\njct_s,3000\n", "fields"),
        ("metric,value,mode,prefill_nodes,decode_nodes\njct_s,true,dualpath,2,4\n", "value"),
        ("metric,value,mode,prefill_nodes,decode_nodes\njct_s,nan,dualpath,2,4\n", "finite"),
        ("metric,value,mode,prefill_nodes,decode_nodes\njct_s,1e999,dualpath,2,4\n", "finite"),
        ("metric,value,mode,prefill_nodes,decode_nodes\njct_s,3000,dualpath,2.5,4\n", "whole"),
        ("metric,value,mode,prefill_nodes,decode_nodes\njct_s,3000,dualpath,1e30,4\n", "1 to"),
        ("metric,metric,mode,prefill_nodes,decode_nodes\njct_s,1,dualpath,2,4\n", "twice"),
        ('metric,value,mode,prefill_nodes,decode_nodes\n"jct_s,1,dualpath,2,4\n', "CSV"),
    ],
)
def test_short_and_malformed_csv_rows_are_exit_2(cli, tmp_path, rows, expect) -> None:
    measured = tmp_path / "m.csv"
    measured.write_text(rows)
    result = assert_clean(cli("calibrate", str(measured)))
    assert result.code == 2 and expect in result.err and "m.csv" in result.err


def test_calibrate_refuses_a_huge_csv_by_its_row_limit(cli, tmp_path) -> None:
    measured = tmp_path / "m.csv"
    row = "jct_s,3000,dualpath,2,4\n"
    measured.write_text("metric,value,mode,prefill_nodes,decode_nodes\n" + row * 5000)
    start = time.monotonic()
    result = assert_clean(cli("calibrate", str(measured)))
    assert result.code == 2 and f"{MAX_MEASURED_ROWS:,}" in result.err
    assert time.monotonic() - start < 2


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ("kind = 'size'\npaper = 1\ntolerance = 0.1\n[inputs]\nmodes = ['basic']\n", "metric"),
        (
            "kind = 'ratio'\nmetric = 'gb_per_pflop.1'\npaper = 1\ntolerance = 0.1\n"
            "[inputs]\nmodel = 'ds-27b'\n",
            "inputs",
        ),
        (
            "kind = 'ordering'\nmetric = 'holds'\npaper = 1\ntolerance = 0.1\n[inputs]\n"
            "modes = ['basic']\n",
            "modes",
        ),
        ("kind = 'size'\nmetric = 'basic.jct_s'\npaper = true\ntolerance = 0.1\n", "paper"),
        ("kind = 'size'\nmetric = 'basic.jct_s'\npaper = 1\ntolerance = nan\n", "tolerance"),
        ("kind = 'size'\nmetric = 'basic.jct_s'\npaper = 1\ntolerance = -1\n", "tolerance"),
        (
            "kind = 'size'\nmetric = 'fast.jct_s'\npaper = 1\ntolerance = 0.1\n[inputs]\n"
            "modes = ['fast']\n",
            "modes",
        ),
        (
            "kind = 'size'\nmetric = 'basic.jct_s'\npaper = 1\ntolerance = 0\n[inputs]\n"
            "agents = '9'\n",
            "agents",
        ),
        ("kind = 'bounds'\nmetric = 'violated'\npaper = 1\ntolerance = 0\n", "metric"),
        (
            "kind = 'trend'\nmetric = 'flops_x'\npaper = 1\ntolerance = 0\n[inputs]\n"
            "base = 'b200'\n",
            "inputs",
        ),
        ("kind = 'magic'\nmetric = 'x'\npaper = 1\ntolerance = 0\n", "kind"),
    ],
)
def test_case_files_with_missing_or_bad_inputs_are_exit_2(cli, tmp_path, content, field) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "c.toml").write_text("claim = 'x'\nsource = 'y'\n" + content)
    result = assert_clean(cli("validate", "--cases", str(cases)))
    assert result.code == 2 and field in result.err and "c.toml" in result.err


def test_trend_case_with_an_unknown_gpu_is_exit_2(cli, tmp_path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "c.toml").write_text(
        "claim = 'x'\nsource = 'y'\nkind = 'trend'\nmetric = 'flops_x'\npaper = 1\n"
        "tolerance = 0\n[inputs]\nbase = 'a100-sxm-80gb'\ndtype = 'best'\ngpu = 'nope'\n"
    )
    assert assert_clean(cli("validate", "--cases", str(cases))).code == 2


@pytest.mark.parametrize(
    ("lines", "expect"),
    [
        ('"just a string"\n', "JSON object"),
        ("[1, 2]\n", "JSON object"),
        ('{"trajectory_id": "a", "append_tokens": 5}\n', "generated_tokens"),
        ('{"trajectory_id": "a", "append_tokens": "5", "generated_tokens": 1}\n', "append_tokens"),
        ('{"trajectory_id": "a", "append_tokens": true, "generated_tokens": 1}\n', "append_tokens"),
        ('{"trajectory_id": "a", "append_tokens": NaN, "generated_tokens": 1}\n', "append_tokens"),
        ('{"trajectory_id": [1], "append_tokens": 5, "generated_tokens": 1}\n', "trajectory_id"),
        ('{"trajectory_id": "a", "append_tokens": 1e20, "generated_tokens": 1}\n', "append_tokens"),
        ('{"trajectory_id": "a", "append_tokens": 5, "generated_tokens": 1}\n{oops\n', "line 2"),
        (
            '{"trajectory_id": "a", "append_tokens": 5, "generated_tokens": 1, '
            '"context_tokens": 1}\n'
            '{"trajectory_id": "a", "append_tokens": 5, "generated_tokens": 1}\n',
            "context_tokens",
        ),
        ("\n\n", "no turns"),
        # A key given twice: JSON keeps the last silently; the trace would say 5 and mean 9.
        (
            '{"trajectory_id": "a", "append_tokens": 5, "generated_tokens": 1}\n'
            '{"trajectory_id": "a", "append_tokens": 5, "append_tokens": 9, '
            '"generated_tokens": 1}\n',
            "line 2: field 'append_tokens': a key given twice",
        ),
    ],
)
def test_jsonl_trace_lines_must_be_complete_objects(cli, tmp_path, lines, expect) -> None:
    profiles = _trace_profile(tmp_path, "t.jsonl")
    (profiles / "workload" / "t.jsonl").write_text(lines)
    result = assert_clean(cli("size", "--profiles", str(profiles), "--workload", "tr"))
    assert result.code == 2 and expect in result.err and "t.jsonl" in result.err


@pytest.mark.parametrize(
    "rows",
    [
        "trajectory_id,append_tokens\na,1\n",
        "trajectory_id,append_tokens,generated_tokens\na,1\n",
        "trajectory_id,append_tokens,generated_tokens\na,1,2,3\n",
        "trajectory_id,append_tokens,generated_tokens\na,-1,2\n",
        "trajectory_id,append_tokens,generated_tokens\na,inf,2\n",
        "trajectory_id,append_tokens,generated_tokens\n",
        "",
    ],
)
def test_bad_csv_traces_are_exit_2(cli, tmp_path, rows) -> None:
    profiles = _trace_profile(tmp_path, "t.csv")
    (profiles / "workload" / "t.csv").write_text(rows)
    result = assert_clean(cli("size", "--profiles", str(profiles), "--workload", "tr"))
    assert result.code == 2 and "t.csv" in result.err


def test_a_json_key_given_twice_is_refused_where_it_is(cli, tmp_path) -> None:
    # A baseline naming a key twice would be checked against the last value while a reader
    # sees the first: refused, at its line where the key occurs only there, naming the key.
    baseline = tmp_path / "b.json"
    good = (Path(__file__).parent / "baseline.json").read_text()
    baseline.write_text(good.replace("{", '{\n"scenarios_doubled": 1, "scenarios_doubled": 2,', 1))
    result = assert_clean(cli("check", str(baseline)))
    assert result.code == 2
    assert "b.json: line 2: field 'scenarios_doubled': a key given twice" in result.err
    # Nested, and a key that other objects name too: the key, without a guessed line.
    with pytest.raises(PlanInputError, match="field 'id': a key given twice") as info:
        parse_json('[{"id": 1}, {"id": 2, "x": {"id": 3, "id": 4}}]', source="f.json")
    assert "line" not in str(info.value)
    assert parse_json('[{"id": 1}, {"id": 2}]', source="f.json") == [{"id": 1}, {"id": 2}]


def test_an_id_with_a_newline_cannot_inject_an_error_line(cli, tmp_path) -> None:
    result = assert_clean(cli("size", "--model", "x\nerror: injected\x1b[2J"))
    assert result.code == 2 and result.err.count("error:") == 2  # one line, escaped inside
    assert "\\n" in result.err and "\\x1b" in result.err
    result = assert_clean(cli("size", "--set", "node.gpu=a\nerror: b"))
    assert result.code == 2
    baseline = tmp_path / "b.json"
    baseline.write_text(
        json.dumps(
            {"scenarios": [{"id": "x\nerror: y", "kind": "size", "inputs": {"model": "q\n"}}]}
        )
    )
    result = assert_clean(cli("check", str(baseline)))
    assert result.code == 2


def test_printable_is_one_line_and_idempotent() -> None:
    s = "a\nb\r\x00\x1b\ud800\u2028é\\n" + "z" * 5000
    once = printable(s)
    assert once.isprintable() and "\n" not in once and len(once) <= 2000
    assert printable(once) == once
    assert printable("plain é text") == "plain é text"
    assert "\n" not in str(PlanInputError("bad\nvalue", source="f\n", field="x\ny"))


# --- the files layer itself ----------------------------------------------------------------


def test_read_text_limits(tmp_path) -> None:
    big = tmp_path / "big.toml"
    big.write_text("x" * 2000)
    with pytest.raises(PlanInputError, match="more than the 1000 bytes"):
        read_text(big, what="profile", max_bytes=1000)
    with pytest.raises(PlanInputError, match="a device"):
        read_text("/dev/zero", what="profile", max_bytes=1000)
    with pytest.raises(PlanInputError, match="no such"):
        read_text(tmp_path / "none", what="profile", max_bytes=1000)
    with pytest.raises(PlanInputError, match="not a valid path"):
        read_text(str(tmp_path / "a\0b"), what="profile", max_bytes=1000)
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbfx = 1\n")
    assert load_toml(bom, what="profile", max_bytes=1000) == {"x": 1}


def test_nesting_limit_is_exact(tmp_path) -> None:
    ok = tmp_path / "ok.json"
    ok.write_text("[" * MAX_NESTING_DEPTH + "]" * MAX_NESTING_DEPTH)
    load_json(ok, what="x", max_bytes=10_000)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * (MAX_NESTING_DEPTH + 1) + "]" * (MAX_NESTING_DEPTH + 1))
    with pytest.raises(PlanInputError, match="nested"):
        load_json(deep, what="x", max_bytes=10_000)
    # Brackets inside strings are text, not nesting.
    text = tmp_path / "s.json"
    text.write_text(json.dumps({"a": "[" * 1000}))
    assert load_json(text, what="x", max_bytes=10_000) == {"a": "[" * 1000}
    toml = tmp_path / "s.toml"
    toml.write_text("a = '" + "[" * 1000 + "' # " + "{" * 100 + '\nb = """\n' + "[" * 99 + '"""\n')
    assert load_toml(toml, what="x", max_bytes=10_000)["a"] == "[" * 1000


def test_atomic_writer_keeps_the_target_on_any_exception(tmp_path) -> None:
    target = tmp_path / "out.txt"
    target.write_text(PREVIOUS)
    os.chmod(target, 0o640)
    for exc in (ValueError("boom"), KeyboardInterrupt()):
        with pytest.raises(type(exc)), AtomicWriter(target) as handle:
            handle.write("partial")
            raise exc
        assert target.read_text() == PREVIOUS and no_temp_files(tmp_path)
    atomic_write(target, "new\n")
    assert target.read_text() == "new\n" and no_temp_files(tmp_path)
    assert oct(target.stat().st_mode & 0o777) == oct(0o640)  # the replaced file's mode kept
    with pytest.raises(PlanInputError, match="directory"):
        atomic_write(tmp_path, "x")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(PlanInputError, match="not a regular file"):
        atomic_write(fifo, "x")


def test_atomic_group_all_or_nothing(tmp_path) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(PREVIOUS)
    with pytest.raises(PlanInputError), AtomicGroup() as group:
        group.add(a, "A")
        group.add(tmp_path / "missing" / "b.txt", "B")
    assert a.read_text() == PREVIOUS and no_temp_files(tmp_path)
    with AtomicGroup() as group:
        group.add(a, "A")
        group.add(b, b"B")
    assert a.read_text() == "A" and b.read_text() == "B" and no_temp_files(tmp_path)


# --- hypothesis: hostile files -------------------------------------------------------------

HOSTILE_TOML_VALUES = [
    "true",
    "false",
    '"200"',
    '""',
    '"\\u0000\\n"',
    "nan",
    "inf",
    "-inf",
    "-1",
    "0",
    "1e308",
    "1e-320",
    "99999999999999999999",
    "[1, 2]",
    "{ a = 1 }",
    "[" * 40 + "]" * 40,
    "1979-05-27",
    "0x10",
    "1_000",
    "2.5",
    "8",
]
GARBAGE = st.sampled_from(
    [
        b"",
        b"\xff\xfe",
        b"\x00",
        b"[[[",
        b"= = =",
        b"\n[sources]\nx = 1\n",
        b'"unterminated',
        b"\r\n",
    ]
)


@st.composite
def profile_files(draw):
    kind, pid = draw(
        st.sampled_from(
            [
                ("node", "dgx-b200"),
                ("gpu", "h100-sxm"),
                ("model", "ds-27b"),
                ("workload", "paper-64k"),
                ("storage", "3fs"),
            ]
        )
    )
    lines = (BUILTIN / kind / f"{pid}.toml").read_text().splitlines()
    for _ in range(draw(st.integers(1, 3))):
        k = draw(st.integers(0, len(lines) - 1))
        key = lines[k].partition("=")[0].strip() if "=" in lines[k] else "extra_key"
        lines[k] = f"{key} = {draw(st.sampled_from(HOSTILE_TOML_VALUES))}"
    data = "\n".join(lines).encode() + b"\n"
    if draw(st.booleans()):
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(GARBAGE) + data[at:]
    return kind, pid, data


@settings(FUZZ, max_examples=fuzz_examples(100))
@given(spec=profile_files())
def test_hostile_profiles(cli, tmp_path, spec) -> None:
    kind, pid, data = spec
    root = fresh(tmp_path)
    path = root / "profiles" / kind / f"{pid}.toml"
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    assert_clean(cli("profiles", "validate", str(path)))
    option = {"gpu": "--gpu", "node": "--node", "model": "--model", "workload": "--workload"}
    args = ["size", "--profiles", str(root / "profiles"), "--json"]
    if kind in option:
        args += [option[kind], pid]
    if kind == "model":
        args += ["-P", "1", "-D", "1"]
    assert_clean(cli(*args), json_out=True)


HOSTILE_CELLS = ["1", "0", "-1", "2.5", "nan", "inf", "1e999", "1e13", "true", "", "abc", " 7 "]
HOSTILE_JSON = [
    1,
    0,
    -1,
    2.5,
    1e13,
    True,
    None,
    "5",
    "",
    [1],
    {"a": 1},
    "NaN",
    10**30,
]


@st.composite
def trace_files(draw):
    jsonl = draw(st.booleans())
    columns = ["trajectory_id", "append_tokens", "generated_tokens"]
    if draw(st.booleans()):
        columns.append("context_tokens")
    if draw(st.integers(0, 5)) == 0:
        columns.remove(draw(st.sampled_from(columns)))
    n = draw(st.integers(0, 6))
    rows = []
    for _ in range(n):
        row = {}
        for c in columns:
            if c == "trajectory_id":
                row[c] = draw(st.sampled_from(["a", "b", 1, "x\ny", True]))
            elif draw(st.integers(0, 3)):
                row[c] = draw(st.integers(1, 5000))
            elif jsonl:
                row[c] = draw(st.sampled_from(HOSTILE_JSON))
            else:
                row[c] = draw(st.sampled_from(HOSTILE_CELLS))
        if draw(st.integers(0, 6)) == 0 and row:
            row.pop(draw(st.sampled_from(sorted(row))))
        rows.append(row)
    if jsonl:
        text = "".join(
            (json.dumps(r) if draw(st.integers(0, 8)) else draw(st.sampled_from(["[1]", "7", "{"])))
            + "\n"
            for r in rows
        )
        name = "t.jsonl"
    else:
        text = ",".join(columns) + "\n"
        text += "".join(",".join(str(v) for v in r.values()) + "\n" for r in rows)
        name = "t.csv"
    data = text.encode()
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(GARBAGE) + data[at:]
    return name, data


@settings(FUZZ, max_examples=fuzz_examples(100))
@given(spec=trace_files())
def test_hostile_traces(cli, tmp_path, spec) -> None:
    name, data = spec
    root = fresh(tmp_path)
    profiles = _trace_profile(root, name)
    (profiles / "workload" / name).write_bytes(data)
    assert_clean(
        cli("size", "--profiles", str(profiles), "--workload", "tr", "--json"), json_out=True
    )
    out = root / "prev.csv"
    out.write_text(PREVIOUS)
    result = assert_clean(
        cli(
            "sweep",
            "--profiles",
            str(profiles),
            "--workload",
            "tr",
            "--grid",
            "P=1:2",
            "--out",
            str(out),
        )
    )
    if result.code != 0:
        assert out.read_text() == PREVIOUS
    assert no_temp_files(root)


@st.composite
def measurement_files(draw):
    header = ["metric", "value", "mode", "prefill_nodes", "decode_nodes"]
    if draw(st.booleans()):
        header.append("agents")
    if draw(st.integers(0, 5)) == 0:
        header[draw(st.integers(0, len(header) - 1))] = draw(st.sampled_from(["metric", "x", ""]))
    lines = ["# measured", ",".join(header)]
    for _ in range(draw(st.integers(0, 4))):
        cells = []
        for h in header:
            if h == "metric":
                cells.append(draw(st.sampled_from(["jct_s", "tpot_s", "aps", "speed", ""])))
            elif h == "mode":
                cells.append(draw(st.sampled_from(["dualpath", "basic", "x"])))
            elif h == "value":
                cells.append(draw(st.sampled_from(["3000", "0.04", *HOSTILE_CELLS])))
            else:
                cells.append(draw(st.sampled_from(["2", "4", "512", *HOSTILE_CELLS])))
        if draw(st.integers(0, 6)) == 0:
            cells = cells[: draw(st.integers(0, len(cells)))]
        lines.append(",".join(cells))
    data = ("\n".join(lines) + "\n").encode()
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(GARBAGE) + data[at:]
    return data


@settings(FUZZ, max_examples=fuzz_examples(60))
@given(data=measurement_files())
@example(  # one valid JCT point, which does not determine prefill_mfu: exit 1
    data=b"metric,value,mode,prefill_nodes,decode_nodes,agents\njct_s,3000,dualpath,2,2,2\n"
)
def test_hostile_measurements(cli, tmp_path, data) -> None:
    root = fresh(tmp_path)
    measured = root / "m.csv"
    measured.write_bytes(data)
    node = root / "out" / "node" / "dualpath-hopper.toml"
    node.parent.mkdir(parents=True)
    node.write_text(PREVIOUS)
    # Exit 1 is a fit the points do not determine (one JCT point, say): reported, nothing
    # written (README, calibrate), as check's 1 is a regression.
    result = assert_clean(
        cli(
            "calibrate", str(measured), "--fit", "prefill_mfu", "--out", str(root / "out"), "--json"
        ),
        allowed=(0, 1, 2),
        json_out=True,
    )
    if result.code != 0:
        assert node.read_text() == PREVIOUS
    assert no_temp_files(node.parent)


HOSTILE_JSON_TEXT = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e999",
    "-1",
    "0",
    '"1"',
    "true",
    "null",
    "[]",
    "{}",
    '"x\\nerror: y\\u0000\\ud800"',
    "[" * 50 + "]" * 50,
    "9" * 5000,
    "12.5",
]


@st.composite
def baseline_files(draw):
    template = json.dumps(_ratio_baseline({"value": 12.5, "rel_tol": 0.25}))
    slots = [
        '"version": 1',
        '"id": "ratio"',
        '"kind": "ratio"',
        '"model": "deepseek-v3.2"',
        "[16384]",
        '"append_tokens": 429',
        '"value": 12.5',
        '"rel_tol": 0.25',
        '"gb_per_pflop.16384"',
    ]
    text = template
    for _ in range(draw(st.integers(1, 3))):
        slot = draw(st.sampled_from(slots))
        if slot not in text:
            continue
        key, colon, _ = slot.partition(": ")
        value = draw(st.sampled_from(HOSTILE_JSON_TEXT))
        text = text.replace(slot, f"{key}: {value}" if colon else value, 1)
    data = text.encode()
    if draw(st.integers(0, 5)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(GARBAGE) + data[at:]
    return data


@settings(FUZZ, max_examples=fuzz_examples(100))
@given(data=baseline_files(), update=st.booleans())
def test_hostile_baselines(cli, tmp_path, data, update) -> None:
    root = fresh(tmp_path)
    baseline = root / "b.json"
    baseline.write_bytes(data)
    junit = root / "report.xml"
    junit.write_text(PREVIOUS)
    args = ["check", str(baseline), "--junit", str(junit), "--json"]
    if update:
        args.append("--update")
    result = assert_clean(cli(*args), allowed=(0, 1, 2), json_out=True)
    if result.code == 2:
        assert junit.read_text() == PREVIOUS
        assert baseline.read_bytes() == data
    else:
        ET.fromstring(junit.read_text(encoding="utf-8"))
    assert no_temp_files(root)


@st.composite
def case_files(draw):
    kind = draw(st.sampled_from(["size", "ratio", "bounds", "ordering", "workload_ratio", "trend"]))
    metric = {
        "size": "dualpath.jct_s",
        "ratio": "gb_per_pflop.16384",
        "bounds": "pd_max",
        "ordering": "holds",
        "workload_ratio": "gb_per_pflop",
        "trend": "flops_x",
    }[kind]
    fields = {
        "claim": '"c"',
        "source": '"s"',
        "kind": json.dumps(kind),
        "metric": json.dumps(metric),
        "paper": "1000",
        "tolerance": "0.5",
    }
    inputs = {
        "size": {
            "modes": '["dualpath"]',
            "agents": "512",
            "prefill_nodes": "2",
            "decode_nodes": "4",
        },
        "ratio": {"model": '"ds-27b"', "context_tokens": "[16384]", "append_tokens": "429"},
        "bounds": {"node": '"dualpath-hopper"', "paper_assumptions": "true"},
        "ordering": {"modes": '["basic", "dualpath"]', "agents": "256"},
        "workload_ratio": {"model": '"deepseek-v3.2"', "workload": '"paper-64k"'},
        "trend": {"base": '"a100-sxm-80gb"', "dtype": '"best"', "gpu": '"b200"'},
    }[kind]
    for _ in range(draw(st.integers(1, 3))):
        table = draw(st.sampled_from(["fields", "inputs"]))
        target = fields if table == "fields" else inputs
        key = draw(st.sampled_from([*sorted(target), "extra"]))
        if draw(st.integers(0, 4)) == 0:
            target.pop(key, None)
        else:
            target[key] = draw(st.sampled_from(HOSTILE_TOML_VALUES))
    text = "".join(f"{k} = {v}\n" for k, v in fields.items())
    text += "[inputs]\n" + "".join(f"{k} = {v}\n" for k, v in inputs.items())
    data = text.encode()
    if draw(st.integers(0, 5)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(GARBAGE) + data[at:]
    return data


@settings(FUZZ, max_examples=fuzz_examples(80))
@given(data=case_files())
def test_hostile_cases(cli, tmp_path, data) -> None:
    cases = fresh(tmp_path)
    (cases / "zz-fuzz.toml").write_bytes(data)
    # Every case file is read and checked; only the hostile one is evaluated.
    result = cli("validate", "--cases", str(cases), "--only", "zz-fuzz", "--json")
    assert_clean(result, allowed=(0, 1, 2), json_out=True)


def test_no_leftovers_in_the_shipped_library() -> None:
    """Nothing here writes beside the shipped profiles."""
    assert not list(BUILTIN.rglob(".*.tmp"))


def test_rich_markup_in_a_profile_name_or_baseline_id_is_not_a_crash(cli, tmp_path) -> None:
    node = tmp_path / "profiles" / "node"
    node.mkdir(parents=True)
    src = (BUILTIN / "node" / "dgx-b200.toml").read_text()
    lines = ['name = "[/x] bad"' if ln.startswith("name =") else ln for ln in src.splitlines()]
    (node / "dgx-b200.toml").write_text("\n".join(lines) + "\n")
    assert_clean(cli("profiles", "list", "--profiles", str(tmp_path / "profiles")))
    data = _baseline_with_regression()
    data["scenarios"][0]["id"] = "[/x]"
    baseline = tmp_path / "b.json"
    baseline.write_text(json.dumps(data))
    assert_clean(cli("check", str(baseline)), allowed=(1,))


# --- the command-line examples of issue 16 ------------------------------------------------


def test_sweep_rejects_what_size_rejects(cli) -> None:
    # sweep -P 0 exited 0 with "0 feasible" where size rejected the same input.
    for command in ("size", "sweep"):
        extra = ("--grid", "D=1:3") if command == "sweep" else ()
        result = assert_clean(cli(command, "-P", "0", *extra))
        assert result.code == 2 and "-P/--prefill-nodes" in result.err


def test_sweep_modes_are_counted_once(cli) -> None:
    once = cli("sweep", "--grid", "P=1:3", "--mode", "dualpath", "--json").json()
    twice = cli("sweep", "--grid", "P=1:3", "--mode", "dualpath,dualpath", "--json").json()
    assert twice["points"] == once["points"] == 3
    assert twice["modes"] == once["modes"]


def test_max_nodes_has_a_limit(cli) -> None:
    # size --target-aps 1e9 --max-nodes 1e9 never ended.
    start = time.monotonic()
    result = assert_clean(cli("size", "--target-aps", "1e9", "--max-nodes", "1000000000"))
    assert result.code == 2 and "--max-nodes" in result.err and "4,096" in result.err
    # Checked without a search too: 0 and 5000 were accepted where nothing read them (found in
    # a trial).
    for bad in ("0", "5000"):
        result = assert_clean(cli("size", "--max-nodes", bad))
        assert result.code == 2 and "--max-nodes" in result.err
    assert time.monotonic() - start < 5


@pytest.mark.parametrize(
    ("grid", "expect"),
    [
        (("node.snic_gbit_s=1:800:10000000lin",), "values of a profile field"),
        (("P=1:100", "D=1:100", "agents=1:100000"), "raise --max-points"),
        # past what --max-points may allow (issue 35: "raise --max-points" for 10^15 points)
        (("P=1:100000", "D=1:100000", "agents=1:100000"), "more than any sweep evaluates"),
        (("P=1:1000000", "D=1:1000000", "agents=1:10000000"), "more than any sweep evaluates"),
        (("P=1:10000000", "D=1:4"), "from 1 to 1,000,000"),
    ],
)
def test_grid_limits_are_stated_before_any_work(cli, tmp_path, grid, expect) -> None:
    # A 10^9-point sweep was accepted silently; a grid whose product overflows failed late.
    out = tmp_path / "points.csv"
    out.write_text(PREVIOUS)
    start = time.monotonic()
    args = [a for g in grid for a in ("--grid", g)]
    result = assert_clean(cli("sweep", *args, "--out", str(out)))
    assert result.code == 2 and expect in result.err
    assert time.monotonic() - start < 5
    assert out.read_text() == PREVIOUS


def test_max_points_raises_the_limit(cli) -> None:
    grid = ("--grid", "P=1:20", "--grid", "D=1:20")
    assert cli("sweep", *grid, "--max-points", "100").code == 2
    assert cli("sweep", *grid, "--max-points", "400", "--json").json()["points"] == 400


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("trend", "--base", "tpu-v5"), "--base"),
        (("recommend", "--budget-nodes", "8", "--phase", ":"), "--phase"),
        (("recommend", "--budget-nodes", "8", "--phase", "nope:1"), "--phase"),
        (("paths", "--scheduler", "round_robin", "--load-cv", "1e300"), "--load-cv"),
        (("size", "--requests-per-engine", "0"), "--requests-per-engine"),
    ],
)
def test_errors_name_the_option_typed(cli, args, option) -> None:
    result = assert_clean(cli(*args))
    assert result.code == 2 and f"'{option}" in result.err, result.err


def test_long_reads_report_progress(tmp_path) -> None:
    # A long trace says where it is (the CLI shows it on stderr when that is a terminal).
    from dualpath_plan.files import PROGRESS_ROWS, report_read_progress

    trace = tmp_path / "t.csv"
    rows = "".join(f"t{k % 100},5,1\n" for k in range(2 * PROGRESS_ROWS + 5))
    trace.write_text("trajectory_id,append_tokens,generated_tokens\n" + rows)
    seen: list[tuple[str, int, bool]] = []
    report_read_progress(lambda source, n, done: seen.append((source, n, done)))
    try:
        load_trace(trace)
    finally:
        report_read_progress(None)
    total = 2 * PROGRESS_ROWS + 5
    assert seen == [
        (str(trace), PROGRESS_ROWS, False),
        (str(trace), 2 * PROGRESS_ROWS, False),
        (str(trace), total, True),
    ]


@pytest.mark.parametrize(
    "args",
    [("size", "-P", "abc"), ("size", "--bogus"), ("check",), ("nope",), ("sweep", "--grid")],
)
def test_usage_errors_are_one_line(cli, args) -> None:
    # Bad types, unknown options and missing arguments printed click's multi-line box.
    result = assert_clean(cli(*args))
    assert result.code == 2
    assert result.err.startswith("error: ") and result.err.count("\n") == 1, result.err


def test_a_profile_wide_error_does_not_echo_the_profile(cli) -> None:
    # --set node.gpus_per_node=1 dumped the whole profile dict into the message.
    result = assert_clean(cli("size", "--set", "node.gpus_per_node=1"))
    assert result.code == 2 and "cnic_count" in result.err and "sources" not in result.err
    assert len(result.err) < 300


def test_budget_errors_name_the_budget_given(cli) -> None:
    result = assert_clean(cli("recommend", "--budget-gpus", "7"))
    assert result.code == 2 and "'--budget-gpus'" in result.err
    result = assert_clean(cli("paths", "--prefill-group", "nope:2"))
    assert result.code == 2 and "'--prefill-group'" in result.err


@pytest.mark.parametrize(
    ("baseline", "expect"),
    [
        (
            {"scenarios": [{"id": "x", "kind": "bounds", "inputs": {}}] * 2},
            "recorded twice",
        ),
        ({"version": 99, "scenarios": []}, "version"),
        (
            {"scenarios": [{"id": "x", "kind": "size", "inputs": {"model": "nope"}}]},
            "scenarios[0].inputs",
        ),
    ],
)
def test_baselines_are_one_format_with_unique_ids(cli, tmp_path, baseline, expect) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps(baseline))
    result = assert_clean(cli("check", str(path)))
    assert result.code == 2 and expect in result.err and "b.json" in result.err


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (("size", "--set", "workload.turns=0.5"), "turns"),
        (("ratio", "--model", "ds-27b", "--context", "1e30"), "--context"),
        (("ratio", "--model", "ds-27b", "--append", "1e-300"), "--append"),
        # Beyond the model's window, as size refuses such a workload (it printed a ratio).
        (
            ("ratio", "--model", "deepseek-v3.2", "--context", "1000000"),
            "exceeds deepseek-v3.2's context_window_tokens 163,840",
        ),
        # Shown as 2 in the table, 1.5 in the JSON; an empty item was dropped.
        (("ratio", "--model", "ds-27b", "--context", "1.5"), "expected whole token counts"),
        (("ratio", "--model", "ds-27b", "--context", "1,,2"), "an empty item between commas"),
    ],
)
def test_absurd_quantities_are_refused(cli, args, expect) -> None:
    result = assert_clean(cli(*args))
    assert result.code == 2 and expect in result.err


def test_a_profile_in_the_wrong_folder_says_so_first(cli, tmp_path) -> None:
    node = tmp_path / "p" / "node"
    node.mkdir(parents=True)
    (node / "x.toml").write_text((BUILTIN / "gpu" / "h100-sxm.toml").read_text())
    result = assert_clean(cli("profiles", "list", "--profiles", str(tmp_path / "p")))
    assert result.code == 2 and "a gpu profile in a 'node' folder" in result.err


def test_profiles_validate_finds_a_missing_trace(cli, tmp_path) -> None:
    w = tmp_path / "workload"
    w.mkdir()
    (w / "tr.toml").write_text(
        'kind = "workload"\nname = "t"\nturns = 10\nappend_tokens = 100\n'
        'generated_tokens = 100\ncontext_tokens = 1000\ntrace_file = "gone.csv"\n'
    )
    result = cli("profiles", "validate", str(w / "tr.toml"))
    assert result.code == 2 and "gone.csv" in result.err and result.err.startswith("error: ")


def test_a_writer_thread_refused_or_interrupted_at_start(cli, tmp_path, monkeypatch) -> None:
    # No thread to be had (a process or thread limit): the same file, written in line.
    expected = tmp_path / "expected.csv"
    assert cli(*_sweep_args(expected)).code == 0
    start = threading.Thread.start

    def refused(thread: threading.Thread) -> None:
        if thread.name == "dualpath-plan-writer":
            raise RuntimeError("can't start new thread")
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", refused)
    out = tmp_path / "out.csv"
    assert cli(*_sweep_args(out)).code == 0
    assert out.read_bytes() == expected.read_bytes() and no_temp_files(tmp_path)

    # Ctrl-C as the writer starts (the compiled writer's thread, or the header, without it):
    # the previous file kept, no temporary file left.
    def interrupted(thread: threading.Thread) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", interrupted)
    if sweep_report.text_columns.rowtext is None:
        monkeypatch.setattr(sweep_report.csv, "writer", interrupted)
    out.write_text(PREVIOUS)
    with pytest.raises(KeyboardInterrupt):
        PointWriter(out, [])
    assert out.read_text() == PREVIOUS and no_temp_files(tmp_path)


def test_no_output_replaces_an_input_or_another_output(cli, tmp_path) -> None:
    """INV-55: an output over a profile, the workload's trace or a file the run reads (or
    over another output of the run) is one line naming it and its flag, exit 2, the file as
    it was. sweep --out over a trace, recommend --markdown over a profile and check --junit
    over its baseline replaced them (found in a trial)."""
    trace_src = Path(__file__).parent / "data" / "traces" / "mooncake_synthetic_trace.jsonl"
    imported = cli(
        "workload", "import", str(trace_src), "--format", "mooncake",
        "--out", str(tmp_path / "p"), "--id", "mc",
    )  # fmt: skip
    assert imported.code == 0, imported.err
    profiles = str(tmp_path / "p")
    trace = next((tmp_path / "p" / "workload").glob("mc.*sv"))
    profile = tmp_path / "p" / "workload" / "mc.toml"
    baseline = tmp_path / "baseline.json"
    baseline.write_bytes((Path(__file__).parent / "baseline.json").read_bytes())
    # A baseline whose scenario runs the imported workload: its trace is an input of check.
    mine = tmp_path / "mine.json"
    scenario = {"id": "s", "kind": "workload_ratio", "inputs": {"workload": "mc"}}
    mine.write_text(json.dumps({"scenarios": [scenario]}))
    scenario = ("--profiles", profiles, "--workload", "mc", "--set",
                "model.context_window_tokens=200000")  # fmt: skip
    cases = [
        (("sweep", *scenario, "--grid", "P=2:3", "--out", str(trace)), trace, "--out"),
        (("sweep", *scenario, "--grid", "P=2:3", "--out", str(profile)), profile, "--out"),
        (("simulate", *scenario, "--agents", "8", "--out", str(trace)), trace, "--out"),
        (("size", *scenario, "--aps-curve", "0.1:0.2:2", "--out", str(trace)), trace, "--out"),
        (("recommend", *scenario, "--budget-nodes", "6", "--markdown", str(profile)), profile,
         "--markdown"),
        (("check", str(baseline), "--junit", str(baseline)), baseline, "--junit"),
        (("check", str(mine), "--profiles", profiles, "--junit", str(trace)), trace, "--junit"),
        (("aic", "check", str(AIC_RESULT), "--node", "dualpath-hopper", "--profiles", profiles,
          "--out", str(profile)), profile, "--out"),
    ]  # fmt: skip
    for args, target, flag in cases:
        before = target.read_bytes()
        result = assert_clean(cli(*args))
        assert result.code == 2, (args, result.err)
        assert flag in result.err and str(target) in result.err and "input" in result.err, args
        assert target.read_bytes() == before, args
    # The importers: the trace or system file read is never the file written (workload
    # import replaced a raw Mooncake trace by its normalized copy; found in a trial).
    raw = tmp_path / "w" / "workload" / "mc.csv"
    raw.parent.mkdir(parents=True)
    raw.write_bytes(trace_src.read_bytes())
    system = tmp_path / "a" / "gpu" / "x.toml"
    system.parent.mkdir(parents=True)
    system.write_bytes((Path(__file__).parent / "data" / "aic" / "h200_sxm.yaml").read_bytes())
    flags = ("--snic-count", "2", "--snic-gbit-s", "400", "--dram-gbyte", "2048",
             "--dram-gbyte-s", "614.4", "--cnic-count", "8", "--release-year", "2024")  # fmt: skip
    for args, target in (
        (("workload", "import", str(raw), "--format", "mooncake", "--out", str(tmp_path / "w")),
         raw),
        (("aic", "import-system", str(system), "--out", str(tmp_path / "a"), "--id", "x", *flags),
         system),
    ):  # fmt: skip
        before = target.read_bytes()
        result = assert_clean(cli(*args))
        assert result.code == 2 and "input" in result.err and str(target) in result.err, args
        assert target.read_bytes() == before
    # Two outputs of one run on one file: refused before either is written.
    same = tmp_path / "report.svg"
    result = assert_clean(
        cli("recommend", "--budget-nodes", "6", "--plot", str(same), "--markdown", str(same))
    )
    assert result.code == 2 and "--markdown" in result.err and "--plot" in result.err
    assert not same.exists()
    # One file by two names (a hard link) is one output too.
    chart, report = tmp_path / "a.svg", tmp_path / "b.md"
    chart.write_text(PREVIOUS)
    os.link(chart, report)
    result = assert_clean(
        cli("recommend", "--budget-nodes", "6", "--plot", str(chart), "--markdown", str(report))
    )
    assert result.code == 2 and "--markdown" in result.err and chart.read_text() == PREVIOUS


@pytest.mark.parametrize(
    "args",
    [
        ("calibrate", str(PAPER_POINTS), "--seed", "-1"),
        ("calibrate", str(PAPER_POINTS), "--seed", "99999999999999999999999"),
        ("simulate", "--seed", "-1"),
    ],
)
def test_a_seed_out_of_range_is_one_line(cli, args) -> None:
    # calibrate passed -1 to NumPy: "internal error", exit 1 (found in a trial).
    result = assert_clean(cli(*args))
    assert result.code == 2 and "--seed" in result.err and "4,294,967,295" in result.err


@pytest.mark.parametrize("curve", ["0:1e-6:3", "1e-6:1.000001e-6:3"])
def test_an_aps_curve_of_tiny_rates_draws(cli, tmp_path, curve) -> None:
    # Its axis ticks rounded to 0 and the chart divided by zero: "internal error". (Rates
    # under 1e-6 agents/s, as 0:1e-300:3 was, are refused since issue 35: plausible.py's "aps".)
    out = tmp_path / "c.svg"
    result = assert_clean(cli("size", "--aps-curve", curve, "--out", str(out)))
    assert result.code == 0 and out.read_text().startswith("<svg")
    tiny = assert_clean(cli("size", "--aps-curve", "0:1e-300:3", "--out", str(out)))
    assert tiny.code == 2 and "--aps-curve" in tiny.err


def test_weights_whose_sum_overflows_are_shares_of_it(cli) -> None:
    # Two phases of 1e308 each were 0% each (their sum overflowed to inf) and the LP of two
    # classes of 1e308 was "unbounded" (found in a trial): equal weights are equal shares.
    def phases(w: str) -> object:
        args = ("--phase", f"paper-64k:{w}", "--phase", f"paper-32k:{w}")
        data = cli("recommend", "--budget-nodes", "8", *args, "--json").json()
        return data["phases"]

    assert phases("1e308") == phases("1")

    def classes(w: str) -> float:
        args = ("--class", f"paper-64k:{w}", "--class", f"paper-32k:{w}", "--json")
        result = assert_clean(cli("paths", *args))
        assert result.code == 0, result.err
        return result.json()["saturated_turns_per_s"]

    assert classes("1e308") == classes("1")


def test_a_cost_budget_gives_the_same_splits_at_any_scale(cli) -> None:
    # An absolute slack of 1e-9 made a budget of 1e-30 (nodes of 1e-31) count without end, and
    # 1e-8 "buy no node"; a decode node of 1e-320 overflowed (found in a trial).
    def splits(scale: float) -> list[tuple[int, int]]:
        args = (
            "--budget-cost", repr(10 * scale),
            "--prefill-node-cost", repr(scale), "--decode-node-cost", repr(scale),
        )  # fmt: skip
        data = cli("recommend", *args, "--storage", "none", "--json").json()
        return [(c["prefill_nodes"], c["decode_nodes"]) for c in data["candidates"]]

    expected = splits(1.0)
    assert len(expected) == 9
    for scale in (1e-31, 1e-9, 1e29):
        assert splits(scale) == expected, scale
    for cost in ("1e-320", "1e-10"):
        # (a prefill node's $/h is its profile's price unless given: 1 here, as before)
        args = ("--budget-cost", "10", "--prefill-node-cost", "1", "--decode-node-cost", cost)
        result = assert_clean(cli("recommend", *args, "--storage", "none"))
        assert result.code == 2 and "decode nodes" in result.err


@pytest.mark.parametrize("flag", [("--context", "16K"), ("--append", "5000")])
def test_ratio_refuses_a_turn_beside_a_workload(cli, flag) -> None:
    # --workload sets the turn: a --context or --append beside it was ignored, exit 0, and the
    # output showed the workload's 32,721 / 429 (found in a trial).
    args = ("ratio", "--model", "deepseek-v3.2", "--workload", "paper-64k", *flag)
    result = assert_clean(cli(*args))
    assert result.code == 2 and flag[0] in result.err and "--workload" in result.err
    alone = cli("ratio", "--model", "deepseek-v3.2", *flag, "--json")
    assert alone.code == 0 and alone.json()["rows"]


def test_inputs_that_check_nothing_or_overflow_are_one_line(cli, tmp_path) -> None:
    # Each passed or printed inf (found in a trial): an empty --cases directory (exit 0), a file
    # as --cases ("no such directory"), an empty baseline (exit 0), a case tolerance of 1e308
    # ("inf%"), and simulate's messages where a count overflowed ("inf windows").
    empty = tmp_path / "empty"
    empty.mkdir()
    baseline = tmp_path / "b.json"
    baseline.write_text('{"scenarios": []}')
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "t.toml").write_text(
        'claim = "x"\nsource = "y"\nkind = "ratio"\nmetric = "gb_per_pflop.32768"\n'
        'paper = 21.7\ntolerance = 1e308\n[inputs]\nmodel = "deepseek-v3.2"\n'
        "context_tokens = [32768]\nappend_tokens = 429\n"
    )
    for args, expect in (
        (("validate", "--cases", str(empty)), "no case files"),
        (("validate", "--cases", str(baseline)), "is a file"),
        (("check", str(baseline)), "at least one scenario"),
        (("validate", "--cases", str(cases), "--only", "t"), "tolerance"),
        # (since issue 35 refused before any count: plausible.py's ranges)
        (("simulate", "--window", "1e-320"), "outside what a time series' window is"),
        (("simulate", "--aps", "1e308"), "outside what an arrival rate of agents is"),
    ):
        result = assert_clean(cli(*args))
        assert result.code == 2 and expect in result.err, (args, result.err)
        assert "inf" not in result.err.replace("info", ""), result.err


def test_errors_name_the_file_and_row_or_the_flag_that_set_it(cli, tmp_path) -> None:
    # Each named '-P/--prefill-nodes' or '--model', flags the user never gave (found in a
    # trial): a calibrate row whose cluster cannot hold the model, a case's unknown model, a
    # --prefill-group of one node.
    lines = PAPER_POINTS.read_text().splitlines()
    row = next(i for i, ln in enumerate(lines) if ln.startswith("jct_s,"))
    lines[row] = lines[row].replace(",2,4,", ",1,1,")
    points = tmp_path / "points.csv"
    points.write_text("\n".join(lines) + "\n")
    result = assert_clean(cli("calibrate", str(points), "--fit", "snic_efficiency"))
    assert result.code == 2
    assert f"{points}: line {row + 1}: field 'prefill_nodes': 1P1D" in result.err, result.err
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "t.toml").write_text(
        'claim = "x"\nsource = "y"\nkind = "ratio"\nmetric = "gb_per_pflop.32768"\n'
        'paper = 21.7\ntolerance = 0.1\n[inputs]\nmodel = "nope"\n'
        "context_tokens = [32768]\nappend_tokens = 429\n"
    )
    result = assert_clean(cli("validate", "--cases", str(cases), "--only", "t"))
    assert result.code == 2 and f"{cases / 't.toml'}: field 'inputs'" in result.err, result.err
    result = assert_clean(cli("paths", "--prefill-group", "dualpath-hopper"))
    assert result.code == 2 and "field '--prefill-group'" in result.err, result.err


@pytest.mark.parametrize(
    "trace",
    [b"", b"\x8e\x01\xff" * 100, b"trajectory_id,append_tokens\n1,5\n", b"nan,nan,nan\n"],
)
def test_profiles_validate_reads_a_workloads_trace(cli, tmp_path, trace) -> None:
    # An empty, binary or column-less trace behind a workload profile was "valid", and size
    # then failed on it (found in a trial).
    src = Path(__file__).parent / "data" / "traces" / "mooncake_synthetic_trace.jsonl"
    out = tmp_path / "p"
    assert cli("workload", "import", str(src), "--format", "mooncake", "--out", str(out),
               "--id", "m").code == 0  # fmt: skip
    assert cli("profiles", "validate", str(out)).code == 0
    (out / "workload" / "m.csv").write_bytes(trace)
    result = assert_clean(cli("profiles", "validate", str(out)))
    assert result.code == 2 and "m.csv" in result.out + result.err


@pytest.mark.parametrize("entry", ["broken link", "directory", "loop"])
def test_a_profile_entry_that_is_not_a_file_is_an_error(cli, tmp_path, entry) -> None:
    # Skipped, the built-in dualpath-hopper answered instead of the user's (found in a trial).
    node = tmp_path / "p" / "node"
    node.mkdir(parents=True)
    target = node / "dualpath-hopper.toml"
    if entry == "broken link":
        target.symlink_to(tmp_path / "nowhere.toml")
    elif entry == "directory":
        target.mkdir()
    else:
        target.symlink_to(target)
    result = assert_clean(cli("size", "--profiles", str(tmp_path / "p")))
    assert result.code == 2 and str(target) in result.err and "not a profile file" in result.err


def test_a_change_has_the_sign_of_its_direction() -> None:
    from dualpath_plan.validation.check import MetricDiff

    cases = ((-1e308, 1.0), (-2.0, -1.0), (2.0, 3.0), (-2.0, -3.0), (2.0, 1.0), (-1e308, 1e308))
    for baseline, value in cases:
        d = MetricDiff("s", "m", baseline, value, 1e-6)
        assert math.isfinite(d.change), (baseline, value)
        assert (d.change > 0) == (d.direction == "up"), (baseline, value, d.change)


def test_a_duplicate_scenario_id_is_one_short_line(cli, tmp_path) -> None:
    # The message echoed every scenario, 2 KB on one line (found in a trial).
    data = json.loads((Path(__file__).parent / "baseline.json").read_text())
    data["scenarios"] = [data["scenarios"][0]] * 2
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    result = assert_clean(cli("check", str(path)))
    assert result.code == 2 and "recorded twice" in result.err and len(result.err) < 300


def test_an_output_through_a_link_replaces_the_file_it_points_to(cli, tmp_path) -> None:
    # The rename replaced the link itself with a regular file and left its target as it was
    # (recommend --markdown, sweep --out over a dangling link, check --update; found in a trial).
    real, link = tmp_path / "real.md", tmp_path / "link.md"
    real.write_text(PREVIOUS)
    link.symlink_to(real)
    assert cli("recommend", "--budget-nodes", "6", "--markdown", str(link)).code == 0
    assert link.is_symlink() and real.read_text().startswith("# P/D ratio recommendation")
    dangling = tmp_path / "points.csv"
    dangling.symlink_to(tmp_path / "new.csv")
    assert cli("sweep", "--grid", "P=1:2", "--out", str(dangling)).code == 0
    assert dangling.is_symlink() and (tmp_path / "new.csv").read_text().startswith("point,")
    base_real, base_link = tmp_path / "b" / "real.json", tmp_path / "base.json"
    base_real.parent.mkdir()
    inputs = {"model": "deepseek-v3.2", "context_tokens": [16384], "append_tokens": 429}
    scenario = {"id": "a", "kind": "ratio", "inputs": inputs}
    base_real.write_text(json.dumps({"scenarios": [scenario]}))
    base_link.symlink_to(base_real)
    assert cli("check", str(base_link), "--update").code == 0
    assert base_link.is_symlink() and json.loads(base_real.read_text())["scenarios"][0]["metrics"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    "args",
    [("size",), ("size", "--json"), ("profiles", "list"), ("bounds", "--json"), ("--version",)],
)
def test_a_standard_output_that_refuses_writes_is_one_line(args) -> None:
    # "internal error ... OSError: No space left on device", exit 1 (found in a trial); a
    # reader that closes the pipe early ends the run quietly, as SIGPIPE would (141).
    exe = Path(sys.executable).with_name("dualpath-plan")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "dualpath_plan.cli.app"]
    # Buffered as a plain run is (a short output still in the buffer when the command returns
    # was flushed at exit, outside the guard: "Exception ignored", found in review).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [*cmd, *args], stdout=full, stderr=subprocess.PIPE, timeout=60, env=env
        )
    err = proc.stderr.decode()
    assert proc.returncode == 2 and err == "error: standard output: No space left on device\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    ("args", "name"),
    [
        (("sweep", "--grid", "P=2:3", "--grid", "D=2:3", "--out"), "x.csv"),
        (("recommend", "--budget-nodes", "6", "--markdown"), "r.md"),
        (("size", "--aps-curve", "0.1:0.3:3", "--out"), "c.csv"),
    ],
)
def test_a_run_whose_report_fails_leaves_its_outputs(tmp_path, args, name) -> None:
    """Standard output refusing the report fails the run (exit 2) after its files were
    written: they stay as they were, no temporary file left (they had been replaced: found in
    a trial)."""
    exe = Path(sys.executable).with_name("dualpath-plan")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "dualpath_plan"]
    target = tmp_path / name
    target.write_text("keep\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [*cmd, *args, str(target)], stdout=full, stderr=subprocess.PIPE, timeout=120,
            env=env, cwd=tmp_path,
        )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert target.read_text() == "keep\n" and sorted(tmp_path.iterdir()) == [target]
    ok = subprocess.run([*cmd, *args, str(target)], capture_output=True, timeout=120, env=env)
    assert ok.returncode == 0 and target.read_text() != "keep\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_failed_import_leaves_no_folder(tmp_path) -> None:
    """The folders an import creates for its files go with them when the run fails after
    (standard output refusing the report left empty workload/ folders: found in a trial)."""
    exe = Path(sys.executable).with_name("dualpath-plan")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "dualpath_plan"]
    trace = tmp_path / "t.csv"
    trace.write_text("trajectory_id,append_tokens,generated_tokens\na,100,10\n")
    out = tmp_path / "new" / "profiles"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    args = [*cmd, "workload", "import", str(trace), "--format", "csv", "--out", str(out)]
    with open("/dev/full", "w") as full:
        proc = subprocess.run(args, stdout=full, stderr=subprocess.PIPE, timeout=60, env=env)
    assert proc.returncode == 2 and not (tmp_path / "new").exists()
    assert subprocess.run(args, capture_output=True, timeout=60, env=env).returncode == 0
    assert (out / "workload" / "t.toml").is_file()


def test_a_closed_standard_output_is_one_line() -> None:
    # Started with standard output closed (>&-): a traceback at import (found in a check).
    exe = Path(sys.executable).with_name("dualpath-plan")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "dualpath_plan.cli.app"]
    proc = subprocess.run(
        ["sh", "-c", '"$@" >&-', "sh", *cmd, "size"], stderr=subprocess.PIPE, timeout=60
    )
    assert proc.returncode == 2 and proc.stderr == b"error: standard output: closed\n"


def test_a_reader_that_closes_the_pipe_ends_the_run_quietly() -> None:
    # An output far larger than a pipe's buffer, and a reader that takes 10 bytes (| head).
    exe = Path(sys.executable).with_name("dualpath-plan")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "dualpath_plan.cli.app"]
    args = ("size", "--aps-curve", "0.001:0.3:10000")
    pipe = subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert pipe.stdout is not None and pipe.stderr is not None
    pipe.stdout.read(10)
    pipe.stdout.close()
    assert pipe.wait(timeout=60) == 141 and pipe.stderr.read() == b""


@pytest.mark.parametrize(
    "kwargs",
    [{"agents": 0}, {"agents": -5}, {"agents": math.nan}, {"agents": math.inf}, {"agents": 1.5},
     {"agents": 2.0}, {"agents": True}, {"agents": "5"}, {"agents": None},
     {"ttft_slo_s": 0.0}, {"tpot_slo_s": math.nan}, {"ttft_slo_s": "4"}],
)  # fmt: skip
def test_a_library_serving_config_takes_the_specs_bounds(kwargs) -> None:
    # agents=0 divided by zero and -5 gave a negative JCT through evaluate() (found in a trial).
    from dualpath_plan.scenario.spec import ServingConfig

    with pytest.raises(PlanInputError):
        ServingConfig(**kwargs)
