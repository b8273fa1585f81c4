"""``dualpath-plan workload hitcurve``: the curve from LRU stack distances against a plain
OrderedDict LRU simulated at every capacity (written here, not the product's code), on random
traces, on every format and on the public fixtures; and bad input."""

from __future__ import annotations

import csv
import json
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualpath_plan.physics.hitcurve import BlockCollector, hit_curve, stack_distances
from dualpath_plan.physics.traces import Turn

DATA = Path(__file__).parent / "data" / "traces"
MOONCAKE = DATA / "mooncake_synthetic_trace.jsonl"
KVT = DATA / "kv-cache-tester"

Request = tuple[list[int], int, list[int]]  # block keys, prompt blocks, prompt tokens per block


def lru_hits(requests: list[Request], capacity: int) -> tuple[int, int]:
    """Hit blocks and tokens of a prefix cache that is a plain LRU of ``capacity`` blocks: a
    prompt block hits if it and all before it in its request are cached; every block is
    touched."""
    cache: OrderedDict[int, None] = OrderedDict()
    blocks = tokens = 0
    for keys, prompt, weights in requests:
        prefix = True
        for j, key in enumerate(keys):
            present = key in cache
            if j < prompt:
                prefix = prefix and present
                if prefix:
                    blocks += 1
                    tokens += weights[j]
            cache[key] = None
            cache.move_to_end(key)
            if len(cache) > capacity:
                cache.popitem(last=False)
    return blocks, tokens


def hashed_requests(rows: list[tuple[object, int, list[int]]], block: int) -> list[Request]:
    """(scope, input tokens, hash ids) -> requests, the tokens of block j being
    min((j+1)B, I-1) - min(jB, I-1) (the last prompt token is always computed)."""
    keys: dict[tuple[object, int], int] = {}
    out = []
    for scope, inp, ids in rows:
        ks = [keys.setdefault((scope, h), len(keys)) for h in ids]
        cap = inp - 1
        w = [min((j + 1) * block, cap) - min(j * block, cap) for j in range(len(ids))]
        out.append((ks, len(ks), w))
    return out


def check_curve(requests: list[Request], got_capacity, got_blocks, got_tokens) -> None:
    """The curve equals the simulation at every capacity from 0 past the distinct blocks."""
    distinct = len({k for keys, _, _ in requests for k in keys})
    caps = np.asarray(got_capacity)
    for c in range(distinct + 2):
        i = np.searchsorted(caps, c, "right") - 1
        assert (int(got_blocks[i]), int(got_tokens[i])) == lru_hits(requests, c), c


def collector_requests(col: BlockCollector) -> list[Request]:
    t = col.trace()
    out = []
    for r in range(t.requests):
        at = t.request == r
        keys = t.keys[at].tolist()
        out.append((keys, int(t.counted[at].sum()), t.tokens[at].tolist()))
    return out


# --- the algorithm -------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 12), max_size=80))
def test_stack_distances_are_lru_positions(keys: list[int]) -> None:
    stack: list[int] = []
    want = []
    for k in keys:
        want.append(stack.index(k) + 1 if k in stack else 0)
        if k in stack:
            stack.remove(k)
        stack.insert(0, k)
    assert stack_distances(np.asarray(keys, dtype=np.int64)).tolist() == want


