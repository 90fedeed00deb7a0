#!/usr/bin/env python
"""``make bench-hollow``: the hollow agent side by side with KWOK on one local control plane.

Both engines do the same work on the same ``scale``-profile control plane in the same run, one after
the other (never at once, so neither steals the other's CPU):

(a) register N nodes with 8 GPUs each until the API reports all of them Ready (seconds);
(b) hold them at kubelet cadence (40 s leases, renewed every 10 s) for ``--steady-s`` seconds:
    engine CPU cores and RSS, lease age percentiles (from LIST snapshots, same for both engines),
    the agent's own renew-lag p99, nodes that went NotReady;
(c) P pods to Running and then Succeeded, once as bare pods bound by ``spec.nodeName`` and once
    through kube-scheduler: pods/s, and engine CPU-seconds per 1,000 pods;
and the CPU of every control-plane process in every phase, so a reader sees who the bottleneck was.

CPU is read with psutil per process (user+system seconds).  KWOK is built from the Go module proxy
(``sigs.k8s.io/kwok/cmd/kwok`` at ``KWOK_VERSION``) and configured with its own shipped stages:
node-initialize (fast), node-heartbeat-with-lease (status every 10 min, leases every 10 s) and the
fast pod stages, where pod-complete selects every pod whose restartPolicy allows completion (the
shipped one only selects Job-owned pods) after the same run duration the hollow pods get.

Usage:  python tests/bench/bench_hollow.py [--nodes 10000] [--pods 20000] [--steady-s 180] [--out reports/bench]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import psutil
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from hollow.api import ApiClient, ApiSettings  # noqa: E402
from hollow.clock import parse_rfc3339  # noqa: E402
from hollow.metrics import Metrics  # noqa: E402
from hollow.process import AgentProcess, start_agent  # noqa: E402
from hollow.watching import Watcher, WatchSettings  # noqa: E402
from hollowscale.cluster.local import ClusterInfo, LocalCluster  # noqa: E402
from hollowscale.versions import ETCD_VERSION, KUBERNETES_VERSION, KWOK_VERSION  # noqa: E402
from kubecore.config import load_endpoint  # noqa: E402

RUN_DURATION_S = 10
GPUS = 8
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --- measurement helpers ------------------------------------------------------------------------
class CpuMeter:
    """CPU seconds (user+system) of named processes, read at phase boundaries."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.procs = {name: psutil.Process(pid) for name, pid in pids.items()}

    def add(self, name: str, pid: int) -> None:
        self.procs[name] = psutil.Process(pid)

    def snap(self) -> tuple[float, dict[str, float]]:
        out = {}
        for name, proc in self.procs.items():
            try:
                t = proc.cpu_times()
                out[name] = t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
            except psutil.Error:
                out[name] = float("nan")
        return time.monotonic(), out

    @staticmethod
    def delta(a: tuple[float, dict[str, float]], b: tuple[float, dict[str, float]]) -> dict[str, Any]:
        wall = b[0] - a[0]
        secs = {k: round(b[1][k] - a[1].get(k, 0.0), 2) for k in b[1]}
        return {"wall_s": round(wall, 2), "cpu_s": secs,
                "cores": {k: round(v / wall, 3) if wall > 0 else None for k, v in secs.items()}}


