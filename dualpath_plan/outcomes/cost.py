"""What a plan costs (issue 32, item 4; docs/model.md section 13): dollars an hour for its
nodes, its store and its power, and per agent and per million tokens served.

Per hour, with P prefill and D decode nodes and S storage nodes:

    node $/h   = the profile's price per hour (rented), or capital / (years x 8,766 h) (owned)
    power $/h  = sum over owned nodes of power_w / 1000 x PUE x $/kWh (a rent includes power;
                 without --power-price power is not priced, and the plan says so)
    $/h        = P x prefill node $/h + D x decode node $/h + S x storage node $/h + power $/h

Per agent: online, $/h / (APS x 3,600) (the agents/s served under the SLOs); offline, the run
of N agents takes the JCT: $/h x JCT / 3,600 / N. Per million tokens: $/agent over the tokens
an agent's turns process, each turn's whole prompt (cached prefix and appended tokens, as an
API bills input) and its generated tokens, times 10^6.

The store S: ``--storage-nodes N`` (the store given); else the store serving the plan's
rate (outcomes/sizing.py ``store_size``: nodes for bandwidth and for the KV working set) at
the offline rate N / JCT agents/s, the most the cluster runs; a storage profile without
per-node figures is its own ``storage_nodes``; no store (``--storage none``) costs nothing.

A price that is not known makes the plan's cost unknown (``PlanCost.unknown`` says which):
never a number made of a missing one. Every figure is linear in the prices: doubling every
price doubles every figure and changes no ranking by them (tests/test_cost.py).
"""

from __future__ import annotations

import math

from dualpath_plan.frozen import record
from dualpath_plan.outcomes.serving import ModeOutcome, OutcomeMode, SizeReport
from dualpath_plan.outcomes.store_size import store_size
from dualpath_plan.profiles.schemas import NodeProfile, StorageProfile, hourly_price
from dualpath_plan.scenario.bundle import Scenario
from dualpath_plan.scenario.spec import ServingConfig

SECONDS_PER_HOUR = 3600.0


@record
class PlanCost:
    """A plan's cost; ``unknown`` (non-empty) says which price is missing, and then every
    figure is None."""

    usd_per_hour: float | None
    nodes_usd_per_hour: float | None
    store_usd_per_hour: float | None
    power_usd_per_hour: float | None
    storage_nodes: int
    # Online (at the APS; None where the APS is 0) and offline (the JCT run of N agents).
    usd_per_agent: float | None
    usd_per_agent_offline: float | None
    usd_per_mtok: float | None
    usd_per_mtok_offline: float | None
    power_note: str = ""  # "power not priced" where owned nodes' power is left out
    unknown: str = ""

    @property
    def known(self) -> bool:
        return not self.unknown


def node_usd_per_hour(
    node: NodeProfile | StorageProfile, pue: float, power_price: float | None
) -> tuple[float | None, bool]:
    """One node's $/h (its price, and for owned hardware its power where --power-price is
    given) and whether power was left out (owned, no --power-price); None: not priced."""
    price = hourly_price(node)
    if price is None:
        return None, False
    if node.capital_usd is None:
        return price, False  # rented: the rent includes power
    if power_price is None:
        return price, True
    if node.power_w is None:
        return None, False
    return price + node.power_w / 1000.0 * pue * power_price, False


def tokens_per_agent(sc: Scenario) -> float:
    """Tokens an agent's turns process: each turn's prompt (its whole context) and output."""
    d = sc.turn_demand
    return d.mean(d.context_tokens + d.generated_tokens) * d.trajectory_turns.mean


def plan_store_nodes(
    sc: Scenario, o: ModeOutcome, agents: int, max_utilization: float, sized: int | None = None
) -> int:
    """The storage nodes a plan pays for (module docstring); ``sized``: a store already sized
    for the plan (size --target-aps)."""
    st = sc.storage
    if st is None:
        return 0
    if sized is not None:
        return sized
    if sc.store is not None:  # --storage-nodes N (or a capacity): the store as given
        return st.storage_nodes
    rate = agents / o.jct_s if o.jct_s > 0 and math.isfinite(o.jct_s) else o.aps
    fit = store_size(sc, o, rate, max_utilization)
    return fit.nodes if fit is not None else st.storage_nodes


def priced(sc: Scenario) -> bool:
    """Whether any profile of the scenario gives a price: where none does, reports say
    nothing of cost (their output is as before prices existed)."""
    profiles = (sc.prefill_node, sc.decode_node, *((sc.storage,) if sc.storage else ()))
    return any(hourly_price(p) is not None for p in profiles)


def size_costs(r: SizeReport) -> dict[OutcomeMode, PlanCost]:
    """Each mode's cost in a ``size`` report; empty where no profile has a price."""
    if not priced(r.scenario):
        return {}
    return {m: plan_cost(r.scenario, o, r.config) for m, o in r.modes.items()}


def plan_cost(
    sc: Scenario, o: ModeOutcome, cfg: ServingConfig, store_nodes: int | None = None
) -> PlanCost:
    """The cost of running ``o`` on ``sc``'s cluster (module docstring); the site's PUE and
    electricity price are ``cfg``'s."""
    agents, pue, power_price = cfg.agents, cfg.pue, cfg.power_price
    S = plan_store_nodes(sc, o, agents, cfg.max_utilization, store_nodes)
    parts: list[tuple[str, NodeProfile | StorageProfile, int]] = [
        (f"node '{sc.prefill_node.id}'", sc.prefill_node, sc.prefill_nodes),
        (f"node '{sc.decode_node.id}'", sc.decode_node, sc.decode_nodes),
    ]
    if sc.storage is not None and S > 0:
        parts.append((f"storage '{sc.storage.id}'", sc.storage, S))
    totals = {"nodes": 0.0, "store": 0.0, "power": 0.0}
    left_out = []
    for name, profile, count in parts:
        each, no_power = node_usd_per_hour(profile, pue, power_price)
        if each is None:
            why = (
                f"{name} has no price (price_usd_per_hour, or capital_usd with amortization_years)"
                if hourly_price(profile) is None
                else f"{name} has no power_w to price its power"
            )
            return _unknown(S, why)
        price = hourly_price(profile)
        assert price is not None
        totals["store" if isinstance(profile, StorageProfile) else "nodes"] += count * price
        totals["power"] += count * (each - price)
        if no_power:
            left_out.append(name)
    total = totals["nodes"] + totals["store"] + totals["power"]
    per_agent = total / (o.aps * SECONDS_PER_HOUR) if o.aps > 0 else None
    offline = total * o.jct_s / SECONDS_PER_HOUR / agents if math.isfinite(o.jct_s) else None
    mtok = tokens_per_agent(sc) / 1e6
    note = (
        f"power of {', '.join(dict.fromkeys(left_out))} (owned) not priced: give --power-price"
        if left_out
        else ""
    )
    return PlanCost(
        usd_per_hour=total,
        nodes_usd_per_hour=totals["nodes"],
        store_usd_per_hour=totals["store"],
        power_usd_per_hour=totals["power"],
        storage_nodes=S,
        usd_per_agent=per_agent,
        usd_per_agent_offline=offline,
        usd_per_mtok=None if per_agent is None else per_agent / mtok,
        usd_per_mtok_offline=None if offline is None else offline / mtok,
        power_note=note,
    )


def _unknown(storage_nodes: int, why: str) -> PlanCost:
    return PlanCost(None, None, None, None, storage_nodes, None, None, None, None, unknown=why)
