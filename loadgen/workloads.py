"""Workload templates -> Kubernetes manifests (raw JSON dicts), one instance at a time.

An *instance* of a workload is one object per role (a Job, a bare Pod or a Deployment), all labelled
with the same ``hollowscale.io/instance``.  Run durations, startup delays and exit codes are sampled
per object and written as the pod-template annotations the hollow agent understands:
``hollowscale.io/run-duration`` (Go duration or ``forever``), ``hollowscale.io/startup-delay``,
``hollowscale.io/exit-code``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

ANN_RUN = "hollowscale.io/run-duration"
ANN_EXIT = "hollowscale.io/exit-code"
ANN_DELAY = "hollowscale.io/startup-delay"
LABEL_RUN = "hollowscale.io/run"
LABEL_WORKLOAD = "hollowscale.io/workload"
LABEL_ROLE = "hollowscale.io/role"
LABEL_INSTANCE = "hollowscale.io/instance"
LABEL_GPUS = "hollowscale.io/gpus"
IMAGE = "registry.local/hollowscale/noop:1"
EXTENDED_PREFIXES = ("nvidia.com/", "amd.com/", "hugepages-")


def go_duration(seconds: float) -> str:
    """Seconds -> a Go duration string (``12.345s``, ``0s``)."""
    ms = max(0, round(seconds * 1000))
    return f"{ms // 1000}.{ms % 1000:03d}s" if ms % 1000 else f"{ms // 1000}s"


def sample_duration(dist: dict[str, Any] | None, rng: random.Random) -> float | None:
    """One draw in seconds (None = forever / not set)."""
    if not dist or dist.get("dist") == "forever":
        return None
    kind = dist.get("dist", "fixed")
    lo = dist.get("min_s")
    hi = dist.get("max_s")
    if kind == "fixed":
        v = float(dist["value_s"])
    elif kind == "uniform":
        v = rng.uniform(float(dist["min_s"]), float(dist["max_s"]))
        lo = hi = None
    elif kind == "exponential":
        v = rng.expovariate(1.0 / max(float(dist["mean_s"]), 1e-9))
    elif kind == "normal":
        v = rng.gauss(float(dist["mean_s"]), float(dist["stddev_s"]))
    else:
        raise ValueError(f"unknown duration distribution {kind!r}")
    if lo is not None:
        v = max(v, float(lo))
    if hi is not None:
        v = min(v, float(hi))
    return max(v, 0.0)


def pick_exit_code(codes: dict[int, float], rng: random.Random) -> int:
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
    """Chooses workloads by share and builds their manifests (deterministic for a seed)."""

    def __init__(self, spec: dict[str, Any], run_id: str = "adhoc", seed: int | None = None, stream: str = "0"):
        self.spec = spec
        self.namespace = spec["namespace"]
        self.scheduler = spec.get("scheduler_name") or "default-scheduler"
        self.run_id = run_id
        self.workloads = spec["workloads"]
        self.weights = [float(w.get("share", 1.0)) for w in self.workloads]
        base = spec["arrival"].get("seed", 1) if seed is None else seed
        self.rng = random.Random(f"{base}/{stream}")
        self.stream = stream
        self.counter = 0

    def next_instance(self) -> list[Submission]:
        """The objects of the next instance, in submission order."""
        w = self.rng.choices(self.workloads, weights=self.weights)[0]
        self.counter += 1
        instance = f"{w['name']}-{self.stream}-{self.counter}"
        return [self.build(w, role, instance) for role in w["roles"]]

    def build(self, w: dict[str, Any], role: dict[str, Any], instance: str) -> Submission:
        kind = w["kind"]
        labels = {
            LABEL_RUN: self.run_id,
            LABEL_WORKLOAD: w["name"],
            LABEL_ROLE: role["name"],
            LABEL_INSTANCE: instance,
        }
        requests = dict(role.get("resources") or {})
        gpus = requests.get("nvidia.com/gpu", "0")
        pod_labels = dict(labels, **{LABEL_GPUS: str(gpus)})
        limits = {k: v for k, v in requests.items() if k.startswith(EXTENDED_PREFIXES)}
        annotations: dict[str, str] = {}
        run = sample_duration(role.get("run_duration") or w.get("run_duration"), self.rng)
        annotations[ANN_RUN] = "forever" if kind == "Deployment" or run is None else go_duration(run)
        delay = sample_duration(role.get("startup_delay") or w.get("startup_delay"), self.rng)
        if delay is not None:
            annotations[ANN_DELAY] = go_duration(delay)
        if kind != "Deployment":
            annotations[ANN_EXIT] = str(pick_exit_code(w.get("exit_codes") or {0: 1.0}, self.rng))
        container: dict[str, Any] = {"name": "main", "image": IMAGE, "resources": {"requests": requests}}
        if limits:
            container["resources"]["limits"] = limits
        pod_spec: dict[str, Any] = {
            "restartPolicy": "Always" if kind == "Deployment" else "Never",
            "schedulerName": self.scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [container],
        }
        if role.get("node_selector"):
            pod_spec["nodeSelector"] = dict(role["node_selector"])
        if role.get("tolerations"):
            pod_spec["tolerations"] = [dict(t) for t in role["tolerations"]]
        if w.get("priority_class"):
            pod_spec["priorityClassName"] = w["priority_class"]
        template = {"metadata": {"labels": pod_labels, "annotations": annotations}, "spec": pod_spec}
        gen = f"{w['name']}-{role['name']}-"[:58]
        ns = self.namespace
        replicas = int(role.get("replicas") or 1)
        if kind == "Job":
            body: dict[str, Any] = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"generateName": gen, "labels": labels},
                "spec": {
                    "parallelism": replicas,
                    "completions": int(role.get("completions") or replicas),
                    "backoffLimit": int(w.get("backoff_limit") or 0),
                    "template": template,
                },
            }
            path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        elif kind == "Pod":
            body = {"apiVersion": "v1", "kind": "Pod", "metadata": dict(template["metadata"], generateName=gen),
                    "spec": pod_spec}
            path = f"/api/v1/namespaces/{ns}/pods"
        elif kind == "Deployment":
            body = {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"generateName": gen, "labels": labels},
                "spec": {"replicas": replicas, "selector": {"matchLabels": {LABEL_INSTANCE: instance}},
                         "template": template},
            }
            path = f"/apis/apps/v1/namespaces/{ns}/deployments"
        else:
            raise ValueError(f"unknown workload kind {kind!r}")
        return Submission(w["name"], role["name"], kind, path, body)
