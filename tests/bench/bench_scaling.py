#!/usr/bin/env python
"""``make bench-scaling``: how far one machine goes, and what more agent processes (pods) give.

On one ``scale``-profile local control plane (real kube-apiserver, etcd, controller-manager, scheduler):

(0) **Idle**: the control plane with no hollow nodes (the intercept of the fits).
(1) **One agent at a CPU limit** (``--quota``, default 0.1 core): an agent holding ``--quota-nodes``
    nodes is put in a cgroup-v1 CPU quota (the CFS quota a kubelet gives a pod with that CPU limit),
    then (1a) the quota is lowered step by step with the nodes held, and (1b) at ``--quota`` bare pods
    are created on its nodes at rising rates.  The step at which it falls behind is the per-pod
    capacity at that limit.  Criterion (stated in the report): lease renew lag p99 (the agent's own
    histogram: acknowledgement minus deadline) above ``--lag-bound-s``, or for pods: pods reaching
    Running at under 90% of the offered rate, or create-to-Running p99 above ``--lag-bound-s``.
(2) **Growing the cluster by adding agents**: agent A (1k nodes), then B (1k), C (2k), D (4k), each
    times ``--size-scale`` (default 0.5: 500, 1k, 2k, 4k nodes in all), until a steady window says the
    machine is full (nodes NotReady, lease age p99 past 40 s, a control-plane restart).  At each size:
    a steady window (nodes only, leases renewing) and a churn window (bare pods on A's nodes at
    ``--churn-rate`` pods/s: Pending -> Running -> Succeeded -> deleted), each with the CPU of every
    agent and every control-plane process and their RSS.  At the first size A is also driven at
    ``--sweep`` rates: its CPU against its transitions/s.

From these: agent cores per 1,000 nodes (line fit over every agent at every size), transitions per
agent core (fit over the sweep), the cost every agent pays for watching the *whole* cluster's pods
(the bystander agents during churn), a line per control-plane component (cores and RSS against
nodes, idle and under churn) with its error, and the agent pods and cores a 5,000- and a 15,000-node
target needs (projections, marked as such).

CPU is read per process with psutil (user+system seconds from /proc: what each process's own
``process_cpu_seconds_total`` reports); RSS likewise (``process_resident_memory_bytes``).  Lease ages
come from LISTs of the Lease objects; pod transitions from a watch.  Run it alone on the machine:
another heavy job beside it moves every figure.

Usage:  python tests/bench/bench_scaling.py [--dir /tmp/hs-scaling] [--steady-s 45] ...
        python tests/bench/bench_scaling.py --render reports/bench/scaling.json   (re-derive and re-render)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hollow import (  # noqa: E402
    CONTROL_PLANE,
    LEASE_DURATION_S,
    CpuMeter,
    NodeTracker,
    _reap,
    histogram_quantile,
    lease_ages,
    log,
    pct,
    wait_for,
)
from machine import machine_facts  # noqa: E402
from portable import portable  # noqa: E402
from scaling_fit import AgentCost, Fit, linear_fit, nodes_until, quantile, size_agents  # noqa: E402

from hollow.api import ApiClient, ApiSettings  # noqa: E402
from hollow.metrics import Metrics  # noqa: E402
from hollow.process import AgentProcess, start_agent  # noqa: E402
from hollow.watching import Watcher, WatchSettings  # noqa: E402
from hollowscale.cluster.local import ClusterInfo, LocalCluster  # noqa: E402
from kubecore.config import load_endpoint  # noqa: E402

GPUS = 8
RUN_DURATION_S = 5
TRANSITIONS_PER_POD = 3  # Pending->Running, Running->Succeeded, deletion
NS = "scaling-bench"
BENCH_LABEL = "hollowscale.io/bench"
CGROUP_ROOT = Path("/sys/fs/cgroup/cpu")
CFS_PERIOD_US = 100_000  # the kubelet's CFS period
MIN_QUOTA = 1_000 / CFS_PERIOD_US  # cgroup v1 refuses a quota under 1 ms per period
#: the default scenario (scenarios/default.yaml): ~5 pods/s on 1,000 nodes; scaled with the node count
DEFAULT_PODS_PER_S_PER_1000_NODES = 5.0
TARGETS = (5_000, 15_000)
#: (agent name, its nodes): the growth of phase (2)
GROWTH = (("a", 1000), ("b", 1000), ("c", 2000), ("d", 4000))


# --- agents -------------------------------------------------------------------------------------
@dataclass
class Agent:
    """One hollow agent process with its own pool (``scale-<name>-<i>`` nodes)."""

    name: str
    nodes: int
    proc: AgentProcess
    cgroup: Path | None = None

    @property
    def pool(self) -> str:
        return f"scale-{self.name}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def node_names(self) -> list[str]:
        return [f"{self.pool}-{i}" for i in range(self.nodes)]


def pools_doc(pool: str, count: int, index: int) -> dict[str, Any]:
    """One GPU pool with its own pod network (agents' pools must not share pod CIDRs)."""
    return {"pools": [{
        "name": pool, "count": count, "pod_cidr": f"10.{16 * index}.0.0/12",
        "resources": {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": str(GPUS)},
        "labels": {BENCH_LABEL: "scaling", "nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"},
        "topology": {"zones": ["zone-a", "zone-b", "zone-c"], "racks_per_zone": 10}}]}


class CpuQuota:
    """A cgroup-v1 CPU quota of our own (``/sys/fs/cgroup/cpu/hs-scaling-<pid>``): what a kubelet gives a
    pod with a CPU limit (CFS quota per 100 ms period).  Removed again by :meth:`close`."""

    def __init__(self) -> None:
        self.path = CGROUP_ROOT / f"hs-scaling-{os.getpid()}"

    @staticmethod
    def available() -> bool:
        return os.access(CGROUP_ROOT, os.W_OK) and (CGROUP_ROOT / "cpu.cfs_quota_us").exists()

    def open(self, pid: int) -> None:
        self.path.mkdir(exist_ok=True)
        (self.path / "cpu.cfs_period_us").write_text(str(CFS_PERIOD_US))
        (self.path / "cgroup.procs").write_text(str(pid))

    def set(self, cores: float | None) -> None:
        """``cores`` of CPU per period; None for no limit."""
        (self.path / "cpu.cfs_quota_us").write_text("-1" if cores is None else str(int(cores * CFS_PERIOD_US)))

    def throttled(self) -> tuple[int, int]:
        """(periods, throttled periods) so far."""
        stat = dict(line.split() for line in (self.path / "cpu.stat").read_text().splitlines())
        return int(stat.get("nr_periods", 0)), int(stat.get("nr_throttled", 0))

    def close(self) -> None:
        """Move whatever is left back to the root group and remove ours."""
        if not self.path.exists():
            return
        with contextlib.suppress(OSError):
            self.set(None)
        with contextlib.suppress(OSError):
            for pid in (self.path / "cgroup.procs").read_text().split():
                (CGROUP_ROOT / "cgroup.procs").write_text(pid)
        with contextlib.suppress(OSError):
            self.path.rmdir()


# --- pods ---------------------------------------------------------------------------------------
@dataclass
class PodTimes:
    created: float | None = None
    running: float | None = None
    done: float | None = None
    deleted: float | None = None


@dataclass
class ChurnTracker:
    """Watch handler for one churn window's pods (by name): when each reached Running, finished, went away."""

    pods: dict[str, PodTimes] = field(default_factory=dict)
    on_done: Any = None
    failed: int = 0

    def get(self, name: str) -> PodTimes:
        return self.pods.setdefault(name, PodTimes())

    def on_event(self, kind: str, obj: dict[str, Any]) -> None:
        now = time.monotonic()
        t = self.get(obj["metadata"]["name"])
        if kind == "DELETED":
            t.deleted = t.deleted or now
            return
        phase = (obj.get("status") or {}).get("phase")
        if phase in ("Running", "Succeeded", "Failed") and t.running is None:
            t.running = now
        if phase in ("Succeeded", "Failed") and t.done is None:
            t.done = now
            self.failed += phase == "Failed"
            if self.on_done:
                self.on_done(obj["metadata"]["name"])

    def on_relisted(self, uids: set[str]) -> None:
        pass

    def transitions_between(self, a: float, b: float) -> int:
        """Transitions seen in [a, b): Running, finished, deleted."""
        return sum(1 for t in self.pods.values() for x in (t.running, t.done, t.deleted) if x is not None and a <= x < b)


def pod_body(name: str, node: str, tag: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {BENCH_LABEL: tag},
                         "annotations": {"hollowscale.io/run-duration": f"{RUN_DURATION_S}s"}},
            "spec": {"restartPolicy": "Never", "automountServiceAccountToken": False, "nodeName": node,
                     "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.invalid/worker:1",
                                     "resources": {"requests": {"cpu": "100m", "nvidia.com/gpu": "1"},
                                                   "limits": {"nvidia.com/gpu": "1"}}}]}}


