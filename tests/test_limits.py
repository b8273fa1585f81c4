"""Issue 12, items 3 and 4: model limits (the context window, a decode batch of one) and the
headroom a planner keeps (``--max-utilization``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dualpath_plan.outcomes.paths import check_feasible
from dualpath_plan.profiles.registry import Overrides, Registry
from dualpath_plan.scenario import Scenario
from tests.conftest import copy_profile

# --- the context window --------------------------------------------------------------------


def one_line_error(result) -> str:
    """A bad input: exit 2, one printable line on stderr, nothing on stdout, no traceback."""
    assert result.code == 2, (result.code, result.out, result.err)
    assert result.out == ""
    assert result.err.startswith("error: ") and result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err and result.err[:-1].isprintable()
    return result.err


def test_every_shipped_model_has_a_sourced_context_window(registry: Registry) -> None:
    for model in registry.profiles["model"].values():
        window = getattr(model, "context_window_tokens", None)
        assert isinstance(window, int) and window >= 32_768, model.id
        assert model.sources.get("context_window_tokens"), f"{model.id}: no source"


@pytest.mark.parametrize("command", ["size", "paths", "bounds", "recommend"])
def test_a_workload_beyond_the_context_window_is_exit_2(cli, command) -> None:
    extra = ["--budget-nodes", "6"] if command == "recommend" else []
    err = one_line_error(cli(command, *extra, "--set", "workload.context_tokens=400000"))
    assert "workload 'paper-64k'" in err
    assert "context_tokens + append_tokens + generated_tokens = 400,605" in err
    assert "deepseek-v3.2's context_window_tokens 163,840" in err


def test_a_workload_at_the_window_is_served(cli) -> None:
    # 163,235 + 429 + 176 = 163,840: exactly the window.
    result = cli("size", "--json", "--set", "workload.context_tokens=163235")
    assert result.code == 0, result.err


def test_max_len_beyond_the_window_names_the_field(cli) -> None:
    err = one_line_error(
        cli("size", "--model", "qwen2.5-32b", "-P", "1", "-D", "2",
            "--set", "workload.max_len_tokens=200000")
    )  # fmt: skip
    assert "field 'max_len_tokens'" in err and "qwen2.5-32b's context_window_tokens 131,072" in err


def test_a_smaller_window_applies_to_the_abstract_form(cli) -> None:
    err = one_line_error(
        cli(
            "size", "--workload", "agentic-22gb-pflop", "--set", "model.context_window_tokens=32768"
        )
    )
    assert "workload 'agentic-22gb-pflop'" in err and "33,326 exceeds" in err


@pytest.mark.parametrize("context_column", [False, True])
def test_a_trace_row_beyond_the_window_names_the_file_and_line(
    cli, tmp_path: Path, context_column: bool
) -> None:
    folder = tmp_path / "profiles" / "workload"
    folder.mkdir(parents=True)
    trace = folder / "t.csv"
    if context_column:
        rows = "a,100,10,0\na,200,10,110\nb,1000,100,170000\nb,5,5,0\n"
        trace.write_text("trajectory_id,append_tokens,generated_tokens,context_tokens\n" + rows)
    else:  # the context is the trajectory's earlier turns: 100,000 + 10 + 64,000 + 10
        trace.write_text(
            "trajectory_id,append_tokens,generated_tokens\na,100000,10\na,64000,10\nb,5,5\n"
        )
    (folder / "traced.toml").write_text(
        'kind = "workload"\nname = "traced"\nturns = 2\nappend_tokens = 100\n'
        'generated_tokens = 10\ncontext_tokens = 0\ntrace_file = "t.csv"\n'
    )
    err = one_line_error(
        cli("size", "--profiles", str(tmp_path / "profiles"), "--workload", "traced")
    )
    assert f"error: {trace}: line " in err
    if context_column:
        assert "line 4:" in err and "context_tokens + append_tokens" in err and "171,100" in err
    else:
        assert "line 3:" in err and "context (the turns before) + append_tokens" in err
        assert "164,020 exceeds deepseek-v3.2's context_window_tokens 163,840" in err


def test_a_model_without_a_window_is_not_checked(registry: Registry) -> None:
    m = registry.model("deepseek-v3.2").model_copy(update={"context_window_tokens": None})
    from dualpath_plan.physics.workload import workload_demand

    wl = Overrides.parse(["workload.context_tokens=400000"]).apply(registry.workload("paper-64k"))
    assert workload_demand(m, wl).mean(workload_demand(m, wl).context_tokens) > 400_000


# --- a decode batch of one -----------------------------------------------------------------


def tight_hbm_profiles(tmp_path: Path, hbm_gbyte: float = 84.5) -> Path:
    """A Hopper node whose 8 GPUs have ``hbm_gbyte`` each: one decode node holds the
    DeepSeek-V3.2 weights (672 GB) with a few GB to spare."""
    gpu = copy_profile(tmp_path, "gpu", "h800-sxm")
    gpu.rename(gpu.with_name("h800-tight.toml"))
    gpu = gpu.with_name("h800-tight.toml")
    gpu.write_text(gpu.read_text().replace("hbm_gbyte = 80.0", f"hbm_gbyte = {hbm_gbyte}"))
    node = copy_profile(tmp_path, "node", "dualpath-hopper")
    node.rename(node.with_name("hopper-tight.toml"))
    node = node.with_name("hopper-tight.toml")
    node.write_text(node.read_text().replace('gpu = "h800-sxm"', 'gpu = "h800-tight"'))
    return tmp_path / "profiles"


LONG = ("--set", "workload.context_tokens=150000")  # 6.03 GB of KV per request


@pytest.mark.parametrize("command", ["size", "paths"])
def test_a_decode_group_that_holds_no_request_is_one_line(cli, tmp_path, command) -> None:
    profiles = tight_hbm_profiles(tmp_path)
    args = ("--profiles", str(profiles), "--decode-node", "hopper-tight", "-D", "1", *LONG)
    err = one_line_error(cli(command, *args))
    assert "field '-D/--decode-nodes'" in err
    assert "1 decode node (1 x 8 x 84.5 GB = 676 GB of HBM) keeps 4.12 GB" in err
    assert "6.03 GB for 150,429 context + 176 generated tokens" in err


def test_the_same_decode_limit_is_an_infeasible_point_in_recommend(cli, tmp_path) -> None:
    profiles = tight_hbm_profiles(tmp_path)
    result = cli(
        "recommend", "--json", "--budget-nodes", "4", "--profiles", str(profiles),
        "--decode-node", "hopper-tight", *LONG,
    )  # fmt: skip
    assert result.code == 0, result.err
    rows = {(c["prefill_nodes"], c["decode_nodes"]): c for c in result.json()["candidates"]}
    assert all(v is None for v in rows[(3, 1)]["modes"].values())  # one decode node: none fits
    assert rows[(2, 2)]["modes"]["dualpath"] is not None


def test_check_feasible_passes_where_one_request_fits(tmp_path) -> None:
    reg = Registry.load(
        [tight_hbm_profiles(tmp_path)], overrides=Overrides.parse(["workload.context_tokens=1000"])
    )
    check_feasible(Scenario.from_ids(reg, decode_node="hopper-tight", decode_nodes=1))
