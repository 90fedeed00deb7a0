"""Workload templates -> Kubernetes manifests (raw JSON dicts), one instance at a time.

An *instance* of a workload is one object per role (a Job, a bare Pod or a Deployment), all labelled
with the same ``hollowscale.io/instance``.  Run durations, startup delays and exit codes are sampled
per object (:meth:`kubecore.distributions.DurationDist.sample` on the mix's seeded generator) and
written as the pod-template annotations the hollow agent understands: ``hollowscale.io/run-duration``
(a Go duration rounded to milliseconds, or ``forever``), ``hollowscale.io/startup-delay``,
``hollowscale.io/exit-code``.  The labels (``LABEL_RUN``, ``LABEL_WORKLOAD``, ``LABEL_ROLE``,
``LABEL_INSTANCE``) are what the orchestrator's timeline collector groups by.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubecore.durations import format_go_duration
from kubecore.namespaces import RUN_LABEL
from loadgen.spec import LoadSpec, RoleSpec, WorkloadSpec

ANN_RUN = "hollowscale.io/run-duration"
ANN_EXIT = "hollowscale.io/exit-code"
ANN_DELAY = "hollowscale.io/startup-delay"
#: the run id label (kubecore.namespaces releases a run's objects by it)
LABEL_RUN = RUN_LABEL
LABEL_WORKLOAD = "hollowscale.io/workload"
LABEL_ROLE = "hollowscale.io/role"
LABEL_INSTANCE = "hollowscale.io/instance"
LABEL_GPUS = "hollowscale.io/gpus"
IMAGE = "registry.local/hollowscale/noop:1"
EXTENDED_PREFIXES = ("nvidia.com/", "amd.com/", "hugepages-")


def annotation_duration(seconds: float) -> str:
    """A drawn duration as the annotation's Go duration, rounded to milliseconds (``forever`` for inf)."""
    return format_go_duration(seconds if math.isinf(seconds) else round(seconds, 3))


def pick_exit_code(codes: Mapping[int, float], rng: random.Random) -> int:
    items = sorted(codes.items())
    return rng.choices([c for c, _ in items], weights=[w for _, w in items])[0]


@dataclass
class Submission:
    """One create call: where to POST and what."""

    workload: str
    role: str
    kind: str
    path: str
    body: dict[str, Any]


class WorkloadMix:
    """Chooses workloads by share and builds their manifests (deterministic for a seed and stream)."""

    def __init__(self, spec: LoadSpec, run_id: str = "adhoc", seed: int | None = None, stream: str = "0"):
        self.spec = spec
        self.namespace = spec.namespace
        self.scheduler = spec.scheduler_name
        self.run_id = run_id
        self.workloads = list(spec.workloads)
        self.weights = [w.share for w in self.workloads]
        base = spec.arrival.seed if seed is None else seed
        self.rng = random.Random(f"{base}/{stream}")
        self.stream = stream
        self.counter = 0

    def next_instance(self) -> list[Submission]:
        """The objects of the next instance, in submission order."""
        w = self.rng.choices(self.workloads, weights=self.weights)[0]
        self.counter += 1
        instance = f"{w.name}-{self.stream}-{self.counter}"
        return [self.build(w, role, instance) for role in w.roles]

    def build(self, w: WorkloadSpec, role: RoleSpec, instance: str) -> Submission:
        kind = w.kind
        labels = {
            LABEL_RUN: self.run_id,
            LABEL_WORKLOAD: w.name,
            LABEL_ROLE: role.name,
            LABEL_INSTANCE: instance,
        }
        requests = dict(role.resources)
        pod_labels = dict(labels, **{LABEL_GPUS: requests.get("nvidia.com/gpu", "0")})
        limits = {k: v for k, v in requests.items() if k.startswith(EXTENDED_PREFIXES)}
        annotations: dict[str, str] = {}
        run = w.run_duration_of(role).sample(self.rng)
        annotations[ANN_RUN] = "forever" if kind == "Deployment" else annotation_duration(run)
        delay = w.startup_delay_of(role)
        if delay is not None:
            annotations[ANN_DELAY] = annotation_duration(delay.sample(self.rng))
        if kind != "Deployment":
            annotations[ANN_EXIT] = str(pick_exit_code(w.exit_codes, self.rng))
        container: dict[str, Any] = {"name": "main", "image": IMAGE, "resources": {"requests": requests}}
        if limits:
            container["resources"]["limits"] = limits
        pod_spec: dict[str, Any] = {
            "restartPolicy": "Always" if kind == "Deployment" else "Never",
            "schedulerName": self.scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [container],
        }
        if role.node_selector:
            pod_spec["nodeSelector"] = dict(role.node_selector)
        if role.tolerations:
            pod_spec["tolerations"] = [t.to_manifest() for t in role.tolerations]
        if w.priority_class:
            pod_spec["priorityClassName"] = w.priority_class
        template = {"metadata": {"labels": pod_labels, "annotations": annotations}, "spec": pod_spec}
        gen = f"{w.name}-{role.name}-"[:58]
        ns = self.namespace
        replicas = role.replicas
        if kind == "Job":
            body: dict[str, Any] = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"generateName": gen, "labels": labels},
                "spec": {
                    "parallelism": replicas,
                    "completions": role.completions if role.completions is not None else replicas,
                    "backoffLimit": w.backoff_limit,
                    "template": template,
                },
            }
            path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        elif kind == "Pod":
            body = {"apiVersion": "v1", "kind": "Pod", "metadata": dict(template["metadata"], generateName=gen),
                    "spec": pod_spec}
            path = f"/api/v1/namespaces/{ns}/pods"
        else:  # Deployment
            body = {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"generateName": gen, "labels": labels},
                "spec": {"replicas": replicas, "selector": {"matchLabels": {LABEL_INSTANCE: instance}},
                         "template": template},
            }
            path = f"/apis/apps/v1/namespaces/{ns}/deployments"
        return Submission(w.name, role.name, kind, path, body)
