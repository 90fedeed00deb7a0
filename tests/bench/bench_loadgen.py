"""``make bench-loadgen``: how many job creates/s one Locust process sustains, and whether the
timeline collector keeps up with >= 1,000 pod events/s.  Writes ``reports/bench/loadgen.json`` + ``.md``.

Runs against the local control plane with the ``scale`` profile (client limits lifted, so the load
generator, not a throttle, is what is measured).  Phases:

A. Locust, ONE process, headless, constant arrival at ``--rate`` Job creates/s for ``--duration`` s
   (each Job: 1 pod, no node fits, so the Job controller creates pods that stay Pending).  Figures:
   creates/s achieved (Locust's POST count / load time), failures, create latency p50/p99 (Locust),
   Locust's CPU (psutil, process + children) -- target >= 300/s.
B. The timeline collector watches the namespace during A and then through an event storm (the
   namespace is deleted, so the namespace controller deletes every Job and pod at once).  Figures: peak and mean events/s it applied (1 s
   buckets of its receive clock), apply lag (receive -> applied) mean/max, its CPU busy fraction, and
   whether every pod's deletion was seen.  Target: >= 1,000 events/s in some second with apply lag
   p-max < 100 ms.
C. Replay: real pod objects captured from the API fed through the same parse+apply path as fast as
   one thread can: the collector's capacity in events/s.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import orjson
import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from hollowscale.cluster.local import LocalCluster  # noqa: E402
from hollowscale.measure.timeline import Timeline, TimelineCollector  # noqa: E402
from kubecore.config import load_endpoint  # noqa: E402
from kubecore.namespaces import claim_namespace  # noqa: E402
from kubecore.watch import session_for  # noqa: E402
from loadgen.spec import parse_load_spec  # noqa: E402

NS = "bench-loadgen"
RUN_ID = "bench-loadgen"


def spec(rate: float, duration: float, per_user: float) -> dict:
    """The benchmark's load spec, validated by loadgen and written as ``loadspec.json`` is."""
    doc = {
        "name": "bench-loadgen", "namespace": NS, "scheduler_name": "default-scheduler",
        "workloads": [{"name": "bench", "kind": "Job", "share": 1.0, "run_duration": "5s",
                       "exit_codes": {0: 1.0}, "backoff_limit": 0,
                       "roles": [{"name": "w", "replicas": 1, "resources": {"cpu": "100m", "memory": "64Mi"},
                                  "node_selector": {"hollowscale.io/pool": "none"}}]}],
        "arrival": {"curve": "constant", "rate": rate, "duration_s": duration, "per_user_rate": per_user, "seed": 1},
    }
    return parse_load_spec(doc, "bench-loadgen").to_doc()


def cpu_seconds(pid: int) -> float:
    p = psutil.Process(pid)
    total = 0.0
    for q in [p, *p.children(recursive=True)]:
        try:
            t = q.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=400.0, help="offered Job creates/s")
    ap.add_argument("--duration", type=float, default=30.0, help="load seconds")
    ap.add_argument("--per-user-rate", type=float, default=1.0)
    ap.add_argument("--cluster-dir", default=str(ROOT / ".hollowscale" / "cluster-scale"))
    ap.add_argument("--out", default=str(ROOT / "reports" / "bench"))
    args = ap.parse_args()
    out = Path(args.out)
    work = out / "loadgen-work"
    work.mkdir(parents=True, exist_ok=True)

    local = LocalCluster(Path(args.cluster_dir), profile="scale")
    info = local.up(progress=lambda m: print(f"cluster: {m}", flush=True), timeout_s=240)
    started = not info.reused
    try:
        return run(args, out, work, info)
    finally:
        if started:
            local.down()


