"""The paper's protocol through a real scheduler: one pod at a time, each waiting for its verdict.

For each pod of the sequence (:func:`hollowscale.trace.paper.paper_sequence`), in order: its claim (the
DRA-shared replay) and the pod are created; a watch of the run's pods gives the scheduler's verdict:
*bound* (``spec.nodeName`` set) or *unschedulable* (condition ``PodScheduled`` False, reason
``Unschedulable``, with the scheduler's message).  A bound pod stays, holding what it took (no pod
leaves in the paper's protocol); an unschedulable one is recorded with the scheduler's message and
deleted at once with its claim, never retried, as the simulator does.  A pod with no verdict within
``verdict_timeout_s`` is recorded as such and deleted.

After each verdict the harness's account of the cluster (:class:`hollowscale.trace.frag.ClusterState`)
takes the pod where the scheduler put it (for a DRA claim, on the devices and with the shares its
allocation names, read back from the claim), and a record says what had arrived and what was
allocated; at every new whole percent of arrived GPU demand a checkpoint also keeps the paper's
fragmentation.  At the end :func:`apiserver_allocation` sums what the API server's own objects say
(bound pods' counted GPUs, the claims' consumed shares), for the report to compare.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests

from hollowscale.replay.api import ReplayApi
from hollowscale.replay.pods import SHARES
from hollowscale.trace.frag import ClusterState
from hollowscale.trace.model import GPU_MILLI
from hollowscale.trace.paper import SequencedPod
from kubecore.namespaces import RUN_LABEL
from kubecore.quantity import parse_quantity
from kubecore.watch import list_then_watch, now_ms

BOUND, UNSCHEDULABLE, NO_VERDICT = "bound", "unschedulable", "no-verdict"


@dataclass(frozen=True)
class Verdict:
    kind: str
    node: str = ""
    message: str = ""
    at_ms: float = 0.0


@dataclass(frozen=True)
class PodRecord:
    """One pod of the replay, after its verdict.

    Attributes:
        index, name, trace_name, kind, tuned: which pod.
        arrived_gpu_milli: its GPU demand as the replay asks it (a share rounded up when counted).
        verdict: ``bound``, ``unschedulable`` or ``no-verdict``; node: where it was bound.
        devices: (GPU index, milli-GPU) it took; reason: the scheduler's message when unschedulable.
        created_ms, verdict_ms: the client's clock at its creation and at its verdict's watch event.
        arrived_milli, allocated_milli, cpu_allocated_milli, memory_allocated_mib: the cluster's totals
            after this pod (arrived counts every pod so far, failed ones too).
    """

    index: int
    name: str
    trace_name: str
    kind: str
    tuned: bool
    arrived_gpu_milli: int
    verdict: str
    node: str
    devices: tuple[tuple[int, int], ...]
    reason: str
    created_ms: float
    verdict_ms: float
    arrived_milli: int
    allocated_milli: int
    cpu_allocated_milli: int
    memory_allocated_mib: int


@dataclass(frozen=True)
class Checkpoint:
    """The cluster at a whole percent of arrived GPU demand (the first pod that reached it)."""

    arrived_pct: int
    index: int
    allocated_milli: int
    cpu_allocated_milli: int
    memory_allocated_mib: int
    frag_milli: float
    frag_ratio: float | None


class PodWatch:
    """The run's pods as the watch shows them: each pod's first verdict, waited for by name."""

    def __init__(self, session: requests.Session, server: str, namespace: str, run_id: str):
        self._cond = threading.Condition()
        self.verdicts: dict[str, Verdict] = {}
        self.restarts: list[str] = []
        self._stop = False
        self._thread = threading.Thread(target=self._run, args=(session, server, namespace, run_id),
                                        name="replay-pod-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop = True
        self._thread.join(timeout=30)

    def _run(self, session: requests.Session, server: str, namespace: str, run_id: str) -> None:
        for typ, obj, t in list_then_watch(session, server, f"/api/v1/namespaces/{namespace}/pods",
                                           lambda: self._stop, label_selector=f"{RUN_LABEL}={run_id}",
                                           on_restart=self.restarts.append):
            if typ == "DELETED":
                continue
            name = (obj.get("metadata") or {}).get("name", "")
            verdict = verdict_of(obj, t)
            if verdict is not None and name not in self.verdicts:
                with self._cond:
                    self.verdicts.setdefault(name, verdict)
                    self._cond.notify_all()

    def wait(self, name: str, timeout_s: float) -> Verdict | None:
        with self._cond:
            self._cond.wait_for(lambda: name in self.verdicts, timeout_s)
            return self.verdicts.get(name)


def verdict_of(pod: dict[str, Any], at_ms: float) -> Verdict | None:
    """The scheduler's verdict a pod shows: bound to a node, or marked unschedulable (None: neither yet)."""
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return Verdict(BOUND, node, "", at_ms)
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            return Verdict(UNSCHEDULABLE, "", str(c.get("message") or ""), at_ms)
    return None


def claim_devices(claim: dict[str, Any]) -> list[tuple[int, int]]:
    """(GPU index, milli-GPU) of each device a claim's allocation names (``gpu-<i>``; its consumed
    ``shares``, or a whole GPU when the device was not shared)."""
    out = []
    for r in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or ():
        device = str(r.get("device") or "")
        index = int(device.rsplit("-", 1)[1]) if device.startswith("gpu-") and device[4:].isdigit() else -1
        consumed = (r.get("consumedCapacity") or {}).get(SHARES)
        out.append((index, int(parse_quantity(consumed)) if consumed is not None else GPU_MILLI))  # "1k" is 1000
    return out


