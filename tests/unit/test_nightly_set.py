"""The nightly set file: the shipped one is valid; every kind of mistake is refused with where and what."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hollowscale.nightly import DEFAULT_SET, NightlySetError, load_set, main, scenario_copy

SCEN = DEFAULT_SET.parents[1]  # scenarios/


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "nightly.yaml"
    p.write_text(text)
    return p


def test_shipped_set_is_valid_and_small() -> None:
    # what `make nightly` runs (python -m hollowscale.nightly, its --set defaulting to DEFAULT_SET)
    s = load_set(DEFAULT_SET)
    assert [(e.name, e.repeats, e.trace, e.variant) for e in s.entries] == [
        ("smoke", 3, False, None), ("default", 1, False, None), ("trace-gpushare40", 1, True, None),
        ("trace-multigpu20", 1, True, None),
        ("topology-gangs-640/intree-tas", 1, False, "intree-tas")]
    assert s.max_regression_pct == 25 and s.limit(s.entries[1]) == 40 and s.limit(s.entries[0]) == 25
    assert all(e.scenario.is_absolute() and e.scenario.is_file() for e in s.entries)


@pytest.mark.parametrize("text, message", [
    ("- smoke.yaml\n", "expected a mapping with 'scenarios'"),
    ("scenarios: []\n", "scenarios: expected a non-empty list"),
    ("scenario: [{scenario: smoke.yaml}]\n", "unknown key(s) scenario"),
    ("scenarios: [{scenario: smoke.yaml, repeat: 3}]\n", "scenarios[0]: unknown key(s) repeat"),
    ("scenarios: [{scenario: smoke.yaml, repeats: 0}]\n", "scenarios[0].repeats: expected an integer 1..20, got 0"),
    ("scenarios: [{scenario: smoke.yaml, repeats: '3'}]\n", "expected an integer 1..20, got '3'"),
    ("scenarios: [{scenario: smoke.yaml, repeats: true}]\n", "expected an integer 1..20, got True"),
    ("scenarios: [{scenario: nope.yaml}]\n", "scenarios[0].scenario: no such file"),
    ("scenarios: [{repeats: 2}]\n", "scenarios[0].scenario: expected a scenario file name"),
    ("scenarios: [{scenario: smoke.yaml}, {scenario: smoke.yaml, repeats: 2}]\n",
     "scenarios[1].scenario: scenario name 'smoke' is already in the set"),
    ("scenarios: [{scenario: gang-contention.yaml}]\n",
     "scenarios[0].scenario: gang-contention.yaml has variants (default, gang, queues, gang-queues); the nightly "
     "compares single runs (expected 'variant: <one of them>' in the entry)"),
    ("scenarios: [{scenario: gang-contention.yaml, variant: queue}]\n",
     "scenarios[0].variant: gang-contention.yaml has the variants default, gang, queues, gang-queues, not 'queue' "
     "(expected one of them)"),
    ("scenarios: [{scenario: smoke.yaml, variant: default}]\n",
     "scenarios[0].variant: smoke.yaml has no variants, not 'default' (expected no 'variant' key)"),
    ("scenarios: [{scenario: gang-contention.yaml, variant: ''}]\n",
     "scenarios[0].variant: expected a variant name of the scenario, got ''"),
    ("scenarios: [{scenario: gang-contention.yaml, variant: [gang]}]\n",
     "scenarios[0].variant: expected a variant name of the scenario, got ['gang']"),
    ("scenarios: [{scenario: trace-gpushare40.yaml, variant: default}]\n",
     "scenarios[0].variant: trace-gpushare40.yaml is a trace scenario, replayed whole"),
    ("scenarios: [{scenario: gang-contention.yaml, variant: gang}, {scenario: gang-contention.yaml, variant: gang}]\n",
     "scenarios[1].scenario: scenario name 'gang-contention/gang' is already in the set"),
    ("max_regression_pct: -5\nscenarios: [{scenario: smoke.yaml}]\n", "max_regression_pct: expected a number >= 0"),
    ("scenarios: [{scenario: smoke.yaml, max_regression_pct: ten}]\n",
     "scenarios[0].max_regression_pct: expected a number >= 0"),
    ("scenarios: [\n", "not YAML"),
])
def test_mistakes_are_refused(tmp_path: Path, text: str, message: str) -> None:
    # the set refers to the shipped scenarios by absolute path, so it can live in tmp_path
    for name in ("smoke.yaml", "gang-contention.yaml", "trace-gpushare40.yaml"):
        text = text.replace(f"scenario: {name}", f"scenario: {SCEN / name}")
    path = write(tmp_path, text)
    with pytest.raises(NightlySetError) as exc:
        load_set(path)
    # the set names the scenarios by absolute path; the message names them as the set does
    assert message in str(exc.value).replace(f"{SCEN}/", "") and str(path) in str(exc.value)


def test_an_invalid_scenario_is_named(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("name: bad\npools: []\n")
    path = write(tmp_path, "scenarios: [{scenario: bad.yaml}]\n")
    with pytest.raises(NightlySetError, match=r"scenarios\[0\].scenario: bad.yaml is not a valid scenario"):
        load_set(path)


def test_main_reports_a_bad_set_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--set", str(write(tmp_path, "scenarios: []\n")), "--out", str(tmp_path / "r")]) == 2
    assert "non-empty list" in capsys.readouterr().err


def test_main_without_a_baseline_runs_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--set", str(DEFAULT_SET), "--out", str(tmp_path / "r"), "--baseline", str(tmp_path / "none")])
    assert code == 2 and "no baseline at" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_scenario_copy_moves_only_the_cluster_dir(tmp_path: Path) -> None:
    import yaml

    s = load_set(DEFAULT_SET)
    copy = scenario_copy(s.entries[0], tmp_path / "scen", tmp_path / ".cluster")
    doc = yaml.safe_load(copy.read_text())
    orig = yaml.safe_load(s.entries[0].scenario.read_text())
    assert doc["cluster"].pop("dir") == str(tmp_path / ".cluster")
    assert doc == orig


def test_update_leaves_unsettled_runs_out_and_pools_nights(tmp_path: Path) -> None:
    import json

    from hollowscale.nightly import find_runs, judge
    from hollowscale.report.baseline import load_baseline

    base = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "compare" / "base" / "summary.json")
                      .read_text())
    nset = load_set(write(tmp_path, f"scenarios: [{{scenario: {SCEN / 'default.yaml'}, repeats: 1}}]\n"))
    for night, run_id, unfinished in (("n1", "a", 339), ("n2", "b", 0), ("n3", "c", 0)):
        d = tmp_path / "reports" / night / "default" / run_id
        d.mkdir(parents=True)
        s = dict(base, run_id=run_id)
        s["measurements"] = dict(base["measurements"], jobs=dict(base["measurements"]["jobs"], unfinished=unfinished))
        (d / "summary.json").write_text(json.dumps(s))
    runs = find_runs(tmp_path / "reports")
    assert sorted(p.name for p in runs["default"]) == ["a", "b", "c"]
    v = judge(nset, runs, tmp_path / "bl", update=True, limit_override=None)
    assert v.code == 0 and "run a left out of the baseline: 339 of 640 submitted jobs unfinished" in v.markdown
    assert load_baseline(tmp_path / "bl")["scenarios"]["default"]["runs"] == ["b", "c"]
    # the baseline's own copies are not found as runs again
    (tmp_path / "bl").rename(tmp_path / "reports" / "bl")
    assert sorted(p.name for p in find_runs(tmp_path / "reports")["default"]) == ["a", "b", "c"]
    v = judge(nset, {"default": [tmp_path / "reports" / "n2" / "default" / "b"]}, tmp_path / "reports" / "bl",
              update=False, limit_override=10)
    assert v.code == 0, v.markdown
    v = judge(nset, {"default": [tmp_path / "reports" / "n1" / "default" / "a"]}, tmp_path / "reports" / "bl",
              update=False, limit_override=10)
    assert v.code == 1 and any("jobs.unfinished" in p for p in v.problems)


# ------------------------------------------------------------------------------ trace replays in the set
def _replay_summary(run_id: str, allocated_pct: float, apiserver_ok: bool = True) -> dict[str, Any]:
    """A trace replay's summary.json as hollowscale/replay/run.py writes it (the parts the nightly reads)."""
    checks = {"allocated_equals_arrived_before_first_failure": {"passed": True, "max_deviation_pts": 0.01,
                                                                "tolerance_pts": 0.2},
              "pods_per_kind_equal_trace": None,
              "allocation_equals_apiserver": {"passed": apiserver_ok, "replay_gpu_milli": 100,
                                              "apiserver_gpu_milli": 100 if apiserver_ok else 90}}
    replay = {"pods": {"total": 10_600, "bound": 9_000, "unschedulable": 1_600, "no_verdict": 0},
              "at_100pct_arrived": {"allocated_pct": allocated_pct, "unallocated_gpus": 6212 * (1 - allocated_pct / 100)},
              "end": {"allocated_pct": allocated_pct + 2, "unallocated_gpus": 300.0},
              "first_failure": {"arrived_pct": 88.0, "kind": "share"},
              "scheduler": {"verdicts_per_s": 20.0, "latency_ms": {"bound": {"p50": 30.0, "p99": 80.0}}},
              "checks": checks}
    return {"schema_version": 1, "scenario": "trace-gpushare40", "variant": "default", "seed": 42, "run_id": run_id,
            "started_at": "2026-12-05T00:00:00Z", "complete": True, "passed": apiserver_ok, "replay": replay}


