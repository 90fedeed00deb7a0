"""Render ``deploy/distill/*.yaml`` for one distillation job of a scenario.

The files under ``deploy/distill`` are what a user applies by hand (``kubectl apply -k``); a run
renders the *same* files per job instead of keeping a second copy of them in code: names get the
job's suffix, every object the run's label (so an existing namespace is cleaned of exactly what the
run made), selectors the job's label (two jobs' teachers never mix), and the student its training
flags.  Pure functions: the run's side effects live in :mod:`hollowscale.distilljobs.jobs`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hollow.dra import GPU_CLASS
from hollowscale.paths import REPO_ROOT
from hollowscale.scenario.distill import DistillJobSpec
from kubecore.namespaces import RUN_LABEL
from loadgen.workloads import ANN_GANG_MIN, GANG_TEMPLATE, LABEL_GANG, SCHEDULING_API

DEPLOY_DIR = REPO_ROOT / "deploy" / "distill"
MANIFESTS = ("rbac.yaml", "teachers.yaml", "student.yaml")
JOB_LABEL = "distill.hollowscale.io/job"
TEACHER = "distill-teacher"
STUDENT = "distill-student"
RESOURCE_API = "resource.k8s.io/v1"


@dataclass(frozen=True)
class RenderSettings:
    """What differs between the file as shipped and this cluster.

    Attributes:
        namespace: where the job's objects go.
        run_id: the run's id (label :data:`RUN_LABEL` on every object).
        image: the distill image (``hollowscale.images.DISTILL_IMAGE`` on the local cluster).
        model_dir: host directory holding ``teacher.pt`` (the teachers mount it read-only).
        apiserver: ``(host, port)`` the student reaches the API at when the cluster has no Service
            proxy (the local cluster runs no kube-proxy, so the in-cluster address of the
            ``kubernetes`` Service routes nowhere): the student then runs on the node's network and
            talks to the apiserver on loopback.  None: leave in-cluster networking as it is (kind).
        pull_never: ``imagePullPolicy: Never`` (no registry: the image was imported into the node).
        gang: the cluster gang-schedules (``cluster.gang_scheduling``): the student and its teachers
            are one gang (an in-tree ``Workload`` + ``PodGroup``, ``scheduling.k8s.io/v1alpha2``, with
            ``minCount`` = teachers + 1, as loadgen makes them for hollow gangs), created together, so
            they start together or not at all.
        gpus: how the real nodes offer GPUs (``cluster.real_node_gpus.expose``: ``counted`` or ``dra``), so
            a job with ``gpus`` asks ``nvidia.com/gpu`` or ResourceClaims (:func:`gpu_objects`); None: none.
    """

    namespace: str
    run_id: str
    image: str
    model_dir: str
    apiserver: tuple[str, int] | None = None
    pull_never: bool = True
    gang: bool = False
    gpus: str | None = None


def load_manifests(deploy_dir: Path = DEPLOY_DIR) -> list[dict[str, Any]]:
    """The shipped objects, in apply order (RBAC, teachers, student)."""
    docs: list[dict[str, Any]] = []
    for name in MANIFESTS:
        path = deploy_dir / name
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def teacher_name(job: str) -> str:
    return f"{TEACHER}-{job}"


def student_name(job: str) -> str:
    return f"{STUDENT}-{job}"


def _rename(name: str, job: str) -> str:
    for base in (TEACHER, STUDENT):
        if name == base:
            return f"{base}-{job}"
    return name


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc.get("spec", {}).get("template", {}).get("spec", {})
    return list(spec.get("containers", []))


def gang_name(job: str) -> str:
    return f"distill-{job}"


def gang_objects(job: DistillJobSpec, s: RenderSettings) -> list[dict[str, Any]]:
    """The job's in-tree gang: a Workload with one podGroupTemplate and the PodGroup made from it."""
    policy = {"gang": {"minCount": job.teachers + 1}}
    meta = {"name": gang_name(job.name), "namespace": s.namespace,
            "labels": {JOB_LABEL: job.name, RUN_LABEL: s.run_id},
            "annotations": {ANN_GANG_MIN: str(job.teachers + 1)}}
    return [
        {"apiVersion": SCHEDULING_API, "kind": "Workload", "metadata": copy.deepcopy(meta),
         "spec": {"podGroupTemplates": [{"name": GANG_TEMPLATE, "schedulingPolicy": policy}]}},
        {"apiVersion": SCHEDULING_API, "kind": "PodGroup", "metadata": copy.deepcopy(meta),
         "spec": {"podGroupTemplateRef": {"workload": {"workloadName": gang_name(job.name),
                                                       "podGroupTemplateName": GANG_TEMPLATE}},
                  "schedulingPolicy": policy}},
    ]


def gpu_claim_names(job: str) -> tuple[str, str]:
    """(the whole-GPU template, the teachers' own template or shared claim) of a job."""
    return f"distill-gpu-{job}", f"distill-teacher-gpu-{job}"


