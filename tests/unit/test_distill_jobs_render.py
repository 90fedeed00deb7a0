"""Distillation jobs in a scenario: validation, manifests rendered from deploy/distill, report figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hollowscale.distilljobs.figures import bench_reference, job_report, measurements, parse_log, rate_series
from hollowscale.distilljobs.manifests import JOB_LABEL, RenderSettings, load_manifests, render_job
from hollowscale.distilljobs.report import DistillJobsSection
from hollowscale.report import finalize, write_report
from hollowscale.scenario.distill import DistillJobSpec
from hollowscale.scenario.validate import parse_scenario
from kubecore.namespaces import RUN_LABEL
from kubecore.schema import SpecError

BASE = """
name: d
cluster: {real_nodes: 1}
pools: [{name: cpu, count: 2, resources: {cpu: "8", memory: 32Gi, pods: "110"}}]
workloads: [{name: w, kind: Job, run_duration: 2s, roles: [{name: r, replicas: 1, resources: {cpu: "1"}}]}]
arrival: {curve: constant, rate: 1, duration_s: 60s}
"""


def load_scenario_text(text: str, source: str) -> Any:
    return parse_scenario(yaml.safe_load(text), source)


def _load(extra: str) -> Any:
    return load_scenario_text(BASE + extra, "test.yaml")


def test_scenario_with_jobs_and_teacher_faults() -> None:
    sc = _load("distill_jobs: [{name: a, teachers: 2}]\n"
               "faults: [{type: teacher-scale, at_s: 10, job: a, replicas: 3}, {type: teacher-kill, at_s: 20, job: a}]\n")
    assert sc.distill_jobs[0].teachers == 2
    assert [f.on_distill_job for f in sc.faults] == [True, True]
    assert sc.to_dict()["distill_jobs"][0]["name"] == "a"


@pytest.mark.parametrize("extra, where, what", [
    ("distill_jobs: [{name: a}]\nfaults: [{type: teacher-kill, at_s: 5, job: b}]\n", "faults[0].job", "expected one of"),
    ("distill_jobs: [{name: a}]\nfaults: [{type: teacher-scale, at_s: 5, job: a}]\n", "replicas", "is required"),
    ("distill_jobs: [{name: a}]\nfaults: [{type: teacher-kill, at_s: 5, job: a, fraction: 0.5}]\n", "fraction", "does not apply"),
    ("distill_jobs: [{name: a}, {name: a}]\n", "distill_jobs[1].name", "duplicate"),
    ("distill_jobs: [{name: a, start_at_s: 90}]\n", "distill_jobs[0].start_at_s", "within the load"),
    ("distill_jobs: [{name: a, teachers: 0}]\n", "distill_jobs[0].teachers", ""),
])
def test_scenario_errors_name_the_field(extra: str, where: str, what: str) -> None:
    with pytest.raises(SpecError) as e:
        _load(extra)
    assert where in str(e.value) and what in str(e.value)


def test_jobs_need_real_nodes() -> None:
    with pytest.raises(SpecError, match="real_nodes"):
        load_scenario_text(BASE.replace("cluster: {real_nodes: 1}", "cluster: {real_nodes: 0}")
                           + "distill_jobs: [{name: a}]\n", "t.yaml")


def test_jobs_run_on_real_nodes_hollowscale_made_local_or_kind() -> None:
    jobs = "distill_jobs: [{name: a}]\n"
    kind = load_scenario_text(BASE.replace("cluster: {real_nodes: 1}", "cluster: {backend: kind}") + jobs, "t.yaml")
    assert kind.cluster.backend == "kind"  # kind's workers are the real nodes: real_nodes is not read there
    with pytest.raises(SpecError, match=r"distill_jobs.*not 'existing'"):
        load_scenario_text(BASE.replace("cluster: {real_nodes: 1}", "cluster: {backend: existing, kubeconfig: /k}")
                           + jobs, "t.yaml")


def _settings(apiserver: tuple[str, int] | None = ("127.0.0.1", 6443)) -> RenderSettings:
    return RenderSettings(namespace="ns1", run_id="run-1", image="hollowscale.local/distill:abc",
                          model_dir="/cache/distill", apiserver=apiserver)


def test_render_names_labels_and_flags() -> None:
    job = DistillJobSpec(name="j1", seed=2, teachers=3, epochs=1, labelled=500, unlabelled=4000, test_images=1000)
    docs = render_job(job, _settings())
    by_kind = {d["kind"]: d for d in docs}
    assert set(by_kind) == {"ServiceAccount", "Role", "RoleBinding", "Deployment", "Service", "Job"}
    for d in docs:
        assert d["metadata"]["namespace"] == "ns1"
        assert d["metadata"]["labels"][RUN_LABEL] == "run-1" and d["metadata"]["labels"][JOB_LABEL] == "j1"
    dep, svc, job_doc = by_kind["Deployment"], by_kind["Service"], by_kind["Job"]
    assert dep["metadata"]["name"] == "distill-teacher-j1" and dep["spec"]["replicas"] == 3
    # the Service selects exactly this job's teachers, and the Deployment's selector matches its pods
    assert svc["spec"]["selector"][JOB_LABEL] == "j1"
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert all(pod_labels[k] == v for k, v in dep["spec"]["selector"]["matchLabels"].items())
    assert all(pod_labels.get(k) == v for k, v in svc["spec"]["selector"].items())
    assert dep["spec"]["template"]["spec"]["volumes"][0]["hostPath"]["path"] == "/cache/distill"
    pod = job_doc["spec"]["template"]["spec"]
    cmd = pod["containers"][0]["command"]
    assert cmd[cmd.index("--k8s-service") + 1] == "$(POD_NAMESPACE)/distill-teacher-j1"
    for flag, value in (("--seed", "2"), ("--epochs", "1"), ("--labelled", "500"), ("--test-images", "1000")):
        assert cmd[cmd.index(flag) + 1] == value and cmd.count(flag) == 1
    assert pod["serviceAccountName"] == "distill-student-j1"
    assert by_kind["RoleBinding"]["subjects"][0] == {"kind": "ServiceAccount", "name": "distill-student-j1",
                                                      "namespace": "ns1"}
    assert pod["hostNetwork"] is True
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1" and env["KUBERNETES_SERVICE_PORT"] == "6443"
    for d in (dep, job_doc):
        c = d["spec"]["template"]["spec"]["containers"][0]
        assert c["image"] == "hollowscale.local/distill:abc" and c["imagePullPolicy"] == "Never"


def test_render_leaves_the_shipped_files_alone_and_in_cluster_networking_when_asked() -> None:
    before = load_manifests()
    docs = render_job(DistillJobSpec(name="j2"), _settings(apiserver=None))
    assert load_manifests() == before
    pod = next(d for d in docs if d["kind"] == "Job")["spec"]["template"]["spec"]
    assert "hostNetwork" not in pod


def test_parse_log_and_rate() -> None:
    log = "\n".join(["INFO starting", json.dumps({"t": 100.0, "samples": 0, "epoch": 0}),
                     json.dumps({"t": 101.0, "samples": 1000, "epoch": 0}), "not json {",
                     json.dumps({"t": 102.5, "samples": 4000, "epoch": 0}),
                     json.dumps({"t": 105.0, "samples": 6000, "epoch": 1}),
                     json.dumps({"mode": "service", "seed": 0, "test_accuracy": 0.88, "samples_per_s": 1200.0,
                                 "lost_samples": 0, "duplicate_samples": 0})])
    points, result = parse_log(log)
    assert points[0] == (100.0, 0) and len(points) == 4
    assert result is not None and result["test_accuracy"] == 0.88
    # bins of >= 2 s: 100 -> 102.5 (4000 in 2.5 s), 102.5 -> 105 (2000 in 2.5 s)
    assert rate_series(points, t0=90.0) == [(12.5, 1600.0), (15.0, 800.0)]


def _bench(tmp_path: Path, **settings: Any) -> Path:
    doc = {"quick": False, "date": "2026-12-01", "settings": {"epochs": 2, "labelled": 2000, "unlabelled": 30000, **settings},
           "rows": [{"row": "pure", "mode": "pure", "seeds": [0, 1], "accuracies": [0.84, 0.85]},
                    {"row": "service-2", "mode": "service", "teachers": 2, "seeds": [0, 1, 2],
                     "accuracies": [0.883, 0.8873, 0.8829]}]}
    p = tmp_path / "distill.json"
    p.write_text(json.dumps(doc))
    return p


def test_bench_reference_only_for_the_same_settings(tmp_path: Path) -> None:
    ref = bench_reference(DistillJobSpec(name="a", seed=1), _bench(tmp_path))
    assert ref is not None and ref["seed_accuracy"] == 0.8873 and ref["spread"] == pytest.approx(0.0044)
    assert bench_reference(DistillJobSpec(name="a", epochs=1), _bench(tmp_path)) is None
    assert bench_reference(DistillJobSpec(name="a", seed=7), _bench(tmp_path)) is None


def _pod(name: str, component: str, created: str, scheduled: str | None, phase: str = "Running") -> dict[str, Any]:
    conds = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled}] if scheduled else []
    return {"metadata": {"name": name, "creationTimestamp": created, "labels": {"app.kubernetes.io/component": component}},
            "spec": {"nodeName": "hs-real-0"},
            "status": {"phase": phase, "conditions": conds,
                       "containerStatuses": [{"state": {"terminated": {"startedAt": "2026-12-01T10:00:05Z",
                                                                       "finishedAt": "2026-12-01T10:01:05Z"}}}]}}


def test_job_report_verdicts(tmp_path: Path) -> None:
    bench = _bench(tmp_path)
    student = _pod("s", "student", "2026-12-01T10:00:00Z", "2026-12-01T10:00:01Z", phase="Succeeded")
    teachers = [_pod("t1", "teacher", "2026-12-01T09:59:00Z", "2026-12-01T09:59:02Z"),
                _pod("t2", "teacher", "2026-12-01T09:59:00Z", "2026-12-01T09:59:04Z")]
    good = json.dumps({"test_accuracy": 0.885, "samples_per_s": 1000.0, "lost_samples": 0, "duplicate_samples": 0})
    rep = job_report(DistillJobSpec(name="a"), 0.0, good, student, teachers, [(1.0, 2, 2)], [], "2026-12-01T09:59:58Z", "s", bench)
    assert rep["passed"], rep["problems"]
    assert rep["scheduling_delay_s"]["student_pod"] == 1.0
    assert rep["scheduling_delay_s"]["student_from_job_create"] == 3.0
    assert rep["scheduling_delay_s"]["teachers_median"] == 3.0 and rep["scheduling_delay_s"]["teachers_max"] == 4.0
    assert rep["accuracy_gap_pts"] == pytest.approx(0.2)
    far = good.replace("0.885", "0.86")
    rep = job_report(DistillJobSpec(name="a"), 0.0, far, student, teachers, [], [], None, "s", bench)
    assert not rep["passed"] and "points from the bench" in rep["problems"][0]
    lost = good.replace('"lost_samples": 0', '"lost_samples": 5')
    rep = job_report(DistillJobSpec(name="a"), 0.0, lost, student, teachers, [], [], None, "s", bench)
    assert rep["problems"] == ["5 samples lost"]
    failed = _pod("s", "student", "2026-12-01T10:00:00Z", "2026-12-01T10:00:01Z", phase="Failed")
    rep = job_report(DistillJobSpec(name="a"), 0.0, "", failed, teachers, [], [], None, "s", bench)
    assert rep["problems"] == ["student pod Failed", "no result line in the student's log"]
    m = measurements([rep])
    assert m["failed_jobs"] == 1 and m["lost_samples"] is None


def test_the_jobs_section_reaches_the_report_only_through_the_section_handed_to_it(tmp_path: Path) -> None:
    student = _pod("s", "student", "2026-12-01T10:00:00Z", "2026-12-01T10:00:01Z", phase="Succeeded")
    result = json.dumps({"test_accuracy": 0.885, "samples_per_s": 1000.0, "lost_samples": 0, "duplicate_samples": 0})
    progress = "\n".join(json.dumps({"t": t, "samples": 100 * t, "epoch": 0}) for t in range(10))
    job = job_report(DistillJobSpec(name="a"), 0.0, progress + "\n" + result, student, [], [(1.0, 2, 2), (5.0, 1, 2)],
                     [{"t": 4.0, "event": "teacher-kill", "pod": "t1"}], None, "s", _bench(tmp_path))
    summary = finalize({"run_id": "r", "scenario": "s", "complete": True, "cluster": {}, "measurements": {},
                        "distill_jobs": [job]}, [])
    plain = write_report(tmp_path / "plain", summary, {}, None)
    assert "Real distillation jobs" not in plain["summary.md"].read_text()
    with_jobs = write_report(tmp_path / "jobs", summary, {}, None, sections=(DistillJobsSection(),))
    md = with_jobs["summary.md"].read_text()
    assert "## Real distillation jobs (on real nodes)" in md and "| teacher faults | kill t1 at 4.0 s |" in md
    page = with_jobs["report.html"].read_text()
    assert "<h3>a</h3>" in page and "id='plot-distill-a'" in page


def test_gang_render_puts_student_and_teachers_in_one_group() -> None:
    s = RenderSettings(namespace="ns1", run_id="run-1", image="img", model_dir="/m", gang=True)
    docs = render_job(DistillJobSpec(name="g", teachers=3), s)
    kinds = [d["kind"] for d in docs]
    # the group exists before its members are created
    assert kinds.index("Workload") < kinds.index("PodGroup") < kinds.index("Deployment") < kinds.index("Job")
    wl, pg = docs[kinds.index("Workload")], docs[kinds.index("PodGroup")]
    assert wl["spec"]["podGroupTemplates"][0]["schedulingPolicy"] == {"gang": {"minCount": 4}}
    assert pg["spec"]["podGroupTemplateRef"]["workload"]["workloadName"] == wl["metadata"]["name"] == "distill-g"
    for kind in ("Deployment", "Job"):
        pod = docs[kinds.index(kind)]["spec"]["template"]["spec"]
        assert pod["schedulingGroup"] == {"podGroupName": "distill-g"}
    plain = render_job(DistillJobSpec(name="g"), _settings())
    assert not any(d["kind"] in ("Workload", "PodGroup") for d in plain)
    assert all("schedulingGroup" not in (d.get("spec", {}).get("template", {}).get("spec", {})) for d in plain)
