"""AIConfigurator inputs and results (issue 14, items 3-5): ``aic import-system`` and
``aic check`` (docs/invariants.md INV-30 to INV-33)."""

from __future__ import annotations

import csv
import math
import shutil
from pathlib import Path

import pytest

from dualpath_plan.physics import model as phys
from dualpath_plan.profiles.registry import Registry
from tests.test_limits import one_line_error

DATA = Path(__file__).parent / "data" / "aic"
DISAGG = DATA / "best_config_topn_disagg.csv"
AGG = DATA / "best_config_topn_agg.csv"
FLAGS = (
    "--snic-count", "2", "--snic-gbit-s", "400", "--dram-gbyte", "2048",
    "--dram-gbyte-s", "614.4", "--cnic-count", "8", "--release-year", "2024",
)  # fmt: skip


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


# --- must reach: the top disagg row on the paper's nodes ------------------------------------


def test_top_disagg_row_kv_demand_and_verdict(cli, registry: Registry) -> None:
    """INV-30: 65.457 seq/s x 32,721 tokens x deepseek-v3's KV bytes/token in the row's
    kvcache dtype (fp8: SGLang's MLA cache, (512 + 64) x 1 B x 61 layers), within 0.1%."""
    result = cli("aic", "check", str(DISAGG), "--node", "dualpath-hopper", "--json")
    assert result.code == 0, result.err
    top = result.json()["rows"][0]
    kv = (512 + 64) * 1 * 61
    expected = 65.457 * 32_721 * kv / 1e9
    assert top["model_profile"] == "deepseek-v3"
    assert top["kv_cache_dtype"] == "fp8" and top["kv_cache_dtype_from"] == "kvcache column"
    assert top["kv_bytes_per_token"] == 35_136
    assert math.isclose(top["kv_read_gbyte_s"], expected, rel_tol=1e-3)
    assert 75 < top["kv_read_gbyte_s"] < 76  # 86 GB/s with FlashMLA's 656 B per layer
    # 16 prefill and 32 decode GPUs on 8-GPU nodes: 2P4D.
    assert (top["prefill_nodes"], top["decode_nodes"]) == (2, 4)
    basic, dual = top["storage_bound_seq_s_basic"], top["storage_bound_seq_s_dualpath"]
    # One SNIC per prefill node cannot feed 65 seq/s; six nodes' SNICs can.
    assert basic < 65.457 < dual
    assert top["binding_basic"] == ["pe_snic_read"]
    assert top["verdict"] == f"storage-bound: {basic:,.1f} seq/s basic, {dual:,.1f} dualpath"
    assert top["storage_feeds"] is False


def test_the_bound_is_the_assembly_of_the_same_cluster(registry: Registry) -> None:
    """INV-31: basic loading's storage bound is the one assembly's I/O-only throughput: with
    every compute link unlimited, the SNIC-bound basic rate equals the SNICs' capacity over
    the hit bytes of a turn, the same number size's pe_snic_read limit gives."""
    from dualpath_plan.outcomes.aic import check_aic
    from dualpath_plan.scenario.assemble import assemble

    checked = check_aic(DISAGG, registry, node="dualpath-hopper", storage="3fs")
    top = checked.rows[0]
    hit = 32_721 * phys.kv_bytes_per_token(top.row.model)  # the row's fp8 cache
    # pe_snic_read binds: its capacity (2 nodes, derated as the assembly derates it) / hit.
    from dualpath_plan.outcomes.aic import _scenario
    from dualpath_plan.scenario.bundle import Scenario

    base = Scenario.from_ids(registry, node="dualpath-hopper", storage="3fs")
    asm = assemble(_scenario(base, top.row, "x"), "basic", 2, 4)
    snic = float(asm.links.capacity["pe_snic_read"])
    assert math.isclose(top.basic_seq_s, snic / hit, rel_tol=1e-9)


