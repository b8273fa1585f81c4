"""Per-link loads of the two KV read paths (dualpath-paper.md 1.4 and 2.4), vectorized.

Every byte of a turn is followed step by step. For a share ``x`` of the hit bytes read on the
decode-engine (DE) path and ``1 - x`` on the prefill-engine (PE) path, each link's load per
turn, summed over the nodes of its side, is ``a + b x`` bytes; dividing by the side's node
count gives the per-node load. Symbols: H hit bytes, Mi miss (appended-token) KV bytes,
Ga generated-token KV bytes, Aw appended-token KV written back, F prefill FLOPs, G generated
tokens.

PE path, one hit byte (steps of the paper's Figure 4): storage -> PE SNIC -> PE DRAM (1-2);
DRAM -> PE CNIC (PCIe read) -> PE HBM (PCIe write, loopback H2D) (3-4); after the layer,
PE HBM -> PE CNIC (PCIe read) -> network -> DE CNIC -> DE DRAM (PCIe write) (5-7); after
prefill DE DRAM -> DE CNIC (PCIe read) -> DE HBM (PCIe write) (8-9).
DE path, one hit byte: storage -> DE SNIC -> DE DRAM (1-2); DE DRAM -> DE CNIC (PCIe read)
-> network -> PE CNIC -> PE HBM (PCIe write) (3-5); after prefill DE DRAM -> DE CNIC ->
DE HBM (6-7).
Miss KV (both paths): PE HBM -> PE CNIC -> network -> DE CNIC -> DE DRAM, then H2D into DE HBM.
Write-back: appended-token KV from the DE buffer (DRAM read -> SNIC egress); generated-token
KV D2H through the CNIC into DRAM, then DRAM read -> SNIC egress (paper 1.4 "KV-cache writes").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from dualpath_plan.physics.model import FloatArray

# A scenario input: one value or an array of them (they broadcast together).
Num = FloatArray | np.float64 | float

# Link names: side prefix ("pe_", "de_") + resource. Order is the report order.
LINKS: tuple[str, ...] = (
    "pe_snic_read",
    "pe_snic_write",
    "pe_dram",
    "pe_cnic_pcie_read",
    "pe_cnic_pcie_write",
    "pe_cnic_net_send",
    "pe_cnic_net_recv",
    "pe_gpu_pcie_h2d",
    "pe_gpu_pcie_d2h",
    "pe_compute",
    "de_snic_read",
    "de_snic_write",
    "de_dram",
    "de_cnic_pcie_read",
    "de_cnic_pcie_write",
    "de_cnic_net_send",
    "de_cnic_net_recv",
    "de_gpu_pcie_h2d",
    "de_gpu_pcie_d2h",
    "de_decode",
    "storage_read",
    "storage_write",
)
LINK_INDEX = {name: i for i, name in enumerate(LINKS)}
COMPUTE_LINKS = ("pe_compute", "de_decode")
IO_LINKS = tuple(n for n in LINKS if n not in COMPUTE_LINKS)

LINK_DESCRIPTIONS = {
    "snic_read": "storage NIC, storage -> node",
    "snic_write": "storage NIC, node -> storage",
    "dram": "host DRAM, reads + writes (half duplex, paper 4.2)",
    "cnic_pcie_read": "compute NICs' PCIe side, reads (host/HBM -> NIC)",
    "cnic_pcie_write": "compute NICs' PCIe side, writes (NIC -> host/HBM)",
    "cnic_net_send": "compute network, node -> peer",
    "cnic_net_recv": "compute network, peer -> node",
    "gpu_pcie_h2d": "GPUs' PCIe links, into HBM",
    "gpu_pcie_d2h": "GPUs' PCIe links, out of HBM",
    "compute": "prefill tensor FLOPs",
    "decode": "decode tokens/s of the decode group",
    "storage_read": "storage cluster aggregate read",
    "storage_write": "storage cluster aggregate write",
}
LINK_UNITS = {"compute": "FLOP", "decode": "token"}


def link_resource(name: str) -> str:
    return name[3:] if name[:3] in ("pe_", "de_") else name


def link_unit(name: str) -> str:
    return LINK_UNITS.get(link_resource(name), "B")


@dataclass(frozen=True)
class PathOptions:
    """Which terms beyond the paper's equations (1)-(9) apply. ``paper()`` switches them off:
    no miss KV, no write-back, no collectives' share, efficiencies 1, CNIC PCIe side capped at
    the NIC rate only, no GPU PCIe link, no storage-cluster limit."""

    miss_kv: bool = True
    writeback: bool = True
    collectives: bool = True
    efficiencies: bool = True
    pcie_link_limit: bool = True
    gpu_pcie: bool = True
    storage_limit: bool = True

    @classmethod
    def paper(cls) -> PathOptions:
        return cls(False, False, False, False, False, False, False)


@dataclass(frozen=True)
class Demand:
    """Per-turn demand (scalars or arrays that broadcast)."""

    hit_bytes: Num
    miss_bytes: Num
    generated_kv_bytes: Num
    append_writeback_bytes: Num
    prefill_flops: Num
    generated_tokens: Num


@dataclass(frozen=True)
class SideCaps:
    """Capacities of ONE node of a side, per second (bytes/s, FLOP/s), arrays broadcast."""

    snic_read: Num
    snic_write: Num
    dram: Num
    cnic_pcie_read: Num
    cnic_pcie_write: Num
    cnic_net_send: Num
    cnic_net_recv: Num
    gpu_pcie_h2d: Num
    gpu_pcie_d2h: Num
    compute: Num  # prefill FLOP/s (PE side); unused on the DE side


@dataclass(frozen=True)
class Cluster:
    """A homogeneous P/D cluster: P prefill nodes, D decode nodes, their per-node capacities,
    the decode group's token rate and the storage cluster's aggregate limits."""

    prefill_nodes: Num
    decode_nodes: Num
    pe: SideCaps
    de: SideCaps
    decode_tokens_per_s: Num  # whole decode group
    storage_read: Num  # aggregate B/s (inf: no limit)
    storage_write: Num
    extra: dict[str, Num] = field(default_factory=dict)


# SideCaps fields in LINKS order (the same order on both sides).
SIDE_FIELDS: tuple[str, ...] = tuple(SideCaps.__dataclass_fields__)


def _a(x: ArrayLike | Num) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


def turn_load_columns(
    d: Demand, options: PathOptions = PathOptions()
) -> dict[str, tuple[Num, Num]]:
    """Per link name, (a, b): load per turn = a + b x, summed over the link's side. Arrays keep
    their own shapes (a scalar demand gives scalars), so solvers broadcast only what varies."""
    H = _a(d.hit_bytes)
    Mi = _a(d.miss_bytes) if options.miss_kv else 0.0 * H
    Ga = _a(d.generated_kv_bytes) if options.writeback else 0.0 * H
    Aw = _a(d.append_writeback_bytes) if options.writeback else 0.0 * H
    F = _a(d.prefill_flops)
    G = _a(d.generated_tokens)
    zero = np.float64(0.0)
    rows: dict[str, tuple[Num, Num]] = {
        # PE side
        "pe_snic_read": (H, -H),  # step 1 of the PE path
        "pe_snic_write": (zero, zero),
        "pe_dram": (2 * H, -2 * H),  # SNIC writes the buffer, CNIC reads it (step 3)
        "pe_cnic_pcie_read": (2 * H + Mi, -2 * H),  # steps 3 and 5 (hit), 5 (miss)
        "pe_cnic_pcie_write": (H, zero),  # PE step 4 (1-x) + DE step 5 (x)
        "pe_cnic_net_send": (H + Mi, -H),  # PE step 6 (hit, miss)
        "pe_cnic_net_recv": (zero, H),  # DE step 4
        "pe_gpu_pcie_h2d": (H, zero),  # hit KV lands in PE HBM on either path
        "pe_gpu_pcie_d2h": (H + Mi, -H),  # layer KV leaves PE HBM (PE path hit, all miss)
        "pe_compute": (F, zero),
        # DE side
        "de_snic_read": (zero, H),  # DE step 1
        "de_snic_write": (Ga + Aw, zero),  # write-back to storage
        # PE path: write (7) + read (8); DE path: write (2) + reads (3, 6); miss: write + read;
        # generated KV: D2H write + SNIC read; appended KV: SNIC read from the buffer.
        "de_dram": (2 * H + 2 * Mi + 2 * Ga + Aw, H),
        "de_cnic_pcie_read": (H + Mi + Ga, H),  # PE step 8; DE steps 3, 6; miss H2D; gen D2H
        "de_cnic_pcie_write": (2 * H + 2 * Mi + Ga, -H),  # PE 7, 9; DE 7; miss 7, 9; gen D2H
        "de_cnic_net_send": (zero, H),  # DE step 3
        "de_cnic_net_recv": (H + Mi, -H),  # PE step 6 arrives (hit, miss)
        "de_gpu_pcie_h2d": (H + Mi, zero),  # the full prompt KV into DE HBM
        "de_gpu_pcie_d2h": (Ga, zero),  # generated KV out for write-back
        "de_decode": (G, zero),
        "storage_read": (H, zero),
        "storage_write": (Ga + Aw, zero),
    }
    return rows


def turn_loads(d: Demand, options: PathOptions = PathOptions()) -> tuple[FloatArray, FloatArray]:
    """(a, b) of shape (..., len(LINKS)): bytes (FLOPs, tokens) per turn on each link summed
    over its side's nodes, load = a + b x. Each coefficient is the step list in the module
    docstring; ``tests/test_paths.py`` checks conservation and the paper's per-pair loads."""
    rows = turn_load_columns(d, options)
    cols = np.broadcast_arrays(*[v for n in LINKS for v in rows[n]])
    a = np.stack(cols[0::2], axis=-1)
    b = np.stack(cols[1::2], axis=-1)
    return a, b


