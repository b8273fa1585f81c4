"""``dualpath-plan simulate`` as a command: its JSON (same seed, same bytes), its files (the
per-window CSV, the SVG chart, the per-turn JSON Lines log: written whole or not at all, never
over an input), ``--compare`` and bad input (one line, exit 2)."""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import trace_workload

# A small run: 48 agents of paper-64k shortened to 12 turns (seconds, not minutes).
SMALL = ("--agents", "48", "--set", "workload.turns=12")


def test_same_seed_gives_the_same_json_bytes(cli) -> None:
    a = cli("simulate", *SMALL, "--json")
    b = cli("simulate", *SMALL, "--json")
    c = cli("simulate", *SMALL, "--json", "--seed", "3")
    assert a.code == b.code == c.code == 0, a.err
    assert a.out == b.out and a.out != c.out
    data = a.json()
    for key in ("throughput_turns_per_s", "jct_s", "snic_max_over_avg"):
        assert data[key] is not None and data[key] > 0, key
    for key in ("ttft_s", "tpot_s", "agent_jct_s"):
        d = data[key]
        assert 0 < d["p50"] <= d["p90"] <= d["p99"] and d["mean"] > 0, key
    assert data["turns"] == data["ttft_s"]["count"] and data["load"]["kind"] == "offline"
    assert "wall" not in a.out  # wall-clock figures would break the byte identity
    online = cli(
        "simulate", "--set", "workload.turns=12", "--aps", "0.5", "--duration", "400",
        "--json",
    )  # fmt: skip
    assert online.code == 0, online.err
    load = online.json()["load"]
    assert load["kind"] == "online" and load["aps"] == 0.5 and load["warmup_s"] > 0


def test_outputs_are_whole_files(cli, tmp_path: Path) -> None:
    series, chart, log = tmp_path / "s.csv", tmp_path / "s.svg", tmp_path / "turns.jsonl"
    r = cli("simulate", *SMALL, "--out", str(series), "--trace-out", str(log), "--json")
    assert r.code == 0, r.err
    turns = r.json()["turns"]
    rows = list(csv.DictReader(io.StringIO(series.read_text())))
    assert rows and {"time_s", "turns_per_s", "kv_working_set_gbyte"} <= set(rows[0])
    done = sum(float(x["turns_per_s"]) * float(x["window_s"]) for x in rows)
    assert done == pytest.approx(turns)
    assert float(rows[-1]["time_s"]) == pytest.approx(
        r.json()["sim_time_s"], rel=1e-5
    )  # last event
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == turns
    assert {"agent", "turn", "ttft_s", "tpot_s", "read_on"} <= set(records[0])
    assert cli("simulate", *SMALL, "--out", str(chart)).code == 0
    root = ET.fromstring(chart.read_text())
    assert root.tag.endswith("svg") and len(root.findall(".//{*}polyline")) == 2


def test_compare_gives_both_models_and_the_error(cli) -> None:
    off = cli("simulate", *SMALL, "--compare", "--json").json()["analytical"]
    assert off["throughput_turns_per_s"] > 0 and off["error"]["throughput"] is not None
    on = cli(
        "simulate", "--set", "workload.turns=12", "--aps", "0.5", "--duration", "400",
        "--compare", "--json",
    ).json()["analytical"]  # fmt: skip
    assert on["source"].startswith("size --aps") and on["ttft_s"] > 0
    text = cli("simulate", *SMALL, "--compare").out
    assert "simulation vs analytical" in text and "efficiencies:" in text


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("--aps", "-1"), "--aps"),
        (("--aps", "nan"), "--aps"),
        (("--duration", "100"), "--duration"),
        (("--aps", "0.1", "--duration", "100", "--warmup", "200"), "--warmup"),
        (("--scheduler", "fastest"), "--scheduler"),
        (("--mode", "turbo"), "--mode"),
        (("--window", "0"), "--window"),
        (("--agents", "0"), "--agents"),
        (("--out", "series.txt"), "--out"),
        (("--trace-out", "turns.csv"), "--trace-out"),
        (("--seed", "-1"), "--seed"),
        (("--window", "0.001"), "--window"),  # millions of windows: refused before the run
        # a link of 1e-9 Gb/s (a run of years): refused as a slip before any run
        (("--set", "node.snic_gbit_s=1e-9", "--agents", "8"), "snic_gbit_s"),
        (("--out", "missing/series.csv"), "--out"),  # found before the run, not after
    ],
)
def test_bad_input_is_one_line(cli, tmp_path: Path, monkeypatch, args, flag) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "series.txt").write_text("keep")
    r = cli("simulate", *args)
    assert r.code == 2, (args, r.out, r.err)
    assert r.err.count("\n") == 1 and "Traceback" not in r.err and flag in r.err, r.err
    assert (tmp_path / "series.txt").read_text() == "keep"