class NodeTracker:
    """Watch handler: which nodes are Ready, and which went NotReady while armed."""

    def __init__(self) -> None:
        self.ready: set[str] = set()
        self.names: set[str] = set()
        self.armed = False
        self.went_notready: set[str] = set()

    def on_event(self, kind: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if kind == "DELETED":
            self.names.discard(name)
            self.ready.discard(name)
            return
        self.names.add(name)
        ok = any(c.get("type") == "Ready" and c.get("status") == "True"
                 for c in (obj.get("status") or {}).get("conditions") or ())
        if ok:
            self.ready.add(name)
        else:
            if self.armed and name in self.ready:
                self.went_notready.add(name)
            self.ready.discard(name)

    def on_relisted(self, uids: set[str]) -> None:
        pass


class PodTracker:
    """Watch handler: first time each pod was seen Running and Succeeded/Failed."""

    def __init__(self) -> None:
        self.exists: set[str] = set()
        self.running: dict[str, float] = {}
        self.done: dict[str, float] = {}
        self.failed = 0

    def on_event(self, kind: str, obj: dict[str, Any]) -> None:
        uid = obj["metadata"]["uid"]
        if kind == "DELETED":
            self.exists.discard(uid)
            return
        self.exists.add(uid)
        phase = (obj.get("status") or {}).get("phase")
        now = time.monotonic()
        if phase in ("Running", "Succeeded", "Failed") and uid not in self.running:
            self.running[uid] = now
        if phase in ("Succeeded", "Failed") and uid not in self.done:
            self.done[uid] = now
            self.failed += phase == "Failed"

    def on_relisted(self, uids: set[str]) -> None:
        self.exists &= uids


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return round(s[min(len(s) - 1, int(q * len(s)))], 3)


def histogram_quantile(before: dict[str, float], after: dict[str, float], name: str, q: float) -> float | None:
    """Quantile of a Prometheus histogram's increase between two scrapes (linear within buckets)."""
    buckets = []
    for key, value in after.items():
        if key.startswith(name + "_bucket{") and 'le="' in key:
            le = key.split('le="')[1].split('"')[0]
            bound = float("inf") if le == "+Inf" else float(le)
            buckets.append((bound, value - before.get(key, 0.0)))
    buckets.sort()
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return prev_bound
            frac = (rank - prev_count) / max(1e-9, count - prev_count)
            return round(prev_bound + (bound - prev_bound) * frac, 4)
        prev_bound, prev_count = bound, count
    return None


async def wait_for(what: str, check: Any, timeout: float, every: float = 0.25) -> bool:
    """Wait until ``check()``; False (and a log line) when ``timeout`` passes first: the figures then
    record how far it got, because an overloaded control plane is a result, not an error."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if check():
            return True
        await asyncio.sleep(every)
    log(f"  !! {what}: not reached within {timeout:.0f}s")
    return False


async def gather_bounded(n: int, make: Any, limit: int) -> list[Any]:
    sem = asyncio.Semaphore(limit)

    async def one(i: int) -> Any:
        async with sem:
            return await make(i)

    return await asyncio.gather(*(one(i) for i in range(n)))


# --- engines ------------------------------------------------------------------------------------
class HollowEngine:
    name = "hollow"
    label = "bench-engine=hollow"

    def __init__(self, work: Path, kubeconfig: str, nodes: int) -> None:
        self.work = work
        self.kubeconfig = kubeconfig
        self.nodes = nodes
        self.agent: AgentProcess | None = None
        self.node_names = [f"bh-gpu-{i}" for i in range(nodes)]

    @property
    def pid(self) -> int:
        assert self.agent is not None
        return self.agent.proc.pid

    async def start(self, api: ApiClient) -> None:
        pools = self.work / "hollow-pools.yaml"
        pools.write_text(yaml.safe_dump({"pools": [{
            "name": "bh-gpu", "count": self.nodes,
            "resources": {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": str(GPUS)},
            "labels": {"bench-engine": "hollow", "nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"},
            "topology": {"zones": ["zone-a", "zone-b", "zone-c"], "racks_per_zone": 10},
        }]}))
        self.agent = await asyncio.to_thread(
            start_agent, self.kubeconfig, pools, self.work / "hollow-agent.log",
            "--max-inflight", "256", "--log-level", "INFO")

    def metrics(self) -> dict[str, float]:
        return self.agent.metrics() if self.agent else {}

    async def stop(self, api: ApiClient) -> None:
        if self.agent:
            await asyncio.to_thread(self.agent.stop, 60)


def kwok_stages(run_duration_s: int) -> list[dict[str, Any]]:
    """KWOK's own shipped stages from the module cache, pod-complete widened to bare pods."""
    gomodcache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    base = Path(gomodcache) / f"sigs.k8s.io/kwok@{KWOK_VERSION}" / "kustomize" / "stage"
    docs = []
    for rel in ("node/fast/node-initialize.yaml", "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
                "pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml"):
        doc = yaml.safe_load((base / rel).read_text())
        if doc["metadata"]["name"] == "pod-complete":
            exprs = [e for e in doc["spec"]["selector"]["matchExpressions"]
                     if e["key"] != ".metadata.ownerReferences.[].kind"]
            exprs.append({"key": ".spec.restartPolicy", "operator": "In", "values": ["Never", "OnFailure"]})
            doc["spec"]["selector"]["matchExpressions"] = exprs
            doc["spec"]["delay"] = {"durationMilliseconds": run_duration_s * 1000}
        docs.append(doc)
    return docs


class KwokEngine:
    name = "kwok"
    label = "bench-engine=kwok"

    def __init__(self, work: Path, kubeconfig: str, nodes: int, binary: Path) -> None:
        self.work = work
        self.kubeconfig = kubeconfig
        self.nodes = nodes
        self.binary = binary
        self.proc: subprocess.Popen[bytes] | None = None
        self.node_names = [f"bk-gpu-{i}" for i in range(nodes)]

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def node_body(self, i: int) -> dict[str, Any]:
        name = self.node_names[i]
        res = {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": str(GPUS)}
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                                                           "kwok.x-k8s.io/node": "fake"},
                             "labels": {"bench-engine": "kwok", "type": "kwok", "kubernetes.io/hostname": name,
                                        "nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB",
                                        "topology.kubernetes.io/zone": f"zone-{'abc'[i % 3]}"}},
                "spec": {"podCIDR": f"10.{128 + i // 256 % 128}.{i % 256}.0/24"},
                "status": {"capacity": res, "allocatable": res}}

    async def start(self, api: ApiClient) -> None:
        config = self.work / "kwok.yaml"
        config.write_text(yaml.safe_dump_all(kwok_stages(RUN_DURATION_S)))
        logf = open(self.work / "kwok.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [str(self.binary), "--kubeconfig", self.kubeconfig, "--config", str(config),
             "--manage-all-nodes=false", f"--manage-nodes-with-label-selector={self.label}",
             "--node-lease-duration-seconds=40", "--cidr=10.128.0.1/9", "--node-ip=100.127.0.1",
             "-v=WARN"],  # KWOK logs every lease sync at INFO; do not charge it for logging
            stdout=logf, stderr=logf)

        async def create(i: int) -> None:
            for _ in range(20):
                resp = await api.request("create_node", "POST", "/api/v1/nodes", body=self.node_body(i))
                if resp.status in (201, 409):
                    return
                await asyncio.sleep(0.5)
            raise RuntimeError(f"cannot create node {i}: {resp.status} {resp.message()}")

        await gather_bounded(self.nodes, create, 256)

    def metrics(self) -> dict[str, float]:
        return {}

    async def stop(self, api: ApiClient) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(30)
            if self.proc.poll() is None:
                self.proc.kill()


