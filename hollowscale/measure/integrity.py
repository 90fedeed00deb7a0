"""Nothing lost, nothing counted twice: the run's own counts against the apiserver's record.

The local cluster's apiserver writes an audit log of every create of a pod, a binding and a Job
(``hollowscale.cluster.components.apiserver.AUDIT_POLICY``), appended to by every apiserver process of the cluster,
so it survives restarts of any component (a counter in ``/metrics`` starts again at 0 with each
apiserver process, and increments after its last scrape are never seen).  Against it:

* jobs: Jobs the apiserver created (201) in the run's namespace vs Job records of the watch timeline;
* pods: pods the apiserver created (bare pods of the load and the Job controller's) vs pod records;
* bindings: pods the apiserver bound (``pods/NAME/binding``, 201), by name, vs pods the timeline saw
  scheduled.

``lost`` = the apiserver has it and the timeline does not; ``double_counted`` = the timeline has more
than the apiserver created.  Both must be 0.  The audit log cannot tell the run's pods from other
pods created in the same namespace at the same time: a run in a namespace it shares compares counts
that include the other's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from hollowscale.measure.timeline import JobRecord, PodRecord


@dataclass
class AuditCounts:
    """Creates the apiserver answered with 201 in one namespace and time window."""

    jobs: int = 0
    pods: int = 0
    bindings: dict[str, int] = field(default_factory=dict)  # pod name -> successful bindings
    refused: dict[str, int] = field(default_factory=dict)  # "resource code" -> count (not 201)
    creates_by_user: dict[str, int] = field(default_factory=dict)  # Jobs and pods created, by user
    lines: int = 0


def _epoch(ts: str) -> float:
    return dt.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def read_audit(path: Path, namespace: str | Collection[str], t0: float, t1: float) -> AuditCounts:
    """Count the audit log's completed creates in ``namespace`` (or any of several: the tenants')
    received in ``[t0, t1]`` (epoch s)."""
    namespaces = {namespace} if isinstance(namespace, str) else set(namespace)
    out = AuditCounts()
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return out
    with fh:
        for raw in fh:
            try:
                ev = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue  # a line cut by a killed apiserver
            out.lines += 1
            ref = ev.get("objectRef") or {}
            if ev.get("stage") != "ResponseComplete" or ev.get("verb") != "create" or ref.get("namespace") not in namespaces:
                continue
            if not t0 <= _epoch(ev.get("requestReceivedTimestamp", "1970-01-01T00:00:00Z")) <= t1:
                continue
            code = (ev.get("responseStatus") or {}).get("code")
            resource, sub = ref.get("resource"), ref.get("subresource")
            if code != 201:
                key = f"{resource}{'/' + sub if sub else ''} {code}"
                out.refused[key] = out.refused.get(key, 0) + 1
                continue
            if not sub:
                user = str((ev.get("user") or {}).get("username", ""))
                out.creates_by_user[user] = out.creates_by_user.get(user, 0) + 1
            if resource == "jobs":
                out.jobs += 1
            elif resource == "pods" and sub == "binding":
                name = str(ref.get("name", ""))
                out.bindings[name] = out.bindings.get(name, 0) + 1
            elif resource == "pods" and not sub:
                out.pods += 1
    return out


def integrity(audit: AuditCounts, pods: Iterable[PodRecord], jobs: Iterable[JobRecord],
              locust_creates_ok: int | None = None) -> dict[str, Any]:
    """``measurements.integrity``: the timeline against the apiserver's audit record."""
    pods = list(pods)
    job_objects = [j for j in jobs if j.kind == "Job"]
    scheduled = {p.name for p in pods if p.scheduled_ms is not None}
    bound = set(audit.bindings)
    twice = sorted(n for n, c in audit.bindings.items() if c > 1)
    out: dict[str, Any] = {
        "jobs": {"apiserver_created": audit.jobs, "timeline": len(job_objects)},
        "pods": {"apiserver_created": audit.pods, "timeline": len(pods)},
        "bindings": {"apiserver_bound": sum(audit.bindings.values()), "timeline_scheduled": len(scheduled),
                     "bound_not_seen": sorted(bound - scheduled)[:20], "seen_not_bound": sorted(scheduled - bound)[:20],
                     "bound_twice": twice[:20]},
        "refused_creates": audit.refused,
        # a create the client gave up on (timeout during a stall) may still have been done by the apiserver
        "load_creates": {"locust_ok": locust_creates_ok, "apiserver_by_user": audit.creates_by_user},
        "audit_lines": audit.lines,
    }
    out["jobs_lost"] = max(0, audit.jobs - len(job_objects))
    out["pods_lost"] = max(0, audit.pods - len(pods))
    out["bindings_lost"] = len(bound - scheduled)
    out["double_counted"] = (max(0, len(job_objects) - audit.jobs) + max(0, len(pods) - audit.pods)
                             + len(scheduled - bound) + len(twice))
    out["verdict"] = ("ok: every job, pod and binding the apiserver recorded was seen once"
                      if not (out["jobs_lost"] or out["pods_lost"] or out["bindings_lost"] or out["double_counted"])
                      else "MISMATCH: see jobs/pods/bindings")
    return out
