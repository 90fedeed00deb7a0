"""What batch scheduling changes, computed from the watch timeline (pure functions over the records).

Users submit multi-role training jobs.  A *job* here is one **instance** (label
``hollowscale.io/instance``, per namespace): all its workload objects (Jobs, one per role, and bare
Pods) and all their pods, the *members*.  Gang instances carry ``hollowscale.io/gang`` (the PodGroup)
and ``hollowscale.io/gang-min``; queued Jobs are created suspended with ``kueue.x-k8s.io/queue-name``
and Kueue unsuspends them on admission; tenants are namespaces.  See
:mod:`hollowscale.measure.timeline` for the records and their timestamps (client receive times).

Definitions used throughout (``BATCH_SOURCES`` has one line per figure for ``summary.json``):

* **members expected** of an instance, per gang ("" = members in no gang): each Job contributes
  ``pods_expected`` (min(parallelism, completions)), each bare Pod 1, each pod of another owner (a
  ReplicaSet) 1.
* a member pod **counts as bound** from ``scheduled_ms`` until it fails or is deleted without having
  succeeded (a pod that Succeeded keeps counting: its part is done); it **holds its GPUs** from
  ``scheduled_ms`` until ``finished_ms`` or ``deleted_ms``.  "Running" is the same with ``running_ms``.
* **all bound** / **all running**: the first time every gang of the instance counts as many bound
  (running) members as it expects.
* **admitted**: the time its last Job was admitted (``JobRecord.admitted_ms``, the first time a Job
  created suspended was unsuspended); a Job created unsuspended (not queued) is admitted at creation.
  An instance is *queued* when any of its Jobs was created suspended.
* **partial**: an instance with at least one member counting as bound, not yet finished, and some gang
  with fewer bound members than it needs: ``gang_min`` for a gang that has one, else every member.
  The instance's **wasted GPUs** at that time are the GPUs held by its members (what gang scheduling
  would not have handed out).  A partial stretch shorter than ``PARTIAL_GRACE_MS`` (2 s) is not
  counted: it is one gang's bindings arriving a moment apart.  **Deadlocked**: partial at the end of
  the window.
* **outcome**: failed if any of its workload objects Failed, completed if all Complete, else
  unfinished, leaving out the Jobs superseded during the run (deleted before they completed: a JobSet's
  restart recreates its Jobs); each instance has exactly one.  Instances with no Job and no bare Pod (services) are
  not jobs and are left out (counted in ``services_skipped``).
* **saturated** (cluster): pending GPU demand > 0 and allocated GPUs >= ``SATURATION_ALLOCATED`` (90%)
  of the GPUs in ``gpus_by_flavor``.  Pending demand = GPUs of pods created, not bound and not gone,
  plus GPUs x ``pods_expected`` of Jobs suspended at that time (queued or evicted, not finished).

Durations are clamped at 0: pods and Jobs come on two watch streams, so a pod can be seen bound a
few milliseconds before its Job is seen admitted.  Percentiles are nearest-rank
(:func:`hollowscale.measure.derive.percentile`); series are sampled every ``step_s`` from ``start_ms``
(sample i counts what holds at ``start_ms + i * step_s``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hollowscale.measure.derive import pcts
from hollowscale.measure.timeline import JobRecord, PodRecord

#: allocated share of all GPUs from which the cluster counts as saturated (with pending demand > 0)
SATURATION_ALLOCATED = 0.9
NONE_KEY = "(none)"

#: how each figure of :func:`batch_measurements` is computed (for summary.json ``sources``)
BATCH_SOURCES: dict[str, str] = {
    "instances": "timeline: one job = one instance (namespace + label hollowscale.io/instance) with its Jobs, bare "
    "Pods and their pods; outcome failed if any workload object Failed, completed if all Complete, else "
    "unfinished; instances with no Job/bare Pod (services) are skipped",
    "job_steps_s": "timeline: per instance, created (first object seen) -> admitted (last Job admitted: first "
    "event with spec.suspend false for a Job created suspended; creation for unqueued Jobs) -> all bound (first "
    "time every gang has all its expected members bound and not failed/deleted) -> all running (same with phase "
    "Running) -> finished (last workload object Complete; completed instances only); nearest-rank p50/p90/p99 "
    "over the instances that reached both ends; negative steps (two watch streams) count as 0",
    "jobs_completed_per_hour": "timeline: completed instances whose finished time falls in [start, end], divided "
    "by the window in hours",
    "partial_jobs": "timeline: at each sample t, instances with >= 1 member bound, not finished, and a gang with "
    "fewer bound members than it needs (gang_min when set, else all its members), for longer than 2 s (shorter "
    "stretches are one gang's bindings arriving a moment apart); max and avg over samples",
    "wasted_gpu_seconds": "timeline: integral over [start, end] of the GPUs held (bound, not finished or deleted) "
    "by members of instances while they were partial (exact event times, not samples)",
    "deadlocked_jobs": "timeline: instances still partial at the end of the window, and the GPUs they hold",
    "queue_wait_s": "timeline: per instance, created -> admitted for queued instances (a Job created suspended), "
    "created -> all bound for the others; p50/p99 by queue (kueue.x-k8s.io/queue-name) and by priority class; "
    "waiting_at_end counts instances not admitted (not all bound) by the end",
    "tenant_share": "timeline: at each sample, a namespace's share of allocated GPUs (GPUs of its bound, not "
    "finished pods / all allocated GPUs); averaged over the samples where the cluster is saturated (pending GPU "
    "demand > 0 and allocated >= 90% of all GPUs); deviation_pct = (mean share - deserved) / deserved x 100; "
    "max_deviation_pct over tenants with a deserved share that had pending demand while saturated or held more "
    "than deserved (a tenant below its share that asked for nothing more is not treated unfairly)",
    "preemption": "timeline: pods with a DisruptionTarget=True condition by reason and priority class; Jobs "
    "evicted = changes of spec.suspend back to true after admission (Kueue evicts by suspending), by priority "
    "class; preempted instances (a disrupted pod or an evicted Job) by outcome, readmitted = all evicted Jobs "
    "unsuspended again",
    "accounting": "timeline: every instance in exactly one of completed/failed/unfinished (each instance counted "
    "once however often it was preempted and re-admitted), Jobs' admissions and evictions alternate, no "
    "completed Job ends suspended or unadmitted, no pod of a Job the timeline never saw",
    "crosscheck_counts": "timeline, within [start, end]: kueue_admissions = changes to unsuspended of Jobs with a "
    "queue label (first admissions and re-admissions, as Kueue counts them), kueue_evictions, gang_schedules = "
    "times a gang's bound-and-not-finished pods reached gang_min from below, pods preempted by the scheduler "
    "(DisruptionTarget reason PreemptionByScheduler)",
}


def _r(v: float | None, nd: int = 3) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else round(float(v), nd)


def _end(p: PodRecord) -> float | None:
    """When a pod stops holding its resources (finished or deleted, whichever first)."""
    ends = [x for x in (p.finished_ms, p.deleted_ms) if x is not None]
    return min(ends) if ends else None


def _unbound_at(p: PodRecord) -> float | None:
    """When a pod stops counting as a bound member: never after success, else when it fails or goes."""
    return None if p.phase == "Succeeded" else _end(p)


@dataclass
class Instance:
    """One job: its workload objects and member pods, and the times derived from them."""

    namespace: str
    name: str
    jobs: list[JobRecord] = field(default_factory=list)
    pods: list[PodRecord] = field(default_factory=list)
    expected: dict[str, int] = field(default_factory=dict)  # gang -> members expected
    gang_min: dict[str, int] = field(default_factory=dict)  # gang -> minimum members (when annotated)
    created_ms: float = 0.0
    queued: bool = False
    admitted_ms: float | None = None
    all_bound_ms: float | None = None
    all_running_ms: float | None = None
    finished_ms: float | None = None
    outcome: str = "unfinished"  # completed | failed | unfinished
    queue: str = ""
    priority_class: str = ""
    #: (from, to or None = still at the end, GPUs held) pieces of time while partial, within the window
    partial: list[tuple[float, float | None, float]] = field(default_factory=list)
    wasted_gpu_s: float = 0.0
    partial_at_end: bool = False
    gpus_held_at_end: float = 0.0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def required(self) -> dict[str, int]:
        """Members each gang needs to count as started: gang_min when set, else all."""
        return {g: (self.gang_min.get(g, n) if g else n) for g, n in self.expected.items()}


def group_instances(pods: Iterable[PodRecord], jobs: Iterable[JobRecord]) -> tuple[list[Instance], int]:
    """Instances with at least one workload object (Job or bare Pod), and the number skipped (services)."""
    by_key: dict[tuple[str, str], Instance] = {}
    job_key: dict[str, tuple[str, str]] = {}
    for j in jobs:
        key = (j.namespace, j.instance or j.uid)
        inst = by_key.get(key)
        if inst is None:
            inst = by_key[key] = Instance(key[0], key[1])
        inst.jobs.append(j)
        job_key[j.uid] = key
        inst.expected[j.gang] = inst.expected.get(j.gang, 0) + (j.pods_expected if j.kind == "Job" else 1)
        if j.gang and j.gang_min is not None:
            inst.gang_min[j.gang] = max(inst.gang_min.get(j.gang, 0), j.gang_min)
    skipped: set[tuple[str, str]] = set()
    for p in pods:
        key = (p.namespace, p.instance) if p.instance else job_key.get(p.owner_uid) or job_key.get(p.uid) or (
            p.namespace, p.uid)
        inst = by_key.get(key)
        if inst is None:
            skipped.add(key)
            continue
        inst.pods.append(p)
        if p.owner_uid not in job_key and p.uid not in job_key:  # another owner (a ReplicaSet): one member each
            inst.expected[p.gang] = inst.expected.get(p.gang, 0) + 1
        if p.gang and p.gang_min is not None:
            inst.gang_min[p.gang] = max(inst.gang_min.get(p.gang, 0), p.gang_min)
    return list(by_key.values()), len(skipped)


def _first_complete(inst: Instance, attr: str, required: dict[str, int]) -> float | None:
    """First time every gang counts ``required`` members from ``attr`` (scheduled_ms/running_ms) on."""
    ev: list[tuple[float, int, str]] = []
    for p in inst.pods:
        t = getattr(p, attr)
        if t is None:
            continue
        ev.append((t, 1, p.gang))
        u = _unbound_at(p)
        if u is not None:
            ev.append((max(u, t), -1, p.gang))
    if not ev or not required:
        return None
    ev.sort(key=lambda e: (e[0], -e[1]))
    have: dict[str, int] = {}
    i = 0
    while i < len(ev):
        t = ev[i][0]
        while i < len(ev) and ev[i][0] == t:
            have[ev[i][2]] = have.get(ev[i][2], 0) + ev[i][1]
            i += 1
        if all(have.get(g, 0) >= n for g, n in required.items()):
            return t
    return None


#: a stretch of partial start shorter than this is the bindings of one gang arriving a moment apart
#: (one scheduling cycle binds them all; the watch delivers each pod's binding separately), not a job
#: waiting for its members
PARTIAL_GRACE_MS = 2000.0


def _without_blips(pieces: list[tuple[float, float | None, float]]) -> list[tuple[float, float | None, float]]:
    """Drop stretches of back-to-back pieces shorter than :data:`PARTIAL_GRACE_MS` (a stretch that
    lasts to the end of the window is kept: it is not over)."""
    out: list[tuple[float, float | None, float]] = []
    run: list[tuple[float, float | None, float]] = []

    def flush() -> None:
        if not run:
            return
        end = run[-1][1]
        if end is None or end - run[0][0] >= PARTIAL_GRACE_MS:
            out.extend(run)
        run.clear()

    for piece in pieces:
        if run and run[-1][1] != piece[0]:
            flush()
        run.append(piece)
    flush()
    return out


def _partial_pieces(inst: Instance, start_ms: float, end_ms: float) -> None:
    """Fill ``inst.partial``, ``wasted_gpu_s``, ``partial_at_end``, ``gpus_held_at_end`` (window [start, end])."""
    req = inst.required()
    # (time, d_bound, d_gpus, gang); the instance's finish is a (t, 0, 0, None) marker
    ev: list[tuple[float, int, float, str | None]] = []
    for p in inst.pods:
        if p.scheduled_ms is None:
            continue
        ev.append((p.scheduled_ms, 1, p.gpus, p.gang))
        u, e = _unbound_at(p), _end(p)
        if u is not None:
            ev.append((max(u, p.scheduled_ms), -1, 0.0, p.gang))
        if e is not None:
            ev.append((max(e, p.scheduled_ms), 0, -p.gpus, p.gang))
    if not ev:
        return
    if inst.finished_ms is not None:
        ev.append((inst.finished_ms, 0, 0.0, None))
    ev.sort(key=lambda x: x[0])
    have: dict[str, int] = {}
    held = 0.0
    finished = False
    i = 0
    state: tuple[bool, float] = (False, 0.0)
    t_prev = ev[0][0]
    pieces: list[tuple[float, float | None, float]] = []

    def close(a: float, b: float | None) -> None:
        partial, gpus = state
        if not partial:
            return
        lo, hi = max(a, start_ms), min(b if b is not None else end_ms, end_ms)
        if hi > lo or (b is None and lo <= end_ms):
            pieces.append((lo, b if b is not None and b <= end_ms else None, gpus))

    while i < len(ev):
        t = ev[i][0]
        if t > end_ms:
            break
        close(t_prev, t)
        while i < len(ev) and ev[i][0] == t:
            _, db, dg, g = ev[i]
            if g is None:
                finished = True
            else:
                have[g] = have.get(g, 0) + db
                held += dg
            i += 1
        bound = sum(have.values())
        partial = (not finished and bound > 0 and any(have.get(g, 0) < n for g, n in req.items()))
        state = (partial, max(held, 0.0))
        t_prev = t
    close(t_prev, None if i >= len(ev) else ev[i][0])
    pieces = _without_blips(pieces)
    inst.wasted_gpu_s = sum(g * max(min(b if b is not None else end_ms, end_ms) - a, 0.0) / 1000.0
                            for a, b, g in pieces)
    inst.partial = pieces
    inst.partial_at_end = state[0]
    inst.gpus_held_at_end = state[1] if state[0] else 0.0


def analyse(pods: Sequence[PodRecord], jobs: Sequence[JobRecord], start_ms: float,
            end_ms: float) -> tuple[list[Instance], int]:
    """Instances with every derived time and partial piece filled in (see the module's definitions)."""
    instances, skipped = group_instances(pods, jobs)
    for inst in instances:
        inst.created_ms = min([j.created_ms for j in inst.jobs] + [p.created_ms for p in inst.pods])
        inst.queued = any(j.suspended_at_create for j in inst.jobs)
        adm: list[float | None] = [(j.admitted_ms if j.suspended_at_create else j.created_ms) for j in inst.jobs]
        inst.admitted_ms = None if any(a is None for a in adm) else max(a for a in adm if a is not None)
        every = dict(inst.expected)
        inst.all_bound_ms = _first_complete(inst, "scheduled_ms", every)
        inst.all_running_ms = _first_complete(inst, "running_ms", every)
        current = [j for j in inst.jobs if not j.superseded] or inst.jobs
        if any(j.outcome == "Failed" for j in current):
            inst.outcome = "failed"
        elif all(j.outcome == "Complete" for j in current):
            inst.outcome = "completed"
        if all(j.finished_ms is not None for j in current):
            inst.finished_ms = max(j.finished_ms for j in current if j.finished_ms is not None)
        queues = sorted({j.queue for j in inst.jobs if j.queue} | {p.queue for p in inst.pods if p.queue})
        inst.queue = ",".join(queues)
        pcs = sorted({j.priority_class for j in inst.jobs if j.priority_class}
                     | {p.priority_class for p in inst.pods if p.priority_class})
        inst.priority_class = ",".join(pcs)
        _partial_pieces(inst, start_ms, end_ms)
    return instances, skipped


# ------------------------------------------------------------------------------------------ sampling
class _Grid:
    """Samples t_i = start + i * step (i < n); an interval [a, b) covers the samples a <= t_i < b."""

    def __init__(self, start_ms: float, end_ms: float, step_s: float):
        self.start = start_ms
        self.step = max(step_s, 1e-3) * 1000.0
        self.n = max(1, math.ceil((end_ms - start_ms) / self.step) + 1)
        self.t_s = [round(i * self.step / 1000.0, 3) for i in range(self.n)]

    def idx(self, ms: float | None) -> int:
        if ms is None:
            return self.n
        return max(0, min(self.n, math.ceil((ms - self.start) / self.step)))

    def add(self, delta: list[float], a: float, b: float | None, v: float) -> None:
        ia, ib = self.idx(a), self.idx(b)
        if ib > ia:
            delta[ia] += v
            delta[ib] -= v

    def new(self) -> list[float]:
        return [0.0] * (self.n + 1)

    @staticmethod
    def integrate(delta: list[float], n: int) -> list[float]:
        out, acc = [], 0.0
        for i in range(n):
            acc += delta[i]
            out.append(acc)
        return out


def _suspended_intervals(j: JobRecord) -> list[tuple[float, float | None]]:
    """The intervals a Job spent suspended (queued or evicted), until it finished or was deleted."""
    stop = min([x for x in (j.finished_ms, j.deleted_ms) if x is not None], default=None)
    out: list[tuple[float, float | None]] = []
    state, since = j.suspended_at_create, j.created_ms
    for t in j.suspend_flips_ms:
        if state:
            out.append((since, t))
        state, since = not state, t
    if state:
        out.append((since, None))
    if stop is not None:
        out = [(a, min(b, stop) if b is not None else stop) for a, b in out if a < stop]
    return out


def _flavor_of(node: str, flavors: Sequence[str]) -> str:
    best = ""
    for f in flavors:
        if node.startswith(f + "-") and len(f) > len(best):
            best = f
    return best or "(other)"


def _normalised(shares: dict[str, float]) -> dict[str, float]:
    total = sum(v for v in shares.values() if v > 0)
    return {k: (v / total if total > 0 else 0.0) for k, v in shares.items()}


def tenant_shares(pods: Sequence[PodRecord], jobs: Sequence[JobRecord], gpus_by_flavor: dict[str, float],
                  deserved_share: dict[str, float], grid: _Grid) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tenant_share measurement, its series): each namespace's share of allocated GPUs under saturation."""
    total = float(sum(gpus_by_flavor.values()))
    n = grid.n
    alloc: dict[str, list[float]] = {}
    demand: dict[str, list[float]] = {}
    by_flavor: dict[str, list[float]] = {}
    flavors = list(gpus_by_flavor)
    for p in pods:
        if not p.gpus:
            continue
        e = _end(p)
        if p.scheduled_ms is not None:
            grid.add(alloc.setdefault(p.namespace, grid.new()), p.scheduled_ms, e, p.gpus)
            grid.add(by_flavor.setdefault(_flavor_of(p.node, flavors), grid.new()), p.scheduled_ms, e, p.gpus)
            pend_end: float | None = p.scheduled_ms
        else:
            pend_end = e
        grid.add(demand.setdefault(p.namespace, grid.new()), p.created_ms, pend_end, p.gpus)
    for j in jobs:
        if j.kind != "Job" or not j.gpus:
            continue
        for a, b in _suspended_intervals(j):
            grid.add(demand.setdefault(j.namespace, grid.new()), a, b, j.gpus * j.pods_expected)
    alloc_s = {ns: grid.integrate(d, n) for ns, d in alloc.items()}
    demand_s = {ns: grid.integrate(d, n) for ns, d in demand.items()}
    alloc_total = [sum(v[i] for v in alloc_s.values()) for i in range(n)]
    demand_total = [sum(v[i] for v in demand_s.values()) for i in range(n)]
    saturated = [total > 0 and demand_total[i] > 1e-9 and alloc_total[i] >= SATURATION_ALLOCATED * total - 1e-9
                 for i in range(n)]
    sat_idx = [i for i in range(n) if saturated[i]]
    deserved = _normalised(deserved_share)
    tenants: dict[str, Any] = {}
    worst: float | None = None
    for ns in sorted(set(alloc_s) | set(demand_s) | set(deserved)):
        al = alloc_s.get(ns, [0.0] * n)
        dm = demand_s.get(ns, [0.0] * n)
        shares = [al[i] / alloc_total[i] for i in sat_idx if alloc_total[i] > 0]
        mean = sum(shares) / len(shares) if shares else None
        want = deserved.get(ns)
        contending = sum(1 for i in sat_idx if dm[i] > 1e-9)
        row: dict[str, Any] = {
            "mean_share_pct": _r(None if mean is None else mean * 100),
            "deserved_pct": _r(None if want is None else want * 100),
            "deviation_pct": None, "deviation_pp": None,
            "contending_samples": contending,
            "mean_allocated_gpus": _r(sum(al[i] for i in sat_idx) / len(sat_idx)) if sat_idx else None,
        }
        if mean is not None and want:
            dev = (mean - want) / want * 100.0
            row["deviation_pct"] = _r(dev)
            row["deviation_pp"] = _r((mean - want) * 100.0)
            if contending or mean > want:
                worst = abs(dev) if worst is None else max(worst, abs(dev))
        tenants[ns] = row
    step_s = grid.step / 1000.0
    flav: dict[str, Any] = {}
    for f, d in sorted(by_flavor.items()):
        s = grid.integrate(d, n)
        cap = gpus_by_flavor.get(f)
        pct = [100.0 * v / cap for v in s] if cap else None
        flav[f] = {"gpus": cap, "avg_pct": _r(sum(pct) / n) if pct else None, "max_pct": _r(max(pct)) if pct else None,
                   "max_gpus": _r(max(s))}
    meas = {
        "gpus_total": total,
        "saturation_rule": f"pending GPU demand > 0 and allocated >= {SATURATION_ALLOCATED:.0%} of {total:g} GPUs",
        "saturated_samples": len(sat_idx),
        "samples": n,
        "saturated_s": _r(len(sat_idx) * step_s),
        "by_tenant": tenants,
        "max_deviation_pct": _r(worst),
        "allocation_by_flavor": flav,
    }
    ser = {
        "allocated_gpus": [_r(v) for v in alloc_total],
        "pending_gpu_demand": [_r(v) for v in demand_total],
        "saturated": [int(s) for s in saturated],
        "tenant_share_pct": {ns: [_r(100.0 * v[i] / alloc_total[i]) if alloc_total[i] > 0 else None
                                  for i in range(n)] for ns, v in sorted(alloc_s.items())},
    }
    return meas, ser