hashed_trace = st.lists(
    st.tuples(
        st.sampled_from(["", "s1", "s2"]),  # hash scopes
        st.lists(st.integers(0, 15), min_size=1, max_size=12),  # shared prefixes, repeats
        st.integers(0, 15),  # tokens short of full blocks in the last one
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(hashed_trace, st.sampled_from([1, 4, 16]))
def test_curve_equals_an_ordered_dict_lru_at_every_capacity(rows, block: int) -> None:
    col = BlockCollector(block)
    plain = []
    for scope, ids, short in rows:
        inp = max(len(ids) * block - min(short, block - 1), 1)
        col.add(Turn("s", inp, 1, 0, None, False, ids, scope))
        plain.append((scope, inp, ids))
    reqs = hashed_requests(plain, block)
    curve = hit_curve(col.trace(), [("a", 2), ("b", 3), ("c", 1000)])
    check_curve(reqs, curve.capacity, curve.hit_blocks, curve.hit_tokens)
    assert curve.accesses == sum(len(k) for k, _, _ in reqs)
    assert curve.input_tokens == sum(inp for _, inp, _ in plain)
    # tiers: the hits through tier k are those of one cache of C1 + ... + Ck; all the hits are
    # served by some tier
    assert [t.hit_blocks_through for t in curve.tiers] == [
        lru_hits(reqs, c)[0] for c in (2, 5, 1005)
    ]
    assert sum(t.served_blocks for t in curve.tiers) == curve.tiers[-1].hit_blocks_through
    assert sum(t.served_tokens for t in curve.tiers) == curve.tiers[-1].hit_tokens_through


hashless_trace = st.lists(
    st.tuples(st.sampled_from("abc"), st.integers(1, 60), st.integers(0, 30), st.integers(0, 90)),
    min_size=1,
    max_size=25,
)


@settings(max_examples=150, deadline=None)
@given(hashless_trace, st.sampled_from([1, 4, 16]))
def test_hashless_sessions_grow_a_prefix(rows, block: int) -> None:
    """Without hashes a session's request shares the blocks wholly within the tokens it
    shares with the previous one; the curve is the simulation's on those blocks, and at an
    infinite capacity the hit is the shared context rounded down to whole blocks."""
    col = BlockCollector(block)
    previous: dict[str, int] = {}
    want_infinite = 0
    for session, inp, out, shared_asked in rows:
        shared = min(shared_asked, inp)
        col.add(Turn(session, inp, out, 0, None, False, None, session, shared))
        usable = min(shared, previous.get(session, 0)) // block * block
        want_infinite += min(usable, inp - 1)
        previous[session] = inp + out
    curve = hit_curve(col.trace())
    check_curve(collector_requests(col), curve.capacity, curve.hit_blocks, curve.hit_tokens)
    assert curve.hit_tokens[-1] == want_infinite


# --- every format, through the command -----------------------------------------------------


def run(cli, *args: str) -> dict:
    result = cli("workload", "hitcurve", *args, "--json")
    assert result.code == 0, result.err
    return result.json()


def steps(cli, tmp_path: Path, *args: str) -> tuple[list[int], list[int], list[int]]:
    out = tmp_path / "curve.csv"
    result = cli("workload", "hitcurve", *args, "--out", str(out))
    assert result.code == 0, result.err
    rows = list(csv.DictReader(out.open()))
    return (
        [int(r["capacity_blocks"]) for r in rows],
        [int(r["hit_blocks"]) for r in rows],
        [int(r["hit_tokens"]) for r in rows],
    )


def test_mooncake_fixture_equals_the_simulation(cli, tmp_path: Path) -> None:
    rows = [json.loads(line) for line in MOONCAKE.read_text().splitlines() if line.strip()]
    reqs = hashed_requests([(0, r["input_length"], r["hash_ids"]) for r in rows], 512)
    caps, blocks, tokens = steps(cli, tmp_path, str(MOONCAKE), "--format", "mooncake")
    # every capacity of the simulation is too slow here: a spread, each step's edges among them
    tried = sorted({0, 1, 7, 100, 1000, 5000, 20_000, 43_924, 10**6} | set(caps[1::97]))
    tried += [c - 1 for c in caps[1::97]]
    for c in tried:
        i = np.searchsorted(caps, c, "right") - 1
        assert (blocks[i], tokens[i]) == lru_hits(reqs, c), c
    got = run(cli, str(MOONCAKE), "--format", "mooncake", "--blocks", "1000,20000")
    assert [p["hit_blocks"] for p in got["at"]] == [
        lru_hits(reqs, 1000)[0],
        lru_hits(reqs, 20000)[0],
    ]
    # at an infinite capacity, the import's hit rate
    imported = cli("workload", "import", str(MOONCAKE), "--format", "mooncake", "--json").json()
    assert got["infinite"]["token_hit_rate"] == pytest.approx(imported["hit_rate"], abs=1e-12)


def test_kv_cache_tester_fixture_equals_the_simulation(cli, tmp_path: Path) -> None:
    plain = []
    for path in sorted(KVT.glob("*.json")):
        data = json.loads(path.read_text())

        def walk(requests: list[dict], scope: str = path.stem) -> None:
            for r in requests:
                if r.get("type") == "subagent":
                    walk(r["requests"], scope)
                else:
                    plain.append((scope, r["in"], r["hash_ids"]))

        walk(data["requests"])
    reqs = hashed_requests(plain, 64)
    caps, blocks, tokens = steps(cli, tmp_path, str(KVT), "--format", "kv-cache-tester")
    distinct = len({k for keys, _, _ in reqs for k in keys})
    assert len(caps) > 10
    for c in sorted(set(range(0, distinct + 2, 37)) | set(caps) | {c - 1 for c in caps[1:]}):
        i = np.searchsorted(caps, c, "right") - 1
        assert (blocks[i], tokens[i]) == lru_hits(reqs, c), c


def test_bailian_scopes_are_chat_trees(cli, tmp_path: Path) -> None:
    rows = [
        (1, -1, 40, [10, 11, 12]),
        (2, -1, 40, [10, 11, 12]),
        (3, 1, 70, [10, 11, 12, 13, 14]),
        (4, 3, 90, [10, 11, 12, 13, 14, 15]),
        (5, 2, 30, [10, 20]),
    ]
    path = tmp_path / "bailian.jsonl"
    lines = [
        {"chat_id": c, "parent_chat_id": p, "timestamp": i, "input_length": n,
         "output_length": 3, "turn": 1, "hash_ids": ids}
        for i, (c, p, n, ids) in enumerate(rows)
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    root: dict[int, int] = {}
    for c, p, _, _ in rows:
        root[c] = root.get(p, c)
    reqs = hashed_requests([(root[c], n, ids) for c, _, n, ids in rows], 16)
    check_curve(reqs, *steps(cli, tmp_path, str(path), "--format", "bailian"))


BURST_HEADER = "Timestamp,Session ID,Model,Request tokens,Response tokens"


def test_burstgpt_and_csv_derive_blocks_from_the_session_prefix(cli, tmp_path: Path) -> None:
    burst = tmp_path / "burst.csv"
    burst.write_text(
        BURST_HEADER
        + "\n5,a,ChatGPT,100,20\n6,b,GPT-4,50,10\n9,a,ChatGPT,300,30\n12,a,ChatGPT,200,5\n"
    )
    got = run(cli, str(burst), "--format", "burstgpt", "--block-size", "16")
    # shared: 0, 0, min(120, 300) = 120 -> 7 blocks (112 tokens), min(330, 200) = 200 -> 12
    # blocks (192 tokens; at most 199)
    assert got["infinite"]["hit_tokens"] == 112 + 192
    assert got["prompt_blocks"] == 7 + 4 + 19 + 13
    assert any("growing prefix" in n for n in got["notes"])
    trace = tmp_path / "t.csv"
    trace.write_text(
        "trajectory_id,append_tokens,generated_tokens\nx,40,8\nx,10,4\ny,5,5\nx,30,2\n"
    )
    got = run(cli, str(trace), "--format", "csv", "--block-size", "8")
    # x: contexts 0, 48, 62 (40+8, then +10+4): hits 48 and 56 tokens
    assert got["infinite"]["hit_tokens"] == 48 + 56
    at = run(cli, str(trace), "--format", "csv", "--block-size", "8", "--blocks", "0,3")
    assert [p["hit_blocks"] for p in at["at"]] == [0, 0]


def test_tiers_in_bytes_and_the_files_written(cli, tmp_path: Path) -> None:
    got = run(cli, str(MOONCAKE), "--format", "mooncake", "--tiers", "hbm:1000,dram:64GB,ssd:2TB")
    per_block = got["block_bytes"]
    assert [t["capacity_blocks"] for t in got["tiers"]] == [
        1000, int(64e9 // per_block), int(2e12 // per_block)
    ]  # fmt: skip
    served = sum(t["served_token_share"] for t in got["tiers"])
    assert served == pytest.approx(got["tiers"][-1]["token_hit_rate_through"])
    svg = tmp_path / "c.svg"
    done = cli("workload", "hitcurve", str(MOONCAKE), "--format", "mooncake", "--out", str(svg))
    assert done.code == 0 and svg.read_text().startswith("<svg")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--blocks", "10,x"], "--blocks"),
        (["--blocks", "-5"], "--blocks"),
        (["--tiers", "hbm"], "--tiers"),
        (["--tiers", "hbm:12QB"], "--tiers"),
        (["--tiers", "hbm:1B"], "holds no"),
        (["--tiers", "a:1,a:2"], "twice"),
        (["--out", "curve.txt"], "--out"),
        (["--model", "no-such-model"], "no-such-model"),
        (["--block-size", "0"], "--block-size"),
    ],
)
def test_bad_input_is_one_error_line(cli, tmp_path: Path, args: list[str], says: str) -> None:
    fixed = [str(tmp_path / a) if a == "curve.txt" else a for a in args]
    result = cli("workload", "hitcurve", str(MOONCAKE), "--format", "mooncake", *fixed)
    assert result.code == 2
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and says in lines[0]
    assert not (tmp_path / "curve.txt").exists()


def test_a_bad_line_leaves_no_output(cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    good = MOONCAKE.read_text().splitlines()[:5]
    bad.write_text("\n".join([*good, '{"timestamp": 1, "input_length": "x"}']) + "\n")
    out = tmp_path / "c.csv"
    result = cli("workload", "hitcurve", str(bad), "--format", "mooncake", "--out", str(out))
    assert result.code == 2 and result.err.startswith("error:") and not out.exists()
