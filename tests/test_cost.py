"""What a plan costs (issue 32, item 4; outcomes/cost.py, docs/model.md section 13)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dualpath_plan import api as dp
from dualpath_plan.outcomes.cost import PlanCost, plan_cost
from dualpath_plan.outcomes.recommend import Budget, recommend
from dualpath_plan.outcomes.sizing import sizing_report
from dualpath_plan.profiles.registry import Overrides, Registry

FIGURES = (
    "usd_per_hour",
    "nodes_usd_per_hour",
    "store_usd_per_hour",
    "power_usd_per_hour",
    "usd_per_agent",
    "usd_per_agent_offline",
    "usd_per_mtok",
    "usd_per_mtok_offline",
)


def _doubled(a: PlanCost, b: PlanCost) -> None:
    assert a.known and b.known and a.storage_nodes == b.storage_nodes
    for f in FIGURES:
        x, y = getattr(a, f), getattr(b, f)
        assert (x is None) == (y is None), f
        if x is not None:
            assert y == 2 * x, (f, x, y)  # exact: doubling is exact in binary floating point


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    node=st.floats(1.0, 500.0),
    store=st.floats(0.5, 100.0),
    power=st.floats(0.01, 1.0),
    budget=st.integers(4, 7),
)
def test_doubling_every_price_doubles_every_cost_and_changes_no_split(
    node: float, store: float, power: float, budget: int
) -> None:
    # Owned nodes (dgx-b200: a capital price), so that power is priced and doubled too.
    spec = dp.spec(node="dgx-b200", power_price=power, pue=1.2)
    cfg = spec.serving
    cfg2 = replace(cfg, power_price=2 * power)
    once = Registry.load(
        overrides=Overrides.parse([f"node.capital_usd={node * 1e4!r}",
                                   f"storage.price_usd_per_hour={store!r}"])
    )  # fmt: skip
    twice = Registry.load(
        overrides=Overrides.parse([f"node.capital_usd={2 * node * 1e4!r}",
                                   f"storage.price_usd_per_hour={2 * store!r}"])
    )  # fmt: skip
    sc1, sc2 = dp.scenario(spec, once), dp.scenario(spec, twice)
    # recommend: every split's cost doubles, and the split chosen per mode is the same
    r1 = recommend(sc1, Budget(nodes=budget), cfg, "cost")
    r2 = recommend(sc2, Budget(nodes=budget), cfg2, "cost")
    assert {m: (r.candidate.prefill_nodes, r.candidate.decode_nodes)
            for m, r in r1.recommended.items()} == {
        m: (r.candidate.prefill_nodes, r.candidate.decode_nodes)
        for m, r in r2.recommended.items()}  # fmt: skip
    assert r1.recommended
    for c1, c2 in zip(r1.candidates, r2.candidates, strict=True):
        assert c1.costs.keys() == c2.costs.keys()
        for m in c1.costs:
            _doubled(c1.costs[m], c2.costs[m])
    # size --target-aps: the same cluster and store, every cost doubled
    s1 = sizing_report(sc1, spec, target_aps=0.3, max_nodes=16, modes=("dualpath",))
    s2 = sizing_report(sc2, spec.with_(power_price=2 * power), target_aps=0.3, max_nodes=16,
                       modes=("dualpath",))  # fmt: skip
    m1, m2 = s1.modes["dualpath"], s2.modes["dualpath"]
    assert (m1.prefill_nodes, m1.decode_nodes) == (m2.prefill_nodes, m2.decode_nodes)
    _doubled(dp.costs(s1)["dualpath"], dp.costs(s2)["dualpath"])
    assert (dp.costs(s1)["dualpath"].power_usd_per_hour or 0) > 0


def test_owned_nodes_price_their_power_and_it_doubles_too() -> None:
    registry = Registry.load()
    sc = dp.scenario(dp.spec(node="dgx-b200", power_price=0.1, pue=1.5), registry)
    o = dp.evaluate(dp.spec(node="dgx-b200", power_price=0.1, pue=1.5)).modes["dualpath"]
    c = plan_cost(sc, o, dp.spec(node="dgx-b200", power_price=0.1, pue=1.5).serving)
    nodes = sc.prefill_nodes + sc.decode_nodes
    # 515,000 $ over 5 years of 8,766 h, and 14.3 kW x PUE 1.5 x $0.1/kWh, per node
    assert c.nodes_usd_per_hour == pytest.approx(nodes * 515_000 / (5 * 8766))
    assert c.power_usd_per_hour == pytest.approx(nodes * 14.3 * 1.5 * 0.1)
    unpriced = plan_cost(sc, o, dp.spec(node="dgx-b200").serving)
    assert unpriced.power_usd_per_hour == 0 and "give --power-price" in unpriced.power_note
    assert unpriced.usd_per_hour is not None and c.usd_per_hour is not None
    assert c.usd_per_hour > unpriced.usd_per_hour


def test_cost_objective_ranks_splits_by_dollars_per_agent() -> None:
    sc = dp.scenario(dp.spec())
    r = recommend(sc, Budget(nodes=6), dp.spec().serving, "cost")
    for m, rec in r.recommended.items():
        best = rec.candidate.costs[m].usd_per_agent
        assert best is not None and math.isfinite(best)
        for c in r.candidates:
            pc = c.costs.get(m)
            if pc is not None and pc.usd_per_agent is not None:
                assert best <= pc.usd_per_agent


def test_a_plan_with_an_unknown_price_says_so(cli) -> None:
    result = cli("size", "--node", "hgx-b300", "--json")
    assert result.code == 0
    costs = result.json()["cost"]
    assert all(set(v) == {"unknown"} and "hgx-b300" in v["unknown"] for v in costs.values())
    text = cli("size", "--node", "hgx-b300").out
    assert "dualpath: cost unknown: node 'hgx-b300' has no price" in text
    assert "nan" not in text.lower() and "inf" not in text.split("cost")[-1].lower()
    refused = cli("recommend", "--node", "hgx-b300", "--budget-nodes", "4", "--objective", "cost")
    assert refused.code == 2 and refused.err.startswith("error:")


def test_no_price_anywhere_prints_no_cost(cli) -> None:
    base = cli("size", "--storage", "none", "--json").json()
    assert "cost" in base  # the shipped node has a price
    plain = cli("size", "--node", "hgx-b300", "--storage", "none", "--json").json()
    assert "cost" not in plain


@pytest.mark.parametrize(
    "args",
    [
        ("--power-price", "-1"),
        ("--power-price", "nan"),
        ("--power-price", "12"),  # cents typed for dollars
        ("--pue", "130"),  # a percent
        ("--pue", "0"),
        ("--set", "node.price_usd_per_hour=-5.0"),
        ("--set", "node.price_usd_per_hour=nan"),
        ("--set", "node.power_w=10.2"),  # kW typed for W
        ("--set", "storage.price_usd_per_hour=20000.0"),
        ("--set", "node.capital_usd=300.0"),  # thousands typed
    ],
)
def test_bad_price_input_is_one_error_line(cli, args) -> None:
    result = cli("size", *args)
    assert result.code == 2, result.out
    lines = [line for line in result.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.err
    assert "Traceback" not in result.err


def test_budget_cost_takes_the_store_and_reads_profile_prices(cli) -> None:
    data = cli("recommend", "--budget-cost", "700", "--json").json()
    for c in data["candidates"]:
        for o in c["modes"].values():
            if o is not None:
                assert o["cost"]["usd_per_hour"] <= 700 + 1e-9
    given = cli("recommend", "--budget-cost", "10", "--prefill-node-cost", "1",
                "--decode-node-cost", "1", "--storage", "none", "--json").json()  # fmt: skip
    assert len(given["candidates"]) == 9