def test_an_input_is_never_overwritten(cli, tmp_path: Path) -> None:
    """The workload's trace file is an input: --out on it is refused, the file kept."""
    header = "trajectory_id,append_tokens,generated_tokens,context_tokens"
    trace = trace_workload(
        tmp_path, "const", [header] + [f"{a},429,176,32721" for a in range(4) for _ in range(5)]
    )
    before = trace.read_text()
    args = ("simulate", "--profiles", str(tmp_path / "profiles"), "--workload", "const")
    assert cli(*args, "--agents", "8").code == 0
    bad = cli(*args, "--agents", "8", "--out", str(trace))
    assert bad.code == 2 and "--out" in bad.err and "input" in bad.err, bad.err
    assert trace.read_text() == before


def test_a_trace_is_replayed_trajectory_by_trajectory(cli, tmp_path: Path) -> None:
    """Each agent replays one of the trace's trajectories, turn by turn in its order: the
    prompts an agent sends are one trajectory's, its turn count that trajectory's length."""
    rows = ["trajectory_id,append_tokens,generated_tokens,context_tokens"]
    prompts: dict[tuple[float, ...], int] = {}
    for t in range(5):  # trajectory t: t + 1 turns, contexts t * 1000 + 100 k
        turns = [t * 1000 + 100 * k for k in range(t + 1)]
        rows += [f"t{t},50,20,{c}" for c in turns]
        prompts[tuple(float(c + 50) for c in turns)] = t
    trace_workload(tmp_path, "replay", rows, turns=3)
    log = tmp_path / "turns.jsonl"
    r = cli(
        "simulate", "--profiles", str(tmp_path / "profiles"), "--workload", "replay",
        "--agents", "40", "--trace-out", str(log), "--json",
    )  # fmt: skip
    assert r.code == 0, r.err
    by_agent: dict[int, dict[int, float]] = {}
    for line in log.read_text().splitlines():
        rec = json.loads(line)
        by_agent.setdefault(rec["agent"], {})[rec["turn"]] = rec["prompt_tokens"]
    assert len(by_agent) == 40
    seen = set()
    for turns in by_agent.values():
        sequence = tuple(turns[k] for k in range(len(turns)))
        assert sequence in prompts, sequence  # exactly one trajectory, in its order
        seen.add(prompts[sequence])
    assert len(seen) > 2  # agents drew different trajectories


def test_what_a_run_cannot_measure_is_said(cli) -> None:
    """A run shorter than an agent's lifetime is transient, not unstable; no arrivals is said;
    the oracle reads nothing (no read share, no read balance: null, never NaN)."""
    short = cli("simulate", "--aps", "0.25", "--duration", "600", "--warmup", "300", "--json")
    assert short.json()["status"] == "too_short"
    text = cli("simulate", "--aps", "0.25", "--duration", "600", "--warmup", "300").out
    assert "too short for a steady state" in text and "unstable" not in text
    # Its SLO verdict judges nothing (transient means), overloaded or not (2 agents/s is 5x
    # this cluster's capacity: it was called "met").
    assert short.json()["slo"]["met"] is None and "not judged" in text
    over = cli("simulate", "--aps", "2", "--duration", "200", "--warmup", "50", "--json").json()
    assert over["status"] == "too_short" and over["slo"]["met"] is None
    assert "transient" in over["slo"]["why"]
    none = cli("simulate", "--aps", "1e-6", "--duration", "100", "--json").json()
    assert none["status"] == "no_arrivals" and none["agents"] == 0
    oracle = cli("simulate", *SMALL, "--mode", "oracle", "--json").json()
    assert oracle["decode_path_fraction"] is None and oracle["snic_max_over_avg"] is None
    assert "nan" not in cli("simulate", *SMALL, "--mode", "oracle").out


