#!/usr/bin/env python
"""``make bench-hollow``: the hollow agent against KWOK tuned as its scale users run it, repeated.

The work (the same for both engines, on a ``scale``-profile local control plane):

(a) register N nodes with 8 GPUs each until the API reports all of them Ready (seconds);
(b) hold them at kubelet cadence (40 s leases, renewed every 10 s) for ``--steady-s`` seconds:
    engine CPU cores and RSS, lease age percentiles (from LIST snapshots, same for both engines),
    the agent's own renew-lag quantiles, nodes that went NotReady;
(c) P pods to Running, Succeeded and deleted, once as bare pods bound by ``spec.nodeName`` and once
    through kube-scheduler: pods/s, and engine CPU-seconds per 1,000 pods.

Why the comparison is fair:

* **Fresh control plane per engine run.** Every engine run gets its own new cluster directory and
  control plane (``up`` before, ``down`` after), so neither engine inherits the other's objects, lease
  garbage collection, watch caches or etcd history.
* **Never at once, order alternated.** Engines run one after the other (never together, so neither
  steals the other's CPU), and the order alternates over ``--repeats`` (repeat 1 hollow first,
  repeat 2 KWOK first, ...), so drift of a shared machine does not favour whichever runs first.
* **Medians over repeats, with the spread.** Every figure is reported as the median over repeats with
  min, max and every raw value; ratios and targets use medians.
* **KWOK tuned.** KWOK runs with a ``KwokConfiguration`` (in the same ``--config`` file as its stages)
  that raises its worker parallelism as its scale users do (see :data:`KWOK_OPTIONS` and the
  ``kwok_configuration`` section of the report, with sources); its own shipped stages drive nodes and
  pods; its client has no rate limiter to raise (``flowcontrol.NewFakeAlwaysRateLimiter`` in
  ``pkg/utils/client/clientset.go``).
* **The same yardsticks.** CPU is read with psutil per process (user+system seconds) for the engine
  and every control-plane process; the work is counted by the apiserver itself
  (``apiserver_request_total`` before and after each phase, grouped by verb, resource and
  subresource), not by either engine's own accounting.

Engine CPU per 1,000 pods is given two ways: *total* (all engine CPU during the pod phase, comparable
to earlier reports) and *marginal* (that minus the engine's own steady-state cores times the phase's
wall time: what the pods cost on top of holding the nodes).  When py-spy is installed, the hollow
agent is sampled per phase (``py-spy record --nonblocking``) and the report says where its CPU goes.

Usage:  python tests/bench/bench_hollow.py [--nodes 10000] [--pods 5000] [--steady-s 120] [--repeats 3]
        python tests/bench/bench_hollow.py --render reports/bench/hollow.json   (re-render only)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import datetime as dt
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson
import psutil
import yaml
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from apiserver_profile import UPDATE_ROWS, summarise  # noqa: E402
from apiserver_profile import cum_shares as pprof_cum_shares  # noqa: E402, F401  (the unit tests read it here)
from portable import portable  # noqa: E402

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
LEASE_DURATION_S = 40
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
PHASES = ("register", "steady", "pods_bare", "pods_scheduler")
MODES = ("bare", "scheduler")
CONTROL_PLANE = ("kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler")
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY"})
UPDATES = frozenset({"PUT", "PATCH", "APPLY"})
#: where kube-apiserver's CPU goes (shares of its CPU samples; :mod:`apiserver_profile`)
APISERVER_PROFILE_ROWS = UPDATE_ROWS
ENGINE_LABEL = {"hollow": "hollow", "kwok": "KWOK tuned"}

# --- KWOK tuned ---------------------------------------------------------------------------------
#: ``KwokConfiguration.options`` for KWOK_VERSION; every field name is in
#: ``pkg/apis/config/v1alpha1/kwok_configuration_types.go`` of that version.
KWOK_OPTIONS: dict[str, Any] = {
    # the four the issue names (KWOK's defaults are 4, 4, 4 and 1)
    "nodeLeaseParallelism": 32,
    "nodePlayStageParallelism": 32,
    "podPlayStageParallelism": 64,
    "podsOnNodeSyncParallelism": 16,
    # as in the KwokConfiguration KWOK ships for in-cluster deployments (kustomize/kwok/kwok.yaml)
    "enablePodsOnNodeSyncListPager": False,
    "enablePodsOnNodeSyncStreamWatch": True,
    "enableProfilingHandler": False,
    "enableContentionProfiling": False,
    # the bench's own setup (formerly flags): kubelet's lease, its nodes only, pod and node IPs
    "nodeLeaseDurationSeconds": LEASE_DURATION_S,
    "manageAllNodes": False,
    "manageNodesWithLabelSelector": "bench-engine=kwok",
    "cidr": "10.128.0.1/9",
    "nodeIP": "100.127.0.1",
}

KWOK_TYPES = "pkg/apis/config/v1alpha1/kwok_configuration_types.go"
#: where each choice comes from (quoted from KWOK_VERSION's sources where they say something)
KWOK_SOURCES: list[dict[str, str]] = [
    {"options": "nodeLeaseParallelism, nodePlayStageParallelism, podPlayStageParallelism, podsOnNodeSyncParallelism",
     "source": "issue 13 of this project (\"KWOK tuned as its scale users run it\": 32 / 32 / 64 / 16)"},
    {"options": "nodeLeaseParallelism",
     "source": f"sigs.k8s.io/kwok@{KWOK_VERSION} {KWOK_TYPES}: \"NodeLeaseParallelism is the number of NodeLeases "
               "that are allowed to be processed in parallel. +default=4\""},
    {"options": "nodePlayStageParallelism / podPlayStageParallelism",
     "source": "same file: \"NodePlayStageParallelism is the number of NodePlayStages that are allowed to run in "
               "parallel. +default=4\" / \"PodPlayStageParallelism is the number of PodPlayStages that are "
               "allowed to run in parallel. +default=4\""},
    {"options": "podsOnNodeSyncParallelism",
     "source": "same file: \"PodsOnNodeSyncParallelism is the number of workers to sync pods on nodes in parallel. "
               "+default=1\"; added for large-scale stress tests in "
               "https://github.com/kubernetes-sigs/kwok/issues/1346 (PR "
               "https://github.com/kubernetes-sigs/kwok/pull/1345)"},
    {"options": "enablePodsOnNodeSyncListPager: false, enablePodsOnNodeSyncStreamWatch: true, "
                "enableProfilingHandler: false, enableContentionProfiling: false",
     "source": f"the KwokConfiguration KWOK {KWOK_VERSION} ships for deployments (kustomize/kwok/kwok.yaml, also "
               "charts/kwok/conf/kwok.yaml); the binary's own defaults are list pager on, stream watch off"},
    {"options": "client QPS / burst",
     "source": f"none to raise: KWOK {KWOK_VERSION} has no QPS/burst option; its clientset sets "
               "restConfig.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter() (pkg/utils/client/clientset.go), "
               "so 1,000 lease renewals/s are not throttled on the client side"},
    {"options": "context",
     "source": "KWOK users at scale report its lease renewals as the controller's main load "
               "(https://github.com/kubernetes-sigs/karpenter/issues/1591); KWOK's maintainer advises keeping "
               "leases on (https://github.com/kubernetes-sigs/karpenter/pull/1592), as here. No KWOK docs page "
               "with recommended parallelism values was found (searched: kwok nodeLeaseParallelism performance)"},
]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def kwok_configuration() -> dict[str, Any]:
    """The ``KwokConfiguration`` document KWOK runs with."""
    return {"apiVersion": "config.kwok.x-k8s.io/v1alpha1", "kind": "KwokConfiguration",
            "options": dict(KWOK_OPTIONS)}


def kwok_module_dir() -> Path:
    """KWOK's module source (stages, types) in the Go module cache; downloaded when missing."""
    gomodcache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    path = Path(gomodcache) / f"sigs.k8s.io/kwok@{KWOK_VERSION}"
    if not path.exists():
        subprocess.run(["go", "mod", "download", f"sigs.k8s.io/kwok@{KWOK_VERSION}"], check=True, cwd="/")
    return path


def check_kwok_fields(module: Path) -> list[str]:
    """KWOK_OPTIONS keys that KWOK's v1alpha1 types do not define (empty when all exist)."""
    text = (module / KWOK_TYPES).read_text()
    return [k for k in KWOK_OPTIONS if f'json:"{k}' not in text]


def kwok_stages(run_duration_s: int) -> list[dict[str, Any]]:
    """KWOK's own shipped stages from the module cache, pod-complete widened to bare pods."""
    base = kwok_module_dir() / "kustomize" / "stage"
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


