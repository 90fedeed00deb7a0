"""Workload templates -> Kubernetes manifests (raw JSON dicts), one instance at a time.

An *instance* of a workload is one object per role (a Job, a bare Pod or a Deployment), all labelled
with the same ``hollowscale.io/instance``.  Run durations, startup delays and exit codes are sampled
per object (:meth:`kubecore.distributions.DurationDist.sample` on the mix's seeded generator) and
written as the pod-template annotations the hollow agent understands: ``hollowscale.io/run-duration``
(a Go duration rounded to milliseconds, or ``forever``), ``hollowscale.io/startup-delay``,
``hollowscale.io/exit-code``; a workload's ``checkpoint_interval`` as :data:`ANN_CHECKPOINT` (seconds,
a plain decimal such as ``60`` or ``90.5``) on every pod.  The labels (``LABEL_RUN``, ``LABEL_WORKLOAD``,
``LABEL_ROLE``, ``LABEL_INSTANCE``) are what the orchestrator's timeline collector groups by.

Batch workloads (see :mod:`loadgen.spec`: ``gang``, ``queued``, ``topology``; the spec's ``tenants``,
``gang_scheduling``, ``kueue``, ``volcano``) add, per instance and in submission order:

* gang + ``gang_scheduling``: a ``Workload`` (``scheduling.k8s.io/v1alpha2``, one podGroupTemplate
  :data:`GANG_TEMPLATE` with ``schedulingPolicy.gang.minCount``) and a ``PodGroup`` made from it, then the
  role objects, whose pods carry ``spec.schedulingGroup.podGroupName`` (the Job controller leaves a Job
  whose template names a group alone: it makes no Workload of its own);
* gang (any mode): label :data:`LABEL_GANG` (the group's name) and annotation :data:`ANN_GANG_MIN` on the
  objects and their pods, so the timeline collector knows gang membership and size without reading
  Workloads, also in the run variants that do not gang-schedule;
* queued + ``kueue``: the Job is created suspended with :data:`LABEL_KUEUE_QUEUE` (the tenant's
  LocalQueue) and, when given, :data:`LABEL_KUEUE_PRIORITY`;
* topology, as the spec's ``topology`` rendering says (the level's node label from the spec's
  ``topology_keys``, else :data:`loadgen.spec.TOPOLOGY_KEYS`):

  - ``affinity`` (the default): ``require`` with a PodGroup: ``schedulingConstraints.topology[{key}]``;
    otherwise pod affinity on the instance's own labels with the level's node label as ``topologyKey``
    (required or preferred; required works for the first pod too: a pod matching its own affinity term
    may start a domain);
  - ``none``: nothing (the baseline a topology variant is compared with);
  - ``intree``: the PodGroup's ``schedulingConstraints.topology[{key}]`` (gangs with ``gang_scheduling``);
  - ``kueue-required`` / ``kueue-preferred`` (queued Jobs): the pod-template annotation
    :data:`ANN_KUEUE_REQUIRED` / :data:`ANN_KUEUE_PREFERRED` = the level's key; Kueue's TAS picks the
    domain at admission and its ungater pins each pod there;
  - ``kueue-slice`` (queued Jobs): with the workload's ``slice_level``/``slice_size``,
    :data:`ANN_KUEUE_SLICE` = the slice level's key and :data:`ANN_KUEUE_SLICE_SIZE`, plus the outer level
    as required/preferred (by ``mode``) when it differs from the slice level (a slice-only request is
    Kueue's "unconstrained" outer level); a workload without slices renders as ``kueue-required`` /
    ``kueue-preferred`` by its ``mode``;
* ``volcano``: a Job workload is one Volcano Job per instance (``batch.volcano.sh/v1alpha1``, a task per
  role, ``minAvailable`` = gang minimum, else 1); a gang of bare Pods gets a Volcano PodGroup
  (``scheduling.volcano.sh/v1beta1``) named in each pod's ``scheduling.k8s.io/group-name`` annotation.

DRA claims (a role's ``claim``, see :class:`loadgen.spec.ClaimSpec`): each pod names its claim in
``spec.resourceClaims`` (``gpu``) and its container in ``resources.claims``; a claim per pod comes from
the role's ResourceClaimTemplate (:func:`claim_templates`: one per namespace and role, created before
the load, named by :func:`claim_template_name`; the claims the controller makes from it carry its
labels), a claim shared by the role's pods of an instance is a ResourceClaim submitted before the role's
object (:meth:`WorkloadMix.shared_claim_name`).  The pods' ``hollowscale.io/gpus`` label counts the
devices a pod holds alone (whole devices of a claim of its own; 0 for a memory share or a shared claim).

Group objects have fixed names (:meth:`WorkloadMix.group_name`: the instance name, cut to fit, and a hash
of run id and instance), because pods must name their group before it is created; the role objects keep
``generateName``.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from kubecore.durations import format_go_duration
from kubecore.namespaces import RUN_LABEL
from loadgen.spec import (
    CLAIM_REQUEST,
    DEFAULT_SCHEDULER,
    VOLCANO_JOB_NAME_MIN,
    LoadSpec,
    RoleSpec,
    TenantLoad,
    WorkloadSpec,
)

ANN_RUN = "hollowscale.io/run-duration"
#: a training job's checkpoint interval, seconds as a plain decimal (hollow.stages.ANN_CHECKPOINT: hollow
#: imports only kubecore, so it is written there too)
ANN_CHECKPOINT = "hollowscale.io/checkpoint-interval"
ANN_EXIT = "hollowscale.io/exit-code"
ANN_DELAY = "hollowscale.io/startup-delay"
#: the run id label (kubecore.namespaces releases a run's objects by it)
LABEL_RUN = RUN_LABEL
LABEL_WORKLOAD = "hollowscale.io/workload"
LABEL_ROLE = "hollowscale.io/role"
LABEL_INSTANCE = "hollowscale.io/instance"
LABEL_GPUS = "hollowscale.io/gpus"
IMAGE = "registry.local/hollowscale/noop:1"
#: the gang an object's pods belong to (the PodGroup's name) and the gang's minimum member count
LABEL_GANG = "hollowscale.io/gang"
ANN_GANG_MIN = "hollowscale.io/gang-min"
#: Kueue's labels on a queued Job: its LocalQueue and its WorkloadPriorityClass
LABEL_KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
LABEL_KUEUE_PRIORITY = "kueue.x-k8s.io/priority-class"
#: Kueue's TAS pod-template annotations (kueue.x-k8s.io/v1beta2 topology_types.go, Kueue v0.17.0)
ANN_KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
ANN_KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
ANN_KUEUE_SLICE = "kueue.x-k8s.io/podset-slice-required-topology"
ANN_KUEUE_SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
#: the pod annotation that puts a pod into a Volcano PodGroup
ANN_VOLCANO_GROUP = "scheduling.k8s.io/group-name"
#: the podGroupTemplate of every Workload loadgen creates
GANG_TEMPLATE = "members"
#: schedulerName of Volcano's pods when the spec keeps the default scheduler name
VOLCANO_SCHEDULER = "volcano"
SCHEDULING_API = "scheduling.k8s.io/v1alpha2"
VOLCANO_BATCH_API = "batch.volcano.sh/v1alpha1"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"
VOLCANO_SCHEDULING_API = "scheduling.volcano.sh/v1beta1"
EXTENDED_PREFIXES = ("nvidia.com/", "amd.com/", "hugepages-")
RESOURCE_API = "resource.k8s.io/v1"


def claim_template_name(run_id: str, workload: str, role: str) -> str:
    """The ResourceClaimTemplate of a role in a run: ``<workload>-<role>-<hash of the run id>``."""
    digest = hashlib.sha1(run_id.encode()).hexdigest()[:8]
    return f"{workload}-{role}"[:240].rstrip("-.") + f"-{digest}"


def claim_spec(role: RoleSpec) -> dict[str, Any]:
    """The ``spec`` of a ResourceClaim for the role's claim (one request, :data:`CLAIM_REQUEST`)."""
    assert role.claim is not None
    return {"devices": {"requests": [role.claim.request()]}}