def test_a_trace_scenario_is_one_replay_of_one_variant_and_seed(tmp_path: Path) -> None:
    from hollowscale.nightly import run_command

    nset = load_set(write(tmp_path, f"scenarios: [{{scenario: {SCEN / 'trace-gpushare40.yaml'}}}]\n"))
    (entry,) = nset.entries
    assert entry.trace and entry.name == "trace-gpushare40" and entry.timeout_s == 45 * 60
    cmd = run_command(entry.scenario, tmp_path / "out", entry.trace)
    assert cmd[1:] == ["-m", "hollowscale", "trace", "replay", str(entry.scenario), "--out", str(tmp_path / "out")]
    with pytest.raises(NightlySetError, match=r"has 2 variant\(s\) and 1 seed\(s\); the nightly compares repeats"):
        load_set(write(tmp_path, f"scenarios: [{{scenario: {SCEN / 'trace-alibaba-2023.yaml'}}}]\n"))


def test_a_replays_run_folder_is_found_one_level_down(tmp_path: Path) -> None:
    from hollowscale.nightly import new_run_dir

    out = tmp_path / "trace-gpushare40"
    (out / "old").mkdir(parents=True)
    run = out / "20261205-010203-trace-gpushare40" / "default-seed42"
    run.mkdir(parents=True)
    (run / "summary.json").write_text("{}")
    assert new_run_dir(out, {"old"}, trace=True) == run
    assert new_run_dir(out, {"old"}, trace=False) is None  # a run's folder is directly under out


