"""``make bench-gang-profile``: where kube-scheduler's CPU goes under in-tree gang scheduling (issue 35).

On ``scenarios/gang-contention.yaml`` the ``gang`` variant keeps kube-scheduler near one core for 24 hollow
nodes while the ``default`` variant's scheduler barely works.  This bench runs the scenario's shape (its
pools, workloads, arrival rate and seed; the load and the settle shortened by ``--load-s`` and
``--settle-s``) once per variant on a fresh local cluster, and while gangs wait, takes ``--profiles``
CPU profiles of ``--profile-s`` seconds from kube-scheduler's own ``/debug/pprof/profile`` (served on its
secure port, ``--profiling`` being on by default; the cluster's admin certificate is authorised for it),
each between two reads of the scheduler's ``/metrics``.

Per variant it writes the scheduler's cores (``process_cpu_seconds_total`` over the profile windows, and
the run's own ``cpu_cores_avg``), the profile split into exclusive parts by stack (``go tool pprof
-traces``: the pod-group scheduling cycle, the single-pod cycle, their parallel Filter workers, garbage
collection, the informers' event handlers, serving), the top functions by flat and by cumulative share
(``go tool pprof -top`` and ``-top -cum``), and per second the scheduling attempts by result, the queue's
incoming pods by event and the cluster events the scheduler handled, so a retry loop and a requeue storm
caused by the harness's writes can be told apart.

The variants: ``default`` (no gang scheduling), ``gang`` (the scenario's gang variant) and
``gang-nopop``: the gang variant with kube-scheduler's beta gate ``SchedulerPopFromBackoffQ`` off
(a control experiment: the gate lets the scheduler pop a pod from the backoff queue before its backoff
ends when the active queue is empty; the bench adds ``SchedulerPopFromBackoffQ=false`` to the
scheduler's gates for that variant only, and records the command line it ran).

Writes ``reports/bench/gang-profile.json`` and ``.md`` (date, machine, load average at start, versions);
the profiles and metrics stay in ``--work`` (``.hollowscale/bench-gang-profile/<variant>-profiles/``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import machine_facts  # noqa: E402
from portable import portable  # noqa: E402

from hollowscale.cluster import gang  # noqa: E402
from hollowscale.cluster.binaries import go_binary  # noqa: E402
from hollowscale.cluster.local import LocalCluster  # noqa: E402
from hollowscale.run.orchestrator import EXIT_INTERRUPTED, Runner  # noqa: E402
from hollowscale.run.times import RunTimes  # noqa: E402
from hollowscale.scenario import parse_scenario  # noqa: E402
from hollowscale.scenario.batch import VariantSpec  # noqa: E402
from kubecore.promtext import families  # noqa: E402

SCENARIO = ROOT / "scenarios" / "gang-contention.yaml"
#: variant -> (the VariantSpec fields, extra kube-scheduler gates)
VARIANTS: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {
    "default": ({"name": "default"}, ()),
    "gang": ({"name": "gang", "gang_scheduling": True}, ()),
    "gang-nopop": ({"name": "gang-nopop", "gang_scheduling": True}, ("SchedulerPopFromBackoffQ=false",)),
}

#: exclusive parts of a profile: the first whose pattern matches a frame of a sample's stack takes it
PARTS: tuple[tuple[str, str, str], ...] = (
    ("pod_group_cycle", "pod-group scheduling cycle (scheduleOnePodGroup / podGroupCycle)",
     r"\(\*Scheduler\)\.(scheduleOnePodGroup|podGroupCycle)$"),
    ("pod_cycle", "the rest of ScheduleOne (queue pops, single-pod cycles)", r"\(\*Scheduler\)\.ScheduleOne$"),
    ("binding", "binding cycle (bind goroutines)", r"\(\*Scheduler\)\.(bindingCycle|runBindingCycle)"),
    ("parallel_workers", "parallel Filter/Score workers (workqueue.ParallelizeUntil, either cycle)",
     r"workqueue\.ParallelizeUntil\.func1$"),
    ("gc", "garbage collection (background mark and sweep)", r"^runtime\.(gcBgMarkWorker|bgsweep|bgscavenge)$"),
    ("event_handlers", "informers' event handlers (every cluster event the scheduler gets)",
     r"cache\.\(\*processorListener\)\.run$"),
    ("watch_decode", "informers' watches (reflector, decoding)", r"cache\.\(\*Reflector\)|watch\.\(\*StreamWatcher\)"),
    ("serving", "its https server (/metrics, /debug/pprof, authn/authz)", r"^net/http\.|http2\.\(\*serverConn\)"),
)
#: named functions whose inclusive share (``-top -cum``) the report shows; they overlap
CUM_ROWS: tuple[tuple[str, str], ...] = (
    ("ScheduleOne", r"\(\*Scheduler\)\.ScheduleOne$"),
    ("podGroupCycle", r"\(\*Scheduler\)\.podGroupCycle$"),
    ("podGroupSchedulingAlgorithm", r"\(\*Scheduler\)\.podGroupSchedulingAlgorithm$"),
    ("handleSchedulingFailure", r"\(\*Scheduler\)\.handleSchedulingFailure$"),
    ("runWorkloadAwarePreemption", r"\(\*Scheduler\)\.runWorkloadAwarePreemption$"),
    ("RunFilterPluginsWithNominatedPods", r"RunFilterPluginsWithNominatedPods$"),
    ("noderesources Fit.Filter", r"noderesources\.\(\*Fit\)\.Filter$"),
    ("helper.IsExtendedResourceName (regexp)", r"helper\.IsExtendedResourceName$"),
    ("Snapshot.BackupSnapshot", r"\(\*Snapshot\)\.BackupSnapshot$"),
    ("Pod.DeepCopy", r"v1\.\(\*Pod\)\.DeepCopy$"),
    ("runtime.mallocgc", r"^runtime\.mallocgc$"),
    ("runtime.gcBgMarkWorker", r"^runtime\.gcBgMarkWorker$"),
    ("processorListener.run (event handlers)", r"cache\.\(\*processorListener\)\.run$"),
)
#: counters read before and after each profile, as rates per second by their labels
COUNTERS = ("scheduler_schedule_attempts_total", "scheduler_podgroup_schedule_attempts_total",
            "scheduler_queue_incoming_pods_total", "scheduler_event_handling_duration_seconds_count")


# --- the scenario --------------------------------------------------------------------------------------

def scenario_doc(load_s: int, settle_s: int) -> dict[str, Any]:
    """The gang-contention scenario, its load and settle shortened; every other field as it is."""
    doc = yaml.safe_load(SCENARIO.read_text())
    doc["arrival"]["duration_s"] = f"{load_s}s"
    doc.setdefault("measurements", {})["settle_timeout_s"] = f"{settle_s}s"
    return dict(doc)


@contextlib.contextmanager
def scheduler_gates(extra: tuple[str, ...]) -> Iterator[None]:
    """While inside, a gang cluster's kube-scheduler gets ``extra`` gates beside the gang gates."""
    if not extra:
        yield
        return
    original = gang.gates_for

    def gates_for(binaries: dict[str, str]) -> dict[str, list[str]]:
        out = original(binaries)
        out["kube-scheduler"] = [*out["kube-scheduler"], *extra]
        return out

    gang.gates_for = gates_for
    try:
        yield
    finally:
        gang.gates_for = original