def claim_templates(spec: LoadSpec, run_id: str) -> list[Submission]:
    """The ResourceClaimTemplates of the spec's roles with a claim per pod, one per namespace and role
    (created before the load; the run deletes them with its namespaces)."""
    out = []
    for ns in spec.namespaces():
        for w in spec.workloads:
            for role in w.roles:
                if role.claim is None or role.claim.shared != "pod":
                    continue
                labels = {LABEL_RUN: run_id, LABEL_WORKLOAD: w.name, LABEL_ROLE: role.name}
                body = {"apiVersion": RESOURCE_API, "kind": "ResourceClaimTemplate",
                        "metadata": {"name": claim_template_name(run_id, w.name, role.name), "labels": labels},
                        "spec": {"metadata": {"labels": labels}, "spec": claim_spec(role)}}
                out.append(Submission(w.name, role.name, "ResourceClaimTemplate",
                                      f"/apis/{RESOURCE_API}/namespaces/{ns}/resourceclaimtemplates", body))
    return out


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


def annotation_seconds(seconds: float) -> str:
    """Seconds as a plain decimal, rounded to milliseconds (``60``, ``90.5``): the checkpoint annotation."""
    return f"{round(seconds, 3):.3f}".rstrip("0").rstrip(".")


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
    checkpoint: str | None = None


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
        gpus=requests.get("nvidia.com/gpu") or (str(role.claim.count) if role.claim is not None
                                                 and role.claim.shared == "pod" and role.claim.memory is None else "0"),
        node_selector=dict(role.node_selector),
        tolerations=[t.to_manifest() for t in role.tolerations],
        exit_codes=[c for c, _ in items],
        exit_cum_weights=cum,
        generate_name=f"{w.name}-{role.name}-"[:58],
        checkpoint=None if w.checkpoint_interval is None else annotation_seconds(w.checkpoint_interval),
    )


