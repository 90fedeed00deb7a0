"""Faults aimed at the jobs of a run: nodes lost or drained, pods crashed, once or as a process.

A fault of this kind (``node-lost``, ``node-drain``, and ``pod-failures`` with a ``workload``, a ``count``
or a ``rate_per_gpu_hour``) picks its targets from what runs *now*, read from the run's pod timeline
(:class:`hollowscale.measure.timeline.Timeline`): the running pods of its ``workload`` (of any workload when
it names none), or the nodes they run on.  The choice is seeded (``seed``), so the same run state gives the
same targets.

* ``node-lost``: the chosen nodes are posted to every agent (``POST /faults/node-lost``); the agent that
  owns a node stops its heartbeats, deletes it ``delete_after_s`` later (its pods then go with the pod
  garbage collector) and registers it again after ``repair_after_s`` (:mod:`hollow.faults`).
* ``node-drain``: what ``kubectl drain`` does, through the API server: each node cordoned
  (``spec.unschedulable``), each of its pods evicted through the Eviction API (the API server sets their
  ``DisruptionTarget`` condition), the node uncordoned after ``repair_after_s``.  Only hollow nodes are
  touched (they are the run's own).
* ``pod-failures``: the chosen pods crash at once with ``exit_code`` (``POST /faults/pod-failures``
  with their names; the agent running each one does it).

A *process* (``rate_per_gpu_hour``) fires from ``at_s`` for ``duration_s``: every second, with probability
``1 - exp(-rate * G / 3600)`` where G is the GPUs the targeted pods hold at that moment, so faults come at
the rate per GPU-hour a user measures on their own cluster (Meta's and Llama 3's reports count interruptions
that way).  Each firing is one of the above, hitting ``count`` (default 1) nodes or pods.

Every firing is kept (``firings``: its time, type, the nodes and pods it hit) in the fault's entry of
``summary.json``; :mod:`hollowscale.training` measures the jobs' recovery from them.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import requests

from hollowscale.measure.timeline import PodRecord, Timeline
from hollowscale.scenario import FaultSpec
from hollowscale.timestamps import iso
from kubecore.config import KubeEndpoint
from kubecore.watch import session_for

#: a process looks at the GPUs held and draws once per this many seconds
TICK_S = 1.0
#: seconds after the heartbeats stop that a lost node's Node is deleted, unless the fault says
DEFAULT_DELETE_AFTER_S = 60.0
NODE_LABEL = "hollowscale.io/hollow"


def agents_session() -> requests.Session:
    """A session for the agents' control servers (no proxy from the environment)."""
    http = requests.Session()
    http.trust_env = False
    return http


def post_to_agents(http: requests.Session, addresses: Sequence[str], kind: str,
                   body: dict[str, Any]) -> list[dict[str, Any]]:
    """``POST /faults/<kind>`` with ``body`` to every agent's control server (``host:port``); each one's answer
    or error."""
    out: list[dict[str, Any]] = []
    for address in addresses:
        try:
            r = http.post(f"http://{address}/faults/{kind}", json=body, timeout=10)
            out.append({"agent": address, "status": r.status_code, "body": r.text[:300]})
        except requests.RequestException as exc:
            out.append({"agent": address, "error": str(exc)})
    return out


def running_pods(timeline: Timeline, workload: str | None) -> list[PodRecord]:
    """The pods running now (of ``workload``, or of any), from the timeline."""
    with timeline.lock:
        return [p for p in timeline.pods.values()
                if p.running_ms is not None and p.finished_ms is None and p.deleted_ms is None and p.node
                and (workload is None or p.workload == workload)]


def pick(items: Sequence[str], f: FaultSpec, rng: random.Random) -> list[str]:
    """``count`` of the items (1 when neither count nor fraction is given), or ``round(fraction * n)`` (at least
    one), chosen by ``rng`` from the sorted items."""
    pool = sorted(set(items))
    if not pool:
        return []
    k = f.count if f.count is not None else (max(1, round(f.fraction * len(pool))) if f.fraction else 1)
    return sorted(rng.sample(pool, min(k, len(pool))))


