"""Issue 7: the validation suite and the regression gate."""

from __future__ import annotations

import json
import math
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from dualpath_plan.profiles.registry import Overrides
from dualpath_plan.validation import load_cases
from dualpath_plan.validation.calibrate import DEFAULT_FIT, standard_errors

BASELINE = Path(__file__).parent / "baseline.json"


def test_validate_json_and_table(kept_cli) -> None:
    result = kept_cli("validate", "--json")
    assert result.code == 0, result.err
    data = result.json()
    ids = {c["id"] for c in data["cases"]}
    assert {"table1-v32-16k", "offline-ds660b-2p4d", "bounds-pd-max", "ablation-ordering"} <= ids
    for c in data["cases"]:
        assert set(c) >= {"id", "claim", "paper", "model", "error", "pass"}
        if c["known_gap"] is None:
            assert c["pass"], c  # every case without a documented gap is within tolerance
        else:
            assert not c["pass"] and c["status"] == "gap"
    assert data["passed"] + data["gaps"] == len(data["cases"]) and data["failed"] == 0


def _case(tmp_path: Path, name: str, body: str) -> Path:
    d = tmp_path / "cases"
    d.mkdir(exist_ok=True)
    (d / f"{name}.toml").write_text(body)
    return d


def test_adding_a_case_is_adding_a_file(cli, tmp_path) -> None:
    d = _case(
        tmp_path,
        "my-claim",
        """claim = "V3.2 at 32K"
source = "my notes"
kind = "ratio"
metric = "gb_per_pflop.32768"
paper = 21.7
tolerance = 0.05
[inputs]
model = "deepseek-v3.2"
context_tokens = [32768]
append_tokens = 429
""",
    )
    # Beside the shipped cases (a few of them: all of them run in test_validate_json_and_table)
    args = ("--cases", str(d), "--only", "my-claim", "--only", "table1-*", "--json")
    data = cli("validate", *args).json()
    mine = next(c for c in data["cases"] if c["id"] == "my-claim")
    assert mine["pass"] and any(c["id"].startswith("table1-") for c in data["cases"])


def test_a_failing_case_exits_1(cli, tmp_path) -> None:
    d = _case(
        tmp_path,
        "wrong",
        """claim = "wrong on purpose"
source = "test"
kind = "ratio"
metric = "gb_per_pflop.32768"
paper = 50.0
tolerance = 0.05
[inputs]
model = "deepseek-v3.2"
context_tokens = [32768]
append_tokens = 429
""",
    )
    assert cli("validate", "--cases", str(d), "--only", "wrong").code == 1


def test_only_runs_the_cases_it_matches_and_refuses_a_pattern_that_matches_none(
    cli, tmp_path
) -> None:
    result = cli("validate", "--only", "figure7-*", "--only", "table1-qwen-16k", "--json")
    assert result.code == 0, result.err
    ids = [c["id"] for c in result.json()["cases"]]
    everything = [c.id for c in load_cases()]
    expected = [i for i in everything if i.startswith("figure7-") or i == "table1-qwen-16k"]
    assert ids == expected and len(ids) > 1  # in the order of the whole run
    # A case of an extra directory, alone; every file is still read and checked.
    d = _case(tmp_path, "mine", 'claim = "x"\nsource = "y"\nkind = "nope"\n')
    assert cli("validate", "--cases", str(d), "--only", "table1-*").code == 2
    for pattern in ("figure8-*", "FIGURE7-*"):  # a typo, another case: no silent pass
        bad = cli("validate", "--only", pattern)
        assert bad.code == 2 and "--only" in bad.err and pattern in bad.err, bad.err
        assert bad.err.count("\n") == 1, bad.err


def test_a_known_gap_that_passes_exits_1(cli, tmp_path) -> None:
    d = _case(
        tmp_path,
        "gap-now-ok",
        """claim = "marked as a gap but reproduced"
source = "test"
kind = "ratio"
metric = "gb_per_pflop.32768"
paper = 21.7
tolerance = 0.05
known_gap = "no longer true"
[inputs]
model = "deepseek-v3.2"
context_tokens = [32768]
append_tokens = 429
""",
    )
    result = cli("validate", "--cases", str(d), "--only", "gap-now-ok", "--json")
    assert result.code == 1
    case = next(c for c in result.json()["cases"] if c["id"] == "gap-now-ok")
    assert case["status"] == "unexpected pass"