def test_replays_are_banded_on_their_allocation_and_their_checks(tmp_path: Path) -> None:
    import json

    from hollowscale.nightly import find_runs, judge

    nset = load_set(write(tmp_path, f"scenarios: [{{scenario: {SCEN / 'trace-gpushare40.yaml'}}}]\n"))
    for night, run_id, pct, ok in (("n1", "a", 90.0, True), ("n2", "b", 91.0, True), ("n3", "c", 60.0, True),
                                   ("n4", "d", 90.5, False)):
        d = tmp_path / "reports" / night / "trace-gpushare40" / f"20261205-0000-{run_id}" / "default-seed42"
        d.mkdir(parents=True)
        (d / "summary.json").write_text(json.dumps(_replay_summary(run_id, pct, ok)))
    runs = find_runs(tmp_path / "reports")
    assert len(runs["trace-gpushare40"]) == 4
    first_two = {"trace-gpushare40": runs["trace-gpushare40"][:2]}
    v = judge(nset, first_two, tmp_path / "bl", update=True, limit_override=None)
    assert v.code == 0, v.markdown
    base = json.loads((tmp_path / "bl" / "baseline.json").read_text())["scenarios"]["trace-gpushare40"]
    assert base["figures"]["at_100pct_arrived.allocated_pct"]["values"] == [90.0, 91.0]
    assert base["slos"]["check allocation_equals_apiserver"]["passed"] == [True, True]
    # a GPU allocation 33% below the band regresses; so does a check that held in every baseline run
    v = judge(nset, {"trace-gpushare40": [runs["trace-gpushare40"][2]]}, tmp_path / "bl", update=False,
              limit_override=10)
    assert v.code == 1 and any("at_100pct_arrived.allocated_pct" in p for p in v.problems), v.problems
    v = judge(nset, {"trace-gpushare40": [runs["trace-gpushare40"][3]]}, tmp_path / "bl", update=False,
              limit_override=10)
    assert v.code == 1 and v.problems == [
        "trace-gpushare40: check allocation_equals_apiserver passed in all 2 baseline runs and fails in d "
        "(replay_gpu_milli 100, apiserver_gpu_milli 90)"], v.problems