class JobFaults:
    """Fires this module's faults; a process runs in a thread of its own until its span ends or :meth:`stop`."""

    def __init__(self, agents: Callable[[], Sequence[str]], endpoint: KubeEndpoint | None, timeline: Timeline | None,
                 log: Callable[[str], None], errors: list[str]) -> None:
        self.agents = agents
        self.endpoint = endpoint
        self.timeline = timeline
        self.log = log
        self.errors = errors
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._timers: list[threading.Timer] = []
        self._lock = threading.Lock()
        self._http = agents_session()
        self._api: requests.Session | None = None  # the API server's, made at the first drain

    def fire(self, f: FaultSpec) -> dict[str, Any]:
        """The fault's entry for ``summary.json``: one firing now, or a process started (its firings are added
        to the entry as they happen)."""
        now = time.time()
        entry: dict[str, Any] = {"type": f.type, "at_s": f.at_s, "workload": f.workload, "count": f.count,
                                 "fraction": f.fraction, "fired_at": iso(now), "t": now, "firings": []}
        rng = random.Random(f.seed)
        if self.timeline is None:
            entry["error"] = "no pod timeline in this run to choose targets from"
            self.errors.append(f"fault {f.type}: {entry['error']}")
            return entry
        if f.is_process:
            entry.update(rate_per_gpu_hour=f.rate_per_gpu_hour, duration_s=f.duration_s)
            t = threading.Thread(target=self._process, args=(f, rng, entry), name=f"fault-process-{f.type}",
                                 daemon=True)
            self._threads.append(t)
            t.start()
            return entry
        self._record(entry, self._once(f, rng))
        return entry

    def stop(self) -> None:
        """Stop the processes (the run's load ended or it is torn down)."""
        self._stop.set()
        for timer in self._timers:  # the nodes go with the run's teardown
            timer.cancel()
        for t in self._threads:
            t.join(timeout=5)

    # --- a process -----------------------------------------------------------------------------
    def _process(self, f: FaultSpec, rng: random.Random, entry: dict[str, Any]) -> None:
        assert self.timeline is not None and f.rate_per_gpu_hour is not None and f.duration_s is not None
        end = time.monotonic() + f.duration_s
        gpu_seconds = 0.0
        while not self._stop.wait(TICK_S) and time.monotonic() < end:
            gpus = sum(p.gpus for p in running_pods(self.timeline, f.workload))
            gpu_seconds += gpus * TICK_S
            if gpus > 0 and rng.random() < 1.0 - math.exp(-f.rate_per_gpu_hour * gpus * TICK_S / 3600.0):
                self._record(entry, self._once(f, rng))
        entry["gpu_hours_exposed"] = round(gpu_seconds / 3600.0, 4)

    def _record(self, entry: dict[str, Any], firing: dict[str, Any]) -> None:
        with self._lock:
            entry["firings"].append(firing)
        self.log(f"fault {firing['type']} fired: {len(firing['nodes'])} nodes, {len(firing['pods'])} pods"
                 + (f" ({firing['error']})" if firing.get("error") else ""))

    # --- one firing ----------------------------------------------------------------------------
    def _once(self, f: FaultSpec, rng: random.Random) -> dict[str, Any]:
        assert self.timeline is not None
        pods = running_pods(self.timeline, f.workload)
        now = time.time()
        firing: dict[str, Any] = {"type": f.type, "t": now, "t_ms": now * 1000.0, "nodes": [], "pods": [],
                                  "names": []}
        if f.on_nodes:
            nodes = pick([p.node for p in pods], f, rng)
            hit = [p for p in pods if p.node in set(nodes)]
            firing.update(nodes=nodes, pods=sorted(p.uid for p in hit))
            if nodes:
                firing["responses"] = self._node_lost(f, nodes) if f.type == "node-lost" else self._drain(f, nodes)
        else:
            uids = pick([p.uid for p in pods], f, rng)
            chosen = [p for p in pods if p.uid in set(uids)]
            firing.update(pods=sorted(uids), names=sorted(f"{p.namespace}/{p.name}" for p in chosen),
                          nodes=sorted({p.node for p in chosen}))
            if chosen:
                firing["responses"] = self._post_agents("pod-failures", {"pods": firing["names"],
                                                                          "exit_code": f.exit_code})
        if not firing["nodes"] and not firing["pods"]:
            firing["error"] = f"nothing of {f.workload or 'the run'} was running to hit"
        return firing

    def _post_agents(self, kind: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        out = post_to_agents(self._http, self.agents(), kind, body)
        self.errors += [f"fault {kind}: agent at {r['agent']}: {r['error']}" for r in out if "error" in r]
        return out

    def _node_lost(self, f: FaultSpec, nodes: list[str]) -> list[dict[str, Any]]:
        return self._post_agents("node-lost", {
            "nodes": nodes, "delete_after_s": f.delete_after_s if f.delete_after_s is not None
            else DEFAULT_DELETE_AFTER_S, "repair_after_s": f.repair_after_s})

    def _drain(self, f: FaultSpec, nodes: list[str]) -> list[dict[str, Any]]:
        """Cordon, evict every pod, and uncordon after ``repair_after_s`` (hollow nodes only)."""
        if self.endpoint is None:
            self.errors.append("fault node-drain: no API server endpoint in this run")
            return []
        session = self._api_session(self.endpoint)
        server = self.endpoint.server
        out: list[dict[str, Any]] = []
        cordoned = []
        for node in nodes:
            got = session.get(f"{server}/api/v1/nodes/{node}", timeout=30)
            if not got.ok or ((got.json().get("metadata") or {}).get("labels") or {}).get(NODE_LABEL) != "true":
                out.append({"node": node, "error": f"not drained: {got.status_code if not got.ok else 'not a hollow node'}"})
                continue
            r = session.patch(f"{server}/api/v1/nodes/{node}", json={"spec": {"unschedulable": True}},
                              headers={"Content-Type": "application/merge-patch+json"}, timeout=30)
            if not r.ok:
                out.append({"node": node, "cordon": r.status_code, "error": "not cordoned"})
                continue
            cordoned.append(node)
            listed = session.get(f"{server}/api/v1/pods", params={"fieldSelector": f"spec.nodeName={node}"},
                                 timeout=60)
            evicted = []
            for pod in (listed.json().get("items") or []) if listed.ok else []:
                meta = pod.get("metadata") or {}
                if meta.get("deletionTimestamp"):
                    continue
                ns, name = meta.get("namespace", ""), meta.get("name", "")
                e = session.post(f"{server}/api/v1/namespaces/{ns}/pods/{name}/eviction", timeout=30, json={
                    "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}})
                evicted.append({"pod": f"{ns}/{name}", "status": e.status_code})
            out.append({"node": node, "cordon": r.status_code, "evictions": evicted})
        if f.repair_after_s is not None and cordoned:
            timer = threading.Timer(f.repair_after_s, self._uncordon, args=(cordoned,))
            timer.daemon = True
            self._timers.append(timer)
            timer.start()
        return out

    def _api_session(self, endpoint: KubeEndpoint) -> requests.Session:
        if self._api is None:
            self._api = session_for(endpoint, 4)
        return self._api

    def _uncordon(self, nodes: list[str]) -> None:
        if self.endpoint is None:
            return
        session = self._api_session(self.endpoint)
        for node in nodes:
            try:
                session.patch(f"{self.endpoint.server}/api/v1/nodes/{node}", json={"spec": {"unschedulable": None}},
                              headers={"Content-Type": "application/merge-patch+json"}, timeout=30)
            except requests.RequestException as exc:
                self.errors.append(f"fault node-drain: uncordoning {node} failed: {exc}")
        self.log(f"fault node-drain over: {len(nodes)} nodes uncordoned")
