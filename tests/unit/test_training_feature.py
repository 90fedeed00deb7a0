"""The training-faults feature of a run: which scenarios get it, its summary block from the run's timeline and the
faults' firings, the jobs failed for good, and its section of summary.md and report.html."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_training_recovery import T0, fault, recreate_timeline, s

from hollowscale.measure.timeline import JobRecord, Timeline
from hollowscale.scenario import parse_scenario
from hollowscale.training import report
from hollowscale.training.feature import TrainingFeature, applies, failed_for_good, firings

TRAIN: dict[str, Any] = {
    "name": "train", "kind": "Job", "run_duration": "200s", "same_duration": True, "checkpoint_interval": "60s",
    "gang": {"min_members": "all"}, "roles": [{"name": "worker", "replicas": 4,
                                               "resources": {"cpu": "8", "nvidia.com/gpu": "8"}}]}


def _scenario(**over: Any) -> Any:
    doc = {"name": "tf", "pools": [{"name": "g", "count": 8, "resources": {"cpu": "64", "memory": "512Gi",
                                                                        "nvidia.com/gpu": "8"}}],
           "workloads": [TRAIN], "arrival": {"curve": "constant", "rate": 0.1, "duration_s": "60s"}, **over}
    return parse_scenario(doc, "tf.yaml")


def test_the_feature_comes_with_checkpoints_or_faults_aimed_at_jobs() -> None:
    assert applies(_scenario())
    plain = {k: v for k, v in TRAIN.items() if k != "checkpoint_interval"}
    assert not applies(_scenario(workloads=[plain]))
    assert not applies(_scenario(workloads=[plain], faults=[{"type": "pod-failures", "at_s": "10s", "fraction": 0.1,
                                                            "duration_s": "5s"}]))
    assert applies(_scenario(workloads=[plain], faults=[{"type": "node-lost", "at_s": "10s"}]))


def test_summary_block_from_the_timeline_and_the_firings(tmp_path: Path) -> None:
    tl = Timeline()
    for p in recreate_timeline():
        tl.pods[p.uid] = p
    tl.jobs["j-old"] = JobRecord("j-old", "old", "Job", "train", "worker", "train-1", 8.0, 4, s(1), s(100), "Failed",
                                 deleted_ms=s(102))
    tl.jobs["j-new"] = JobRecord("j-new", "new", "Job", "train", "worker", "train-1", 8.0, 4, s(103), s(200),
                                 "Complete")
    tl.jobs["j-lost"] = JobRecord("j-lost", "lost", "Job", "train", "worker", "train-2", 8.0, 4, s(1), s(150),
                                  "Failed")
    feature = TrainingFeature(_scenario())
    feature.use_timeline(tl)
    entries = [{"type": "pod-failures", "firings": [dict(fault(100, pods=["a0"]), names=["team-a/a0"])]}]
    summary: dict[str, Any] = {"faults": entries, "measurements": {"attribution": {"binding": "bound by cpu"}}}
    feature.summarize(summary, T0 / 1000.0)
    m = summary["measurements"]["training"]
    (row,) = m["faults"]
    assert (row["instance"], row["recovered_s"], row["at_s"]) == ("train-1", 10.0, 100.0)
    assert m["checkpoint_s"] == {"train": 60.0} and m["failed_for_good"] == {"train": ["train-2"]}
    assert m["summary"]["jobs_failed_for_good"] == 1
    lines = report.markdown_lines(summary)
    assert lines[1] == f"## {report.TITLE}" and any(line.startswith("| 100.0 | pod-failures | train-1 |")
                                                       for line in lines)
    assert any("binding limit | bound by cpu" in line for line in lines)
    assert report.html_parts(summary)[0] == f"<h2>{report.TITLE}</h2>"
    assert report.markdown_lines({"measurements": {}}) == [] and report.html_parts({}) == []


def test_firings_flatten_in_time_order_and_superseded_jobs_are_not_failures() -> None:
    entries = [{"firings": [{"t_ms": 5.0}, {"t_ms": 1.0}]}, {"firings": [{"t_ms": 3.0}]}, {"type": "heartbeat-loss"}]
    assert [(f["t_ms"], f["spec"]) for f in firings(entries)] == [(1.0, 0), (3.0, 1), (5.0, 0)]
    superseded = JobRecord("u", "n", "Job", "w", "r", "i", 8.0, 1, 0.0, 1.0, "Failed", deleted_ms=2.0)
    assert failed_for_good([superseded]) == {}
