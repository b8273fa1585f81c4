"""AIConfigurator system files (``systems/<name>.yaml``) as our GPU and node profiles.

An AIConfigurator (AIC) system file states a GPU (HBM bandwidth and capacity, tensor FLOP/s,
power, SM version) and a node (GPUs per node, inter-node and NVLink bandwidth per GPU, PCIe)
in bytes, bytes/s, FLOP/s and seconds. Each field we take is converted to our units and cites
the file and key it came from. AIC plans compute only, so it has no storage NICs, no host
DRAM and no NIC count: those come from the command line (``aic import-system --snic-count
...``) and cite it. AIC's empirical corrections (``mem_bw_empirical_scaling_factor``,
latencies, memory reserves) are recorded in the node's ``[unconfirmed]`` note and not applied:
the profiles are ``efficiency_source = "datasheet"``.

Units: AIC's ``mem_capacity`` is bytes (141 GiB for an H200, 151,397,597,184 B); we convert
every byte count to GB of 1e9 B, so it reads 151.4 GB, not the 141 of NVIDIA's datasheet.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dualpath_plan import plausible
from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import MAX_PROFILE_BYTES, load_yaml, number
from dualpath_plan.frozen import record
from dualpath_plan.profiles.registry import validate_profile
from dualpath_plan.profiles.schemas import (
    MAX_MAGNITUDE,
    PCIE_GT_S,
    GpuProfile,
    NodeProfile,
)

# SM version (compute capability x 10) -> our architecture (NVIDIA CUDA C++ Programming Guide,
# "Compute Capabilities": 8.0 A100/A30, 8.9 Ada (L4, L40S), 9.0 Hopper, 10.0/10.3 Blackwell
# data centre (B200/GB200, B300/GB300), 12.0 Blackwell RTX PRO).
ARCHITECTURES = {
    80: "ampere",
    89: "ada",
    90: "hopper",
    100: "blackwell",
    103: "blackwell",
    120: "blackwell",
}
# Why the import needs each required key: the reason a file without it is refused.
NEEDS = {
    "gpu.mem_bw": "the GPU's HBM bandwidth",
    "gpu.mem_capacity": "the GPU's HBM capacity",
    "gpu.bfloat16_tc_flops": "the GPU's BF16 tensor rate",
    "gpu.power": "the GPU's power",
    "gpu.sm_version": "the SM version (CUDA compute capability) names the GPU's architecture",
    "node.num_gpus_per_node": "the GPUs per node",
    "node.inter_node_bw": "the compute NICs' rate",
    "node.intra_node_bw": "the GPU-to-GPU rate inside a node",
    "node.pcie_bw": "the PCIe generation",
}
# The keys we read: (dotted key, what it is); the FP8 and FP4 rates are optional.
REQUIRED_KEYS = (
    "gpu.mem_bw",
    "gpu.mem_capacity",
    "gpu.bfloat16_tc_flops",
    "gpu.power",
    "gpu.sm_version",
    "node.num_gpus_per_node",
    "node.inter_node_bw",
    "node.intra_node_bw",
    "node.pcie_bw",
)
# inter_rack_bw: a rack-scale system's (GB200/GB300 NVL72) network between racks, where its
# inter_node_bw is the NVLink inside the rack.
OPTIONAL_KEYS = ("gpu.fp8_tc_flops", "gpu.fp4_tc_flops", "node.inter_rack_bw")
# AIC's corrections we record but do not apply (docs/model.md section 9).
EMPIRICAL_KEYS = (
    "gpu.mem_bw_empirical_scaling_factor",
    "gpu.mem_empirical_constant_latency",
    "node.p2p_latency",
    "misc.other_mem",
)


@record
class NodeFlags:
    """What an AIC system file lacks, from the command line: None where not given."""

    snic_count: int | None = None
    snic_gbit_s: float | None = None
    dram_gbyte: float | None = None
    dram_gbyte_s: float | None = None
    cnic_count: int | None = None
    release_year: int | None = None
    # Optional: the compute NICs' line rate, where the file gives none that is a NIC's (its
    # inter_node_bw is NVLink) or to override the file's.
    cnic_gbit_s: float | None = None

    OPTIONAL = ("cnic_gbit_s",)
    # Field -> its flag.
    FLAGS = {  # noqa: RUF012
        "snic_count": "--snic-count",
        "snic_gbit_s": "--snic-gbit-s",
        "dram_gbyte": "--dram-gbyte",
        "dram_gbyte_s": "--dram-gbyte-s",
        "cnic_count": "--cnic-count",
        "release_year": "--release-year",
        "cnic_gbit_s": "--cnic-gbit-s",
    }

    # Field -> its quantity in the plausibility table (dualpath_plan/plausible.py): the range
    # a value must lie in, and the unit slips named outside it.
    QUANTITIES = {  # noqa: RUF012
        "snic_count": "node.snic_count",
        "snic_gbit_s": "node.snic_gbit_s",
        "dram_gbyte": "node.dram_gbyte",
        "dram_gbyte_s": "node.dram_gbyte_s",
        "cnic_count": "node.cnic_count",
        "release_year": "gpu.release_year",
        "cnic_gbit_s": "node.cnic_gbit_s",
    }

    def check(self) -> None:
        """Every flag given, each within its range: a bad value names its flag (it is not the
        system file's)."""
        missing = [
            flag
            for name, flag in self.FLAGS.items()
            if getattr(self, name) is None and name not in self.OPTIONAL
        ]
        if missing:
            raise PlanInputError(
                "missing; an AIConfigurator system file has no storage NICs, host DRAM, "
                "compute NIC count or release year (e.g. --snic-count 1 --snic-gbit-s 400 "
                "--dram-gbyte 2048 --dram-gbyte-s 500 --cnic-count 8 --release-year 2024)",
                field=", ".join(missing),
            )
        for name, key in self.QUANTITIES.items():
            value = getattr(self, name)
            if value is None and name in self.OPTIONAL:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise PlanInputError(f"expected a number, got {value!r}", field=self.FLAGS[name])
            why = plausible.problem(key, value)
            if why is None and not math.isfinite(value):
                why = f"expected a finite number, got {value!r}"
            if why is not None:
                raise PlanInputError(why, field=self.FLAGS[name])


def default_id(path: Path) -> str:
    """``aic-<file name>``: h200_sxm.yaml -> aic-h200-sxm."""
    stem = re.sub(r"[^a-z0-9.-]+", "-", path.stem.lower()).strip("-.")
    return f"aic-{stem or 'system'}"


def _lookup(data: Any, key: str) -> Any:
    value = data
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def import_system(
    path: Path, flags: NodeFlags, profile_id: str | None = None
) -> tuple[GpuProfile, NodeProfile]:
    """The GPU and node profiles of an AIC system file, each with the id ``profile_id``
    (default :func:`default_id`), every field citing the file and key or the flag it came
    from; validated (a bad value is a PlanInputError naming the file, line and key)."""
    flags.check()
    source = str(path)
    data, lines = load_yaml(
        path, what="AIConfigurator system file (YAML)", max_bytes=MAX_PROFILE_BYTES
    )
    if not isinstance(data, Mapping):
        raise PlanInputError(
            "expected a mapping with 'gpu' and 'node' (an AIConfigurator system file)",
            source=source,
        )
    absent = [k for k in ("gpu", "node") if not isinstance(data.get(k), Mapping)]
    if absent:
        # AIConfigurator's systems/ folder also holds files that are no system (its
        # attention_lane_defaults.yaml, query_versions.yaml, perf_data_reuse_manifest.yaml).
        raise PlanInputError(
            " and ".join(f"no '{k}' section" for k in absent)
            + "; not an AIConfigurator system file (systems/<gpu>.yaml has both)",
            source=source,
            field=absent[0],
        )
    pid = profile_id or default_id(path)

    def parent_line(key: str) -> int | None:
        head, _, _ = key.rpartition(".")
        return lines.get(head)

    def value(key: str, *, integer: bool = False, low: float = 1e-9) -> float | None:
        raw = _lookup(data, key)
        if raw is None:
            if key in OPTIONAL_KEYS:
                return None
            raise PlanInputError(
                f"missing from this file; the import needs it: {NEEDS[key]}",
                source=source,
                line=parent_line(key),
                field=key,
            )
        got = number(
            raw,
            source=source,
            field=key,
            line=lines.get(key),
            integer=integer,
            low=low,
            high=MAX_MAGNITUDE * 1e12,
        )
        # A value off by a unit prefix (mem_bw: 4800 for 4.8e12 B/s) made a GPU with an HBM
        # of 4.8e-09 TB/s and a TPOT of 3.7e9 ms, silently (found in a trial): the
        # plausibility table holds the file's keys as aic.KEY, in AIConfigurator's units.
        why = plausible.problem(f"aic.{key}", got)
        if why is not None:
            raise PlanInputError(why, source=source, line=lines.get(key), field=key)
        return got

    def need(key: str, **kw: Any) -> float:
        v = value(key, **kw)
        assert v is not None
        return v

    def cite(key: str, raw: float, how: str) -> list[str]:
        return [f"AIConfigurator system file {source}, {key} = {raw:.12g} ({how})"]

    def flag_source(name: str) -> list[str]:
        return [
            f"given on the command line: dualpath-plan aic import-system {NodeFlags.FLAGS[name]} "
            f"{getattr(flags, name)} (not in the AIConfigurator system file {path.name})"
        ]

    known = ", ".join(f"{k} ({v})" for k, v in ARCHITECTURES.items())
    if _lookup(data, "gpu.sm_version") is None:
        # AIConfigurator's b60.yaml (Intel Arc Pro B60) states none: no NVIDIA architecture.
        raise PlanInputError(
            "missing from this file; the import needs it: the SM version (CUDA compute "
            f"capability) names the GPU's architecture, one of {known}",
            source=source,
            line=lines.get("gpu"),
            field="gpu.sm_version",
        )
    sm = int(need("gpu.sm_version", integer=True))
    if sm not in ARCHITECTURES:
        raise PlanInputError(
            f"SM version {sm} is not one we model; expected {known}",
            source=source,
            line=lines.get("gpu.sm_version"),
            field="gpu.sm_version",
        )
    pcie_bw = need("node.pcie_bw")
    gens = {g: rate * 16 / 8 * 1e9 for g, rate in PCIE_GT_S.items()}
    pcie_gen = next((g for g, r in gens.items() if abs(pcie_bw - r) <= 0.01 * r), None)
    if pcie_gen is None:
        rates = ", ".join(f"{r:.0f} (Gen{g})" for g, r in gens.items())
        raise PlanInputError(
            f"{pcie_bw:.6g} B/s is no PCIe x16 rate per direction; expected one of {rates}",
            source=source,
            line=lines.get("node.pcie_bw"),
            field="node.pcie_bw",
        )
    mem_bw = need("gpu.mem_bw")
    mem_cap = need("gpu.mem_capacity")
    bf16 = need("gpu.bfloat16_tc_flops")
    fp8 = value("gpu.fp8_tc_flops")
    fp4 = value("gpu.fp4_tc_flops")
    power = need("gpu.power")
    intra = need("node.intra_node_bw")
    gpus = int(need("node.num_gpus_per_node", integer=True))
    inter = need("node.inter_node_bw")
    inter_rack = value("node.inter_rack_bw")
    # GPUs that talk no faster than their PCIe link have no NVLink: AIConfigurator's PCIe
    # parts (a100_pcie, a30, h100_pcie, l4, l40s, rtx_pro_6000_server) give their PCIe rate as
    # intra_node_bw ("PCIe Gen5 x16 without NVLink"). PCIe is PCIe: nvlink_bidir_gbyte_s = 0,
    # and the model's GPU-to-GPU traffic takes the PCIe rate (physics/latency.py).
    has_nvlink = intra > pcie_bw * 1.01
    # An inter-node rate as fast as the NVLink is NVLink (GB200/GB300: "NVLink via NVSwitch
    # within rack"), never a compute NIC.
    nvlink_inter = has_nvlink and inter >= intra

    gpu_data: dict[str, Any] = {
        "kind": "gpu",
        "id": pid,
        "name": f"{path.stem} (from an AIConfigurator system file)",
        "description": f"Converted by dualpath-plan aic import-system from {source}.",
        "architecture": ARCHITECTURES[sm],
        "release_year": flags.release_year,
        "bf16_dense_tflops": bf16 / 1e12,
        "hbm_gbyte": mem_cap / 1e9,
        "hbm_tbyte_s": mem_bw / 1e12,
        "pcie_gen": pcie_gen,
        "nvlink_bidir_gbyte_s": intra * 2 / 1e9 if has_nvlink else 0.0,
        "tdp_w": power,
        # AIConfigurator names a system by its file's stem.
        "aic_systems": [path.stem] if re.fullmatch(r"[A-Za-z0-9][\w.-]*", path.stem) else [],
        "sources": {
            "architecture": cite("gpu.sm_version", sm, f"SM {sm}: {ARCHITECTURES[sm]}"),
            "release_year": flag_source("release_year"),
            "bf16_dense_tflops": cite("gpu.bfloat16_tc_flops", bf16, "FLOP/s / 1e12"),
            "hbm_gbyte": cite("gpu.mem_capacity", mem_cap, "bytes / 1e9: GB of 1e9 B"),
            "hbm_tbyte_s": cite("gpu.mem_bw", mem_bw, "B/s / 1e12"),
            "pcie_gen": cite("node.pcie_bw", pcie_bw, f"B/s per direction: Gen{pcie_gen} x16"),
            "nvlink_bidir_gbyte_s": cite(
                "node.intra_node_bw",
                intra,
                "B/s per GPU, one direction, x 2 / 1e9"
                if has_nvlink
                else f"B/s, no faster than pcie_bw = {pcie_bw:.12g}: the GPUs talk over PCIe, "
                "no NVLink, so 0",
            ),
            "tdp_w": cite("gpu.power", power, "W"),
            "aic_systems": [f"AIConfigurator system file {source} (its file name)"],
        },
        "unconfirmed": {
            "hbm_gbyte": (
                f"AIConfigurator states mem_capacity in bytes ({mem_cap:.0f} B = "
                f"{mem_cap / 2**30:.4g} GiB); converted exactly to GB of 1e9 B. Where the "
                f"datasheet states {mem_cap / 2**30:.4g} GB (AIC's system files read a "
                f"datasheet's GB as GiB, e.g. the H200's 141), this is {2**30 / 1e9 - 1:.1%} "
                "more HBM than the datasheet says."
            ),
        },
    }
    if fp8 is not None:
        gpu_data["fp8_dense_tflops"] = fp8 / 1e12
        gpu_data["sources"]["fp8_dense_tflops"] = cite("gpu.fp8_tc_flops", fp8, "FLOP/s / 1e12")
    if fp4 is not None:
        gpu_data["fp4_dense_tflops"] = fp4 / 1e12
        gpu_data["sources"]["fp4_dense_tflops"] = cite("gpu.fp4_tc_flops", fp4, "FLOP/s / 1e12")

    cnic_count = flags.cnic_count
    assert cnic_count is not None
    per_nic = f"x {gpus} GPUs x 8 / {cnic_count} NICs / 1e9"
    cnic_note: str | None = None
    if flags.cnic_gbit_s is not None:
        cnic_gbit_s = flags.cnic_gbit_s
        cnic_source = flag_source("cnic_gbit_s")
    elif inter_rack is not None:
        cnic_gbit_s = inter_rack * gpus * 8 / cnic_count / 1e9
        cnic_source = cite(
            "node.inter_rack_bw", inter_rack, f"B/s per GPU, one direction, {per_nic}"
        )
    elif nvlink_inter:
        raise PlanInputError(
            f"{inter:.6g} B/s per GPU is as fast as the NVLink (intra_node_bw {intra:.6g}): "
            "NVLink, not a compute NIC, and the file gives no inter_rack_bw; give the compute "
            "NICs' line rate with --cnic-gbit-s",
            source=source,
            line=lines.get("node.inter_node_bw"),
            field="node.inter_node_bw",
        )
    else:
        cnic_gbit_s = inter * gpus * 8 / cnic_count / 1e9
        cnic_source = cite("node.inter_node_bw", inter, f"B/s per GPU, one direction, {per_nic}")
    if nvlink_inter:
        cnic_note = (
            f"The file's inter_node_bw ({inter:.6g} B/s per GPU) is NVLink between the nodes "
            "of its rack, not a NIC: the compute NICs are "
            + ("--cnic-gbit-s" if flags.cnic_gbit_s is not None else "inter_rack_bw")
            + ". dualpath-plan models no NVLink between nodes: traffic between nodes of "
            "the rack is counted on the compute NICs, a lower bound on its rate."
        )
    empirical = [
        f"{k} = {v:.6g}"
        for k in EMPIRICAL_KEYS
        if isinstance(v := _lookup(data, k), int | float) and not isinstance(v, bool)
    ]
    node_data: dict[str, Any] = {
        "kind": "node",
        "id": pid,
        "name": f"{path.stem} node (from an AIConfigurator system file)",
        "description": f"Converted by dualpath-plan aic import-system from {source}.",
        "gpu": pid,
        "gpus_per_node": gpus,
        "cnic_count": cnic_count,
        "cnic_gbit_s": cnic_gbit_s,
        "snic_count": flags.snic_count,
        "snic_gbit_s": flags.snic_gbit_s,
        "dram_gbyte": flags.dram_gbyte,
        "dram_gbyte_s": flags.dram_gbyte_s,
        "efficiency_source": "datasheet",
        "sources": {
            "gpus_per_node": cite("node.num_gpus_per_node", gpus, "GPUs"),
            "cnic_count": flag_source("cnic_count"),
            "cnic_gbit_s": cnic_source,
            **{
                f: flag_source(f)
                for f in ("snic_count", "snic_gbit_s", "dram_gbyte", "dram_gbyte_s")
            },
            "efficiency_source": [
                "datasheet rates: AIConfigurator's empirical corrections are not applied "
                "(see [unconfirmed])"
            ],
        },
        "unconfirmed": {
            "*": (
                f"Converted from the AIConfigurator system file {path.name} at datasheet rates "
                "(efficiency_source 'datasheet': every efficiency 1, no latency floor). "
                "AIConfigurator's empirical corrections are recorded, not applied: "
                + ("; ".join(empirical) if empirical else "none in the file")
                + ". Measure or calibrate (dualpath-plan calibrate) before trusting "
                "latencies; the storage NICs and DRAM are what the command line said."
            ),
        },
    }
    if cnic_note is not None:
        node_data["unconfirmed"]["cnic_gbit_s"] = cnic_note
    gpu = validate_profile(gpu_data, source=f"{source} (as a gpu profile)")
    node = validate_profile(node_data, source=f"{source} (as a node profile)")
    assert isinstance(gpu, GpuProfile) and isinstance(node, NodeProfile)
    return gpu, node