def test_the_check_applies_the_size_options_and_speed_of_light_bounds_it(cli) -> None:
    # The calibration it applies is size's (same efficiencies payload); at the speed of light
    # every storage bound is at least the calibrated one, and the report says so.
    args = ("aic", "check", str(DISAGG), "--node", "dualpath-hopper", "--json")
    calibrated = cli(*args).json()
    size = cli("size", "--node", "dualpath-hopper", "--json").json()
    assert calibrated["efficiencies"] == size["efficiencies"]
    light = cli(*args, "--speed-of-light").json()
    assert light["efficiencies"]["source"] == "speed-of-light"
    assert "speed of light" in cli(*args[:-1], "--speed-of-light").out
    rows = list(zip(calibrated["rows"], light["rows"], strict=True))
    for mode in ("basic", "dualpath"):
        key = f"storage_bound_seq_s_{mode}"
        assert all(b[key] >= a[key] for a, b in rows)
        assert any(b[key] > a[key] for a, b in rows)
    # An ideal scheduler removes the imbalance that derates the SNICs: never lower.
    ideal = cli(*args, "--scheduler", "ideal").json()
    for a, b in zip(calibrated["rows"], ideal["rows"], strict=True):
        assert b["storage_bound_seq_s_basic"] >= a["storage_bound_seq_s_basic"]


def test_disagg_rows_all_checked(cli) -> None:
    result = cli("aic", "check", str(DISAGG), "--node", "dualpath-hopper", "--json")
    rows = result.json()["rows"]
    assert [r["line"] for r in rows] == [2, 3, 4, 5, 6]
    for r in rows:
        assert r["storage_bound_seq_s_basic"] <= r["storage_bound_seq_s_dualpath"]
        feeds = r["storage_bound_seq_s_basic"] >= r["seq_s"]
        assert r["verdict"].startswith("storage can feed it" if feeds else "storage-bound: ")
    # Row 6: 1 prefill worker of 8 GPUs, 3 decode workers of 8: 1P3D.
    assert (rows[4]["prefill_nodes"], rows[4]["decode_nodes"]) == (1, 3)


def test_agg_schema(cli) -> None:
    """INV-32: an aggregated worker reads its own prefixes: every node reads, no second path,
    so dualpath equals basic; the top agg row (22.4 seq/s on 2 nodes) is fed."""
    result = cli("aic", "check", str(AGG), "--node", "dualpath-hopper", "--json")
    assert result.code == 0, result.err
    payload = result.json()
    assert payload["schema"] == "agg"
    rows = payload["rows"]
    for r in rows:
        assert r["storage_bound_seq_s_basic"] == r["storage_bound_seq_s_dualpath"]
        assert r["prefill_nodes"] == r["decode_nodes"]
    assert rows[0]["prefill_nodes"] == 2 and rows[0]["verdict"] == "storage can feed it"
    assert rows[3]["prefill_nodes"] == 1  # 8 GPUs: one node


def test_table_names_the_verdict(cli) -> None:
    result = cli("aic", "check", str(DISAGG), "--node", "dualpath-hopper")
    assert result.code == 0, result.err
    assert "storage-bound: 42.4 seq/s basic" in result.out
    assert "pe_snic_read" in result.out


def test_csv_appends_our_columns_to_aics_rows(cli, tmp_path: Path) -> None:
    """INV-33: --out is AIC's file, every cell as it was, with the four columns appended."""
    out = tmp_path / "checked.csv"
    result = cli("aic", "check", str(DISAGG), "--node", "dualpath-hopper", "--out", str(out))
    assert result.code == 0, result.err
    original = DISAGG.read_text().splitlines()
    written = out.read_text().splitlines()
    assert len(written) == len(original)
    for a, b in zip(original, written, strict=True):
        assert b.startswith(a + ",")
    rows, theirs = _rows(out), _rows(DISAGG)
    assert list(rows[0])[-4:] == [
        "kv_read_gbyte_s",
        "storage_bound_seq_s_basic",
        "storage_bound_seq_s_dualpath",
        "kv_bandwidth_bottleneck",
    ]
    payload = cli("aic", "check", str(DISAGG), "--node", "dualpath-hopper", "--json").json()
    for ours, aic, checked in zip(rows, theirs, payload["rows"], strict=True):
        assert {k: ours[k] for k in aic} == aic
        assert math.isclose(
            float(ours["kv_read_gbyte_s"]), checked["kv_read_gbyte_s"], rel_tol=1e-5
        )
        assert math.isclose(
            float(ours["storage_bound_seq_s_basic"]),
            checked["storage_bound_seq_s_basic"],
            rel_tol=1e-5,
        )
        assert ours["kv_bandwidth_bottleneck"] == " + ".join(checked["binding_basic"])
    # Checking our own output again is refused: the columns are there already.
    err = one_line_error(cli("aic", "check", str(out), "--node", "dualpath-hopper"))
    assert "kv_read_gbyte_s" in err