@dataclass
class PaperReplay:
    """One replay of a sequence in the paper's protocol against a cluster whose nodes are the trace's.

    Attributes:
        api: where the pods and claims go (the run's namespace, label, GPU mode and scheduler).
        state: the cluster's account (its nodes are the cluster's nodes).
        verdict_timeout_s: how long one pod may wait for its verdict.
        progress: called with (pods done, pods in all) now and then.
    """

    api: ReplayApi
    state: ClusterState
    verdict_timeout_s: float = 120.0
    progress: Callable[[int, int], None] | None = None
    records: list[PodRecord] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    started_ms: float = 0.0
    ended_ms: float = 0.0

    def _delete(self, path: str) -> None:
        error = self.api.delete(path)
        if error:
            self.errors.append(error)

    def run(self, pods: list[SequencedPod], stop: Callable[[], bool] = lambda: False) -> None:
        """Replay ``pods`` in order (module docstring); ``stop()`` ends it early (an interruption)."""
        api = self.api
        pods_path, claims_path = api.pods_path, api.claims_path
        watch = PodWatch(api.session, api.server, api.namespace, api.run_id)
        watch.start()
        width = max(5, len(str(len(pods))))
        arrived = 0
        next_pct = 0
        total = max(1, self.state.gpu_capacity_milli)
        self.started_ms = now_ms()
        try:
            for done, sp in enumerate(pods):
                if stop():
                    self.errors.append(f"stopped after {done} of {len(pods)} pods")
                    break
                pod = sp.pod
                body = api.pod_body(sp, width)
                name = body["metadata"]["name"]
                claim = api.claimed(pod)
                if claim:
                    api.post(claims_path, api.claim_body(name, pod))
                created = now_ms()
                api.post(pods_path, body)
                verdict = watch.wait(name, self.verdict_timeout_s) or Verdict(NO_VERDICT, "", "", now_ms())
                asked = pod.num_gpu * (pod.gpu_milli if api.gpu_mode == "dra-shared" else GPU_MILLI)  # rounded up
                arrived += asked
                devices: list[tuple[int, int]] = []
                if verdict.kind == BOUND:
                    if claim:
                        got = api.session.get(f"{api.server}{claims_path}/{name}", timeout=30)
                        got.raise_for_status()
                        devices = claim_devices(got.json())
                    try:
                        taken = self.state.place(verdict.node, pod, devices or None)
                    except (KeyError, ValueError) as exc:
                        self.errors.append(f"{name} on {verdict.node}: {exc}")
                        taken = []
                    if not devices:
                        devices = [(i, GPU_MILLI) for i in taken]
                else:
                    self._delete(f"{pods_path}/{name}")
                    if claim:
                        self._delete(f"{claims_path}/{name}")
                s = self.state
                self.records.append(PodRecord(
                    sp.index, name, pod.name, pod.kind, sp.tuned, asked, verdict.kind, verdict.node,
                    tuple(devices), verdict.message, created, verdict.at_ms, arrived, s.gpu_allocated_milli,
                    s.cpu_allocated_milli, s.memory_allocated_mib))
                while arrived * 100 >= next_pct * total:
                    self.checkpoints.append(Checkpoint(next_pct, sp.index, s.gpu_allocated_milli,
                                                       s.cpu_allocated_milli, s.memory_allocated_mib,
                                                       s.frag_milli, s.frag_ratio))
                    next_pct += 1
                if self.progress is not None and ((done + 1) % 50 == 0 or done == len(pods) - 1):
                    self.progress(done + 1, len(pods))
        finally:
            self.ended_ms = now_ms()
            watch.stop()
            self.errors += [f"pod watch: {r}" for r in watch.restarts if "error" in r]


def apiserver_allocation(session: requests.Session, server: str, namespace: str, run_id: str) -> dict[str, int]:
    """What the API server's objects say was allocated at the end: the bound pods (how many, their counted
    GPUs in milli, CPU, memory) and the claims' consumed shares (milli-GPU) and devices."""
    sel = {"labelSelector": f"{RUN_LABEL}={run_id}"}
    pods = session.get(f"{server}/api/v1/namespaces/{namespace}/pods", params=sel, timeout=60)
    pods.raise_for_status()
    out = {"pods_bound": 0, "counted_gpu_milli": 0, "cpu_milli": 0, "memory_mib": 0, "claims_allocated": 0,
           "claim_shares_milli": 0, "claim_devices": 0}
    for p in pods.json().get("items") or ():
        spec = p.get("spec") or {}
        if not spec.get("nodeName") or (p.get("metadata") or {}).get("deletionTimestamp"):
            continue
        out["pods_bound"] += 1
        for c in spec.get("containers") or ():
            req = (c.get("resources") or {}).get("requests") or {}
            out["counted_gpu_milli"] += int(req.get("nvidia.com/gpu", "0")) * GPU_MILLI
            out["cpu_milli"] += _milli(req.get("cpu", "0"))
            out["memory_mib"] += _mib(req.get("memory", "0"))
    claims = session.get(f"{server}/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims", params=sel,
                         timeout=60)
    if claims.status_code == 404:
        return out
    claims.raise_for_status()
    for c in claims.json().get("items") or ():
        devices = claim_devices(c)
        if devices:
            out["claims_allocated"] += 1
            out["claim_devices"] += len(devices)
            out["claim_shares_milli"] += sum(m for _, m in devices)
    return out


def _milli(q: str) -> int:
    return int(parse_quantity(q) * 1000)


def _mib(q: str) -> int:
    return int(parse_quantity(q) / 2**20)
