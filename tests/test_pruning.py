"""Issue 15: the closed form drops dominated load lines and still gives the same answer."""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualpath_plan.physics.links import LINK_TABLE, LINKS, Demand, turn_load_columns
from dualpath_plan.physics.modes import MODE_TABLE
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.assemble import LinkSet, Scaling, assemble, read_share
from dualpath_plan.solvers.closed_form import _prune, solve, solve_each
from dualpath_plan.solvers.lp import solve_lp
from tests.test_paths import SPLITS, assert_same_binding, clusters, lp_problem

EXAMPLES = int(os.environ.get("PRUNE_EXAMPLES", "150"))
FIELDS = ("throughput_turns_per_s", "decode_path_fraction", "split_low", "split_high")
PINNED_DIGEST = "da123d3fb73766923b23876ab8449615b0456528f906a101f2ff7cff03dede18"


def assert_identical(links: LinkSet) -> None:
    """Pruned and unpruned: the same throughput, split range, binding mask and utilization,
    bit for bit."""
    pruned, every = solve(links), solve(links, prune=False)
    for f in FIELDS:
        assert np.array_equal(getattr(pruned, f), getattr(every, f), equal_nan=True), f
    assert np.array_equal(pruned.binding_mask, every.binding_mask)
    assert np.array_equal(pruned.utilization, every.utilization, equal_nan=True)
    # The links' utilization at once is each link's by its definition, bit for bit:
    # (alpha + beta x) / t where t > 0, else 0.
    x, t = every.decode_path_fraction, every._t
    with np.errstate(divide="ignore", invalid="ignore"):
        cols = [np.where(t > 0, (every._alpha[n] + every._beta[n] * x) / t, 0.0) for n in LINKS]
    want = np.stack(np.broadcast_arrays(*cols), axis=-1)
    assert want.shape == every.utilization.shape
    assert np.array_equal(every.utilization, want, equal_nan=True)


@st.composite
def grouped_link_sets(draw):
    """Random link sets over a few scenarios whose capacities scale alike in declared groups:
    a group's common scale is an array (node counts times an imbalance; sometimes inf in a
    scenario: a capacity of 0 is refused, test_a_loaded_link_of_no_capacity_is_refused), each
    member's k is drawn from a few values (equal lines tie) or inf; some
    links are left ungrouped; loads of a mode (I/O-free modes: zero loads)."""
    n = draw(st.integers(1, 6))
    scales = st.lists(st.floats(0.5, 64.0), min_size=n, max_size=n)
    odd = st.sampled_from([1.0, 1e-6, math.inf])
    groups = {}
    for name in ("pe:node", "pe:gpu", "de:node", "de:gpu", "storage"):
        s = np.array(draw(scales)) if name != "storage" else np.ones(n)
        if draw(st.booleans()) and draw(st.booleans()):
            s[draw(st.integers(0, n - 1))] *= draw(odd)  # a scale near 0 or inf somewhere
        groups[name] = s
    ks = [1e9, 2e9, 5e10, 1e11, 3e11, math.inf]
    capacity, scaling = {}, {}
    for k in LINK_TABLE:
        group = (
            "storage"
            if k.side == "storage"
            else f"{k.side}:{draw(st.sampled_from(['node', 'gpu']))}"
        )
        base = draw(st.sampled_from(ks)) * (1e3 if k.unit == "FLOP" else 1.0)
        if k.unit in ("request", "token"):
            base = draw(st.sampled_from([1e2, 1e3, math.inf]))
        with np.errstate(invalid="ignore"):
            capacity[k.name] = base * groups[group]
        if draw(st.integers(0, 4)):  # most links grouped, some on their own
            scaling[k.name] = Scaling(group, base, capacity[k.name])
    hit = draw(st.floats(1e8, 1e10))
    demand = Demand(
        hit_bytes=np.float64(hit),
        miss_bytes=np.float64(hit * draw(st.sampled_from([0.0, 0.01, 0.1]))),
        generated_kv_bytes=np.float64(hit * draw(st.sampled_from([0.0, 0.02]))),
        append_writeback_bytes=np.float64(hit * draw(st.sampled_from([0.0, 0.02]))),
        prefill_flops=np.float64(draw(st.floats(1e12, 1e15))),
        generated_tokens=np.float64(draw(st.floats(1, 2000))),
    )
    mode = draw(st.sampled_from(list(SPLITS)))
    load = turn_load_columns(demand)
    if MODE_TABLE[mode].io_free:
        load = {k.name: ((0.0, 0.0) if k.io else load[k.name]) for k in LINK_TABLE}
    split = SPLITS[mode]
    with np.errstate(invalid="ignore", divide="ignore"):
        even = read_share(capacity) if split == "even" else 0.0
    return LinkSet(load, capacity, split, even, demand.hit_bytes, scaling)  # type: ignore[arg-type]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # capacities of inf on purpose