# --- phases -------------------------------------------------------------------------------------
async def lease_ages(api: ApiClient, prefix: str) -> list[float]:
    ages: list[float] = []
    cont = ""
    while True:
        params = {"limit": "2000"}
        if cont:
            params["continue"] = cont
        resp = await api.request("list_leases", "GET", LEASES, params=params)
        doc = orjson.loads(resp.body)
        now = time.time()
        for item in doc.get("items") or ():
            if item["metadata"]["name"].startswith(prefix):
                rt = (item.get("spec") or {}).get("renewTime")
                if rt:
                    ages.append(now - parse_rfc3339(rt))
        cont = (doc.get("metadata") or {}).get("continue") or ""
        if not cont:
            return ages


def pod_body(i: int, engine: Any, mode: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never", "automountServiceAccountToken": False, "terminationGracePeriodSeconds": 30,
        "containers": [{"name": "main", "image": "registry.invalid/worker:1",
                        "resources": {"requests": {"cpu": "100m", "nvidia.com/gpu": "1"},
                                      "limits": {"nvidia.com/gpu": "1"}}}]}
    if mode == "bare":
        spec["nodeName"] = engine.node_names[i % len(engine.node_names)]
    else:
        spec["nodeSelector"] = {"bench-engine": engine.name}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{mode}-{i}", "labels": {"bench": mode},
                         "annotations": {"hollowscale.io/run-duration": f"{RUN_DURATION_S}s"}},
            "spec": spec}