# --- pure helpers: aggregation ------------------------------------------------------------------
def is_num(v: Any) -> bool:
    """A finite int or float (not a bool)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def spread(values: Iterable[Any]) -> dict[str, Any]:
    """Median, min, max over the numeric values (None and NaN skipped); every raw value kept."""
    raw = list(values)
    nums = [float(v) for v in raw if is_num(v)]
    if not nums:
        return {"median": None, "min": None, "max": None, "n": 0, "values": raw}
    return {"median": round(statistics.median(nums), 4), "min": round(min(nums), 4), "max": round(max(nums), 4),
            "n": len(nums), "values": raw}


def dig(doc: Any, path: str) -> Any:
    """``doc["a"]["b"]`` for ``"a.b"``; None when any step is missing."""
    for part in path.split("."):
        if not isinstance(doc, dict) or part not in doc:
            return None
        doc = doc[part]
    return doc


def ratio(a: Any, b: Any) -> float | None:
    """a / b rounded, None unless both are numbers and b is not 0."""
    return round(a / b, 3) if is_num(a) and is_num(b) and b != 0 else None


def summarise_runs(runs: list[dict[str, Any]], paths: Iterable[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """engine -> figure path -> :func:`spread` over that engine's runs (in run order)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    paths = list(paths)
    for engine in dict.fromkeys(r["engine"] for r in runs):
        mine = [r for r in runs if r["engine"] == engine]
        out[engine] = {p: spread(dig(r, p) for r in mine) for p in paths}
    return out


def fmt_num(v: Any) -> str:
    """A figure for a table: fewer decimals the larger it is; n/a for no number."""
    if not is_num(v):
        return "n/a"
    if float(v).is_integer():
        return f"{int(v)}"
    a = abs(v)
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def fmt_spread(s: dict[str, Any] | None) -> str:
    """``median (min-max)``; one value alone; ``, k of n runs`` when some runs had no value."""
    if not s or not s.get("n"):
        return "n/a"
    text = fmt_num(s["median"]) if s["n"] == 1 or s["min"] == s["max"] else \
        f"{fmt_num(s['median'])} ({fmt_num(s['min'])}-{fmt_num(s['max'])})"
    total = len(s.get("values") or ())
    return text + (f", {s['n']} of {total} runs" if s["n"] < total else "")


# --- pure helpers: apiserver request counts -----------------------------------------------------
def request_key(verb: str, resource: str, subresource: str) -> str:
    """``VERB resource[/subresource]``; ``VERB /path`` for non-resource requests (the apiserver puts the
    path of /metrics, /healthz, ... in ``subresource``)."""
    if not resource:
        return f"{verb} {subresource or '-'}"
    return f"{verb} {resource}" + (f"/{subresource}" if subresource else "")


def split_request_key(key: str) -> tuple[str, str]:
    """(verb, resource[/subresource]) of a :func:`request_key`."""
    verb, _, res = key.partition(" ")
    return verb, res


def request_counts(text: str, failed: bool = False) -> dict[str, float]:
    """``apiserver_request_total`` of a /metrics text, summed per :func:`request_key` (code, group,
    version, scope, component and dry_run summed away).  ``failed``: only requests answered with a
    code >= 400, keyed ``VERB resource code`` (e.g. DELETEs of pods already gone: ``DELETE pods 404``)."""
    lines = [ln for ln in text.splitlines() if ln.startswith("apiserver_request_total{")]
    out: dict[str, float] = collections.defaultdict(float)
    for family in text_string_to_metric_families("# TYPE apiserver_request_total counter\n" + "\n".join(lines) + "\n"):
        for sample in family.samples:
            if sample.name != "apiserver_request_total":
                continue
            lb = sample.labels
            key = request_key(lb.get("verb", ""), lb.get("resource", ""), lb.get("subresource", ""))
            code = lb.get("code", "")
            if not failed:
                out[key] += sample.value
            elif code.isdigit() and int(code) >= 400:
                out[f"{key} {code}"] += sample.value
    return dict(out)


def counts_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Increase per key between two snapshots (keys that did not increase left out), sorted."""
    return {k: after[k] - before.get(k, 0.0) for k in sorted(after) if after[k] - before.get(k, 0.0) > 0}


def count_of(delta: dict[str, float], verbs: Iterable[str], resource: str) -> float:
    """Requests of ``delta`` with one of ``verbs`` on ``resource`` (``pods/status`` style)."""
    vs = frozenset(verbs)
    return sum(n for k, n in delta.items() if split_request_key(k)[0] in vs and split_request_key(k)[1] == resource)


def mutating(delta: dict[str, float]) -> float:
    """All mutating requests of ``delta``."""
    return sum(n for k, n in delta.items() if split_request_key(k)[0] in MUTATING)


def per(x: float, n: float | None, digits: int = 3) -> float | None:
    """x / n rounded; None when there is no n."""
    return round(x / n, digits) if n else None


def register_api_figures(delta: dict[str, float], bench: dict[str, float], nodes: int) -> dict[str, Any]:
    """Phase (a) per node: writes by the engine and control plane (the bench's own node creates for
    KWOK subtracted), lease and node-status writes."""
    bench_writes = bench.get("create_node", 0.0)
    return {"nodes": nodes, "bench_writes": bench_writes, "delta": delta, "per_node": {
        "mutating_excl_bench": per(mutating(delta) - bench_writes, nodes),
        "node_creates": per(count_of(delta, {"POST"}, "nodes"), nodes),
        "node_status_writes": per(count_of(delta, UPDATES, "nodes/status"), nodes),
        "node_writes": per(count_of(delta, UPDATES, "nodes"), nodes),
        "lease_writes": per(count_of(delta, UPDATES | {"POST"}, "leases"), nodes)}}


def steady_api_figures(delta: dict[str, float], nodes: int, wall_s: float) -> dict[str, Any]:
    """Phase (b) per node per minute: writes by kind, reads, and every group."""
    scale = nodes * wall_s / 60 if nodes and wall_s > 0 else None
    reads = sum(n for k, n in delta.items() if split_request_key(k)[0] not in MUTATING)
    return {"nodes": nodes, "wall_s": round(wall_s, 2), "delta": delta, "per_node_per_min": {
        "mutating": per(mutating(delta), scale, 4),
        "lease_writes": per(count_of(delta, UPDATES | {"POST"}, "leases"), scale, 4),
        "node_status_writes": per(count_of(delta, UPDATES, "nodes/status"), scale, 4),
        "node_writes": per(count_of(delta, UPDATES, "nodes"), scale, 4),
        "reads": per(reads, scale, 4)},
        "by_group_per_node_per_min": {k: per(n, scale, 4) for k, n in delta.items()}}


def heartbeat_writes(delta: dict[str, float]) -> float:
    """Writes that keep nodes alive (leases, node status), whatever the pods do."""
    return count_of(delta, UPDATES | {"POST"}, "leases") + count_of(delta, UPDATES, "nodes/status")


def pod_api_figures(delta: dict[str, float], bench: dict[str, float], lifecycles: float) -> dict[str, Any]:
    """Phase (c) per pod lifecycle (create, [bind], Running, Succeeded, delete): the writes each step
    took, and all writes except the bench client's own pod POSTs and DELETEs and the nodes' heartbeats
    (leases, node status: they go on during the phase whatever the pods do; given apart)."""
    bench_writes = bench.get("create_pod", 0.0) + bench.get("delete_pod", 0.0)
    beats = heartbeat_writes(delta)
    return {"lifecycles": lifecycles, "bench_writes": bench_writes, "delta": delta, "per_pod": {
        "mutating_excl_bench": per(mutating(delta) - bench_writes - beats, lifecycles),
        "mutating_incl_bench": per(mutating(delta) - beats, lifecycles),
        "mutating_excl_bench_incl_heartbeats": per(mutating(delta) - bench_writes, lifecycles),
        "heartbeat_writes": per(beats, lifecycles),
        "status_writes": per(count_of(delta, UPDATES, "pods/status"), lifecycles),
        "pod_writes": per(count_of(delta, UPDATES, "pods"), lifecycles),
        "deletes": per(count_of(delta, {"DELETE"}, "pods"), lifecycles),
        "bindings": per(count_of(delta, {"POST"}, "pods/binding"), lifecycles),
        "events": per(count_of(delta, MUTATING, "events"), lifecycles)}}


def bench_requests(metrics: Metrics) -> dict[str, float]:
    """The bench client's own requests by verb label, answered ones only (code 0 = no response)."""
    out: dict[str, float] = collections.defaultdict(float)
    for family in metrics.registry.collect():
        for sample in family.samples:
            if sample.name == "hollow_api_requests_total" and sample.labels.get("code") != "0":
                out[sample.labels["verb"]] += sample.value
    return dict(out)


