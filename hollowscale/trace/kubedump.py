"""A real cluster as a trace: ``kubectl get nodes,pods -A -o json`` read into nodes and pods.

What is taken (``docs/trace-format.md`` says the same for users):

- a node: its allocatable CPU and memory (capacity when allocatable is absent), its GPUs (allocatable
  ``nvidia.com/gpu``, or another extended resource), its GPU model from a node label (the first of
  :data:`MODEL_LABELS` the GPU nodes carry, or the one named) and all its labels;
- a pod: its effective requests as the scheduler counts them (the containers' requests, a limit
  standing in for a missing request, restartable init containers added, the largest init container
  when it is larger, the pod's overhead), its GPUs (the same extended resource), a GPU share from
  the annotation ``alibabacloud.com/gpu-milli`` (the simulator's; 1..1000 on a one-GPU pod), its model
  constraint (a ``nodeSelector`` or a required node-affinity ``In``/``NotIn`` on the model label),
  its QoS class, phase and times (seconds from the earliest pod's creation).

Left out, and said in the trace's notes: DaemonSet and mirror (static) pods (they come with nodes,
not with the workload), items of other kinds, and a pod's ResourceClaims (a ``nodes,pods`` dump does
not hold the claims' devices).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from hollowscale.trace.csvfile import pod_rules
from hollowscale.trace.model import GPU_MILLI, TraceNode, TracePod, TraceProblem
from kubecore.quantity import parse_quantity
from kubecore.wording import show

GPU_RESOURCE = "nvidia.com/gpu"
#: node labels that name the GPU model, the first one GPU nodes carry is used
MODEL_LABELS = ("nvidia.com/gpu.product", "hollowscale.io/gpu-model", "alibabacloud.com/gpu-card-model",
                "cloud.google.com/gke-accelerator")
SHARE_ANNOTATION = "alibabacloud.com/gpu-milli"
MIB = 2**20


@dataclass(frozen=True)
class DumpOptions:
    """How a cluster dump is read.

    Attributes:
        gpu_resource: the extended resource that counts GPUs.
        model_label: the node label naming the GPU model (None: the first of :data:`MODEL_LABELS` found).
        share_annotation: the pod annotation holding a one-GPU pod's milli-GPU share.
        daemonsets: keep DaemonSet pods (left out by default).
    """

    gpu_resource: str = GPU_RESOURCE
    model_label: str | None = None
    share_annotation: str = SHARE_ANNOTATION
    daemonsets: bool = False


@dataclass
class Dump:
    """What a dump held: nodes, pods, and notes on what was left out."""

    nodes: list[TraceNode]
    pods: list[TracePod]
    notes: list[str]
    model_label: str | None


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one (a missing or malformed part of an object)."""
    return value if isinstance(value, Mapping) else {}


class _Item:
    """One item of the dump, with where it is for messages."""

    def __init__(self, file: str, index: int, kind: str, obj: Mapping[str, Any], problems: list[TraceProblem]):
        meta = _mapping(obj.get("metadata"))
        ns = meta.get("namespace")
        name = meta.get("name")
        self.name = f"{ns}/{name}" if ns else str(name)
        self.where = f"items[{index}] ({kind} {self.name})"
        self.file = file
        self.obj = obj
        self.problems = problems
        self.ok = True

    def bad(self, path: str, message: str) -> None:
        self.problems.append(TraceProblem(f"{self.where}.{path}", message, file=self.file))
        self.ok = False

    def get(self, path: str) -> Any:
        cur: Any = self.obj
        for part in path.split("."):
            if not isinstance(cur, Mapping):
                return None
            cur = cur.get(part)
        return cur

    def quantity(self, path: str, value: Any) -> Fraction:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            self.bad(path, f"expected a quantity, got {show(value)}")
            return Fraction(0)
        try:
            q = parse_quantity(value)
        except ValueError as exc:
            self.bad(path, str(exc))
            return Fraction(0)
        if q < 0:
            self.bad(path, f"expected a quantity >= 0, got {value!r}")
            return Fraction(0)
        return q


