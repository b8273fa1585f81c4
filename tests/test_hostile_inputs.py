"""Issue 35, a second adversarial trial of the CLI: each input here was an internal error, a
silent misreading or an absurd number printed. Each is now a one-line ``error:`` naming the
flag, file or field, exit 2 (or a run that says what it did)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
NODE = ROOT / "hardware_profiles" / "node" / "dgx-h200.toml"


def one_line_error(result, *says: str) -> None:
    """Exit 2, one ``error:`` line on stderr saying each of ``says``, no internal error."""
    assert result.code == 2, (result.code, result.err)
    assert result.err.startswith("error: "), result.err
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert "internal error" not in result.err
    for text in says:
        assert text in result.err, result.err


def _profile_with(tmp_path: Path, key: str, value: str) -> Path:
    """A copy of the dgx-h200 node profile with ``key = value`` (the field, not its [sources]
    entry), in a --profiles folder."""
    lines = NODE.read_text().splitlines()
    k = next(i for i, line in enumerate(lines) if line.startswith(f"{key} "))
    lines[k] = f"{key} = {value}"
    (tmp_path / "node").mkdir(exist_ok=True)
    (tmp_path / "node" / "dgx-h200.toml").write_text("\n".join(lines) + "\n")
    return tmp_path


# --- 2. integers beyond a float (310 to 4,300 digits) ---------------------------------------


@pytest.mark.parametrize("field", ["snic_gbit_s", "snic_count"])
@pytest.mark.parametrize("digits", [310, 400, 4300])
def test_an_integer_beyond_any_float_in_set_names_the_field(cli, field, digits) -> None:
    # OverflowError: int too large to convert to float (an internal error, exit 1).
    result = cli("size", "--set", f"node.{field}={'1' * digits}")
    one_line_error(result, f"node.{field}", "finite")


@pytest.mark.parametrize("digits", [310, 4300])
def test_an_integer_beyond_any_float_in_a_profile_names_file_and_field(
    cli, tmp_path, digits
) -> None:
    folder = _profile_with(tmp_path, "snic_gbit_s", "7" * digits)
    result = cli("size", "--profiles", str(folder), "--node", "dgx-h200")
    one_line_error(result, "dgx-h200.toml", "field 'snic_gbit_s'", "finite")


def test_a_baseline_number_of_5000_digits_says_so_plainly(cli, tmp_path) -> None:
    # It said "Exceeds the limit (4300 digits) for integer string conversion ...; use
    # sys.set_int_max_str_digits() to increase the limit": Python's advice, not the user's.
    baseline = tmp_path / "b.json"
    baseline.write_text('{"version": 1, "default_rel_tol": ' + "9" * 5000 + ', "scenarios": []}')
    result = cli("check", str(baseline))
    one_line_error(result, str(baseline), "4,300 digits")
    assert "set_int_max_str_digits" not in result.err


# --- 3. grid counts --------------------------------------------------------------------------


def test_a_grid_count_of_5000_digits_is_one_line(cli) -> None:
    # ValueError: Exceeds the limit (4300 digits) for integer string conversion (exit 1).
    result = cli("sweep", "--grid", f"P=1:400:{'9' * 5000}lin")
    one_line_error(result, "--grid", "too many")
    assert "set_int_max_str_digits" not in result.err


def test_an_absurd_grid_is_refused_whatever_max_points_says(cli) -> None:
    # 10^18 points were refused with "raise --max-points to run it", and --max-points 10^30
    # then let it start: years of work.
    axes = ["--grid", "P=1:1000000", "--grid", "D=1:1000000", "--grid", "agents=1:1000000"]
    result = cli("sweep", *axes)
    one_line_error(result, "--grid")
    assert "raise --max-points" not in result.err
    result = cli("sweep", *axes, "--max-points", "1" + "0" * 30)
    one_line_error(result, "--max-points")


# --- 5. flags of runs: what any run plausibly asks -------------------------------------------


@pytest.mark.parametrize(
    ("args", "flag", "says"),
    [
        # milliseconds typed for an hour: 42 days of arrivals simulated
        (("simulate", "--aps", "0.1", "--duration", "3600000"), "--duration", "did you mean 3600"),
        (("simulate", "--aps", "0.1", "--warmup", "3600000"), "--warmup", "did you mean 3600"),
        # printed "mean over 2.78e+304 h windows"
        (("simulate", "--agents", "16", "--window", "1e308"), "--window", "window"),
        (("simulate", "--aps", "1e-9"), "--aps", "agents/s"),
        # searched for 1e308 agents/s up to --max-nodes
        (("size", "--target-aps", "1e308"), "--target-aps", "agents/s"),
        # printed rows of APS 0
        (("size", "--aps", "5e-324"), "--aps", "agents/s"),
        (("size", "--aps-curve", "0:1e9:5"), "--aps-curve", "agents/s"),
    ],
)
def test_implausible_run_flags_are_refused_naming_the_flag(cli, args, flag, says) -> None:
    one_line_error(cli(*args), flag, says)


def test_plausible_run_flags_run(cli) -> None:
    assert cli("size", "--aps", "0.1").code == 0
    assert cli("simulate", "--agents", "8", "--window", "3600").code == 0


# --- 4. a Mooncake trace's clock -----------------------------------------------------------

MOONCAKE = ROOT / "tests" / "data" / "traces" / "mooncake_synthetic_trace.jsonl"
SHARED_MOONCAKE = ROOT.parent / "shared" / "fixtures" / "traces" / "mooncake_synthetic_trace.jsonl"


def _mooncake_rows() -> list[dict]:
    return [json.loads(line) for line in MOONCAKE.read_text().splitlines() if line.strip()]


def _write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize(
    ("scale", "says"),
    [
        (1e-3, "did you mean 175 (seconds typed for milliseconds)"),
        (1e3, "did you mean 175 (microseconds typed for milliseconds)"),
        # whole seconds: most requests at the time of the one before (a median gap of 0)
        (None, "seconds typed for milliseconds"),
    ],
)
def test_a_mooncake_clock_in_the_wrong_unit_is_named(cli, tmp_path, scale, says) -> None:
    # Accepted silently: an arrival rate 1,000 times off.
    rows = [
        {**r, "timestamp": r["timestamp"] // 1000 if scale is None else r["timestamp"] * scale}
        for r in _mooncake_rows()
    ]
    trace = _write_rows(tmp_path / "t.jsonl", rows)
    result = cli("workload", "import", str(trace), "--format", "mooncake")
    one_line_error(result, str(trace), "'timestamp'", says)


def test_a_mooncake_trace_out_of_order_is_refused_naming_the_line(cli, tmp_path) -> None:
    # Its hits are counted in the file's order, which a Mooncake trace gives as the arrival
    # order: out of order, it was accepted and the hits counted in another order.
    rows = _mooncake_rows()
    rows[10], rows[11] = rows[11], rows[10]
    trace = _write_rows(tmp_path / "t.jsonl", rows)
    result = cli("workload", "import", str(trace), "--format", "mooncake")
    one_line_error(result, str(trace), "line 12", "'timestamp'", "line 11", "sort it")


@pytest.mark.parametrize("trace", [MOONCAKE, SHARED_MOONCAKE])
def test_the_public_mooncake_traces_still_import(cli, trace) -> None:
    if not trace.exists():
        pytest.skip(f"{trace} is not here")
    result = cli("workload", "import", str(trace), "--format", "mooncake", "--json")
    assert result.code == 0, result.err
    assert result.json()["arrival_rate_per_s"] == pytest.approx(3992 / 1022.025)


# --- 6. ids, unused overrides, comments in --set ---------------------------------------------


@pytest.mark.parametrize("flag", ["--storage", "--gpu", "--engine", "--prefill-node", "--model"])
def test_an_empty_profile_id_is_refused(cli, flag) -> None:
    # --storage '' ran with no storage limit; --gpu '' and --engine '' with the nodes' own.
    one_line_error(cli("size", flag, ""), flag, "empty")


@pytest.mark.parametrize(
    ("args", "setting", "says"),
    [
        ((), "engine.attention_decode.launch_s=0.001", "no engine profile"),
        (("--storage", "none"), "storage.aggregate_read_gbyte_s=100", "--storage none"),
    ],
)
def test_a_set_the_run_never_reads_is_a_warning(cli, args, setting, says) -> None:
    # Dropped silently: the run printed its report as if the override applied.
    result = cli("size", *args, "--set", setting)
    assert result.code == 0, result.err
    assert result.err.startswith("warning: --set ") and says in result.err, result.err
    assert setting.partition("=")[0] in result.err and "set nothing" in result.err
    used = cli("size", "--set", "storage.aggregate_read_gbyte_s=100")
    assert used.code == 0 and "warning" not in used.err


@pytest.mark.parametrize("value", ["200 # note", "200#", "[1, 2] # two"])
def test_a_set_value_with_a_comment_is_refused(cli, value) -> None:
    # 'x=200 # note' was taken as 200, the rest dropped.
    one_line_error(cli("size", "--set", f"node.snic_gbit_s={value}"), "node.snic_gbit_s", "comment")


# --- 7. numbers in decimal digits; ids that are ids --------------------------------------------

AIC_H200 = ROOT / "tests" / "data" / "aic" / "h200_sxm.yaml"
NODE_FLAGS = ("--snic-count", "1", "--snic-gbit-s", "400", "--dram-gbyte", "2048",
              "--dram-gbyte-s", "500", "--cnic-count", "8", "--release-year", "2024")  # fmt: skip


def test_a_trace_number_with_a_digit_separator_is_refused(cli, tmp_path) -> None:
    # float() read '1_000' as 1000.
    trace = tmp_path / "t.csv"
    trace.write_text("trajectory_id,append_tokens,generated_tokens\na,1_000,10\n")
    result = cli("workload", "import", str(trace), "--format", "csv")
    one_line_error(result, str(trace), "line 2", "'append_tokens'", "decimal digits")


@pytest.mark.parametrize("value", ["0x190", "4_00", "0o620", "4_00.0"])
def test_a_profile_number_not_in_decimal_digits_is_refused(cli, tmp_path, value) -> None:
    # TOML reads 0x190 and 4_00 as 400; the README promises decimal numbers.
    folder = _profile_with(tmp_path, "snic_gbit_s", value)
    result = cli("size", "--profiles", str(folder), "--node", "dgx-h200")
    one_line_error(result, "dgx-h200.toml", "'snic_gbit_s'", "decimal digits", value)


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("num_gpus_per_node: 8", "num_gpus_per_node: 0x8", "node.num_gpus_per_node"),
        ("mem_bw: 4800000000000", "mem_bw: 4_800_000_000_000", "gpu.mem_bw"),
        ("num_gpus_per_node: 8", "num_gpus_per_node: 010", "node.num_gpus_per_node"),  # octal
        ("power: 700", "power: 11:40", "gpu.power"),  # sexagesimal: 700
    ],
)
def test_an_aiconfigurator_number_not_in_decimal_digits_is_refused(
    cli, tmp_path, old, new, field
) -> None:
    text = AIC_H200.read_text()
    assert old in text
    system = tmp_path / "sys.yaml"
    system.write_text(text.replace(old, new, 1))
    result = cli("aic", "import-system", str(system), *NODE_FLAGS, "--out", str(tmp_path / "o"))
    one_line_error(result, str(system), f"'{field}'", "decimal digits")
    assert not (tmp_path / "o").exists()


def test_a_quoted_trajectory_id_over_a_line_break_is_refused(cli, tmp_path) -> None:
    # '"a<newline>b"' became the id 'ab', silently.
    trace = tmp_path / "t.csv"
    trace.write_text('trajectory_id,append_tokens,generated_tokens\n"a\nb",100,10\nc,5,1\n')
    result = cli("workload", "import", str(trace), "--format", "csv")
    one_line_error(result, str(trace), "from line 2", "line break")


def test_a_trajectory_id_with_a_control_character_is_refused(tmp_path) -> None:
    from dualpath_plan.errors import PlanInputError
    from dualpath_plan.physics.workload import load_trace

    trace = tmp_path / "t.jsonl"
    rows = [{"trajectory_id": "a\x01b", "append_tokens": 100, "generated_tokens": 10}]
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(PlanInputError, match="printable id") as err:
        load_trace(trace)
    assert "line 1" in str(err.value) and "trajectory_id" in str(err.value)


def test_a_baseline_scenario_without_an_id_is_refused(cli, tmp_path) -> None:
    baseline = tmp_path / "b.json"
    scenario = {"id": " ", "kind": "ratio", "inputs": {"model": "deepseek-v3.2"}}
    baseline.write_text(json.dumps({"version": 1, "scenarios": [scenario]}))
    result = cli("check", str(baseline))
    one_line_error(result, str(baseline), "scenarios[0].id", "empty")
    assert "Value error" not in result.err


# --- 8. options that said something unclear or nothing -----------------------------------------

PAPER_POINTS = ROOT / "bench" / "paper_points.csv"


def test_all_with_other_modes_says_it_cannot_be_combined(cli) -> None:
    # It said "unknown mode 'all'", where 'all' alone is a mode list.
    one_line_error(cli("sweep", "--grid", "P=1:3", "--mode", "all,basic"), "--mode", "combined")
    assert cli("sweep", "--grid", "P=1:3", "--mode", "all").code == 0


@pytest.mark.parametrize(
    ("fit", "says"),
    [("snic_efficiency,snic_efficiency", "twice"), ("prefill_mfu,node.prefill_mfu", "one field")],
)
def test_calibrate_refuses_a_field_given_twice(cli, fit, says) -> None:
    one_line_error(cli("calibrate", str(PAPER_POINTS), "--fit", fit), "--fit", says)


def test_calibrate_allow_partial_without_out_is_refused(cli) -> None:
    # Accepted, and nothing was written: the flag said nothing.
    result = cli("calibrate", str(PAPER_POINTS), "--fit", "snic_efficiency", "--allow-partial")
    one_line_error(result, "--allow-partial", "--out")


def test_an_unknown_class_workload_is_named_by_class(cli) -> None:
    # It was reported as field '--workload', an option not given (--class replaces it).
    result = cli("paths", "--class", "nope:1")
    one_line_error(result, "field '--class'", "unknown workload profile 'nope'")


def test_ratio_without_model_or_workload_says_either_will_do(cli) -> None:
    # It said "give --model", where --workload alone runs too (as --help says).
    one_line_error(cli("ratio"), "give --model, --workload or both")
    assert cli("ratio", "--workload", "paper-64k").code == 0


@pytest.mark.parametrize(
    ("args", "flag", "value", "long"),
    [
        (("recommend", "--budget-nodes", "8", "--markdown", "--json"), "--markdown", "--json", ""),
        (("size", "--out", "--json"), "--out", "--json", ""),
        (("size", "-P", "-D", "4"), "-P", "-D", "--prefill-nodes"),
        (("--set", "--help", "size"), "--set", "--help", ""),
    ],
)
def test_an_option_taken_as_a_value_is_refused(
    cli, tmp_path, monkeypatch, args, flag, value, long
) -> None:
    # recommend --markdown --json wrote its report to a file named '--json' and printed no
    # JSON: the parser takes the next token as the value, whatever it is.
    monkeypatch.chdir(tmp_path)
    result = cli(*args)
    one_line_error(result, f"field '{flag}'", f"got the option '{value}'")
    assert f"{long or flag}={value}" in result.err
    assert list(tmp_path.iterdir()) == []
    # The value spelled as asked runs (a negative number is a value, not an option).
    assert cli("size", "--agents", "-5").err.count("greater than or equal to 1") == 1


@pytest.mark.parametrize("args", [("recommend", "--budget-nodes", "8", "--markdown"), ("--set",)])
def test_an_option_without_its_value_at_the_end_names_it(cli, args) -> None:
    # The parser's own message sent the reader to 'dualpath-plan --help', not the command's.
    one_line_error(cli(*args), f"field '{args[-1]}'", "expected a value, got none")