@settings(max_examples=EXAMPLES, deadline=None)
@given(links=grouped_link_sets())
def test_pruning_changes_nothing(links) -> None:
    assert_identical(links)


def all_one_group(case, mode: str) -> LinkSet:
    """One scenario: every capacity is a number, so all links scale alike (one group)."""
    from tests.test_paths import link_set

    links = link_set(case, mode)
    scaling = {n: Scaling("all", float(c), c) for n, c in links.capacity.items()}
    return replace(links, scaling=scaling)


@settings(max_examples=int(os.environ.get("LP_EXAMPLES", "80")), deadline=None)
@given(case=clusters(), mode=st.sampled_from(list(SPLITS)))
def test_pruned_closed_form_equals_unpruned_and_the_lp(case, mode) -> None:
    links = all_one_group(case, mode)
    assert_identical(links)
    cf = solve(links)
    lp = solve_lp(lp_problem(case, mode))
    assert lp.throughput_turns_per_s == pytest.approx(float(cf.throughput_turns_per_s), rel=1e-6)
    tol = 1e-6
    assert float(cf.split_low) - tol <= lp.decode_path_fraction <= float(cf.split_high) + tol
    assert_same_binding(cf, lp)


def test_the_default_cluster_drops_dominated_links(registry) -> None:
    sc = Scenario.from_ids(registry)
    P = np.array([2.0, 3.0, 8.0, 16.0])
    D = np.array([4.0, 1.0, 8.0, 2.0])
    for mode in SPLITS:
        links = assemble(sc, mode, P, D).links
        dropped = _prune(links)
        assert_identical(links)
        if MODE_TABLE[mode].io_free:
            assert not dropped  # no I/O loads: nothing carries load above those lines
            continue
        # Lower lines of one scaling: the PE DRAM carries twice the SNIC's reads on ten times
        # its capacity; the DE GPUs' PCIe carries less than the CNIC's PCIe side; no load on
        # the PE SNICs' write side.
        assert {"pe_dram", "de_gpu_pcie_h2d", "pe_snic_write"} <= dropped
        # No dropped link binds anywhere (the unpruned solve names every tight link).
        every = solve(links, prune=False)
        tight = np.bitwise_or.reduce(np.ravel(every.binding_mask))
        assert not {n for i, n in enumerate(LINKS) if tight >> i & 1} & dropped


def test_a_replaced_capacity_leaves_its_group(registry) -> None:
    """A capacity replaced after the assembly (as the benchmark's SNIC rates) is no longer
    the array its scaling was declared for: it counts as ungrouped and is solved."""
    sc = Scenario.from_ids(registry)
    links = assemble(sc, "dualpath", np.array([2.0, 4.0]), np.array([4.0, 2.0])).links
    assert "pe_dram" in _prune(links)
    slow = replace(links, capacity={**links.capacity, "pe_dram": links.capacity["pe_dram"] / 1e3})
    assert "pe_dram" not in _prune(slow)
    before, after = solve(links), solve(slow)
    # The slow DRAM moves reads to the DE path (compute still binds the throughput).
    assert np.all(after.decode_path_fraction > before.decode_path_fraction + 0.1)
    assert_identical(slow)


