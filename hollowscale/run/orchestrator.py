"""``hollowscale run SCENARIO``: cluster, Prometheus, agents, Locust, measurements, report, teardown.

Phases (each timed into ``summary.json`` ``timings``):

1. cluster: start the local control plane (or reuse a running one; ``existing``/``kind`` use a kubeconfig);
2. agents: one hollow agent per shard with the scenario's pools; Prometheus scrapes the control plane
   and the agents; the timeline collector starts watching;
3. barrier: wait until every node of the pools is Ready;
4. load: Locust headless with the scenario's arrival curve; faults fire at their times (agent faults
   through the agents' endpoints, control-plane faults through the local cluster's supervisor);
5. settle: wait for submitted workload objects to finish (or the settle/scenario timeout);
6. gather: timeline figures, PromQL figures, the cross-check, Locust's stats; write the report;
7. teardown: stop Locust, agents (they delete their nodes), Prometheus, the namespace, and the cluster
   if this run started it.

Ctrl-C (SIGINT), SIGTERM or a crashing harness process jump to gather + teardown: the report is
written, marked incomplete, and no child process is left behind.  A control-plane component that
exits is not a crash of the run: the cluster's supervisor restarts it (as the kubelet restarts a static
pod), and a hollow agent shard that exits is started again the same way; both are recorded and the
report says how long scheduling took to recover.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import requests

from hollowscale.batch.objects import BatchObjects, kueue_objects, priority_objects, volcano_objects
from hollowscale.distilljobs.jobs import DistillJobs
from hollowscale.distilljobs.prepare import add_distill_section, build_distill_jobs
from hollowscale.distilljobs.report import DistillJobsSection
from hollowscale.measure.leaders import LeaderWatch
from hollowscale.measure.prom import PrometheusServer, Target, targets_from_metrics
from hollowscale.measure.timeline import TimelineCollector
from hollowscale.report import finalize, update_latest, write_report
from hollowscale.run.agents import Agents
from hollowscale.run.children import Children
from hollowscale.run.loadwatch import CreateFailureWatch
from hollowscale.run.progress import Progress
from hollowscale.run.resources import ResourceSampler
from hollowscale.run.summary import RunFacts, assemble, iso
from hollowscale.scenario import Scenario
from kubecore.config import KubeEndpoint, flatten_kubeconfig, load_endpoint
from kubecore.namespaces import NamespaceClaim, claim_namespace, release_namespace
from kubecore.watch import session_for

REPO = Path(__file__).resolve().parents[2]
LOCUSTFILE = REPO / "loadgen" / "locustfile.py"

EXIT_PASSED, EXIT_SLO_FAILED, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 0, 1, 2, 130


class Interrupted(Exception):
    """SIGINT/SIGTERM during a run."""


class ComponentCrashed(Exception):
    """A child process or a cluster component died during the run."""


class LoadFailed(Exception):
    """The load failed wholesale (every create refused): nothing reached the scheduler."""


class Runner:
    def __init__(self, scenario: Scenario, out_root: Path, keep_cluster: bool = False, quiet: bool = False,
                 run_id: str | None = None, locust_processes: int = 1, run_dir: Path | None = None,
                 point_latest: bool = True):
        self.sc = scenario
        self.out_root = Path(out_root)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.run_id = run_id or f"{stamp}-{scenario.name}"
        self.run_dir = run_dir or self.out_root / self.run_id
        self.point_latest = point_latest
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
        self.claims: list[NamespaceClaim] = []  # every namespace of the load (tenants'), the first is .namespace
        self.batch: BatchObjects | None = None
        self.kubeconfig: Path | None = None
        self.prom: PrometheusServer | None = None
        self.collector: TimelineCollector | None = None
        self.agents: Agents | None = None
        self.locust: Any = None
        self.nodes_ready = 0
        self.t_start = time.time()
        self.t_window_start: float | None = None
        self.t_prom_start: float | None = None
        self.resources = ResourceSampler()
        self.t_load_start: float | None = None
        self.t_load_end: float | None = None
        self.t_end: float | None = None
        self.faults_log: list[dict[str, Any]] = []
        self.leaders: LeaderWatch | None = None
        self.tolerate_failures_until = 0.0  # monotonic: creates may fail while a control-plane fault lasts
        self.fault_timers: list[threading.Timer] = []
        self.incomplete_reason: str | None = None
        self.errors: list[str] = []
        self.distill: DistillJobs | None = None
        self.kind: Any = None  # the kind cluster of a ``backend: kind`` run
        self.incluster: Any = None  # agents.placement in-cluster: hollowscale.incluster.run.InClusterRun

    # ------------------------------------------------------------------------------------ helpers
    def _phase(self, name: str) -> None:
        now = time.time()
        if self.progress.phase not in ("starting",):
            self.timings[self.progress.phase] = round(now - self.t_phase, 3)
        self.t_phase = now
        self.progress.set_phase(name)

    def _check_alive(self) -> None:
        if self.agents is not None:
            if self.t_load_start is None:  # before the load an agent that dies is a failed start
                dead = self.agents.dead()
                if dead:
                    raise ComponentCrashed(dead)
            else:
                self.agents.supervise(self.progress.log)
        if self.prom is not None and self.prom.proc is not None and self.prom.proc.poll() is not None:
            raise ComponentCrashed(f"prometheus exited with {self.prom.proc.returncode}")
        if self.cluster_info is not None and self.local is not None and not self.local.supervisor_alive():
            raise ComponentCrashed(f"the local cluster's supervisor exited (log: {self.local.log_path('supervisor')})")

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
            if self.sc.variant and not c.dir:  # each variant on a fresh cluster of its own
                d = self.run_dir / "cluster"
            self.local = LocalCluster(d, profile=c.profile, gang_scheduling=c.gang_scheduling, kueue=c.kueue,
                                      real_nodes=c.real_nodes)
            info = self.local.up(progress=self.progress.log, timeout_s=240)
            if info.profile != c.profile:
                raise RuntimeError(f"the running cluster in {d} has profile {info.profile!r}, the scenario asks for "
                                   f"{c.profile!r}; stop it (hollowscale cluster down --dir {d}) or set cluster.dir")
            missing = c.real_nodes - len(info.real_nodes)
            if info.reused and missing > 0:  # a running cluster with fewer real nodes than the scenario asks
                self.progress.log(f"adding {missing} real node(s) to the running cluster")
                self.local.add_real_nodes(missing, progress=self.progress.log, timeout_s=180)
                info = self.local.info() or info
            self.cluster_info = info
            self.cluster_started = not info.reused
            self.kubeconfig = Path(info.kubeconfig)
            if self.cluster_started:
                for name, pid in info.pids.items():
                    self.children.note(f"cluster:{name}", pid)
            self.endpoint = load_endpoint(self.kubeconfig)
        elif c.backend == "kind":
            from hollowscale.cluster.kind import KindSettings, ensure_kind_cluster

            self.kind = ensure_kind_cluster(KindSettings(kubeconfig=self.run_dir / "kubeconfig"))
            self.kubeconfig = self.kind.kubeconfig
            self.endpoint = load_endpoint(self.kubeconfig)
        else:  # the scenario's kubeconfig, else $KUBECONFIG (a list is merged), else ~/.kube/config
            path = c.kubeconfig_path()
            if path is None:
                raise RuntimeError(f"backend {c.backend}: no kubeconfig (set cluster.kubeconfig or $KUBECONFIG)")
            self.endpoint = load_endpoint(path)
            self.kubeconfig = self._agent_kubeconfig(path)

    def _agent_kubeconfig(self, path: str) -> Path:
        """One kubeconfig file for the agents and Locust (a $KUBECONFIG list is flattened into the run folder)."""
        if len(path.split(os.pathsep)) == 1:
            return Path(path)
        out = self.run_dir / "kubeconfig"
        flatten_kubeconfig(path, out)
        return out

    def _start_agents(self) -> None:
        assert self.endpoint is not None and self.kubeconfig is not None
        if self.sc.agents.placement == "in-cluster":
            self._start_incluster()
            return
        self.agents = Agents(self.sc, self.kubeconfig, self.run_dir, self.children)
        self.agents.check_ownership(session_for(self.endpoint, 1), self.endpoint.server)
        self.agents.start()

    def _start_incluster(self) -> None:
        """Agents, Locust and Prometheus as pods of ``deploy/hollowscale`` (see hollowscale.incluster.run)."""
        from hollowscale.incluster.run import InClusterRun

        assert self.endpoint is not None and self.kubeconfig is not None
        self.incluster = InClusterRun(self.sc, self.endpoint, self.kubeconfig, self.run_id, self.run_dir,
                                      self.progress.log)
        self.incluster.check()
        self.agents = self.incluster.agents(self.children, self.run_dir)
        self.agents.check_ownership(session_for(self.endpoint, 1), self.endpoint.server)

        def report(ready: int, expected: int) -> None:
            self.progress.update(pods_ready=f"{ready}/{expected}")

        self.incluster.deploy(self._sleep, report)

    def _start_prometheus(self) -> None:
        if not self.sc.measurements.prometheus:
            return
        if self.incluster is not None:  # the run's Prometheus pod (already Ready)
            self.prom = self.incluster.prometheus(self.run_dir / "prometheus")
            self.t_prom_start = time.time()
            return
        targets: list[Target] = []
        if self.cluster_info is not None:
            ci = self.cluster_info
            targets = targets_from_metrics(ci.metrics, str(ci.ca_file), str(ci.admin_cert), str(ci.admin_key),
                                           tokens=getattr(ci, "metrics_tokens", None))
        else:
            ep = self.endpoint
            assert ep is not None
            hostport = ep.server.split("://", 1)[1]
            targets = [Target("apiserver", "https", [hostport], ca_file=ep.ca_file, cert_file=ep.cert_file,
                              key_file=ep.key_file, insecure=ep.insecure)]
        assert self.agents is not None
        targets.append(Target("hollow-agents", "http", [f"127.0.0.1:{p}" for p in self.agents.ports]))
        self.prom = PrometheusServer(self.run_dir / "prometheus", targets, self.sc.measurements.scrape_interval_s)
        self.prom.start()
        self.t_prom_start = time.time()
        self.children.note("prometheus", self.prom.pid)

    def _barrier(self) -> None:
        assert self.endpoint is not None and self.agents is not None

        def report(ready: int, expected: int) -> None:
            self.nodes_ready = ready
            self.progress.update(nodes_ready=f"{ready}/{expected}")

        try:
            self.agents.wait_ready(session_for(self.endpoint, 1), self.endpoint.server, self._sleep, report)
        finally:
            if self.agents.barrier_retries:
                self.errors.append(f"Ready barrier: {len(self.agents.barrier_retries)} transient apiserver error(s), "
                                   f"asked again (first: {self.agents.barrier_retries[0]})")

    def _fire_fault(self, index: int) -> None:
        f = self.sc.faults[index]
        if f.on_control_plane:
            self._fire_component_fault(index)
            return
        if f.on_distill_job:
            self._fire_distill_fault(index)
            return
        entry: dict[str, Any] = {"type": f.type, "at_s": f.at_s, "fraction": f.fraction, "duration_s": f.duration_s,
                                 "fired_at": iso(time.time()), "t": time.time(), "responses": []}
        body = {"fraction": f.fraction, "duration_s": f.duration_s, "seed": f.seed}
        if f.type == "pod-failures":
            body["exit_code"] = f.exit_code
        http = requests.Session()
        http.trust_env = False
        for port in self.agents.ports if self.agents else []:
            try:
                r = http.post(f"http://127.0.0.1:{port}/faults/{f.type}", json=body, timeout=10)
                entry["responses"].append({"port": port, "status": r.status_code, "body": r.text[:300]})
            except requests.RequestException as exc:
                entry["responses"].append({"port": port, "error": str(exc)})
        self.faults_log.append(entry)
        self.progress.log(f"fault {f.type} fired: {entry['responses']}")

    def _fire_distill_fault(self, index: int) -> None:
        """Kill one of a distillation job's teacher pods, or scale its teachers."""
        f = self.sc.faults[index]
        assert f.job is not None
        entry: dict[str, Any] = {"type": f.type, "at_s": f.at_s, "job": f.job, "fired_at": iso(time.time()),
                                 "t": time.time()}
        if self.distill is None:
            entry["error"] = "no distillation jobs in this run"
        elif f.type == "teacher-kill":
            entry.update(self.distill.kill_teacher(f.job))
        else:
            assert f.replicas is not None
            entry.update(self.distill.scale_teachers(f.job, f.replicas))
        if entry.get("error"):
            self.errors.append(f"fault {f.type} {f.job}: {entry['error']}")
        self.faults_log.append(entry)
        self.progress.log(f"fault {f.type} {f.job} fired: {entry.get('pod') or entry.get('replicas')} "
                          f"{entry.get('error') or ''}")

    def _distill_prepare(self) -> None:
        """The distill image on the real nodes, the teacher checkpoint, the jobs' namespace, teachers Ready."""
        assert self.endpoint is not None
        jobs = self.sc.distill_jobs
        if not jobs:
            return
        self._phase("distill-setup")
        self.distill = build_distill_jobs(self.sc, self.cluster_info, self.endpoint, self.run_id, self.claims,
                                          self.progress.log)
        self.distill.create_teachers()
        self.distill.wait_teachers_ready(300.0, self._sleep)
        self.distill.start_monitor()

    def _start_students(self) -> None:
        if self.distill is None:
            return
        for job in self.sc.distill_jobs:
            t = threading.Timer(job.start_at_s, self.distill.create_student, args=(job.name,))
            t.daemon = True
            t.start()
            self.fault_timers.append(t)

    def _fire_component_fault(self, index: int) -> None:
        """Stall, kill or restart a control-plane component through the cluster's supervisor."""
        f = self.sc.faults[index]
        action = f.type.removeprefix("component-")
        now = time.time()
        entry: dict[str, Any] = {"type": f.type, "at_s": f.at_s, "component": f.component,
                                 "duration_s": f.duration_s, "fired_at": iso(now), "t": now}
        # creates fail while the control plane is down: that is the fault, not a load that fails wholesale
        self.tolerate_failures_until = max(self.tolerate_failures_until,
                                           time.monotonic() + (f.duration_s or 0.0) + 120.0)
        try:
            if self.local is None or f.component is None:  # validation allows these on the local backend only
                raise ValueError("no local cluster of this run to inject it into")
            ack = self.local.fault(action, f.component, f.duration_s or 0.0)
            entry["ack"] = ack
            entry["pid"] = ack.get("pid")
            if ack.get("event") == "request-refused":
                self.errors.append(f"fault {f.type} {f.component} refused by the supervisor: {ack.get('why')}")
        except (ValueError, TimeoutError) as exc:
            entry["error"] = str(exc)
            self.errors.append(f"fault {f.type} {f.component} not injected: {exc}")
        self.faults_log.append(entry)
        self.progress.log(f"fault {f.type} {f.component} fired: {entry.get('ack', entry.get('error'))}")

    def _start_timers(self) -> None:
        self._start_students()
        for i, f in enumerate(self.sc.faults):
            t = threading.Timer(f.at_s, self._fire_fault, args=(i,))
            t.daemon = True
            t.start()
            self.fault_timers.append(t)

    def _load_incluster(self, ldir: Path) -> None:
        """The load through the Locust master pod's web API; its stats files copied into ``ldir``."""
        assert self.incluster is not None
        master = self.incluster.locust()
        self.progress.log(f"locust master: {self.incluster.start_load(self._sleep)}")
        self.t_load_start = time.time()
        self.locust = master
        watch = CreateFailureWatch(ldir / "locust", self.sc.measurements.abort_after_failed_creates)
        self._start_timers()
        duration = self.sc.arrival.duration_s
        hard_stop = time.monotonic() + duration + 60
        running_seen, state = False, "unknown"
        live = ("locust_stats.csv", "locust_failures.csv")
        while True:
            self._sleep(1.0)
            self._progress_tick()
            state = master.state()
            running_seen = running_seen or state in ("spawning", "running")
            master.save_files(ldir, only=live)
            failed = watch.poll()
            if failed and time.monotonic() < self.tolerate_failures_until:
                failed = None
            if failed:
                master.stop()
                self.t_load_end = time.time()
                raise LoadFailed(failed)
            if running_seen and state == "stopped":
                break
            if time.monotonic() > hard_stop:
                self.progress.log("locust did not stop at the end of the curve; stopping it")
                master.stop()
                break
        self.t_load_end = time.time()
        master.wait_final_stats(self._sleep)  # the workers' last reports reach the master after it stopped
        master.save_files(ldir)
        elapsed = self.t_load_end - self.t_load_start
        if elapsed < duration - 5:
            raise ComponentCrashed(f"the Locust master pod ended the load after {elapsed:.0f}s of {duration:g}s "
                                   f"(state {state})")

    def _load(self) -> None:
        spec = self.run_dir / "loadspec.json"
        spec.write_text(json.dumps(self.sc.load.to_doc(), indent=2))
        ldir = self.run_dir / "locust"
        ldir.mkdir(exist_ok=True)
        if self.incluster is not None:
            self._load_incluster(ldir)
            return
        argv = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--kubeconfig", str(self.kubeconfig),
                "--load-spec", str(spec), "--run-id", self.run_id, "--csv", str(ldir / "locust"),
                "--csv-full-history", "--html", str(ldir / "locust.html"), "--only-summary", "--loglevel", "WARNING",
                "--stop-timeout", "5", "--no-create-namespace"]
        if self.locust_processes > 1:
            argv += ["--processes", str(self.locust_processes)]
        self.t_load_start = time.time()
        self.locust = self.children.start("locust", argv, self.run_dir / "logs" / "locust.log", cwd=REPO)
        self.resources.mark(self._harness_pids())
        watch = CreateFailureWatch(ldir / "locust", self.sc.measurements.abort_after_failed_creates)
        self._start_timers()
        duration = self.sc.arrival.duration_s
        hard_stop = time.monotonic() + duration + 60
        while self.locust.alive():
            self._sleep(1.0)
            self._progress_tick()
            failed = watch.poll()
            if failed and time.monotonic() < self.tolerate_failures_until:
                failed = None
            if failed:
                self.locust.stop(grace_s=10, sig=signal.SIGINT)
                self.t_load_end = time.time()
                raise LoadFailed(failed)
            if time.monotonic() > hard_stop:
                self.progress.log("locust did not stop at the end of the curve; stopping it")
                self.locust.stop(grace_s=10, sig=signal.SIGINT)
        self.t_load_end = time.time()
        elapsed = self.t_load_end - self.t_load_start
        if self.locust.proc.returncode not in (0, 1) or elapsed < duration - 5:
            raise ComponentCrashed(f"locust exited with {self.locust.proc.returncode} after {elapsed:.0f}s "
                                   f"of {duration:g}s (log: {self.locust.log})")

    def _stop_locust(self) -> None:
        if self.incluster is not None:  # the master pod: stop the curve (its stats stay readable)
            self.locust.stop()
        else:
            self.locust.stop(grace_s=10, sig=signal.SIGINT)

    def _harness_pids(self) -> dict[str, int]:
        pids = self.agents.pids() if self.agents is not None else {}
        if self.incluster is None and self.locust is not None and self.locust.alive():
            pids["locust"] = self.locust.pid
        return pids

    def _progress_tick(self) -> None:
        self.resources.sample(self._harness_pids())
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
            if c["jobs"] and c["jobs_done"] >= c["jobs"] and (self.distill is None or self.distill.students_done()):
                return
            self._sleep(1.0)
            self._progress_tick()
        c = self.collector.timeline.counts()
        self.errors.append(f"settle timeout: {c['jobs'] - c['jobs_done']} of {c['jobs']} workload objects unfinished")

    # ------------------------------------------------------------------------------------ gather
    def _gather(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
        prom_alive = self.prom is not None and self.prom.proc is not None and self.prom.proc.poll() is None
        if self.incluster is not None:  # a pod, not our process: alive until the teardown
            prom_alive = self.prom is not None
        facts = RunFacts(
            scenario=self.sc, run_id=self.run_id, run_dir=self.run_dir, t_start=self.t_start,
            t_end=self.t_end or time.time(), t_load_start=self.t_load_start, t_load_end=self.t_load_end,
            t_window_start=self.t_window_start, t_prom_start=self.t_prom_start,
            incomplete_reason=self.incomplete_reason, errors=self.errors, cluster_info=self.cluster_info,
            server=self.endpoint.server if self.endpoint else None, nodes_ready=self.nodes_ready,
            agent_ports=self.agents.ports if self.agents else [], locust_processes=self.locust_processes,
            agent_restarts=self.agents.restarts if self.agents else [],
            leaders=self.leaders.report(self.t_load_start or self.t_start) if self.leaders else None,
            component_events=self.local.events() if self.local is not None and self.cluster_info is not None else [],
            audit_log=self.local.audit_log_path if self.local is not None and self.cluster_info is not None else None,
            faults=self.faults_log, timings=self.timings,
            namespace={"name": self.namespace.name, "created_by_run": self.namespace.created,
                       "all": [{"name": c.name, "created_by_run": c.created} for c in self.claims]}
            if self.namespace else None,
            collector=self.collector, prometheus_url=self.prom.url if prom_alive and self.prom else None,
            prometheus_targets=self.prom.targets_health() if prom_alive and self.prom else {},
            harness=self.resources.usage(self._harness_pids()),
            incluster=self.incluster.section() if self.incluster is not None else None,
        )
        summary, series, prom_series = assemble(facts)
        if self.distill is not None:
            add_distill_section(summary, self.distill, self.t_load_start or self.t_start)
        return summary, series, prom_series

    # ------------------------------------------------------------------------------------ teardown
    def _teardown(self) -> None:
        for t in self.fault_timers:
            t.cancel()
        if self.locust is not None:
            self._stop_locust()
        if self.collector is not None:
            self.collector.stop(timeout_s=8)
        if self.leaders is not None:
            self.leaders.stop()
        if self.agents is not None:  # SIGTERM: each agent deletes its nodes (--delete-nodes-on-exit)
            self.agents.stop(grace_s=90)
        if self.incluster is not None:  # deleting the pods stops the agents (they delete their nodes)
            self.errors += self.incluster.teardown(logs=self.run_dir / "logs")
        if self.prom is not None:
            self.prom.stop()
        if self.endpoint is not None:
            for claim in reversed(self.claims):
                try:
                    release_namespace(session_for(self.endpoint, 1), self.endpoint.server, claim)
                except (requests.RequestException, RuntimeError) as exc:
                    self.errors.append(f"namespace cleanup failed ({claim.name}): {exc}")
        if self.distill is not None:  # before the namespaces: a namespace we did not create keeps its other objects
            self.errors += self.distill.delete_all()
        if self.batch is not None:
            self.errors += self.batch.delete_all()
        self.children.stop_all(grace_s=10)
        if self.local is not None and self.cluster_started and not self.keep_cluster:
            self.progress.log("stopping the local cluster this run started")
            self.local.down()
        if self.kind is not None and self.kind.created and not self.keep_cluster:
            from hollowscale.cluster.kind import delete_kind_cluster

            self.progress.log(f"deleting the kind cluster {self.kind.name} this run created")
            delete_kind_cluster(self.kind)

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
                for ns in self.sc.namespaces:
                    self.claims.append(claim_namespace(session_for(self.endpoint, 1), self.endpoint.server, ns,
                                                       self.run_id, log=self.progress.log))
                self.namespace = self.claims[0]
                self._distill_prepare()
                self.batch = BatchObjects(session_for(self.endpoint, 1), self.endpoint.server, self.run_id)
                self.batch.create(priority_objects(self.sc, self.run_id) + kueue_objects(self.sc, self.run_id)
                                  + volcano_objects(self.sc, self.run_id))
                self._phase("agents")
                namespaces = self.sc.namespaces
                self.collector = TimelineCollector(self.endpoint, namespaces[0] if len(namespaces) == 1
                                                   else list(namespaces), self.run_id)
                self.collector.start()
                self.leaders = LeaderWatch(self.endpoint)
                self.leaders.start()
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
            except LoadFailed as exc:
                self.incomplete_reason = str(exc)
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
                        self._stop_locust()
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
                    summary = finalize({"run_id": self.run_id, "scenario": self.sc.name, "started_at": iso(self.t_start),
                                        "duration_s": round(time.time() - self.t_start, 3), "complete": False,
                                        "incomplete_reason": self.incomplete_reason or "gather failed",
                                        "cluster": {}, "measurements": {}, "errors": self.errors}, self.sc.slos)
                    series, prom_series = {}, None
                summary["timings"] = self.timings
                summary["errors"] = self.errors
                if self.incluster is not None:  # the teardown's figures came after the report was assembled
                    summary["incluster"] = self.incluster.section()
                write_report(self.run_dir, summary, series, prom_series, sections=(DistillJobsSection(),))
                if self.point_latest:
                    update_latest(self.out_root, self.run_dir)
                signal.signal(signal.SIGINT, old_int)
                signal.signal(signal.SIGTERM, old_term)
        if summary.get("complete") and code != EXIT_INTERRUPTED:
            code = EXIT_PASSED if summary["passed"] else EXIT_SLO_FAILED
        self.summary = summary
        return code