def test_bad_case_file_exits_2(cli, tmp_path) -> None:
    d = _case(
        tmp_path,
        "bad",
        'claim = "x"\nsource = "y"\nkind = "nope"\nmetric = "m"\npaper = 1\ntolerance = 0\n',
    )
    result = cli("validate", "--cases", str(d))
    assert result.code == 2 and "kind" in result.err


def test_check_is_clean_on_the_committed_baseline(cli) -> None:
    result = cli("check", str(BASELINE), "--json")
    assert result.code == 0, result.out + result.err
    assert result.json()["regressions"] == 0


def test_check_catches_a_one_percent_change(cli, tmp_path) -> None:
    data = json.loads(BASELINE.read_text())
    scenario = data["scenarios"][0]
    name, metric = next(iter(scenario["metrics"].items()))
    assert metric["rel_tol"] < 0.01
    metric["value"] *= 1.01
    broken = tmp_path / "baseline.json"
    broken.write_text(json.dumps(data))
    junit = tmp_path / "check.xml"
    result = cli("check", str(broken), "--junit", str(junit), "--json")
    assert result.code == 1
    changes = result.json()["changes"]
    assert [(c["scenario"], c["metric"]) for c in changes] == [(scenario["id"], name)]
    suite = ET.fromstring(junit.read_text())
    assert suite.get("failures") == "1"
    # --update rewrites the value and the gate is clean again.
    assert cli("check", str(broken), "--update").code == 0
    assert cli("check", str(broken)).code == 0


def test_check_tolerance_is_per_metric(cli, tmp_path) -> None:
    data = json.loads(BASELINE.read_text())
    metric = next(iter(data["scenarios"][0]["metrics"].values()))
    metric["rel_tol"] = 0.05
    metric["value"] *= 1.01
    loose = tmp_path / "baseline.json"
    loose.write_text(json.dumps(data))
    assert cli("check", str(loose)).code == 0


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        ("{not json", "not JSON"),
        ('{"scenarios": [{"id": "x"}]}', "has no 'kind'"),
        ('{"scenarios": [{"id": "x", "kind": "magic", "inputs": {}}]}', "unknown kind"),
        (
            '{"scenarios": [{"id": "x", "kind": "size", "inputs": {"model": "nope"}}]}',
            "unknown model",
        ),
    ],
)
def test_check_usage_errors_exit_2(cli, tmp_path, content, expect) -> None:
    path = tmp_path / "b.json"
    path.write_text(content)
    result = cli("check", str(path))
    assert result.code == 2, result.err
    assert expect in result.err


def test_check_missing_file(cli, tmp_path) -> None:
    result = cli("check", str(tmp_path / "none.json"))
    assert result.code == 2 and "no such baseline" in result.err


def test_shipped_cases_are_in_the_package() -> None:
    from dualpath_plan.validation import CASES_DIR

    assert len(list(CASES_DIR.glob("*.toml"))) >= 20
    shutil.disk_usage(CASES_DIR)  # exists on disk beside the code


PAPER_POINTS = Path(__file__).parent.parent / "bench" / "paper_points.csv"
PERTURBED = [
    "--set",
    "node.snic_efficiency=0.8",
    "--set",
    "node.prefill_mfu=0.2",
    "--set",
    "node.prefill_hbm_reserve_gbyte=12",
    "--set",
    "node.layer_fixed_s=0.0003",
]


