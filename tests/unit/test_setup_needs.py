"""Set-up that holds on a fresh machine: what each scenario needs, the refusals of ``hollowscale run``,
the Go version check, per-binary build progress and the stop of a pytest session without root.

Nothing here depends on the machine's tools: Go is a fake script on a PATH of the test's own, the
binary cache is a tmp folder, and the euid is set with monkeypatch.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hollowscale.cluster import binaries as bins_mod
from hollowscale.scenario import load_scenario
from hollowscale.setupneeds import Needs, refusal, scenario_needs

pytest_plugins = ("pytester",)
ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"


@pytest.mark.parametrize(("name", "real_nodes", "kueue", "distill"), [
    ("default", False, False, False),
    ("smoke", False, False, False),
    ("control-plane-chaos", False, False, False),
    ("gpu-contention", False, False, False),
    ("plan-small", False, False, False),
    ("fair-share", False, True, False),
    ("gang-contention", False, True, False),
    ("preemption", False, True, False),
    ("distill-e2e", True, False, True),
    ("incluster-small", True, False, False),
])
def test_what_each_shipped_scenario_needs(name: str, real_nodes: bool, kueue: bool, distill: bool) -> None:
    needs = scenario_needs(load_scenario(str(SCENARIOS / f"{name}.yaml")))
    assert needs == Needs(real_nodes=real_nodes, kueue=kueue, distill=distill)
    assert needs.root == (real_nodes or kueue)


def test_setup_vars_are_one_line_setup_sh_reads() -> None:
    assert Needs().setup_vars() == "REAL_NODES=0 KUEUE=0 JOBSET=0 EXTRAS= ROOT=0"
    assert Needs(real_nodes=True, distill=True).setup_vars() == "REAL_NODES=1 KUEUE=0 JOBSET=0 EXTRAS=distill ROOT=1"
    assert Needs(jobset=True).setup_vars() == "REAL_NODES=0 KUEUE=0 JOBSET=1 EXTRAS= ROOT=0"  # JobSet needs no root
    assert "no root" in Needs().describe() and Needs(jobset=True).describe() == "JobSet"


def test_run_refuses_a_scenario_needing_root_without_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    path = str(SCENARIOS / "fair-share.yaml")
    why = refusal(load_scenario(path), path)
    assert why is not None and "\n" not in why
    assert why.startswith(f"{path} needs root (") and "uid 1000" in why and "scenarios/default.yaml" in why
    default = str(SCENARIOS / "default.yaml")
    assert refusal(load_scenario(default), default) is None  # hollow nodes alone: no root, nothing beyond the core


def test_run_refuses_what_is_not_set_up_naming_the_make_command(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setenv("HOLLOWSCALE_CACHE", str(tmp_path / "empty-cache"))
    for name, lacking in (("fair-share", "Kueue ("), ("incluster-small", "the kubelet (")):
        path = f"scenarios/{name}.yaml"
        why = refusal(load_scenario(str(ROOT / path)), path)
        assert why is not None and "\n" not in why, why
        assert f"lacks {lacking}{tmp_path / 'empty-cache'}" in why
        assert f"`make setup SCENARIO={path}`" in why and f"`make scale-test SCENARIO={path}`" in why


def _fake_go(folder: Path, version: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    go = folder / "go"
    go.write_text(f'#!/bin/sh\necho "go version go{version} linux/amd64"\n')
    go.chmod(0o755)
    return go


@pytest.mark.integration  # starts a process
def test_go_older_than_1_26_is_refused_with_what_was_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = _fake_go(tmp_path / "path", "1.22.1")
    monkeypatch.setenv("PATH", str(old.parent))
    monkeypatch.setattr(bins_mod, "GO_DEFAULT", str(tmp_path / "usr-local-go" / "go"))  # not there
    monkeypatch.setenv("HOLLOWSCALE_CACHE", str(tmp_path / "cache"))  # nor a fetched Go (hollowscale.gotoolchain)
    with pytest.raises(bins_mod.BuildError) as e:
        bins_mod.go_binary()
    msg = str(e.value)
    assert f"needs Go >= 1.26 and found only go1.22 at {old}" in msg and "https://go.dev/dl" in msg
    assert "\n" not in msg


def test_no_go_at_all_says_where_it_looked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(bins_mod, "GO_DEFAULT", str(tmp_path / "usr-local-go" / "go"))
    monkeypatch.setenv("HOLLOWSCALE_CACHE", str(tmp_path / "cache"))  # nor a fetched Go (hollowscale.gotoolchain)
    with pytest.raises(bins_mod.BuildError, match=r"found none \(no go on PATH, none at .*usr-local-go/go\)"):
        bins_mod.go_binary()


@pytest.mark.integration  # starts a process
def test_a_new_go_behind_an_old_one_on_path_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The distro's old golang first on PATH, go.dev's install in its default dir: the new one builds."""
    monkeypatch.setenv("PATH", str(_fake_go(tmp_path / "path", "1.19.8").parent))
    new = _fake_go(tmp_path / "usr-local-go", "1.26.2")
    monkeypatch.setattr(bins_mod, "GO_DEFAULT", str(new))
    assert bins_mod.go_binary() == str(new)


