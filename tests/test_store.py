"""A store of finite size (issue 32, item 2; docs/model.md section 12; INV-80 to INV-83).

INV-80: with no capacity given, or one at or above the KV working set, every output is byte
for byte today's (size, sweep and recommend JSON; the README's default `size`).
INV-81: below the working set, throughput never rises as the capacity falls.
INV-82: the demand at a capacity conserves the prompt: read + recomputed KV = the cached KV,
and r = 1 is the demand itself.
INV-83: --storage-nodes N is N of the profile's nodes: capacity and bandwidth scale with N.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dualpath_plan.errors import PlanInputError
from dualpath_plan.outcomes.read_choice import (
    choose_reads,
    read_scenario,
    read_table,
)
from dualpath_plan.outcomes.serving import evaluate
from dualpath_plan.physics.store import demand_at_capacity, uniform_resident
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ScenarioSpec, ServingConfig
from dualpath_plan.units import parse_bytes
from tests.conftest import CliResult

ROOT = Path(__file__).parent.parent
INFINITE = "1e15TB"  # far above any working set (1e27 B)
MODELS = ("deepseek-v3.2", "deepseek-v3", "qwen3-32b", "llama-3.1-70b", "qwen2.5-32b")
WORKLOADS = ("paper-32k", "paper-48k", "paper-64k")
NODES = ("dualpath-hopper", "dgx-h100", "dgx-h200", "dgx-b200")
SLOW = settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

scenarios = st.fixed_dictionaries(
    {
        "--model": st.sampled_from(MODELS),
        "--workload": st.sampled_from(WORKLOADS),
        "--node": st.sampled_from(NODES),
        "-P": st.integers(1, 4).map(str),
        "-D": st.integers(1, 6).map(str),
        "--agents": st.sampled_from(["64", "512", "2048"]),
    }
)


def _args(d: dict[str, str]) -> list[str]:
    return [x for k, v in d.items() for x in (k, v)]


_PRICED = ("usd_", "store_usd")


def _without_store(payload: Any) -> Any:
    """A JSON report without what a store adds: its block, each row's read share and the
    store's price (a capacity given is a store priced at its nodes: outcomes/cost.py)."""
    if isinstance(payload, dict):
        return {
            k: _without_store(v)
            for k, v in payload.items()
            if k not in ("store", "read_share", "storage_nodes") and not k.startswith(_PRICED)
        }
    if isinstance(payload, list):
        return [_without_store(v) for v in payload]
    return payload


@SLOW
@given(scenarios)
def test_an_infinite_store_reads_everything_or_runs_faster(
    cli: Callable[..., CliResult], s: dict[str, str]
) -> None:
    # INV-80: a store holding the working set reads every resident block wherever that is
    # fastest, and then every number of the mode is what size gives without a capacity; a
    # mode that recomputes part of its cached context instead (a read link binds with compute
    # to spare: outcomes/read_choice.py) runs at least as many turns.
    plain = cli("size", "--json", *_args(s))
    big = cli("size", "--json", *_args(s), "--storage-capacity", INFINITE)
    assert plain.code == big.code
    if plain.code != 0:
        assert plain.err == big.err
        return
    without, store = json.loads(plain.out), json.loads(big.out)
    reads = store["store"]["read_share"]
    assert store["store"]["resident_share"] == 1.0
    for m, o in without["modes"].items():
        got = store["modes"][m]
        if reads[m] == 1.0:
            assert got == o, m
        else:
            assert got["saturated_turns_per_s"] >= o["saturated_turns_per_s"], m


def test_no_capacity_reads_every_cached_block(registry: Registry) -> None:
    # INV-80: without a capacity nothing is chosen: the scenario is its own reading, and
    # evaluate's outcomes say no read share (the JSON and text carry no store).
    sc = Scenario.from_spec(registry, ScenarioSpec.build({}))
    assert sc.store is None and sc.read_share is None
    assert read_scenario(sc, "basic") is sc and sc.reading(0.5) is sc
    r = evaluate(sc, ServingConfig())
    assert all(o.read_share is None for o in r.modes.values())