def test_calibrate_recovers_the_shipped_calibration(cli, registry, tmp_path) -> None:
    fit = ",".join([*DEFAULT_FIT, "workload.turns_spread"])
    args = ("calibrate", str(PAPER_POINTS), *PERTURBED, "--set", "workload.turns_spread=0.5")
    args += ("--fit", fit, "--out", str(tmp_path), "--json")
    result = cli(*args)
    # Every field inside its range (the spread at its bound 1 until the load-dependent cycle:
    # a partial fit then): the overlay is written.
    assert result.code == 0, result.err
    assert not result.json()["partial"]
    data = result.json()
    node = registry.node("dualpath-hopper")
    workload = registry.workload("paper-64k")
    for field, value in data["fitted"].items():
        kind, _, name = field.rpartition(".")
        shipped = getattr(workload if kind == "workload" else node, name)
        assert value == pytest.approx(shipped, rel=0.01), field
    # Five readings, five fields: the fit meets every reading (the Figure 7 bar at 512 agents
    # landed 6% off, 0.029 in RMS log error, while the spread stopped at its bound before the
    # load-dependent cycle).
    assert data["train_rms_log_error"] < 1e-6
    # Every fitted field has a standard error (from the points' rel_stderr), the shipped
    # profiles carry them, and the overlay writes them.
    for field, err in data["stderr"].items():
        assert err is not None and err > 0, field
        kind, _, name = field.rpartition(".")
        shipped = (workload if kind == "workload" else node).calibration_stderr[name]
        assert err == pytest.approx(shipped, rel=0.05), field
    assert "rel_stderr" in data["stderr_basis"]
    # The overlays are valid profiles that --profiles picks up, citing the fit.
    overlay = tmp_path / "node" / "dualpath-hopper.toml"
    assert cli("profiles", "validate", str(overlay), str(tmp_path / "workload")).code == 0
    shown = cli("profiles", "show", "dualpath-hopper", "--profiles", str(tmp_path), "--json")
    fields = shown.json()
    assert fields["fields"]["prefill_mfu"] == pytest.approx(data["fitted"]["prefill_mfu"])
    assert "calibrate" in fields["sources"]["prefill_mfu"][0]
    assert fields["calibration_stderr"]["prefill_mfu"] == pytest.approx(
        data["stderr"]["prefill_mfu"]
    )
    shown = cli("profiles", "show", "paper-64k", "--profiles", str(tmp_path), "--json").json()
    assert "calibrate" in shown["sources"]["turns_spread"][0]
    assert "turns_spread" not in shown.get("unconfirmed", {})  # determined, not partial
    # Every node field is pinned down: the node is measured, not partial.
    assert fields["fields"]["efficiency_source"] == "measured"


def test_standard_errors_follow_the_jacobian() -> None:
    """cov = (J^T J)^-1 for weighted residuals, scaled up by the reduced chi-square when the
    fit leaves more scatter than the sigmas explain; unweighted, the scatter itself, which
    needs more points than fields; an unconstrained field has none."""
    jac = np.array([[2.0, 0.0], [0.0, 4.0], [0.0, 0.0]])
    errors, basis, corr = standard_errors(jac, chi2=0.5, weighted=True)
    assert errors == pytest.approx([0.5, 0.25]) and "rel_stderr" in basis
    errors, _, _ = standard_errors(jac, chi2=4.0, weighted=True)  # chi2 / dof = 4
    assert errors == pytest.approx([1.0, 0.5])
    errors, basis, _ = standard_errors(jac, chi2=4.0, weighted=False)
    assert errors == pytest.approx([1.0, 0.5]) and "scatter" in basis
    errors, basis, _ = standard_errors(jac[:2], chi2=0.0, weighted=False)
    assert errors == [None, None] and "not determined" in basis
    errors, _, _ = standard_errors(np.array([[1.0, 0.0], [2.0, 0.0]]), 0.0, weighted=True)
    assert errors[0] == pytest.approx(1 / math.sqrt(5)) and errors[1] is None
    # Two fields the points cannot tell apart (proportional columns, whatever their units):
    # neither is determined, and a third, independent one still is.
    twins = np.array([[1.0, 1e-4, 0.0], [2.0, 2e-4, 0.0], [0.0, 0.0, 3.0], [1.0, 1e-4, 1.0]])
    errors, basis, _ = standard_errors(twins, chi2=0.5, weighted=True)
    assert errors[0] is None and errors[1] is None and errors[2] is not None
    assert "2 fields not determined" in basis
    # Units do not matter: a field in seconds beside one in gigabytes (columns 1e8 apart).
    rng = np.random.default_rng(0)
    j = rng.normal(size=(10, 2))
    base, _, _ = standard_errors(j, chi2=20.0, weighted=True)
    scaled, _, _ = standard_errors(j * np.array([1.0, 1e8]), chi2=20.0, weighted=True)
    assert scaled[0] == pytest.approx(base[0], rel=1e-9)
    assert scaled[1] == pytest.approx(base[1] / 1e8, rel=1e-9)
    # Unweighted, points met exactly leave no scatter to estimate from.
    errors, basis, _ = standard_errors(np.eye(3)[:, :2], chi2=0.0, weighted=False)
    assert errors == [None, None] and "met exactly" in basis
    assert corr[0][1] == pytest.approx(0.0)


