"""The pod controller: moves pods bound to this agent's nodes through the lifecycle stages.

Input is the single pod watch (``spec.nodeName!=``, all nodes; pods on other agents' nodes are dropped
after one dictionary lookup).  For each pod the controller keeps the newest facts it knows (a watch
event older than the agent's own last write is recognised by its phase and restart count and ignored,
so it cannot trigger a transition twice), asks :func:`hollow.stages.plan` for the next stage of the
pod's pool's stage table (``stages:`` in the pools file, else ``hollow/stages.yaml``) and sets a
timer.  When the timer fires it writes exactly one status patch (or the final DELETE); it never reads
before writing and never sends a patch that changes nothing.

Echoes: the MODIFIED event that each of the agent's own status writes produces (two per pod, three with a
readiness or startup probe: Running, Ready, terminated) carries
nothing the controller does not already know, so the versions its writes returned are remembered and
the watcher skips those events unparsed (:meth:`PodController.is_own_write`).

Restart safety: deadlines are derived from the pod object (binding time, container start) and random
draws are keyed by uid, so a new agent process picks up every pod where the old one left it.

Gang members (label ``hollowscale.io/gang``, annotation ``hollowscale.io/gang-min``) wait for their
gang: :attr:`PodController.gangs`, a :class:`hollow.gangs.GangRegistry` fed by a second watch of the
labelled pods only (on every node), knows when a gang crossed its barrier (the moment N members ran),
and a member's stages anchored at ``run_started`` count from then instead; until then the member
stays Running without a timer, and when the gang crosses its barrier the members on this agent's
nodes are planned again.  Pods without the label never reach the registry and pay nothing for it.
Turned off agent-wide with ``gang_barrier=False`` or per pool with ``lifecycle.gang_barrier: false``
(then the registry and its watch do not exist).

Topology spread (:mod:`hollow.topology`): when the pools have topology levels, a gang member's run
duration after the barrier is the drawn one times its gang's spread factor (fixed by the registry at
the barrier), and the patch that finishes it (terminated, restarted in place, or terminated for a
deletion) also carries the condition :data:`hollow.topology.SPREAD_CONDITION`: no extra request.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from hollow.api import STRATEGIC_MERGE_PATCH, ApiClient, Response
from hollow.bodies import PodStatusPatch
from hollow.clock import Clock, rfc3339
from hollow.faults import FaultState, choose
from hollow.gangs import GangKey, GangRegistry
from hollow.ipam import PodIPs
from hollow.metrics import Metrics
from hollow.nodes import NodeState
from hollow.podstatus import (
    delete_options,
    deletion_exit_code,
    ready_patch,
    restarted_patch,
    running_patch,
    terminated_patch,
)
from hollow.pools import PoolSpec
from hollow.stages import (
    PHASE_ORDER,
    TERMINAL,
    Action,
    PodFacts,
    Stage,
    annotation_problems,
    default_stages,
    exit_code,
    gang_min,
    plan,
    pod_facts,
)
from hollow.timers import TimedTasks
from hollow.topology import NodeTopology, Spread, spread_condition

log = logging.getLogger("hollow.pods")
#: what a timer does: a stage's action, or ``ready`` (the probes of a running container would pass now)
ControllerAction = Action | Literal["ready"]
_GONE = frozenset({404, 409, 410, 422})


@dataclass
class PodRecord:
    """The controller's memory of one pod.

    Attributes:
        facts: newest known facts (from the watch, or from the agent's own successful write).
        action: the action the pending timer will take.
        busy: a write is in flight (new events only mark the record ``dirty``).
        dirty: an event arrived while busy; plan again when the write ends.
        delete_sent: the final DELETE was accepted; nothing more to do.
        gone: the API said the pod (with this uid) no longer exists; wait for the DELETED event.
        started_wall: precise wall time of the current container start, when this process started it.
        forced_exit: exit code of a crash injected by a pod-failure fault, applied at once.
        prepared_wall: when this process found the pod's DRA claims allocated and reserved for it (the
            kubelet's NodePrepareResources), else None.
        prepare_tries: how many times the claims were read and found not ready yet.
    """

    facts: PodFacts
    action: ControllerAction | None = None
    busy: bool = False
    dirty: bool = False
    delete_sent: bool = False
    gone: bool = False
    started_wall: float | None = None
    forced_exit: int | None = None
    prepared_wall: float | None = None
    prepare_tries: int = 0


def _rank(facts: PodFacts) -> tuple[int, int, int]:
    return PHASE_ORDER.get(facts.phase, 0), facts.restart_count, facts.containers_ready


def ready_due(facts: PodFacts, started_wall: float | None) -> float | None:
    """Wall time the running containers' probes would first pass (:mod:`hollow.probes`), or None.

    None when nothing is pending: no probe, not Running, being deleted, or already ready.  The
    anchor is the container start (this process's precise one, else the pod's ``startedAt``), so a
    restarted agent computes the same deadline.
    """
    if facts.ready_delay is None or facts.containers_ready or facts.phase != "Running" or facts.deleting:
        return None
    anchor = started_wall if started_wall is not None else facts.run_started_at
    if anchor is None:
        return None
    return anchor + facts.ready_delay


#: a failed action is retried after its nominal wait times a factor drawn uniformly from this range [low, high),
#: so that pods that failed together do not all come back in the same instant (the kubelet jitters its
#: pod workers' resyncs likewise); tests derive their time bounds from it
RETRY_JITTER: tuple[float, float] = (0.5, 1.5)


def prepare_retry_s(tries: int) -> float:
    """The nominal wait before a pod's claims are read again, after ``tries`` reads found them not ready:
    0.5 s doubling from 1 s, at most 10 s (the kubelet retries a failed pod sync on a backoff of about
    10 s). :data:`RETRY_JITTER` stretches it."""
    return min(10.0, 0.5 * 2 ** min(tries, 5))


class PodController(TimedTasks[str]):
    """Applies lifecycle stages to the pods on a set of nodes.

    ``rng`` draws the retry jitter; a test passes a seeded (or fixed) one to make the timing exact.
    ``pools``: every pool of the run (gang members run on other agents' nodes too), for the gangs'
    topology spread; None: the pools of ``nodes``.
    """

    def __init__(self, api: ApiClient, clock: Clock, metrics: Metrics, faults: FaultState,
                 nodes: dict[str, NodeState], stages: tuple[Stage, ...] | None = None,
                 gang_barrier: bool = True, rng: random.Random | None = None,
                 pools: Sequence[PoolSpec] | None = None) -> None:
        super().__init__(clock)
        self.rng = rng or random.Random()
        self.api = api
        self.clock = clock
        self.metrics = metrics
        self.faults = faults
        self.nodes = nodes
        self.stages = stages  # overrides every pool's table (tests); None: each pool's own or the default
        self.records: dict[str, PodRecord] = {}
        self._ipam: dict[str, PodIPs] = {}
        self._transitions: dict[str, Any] = {}
        #: resourceVersions our own writes produced whose watch events have not arrived yet
        self._own_versions: set[str] = set()
        self.gang_barrier = gang_barrier  # agent-wide; a pool's lifecycle.gang_barrier overrides it
        own = {id(n.slot.pool): n.slot.pool for n in nodes.values()}.values()
        every = list(pools) if pools is not None else list(own)
        topology = NodeTopology(every) if any(p.topology.resolved_levels() for p in every) else None
        # no pool of this agent waits for gangs: gang pods are not even looked at
        self.gangs: GangRegistry | None = GangRegistry(self._gang_crossed, topology, self.clock.wall) \
            if any(self._gated(p) for p in own) else None

    # --- watch handler -------------------------------------------------------------------------
    def on_event(self, kind: str, obj: dict[str, Any]) -> None:
        """Take one watch event (see :class:`hollow.watching.WatchHandler`)."""
        node = (obj.get("spec") or {}).get("nodeName")
        uid = (obj.get("metadata") or {}).get("uid", "")
        if node not in self.nodes:
            if uid in self.records:
                self._forget(uid)
            return
        if kind == "DELETED":
            self._forget(uid)
            return
        facts = pod_facts(obj)
        rec = self.records.get(uid)
        if rec is None:
            rec = self.records[uid] = PodRecord(facts)
            self.metrics.pods_tracked.set(len(self.records))
            for problem in annotation_problems(facts):
                log.warning("%s (using the pool default)", problem)
            if facts.pod_ip and facts.phase == "Running" and not facts.host_network:
                self._ips(facts.node).claim(uid, facts.pod_ip)
        elif _rank(facts) < _rank(rec.facts):
            # older than what we wrote ourselves; only a new deletionTimestamp is news
            if facts.deleting and not rec.facts.deleting:
                rec.facts = dataclasses.replace(rec.facts, deleting=True,
                                                removed_by_apiserver=facts.removed_by_apiserver)
            else:
                return
        else:
            if rec.facts.deleting and not facts.deleting:
                facts = dataclasses.replace(facts, deleting=True)
            rec.facts = facts
        self._replan(uid, rec)

    def is_own_write(self, resource_version: str) -> bool:
        """The watch event at ``resource_version`` is the echo of our own write (see the module doc)."""
        if resource_version in self._own_versions:
            self._own_versions.discard(resource_version)
            return True
        return False

    def _wrote(self, resp: Response) -> None:
        """Remember the version a successful status write produced (its echo will be skipped)."""
        if len(self._own_versions) > 100_000:  # echoes lost to a watch restart: never grow without end
            self._own_versions.clear()
        rv = resp.resource_version()
        if rv:
            self._own_versions.add(rv)

    def on_list_start(self) -> None:
        """A new LIST starts: events before it will not come, so neither will the echoes we wait for."""
        self._own_versions.clear()

    def on_relisted(self, uids: set[str]) -> None:
        """Forget pods deleted while the watch was down."""
        for uid in [u for u in self.records if u not in uids]:
            self._forget(uid)

    # --- gangs ---------------------------------------------------------------------------------
    def _gated(self, pool: PoolSpec) -> bool:
        """Gang members of this pool wait for their gang."""
        own = pool.lifecycle.gang_barrier
        return self.gang_barrier if own is None else own

    def _gang_crossed(self, key: GangKey, barrier: float | None, uids: list[str]) -> None:
        """A gang crossed its barrier, or its attempt broke (``barrier`` None: its running members wait
        again): plan its members on this agent's nodes again."""
        for uid in uids:
            rec = self.records.get(uid)
            if rec is not None:
                self._replan(uid, rec)

    # --- planning ------------------------------------------------------------------------------
    def _spread(self, facts: PodFacts) -> tuple[Spread, float] | None:
        """The spread of the pod's gang and its barrier, when the pod is a gated member of a crossed
        gang that has one."""
        if not facts.gang or self.gangs is None or gang_min(facts) is None \
                or not self._gated(self.nodes[facts.node].slot.pool):
            return None
        spread = self.gangs.spread(facts.namespace, facts.gang)
        barrier = self.gangs.barrier(facts.namespace, facts.gang)
        return (spread, barrier) if spread is not None and barrier is not None else None

    def _with_spread(self, facts: PodFacts, body: PodStatusPatch) -> PodStatusPatch:
        """``body`` with the :data:`hollow.topology.SPREAD_CONDITION` of the pod's gang, when it has one."""
        found = self._spread(facts)
        if found is not None:
            spread, barrier = found
            body["status"].setdefault("conditions", []).append(spread_condition(spread, rfc3339(barrier)))
        return body

    def _ips(self, node: str) -> PodIPs:
        ips = self._ipam.get(node)
        if ips is None:
            ips = self._ipam[node] = PodIPs(self.nodes[node].slot.pod_cidr)
        return ips

    def _forget(self, uid: str) -> None:
        rec = self.records.pop(uid, None)
        self._timers.cancel(uid)
        if rec is not None:
            self._ips(rec.facts.node).release(uid)
            self.metrics.pods_tracked.set(len(self.records))

    def _replan(self, uid: str, rec: PodRecord) -> None:
        if rec.busy:
            rec.dirty = True
            return
        facts = rec.facts
        if rec.delete_sent or rec.gone or facts.removed_by_apiserver:
            self._timers.cancel(uid)
            return
        now_m = self.clock.monotonic()
        until = self.faults.heartbeat_stopped.get(facts.node)
        if until is not None and now_m < until:
            # a partitioned kubelet does nothing; look again when the fault ends
            rec.action = None
            self._timers.schedule(uid, until + 0.01)
            return
        if rec.forced_exit is not None and facts.phase == "Running" and not facts.deleting:
            rec.action = "finish"
            self._timers.schedule(uid, now_m)
            return
        now_w = self.clock.wall()
        pool = self.nodes[facts.node].slot.pool
        stages = self.stages or pool.stages or default_stages()
        gated = False
        done = 0.0
        barrier = None
        factor = 1.0
        if facts.gang and self.gangs is not None and self._gated(pool) and gang_min(facts) is not None:
            gated = True
            barrier = self.gangs.barrier(facts.namespace, facts.gang)
            spread = self.gangs.spread(facts.namespace, facts.gang)
            factor = spread.factor if spread is not None else 1.0
            done = self.gangs.work_done(facts.namespace, facts.gang)
        planned = plan(facts, pool.lifecycle, now_w, rec.started_wall, stages, gated, barrier, rec.prepared_wall,
                       factor, done)
        ready_at = ready_due(facts, rec.started_wall)
        if ready_at is not None and (planned is None or ready_at <= planned.due_wall):
            # the probes pass before the next stage: Ready first (a stage due earlier goes ahead)
            rec.action = "ready"
            self._timers.schedule(uid, now_m + max(0.0, ready_at - now_w))
            return
        if planned is None:
            rec.action = None
            self._timers.cancel(uid)
            if facts.phase in TERMINAL:
                self._ips(facts.node).release(uid)
            return
        rec.action = planned.stage.action
        self._timers.schedule(uid, now_m + (planned.due_wall - now_w))

    # --- actions -------------------------------------------------------------------------------
    def _fire(self, uid: str, due: float) -> None:
        rec = self.records.get(uid)
        if rec is None or rec.busy:
            return
        if rec.action is None:  # a fault deferral ended: plan again
            self._replan(uid, rec)
            return
        rec.busy = True
        self._spawn(self._act(uid, rec))

    async def _act(self, uid: str, rec: PodRecord) -> None:
        retry_in = 0.0
        try:
            action = rec.action
            if action == "start":
                retry_in = await self._start(uid, rec)
            elif action == "finish":
                retry_in = await self._finish(uid, rec)
            elif action == "finalize":
                retry_in = await self._finalize(uid, rec)
            elif action == "ready":
                retry_in = await self._ready(uid, rec)
            elif action == "prepare":
                retry_in = await self._prepare(uid, rec)
        except Exception:  # never let one pod stop the controller
            log.exception("pod %s/%s: action failed", rec.facts.namespace, rec.facts.name)
            retry_in = 5.0
        finally:
            rec.busy = False
        if self.records.get(uid) is not rec:
            return
        if retry_in > 0 and not rec.dirty:
            low, high = RETRY_JITTER
            self._timers.schedule(uid, self.clock.monotonic() + retry_in * (low + (high - low) * self.rng.random()))
            return
        rec.dirty = False
        self._replan(uid, rec)

    def _path(self, facts: PodFacts) -> str:
        return f"/api/v1/namespaces/{facts.namespace}/pods/{facts.name}"

    def _outcome(self, rec: PodRecord, resp: Response) -> float:
        """0 when the write landed; seconds to wait before retrying otherwise (or 0 and gone)."""
        if resp.ok:
            return 0.0
        if resp.status in _GONE:
            if resp.status == 422:
                log.warning("pod %s/%s: status patch rejected: %s", rec.facts.namespace, rec.facts.name,
                            resp.message())
            rec.gone = True
            return 0.0
        return 2.0

    def _count(self, phase: str) -> None:
        child = self._transitions.get(phase)
        if child is None:
            child = self._transitions[phase] = self.metrics.pod_transitions.labels(phase)
        child.inc()

    async def _start(self, uid: str, rec: PodRecord) -> float:
        facts = rec.facts
        node = self.nodes[facts.node]
        host_ip = node.slot.internal_ip
        pod_ip = host_ip if facts.host_network else self._ips(facts.node).allocate(uid)
        if pod_ip is None:
            log.warning("node %s: pod CIDR %s is full; %s/%s waits", facts.node, node.slot.pod_cidr,
                        facts.namespace, facts.name)
            return 10.0
        now_w = self.clock.wall()
        resp = await self.api.request("patch_pod_status", "PATCH", self._path(facts) + "/status",
                                      body=running_patch(facts, now_w, pod_ip, host_ip),
                                      content_type=STRATEGIC_MERGE_PATCH)
        wait = self._outcome(rec, resp)
        if resp.ok:
            self._wrote(resp)
            rec.started_wall = now_w
            rec.facts = dataclasses.replace(rec.facts, phase="Running", run_started_at=float(int(now_w)),
                                            pod_ip=pod_ip, restart_count=0,
                                            containers_ready=facts.ready_delay is None,
                                            observed_generation=facts.generation)
            self._count("Running")
        return wait

    async def _prepare(self, uid: str, rec: PodRecord) -> float:
        """The kubelet's DRA step before a pod starts: read each of its claims (as the kubelet's DRA
        manager does) and find it allocated and reserved for this pod; then the claims are prepared
        (nothing is written: the driver's NodePrepareResources is local to the node).  Until then the
        pod stays Pending and this is tried again, backing off to 10 s.  Nothing is ever freed here:
        the resourceclaim controller releases claims when pods end."""
        facts = rec.facts
        for _name, claim in facts.claims:
            outcome = "missing"
            if claim:
                resp = await self.api.request(
                    "get_resourceclaim", "GET",
                    f"/apis/resource.k8s.io/v1/namespaces/{facts.namespace}/resourceclaims/{claim}")
                if resp.ok:
                    status = resp.json().get("status") or {}
                    if not status.get("allocation"):
                        outcome = "unallocated"
                    elif not any(r.get("uid") == uid for r in status.get("reservedFor") or ()):
                        outcome = "unreserved"
                    else:
                        continue
                elif resp.status != 404:
                    outcome = "error"
            self.metrics.dra_prepares.labels(outcome).inc()
            rec.prepare_tries += 1
            if rec.prepare_tries in (1, 10) or rec.prepare_tries % 50 == 0:
                log.info("pod %s/%s: claim %s %s; the pod waits", facts.namespace, facts.name, claim or "(not named "
                         "yet)", outcome)
            return prepare_retry_s(rec.prepare_tries)
        now_w = self.clock.wall()
        rec.prepared_wall = now_w
        self.metrics.dra_prepares.labels("prepared").inc()
        self.metrics.dra_prepare_seconds.observe(max(0.0, now_w - facts.bound_at))
        return 0.0

    async def _ready(self, uid: str, rec: PodRecord) -> float:
        facts = rec.facts
        resp = await self.api.request("patch_pod_status", "PATCH", self._path(facts) + "/status",
                                      body=ready_patch(facts, self.clock.wall(), rec.started_wall),
                                      content_type=STRATEGIC_MERGE_PATCH)
        wait = self._outcome(rec, resp)
        if resp.ok:
            self._wrote(resp)
            rec.facts = dataclasses.replace(facts, containers_ready=True, observed_generation=facts.generation)
            self._count("Ready")
        return wait

    async def _finish(self, uid: str, rec: PodRecord) -> float:
        facts = rec.facts
        now_m, now_w = self.clock.monotonic(), self.clock.wall()
        code = rec.forced_exit
        if code is None:
            code = self.faults.exit_override(uid, now_m)
        if code is None:
            code = exit_code(facts, self.nodes[facts.node].slot.pool.lifecycle)
        policy = facts.restart_policy
        restart = (code != 0 and policy == "OnFailure") or policy == "Always"
        if restart:
            body = restarted_patch(facts, now_w, code, rec.started_wall)
        else:
            body = terminated_patch(facts, now_w, code, rec.started_wall)
        body = self._with_spread(facts, body)
        resp = await self.api.request("patch_pod_status", "PATCH", self._path(facts) + "/status", body=body,
                                      content_type=STRATEGIC_MERGE_PATCH)
        wait = self._outcome(rec, resp)
        if resp.ok:
            self._wrote(resp)
            rec.forced_exit = None
            if restart:
                rec.started_wall = now_w
                rec.facts = dataclasses.replace(facts, restart_count=facts.restart_count + 1,
                                                run_started_at=float(int(now_w)),
                                                containers_ready=facts.ready_delay is None,
                                                observed_generation=facts.generation)
                self._count("ContainerRestarted")
            else:
                phase = "Succeeded" if code == 0 else "Failed"
                rec.facts = dataclasses.replace(facts, phase=phase, containers_ready=False,
                                                observed_generation=facts.generation)
                self._ips(facts.node).release(uid)
                self._count(phase)
        return wait

    async def _finalize(self, uid: str, rec: PodRecord) -> float:
        facts = rec.facts
        if facts.phase not in TERMINAL:
            code = deletion_exit_code(facts)
            resp = await self.api.request(
                "patch_pod_status", "PATCH", self._path(facts) + "/status",
                body=self._with_spread(facts, terminated_patch(facts, self.clock.wall(), code, rec.started_wall)),
                content_type=STRATEGIC_MERGE_PATCH)
            wait = self._outcome(rec, resp)
            if not resp.ok:
                return wait
            self._wrote(resp)
            phase = "Succeeded" if code == 0 else "Failed"
            rec.facts = dataclasses.replace(facts, phase=phase, containers_ready=False,
                                            observed_generation=facts.generation)
            self._ips(facts.node).release(uid)
            self._count(phase)
        resp = await self.api.request("delete_pod", "DELETE", self._path(facts), body=delete_options(uid))
        if resp.ok or resp.status in _GONE:
            rec.delete_sent = True
            self.metrics.pod_deletions.inc()
            return 0.0
        return 2.0

    # --- faults --------------------------------------------------------------------------------
    def fail_running(self, fraction: float, code: int, seed: int) -> list[str]:
        """Crash ``fraction`` of the running pods now with exit ``code``; returns ``namespace/name`` s."""
        running = {uid: rec for uid, rec in self.records.items()
                   if rec.facts.phase == "Running" and not rec.facts.deleting and not rec.gone}
        chosen = choose(list(running), fraction, seed)
        for uid in chosen:
            rec = running[uid]
            rec.forced_exit = code
            self._replan(uid, rec)
        return sorted(f"{running[u].facts.namespace}/{running[u].facts.name}" for u in chosen)

    def fail_named(self, names: set[str], code: int) -> list[str]:
        """Crash the running pods named ``namespace/name`` in ``names`` (those on this agent's nodes) now with
        exit ``code``; returns the ones it crashed (a pod already ending, or on another agent, is left)."""
        hit = {uid: rec for uid, rec in self.records.items()
               if f"{rec.facts.namespace}/{rec.facts.name}" in names and rec.facts.phase == "Running"
               and not rec.facts.deleting and not rec.gone}
        for uid, rec in hit.items():
            rec.forced_exit = code
            self._replan(uid, rec)
        return sorted(f"{rec.facts.namespace}/{rec.facts.name}" for rec in hit.values())

    def replan_node(self, node: str) -> None:
        """Plan every pod of ``node`` again (its heartbeat fault ended)."""
        for uid, rec in list(self.records.items()):
            if rec.facts.node == node:
                self._replan(uid, rec)