def _milli(q: Fraction) -> int:
    return math.ceil(q * 1000)


def _mib(q: Fraction, up: bool) -> int:
    return math.ceil(q / MIB) if up else math.floor(q / MIB)


def read_dump(path: Path, options: DumpOptions, problems: list[TraceProblem]) -> Dump:
    """The nodes and pods of a dump; every problem appended to ``problems``."""
    file = str(path)
    empty = Dump([], [], [], None)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        problems.append(TraceProblem("", "no such file", file=file))
        return empty
    except json.JSONDecodeError as exc:
        problems.append(TraceProblem("", f"not JSON: {exc.msg}", file=file, line=exc.lineno, column=exc.colno))
        return empty
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(TraceProblem("", f"cannot read the file: {exc}", file=file))
        return empty
    items = doc.get("items") if isinstance(doc, Mapping) else None
    if not isinstance(items, list):
        problems.append(TraceProblem("items", "expected the output of `kubectl get nodes,pods -A -o json` (an object "
                                     f"with an items list), got {show(doc)}", file=file))
        return empty
    list_kind = str(doc.get("kind") or "")
    default_kind = {"NodeList": "Node", "PodList": "Pod"}.get(list_kind, "")
    node_items: list[_Item] = []
    pod_items: list[_Item] = []
    others: dict[str, int] = {}
    for i, obj in enumerate(items):
        if not isinstance(obj, Mapping):
            problems.append(TraceProblem(f"items[{i}]", f"expected an object, got {show(obj)}", file=file))
            continue
        kind = str(obj.get("kind") or default_kind)
        if kind == "Node":
            node_items.append(_Item(file, i, kind, obj, problems))
        elif kind == "Pod":
            pod_items.append(_Item(file, i, kind, obj, problems))
        else:
            others[kind or "(no kind)"] = others.get(kind or "(no kind)", 0) + 1
    notes = [f"left out {n} item(s) of kind {k}" for k, n in sorted(others.items())]
    label = options.model_label or next(
        (lb for lb in MODEL_LABELS for it in node_items if isinstance(it.get("metadata.labels"), Mapping)
         and it.get("metadata.labels").get(lb)), None)
    nodes = [n for n in (_node(it, options, label) for it in node_items) if n is not None]
    unlabelled = sum(1 for n in nodes if n.gpus and n.model == "unlabelled")
    if unlabelled:
        notes.append(f"{unlabelled} GPU node(s) carry no model label ({label or ', '.join(MODEL_LABELS)}): model "
                     "'unlabelled'")
    cordoned = sum(1 for it in node_items if it.get("spec.unschedulable") is True)
    if cordoned:
        notes.append(f"{cordoned} node(s) were cordoned (spec.unschedulable): replayed as schedulable")
    models = sorted({n.model for n in nodes if n.gpus})
    skipped = {"DaemonSet": 0, "mirror": 0, "claims": 0}
    workload: list[_Item] = []
    for it in pod_items:
        owners = it.get("metadata.ownerReferences") or []
        if not options.daemonsets and any(isinstance(o, Mapping) and o.get("kind") == "DaemonSet" for o in owners):
            skipped["DaemonSet"] += 1
            continue
        annotations = it.get("metadata.annotations") or {}
        if isinstance(annotations, Mapping) and "kubernetes.io/config.mirror" in annotations:
            skipped["mirror"] += 1
            continue
        if it.get("spec.resourceClaims"):
            skipped["claims"] += 1
        workload.append(it)
    t0 = min((t for t in (_time(it, "metadata.creationTimestamp") for it in workload) if t is not None), default=None)
    pods = [p for p in (_pod(it, options, label, models, t0) for it in workload) if p is not None]
    if skipped["DaemonSet"]:
        notes.append(f"left out {skipped['DaemonSet']} DaemonSet pod(s)")
    if skipped["mirror"]:
        notes.append(f"left out {skipped['mirror']} mirror (static) pod(s)")
    if skipped["claims"]:
        notes.append(f"{skipped['claims']} pod(s) reference ResourceClaims: their devices are not in a nodes,pods dump "
                     "and are left out of their requests")
    return Dump(nodes, pods, notes, label)