def test_rel_stderr_is_all_or_nothing(cli, tmp_path) -> None:
    measured = tmp_path / "m.csv"
    measured.write_text(
        "metric,value,mode,prefill_nodes,decode_nodes,agents,rel_stderr\n"
        "jct_s,5450,dualpath,2,4,2048,0.05\njct_s,2100,dualpath,2,4,512,\n"
    )
    result = cli("calibrate", str(measured), "--fit", "prefill_mfu")
    assert result.code == 2 and "rel_stderr" in result.err and "line 3" in result.err
    measured.write_text(
        "metric,value,mode,prefill_nodes,decode_nodes,agents,rel_stderr\n"
        "jct_s,5450,dualpath,2,4,2048,-1\n"
    )
    result = cli("calibrate", str(measured), "--fit", "prefill_mfu")
    assert result.code == 2 and "rel_stderr" in result.err


def test_calibrate_more_starts_never_fit_worse(cli) -> None:
    """--starts adds least-squares runs from random starts; the first is the profiles' own
    values, so more starts can only lower the error. A poor single-start fit says so."""
    args = ("calibrate", str(PAPER_POINTS), "--fit", "prefill_mfu,workload.turns_spread")
    hard = ("--set", "node.prefill_mfu=0.9", "--set", "node.snic_efficiency=0.2")
    one = cli(*args, *hard, "--json").json()["train_rms_log_error"]
    three = cli(*args, *hard, "--starts", "3", "--json").json()["train_rms_log_error"]
    assert three <= one + 1e-12
    shown = cli(*args, *hard)
    assert shown.code == 0
    assert one > 0.05 and "try --starts" in shown.out  # snic_efficiency 0.2 is not fitted
    assert cli(*args, "--starts", "0").code == 2


def test_calibrate_keeps_unfitted_fields_at_their_values(cli) -> None:
    """Without --fit the node's four fields are fitted and the workload is left as shipped."""
    result = cli("calibrate", str(PAPER_POINTS), "--json")
    assert result.code == 0, result.err
    assert "workload.turns_spread" not in result.json()["fitted"]
    assert result.json()["overlay"] is None


def test_calibrate_holdout(cli, tmp_path) -> None:
    measured = tmp_path / "m.csv"
    measured.write_text(PAPER_POINTS.read_text() + "jct_s,3000,dualpath,2,4,1024,0.05\n")
    result = cli(
        "calibrate",
        str(measured),
        "--fit",
        "snic_efficiency,prefill_mfu",
        "--holdout",
        "1",
        "--seed",
        "3",
        "--json",
    )
    assert result.code == 0, result.err
    data = result.json()
    assert len(data["holdout"]) == 1 and len(data["train"]) == 5
    assert data["holdout_rms_log_error"] is not None