# --- profiling while the run goes on -------------------------------------------------------------------

class ProfileWatch(threading.Thread):
    """Once the run's load has gone ``warmup_s``, takes ``count`` CPU profiles of kube-scheduler of
    ``seconds`` each, back to back, each between two reads of its ``/metrics``."""

    def __init__(self, times: RunTimes, cluster_dir: Path, out: Path, count: int, seconds: int, warmup_s: float):
        super().__init__(daemon=True, name="gang-profile-watch")
        self.times, self.cluster_dir, self.out = times, cluster_dir, out
        self.count, self.seconds, self.warmup_s = count, seconds, warmup_s
        self.windows: list[dict[str, Any]] = []
        self.flags: list[str] = []
        self.error: str | None = None
        self.stop_event = threading.Event()

    def run(self) -> None:
        try:
            self._run()
        except Exception as e:  # a failed profile is reported, the run goes on
            self.error = f"{type(e).__name__}: {e}"

    def _run(self) -> None:
        while not self.stop_event.is_set() and self.times.load_start is None:
            self.stop_event.wait(0.5)
        if self.stop_event.is_set() or self.times.load_start is None:
            return
        start = self.times.load_start + self.warmup_s
        while not self.stop_event.is_set() and time.time() < start:
            self.stop_event.wait(0.5)
        info = LocalCluster(self.cluster_dir).info()
        if info is None:
            raise RuntimeError("no running cluster in the run folder")
        self.flags = list(info.flags.get("kube-scheduler", []))
        ctx = info.ssl_context()
        ctx.check_hostname = False  # the scheduler's self-signed serving certificate on 127.0.0.1
        ctx.verify_mode = ssl.CERT_NONE
        metrics_url = info.metrics["scheduler"]
        base = metrics_url.rsplit("/metrics", 1)[0]
        self.out.mkdir(parents=True, exist_ok=True)
        for i in range(self.count):
            if self.stop_event.is_set():
                return
            before, t0 = _get(metrics_url, ctx, 30), time.time()
            prof = _get(f"{base}/debug/pprof/profile?seconds={self.seconds}", ctx, self.seconds + 60)
            after, t1 = _get(metrics_url, ctx, 30), time.time()
            path = self.out / f"cpu-{i}.pprof"
            path.write_bytes(prof)
            (self.out / f"metrics-{i}-before.txt").write_bytes(before)
            (self.out / f"metrics-{i}-after.txt").write_bytes(after)
            self.windows.append({"profile": str(path), "since_load_start_s": round(t0 - self.times.load_start, 1),
                                 "wall_s": round(t1 - t0, 2), "metrics": metric_window(before, after, t1 - t0)})
            print(f"  profile {i + 1}/{self.count}: {t1 - t0:.0f}s", flush=True)

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=self.seconds + 120)