@dataclass(frozen=True)
class _Plan:
    """How one workload renders in this spec's mode (computed once per mix).

    Attributes:
        batch: anything beyond the plain rendering (False: objects exactly as without batch fields).
        gang_min: the declared gang's minimum member count, or None.
        podgroup: in-tree Workload + PodGroup per instance (gang and ``gang_scheduling``).
        volcano_job: one Volcano Job per instance (``volcano`` and kind Job).
        volcano_podgroup: a Volcano PodGroup per instance (``volcano``, gang, kind Pod).
        kueue: created suspended with the tenant's LocalQueue label (``kueue`` and ``queued``).
        volcano_queue: the Volcano objects name the tenant's queue (``volcano``, ``queued``, tenants).
        topology_key: node label of the PodGroup's topology constraint, or None.
        kueue_topology: Kueue TAS pod-template annotations (empty without).
        affinity: ``required`` / ``preferred`` pod affinity on the instance, or None.
        affinity_key: its topologyKey.
        scheduler: ``spec.schedulerName`` of the pods.
        name_room: characters the group name may have.
        shared_claims: some role's pods of an instance share a ResourceClaim (submitted first).
    """

    batch: bool
    gang_min: int | None
    podgroup: bool
    volcano_job: bool
    volcano_podgroup: bool
    kueue: bool
    volcano_queue: bool
    topology_key: str | None
    affinity: str | None
    affinity_key: str
    scheduler: str
    name_room: int
    shared_claims: bool = False
    kueue_topology: tuple[tuple[str, str], ...] = ()