@pytest.mark.parametrize(
    ("rows", "args", "expect"),
    [
        ("metric,value\njct_s,1\n", (), "missing column"),
        ("metric,value,mode,prefill_nodes,decode_nodes\n", (), "no measured points"),
        ("metric,value,mode,prefill_nodes,decode_nodes\nspeed,1,basic,2,4\n", (), "unknown metric"),
        (
            "metric,value,mode,prefill_nodes,decode_nodes\njct_s,-1,basic,2,4\n",
            (),
            "measured value from 1e-09",
        ),
        (
            "metric,value,mode,prefill_nodes,decode_nodes\njct_s,1,basic,2,4\n",
            ("--fit", "no_field"),
            "no field",
        ),
        (
            "metric,value,mode,prefill_nodes,decode_nodes\njct_s,1,basic,2,4\n",
            ("--fit", "gpu"),
            "not a number",
        ),
        (
            "metric,value,mode,prefill_nodes,decode_nodes\njct_s,1,basic,2,4\n",
            ("--holdout", "1"),
            "--holdout",
        ),
        (
            "metric,value,mode,prefill_nodes,decode_nodes\njct_s,1,basic,2,4\n",
            (),
            "cannot determine",
        ),
        # A copied row is not a second measurement: each copy narrowed the standard error
        # (found in a trial); the same cluster measured again with another value is taken.
        (
            "metric,value,mode,prefill_nodes,decode_nodes\njct_s,5450,dualpath,2,4\n"
            "aps,0.3,dualpath,2,4\njct_s,5450,dualpath,2,4\n",
            (),
            "line 4: repeats line 2 (the same metric, value, mode and cluster)",
        ),
    ],
)
def test_calibrate_bad_input(cli, tmp_path, rows, args, expect) -> None:
    measured = tmp_path / "m.csv"
    measured.write_text(rows)
    result = cli("calibrate", str(measured), *args)
    assert result.code == 2, result.err
    assert expect in result.err


def test_readme_validation_table_is_what_validate_prints(kept_cli) -> None:
    """The README's accuracy table is `validate --markdown` verbatim: regenerate it when the
    model moves."""
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    start = readme.index("predictions: ")
    end = readme.index("\n\n## ", start)
    result = kept_cli("validate", "--markdown")
    assert result.code == 0
    assert readme[start:end].strip() == result.out.strip()


def test_readme_size_example_is_what_size_prints(cli) -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    start = readme.index("$ dualpath-plan size\n") + len("$ dualpath-plan size\n")
    end = readme.index("```", start)
    result = cli("size")
    assert result.code == 0
    assert readme[start:end].strip() == result.out.strip()


def test_calibrate_reports_progress(registry) -> None:
    # A long fit shows where it is (on stderr, through this callback).
    from dualpath_plan.scenario import Scenario
    from dualpath_plan.validation.calibrate import calibrate, load_points

    points = load_points(Path(__file__).parent.parent / "bench" / "paper_points.csv")
    seen: list[tuple[int, int, float]] = []
    calibrate(
        Scenario.from_ids(registry),
        points,
        ("prefill_mfu",),
        starts=2,
        progress=lambda *a: seen.append(a),
    )
    assert seen and {s for s, _, _ in seen} == {1, 2}
    assert [n for _, n, _ in seen] == list(range(1, len(seen) + 1))
    assert all(rms >= 0 for _, _, rms in seen)


def test_validate_says_which_cases_are_predictions(kept_cli) -> None:
    # 31 "passed" included the calibration's own fitted points and formula identities.
    data = kept_cli("validate", "--json").json()
    classes = {c["id"]: c["class"] for c in data["cases"]}
    assert set(classes.values()) == {"fitted", "exact", "predicted"}
    # The calibration's points (bench/paper_points.csv) are fitted, the bounds exact.
    assert classes["ablation-basic"] == classes["figure7-dualpath-512"] == "fitted"
    assert classes["bounds-pd-max"] == "exact" and classes["figure7-dualpath-4096"] == "predicted"
    predicted = [abs(c["error"]) for c in data["cases"] if c["class"] == "predicted"]
    summary = data["predicted"]
    assert summary["count"] == len(predicted)
    assert summary["max_abs_error"] == pytest.approx(max(predicted))
    ordered = sorted(predicted)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    assert summary["median_abs_error"] == pytest.approx(median)
    assert kept_cli("validate", "--only", "figure7-*").out.startswith("predictions: ")