def test_a_falling_line_without_load_sets_no_bound() -> None:
    """A link whose load does not fall with the split (slope +0) bounds nothing: the split's
    lower bound divides by |beta|, not -beta (-0.0 turned "no bound" into x >= inf)."""
    load = {n: (0.0, 0.0) for n in LINKS}
    load["de_snic_read"] = (0.0, 1.0)
    load["pe_snic_read"] = (1.0, -1.0)
    cap = {n: np.float64(1.0) for n in LINKS}
    links = LinkSet(load, cap, "optimal", 0.5, 1.0, {n: Scaling("g", 1.0, cap[n]) for n in LINKS})
    for prune in (True, False):
        s = solve(links, prune=prune)
        assert float(s.throughput_turns_per_s) == pytest.approx(2.0)
        assert float(s.decode_path_fraction) == pytest.approx(0.5)
        assert s.binding() == ["pe_snic_read", "de_snic_read"]


def _pinned_link_sets():
    """Link sets of 4,096 scenarios each from arithmetic sequences (no random generator, so
    the same on every machine and NumPy): node counts 1..32, capacities grouped by side
    (so that pruning applies) or on their own, loads of three demands and every mode; in the
    last, capacities of 0, inf and NaN in a few scenarios."""
    n = 4096
    i = np.arange(n, dtype=np.float64)

    def frac(k: float) -> np.ndarray:
        return (i * k) % 1.0

    P = 1.0 + np.floor(frac(0.6180339887) * 32)
    D = 1.0 + np.floor(frac(0.7548776662) * 32)
    common = {
        "pe": P * (0.8 + 0.2 * frac(0.5698402910)),
        "de": D * (0.8 + 0.2 * frac(0.3247179572)),
    }
    for variant in range(3):
        hit = 1e9 * (1 + variant)
        demand = Demand(
            hit_bytes=np.float64(hit),
            miss_bytes=np.float64(hit * (0.0, 0.01, 0.1)[variant]),
            generated_kv_bytes=np.float64(hit * 0.02),
            append_writeback_bytes=np.float64(hit * (0.02, 0.0, 0.02)[variant]),
            prefill_flops=np.float64((1e13, 1e14, 1e15)[variant]),
            generated_tokens=np.float64((100.0, 500.0, 2000.0)[variant]),
        )
        capacity, scaling = {}, {}
        for j, k in enumerate(LINK_TABLE):
            base = 1e9 * (1.0 + (j * 0.37 + variant * 0.11) % 3.0)
            if k.unit == "FLOP":
                base *= 1e4
            elif k.unit in ("request", "token"):
                base = 1e3 * (1.0 + j % 3)
            if k.side == "storage":
                capacity[k.name] = np.float64(base * 20)
            elif (j + variant) % 4 == 3:  # on its own
                capacity[k.name] = base * common[k.side] * (0.5 + frac(0.1 * j + 0.05))
            else:
                capacity[k.name] = base * common[k.side]
                scaling[k.name] = Scaling(k.side, base, capacity[k.name])
        if variant == 2:
            for j, name in enumerate(("pe_snic_read", "de_dram", "pe_compute")):
                c = np.array(capacity[name], dtype=np.float64)
                c[j * 7 : j * 7 + 3] = (1e-3, math.inf, 1e30)
                capacity[name] = c
                scaling.pop(name, None)
        for mode, split in SPLITS.items():
            load = turn_load_columns(demand)
            if MODE_TABLE[mode].io_free:
                load = {k.name: ((0.0, 0.0) if k.io else load[k.name]) for k in LINK_TABLE}
            with np.errstate(invalid="ignore", divide="ignore"):
                even = read_share(capacity) if split == "even" else 0.0
            yield LinkSet(load, dict(capacity), split, even, demand.hit_bytes, dict(scaling))