def test_compare_uses_the_matching_scheduler_and_the_operating_point(cli) -> None:
    """--compare runs the analytical model with the simulated scheduler's imbalance model,
    and offline compares the throughput at the operating point (one agent cannot saturate)."""
    rr = cli("simulate", *SMALL, "--scheduler", "round_robin", "--compare", "--json").json()
    assert "round_robin" in rr["analytical"]["source"]
    one = cli("simulate", "--agents", "1", "--set", "workload.turns=12", "--compare", "--json")
    assert abs(one.json()["analytical"]["error"]["throughput"]) < 0.2


def test_context_growth_spreads_the_turns(cli, tmp_path: Path) -> None:
    """Without --context-growth every turn is the profile's mean turn; with it an agent's
    prompts grow over its turns, around the same mean."""
    prompts = {}
    for flag in ("", "--context-growth"):
        log = tmp_path / f"turns{flag}.jsonl"
        r = cli("simulate", *SMALL, "--trace-out", str(log), "--json", *([flag] if flag else []))
        assert r.json()["context_growth"] == bool(flag)
        prompts[flag] = [json.loads(x)["prompt_tokens"] for x in log.read_text().splitlines()]
    assert len(set(prompts[""])) == 1
    grown = prompts["--context-growth"]
    assert len(set(grown)) > 10 and max(grown) > 1.8 * min(grown) + 1
    assert sum(grown) / len(grown) == pytest.approx(prompts[""][0], rel=0.1)


def test_the_working_set_does_not_depend_on_the_window(cli, tmp_path: Path) -> None:
    """The simulated KV working set holds each live agent's context from its first turn to its
    last (tool calls included) and is a time average: it was a snapshot at each window's end
    of the turns in flight, so 4 agents gave a mean of 4.1, 2.0 or 0.0 GB by --window, and the
    last window, at the run's end, read 0 while agents ran in it (found in a trial)."""
    args = ("simulate", "--agents", "4", "--set", "workload.turns=12", "--json")
    got = [cli(*args, "--window", w).json()["kv_working_set_gbyte"] for w in ("1", "10", "600000")]
    for g in got[1:]:
        assert g["mean"] == pytest.approx(got[0]["mean"], rel=1e-9)
        assert g["max"] == pytest.approx(got[0]["max"], rel=1e-9)
    assert 0 < got[0]["mean"] < got[0]["max"]
    series = tmp_path / "s.csv"
    assert cli(*args, "--window", "10", "--out", str(series)).code == 0
    rows = list(csv.DictReader(io.StringIO(series.read_text())))
    # The windows' time averages weighted by their lengths are the run's mean, and no window
    # is empty while an agent runs (the last one ends at the last agent's end).
    length = [float(x["window_s"]) for x in rows]
    mean = sum(float(x["kv_working_set_gbyte"]) * w for x, w in zip(rows, length, strict=True))
    assert mean / sum(length) == pytest.approx(got[0]["mean"], rel=1e-6)
    assert all(float(x["kv_working_set_gbyte"]) > 0 for x in rows)


def test_compare_names_the_two_ttfts_apart(cli) -> None:
    """INV-79: offline, ``--compare`` sets the span TTFT against the analytical model's span TTFT
    and the whole run's against its whole run's, each row named; the JSON carries both under
    ``ttft_span_s`` and ``ttft_s``, with their errors. Online they are one quantity: one row,
    and no ``ttft_span_s`` repeating ``ttft_s``."""
    text = " ".join(cli("simulate", *SMALL, "--compare").out.split())
    assert "TTFT mean, saturated span" in text and "TTFT mean, whole run" in text
    data = cli("simulate", *SMALL, "--compare", "--json").json()
    sim, model = data, data["analytical"]
    assert 0 < sim["ttft_span_s"]["count"] < sim["ttft_s"]["count"] == sim["turns"]
    for key, error in (("ttft_s", "ttft_mean"), ("ttft_span_s", "ttft_span_mean")):
        assert model[key] > 0
        assert model["error"][error] == pytest.approx(model[key] / sim[key]["mean"] - 1)
    on = cli(
        "simulate", "--set", "workload.turns=12", "--aps", "0.5", "--duration", "400",
        "--compare", "--json",
    ).json()  # fmt: skip
    assert "ttft_span_s" not in on and "ttft_span_s" not in on["analytical"]
