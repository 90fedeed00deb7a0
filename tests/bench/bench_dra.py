#!/usr/bin/env python
"""``make bench-dra``: what DRA costs the real kube-scheduler and the hollow agent, on the ``scale`` profile.

(1) **Scheduler throughput** in scheduler_perf's ``SchedulingWithResourceClaimTemplate/5000pods_500nodes``
shape (``test/integration/scheduler_perf/dra/performance-config.yaml`` of k8s v1.36.3): nodes of 4 CPU,
32Gi, 110 pods and 10 devices each (``maxClaimsPerNode: 10``); 2,500 pods created first (not measured),
then 2,500 measured pods, each created as fast as the client can; a pod has one claim from a template
(one request of the class, no selector) or, for the counted variant, ``nvidia.com/gpu: 1``.  Variants:

* ``counted``: ``nvidia.com/gpu`` in the nodes' allocatable (a device plugin's way), pods ask 1;
* ``claims``: a ResourceSlice per node (NVIDIA's H100 attributes), pods claim 1 GPU of ``gpu.nvidia.com``;
* ``cel``: the same with a CEL selector on an attribute and a capacity (productName and memory >= 40Gi);
* ``shared``: devices that share memory (consumable capacity), each claim takes 40Gi of one GPU.

Throughput = measured pods / (last measured pod bound - first measured pod created), from a watch of
the pods (client receive times), as scheduler_perf's SchedulingThroughput averages pods scheduled per
second over the measured op; the create rate is given beside it (if the two are equal, creation capped
it).  The hollow nodes here run a stage table with only ``pod-delete``: bound pods are never started,
as in scheduler_perf, which has no kubelet.  Sizes 500 and 5,000 nodes; per size and variant one fresh
control plane, 3 repeats on it (pods deleted, claims freed in between), medians.  The scheduler's own
``scheduler_plugin_execution_duration_seconds{plugin="DynamicResources"}`` is read before and after each
measured phase (its share of all plugins' sampled time, and per extension point).

(2) **Registration** of 10,000 nodes x 8 GPUs, counted vs with slices: one fresh control plane per
variant, 3 repeats (an agent started, every node registered and, with slices, every node's slices
published; then 60 s of steady state for the agent's CPU; then the agent stops and deletes its nodes,
the garbage collector their slices and leases); the slices' cost is the ratio of the medians (target
<= 1.5) and the steady agent CPU beside it.

(3) **Where kube-apiserver's CPU goes** (``--parts profile``): one registration per
variant on a fresh control plane, with the apiserver's own pprof CPU profile over it and its request
counts, read into CPU by request handler (creates, heartbeat updates and patches, watch dispatch) and
CPU per request: what a slice's create costs, apart from the heartbeats that run beside it.

Upstream's thresholds (same file) are put beside the figures, with how upstream runs them.  Writes
``reports/bench/dra.json`` and ``.md`` (after each variant, so an interrupted bench keeps what it
measured); ``--render`` re-renders the markdown only.

Usage:  python tests/bench/bench_dra.py [--sizes 500,5000] [--variants counted,claims,cel,shared]
                                        [--repeats 3] [--registration-nodes 10000]
                                        [--parts throughput,registration,profile] [--merge]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import psutil
import requests
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from apiserver_profile import Row, focus_cpu  # noqa: E402
from machine import machine_facts  # noqa: E402
from portable import portable  # noqa: E402

from hollow.api import ApiClient, ApiSettings  # noqa: E402
from hollow.dra import GPU_CLASS, GpuSpec, device_classes  # noqa: E402
from hollow.metrics import Metrics  # noqa: E402
from hollow.process import AgentProcess, start_agent  # noqa: E402
from hollowscale.cluster.local import ClusterInfo, LocalCluster  # noqa: E402
from hollowscale.dra.objects import DeviceClasses  # noqa: E402
from kubecore.config import load_endpoint  # noqa: E402
from kubecore.promtext import families, parse_samples  # noqa: E402
from kubecore.watch import list_then_watch, session_for  # noqa: E402
from loadgen.spec import ClaimSpec  # noqa: E402

NS = "bench-dra"
CEL = ("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' && "
       "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0")
VARIANTS: dict[str, dict[str, Any]] = {
    "counted": {"gpus": {"expose": "counted"}, "claim": None},
    "claims": {"gpus": {"expose": "dra"}, "claim": {}},
    "cel": {"gpus": {"expose": "dra"}, "claim": {"selector": CEL}},
    "shared": {"gpus": {"expose": "dra", "sharing": "memory"}, "claim": {"memory": "40Gi"}},
}
#: upstream scheduler_perf (k8s v1.36.3 test/integration/scheduler_perf/dra and misc performance-config.yaml)
UPSTREAM = [
    {"test": "SchedulingWithResourceClaimTemplate/5000pods_500nodes_QueueingHintsEnabled", "nodes": 500,
     "pods": "2500 init + 2500 measured", "threshold_pods_per_s": 56, "typical": "above 70",
     "note": "the row for a v1.36 scheduler (QueueingHints are GA and locked on since 1.34)"},
    {"test": "SchedulingWithResourceClaimTemplate/5000pods_500nodes", "nodes": 500,
     "pods": "2500 init + 2500 measured", "threshold_pods_per_s": 40, "typical": "above 51",
     "note": "QueueingHints off: scheduler_perf emulates v1.33 for it; not our scheduler's configuration"},
    {"test": "SchedulingBasic/5000Nodes_10000Pods", "nodes": 5000, "pods": "1000 init + 10000 measured",
     "threshold_pods_per_s": 270, "typical": "", "note": "no claims, 5,000 nodes: upstream's counted figure"},
]
#: the verbs of apiserver_request_total that write
WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE")
#: after a profiled registration, how long the heartbeats alone are watched
STEADY_PROBE_S = 20.0
#: kube-apiserver's CPU by what it was doing: samples with a function of the pattern in their stack
#: (:func:`apiserver_profile.focus_cpu`); rows overlap where one runs inside another
PROFILE_ROWS: tuple[Row, ...] = (
    ("create_requests", "create requests (handlers.CreateResource, all goroutines)", r"handlers\.CreateResource"),
    ("update_requests", "update requests (handlers.UpdateResource)", r"handlers\.UpdateResource"),
    ("patch_requests", "patch requests (handlers.PatchResource)", r"handlers\.PatchResource"),
    ("watch_serving", "watch serving (WatchServer and its encoders)", r"handlers\.\(\*WatchServer\)|handlers\.\(\*watch"),
    ("resourceslice_strategy", "ResourceSlice's own create checks (its strategy: validation, preparation)",
     r"registry/resource/resourceslice\."),
    ("before_create", "create preparation and validation, every type (rest.BeforeCreate)", r"rest\.BeforeCreate"),
    ("managed_fields", "managed fields tracking (FieldManager)", r"managedfields/internal\.\(\*FieldManager\)"),
    ("decode", "request body decode (codec Decode)", r"versioning\.\(\*codec\)\.Decode"),
    ("x509_auth", "client certificate check per request (x509)", r"x509\.\(\*Authenticator\)\.AuthenticateRequest"),
    ("etcd_client", "etcd client calls (gRPC Invoke)", r"grpc\.\(\*ClientConn\)\.Invoke"),
    ("gc", "garbage collection (background mark)", r"runtime\.gcBgMarkWorker"),
)
UPSTREAM_HOW = ("in-process apiserver, scheduler and resourceclaim controller (one Go binary, no kubelet, no "
                "network, client QPS unthrottled); nodes 4 CPU / 32Gi / 110 pods with 10 devices of driver "
                "test-driver.cdi.k8s.io (attributes model, family, driverVersion, numa; capacity memory 1Gi) in "
                "one ResourceSlice each; DeviceClass test-class by driver; claim template with one request, no "
                "selector; OpportunisticBatching forced off; CI machines (8+ cores), threshold = SchedulingThroughput "
                "average (pods/s)")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def median(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(statistics.median(vals), 3) if vals else None


# ------------------------------------------------------------------------------------------------ helpers


def pools_doc(nodes: int, gpus_per_node: int, variant: dict[str, Any], idle: bool) -> dict[str, Any]:
    pool: dict[str, Any] = {"name": "bd", "count": nodes,
                            "resources": {"cpu": "4", "memory": "32Gi", "pods": "110",
                                          "nvidia.com/gpu": str(gpus_per_node)},
                            "gpus": {"model": "h100-80gb", **variant["gpus"]}}
    if idle:  # scheduler_perf has no kubelet: bound pods are never started (only deletion is answered)
        pool["stages"] = [{"name": "pod-delete", "action": "finalize", "selector": {"deleting": True},
                           "delay": "none", "anchor": "now"}]
    return {"pools": [pool]}


def pod_body(variant: dict[str, Any], phase: str) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "registry.k8s.io/pause:3.10.1"}
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": 0, "containers": [container]}
    if variant["claim"] is None:
        container["resources"] = {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    else:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "bench-gpu"}]
        container["resources"] = {"claims": [{"name": "gpu"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": f"{phase}-", "labels": {"phase": phase}},
            "spec": spec}


def template(variant: dict[str, Any]) -> dict[str, Any]:
    claim = ClaimSpec(device_class=GPU_CLASS, **variant["claim"])
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "bench-gpu"},
            "spec": {"spec": {"devices": {"requests": [claim.request()]}}}}


class PodWatch:
    """Create and bind times (client ms) of the namespace's pods, from one watch in a thread."""

    def __init__(self, info: ClusterInfo) -> None:
        self.endpoint = load_endpoint(info.kubeconfig)
        self.seen: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        self.phase: dict[str, str] = {}
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        s = session_for(self.endpoint, 1)
        for typ, obj, t in list_then_watch(s, self.endpoint.server, f"/api/v1/namespaces/{NS}/pods", self._stop.is_set):
            uid = (obj.get("metadata") or {}).get("uid")
            if not uid or typ == "DELETED":
                continue
            with self.lock:
                self.seen.setdefault(uid, t)
                self.phase[uid] = ((obj.get("metadata") or {}).get("labels") or {}).get("phase", "")
                if (obj.get("spec") or {}).get("nodeName"):
                    self.bound.setdefault(uid, t)

    def count(self, phase: str) -> tuple[int, int]:
        with self.lock:
            uids = [u for u, p in self.phase.items() if p == phase]
            return len(uids), sum(1 for u in uids if u in self.bound)

    def times(self, phase: str) -> tuple[list[float], list[float]]:
        with self.lock:
            uids = [u for u, p in self.phase.items() if p == phase]
            return [self.seen[u] for u in uids], [self.bound[u] for u in uids if u in self.bound]

    def stop(self) -> None:
        self._stop.set()


