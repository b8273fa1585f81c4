"""Hardware trend (the paper's Figure 3 left): compute, host I/O, HBM per GPU, relative to a
base GPU. The I/O-to-compute ratio is PCIe bytes/s per direction over dense FLOPS
(hardware-and-models.md E: express it per profile and let the user choose the dtype)."""

from __future__ import annotations

from typing import Literal

from dualpath_plan.errors import PlanInputError
from dualpath_plan.frozen import record
from dualpath_plan.profiles.schemas import Dtype, GpuProfile

TrendDtype = Dtype | Literal["best"]


@record
class TrendRow:
    gpu: str
    architecture: str
    release_year: int
    dtype: str  # the dtype whose FLOPS are used
    dense_tflops: float
    pcie_gbyte_s: float  # raw, per direction
    hbm_gbyte: float
    hbm_tbyte_s: float
    io_to_compute_byte_per_kflop: float  # PCIe bytes per 1e3 FLOP
    flops_x: float  # relative to the base GPU
    pcie_x: float
    hbm_capacity_x: float
    hbm_bandwidth_x: float
    io_to_compute_x: float  # < 1: less I/O per FLOP than the base


def trend(gpus: list[GpuProfile], base: GpuProfile, dtype: TrendDtype) -> list[TrendRow]:
    """One row per GPU that has ``dtype`` (``best``: each GPU's lowest precision)."""

    def flops(g: GpuProfile) -> tuple[str, float | None]:
        used = g.best_dtype() if dtype == "best" else dtype
        return used, g.dense_tflops(used)

    _, base_flops = flops(base)
    if base_flops is None:
        raise PlanInputError(
            f"base GPU '{base.id}' has no {dtype} tensor cores; choose another --base or --dtype",
            field="--dtype",
        )
    base_io = base.pcie_raw_gbyte_s / base_flops
    rows = []
    for g in sorted(gpus, key=lambda g: (g.release_year, g.bf16_dense_tflops, g.id)):
        used, tf = flops(g)
        if tf is None:
            continue
        io = g.pcie_raw_gbyte_s / tf
        rows.append(
            TrendRow(
                gpu=g.id,
                architecture=g.architecture,
                release_year=g.release_year,
                dtype=used,
                dense_tflops=tf,
                pcie_gbyte_s=g.pcie_raw_gbyte_s,
                hbm_gbyte=g.hbm_gbyte,
                hbm_tbyte_s=g.hbm_tbyte_s,
                io_to_compute_byte_per_kflop=g.pcie_raw_gbyte_s * 1e9 / (tf * 1e12) * 1e3,
                flops_x=tf / base_flops,
                pcie_x=g.pcie_raw_gbyte_s / base.pcie_raw_gbyte_s,
                hbm_capacity_x=g.hbm_gbyte / base.hbm_gbyte,
                hbm_bandwidth_x=g.hbm_tbyte_s / base.hbm_tbyte_s,
                io_to_compute_x=io / base_io,
            )
        )
    return rows