@pytest.mark.integration  # starts a process
def test_each_binary_reports_its_start_and_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One ``go build`` per package, a milestone before and after each; outputs and layout as before."""
    go = _fake_go(tmp_path / "go", "1.26.2")
    monkeypatch.setattr(bins_mod, "go_binary", lambda: str(go))
    builds: list[list[str]] = []

    def fake_go_build(args: list[str], cwd: Path, progress: object, what: str) -> None:
        builds.append(args)
        out, package = Path(args[args.index("-o") + 1]), args[-1]
        (out / bins_mod._output_name(package)).write_text(package)

    monkeypatch.setattr(bins_mod, "_run_go", fake_go_build)
    seen: list[str] = []
    final = tmp_path / "cache" / "v9"
    bins_mod._build_into(final, "module x\n", ["example.com/cmd/alpha", "example.com/server/v3"], "-s -w",
                         "Example v9", seen.append, rename={"server": "beta"})
    milestones = [m for m in seen if isinstance(m, bins_mod.Milestone)]
    assert [m.split(" in ")[0] for m in milestones] == [
        "building alpha (Example v9) ...", "built alpha", "building beta (Example v9) ...", "built beta"]
    assert [a[-1] for a in builds] == ["example.com/cmd/alpha", "example.com/server/v3"]
    assert sorted(p.name for p in final.iterdir()) == ["BUILD-INFO.json", "alpha", "beta"]
    info = json.loads((final / "BUILD-INFO.json").read_text())
    assert info["packages"] == ["example.com/cmd/alpha", "example.com/server/v3"]
    assert set(info["build_seconds_each"]) == {"alpha", "beta"}


ROOT_TESTS = """
import pytest

pytestmark = pytest.mark.root

def test_needs_root():
    pass
"""
PLAIN_TESTS = """
def test_plain():
    pass
"""


def _session(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, euid: int,
             *args: str) -> pytest.RunResult:
    pytester.makeini("[pytest]\nmarkers =\n    root: needs root\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_rootonly=ROOT_TESTS, test_plain=PLAIN_TESTS)
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    return pytester.runpytest_inprocess("-p", "rootcheck", *args)


def test_session_without_root_stops_before_running_anything(pytester: pytest.Pytester,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    result = _session(pytester, monkeypatch, 1000)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("ERROR: ")]
    assert len(errors) == 1 and "1 selected tests need root" in errors[0] and "uid 1000" in errors[0]
    assert "test_rootonly.py" in errors[0] and "make unit" in errors[0]
    result.assert_outcomes()  # nothing ran, nothing skipped


def test_session_without_root_runs_what_needs_none(pytester: pytest.Pytester,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _session(pytester, monkeypatch, 1000, "-m", "not root").assert_outcomes(passed=1, deselected=1)


def test_session_as_root_runs_everything(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _session(pytester, monkeypatch, 0).assert_outcomes(passed=2)


def test_a_scenario_or_a_variant_with_jobset_needs_jobset_on_the_local_cluster_only(tmp_path: Path) -> None:
    import yaml

    from hollowscale.scenario import ScenarioError

    doc = yaml.safe_load((SCENARIOS / "default.yaml").read_text())
    doc["cluster"] = {**doc.get("cluster", {}), "jobset": True}
    (tmp_path / "js.yaml").write_text(yaml.safe_dump(doc))
    sc = load_scenario(str(tmp_path / "js.yaml"))
    assert sc.cluster.jobset and scenario_needs(sc) == Needs(jobset=True) and not scenario_needs(sc).root
    doc["cluster"]["backend"] = "existing"
    doc["cluster"]["kubeconfig"] = str(tmp_path / "kubeconfig")
    (tmp_path / "js-existing.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ScenarioError, match=r"cluster.backend.*jobset are started by hollowscale on the local"):
        load_scenario(str(tmp_path / "js-existing.yaml"))