def run(args: argparse.Namespace, out: Path, work: Path, info) -> int:
    if info.profile != "scale":
        raise SystemExit(f"the cluster in {args.cluster_dir} runs profile {info.profile}, not scale")
    ep = load_endpoint(info.kubeconfig)
    s = session_for(ep, 4)
    s.delete(f"{ep.server}/api/v1/namespaces/{NS}", timeout=120)
    for _ in range(300):  # wait for a leftover namespace to go
        if s.get(f"{ep.server}/api/v1/namespaces/{NS}", timeout=10).status_code == 404:
            break
        time.sleep(1)
    claim_namespace(session_for(ep, 1), ep.server, NS, RUN_ID)
    tl = Timeline()
    buckets: dict[int, int] = {}
    orig_pod, orig_job = tl.apply_pod, tl.apply_job

    def count(fn):
        def wrapped(typ, obj, t):
            k = int(t // 1000)
            buckets[k] = buckets.get(k, 0) + 1
            fn(typ, obj, t)
        return wrapped

    tl.apply_pod, tl.apply_job = count(orig_pod), count(orig_job)  # type: ignore[method-assign]
    col = TimelineCollector(ep, NS, RUN_ID, tl)
    col.start()
    me = psutil.Process()
    my_cpu0 = sum(me.cpu_times()[:2])

    # ---- A: Locust, one process
    spec_file = work / "loadspec.json"
    spec_file.write_text(json.dumps(spec(args.rate, args.duration, args.per_user_rate)))
    argv = [sys.executable, "-m", "locust", "-f", str(ROOT / "loadgen" / "locustfile.py"), "--headless",
            "--kubeconfig", str(info.kubeconfig), "--load-spec", str(spec_file), "--run-id", RUN_ID,
            "--csv", str(work / "locust"), "--only-summary", "--loglevel", "WARNING", "--no-latency-events",
            "--no-create-namespace"]
    log = (work / "locust.log").open("wb")
    t0 = time.time()
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    peak_cpu = 0.0
    c_prev, t_prev = 0.0, time.time()
    samples = []
    while proc.poll() is None:
        time.sleep(1.0)
        try:
            c = cpu_seconds(proc.pid)
        except psutil.Error:
            break
        now = time.time()
        samples.append((c - c_prev) / (now - t_prev))
        c_prev, t_prev = c, now
    proc.wait()
    t1 = time.time()
    locust_cpu = c_prev
    rows = list(csv.DictReader((work / "locust_stats.csv").open()))
    post = next(r for r in rows if r["Type"] == "POST")
    creates = int(post["Request Count"])
    failures = int(post["Failure Count"])
    load_s = args.duration
    creates_per_s = creates / load_s
    peak_cpu = max(samples[1:-1] or samples or [0.0])

    # ---- B: event storm (jobs deleted with orphaned pods, then every pod at once)
    time.sleep(3)
    pods_before = sum(1 for p in tl.pods.values())
    storm0 = time.time()
    # deleting the namespace makes the namespace controller delete every Job and pod as fast as the
    # control plane can: a burst of DELETED/MODIFIED events for the collector
    s.delete(f"{ep.server}/api/v1/namespaces/{NS}", timeout=60)
    api_done = time.time()
    seen_all = None
    # The namespace controller deletes at the control plane's pace (a few hundred pods/s here), so the
    # wait for every DELETED event scales with the number of pods (bounded: 240 s at most).
    wait_deadline = time.time() + min(240.0, max(60.0, pods_before / 100))
    while time.time() < wait_deadline:
        deleted = sum(1 for p in tl.pods.values() if p.deleted_ms is not None)
        if deleted >= pods_before:
            seen_all = time.time()
            break
        time.sleep(0.1)
    time.sleep(1)
    col.stop()
    my_cpu = sum(me.cpu_times()[:2]) - my_cpu0
    st = tl.stats
    sec = sorted(buckets.items())
    storm_secs = [n for k, n in sec if k >= int(storm0)]
    peak_eps = max(n for _, n in sec) if sec else 0

    # ---- C: replay real objects through parse + apply
    # (objects rebuilt from the pods the collector saw, in the shape the API server sent them)
    lines = []
    for i, p in enumerate(list(tl.pods.values())[:4000]):
        body = {"metadata": {"uid": p.uid, "name": p.name, "labels": {"hollowscale.io/workload": p.workload},
                             "ownerReferences": [{"kind": "Job", "uid": p.owner_uid, "controller": True}],
                             "resourceVersion": str(i), "creationTimestamp": p.server_created},
                "spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
                         "nodeSelector": {"hollowscale.io/pool": "none"}, "schedulerName": "default-scheduler"},
                "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}}
        lines.append(orjson.dumps({"type": "ADDED", "object": body}))
    rt = Timeline()
    rep0 = time.perf_counter()
    n = 0
    for _ in range(3):
        rt.pods.clear()
        for ln in lines:
            ev = orjson.loads(ln)
            rt.apply_pod(ev["type"], ev["object"], time.time() * 1000)
            n += 1
    rep_s = time.perf_counter() - rep0
    replay_eps = n / rep_s if rep_s else None

    result = {
        "benchmark": "loadgen",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0]},
        "cluster": {"profile": info.profile, "kubernetes_version": info.kubernetes_version, "reused": info.reused,
                    "client_qps": {k: list(v) for k, v in info.client_qps.items()}},
        "locust": {"processes": 1, "offered_rate": args.rate, "duration_s": load_s, "users": round(args.rate / args.per_user_rate),
                   "creates": creates, "failures": failures, "creates_per_s": round(creates_per_s, 1),
                   "create_p50_ms": float(post["50%"]), "create_p99_ms": float(post["99%"]),
                   "cpu_cores_avg": round(locust_cpu / max(t1 - t0, 1e-9), 3), "cpu_cores_peak_1s": round(peak_cpu, 3),
                   "target_creates_per_s": 300, "met": creates_per_s >= 300 and failures == 0},
        "collector": {"events_total": st.events, "peak_events_per_s": peak_eps,
                      "storm_events_per_s_max": max(storm_secs) if storm_secs else 0,
                      "pods_seen": pods_before, "all_deletions_seen": seen_all is not None,
                      "catch_up_after_api_s": round(seen_all - api_done, 3) if seen_all else None,
                      "apply_lag_ms_mean": round(st.apply_lag_sum_ms / st.events, 3) if st.events else None,
                      "apply_lag_ms_max": round(st.max_apply_lag_ms, 3), "busy_s": round(st.busy_s, 3),
                      "bench_process_cpu_s": round(my_cpu, 2), "watch_restarts": len(st.restarts),
                      "replay_events_per_s_one_thread": round(replay_eps, 0) if replay_eps else None,
                      "target_events_per_s": 1000,
                      "met": peak_eps >= 1000 and st.max_apply_lag_ms < 100 and seen_all is not None},
        "events_per_second": [[k - sec[0][0], v] for k, v in sec] if sec else [],
    }
    (out / "loadgen.json").write_text(json.dumps(result, indent=2) + "\n")
    L, C = result["locust"], result["collector"]
    md = f"""# bench-loadgen ({result['when']}, {result['machine']['cpus']} CPUs, profile `{info.profile}`)

Command: `python tests/bench/bench_loadgen.py --rate {args.rate:g} --duration {args.duration:g} --per-user-rate {args.per_user_rate:g}`

| figure | value | target |
|---|---|---|
| Job creates/s, one Locust process ({L['users']} users, offered {args.rate:g}/s) | **{L['creates_per_s']}** ({L['creates']} in {load_s:g} s, {L['failures']} failures) | >= 300 {'(met)' if L['met'] else '(NOT met)'} |
| create latency p50 / p99 (Locust) | {L['create_p50_ms']} / {L['create_p99_ms']} ms | |
| Locust CPU avg / peak 1 s | {L['cpu_cores_avg']} / {L['cpu_cores_peak_1s']} cores | |
| collector peak events/s applied (1 s buckets) | **{C['peak_events_per_s']}** (storm max {C['storm_events_per_s_max']}) | >= 1,000 {'(met)' if C['met'] else '(NOT met)'} |
| collector apply lag mean / max | {C['apply_lag_ms_mean']} / {C['apply_lag_ms_max']} ms | < 100 ms |
| every pod deletion seen; catch-up after the API call returned | {C['all_deletions_seen']}; {C['catch_up_after_api_s']} s | |
| collector replay capacity, one thread (parse + apply) | {C['replay_events_per_s_one_thread']} events/s | |

Sources: Locust's `locust_stats.csv` (POST rows), psutil CPU times of the Locust process tree, the
collector's own receive timestamps (epoch ms) and apply timings; the whole machine (2 cores) also runs
etcd, kube-apiserver, controller-manager and scheduler, so the apiserver shares the CPU with Locust.
"""
    (out / "loadgen.md").write_text(md)
    print(md)
    return 0 if L["met"] and C["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
