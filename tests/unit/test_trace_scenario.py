"""Trace scenarios (issue 28, parts 2, 6 and 8): the committed scenario reads, every bad file is refused
before anything starts with its file and field (a trace's problems with file, line and column), the
scheduler's configuration as a variant gives it, and the replay's report from summaries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from hollowscale.cli import main
from hollowscale.cluster.components import scheduler
from hollowscale.replay.report import comparison, comparison_markdown, modelled, write_run_markdown
from hollowscale.scenario.trace import PACKING, is_trace_scenario, load_trace_scenario, scheduler_config_problems
from kubecore.schema import SpecError

ROOT = Path(__file__).resolve().parents[2]
EXCERPT = ROOT / "tests" / "fixtures" / "trace" / "excerpt"


def _scenario(tmp_path: Path, **changes: Any) -> Path:
    doc: dict[str, Any] = {"name": "t", "workload": {"trace": {"pods": str(EXCERPT / "pods.csv"),
                                                               "nodes": str(EXCERPT / "nodes.csv")}},
                           "variants": [{"name": "default"}]}
    for key, value in changes.items():
        if key == "trace":
            doc["workload"]["trace"].update(value)
        else:
            doc[key] = value
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _refused(path: Path) -> list[str]:
    with pytest.raises(SpecError) as err:
        load_trace_scenario(path)
    return str(err.value).replace(str(path.parent) + "/", "").splitlines()


def test_the_committed_scenario_reads() -> None:
    ts = load_trace_scenario(ROOT / "scenarios" / "trace-alibaba-2023.yaml")
    assert (len(ts.trace.nodes), ts.trace.gpus, len(ts.trace.pods)) == (1213, 6212, 8152)
    assert ts.spec.demand == 1.3 and ts.spec.mode == "paper"
    assert [(v.name, v.gpu_mode) for v in ts.file.variants] == [("default", "dra-shared"), ("packing", "dra-shared")]
    assert ts.scheduler_configs == {"default": {}, "packing": PACKING}
    assert is_trace_scenario(yaml.safe_load((ROOT / "scenarios" / "trace-alibaba-2023.yaml").read_text()))
    assert not is_trace_scenario(yaml.safe_load((ROOT / "scenarios" / "default.yaml").read_text()))


def test_a_bad_trace_is_refused_with_file_line_and_column(tmp_path: Path) -> None:
    pods = tmp_path / "pods.csv"
    pods.write_text((EXCERPT / "pods.csv").read_text().replace(",1,230,,BE,", ",1,1230,,BE,"))
    lines = _refused(_scenario(tmp_path, trace={"pods": str(pods)}))
    assert len(lines) == 1 and lines[0].startswith("s.yaml: workload.trace: ")
    assert lines[0].endswith("pods.csv:3:5: gpu_milli: expected 1..1000 milli-GPU for a one-GPU pod (a share above "
                             "1000 is more than a GPU), got 1230")


@pytest.mark.parametrize(("changes", "expected"), [
    ({"variants": [{"name": "a", "scheduler": {"profile": "packing", "config": "x.yaml"}}]},
     "s.yaml: variants[0].scheduler: expected exactly one of profile, config, command, got profile, config"),
    ({"variants": [{"name": "a", "scheduler": {"command": ["my-scheduler"]}}]},
     "s.yaml: variants[0].scheduler.scheduler_name: is required with command: the schedulerName your scheduler "
     "serves (the replay's pods name it)"),
    ({"variants": [{"name": "a", "scheduler": {"profile": "binpack"}}]},
     "s.yaml: variants[0].scheduler.profile: expected one of default, packing, got 'binpack'"),
    ({"variants": [{"name": "a", "gpus": "counted"}]},
     "s.yaml: variants[0].gpu_sharing: counted GPUs cannot be shared: a share is rounded up (write gpu_sharing: "
     "false)"),
    ({"variants": [{"name": "a"}, {"name": "a"}]}, "s.yaml: variants[1].name: duplicate variant name 'a'"),
    ({"trace": {"seeds": [1, 1]}}, "s.yaml: workload.trace.seeds: expected each seed once, got [1, 1]"),
    ({"trace": {"mode": "live"}}, "s.yaml: workload.trace.mode: expected one of paper, timed, got 'live'"),
    ({"pools": []}, "s.yaml: pools: unknown key (expected one of: cluster, description, name, timeout_s, variants, "
                    "workload)"),
])
def test_a_bad_scenario_is_refused_with_its_field(tmp_path: Path, changes: dict[str, Any], expected: str) -> None:
    assert expected in _refused(_scenario(tmp_path, **changes))


def test_a_scheduler_configuration_is_checked_before_anything_starts(tmp_path: Path) -> None:
    config = tmp_path / "mine.yaml"
    config.write_text(yaml.safe_dump({"apiVersion": "kubescheduler.config.k8s.io/v1",
                                      "kind": "KubeSchedulerConfiguration",
                                      "clientConnection": {"qps": 5}, "percentageOfNodesToScore": 50,
                                      "profiles": [{"schedulerName": "mine"}], "frobnicate": True}))
    lines = _refused(_scenario(tmp_path, variants=[{"name": "mine", "scheduler": {"config": "mine.yaml"}}]))
    assert lines == [
        "s.yaml: variants[0].scheduler.config: mine.yaml: clientConnection: is the run's own (client limits of "
        "the cluster profile, leader election on); remove it",
        "s.yaml: variants[0].scheduler.config: mine.yaml: frobnicate: unknown field (a run may set parallelism, "
        "percentageOfNodesToScore, podInitialBackoffSeconds, podMaxBackoffSeconds, profiles, extenders, "
        "delayCacheUntilActive)",
        "s.yaml: variants[0].scheduler.config: mine.yaml: profiles: expected a profile named default-scheduler "
        "(the replay's pods name it), got ['mine']"]
    good = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "percentageOfNodesToScore": 50, **PACKING}
    config.write_text(yaml.safe_dump(good))
    ts = load_trace_scenario(_scenario(tmp_path, variants=[{"name": "mine", "scheduler": {"config": "mine.yaml"}}]))
    assert ts.scheduler_configs["mine"] == {"percentageOfNodesToScore": 50, **PACKING}
    assert scheduler_config_problems([], "f") == ["f: expected a KubeSchedulerConfiguration mapping"]


def test_the_scheduler_runs_with_the_variants_fields() -> None:
    s = scheduler.SchedulerSettings(binary=Path("/b"), kubeconfig=Path("/k"), port=1, cert_dir=Path("/c"), qps=5.0,
                                    burst=10, config=Path("/cfg"), user=tuple(PACKING.items()))
    doc = scheduler.config(s)
    assert doc["profiles"] == PACKING["profiles"] and doc["clientConnection"]["qps"] == 5.0
    plain = scheduler.config(scheduler.SchedulerSettings(binary=Path("/b"), kubeconfig=Path("/k"), port=1,
                                                         cert_dir=Path("/c"), qps=5.0, burst=10, config=Path("/cfg")))
    assert "profiles" not in plain
    with pytest.raises(ValueError, match="clientConnection"):
        scheduler.config(scheduler.SchedulerSettings(binary=Path("/b"), kubeconfig=Path("/k"), port=1, cert_dir=Path("/c"),
                                                     qps=5.0, burst=10, config=Path("/cfg"),
                                                     user=(("clientConnection", {}),)))


def test_hollowscale_validate_and_trace_validate_read_trace_scenarios(tmp_path: Path) -> None:
    path = _scenario(tmp_path)
    for args in (["validate", str(path)], ["trace", "validate", str(path)]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        assert "ok - trace scenario 't': 12 nodes (56 GPUs), 30 pods, paper protocol tuned to 1.3x" in result.output
    bad = _scenario(tmp_path, variants=[{"name": "a", "gpus": "counted"}])
    assert CliRunner().invoke(main, ["validate", str(bad)]).exit_code == 1


def _summary(variant: str, seed: int, unallocated: float, first: float) -> dict[str, Any]:
    checks = {"allocated_equals_arrived_before_first_failure": {"passed": True, "max_deviation_pts": 0.0},
              "pods_per_kind_equal_trace": None, "allocation_equals_apiserver": {"passed": True}}
    replay = {"pods": {"total": 10, "tuned": 2, "bound": 8, "unschedulable": 2, "no_verdict": 0},
              "curves": {"gpu": {"0": 0.1, "50": 50.0 - seed}, "cpu": {"0": 0.0}, "memory": {"0": 0.0}},
              "fragmentation": {"0": {"frag_gpus": 1.0, "frag_ratio_pct": 10.0 + seed}},
              "at_100pct_arrived": {"unallocated_gpus": unallocated, "allocated_pct": 90.0},
              "first_failure": {"arrived_pct": first, "kind": "share", "reason": "cannot allocate all claims"},
              "end": {"allocated_pct": 95.0, "arrived_pct": 130.0, "cpu_allocated_pct": 50.0,
                      "memory_allocated_pct": 40.0},
              "scheduler": {"verdicts_per_s": 25.0, "latency_ms": {"bound": {"p50": 10.0, "p99": 50.0}}},
              "never_ran": {"share": {"cannot allocate all claims": 2}}, "checks": checks}
    return {"scenario": "t", "variant": variant, "seed": seed, "complete": True, "passed": True, "gpu_mode": "dra-shared",
            "duration_s": 60.0, "replay": replay, "timings": {"cluster": 5.0, "replay": 40.0},
            "resources": {"cpu_cores": {"agent": 0.1}}, "errors": [], "modelled": ["a sentence"]}


def test_the_comparison_bands_the_seeds(tmp_path: Path) -> None:
    ts = load_trace_scenario(_scenario(tmp_path))
    results = [("default", 1, _summary("default", 1, 20.0, 90.0)), ("default", 2, _summary("default", 2, 30.0, 80.0))]
    c = comparison(ts, results)
    v = c["variants"]["default"]
    assert v["unallocated_gpus_at_100pct"] == {"mean": 25.0, "min": 20.0, "max": 30.0}
    assert v["gpu_curve"]["50"] == {"mean": 48.5, "min": 48.0, "max": 49.0}
    assert v["frag_ratio_pct"]["0"] == {"mean": 11.5, "min": 11.0, "max": 12.0}
    md = comparison_markdown(c)
    assert "| default | 1, 2 | 25.0 (20.0..30.0) | 85.00 (80.00..90.00) |" in md
    write_run_markdown(tmp_path / "summary.md", results[0][2])
    text = (tmp_path / "summary.md").read_text()
    assert "GPU share: 2 x cannot allocate all claims" in text and "- a sentence" in text
    json.dumps(c)  # JSON-able


def test_modelled_says_how_shares_were_asked(tmp_path: Path) -> None:
    ts = load_trace_scenario(_scenario(tmp_path, variants=[
        {"name": "a"}, {"name": "b", "gpus": "counted", "gpu_sharing": False}, {"name": "p", "scheduler":
                                                                                {"profile": "packing"}}]))
    a, b, p = ts.file.variants
    assert any("1,000 milli-GPU 'shares'" in s for s in modelled("dra-shared", a, ts))
    assert any("rounded up to one whole GPU" in s for s in modelled("counted", b, ts))
    assert any("MostAllocated" in s and "packs by CPU and memory" in s for s in modelled("dra-shared", p, ts))


@pytest.mark.parametrize(("trace", "expected"), [
    ({"mode": "timed"}, "s.yaml: workload.trace.compress: is required with mode timed: trace seconds per replay "
                        "second (e.g. 10000 plays 149 days in ~21 minutes)"),
    ({"mode": "timed", "compress": 0}, "s.yaml: workload.trace.compress: expected a number > 0, got 0"),
    ({"mode": "timed", "compress": -3}, "s.yaml: workload.trace.compress: expected a number > 0, got -3"),
    ({"compress": 10}, "s.yaml: workload.trace.compress: is for mode timed only (mode is paper); remove it"),
    ({"window": {"start_s": 1}}, "s.yaml: workload.trace.window: is for mode timed only (mode is paper); remove it"),
    ({"mode": "timed", "compress": 10, "demand": 1.3},
     "s.yaml: workload.trace.demand: a timed replay plays the trace's own pods as they are (no tuning); remove it"),
    ({"mode": "timed", "compress": 10, "seeds": [1]},
     "s.yaml: workload.trace.seeds: a timed replay is deterministic (no shuffle, no tuning) and runs once per "
     "variant; remove it"),
    ({"mode": "timed", "compress": 10, "verdict_timeout_s": 5},
     "s.yaml: workload.trace.verdict_timeout_s: a timed replay waits for no verdict (pods end at their deletion "
     "time); remove it"),
    ({"mode": "timed", "compress": 10, "window": {"start_s": 5, "end_s": 5}},
     "s.yaml: workload.trace.window.end_s: expected a number > start_s (5), got 5"),
    ({"mode": "timed", "compress": 10, "window": {"start_s": 0, "end_s": 5}},
     "s.yaml: workload.trace.window: no pod of the trace is created inside it (pods are created from 10178857 to "
     "12857696 s)"),
])
def test_a_bad_timed_replay_is_refused_with_its_field(tmp_path: Path, trace: dict[str, Any], expected: str) -> None:
    assert expected in _refused(_scenario(tmp_path, trace=trace))


def test_a_timed_replay_of_a_trace_without_times_is_refused_with_file_line_and_column(tmp_path: Path) -> None:
    lines = (EXCERPT / "pods.csv").read_text().splitlines()
    cells = lines[2].split(",")
    cells[9] = ""  # openb-pod-0646's deletion_time
    lines[2] = ",".join(cells)
    pods = tmp_path / "pods.csv"
    pods.write_text("\n".join(lines) + "\n")
    assert _refused(_scenario(tmp_path, trace={"pods": str(pods), "mode": "timed", "compress": 10})) == [
        "s.yaml: workload.trace.mode: timed: 1 of 30 pods lack a creation or deletion time: pods.csv:3:10: "
        "deletion_time: a time-faithful replay needs a creation and a deletion time on every pod"]
    load_trace_scenario(_scenario(tmp_path, trace={"pods": str(pods)}))  # the paper's protocol needs no times


def test_a_timed_scenario_reads(tmp_path: Path) -> None:
    ts = load_trace_scenario(_scenario(tmp_path, trace={"mode": "timed", "compress": 1000,
                                                        "window": {"start_s": 10_000_000}}))
    assert ts.spec.mode == "timed" and ts.spec.compress == 1000.0
    assert ts.spec.window is not None and (ts.spec.window.start_s, ts.spec.window.end_s) == (10_000_000, None)


def test_validate_says_how_a_timed_scenario_replays(tmp_path: Path) -> None:
    path = _scenario(tmp_path, trace={"mode": "timed", "compress": 1000, "window": {"start_s": 10_000_000}})
    r = CliRunner().invoke(main, ["trace", "validate", str(path)])
    assert r.exit_code == 0, r.output
    assert ("timed replay compressed 1,000x over trace seconds 10,000,000 to the last deletion, once per variant"
            in r.output) and "tuned to" not in r.output
