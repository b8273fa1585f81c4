"""Issue 2: the profile library, schemas, overrides and their error messages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dualpath_plan.errors import PlanInputError
from dualpath_plan.profiles.registry import (
    Overrides,
    Registry,
    builtin_profiles_dir,
    read_profile_file,
)
from tests.conftest import copy_profile

BUILTIN_DIR = builtin_profiles_dir()

REQUIRED = {
    "gpu": ["a100-sxm-80gb", "h100-sxm", "h800-sxm", "h20", "h200-sxm", "b200", "gb200", "b300"],
    "node": ["dgx-a100", "dgx-h100", "dgx-h200", "dgx-b200", "hgx-b300", "dualpath-hopper"],
    "storage": ["3fs"],
    "model": [
        "deepseek-v3.2",
        "deepseek-v3",
        "ds-27b",
        "qwen2.5-32b",
        "qwen3-235b-a22b",
        "gpt-oss-120b",
        "llama-3.1-70b",
        "kimi-k2",
    ],
    "workload": ["paper-32k", "paper-48k", "paper-64k"],
}
UNIT_SUFFIXES = (
    "_gbit_s",
    "_gbyte_s",
    "_tbyte_s",
    "_gbyte",
    "_tbyte",
    "_tflops",
    "_w",
    "_tokens",
    "_s",
)


def test_every_required_id_is_listed(cli) -> None:
    result = cli("profiles", "list", "--json")
    assert result.code == 0
    listed = {(p["kind"], p["id"]) for p in result.json()["profiles"]}
    for kind, ids in REQUIRED.items():
        for pid in ids:
            assert (kind, pid) in listed


def test_every_number_cites_a_source(registry: Registry) -> None:
    for kind, profiles in registry.profiles.items():
        for profile in profiles.values():
            missing = [
                f
                for f in profile.numeric_fields_set()
                if f not in profile.sources and f not in profile.unconfirmed
            ]
            assert not missing, f"{kind} {profile.id}: no source for {missing}"


def test_physical_fields_carry_their_unit() -> None:
    from dualpath_plan.profiles.schemas import SCHEMAS

    # Physical quantities (rates, sizes, power, time) must end in a unit suffix.
    physical = re.compile(r"(gbit|gbyte|tbyte|tflops|_w$|latency|bandwidth|rate)")
    for schema in SCHEMAS.values():
        for name in schema.model_fields:
            if physical.search(name):
                assert name.endswith(UNIT_SUFFIXES), name


def test_paper_testbed_node_names(registry: Registry) -> None:
    node = registry.node("dualpath-hopper")
    assert (node.gpus_per_node, node.cnic_count, node.cnic_gbit_s) == (8, 8, 400.0)
    assert (node.snic_count, node.snic_gbit_s, node.dram_gbyte_s) == (1, 400.0, 500.0)
    assert registry.gpu_of(node).architecture == "hopper"


def test_every_shipped_profile_validates(cli) -> None:
    from dualpath_plan.profiles.registry import builtin_profiles_dir

    result = cli("profiles", "validate", str(builtin_profiles_dir()))
    assert result.code == 0, result.out + result.err
    assert "invalid" not in result.out


def _broken(tmp_path: Path, kind: str, pid: str, old: str, new: str) -> Path:
    path = copy_profile(tmp_path, kind, pid)
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("kind", "pid", "old", "new", "expect"),
    [
        (
            "gpu",
            "h100-sxm",
            "hbm_tbyte_s = 3.35",
            "hbm_tbyte_s = -3.35",
            r"hbm_tbyte_s.*greater than or equal to 0\.000000001",
        ),
        ("gpu", "h100-sxm", "hbm_tbyte_s = 3.35", "hbm_tbyte_s = nan", r"hbm_tbyte_s.*finite"),
        ("gpu", "h100-sxm", "hbm_tbyte_s = 3.35", 'hbm_tbyte_s = "fast"', r"hbm_tbyte_s.*number"),
        (
            "node",
            "dgx-h100",
            "snic_gbit_s = 400.0",
            "snic_gbyte_s = 50.0",
            r"snic_gbyte_s.*unknown key.*did you mean 'snic_gbit_s'",
        ),
        ("node", "dgx-h100", 'gpu = "h100-sxm"', 'gpu = "h999"', r"field 'gpu'.*h999"),
        (
            "model",
            "qwen2.5-32b",
            "num_layers = 64",
            "num_layers = 64\nnum_layerz = 3",
            r"num_layerz.*unknown key",
        ),
        (
            "workload",
            "paper-64k",
            "turns = 157",
            "turns = 0",
            r"turns.*greater than or equal to 1",
        ),
        ("gpu", "h100-sxm", 'kind = "gpu"', 'kind = "gpu"\n[[[', r"malformed TOML"),
    ],
)
def test_broken_profile_names_file_and_field(tmp_path, cli, kind, pid, old, new, expect) -> None:
    path = _broken(tmp_path, kind, pid, old, new)
    result = cli("profiles", "validate", str(path))
    assert result.code == 2
    text = result.out + result.err
    assert str(path.name) in text
    assert re.search(expect, text), text
    assert "Traceback" not in text
    # Loading the directory as --profiles fails the same way, one line, exit 2.
    result = cli("profiles", "list", "--profiles", str(tmp_path / "profiles"))
    assert result.code == 2
    assert result.err.count("\n") == 1 and result.err.startswith("error: ")
    assert re.search(expect, result.err), result.err


def test_unknown_id_and_kind(cli) -> None:
    result = cli("profiles", "show", "h100-sxn")
    assert result.code == 2 and "did you mean 'h100-sxm'" in result.err
    result = cli("profiles", "list", "--kind", "gpus")
    assert result.code == 2 and "--kind" in result.err


def test_missing_file_and_dir(cli, tmp_path) -> None:
    result = cli("profiles", "validate", str(tmp_path / "nope.toml"))
    assert result.code == 2 and "no such file" in result.out + result.err
    result = cli("profiles", "list", "--profiles", str(tmp_path / "nodir"))
    assert result.code == 2 and "no such profile directory" in result.err


def test_user_profile_shadows_builtin(tmp_path, cli) -> None:
    _broken(tmp_path, "gpu", "h100-sxm", "hbm_tbyte_s = 3.35", "hbm_tbyte_s = 9.99")
    result = cli("profiles", "show", "h100-sxm", "--json", "--profiles", str(tmp_path / "profiles"))
    assert result.code == 0
    assert result.json()["fields"]["hbm_tbyte_s"] == 9.99


def test_env_var_adds_profiles(tmp_path, cli, monkeypatch) -> None:
    path = copy_profile(tmp_path, "gpu", "h100-sxm")
    path.rename(path.with_name("my-gpu.toml"))
    monkeypatch.setenv("DUALPATH_PLAN_PROFILES", str(tmp_path / "profiles"))
    result = cli("profiles", "list", "--kind", "gpu", "--json")
    assert "my-gpu" in {p["id"] for p in result.json()["profiles"]}


def test_set_overrides(registry: Registry, cli) -> None:
    ov = Overrides.parse(["node.snic_gbit_s=200", "node.prefill_mfu=0.5"])
    node = ov.apply(registry.node("dgx-h100"))
    assert node.snic_gbit_s == 200.0 and node.prefill_mfu == 0.5
    result = cli("--set", "gpu.hbm_gbyte=100", "profiles", "show", "h100-sxm", "--json")
    assert result.code == 0 and result.json()["fields"]["hbm_gbyte"] == 100
    for bad, expect in [
        ("node.snic_gbyte_s=5", "did you mean 'node.snic_gbit_s'"),
        ("node.snic_gbit_s=-1", "greater than or equal to 0.000000001"),
        ("node.snic_gbit_s=nan", "finite"),
        ("nodes.x=1", "unknown kind"),
        ("node.snic_gbit_s", "KIND.FIELD=VALUE"),
    ]:
        result = cli("profiles", "show", "dgx-h100", "--set", bad)
        assert result.code == 2, bad
        assert expect in result.err, (bad, result.err)


def test_contradictory_overrides() -> None:
    with pytest.raises(PlanInputError, match="twice"):
        Overrides.parse(["node.snic_gbit_s=100", "node.snic_gbit_s=200"])


def test_id_must_match_file_name(tmp_path) -> None:
    path = copy_profile(tmp_path, "gpu", "h100-sxm")
    path.write_text('id = "other"\n' + path.read_text())
    with pytest.raises(PlanInputError, match="file name is the id"):
        read_profile_file(path)


def test_show_has_derived_quantities(cli) -> None:
    data = cli("profiles", "show", "deepseek-v3.2", "--json").json()
    derived = {d["name"]: d["value"] for d in data["derived"]}
    assert derived["kv_bytes_per_token_layer"] == 656
    assert derived["indexer_bytes_per_token_layer"] == 132
    gpu = {
        d["name"]: d["value"]
        for d in cli("profiles", "show", "h100-sxm", "--json").json()["derived"]
    }
    assert gpu["pcie_raw_gbyte_s"] == 64.0
    assert gpu["pcie_usable_gbyte_s"] == pytest.approx(63.02, abs=0.01)
    text = cli("profiles", "show", "dualpath-hopper").out
    assert "snic_per_cnic" in text


def test_profiles_are_read_when_used(cli, tmp_path) -> None:
    # A kind's folder is indexed by file name; a profile is read (and validated) when a command
    # uses it, so a broken one fails the commands that read it and `profiles list`, not others.
    broken = tmp_path / "profiles" / "node" / "broken.toml"
    broken.parent.mkdir(parents=True)
    broken.write_text('kind = "node"\nname = "x"\ngpu = "nope"\n')
    registry = Registry.load([tmp_path / "profiles"], use_env=False)
    assert "broken" in registry.ids("node")
    assert registry.node("dualpath-hopper").id == "dualpath-hopper"
    with pytest.raises(PlanInputError) as err:
        registry.node("broken")
    assert "broken.toml" in str(err.value)
    with pytest.raises(PlanInputError):  # and again, alike
        registry.node("broken")
    assert cli("size", "--profiles", str(tmp_path / "profiles"), "--json").code == 0
    result = cli("size", "--profiles", str(tmp_path / "profiles"), "--node", "broken")
    assert result.code == 2 and "broken.toml" in result.err and result.err.count("\n") == 1
    result = cli("profiles", "list", "--profiles", str(tmp_path / "profiles"))
    assert result.code == 2 and "broken.toml" in result.err


def test_node_references_checked_when_read(tmp_path) -> None:
    # A node outside a kind's folder is read at once; its gpu may be in a file found later.
    flat = tmp_path / "flat"
    flat.mkdir()
    node = (BUILTIN_DIR / "node" / "dgx-h100.toml").read_text()
    (flat / "a-node.toml").write_text(re.sub(r'(?m)^gpu = ".*"$', 'gpu = "zz-gpu"', node))
    (flat / "zz-gpu.toml").write_text((BUILTIN_DIR / "gpu" / "h100-sxm.toml").read_text())
    registry = Registry.load([flat], use_env=False)
    assert registry.gpu_of(registry.node("a-node")).id == "zz-gpu"
    # Two transferred nodes naming each other: an error, not an endless read.
    src = (BUILTIN_DIR / "node" / "dgx-h100.toml").read_text()
    nodes = tmp_path / "loop" / "node"
    nodes.mkdir(parents=True)
    for me, other in (("n1", "n2"), ("n2", "n1")):
        text = src.replace(
            'efficiencies_from = "dualpath-hopper"', f'efficiencies_from = "{other}"'
        )
        (nodes / f"{me}.toml").write_text(text)
    registry = Registry.load([tmp_path / "loop"], use_env=False)
    with pytest.raises(PlanInputError, match="efficiencies_from"):
        registry.node("n1")


def test_a_shadowed_broken_profile_still_fails_list_and_validate(cli, tmp_path) -> None:
    """The later folder's file wins for every command; profiles list and validate still read
    the shadowed one, and name it."""
    d1, d2 = tmp_path / "d1" / "node", tmp_path / "d2" / "node"
    d1.mkdir(parents=True)
    d2.mkdir(parents=True)
    good = BUILTIN_DIR / "node" / "dgx-h100.toml"
    (d1 / "x.toml").write_text(good.read_text() + "bogus_key = 1\n")
    (d2 / "x.toml").write_text(good.read_text())
    args = ("--profiles", str(d1.parent), "--profiles", str(d2.parent))
    assert cli("size", *args, "--node", "x").code == 0
    result = cli("profiles", "list", *args)
    assert result.code == 2 and "d1/node/x.toml" in result.err


def test_validate_reports_what_the_other_commands_refuse(cli, tmp_path) -> None:
    """A broken link or a directory named like a profile makes every other command refuse the
    folder; profiles validate reports each (it said the folder was valid, exit 0)."""
    nodes = tmp_path / "p" / "node"
    nodes.mkdir(parents=True)
    text = (BUILTIN_DIR / "node" / "dgx-h100.toml").read_text()
    (nodes / "ok.toml").write_text(text)
    (nodes / "dangling.toml").symlink_to(tmp_path / "nowhere.toml")
    (nodes / "dir.toml").mkdir()
    assert cli("size", "--profiles", str(tmp_path / "p")).code == 2
    result = cli("profiles", "validate", str(tmp_path / "p"))
    assert result.code == 2
    # each invalid file an error line on stderr, each valid one a line on stdout
    assert "dangling.toml" in result.err and "dir.toml" in result.err
    assert all(line.startswith("error: ") for line in result.err.splitlines())
    assert "valid" in result.out and "ok.toml" in result.out


def test_show_names_its_argument_not_a_scenario_flag(cli) -> None:
    """profiles show ID --kind node with an id of another kind names ID (it named --node, a
    flag the command does not have)."""
    result = cli("profiles", "show", "3fs", "--kind", "node")
    assert result.code == 2 and "field 'ID': unknown node profile '3fs'" in result.err
    assert "--node" not in result.err


def test_a_workloads_longest_request_holds_its_mean_one(cli) -> None:
    """max_len_tokens below the mean request (context + appended) is refused, naming both (a
    context of 70,000 under a max_len of 65,536 was taken and changed the results)."""
    result = cli("size", "--set", "workload.context_tokens=70000")
    assert result.code == 2
    assert "field 'max_len_tokens': below the mean request" in result.err
    assert "(got 65536)" in result.err and "Value error" not in result.err
    assert cli("size", "--set", "workload.context_tokens=60000", "--json").code == 0


def test_show_names_the_file_of_a_bad_profile(cli, tmp_path) -> None:
    """profiles show of a profile whose file is bad names the file and the field (it said
    field 'ID' and no file: found in a trial)."""
    folder = tmp_path / "workload"
    folder.mkdir()
    (folder / "w.toml").write_text(
        'kind = "workload"\nname = "w"\nturns = 2.0\nappend_tokens = 100.0\n'
        "generated_tokens = 10.0\ncontext_tokens = 1000.0\nmax_len_tokens = 500\n"
    )
    result = cli("profiles", "show", "w", "--profiles", str(tmp_path))
    assert result.code == 2
    assert f"{folder / 'w.toml'}: field 'max_len_tokens': below the mean request" in result.err
    assert "'ID'" not in result.err