# ------------------------------------------------------------------------------ one variant of a scenario
def test_one_variant_of_a_scenario_is_an_entry_keyed_by_it(tmp_path: Path) -> None:
    gc = SCEN / "gang-contention.yaml"
    nset = load_set(write(tmp_path, f"scenarios: [{{scenario: {gc}, variant: gang, repeats: 2}},\n"
                                    f"            {{scenario: {gc}, variant: queues}}]\n"))
    assert [(e.name, e.variant, e.repeats, e.trace) for e in nset.entries] == [
        ("gang-contention/gang", "gang", 2, False), ("gang-contention/queues", "queues", 1, False)]
    assert all(e.scenario == gc and e.timeout_s == 20 * 60 for e in nset.entries)  # the scenario's timeout_s


def test_scenario_copy_of_a_variant_holds_only_that_variant(tmp_path: Path) -> None:
    import yaml

    from hollowscale.scenario import load_scenario

    (entry,) = [e for e in load_set(DEFAULT_SET).entries if e.variant]
    copy = scenario_copy(entry, tmp_path / "scen", tmp_path / ".cluster")
    assert copy == tmp_path / "scen" / "topology-gangs-640" / "intree-tas.yaml"
    doc = yaml.safe_load(copy.read_text())
    orig = yaml.safe_load(entry.scenario.read_text())
    assert doc["cluster"].pop("dir") == str(tmp_path / ".cluster")
    assert doc.pop("variants") == [{"name": "intree-tas", "gang_scheduling": True, "topology": "intree"}]
    assert len(orig.pop("variants")) == 5 and doc == orig
    # the copy runs exactly what `hollowscale run` runs for that variant of the original
    ran, full = load_scenario(copy), load_scenario(entry.scenario)
    (variant,) = ran.variants
    want = full.with_variant(next(v for v in full.variants if v.name == "intree-tas"))
    got = ran.with_variant(variant)
    assert (got.cluster.kueue, got.cluster.gang_scheduling, got.load, got.pools, got.variant) == (
        want.cluster.kueue, want.cluster.gang_scheduling, want.load, want.pools, want.variant)


def test_a_variants_run_folder_is_found_one_level_down(tmp_path: Path) -> None:
    from hollowscale.nightly import new_run_dir

    out = tmp_path / "topology-gangs-640" / "kueue-tas-required"
    parent = out / "20261207-110000-topology-gangs-640"
    run = parent / "kueue-tas-required"
    run.mkdir(parents=True)
    (run / "summary.json").write_text("{}")
    (parent / "comparison.md").write_text("# one variant\n")
    (out / "latest").symlink_to(parent.name)
    assert new_run_dir(out, set(), variant=True) == run
    assert new_run_dir(out, set()) is None  # not directly under out
    assert new_run_dir(out, {parent.name}, variant=True) is None  # there before the repeat


def _variant_summary(run_id: str, variant: str | None, unfinished: int = 0) -> dict[str, Any]:
    import json

    base = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "compare" / "base" / "summary.json")
                      .read_text())
    s = dict(base, run_id=run_id, scenario="topology-gangs-640")
    if variant:
        s["variant"] = {"name": variant, "gang_scheduling": False, "kueue": True, "preemption": True}
    s["measurements"] = dict(base["measurements"], jobs=dict(base["measurements"]["jobs"], unfinished=unfinished))
    return s


