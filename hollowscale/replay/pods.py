"""A trace's pods as the API objects the replay creates: the pod, its ResourceClaim, the priority classes.

How a trace pod is asked for (``docs/trace-format.md`` and the report's "how the replay was modelled"):

- CPU and memory: the pod's requests (``<milli>m``, ``<MiB>Mi``);
- GPUs, **counted**: ``nvidia.com/gpu`` (requests = limits) of ``num_gpu``; a GPU share is rounded up to
  one whole GPU (the report says so);
- GPUs, **DRA-whole**: the same claim asking all 1,000 shares of each device (a share rounded up);
- GPUs, **DRA-shared**: a ResourceClaim of its own (named as the pod) with one request of ``num_gpu``
  devices of the GPU class, each taking ``gpu_milli`` of the device's consumable capacity ``shares``
  (1,000 per GPU: the simulator's milli-GPU exactly, NVIDIA's ``--consumable-shares=1000`` mode), so a
  whole GPU asks all 1,000 and a share its part;
- a GPU-model constraint: node affinity ``In`` on the node label ``hollowscale.io/gpu-model``
  (counted), a CEL selector on the device's model attribute (DRA);
- QoS: a priority class per QoS class of the trace (:func:`priority_classes`); in the paper's protocol
  they never preempt (``preemptionPolicy: Never``): the simulator has no preemption.

Pods are bare pods named ``r<index>-<trace name>`` with the run's label, told by their annotation to
run until deleted (``hollowscale.io/run-duration``), so a bound pod holds its resources to the end.
"""

from __future__ import annotations

import re
from typing import Any

from hollowscale.trace import TracePod
from hollowscale.trace.model import GPU_MILLI
from hollowscale.trace.nodes import GPU_RESOURCE, MODEL_LABEL, REPLAY_NODE_KEY
from hollowscale.trace.paper import SequencedPod
from kubecore.namespaces import RUN_LABEL

IMAGE = "registry.local/hollowscale/noop:1"
#: labels and annotations of a replayed pod
REPLAY_LABEL = "hollowscale.io/replay"
KIND_LABEL = "hollowscale.io/trace-kind"
TRACE_POD_ANNOTATION = "hollowscale.io/trace-pod"
INDEX_ANNOTATION = "hollowscale.io/trace-index"
RUN_DURATION = "hollowscale.io/run-duration"
#: the DRA GPU class, its driver and the capacity a share is taken from (NVIDIA's names)
GPU_CLASS = "gpu.nvidia.com"
DRIVER = "gpu.nvidia.com"
SHARES = "shares"
MODEL_ATTRIBUTE = "productName"
CLAIM_REQUEST = "gpu"
#: priority of each QoS class the traces use (higher first); any other class gets :data:`OTHER_PRIORITY`
QOS_PRIORITY = {"Guaranteed": 4000, "LS": 3000, "Burstable": 2000, "BE": 1000, "BestEffort": 1000}
OTHER_PRIORITY = 500
GPU_MODES = ("counted", "dra-shared", "dra-whole")


def _slug(text: str, limit: int) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:limit].rstrip("-") or "pod"


def pod_name(sp: SequencedPod, width: int = 5) -> str:
    """``r<index>-<trace name>`` (a DNS subdomain: lower case, at most 253)."""
    return f"r{sp.index:0{width}d}-{_slug(sp.pod.name, 200)}"


def priority_class_name(qos: str, run_id: str) -> str:
    """The run's priority class of a QoS class (cluster-wide objects: the run's id keeps runs apart)."""
    return f"{_slug(run_id, 150)}-qos-{_slug(qos, 40)}"


def priority_classes(qos_classes: list[str], run_id: str, preempt: bool = False) -> list[dict[str, Any]]:
    """A PriorityClass per QoS class of the trace (none for pods without one)."""
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
             "metadata": {"name": priority_class_name(q, run_id), "labels": {RUN_LABEL: run_id}},
             "value": QOS_PRIORITY.get(q, OTHER_PRIORITY),
             "preemptionPolicy": "PreemptLowerPriority" if preempt else "Never",
             "description": f"trace QoS class {q} (hollowscale replay)"} for q in sorted(set(qos_classes)) if q]


def _model_selector(models: tuple[str, ...]) -> str:
    listed = ", ".join(f"'{m}'" for m in models)
    return f"device.attributes['{DRIVER}'].{MODEL_ATTRIBUTE} in [{listed}]"


def claim_manifest(name: str, pod: TracePod, run_id: str, whole: bool = False) -> dict[str, Any]:
    """The ResourceClaim of a GPU pod in a DRA replay: one request of ``num_gpu`` devices, each
    ``gpu_milli`` shares (``whole``: all 1,000 of each, a share rounded up)."""
    shares = GPU_MILLI if whole else pod.gpu_milli
    exactly: dict[str, Any] = {"deviceClassName": GPU_CLASS, "allocationMode": "ExactCount", "count": pod.num_gpu,
                               "capacity": {"requests": {SHARES: str(shares)}}}
    if pod.gpu_spec:
        exactly["selectors"] = [{"cel": {"expression": _model_selector(pod.gpu_spec)}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "labels": {RUN_LABEL: run_id, REPLAY_LABEL: "true"}},
            "spec": {"devices": {"requests": [{"name": CLAIM_REQUEST, "exactly": exactly}]}}}


def pod_manifest(sp: SequencedPod, run_id: str, gpu_mode: str, scheduler_name: str = "default-scheduler",
                 run_duration: str = "forever", width: int = 5, priorities: bool = True,
                 isolate: bool = True) -> dict[str, Any]:
    """The pod of one sequenced trace pod (module docstring); ``isolate``: only on the run's own nodes
    (:data:`~hollowscale.trace.nodes.REPLAY_NODE_KEY`: selected and tolerated)."""
    if gpu_mode not in GPU_MODES:
        raise ValueError(f"gpu_mode {gpu_mode!r}: expected one of {GPU_MODES}")
    pod = sp.pod
    name = pod_name(sp, width)
    resources: dict[str, Any] = {"requests": {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}}
    spec: dict[str, Any] = {"schedulerName": scheduler_name, "restartPolicy": "Never",
                            "terminationGracePeriodSeconds": 0, "enableServiceLinks": False,
                            "automountServiceAccountToken": False}
    if pod.num_gpu and gpu_mode == "counted":
        resources["requests"][GPU_RESOURCE] = str(pod.num_gpu)
        resources["limits"] = {GPU_RESOURCE: str(pod.num_gpu)}
        if pod.gpu_spec:
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": MODEL_LABEL, "operator": "In",
                                                             "values": list(pod.gpu_spec)}]}]}}}
    elif pod.num_gpu:
        resources["claims"] = [{"name": CLAIM_REQUEST}]
        spec["resourceClaims"] = [{"name": CLAIM_REQUEST, "resourceClaimName": name}]
    if isolate:
        spec["nodeSelector"] = {REPLAY_NODE_KEY: run_id}
        spec["tolerations"] = [{"key": REPLAY_NODE_KEY, "operator": "Equal", "value": run_id, "effect": "NoSchedule"}]
    if priorities and pod.qos:
        spec["priorityClassName"] = priority_class_name(pod.qos, run_id)
    spec["containers"] = [{"name": "main", "image": IMAGE, "resources": resources}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name,
                         "labels": {RUN_LABEL: run_id, REPLAY_LABEL: "true", KIND_LABEL: pod.kind},
                         "annotations": {RUN_DURATION: run_duration, TRACE_POD_ANNOTATION: pod.name,
                                         INDEX_ANNOTATION: str(sp.index)}},
            "spec": spec}
