"""The links of a P/D cluster, as data, and their per-turn loads on the two KV read paths
(dualpath-paper.md 1.4 and 2.4), vectorized.

``LINK_TABLE`` is the one list of links: every solver (closed form, LP, bounds) and every report
iterates over it, so adding a link is a row here, its load in :func:`turn_load_columns` and its
capacity in ``scenario/assemble.py`` (docs/extending.md).

Every byte of a turn is followed step by step. For a share ``x`` of the hit bytes read on the
decode-engine (DE) path and ``1 - x`` on the prefill-engine (PE) path, each link's load per
turn, summed over the nodes of its side, is ``a + b x`` (bytes, FLOPs, requests or tokens);
dividing by the side's node count gives the per-node load. Symbols: H hit bytes, Mi miss
(appended-token) KV bytes, Ga generated-token KV bytes, Aw appended-token KV written back, F
prefill FLOPs, G generated tokens.

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

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from dualpath_plan.frozen import record
from dualpath_plan.physics.model import FloatArray
from dualpath_plan.profiles.schemas import NodeProfile
from dualpath_plan.units import gbit_s_to_byte_s

# A scenario input: one value or an array of them (they broadcast together).
Num = FloatArray | np.float64 | float

Side = Literal["pe", "de", "storage"]
Unit = Literal["B", "FLOP", "request", "token"]


@record
class Link:
    """One capacity of the cluster that a turn loads. ``io``: moving KV (free in the oracle);
    ``reads_storage``: carries a node's storage reads (saturated in the paper's bounds)."""

    name: str
    side: Side
    resource: str
    unit: Unit
    direction: Literal["in", "out", "both", "-"]
    description: str
    io: bool = True
    reads_storage: bool = False

    @property
    def read_phase(self) -> bool:
        """Whether it carries a turn's storage read (a node's reads, or the storage cluster's
        outward direction), before the prefill; the other I/O links move the KV after the read
        (into HBM, to the decode node) and the write-back."""
        return self.reads_storage or (self.side == "storage" and self.direction == "out")


def _side_links(side: Literal["pe", "de"]) -> tuple[Link, ...]:
    node = "prefill" if side == "pe" else "decode"
    rows = (
        Link(f"{side}_snic_read", side, "snic_read", "B", "in",
             "storage NICs, storage -> node", reads_storage=True),
        Link(f"{side}_storage_client_read", side, "storage_client_read", "B", "in",
             "the storage system's per-client read limit (max_client_read_gbyte_s)",
             reads_storage=True),
        Link(f"{side}_snic_write", side, "snic_write", "B", "out",
             "storage NICs, node -> storage"),
        Link(f"{side}_dram", side, "dram", "B", "both",
             "host DRAM, reads + writes (half duplex, paper 4.2)"),
        Link(f"{side}_cnic_pcie_read", side, "cnic_pcie_read", "B", "out",
             "compute NICs' PCIe side, reads (host/HBM -> NIC)"),
        Link(f"{side}_cnic_pcie_write", side, "cnic_pcie_write", "B", "in",
             "compute NICs' PCIe side, writes (NIC -> host/HBM)"),
        Link(f"{side}_cnic_net_send", side, "cnic_net_send", "B", "out",
             "compute network, node -> peer"),
        Link(f"{side}_cnic_net_recv", side, "cnic_net_recv", "B", "in",
             "compute network, peer -> node"),
        Link(f"{side}_gpu_pcie_h2d", side, "gpu_pcie_h2d", "B", "in",
             "GPUs' PCIe links, into HBM"),
        Link(f"{side}_gpu_pcie_d2h", side, "gpu_pcie_d2h", "B", "out",
             "GPUs' PCIe links, out of HBM"),
    )  # fmt: skip
    if side == "pe":
        return (
            *rows,
            Link("pe_compute", "pe", "compute", "FLOP", "-",
                 "prefill GPUs' tensor FLOPs at their achieved share (prefill_mfu, or the "
                 "operator model's under an engine profile; with layer-wise prefill, at its "
                 "batch)", io=False),
            Link("pe_prefill_batch", "pe", "prefill_batch", "request", "-",
                 "prefill GPUs at the HBM-capped batch without layer-wise prefill "
                 "(per-pass overhead, KV copy serialized with compute)", io=False),
        )  # fmt: skip
    return (
        *rows,
        Link("de_decode", "de", "decode", "token", "-",
             f"{node} group's tokens/s at its HBM-limited batch", io=False),
    )  # fmt: skip


# The one table of links, in report order.
LINK_TABLE: tuple[Link, ...] = (
    *_side_links("pe"),
    *_side_links("de"),
    Link("storage_read", "storage", "storage_read", "B", "out", "storage cluster aggregate read"),
    Link("storage_write", "storage", "storage_write", "B", "in", "storage cluster aggregate write"),
)
LINKS: tuple[str, ...] = tuple(link.name for link in LINK_TABLE)
LINK_INDEX = {name: i for i, name in enumerate(LINKS)}
LINK_BY_NAME = {link.name: link for link in LINK_TABLE}
IO_LINKS = tuple(link.name for link in LINK_TABLE if link.io)


def link(name: str) -> Link:
    return LINK_BY_NAME[name]


@record
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


@record
class NicRates:
    """A node's NIC rates, B/s per direction (NICs are full duplex), each derived here once:
    the assembly's capacities (scenario/assemble.py), the prefill engine's KV read and copy
    (physics/engines.py), the network share of expert parallelism (physics/latency.py) and the
    reports read them. Line rates are the datasheet's; ``efficiencies`` off (speed of light)
    makes every efficiency 1."""

    snic_line: float  # all storage NICs: snic_count x snic_gbit_s / 8
    cnic_line: float  # one compute NIC: cnic_gbit_s / 8
    cnic_pcie_line: float  # one compute NIC's PCIe link, usable (after its line encoding)
    snic_efficiency: float
    cnic_efficiency: float
    pcie_efficiency: float
    ep_link_efficiency: float
    pcie_link_limit: bool  # a CNIC moves at most what its PCIe link carries
    cnic_count: int
    gpus_per_node: int

    @classmethod
    def of(cls, node: NodeProfile, options: PathOptions = PathOptions()) -> NicRates:
        e = options.efficiencies
        return cls(
            snic_line=node.snic_count * gbit_s_to_byte_s(node.snic_gbit_s),
            cnic_line=gbit_s_to_byte_s(node.cnic_gbit_s),
            cnic_pcie_line=node.cnic_pcie_usable_gbyte_s * 1e9,
            snic_efficiency=node.snic_efficiency if e else 1.0,
            cnic_efficiency=node.cnic_efficiency if e else 1.0,
            pcie_efficiency=node.pcie_efficiency if e else 1.0,
            ep_link_efficiency=node.ep_link_efficiency if e else 1.0,
            pcie_link_limit=options.pcie_link_limit,
            cnic_count=node.cnic_count,
            gpus_per_node=node.gpus_per_node,
        )

    @property
    def snic(self) -> float:
        """All storage NICs at their efficiency."""
        return self.snic_line * self.snic_efficiency

    @property
    def cnic(self) -> float:
        """One compute NIC's network side at its efficiency."""
        return self.cnic_line * self.cnic_efficiency

    @property
    def cnic_pcie(self) -> float:
        """One compute NIC's PCIe link at its efficiency."""
        return self.cnic_pcie_line * self.pcie_efficiency

    @property
    def cnic_slot(self) -> float:
        """One compute NIC's PCIe side: its rate, at most its PCIe link's where that limit
        applies (the paper caps it at the NIC rate B alone). The KV copy into HBM of a
        prefill without layer-wise loading goes through it (DRAM -> CNIC -> HBM)."""
        return min(self.cnic, self.cnic_pcie) if self.pcie_link_limit else self.cnic

    @property
    def network_per_gpu(self) -> float:
        """Each GPU's share of its node's compute NICs for expert- and tensor-parallel
        traffic to other nodes, at ``ep_link_efficiency`` of the line rate (DeepEP's
        measured share, bench/fit_ep.py)."""
        return self.cnic_count * self.cnic_line / self.gpus_per_node * self.ep_link_efficiency

    @property
    def snic_per_cnic(self) -> float:
        """The paper's s: a node's storage bandwidth in units of one compute NIC."""
        return self.snic_line / self.cnic_line