def _pinned_digest() -> str:
    h = hashlib.sha256()
    with np.errstate(all="ignore"):
        for links in _pinned_link_sets():
            for prune in (True, False):
                sol = solve(links, prune=prune)
                for v in (
                    sol.throughput_turns_per_s,
                    sol.decode_path_fraction,
                    sol.split_low,
                    sol.split_high,
                    sol.binding_mask,
                    sol.utilization,
                ):
                    h.update(np.ascontiguousarray(v).tobytes())
    return h.hexdigest()


def test_closed_form_outputs_are_pinned() -> None:
    # Every output of the closed form (throughput, split, split range, binding mask,
    # utilization; pruned and not) on fixed inputs, to the bit (NaN signs included), so that
    # passes rearranged for speed keep every bit. Only +, -, x, /, max, min and abs enter,
    # correctly rounded on every machine, so the digest holds everywhere; a change to the
    # model itself, or to the order of its operations, changes it on purpose (update it then,
    # and say by how much the outputs moved: the highest crossing taken as the rising line at
    # the largest crossing point moved throughput by at most 2 ulp and the splits by 1e-15
    # here, though a split is as well conditioned as its lines' crossing and can move by up
    # to ~1e-7 where two lines are nearly parallel; the inputs' capacities of 0 and NaN,
    # refused since, became 1e-3 and 1e30, the same digest before and after the refusal).
    assert _pinned_digest() == PINNED_DIGEST


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan])
@pytest.mark.parametrize("where", ["pe_snic_read", "de_snic_read", "de_cnic_net_send"])
def test_a_loaded_link_of_no_capacity_is_refused(bad, where) -> None:
    """A split-dependent load on no capacity is infinite except where the split empties it, a
    constraint the lines cannot state (it evaluated to NaN, which the maxima skip:
    pe_snic_read of capacity 0 gave an infinite throughput). solve and solve_each refuse it,
    and any NaN or negative capacity, naming the link, in one scenario of many; a capacity of
    0 on a link with no load is no limit and solves, and on a flat link (an infeasible
    point's decode limit) it is a throughput of 0 there, that link binding."""
    base = next(iter(_pinned_link_sets()))
    shape = np.broadcast(*base.capacity.values()).shape
    c = np.array(np.broadcast_to(base.capacity[where], shape), dtype=np.float64)
    c[3] = bad
    links = replace(base, capacity={**base.capacity, where: c}, scaling={})
    with pytest.raises(ValueError, match=f"link {where}: capacity"):
        solve(links)
    with pytest.raises(ValueError, match=f"link {where}: capacity"):
        solve_each([_one_point(links, i) for i in range(3, 5)])
    idle = replace(links, load={**links.load, where: (0.0, 0.0)})
    assert np.all(np.isfinite(solve(idle).throughput_turns_per_s))
    flat = base.capacity["de_decode"]
    flat = np.array(np.broadcast_to(flat, shape), dtype=np.float64)
    flat[3] = bad
    links = replace(base, capacity={**base.capacity, "de_decode": flat}, scaling={})
    if bad == 0:
        sol = solve(links)
        assert sol.throughput_turns_per_s[3] == 0
        assert "de_decode" in sol.binding((3,))
    else:
        with pytest.raises(ValueError, match="link de_decode: capacity"):
            solve(links)


def _one_point(links: LinkSet, i: int) -> LinkSet:
    """Scenario i of a link set over scenarios, as a link set of its own (numbers, with the
    groups it had: capacities of a group still scale alike in one scenario)."""

    def at(v):
        return np.asarray(v, dtype=np.float64)[i] if np.ndim(v) else v

    capacity = {n: np.float64(at(c)) for n, c in links.capacity.items()}
    scaling = {n: Scaling(s.group, s.k, capacity[n]) for n, s in links.scaling.items()}
    load = {n: (at(a), at(b)) for n, (a, b) in links.load.items()}
    return LinkSet(load, capacity, links.split, at(links.even_share), links.hit_bytes, scaling)