def _get(url: str, ctx: ssl.SSLContext, timeout: float) -> bytes:
    with urllib.request.urlopen(url, context=ctx, timeout=timeout) as resp:
        data: bytes = resp.read()
        return data


# --- reading metrics and profiles ----------------------------------------------------------------------

def _label(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "profile") or "total"


def metric_window(before: bytes, after: bytes, wall_s: float) -> dict[str, Any]:
    """The scheduler's cores and per-second counter rates between two ``/metrics`` reads, and its pending
    pods at the end."""
    b, a = families(before.decode()), families(after.decode())

    def value(fam: dict[str, list[tuple[dict[str, str], float]]], name: str) -> dict[str, float]:
        return {_label(lab): v for lab, v in fam.get(name, [])}

    cpu_b = value(b, "process_cpu_seconds_total").get("total", 0.0)
    cpu_a = value(a, "process_cpu_seconds_total").get("total", 0.0)
    rates: dict[str, dict[str, float]] = {}
    for name in COUNTERS:
        vb, va = value(b, name), value(a, name)
        rates[name] = {k: round((v - vb.get(k, 0.0)) / wall_s, 2) for k, v in sorted(va.items())
                       if v - vb.get(k, 0.0) > 0}
    plugins: dict[str, float] = {}
    sb, sa = b.get("scheduler_plugin_execution_duration_seconds_sum", []), \
        a.get("scheduler_plugin_execution_duration_seconds_sum", [])
    before_sum = {_label(lab): v for lab, v in sb}
    for lab, v in sa:
        d = v - before_sum.get(_label(lab), 0.0)
        if d > 0:
            plugins[_label({k: lab[k] for k in ("extension_point", "plugin") if k in lab})] = \
                plugins.get(_label({k: lab[k] for k in ("extension_point", "plugin") if k in lab}), 0.0) + d
    top_plugins = dict(sorted(((k, round(v / wall_s, 4)) for k, v in plugins.items()), key=lambda kv: -kv[1])[:8])
    return {"cores": round((cpu_a - cpu_b) / wall_s, 3), "per_s": rates,
            "pending_pods_end": value(a, "scheduler_pending_pods"),
            "plugin_seconds_per_s_sampled": top_plugins}