def test_variant_runs_are_found_baselined_and_judged_under_their_key(tmp_path: Path) -> None:
    import json

    from hollowscale.nightly import find_runs, judge, run_key
    from hollowscale.report.baseline import load_baseline

    assert run_key(_variant_summary("x", "kueue-tas-required")) == "topology-gangs-640/kueue-tas-required"
    assert run_key(_variant_summary("x", None)) == "topology-gangs-640"
    assert run_key({"scenario": "trace-gpushare40", "variant": "default"}) == "trace-gpushare40"  # a replay's
    t = SCEN / "topology-gangs-640.yaml"
    nset = load_set(write(tmp_path, f"scenarios: [{{scenario: {t}, variant: kueue-tas-required}},\n"
                                    f"            {{scenario: {t}, variant: default}}]\n"))
    for night, run_id, variant, unfinished in (("n1", "a", "kueue-tas-required", 0), ("n2", "b", "kueue-tas-required", 0),
                                               ("n1", "c", "default", 0), ("n3", "d", "kueue-tas-required", 300)):
        d = tmp_path / "reports" / night / "topology-gangs-640" / variant / f"2026-{run_id}" / variant
        d.mkdir(parents=True)
        (d / "summary.json").write_text(json.dumps(_variant_summary(run_id, variant, unfinished)))
    runs = find_runs(tmp_path / "reports")
    assert {k: sorted(p.parent.name for p in v) for k, v in runs.items()} == {
        "topology-gangs-640/kueue-tas-required": ["2026-a", "2026-b", "2026-d"],
        "topology-gangs-640/default": ["2026-c"]}
    tas = sorted(runs["topology-gangs-640/kueue-tas-required"])
    v = judge(nset, {"topology-gangs-640/kueue-tas-required": tas[:2],
                     "topology-gangs-640/default": runs["topology-gangs-640/default"]},
              tmp_path / "bl", update=True, limit_override=None)
    assert v.code == 0, v.markdown
    doc = load_baseline(tmp_path / "bl")
    assert {k: e["runs"] for k, e in doc["scenarios"].items()} == {
        "topology-gangs-640/kueue-tas-required": ["a", "b"], "topology-gangs-640/default": ["c"]}
    # the run's own summary is not changed; the baseline's copy carries the key
    assert json.loads((tas[0] / "summary.json").read_text())["scenario"] == "topology-gangs-640"
    copied = tmp_path / "bl" / "runs" / "topology-gangs-640" / "kueue-tas-required" / "01" / "summary.json"
    assert json.loads(copied.read_text())["scenario"] == "topology-gangs-640/kueue-tas-required"
    # judged against its own variant's band: the same figures pass, 300 unfinished jobs regress
    v = judge(nset, {"topology-gangs-640/kueue-tas-required": [tas[1]],
                     "topology-gangs-640/default": runs["topology-gangs-640/default"]},
              tmp_path / "bl", update=False, limit_override=10)
    assert v.code == 0, v.markdown
    v = judge(nset, {"topology-gangs-640/kueue-tas-required": [tas[2]],
                     "topology-gangs-640/default": runs["topology-gangs-640/default"]},
              tmp_path / "bl", update=False, limit_override=10)
    assert v.code == 1 and all(p.startswith("topology-gangs-640/kueue-tas-required: ") for p in v.problems), v.problems
    assert any("jobs.unfinished" in p for p in v.problems)
    # `hollowscale compare BASELINE RUN` looks a variant's run up under the same key
    from click.testing import CliRunner

    from hollowscale.run.cli import compare_cmd

    r = CliRunner().invoke(compare_cmd, [str(tmp_path / "bl"), str(tas[1]), "--max-regression", "10"])
    assert r.exit_code == 0 and "no regression past the baseline band" in r.output, r.output
    r = CliRunner().invoke(compare_cmd, [str(tmp_path / "bl"), str(tas[2]), "--max-regression", "10"])
    assert r.exit_code == 1 and "topology-gangs-640/kueue-tas-required: jobs.unfinished" in r.output, r.output


def test_what_a_variant_entry_needs_is_its_variants(tmp_path: Path) -> None:
    from hollowscale.nightly import entry_needs

    t = SCEN / "topology-gangs-640.yaml"
    nset = load_set(write(tmp_path, f"scenarios: [{{scenario: {t}, variant: kueue-tas-required}},\n"
                                    f"            {{scenario: {t}, variant: intree-tas}}]\n"))
    needs = [entry_needs(e) for e in nset.entries]
    assert [(n.kueue, n.root) for n in needs if n] == [(True, True), (False, False)]


def test_an_entry_that_cannot_run_here_stops_the_night_before_any_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import os

    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # not root: the Kueue variant refuses to start
    t = SCEN / "topology-gangs-640.yaml"
    own = write(tmp_path, f"scenarios: [{{scenario: {SCEN / 'smoke.yaml'}, repeats: 1}},\n"
                          f"            {{scenario: {t}, variant: kueue-tas-required}}]\n")
    code = main(["--set", str(own), "--out", str(tmp_path / "r"), "--update-baseline",
                 "--baseline", str(tmp_path / "bl")])
    err = capsys.readouterr().err
    assert code == 2 and "the set cannot run here (nothing was run)" in err, err
    assert "topology-gangs-640/kueue-tas-required: " in err and "needs root" in err
    assert "smoke:" not in err  # hollow nodes alone need no root
    assert not (tmp_path / "r").exists() and not (tmp_path / "bl").exists()