# --- bad input: one line, exit 2, nothing written ------------------------------------------


def _broken(tmp_path: Path, column: str, value: str | None, source: Path = DISAGG) -> Path:
    """The fixture with the first row's ``column`` set to ``value`` (None: column dropped)."""
    rows = _rows(source)
    header = list(rows[0])
    if value is None:
        header.remove(column)
    else:
        rows[0][column] = value
    path = tmp_path / "broken.csv"
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.mark.parametrize(
    ("column", "value", "expect"),
    [
        ("seq/s", None, "field 'seq/s': missing column"),
        ("(p)workers", None, "field '(p)workers': missing column"),
        ("seq/s", "fast", "line 2: field 'seq/s': expected a number, got 'fast'"),
        ("prefix", "-5", "line 2: field 'prefix': expected"),
        ("prefix", "40000", "line 2: field 'prefix': a prefix of 40,000 tokens"),
        ("isl", "3.5", "line 2: field 'isl': expected a whole number"),
        ("model", "acme/NoSuchModel-7B", "line 2: field 'model': no model profile lists"),
        ("num_total_gpus", "47", "line 2: field 'num_total_gpus'"),
    ],
)
def test_bad_rows_name_file_line_and_field(
    cli, tmp_path: Path, column: str, value: str | None, expect: str
) -> None:
    path = _broken(tmp_path, column, value)
    out = tmp_path / "out.csv"
    err = one_line_error(
        cli("aic", "check", str(path), "--node", "dualpath-hopper", "--out", str(out))
    )
    assert str(path) in err and expect in err, err
    assert not out.exists()
    if column == "model" and value:
        assert "deepseek-ai/DeepSeek-V3" in err  # the known names


def test_malformed_line_and_previous_output_kept(cli, tmp_path: Path) -> None:
    path = tmp_path / "short.csv"
    lines = DISAGG.read_text().splitlines()
    path.write_text("\n".join([*lines[:2], "deepseek-ai/DeepSeek-V3,1,2", *lines[3:]]) + "\n")
    out = tmp_path / "out.csv"
    out.write_text("previous\n")
    err = one_line_error(
        cli("aic", "check", str(path), "--node", "dualpath-hopper", "--out", str(out))
    )
    assert "line 3" in err and "3 fields" in err
    assert out.read_text() == "previous\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_not_an_aic_file(cli, tmp_path: Path) -> None:
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n")
    err = one_line_error(cli("aic", "check", str(path), "--node", "dualpath-hopper"))
    assert "best_config_topn_disagg.csv" in err


def test_agg_bad_worker_count(cli, tmp_path: Path) -> None:
    path = _broken(tmp_path, "num_total_gpus", "20", source=AGG)
    err = one_line_error(cli("aic", "check", str(path), "--node", "dualpath-hopper"))
    assert "line 2: field 'num_total_gpus'" in err


# --- import-system ---------------------------------------------------------------------------