async def create_pods(api: ApiClient, body: dict[str, Any], n: int) -> tuple[float, float, int]:
    """POST n pods as fast as the client goes (64 in flight); (start, end, failures)."""
    t0 = time.time()
    failures = 0

    async def one() -> None:
        nonlocal failures
        r = await api.request("create_pod", "POST", f"/api/v1/namespaces/{NS}/pods", body=body)
        if r.status != 201:
            failures += 1

    await asyncio.gather(*(one() for _ in range(n)))
    return t0, time.time(), failures


def scheduler_samples(info: ClusterInfo) -> dict[str, float]:
    with warnings.catch_warnings():  # the scheduler's self-signed serving certificate
        warnings.simplefilter("ignore")
        r = requests.get(info.metrics["scheduler"], verify=False, timeout=10)
    r.raise_for_status()
    return parse_samples(r.text)


def plugin_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """DynamicResources' sampled seconds per extension point and its share of all plugins' (Filter apart)."""
    def sums(samples: dict[str, float]) -> dict[tuple[str, str], float]:
        out: dict[tuple[str, str], float] = {}
        for key, v in samples.items():
            if key.startswith("scheduler_plugin_execution_duration_seconds_sum{"):
                labels = dict(part.split("=", 1) for part in key[key.index("{") + 1:-1].split(","))
                k = (labels.get("plugin", "").strip('"'), labels.get("extension_point", "").strip('"'))
                out[k] = out.get(k, 0.0) + v
        return out

    b, a = sums(before), sums(after)
    delta = {k: a.get(k, 0.0) - b.get(k, 0.0) for k in a}
    dra = {ep: round(v, 4) for (p, ep), v in delta.items() if p == "DynamicResources" and v > 0}
    other = sum(v for (_, ep), v in delta.items() if ep != "Filter")
    dra_other = sum(v for ep, v in dra.items() if ep != "Filter")
    filt = sum(v for (_, ep), v in delta.items() if ep == "Filter")
    return {"dynamicresources_sampled_s": dra,
            "share_of_plugins_pct": round(100 * dra_other / other, 2) if other else None,
            "filter_share_pct": round(100 * dra.get("Filter", 0.0) / filt, 2) if filt else None}


