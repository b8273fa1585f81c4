"""A scenario with its profiles resolved: what the one assembly (``assemble.py``) reads.

from dualpath_plan.profiles.registry import Registry
from dualpath_plan.scenario import Scenario
sc = Scenario.from_ids(Registry.load(), model="deepseek-v3.2", prefill_nodes=2, decode_nodes=4)
"""

from __future__ import annotations

from dataclasses import field, replace
from typing import TYPE_CHECKING, Any

from dualpath_plan.errors import PlanInputError
from dualpath_plan.frozen import record
from dualpath_plan.memo import IdentityMemo
from dualpath_plan.physics.engines import Scheduling
from dualpath_plan.physics.links import Demand, PathOptions
from dualpath_plan.physics.workload import TurnDemand, workload_demand
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.profiles.schemas import (
    EngineProfile,
    GpuProfile,
    ModelProfile,
    NodeProfile,
    StorageProfile,
    WorkloadProfile,
)
from dualpath_plan.scenario.provenance import Efficiencies
from dualpath_plan.scenario.spec import DEFAULT_SPEC, ScenarioSpec

if TYPE_CHECKING:  # the store's fit loads where a capacity is given (a plain size gives none)
    from dualpath_plan.physics.store import StoreFit


class ProfileCache:
    """Profiles and turn demands already resolved, for building many scenarios from registries
    that share their profiles and differ in their ``--set`` overrides (a sweep's profile axes,
    one registry per combination of values): a profile is looked up and validated again only
    when the overrides of its own kind differ, and a turn demand computed again only for
    another model or workload. What ``Registry.get`` returns depends on nothing else. Bounded:
    past ``MAX_ENTRIES`` it starts over (a grid of many values of one kind's fields)."""

    MAX_ENTRIES = 4096

    def __init__(self) -> None:
        self._profiles: dict[tuple[str, str, str], Any] = {}
        self._demands: IdentityMemo[TurnDemand] = IdentityMemo(self.MAX_ENTRIES)

    def get(self, registry: Registry, kind: str, profile_id: str) -> Any:
        sets = registry.overrides.by_kind.get(kind, {})
        key = (kind, profile_id, repr(sorted(sets.items())))
        if key not in self._profiles:
            if len(self._profiles) >= self.MAX_ENTRIES:
                self._profiles.clear()
            self._profiles[key] = registry.get(kind, profile_id)
        return self._profiles[key]

    def demand(self, registry: Registry, model: ModelProfile, w: WorkloadProfile) -> TurnDemand:
        return self._demands.get(
            (model, w),
            lambda: workload_demand(model, w, registry.origins.get(("workload", w.id))),
        )