def test_import_system_round_trip(cli, tmp_path: Path) -> None:
    """The written profiles validate, every number cites the YAML key (or the flag), and
    size and aic check run on them."""
    out = tmp_path / "profiles"
    result = cli("aic", "import-system", str(DATA / "h200_sxm.yaml"), "--out", str(out), *FLAGS)
    assert result.code == 0, result.err
    gpu_file, node_file = out / "gpu" / "aic-h200-sxm.toml", out / "node" / "aic-h200-sxm.toml"
    assert gpu_file.is_file() and node_file.is_file()
    valid = cli("--profiles", str(out), "profiles", "validate", str(out), "--json")
    assert valid.code == 0, valid.out + valid.err
    reg = Registry.load([out])
    gpu, node = reg.gpu("aic-h200-sxm"), reg.node("aic-h200-sxm")
    for profile in (gpu, node):
        for f in profile.numeric_fields_set():
            assert f in profile.sources, f
    assert gpu.hbm_tbyte_s == 4.8 and gpu.bf16_dense_tflops == 989.0
    assert gpu.fp8_dense_tflops == 1978.0 and gpu.fp4_dense_tflops is None
    assert math.isclose(gpu.hbm_gbyte, 151.397597184)  # bytes / 1e9, not GiB
    assert gpu.pcie_gen == 5 and gpu.nvlink_bidir_gbyte_s == 900.0 and gpu.tdp_w == 700.0
    assert gpu.architecture == "hopper" and gpu.release_year == 2024
    assert "gpu.mem_capacity" in gpu.sources["hbm_gbyte"][0]
    assert node.efficiency_source == "datasheet"
    assert node.cnic_gbit_s == 400.0 and node.snic_count == 2 and node.dram_gbyte_s == 614.4
    assert "mem_bw_empirical_scaling_factor = 0.8" in node.unconfirmed["*"]
    assert "--snic-count" in node.sources["snic_count"][0]
    size = cli("--profiles", str(out), "size", "--node", "aic-h200-sxm", "--model", "deepseek-v3")
    assert size.code == 0, size.err
    check = cli("--profiles", str(out), "aic", "check", str(DISAGG), "--node", "aic-h200-sxm")
    assert check.code == 0, check.err


def test_import_blackwell_has_fp4(cli, tmp_path: Path) -> None:
    out = tmp_path / "p"
    result = cli(
        "aic", "import-system", str(DATA / "b200_sxm.yaml"), "--out", str(out), "--id", "b2",
        *FLAGS, "--json",
    )  # fmt: skip
    assert result.code == 0, result.err
    gpu = Registry.load([out]).gpu("b2")
    assert gpu.architecture == "blackwell" and gpu.fp4_dense_tflops == 9000.0
    assert gpu.pcie_gen == 6


def test_import_without_storage_flags_names_them(cli, tmp_path: Path) -> None:
    out = tmp_path / "p"
    err = one_line_error(
        cli("aic", "import-system", str(DATA / "h200_sxm.yaml"), "--out", str(out), *FLAGS[:4])
    )
    for flag in ("--dram-gbyte", "--dram-gbyte-s", "--cnic-count", "--release-year"):
        assert flag in err
    assert "'--snic-count" not in err and "--snic-gbit-s," not in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("edit", "expect"),
    [
        (("  mem_bw: 4800000000000 # 4800GB/s\n", ""), "field 'gpu.mem_bw': missing"),
        (("  pcie_bw: 64000000000", "  pcie_bw: 50000000000"), "field 'node.pcie_bw'"),
        (("  sm_version: 90", "  sm_version: 75"), "field 'gpu.sm_version'"),
        (("  power: 700", "  power: -700"), "field 'gpu.power'"),
        (("  power: 700", "  power: .nan"), "field 'gpu.power'"),
        (("  power: 700", "  power: seven"), "field 'gpu.power'"),
        (("gpu:\n", "gpu: &g\n"), None),  # an anchor alone is fine ...
        (("misc:\n", "misc: *g\nother:\n"), "alias"),  # ... an alias is refused
        (("node:\n", "node: [\n"), "not YAML"),
        (("  power: 700", "  power: 700\n  power: 700"), "given twice"),
        # YAML 1.1 (PyYAML, AIC's reader too) reads an exponent without a sign, or after a
        # mantissa without a point, as text: the error says how to write it (1e-320 was blamed
        # on quotes it did not have), and that form is read.
        (
            ("  mem_bw: 4800000000000 # 4800GB/s", "  mem_bw: 4.8e12"),
            "got str '4.8e12' (YAML 1.1 reads an exponent as a number only with a point in the "
            "mantissa and a sign: write 4.8e+12)",
        ),
        (
            ("  mem_bw: 4800000000000 # 4800GB/s", "  mem_bw: 48e+11"),
            "got str '48e+11' (YAML 1.1 reads an exponent as a number only with a point in the "
            "mantissa and a sign: write 48.0e+11)",
        ),
        (("  mem_bw: 4800000000000 # 4800GB/s", "  mem_bw: 4.8e+12"), None),
        (("  mem_bw: 4800000000000 # 4800GB/s", "  mem_bw: 48.0e+11"), None),
        (("  power: 700", "  power: '700'"), "(a number in quotes is text: write it without them)"),
    ],
)
def test_bad_system_files(cli, tmp_path: Path, edit: tuple[str, str], expect: str | None) -> None:
    text = (DATA / "h200_sxm.yaml").read_text()
    assert edit[0] in text
    path = tmp_path / "sys.yaml"
    path.write_text(text.replace(edit[0], edit[1], 1))
    out = tmp_path / "p"
    result = cli("aic", "import-system", str(path), "--out", str(out), *FLAGS)
    if expect is None:
        assert result.code == 0, result.err
        return
    err = one_line_error(result)
    assert str(path) in err and expect in err, err
    assert not out.exists()