def _kueue_topology(spec: LoadSpec, w: WorkloadSpec) -> tuple[tuple[str, str], ...]:
    """Kueue's TAS annotations of a queued Job's pod template in a ``kueue-*`` rendering (empty otherwise)."""
    topo = w.topology
    if topo is None or not (spec.kueue and w.queued) or not spec.topology.startswith("kueue-"):
        return ()
    keys = spec.topology_keys
    outer = ANN_KUEUE_REQUIRED if spec.topology == "kueue-required" else ANN_KUEUE_PREFERRED \
        if spec.topology == "kueue-preferred" else ANN_KUEUE_REQUIRED if topo.mode == "require" else ANN_KUEUE_PREFERRED
    if spec.topology != "kueue-slice" or topo.slice_level is None:
        return ((outer, topo.key_in(keys)),)
    out = [(ANN_KUEUE_SLICE, topo.key_in(keys, topo.slice_level)), (ANN_KUEUE_SLICE_SIZE, str(topo.slice_size))]
    if topo.level != topo.slice_level:
        out.insert(0, (outer, topo.key_in(keys)))
    return tuple(out)


def _plan(spec: LoadSpec, w: WorkloadSpec) -> _Plan:
    gang_min = w.gang_min()
    podgroup = gang_min is not None and spec.gang_scheduling and not spec.volcano
    volcano_job = spec.volcano and w.kind == "Job"
    topo = w.topology
    rendering = spec.topology
    key = topo.key_in(spec.topology_keys) if topo is not None else ""
    topology_key = None
    affinity = None
    if topo is not None and rendering == "affinity":
        topology_key = key if topo.mode == "require" and podgroup else None
        if topology_key is None:
            affinity = "required" if topo.mode == "require" else "preferred"
    elif topo is not None and rendering == "intree" and podgroup:
        topology_key = key
    scheduler = spec.scheduler_name
    if spec.volcano and scheduler == DEFAULT_SCHEDULER:
        scheduler = VOLCANO_SCHEDULER
    room = 63
    if volcano_job:  # Volcano names the pods <job>-<task>-<index> (a qualified name: <= 63 characters)
        room -= max(2 + len(r.name) + len(str(r.replicas - 1)) for r in w.roles)
    if w.kind == "JobSet":  # JobSet's Jobs are <jobset>-<role>-0, their pods <job>-<index>-<5 random>: JobSet's
        # webhook refuses a JobSet whose longest pod name would pass 63 characters
        room -= max(10 + len(r.name) + len(str(r.replicas - 1)) for r in w.roles)
    plan = _Plan(
        batch=False, gang_min=gang_min, podgroup=podgroup, volcano_job=volcano_job,
        volcano_podgroup=spec.volcano and gang_min is not None and w.kind == "Pod",
        kueue=spec.kueue and w.queued, volcano_queue=spec.volcano and w.queued and bool(spec.tenants),
        topology_key=topology_key, affinity=affinity, affinity_key=key,
        scheduler=scheduler, name_room=max(room, VOLCANO_JOB_NAME_MIN),
        shared_claims=any(r.claim is not None and r.claim.shared == "instance" for r in w.roles),
        kueue_topology=_kueue_topology(spec, w),
    )
    return replace(plan, batch=gang_min is not None or plan.kueue or topo is not None or spec.volcano
                   or w.kind == "JobSet")


def _with_failure_fields(w: WorkloadSpec, job_spec: dict[str, Any]) -> dict[str, Any]:
    """A Job spec with the workload's pod failure policy and per-index backoff limit (an Indexed Job then)."""
    if w.pod_failure_policy is not None:
        job_spec["podFailurePolicy"] = {"rules": w.pod_failure_policy.rules()}
    if w.backoff_limit_per_index is not None:
        job_spec["completionMode"] = "Indexed"
        job_spec["backoffLimitPerIndex"] = w.backoff_limit_per_index
        job_spec.pop("backoffLimit", None)  # with a per-index limit the Job's own defaults to unlimited
    return job_spec