def _name(it: _Item) -> str | None:
    name = it.get("metadata.name")
    if not isinstance(name, str) or not name:
        it.bad("metadata.name", f"expected a name, got {show(name)}")
        return None
    return it.name


def _node(it: _Item, options: DumpOptions, label: str | None) -> TraceNode | None:
    name = _name(it)
    alloc = it.get("status.allocatable")
    where = "status.allocatable"
    if not isinstance(alloc, Mapping) or not alloc:
        alloc, where = it.get("status.capacity"), "status.capacity"
    if not isinstance(alloc, Mapping):
        it.bad("status.allocatable", f"expected the node's allocatable resources, got {show(alloc)}")
        return None
    for key in ("cpu", "memory"):
        if key not in alloc:
            it.bad(f"{where}.{key}", "is missing")
    if not it.ok or name is None:
        return None
    cpu = math.floor(it.quantity(f"{where}.cpu", alloc["cpu"]) * 1000)
    memory = _mib(it.quantity(f"{where}.memory", alloc["memory"]), up=False)
    gpus_q = it.quantity(f"{where}.{options.gpu_resource}", alloc.get(options.gpu_resource, "0"))
    if gpus_q.denominator != 1:
        it.bad(f"{where}.{options.gpu_resource}", f"expected a whole number of GPUs, got {alloc[options.gpu_resource]!r}")
    labels = it.get("metadata.labels") or {}
    if not isinstance(labels, Mapping):
        it.bad("metadata.labels", f"expected a mapping, got {show(labels)}")
        labels = {}
    gpus = int(gpus_q)
    model = str(labels.get(label) or "unlabelled") if (gpus and label) else ("unlabelled" if gpus else "")
    if cpu <= 0:
        it.bad(f"{where}.cpu", f"expected more than 0 CPU, got {alloc['cpu']!r}")
    if memory <= 0:
        it.bad(f"{where}.memory", f"expected at least 1Mi, got {alloc['memory']!r}")
    if not it.ok:
        return None
    return TraceNode(name, cpu, memory, gpus, model,
                     labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())), item=it.where)


def _requests(it: _Item, path: str, container: Any, gpu_resource: str) -> tuple[Fraction, Fraction, Fraction]:
    """A container's (cpu, memory, gpus) requests: a limit stands in for a missing request."""
    res = _mapping(_mapping(container).get("resources"))
    req, lim = _mapping(res.get("requests")), _mapping(res.get("limits"))
    out = []
    for key in ("cpu", "memory", gpu_resource):
        if key in req:
            out.append(it.quantity(f"{path}.resources.requests.{key}", req[key]))
        elif key in lim:
            out.append(it.quantity(f"{path}.resources.limits.{key}", lim[key]))
        else:
            out.append(Fraction(0))
    return out[0], out[1], out[2]


def _model_constraint(it: _Item, label: str | None, models: list[str]) -> tuple[str, ...]:
    """The GPU models a pod may run on, from its nodeSelector or required node affinity (empty: any)."""
    if not label:
        return ()
    allowed: set[str] | None = None
    selector = it.get("spec.nodeSelector") or {}
    if isinstance(selector, Mapping) and label in selector:
        allowed = {str(selector[label])}
    terms = it.get("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms")
    if isinstance(terms, list) and terms:
        union: set[str] = set()
        for term in terms:
            exprs = term.get("matchExpressions") if isinstance(term, Mapping) else None
            term_allowed: set[str] | None = None
            for e in exprs or []:
                if not isinstance(e, Mapping) or e.get("key") != label:
                    continue
                values = {str(v) for v in e.get("values") or []}
                got = values if e.get("operator") == "In" else (set(models) - values if e.get("operator") == "NotIn"
                                                               else None)
                if got is not None:
                    term_allowed = got if term_allowed is None else term_allowed & got
            if term_allowed is None:  # a term that does not restrict the model: any model
                union = set()
                break
            union |= term_allowed
        if union:
            allowed = union if allowed is None else allowed & union
    return tuple(sorted(allowed)) if allowed else ()