# ------------------------------------------------------------------------------------------ figures
def _steps(instances: Sequence[Instance]) -> dict[str, Any]:
    def span(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else max(b - a, 0.0) / 1000.0

    done = [i for i in instances if i.outcome == "completed"]
    pairs: dict[str, list[float | None]] = {
        "created_to_admitted": [span(i.created_ms, i.admitted_ms) for i in instances],
        "admitted_to_all_bound": [span(i.admitted_ms, i.all_bound_ms) for i in instances],
        "all_bound_to_all_running": [span(i.all_bound_ms, i.all_running_ms) for i in instances],
        "all_running_to_finished": [span(i.all_running_ms, i.finished_ms) for i in done],
        "created_to_all_running": [span(i.created_ms, i.all_running_ms) for i in instances],
        "created_to_finished": [span(i.created_ms, i.finished_ms) for i in done],
    }
    return {k: pcts([v for v in vs if v is not None]) for k, vs in pairs.items()}


def _queue_wait(instances: Sequence[Instance]) -> dict[str, Any]:
    rows: dict[str, dict[str, list[float]]] = {"by_queue": {}, "by_priority_class": {}}
    waiting: dict[str, dict[str, int]] = {"by_queue": {}, "by_priority_class": {}}
    for i in instances:
        end = i.admitted_ms if i.queued else i.all_bound_ms
        for dim, key in (("by_queue", i.queue or NONE_KEY), ("by_priority_class", i.priority_class or NONE_KEY)):
            rows[dim].setdefault(key, [])
            waiting[dim].setdefault(key, 0)
            if end is None:
                waiting[dim][key] += 1
            else:
                rows[dim][key].append(max(end - i.created_ms, 0.0) / 1000.0)
    return {dim: {k: dict(pcts(v, (50, 99)), waiting_at_end=waiting[dim][k]) for k, v in sorted(rows[dim].items())}
            for dim in rows}


def _preemption(pods: Sequence[PodRecord], jobs: Sequence[JobRecord], instances: Sequence[Instance]) -> dict[str, Any]:
    by_reason: dict[str, int] = {}
    by_pc: dict[str, dict[str, int]] = {}
    for p in pods:
        if p.disrupted_ms is None:
            continue
        reason = p.disruption_reason or "?"
        by_reason[reason] = by_reason.get(reason, 0) + 1
        row = by_pc.setdefault(p.priority_class or NONE_KEY, {})
        row[reason] = row.get(reason, 0) + 1
    ev_pc: dict[str, int] = {}
    for j in jobs:
        if j.evictions:
            k = j.priority_class or NONE_KEY
            ev_pc[k] = ev_pc.get(k, 0) + j.evictions
    evicted_jobs = [j for j in jobs if j.evictions]
    pre = [i for i in instances if any(p.disrupted_ms is not None for p in i.pods) or any(j.evictions for j in i.jobs)]
    return {
        "pods_disrupted": {"total": sum(by_reason.values()), "by_reason": dict(sorted(by_reason.items())),
                           "by_priority_class": {k: dict(sorted(v.items())) for k, v in sorted(by_pc.items())}},
        "jobs_evicted": {"evictions": sum(j.evictions for j in jobs), "jobs": len(evicted_jobs),
                         "readmitted_jobs": sum(1 for j in evicted_jobs if not j.suspended),
                         "by_priority_class": dict(sorted(ev_pc.items()))},
        "instances_preempted": {
            "total": len(pre),
            "completed": sum(1 for i in pre if i.outcome == "completed"),
            "failed": sum(1 for i in pre if i.outcome == "failed"),
            "unfinished": sum(1 for i in pre if i.outcome == "unfinished"),
            "readmitted": sum(1 for i in pre if any(j.evictions for j in i.jobs)
                              and not any(j.evictions and j.suspended for j in i.jobs)),
        },
    }


def _accounting(pods: Sequence[PodRecord], jobs: Sequence[JobRecord], instances: Sequence[Instance]) -> dict[str, Any]:
    problems: list[str] = []
    outcome: dict[str, str] = {}
    for i in instances:
        if i.key in outcome:
            problems.append(f"instance {i.key} counted twice")
        outcome[i.key] = i.outcome
    counts = {k: sum(1 for v in outcome.values() if v == k) for k in ("completed", "failed", "unfinished")}
    if sum(counts.values()) != len(outcome):
        problems.append("outcomes do not add up to the instances")
    job_uids = {j.uid for j in jobs}
    orphans = sum(1 for p in pods if p.owner_kind == "Job" and p.owner_api in ("", "batch/v1")
                  and p.owner_uid not in job_uids)
    if orphans:
        problems.append(f"{orphans} pods of Jobs the timeline never saw")
    for j in jobs:
        if j.kind != "Job":
            continue
        ups = j.admissions + (0 if j.suspended_at_create else 1)
        if ups - j.evictions != (0 if j.suspended else 1):
            problems.append(f"Job {j.namespace}/{j.name}: {j.admissions} admissions and {j.evictions} evictions "
                            f"do not alternate (suspended={j.suspended})")
        if j.outcome == "Complete" and (j.suspended or (j.suspended_at_create and j.admitted_ms is None)):
            problems.append(f"Job {j.namespace}/{j.name} Complete while suspended or never admitted")
    return {"instances": len(outcome), **counts,
            "preempted_once_each": len({i.key for i in instances
                                        if any(j.evictions for j in i.jobs)
                                        or any(p.disrupted_ms is not None for p in i.pods)}),
            "problems": problems[:50], "problem_count": len(problems), "ok": not problems}


def crosscheck_counts(pods: Sequence[PodRecord], jobs: Sequence[JobRecord], start_ms: float,
                      end_ms: float) -> dict[str, Any]:
    """What the timeline saw in [start_ms, end_ms] that Kueue and the scheduler count too (for
    :func:`hollowscale.batch.promfigures.batch_crosscheck`; pass the window of the Prometheus queries)."""
    admissions = evictions = 0
    for j in jobs:
        if not j.queue:
            continue
        state = j.suspended_at_create
        for t in j.suspend_flips_ms:
            state = not state
            if start_ms <= t <= end_ms:
                if state:
                    evictions += 1
                else:
                    admissions += 1
    gangs: dict[tuple[str, str], list[PodRecord]] = {}
    for p in pods:
        if p.gang:
            gangs.setdefault((p.namespace, p.gang), []).append(p)
    schedules = started = 0
    for members in gangs.values():
        need = max((p.gang_min for p in members if p.gang_min is not None), default=None)
        ev: list[tuple[float, int]] = []
        for p in members:
            if p.scheduled_ms is None:
                continue
            ev.append((p.scheduled_ms, 1))
            e = _end(p)
            if e is not None:
                ev.append((max(e, p.scheduled_ms), -1))
        ev.sort(key=lambda x: (x[0], x[1]))
        if need is None:
            need = len(members)
        held, ok, once = 0, False, False
        i = 0
        while i < len(ev):
            t = ev[i][0]
            while i < len(ev) and ev[i][0] == t:
                held += ev[i][1]
                i += 1
            now = held >= need > 0
            if now and not ok:
                once = True
                if start_ms <= t <= end_ms:
                    schedules += 1
            ok = now
        started += once
    preempted = sum(1 for p in pods if p.disruption_reason == "PreemptionByScheduler" and p.disrupted_ms is not None
                    and start_ms <= p.disrupted_ms <= end_ms)
    return {"window_ms": [start_ms, end_ms], "kueue_admissions": admissions, "kueue_evictions": evictions,
            "gangs": len(gangs), "gangs_started": started, "gang_schedules": schedules,
            "pods_preempted_by_scheduler": preempted}


def batch_measurements(pods: Sequence[PodRecord], jobs: Sequence[JobRecord], *, gpus_by_flavor: dict[str, float],
                       deserved_share: dict[str, float], start_ms: float, end_ms: float,
                       step_s: float = 1.0) -> dict[str, Any]:
    """Batch scheduling figures over the window [start_ms, end_ms] (epoch ms, the load window).

    Args:
        pods, jobs: ``Timeline.snapshot()``.
        gpus_by_flavor: GPUs per flavor (pool name, the node-name prefix ``<pool>-<index>``); their sum is
            the cluster's GPUs for saturation and shares.
        deserved_share: namespace -> deserved share of the GPUs, as fractions or weights (normalised
            by their sum), e.g. ``{"team-a": 1, "team-b": 2, "team-c": 1}``.
        step_s: sampling step of the series.

    Returns ``{"measurements": {...}, "series": {...}, "sources": BATCH_SOURCES}``; measurements keys:
    ``instances``, ``job_steps_s``, ``jobs_completed_per_hour``, ``partial_jobs``, ``wasted_gpu_seconds``,
    ``deadlocked_jobs``, ``queue_wait_s``, ``tenant_share``, ``preemption``, ``accounting``,
    ``crosscheck_counts``; series keys: ``t_s``, ``partial_jobs``, ``partial_gpus``, ``allocated_gpus``,
    ``pending_gpu_demand``, ``saturated``, ``tenant_share_pct`` (namespace -> list).
    """
    instances, skipped = analyse(pods, jobs, start_ms, end_ms)
    grid = _Grid(start_ms, end_ms, step_s)
    n = grid.n
    d_count, d_gpus = grid.new(), grid.new()
    for inst in instances:
        for a, b, g in inst.partial:
            grid.add(d_count, a, b, 1.0)
            grid.add(d_gpus, a, b, g)
    partial_series = [round(v) for v in grid.integrate(d_count, n)]
    partial_gpus = [_r(v) for v in grid.integrate(d_gpus, n)]
    ever = [i for i in instances if i.partial]
    dead = [i for i in instances if i.partial_at_end]
    window_h = max(end_ms - start_ms, 1.0) / 3_600_000.0
    completed_in = sum(1 for i in instances if i.outcome == "completed" and i.finished_ms is not None
                       and start_ms <= i.finished_ms <= end_ms)
    counts = {k: sum(1 for i in instances if i.outcome == k) for k in ("completed", "failed", "unfinished")}
    share, share_series = tenant_shares(pods, jobs, gpus_by_flavor, deserved_share, grid)
    measurements: dict[str, Any] = {
        "instances": {"total": len(instances), **counts, "queued": sum(1 for i in instances if i.queued),
                      "gang": sum(1 for i in instances if i.gang_min or any(g for g in i.expected)),
                      "services_skipped": skipped},
        "job_steps_s": _steps(instances),
        "jobs_completed_per_hour": _r(completed_in / window_h),
        "partial_jobs": {"max": max(partial_series) if partial_series else 0,
                         "avg": _r(sum(partial_series) / n), "instances_ever_partial": len(ever),
                         "series": "series.partial_jobs"},
        "wasted_gpu_seconds": _r(sum(i.wasted_gpu_s for i in instances)),
        "deadlocked_jobs": {"count": len(dead), "gpus_held": _r(sum(i.gpus_held_at_end for i in dead)),
                            "instances": sorted(i.key for i in dead)[:20]},
        "queue_wait_s": _queue_wait(instances),
        "tenant_share": share,
        "preemption": _preemption(pods, jobs, instances),
        "accounting": _accounting(pods, jobs, instances),
        "crosscheck_counts": crosscheck_counts(pods, jobs, start_ms, end_ms),
    }
    series: dict[str, Any] = {"t_s": grid.t_s, "partial_jobs": partial_series, "partial_gpus": partial_gpus,
                              **share_series}
    return {"measurements": measurements, "series": series, "sources": dict(BATCH_SOURCES)}