# --- the bench ----------------------------------------------------------------------------------
class Bench:
    """The control plane, the agents, the meters."""

    def __init__(self, args: argparse.Namespace, cluster: LocalCluster, info: ClusterInfo, api: ApiClient) -> None:
        self.args = args
        self.cluster = cluster
        self.info = info
        self.api = api
        self.work = Path(args.dir) / "work"
        self.work.mkdir(parents=True, exist_ok=True)
        self.cpu = CpuMeter({**info.pids, "bench-client": os.getpid()})
        self.agents: dict[str, Agent] = {}
        self.nodes = NodeTracker()
        self.quota: CpuQuota | None = None
        self.churn_seq = 0

    # agents
    async def add_agent(self, name: str, count: int) -> tuple[Agent, float]:
        """Start agent ``name`` with ``count`` nodes; (agent, seconds until all its nodes were Ready)."""
        index = len(self.agents) + 1
        pools = self.work / f"pools-{name}.yaml"
        pools.write_text(yaml.safe_dump(pools_doc(f"scale-{name}", count, index)))
        t0 = time.monotonic()
        proc = await asyncio.to_thread(start_agent, str(self.info.kubeconfig), pools, self.work / f"agent-{name}.log",
                                       "--max-inflight", "256", "--log-level", "WARNING", "--delete-nodes-on-exit")
        agent = Agent(name, count, proc)
        self.agents[name] = agent
        self.cpu.add(f"agent-{name}", proc.pid)
        want = sum(a.nodes for a in self.agents.values())
        await wait_for(f"{want} nodes Ready", lambda: len(self.nodes.ready) >= want, self.args.register_cap_s)
        ready_s = time.monotonic() - t0
        log(f"  agent {name}: {count} nodes, {len(self.nodes.ready)}/{want} Ready after {ready_s:.1f}s")
        return agent, round(ready_s, 2)

    async def stop_agent(self, name: str) -> None:
        agent = self.agents.pop(name)
        self.cpu.procs.pop(f"agent-{name}", None)
        await asyncio.to_thread(agent.proc.stop, 60)
        await wait_for(f"agent {name}'s nodes gone", lambda: not any(n.startswith(agent.pool + "-")
                                                                       for n in self.nodes.names), 60)

    async def stop_all(self) -> None:
        for a in self.agents.values():
            a.proc.terminate()
        for name in list(self.agents):
            await asyncio.to_thread(self.agents.pop(name).proc.stop, 60)

    # measuring
    async def lease_ages(self, prefix: str) -> list[float]:
        """Lease ages from a LIST; [] (and a log line) when an overloaded apiserver does not answer in time:
        a missing figure, not a stuck bench."""
        try:
            async with asyncio.timeout(self.args.list_cap_s):
                return await lease_ages(self.api, prefix)
        except (TimeoutError, OSError, ValueError) as exc:
            log(f"  !! lease LIST: {exc!r}")
            return []

    def restarts(self) -> dict[str, int]:
        """Restarts so far per control-plane component; components the supervisor restarted are metered
        under their new pid from now on (a window a restart fell into has no figure for that component)."""
        comps = self.cluster.components()
        for name, c in comps.items():
            proc = self.cpu.procs.get(name)
            if c.pid and (proc is None or proc.pid != c.pid):
                with contextlib.suppress(psutil.Error):
                    self.cpu.add(name, c.pid)
        return {name: c.restarts for name, c in comps.items()}

    def delta(self, a: tuple[float, dict[str, float]], b: tuple[float, dict[str, float]],
              r0: dict[str, int]) -> dict[str, Any]:
        """:meth:`CpuMeter.delta` with NaN (a process gone) as None, and the restarts since ``r0``."""
        d = CpuMeter.delta(a, b)
        d["cores"] = {k: (v if v is None or math.isfinite(v) else None) for k, v in d["cores"].items()}
        d["restarts"] = {k: v - r0.get(k, 0) for k, v in self.restarts().items() if v - r0.get(k, 0) > 0}
        return d

    def rss_mb(self) -> dict[str, float]:
        out = {}
        for name, proc in self.cpu.procs.items():
            with contextlib.suppress(psutil.Error):
                out[name] = round(proc.memory_info().rss / 2**20, 1)
        return out

    async def window(self, seconds: float, label: str, lease_prefix: str | None = "scale-") -> dict[str, Any]:
        """Every process's cores over ``seconds``, RSS (median of samples), each agent's renew lag, lease ages
        at the end, nodes that went NotReady."""
        m0 = {n: a.proc.metrics() for n, a in self.agents.items()}
        self.nodes.armed, self.nodes.went_notready = True, set()
        r0 = self.restarts()
        a = self.cpu.snap()
        rss: dict[str, list[float]] = {}
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            for k, v in self.rss_mb().items():
                rss.setdefault(k, []).append(v)
            await asyncio.sleep(min(5.0, max(0.05, t_end - time.monotonic())))
        b = self.cpu.snap()
        m1 = {n: a.proc.metrics() for n, a in self.agents.items()}
        ages = await self.lease_ages(lease_prefix) if lease_prefix and self.agents else []
        self.nodes.armed = False
        d = self.delta(a, b, r0)
        out = {"label": label, "wall_s": d["wall_s"], "cores": d["cores"], "control_plane_cores": d["control_plane_cores"],
               "restarts": d["restarts"], "load_avg_1m_end": round(os.getloadavg()[0], 2),
               "rss_mb": {k: round(statistics.median(v), 1) for k, v in rss.items()},
               "nodes": sum(ag.nodes for ag in self.agents.values()),
               "agent_nodes": {n: ag.nodes for n, ag in self.agents.items()},
               "renew_lag_p99_s": {n: histogram_quantile(m0[n], m1[n], "hollow_lease_renew_lag_seconds", 0.99)
                                   for n in m1},
               "renew_lag_p50_s": {n: histogram_quantile(m0[n], m1[n], "hollow_lease_renew_lag_seconds", 0.5)
                                   for n in m1},
               "lease_age_s": {"p50": pct(ages, 0.5), "p99": pct(ages, 0.99), "max": pct(ages, 1.0), "n": len(ages)},
               "nodes_went_notready": len(self.nodes.went_notready), "nodes_ready": len(self.nodes.ready),
               **agent_health(m0, m1)}
        agents = {n: out["cores"].get(f"agent-{n}") for n in self.agents}
        log(f"  [{label}] {out['nodes']} nodes: control plane {out['control_plane_cores']} cores, agents {agents}, "
            f"lease age p99 {out['lease_age_s']['p99']}s, renew lag p99 {out['renew_lag_p99_s']}")
        return out

    async def churn(self, agent: Agent, rate: float, seconds: float, label: str) -> dict[str, Any]:
        """Bare pods on ``agent``'s nodes at ``rate``/s for ``seconds``; each pod deleted (grace 0) once
        finished.  CPU is measured over the steady part (after the first pods' run duration); then the
        stream stops and the pods left are deleted."""
        self.churn_seq += 1
        tag = f"churn-{self.churn_seq}"
        tracker = ChurnTracker()
        deletes: set[asyncio.Task[Any]] = set()

        def delete(name: str) -> None:
            task = asyncio.ensure_future(self.api.request("delete_pod", "DELETE", f"/api/v1/namespaces/{NS}/pods/{name}",
                                                          body={"gracePeriodSeconds": 0}, retry=False))
            deletes.add(task)
            task.add_done_callback(deletes.discard)

        tracker.on_done = delete
        watcher = Watcher(self.api, f"bench_{tag}", f"/api/v1/namespaces/{NS}/pods", {"labelSelector": f"{BENCH_LABEL}={tag}"},
                          tracker, Metrics(), WatchSettings(page_size=2000))
        wtask = asyncio.ensure_future(watcher.run())
        await watcher.synced.wait()
        nodes = agent.node_names()
        sem = asyncio.Semaphore(128)
        creates: set[asyncio.Task[Any]] = set()
        errors = 0

        async def create(i: int) -> None:
            nonlocal errors
            name = f"{tag}-{i}"
            async with sem:
                resp = await self.api.request("create_pod", "POST", f"/api/v1/namespaces/{NS}/pods",
                                              body=pod_body(name, nodes[i % len(nodes)], tag))
            if resp.status == 201:
                t = tracker.get(name)
                t.created = t.created or time.monotonic()
            else:
                errors += 1

        total = int(rate * seconds)
        warm = RUN_DURATION_S + 3.0
        r0 = self.restarts()
        t0 = time.monotonic()
        snap_a: tuple[float, dict[str, float]] | None = None
        m0: dict[str, dict[str, float]] = {}
        for i in range(total):
            due = t0 + i / rate
            now = time.monotonic()
            if snap_a is None and now - t0 >= warm:
                snap_a, m0 = self.cpu.snap(), {n: a.proc.metrics() for n, a in self.agents.items()}
            if due > now:
                await asyncio.sleep(due - now)
            task = asyncio.ensure_future(create(i))
            creates.add(task)
            task.add_done_callback(creates.discard)
        snap_b, m1 = self.cpu.snap(), {n: a.proc.metrics() for n, a in self.agents.items()}
        create_s = time.monotonic() - t0
        if snap_a is None:  # the stream was shorter than the warm-up: measure nothing rather than the ramp
            snap_a, m0 = snap_b, m1
        ages = await self.lease_ages("scale-")
        # drain: the last pods run, finish and are deleted
        await asyncio.gather(*creates, return_exceptions=True)
        await wait_for(f"{tag} drained", lambda: all(t.deleted for t in tracker.pods.values()),
                       RUN_DURATION_S + self.args.drain_cap_s)
        left = [n for n, t in tracker.pods.items() if not t.deleted]
        for name in left:
            delete(name)
        await asyncio.gather(*deletes, return_exceptions=True)
        wtask.cancel()
        await _reap(wtask)
        d = self.delta(snap_a, snap_b, r0)
        a_t, b_t = snap_a[0], snap_b[0]
        # every pod of the stream counts for the lag (the drain gave the last ones time to start)
        in_window = [t for t in tracker.pods.values() if t.created is not None]
        lags = [t.running - t.created for t in in_window if t.running is not None and t.created is not None]
        not_running = sum(1 for t in in_window if t.running is None)
        wall = max(1e-6, b_t - a_t)
        tps = tracker.transitions_between(a_t, b_t) / wall
        running_per_s = sum(1 for t in tracker.pods.values() if t.running and a_t <= t.running < b_t) / wall
        out = {"label": label, "agent": agent.name, "offered_pods_per_s": rate, "seconds": seconds,
               "created": sum(1 for t in tracker.pods.values() if t.created), "create_errors": errors,
               "create_s": round(create_s, 2), "achieved_create_per_s": round(total / create_s, 2),
               "wall_s": d["wall_s"], "cores": d["cores"], "control_plane_cores": d["control_plane_cores"],
               "restarts": d["restarts"], "load_avg_1m_end": round(os.getloadavg()[0], 2),
               "rss_mb": self.rss_mb(), "nodes": sum(a.nodes for a in self.agents.values()),
               "agent_nodes": {n: a.nodes for n, a in self.agents.items()},
               "transitions_per_s": round(tps, 2), "running_per_s": round(running_per_s, 2),
               "running_lag_p50_s": quantile(lags, 0.5), "running_lag_p99_s": quantile(lags, 0.99),
               "not_running": not_running, "failed": tracker.failed, "left_undeleted": len(left),
               "renew_lag_p99_s": {n: histogram_quantile(m0[n], m1[n], "hollow_lease_renew_lag_seconds", 0.99)
                                   for n in m1 if n in m0},
               "lease_age_s": {"p99": pct(ages, 0.99), "max": pct(ages, 1.0), "n": len(ages)},
               **agent_health(m0, m1)}
        for k in ("running_lag_p50_s", "running_lag_p99_s"):
            out[k] = round(out[k], 3) if out[k] is not None else None
        log(f"  [{label}] {rate}/s offered on {agent.name}: {out['transitions_per_s']} transitions/s, Running lag p99 "
            f"{out['running_lag_p99_s']}s, agent {d['cores'].get('agent-' + agent.name)} cores, control plane "
            f"{d['control_plane_cores']} cores")
        return out