def assert_each_alone(link_sets: list[LinkSet]) -> None:
    """solve_each gives every link set what solve gives it alone, bit for bit: throughput,
    split range, binding mask and utilization."""
    for links, got in zip(link_sets, solve_each(link_sets), strict=True):
        want = solve(links)
        for f in FIELDS:
            a, b = getattr(got, f), getattr(want, f)
            assert np.shape(a) == np.shape(b) == (), f
            assert np.array_equal(a, b, equal_nan=True), f
        assert np.array_equal(got.binding_mask, want.binding_mask)
        assert got.binding() == want.binding()
        assert np.array_equal(got.utilization, want.utilization, equal_nan=True)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # capacities of inf on purpose
@settings(max_examples=EXAMPLES, deadline=None)
@given(sets=st.lists(grouped_link_sets(), min_size=1, max_size=4), seed=st.randoms())
def test_solving_many_link_sets_at_once_gives_each_its_own(sets, seed) -> None:
    """One-point link sets of every split rule, with ties, zero loads (the oracle's: other
    lines merge), infinite capacities and scales of 0 or inf, solved at once in any order."""
    ones = [
        _one_point(links, i) for links in sets for i in range(np.size(links.capacity["pe_dram"]))
    ]
    seed.shuffle(ones)
    assert_each_alone(ones)


def test_the_perturbed_clusters_solved_at_once_are_each_alone(registry) -> None:
    """The intervals' clusters (the default scenario moved by each fitted field's error, every
    mode) and the pinned link sets' first scenarios, solved at once."""
    from dualpath_plan.outcomes.uncertainty import perturbations

    sc = Scenario.from_ids(registry)
    scenarios = [sc, *(s for p in perturbations(sc) for s in (p.below, p.above))]
    assembled = [
        assemble(s, mode, s.prefill_nodes, s.decode_nodes).links
        for s in scenarios
        for mode in MODE_TABLE
    ]
    assert_each_alone(assembled)
    with np.errstate(all="ignore"):
        assert_each_alone([_one_point(links, i) for links in _pinned_link_sets() for i in range(8)])


def assert_each_alone_over_arrays(link_sets: list[LinkSet]) -> None:
    """solve_each of link sets over arrays of scenarios gives each what solve gives it alone,
    bit for bit and of the same shape: throughput, split range, binding mask, utilization."""
    for links, got in zip(link_sets, solve_each(link_sets), strict=True):
        want = solve(links)
        for f in FIELDS:
            a, b = getattr(got, f), getattr(want, f)
            assert np.shape(a) == np.shape(b), f
            assert np.array_equal(a, b, equal_nan=True), f
        assert np.array_equal(got.binding_mask, want.binding_mask)
        assert np.array_equal(got.utilization, want.utilization, equal_nan=True)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # capacities of inf on purpose
@settings(max_examples=EXAMPLES, deadline=None)
@given(
    base=grouped_link_sets(),
    changes=st.lists(
        st.tuples(
            st.sampled_from(LINKS), st.sampled_from([0.0, 0.5, 2.0, 1e-6, 1e6]), st.booleans()
        ),
        min_size=1,
        max_size=5,
    ),
    seed=st.randoms(),
)
def test_link_sets_over_scenarios_solved_at_once_are_each_alone(base, changes, seed) -> None:
    """Link sets over one axis of scenarios, each the first with a load or a capacity scaled
    (a sweep's combinations of profile values over one grid: the capacities replaced leave
    their groups, so the sets prune differently; a load scaled to 0 merges lines the others
    do not), solved at once in any order."""
    sets = [base]
    for name, factor, on_load in changes:
        a, b = base.load[name]
        if on_load:
            sets.append(replace(base, load={**base.load, name: (a * factor, b * factor)}))
        elif factor > 0:
            capacity = {**base.capacity, name: base.capacity[name] * factor}
            sets.append(replace(base, capacity=capacity))
    seed.shuffle(sets)
    assert_each_alone_over_arrays(sets)