def test_check_says_how_each_metric_changed(cli, tmp_path) -> None:
    path = tmp_path / "b.json"
    path.write_text(
        json.dumps(
            {
                "scenarios": [
                    {
                        "id": "x",
                        "kind": "bounds",
                        "inputs": {"paper_assumptions": True},
                        "metrics": {
                            "pd_max": {"value": 1.0, "rel_tol": 0.0},
                            "pd_min": {"value": 1.0, "rel_tol": 0.0},
                        },
                    }
                ]
            }
        )
    )
    result = cli("check", str(path), "--json")
    assert result.code == 1
    moves = {c["metric"]: c["direction"] for c in result.json()["changes"]}
    assert moves == {"pd_max": "up", "pd_min": "down"}  # 3.5 and 1/7 against 1
    assert "changed (up)" in cli("check", str(path)).out


def test_check_names_a_likely_typo_in_the_baseline(cli, tmp_path) -> None:
    """A metric the scenario's kind does not give is bad input (exit 2) naming the file, the
    field and the closest metric it gives: a typo read as one metric gone and one new, a
    regression (exit 1), while validate gave exit 2 for the same mistake (found in trials);
    --update drops it and records what the kind gives."""
    data = json.loads(BASELINE.read_text())
    metrics = data["scenarios"][0]["metrics"]
    name = next(n for n in metrics if n.endswith("throughput_turns_per_s"))
    typo = name.replace("throughput", "thruput")
    metrics[typo] = metrics.pop(name)
    path = tmp_path / "typo.json"
    path.write_text(json.dumps(data))
    result = cli("check", str(path))
    assert result.code == 2
    assert f"{path}: field 'scenarios[0].metrics.{typo}'" in result.err
    assert f"did you mean {name!r}?" in result.err
    assert cli("check", str(path), "--update").code == 0
    assert cli("check", str(path)).code == 0
    assert typo not in json.loads(path.read_text())["scenarios"][0]["metrics"]


def test_calibrate_takes_the_slos_of_online_points(cli, registry, tmp_path) -> None:
    # APS points measured at a 2 s TTFT were fitted at the default 4 s, silently: 0.568 and
    # 0.131 for a truth of 0.6 and 0.15 (found in a trial). With --ttft-slo they are recovered,
    # and the report says at which SLOs the online points were evaluated.
    from dataclasses import replace

    from dualpath_plan.outcomes.serving import evaluate_mode
    from dualpath_plan.scenario import Scenario
    from dualpath_plan.scenario.spec import DEFAULT_SPEC, ServingConfig

    truth = {"snic_efficiency": 0.6, "prefill_mfu": 0.15}
    reg = replace(
        registry,
        overrides=registry.overrides.merged(
            Overrides.parse([f"node.{k}={v}" for k, v in truth.items()])
        ),
    )
    slo = ServingConfig(ttft_slo_s=2.0, max_utilization=1.0)
    lines = ["metric,value,mode,prefill_nodes,decode_nodes,agents"]
    for p, d, mode in ((2, 4, "dualpath"), (3, 3, "basic"), (4, 4, "dualpath"), (2, 6, "basic")):
        sc = Scenario.from_spec(reg, DEFAULT_SPEC.with_(prefill_nodes=p, decode_nodes=d))
        aps = evaluate_mode(sc, mode, slo).aps  # type: ignore[arg-type]
        lines.append(f"aps,{aps!r},{mode},{p},{d},2048")
    points = tmp_path / "points.csv"
    points.write_text("\n".join(lines) + "\n")
    fit = ("--fit", ",".join(truth))
    data = cli("calibrate", str(points), *fit, "--ttft-slo", "2", "--json").json()
    for k, v in truth.items():
        assert data["fitted"][k] == pytest.approx(v, rel=1e-3), k
    assert data["online_points_at"] == {
        "ttft_slo_s": 2.0,
        "tpot_slo_s": 0.05,
        "max_utilization": 1.0,
    }
    text = cli("calibrate", str(points), *fit, "--ttft-slo", "2").out
    assert "online points at TTFT <= 2 s" in text