def summed_quantile(before: dict[str, float], after: dict[str, float], name: str, q: float) -> float | None:
    """:func:`histogram_quantile` of a labelled histogram with its label sets summed per bucket (e.g. the
    agent's API latency over every verb)."""

    def summed(m: dict[str, float]) -> dict[str, float]:
        out: dict[str, float] = {}
        for key, v in m.items():
            if key.startswith(name + "_bucket{") and 'le="' in key:
                le = key.split('le="')[1].split('"')[0]
                k = f'{name}_bucket{{le="{le}"}}'
                out[k] = out.get(k, 0.0) + v
        return out

    return histogram_quantile(summed(before), summed(after), name, q)


def agent_health(m0: dict[str, dict[str, float]], m1: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Per agent over a window: event-loop lag p99 (late wake-ups: the process is short of CPU) and API
    latency p99 over every verb (slow answers: the control plane is behind)."""
    return {"loop_lag_p99_s": {n: summed_quantile(m0[n], m1[n], "hollow_event_loop_lag_seconds", 0.99)
                               for n in m1 if n in m0},
            "api_latency_p99_s": {n: summed_quantile(m0[n], m1[n], "hollow_api_request_duration_seconds", 0.99)
                                  for n in m1 if n in m0}}


def saturated(w: dict[str, Any], agent: str, bound: float) -> list[str]:
    """Why ``w`` (a window or churn record) counts as the agent falling behind ([] = it kept up)."""
    why = []
    lags = w.get("renew_lag_p99_s") or {}
    lag = lags.get(agent)
    if agent in lags and lag is None and "offered_pods_per_s" not in w:
        why.append("renew lag unknown: the agent's metrics did not answer (too throttled to serve them)")
    if lag is not None and lag > bound:
        why.append(f"renew lag p99 {lag:.1f}s > {bound}s")
    if "offered_pods_per_s" in w:
        if w["running_per_s"] < 0.9 * w["offered_pods_per_s"]:
            why.append(f"Running at {w['running_per_s']}/s < 90% of {w['offered_pods_per_s']}/s offered")
        rl = w.get("running_lag_p99_s")
        if rl is None or rl > bound:
            why.append(f"create-to-Running p99 {rl}s > {bound}s")
    return why


async def quota_phase(bench: Bench, args: argparse.Namespace) -> dict[str, Any]:
    """(1) one agent under a CPU quota: lower the quota with the nodes held, then raise the pod rate."""
    out: dict[str, Any] = {"nodes": args.quota_nodes, "quota_cores": args.quota, "lag_bound_s": args.lag_bound_s}
    if not CpuQuota.available():
        out["skipped"] = f"{CGROUP_ROOT} is not writable: no CPU quota to put the agent under"
        log(f"  !! {out['skipped']}")
        return out
    agent, out["ready_s"] = await bench.add_agent("q", args.quota_nodes)
    quota = CpuQuota()
    bench.quota = quota
    try:
        quota.open(agent.pid)
        steady = []
        for q in args.quota_steps:
            quota.set(q)
            await asyncio.sleep(args.quota_settle_s)
            p0 = quota.throttled()
            w = await bench.window(args.quota_window_s, f"quota {q} core, {args.quota_nodes} nodes")
            p1 = quota.throttled()
            w.update(quota_cores=q, throttled_share=round((p1[1] - p0[1]) / max(1, p1[0] - p0[0]), 3),
                     behind=saturated(w, "q", args.lag_bound_s))
            steady.append(w)
        out["steady"] = steady
        quota.set(args.quota)
        await asyncio.sleep(args.quota_settle_s + 10)  # catch up on leases before the pods
        pods = []
        for rate in args.quota_rates:
            p0 = quota.throttled()
            c = await bench.churn(agent, rate, args.churn_s, f"quota {args.quota} core, {rate} pods/s")
            p1 = quota.throttled()
            c.update(quota_cores=args.quota, throttled_share=round((p1[1] - p0[1]) / max(1, p1[0] - p0[0]), 3),
                     behind=saturated(c, "q", args.lag_bound_s))
            pods.append(c)
            if c["behind"]:
                break
        out["pods"] = pods
    finally:
        quota.close()
        bench.quota = None
    await bench.stop_agent("q")
    return out


def machine_full(w: dict[str, Any]) -> list[str]:
    """Why a steady window says this machine cannot hold more nodes ([] = it can): nodes went NotReady,
    lease age p99 past the lease duration (40 s), or a control-plane component restarted."""
    why = []
    if w["nodes_went_notready"]:
        why.append(f"{w['nodes_went_notready']} nodes went NotReady")
    p99 = w["lease_age_s"]["p99"]
    if p99 is not None and p99 > LEASE_DURATION_S:
        why.append(f"lease age p99 {p99:.0f}s > {LEASE_DURATION_S}s")
    if p99 is None and w["nodes"]:
        why.append("the Lease LIST got no answer in time")
    if w.get("restarts"):
        why.append(f"restarted: {w['restarts']}")
    return why


async def growth_phase(bench: Bench, args: argparse.Namespace, g: dict[str, Any]) -> None:
    """(2) add agents A..D; at each size a steady and a churn window; the rate sweep at the first size.
    Fills ``g`` step by step (a run cut short keeps what it measured); stops growing when the steady
    window says the machine is full (:func:`machine_full`)."""
    steps: list[dict[str, Any]] = g.setdefault("steps", [])
    sweep: list[dict[str, Any]] = g.setdefault("sweep", [])
    for name, full in GROWTH[:args.growth_steps]:
        count = max(1, round(full * args.size_scale))
        _, ready_s = await bench.add_agent(name, count)
        await asyncio.sleep(args.settle_s)
        step: dict[str, Any] = {"added": name, "ready_s": ready_s}
        step["steady"] = await bench.window(args.steady_s, f"steady, +{name}")
        step["churn"] = await bench.churn(bench.agents["a"], args.churn_rate, args.churn_s, f"churn, +{name}")
        if name == "a":  # the sweep, rising, until agent A falls behind (the steps after would only pile up)
            step["churn"]["behind"] = saturated(step["churn"], "a", args.lag_bound_s)
            sweep.append(step["churn"])
            for rate in sorted(args.sweep):
                if rate == args.churn_rate:
                    continue
                c = await bench.churn(bench.agents["a"], rate, args.churn_s, f"sweep {rate}/s")
                c["behind"] = saturated(c, "a", args.lag_bound_s)
                sweep.append(c)
                if c["behind"] and rate > args.churn_rate:
                    break
            sweep.sort(key=lambda c: c["offered_pods_per_s"])
        steps.append(step)
        full_why = machine_full(step["steady"])
        if full_why and name != GROWTH[args.growth_steps - 1][0]:
            g["stopped"] = {"after_nodes": step["steady"]["nodes"], "why": full_why}
            log(f"  machine full at {step['steady']['nodes']} nodes ({'; '.join(full_why)}): not growing further")
            break


async def run(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    """Everything on one control plane, filling ``doc`` as it goes (a run cut short keeps what it measured)."""
    cluster = LocalCluster(Path(args.dir) / "cluster", profile="scale")
    await asyncio.to_thread(cluster.down)  # a leftover of an interrupted run of ours is not reused
    log(f"starting a scale-profile control plane in {cluster.dir}")
    t0 = time.monotonic()
    info = await asyncio.to_thread(cluster.up, None, 300.0)
    doc["control_plane_up_s"] = round(time.monotonic() - t0, 1)
    bench: Bench | None = None
    try:
        api = ApiClient(load_endpoint(info.kubeconfig), ApiSettings(max_inflight=256, request_timeout_s=60), Metrics())
        await api.start()
        try:
            bench = Bench(args, cluster, info, api)
            nwatch = Watcher(api, "bench_nodes", "/api/v1/nodes", {"labelSelector": f"{BENCH_LABEL}=scaling"},
                             bench.nodes, Metrics(), WatchSettings(page_size=2000))
            ntask = asyncio.ensure_future(nwatch.run())
            await nwatch.synced.wait()
            await api.request("create_ns", "POST", "/api/v1/namespaces", body={"metadata": {"name": NS}})
            try:
                await asyncio.sleep(args.settle_s)
                doc["idle"] = await bench.window(args.idle_s, "idle, no nodes", lease_prefix=None)
                if args.quota_steps or args.quota_rates:
                    doc["quota"] = await quota_phase(bench, args)
                doc["growth"] = {}
                await growth_phase(bench, args, doc["growth"])
            finally:
                if bench.quota:
                    bench.quota.close()
                await bench.stop_all()
                ntask.cancel()
                await _reap(ntask)
        finally:
            await api.close()
    finally:
        await asyncio.to_thread(cluster.down)


# --- derivation (also what --render redoes) ------------------------------------------------------
def fit_or_none(xs: list[float], ys: list[float]) -> Fit | None:
    pts = [(x, y) for x, y in zip(xs, ys, strict=True) if isinstance(y, int | float) and math.isfinite(y)]
    if len({x for x, _ in pts}) < 2:
        return None
    return linear_fit([x for x, _ in pts], [y for _, y in pts])


def fd(f: Fit | None) -> dict[str, Any] | None:
    return f.as_dict() if f else None


def churn_part(g: dict[str, Any], kept_up: Any) -> dict[str, Any]:
    """Per-transition figures of one run's growth record: agent A over the sweep, the control plane over the
    same sweep, the bystander agents in the churn windows that kept up."""
    steps = g["steps"]
    out: dict[str, Any] = {}
    # agent churn cost: driver A over the sweep (its idle point from the first steady window)
    first = steps[0]["steady"]
    kept = [c for c in g["sweep"] if not c.get("behind")]  # the cost of a transition where the agent kept up
    sx = [0.0] + [c["transitions_per_s"] for c in kept]
    sy = [first["cores"].get("agent-a")] + [c["cores"].get("agent-a") for c in kept]
    own_fit = fit_or_none(sx, sy)
    out["agent_churn"] = {"points": [[x, y] for x, y in zip(sx, sy, strict=True)], "fit": fd(own_fit),
                          "left_out_behind": [c["offered_pods_per_s"] for c in g["sweep"] if c.get("behind")],
                          "transitions_per_core": round(1 / own_fit.slope) if own_fit and own_fit.slope > 0 else None,
                          "cpu_ms_per_transition": round(own_fit.slope * 1000, 4) if own_fit else None}
    # control plane per pod transition: the same sweep (its cores against A's transitions/s at 1k nodes)
    cy = [first["control_plane_cores"]] + [c["control_plane_cores"] for c in kept]
    cp_tps = fit_or_none(sx, cy)
    resolved = cp_tps is not None and cp_tps.slope > 0
    out["control_plane_churn"] = {"points": [[x, y] for x, y in zip(sx, cy, strict=True)], "fit": fd(cp_tps),
                                  "cpu_ms_per_transition": round(cp_tps.slope * 1000, 4) if cp_tps and resolved else None,
                                  "unresolved": None if resolved else
                                  "no positive slope: the control plane's own drift between the windows was larger "
                                  "than what the pods added"}
    if not resolved:
        cp_tps = None
    # bystanders: agents other than A, churn window minus steady window, per cluster transition/s
    by = []
    by_left_out = [s["churn"]["nodes"] for s in steps if not kept_up(s["churn"])]
    for s in steps:
        if not kept_up(s["churn"]):
            continue
        for n in s["steady"]["agent_nodes"]:
            if n == "a":
                continue
            extra = (s["churn"]["cores"].get(f"agent-{n}") or 0) - (s["steady"]["cores"].get(f"agent-{n}") or 0)
            tps = s["churn"]["transitions_per_s"]
            if tps > 0:
                by.append({"agent": n, "nodes": s["steady"]["nodes"], "extra_cores": round(extra, 4),
                           "cluster_transitions_per_s": tps, "cores_per_tps": round(extra / tps, 6)})
    per_watched = statistics.median([b["cores_per_tps"] for b in by]) if by else 0.0
    out["bystanders"] = {"points": by, "median_cores_per_cluster_tps": round(per_watched, 6) if by else None,
                         "left_out_sizes_behind": by_left_out,
                         "note": "every agent watches every bound pod of the cluster (spec.nodeName!=), so it "
                                 "decodes the other agents' pod events: this is that cost"}
    out.update(own_fit=own_fit, cp_tps=cp_tps, by=by, per_watched=per_watched)
    return out


def derive(doc: dict[str, Any], bound: float) -> dict[str, Any]:
    """Fits, capacities and sizing from the raw windows of ``doc``.  Churn windows in which the pods fell
    behind (:func:`saturated` with ``bound``) are left out of every per-transition figure: there the work
    done is not the work offered, and the CPU per transition means nothing."""

    def kept_up(c: dict[str, Any]) -> bool:
        return not saturated({**c, "renew_lag_p99_s": {}}, "a", bound)

    g = doc["growth"]
    steps = g["steps"]
    idle = doc["idle"]
    out: dict[str, Any] = {}
    # agent steady cost: every agent at every size
    xs, ys = [], []
    for s in steps:
        w = s["steady"]
        for n, nodes in w["agent_nodes"].items():
            xs.append(float(nodes))
            ys.append(w["cores"].get(f"agent-{n}"))
    agent_fit = fit_or_none(xs, ys)
    out["agent_steady"] = {"points": [[x, y] for x, y in zip(xs, ys, strict=True)], "fit": fd(agent_fit),
                           "cores_per_1000_nodes": round(agent_fit.slope * 1000, 5) if agent_fit else None,
                           "nodes_per_core": round(1 / agent_fit.slope) if agent_fit and agent_fit.slope > 0 else None}
    out["agents_total_per_size"] = [{
        "nodes": s["steady"]["nodes"], "agents": len(s["steady"]["agent_nodes"]),
        "agent_cores": round(sum(s["steady"]["cores"].get(f"agent-{n}") or 0 for n in s["steady"]["agent_nodes"]), 4),
        "cores_per_1000_nodes": round(1000 * sum(s["steady"]["cores"].get(f"agent-{n}") or 0
                                                 for n in s["steady"]["agent_nodes"]) / s["steady"]["nodes"], 4)}
        for s in steps]
    part = churn_part(g, kept_up)
    supp_raw = doc.get("supplement")
    supp = churn_part(supp_raw["raw"]["growth"], kept_up) if supp_raw else None
    for key in ("agent_churn", "control_plane_churn", "bystanders"):
        out[key] = part[key]
        if supp:
            out[key + "_supplement"] = supp[key]
    own_fit, cp_tps, by, per_watched = part["own_fit"], part["cp_tps"], part["by"], part["per_watched"]
    if supp:  # what this run could not resolve, from the supplementary run (marked in the report)
        own_fit = own_fit or supp["own_fit"]
        cp_tps = cp_tps or supp["cp_tps"]
        if not by and supp["by"]:  # the split of a transition's cost into watching and writing: from one run
            by, per_watched, own_fit = supp["by"], supp["per_watched"], supp["own_fit"]
            out["bystanders_from"] = "supplement"
        if not part["cp_tps"] and supp["cp_tps"]:
            out["control_plane_churn_from"] = "supplement"
    # control plane per component, idle (nodes 0 .. 8k) and under churn
    comps = [*CONTROL_PLANE, "control_plane"]
    cp: dict[str, Any] = {}
    for kind in ("steady", "churn"):
        wins = ([idle] if kind == "steady" else []) + [s[kind] for s in steps if kind == "steady" or kept_up(s[kind])]
        nx = [float(w["nodes"]) for w in wins]
        rows: dict[str, Any] = {}
        for c in comps:
            cores = [w["control_plane_cores"] if c == "control_plane" else w["cores"].get(c) for w in wins]
            rss = [sum(w["rss_mb"].get(k, 0) for k in CONTROL_PLANE) if c == "control_plane" else w["rss_mb"].get(c)
                   for w in wins]
            fc, fr = fit_or_none(nx, cores), fit_or_none(nx, rss)
            rows[c] = {"cores": cores, "rss_mb": rss, "cores_fit": fd(fc), "rss_fit": fd(fr),
                       "cores_per_1000_nodes": round(fc.slope * 1000, 4) if fc else None,
                       "cores_per_1000_nodes_se": round(fc.slope_se * 1000, 4) if fc and fc.slope_se else None,
                       "rss_mb_per_1000_nodes": round(fr.slope * 1000, 2) if fr else None,
                       "rss_mb_per_1000_nodes_se": round(fr.slope_se * 1000, 2) if fr and fr.slope_se else None,
                       "projection": {str(t): proj(fc, fr, t) for t in TARGETS}}
        cp[kind] = {"nodes": nx, "churn_pods_per_s": None if kind == "steady" else steps[0]["churn"]["offered_pods_per_s"],
                    "components": rows}
    out["control_plane"] = cp
    # capacity of one agent under a quota
    out["quota"] = quota_summary(doc.get("quota") or {})
    # sizing
    own = own_fit.slope if own_fit else 0.0
    base = agent_fit.intercept if agent_fit else 0.0
    per_node = agent_fit.slope if agent_fit else 0.0
    if by:  # measured: the owner's cost per transition splits into watching (every agent) and writing (owner)
        label = "measured watch cost" + (" (supplementary run)" if out.get("bystanders_from") else "")
        models = {label: AgentCost(base, per_node, max(0.0, own - per_watched), max(0.0, per_watched))}
    else:  # not measured: bound it; a bystander decodes the event as the owner does, but writes nothing
        models = {"watch cost 0 (lower bound)": AgentCost(base, per_node, own, 0.0),
                  "watch cost = owner's cost per transition (upper bound)": AgentCost(base, per_node, 0.0, own)}
    out["cost_models"] = {name: {"base_cores": round(c.base, 5), "cores_per_node": round(c.per_node, 8),
                                 "cores_per_own_tps": round(c.per_own_tps, 7),
                                 "cores_per_watched_tps": round(c.per_watched_tps, 7)} for name, c in models.items()}
    sizing = []
    for name, cost in models.items():
        for t in TARGETS:
            pods = DEFAULT_PODS_PER_S_PER_1000_NODES * t / 1000
            for pod_cpu, headroom in ((1.0, 0.5), (0.5, 0.5)):
                s = size_agents(cost, t, pods, TRANSITIONS_PER_POD, pod_cpu, headroom)
                sizing.append({"model": name, **s.__dict__})
    out["sizing"] = sizing
    # the control plane at each target: nodes (idle fit) plus the assumed churn (sweep fit's slope)
    idle_cp = cp["steady"]["components"]["control_plane"]["cores_fit"]
    cp_targets = []
    for t in TARGETS:
        tps = DEFAULT_PODS_PER_S_PER_1000_NODES * t / 1000 * TRANSITIONS_PER_POD
        if idle_cp:
            y, se = Fit(**idle_cp).predict(t)
            churn = cp_tps.slope * tps if cp_tps else 0.0
            churn_se = (cp_tps.slope_se or 0.0) * tps if cp_tps else 0.0
            cp_targets.append({"nodes": t, "transitions_per_s": tps, "nodes_cores": round(y, 3),
                               "nodes_cores_se": round(se, 3) if se is not None else None,
                               "churn_cores": round(churn, 3), "churn_cores_se": round(churn_se, 3),
                               "total_cores": round(y + churn, 3),
                               "total_cores_se": round(math.hypot(se or 0.0, churn_se), 3),
                               "churn_term": "measured" if cp_tps else "unresolved: nodes only"})
    out["control_plane_at_targets"] = cp_targets
    # this machine: where the cores run out
    cpf = [Fit(**{k: v for k, v in (cp["steady"]["components"][c]["cores_fit"] or {}).items()})
           for c in CONTROL_PLANE if cp["steady"]["components"][c]["cores_fit"]]
    fits = cpf + ([agent_fit] if agent_fit else [])
    ncpu = psutil.cpu_count() or 2
    full = nodes_until(ncpu, fits) if fits else None
    out["this_machine"] = {
        "cores": ncpu,
        "nodes_until_cores_full_fit": round(full) if full is not None else None,
        "control_plane_share_of_cost_per_node": round(sum(f.slope for f in cpf) / sum(f.slope for f in fits), 3)
        if fits and sum(f.slope for f in fits) > 0 else None,
        "largest_step": {k: steps[-1]["steady"][k] for k in ("nodes", "control_plane_cores", "lease_age_s",
                                                                "nodes_went_notready", "renew_lag_p99_s")}
        if steps else None}
    return out


def proj(fc: Fit | None, fr: Fit | None, nodes: int) -> dict[str, Any]:
    """A component's projected cores and RSS at ``nodes`` with the fit's standard error (a projection)."""
    out: dict[str, Any] = {}
    for key, f in (("cores", fc), ("rss_mb", fr)):
        if f:
            y, se = f.predict(nodes)
            out[key] = round(y, 3)
            out[f"{key}_se"] = round(se, 3) if se is not None else None
    return out


def quota_summary(q: dict[str, Any]) -> dict[str, Any]:
    """The last quota that held the nodes, the first that did not; the highest pod rate kept up with."""
    if not q or q.get("skipped"):
        return {"skipped": q.get("skipped") if q else "not run"}
    held = [w["quota_cores"] for w in q.get("steady", []) if not w["behind"]]
    fell = [w["quota_cores"] for w in q.get("steady", []) if w["behind"]]
    kept = [c for c in q.get("pods", []) if not c["behind"]]
    behind = [c for c in q.get("pods", []) if c["behind"]]
    nodes = q["nodes"]
    out: dict[str, Any] = {"nodes": nodes, "lag_bound_s": q["lag_bound_s"], "quota_cores": q["quota_cores"],
                           "lowest_quota_holding_nodes": min(held) if held else None,
                           "highest_quota_falling_behind": max(fell) if fell else None}
    if held:
        out["nodes_per_core_at_limit"] = round(nodes / min(held))
    best = max(kept, key=lambda c: c["transitions_per_s"]) if kept else None
    out["highest_rate_kept_up"] = best["offered_pods_per_s"] if best else None
    out["transitions_per_s_kept_up"] = best["transitions_per_s"] if best else None
    out["first_rate_behind"] = behind[0]["offered_pods_per_s"] if behind else None
    out["first_rate_behind_why"] = behind[0]["behind"] if behind else None
    if best:
        out["transitions_per_core_at_limit"] = round(best["transitions_per_s"] / q["quota_cores"])
    return out


# --- report -------------------------------------------------------------------------------------
def f3(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float):
        a = abs(v)
        return f"{v:.0f}" if a >= 100 else f"{v:.1f}" if a >= 10 else f"{v:.2f}" if a >= 1 else f"{v:.3f}" if a >= 0.01 \
            else f"{v:.2e}"
    return str(v)


def health(w: dict[str, Any], agent: str) -> str:
    """``loop lag p99 / API latency p99`` of one agent in a window record."""
    return f"{f3((w.get('loop_lag_p99_s') or {}).get(agent))} / {f3((w.get('api_latency_p99_s') or {}).get(agent))}"


def write_md(doc: dict[str, Any], path: Path) -> None:
    d, m = doc["derived"], doc["machine"]
    L = [f"# Scaling benchmark: one machine, and what more agents give ({doc['date']})", "",
         f"Command: `{doc['command']}`  ",
         f"Machine: {m['cpu_model']}, {m['cores']} cores, {m['memory_gib']} GiB; {m['os']}; Python {m['python']}  ",
         f"Versions: Kubernetes {doc['versions']['kubernetes']}, etcd {doc['versions']['etcd']}; control-plane "
         f"profile `scale`; load average at start {m['load_average_1_5_15']}  ",
         f"Wall time: {doc.get('wall_s', 'n/a')} s (control plane up {doc['raw'].get('control_plane_up_s')} s)", "",
         "## Method", "", *[f"- {x}" for x in doc["method"]], ""]
    a, c, by = d["agent_steady"], d["agent_churn"], d["bystanders"]
    af, cf = a["fit"] or {}, c["fit"] or {}
    L += ["## Per agent process (= per agent pod)", "",
          "| figure | value | from |", "|---|---|---|",
          f"| agent CPU per 1,000 hollow nodes, steady | {f3(a['cores_per_1000_nodes'])} cores "
          f"(± {f3((af.get('slope_se') or 0) * 1000)}) | line fit over every agent at every size, {af.get('n')} points |",
          f"| hollow nodes per agent core, steady | {f3(a['nodes_per_core'])} | 1 / slope (a projection past what one "
          "process held here) |",
          f"| fixed cost of one agent process | {f3(af.get('intercept'))} cores (± {f3(af.get('intercept_se'))}) | "
          "intercept |",
          f"| agent CPU per pod transition, own pods | {f3(c['cpu_ms_per_transition'])} ms | fit over the rate sweep "
          f"on agent A ({doc['raw']['growth']['steps'][0]['steady']['nodes']} nodes) and its idle point, {cf.get('n')} points, r² {f3(cf.get('r2'))}; rates where A fell "
          f"behind left out: {c.get('left_out_behind') or 'none'} |",
          f"| pod transitions per agent core | {f3(c['transitions_per_core'])} | 1 / slope |",
          f"| cost of watching the cluster's pods (bystander agents) | "
          f"{f3(by['median_cores_per_cluster_tps'] * 1000) if by['median_cores_per_cluster_tps'] is not None else 'n/a'} "
          f"ms per cluster transition | median over bystander agents during churn windows that kept up; left out "
          f"(pods fell behind) at {by.get('left_out_sizes_behind') or 'none'} nodes |",
          f"| control plane CPU per pod transition (for comparison) | "
          f"{f3((d.get('control_plane_churn') or {}).get('cpu_ms_per_transition'))} ms | the same sweep, control plane "
          f"cores against A's transitions/s{'; ' + d['control_plane_churn']['unresolved'] if (d.get('control_plane_churn') or {}).get('unresolved') else ''} |"]
    sup = doc["raw"].get("supplement")
    if sup:
        sa, sc, sb = d.get("agent_churn_supplement") or {}, d.get("control_plane_churn_supplement") or {}, \
            d.get("bystanders_supplement") or {}
        L += ["", f"Supplementary run at smaller sizes, where the control plane kept up with the pods ({sup['date']}, "
              f"`{sup['command']}`, {sup['wall_s']} s); "
              + ("its figures stand in for the ones this run could not resolve (marked in the sizing):"
                 if d.get("bystanders_from") or d.get("control_plane_churn_from") else
                 "this run resolved its own figures; the supplement's are shown for comparison:"), "",
              "| figure | value | from |", "|---|---|---|",
              f"| agent CPU per pod transition, own pods | {f3(sa.get('cpu_ms_per_transition'))} ms | sweep on its agent A "
              f"({sup['raw']['growth']['steps'][0]['steady']['nodes']} nodes), {(sa.get('fit') or {}).get('n')} points, "
              f"r² {f3((sa.get('fit') or {}).get('r2'))}; left out (behind): {sa.get('left_out_behind') or 'none'} |",
              f"| pod transitions per agent core | {f3(sa.get('transitions_per_core'))} | 1 / slope |",
              f"| cost of watching the cluster's pods (bystander agents) | "
              f"{f3(sb['median_cores_per_cluster_tps'] * 1000) if sb.get('median_cores_per_cluster_tps') is not None else 'n/a'}"
              f" ms per cluster transition | median of {len(sb.get('points') or [])} bystander points |",
              f"| control plane CPU per pod transition | {f3(sc.get('cpu_ms_per_transition'))} ms | "
              f"{sc.get('unresolved') or 'the same sweep'} |", "",
              "| window | nodes | transitions/s | Running lag p99 (s) | agent cores | control plane cores |",
              "|---|---|---|---|---|---|"]
        for st in sup["raw"]["growth"]["steps"]:
            for kind in ("steady", "churn"):
                w = st[kind]
                agents = ", ".join(f"{n} {f3(w['cores'].get('agent-' + n))}" for n in w["agent_nodes"])
                L.append(f"| {w['label']} | {w['nodes']} | {w.get('transitions_per_s', '-')} | "
                         f"{f3(w.get('running_lag_p99_s'))} | {agents} | {f3(w['control_plane_cores'])} |")
        for w in sup["raw"]["growth"]["sweep"]:
            if not w["label"].startswith("sweep"):
                continue  # the first size's churn window, listed above
            L.append(f"| {w['label']} | {w['nodes']} | {w['transitions_per_s']} | {f3(w['running_lag_p99_s'])} | "
                     f"a {f3(w['cores'].get('agent-a'))} | {f3(w['control_plane_cores'])} |")
    q = d["quota"]
    L += ["", "## One agent at a CPU limit (saturation, cgroup CPU quota)", ""]
    if q.get("skipped"):
        L.append(f"Not measured: {q['skipped']}.")
    else:
        L += [f"Criterion: the agent is *behind* when its lease renew lag p99 (acknowledged minus due) is above "
              f"{q['lag_bound_s']} s, or, with pods, when pods reach Running at under 90% of the offered rate or "
              f"create-to-Running p99 is above {q['lag_bound_s']} s.", "",
              "Loop lag = how late the agent's event loop woke a periodic probe (short of CPU); API = the agent's "
              "request latency over every verb (the control plane behind).", "",
              "| quota (cores) | nodes | agent cores | throttled periods | renew lag p99 (s) | loop lag / API p99 (s) "
              "| lease age p99 (s) | behind |",
              "|---|---|---|---|---|---|---|---|"]
        for w in doc["raw"]["quota"].get("steady", []):
            L.append(f"| {w['quota_cores']} | {w['nodes']} | {f3(w['cores'].get('agent-q'))} | {w['throttled_share']} | "
                     f"{f3(w['renew_lag_p99_s'].get('q'))} | {health(w, 'q')} | {f3(w['lease_age_s']['p99'])} | "
                     f"{'; '.join(w['behind']) or 'no'} |")
        L += ["", "| quota | offered pods/s | Running/s | transitions/s | agent cores | throttled | Running lag p50 / p99 (s) "
              "| renew lag p99 (s) | loop lag / API p99 (s) | behind |", "|---|---|---|---|---|---|---|---|---|---|"]
        for w in doc["raw"]["quota"].get("pods", []):
            L.append(f"| {w['quota_cores']} | {w['offered_pods_per_s']} | {w['running_per_s']} | {w['transitions_per_s']} | "
                     f"{f3(w['cores'].get('agent-q'))} | {w['throttled_share']} | {f3(w['running_lag_p50_s'])} / "
                     f"{f3(w['running_lag_p99_s'])} | {f3(w['renew_lag_p99_s'].get('q'))} | {health(w, 'q')} | "
                     f"{'; '.join(w['behind']) or 'no'} |")
        kept_txt = (f"{q.get('transitions_per_s_kept_up')} transitions/s kept up at {q['quota_cores']} core"
                    if q.get("transitions_per_s_kept_up") is not None else f"no rate kept up at {q['quota_cores']} core")
        L += ["", f"- Nodes held per core at the limit: {f3(q.get('nodes_per_core_at_limit'))} ({q['nodes']} nodes held at "
              f"{q.get('lowest_quota_holding_nodes')} core; behind at {q.get('highest_quota_falling_behind')} core)",
              f"- Pod transitions per core at the limit: {f3(q.get('transitions_per_core_at_limit'))} "
              f"({kept_txt}; first behind "
              f"at {q.get('first_rate_behind')} pods/s: {q.get('first_rate_behind_why')})"]
    L += ["", "## Growing the cluster: control plane and agents at each size", "",
          "| nodes | agents | agent cores (all) | agent cores / 1k nodes | kube-apiserver | etcd | controller-manager | "
          "scheduler | control plane | CP RSS MB | lease age p99 (s) | NotReady | restarts | load avg |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    wins = [doc["raw"]["idle"]] + [s["steady"] for s in doc["raw"]["growth"]["steps"]]
    tot = {t["nodes"]: t for t in d["agents_total_per_size"]}
    for w in wins:
        t = tot.get(w["nodes"], {})
        L.append(f"| {w['nodes']} | {len(w['agent_nodes'])} | {f3(t.get('agent_cores'))} | "
                 f"{f3(t.get('cores_per_1000_nodes'))} | " + " | ".join(f3(w["cores"].get(c)) for c in CONTROL_PLANE) +
                 f" | {f3(w['control_plane_cores'])} | {f3(sum(w['rss_mb'].get(c, 0) for c in CONTROL_PLANE))} | "
                 f"{f3(w['lease_age_s']['p99'])} | {w['nodes_went_notready']} | {w.get('restarts') or '-'} | "
                 f"{w.get('load_avg_1m_end', 'n/a')} |")
    L += ["", f"Under churn ({d['control_plane']['churn']['churn_pods_per_s']} pods/s on agent A's nodes):", "",
          "| nodes | transitions/s | Running lag p99 (s) | agent A cores | other agents (cores) | kube-apiserver | etcd | "
          "controller-manager | scheduler | control plane | A loop lag / API p99 (s) | restarts |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in doc["raw"]["growth"]["steps"]:
        w = s["churn"]
        others = {n: w["cores"].get(f"agent-{n}") for n in w["agent_nodes"] if n != "a"}
        L.append(f"| {w['nodes']} | {w['transitions_per_s']} | {f3(w['running_lag_p99_s'])} | {f3(w['cores'].get('agent-a'))} | "
                 f"{', '.join(f'{k} {f3(v)}' for k, v in others.items()) or '-'} | " +
                 " | ".join(f3(w["cores"].get(c)) for c in CONTROL_PLANE) + f" | {f3(w['control_plane_cores'])} | "
                 f"{health(w, 'a')} | {w.get('restarts') or '-'} |")
    L += ["", f"Rate sweep on agent A ({doc['raw']['growth']['steps'][0]['steady']['nodes']} nodes):", "",
          "| offered pods/s | Running/s | transitions/s | agent A cores | control plane cores | Running lag p50 / p99 (s) "
          "| A loop lag / API p99 (s) | load avg | behind |", "|---|---|---|---|---|---|---|---|---|"]
    for w in doc["raw"]["growth"]["sweep"]:
        L.append(f"| {w['offered_pods_per_s']} | {w['running_per_s']} | {w['transitions_per_s']} | "
                 f"{f3(w['cores'].get('agent-a'))} | {f3(w['control_plane_cores'])} | {f3(w['running_lag_p50_s'])} / "
                 f"{f3(w['running_lag_p99_s'])} | {health(w, 'a')} | {w.get('load_avg_1m_end', 'n/a')} | "
                 f"{'; '.join(w.get('behind') or []) or 'no'} |")
    L += ["", "## Control-plane cost per hollow node (line fits; projections are extrapolations)", ""]
    for kind, title in (("steady", "nodes only (idle)"), ("churn", "under churn")):
        cpk = d["control_plane"][kind]
        L += [f"### {title}, fitted over {', '.join(str(int(n)) for n in cpk['nodes'])} nodes", "",
              "| component | cores per 1k nodes (± se) | intercept cores | RSS MB per 1k nodes (± se) | "
              + " | ".join(f"projected at {t:,}: cores ± se, RSS MB ± se" for t in TARGETS) + " |",
              "|---|---|---|---|" + "---|" * len(TARGETS)]
        for comp, r in cpk["components"].items():
            L.append(f"| {comp} | {f3(r['cores_per_1000_nodes'])} (± {f3(r['cores_per_1000_nodes_se'])}) | "
                     f"{f3((r['cores_fit'] or {}).get('intercept'))} | {f3(r['rss_mb_per_1000_nodes'])} "
                     f"(± {f3(r['rss_mb_per_1000_nodes_se'])}) | " + " | ".join(
                         f"{f3(p.get('cores'))} ± {f3(p.get('cores_se'))}, {f3(p.get('rss_mb'))} ± {f3(p.get('rss_mb_se'))}"
                         for p in r["projection"].values()) + " |")
        L.append("")
    L += ["## Sizing (a projection from the fits above)", ""]
    for name, cm in d["cost_models"].items():
        L.append(f"- Agent cost model, {name}: cores = {f3(cm['base_cores'])} + {cm['cores_per_node']:.2e} × own nodes + "
                 f"{cm['cores_per_own_tps']:.2e} × own transitions/s + {cm['cores_per_watched_tps']:.2e} × the cluster's "
                 "transitions/s")
    L += ["", "Every agent watches every bound pod of the cluster (hollow/agent.py: `spec.nodeName!=`), so part of the "
          "cost of a transition is paid by every agent, not only its owner.  Churn assumed: the default scenario's "
          f"{DEFAULT_PODS_PER_S_PER_1000_NODES:g} pods/s per 1,000 nodes (scenarios/default.yaml) scaled to the node "
          f"count, {TRANSITIONS_PER_POD} transitions per pod.  Headroom: each agent pod planned at the stated share "
          "of its CPU.", "",
          "| model | target nodes | pods/s | transitions/s | CPU per agent pod | planned use | agent pods | "
          "cores per agent | agent cores in all | note |", "|---|---|---|---|---|---|---|---|---|---|"]
    for s in d["sizing"]:
        L.append(f"| {s.get('model', '')} | {s['nodes']:,} | {f3(s['pods_per_s'])} | {f3(s['transitions_per_s'])} | {s['pod_cpu']} | "
                 f"{int(s['headroom'] * 100)}% | {s['agents'] or 'n/a'} | {f3(s['cores_per_agent'])} | "
                 f"{f3(s['total_cores'])} | {s['reason']} |")
    L += ["", "Control plane at each target (projection: the idle line at that node count plus the sweep's control-plane "
          "cost per transition times the assumed transitions/s; ± one standard error, errors combined):", "",
          "| target nodes | transitions/s | for the nodes (cores) | for the churn (cores) | control plane in all (cores) |",
          "|---|---|---|---|---|"]
    for t in d.get("control_plane_at_targets", []):
        churn_cell = f"{f3(t['churn_cores'])} ± {f3(t['churn_cores_se'])}" if t.get("churn_term", "measured") == "measured" \
            else "unresolved (left out)"
        L.append(f"| {t['nodes']:,} | {f3(t['transitions_per_s'])} | {f3(t['nodes_cores'])} ± {f3(t['nodes_cores_se'])} | "
                 f"{churn_cell} | {f3(t['total_cores'])} ± {f3(t['total_cores_se'])} |")
    tm = d["this_machine"]
    L += ["", "## How far this machine goes", "",
          f"- Fitted steady cost (control plane + agents) fills its {tm['cores']} cores at about "
          f"{f3(tm['nodes_until_cores_full_fit'])} hollow nodes (a projection); the control plane's share of the cost "
          f"per node: {f3(tm['control_plane_share_of_cost_per_node'])}.",
          f"- Largest size measured: {json.dumps(tm['largest_step'])}.", "",
          "## Notes", "", *[f"- {n}" for n in doc.get("notes", [])]]
    path.write_text("\n".join(L) + "\n")


METHOD = [
    "One scale-profile local control plane (real kube-apiserver, etcd, kube-controller-manager, kube-scheduler) for "
    "the whole run; hollow agents started with `python -m hollow run --max-inflight 256 --log-level WARNING "
    "--delete-nodes-on-exit`, one process per agent (= one agent pod), each with its own GPU pool (8 GPUs per node).",
    "CPU: user+system seconds per process from /proc (psutil) between window edges, divided by the window's wall "
    "time; RSS: median of samples every 5 s.  Control plane = the four components summed.",
    "Steady window: nodes only, after all are Ready and a settle pause; lease age from LISTs of the Lease objects at "
    "the window's end; renew lag from each agent's own histogram (acknowledged minus due) over the window.",
    f"Churn window: bare pods (spec.nodeName on agent A's nodes, run duration {RUN_DURATION_S} s, 1 GPU each) created "
    "at a fixed rate by the bench and deleted with grace 0 as soon as they finished; CPU from the first pods' run "
    "duration + 3 s to the last create; transitions (Running, finished, deleted) counted from a watch in that window.",
    "Saturation of one agent: a cgroup-v1 CPU quota (cpu.cfs_quota_us per 100 ms period, the mechanism of a pod's "
    "CPU limit) on the agent process; lowered step by step with its nodes held, then pods at rising rates.",
    "Fits: ordinary least squares with standard errors; projections to 5,000 and 15,000 nodes give the fitted line's "
    "standard error at that point and are extrapolations past the sizes measured.",
    "One run (no repeats: the whole bench is ~25 min on a shared 2-core machine); ratios and fits come from this one "
    "run, so drift of the machine during it is in the errors.",
]


def auto_notes(doc: dict[str, Any]) -> list[str]:
    d = doc["derived"]
    notes = []
    steps = doc["raw"]["growth"]["steps"]
    if steps:
        last = steps[-1]["steady"]
        notes.append(f"At {last['nodes']} nodes the control plane used {last['control_plane_cores']} cores and the agents "
                     f"{sum(last['cores'].get(f'agent-{n}') or 0 for n in last['agent_nodes']):.3f}: on this machine the "
                     "control plane, not the agents, is what runs out.")
    stopped = doc["raw"]["growth"].get("stopped")
    if stopped:
        notes.append(f"Growth stopped after {stopped['after_nodes']} nodes: {'; '.join(stopped['why'])} (this machine's "
                     "limit on the day, with the other load on it; larger sizes are projections).")
    if doc["raw"].get("error"):
        notes.append(f"The run ended early with {doc['raw']['error']}; the figures are what was measured before.")
    loads = [w.get("load_avg_1m_end") for s in steps for w in (s["steady"], s["churn"]) if w.get("load_avg_1m_end")]
    if loads:
        notes.append(f"1-minute load average at the windows' ends: {min(loads)}-{max(loads)} on {doc['machine']['cores']} "
                     "cores (the bench itself, and other work on this shared machine: CPU figures are per process and "
                     "do not include that other work, but latencies and lease ages suffer from it).")
    q = d["quota"]
    if not q.get("skipped") and q.get("nodes_per_core_at_limit"):
        notes.append(f"Measured at a CPU limit: one agent held {q['nodes']} nodes at {q['lowest_quota_holding_nodes']} core "
                     f"({q['nodes_per_core_at_limit']} nodes per core by proportion), against "
                     f"{d['agent_steady']['nodes_per_core']} nodes per core from the unlimited fit.")
    return notes + list(doc.get("manual_notes", []))


def finish(doc: dict[str, Any]) -> dict[str, Any]:
    doc["method"] = METHOD
    for w in (doc["raw"].get("quota") or {}).get("steady", []):  # the criterion again, as it stands now
        w["behind"] = saturated(w, "q", float(doc["params"]["lag_bound_s"]))
    doc["derived"] = derive(doc["raw"], float(doc["params"]["lag_bound_s"]))
    doc["notes"] = auto_notes(doc)
    return doc


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    floats = lambda s: [float(x) for x in s.split(",") if x]  # noqa: E731
    p.add_argument("--dir", default="/tmp/hs-scaling", help="cluster and work dir (short: socket paths)")
    p.add_argument("--out", default=str(ROOT / "reports" / "bench"), help="folder for scaling.json and scaling.md")
    p.add_argument("--name", default="scaling", help="output file stem")
    p.add_argument("--idle-s", type=float, default=30, help="idle window with no nodes")
    p.add_argument("--steady-s", type=float, default=45, help="steady window at each size")
    p.add_argument("--settle-s", type=float, default=10, help="pause after all Ready before a window")
    p.add_argument("--churn-s", type=float, default=35, help="seconds of pod creation per churn window")
    p.add_argument("--churn-rate", type=float, default=10, help="pods/s of the churn window at every size")
    p.add_argument("--sweep", type=floats, default=[10.0, 20.0, 40.0, 80.0],
                   help="pods/s on agent A at 1k nodes, rising until it falls behind")
    p.add_argument("--drain-cap-s", type=float, default=20, help="wait this long for a churn window's pods to go")
    p.add_argument("--growth-steps", type=int, default=len(GROWTH), help=f"sizes to grow through (1..{len(GROWTH)})")
    p.add_argument("--size-scale", type=float, default=0.5,
                   help="multiply the agents' sizes (1k, 1k, 2k, 4k nodes: 1k to 8k in all) by this; the default 0.5 grows 500 nodes to 4,000, as far as a 2-core machine goes")
    p.add_argument("--register-cap-s", type=float, default=120, help="give up waiting for nodes Ready after this")
    p.add_argument("--quota", type=float, default=0.1, help="CPU limit (cores) of the saturation agent's pod phase")
    p.add_argument("--quota-nodes", type=int, default=1000, help="nodes of the saturation agent")
    p.add_argument("--quota-steps", type=floats, default=[0.1, 0.05, 0.03, 0.02],
                   help="CPU limits (cores) the saturation agent's nodes are held at, in order ('' to skip)")
    p.add_argument("--quota-rates", type=floats, default=[10.0, 15.0, 20.0],
                   help="pods/s offered to the saturation agent at --quota, until it falls behind ('' to skip)")
    p.add_argument("--quota-settle-s", type=float, default=10)
    p.add_argument("--quota-window-s", type=float, default=30)
    p.add_argument("--list-cap-s", type=float, default=45, help="give up a Lease LIST after this (no lease figure)")
    p.add_argument("--lag-bound-s", type=float, default=5.0, help="lag above which an agent counts as behind")
    p.add_argument("--render", metavar="JSON", help="only re-derive and re-render a report JSON")
    p.add_argument("--note", action="append", default=[], help="a note to keep in the report")
    p.add_argument("--supplement", metavar="JSON", help="with --render: a smaller run of this bench whose per-transition "
                   "figures stand in where the rendered run's pods fell behind")
    args = p.parse_args(argv)
    if not 1 <= args.growth_steps <= len(GROWTH):
        p.error(f"--growth-steps: expected 1..{len(GROWTH)}, got {args.growth_steps}")
    low = [q for q in [args.quota, *args.quota_steps] if q < MIN_QUOTA]
    if low:
        p.error(f"--quota/--quota-steps: expected at least {MIN_QUOTA} core (cgroup v1 refuses a quota under 1 ms "
                f"per {CFS_PERIOD_US // 1000} ms period), got {low}")
    if args.churn_s <= RUN_DURATION_S + 5:
        p.error(f"--churn-s: expected more than {RUN_DURATION_S + 5} s (the steady part starts after the run duration)")
    return args


def main() -> None:
    args = parse_args()
    if args.render:
        path = Path(args.render)
        doc = json.loads(path.read_text())
        doc["manual_notes"] = list(doc.get("manual_notes", [])) + args.note
        if args.supplement:
            sup = json.loads(Path(args.supplement).read_text())
            doc["raw"]["supplement"] = {k: sup[k] for k in ("date", "command", "wall_s", "params", "machine")} | {
                "raw": {"growth": sup["raw"]["growth"], "idle": sup["raw"]["idle"]}}
        finish(doc)
        doc = portable(doc)  # no machine path in a committed file
        path.write_text(json.dumps(doc, indent=1) + "\n")
        write_md(doc, path.with_suffix(".md"))
        log(f"re-rendered {path} and .md")
        return
    facts = machine_facts()
    t0 = time.monotonic()
    raw: dict[str, Any] = {}
    out = Path(args.out)
    try:
        asyncio.run(run(args, raw))
    except KeyboardInterrupt:  # torn down already (the finally blocks); keep what was measured, not as the report
        partial = Path(args.dir) / "partial-raw.json"
        partial.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(json.dumps(raw, indent=1) + "\n")
        log(f"interrupted: what was measured is in {partial}")
        raise
    except Exception as exc:  # a failure late in the run: the report keeps what came before, and says so
        raw["error"] = repr(exc)
        log(f"  !! run failed: {exc!r}")
        if not (raw.get("growth") or {}).get("steps"):
            raise
    doc = {"date": facts["date"], "command": "python tests/bench/bench_scaling.py " + " ".join(sys.argv[1:]),
           "machine": facts["machine"], "versions": facts["versions"], "wall_s": round(time.monotonic() - t0),
           "params": {k: v for k, v in vars(args).items() if k not in ("render", "note")},
           "raw": raw, "manual_notes": args.note}
    out.mkdir(parents=True, exist_ok=True)
    # paths (--dir, --out, the command) relative to the repo, ~ or the temp folder: no machine path committed
    (out / f"{args.name}.json").write_text(json.dumps(portable(doc), indent=1) + "\n")  # raw first: a failed derive keeps it
    finish(doc)
    doc = portable(doc)
    (out / f"{args.name}.json").write_text(json.dumps(doc, indent=1) + "\n")
    write_md(doc, out / f"{args.name}.md")
    log(f"wrote {out / (args.name + '.json')} and .md")


if __name__ == "__main__":
    main()