def wait_for(what: str, check: Any, timeout_s: float, every: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(every)
    raise TimeoutError(f"{what}: not after {timeout_s:g}s")


def count(session: requests.Session, server: str, path: str) -> int:
    r = session.get(server + path, params={"limit": 1}, timeout=60)
    r.raise_for_status()
    doc = r.json()
    return len(doc.get("items") or []) + int((doc.get("metadata") or {}).get("remainingItemCount") or 0)


def fresh_cluster(work: Path, tag: str) -> tuple[LocalCluster, ClusterInfo]:
    cluster = LocalCluster(work / f"cp-{tag}", profile="scale")
    cluster.down()
    log(f"control plane {tag}: starting (scale profile) in {cluster.dir}")
    try:
        return cluster, cluster.up(None, 300.0)
    except BaseException:  # a Ctrl-C while it starts must not leave etcd and the apiserver running
        cluster.down()
        raise


def agent_for(info: ClusterInfo, work: Path, tag: str, pools: dict[str, Any]) -> AgentProcess:
    path = work / f"pools-{tag}.yaml"
    path.write_text(yaml.safe_dump(pools, sort_keys=False))
    return start_agent(info.kubeconfig, path, work / f"agent-{tag}.log", "--delete-nodes-on-exit",
                       "--max-inflight", "256", "--log-level", "INFO", timeout_s=60)


# ------------------------------------------------------------------------------------------------ throughput


async def throughput_repeat(info: ClusterInfo, variant: dict[str, Any], args: argparse.Namespace,
                            watch: PodWatch, repeat: int) -> dict[str, Any]:
    api = ApiClient(load_endpoint(info.kubeconfig), ApiSettings(max_inflight=64, request_timeout_s=60), Metrics())
    await api.start()
    try:
        init, measured = f"init{repeat}", f"meas{repeat}"
        await create_pods(api, pod_body(variant, init), args.init_pods)
        await asyncio.to_thread(wait_for, "init pods bound", lambda: watch.count(init)[1] >= args.init_pods,
                                args.phase_timeout_s)
        before = scheduler_samples(info)
        load = os.getloadavg()
        c0, c1, failures = await create_pods(api, pod_body(variant, measured), args.measured_pods)
        await asyncio.to_thread(wait_for, "measured pods bound",
                                lambda: watch.count(measured)[1] >= args.measured_pods, args.phase_timeout_s)
        after = scheduler_samples(info)
        created, bound = watch.times(measured)
        first, last = min(created), max(bound)
        return {"repeat": repeat, "pods": len(bound), "create_failures": failures,
                "throughput_pods_per_s": round(len(bound) / ((last - first) / 1000.0), 3),
                "create_rate_pods_per_s": round(args.measured_pods / max(c1 - c0, 1e-9), 3),
                "measured_s": round((last - first) / 1000.0, 3), "load_average_1_5_15": [round(x, 2) for x in load],
                "plugins": plugin_delta(before, after)}
    finally:
        await api.close()


def clean_pods(info: ClusterInfo, claims: bool, timeout_s: float) -> float:
    """Delete every pod of the namespace (grace 0) and wait for them and their claims to be gone; seconds."""
    endpoint = load_endpoint(info.kubeconfig)
    s = session_for(endpoint, 2)
    t0 = time.monotonic()
    pods = f"{endpoint.server}/api/v1/namespaces/{NS}/pods"

    def gone() -> bool:
        """Delete what is left: one delete-collection of 5,000 pods with claims outlives the apiserver's 60 s
        handler timeout and stops part way, so it is sent again until none are left."""
        left = count(s, endpoint.server, f"/api/v1/namespaces/{NS}/pods")
        if left:
            try:
                s.delete(pods, params={"gracePeriodSeconds": "0"}, timeout=120)
            except requests.RequestException as exc:
                log(f"  deleting the pods left ({left}): {exc!r}; again")
        return left == 0

    wait_for("pods gone", gone, timeout_s, 5.0)
    if claims:
        wait_for("claims gone", lambda: count(s, endpoint.server,
                                             f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims") == 0, timeout_s)
    return round(time.monotonic() - t0, 1)


def throughput_variant(size: int, name: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    variant = VARIANTS[name]
    tag = f"{size}-{name}"
    cluster, info = fresh_cluster(work, tag)
    out: dict[str, Any] = {"size_nodes": size, "variant": name, "repeats": []}
    agent = None
    watch = None
    try:
        endpoint = load_endpoint(info.kubeconfig)
        s = session_for(endpoint, 2)
        spec = validate_gpus(variant)
        if spec.publishes_slices:
            DeviceClasses(s, endpoint.server).create(device_classes([spec]))
        s.post(f"{endpoint.server}/api/v1/namespaces", json={"metadata": {"name": NS}}, timeout=30).raise_for_status()
        wait_for("default service account", lambda: s.get(
            f"{endpoint.server}/api/v1/namespaces/{NS}/serviceaccounts/default", timeout=30).ok, 60)
        if variant["claim"] is not None:
            s.post(f"{endpoint.server}/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaimtemplates",
                   json=template(variant), timeout=30).raise_for_status()
        t0 = time.monotonic()
        agent = agent_for(info, work, tag, pools_doc(size, args.gpus_per_node, variant, idle=True))
        wait_for("nodes registered and published", lambda: _published(agent, size, spec.publishes_slices),
                 args.phase_timeout_s, 0.5)
        out["registration_s"] = round(time.monotonic() - t0, 2)
        log(f"  {tag}: {size} nodes registered{' with slices' if spec.publishes_slices else ''} in "
            f"{out['registration_s']} s")
        watch = PodWatch(info)
        for r in range(1, args.repeats + 1):
            rec = asyncio.run(throughput_repeat(info, variant, args, watch, r))
            rec["cleanup_s"] = clean_pods(info, variant["claim"] is not None, args.phase_timeout_s)
            out["repeats"].append(rec)
            log(f"  {tag} repeat {r}: {rec['throughput_pods_per_s']} pods/s (created at {rec['create_rate_pods_per_s']}/s; "
                f"DynamicResources {rec['plugins']['share_of_plugins_pct']}% of plugins' time)")
    except Exception as exc:  # recorded; the other variants still run
        log(f"  !! {tag} failed: {exc!r}")
        out["error"] = repr(exc)
    finally:
        if watch is not None:
            watch.stop()
        if agent is not None:
            agent.stop(timeout_s=180)
        cluster.down()
    ths = [r["throughput_pods_per_s"] for r in out["repeats"]]
    out["median_pods_per_s"] = median(ths)
    out["min_max"] = [min(ths), max(ths)] if ths else None
    out["median_create_rate"] = median([r["create_rate_pods_per_s"] for r in out["repeats"]])
    out["median_plugin_share_pct"] = median([r["plugins"]["share_of_plugins_pct"] for r in out["repeats"]
                                             if r["plugins"]["share_of_plugins_pct"] is not None])
    return out


def validate_gpus(variant: dict[str, Any]) -> GpuSpec:
    return GpuSpec(model="h100-80gb", **variant["gpus"])


def _published(agent: AgentProcess, n: int, slices: bool) -> bool:
    m = agent.metrics()
    return m.get("hollow_nodes_registered") == n and (not slices or m.get("hollow_dra_nodes_published") == n)


# ------------------------------------------------------------------------------------------------ registration


def registration_variant(name: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    slices = name == "slices"
    n = args.registration_nodes
    variant = {"gpus": {"expose": "dra" if slices else "counted"}, "claim": None}
    cluster, info = fresh_cluster(work, f"reg-{name}")
    out: dict[str, Any] = {"variant": name, "nodes": n, "gpus_per_node": 8, "repeats": []}
    try:
        endpoint = load_endpoint(info.kubeconfig)
        s = session_for(endpoint, 2)
        for r in range(1, args.repeats + 1):
            load = os.getloadavg()
            components = component_cpu(info)
            machine0 = psutil.cpu_times()
            t0 = time.monotonic()
            agent = agent_for(info, work, f"reg-{name}-{r}", pools_doc(n, 8, variant, idle=False))
            proc = psutil.Process(agent.pid)
            try:
                wait_for("registered", lambda a=agent: _published(a, n, False), args.phase_timeout_s, 0.25)
                registered = time.monotonic() - t0
                wait_for("published", lambda a=agent: _published(a, n, slices), args.phase_timeout_s, 0.25)
                done = time.monotonic() - t0
                cpu_reg = sum(proc.cpu_times()[:2])
                after = component_cpu(info)
                cp_cpu = {k: round(after[k] - components[k], 2) for k in components if k in after}
                busy = busy_cores(machine0, psutil.cpu_times(), done)
                found = count(s, endpoint.server, "/apis/resource.k8s.io/v1/resourceslices") if slices else 0
                time.sleep(10)  # let the registration's tail settle before the steady window
                c0, w0 = sum(proc.cpu_times()[:2]), time.monotonic()
                time.sleep(args.steady_s)
                steady = (sum(proc.cpu_times()[:2]) - c0) / (time.monotonic() - w0)
                rss = proc.memory_info().rss / 2**20
            finally:
                t_stop = time.monotonic()
                agent.stop(timeout_s=300)
            wait_for("nodes, slices and leases gone", lambda: count(s, endpoint.server, "/api/v1/nodes") == 0
                     and count(s, endpoint.server, "/apis/resource.k8s.io/v1/resourceslices") == 0
                     and count(s, endpoint.server, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")
                     == 0, args.phase_timeout_s * 2, 2.0)
            gone = round(time.monotonic() - t_stop, 1)
            rec = {"repeat": r, "nodes_registered_s": round(registered, 2), "registration_s": round(done, 2),
                   "slices_found": found, "agent_cpu_s_registration": round(cpu_reg, 2),
                   "control_plane_cpu_s_registration": cp_cpu, "machine_busy_cores_registration": busy,
                   "agent_steady_cores": round(steady, 4), "agent_rss_mib": round(rss, 1),
                   "teardown_s": gone, "load_average_1_5_15": [round(x, 2) for x in load]}
            out["repeats"].append(rec)
            log(f"  registration {name} repeat {r}: {rec['registration_s']} s (nodes {rec['nodes_registered_s']} s), "
                f"steady agent {rec['agent_steady_cores']} cores")
    except Exception as exc:
        log(f"  !! registration {name} failed: {exc!r}")
        out["error"] = repr(exc)
    finally:
        cluster.down()
    for key in ("registration_s", "nodes_registered_s", "agent_steady_cores", "agent_cpu_s_registration",
                "machine_busy_cores_registration"):
        out[f"median_{key}"] = median([r[key] for r in out["repeats"] if key in r])
    comps = sorted({c for r in out["repeats"] for c in r.get("control_plane_cpu_s_registration") or {}})
    out["median_control_plane_cpu_s_registration"] = {
        c: median([r["control_plane_cpu_s_registration"][c] for r in out["repeats"]
                   if c in (r.get("control_plane_cpu_s_registration") or {})]) for c in comps}
    return out


def profile_window_s(doc: dict[str, Any], name: str) -> int:
    """The variant's median registration time (measured by ``--parts registration``), whole seconds up;
    without one, 20 s (counted) or 70 s (slices), this machine's figures."""
    got = next((r.get("median_registration_s") for r in doc.get("registration") or [] if r["variant"] == name), None)
    return math.ceil(got) if got else (70 if name == "slices" else 20)


def steady_load(session: requests.Session, server: str, info: ClusterInfo, seconds: float) -> dict[str, Any]:
    """What the registered nodes' heartbeats alone cost, right after a registration: the machine's busy
    cores, kube-apiserver's cores and its heartbeat writes per second over ``seconds``.

    Why: heartbeats run beside the registration and grow with its length, so the registration's CPU is
    not all creates; this is the rate they take once nothing else runs."""
    r0, c0, m0, t0 = request_counts(session, server), component_cpu(info), psutil.cpu_times(), time.monotonic()
    time.sleep(seconds)
    r1, c1, m1, wall = request_counts(session, server), component_cpu(info), psutil.cpu_times(), time.monotonic() - t0
    writes = {k: round(v / wall, 1) for k, v in counts_since(r0, r1).items() if k.split(" ")[0] in ("PUT", "PATCH")}
    return {"seconds": round(wall, 1), "busy_cores": busy_cores(m0, m1, wall),
            "apiserver_cores": round((c1.get("kube-apiserver", 0.0) - c0.get("kube-apiserver", 0.0)) / wall, 2),
            "writes_per_s": writes}


def request_counts(session: requests.Session, server: str) -> dict[str, float]:
    """kube-apiserver's ``apiserver_request_total`` so far, summed by ``VERB resource``."""
    r = session.get(server + "/metrics", timeout=60)
    r.raise_for_status()
    out: dict[str, float] = {}
    for labels, value in families(r.text).get("apiserver_request_total", []):
        key = f"{labels.get('verb', '')} {labels.get('resource', '')}"
        out[key] = out.get(key, 0.0) + value
    return out


def counts_since(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    """The requests made between two :func:`request_counts`, by ``VERB resource`` (those with any)."""
    return {k: int(v - before.get(k, 0.0)) for k, v in sorted(after.items()) if v - before.get(k, 0.0) >= 1}


def profile_variant(name: str, args: argparse.Namespace, work: Path, window_s: int) -> dict[str, Any]:
    """kube-apiserver's own CPU profile over one registration (``--parts profile``), and its requests.

    Why: the registration's CPU by process says the control plane is the limit, not what in it; the
    profile splits kube-apiserver's CPU by request handler (creates: nodes, leases, slices; updates and
    patches: heartbeats; watches: the informers that receive the slices), and the request counts of the
    same window give the CPU per request of each handler.  One registration per variant on a fresh
    control plane, profiled from the agent's start for ``window_s`` (the variant's median registration).
    """
    slices = name == "slices"
    n = args.registration_nodes
    variant = {"gpus": {"expose": "dra" if slices else "counted"}, "claim": None}
    cluster, info = fresh_cluster(work, f"prof-{name}")
    out: dict[str, Any] = {"variant": name, "nodes": n, "window_s": window_s}
    try:
        endpoint = load_endpoint(info.kubeconfig)
        s = session_for(endpoint, 2)
        path = work / f"apiserver-registration-{name}.pprof"
        got: dict[str, Any] = {}

        def grab() -> None:
            try:
                r = s.get(endpoint.server + "/debug/pprof/profile", params={"seconds": str(window_s)},
                          timeout=window_s + 120)
                r.raise_for_status()
                path.write_bytes(r.content)
                got["path"] = str(path)
            except requests.RequestException as exc:
                got["error"] = repr(exc)

        before = request_counts(s, endpoint.server)
        cpu0 = component_cpu(info)
        grabber = threading.Thread(target=grab, daemon=True)
        grabber.start()
        t0 = time.monotonic()
        agent = agent_for(info, work, f"prof-{name}", pools_doc(n, 8, variant, idle=False))
        try:
            wait_for("published", lambda a=agent: _published(a, n, slices), args.phase_timeout_s, 0.25)
            out["registration_s"] = round(time.monotonic() - t0, 2)
            grabber.join(window_s + 180)
            after = request_counts(s, endpoint.server)
            cpu1 = component_cpu(info)
            out["window_wall_s"] = round(time.monotonic() - t0, 1)
            out["steady"] = steady_load(s, endpoint.server, info, STEADY_PROBE_S)
        finally:
            agent.stop(timeout_s=300)
        out["apiserver_cpu_s"] = round(cpu1.get("kube-apiserver", 0.0) - cpu0.get("kube-apiserver", 0.0), 2)
        out["requests"] = counts_since(before, after)
        out["profile"] = focus_cpu(got.get("path"), PROFILE_ROWS) if "path" in got else {"note": got.get("error")}
        log(f"  profile {name}: registration {out['registration_s']} s, apiserver {out['apiserver_cpu_s']} CPU-s "
            f"in {out['window_wall_s']} s; by row {out['profile'].get('cpu_s')}")
    except Exception as exc:
        log(f"  !! profile {name} failed: {exc!r}")
        out["error"] = repr(exc)
    finally:
        cluster.down()
    return out


def component_cpu(info: ClusterInfo) -> dict[str, float]:
    """CPU seconds (user + system) each control-plane process has used so far."""
    out = {}
    for name, pid in info.pids.items():
        try:
            out[name] = sum(psutil.Process(pid).cpu_times()[:2])
        except psutil.Error:
            continue
    return out


def busy_cores(before: Any, after: Any, wall_s: float) -> float | None:
    """The machine's average busy cores over ``wall_s`` between two ``psutil.cpu_times()`` (all but idle and
    iowait): near the core count, the machine was the limit."""
    if wall_s <= 0:
        return None
    idle = (after.idle - before.idle) + (getattr(after, "iowait", 0.0) - getattr(before, "iowait", 0.0))
    total = sum(after) - sum(before)
    return round((total - idle) / wall_s, 2)


# ------------------------------------------------------------------------------------------------ report


def summarize(doc: dict[str, Any]) -> None:
    """Ratios beside upstream's, and the registration target."""
    rows = doc.get("throughput") or []
    ratios = {}
    for size in sorted({r["size_nodes"] for r in rows}):
        by = {r["variant"]: r.get("median_pods_per_s") for r in rows if r["size_nodes"] == size}
        base = by.get("counted")
        ratios[str(size)] = {v: (round(t / base, 3) if t and base else None) for v, t in by.items() if v != "counted"}
    reg = {r["variant"]: r for r in doc.get("registration") or []}
    target = None
    if "counted" in reg and "slices" in reg:
        a, b = reg["counted"].get("median_registration_s"), reg["slices"].get("median_registration_s")
        ca, cb = reg["counted"].get("median_agent_steady_cores"), reg["slices"].get("median_agent_steady_cores")
        target = {"registration_ratio": round(b / a, 3) if a and b else None, "limit": 1.5,
                  "met": bool(a and b and b / a <= 1.5),
                  "steady_agent_cores": {"counted": ca, "slices": cb},
                  "cpu": registration_cpu(reg["counted"], reg["slices"])}
    doc["summary"] = {"dra_over_counted": ratios,
                      "upstream_dra_over_counted": {"value": round(56 / 270, 3),
                                                    "how": "threshold 56 (5000pods_500nodes_QueueingHintsEnabled) / 270 "
                                                           "(SchedulingBasic 5000Nodes_10000Pods): different node counts, "
                                                           "the only pair upstream gives; typical 70 / 270 = 0.26"},
                      "registration": target, "profile": profile_summary(doc.get("profile") or [])}


def profile_summary(profiles: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per variant: kube-apiserver's CPU by row of the profile, its writes and CPU per write over the
    window, the heartbeats' share.  Across: what a slice's own checks cost, and the floor the writes set.

    The floor: a registration is CPU-bound here (every core busy) and kube-apiserver spends about the
    same CPU per write whatever the object, so 10,000 slices more cannot take less than the counted
    registration's time scaled by its writes plus the slices, (writes + slices) / writes, before the
    leases and heartbeats that a longer registration also carries."""
    out: dict[str, Any] = {}
    for p in profiles:
        prof = p.get("profile") or {}
        if not prof.get("cpu_s") or not prof.get("sample_s"):
            continue
        req = p.get("requests") or {}
        writes = int(sum(v for k, v in req.items() if k.split(" ")[0] in WRITE_VERBS))
        cpu = p.get("apiserver_cpu_s")
        creates = int(sum(v for k, v in req.items() if k.split(" ")[0] == "POST"))
        out[p["variant"]] = {"sample_s": prof["sample_s"], "cpu_s": prof["cpu_s"], "writes": writes,
                             "create_handler_ms": round(prof["cpu_s"]["create_requests"] / creates * 1000, 3)
                             if creates else None,
                             "apiserver_ms_per_write": round(cpu / writes * 1000, 3) if cpu and writes else None,
                             "heartbeat_cpu_s": round(prof["cpu_s"]["update_requests"] + prof["cpu_s"]["patch_requests"], 2),
                             "lease_renewals": int(req.get("PUT leases", 0))}
    if "counted" in out and "slices" in out:
        made = next((p.get("requests") or {} for p in profiles if p["variant"] == "slices"), {}).get("POST resourceslices")
        if made:
            out["slices_created"] = int(made)
            out["slice_checks_ms"] = round(out["slices"]["cpu_s"]["resourceslice_strategy"] / made * 1000, 3)
            writes = out["counted"]["writes"]
            out["write_floor_ratio"] = round((writes + made) / writes, 2) if writes else None
    return out or None


def registration_cpu(counted: dict[str, Any], slices: dict[str, Any]) -> dict[str, Any] | None:
    """Where the registration's time went: CPU seconds by process (medians), what the slices' window used
    more per slice, and how busy the machine was.

    The CPU added is not the slices' own cost: the slices' registration lasts longer, and in the extra
    time the agent creates the nodes' leases and renews them (heartbeats), which the counted one mostly
    leaves for after its end.  The profile part (:func:`profile_summary`) splits it."""
    def total(r: dict[str, Any]) -> float | None:
        cp = r.get("median_control_plane_cpu_s_registration") or {}
        agent = r.get("median_agent_cpu_s_registration")
        return sum(cp.values()) + agent if cp and agent is not None else None

    tc, ts = total(counted), total(slices)
    if tc is None or ts is None:
        return None
    cp_c = counted["median_control_plane_cpu_s_registration"]
    cp_s = slices["median_control_plane_cpu_s_registration"]
    nodes = slices.get("nodes") or 1
    return {"cpu_s_counted": round(tc, 1), "cpu_s_slices": round(ts, 1),
            "control_plane_cpu_s_added": round(sum(cp_s.values()) - sum(cp_c.values()), 1),
            "apiserver_ms_added_per_slice": round((cp_s.get("kube-apiserver", 0) - cp_c.get("kube-apiserver", 0))
                                                  / nodes * 1000, 2),
            "agent_ms_added_per_slice": round((slices["median_agent_cpu_s_registration"]
                                               - counted["median_agent_cpu_s_registration"]) / nodes * 1000, 2),
            "busy_cores": {"counted": counted.get("median_machine_busy_cores_registration"),
                           "slices": slices.get("median_machine_busy_cores_registration")}}


def markdown(doc: dict[str, Any]) -> str:
    f = doc["facts"]
    m = f["machine"]
    lines = [f"# DRA on the real scheduler and the hollow agent ({f['date']})", "",
             f"Command: `{doc['command']}`  ",
             f"Machine: {m['cpu_model']}, {m['cores']} cores, {m['memory_gib']} GiB; load at start "
             f"{m['load_average_1_5_15']}; {m['os']}  ",
             *[f"Earlier run merged in (`--merge`): `{e['command']}` on {e['date']}, load at start "
               f"{e['load_average_1_5_15']}  " for e in doc.get("merged_runs") or []],
             f"Versions: {json.dumps(f.get('versions', {}))}, Python {m['python']}; control plane profile `scale` "
             "(client QPS 5000, APF off)  ", ""]
    rows = doc.get("throughput") or []
    if rows:
        lines += ["## Scheduler throughput (scheduler_perf's 5000pods_500nodes shape)", "",
                  f"{doc['params']['init_pods']} pods created first, then {doc['params']['measured_pods']} measured pods; "
                  f"{doc['params']['gpus_per_node']} devices per node; one control plane per size and variant, "
                  f"{doc['params']['repeats']} repeats on it; cells: median (min-max) pods/s bound, from a watch.", "",
                  "| nodes | variant | pods/s | create rate | DRA / counted | DynamicResources share of plugins' time (%) "
                  "| registration s | measured | error |", "|---|---|---|---|---|---|---|---|---|"]
        ratios = (doc.get("summary") or {}).get("dra_over_counted") or {}
        for r in sorted(rows, key=lambda r: (r["size_nodes"], list(VARIANTS).index(r["variant"]))):
            mm = r.get("min_max") or ["", ""]
            ratio = (ratios.get(str(r["size_nodes"])) or {}).get(r["variant"])
            lines.append(f"| {r['size_nodes']} | {r['variant']} | {r.get('median_pods_per_s')} ({mm[0]}-{mm[1]}) | "
                         f"{r.get('median_create_rate')} | {ratio if ratio is not None else '-'} | "
                         f"{r.get('median_plugin_share_pct')} | {r.get('registration_s')} | {r.get('measured', f['date'])[:16]} | "
                         f"{r.get('error', '')} |")
        up = doc["summary"]["upstream_dra_over_counted"]
        lines += ["", "Upstream (scheduler_perf, k8s v1.36.3) beside it:", "",
                  "| test | nodes | pods | threshold pods/s | typically | note |", "|---|---|---|---|---|---|"]
        lines += [f"| {u['test']} | {u['nodes']} | {u['pods']} | {u['threshold_pods_per_s']} | {u['typical']} | "
                  f"{u['note']} |" for u in UPSTREAM]
        lines += ["", f"Upstream DRA/counted ratio: {up['value']} ({up['how']}).", "",
                  f"How upstream runs them: {UPSTREAM_HOW}.", ""]
    reg = doc.get("registration") or []
    if reg:
        t = (doc.get("summary") or {}).get("registration") or {}
        lines += ["## Registration of 10,000 nodes x 8 GPUs, with and without slices", "",
                  "| variant | registration s (median, all) | nodes registered s | agent CPU s during it | "
                  "control plane CPU s during it | machine busy cores during it | steady agent cores | measured "
                  "| error |", "|---|---|---|---|---|---|---|---|---|"]
        for r in reg:
            cp = r.get("median_control_plane_cpu_s_registration") or {}
            lines.append(f"| {r['variant']} | {r.get('median_registration_s')} "
                         f"({', '.join(str(x['registration_s']) for x in r['repeats'])}) | "
                         f"{r.get('median_nodes_registered_s')} | {r.get('median_agent_cpu_s_registration')} | "
                         f"{', '.join(f'{k} {v}' for k, v in cp.items()) or '-'} | "
                         f"{r.get('median_machine_busy_cores_registration', '-')} | "
                         f"{r.get('median_agent_steady_cores')} | {r.get('measured', f['date'])[:16]} | {r.get('error', '')} |")
        if t:
            lines += ["", f"Slices' cost: {t.get('registration_ratio')}x the counted registration (limit "
                          f"{t.get('limit')}: {'met' if t.get('met') else 'NOT met'}); steady agent cores "
                          f"{t.get('steady_agent_cores')}.", ""]
            c = t.get("cpu")
            if c:
                lines += [f"Where the time went (medians): the machine's cores were busy {c['busy_cores']['counted']} "
                          f"(counted) and {c['busy_cores']['slices']} (slices) of {doc['facts']['machine']['cores']} "
                          f"on average during registration, so it is CPU-bound; all processes together used "
                          f"{c['cpu_s_counted']} CPU-s (counted) and {c['cpu_s_slices']} CPU-s (slices).  The slices' "
                          f"window used {c['control_plane_cpu_s_added']} CPU-s more in the control plane (kube-apiserver "
                          f"{c['apiserver_ms_added_per_slice']} ms per slice) and {c['agent_ms_added_per_slice']} ms "
                          "per slice more in the agent; that is not the slices' own cost: the longer window also "
                          "holds the nodes' lease creates and heartbeats (the profile below splits it).",
                          ""]
    lines += profile_markdown(doc)
    lines += [f"Notes: {n}" for n in doc.get("notes") or []]
    return "\n".join(lines) + "\n"


def profile_markdown(doc: dict[str, Any]) -> list[str]:
    """The ``--parts profile`` section: kube-apiserver's CPU by row, counted beside slices, and the floor."""
    profiles = {p["variant"]: p for p in doc.get("profile") or []}
    summary = (doc.get("summary") or {}).get("profile") or {}
    if not profiles:
        return []
    names = [n for n in ("counted", "slices") if n in profiles]
    lines = ["## Where kube-apiserver's CPU went during a registration (its own pprof profile)", "",
             "One registration per variant on a fresh control plane: "
             + "; ".join(f"{n}: {profiles[n]['nodes']} nodes in {profiles[n].get('registration_s')} s, profiled "
                         f"{profiles[n]['window_s']} s from the agent's start (measured "
                         f"{profiles[n].get('measured', '')[:16]})" for n in names) + ".", "",
             "| kube-apiserver CPU-s in samples of (rows overlap) | " + " | ".join(names) + " |",
             "|---|" + "---|" * len(names)]
    for key, label, _ in PROFILE_ROWS:
        lines.append(f"| {label} | " + " | ".join(str(((summary.get(n) or {}).get("cpu_s") or {}).get(key, "-"))
                                                for n in names) + " |")
    lines.append("| all of the profile | " + " | ".join(str((summary.get(n) or {}).get("sample_s", "-")) for n in names)
                 + " |")
    lines.append("")
    for n in names:
        s = summary.get(n) or {}
        req = profiles[n].get("requests") or {}
        writes = ", ".join(f"{k} {v}" for k, v in req.items() if k.split(" ")[0] in WRITE_VERBS)
        lines.append(f"- {n}: kube-apiserver used {profiles[n].get('apiserver_cpu_s')} CPU-s for {s.get('writes')} "
                     f"writes ({s.get('apiserver_ms_per_write')} ms per write; {writes or '-'}); heartbeats "
                     f"(updates and patches) {s.get('heartbeat_cpu_s')} CPU-s")
        st = profiles[n].get("steady") or {}
        if st:
            lines.append(f"  - then the heartbeats alone for {st['seconds']} s: the machine {st['busy_cores']} busy "
                         f"cores, kube-apiserver {st['apiserver_cores']} cores, writes/s "
                         + ", ".join(f"{k} {v}" for k, v in st["writes_per_s"].items()))
    if summary.get("write_floor_ratio") is not None:
        c, cc, cs = summary, summary["counted"], summary["slices"]
        lines += ["", f"What this says: kube-apiserver's create handler spent {cc['cpu_s']['create_requests']} CPU-s "
                      f"in the counted registration ({cc['create_handler_ms']} ms per create, nearly all nodes) and "
                      f"{cs['cpu_s']['create_requests']} CPU-s with slices, where a ResourceSlice's own checks alone "
                      f"are {c['slice_checks_ms']} ms each: a slice costs it no less than a node.  The counted "
                      f"registration was {cc['writes']} writes with every core busy; {c['slices_created']} slices "
                      f"more make {c['write_floor_ratio']}x its writes, so they cannot take less than about "
                      f"{c['write_floor_ratio']}x its time on this machine, before the lease creates and heartbeats "
                      "that any longer registration carries beside them (10,000 nodes' heartbeats alone keep both "
                      "cores busy, above).  The 1.5x target needs more cores than this machine has; the rows above "
                      "are what a slice costs, for a larger one."]
    return [*lines, ""]


def merge_earlier(doc: dict[str, Any], earlier_path: Path, args: argparse.Namespace, parts: list[str]) -> None:
    """Carry over what an earlier run measured and this one does not measure again (``--merge``).

    Why: the 5,000-node sizes and the 10,000-node registration take hours, so they are run on their own
    days; one report must still hold every figure, each with the run that measured it.  Rows this run
    measures again are replaced as they are measured; the rest keep the earlier run's figures, and the
    earlier notes are kept (remove by hand one that a new row makes untrue).  The parameters must match,
    or the rows would not be comparable.
    """
    if not earlier_path.exists():
        return
    earlier = json.loads(earlier_path.read_text())
    for key in ("repeats", "init_pods", "measured_pods", "gpus_per_node"):
        if earlier.get("params", {}).get(key) != doc["params"][key]:
            raise SystemExit(f"--merge: {earlier_path} was measured with {key}={earlier['params'].get(key)}, "
                             f"this run with {doc['params'][key]}; rerun every size instead")
    ef = earlier["facts"]
    doc["merged_runs"] = [*(earlier.get("merged_runs") or []),
                          {"command": earlier["command"], "date": ef["date"],
                           "load_average_1_5_15": ef["machine"]["load_average_1_5_15"]}]
    # Notes written by hand on an earlier run (why a row was rerun, what caps a figure) still hold for its rows.
    doc["notes"] += [n for n in earlier.get("notes") or [] if n not in doc["notes"]]
    sizes = [int(x) for x in args.sizes.split(",") if x] if "throughput" in parts else []
    for r in earlier.get("throughput") or []:
        r.setdefault("measured", ef["date"])
        if not (r["size_nodes"] in sizes and r["variant"] in args.variants.split(",")):
            doc["throughput"].append(r)
    for r in earlier.get("registration") or []:
        r.setdefault("measured", ef["date"])
        if "registration" not in parts:
            doc["registration"].append(r)
    if "profile" not in parts and earlier.get("profile"):
        doc["profile"] = earlier["profile"]


def write(doc: dict[str, Any], out: Path) -> None:
    summarize(doc)
    shown = portable(doc)  # profile files relative to the repo: no machine path in a committed file
    out.mkdir(parents=True, exist_ok=True)
    (out / "dra.json").write_text(json.dumps(shown, indent=2) + "\n")
    (out / "dra.md").write_text(markdown(shown))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="500,5000")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--parts", default="throughput,registration,profile",
                    help="throughput, registration, profile (kube-apiserver's CPU profile over one registration "
                         "per variant: where the slices' CPU goes; after registration, whose medians set its window)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--init-pods", type=int, default=2500)
    ap.add_argument("--measured-pods", type=int, default=2500)
    ap.add_argument("--gpus-per-node", type=int, default=10, help="devices per node (scheduler_perf: maxClaimsPerNode 10)")
    ap.add_argument("--registration-nodes", type=int, default=10000)
    ap.add_argument("--steady-s", type=float, default=60.0)
    ap.add_argument("--phase-timeout-s", type=float, default=1800.0)
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench")
    ap.add_argument("--work", type=Path, default=ROOT / ".hollowscale" / "bench-dra")
    ap.add_argument("--render", type=Path, help="re-read this dra.json's figures (its summary and markdown) only")
    ap.add_argument("--merge", action="store_true",
                    help="keep the rows of the existing OUT/dra.json that this run does not measure again "
                         "(another size or part, measured earlier); the earlier run's command, date and load "
                         "are listed in the report")
    args = ap.parse_args()
    if args.render:
        doc = json.loads(args.render.read_text())
        summarize(doc)  # the summary's reading of the figures may have grown since they were measured
        doc = portable(doc)
        args.render.write_text(json.dumps(doc, indent=2) + "\n")
        args.render.with_suffix(".md").write_text(markdown(doc))
        return 0
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"facts": machine_facts(), "command": "python " + " ".join(sys.argv),
                           "params": {k: getattr(args, k) for k in ("repeats", "init_pods", "measured_pods",
                                                                    "gpus_per_node", "registration_nodes", "steady_s")},
                           "upstream": UPSTREAM, "upstream_how": UPSTREAM_HOW, "throughput": [], "registration": [],
                           "notes": ["Our scheduler runs with v1.36's defaults (OpportunisticBatching on, which "
                                     "scheduler_perf turns off); the apiserver, etcd, scheduler, controller-manager, "
                                     "agent and this client share the machine's cores, where scheduler_perf runs one "
                                     "process on CI machines."]}
    parts = args.parts.split(",")
    if args.merge:
        merge_earlier(doc, args.out / "dra.json", args, parts)
        write(doc, args.out)
    if "throughput" in parts:
        for size in [int(x) for x in args.sizes.split(",") if x]:
            for name in args.variants.split(","):
                log(f"throughput: {size} nodes, variant {name}")
                doc["throughput"] = [r for r in doc["throughput"] if (r["size_nodes"], r["variant"]) != (size, name)]
                doc["throughput"].append({**throughput_variant(size, name, args, work), "measured": doc["facts"]["date"]})
                write(doc, args.out)
    if "registration" in parts:
        for name in ("counted", "slices"):
            log(f"registration: {args.registration_nodes} nodes, {name}")
            doc["registration"] = [r for r in doc["registration"] if r["variant"] != name]
            doc["registration"].append({**registration_variant(name, args, work), "measured": doc["facts"]["date"]})
            write(doc, args.out)
    if "profile" in parts:
        for name in ("counted", "slices"):
            log(f"profile: {args.registration_nodes} nodes, {name}")
            doc["profile"] = [r for r in doc.get("profile") or [] if r["variant"] != name]
            doc["profile"].append({**profile_variant(name, args, work, profile_window_s(doc, name)),
                                   "measured": doc["facts"]["date"]})
            write(doc, args.out)
    write(doc, args.out)
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
