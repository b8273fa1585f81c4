"""Every file in the systems/ folder AIConfigurator 0.12.0 ships (aiconfigurator_core 0.12.0
wheel, tests/data/aic/systems/, unmodified): ``aic import-system`` imports it, or refuses it
with a reason that is true of that file (issue 34, "Must reach")."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from dualpath_plan.profiles.registry import Registry
from tests.test_limits import one_line_error

SYSTEMS = Path(__file__).parent / "data" / "aic" / "systems"
STORAGE_FLAGS = (
    "--snic-count", "2", "--snic-gbit-s", "400", "--dram-gbyte", "2048",
    "--dram-gbyte-s", "500", "--release-year", "2024",
)  # fmt: skip


@dataclass(frozen=True)
class Imported:
    """What the file states, read off it by hand: architecture from sm_version, NVLink 2 x
    intra_node_bw (0 where intra_node_bw is the PCIe rate), PCIe generation from pcie_bw,
    compute NIC rate per NIC from the per-GPU inter-node NIC rate x GPUs x 8 / NICs."""

    architecture: str
    nvlink_bidir_gbyte_s: float
    pcie_gen: int
    gpus_per_node: int
    cnic_count: int
    cnic_gbit_s: float


EIGHT = {"gpus_per_node": 8, "cnic_count": 8}
# Rack-scale trays: 4 GPUs and 4 CX8 NICs, whose rate is inter_rack_bw (100 GB/s per GPU);
# inter_node_bw (900 GB/s) is the rack's NVLink.
TRAY = {"gpus_per_node": 4, "cnic_count": 4}
IMPORTED = {
    "a100_pcie.yaml": Imported("ampere", 0.0, 4, **EIGHT, cnic_gbit_s=200.0),
    "a100_sxm.yaml": Imported("ampere", 600.0, 4, **EIGHT, cnic_gbit_s=200.0),
    "a30.yaml": Imported("ampere", 0.0, 4, **EIGHT, cnic_gbit_s=200.0),
    "b200_sxm.yaml": Imported("blackwell", 1800.0, 6, **EIGHT, cnic_gbit_s=800.0),
    "b300_sxm.yaml": Imported("blackwell", 1800.0, 6, **EIGHT, cnic_gbit_s=800.0),
    "gb200.yaml": Imported("blackwell", 1800.0, 5, **TRAY, cnic_gbit_s=800.0),
    "gb300.yaml": Imported("blackwell", 1800.0, 5, **TRAY, cnic_gbit_s=800.0),
    "h100_pcie.yaml": Imported("hopper", 0.0, 5, **EIGHT, cnic_gbit_s=400.0),
    "h100_sxm.yaml": Imported("hopper", 900.0, 5, **EIGHT, cnic_gbit_s=400.0),
    "h200_sxm.yaml": Imported("hopper", 900.0, 5, **EIGHT, cnic_gbit_s=400.0),
    "l4.yaml": Imported("ada", 0.0, 4, **EIGHT, cnic_gbit_s=200.0),
    "l40s.yaml": Imported("ada", 0.0, 4, **EIGHT, cnic_gbit_s=400.0),
    "rtx_pro_6000_server.yaml": Imported("blackwell", 0.0, 5, **EIGHT, cnic_gbit_s=400.0),
}
NOT_A_SYSTEM = (
    "field 'gpu': no 'gpu' section and no 'node' section; not an AIConfigurator system file"
)
REFUSED = {
    # The Intel Arc Pro B60 file gives no sm_version (and no NVIDIA architecture has it).
    "b60.yaml": (
        "line 5: field 'gpu.sm_version': missing from this file; the import needs it: the SM "
        "version (CUDA compute capability) names the GPU's architecture"
    ),
    "attention_lane_defaults.yaml": NOT_A_SYSTEM,
    "perf_data_reuse_manifest.yaml": NOT_A_SYSTEM,
    "query_versions.yaml": NOT_A_SYSTEM,
}


def test_every_shipped_file_is_expected() -> None:
    """The table covers the folder exactly: a file added to the fixtures needs a verdict."""
    assert {p.name for p in SYSTEMS.glob("*.yaml")} == set(IMPORTED) | set(REFUSED)
    assert len(IMPORTED) + len(REFUSED) == 17


def _import(cli, name: str, out: Path, *extra: str):  # type: ignore[no-untyped-def]
    cnic = str(IMPORTED[name].cnic_count) if name in IMPORTED else "8"
    return cli(
        "aic", "import-system", str(SYSTEMS / name), "--out", str(out),
        *STORAGE_FLAGS, "--cnic-count", cnic, *extra,
    )  # fmt: skip


@pytest.mark.parametrize("name", sorted(IMPORTED))
def test_system_file_imports(cli, tmp_path: Path, name: str) -> None:
    out = tmp_path / "p"
    result = _import(cli, name, out)
    assert result.code == 0, result.err
    valid = cli("--profiles", str(out), "profiles", "validate", str(out))
    assert valid.code == 0, valid.out + valid.err
    pid = "aic-" + Path(name).stem.replace("_", "-")
    reg = Registry.load([out])
    gpu, node = reg.gpu(pid), reg.node(pid)
    want = IMPORTED[name]
    assert gpu.architecture == want.architecture
    assert gpu.nvlink_bidir_gbyte_s == want.nvlink_bidir_gbyte_s
    assert gpu.pcie_gen == want.pcie_gen and gpu.pcie_lanes == 16
    assert node.gpus_per_node == want.gpus_per_node and node.cnic_count == want.cnic_count
    assert math.isclose(node.cnic_gbit_s, want.cnic_gbit_s)
    # Plausible for any GPU AIConfigurator ships: 24 to 300 GB of HBM at 0.3 to 8 TB/s,
    # 100 to 2,500 BF16 TFLOPS, 70 to 1,400 W; a compute NIC of 200 or 800 Gb/s, never NVLink.
    assert 24 <= gpu.hbm_gbyte <= 300 and 0.3 <= gpu.hbm_tbyte_s <= 8
    assert 100 <= gpu.bf16_dense_tflops <= 2500 and 70 <= gpu.tdp_w <= 1400
    assert node.cnic_gbit_s <= 800
    for profile in (gpu, node):
        for f in profile.numeric_fields_set():
            assert f in profile.sources, f


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_system_file_refused_for_a_true_reason(cli, tmp_path: Path, name: str) -> None:
    out = tmp_path / "p"
    err = one_line_error(_import(cli, name, out))
    assert f"{SYSTEMS / name}: {REFUSED[name]}" in err
    assert not out.exists()


def test_b60_truly_has_no_sm_version() -> None:
    """The reason given for b60.yaml is true of the file."""
    text = (SYSTEMS / "b60.yaml").read_text()
    assert "sm_version" not in text and "gpu:" in text and "node:" in text


def test_rack_nvlink_is_no_compute_nic(cli, tmp_path: Path) -> None:
    """A rack file without inter_rack_bw states only NVLink between nodes: refused unless
    --cnic-gbit-s gives the NICs; then the flag's rate, cited to the flag."""
    text = (SYSTEMS / "gb200.yaml").read_text()
    line = next(x for x in text.splitlines(keepends=True) if "inter_rack_bw:" in x)
    path = tmp_path / "gb200.yaml"
    path.write_text(text.replace(line, ""))
    args = ("aic", "import-system", str(path), *STORAGE_FLAGS, "--cnic-count", "4")
    err = one_line_error(cli(*args, "--out", str(tmp_path / "a")))
    assert "field 'node.inter_node_bw'" in err and "NVLink" in err and "--cnic-gbit-s" in err
    assert not (tmp_path / "a").exists()
    out = tmp_path / "b"
    assert cli(*args, "--out", str(out), "--cnic-gbit-s", "800").code == 0
    node = Registry.load([out]).node("aic-gb200")
    assert node.cnic_gbit_s == 800.0 and "--cnic-gbit-s 800" in node.sources["cnic_gbit_s"][0]
    assert "NVLink" in node.unconfirmed["cnic_gbit_s"]


def test_rack_file_cites_inter_rack_bw(cli, tmp_path: Path) -> None:
    out = tmp_path / "p"
    assert _import(cli, "gb300.yaml", out).code == 0
    node = Registry.load([out]).node("aic-gb300")
    assert "node.inter_rack_bw" in node.sources["cnic_gbit_s"][0]
    assert "is NVLink between the nodes of its rack" in node.unconfirmed["cnic_gbit_s"]


def test_cnic_gbit_s_out_of_range_names_the_flag(cli, tmp_path: Path) -> None:
    err = one_line_error(_import(cli, "h200_sxm.yaml", tmp_path / "p", "--cnic-gbit-s", "4e11"))
    assert "--cnic-gbit-s" in err


def test_pcie_node_sizes(cli, tmp_path: Path) -> None:
    """A node without NVLink (0) runs: its GPU-to-GPU traffic takes the PCIe rate."""
    out = tmp_path / "p"
    assert _import(cli, "h100_pcie.yaml", out).code == 0
    size = cli("--profiles", str(out), "size", "--node", "aic-h100-pcie", "--json")
    assert size.code == 0, size.err
