"""``hollowscale run SCENARIO``: the phases of a run, in order, and its teardown.

The run composes two choices and its features, each behind an interface, and reads as its phases:

1. cluster: the scenario's backend (:mod:`hollowscale.backends`: local, kind, existing) brings the
   cluster up or connects; the load's namespaces are claimed; the features prepare (batch objects,
   distillation teachers: :mod:`hollowscale.run.features`);
2. agents: the timeline collector and the leader watch start; the placement
   (:mod:`hollowscale.placements`: processes or pods in the cluster) starts the hollow agents and
   Prometheus, which scrapes the control plane and the agents;
3. ready-barrier: every node of the pools Ready (:mod:`hollowscale.placements.nodes`);
4. load: the placement's Locust follows the arrival curve; faults and the features' events fire at
   their times (:mod:`hollowscale.run.faults`);
5. settle: the submitted workload objects finish (or the settle/scenario timeout);
6. gather: the figures (:mod:`hollowscale.run.summary`), the SLO verdicts, the report;
7. teardown: Locust, collectors, the placement (each agent deletes its nodes), namespaces, the
   features' objects, child processes, and the cluster if this run made it.

Ctrl-C (SIGINT), SIGTERM or a crashing harness process jump to gather + teardown: the report is
written, marked incomplete, and no child process is left behind.  A control-plane component that
exits is not a crash of the run: the cluster's supervisor restarts it (as the kubelet restarts a static
pod), and a hollow agent shard that exits is started again the same way; both are recorded and the
report says how long scheduling took to recover.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from types import FrameType
from typing import Any

import requests

from hollowscale.backends import BackendSettings, ClusterAccess, ClusterFacts, backend_for
from hollowscale.measure.leaders import LeaderWatch
from hollowscale.measure.timeline import TimelineCollector
from hollowscale.paths import fresh_dir
from hollowscale.placements import LoadDriver, MetricsServer, Placement, PlacementSettings, placement_for
from hollowscale.placements.children import Children
from hollowscale.placements.nodes import ReadyBarrier, check_ownership
from hollowscale.report import EXIT_CODES, finalize, state_of, update_latest, write_report
from hollowscale.run.faults import Faults
from hollowscale.run.features import features_for, hooks_for
from hollowscale.run.loadwatch import CreateFailureWatch
from hollowscale.run.progress import Progress
from hollowscale.run.resources import ResourceSampler
from hollowscale.run.schedule import LoadSchedule
from hollowscale.run.summary import RunFacts, assemble
from hollowscale.run.times import RunTimes, SettleWindow
from hollowscale.scenario import Scenario
from hollowscale.timestamps import iso
from kubecore.namespaces import NamespaceClaim, claim_namespace, release_namespace
from kubecore.watch import session_for

EXIT_PASSED, EXIT_SLO_FAILED, EXIT_INCOMPLETE, EXIT_UNFINISHED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130  # EXIT_CODES


class Interrupted(Exception):
    """SIGINT/SIGTERM during a run."""


class ComponentCrashed(Exception):
    """A child process or a cluster component died during the run."""


class LoadFailed(Exception):
    """The load failed wholesale (every create refused): nothing reached the scheduler."""


class Runner:
    """One run of a scenario: its phases (:meth:`run`), what it observed, its report in ``run_dir``."""

    def __init__(self, scenario: Scenario, out_root: Path, keep_cluster: bool = False, quiet: bool = False,
                 run_id: str | None = None, locust_processes: int = 1, run_dir: Path | None = None,
                 point_latest: bool = True):
        self.sc = scenario
        self.out_root = Path(out_root)
        stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{scenario.name}"  # a new folder even beside a run of this second
        self.run_dir = run_dir or (self.out_root / run_id if run_id else fresh_dir(self.out_root, stamp))
        self.run_id = run_id or self.run_dir.name
        self.point_latest = point_latest
        self.locust_processes = locust_processes
        self.progress = Progress(self.run_id, quiet=quiet)
        self.children = Children(self.run_dir / "pids.json")
        self.errors: list[str] = []
        self.timings: dict[str, float] = {}
        self.t_phase = time.time()
        self.times = RunTimes(start=self.t_phase)
        self.incomplete_reason: str | None = None
        self.summary: dict[str, Any] = {}
        # the two choices and the features, composed once
        self.cluster = backend_for(BackendSettings(scenario, self.run_dir, keep_cluster, self.progress.log))
        self.hooks = hooks_for(features_for(scenario, self.run_id, self.progress.log, self.errors, self._sleep,
                                            self._phase))
        self.access: ClusterAccess | None = None
        self.placement: Placement | None = None
        self.prom: MetricsServer | None = None
        self.locust: LoadDriver | None = None
        # what the run watches and keeps
        self.claims: list[NamespaceClaim] = []  # every namespace of the load (tenants'), then the features'
        self.namespace: NamespaceClaim | None = None  # the load's first, once all of the load's are claimed
        self.collector: TimelineCollector | None = None
        self.leaders: LeaderWatch | None = None
        self.barrier = ReadyBarrier(scenario, self.run_dir / "logs")
        self.nodes_ready = 0
        self.resources = ResourceSampler()
        self.schedule = LoadSchedule()
        self.faults = Faults(scenario, self.progress.log, self.errors)

    # ------------------------------------------------------------------------------------ helpers
    def _phase(self, name: str) -> None:
        now = time.time()
        if self.progress.phase not in ("starting",):
            self.timings[self.progress.phase] = round(now - self.t_phase, 3)
        self.t_phase = now
        self.progress.set_phase(name)

    def _check_alive(self) -> None:
        """Raise :class:`ComponentCrashed` when something the run needs has died (an agent that exits
        during the load is started again instead)."""
        if self.placement is not None:
            if self.times.load_start is None:  # before the load an agent that dies is a failed start
                dead = self.placement.agents.dead()
                if dead:
                    raise ComponentCrashed(dead)
            else:
                self.placement.agents.supervise(self.progress.log)
        why = (self.prom.exited() if self.prom is not None else None) or \
            (self.access.control_plane.problem() if self.access is not None else None)
        if why:
            raise ComponentCrashed(why)

    def _sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(min(0.5, max(0.0, end - time.monotonic())))
            self._check_alive()

    def _harness_pids(self) -> dict[str, int]:
        pids = self.placement.agents.pids() if self.placement is not None else {}
        return pids | (self.locust.pids() if self.locust is not None else {})

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

    # ------------------------------------------------------------------------------------ phases
    def _cluster(self) -> ClusterAccess:
        """The cluster up, the load's namespaces claimed, the features prepared."""
        self.access = access = self.cluster.up()
        for name, pid in access.started_pids.items():
            self.children.note(f"cluster:{name}", pid)
        for ns in self.sc.namespaces:
            self.claims.append(claim_namespace(session_for(access.endpoint, 1), access.endpoint.server, ns,
                                               self.run_id, log=self.progress.log))
        self.namespace = self.claims[0]
        for feature in self.hooks.prepare:
            feature.prepare(access.endpoint, access.real_nodes, self.claims)
        return access

    def _agents(self, access: ClusterAccess) -> Placement:
        """Watchers, then the placement's agents (after the node-ownership check) and Prometheus."""
        namespaces = self.sc.namespaces
        self.collector = TimelineCollector(access.endpoint, namespaces[0] if len(namespaces) == 1
                                           else list(namespaces), self.run_id)
        self.collector.start()
        for feature in self.hooks.timeline:
            feature.use_timeline(self.collector.timeline)
        self.leaders = LeaderWatch(access.endpoint)
        self.leaders.start()
        self.placement = placement = placement_for(PlacementSettings(
            self.sc, access.endpoint, access.kubeconfig, self.run_id, self.run_dir, self.children,
            self.progress.log, self._sleep, self.locust_processes, access.real_nodes))
        check_ownership(self.sc, session_for(access.endpoint, 1), access.endpoint.server)
        placement.start_agents(lambda ready, expected: self.progress.update(pods_ready=f"{ready}/{expected}"))
        if self.sc.measurements.prometheus:
            self.prom = placement.start_prometheus(access.metrics)
            self.times.prom_start = time.time()
        return placement

    def _barrier(self, access: ClusterAccess) -> None:
        """Every node of the pools Ready, then a scrape before the load."""

        def report(ready: int, expected: int) -> None:
            self.nodes_ready = ready
            self.progress.update(nodes_ready=f"{ready}/{expected}")

        try:
            self.barrier.wait(session_for(access.endpoint, 1), access.endpoint.server, self._sleep, report)
        finally:
            if self.barrier.retries:
                self.errors.append(f"Ready barrier: {len(self.barrier.retries)} transient apiserver error(s), "
                                   f"asked again (first: {self.barrier.retries[0]})")
        if self.prom is not None:
            health = self.prom.wait_scraped(30.0)
            if not all(h == "up" for h in health.values()):
                self.errors.append(f"Prometheus targets not all up before the load: {health}")
        self.times.window_start = time.time()
        self._sleep(2 * self.sc.measurements.scrape_interval_s + 0.5)  # a scrape before the load

    def _load(self, access: ClusterAccess, placement: Placement) -> None:
        """The arrival curve through the placement's Locust; faults and the features' events on time."""
        spec = self.run_dir / "loadspec.json"
        spec.write_text(json.dumps(self.sc.load.to_doc(), indent=2))
        ldir = self.run_dir / "locust"
        ldir.mkdir(exist_ok=True)
        self.locust = locust = placement.load_driver(spec, ldir)
        self.times.load_start = locust.start()
        self.resources.mark(self._harness_pids())
        watch = CreateFailureWatch(ldir / "locust", self.sc.measurements.abort_after_failed_creates)
        for feature in self.hooks.load_started:
            feature.load_started(self.schedule.at)
        self.faults.start(self.schedule, placement.agents, access.control_plane, self.hooks.faults,
                          self.collector.timeline if self.collector else None, access.endpoint)
        duration = self.sc.arrival.duration_s
        hard_stop = time.monotonic() + duration + 60
        while True:
            self._sleep(1.0)
            self._progress_tick()
            ended = locust.poll()
            failed = self.faults.excuse(watch.poll())
            if failed:
                locust.stop()
                self.times.load_end = time.time()
                raise LoadFailed(failed)
            if ended:
                break
            if time.monotonic() > hard_stop:
                self.progress.log("locust did not stop at the end of the curve; stopping it")
                locust.stop()
                break
        self.times.load_end = time.time()
        why = locust.finish(self.times.load_end - self.times.load_start, duration)
        if why:
            raise ComponentCrashed(why)

    def _settle(self) -> None:
        """Until every submitted workload object (and every feature's work) has finished, or a timeout."""
        assert self.collector is not None
        window = SettleWindow.after_load(self.times, self.sc.measurements.settle_timeout_s, self.sc.timeout_s)
        while window.is_open():
            c = self.collector.timeline.counts()
            if c["jobs"] and c["jobs_done"] >= c["jobs"] and all(f.settled() for f in self.hooks.settle):
                return
            self._sleep(1.0)
            self._progress_tick()
        c = self.collector.timeline.counts()
        self.errors.append(window.unfinished(c["jobs"] - c["jobs_done"], c["jobs"], time.monotonic() - window.opened))

    # ------------------------------------------------------------------------------------ gather
    def _gather(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
        prom = self.prom if self.prom is not None and self.prom.exited() is None else None
        access, placement = self.access, self.placement
        namespace = self.namespace
        facts = RunFacts(
            scenario=self.sc, run_id=self.run_id, run_dir=self.run_dir, t_start=self.times.start,
            t_end=self.times.end or time.time(), t_load_start=self.times.load_start, t_load_end=self.times.load_end,
            t_window_start=self.times.window_start, t_prom_start=self.times.prom_start,
            incomplete_reason=self.incomplete_reason, errors=self.errors,
            cluster=access.facts if access else ClusterFacts(profile=self.sc.cluster.profile),
            server=access.endpoint.server if access else None, nodes_ready=self.nodes_ready,
            agent_addresses=placement.agents.addresses if placement else [], locust_processes=self.locust_processes,
            agent_restarts=placement.agents.restarts if placement else [],
            leaders=self.leaders.report(self.times.load_start or self.times.start) if self.leaders else None,
            component_events=access.control_plane.events() if access else [],
            audit_log=access.control_plane.audit_log if access else None,
            faults=self.faults.entries, timings=self.timings,
            namespace={"name": namespace.name, "created_by_run": namespace.created,
                       "all": [{"name": c.name, "created_by_run": c.created} for c in self.claims]}
            if namespace else None,
            collector=self.collector, prometheus_url=prom.url if prom else None,
            prometheus_targets=prom.targets_health() if prom else {},
            harness=self.resources.usage(self._harness_pids()),
            placement=placement.summary_section() if placement else {},
            locust_workers=placement.locust_workers if placement else None,
        )
        summary, series, prom_series = assemble(facts)
        for feature in self.hooks.summary:
            feature.summarize(summary, self.times.load_start or self.times.start)
        return summary, series, prom_series

    # ------------------------------------------------------------------------------------ teardown
    def _teardown(self) -> None:
        """Stop and remove what the run made, newest first (the cluster last, and only if it made it)."""
        self.schedule.cancel()
        if self.locust is not None:
            self.locust.stop()
        if self.collector is not None:
            self.collector.stop(timeout_s=8)
        if self.leaders is not None:
            self.leaders.stop()
        if self.placement is not None:  # the agents delete their nodes
            self.errors += self.placement.stop()
        if self.access is not None:
            endpoint = self.access.endpoint
            for claim in reversed(self.claims):
                try:
                    release_namespace(session_for(endpoint, 1), endpoint.server, claim)
                except (requests.RequestException, RuntimeError) as exc:
                    self.errors.append(f"namespace cleanup failed ({claim.name}): {exc}")
        for feature in self.hooks.all:
            self.errors += feature.teardown()
        self.children.stop_all(grace_s=10)
        self.cluster.down()

    # ------------------------------------------------------------------------------------ main
    def run(self) -> int:
        """Every phase in order, then gather, report and teardown whatever happened; the exit code."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / "scenario.json").write_text(json.dumps(self.sc.to_dict(), indent=2, default=str))
        old_int = signal.getsignal(signal.SIGINT)
        old_term = signal.getsignal(signal.SIGTERM)

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            raise Interrupted(signal.Signals(signum).name)

        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        code = EXIT_INCOMPLETE
        with self.progress:
            try:
                self._phase("cluster")
                access = self._cluster()
                self.times.cluster_ready = time.time()
                self._phase("agents")
                placement = self._agents(access)
                self._phase("ready-barrier")
                self._barrier(access)
                self._phase("load")
                self._load(access, placement)
                self._phase("settle")
                self._settle()
                self.times.end = time.time()
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
                self._finish()
                signal.signal(signal.SIGINT, old_int)
                signal.signal(signal.SIGTERM, old_term)
        if self.summary.get("complete") and code != EXIT_INTERRUPTED:
            code = EXIT_CODES[state_of(self.summary)]
        return code

    def _finish(self) -> None:
        """Gather (Locust stopped first), teardown, then the report (with the teardown's errors) and ``latest``."""
        self._phase("gather")
        self.times.end = self.times.end or time.time()
        summary: dict[str, Any] | None = None
        series: dict[str, Any] = {}
        prom_series: dict[str, Any] | None = None
        try:
            if self.locust is not None:
                self.locust.stop()
            summary, series, prom_series = self._gather()
            finalize(summary, self.sc.slos, self.sc.measurements.allow_unfinished)
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
            summary = finalize({"run_id": self.run_id, "scenario": self.sc.name, "started_at": iso(self.times.start),
                                "duration_s": round(time.time() - self.times.start, 3), "complete": False,
                                "incomplete_reason": self.incomplete_reason or "gather failed",
                                "cluster": {}, "measurements": {}, "errors": self.errors}, self.sc.slos)
            series, prom_series = {}, None
        summary["timings"] = self.timings
        summary["errors"] = self.errors
        if self.placement is not None:  # the teardown's figures came after the report was assembled
            summary.update(self.placement.summary_section())
        write_report(self.run_dir, summary, series, prom_series, self.hooks.report)
        if self.point_latest:
            update_latest(self.out_root, self.run_dir)
        self.summary = summary