def test_deep_yaml_is_refused(cli, tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * 200 + "]" * 200 + "\n")
    err = one_line_error(
        cli("aic", "import-system", str(path), "--out", str(tmp_path / "p"), *FLAGS)
    )
    assert "nested deeper" in err


def test_a_failed_import_leaves_earlier_profiles(cli, tmp_path: Path) -> None:
    out = tmp_path / "p"
    assert (
        cli("aic", "import-system", str(DATA / "h200_sxm.yaml"), "--out", str(out), *FLAGS).code
        == 0
    )
    before = (out / "node" / "aic-h200-sxm.toml").read_text()
    bad = tmp_path / "h200_sxm.yaml"
    shutil.copy(DATA / "h200_sxm.yaml", bad)
    bad.write_text(bad.read_text().replace("  power: 700", "  power: 0"))
    one_line_error(cli("aic", "import-system", str(bad), "--out", str(out), *FLAGS))
    assert (out / "node" / "aic-h200-sxm.toml").read_text() == before


def test_every_hf_name_maps_to_one_profile(registry: Registry) -> None:
    names = registry.hf_names()
    assert len(names) == len({n.casefold() for n in names})
    for name in names:
        model = registry.model_by_hf_name(name)
        assert model is not None and "hf_names" in model.sources
    assert registry.model_by_hf_name("DEEPSEEK-AI/deepseek-v3").id == "deepseek-v3"  # type: ignore[union-attr]


def test_readme_example_is_what_check_prints(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """INV-16 for the AIConfigurator section: its table lines are what aic check prints."""
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    start = readme.index("$ dualpath-plan aic check best_config_topn_disagg.csv")
    block = readme[start : readme.index("```", start)].splitlines()[1:]
    monkeypatch.chdir(DATA)
    printed = cli("aic", "check", DISAGG.name, "--node", "dualpath-hopper").out.splitlines()
    shown = [line for line in block if line.strip() and line != "..."]
    assert len(shown) > 5
    assert shown == [line.rstrip() for line in printed[: len(shown)]]


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--cnic-count", "0"),
        ("--snic-gbit-s", "-400"),
        ("--release-year", "1800"),
        ("--id", "../x"),
    ],
)
def test_a_bad_flag_is_named_as_a_flag(cli, tmp_path, flag, value) -> None:
    """A flag's bad value is the flag's fault, not the system file's (a CNIC count of 0
    divided by zero)."""
    args = list(FLAGS)
    if flag in args:
        args[args.index(flag) + 1] = value
    else:
        args += [flag, value]
    out = tmp_path / "out"
    err = one_line_error(
        cli("aic", "import-system", str(DATA / "h200_sxm.yaml"), "--out", str(out), *args)
    )
    assert f"field '{flag}'" in err and "h200_sxm.yaml" not in err
    assert not out.exists()


def test_check_will_not_overwrite_its_input(cli, tmp_path) -> None:
    result = tmp_path / "best.csv"
    shutil.copy(DATA / "best_config_topn_disagg.csv", result)
    before = result.read_bytes()
    err = one_line_error(
        cli("aic", "check", str(result), "--node", "dualpath-hopper", "--out", str(result))
    )
    assert "field '--out'" in err and result.read_bytes() == before
    out = tmp_path / "annotated.csv"
    shown = cli("aic", "check", str(result), "--node", "dualpath-hopper", "--out", str(out))
    assert shown.code == 0 and f"wrote {out}" in shown.out


