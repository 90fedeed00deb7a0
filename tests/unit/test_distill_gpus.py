"""GPUs on real nodes in a scenario (``cluster.real_node_gpus``) and a distillation job's GPUs (``gpus``):
validation, the real nodes the local backend starts, and how the job's pods ask (counted or claims)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from hollow.dra import GPU_CLASS
from hollowscale.backends.local import real_node_settings
from hollowscale.distilljobs.manifests import RenderSettings, render_job
from hollowscale.scenario.validate import parse_scenario
from kubecore.namespaces import RUN_LABEL
from kubecore.schema import SpecError

BASE = """
name: d
cluster: {real_nodes: 1, real_node_gpus: {count: 4, expose: dra, sharing: memory}}
pools: [{name: cpu, count: 2, resources: {cpu: "8", memory: 32Gi, pods: "110"}}]
workloads: [{name: w, kind: Job, run_duration: 2s, roles: [{name: r, replicas: 1, resources: {cpu: "1"}}]}]
arrival: {curve: constant, rate: 1, duration_s: 60s}
"""


def _load(text: str) -> Any:
    return parse_scenario(yaml.safe_load(text), "test.yaml")


def test_default_scenarios_have_no_real_node_gpus() -> None:
    sc = _load(BASE.replace(", real_node_gpus: {count: 4, expose: dra, sharing: memory}", "")
               + "distill_jobs: [{name: a}]\n")
    assert sc.cluster.real_node_gpus is None and sc.distill_jobs[0].gpus is None
    settings = real_node_settings(sc.cluster)
    assert (settings.count, settings.fake_gpus, settings.dra_gpus) == (1, 0, 0)


def test_real_node_gpus_become_the_nodes_plugins() -> None:
    dra = real_node_settings(_load(BASE).cluster)
    assert (dra.dra_gpus, dra.fake_gpus) == (4, 0)
    assert dra.dra is not None and (dra.dra.model, dra.dra.sharing) == ("h100-80gb", "memory")
    counted = real_node_settings(_load(BASE.replace("expose: dra, sharing: memory", "expose: counted, model: l4"))
                                 .cluster)
    assert (counted.fake_gpus, counted.dra_gpus, counted.gpu_model) == (4, 0, "NVIDIA L4")


def test_a_jobs_gpus_are_checked_against_the_real_nodes() -> None:
    sc = _load(BASE + "distill_jobs: [{name: a, teachers: 3, gpus: {teachers: memory, teacher_memory: 20Gi}}]\n")
    assert sc.distill_jobs[0].gpus.teachers == "memory"


@pytest.mark.parametrize("cluster_doc, jobs, where, what", [
    ("{real_nodes: 0, real_node_gpus: {count: 1}}", "[]", "cluster.real_node_gpus", "cluster.real_nodes >= 1"),
    ("{real_nodes: 1, real_node_gpus: {count: 1, expose: both}}", "[]", "expose", "expected one of"),
    ("{real_nodes: 1, real_node_gpus: {count: 1, expose: counted, sharing: memory}}", "[]", "sharing",
     "expected expose dra or both"),
    ("{real_nodes: 1}", "[{name: a, gpus: {}}]", "distill_jobs[0].gpus", "no GPUs: set cluster.real_node_gpus"),
    ("{real_nodes: 1, real_node_gpus: {count: 4, expose: counted}}", "[{name: a, gpus: {teachers: shared}}]",
     "distill_jobs[0].gpus.teachers", "expose: dra"),
    ("{real_nodes: 1, real_node_gpus: {count: 4, expose: dra}}", "[{name: a, gpus: {teachers: memory}}]",
     "distill_jobs[0].gpus.teachers", "sharing: memory"),
    ("{real_nodes: 1, real_node_gpus: {count: 4, expose: dra, sharing: memory}}",
     "[{name: a, gpus: {teachers: memory, teacher_memory: 100Gi}}]", "teacher_memory", "at most the h100-80gb's"),
    ("{real_nodes: 1, real_node_gpus: {count: 2, expose: dra}}", "[{name: a, teachers: 2, gpus: {}}]",
     "distill_jobs", "hold 3 GPU(s) at once"),
    ("{real_nodes: 1, real_node_gpus: {count: 2}}", "[{name: a, gpus: {teachers: sometimes}}]",
     "distill_jobs[0].gpus.teachers", "expected one of"),
])
def test_gpu_problems_name_the_field(cluster_doc: str, jobs: str, where: str, what: str) -> None:
    text = BASE.replace("{real_nodes: 1, real_node_gpus: {count: 4, expose: dra, sharing: memory}}", cluster_doc)
    with pytest.raises(SpecError) as e:
        _load(text + f"distill_jobs: {jobs}\n")
    assert where in str(e.value) and what in str(e.value), str(e.value)


def _render(gpus_doc: str, offered: str | None) -> list[dict[str, Any]]:
    sc = _load(BASE + f"distill_jobs: [{{name: a, teachers: 2, gpus: {gpus_doc}}}]\n")
    settings = RenderSettings(namespace="ns", run_id="r1", image="img", model_dir="/m", gpus=offered)
    return render_job(sc.distill_jobs[0], settings)


def _pods(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d["spec"]["template"]["spec"] for d in docs if d["kind"] in ("Deployment", "Job")}


def test_whole_gpus_through_claims() -> None:
    docs = _render("{}", "dra")
    kinds = [d["kind"] for d in docs]
    assert kinds.index("ResourceClaimTemplate") < kinds.index("Deployment")
    (tpl,) = [d for d in docs if d["kind"] == "ResourceClaimTemplate"]
    assert tpl["metadata"]["name"] == "distill-gpu-a" and tpl["metadata"]["labels"][RUN_LABEL] == "r1"
    assert tpl["spec"]["spec"]["devices"]["requests"] == [{"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS}}]
    for pod in _pods(docs).values():
        assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "distill-gpu-a"}]
        assert pod["containers"][0]["resources"]["claims"] == [{"name": "gpu"}]


def test_teachers_share_one_claim_or_take_memory_shares() -> None:
    shared = _render("{teachers: shared, student: false}", "dra")
    (claim,) = [d for d in shared if d["kind"] == "ResourceClaim"]
    assert claim["metadata"]["name"] == "distill-teacher-gpu-a"
    assert not [d for d in shared if d["kind"] == "ResourceClaimTemplate"]  # no whole GPU asked
    pods = _pods(shared)
    assert pods["Deployment"]["resourceClaims"] == [{"name": "gpu", "resourceClaimName": "distill-teacher-gpu-a"}]
    assert "resourceClaims" not in pods["Job"]
    memory = _render("{teachers: memory, teacher_memory: 20Gi}", "dra")
    templates = {d["metadata"]["name"]: d for d in memory if d["kind"] == "ResourceClaimTemplate"}
    exactly = templates["distill-teacher-gpu-a"]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly == {"deviceClassName": GPU_CLASS, "capacity": {"requests": {"memory": "20Gi"}}}
    assert _pods(memory)["Job"]["resourceClaims"][0]["resourceClaimTemplateName"] == "distill-gpu-a"


def test_counted_gpus_are_asked_as_nvidia_com_gpu_and_none_when_not_asked() -> None:
    counted = _render("{}", "counted")
    assert not [d for d in counted if d["kind"].startswith("ResourceClaim")]
    for pod in _pods(counted).values():
        assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert "resourceClaims" not in pod
    plain = RenderSettings(namespace="ns", run_id="r1", image="img", model_dir="/m")
    sc = _load(BASE + "distill_jobs: [{name: a}]\n")
    for pod in _pods(render_job(sc.distill_jobs[0], plain)).values():
        assert "resourceClaims" not in pod and "limits" not in pod["containers"][0].get("resources", {})
