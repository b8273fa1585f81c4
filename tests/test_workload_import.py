"""``dualpath-plan workload import``: every format, against an independent prefix-hash
computation written here (not the product's code), and every kind of bad input."""

from __future__ import annotations

import itertools
import json
import math
import tomllib
from pathlib import Path

import pytest

from dualpath_plan.physics.workload import load_trace
from dualpath_plan.profiles.registry import read_profile_file

DATA = Path(__file__).parent / "data" / "traces"
MOONCAKE = DATA / "mooncake_synthetic_trace.jsonl"
KVT = DATA / "kv-cache-tester"


# --- the independent computation -----------------------------------------------------------


def reference_hits(requests: list[tuple[object, int, list[int]]], block: int) -> list[int]:
    """Per request (scope, input tokens, hash ids): the longest prefix of its blocks seen
    before in its scope, times the block size, capped at the input; then all its blocks are
    seen."""
    seen: dict[object, set[int]] = {}
    hits = []
    for scope, inp, ids in requests:
        s = seen.setdefault(scope, set())
        k = 0
        while k < len(ids) and ids[k] in s:
            k += 1
        hits.append(min(k * block, inp))
        s.update(ids)
    return hits


def run_import(cli, *args: str) -> dict:
    result = cli("workload", "import", *args, "--json")
    assert result.code == 0, result.err
    return result.json()


# --- must reach ----------------------------------------------------------------------------


def test_mooncake_matches_an_independent_prefix_hash_computation(cli) -> None:
    rows = [json.loads(line) for line in MOONCAKE.read_text().splitlines() if line.strip()]
    hits = reference_hits([(0, r["input_length"], r["hash_ids"]) for r in rows], 512)
    inputs = sum(r["input_length"] for r in rows)
    ref_hit_rate = sum(hits) / inputs
    ref_input = inputs / len(rows)
    ref_output = sum(r["output_length"] for r in rows) / len(rows)

    got = run_import(cli, str(MOONCAKE), "--format", "mooncake")
    assert got["requests"] == len(rows) == 3993
    assert abs(got["hit_rate"] - ref_hit_rate) < 0.001  # 0.1 percentage point
    assert abs(got["mean_input_tokens"] - ref_input) < 1
    assert abs(got["mean_context_tokens"] + got["mean_append_tokens"] - ref_input) < 1
    assert abs(got["mean_generated_tokens"] - ref_output) < 1
    # No session ids: every request its own one-turn session, and the summary says so.
    assert got["sessions"] == len(rows)
    assert got["turns_per_session"]["max"] == 1
    assert any("no turn chaining is invented" in n for n in got["notes"])
    # Arrivals from the timestamps (ms): requests over the span, the gaps' cv.
    ts = sorted(r["timestamp"] / 1000 for r in rows)
    gaps = [b - a for a, b in itertools.pairwise(ts)]
    mean = sum(gaps) / len(gaps)
    cv = math.sqrt(sum((g - mean) ** 2 for g in gaps) / len(gaps)) / mean
    assert got["arrival_rate_per_s"] == pytest.approx((len(ts) - 1) / (ts[-1] - ts[0]))
    assert got["arrival_cv"] == pytest.approx(cv)


@pytest.mark.parametrize("name", ["trace_0002", "trace_0019"])
def test_a_kv_cache_tester_session_matches_exactly(cli, name: str) -> None:
    session = json.loads((KVT / f"{name}.json").read_text())
    requests = [r for r in session["requests"] if r.get("type") != "subagent"]
    hits = reference_hits([(0, r["in"], r["hash_ids"]) for r in requests], session["block_size"])
    inputs = sum(r["in"] for r in requests)
    got = run_import(cli, str(KVT / f"{name}.json"), "--format", "kv-cache-tester")
    assert got["sessions"] == 1
    assert got["turns_per_session"]["max"] == len(requests)
    assert got["requests"] == len(requests)
    assert got["hit_rate"] == sum(hits) / inputs
    assert got["mean_append_tokens"] == (inputs - sum(hits)) / len(requests)
    assert got["block_size"] == 64
    assert got["arrival_rate_per_s"] is None  # sessions share no clock