# --- pure helpers: py-spy profiles --------------------------------------------------------------
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
_PYLIB = re.compile(r".*/lib/python3\.\d+/(?:site-packages/|dist-packages/)?")


def module_of(path: str) -> str:
    """``hollow/pods.py`` or ``/x/.venv/lib/python3.11/site-packages/aiohttp/client.py`` -> ``hollow.pods``
    / ``aiohttp.client``."""
    p = _PYLIB.sub("", path)
    root = str(ROOT) + "/"
    if p.startswith(root):
        p = p[len(root):]
    p = p.lstrip("/").removesuffix(".py").replace("/", ".")
    return p.removesuffix(".__init__") or "?"


def frame_name(frame: str) -> str:
    """``func (path/to/mod.py:12)`` -> ``path.to.mod:func`` (a frame without a file kept as is)."""
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    return f"{module_of(m['file'])}:{m['func']}"


def parse_raw_profile(text: str) -> collections.Counter[tuple[str, ...]]:
    """py-spy ``--format raw`` (``frame;frame;... count``, root first) -> stacks of
    ``module:function`` names -> samples."""
    stacks: collections.Counter[tuple[str, ...]] = collections.Counter()
    for line in text.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        stacks[tuple(frame_name(f) for f in stack.split(";"))] += int(count)
    return stacks


def trunk_of(stacks: collections.Counter[tuple[str, ...]], share: float = 0.9) -> list[str]:
    """The main chain of calls down to where the samples branch: from the most sampled root frame, one
    frame deeper while a single callee holds ``share`` of the samples through the chain so far (samples
    ending on the chain count as not going deeper).  For the agent: entry point, CLI, ``uvloop:run``,
    ``Runner.run`` (the event loop, where the work branches off; coroutines the loop resumes from C
    appear as stacks of their own, outside the trunk)."""
    pool = {st: n for st, n in stacks.items() if st}
    chain: list[str] = []
    depth = 0
    while pool:
        heads: collections.Counter[str] = collections.Counter()
        for st, n in pool.items():
            if len(st) > depth:
                heads[st[depth]] += n
        if not heads:
            break
        name, n = max(heads.items(), key=lambda kv: (kv[1], kv[0]))
        if depth and n < share * sum(pool.values()):
            break
        chain.append(name)
        pool = {st: c for st, c in pool.items() if len(st) > depth and st[depth] == name}
        depth += 1
    return chain


def summarise_profile(stacks: collections.Counter[tuple[str, ...]], top: int = 15,
                      trunk_pct: float = 90.0) -> dict[str, Any]:
    """Top functions by self samples (the leaf frame) and by inclusive samples (anywhere in the stack,
    once per stack), as percent of all samples.  The trunk (:func:`trunk_of`) is listed apart and left
    out of the inclusive list, which then shows where the time goes once it branches off."""
    total = sum(stacks.values())
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    for stack, n in stacks.items():
        if stack:
            own[stack[-1]] += n
        for name in set(stack):
            incl[name] += n

    def pct_of(n: int) -> float:
        return round(100 * n / total, 1) if total else 0.0

    trunk = trunk_of(stacks, trunk_pct / 100)

    def rows(c: collections.Counter[str]) -> list[dict[str, Any]]:
        ranked = sorted(c.items(), key=lambda fn: (-fn[1], fn[0]))[:top]  # ties by name: stable output
        return [{"function": f, "samples": n, "pct": pct_of(n)} for f, n in ranked]

    branches = collections.Counter({f: n for f, n in incl.items() if f not in trunk})
    return {"samples": total, "self": rows(own), "inclusive": rows(branches),
            "trunk": trunk}


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
        """CPU seconds and cores per process between two snaps, and the control plane's cores summed."""
        wall = b[0] - a[0]
        secs = {k: round(b[1][k] - a[1].get(k, 0.0), 2) for k in b[1]}
        cores = {k: round(v / wall, 3) if wall > 0 else None for k, v in secs.items()}
        cp = [float(c) for c in (cores.get(n) for n in CONTROL_PLANE) if c is not None and is_num(c)]
        return {"wall_s": round(wall, 2), "cpu_s": secs, "cores": cores,
                "control_plane_cores": round(sum(cp), 3) if len(cp) == len(CONTROL_PLANE) else None}


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


async def _reap(task: asyncio.Future[Any]) -> None:
    """Wait for a task this code cancelled, without swallowing a cancellation of our own (Ctrl-C):
    ``suppress(CancelledError)`` around the await would eat both, and the bench would go on."""
    await asyncio.gather(task, return_exceptions=True)


async def wait_for(what: str, check: Callable[[], bool], timeout: float, every: float = 0.25) -> bool:
    """Wait until ``check()``; False (and a log line) when ``timeout`` passes first: the figures then
    record how far it got, because an overloaded control plane is a result, not an error."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if check():
            return True
        await asyncio.sleep(every)
    log(f"  !! {what}: not reached within {timeout:.0f}s")
    return False


async def gather_bounded(n: int, make: Callable[[int], Any], limit: int) -> list[Any]:
    """``make(i)`` for i < n, at most ``limit`` at once."""
    sem = asyncio.Semaphore(limit)

    async def one(i: int) -> Any:
        async with sem:
            return await make(i)

    return await asyncio.gather(*(one(i) for i in range(n)))


Counts = dict[str, float]


class ApiCounter:
    """Snapshots of the apiserver's ``apiserver_request_total`` (all, and failed by code) and of the
    bench client's own requests."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    async def snap(self) -> tuple[Counts, Counts, Counts]:
        resp = await self.api.request("apiserver_metrics", "GET", "/metrics")
        text = resp.body.decode(errors="replace") if resp.ok else ""
        if not resp.ok:
            log(f"  !! apiserver /metrics: {resp.status} {resp.message()}")
        return request_counts(text), request_counts(text, failed=True), bench_requests(self.api.metrics)

    @staticmethod
    def delta(a: tuple[Counts, Counts, Counts], b: tuple[Counts, Counts, Counts]) -> tuple[Counts, Counts, Counts]:
        """(apiserver delta, its failed requests' delta, bench client delta)."""
        return counts_delta(a[0], b[0]), counts_delta(a[1], b[1]), counts_delta(a[2], b[2])


class Profiler:
    """py-spy sampling one process for one phase (raw collapsed stacks); a no-op without py-spy."""

    def __init__(self, binary: str | None) -> None:
        self.binary = binary
        self.proc: subprocess.Popen[bytes] | None = None
        self.out: Path | None = None

    @staticmethod
    def find() -> str | None:
        """py-spy next to this interpreter, else on PATH; None when not installed."""
        near = Path(sys.executable).parent / "py-spy"
        return str(near) if near.exists() else shutil.which("py-spy")

    def start(self, pid: int, out: Path) -> None:
        if not self.binary:
            return
        self.out = out
        logf = open(out.with_suffix(".log"), "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [self.binary, "record", "--pid", str(pid), "--nonblocking", "--rate", "50", "--format", "raw",
             "--output", str(out)], stdout=logf, stderr=logf)
        logf.close()

    def stop(self) -> str | None:
        """SIGINT (py-spy writes its file then); the file's path, or None when none was written."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return str(self.out) if self.out and self.out.exists() else None


# --- engines ------------------------------------------------------------------------------------
class HollowEngine:
    name = "hollow"
    label = "bench-engine=hollow"

    def __init__(self, work: Path, tag: str, kubeconfig: str, nodes: int) -> None:
        self.work = work
        self.tag = tag
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
            start_agent, self.kubeconfig, pools, self.work / f"hollow-agent-{self.tag}.log",
            "--max-inflight", "256", "--log-level", "INFO")

    def metrics(self) -> dict[str, float]:
        return self.agent.metrics() if self.agent else {}

    async def stop(self) -> None:
        if self.agent:
            await asyncio.to_thread(self.agent.stop, 20)


class KwokEngine:
    name = "kwok"
    label = "bench-engine=kwok"

    def __init__(self, work: Path, tag: str, kubeconfig: str, nodes: int, binary: Path) -> None:
        self.work = work
        self.tag = tag
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

    def write_config(self) -> Path:
        """One ``--config`` file: the KwokConfiguration, then the stages."""
        config = self.work / "kwok.yaml"
        config.write_text(yaml.safe_dump_all([kwok_configuration(), *kwok_stages(RUN_DURATION_S)]))
        return config

    async def start(self, api: ApiClient) -> None:
        config = self.write_config()
        logf = open(self.work / f"kwok-{self.tag}.log", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [str(self.binary), "--kubeconfig", self.kubeconfig, "--config", str(config),
             "-v=WARN"],  # KWOK logs every lease sync at INFO; do not charge it for logging
            stdout=logf, stderr=logf)
        logf.close()

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

    async def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(self.proc.wait, 20)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


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


async def capture_apiserver_profile(api: ApiClient, seconds: int, out: Path) -> str | None:
    """kube-apiserver's own CPU profile (``/debug/pprof/profile``, on by default) for ``seconds``, saved."""
    resp = await api.request("pprof", "GET", "/debug/pprof/profile", params={"seconds": str(seconds)}, retry=False)
    if not resp.ok:
        log(f"  apiserver profile: HTTP {resp.status} {resp.message()}")
        return None
    out.write_bytes(resp.body)
    return str(out)


