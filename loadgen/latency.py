"""Scheduling, start and completion latencies as Locust request events.

One watcher (on the master, or the only process) follows the pods and jobs of the load's namespaces
(every tenant's; one pod watch and one job watch per namespace, each narrowed by the run label: a
namespaced watch is served from the apiserver's per-namespace index, a cluster-wide one would filter
every pod of the cluster and need cluster-wide RBAC) and fires, per pod, ``SCHEDULE`` (first seen -> bound to a node) and ``START`` (first seen -> Running), and
per workload object ``COMPLETE`` (first seen -> Complete/Succeeded; a failure is reported as a failed
request).  Times are the watcher's receive times in ms, so they show in Locust's stats tables, charts
and CSV beside the create calls.  The orchestrator's timeline collector is the source of the report's
figures; these events are the same view for someone driving Locust alone.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

from kubecore.watch import SYNC, list_then_watch, session_for
from loadgen.workloads import LABEL_ROLE, LABEL_RUN, LABEL_WORKLOAD


class LatencyWatcher:
    def __init__(self, environment: Any, endpoint: Any, namespace: str | Sequence[str], run_id: str | None = None):
        self.env = environment
        self.endpoint = endpoint
        self.namespaces = (namespace,) if isinstance(namespace, str) else tuple(dict.fromkeys(namespace))
        self.namespace = self.namespaces[0]
        self.selector = f"{LABEL_RUN}={run_id}" if run_id else LABEL_WORKLOAD
        self._stop = threading.Event()
        self.first_seen: dict[str, float] = {}
        self.done: dict[str, set[str]] = {}
        self.greenlets: list[Any] = []

    def fire(self, kind: str, name: str, ms: float, failed: str | None = None) -> None:
        self.env.events.request.fire(
            request_type=kind, name=name, response_time=max(ms, 0.0), response_length=0,
            exception=RuntimeError(failed) if failed else None, context={},
        )

    def start(self) -> None:
        import gevent

        self.greenlets = [g for ns in self.namespaces for g in (gevent.spawn(self._pods, ns), gevent.spawn(self._jobs, ns))]

    def stop(self) -> None:
        self._stop.set()
        for g in self.greenlets:
            g.kill(block=False)

    def _mark(self, uid: str, what: str) -> bool:
        seen = self.done.setdefault(uid, set())
        if what in seen:
            return False
        seen.add(what)
        return True

    def _live(self, path: str) -> Iterator[tuple[dict[str, Any], str, str, float, float]]:
        """Watched objects of ``path`` that still exist: (object, uid, workload/role, first seen, now).

        Objects of a LIST count only if the watch saw them before (a relist after a 410 or an apiserver
        restart brings what changed meanwhile); deleted ones are forgotten, so memory stays bounded and
        a relist never fires an event twice (each is marked once per uid).
        """
        s = session_for(self.endpoint, 1)
        for typ, obj, t in list_then_watch(s, self.endpoint.server, path, self._stop.is_set, self.selector):
            meta = obj.get("metadata") or {}
            uid = meta.get("uid", "")
            if typ == "DELETED":  # a real one or a relist's metadata-only one: the object is gone
                self.first_seen.pop(uid, None)
                self.done.pop(uid, None)
                continue
            if typ == SYNC and uid not in self.first_seen:
                # listed without having been seen created (the first LIST, or created while the watch
                # was down): no first-seen time to measure from.  A known object in a relist is news.
                continue
            labels = meta.get("labels") or {}
            name = f"{labels.get(LABEL_WORKLOAD, '?')}/{labels.get(LABEL_ROLE, '?')}"
            yield obj, uid, name, self.first_seen.setdefault(uid, t), t

    def _pods(self, namespace: str) -> None:
        for pod, uid, name, first, t in self._live(f"/api/v1/namespaces/{namespace}/pods"):
            meta = pod.get("metadata") or {}
            if (pod.get("spec") or {}).get("nodeName") and self._mark(uid, "sched"):
                self.fire("SCHEDULE", name, t - first)
            phase = (pod.get("status") or {}).get("phase")
            if phase in ("Running", "Succeeded", "Failed") and self._mark(uid, "start"):
                self.fire("START", name, t - first)
            if not meta.get("ownerReferences") and phase in ("Succeeded", "Failed") and self._mark(uid, "done"):
                self.fire("COMPLETE", f"Pod {name}", t - first, None if phase == "Succeeded" else "pod failed")

    def _jobs(self, namespace: str) -> None:
        for job, uid, role, first, t in self._live(f"/apis/batch/v1/namespaces/{namespace}/jobs"):
            name = f"Job {role}"
            for c in (job.get("status") or {}).get("conditions") or []:
                if c.get("status") != "True":
                    continue
                if c.get("type") == "Complete" and self._mark(uid, "done"):
                    self.fire("COMPLETE", name, t - first)
                elif c.get("type") == "Failed" and self._mark(uid, "done"):
                    self.fire("COMPLETE", name, t - first, f"job failed: {c.get('reason')}")