def test_a_field_fitted_to_a_bound_has_no_error_and_no_crash(cli, tmp_path) -> None:
    """One Basic JCT point below what its HBM-capped batch allows cannot place
    snic_efficiency (Basic is flat in it above about 0.44, where the SNIC stops binding): the
    fit walks to its bound of 1; it recorded a standard error of 264, and size on the overlay
    then crashed (math range error, exit 1: found in a trial). A field at a bound is not
    determined (no error written), and an absurd error in a hand-written profile gives no
    interval rather than a crash."""
    measured = tmp_path / "one.csv"
    measured.write_text(
        "metric,value,mode,prefill_nodes,decode_nodes,agents,rel_stderr\n"
        "jct_s,9900,basic,2,4,2048,0.02\n"
    )
    out = tmp_path / "ov"
    args = ("calibrate", str(measured), "--fit", "snic_efficiency", "--out", str(out), "--json")
    assert cli(*args).code == 1 and not out.exists()  # at its bound: partial, refused unasked
    result = cli(*args, "--allow-partial")
    assert result.code == 0, result.err
    data = result.json()
    assert data["stderr"]["snic_efficiency"] is None
    assert "an error spanning its whole range" in data["stderr_basis"]
    overlay = (out / "node" / "dualpath-hopper.toml").read_text()
    import tomllib

    assert "snic_efficiency" not in tomllib.loads(overlay)["calibration_stderr"]
    overlay = overlay.replace(
        "[calibration_stderr]", '[calibration_stderr]\n"snic_efficiency" = 263.8'
    )
    (out / "node" / "dualpath-hopper.toml").write_text(overlay)
    for args in (("size",), ("size", "--target-aps", "0.5"), ("recommend", "--budget-nodes", "8")):
        ran = cli(*args, "--profiles", str(out), "--json")
        assert ran.code == 0, (args, ran.err)


def test_check_update_records_changes_in_its_junit_without_failing(cli, tmp_path) -> None:
    """check --update passes (exit 0): its JUnit records each change as the case's output, not
    a failure (failures='12' beside exit 0 gave CI two signals: found in a trial)."""
    path = tmp_path / "b.json"
    path.write_text(BASELINE.read_text())
    junit = tmp_path / "j.xml"
    args = ("check", str(path), "--junit", str(junit), "--set", "node.snic_efficiency=0.4")
    assert cli(*args).code == 1
    assert int(ET.fromstring(junit.read_text()).get("failures")) > 0
    path.write_text(BASELINE.read_text())
    assert cli(*args, "--update").code == 0
    suite = ET.fromstring(junit.read_text())
    assert suite.get("failures") == "0"
    said = [case.find("system-out") for case in suite]
    assert any(s is not None and s.text.startswith("recorded by --update") for s in said)


def test_a_fit_the_points_do_not_determine_is_not_saved_as_a_measurement(cli, tmp_path) -> None:
    # Four points, four fields, no rel_stderr: "not determined", and the overlay was written
    # with efficiency_source = "measured"; size then said "measured" beside "not calibrated".
    measured = tmp_path / "meas.csv"
    measured.write_text(
        "metric,value,mode,prefill_nodes,decode_nodes,agents\n"
        "jct_s,10100,basic,2,4,2048\njct_s,8750,basic_layerwise,2,4,2048\n"
        "jct_s,5450,dualpath,2,4,2048\nonline_tpot_s,0.0375,dualpath,2,4,2048\n"
    )
    out = tmp_path / "out"
    args = ("calibrate", str(measured), "--node", "dgx-h200", "--out", str(out))
    refused = cli(*args)
    assert refused.code == 1 and "no overlay written" in refused.err
    assert "--allow-partial" in refused.err and not out.exists()
    assert "not determined by the points" in refused.out  # the fit is still reported
    written = cli(*args, "--allow-partial")
    assert written.code == 0, written.err
    text = (out / "node" / "dgx-h200.toml").read_text()
    assert 'efficiency_source = "fitted, partial"' in text
    payload = cli("size", "--profiles", str(out), "--node", "dgx-h200", "--json").json()
    assert payload["efficiencies"]["source"] == "fitted, partial"
    line, reason = payload["efficiencies"]["line"], payload["intervals"]["reason"]
    assert "fitted in part" in line and "snic_efficiency" in line
    assert "measured (its profile" not in line
    assert reason.startswith("no interval: node 'dgx-h200' fitted in part")
