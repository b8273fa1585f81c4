"""INV-16: every example the README shows is what the command prints.

An example is a fenced block whose first line is ``$ dualpath-plan ...``: each ``$`` line a
command (a line ending in ``\\`` goes on), the lines after it what it prints. A block with a
``...`` line shows part of the output: its lines must appear in the output in that order;
otherwise the lines show all of it, and a command with none after it shows how to run it (it
must succeed). The commands run in one empty working directory per block,
holding the input files the README names (as a reader who downloaded them would), in order.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import CliResult

ROOT = Path(__file__).parent.parent
DATA = ROOT / "tests" / "data"
# The input files the examples name, from the repository's copies (their licences beside them).
INPUTS = {
    "mooncake_synthetic_trace.jsonl": DATA / "traces" / "mooncake_synthetic_trace.jsonl",
    "best_config_topn_disagg.csv": DATA / "aic" / "best_config_topn_disagg.csv",
    "h200_sxm.yaml": DATA / "aic" / "h200_sxm.yaml",
}
ELIDED = "..."


def readme_examples() -> list[list[tuple[str, list[str]]]]:
    """Each example block as its commands, each with the lines shown after it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = []
    for block in re.findall(r"^```\n(\$ dualpath-plan .*?)^```", text, re.S | re.M):
        runs: list[tuple[str, list[str]]] = []
        going_on = False
        for line in block.splitlines():
            if going_on:
                command, shown = runs.pop()
                runs.append((command[:-1].rstrip() + " " + line.strip(), shown))
            elif line.startswith("$ dualpath-plan"):
                runs.append((line[2:], []))
            else:
                runs[-1][1].append(line.rstrip())
            going_on = runs[-1][0].endswith("\\")
        blocks.append(runs)
    return blocks


EXAMPLES = readme_examples()


def test_the_readme_has_examples_of_every_kind() -> None:
    # The parser finds what the README holds (a changed fence would make the test vacuous).
    commands = [c.split()[1] for runs in EXAMPLES for c, _ in runs]
    assert len(EXAMPLES) >= 7
    assert {"size", "simulate", "bounds", "workload", "aic"} <= set(commands)
    assert any(ELIDED in shown for runs in EXAMPLES for _, shown in runs)


def _in_order(shown: list[str], printed: list[str]) -> list[str]:
    """The shown lines (not the ``...``) that do not appear in the printed ones in order."""
    at, missing = 0, []
    for line in (s for s in shown if s.strip() and s != ELIDED):
        try:
            at = printed.index(line, at) + 1
        except ValueError:
            missing.append(line)
    return missing


@pytest.mark.parametrize(
    "runs", EXAMPLES, ids=[f"{i}:{' '.join(r[0][0].split()[1:3])}" for i, r in enumerate(EXAMPLES)]
)
def test_readme_example_is_what_the_command_prints(
    runs: list[tuple[str, list[str]]],
    cli: Callable[..., CliResult],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, source in INPUTS.items():
        shutil.copy(source, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    for command, shown in runs:
        result = cli(*shlex.split(command)[1:])
        assert result.code == 0, (command, result.err)
        printed = [line.rstrip() for line in result.out.splitlines()]
        if not any(line.strip() for line in shown):
            continue
        if ELIDED in shown:
            assert _in_order(shown, printed) == [], command
        else:
            assert "\n".join(shown).strip() == "\n".join(printed).strip(), command