def capacity_columns(c: Cluster) -> dict[str, Num]:
    """Capacity of each link summed over its side, per second, by link name (unbroadcast)."""
    P, D = _a(c.prefill_nodes), _a(c.decode_nodes)
    out: dict[str, Num] = {f"pe_{f}": P * _a(getattr(c.pe, f)) for f in SIDE_FIELDS}
    out |= {f"de_{f}": D * _a(getattr(c.de, f)) for f in SIDE_FIELDS if f != "compute"}
    out["de_decode"] = _a(c.decode_tokens_per_s)
    out["storage_read"] = _a(c.storage_read)
    out["storage_write"] = _a(c.storage_write)
    return out


def capacities(c: Cluster) -> FloatArray:
    """Capacity of each link summed over its side, shape (..., len(LINKS)), per second."""
    cols = capacity_columns(c)
    return np.stack(np.broadcast_arrays(*[cols[n] for n in LINKS]), axis=-1)


def _slope_signs() -> dict[str, int]:
    unit = Demand(*(np.float64(1.0) for _ in range(6)))
    return {n: int(np.sign(b)) for n, (_, b) in turn_load_columns(unit).items()}


# Sign of each link's b coefficient: +1 loads grow with the DE-path share, -1 they shrink, 0
# flat. Fixed by the path structure (every coefficient is a non-negative byte count times it).
SLOPE_SIGN: dict[str, int] = _slope_signs()
RISING: tuple[str, ...] = tuple(n for n in LINKS if SLOPE_SIGN[n] > 0)
FALLING: tuple[str, ...] = tuple(n for n in LINKS if SLOPE_SIGN[n] < 0)
FLAT: tuple[str, ...] = tuple(n for n in LINKS if SLOPE_SIGN[n] == 0)


def even_share(c: Cluster) -> FloatArray:
    """The paper's even-sharing assumption: every SNIC saturated and shared evenly, so the DE
    share of reads is the DE side's share of SNIC bandwidth, D/(P+D) for equal nodes."""
    pe = _a(c.prefill_nodes) * _a(c.pe.snic_read)
    de = _a(c.decode_nodes) * _a(c.de.snic_read)
    return de / (pe + de)
