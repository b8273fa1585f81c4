from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dualpath_plan.cli.common import GlobalState
from dualpath_plan.profiles.registry import ENV_VAR, Registry, builtin_profiles_dir

BUILTIN = builtin_profiles_dir()
BENCH = Path(__file__).parent.parent / "bench"


def load_bench(name: str) -> Any:
    """The script ``bench/<name>.py`` as a module (the benches are scripts, not a package):
    tests read its draws and measurements as the bench prints them."""
    # A script imports the scripts beside it, as run from bench/ (its folder on the path).
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> dict:
        return json.loads(self.out)


# The hostile-input tests' examples: their full counts times FUZZ_SCALE (CI: 0.6, the suite
# under five minutes; FUZZ_SCALE=1 or more for a longer run).
FUZZ_SCALE = float(os.environ.get("FUZZ_SCALE", "0.6"))


def fuzz_examples(full: int) -> int:
    return max(1, round(full * FUZZ_SCALE))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    GlobalState.profiles = []
    GlobalState.overrides = []


@pytest.fixture(scope="session")
def registry() -> Registry:
    saved = os.environ.pop(ENV_VAR, None)
    try:
        return Registry.load()
    finally:
        if saved is not None:
            os.environ[ENV_VAR] = saved


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run the CLI in-process; returns exit code and captured output."""
    from dualpath_plan.cli.app import main

    def run(*args: str) -> CliResult:
        GlobalState.profiles = []
        GlobalState.overrides = []
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture(scope="session")
def _kept_runs() -> dict[tuple[str, ...], CliResult]:
    return {}


@pytest.fixture
def kept_cli(
    cli: Callable[..., CliResult], _kept_runs: dict[tuple[str, ...], CliResult]
) -> Callable[..., CliResult]:
    """``cli`` for runs that read only the shipped files (``validate`` of the shipped cases:
    seconds each, for the simulation cases): each set of arguments run once per session and
    its result given to every test that asks for it."""

    def run(*args: str) -> CliResult:
        if args not in _kept_runs:
            _kept_runs[args] = cli(*args)
        return _kept_runs[args]

    return run


def copy_profile(tmp_path: Path, kind: str, pid: str) -> Path:
    """A copy of a built-in profile in a user directory, to break on purpose."""
    src = BUILTIN / kind / f"{pid}.toml"
    dst_dir = tmp_path / "profiles" / kind
    dst_dir.mkdir(parents=True, exist_ok=True)
    dst = dst_dir / src.name
    dst.write_text(src.read_text())
    return dst


def trace_workload(tmp_path: Path, wid: str, rows: list[str], turns: int = 5) -> Path:
    """A workload profile ``wid`` whose trace is ``rows`` (CSV lines after the header
    ``trajectory_id,append_tokens,generated_tokens[,context_tokens]`` given as rows[0]), in a
    profiles folder under ``tmp_path``; returns the trace file (its folder's parent's parent is
    the folder for ``--profiles``)."""
    d = tmp_path / "profiles" / "workload"
    d.mkdir(parents=True, exist_ok=True)
    trace = d / f"{wid}.csv"
    trace.write_text("\n".join(rows) + "\n")
    (d / f"{wid}.toml").write_text(
        f'kind = "workload"\nname = "{wid}"\ndescription = "a test trace"\nturns = {turns}\n'
        "context_tokens = 2000\nappend_tokens = 400\ngenerated_tokens = 150\n"
        f'trace_file = "{wid}.csv"\n'
    )
    return trace
