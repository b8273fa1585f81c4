"""The Python API (docs/api.md): its examples run as written, in order, in one namespace; it
is exported from the package without importing the library until used; and it gives the
numbers the commands print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import dualpath_plan as dp

DOC = Path(__file__).parents[1] / "docs" / "api.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_examples_run(capsys) -> None:
    blocks = _blocks()
    assert len(blocks) >= 8
    namespace: dict[str, object] = {}
    for i, code in enumerate(blocks):
        try:
            exec(compile(code, f"{DOC}:block{i}", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the failure names its block
            raise AssertionError(f"docs/api.md block {i} failed: {exc!r}\n{code}") from exc
    out = capsys.readouterr().out
    assert "turns/s" in out and "prefill-nodes" in out


def test_every_export_is_reachable() -> None:
    for name in dp.__all__:
        assert getattr(dp, name) is not None, name
    with pytest.raises(AttributeError):
        dp.no_such_thing  # noqa: B018


def test_importing_the_package_imports_no_library() -> None:
    # The CLI imports the package first: its exports load on first use (PEP 562).
    code = "import sys, dualpath_plan; print('numpy' in sys.modules, 'pydantic' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_the_api_is_the_command(cli) -> None:
    args = ("--node", "dgx-h200", "-P", "3", "-D", "5", "--agents", "64")
    data = cli("size", *args, "--json").json()["modes"]
    report = dp.evaluate(dp.spec(node="dgx-h200", prefill_nodes=3, decode_nodes=5, agents=64))
    for mode, o in report.modes.items():
        for key in ("throughput_turns_per_s", "saturated_turns_per_s", "jct_s", "aps"):
            assert data[mode][key] == getattr(o, key), (mode, key)


def test_a_bad_spec_names_its_field() -> None:
    with pytest.raises(dp.PlanInputError) as exc:
        dp.spec(agents=-1)
    assert exc.value.field is not None and "agents" in exc.value.field