async def pod_phase(api: ApiClient, engine: Any, cpu: CpuMeter, ns: str, pods: int, mode: str,
                    args: argparse.Namespace) -> dict[str, Any]:
    tracker = PodTracker()
    watcher = Watcher(api, f"bench_pods_{mode}", f"/api/v1/namespaces/{ns}/pods", {}, tracker, Metrics(),
                      WatchSettings(page_size=2000))
    wtask = asyncio.ensure_future(watcher.run())
    await watcher.synced.wait()
    a = cpu.snap()
    t0 = time.monotonic()

    async def create(i: int) -> None:
        for _ in range(30):
            resp = await api.request("create_pod", "POST", f"/api/v1/namespaces/{ns}/pods", body=pod_body(i, engine, mode))
            if resp.status in (201, 409):
                return
            await asyncio.sleep(0.5)
        raise RuntimeError(f"pod {i}: {resp.status} {resp.message()}")

    await gather_bounded(pods, create, 128)
    t_created = time.monotonic() - t0
    log(f"  {engine.name}/{mode}: {pods} pods created in {t_created:.1f}s")
    cap = args.pod_cap_s
    all_running = await wait_for("all Running", lambda: len(tracker.running) >= pods, max(1.0, cap - t_created))
    b = cpu.snap()
    log(f"  {engine.name}/{mode}: {len(tracker.running)} Running after {time.monotonic() - t0:.1f}s")
    all_done = await wait_for("all finished", lambda: len(tracker.done) >= pods,
                              max(1.0, cap + RUN_DURATION_S - (time.monotonic() - t0)))
    c = cpu.snap()
    log(f"  {engine.name}/{mode}: {len(tracker.done)} finished after {time.monotonic() - t0:.1f}s ({tracker.failed} failed)")
    # one DELETE per pod, in parallel: a deletecollection runs through the pods one by one
    # (--delete-collection-workers=1) and took minutes for 20,000
    async def delete(i: int) -> None:
        await api.request("delete_pod", "DELETE", f"/api/v1/namespaces/{ns}/pods/{mode}-{i}",
                          body={"gracePeriodSeconds": 0}, retry=False)

    deleting = asyncio.ensure_future(gather_bounded(pods, delete, 256))
    await wait_for("pods gone", lambda: not tracker.exists, args.delete_cap_s)
    deleting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await deleting
    t_deleted = time.monotonic() - t0
    d = cpu.snap()
    wtask.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await wtask
    whole = CpuMeter.delta(a, c)
    engine_cpu = whole["cpu_s"][engine.name]
    starts = sorted(tracker.running.values())
    ends = sorted(tracker.done.values())
    handled = len(tracker.done) + len(tracker.running)  # each pod's two transitions, for CPU per pod
    t_run = (starts[-1] - t0) if starts else None
    t_end = (ends[-1] - t0) if ends else None
    return {
        "pods": pods, "mode": mode, "run_duration_s": RUN_DURATION_S, "cap_s": cap,
        "complete": all_running and all_done,
        "create_s": round(t_created, 2), "create_pods_per_s": round(pods / t_created, 1),
        "running": len(tracker.running), "finished": len(tracker.done), "failed": tracker.failed,
        "last_running_s": round(t_run, 2) if t_run else None, "last_finished_s": round(t_end, 2) if t_end else None,
        "deleted_s": round(t_deleted, 2),
        "running_pods_per_s": round(len(starts) / t_run, 1) if t_run else 0.0,
        "finished_pods_per_s": round(len(ends) / max(1e-6, t_end - RUN_DURATION_S), 1) if t_end else 0.0,
        "running_p50_s": round(starts[len(starts) // 2] - t0, 2) if starts else None,
        "engine_cpu_s": engine_cpu,
        "engine_cpu_s_per_1000_pods": round(engine_cpu / (handled / 2000), 3) if handled else None,
        "cpu_to_running": CpuMeter.delta(a, b), "cpu_to_finished": whole, "cpu_delete": CpuMeter.delta(c, d),
    }


async def run_engine(engine: Any, api: ApiClient, info: ClusterInfo, args: argparse.Namespace) -> dict[str, Any]:
    log(f"== {engine.name}: {args.nodes} nodes")
    cpu = CpuMeter({**{k: v for k, v in info.pids.items()}, "bench-client": os.getpid()})
    nodes = NodeTracker()
    nwatch = Watcher(api, f"bench_nodes_{engine.name}", "/api/v1/nodes", {"labelSelector": engine.label}, nodes,
                     Metrics(), WatchSettings(page_size=2000))
    ntask = asyncio.ensure_future(nwatch.run())
    await nwatch.synced.wait()
    result: dict[str, Any] = {}
    a = cpu.snap()
    t0 = time.monotonic()
    await engine.start(api)
    cpu.add(engine.name, engine.pid)
    a = (a[0], {**a[1], engine.name: 0.0})
    complete = await wait_for("all nodes Ready", lambda: len(nodes.ready) >= args.nodes, args.register_cap_s)
    t_ready = time.monotonic() - t0
    b = cpu.snap()
    result["register"] = {"nodes": args.nodes, "ready": len(nodes.ready), "complete": complete,
                          "all_ready_s": round(t_ready, 2) if complete else None, **CpuMeter.delta(a, b)}
    log(f"  {engine.name}: {len(nodes.ready)}/{args.nodes} nodes Ready after {t_ready:.1f}s")

    # (b) steady state
    await asyncio.sleep(args.settle_s)  # first renewals of late nodes settle
    nodes.armed = True
    m0 = engine.metrics()
    b = cpu.snap()
    rss: list[float] = []
    ages: list[float] = []
    proc = psutil.Process(engine.pid)
    t_end = time.monotonic() + args.steady_s
    next_snapshot = time.monotonic() + 15
    while time.monotonic() < t_end:
        with contextlib.suppress(psutil.Error):
            rss.append(proc.memory_info().rss / 2**20)
        if time.monotonic() >= next_snapshot:
            ages += await lease_ages(api, engine.node_names[0].rsplit("-", 1)[0] + "-")
            next_snapshot += 30
        await asyncio.sleep(5)
    c = cpu.snap()
    m1 = engine.metrics()
    nodes.armed = False
    steady = CpuMeter.delta(b, c)
    result["steady"] = {
        **steady,
        "engine_cores": steady["cores"][engine.name],
        "engine_rss_mb_max": round(max(rss), 1) if rss else None,
        "engine_rss_mb_median": round(statistics.median(rss), 1) if rss else None,
        "lease_age_s": {"p50": pct(ages, 0.5), "p99": pct(ages, 0.99), "max": pct(ages, 1.0), "samples": len(ages),
                        "expired_over_40s": sum(a > 40 for a in ages)},
        "agent_renew_lag_p99_s": histogram_quantile(m0, m1, "hollow_lease_renew_lag_seconds", 0.99),
        "agent_renew_lag_p50_s": histogram_quantile(m0, m1, "hollow_lease_renew_lag_seconds", 0.5),
        "nodes_went_notready": len(nodes.went_notready),
        "nodes_ready_at_end": len(nodes.ready),
    }
    log(f"  {engine.name}: steady {args.steady_s}s: {steady['cores'][engine.name]} cores, "
        f"rss max {result['steady']['engine_rss_mb_max']} MB, lease age p99 {pct(ages, 0.99)}s, "
        f"NotReady {len(nodes.went_notready)}")

    # (c) pods
    ns = f"bench-{engine.name}"
    await api.request("create_ns", "POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    for mode in ("bare", "scheduler"):
        result[f"pods_{mode}"] = await pod_phase(api, engine, cpu, ns, args.pods, mode, args)
        if mode == "bare":
            await asyncio.sleep(5)
    d = cpu.snap()
    await engine.stop(api)
    async def delete_node(i: int) -> None:
        await api.request("delete_node", "DELETE", f"/api/v1/nodes/{engine.node_names[i]}", retry=False)

    deleting = asyncio.ensure_future(gather_bounded(args.nodes, delete_node, 256))
    await wait_for("nodes deleted", lambda: not nodes.names, 180)
    await deleting
    prefix = engine.node_names[0].rsplit("-", 1)[0] + "-"
    for _ in range(6):  # the garbage collector removes the Leases the Nodes own; wait so the next engine
        if not await lease_ages(api, prefix):  # does not pay for it
            break
        await asyncio.sleep(10)
    result["teardown"] = CpuMeter.delta(d, cpu.snap())
    await api.request("delete_ns", "DELETE", f"/api/v1/namespaces/{ns}")
    ntask.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await ntask
    return result


# --- report -------------------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpu_model": model, "logical_cpus": psutil.cpu_count(), "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "os": platform.platform(), "python": platform.python_version()}


def ratios(h: dict[str, Any], k: dict[str, Any]) -> dict[str, Any]:
    def r(a: float | None, b: float | None) -> float | None:
        return round(a / b, 3) if a is not None and b not in (None, 0) else None

    out = {"register_time_hollow_over_kwok": r(h["register"]["all_ready_s"], k["register"]["all_ready_s"]),
           "steady_cores_hollow_over_kwok": r(h["steady"]["engine_cores"], k["steady"]["engine_cores"]),
           "steady_rss_hollow_over_kwok": r(h["steady"]["engine_rss_mb_max"], k["steady"]["engine_rss_mb_max"])}
    for mode in ("bare", "scheduler"):
        out[f"cpu_per_1000_pods_{mode}_hollow_over_kwok"] = r(h[f"pods_{mode}"]["engine_cpu_s_per_1000_pods"],
                                                              k[f"pods_{mode}"]["engine_cpu_s_per_1000_pods"])
        out[f"running_pods_per_s_{mode}_hollow_over_kwok"] = r(h[f"pods_{mode}"]["running_pods_per_s"],
                                                               k[f"pods_{mode}"]["running_pods_per_s"])
    return out


def targets(h: dict[str, Any], rat: dict[str, Any]) -> list[dict[str, Any]]:
    st = h["steady"]
    rows = [
        ("(a) nodes Ready", "<= 30 s", h["register"]["all_ready_s"] or f"{h['register']['ready']} Ready at cap",
         h["register"]["all_ready_s"] is not None and h["register"]["all_ready_s"] <= 30),
        ("(b) nodes NotReady in steady state", "0", st["nodes_went_notready"], st["nodes_went_notready"] == 0),
        ("(b) agent renew lag p99", "< 2 s", st["agent_renew_lag_p99_s"], (st["agent_renew_lag_p99_s"] or 0) < 2),
        ("(b) agent CPU", "<= 0.3 core", st["engine_cores"], st["engine_cores"] <= 0.3),
        ("(b) agent RSS", "<= 400 MB", st["engine_rss_mb_max"], (st["engine_rss_mb_max"] or 0) <= 400),
    ]
    for mode in ("bare", "scheduler"):
        p = h[f"pods_{mode}"]
        rows.append((f"(c) pods/s to Running ({mode})", ">= 500 when the control plane keeps up",
                     p["running_pods_per_s"], p["running_pods_per_s"] >= 500))
        v = rat[f"cpu_per_1000_pods_{mode}_hollow_over_kwok"]
        rows.append((f"(c) agent CPU per pod vs KWOK ({mode})", "<= 1.0 (ratio)", v, v is not None and v <= 1.0))
    return [{"target": a, "threshold": b, "value": c, "met": bool(d)} for a, b, c, d in rows]


def write_md(doc: dict[str, Any], path: Path) -> None:
    h, k = doc["engines"]["hollow"], doc["engines"].get("kwok")
    cp = ("kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler")
    lines = [f"# hollow vs KWOK benchmark ({doc['date']})", "",
             f"Command: `{doc['command']}`  ", f"Machine: {doc['machine']['cpu_model']}, {doc['machine']['logical_cpus']} logical CPUs, "
             f"{doc['machine']['memory_gb']} GB; {doc['machine']['os']}  ",
             f"Versions: Kubernetes {doc['versions']['kubernetes']}, etcd {doc['versions']['etcd']}, KWOK {doc['versions']['kwok']}, "
             f"Python {doc['machine']['python']}; control-plane profile `{doc['profile']}`  ",
             f"Work: {doc['params']['nodes']} nodes x {GPUS} GPUs, {doc['params']['steady_s']} s steady state, "
             f"{doc['params']['pods']} pods per mode (run duration {RUN_DURATION_S} s)", "",
             "| measure | hollow | KWOK |", "|---|---|---|"]

    def row(label: str, f: Any) -> None:
        vals = []
        for e in (h, k):
            try:
                vals.append("" if e is None else str(f(e)))
            except (KeyError, TypeError):
                vals.append("n/a")
        lines.append(f"| {label} | {vals[0]} | {vals[1]} |")

    row("(a) all nodes Ready (s)", lambda e: e["register"]["all_ready_s"] or
        f"not all: {e['register']['ready']} Ready after {e['register']['wall_s']} s")
    row("(a) engine CPU (s)", lambda e: e["register"]["cpu_s"][(e is h and "hollow") or "kwok"])
    row("(b) engine CPU (cores)", lambda e: e["steady"]["engine_cores"])
    row("(b) engine RSS max (MB)", lambda e: e["steady"]["engine_rss_mb_max"])
    row("(b) lease age p50 / p99 / max (s)", lambda e: f"{e['steady']['lease_age_s']['p50']} / {e['steady']['lease_age_s']['p99']} / {e['steady']['lease_age_s']['max']}")
    row("(b) agent renew lag p50 / p99 (s)", lambda e: f"{e['steady']['agent_renew_lag_p50_s']} / {e['steady']['agent_renew_lag_p99_s']}")
    row("(b) nodes that went NotReady", lambda e: e["steady"]["nodes_went_notready"])
    for comp in cp:
        row(f"(b) {comp} (cores)", lambda e, c=comp: e["steady"]["cores"][c])
    for mode in ("bare", "scheduler"):
        row(f"(c {mode}) create rate (pods/s)", lambda e, m=mode: e[f"pods_{m}"]["create_pods_per_s"])
        row(f"(c {mode}) to Running (pods/s)", lambda e, m=mode: e[f"pods_{m}"]["running_pods_per_s"])
        row(f"(c {mode}) Running / finished (of {doc['params']['pods']})",
            lambda e, m=mode: f"{e[f'pods_{m}']['running']} / {e[f'pods_{m}']['finished']}")
        row(f"(c {mode}) last Running / last finished at (s)",
            lambda e, m=mode: f"{e[f'pods_{m}']['last_running_s']} / {e[f'pods_{m}']['last_finished_s']}")
        row(f"(c {mode}) engine CPU s per 1,000 pods", lambda e, m=mode: e[f"pods_{m}"]["engine_cpu_s_per_1000_pods"])
        for comp in cp:
            row(f"(c {mode}) {comp} (cores)", lambda e, m=mode, c=comp: e[f"pods_{m}"]["cpu_to_finished"]["cores"][c])
    lines += ["", "## Ratios (hollow / KWOK)", ""] + [f"- {k_}: {v}" for k_, v in doc.get("ratios", {}).items()]
    lines += ["", "## Targets (issue 3)", "", "| target | threshold | hollow | met |", "|---|---|---|---|"]
    lines += [f"| {t['target']} | {t['threshold']} | {t['value']} | {'yes' if t['met'] else 'NO'} |" for t in doc.get("targets", [])]
    lines += ["", "## Notes", ""] + [f"- {n}" for n in doc.get("notes", [])]
    path.write_text("\n".join(lines) + "\n")


def auto_notes(doc: dict[str, Any]) -> list[str]:
    """Observations derived from the figures (who was the bottleneck), so the reader need not work them out."""
    notes = []
    for name, e in doc["engines"].items():
        st = e.get("steady") or {}
        age = (st.get("lease_age_s") or {}).get("p50")
        if age:
            rate = doc["params"]["nodes"] / (2 * age)
            notes.append(
                f"{name}: kubelet cadence asks for {doc['params']['nodes'] / 10:.0f} lease renewals/s; the median lease "
                f"age of {age} s means about {rate:.0f}/s were accepted, with kube-apiserver at "
                f"{st['cores'].get('kube-apiserver')} cores and etcd at {st['cores'].get('etcd')} cores while "
                f"{name} itself used {st.get('engine_cores')} cores: the control plane was the bottleneck"
                if rate < 0.8 * doc["params"]["nodes"] / 10 else
                f"{name}: leases renewed at about {rate:.0f}/s, i.e. at kubelet cadence")
        for mode in ("bare", "scheduler"):
            p = e.get(f"pods_{mode}") or {}
            if p and not p.get("complete"):
                notes.append(
                    f"{name}/{mode}: capped at {p['cap_s']} s after creation began; creating the {p['pods']} pods alone "
                    f"took {p['create_s']} s ({p['create_pods_per_s']} pods/s accepted by the apiserver); "
                    f"{p['running']} reached Running and {p['finished']} finished by then")
    return notes


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    cluster = LocalCluster(Path(args.cluster_dir).resolve(), profile="scale")
    log("starting the scale-profile control plane")
    info = await asyncio.to_thread(cluster.up, None, 300.0)
    try:
        endpoint = load_endpoint(info.kubeconfig)
        api = ApiClient(endpoint, ApiSettings(max_inflight=256, request_timeout_s=60), Metrics())
        await api.start()
        engines: dict[str, Any] = {}
        try:
            for name in args.engines.split(","):
                if name == "hollow":
                    engine: Any = HollowEngine(work, str(info.kubeconfig), args.nodes)
                else:
                    engine = KwokEngine(work, str(info.kubeconfig), args.nodes, Path(args.kwok))
                engines[name] = await run_engine(engine, api, info, args)
                (work / f"partial-{name}.json").write_text(json.dumps(engines[name], indent=1))
        finally:
            await api.close()
        return {"info": info, "engines": engines}
    finally:
        if not args.keep_cluster:
            await asyncio.to_thread(cluster.down)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--pods", type=int, default=20_000)
    p.add_argument("--steady-s", type=int, default=180)
    p.add_argument("--settle-s", type=int, default=15, help="pause between all-Ready and the steady window")
    p.add_argument("--register-cap-s", type=int, default=300, help="give up waiting for all nodes Ready after this")
    p.add_argument("--delete-cap-s", type=int, default=150, help="stop waiting for pod deletion after this")
    p.add_argument("--pod-cap-s", type=int, default=300,
                   help="per pod mode, stop waiting for Running/finished this long after creation began")
    p.add_argument("--engines", default="hollow,kwok")
    p.add_argument("--kwok", default=str(Path.home() / ".cache/hollowscale/bin" / f"kwok-{KWOK_VERSION}" / "kwok"))
    p.add_argument("--out", default=str(ROOT / "reports" / "bench"))
    p.add_argument("--name", default="hollow", help="output file stem")
    p.add_argument("--work", default=str(ROOT / ".hollowscale" / "bench-hollow"))
    p.add_argument("--cluster-dir", default=str(ROOT / ".hollowscale" / "bench-hollow" / "cluster"))
    p.add_argument("--keep-cluster", action="store_true")
    p.add_argument("--render", metavar="JSON", help="only re-render JSON (+ notes) into JSON and Markdown")
    p.add_argument("--note", action="append", default=[], help="a note to add (with --render)")
    args = p.parse_args()
    if args.render:
        path = Path(args.render)
        doc = json.loads(path.read_text())
        doc["notes"] = auto_notes(doc) + list(args.note)
        path.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        write_md(doc, path.with_suffix(".md"))
        log(f"re-rendered {path} and {path.with_suffix('.md')}")
        return
    if "kwok" in args.engines and not Path(args.kwok).exists():
        log(f"building KWOK {KWOK_VERSION} from the Go module proxy")
        Path(args.kwok).parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["go", "install", f"sigs.k8s.io/kwok/cmd/kwok@{KWOK_VERSION}"], check=True,
                       env={**os.environ, "GOBIN": str(Path(args.kwok).parent), "GOFLAGS": "-trimpath"})
    started = dt.datetime.now(dt.UTC)
    out = asyncio.run(main_async(args))
    engines = out["engines"]
    doc: dict[str, Any] = {
        "schema_version": 1, "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python tests/bench/bench_hollow.py " + " ".join(sys.argv[1:]),
        "machine": machine(), "profile": "scale",
        "versions": {"kubernetes": KUBERNETES_VERSION, "etcd": ETCD_VERSION, "kwok": KWOK_VERSION},
        "params": {"nodes": args.nodes, "gpus_per_node": GPUS, "steady_s": args.steady_s, "pods": args.pods,
                   "run_duration_s": RUN_DURATION_S},
        "control_plane_flags": {k: v for k, v in out["info"].flags.items()},
        "engines": engines, "notes": [],
    }
    doc["notes"] = auto_notes(doc)
    if "hollow" in engines and "kwok" in engines:
        doc["ratios"] = ratios(engines["hollow"], engines["kwok"])
        doc["targets"] = targets(engines["hollow"], doc["ratios"])
    outdir = Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / f"{args.name}.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    write_md(doc, outdir / f"{args.name}.md")
    log(f"wrote {outdir / (args.name + '.json')} and .md")


if __name__ == "__main__":
    main()