@pytest.mark.parametrize(
    ("key", "line", "value", "meant"),
    [
        ("gpu.mem_bw", "  mem_bw: ", "4800", "4.8e+12"),  # GB/s, not B/s: 4.8e-09 TB/s
        ("gpu.mem_capacity", "  mem_capacity: ", "141", "1.41e+11"),  # GB, not bytes
        ("gpu.power", "  power: ", "700000", "700"),  # mW
    ],
)
def test_import_system_refuses_a_unit_slip(cli, tmp_path: Path, key, line, value, meant) -> None:
    """A value off by a unit prefix made a GPU with 4.8e-09 TB/s of HBM and a TPOT of 3.7e9
    ms, silently (found in a trial): outside what any GPU has, it is refused, naming the key."""
    text = (DATA / "h200_sxm.yaml").read_text().splitlines()
    edited = [f"{line}{value}" if t.startswith(line) else t for t in text]
    assert edited != text
    path = tmp_path / "h200_sxm.yaml"
    path.write_text("\n".join(edited) + "\n")
    err = one_line_error(
        cli("aic", "import-system", str(path), "--out", str(tmp_path / "o"), *FLAGS)
    )
    assert f"field '{key}': {value} " in err and f"did you mean {meant} (" in err
    assert not (tmp_path / "o").exists()


# --- issue 34: aliases, the row's KV dtype, the system, a worker's share of its node ---------


def _edited(tmp_path: Path, source: Path, **cells: str) -> Path:
    """``source`` with ``cells`` (column -> value; names with '(' spelled p_/d_) in every row."""
    rows = _rows(source)
    header = list(rows[0])
    for row in rows:
        for name, value in cells.items():
            column = name.replace("p_", "(p)").replace("d_", "(d)").replace("seq_s", "seq/s")
            assert column in header, column
            row[column] = value
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / source.name
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, header)
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.mark.parametrize(
    ("name", "profile"),
    [
        ("meta-llama/Meta-Llama-3.1-70B", "llama-3.1-70b"),
        ("META-LLAMA/llama-3.1-70b", "llama-3.1-70b"),
        ("Qwen/Qwen3-32B-FP8", "qwen3-32b"),
        ("nvidia/Qwen3-235B-A22B-NVFP4", "qwen3-235b-a22b"),
        ("nvidia/DeepSeek-V3.1-NVFP4", "deepseek-v3"),
    ],
)
def test_published_names_map_to_the_profile(cli, tmp_path: Path, name: str, profile: str) -> None:
    """A model is found under every name it is published under (hf_names), as AIConfigurator
    0.12.0's model_configs name them."""
    path = _edited(tmp_path, AGG, model=name, kvcache="bfloat16")
    result = cli("aic", "check", str(path), "--node", "dgx-h200", "--json")
    assert result.code == 0, result.err
    assert {r["model_profile"] for r in result.json()["rows"]} == {profile}


@pytest.mark.parametrize(
    ("kvcache", "dtype", "per_token"),
    [
        ("fp8", "fp8", 61 * (512 + 64) * 1),  # SGLang's FP8 MLA cache: 35,136 B
        ("bfloat16", "bf16", 61 * (512 + 64) * 2),
        ("", "fp8_flashmla", 61 * 656),  # no dtype in the row: the profile's layout
    ],
)
def test_kv_dtype_is_the_rows(cli, tmp_path: Path, kvcache: str, dtype: str, per_token) -> None:
    path = _edited(tmp_path, AGG, kvcache=kvcache)
    result = cli("aic", "check", str(path), "--node", "dgx-h200", "--json")
    assert result.code == 0, result.err
    for row in result.json()["rows"]:
        assert row["kv_cache_dtype"] == dtype and row["kv_bytes_per_token"] == per_token
        assert math.isclose(
            row["kv_read_gbyte_s"], row["seq_s"] * row["prefix"] * per_token / 1e9, rel_tol=1e-9
        )
        assert row["kv_cache_dtype_from"] == ("kvcache column" if kvcache else "model profile")