@record
class Scenario:
    model: ModelProfile
    workload: WorkloadProfile
    turn_demand: TurnDemand
    prefill_node: NodeProfile
    prefill_gpu: GpuProfile
    decode_node: NodeProfile
    decode_gpu: GpuProfile
    storage: StorageProfile | None
    prefill_nodes: int
    decode_nodes: int
    options: PathOptions = field(default_factory=PathOptions)
    scheduling: Scheduling = field(default_factory=Scheduling)
    # Calibration fields of the nodes set on the command line (--set node.FIELD=...).
    overridden: tuple[str, ...] = ()
    # Engine profiles by node id (each node's own ``engine``, or --engine for every node):
    # what times a node's prefill passes and decode steps operator by operator
    # (physics/operators.py). A node without one runs its own one-MFU calibration.
    engines: tuple[tuple[str, EngineProfile], ...] = ()
    # A store of finite size (--storage-capacity or --storage-nodes): its capacity against the
    # workload's KV working set; turn_demand is then the demand at that capacity, every
    # resident block read, applied here once (physics/store.py). None: no capacity given
    # (every number as without a store size).
    store: StoreFit | None = None
    # With a store: the turns' demand with every cached block in it, from which a mode's
    # choice to read less than is resident and recompute the rest is derived (``reading``,
    # outcomes/read_choice.py), and the share of the cached context this scenario reads
    # (None: every resident block, before a mode's choice).
    infinite_store_demand: TurnDemand | None = None
    read_share: float | None = None

    def reading(self, share: float, resident: float | None = None) -> Scenario:
        """This scenario reading a share ``share`` of its turns' cached context from the store
        (at most what is resident) and recomputing the rest (physics/store.py
        ``demand_reading``); itself without a store. ``resident``: as if the store held that
        share (the read choice's table: a store that holds everything, 1)."""
        if self.store is None or self.infinite_store_demand is None:
            return self
        from dualpath_plan.physics.store import demand_reading

        held = self.store.resident if resident is None else float(resident)
        share = min(float(share), held)
        turns = demand_reading(self.model, self.infinite_store_demand, held, share)
        return replace(self, turn_demand=turns, read_share=share)

    def with_turns(self, turns: TurnDemand, **changes: Any) -> Scenario:
        """This scenario with the turns' demand ``turns`` (every cached block in the store, as
        ``workload_demand`` gives it) and other fields ``changes`` (a workload, a model): with
        a store of finite size, the store fitted again to them and its resident share applied,
        as ``from_ids`` does."""
        if self.store is None:
            return replace(self, turn_demand=turns, **changes)
        at, store = _stored(
            changes.get("model", self.model),
            changes.get("workload", self.workload),
            turns,
            self.store.capacity_bytes,
            self.store.agents,
        )
        return replace(
            self,
            turn_demand=at,
            infinite_store_demand=turns,
            store=store,
            read_share=None,
            **changes,
        )

    def engine_for(self, node: NodeProfile) -> EngineProfile | None:
        """The engine profile of ``node`` in this scenario, or None."""
        for node_id, engine in self.engines:
            if node_id == node.id:
                return engine
        return None

    @classmethod
    def from_ids(
        cls,
        registry: Registry,
        *,
        model: str = DEFAULT_SPEC.model,
        workload: str = DEFAULT_SPEC.workload,
        node: str = DEFAULT_SPEC.node,
        prefill_node: str | None = None,
        decode_node: str | None = None,
        gpu: str | None = None,
        engine: str | None = None,
        storage: str | None = DEFAULT_SPEC.storage,
        prefill_nodes: int = DEFAULT_SPEC.prefill_nodes,
        decode_nodes: int = DEFAULT_SPEC.decode_nodes,
        options: PathOptions = PathOptions(),
        scheduling: Scheduling = Scheduling(),
        cache: ProfileCache | None = None,
        storage_capacity_bytes: float | None = None,
        storage_nodes: int | None = None,
        agents: int = DEFAULT_SPEC.agents,
    ) -> Scenario:
        if cache is None:
            cache = ProfileCache()  # one scenario's own: nothing is shared
        m: ModelProfile = cache.get(registry, "model", model)
        w: WorkloadProfile = cache.get(registry, "workload", workload)
        pn: NodeProfile = cache.get(registry, "node", prefill_node or node)
        dn: NodeProfile = cache.get(registry, "node", decode_node or node)
        node_sets = registry.overrides.by_kind.get("node", {})
        engines = tuple(
            (n.id, cache.get(registry, "engine", str(engine or n.engine)))
            for n in ((pn,) if dn.id == pn.id else (pn, dn))
            if engine or n.engine
        )
        st: StorageProfile | None = (
            cache.get(registry, "storage", storage) if storage and storage != "none" else None
        )
        demand = cache.demand(registry, m, w)
        st, capacity = sized_store(st, storage_capacity_bytes, storage_nodes)
        store = None
        infinite_store_demand = None
        if capacity is not None:
            infinite_store_demand = demand
            demand, store = _stored(m, w, demand, capacity, agents)
        return cls(
            overridden=tuple(f for f in NodeProfile.CALIBRATION_FIELDS if f in node_sets),
            engines=engines,
            model=m,
            workload=w,
            turn_demand=demand,
            prefill_node=pn,
            prefill_gpu=cache.get(registry, "gpu", gpu or pn.gpu),
            decode_node=dn,
            decode_gpu=cache.get(registry, "gpu", gpu or dn.gpu),
            storage=st,
            store=store,
            infinite_store_demand=infinite_store_demand,
            prefill_nodes=prefill_nodes,
            decode_nodes=decode_nodes,
            options=options,
            scheduling=scheduling,
        )

    @classmethod
    def from_spec(
        cls, registry: Registry, spec: ScenarioSpec, cache: ProfileCache | None = None
    ) -> Scenario:
        """``cache``: profiles already resolved by earlier calls (``ProfileCache``)."""
        return cls.from_ids(
            registry,
            model=spec.model,
            workload=spec.workload,
            node=spec.node,
            prefill_node=spec.prefill_node,
            decode_node=spec.decode_node,
            gpu=spec.gpu,
            engine=spec.engine,
            storage=spec.storage_id,
            prefill_nodes=spec.prefill_nodes,
            decode_nodes=spec.decode_nodes,
            options=spec.options,
            scheduling=spec.scheduling,
            cache=cache,
            storage_capacity_bytes=spec.storage_capacity_bytes,
            storage_nodes=spec.storage_nodes,
            agents=spec.agents,
        )

    @property
    def demand(self) -> Demand:
        return self.turn_demand.means()

    @property
    def efficiencies(self) -> Efficiencies:
        """Which efficiencies and latency floors are in force, and where they come from."""
        return Efficiencies.of(self)


def _stored(
    model: ModelProfile,
    workload: WorkloadProfile,
    turns: TurnDemand,
    capacity_bytes: float,
    agents: int,
) -> tuple[TurnDemand, StoreFit]:
    """The turns' demand at a store of ``capacity_bytes`` (every resident block read) and the
    store's fit to them (physics/store.py): ``from_ids``' and ``with_turns``' one fit."""
    # The store's machinery loads where a capacity is given (a plain size gives none).
    from dualpath_plan.physics.store import demand_at_capacity, fit_store

    store = fit_store(model, workload, turns, capacity_bytes, agents)
    return demand_at_capacity(model, turns, store.resident), store


def sized_store(
    storage: StorageProfile | None, capacity_bytes: float | None, nodes: int | None
) -> tuple[StorageProfile | None, float | None]:
    """The store a scenario runs on and its capacity in bytes: ``--storage-nodes N`` makes it
    N of the profile's nodes (N x the capacity and read/write bandwidth per node, the profile's
    aggregate replaced); ``--storage-capacity`` sets the capacity alone. (None, None) pass
    the profile through: no capacity."""
    if nodes is None:
        return storage, capacity_bytes
    if storage is None:
        raise PlanInputError("nodes of no store: give --storage", field="--storage-nodes")
    missing = [
        f
        for f in ("node_capacity_tbyte", "node_read_gbyte_s", "node_write_gbyte_s")
        if getattr(storage, f) is None
    ]
    if missing:
        raise PlanInputError(
            f"needs the storage profile's {', '.join(missing)} (set with --set storage.FIELD=...)",
            source=f"storage '{storage.id}'",
            field="--storage-nodes",
        )
    assert storage.node_read_gbyte_s and storage.node_write_gbyte_s
    assert storage.node_capacity_tbyte
    sized = storage.model_copy(
        update={
            "storage_nodes": nodes,
            "aggregate_read_gbyte_s": nodes * storage.node_read_gbyte_s,
            "aggregate_write_gbyte_s": nodes * storage.node_write_gbyte_s,
        }
    )
    return sized, nodes * storage.node_capacity_tbyte * 1e12
