"""Batch scenarios: tenants, cohorts, priority classes and variants validate, resolve and render the
cluster objects (PriorityClasses, Kueue flavors, queues, cohorts) a run creates; the comparison report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hollowscale.batch.comparison import comparison_doc, render_html, render_markdown, write_comparison
from hollowscale.batch.objects import (
    cluster_queue_name,
    covered_resources,
    kueue_objects,
    object_path,
    priority_objects,
)
from hollowscale.scenario import ScenarioError, load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_batch_scenarios_validate() -> None:
    for name in ("gang-contention", "fair-share", "preemption"):
        sc = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
        assert sc.variants, name


def test_variants_set_cluster_features_and_rendering() -> None:
    sc = load_scenario(ROOT / "scenarios" / "gang-contention.yaml")
    names = [v.name for v in sc.variants]
    assert names == ["default", "gang", "queues", "gang-queues"]
    gq = sc.with_variant(sc.variants[3])
    assert (gq.cluster.gang_scheduling, gq.cluster.kueue, gq.load.gang_scheduling, gq.load.kueue) == (True,) * 4
    d = sc.with_variant(sc.variants[0])
    assert (d.cluster.gang_scheduling, d.cluster.kueue, d.load.kueue) == (False, False, False)
    assert d.load.arrival.seed == gq.load.arrival.seed  # the same arrivals for every variant
    assert sc.namespaces == ("hollowscale-gang-ml",)
    assert sc.gpus_by_pool() == {"gc-v100": 128.0, "gc-p4": 32.0}


def test_fair_share_objects() -> None:
    sc = load_scenario(ROOT / "scenarios" / "fair-share.yaml")
    assert sc.deserved_shares() == {"hollowscale-fair-team-a": 0.25, "hollowscale-fair-team-b": 0.5,
                                    "hollowscale-fair-team-c": 0.25}
    q = sc.with_variant(sc.variants[1])
    objs = kueue_objects(q, "run-1")
    kinds = [o["kind"] for o in objs]
    assert kinds == ["ResourceFlavor", "Cohort"] + ["ClusterQueue", "LocalQueue"] * 3
    flavor = objs[0]
    assert flavor["spec"]["nodeLabels"]["nvidia.com/gpu.product"] == "Tesla-V100-SXM2-32GB"
    assert flavor["spec"]["nodeTaints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    cohort = objs[1]
    gpu = {r["name"]: r["nominalQuota"] for r in cohort["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert gpu == {"cpu": "1536", "memory": "12Ti", "nvidia.com/gpu": "192"}
    cq_b = next(o for o in objs if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == cluster_queue_name("team-b"))
    assert cq_b["spec"]["fairSharing"] == {"weight": "2"} and cq_b["spec"]["cohortName"] == "gpus"
    assert cq_b["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "hollowscale-fair-team-b"}}
    assert all(r["nominalQuota"] == "0" for r in cq_b["spec"]["resourceGroups"][0]["flavors"][0]["resources"])
    assert cq_b["spec"]["preemption"]["reclaimWithinCohort"] == "Any"
    lq = next(o for o in objs if o["kind"] == "LocalQueue" and o["metadata"]["namespace"] == "hollowscale-fair-team-b")
    assert lq["metadata"]["name"] == "team-b-queue" and lq["spec"]["clusterQueue"] == "team-b-cq"
    assert all(o["metadata"]["labels"] == {"hollowscale.io/run": "run-1"} for o in objs)
    assert object_path(lq) == "/apis/kueue.x-k8s.io/v1beta2/namespaces/hollowscale-fair-team-b/localqueues"
    assert object_path(cohort, name=True) == "/apis/kueue.x-k8s.io/v1beta2/cohorts/gpus"
    assert covered_resources(sc) == ["cpu", "memory", "nvidia.com/gpu"]
    assert kueue_objects(sc.with_variant(sc.variants[0]), "run-1") == []  # default scheduler: no queues


def test_priority_classes_follow_the_preemption_switch() -> None:
    sc = load_scenario(ROOT / "scenarios" / "preemption.yaml")
    by = {v.name: sc.with_variant(v) for v in sc.variants}
    off = priority_objects(by["no-preemption"], "r")
    assert [(o["kind"], o["metadata"]["name"], o["preemptionPolicy"]) for o in off] == [
        ("PriorityClass", "online", "Never"), ("PriorityClass", "teacher", "Never")]
    on = priority_objects(by["queues-preemption"], "r")
    assert [(o["kind"], o["metadata"]["name"]) for o in on] == [
        ("PriorityClass", "online"), ("WorkloadPriorityClass", "online"),
        ("PriorityClass", "teacher"), ("WorkloadPriorityClass", "teacher")]
    assert on[0]["preemptionPolicy"] == "PreemptLowerPriority" and on[1]["value"] == 100000
    cq = next(o for o in kueue_objects(by["queues-no-preemption"], "r") if o["kind"] == "ClusterQueue")
    assert cq["spec"]["preemption"]["withinClusterQueue"] == "Never"


def _doc(**changes: object) -> dict[str, object]:
    doc = yaml.safe_load((ROOT / "scenarios" / "smoke.yaml").read_text())
    doc.update(changes)
    return doc


@pytest.mark.parametrize(("changes", "message"), [
    ({"tenants": [{"name": "a", "quotas": {"gpu-pool": {"nvidia.com/gpu": 8}}}]},
     "tenants[0].quotas.gpu-pool: expected a pool name (cpu, p4, v100) as the flavor, got 'gpu-pool'"),
    ({"tenants": [{"name": "a"}, {"name": "a"}]}, "tenants[1].name: duplicate tenant name 'a'"),
    ({"variants": [{"name": "x"}, {"name": "x", "kueue": True}]}, "variants[1].name: duplicate variant name 'x'"),
    ({"variants": [{"name": "x", "gang": True}]}, "variants[0].gang: unknown key"),
    ({"cohorts": [{"name": "c", "quotas": {"v100": {"gpus": 8}}}]}, "cohorts[0].quotas.v100.gpus: pool v100 has no gpus"),
    ({"priority_classes": [{"name": "huge", "value": 2_000_000_000}]},
     "priority_classes[0].value: expected a priority between -2147483648 and 1000000000"),
])
def test_bad_batch_sections(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(_doc(**changes), "s.yaml")
    assert message in str(err.value)


def test_undeclared_priority_class_and_queued_without_tenants() -> None:
    doc = _doc(variants=[{"name": "q", "kueue": True}])
    doc["workloads"][0]["priority_class"] = "urgent"
    doc["workloads"][0]["queued"] = True
    with pytest.raises(ScenarioError) as err:
        parse_scenario(doc, "s.yaml")
    text = str(err.value)
    assert "workloads[0].priority_class: 'urgent' is not declared under priority_classes" in text
    assert "workloads[0].queued: queued workloads need tenants" in text


def _summary(name: str, partial: float, wasted: float, done: int) -> dict[str, object]:
    return {"run_id": name, "complete": True, "passed": True, "load_duration_s": 100.0,
            "variant": {"name": name}, "cluster": {"client_qps": {"kube-scheduler": {"qps": 50, "burst": 100}}},
            "measurements": {"batch": {"partial_jobs": {"max": partial, "avg": partial / 2},
                                       "wasted_gpu_seconds": wasted, "instances": {"completed": done, "unfinished": 0},
                                       "queue_wait_s": {"by_priority_class": {"online": {"p99": 3.5}}}},
                             "scheduling_throughput_pods_per_s": {"avg": 2.5}, "jobs": {"submitted": done}}}


def test_comparison_report(tmp_path: Path) -> None:
    runs = []
    for name, partial, wasted in (("default", 4.0, 640.0), ("gang", 0.0, 0.0)):
        d = tmp_path / name
        d.mkdir()
        (d / "summary.json").write_text(json.dumps(_summary(name, partial, wasted, 30)))
        (d / "series.json").write_text(json.dumps({"timeline": {"batch": {"t_s": [0, 1, 2], "partial_jobs": [0, partial, 0],
                                                                          "partial_gpus": [0, 8, 0],
                                                                          "allocated_gpus": [0, 16, 8]}}}))
        runs.append((name, d))
    paths = write_comparison(tmp_path, "gang-contention", runs)
    doc = json.loads(paths["json"].read_text())
    assert doc["kind"] == "hollowscale-comparison" and [v["name"] for v in doc["variants"]] == ["default", "gang"]
    gang = doc["variants"][1]["figures"]
    assert gang["GPU-seconds held by partial jobs"] == 0.0 and gang["jobs completed per second of load"] == 0.3
    assert doc["variants"][0]["figures"]["queue wait p99, priority online (s)"] == 3.5
    md = paths["md"].read_text()
    assert "| GPU-seconds held by partial jobs | 640.00 | 0.00 |" in md
    html = paths["html"].read_text()
    assert html.count("<figure class='plot'") == 3 and "gang/report.html" in html
    assert render_markdown(comparison_doc("x", [])).startswith("# hollowscale comparison")
    assert "<table>" in render_html(comparison_doc("x", []), [])


def test_volcano_scenario_renders_volcano_jobs_and_queues() -> None:
    from hollowscale.batch.objects import volcano_objects
    from loadgen.workloads import WorkloadMix

    doc = yaml.safe_load((ROOT / "scenarios" / "gang-contention.yaml").read_text())
    doc["cluster"].update(backend="existing", kubeconfig="/dev/null", volcano=True)
    doc.pop("variants")
    doc["tenants"][0]["weight"] = 3
    sc = parse_scenario(doc, "volcano.yaml")
    assert sc.load.volcano and sc.load.scheduler_name == "volcano"
    queues = volcano_objects(sc, "r")
    assert queues == [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                       "metadata": {"name": "ml-queue", "labels": {"hollowscale.io/run": "r"}},
                       "spec": {"weight": 3, "reclaimable": True}}]
    subs = WorkloadMix(sc.load, run_id="r").next_instance()
    assert [s.kind for s in subs] == ["VolcanoJob"]
    body = subs[0].body
    assert body["spec"]["schedulerName"] == "volcano" and body["spec"]["queue"] == "ml-queue"
    assert body["spec"]["minAvailable"] == sum(t["replicas"] for t in body["spec"]["tasks"])
    local = yaml.safe_load((ROOT / "scenarios" / "smoke.yaml").read_text())
    local["cluster"]["volcano"] = True
    with pytest.raises(ScenarioError, match="Volcano is not started by hollowscale"):
        parse_scenario(local, "s.yaml")


def test_comparison_names_each_variants_binding_limit(tmp_path: Path) -> None:
    runs = []
    for name, binding in (("default", None), ("queues", "loop:kueue")):
        d = tmp_path / name
        d.mkdir()
        s = _summary(name, 0.0, 0.0, 30)
        s["measurements"]["attribution"] = {"binding": binding, "words": f"words of {name}", "limits": []}
        (d / "summary.json").write_text(json.dumps(s))
        (d / "series.json").write_text("{}")
        runs.append((name, d))
    paths = write_comparison(tmp_path, "fair-share", runs)
    doc = json.loads(paths["json"].read_text())
    assert [v["binding_limit"] for v in doc["variants"]] == [{"key": None, "words": "words of default"},
                                                             {"key": "loop:kueue", "words": "words of queues"}]
    md = paths["md"].read_text()
    assert "| binding limit | none reached its threshold | loop:kueue |" in md and "- queues: words of queues" in md
    assert "<td title='words of queues'>loop:kueue</td>" in paths["html"].read_text()