_TOTAL = re.compile(r"Total samples = ([0-9.]+)(ms|s|mins)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "mins": 60.0}


def _pprof(path: str, *flags: str) -> str:
    proc = subprocess.run([go_binary(), "tool", "pprof", *flags, path], capture_output=True, text=True, timeout=180)
    if proc.returncode != 0:
        raise RuntimeError(f"go tool pprof {' '.join(flags)} failed: {proc.stderr.strip()[-300:]}")
    return proc.stdout


def _duration_s(text: str) -> float:
    m = re.search(r"(\d+(?:\.\d+)?)(ms|s|mins)\b", text.strip())
    return float(m.group(1)) * _UNIT_S[m.group(2)] if m else 0.0


def parts_of(traces: str) -> tuple[float, dict[str, float]]:
    """(the profile's CPU seconds, CPU seconds per part of :data:`PARTS` and ``other``) from ``go tool
    pprof -traces``: each sample's stack goes to the first part one of its frames matches."""
    compiled = [(key, re.compile(rx)) for key, _, rx in PARTS]
    out = {key: 0.0 for key, _, _ in PARTS} | {"other": 0.0}
    for block in traces.split("-----------+-------------------------------------------------------")[1:]:
        lines = [ln for ln in block.splitlines() if ln.strip()]
        if not lines:
            continue
        first = lines[0].split(None, 1)
        if len(first) < 2:
            continue
        secs = _duration_s(first[0])
        frames = [first[1].strip()] + [ln.strip() for ln in lines[1:]]
        frames = [f.removesuffix(" (inline)") for f in frames]
        key = next((k for k, rx in compiled if any(rx.search(f) for f in frames)), "other")
        out[key] += secs
    total = sum(out.values())
    return total, {k: round(v, 2) for k, v in out.items()}


def top_rows(top: str, n: int) -> list[dict[str, Any]]:
    """The first ``n`` rows of ``go tool pprof -top`` (flat, flat%, cum, cum%, function)."""
    rows = []
    for line in top.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[1].endswith("%") and parts[4].endswith("%"):
            try:
                rows.append({"flat_pct": float(parts[1].rstrip("%")), "cum_pct": float(parts[4].rstrip("%")),
                             "function": parts[5].strip()})
            except ValueError:
                continue
        if len(rows) >= n:
            break
    return rows


def cum_of(top_cum: str) -> dict[str, float]:
    """Per :data:`CUM_ROWS` name, the largest inclusive % of a function matching it."""
    out = {name: 0.0 for name, _ in CUM_ROWS}
    for row in top_rows(top_cum, 10**6):
        for name, rx in CUM_ROWS:
            if re.search(rx, row["function"]):
                out[name] = max(out[name], row["cum_pct"])
    return out


def analyse(path: str, duration_s: float) -> dict[str, Any]:
    """One profile: its cores, the exclusive parts (% of its samples), top flat and cumulative rows."""
    total, parts = parts_of(_pprof(path, "-traces"))
    flat = top_rows(_pprof(path, "-top", "-nodecount=15"), 15)
    cum_text = _pprof(path, "-top", "-cum", "-nodecount=100000", "-nodefraction=0", "-edgefraction=0")
    return {"file": path, "sample_s": round(total, 2), "cores": round(total / duration_s, 3),
            "parts_pct": {k: round(100 * v / total, 1) if total else 0.0 for k, v in parts.items()},
            "top_flat": flat, "top_cum": top_rows(cum_text, 25), "cum_pct": cum_of(cum_text)}


# --- one variant ---------------------------------------------------------------------------------------

def run_variant(name: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    fields, extra_gates = VARIANTS[name]
    sc = parse_scenario(scenario_doc(args.load_s, args.settle_s), "bench-gang-profile")
    v = sc.with_variant(VariantSpec(**fields))
    run_dir = work / name
    load_avg = [round(x, 2) for x in os.getloadavg()]
    t0 = time.monotonic()
    runner = Runner(v, work, quiet=True, run_id=f"gp-{name}", run_dir=run_dir, point_latest=False)
    watch = ProfileWatch(runner.times, run_dir / "cluster", work / f"{name}-profiles", args.profiles,
                         args.profile_s, args.warmup_s)
    watch.start()
    with scheduler_gates(extra_gates):
        try:
            code = runner.run()
        finally:
            watch.stop()
    if code == EXIT_INTERRUPTED:
        raise SystemExit(EXIT_INTERRUPTED)
    s = runner.summary
    m = s.get("measurements") or {}
    profiles = [analyse(w["profile"], args.profile_s) | {"since_load_start_s": w["since_load_start_s"],
                                                         "metrics": w["metrics"]} for w in watch.windows]
    return {
        "variant": name, "extra_scheduler_gates": list(extra_gates), "exit": code, "wall_s": round(time.monotonic() - t0, 1),
        "load_average_at_start": load_avg, "run_dir": str(run_dir), "profile_error": watch.error,
        "scheduler_flags": watch.flags,
        "scheduler_cores_run_avg": (((m.get("components") or {}).get("by_job") or {}).get("scheduler") or {}).get("cpu_cores_avg"),
        "jobs": m.get("jobs"), "duration_s": s.get("duration_s"), "batch": batch_figures(s),
        "profiles": profiles, "mean": mean_of(profiles),
    }


def batch_figures(summary: dict[str, Any]) -> dict[str, Any]:
    """What the variant's jobs got, so a cheaper scheduler can be checked for placing as well: instances
    completed and unfinished, created -> all members running (p50, p99, count), jobs completed per hour."""
    b = (summary.get("measurements") or {}).get("batch") or {}
    inst = b.get("instances") or {}
    step = (b.get("job_steps_s") or {}).get("created_to_all_running") or {}
    return {"instances": inst.get("total"), "completed": inst.get("completed"), "unfinished": inst.get("unfinished"),
            "created_to_all_running_s": {k: step.get(k) for k in ("p50", "p99", "count")},
            "jobs_completed_per_hour": b.get("jobs_completed_per_hour")}


def mean_of(profiles: list[dict[str, Any]]) -> dict[str, Any]:
    """The profiles' means: cores (metrics and samples), parts, the per-second rates."""
    if not profiles:
        return {}
    n = len(profiles)

    def avg(vals: list[float]) -> float:
        return round(sum(vals) / n, 3)

    rates: dict[str, dict[str, float]] = {}
    for name in COUNTERS:
        keys = sorted({k for p in profiles for k in p["metrics"]["per_s"].get(name, {})})
        rates[name] = {k: avg([p["metrics"]["per_s"].get(name, {}).get(k, 0.0) for p in profiles]) for k in keys}
    return {"cores_metrics": avg([p["metrics"]["cores"] for p in profiles]),
            "cores_samples": avg([p["cores"] for p in profiles]),
            "parts_pct": {k: round(sum(p["parts_pct"][k] for p in profiles) / n, 1) for k in profiles[0]["parts_pct"]},
            "cum_pct": {k: round(sum(p["cum_pct"][k] for p in profiles) / n, 1) for k in profiles[0]["cum_pct"]},
            "per_s": rates}


# --- the report ----------------------------------------------------------------------------------------

def _rate(mean: dict[str, Any], name: str, key: str | None = None) -> float:
    r = (mean.get("per_s") or {}).get(name, {})
    return float(sum(r.values())) if key is None else float(r.get(key, 0.0))


def finding(rows: dict[str, dict[str, Any]], cores: int | None = None) -> list[str]:
    """The finding in plain words, every figure from ``rows`` (``cores``: the machine's)."""
    out: list[str] = []
    g = (rows.get("gang") or {}).get("mean") or {}
    if g:
        pg = g["parts_pct"]
        loop = pg["pod_group_cycle"] + pg["pod_cycle"] + pg["parallel_workers"]
        events = _rate(g, "scheduler_event_handling_duration_seconds_count")
        node_events = sum(v for k, v in g["per_s"]["scheduler_event_handling_duration_seconds_count"].items()
                          if "Node" in k)
        attempts = _rate(g, "scheduler_podgroup_schedule_attempts_total")
        out.append(
            f"gang: kube-scheduler used {g['cores_metrics']} cores while gangs waited. {loop:.1f}% of its CPU samples "
            f"are scheduling cycles ({pg['pod_group_cycle']}% the pod-group cycle, {pg['parallel_workers']}% their "
            f"parallel Filter workers, {pg['pod_cycle']}% the rest of ScheduleOne), {pg['gc']}% garbage collection "
            f"(runtime.mallocgc, allocation inside those cycles, is {g['cum_pct']['runtime.mallocgc']}% inclusive), "
            f"{pg['event_handlers']}% the informers' event handlers, {pg['serving']}% serving and {pg['other']}% other "
            f"(Go runtime)."
            + (f" That is {100 * g['cores_metrics'] / cores:.0f}% of this {cores}-core machine, taken from the other "
               f"components for as long as a gang waits." if cores else ""))
        out.append(
            f"It ran {attempts:.0f} pod-group scheduling attempts per second "
            f"({_rate(g, 'scheduler_podgroup_schedule_attempts_total', 'result=unschedulable'):.0f} unschedulable), "
            f"fed by {_rate(g, 'scheduler_queue_incoming_pods_total', 'event=PopFromBackoffQ,queue=active'):.0f}/s pops "
            f"from the backoff queue and {_rate(g, 'scheduler_queue_incoming_pods_total', 'event=ForceActivate,queue=active'):.0f}/s "
            f"force-activated group members, while it handled {events:.1f} cluster events per second "
            f"({node_events:.1f}/s about nodes)"
            + (": the retries are not driven by what the harness writes (an event could requeue a gang at most once)."
               if attempts > 100 * max(events, 0.01) else
               ": events come at a rate that could drive the retries; see the incoming pods by event."))
    n = (rows.get("gang-nopop") or {}).get("mean") or {}
    if g and n:
        out.append(
            f"gang-nopop (SchedulerPopFromBackoffQ=false, everything else the same): {n['cores_metrics']} cores and "
            f"{_rate(n, 'scheduler_podgroup_schedule_attempts_total'):.0f} pod-group attempts per second, against "
            f"{g['cores_metrics']} and {attempts:.0f} with the gate on (its default)."
            + _jobs_beside(rows["gang"], rows["gang-nopop"]))
    d = (rows.get("default") or {}).get("mean") or {}
    if d:
        out.append(f"default (no gang scheduling): {d['cores_metrics']} cores, "
                   f"{_rate(d, 'scheduler_schedule_attempts_total'):.1f} pod scheduling attempts per second.")
    out.append(
        "Why (kube-scheduler v1.36 source, pkg/scheduler/backend/queue): a pod of a pod group that fails is always "
        "requeued to the backoff queue (determineSchedulingHintForInFlightPod: \"event-based requeueing logic is not "
        "yet implemented for pod group level\"), and with SchedulerPopFromBackoffQ (beta, on by default) an empty "
        "active queue pops the backoff queue at once, before the backoff ends (activeQueue.unlockedPop). "
        "A gang that does not fit is therefore retried in a loop for as long as nothing else is to be scheduled. "
        "Upstream plans a backoff of its own for pod groups (KEP-4671; kubernetes/kubernetes issue 138249).")
    return out


def _jobs_beside(on: dict[str, Any], off: dict[str, Any]) -> str:
    """How the two runs' jobs fared, when both have their batch figures."""
    a, b = on.get("batch") or {}, off.get("batch") or {}
    if not a or not b:
        return ""
    sa, sb = a.get("created_to_all_running_s") or {}, b.get("created_to_all_running_s") or {}
    return (f" Jobs completed (unfinished at the end): {b.get('completed')} ({b.get('unfinished')}) with the gate off, "
            f"{a.get('completed')} ({a.get('unfinished')}) with it on; created -> all members running p50 "
            f"{sb.get('p50')} s and {sa.get('p50')} s, p99 {sb.get('p99')} s and {sa.get('p99')} s (one short run each: "
            f"a sign, not a measure, of what the gate does to placement).")


def write_md(doc: dict[str, Any], path: Path) -> None:
    m = doc["machine"]
    L = ["# Where kube-scheduler's CPU goes under in-tree gang scheduling", "",
         f"{doc['date']}; {m['cores']} cores ({m['cpu_model']}), load average at start {m['load_average_1_5_15']}; "
         f"Kubernetes {doc['versions']['kubernetes']}, etcd {doc['versions']['etcd']}; {m['go']}.", "",
         f"Command: `{doc['command'].strip()}`. Scenario: {doc['scenario']} (its pools, workloads, arrival rate and seed; "
         f"load {doc['load_s']} s, settle {doc['settle_s']} s); {doc['profiles_per_variant']} CPU profiles of "
         f"{doc['profile_s']} s per variant from kube-scheduler's /debug/pprof/profile, the first "
         f"{doc['warmup_s']} s after the load starts. Total wall time {doc['wall_s']} s.", "",
         "## Finding", ""]
    L += [f"- {line}" for line in doc["finding"]]
    L += ["", "## Scheduler CPU per variant", "",
          "| variant | exit | cores (metrics, profile windows) | cores (samples) | cores (whole run) | "
          "pod-group attempts/s | pod attempts/s | cluster events/s | jobs completed / unfinished | "
          "created -> all running p50 / p99 s | wall s |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in doc["variants"]:
        mean = r["mean"] or {}
        b = r.get("batch") or {}
        step = b.get("created_to_all_running_s") or {}
        L.append(f"| {r['variant']} | {r['exit']} | {mean.get('cores_metrics')} | {mean.get('cores_samples')} | "
                 f"{r['scheduler_cores_run_avg']} | {_rate(mean, 'scheduler_podgroup_schedule_attempts_total'):.1f} | "
                 f"{_rate(mean, 'scheduler_schedule_attempts_total'):.1f} | "
                 f"{_rate(mean, 'scheduler_event_handling_duration_seconds_count'):.1f} | "
                 f"{b.get('completed')} / {b.get('unfinished')} | {step.get('p50')} / {step.get('p99')} | {r['wall_s']} |")
    L += ["", "## Where the samples go (exclusive parts, % of the profile's samples, mean of the profiles)", "",
          "| part | " + " | ".join(r["variant"] for r in doc["variants"]) + " |",
          "|---|" + "---|" * len(doc["variants"])]
    labels = {k: label for k, label, _ in PARTS} | {"other": "other (Go runtime scheduler, timers, ...)"}
    for key, label in labels.items():
        L.append(f"| {label} | " + " | ".join(str((r["mean"] or {}).get("parts_pct", {}).get(key, "-"))
                                              for r in doc["variants"]) + " |")
    L += ["", "## Inclusive share of named functions (`go tool pprof -top -cum`, %, mean)", "",
          "| function | " + " | ".join(r["variant"] for r in doc["variants"]) + " |",
          "|---|" + "---|" * len(doc["variants"])]
    for name, _ in CUM_ROWS:
        L.append(f"| {name} | " + " | ".join(str((r["mean"] or {}).get("cum_pct", {}).get(name, "-"))
                                             for r in doc["variants"]) + " |")
    for r in doc["variants"]:
        if not r["profiles"]:
            L += ["", f"## {r['variant']}: no profile ({r['profile_error'] or 'the load ended first'})"]
            continue
        p = r["profiles"][0]
        L += ["", f"## {r['variant']}: top functions of its first profile ({p['since_load_start_s']} s into the load)", "",
              "| flat % | cum % | function |", "|---|---|---|"]
        L += [f"| {row['flat_pct']} | {row['cum_pct']} | `{row['function']}` |" for row in p["top_flat"][:10]]
        L += ["", "Per second over the profile windows (mean): " + "; ".join(
            f"{name.removeprefix('scheduler_')}: " + ", ".join(f"{k} {v}" for k, v in rates.items())
            for name, rates in r["mean"]["per_s"].items() if rates) + "."]
    L += ["", "Profiles and the scheduler's metrics of each window are kept in the run folders named in the JSON."]
    path.write_text("\n".join(L) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", default="gang,gang-nopop,default", help=f"comma-separated, of {', '.join(VARIANTS)}")
    ap.add_argument("--load-s", type=int, default=180, help="seconds of arrivals (the scenario has 240)")
    ap.add_argument("--settle-s", type=int, default=60, help="settle after the load (the scenario has 240)")
    ap.add_argument("--profiles", type=int, default=2, help="CPU profiles per variant, back to back")
    ap.add_argument("--profile-s", type=int, default=40, help="seconds per profile")
    ap.add_argument("--warmup-s", type=float, default=60.0, help="seconds after the load starts before profiling")
    ap.add_argument("--work", type=Path, default=ROOT / ".hollowscale" / "bench-gang-profile")
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "bench" / "gang-profile.json")
    ap.add_argument("--report-only", action="store_true",
                    help="run nothing: write the finding and the Markdown again from the JSON at --out")
    args = ap.parse_args()
    if args.report_only:
        doc = json.loads(args.out.read_text())
        for r in doc["variants"]:  # a JSON from before the batch figures: read them from the run folder if kept
            summary = ROOT / r["run_dir"] / "summary.json"
            if "batch" not in r and summary.is_file():
                r["batch"] = batch_figures(json.loads(summary.read_text()))
        doc["finding"] = finding({r["variant"]: r for r in doc["variants"]}, doc["machine"]["cores"])
        args.out.write_text(json.dumps(doc, indent=1) + "\n")
        write_md(doc, args.out.with_suffix(".md"))
        print("\n".join(doc["finding"]))
        return 0
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        ap.error(f"unknown variant(s) {unknown}; expected of {list(VARIANTS)}")
    if args.warmup_s + args.profiles * args.profile_s > args.load_s + args.settle_s:
        ap.error("the profiles end after the settle: lower --profiles/--profile-s/--warmup-s or raise --load-s")
    facts = machine_facts()
    t0 = time.monotonic()
    args.work.mkdir(parents=True, exist_ok=True)
    work = args.work / time.strftime("%Y%m%d-%H%M%S")  # this bench's run folders and profiles
    rows: dict[str, dict[str, Any]] = {}
    for name in names:
        print(f"variant {name}", flush=True)
        rows[name] = run_variant(name, args, work)
        mean = rows[name]["mean"] or {}
        print(f"  {name}: exit {rows[name]['exit']}, scheduler {mean.get('cores_metrics')} cores over the profiles, "
              f"{rows[name]['scheduler_cores_run_avg']} over the run; {rows[name]['wall_s']} s", flush=True)
    doc = facts | {
        "command": " ".join(["python", "tests/bench/bench_gang_profile.py", *sys.argv[1:]]),
        "scenario": str(SCENARIO.relative_to(ROOT)), "load_s": args.load_s, "settle_s": args.settle_s,
        "profiles_per_variant": args.profiles, "profile_s": args.profile_s, "warmup_s": args.warmup_s,
        "wall_s": round(time.monotonic() - t0, 1),
        "variants": list(rows.values()), "finding": finding(rows, facts["machine"]["cores"]),
    }
    doc = portable(doc)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    write_md(doc, args.out.with_suffix(".md"))
    print("\n".join(doc["finding"]))
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