def test_a_dsa_models_fp8_keeps_flashmla(cli, tmp_path: Path) -> None:
    path = _edited(tmp_path, AGG, model="deepseek-ai/DeepSeek-V3.2", kvcache="fp8")
    row = cli("aic", "check", str(path), "--node", "dgx-h200", "--json").json()["rows"][0]
    assert row["kv_cache_dtype"] == "fp8_flashmla"


def test_int8_kv_is_refused_naming_the_column(cli, tmp_path: Path) -> None:
    path = _edited(tmp_path, DISAGG, p_kvcache="int8")
    err = one_line_error(cli("aic", "check", str(path), "--node", "dgx-h200"))
    assert "line 2" in err and "field '(p)kvcache'" in err and "'int8'" in err


def test_a_system_other_than_the_nodes_gpu_warns(cli) -> None:
    # The fixture was planned for h200_sxm: the paper's H800 nodes warn, DGX H200 does not.
    other = cli("aic", "check", str(DISAGG), "--node", "dualpath-hopper")
    assert other.code == 0
    lines = other.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: ") and "'h200_sxm'" in lines[0]
    assert "'h800-sxm'" in lines[0]
    same = cli("aic", "check", str(DISAGG), "--node", "dgx-h200")
    assert same.code == 0 and same.err == ""
    payload = cli("aic", "check", str(AGG), "--node", "dgx-b200", "--json").json()
    assert len(payload["warnings"]) == 1 and "b200_sxm" in payload["warnings"][0]


def test_an_imported_node_knows_its_system(cli, tmp_path: Path) -> None:
    out = tmp_path / "p"
    assert cli("aic", "import-system", str(DATA / "h200_sxm.yaml"), "--out", str(out), *FLAGS)
    result = cli("--profiles", str(out), "aic", "check", str(AGG), "--node", "aic-h200-sxm")
    assert result.code == 0 and result.err == ""


def test_a_worker_smaller_than_a_node_gets_its_share_of_the_nics(cli, tmp_path: Path) -> None:
    """4 GPUs of an 8-GPU node read with half its SNICs: half the storage bound of 8 GPUs on
    the same node (the SNICs bind), not the same."""
    whole = _edited(tmp_path, AGG, num_total_gpus="8", tp="8", pp="1", dp="1")
    args = ("--node", "dualpath-hopper", "--json")  # one 400 Gb/s SNIC: it binds
    full = cli("aic", "check", str(whole), *args).json()["rows"][0]
    half_path = _edited(tmp_path / "h", AGG, num_total_gpus="4", tp="4", pp="1", dp="1")
    half = cli("aic", "check", str(half_path), *args).json()["rows"][0]
    assert full["prefill_nodes"] == half["prefill_nodes"] == 1
    assert full["prefill_nic_share"] == 1.0 and half["prefill_nic_share"] == 0.5
    assert full["binding_basic"] == half["binding_basic"] == ["pe_snic_read"]
    assert math.isclose(
        half["storage_bound_seq_s_basic"], full["storage_bound_seq_s_basic"] / 2, rel_tol=1e-9
    )


def test_a_disagg_side_in_part_of_its_nodes(cli, tmp_path: Path) -> None:
    # 1 prefill worker of 4 GPUs, 1 decode worker of 12: shares 4/8 and 12/16.
    path = _edited(
        tmp_path, DISAGG, p_workers="1", p_tp="4", p_dp="1", d_workers="1", d_tp="4", d_dp="3",
        num_total_gpus="16",
    )  # fmt: skip
    result = cli("aic", "check", str(path), "--node", "dgx-h200", "--json")
    assert result.code == 0, result.err
    row = result.json()["rows"][0]
    assert (row["prefill_nodes"], row["decode_nodes"]) == (1, 2)
    assert row["prefill_nic_share"] == 0.5 and row["decode_nic_share"] == 0.75
    assert (
        "share of their storage and compute NICs"
        in cli("aic", "check", str(path), "--node", "dgx-h200").out
    )