def test_subagents_are_sessions_of_their_own(cli, tmp_path: Path) -> None:
    main = [
        {"t": 0, "type": "n", "in": 300, "out": 10, "hash_ids": [1, 2, 3]},
        {
            "type": "subagent",
            "requests": [
                {"t": 1, "type": "n", "in": 200, "out": 5, "hash_ids": [1, 9]},
                {"t": 2, "type": "n", "in": 300, "out": 5, "hash_ids": [1, 9, 10]},
            ],
        },
        {"t": 3, "type": "n", "in": 450, "out": 20, "hash_ids": [1, 2, 3, 4]},
    ]
    session = {"id": "s1", "block_size": 100, "hash_id_scope": "local", "requests": main}
    path = tmp_path / "s1.json"
    path.write_text(json.dumps(session))
    got = run_import(cli, str(path), "--format", "kv-cache-tester")
    # One file scope: main 0 then 300 of 450; sub-agent 100 of 200 (block 1), 200 of 300.
    assert got["main_agents"]["requests"] == 2 and got["main_agents"]["sessions"] == 1
    assert got["main_agents"]["hit_rate"] == pytest.approx(300 / 750)
    assert got["subagents"]["requests"] == 2 and got["subagents"]["sessions"] == 1
    assert got["subagents"]["hit_rate"] == pytest.approx(300 / 500)
    assert got["sessions"] == 2
    out = tmp_path / "out"
    run_import(cli, str(path), "--format", "kv-cache-tester", "--out", str(out))
    rows = (out / "workload" / "s1.csv").read_text().splitlines()
    assert rows == [
        "trajectory_id,append_tokens,generated_tokens,context_tokens",
        "s1,300,10,0",
        "s1/sub-1,100,5,100",
        "s1/sub-1,100,5,200",
        "s1,150,20,300",
    ]


def test_a_folder_of_sessions_is_one_workload_that_size_runs(cli, tmp_path: Path) -> None:
    out = tmp_path / "out"
    got = run_import(cli, str(KVT), "--format", "kv-cache-tester", "--out", str(out), "--id", "cc")
    assert got["sessions"] == 2 and got["turns_per_session"]["max"] == 33
    assert got["written"] == [str(out / "workload" / "cc.toml"), str(out / "workload" / "cc.csv")]
    profile = read_profile_file(out / "workload" / "cc.toml")
    assert profile.trace_file == "cc.csv" and profile.turns_spread == 0.0
    assert profile.turns == pytest.approx((33 + 24) / 2)
    assert profile.context_tokens == pytest.approx(got["mean_context_tokens"])
    assert profile.arrival_cv == 1.0 and "arrival_cv" in profile.unconfirmed
    valid = cli("profiles", "validate", str(out / "workload"))
    assert valid.code == 0 and "no source" not in valid.out, valid.out
    mix = load_trace(out / "workload" / "cc.csv")
    assert mix.hit_rate == pytest.approx(got["hit_rate"], rel=1e-12)
    size = cli("size", "--workload", "cc", "--profiles", str(out), "--json")
    assert size.code == 0, size.err
    text = cli("size", "--workload", "cc", "--profiles", str(out))
    assert "trace cc.csv: 28.5 turns, longest 33" in text.out
    shown = cli("profiles", "show", "cc", "--profiles", str(out), "--json").json()
    derived = {d["name"]: d["value"] for d in shown["derived"]}
    assert derived["trace_turns_per_trajectory"] == pytest.approx(28.5)
    assert derived["hit_rate"] == pytest.approx(got["hit_rate"])
    assert derived["trace_append_tokens"] == pytest.approx(got["mean_append_tokens"])


def test_profiles_show_uses_the_trace_not_the_dummy_means(cli, tmp_path: Path) -> None:
    folder = tmp_path / "workload"
    folder.mkdir()
    (folder / "t.csv").write_text(
        "trajectory_id,append_tokens,generated_tokens,context_tokens\na,100,10,900\nb,300,30,700\n"
    )
    (folder / "t.toml").write_text(
        'kind = "workload"\nname = "t"\nturns = 1\nappend_tokens = 1\ngenerated_tokens = 1\n'
        'context_tokens = 1\ntrace_file = "t.csv"\n'
    )
    shown = cli("profiles", "show", "t", "--profiles", str(tmp_path), "--json").json()
    derived = {d["name"]: d["value"] for d in shown["derived"]}
    assert derived["trace_context_tokens"] == 800
    assert derived["trace_append_tokens"] == 200
    assert derived["hit_rate"] == pytest.approx(1600 / 2000)