@dataclass
class Submission:
    """One create call: where to POST and what.

    ``role`` is "" for the objects of a whole instance (Workload, PodGroup, Volcano Job).
    """

    workload: str
    role: str
    kind: str
    path: str
    body: dict[str, Any]

    @property
    def request_name(self) -> str:
        """Locust's name of the create: ``create Job distill/student``, ``create PodGroup distill``."""
        return f"create {self.kind} {self.workload}/{self.role}" if self.role else f"create {self.kind} {self.workload}"


class WorkloadMix:
    """Chooses workloads (and tenants) by share and builds their manifests (deterministic for a seed and stream)."""

    def __init__(self, spec: LoadSpec, run_id: str = "adhoc", seed: int | None = None, stream: str = "0"):
        self.spec = spec
        self.namespace = spec.namespace
        self.scheduler = spec.scheduler_name
        self.run_id = run_id
        self.workloads = list(spec.workloads)
        self.weights = [w.share for w in self.workloads]
        self.tenants: list[TenantLoad] = list(spec.tenants)
        acc = 0.0
        self.tenant_cum: list[float] = []
        for t in self.tenants:
            acc += t.share
            self.tenant_cum.append(acc)
        base = spec.arrival.seed if seed is None else seed
        self.rng = random.Random(f"{base}/{stream}")
        self.stream = stream
        self.counter = 0
        self._instance_run: float | None = None
        self._templates = {(w.name, r.name): _template(w, r) for w in self.workloads for r in w.roles}
        self._plans = {w.name: _plan(spec, w) for w in self.workloads}

    def next_instance(self) -> list[Submission]:
        """The objects of the next instance, in submission order (group objects first)."""
        w = self.rng.choices(self.workloads, weights=self.weights)[0]
        self.counter += 1
        instance = f"{w.name}-{self.stream}-{self.counter}"
        tenant = self.rng.choices(self.tenants, cum_weights=self.tenant_cum)[0] if self.tenants else None
        # same_duration: one draw for every pod of the instance (members that finish together)
        self._instance_run = w.run_duration.sample(self.rng) if w.same_duration else None
        plan = self._plans[w.name]
        if not plan.batch and tenant is None:
            shared = self.shared_claims(w, instance, self.namespace) if plan.shared_claims else []
            return shared + [self.build(w, role, instance) for role in w.roles]
        return self.build_instance(w, instance, tenant)

    def shared_claim_name(self, instance: str, role: str) -> str:
        """The fixed name of the ResourceClaim a role's pods of an instance share: the instance and role
        cut to fit, then 10 hex digits of a hash of run id, instance and role (unique across runs)."""
        digest = hashlib.sha1(f"{self.run_id}/{instance}/{role}".encode()).hexdigest()[:10]
        return f"{instance}-{role}"[:200].rstrip("-.") + f"-{digest}"

    def shared_claims(self, w: WorkloadSpec, instance: str, namespace: str) -> list[Submission]:
        """The ResourceClaims an instance's roles share (``claim.shared: instance``), before the roles' objects."""
        out = []
        for role in w.roles:
            if role.claim is None or role.claim.shared != "instance":
                continue
            labels = {LABEL_RUN: self.run_id, LABEL_WORKLOAD: w.name, LABEL_ROLE: role.name, LABEL_INSTANCE: instance}
            body = {"apiVersion": RESOURCE_API, "kind": "ResourceClaim",
                    "metadata": {"name": self.shared_claim_name(instance, role.name), "labels": labels},
                    "spec": claim_spec(role)}
            out.append(Submission(w.name, role.name, "ResourceClaim",
                                  f"/apis/{RESOURCE_API}/namespaces/{namespace}/resourceclaims", body))
        return out

    def group_name(self, w: WorkloadSpec, instance: str) -> str:
        """The fixed name of an instance's group objects (PodGroup, Workload, Volcano Job): the instance
        name cut to fit, then 10 hex digits of a hash of run id and instance (unique across runs)."""
        digest = hashlib.sha1(f"{self.run_id}/{instance}".encode()).hexdigest()[:10]
        prefix = instance[: self._plans[w.name].name_room - 11].rstrip("-.")
        return f"{prefix}-{digest}" if prefix else digest

    def build_instance(self, w: WorkloadSpec, instance: str, tenant: TenantLoad | None = None) -> list[Submission]:
        """Every object of one instance in submission order: Workload, PodGroup, then one object per role
        (or the one Volcano Job)."""
        plan = self._plans[w.name]
        ns = tenant.namespace if tenant is not None else self.namespace
        group = self.group_name(w, instance) if plan.gang_min is not None or plan.volcano_job \
            or w.kind == "JobSet" else None
        queue = tenant.queue_name if tenant is not None else None
        out: list[Submission] = self.shared_claims(w, instance, ns) if plan.shared_claims else []
        labels = {LABEL_RUN: self.run_id, LABEL_WORKLOAD: w.name, LABEL_INSTANCE: instance}
        if group is not None and plan.gang_min is not None:
            labels[LABEL_GANG] = group
        if plan.podgroup:
            assert group is not None and plan.gang_min is not None
            out.extend(self._gang_objects(w, plan, ns, group, labels))
        elif plan.volcano_podgroup:
            assert group is not None and plan.gang_min is not None
            spec: dict[str, Any] = {"minMember": plan.gang_min}
            if plan.volcano_queue and queue is not None:
                spec["queue"] = queue
            if w.priority_class:
                spec["priorityClassName"] = w.priority_class
            body = {"apiVersion": VOLCANO_SCHEDULING_API, "kind": "PodGroup",
                    "metadata": {"name": group, "labels": labels,
                                 "annotations": {ANN_GANG_MIN: str(plan.gang_min)}},
                    "spec": spec}
            out.append(Submission(w.name, "", "VolcanoPodGroup",
                                  f"/apis/{VOLCANO_SCHEDULING_API}/namespaces/{ns}/podgroups", body))
        if plan.volcano_job:
            assert group is not None
            out.append(self._volcano_job(w, plan, instance, ns, group, queue, labels))
            return out
        if w.kind == "JobSet":
            assert group is not None
            out.append(self._jobset(w, plan, instance, ns, group, labels))
            return out
        out.extend(self.build(w, role, instance, namespace=ns, group=group, queue=queue) for role in w.roles)
        return out

    def _gang_objects(self, w: WorkloadSpec, plan: _Plan, ns: str, group: str,
                      labels: dict[str, str]) -> list[Submission]:
        """The in-tree Workload and the PodGroup made from its one template."""
        policy = {"gang": {"minCount": plan.gang_min}}
        tmpl: dict[str, Any] = {"name": GANG_TEMPLATE, "schedulingPolicy": policy}
        pg_spec: dict[str, Any] = {
            "podGroupTemplateRef": {"workload": {"workloadName": group, "podGroupTemplateName": GANG_TEMPLATE}},
            "schedulingPolicy": policy,
        }
        if plan.topology_key is not None:
            constraints = {"topology": [{"key": plan.topology_key}]}
            tmpl["schedulingConstraints"] = constraints
            pg_spec["schedulingConstraints"] = constraints
        if w.priority_class:
            tmpl["priorityClassName"] = w.priority_class
            pg_spec["priorityClassName"] = w.priority_class
        meta = {"name": group, "labels": labels, "annotations": {ANN_GANG_MIN: str(plan.gang_min)}}
        base = f"/apis/{SCHEDULING_API}/namespaces/{ns}"
        return [
            Submission(w.name, "", "Workload", f"{base}/workloads",
                       {"apiVersion": SCHEDULING_API, "kind": "Workload", "metadata": meta,
                        "spec": {"podGroupTemplates": [tmpl]}}),
            Submission(w.name, "", "PodGroup", f"{base}/podgroups",
                       {"apiVersion": SCHEDULING_API, "kind": "PodGroup", "metadata": meta, "spec": pg_spec}),
        ]

    def _volcano_job(self, w: WorkloadSpec, plan: _Plan, instance: str, ns: str, group: str, queue: str | None,
                     labels: dict[str, str]) -> Submission:
        """One Volcano Job for the whole instance: a task per role, the gang minimum as minAvailable.

        Without a gang, ``minAvailable`` is 1 and every task's 0 (any pod may start alone); with ``all``,
        each task's is its replicas; with N of them, each task's is 0 (no per-role minimum).
        """
        total = w.pods_per_instance()
        gang_min = plan.gang_min
        tasks = []
        for role in w.roles:
            template, _ = self._pod_template(w, role, instance, plan, group if gang_min is not None else None)
            tasks.append({"name": role.name, "replicas": role.replicas,
                          "minAvailable": role.replicas if gang_min == total else 0, "template": template})
        spec: dict[str, Any] = {"schedulerName": plan.scheduler, "minAvailable": gang_min or 1}
        if plan.volcano_queue and queue is not None:
            spec["queue"] = queue
        if w.priority_class:
            spec["priorityClassName"] = w.priority_class
        spec["maxRetry"] = w.backoff_limit
        spec["tasks"] = tasks
        meta: dict[str, Any] = {"name": group, "labels": labels}
        if gang_min is not None:
            meta["annotations"] = {ANN_GANG_MIN: str(gang_min)}
        body = {"apiVersion": VOLCANO_BATCH_API, "kind": "Job", "metadata": meta, "spec": spec}
        return Submission(w.name, "", "VolcanoJob", f"/apis/{VOLCANO_BATCH_API}/namespaces/{ns}/jobs", body)

    def _jobset(self, w: WorkloadSpec, plan: _Plan, instance: str, ns: str, name: str,
                labels: dict[str, str]) -> Submission:
        """One JobSet for the whole instance: a replicated Job per role (1 Job of the role's replicas, Indexed,
        ``backoffLimit`` the workload's), the workload's failure policy, named ``name``.

        Each Job's template carries the role's labels, so the Jobs the JobSet controller makes are the
        run's Jobs for the timeline as a plain Job workload's are; a gang's objects come before it as for
        any other kind.
        """
        gang = plan.gang_min is not None
        replicated = []
        for role in w.roles:
            template, role_labels = self._pod_template(w, role, instance, plan, name if gang else None)
            replicated.append({"name": role.name, "replicas": 1, "template": {
                "metadata": {"labels": role_labels},
                "spec": _with_failure_fields(w, {
                    "parallelism": role.replicas,
                    "completions": role.completions if role.completions is not None else role.replicas,
                    "backoffLimit": w.backoff_limit, "template": template})}})
        spec: dict[str, Any] = {"replicatedJobs": replicated}
        fp = w.failure_policy
        if fp is not None:
            policy: dict[str, Any] = {"maxRestarts": fp.max_restarts, "restartStrategy": fp.restart_strategy}
            if fp.rules:
                policy["rules"] = [
                    {"name": f"rule{i}", "action": r.action,
                     **({"onJobFailureReasons": list(r.on_job_failure_reasons)} if r.on_job_failure_reasons else {}),
                     **({"targetReplicatedJobs": list(r.target_roles)} if r.target_roles else {})}
                    for i, r in enumerate(fp.rules)]
            spec["failurePolicy"] = policy
        meta: dict[str, Any] = {"name": name, "labels": labels}
        if gang:
            meta["annotations"] = {ANN_GANG_MIN: str(plan.gang_min)}
        body = {"apiVersion": JOBSET_API, "kind": "JobSet", "metadata": meta, "spec": spec}
        return Submission(w.name, "", "JobSet", f"/apis/{JOBSET_API}/namespaces/{ns}/jobsets", body)

    def _pod_template(self, w: WorkloadSpec, role: RoleSpec, instance: str, plan: _Plan | None,
                      group: str | None) -> tuple[dict[str, Any], dict[str, str]]:
        """A role's pod template (metadata and spec, samples drawn) and the object labels beside it."""
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
        run = self._instance_run if w.same_duration and self._instance_run is not None \
            else w.run_duration_of(role).sample(self.rng)
        annotations[ANN_RUN] = "forever" if kind == "Deployment" else annotation_duration(run)
        if t.checkpoint is not None:
            annotations[ANN_CHECKPOINT] = t.checkpoint
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
            "schedulerName": self.scheduler if plan is None else plan.scheduler,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": IMAGE, "resources": resources}],
        }
        claim = role.claim
        if claim is not None:
            ref = {"name": CLAIM_REQUEST}
            if claim.shared == "instance":
                ref["resourceClaimName"] = self.shared_claim_name(instance, role.name)
            else:
                ref["resourceClaimTemplateName"] = claim_template_name(self.run_id, w.name, role.name)
            pod_spec["resourceClaims"] = [ref]
            pod_spec["containers"][0]["resources"] = dict(resources, claims=[{"name": CLAIM_REQUEST}])
        if t.node_selector:
            pod_spec["nodeSelector"] = t.node_selector
        if t.tolerations:
            pod_spec["tolerations"] = t.tolerations
        if w.priority_class:
            pod_spec["priorityClassName"] = w.priority_class
        if plan is not None:
            if group is not None:
                labels[LABEL_GANG] = group
                pod_labels[LABEL_GANG] = group
                annotations[ANN_GANG_MIN] = str(plan.gang_min)
                if plan.podgroup:
                    pod_spec["schedulingGroup"] = {"podGroupName": group}
                elif plan.volcano_podgroup:
                    annotations[ANN_VOLCANO_GROUP] = group
            annotations.update(plan.kueue_topology)
            if plan.affinity is not None:
                term = {"labelSelector": {"matchLabels": {LABEL_RUN: self.run_id, LABEL_INSTANCE: instance}},
                        "topologyKey": plan.affinity_key}
                pod_spec["affinity"] = {"podAffinity": (
                    {"requiredDuringSchedulingIgnoredDuringExecution": [term]} if plan.affinity == "required"
                    else {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}]})}
        template = {"metadata": {"labels": pod_labels, "annotations": annotations}, "spec": pod_spec}
        return template, labels

    def build(self, w: WorkloadSpec, role: RoleSpec, instance: str, namespace: str | None = None,
              group: str | None = None, queue: str | None = None) -> Submission:
        """One role's object (Job, bare Pod or Deployment) of an instance.

        ``namespace`` defaults to the spec's; ``group`` is the instance's gang (see :meth:`group_name`),
        ``queue`` the tenant's queue (used when the workload is queued and the spec runs Kueue).
        """
        kind = w.kind
        plan = self._plans[w.name]
        template, labels = self._pod_template(w, role, instance, plan if plan.batch else None, group)
        pod_spec = template["spec"]
        gen = self._templates[(w.name, role.name)].generate_name
        ns = self.namespace if namespace is None else namespace
        replicas = role.replicas
        if kind == "Job":
            meta: dict[str, Any] = {"generateName": gen, "labels": labels}
            job_spec: dict[str, Any] = _with_failure_fields(w, {
                "parallelism": replicas,
                "completions": role.completions if role.completions is not None else replicas,
                "backoffLimit": w.backoff_limit,
                "template": template,
            })
            if plan.batch:
                if group is not None:
                    meta["annotations"] = {ANN_GANG_MIN: str(plan.gang_min)}
                if plan.kueue and queue is not None:
                    labels[LABEL_KUEUE_QUEUE] = queue
                    if w.kueue_priority_class is not None:
                        labels[LABEL_KUEUE_PRIORITY] = w.kueue_priority_class
                    job_spec["suspend"] = True  # Kueue unsuspends it on admission (no webhook needed)
            body: dict[str, Any] = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": job_spec}
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