@record
class Demand:
    """Per-turn demand (scalars or arrays that broadcast)."""

    hit_bytes: Num
    miss_bytes: Num
    generated_kv_bytes: Num
    append_writeback_bytes: Num
    prefill_flops: Num
    generated_tokens: Num


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
    zero, one = np.float64(0.0), np.float64(1.0)
    rows: dict[str, tuple[Num, Num]] = {
        # PE side
        "pe_snic_read": (H, -H),  # step 1 of the PE path
        "pe_storage_client_read": (H, -H),  # the same reads, against the storage's client cap
        "pe_snic_write": (zero, zero),
        "pe_dram": (2 * H, -2 * H),  # SNIC writes the buffer, CNIC reads it (step 3)
        "pe_cnic_pcie_read": (2 * H + Mi, -2 * H),  # steps 3 and 5 (hit), 5 (miss)
        "pe_cnic_pcie_write": (H, zero),  # PE step 4 (1-x) + DE step 5 (x)
        "pe_cnic_net_send": (H + Mi, -H),  # PE step 6 (hit, miss)
        "pe_cnic_net_recv": (zero, H),  # DE step 4
        "pe_gpu_pcie_h2d": (H, zero),  # hit KV lands in PE HBM on either path
        "pe_gpu_pcie_d2h": (H + Mi, -H),  # layer KV leaves PE HBM (PE path hit, all miss)
        "pe_compute": (F, zero),
        "pe_prefill_batch": (one, zero),  # one request (turn) per forward-pass slot
        # DE side
        "de_snic_read": (zero, H),  # DE step 1
        "de_storage_client_read": (zero, H),
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
    """(a, b) of shape (..., len(LINKS)): load per turn on each link summed over its side's
    nodes, load = a + b x. Each coefficient is the step list in the module docstring;
    ``tests/test_paths.py`` checks conservation and the paper's per-pair loads."""
    rows = turn_load_columns(d, options)
    cols = np.broadcast_arrays(*[v for n in LINKS for v in rows[n]])
    a = np.stack(cols[0::2], axis=-1)
    b = np.stack(cols[1::2], axis=-1)
    return a, b


def _slope_signs() -> dict[str, int]:
    unit = Demand(*(np.float64(1.0) for _ in range(6)))
    return {n: int(np.sign(b)) for n, (_, b) in turn_load_columns(unit).items()}


# Sign of each link's b coefficient: +1 loads grow with the DE-path share, -1 they shrink, 0
# flat. Fixed by the path structure (every coefficient is a non-negative byte count times it).
SLOPE_SIGN: dict[str, int] = _slope_signs()
RISING: tuple[str, ...] = tuple(n for n in LINKS if SLOPE_SIGN[n] > 0)
FALLING: tuple[str, ...] = tuple(n for n in LINKS if SLOPE_SIGN[n] < 0)
FLAT: tuple[str, ...] = tuple(n for n in LINKS if SLOPE_SIGN[n] == 0)
