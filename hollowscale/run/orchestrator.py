"""``hollowscale run SCENARIO``: cluster, Prometheus, agents, Locust, measurements, report, teardown.

Phases (each timed into ``summary.json`` ``timings``):

1. cluster: start the local control plane (or reuse a running one; ``existing``/``kind`` use a kubeconfig);
2. agents: one hollow agent per shard with the scenario's pools; Prometheus scrapes the control plane
   and the agents; the timeline collector starts watching;
3. barrier: wait until every node of the pools is Ready;
4. load: Locust headless with the scenario's arrival curve; faults fire at their times;
5. settle: wait for submitted workload objects to finish (or the settle/scenario timeout);
6. gather: timeline figures, PromQL figures, the cross-check, Locust's stats; write the report;
7. teardown: stop Locust, agents (they delete their nodes), Prometheus, the namespace, and the cluster
   if this run started it.

Ctrl-C (SIGINT), SIGTERM or a crashing component jump to gather + teardown: the report is written,
marked incomplete, and no child process is left behind.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import json
import math
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import requests
import yaml

from hollowscale import __version__
from kubecore.config import KubeEndpoint, load_endpoint
from hollowscale.measure.derive import TIMELINE_SOURCES, timeline_measurements
from hollowscale.measure.prom import PrometheusServer, PromQueries, Target, free_port, targets_from_metrics
from hollowscale.measure.timeline import TimelineCollector
from hollowscale.report import finalize, update_latest, write_report
from hollowscale.run.children import Children
from hollowscale.run.progress import Progress
from hollowscale.scenario import Scenario
from kubecore.namespaces import NamespaceClaim, claim_namespace, release_namespace
from kubecore.watch import session_for

REPO = Path(__file__).resolve().parents[2]
LOCUSTFILE = REPO / "loadgen" / "locustfile.py"

EXIT_PASSED, EXIT_SLO_FAILED, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 2, 130


class Interrupted(Exception):
    """SIGINT/SIGTERM during a run."""


class ComponentCrashed(Exception):
    """A child process or a cluster component died during the run."""


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Runner:
    def __init__(self, scenario: Scenario, out_root: Path, keep_cluster: bool = False, quiet: bool = False,
                 run_id: str | None = None, locust_processes: int = 1):
        self.sc = scenario
        self.out_root = Path(out_root)
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.run_id = run_id or f"{stamp}-{scenario.name}"
        self.run_dir = self.out_root / self.run_id
        self.keep_cluster = keep_cluster
        self.locust_processes = locust_processes
        self.progress = Progress(self.run_id, quiet=quiet)
        self.children = Children(self.run_dir / "pids.json")
        self.timings: dict[str, float] = {}
        self.t_phase = time.time()
        self.cluster_info: Any = None
        self.cluster_started = False
        self.local: Any = None
        self.endpoint: KubeEndpoint | None = None
        self.namespace: NamespaceClaim | None = None
        self.kubeconfig: Path | None = None
        self.prom: PrometheusServer | None = None
        self.collector: TimelineCollector | None = None
        self.agent_ports: list[int] = []
        self.agents: list[Any] = []
        self.locust: Any = None
        self.nodes_ready = 0
        self.t_start = time.time()
        self.t_window_start: float | None = None
        self.t_prom_start: float | None = None
        self.cpu_marks: dict[str, tuple[float, float]] = {}
        self.cpu_end: dict[str, tuple[float, float]] = {}
        self.rss_max: dict[str, int] = {}
        self.t_load_start: float | None = None
        self.t_load_end: float | None = None
        self.t_end: float | None = None
        self.faults_log: list[dict[str, Any]] = []
        self.fault_timers: list[threading.Timer] = []
        self.incomplete_reason: str | None = None
        self.errors: list[str] = []

    # ------------------------------------------------------------------------------------ helpers
    def _phase(self, name: str) -> None:
        now = time.time()
        if self.progress.phase not in ("starting",):
            self.timings[self.progress.phase] = round(now - self.t_phase, 3)
        self.t_phase = now
        self.progress.set_phase(name)

    def _check_alive(self) -> None:
        for c in self.agents:
            if not c.alive():
                raise ComponentCrashed(f"hollow agent {c.name} exited with {c.proc.returncode} (log: {c.log})")
        if self.prom is not None and self.prom.proc is not None and self.prom.proc.poll() is not None:
            raise ComponentCrashed(f"prometheus exited with {self.prom.proc.returncode}")
        if self.cluster_info is not None and self.local is not None:
            dead = [s.name for s in self.local.status() if not s.alive]
            if dead:
                raise ComponentCrashed(f"control-plane component(s) died: {', '.join(dead)}")

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(min(0.5, max(0.0, end - time.monotonic())))
            self._check_alive()

    # ------------------------------------------------------------------------------------ phases
    def _cluster(self) -> None:
        c = self.sc.cluster
        if c.backend == "local":
            from hollowscale.cluster.local import LocalCluster

            d = Path(c.dir) if c.dir else REPO / ".hollowscale" / ("cluster" if c.profile == "default" else f"cluster-{c.profile}")
            self.local = LocalCluster(d, profile=c.profile)
            info = self.local.up(progress=self.progress.log, timeout_s=240)
            if info.profile != c.profile:
                raise RuntimeError(f"the running cluster in {d} has profile {info.profile!r}, the scenario asks for "
                                   f"{c.profile!r}; stop it (hollowscale cluster down --dir {d}) or set cluster.dir")
            self.cluster_info = info
            self.cluster_started = not info.reused
            self.kubeconfig = Path(info.kubeconfig)
            if self.cluster_started:
                for name, pid in info.pids.items():
                    self.children.note(f"cluster:{name}", pid)
        else:
            self.kubeconfig = Path(c.kubeconfig or Path.home() / ".kube" / "config").expanduser()
        self.endpoint = load_endpoint(self.kubeconfig)

    def _start_agents(self) -> None:
        pools_file = self.run_dir / "pools.yaml"
        pools_file.write_text(yaml.safe_dump(self.sc.pools_doc(), sort_keys=False))
        n = self.sc.agents.shards
        for i in range(n):
            port = free_port()
            argv = [sys.executable, "-m", "hollow", "run", "--kubeconfig", str(self.kubeconfig), "--pools",
                    str(pools_file), "--shard", f"{i}/{n}", "--metrics-port", str(port), "--metrics-host", "127.0.0.1"]
            if self.sc.agents.delete_nodes_on_exit:
                argv.append("--delete-nodes-on-exit")
            argv += list(self.sc.agents.args)
            child = self.children.start(f"agent-{i}", argv, self.run_dir / "logs" / f"agent-{i}.log", cwd=REPO)
            self.agents.append(child)
            self.agent_ports.append(port)

    def _start_prometheus(self) -> None:
        if not self.sc.measurements.prometheus:
            return
        targets: list[Target] = []
        if self.cluster_info is not None:
            ci = self.cluster_info
            targets = targets_from_metrics(ci.metrics, str(ci.ca_file), str(ci.admin_cert), str(ci.admin_key))
        else:
            ep = self.endpoint
            assert ep is not None
            hostport = ep.server.split("://", 1)[1]
            targets = [Target("apiserver", "https", [hostport], ca_file=ep.ca_file, cert_file=ep.cert_file,
                              key_file=ep.key_file, insecure=ep.insecure)]
        targets.append(Target("hollow-agents", "http", [f"127.0.0.1:{p}" for p in self.agent_ports]))
        self.prom = PrometheusServer(self.run_dir / "prometheus", targets, self.sc.measurements.scrape_interval_s)
        self.prom.start()
        self.t_prom_start = time.time()
        self.children.note("prometheus", self.prom.pid)

    def _barrier(self) -> None:
        assert self.endpoint is not None
        expected: set[str] = set()
        for p in self.sc.pools:
            expected.update(f"{p['name']}-{i}" for i in range(int(p.get("count", 0))))
        s = session_for(self.endpoint, 1)
        deadline = time.monotonic() + self.sc.agents.ready_timeout_s
        while True:
            ready, cont = 0, None
            while True:
                params: dict[str, Any] = {"limit": 500}
                if cont:
                    params["continue"] = cont
                r = s.get(self.endpoint.server + "/api/v1/nodes", params=params, timeout=30)
                r.raise_for_status()
                doc = orjson.loads(r.content)
                for node in doc.get("items") or []:
                    # Ready, and the node lifecycle controller has removed its not-ready/unreachable taints
                    # (it does so at the controller-manager's client QPS: 20/s in the default profile, so
                    # 1,000 fresh nodes stay unschedulable for ~50 s after they report Ready)
                    taints = (node.get("spec") or {}).get("taints") or []
                    if node["metadata"]["name"] in expected and any(
                        c.get("type") == "Ready" and c.get("status") == "True"
                        for c in (node.get("status") or {}).get("conditions") or []
                    ) and not any(str(x.get("key", "")).startswith("node.kubernetes.io/") for x in taints):
                        ready += 1
                cont = (doc.get("metadata") or {}).get("continue")
                if not cont:
                    break
            self.nodes_ready = ready
            self.progress.update(nodes_ready=f"{ready}/{len(expected)}")
            if ready >= len(expected):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"Ready barrier: {ready}/{len(expected)} nodes Ready after "
                                   f"{self.sc.agents.ready_timeout_s:g}s (agent logs in {self.run_dir / 'logs'})")
            self._sleep(2.0)

    def _fire_fault(self, index: int) -> None:
        f = self.sc.faults[index]
        entry: dict[str, Any] = {"type": f.type, "at_s": f.at_s, "fraction": f.fraction, "duration_s": f.duration_s,
                                 "fired_at": _iso(time.time()), "responses": []}
        body = {"fraction": f.fraction, "duration_s": f.duration_s, "seed": f.seed}
        if f.type == "pod-failures":
            body["exit_code"] = f.exit_code
        http = requests.Session()
        http.trust_env = False
        for port in self.agent_ports:
            try:
                r = http.post(f"http://127.0.0.1:{port}/faults/{f.type}", json=body, timeout=10)
                entry["responses"].append({"port": port, "status": r.status_code, "body": r.text[:300]})
            except requests.RequestException as exc:
                entry["responses"].append({"port": port, "error": str(exc)})
        self.faults_log.append(entry)
        self.progress.log(f"fault {f.type} fired: {entry['responses']}")

    def _load(self) -> None:
        spec = self.run_dir / "loadspec.json"
        spec.write_text(json.dumps(self.sc.to_load_spec(), indent=2))
        ldir = self.run_dir / "locust"
        ldir.mkdir(exist_ok=True)
        argv = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--kubeconfig", str(self.kubeconfig),
                "--load-spec", str(spec), "--run-id", self.run_id, "--csv", str(ldir / "locust"),
                "--csv-full-history", "--html", str(ldir / "locust.html"), "--only-summary", "--loglevel", "WARNING",
                "--stop-timeout", "5", "--no-create-namespace"]
        if self.locust_processes > 1:
            argv += ["--processes", str(self.locust_processes)]
        self.t_load_start = time.time()
        self.locust = self.children.start("locust", argv, self.run_dir / "logs" / "locust.log", cwd=REPO)
        self._mark_cpu()
        for i, f in enumerate(self.sc.faults):
            t = threading.Timer(f.at_s, self._fire_fault, args=(i,))
            t.daemon = True
            t.start()
            self.fault_timers.append(t)
        duration = self.sc.arrival.duration_s
        hard_stop = time.monotonic() + duration + 60
        while self.locust.alive():
            self._sleep(1.0)
            self._progress_tick()
            if time.monotonic() > hard_stop:
                self.progress.log("locust did not stop at the end of the curve; stopping it")
                self.locust.stop(grace_s=10, sig=signal.SIGINT)
        self.t_load_end = time.time()
        elapsed = self.t_load_end - self.t_load_start
        if self.locust.proc.returncode not in (0, 1) or elapsed < duration - 5:
            raise ComponentCrashed(f"locust exited with {self.locust.proc.returncode} after {elapsed:.0f}s "
                                   f"of {duration:g}s (log: {self.locust.log})")

    def _cpu_seconds(self, pid: int) -> float | None:
        import psutil

        try:
            p = psutil.Process(pid)
            procs = [p, *p.children(recursive=True)]
            total = 0.0
            for q in procs:
                with contextlib.suppress(psutil.Error):
                    ct = q.cpu_times()
                    total += ct.user + ct.system
            return total
        except psutil.Error:
            return None

    def _mark_cpu(self) -> None:
        for c in [*self.agents, *( [self.locust] if self.locust else [])]:
            v = self._cpu_seconds(c.pid)
            if v is not None:
                self.cpu_marks[c.name] = (time.time(), v)

    def _sample_rss(self) -> None:
        import psutil

        for c in [*self.agents, *([self.locust] if self.locust else [])]:
            try:
                p = psutil.Process(c.pid)
                rss = sum(q.memory_info().rss for q in [p, *p.children(recursive=True)])
            except psutil.Error:
                continue
            self.rss_max[c.name] = max(self.rss_max.get(c.name, 0), rss)

    def _cpu_usage(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, (t0, v0) in self.cpu_marks.items():
            child = next((c for c in [*self.agents, self.locust] if c is not None and c.name == name), None)
            end = self.cpu_end.get(name)
            if end is None and child is not None and child.alive():
                v1 = self._cpu_seconds(child.pid)
                end = (time.time(), v1) if v1 is not None else None
            out[name] = {"cpu_cores_avg": round((end[1] - v0) / max(end[0] - t0, 1e-9), 4) if end else None,
                         "rss_mib_max": round(self.rss_max.get(name, 0) / 2**20, 1) or None}
        return out

    def _progress_tick(self) -> None:
        self._sample_rss()
        if self.locust is not None and self.locust.alive():
            v = self._cpu_seconds(self.locust.pid)
            if v is not None:
                self.cpu_end["locust"] = (time.time(), v)
        assert self.collector is not None
        tl = self.collector.timeline
        c = tl.counts()
        with tl.lock:
            now = time.time() * 1000
            recent = sum(1 for j in tl.jobs.values() if j.created_ms > now - 10_000)
        self.progress.update(nodes_ready=self.nodes_ready, jobs_done=f"{c['jobs_done']}/{c['jobs']}",
                             jobs_failed=c["jobs_failed"], pods_pending=c["pods_pending"],
                             pods_running=c["pods_running"], submit_rate=f"{recent / 10:.1f} objects/s")

    def _settle(self) -> None:
        assert self.collector is not None
        deadline = time.monotonic() + self.sc.measurements.settle_timeout_s
        overall = self.t_start + self.sc.timeout_s
        while time.monotonic() < deadline and time.time() < overall:
            c = self.collector.timeline.counts()
            if c["jobs"] and c["jobs_done"] >= c["jobs"]:
                return
            self._sleep(1.0)
            self._progress_tick()
        c = self.collector.timeline.counts()
        self.errors.append(f"settle timeout: {c['jobs'] - c['jobs_done']} of {c['jobs']} workload objects unfinished")

    # ------------------------------------------------------------------------------------ gather
    def _locust_stats(self) -> dict[str, Any]:
        path = self.run_dir / "locust" / "locust_stats.csv"
        out: dict[str, Any] = {"csv": str(path.relative_to(self.run_dir)) if path.exists() else None, "by_type": {}}
        if not path.exists():
            return out
        with path.open() as fh:
            for row in csv.DictReader(fh):
                typ = row.get("Type") or ""
                if row.get("Name") == "Aggregated":
                    continue
                agg = out["by_type"].setdefault(typ, {"requests": 0, "failures": 0})
                agg["requests"] += int(float(row.get("Request Count") or 0))
                agg["failures"] += int(float(row.get("Failure Count") or 0))
                if typ == "POST":
                    agg.setdefault("p50_ms_by_name", {})[row["Name"]] = _num(row.get("50%"))
                    agg.setdefault("p99_ms_by_name", {})[row["Name"]] = _num(row.get("99%"))
        post = out["by_type"].get("POST", {})
        if self.t_load_start and self.t_load_end:
            out["creates_per_s"] = round(post.get("requests", 0) / max(self.t_load_end - self.t_load_start, 1e-9), 3)
        return out

    def _gather(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
        t_end = self.t_end or time.time()
        t0 = self.t_load_start or self.t_window_start or self.t_start
        sc = self.sc
        summary: dict[str, Any] = {
            "schema_version": 1,
            "run_id": self.run_id,
            "scenario": sc.name,
            "scenario_file": sc.source,
            "description": sc.description,
            "started_at": _iso(self.t_start),
            "load_started_at": _iso(self.t_load_start) if self.t_load_start else None,
            "duration_s": round(t_end - self.t_start, 3),
            "load_duration_s": round((self.t_load_end or t_end) - self.t_load_start, 3) if self.t_load_start else 0.0,
            "complete": self.incomplete_reason is None,
            "incomplete_reason": self.incomplete_reason,
            "errors": self.errors,
            "versions": {"hollowscale": __version__, "python": sys.version.split()[0]},
        }
        ci = self.cluster_info
        summary["cluster"] = {
            "backend": sc.cluster.backend,
            "profile": ci.profile if ci else sc.cluster.profile,
            "kubernetes_version": ci.kubernetes_version if ci else None,
            "etcd_version": getattr(ci, "etcd_version", None),
            "server": self.endpoint.server if self.endpoint else None,
            "nodes_ready": self.nodes_ready,
            "nodes_expected": sc.nodes_total,
            "gpus_total": sc.gpus_total,
            "client_qps": {k: {"qps": v[0], "burst": v[1]} for k, v in (ci.client_qps.items() if ci else [])},
            "flags": ci.flags if ci else {},
            "reused": bool(ci.reused) if ci else None,
            "agents": {"shards": sc.agents.shards, "ports": self.agent_ports},
        }
        summary["load"] = {"curve": sc.arrival.curve, "duration_s": sc.arrival.duration_s,
                           "expected_instances": round(sc.arrival.expected_instances(), 1),
                           "peak_rate": sc.arrival.peak_rate(), "per_user_rate": sc.arrival.per_user_rate,
                           "locust_processes": self.locust_processes, "locust": self._locust_stats()}
        summary["faults"] = self.faults_log
        summary["timings"] = self.timings
        sources: dict[str, Any] = dict(TIMELINE_SOURCES)
        series: dict[str, Any] = {}
        measurements: dict[str, Any] = {}
        if self.collector is not None:
            pods, jobs = self.collector.timeline.snapshot()
            self.collector.timeline.write_csv(self.run_dir)
            tm = timeline_measurements(pods, jobs, sc.gpus_total, t0 * 1000, t_end * 1000, sc.measurements.sample_interval_s)
            measurements.update(tm["measurements"])
            series = tm["series"]
            st = self.collector.timeline.stats
            summary["collector"] = {"events": st.events, "restarts": st.restarts[:20], "restart_count": len(st.restarts),
                                    "max_apply_lag_ms": round(st.max_apply_lag_ms, 3),
                                    "mean_apply_lag_ms": round(st.apply_lag_sum_ms / st.events, 3) if st.events else None,
                                    "busy_s": round(st.busy_s, 3)}
        prom_series = None
        if self.prom is not None and self.prom.proc is not None and self.prom.proc.poll() is None:
            try:
                pq = PromQueries(self.prom.url)
                ws = self.t_window_start or t0
                # API latency covers the run from Prometheus' first scrape (node registration included)
                aws = (self.t_prom_start + 2 * sc.measurements.scrape_interval_s) if self.t_prom_start else ws
                api = pq.api_latency(min(aws, ws), t_end)
                measurements["api_latency_ms"] = api["by_verb"]
                measurements["api_latency_slo_ms"] = api["slo_groups"]
                measurements["scheduler"] = pq.scheduler(ws, t_end)
                measurements["components"] = pq.components(ws, t_end)
                b = pq.bindings(ws, t_end)
                measurements["crosscheck"] = self._crosscheck(b)
                prom_series = pq.api_series(t0, t_end, max(sc.measurements.scrape_interval_s, 1.0))
                summary["prometheus"] = {"url": self.prom.url, "window": [ws, t_end], "targets": self.prom.targets_health(),
                                         "api_by_verb_resource": api["by_verb_resource"]}
                sources["api_latency_ms"] = api["queries"]
                sources["promql"] = pq.log
            except Exception as exc:  # a partial report must still be written
                self.errors.append(f"Prometheus queries failed: {exc.__class__.__name__}: {exc}")
        measurements["harness_processes"] = self._cpu_usage()
        sources["harness_processes"] = ("psutil: CPU seconds (process + children) of each child of the run between the "
                                        "start of the load and the end of the run, divided by that time; peak RSS sampled")
        summary["measurements"] = measurements
        summary["sources"] = sources
        return summary, series, prom_series

    def _crosscheck(self, b: dict[str, Any]) -> dict[str, Any]:
        assert self.collector is not None
        pods, _ = self.collector.timeline.snapshot()
        lo, hi = b["start"] * 1000, b["end"] * 1000
        watch = sum(1 for p in pods if p.scheduled_ms is not None and lo <= p.scheduled_ms <= hi)
        prom = b["bound"]
        window = b["end"] - b["start"]
        tol = self.sc.measurements.crosscheck_tolerance_pct
        out: dict[str, Any] = {"query": b["query"], "window_s": round(window, 3), "watch_bound": watch,
                               "prometheus_bound": prom, "tolerance_pct": tol,
                               "watch_rate_pods_per_s": round(watch / window, 4) if window > 0 else None,
                               "prometheus_rate_pods_per_s": round(prom / window, 4) if prom is not None and window > 0 else None}
        if prom is None:
            out.update(diff_pct=None, agree=None, verdict="no Prometheus data for the binding counter")
        elif prom == 0 and watch == 0:
            out.update(diff_pct=0.0, agree=True, verdict="no bindings in the window (nothing to compare)")
        else:
            diff = abs(watch - prom) / max(prom, 1e-9) * 100.0
            ok = diff <= tol
            out.update(diff_pct=round(diff, 3), agree=ok,
                       verdict=(f"{'agree' if ok else 'DISAGREE'}: watch {watch} vs Prometheus {prom:g} pods bound "
                                f"({diff:.2f}% {'<=' if ok else '>'} {tol:g}%)"))
        return out

    # ------------------------------------------------------------------------------------ teardown
    def _teardown(self) -> None:
        for t in self.fault_timers:
            t.cancel()
        if self.locust is not None:
            self.locust.stop(grace_s=10, sig=signal.SIGINT)
        if self.collector is not None:
            self.collector.stop(timeout_s=8)
        for a in self.agents:  # SIGTERM: each agent deletes its nodes (--delete-nodes-on-exit)
            with contextlib.suppress(ProcessLookupError):
                a.proc.send_signal(signal.SIGTERM)
        for a in self.agents:
            a.stop(grace_s=90)
        if self.prom is not None:
            self.prom.stop()
        if self.endpoint is not None and self.namespace is not None:
            try:
                release_namespace(session_for(self.endpoint, 1), self.endpoint.server, self.namespace)
            except (requests.RequestException, RuntimeError) as exc:
                self.errors.append(f"namespace cleanup failed: {exc}")
        self.children.stop_all(grace_s=10)
        if self.local is not None and self.cluster_started and not self.keep_cluster:
            self.progress.log("stopping the local cluster this run started")
            self.local.down()

    # ------------------------------------------------------------------------------------ main
    def run(self) -> int:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "scenario.json").write_text(json.dumps(self.sc.to_dict(), indent=2, default=str))
        old_int = signal.getsignal(signal.SIGINT)
        old_term = signal.getsignal(signal.SIGTERM)

        def on_signal(signum: int, _frame: Any) -> None:
            raise Interrupted(signal.Signals(signum).name)

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        code = EXIT_INCOMPLETE
        with self.progress:
            try:
                self._phase("cluster")
                self._cluster()
                assert self.endpoint is not None
                self.namespace = claim_namespace(session_for(self.endpoint, 1), self.endpoint.server,
                                                 self.sc.cluster.namespace, self.run_id, log=self.progress.log)
                self._phase("agents")
                self.collector = TimelineCollector(self.endpoint, self.sc.cluster.namespace, self.run_id)
                self.collector.start()
                self._start_agents()
                self._start_prometheus()
                self._phase("ready-barrier")
                self._barrier()
                if self.prom is not None:
                    health = self.prom.wait_scraped(30.0)
                    if not all(h == "up" for h in health.values()):
                        self.errors.append(f"Prometheus targets not all up before the load: {health}")
                self.t_window_start = time.time()
                self._sleep(2 * self.sc.measurements.scrape_interval_s + 0.5)  # a scrape before the load
                self._phase("load")
                self._load()
                self._phase("settle")
                self._settle()
                self.t_end = time.time()
                self._sleep(2 * self.sc.measurements.scrape_interval_s + 0.5)  # a scrape after the end
            except Interrupted as exc:
                self.incomplete_reason = f"interrupted by {exc}"
                code = EXIT_INTERRUPTED
            except ComponentCrashed as exc:
                self.incomplete_reason = f"component crashed: {exc}"
            except Exception as exc:
                self.incomplete_reason = f"{exc.__class__.__name__}: {exc}"
            finally:
                # no second interruption may leave processes behind
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                self._phase("gather")
                self.t_end = self.t_end or time.time()
                summary: dict[str, Any] | None = None
                try:
                    if self.locust is not None:
                        self.locust.stop(grace_s=10, sig=signal.SIGINT)
                    summary, series, prom_series = self._gather()
                    finalize(summary, self.sc.slos)
                except Exception as exc:
                    self.errors.append(f"gather failed: {exc.__class__.__name__}: {exc}")
                    summary = None
                self._phase("teardown")
                try:
                    self._teardown()
                except Exception as exc:
                    self.errors.append(f"teardown: {exc.__class__.__name__}: {exc}")
                self._phase("done")
                if summary is None:
                    summary = finalize({"run_id": self.run_id, "scenario": self.sc.name, "started_at": _iso(self.t_start),
                                        "duration_s": round(time.time() - self.t_start, 3), "complete": False,
                                        "incomplete_reason": self.incomplete_reason or "gather failed",
                                        "cluster": {}, "measurements": {}, "errors": self.errors}, self.sc.slos)
                    series, prom_series = {}, None
                summary["timings"] = self.timings
                summary["errors"] = self.errors
                write_report(self.run_dir, summary, series, prom_series)
                update_latest(self.out_root, self.run_dir)
                signal.signal(signal.SIGINT, old_int)
                signal.signal(signal.SIGTERM, old_term)
        if summary.get("complete") and code != EXIT_INTERRUPTED:
            code = EXIT_PASSED if summary["passed"] else EXIT_SLO_FAILED
        self.summary = summary
        return code


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f