def test_mooncake_profile_loads_and_sizes(cli, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_import(cli, str(MOONCAKE), "--format", "mooncake", "--out", str(out), "--id", "mc")
    data = tomllib.loads((out / "workload" / "mc.toml").read_text())
    assert data["turns"] == 1.0 and data["trajectories"] == 3993
    assert (
        "arrival_rate_per_s" in data["sources"] and "workload import" in data["sources"]["turns"][0]
    )
    # 9 of its requests are longer than DeepSeek-V3.2's window: said as such ...
    over = cli("size", "--workload", "mc", "--profiles", str(out))
    assert over.code == 2 and "mc.csv: line" in over.err and "context_window_tokens" in over.err
    # ... and with a longer window it runs.
    ok = cli(
        "size",
        "--workload",
        "mc",
        "--profiles",
        str(out),
        "--set",
        "model.context_window_tokens=200000",
    )
    assert ok.code == 0, ok.err


# --- the other formats ---------------------------------------------------------------------


def bailian_rows() -> list[dict]:
    def r(chat, parent, ts, inp, out, turn, ids):
        return {
            "chat_id": chat,
            "parent_chat_id": parent,
            "timestamp": ts,
            "input_length": inp,
            "output_length": out,
            "type": "text",
            "turn": turn,
            "hash_ids": ids,
        }

    return [
        r(1, -1, 0.0, 40, 8, 1, [10, 11, 12]),
        r(2, -1, 0.5, 40, 4, 1, [10, 11, 12]),  # another tree: its own scope, no hit
        r(3, 1, 2.0, 70, 5, 2, [10, 11, 12, 13, 14]),  # tree 1: 3 blocks of 16 hit
        r(4, 3, 3.0, 90, 6, 3, [10, 11, 12, 13, 14, 15]),  # tree 1: 5 blocks
        r(5, 2, 3.5, 30, 1, 2, [10, 20]),  # tree 2: 1 block
        r(6, 77, 6.0, 20, 1, 2, [10]),  # parent not in the file: a tree of its own
    ]


def test_bailian_chat_trees(cli, tmp_path: Path) -> None:
    rows = bailian_rows()
    path = tmp_path / "bailian.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    root = {}
    for r in rows:
        root[r["chat_id"]] = root.get(r["parent_chat_id"], r["chat_id"])
    hits = reference_hits(
        [(root[r["chat_id"]], r["input_length"], r["hash_ids"]) for r in rows], 16
    )
    assert hits == [0, 0, 48, 80, 16, 0]
    got = run_import(cli, str(path), "--format", "bailian")
    assert got["sessions"] == 3
    assert got["turns_per_session"] == {"mean": 2.0, "p50": 2.0, "p90": 3.0, "max": 3}
    assert got["hit_rate"] == pytest.approx(sum(hits) / sum(r["input_length"] for r in rows))
    assert got["arrival_rate_per_s"] == pytest.approx(5 / 6)
    assert any("not earlier in the file" in n for n in got["notes"])


BURST_HEADER = (
    "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type"
)


def test_burstgpt_states_its_assumption(cli, tmp_path: Path) -> None:
    path = tmp_path / "burst.csv"
    path.write_text(
        BURST_HEADER
        + "\n5,a,1.0,ChatGPT,100,20,120,Conversation log"
        + "\n6,b,1.0,GPT-4,50,10,60,Conversation log"
        + "\n9,a,2.0,ChatGPT,300,30,330,Conversation log"
        + "\n12,a,2.0,ChatGPT,200,5,205,Conversation log\n"
    )
    got = run_import(cli, str(path), "--format", "burstgpt")
    # hit = min(previous request + response, request): 0, 0, 120, 199 (at most request - 1).
    assert got["mean_context_tokens"] == pytest.approx((120 + 199) / 4)
    assert got["sessions"] == 2 and got["turns_per_session"]["max"] == 3
    assert any("previous prompt and response are cached" in n for n in got["notes"])
    text = cli("workload", "import", str(path), "--format", "burstgpt")
    assert "previous prompt and response are cached" in text.out


def test_our_csv_is_validated_and_normalized(cli, tmp_path: Path) -> None:
    path = tmp_path / "turns.csv"
    path.write_text("trajectory_id,append_tokens,generated_tokens\na,100,10\na,50,5\nb,40,4\n")
    out = tmp_path / "out"
    got = run_import(cli, str(path), "--format", "csv", "--out", str(out))
    assert got["sessions"] == 2 and got["requests"] == 3
    assert (out / "workload" / "turns.csv").read_text().splitlines()[1:] == [
        "a,100,10,0",
        "a,50,5,110",
        "b,40,4,0",
    ]
    assert load_trace(path).hit_rate == pytest.approx(got["hit_rate"])


def test_without_out_nothing_is_written(cli, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    text = cli("workload", "import", str(KVT / "trace_0019.json"), "--format", "kv-cache-tester")
    assert text.code == 0 and "nothing written" in text.out
    assert list(tmp_path.iterdir()) == []


# --- bad input -----------------------------------------------------------------------------


def _mooncake_line(**change) -> str:
    row = {"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [1, 2]}
    row.update(change)
    return json.dumps({k: v for k, v in row.items() if v is not None})


GOOD = _mooncake_line()

HOSTILE = [
    # (format, file name, content, what the one line must name)
    ("mooncake", "t.jsonl", GOOD + "\n{not json\n", ["t.jsonl", "line 2", "not JSON"]),
    (
        "mooncake",
        "t.jsonl",
        GOOD + "\n" + _mooncake_line(output_length=None),
        ["line 2", "'output_length'", "missing"],
    ),
    ("mooncake", "t.jsonl", _mooncake_line(input_length=-5), ["line 1", "'input_length'"]),
    ("mooncake", "t.jsonl", _mooncake_line(output_length=-1), ["line 1", "'output_length'"]),
    (
        "mooncake",
        "t.jsonl",
        _mooncake_line(hash_ids=[1, 2, 3]),
        ["line 1", "'hash_ids'", "expected 1 to 2 hash ids"],
    ),
    ("mooncake", "t.jsonl", _mooncake_line(hash_ids=[1, "x"]), ["line 1", "'hash_ids'"]),
    ("mooncake", "t.jsonl", _mooncake_line(input_length=1e999), ["line 1", "finite"]),
    ("mooncake", "t.jsonl", _mooncake_line(timestamp=True), ["line 1", "'timestamp'"]),
    (
        "mooncake",
        "t.jsonl",
        GOOD + "\n" + _mooncake_line(session_id="a"),
        ["line 2", "'session_id'"],
    ),
    ("mooncake", "t.jsonl", "", ["t.jsonl", "no requests"]),
    ("mooncake", "t.jsonl", "[1, 2]\n", ["line 1", "JSON object"]),
    ("bailian", "b.jsonl", json.dumps({"chat_id": 1}), ["line 1", "missing"]),
    (
        "bailian",
        "b.jsonl",
        "\n".join(json.dumps(r) for r in bailian_rows()[:1] * 2),
        ["line 2", "'chat_id'", "twice"],
    ),
    (
        "burstgpt",
        "g.csv",
        BURST_HEADER + "\n1,a,1,Claude,10,1,11,x\n",
        ["line 2", "'Model'", "unknown model"],
    ),
    ("burstgpt", "g.csv", BURST_HEADER + "\n1,a,1,GPT-4,10,1,12,x\n", ["line 2", "'Total tokens'"]),
    (
        "burstgpt",
        "g.csv",
        BURST_HEADER + "\n1,a,1,GPT-4,-10,1,-9,x\n",
        ["line 2", "'Request tokens'"],
    ),
    (
        "burstgpt",
        "g.csv",
        "Timestamp,Model\n1,GPT-4\n",
        ["g.csv", "'Request tokens'", "missing column"],
    ),
    (
        "csv",
        "c.csv",
        "trajectory_id,append_tokens,generated_tokens\na,-1,3\n",
        ["line 2", "'append_tokens'"],
    ),
    (
        "kv-cache-tester",
        "k.json",
        json.dumps(
            {"block_size": 64, "hash_id_scope": "local", "requests": [{"in": 10, "out": 1}]}
        ),
        ["k.json", "'requests[0].hash_ids'", "missing"],
    ),
    (
        "kv-cache-tester",
        "k.json",
        json.dumps(
            {
                "block_size": 64,
                "hash_id_scope": "local",
                "requests": [{"in": 10, "out": 1, "hash_ids": [1, 2]}],
            }
        ),
        ["k.json", "'requests[0].hash_ids'", "expected 0 to 1 hash ids"],
    ),
    (
        "kv-cache-tester",
        "k.json",
        json.dumps(
            {
                "block_size": 64,
                "hash_id_scope": "local",
                "requests": [{"in": 10, "out": 1, "hash_ids": [], "model": 5}],
            }
        ),
        ["k.json", "'requests[0].model'"],
    ),
    ("kv-cache-tester", "k.json", "{", ["k.json", "not JSON"]),
    ("nonsense", "t.jsonl", GOOD, ["'--format'", "unknown format"]),
]


@pytest.mark.parametrize(("fmt", "name", "content", "named"), HOSTILE)
def test_bad_input_is_one_line_and_leaves_nothing(cli, tmp_path, fmt, name, content, named) -> None:
    path = tmp_path / name
    path.write_text(content)
    out = tmp_path / "out"
    result = cli("workload", "import", str(path), "--format", fmt, "--out", str(out))
    assert result.code == 2, (result.out, result.err)
    assert result.err.startswith("error: ") and result.err.count("\n") == 1, result.err
    for part in named:
        assert part in result.err, result.err
    assert not out.exists()


def test_a_binary_file_is_one_line(cli, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(GOOD.encode() + b"\n\x00\xff\xfe binary\n")
    result = cli(
        "workload", "import", str(path), "--format", "mooncake", "--out", str(tmp_path / "o")
    )
    assert result.code == 2 and "line 2" in result.err and "not UTF-8" in result.err
    assert result.err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_a_failed_import_leaves_the_previous_one_intact(cli, tmp_path: Path) -> None:
    out = tmp_path / "out"
    path = tmp_path / "t.jsonl"
    path.write_text(GOOD + "\n" + _mooncake_line(input_length=1500, hash_ids=[1, 2, 3]) + "\n")
    run_import(cli, str(path), "--format", "mooncake", "--out", str(out))
    before = {p.name: p.read_bytes() for p in (out / "workload").iterdir()}
    path.write_text(GOOD + "\n" * 5 + "{bad\n")
    result = cli("workload", "import", str(path), "--format", "mooncake", "--out", str(out))
    assert result.code == 2 and "line 6" in result.err
    assert {p.name: p.read_bytes() for p in (out / "workload").iterdir()} == before


def test_options_that_do_not_apply_are_refused(cli, tmp_path: Path) -> None:
    path = tmp_path / "g.csv"
    path.write_text(BURST_HEADER + "\n1,a,1,GPT-4,10,1,11,x\n")
    result = cli("workload", "import", str(path), "--format", "burstgpt", "--block-size", "16")
    assert result.code == 2 and "'--block-size'" in result.err
    result = cli("workload", "import", str(path), str(path), "--format", "burstgpt")
    assert result.code == 2 and "reads one" in result.err
    result = cli("workload", "import", str(path), "--format", "burstgpt", "--id", "Bad Id")
    assert result.code == 2 and "'--id'" in result.err


def test_burstgpt_without_a_session_column_is_one_turn_sessions(cli, tmp_path) -> None:
    """The first public BurstGPT release has no Session ID: each request is its own session,
    said plainly, nothing cached."""
    path = tmp_path / "b1.csv"
    path.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n45,ChatGPT,1087,17,1104,Conversation log\n"
    )
    result = cli("workload", "import", str(path), "--format", "burstgpt", "--json")
    assert result.code == 0, result.err
    text = json.dumps(result.json())
    assert "one-turn session of its own" in text
    shown = cli("workload", "import", str(path), "--format", "burstgpt")
    assert "no 'Session ID' column" in shown.out


def test_a_hash_list_shorter_than_the_input_is_refused(cli, tmp_path) -> None:
    """Fewer hash ids than the input's full blocks would undercount its hit."""
    path = tmp_path / "short.jsonl"
    path.write_text(
        '{"timestamp": 0, "input_length": 10000, "output_length": 5, "hash_ids": [1]}\n'
    )
    result = cli("workload", "import", str(path), "--format", "mooncake")
    assert result.code == 2 and "expected 19 to 20 hash ids" in result.err
    assert "line 1" in result.err and "'hash_ids'" in result.err


def test_a_trace_at_one_time_says_why_no_rate_is_derived(cli, tmp_path) -> None:
    # Every request at one timestamp was described as "no common clock" (found in a trial).
    src = Path(__file__).parent / "data" / "traces" / "mooncake_synthetic_trace.jsonl"
    rows = [json.loads(x) for x in src.read_text().splitlines()[:20]]
    trace = tmp_path / "eq.jsonl"
    trace.write_text("".join(json.dumps({**r, "timestamp": 5}) + "\n" for r in rows))
    out = cli("workload", "import", str(trace), "--format", "mooncake").out
    assert "every request has the same time" in out and "no common clock" not in out


def test_a_field_the_trace_gives_cannot_be_set(cli, tmp_path: Path) -> None:
    """On a trace workload the means describe the trace and set nothing: --set and a sweep
    axis on them were checked and then ignored (found in a trial: context 10 to 100,000 gave
    one throughput). They are refused, naming the trace; a field the model reads is taken."""
    path = tmp_path / "turns.csv"
    path.write_text("trajectory_id,append_tokens,generated_tokens\na,100,10\na,50,5\nb,40,4\n")
    out = tmp_path / "out"
    run_import(cli, str(path), "--format", "csv", "--out", str(out), "--id", "t")
    common = ("--profiles", str(out), "--workload", "t")
    from dualpath_plan.profiles.schemas import WorkloadProfile

    for name in WorkloadProfile.TRACE_GIVEN:
        result = cli("size", *common, "--set", f"workload.{name}=1")
        assert result.code == 2, (name, result.out)
        assert f"its {name} describes the trace and sets nothing" in result.err
    swept = cli("sweep", *common, "--grid", "workload.context_tokens=10,1000")
    assert swept.code == 2 and "reads its turns from t.csv" in swept.err
    base = cli("size", *common, "--json").json()
    slow = cli("size", *common, "--set", "workload.tool_latency_s=100", "--json").json()
    assert slow["modes"]["dualpath"]["jct_s"] > base["modes"]["dualpath"]["jct_s"]


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        # A misspelt column was ignored (the context then summed from earlier turns).
        (
            "trajectory_id,append_tokens,generated_tokens,contxt_tokens\na,100,10,0\n",
            "field 'contxt_tokens': unknown column; a trace has trajectory_id, append_tokens, "
            "generated_tokens[, context_tokens]; did you mean context_tokens?",
        ),
        # Fractional tokens were taken and shown rounded.
        (
            "trajectory_id,append_tokens,generated_tokens\na,1.5,10\n",
            "line 2: field 'append_tokens': expected a whole number, got '1.5'",
        ),
    ],
)
def test_a_trace_has_its_columns_and_whole_tokens(cli, tmp_path: Path, text, expect) -> None:
    path = tmp_path / "turns.csv"
    path.write_text(text)
    result = cli("workload", "import", str(path), "--format", "csv")
    assert result.code == 2 and expect in result.err, result.err


def test_kv_cache_tester_files_share_one_hash_scope(cli, tmp_path: Path) -> None:
    """Mixed hash_id_scope across files was resolved one way silently (the hit rate moved from
    65% to 82% with the files' order): one scope, as one block size (found in a trial)."""
    data = json.loads((KVT / "trace_0002.json").read_text())
    folder = tmp_path / "sessions"
    folder.mkdir()
    for name, scope in (("a", "local"), ("b", "global")):
        (folder / f"{name}.json").write_text(
            json.dumps({**data, "id": name, "hash_id_scope": scope})
        )
    result = cli("workload", "import", str(folder), "--format", "kv-cache-tester")
    assert result.code == 2
    assert "field 'hash_id_scope': 'global', but an earlier session has 'local'" in result.err


def test_a_session_field_named_must_be_in_the_trace(cli, tmp_path: Path) -> None:
    """--session-field naming a field the trace lacks is an error in every format (Mooncake
    read it as one-turn sessions with a note, exit 0; BurstGPT refused it: found in a trial);
    without the option a trace without sessions is still one-turn sessions, said so."""
    trace = str(DATA / "mooncake_synthetic_trace.jsonl")
    result = cli("workload", "import", trace, "--format", "mooncake", "--session-field", "nosuch")
    assert (
        result.code == 2
        and "line 1: field 'nosuch': missing; --session-field names it" in result.err
    )
    burst = tmp_path / "burst.csv"
    burst.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "0,ChatGPT,100,10,110,Conversation log\n"
    )
    other = cli(
        "workload", "import", str(burst), "--format", "burstgpt", "--session-field", "nosuch"
    )
    assert other.code == 2 and "nosuch" in other.err


@pytest.mark.parametrize("command", ["import", "hitcurve"])
def test_an_empty_session_field_is_refused_by_its_option(cli, command) -> None:
    # '' was read as the format's default field and the error named 'session_id', not given.
    result = cli("workload", command, str(MOONCAKE), "--format", "mooncake", "--session-field", "")
    assert result.code == 2, result.err
    assert result.err.strip() == (
        "error: field '--session-field': expected a field name, got an empty one"
    )