def test_sweep_and_recommend_json_are_unchanged_by_an_infinite_capacity(
    cli: Callable[..., CliResult],
) -> None:
    # INV-80 for the searches (one run each: they take seconds): on the README default
    # recomputing DeepSeek-V3.2's 64K-token prefix costs more than reading it, so an infinite
    # store's rows are those without a capacity, to the few millionths a sliver of recompute
    # gains where a read link binds by a hair (basic on 5P1D reads 99.9999%).
    args = ("sweep", "--grid", "P=1:3", "--grid", "D=2:4", "--json")
    plain, big = cli(*args), cli(*args, "--storage-capacity", INFINITE)
    assert plain.code == big.code == 0, (plain.err, big.err)
    _assert_close(_without_store(json.loads(plain.out)), _without_store(json.loads(big.out)))
    args = ("recommend", "--budget-gpus", "48", "--json")
    plain, big = cli(*args), cli(*args, "--storage-capacity", INFINITE)
    assert plain.code == big.code == 0, (plain.err, big.err)
    rows = zip(json.loads(plain.out)["candidates"], json.loads(big.out)["candidates"], strict=True)
    for without, store in rows:
        for m, o in without["modes"].items():
            got = store["modes"][m]
            if o is None:  # the split does not run the mode
                assert got is None
                continue
            assert got["saturated_turns_per_s"] >= o["saturated_turns_per_s"]
            for metric in ("saturated_turns_per_s", "jct_s", "aps"):
                assert got[metric] == pytest.approx(o[metric], rel=1e-5), (m, metric)