def gpu_objects(job: DistillJobSpec, s: RenderSettings) -> list[dict[str, Any]]:
    """A DRA job's claim objects: a whole-GPU ResourceClaimTemplate (whole teachers, the student) and, for
    shared teachers, one ResourceClaim they all use, or for memory-share teachers a template asking
    ``teacher_memory`` of a GPU (consumable capacity)."""
    g = job.gpus
    if g is None or s.gpus != "dra":
        return []
    whole, teachers = gpu_claim_names(job.name)
    meta = {"namespace": s.namespace, "labels": {JOB_LABEL: job.name, RUN_LABEL: s.run_id}}

    def spec(capacity: str | None = None) -> dict[str, Any]:
        exactly: dict[str, Any] = {"deviceClassName": GPU_CLASS}
        if capacity:
            exactly["capacity"] = {"requests": {"memory": capacity}}
        return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}

    out = []
    if g.teachers == "whole" or g.student:
        out.append({"apiVersion": RESOURCE_API, "kind": "ResourceClaimTemplate",
                    "metadata": {"name": whole, **copy.deepcopy(meta)}, "spec": {"spec": spec()}})
    if g.teachers == "shared":
        out.append({"apiVersion": RESOURCE_API, "kind": "ResourceClaim",
                    "metadata": {"name": teachers, **copy.deepcopy(meta)}, "spec": spec()})
    elif g.teachers == "memory":
        out.append({"apiVersion": RESOURCE_API, "kind": "ResourceClaimTemplate",
                    "metadata": {"name": teachers, **copy.deepcopy(meta)}, "spec": {"spec": spec(g.teacher_memory)}})
    return out


def _ask_gpu(pod: dict[str, Any], job: DistillJobSpec, s: RenderSettings, teacher: bool) -> None:
    """The pod's one container asks its GPU: ``nvidia.com/gpu: 1`` (counted) or the claim ``gpu`` (DRA)."""
    g = job.gpus
    if g is None or s.gpus is None or (not teacher and not g.student):
        return
    c = pod["containers"][0]
    if s.gpus == "counted":
        c.setdefault("resources", {}).setdefault("limits", {})["nvidia.com/gpu"] = "1"
        return
    whole, teachers = gpu_claim_names(job.name)
    if not teacher or g.teachers == "whole":
        source = {"resourceClaimTemplateName": whole}
    elif g.teachers == "shared":
        source = {"resourceClaimName": teachers}
    else:
        source = {"resourceClaimTemplateName": teachers}
    pod["resourceClaims"] = [{"name": "gpu", **source}]
    c.setdefault("resources", {})["claims"] = [{"name": "gpu"}]


def render_job(job: DistillJobSpec, s: RenderSettings, deploy_dir: Path = DEPLOY_DIR) -> list[dict[str, Any]]:
    """The job's objects, ready to create in ``s.namespace`` (RBAC, [GPU claims,] [gang,] teacher Deployment +
    Service, student Job)."""
    out: list[dict[str, Any]] = []
    claims = gpu_objects(job, s)
    for shipped in load_manifests(deploy_dir):
        doc = copy.deepcopy(shipped)
        meta = doc.setdefault("metadata", {})
        meta["name"] = _rename(meta["name"], job.name)
        meta["namespace"] = s.namespace
        meta.setdefault("labels", {}).update({JOB_LABEL: job.name, RUN_LABEL: s.run_id})
        kind = doc["kind"]
        if kind == "RoleBinding":
            doc["roleRef"]["name"] = _rename(doc["roleRef"]["name"], job.name)
            for subject in doc.get("subjects", []):
                subject["name"] = _rename(subject["name"], job.name)
                subject["namespace"] = s.namespace
        if kind == "Service":
            doc["spec"]["selector"][JOB_LABEL] = job.name
        if kind in ("Deployment", "Job"):
            spec = doc["spec"]
            if kind == "Deployment":
                spec["replicas"] = job.teachers
                spec["selector"]["matchLabels"][JOB_LABEL] = job.name
            pod_meta = spec["template"].setdefault("metadata", {})
            pod_meta.setdefault("labels", {}).update({JOB_LABEL: job.name, RUN_LABEL: s.run_id})
            pod = spec["template"]["spec"]
            if s.gang:
                pod["schedulingGroup"] = {"podGroupName": gang_name(job.name)}
                pod_meta["labels"][LABEL_GANG] = gang_name(job.name)
            if "serviceAccountName" in pod:
                pod["serviceAccountName"] = _rename(pod["serviceAccountName"], job.name)
            for c in _containers(doc):
                c["image"] = s.image
                if s.pull_never:
                    c["imagePullPolicy"] = "Never"
            for v in pod.get("volumes", []):
                if "hostPath" in v:
                    v["hostPath"]["path"] = s.model_dir
            _ask_gpu(pod, job, s, teacher=kind == "Deployment")
            if kind == "Job":
                _student(doc, job, s)
            else:
                doc["spec"]["template"]["spec"]["containers"][0]["command"] = _with_flag(
                    doc["spec"]["template"]["spec"]["containers"][0]["command"], "--threads", str(job.threads))
        if kind == "Deployment":
            out += claims  # before the pods that use them
        if s.gang and kind == "Deployment":
            out += gang_objects(job, s)  # before its members
        out.append(doc)
    return out


def _with_flag(cmd: list[str], flag: str, value: str) -> list[str]:
    """``cmd`` with ``flag value`` set (replaced where present, else appended)."""
    out = list(cmd)
    if flag in out:
        out[out.index(flag) + 1] = value
    else:
        out += [flag, value]
    return out


def _student(doc: dict[str, Any], job: DistillJobSpec, s: RenderSettings) -> None:
    pod = doc["spec"]["template"]["spec"]
    c = pod["containers"][0]
    cmd = _with_flag(c["command"], "--k8s-service", f"$(POD_NAMESPACE)/{teacher_name(job.name)}")
    args = job.student_args()
    for i in range(0, len(args), 2):
        cmd = _with_flag(cmd, args[i], args[i + 1])
    c["command"] = cmd
    if s.apiserver is not None:
        host, port = s.apiserver
        pod["hostNetwork"] = True
        pod["dnsPolicy"] = "ClusterFirstWithHostNet"
        # in-cluster config reads these; a container's own env wins over the kubelet's service variables
        c.setdefault("env", []).extend([
            {"name": "KUBERNETES_SERVICE_HOST", "value": host},
            {"name": "KUBERNETES_SERVICE_PORT", "value": str(port)},
        ])
