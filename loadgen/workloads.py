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
    """A drawn duration as the annotation's Go duration, rounded to milliseconds (``forever`` for inf).

    Equal to ``format_go_duration(round(seconds, 3))``; the common cases (under a minute) are
    formatted directly, since this runs once per submitted object.
    """
    if math.isinf(seconds):
        return "forever"
    ms = round(round(seconds, 3) * 1000)  # the same rounding as round(seconds, 3)
    if ms <= 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    if ms < 60_000:
        whole, frac = divmod(ms, 1000)
        return f"{whole}.{frac:03d}".rstrip("0") + "s" if frac else f"{whole}s"
    return format_go_duration(ms / 1000)


def pick_exit_code(codes: Mapping[int, float], rng: random.Random) -> int:
    """An exit code drawn by weight (codes in ascending order)."""
    items = sorted(codes.items())
    return rng.choices([c for c, _ in items], weights=[w for _, w in items])[0]


@dataclass(frozen=True)
class _Template:
    """What every object of one (workload, role) shares, computed once per mix.

    The dicts are shared between the bodies built from it: a body is serialised right away and
    never changed, so copying them per create would only cost CPU on Locust's hot path.
    """

    requests: dict[str, str]
    limits: dict[str, str]
    gpus: str
    node_selector: dict[str, str]
    tolerations: list[dict[str, Any]]
    exit_codes: list[int]
    exit_cum_weights: list[float]
    generate_name: str


def _template(w: WorkloadSpec, role: RoleSpec) -> _Template:
    requests = dict(role.resources)
    items = sorted(w.exit_codes.items())
    cum: list[float] = []
    acc = 0.0
    for _, weight in items:
        acc += weight
        cum.append(acc)
    return _Template(
        requests=requests,
        limits={k: v for k, v in requests.items() if k.startswith(EXTENDED_PREFIXES)},
        gpus=requests.get("nvidia.com/gpu", "0"),
        node_selector=dict(role.node_selector),
        tolerations=[t.to_manifest() for t in role.tolerations],
        exit_codes=[c for c, _ in items],
        exit_cum_weights=cum,
        generate_name=f"{w.name}-{role.name}-"[:58],
    )


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
        self._templates = {(w.name, r.name): _template(w, r) for w in self.workloads for r in w.roles}

    def next_instance(self) -> list[Submission]:
        """The objects of the next instance, in submission order."""
        w = self.rng.choices(self.workloads, weights=self.weights)[0]
        self.counter += 1
        instance = f"{w.name}-{self.stream}-{self.counter}"
        return [self.build(w, role, instance) for role in w.roles]

    def build(self, w: WorkloadSpec, role: RoleSpec, instance: str) -> Submission:
        kind = w.kind
        t = self._templates[(w.name, role.name)]
        labels = {
            LABEL_RUN: self.run_id,
            LABEL_WORKLOAD: w.name,
            LABEL_ROLE: role.name,
            LABEL_INSTANCE: instance,
        }
        pod_labels = dict(labels)
        pod_labels[LABEL_GPUS] = t.gpus
        annotations: dict[str, str] = {}
        run = w.run_duration_of(role).sample(self.rng)
        annotations[ANN_RUN] = "forever" if kind == "Deployment" else annotation_duration(run)
        delay = w.startup_delay_of(role)
        if delay is not None:
            annotations[ANN_DELAY] = annotation_duration(delay.sample(self.rng))
        if kind != "Deployment":
            # same draw as rng.choices(codes, weights=...): choices turns weights into these sums
            annotations[ANN_EXIT] = str(self.rng.choices(t.exit_codes, cum_weights=t.exit_cum_weights)[0])
        resources: dict[str, Any] = {"requests": t.requests}
        if t.limits:
            resources["limits"] = t.limits
        pod_spec: dict[str, Any] = {
            "restartPolicy": "Always" if kind == "Deployment" else "Never",
            "schedulerName": self.scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": IMAGE, "resources": resources}],
        }
        if t.node_selector:
            pod_spec["nodeSelector"] = t.node_selector
        if t.tolerations:
            pod_spec["tolerations"] = t.tolerations
        if w.priority_class:
            pod_spec["priorityClassName"] = w.priority_class
        template = {"metadata": {"labels": pod_labels, "annotations": annotations}, "spec": pod_spec}
        gen = t.generate_name
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