def test_a_sweeps_combinations_solved_at_once_are_each_alone(registry) -> None:
    """The scenarios of profile values a sweep combines (a workload's, a node's NIC and
    compute), assembled over a column of P and a row of D in every mode, solved at once
    (``serving.saturated_each``, as the sweep solves a batch of them)."""
    from dualpath_plan.outcomes.serving import saturated_each
    from dualpath_plan.profiles.registry import Overrides

    values = [
        ["workload.append_tokens=128", "node.snic_gbit_s=100", "node.prefill_mfu=0.1"],
        ["workload.append_tokens=4096", "node.snic_gbit_s=100", "node.prefill_mfu=0.5"],
        ["workload.append_tokens=512", "node.snic_gbit_s=800", "node.prefill_mfu=0.3"],
        ["workload.append_tokens=512", "node.snic_gbit_s=400", "node.prefill_mfu=0.3"],
    ]
    scenarios = [Scenario.from_ids(replace(registry, overrides=Overrides.parse(v))) for v in values]
    P = np.arange(1.0, 25.0).reshape(-1, 1)
    D = np.arange(1.0, 17.0).reshape(1, -1)
    for mode in MODE_TABLE:
        found = saturated_each(scenarios, mode, P, D)
        links = [sat.assembly.links for sat in found]
        assert_each_alone_over_arrays(links)
        for sat, sc in zip(found, scenarios, strict=True):
            alone = solve(assemble(sc, mode, P, D).links)
            assert np.array_equal(sat.solution.throughput_turns_per_s, alone.throughput_turns_per_s)
            assert np.array_equal(sat.solution.binding_mask, alone.binding_mask)


def _grid_links(registry, values: list[str], D=None) -> LinkSet:
    from dualpath_plan.profiles.registry import Overrides

    sc = Scenario.from_ids(replace(registry, overrides=Overrides.parse(values)))
    P = np.arange(1.0, 7.0).reshape(-1, 1)
    return assemble(sc, "dualpath", P, np.arange(1.0, 6.0).reshape(1, -1) if D is None else D).links


def test_a_stack_refuses_and_shapes_as_each_set_alone(registry) -> None:
    """Link sets solved at once are refused as each alone: a link one set leaves unloaded on
    a capacity of 0 is no error for it where another set loads that link, and of two bad
    sets the first one's link is named; and each keeps its own answer's shape where a line
    its pruning drops (and another set keeps) is wider than its kept lines."""
    a = _grid_links(registry, ["workload.append_tokens=128"])
    b = _grid_links(registry, ["workload.append_tokens=4096"])
    idle = replace(
        a,
        capacity={**a.capacity, "de_snic_read": np.zeros((1, 5))},
        load={**a.load, "de_snic_read": (0.0, 0.0)},
    )
    assert_each_alone_over_arrays([idle, b])
    bad_a = replace(a, capacity={**a.capacity, "de_snic_read": np.zeros((1, 5))})
    bad_b = replace(b, capacity={**b.capacity, "pe_snic_read": np.zeros((6, 1))})
    with pytest.raises(ValueError, match="link de_snic_read: capacity"):
        solve_each([bad_a, bad_b])
    # D one number: the answer is a column; a dropped line of the grid's full shape, kept in
    # its group (same k, same values) in one set and left ungrouped (kept) in the other.
    col = _grid_links(registry, ["workload.append_tokens=128"], D=np.float64(4.0))
    name = sorted(_prune(col))[0]
    wide = np.broadcast_to(col.capacity[name], (6, 5)).copy()
    scaled = col.scaling[name]
    one = replace(
        col,
        capacity={**col.capacity, name: wide},
        scaling={**col.scaling, name: Scaling(scaled.group, scaled.k, wide)},
    )
    other = replace(one, capacity={**one.capacity, name: wide.copy()})
    assert name in _prune(one) and name not in _prune(other)
    assert np.shape(solve(one).throughput_turns_per_s) == (6, 1)
    assert_each_alone_over_arrays([one, other])
