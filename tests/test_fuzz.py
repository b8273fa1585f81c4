"""Issue 7: random and hostile input through every command.

Whatever the input: exit 0 or 2 (1 only where the command defines it), one line on stderr and
no traceback on error, JSON output that parses strictly (no NaN or inf), the same output when
run twice.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dualpath_plan.profiles.schemas import SCHEMAS
from tests.conftest import fuzz_examples

HOSTILE_NUMBERS = [
    "0",
    "-1",
    "1e308",
    "1e-308",
    "nan",
    "inf",
    "-inf",
    "abc",
    "",
    "3.5",
    "1e9",
    "2",
    "16",
]
IDS = ["deepseek-v3.2", "ds-27b", "qwen2.5-32b", "gpt-oss-120b", "nope", "", "DGX"]
NODES = ["dualpath-hopper", "dgx-b200", "dgx-a100", "hgx-b300", "missing"]
WORKLOADS = ["paper-32k", "paper-64k", "x"]


def _strict(text: str) -> object:
    def bad(token: str) -> object:
        raise AssertionError(f"non-finite number {token} in JSON output")

    return json.loads(text, parse_constant=bad)


@st.composite
def set_assignments(draw):
    kind = draw(st.sampled_from(sorted(SCHEMAS)))
    field = draw(st.sampled_from([*sorted(SCHEMAS[kind].model_fields), "no_such_field"]))
    value = draw(st.sampled_from([*HOSTILE_NUMBERS, "true", '"text"', "[1, 2]"]))
    return f"{kind}.{field}={value}"


@st.composite
def invocations(draw):
    command = draw(
        st.sampled_from(
            ["size", "paths", "bounds", "ratio", "trend", "recommend", "sweep", "profiles-show"]
        )
    )
    args: list[str] = []
    if command == "profiles-show":
        args = ["profiles", "show", draw(st.sampled_from(IDS + NODES))]
    else:
        args = [command]
    if command in ("size", "paths", "recommend", "sweep"):
        if draw(st.booleans()):
            args += ["--model", draw(st.sampled_from(IDS))]
        if draw(st.booleans()):
            args += ["--node", draw(st.sampled_from(NODES))]
        if draw(st.booleans()):
            args += ["--workload", draw(st.sampled_from(WORKLOADS))]
    if command in ("size", "paths", "sweep") and draw(st.booleans()):
        args += [
            "-P",
            draw(st.sampled_from(["0", "1", "2", "4", "-3", "x"])),
            "-D",
            draw(st.sampled_from(["0", "1", "4", "7", "1.5"])),
        ]
    if command == "size":
        for flag in ("--agents", "--ttft-slo", "--tpot-slo"):
            if draw(st.booleans()):
                args += [flag, draw(st.sampled_from(HOSTILE_NUMBERS))]
        rate = draw(st.sampled_from([None, "--aps", "--aps-curve"]))
        if rate == "--aps":
            args += [rate, draw(st.sampled_from([*HOSTILE_NUMBERS, "0.3"]))]
        elif rate == "--aps-curve":
            curves = ["0.05:0.6:12", "0:1:2", "1:0:3", "0.1:0.2:0", "nan:1:3", "0:inf:3", "x"]
            args += [rate, draw(st.sampled_from(curves))]
    if command == "ratio":
        args += [
            "--model",
            draw(st.sampled_from(IDS)),
            "--append",
            draw(st.sampled_from(HOSTILE_NUMBERS)),
            "--context",
            draw(st.sampled_from(["16K,64K", "0", "-5", "inf", "1e9", "abc", "8"])),
        ]
    if command == "trend":
        args += ["--dtype", draw(st.sampled_from(["bf16", "fp8", "fp4", "best", "int4"]))]
    if command == "bounds" and draw(st.booleans()):
        args += ["--paper-assumptions"]
    if command == "recommend":
        args += [
            "--budget-nodes",
            draw(st.sampled_from(["0", "1", "3", "6", "12", "-2", "1e9"])),
            "--objective",
            draw(st.sampled_from(["jct_s", "aps", "throughput_per_gpu", "jct", "x"])),
        ]
    if command == "sweep":
        args += [
            "--grid",
            draw(
                st.sampled_from(
                    [
                        "P=1:3",
                        "D=2:4",
                        "P=3:1",
                        "P=1:4:2lin",
                        "node.snic_gbit_s=100,nan",
                        "agents=1:3",
                        "node.snic_gbit_s=1:800:3log",
                        "x=1",
                    ]
                )
            ),
        ]
    for _ in range(draw(st.integers(0, 2))):
        args += ["--set", draw(set_assignments())]
    return [*args, "--json"]


@settings(
    max_examples=fuzz_examples(120),
    deadline=None,
    # The cli fixture reads and clears captured output on every call, so reuse is safe.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(argv=invocations())
def test_hostile_input(cli, argv) -> None:
    first = cli(*argv)
    assert first.code in (0, 2), (argv, first.code, first.err)
    assert "Traceback" not in first.err, (argv, first.err)
    if first.code == 2:
        # typer's own usage errors print a short box; ours are one line "error: ...".
        if first.err.startswith("error: "):
            assert first.err.count("\n") == 1, (argv, first.err)
    else:
        _strict(first.out)
    again = cli(*argv)
    assert (again.code, again.out) == (first.code, first.out), argv
