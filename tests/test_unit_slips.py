"""Unit slips are caught, with the slip named, whichever way the number comes in: a flag,
``--set``, a profile file, a trace, an import, a validation case, the Python API (issue:
"inputs a planner cannot get wrong"). One table (``dualpath_plan/plausible.py``) serves them
all; each case here is a value a user could type, and the line must name the quantity, the
value and, where a unit slip explains it, the value meant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dualpath_plan import plausible
from dualpath_plan.errors import PlanInputError

ROOT = Path(__file__).parent.parent


def _one_line_error(result) -> str:
    assert result.code == 2, (result.code, result.out, result.err)
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.err
    return lines[0]


def _says(line: str, meant: str | None) -> None:
    """The line names what is implausible and the fix: the value meant, or that the value is
    beyond any deployment."""
    assert "outside what" in line, line
    if meant is None:
        assert "a unit slip or a corrupt value" in line, line
    else:
        assert f"did you mean {meant}" in line or f"or {meant} (" in line, line


# --- flags --------------------------------------------------------------------------------

FLAG_CASES = [
    # (command line, the flag, the value meant)
    (("size", "--ttft-slo", "4000"), "--ttft-slo", "4"),
    (("size", "--tpot-slo", "50"), "--tpot-slo", "0.05"),
    (("size", "--max-utilization", "80"), "--max-utilization", "0.8"),
    (("recommend", "--budget-nodes", "8", "--ttft-slo", "2000"), "--ttft-slo", "2"),
    (("recommend", "--budget-nodes", "8", "--tpot-slo", "40"), "--tpot-slo", "0.04"),
    (("sweep", "--grid", "P=1:2", "--tpot-slo", "60"), "--tpot-slo", "0.06"),
    (("sweep", "--grid", "P=1:2", "--ttft-slo", "1500"), "--ttft-slo", "1.5"),
    (("recommend", "--budget-nodes", "8", "--max-utilization", "90"), "--max-utilization", "0.9"),
    (("simulate", "--ttft-slo", "4000"), "--ttft-slo", "4"),
    (("size", "--target-aps", "0.5", "--tpot-slo", "30"), "--tpot-slo", "0.03"),
]


@pytest.mark.parametrize(("args", "flag", "meant"), FLAG_CASES)
def test_a_flag_in_the_wrong_unit_names_the_slip(cli, args, flag, meant) -> None:
    line = _one_line_error(cli(*args))
    assert flag in line
    _says(line, meant)


# --- --set and profile files ------------------------------------------------------------

SET_CASES = [
    # (assignment, the value meant or None: beyond any deployment with no unit to blame)
    ("node.snic_gbit_s=400e9", "400"),  # bit/s typed for Gb/s
    ("node.cnic_gbit_s=200000000000", "200"),
    ("node.dram_gbyte=2048e9", "2048"),  # bytes typed for GB
    ("node.dram_gbyte_s=600e9", "600"),
    ("node.snic_efficiency=80", "0.8"),  # percent typed for a share of 1
    ("node.cnic_efficiency=95", "0.95"),
    ("node.pcie_efficiency=90", "0.9"),
    ("node.dram_efficiency=70", "0.7"),
    ("node.prefill_mfu=40", "0.4"),
    ("node.decode_hbm_efficiency=85", "0.85"),
    ("node.layer_fixed_s=5", "5e-06"),  # microseconds typed for seconds
    ("node.ep_latency_s=20", "2e-05"),
    ("node.tp_allreduce_latency_s=12", "1.2e-05"),
    ("node.prefill_hbm_reserve_gbyte=12e9", "12"),
    ("gpu.hbm_gbyte=141e9", "141"),
    ("gpu.hbm_tbyte_s=4800", "4.8"),  # GB/s typed for TB/s
    ("gpu.hbm_tbyte_s=4.8e12", "4.8"),  # B/s typed for TB/s
    ("gpu.bf16_dense_tflops=989e12", "989"),  # FLOP/s typed for TFLOPS
    ("gpu.fp8_dense_tflops=1979e12", "1979"),
    ("gpu.tdp_w=0.7", "700"),  # kW typed for W
    ("gpu.nvlink_bidir_gbyte_s=900e9", "900"),
    ("storage.aggregate_read_gbyte_s=6.6e12", "6600"),
    ("storage.max_client_read_gbyte_s=40e9", "40"),
    ("workload.tool_latency_s=90000", "90"),  # milliseconds typed for seconds
    ("workload.append_tokens=4e11", None),
    ("workload.context_tokens=2e9", None),
    ("model.context_window_tokens=10000000000", None),
    ("node.gpus_per_node=8000", None),
]


@pytest.mark.parametrize(("assignment", "meant"), SET_CASES)
def test_set_in_the_wrong_unit_names_the_slip(cli, assignment, meant) -> None:
    line = _one_line_error(cli("--set", assignment, "size"))
    field = assignment.split("=")[0].split(".")[1]
    assert f"field '{field}'" in line
    _says(line, meant)


PROFILE_CASES = [
    # (kind, stock id, field, slipped value, the value meant)
    ("node", "dgx-h200", "snic_gbit_s", "400e9", "400"),
    ("node", "dgx-h200", "snic_efficiency", "51", "0.51"),
    ("gpu", "h200-sxm", "hbm_tbyte_s", "4800", "4.8"),
    ("storage", "3fs", "aggregate_read_gbyte_s", "6.6e12", "6600"),
    ("workload", "paper-64k", "tool_latency_s", "90000", "90"),
]


@pytest.mark.parametrize(("kind", "pid", "field", "value", "meant"), PROFILE_CASES)
def test_a_profile_file_in_the_wrong_unit_names_the_slip(
    cli, tmp_path, kind, pid, field, value, meant
) -> None:
    folder = tmp_path / "p" / kind
    folder.mkdir(parents=True)
    text = (ROOT / "hardware_profiles" / kind / f"{pid}.toml").read_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith(f"{field} =")]
    head = next(i for i, ln in enumerate(lines) if ln.startswith("["))
    lines.insert(head, f"{field} = {value}")
    path = folder / f"{pid}.toml"
    path.write_text("\n".join(lines) + "\n")
    flag = {"node": "--node", "gpu": "--gpu", "storage": "--storage", "workload": "--workload"}
    line = _one_line_error(cli("size", "--profiles", str(tmp_path / "p"), flag[kind], pid))
    assert str(path) in line and f"field '{field}'" in line
    _says(line, meant)
    # profiles validate says the same
    checked = cli("profiles", "validate", str(path))
    assert checked.code == 2 and "did you mean" in checked.err


# --- traces ------------------------------------------------------------------------------


def _mooncake(path: Path) -> None:
    row = {"timestamp": 0, "input_length": 400_000_000_000, "output_length": 5, "hash_ids": [1]}
    path.write_text(json.dumps(row) + "\n")


def _kv_cache_tester(path: Path) -> None:
    request = {"t": 0, "type": "n", "in": 400_000_000_000, "out": 10, "hash_ids": [1]}
    session = {"id": "s", "block_size": 64, "hash_id_scope": "local", "requests": [request]}
    path.write_text(json.dumps(session))


def _bailian(path: Path) -> None:
    row = {
        "chat_id": 1,
        "parent_chat_id": -1,
        "timestamp": 0,
        "input_length": 10,
        "output_length": 500_000_000_000,
        "type": "text",
        "turn": 1,
        "hash_ids": [1],
    }
    path.write_text(json.dumps(row) + "\n")


def _burstgpt(path: Path) -> None:
    path.write_text(
        "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,"
        "Log Type\n1,a,1,GPT-4,400000000000,1,400000000001,Conversation log\n"
    )


def _csv(path: Path) -> None:
    path.write_text("trajectory_id,append_tokens,generated_tokens\na,400000000000,10\n")


TRACE_CASES = [
    ("mooncake", "t.jsonl", _mooncake, "input_length"),
    ("kv-cache-tester", "s.json", _kv_cache_tester, "in"),
    ("bailian", "b.jsonl", _bailian, "output_length"),
    ("burstgpt", "b.csv", _burstgpt, "Request tokens"),
    ("csv", "t.csv", _csv, "append_tokens"),
]


@pytest.mark.parametrize(("fmt", "name", "write", "field"), TRACE_CASES)
def test_a_trace_turn_beyond_any_context_is_named(cli, tmp_path, fmt, name, write, field) -> None:
    # workload import --format csv took a turn of 4e11 tokens.
    path = tmp_path / name
    write(path)
    line = _one_line_error(cli("workload", "import", str(path), "--format", fmt))
    assert str(path) in line and field in line and "tokens" in line
    _says(line, None)


def test_a_workload_trace_file_turn_beyond_any_context_is_named(cli, tmp_path) -> None:
    folder = tmp_path / "p" / "workload"
    folder.mkdir(parents=True)
    _csv(folder / "big.csv")
    (folder / "big.toml").write_text(
        'kind = "workload"\nname = "big"\ntrace_file = "big.csv"\nturns = 1\n'
        "append_tokens = 1\ngenerated_tokens = 1\ncontext_tokens = 0\n"
    )
    line = _one_line_error(cli("size", "--profiles", str(tmp_path / "p"), "--workload", "big"))
    assert "big.csv" in line and "append_tokens" in line
    _says(line, None)


# --- imports -------------------------------------------------------------------------------

AIC = ROOT / "tests" / "data" / "aic" / "h200_sxm.yaml"
AIC_FLAGS = {
    "--snic-count": "2",
    "--snic-gbit-s": "400",
    "--dram-gbyte": "2048",
    "--dram-gbyte-s": "614.4",
    "--cnic-count": "8",
    "--release-year": "2024",
}
IMPORT_FLAG_CASES = [
    ("--snic-gbit-s", "400e9", "400"),
    ("--cnic-gbit-s", "400000000000", "400"),
    ("--dram-gbyte", "2048e9", "2048"),
    ("--dram-gbyte-s", "614.4e9", "614.4"),
]
IMPORT_FILE_CASES = [
    # (the file's key, its line, the slipped value, the value meant)
    ("gpu.mem_bw", "  mem_bw: ", "4800", "4.8e+12"),  # GB/s written where B/s are asked
    ("gpu.power", "  power: ", "0.7", "700"),  # kW
    ("node.intra_node_bw", "  intra_node_bw: ", "450", "4.5e+11"),  # GB/s
    ("node.inter_node_bw", "  inter_node_bw: ", "50", "5e+10"),
]


@pytest.mark.parametrize(("flag", "value", "meant"), IMPORT_FLAG_CASES)
def test_an_import_flag_in_the_wrong_unit_names_the_slip(cli, tmp_path, flag, value, meant) -> None:
    flags = {**AIC_FLAGS, flag: value}
    args = [a for pair in flags.items() for a in pair]
    line = _one_line_error(
        cli("aic", "import-system", str(AIC), "--out", str(tmp_path / "o"), *args)
    )
    assert flag in line
    _says(line, meant)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("key", "prefix", "value", "meant"), IMPORT_FILE_CASES)
def test_an_imported_file_in_the_wrong_unit_names_the_slip(
    cli, tmp_path, key, prefix, value, meant
) -> None:
    lines = [
        f"{prefix}{value}" if t.startswith(prefix) else t for t in AIC.read_text().splitlines()
    ]
    path = tmp_path / "h200_sxm.yaml"
    path.write_text("\n".join(lines) + "\n")
    args = [a for pair in AIC_FLAGS.items() for a in pair]
    line = _one_line_error(
        cli("aic", "import-system", str(path), "--out", str(tmp_path / "o"), *args)
    )
    assert str(path) in line and f"field '{key}'" in line
    _says(line, meant)


# --- validation cases and the Python API ---------------------------------------------------


def test_a_validation_case_in_the_wrong_unit_names_the_slip(cli, tmp_path) -> None:
    case = (ROOT / "dualpath_plan" / "validation" / "cases" / "ablation-basic.toml").read_text()
    (tmp_path / "slip.toml").write_text(case + "ttft_slo_s = 4000\n")
    line = _one_line_error(cli("validate", "--cases", str(tmp_path)))
    assert "slip.toml" in line and "ttft_slo_s" in line
    _says(line, "4")


@pytest.mark.parametrize(
    ("field", "value", "meant"), [("ttft_slo_s", 4000, "4"), ("tpot_slo_s", 50, "0.05")]
)
def test_the_python_api_names_the_slip(field, value, meant) -> None:
    from dualpath_plan import api
    from dualpath_plan.scenario.spec import ServingConfig

    with pytest.raises(PlanInputError) as spec_error:
        api.spec(**{field: value})
    _says(str(spec_error.value), meant)
    with pytest.raises(PlanInputError) as config_error:
        ServingConfig(**{field: value})
    _says(str(config_error.value), meant)


# --- measured points, paper values, tolerances, shares as percent (issue 34, part 2) --------

MEASURED_CASES = [
    # (the row's metric, value and rel_stderr, the column named, the value meant)
    ("tpot_s", "37.5", "", "value", "0.0375"),  # milliseconds typed for seconds
    ("online_tpot_s", "40", "", "value", "0.04"),
    ("ttft_s", "4000", "", "value", "4"),
    ("online_ttft_s", "2500", "", "value", "2.5"),
    ("jct_s", "10100000", "", "value", "10100"),
    ("jct_s", "10100", "5", "rel_stderr", "0.05"),  # percent typed for a share of 1
    ("throughput_turns_per_s", "4e11", "", "value", None),
]


@pytest.mark.parametrize(("metric", "value", "sigma", "column", "meant"), MEASURED_CASES)
def test_a_measured_point_in_the_wrong_unit_names_the_slip(
    cli, tmp_path, metric, value, sigma, column, meant
) -> None:
    path = tmp_path / "meas.csv"
    path.write_text(
        "metric,value,mode,prefill_nodes,decode_nodes,rel_stderr\n"
        "jct_s,5450,dualpath,2,4,0.04\n"
        f"{metric},{value},dualpath,2,4,{sigma or '0.04'}\n"
    )
    line = _one_line_error(cli("calibrate", str(path), "--node", "dualpath-hopper"))
    assert f"{path}: line 3: field '{column}'" in line
    _says(line, meant)


CASE_CASES = [
    # (a line of the case file replaced, by what, the field named, the value meant)
    ("tolerance = 0.15", "tolerance = 15", "tolerance", "0.15"),
    ("paper = 10100", "paper = 10100000", "paper", "10100"),  # a JCT in milliseconds
]


@pytest.mark.parametrize(("old", "new", "field", "meant"), CASE_CASES)
def test_a_validation_case_field_in_the_wrong_unit_names_the_slip(
    cli, tmp_path, old, new, field, meant
) -> None:
    case = (ROOT / "dualpath_plan" / "validation" / "cases" / "ablation-basic.toml").read_text()
    assert old in case
    (tmp_path / "slip.toml").write_text(case.replace(old, new))
    line = _one_line_error(cli("validate", "--cases", str(tmp_path)))
    assert "slip.toml" in line and f"field '{field}'" in line
    _says(line, meant)


def test_a_validation_case_paper_tpot_in_milliseconds_names_the_slip(cli, tmp_path) -> None:
    (tmp_path / "tpot.toml").write_text(
        'claim = "x"\nsource = "y"\nkind = "size"\nmetric = "dualpath.online_tpot_s"\n'
        'paper = 37.5\ntolerance = 0.1\n[inputs]\nmodes = ["dualpath"]\n'
    )
    line = _one_line_error(cli("validate", "--cases", str(tmp_path)))
    assert "tpot.toml" in line and "field 'paper'" in line
    _says(line, "0.0375")


@pytest.mark.parametrize(
    ("where", "meant"), [("default_rel_tol", "0.05"), ("rel_tol", "0.05")], ids=str
)
def test_a_baseline_tolerance_in_percent_names_the_slip(cli, tmp_path, where, meant) -> None:
    data = json.loads((ROOT / "tests" / "baseline.json").read_text())
    data["scenarios"] = data["scenarios"][:1]
    if where == "default_rel_tol":
        data["default_rel_tol"] = 5
    else:
        first = next(iter(data["scenarios"][0]["metrics"].values()))
        first["rel_tol"] = 5
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    line = _one_line_error(cli("check", str(path)))
    assert str(path) in line and where in line
    _says(line, meant)


SHARE_CASES = [
    ("workload.turns_spread=100", "1"),
    ("workload.turns_spread=30", "0.3"),
    ("node.cnic_collective_share=25", "0.25"),
]


@pytest.mark.parametrize(("assignment", "meant"), SHARE_CASES)
def test_a_share_in_percent_names_the_slip(cli, assignment, meant) -> None:
    line = _one_line_error(cli("--set", assignment, "size"))
    assert f"field '{assignment.split('=')[0].split('.')[1]}'" in line
    _says(line, meant)


GRID_CASES = [
    ("node.snic_efficiency=10:90", "0.1"),  # a range in percent
    ("node.prefill_mfu=0.3,45", "0.45"),
    ("workload.turns_spread=0:100:3lin", "0.5"),
]


@pytest.mark.parametrize(("grid", "meant"), GRID_CASES)
def test_a_sweep_grid_in_the_wrong_unit_names_the_slip(cli, grid, meant) -> None:
    line = _one_line_error(cli("sweep", "--grid", grid))
    assert f"--grid {grid.split('=')[0]}" in line
    _says(line, meant)


# --- the table itself ----------------------------------------------------------------------


def test_the_table_suggests_only_values_inside_its_range() -> None:
    for key, quantity in plausible.QUANTITIES.items():
        assert quantity.low <= quantity.high, key
        for slip in quantity.slips:
            for typed in (quantity.high * 10, quantity.high * 1e3, quantity.high * 1e9):
                why = quantity.problem(typed)
                assert why is not None and str(plausible._num(typed)) in why, key
            meant = quantity.high * 0.5
            why = quantity.problem(meant / slip.factor)
            if why is not None and "did you mean" in why:
                assert plausible._num(meant) in why, (key, why)
        assert quantity.problem(quantity.low) is None and quantity.problem(quantity.high) is None


def test_every_schema_field_in_the_table_exists() -> None:
    from dualpath_plan.profiles.schemas import schema_for

    for key in plausible.QUANTITIES:
        kind, dot, field = key.partition(".")
        if dot and kind in ("gpu", "node", "storage", "workload", "model", "engine"):
            assert field in schema_for(kind).model_fields, key


def test_there_are_at_least_fifty_slips() -> None:
    # Each quantity and each way in: flags, --set, profile files, traces, imports, validation
    # cases and the Python API.
    cases = (
        len(FLAG_CASES)
        + len(SET_CASES)
        + len(PROFILE_CASES)
        + len(TRACE_CASES)
        + len(IMPORT_FLAG_CASES)
        + len(IMPORT_FILE_CASES)
        + 1  # a workload's trace file
        + 1  # a validation case
        + 2  # the Python API
        + len(MEASURED_CASES)
        + len(CASE_CASES)
        + 1  # a validation case's TPOT
        + 2  # a baseline's tolerances
        + len(SHARE_CASES)
        + len(GRID_CASES)
    )
    assert cases >= 50


def test_every_share_field_of_a_profile_names_percent_typed() -> None:
    # A field bounded to [0, 1] is a share: 30 typed for 0.3 is named, not just refused by the
    # schema's bounds (workload.turns_spread=100 was, in the bounds' words only).
    from dualpath_plan.profiles.schemas import KINDS, numeric_bounds, schema_for

    for kind in KINDS:
        schema = schema_for(kind)
        for field in schema.model_fields:
            bounds = numeric_bounds(schema, field)
            if bounds is not None and bounds[0] >= 0 and bounds[1] <= 1:
                why = plausible.explained(f"{kind}.{field}", 30)
                assert why is not None and "did you mean 0.3 (percent" in why, (kind, field)
