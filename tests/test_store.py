"""A store of finite size (issue 32, item 2; docs/model.md section 12; INV-80 to INV-83).

INV-80: with no capacity given, or one at or above the KV working set, every output is byte
for byte today's (size, sweep and recommend JSON; the README's default `size`).
INV-81: below the working set, throughput never rises as the capacity falls.
INV-82: the demand at a capacity conserves the prompt: read + recomputed KV = the cached KV,
and r = 1 is the demand itself.
INV-83: --storage-nodes N is N of the profile's nodes: capacity and bandwidth scale with N.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dualpath_plan.errors import PlanInputError
from dualpath_plan.outcomes.serving import evaluate
from dualpath_plan.physics.store import demand_at_capacity, uniform_resident
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ScenarioSpec
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


@SLOW
@given(scenarios)
def test_no_capacity_and_an_infinite_one_give_the_same_json(
    cli: Callable[..., CliResult], s: dict[str, str]
) -> None:
    # INV-80: size --json byte for byte with and without a capacity above the working set.
    plain = cli("size", "--json", *_args(s))
    big = cli("size", "--json", *_args(s), "--storage-capacity", INFINITE)
    assert plain.code == big.code
    assert plain.out == big.out and plain.err == big.err


def test_sweep_and_recommend_json_are_unchanged_by_an_infinite_capacity(
    cli: Callable[..., CliResult],
) -> None:
    # INV-80 for the searches (one run each: they take seconds).
    for args in (
        ("sweep", "--grid", "P=1:3", "--grid", "D=2:4", "--json"),
        ("recommend", "--budget-gpus", "48", "--json"),
    ):
        plain = cli(*args)
        big = cli(*args, "--storage-capacity", INFINITE)
        assert plain.code == big.code == 0, (plain.err, big.err)
        assert plain.out == big.out


def test_the_readme_default_is_unchanged(cli: Callable[..., CliResult]) -> None:
    # INV-80: the README's first example, `size`, is what size prints with an infinite store.
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"^```\n\$ dualpath-plan size\n(.*?)^```", readme, re.S | re.M)
    assert block is not None
    shown = block.group(1).strip()
    for extra in ((), ("--storage-capacity", INFINITE)):
        printed = cli("size", *extra)
        assert printed.code == 0
        assert "\n".join(line.rstrip() for line in printed.out.splitlines()).strip() == shown


# Links whose load per turn does not depend on the split and never falls as the resident
# share falls (prefill FLOPs grow, a request is a request, decode is unchanged): where one of
# them binds, T = its capacity / its load, and a smaller store can only lower it.
COMPUTE = frozenset({"pe_compute", "pe_prefill_batch", "de_decode"})


def _outcomes(spec: ScenarioSpec, registry: Registry) -> dict[str, tuple[float, frozenset[str]]]:
    sc = Scenario.from_spec(registry, spec)
    r = evaluate(sc, spec.serving, strict=False)
    return {m: (o.saturated_turns_per_s, frozenset(o.binding)) for m, o in r.modes.items()}


@settings(max_examples=25, deadline=None)
@given(
    model=st.sampled_from(MODELS),
    workload=st.sampled_from(WORKLOADS),
    node=st.sampled_from(NODES),
    p=st.integers(1, 4),
    d=st.integers(1, 6),
    shares=st.lists(st.floats(0.01, 0.999), min_size=2, max_size=4),
)
def test_throughput_never_rises_as_capacity_falls(
    model: str, workload: str, node: str, p: int, d: int, shares: list[float]
) -> None:
    # INV-81: at capacities below the working set, in falling order, the saturated throughput
    # of every mode bound by compute (prefill FLOPs, the prefill batch or decode) never rises.
    # Where storage reads bind with compute to spare, recomputing a prefix is faster than
    # reading it and throughput does rise: the model says so
    # (test_recomputing_can_beat_reading), docs/model.md section 12.
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
    previous: dict[str, tuple[float, frozenset[str]]] | None = None
    for share in sorted(set(shares), reverse=True):
        now = _outcomes(base.with_(storage_capacity=f"{share * w:.17g}B"), registry)
        for m, (t, _) in now.items():
            if previous is not None and m in previous and previous[m][1] <= COMPUTE:
                assert t <= previous[m][0] * (1 + 1e-9), (m, share, t, previous[m])
        previous = now


def test_recomputing_can_beat_reading() -> None:
    # The exception INV-81 leaves out, shown: Qwen3-32B on one DGX B200 a side in basic mode
    # is bound by its prefill nodes' storage reads with compute to spare; a store holding 87.5%
    # of the working set instead of 93.75% recomputes more and reads less, and runs faster.
    registry = Registry.load()
    base = ScenarioSpec.build(
        {"model": "qwen3-32b", "workload": "paper-32k", "node": "dgx-b200",
         "prefill_nodes": 1, "decode_nodes": 1}
    )  # fmt: skip
    sc = Scenario.from_spec(registry, base.with_(storage_capacity="1B"))
    assert sc.store is not None
    w = sc.store.working_set_bytes
    more = _outcomes(base.with_(storage_capacity=f"{0.9375 * w:.17g}B"), registry)["basic"]
    less = _outcomes(base.with_(storage_capacity=f"{0.875 * w:.17g}B"), registry)["basic"]
    assert not more[1] <= COMPUTE  # a read link binds
    assert less[0] > more[0]


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