def _assert_close(a: Any, b: Any, path: str = "") -> None:
    """The same report to 1e-4: a mode that recomputes a sliver of its cached context (the
    table's point a millionth below 1, where a read link binds by a hair) runs a few
    millionths faster, and a difference such as the drain (JCT less N turns / T) a little more."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _assert_close(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert b == pytest.approx(a, rel=1e-4, abs=1e-12), path
    else:
        assert a == b, path


def test_the_readme_default_is_unchanged(cli: Callable[..., CliResult]) -> None:
    # INV-80: the README's first example, `size`, is what size prints without a capacity.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"^```\n\$ dualpath-plan size\n(.*?)^```", readme, re.S | re.M)
    assert block is not None
    shown = block.group(1).strip()
    printed = cli("size")
    assert printed.code == 0
    assert "\n".join(line.rstrip() for line in printed.out.splitlines()).strip() == shown


def _outcomes(spec: ScenarioSpec, registry: Registry) -> dict[str, float]:
    sc = Scenario.from_spec(registry, spec)
    r = evaluate(sc, spec.serving, strict=False)
    return {m: o.saturated_turns_per_s for m, o in r.modes.items()}


# A cluster drawn at random: its model, workload, node and node counts.
CLUSTERS = {
    "model": st.sampled_from(MODELS),
    "workload": st.sampled_from(WORKLOADS),
    "node": st.sampled_from(NODES),
    "p": st.integers(1, 4),
    "d": st.integers(1, 6),
}


@settings(max_examples=25, deadline=None)
@given(**CLUSTERS, shares=st.lists(st.floats(0.01, 0.999), min_size=2, max_size=4))
def test_throughput_never_rises_as_capacity_falls(
    model: str, workload: str, node: str, p: int, d: int, shares: list[float]
) -> None:
    # INV-81: from a store four times the working set down through capacities below it, in
    # falling order, the saturated throughput of every mode never rises: where recomputing
    # part of the cached prefix is faster than reading it, a larger store may do so too
    # (outcomes/read_choice.py), so a smaller one has nothing to gain.
    registry = Registry.load()
    base = ScenarioSpec.build(
        {"model": model, "workload": workload, "node": node, "prefill_nodes": p, "decode_nodes": d}
    )
    try:
        sc = Scenario.from_spec(registry, base.with_(storage_capacity="1B"))
        evaluate(sc, base.serving, strict=False)
    except PlanInputError:
        return  # the model does not fit these nodes or the workload its window
    assert sc.store is not None
    w = sc.store.working_set_bytes
    previous: dict[str, float] | None = None
    for share in [4.0, 1.0, *sorted(set(shares), reverse=True)]:
        now = _outcomes(base.with_(storage_capacity=f"{share * w:.17g}B"), registry)
        for m, t in now.items():
            if previous is not None and m in previous:
                assert t <= previous[m] * (1 + 1e-9), (m, share, t, previous[m])
        previous = now


@settings(max_examples=25, deadline=None)
@given(
    **CLUSTERS,
    mode=st.sampled_from(["basic", "even", "dualpath"]),
    resident=st.floats(0.05, 1.0),
)
def test_throughput_is_quasi_concave_in_the_read_share(
    model: str, workload: str, node: str, p: int, d: int, mode: str, resident: float
) -> None:
    # What read_choice rests on: over the share of the cached context read, the saturated
    # throughput rises (less prefill) to a peak and then falls (more reads), never rising
    # again once it has fallen; the share chosen is held by the store and runs at least as
    # fast as reading every resident block.
    registry = Registry.load()
    base = ScenarioSpec.build(
        {"model": model, "workload": workload, "node": node, "prefill_nodes": p, "decode_nodes": d}
    )
    try:
        sc = Scenario.from_spec(registry, base.with_(storage_capacity="1B"))
    except PlanInputError:
        return
    assert sc.store is not None
    sc = replace(sc, store=replace(sc.store, resident=resident))
    table = read_table(sc, mode, p, d)  # type: ignore[arg-type]
    if not np.isfinite(table).all():
        return  # the cluster does not run
    falls = np.flatnonzero(np.diff(table) < -1e-12 * table[1:])
    if falls.size:
        after = table[falls[0] :]
        assert np.all(np.diff(after) <= 1e-12 * after[1:]), (mode, table)
    share = float(choose_reads(table, resident))
    assert share <= resident
    at = read_table(sc.reading(share), mode, p, d)[0]  # the chosen reading, exactly
    everything = read_table(sc.reading(resident), mode, p, d)[0]
    assert at >= everything * (1 - 1e-12)


def test_reading_less_can_beat_reading_everything(registry: Registry) -> None:
    # Qwen3-32B on one DGX B200 a side in basic mode is bound by its prefill nodes' storage
    # reads with compute to spare: a store that holds the working set reads 81.25% of the
    # cached context and recomputes the rest, 20% more turns than reading all of it, and a
    # store of 87.5% of the working set runs as fast as that.
    base = ScenarioSpec.build(
        {"model": "qwen3-32b", "workload": "paper-32k", "node": "dgx-b200",
         "prefill_nodes": 1, "decode_nodes": 1}
    )  # fmt: skip
    sc = Scenario.from_spec(registry, base.with_(storage_capacity="1B"))
    assert sc.store is not None
    w = sc.store.working_set_bytes
    everything = _outcomes(base, registry)["basic"]
    held = Scenario.from_spec(registry, base.with_(storage_capacity=INFINITE))
    assert read_scenario(held, "basic").read_share == pytest.approx(0.8125)
    more = _outcomes(base.with_(storage_capacity=INFINITE), registry)["basic"]
    less = _outcomes(base.with_(storage_capacity=f"{0.875 * w:.17g}B"), registry)["basic"]
    assert more > 1.15 * everything
    assert less == pytest.approx(more, rel=1e-9)


@given(r=st.floats(0.0, 1.0), model=st.sampled_from(MODELS))
@settings(max_examples=40, deadline=None)
def test_demand_at_capacity_conserves_the_prompt(r: float, model: str) -> None:
    # INV-82: the read KV and the recomputed KV add up to the cached KV; tokens prefilled grow
    # by the missed context; r = 1 is the demand itself.
    sc = Scenario.from_ids(Registry.load(), model=model, workload="paper-32k")
    d = sc.turn_demand
    at = demand_at_capacity(sc.model, d, r)
    if r >= 1:
        assert at is d
        return
    recomputed = at.miss_bytes - d.miss_bytes
    assert np.allclose(at.hit_bytes + recomputed, d.hit_bytes)
    assert np.allclose(at.append_writeback_bytes - d.append_writeback_bytes, recomputed)
    assert np.allclose(at.context_tokens, d.context_tokens)
    assert np.allclose(
        at.append_tokens, d.append_tokens + (1 - r) * (d.context_tokens - d.append_tokens)
    )
    assert np.all(at.prefill_flops >= d.prefill_flops * (1 - 1e-12))
    assert at.hit_rate <= d.hit_rate + 1e-12


def test_uniform_resident_share() -> None:
    assert uniform_resident(10.0, 5.0) == 1.0
    assert uniform_resident(5.0, 10.0) == 0.5


def test_storage_nodes_scale_capacity_and_bandwidth() -> None:
    # INV-83
    registry = Registry.load()
    prof = registry.get("storage", "3fs")
    for n in (1, 3, 40):
        sc = Scenario.from_ids(registry, storage_nodes=n)
        assert sc.storage is not None and sc.store is not None
        assert sc.storage.storage_nodes == n
        assert sc.storage.aggregate_read_gbyte_s == pytest.approx(n * prof.node_read_gbyte_s)
        assert sc.store.capacity_bytes == pytest.approx(n * prof.node_capacity_tbyte * 1e12)


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("--storage-capacity", "500"), "--storage-capacity"),
        (("--storage-capacity", "-5TB"), "--storage-capacity"),
        (("--storage-capacity", "5XB"), "--storage-capacity"),
        # A fraction of a byte planned an empty store, and 1e308TB an infinite one.
        (("--storage-capacity", "1e-30TB"), "a finite size of at least 1 B"),
        (("--storage-capacity", "1e308TB"), "a finite size of at least 1 B"),
        (("--storage-capacity", "5TB", "--storage-nodes", "3"), "--storage-nodes"),
        (("--storage-nodes", "0"), "--storage-nodes"),
        (("--storage", "none", "--storage-capacity", "5TB"), "--storage-capacity"),
        (("--workload", "agentic-22gb-pflop", "--storage-capacity", "5GB"), "gb_per_pflop"),
    ],
)
def test_bad_store_input_is_one_line(
    cli: Callable[..., CliResult], args: tuple[str, ...], field: str
) -> None:
    r = cli("size", *args)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and field in lines[0], r.err


def test_parse_bytes_units() -> None:
    assert parse_bytes("500TB") == 500e12
    assert parse_bytes("2 TiB") == 2 * 2.0**40
    assert parse_bytes("64gb") == 64e9
    assert parse_bytes("500") is None


def test_a_sweep_with_a_store_takes_one_agents_value(cli: Callable[..., CliResult]) -> None:
    # A workload profile's resident share rests on its live agents: a store's sweep runs one
    # agents value (the scenarios' own, as size --agents N), and refuses more in one line.
    many = cli("sweep", "--grid", "P=1:2", "--grid", "agents=1,64", "--storage-capacity", "1TB")
    assert many.code == 2
    assert many.err.strip().count("\n") == 0 and "--grid agents" in many.err
    one = cli("sweep", "--grid", "P=1:2", "--grid", "agents=64", "--storage-capacity", "1TB",
              "--json")  # fmt: skip
    size = cli("size", "-P", "2", "--agents", "64", "--storage-capacity", "1TB", "--json")
    assert one.code == size.code == 0
    best = json.loads(one.out)["modes"]["dualpath"]["best"][0]
    mode = json.loads(size.out)["modes"]["dualpath"]
    assert best["P"] == 2
    assert best["saturated_turns_per_s"] == pytest.approx(mode["saturated_turns_per_s"], rel=1e-9)


def test_intervals_and_the_sized_store_follow_the_read_choice(
    cli: Callable[..., CliResult],
) -> None:
    # The intervals hold each mode's chosen share, 0 included (a store read at 0.01 GB/s a
    # client: every cached block recomputed), and do not collapse; size --target-aps sizes
    # each mode's store for what it reads at its cluster (basic reads less than the oracle).
    slow = cli("--set", "storage.max_client_read_gbyte_s=0.01", "size", "--model", "qwen3-32b",
               "--workload", "paper-32k", "-P", "1", "-D", "1", "--storage-capacity", "1PB",
               "--json")  # fmt: skip
    assert slow.code == 0, slow.err
    report = json.loads(slow.out)
    assert report["store"]["read_share"]["basic"] == 0.0
    low, high = report["modes"]["basic"]["saturated_turns_per_s_interval"]
    assert high > low * 1.01
    sized = cli("size", "--model", "qwen3-32b", "--workload", "paper-32k", "--node", "dgx-b200",
                "--storage-capacity", "1PB", "--target-aps", "0.3", "--json")  # fmt: skip
    assert sized.code == 0, sized.err
    modes = json.loads(sized.out)["modes"]
    assert modes["basic"]["store"]["read_gbyte_s"] < 0.9 * modes["oracle"]["store"]["read_gbyte_s"]


def test_size_at_a_rate_reads_what_size_chooses(cli: Callable[..., CliResult]) -> None:
    # size --aps runs each mode on the share size chooses, and says so in its JSON.
    args = ("--model", "qwen3-32b", "--workload", "paper-32k", "--node", "dgx-b200", "-P", "1",
            "-D", "1", "--storage-capacity", "1PB", "--json")  # fmt: skip
    plain, at_rate = cli("size", *args), cli("size", *args, "--aps", "0.1")
    assert plain.code == at_rate.code == 0, at_rate.err
    chosen = json.loads(plain.out)
    rated = json.loads(at_rate.out)
    assert rated["store"]["read_share"] == chosen["store"]["read_share"]
    for m, o in rated["modes"].items():
        assert o["saturated_turns_per_s"] == chosen["modes"][m]["saturated_turns_per_s"], m
