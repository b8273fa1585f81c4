"""The one assembly: a scenario, a mode and node counts -> every link's load per turn and
capacity per second, without solving. Every efficiency, option, scheduler imbalance, storage
limit and batch cap is applied here and nowhere else; the closed form, the LP (one group or
many), the bounds and every outcome read what this module builds (docs/model.md section 4).

Per node, per direction (bytes/s unless noted), each capacity is a datasheet base times the
factors it is derated by (``Factor``, reported by ``paths`` and ``size --json``):
- SNIC: snic_count x snic_gbit_s / 8 x snic_efficiency (each direction; NICs are full duplex).
- storage client read: the storage system's max_client_read_gbyte_s, per node (its own link:
  a node reading through fat SNICs still gets no more than the storage serves one client).
- DRAM: dram_gbyte_s x dram_efficiency, reads + writes together (the paper's eq. 8).
- CNIC PCIe side: cnic_count x min(line rate x cnic_efficiency, CNIC PCIe link x
  pcie_efficiency) x (1 - cnic_collective_share); the paper caps each direction at B, the NIC
  rate (dualpath-paper.md 2.4); a NIC in a slower slot is capped by its PCIe link instead.
- CNIC network side: cnic_count x line rate x cnic_efficiency x (1 - cnic_collective_share):
  InfiniBand VL arbitration gives model collectives priority, KV gets the residual (paper 2.6).
- GPU PCIe: gpus_per_node x usable PCIe per direction x pcie_efficiency.
- prefill compute (FLOP/s): gpus_per_node x dense TFLOPS at the model's compute dtype x
  prefill_mfu; with layer-wise prefill also x the batching efficiency b / (b + h) at its batch
  cap b (Figure 3 right).
- prefill batch (requests/s), without layer-wise prefill only: gpus_per_node x b / tau(b) at
  the HBM-capped batch b, tau including the per-pass overhead and the serialized KV copy.
- decode (tokens/s): the decode group's roofline at its HBM-limited batch, over its nodes.
- storage aggregate read / write: the storage profile's cluster totals.
Scheduler imbalance (max/avg) divides node-wide links (SNIC, client, DRAM) by the imbalance
across nodes and per-GPU links (CNIC, GPU PCIe, prefill) by the imbalance across GPUs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import field, replace

import numpy as np

from dualpath_plan.formatting import duration, number, plain
from dualpath_plan.frozen import record
from dualpath_plan.physics.engines import (
    BETA_COMPUTE_S,
    DecodeGroup,
    PrefillEngine,
    Scheduler,
    decode_group,
    prefill_engine,
    weights_fit,
)
from dualpath_plan.physics.links import (
    IO_LINKS,
    LINK_TABLE,
    LINKS,
    Demand,
    NicRates,
    Num,
    turn_load_columns,
)
from dualpath_plan.physics.modes import MODE_TABLE, Mode, ModeName, SplitRule
from dualpath_plan.physics.workload import TurnDemand
from dualpath_plan.profiles.schemas import GpuProfile, NodeProfile
from dualpath_plan.scenario.bundle import Scenario

INF = np.float64(np.inf)


@record
class Factor:
    """One derating of a capacity: ``value`` multiplies the datasheet base (None: a note on
    how a capacity was formed, not a multiplier). ``what`` says what it is, or is a function
    that says it where the words write numbers: they are formed only where a report shows
    them (``describe``), which no perturbed cluster of the intervals is."""

    what: str | Callable[[], str]
    value: Num | None = None
    # The scheduler's imbalance (a share of the side's load the busiest unit carries, not a
    # rate of the link): a turn alone on the link moves at the capacity without it.
    imbalance: bool = False

    @functools.cached_property
    def words(self) -> str:
        """``what`` as words (a function's called once: the modes sharing a side share it)."""
        return self.what if isinstance(self.what, str) else self.what()

    def describe(self, index: tuple[int, ...] = ()) -> str:
        what = self.words
        if self.value is None:
            return what
        v = float(np.asarray(self.value)[index]) if np.ndim(self.value) else float(self.value)
        return f"{what} x{number(v)}"


@record
class Scaling:
    """A link's capacity as ``k`` times its group's common scale over the scenario axis, to
    rounding: the links of a group derate alike (one side's node count times the same array
    factors), so their capacities keep fixed ratios in every scenario. ``k`` = inf: no limit
    in any scenario. ``capacity`` is the array it was declared for: a link set whose capacity
    was replaced since (``dataclasses.replace``) no longer holds it, and the link counts as
    ungrouped."""

    group: str
    k: float
    capacity: Num


@record
class LinkSet:
    """What the solvers read: per link, the load per turn a + b x (summed over the link's
    side, in the link's unit) and the capacity per second (summed over the side; inf: no
    limit); the mode's split rule and, for ``even``, the split it implies; which capacities
    scale alike (``Scaling``; none: every link on its own)."""

    load: dict[str, tuple[Num, Num]]
    capacity: dict[str, Num]
    split: SplitRule
    even_share: Num = 0.0
    hit_bytes: Num = 0.0  # of the mean turn: what the split divides between the paths
    scaling: dict[str, Scaling] = field(default_factory=dict)


@record
class SideCapacity:
    """Every link of one side for a group of ``nodes`` nodes (a number or an array): capacity
    per node per second and what derates it; the prefill or decode engine behind it."""

    side: str
    nodes: Num
    per_node: dict[str, Num]
    factors: dict[str, tuple[Factor, ...]]  # per distinct node count (see index)
    feasible: np.ndarray  # the weights fit, one request (one sequence) fits
    prefill: PrefillEngine | None = None
    decode: DecodeGroup | None = None
    # Engines are built once per distinct node count; index maps each scenario to its entry.
    index: np.ndarray | None = None
    # Per link (group, k): per-node capacity = k x the group's array factors (see Scaling).
    scaling: dict[str, tuple[str, float]] = field(default_factory=dict)

    def take(self, values: Num) -> np.ndarray:
        """Per-engine values (over distinct node counts) for every scenario."""
        return _take(values, self.index)

    @functools.cached_property
    def cluster(self) -> tuple[dict[str, Num], dict[str, Scaling]]:
        """Every link's capacity over the side's nodes (per node x nodes) and, where it has
        one, its scaling group (``Scaling``); once per side, which the modes that build it
        alike share (``assemble``)."""
        capacity: dict[str, Num] = {}
        scaling: dict[str, Scaling] = {}
        for k, v in self.per_node.items():
            capacity[k] = self.nodes * np.asarray(v)
            if k in self.scaling:
                scaling[k] = Scaling(*self.scaling[k], capacity[k])
        return capacity, scaling

    def lone_rate(self, name: str) -> np.ndarray:
        """Link ``name``'s per-node capacity for one transfer alone on it, every scenario: the
        capacity without the scheduler's imbalance factors (which share the side's load out,
        not slow the link; the simulation's links run at it). Once per side and link (the
        modes that share the side read it alike)."""
        found = self._lone_rates.get(name)
        if found is None:
            imbalance = _product(
                np.float64(1.0), tuple(f for f in self.factors[name] if f.imbalance)
            )
            found = np.asarray(self.per_node[name], dtype=np.float64) / self.take(imbalance)
            if isinstance(found, np.ndarray):
                found.flags.writeable = False  # kept: read by every mode of the side
            self._lone_rates[name] = found
        return found

    @functools.cached_property
    def _lone_rates(self) -> dict[str, np.ndarray]:
        return {}


def _product(base: Num, factors: tuple[Factor, ...]) -> Num:
    out = np.asarray(base, dtype=np.float64)
    for f in factors:
        v = f.value
        if v is None:
            continue
        # A float or float64 array multiplies as it is (the same product); others converted.
        if not (type(v) is float or (isinstance(v, np.ndarray) and v.dtype == np.float64)):
            v = np.asarray(v, dtype=np.float64)
        out = out * v
    return out


def side_capacity(
    sc: Scenario,
    side: str,
    node: NodeProfile,
    gpu: GpuProfile,
    nodes: Num,
    mode: Mode,
    turns: TurnDemand,
) -> SideCapacity:
    """Per-node capacities of the ``side`` ("pe" or "de") links of a group of ``nodes`` nodes
    of ``node`` with ``gpu``, for ``mode`` and the turns ``turns`` (their mean sets the
    prefill batch and the decode step). The LP's node groups and the homogeneous cluster are both
    built from this."""
    o, e = sc.options, sc.options.efficiencies
    n = np.asarray(nodes, dtype=np.float64)
    scheduler: Scheduler = sc.scheduling.scheduler(mode.scheduler)
    per_node_imb = scheduler.imbalance(n, scheduler.requests_per_engine * node.gpus_per_node)
    per_gpu_imb = scheduler.gpu_imbalance(n * node.gpus_per_node)
    imb_node = Factor(
        lambda: f"imbalance across nodes ({scheduler.describe()})",
        1.0 / np.asarray(per_node_imb),
        imbalance=True,
    )
    imb_gpu = Factor(
        lambda: f"imbalance across GPUs ({scheduler.describe()})",
        1.0 / np.asarray(per_gpu_imb),
        imbalance=True,
    )

    def eff(name: str) -> tuple[Factor, ...]:
        return (Factor(name, float(getattr(node, name))),) if e else ()

    rates = NicRates.of(node, o)  # every NIC rate, derived once (physics/links.py)
    line = rates.cnic_line
    residual = (
        (Factor("cnic_collective_share (1 - share)", 1.0 - node.cnic_collective_share),)
        if o.collectives and node.cnic_collective_share
        else ()
    )
    # The PCIe side's cap as a factor on the efficient line rate (its derating reported).
    slot = (
        (
            Factor(
                "CNIC PCIe slot (min of line rate and PCIe link)",
                rates.cnic_slot / rates.cnic,
            ),
        )
        if rates.cnic_slot < rates.cnic
        else ()
    )
    snic = rates.snic_line
    client = (
        sc.storage.max_client_read_gbyte_s * 1e9
        if sc.storage is not None and o.storage_limit
        else INF
    )
    storage = sc.storage
    client_note = (
        (
            Factor(
                lambda: (
                    f"storage '{storage.id}' serves a client at most "
                    f"{plain(storage.max_client_read_gbyte_s)} GB/s (max_client_read_gbyte_s)"
                )
            ),
        )
        if storage is not None and o.storage_limit
        else ()
    )
    gpu_pcie = node.gpus_per_node * gpu.pcie_usable_gbyte_s * 1e9 if o.gpu_pcie else INF
    base: dict[str, Num] = {
        "snic_read": snic,
        "storage_client_read": client,
        "snic_write": snic,
        "dram": node.dram_gbyte_s * 1e9,
        "cnic_pcie_read": node.cnic_count * line,
        "cnic_pcie_write": node.cnic_count * line,
        "cnic_net_send": node.cnic_count * line,
        "cnic_net_recv": node.cnic_count * line,
        "gpu_pcie_h2d": gpu_pcie,
        "gpu_pcie_d2h": gpu_pcie,
    }
    cnic_pcie = (*eff("cnic_efficiency"), *slot, *residual, imb_gpu)
    cnic_net = (*eff("cnic_efficiency"), *residual, imb_gpu)
    factors: dict[str, tuple[Factor, ...]] = {
        "snic_read": (*eff("snic_efficiency"), imb_node),
        "storage_client_read": (*client_note, imb_node),
        "snic_write": (*eff("snic_efficiency"), imb_node),
        "dram": (*eff("dram_efficiency"), imb_node),
        "cnic_pcie_read": cnic_pcie,
        "cnic_pcie_write": cnic_pcie,
        "cnic_net_send": cnic_net,
        "cnic_net_recv": cnic_net,
        "gpu_pcie_h2d": (*eff("pcie_efficiency"), imb_gpu),
        "gpu_pcie_d2h": (*eff("pcie_efficiency"), imb_gpu),
    }
    fits = weights_fit(sc.model, node, gpu, n)
    prefill: PrefillEngine | None = None
    decode: DecodeGroup | None = None
    d = turns
    engine = sc.engine_for(node)
    if side == "pe":
        prefill = prefill_engine(
            sc.model,
            node,
            gpu,
            hit_bytes=d.mean(d.hit_bytes),
            prefill_flops=d.mean(d.prefill_flops),
            context_tokens=d.mean(d.context_tokens),
            layerwise=mode.layerwise,
            io_free=mode.io_free,
            nodes=n,
            efficiencies=e,
            engine=engine,
            append_tokens=d.mean(d.append_tokens),
            pcie_link_limit=o.pcie_link_limit,
            admission_s=BETA_COMPUTE_S if scheduler.admits_by_beta else 0.0,
        )
        rate = np.asarray(prefill.max_rate)  # requests/s per GPU at its pass batch
        tflops = gpu.dense_tflops(sc.model.compute_dtype) or gpu.bf16_dense_tflops
        base["compute"] = node.gpus_per_node * tflops * 1e12
        if engine is not None:
            # The operator model's pass at the mean turn, as a share of the dense peak: the
            # turn's FLOPs over a GPU's time per request at the saturated batch.
            mfu: tuple[Factor, ...] = (
                Factor(
                    f"achieved share of the peak at the mean turn, {prefill.timed_by}",
                    d.mean(d.prefill_flops) / (prefill.t1_s * tflops * 1e12),
                ),
            )
        else:
            mfu = eff("prefill_mfu")
        pm = prefill

        def cap_note() -> str:
            admitted = (
                f", admitted {_fmt(pm.admitted_batch)} (beta: {plain(BETA_COMPUTE_S)} s of "
                "work waits for a GPU)"
                if scheduler.admits_by_beta
                else ""
            )
            return (
                f"pass batch {_fmt(pm.pass_batch)} requests per GPU, set by "
                f"{pm.batch_limit()}: HBM cap {_fmt(pm.batch_cap)} "
                f"({_fmt(np.asarray(pm.free_hbm_bytes) / 1e9)} GB HBM free / "
                f"{number(pm.kv_bytes_per_request / 1e9)} GB "
                f"{'one layer' if mode.layerwise else 'KV'} per request), compute quota "
                f"{_fmt(pm.quota_batch)} ({plain(pm.pass_quota_s)} s a pass){admitted}"
            )

        if mode.layerwise:
            # Batching efficiency at the cap: b / tau(b) over the plateau 1 / t1.
            factors["compute"] = (
                *mfu,
                Factor(lambda: f"batching at the {cap_note()}", rate * prefill.t1_s),
                imb_gpu,
            )
            base["prefill_batch"] = INF
            factors["prefill_batch"] = (Factor("not a limit: layer-wise prefill"),)
        else:
            factors["compute"] = (*mfu, imb_gpu)
            base["prefill_batch"] = node.gpus_per_node * rate
            factors["prefill_batch"] = (
                Factor(lambda: f"{cap_note()}, no layer-wise prefill"),
                Factor(
                    lambda: (
                        f"forward pass {_fmt(pm.t0_s)} s + {_fmt(pm.u_s)} s per request "
                        f"(KV copy {duration(pm.copy_s)} serialized with compute)"
                    )
                ),
                imb_gpu,
            )
        feasible = fits & (rate > 0)
    else:
        decode = decode_group(
            sc.model,
            node,
            gpu,
            n,
            d.mean(d.context_tokens),
            d.mean(d.generated_tokens),
            e,
            engine,
        )
        tokens = np.asarray(decode.tokens_per_s_array())
        feasible = fits & np.isfinite(tokens)
        base["decode"] = np.where(np.isfinite(tokens), tokens, 0.0) / n
        group = decode

        def roofline() -> str:
            batch = group.max_batch_array()
            floor_ms = np.asarray(group.floor_array_s(np.maximum(batch, 1.0))) * 1e3
            calibration = (
                f", {group.operators.describe()}, communication and fixed operators "
                f"{_fmt(floor_ms)} ms per step"
                if group.operators is not None
                else f", decode_hbm_efficiency {plain(node.decode_hbm_efficiency)}, latency "
                f"floor {_fmt(floor_ms)} ms per step (layer_fixed_s {plain(node.layer_fixed_s)}, "
                f"ep_latency_s {plain(node.ep_latency_s)}, ep_link_efficiency "
                f"{plain(node.ep_link_efficiency)}, tp_allreduce_latency_s "
                f"{plain(node.tp_allreduce_latency_s)})"
                if e
                else ", speed of light: no latency floor"
            )
            return f"roofline at the HBM-limited batch of {_fmt(batch)} sequences{calibration}"

        factors["decode"] = (Factor(roofline),)
    per_node = {f"{side}_{k}": _product(v, factors[k]) for k, v in base.items()}
    return SideCapacity(
        scaling=_scaling(side, base, factors),
        side=side,
        nodes=n,
        per_node=per_node,
        factors={f"{side}_{k}": v for k, v in factors.items()},
        feasible=feasible & (n >= 1),
        prefill=prefill,
        decode=decode,
    )


def _scaling(
    side: str, base: dict[str, Num], factors: dict[str, tuple[Factor, ...]]
) -> dict[str, tuple[str, float]]:
    """Per link with a scalar base, (group, k): links derated by the same array factors (the
    same objects: one imbalance, one batching efficiency) share a group, and k is the base
    times the scalar factors. A base that is an array (prefill batch, decode) has no group."""
    groups: dict[tuple[int, ...], str] = {}
    out: dict[str, tuple[str, float]] = {}
    for k, v in base.items():
        if _is_array(v):
            continue
        arrays: list[int] = []
        scale = float(v)  # times each scalar factor in turn, as _product does (IEEE doubles)
        for f in factors[k]:
            if f.value is None:
                continue
            if _is_array(f.value):
                arrays.append(id(f.value))
            else:
                scale *= float(f.value)
        group = groups.setdefault(tuple(arrays), f"{side}:{len(groups)}")
        out[f"{side}_{k}"] = (group, scale)
    return out


def _is_array(v: object) -> bool:
    """np.ndim(v) > 0, without converting a number to an array to ask."""
    return isinstance(v, np.ndarray) and v.ndim > 0


def grouped_side_capacity(
    sc: Scenario,
    side: str,
    node: NodeProfile,
    gpu: GpuProfile,
    nodes: Num,
    mode: Mode,
    turns: TurnDemand,
) -> SideCapacity:
    """:func:`side_capacity` over an array of node counts, computed once per distinct count
    (a grid has few: the batch cap, the imbalance and the decode group) and then indexed."""
    n = np.asarray(nodes, dtype=np.float64)
    distinct, index = _distinct(n)
    part = side_capacity(sc, side, node, gpu, distinct, mode, turns)
    if index is None:
        return part
    return replace(
        part,
        nodes=n,
        per_node={k: _take(v, index) for k, v in part.per_node.items()},
        feasible=_take(part.feasible, index),
        index=index,
    )


def _distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(distinct values, index back) for an array; a number is its own distinct value. Node
    counts are small whole numbers: those are mapped by counting, without a sort."""
    if values.ndim == 0:
        return values, None
    flat = values.reshape(-1)
    if flat.size > 1 and flat[0] > 0 and bool(np.all(flat[1:] > flat[:-1])):
        # Distinct and in order already (a sweep's axis of node counts): each its own entry.
        return flat.copy(), np.arange(flat.size).reshape(values.shape)
    if values.size and values.min() >= 0 and values.max() < 1e6:
        ints = values.astype(np.int64)
        if np.array_equal(ints, values):
            present = np.flatnonzero(np.bincount(ints.ravel()))
            lookup = np.zeros(int(present[-1]) + 1, dtype=np.int64)
            lookup[present] = np.arange(present.size)
            return present.astype(np.float64), lookup[ints]
    u, inverse = np.unique(values, return_inverse=True)
    return u, inverse.reshape(values.shape)


def _take(values: Num, index: np.ndarray | None) -> np.ndarray:
    a = np.asarray(values)
    return a if index is None or a.ndim == 0 else a[index]


def _fmt(v: Num) -> str:
    a = np.asarray(v, dtype=np.float64)
    if a.ndim == 0:
        return number(float(a))
    return f"{number(float(a.min()))}..{number(float(a.max()))}" if a.size else "-"


@record
class Assembly:
    """A cluster of P prefill and D decode nodes (numbers or arrays) in one mode: the link set
    the solvers read, the per-node capacities and their deratings, and the engines."""

    mode: Mode
    links: LinkSet
    pe: SideCapacity
    de: SideCapacity
    storage_factors: dict[str, tuple[Factor, ...]] = field(default_factory=dict)

    @property
    def feasible(self) -> np.ndarray:
        return np.asarray(self.pe.feasible) & np.asarray(self.de.feasible)

    def derated_by(self, name: str, index: tuple[int, ...] = ()) -> tuple[str, ...]:
        """What derates a link's capacity, for one scenario (``index`` into the arrays)."""
        for side in (self.pe, self.de):
            if name in side.factors:
                # Factors are kept per distinct node count (they only explain): map the index.
                at = (
                    tuple(int(i) for i in np.asarray(side.index)[index].ravel())
                    if (side.index is not None)
                    else index
                )
                return tuple(f.describe(at) for f in side.factors[name])
        return tuple(f.describe(index) for f in self.storage_factors.get(name, ()))

    def nodes_of(self, name: str) -> Num:
        side = name[:2]
        return self.pe.nodes if side == "pe" else self.de.nodes if side == "de" else 1.0


def read_share(capacity: dict[str, Num]) -> Num:
    """The paper's even-sharing assumption: every node's storage reads saturated and shared
    evenly, so the DE path's share of reads is the DE side's share of read capacity, D/(P+D)
    for equal nodes. A side reads at the least of its storage-read links."""
    reads = {
        side: np.fmin.reduce(
            [np.asarray(capacity[k.name]) for k in LINK_TABLE if k.reads_storage and k.side == side]
        )
        for side in ("pe", "de")
    }
    with np.errstate(invalid="ignore", divide="ignore"):
        share = reads["de"] / (reads["pe"] + reads["de"])
    return np.where(np.isfinite(share), share, 0.5)


def assemble(
    sc: Scenario,
    mode: ModeName | Mode,
    prefill_nodes: Num,
    decode_nodes: Num,
    sides: SideMemo | None = None,
) -> Assembly:
    """The whole cluster for ``mode``, vectorized over ``prefill_nodes`` and ``decode_nodes``;
    ``sides``: the sides already built for this scenario at these node counts (filled here),
    shared by the modes that build the same side (``side_key``)."""
    m = MODE_TABLE[mode] if isinstance(mode, str) else mode
    turns = sc.turn_demand
    pe = _shared_side(sides, sc, "pe", sc.prefill_node, sc.prefill_gpu, prefill_nodes, m, turns)
    de = _shared_side(sides, sc, "de", sc.decode_node, sc.decode_gpu, decode_nodes, m, turns)
    capacity: dict[str, Num] = {}
    scaling: dict[str, Scaling] = {}
    for group in (pe, de):
        capacity |= group.cluster[0]
        scaling |= group.cluster[1]
    shared, storage_factors = storage_capacity(sc)
    capacity |= shared
    scaling |= {k: Scaling("storage", float(v), v) for k, v in shared.items()}
    links = replace(link_set(turns.means(), capacity, m, sc), scaling=scaling)
    return Assembly(m, links, pe, de, storage_factors)


# --- one side for the modes that share it ----------------------------------------------------

# Built sides of one scenario at one pair of node counts, by side_key.
SideMemo = dict[tuple[object, ...], SideCapacity]


def side_key(side: str, mode: Mode) -> tuple[object, ...]:
    """What a side's capacities depend on in a mode (side_capacity reads nothing else of it):
    the scheduler, and on the prefill side layer-wise prefill and free I/O. Basic, even,
    dualpath and oracle build three prefill sides and two decode sides, not four of each."""
    if side == "pe":
        return (side, mode.scheduler, mode.layerwise, mode.io_free)
    return (side, mode.scheduler)


def _shared_side(
    sides: SideMemo | None,
    sc: Scenario,
    side: str,
    node: NodeProfile,
    gpu: GpuProfile,
    nodes: Num,
    mode: Mode,
    turns: TurnDemand,
) -> SideCapacity:
    if sides is None:
        return grouped_side_capacity(sc, side, node, gpu, nodes, mode, turns)
    key = side_key(side, mode)
    if key not in sides:
        sides[key] = grouped_side_capacity(sc, side, node, gpu, nodes, mode, turns)
    return sides[key]


def storage_capacity(sc: Scenario) -> tuple[dict[str, Num], dict[str, tuple[Factor, ...]]]:
    """The storage cluster's aggregate read and write limits (inf: none)."""
    st = sc.storage if sc.options.storage_limit else None
    caps: dict[str, Num] = {
        "storage_read": np.float64(st.aggregate_read_gbyte_s * 1e9) if st else INF,
        "storage_write": np.float64(st.aggregate_write_gbyte_s * 1e9) if st else INF,
    }
    note = (Factor(f"storage '{st.id}' aggregate"),) if st else ()
    return caps, {k: note for k in caps}


def link_set(demand: Demand, capacity: dict[str, Num], mode: Mode, sc: Scenario) -> LinkSet:
    """The mode's loads (its free I/O removed) over the capacities."""
    load = mode_loads(demand, mode, sc)
    assert set(load) == set(LINKS) == set(capacity), "every link has a load and a capacity"
    even = read_share(capacity) if mode.split == "even" else 0.0
    return LinkSet(load, capacity, mode.split, even, demand.hit_bytes)


def mode_loads(demand: Demand, mode: Mode, sc: Scenario) -> dict[str, tuple[Num, Num]]:
    """Per-turn loads under the scenario's options, without the I/O a mode gets for free."""
    load = turn_load_columns(demand, sc.options)
    if mode.io_free:
        zero = np.float64(0.0)
        load = {k: ((zero, zero) if k in IO_LINKS else v) for k, v in load.items()}
    return load