def summarise_apiserver_profile(path: str | None) -> dict[str, Any]:
    """The shares of :data:`APISERVER_PROFILE_ROWS` in a saved profile (``go tool pprof``), or why none."""
    return summarise(path, APISERVER_PROFILE_ROWS)


class Run:
    """One engine run on its own control plane: the engine, meters and the phase profiler."""

    def __init__(self, engine: Any, api: ApiClient, info: ClusterInfo, args: argparse.Namespace,
                 profiler: Profiler, work: Path, tag: str) -> None:
        self.engine = engine
        self.api = api
        self.args = args
        self.cpu = CpuMeter({**info.pids, "bench-client": os.getpid()})
        self.counter = ApiCounter(api)
        self.profiler = profiler
        self.work = work
        self.tag = tag
        self.profiles: dict[str, str] = {}

    def profile_start(self, phase: str) -> None:
        """Sample the hollow agent for ``phase`` (KWOK is Go: not sampled)."""
        if self.engine.name == "hollow" and self.profiler.binary:
            self.profiler.start(self.engine.pid, self.work / f"profile-{self.tag}-{phase}.txt")

    def profile_stop(self, phase: str) -> None:
        path = self.profiler.stop()
        if path:
            self.profiles[phase] = path


async def register_phase(run: Run, nodes: NodeTracker) -> dict[str, Any]:
    """(a) start the engine and wait for all nodes Ready (or the cap)."""
    engine, args = run.engine, run.args
    m0 = await run.counter.snap()
    a = run.cpu.snap()
    t0 = time.monotonic()
    await engine.start(run.api)
    run.cpu.add(engine.name, engine.pid)
    a = (a[0], {**a[1], engine.name: 0.0})
    run.profile_start("register")
    complete = await wait_for("all nodes Ready", lambda: len(nodes.ready) >= args.nodes,  # cap counts from t0
                              max(1.0, args.register_cap_s - (time.monotonic() - t0)))
    t_ready = time.monotonic() - t0
    b = run.cpu.snap()
    run.profile_stop("register")
    delta, failed, bench = ApiCounter.delta(m0, await run.counter.snap())
    cpu = CpuMeter.delta(a, b)
    log(f"  {engine.name}: {len(nodes.ready)}/{args.nodes} nodes Ready after {t_ready:.1f}s")
    return {"nodes": args.nodes, "ready": len(nodes.ready), "complete": complete,
            "all_ready_s": round(t_ready, 2) if complete else None, **cpu,
            "engine_cpu_s": cpu["cpu_s"][engine.name],
            "api": {**register_api_figures(delta, bench, args.nodes), "failed": failed}}


async def steady_phase(run: Run, nodes: NodeTracker) -> dict[str, Any]:
    """(b) hold the nodes for ``--steady-s``: engine CPU and RSS, lease ages, NotReady nodes."""
    engine, args = run.engine, run.args
    t_settle = time.monotonic()
    profile_path = None
    if args.apiserver_profile_s > 0:  # in the pause, not the window: profiling costs the apiserver a little
        profile_path = await capture_apiserver_profile(
            run.api, args.apiserver_profile_s, run.work / f"apiserver-{run.tag}-{engine.name}.pprof")
    await asyncio.sleep(max(0.0, args.settle_s - (time.monotonic() - t_settle)))  # late nodes' renewals settle
    nodes.armed = True
    m0 = engine.metrics()
    c0 = await run.counter.snap()
    b = run.cpu.snap()
    run.profile_start("steady")
    rss: list[float] = []
    ages: list[float] = []
    proc = psutil.Process(engine.pid)
    t_end = time.monotonic() + args.steady_s
    next_snapshot = time.monotonic() + min(15, args.steady_s / 2)
    while time.monotonic() < t_end:
        with contextlib.suppress(psutil.Error):
            rss.append(proc.memory_info().rss / 2**20)
        if time.monotonic() >= next_snapshot:
            ages += await lease_ages(run.api, engine.node_names[0].rsplit("-", 1)[0] + "-")
            next_snapshot += 30
        await asyncio.sleep(min(5.0, max(0.05, t_end - time.monotonic())))
    c = run.cpu.snap()
    run.profile_stop("steady")
    delta, failed, _ = ApiCounter.delta(c0, await run.counter.snap())
    m1 = engine.metrics()
    nodes.armed = False
    steady = CpuMeter.delta(b, c)
    out = {
        **steady,
        "engine_cores": steady["cores"][engine.name],
        "engine_rss_mb_max": round(max(rss), 1) if rss else None,
        "engine_rss_mb_median": round(statistics.median(rss), 1) if rss else None,
        "lease_age_s": {"p50": pct(ages, 0.5), "p99": pct(ages, 0.99), "max": pct(ages, 1.0), "samples": len(ages),
                        "expired_over_40s": sum(a > LEASE_DURATION_S for a in ages)},
        "agent_renew_lag_p99_s": histogram_quantile(m0, m1, "hollow_lease_renew_lag_seconds", 0.99),
        "agent_renew_lag_p50_s": histogram_quantile(m0, m1, "hollow_lease_renew_lag_seconds", 0.5),
        "nodes_went_notready": len(nodes.went_notready),
        "nodes_ready_at_end": len(nodes.ready),
        "api": {**steady_api_figures(delta, args.nodes, steady["wall_s"]), "failed": failed},
        "apiserver_ms_per_write": per(1000 * steady["cpu_s"]["kube-apiserver"], mutating(delta))
        if is_num(steady["cpu_s"].get("kube-apiserver")) else None,
        "apiserver_profile": await asyncio.to_thread(summarise_apiserver_profile, profile_path),
    }
    log(f"  {engine.name}: steady {args.steady_s}s: {out['engine_cores']} cores, rss max {out['engine_rss_mb_max']} MB, "
        f"lease age p99 {out['lease_age_s']['p99']}s, NotReady {len(nodes.went_notready)}")
    return out