def _time(it: _Item, path: str, value: Any = None) -> float | None:
    """A time of the item (at ``path``, or ``value`` when given) in seconds since the epoch."""
    value = it.get(path) if value is None else value
    if value is None:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        it.bad(path, f"expected an RFC 3339 time, got {value!r}")
        return None


def _scheduled(it: _Item) -> float | None:
    """When the pod was bound: its PodScheduled condition's last transition to True."""
    for i, cond in enumerate(it.get("status.conditions") or []):
        if isinstance(cond, Mapping) and cond.get("type") == "PodScheduled" and cond.get("status") == "True":
            return _time(it, f"status.conditions[{i}].lastTransitionTime", cond.get("lastTransitionTime"))
    return None


def _pod(it: _Item, options: DumpOptions, label: str | None, models: list[str], t0: float | None) -> TracePod | None:
    name = _name(it)
    containers = it.get("spec.containers")
    if not isinstance(containers, list) or not containers:
        it.bad("spec.containers", f"expected a list of containers, got {show(containers)}")
        return None
    total = [Fraction(0)] * 3
    for i, c in enumerate(containers):
        for k, v in enumerate(_requests(it, f"spec.containers[{i}]", c, options.gpu_resource)):
            total[k] += v
    sidecars = [Fraction(0)] * 3
    peak = [Fraction(0)] * 3
    for i, c in enumerate(it.get("spec.initContainers") or []):
        req = _requests(it, f"spec.initContainers[{i}]", c, options.gpu_resource)
        restartable = isinstance(c, Mapping) and c.get("restartPolicy") == "Always"
        for k in range(3):
            if restartable:
                sidecars[k] += req[k]
                peak[k] = max(peak[k], sidecars[k])
            else:
                peak[k] = max(peak[k], sidecars[k] + req[k])
    overhead = it.get("spec.overhead") or {}
    effective = [max(total[k] + sidecars[k], peak[k]) for k in range(3)]
    if isinstance(overhead, Mapping):
        effective[0] += it.quantity("spec.overhead.cpu", overhead.get("cpu", "0"))
        effective[1] += it.quantity("spec.overhead.memory", overhead.get("memory", "0"))
    if effective[2].denominator != 1:
        it.bad(f"spec.containers[*].resources.{options.gpu_resource}",
               f"expected a whole number of GPUs, got {float(effective[2])}")
    num_gpu = int(effective[2])
    annotations = it.get("metadata.annotations") or {}
    share = annotations.get(options.share_annotation) if isinstance(annotations, Mapping) else None
    gpu_milli = GPU_MILLI if num_gpu else 0
    if share is not None and num_gpu:
        text = str(share)
        if not text.isdigit():
            it.bad(f"metadata.annotations[{options.share_annotation}]",
                   f"expected milli-GPU 1..{GPU_MILLI}, got {text!r}")
        else:
            gpu_milli = int(text)
    created = _time(it, "metadata.creationTimestamp")
    deleted = _time(it, "metadata.deletionTimestamp")
    scheduled = _scheduled(it)
    if not it.ok or name is None:
        return None

    def rel(t: float | None) -> int | None:
        return None if t is None or t0 is None else max(0, round(t - t0))

    pod = TracePod(name=name, cpu_milli=_milli(effective[0]), memory_mib=_mib(effective[1], up=True), num_gpu=num_gpu,
                   gpu_milli=gpu_milli, gpu_spec=_model_constraint(it, label, models),
                   qos=str(it.get("status.qosClass") or ""), phase=str(it.get("status.phase") or ""),
                   creation_s=rel(created), deletion_s=rel(deleted), scheduled_s=rel(scheduled), item=it.where)
    field = {"gpu_milli": f"metadata.annotations[{options.share_annotation}]", "gpu_spec": "spec.nodeSelector",
             "deletion_time": "metadata.deletionTimestamp"}
    for column, message in pod_rules(pod):
        it.bad(field.get(column, column), message)
    return pod if it.ok else None