async def pod_phase(run: Run, ns: str, mode: str, steady_cores: float | None) -> dict[str, Any]:
    """(c) ``--pods`` pods to Running, Succeeded and deleted (grace 0, by the bench), bare or scheduled."""
    engine, api, args, pods = run.engine, run.api, run.args, run.args.pods
    tracker = PodTracker()
    # only this mode's pods: the bare phase's stragglers may still be terminating in the namespace, and
    # counting them made the scheduler phase's figures (Running, rates, CPU per pod) wrong before
    watcher = Watcher(api, f"bench_pods_{mode}", f"/api/v1/namespaces/{ns}/pods", {"labelSelector": f"bench={mode}"},
                      tracker, Metrics(), WatchSettings(page_size=2000))
    wtask = asyncio.ensure_future(watcher.run())
    await watcher.synced.wait()
    phase = f"pods_{mode}"
    m0 = await run.counter.snap()
    a = run.cpu.snap()
    run.profile_start(phase)
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
    b = run.cpu.snap()
    log(f"  {engine.name}/{mode}: {len(tracker.running)} Running after {time.monotonic() - t0:.1f}s")
    all_done = await wait_for("all finished", lambda: len(tracker.done) >= pods,
                              max(1.0, cap + RUN_DURATION_S - (time.monotonic() - t0)))
    c = run.cpu.snap()
    log(f"  {engine.name}/{mode}: {len(tracker.done)} finished after {time.monotonic() - t0:.1f}s ({tracker.failed} failed)")

    # one DELETE per pod, in parallel: a deletecollection runs through the pods one by one
    # (--delete-collection-workers=1) and takes minutes for thousands
    async def delete(i: int) -> None:
        await api.request("delete_pod", "DELETE", f"/api/v1/namespaces/{ns}/pods/{mode}-{i}",
                          body={"gracePeriodSeconds": 0}, retry=False)

    deleting = asyncio.ensure_future(gather_bounded(pods, delete, 256))
    await wait_for("pods gone", lambda: not tracker.exists, args.delete_cap_s)
    deleting.cancel()
    await _reap(deleting)
    t_deleted = time.monotonic() - t0
    d = run.cpu.snap()
    run.profile_stop(phase)
    delta, failed, bench = ApiCounter.delta(m0, await run.counter.snap())
    wtask.cancel()
    await _reap(wtask)
    whole = CpuMeter.delta(a, c)
    engine_cpu = whole["cpu_s"][engine.name]
    starts = sorted(tracker.running.values())
    ends = sorted(tracker.done.values())
    handled = len(tracker.done) + len(tracker.running)  # each pod's two transitions, for CPU per pod
    lifecycles = handled / 2
    marginal = engine_cpu - steady_cores * whole["wall_s"] if is_num(steady_cores) and is_num(engine_cpu) else None
    t_run = (starts[-1] - t0) if starts else None
    t_end = (ends[-1] - t0) if ends else None
    return {
        "pods": pods, "mode": mode, "run_duration_s": RUN_DURATION_S, "cap_s": cap,
        "complete": all_running and all_done,
        "create_s": round(t_created, 2), "create_pods_per_s": round(pods / t_created, 1),
        "running": len(tracker.running), "finished": len(tracker.done), "failed": tracker.failed,
        "last_running_s": round(t_run, 2) if t_run else None, "last_finished_s": round(t_end, 2) if t_end else None,
        "deleted_s": round(t_deleted, 2), "left_undeleted": len(tracker.exists),
        "running_pods_per_s": round(len(starts) / t_run, 1) if t_run else 0.0,
        "finished_pods_per_s": round(len(ends) / max(1e-6, t_end - RUN_DURATION_S), 1) if t_end else 0.0,
        "running_p50_s": round(starts[len(starts) // 2] - t0, 2) if starts else None,
        "engine_cpu_s": engine_cpu,
        "engine_cpu_s_per_1000_pods": round(engine_cpu / (lifecycles / 1000), 3) if handled else None,
        "engine_steady_cores": steady_cores,
        "engine_cpu_s_marginal": round(marginal, 2) if marginal is not None else None,
        "engine_cpu_s_per_1000_pods_marginal": round(marginal / (lifecycles / 1000), 3)
        if handled and marginal is not None else None,
        "control_plane_cores": whole["control_plane_cores"],
        "cpu_to_running": CpuMeter.delta(a, b), "cpu_to_finished": whole, "cpu_delete": CpuMeter.delta(c, d),
        "api": {**pod_api_figures(delta, bench, lifecycles), "failed": failed},
    }


async def run_engine(run: Run) -> dict[str, Any]:
    """Phases (a), (b), (c bare), (c scheduler) for one engine on its own control plane."""
    engine = run.engine
    log(f"== {engine.name} ({run.tag}): {run.args.nodes} nodes")
    nodes = NodeTracker()
    nwatch = Watcher(run.api, f"bench_nodes_{engine.name}", "/api/v1/nodes", {"labelSelector": engine.label}, nodes,
                     Metrics(), WatchSettings(page_size=2000))
    ntask = asyncio.ensure_future(nwatch.run())
    await nwatch.synced.wait()
    result: dict[str, Any] = {}
    try:
        result["register"] = await register_phase(run, nodes)
        result["steady"] = await steady_phase(run, nodes)
        ns = f"bench-{engine.name}"
        await run.api.request("create_ns", "POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
        for mode in MODES:
            result[f"pods_{mode}"] = await pod_phase(run, ns, mode, result["steady"]["engine_cores"])
            if mode == "bare":
                await asyncio.sleep(5)
    finally:
        run.profiler.stop()
        await engine.stop()
        ntask.cancel()
        await _reap(ntask)
    result["profiles"] = run.profiles
    return result


async def run_once(name: str, repeat: int, order: int, args: argparse.Namespace, work: Path,
                   profiler: Profiler) -> dict[str, Any]:
    """One engine run on a fresh control plane (its own cluster dir), brought down afterwards."""
    tag = f"r{repeat}"
    cluster = LocalCluster(work / f"cluster-{tag}-{name}", profile="scale")
    await asyncio.to_thread(cluster.down)  # a leftover of an interrupted run must not be reused
    record: dict[str, Any] = {"engine": name, "repeat": repeat, "order": order, "cluster_dir": str(cluster.dir)}
    log(f"starting a fresh scale-profile control plane in {cluster.dir}")
    info = await asyncio.to_thread(cluster.up, None, 300.0)
    try:
        record["control_plane_flags"] = dict(info.flags)
        api = ApiClient(load_endpoint(info.kubeconfig), ApiSettings(max_inflight=256, request_timeout_s=60), Metrics())
        await api.start()
        try:
            engine: Any = (HollowEngine(work, tag, str(info.kubeconfig), args.nodes) if name == "hollow" else
                           KwokEngine(work, tag, str(info.kubeconfig), args.nodes, Path(args.kwok)))
            record.update(await run_engine(Run(engine, api, info, args, profiler, work, tag)))
        finally:
            await api.close()
    except Exception as exc:  # a failed run is recorded; the other runs still count
        log(f"  !! {name} {tag} failed: {exc!r}")
        record["error"] = repr(exc)
    finally:
        await asyncio.to_thread(cluster.down)
    return record


def run_order(engines: list[str], repeat: int) -> list[str]:
    """Engine order of a repeat (1-based): as given on odd repeats, reversed on even ones."""
    return list(engines) if repeat % 2 == 1 else list(reversed(engines))


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    profiler = Profiler(Profiler.find() if args.profile else None)
    if args.profile and not profiler.binary:
        log("py-spy not installed, no profile")
    runs: list[dict[str, Any]] = []
    engines = args.engines.split(",")
    worst = args.register_cap_s + args.settle_s + args.steady_s + 2 * (args.pod_cap_s + RUN_DURATION_S + args.delete_cap_s) + 45
    log(f"{args.repeats} repeat(s) x {len(engines)} engine(s); at most about {worst / 60:.1f} min per engine run "
        "(caps, plus control plane up/down)")
    for repeat in range(1, args.repeats + 1):
        for order, name in enumerate(run_order(engines, repeat), 1):
            runs.append(await run_once(name, repeat, order, args, work, profiler))
            (work / "partial-runs.json").write_text(json.dumps(runs, indent=1, default=str))
    return runs


# --- report -------------------------------------------------------------------------------------
def figures() -> list[tuple[str, str]]:
    """(path into a run record, label) of every figure summarised over repeats, in table order."""
    rows = [("register.all_ready_s", "(a) all nodes Ready (s)"),
            ("register.ready", "(a) nodes Ready at the end of (a)"),
            ("register.engine_cpu_s", "(a) engine CPU (s)"),
            ("register.control_plane_cores", "(a) control plane (cores)"),
            ("register.api.per_node.mutating_excl_bench", "(a) API writes per node (engine + control plane)"),
            ("steady.engine_cores", "(b) engine CPU (cores)"),
            ("steady.engine_rss_mb_max", "(b) engine RSS max (MB)"),
            ("steady.lease_age_s.p50", "(b) lease age p50 (s)"),
            ("steady.lease_age_s.p99", "(b) lease age p99 (s)"),
            ("steady.agent_renew_lag_p99_s", "(b) agent renew lag p99 (s)"),
            ("steady.nodes_went_notready", "(b) nodes that went NotReady")]
    rows += [(f"steady.cores.{c}", f"(b) {c} (cores)") for c in CONTROL_PLANE]
    rows += [("steady.control_plane_cores", "(b) control plane (cores)"),
             ("steady.api.per_node_per_min.mutating", "(b) API writes per node per minute"),
             ("steady.api.per_node_per_min.lease_writes", "(b) lease writes per node per minute"),
             ("steady.api.per_node_per_min.node_status_writes", "(b) node status writes per node per minute"),
             ("steady.api.per_node_per_min.reads", "(b) API reads per node per minute"),
             ("steady.apiserver_ms_per_write", "(b) kube-apiserver CPU ms per API write")]
    rows += [(f"steady.apiserver_profile.shares.{key}", f"(b) apiserver profile: {label} (% of its CPU)")
             for key, label, _ in APISERVER_PROFILE_ROWS]
    for m in MODES:
        p = f"pods_{m}"
        rows += [(f"{p}.create_pods_per_s", f"(c {m}) create rate (pods/s)"),
                 (f"{p}.running_pods_per_s", f"(c {m}) to Running (pods/s)"),
                 (f"{p}.running", f"(c {m}) pods Running"),
                 (f"{p}.finished", f"(c {m}) pods finished"),
                 (f"{p}.engine_cpu_s_per_1000_pods", f"(c {m}) engine CPU s per 1,000 pods, total"),
                 (f"{p}.engine_cpu_s_per_1000_pods_marginal", f"(c {m}) engine CPU s per 1,000 pods, marginal")]
        rows += [(f"{p}.cpu_to_finished.cores.{c}", f"(c {m}) {c} (cores)") for c in CONTROL_PLANE]
        rows += [(f"{p}.control_plane_cores", f"(c {m}) control plane (cores)"),
                 (f"{p}.api.per_pod.mutating_excl_bench", f"(c {m}) API writes per pod lifecycle"),
                 (f"{p}.api.per_pod.heartbeat_writes", f"(c {m}) heartbeat writes (leases, node status) in the phase, per pod"),
                 (f"{p}.api.per_pod.status_writes", f"(c {m}) pods/status PATCH+PUT per pod"),
                 (f"{p}.api.per_pod.bindings", f"(c {m}) pods/binding POST per pod"),
                 (f"{p}.api.per_pod.deletes", f"(c {m}) pods DELETE per pod (bench's included)")]
    return rows


def ratios(summary: dict[str, dict[str, dict[str, Any]]]) -> dict[str, float | None]:
    """hollow / KWOK of every figure's median (where both have one)."""
    h, k = summary.get("hollow"), summary.get("kwok")
    if not h or not k:
        return {}
    return {path: ratio(h[path]["median"], k[path]["median"]) for path, _ in figures()
            if path in h and path in k and ratio(h[path]["median"], k[path]["median"]) is not None}


def targets(summary: dict[str, dict[str, dict[str, Any]]], nodes: int) -> list[dict[str, Any]]:
    """Issue 13's targets, judged on medians (met None: no KWOK run to compare with)."""
    h, k = summary.get("hollow") or {}, summary.get("kwok") or {}

    def med(side: dict[str, dict[str, Any]], path: str) -> Any:
        return (side.get(path) or {}).get("median")

    rows: list[dict[str, Any]] = []

    def add(target: str, threshold: str, value: str, met: bool | None) -> None:
        rows.append({"target": target, "threshold": threshold, "value": value, "met": met})

    def vs(path: str) -> str:
        return f"{fmt_num(med(h, path))} vs {fmt_num(med(k, path))}" if k else f"{fmt_num(med(h, path))} (no KWOK run)"

    for m in MODES:
        tot, mar = f"pods_{m}.engine_cpu_s_per_1000_pods", f"pods_{m}.engine_cpu_s_per_1000_pods_marginal"
        r, rm = ratio(med(h, tot), med(k, tot)), ratio(med(h, mar), med(k, mar))
        value = f"{vs(tot)} s" + (f" = {r}x" if r is not None else "") + f"; marginal {vs(mar)} s" + \
            (f" = {rm}x" if rm is not None else "")
        add(f"agent CPU per 1,000 pods vs KWOK tuned ({m}), total (marginal shown)", "<= 0.8x KWOK", value,
            None if r is None else r <= 0.8)
    for m in MODES:
        p = f"pods_{m}.running_pods_per_s"
        a, b = med(h, p), med(k, p)
        add(f"pods to Running per second ({m})", ">= KWOK tuned", vs(p), a >= b if is_num(a) and is_num(b) else None)
    for m in MODES:
        p = f"pods_{m}.api.per_pod.mutating_excl_bench"
        a, b = med(h, p), med(k, p)
        add(f"API writes per pod lifecycle ({m})", "<= KWOK tuned", vs(p), a <= b if is_num(a) and is_num(b) else None)
    steady = [("steady.engine_cores", f"steady {nodes} nodes: agent CPU", "<= 0.3 core", lambda v: v <= 0.3),
              ("steady.lease_age_s.p99", f"steady {nodes} nodes: lease age p99", "<= 12 s", lambda v: v <= 12),
              ("steady.nodes_went_notready", f"steady {nodes} nodes: nodes NotReady", "0", lambda v: v == 0),
              ("register.all_ready_s", f"{nodes} nodes Ready", "<= 15 s", lambda v: v <= 15)]
    for path, target, threshold, ok in steady:
        v = med(h, path)
        add(target, threshold, fmt_spread(h.get(path)), bool(ok(v)) if is_num(v) else False)
    return rows


def merge_profiles(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per phase, the hollow agent's py-spy stacks summed over repeats and summarised."""
    phases: dict[str, Any] = {}
    for phase in PHASES:
        stacks: collections.Counter[tuple[str, ...]] = collections.Counter()
        files = [r["profiles"][phase] for r in runs if r["engine"] == "hollow" and phase in (r.get("profiles") or {})]
        for f in files:
            with contextlib.suppress(OSError):  # a path relative to the repo (as reports hold it) or absolute
                stacks.update(parse_raw_profile((ROOT / f).read_text()))
        if stacks:
            phases[phase] = {"runs": len(files), **summarise_profile(stacks)}
    return phases


def api_table(summary: dict[str, dict[str, dict[str, Any]]], runs: list[dict[str, Any]], phase: str) -> list[str]:
    """Markdown rows: median count per request group in ``phase`` for each engine (groups with any writes,
    and reads above 1% of the phase's requests)."""
    path = {"register": "register.api.delta", "steady": "steady.api.delta"}.get(phase, f"{phase}.api.delta")
    engines = list(summary)
    per_engine = {e: [dig(r, path) or {} for r in runs if r["engine"] == e] for e in engines}
    keys = sorted({k for ds in per_engine.values() for d in ds for k in d})
    total = max((sum(d.values()) for ds in per_engine.values() for d in ds), default=0)
    failed = {e: [dig(r, path.replace(".delta", ".failed")) or {} for r in runs if r["engine"] == e] for e in engines}
    rows = []
    for key in keys:
        meds = {e: spread(d.get(key, 0) for d in per_engine[e]) for e in engines}
        if split_request_key(key)[0] not in MUTATING and max(s["max"] or 0 for s in meds.values()) < 0.01 * total:
            continue
        rows.append(f"| {key} | " + " | ".join(fmt_spread(meds[e]) for e in engines) + " |")
        for fkey in sorted({k for fs in failed.values() for f in fs for k in f if k.rsplit(" ", 1)[0] == key}):
            fm = {e: spread(f.get(fkey, 0) for f in failed[e]) for e in engines}
            rows.append(f"| &nbsp;&nbsp;of which code {fkey.rsplit(' ', 1)[1]} | "
                        + " | ".join(fmt_spread(fm[e]) for e in engines) + " |")
    head = [f"| request ({phase}) | " + " | ".join(ENGINE_LABEL.get(e, e) for e in engines) + " |",
            "|---|" + "---|" * len(engines)]
    return head + rows if rows else []


def profile_md(profile: dict[str, Any]) -> list[str]:
    """Section "Where the hollow agent's CPU goes"."""
    lines = ["", "## Where the hollow agent's CPU goes", ""]
    if not profile.get("phases"):
        return [*lines, f"- {profile.get('note', 'no profile')}"]
    lines.append(f"py-spy record --nonblocking --rate 50 on the agent, per phase, samples summed over "
                 f"{profile.get('repeats', '?')} repeat(s); idle samples (waiting in epoll) are not counted, so "
                 "percentages are of the agent's busy samples. Self time in `asyncio.runners:Runner.run` is the "
                 "event loop's own C code (uvloop; py-spy shows no native frames). The inclusive column leaves out "
                 "the trunk (the call chain from the entry point down to where >= 10% of the samples branch off: "
                 "entry point, CLI, event loop). py-spy runs as its "
                 "own process: its CPU is not counted to the agent (it does share the machine's cores).")
    for phase, p in profile["phases"].items():
        lines += ["", f"### {phase} ({p['samples']} samples, {p['runs']} run(s))", "",
                  "Trunk: " + ", ".join(f"`{f}`" for f in p.get("trunk", [])), "",
                  "| # | self % | function (self) | inclusive % | function (inclusive) |", "|---|---|---|---|---|"]
        for i in range(max(len(p["self"]), len(p["inclusive"]))):
            s = p["self"][i] if i < len(p["self"]) else {"pct": "", "function": ""}
            c = p["inclusive"][i] if i < len(p["inclusive"]) else {"pct": "", "function": ""}
            lines.append(f"| {i + 1} | {s['pct']} | `{s['function']}` | {c['pct']} | `{c['function']}` |")
    return lines


def md_header(doc: dict[str, Any]) -> list[str]:
    """Title, command, machine, versions, the work and the run order."""
    prm, runs, m = doc["params"], doc["runs"], doc["machine"]
    order = "; ".join(f"r{r}: " + " then ".join(x["engine"] for x in runs if x["repeat"] == r)
                      for r in sorted({x["repeat"] for x in runs}))
    plane = ("a fresh control plane per engine run" if prm.get("fresh_control_plane_per_run") else
             "one control plane shared by the engines (schema-1 file)")
    return [f"# hollow vs KWOK tuned benchmark ({doc['date']})", "",
            f"Command: `{doc['command']}`  ",
            f"Machine: {m['cpu_model']}, {m['logical_cpus']} logical CPUs, {m['memory_gb']} GB; {m['os']}  ",
            f"Versions: Kubernetes {doc['versions']['kubernetes']}, etcd {doc['versions']['etcd']}, "
            f"KWOK {doc['versions']['kwok']}, Python {m['python']}; control-plane profile "
            f"`{doc['control_plane_profile']}`  ",
            f"Work: {prm['nodes']} nodes x {GPUS} GPUs, {prm['steady_s']} s steady state, {prm['pods']} pods per mode "
            f"(run duration {RUN_DURATION_S} s); {prm.get('repeats', 1)} repeat(s), {plane}, order: {order}"]


def md_figures(doc: dict[str, Any]) -> list[str]:
    """The per-figure table: median (min-max) per engine and the ratio of the medians."""
    summary, rat = doc["summary"], doc.get("ratios") or {}
    engines = list(summary)
    both = "hollow" in summary and "kwok" in summary
    lines = ["", "Cells: median over repeats (min-max). Engine CPU per 1,000 pods *total* = all engine CPU from the "
             "first create to the last pod finished, per 1,000 pod lifecycles handled; *marginal* = that minus the "
             "engine's own steady-state cores (phase b of the same run) x the phase's wall time. Control plane = "
             "kube-apiserver + etcd + kube-controller-manager + kube-scheduler. API figures come from the "
             "apiserver's apiserver_request_total; *API writes per pod lifecycle* = all mutating requests of the pod "
             "phase (create to deleted) except the bench client's own pod POSTs and DELETEs and the nodes' "
             "heartbeats (lease and node status writes, given on the next line), per pod handled.", "",
             "| measure | " + " | ".join(ENGINE_LABEL.get(e, e) for e in engines) + (" | hollow / KWOK |" if both else " |"),
             "|---|" + "---|" * len(engines) + ("---|" if both else "")]
    for fpath, label in figures():
        cells = [fmt_spread(summary[e].get(fpath)) for e in engines]
        if all(c == "n/a" for c in cells):
            continue
        lines.append(f"| {label} | " + " | ".join(cells) + (f" | {fmt_num(rat.get(fpath))} |" if both else " |"))
    return lines


def md_targets(doc: dict[str, Any]) -> list[str]:
    return ["", "## Targets (issue 13, judged on medians)", "", "| target | threshold | hollow (vs KWOK tuned) | met |",
            "|---|---|---|---|"] + [
        f"| {t['target']} | {t['threshold']} | {t['value']} | "
        f"{'n/a' if t['met'] is None else ('yes' if t['met'] else 'NO')} |" for t in doc.get("targets", [])]


def md_api(doc: dict[str, Any]) -> list[str]:
    lines = ["", "## API requests counted by the apiserver (per run, median (min-max))", "",
             "apiserver_request_total has no client label: requests of kube-controller-manager, kube-scheduler and "
             "the bench client are included (the bench's own pod POSTs/DELETEs and, for KWOK, node POSTs are "
             "subtracted in the per-pod and per-node figures above). Writes of every group are listed, with the "
             "ones answered >= 400 by code; reads only above 1% of the phase's requests."]
    for phase in PHASES:
        table = api_table(doc["summary"], doc["runs"], phase)
        if table:
            lines += ["", *table]
    return lines


def md_kwok(doc: dict[str, Any]) -> list[str]:
    kc = doc.get("kwok_configuration") or {}
    if not kc:
        return []
    return ["", "## KWOK configuration (KWOK tuned)", "", "In the same `--config` file as the stages:", "",
            "```yaml", yaml.safe_dump(kc["document"], sort_keys=False).rstrip(), "```", "",
            f"Flags: `{' '.join(kc.get('flags', []))}`; field names checked in {kc.get('fields_checked_in')}.", ""] + [
        f"- {s['options']}: {s['source']}" for s in kc.get("sources", [])]


def md_runs(doc: dict[str, Any]) -> list[str]:
    lines = ["", "## Runs", ""]
    for r in doc["runs"]:
        head = f"- r{r['repeat']} #{r['order']} {r['engine']}"
        if r.get("error"):
            lines.append(f"{head}: FAILED {r['error']}")
            continue
        lines.append(
            f"{head}: Ready {fmt_num(dig(r, 'register.all_ready_s'))} s ({dig(r, 'register.ready')} nodes), steady "
            f"{fmt_num(dig(r, 'steady.engine_cores'))} cores, lease p99 {fmt_num(dig(r, 'steady.lease_age_s.p99'))} s, "
            f"bare {fmt_num(dig(r, 'pods_bare.running_pods_per_s'))} pods/s "
            f"{fmt_num(dig(r, 'pods_bare.engine_cpu_s_per_1000_pods'))} CPU s/1000, scheduler "
            f"{fmt_num(dig(r, 'pods_scheduler.running_pods_per_s'))} pods/s "
            f"{fmt_num(dig(r, 'pods_scheduler.engine_cpu_s_per_1000_pods'))} CPU s/1000")
    return lines


def write_md(doc: dict[str, Any], path: Path) -> None:
    """The Markdown report of a finished ``doc``."""
    lines = md_header(doc) + md_figures(doc) + md_targets(doc) + md_api(doc) + md_kwok(doc)
    lines += profile_md(doc.get("profile") or {}) + md_runs(doc)
    lines += ["", "## Notes", ""] + [f"- {n}" for n in doc.get("notes", [])]
    path.write_text("\n".join(lines) + "\n")


def auto_notes(doc: dict[str, Any]) -> list[str]:
    """Observations derived from the figures (who was the bottleneck), so the reader need not work them out."""
    prm, summary = doc["params"], doc["summary"]
    notes = [
        "Fairness: each engine run had its own fresh scale-profile control plane (new cluster dir, up before, down "
        "after); engines never ran at once; the order alternated over repeats; figures are medians over repeats."
        if prm.get("fresh_control_plane_per_run") else
        "Schema-1 file: one run per engine on one shared control plane (the second engine ran after the first's "
        "nodes and pods were deleted); no repeats.",
        "apiserver_request_total has no client label, so the API counts include kube-controller-manager's and "
        "kube-scheduler's requests (e.g. the scheduler's pods/binding POSTs, node lifecycle updates) as well as the "
        "engine's; the bench client's own pod POSTs and DELETEs (and KWOK's node POSTs in (a)) are subtracted from "
        "the per-pod and per-node write figures.",
        f"Pods are deleted by the bench with gracePeriodSeconds 0 once finished; run duration {RUN_DURATION_S} s for "
        "both engines. The apiserver first marks such a pod deleted, then removes it: an engine that answers the "
        "mark with a DELETE of its own gets 404 (the rows 'of which code 404' under DELETE pods); those requests are "
        "counted as the engine's writes.",
        "For KWOK the bench client creates the Node objects (KWOK only initialises them), so (a) includes that "
        "creation; hollow creates its own nodes.",
    ]
    for name, fig in summary.items():
        age = (fig.get("steady.lease_age_s.p50") or {}).get("median")
        if isinstance(age, int | float) and age > 0:
            rate = prm["nodes"] / (2 * age)
            want = prm["nodes"] / 10
            cp = (fig.get("steady.control_plane_cores") or {}).get("median")
            eng = (fig.get("steady.engine_cores") or {}).get("median")
            notes.append(
                f"{name}: kubelet cadence asks for {want:.0f} lease renewals/s; the median lease age of {age} s means "
                f"about {rate:.0f}/s were accepted, with the control plane at {cp} cores while {name} used {eng} cores: "
                "the control plane or the engine fell behind" if rate < 0.8 * want else
                f"{name}: leases renewed at about {rate:.0f}/s, i.e. at kubelet cadence")
    for r in doc["runs"]:
        for mode in MODES:
            p = r.get(f"pods_{mode}") or {}
            if p and not p.get("complete"):
                notes.append(
                    f"{r['engine']} r{r['repeat']}/{mode}: capped at {p['cap_s']} s after creation began; creating the "
                    f"{p['pods']} pods took {p['create_s']} s ({p['create_pods_per_s']} pods/s accepted by the "
                    f"apiserver); {p['running']} reached Running and {p['finished']} finished by then")
        if r.get("register") and not r["register"].get("complete"):
            notes.append(f"{r['engine']} r{r['repeat']}: {r['register']['ready']} of {prm['nodes']} nodes Ready "
                         f"when (a) was capped at {prm.get('register_cap_s')} s")
    prof = doc.get("profile") or {}
    if prof.get("note"):
        notes.append(prof["note"])
    return notes + list(doc.get("manual_notes", []))


def upgrade_doc(doc: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 file (one run per engine in ``engines``) as schema 2 (``runs``)."""
    if "runs" in doc:
        return doc
    if not isinstance(doc.get("profile"), dict):  # schema 1: "profile" named the control-plane profile
        doc["control_plane_profile"] = doc.pop("profile", "scale")
    runs = [{"engine": n, "repeat": 1, "order": i, **e} for i, (n, e) in enumerate(doc.get("engines", {}).items(), 1)]
    for r in runs:
        for m in MODES:
            p = r.get(f"pods_{m}")
            if p and "control_plane_cores" not in p:
                p["control_plane_cores"] = (p.get("cpu_to_finished") or {}).get("control_plane_cores")
    return {**{k: v for k, v in doc.items() if k != "engines"}, "schema_version": 2, "runs": runs,
            "manual_notes": doc.get("notes", []),
            "params": {"repeats": 1, "fresh_control_plane_per_run": False, **doc["params"]}}


def finish_doc(doc: dict[str, Any]) -> dict[str, Any]:
    """Derive summary, ratios, targets and notes from ``runs`` (also what ``--render`` redoes)."""
    ok = [r for r in doc["runs"] if not r.get("error")]
    doc["summary"] = summarise_runs(ok, (p for p, _ in figures()))
    doc["ratios"] = ratios(doc["summary"])
    doc["targets"] = targets(doc["summary"], doc["params"]["nodes"])
    doc["notes"] = auto_notes(doc)
    return doc


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {"cpu_model": model, "logical_cpus": psutil.cpu_count(),
            "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
            "os": platform.platform(), "python": platform.python_version(), "load_avg_at_start": os.getloadavg()}


def profile_doc(runs: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """The ``profile`` section: merged per-phase summaries, or why there is none."""
    if "hollow" not in args.engines.split(","):
        return {"note": "no hollow run, no profile"}
    if not args.profile:
        return {"note": "profiling turned off (--no-profile)"}
    if not Profiler.find():
        return {"note": "py-spy not installed, no profile"}
    return {"tool": "py-spy record --nonblocking --rate 50 --format raw", "repeats": args.repeats,
            "phases": merge_profiles(runs),
            "note": "py-spy sampled the hollow agent in every phase from a separate process (its CPU is not counted "
                    "to the agent, but it shares the machine); sampling of (a) starts once the agent announced its "
                    "port."}


def build_kwok(binary: Path) -> None:
    """``go install`` KWOK_VERSION from the Go module proxy into ``binary``'s folder."""
    log(f"building KWOK {KWOK_VERSION} from the Go module proxy (a few minutes)")
    binary.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["go", "install", f"sigs.k8s.io/kwok/cmd/kwok@{KWOK_VERSION}"], check=True, cwd="/",
                   env={**os.environ, "GOBIN": str(binary.parent), "GOFLAGS": "-trimpath"})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--pods", type=int, default=5_000)
    p.add_argument("--steady-s", type=int, default=120)
    p.add_argument("--repeats", type=int, default=3, help="runs per engine, order alternating (default 3)")
    p.add_argument("--settle-s", type=int, default=10, help="pause between all-Ready and the steady window")
    p.add_argument("--apiserver-profile-s", type=int, default=20,
                   help="profile kube-apiserver this long (pprof) in the pause before the steady window (0: off)")
    p.add_argument("--register-cap-s", type=int, default=90, help="give up waiting for all nodes Ready after this")
    p.add_argument("--delete-cap-s", type=int, default=35, help="stop waiting for pod deletion after this")
    p.add_argument("--pod-cap-s", type=int, default=240,
                   help="per pod mode, stop waiting for Running this long after creation began (finished: +run duration)")
    p.add_argument("--engines", default="hollow,kwok")
    p.add_argument("--kwok", default=str(Path.home() / ".cache/hollowscale/bin" / f"kwok-{KWOK_VERSION}" / "kwok"))
    p.add_argument("--no-profile", dest="profile", action="store_false", help="do not sample the agent with py-spy")
    p.add_argument("--out", default=str(ROOT / "reports" / "bench"))
    p.add_argument("--name", default="hollow", help="output file stem")
    p.add_argument("--work", default=str(ROOT / ".hollowscale" / "bench-hollow"))
    p.add_argument("--render", metavar="JSON", help="only re-render JSON (+ notes) into JSON and Markdown")
    p.add_argument("--note", action="append", default=[], help="a note to add (kept in the JSON's manual_notes)")
    args = p.parse_args()
    if args.render:
        render(Path(args.render), args.note)
    else:
        bench(args)


def render(path: Path, notes: list[str]) -> None:
    """Re-derive summary, ratios, targets and notes of a report JSON and write it and its Markdown again."""
    doc = upgrade_doc(json.loads(path.read_text()))
    doc["manual_notes"] = list(doc.get("manual_notes", [])) + list(notes)
    files = [f for r in doc["runs"] for f in (r.get("profiles") or {}).values()]
    if files and all((ROOT / f).exists() for f in files):  # py-spy's raw files still there: summarise afresh
        doc["profile"]["phases"] = merge_profiles(doc["runs"])
    finish_doc(doc)
    doc = portable(json.loads(json.dumps(doc, default=str)))  # no machine path in a committed file
    path.write_text(json.dumps(doc, indent=1) + "\n")
    write_md(doc, path.with_suffix(".md"))
    log(f"re-rendered {path} and {path.with_suffix('.md')}")


def prepare_kwok(args: argparse.Namespace) -> dict[str, Any]:
    """Build KWOK if missing, check the KwokConfiguration against its types; the report's section."""
    if not Path(args.kwok).exists():
        build_kwok(Path(args.kwok))
    unknown = check_kwok_fields(kwok_module_dir())
    if unknown:
        raise SystemExit(f"KwokConfiguration options unknown to KWOK {KWOK_VERSION}: {unknown}")
    return {"document": kwok_configuration(), "flags": ["--kubeconfig", "KUBECONFIG", "--config", "kwok.yaml", "-v=WARN"],
            "fields_checked_in": f"sigs.k8s.io/kwok@{KWOK_VERSION}/{KWOK_TYPES}", "sources": KWOK_SOURCES}


def bench(args: argparse.Namespace) -> None:
    """Run every repeat and write ``--out/--name``.json and .md."""
    engines = args.engines.split(",")
    kwok_doc = prepare_kwok(args) if "kwok" in engines else {}
    started = dt.datetime.now(dt.UTC)
    runs = asyncio.run(main_async(args))
    flags: dict[str, list[str]] = next((r["control_plane_flags"] for r in runs if r.get("control_plane_flags")), {})
    for r in runs:
        r.pop("control_plane_flags", None)
    doc: dict[str, Any] = {
        "schema_version": 2, "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python tests/bench/bench_hollow.py " + " ".join(sys.argv[1:]),
        "machine": machine(), "control_plane_profile": "scale",
        "versions": {"kubernetes": KUBERNETES_VERSION, "etcd": ETCD_VERSION, "kwok": KWOK_VERSION},
        "params": {"nodes": args.nodes, "gpus_per_node": GPUS, "steady_s": args.steady_s, "pods": args.pods,
                   "run_duration_s": RUN_DURATION_S, "repeats": args.repeats, "engines": engines,
                   "register_cap_s": args.register_cap_s, "pod_cap_s": args.pod_cap_s,
                   "delete_cap_s": args.delete_cap_s, "settle_s": args.settle_s, "fresh_control_plane_per_run": True},
        "control_plane_flags": flags, "kwok_configuration": kwok_doc,
        "profile": profile_doc(runs, args),
        "runs": runs, "manual_notes": list(args.note),
    }
    finish_doc(doc)
    outdir = Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    doc = portable(json.loads(json.dumps(doc, default=str)))  # paths relative to the repo, ~ or the temp folder
    (outdir / f"{args.name}.json").write_text(json.dumps(doc, indent=1) + "\n")
    write_md(doc, outdir / f"{args.name}.md")
    log(f"wrote {outdir / (args.name + '.json')} and .md")


if __name__ == "__main__":
    main()
